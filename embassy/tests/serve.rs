//! The driver over an in-memory `embedded-io-async` connection (two pipes,
//! no network): a gRPC tunnel client made of the core's HTTP/2 connection
//! talks to [`Server::serve`], with one handler task running the tools.
//! What a client sees: the listen acknowledgement, the unknown-tool error
//! and the driver's failures (busy, arguments too large) in the core's
//! words; a tool call runs on the handler with its progress.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use embassy_futures::block_on;
use embassy_futures::select::{Either3, select3};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::pipe::Pipe;
use embassy_time::{Duration, with_timeout};
use embedded_io_async::{Read, Write};
use mcpwire_core::h2::{self, Connection, ErrorCode, Event, Role, StreamRef};
use mcpwire_core::hpack::Field;
use mcpwire_core::mcp::meta::PROTOCOL_VERSION as VERSION;
use mcpwire_core::mcp::server::{Failure, TUNNEL_PATH};
use mcpwire_embassy::{Config, Server, SlabStore};
use mcpwire_proto::tunnel::JsonRpcMessage;
use serde_json::{Value, json};

mod support;

use support::{Count, INFO, Sleep, now, request};

type Wire = Pipe<CriticalSectionRawMutex, 8192>;
/// One end of the connection: reads one pipe, writes the other.
type End<'p> = support::End<'p, 8192>;
type Client = Connection<4, 4096, 16384, 16>;
/// One handler slot, 256 octets of arguments.
type Mcp = Server<'static, (Count, Sleep), 1, 256, 1024>;

/// A tunnel client: one call at a time, its messages as JSON.
struct Tunnel<'p> {
    conn: Client,
    io: End<'p>,
    /// An `authorization` value sent with every call.
    authorization: Option<&'static str>,
    /// The `www-authenticate` of the last call that had one.
    challenge: Option<String>,
}

impl Tunnel<'_> {
    /// Opens a call and sends `request` as its only message.
    async fn open(&mut self, request: &Value) -> StreamRef {
        let stream = self.conn.open_stream().expect("a stream");
        // The headers the tunnel mirrors from the body.
        let method = request["method"].as_str().expect("a method");
        let name = request["params"]["name"].as_str();
        let mut fields = vec![
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", TUNNEL_PATH),
            Field::new(b":authority", b"device"),
            Field::new(b"content-type", b"application/grpc"),
            Field::new(b"mcp-protocol-version", VERSION.as_bytes()),
            Field::new(b"mcp-method", method.as_bytes()),
        ];
        if let Some(name) = name {
            fields.push(Field::new(b"mcp-name", name.as_bytes()));
        }
        if let Some(a) = self.authorization {
            fields.push(Field::new(b"authorization", a.as_bytes()));
        }
        self.conn
            .send_headers(stream, fields.iter().copied(), false)
            .expect("headers");
        let json = serde_json::to_vec(request).expect("json");
        let mut body = vec![0u8; JsonRpcMessage::encoded_len(json.len())];
        let n = JsonRpcMessage::encode(&json, &mut body).expect("room");
        body.truncate(n);
        let mut message = vec![0u8];
        message.extend_from_slice(&u32::try_from(body.len()).expect("small").to_be_bytes());
        message.extend_from_slice(&body);
        let sent = self.conn.send_data(stream, &message, true).expect("data");
        assert_eq!(sent, message.len());
        stream
    }

    async fn transmit(&mut self) {
        let mut out = [0u8; 4096];
        while self.conn.wants_transmit() {
            let n = self.conn.poll_transmit(&mut out);
            if n == 0 {
                break;
            }
            let _ = self.io.write_all(&out[..n]).await;
        }
    }

    /// Reads until `stream` has `count` messages or ends; its messages and
    /// its `grpc-status`, if it ended.
    async fn messages(&mut self, stream: StreamRef, count: usize) -> (Vec<Value>, Option<String>) {
        let mut data = Vec::new();
        let mut messages = Vec::new();
        let mut status = None;
        let mut ended = false;
        let mut buf = [0u8; 4096];
        while !ended && messages.len() < count {
            self.transmit().await;
            let n = self.io.read(&mut buf).await.expect("read");
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                let r = self.conn.recv(rest, now());
                if let Some(d) = r.data {
                    if d.stream == stream {
                        data.extend_from_slice(d.bytes);
                    }
                    self.conn.release_data(d.stream, d.bytes.len());
                }
                rest = &rest[r.consumed..];
                while let Some(e) = self.conn.poll_event() {
                    match e {
                        Event::Headers { stream: s, .. } if s == stream => {
                            let fields = self.conn.headers(s);
                            if let Some(v) = fields.and_then(|f| f.get(b"grpc-status")) {
                                status = Some(String::from_utf8_lossy(v).into_owned());
                            }
                            if let Some(v) = fields.and_then(|f| f.get(b"www-authenticate")) {
                                self.challenge = Some(String::from_utf8_lossy(v).into_owned());
                            }
                        }
                        Event::Closed { stream: s } | Event::Reset { stream: s, .. }
                            if s == stream =>
                        {
                            ended = true;
                        }
                        _ => {}
                    }
                }
                if r.consumed == 0 {
                    self.transmit().await;
                }
            }
            // Whole messages: 1 flag octet, 4 length octets, a
            // JsonRpcMessage.
            while data.len() >= 5 {
                let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
                if data.len() < 5 + len {
                    break;
                }
                let json = JsonRpcMessage::decode(&data[5..5 + len]).expect("a JsonRpcMessage");
                messages.push(serde_json::from_slice(json).expect("a JSON message"));
                data.drain(..5 + len);
            }
        }
        (messages, status)
    }

    async fn call(&mut self, request: Value) -> (Vec<Value>, Option<String>) {
        let stream = self.open(&request).await;
        self.messages(stream, usize::MAX).await
    }
}

