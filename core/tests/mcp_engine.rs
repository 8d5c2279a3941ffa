//! The tunnel server engine against our HTTP/2 client, in memory: what a
//! gRPC client of the binding sees.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use mcpwire_core::drive;
use mcpwire_core::grpc::{Code, base64, write_prefix};
use mcpwire_core::h2::{Config, Connection, ErrorCode, Event, Role, StreamRef};
use mcpwire_core::hpack::Field;
use mcpwire_core::mcp::auth::Decision;
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::registry::{Registry, ToolInfo};
use mcpwire_core::mcp::server::{ListChange, RequestKind, ServerConfig, ServerEvent, TUNNEL_PATH};
use mcpwire_core::mcp::{CallStore, SlabStore};
use mcpwire_core::time::Instant;

mod support;

use mcpwire_sim::{Pipe, exchange};
use support::mcp::{App, META, Server, Side, VecStore, checked, each_split, registry, split};

type Client = Connection<8, 4096, 16384, 16>;

const TOOLS: [ToolInfo<'static>; 2] = [
    support::mcp::ECHO,
    support::mcp::lookup(
        r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
    ),
];

/// What the client saw on one call.
#[derive(Debug, Default)]
struct Seen {
    head: Vec<(String, String)>,
    messages: Vec<String>,
    trailers: Vec<(String, String)>,
    reset: bool,
}

impl Seen {
    fn trailer(&self, name: &str) -> Option<&str> {
        self.trailers
            .iter()
            .chain(&self.head)
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Our HTTP/2 client with its application (what it saw of each call), as
/// a [`drive::Endpoint`] for the pipes: DATA is kept and released at once,
/// events are drained after every call.
struct H2Client {
    conn: Client,
    seen: HashMap<StreamRef, Seen>,
    body: HashMap<StreamRef, Vec<u8>>,
}

impl H2Client {
    fn take_events(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                Event::Headers { stream, .. } => {
                    let s = self.seen.entry(stream).or_default();
                    let list: Vec<(String, String)> = self
                        .conn
                        .headers(stream)
                        .expect("a Headers event lends its list")
                        .iter()
                        .map(|f| {
                            (
                                String::from_utf8_lossy(f.name).into(),
                                String::from_utf8_lossy(f.value).into(),
                            )
                        })
                        .collect();
                    if s.head.is_empty() {
                        s.head = list
                    } else {
                        s.trailers = list
                    }
                }
                Event::Reset { stream, .. } => self.seen.entry(stream).or_default().reset = true,
                _ => {}
            }
        }
    }
}

impl drive::Endpoint for H2Client {
    fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        let r = self.conn.recv(input, now);
        if let Some(d) = r.data {
            self.body
                .entry(d.stream)
                .or_default()
                .extend_from_slice(d.bytes);
            self.conn.release_data(d.stream, d.bytes.len());
        }
        self.take_events();
        r.consumed
    }
    fn wants_transmit(&self) -> bool {
        self.conn.wants_transmit()
    }
    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        let n = self.conn.poll_transmit(out);
        self.take_events();
        n
    }
}

impl std::ops::Deref for H2Client {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.conn
    }
}

impl std::ops::DerefMut for H2Client {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.conn
    }
}

/// The server engine's application: requests go to [`REQUESTS`], other
/// events are kept as text.
#[derive(Debug, Default)]
struct EngineApp {
    events: Vec<String>,
}

impl<S: CallStore> App<Server<S>> for EngineApp {
    fn take_events(&mut self, server: &mut Server<S>) {
        while let Some(e) = server.poll_event() {
            if let ServerEvent::Request { call } = e {
                let request = server.request(call).unwrap();
                if let RequestKind::CallTool { name, tool, .. } = request.kind {
                    assert_eq!(TOOLS[tool].name, name);
                }
                let owned = OwnedRequest {
                    call,
                    method: request.method().to_owned(),
                    params: request.params.to_vec(),
                };
                REQUESTS.with(|r| r.borrow_mut().push(owned));
            } else {
                self.events.push(format!("{e:?}"));
            }
        }
    }
}

/// Room in each direction of the pipes.
const PIPE: usize = 32768;

/// Our HTTP/2 client and the server engine, joined by the pipes of
/// `mcpwire-sim` cut as [`split`] says.
struct Pair<S: CallStore = SlabStore<8192, 8>> {
    client: H2Client,
    server: Side<Server<S>, EngineApp>,
    /// Client to server.
    up: Pipe<PIPE>,
    /// Server to client.
    down: Pipe<PIPE>,
    now: Instant,
    /// Request bodies not sent yet.
    pending: Vec<(StreamRef, Vec<u8>)>,
}

impl Pair {
    fn new() -> Self {
        Self::with(SlabStore::new(), ServerConfig::default())
    }
}

impl<S: CallStore> Pair<S> {
    fn with(store: S, config: ServerConfig<'static>) -> Self {
        Self::serving(store, config, checked(registry(&TOOLS)))
    }

    fn serving(store: S, config: ServerConfig<'static>, registry: Registry<'static>) -> Self {
        REQUESTS.with(|r| r.borrow_mut().clear());
        Pair {
            client: H2Client {
                conn: Client::new(Role::Client, Config::default(), Instant::ZERO),
                seen: HashMap::new(),
                body: HashMap::new(),
            },
            server: Side {
                endpoint: Server::new(registry, config, store, Instant::ZERO),
                app: EngineApp::default(),
            },
            up: Pipe::new(split()),
            down: Pipe::new(split()),
            now: Instant::ZERO,
            pending: Vec::new(),
        }
    }

    /// Runs both sides until nothing moves, then splits the bodies the
    /// client received into messages.
    fn run(&mut self) {
        self.server.take_events();
        self.client.take_events();
        for _ in 0..100_000 {
            let sent = self.send_pending();
            let moved = exchange(
                &mut self.client,
                &mut self.up,
                &mut self.server,
                &mut self.down,
                self.now,
            )
            .unwrap_or_else(|side| panic!("{side:?} is stuck ({:?})", split()));
            if !sent && moved == 0 {
                break;
            }
        }
        // A message not whole yet waits for the next run.
        let mut partial = Vec::new();
        for (stream, body) in self.client.body.drain() {
            let s = self.client.seen.entry(stream).or_default();
            let mut rest = &body[..];
            while rest.len() >= 5 {
                let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
                let Some(msg) = rest.get(5..5 + len) else {
                    break;
                };
                // JsonRpcMessage: 0x0a, varint length, JSON.
                let mut at = 1;
                let mut n = 0usize;
                let mut shift = 0;
                loop {
                    let b = msg[at];
                    n |= usize::from(b & 0x7f) << shift;
                    at += 1;
                    shift += 7;
                    if b & 0x80 == 0 {
                        break;
                    }
                }
                s.messages
                    .push(String::from_utf8(msg[at..at + n].to_vec()).unwrap());
                rest = &rest[5 + len..];
            }
            if !rest.is_empty() {
                partial.push((stream, rest.to_vec()));
            }
        }
        self.client.body.extend(partial);
    }

    /// Runs both sides until nothing moves, whole writes at a time, and
    /// returns the octets the server wrote (the client keeps a response
    /// that the server reset after it, so its events do not show the
    /// RST_STREAM).
    fn run_tapped(&mut self) -> Vec<u8> {
        let mut wire = Vec::new();
        let mut buf = vec![0u8; PIPE];
        loop {
            let up = drive::Endpoint::poll_transmit(&mut self.client, &mut buf);
            let mut at = 0;
            while at < up {
                at += drive::Endpoint::recv(&mut self.server, &buf[at..up], self.now);
            }
            let down = drive::Endpoint::poll_transmit(&mut self.server, &mut buf);
            wire.extend_from_slice(&buf[..down]);
            let mut at = 0;
            while at < down {
                at += drive::Endpoint::recv(&mut self.client, &buf[at..down], self.now);
            }
            if up == 0 && down == 0 {
                return wire;
            }
        }
    }

    fn call(&mut self, headers: &[(&str, &str)], json: &str) -> StreamRef {
        self.call_bytes(headers, json.as_bytes())
    }

