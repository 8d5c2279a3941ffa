//! The MCP server engine of the gRPC tunnel binding
//! (`/mcp.zig.transport.v1.Mcp/Call`), sans-IO, over an HTTP/2 connection.
//!
//! One call carries one JSON-RPC request. The engine checks the call's head
//! (method, content type, encoding, path), collects the request message,
//! applies the 2026-07-28 rules (`_meta`, protocol version, metadata
//! mirroring) and answers what it can itself: `server/discover` and the
//! list methods from the [`Registry`], and every error found before a
//! handler would run. Everything else (`tools/call`, `resources/read`,
//! `prompts/get`, `completion/complete`, `subscriptions/listen`) comes out
//! as [`ServerEvent::Request`]; the application answers with
//! [`Engine::respond`], [`Engine::respond_error`], and streams notifications
//! (progress, listen events) with [`Engine::notify`].
//!
//! The run loop is the HTTP/2 connection's: `recv` until consumed, drain
//! [`Engine::poll_event`] after every call, `poll_transmit` until 0, sleep
//! until input or [`Engine::poll_timeout`], then `handle_timeout`.
//!
//! Errors found before a handler runs (-32700, -32600, -32020, -32022) end
//! the call with a headers-only response whose trailers carry `grpc-status`,
//! `grpc-message`, `mcp-error-code` and `mcp-error-bin` (typed binding §9.2).
//! Other JSON-RPC errors travel as an ordinary error response message
//! followed by `grpc-status: 0`.

use core::time::Duration;

use super::error::{
    HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RpcError,
    UNSUPPORTED_PROTOCOL_VERSION,
};
use super::meta::{RequestMeta, SUPPORTED_VERSIONS};
use super::mirror::{self, Annotations, Mirrored};
use super::registry::{MAX_ANNOTATIONS, Registry};
use super::store::CallStore;
use super::writer::JsonWriter;
use super::{Message, json};
use crate::grpc::{self, Code, HeadError, MessageDecoder, RequestHead, base64, percent};
use crate::h2::{
    self, Connection, ConnectionError, ErrorCode, Event, HeaderList, HeadersKind, InlineStorage,
    Storage, StreamRef,
};
use crate::hpack::Field;
use crate::records::{Queue, Records};
use crate::time::Instant;
use mcpwire_proto::tunnel::{self, JsonRpcMessage};

/// The path of the tunnel method.
pub const TUNNEL_PATH: &[u8] = tunnel::CALL_PATH.as_bytes();

/// Longest JSON-RPC id kept (raw JSON).
const MAX_ID: usize = 128;
/// Room before an outgoing message for its gRPC prefix and protobuf header.
const FRAMING: usize = 16;
/// Longest `grpc-message` sent (typed binding §9.2).
const MAX_GRPC_MESSAGE: usize = 1024;
/// Longest `mcp-error-bin` value sent.
const MAX_ERROR_BIN: usize = 4096;
/// Room asked of the store for the trailer values of an error (the error
/// response, its base64 and the percent-encoded message).
const ERROR_ROOM: usize = 8 << 10;
/// Longest principal name kept for a call.
const MAX_PRINCIPAL: usize = 128;
/// JSON nesting accepted in a request.
const MAX_DEPTH: usize = 64;

/// Settings of the engine.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// The HTTP/2 connection's settings.
    pub h2: h2::Config,
    /// The largest request message (also capped by the call store's
    /// largest buffer). A larger one ends the call with RESOURCE_EXHAUSTED.
    pub max_message_bytes: usize,
    /// Deadline of a request that has no `grpc-timeout` (not for
    /// `subscriptions/listen`). Default 60 s.
    pub request_timeout: Duration,
    /// Every call waits for [`Engine::authorized`] or
    /// [`Engine::unauthorized`] after a [`ServerEvent::Authorize`], before
    /// anything (even `tools/list`) is answered. Default off.
    pub authorize: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            h2: h2::Config::default(),
            max_message_bytes: 4 << 20,
            request_timeout: Duration::from_secs(60),
            authorize: false,
        }
    }
}

/// A call of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallId {
    index: u16,
    stream: StreamRef,
}

impl CallId {
    /// The engine's record of this call: below `STREAMS`, and reused by a
    /// later call once this one is over (a driver can keep its own
    /// per-call state in a slice indexed by it).
    pub fn index(self) -> usize {
        usize::from(self.index)
    }
}

/// Why a call's handler must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// The client reset the stream (RST_STREAM(CANCEL)).
    Reset,
    /// The deadline passed; the engine answered DEADLINE_EXCEEDED.
    Deadline,
    /// The connection ended.
    ConnectionClosed,
}

/// A request for the application. Its slices are borrowed from the
/// engine until the next call on it: copy what the handler needs.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The method, without quotes (`tools/call`, ...).
    pub method: &'a [u8],
    /// The raw JSON id.
    pub id: &'a [u8],
    /// The raw JSON `params` object.
    pub params: &'a [u8],
    /// The request's `_meta`.
    pub meta: RequestMeta<'a>,
    /// The call's request headers (`authorization`, custom metadata).
    pub headers: HeaderList<'a>,
    /// When the call must end.
    pub deadline: Option<Instant>,
    /// What [`Engine::authorized`] named, when authorization is on.
    pub principal: Option<&'a [u8]>,
}

/// Something the application must act on.
#[derive(Debug, Clone, Copy)]
pub enum ServerEvent<'a> {
    /// Check the call's credentials (the `authorization` value, if any),
    /// then call [`Engine::authorized`] or [`Engine::unauthorized`].
    Authorize {
        call: CallId,
        authorization: Option<&'a [u8]>,
    },
    /// Run the handler for this request; answer with `respond` or
    /// `respond_error`.
    Request { call: CallId, request: Request<'a> },
    /// Stop the handler: the call is over.
    Cancelled { call: CallId, reason: CancelReason },
    /// A `notify` or `respond` that was refused as busy can go now.
    Writable { call: CallId },
    /// The connection is over; the last event.
    ConnectionClosed { error: Option<ConnectionError> },
}