/// Runs `client` against a server on an in-memory connection, with one
/// handler task; fails after 10 s.
fn run<F>(client: impl FnOnce(Tunnel<'static>) -> F)
where
    F: core::future::Future<Output = ()>,
{
    run_with(Config::default(), client)
}

fn run_with<F>(config: Config, client: impl FnOnce(Tunnel<'static>) -> F)
where
    F: core::future::Future<Output = ()>,
{
    let up: &'static Wire = Box::leak(Box::new(Wire::new()));
    let down: &'static Wire = Box::leak(Box::new(Wire::new()));
    let server: &'static Mcp = Box::leak(Box::new(
        Mcp::new(INFO, (Count, Sleep), config).expect("a valid schema"),
    ));
    let tunnel = Tunnel {
        conn: Client::new(Role::Client, h2::Config::default(), now()),
        io: End { rx: down, tx: up },
        authorization: None,
        challenge: None,
    };
    let serve = async {
        let mut io = End { rx: up, tx: down };
        let mut staging = [0u8; 256];
        server
            .serve::<SlabStore<2048, 2>, 2, 4096, 2048, _>(&mut io, &mut staging)
            .await
    };
    // The handler first: it attaches to its slot at its first poll.
    let ended = block_on(select3(
        server.run_handler(),
        serve,
        with_timeout(Duration::from_secs(10), client(tunnel)),
    ));
    match ended {
        Either3::First(never) => never,
        Either3::Second(e) => panic!("the connection ended first: {e:?}"),
        Either3::Third(done) => done.expect("the client finished in time"),
    }
}

#[test]
fn listen_is_acknowledged_by_the_core_with_an_empty_filter() {
    run(|mut t| async move {
        let listen = request(
            json!("sub-1"),
            "subscriptions/listen",
            json!({ "notifications": { "toolsListChanged": true } }),
        );
        let stream = t.open(&listen).await;
        let (messages, status) = t.messages(stream, 1).await;
        assert_eq!(status, None, "the listen stream stays open");
        assert_eq!(
            messages,
            [json!({
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {
                    "_meta": { "io.modelcontextprotocol/subscriptionId": "sub-1" },
                    "notifications": {},
                },
            })]
        );
        t.conn.reset(stream, ErrorCode::CANCEL).expect("reset");
        t.transmit().await;
    });
}

/// The listen request of subscription `id`.
fn listen(id: &str) -> Value {
    request(
        json!(id),
        "subscriptions/listen",
        json!({ "notifications": { "toolsListChanged": true } }),
    )
}

/// A listen stream the client resets frees its stream and call buffer at
/// once: with room for two calls, two more listen streams after it are
/// both acknowledged (kept, the first would leave room for one).
#[test]
fn a_listen_stream_reset_by_the_client_frees_its_call() {
    run(|mut t| async move {
        let first = t.open(&listen("sub-1")).await;
        let (messages, status) = t.messages(first, 1).await;
        assert_eq!((messages.len(), status), (1, None));
        t.conn.reset(first, ErrorCode::CANCEL).expect("reset");
        t.transmit().await;
        let second = t.open(&listen("sub-2")).await;
        let (messages, status) = t.messages(second, 1).await;
        assert_eq!(status, None, "the second listen stream stays open");
        assert_eq!(
            messages[0]["method"],
            "notifications/subscriptions/acknowledged"
        );
        let third = t.open(&listen("sub-3")).await;
        let (messages, status) = t.messages(third, 1).await;
        assert_eq!(
            status, None,
            "the third listen stream stays open: {messages:?}"
        );
        assert_eq!(
            messages[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "sub-3"
        );
    });
}

/// On [`Server::shutdown`] the device ends a listen stream as the tokio
/// server does: its final result (the response to the listen request)
/// and `grpc-status: 0`; then the connection closes, and `serve` returns.
#[test]
fn shutdown_ends_a_listen_stream_with_its_result() {
    let up: &'static Wire = Box::leak(Box::new(Wire::new()));
    let down: &'static Wire = Box::leak(Box::new(Wire::new()));
    let server: &'static Mcp = Box::leak(Box::new(
        Mcp::new(INFO, (Count, Sleep), Config::default()).expect("a valid schema"),
    ));
    let mut t = Tunnel {
        conn: Client::new(Role::Client, h2::Config::default(), now()),
        io: End { rx: down, tx: up },
        authorization: None,
        challenge: None,
    };
    let serve = async {
        let mut io = End { rx: up, tx: down };
        let mut staging = [0u8; 256];
        server
            .serve::<SlabStore<2048, 2>, 2, 4096, 2048, _>(&mut io, &mut staging)
            .await
    };
    let client = async {
        let stream = t.open(&listen("sub-1")).await;
        let (messages, status) = t.messages(stream, 1).await;
        assert_eq!((messages.len(), status), (1, None), "acknowledged, open");
        assert!(!server.is_shut_down());
        server.shutdown();
        let (messages, status) = t.messages(stream, usize::MAX).await;
        (messages, status)
    };
    let both = embassy_futures::join::join(serve, client);
    let ended = block_on(select3(
        server.run_handler(),
        with_timeout(Duration::from_secs(10), both),
        core::future::pending::<()>(),
    ));
    let (served, (messages, status)) = match ended {
        Either3::First(never) => never,
        Either3::Second(done) => done.expect("the listen stream and the connection end in time"),
        Either3::Third(()) => unreachable!(),
    };
    assert!(server.is_shut_down());
    assert_eq!(
        served,
        Ok(()),
        "the connection closes after the listen stream"
    );
    assert_eq!(
        status.as_deref(),
        Some("0"),
        "the listen stream ends with OK"
    );
    assert_eq!(messages.len(), 1, "one final message: {messages:?}");
    assert_eq!(messages[0]["id"], "sub-1", "the listen request's result");
    assert!(
        messages[0].get("result").is_some(),
        "a result, not an error: {messages:?}"
    );
}

#[test]
fn an_unknown_tool_is_answered_by_the_core() {
    run(|mut t| async move {
        let call = request(json!(7), "tools/call", json!({ "name": "nope" }));
        let (messages, status) = t.call(call).await;
        assert_eq!(status.as_deref(), Some("0"));
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0]["id"], 7);
        assert_eq!(messages[0]["error"]["code"], -32602);
        assert_eq!(messages[0]["error"]["message"], "Unknown tool");
    });
}