    /// [`Pair::call`] with a body that need not be UTF-8.
    fn call_bytes(&mut self, headers: &[(&str, &str)], json: &[u8]) -> StreamRef {
        self.call_wire(headers, frame(json))
    }

    /// A call whose request DATA is `wire` (any number of messages, or
    /// none), then END_STREAM.
    fn call_wire(&mut self, headers: &[(&str, &str)], framed: Vec<u8>) -> StreamRef {
        let s = self.client.open_stream().unwrap();
        let mut fields = vec![
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", TUNNEL_PATH),
            Field::new(b":authority", b"localhost"),
            Field::new(b"content-type", b"application/grpc"),
            Field::new(b"te", b"trailers"),
        ];
        for (n, v) in headers {
            fields.push(Field::new(n.as_bytes(), v.as_bytes()));
        }
        self.client
            .send_headers(s, fields.iter().copied(), false)
            .unwrap();
        self.pending.push((s, framed));
        self.send_pending();
        s
    }

    /// Sends what the windows and the transmit buffer take of the request
    /// bodies (the last piece with END_STREAM).
    fn send_pending(&mut self) -> bool {
        let mut moved = false;
        for (s, rest) in &mut self.pending {
            let n = self.client.send_data(*s, rest, true).unwrap();
            rest.drain(..n);
            moved |= n > 0;
        }
        self.pending.retain(|(_, rest)| !rest.is_empty());
        moved
    }
}

/// One gRPC message of the tunnel: the prefix, then `JsonRpcMessage`
/// (field 1: tag, varint length, the JSON).
fn frame(json: &[u8]) -> Vec<u8> {
    let mut msg = vec![0x0a];
    let mut len = json.len();
    while len >= 0x80 {
        msg.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    msg.push(len as u8);
    msg.extend_from_slice(json);
    let mut framed = write_prefix(msg.len() as u32).to_vec();
    framed.extend_from_slice(&msg);
    framed
}

struct OwnedRequest {
    call: mcpwire_core::mcp::server::CallId,
    method: String,
    params: Vec<u8>,
}

thread_local! {
    static REQUESTS: std::cell::RefCell<Vec<OwnedRequest>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn mirrored<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(n) = name {
        h.push(("mcp-name", n));
    }
    h
}

#[test]
fn tools_list_is_answered_by_the_engine() {
    each_split(|| {
        let mut p = Pair::new();
        let s = p.call(
            &mirrored("tools/list", None),
            &format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{{{META}}}}}"#),
        );
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.trailer("grpc-status"), Some("0"), "{seen:?}");
        assert_eq!(seen.messages.len(), 1);
        let m = seen.messages[0].as_bytes();
        assert_eq!(json::validate(m, 32), Ok(()));
        assert_eq!(json::get(m, b"id"), Some(&b"7"[..]));
        let tools = json::get(json::get(m, b"result").unwrap(), b"tools").unwrap();
        assert_eq!(json::elements(tools).count(), 2);
    });
}

#[test]
fn a_tool_call_reaches_the_application_and_its_answer_the_client() {
    each_split(|| {
        let mut p = Pair::new();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}},{META}}}}}"#
        );
        let s = p.call(&mirrored("tools/call", Some("echo")), &body);
        p.run();
        let requests: Vec<OwnedRequest> = REQUESTS.with(|r| r.borrow_mut().drain(..).collect());
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].method, "tools/call");
        let args = json::get(&requests[0].params, b"arguments").unwrap();
        assert!(json::str_eq(json::get(args, b"text").unwrap(), b"hi"));
        let call = requests[0].call;
        p.server
            .notify(
                call,
                "notifications/progress",
                br#"{"progressToken":1,"progress":1}"#,
            )
            .unwrap();
        p.run();
        p.server
            .respond(call, br#"{"content":[{"type":"text","text":"hi"}]}"#)
            .unwrap();
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.messages.len(), 2, "{seen:?}");
        assert!(seen.messages[0].contains("notifications/progress"));
        assert!(seen.messages[1].starts_with(r#"{"jsonrpc":"2.0","id":"a","result":"#));
        assert_eq!(seen.trailer("grpc-status"), Some("0"));
    });
}

#[test]
fn errors_before_the_handler_end_the_call_in_the_trailers() {
    each_split(|| {
        let mut p = Pair::new();
        // Missing mcp-method: -32020, INVALID_ARGUMENT, mcp-error-bin with the id.
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{{{META}}}}}"#);
        let s = p.call(&[("mcp-protocol-version", "2026-07-28")], &body);
        // Not JSON: -32700.
        let t = p.call(&mirrored("tools/list", None), "{nope");
        // Unsupported version in both header and body: -32022.
        let old = r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let u = p.call(
            &[
                ("mcp-protocol-version", "2099-01-01"),
                ("mcp-method", "tools/list"),
            ],
            old,
        );
        p.run();
        let seen = &p.client.seen[&s];
        assert!(seen.messages.is_empty());
        assert_eq!(
            seen.trailer("grpc-status"),
            Some(Code::InvalidArgument.as_bytes()).map(|b| std::str::from_utf8(b).unwrap())
        );
        assert_eq!(seen.trailer("mcp-error-code"), Some("-32020"));
        let bin = seen.trailer("mcp-error-bin").unwrap();
        let mut decoded = vec![0u8; bin.len()];
        let n = base64::decode(bin.as_bytes(), &mut decoded).unwrap();
        let err = &decoded[..n];
        assert_eq!(json::get(err, b"id"), Some(&b"3"[..]));
        assert_eq!(
            json::get(json::get(err, b"error").unwrap(), b"code"),
            Some(&b"-32020"[..])
        );
        assert_eq!(p.client.seen[&t].trailer("mcp-error-code"), Some("-32700"));
        let u = &p.client.seen[&u];
        assert_eq!(u.trailer("mcp-error-code"), Some("-32022"));
        let bin = u.trailer("mcp-error-bin").unwrap();
        let mut decoded = vec![0u8; bin.len()];
        let n = base64::decode(bin.as_bytes(), &mut decoded).unwrap();
        let data = json::get(json::get(&decoded[..n], b"error").unwrap(), b"data").unwrap();
        assert!(json::str_eq(
            json::get(data, b"requested").unwrap(),
            b"2099-01-01"
        ));
    });
}

#[test]
fn unknown_tool_and_method_are_in_band_errors_with_status_0() {
    each_split(|| {
        let mut p = Pair::new();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"nope",{META}}}}}"#
        );
        let s = p.call(&mirrored("tools/call", Some("nope")), &body);
        let body = format!(r#"{{"jsonrpc":"2.0","id":2,"method":"x/y","params":{{{META}}}}}"#);
        let t = p.call(&mirrored("x/y", None), &body);
        p.run();
        for (stream, code) in [(s, "-32602"), (t, "-32601")] {
            let seen = &p.client.seen[&stream];
            assert_eq!(seen.trailer("grpc-status"), Some("0"), "{seen:?}");
            let err = json::get(seen.messages[0].as_bytes(), b"error").unwrap();
            assert_eq!(json::get(err, b"code"), Some(code.as_bytes()));
        }
    });
}

#[test]
fn annotated_arguments_must_be_mirrored() {
    each_split(|| {
        let mut p = Pair::new();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"lookup","arguments":{{"region":"eu"}},{META}}}}}"#
        );
        let mut ok = mirrored("tools/call", Some("lookup"));
        ok.push(("mcp-param-region", "eu"));
        let good = p.call(&ok, &body);
        let bad = p.call(&mirrored("tools/call", Some("lookup")), &body);
        p.run();
        // Only the mirrored call reaches the application, and its answer
        // reaches the client.
        let requests = take_requests();
        assert_eq!(requests.len(), 1);
        p.server
            .respond(requests[0].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        let seen = &p.client.seen[&good];
        assert_eq!(seen.trailer("grpc-status"), Some("0"), "{seen:?}");
        assert_eq!(seen.messages.len(), 1, "{seen:?}");
        assert!(seen.messages[0].starts_with(r#"{"jsonrpc":"2.0","id":1,"result":"#));
        let seen = &p.client.seen[&bad];
        assert_eq!(seen.trailer("mcp-error-code"), Some("-32020"), "{seen:?}");
        assert!(seen.messages.is_empty(), "{seen:?}");
    });
}

