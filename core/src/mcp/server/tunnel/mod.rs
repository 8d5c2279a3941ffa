//! The gRPC tunnel binding of the server engine
//! (`/mcp.zig.transport.v1.Mcp/Call`), sans-IO, over an HTTP/2 connection.
//!
//! One call carries one JSON-RPC request. The binding checks the call's
//! head (method, content type, encoding, path), collects the request
//! message out of its DATA frames, and hands it to the engine for every MCP
//! decision; it maps the outcomes to the wire:
//!
//! - errors found before a handler runs (-32700, -32600, -32020, -32022)
//!   end the call with a headers-only response whose trailers carry
//!   `grpc-status`, `grpc-message`, `mcp-error-code` and `mcp-error-bin`
//!   (typed binding §9.2; see [`end`]);
//! - other JSON-RPC errors travel as an ordinary error response message
//!   followed by `grpc-status: 0`;
//! - results and notifications are `JsonRpcMessage`s on the stream, the
//!   last one followed by `grpc-status: 0`;
//! - a cancelled call is a reset stream, a passed deadline
//!   DEADLINE_EXCEEDED.
//!
//! The same connection serves Streamable HTTP on `POST /mcp` beside the
//! tunnel calls (see `http`; feature `tunnel-http`, on by default), and
//! with feature `typed` the eight unary RPCs of the typed binding
//! `/model_context_protocol.Mcp/<Rpc>`: the same calls through the same
//! engine, their messages transcoded at the engine's boundaries (see
//! `typed`).
//!
//! # Run loop
//!
//! After any input (`recv`, `recv_eof`, `handle_timeout`, `go_away`, an
//! answer or `publish`), drain [`Server::poll_event`], then
//! [`Server::poll_transmit`] while [`Server::wants_transmit`], then sleep
//! until input or [`Server::poll_timeout`]. `recv` may consume less than it
//! was given: feed the rest after draining (see [`crate::drive`]).

mod end;
#[cfg(feature = "tunnel-http")]
mod http;
#[cfg(not(feature = "tunnel-http"))]
#[path = "http_off.rs"]
mod http;
#[cfg(feature = "typed")]
mod typed;
#[cfg(not(feature = "typed"))]
#[path = "typed_off.rs"]
mod typed;

use super::engine::{Call, Dispatched, Engine, Framing, ListenNext, Next, Phase, Refused};
use super::listen::ListChange;
use super::request::Request;
use super::{CallId, CancelReason, Failure, SendError, ServerConfig, ServerEvent};
use crate::grpc::{self, Code, HeadError, MessageDecoder, RequestHead, response};
use crate::h2::{
    self, Connection, ErrorCode, Event, HeaderList, HeadersKind, InlineStorage, Storage, StreamRef,
};
use crate::hpack::Field;
use crate::mcp::auth::Decision;
use crate::mcp::error::{INVALID_REQUEST, PARSE_ERROR, RpcError};
use crate::mcp::json;
use crate::mcp::registry::Registry;
use crate::mcp::store::CallStore;
use crate::time::Instant;
use mcpwire_proto::tunnel::JsonRpcMessage;
use typed::Rpc;

/// Whether this build serves the typed binding's RPCs (feature `typed`):
/// without it a typed path is UNIMPLEMENTED, as any path not served. A
/// crate that depends on the core learns here what feature unification
/// chose.
pub const TYPED_RPCS: bool = cfg!(feature = "typed");

pub use crate::mcp::TUNNEL_PATH;

/// Remembered reset streams of the connection (the binding's figure, the
/// same on the client).
pub const RESETS: usize = crate::mcp::REMEMBERED_RESETS;

/// The tunnel's part of a call.
struct Tunnel {
    stream: StreamRef,
    decoder: MessageDecoder,
    message_len: Option<usize>,
    /// The response head went out.
    head_sent: bool,
    /// A Streamable HTTP call ([`http`]), not a gRPC one.
    http: Option<http::Exchange>,
    /// A call of the typed binding ([`typed`]; feature `typed`): its
    /// messages are transcoded at the engine's boundaries.
    typed: Option<Rpc>,
}

/// Each message is a length-prefixed `JsonRpcMessage` whose one field holds
/// the JSON.
struct GrpcFraming;