#[test]
fn a_tool_runs_on_a_handler_with_its_progress() {
    run(|mut t| async move {
        let mut call = request(json!(1), "tools/call", json!({ "name": "count" }));
        call["params"]["arguments"] = json!({ "n": 2 });
        call["params"]["_meta"]["progressToken"] = json!("p");
        let (messages, status) = t.call(call).await;
        assert_eq!(status.as_deref(), Some("0"), "{messages:?}");
        let progress: Vec<_> = messages[..messages.len() - 1]
            .iter()
            .map(|m| (m["method"].clone(), m["params"]["progress"].clone()))
            .collect();
        assert_eq!(
            progress,
            [
                (json!("notifications/progress"), json!(1)),
                (json!("notifications/progress"), json!(2))
            ],
            "{messages:?}"
        );
        let last = &messages[messages.len() - 1];
        assert_eq!(last["id"], 1);
        assert_eq!(last["result"]["content"][0]["text"], "counted 2");
    });
}

#[test]
fn a_call_beyond_the_handlers_gets_the_cores_busy_error() {
    run(|mut t| async move {
        let sleep = request(json!(1), "tools/call", json!({ "name": "sleep" }));
        let first = t.open(&sleep).await;
        let count = request(json!(2), "tools/call", json!({ "name": "count" }));
        let (messages, status) = t.call(count).await;
        assert_eq!(status.as_deref(), Some("0"));
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0]["id"], 2);
        let busy = Failure::Busy.error();
        assert_eq!(messages[0]["error"]["code"], busy.code);
        assert_eq!(messages[0]["error"]["message"], busy.message);
        t.conn.reset(first, ErrorCode::CANCEL).expect("reset");
        t.transmit().await;
    });
}

#[test]
fn arguments_beyond_the_handler_buffer_get_the_cores_error() {
    run(|mut t| async move {
        let mut call = request(json!(3), "tools/call", json!({ "name": "count" }));
        call["params"]["arguments"] = json!({ "n": 1, "pad": "x".repeat(300) });
        let (messages, status) = t.call(call).await;
        assert_eq!(status.as_deref(), Some("0"));
        assert_eq!(messages.len(), 1);
        let too_large = Failure::ArgumentsTooLarge.error();
        assert_eq!(messages[0]["error"]["code"], too_large.code);
        assert_eq!(messages[0]["error"]["message"], too_large.message);
    });
}

