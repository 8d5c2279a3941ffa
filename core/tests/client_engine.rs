//! The client engines through their one contract ([`ClientEngine`]): each
//! binding's engine (the gRPC tunnel's, Streamable HTTP's over HTTP/1.1
//! and HTTP/2) against the core's server engine of that binding, over
//! links the engine asks for, on the pipes of `mcpwire-sim` cut every way
//! ([`each_split`]). What a driver sees: links opened and closed when the
//! engine says, calls answered, failures that say why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use core::time::Duration;
use std::cell::RefCell;
use std::rc::Rc;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::SlabStore;
use mcpwire_core::mcp::client::era::{Era, EraChoice};
use mcpwire_core::mcp::client::http::DRAIN_WAIT;
use mcpwire_core::mcp::client::stdio::{RestartPolicy, StdioEngine, StdioEngineConfig};
use mcpwire_core::mcp::client::{
    CallId, CallOptions, ClientConfig, ClientEngine, Http2Mode, HttpClient, HttpClientConfig,
    Negotiated, StartError, TunnelClient,
};
use mcpwire_core::mcp::registry::ToolInfo;
use mcpwire_core::mcp::server::{
    HttpConfig, HttpServer, Server, ServerConfig, StdioConfig, StdioServer,
};
use mcpwire_core::time::Instant;

mod support;

use support::legacy;
use support::mcp::{META, checked, each_split, registry};
use support::net::{Net, Served, Server as Served_};

const TOOLS: [ToolInfo<'static>; 4] = [
    support::mcp::ECHO,
    ToolInfo {
        name: "hold",
        title: None,
        description: "Never answers.",
        input_schema: r#"{"type":"object"}"#,
    },
    ASK,
    NAG,
];

/// Asks for a name, then whether to greet it, then greets
/// (`support::net::rounds_result`).
const ASK: ToolInfo<'static> = ToolInfo {
    name: "ask",
    title: None,
    description: "Asks twice, then answers.",
    input_schema: r#"{"type":"object"}"#,
};

/// Asks for the roots for ever.
const NAG: ToolInfo<'static> = ToolInfo {
    name: "nag",
    title: None,
    description: "Never done asking.",
    input_schema: r#"{"type":"object"}"#,
};

/// A heap store the engine clones for each connection.
#[derive(Debug, Clone, Copy)]
struct Heap;

impl mcpwire_core::mcp::CallStore for Heap {
    type Buf = Vec<u8>;
    fn max_len(&self) -> usize {
        1 << 20
    }
    fn take(&mut self, len: usize) -> Option<Vec<u8>> {
        (len <= self.max_len()).then(|| vec![0; len])
    }
    fn grow(&mut self, buf: &mut Vec<u8>, len: usize) -> bool {
        if len > self.max_len() {
            return false;
        }
        if buf.len() < len {
            buf.resize(len, 0);
        }
        true
    }
    fn bytes<'a>(&'a self, buf: &'a Vec<u8>) -> &'a [u8] {
        buf
    }
    fn bytes_mut<'a>(&'a mut self, buf: &'a mut Vec<u8>) -> &'a mut [u8] {
        buf
    }
    fn put(&mut self, _: Vec<u8>) {}
}

type Tunnel = TunnelClient<Heap, 4, 4096, 16384>;

fn tool_call(id: u32, name: &str, args: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args},{META}}}}}"#
    )
}

/// A tunnel engine whose links reach a fresh tunnel server each; `refuse`
/// says which link numbers are refused.
fn tunnel_net(refuse: &'static [u32]) -> Net<Tunnel> {
    tunnel_net_with(ClientConfig::default(), refuse)
}

fn tunnel_net_with(config: ClientConfig, refuse: &'static [u32]) -> Net<Tunnel> {
    Net::new(Tunnel::new(config, Heap), move |link| {
        if refuse.contains(&link.get()) {
            return None;
        }
        let engine: Server<'static, SlabStore<8192, 8>, 8, 4096, 16384> = Server::new(
            checked(registry(&TOOLS)),
            ServerConfig::default(),
            SlabStore::new(),
            Instant::ZERO,
        );
        Some(Box::new(Served_::new(engine)) as Box<dyn Served>)
    })
}

