//! Streamable HTTP (MCP 2026-07-28 §5) on the tunnel server's HTTP/2
//! connection, against our HTTP/2 client in memory: what an HTTP/2 client
//! of `POST /mcp` sees, beside gRPC calls on the same connection.
#![cfg(feature = "tunnel-http")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::time::Duration;

use mcpwire_core::drive;
use mcpwire_core::grpc::write_prefix;
use mcpwire_core::h2::{Config, Connection, ErrorCode, Event, Role, StreamRef};
use mcpwire_core::hpack::Field;
use mcpwire_core::mcp::auth::Decision;
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::registry::{Registry, ToolInfo};
use mcpwire_core::mcp::server::{
    Allowed, CallId, HttpEndpoint, ListChange, ServerConfig, ServerEvent, TUNNEL_PATH,
};
use mcpwire_core::time::Instant;

mod support;

use mcpwire_sim::{Pipe, exchange};
use support::mcp::{App, META, Server, Side, each_split, registry, split};

type Client = Connection<8, 4096, 16384, 16>;

const TOOLS: [ToolInfo<'static>; 1] = [support::mcp::ECHO];

/// What the client saw on one stream.
#[derive(Debug, Default)]
struct Seen {
    head: Vec<(String, String)>,
    trailers: Vec<(String, String)>,
    body: Vec<u8>,
    ended: bool,
    reset: bool,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn trailer(&self, name: &str) -> Option<&str> {
        self.trailers
            .iter()
            .chain(&self.head)
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    /// The `data:` lines of an event stream (comments skipped).
    fn events(&self) -> Vec<String> {
        let text = self.text();
        assert!(text.ends_with("\n\n"), "{text:?}");
        text.split("\n\n")
            .filter(|e| !e.is_empty() && !e.starts_with(':'))
            .map(|e| e.strip_prefix("data: ").expect(e).to_owned())
            .collect()
    }
}

struct H2Client {
    conn: Client,
    seen: HashMap<StreamRef, Seen>,
}

impl H2Client {
    fn take_events(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                Event::Headers {
                    stream, end_stream, ..
                } => {
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
                    let s = self.seen.entry(stream).or_default();
                    if s.head.is_empty() {
                        s.head = list
                    } else {
                        s.trailers = list
                    }
                    s.ended |= end_stream;
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
            let s = self.seen.entry(d.stream).or_default();
            s.body.extend_from_slice(d.bytes);
            s.ended |= d.end_stream;
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

/// The server's application: keeps the calls handed to it, and the other
/// events as text.
#[derive(Debug, Default)]
struct Handler {
    calls: Vec<CallId>,
    events: Vec<String>,
}

impl App<Server> for Handler {
    fn take_events(&mut self, server: &mut Server) {
        while let Some(e) = server.poll_event() {
            match e {
                ServerEvent::Request { call } => self.calls.push(call),
                ServerEvent::Authorize { call } => {
                    let decision = match server.bearer_token(call) {
                        Some("good") => Decision::Allow { principal: "alice" },
                        _ => Decision::Unauthenticated,
                    };
                    server.authorize(call, decision);
                }
                e => self.events.push(format!("{e:?}")),
            }
        }
    }
}

const PIPE: usize = 32768;

struct Pair {
    client: H2Client,
    server: Side<Server, Handler>,
    up: Pipe<PIPE>,
    down: Pipe<PIPE>,
    pending: Vec<(StreamRef, Vec<u8>)>,
    /// The virtual clock.
    now: Instant,
}

impl Pair {
    fn new() -> Self {
        Self::serving(registry(&TOOLS), ServerConfig::default())
    }

    fn serving(registry: Registry<'static>, config: ServerConfig<'static>) -> Self {
        Self::with_client(registry, config, Config::default())
    }

    /// A server with `config`, a client with `client`'s HTTP/2 settings.
    fn with_client(
        registry: Registry<'static>,
        config: ServerConfig<'static>,
        client: Config,
    ) -> Self {
        Pair {
            client: H2Client {
                conn: Client::new(Role::Client, client, Instant::ZERO),
                seen: HashMap::new(),
            },
            server: Side {
                endpoint: Server::new(registry, config, Default::default(), Instant::ZERO),
                app: Handler::default(),
            },
            up: Pipe::new(split()),
            down: Pipe::new(split()),
            pending: Vec::new(),
            now: Instant::ZERO,
        }
    }

    fn run(&mut self) {
        self.server.take_events();
        self.client.take_events();
        for _ in 0..100_000 {
            let mut sent = false;
            for (s, rest) in &mut self.pending {
                let n = self.client.conn.send_data(*s, rest, true).unwrap();
                rest.drain(..n);
                sent |= n > 0;
            }
            self.pending.retain(|(_, rest)| !rest.is_empty());
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
    }

    /// Lets `by` pass on the server's clock, then moves what it sent.
    fn advance(&mut self, by: Duration) {
        self.now = self.now + by;
        self.server.handle_timeout(self.now);
        self.run();
    }

    /// Opens a stream with `fields` and sends `body` after them.
    fn open(&mut self, fields: Vec<Field<'_>>, body: Vec<u8>) -> StreamRef {
        let s = self.client.conn.open_stream().unwrap();
        let empty = body.is_empty();
        self.client
            .conn
            .send_headers(s, fields.iter().copied(), empty)
            .unwrap();
        if !empty {
            self.pending.push((s, body));
        }
        s
    }

    /// `POST` with these fields (`:method` and the rest first) and body.
    fn http(&mut self, method: &str, extra: &[(&str, &str)], body: &str) -> StreamRef {
        self.http_to("/mcp", "localhost", method, extra, body)
    }

    /// [`Pair::http`] to `path` on `authority`.
    fn http_to(
        &mut self,
        path: &str,
        authority: &str,
        method: &str,
        extra: &[(&str, &str)],
        body: &str,
    ) -> StreamRef {
        let mut fields = vec![
            Field::new(b":method", method.as_bytes()),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", path.as_bytes()),
            Field::new(b":authority", authority.as_bytes()),
        ];
        for (n, v) in extra {
            fields.push(Field::new(n.as_bytes(), v.as_bytes()));
        }
        self.open(fields, body.as_bytes().to_vec())
    }

    /// An MCP POST with its mirrored headers.
    fn post(&mut self, method: &str, body: &str) -> StreamRef {
        self.post_to("/mcp", "localhost", &[], method, body)
    }

    /// [`Pair::post`] to `path` on `authority`, with `extra` fields.
    fn post_to(
        &mut self,
        path: &str,
        authority: &str,
        extra: &[(&str, &str)],
        method: &str,
        body: &str,
    ) -> StreamRef {
        let headers = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
        ];
        let name = json::get(body.as_bytes(), b"params")
            .and_then(|p| json::get(p, b"name"))
            .map(|n| String::from_utf8(n[1..n.len() - 1].to_vec()).unwrap());
        let mut headers = headers.to_vec();
        if let Some(n) = &name {
            headers.push(("mcp-name", n));
        }
        headers.extend_from_slice(extra);
        self.http_to(path, authority, "POST", &headers, body)
    }

    /// A gRPC tunnel call.
    fn grpc(&mut self, json: &str, method: &str) -> StreamRef {
        let fields = vec![
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", TUNNEL_PATH),
            Field::new(b":authority", b"localhost"),
            Field::new(b"content-type", b"application/grpc"),
            Field::new(b"te", b"trailers"),
            Field::new(b"mcp-protocol-version", b"2026-07-28"),
            Field::new(b"mcp-method", method.as_bytes()),
        ];
        let mut msg = vec![0x0a];
        let mut len = json.len();
        while len >= 0x80 {
            msg.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        msg.push(len as u8);
        msg.extend_from_slice(json.as_bytes());
        let mut framed = write_prefix(msg.len() as u32).to_vec();
        framed.extend_from_slice(&msg);
        self.open(fields, framed)
    }

    fn seen(&self, s: StreamRef) -> &Seen {
        &self.client.seen[&s]
    }
}

fn tools_list(id: u32) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{{META}}}}}"#)
}

fn echo(id: &str, meta: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}},"_meta":{{{meta}"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    )
}

#[test]
fn a_request_is_answered_with_one_json_response() {
    each_split(|| {
        let mut p = Pair::new();
        let s = p.post("tools/list", &tools_list(7));
        p.run();
        let seen = p.seen(s);
        assert_eq!(seen.header(":status"), Some("200"), "{seen:?}");
        assert_eq!(seen.header("content-type"), Some("application/json"));
        let len: usize = seen.header("content-length").unwrap().parse().unwrap();
        assert_eq!(len, seen.body.len());
        assert!(seen.ended && !seen.reset);
        let m = &seen.body;
        assert_eq!(json::validate(m, 32), Ok(()));
        assert_eq!(json::get(m, b"id"), Some(&b"7"[..]));
        let tools = json::get(json::get(m, b"result").unwrap(), b"tools").unwrap();
        assert_eq!(json::elements(tools).count(), 1);
    });
}

#[test]
fn a_handler_answer_without_progress_token_is_json_and_drops_progress() {
    let mut p = Pair::new();
    let s = p.post("tools/call", &echo("1", ""));
    p.run();
    let call = p.server.app.calls[0];
    p.server
        .notify(call, "notifications/progress", br#"{"progress":1}"#)
        .unwrap();
    p.server.respond(call, br#"{"content":[]}"#).unwrap();
    p.run();
    let seen = p.seen(s);
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(
        seen.text(),
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#
    );
    assert!(seen.ended);
}

#[test]
fn a_progress_token_answers_with_an_event_stream() {
    each_split(|| {
        let mut p = Pair::new();
        let s = p.post("tools/call", &echo(r#""a""#, r#""progressToken":"t","#));
        p.run();
        let call = p.server.app.calls[0];
        p.server
            .notify(
                call,
                "notifications/progress",
                b"{\"progressToken\":\"t\",\n\"progress\":1}",
            )
            .unwrap();
        p.run();
        assert!(!p.seen(s).ended, "the stream stays open until the result");
        p.server
            .respond(call, br#"{"content":[{"type":"text","text":"hi"}]}"#)
            .unwrap();
        p.run();
        let seen = p.seen(s);
        assert_eq!(seen.header(":status"), Some("200"));
        assert_eq!(seen.header("content-type"), Some("text/event-stream"));
        assert_eq!(seen.header("cache-control"), Some("no-cache"));
        assert_eq!(seen.header("content-length"), None);
        let events = seen.events();
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(events[0].contains("notifications/progress"));
        assert!(!events[0].contains('\n'));
        assert_eq!(
            events[1],
            r#"{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"hi"}]}}"#
        );
        assert!(seen.ended && !seen.reset);
    });
}

#[test]
fn a_notification_is_accepted_with_202() {
    let mut p = Pair::new();
    let s = p.post(
        "notifications/initialized",
        &format!(r#"{{"jsonrpc":"2.0","method":"notifications/initialized","params":{{{META}}}}}"#),
    );
    p.run();
    let seen = p.seen(s);
    assert_eq!(seen.header(":status"), Some("202"));
    assert!(seen.body.is_empty() && seen.ended);
}

#[test]
fn the_binding_refuses_what_is_not_a_json_post() {
    let mut p = Pair::new();
    let get = p.http("GET", &[("accept", "text/event-stream")], "");
    let text = p.http("POST", &[("content-type", "text/plain")], &tools_list(1));
    let accept = p.http(
        "POST",
        &[
            ("content-type", "application/json"),
            ("accept", "text/html"),
        ],
        &tools_list(1),
    );
    let origin = p.http(
        "POST",
        &[
            ("content-type", "application/json"),
            ("origin", "https://evil.example"),
        ],
        &tools_list(1),
    );
    p.run();
    assert_eq!(p.seen(get).header(":status"), Some("405"));
    assert_eq!(p.seen(get).header("allow"), Some("POST"));
    assert_eq!(p.seen(text).header(":status"), Some("415"));
    assert_eq!(p.seen(accept).header(":status"), Some("406"));
    assert_eq!(p.seen(origin).header(":status"), Some("403"));
    assert!([get, text, accept, origin].iter().all(|&s| p.seen(s).ended));
}

#[test]
fn request_errors_are_400_and_an_unknown_method_404() {
    let mut p = Pair::new();
    // The mirrored method disagrees with the body: -32020.
    let mismatch = p.post("prompts/list", &tools_list(2));
    let unknown = p.post(
        "nope/nope",
        &format!(r#"{{"jsonrpc":"2.0","id":3,"method":"nope/nope","params":{{{META}}}}}"#),
    );
    let garbage = p.post("tools/list", "{nope");
    p.run();
    let code = |s: StreamRef| {
        let body = &p.seen(s).body;
        String::from_utf8(
            json::get(json::get(body, b"error").unwrap(), b"code")
                .unwrap()
                .to_vec(),
        )
        .unwrap()
    };
    assert_eq!(p.seen(mismatch).header(":status"), Some("400"));
    assert_eq!(code(mismatch), "-32020");
    assert_eq!(p.seen(unknown).header(":status"), Some("404"));
    assert_eq!(code(unknown), "-32601");
    assert_eq!(p.seen(garbage).header(":status"), Some("400"));
    assert_eq!(code(garbage), "-32700");
}

/// Over HTTP/2 as over HTTP/1.1: a member twice in `params`, `_meta` or
/// `arguments` (in any spelling) is 400 with -32600, a mirrored header
/// given twice 400 with -32020; the tool never runs (issue #32, A3).
#[test]
fn repeated_members_and_mirrored_headers_are_400() {
    const ANNOTATED: [ToolInfo<'static>; 2] = [
        support::mcp::ECHO,
        support::mcp::lookup(
            r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
        ),
    ];
    let lookup = |arguments: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"lookup","arguments":{arguments},{META}}}}}"#
        )
    };
    let two_names = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"x"}},"name":"lookup",{META}}}}}"#
    );
    let headers = |name: &'static str, extra: &[(&'static str, &'static str)]| {
        let mut h = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", name),
            ("mcp-param-region", "us-west"),
        ];
        h.extend_from_slice(extra);
        h
    };
    let good = lookup(r#"{"region":"us-west"}"#);
    type Case<'a> = (Vec<(&'a str, &'a str)>, String, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            headers("lookup", &[]),
            lookup(r#"{"region":"us-west","region":"eu-secret"}"#),
            "-32600",
        ),
        (
            headers("lookup", &[]),
            lookup(r#"{"region":"us-west","\u0072egion":"eu-secret"}"#),
            "-32600",
        ),
        (headers("echo", &[]), two_names, "-32600"),
        (
            headers("lookup", &[("mcp-name", "echo")]),
            good.clone(),
            "-32020",
        ),
        (
            headers("lookup", &[("mcp-param-region", "eu-secret")]),
            good.clone(),
            "-32020",
        ),
        (
            headers("lookup", &[("mcp-protocol-version", "2026-07-28")]),
            good.clone(),
            "-32020",
        ),
    ];
    let mut p = Pair::serving(registry(&ANNOTATED), ServerConfig::default());
    let streams: Vec<(StreamRef, &str)> = cases
        .iter()
        .map(|(h, body, code)| (p.http("POST", h, body), *code))
        .collect();
    p.run();
    for (s, code) in streams {
        let seen = p.seen(s);
        assert_eq!(seen.header(":status"), Some("400"), "{seen:?}");
        let error = json::get(&seen.body, b"error").unwrap();
        assert_eq!(json::get(error, b"code"), Some(code.as_bytes()), "{seen:?}");
    }
    assert!(p.server.app.calls.is_empty(), "the tool ran");
}

