//! [`Client::http`] over `https://` (the era probed) against `mcpwire serve`'s app in-process
//! with TLS (a throwaway CA), over HTTP/1.1 (ALPN `http/1.1`) and over
//! HTTP/2 (ALPN `h2`, the default when the server selects it): lists,
//! calls with progress, cancellation by drop, many calls at once; the CA
//! and the server name are checked (an unknown CA and a wrong name fail
//! the handshake), and `mcpwire call https://...` with `--tls-ca`,
//! `--tls-server-name` and `--http1`.
#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Counters, Harness, eventually_every};
use mcpwire_core::grpc::Code;
use mcpwire_tokio::client::http::{Config as HttpConfig, Http2Mode};
use mcpwire_tokio::{Client, ClientTlsConfig, Server};
use serde_json::json;

use common::certificates;

/// The demo app (plus `counted_sleep`) over TLS on 127.0.0.1:0, and the
/// CA that signed its certificate.
async fn tls_server() -> (Harness, String) {
    let (ca, chain, key) = certificates();
    let server = Server::bind_tls("127.0.0.1:0", chain.as_bytes(), key.as_bytes())
        .await
        .unwrap();
    let counters = Arc::new(Counters::default());
    let app = common::app(&counters, Duration::from_secs(3600));
    (common::serve(server, app, counters), ca)
}

/// HTTP/1.1 over TLS.
fn config(url: String, ca: &str) -> HttpConfig {
    let mut config = HttpConfig::new(&url).unwrap();
    config.http2 = Http2Mode::Never;
    config.tls = Some(ClientTlsConfig::with_pem_roots(ca.as_bytes()).unwrap());
    config
}

fn https(addr: SocketAddr) -> String {
    format!("https://{addr}/mcp")
}

