//! The MCP tunnel engines on both ends: the core's client engine
//! ([`Client`], the gRPC tunnel client over one HTTP/2 connection) makes
//! calls of the tunnel binding to the server engine ([`Server`]) over the
//! pipes. The application of each side is the code below, in the loop: the
//! server's tool handlers, and the client's record of what its events said.
//!
//! The client engine builds each call (metadata mirrored from the body,
//! head, gRPC framing, `grpc-timeout`) and reads each answer (messages,
//! trailers, the JSON-RPC error they carry), so the scenarios check what a
//! client application sees: its events in order and their texts.

use core::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::SlabStore;
use mcpwire_core::mcp::client::{CallId as ClientCallId, ClientConfig, ClientEvent, DeviceClient};
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::registry::{Registry, ServerInfo, ToolInfo};
use mcpwire_core::mcp::server::{
    self as engine, CallId, CancelReason, RequestKind, SendError, ServerConfig, ServerEvent,
};
use mcpwire_core::mcp::writer::JsonWriter;
use mcpwire_core::time::Instant;

use crate::sim::{Failed, Outcome, Pair, Peer, Rng, Text, context};
use crate::stack::measured;
use crate::{ensure, fail, failed, text};

/// Octets of each call buffer: on the server the request head, the request
/// message and the outgoing message of one call; on the client the framed
/// request, or the messages that come back.
pub const SLAB_SIZE: usize = 2048;
/// Calls at a time.
pub const SLAB_COUNT: usize = 4;
pub type Store = SlabStore<SLAB_SIZE, SLAB_COUNT>;

/// The engine: an HTTP/2 server connection of 4 streams, a 4 KiB HPACK
/// table and 2 KiB frame buffers, with 4 call buffers of 2 KiB inline.
pub type Server = engine::Server<'static, Store, 4, 4096, 2048>;

fn new_engine() -> Server {
    Server::new(
        REGISTRY,
        ServerConfig::default(),
        Store::new(),
        Instant::ZERO,
    )
}

const CALLS: usize = 4;
const PIPE: usize = 2048;
const SEEDS: [u32; 3] = [1, 2, 3];

const TOOLS: [ToolInfo<'static>; 3] = [
    ToolInfo {
        name: "echo",
        title: None,
        description: "Returns its text.",
        input_schema: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
    },
    ToolInfo {
        name: "count",
        title: Some("Count to three"),
        description: "Reports progress three times, then answers.",
        input_schema: r#"{"type":"object"}"#,
    },
    ToolInfo {
        name: "wait",
        title: None,
        description: "Never answers: it waits to be cancelled.",
        input_schema: r#"{"type":"object"}"#,
    },
];

const REGISTRY: Registry<'static> = Registry::new(
    ServerInfo {
        name: "qemu-sim",
        version: "0.0.0",
        instructions: None,
    },
    &TOOLS,
);

/// `params._meta` of every request.
macro_rules! meta {
    ($($extra:literal)?) => {
        concat!(
            r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}"#,
            $($extra,)?
            "}"
        )
    };
}

const LIST: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"#,
    meta!(),
    "}}"
);
const COUNT: &str = concat!(
    r#"{"jsonrpc":"2.0","id":"c-2","method":"tools/call","params":{"name":"count","arguments":{},"#,
    meta!(r#","progressToken":"job-7""#),
    "}}"
);
const WAIT: &str = concat!(
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait","arguments":{},"#,
    meta!(),
    "}}"
);
const ECHO: &str = concat!(
    r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still \"here\""},"#,
    meta!(),
    "}}"
);

// ---------------------------------------------------------------------------
// Server: the engine and the application's handlers
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Echo,
    Count,
    Wait,
}

#[derive(Debug)]
struct Handler {
    call: CallId,
    tool: Tool,
    /// Progress notifications sent.
    step: u8,
    /// Raw JSON of `_meta.progressToken`.
    token: [u8; 32],
    token_len: usize,
    /// The echo tool's text, unescaped.
    text: [u8; 64],
    text_len: usize,
}