/// With tokens, the device refuses as every mcpwire server does: the
/// core's status and RFC 6750 challenge (the tokio driver's tests pin the
/// same values), and an allowed token's call runs.
#[test]
fn bearer_tokens_get_the_cores_challenges() {
    use mcpwire_core::mcp::auth::{Decision, StaticTokens};
    let config = Config {
        tokens: Some(StaticTokens::new(&[("s3cret", "host")])),
        ..Config::default()
    };
    let cases: [(Option<&'static str>, Option<bool>); 3] = [
        (None, Some(false)),
        (Some("Bearer wrong"), Some(true)),
        (Some("Bearer s3cret"), None),
    ];
    for (authorization, refused_with_token) in cases {
        run_with(config, |mut t| async move {
            t.authorization = authorization;
            let (messages, status) = t
                .call(request(
                    json!(1),
                    "tools/call",
                    json!({ "name": "count", "arguments": { "n": 0 } }),
                ))
                .await;
            match refused_with_token {
                Some(had_token) => {
                    let refusal = Decision::Unauthenticated.refusal(had_token).unwrap();
                    let code = std::str::from_utf8(refusal.status.as_bytes()).unwrap();
                    assert_eq!(status.as_deref(), Some(code));
                    assert_eq!(t.challenge.as_deref(), Some(refusal.challenge));
                    assert!(messages.is_empty());
                }
                None => {
                    assert_eq!(status.as_deref(), Some("0"));
                    assert_eq!(messages[0]["result"]["content"][0]["text"], "counted 0");
                }
            }
        });
    }
}

/// An HTTP/1.1 response as a client reads it.
#[derive(Debug)]
struct Response {
    status: u16,
    /// The head's fields, names in lowercase.
    fields: Vec<(String, String)>,
    /// The body, chunks joined.
    body: String,
}

impl Response {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of an event stream (`data:` lines).
    fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| serde_json::from_str(d.trim()).expect("a JSON event"))
            .collect()
    }
}

/// Sends `head` (request line and fields, without the empty line) and
/// `body`, and reads the whole response.
async fn exchange(io: &mut End<'_>, head: &str, body: &[u8]) -> Response {
    let mut request = format!("{head}\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
    request.extend_from_slice(body);
    io.write_all(&request).await.expect("write");
    let mut data = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        if let Some(response) = parse_response(&data) {
            return response;
        }
        let n = io.read(&mut buf).await.expect("read");
        assert!(n > 0, "the server closed before the response was whole");
        data.extend_from_slice(&buf[..n]);
    }
}

/// A whole response in `data`, if it is there.
fn parse_response(data: &[u8]) -> Option<Response> {
    let end = data.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&data[..end]).expect("an ASCII head");
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().expect("a status");
    let fields: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').expect("a field");
            (n.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let mut rest = &data[end + 4..];
    let field = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let body = if field("transfer-encoding").is_some_and(|v| v == "chunked") {
        let mut body = Vec::new();
        loop {
            let line = rest.windows(2).position(|w| w == b"\r\n")?;
            let size = std::str::from_utf8(&rest[..line]).expect("a chunk size");
            let size = usize::from_str_radix(size.trim(), 16).expect("hex");
            if rest.len() < line + 2 + size + 2 {
                return None;
            }
            body.extend_from_slice(&rest[line + 2..line + 2 + size]);
            rest = &rest[line + 2 + size + 2..];
            if size == 0 {
                break body;
            }
        }
    } else {
        let len: usize = field("content-length").map_or(0, |v| v.parse().expect("a length"));
        if rest.len() < len {
            return None;
        }
        rest[..len].to_vec()
    };
    Some(Response {
        status,
        fields,
        body: String::from_utf8(body).expect("a UTF-8 body"),
    })
}

/// A Streamable HTTP POST of `message` to `/mcp`, with the headers §5
/// asks for (and `extra` fields).
async fn post(io: &mut End<'_>, message: &Value, extra: &str) -> Response {
    let method = message["method"].as_str().expect("a method");
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 192.0.2.7:50051\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: {VERSION}\r\n\
         mcp-method: {method}"
    );
    if let Some(name) = message["params"]["name"].as_str() {
        head.push_str(&format!("\r\nmcp-name: {name}"));
    }
    head.push_str(extra);
    exchange(io, &head, &serde_json::to_vec(message).expect("json")).await
}