#[test]
fn a_grpc_call_and_an_mcp_post_share_one_connection() {
    each_split(|| {
        let mut p = Pair::new();
        let g = p.grpc(&tools_list(1), "tools/list");
        let h = p.post("tools/list", &tools_list(2));
        p.run();
        let grpc = p.seen(g);
        assert!(
            grpc.header("content-type")
                .unwrap()
                .starts_with("application/grpc")
        );
        assert_eq!(grpc.trailer("grpc-status"), Some("0"), "{grpc:?}");
        // One gRPC message whose JSON answers id 1.
        assert_eq!(grpc.body[0], 0);
        let text = String::from_utf8_lossy(&grpc.body);
        assert!(
            text.contains(r#"{"jsonrpc":"2.0","id":1,"result""#),
            "{text}"
        );
        let http = p.seen(h);
        assert_eq!(http.header("content-type"), Some("application/json"));
        assert_eq!(json::get(&http.body, b"id"), Some(&b"2"[..]));
    });
}

#[test]
fn a_reset_stream_cancels_the_handler() {
    let mut p = Pair::new();
    let s = p.post("tools/call", &echo("5", ""));
    p.run();
    let call = p.server.app.calls[0];
    p.client.conn.reset(s, ErrorCode::CANCEL).unwrap();
    p.run();
    assert!(
        p.server
            .app
            .events
            .iter()
            .any(|e| e.contains("Cancelled") && e.contains("Reset")),
        "{:?}",
        p.server.app.events
    );
    assert!(p.server.respond(call, br#"{"content":[]}"#).is_err());
}

#[test]
fn a_listen_stream_is_an_event_stream_until_the_server_goes_away() {
    each_split(|| {
        let mut r = registry(&TOOLS);
        r.listen = true;
        let mut p = Pair::serving(r, ServerConfig::default());
        // Only JSON accepted: a listen stream is an event stream anyway.
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
        );
        let s = p.http(
            "POST",
            &[
                ("content-type", "application/json"),
                ("accept", "application/json"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "subscriptions/listen"),
            ],
            &body,
        );
        p.run();
        assert_eq!(p.server.publish(ListChange::ToolsListChanged), 1);
        p.run();
        assert!(!p.seen(s).ended, "the stream stays open");
        p.server.go_away();
        p.run();
        let seen = p.seen(s);
        assert_eq!(seen.header("content-type"), Some("text/event-stream"));
        let events = seen.events();
        assert_eq!(events.len(), 3, "{events:?}");
        assert!(events[0].contains("notifications/subscriptions/acknowledged"));
        assert!(events[1].contains("notifications/tools/list_changed"));
        assert!(events[2].starts_with(r#"{"jsonrpc":"2.0","id":"l","result""#));
        assert!(seen.ended && !seen.reset);
    });
}

#[test]
fn bearer_tokens_are_checked_with_401() {
    let config = ServerConfig {
        authorize: true,
        ..ServerConfig::default()
    };
    let mut p = Pair::serving(registry(&TOOLS), config);
    let refused = p.post("tools/list", &tools_list(1));
    p.run();
    let seen = p.seen(refused);
    assert_eq!(seen.header(":status"), Some("401"));
    assert!(
        seen.header("www-authenticate")
            .unwrap()
            .starts_with("Bearer")
    );
    assert!(seen.ended);
    // The same request with the token is served.
    let good = p.http(
        "POST",
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer good"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ],
        &tools_list(3),
    );
    p.run();
    let seen = p.seen(good);
    assert_eq!(seen.header(":status"), Some("200"), "{seen:?}");
    assert_eq!(json::get(&seen.body, b"id"), Some(&b"3"[..]));
}

/// A server whose endpoint is `endpoint`.
fn serving_at(endpoint: HttpEndpoint<'static>) -> Pair {
    let config = ServerConfig {
        http: endpoint,
        ..ServerConfig::default()
    };
    Pair::serving(registry(&TOOLS), config)
}

/// The endpoint moved by the operator is served where it was put; the old
/// path is no resource (404, as on HTTP/1.1), and gRPC calls go on.
#[test]
fn a_moved_endpoint_is_served_at_its_path_and_the_old_one_is_404() {
    each_split(|| {
        let mut p = serving_at(HttpEndpoint {
            path: "/rpc/mcp",
            ..HttpEndpoint::default()
        });
        let moved = p.post_to(
            "/rpc/mcp?x=1",
            "localhost",
            &[],
            "tools/list",
            &tools_list(1),
        );
        let old = p.post("tools/list", &tools_list(2));
        let grpc = p.grpc(&tools_list(3), "tools/list");
        p.run();
        let seen = p.seen(moved);
        assert_eq!(seen.header(":status"), Some("200"), "{seen:?}");
        assert_eq!(json::get(&seen.body, b"id"), Some(&b"1"[..]));
        assert_eq!(p.seen(old).header(":status"), Some("404"));
        assert!(p.seen(old).ended && p.seen(old).body.is_empty());
        assert_eq!(p.seen(grpc).trailer("grpc-status"), Some("0"));
    });
}

/// A gRPC path with another content type is still the gRPC binding's
/// (415, gRPC's answer); only a path that is neither is 404.
#[test]
fn a_path_that_is_no_endpoint_and_no_grpc_call_is_404() {
    let mut p = Pair::new();
    let json = [("content-type", "application/json")];
    let tunnel = p.http_to(
        std::str::from_utf8(TUNNEL_PATH).unwrap(),
        "localhost",
        "POST",
        &json,
        &tools_list(1),
    );
    let other = p.http_to("/elsewhere", "localhost", "POST", &json, &tools_list(2));
    let grpc = p.http_to(
        "/elsewhere",
        "localhost",
        "POST",
        &[("content-type", "application/grpc")],
        "",
    );
    p.run();
    assert_eq!(p.seen(tunnel).trailer(":status"), Some("415"));
    assert_eq!(p.seen(other).header(":status"), Some("404"));
    assert_eq!(p.seen(grpc).trailer("grpc-status"), Some("12"));
}

/// `:authority` is the HTTP/2 `Host`: a name not allowed is refused as
/// HTTP/1.1 refuses its `Host` (403, the DNS-rebinding guard).
#[test]
fn a_foreign_authority_is_403_as_a_foreign_host_is() {
    each_split(|| {
        let mut p = Pair::new();
        let evil = p.post_to("/mcp", "evil.com", &[], "tools/list", &tools_list(1));
        let evil_port = p.post_to("/mcp", "evil.com:8080", &[], "tools/list", &tools_list(2));
        // Without `:authority`, a `host` field is the authority.
        let host = p.open(
            vec![
                Field::new(b":method", b"POST"),
                Field::new(b":scheme", b"http"),
                Field::new(b":path", b"/mcp"),
                Field::new(b"host", b"evil.com"),
                Field::new(b"content-type", b"application/json"),
            ],
            tools_list(3).into_bytes(),
        );
        let local = p.post_to("/mcp", "127.0.0.1:50051", &[], "tools/list", &tools_list(4));
        p.run();
        for s in [evil, evil_port, host] {
            assert_eq!(p.seen(s).header(":status"), Some("403"), "{:?}", p.seen(s));
            assert!(p.seen(s).ended);
        }
        assert_eq!(p.seen(local).header(":status"), Some("200"));
        assert!(p.server.app.events.is_empty(), "{:?}", p.server.app.events);
    });
}

/// The allowed names of the endpoint: their `:authority` and `Origin` are
/// served (with a port, in any case), others refused 403.
#[test]
fn allowed_hosts_and_origins_are_served_and_others_refused() {
    each_split(|| {
        let mut p = serving_at(HttpEndpoint {
            allowed_hosts: Allowed::Hosts(&["mcp.example"]),
            allowed_origins: Allowed::Hosts(&["app.example"]),
            ..HttpEndpoint::default()
        });
        let origin = |o: &'static str| [("origin", o)];
        let served = p.post_to(
            "/mcp",
            "MCP.example:8443",
            &origin("https://app.example"),
            "tools/list",
            &tools_list(1),
        );
        let no_origin = p.post_to("/mcp", "mcp.example", &[], "tools/list", &tools_list(2));
        let foreign_host = p.post_to(
            "/mcp",
            "other.example",
            &origin("https://app.example"),
            "tools/list",
            &tools_list(3),
        );
        let foreign_origin = p.post_to(
            "/mcp",
            "mcp.example",
            &origin("https://evil.example"),
            "tools/list",
            &tools_list(4),
        );
        let null_origin = p.post_to(
            "/mcp",
            "mcp.example",
            &origin("null"),
            "tools/list",
            &tools_list(5),
        );
        p.run();
        assert_eq!(
            p.seen(served).header(":status"),
            Some("200"),
            "{:?}",
            p.seen(served)
        );
        assert_eq!(p.seen(no_origin).header(":status"), Some("200"));
        for s in [foreign_host, foreign_origin, null_origin] {
            assert_eq!(p.seen(s).header(":status"), Some("403"), "{:?}", p.seen(s));
        }
    });
}

/// An event stream over HTTP/2 has the head fields of one over HTTP/1.1
/// (`x-accel-buffering: no` for nginx), and says a comment when it said
/// nothing for the keep-alive interval: on the virtual clock, none
/// before, one at it, the next an interval later, and none after an
/// event until an interval after that event.
#[test]
fn an_event_stream_has_the_sse_fields_and_keep_alive_comments() {
    each_split(|| {
        let interval = Duration::from_secs(15);
        let mut p = Pair::new();
        let s = p.post("tools/call", &echo(r#""a""#, r#""progressToken":"t","#));
        p.run();
        let call = p.server.app.calls[0];
        p.server
            .notify(
                call,
                "notifications/progress",
                br#"{"progressToken":"t","progress":1}"#,
            )
            .unwrap();
        p.run();
        let seen = p.seen(s);
        assert_eq!(seen.header("content-type"), Some("text/event-stream"));
        assert_eq!(seen.header("cache-control"), Some("no-cache"));
        assert_eq!(seen.header("x-accel-buffering"), Some("no"));
        let comments = |p: &Pair| p.seen(s).text().matches(": \n\n").count();
        assert_eq!(p.server.poll_timeout(), Some(Instant::ZERO + interval));
        p.advance(interval - Duration::from_millis(1));
        assert_eq!(comments(&p), 0);
        p.advance(Duration::from_millis(1));
        assert_eq!(comments(&p), 1, "{}", p.seen(s).text());
        p.advance(interval);
        assert_eq!(comments(&p), 2);
        // An event puts the next comment off.
        p.advance(Duration::from_secs(10));
        p.server
            .notify(
                call,
                "notifications/progress",
                br#"{"progressToken":"t","progress":2}"#,
            )
            .unwrap();
        p.run();
        p.advance(Duration::from_secs(10));
        assert_eq!(comments(&p), 2);
        p.advance(Duration::from_secs(5));
        assert_eq!(comments(&p), 3);
        p.server.respond(call, br#"{"content":[]}"#).unwrap();
        p.run();
        let seen = p.seen(s);
        assert!(seen.ended && !seen.reset);
        let events = seen.events();
        assert_eq!(events.len(), 3, "{events:?}");
        assert!(events[2].starts_with(r#"{"jsonrpc":"2.0","id":"a","result""#));
        // The stream is over: no comment is due any more, only the
        // connection's idle timeout (60 s from the stream's end, at 55 s).
        assert_eq!(
            p.server.poll_timeout(),
            Some(Instant::ZERO + Duration::from_secs(55 + 60))
        );
    });
}

/// A listen stream that nothing is published on is kept open through
/// proxies by comments, at the endpoint's interval.
#[test]
fn an_idle_listen_stream_gets_keep_alive_comments() {
    each_split(|| {
        let mut r = registry(&TOOLS);
        r.listen = true;
        let config = ServerConfig {
            http: HttpEndpoint {
                keep_alive_interval: Duration::from_secs(5),
                ..HttpEndpoint::default()
            },
            ..ServerConfig::default()
        };
        let mut p = Pair::serving(r, config);
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
        );
        let s = p.post("subscriptions/listen", &body);
        p.run();
        assert_eq!(p.seen(s).header("x-accel-buffering"), Some("no"));
        p.advance(Duration::from_secs(5));
        p.advance(Duration::from_secs(5));
        let text = p.seen(s).text();
        assert!(text.ends_with("\n\n: \n\n: \n\n"), "{text:?}");
        assert!(!p.seen(s).ended);
        p.server.go_away();
        p.run();
        let events = p.seen(s).events();
        assert!(events[0].contains("notifications/subscriptions/acknowledged"));
        assert!(events[1].starts_with(r#"{"jsonrpc":"2.0","id":"l","result""#));
        assert!(p.seen(s).ended);
    });
}

/// An event larger than the client's flow-control window goes out in
/// pieces as the window opens, its end after all of its message.
#[test]
fn an_event_larger_than_the_window_arrives_whole() {
    each_split(|| {
        let client = Config {
            initial_window_size: 64,
            ..Config::default()
        };
        let mut p = Pair::with_client(registry(&TOOLS), ServerConfig::default(), client);
        let s = p.post("tools/call", &echo(r#""a""#, r#""progressToken":"t","#));
        p.run();
        let call = p.server.app.calls[0];
        let big = format!(
            r#"{{"progressToken":"t","progress":1,"message":"{}"}}"#,
            "x".repeat(300)
        );
        p.server
            .notify(call, "notifications/progress", big.as_bytes())
            .unwrap();
        p.run();
        p.server.respond(call, br#"{"content":[]}"#).unwrap();
        p.run();
        let seen = p.seen(s);
        assert!(seen.ended, "{seen:?}");
        let events = seen.events();
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(events[0].contains(&"x".repeat(300)));
        assert!(events[1].starts_with(r#"{"jsonrpc":"2.0","id":"a","result""#));
    });
}

/// A refused token over HTTP/2 names the resource metadata as over
/// HTTP/1.1 (RFC 9728 §5.1).
#[test]
fn a_refused_token_names_the_resource_metadata() {
    let config = ServerConfig {
        authorize: true,
        http: HttpEndpoint {
            resource_metadata: Some("https://mcp.example/.well-known/oauth-protected-resource"),
            ..HttpEndpoint::default()
        },
        ..ServerConfig::default()
    };
    let mut p = Pair::serving(registry(&TOOLS), config);
    let refused = p.post("tools/list", &tools_list(1));
    p.run();
    let seen = p.seen(refused);
    assert_eq!(seen.header(":status"), Some("401"));
    assert_eq!(
        seen.header("www-authenticate"),
        Some(
            r#"Bearer realm="mcpwire", resource_metadata="https://mcp.example/.well-known/oauth-protected-resource""#
        )
    );
    assert_eq!(p.server.store().in_use(), 0);
}

/// A body over the limit is answered `:status 413` while the client is
/// still sending; the rest of the body is dropped (the client gets to send
/// it whole and read the answer, as curl and httpx do), and the connection
/// goes on (#32 item 3).
#[test]
fn an_oversize_body_is_answered_413_and_the_connection_goes_on() {
    each_split(|| {
        let mut p = Pair::new();
        let text = "x".repeat(5_000_000);
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}},{META}}}}}"#
        );
        let s = p.post("tools/call", &big);
        p.run();
        let seen = p.seen(s);
        assert_eq!(seen.header(":status"), Some("413"), "{seen:?}");
        assert!(seen.ended && !seen.reset, "a whole response: {seen:?}");
        assert!(p.pending.is_empty(), "the client sent its whole body");
        let after = p.post("tools/list", &tools_list(2));
        p.run();
        assert_eq!(p.seen(after).header(":status"), Some("200"));
    });
}