#[derive(Debug)]
pub struct ServerSide {
    engine: Server,
    handlers: [Option<Handler>; CALLS],
    /// Requests that reached the application.
    requests: u32,
    /// Calls answered by the handlers.
    answered: u32,
    /// `notify` or `respond` found the previous message still going out.
    busy: u32,
    cancelled: Option<(CallId, CancelReason)>,
    /// The handler whose call was cancelled (its tool).
    cancelled_tool: Option<Tool>,
}

impl ServerSide {
    fn new() -> Self {
        Self {
            engine: new_engine(),
            handlers: [const { None }; CALLS],
            requests: 0,
            answered: 0,
            busy: 0,
            cancelled: None,
            cancelled_tool: None,
        }
    }

    fn events(&mut self) -> Result<(), Failed> {
        while let Some(e) = measured("engine poll_event", || self.engine.poll_event()) {
            match e {
                ServerEvent::Request { call } => {
                    self.requests += 1;
                    let Some(request) = self.engine.request(call) else {
                        fail!("engine: a request event without its request");
                    };
                    let RequestKind::CallTool {
                        tool, arguments, ..
                    } = request.kind
                    else {
                        fail!("engine: handed a request it should answer itself");
                    };
                    // The index in TOOLS, which the engine checked.
                    let tool = match tool {
                        0 => Tool::Echo,
                        1 => Tool::Count,
                        2 => Tool::Wait,
                        _ => fail!("engine: handed an unknown tool"),
                    };
                    let mut h = Handler {
                        call,
                        tool,
                        step: 0,
                        token: [0; 32],
                        token_len: 0,
                        text: [0; 64],
                        text_len: 0,
                    };
                    if let Some(t) = request.progress_token() {
                        let Some(dst) = h.token.get_mut(..t.len()) else {
                            fail!("engine: progress token too long");
                        };
                        dst.copy_from_slice(t);
                        h.token_len = t.len();
                    }
                    if let Some(text) = arguments.get(b"text") {
                        let Some(t) = json::unescape(text, &mut h.text) else {
                            fail!("engine: echo text too long");
                        };
                        h.text_len = t.len();
                    }
                    let Some(free) = self.handlers.iter_mut().find(|h| h.is_none()) else {
                        fail!("engine: more requests than calls");
                    };
                    *free = Some(h);
                }
                ServerEvent::Cancelled { call, reason } => {
                    ensure!(self.cancelled.is_none(), "engine: a second cancellation");
                    self.cancelled = Some((call, reason));
                    if let Some(slot) = self
                        .handlers
                        .iter_mut()
                        .find(|h| h.as_ref().is_some_and(|h| h.call == call))
                    {
                        self.cancelled_tool = slot.as_ref().map(|h| h.tool);
                        *slot = None;
                    }
                }
                // `act` retries whatever was busy.
                ServerEvent::Writable { .. } => {}
                ServerEvent::Authorize { .. } => fail!("engine: authorization is off"),
                ServerEvent::ConnectionClosed { error } => {
                    fail!("engine: connection closed ({error:?})")
                }
            }
        }
        Ok(())
    }
}