impl Framing for GrpcFraming {
    /// The gRPC prefix and the longest protobuf header.
    const ROOM: usize = 16;
    const TAIL: &'static [u8] = b"";

    fn frame(head: &mut [u8], len: usize) -> usize {
        let proto_len = JsonRpcMessage::prefix_len(len);
        let prefix = grpc::write_prefix((proto_len + len) as u32);
        let start = head.len() - proto_len - prefix.len();
        head[start..start + prefix.len()].copy_from_slice(&prefix);
        let _ = JsonRpcMessage::encode_prefix(len, &mut head[start + prefix.len()..]);
        start
    }
}

type CallRecords<S, FB, const BUF: usize, const STREAMS: usize> =
    <FB as Storage<BUF>>::Records<Option<Call<<S as CallStore>::Buf, Tunnel>>, STREAMS>;
type Cancellations<FB, const BUF: usize, const STREAMS: usize> =
    <FB as Storage<BUF>>::Records<Option<(CallId, CancelReason)>, STREAMS>;
type TunnelEngine<'r, S, FB, const BUF: usize, const STREAMS: usize> = Engine<
    'r,
    S,
    Tunnel,
    CallRecords<S, FB, BUF, STREAMS>,
    Cancellations<FB, BUF, STREAMS>,
    GrpcFraming,
>;

/// The tunnel server over one connection. The generics follow
/// [`h2::Connection`]'s order: `STREAMS` concurrent calls, the HPACK
/// `TABLE` size and the frame buffer size `BUF`, then the [`CallStore`] `S`
/// that gives each call its buffer while it lasts (which bounds a request
/// and each message of its response) and the [`Storage`] `FB` of the
/// connection's buffers and records (inline by default; see
/// [`h2::storage`]). The connection remembers `RESETS` reset streams.
/// [`super::DeviceServer`] and [`super::HostServer`] name tested sizes.
pub struct Server<
    'r,
    S: CallStore,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    FB: Storage<BUF> = InlineStorage<BUF>,
> {
    conn: Connection<STREAMS, TABLE, BUF, RESETS, FB>,
    engine: TunnelEngine<'r, S, FB, BUF, STREAMS>,
    config: ServerConfig<'r>,
    now: Instant,
}

/// Sends a head or trailers of an answer on `conn`, the strings of
/// [`response::LITERALS`] pre-coded on 64-bit hosts (a small target codes
/// them each time: using them costs it about 0.4 KB of flash).
fn send_answer_headers<'f, const STREAMS: usize, const TABLE: usize, const BUF: usize, FB>(
    conn: &mut Connection<STREAMS, TABLE, BUF, RESETS, FB>,
    stream: StreamRef,
    fields: impl IntoIterator<Item = Field<'f>>,
    end_stream: bool,
) -> Result<(), h2::StreamError>
where
    FB: Storage<BUF>,
{
    let mut literals = response::LITERALS;
    let literals: Option<&mut dyn crate::hpack::Literals> = if json::WORDS {
        Some(&mut literals)
    } else {
        None
    };
    conn.send_headers_with(stream, fields, end_stream, literals)
}

impl<S: CallStore, const STREAMS: usize, const TABLE: usize, const BUF: usize, FB: Storage<BUF>>
    core::fmt::Debug for Server<'_, S, STREAMS, TABLE, BUF, FB>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Server")
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

/// What the binding does with a request head.
enum Admission {
    /// A Streamable HTTP refusal with this status.
    Mcp(u16),
    /// Answer with this HTTP status.
    Http(u16),
    /// Answer with this gRPC status, trailers-only.
    Status(Code, &'static [u8]),
    /// Not processed now: RST_STREAM(REFUSED_STREAM).
    Refused,
    /// A call in this record.
    Call(usize),
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
    pub fn new(registry: Registry<'r>, config: ServerConfig<'r>, store: S, now: Instant) -> Self {
        Self {
            conn: Connection::new(h2::Role::Server, config.h2, now),
            engine: Engine::new(
                registry,
                store,
                config.request_timeout,
                config.authorize,
                true,
            ),
            config,
            now,
        }
    }

    /// Accepts JSON-RPC ids of up to `octets` of raw JSON (default 128);
    /// a request with a longer id is answered -32600 with id null. Each
    /// call admitted after this keeps that much room in its buffer.
    pub fn set_max_id_len(&mut self, octets: usize) {
        self.engine.max_id = octets;
    }

    /// Limits the listen streams this engine keeps: a server-wide quota
    /// (shared by the server's connections) and the longest
    /// `resourceSubscriptions` filter. Default: no quota, 16 KiB.
    pub fn set_listen_limits(&mut self, limits: crate::mcp::server::ListenLimits<'r>) {
        self.engine.listen_limits = limits;
    }

    /// The call store, for its state.
    pub fn store(&self) -> &S {
        &self.engine.store
    }

    /// The HTTP/2 connection, for its state and windows.
    pub fn connection(&self) -> &Connection<STREAMS, TABLE, BUF, RESETS, FB> {
        &self.conn
    }

    /// What the server offers.
    pub fn registry(&self) -> &Registry<'r> {
        &self.engine.registry
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
        self.engine.end_listens();
        self.flush_all();
        self.drain_connection();
    }