/// Runs `client` against one server serving two in-memory connections at
/// once (one handler task): it gets a gRPC tunnel client on the first and
/// the raw octets of the second; fails after 10 s.
fn run_both<F>(config: Config, client: impl FnOnce(Tunnel<'static>, End<'static>) -> F)
where
    F: core::future::Future<Output = ()>,
{
    let pipe = || -> &'static Wire { Box::leak(Box::new(Wire::new())) };
    let (up, down, http_up, http_down) = (pipe(), pipe(), pipe(), pipe());
    let server: &'static Mcp = Box::leak(Box::new(
        Mcp::new(INFO, (Count, Sleep), config).expect("a valid schema"),
    ));
    let tunnel = Tunnel {
        conn: Client::new(Role::Client, h2::Config::default(), now()),
        io: End { rx: down, tx: up },
        authorization: None,
        challenge: None,
    };
    let http = End {
        rx: http_down,
        tx: http_up,
    };
    let serve = |rx: &'static Wire, tx: &'static Wire| async move {
        let mut io = End { rx, tx };
        let mut staging = [0u8; 256];
        server
            .serve::<SlabStore<2048, 2>, 2, 4096, 2048, _>(&mut io, &mut staging)
            .await
    };
    let serving = embassy_futures::join::join(serve(up, down), serve(http_up, http_down));
    let ended = block_on(select3(
        server.run_handler(),
        serving,
        with_timeout(Duration::from_secs(10), client(tunnel, http)),
    ));
    match ended {
        Either3::First(never) => never,
        Either3::Second(e) => panic!("the connections ended first: {e:?}"),
        Either3::Third(done) => done.expect("the client finished in time"),
    }
}

/// One port, two bindings: the first octets choose. A gRPC call and a
/// Streamable HTTP POST reach the same tools through the same handler.
#[test]
fn a_grpc_call_and_an_http_post_reach_one_server() {
    run_both(Config::default(), |mut t, mut http| async move {
        let call = request(
            json!(1),
            "tools/call",
            json!({ "name": "count", "arguments": { "n": 1 } }),
        );
        let (messages, status) = t.call(call.clone()).await;
        assert_eq!(status.as_deref(), Some("0"), "{messages:?}");
        assert_eq!(messages[0]["result"]["content"][0]["text"], "counted 1");

        let listed = post(&mut http, &request(json!(2), "tools/list", json!({})), "").await;
        assert_eq!(listed.status, 200, "{listed:?}");
        assert_eq!(listed.field("content-type"), Some("application/json"));
        let listed: Value = serde_json::from_str(&listed.body).expect("JSON");
        let names: Vec<_> = listed["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].clone())
            .collect();
        assert_eq!(names, [json!("count"), json!("sleep")]);

        // The same connection is kept alive for the next request.
        let called = post(&mut http, &call, "").await;
        assert_eq!(called.status, 200, "{called:?}");
        let called: Value = serde_json::from_str(&called.body).expect("JSON");
        assert_eq!(called["id"], 1);
        assert_eq!(called["result"]["content"][0]["text"], "counted 1");
    });
}

/// A request with a progress token is answered with an event stream: the
/// handler's progress notifications, then the result.
#[test]
fn an_http_call_with_a_progress_token_streams_its_progress() {
    run_both(Config::default(), |_, mut http| async move {
        let mut call = request(
            json!("c"),
            "tools/call",
            json!({ "name": "count", "arguments": { "n": 3 } }),
        );
        call["params"]["_meta"]["progressToken"] = json!(9);
        let r = post(&mut http, &call, "").await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.field("content-type"), Some("text/event-stream"));
        let events = r.events();
        let progress: Vec<_> = events[..events.len() - 1]
            .iter()
            .map(|m| {
                assert_eq!(m["method"], "notifications/progress");
                assert_eq!(m["params"]["progressToken"], 9);
                m["params"]["progress"].clone()
            })
            .collect();
        assert_eq!(progress, [json!(1), json!(2), json!(3)], "{events:?}");
        let last = &events[events.len() - 1];
        assert_eq!(last["id"], "c");
        assert_eq!(last["result"]["content"][0]["text"], "counted 3");
    });
}

/// The binding's own answers reach the client from the device: GET is 405
/// with `Allow: POST`.
#[test]
fn an_http_get_is_refused_with_405() {
    run_both(Config::default(), |_, mut http| async move {
        let r = exchange(&mut http, "GET /mcp HTTP/1.1\r\nhost: device", b"").await;
        assert_eq!(r.status, 405, "{r:?}");
        assert_eq!(r.field("allow"), Some("POST"));
    });
}

/// Bearer tokens apply to HTTP as to gRPC: a POST without one is 401 with
/// the core's challenge; with an allowed one the call runs.
#[test]
fn bearer_tokens_apply_to_http() {
    use mcpwire_core::mcp::auth::{Decision, StaticTokens};
    let config = Config {
        tokens: Some(StaticTokens::new(&[("s3cret", "host")])),
        ..Config::default()
    };
    let call = request(
        json!(1),
        "tools/call",
        json!({ "name": "count", "arguments": { "n": 0 } }),
    );
    let refusal = Decision::Unauthenticated.refusal(false).unwrap();
    run_both(config, |_, mut http| async move {
        let r = post(&mut http, &call, "").await;
        assert_eq!(r.status, refusal.http_status, "{r:?}");
        assert!(
            r.field("www-authenticate")
                .is_some_and(|c| c.starts_with(refusal.challenge)),
            "{r:?}"
        );
    });
    let call = request(
        json!(1),
        "tools/call",
        json!({ "name": "count", "arguments": { "n": 0 } }),
    );
    run_both(config, |_, mut http| async move {
        let r = post(&mut http, &call, "\r\nauthorization: Bearer s3cret").await;
        assert_eq!(r.status, 200, "{r:?}");
        let r: Value = serde_json::from_str(&r.body).expect("JSON");
        assert_eq!(r["result"]["content"][0]["text"], "counted 0");
    });
}