/// A member twice in `params`, `_meta` or `arguments` (in any spelling)
/// is -32600 and a mirrored header given twice -32020, both in the
/// trailers before any handler: the check would read the first of each,
/// a handler or a proxy the last (issue #32, A3).
#[test]
fn repeated_members_and_mirrored_headers_are_refused() {
    each_split(|| {
        let mut p = Pair::new();
        let lookup = |arguments: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"lookup","arguments":{arguments},{META}}}}}"#
            )
        };
        let mut us_west = mirrored("tools/call", Some("lookup"));
        us_west.push(("mcp-param-region", "us-west"));
        let mut refused = Vec::new();
        for arguments in [
            r#"{"region":"us-west","region":"eu-secret"}"#,
            r#"{"region":"us-west","\u0072egion":"eu-secret"}"#,
        ] {
            refused.push((p.call(&us_west, &lookup(arguments)), "-32600"));
        }
        // `Mcp-Name: echo` checked, `lookup` run by whoever reads the last.
        let two_names = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"x"}},"name":"lookup",{META}}}}}"#
        );
        refused.push((
            p.call(&mirrored("tools/call", Some("echo")), &two_names),
            "-32600",
        ));
        let versions = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocol\u0056ersion":"1999-01-01"}}}"#;
        refused.push((p.call(&mirrored("tools/list", None), versions), "-32600"));
        p.run();
        // Metadata given twice.
        let good = lookup(r#"{"region":"us-west"}"#);
        for extra in [
            ("mcp-param-region", "eu-secret"),
            ("mcp-name", "echo"),
            ("mcp-method", "tools/call"),
            ("mcp-protocol-version", "2026-07-28"),
        ] {
            let mut twice = us_west.clone();
            twice.push(extra);
            refused.push((p.call(&twice, &good), "-32020"));
        }
        let served = p.call(&us_west, &good);
        p.run();
        for (s, code) in refused {
            let seen = &p.client.seen[&s];
            assert_eq!(seen.trailer("mcp-error-code"), Some(code), "{seen:?}");
            assert_eq!(seen.trailer("grpc-status"), Some("3"), "{seen:?}");
            assert!(seen.messages.is_empty(), "{seen:?}");
        }
        // Only the one-valued call reached the application.
        let requests = take_requests();
        assert_eq!(requests.len(), 1);
        p.server
            .respond(requests[0].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        assert_eq!(p.client.seen[&served].trailer("grpc-status"), Some("0"));
    });
}

#[test]
fn wrong_method_content_type_and_path() {
    each_split(|| {
        let mut p = Pair::new();
        let s = p.client.open_stream().unwrap();
        p.client
            .send_headers(
                s,
                [
                    Field::new(b":method", b"POST"),
                    Field::new(b":scheme", b"http"),
                    Field::new(b":path", b"/other.Service/Nope"),
                    Field::new(b":authority", b"x"),
                    Field::new(b"content-type", b"application/grpc"),
                ],
                true,
            )
            .unwrap();
        let t = p.client.open_stream().unwrap();
        p.client
            .send_headers(
                t,
                [
                    Field::new(b":method", b"POST"),
                    Field::new(b":scheme", b"http"),
                    Field::new(b":path", TUNNEL_PATH),
                    Field::new(b":authority", b"x"),
                    Field::new(b"content-type", b"application/json"),
                ],
                true,
            )
            .unwrap();
        p.run();
        assert_eq!(p.client.seen[&s].trailer("grpc-status"), Some("12"));
        assert_eq!(p.client.seen[&t].trailer(":status"), Some("415"));
    });
}

#[test]
fn deadline_and_reset_cancel_the_handler() {
    each_split(|| {
        let mut p = Pair::new();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{}},{META}}}}}"#
        );
        let mut h = mirrored("tools/call", Some("echo"));
        h.push(("grpc-timeout", "100m"));
        let timed = p.call(&h, &body);
        let cancelled = p.call(
            &mirrored("tools/call", Some("echo")),
            &body.replace("\"id\":1", "\"id\":2"),
        );
        p.run();
        assert_eq!(REQUESTS.with(|r| r.borrow_mut().drain(..).count()), 2);
        assert_eq!(p.server.poll_timeout(), Some(Instant::from_millis(100)));
        // The client cancels one call; the deadline passes for the other.
        p.client
            .reset(cancelled, mcpwire_core::h2::ErrorCode::CANCEL)
            .unwrap();
        p.run();
        p.now = Instant::from_millis(150);
        p.server.handle_timeout(p.now);
        p.run();
        let reasons = &p.server.app.events;
        assert!(
            reasons.iter().any(|r| r.contains("reason: Reset")),
            "{reasons:?}"
        );
        assert!(
            reasons.iter().any(|r| r.contains("reason: Deadline")),
            "{reasons:?}"
        );
        assert_eq!(p.client.seen[&timed].trailer("grpc-status"), Some("4"));
    });
}

/// The client's metadata builder and the server's checks agree, also on
/// values that travel as `=?base64?…?=`.
#[test]
fn client_built_metadata_passes_the_server_checks() {
    each_split(|| {
        let mut p = Pair::new();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"lookup","arguments":{{"region":"Hello, 世界"}},{META}}}}}"#
        );
        let mut owned: Vec<(String, String)> = Vec::new();
        mcpwire_core::mcp::client::mirror_headers(
            body.as_bytes(),
            Some(TOOLS[1].input_schema.as_bytes()),
            |n, v| {
                owned.push((
                    String::from_utf8(n.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                ));
            },
        )
        .unwrap();
        assert!(
            owned
                .iter()
                .any(|(n, v)| n == "mcp-param-region" && v.starts_with("=?base64?")),
            "{owned:?}"
        );
        let headers: Vec<(&str, &str)> = owned
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let s = p.call(&headers, &body);
        p.run();
        let requests: Vec<OwnedRequest> = REQUESTS.with(|r| r.borrow_mut().drain(..).collect());
        assert_eq!(requests.len(), 1, "{:?}", p.client.seen.get(&s));
    });
}

/// With authorization on, nothing is answered before the application
/// accepts the credentials: a refused call ends UNAUTHENTICATED with a
/// `www-authenticate` trailer; an accepted one shows its principal.
#[test]
fn authorization_comes_before_any_answer() {
    each_split(|| {
        let config = ServerConfig {
            authorize: true,
            ..ServerConfig::default()
        };
        let mut p = Pair::with(SlabStore::<8192, 8>::new(), config);
        let list =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
        let mut bad = mirrored("tools/list", None);
        bad.push(("authorization", "Bearer wrong"));
        let refused = p.call(&bad, &list);
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"echo","arguments":{{}},{META}}}}}"#
        );
        let mut good = mirrored("tools/call", Some("echo"));
        good.push(("authorization", "Bearer right"));
        let accepted = p.call(&good, &call);
        // Feed the requests; the engine asks before it answers anything.
        // The engine is fed without its application, to see the asks.
        p.up.transmit(&mut p.client);
        let server = &mut p.server.endpoint;
        let mut asks = Vec::new();
        loop {
            while let Some(e) = server.poll_event() {
                if let ServerEvent::Authorize { call } = e {
                    asks.push((call, server.bearer_token(call).map(str::to_owned)));
                }
            }
            if p.up.is_empty() {
                break;
            }
            let used = drive::Endpoint::recv(server, p.up.piece(), p.now);
            p.up.consume(used);
            if used == 0 {
                assert!(p.down.transmit(server) > 0, "the engine is stuck");
            }
        }
        assert_eq!(asks.len(), 2);
        for (call, token) in asks {
            if token.as_deref() == Some("right") {
                p.server
                    .authorize(call, Decision::Allow { principal: "alice" });
            } else {
                p.server.authorize(call, Decision::Unauthenticated);
            }
        }
        p.run();
        let r = &p.client.seen[&refused];
        assert_eq!(r.trailer("grpc-status"), Some("16"), "{r:?}");
        assert_eq!(
            r.trailer("www-authenticate"),
            Some(r#"Bearer realm="mcpwire", error="invalid_token""#)
        );
        assert!(r.messages.is_empty());
        // The accepted call reaches the application, and its answer the
        // client.
        let requests = take_requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].method, "tools/call");
        p.server
            .respond(requests[0].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        let a = &p.client.seen[&accepted];
        assert_eq!(a.trailer("grpc-status"), Some("0"), "{a:?}");
        assert_eq!(a.messages.len(), 1, "{a:?}");
        assert!(a.messages[0].starts_with(r#"{"jsonrpc":"2.0","id":2,"result":"#));
    });
}