    /// The next deadline: the connection's, a call's, or an event
    /// stream's next keep-alive comment.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.conn.poll_timeout(),
            self.engine.next_deadline(),
            self.http_keep_alive_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Lets time pass: calls past their deadline end with DEADLINE_EXCEEDED
    /// (Streamable HTTP ones -32001); an event stream that said nothing
    /// for [`HttpEndpoint::keep_alive_interval`](super::HttpEndpoint) gets
    /// a comment.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        self.conn.handle_timeout(now);
        while let Some(i) = self.engine.expired(now) {
            if self.exchange(i).is_some() {
                self.http_timeout(i);
            } else {
                self.end_with_status(i, Code::DeadlineExceeded, b"deadline exceeded");
            }
        }
        self.http_keep_alive(now);
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

    /// The next event: calls to stop first, then calls to authorize, hand
    /// over or resume, then the connection's end. Events are kept in the
    /// call records, not in a queue, so none is dropped; a call whose end
    /// is not polled yet keeps its record from reuse.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.engine.poll_event()
    }

    /// The request of a call the application handles, until the next
    /// `&mut` call on the engine.
    pub fn request(&self, call: CallId) -> Option<Request<'_>> {
        self.engine.request(call)
    }

    /// The bearer token of a call waiting for [`Server::authorize`]
    /// (`authorization: Bearer <token>`), if it carries one.
    pub fn bearer_token(&self, call: CallId) -> Option<&str> {
        self.engine.bearer_token(call)
    }

    /// The application's decision on a call's credentials. An allowed call
    /// goes on, its handler sees the principal; a refused one ends at once
    /// with UNAUTHENTICATED or PERMISSION_DENIED and the RFC 6750 challenge
    /// in `www-authenticate` (see [`crate::mcp::auth`]).
    pub fn authorize(&mut self, call: CallId, decision: Decision<'_>) {
        match self.engine.authorize(call, decision) {
            Some(Err(refusal)) => {
                if self.exchange(call.index()).is_some() {
                    self.http_refuse_auth(call.index(), refusal);
                    self.drain_connection();
                    return;
                }
                if let Some((x, _)) = self.engine.remove(call.index()) {
                    let status = response::Status::new(refusal.status, refusal.message.as_bytes());
                    let extra = [Field::new(
                        b"www-authenticate",
                        refusal.challenge.as_bytes(),
                    )];
                    let _ = send_answer_headers(
                        &mut self.conn,
                        x.stream,
                        status.trailers_only(&extra),
                        true,
                    );
                }
            }
            Some(Ok(true)) => self.dispatch(call.index()),
            Some(Ok(false)) | None => {}
        }
        self.drain_connection();
    }

    // ------------------------------------------------------------------
    // Answers from the application
    // ------------------------------------------------------------------

    /// Answers the request with `result` (a JSON object) and ends the call
    /// with `grpc-status: 0`. A result larger than the call store can hold
    /// is answered with -32603 instead (and `TooLarge` returned).
    pub fn respond(&mut self, call: CallId, result: &[u8]) -> Result<(), SendError> {
        let (next, sent) = self.engine.respond(call, result);
        match next {
            Next::Send(i) => self.flush(i),
            Next::Drop(i) => self.drop_call(i),
            Next::Nothing => {}
        }
        sent
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
        let i = self.engine.respond_error(call, code, message, data)?;
        self.http_error_status(i, code);
        self.flush(i);
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
    /// On a Streamable HTTP call that asked for no stream (no progress
    /// token, no log level) it is dropped (`Ok`).
    pub fn notify(&mut self, call: CallId, method: &str, params: &[u8]) -> Result<(), SendError> {
        if self.http_drops_notifications(call) {
            return Ok(());
        }
        let i = self.engine.notify(call, method, params)?;
        self.flush(i);
        Ok(())
    }

    /// Whether a listen stream is open.
    pub fn is_listening(&self) -> bool {
        self.engine.is_listening()
    }

    /// Announces a change to every listen stream whose filter wants it;
    /// returns how many streams it goes to. A list change announced while a
    /// stream is busy is sent once it is free (repeats fold into one); a
    /// resource update on a busy stream is dropped (the client reads the
    /// resource again on its next update).
    pub fn publish(&mut self, change: ListChange<'_>) -> usize {
        let n = self.engine.publish(&change);
        self.flush_all();
        self.drain_connection();
        n
    }

    /// Sends what call `i` has pending: the response head, its message, a
    /// listen stream's next message, and once the answer is complete, the
    /// trailers.
    fn flush(&mut self, i: usize) {
        loop {
            let Some(c) = self.engine.calls.get_mut(i).and_then(Option::as_mut) else {
                return;
            };
            if c.x.http.is_some() {
                return self.flush_http(i);
            }
            if let Some(rpc) = c.x.typed
                && !self.typed_frame(i, rpc)
            {
                return;
            }
            let Some(c) = self.engine.calls.get_mut(i).and_then(Option::as_mut) else {
                return;
            };
            let stream = c.x.stream;
            // A typed call's answer is one message or trailers only: its
            // head waits for the message.
            let head_due = c.x.typed.is_none() || c.writing();
            if !c.x.head_sent && head_due {
                match send_answer_headers(&mut self.conn, stream, response::HEAD, false) {
                    Ok(()) => c.x.head_sent = true,
                    Err(h2::StreamError::TransmitFull) => return,
                    Err(_) => return self.drop_call(i),
                }
            }
            loop {
                let out = self.engine.output(i);
                if out.is_empty() {
                    break;
                }
                match self.conn.send_data(stream, out, false) {
                    Ok(0) => return,
                    Ok(n) => self.engine.sent(i, n),
                    Err(_) => return self.drop_call(i),
                }
            }
            match self.engine.phase(i) {
                Some(Phase::Listening) => match self.engine.next_listen(i) {
                    ListenNext::Idle => return,
                    ListenNext::Written | ListenNext::Final => {}
                    ListenNext::Failed => return self.drop_call(i),
                },
                Some(Phase::Finishing) => {
                    let trailers = [Field::new(b"grpc-status", b"0")];
                    match send_answer_headers(&mut self.conn, stream, trailers, true) {
                        Ok(()) => {
                            self.engine.remove(i);
                        }
                        Err(h2::StreamError::TransmitFull) => {}
                        Err(_) => self.drop_call(i),
                    }
                    return;
                }
                _ => return,
            }
        }
    }

    fn flush_all(&mut self) {
        for i in 0..self.engine.calls.len() {
            self.flush(i);
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
                    end_stream,
                } => {
                    // Always lent right after its event; an empty list is
                    // refused as a malformed request.
                    let fields = self.conn.headers(stream).unwrap_or(HeaderList::EMPTY);
                    let max = self.config.max_message_bytes;
                    let admission = match http::route(fields, &self.config.http) {
                        http::Route::Grpc => None,
                        http::Route::Refuse(status) => Some(Admission::Mcp(status)),
                        http::Route::Call(x) => {
                            Some(admit_http(&mut self.engine, fields, stream, x, self.now))
                        }
                    };
                    let admission = admission
                        .unwrap_or_else(|| admit(&mut self.engine, fields, stream, max, self.now));
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
                Event::ConnectionClosed { error } => self.engine.close(error),
                Event::StreamsAvailable | Event::GoAway { .. } | Event::PingAck { .. } => {}
            }
        }
    }

    fn index_of(&self, stream: StreamRef) -> Option<usize> {
        self.engine
            .calls
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.x.stream == stream))
    }

    fn on_stream_gone(&mut self, stream: StreamRef, reset: bool) {
        let Some(i) = self.index_of(stream) else {
            return;
        };
        if reset {
            self.engine.cancel(i, CancelReason::Reset);
        }
        self.engine.remove(i);
    }

    fn on_request_head(&mut self, stream: StreamRef, admission: Admission, end_stream: bool) {
        // An HTTP client (curl, httpx) sends its whole body before it reads
        // an answer: an early one (413, 401) leaves the rest of the body to
        // be dropped, where a gRPC call's is reset at once (the binding).
        let http = match admission {
            Admission::Mcp(_) => true,
            Admission::Call(i) => self.exchange(i).is_some(),
            _ => false,
        };
        if http && !end_stream {
            self.conn.drain_after_response(stream);
        }
        match admission {
            Admission::Mcp(status) => self.http_refuse(stream, status),
            Admission::Http(status) => self.http_error(stream, status),
            Admission::Status(code, message) => self.status_only(stream, code, message),
            Admission::Refused => {
                let _ = self.conn.reset(stream, ErrorCode::REFUSED_STREAM);
            }
            Admission::Call(i) if end_stream => self.on_request_end(i),
            Admission::Call(_) => {}
        }
    }

    fn on_data(&mut self, stream: StreamRef, mut bytes: &[u8], end_stream: bool) {
        // The octets are copied below (or dropped): return them at once.
        self.conn.release_data(stream, bytes.len());
        let Some(i) = self.index_of(stream) else {
            return;
        };
        if self.exchange(i).is_some() {
            if self
                .engine
                .phase(i)
                .is_some_and(|p| matches!(p, Phase::Body | Phase::Authorizing))
            {
                self.http_data(i, bytes);
            }
            if end_stream && self.exchange(i).is_some() {
                self.on_request_end(i);
            }
            return;
        }
        while !bytes.is_empty() {
            let Some(c) = self.engine.calls[i].as_mut() else {
                return;
            };
            if !matches!(c.phase, Phase::Body | Phase::Authorizing) {
                break;
            }
            if c.x.message_len.is_some() && c.x.typed.is_some() {
                let why = b"a unary call carries one request message";
                return self.end_with_status(i, Code::InvalidArgument, why);
            }
            if c.x.message_len.is_some() {
                return self.end_with_error(
                    i,
                    RpcError::new(INVALID_REQUEST, "a call carries one request message"),
                );
            }
            // The prefix names the message's length: grow the buffer to it
            // before collecting the message.
            let (used, len) = match c.x.decoder.feed_prefix(bytes) {
                Ok(r) => r,
                Err(e) => return self.end_with_status(i, e.code(), e.message().as_bytes()),
            };
            bytes = &bytes[used..];
            let Some(len) = len else {
                break;
            };
            let Some((out, x)) = self.engine.message_room_with(i, len) else {
                return self.end_with_status(
                    i,
                    Code::ResourceExhausted,
                    b"message larger than the call buffer",
                );
            };
            let (used, done) = match x.decoder.feed(bytes, out) {
                Ok(r) => r,
                Err(e) => return self.end_with_status(i, e.code(), e.message().as_bytes()),
            };
            x.message_len = x.message_len.or(done);
            bytes = &bytes[used..];
        }
        if end_stream {
            self.on_request_end(i);
        }
    }

    /// The request stream ended: dispatch, or wait for the authorization.
    fn on_request_end(&mut self, i: usize) {
        match self.engine.calls[i].as_mut() {
            Some(c) if c.phase == Phase::Authorizing => c.ended = true,
            Some(_) => self.dispatch(i),
            None => {}
        }
    }

    /// The request ended: decode it and let the engine judge and route it.
    fn dispatch(&mut self, i: usize) {
        let Some(c) = self.engine.calls[i].as_ref() else {
            return;
        };
        if c.phase != Phase::Body {
            return;
        }
        if c.x.http.is_some() {
            return self.http_dispatch(i);
        }
        if let Err(e) = c.x.decoder.finish() {
            return self.end_with_status(i, e.code(), e.message().as_bytes());
        }
        let Some(len) = c.x.message_len else {
            // The typed binding answers with a status alone (digest §7
            // step 3); the tunnel with a JSON-RPC error.
            if c.x.typed.is_some() {
                let why = b"The call carried no message";
                return self.end_with_status(i, Code::InvalidArgument, why);
            }
            return self.end_with_error(
                i,
                RpcError::new(INVALID_REQUEST, "the call carries no request message"),
            );
        };
        if let Some(rpc) = c.x.typed {
            return self.typed_dispatch(i, rpc, len);
        }
        let message = &self.engine.store.bytes(&c.buf)[c.body..c.body + len];
        let Ok(json) = JsonRpcMessage::decode(message) else {
            return self.end_with_error(i, RpcError::new(PARSE_ERROR, "malformed JsonRpcMessage"));
        };
        // `jsonrpc` is UTF-8 text (binding): other bytes are not JSON.
        if core::str::from_utf8(json).is_err() {
            return self.end_with_error(i, RpcError::new(PARSE_ERROR, "Parse error: not UTF-8"));
        }
        // The JSON's place in the buffer: the protobuf header precedes it.
        let span = json::span(message, json);
        let at = c.body + span.start..c.body + span.end;
        match self.engine.dispatch(i, at) {
            Dispatched::Protocol(e) => self.end_with_error(i, e),
            // A notification gets an empty stream and status 0.
            Dispatched::Notification => self.end_with_status(i, Code::Ok, b""),
            Dispatched::Written => self.flush(i),
            Dispatched::Handed => {}
            Dispatched::Failed => self.drop_call(i),
        }
    }
}

