//! The Streamable HTTP client ([`Client::http`], the modern era chosen)
//! against `mcpwire serve`'s app in-process over HTTP/1.1 (lists, calls
//! with progress, resources, prompts, the -32020 re-list and retry, a
//! bounded pool under many calls at once, cancellation by drop, bearer
//! tokens, one replaced on a running client), and against
//! scripted bad peers: an HTML answer, an event stream that breaks off, an
//! event over the limit, a server that never answers, a JSON-RPC request
//! on a response stream, a pooled connection the server closed, tools with
//! invalid `x-mcp-header` annotations.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Counters, Harness, eventually_every};
use mcpwire_core::grpc::Code;
use mcpwire_tokio::client::http::{self, EraChoice};
use mcpwire_tokio::{BearerTokens, Client, Server, StreamMessage, client::grpc};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The demo app (plus `counted_sleep`) on 127.0.0.1:0.
async fn start() -> Harness {
    common::start_on_with_tick("127.0.0.1:0", Duration::from_secs(3600)).await
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/mcp")
}

async fn channel(addr: SocketAddr) -> Client {
    Client::http(modern(url(addr))).await.unwrap()
}

/// The settings of a client of `url` that speaks the modern era without a
/// probe (the scripted peers answer only what a call sends).
fn modern(url: impl AsRef<str>) -> http::Config {
    let mut config = http::Config::new(url.as_ref()).unwrap();
    config.era = EraChoice::Modern;
    config
}