/// The binding is chosen only once the first octets tell: a POST whose
/// first octet (`P`, as the HTTP/2 preface starts) arrives alone is still
/// served as HTTP/1.1, none of its octets lost to the sniffing.
#[test]
fn a_request_that_starts_like_the_preface_is_still_http() {
    run_both(Config::default(), |_, mut http| async move {
        http.write_all(b"P").await.expect("write");
        embassy_time::Timer::after(Duration::from_millis(20)).await;
        let list = request(json!(5), "tools/list", json!({}));
        let head = format!(
            "OST /mcp HTTP/1.1\r\nhost: device\r\ncontent-type: application/json\r\n\
             accept: application/json\r\nmcp-protocol-version: {VERSION}\r\n\
             mcp-method: tools/list"
        );
        let r = exchange(&mut http, &head, &serde_json::to_vec(&list).expect("json")).await;
        assert_eq!(r.status, 200, "{r:?}");
        let r: Value = serde_json::from_str(&r.body).expect("JSON");
        assert_eq!(r["id"], 5);
    });
}

/// An HTTP/2 answer: its head's fields and its body.
#[derive(Debug, Default)]
struct H2Answer {
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl H2Answer {
    fn status(&self) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == ":status")
            .map(|(_, v)| v.as_str())
    }
}

impl Tunnel<'_> {
    /// A Streamable HTTP POST of `message` to `path` on the HTTP/2
    /// connection (`:authority` `authority`, the headers §5 asks for and
    /// `extra`); its whole answer.
    async fn http(
        &mut self,
        path: &str,
        authority: &str,
        extra: &[(&str, &str)],
        message: &Value,
    ) -> H2Answer {
        let stream = self.conn.open_stream().expect("a stream");
        let method = message["method"].as_str().expect("a method");
        let mut fields = vec![
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", path.as_bytes()),
            Field::new(b":authority", authority.as_bytes()),
            Field::new(b"content-type", b"application/json"),
            Field::new(b"accept", b"application/json, text/event-stream"),
            Field::new(b"mcp-protocol-version", VERSION.as_bytes()),
            Field::new(b"mcp-method", method.as_bytes()),
        ];
        for (n, v) in extra {
            fields.push(Field::new(n.as_bytes(), v.as_bytes()));
        }
        self.conn
            .send_headers(stream, fields.iter().copied(), false)
            .expect("headers");
        let body = serde_json::to_vec(message).expect("json");
        let sent = self.conn.send_data(stream, &body, true).expect("data");
        assert_eq!(sent, body.len());
        let mut answer = H2Answer::default();
        let mut ended = false;
        let mut buf = [0u8; 4096];
        while !ended {
            self.transmit().await;
            let n = self.io.read(&mut buf).await.expect("read");
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                let r = self.conn.recv(rest, now());
                if let Some(d) = r.data {
                    if d.stream == stream {
                        answer.body.extend_from_slice(d.bytes);
                        ended |= d.end_stream;
                    }
                    self.conn.release_data(d.stream, d.bytes.len());
                }
                rest = &rest[r.consumed..];
                while let Some(e) = self.conn.poll_event() {
                    match e {
                        Event::Headers {
                            stream: s,
                            end_stream,
                            ..
                        } if s == stream => {
                            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                            if let Some(list) = self.conn.headers(s) {
                                answer
                                    .fields
                                    .extend(list.iter().map(|f| (text(f.name), text(f.value))));
                            }
                            ended |= end_stream;
                        }
                        Event::Closed { stream: s } | Event::Reset { stream: s, .. }
                            if s == stream =>
                        {
                            ended = true;
                        }
                        _ => {}
                    }
                }
                if r.consumed == 0 {
                    self.transmit().await;
                }
            }
        }
        answer
    }
}

/// [`post`] to `path` with `Host: host`.
async fn post_at(
    io: &mut End<'_>,
    path: &str,
    host: &str,
    message: &Value,
    extra: &str,
) -> Response {
    let method = message["method"].as_str().expect("a method");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: {VERSION}\r\n\
         mcp-method: {method}{extra}"
    );
    exchange(io, &head, &serde_json::to_vec(message).expect("json")).await
}

