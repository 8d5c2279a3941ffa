//! The client engines through their one contract ([`ClientEngine`]): each
//! binding's engine against the core's server engine of that binding, over
//! links the engine asks for, on the pipes of `mcpwire-sim` cut every way
//! ([`each_split`]). What a driver sees: links opened and closed when the
//! engine says, calls answered, failures that say why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use core::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::SlabStore;
use mcpwire_core::mcp::client::stdio::{StdioEngine, StdioEngineConfig};
use mcpwire_core::mcp::client::{
    CallOptions, ClientConfig, ClientEngine, StartError, TunnelClient,
};
use mcpwire_core::mcp::registry::ToolInfo;
use mcpwire_core::mcp::server::{Server, ServerConfig, StdioConfig, StdioServer};
use mcpwire_core::time::Instant;

mod support;

use support::mcp::{META, checked, each_split, registry};
use support::net::{Net, Served, Server as Served_};

const TOOLS: [ToolInfo<'static>; 2] = [
    support::mcp::ECHO,
    ToolInfo {
        name: "hold",
        title: None,
        description: "Never answers.",
        input_schema: r#"{"type":"object"}"#,
    },
];

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
    Net::new(Tunnel::new(ClientConfig::default(), Heap), move |link| {
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
    let engine = Stdio::new(
        StdioEngineConfig::default(),
        vec![0; 1 << 16],
        Heap,
        Instant::ZERO,
    );
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
        let era = net.client.client().era();
        assert_eq!(era.version(), Some("2026-07-28"));
    });
}

/// A server that exits with a call in flight fails it (the server is
/// gone: UNAVAILABLE); the link goes, and the next call starts a new
/// server, which speaks the era already chosen (no second probe).
#[test]
fn a_server_that_exits_fails_its_calls_and_the_next_call_starts_another() {
    each_split(|| {
        let mut net = stdio_net(&[]);
        let _ = net.call(&tool_call(1, "echo", "{}"));
        let held = net.call(&tool_call(2, "hold", "{}")).unwrap();
        net.server(0).go_away();
        net.run();
        let seen = net.seen(held);
        let (code, message, diagnostics) = seen.failed.expect("failed");
        assert_eq!(code, -32000, "{message}");
        assert!(diagnostics.transport);
        assert_eq!(diagnostics.grpc_status, Some(Code::Unavailable));
        assert!(seen.ended);
        assert_eq!(
            net.link_events,
            [("connect", 0), ("ready", 0), ("disconnect", 0)]
        );
        assert!(matches!(
            net.call(&tool_call(3, "echo", r#"{"text":"again"}"#)),
            Err(StartError::Busy)
        ));
        let again = net
            .call(&tool_call(3, "echo", r#"{"text":"again"}"#))
            .unwrap();
        assert!(net.seen(again).response.unwrap().contains("again"));
        assert_eq!(
            net.link_events,
            [
                ("connect", 0),
                ("ready", 0),
                ("disconnect", 0),
                ("connect", 1),
                ("ready", 0)
            ]
        );
    });
}

/// A server the driver could not start refuses the calls with its reason
/// for a while (`relink_after`); then the next call tries again.
#[test]
fn a_server_that_cannot_be_started_refuses_calls_with_the_reason_then_retries() {
    each_split(|| {
        let mut net = stdio_net(&[0]);
        assert!(matches!(
            net.call(&tool_call(1, "echo", "{}")),
            Err(StartError::Busy)
        ));
        assert!(matches!(
            net.call(&tool_call(1, "echo", "{}")),
            Err(StartError::Down)
        ));
        assert_eq!(net.client.down_reason(), Some(&b"refused"[..]));
        net.advance(Duration::from_secs(2));
        assert!(matches!(
            net.call(&tool_call(1, "echo", "{}")),
            Err(StartError::Busy)
        ));
        let a = net.call(&tool_call(1, "echo", r#"{"text":"up"}"#)).unwrap();
        assert!(net.seen(a).response.unwrap().contains("up"));
        assert_eq!(
            net.link_events,
            [("connect", 0), ("connect", 1), ("ready", 0)]
        );
    });
}