#[tokio::test]
async fn lists_calls_reads_and_gets_over_http() {
    let server = start().await;
    let ch = channel(server.addr).await;
    let discovered = ch.discover().await.unwrap();
    assert_eq!(discovered["supportedVersions"], json!(["2026-07-28"]));
    let tools = ch.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    let echoed = ch.call_tool("echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(echoed.text(), "hi");
    let resources = ch.list_resources().await.unwrap();
    assert_eq!(resources[0].uri, "mem://readme");
    let prompts = ch.list_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "greet");
    let found: Value = ch
        .call_tool_typed("lookup", json!({"region": "eu", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(found, json!({"region": "eu", "limit": 2}));
    let contents = ch.read_resource("mem://readme").await.unwrap();
    assert!(contents[0].text.as_deref().unwrap().starts_with("mcpwire"));
    let prompt = ch.get_prompt("greet", json!({"who": "Ada"})).await.unwrap();
    assert!(prompt.messages[0].to_string().contains("Say hello to Ada."));
    let mut seen = Vec::new();
    let done = ch
        .call_tool_with_progress("progress", json!({"steps": 3, "delay_ms": 0}), |p| {
            seen.push(p.progress)
        })
        .await
        .unwrap();
    assert_eq!(done.text(), "done after 3 steps");
    assert_eq!(seen, [1.0, 2.0, 3.0]);
    server.stop().await;
}

#[tokio::test]
async fn the_diagnostics_name_the_url_the_status_and_the_era() {
    let server = start().await;
    let ch = channel(server.addr).await;
    let request = json!({"method": "tools/call", "params": {"name": "progress",
        "arguments": {"steps": 1, "delay_ms": 0}, "_meta": {"progressToken": "t"}}});
    let mut call = ch.call(request).await.unwrap();
    while let Some(m) = call.next().await.unwrap() {
        if let StreamMessage::Response(r) = m {
            assert!(r.get("result").is_some(), "{r}");
        }
    }
    let facts = call.http_facts().unwrap();
    assert_eq!(facts.url, url(server.addr));
    assert_eq!(facts.status, Some(200));
    assert_eq!(facts.http_version, Some("HTTP/1.1"));
    assert!(facts.event_stream, "{facts:?}");
    let line = facts.to_string();
    assert!(
        line.starts_with("era modern, version 2026-07-28, requested 2026-07-28"),
        "{line}"
    );
    assert!(line.ends_with("content type text/event-stream"), "{line}");
    // A call without progress is answered with a JSON body.
    let mut call = ch
        .call(json!({"method": "tools/call", "params": {"name": "echo",
            "arguments": {"text": "j"}}}))
        .await
        .unwrap();
    while call.next().await.unwrap().is_some() {}
    let facts = call.http_facts().unwrap();
    assert_eq!(facts.status, Some(200));
    assert!(!facts.event_stream, "{facts:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_json_rpc_error_is_the_one_the_grpc_channel_gets() {
    let server = start().await;
    let over_http = channel(server.addr)
        .await
        .call_tool("no_such_tool", json!({}))
        .await
        .unwrap_err();
    let over_grpc = Client::grpc(grpc::Config::new(server.addr.to_string()))
        .await
        .unwrap()
        .call_tool("no_such_tool", json!({}))
        .await
        .unwrap_err();
    let (h, g) = (over_http.rpc.unwrap(), over_grpc.rpc.unwrap());
    assert_eq!((h.code, &h.message), (g.code, &g.message));
    assert_eq!(over_http.status, over_grpc.status);
    server.stop().await;
}

#[tokio::test]
async fn a_call_refused_for_its_headers_is_relisted_and_sent_once_more() {
    let server = start().await;
    let ch = channel(server.addr).await;
    // No tools/list yet: the annotated region and limit go unmirrored, the
    // server answers -32020, the channel lists and sends again.
    assert_eq!(ch.cached_schema("lookup").await, None);
    let request = json!({"method": "tools/call",
        "params": {"name": "lookup", "arguments": {"region": "eu-north1", "limit": 5}}});
    let mut call = ch.call(request).await.unwrap();
    let Some(StreamMessage::Response(r)) = call.next().await.unwrap() else {
        panic!("no response");
    };
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"region": "eu-north1", "limit": 5})
    );
    assert!(call.http_facts().unwrap().retried_after_32020);
    assert!(ch.cached_schema("lookup").await.is_some());
    // Now mirrored from the start.
    let mut again = ch
        .call(json!({"method": "tools/call",
            "params": {"name": "lookup", "arguments": {"region": "eu", "limit": 1}}}))
        .await
        .unwrap();
    assert!(matches!(
        again.next().await.unwrap(),
        Some(StreamMessage::Response(_))
    ));
    assert!(!again.http_facts().unwrap().retried_after_32020);
    server.stop().await;
}

#[tokio::test]
async fn many_calls_at_once_share_a_bounded_pool() {
    let p = peer(|seen| {
        let text = seen.body["params"]["arguments"]["text"].clone();
        let answer = result(seen, json!({"content": [{"type": "text", "text": text}]}));
        (json_answer(&answer), Then::Next)
    })
    .await;
    let mut config = modern(url(p.addr));
    config.pool_size = 3;
    let ch = Client::http(config).await.unwrap();
    let calls: Vec<_> = (0..24)
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
    let opened = p.connections.load(Ordering::SeqCst);
    assert!((1..=3).contains(&opened), "{opened} connections");
}

#[tokio::test]
async fn dropping_a_call_closes_its_connection_and_the_server_stops_the_work() {
    let server = start().await;
    let ch = channel(server.addr).await;
    let request = json!({"method": "tools/call", "params": {"name": "counted_sleep",
        "arguments": {"ms": 10_000}}});
    let call = ch.call(request).await.unwrap();
    let c = Arc::clone(&server.counters);
    assert!(
        eventually_every(Duration::from_millis(20), Duration::from_secs(5), || {
            c.started.load(Ordering::SeqCst) == 1
        })
        .await,
        "the handler never started"
    );
    drop(call);
    assert!(
        eventually_every(Duration::from_millis(20), Duration::from_secs(5), || {
            c.dropped.load(Ordering::SeqCst) == 1
        })
        .await,
        "the handler was not stopped"
    );
    assert_eq!(server.counters.finished.load(Ordering::SeqCst), 0);
    server.stop().await;
}

#[tokio::test]
async fn a_bearer_token_is_sent_and_a_refusal_carries_www_authenticate() {
    let counters = Arc::new(Counters::default());
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(BearerTokens::new([("right-token", "alice")]));
    let app = common::app(&counters, Duration::from_secs(3600));
    let server = common::serve(server, app, counters);
    for bearer in [None, Some("wrong-token")] {
        let mut config = modern(url(server.addr));
        config.bearer = bearer.map(str::to_owned);
        let e = Client::http(config)
            .await
            .unwrap()
            .list_tools()
            .await
            .unwrap_err();
        assert_eq!(e.status, Code::Unauthenticated, "{e}");
        assert_eq!(e.diagnostics.http_status, Some(401));
        let challenge = e.diagnostics.www_authenticate.unwrap();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
    }
    let mut config = modern(url(server.addr));
    config.bearer = Some("right-token".into());
    let ch = Client::http(config).await.unwrap();
    assert_eq!(
        ch.call_tool("echo", json!({"text": "in"}))
            .await
            .unwrap()
            .text(),
        "in"
    );
    // A token replaced on the running client goes with the next call.
    ch.set_bearer(Some("wrong-token")).await.unwrap();
    let e = ch.list_tools().await.unwrap_err();
    assert_eq!(e.diagnostics.http_status, Some(401), "{e}");
    ch.set_bearer(Some("right-token")).await.unwrap();
    assert!(ch.list_tools().await.is_ok());
    let e = ch.set_bearer(Some("not a token")).await.unwrap_err();
    assert_eq!(e.status, Code::InvalidArgument, "{e}");
    server.stop().await;
}

/// `Client::close` with a listen stream open (which a server never ends)
/// and a call in progress, over HTTP/1.1 and h2c: the listen stream ends
/// with UNAVAILABLE "the client closed", the call gets its answer, close
/// returns (no session: `None`), and a later call is refused.
#[tokio::test]
async fn close_ends_a_listen_stream_and_lets_a_call_finish() {
    let server = start().await;
    for http2 in [http::Http2Mode::Never, http::Http2Mode::Always] {
        let mut config = modern(url(server.addr));
        config.http2 = http2;
        let ch = Client::http(config).await.unwrap();
        let mut listen = ch
            .listen(json!({"notifications": {"toolsListChanged": true}}))
            .await
            .unwrap();
        let ack = listen.next().await.unwrap();
        assert!(
            matches!(&ack, Some(StreamMessage::Notification(n))
                if n["method"] == "notifications/subscriptions/acknowledged"),
            "{http2:?} {ack:?}"
        );
        let request = json!({"method": "tools/call", "params": {"name": "counted_sleep",
            "arguments": {"ms": 300}}});
        let slow = ch.call(request).await.unwrap();
        let slow = tokio::spawn(slow.response());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let closed = tokio::time::timeout(Duration::from_secs(10), ch.close()).await;
        assert_eq!(closed, Ok(None), "{http2:?}: close returns");
        let e = listen.next().await.unwrap_err();
        assert_eq!(e.status, Code::Unavailable, "{http2:?} {e}");
        assert!(e.message.contains("the client closed"), "{e}");
        let answer = slow.await.unwrap().unwrap();
        assert!(answer.get("result").is_some(), "{http2:?} {answer}");
        let e = ch.list_tools().await.unwrap_err();
        assert_eq!(e.status, Code::Unavailable, "{http2:?} {e}");
    }
    server.stop().await;
}

// ----------------------------------------------------------------------
// Scripted peers
// ----------------------------------------------------------------------

/// What a scripted peer does after its answer.
#[derive(Clone, Copy)]
enum Then {
    /// Reads the next request on the connection.
    Next,
    /// Closes the connection.
    Close,
    /// Keeps the connection open and says nothing more.
    Hang,
}

/// One request a scripted peer saw.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

struct Peer {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// A peer that answers each request with what `answer` gives.
async fn peer<F>(answer: F) -> Peer
where
    F: Fn(&Seen) -> (Vec<u8>, Then) + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let answer = Arc::new(answer);
    let (c, s) = (Arc::clone(&connections), Arc::clone(&seen));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let (answer, s) = (Arc::clone(&answer), Arc::clone(&s));
            tokio::spawn(async move {
                while let Some(request) = read_request(&mut stream).await {
                    s.lock().unwrap().push(request.clone());
                    let (octets, then) = answer(&request);
                    if stream.write_all(&octets).await.is_err() {
                        return;
                    }
                    match then {
                        Then::Next => {}
                        Then::Close => return,
                        Then::Hang => {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            return;
                        }
                    }
                }
            });
        }
    });
    Peer {
        addr,
        connections,
        seen,
    }
}

