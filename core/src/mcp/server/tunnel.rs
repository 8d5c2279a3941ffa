//! The gRPC tunnel binding of the server engine
//! (`/mcp.zig.transport.v1.Mcp/Call`), sans-IO, over an HTTP/2 connection.
//!
//! One call carries one JSON-RPC request. The binding checks the call's
//! head (method, content type, encoding, path), collects the request
//! message, and hands it to the transport-free half ([`dispatch`]) for
//! every MCP decision; it maps the outcome to the wire:
//!
//! - errors found before a handler runs (-32700, -32600, -32020, -32022)
//!   end the call with a headers-only response whose trailers carry
//!   `grpc-status`, `grpc-message`, `mcp-error-code` and `mcp-error-bin`
//!   (typed binding §9.2);
//! - other JSON-RPC errors travel as an ordinary error response message
//!   followed by `grpc-status: 0`;
//! - results and notifications are `JsonRpcMessage`s on the stream, the
//!   last one followed by `grpc-status: 0`.
//!
//! # Run loop
//!
//! After any input (`recv`, `recv_eof`, `handle_timeout`, `go_away`, an
//! answer or `publish`), drain [`Server::poll_event`], then
//! [`Server::poll_transmit`] while [`Server::wants_transmit`], then sleep
//! until input or [`Server::poll_timeout`]. `recv` may consume less than it
//! was given: feed the rest after draining (see [`crate::drive`]).

use super::dispatch::{self, Builtin, Level, Route};
use super::listen::{self, Filter, ListChange};
use super::request::{Handler, Request};
use super::{CallId, CancelReason, Failure, SendError, ServerConfig, ServerEvent};
use crate::grpc::{self, Code, HeadError, MessageDecoder, RequestHead, base64, response};
use crate::h2::{
    self, Connection, ErrorCode, Event, HeaderList, HeadersKind, InlineStorage, Storage, StreamRef,
};
use crate::hpack::Field;
use crate::mcp::auth::{self, Decision, MAX_PRINCIPAL};
use crate::mcp::envelope::{self, RequestSpans, Spans};
use crate::mcp::error::{INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RpcError};
use crate::mcp::json;
use crate::mcp::meta::RequestMeta;
use crate::mcp::registry::Registry;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;
use crate::records::{Queue, Records};
use crate::time::Instant;
use mcpwire_proto::tunnel::{self, JsonRpcMessage};

/// The path of the tunnel method.
pub const TUNNEL_PATH: &[u8] = tunnel::CALL_PATH.as_bytes();

/// Remembered reset streams of the connection (the binding's figure, the
/// same on the client).
pub const RESETS: usize = 64;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the application to accept the call's credentials,
    /// while the request message is collected.
    Authorizing,
    /// Collecting the request message.
    Body,
    /// The application holds the request.
    Handler,
    /// A `subscriptions/listen` stream the engine keeps.
    Listening,
    /// Writing the last message; trailers follow.
    Finishing,
}

/// A listen stream's state.
#[derive(Debug, Clone, Copy)]
struct Listen {
    filter: Filter,
    /// The honoured `resourceSubscriptions` array, in the call buffer.
    subscriptions: (usize, usize),
    /// List changes announced while a message was being written (bit per
    /// [`ListChange`] without a payload); sent once the stream is free.
    owed: u8,
    /// The server ends the stream once the stream is free.
    ending: bool,
}

const EVENTS: usize = 32;

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
    /// Where the request's params lie in the buffer once parsed.
    params: Option<(usize, usize)>,
    handler: Option<Handler>,
    listen: Option<Listen>,
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
        self.params.map(|(a, b)| a..b)
    }

    fn writing(&self) -> bool {
        self.out_pos < self.out_end
    }
}

/// The tunnel server over one connection. The generics follow
/// [`h2::Connection`]'s order: `STREAMS` concurrent calls, the HPACK
/// `TABLE` size and the frame buffer size `BUF`, then the [`CallStore`] `S`
/// that gives each call its buffer while it lasts (which bounds a request
/// and each message of its response) and the [`Storage`] `FB` of the
/// connection's buffers and records (inline by default; see
/// [`h2::storage`]). The connection remembers [`RESETS`] reset streams.
pub struct Server<
    'r,
    S: CallStore,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    FB: Storage<BUF> = InlineStorage<BUF>,
