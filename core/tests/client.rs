//! The client engine (`Client`) against the server `Engine`, in memory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use core::time::Duration;

use mcpwire_core::drive::Step;
use mcpwire_core::grpc::Code;
use mcpwire_core::h2::ErrorCode;
use mcpwire_core::h2::frame::Frame;
use mcpwire_core::mcp::auth::Decision;
use mcpwire_core::mcp::client::{CallId, Client, ClientConfig, ClientEvent, StartError};
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::registry::ToolInfo;
use mcpwire_core::mcp::server::{
    CallId as ServerCall, Server as Engine, ServerConfig as EngineConfig, ServerEvent,
};
use mcpwire_core::mcp::{CallStore, SlabStore};
use mcpwire_core::time::Instant;

mod support;

use mcpwire_sim::{Pipe, exchange};
use support::mcp::{App, META, Side, VecStore, each_split, registry, split};

const TOOLS: [ToolInfo<'static>; 3] = [
    support::mcp::ECHO,
    support::mcp::lookup(
        r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"limit":{"type":"integer","x-mcp-header":"Limit"}}}"#,
    ),
    ToolInfo {
        name: "broken",
        title: None,
        description: "An invalid annotation (number).",
        input_schema: r#"{"type":"object","properties":{"x":{"type":"number","x-mcp-header":"X"}}}"#,
    },
];

/// A failure as seen: code, message, data, response, HTTP status, gRPC
/// status, transport.
type Fail = (
    i32,
    String,
    Option<String>,
    String,
    Option<u16>,
    Option<Code>,
    bool,
);

/// What the application saw of a call.
#[derive(Debug, Default, Clone)]
struct Seen {
    notifications: Vec<String>,
    response: Option<String>,
    failed: Option<Fail>,
    /// The failure said the server never processed the call.
    refused: bool,
    /// The failure said the call went out a second time.
    retried: bool,
    www_authenticate: Option<String>,
    /// What the server asked, at each `InputRequired`.
    inputs: Vec<String>,
    ended: bool,
}

#[derive(Debug)]
struct Req {
    call: ServerCall,
    method: String,
    params: String,
    deadline: Option<Instant>,
}

/// What the client's application saw.
#[derive(Debug, Default)]
struct ClientApp {
    seen: std::collections::HashMap<CallId, Seen>,
    warnings: Vec<(String, &'static str)>,
}

impl<S: CallStore, const C: usize> App<Client<S, C, 4096, 16384>> for ClientApp {
    fn take_events(&mut self, client: &mut Client<S, C, 4096, 16384>) {
        while let Some(e) = client.poll_event() {
            let s = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
            match e {
                ClientEvent::Notification { call } => {
                    assert_eq!(client.result(call), None, "a notification has no result");
                    self.seen
                        .entry(call)
                        .or_default()
                        .notifications
                        .push(s(client.message(call).unwrap()))
                }
                ClientEvent::Response { call } => {
                    // The result the engine hands over is the response's.
                    let message = client.message(call).unwrap();
                    let parsed: serde_json::Value = serde_json::from_slice(message).unwrap();
                    let result = client
                        .result(call)
                        .map(|r| serde_json::from_slice(r).unwrap());
                    assert_eq!(result.as_ref(), parsed.get("result"), "{}", s(message));
                    self.seen.entry(call).or_default().response = Some(s(message))
                }
                ClientEvent::Failed { call } => {
                    let error = client.failure(call).unwrap();
                    assert_eq!(client.message(call), Some(error.response));
                    assert_eq!(client.result(call), None, "an error has no result");
                    let seen = self.seen.entry(call).or_default();
                    seen.refused = error.diagnostics.refused;
                    seen.retried = error.diagnostics.retried;
                    seen.www_authenticate = error.www_authenticate.map(s);
                    seen.failed = Some((
                        error.code,
                        s(error.message),
                        error.data.map(s),
                        s(error.response),
                        error.diagnostics.http_status,
                        error.diagnostics.grpc_status,
                        error.diagnostics.transport,
                    ))
                }
                ClientEvent::Ended { call } => {
                    assert_eq!(client.message(call), None, "the call is dead");
                    assert_eq!(client.result(call), None, "the call is dead");
                    self.seen.entry(call).or_default().ended = true
                }
                ClientEvent::Warning { call, reason } => self
                    .warnings
                    .push((s(client.warning_tool(call).unwrap()), reason)),
                ClientEvent::InputRequired { call } => {
                    let requests = s(client.input_requests(call).unwrap());
                    self.seen.entry(call).or_default().inputs.push(requests)
                }
                // One connection's engine asks for no link.
                ClientEvent::ConnectionClosed { .. }
                | ClientEvent::Connect { .. }
                | ClientEvent::Disconnect { .. }
                | ClientEvent::Ready
                | ClientEvent::Down
                | ClientEvent::Note
                | ClientEvent::Skipped { .. } => {}
            }
        }
    }
}

/// What the server's application saw, and how it answers authorization.
#[derive(Debug, Default)]
struct ServerApp {
    requests: Vec<Req>,
    events: Vec<String>,
    /// The decision on every authorization (unauthenticated by default).
    authorize: Option<Code>,
    /// The `authorization` of each call the server was asked to authorize.
    authorizations: Vec<Option<String>>,
}

impl<T: CallStore, const N: usize> App<Engine<'static, T, N, 4096, 16384>> for ServerApp {
    fn take_events(&mut self, server: &mut Engine<'static, T, N, 4096, 16384>) {
        while let Some(e) = server.poll_event() {
            match e {
                ServerEvent::Request { call } => {
                    let request = server.request(call).unwrap();
                    self.requests.push(Req {
                        call,
                        method: request.method().to_owned(),
                        params: String::from_utf8(request.params.to_vec()).unwrap(),
                        deadline: request.deadline,
                    })
                }
                ServerEvent::Authorize { call } => {
                    self.authorizations
                        .push(server.bearer_token(call).map(str::to_owned));
                    let decision = match self.authorize {
                        Some(Code::PermissionDenied) => Decision::PermissionDenied,
                        _ => Decision::Unauthenticated,
                    };
                    server.authorize(call, decision);
                }
                e => self.events.push(format!("{e:?}")),
            }
        }
    }
}