/// One POST over HTTP/1.1 to a device with `config`, on a connection of
/// its own (a refusal closes it): its status.
fn over_http11(config: Config, path: &str, host: &str, extra: &str) -> u16 {
    let list = request(json!(1), "tools/list", json!({}));
    let mut status = None;
    let got = &mut status;
    run_both(config, |_, mut http| async move {
        let r = post_at(&mut http, path, host, &list, extra).await;
        if r.status == 200 {
            let r: Value = serde_json::from_str(&r.body).expect("JSON");
            assert_eq!(r["id"], 1);
        }
        *got = Some(r.status);
    });
    status.expect("an answer")
}

/// The same POST over HTTP/2 (`POST` on the tunnel's connection): its
/// status.
fn over_http2(config: Config, path: &str, authority: &str, extra: &[(&str, &str)]) -> String {
    let list = request(json!(1), "tools/list", json!({}));
    let mut status = None;
    let got = &mut status;
    run_with(config, |mut t| async move {
        let r = t.http(path, authority, extra, &list).await;
        if r.status() == Some("200") {
            let r: Value = serde_json::from_slice(&r.body).expect("JSON");
            assert_eq!(r["id"], 1);
        }
        *got = r.status().map(str::to_owned);
    });
    status.expect("an answer")
}

/// `Config::http`'s endpoint path reaches both wires: served where it was
/// moved, the old path 404 (HTTP/2 kept `/mcp` and answered the new path
/// 415).
#[test]
fn the_http_path_applies_on_http11_and_http2() {
    use mcpwire_embassy::{HttpConfig, HttpEndpoint};
    let mut config = Config::default();
    config.http = HttpConfig {
        endpoint: HttpEndpoint {
            path: "/device/mcp",
            ..config.http.endpoint
        },
        ..config.http
    };
    let lan = "192.0.2.7:50051";
    assert_eq!(over_http11(config, "/device/mcp", lan, ""), 200);
    assert_eq!(over_http11(config, "/mcp", lan, ""), 404);
    assert_eq!(over_http2(config, "/device/mcp", lan, &[]), "200");
    assert_eq!(over_http2(config, "/mcp", lan, &[]), "404");
}

/// The endpoint's `Host` and `Origin` lists reach both wires: by default
/// any `Host`/`:authority` (a LAN address) and loopback origins; with a
/// list, the names on it and 403 for others.
#[test]
fn allowed_hosts_and_origins_apply_on_http11_and_http2() {
    use mcpwire_embassy::{Allowed, HttpConfig, HttpEndpoint};
    let defaults = Config::default();
    let lan = "192.0.2.7:50051";
    assert_eq!(over_http11(defaults, "/mcp", lan, ""), 200);
    assert_eq!(over_http2(defaults, "/mcp", lan, &[]), "200");
    let evil = "\r\norigin: https://evil.example";
    assert_eq!(over_http11(defaults, "/mcp", lan, evil), 403);
    let evil = [("origin", "https://evil.example")];
    assert_eq!(over_http2(defaults, "/mcp", lan, &evil), "403");

    let mut config = Config::default();
    config.http = HttpConfig {
        endpoint: HttpEndpoint {
            allowed_hosts: Allowed::Hosts(&["board.local"]),
            allowed_origins: Allowed::Hosts(&["app.example"]),
            ..config.http.endpoint
        },
        ..config.http
    };
    let app = "\r\norigin: https://app.example";
    assert_eq!(over_http11(config, "/mcp", "board.local", app), 200);
    assert_eq!(over_http11(config, "/mcp", lan, ""), 403);
    assert_eq!(
        over_http11(
            config,
            "/mcp",
            "board.local",
            "\r\norigin: http://x.example"
        ),
        403
    );
    let app = [("origin", "https://app.example")];
    assert_eq!(over_http2(config, "/mcp", "board.local:50051", &app), "200");
    assert_eq!(over_http2(config, "/mcp", lan, &[]), "403");
    let other = [("origin", "http://x.example")];
    assert_eq!(over_http2(config, "/mcp", "board.local", &other), "403");
}