fn echo_call(id: u32, text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}},{META}}}}}"#
    )
}

fn take_requests() -> Vec<OwnedRequest> {
    REQUESTS.with(|r| r.borrow_mut().drain(..).collect())
}

/// Every way a call ends gives its buffer back: answered by the engine,
/// answered by the application, refused before the handler, reset by the
/// client, past its deadline.
#[test]
fn every_ended_call_gives_its_buffer_back() {
    each_split(|| {
        let mut p = Pair::with(SlabStore::<4096, 3>::new(), ServerConfig::default());
        let list =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
        let listed = p.call(&mirrored("tools/list", None), &list);
        let refused = p.call(&[("mcp-protocol-version", "2026-07-28")], &list);
        let answered = p.call(&mirrored("tools/call", Some("echo")), &echo_call(2, "a"));
        let mut timed = mirrored("tools/call", Some("echo"));
        timed.push(("grpc-timeout", "10m"));
        let timed = p.call(&timed, &echo_call(3, "b"));
        p.run();
        let requests = take_requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(p.client.seen[&listed].trailer("grpc-status"), Some("0"));
        assert_eq!(
            p.client.seen[&refused].trailer("mcp-error-code"),
            Some("-32020")
        );
        // Two handlers hold their buffers.
        assert_eq!(p.server.store().in_use(), 2);
        p.server.respond(requests[0].call, b"{}").unwrap();
        p.now = Instant::from_millis(20);
        p.server.handle_timeout(p.now);
        p.run();
        assert_eq!(p.client.seen[&answered].trailer("grpc-status"), Some("0"));
        assert_eq!(p.client.seen[&timed].trailer("grpc-status"), Some("4"));
        assert_eq!(p.server.store().in_use(), 0);
        // A reset call, too.
        let reset = p.call(&mirrored("tools/call", Some("echo")), &echo_call(4, "c"));
        p.run();
        assert_eq!(take_requests().len(), 1);
        assert_eq!(p.server.store().in_use(), 1);
        p.client
            .reset(reset, mcpwire_core::h2::ErrorCode::CANCEL)
            .unwrap();
        p.run();
        assert_eq!(p.server.store().in_use(), 0);
    });
}

/// With every buffer held, a new call is refused with REFUSED_STREAM (not
/// processed: gRPC clients retry it), and once a call ends the next one
/// is served.
#[test]
fn a_full_store_refuses_the_stream_and_recovers() {
    each_split(|| {
        let mut p = Pair::with(SlabStore::<4096, 1>::new(), ServerConfig::default());
        let held = p.call(&mirrored("tools/call", Some("echo")), &echo_call(1, "a"));
        let refused = p.call(&mirrored("tools/call", Some("echo")), &echo_call(2, "b"));
        p.run();
        let requests = take_requests();
        assert_eq!(requests.len(), 1);
        assert!(
            p.client.seen[&refused].reset,
            "{:?}",
            p.client.seen.get(&refused)
        );
        assert!(p.client.seen[&refused].messages.is_empty());
        p.server.respond(requests[0].call, b"{}").unwrap();
        p.run();
        assert_eq!(p.client.seen[&held].trailer("grpc-status"), Some("0"));
        let next = p.call(&mirrored("tools/call", Some("echo")), &echo_call(3, "c"));
        p.run();
        let requests = take_requests();
        assert_eq!(requests.len(), 1);
        p.server.respond(requests[0].call, b"{}").unwrap();
        p.run();
        assert_eq!(p.client.seen[&next].trailer("grpc-status"), Some("0"));
    });
}

