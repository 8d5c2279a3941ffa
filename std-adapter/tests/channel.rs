//! The tokio `Channel` against the demo server in-process (127.0.0.1:0),
//! and against the grpcio reference server `tests/grpc/ref_server.py`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Harness, eventually_every, start_on_with_tick};
use mcpwire_core::grpc::Code;
use mcpwire_tokio::{Channel, ChannelConfig, Message, Server, demo};
use serde_json::{Value, json};

async fn start_on(addr: &str) -> Harness {
    start_on_with_tick(addr, Duration::from_secs(3600)).await
}

async fn start() -> Harness {
    start_on("127.0.0.1:0").await
}

async fn tool(channel: &Channel, name: &str, arguments: Value) -> Value {
    channel
        .request("tools/call", json!({"name": name, "arguments": arguments}))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

async fn eventually(limit: Duration, f: impl Fn() -> bool) -> bool {
    eventually_every(Duration::from_millis(10), limit, f).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_over_the_channel() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    let r = channel.request("server/discover", json!({})).await.unwrap();
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(
        r["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_is_cached() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    let r = channel.request("tools/list", json!({})).await.unwrap();
    let tools = r["result"]["tools"].as_array().unwrap();
    // The five demo tools and the test's counted_sleep.
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for n in ["echo", "progress", "sleep", "lookup", "confirm"] {
        assert!(names.contains(&n), "{names:?}");
    }
    assert_eq!(names.len(), 6, "{names:?}");
    let schema = channel.cached_schema("lookup").unwrap();
    assert_eq!(schema["properties"]["region"]["x-mcp-header"], "Region");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_tools_list_has_five_tools() {
    let server = Server::bind("127.0.0.1:0").await.unwrap();
    let h = common::serve(server, demo_app(), Default::default());
    let channel = Channel::new(h.addr.to_string());
    let r = channel.request("tools/list", json!({})).await.unwrap();
    assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 5, "{r}");
    h.stop().await;
}

fn demo_app() -> mcpwire_tokio::App {
    demo::app(Duration::from_secs(3600))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_over_the_channel() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    let r = tool(&channel, "echo", json!({"text": "hello"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "hello", "{r}");
    assert!(r["id"].is_number());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_stream_before_the_result() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    let mut call = channel
        .call(json!({"method": "tools/call", "params": {
            "name": "progress", "arguments": {"steps": 3, "delay_ms": 100},
            "_meta": {"progressToken": "p1"}}}))
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let mut seen = Vec::new();
    loop {
        match call.next().await.unwrap() {
            Some(Message::Notification(n)) => {
                assert_eq!(n["method"], "notifications/progress");
                seen.push((n["params"]["progress"].as_f64().unwrap(), started.elapsed()));
            }
            Some(Message::Response(r)) => {
                assert_eq!(seen.len(), 3, "{seen:?}");
                assert_eq!(r["result"]["content"][0]["text"], "done after 3 steps");
                break;
            }
            None => panic!("no response"),
        }
    }
    assert_eq!(call.next().await.unwrap(), None);
    // Streamed as they came: the first well before the third.
    assert!(
        seen[2].1 >= seen[0].1 + Duration::from_millis(150),
        "{seen:?}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_mirrors_headers_from_the_cached_schema() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    channel.request("tools/list", json!({})).await.unwrap();
    let r = tool(
        &channel,
        "lookup",
        json!({"region": "eu-north1", "limit": 5}),
    )
    .await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"region": "eu-north1", "limit": 5}),
        "{r}"
    );
    // An unsafe integer is refused before a byte goes out.
    let e = channel
        .request(
            "tools/call",
            json!({"name": "lookup", "arguments": {"region": "x", "limit": 9007199254740993u64}}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.diagnostics.rpc_code, Some(-32600), "{e:?}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_with_an_empty_cache_refreshes_and_retries_once() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    assert!(channel.cached_schema("lookup").is_none());
    let r = tool(&channel, "lookup", json!({"region": "eu", "limit": 7})).await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"region": "eu", "limit": 7}),
        "{r}"
    );
    // The retry learned the schema from tools/list.
    assert!(channel.cached_schema("lookup").is_some());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_in_trailers_become_json_rpc_errors() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    let r = channel.request("no/such/method", json!({})).await.unwrap();
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(r["id"].is_number());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleep_past_its_timeout_is_deadline_exceeded() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    let started = tokio::time::Instant::now();
    let e = channel
        .call_with_timeout(
            json!({"method": "tools/call", "params": {"name": "sleep", "arguments": {"ms": 5000}}}),
            Some(Duration::from_millis(200)),
        )
        .await
        .unwrap()
        .response()
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::DeadlineExceeded, "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_call_cancels_it() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    let call = channel
        .call(json!({"method": "tools/call", "params": {"name": "counted_sleep", "arguments": {"ms": 5000}}}))
        .await
        .unwrap();
    let c = Arc::clone(&h.counters);
    assert!(
        eventually(Duration::from_secs(2), || c.started.load(Ordering::SeqCst)
            == 1)
        .await
    );
    drop(call);
    assert!(
        eventually(Duration::from_secs(2), || c.dropped.load(Ordering::SeqCst)
            == 1)
        .await
    );
    assert_eq!(c.finished.load(Ordering::SeqCst), 0);
    // The channel still works.
    let r = tool(&channel, "echo", json!({"text": "after"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "after");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_calls_on_one_channel() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    let mut tasks = Vec::new();
    for i in 0..16 {
        let channel = channel.clone();
        tasks.push(tokio::spawn(async move {
            let r = channel
                .request(
                    "tools/call",
                    json!({"name": "counted_sleep", "arguments": {"ms": 300}}),
                )
                .await
                .unwrap();
            (i, r)
        }));
    }
    let started = tokio::time::Instant::now();
    for t in tasks {
        let (_, r) = t.await.unwrap();
        assert_eq!(r["result"]["content"][0]["text"], "slept", "{r}");
    }
    // Concurrent, not one after the other.
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(h.counters.finished.load(Ordering::SeqCst), 16);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_up_to_the_message_limit() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    // Close to the default limit of 4 MiB, both ways.
    let text = "x".repeat((4 << 20) - 4096);
    let r = tool(&channel, "echo", json!({"text": text})).await;
    assert_eq!(r["result"]["content"][0]["text"], text.as_str());
    // A request over the limit is refused before it goes out.
    let e = channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "y".repeat(4 << 20)}}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::ResourceExhausted, "{e:?}");
    // The channel still works.
    let r = tool(&channel, "echo", json!({"text": "after"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "after");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn more_calls_than_slots_wait_their_turn() {
    let h = start().await;
    let channel = Channel::new(h.addr.to_string());
    let n = mcpwire_tokio::channel::MAX_CONCURRENT_CALLS + 8;
    let mut tasks = Vec::new();
    for _ in 0..n {
        let channel = channel.clone();
        tasks.push(tokio::spawn(async move {
            channel
                .request(
                    "tools/call",
                    json!({"name": "counted_sleep", "arguments": {"ms": 200}}),
                )
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r["result"]["content"][0]["text"], "slept", "{r}");
    }
    assert_eq!(h.counters.finished.load(Ordering::SeqCst), n);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_the_server_restarts() {
    let h = start().await;
    let addr = h.addr;
    let channel = Channel::new(addr.to_string());
    let r = tool(&channel, "echo", json!({"text": "one"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "one");
    h.stop().await;
    let h = start_on(&addr.to_string()).await;
    let r = tool(&channel, "echo", json!({"text": "two"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "two", "{r}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_in_the_extra_metadata() {
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(mcpwire_tokio::BearerTokens::new([("right-token", "alice")]));
    let h = common::serve(server, demo_app(), Default::default());
    let addr = h.addr;
    // Without the token: UNAUTHENTICATED, HTTP 401 and the challenge.
    let channel = Channel::new(addr.to_string());
    let e = channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::Unauthenticated, "{e:?}");
    assert_eq!(e.diagnostics.http_status, Some(401), "{e:?}");
    assert_eq!(
        e.diagnostics.www_authenticate.as_deref(),
        Some(r#"Bearer realm="mcpwire""#),
        "{e:?}"
    );
    // With it, on every call of the channel.
    let mut config = ChannelConfig::new(addr.to_string());
    config
        .extra_metadata
        .push(("Authorization".into(), "Bearer right-token".into()));
    let channel = Channel::with_config(config);
    for text in ["one", "two"] {
        let r = tool(&channel, "echo", json!({"text": text})).await;
        assert_eq!(r["result"]["content"][0]["text"], text, "{r}");
    }
    h.stop().await;
}

// ----------------------------------------------------------------------
// Against the grpcio reference server
// ----------------------------------------------------------------------

struct RefServer {
    child: std::process::Child,
    addr: String,
}

impl Drop for RefServer {
    fn drop(&mut self) {
        // Stop the server we started, by its PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ref_server() -> Option<RefServer> {
    use std::io::BufRead;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join(".venv/bin/python");
    let has_grpc = std::process::Command::new(&python)
        .args(["-c", "import grpc"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_grpc {
        if std::env::var("MCPWIRE_REQUIRE_PEERS").as_deref() == Ok("1") {
            panic!("MCPWIRE_REQUIRE_PEERS=1 but .venv/bin/python lacks grpcio");
        }
        eprintln!("skipped: .venv/bin/python lacks grpcio (scripts/interop-grpc.sh installs it)");
        return None;
    }
    let mut child = std::process::Command::new(&python)
        .arg(root.join("tests/grpc/ref_server.py"))
        .arg("0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut server = RefServer {
        child,
        addr: String::new(),
    };
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap();
    server.addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("ref_server.py said {line:?}"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    Some(server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_reference_server_echo_and_progress() {
    let Some(s) = tokio::task::spawn_blocking(ref_server).await.unwrap() else {
        return;
    };
    let channel = Channel::new(s.addr.clone());
    let r = tool(&channel, "echo", json!({"text": "hi grpcio"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "hi grpcio", "{r}");
    let mut call = channel
        .call(json!({"method": "tools/call", "params": {
            "name": "progress", "arguments": {"steps": 3, "delay_ms": 50},
            "_meta": {"progressToken": "p"}}}))
        .await
        .unwrap();
    let mut notes = 0;
    let response = loop {
        match call.next().await.unwrap() {
            Some(Message::Notification(_)) => notes += 1,
            Some(Message::Response(r)) => break r,
            None => panic!("no response"),
        }
    };
    assert_eq!(notes, 3);
    assert_eq!(
        response["result"]["content"][0]["text"],
        "done after 3 steps"
    );
    drop(s);
}

/// A tunnel server of the `h2` crate that resets its first `refuse`
/// streams with REFUSED_STREAM, unprocessed, and answers the others with
/// an empty `tools/list` result. Counts the connections and the streams.
async fn refusing_server(
    refuse: usize,
) -> (
    std::net::SocketAddr,
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::AtomicUsize;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let streams = Arc::new(AtomicUsize::new(0));
    let (c, s) = (Arc::clone(&connections), Arc::clone(&streams));
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(socket).await else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    if s.fetch_add(1, Ordering::SeqCst) < refuse {
                        respond.send_reset(h2::Reason::REFUSED_STREAM);
                        continue;
                    }
                    tokio::spawn(async move {
                        let mut body = request.into_body();
                        let mut octets = Vec::new();
                        while let Some(Ok(chunk)) = body.data().await {
                            let _ = body.flow_control().release_capacity(chunk.len());
                            octets.extend_from_slice(&chunk);
                        }
                        // gRPC prefix, then field 1 (tag, varint length).
                        let mut at = 6;
                        while octets.get(at).is_some_and(|b| b & 0x80 != 0) {
                            at += 1;
                        }
                        at += 1;
                        let request: Value = serde_json::from_slice(&octets[at..]).unwrap();
                        let json = serde_json::to_vec(
                            &json!({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": []}}),
                        )
                        .unwrap();
                        let mut message = vec![0x0a];
                        let mut n = json.len();
                        while n >= 0x80 {
                            message.push((n as u8 & 0x7f) | 0x80);
                            n >>= 7;
                        }
                        message.push(n as u8);
                        message.extend_from_slice(&json);
                        let mut framed = vec![0];
                        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
                        framed.extend_from_slice(&message);
                        let head = http::Response::builder()
                            .status(200)
                            .header("content-type", "application/grpc+proto")
                            .body(())
                            .unwrap();
                        let mut send = respond.send_response(head, false).unwrap();
                        send.send_data(bytes::Bytes::from(framed), false).unwrap();
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                        send.send_trailers(trailers).unwrap();
                    });
                }
            });
        }
    });
    (addr, connections, streams)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_stream_is_sent_once_more_on_the_same_connection() {
    let (addr, connections, streams) = refusing_server(1).await;
    let channel = Channel::new(addr.to_string());
    let r = channel.request("tools/list", json!({})).await.unwrap();
    assert_eq!(r["result"]["tools"], json!([]), "{r}");
    // The engine's one retry, on the connection it had.
    assert_eq!(streams.load(Ordering::SeqCst), 2);
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_twice_fails_without_a_third_try() {
    let (addr, connections, streams) = refusing_server(usize::MAX).await;
    let channel = Channel::new(addr.to_string());
    let e = channel.request("tools/list", json!({})).await.unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e:?}");
    assert_eq!(streams.load(Ordering::SeqCst), 2);
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}
