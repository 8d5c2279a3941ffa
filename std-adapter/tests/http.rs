//! The tokio server in-process on 127.0.0.1:0 over Streamable HTTP (MCP
//! 2026-07-28 §5) on HTTP/1.1, spoken as raw octets on a
//! `tokio::net::TcpStream`: what an HTTP client of the binding sees (JSON
//! and event-stream answers, keep-alive, many connections, a slow head, a
//! pipelined request behind an open stream, a client that goes away), and
//! a gRPC call on the same port while an HTTP stream is open. Then the
//! endpoint's options (`http_path`, `allowed_hosts`, keep-alive comments)
//! on HTTP/1.1, on HTTP/2 (the `h2` crate) in the clear and over TLS with
//! ALPN `h2` and `http/1.1`: each the same on every wire.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{Counters, Guard, Harness, VERSION, eventually_every};
use mcpwire_tokio::{
    AllowedHosts, App, Client, Server, ServerConfig, ToolCall, ToolResult, client::grpc,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long any single read of a test may wait.
const READ_BOUND: Duration = Duration::from_secs(10);

// ----------------------------------------------------------------------
// The app and the server
// ----------------------------------------------------------------------

/// `echo`, `progress` (`steps` notifications `delay_ms` apart) and
/// `counted_sleep` (one progress notification, then a sleep; it records
/// its handler's life in the counters).
fn app(counters: &Arc<Counters>) -> App {
    let c = Arc::clone(counters);
    App::new("http-test", "0.0.0")
        .tool(
            "echo",
            "Returns its text.",
            r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
            |call: ToolCall| async move {
                let text = call.arguments()["text"].as_str().unwrap_or_default();
                Ok(ToolResult::text(text))
            },
        )
        .tool(
            "progress",
            "Sends `steps` progress notifications, `delay_ms` apart.",
            r#"{"type":"object","properties":{"steps":{"type":"integer"},"delay_ms":{"type":"integer"}}}"#,
            |call: ToolCall| async move {
                let steps = call.arguments()["steps"].as_u64().unwrap_or(3);
                let delay = call.arguments()["delay_ms"].as_u64().unwrap_or(20);
                for i in 1..=steps {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    call.progress(i as f64, Some(steps as f64), None).await;
                }
                Ok(ToolResult::text(format!("done after {steps} steps")))
            },
        )
        .tool(
            "counted_sleep",
            "Sleeps `ms` milliseconds and counts.",
            r#"{"type":"object","properties":{"ms":{"type":"integer"}}}"#,
            move |call: ToolCall| {
                let c = Arc::clone(&c);
                async move {
                    c.started.fetch_add(1, Ordering::SeqCst);
                    let _guard = Guard(Arc::clone(&c));
                    call.progress(0.0, None, Some("sleeping")).await;
                    let ms = call.arguments()["ms"].as_u64().unwrap_or(1000);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    c.finished.fetch_add(1, Ordering::SeqCst);
                    Ok(ToolResult::text("slept"))
                }
            },
        )
}

async fn start_with(config: ServerConfig) -> Harness {
    let counters = Arc::new(Counters::default());
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_config(config);
    let app = app(&counters);
    common::serve(server, app, counters)
}

async fn start() -> Harness {
    start_with(ServerConfig::default()).await
}

// ----------------------------------------------------------------------
// Requests
// ----------------------------------------------------------------------

/// A JSON-RPC request with the `_meta` every request carries (and a
/// progress token).
fn request(id: u64, method: &str, mut params: Value, progress: Option<&str>) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(token) = progress {
        params["_meta"]["progressToken"] = json!(token);
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn tool_call(id: u64, name: &str, arguments: Value, progress: Option<&str>) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
        progress,
    )
}

