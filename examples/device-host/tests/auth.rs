//! The device app refuses to start without a bearer token unless told
//! `--no-auth`, and never takes a token on its command line (issue #32
//! item 7). Each case ends before the app opens its TAP device, so this
//! runs without root. The calls refused without the token and served with
//! it are `scripts/interop-embassy-host.sh`'s (grpc-js, curl).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

const APP: &str = env!("CARGO_BIN_EXE_mcpwire-device-host");

/// Runs the app with `args` and `token` as MCPWIRE_DEVICE_TOKEN (unset
/// when `None`), on a TAP device whose name Linux refuses (a `/`), even to
/// root, should it get that far.
fn run(args: &[&str], token: Option<&str>) -> Output {
    let mut c = Command::new(APP);
    c.args(["--tap", "no/such-tap"])
        .args(args)
        .env_remove("MCPWIRE_DEVICE_TOKEN");
    if let Some(t) = token {
        c.env("MCPWIRE_DEVICE_TOKEN", t);
    }
    c.output().unwrap()
}

/// The app exited 2 (a usage error) before opening the TAP device, and its
/// stderr holds `want`.
fn refused(out: &Output, want: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(want), "want {want:?} in {stderr}");
    assert!(!stderr.contains("TAP"), "{stderr}");
}

#[test]
fn without_a_token_or_no_auth_the_app_does_not_start() {
    let out = run(&[], None);
    refused(&out, "a bearer token is needed: set MCPWIRE_DEVICE_TOKEN");
    refused(&out, "--no-auth");
    // An empty variable is no token.
    refused(&run(&[], Some("")), "a bearer token is needed");
}

#[test]
fn a_token_on_the_command_line_is_refused() {
    let out = run(&["--token", "secret-on-the-command-line"], None);
    refused(&out, "process list");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("secret-on-the-command-line"));
}

#[test]
fn a_token_and_no_auth_together_are_refused() {
    refused(
        &run(&["--no-auth"], Some("t0ken")),
        "either a token or --no-auth",
    );
}

#[test]
fn a_token_file_must_hold_a_token() {
    let dir = std::env::temp_dir().join(format!("mcpwire-device-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty");
    std::fs::write(&empty, "# no token here\n\n").unwrap();
    let empty = empty.to_str().unwrap();
    refused(&run(&["--token-file", empty], None), "no token");
    let missing = dir.join("missing");
    refused(
        &run(&["--token-file", missing.to_str().unwrap()], None),
        "--token-file",
    );
    let spaced = dir.join("spaced");
    std::fs::write(&spaced, "ok-token\n\u{7f}bad\n").unwrap();
    refused(
        &run(&["--token-file", spaced.to_str().unwrap()], None),
        "visible ASCII",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With a token, from the environment or a file, or with `--no-auth`, the
/// app goes on to its TAP device (which cannot be opened): it took them.
#[test]
fn with_a_token_or_no_auth_the_app_goes_on_to_its_tap_device() {
    let dir = std::env::temp_dir().join(format!("mcpwire-device-host-ok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens");
    std::fs::write(&file, "# the host\nt0ken host\nother-t0ken\n").unwrap();
    for out in [
        run(&[], Some("t0ken")),
        run(&["--token-file", file.to_str().unwrap()], None),
        run(&["--no-auth"], None),
    ] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("cannot open TAP device"), "{stderr}");
        assert!(!stderr.contains("t0ken"), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tap_name_linux_cannot_take_is_a_usage_error() {
    let out = Command::new(APP)
        .args(["--no-auth", "--tap", "sixteen-octets-x"])
        .output()
        .unwrap();
    refused(&out, "at most 15 octets");
}