/// Why `respond`, `respond_error` or `notify` did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The call is over (cancelled, reset, or already answered).
    Gone,
    /// The previous message is still being written: retry after
    /// [`ServerEvent::Writable`].
    Busy,
    /// The message is larger than the call store can give a call.
    TooLarge { needed: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the application to accept the call's credentials,
    /// while the request message is collected.
    Authorizing,
    /// Collecting the request message.
    Body,
    /// The application holds the request.
    Handler,
    /// Writing the last message; trailers follow.
    Finishing,
}

#[derive(Debug, Clone, Copy)]
enum Queued {
    Authorize { index: usize, stream: StreamRef },
    Request { index: usize, stream: StreamRef },
    Cancelled { call: CallId, reason: CancelReason },
    Writable { call: CallId },
    ConnectionClosed { error: Option<ConnectionError> },
}

const EVENTS: usize = 32;

/// Methods the engine answers from the registry.
#[derive(Debug, Clone, Copy)]
enum Builtin {
    Discover,
    Tools,
    Resources,
    Templates,
    Prompts,
}

/// A call, and where its parts lie in its buffer: the request head's
/// octets, room for the id, room for the principal (with authorization),
/// then the body — the request message, later each outgoing message.
struct Call<B> {
    stream: StreamRef,
    phase: Phase,
    decoder: MessageDecoder,
    buf: B,
    headers_len: usize,
    id_len: usize,
    principal_len: Option<usize>,
    /// Where the body starts.
    body: usize,
    message_len: Option<usize>,
    deadline: Option<Instant>,
    /// Where the request's method and params lie in the buffer once parsed.
    method: (usize, usize),
    params: (usize, usize),
    /// The response head went out.
    head_sent: bool,
    /// Outgoing octets in `buf[out_pos..out_end]`.
    out_pos: usize,
    out_end: usize,
    /// The application was told Busy and waits for Writable.
    wants_writable: bool,
    /// The request ended while the call was being authorized.
    ended: bool,
}

impl<B> Call<B> {
    fn id_at(&self) -> core::ops::Range<usize> {
        self.headers_len..self.headers_len + self.id_len
    }

    fn principal_at(&self) -> Option<core::ops::Range<usize>> {
        let start = self.headers_len + MAX_ID;
        self.principal_len.map(|n| start..start + n)
    }

    fn params_at(&self) -> Option<core::ops::Range<usize>> {
        (self.params.1 > 0).then_some(self.params.0..self.params.1)
    }
}

/// The tunnel server over one connection. `STREAMS`, `TABLE` and `BUF` size
/// the HTTP/2 connection ([`h2::Connection`]); the [`CallStore`] `S` gives
/// each call its buffer while it lasts, which bounds a request and each
/// message of its response. `FB` keeps the connection's three `BUF` buffers
/// (inline by default; see [`h2::storage`]).
pub struct Engine<
    'r,
    S: CallStore,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    FB: Storage<BUF> = InlineStorage<BUF>,
> {
    conn: Connection<STREAMS, TABLE, BUF, 64, FB>,
    calls: FB::Records<Option<Call<S::Buf>>, STREAMS>,
    store: S,
    registry: Registry<'r>,
    config: EngineConfig,
    now: Instant,
    events: Queue<Queued, FB::Records<Option<Queued>, EVENTS>>,
    /// A Request event borrows this call's buffer until the next call.
    lent: Option<usize>,
    closed: bool,
}

impl<S: CallStore, const STREAMS: usize, const TABLE: usize, const BUF: usize, FB: Storage<BUF>>
    core::fmt::Debug for Engine<'_, S, STREAMS, TABLE, BUF, FB>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Engine")
            .field("conn", &self.conn)
            .field("calls", &self.calls.iter().filter(|c| c.is_some()).count())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl<
    'r,
    S: CallStore,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    FB: Storage<BUF> + Default,
