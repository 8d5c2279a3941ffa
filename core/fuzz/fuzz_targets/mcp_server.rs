//! `mcp_server`: a client sends tunnel calls whose metadata and request
//! message come from the fuzzer (any header values, any message bytes, a
//! declared length that may lie, the compressed flag, resets) to the MCP
//! server engine, cut at arbitrary points, with authorization and a listen
//! source on or off. Nothing may panic, the engine must keep consuming
//! input, and the answers go back to the client.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::h2::{Config, Connection, ErrorCode, Role};
use mcpwire_core::hpack::Field;
use mcpwire_core::mcp::SlabStore;
use mcpwire_core::mcp::auth::Decision;
use mcpwire_core::mcp::registry::{Registry, ServerInfo, ToolInfo};
use mcpwire_core::mcp::server::{
    self as engine, Failure, ListChange, RequestKind, ServerConfig, ServerEvent, TUNNEL_PATH,
};
use mcpwire_core::time::Instant;

type Server = engine::Server<'static, SlabStore<4096, 4>, 4, 4096, 4096>;
type Client = Connection<8, 4096, 16384, 16>;

const TOOLS: [ToolInfo<'static>; 2] = [
    ToolInfo {
        name: "echo",
        title: None,
        description: "Returns its text.",
        input_schema: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
    },
    ToolInfo {
        name: "lookup",
        title: None,
        description: "Annotated.",
        input_schema: r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"o":{"type":"object","properties":{"d":{"type":"string","x-mcp-header":"Deep"}}}}}"#,
    },
];