async fn lists_and_calls_with_progress(ch: &Client, version: &str) {
    let mut call = ch
        .call(json!({"method": "tools/list", "params": {}}))
        .await
        .unwrap();
    while call.next().await.unwrap().is_some() {}
    assert_eq!(call.http_facts().unwrap().http_version, Some(version));
    let tools = ch.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    let echoed = ch.call_tool("echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(echoed.text(), "hi");
    let mut seen = Vec::new();
    let done = ch
        .call_tool_with_progress("progress", json!({"steps": 3, "delay_ms": 0}), |p| {
            seen.push(p.progress)
        })
        .await
        .unwrap();
    assert_eq!(done.text(), "done after 3 steps");
    assert_eq!(seen, [1.0, 2.0, 3.0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_calls_over_https_by_ip_and_by_name() {
    let (server, ca) = tls_server().await;
    let ch = Client::http(config(https(server.addr), &ca)).await.unwrap();
    lists_and_calls_with_progress(&ch, "HTTP/1.1").await;
    // localhost, as the name to verify, for an address by IP.
    let mut by_name = config(https(server.addr), &ca);
    by_name.tls = by_name.tls.map(|t| t.server_name("localhost"));
    let ch = Client::http(by_name).await.unwrap();
    assert_eq!(
        ch.call_tool("echo", json!({"text": "n"}))
            .await
            .unwrap()
            .text(),
        "n"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_selecting_h2_makes_every_call_a_stream_of_one_connection() {
    let (server, ca) = tls_server().await;
    let mut cfg = HttpConfig::new(&https(server.addr)).unwrap();
    cfg.tls = Some(ClientTlsConfig::with_pem_roots(ca.as_bytes()).unwrap());
    assert_eq!(cfg.http2, Http2Mode::Alpn);
    cfg.pool_size = 1;
    let ch = Client::http(cfg).await.unwrap();
    lists_and_calls_with_progress(&ch, "HTTP/2").await;
    // With a pool of one, 24 calls of 300 ms run at once: over HTTP/1.1
    // they would take 7 s.
    let started = std::time::Instant::now();
    let calls: Vec<_> = (0..24)
        .map(|_| {
            let ch = ch.clone();
            tokio::spawn(async move {
                ch.call_tool("counted_sleep", json!({"ms": 300}))
                    .await
                    .map(|r| r.text())
            })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), "slept");
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(server.counters.finished.load(Ordering::SeqCst), 24);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_ca_or_a_wrong_name_fails_the_handshake() {
    let (server, _ca) = tls_server().await;
    let (other_ca, _, _) = certificates();
    // The probe is the first exchange: its failure is the client's.
    let e = Client::http(config(https(server.addr), &other_ca))
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e}");
    assert!(e.message.contains("TLS"), "{e}");
    let (server2, ca) = tls_server().await;
    let mut wrong = config(https(server2.addr), &ca);
    wrong.tls = wrong.tls.map(|t| t.server_name("example.com"));
    let e = Client::http(wrong).await.unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e}");
    assert!(e.message.contains("TLS"), "{e}");
    server.stop().await;
    server2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_call_over_https_stops_the_work() {
    let (server, ca) = tls_server().await;
    for mode in [Http2Mode::Never, Http2Mode::Alpn] {
        let mut cfg = config(https(server.addr), &ca);
        cfg.http2 = mode;
        drop_a_call_and_see_the_work_stop(&server, &Client::http(cfg).await.unwrap()).await;
    }
    server.stop().await;
}

/// Starts a 10 s `counted_sleep`, drops it once started, sees the handler
/// dropped (not finished), and the channel still answers.
async fn drop_a_call_and_see_the_work_stop(server: &Harness, ch: &Client) {
    let before = server.counters.started.load(Ordering::SeqCst);
    let dropped = server.counters.dropped.load(Ordering::SeqCst);
    let request = json!({"method": "tools/call", "params": {"name": "counted_sleep",
        "arguments": {"ms": 10_000}}});
    let call = ch.call(request).await.unwrap();
    let c = Arc::clone(&server.counters);
    assert!(
        eventually_every(Duration::from_millis(20), Duration::from_secs(5), || {
            c.started.load(Ordering::SeqCst) == before + 1
        })
        .await,
        "the handler never started"
    );
    drop(call);
    assert!(
        eventually_every(Duration::from_millis(20), Duration::from_secs(5), || {
            c.dropped.load(Ordering::SeqCst) == dropped + 1
        })
        .await,
        "the handler was not stopped"
    );
    assert_eq!(server.counters.finished.load(Ordering::SeqCst), 0);
    assert_eq!(
        ch.call_tool("echo", json!({"text": "after"}))
            .await
            .unwrap()
            .text(),
        "after"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_calls_at_once_over_https_http1() {
    let (server, ca) = tls_server().await;
    let mut cfg = config(https(server.addr), &ca);
    cfg.pool_size = 4;
    let ch = Client::http(cfg).await.unwrap();
    let calls: Vec<_> = (0..32)
        .map(|i| {
            let ch = ch.clone();
            tokio::spawn(
                async move { ch.call_tool("echo", json!({"text": format!("n{i}")})).await },
            )
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap().text(), format!("n{i}"));
    }
    server.stop().await;
}

/// `mcpwire call ARGS...`: (exit code, stdout, stderr).
fn mcpwire_call(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .arg("call")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_calls_an_https_url_with_a_ca_file_and_a_server_name() {
    let (server, ca) = tls_server().await;
    let dir = std::env::temp_dir().join(format!("mcpwire-https-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let ca_path = ca_file.to_str().unwrap().to_owned();
    let url = https(server.addr);
    let (u, ca_arg) = (url.clone(), ca_path.clone());
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        mcpwire_call(&[
            &u,
            "--tls-ca",
            &ca_arg,
            "-v",
            "tool",
            "echo",
            r#"{"text":"cli"}"#,
        ])
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("cli"), "{out}");
    assert!(err.contains("over HTTP/2"), "{err}");
    let url_by_name = format!("https://localhost:{}/mcp", server.addr.port());
    let (u, ca_arg) = (url_by_name, ca_path.clone());
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        mcpwire_call(&[
            &u,
            "--tls-ca",
            &ca_arg,
            "--tls-server-name",
            "localhost",
            "--http1",
            "-v",
            "list",
        ])
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("echo"), "{out}");
    assert!(err.contains("over HTTP/1.1"), "{err}");
    // Without the CA (the platform's store does not know it): refused.
    let u = url.clone();
    let (code, out, err) =
        tokio::task::spawn_blocking(move || mcpwire_call(&[&u, "tool", "echo", "{}"]))
            .await
            .unwrap();
    assert_ne!(code, Some(0), "{out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
    server.stop().await;
}