/// Room in each direction of the pipes.
const PIPE: usize = 32768;

/// A client with the store `S` and `C` calls, a server with the store `T`
/// and `N` streams; by default slabs of 8 KiB buffers, two per call of the
/// client's four, and the server of `support::mcp` (eight streams). They
/// talk through the pipes of `mcpwire-sim`, cut as [`split`] says.
struct Pair<
    S: CallStore = SlabStore<8192, 8>,
    T: CallStore = SlabStore<8192, 8>,
    const C: usize = 4,
    const N: usize = 8,
> {
    client: Box<Side<Client<S, C, 4096, 16384>, ClientApp>>,
    server: Box<Side<Engine<'static, T, N, 4096, 16384>, ServerApp>>,
    /// Client to server.
    up: Pipe<PIPE>,
    /// Server to client.
    down: Pipe<PIPE>,
    now: Instant,
}

impl Pair {
    fn new() -> Self {
        Self::with(EngineConfig::default())
    }

    fn with(config: EngineConfig<'static>) -> Self {
        Self::with_both(config, ClientConfig::default())
    }

    fn with_both(config: EngineConfig<'static>, client: ClientConfig) -> Self {
        Pair::with_stores(config, client, SlabStore::new(), SlabStore::new())
    }
}

impl<S: CallStore, T: CallStore, const C: usize, const N: usize> Pair<S, T, C, N> {
    fn with_stores(
        config: EngineConfig<'static>,
        client: ClientConfig,
        store: S,
        server_store: T,
    ) -> Self {
        Pair {
            client: Box::new(Side {
                endpoint: Client::new(client, store, Instant::ZERO),
                app: ClientApp::default(),
            }),
            server: Box::new(Side {
                endpoint: Engine::new(registry(&TOOLS), config, server_store, Instant::ZERO),
                app: ServerApp::default(),
            }),
            up: Pipe::new(split()),
            down: Pipe::new(split()),
            now: Instant::ZERO,
        }
    }

    /// Runs both sides until a round moves nothing.
    fn run(&mut self) {
        self.server.take_events();
        self.client.take_events();
        for _ in 0..10_000 {
            let moved = exchange(
                &mut *self.client,
                &mut self.up,
                &mut *self.server,
                &mut self.down,
                self.now,
            );
            match moved {
                Ok(0) => break,
                Ok(_) => {}
                Err(side) => panic!("{side:?} is stuck ({:?})", split()),
            }
        }
    }

    fn call(&mut self, body: &str, timeout: Option<Duration>) -> CallId {
        self.client
            .call(body.as_bytes(), timeout, self.now)
            .unwrap()
    }

    fn seen(&self, call: CallId) -> Seen {
        self.client.app.seen.get(&call).cloned().unwrap_or_default()
    }

    /// Sends what the client has to send into the pipe to the server,
    /// which must have been empty, and returns the RST_STREAM frames in
    /// it: stream id and error code. The octets stay in the pipe.
    fn sent_resets(&mut self) -> Vec<(u32, ErrorCode)> {
        assert!(self.up.is_empty(), "a run left octets in the pipe");
        self.up.transmit(&mut *self.client);
        let mut wire = self.up.pending();
        let mut resets = Vec::new();
        loop {
            match Frame::parse(wire, MAX_FRAME_SIZE) {
                Ok(Some((Frame::RstStream { stream_id, code }, n))) => {
                    resets.push((stream_id, code));
                    wire = &wire[n..];
                }
                Ok(Some((_, n))) => wire = &wire[n..],
                Ok(None) if wire.is_empty() => return resets,
                other => panic!("the client wrote {other:?}"),
            }
        }
    }
}

/// The largest frame the client may write (RFC 9113 §4.2).
const MAX_FRAME_SIZE: u32 = (1 << 24) - 1;

fn tools_call(id: u32, name: &str, args: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args},{META}}}}}"#
    )
}