/// The octets of `POST /mcp` carrying `body`, with the headers of §5.4
/// mirrored from it.
fn post(body: &Value) -> Vec<u8> {
    let json = serde_json::to_vec(body).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\n\
         Mcp-Method: {}\r\nContent-Length: {}\r\n",
        body["method"].as_str().unwrap(),
        json.len()
    );
    if let Some(name) = body["params"]["name"].as_str() {
        head.push_str(&format!("Mcp-Name: {name}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(&json);
    out
}

// ----------------------------------------------------------------------
// A raw HTTP/1.1 client
// ----------------------------------------------------------------------

/// A response head.
#[derive(Debug)]
struct Head {
    status: u16,
    fields: Vec<(String, String)>,
}

impl Head {
    /// A field's value (the name compared case-insensitively).
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn is_chunked(&self) -> bool {
        self.field("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    }
}

/// One connection, read as HTTP/1.1 responses come.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// What arrived of an event stream's data and is no whole event yet.
    events: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Self {
        Self {
            stream: TcpStream::connect(addr).await.unwrap(),
            buf: Vec::new(),
            events: Vec::new(),
        }
    }

    async fn send(&mut self, octets: &[u8]) {
        self.stream.write_all(octets).await.unwrap();
    }

    /// Reads more octets; false at the end of the stream.
    async fn fill(&mut self) -> bool {
        let mut chunk = [0; 16 * 1024];
        let n = tokio::time::timeout(READ_BOUND, self.stream.read(&mut chunk))
            .await
            .expect("no answer in time")
            .unwrap();
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    /// The next line, without its CRLF.
    async fn line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8(self.buf[..i].to_vec()).unwrap();
                self.buf.drain(..i + 2);
                return line;
            }
            assert!(self.fill().await, "the connection ended in a line");
        }
    }

    async fn exactly(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(self.fill().await, "the connection ended in a body");
        }
        self.buf.drain(..n).collect()
    }

    async fn head(&mut self) -> Head {
        let status_line = self.line().await;
        let mut parts = status_line.splitn(3, ' ');
        assert_eq!(parts.next(), Some("HTTP/1.1"), "{status_line:?}");
        let status = parts.next().unwrap().parse().unwrap();
        let mut fields = Vec::new();
        loop {
            let line = self.line().await;
            if line.is_empty() {
                return Head { status, fields };
            }
            let (name, value) = line.split_once(':').unwrap();
            fields.push((name.to_owned(), value.trim().to_owned()));
        }
    }

    /// The next chunk's data; `None` after the last chunk.
    async fn chunk(&mut self) -> Option<Vec<u8>> {
        let size_line = self.line().await;
        let size = usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16)
            .unwrap_or_else(|_| panic!("chunk size {size_line:?}"));
        if size == 0 {
            assert_eq!(self.line().await, "", "trailers after the last chunk");
            return None;
        }
        let data = self.exactly(size).await;
        assert_eq!(self.exactly(2).await, b"\r\n");
        Some(data)
    }

    /// The body of a response with this head.
    async fn body(&mut self, head: &Head) -> Vec<u8> {
        if head.is_chunked() {
            let mut body = Vec::new();
            while let Some(data) = self.chunk().await {
                body.extend_from_slice(&data);
            }
            body
        } else {
            let len = head
                .field("content-length")
                .map_or(0, |v| v.parse().unwrap());
            self.exactly(len).await
        }
    }

    /// A whole response: its head and its body as JSON.
    async fn json(&mut self) -> (Head, Value) {
        let head = self.head().await;
        let body = self.body(&head).await;
        let value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&body)));
        (head, value)
    }

    /// The next message of an event stream (its `data:` line as JSON),
    /// comments skipped; `None` when the stream ended.
    async fn event(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.events.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.events.drain(..i + 2).collect();
                let text = String::from_utf8(event).unwrap();
                let data: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    // A keep-alive comment (or a field without data).
                    continue;
                }
                return Some(serde_json::from_str(&data.join("\n")).unwrap());
            }
            match self.chunk().await {
                Some(data) => self.events.extend_from_slice(&data),
                None => {
                    assert!(self.events.is_empty(), "a partial event at the end");
                    return None;
                }
            }
        }
    }

    /// Whether the server closed the connection (end of stream or reset)
    /// within `bound`, whatever it sent before.
    async fn closed_within(&mut self, bound: Duration) -> bool {
        let mut chunk = [0; 4096];
        tokio::time::timeout(bound, async {
            loop {
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await
        .is_ok()
    }
}

/// One JSON exchange on a fresh connection.
async fn exchange(addr: SocketAddr, body: &Value) -> (Head, Value) {
    let mut conn = Conn::open(addr).await;
    conn.send(&post(body)).await;
    conn.json().await
}

fn text_of(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result: {response}"))
}

/// Reads an event stream to its end: the progress values in order, then
/// the final response.
async fn progress_then_result(conn: &mut Conn) -> (Vec<f64>, Value) {
    let mut progress = Vec::new();
    let mut result = None;
    while let Some(event) = conn.event().await {
        assert!(result.is_none(), "an event after the response: {event}");
        if event["method"] == "notifications/progress" {
            progress.push(event["params"]["progress"].as_f64().unwrap());
        } else {
            result = Some(event);
        }
    }
    (progress, result.expect("no response on the stream"))
}

// ----------------------------------------------------------------------
// The tests
// ----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_answered_as_one_json_response() {
    let h = start().await;
    let (head, response) =
        exchange(h.addr, &tool_call(1, "echo", json!({"text": "hi"}), None)).await;
    assert_eq!(head.status, 200, "{head:?}");
    assert!(
        head.field("content-type")
            .is_some_and(|v| v.starts_with("application/json")),
        "{head:?}"
    );
    assert!(head.field("content-length").is_some(), "{head:?}");
    assert!(head.field("mcp-session-id").is_none(), "{head:?}");
    assert_eq!(response["id"], 1);
    assert_eq!(text_of(&response), "hi");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_call_is_an_event_stream_of_its_notifications_then_the_result() {
    let h = start().await;
    let mut conn = Conn::open(h.addr).await;
    let call = tool_call(
        2,
        "progress",
        json!({"steps": 3, "delay_ms": 20}),
        Some("p2"),
    );
    conn.send(&post(&call)).await;
    let head = conn.head().await;
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(head.field("content-type"), Some("text/event-stream"));
    assert!(head.is_chunked(), "{head:?}");
    assert!(
        head.field("cache-control")
            .is_some_and(|v| v.contains("no-cache")),
        "{head:?}"
    );
    assert_eq!(head.field("x-accel-buffering"), Some("no"));
    let (progress, result) = progress_then_result(&mut conn).await;
    assert_eq!(progress, [1.0, 2.0, 3.0]);
    assert_eq!(result["id"], 2);
    assert_eq!(text_of(&result), "done after 3 steps");
    // The connection stays open for the next request.
    conn.send(&post(&tool_call(3, "echo", json!({"text": "next"}), None)))
        .await;
    let (head, response) = conn.json().await;
    assert_eq!(head.status, 200);
    assert_eq!(text_of(&response), "next");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_serves_one_request_after_another_on_one_connection() {
    let h = start().await;
    let mut conn = Conn::open(h.addr).await;
    for id in 1..=5 {
        let text = format!("call {id}");
        conn.send(&post(&tool_call(id, "echo", json!({"text": text}), None)))
            .await;
        let (head, response) = conn.json().await;
        assert_eq!(head.status, 200, "{head:?}");
        assert!(
            !head
                .field("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close")),
            "{head:?}"
        );
        assert_eq!(response["id"], id);
        assert_eq!(text_of(&response), text);
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_posts_are_all_answered_each_on_its_connection() {
    let h = start().await;
    let addr = h.addr;
    let mut tasks = tokio::task::JoinSet::new();
    for id in 0..200u64 {
        tasks.spawn(async move {
            let text = format!("client {id}");
            let (head, response) =
                exchange(addr, &tool_call(id, "echo", json!({"text": text}), None)).await;
            assert_eq!(head.status, 200, "{head:?}");
            assert_eq!(response["id"], id);
            assert_eq!(text_of(&response), text);
            id
        });
    }
    let mut answered = Vec::new();
    while let Some(r) = tasks.join_next().await {
        answered.push(r.unwrap());
    }
    answered.sort_unstable();
    assert_eq!(answered, (0..200).collect::<Vec<_>>());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_head_is_closed_after_the_head_timeout() {
    let timeout = Duration::from_millis(300);
    let h = start_with(ServerConfig {
        handshake_timeout: timeout,
        ..ServerConfig::default()
    })
    .await;
    let mut slow = Conn::open(h.addr).await;
    let start = Instant::now();
    // Slowloris: a head that never ends, a field at a time.
    slow.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    slow.send(b"Content-Type: application/json\r\n").await;
    assert!(
        slow.closed_within(Duration::from_secs(5)).await,
        "the slow head was kept open"
    );
    let took = start.elapsed();
    assert!(
        took >= timeout - Duration::from_millis(50),
        "closed after {took:?}"
    );
    // Other connections are served.
    let (head, response) =
        exchange(h.addr, &tool_call(1, "echo", json!({"text": "ok"}), None)).await;
    assert_eq!(head.status, 200);
    assert_eq!(text_of(&response), "ok");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelined_request_is_answered_after_the_open_event_stream() {
    let h = start().await;
    let mut conn = Conn::open(h.addr).await;
    // Both requests in one write: the second arrives while the first's
    // event stream is open.
    let mut both = post(&tool_call(
        1,
        "progress",
        json!({"steps": 4, "delay_ms": 30}),
        Some("p1"),
    ));
    both.extend_from_slice(&post(&tool_call(
        2,
        "echo",
        json!({"text": "second"}),
        None,
    )));
    conn.send(&both).await;
    // The first response whole (its chunks parse strictly: an interleaved
    // response would break them), then the second.
    let head = conn.head().await;
    assert_eq!(head.status, 200);
    assert_eq!(head.field("content-type"), Some("text/event-stream"));
    let (progress, result) = progress_then_result(&mut conn).await;
    assert_eq!(progress, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(result["id"], 1);
    let (head, response) = conn.json().await;
    assert_eq!(head.status, 200);
    assert_eq!(response["id"], 2);
    assert_eq!(text_of(&response), "second");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_is_served_on_the_port_while_an_http_event_stream_is_open() {
    let h = start().await;
    let mut conn = Conn::open(h.addr).await;
    let call = tool_call(
        1,
        "progress",
        json!({"steps": 5, "delay_ms": 100}),
        Some("p1"),
    );
    conn.send(&post(&call)).await;
    let head = conn.head().await;
    assert_eq!(head.status, 200);
    let first = conn.event().await.unwrap();
    assert_eq!(first["params"]["progress"], 1.0, "{first}");
    // The event stream is open: gRPC (HTTP/2) on the same port.
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let r = channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "over grpc"}}),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&r), "over grpc");
    let (progress, result) = progress_then_result(&mut conn).await;
    assert_eq!(progress, [2.0, 3.0, 4.0, 5.0]);
    assert_eq!(text_of(&result), "done after 5 steps");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_closes_its_event_stream_cancels_the_handler() {
    let h = start().await;
    let mut conn = Conn::open(h.addr).await;
    let call = tool_call(1, "counted_sleep", json!({"ms": 5000}), Some("s1"));
    conn.send(&post(&call)).await;
    let head = conn.head().await;
    assert_eq!(head.status, 200);
    assert_eq!(head.field("content-type"), Some("text/event-stream"));
    let first = conn.event().await.unwrap();
    assert_eq!(first["params"]["message"], "sleeping", "{first}");
    let counters = Arc::clone(&h.counters);
    assert_eq!(counters.started.load(Ordering::SeqCst), 1);
    // §5.7: closing the response stream mid-stream is the cancellation.
    drop(conn);
    assert!(
        eventually_every(Duration::from_millis(10), Duration::from_secs(10), || {
            counters.dropped.load(Ordering::SeqCst) == 1
        })
        .await,
        "the handler still runs after the client went away"
    );
    assert_eq!(counters.finished.load(Ordering::SeqCst), 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_answered_413() {
    let h = start_with(ServerConfig {
        max_message_bytes: 1024,
        ..ServerConfig::default()
    })
    .await;
    let text = "x".repeat(4096);
    let (head, _) = {
        let mut conn = Conn::open(h.addr).await;
        conn.send(&post(&tool_call(1, "echo", json!({"text": text}), None)))
            .await;
        let head = conn.head().await;
        let body = conn.body(&head).await;
        (head, body)
    };
    assert_eq!(head.status, 413, "{head:?}");
    // A body within the limit is served.
    let (head, response) = exchange(
        h.addr,
        &tool_call(2, "echo", json!({"text": "small"}), None),
    )
    .await;
    assert_eq!(head.status, 200);
    assert_eq!(text_of(&response), "small");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_in_the_body_is_answered_400_with_a_parse_error() {
    let h = start().await;
    let call = tool_call(1, "echo", json!({"text": "a?b"}), None);
    let mut octets = post(&call);
    // The same length: the `?` becomes 0xff, which no UTF-8 text holds.
    let at = octets.iter().rposition(|&b| b == b'?').unwrap();
    octets[at] = 0xff;
    let mut conn = Conn::open(h.addr).await;
    conn.send(&octets).await;
    let (head, response) = conn.json().await;
    assert_eq!(head.status, 400, "{head:?}");
    assert_eq!(response["error"]["code"], -32700, "{response}");
    h.stop().await;
}

/// `post(body)` with its `Content-Length` replaced by chunked framing of
/// `chunks` (the body's octets, as given).
fn chunked_post(body: &Value, chunks: &str) -> Vec<u8> {
    let octets = post(body);
    let text = String::from_utf8(octets).unwrap();
    let (head, json) = text.split_once("\r\n\r\n").unwrap();
    let head = head.replace(
        &format!("Content-Length: {}", json.len()),
        "Transfer-Encoding: chunked",
    );
    format!("{head}\r\n\r\n{chunks}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_is_served_and_one_with_a_bad_size_is_answered_400_and_closed() {
    let h = start().await;
    let call = tool_call(1, "echo", json!({"text": "in chunks"}), None);
    let json = serde_json::to_string(&call).unwrap();
    let (a, b) = json.split_at(10);
    let chunks = format!("{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n", a.len(), b.len());
    let mut conn = Conn::open(h.addr).await;
    conn.send(&chunked_post(&call, &chunks)).await;
    let (head, response) = conn.json().await;
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(text_of(&response), "in chunks");
    // A size that is no hexadecimal number: 400, and the connection ends.
    conn.send(&chunked_post(&call, "zz\r\n{}\r\n0\r\n\r\n"))
        .await;
    let head = conn.head().await;
    assert_eq!(head.status, 400, "{head:?}");
    let _ = conn.body(&head).await;
    assert!(conn.closed_within(Duration::from_secs(5)).await);
    // Other connections are served.
    let (head, _) = exchange(h.addr, &tool_call(2, "echo", json!({"text": "ok"}), None)).await;
    assert_eq!(head.status, 200);
    h.stop().await;
}

// ----------------------------------------------------------------------
// The endpoint's options on every wire: HTTP/1.1, HTTP/2 in the clear
// (prior knowledge) and over TLS (ALPN h2 and http/1.1)
// ----------------------------------------------------------------------

/// One answer, whatever the wire: its status, head fields (names in
/// lowercase) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// How a test reaches the server.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wire {
    Http11,
    H2c,
    #[cfg(feature = "tls")]
    TlsH2,
    #[cfg(feature = "tls")]
    TlsHttp11,
}

/// A server with `config` on every wire: one in the clear and, with TLS,
/// one with a certificate for `localhost` (its CA returned).
struct Servers {
    clear: Harness,
    #[cfg(feature = "tls")]
    tls: (Harness, tls::Ca),
}

impl Servers {
    async fn start(config: ServerConfig) -> Self {
        Self {
            clear: start_with(config.clone()).await,
            #[cfg(feature = "tls")]
            tls: tls::start(config).await,
        }
    }

    fn wires() -> Vec<Wire> {
        let mut wires = vec![Wire::Http11, Wire::H2c];
        #[cfg(feature = "tls")]
        wires.extend([Wire::TlsH2, Wire::TlsHttp11]);
        wires
    }

    /// A `POST` of `body` to `path` with `Host` (`:authority`) `host` and
    /// the headers of §5.4 (and `extra`), over `wire`; its whole answer.
    async fn post(
        &self,
        wire: Wire,
        path: &str,
        host: &str,
        extra: &[(&str, &str)],
        body: &Value,
    ) -> Answer {
        match wire {
            Wire::Http11 => {
                let io = TcpStream::connect(self.clear.addr).await.unwrap();
                http11_post(io, path, host, extra, body).await
            }
            Wire::H2c => {
                let io = TcpStream::connect(self.clear.addr).await.unwrap();
                h2_post(io, "http", path, host, extra, body).await
            }
            #[cfg(feature = "tls")]
            Wire::TlsH2 => {
                let io = tls::connect(&self.tls, b"h2").await;
                h2_post(io, "https", path, host, extra, body).await
            }
            #[cfg(feature = "tls")]
            Wire::TlsHttp11 => {
                let io = tls::connect(&self.tls, b"http/1.1").await;
                http11_post(io, path, host, extra, body).await
            }
        }
    }

    async fn stop(self) {
        self.clear.stop().await;
        #[cfg(feature = "tls")]
        self.tls.0.stop().await;
    }
}

/// The headers of §5.4 mirrored from `body`, and `extra`.
fn mcp_headers(body: &Value, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut fields = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        (
            "accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("mcp-protocol-version".to_owned(), VERSION.to_owned()),
        (
            "mcp-method".to_owned(),
            body["method"].as_str().unwrap().to_owned(),
        ),
    ];
    if let Some(name) = body["params"]["name"].as_str() {
        fields.push(("mcp-name".to_owned(), name.to_owned()));
    }
    fields.extend(
        extra
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
    );
    fields
}

/// One HTTP/1.1 exchange over `io` (`Connection: close`: the answer ends
/// with the connection).
async fn http11_post<T>(
    mut io: T,
    path: &str,
    host: &str,
    extra: &[(&str, &str)],
    body: &Value,
) -> Answer
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let json = serde_json::to_vec(body).unwrap();
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (n, v) in mcp_headers(body, extra) {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", json.len()));
    io.write_all(head.as_bytes()).await.unwrap();
    io.write_all(&json).await.unwrap();
    let mut got = Vec::new();
    // A TLS peer may end without close_notify: what came is the answer.
    let _ = tokio::time::timeout(READ_BOUND, io.read_to_end(&mut got))
        .await
        .expect("no answer in time");
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head: {:?}", String::from_utf8_lossy(&got)));
    let text = String::from_utf8(got[..end].to_vec()).unwrap();
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let fields: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let len: usize = fields
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap());
    Answer {
        status,
        fields,
        body: got[end + 4..end + 4 + len].to_vec(),
    }
}

/// One HTTP/2 request over `io` (the `h2` crate): `:authority` is `host`.
async fn h2_post<T>(
    io: T,
    scheme: &str,
    path: &str,
    host: &str,
    extra: &[(&str, &str)],
    body: &Value,
) -> Answer
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let send = common::handshake(io).await;
    let (head, mut stream) = h2_open(send, scheme, path, host, extra, body).await;
    let mut data = Vec::new();
    while let Some(chunk) = tokio::time::timeout(READ_BOUND, stream.data())
        .await
        .expect("no answer in time")
    {
        let chunk = chunk.unwrap();
        stream.flow_control().release_capacity(chunk.len()).unwrap();
        data.extend_from_slice(&chunk);
    }
    Answer {
        status: head.status.as_u16(),
        fields: head
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect(),
        body: data,
    }
}

/// Opens an HTTP/2 request and waits for its response head.
async fn h2_open(
    send: h2::client::SendRequest<bytes::Bytes>,
    scheme: &str,
    path: &str,
    host: &str,
    extra: &[(&str, &str)],
    body: &Value,
) -> (http::response::Parts, h2::RecvStream) {
    let mut request = http::Request::post(format!("{scheme}://{host}{path}"));
    for (n, v) in mcp_headers(body, extra) {
        request = request.header(n, v);
    }
    let mut ready = send.ready().await.unwrap();
    let (response, mut out) = ready
        .send_request(request.body(()).unwrap(), false)
        .unwrap();
    // A refusal may come before the body is sent (an early response, RFC
    // 9113 §8.1, then RST_STREAM): the stream is then closed for it.
    let _ = out.send_data(serde_json::to_vec(body).unwrap().into(), true);
    let response = tokio::time::timeout(READ_BOUND, response)
        .await
        .expect("no answer in time")
        .unwrap();
    let (head, stream) = response.into_parts();
    (head, stream)
}

#[cfg(feature = "tls")]
mod tls {
    use std::sync::Arc;

    use tokio_rustls::TlsConnector;
    use tokio_rustls::client::TlsStream;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    use super::*;

    pub(super) type Ca = CertificateDer<'static>;

    /// A TLS server with `config` (ALPN `h2` and `http/1.1`).
    pub(super) async fn start(config: ServerConfig) -> (Harness, Ca) {
        let (ca, chain, key) = common::certificates();
        let server = Server::bind_tls("127.0.0.1:0", chain.as_bytes(), key.as_bytes())
            .await
            .unwrap()
            .with_config(config);
        let counters = Arc::new(Counters::default());
        let app = app(&counters);
        let ca = CertificateDer::from_pem_slice(ca.as_bytes()).unwrap();
        (common::serve(server, app, counters), ca)
    }

    /// A TLS connection to `localhost` offering only `alpn`.
    pub(super) async fn connect((server, ca): &(Harness, Ca), alpn: &[u8]) -> TlsStream<TcpStream> {
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone()).unwrap();
        let mut config = ClientConfig::builder_with_provider(mcpwire_tokio::crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        let tcp = TcpStream::connect(server.addr).await.unwrap();
        let tls = TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn));
        tls
    }
}

/// `http_path` moves the endpoint on every wire: served at the new path,
/// and the old one is 404 (over HTTP/2 it stayed open, and the new one
/// was answered 415 by the gRPC checks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_path_moves_the_endpoint_on_every_wire() {
    let servers = Servers::start(ServerConfig {
        http_path: "/rpc/mcp".into(),
        ..ServerConfig::default()
    })
    .await;
    let call = tool_call(1, "echo", json!({"text": "moved"}), None);
    for wire in Servers::wires() {
        let moved = servers
            .post(wire, "/rpc/mcp", "localhost", &[], &call)
            .await;
        assert_eq!(moved.status, 200, "{wire:?}: {moved:?}");
        let moved: Value = serde_json::from_slice(&moved.body).unwrap();
        assert_eq!(text_of(&moved), "moved", "{wire:?}");
        let old = servers.post(wire, "/mcp", "localhost", &[], &call).await;
        assert_eq!(old.status, 404, "{wire:?}: {old:?}");
    }
    servers.stop().await;
}

/// `allowed_hosts` is the `Host` (HTTP/2 `:authority`) and `Origin` list
/// of every wire: an allowed name is served with its origin, a foreign
/// host or origin is 403 (over HTTP/2 the allowed origin was refused and
/// any authority served).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_apply_on_every_wire() {
    let servers = Servers::start(ServerConfig {
        allowed_hosts: AllowedHosts::Hosts(vec!["mcp.example".into()]),
        ..ServerConfig::default()
    })
    .await;
    let call = tool_call(1, "echo", json!({"text": "allowed"}), None);
    let origin = |o| [("origin", o)];
    for wire in Servers::wires() {
        let served = servers
            .post(
                wire,
                "/mcp",
                "mcp.example:8443",
                &origin("https://mcp.example"),
                &call,
            )
            .await;
        assert_eq!(served.status, 200, "{wire:?}: {served:?}");
        assert_eq!(served.field("content-type"), Some("application/json"));
        let loopback = servers.post(wire, "/mcp", "127.0.0.1", &[], &call).await;
        assert_eq!(loopback.status, 200, "{wire:?}: {loopback:?}");
        let host = servers.post(wire, "/mcp", "evil.com", &[], &call).await;
        assert_eq!(host.status, 403, "{wire:?}: {host:?}");
        let foreign = servers
            .post(
                wire,
                "/mcp",
                "mcp.example",
                &origin("https://evil.com"),
                &call,
            )
            .await;
        assert_eq!(foreign.status, 403, "{wire:?}: {foreign:?}");
    }
    servers.stop().await;
}

/// With the default (loopback) list, a foreign `:authority` is refused
/// as a foreign `Host` is: the DNS-rebinding guard on HTTP/2 too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_authority_is_refused_by_default_on_every_wire() {
    let servers = Servers::start(ServerConfig::default()).await;
    let call = tool_call(1, "echo", json!({"text": "x"}), None);
    for wire in Servers::wires() {
        let r = servers.post(wire, "/mcp", "evil.com", &[], &call).await;
        assert_eq!(r.status, 403, "{wire:?}: {r:?}");
        let r = servers.post(wire, "/mcp", "localhost:1", &[], &call).await;
        assert_eq!(r.status, 200, "{wire:?}: {r:?}");
    }
    servers.stop().await;
}

