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

use core::convert::Infallible;

use embassy_futures::block_on;
use embassy_futures::select::{Either3, select3};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::pipe::Pipe;
use embassy_time::{Duration, with_timeout};
use embedded_io_async::{ErrorType, Read, Write};
use mcpwire_core::h2::{self, Connection, ErrorCode, Event, Role, StreamRef};
use mcpwire_core::hpack::Field;
use mcpwire_core::mcp::meta::PROTOCOL_VERSION as VERSION;
use mcpwire_core::mcp::server::{Failure, TUNNEL_PATH};
use mcpwire_core::time::Instant;
use mcpwire_embassy::{Config, Server, SlabStore};
use mcpwire_proto::tunnel::JsonRpcMessage;
use serde_json::{Value, json};

mod support;

use support::{Count, INFO, Sleep, request};

type Wire = Pipe<CriticalSectionRawMutex, 8192>;
type Client = Connection<4, 4096, 16384, 16>;
/// One handler slot, 256 octets of arguments.
type Mcp = Server<'static, (Count, Sleep), 1, 256, 1024>;

/// One end of the connection: reads one pipe, writes the other.
struct End<'p> {
    rx: &'p Wire,
    tx: &'p Wire,
}

impl ErrorType for End<'_> {
    type Error = Infallible;
}

impl Read for End<'_> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Infallible> {
        Ok(self.rx.read(buf).await)
    }
}

impl Write for End<'_> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        Ok(self.tx.write(buf).await)
    }

    async fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

fn now() -> Instant {
    Instant::from_micros(embassy_time::Instant::now().as_micros())
}

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