/// Checks a request head (method, content type, encoding, path) and admits
/// the call with its head's octets.
fn admit<S: CallStore, R, C>(
    engine: &mut Engine<'_, S, Tunnel, R, C, GrpcFraming>,
    fields: HeaderList<'_>,
    stream: StreamRef,
    max_message_bytes: usize,
    now: Instant,
) -> Admission
where
    R: crate::records::Records<Option<Call<S::Buf, Tunnel>>>,
    C: crate::records::Records<Option<(CallId, CancelReason)>>,
{
    let head = match RequestHead::parse(fields) {
        Ok(head) => head,
        Err(HeadError::Http(status)) => return Admission::Http(status),
        Err(HeadError::Grpc(code, message)) => return Admission::Status(code, message.as_bytes()),
    };
    let typed = match typed::rpc(head.path) {
        _ if head.path == TUNNEL_PATH => None,
        Some(Ok(rpc)) => Some(rpc),
        Some(Err(())) | None => return Admission::Status(Code::Unimplemented, b"unknown method"),
    };
    let call = Tunnel {
        stream,
        decoder: MessageDecoder::new(max_message_bytes),
        message_len: None,
        head_sent: false,
        http: None,
        typed,
    };
    match engine.admit(fields.as_bytes(), head.timeout, now, call) {
        Ok(i) => Admission::Call(i),
        Err(Refused::Busy) => Admission::Refused,
        Err(Refused::Full) => Admission::Status(Code::ResourceExhausted, b"too many calls"),
        Err(Refused::HeadTooLarge) => {
            Admission::Status(Code::ResourceExhausted, b"request headers too large")
        }
    }
}

