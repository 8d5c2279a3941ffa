//! The `mcpwire` command line's rules as a user meets them: conflicts and
//! requirements refused before anything runs (exit 2, the flags named),
//! URLs refused with a reason and without their credentials, the
//! `--flag=value` forms, and the help of each subcommand.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// `mcpwire ARGS`: (exit code, stdout, stderr).
fn mcpwire(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args(args)
        .env_remove("MCPWIRE_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `mcpwire ARGS` refused as a usage error: exit 2, nothing on stdout,
/// and stderr (returned) saying each of `words`.
fn refused(args: &[&str], words: &[&str]) -> String {
    let (code, out, err) = mcpwire(args);
    assert_eq!(code, Some(2), "{args:?}: {out}{err}");
    assert!(out.is_empty(), "{args:?}: {out}");
    for word in words {
        assert!(err.contains(word), "{args:?}: no {word:?} in {err}");
    }
    err
}

#[test]
fn declared_conflicts_are_refused() {
    refused(
        &["serve", "--stdio", "--listen", "127.0.0.1:0"],
        &["'--stdio' cannot be used with", "--listen"],
    );
    refused(
        &["serve", "--stdio", "--allow-host", "example.test"],
        &["'--stdio' cannot be used with", "--allow-host"],
    );
    refused(
        &["call", "--stdio", "--serial", "/dev/null", "list"],
        &["cannot be used with", "--serial"],
    );
    refused(
        &[
            "call",
            "--server",
            "127.0.0.1:1",
            "http://127.0.0.1:1/mcp",
            "list",
        ],
        &["'--server <HOST:PORT>' cannot be used with '[URL]'"],
    );
    refused(
        &[
            "call",
            "http://127.0.0.1:1/mcp",
            "--http1",
            "--http2",
            "list",
        ],
        &["'--http1' cannot be used with '--http2'"],
    );
    // A transport's options with another transport.
    refused(
        &["call", "--tls", "--pass-env", "HOME", "list"],
        &["cannot be used with", "--tls"],
    );
    refused(
        &["call", "--stdio", "--http2", "list", "--", "/bin/true"],
        &["cannot be used with", "--stdio"],
    );
}

#[test]
fn declared_requirements_are_refused() {
    refused(
        &["serve", "--tls-cert", "cert.pem"],
        &["required arguments were not provided", "--tls-key <PEM>"],
    );
    refused(
        &["call", "--baud", "9600", "list"],
        &["required arguments were not provided", "--serial <DEVICE>"],
    );
    refused(
        &["call", "--pass-env", "HOME", "list"],
        &["required arguments were not provided", "--stdio"],
    );
    refused(
        &["call", "--http2", "list"],
        &["required arguments were not provided", "<URL>"],
    );
    refused(
        &["call", "--server", "127.0.0.1:1", "--era", "modern", "list"],
        &["required arguments were not provided", "--stdio"],
    );
    refused(
        &["call", "http://127.0.0.1:1/mcp"],
        &["requires a subcommand"],
    );
    // Across the request: --stdio and the command after `--`.
    refused(
        &["call", "--stdio", "list"],
        &["--stdio needs `-- /ABS/SERVER"],
    );
    refused(
        &["call", "list", "--", "/bin/true"],
        &["`-- /ABS/SERVER` goes with --stdio"],
    );
    refused(
        &["call", "--stdio", "list", "--", "bin/true"],
        &["must be an absolute path, not bin/true"],
    );
}

#[test]
fn bad_values_are_refused_with_a_reason() {
    refused(
        &["serve", "--listen", "localhost"],
        &["invalid value 'localhost' for '--listen <ADDR>'"],
    );
    refused(
        &["serve", "--tick-ms", "0"],
        &["a positive number of milliseconds"],
    );
    refused(
        &["serve", "--fixtures", "all"],
        &["[possible values: demo, conformance]"],
    );
    refused(&["serve", "--http-path", "mcp"], &["a path starts with /"]);
    refused(&["serve", "--token", ""], &["a token is not empty"]);
    refused(
        &["serve", "--token-file", "/nonexistent/tokens"],
        &["'--token-file <FILE>'", "No such file"],
    );
    refused(
        &["call", "--server", "h", "list"],
        &["a gRPC server is HOST:PORT"],
    );
    refused(
        &["call", "--timeout-ms", "soon", "list"],
        &["a number of milliseconds"],
    );
    refused(&["call", "tool", "echo", "{text"], &["'[JSON-ARGS]'"]);
    refused(
        &["call", "--era", "old", "--stdio", "list"],
        &["[possible values: probe, modern, legacy]"],
    );
}

#[test]
fn a_bad_url_is_refused_without_its_credentials() {
    refused(
        &["call", "ftp://example.test/x", "list"],
        &[
            "invalid URL ftp://example.test/x",
            "a URL is http://, https:// or grpc://HOST:PORT",
        ],
    );
    refused(&["call", "not a url", "list"], &["invalid URL not a url"]);
    for bad in [
        "grpc://u:secret@127.0.0.1:1",
        "grpc://127.0.0.1:1/path",
        "grpc://127.0.0.1",
    ] {
        let err = refused(&["call", bad, "list"], &["grpc://HOST:PORT"]);
        assert!(!err.contains("secret"), "{err}");
    }
    refused(
        &["conformance-client", "ftp://example.test/"],
        &["an http:// or https:// URL"],
    );
    // What hangs on the URL's scheme.
    refused(
        &["call", "http://127.0.0.1:1/mcp", "--typed", "list"],
        &["--typed goes with a gRPC server"],
    );
    refused(
        &["call", "http://127.0.0.1:1/mcp", "--tls", "list"],
        &["go with an https:// URL"],
    );
    refused(
        &["call", "grpc://127.0.0.1:1", "--http2", "list"],
        &["go with an http(s):// URL"],
    );
    refused(
        &["call", "--tls-server-name", "h", "list"],
        &["--tls-server-name goes with --tls, --tls-ca or an https:// URL"],
    );
}

/// A `mcpwire serve` child, killed when dropped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_equals_forms_are_taken() {
    let dir = std::env::temp_dir().join(format!("mcpwire-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "# the test's\nsecret-token tester\n").unwrap();
    let mut serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args([
                "serve",
                "--listen=127.0.0.1:0",
                "--tick-ms=50",
                "--fixtures=demo",
            ])
            .arg(format!("--token-file={}", tokens.display()))
            .args(["--http-path=/rpc", "--allow-host=example.test"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(serve.0.stderr.take().unwrap()).lines();
    let sentence = loop {
        let line = lines.next().expect("mcpwire serve ended").unwrap();
        if let Some(rest) = line.strip_prefix("listening on ") {
            break rest.to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    assert!(sentence.contains("Streamable HTTP at /rpc"), "{sentence}");
    assert!(sentence.contains("1 bearer token(s)"), "{sentence}");
    assert!(!sentence.contains("secret-token"), "{sentence}");
    let addr = sentence.split(' ').next().unwrap();

    let server = format!("--server={addr}");
    let call = |token: Option<&str>, args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpwire"));
        match token {
            Some(t) => command.env("MCPWIRE_TOKEN", t),
            None => command.env_remove("MCPWIRE_TOKEN"),
        };
        let out = command.arg("call").args(args).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let echo = ["tool", "echo", r#"{"text":"equals"}"#, "--timeout-ms=5000"];
    let (code, out, err) = call(
        Some("secret-token"),
        &[&[server.as_str()], &echo[..]].concat(),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("equals"), "{out}");
    // The same over Streamable HTTP, with -v; and without the token.
    let url = format!("http://{addr}/rpc");
    let (code, out, err) = call(
        Some("secret-token"),
        &[&[url.as_str(), "-v", "--http1"], &echo[..]].concat(),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(err.contains("over HTTP/1.1"), "{err}");
    let (code, _, err) = call(None, &[&[server.as_str()], &echo[..]].concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("UNAUTHENTICATED"), "{err}");
    drop(serve);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn each_subcommand_has_its_help() {
    let (code, out, _) = mcpwire(&["--help"]);
    assert_eq!(code, Some(0));
    for command in ["serve", "call", "bridge", "conformance-client"] {
        assert!(out.contains(command), "{out}");
    }
    let (code, out, _) = mcpwire(&["serve", "--help"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("--tick-ms <MS>") && out.contains("MCPWIRE_STATE_KEY"),
        "{out}"
    );
    let (code, out, _) = mcpwire(&["call", "tool", "--help"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("<NAME> [JSON-ARGS] [-- <SERVER>...]"), "{out}");
    // The bridge still reads its own words.
    let (code, out, _) = mcpwire(&["bridge", "--help"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("--stdio-host") && out.contains("--listen"),
        "{out}"
    );
    // No subcommand: the usage, on stderr, exit 2.
    let (code, out, err) = mcpwire(&[]);
    assert_eq!(code, Some(2));
    assert!(
        out.is_empty() && err.contains("Usage: mcpwire <COMMAND>"),
        "{err}"
    );
}

#[test]
fn the_readme_shows_the_help_as_it_is() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"));
    let readme = readme.unwrap();
    for args in [&["--help"][..], &["call", "--help"]] {
        let (code, out, _) = mcpwire(args);
        assert_eq!(code, Some(0));
        let shown = format!("$ mcpwire {}\n{out}", args.join(" "));
        assert!(
            readme.contains(&shown),
            "README.md lacks, as it is now:\n{shown}"
        );
    }
}