> Engine<'r, S, STREAMS, TABLE, BUF, FB>
{
    /// A server engine for one accepted connection, whose calls take their
    /// buffers from `store`.
    pub fn new(registry: Registry<'r>, config: EngineConfig, store: S, now: Instant) -> Self {
        Self {
            conn: Connection::new(h2::Role::Server, config.h2, now),
            calls: Default::default(),
            store,
            registry,
            config,
            now,
            events: Queue::default(),
            lent: None,
            closed: false,
        }
    }

    /// The call store, for its state.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The HTTP/2 connection, for its state and windows.
    pub fn connection(&self) -> &Connection<STREAMS, TABLE, BUF, 64, FB> {
        &self.conn
    }

    /// Whether the connection is over and all output was taken.
    pub fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    /// Feeds received octets; returns how many were consumed. Call again
    /// with the rest after draining events (see the module docs).
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        self.now = now;
        self.lent = None;
        let r = self.conn.recv(input, now);
        if let Some(d) = r.data {
            self.on_data(d.stream, d.bytes, d.end_stream);
        }
        self.drain_connection();
        r.consumed
    }

    /// The transport reached end of file or failed: calls in progress are
    /// cancelled ([`ServerEvent::Cancelled`]), then the connection closes.
    pub fn recv_eof(&mut self) {
        self.lent = None;
        self.conn.recv_eof();
        self.drain_connection();
    }

    /// Starts a graceful shutdown: GOAWAY(NO_ERROR); calls in progress
    /// finish, new ones are refused, and the connection closes after the last.
    pub fn go_away(&mut self) {
        self.lent = None;
        self.conn.go_away(ErrorCode::NO_ERROR);
        self.drain_connection();
    }

    /// The next deadline: the connection's or a call's.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let calls = self.calls.iter().flatten().filter_map(|c| c.deadline).min();
        match (self.conn.poll_timeout(), calls) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Lets time pass: calls past their deadline end with DEADLINE_EXCEEDED.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        self.lent = None;
        self.conn.handle_timeout(now);
        for i in 0..self.calls.len() {
            let Some(call) = self.calls[i].as_ref() else {
                continue;
            };
            if call.deadline.is_some_and(|d| now >= d) {
                let id = CallId {
                    index: i as u16,
                    stream: call.stream,
                };
                if call.phase == Phase::Handler {
                    self.push(Queued::Cancelled {
                        call: id,
                        reason: CancelReason::Deadline,
                    });
                }
                self.end_with_status(i, Code::DeadlineExceeded, b"deadline exceeded");
            }
        }
        self.drain_connection();
    }

    /// Writes pending frames into `out`; call until it returns 0.
    pub fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        self.lent = None;
        let n = self.conn.poll_transmit(out);
        self.drain_connection();
        n
    }

    /// The next event. A `Request` borrows the engine until the next call.
    pub fn poll_event(&mut self) -> Option<ServerEvent<'_>> {
        // A request or authorization whose call ended in the meantime
        // (reset, deadline) is skipped.
        let e = loop {
            let e = self.events.pop()?;
            let stale = match e {
                Queued::Request { index, stream } => !self.call_is(index, stream, Phase::Handler),
                Queued::Authorize { index, stream } => {
                    !self.call_is(index, stream, Phase::Authorizing)
                }
                _ => false,
            };
            if !stale {
                break e;
            }
        };
        Some(match e {
            Queued::Request { index, .. } => {
                let call = self.calls[index].as_ref()?;
                self.lent = Some(index);
                let bytes = self.store.bytes(&call.buf);
                let (ms, me) = call.method;
                let params = call.params_at().map_or(&[][..], |r| &bytes[r]);
                ServerEvent::Request {
                    call: CallId {
                        index: index as u16,
                        stream: call.stream,
                    },
                    request: Request {
                        method: &bytes[ms..me],
                        id: &bytes[call.id_at()],
                        params,
                        meta: RequestMeta::read(Some(params)).ok()?,
                        headers: HeaderList::from_bytes(&bytes[..call.headers_len]),
                        deadline: call.deadline,
                        principal: call.principal_at().map(|r| &bytes[r]),
                    },
                }
            }
            Queued::Authorize { index, .. } => {
                let call = self.calls[index].as_ref()?;
                self.lent = Some(index);
                let bytes = self.store.bytes(&call.buf);
                ServerEvent::Authorize {
                    call: CallId {
                        index: index as u16,
                        stream: call.stream,
                    },
                    authorization: HeaderList::from_bytes(&bytes[..call.headers_len])
                        .get(b"authorization"),
                }
            }
            Queued::Cancelled { call, reason } => ServerEvent::Cancelled { call, reason },
            Queued::Writable { call } => ServerEvent::Writable { call },
            Queued::ConnectionClosed { error } => ServerEvent::ConnectionClosed { error },
        })
    }

    fn call_is(&self, index: usize, stream: StreamRef, phase: Phase) -> bool {
        self.calls
            .get(index)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.stream == stream && c.phase == phase)
    }

    // ------------------------------------------------------------------
    // Answers from the application
    // ------------------------------------------------------------------

    /// Answers the request with `result` (a JSON object) and ends the call
    /// with `grpc-status: 0`.
    pub fn respond(&mut self, call: CallId, result: &[u8]) -> Result<(), SendError> {
        let i = self.ready_for_output(call)?;
        self.write_message(i, |w, id| {
            w.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
                .raw(id)
                .raw(b",\"result\":")
                .raw(result)
                .raw(b"}");
        })?;
        self.finish(i);
        Ok(())
    }

    /// Answers the request with a JSON-RPC error (an ordinary error
    /// message, then `grpc-status: 0`: the binding's rule for errors inside
    /// a running handler). `data` is raw JSON.
    pub fn respond_error(
        &mut self,
        call: CallId,
        code: i32,
        message: &str,
        data: Option<&[u8]>,
    ) -> Result<(), SendError> {
        let i = self.ready_for_output(call)?;
        self.write_message(i, |w, id| {
            write_error_response(w, id, code, message.as_bytes(), data)
        })?;
        self.finish(i);
        Ok(())
    }

    /// Sends a notification on the call's stream (progress, listen events):
    /// `{"jsonrpc":"2.0","method":method,"params":params}`.
    pub fn notify(&mut self, call: CallId, method: &str, params: &[u8]) -> Result<(), SendError> {
        let i = self.ready_for_output(call)?;
        self.write_message(i, |w, _| {
            w.raw(b"{\"jsonrpc\":\"2.0\",\"method\":")
                .string(method.as_bytes())
                .raw(b",\"params\":")
                .raw(params)
                .raw(b"}");
        })?;
        self.flush(i);
        Ok(())
    }

    fn ready_for_output(&mut self, call: CallId) -> Result<usize, SendError> {
        let i = usize::from(call.index);
        let c = self
            .calls
            .get_mut(i)
            .and_then(Option::as_mut)
            .ok_or(SendError::Gone)?;
        if c.stream != call.stream || c.phase != Phase::Handler {
            return Err(SendError::Gone);
        }
        if c.out_pos < c.out_end {
            c.wants_writable = true;
            return Err(SendError::Busy);
        }
        Ok(i)
    }

    /// Writes one JSON-RPC message, framed, into the call's buffer (grown
    /// to fit when the store can) and starts sending it.
    fn write_message<F>(&mut self, i: usize, body: F) -> Result<(), SendError>
    where
        F: Fn(&mut JsonWriter<'_>, &[u8]),
    {
        let Some(c) = self.calls[i].as_mut() else {
            return Err(SendError::Gone);
        };
        let mut room = c.body + FRAMING;
        let mut tries = 0;
        let len = loop {
            if !self.store.grow(&mut c.buf, room) {
                return Err(SendError::TooLarge {
                    needed: room - c.body,
                });
            }
            let id_at = c.id_at();
            let bytes = self.store.bytes_mut(&mut c.buf);
            let (before, out) = bytes.split_at_mut(c.body);
            let (_, rest) = out.split_at_mut(FRAMING);
            let mut w = JsonWriter::new(rest);
            body(&mut w, &before[id_at]);
            match w.finish() {
                Ok(text) => break text.len(),
                // A second overflow cannot happen with the same body; give
                // up rather than loop.
                Err(e) if tries == 0 => {
                    tries += 1;
                    room = c.body + FRAMING + e.needed;
                }
                Err(e) => {
                    return Err(SendError::TooLarge {
                        needed: e.needed + FRAMING,
                    });
                }
            }
        };
        let bytes = self.store.bytes_mut(&mut c.buf);
        let start = frame_message(&mut bytes[c.body..c.body + FRAMING], len);
        c.out_pos = c.body + start;
        c.out_end = c.body + FRAMING + len;
        self.flush(i);
        Ok(())
    }

    /// Marks the call's answer complete: trailers follow the last message.
    fn finish(&mut self, i: usize) {
        if let Some(c) = self.calls[i].as_mut() {
            c.phase = Phase::Finishing;
        }
        self.flush(i);
    }

    /// Sends what the call has pending: the response head, the message,
    /// and once the answer is complete, the trailers.
    fn flush(&mut self, i: usize) {
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        let stream = c.stream;
        if !c.head_sent {
            let head = [
                Field::new(b":status", b"200"),
                Field::new(b"content-type", b"application/grpc+proto"),
            ];
            match self.conn.send_headers(stream, head, false) {
                Ok(()) => c.head_sent = true,
                Err(h2::StreamError::TransmitFull) => return,
                Err(_) => {
                    self.drop_call(i);
                    return;
                }
            }
        }
        while c.out_pos < c.out_end {
            let bytes = self.store.bytes(&c.buf);
            match self
                .conn
                .send_data(stream, &bytes[c.out_pos..c.out_end], false)
            {
                Ok(0) => return,
                Ok(n) => c.out_pos += n,
                Err(_) => {
                    self.drop_call(i);
                    return;
                }
            }
        }
        let writable = core::mem::replace(&mut c.wants_writable, false);
        let finishing = c.phase == Phase::Finishing;
        if writable {
            let call = CallId {
                index: i as u16,
                stream,
            };
            self.push(Queued::Writable { call });
        }
        if finishing {
            let trailers = [Field::new(b"grpc-status", b"0")];
            match self.conn.send_headers(stream, trailers, true) {
                Ok(()) => {
                    self.remove(i);
                }
                Err(h2::StreamError::TransmitFull) => {}
                Err(_) => self.drop_call(i),
            }
        }
    }

    // ------------------------------------------------------------------
    // The connection's events
    // ------------------------------------------------------------------

    fn drain_connection(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                Event::Headers {
                    stream,
                    kind: HeadersKind::Request,
                    fields,
                    end_stream,
                } => {
                    // Judge the head and copy what the call keeps, then
                    // act without the borrow.
                    let admission = admit(&mut self.store, &self.config, fields);
                    self.on_request_head(stream, admission, end_stream);
                }
                Event::Headers { .. } => {}
                Event::Reset { stream, .. } => self.on_stream_gone(stream, true),
                Event::Closed { stream } => self.on_stream_gone(stream, false),
                Event::SendReady { stream } => {
                    if let Some(i) = self.index_of(stream) {
                        self.flush(i);
                    }
                }
                Event::ConnectionClosed { error } => {
                    for i in 0..self.calls.len() {
                        if let Some((stream, Phase::Handler)) = self.remove(i) {
                            let call = CallId {
                                index: i as u16,
                                stream,
                            };
                            self.push(Queued::Cancelled {
                                call,
                                reason: CancelReason::ConnectionClosed,
                            });
                        }
                    }
                    self.closed = true;
                    self.push(Queued::ConnectionClosed { error });
                }
                Event::StreamsAvailable | Event::GoAway { .. } | Event::PingAck { .. } => {}
            }
        }
    }

    fn index_of(&self, stream: StreamRef) -> Option<usize> {
        self.calls
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.stream == stream))
    }

    fn on_stream_gone(&mut self, stream: StreamRef, reset: bool) {
        let Some(i) = self.index_of(stream) else {
            return;
        };
        if let Some((_, Phase::Handler)) = self.remove(i)
            && reset
        {
            let call = CallId {
                index: i as u16,
                stream,
            };
            self.push(Queued::Cancelled {
                call,
                reason: CancelReason::Reset,
            });
        }
    }

    fn on_request_head(
        &mut self,
        stream: StreamRef,
        admission: Admission<S::Buf>,
        end_stream: bool,
    ) {
        let (buf, headers_len, timeout) = match admission {
            Admission::Accepted {
                buf,
                headers_len,
                timeout,
            } => (buf, headers_len, timeout),
            Admission::Http(status) => return self.http_error(stream, status),
            Admission::Status(code, message) => return self.status_only(stream, code, message),
            // No buffer now: not processed, so the client may retry it.
            Admission::Refused => {
                let _ = self.conn.reset(stream, ErrorCode::REFUSED_STREAM);
                return;
            }
        };
        let free = self.calls.iter().position(Option::is_none).or_else(|| {
            let n = self.calls.len();
            self.calls.grow_to(n + 1).then_some(n)
        });
        let Some(i) = free else {
            self.store.put(buf);
            return self.status_only(stream, Code::ResourceExhausted, b"too many calls");
        };
        let authorizing = self.config.authorize;
        let principal_room = if authorizing { MAX_PRINCIPAL } else { 0 };
        self.calls[i] = Some(Call {
            stream,
            phase: if authorizing {
                Phase::Authorizing
            } else {
                Phase::Body
            },
            decoder: MessageDecoder::new(self.config.max_message_bytes),
            buf,
            headers_len,
            id_len: 0,
            principal_len: None,
            body: headers_len + MAX_ID + principal_room,
            message_len: None,
            deadline: Some(self.now + timeout.unwrap_or(self.config.request_timeout)),
            method: (0, 0),
            params: (0, 0),
            head_sent: false,
            out_pos: 0,
            out_end: 0,
            wants_writable: false,
            ended: end_stream,
        });
        if authorizing {
            self.push(Queued::Authorize { index: i, stream });
        } else if end_stream {
            self.dispatch(i);
        }
    }

    fn on_data(&mut self, stream: StreamRef, mut bytes: &[u8], end_stream: bool) {
        // The octets are copied below (or dropped): return them at once.
        self.conn.release_data(stream, bytes.len());
        let Some(i) = self.index_of(stream) else {
            return;
        };
        loop {
            let Some(c) = self.calls[i].as_mut() else {
                return;
            };
            if !matches!(c.phase, Phase::Body | Phase::Authorizing) || bytes.is_empty() {
                break;
            }
            if c.message_len.is_some() {
                return self.end_with_error(
                    i,
                    RpcError::new(INVALID_REQUEST, "a call carries one request message"),
                );
            }
            // The prefix names the message's length: grow the buffer to it
            // before collecting the message.
            let (used, len) = match c.decoder.feed_prefix(bytes) {
                Ok(r) => r,
                Err(e) => return self.end_with_status(i, e.code(), e.message().as_bytes()),
            };
            bytes = &bytes[used..];
            let Some(len) = len else {
                break;
            };
            if !self.store.grow(&mut c.buf, c.body + len) {
                return self.end_with_status(
                    i,
                    Code::ResourceExhausted,
                    b"message larger than the call buffer",
                );
            }
            let body = c.body;
            let out = &mut self.store.bytes_mut(&mut c.buf)[body..body + len];
            let (used, done) = match c.decoder.feed(bytes, out) {
                Ok(r) => r,
                Err(e) => return self.end_with_status(i, e.code(), e.message().as_bytes()),
            };
            bytes = &bytes[used..];
            if let Some(len) = done {
                c.message_len = Some(len);
            }
        }
        if end_stream {
            match self.calls[i].as_mut() {
                Some(c) if c.phase == Phase::Authorizing => c.ended = true,
                _ => self.dispatch(i),
            }
        }
    }

    /// Accepts a call's credentials; `principal` is shown to its handler.
    pub fn authorized(&mut self, call: CallId, principal: Option<&str>) {
        let i = usize::from(call.index);
        let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        if c.stream != call.stream || c.phase != Phase::Authorizing {
            return;
        }
        c.phase = Phase::Body;
        if let Some(p) = principal
            .map(str::as_bytes)
            .filter(|p| p.len() <= MAX_PRINCIPAL)
        {
            let start = c.headers_len + MAX_ID;
            self.store.bytes_mut(&mut c.buf)[start..start + p.len()].copy_from_slice(p);
            c.principal_len = Some(p.len());
        }
        if c.ended {
            self.dispatch(i);
        }
    }

    /// Refuses a call's credentials: it ends with `code` (UNAUTHENTICATED or
    /// PERMISSION_DENIED) and a `www-authenticate` trailer, before anything
    /// else is answered.
    pub fn unauthorized(
        &mut self,
        call: CallId,
        code: Code,
        message: &str,
        www_authenticate: &str,
    ) {
        let i = usize::from(call.index);
        let Some(c) = self.calls.get(i).and_then(Option::as_ref) else {
            return;
        };
        if c.stream != call.stream || c.phase != Phase::Authorizing {
            return;
        }
        let stream = c.stream;
        self.remove(i);
        let mut enc = [0u8; 3 * 128];
        let text = &message.as_bytes()[..message.len().min(128)];
        let n = percent::encode(text, &mut enc).unwrap_or(0);
        let fields = [
            Field::new(b":status", b"200"),
            Field::new(b"content-type", b"application/grpc+proto"),
            Field::new(b"grpc-status", code.as_bytes()),
            Field::new(b"grpc-message", &enc[..n]),
            Field::new(b"www-authenticate", www_authenticate.as_bytes()),
        ];
        let _ = self.conn.send_headers(stream, fields, true);
        self.drain_connection();
    }

    // ------------------------------------------------------------------
    // The request
    // ------------------------------------------------------------------

    /// The request ended: check it and route it.
    fn dispatch(&mut self, i: usize) {
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        if c.phase != Phase::Body {
            return;
        }
        if let Err(e) = c.decoder.finish() {
            return self.end_with_status(i, e.code(), e.message().as_bytes());
        }
        let Some(len) = c.message_len else {
            return self.end_with_error(
                i,
                RpcError::new(INVALID_REQUEST, "the call carries no request message"),
            );
        };
        let bytes = self.store.bytes_mut(&mut c.buf);
        let Ok(json) = JsonRpcMessage::decode(&bytes[c.body..c.body + len]) else {
            return self.end_with_error(i, RpcError::new(PARSE_ERROR, "malformed JsonRpcMessage"));
        };
        let (id, method, params) = match Message::parse(json, MAX_DEPTH) {
            Err(e) => return self.end_with_error(i, e),
            // A notification gets an empty stream and status 0.
            Ok(Message::Notification { .. }) => return self.end_with_status(i, Code::Ok, b""),
            Ok(Message::Response { .. } | Message::Error { .. }) => {
                return self.end_with_error(
                    i,
                    RpcError::new(INVALID_REQUEST, "a server takes requests, not responses"),
                );
            }
            Ok(Message::Request { id, method, params }) => (id, method, params),
        };
        if id.len() > MAX_ID {
            return self.end_with_error(i, RpcError::new(INVALID_REQUEST, "id too long"));
        }
        // Where the parts lie, as offsets into the buffer (the slices
        // borrow it).
        let base = bytes.as_ptr() as usize;
        let offset = |s: &[u8]| {
            (
                s.as_ptr() as usize - base,
                s.as_ptr() as usize - base + s.len(),
            )
        };
        let id_at = offset(id);
        let method_at = json::str_plain(method).map(offset);
        let params_at = params.map(offset);
        bytes.copy_within(id_at.0..id_at.1, c.headers_len);
        c.id_len = id_at.1 - id_at.0;
        let Some(method_at) = method_at else {
            return self.answer_error(i, RpcError::new(METHOD_NOT_FOUND, "Method not found"), None);
        };
        c.method = method_at;
        c.params = params_at.unwrap_or((0, 0));
        if let Err(e) = self.check_request(i) {
            return match e.code {
                HEADER_MISMATCH | UNSUPPORTED_PROTOCOL_VERSION => self.end_with_error(i, e),
                _ => self.answer_error(i, e, None),
            };
        }
        self.route(i);
    }

    /// `_meta`, protocol version and the mirrored headers (MCP §5.6 order).
    fn check_request(&mut self, i: usize) -> Result<(), RpcError> {
        let Some(c) = self.calls[i].as_ref() else {
            return Ok(());
        };
        let bytes = self.store.bytes(&c.buf);
        let (ms, me) = c.method;
        let method = &bytes[ms..me];
        let params = c.params_at().map(|r| &bytes[r]);
        let meta = RequestMeta::read(params)?;
        let headers = HeaderList::from_bytes(&bytes[..c.headers_len]);
        let mut scratch = [0u8; 512];
        // A version header that differs from the body is a mismatch before
        // the version is judged.
        if let Some(h) = headers.get(b"mcp-protocol-version") {
            let (a, b) = scratch.split_at_mut(256);
            let decoded = mirror::decode_value(h, a)?;
            if json::unescape(meta.protocol_version, b) != Some(decoded) {
                return Err(RpcError::new(
                    HEADER_MISMATCH,
                    "mcp-protocol-version differs from the body",
                ));
            }
        }
        if !meta.version_supported() {
            return Err(RpcError::new(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
            ));
        }
        let is_tool_call = method == b"tools/call";
        let (name, arguments) = match (mirror::name_member(method), params) {
            (Some(member), Some(p)) => {
                let [name, arguments] = json::get_all(p, [member, b"arguments"]);
                (name, arguments.filter(|_| is_tool_call))
            }
            _ => (None, None),
        };
        let tool = is_tool_call
            .then(|| name.and_then(|n| self.registry.tool(n)))
            .flatten();
        // Most schemas have no annotation: skip the walk for them (an
        // escaped key would hide from the byte search, so a schema with a
        // backslash is walked).
        let annotations = tool
            .map(|t| t.input_schema.as_bytes())
            .filter(|schema| contains(schema, b"x-mcp-header") || schema.contains(&b'\\'))
            .and_then(|schema| Annotations::<'_, MAX_ANNOTATIONS>::collect(schema).ok());
        let body = Mirrored {
            protocol_version: meta.protocol_version,
            method: json::trim(&bytes[ms - 1..me + 1]),
            name,
            arguments,
        };
        mirror::check(&body, headers, annotations.as_ref(), &mut scratch)
    }

    fn route(&mut self, i: usize) {
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        let bytes = self.store.bytes(&c.buf);
        let (ms, me) = c.method;
        let mut m = [0u8; 32];
        let n = (me - ms).min(32);
        m[..n].copy_from_slice(&bytes[ms..ms + n]);
        let method = &m[..n];
        let registry = self.registry;
        let listen = method == b"subscriptions/listen";
        if listen {
            // A listen stream has no default timeout.
            let explicit = HeaderList::from_bytes(&bytes[..c.headers_len])
                .get(b"grpc-timeout")
                .is_some();
            if !explicit {
                c.deadline = None;
            }
        }
        c.phase = Phase::Handler;
        let resources = !registry.resources.is_empty() || !registry.templates.is_empty();
        let builtin = match method {
            b"server/discover" => Some(Builtin::Discover),
            b"tools/list" if !registry.tools.is_empty() => Some(Builtin::Tools),
            b"resources/list" if resources => Some(Builtin::Resources),
            b"resources/templates/list" if resources => Some(Builtin::Templates),
            b"prompts/list" if !registry.prompts.is_empty() => Some(Builtin::Prompts),
            _ => None,
        };
        if let Some(builtin) = builtin {
            let result = self.write_message(i, |w, id| {
                w.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
                    .raw(id)
                    .raw(b",\"result\":");
                match builtin {
                    Builtin::Discover => registry.write_discover(w, SUPPORTED_VERSIONS),
                    Builtin::Tools => registry.write_tools_list(w),
                    Builtin::Resources => registry.write_resources_list(w),
                    Builtin::Templates => registry.write_templates_list(w),
                    Builtin::Prompts => registry.write_prompts_list(w),
                }
                w.raw(b"}");
            });
            if result.is_err() {
                return self.answer_error(
                    i,
                    RpcError::new(
                        super::error::INTERNAL_ERROR,
                        "result larger than the call buffer",
                    ),
                    None,
                );
            }
            return self.finish(i);
        }
        let handled = match method {
            b"tools/call" => {
                let known = self
                    .params(i)
                    .and_then(|p| json::get(p, b"name"))
                    .is_some_and(|n| registry.tool(n).is_some());
                if !known {
                    return self.answer_error(
                        i,
                        RpcError::new(INVALID_PARAMS, "Unknown tool"),
                        None,
                    );
                }
                true
            }
            b"resources/read" => !registry.resources.is_empty() || !registry.templates.is_empty(),
            b"prompts/get" => !registry.prompts.is_empty(),
            b"completion/complete" => registry.completions,
            b"subscriptions/listen" => true,
            _ => false,
        };
        if !handled {
            return self.answer_error(i, RpcError::new(METHOD_NOT_FOUND, "Method not found"), None);
        }
        let Some(stream) = self.calls[i].as_ref().map(|c| c.stream) else {
            return;
        };
        self.push(Queued::Request { index: i, stream });
    }

    /// An in-band JSON-RPC error, then status 0.
    fn answer_error(&mut self, i: usize, e: RpcError, data: Option<&[u8]>) {
        if let Some(c) = self.calls[i].as_mut() {
            c.phase = Phase::Handler;
        }
        let sent = self.write_message(i, |w, id| {
            write_error_response(w, id, e.code, e.message.as_bytes(), data)
        });
        if sent.is_ok() {
            self.finish(i);
        } else {
            self.drop_call(i);
        }
    }

    // ------------------------------------------------------------------
    // Ending calls
    // ------------------------------------------------------------------

    /// Ends a call with a JSON-RPC error in headers-only trailers.
    fn end_with_error(&mut self, i: usize, e: RpcError) {
        // -32022 names what is served and what was asked (§4).
        let mut data_buf = [0u8; 192];
        let data = match e.code {
            UNSUPPORTED_PROTOCOL_VERSION => {
                let requested = self
                    .params(i)
                    .and_then(|p| RequestMeta::read(Some(p)).ok())
                    .map(|m| m.protocol_version)
                    .filter(|v| v.len() <= 128);
                let mut w = JsonWriter::new(&mut data_buf);
                w.raw(b"{\"supported\":[\"2026-07-28\"]");
                if let Some(v) = requested {
                    w.raw(b",\"requested\":").raw(v);
                }
                w.raw(b"}");
                w.finish().ok()
            }
            _ => None,
        };
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        let stream = c.stream;
        // The call buffer holds the trailer values: the error response
        // JSON, its base64, and the percent-encoded message. What does not
        // fit is left out (`mcp-error-bin`) or cut (`grpc-message`).
        let _ = self.store.grow(&mut c.buf, c.body + ERROR_ROOM);
        let id_at = c.id_at();
        let bytes = self.store.bytes_mut(&mut c.buf);
        let (before, buf) = bytes.split_at_mut(c.body);
        let id_raw: &[u8] = if id_at.is_empty() {
            b"null"
        } else {
            &before[id_at]
        };
        let (json_part, rest) = buf.split_at_mut(buf.len() / 4);
        let (bin_part, msg_part) = rest.split_at_mut(rest.len() * 2 / 3);
        let mut w = JsonWriter::new(json_part);
        write_error_response(&mut w, id_raw, e.code, e.message.as_bytes(), data);
        let bin = match w.finish() {
            Ok(text) => match base64::encode(text, bin_part) {
                Some(n) if n <= MAX_ERROR_BIN => Some(n),
                _ => None,
            },
            Err(_) => None,
        };
        let message = &e.message.as_bytes()[..e.message.len().min(MAX_GRPC_MESSAGE)];
        let msg_len = percent_cut(message, msg_part);
        let mut code_text = [0u8; 12];
        let code_len = write_int(&mut code_text, i64::from(e.code));
        let status = e.grpc_code();
        let mut fields = [
            Field::new(b":status", b"200"),
            Field::new(b"content-type", b"application/grpc+proto"),
            Field::new(b"grpc-status", status.as_bytes()),
            Field::new(b"grpc-message", &msg_part[..msg_len]),
            Field::new(b"mcp-error-code", &code_text[..code_len]),
            Field::new(b"mcp-error-bin", b""),
        ];
        let count = match bin {
            Some(n) => {
                fields[5] = Field::new(b"mcp-error-bin", &bin_part[..n]);
                6
            }
            None => 5,
        };
        let _ = self
            .conn
            .send_headers(stream, fields[..count].iter().copied(), true);
        self.remove(i);
    }

    /// Ends a call with a status and no message (trailers-only, or
    /// trailers after the response head).
    fn end_with_status(&mut self, i: usize, code: Code, message: &[u8]) {
        let Some(c) = self.calls[i].as_ref() else {
            return;
        };
        let stream = c.stream;
        let head_sent = c.head_sent;
        let mid_message = c.out_pos < c.out_end;
        self.remove(i);
        if mid_message {
            // Trailers cannot cut a message: stop the stream instead.
            let _ = self.conn.reset(stream, ErrorCode::CANCEL);
            return;
        }
        if head_sent {
            let mut enc = [0u8; 3 * 64];
            let n = percent::encode(&message[..message.len().min(64)], &mut enc).unwrap_or(0);
            let trailers = [
                Field::new(b"grpc-status", code.as_bytes()),
                Field::new(b"grpc-message", &enc[..n]),
            ];
            let count = if n == 0 { 1 } else { 2 };
            let _ = self
                .conn
                .send_headers(stream, trailers[..count].iter().copied(), true);
        } else {
            self.status_only(stream, code, message);
        }
    }

    fn status_only(&mut self, stream: StreamRef, code: Code, message: &[u8]) {
        let mut enc = [0u8; 3 * 128];
        let n = percent::encode(&message[..message.len().min(128)], &mut enc).unwrap_or(0);
        let fields = [
            Field::new(b":status", b"200"),
            Field::new(b"content-type", b"application/grpc+proto"),
            Field::new(b"grpc-status", code.as_bytes()),
            Field::new(b"grpc-message", &enc[..n]),
        ];
        let count = if n == 0 { 3 } else { 4 };
        let _ = self
            .conn
            .send_headers(stream, fields[..count].iter().copied(), true);
    }

    fn http_error(&mut self, stream: StreamRef, status: u16) {
        let text: &[u8] = match status {
            405 => b"405",
            415 => b"415",
            _ => b"400",
        };
        let _ = self
            .conn
            .send_headers(stream, [Field::new(b":status", text)], true);
    }

    /// Forgets a call whose stream is gone.
    fn drop_call(&mut self, i: usize) {
        if let Some((stream, _)) = self.remove(i) {
            let _ = self.conn.reset(stream, ErrorCode::INTERNAL_ERROR);
        }
    }

    /// Ends a call's life in the engine: its buffer goes back to the store.
    fn remove(&mut self, i: usize) -> Option<(StreamRef, Phase)> {
        let c = self.calls[i].take()?;
        if self.lent == Some(i) {
            self.lent = None;
        }
        self.store.put(c.buf);
        Some((c.stream, c.phase))
    }

    /// The raw `params` of a parsed request.
    fn params(&self, i: usize) -> Option<&[u8]> {
        let c = self.calls[i].as_ref()?;
        c.params_at().map(|r| &self.store.bytes(&c.buf)[r])
    }

    fn push(&mut self, e: Queued) {
        let _ = self.events.push(e);
    }
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What the engine does with a request head.
enum Admission<B> {
    /// Answer with this HTTP status.
    Http(u16),
    /// Answer with this gRPC status, trailers-only.
    Status(Code, &'static [u8]),
    /// No call buffer now: RST_STREAM(REFUSED_STREAM).
    Refused,
    /// A call: the head's octets are at the start of `buf`.
    Accepted {
        buf: B,
        headers_len: usize,
        timeout: Option<Duration>,
    },
}

/// Checks a request head (method, content type, encoding, path) and gives
/// an accepted call its buffer, holding the head.
fn admit<S: CallStore>(
    store: &mut S,
    config: &EngineConfig,
    fields: HeaderList<'_>,
) -> Admission<S::Buf> {
    let head = match RequestHead::parse(fields) {
        Ok(head) => head,
        Err(HeadError::Http(status)) => return Admission::Http(status),
        Err(HeadError::Grpc(code, message)) => return Admission::Status(code, message.as_bytes()),
    };
    if head.path != TUNNEL_PATH {
        return Admission::Status(Code::Unimplemented, b"unknown method");
    }
    let raw = fields.as_bytes();
    let principal_room = if config.authorize { MAX_PRINCIPAL } else { 0 };
    // The head, the id, the principal, and room for a small request.
    let want = raw.len() + MAX_ID + principal_room;
    if want > store.max_len() {
        return Admission::Status(Code::ResourceExhausted, b"request headers too large");
    }
    let Some(mut buf) = store.take(want) else {
        return Admission::Refused;
    };
    store.bytes_mut(&mut buf)[..raw.len()].copy_from_slice(raw);
    Admission::Accepted {
        buf,
        headers_len: raw.len(),
        timeout: head.timeout,
    }
}

/// Percent-encodes as much of `text` as surely fits in `out` (three octets
/// each), cut at a character boundary; returns the length.
fn percent_cut(text: &[u8], out: &mut [u8]) -> usize {
    let mut take = text.len().min(out.len() / 3);
    while take > 0 && take < text.len() && text[take] & 0xC0 == 0x80 {
        take -= 1;
    }
    percent::encode(&text[..take], out).unwrap_or(0)
}

/// Writes the gRPC prefix and the protobuf header of a `JsonRpcMessage`
/// whose JSON of `len` octets follows `head`; returns where they start.
fn frame_message(head: &mut [u8], len: usize) -> usize {
    let proto_len = JsonRpcMessage::prefix_len(len);
    let prefix = grpc::write_prefix((proto_len + len) as u32);
    let start = head.len() - proto_len - prefix.len();
    head[start..start + prefix.len()].copy_from_slice(&prefix);
    // `head` has room for the longest protobuf header (FRAMING).
    let _ = JsonRpcMessage::encode_prefix(len, &mut head[start + prefix.len()..]);
    start
}

fn write_error_response(
    w: &mut JsonWriter<'_>,
    id: &[u8],
    code: i32,
    message: &[u8],
    data: Option<&[u8]>,
) {
    w.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
        .raw(id)
        .raw(b",\"error\":{\"code\":")
        .int(i64::from(code));
    w.raw(b",\"message\":").string(message);
    if let Some(d) = data {
        w.raw(b",\"data\":").raw(d);
    }
    w.raw(b"}}");
}

fn write_int(out: &mut [u8; 12], v: i64) -> usize {
    let mut w = JsonWriter::new(out);
    w.int(v);
    w.len()
}