/// The first call asks for a link; calls go on it and are answered.
#[test]
fn the_tunnel_connects_at_its_first_call() {
    each_split(|| {
        let mut net = tunnel_net(&[]);
        assert!(net.link_events.is_empty(), "no link before a call");
        let a = net
            .call(&tool_call(1, "echo", r#"{"text":"one"}"#))
            .unwrap();
        let b = net
            .call(&tool_call(2, "echo", r#"{"text":"two"}"#))
            .unwrap();
        assert_eq!(net.link_events, [("connect", 0)]);
        for (call, text) in [(a, "one"), (b, "two")] {
            let seen = net.seen(call);
            assert!(seen.response.unwrap().contains(text));
            assert!(seen.ended);
        }
    });
}

/// A server that says GOAWAY keeps its calls in progress to their end on
/// its connection; new calls go on a new one, which the engine asks for;
/// the old link closes once its last call ended.
#[test]
fn after_a_goaway_new_calls_go_on_a_new_connection() {
    each_split(|| {
        let mut net = tunnel_net(&[]);
        let options = CallOptions::with_timeout(Duration::from_secs(5));
        let held = net.call_with(&tool_call(1, "hold", "{}"), options).unwrap();
        net.server(0).go_away();
        net.run();
        let next = net
            .call(&tool_call(2, "echo", r#"{"text":"next"}"#))
            .unwrap();
        assert_eq!(net.link_events, [("connect", 0), ("connect", 1)]);
        assert!(net.seen(next).response.unwrap().contains("next"));
        assert!(!net.seen(held).ended, "the held call runs on");
        assert_eq!(net.open_links(), [0, 1]);
        // Its deadline ends it; then the old link goes.
        net.advance(Duration::from_secs(6));
        let seen = net.seen(held);
        assert!(seen.ended, "{seen:?}");
        assert_eq!(net.open_links(), [1]);
        assert_eq!(
            net.link_events,
            [("connect", 0), ("connect", 1), ("disconnect", 0)]
        );
    });
}

/// A link the driver could not open fails the calls that waited for it
/// with UNAVAILABLE and the driver's reason; the next call asks for a new
/// link.
#[test]
fn a_link_that_cannot_be_opened_fails_its_calls_with_the_reason() {
    each_split(|| {
        let mut net = tunnel_net(&[0]);
        let a = net.call(&tool_call(1, "echo", r#"{"text":"a"}"#)).unwrap();
        let seen = net.seen(a);
        let (code, message, diagnostics) = seen.failed.expect("failed");
        assert_eq!(code, -32603, "UNAVAILABLE maps to an internal error");
        assert!(message.contains("refused"), "{message}");
        assert_eq!(diagnostics.grpc_status, Some(Code::Unavailable));
        assert!(diagnostics.transport && diagnostics.refused);
        assert!(seen.ended);
        let b = net.call(&tool_call(2, "echo", r#"{"text":"b"}"#)).unwrap();
        assert!(net.seen(b).response.unwrap().contains("\"b\""));
        assert_eq!(
            net.link_events,
            [("connect", 0), ("disconnect", 0), ("connect", 1)]
        );
    });
}

/// Closing the engine ends its connections gracefully: the links close,
/// the engine says it is over, and takes no call.
#[test]
fn close_ends_every_link_and_the_engine() {
    each_split(|| {
        let mut net = tunnel_net(&[]);
        let a = net.call(&tool_call(1, "echo", r#"{"text":"a"}"#)).unwrap();
        assert!(net.seen(a).ended);
        let now = net.now;
        net.client.close(now);
        net.run();
        assert_eq!(
            net.link_events,
            [("connect", 0), ("disconnect", 0), ("closed", 0)]
        );
        assert!(net.client.is_closed());
        assert!(matches!(
            net.client.start(
                tool_call(2, "echo", "{}").as_bytes(),
                Default::default(),
                now
            ),
            Err(StartError::Closed)
        ));
    });
}

// ----------------------------------------------------------------------
// stdio
// ----------------------------------------------------------------------

type Stdio = StdioEngine<Vec<u8>, Heap, 8>;

/// A stdio engine whose links are fresh stdio servers (a child each);
/// `refuse` says which link numbers the driver could not start.
fn stdio_net(refuse: &'static [u32]) -> Net<Stdio> {
    stdio_net_with(StdioEngineConfig::default(), refuse)
}

fn stdio_net_with(config: StdioEngineConfig, refuse: &'static [u32]) -> Net<Stdio> {
    let engine = Stdio::new(config, vec![0; 1 << 16], Heap, Instant::ZERO);
    Net::new(engine, move |link| {
        if refuse.contains(&link.get()) {
            return None;
        }
        let engine: StdioServer<'static, SlabStore<8192, 8>, 8> = StdioServer::new(
            checked(registry(&TOOLS)),
            StdioConfig::default(),
            SlabStore::new(),
            Instant::ZERO,
        );
        Some(Box::new(Served_::new(engine)) as Box<dyn Served>)
    })
}

fn listen(id: u32) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":"L{id}","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
    )
}

/// The server of the current link crashes (its stdout closes) and the
/// engine is told.
fn crash(net: &mut Net<Stdio>, link: u32) {
    net.server(link).go_away();
    net.run();
}

/// The first call asks for the server; the engine runs the era probe on
/// it, says it is ready, and the calls that waited go (the driver tries
/// them again after the `Ready`).
#[test]
fn the_stdio_engine_starts_its_server_and_probes_before_the_calls_go() {
    each_split(|| {
        let mut net = stdio_net(&[]);
        assert!(matches!(
            net.call(&tool_call(1, "echo", r#"{"text":"early"}"#)),
            Err(StartError::Busy)
        ));
        assert_eq!(net.link_events, [("connect", 0), ("ready", 0)]);
        let a = net
            .call(&tool_call(1, "echo", r#"{"text":"one"}"#))
            .unwrap();
        let seen = net.seen(a);
        assert!(seen.response.unwrap().contains("one"));
        assert!(seen.ended);
        let era = net.client.era().expect("an era");
        assert_eq!(era.version(), Some("2026-07-28"));
    });
}

/// A server that exits with a call in flight fails it (the server is
/// gone: UNAVAILABLE); the engine starts another after the backoff, says
/// so, and the new one speaks the era already chosen (no second probe).
/// Calls meanwhile wait.
#[test]
fn a_server_that_exits_fails_its_calls_and_is_started_again_after_the_backoff() {
    each_split(|| {
        let mut net = stdio_net(&[]);
        net.client.open(net.now);
        net.run();
        let held = net.call(&tool_call(2, "hold", "{}")).unwrap();
        crash(&mut net, 0);
        let seen = net.seen(held);
        let (code, message, diagnostics) = seen.failed.expect("failed");
        assert_eq!(code, -32000, "{message}");
        assert!(message.contains("stdout closed"), "{message}");
        assert!(diagnostics.transport);
        assert_eq!(diagnostics.grpc_status, Some(Code::Unavailable));
        assert!(seen.ended);
        assert_eq!(
            net.link_events,
            [("connect", 0), ("ready", 0), ("disconnect", 0)]
        );
        // Within the backoff: the call waits.
        assert!(matches!(
            net.call(&tool_call(3, "echo", r#"{"text":"again"}"#)),
            Err(StartError::Busy)
        ));
        net.advance(Duration::from_millis(100));
        assert_eq!(
            net.notes,
            ["restarting the server (restart 1 of 5 within 30 s)"]
        );
        let again = net
            .call(&tool_call(3, "echo", r#"{"text":"again"}"#))
            .unwrap();
        assert!(net.seen(again).response.unwrap().contains("again"));
        assert_eq!(net.link_events[3..], [("connect", 1), ("ready", 0)]);
        assert_eq!(net.client.restarts(), 1);
        assert_eq!(net.server(1).requests(), ["tools/call echo"]);
    });
}

/// A server the driver could not start before any was ready: the engine
/// gives up, says why at once, and stays down.
#[test]
fn a_server_that_cannot_be_started_ends_the_engine_with_the_reason() {
    each_split(|| {
        let mut net = stdio_net(&[0]);
        net.client.open(net.now);
        net.run();
        assert_eq!(net.downs, ["the server could not be started: refused"]);
        assert!(matches!(
            net.call(&tool_call(1, "echo", "{}")),
            Err(StartError::Down)
        ));
        net.advance(Duration::from_secs(60));
        assert!(matches!(
            net.call(&tool_call(1, "echo", "{}")),
            Err(StartError::Down)
        ));
        assert_eq!(net.link_events, [("connect", 0)]);
    });
}

/// Crashes past the budget pause the restarts until the oldest leaves
/// the window: calls are refused meanwhile with the reason and the time
/// left; then a server starts again and answers.
#[test]
fn crashes_past_the_budget_pause_the_restarts_until_the_window_refills() {
    each_split(|| {
        let config = StdioEngineConfig {
            restart: RestartPolicy {
                max_restarts: 2,
                window: Duration::from_secs(5),
                ..RestartPolicy::default()
            },
            ..StdioEngineConfig::default()
        };
        let mut net = stdio_net_with(config, &[]);
        net.client.open(net.now);
        net.run();
        for link in 0..2 {
            crash(&mut net, link);
            net.advance(Duration::from_millis(500));
        }
        crash(&mut net, 2);
        assert_eq!(net.client.restarts(), 2);
        assert_eq!(
            net.notes.last().map(String::as_str),
            Some("the server crashed again after 2 restarts within 5 s: restarts pause for 4 s")
        );
        net.advance(Duration::from_millis(1500));
        assert!(matches!(
            net.call(&tool_call(1, "echo", "{}")),
            Err(StartError::Down)
        ));
        let why = String::from_utf8_lossy(net.client.down_reason().unwrap()).into_owned();
        assert!(why.contains("restarts pause for 2.5 s more"), "{why}");
        net.advance(Duration::from_secs(3));
        let a = net
            .call(&tool_call(1, "echo", r#"{"text":"back"}"#))
            .unwrap();
        assert!(net.seen(a).response.unwrap().contains("back"));
        assert_eq!(net.client.restarts(), 3);
    });
}

/// With `refuse_while_restarting`, a call while a new server starts is
/// refused at once, saying which attempt it is; once the server is back
/// calls go.
#[test]
fn calls_are_refused_while_the_server_restarts_when_asked() {
    each_split(|| {
        let config = StdioEngineConfig {
            refuse_while_restarting: true,
            ..StdioEngineConfig::default()
        };
        let mut net = stdio_net_with(config, &[]);
        net.client.open(net.now);
        net.run();
        crash(&mut net, 0);
        assert!(matches!(
            net.call(&tool_call(1, "echo", "{}")),
            Err(StartError::Down)
        ));
        let why = String::from_utf8_lossy(net.client.down_reason().unwrap()).into_owned();
        assert!(
            why.starts_with("the server is restarting (attempt 1 of 5)"),
            "{why}"
        );
        net.advance(Duration::from_millis(100));
        let a = net.call(&tool_call(1, "echo", r#"{"text":"ok"}"#)).unwrap();
        assert!(net.seen(a).response.unwrap().contains("ok"));
    });
}

/// A listen stream outlives a crash: the same call is acknowledged again
/// by the new server, never failed; a call in flight is failed.
#[test]
fn a_listen_stream_is_sent_again_to_the_restarted_server() {
    each_split(|| {
        let mut net = stdio_net(&[]);
        net.client.open(net.now);
        net.run();
        let l = net.call(&listen(1)).unwrap();
        let acks = |net: &Net<Stdio>| {
            net.seen(l)
                .notifications
                .iter()
                .filter(|n| n.contains("notifications/subscriptions/acknowledged"))
                .count()
        };
        assert_eq!(acks(&net), 1);
        crash(&mut net, 0);
        net.advance(Duration::from_millis(100));
        assert_eq!(acks(&net), 2);
        let seen = net.seen(l);
        assert!(seen.failed.is_none() && !seen.ended, "{seen:?}");
        assert_eq!(net.server(1).requests(), Vec::<String>::new());
        // Cancelled, it is not sent to the next one.
        assert!(net.client.cancel(l, net.now));
        net.run();
        crash(&mut net, 1);
        net.advance(Duration::from_millis(200));
        assert_eq!(acks(&net), 2);
    });
}

/// At most half of the calls are listen streams: the next is refused
/// (RESOURCE_EXHAUSTED), and calls still go.
#[test]
fn listen_streams_take_at_most_half_the_calls() {
    each_split(|| {
        let mut net = stdio_net(&[]);
        net.client.open(net.now);
        net.run();
        for i in 0..4 {
            net.call(&listen(i)).unwrap();
        }
        assert!(matches!(
            net.call(&listen(9)),
            Err(StartError::Exhausted(why)) if why.contains("listen streams")
        ));
        let a = net
            .call(&tool_call(1, "echo", r#"{"text":"a turn"}"#))
            .unwrap();
        assert!(net.seen(a).response.unwrap().contains("a turn"));
    });
}

// ---------------------------------------------------------------------
// Streamable HTTP (MCP 2026-07-28 §5): the HTTP/1.1 pool against the
// core's HttpServer on each link, HTTP/2 against the tunnel server's
// `POST /mcp`.
// ---------------------------------------------------------------------

/// An HTTP engine: 8 calls, 4 HTTP/1.1 links at most.
type Http = HttpClient<Heap, 8, 4, 4096, 16384>;

/// `lookup`'s `region` is mirrored in `Mcp-Param-Region`, which the
/// server requires.
const LOOKUP: ToolInfo<'static> = support::mcp::lookup(
    r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
);
const HTTP_TOOLS: [ToolInfo<'static>; 5] = [support::mcp::ECHO, TOOLS[1], LOOKUP, ASK, NAG];

/// Which wire a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Http1,
    Http2,
}

const WIRES: [Wire; 2] = [Wire::Http1, Wire::Http2];

fn http_config(wire: Wire) -> HttpClientConfig {
    HttpClientConfig {
        http2: match wire {
            Wire::Http1 => Http2Mode::Never,
            Wire::Http2 => Http2Mode::Always,
        },
        era: EraChoice::Modern,
        pool_size: 2,
        ..HttpClientConfig::default()
    }
}

/// An HTTP engine whose links each reach a fresh server of `wire`
/// (authorizing only `token` when given).
fn http_net(wire: Wire, config: HttpClientConfig, token: Option<&'static str>) -> Net<Http> {
    let client = Http::new(config, Heap, Instant::ZERO);
    Net::new(client, move |_| {
        let served: Box<dyn Served> = match wire {
            Wire::Http1 => {
                let engine: HttpServer<'static, SlabStore<16384, 2>> = HttpServer::new(
                    checked(registry(&HTTP_TOOLS)),
                    HttpConfig {
                        authorize: token.is_some(),
                        ..HttpConfig::default()
                    },
                    SlabStore::new(),
                    Instant::ZERO,
                );
                let server = Served_::new(engine);
                Box::new(match token {
                    Some(t) => server.with_token(t),
                    None => server,
                })
            }
            Wire::Http2 => {
                let engine: Server<'static, SlabStore<16384, 8>, 8, 4096, 16384> = Server::new(
                    checked(registry(&HTTP_TOOLS)),
                    ServerConfig {
                        authorize: token.is_some(),
                        ..ServerConfig::default()
                    },
                    SlabStore::new(),
                    Instant::ZERO,
                );
                let server = Served_::new(engine);
                Box::new(match token {
                    Some(t) => server.with_token(t),
                    None => server,
                })
            }
        };
        Some(served)
    })
}

fn connects(net: &Net<Http>) -> usize {
    net.link_events.iter().filter(|e| e.0 == "connect").count()
}

/// A call answered as one JSON body, a call with a progress token
/// answered as an event stream (its progress, then its response), and a
/// notification (202: the call ends with no message), on each wire.
#[test]
fn http_answers_come_as_json_as_an_event_stream_and_as_202() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, http_config(wire), None);
            let json = net
                .call(&tool_call(1, "echo", r#"{"text":"plain"}"#))
                .unwrap();
            let seen = net.seen(json);
            assert!(
                seen.response
                    .as_deref()
                    .unwrap_or_default()
                    .contains("plain"),
                "{wire:?} {seen:?} {:?}",
                net.link_events
            );
            assert!(seen.notifications.is_empty() && seen.ended);
            assert_eq!(seen.diagnostics.map(|d| d.event_stream), Some(false));
            let with_progress = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"streamed"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p2"}}}"#;
            let sse = net.call(with_progress).unwrap();
            let seen = net.seen(sse);
            assert_eq!(seen.notifications.len(), 1, "{wire:?} {seen:?}");
            assert!(
                seen.notifications[0].contains("notifications/progress"),
                "{wire:?} {seen:?}"
            );
            assert!(seen.notifications[0].contains(r#""progressToken":"p2""#));
            assert!(seen.response.unwrap().contains("streamed"));
            assert_eq!(seen.diagnostics.map(|d| d.event_stream), Some(true));
            let note = net
                .call(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#)
                .unwrap();
            let seen = net.seen(note);
            assert!(seen.ended, "{wire:?} {seen:?}");
            assert!(seen.response.is_none() && seen.failed.is_none());
            assert_eq!(connects(&net), 1, "one link carried the three exchanges");
        });
    }
}

/// More calls than the pool's links: they wait in the engine, the engine
/// opens no more links than the pool allows, and every call finishes.
#[test]
fn http1_calls_beyond_the_pool_wait_for_a_free_link() {
    each_split(|| {
        let mut net = http_net(Wire::Http1, http_config(Wire::Http1), None);
        let now = net.now;
        let calls: Vec<_> = (0..6)
            .map(|n| {
                let text = format!(r#"{{"text":"n{n}"}}"#);
                net.client
                    .start(
                        tool_call(n, "echo", &text).as_bytes(),
                        CallOptions::default(),
                        now,
                    )
                    .unwrap()
            })
            .collect();
        net.run();
        assert_eq!(connects(&net), 2, "{:?}", net.link_events);
        for (n, call) in calls.into_iter().enumerate() {
            let seen = net.seen(call);
            assert!(
                seen.response
                    .as_deref()
                    .is_some_and(|r| r.contains(&format!("n{n}"))),
                "{seen:?}"
            );
        }
        assert_eq!(net.open_links(), [0, 1], "kept alive for the next calls");
    });
}

/// A cancelled call closes its HTTP/1.1 link (the server's handler is
/// cancelled) or resets its HTTP/2 stream; the other calls go on.
#[test]
fn http_a_cancelled_call_stops_on_the_wire_and_the_others_go_on() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, http_config(wire), None);
            let held = net.call(&tool_call(1, "hold", "{}")).unwrap();
            let other = net.call(&tool_call(2, "hold", "{}")).unwrap();
            let now = net.now;
            assert!(net.client.cancel(held, now));
            net.run();
            assert_eq!(net.server(0).cancelled(), 1, "{wire:?}");
            if wire == Wire::Http1 {
                assert_eq!(net.server(1).cancelled(), 0, "the other call's link");
            }
            assert!(!net.client.cancel(held, now), "the handle is dead");
            match wire {
                Wire::Http1 => assert!(net.link_events.contains(&("disconnect", 0))),
                Wire::Http2 => assert!(!net.link_events.iter().any(|e| e.0 == "disconnect")),
            }
            let next = net.call(&tool_call(3, "echo", r#"{"text":"on"}"#)).unwrap();
            assert!(net.seen(next).response.unwrap().contains("on"), "{wire:?}");
            assert!(!net.seen(other).ended, "the other call runs on");
            let seen = net.seen(held);
            assert!(seen.response.is_none() && seen.failed.is_none() && !seen.ended);
        });
    }
}

/// The server closed a kept-alive link between exchanges: the next
/// request, written there before the client learned it, goes once more
/// on a new link and is answered.
#[test]
fn http1_a_request_on_a_link_the_server_closed_goes_again_on_a_new_one() {
    each_split(|| {
        let mut net = http_net(Wire::Http1, http_config(Wire::Http1), None);
        let first = net.call(&tool_call(1, "echo", r#"{"text":"a"}"#)).unwrap();
        assert!(net.seen(first).response.is_some());
        net.close_by_server(0);
        let second = net.call(&tool_call(2, "echo", r#"{"text":"b"}"#)).unwrap();
        let seen = net.seen(second);
        assert!(
            seen.response
                .as_deref()
                .unwrap_or_default()
                .contains("\"b\""),
            "{seen:?} {:?}",
            net.link_events
        );
        assert_eq!(
            net.link_events,
            [
                ("ready", 0),
                ("connect", 0),
                ("disconnect", 0),
                ("connect", 1)
            ]
        );
    });
}

/// A `tools/call` whose annotated argument the client did not mirror (no
/// `tools/list` seen yet) is refused with -32020: the engine reads
/// `tools/list` again, learns the schema and sends the call once more,
/// now with `Mcp-Param-Region`.
#[test]
fn http_a_header_mismatch_relists_the_tools_and_retries_once() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, http_config(wire), None);
            let call = net
                .call(&tool_call(1, "lookup", r#"{"region":"eu-north1"}"#))
                .unwrap();
            let seen = net.seen(call);
            assert!(
                seen.response
                    .as_deref()
                    .is_some_and(|r| r.contains("found")),
                "{wire:?} {seen:?}"
            );
            assert!(net.client.cached_schema(br#""lookup""#).is_some());
            // The same through the contract a driver holds.
            let engine: &dyn ClientEngine = &net.client;
            assert!(engine.cached_schema(br#""lookup""#).is_some());
            assert_eq!(net.server(0).requests(), ["tools/call lookup"]);
            let diagnostics = seen.diagnostics.expect("diagnostics with the response");
            assert!(diagnostics.relisted, "{wire:?} {diagnostics:?}");
            assert_eq!(diagnostics.http2, wire == Wire::Http2);
            assert_eq!(diagnostics.http_status, Some(200));
        });
    }
}

/// The application's `tools/list` is learned, and a tool whose
/// annotations are invalid is left out of the result with a warning.
#[test]
fn http_tools_list_is_learned_and_invalid_tools_are_left_out() {
    const BAD: ToolInfo<'static> = ToolInfo {
        name: "bad",
        title: None,
        description: "A number mirrored: invalid.",
        input_schema: r#"{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}"#,
    };
    const LISTED: [ToolInfo<'static>; 3] = [support::mcp::ECHO, LOOKUP, BAD];
    let mut net = Net::new(
        Http::new(http_config(Wire::Http1), Heap, Instant::ZERO),
        |_| {
            let engine: HttpServer<'static, SlabStore<16384, 2>> = HttpServer::new(
                registry(&LISTED),
                HttpConfig::default(),
                SlabStore::new(),
                Instant::ZERO,
            );
            Some(Box::new(Served_::new(engine)) as Box<dyn Served>)
        },
    );
    let list = net
        .call(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{META}}}}}"#
        ))
        .unwrap();
    let response = net.seen(list).response.unwrap();
    assert!(
        response.contains("lookup") && !response.contains("\"bad\""),
        "{response}"
    );
    assert_eq!(net.warnings.len(), 1);
    assert_eq!(net.warnings[0].0, "\"bad\"");
    assert!(net.client.cached_schema(br#""lookup""#).is_some());
}

/// A server that wants a token answers 401 with its challenge: the call
/// fails with the status and `WWW-Authenticate`; a token set at run time
/// goes with the next call.
#[test]
fn http_a_401_fails_with_its_challenge_and_a_new_token_goes_next() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, http_config(wire), Some("sesame"));
            let refused = net.call(&tool_call(1, "echo", r#"{"text":"x"}"#)).unwrap();
            let seen = net.seen(refused);
            let (code, message, diagnostics) = seen.failed.clone().expect("failed");
            assert_eq!(code, -32603, "UNAUTHENTICATED maps to an internal error");
            assert_eq!(diagnostics.http_status, Some(401), "{wire:?} {message}");
            assert_eq!(diagnostics.grpc_status, Some(Code::Unauthenticated));
            assert!(message.contains("401"), "{message}");
            let challenge = seen.www_authenticate.expect("a challenge");
            assert!(challenge.starts_with("Bearer"), "{challenge}");
            assert!(net.client.set_bearer(Some("sesame")));
            assert!(!net.client.set_bearer(Some("not a token")));
            let allowed = net.call(&tool_call(2, "echo", r#"{"text":"in"}"#)).unwrap();
            assert!(
                net.seen(allowed).response.unwrap().contains("in"),
                "{wire:?}"
            );
        });
    }
}

/// A call past its deadline fails with DEADLINE_EXCEEDED and stops on the
/// wire (the server's handler is cancelled); a `subscriptions/listen`
/// without a timeout has no deadline: it lives on past the request
/// timeout, with its acknowledgment.
#[test]
fn http_a_call_has_a_deadline_and_a_listen_has_none() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, http_config(wire), None);
            let options = CallOptions::with_timeout(Duration::from_secs(5));
            let held = net.call_with(&tool_call(1, "hold", "{}"), options).unwrap();
            let listen = net
                .call(&format!(
                    r#"{{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
                ))
                .unwrap();
            net.advance(Duration::from_secs(6));
            let seen = net.seen(held);
            let (code, _, diagnostics) = seen.failed.expect("failed");
            assert_eq!(code, -32001, "{wire:?}");
            assert_eq!(diagnostics.grpc_status, Some(Code::DeadlineExceeded));
            assert!(diagnostics.transport && seen.ended);
            assert_eq!(net.server(0).cancelled(), 1, "{wire:?}");
            for _ in 0..5 {
                net.advance(Duration::from_secs(30));
            }
            let seen = net.seen(listen);
            assert!(seen.failed.is_none() && !seen.ended, "{wire:?} {seen:?}");
            assert_eq!(seen.notifications.len(), 1, "{seen:?}");
            assert!(seen.notifications[0].contains("notifications/subscriptions/acknowledged"));
        });
    }
}

/// Closing the engine ends a listen stream (which a server keeps open
/// for ever) with UNAVAILABLE "the client closed", lets a call in
/// progress reach its answer, and then closes every link.
#[test]
fn http_close_ends_listen_streams_and_lets_calls_finish() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, http_config(wire), None);
            let held = net.call(&tool_call(1, "hold", "{}")).unwrap();
            let listen = net.call(&listen(2)).unwrap();
            net.run();
            let now = net.now;
            net.client.close(now);
            net.run();
            let seen = net.seen(listen);
            let (_, message, diagnostics) = seen.failed.clone().expect("failed");
            assert!(message.contains("the client closed"), "{wire:?} {message}");
            assert_eq!(diagnostics.grpc_status, Some(Code::Unavailable));
            assert!(seen.ended, "{wire:?} {seen:?}");
            assert!(
                !net.client.is_closed(),
                "{wire:?}: a call is still in progress"
            );
            net.server(0).answer_held();
            net.run();
            let seen = net.seen(held);
            assert!(
                seen.response
                    .as_deref()
                    .is_some_and(|r| r.contains("content")),
                "{wire:?} {seen:?}"
            );
            assert!(net.client.is_closed(), "{wire:?} {:?}", net.link_events);
            assert!(net.open_links().is_empty(), "{wire:?}");
        });
    }
}

// ---------------------------------------------------------------------
// The era (MCP 2026-07-28 §8.3): the probe, and the fallback to the
// older shapes against a scripted legacy server.
// ---------------------------------------------------------------------

fn probing(wire: Wire) -> HttpClientConfig {
    HttpClientConfig {
        era: EraChoice::Probe,
        ..http_config(wire)
    }
}

/// The first call waits while `server/discover` goes out; the core's
/// server answers it as a modern server: the engine is ready, the call
/// goes, and the era says what the probe learned.
#[test]
fn http_the_probe_finds_a_modern_server() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, probing(wire), None);
            assert!(net.link_events.is_empty(), "nothing before a call");
            let call = net.call(&tool_call(1, "echo", r#"{"text":"m"}"#)).unwrap();
            assert!(
                net.seen(call).response.unwrap().contains("\"m\""),
                "{wire:?}"
            );
            assert_eq!(net.link_events, [("connect", 0), ("ready", 0)], "{wire:?}");
            let era = net.client.era();
            assert_eq!(era.era, Some(Era::Modern));
            assert_eq!(era.version(), Some("2026-07-28"));
            assert_eq!(era.server_versions(), Some(r#"["2026-07-28"]"#));
            assert!(!era.fallback && era.reason.is_none());
            assert_eq!(net.server(0).requests(), ["tools/call echo"]);
        });
    }
}

/// A probe answered 401 is no evidence of an era: the waiting call fails
/// with the status and the challenge, nothing falls back; with a token,
/// the next call probes again and goes.
#[test]
fn http_a_probe_answered_401_fails_the_calls_and_never_falls_back() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, probing(wire), Some("sesame"));
            let call = net.call(&tool_call(1, "echo", r#"{"text":"x"}"#)).unwrap();
            let seen = net.seen(call);
            let (_, message, diagnostics) = seen.failed.clone().expect("failed");
            assert_eq!(diagnostics.http_status, Some(401), "{wire:?} {message}");
            assert!(seen.www_authenticate.unwrap().starts_with("Bearer"));
            let era = net.client.era();
            assert!(era.era.is_none() && !era.fallback, "{era:?}");
            assert!(net.client.set_bearer(Some("sesame")));
            let call = net.call(&tool_call(2, "echo", r#"{"text":"y"}"#)).unwrap();
            assert!(
                net.seen(call).response.unwrap().contains("\"y\""),
                "{wire:?}"
            );
            assert_eq!(net.client.era().era, Some(Era::Modern));
        });
    }
}

/// A server that says GOAWAY while a call's answer is still to come, then
/// answers it: the response arrives (the stream's last DATA closes the
/// draining connection in the same read), and the next call goes on a new
/// link.
#[test]
fn http2_an_answer_after_the_servers_goaway_arrives_and_the_next_call_relinks() {
    each_split(|| {
        let mut net = http_net(Wire::Http2, http_config(Wire::Http2), None);
        let held = net.call(&tool_call(1, "hold", "{}")).unwrap();
        net.server(0).go_away();
        net.server(0).answer_held();
        net.run();
        let seen = net.seen(held);
        assert!(
            seen.response
                .as_deref()
                .is_some_and(|r| r.contains("content")),
            "{seen:?}"
        );
        let next = net.call(&tool_call(2, "echo", r#"{"text":"n"}"#)).unwrap();
        assert!(net.seen(next).response.unwrap().contains("\"n\""));
        assert_eq!(connects(&net), 2);
    });
}

/// A call of `start_handshake` sends nothing of its own: it waits while
/// the probe finds the server modern and ends with no message; with the
/// modern era chosen it ends at once, before any link.
#[test]
fn http_a_handshake_call_waits_for_the_probe_and_sends_nothing() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, probing(wire), None);
            let now = net.now;
            let waiter = net.client.start_handshake(now).unwrap();
            net.run();
            let seen = net.seen(waiter);
            assert!(seen.ended, "{wire:?} {seen:?}");
            assert!(seen.response.is_none() && seen.failed.is_none(), "{seen:?}");
            assert_eq!(net.link_events, [("connect", 0), ("ready", 0)], "{wire:?}");
            assert_eq!(net.client.era().era, Some(Era::Modern));
            assert!(net.server(0).requests().is_empty(), "only the probe went");
            let call = net.call(&tool_call(1, "echo", r#"{"text":"m"}"#)).unwrap();
            assert!(net.seen(call).response.unwrap().contains("\"m\""));
        });
        let mut net = http_net(wire, http_config(wire), None);
        let now = net.now;
        let waiter = net.client.start_handshake(now).unwrap();
        net.run();
        assert!(net.seen(waiter).ended, "{wire:?}");
        assert_eq!(net.link_events, [("ready", 0)], "no link");
    }
}

/// A handshake call fails as the probe did: 401 with its challenge.
#[test]
fn http_a_handshake_call_fails_with_the_probes_401() {
    for wire in WIRES {
        let mut net = http_net(wire, probing(wire), Some("sesame"));
        let now = net.now;
        let waiter = net.client.start_handshake(now).unwrap();
        net.run();
        let seen = net.seen(waiter);
        let (_, message, diagnostics) = seen.failed.clone().expect("failed");
        assert_eq!(diagnostics.http_status, Some(401), "{wire:?} {message}");
        assert_eq!(diagnostics.grpc_status, Some(Code::Unauthenticated));
        assert!(seen.www_authenticate.unwrap().starts_with("Bearer"));
        assert!(seen.ended);
    }
}

/// A net of the engine and a scripted legacy server of `shape`.
fn legacy_net(shape: legacy::Shape, era: EraChoice) -> (Net<Http>, Rc<RefCell<legacy::Legacy>>) {
    let shared = legacy::Legacy::new(shape);
    let server = Rc::clone(&shared);
    let config = HttpClientConfig {
        era,
        ..http_config(Wire::Http1)
    };
    let net = Net::new(Http::new(config, Heap, Instant::ZERO), move |_| {
        Some(Box::new(legacy::LegacyLink::new(Rc::clone(&server))) as Box<dyn Served>)
    });
    (net, shared)
}

/// A 2025-11-25 server refuses the probe (400, -32000 without an id): the
/// engine falls back to `initialize`, keeps the session id, sends
/// `notifications/initialized`, then the call with the session's fields
/// and without the modern `_meta`; `close` ends the session with DELETE.
#[test]
fn http_the_probe_falls_back_to_the_2025_session() {
    each_split(|| {
        let (mut net, server) = legacy_net(legacy::Shape::Session, EraChoice::Probe);
        let call = net
            .call(&tool_call(1, "echo", r#"{"text":"old"}"#))
            .unwrap();
        let seen = net.seen(call);
        assert!(
            seen.response.as_deref().is_some_and(|r| r.contains("old")),
            "{seen:?}"
        );
        let era = net.client.era();
        assert_eq!(era.era, Some(Era::Legacy));
        assert_eq!(era.version(), Some("2025-11-25"));
        assert!(era.fallback && era.reason.is_some(), "{era:?}");
        assert_eq!(era.probe_error, Some(-32000));
        let now = net.now;
        net.client.close(now);
        net.run();
        assert_eq!(
            server.borrow().requests,
            [
                "POST /mcp server/discover session=- version=2026-07-28 modern-meta",
                "POST /mcp initialize session=- version=-",
                "POST /mcp notifications/initialized session=s-1 version=2025-11-25",
                "POST /mcp tools/call session=s-1 version=2025-11-25",
                "DELETE /mcp  session=s-1 version=2025-11-25",
            ]
        );
        assert!(net.client.is_closed());
        assert_eq!(net.link_events.last(), Some(&("closed", 0)));
        assert!(net.open_links().is_empty());
    });
}

/// In a legacy era a disconnect is no cancellation (2025-11-25): a call
/// given up, cancelled or past its deadline, is named in a `POST
/// notifications/cancelled`; over a 2025 session its own exchange closes
/// only after DRAIN_WAIT, once the server has the cancellation; on the
/// 2024 shape (answers on the event stream) the notification is all.
#[test]
fn http_a_legacy_call_given_up_is_cancelled_with_a_notification() {
    for shape in [legacy::Shape::Session, legacy::Shape::HttpSse] {
        each_split(|| {
            let (mut net, server) = legacy_net(shape, EraChoice::Legacy);
            let held = net.call(&tool_call(1, "hold", "{}")).unwrap();
            let cancels = |server: &Rc<RefCell<legacy::Legacy>>, id: &str| {
                let tag = "notifications/cancelled ";
                server
                    .borrow()
                    .requests
                    .iter()
                    .filter(|r| r.contains(tag) && r.ends_with(&format!("cancels={id}")))
                    .count()
            };
            assert_eq!(cancels(&server, "1"), 0);
            let disconnects = |net: &Net<Http>| {
                net.link_events
                    .iter()
                    .filter(|e| e.0 == "disconnect")
                    .count()
            };
            let before = disconnects(&net);
            let now = net.now;
            assert!(net.client.cancel(held, now));
            net.run();
            assert_eq!(
                cancels(&server, "1"),
                1,
                "{shape:?} {:?}",
                server.borrow().requests
            );
            assert_eq!(
                disconnects(&net),
                before,
                "{shape:?}: closed before DRAIN_WAIT"
            );
            net.advance(DRAIN_WAIT + Duration::from_millis(1));
            let closed = disconnects(&net) - before;
            assert_eq!(
                closed,
                usize::from(shape == legacy::Shape::Session),
                "{shape:?}"
            );

            let options = CallOptions::with_timeout(Duration::from_secs(5));
            let timed = net.call_with(&tool_call(2, "hold", "{}"), options).unwrap();
            net.advance(Duration::from_secs(6));
            let (code, _, _) = net.seen(timed).failed.expect("failed");
            assert_eq!(code, -32001, "{shape:?}");
            assert_eq!(
                cancels(&server, "2"),
                1,
                "{shape:?} {:?}",
                server.borrow().requests
            );
        });
    }
}

/// A URL that answers every request 404 is no server of any era: the
/// probe falls back to `initialize`, its refusal to the 2024 shape's
/// `GET`, and when that is refused too the call fails saying so, with
/// the status.
#[test]
fn http_a_url_of_neither_era_fails_the_call_saying_so() {
    each_split(|| {
        let (mut net, server) = legacy_net(legacy::Shape::Nothing, EraChoice::Probe);
        let call = net.call(&tool_call(1, "echo", r#"{"text":"x"}"#)).unwrap();
        let seen = net.seen(call);
        let (_, message, diagnostics) = seen.failed.expect("failed");
        assert!(
            message.contains("neither era") && message.contains("(HTTP 404)"),
            "{message}"
        );
        assert_eq!(diagnostics.grpc_status, Some(Code::Unavailable));
        let requests = server.borrow().requests.clone();
        let methods: Vec<&str> = requests
            .iter()
            .map(|r| r.split(' ').next().unwrap_or(""))
            .collect();
        assert_eq!(methods, ["POST", "POST", "GET"], "{requests:?}");
    });
}

/// A modern server that speaks none of this client's versions refuses
/// the probe with -32022: no fallback (§8.3), and the waiting call fails
/// with the server's error, its `data.supported` included (what an
/// application, or a bridge's host, needs to see).
#[test]
fn http_a_probe_refused_with_32022_fails_the_call_with_the_servers_versions() {
    each_split(|| {
        let (mut net, server) = legacy_net(legacy::Shape::OtherVersion, EraChoice::Probe);
        let call = net.call(&tool_call(1, "echo", r#"{"text":"x"}"#)).unwrap();
        let seen = net.seen(call);
        let (code, _, _) = seen.failed.clone().expect("failed");
        assert_eq!(code, -32022, "{seen:?}");
        let response: serde_json::Value =
            serde_json::from_str(seen.error_response.as_deref().unwrap_or("")).unwrap();
        assert_eq!(response["id"], 1, "{response}");
        assert_eq!(
            response["error"]["data"]["supported"],
            serde_json::json!(["2027-01-01"]),
            "{response}"
        );
        assert_eq!(server.borrow().requests.len(), 1, "no initialize");
    });
}

/// The server ends the 2025 session (it expired): the next call is
/// answered 404, fails saying so (UNAVAILABLE, no result invented), and
/// the call after it goes in a new session, `initialize` first (no
/// probe: the era is known).
#[test]
fn http_a_2025_session_the_server_ended_is_initialized_again() {
    each_split(|| {
        let (mut net, server) = legacy_net(legacy::Shape::Session, EraChoice::Probe);
        let first = net.call(&tool_call(1, "echo", r#"{"text":"a"}"#)).unwrap();
        assert!(net.seen(first).response.unwrap().contains("\"a\""));
        server.borrow_mut().end_session();
        let lost = net.call(&tool_call(2, "echo", r#"{"text":"b"}"#)).unwrap();
        let seen = net.seen(lost);
        let (_, message, diagnostics) = seen.failed.expect("failed");
        assert_eq!(diagnostics.http_status, Some(404), "{message}");
        assert_eq!(diagnostics.grpc_status, Some(Code::Unavailable));
        assert!(message.contains("ended the 2025 session"), "{message}");
        let again = net.call(&tool_call(3, "echo", r#"{"text":"c"}"#)).unwrap();
        assert!(
            net.seen(again)
                .response
                .as_deref()
                .is_some_and(|r| r.contains("\"c\"")),
            "{:?}",
            server.borrow().requests
        );
        assert_eq!(net.client.era().era, Some(Era::Legacy));
        assert_eq!(
            server.borrow().requests[4..],
            [
                "POST /mcp tools/call session=s-1 version=2025-11-25",
                "POST /mcp initialize session=- version=-",
                "POST /mcp notifications/initialized session=s-2 version=2025-11-25",
                "POST /mcp tools/call session=s-2 version=2025-11-25",
            ]
        );
    });
}

/// `EraChoice::Legacy` skips the probe.
#[test]
fn http_the_legacy_choice_initializes_without_a_probe() {
    let (mut net, server) = legacy_net(legacy::Shape::Session, EraChoice::Legacy);
    let call = net
        .call(&tool_call(1, "echo", r#"{"text":"old"}"#))
        .unwrap();
    assert!(net.seen(call).response.unwrap().contains("old"));
    let requests = server.borrow().requests.clone();
    assert_eq!(requests[0], "POST /mcp initialize session=- version=-");
    assert!(!net.client.era().fallback);
}

/// A 2024-11-05 server refuses the probe and `initialize` (405): the
/// engine opens the event stream with `GET`, `POST`s `initialize`,
/// `notifications/initialized` and the calls to the target its
/// `endpoint` event names, and takes each response off the stream by id
/// (two calls at once each get their own).
#[test]
fn http_the_probe_falls_back_to_the_2024_http_sse_shape() {
    each_split(|| {
        let (mut net, server) = legacy_net(legacy::Shape::HttpSse, EraChoice::Probe);
        let now = net.now;
        let a = net
            .client
            .start(
                tool_call(1, "echo", r#"{"text":"older"}"#).as_bytes(),
                CallOptions::default(),
                now,
            )
            .unwrap();
        let b = net
            .client
            .start(
                tool_call(2, "echo", r#"{"text":"oldest"}"#).as_bytes(),
                CallOptions::default(),
                now,
            )
            .unwrap();
        net.run();
        for (call, text) in [(a, "\"older\""), (b, "\"oldest\"")] {
            let seen = net.seen(call);
            assert!(
                seen.response.as_deref().is_some_and(|r| r.contains(text)),
                "{seen:?} {:?}",
                server.borrow().requests
            );
        }
        let era = net.client.era();
        assert_eq!(era.era, Some(Era::HttpSse), "{era:?}");
        assert_eq!(era.version(), Some("2024-11-05"));
        assert!(era.fallback);
        let requests = server.borrow().requests.clone();
        assert_eq!(
            requests[..5],
            [
                "POST /mcp server/discover session=- version=2026-07-28 modern-meta",
                "POST /mcp initialize session=- version=-",
                "GET /mcp  session=- version=-",
                "POST /messages?sessionId=abc initialize session=- version=-",
                "POST /messages?sessionId=abc notifications/initialized session=- version=-",
            ]
        );
        let mut calls = requests[5..].to_vec();
        calls.sort();
        assert_eq!(
            calls,
            [
                "POST /messages?sessionId=abc tools/call session=- version=-",
                "POST /messages?sessionId=abc tools/call session=- version=-",
            ]
        );
        let now = net.now;
        net.client.close(now);
        net.run();
        assert!(net.client.is_closed());
        assert!(net.open_links().is_empty(), "the stream's link closed too");
    });
}

/// Closing the engine lets a call in progress finish, then closes every
/// link; the engine says it is over and takes no call.
#[test]
fn http_close_ends_every_link_and_the_engine() {
    for wire in WIRES {
        each_split(|| {
            let mut net = http_net(wire, http_config(wire), None);
            let options = CallOptions::with_timeout(Duration::from_secs(5));
            let held = net.call_with(&tool_call(1, "hold", "{}"), options).unwrap();
            let now = net.now;
            net.client.close(now);
            net.run();
            assert!(!net.client.is_closed(), "{wire:?}: a call is in progress");
            assert!(matches!(
                net.client.start(
                    tool_call(2, "echo", "{}").as_bytes(),
                    CallOptions::default(),
                    now
                ),
                Err(StartError::Closed)
            ));
            net.advance(Duration::from_secs(6));
            assert!(net.seen(held).ended);
            assert!(net.client.is_closed(), "{wire:?} {:?}", net.link_events);
            assert!(net.open_links().is_empty());
            assert_eq!(net.link_events.last(), Some(&("closed", 0)));
        });
    }
}

/// With `Http2Mode::Alpn` the first link tells the version: ALPN `h2`
/// makes it the HTTP/2 link that carries every call; no ALPN (cleartext)
/// makes it the first link of the HTTP/1.1 pool.
#[test]
fn http_alpn_picks_the_version_of_the_first_link() {
    for (negotiated, wire) in [
        (Negotiated::Http2, Wire::Http2),
        (Negotiated::Nothing, Wire::Http1),
    ] {
        each_split(|| {
            let config = HttpClientConfig {
                http2: Http2Mode::Alpn,
                ..http_config(wire)
            };
            let mut net = http_net(wire, config, None);
            net.negotiated = negotiated;
            let now = net.now;
            let calls: Vec<_> = (0..3)
                .map(|n| {
                    let text = format!(r#"{{"text":"v{n}"}}"#);
                    net.client
                        .start(
                            tool_call(n, "echo", &text).as_bytes(),
                            CallOptions::default(),
                            now,
                        )
                        .unwrap()
                })
                .collect();
            net.run();
            for (n, call) in calls.into_iter().enumerate() {
                let seen = net.seen(call);
                assert!(
                    seen.response
                        .as_deref()
                        .is_some_and(|r| r.contains(&format!("v{n}"))),
                    "{negotiated:?} {seen:?}"
                );
            }
            // HTTP/2 carries the three calls on its one link; HTTP/1.1 has
            // a pool of two.
            let expected = if wire == Wire::Http2 { 1 } else { 2 };
            assert_eq!(
                connects(&net),
                expected,
                "{negotiated:?} {:?}",
                net.link_events
            );
        });
    }
}

// ---------------------------------------------------------------------
// Multi round-trip requests (MCP 2026-07-28 §9), on every binding: the
// test server's `ask` asks twice (a name, then whether to greet it) and
// then answers; `nag` never stops asking.
// ---------------------------------------------------------------------

/// The bindings the multi round-trip tests run on.
#[derive(Debug, Clone, Copy)]
enum Binding {
    Tunnel,
    Http(Wire),
    Stdio,
}

const BINDINGS: [Binding; 4] = [
    Binding::Tunnel,
    Binding::Http(Wire::Http1),
    Binding::Http(Wire::Http2),
    Binding::Stdio,
];

/// A call of `tool` that declares the elicitation capability.
fn asking_call(id: u32, tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{}}}}}}}}}}"#
    )
}

/// Runs `test` on a net of `binding` whose engine answers at most
/// `max_rounds` rounds of input (each engine in a frame of its own: they
/// are large, and a debug build does not share their stack room).
fn on_binding(binding: Binding, max_rounds: u8, test: impl RoundsTest) {
    #[inline(never)]
    fn tunnel(max_rounds: u8, test: impl RoundsTest) {
        let config = ClientConfig {
            max_input_rounds: max_rounds,
            ..ClientConfig::default()
        };
        test.run(tunnel_net_with(config, &[]));
    }
    #[inline(never)]
    fn http(wire: Wire, max_rounds: u8, test: impl RoundsTest) {
        let config = HttpClientConfig {
            max_input_rounds: max_rounds,
            ..http_config(wire)
        };
        test.run(http_net(wire, config, None));
    }
    #[inline(never)]
    fn stdio(max_rounds: u8, test: impl RoundsTest) {
        let mut config = StdioEngineConfig::default();
        config.client.max_input_rounds = max_rounds;
        test.run(stdio_net_with(config, &[]));
    }
    match binding {
        Binding::Tunnel => tunnel(max_rounds, test),
        Binding::Http(wire) => http(wire, max_rounds, test),
        Binding::Stdio => stdio(max_rounds, test),
    }
}

/// A test body for a net of any engine.
trait RoundsTest {
    fn run<E: ClientEngine>(&self, net: Net<E>);
}

/// Starts a call (again after the stdio engine's `Busy` while it probes).
fn start<E: ClientEngine>(net: &mut Net<E>, message: &str, options: CallOptions) -> CallId {
    match net.call_with(message, options) {
        Err(StartError::Busy) => net.call_with(message, options).unwrap(),
        other => other.unwrap(),
    }
}

/// Answers `call`'s input with `responses` and runs the net.
fn answer<E: ClientEngine>(net: &mut Net<E>, call: CallId, responses: &str) {
    let now = net.now;
    net.client
        .answer_input(call, responses.as_bytes(), now)
        .unwrap();
    net.run();
}

/// `ask` asks twice: each `InputRequired` hands out what it asks (and the
/// whole `input_required` result); the answers go back in a new request
/// with a new id, `inputResponses` and the `requestState` echoed, the
/// client capabilities declared again; then the result comes on the same
/// call. An answer that is not an object is refused and the call waits
/// on. Without `answers_input` the `input_required` result is the call's
/// response.
#[test]
fn a_tool_that_asks_twice_gets_its_answers_then_completes() {
    struct Test;
    impl RoundsTest for Test {
        fn run<E: ClientEngine>(&self, mut net: Net<E>) {
            let call = start(
                &mut net,
                &asking_call(5, "ask"),
                CallOptions::answering_input(),
            );
            let seen = net.seen(call);
            assert_eq!(seen.inputs.len(), 1, "{seen:?}");
            let (requests, result) = &seen.inputs[0];
            assert!(
                requests.starts_with(r#"{"name":{"method":"elicitation/create""#),
                "{requests}"
            );
            assert!(requests.contains("Your name?"));
            assert!(
                result.contains(r#""resultType":"input_required""#),
                "{result}"
            );
            assert!(result.contains(r#""requestState":"s1""#), "{result}");
            assert!(seen.response.is_none() && seen.failed.is_none() && !seen.ended);
            let now = net.now;
            assert!(matches!(
                net.client.answer_input(call, b"[1]", now),
                Err(StartError::Invalid(_))
            ));
            answer(
                &mut net,
                call,
                r#"{"name":{"action":"accept","content":{"name":"Ada"}}}"#,
            );
            let seen = net.seen(call);
            assert_eq!(seen.inputs.len(), 2, "{seen:?}");
            assert!(seen.inputs[1].0.contains("Greet Ada?"), "{seen:?}");
            answer(&mut net, call, r#"{"confirm":{"action":"accept"}}"#);
            let seen = net.seen(call);
            let response = seen.response.clone().unwrap_or_default();
            assert!(response.contains("hello Ada"), "{seen:?}");
            // The last round's request had its own id.
            assert!(response.contains(r##""id":"5#2""##), "{response}");
            assert!(seen.failed.is_none() && seen.ended && seen.inputs.len() == 2);
            let caps = r#"caps={"elicitation":{}}"#;
            assert_eq!(
                net.server(0).rounds(),
                [
                    format!("ask id=5 state=- responses=- {caps}"),
                    format!(
                        r##"ask id="5#1" state="s1" responses={{"name":{{"action":"accept","content":{{"name":"Ada"}}}}}} {caps}"##
                    ),
                    format!(
                        r##"ask id="5#2" state="s2:Ada" responses={{"confirm":{{"action":"accept"}}}} {caps}"##
                    ),
                ]
            );
            // A call that does not answer input gets the result itself.
            let plain = start(&mut net, &asking_call(6, "ask"), CallOptions::default());
            let seen = net.seen(plain);
            assert!(seen.inputs.is_empty(), "{seen:?}");
            assert!(
                seen.response
                    .is_some_and(|r| r.contains(r#""resultType":"input_required""#))
            );
            assert!(seen.ended);
        }
    }
    for binding in BINDINGS {
        eprintln!("{binding:?}");
        each_split(|| on_binding(binding, 16, Test));
    }
}

/// A server that asks once more than the engine answers fails the call,
/// saying so; a round whose result had no `requestState` sends none.
#[test]
fn a_server_that_asks_past_the_round_limit_fails_the_call() {
    struct Test;
    impl RoundsTest for Test {
        fn run<E: ClientEngine>(&self, mut net: Net<E>) {
            let call = start(
                &mut net,
                &asking_call(7, "nag"),
                CallOptions::answering_input(),
            );
            assert_eq!(net.seen(call).inputs.len(), 1);
            answer(&mut net, call, r#"{"again":{"roots":[]}}"#);
            assert_eq!(net.seen(call).inputs.len(), 2);
            answer(&mut net, call, r#"{"again":{"roots":[]}}"#);
            let seen = net.seen(call);
            let (code, message, diagnostics) = seen.failed.clone().expect("failed");
            assert_eq!(code, -32603);
            assert_eq!(
                message,
                r#""the server still asks for input after 2 rounds""#
            );
            assert!(!diagnostics.transport, "{seen:?}");
            assert!(seen.ended && seen.inputs.len() == 2 && seen.response.is_none());
            let rounds = net.server(0).rounds();
            let states: Vec<_> = rounds
                .iter()
                .map(|r| r.split(' ').nth(2).unwrap_or_default())
                .collect();
            assert_eq!(
                states,
                ["state=-", r#"state="nag""#, "state=-"],
                "{rounds:?}"
            );
        }
    }
    for binding in BINDINGS {
        eprintln!("{binding:?}");
        each_split(|| on_binding(binding, 2, Test));
    }
}

/// A call cancelled while it waits for input is over: no event follows,
/// nothing reaches the server (the call has no request there), an answer
/// is refused; a call's deadline runs on while it waits: past it the call
/// fails with DEADLINE_EXCEEDED.
#[test]
fn a_call_waiting_for_input_can_be_cancelled_and_times_out() {
    struct Test;
    impl RoundsTest for Test {
        fn run<E: ClientEngine>(&self, mut net: Net<E>) {
            let call = start(
                &mut net,
                &asking_call(8, "ask"),
                CallOptions::answering_input(),
            );
            assert_eq!(net.seen(call).inputs.len(), 1);
            let now = net.now;
            assert!(net.client.cancel(call, now));
            net.run();
            assert!(matches!(
                net.client.answer_input(call, b"{}", now),
                Err(StartError::Invalid(_))
            ));
            let seen = net.seen(call);
            assert!(seen.response.is_none() && seen.failed.is_none() && !seen.ended);
            assert_eq!(net.server(0).cancelled(), 0);
            assert_eq!(net.server(0).rounds().len(), 1);
            let mut options = CallOptions::with_timeout(Duration::from_secs(5));
            options.answers_input = true;
            let timed = start(&mut net, &asking_call(9, "ask"), options);
            net.advance(Duration::from_secs(3));
            answer(
                &mut net,
                timed,
                r#"{"name":{"action":"accept","content":{"name":"Bo"}}}"#,
            );
            assert_eq!(net.seen(timed).inputs.len(), 2);
            // Five seconds in all, not five a round.
            net.advance(Duration::from_secs(3));
            let seen = net.seen(timed);
            let (code, _, diagnostics) = seen.failed.clone().expect("failed");
            assert_eq!(code, -32001, "{seen:?}");
            assert_eq!(diagnostics.grpc_status, Some(Code::DeadlineExceeded));
            assert!(seen.ended && seen.response.is_none());
            assert_eq!(net.server(0).rounds().len(), 3);
        }
    }
    for binding in BINDINGS {
        eprintln!("{binding:?}");
        each_split(|| on_binding(binding, 16, Test));
    }
}
