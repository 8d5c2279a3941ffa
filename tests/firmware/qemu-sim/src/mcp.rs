//! The MCP tunnel engine: our HTTP/2 client makes calls of the gRPC tunnel
//! binding to the server engine ([`Server`]), over the pipes. The server side's
//! application (the tool handlers) is the code below, in the loop.
//!
//! The client builds each call with the core's own pieces: the metadata
//! from the body ([`mirror_headers`]) in a [`HeaderBuilder`], the head with
//! `send_headers`, the message with the tunnel codec ([`JsonRpcMessage`])
//! behind a gRPC prefix ([`write_prefix`]); it reads the answer with
//! [`MessageDecoder`] and, for errors in trailers, [`error_from_trailers`].

use mcpwire_core::grpc::{Code, MessageDecoder, PREFIX_LEN, write_prefix};
use mcpwire_core::h2::{Data, Event, HeaderBuilder, HeaderList, HeadersKind, Role, StreamRef};
use mcpwire_core::hpack::Field;
use mcpwire_core::mcp::SlabStore;
use mcpwire_core::mcp::client::{CallOutcome, error_from_trailers, mirror_headers};
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::registry::{Registry, ServerInfo, ToolInfo};
use mcpwire_core::mcp::server::{
    self as engine, CallId, CancelReason, RequestKind, SendError, ServerConfig, ServerEvent,
    TUNNEL_PATH,
};
use mcpwire_core::mcp::writer::JsonWriter;
use mcpwire_core::time::Instant;
use mcpwire_proto::tunnel::JsonRpcMessage;

use crate::h2::Conn;
use crate::sim::{ConnPeer, Failed, Outcome, Pair, Peer, Rng, Text, context};
use crate::stack::measured;
use crate::{ensure, fail, failed, text};

/// Octets of each call buffer: the request head, the request message and
/// the outgoing message of one call.
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
/// Largest response message the client reads.
const MESSAGE: usize = 1024;
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
// Client
// ---------------------------------------------------------------------------

/// What the client saw of one call.
#[derive(Debug)]
struct Seen {
    /// The request's id, raw JSON.
    id: &'static [u8],
    head_ok: bool,
    /// Message kinds in arrival order: `n`otification, `r`esult, `e`rror.
    order: [u8; 8],
    messages: usize,
    progress: [i64; 4],
    progress_len: usize,
    /// Every notification carried the request's progress token.
    tokens_ok: bool,
    result: [u8; 768],
    result_len: usize,
    grpc_status: Option<Code>,
    mcp_error_code: Option<i64>,
    /// The JSON-RPC error code the trailers stand for.
    rpc_error: Option<i64>,
    ended: bool,
}

impl Seen {
    fn order(&self) -> &[u8] {
        &self.order[..self.messages.min(self.order.len())]
    }
    fn result(&self) -> &[u8] {
        &self.result[..self.result_len]
    }
}

#[derive(Debug)]
struct ClientCall {
    stream: StreamRef,
    decoder: MessageDecoder,
    message: [u8; MESSAGE],
    seen: Seen,
    reset_sent: bool,
}

#[derive(Debug)]
pub struct ClientSide {
    conn: Conn,
    calls: [Option<ClientCall>; CALLS],
}

