//! Our HTTP/2 connection against real peers, as processes on 127.0.0.1:
//! Python h2 (client and server), nghttp, nghttpd and curl.
//!
//! Tools come from the environment: `MCPWIRE_PYTHON` (a venv Python with
//! h2 4.4.1), and `nghttp`, `nghttpd`, `curl` on PATH. A test whose tool is
//! missing prints `SKIPPED: <tool> not found` and passes, unless
//! `MCPWIRE_REQUIRE_PEERS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Peer, free_port, listening_port, on_path, our_server, require, run, wait_listening};

const LIMIT: Duration = Duration::from_secs(60);

/// Our `h2-client` binary.
fn h2_client(args: &[&str]) -> common::Output {
    run(
        Command::new(env!("CARGO_BIN_EXE_h2-client")).args(args),
        LIMIT,
    )
}

fn assert_ok_line(out: &common::Output, want: &str, what: &str) {
    out.assert_success(what);
    let stdout = out.stdout_text();
    assert!(
        stdout.lines().any(|l| l == want),
        "{what}: expected a line {want:?}, got:\n{stdout}"
    );
    println!("{what}: {want}");
}

/// Runs `tests/peers/h2_client.py` against our server.
fn python_client(args: &[&str]) -> Option<common::Output> {
    let python = common::python_with_h2();
    let python = match python {
        Some(p) => p,
        None if common::peers_required() => {
            panic!("python with h2 (MCPWIRE_PYTHON) not found, and MCPWIRE_REQUIRE_PEERS=1")
        }
        None => {
            println!("SKIPPED: python with h2 (MCPWIRE_PYTHON) not found");
            return None;
        }
    };
    let (_server, port) = our_server(&[]);
    Some(run(
        Command::new(python)
            .arg(common::peer_script("h2_client.py"))
            .arg(port.to_string())
            .args(args)
            .args(["--timeout", "15"]),
        LIMIT,
    ))
}

#[test]
fn python_h2_client_uploads_to_our_server() {
    // 3 MiB each way through h2's 65,535-octet windows and our 1 MiB one.
    let Some(out) = python_client(&["--upload", "3145728", "--streams", "0"]) else {
        return;
    };
    assert_ok_line(&out, "ok upload 3145728", "python h2 client, 3 MiB echo");
}

#[test]
fn python_h2_client_many_streams_to_our_server() {
    // 100 streams opened at once; their echoes wait on one 65,535-octet
    // connection window, so many streams are blocked at the same time.
    let Some(out) = python_client(&[
        "--upload",
        "0",
        "--streams",
        "100",
        "--stream-bytes",
        "20000",
    ]) else {
        return;
    };
    assert_ok_line(
        &out,
        "ok concurrent 100 streams 2000000",
        "python h2 client, 100 concurrent streams",
    );
}

#[test]
fn our_client_against_python_h2_server() {
    let python = require!(common::python_with_h2(), "python with h2 (MCPWIRE_PYTHON)");
    // Port 0: the server binds a port of its own choosing (one picked here
    // and freed could be taken before it binds) and prints it.
    let mut server = Peer::spawn(
        "python h2 server",
        Command::new(python)
            .arg(common::peer_script("h2_server.py"))
            .arg("0")
            .stdout(std::process::Stdio::piped()),
    );
    let port = listening_port(&mut server).to_string();
    // Both ways beyond the windows: Python's 65,535 and our 1 MiB.
    let out = h2_client(&[&port, "post", "/echo", "3145728"]);
    assert_ok_line(&out, "ok 3145728", "our client, 3 MiB echo from python h2");
    let out = h2_client(&[&port, "get", "/big/300000", "--expect-len", "300000"]);
    assert_ok_line(&out, "ok 300000", "our client, download from python h2");
    let out = h2_client(&[&port, "post", "/echo", "10000", "--streams", "20"]);
    assert_ok_line(&out, "ok 200000", "our client, 20 streams to python h2");
}

/// Sums the `length=` of the DATA frames nghttp received, from its `-v` trace.
fn nghttp_data_received(trace: &str) -> usize {
    trace
        .lines()
        .filter(|l| l.contains("recv DATA frame"))
        .filter_map(|l| l.split("length=").nth(1))
        .filter_map(|l| l.split(',').next())
        .filter_map(|n| n.parse::<usize>().ok())
        .sum()
}

fn assert_clean_nghttp_trace(trace: &str, what: &str) {
    for bad in ["recv RST_STREAM", "recv GOAWAY"] {
        assert!(
            !trace.contains(bad),
            "{what}: nghttp saw {bad}:\n{}",
            common::tail(trace, 4000)
        );
    }
    assert!(
        trace.contains(":status: 200"),
        "{what}: no status 200 in the trace:\n{}",
        common::tail(trace, 4000)
    );
}