/// A listen stream says a comment when it has nothing to say for
/// `keep_alive_interval`, and its head asks proxies not to buffer it,
/// over HTTP/2 as over HTTP/1.1: a proxy with an idle timeout keeps both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_gets_keep_alive_comments_on_http11_and_http2() {
    let interval = Duration::from_millis(200);
    let (events, _keep) = tokio::sync::broadcast::channel(4);
    let counters = Arc::new(Counters::default());
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_config(ServerConfig {
            keep_alive_interval: interval,
            ..ServerConfig::default()
        });
    let h = common::serve(server, app(&counters).listen(events), counters);
    let listen = request(
        1,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
        None,
    );
    // HTTP/2: the comment arrives within the interval after the ack.
    let send = common::connect(h.addr).await;
    let (head, mut stream) = h2_open(send, "http", "/mcp", "127.0.0.1", &[], &listen).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.headers["content-type"], "text/event-stream");
    assert_eq!(head.headers["x-accel-buffering"], "no");
    let started = Instant::now();
    let mut data = Vec::new();
    while !String::from_utf8_lossy(&data).contains("\n\n: \n\n") {
        let chunk = tokio::time::timeout(READ_BOUND, stream.data())
            .await
            .expect("a keep-alive comment in time")
            .expect("the stream stays open")
            .unwrap();
        stream.flow_control().release_capacity(chunk.len()).unwrap();
        data.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(data).unwrap();
    assert!(text.starts_with("data: "), "{text:?}");
    assert!(
        text.contains("io.modelcontextprotocol/subscriptionId"),
        "{text:?}"
    );
    assert!(started.elapsed() < interval * 5, "{:?}", started.elapsed());
    // HTTP/1.1: the same comment, in a chunk.
    let mut conn = Conn::open(h.addr).await;
    conn.send(&post(&listen)).await;
    let head = conn.head().await;
    assert_eq!(head.status, 200);
    assert_eq!(head.field("x-accel-buffering"), Some("no"));
    let ack = conn.chunk().await.unwrap();
    assert!(String::from_utf8_lossy(&ack).starts_with("data: "));
    let comment = tokio::time::timeout(interval * 5, conn.chunk())
        .await
        .expect("a keep-alive comment in time");
    assert_eq!(comment.as_deref(), Some(&b": \n\n"[..]));
    h.stop().await;
}

