//! The stdio client (`Client::stdio`) against real children:
//! `mcpwire serve --stdio`, and a Python script that misbehaves on request
//! (tests/stdio/misbehaving_server.py): it crashes mid-call, never answers,
//! ignores the end of its stdin, writes logs or a 10 MB line to stdout, or
//! speaks the 2025-11-25 lifecycle only.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::stdio::Era;
use mcpwire_tokio::client::stdio;
use mcpwire_tokio::{Call, Client, ServerCommand, Stopped, StreamMessage};
use serde_json::json;

/// The Python interpreter itself (not a shim, which needs the
/// environment the child does not get): `MCPWIRE_TEST_PYTHON`, else what
/// `python3` says it is.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("MCPWIRE_TEST_PYTHON") {
        return p.into();
    }
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed for these tests");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/stdio/misbehaving_server.py")
}

fn python_server(env: &[(&str, &str)]) -> stdio::Config {
    let mut command = ServerCommand::new(python()).arg(script());
    for (k, v) in env {
        command = command.env(*k, *v);
    }
    let mut config = stdio::Config::new(command);
    // The probe's wait includes the interpreter's start, which a busy
    // machine slows down: a probe that timed out would restart the child
    // into the older era.
    config.probe_timeout = Duration::from_secs(10);
    config
}

/// The Python server that crashes once (at its `crash` tool), the marker
/// file of that crash named `name`: the restarted child does not crash.
fn crashing_once(name: &str) -> (PathBuf, stdio::Config) {
    let marker = temp(name);
    let config = python_server(&[("CRASH_FILE", marker.to_str().unwrap())]);
    (marker, config)
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mcpwire-stdio-client-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&dir);
    dir
}