> {
    conn: Connection<STREAMS, TABLE, BUF, RESETS, FB>,
    calls: FB::Records<Option<Call<S::Buf>>, STREAMS>,
    store: S,
    registry: Registry<'r>,
    config: ServerConfig,
    now: Instant,
    events: Queue<ServerEvent, FB::Records<Option<ServerEvent>, EVENTS>>,
}

impl<S: CallStore, const STREAMS: usize, const TABLE: usize, const BUF: usize, FB: Storage<BUF>>
    core::fmt::Debug for Server<'_, S, STREAMS, TABLE, BUF, FB>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Server")
            .field("conn", &self.conn)
            .field("calls", &self.calls.iter().filter(|c| c.is_some()).count())
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
> Server<'r, S, STREAMS, TABLE, BUF, FB>
{
    /// A server engine for one accepted connection, whose calls take their
    /// buffers from `store`.
    pub fn new(registry: Registry<'r>, config: ServerConfig, store: S, now: Instant) -> Self {
        Self {
            conn: Connection::new(h2::Role::Server, config.h2, now),
            calls: Default::default(),
            store,
            registry,
            config,
            now,
            events: Queue::default(),
        }
    }

    /// The call store, for its state.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The HTTP/2 connection, for its state and windows.
    pub fn connection(&self) -> &Connection<STREAMS, TABLE, BUF, RESETS, FB> {
        &self.conn
    }

    /// What the server offers.
    pub fn registry(&self) -> &Registry<'r> {
        &self.registry
    }

    /// Whether the connection is over and all output was taken.
    pub fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    /// Feeds received octets; returns how many were consumed. Call again
    /// with the rest after draining events and transmitting (see the module
    /// docs).
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        self.now = now;
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
        self.conn.recv_eof();
        self.drain_connection();
    }

    /// Starts a graceful shutdown: GOAWAY(NO_ERROR) and the final result
    /// on every listen stream; calls in progress finish, new ones are
    /// refused, and the connection closes after the last.
    pub fn go_away(&mut self) {
        self.conn.go_away(ErrorCode::NO_ERROR);
        for i in 0..self.calls.len() {
            if let Some(l) = self.calls[i].as_mut().and_then(|c| c.listen.as_mut()) {
                l.ending = true;
                self.flush(i);
            }
        }
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
        self.conn.handle_timeout(now);
        for i in 0..self.calls.len() {
            let Some(call) = self.calls[i].as_ref() else {
                continue;
            };
            if call.deadline.is_some_and(|d| now >= d) {
                if call.phase == Phase::Handler {
                    let call = call_id(i, call.stream);
                    self.push(ServerEvent::Cancelled {
                        call,
                        reason: CancelReason::Deadline,
                    });
                }
                self.end_with_status(i, Code::DeadlineExceeded, b"deadline exceeded");
            }
        }
        self.drain_connection();
    }

    /// Whether [`Server::poll_transmit`] has anything to write.
    pub fn wants_transmit(&self) -> bool {
        self.conn.wants_transmit()
    }

    /// Writes pending frames into `out`; call while
    /// [`Server::wants_transmit`].
    pub fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        let n = self.conn.poll_transmit(out);
        self.drain_connection();
        n
    }

    /// The next event. A request or authorization whose call ended in the
    /// meantime (reset, deadline) is skipped.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        loop {
            let e = self.events.pop()?;
            let live = match e {
                ServerEvent::Request { call } => self.call(call, Phase::Handler).is_some(),
                ServerEvent::Authorize { call } => self.call(call, Phase::Authorizing).is_some(),
                _ => true,
            };
            if live {
                return Some(e);
            }
        }
    }

    /// The request of a call the application handles, until the next
    /// `&mut` call on the engine.
    pub fn request(&self, call: CallId) -> Option<Request<'_>> {
        let c = self.call(call, Phase::Handler)?;
        let bytes = self.store.bytes(&c.buf);
        let params = c.params_at().map_or(&b"{}"[..], |r| &bytes[r]);
        Some(Request {
            kind: c.handler?.kind(&self.registry, params),
            id: &bytes[c.id_at()],
            params,
            meta: RequestMeta::read(Some(params)).ok()?,
            headers: HeaderList::from_bytes(&bytes[..c.headers_len]),
            deadline: c.deadline,
            principal: c
                .principal_at()
                .and_then(|r| core::str::from_utf8(&bytes[r]).ok()),
        })
    }

    /// The bearer token of a call waiting for [`Server::authorize`]
    /// (`authorization: Bearer <token>`), if it carries one.
    pub fn bearer_token(&self, call: CallId) -> Option<&str> {
        let c = self.call(call, Phase::Authorizing)?;
        let bytes = self.store.bytes(&c.buf);
        auth::bearer_token(HeaderList::from_bytes(&bytes[..c.headers_len]).get(b"authorization"))
    }

    /// The application's decision on a call's credentials. An allowed call
    /// goes on, its handler sees the principal; a refused one ends at once
    /// with UNAUTHENTICATED or PERMISSION_DENIED and the RFC 6750 challenge
    /// in `www-authenticate` (see [`crate::mcp::auth`]).
    pub fn authorize(&mut self, call: CallId, decision: Decision<'_>) {
        let had_token = self.bearer_token(call).is_some();
        let Some(i) = self.call(call, Phase::Authorizing).map(|_| call.index()) else {
            return;
        };
        if let Some(refusal) = decision.refusal(had_token) {
            self.remove(i);
            let status = response::Status::new(refusal.status, refusal.message.as_bytes());
            let extra = [Field::new(
                b"www-authenticate",
                refusal.challenge.as_bytes(),
            )];
            let _ = self
                .conn
                .send_headers(call.stream, status.trailers_only(&extra), true);
            self.drain_connection();
            return;
        }
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        c.phase = Phase::Body;
        if let Decision::Allow { principal } = decision
            && principal.len() <= MAX_PRINCIPAL
        {
            let start = c.headers_len + MAX_ID;
            self.store.bytes_mut(&mut c.buf)[start..start + principal.len()]
                .copy_from_slice(principal.as_bytes());
            c.principal_len = Some(principal.len());
        }
        if c.ended {
            self.dispatch(i);
        }
        self.drain_connection();
    }

    fn call(&self, call: CallId, phase: Phase) -> Option<&Call<S::Buf>> {
        self.calls
            .get(call.index())
            .and_then(Option::as_ref)
            .filter(|c| c.stream == call.stream && c.phase == phase)
    }

    // ------------------------------------------------------------------
    // Answers from the application
    // ------------------------------------------------------------------

    /// Answers the request with `result` (a JSON object) and ends the call
    /// with `grpc-status: 0`. A result larger than the call store can hold
    /// is answered with -32603 instead (and `TooLarge` returned).
    pub fn respond(&mut self, call: CallId, result: &[u8]) -> Result<(), SendError> {
        let i = self.ready_for_output(call)?;
        let sent = self.write_message(i, |w, id, _| {
            envelope::write_result(w, id, |w| {
                w.raw(result);
            })
        });
        if let Err(SendError::TooLarge { .. }) = sent {
            self.answer_error(i, dispatch::RESULT_TOO_LARGE, None);
            return sent;
        }
        sent?;
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
        self.write_message(i, |w, id, _| {
            envelope::write_error(w, id, code, message.as_bytes(), data)
        })?;
        self.finish(i);
        Ok(())
    }

    /// Answers the request with the error the core names for a driver-side
    /// failure.
    pub fn fail(&mut self, call: CallId, failure: Failure) -> Result<(), SendError> {
        let e = failure.error();
        self.respond_error(call, e.code, e.message, None)
    }

    /// Sends a notification on the call's stream (progress):
    /// `{"jsonrpc":"2.0","method":method,"params":params}`.
    pub fn notify(&mut self, call: CallId, method: &str, params: &[u8]) -> Result<(), SendError> {
        let i = self.ready_for_output(call)?;
        self.write_message(i, |w, _, _| {
            envelope::write_notification(w, method.as_bytes(), params)
        })?;
        self.flush(i);
        Ok(())
    }

    /// Announces a change to every listen stream whose filter wants it;
    /// returns how many streams it went to. A list change announced while a
    /// stream is busy is sent once it is free (repeats fold into one); a
    /// resource update on a busy stream is dropped (the client reads the
    /// resource again on its next update).
    pub fn publish(&mut self, change: ListChange<'_>) -> usize {
        let bit = match change {
            ListChange::ToolsListChanged => 1,
            ListChange::PromptsListChanged => 2,
            ListChange::ResourcesListChanged => 4,
            ListChange::ResourceUpdated { .. } => 0,
        };
        let mut sent = 0;
        for i in 0..self.calls.len() {
            let Some(c) = self.calls[i].as_mut() else {
                continue;
            };
            let Some(l) = c.listen.as_mut().filter(|l| !l.ending) else {
                continue;
            };
            let bytes = self.store.bytes(&c.buf);
            let (a, b) = l.subscriptions;
            if !l.filter.wants(&bytes[a..b], &change) {
                continue;
            }
            if c.out_pos < c.out_end {
                l.owed |= bit;
                sent += usize::from(bit != 0);
                continue;
            }
            if self
                .write_message(i, |w, id, _| listen::write_event(w, id, &change))
                .is_ok()
            {
                sent += 1;
            }
        }
        self.drain_connection();
        sent
    }

    fn ready_for_output(&mut self, call: CallId) -> Result<usize, SendError> {
        let i = call.index();
        let c = self
            .calls
            .get_mut(i)
            .and_then(Option::as_mut)
            .filter(|c| c.stream == call.stream && c.phase == Phase::Handler)
            .ok_or(SendError::Gone)?;
        if c.writing() {
            c.wants_writable = true;
            return Err(SendError::Busy);
        }
        Ok(i)
    }

    /// Writes one JSON-RPC message, framed, into the call's buffer (grown
    /// to fit when the store can) and starts sending it. `body` gets the
    /// writer, the request's raw id and a listen stream's subscriptions.
    fn write_message<F>(&mut self, i: usize, body: F) -> Result<(), SendError>
    where
        F: Fn(&mut JsonWriter<'_>, &[u8], &[u8]),
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
            let subs_at = c
                .listen
                .map_or(0..0, |l| l.subscriptions.0..l.subscriptions.1);
            let bytes = self.store.bytes_mut(&mut c.buf);
            let (before, out) = bytes.split_at_mut(c.body);
            let (_, rest) = out.split_at_mut(FRAMING);
            let mut w = JsonWriter::new(rest);
            body(&mut w, &before[id_at], &before[subs_at]);
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
    /// a listen stream's owed events, and once the answer is complete, the
    /// trailers.
    fn flush(&mut self, i: usize) {
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        let stream = c.stream;
        if !c.head_sent {
            match self.conn.send_headers(stream, response::HEAD, false) {
                Ok(()) => c.head_sent = true,
                Err(h2::StreamError::TransmitFull) => return,
                Err(_) => return self.drop_call(i),
            }
        }
        while c.writing() {
            let bytes = self.store.bytes(&c.buf);
            match self
                .conn
                .send_data(stream, &bytes[c.out_pos..c.out_end], false)
            {
                Ok(0) => return,
                Ok(n) => c.out_pos += n,
                Err(_) => return self.drop_call(i),
            }
        }
        let writable = core::mem::replace(&mut c.wants_writable, false);
        let phase = c.phase;
        let listen = c.listen;
        if writable {
            let call = call_id(i, stream);
            self.push(ServerEvent::Writable { call });
        }
        if let Some(l) = listen {
            return self.flush_listen(i, l);
        }
        if phase == Phase::Finishing {
            match self
                .conn
                .send_headers(stream, [Field::new(b"grpc-status", b"0")], true)
            {
                Ok(()) => {
                    self.remove(i);
                }
                Err(h2::StreamError::TransmitFull) => {}
                Err(_) => self.drop_call(i),
            }
        }
    }

    /// A free listen stream: the next owed change, else its final result
    /// when the server ends it.
    fn flush_listen(&mut self, i: usize, l: Listen) {
        let owed = [
            (1, ListChange::ToolsListChanged),
            (2, ListChange::PromptsListChanged),
            (4, ListChange::ResourcesListChanged),
        ]
        .into_iter()
        .find(|(bit, _)| l.owed & bit != 0);
        if let Some((bit, change)) = owed {
            if let Some(listen) = self.calls[i].as_mut().and_then(|c| c.listen.as_mut()) {
                listen.owed &= !bit;
            }
            let _ = self.write_message(i, |w, id, _| listen::write_event(w, id, &change));
            return;
        }
        if !l.ending {
            return;
        }
        if let Some(c) = self.calls[i].as_mut() {
            c.listen = None;
        }
        let registry = self.registry;
        if self
            .write_message(i, |w, id, _| listen::write_final_result(w, id, &registry))
            .is_ok()
        {
            self.finish(i);
        } else {
            self.drop_call(i);
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
                            let call = call_id(i, stream);
                            self.push(ServerEvent::Cancelled {
                                call,
                                reason: CancelReason::ConnectionClosed,
                            });
                        }
                    }
                    self.push(ServerEvent::ConnectionClosed { error });
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
            let call = call_id(i, stream);
            self.push(ServerEvent::Cancelled {
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
            params: None,
            handler: None,
            listen: None,
            head_sent: false,
            out_pos: 0,
            out_end: 0,
            wants_writable: false,
            ended: end_stream,
        });
        if authorizing {
            let call = call_id(i, stream);
            self.push(ServerEvent::Authorize { call });
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

    // ------------------------------------------------------------------
    // The request
    // ------------------------------------------------------------------

    /// The request ended: decode it, let the transport-free half judge and
    /// route it, and act on the outcome.
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
        let body = c.body;
        let bytes = self.store.bytes_mut(&mut c.buf);
        let Ok(json) = JsonRpcMessage::decode(&bytes[body..body + len]) else {
            return self.end_with_error(i, RpcError::new(PARSE_ERROR, "malformed JsonRpcMessage"));
        };
        // The JSON's place in the buffer: the protobuf header precedes it.
        let json_at = body + json::span(&bytes[body..body + len], json).start;
        let spans = match RequestSpans::parse(json, dispatch::MAX_DEPTH) {
            Err(e) => return self.end_with_error(i, e),
            // A notification gets an empty stream and status 0.
            Ok(Spans::Notification) => return self.end_with_status(i, Code::Ok, b""),
            Ok(Spans::Response) => {
                return self.end_with_error(
                    i,
                    RpcError::new(INVALID_REQUEST, "a server takes requests, not responses"),
                );
            }
            Ok(Spans::Request(r)) => r,
        };
        let at = |r: core::ops::Range<usize>| (json_at + r.start, json_at + r.end);
        if spans.id.len() > MAX_ID {
            return self.end_with_error(i, RpcError::new(INVALID_REQUEST, "id too long"));
        }
        let (ids, ide) = at(spans.id);
        bytes.copy_within(ids..ide, c.headers_len);
        c.id_len = ide - ids;
        c.params = spans.params.map(at);
        c.phase = Phase::Handler;
        let Some(method) = spans.method.map(at) else {
            return self.answer_error(i, RpcError::new(METHOD_NOT_FOUND, "Method not found"), None);
        };
        let bytes = self.store.bytes(&c.buf);
        let method_text = &bytes[method.0..method.1];
        let method_raw = &bytes[method.0 - 1..method.1 + 1];
        let params = c.params_at().map(|r| &bytes[r]);
        let headers = HeaderList::from_bytes(&bytes[..c.headers_len]);
        if let Err(e) = dispatch::check(&self.registry, method_text, method_raw, params, &headers) {
            return match dispatch::level(&e) {
                Level::Protocol => self.end_with_error(i, e),
                Level::InBand => self.answer_error(i, e, None),
            };
        }
        match dispatch::route(&self.registry, method_text, params) {
            Route::Builtin(b) => self.answer_builtin(i, b),
            Route::Reject(e) => self.answer_error(i, e, None),
            Route::Handle(h) => {
                if let Some(c) = self.calls[i].as_mut() {
                    c.handler = Some(h.0);
                    let call = call_id(i, c.stream);
                    self.push(ServerEvent::Request { call });
                }
            }
            Route::Listen => self.start_listen(i),
        }
    }

    fn answer_builtin(&mut self, i: usize, b: Builtin) {
        let registry = self.registry;
        if self
            .write_message(i, |w, id, _| dispatch::write_builtin(&registry, b, id, w))
            .is_err()
        {
            return self.answer_error(i, dispatch::RESULT_TOO_LARGE, None);
        }
        self.finish(i);
    }

    /// A `subscriptions/listen` stream: acknowledged with the honoured
    /// filter, then kept by the engine (no default deadline).
    fn start_listen(&mut self, i: usize) {
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        let bytes = self.store.bytes_mut(&mut c.buf);
        let params = c.params.map(|(a, b)| &bytes[a..b]);
        let (filter, subs) = match Filter::honour(&self.registry, params) {
            Ok(r) => r,
            Err(e) => return self.answer_error(i, e, None),
        };
        // Keep the honoured subscriptions before the body, which outgoing
        // messages overwrite: move them to its start (they lie inside it),
        // and start the body after them.
        let subs = subs.map_or(0..0, |s| json::span(bytes, s));
        let len = subs.len();
        bytes.copy_within(subs, c.body);
        c.listen = Some(Listen {
            filter,
            subscriptions: (c.body, c.body + len),
            owed: 0,
            ending: false,
        });
        c.body += len;
        let explicit = HeaderList::from_bytes(&bytes[..c.headers_len])
            .get(b"grpc-timeout")
            .is_some();
        if !explicit {
            c.deadline = None;
        }
        c.phase = Phase::Listening;
        if self
            .write_message(i, |w, id, subs| {
                listen::write_acknowledgement(w, id, &filter, subs)
            })
            .is_err()
        {
            self.drop_call(i);
        }
    }

    /// An in-band JSON-RPC error, then status 0.
    fn answer_error(&mut self, i: usize, e: RpcError, data: Option<&[u8]>) {
        if let Some(c) = self.calls[i].as_mut() {
            c.phase = Phase::Handler;
            c.listen = None;
        }
        let sent = self.write_message(i, |w, id, _| {
            envelope::write_error(w, id, e.code, e.message.as_bytes(), data)
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
        let mut data_buf = [0u8; 192];
        let params = self
            .calls
            .get(i)
            .and_then(Option::as_ref)
            .and_then(|c| c.params_at().map(|r| &self.store.bytes(&c.buf)[r]));
        let data = dispatch::error_data(&e, params, &mut data_buf);
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
        envelope::write_error(&mut w, id_raw, e.code, e.message.as_bytes(), data);
        let bin = match w.finish() {
            Ok(text) => match base64::encode(text, bin_part) {
                Some(n) if n <= MAX_ERROR_BIN => Some(n),
                _ => None,
            },
            Err(_) => None,
        };
        let message = &e.message.as_bytes()[..e.message.len().min(MAX_GRPC_MESSAGE)];
        let msg_len = response::percent_cut(message, msg_part);
        let mut code_text = [0u8; 12];
        let code_len = write_int(&mut code_text, i64::from(e.code));
        let status = e.grpc_code();
        let mut fields = [
            response::HEAD[0],
            response::HEAD[1],
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
        let mid_message = c.writing();
        self.remove(i);
        if mid_message {
            // Trailers cannot cut a message: stop the stream instead.
            let _ = self.conn.reset(stream, ErrorCode::CANCEL);
            return;
        }
        let status = response::Status::new(code, message);
        let _ = if head_sent {
            self.conn.send_headers(stream, status.trailers(&[]), true)
        } else {
            self.conn
                .send_headers(stream, status.trailers_only(&[]), true)
        };
    }

    fn status_only(&mut self, stream: StreamRef, code: Code, message: &[u8]) {
        let status = response::Status::new(code, message);
        let _ = self
            .conn
            .send_headers(stream, status.trailers_only(&[]), true);
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
        self.store.put(c.buf);
        Some((c.stream, c.phase))
    }

    fn push(&mut self, e: ServerEvent) {
        let _ = self.events.push(e);
    }
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
        timeout: Option<core::time::Duration>,
    },
}

/// Checks a request head (method, content type, encoding, path) and gives
/// an accepted call its buffer, holding the head.
fn admit<S: CallStore>(
    store: &mut S,
    config: &ServerConfig,
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

fn call_id(i: usize, stream: StreamRef) -> CallId {
    CallId {
        index: i as u16,
        stream,
    }
}

fn write_int(out: &mut [u8; 12], v: i64) -> usize {
    let mut w = JsonWriter::new(out);
    w.int(v);
    w.len()
}

impl<S: CallStore, const STREAMS: usize, const TABLE: usize, const BUF: usize, FB>
    crate::drive::Endpoint for Server<'_, S, STREAMS, TABLE, BUF, FB>
where
    FB: Storage<BUF> + Default,
{
    fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        Server::recv(self, input, now)
    }

    fn wants_transmit(&self) -> bool {
        Server::wants_transmit(self)
    }

    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        Server::poll_transmit(self, out)
    }
}