/// A request or a response larger than the store's buffers: the request
/// ends with RESOURCE_EXHAUSTED, the response is refused to the
/// application with the size it needed, and the engine answers -32603 in
/// its place; the connection goes on.
#[test]
fn messages_larger_than_the_store_gives() {
    each_split(|| {
        let mut p = Pair::with(SlabStore::<1024, 2>::new(), ServerConfig::default());
        let big = p.call(
            &mirrored("tools/call", Some("echo")),
            &echo_call(1, &"x".repeat(2000)),
        );
        let small = p.call(&mirrored("tools/call", Some("echo")), &echo_call(2, "y"));
        p.run();
        assert_eq!(p.client.seen[&big].trailer("grpc-status"), Some("8"));
        let requests = take_requests();
        assert_eq!(requests.len(), 1);
        let result = format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
            "z".repeat(2000)
        );
        match p.server.respond(requests[0].call, result.as_bytes()) {
            Err(mcpwire_core::mcp::server::SendError::TooLarge { needed }) => {
                assert!(needed > 2000, "{needed}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            p.server.respond(requests[0].call, b"{}"),
            Err(mcpwire_core::mcp::server::SendError::Gone)
        );
        p.run();
        let s = &p.client.seen[&small];
        assert_eq!(s.trailer("grpc-status"), Some("0"));
        assert_eq!(s.messages.len(), 1, "{s:?}");
        assert!(s.messages[0].contains(r#""error":{"code":-32603"#), "{s:?}");
        assert_eq!(p.server.store().in_use(), 0);
    });
}

/// A growing store: the buffer follows the request (50 KB) and the
/// response (200 KB, several flow-control windows), and is returned.
#[test]
fn a_growing_store_carries_large_messages() {
    each_split(|| {
        let store = VecStore {
            max: 1 << 20,
            ..VecStore::default()
        };
        let mut p = Pair::with(store, ServerConfig::default());
        let text = "q".repeat(50_000);
        let s = p.call(&mirrored("tools/call", Some("echo")), &echo_call(1, &text));
        p.run();
        let requests = take_requests();
        assert_eq!(requests.len(), 1);
        let args = json::get(&requests[0].params, b"arguments").unwrap();
        assert!(json::str_eq(
            json::get(args, b"text").unwrap(),
            text.as_bytes()
        ));
        assert_eq!(p.server.store().live, 1);
        let out = "r".repeat(200_000);
        let result = format!(r#"{{"content":[{{"type":"text","text":"{out}"}}]}}"#);
        p.server
            .respond(requests[0].call, result.as_bytes())
            .unwrap();
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.trailer("grpc-status"), Some("0"));
        assert_eq!(seen.messages.len(), 1);
        assert!(seen.messages[0].contains(&out));
        assert_eq!(p.server.store().live, 0);
        assert!(p.server.store().peak_bytes > 200_000);
    });
}

/// `subscriptions/listen` is the engine's: acknowledged with the filter the
/// server honours (asked and offered), every event tagged with the
/// subscription id, only the changes the filter wants, and the final result
/// when the server goes away.
#[test]
fn listen_honours_the_filter_and_tags_every_event() {
    each_split(|| {
        let mut r = registry(&TOOLS);
        r.listen = true;
        let mut p = Pair::serving(SlabStore::<8192, 8>::new(), ServerConfig::default(), r);
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["file:///x"]}},{META}}}}}"#
        );
        let s = p.call(&mirrored("subscriptions/listen", None), &body);
        p.run();
        assert!(take_requests().is_empty(), "listen reached the application");
        let ack = &p.client.seen[&s].messages;
        assert_eq!(ack.len(), 1, "{ack:?}");
        assert!(ack[0].contains(r#""method":"notifications/subscriptions/acknowledged""#));
        // Prompts and resources are not offered: only tools are honoured.
        assert!(
            ack[0].contains(r#""notifications":{"toolsListChanged":true}"#),
            "{}",
            ack[0]
        );
        assert!(ack[0].contains(r#""io.modelcontextprotocol/subscriptionId":"sub-1""#));
        assert_eq!(p.server.publish(ListChange::PromptsListChanged), 0);
        assert_eq!(p.server.publish(ListChange::ToolsListChanged), 1);
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.messages.len(), 2, "{seen:?}");
        assert!(seen.messages[1].contains(r#""method":"notifications/tools/list_changed""#));
        assert!(seen.messages[1].contains(r#""io.modelcontextprotocol/subscriptionId":"sub-1""#));
        assert_eq!(seen.trailer("grpc-status"), None, "the stream stays open");
        p.server.go_away();
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.messages.len(), 3, "{seen:?}");
        let last = &seen.messages[2];
        assert!(
            last.contains(r#""id":"sub-1","result":{"resultType":"complete""#),
            "{last}"
        );
        assert!(last.contains(r#""io.modelcontextprotocol/subscriptionId":"sub-1""#));
        assert_eq!(seen.trailer("grpc-status"), Some("0"));
        assert_eq!(p.server.store().in_use(), 0);
    });
}

/// Without a listen source nothing is honoured, and a listen request
/// without `notifications` is -32602.
#[test]
fn listen_without_a_source_or_a_filter() {
    each_split(|| {
        let mut p = Pair::new();
        let ok = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
        );
        let bad = format!(
            r#"{{"jsonrpc":"2.0","id":6,"method":"subscriptions/listen","params":{{{META}}}}}"#
        );
        let a = p.call(&mirrored("subscriptions/listen", None), &ok);
        let b = p.call(&mirrored("subscriptions/listen", None), &bad);
        p.run();
        let ack = &p.client.seen[&a].messages;
        assert!(ack[0].contains(r#""notifications":{}"#), "{ack:?}");
        assert!(ack[0].contains(r#""io.modelcontextprotocol/subscriptionId":5"#));
        assert_eq!(p.server.publish(ListChange::ToolsListChanged), 0);
        let refused = &p.client.seen[&b];
        assert!(
            refused.messages[0].contains(r#""code":-32602"#),
            "{refused:?}"
        );
        assert_eq!(refused.trailer("grpc-status"), Some("0"));
    });
}

/// A reset listen stream is forgotten without an event for the
/// application, and its buffer goes back.
#[test]
fn a_reset_listen_stream_is_forgotten() {
    each_split(|| {
        let mut p = Pair::new();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{{"notifications":{{}},{META}}}}}"#
        );
        let s = p.call(&mirrored("subscriptions/listen", None), &body);
        p.run();
        assert_eq!(p.server.store().in_use(), 1);
        p.client
            .reset(s, mcpwire_core::h2::ErrorCode::CANCEL)
            .unwrap();
        p.run();
        assert_eq!(p.server.store().in_use(), 0);
        assert!(
            p.server.app.events.iter().all(|e| !e.contains("Cancelled")),
            "{:?}",
            p.server.app.events
        );
    });
}

/// Every running call reset at once, with new calls in the same bytes: the
/// application hears of every end (the events live in the call records,
/// not in a queue that could drop them), and each new call is either handed
/// over or refused as not processed (REFUSED_STREAM), never lost.
#[test]
fn a_burst_of_resets_and_new_calls_loses_no_event() {
    each_split(|| {
        let mut p = Pair::new();
        let streams: Vec<StreamRef> = (0..8)
            .map(|i| p.call(&mirrored("tools/call", Some("echo")), &echo_call(i, "x")))
            .collect();
        p.run();
        let first = take_requests();
        assert_eq!(first.len(), 8);
        for s in &streams {
            p.client
                .reset(*s, mcpwire_core::h2::ErrorCode::CANCEL)
                .unwrap();
        }
        let again: Vec<StreamRef> = (10..18)
            .map(|i| p.call(&mirrored("tools/call", Some("echo")), &echo_call(i, "y")))
            .collect();
        p.run();
        let cancelled = p
            .server
            .app
            .events
            .iter()
            .filter(|e| e.contains("reason: Reset"))
            .count();
        assert_eq!(cancelled, 8, "{:?}", p.server.app.events);
        let handed = take_requests();
        let refused = again
            .iter()
            .filter(|s| p.client.seen.get(s).is_some_and(|s| s.reset))
            .count();
        assert_eq!(
            handed.len() + refused,
            8,
            "{} handed, {refused} refused",
            handed.len()
        );
        for r in &handed {
            p.server.respond(r.call, b"{}").unwrap();
        }
        p.run();
        assert_eq!(p.server.store().in_use(), 0);
    });
}

/// Issue #11 item 2: mirrored values are compared at any length the header
/// list takes (a signed URL as `mcp-name`, a long annotated argument, both
/// raw and as the Base64 sentinel); a list over the limit gets the limit's
/// answer (431), not -32020.
#[test]
fn mirrored_values_of_any_length_are_compared() {
    for len in [300, 4096] {
        // Call buffers that hold a 4 KB name twice (request and answer).
        let mut p = Pair::with(SlabStore::<32768, 4>::new(), ServerConfig::default());
        let long = "n".repeat(len);
        // An unknown tool of that name: the headers match, so the answer is
        // the in-band "Unknown tool", not -32020.
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{long}",{META}}}}}"#
        );
        let unknown = p.call(&mirrored("tools/call", Some(&long)), &body);
        p.run();
        // A raw annotated value and one sent as the Base64 sentinel.
        let region = "r".repeat(len);
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"lookup","arguments":{{"region":"{region}"}},{META}}}}}"#
        );
        let mut headers = mirrored("tools/call", Some("lookup"));
        headers.push(("mcp-param-region", &region));
        let raw = p.call(&headers, &body);
        p.run();
        let accented = "é".repeat(len / 2);
        let mut encoded = vec![0u8; accented.len() * 2 + 16];
        let sentinel = std::str::from_utf8(
            mcpwire_core::mcp::mirror::encode_value(accented.as_bytes(), &mut encoded).unwrap(),
        )
        .unwrap()
        .to_owned();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"lookup","arguments":{{"region":"{accented}"}},{META}}}}}"#
        );
        let mut headers = mirrored("tools/call", Some("lookup"));
        headers.push(("mcp-param-region", &sentinel));
        let b64 = p.call(&headers, &body);
        p.run();
        // The same, one character different: -32020.
        let other = format!("{}x", &region[1..]);
        let mut headers = mirrored("tools/call", Some("lookup"));
        headers.push(("mcp-param-region", &other));
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"lookup","arguments":{{"region":"{region}"}},{META}}}}}"#
        );
        let differs = p.call(&headers, &body);
        p.run();
        let seen = &p.client.seen[&unknown];
        assert_eq!(seen.trailer("grpc-status"), Some("0"), "{len}: {seen:?}");
        let err = json::get(seen.messages[0].as_bytes(), b"error").unwrap();
        assert_eq!(json::get(err, b"code"), Some(&b"-32602"[..]), "{len}");
        let reached: Vec<OwnedRequest> = REQUESTS.with(|r| r.borrow_mut().drain(..).collect());
        assert_eq!(reached.len(), 2, "{len}: the lookups reach the tool");
        for stream in [raw, b64] {
            assert!(
                p.client
                    .seen
                    .get(&stream)
                    .is_none_or(|s| s.trailer("mcp-error-code").is_none()),
                "{len}"
            );
        }
        assert_eq!(
            p.client.seen[&differs].trailer("mcp-error-code"),
            Some("-32020"),
            "{len}"
        );
    }
    // Just over the 16 KiB header list (each field within the 8 KiB field
    // limit): 431 and a reset, no JSON-RPC error.
    let mut p = Pair::new();
    let name = "n".repeat(8000);
    let pad = "p".repeat(8300);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"{name}",{META}}}}}"#
    );
    let mut headers = mirrored("tools/call", Some(&name));
    headers.push(("x-pad", &pad));
    let over = p.call(&headers, &body);
    p.run();
    let seen = &p.client.seen[&over];
    assert_eq!(seen.trailer(":status"), Some("431"), "{seen:?}");
    assert_eq!(seen.trailer("mcp-error-code"), None, "{seen:?}");
    assert!(seen.messages.is_empty());
}