#[tokio::test]
async fn mcpwire_serve_stdio_is_modern_and_its_tools_answer_with_progress() {
    let command = ServerCommand::new(env!("CARGO_BIN_EXE_mcpwire")).args(["serve", "--stdio"]);
    let channel = Client::stdio(stdio::Config::new(command)).await.unwrap();
    let era = channel.era().unwrap().clone();
    assert_eq!(era.era, Era::Modern);
    assert_eq!(era.version, "2026-07-28");
    assert_eq!(era.fallback, None);
    let tools = channel.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    let r = channel
        .call_tool("echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "hi");
    let mut steps = Vec::new();
    let r = channel
        .call_tool_with_progress("progress", json!({"steps": 3, "delay_ms": 1}), |p| {
            steps.push(p.progress)
        })
        .await
        .unwrap();
    assert_eq!(r.text(), "done after 3 steps");
    assert_eq!(steps, [1.0, 2.0, 3.0]);
    // A tool error of the server is its JSON-RPC error.
    let e = channel.call_tool("nope", json!({})).await.unwrap_err();
    assert_eq!(e.rpc.unwrap().code, -32602);
    assert_eq!(channel.close().await.unwrap(), Stopped::Exited(Some(0)));
}

#[tokio::test]
async fn a_crash_mid_call_fails_the_call_and_the_next_call_works_after_the_restart() {
    let (marker, config) = crashing_once("crashed");
    let channel = Client::stdio(config).await.unwrap();
    let e = channel.call_tool("crash", json!({})).await.unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e}");
    assert!(e.message.contains("stdout closed"), "{e}");
    // The call after the crash waits for the new child.
    let r = channel
        .call_tool("echo", json!({"text": "again"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "again");
    assert_eq!(channel.reconnects().await, 1);
    let r = channel.call_tool("crash", json!({})).await.unwrap();
    assert_eq!(r.text(), "no crash this time");
    channel.close().await;
    let _ = std::fs::remove_file(marker);
}

#[tokio::test]
async fn a_call_never_answered_times_out_and_the_child_sees_notifications_cancelled() {
    let seen = temp("seen-cancel");
    let channel = Client::stdio(python_server(&[("SEEN_FILE", seen.to_str().unwrap())]))
        .await
        .unwrap();
    let started = Instant::now();
    let call = channel
        .call_with_timeout(
            json!({"method": "tools/call", "id": "h1", "params": {"name": "hang"}}),
            Some(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    let e = call.response().await.unwrap_err();
    assert_eq!(e.status, Code::DeadlineExceeded, "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(&seen).unwrap_or_default();
        if text.lines().any(|l| {
            l.contains("\"method\":\"notifications/cancelled\"")
                && l.contains("\"requestId\":\"h1\"")
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no notifications/cancelled: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The channel goes on.
    let r = channel
        .call_tool("echo", json!({"text": "still"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "still");
    channel.close().await;
    let _ = std::fs::remove_file(seen);
}

#[tokio::test]
async fn a_child_that_ignores_eof_and_sigterm_is_killed_within_the_bounds() {
    let mut config = python_server(&[("IGNORE_EOF", "1")]);
    config.close_wait = Duration::from_millis(300);
    config.term_wait = Duration::from_millis(300);
    let channel = Client::stdio(config).await.unwrap();
    let started = Instant::now();
    assert_eq!(channel.close().await.unwrap(), Stopped::Killed);
    let took = started.elapsed();
    // Both waits, then the kill: not a hang (the upper bound's margin is
    // for a busy machine).
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_secs(10),
        "{took:?}"
    );
    // A well-behaved child exits when its stdin closes.
    let channel = Client::stdio(python_server(&[])).await.unwrap();
    assert_eq!(channel.close().await.unwrap(), Stopped::Exited(Some(0)));
}

#[tokio::test]
async fn stdout_garbage_is_reported_and_the_channel_works() {
    let channel = Client::stdio(python_server(&[("GARBAGE", "1")]))
        .await
        .unwrap();
    let r = channel
        .call_tool("echo", json!({"text": "ok"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "ok");
    channel.close().await;
}

#[tokio::test]
async fn a_10_mb_line_over_the_limit_fails_its_call_and_the_next_call_works() {
    let mut config = python_server(&[]);
    config.max_line_bytes = 1 << 20;
    let channel = Client::stdio(config).await.unwrap();
    let started = Instant::now();
    let e = channel.call_tool("big", json!({})).await.unwrap_err();
    assert_eq!(e.status, Code::ResourceExhausted, "{e}");
    assert!(e.message.contains("over the client's line limit"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let r = channel
        .call_tool("echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "after");
    channel.close().await;
}

#[tokio::test]
async fn the_child_gets_only_the_environment_it_is_given() {
    let channel = Client::stdio(python_server(&[("MCPWIRE_TOKEN", "s3cret")]))
        .await
        .unwrap();
    let r = channel.call_tool("env", json!({})).await.unwrap();
    assert_eq!(r.text(), "MCPWIRE_TOKEN");
    channel.close().await;
}

#[tokio::test]
async fn a_legacy_server_gets_initialize_and_requests_without_meta() {
    let seen = temp("seen-legacy");
    let channel = Client::stdio(python_server(&[
        ("LEGACY", "1"),
        ("SEEN_FILE", seen.to_str().unwrap()),
    ]))
    .await
    .unwrap();
    let era = channel.era().unwrap().clone();
    assert_eq!(era.era, Era::Legacy);
    assert_eq!(era.version, "2025-11-25");
    assert!(era.fallback.unwrap().contains("method not found"));
    assert_eq!(era.probe_error, Some(-32601));
    assert!(!era.restarted_for_fallback);
    let r = channel
        .call_tool("echo", json!({"text": "old"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "old");
    channel.close().await;
    let text = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("server/discover"), "{lines:?}");
    assert!(lines[1].contains("\"method\":\"initialize\""), "{lines:?}");
    assert!(lines[2].contains("notifications/initialized"), "{lines:?}");
    assert!(
        lines[3].contains("tools/call") && !lines[3].contains("_meta"),
        "{lines:?}"
    );
    let _ = std::fs::remove_file(seen);
}

#[tokio::test]
async fn a_silent_probe_restarts_the_child_then_initializes() {
    let mut config = python_server(&[("SILENT_PROBE", "1")]);
    config.probe_timeout = Duration::from_millis(500);
    let channel = Client::stdio(config).await.unwrap();
    let era = channel.era().unwrap().clone();
    assert_eq!(era.era, Era::Legacy);
    assert!(era.restarted_for_fallback);
    assert!(era.fallback.unwrap().contains("no answer"));
    let r = channel
        .call_tool("echo", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "x");
    channel.close().await;
}

#[tokio::test]
async fn a_relative_executable_is_refused() {
    let e = Client::stdio(stdio::Config::new(ServerCommand::new("python3")))
        .await
        .unwrap_err();
    assert!(e.message.contains("absolute path"), "{e}");
}

/// The method of a notification on listen stream L1, which must carry its
/// subscription id.
fn listen_method(m: Option<StreamMessage>) -> String {
    match m {
        Some(StreamMessage::Notification(n)) => {
            assert_eq!(
                n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
                "L1"
            );
            n["method"].as_str().unwrap().to_owned()
        }
        other => panic!("{other:?}"),
    }
}

/// Opens listen stream L1 for tool list changes and reads its
/// acknowledgement and the server's first change.
async fn listen_for_tool_changes(channel: &Client) -> Call {
    let mut listen = channel
        .call(json!({"method": "subscriptions/listen", "id": "L1",
            "params": {"notifications": {"toolsListChanged": true}}}))
        .await
        .unwrap();
    assert_eq!(
        listen_method(listen.next().await.unwrap()),
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(
        listen_method(listen.next().await.unwrap()),
        "notifications/tools/list_changed"
    );
    listen
}

#[tokio::test]
async fn a_listen_stream_is_sent_again_to_the_restarted_child() {
    let (marker, config) = crashing_once("crashed-listen");
    let channel = Client::stdio(config).await.unwrap();
    let mut listen = listen_for_tool_changes(&channel).await;
    channel.call_tool("crash", json!({})).await.unwrap_err();
    // The same stream: the new child acknowledges the listen sent again.
    let next = tokio::time::timeout(Duration::from_secs(10), listen.next())
        .await
        .unwrap();
    assert_eq!(
        listen_method(next.unwrap()),
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(channel.reconnects().await, 1);
    drop(listen);
    channel.close().await;
    let _ = std::fs::remove_file(marker);
}

#[tokio::test]
async fn refusing_while_restarting_fails_new_calls_at_once_and_keeps_a_listen_stream() {
    let (marker, mut config) = crashing_once("crashed-refuse");
    config.refuse_while_restarting = true;
    // Long enough that "at once" (half of it) holds on a busy machine.
    config.restart.backoff = Duration::from_millis(4000);
    config.restart.max_restarts = 2;
    let channel = Client::stdio(config).await.unwrap();
    let mut listen = listen_for_tool_changes(&channel).await;
    channel.call_tool("crash", json!({})).await.unwrap_err();
    // Within the backoff: refused at once, saying why.
    let sent = tokio::time::Instant::now();
    let e = channel
        .call_tool("echo", json!({"text": "early"}))
        .await
        .unwrap_err();
    assert!(
        sent.elapsed() < Duration::from_millis(2000),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(e.status, Code::Unavailable, "{e}");
    assert!(
        e.message
            .contains("the server is restarting (attempt 1 of 2)"),
        "{e}"
    );
    // The listen stream is no new call: the new child acknowledges it.
    let next = tokio::time::timeout(Duration::from_secs(10), listen.next())
        .await
        .unwrap();
    assert_eq!(
        listen_method(next.unwrap()),
        "notifications/subscriptions/acknowledged"
    );
    let r = channel
        .call_tool("echo", json!({"text": "again"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "again");
    assert_eq!(channel.reconnects().await, 1);
    drop(listen);
    channel.close().await;
    let _ = std::fs::remove_file(marker);
}

/// This process's resident memory, in KiB.
fn own_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A child that stops reading its stdin while calls keep coming, each
/// given up by its caller: the lines waiting for the child stay within
/// `max_line_bytes` (the calls past it wait, and time out, unsent),
/// instead of every given-up call's line staying queued.
#[tokio::test]
async fn a_child_that_stops_reading_holds_a_bounded_backlog() {
    let mut config = python_server(&[("STOP_READING", "1")]);
    config.max_line_bytes = 2 << 20;
    let channel = Client::stdio(config).await.unwrap();
    let text = "x".repeat(1 << 20);
    let before = own_rss_kib();
    for i in 0..32 {
        let call = channel
            .call_with_timeout(
                json!({"jsonrpc": "2.0", "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": text}}}),
                Some(Duration::from_millis(50)),
            )
            .await
            .unwrap();
        let e = call.response().await.unwrap_err();
        assert_eq!(e.status, Code::DeadlineExceeded, "call {i}: {e}");
    }
    let grown = own_rss_kib().saturating_sub(before);
    // 32 MiB of lines were given up; at most 2 MiB (and the pipe's
    // 64 KiB) wait, plus what the allocator keeps of the calls' bodies.
    assert!(grown < 16 << 10, "grew by {grown} KiB");
    assert_eq!(channel.close().await.unwrap(), Stopped::Terminated);
}

/// Listen streams last as long as their callers keep them: at most half
/// of the child's call slots go to them, the next one is refused, and
/// calls still have their turn.
#[tokio::test]
async fn listen_streams_take_at_most_half_the_calls() {
    let channel = Client::stdio(python_server(&[])).await.unwrap();
    let listen = || {
        json!({"jsonrpc": "2.0", "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}}})
    };
    let mut streams = Vec::new();
    for i in 0..32 {
        let mut stream = channel.call(listen()).await.unwrap();
        match stream.next().await {
            Ok(Some(StreamMessage::Notification(n))) => assert_eq!(
                n["method"], "notifications/subscriptions/acknowledged",
                "listen {i}: {n}"
            ),
            other => panic!("listen {i}: {other:?}"),
        }
        streams.push(stream);
    }
    let e = channel.call(listen()).await.unwrap_err();
    assert_eq!(e.status, Code::ResourceExhausted, "{e}");
    assert!(e.message.contains("listen streams"), "{e}");
    let r = channel
        .call_tool("echo", json!({"text": "a turn"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "a turn");
    // One ends: the next listen is served.
    drop(streams.pop());
    let mut again = channel.call(listen()).await.unwrap();
    let ack = again.next().await;
    assert!(
        matches!(ack, Ok(Some(StreamMessage::Notification(_)))),
        "{ack:?}"
    );
    channel.close().await;
}
