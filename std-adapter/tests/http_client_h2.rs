//! [`Client::http`] over cleartext HTTP/2 with prior knowledge (`h2c`,
//! [`Http2Mode::Always`], the modern era chosen) against `mcpwire serve`'s app
//! in-process: lists, calls with progress, many calls at once on one
//! connection, cancellation by drop (RST_STREAM); `mcpwire call --http2`;
//! and scripted bad HTTP/2 peers on the reference `h2` crate: a stream
//! reset before the response, a stream refused unprocessed (sent again),
//! an HTML answer, an event stream reset after a notification, the code of
//! the reset that ends a dropped call or listen stream (CANCEL), a graceful
//! GOAWAY after each answer, an HTTP/1.1-only server; large requests and
//! answers through the flow-control windows.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::future::Future;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{Harness, eventually_every};
use mcpwire_core::grpc::Code;
use mcpwire_tokio::client::http::{Config as HttpConfig, EraChoice, Http2Mode};
use mcpwire_tokio::{Client, StreamMessage};
use serde_json::{Value, json};
use tokio::net::TcpListener;

async fn start() -> Harness {
    common::start_on_with_tick("127.0.0.1:0", Duration::from_secs(3600)).await
}

async fn h2c(addr: SocketAddr) -> Client {
    let mut config = modern(format!("http://{addr}/mcp"));
    config.http2 = Http2Mode::Always;
    config.request_timeout = Duration::from_secs(10);
    Client::http(config).await.unwrap()
}