/// One request with a `Content-Length` body; `None` at the end.
async fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&data[..end]).into_owned();
    let seen = Seen {
        head,
        body: Value::Null,
    };
    let len: usize = seen.header("content-length")?.parse().ok()?;
    while data.len() < end + len {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&chunk[..n]);
    }
    Some(Seen {
        body: serde_json::from_slice(&data[end..end + len]).ok()?,
        ..seen
    })
}

fn json_answer(body: &Value) -> Vec<u8> {
    let text = body.to_string();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}

/// The head of an event stream that runs until the connection closes.
const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

fn event(message: &Value) -> String {
    format!("event: message\ndata: {message}\n\n")
}

fn result(seen: &Seen, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": seen.body["id"], "result": result})
}

async fn peer_channel(addr: SocketAddr) -> Client {
    let mut config = modern(url(addr));
    config.request_timeout = Duration::from_secs(5);
    Client::http(config).await.unwrap()
}

#[tokio::test]
async fn an_html_answer_is_an_error_that_shows_it() {
    let p = peer(|_| {
        let page = "<!doctype html><html><body>Sign in</body></html>";
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n",
            page.len()
        );
        ((head + page).into_bytes(), Then::Next)
    })
    .await;
    let e = peer_channel(p.addr).await.list_tools().await.unwrap_err();
    assert_eq!(e.status, Code::Internal, "{e}");
    assert!(e.message.contains("text/html"), "{e}");
    assert!(e.message.contains("<!doctype html>"), "{e}");
    assert_eq!(e.diagnostics.http_status, Some(200));
}