/// Issue #11 item 4: a malformed `grpc-timeout` is INVALID_ARGUMENT
/// "Invalid grpc-timeout" (not INTERNAL), before the handler runs.
#[test]
fn a_malformed_grpc_timeout_is_invalid_argument() {
    for bad in ["abc", "10", "123456789S", "-1S", "1x"] {
        let mut p = Pair::new();
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
        let mut h = mirrored("tools/list", None);
        h.push(("grpc-timeout", bad));
        let s = p.call(&h, &body);
        p.run();
        let seen = &p.client.seen[&s];
        assert_eq!(seen.trailer("grpc-status"), Some("3"), "{bad}: {seen:?}");
        assert_eq!(
            seen.trailer("grpc-message"),
            Some("Invalid grpc-timeout"),
            "{bad}"
        );
        assert!(seen.messages.is_empty(), "{bad}");
    }
}

/// Issue #11 item 6: `jsonrpc` bytes that are not UTF-8 are -32700 in the
/// trailers (the handler never sees them).
#[test]
fn a_message_that_is_not_utf8_is_a_parse_error() {
    let mut p = Pair::new();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"\xff"}},{META}}}}}"#
    );
    let mut bytes = body.into_bytes();
    let at = bytes.windows(4).position(|w| w == b"\\xff").unwrap();
    bytes.splice(at..at + 4, [0xff]);
    let s = p.call_bytes(&mirrored("tools/call", Some("echo")), &bytes);
    p.run();
    let seen = &p.client.seen[&s];
    assert_eq!(seen.trailer("mcp-error-code"), Some("-32700"), "{seen:?}");
    assert_eq!(seen.trailer("grpc-status"), Some("3"), "{seen:?}");
    assert!(seen.messages.is_empty());
    assert_eq!(REQUESTS.with(|r| r.borrow().len()), 0, "no handler ran");
}

/// Issue #11 item 6: the Base64 sentinel must be canonical (padded, zero
/// trailing bits), else -32020; the canonical text of the same value passes.
#[test]
fn the_base64_sentinel_must_be_canonical() {
    let mut p = Pair::new();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"lookup","arguments":{{"region":"eu"}},{META}}}}}"#
    );
    // "eu" is ZXU=; unpadded ZXU, and ZXV= (nonzero trailing bits) decode
    // to the same octets in a lenient decoder.
    let mut streams = Vec::new();
    for value in ["=?base64?ZXU=?=", "=?base64?ZXU?=", "=?base64?ZXV=?="] {
        let mut h = mirrored("tools/call", Some("lookup"));
        h.push(("mcp-param-region", value));
        streams.push(p.call(&h, &body));
        p.run();
    }
    assert_eq!(REQUESTS.with(|r| r.borrow_mut().drain(..).count()), 1);
    assert!(
        p.client
            .seen
            .get(&streams[0])
            .is_none_or(|s| s.trailer("mcp-error-code").is_none())
    );
    for s in &streams[1..] {
        assert_eq!(p.client.seen[s].trailer("mcp-error-code"), Some("-32020"));
    }
}

/// Issue #11 item 2: JSON-RPC ids up to the configured length (128 octets
/// by default) are echoed; a longer one is -32600 with id null, never a
/// cut or another id.
#[test]
fn ids_up_to_the_configured_length_and_a_clear_error_past_it() {
    for (limit, set) in [(128, false), (300, true)] {
        let mut p = Pair::with(SlabStore::<16384, 8>::new(), ServerConfig::default());
        if set {
            p.server.endpoint.set_max_id_len(limit);
        }
        let mut streams = Vec::new();
        for len in [limit, limit + 1] {
            // A string id of `len` octets of raw JSON, quotes included.
            let id = format!("\"{}\"", "i".repeat(len - 2));
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{{META}}}}}"#
            );
            streams.push((id, p.call(&mirrored("tools/list", None), &body)));
            p.run();
        }
        let (id, ok) = &streams[0];
        let seen = &p.client.seen[ok];
        assert_eq!(seen.trailer("grpc-status"), Some("0"), "{limit}: {seen:?}");
        assert_eq!(
            json::get(seen.messages[0].as_bytes(), b"id"),
            Some(id.as_bytes()),
            "{limit}"
        );
        let seen = &p.client.seen[&streams[1].1];
        assert_eq!(
            seen.trailer("mcp-error-code"),
            Some("-32600"),
            "{limit}: {seen:?}"
        );
        let bin = seen.trailer("mcp-error-bin").unwrap();
        let mut decoded = vec![0u8; bin.len()];
        let n = base64::decode(bin.as_bytes(), &mut decoded).unwrap();
        assert_eq!(
            json::get(&decoded[..n], b"id"),
            Some(&b"null"[..]),
            "{limit}"
        );
        assert!(
            seen.trailer("grpc-message")
                .unwrap()
                .contains("id longer than"),
            "{seen:?}"
        );
    }
}

/// Binding: "One Call carries one JSON-RPC request": a second request
/// message, and a call with no message, are -32600 in the trailers.
#[test]
fn a_second_message_and_no_message_are_invalid_requests() {
    let mut p = Pair::new();
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
    let mut two = frame(body.as_bytes());
    two.extend(frame(body.as_bytes()));
    let twice = p.call_wire(&mirrored("tools/list", None), two);
    p.run();
    let none = p.call_wire(&mirrored("tools/list", None), Vec::new());
    p.run();
    for s in [twice, none] {
        let seen = &p.client.seen[&s];
        assert_eq!(seen.trailer("mcp-error-code"), Some("-32600"), "{seen:?}");
        assert_eq!(seen.trailer("grpc-status"), Some("3"), "{seen:?}");
        assert!(seen.messages.is_empty(), "{seen:?}");
    }
}

/// Binding: "A notification from the client is a call the server answers
/// with an empty stream and grpc-status: 0".
#[test]
fn a_client_notification_gets_an_empty_stream_and_status_0() {
    let mut p = Pair::new();
    let body =
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/initialized","params":{{{META}}}}}"#);
    let s = p.call(&mirrored("notifications/initialized", None), &body);
    p.run();
    let seen = &p.client.seen[&s];
    assert_eq!(seen.trailer("grpc-status"), Some("0"), "{seen:?}");
    assert!(seen.messages.is_empty(), "{seen:?}");
    assert_eq!(seen.trailer("mcp-error-code"), None, "{seen:?}");
}

/// Binding: "An annotated integer outside the safe range of JavaScript also
/// gets -32020", from a raw peer that mirrors it as it is.
#[test]
fn an_unsafe_annotated_integer_from_a_raw_peer_is_32020() {
    // `lookup` second, as in TOOLS (the test application checks names by
    // index there).
    static INT_TOOLS: [ToolInfo<'static>; 2] = [
        support::mcp::ECHO,
        support::mcp::lookup(
            r#"{"type":"object","properties":{"limit":{"type":"integer","x-mcp-header":"Limit"}}}"#,
        ),
    ];
    let mut p = Pair::serving(
        SlabStore::<8192, 8>::new(),
        ServerConfig::default(),
        registry(&INT_TOOLS),
    );
    let mut streams = Vec::new();
    for limit in ["9007199254740991", "9007199254740993", "-9007199254740993"] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"lookup","arguments":{{"limit":{limit}}},{META}}}}}"#
        );
        let mut h = mirrored("tools/call", Some("lookup"));
        h.push(("mcp-param-limit", limit));
        streams.push(p.call(&h, &body));
        p.run();
    }
    assert_eq!(REQUESTS.with(|r| r.borrow_mut().drain(..).count()), 1);
    for s in &streams[1..] {
        assert_eq!(p.client.seen[s].trailer("mcp-error-code"), Some("-32020"));
    }
}

/// Binding: "A request without a timeout gets limits.request_timeout
/// (60 s)": the handler is cancelled and the call ends DEADLINE_EXCEEDED.
#[test]
fn a_call_without_grpc_timeout_gets_the_60_s_default() {
    let mut p = Pair::new();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{}},{META}}}}}"#
    );
    let s = p.call(&mirrored("tools/call", Some("echo")), &body);
    p.run();
    assert_eq!(REQUESTS.with(|r| r.borrow_mut().drain(..).count()), 1);
    assert_eq!(p.server.poll_timeout(), Some(Instant::from_millis(60_000)));
    p.now = Instant::from_millis(59_999);
    p.server.handle_timeout(p.now);
    p.run();
    let status = |p: &Pair| {
        p.client
            .seen
            .get(&s)
            .and_then(|x| x.trailer("grpc-status").map(str::to_owned))
    };
    assert_eq!(status(&p), None);
    p.now = Instant::from_millis(60_000);
    p.server.handle_timeout(p.now);
    p.run();
    assert_eq!(status(&p).as_deref(), Some("4"));
}