/// Runs a handler as far as it can go; true when it is done.
fn step(engine: &mut Server, h: &mut Handler, busy: &mut u32) -> Result<bool, Failed> {
    let sent = |r: Result<(), SendError>, busy: &mut u32| match r {
        Ok(()) => Ok(true),
        Err(SendError::Busy) => {
            *busy += 1;
            Ok(false)
        }
        Err(e) => Err(failed!("engine: handler send: {e:?}")),
    };
    let mut buf = [0u8; 160];
    match h.tool {
        Tool::Wait => Ok(false),
        Tool::Echo => {
            let mut w = JsonWriter::new(&mut buf);
            w.raw(br#"{"content":[{"type":"text","text":"#)
                .string(&h.text[..h.text_len])
                .raw(b"}]}");
            let result = w.finish().map_err(|_| failed!("echo result too long"))?;
            sent(
                measured("engine respond", || engine.respond(h.call, result)),
                busy,
            )
        }
        Tool::Count => {
            while h.step < 3 {
                let mut w = JsonWriter::new(&mut buf);
                w.raw(br#"{"progressToken":"#)
                    .raw(&h.token[..h.token_len])
                    .raw(br#","progress":"#)
                    .int(i64::from(h.step) + 1)
                    .raw(br#","total":3}"#);
                let params = w.finish().map_err(|_| failed!("progress too long"))?;
                if !sent(
                    measured("engine notify", || {
                        engine.notify(h.call, "notifications/progress", params)
                    }),
                    busy,
                )? {
                    return Ok(false);
                }
                h.step += 1;
            }
            sent(
                measured("engine respond", || {
                    engine.respond(
                        h.call,
                        br#"{"content":[{"type":"text","text":"counted to 3"}]}"#,
                    )
                }),
                busy,
            )
        }
    }
}

impl Peer for ServerSide {
    fn act(&mut self, _rng: &mut Rng, _now: Instant) -> Result<bool, Failed> {
        let mut moved = false;
        for slot in &mut self.handlers {
            let Some(h) = slot.as_mut() else { continue };
            let before = h.step;
            if step(&mut self.engine, h, &mut self.busy)? {
                *slot = None;
                self.answered += 1;
                moved = true;
            } else if h.step != before {
                moved = true;
            }
        }
        self.events()?;
        Ok(moved)
    }

    fn recv(&mut self, input: &[u8], now: Instant) -> Result<usize, Failed> {
        let n = measured("engine recv", || self.engine.recv(input, now));
        self.events()?;
        Ok(n)
    }

    fn poll_transmit(&mut self, out: &mut [u8]) -> Result<usize, Failed> {
        let n = measured("engine poll_transmit", || self.engine.poll_transmit(out));
        self.events()?;
        Ok(n)
    }

    fn timeout(&mut self, now: Instant) -> Result<(), Failed> {
        if self.engine.poll_timeout().is_some_and(|t| t <= now) {
            measured("engine handle_timeout", || self.engine.handle_timeout(now));
        }
        self.events()
    }
}

// ---------------------------------------------------------------------------
// Client: the core's engine and what its application saw
// ---------------------------------------------------------------------------

/// The client engine of a device (4 calls, a 4 KiB HPACK table, 2 KiB
/// frame buffers, a 2 KiB annotation cache, all inline) over a store like
/// the server's: two buffers a call, so two calls at a time.
pub type Client = DeviceClient<Store>;

/// Metadata of every call: none, or what a scenario adds.
type Metadata = &'static [(&'static str, &'static str)];

fn new_client(metadata: Metadata) -> Client {
    let config = ClientConfig {
        authority: "mcu.local",
        request_timeout: Duration::from_secs(10),
        metadata,
        ..ClientConfig::default()
    };
    Client::new(config, Store::new(), Instant::ZERO)
}

/// A failed call's JSON-RPC error code, gRPC status, and whether the
/// transport failed (rather than the server answering with an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Error {
    code: i32,
    grpc_status: Option<Code>,
    transport: bool,
}

/// What the client's application saw of one call.
#[derive(Debug)]
struct Seen {
    call: ClientCallId,
    /// The request's id, raw JSON.
    id: &'static [u8],
    /// Events in order: `n`otification, `r`esponse, `f`ailed.
    order: [u8; 8],
    events: usize,
    progress: [i64; 4],
    progress_len: usize,
    /// Every notification carried the request's progress token.
    tokens_ok: bool,
    result: [u8; 768],
    result_len: usize,
    error: Option<Error>,
    ended: bool,
}

impl Seen {
    fn new(call: ClientCallId, id: &'static [u8]) -> Self {
        Self {
            call,
            id,
            order: [0; 8],
            events: 0,
            progress: [0; 4],
            progress_len: 0,
            tokens_ok: true,
            result: [0; 768],
            result_len: 0,
            error: None,
            ended: false,
        }
    }

    fn order(&self) -> &[u8] {
        &self.order[..self.events.min(self.order.len())]
    }

    fn result(&self) -> &[u8] {
        &self.result[..self.result_len]
    }

    fn push(&mut self, kind: u8) {
        if let Some(o) = self.order.get_mut(self.events) {
            *o = kind;
        }
        self.events += 1;
    }
}

/// A progress notification of a call.
fn on_notification(seen: &mut Seen, text: &[u8], token: &[u8]) -> Result<(), Failed> {
    ensure!(
        json::get(text, b"method").is_some_and(|m| json::str_eq(m, b"notifications/progress")),
        "client: unexpected notification"
    );
    let params = json::get(text, b"params").unwrap_or(b"{}");
    let progress = json::get(params, b"progress").and_then(json::as_i64);
    let Some(slot) = seen.progress.get_mut(seen.progress_len) else {
        fail!("client: too many notifications");
    };
    *slot = progress.unwrap_or(-1);
    seen.progress_len += 1;
    seen.tokens_ok &= json::get(params, b"progressToken").map(json::trim) == Some(token);
    seen.push(b'n');
    Ok(())
}

#[derive(Debug)]
pub struct ClientSide {
    client: Client,
    calls: [Option<Seen>; CALLS],
}

/// The record of `call`, also after it was cancelled (an event for it then
/// shows in its order).
fn seen_of(calls: &mut [Option<Seen>], call: ClientCallId) -> Result<&mut Seen, Failed> {
    calls
        .iter_mut()
        .flatten()
        .find(|s| s.call == call)
        .ok_or_else(|| failed!("client: an event of an unknown call"))
}

impl ClientSide {
    fn new(metadata: Metadata) -> Self {
        Self {
            client: new_client(metadata),
            calls: [const { None }; CALLS],
        }
    }

    /// Starts a call of the request `body`, whose id is `id`.
    fn call(&mut self, body: &str, id: &'static [u8], now: Instant) -> Result<usize, Failed> {
        let Some(index) = self.calls.iter().position(Option::is_none) else {
            fail!("client: no room for another call");
        };
        let call = measured("mcp client call", || {
            self.client.call(body.as_bytes(), None, now)
        })
        .map_err(|e| failed!("client: call: {e:?}"))?;
        self.calls[index] = Some(Seen::new(call, id));
        Ok(index)
    }

    fn cancel(&mut self, index: usize) -> Result<(), Failed> {
        let Some(Some(seen)) = self.calls.get(index) else {
            fail!("client: no call {index}");
        };
        let call = seen.call;
        ensure!(
            measured("mcp client cancel", || self.client.cancel(call)),
            "client: the call was over before its cancel"
        );
        Ok(())
    }

    fn seen(&self, index: usize) -> Result<&Seen, Failed> {
        match self.calls.get(index) {
            Some(Some(s)) => Ok(s),
            _ => Err(failed!("client: no call {index}")),
        }
    }

    fn events(&mut self) -> Result<(), Failed> {
        let Self { client, calls } = self;
        while let Some(e) = measured("mcp client poll_event", || client.poll_event()) {
            match e {
                ClientEvent::Notification { call } => {
                    let seen = seen_of(calls, call)?;
                    let Some(text) = client.message(call) else {
                        fail!("client: a notification without its text");
                    };
                    on_notification(seen, text, br#""job-7""#)?;
                }
                ClientEvent::Response { call } => {
                    let seen = seen_of(calls, call)?;
                    let (Some(message), Some(result)) = (client.message(call), client.result(call))
                    else {
                        fail!("client: a response without its text");
                    };
                    ensure!(
                        json::get(message, b"id").map(json::trim) == Some(seen.id),
                        "client: response id differs"
                    );
                    let result = json::trim(result);
                    let Some(dst) = seen.result.get_mut(..result.len()) else {
                        fail!("client: result of {} bytes too long", result.len());
                    };
                    dst.copy_from_slice(result);
                    seen.result_len = result.len();
                    seen.push(b'r');
                }
                ClientEvent::Failed { call } => {
                    let seen = seen_of(calls, call)?;
                    let Some(f) = client.failure(call) else {
                        fail!("client: a failure without its error");
                    };
                    ensure!(
                        json::get(f.response, b"id").map(json::trim) == Some(seen.id),
                        "client: the error response has another id"
                    );
                    seen.error = Some(Error {
                        code: f.code,
                        grpc_status: f.diagnostics.grpc_status,
                        transport: f.diagnostics.transport,
                    });
                    seen.push(b'f');
                }
                ClientEvent::Ended { call } => {
                    let seen = seen_of(calls, call)?;
                    ensure!(!seen.ended, "client: a call ended twice");
                    seen.ended = true;
                }
                ClientEvent::Warning { reason, .. } => fail!("client: warning: {reason}"),
                ClientEvent::ConnectionClosed { error } => {
                    fail!("client: connection closed ({error:?})")
                }
                // Links are the multi-connection engine's, not this one's.
                other => fail!("client: unexpected {other:?}"),
            }
        }
        Ok(())
    }
}

impl Peer for ClientSide {
    fn act(&mut self, _rng: &mut Rng, _now: Instant) -> Result<bool, Failed> {
        self.events()?;
        Ok(false)
    }

    fn recv(&mut self, input: &[u8], now: Instant) -> Result<usize, Failed> {
        let n = measured("mcp client recv", || self.client.recv(input, now));
        self.events()?;
        Ok(n)
    }

    fn poll_transmit(&mut self, out: &mut [u8]) -> Result<usize, Failed> {
        let n = measured("mcp client poll_transmit", || {
            self.client.poll_transmit(out)
        });
        self.events()?;
        Ok(n)
    }

    fn timeout(&mut self, now: Instant) -> Result<(), Failed> {
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            measured("mcp client handle_timeout", || {
                self.client.handle_timeout(now)
            });
        }
        self.events()
    }
}

pub type McpPair = Pair<ClientSide, ServerSide, PIPE>;

/// Runs `scenario` once per seed on a fresh pair whose client sends
/// `metadata` with every call; the summary of the last run is the
/// scenario's.
fn with_seeds(metadata: Metadata, mut scenario: impl FnMut(&mut McpPair) -> Outcome) -> Outcome {
    let mut summary = Text::new();
    for seed in SEEDS {
        let mut p = McpPair::new(ClientSide::new(metadata), ServerSide::new(), seed);
        summary = scenario(&mut p).map_err(|Failed| context(format_args!("seed {seed}")))?;
        let client = &p.client.client;
        ensure!(
            client.connection().error().is_none()
                && !client.is_closed()
                && !p.server.engine.is_closed(),
            "seed {seed}: the connection failed"
        );
        // Every call ended or was cancelled: its buffers are back.
        ensure!(
            client.store().in_use() == 0,
            "seed {seed}: the client holds {} buffers after its calls",
            client.store().in_use()
        );
    }
    Ok(text!("{}; seeds {}", summary.as_str(), SEEDS.len()))
}

fn ok_end(seen: &Seen, what: &str) -> Result<(), Failed> {
    ensure!(
        seen.ended && seen.error.is_none() && seen.order().last() == Some(&b'r'),
        "{what}: ended {}, events {:?}, error {:?}",
        seen.ended,
        core::str::from_utf8(seen.order()),
        seen.error
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

/// `tools/list`, answered by the engine from the registry.
pub fn tools_list() -> Outcome {
    with_seeds(&[], |p| {
        let call = p.client.call(LIST, b"1", p.now)?;
        p.run()?;
        let seen = p.client.seen(call)?;
        ok_end(seen, "tools/list")?;
        ensure!(
            seen.order() == b"r",
            "tools/list: events {:?}",
            seen.order()
        );
        ensure!(p.server.requests == 0, "tools/list reached the application");
        let Some(tools) = json::get(seen.result(), b"tools") else {
            fail!("tools/list: no tools in the result");
        };
        let mut names = [""; 3];
        for (n, tool) in json::elements(tools).enumerate() {
            let name = json::get(tool, b"name").unwrap_or(b"");
            let Some(info) = TOOLS.iter().find(|t| json::str_eq(name, t.name.as_bytes())) else {
                fail!("tools/list: a tool not in the registry");
            };
            let Some(slot) = names.get_mut(n) else {
                fail!("tools/list: too many tools");
            };
            *slot = info.name;
        }
        ensure!(
            names == ["echo", "count", "wait"],
            "tools/list: tools {names:?}"
        );
        Ok(text!(
            "3 tools listed by the engine, {} B result, then Ended",
            seen.result_len
        ))
    })
}

/// A `tools/call` whose handler sends 3 progress notifications, then
/// its result.
pub fn progress() -> Outcome {
    with_seeds(&[], |p| {
        let call = p.client.call(COUNT, br#""c-2""#, p.now)?;
        p.run()?;
        let seen = p.client.seen(call)?;
        ok_end(seen, "count")?;
        ensure!(
            seen.order() == b"nnnr",
            "count: event order {:?}",
            core::str::from_utf8(seen.order())
        );
        ensure!(
            seen.progress[..seen.progress_len] == [1, 2, 3],
            "count: progress {:?}",
            &seen.progress[..seen.progress_len]
        );
        ensure!(seen.tokens_ok, "count: progress token not echoed");
        let text = json::get(seen.result(), b"content")
            .and_then(|c| json::elements(c).next())
            .and_then(|c| json::get(c, b"text"));
        ensure!(
            text.is_some_and(|t| json::str_eq(t, b"counted to 3")),
            "count: wrong result"
        );
        ensure!(
            p.server.requests == 1 && p.server.answered == 1,
            "count: {} requests, {} answered",
            p.server.requests,
            p.server.answered
        );
        Ok(text!(
            "3 progress notifications in order, then the result ({} busy retries)",
            p.server.busy
        ))
    })
}

/// A call the client engine cancels (RST_STREAM(CANCEL)): the engine
/// reports it; a later call on the connection is answered.
pub fn cancel() -> Outcome {
    with_seeds(&[], |p| {
        let wait = p.client.call(WAIT, b"3", p.now)?;
        p.run()?;
        ensure!(p.server.requests == 1, "wait: the handler did not get it");
        let Some(call) = p.server.handlers.iter().flatten().next().map(|h| h.call) else {
            fail!("wait: no handler");
        };
        p.client.cancel(wait)?;
        p.run()?;
        ensure!(
            p.up.frames().resets() == 1,
            "wait: {} RST_STREAM from the client",
            p.up.frames().resets()
        );
        ensure!(
            p.server.cancelled == Some((call, CancelReason::Reset))
                && p.server.cancelled_tool == Some(Tool::Wait),
            "wait: cancellation {:?}",
            p.server.cancelled
        );
        ensure!(
            p.server.engine.respond(call, b"{}") == Err(SendError::Gone),
            "wait: respond after the cancel was not Gone"
        );
        let seen = p.client.seen(wait)?;
        ensure!(
            seen.events == 0 && !seen.ended,
            "wait: the cancelled call got an event"
        );
        let echo = p.client.call(ECHO, b"4", p.now)?;
        p.run()?;
        let seen = p.client.seen(echo)?;
        ok_end(seen, "echo after the cancel")?;
        let text = json::get(seen.result(), b"content")
            .and_then(|c| json::elements(c).next())
            .and_then(|c| json::get(c, b"text"));
        ensure!(
            text.is_some_and(|t| json::str_eq(t, b"still \"here\"")),
            "echo: wrong result"
        );
        Ok(text!(
            "RST_STREAM(CANCEL) -> Cancelled {{ reason: Reset }}, respond then Gone; next call answered"
        ))
    })
}

/// An error found before the handler runs: the client's metadata adds a
/// second `mcp-name` (`count`, where the body's tool is `echo`; the engine
/// mirrors the body's, so a wrong one alone cannot be sent), which the
/// server engine refuses with -32020 in a trailers-only response. The
/// client engine reads `tools/list` again and retries once, as the binding
/// says, then fails the call with the server's error.
pub fn error_before_handler() -> Outcome {
    with_seeds(&[("mcp-name", "count")], |p| {
        let call = p.client.call(ECHO, b"4", p.now)?;
        p.run()?;
        let seen = p.client.seen(call)?;
        ensure!(
            seen.ended && seen.order() == b"f",
            "mismatch: ended {}, events {:?}",
            seen.ended,
            core::str::from_utf8(seen.order())
        );
        let expected = Error {
            code: -32020,
            grpc_status: Some(Code::InvalidArgument),
            transport: false,
        };
        ensure!(
            seen.error == Some(expected),
            "mismatch: error {:?}",
            seen.error
        );
        ensure!(p.server.requests == 0, "mismatch: the handler ran");
        // Up: the call, the re-list, the retry. Down: each error
        // trailers-only (one HEADERS), the re-list's head and trailers.
        ensure!(
            p.up.frames().headers() == 3 && p.down.frames().headers() == 4,
            "mismatch: {} HEADERS up, {} down",
            p.up.frames().headers(),
            p.down.frames().headers()
        );
        Ok(text!(
            "mcp-name twice -> trailers-only -32020, grpc-status 3, no handler; the client engine re-listed, retried once, then Failed -32020"
        ))
    })
}