// ----------------------------------------------------------------------
// Repeated members and mirrored headers (issue #32, A3)
// ----------------------------------------------------------------------

/// `lookup`, whose `region` is mirrored in `Mcp-Param-Region`, counting
/// its runs and answering the region it was given.
fn lookup_app(runs: &Arc<std::sync::atomic::AtomicUsize>) -> App {
    let runs = Arc::clone(runs);
    App::new("repeats-test", "0.0.0").tool(
        "lookup",
        "Looks a region up.",
        r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
        move |call: ToolCall| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move {
                let region = call.arguments()["region"].as_str().unwrap_or_default();
                Ok(ToolResult::text(region))
            }
        },
    )
}

async fn start_lookup() -> (Harness, Arc<std::sync::atomic::AtomicUsize>) {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = Server::bind("127.0.0.1:0").await.unwrap();
    let h = common::serve(server, lookup_app(&runs), Arc::new(Counters::default()));
    (h, runs)
}

/// A `tools/call` of `lookup` with these raw arguments (a JSON text, which
/// may repeat a key).
fn lookup_body(arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"lookup","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{VERSION}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    )
}

/// `Mcp-Name: echo` checked, `lookup` run by whoever reads the last.
const TWO_NAMES: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"region":"us-west"},"name":"lookup","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// The standard mirrored headers of a `lookup` call, `Mcp-Name` naming
/// `name`, the region `us-west`.
fn mirrored(name: &str) -> Vec<(String, String)> {
    [
        ("MCP-Protocol-Version", VERSION),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", name),
        ("Mcp-Param-Region", "us-west"),
    ]
    .iter()
    .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
    .collect()
}