#[derive(Arbitrary, Debug)]
struct Call {
    /// Extra request headers (mcp-method, mcp-name, grpc-timeout, ...).
    headers: Vec<(Header, Vec<u8>)>,
    body: Vec<u8>,
    compressed: bool,
    /// A declared message length other than the body's.
    declared: Option<u32>,
    /// Reset the stream after sending.
    reset: bool,
    /// Leave the request open (no END_STREAM).
    open: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Header {
    McpMethod,
    McpName,
    McpVersion,
    Region,
    N,
    Deep,
    GrpcTimeout,
    GrpcEncoding,
    ContentType,
    Authorization,
}

impl Header {
    fn name(self) -> &'static [u8] {
        match self {
            Self::McpMethod => b"mcp-method",
            Self::McpName => b"mcp-name",
            Self::McpVersion => b"mcp-protocol-version",
            Self::Region => b"mcp-param-region",
            Self::N => b"mcp-param-n",
            Self::Deep => b"mcp-param-deep",
            Self::GrpcTimeout => b"grpc-timeout",
            Self::GrpcEncoding => b"grpc-encoding",
            Self::ContentType => b"content-type",
            Self::Authorization => b"authorization",
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    cut: u8,
    /// Every call waits for an authorization (bearer token `good`).
    authorize: bool,
    /// The registry has a listen source (and publishes a change).
    listen: bool,
    calls: Vec<Call>,
}

fuzz_target!(|input: Input| {
    let cut = usize::from(input.cut % 64) + 1;
    let info = ServerInfo {
        name: "fuzz",
        version: "1",
        instructions: None,
    };
    let registry = Registry {
        listen: input.listen,
        ..Registry::new(info, &TOOLS)
    };
    let config = ServerConfig {
        authorize: input.authorize,
        ..ServerConfig::default()
    };
    let mut server = Box::new(Server::new(
        registry,
        config,
        SlabStore::new(),
        Instant::ZERO,
    ));
    let mut client = Box::new(Client::new(Role::Client, Config::default(), Instant::ZERO));
    let mut now = 0u64;
    let mut queues = Queues::default();
    for call in input.calls.iter().take(16) {
        let Ok(stream) = client.open_stream() else {
            break;
        };
        let mut fields = vec![
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", TUNNEL_PATH),
            Field::new(b":authority", b"fuzz"),
        ];
        if !call
            .headers
            .iter()
            .any(|(h, _)| matches!(h, Header::ContentType))
        {
            fields.push(Field::new(b"content-type", b"application/grpc"));
        }
        for (h, v) in call.headers.iter().take(12) {
            fields.push(Field::new(h.name(), v));
        }
        if client
            .send_headers(stream, fields.iter().copied(), false)
            .is_err()
        {
            let _ = client.reset(stream, ErrorCode::CANCEL);
            continue;
        }
        let mut message = Vec::with_capacity(5 + call.body.len());
        message.push(u8::from(call.compressed));
        let len = call.declared.unwrap_or(call.body.len() as u32);
        message.extend_from_slice(&len.to_be_bytes());
        message.extend_from_slice(&call.body);
        let _ = client.send_data(stream, &message, !call.open);
        if call.reset {
            let _ = client.reset(stream, ErrorCode::CANCEL);
        }
        now += 1000;
        pump(
            &mut client,
            &mut server,
            &mut queues,
            cut,
            Instant::from_micros(now),
        );
    }
    // Let deadlines pass too.
    now += 120_000_000;
    server.handle_timeout(Instant::from_micros(now));
    pump(
        &mut client,
        &mut server,
        &mut queues,
        cut,
        Instant::from_micros(now),
    );
});

/// Bytes on their way: client to server, server to client.
#[derive(Default)]
struct Queues {
    up: Vec<u8>,
    down: Vec<u8>,
}

/// Moves bytes both ways until nothing moves; the server's input is cut
/// into pieces of at most `cut` octets.
fn pump(client: &mut Client, server: &mut Server, q: &mut Queues, cut: usize, t: Instant) {
    let mut buf = [0u8; 8192];
    for _ in 0..10_000 {
        let mut moved = false;
        moved |= drain_into(&mut q.up, &mut buf, |b| client.poll_transmit(b));
        if !q.up.is_empty() {
            let used = server.recv(&q.up[..q.up.len().min(cut)], t);
            q.up.drain(..used);
            moved |= used > 0;
        }
        serve(server);
        moved |= drain_into(&mut q.down, &mut buf, |b| server.poll_transmit(b));
        if !q.down.is_empty() {
            let r = client.recv(&q.down, t);
            if let Some(d) = r.data {
                client.release_data(d.stream, d.bytes.len());
            }
            let used = r.consumed;
            q.down.drain(..used);
            moved |= used > 0;
            while client.poll_event().is_some() {}
        }
        if !moved {
            // Nothing moves: the server must have read everything, unless
            // it has ended the connection.
            assert!(
                q.up.is_empty() || server.is_closed(),
                "the engine stopped reading ({} octets left)",
                q.up.len()
            );
            return;
        }
    }
    panic!("no quiet state after 10000 turns");
}

/// Appends everything `poll` writes (a `poll_transmit`) to `queue`; whether
/// anything came.
fn drain_into(
    queue: &mut Vec<u8>,
    buf: &mut [u8],
    mut poll: impl FnMut(&mut [u8]) -> usize,
) -> bool {
    let mut any = false;
    loop {
        let n = poll(buf);
        if n == 0 {
            return any;
        }
        queue.extend_from_slice(&buf[..n]);
        any = true;
    }
}

/// Authorizes the calls whose bearer token is `good`; answers every
/// request the engine hands out, `echo` with progress first and its
/// arguments back, `lookup` with a driver failure; announces a tools change
/// to the listen streams.
fn serve(server: &mut Server) {
    let mut calls = [None; 8];
    let mut k = 0;
    while let Some(e) = server.poll_event() {
        match e {
            ServerEvent::Authorize { call } => {
                let decision = match server.bearer_token(call) {
                    Some("good") => Decision::Allow { principal: "fuzz" },
                    Some(_) => Decision::PermissionDenied,
                    None => Decision::Unauthenticated,
                };
                server.authorize(call, decision);
            }
            ServerEvent::Request { call } if k < calls.len() => {
                calls[k] = Some(call);
                k += 1;
            }
            _ => {}
        }
    }
    for call in calls.into_iter().flatten() {
        let Some(request) = server.request(call) else {
            continue;
        };
        let echo = match request.kind {
            RequestKind::CallTool {
                tool: 0, arguments, ..
            } => Some(arguments.raw().to_vec()),
            _ => None,
        };
        let token = request.progress_token().map(<[u8]>::to_vec);
        let Some(arguments) = echo else {
            let _ = server.fail(call, Failure::HandlerFailed);
            continue;
        };
        if let Some(token) = token {
            let mut params = br#"{"progress":1,"progressToken":"#.to_vec();
            params.extend_from_slice(&token);
            params.push(b'}');
            let _ = server.notify(call, "notifications/progress", &params);
        }
        let mut result = br#"{"content":[],"structuredContent":"#.to_vec();
        result.extend_from_slice(&arguments);
        result.push(b'}');
        let _ = server.respond(call, &result);
    }
    server.publish(ListChange::ToolsListChanged);
}
