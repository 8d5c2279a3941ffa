//! `mcpwire bridge`'s command line as a user meets it: what it refuses
//! (exit status 2, clap's words naming the flags), `--x=v` forms, and the
//! generated help. The bridge itself: tests/bridge.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

fn bridge(line: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .arg("bridge")
        .args(line.split_whitespace())
        .env_remove("MCPWIRE_TOKEN")
        .output()
        .unwrap()
}

#[test]
fn the_command_line_names_one_host_side_and_one_server_side() {
    // Each refused before anything starts, with the words that say why.
    const REFUSED: &str = "
        cannot be used with|--stdio-host --serial /dev/ttyS0 --to http://127.0.0.1:1/mcp
        cannot be used with|--stdio-host --serial /dev/ttyS0 -- /bin/s
        cannot be used with|--stdio-host --to http://127.0.0.1:1/mcp -- /bin/s
        cannot be used with|--stdio-host --listen 8080 --no-auth --to http://127.0.0.1:1/mcp
        cannot be used with|--listen 8080 --no-auth --token-file TOKENS --to http://127.0.0.1:1/mcp
        cannot be used with|--stdio-host --restart-max 2 --to http://127.0.0.1:1/mcp
        cannot be used with|--stdio-host --restart-window-ms=100 --to grpc://127.0.0.1:1
        cannot be used with|--stdio-host --baud 9600 --to http://127.0.0.1:1/mcp
        cannot be used with|--stdio-host --serial /dev/ttyS0 --pass-env HOME
        cannot be used with|--stdio-host --pass-env HOME --to grpc://127.0.0.1:1
        --stdio-host|--to http://127.0.0.1:1/mcp
        --listen|--no-auth --to http://127.0.0.1:1/mcp
        cannot be used with|--stdio-host --http-path /x --to http://127.0.0.1:1/mcp
        --to|--stdio-host
        --token-file|--listen 8080 --to http://127.0.0.1:1/mcp
        cannot be used with|--stdio-host --no-auth --to http://127.0.0.1:1/mcp
        --tls-key|--listen 1 --no-auth --tls-cert c.pem --to http://127.0.0.1:1/mcp
        bad --baud|--stdio-host --serial /dev/ttyS0 --baud fast
        bad --baud|--stdio-host --serial /dev/ttyS0 --baud=0
        --timeout-ms|--stdio-host --timeout-ms soon --to http://127.0.0.1:1/mcp
        --restart-window-ms|--stdio-host --restart-window-ms 0 -- /bin/s
        http://, https:// or grpc://|--stdio-host --to ftp://127.0.0.1/x
        no credentials|--stdio-host --to grpc://u:p@127.0.0.1:1
        no path|--stdio-host --to grpc://127.0.0.1:1/path
        grpc://HOST:PORT|--stdio-host --to grpc://127.0.0.1
        relative URL|--stdio-host --to 127.0.0.1:1
        starts with /|--listen 1 --no-auth --http-path mcp --to http://127.0.0.1:1/mcp
        absolute path, not server|--stdio-host -- server
        process list|--listen 8080 --token secret --to http://127.0.0.1:1/mcp
        process list|--listen 8080 --token=secret --to http://127.0.0.1:1/mcp
        unexpected argument|--stdio-host --to http://127.0.0.1:1/mcp --frobnicate";
    // A token file that reads well: the refusal is the flags' conflict.
    let tokens = std::env::temp_dir().join(format!("mcpwire-bridge-cli-{}", std::process::id()));
    std::fs::write(&tokens, "a-token\n").unwrap();
    for case in REFUSED.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (why, line) = case.split_once('|').unwrap();
        let line = line.replace("TOKENS", &tokens.to_string_lossy());
        let out = bridge(&line);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{line}: {err}");
        assert!(err.contains(why), "{line}: {err}");
        assert!(out.stdout.is_empty(), "{line}");
    }
    let _ = std::fs::remove_file(&tokens);
}

#[test]
fn help_names_every_flag() {
    let out = bridge("--help");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--stdio-host",
        "--listen",
        "--token-file",
        "--no-auth",
        "--tls-cert",
        "--tls-key",
        "--allow-host",
        "--http-path",
        "--to",
        "--serial",
        "--baud",
        "--pass-env",
        "--restart-max",
        "--restart-window-ms",
        "--restart-backoff-ms",
        "--timeout-ms",
        "--keepalive-ms",
        "/ABS/SERVER",
        "MCPWIRE_TOKEN",
    ] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
    // The refused flag is not offered.
    assert!(!help.contains("--token <"), "{help}");
}

#[test]
fn a_bare_port_listens_on_loopback_and_flags_take_their_value_after_an_equals_sign() {
    // The server is not there: the bridge starts all the same (a gRPC
    // client connects at its first call), and says so.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args(["bridge", "--listen=0", "--no-auth", "--keepalive-ms=0"])
        .args(["--timeout-ms=100", "--to=grpc://127.0.0.1:1"])
        .env_remove("MCPWIRE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        let done = line.contains(": host side ");
        said.push(line);
        if done {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let startup = said.last().unwrap();
    assert!(
        startup.contains("host side 127.0.0.1:")
            && startup.contains("server side gRPC tunnel grpc://127.0.0.1:1 "),
        "{said:?}"
    );
    assert!(
        said.iter().any(|l| l.contains("warning: --no-auth")),
        "{said:?}"
    );
}