/// A request body, its headers, and the JSON-RPC code it is refused with.
type Refused = (String, Vec<(String, String)>, i64);

/// What the server must refuse, and with which JSON-RPC code: a member
/// twice (as written and escaped), then a mirrored header twice (in any
/// case of its name).
fn refused_cases() -> Vec<Refused> {
    let twice = |name: &str, value: &str| {
        let mut h = mirrored("lookup");
        h.push((name.to_owned(), value.to_owned()));
        h
    };
    let good = lookup_body(r#"{"region":"us-west"}"#);
    vec![
        (
            lookup_body(r#"{"region":"us-west","region":"eu-secret"}"#),
            mirrored("lookup"),
            -32600,
        ),
        (
            lookup_body(r#"{"region":"us-west","\u0072egion":"eu-secret"}"#),
            mirrored("lookup"),
            -32600,
        ),
        (TWO_NAMES.to_owned(), mirrored("echo"), -32600),
        (good.clone(), twice("Mcp-Name", "lookup"), -32020),
        (good.clone(), twice("mcp-name", "echo"), -32020),
        (good.clone(), twice("MCP-PARAM-REGION", "eu-secret"), -32020),
        (good.clone(), twice("Mcp-Method", "tools/call"), -32020),
        (good, twice("mcp-protocol-version", VERSION), -32020),
    ]
}

fn raw_post(body: &str, headers: &[(String, String)]) -> Vec<u8> {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Over HTTP/1.1: `Mcp-Param-Region: us-west` with `region` twice in the
/// arguments (also as `\u0072egion`), `Mcp-Name: echo` with `name` twice,
/// and each mirrored header given twice, are answered 400 (-32600 for the
/// body, -32020 for the headers); the tool never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_members_and_headers_are_400_over_http1_and_the_tool_never_runs() {
    let (h, runs) = start_lookup().await;
    for (body, headers, code) in refused_cases() {
        let mut conn = Conn::open(h.addr).await;
        conn.send(&raw_post(&body, &headers)).await;
        let (head, response) = conn.json().await;
        assert_eq!(head.status, 400, "{body} {headers:?}: {response}");
        assert_eq!(
            response["error"]["code"], code,
            "{body} {headers:?}: {response}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool ran");
    let mut conn = Conn::open(h.addr).await;
    let good = lookup_body(r#"{"region":"us-west"}"#);
    conn.send(&raw_post(&good, &mirrored("lookup"))).await;
    let (head, response) = conn.json().await;
    assert_eq!(head.status, 200, "{response}");
    assert_eq!(text_of(&response), "us-west");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    h.stop().await;
}

/// The same over HTTP/2 `POST /mcp` (h2's client, prior knowledge).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_members_and_headers_are_400_over_http2_and_the_tool_never_runs() {
    let (h, runs) = start_lookup().await;
    let mut send = common::connect(h.addr).await;
    let post = |send: &mut h2::client::SendRequest<bytes::Bytes>,
                body: &str,
                headers: &[(String, String)]| {
        let mut req = http::Request::builder()
            .method("POST")
            .uri("http://127.0.0.1/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (n, v) in headers {
            // h2 sends names lowercase, as HTTP/2 requires.
            req = req.header(n.to_ascii_lowercase(), v);
        }
        let (resp, mut stream) = send.send_request(req.body(()).unwrap(), false).unwrap();
        stream
            .send_data(bytes::Bytes::from(body.to_owned()), true)
            .unwrap();
        async move {
            let resp = tokio::time::timeout(READ_BOUND, resp)
                .await
                .unwrap()
                .unwrap();
            let status = resp.status().as_u16();
            let body = common::read_body(resp.into_body()).await;
            (status, serde_json::from_slice::<Value>(&body).unwrap())
        }
    };
    for (body, headers, code) in refused_cases() {
        send = send.ready().await.unwrap();
        let (status, response) = post(&mut send, &body, &headers).await;
        assert_eq!(status, 400, "{body} {headers:?}: {response}");
        assert_eq!(
            response["error"]["code"], code,
            "{body} {headers:?}: {response}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool ran");
    send = send.ready().await.unwrap();
    let good = lookup_body(r#"{"region":"us-west"}"#);
    let (status, response) = post(&mut send, &good, &mirrored("lookup")).await;
    assert_eq!(status, 200, "{response}");
    assert_eq!(text_of(&response), "us-west");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    h.stop().await;
}

/// The same on the gRPC tunnel: the refusals end the call with
/// `grpc-status` INVALID_ARGUMENT and the JSON-RPC code in
/// `mcp-error-code`, as a header mismatch does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_members_and_metadata_end_a_tunnel_call_before_the_tool_runs() {
    let (h, runs) = start_lookup().await;
    let mut send = common::connect(h.addr).await;
    let call = |send: &mut h2::client::SendRequest<bytes::Bytes>,
                body: &str,
                headers: &[(String, String)]| {
        let mut req = http::Request::builder()
            .method("POST")
            .uri(format!("http://127.0.0.1{}", common::PATH))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        for (n, v) in headers {
            req = req.header(n.to_ascii_lowercase(), v);
        }
        let (resp, mut stream) = send.send_request(req.body(()).unwrap(), false).unwrap();
        stream
            .send_data(common::frame(body.as_bytes()), true)
            .unwrap();
        async move {
            tokio::time::timeout(READ_BOUND, common::collect(resp))
                .await
                .expect("the call ends")
        }
    };
    for (body, headers, code) in refused_cases() {
        send = send.ready().await.unwrap();
        let reply = call(&mut send, &body, &headers).await;
        assert_eq!(
            reply.get("grpc-status"),
            Some("3"),
            "{body} {headers:?}: {reply:?}"
        );
        assert_eq!(
            reply.get("mcp-error-code"),
            Some(code.to_string().as_str()),
            "{body} {headers:?}: {reply:?}"
        );
        assert!(reply.messages.is_empty(), "{reply:?}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool ran");
    send = send.ready().await.unwrap();
    let good = lookup_body(r#"{"region":"us-west"}"#);
    let reply = call(&mut send, &good, &mirrored("lookup")).await;
    assert_eq!(reply.get("grpc-status"), Some("0"), "{reply:?}");
    assert_eq!(text_of(&reply.messages[0]), "us-west");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    h.stop().await;
}