/// Binding: "A request that is not a POST gets HTTP status 405", and "Only
/// the identity encoding is used. A call with another grpc-encoding ends
/// with UNIMPLEMENTED" (identity itself is fine).
#[test]
fn a_get_is_405_and_a_compressed_call_unimplemented() {
    let mut p = Pair::new();
    let get = p.client.open_stream().unwrap();
    p.client
        .send_headers(
            get,
            [
                Field::new(b":method", b"GET"),
                Field::new(b":scheme", b"http"),
                Field::new(b":path", TUNNEL_PATH),
                Field::new(b":authority", b"x"),
                Field::new(b"content-type", b"application/grpc"),
            ],
            true,
        )
        .unwrap();
    p.run();
    let seen = &p.client.seen[&get];
    assert_eq!(seen.trailer(":status"), Some("405"), "{seen:?}");
    assert_eq!(seen.trailer("grpc-status"), None, "{seen:?}");

    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
    let mut streams = Vec::new();
    for encoding in ["gzip", "identity"] {
        let mut h = mirrored("tools/list", None);
        h.push(("grpc-encoding", encoding));
        streams.push(p.call(&h, &body));
        p.run();
    }
    let gzip = &p.client.seen[&streams[0]];
    assert_eq!(gzip.trailer("grpc-status"), Some("12"), "{gzip:?}");
    assert!(gzip.messages.is_empty());
    let identity = &p.client.seen[&streams[1]];
    assert_eq!(identity.trailer("grpc-status"), Some("0"), "{identity:?}");
    assert_eq!(identity.messages.len(), 1, "{identity:?}");
}

/// Binding: a deadline that passes while the response message is being
/// written cannot end the call with trailers (they would cut the message
/// short): the stream is reset with CANCEL, and the client gets neither a
/// status nor a message. The result (200 KB) is larger than the client's
/// window, and the deadline passes before its WINDOW_UPDATE arrives.
#[test]
fn a_deadline_that_passes_mid_message_resets_the_stream() {
    let store = VecStore {
        max: 1 << 20,
        ..VecStore::default()
    };
    let mut p = Pair::with(store, ServerConfig::default());
    let mut h = mirrored("tools/call", Some("echo"));
    h.push(("grpc-timeout", "100m"));
    let s = p.call(&h, &echo_call(1, "hi"));
    p.run();
    let requests = take_requests();
    assert_eq!(requests.len(), 1);
    let out = "r".repeat(200_000);
    let result = format!(r#"{{"content":[{{"type":"text","text":"{out}"}}]}}"#);
    p.server
        .respond(requests[0].call, result.as_bytes())
        .unwrap();
    p.now = Instant::from_millis(150);
    p.server.handle_timeout(p.now);
    p.run();
    let seen = &p.client.seen[&s];
    assert!(seen.reset, "{seen:?}");
    assert_eq!(seen.trailer("grpc-status"), None, "no trailers mid-message");
    assert!(seen.messages.is_empty(), "no message cut short");
    assert_eq!(p.server.store().live, 0, "the call's buffer is back");
}

/// Binding §9.2: "The server sends mcp-error-bin only when it has 4096
/// bytes or less." The call store is large enough for much more, so only
/// the cap leaves the value out: an error whose base64 is exactly 4096
/// octets is sent whole, one of 4100 is left out, and that call still ends
/// with `grpc-status`, `mcp-error-code` and `grpc-message`. The size is
/// set by the request's string id, which the error echoes.
#[test]
fn mcp_error_bin_over_4096_bytes_is_left_out() {
    let store = VecStore {
        max: 1 << 20,
        ..VecStore::default()
    };
    let mut p = Pair::with(store, ServerConfig::default());
    p.server.endpoint.set_max_id_len(8192);
    // Missing mcp-method: -32020 before the handler, in the trailers.
    let headers = [("mcp-protocol-version", "2026-07-28")];
    let call = |p: &mut Pair<VecStore>, id_len: usize| {
        let id = format!("\"{}\"", "i".repeat(id_len - 2));
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{{META}}}}}"#);
        let s = p.call(&headers, &body);
        p.run();
        (id, s)
    };
    let decode = |bin: &str| {
        let mut out = vec![0u8; bin.len()];
        let n = base64::decode(bin.as_bytes(), &mut out).unwrap();
        out.truncate(n);
        out
    };
    // The error's JSON without the id, measured on the wire.
    let (_, probe) = call(&mut p, 10);
    let json_len = decode(p.client.seen[&probe].trailer("mcp-error-bin").unwrap()).len();
    let rest = json_len - 10;
    // JSON of 3072 octets: base64 of 4096; 3073: 4100.
    let (id, at_cap) = call(&mut p, 3072 - rest);
    let (_, over) = call(&mut p, 3073 - rest);

    let seen = &p.client.seen[&at_cap];
    let bin = seen.trailer("mcp-error-bin").expect("4096 octets are sent");
    assert_eq!(bin.len(), 4096);
    let err = decode(bin);
    assert_eq!(err.len(), 3072);
    assert_eq!(json::get(&err, b"id"), Some(id.as_bytes()));

    let seen = &p.client.seen[&over];
    let left_out = seen.trailer("mcp-error-bin").map(str::len);
    assert_eq!(left_out, None, "octets of mcp-error-bin");
    assert_eq!(seen.trailer("grpc-status"), Some("3"), "{seen:?}");
    assert_eq!(seen.trailer("mcp-error-code"), Some("-32020"), "{seen:?}");
    assert!(seen.trailer("grpc-message").is_some_and(|m| !m.is_empty()));
    assert!(seen.messages.is_empty());
}