/// Admits a Streamable HTTP call whose head passed the §5.1 checks.
fn admit_http<S: CallStore, R, C>(
    engine: &mut Engine<'_, S, Tunnel, R, C, GrpcFraming>,
    fields: HeaderList<'_>,
    stream: StreamRef,
    x: http::Exchange,
    now: Instant,
) -> Admission
where
    R: crate::records::Records<Option<Call<S::Buf, Tunnel>>>,
    C: crate::records::Records<Option<(CallId, CancelReason)>>,
{
    let call = Tunnel {
        stream,
        decoder: MessageDecoder::new(0),
        message_len: None,
        head_sent: false,
        http: Some(x),
        typed: None,
    };
    match engine.admit(fields.as_bytes(), None, now, call) {
        Ok(i) => Admission::Call(i),
        Err(Refused::Busy) => Admission::Refused,
        Err(Refused::Full) => Admission::Mcp(503),
        Err(Refused::HeadTooLarge) => Admission::Mcp(431),
    }
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

impl<S: CallStore, const STREAMS: usize, const TABLE: usize, const BUF: usize, FB>
    super::ServerEngine for Server<'_, S, STREAMS, TABLE, BUF, FB>
where
    FB: Storage<BUF> + Default,
{
    forward_server_engine!(Server);
}