/// Handles one JSON-RPC message of a call's response.
fn on_message(seen: &mut Seen, message: &[u8], token: &[u8]) -> Result<(), Failed> {
    let Ok(text) = JsonRpcMessage::decode(message) else {
        fail!("client: not a JsonRpcMessage");
    };
    ensure!(
        json::validate(text, json::DEFAULT_MAX_DEPTH).is_ok(),
        "client: a message is not JSON"
    );
    let kind = if let Some(method) = json::get(text, b"method") {
        ensure!(
            json::str_eq(method, b"notifications/progress"),
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
        b'n'
    } else if let Some(result) = json::get(text, b"result") {
        ensure!(
            json::get(text, b"id").map(json::trim) == Some(seen.id),
            "client: response id differs"
        );
        let result = json::trim(result);
        let Some(dst) = seen.result.get_mut(..result.len()) else {
            fail!("client: result of {} bytes too long", result.len());
        };
        dst.copy_from_slice(result);
        seen.result_len = result.len();
        b'r'
    } else {
        b'e'
    };
    if let Some(o) = seen.order.get_mut(seen.messages) {
        *o = kind;
    }
    seen.messages += 1;
    Ok(())
}

/// Reads the status and the MCP error of trailers (or of a trailers-only
/// response).
fn on_trailers(seen: &mut Seen, fields: HeaderList<'_>) -> Result<(), Failed> {
    let Some(status) = fields.get(b"grpc-status").and_then(Code::parse) else {
        fail!("client: trailers without grpc-status");
    };
    seen.grpc_status = Some(status);
    seen.mcp_error_code = fields.get(b"mcp-error-code").and_then(json::as_i64);
    if status != Code::Ok {
        let mut out = [0u8; 512];
        if let (CallOutcome::RpcError, Some(response)) =
            measured("mcp client error_from_trailers", || {
                error_from_trailers(fields, seen.id, &mut out)
            })
        {
            ensure!(
                json::get(response, b"id").map(json::trim) == Some(seen.id),
                "client: the error from the trailers has another id"
            );
            seen.rpc_error = json::get(response, b"error")
                .and_then(|e| json::get(e, b"code"))
                .and_then(json::as_i64);
        }
    }
    seen.ended = true;
    Ok(())
}

impl ClientSide {
    fn new() -> Self {
        Self {
            conn: Conn::new(
                Role::Client,
                mcpwire_core::h2::Config::default(),
                Instant::ZERO,
            ),
            calls: [const { None }; CALLS],
        }
    }

    /// Starts a tunnel call carrying `body`, whose id is `id`. The metadata
    /// comes from the body; `mcp_name` replaces the `mcp-name` it gives.
    fn call(
        &mut self,
        body: &str,
        id: &'static [u8],
        mcp_name: Option<&[u8]>,
    ) -> Result<usize, Failed> {
        let Some(index) = self.calls.iter().position(Option::is_none) else {
            fail!("client: no room for another call");
        };
        let body = body.as_bytes();
        let stream = self
            .conn
            .open_stream()
            .map_err(|e| failed!("client: open_stream: {e}"))?;
        let mut metadata = HeaderBuilder::<512>::new();
        let mut fits = true;
        measured("mcp client mirror_headers", || {
            mirror_headers(body, None, |name, value| {
                let value = match mcp_name {
                    Some(other) if name == b"mcp-name" => other,
                    _ => value,
                };
                fits &= metadata.push(Field::new(name, value));
            })
        })
        .map_err(|e| failed!("client: mirror_headers: {}", e.message))?;
        ensure!(fits, "client: metadata too long");
        let head = [
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", TUNNEL_PATH),
            Field::new(b":authority", b"mcu.local"),
            Field::new(b"content-type", b"application/grpc"),
            Field::new(b"te", b"trailers"),
            Field::new(b"grpc-timeout", b"10S"),
        ];
        measured("h2 send_headers", || {
            self.conn
                .send_headers(stream, head.into_iter().chain(metadata.list()), false)
        })
        .map_err(|e| failed!("client: send_headers: {e}"))?;
        let mut framed = [0u8; 512];
        let n = JsonRpcMessage::encode(body, &mut framed[PREFIX_LEN..])
            .map_err(|e| failed!("client: message of {} bytes too long", e.needed))?;
        framed[..PREFIX_LEN].copy_from_slice(&write_prefix(n as u32));
        let taken = self
            .conn
            .send_data(stream, &framed[..PREFIX_LEN + n], true)
            .map_err(|e| failed!("client: send_data: {e}"))?;
        ensure!(taken == PREFIX_LEN + n, "client: request not taken whole");
        self.calls[index] = Some(ClientCall {
            stream,
            decoder: MessageDecoder::new(MESSAGE),
            message: [0; MESSAGE],
            seen: Seen {
                id,
                head_ok: false,
                order: [0; 8],
                messages: 0,
                progress: [0; 4],
                progress_len: 0,
                tokens_ok: true,
                result: [0; 768],
                result_len: 0,
                grpc_status: None,
                mcp_error_code: None,
                rpc_error: None,
                ended: false,
            },
            reset_sent: false,
        });
        Ok(index)
    }

    fn cancel(&mut self, index: usize) -> Result<(), Failed> {
        let Some(Some(c)) = self.calls.get_mut(index) else {
            fail!("client: no call {index}");
        };
        self.conn
            .reset(c.stream, mcpwire_core::h2::ErrorCode::CANCEL)
            .map_err(|e| failed!("client: reset: {e}"))?;
        c.reset_sent = true;
        Ok(())
    }

    fn seen(&self, index: usize) -> Result<&Seen, Failed> {
        match self.calls.get(index) {
            Some(Some(c)) => Ok(&c.seen),
            _ => Err(failed!("client: no call {index}")),
        }
    }

    fn find(&mut self, stream: StreamRef) -> Result<&mut ClientCall, Failed> {
        self.calls
            .iter_mut()
            .flatten()
            .find(|c| c.stream == stream && !c.seen.ended)
            .ok_or_else(|| failed!("client: frames of an unknown stream"))
    }
}

impl ConnPeer for ClientSide {
    fn conn(&mut self) -> &mut Conn {
        &mut self.conn
    }

    fn act(&mut self, _rng: &mut Rng, _now: Instant) -> Result<bool, Failed> {
        self.events()?;
        Ok(false)
    }

    fn events(&mut self) -> Result<(), Failed> {
        while let Some(e) = measured("h2 client poll_event", || self.conn.poll_event()) {
            match e {
                Event::Headers {
                    stream,
                    kind,
                    end_stream,
                } => {
                    let fields = self.conn.headers(stream).unwrap_or(HeaderList::EMPTY);
                    let Some(c) = self
                        .calls
                        .iter_mut()
                        .flatten()
                        .find(|c| c.stream == stream && !c.seen.ended)
                    else {
                        fail!("client: headers of an unknown stream");
                    };
                    match kind {
                        HeadersKind::Response => {
                            let grpc = fields
                                .get(b"content-type")
                                .is_some_and(|t| t.starts_with(b"application/grpc"));
                            ensure!(
                                fields.get(b":status") == Some(&b"200"[..]) && grpc,
                                "client: response head not 200 application/grpc"
                            );
                            c.seen.head_ok = true;
                        }
                        HeadersKind::Trailers => {}
                        _ => fail!("client: unexpected {kind:?}"),
                    }
                    if end_stream {
                        ensure!(
                            c.decoder.finish().is_ok(),
                            "client: stream ended inside a message"
                        );
                        on_trailers(&mut c.seen, fields)?;
                    }
                }
                Event::Reset {
                    stream,
                    code,
                    remote,
                } => {
                    let ours = self
                        .calls
                        .iter()
                        .flatten()
                        .any(|c| c.stream == stream && c.reset_sent);
                    ensure!(ours, "client: stream reset with {code} (remote {remote})");
                }
                Event::ConnectionClosed { error } => {
                    fail!("client: connection closed ({error:?})")
                }
                Event::GoAway { code, .. } => fail!("client: GOAWAY {code}"),
                _ => {}
            }
        }
        Ok(())
    }

    fn data(
        &mut self,
        Data {
            stream, mut bytes, ..
        }: Data<'_>,
    ) -> Result<(), Failed> {
        let c = self.find(stream)?;
        ensure!(c.seen.head_ok, "client: data before the response head");
        while !bytes.is_empty() {
            let (used, message) = c
                .decoder
                .feed(bytes, &mut c.message)
                .map_err(|e| failed!("client: {}", e.message()))?;
            if let Some(len) = message {
                on_message(&mut c.seen, &c.message[..len], br#""job-7""#)?;
            }
            bytes = &bytes[used..];
        }
        Ok(())
    }
}

pub type McpPair = Pair<ClientSide, ServerSide, PIPE>;

/// Runs `scenario` once per seed on a fresh pair; the summary of the last
/// run is the scenario's.
fn with_seeds(mut scenario: impl FnMut(&mut McpPair) -> Outcome) -> Outcome {
    let mut summary = Text::new();
    for seed in SEEDS {
        let mut p = McpPair::new(ClientSide::new(), ServerSide::new(), seed);
        summary = scenario(&mut p).map_err(|Failed| context(format_args!("seed {seed}")))?;
        ensure!(
            p.client.conn.error().is_none() && !p.server.engine.is_closed(),
            "seed {seed}: the connection failed"
        );
    }
    Ok(text!("{}; seeds {}", summary.as_str(), SEEDS.len()))
}

fn ok_end(seen: &Seen, what: &str) -> Result<(), Failed> {
    ensure!(
        seen.ended && seen.head_ok && seen.grpc_status == Some(Code::Ok),
        "{what}: ended {}, grpc-status {:?}",
        seen.ended,
        seen.grpc_status
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

/// `tools/list`, answered by the engine from the registry.
pub fn tools_list() -> Outcome {
    with_seeds(|p| {
        let call = p.client.call(LIST, b"1", None)?;
        p.run()?;
        let seen = p.client.seen(call)?;
        ok_end(seen, "tools/list")?;
        ensure!(
            seen.order() == b"r",
            "tools/list: messages {:?}",
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
            "3 tools listed by the engine, {} B result, grpc-status 0",
            seen.result_len
        ))
    })
}

/// A `tools/call` whose handler sends 3 progress notifications, then
/// its result.
pub fn progress() -> Outcome {
    with_seeds(|p| {
        let call = p.client.call(COUNT, br#""c-2""#, None)?;
        p.run()?;
        let seen = p.client.seen(call)?;
        ok_end(seen, "count")?;
        ensure!(
            seen.order() == b"nnnr",
            "count: message order {:?}",
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
            "3 progress notifications in order, then the result, grpc-status 0 ({} busy retries)",
            p.server.busy
        ))
    })
}

/// A call cancelled by the client's RST_STREAM(CANCEL): the engine reports
/// it; a later call on the connection is answered.
pub fn cancel() -> Outcome {
    with_seeds(|p| {
        let wait = p.client.call(WAIT, b"3", None)?;
        p.run()?;
        ensure!(p.server.requests == 1, "wait: the handler did not get it");
        let Some(call) = p.server.handlers.iter().flatten().next().map(|h| h.call) else {
            fail!("wait: no handler");
        };
        p.client.cancel(wait)?;
        p.run()?;
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
            seen.messages == 0 && !seen.ended,
            "wait: the cancelled call got an answer"
        );
        let echo = p.client.call(ECHO, b"4", None)?;
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

/// An error found before the handler runs (`mcp-name` says another tool
/// than the body): a trailers-only response with `grpc-status` and
/// `mcp-error-code`.
pub fn error_before_handler() -> Outcome {
    with_seeds(|p| {
        let call = p.client.call(ECHO, b"4", Some(b"count"))?;
        p.run()?;
        let seen = p.client.seen(call)?;
        ensure!(
            seen.ended && seen.head_ok && seen.messages == 0,
            "mismatch: ended {}, {} messages",
            seen.ended,
            seen.messages
        );
        ensure!(
            seen.grpc_status == Some(Code::InvalidArgument),
            "mismatch: grpc-status {:?}",
            seen.grpc_status
        );
        ensure!(
            seen.mcp_error_code == Some(-32020) && seen.rpc_error == Some(-32020),
            "mismatch: mcp-error-code {:?}, JSON-RPC error {:?}",
            seen.mcp_error_code,
            seen.rpc_error
        );
        ensure!(p.server.requests == 0, "mismatch: the handler ran");
        Ok(text!(
            "mcp-name mismatch -> trailers-only, grpc-status 3, mcp-error-code -32020 (error_from_trailers agrees)"
        ))
    })
}