/// A DATA frame of the client's request: `body` and END_STREAM, on stream
/// `id`, as a raw peer writes it.
fn raw_data(id: u32, body: &[u8]) -> Vec<u8> {
    let len = body.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend([0x0, 0x1]);
    f.extend(id.to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// The frames in `wire`: type, stream id and payload.
fn frames(mut wire: &[u8]) -> impl Iterator<Item = (u8, u32, &[u8])> {
    std::iter::from_fn(move || {
        let len = u32::from_be_bytes([0, *wire.first()?, wire[1], wire[2]]) as usize;
        let kind = wire[3];
        let id = u32::from_be_bytes([wire[5], wire[6], wire[7], wire[8]]) & 0x7fff_ffff;
        let payload = &wire[9..9 + len];
        wire = &wire[9 + len..];
        Some((kind, id, payload))
    })
}

/// The codes of the RST_STREAM frames on stream `id` in `wire`.
fn rst_codes(wire: &[u8], id: u32) -> Vec<u32> {
    frames(wire)
        .filter(|&(kind, sid, _)| kind == 3 && sid == id)
        .map(|(_, _, p)| u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
        .collect()
}

/// Binding, early responses: "After a complete response, the server
/// resets a stream with RST_STREAM(NO_ERROR) when the request did not
/// end", and the request message that then arrives is ignored (RFC 9113
/// §5.1: frames on a stream the endpoint reset). Two cases: a response
/// before the request message (grpc-encoding gzip: UNIMPLEMENTED), and
/// -32600 after a second message. In both the client then sends its
/// (last) request message with END_STREAM, on the wire as a raw peer
/// would: no handler sees it, the server sends nothing more on the
/// stream, and the connection answers the next call.
#[test]
fn a_request_message_after_the_response_and_the_reset_is_ignored() {
    let mut p = Pair::new();
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
    let open = |p: &mut Pair, extra: &[(&str, &str)]| {
        let s = p.client.open_stream().unwrap();
        let mut fields = vec![
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", TUNNEL_PATH),
            Field::new(b":authority", b"localhost"),
            Field::new(b"content-type", b"application/grpc"),
            Field::new(b"te", b"trailers"),
        ];
        for (n, v) in mirrored("tools/list", None).iter().chain(extra) {
            fields.push(Field::new(n.as_bytes(), v.as_bytes()));
        }
        p.client
            .send_headers(s, fields.iter().copied(), false)
            .unwrap();
        s
    };
    // Stream 1: the response comes before the request message.
    let early = open(&mut p, &[("grpc-encoding", "gzip")]);
    let mut wire = p.run_tapped();
    // Stream 3: two messages, no END_STREAM yet.
    let twice = open(&mut p, &[]);
    let mut two = frame(body.as_bytes());
    two.extend(frame(body.as_bytes()));
    assert_eq!(p.client.send_data(twice, &two, false).unwrap(), two.len());
    wire.extend(p.run_tapped());
    p.run();
    for (s, id, status, code) in [(early, 1, "12", None), (twice, 3, "3", Some("-32600"))] {
        let seen = &p.client.seen[&s];
        assert_eq!(seen.trailer("grpc-status"), Some(status), "{seen:?}");
        assert_eq!(seen.trailer("mcp-error-code"), code, "{seen:?}");
        assert_eq!(rst_codes(&wire, id), [ErrorCode::NO_ERROR.0], "stream {id}");
    }
    let before = format!("{:?}", (&p.client.seen[&early], &p.client.seen[&twice]));
    // The request messages after the reset, with END_STREAM.
    for id in [1, 3] {
        let data = raw_data(id, &frame(body.as_bytes()));
        assert_eq!(p.server.endpoint.recv(&data, p.now), data.len());
        p.server.take_events();
    }
    let after = p.run_tapped();
    p.run();
    for id in [1, 3] {
        assert!(frames(&after).all(|(_, sid, _)| sid != id), "{after:?}");
    }
    assert!(frames(&after).all(|(kind, _, _)| kind != 7), "no GOAWAY");
    assert_eq!(take_requests().len(), 0, "no handler saw the late message");
    assert_eq!(
        format!("{:?}", (&p.client.seen[&early], &p.client.seen[&twice])),
        before,
        "nothing more on the reset streams"
    );
    assert!(!p.server.endpoint.is_closed());
    let next = p.call(&mirrored("tools/list", None), &body);
    p.run();
    let seen = &p.client.seen[&next];
    assert_eq!(seen.trailer("grpc-status"), Some("0"), "{seen:?}");
    assert_eq!(seen.messages.len(), 1, "{seen:?}");
}

/// A count of listen streams for the tests: at most `max`.
struct CountingQuota {
    max: usize,
    taken: std::sync::atomic::AtomicUsize,
}

impl mcpwire_core::mcp::server::ListenQuota for CountingQuota {
    fn acquire(&self, _: Option<&str>) -> bool {
        use std::sync::atomic::Ordering;
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }
    fn release(&self, _: Option<&str>) {
        self.taken.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Listen streams over the driver's quota are answered in-band -32603 (as
/// the MCP SDKs answer too many subscriptions), a stream's room comes back
/// when it ends, and a listen request longer than the engine keeps (a
/// long `resourceSubscriptions` filter) is -32602 (issue #32, A4).
#[test]
fn listen_streams_past_the_quota_or_with_a_long_filter_are_refused_in_band() {
    use mcpwire_core::mcp::server::ListenLimits;
    each_split(|| {
        let quota: &'static CountingQuota = Box::leak(Box::new(CountingQuota {
            max: 1,
            taken: Default::default(),
        }));
        let mut p = Pair::new();
        p.server.endpoint.set_listen_limits(ListenLimits {
            quota: Some(quota),
            max_request_bytes: 512,
        });
        let listen = |id: u32, subs: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true,"resourceSubscriptions":[{subs}]}},{META}}}}}"#
            )
        };
        let headers = mirrored("subscriptions/listen", None);
        let first = p.call(&headers, &listen(1, ""));
        let second = p.call(&headers, &listen(2, ""));
        let long = format!(r#""file:///{}""#, "x".repeat(600));
        let third = p.call(&headers, &listen(3, &long));
        p.run();
        let ack = &p.client.seen[&first];
        assert!(
            ack.messages[0].contains("notifications/subscriptions/acknowledged"),
            "{ack:?}"
        );
        let refused = &p.client.seen[&second];
        assert!(
            refused.messages[0].contains(r#""code":-32603"#),
            "{refused:?}"
        );
        assert!(refused.messages[0].contains("too many listen streams"));
        assert_eq!(refused.trailer("grpc-status"), Some("0"));
        let long = &p.client.seen[&third];
        assert!(long.messages[0].contains(r#""code":-32602"#), "{long:?}");
        assert_eq!(quota.taken.load(std::sync::atomic::Ordering::Acquire), 1);
        p.client.reset(first, ErrorCode::CANCEL).unwrap();
        p.run();
        assert_eq!(quota.taken.load(std::sync::atomic::Ordering::Acquire), 0);
        let again = p.call(&headers, &listen(4, r#""file:///a""#));
        p.run();
        let ack = &p.client.seen[&again];
        assert!(
            ack.messages[0].contains("notifications/subscriptions/acknowledged"),
            "{ack:?}"
        );
    });
}

/// Issue #32 item 10 on the tunnel: the server answers and resets more
/// calls than its connection remembers ([`REMEMBERED_RESETS`]) while their
/// clients have not sent their request messages yet (`grpc-encoding gzip`:
/// UNIMPLEMENTED, then RST_STREAM(NO_ERROR)). The request messages that
/// then arrive on the last 64 are ignored (no handler, nothing on the
/// wire, the connection serves on); one on a call reset before those, which
/// the server no longer remembers, is DATA on a closed stream: GOAWAY
/// (STREAM_CLOSED).
#[test]
fn late_request_messages_on_the_last_64_calls_reset_are_ignored_and_older_ones_are_not() {
    use mcpwire_core::mcp::REMEMBERED_RESETS;
    let calls = REMEMBERED_RESETS + 4;
    let mut p = Pair::new();
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
    let mut wire = Vec::new();
    for _ in 0..calls {
        let s = p.client.open_stream().unwrap();
        let mut fields = vec![
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", TUNNEL_PATH),
            Field::new(b":authority", b"localhost"),
            Field::new(b"content-type", b"application/grpc"),
            Field::new(b"te", b"trailers"),
            Field::new(b"grpc-encoding", b"gzip"),
        ];
        for (n, v) in mirrored("tools/list", None) {
            fields.push(Field::new(n.as_bytes(), v.as_bytes()));
        }
        p.client
            .send_headers(s, fields.iter().copied(), false)
            .unwrap();
        wire.extend(p.run_tapped());
    }
    // Client streams 1, 3, 5, …: each answered, then reset NO_ERROR.
    let ids: Vec<u32> = (0..calls as u32).map(|i| 2 * i + 1).collect();
    for &id in &ids {
        assert_eq!(rst_codes(&wire, id), [ErrorCode::NO_ERROR.0], "stream {id}");
    }
    let (forgotten, remembered) = ids.split_at(calls - REMEMBERED_RESETS);
    for &id in remembered {
        let data = raw_data(id, &frame(body.as_bytes()));
        assert_eq!(p.server.endpoint.recv(&data, p.now), data.len());
        p.server.take_events();
    }
    let after = p.run_tapped();
    assert!(
        frames(&after).all(|(_, sid, _)| !remembered.contains(&sid)),
        "{after:?}"
    );
    assert!(frames(&after).all(|(kind, _, _)| kind != 7), "no GOAWAY");
    assert_eq!(take_requests().len(), 0, "no handler saw a late message");
    let next = p.call(&mirrored("tools/list", None), &body);
    p.run();
    assert_eq!(p.client.seen[&next].trailer("grpc-status"), Some("0"));

    // The newest call the server forgot.
    let id = forgotten[forgotten.len() - 1];
    let data = raw_data(id, &frame(body.as_bytes()));
    assert_eq!(p.server.endpoint.recv(&data, p.now), data.len());
    p.server.take_events();
    let after = p.run_tapped();
    let goaway: Vec<u32> = frames(&after)
        .filter(|&(kind, _, _)| kind == 7)
        .map(|(_, _, p)| u32::from_be_bytes([p[4], p[5], p[6], p[7]]))
        .collect();
    assert_eq!(goaway, [ErrorCode::STREAM_CLOSED.0], "{after:?}");
    assert_eq!(take_requests().len(), 0);
}