/// A client that sends requests and never reads (issue #32, A1): the
/// device stops reading it once its output waits (the pipe is full) and
/// holds nothing beyond its fixed buffers; the call it started keeps the
/// one handler slot (the other connection is told "busy") until the send
/// timeout drops the stalled connection, and then the other connection is
/// served.
#[test]
fn a_client_that_never_reads_is_dropped_after_the_send_timeout() {
    let config = Config {
        send_timeout: Some(Duration::from_millis(300)),
        ..Config::default()
    };
    run_both(config, |mut t, mut http| async move {
        let mut call = request(
            json!("flood"),
            "tools/call",
            json!({ "name": "count", "arguments": { "n": 50 } }),
        );
        call["params"]["_meta"]["progressToken"] = json!(1);
        let body = serde_json::to_vec(&call).expect("json");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: 192.0.2.7:50051\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: {VERSION}\r\n\
             mcp-method: tools/call\r\nmcp-name: count\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let mut one = head.into_bytes();
        one.extend_from_slice(&body);
        // Pipelined until the device stops taking them (the pipes hold
        // 8 KiB each way); nothing is read.
        let mut sent = 0;
        while with_timeout(Duration::from_millis(100), http.write_all(&one))
            .await
            .is_ok()
        {
            sent += 1;
            assert!(
                sent < 100,
                "the device kept reading a client that reads nothing"
            );
        }
        let count = |id| {
            request(
                json!(id),
                "tools/call",
                json!({ "name": "count", "arguments": { "n": 1 } }),
            )
        };
        let (messages, _) = t.call(count(2)).await;
        assert_eq!(
            messages[0]["error"]["message"], "server busy: every handler is running",
            "{messages:?}"
        );
        embassy_time::Timer::after(Duration::from_millis(400)).await;
        let (messages, status) = t.call(count(3)).await;
        assert_eq!(status.as_deref(), Some("0"), "{messages:?}");
        assert_eq!(
            messages[0]["result"]["content"][0]["text"], "counted 1",
            "{messages:?}"
        );
    });
}

/// A connection that never sends a request (the HTTP/2 preface and
/// SETTINGS, then nothing) ends at the handshake timeout with
/// GOAWAY(NO_ERROR), and `serve` returns (issue #32, A2); so does one whose
/// calls ended, at the idle timeout.
#[test]
fn idle_http2_connections_end_at_their_timeouts() {
    for first_call in [false, true] {
        let up: &'static Wire = Box::leak(Box::new(Wire::new()));
        let down: &'static Wire = Box::leak(Box::new(Wire::new()));
        let mut config = Config::default();
        config.engine.h2.handshake_timeout = Some(Duration::from_millis(300).into());
        config.engine.h2.idle_timeout = Some(Duration::from_millis(300).into());
        let server: &'static Mcp = Box::leak(Box::new(
            Mcp::new(INFO, (Count, Sleep), config).expect("a valid schema"),
        ));
        let mut t = Tunnel {
            conn: Client::new(Role::Client, h2::Config::default(), now()),
            io: End { rx: down, tx: up },
            authorization: None,
            challenge: None,
        };
        let serve = async {
            let mut io = End { rx: up, tx: down };
            let mut staging = [0u8; 256];
            server
                .serve::<SlabStore<2048, 2>, 2, 4096, 2048, _>(&mut io, &mut staging)
                .await
        };
        let client = async {
            if first_call {
                let (messages, status) = t
                    .call(request(
                        json!(1),
                        "tools/call",
                        json!({ "name": "count", "arguments": { "n": 1 } }),
                    ))
                    .await;
                assert_eq!(status.as_deref(), Some("0"), "{messages:?}");
            } else {
                // The preface and SETTINGS only.
                t.transmit().await;
            }
            // Everything the device writes until it closes (the pipe
            // has no end of file: until a second passes in silence).
            let mut got = Vec::new();
            let mut buf = [0u8; 512];
            while let Ok(n) = with_timeout(Duration::from_secs(1), t.io.read(&mut buf)).await {
                got.extend_from_slice(&buf[..n.expect("read")]);
            }
            got
        };
        let (served, got) = block_on(embassy_futures::join::join(
            with_timeout(Duration::from_secs(5), serve),
            client,
        ));
        served.expect("serve returns").expect("a clean end");
        // The last frame: GOAWAY with NO_ERROR.
        let tail = &got[got.len().saturating_sub(17)..];
        assert_eq!((tail[3], &tail[13..17]), (7, &[0u8; 4][..]), "{got:?}");
    }
}

/// The device answers a request's malformed multi round-trip fields and an
/// unknown `logLevel` as the tokio server does (-32602 before the tool
/// runs): the check is the core's, not a driver's (issue #26).
#[test]
fn malformed_retry_fields_and_log_levels_are_refused_as_on_tokio() {
    run(|mut t| async move {
        for (extra, message) in [
            (
                json!({"inputResponses": []}),
                "inputResponses must be an object",
            ),
            (json!({"requestState": 5}), "requestState must be a string"),
            (
                json!({"_meta": {"io.modelcontextprotocol/logLevel": "loud"}}),
                "unknown logLevel",
            ),
        ] {
            let mut call = request(
                json!(1),
                "tools/call",
                json!({ "name": "count", "arguments": { "n": 1 } }),
            );
            for (k, v) in extra.as_object().unwrap() {
                if k == "_meta" {
                    for (mk, mv) in v.as_object().unwrap() {
                        call["params"]["_meta"][mk] = mv.clone();
                    }
                } else {
                    call["params"][k] = v.clone();
                }
            }
            let (messages, status) = t.call(call).await;
            assert_eq!(status.as_deref(), Some("0"), "{messages:?}");
            assert_eq!(messages[0]["error"]["code"], -32602, "{messages:?}");
            assert_eq!(messages[0]["error"]["message"], message);
        }
    });
}