#[test]
fn tools_list_drops_the_invalid_tool_and_fills_the_cache() {
    each_split(|| {
        let mut p = Pair::new();
        let c = p.call(
            &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#),
            None,
        );
        p.run();
        let seen = p.seen(c);
        assert!(seen.ended, "{seen:?}");
        let r = seen.response.expect("a response");
        assert_eq!(json::validate(r.as_bytes(), 32), Ok(()), "{r}");
        assert_eq!(json::get(r.as_bytes(), b"id"), Some(&b"1"[..]));
        let tools = json::get(json::get(r.as_bytes(), b"result").unwrap(), b"tools").unwrap();
        let names: Vec<String> = json::elements(tools)
            .map(|t| String::from_utf8(json::get(t, b"name").unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(names, ["\"echo\"", "\"lookup\""]);
        assert_eq!(p.client.app.warnings.len(), 1);
        assert_eq!(p.client.app.warnings[0].0, "\"broken\"");
        assert!(p.client.cached_schema(b"\"lookup\"").is_some());
        assert!(p.client.cached_schema(b"\"echo\"").is_none());
        assert!(!p.client.is_active(c));
    });
}

#[test]
fn a_tool_call_with_progress_then_the_response() {
    each_split(|| {
        let mut p = Pair::new();
        let c = p.call(&tools_call(2, "echo", r#"{"text":"hi"}"#), None);
        p.run();
        assert_eq!(p.server.app.requests.len(), 1);
        let call = p.server.app.requests[0].call;
        assert_eq!(p.server.app.requests[0].method, "tools/call");
        for i in 1..=3 {
            p.server
                .notify(
                    call,
                    "notifications/progress",
                    format!(r#"{{"progressToken":1,"progress":{i},"total":3}}"#).as_bytes(),
                )
                .unwrap();
            p.run();
        }
        p.server
            .endpoint
            .respond(call, br#"{"content":[{"type":"text","text":"hi"}]}"#)
            .unwrap();
        p.run();
        let seen = p.seen(c);
        assert_eq!(seen.notifications.len(), 3, "{seen:?}");
        assert!(seen.notifications[2].contains(r#""progress":3"#));
        assert!(
            seen.response
                .as_deref()
                .unwrap()
                .starts_with(r#"{"jsonrpc":"2.0","id":2,"result":"#)
        );
        assert!(seen.failed.is_none());
        assert!(seen.ended);
    });
}

#[test]
fn header_mismatch_relists_and_retries_once() {
    each_split(|| {
        let mut p = Pair::new();
        // The cache does not know `lookup` yet: its annotated arguments are
        // not mirrored, the server answers -32020, the client reads tools/list
        // and sends the call once more, now with mcp-param-region.
        let c = p.call(
            &tools_call(3, "lookup", r#"{"region":"eu-north1","limit":5}"#),
            None,
        );
        p.run();
        assert_eq!(p.server.app.requests.len(), 1, "{:?}", p.seen(c));
        assert!(p.server.app.requests[0].params.contains("eu-north1"));
        assert!(p.client.cached_schema(b"\"lookup\"").is_some());
        p.server
            .endpoint
            .respond(p.server.app.requests[0].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        let seen = p.seen(c);
        assert!(
            seen.response
                .as_deref()
                .unwrap()
                .starts_with(r#"{"jsonrpc":"2.0","id":3,"result":"#),
            "{seen:?}"
        );
        assert!(seen.ended);
        // The relist's warning (the broken tool) was reported.
        assert!(p.client.app.warnings.iter().any(|(t, _)| t == "\"broken\""));
    });
}

#[test]
fn an_unsafe_integer_is_refused_before_a_byte_goes_out() {
    each_split(|| {
        let mut p = Pair::new();
        // Learn the annotations first.
        p.call(
            &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#),
            None,
        );
        p.run();
        let before = p.up.total();
        let e = p
            .client
            .call(
                tools_call(4, "lookup", r#"{"region":"x","limit":9007199254740993}"#).as_bytes(),
                None,
                p.now,
            )
            .unwrap_err();
        assert!(
            matches!(e, StartError::Invalid(r) if r.code == -32600),
            "{e:?}"
        );
        p.run();
        assert_eq!(p.up.total(), before);
        assert!(p.server.app.requests.is_empty());
    });
}

#[test]
fn the_deadline_travels_and_the_server_answers_deadline_exceeded() {
    each_split(|| {
        let mut p = Pair::new();
        p.now = Instant::from_millis(1000);
        let c = p.call(
            &tools_call(5, "echo", r#"{"text":"slow"}"#),
            Some(Duration::from_millis(1500)),
        );
        p.now = Instant::from_millis(1200);
        p.run();
        assert_eq!(p.server.app.requests.len(), 1);
        // grpc-timeout carried the time left when the head went out (1.5 s).
        assert_eq!(
            p.server.app.requests[0].deadline,
            Some(Instant::from_millis(1200 + 1500))
        );
        assert!(p.client.poll_timeout().unwrap() <= Instant::from_millis(2500));
        // The server's deadline passes first here.
        p.now = Instant::from_millis(2700);
        p.server.handle_timeout(p.now);
        p.run();
        let seen = p.seen(c);
        let f = seen.failed.expect("failed");
        assert_eq!(f.5, Some(Code::DeadlineExceeded), "{f:?}");
        assert!(f.6, "a transport failure");
        assert_eq!(f.0, -32001);
        assert!(seen.ended);
        assert!(p.server.app.events.iter().any(|e| e.contains("Deadline")));
    });
}

#[test]
fn the_clients_own_deadline_resets_the_stream() {
    each_split(|| {
        let mut p = Pair::new();
        let c = p.call(
            &tools_call(6, "echo", r#"{"text":"slow"}"#),
            Some(Duration::from_millis(100)),
        );
        p.run();
        p.now = Instant::from_millis(100);
        p.client.handle_timeout(p.now);
        p.run();
        let seen = p.seen(c);
        assert_eq!(seen.failed.unwrap().5, Some(Code::DeadlineExceeded));
        assert!(
            p.server.app.events.iter().any(|e| e.contains("Reset")),
            "{:?}",
            p.server.app.events
        );
    });
}

#[test]
fn errors_from_trailers_reach_the_application_as_json_rpc_errors() {
    each_split(|| {
        let mut p = Pair::new();
        let old = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let c = p.call(old, None);
        p.run();
        let seen = p.seen(c);
        let f = seen.failed.expect("failed");
        assert_eq!(f.0, -32022, "{f:?}");
        assert!(f.2.as_deref().unwrap().contains("2026-07-28"), "{f:?}");
        assert!(f.3.starts_with(r#"{"jsonrpc":"2.0","id":7,"error":"#));
        assert_eq!(f.4, Some(200));
        assert_eq!(f.5, Some(Code::InvalidArgument));
        assert!(!f.6);
        // An in-band error (unknown tool) is an ordinary error response.
        let d = p.call(&tools_call(8, "nope", "{}"), None);
        p.run();
        let f = p.seen(d).failed.expect("failed");
        assert_eq!(f.0, -32602, "{f:?}");
        assert!(!f.6);
    });
}

#[test]
fn unauthenticated_is_401_in_the_diagnostics() {
    each_split(|| {
        for (code, http) in [(Code::Unauthenticated, 401), (Code::PermissionDenied, 403)] {
            let mut p = Pair::with(EngineConfig {
                authorize: true,
                ..EngineConfig::default()
            });
            p.server.app.authorize = Some(code);
            let c = p.call(
                &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#),
                None,
            );
            p.run();
            let f = p.seen(c).failed.expect("failed");
            assert_eq!(f.4, Some(http), "{f:?}");
            assert_eq!(f.5, Some(code));
            assert!(f.6);
            let challenge = match code {
                Code::PermissionDenied => r#"Bearer realm="mcpwire", error="insufficient_scope""#,
                _ => r#"Bearer realm="mcpwire""#,
            };
            assert_eq!(p.seen(c).www_authenticate.as_deref(), Some(challenge));
        }
    });
}

#[test]
fn a_cancel_resets_the_stream_and_the_handler_stops() {
    each_split(|| {
        let mut p = Pair::new();
        let c = p.call(&tools_call(9, "echo", r#"{"text":"x"}"#), None);
        p.run();
        assert_eq!(p.server.app.requests.len(), 1);
        assert!(p.client.cancel(c));
        assert!(!p.client.is_active(c));
        assert!(!p.client.cancel(c));
        // On the wire: RST_STREAM(CANCEL) on the call's stream, the first.
        assert_eq!(p.sent_resets(), [(1, ErrorCode::CANCEL)]);
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
        // The answer of the stopped handler goes nowhere; the slot is reused.
        assert!(
            p.server
                .endpoint
                .respond(p.server.app.requests[0].call, b"{}")
                .is_err()
        );
        let d = p.call(&tools_call(10, "echo", r#"{"text":"y"}"#), None);
        p.run();
        p.server
            .endpoint
            .respond(p.server.app.requests[1].call, b"{}")
            .unwrap();
        p.run();
        assert!(p.seen(d).response.is_some());
        assert!(p.seen(c).response.is_none());
    });
}

/// A listen stream has no end of its own: the client ends it with
/// `cancel`, which resets its stream with CANCEL (the binding: a client
/// cancels a call with RST_STREAM(CANCEL)), and the server forgets it.
#[test]
fn an_ended_listen_stream_is_reset_with_cancel() {
    each_split(|| {
        let mut p = Pair::new();
        let listen = p.call(
            &format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
            ),
            None,
        );
        p.run();
        let seen = p.seen(listen);
        assert!(
            seen.notifications
                .first()
                .is_some_and(|n| n.contains("notifications/subscriptions/acknowledged")),
            "{seen:?}"
        );
        assert!(p.client.is_active(listen));
        assert_eq!(p.server.endpoint.store().in_use(), 1);
        assert!(p.client.cancel(listen));
        assert_eq!(p.sent_resets(), [(1, ErrorCode::CANCEL)]);
        p.run();
        assert_eq!(
            p.server.endpoint.store().in_use(),
            0,
            "the server forgot it"
        );
        assert!(!p.seen(listen).ended, "no event after a cancel");
    });
}

#[test]
fn many_calls_at_once_and_busy_when_full() {
    each_split(|| {
        let mut p = Pair::new();
        let calls: Vec<CallId> = (0..4)
            .map(|i| p.call(&tools_call(20 + i, "echo", r#"{"text":"z"}"#), None))
            .collect();
        assert_eq!(
            p.client
                .call(tools_call(99, "echo", "{}").as_bytes(), None, p.now)
                .unwrap_err(),
            StartError::Busy
        );
        p.run();
        assert_eq!(p.server.app.requests.len(), 4);
        for r in p.server.app.requests.iter().rev() {
            p.server
                .endpoint
                .respond(r.call, br#"{"content":[]}"#)
                .unwrap();
        }
        p.run();
        for (i, c) in calls.iter().enumerate() {
            let r = p.seen(*c).response.unwrap();
            assert!(r.contains(&format!(r#""id":{}"#, 20 + i)), "{r}");
            assert!(p.seen(*c).ended);
        }
        assert_eq!(
            p.client.store().in_use(),
            0,
            "every buffer back in the store"
        );
    });
}

#[test]
fn a_full_store_refuses_a_call_cleanly() {
    // Slots for four calls, one buffer in the store: the second call finds
    // no buffer for its request.
    let mut client = Client::<SlabStore<8192, 1>, 4, 4096, 16384>::new(
        ClientConfig::default(),
        SlabStore::new(),
        Instant::ZERO,
    );
    let first = client
        .call(tools_call(1, "echo", "{}").as_bytes(), None, Instant::ZERO)
        .unwrap();
    assert_eq!(
        client
            .call(tools_call(2, "echo", "{}").as_bytes(), None, Instant::ZERO)
            .unwrap_err(),
        StartError::Busy
    );
    assert_eq!(client.store().in_use(), 1);
    // A request larger than the store's buffers is too large, not busy.
    let big = tools_call(3, "echo", &format!(r#"{{"text":"{}"}}"#, "x".repeat(9000)));
    assert!(matches!(
        client.call(big.as_bytes(), None, Instant::ZERO),
        Err(StartError::TooLarge { .. })
    ));
    assert!(client.cancel(first));
    assert_eq!(
        client.store().in_use(),
        0,
        "the cancelled call gave its buffer back"
    );
    client
        .call(tools_call(4, "echo", "{}").as_bytes(), None, Instant::ZERO)
        .unwrap();
}

#[test]
fn a_message_over_the_limit_is_resource_exhausted() {
    each_split(|| {
        let limit = ClientConfig {
            max_message_bytes: 1024,
            ..ClientConfig::default()
        };
        let mut p = Pair::with_both(EngineConfig::default(), limit);
        // A request over the limit never leaves.
        let big = tools_call(1, "echo", &format!(r#"{{"text":"{}"}}"#, "x".repeat(2000)));
        assert!(matches!(
            p.client.call(big.as_bytes(), None, p.now),
            Err(StartError::TooLarge { .. })
        ));
        // A response over it fails the call.
        let c = p.call(&tools_call(2, "echo", r#"{"text":"y"}"#), None);
        p.run();
        let text = format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
            "y".repeat(2000)
        );
        p.server
            .endpoint
            .respond(p.server.app.requests[0].call, text.as_bytes())
            .unwrap();
        p.run();
        let seen = p.seen(c);
        assert!(seen.response.is_none());
        let failed = seen.failed.expect("failed");
        assert_eq!(failed.5, Some(Code::ResourceExhausted), "{failed:?}");
        assert!(failed.6, "a transport failure");
        assert!(seen.ended);
        assert_eq!(p.client.store().in_use(), 0);
        // The next call on the connection is fine.
        let d = p.call(&tools_call(3, "echo", r#"{"text":"z"}"#), None);
        p.run();
        p.server
            .endpoint
            .respond(p.server.app.requests[1].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        assert!(p.seen(d).response.is_some());
    });
}

#[test]
fn an_early_answer_is_kept_when_the_request_had_not_ended() {
    each_split(|| {
        // The server's stream window (1 KiB) holds the 6 KiB request back; the
        // server refuses the call's credentials first, ends the stream and
        // resets it: the client keeps the answer, not the reset.
        let mut config = EngineConfig {
            authorize: true,
            ..EngineConfig::default()
        };
        config.h2.initial_window_size = 1024;
        let mut p = Pair::with(config);
        // The settings first: the window applies from then on.
        p.run();
        let before = p.up.total();
        let big = "x".repeat(6000);
        let c = p.call(
            &tools_call(11, "echo", &format!(r#"{{"text":"{big}"}}"#)),
            None,
        );
        p.run();
        let seen = p.seen(c);
        let f = seen.failed.expect("failed");
        assert_eq!(f.5, Some(Code::Unauthenticated), "{f:?}");
        assert_eq!(f.4, Some(401));
        assert!(seen.ended);
        // The rest of the request never went out.
        assert!(p.up.total() - before < 6000, "{}", p.up.total() - before);
        assert!(!p.client.is_closed());
    });
}

#[test]
fn a_learned_schema_is_mirrored_without_a_relist() {
    each_split(|| {
        let mut p = Pair::new();
        let lookup = TOOLS[1].input_schema.as_bytes();
        // Only schemas with valid annotations are kept, once.
        assert!(
            !p.client
                .learn_schema(b"\"echo\"", TOOLS[0].input_schema.as_bytes())
        );
        assert!(
            !p.client
                .learn_schema(b"\"broken\"", TOOLS[2].input_schema.as_bytes())
        );
        assert!(p.client.learn_schema(b"\"lookup\"", lookup));
        assert!(!p.client.learn_schema(b"\"lookup\"", lookup));
        let cached: Vec<(&[u8], &[u8])> = p.client.cached_schemas().collect();
        assert_eq!(cached, [(&b"\"lookup\""[..], lookup)]);
        p.client.clear_schemas();
        assert_eq!(p.client.cached_schemas().count(), 0);
        assert!(p.client.learn_schema(b"\"lookup\"", lookup));
        let c = p.call(
            &tools_call(40, "lookup", r#"{"region":"eu","limit":2}"#),
            None,
        );
        p.run();
        assert_eq!(p.server.app.requests.len(), 1, "{:?}", p.seen(c));
        p.server
            .endpoint
            .respond(p.server.app.requests[0].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        assert!(p.seen(c).response.is_some(), "{:?}", p.seen(c));
        // No tools/list was read: its warning (the broken tool) never came.
        assert!(
            p.client.app.warnings.is_empty(),
            "{:?}",
            p.client.app.warnings
        );
    });
}

#[test]
fn after_goaway_no_call_starts_and_unsent_calls_are_refused() {
    each_split(|| {
        let mut p = Pair::new();
        let a = p.call(&tools_call(41, "echo", r#"{"text":"a"}"#), None);
        p.run();
        assert_eq!(p.server.app.requests.len(), 1);
        assert!(p.client.accepts_calls());
        // A second call is queued in the client when the server's GOAWAY
        // (last stream: the first call's) arrives.
        let b = p.call(&tools_call(42, "echo", r#"{"text":"b"}"#), None);
        p.server.go_away();
        p.down.transmit(&mut *p.server);
        let d = p.down.deliver(&mut *p.client, p.now, &mut p.up);
        assert_eq!(d.end, Step::Done);
        assert!(!p.client.accepts_calls());
        assert_eq!(
            p.client
                .call(tools_call(43, "echo", "{}").as_bytes(), None, p.now)
                .unwrap_err(),
            StartError::Closed
        );
        p.run();
        let seen = p.seen(b);
        let f = seen.failed.clone().expect("refused");
        assert_eq!(f.5, Some(Code::Unavailable), "{f:?}");
        assert!(f.6 && seen.refused && seen.ended, "{seen:?}");
        // No stream could take the retry here: a driver may send it once on a
        // new connection.
        assert!(!seen.retried, "{seen:?}");
        // The first call finishes on the draining connection.
        p.server
            .endpoint
            .respond(p.server.app.requests[0].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        let seen = p.seen(a);
        assert!(seen.response.is_some() && !seen.refused, "{seen:?}");
    });
}

#[test]
fn a_growing_store_holds_what_a_call_carries() {
    each_split(|| {
        let store = || VecStore {
            max: 1 << 20,
            ..VecStore::default()
        };
        let mut p: Pair<VecStore, VecStore> = Pair::with_stores(
            EngineConfig::default(),
            ClientConfig::default(),
            store(),
            store(),
        );
        assert_eq!(p.client.store().live, 0, "no call, no buffer");
        // The tools/list result without the invalid tool is written after the
        // response in the receive buffer, which grows for it.
        let l = p.call(
            &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#),
            None,
        );
        p.run();
        let list = p.seen(l).response.expect("tools/list");
        assert!(
            !list.contains("broken") && list.contains("lookup"),
            "{list}"
        );
        assert_eq!(p.client.store().live, 0);
        // A call whose request and response are far larger than the slab's.
        let text = "q".repeat(50_000);
        let c = p.call(
            &tools_call(2, "echo", &format!(r#"{{"text":"{text}"}}"#)),
            None,
        );
        p.run();
        assert_eq!(p.client.store().live, 1, "the request's buffer");
        let out = format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
            "r".repeat(200_000)
        );
        p.server
            .endpoint
            .respond(p.server.app.requests.last().unwrap().call, out.as_bytes())
            .unwrap();
        p.run();
        let r = p.seen(c).response.expect("response");
        assert!(r.len() > 200_000 && r.contains("rrrr"));
        assert!(p.seen(c).ended);
        assert_eq!(p.client.store().live, 0, "both buffers back");
        assert!(p.client.store().peak_bytes >= 200_000);
    });
}

#[test]
fn metadata_set_at_run_time_goes_out_and_can_change() {
    each_split(|| {
        let mut p = Pair::with(EngineConfig {
            authorize: true,
            ..EngineConfig::default()
        });
        let list =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#);
        // Not 'static: read at run time, dropped after the call.
        let token = format!("Bearer {}", "t".repeat(3));
        assert!(p.client.set_metadata(None, &[("Authorization", &token)]));
        drop(token);
        let c = p.call(&list, None);
        p.run();
        assert!(p.seen(c).failed.is_some());
        let token = String::from("Bearer second");
        assert!(
            p.client
                .set_metadata(Some("example.test"), &[("authorization", &token)])
        );
        let c = p.call(&list, None);
        p.run();
        assert!(p.seen(c).failed.is_some());
        assert_eq!(
            p.server.app.authorizations,
            [Some("ttt".to_owned()), Some("second".to_owned())]
        );
        // Too long to encode: refused, the last metadata stays.
        let huge = "x".repeat(70_000);
        assert!(!p.client.set_metadata(None, &[("authorization", &huge)]));
        let c = p.call(&list, None);
        p.run();
        assert!(p.seen(c).failed.is_some());
        assert_eq!(
            p.server.app.authorizations.last().unwrap().as_deref(),
            Some("second")
        );
    });
}

/// A server's call store that has no buffer for the first `refuse` calls
/// (the server engine then resets them with REFUSED_STREAM, unprocessed).
#[derive(Debug, Default)]
struct Refusing {
    inner: VecStore,
    refuse: usize,
    refused: usize,
}

impl Refusing {
    fn new(refuse: usize) -> Self {
        Self {
            inner: VecStore {
                max: 8192,
                ..VecStore::default()
            },
            refuse,
            refused: 0,
        }
    }
}

impl CallStore for Refusing {
    type Buf = Vec<u8>;
    fn max_len(&self) -> usize {
        self.inner.max_len()
    }
    fn take(&mut self, len: usize) -> Option<Vec<u8>> {
        if self.refused < self.refuse {
            self.refused += 1;
            return None;
        }
        self.inner.take(len)
    }
    fn grow(&mut self, buf: &mut Vec<u8>, len: usize) -> bool {
        self.inner.grow(buf, len)
    }
    fn bytes<'a>(&'a self, buf: &'a Vec<u8>) -> &'a [u8] {
        self.inner.bytes(buf)
    }
    fn bytes_mut<'a>(&'a mut self, buf: &'a mut Vec<u8>) -> &'a mut [u8] {
        self.inner.bytes_mut(buf)
    }
    fn put(&mut self, buf: Vec<u8>) {
        self.inner.put(buf)
    }
}

#[test]
fn a_refused_call_is_sent_once_more_on_a_new_stream() {
    each_split(|| {
        let mut p: Pair<SlabStore<8192, 8>, Refusing> = Pair::with_stores(
            EngineConfig::default(),
            ClientConfig::default(),
            SlabStore::new(),
            Refusing::new(1),
        );
        let c = p.call(&tools_call(50, "echo", r#"{"text":"again"}"#), None);
        p.run();
        // The first stream was refused unprocessed; the second one reached
        // the handler with the same request.
        assert_eq!(p.server.store().refused, 1);
        assert_eq!(p.server.app.requests.len(), 1, "{:?}", p.seen(c));
        assert!(p.server.app.requests[0].params.contains("again"));
        assert!(p.seen(c).failed.is_none(), "{:?}", p.seen(c));
        p.server
            .endpoint
            .respond(p.server.app.requests[0].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        let seen = p.seen(c);
        assert!(
            seen.response
                .as_deref()
                .is_some_and(|r| r.starts_with(r#"{"jsonrpc":"2.0","id":50,"result":"#)),
            "{seen:?}"
        );
        assert!(seen.ended);
        assert_eq!(p.client.store().in_use(), 0);
    });
}

#[test]
fn a_call_refused_twice_fails_as_refused() {
    each_split(|| {
        let mut p: Pair<SlabStore<8192, 8>, Refusing> = Pair::with_stores(
            EngineConfig::default(),
            ClientConfig::default(),
            SlabStore::new(),
            Refusing::new(2),
        );
        let c = p.call(&tools_call(51, "echo", r#"{"text":"no"}"#), None);
        p.run();
        // Sent twice, refused twice, never sent a third time.
        assert_eq!(p.server.store().refused, 2);
        assert!(p.server.app.requests.is_empty());
        let seen = p.seen(c);
        let f = seen.failed.clone().expect("failed");
        assert_eq!(f.5, Some(Code::Unavailable), "{f:?}");
        assert!(f.6, "a transport failure");
        assert!(
            f.3.starts_with(r#"{"jsonrpc":"2.0","id":51,"error":"#),
            "{f:?}"
        );
        assert!(seen.refused && seen.retried && seen.ended, "{seen:?}");
        // The connection is fine: the next call goes through.
        let d = p.call(&tools_call(52, "echo", r#"{"text":"yes"}"#), None);
        p.run();
        p.server
            .endpoint
            .respond(p.server.app.requests[0].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        assert!(p.seen(d).response.is_some(), "{:?}", p.seen(d));
    });
}

#[test]
fn forty_calls_cancelled_while_their_answers_are_in_flight() {
    each_split(|| {
        let store = || VecStore {
            max: 8192,
            ..VecStore::default()
        };
        let mut p: Pair<VecStore, VecStore, 48, 64> = Pair::with_stores(
            EngineConfig::default(),
            ClientConfig::default(),
            store(),
            store(),
        );
        let calls: Vec<CallId> = (0..40)
            .map(|i| p.call(&tools_call(100 + i, "echo", r#"{"text":"x"}"#), None))
            .collect();
        p.run();
        assert_eq!(p.server.app.requests.len(), 40);
        for r in &p.server.app.requests {
            p.server
                .endpoint
                .respond(r.call, br#"{"content":[]}"#)
                .unwrap();
        }
        // Every response and its trailers leave the server...
        p.down.transmit(&mut *p.server);
        assert!(!p.server.wants_transmit());
        assert!(p.down.len() > 40 * 9, "{}", p.down.len());
        // ... and the client cancels every call before they arrive: 40 streams
        // it reset, all of them getting frames.
        for c in &calls {
            assert!(p.client.cancel(*c));
        }
        let resets = p.sent_resets();
        let want: Vec<(u32, ErrorCode)> = (0..40).map(|i| (2 * i + 1, ErrorCode::CANCEL)).collect();
        assert_eq!(resets, want, "RST_STREAM(CANCEL) on each call's stream");
        let d = p.down.deliver(&mut *p.client, p.now, &mut p.up);
        assert_eq!(d.end, Step::Done);
        assert!(!p.client.is_closed(), "{:?}", p.client.connection());
        assert!(p.client.accepts_calls());
        p.run();
        assert!(!p.client.is_closed());
        for c in &calls {
            assert!(
                !p.client.app.seen.contains_key(c),
                "no event after a cancel"
            );
        }
        // The connection still carries calls.
        let d = p.call(&tools_call(200, "echo", r#"{"text":"after"}"#), None);
        p.run();
        assert_eq!(p.server.app.requests.len(), 41);
        p.server
            .endpoint
            .respond(p.server.app.requests[40].call, br#"{"content":[]}"#)
            .unwrap();
        p.run();
        assert!(p.seen(d).response.is_some(), "{:?}", p.seen(d));
        assert_eq!(p.client.store().live, 0, "every buffer back");
    });
}

/// The typed binding (feature `typed`): the same client engine, its calls
/// sent over a [`Binding`](mcpwire_core::mcp::client::Binding), against
/// the same server engine (which serves the typed RPCs beside the tunnel),
/// under every split of the byte streams.
#[cfg(feature = "typed")]
mod typed {
    use super::*;
    use mcpwire_core::mcp::client::{Binding, CallOptions};

    impl Pair {
        fn call_on(&mut self, binding: Binding, body: &str) -> Result<CallId, StartError> {
            self.client
                .call_on(binding, body.as_bytes(), None, self.now)
        }
    }

    #[test]
    fn a_typed_tool_call_answers_as_the_tunnel_without_its_notifications() {
        each_split(|| {
            let mut p = Pair::new();
            let body = tools_call(2, "echo", r#"{"text":"hi"}"#);
            let c = p.call_on(Binding::TypedOrTunnel, &body).unwrap();
            p.run();
            assert_eq!(p.server.app.requests.len(), 1);
            let req = &p.server.app.requests[0];
            assert_eq!(req.method, "tools/call");
            assert!(
                req.params.contains(r#""arguments":{"text":"hi"}"#),
                "{req:?}"
            );
            let call = req.call;
            // The typed binding drops what relates to the request.
            let _ = p.server.notify(
                call,
                "notifications/progress",
                br#"{"progressToken":1,"progress":1}"#,
            );
            p.run();
            p.server
                .endpoint
                .respond(call, br#"{"content":[{"type":"text","text":"hi"}]}"#)
                .unwrap();
            p.run();
            let seen = p.seen(c);
            assert!(seen.notifications.is_empty(), "{seen:?}");
            assert!(seen.failed.is_none(), "{seen:?}");
            let r = seen.response.expect("a response");
            assert!(
                r.starts_with(r#"{"jsonrpc":"2.0","id":2,"result":{"#),
                "{r}"
            );
            let result = json::get(r.as_bytes(), b"result").unwrap();
            let content = json::get(result, b"content").unwrap();
            let first = json::elements(content).next().unwrap();
            assert_eq!(json::get(first, b"text"), Some(&br#""hi""#[..]));
            assert!(seen.ended);
        });
    }

    /// A typed call whose server asks for input: the next round is
    /// transcoded again, with the answers and the `requestState`, and its
    /// result ends the call (with the round's id).
    #[test]
    fn a_typed_call_that_asks_for_input_goes_on_in_its_next_round() {
        each_split(|| {
            let mut p = Pair::new();
            let options = CallOptions {
                binding: Binding::Typed,
                answers_input: true,
                ..CallOptions::default()
            };
            let body = tools_call(9, "echo", r#"{"text":"x"}"#);
            let c = p.client.call_with(body.as_bytes(), options, p.now).unwrap();
            p.run();
            let first = p.server.app.requests[0].call;
            p.server
                .endpoint
                .respond(
                    first,
                    br#"{"resultType":"input_required","inputRequests":{"ok":{"method":"roots/list"}},"requestState":"st"}"#,
                )
                .unwrap();
            p.run();
            let seen = p.seen(c);
            assert_eq!(
                seen.inputs,
                [r#"{"ok":{"method":"roots/list"}}"#],
                "{seen:?}"
            );
            p.client
                .answer_input(c, br#"{"ok":{"roots":[]}}"#, p.now)
                .unwrap();
            p.run();
            assert_eq!(p.server.app.requests.len(), 2);
            let params = &p.server.app.requests[1].params;
            assert!(params.contains(r#""requestState":"st""#), "{params}");
            assert!(params.contains(r#""inputResponses":{"ok":"#), "{params}");
            assert!(params.contains(r#""arguments":{"text":"x"}"#), "{params}");
            p.server
                .endpoint
                .respond(p.server.app.requests[1].call, br#"{"content":[]}"#)
                .unwrap();
            p.run();
            let seen = p.seen(c);
            let r = seen.response.expect("a response");
            assert!(
                r.starts_with(r##"{"jsonrpc":"2.0","id":"9#1","result":"##),
                "{r}"
            );
            assert!(seen.ended);
        });
    }

    #[test]
    fn a_request_the_messages_cannot_carry_never_leaves() {
        each_split(|| {
            let mut p = Pair::new();
            p.run();
            let before = p.up.total();
            let cursor = format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{{"cursor":"2",{META}}}}}"#
            );
            let discover = format!(
                r#"{{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{{{META}}}}}"#
            );
            for (binding, body) in [
                (Binding::TypedOrTunnel, cursor.as_str()),
                (Binding::Typed, cursor.as_str()),
                // No RPC, and no fallback.
                (Binding::Typed, discover.as_str()),
            ] {
                let e = p.call_on(binding, body).unwrap_err();
                assert!(
                    matches!(e, StartError::Invalid(r) if r.code == -32600),
                    "{body}: {e:?}"
                );
            }
            p.run();
            assert_eq!(p.up.total(), before);
            assert!(p.server.app.requests.is_empty());
        });
    }

    #[test]
    fn an_error_in_the_trailers_carries_the_applications_id() {
        each_split(|| {
            let mut p = Pair::new();
            let c = p
                .call_on(Binding::Typed, &tools_call(8, "nope", "{}"))
                .unwrap();
            p.run();
            let seen = p.seen(c);
            let f = seen.failed.expect("failed");
            assert_eq!(f.0, -32602, "{f:?}");
            assert!(
                f.3.starts_with(r#"{"jsonrpc":"2.0","id":8,"error":"#),
                "{f:?}"
            );
            assert_eq!(f.5, Some(Code::InvalidArgument));
            assert!(!f.6, "the server's error, not the transport's");
            assert!(seen.ended);
        });
    }

    #[test]
    fn a_method_without_an_rpc_goes_over_the_tunnel() {
        each_split(|| {
            let mut p = Pair::new();
            let body = r#"{"jsonrpc":"2.0","id":"e","method":"x/ext","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
            let c = p.call_on(Binding::TypedOrTunnel, body).unwrap();
            p.run();
            // The tunnel's in-band answer: an error response message with
            // the request's id.
            let f = p.seen(c).failed.expect("failed");
            assert_eq!(f.0, -32601, "{f:?}");
            assert!(
                f.3.starts_with(r#"{"jsonrpc":"2.0","id":"e","error":"#),
                "{f:?}"
            );
        });
    }

    #[test]
    fn the_clients_deadline_resets_a_typed_call() {
        each_split(|| {
            let mut p = Pair::new();
            let c = p
                .client
                .call_on(
                    Binding::Typed,
                    tools_call(6, "echo", r#"{"text":"slow"}"#).as_bytes(),
                    Some(Duration::from_millis(100)),
                    p.now,
                )
                .unwrap();
            p.run();
            assert_eq!(p.server.app.requests.len(), 1);
            p.now = Instant::from_millis(100);
            p.client.handle_timeout(p.now);
            p.run();
            let seen = p.seen(c);
            assert_eq!(seen.failed.unwrap().5, Some(Code::DeadlineExceeded));
            assert!(
                p.server.app.events.iter().any(|e| e.contains("Reset")),
                "{:?}",
                p.server.app.events
            );
        });
    }
}