/// The settings of a client of `url` that speaks the modern era without a
/// probe (the scripted peers answer only what a call sends).
fn modern(url: impl AsRef<str>) -> HttpConfig {
    let mut config = HttpConfig::new(url.as_ref()).unwrap();
    config.era = EraChoice::Modern;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_calls_with_progress_over_h2c() {
    let server = start().await;
    let ch = h2c(server.addr).await;
    let tools = ch.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    assert_eq!(
        ch.call_tool("echo", json!({"text": "hi"}))
            .await
            .unwrap()
            .text(),
        "hi"
    );
    let found: Value = ch
        .call_tool_typed("lookup", json!({"region": "eu", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(found, json!({"region": "eu", "limit": 2}));
    let mut seen = Vec::new();
    let done = ch
        .call_tool_with_progress("progress", json!({"steps": 3, "delay_ms": 0}), |p| {
            seen.push(p.progress)
        })
        .await
        .unwrap();
    assert_eq!(done.text(), "done after 3 steps");
    assert_eq!(seen, [1.0, 2.0, 3.0]);
    let mut call = ch
        .call(json!({"method": "tools/list", "params": {}}))
        .await
        .unwrap();
    while call.next().await.unwrap().is_some() {}
    let facts = call.http_facts().unwrap();
    assert_eq!(facts.http_version, Some("HTTP/2"));
    assert_eq!(facts.status, Some(200));
    // A JSON-RPC error is the one HTTP/1.1 gets.
    let e = ch.call_tool("no_such_tool", json!({})).await.unwrap_err();
    assert!(e.rpc.is_some(), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_calls_at_once_share_one_h2c_connection() {
    let server = start().await;
    let mut config = modern(format!("http://{}/mcp", server.addr));
    config.http2 = Http2Mode::Always;
    // A pool of one: over HTTP/1.1 the 24 sleeps would take 7 s.
    config.pool_size = 1;
    let ch = Client::http(config).await.unwrap();
    let started = std::time::Instant::now();
    let calls: Vec<_> = (0..48)
        .map(|i| {
            let ch = ch.clone();
            tokio::spawn(async move {
                if i % 2 == 0 {
                    ch.call_tool("counted_sleep", json!({"ms": 300}))
                        .await
                        .map(|r| r.text())
                } else {
                    ch.call_tool("echo", json!({"text": format!("n{i}")}))
                        .await
                        .map(|r| r.text())
                }
            })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let text = call.await.unwrap().unwrap();
        let want = if i % 2 == 0 {
            "slept".to_owned()
        } else {
            format!("n{i}")
        };
        assert_eq!(text, want);
    }
    // As streams of one connection they overlap.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_call_resets_its_stream_and_the_connection_goes_on() {
    let server = start().await;
    let ch = h2c(server.addr).await;
    // A call in flight on the same connection, untouched by the cancel.
    let other = {
        let ch = ch.clone();
        tokio::spawn(async move { ch.call_tool("counted_sleep", json!({"ms": 500})).await })
    };
    let request = json!({"method": "tools/call", "params": {"name": "counted_sleep",
        "arguments": {"ms": 10_000}}});
    let call = ch.call(request).await.unwrap();
    let c = Arc::clone(&server.counters);
    assert!(
        eventually_every(Duration::from_millis(20), Duration::from_secs(5), || {
            c.started.load(Ordering::SeqCst) == 2
        })
        .await,
        "the handlers never started"
    );
    drop(call);
    assert!(
        eventually_every(Duration::from_millis(20), Duration::from_secs(5), || {
            c.dropped.load(Ordering::SeqCst) == 1
        })
        .await,
        "the handler was not stopped"
    );
    assert_eq!(other.await.unwrap().unwrap().text(), "slept");
    assert_eq!(server.counters.finished.load(Ordering::SeqCst), 1);
    assert_eq!(
        ch.call_tool("echo", json!({"text": "after"}))
            .await
            .unwrap()
            .text(),
        "after"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_its_timeout_is_reset() {
    let server = start().await;
    let ch = h2c(server.addr).await;
    let request = json!({"method": "tools/call", "params": {"name": "counted_sleep",
        "arguments": {"ms": 10_000}}});
    let e = ch
        .call_with_timeout(request, Some(Duration::from_millis(200)))
        .await
        .unwrap()
        .response()
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::DeadlineExceeded, "{e}");
    let c = Arc::clone(&server.counters);
    assert!(
        eventually_every(Duration::from_millis(20), Duration::from_secs(5), || {
            c.dropped.load(Ordering::SeqCst) == 1
        })
        .await,
        "the handler was not stopped"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_speaks_h2c_with_http2() {
    let server = start().await;
    let url = format!("http://{}/mcp", server.addr);
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args(["call", &url, "--http2", "-v", "tool", "progress"])
            .arg(r#"{"steps":2,"delay_ms":0}"#)
            .arg("--progress")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("done after 2 steps"), "{stdout}");
    assert!(stderr.contains("progress 2"), "{stderr}");
    assert!(stderr.contains("over HTTP/2"), "{stderr}");
    server.stop().await;
}

// ----------------------------------------------------------------------
// Bad HTTP/2 peers
// ----------------------------------------------------------------------

/// What a scripted peer saw of a request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    mcp_method: Option<String>,
    mcp_name: Option<String>,
    body: Value,
}

/// An h2c server on the `h2` crate: each request (numbered from 0, body
/// read) is handed to `answer` with its response handle.
async fn h2_peer<F, Fut>(answer: F) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>)
where
    F: Fn(usize, Seen, h2::server::SendResponse<Bytes>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let answer = Arc::new(answer);
    let all = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (answer, count, all) = (Arc::clone(&answer), Arc::clone(&count), Arc::clone(&all));
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((req, respond))) = conn.accept().await {
                    let header =
                        |n: &str| req.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
                    let (path, mcp_method, mcp_name) = (
                        req.uri().path().to_owned(),
                        header("mcp-method"),
                        header("mcp-name"),
                    );
                    let mut body = req.into_body();
                    let mut data = Vec::new();
                    while let Some(chunk) = body.data().await {
                        let chunk = chunk.unwrap();
                        let _ = body.flow_control().release_capacity(chunk.len());
                        data.extend_from_slice(&chunk);
                    }
                    let seen = Seen {
                        path,
                        mcp_method,
                        mcp_name,
                        body: serde_json::from_slice(&data).unwrap_or(Value::Null),
                    };
                    all.lock().unwrap().push(seen.clone());
                    let n = count.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(answer(n, seen, respond));
                }
            });
        }
    });
    (addr, seen)
}

fn head(content_type: &str) -> http::Response<()> {
    http::Response::builder()
        .status(200)
        .header("content-type", content_type)
        .body(())
        .unwrap()
}

fn echo_call() -> Value {
    json!({"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_reset_before_the_response_fails_the_call() {
    let (addr, seen) = h2_peer(|_, _, mut respond| async move {
        respond.send_reset(h2::Reason::INTERNAL_ERROR);
    })
    .await;
    let ch = h2c(addr).await;
    let e = ch
        .call(echo_call())
        .await
        .unwrap()
        .response()
        .await
        .unwrap_err();
    // RST_STREAM(INTERNAL_ERROR) is INTERNAL, as on the tunnel.
    assert_eq!(e.status, Code::Internal, "{e}");
    assert!(
        e.message.contains("reset") && e.message.contains("INTERNAL_ERROR"),
        "{e}"
    );
    // What the peer saw: the mirrored headers, on the endpoint's path.
    let s = seen.lock().unwrap()[0].clone();
    assert_eq!(s.path, "/mcp");
    assert_eq!(s.mcp_method.as_deref(), Some("tools/call"));
    assert_eq!(s.mcp_name.as_deref(), Some("echo"));
    assert_eq!(s.body["params"]["arguments"]["text"], "x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_refused_unprocessed_is_sent_again() {
    let (addr, seen) = h2_peer(|n, seen, mut respond| async move {
        if n == 0 {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
            return;
        }
        let body = json!({"jsonrpc": "2.0", "id": seen.body["id"],
            "result": {"content": [{"type": "text", "text": "second"}]}});
        let mut send = respond
            .send_response(head("application/json"), false)
            .unwrap();
        send.send_data(Bytes::from(body.to_string()), true).unwrap();
    })
    .await;
    let r = h2c(addr)
        .await
        .call(echo_call())
        .await
        .unwrap()
        .response()
        .await
        .unwrap();
    assert_eq!(r["result"]["content"][0]["text"], "second", "{r}");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_answer_over_h2_is_an_error_that_shows_it() {
    let (addr, _) = h2_peer(|_, _, mut respond| async move {
        let mut send = respond.send_response(head("text/html"), false).unwrap();
        send.send_data(Bytes::from_static(b"<html>proxy login</html>"), true)
            .unwrap();
    })
    .await;
    let e = h2c(addr)
        .await
        .call(echo_call())
        .await
        .unwrap()
        .response()
        .await
        .unwrap_err();
    assert!(e.message.contains("text/html"), "{e}");
    assert!(e.message.contains("proxy login"), "{e}");
    assert_eq!(e.diagnostics.http_status, Some(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_reset_after_a_notification_fails_the_call() {
    let (addr, _) = h2_peer(|_, seen, mut respond| async move {
        let mut send = respond
            .send_response(head("text/event-stream"), false)
            .unwrap();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "t", "progress": 1}});
        send.send_data(
            Bytes::from(format!("event: message\ndata: {note}\n\n")),
            false,
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        send.send_reset(h2::Reason::INTERNAL_ERROR);
        let _ = seen;
    })
    .await;
    let mut call = h2c(addr).await.call(echo_call()).await.unwrap();
    match call.next().await.unwrap() {
        Some(StreamMessage::Notification(n)) => assert_eq!(n["params"]["progress"], 1),
        other => panic!("{other:?}"),
    }
    let e = call.next().await.unwrap_err();
    assert_eq!(e.status, Code::Internal, "{e}");
    assert!(e.message.contains("reset"), "{e}");
}

/// Issue #32 item 9: a dropped call and a dropped listen stream each reset
/// their stream with CANCEL (what tells a server over HTTP/2 that the
/// client cancelled), not with any code. The peer answers each with an
/// event stream and one event (a progress notification, or the listen
/// stream's acknowledgement), then records the code of the reset that
/// ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_and_a_dropped_listen_stream_are_reset_with_cancel() {
    type Ends = Arc<Mutex<Vec<(String, Option<h2::Reason>)>>>;
    let ends = Ends::default();
    let all = Arc::clone(&ends);
    let (addr, _) = h2_peer(move |_, seen, mut respond| {
        let all = Arc::clone(&all);
        async move {
            let method = seen.mcp_method.unwrap_or_default();
            let note = if method == "subscriptions/listen" {
                json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                    "params": {"notifications": {}, "_meta": {
                        "io.modelcontextprotocol/subscriptionId": seen.body["id"]}}})
            } else {
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": "t", "progress": 1}})
            };
            let mut send = respond
                .send_response(head("text/event-stream"), false)
                .unwrap();
            send.send_data(
                Bytes::from(format!("event: message\ndata: {note}\n\n")),
                false,
            )
            .unwrap();
            let reset = std::future::poll_fn(|cx| send.poll_reset(cx)).await;
            all.lock().unwrap().push((method, reset.ok()));
        }
    })
    .await;
    let ch = h2c(addr).await;
    let requests = [
        json!({"method": "tools/call", "params": {"name": "slow", "arguments": {},
            "_meta": {"progressToken": "t"}}}),
        json!({"method": "subscriptions/listen", "params": {"notifications": {}}}),
    ];
    for request in requests {
        let method = request["method"].as_str().unwrap().to_owned();
        let mut call = ch.call(request).await.unwrap();
        match call.next().await.unwrap() {
            Some(StreamMessage::Notification(_)) => {}
            other => panic!("{method}: {other:?}"),
        }
        drop(call);
        let e = Arc::clone(&ends);
        let m = method.clone();
        assert!(
            eventually_every(Duration::from_millis(10), Duration::from_secs(10), || {
                e.lock().unwrap().iter().any(|(name, _)| *name == m)
            })
            .await,
            "{method}: the peer saw no end"
        );
    }
    assert_eq!(
        *ends.lock().unwrap(),
        [
            ("tools/call".to_owned(), Some(h2::Reason::CANCEL)),
            ("subscriptions/listen".to_owned(), Some(h2::Reason::CANCEL)),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prior_knowledge_to_an_http1_only_server_fails_in_bounded_time() {
    // Answers whatever comes with an HTTP/1.1 400, as an HTTP/1.1-only
    // server does to the HTTP/2 preface, and closes.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&connections);
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut tcp, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = tcp.read(&mut buf).await;
                let _ = tcp
                    .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    let started = std::time::Instant::now();
    let e = h2c(addr)
        .await
        .call(echo_call())
        .await
        .unwrap()
        .response()
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e}");
    assert!(e.message.contains("HTTP/2 connection ended"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A few connections at most: it gives up rather than dialling on.
    let n = connections.load(Ordering::SeqCst);
    assert!((1..=4).contains(&n), "{n} connections");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_requests_and_answers_cross_the_flow_control_windows() {
    let server = start().await;
    let ch = h2c(server.addr).await;
    // 1.5 MiB each way, more than a stream's 1 MiB window; four at once,
    // more than the connection's 4 MiB.
    let calls: Vec<_> = (0..4u8)
        .map(|i| {
            let ch = ch.clone();
            tokio::spawn(async move {
                let text: String = std::iter::repeat_n(char::from(b'a' + i), 3 << 19).collect();
                let r = ch
                    .call_tool("echo", json!({"text": text.clone()}))
                    .await
                    .unwrap();
                r.text() == text
            })
        })
        .collect();
    for call in calls {
        assert!(call.await.unwrap());
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_graceful_goaway_the_next_call_opens_a_new_connection() {
    // Answers each request, then closes its connection gracefully (GOAWAY).
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    // Connections whose graceful close is done: the client acknowledged
    // the PING that follows the first GOAWAY, so it read that GOAWAY.
    let closed = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&connections);
    let done = Arc::clone(&closed);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let n = c.fetch_add(1, Ordering::SeqCst);
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                let mut conn = h2::server::handshake(tcp).await.unwrap();
                if let Some(Ok((req, mut respond))) = conn.accept().await {
                    let mut body = req.into_body();
                    let mut data = Vec::new();
                    while let Some(chunk) = body.data().await {
                        let chunk = chunk.unwrap();
                        let _ = body.flow_control().release_capacity(chunk.len());
                        data.extend_from_slice(&chunk);
                    }
                    let id = serde_json::from_slice::<Value>(&data).unwrap()["id"].clone();
                    let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"content":
                        [{"type": "text", "text": format!("connection {n}")}]}});
                    let mut send = respond
                        .send_response(head("application/json"), false)
                        .unwrap();
                    send.send_data(Bytes::from(answer.to_string()), true)
                        .unwrap();
                    conn.graceful_shutdown();
                }
                while let Some(Ok(_)) = conn.accept().await {}
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    let ch = h2c(addr).await;
    for n in 0..3 {
        let r = ch
            .call(echo_call())
            .await
            .unwrap()
            .response()
            .await
            .unwrap();
        assert_eq!(
            r["result"]["content"][0]["text"],
            format!("connection {n}"),
            "{r}"
        );
        // The GOAWAY has arrived before the next call is made: the
        // server's side of the connection ended (or, at worst, 10 s went by).
        eventually_every(Duration::from_millis(10), Duration::from_secs(10), || {
            closed.load(Ordering::SeqCst) > n
        })
        .await;
    }
    assert_eq!(connections.load(Ordering::SeqCst), 3);
}