#[tokio::test]
async fn a_stream_that_breaks_off_before_the_response_fails_the_call() {
    let p = peer(|seen| {
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "t", "progress": 1}});
        let _ = seen;
        (
            (SSE_HEAD.to_owned() + &event(&progress)).into_bytes(),
            Then::Close,
        )
    })
    .await;
    let ch = peer_channel(p.addr).await;
    let request = json!({"method": "tools/call", "params": {"name": "x", "arguments": {},
        "_meta": {"progressToken": "t"}}});
    let mut call = ch.call(request).await.unwrap();
    assert!(matches!(
        call.next().await.unwrap(),
        Some(StreamMessage::Notification(_))
    ));
    let e = call.next().await.unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e}");
    assert!(e.message.contains("ended before the response"), "{e}");
}

#[tokio::test]
async fn an_event_over_the_limit_fails_the_call() {
    let p = peer(|seen| {
        let big = result(
            seen,
            json!({"content": [{"type": "text", "text": "x".repeat(8192)}]}),
        );
        (
            (SSE_HEAD.to_owned() + &event(&big)).into_bytes(),
            Then::Close,
        )
    })
    .await;
    let mut config = modern(url(p.addr));
    config.max_message_bytes = 1024;
    let e = Client::http(config)
        .await
        .unwrap()
        .call_tool("x", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::ResourceExhausted, "{e}");
}

#[tokio::test]
async fn a_request_over_the_limit_is_refused_before_it_goes_out() {
    let p = peer(|seen| (json_answer(&result(seen, json!({}))), Then::Next)).await;
    let mut config = modern(url(p.addr));
    config.max_message_bytes = 1024;
    let e = Client::http(config)
        .await
        .unwrap()
        .call_tool("x", json!({"text": "y".repeat(2048)}))
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::ResourceExhausted, "{e}");
    assert_eq!(p.connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let p = peer(|_| (Vec::new(), Then::Hang)).await;
    let mut config = modern(url(p.addr));
    config.request_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let e = Client::http(config)
        .await
        .unwrap()
        .list_tools()
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::DeadlineExceeded, "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_request_on_a_response_stream_fails_the_call() {
    let p = peer(|seen| {
        let ask = json!({"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage",
            "params": {}});
        let done = result(seen, json!({"content": []}));
        (
            (SSE_HEAD.to_owned() + &event(&ask) + &event(&done)).into_bytes(),
            Then::Close,
        )
    })
    .await;
    let e = peer_channel(p.addr)
        .await
        .call_tool("x", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::Internal, "{e}");
    assert!(e.message.contains("sent a request"), "{e}");
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_is_replaced_once() {
    // Keep-alive answers, but the connection closes after each.
    let p = peer(|seen| {
        (
            json_answer(&result(seen, json!({"tools": []}))),
            Then::Close,
        )
    })
    .await;
    let ch = peer_channel(p.addr).await;
    ch.list_tools().await.unwrap();
    // Let the close arrive, then use the dead pooled connection.
    tokio::time::sleep(Duration::from_millis(50)).await;
    ch.list_tools().await.unwrap();
    assert_eq!(p.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn keep_alive_carries_one_call_after_another_on_one_connection() {
    let p = peer(|seen| (json_answer(&result(seen, json!({"tools": []}))), Then::Next)).await;
    let ch = peer_channel(p.addr).await;
    for _ in 0..5 {
        ch.list_tools().await.unwrap();
    }
    assert_eq!(p.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tools_with_invalid_annotations_are_left_out_and_the_valid_are_mirrored() {
    let p = peer(|seen| {
        let answer = match seen.body["method"].as_str() {
            Some("tools/list") => result(
                seen,
                json!({"tools": [
                    {"name": "valid_tool", "inputSchema": {"type": "object", "properties": {
                        "region": {"type": "string", "x-mcp-header": "Region"}}}},
                    {"name": "number_header", "inputSchema": {"type": "object", "properties": {
                        "n": {"type": "number", "x-mcp-header": "N"}}}},
                    {"name": "spaced_header", "inputSchema": {"type": "object", "properties": {
                        "s": {"type": "string", "x-mcp-header": "A B"}}}}]}),
            ),
            _ => result(seen, json!({"content": [{"type": "text", "text": "ok"}]})),
        };
        (json_answer(&answer), Then::Next)
    })
    .await;
    let ch = peer_channel(p.addr).await;
    let names: Vec<String> = ch
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["valid_tool"]);
    ch.call_tool("valid_tool", json!({"region": "Hello, 世界"}))
        .await
        .unwrap();
    let seen = p.seen.lock().unwrap().clone();
    let call = seen.last().unwrap();
    assert_eq!(call.header("mcp-method"), Some("tools/call"));
    assert_eq!(call.header("mcp-name"), Some("valid_tool"));
    assert_eq!(
        call.header("mcp-param-region"),
        Some("=?base64?SGVsbG8sIOS4lueVjA==?=")
    );
    assert_eq!(call.header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(
        call.body["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"],
        "mcpwire"
    );
}