#[test]
fn nghttp_against_our_server() {
    let nghttp = require!(on_path("nghttp"), "nghttp");
    let dir = common::scratch("nghttp");
    let size = 5 << 20;
    let body = common::random_body(size);
    let file = dir.join("body.bin");
    std::fs::write(&file, &body).expect("write body");
    let (_server, port) = our_server(&[]);
    let url = format!("http://127.0.0.1:{port}/echo");

    // Small windows on nghttp's side (2^16-1): our sending waits for them.
    let out = run(
        Command::new(&nghttp)
            .args(["-v", "-n", "--no-dep", "-w", "16", "-W", "16", "-d"])
            .arg(&file)
            .arg(&url),
        LIMIT,
    );
    out.assert_success("nghttp -v --no-dep -w 16 -W 16");
    let trace = out.stdout_text();
    assert_clean_nghttp_trace(&trace, "nghttp with small windows");
    assert_eq!(
        nghttp_data_received(&trace),
        size,
        "nghttp with small windows: DATA octets received"
    );
    println!("nghttp -w 16 -W 16: {size} octets echoed");

    // Default options: PRIORITY frames on the idle streams 3..11 first, the
    // request on stream 13; the echo goes to stdout.
    let out = run(Command::new(&nghttp).arg("-d").arg(&file).arg(&url), LIMIT);
    out.assert_success("nghttp (PRIORITY on idle streams)");
    assert!(
        out.stdout == body,
        "nghttp: echo of {} octets differs from the {size} sent",
        out.stdout.len()
    );
    let out = run(
        Command::new(&nghttp)
            .args(["-v", "-n"])
            .arg(format!("http://127.0.0.1:{port}/")),
        LIMIT,
    );
    out.assert_success("nghttp -v GET /");
    let trace = out.stdout_text();
    assert!(
        trace.contains("send PRIORITY frame") && trace.contains("stream_id=13"),
        "nghttp did not send PRIORITY on idle streams:\n{trace}"
    );
    assert_clean_nghttp_trace(&trace, "nghttp GET / after PRIORITY");
    assert_eq!(
        nghttp_data_received(&trace),
        mcpwire_interop::echo::HELLO.len()
    );
    println!("nghttp default PRIORITY frames: {size} octets echoed, GET / ok");
}

#[test]
fn our_client_against_nghttpd() {
    let nghttpd = require!(on_path("nghttpd"), "nghttpd");
    let dir = common::scratch("nghttpd");
    let size = 1_500_000;
    let file = dir.join("file.bin");
    std::fs::write(&file, common::random_body(size)).expect("write file");
    let port = free_port();
    let mut server = Peer::spawn(
        "nghttpd",
        Command::new(nghttpd)
            .args(["--no-tls", "-a", "127.0.0.1", "-d"])
            .arg(&dir)
            .arg(port.to_string())
            .stdout(std::process::Stdio::null()),
    );
    wait_listening(port, &mut server);
    // nghttpd ignores request bodies: a download is what shows flow control
    // (1.5 MB through our 1 MiB stream window).
    let file = file.to_string_lossy().into_owned();
    let out = h2_client(&[&port.to_string(), "get", "/file.bin", "--expect", &file]);
    assert_ok_line(
        &out,
        &format!("ok {size}"),
        "our client, download from nghttpd",
    );
}

#[test]
fn curl_post_to_our_server() {
    let curl = require!(on_path("curl"), "curl");
    let dir = common::scratch("curl");
    let size = 2 << 20;
    let body = common::random_body(size);
    let file = dir.join("body.bin");
    let echo = dir.join("echo.bin");
    std::fs::write(&file, &body).expect("write body");
    let (_server, port) = our_server(&[]);
    let out = run(
        Command::new(curl)
            .args(["-sS", "--http2-prior-knowledge"])
            .args(["-H", "content-type: application/x-mcpwire-test"])
            .arg("--data-binary")
            .arg(format!("@{}", file.display()))
            .arg("-o")
            .arg(&echo)
            .args(["-w", "%{http_code} %{http_version} %{content_type}"])
            .arg(format!("http://127.0.0.1:{port}/echo")),
        LIMIT,
    );
    out.assert_success("curl --http2-prior-knowledge");
    assert_eq!(
        out.stdout_text(),
        "200 2 application/x-mcpwire-test",
        "curl: status, HTTP version, content-type"
    );
    let got = std::fs::read(&echo).expect("read echo");
    assert!(
        got == body,
        "curl: echo of {} octets differs from the {size} sent",
        got.len()
    );
    println!("curl: {size} octets echoed");
}
