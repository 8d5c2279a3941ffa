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

mod answer;
mod call;
mod end;
mod incoming;

use super::dispatch::{self, Builtin, Level, Route};
use super::listen::{self, Filter, ListChange};
use super::request::{Handler, Request};
use super::{CallId, CancelReason, Failure, SendError, ServerConfig, ServerEvent};
use crate::grpc::{self, Code, HeadError, MessageDecoder, RequestHead, base64, response};
use crate::h2::{
    self, Connection, ConnectionError, ErrorCode, Event, HeaderList, HeadersKind, InlineStorage,
    Storage, StreamRef,
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
use crate::records::Records;
use crate::time::Instant;
use call::{Admission, Call, Listen, Notice, Phase, admit, call_id};
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
    /// Calls whose handler must stop, not polled yet: their record slot
    /// is kept from reuse until then, so no event is ever dropped.
    cancelled: FB::Records<Option<(StreamRef, CancelReason)>, STREAMS>,
    /// The connection ended; reported after every call's event.
    closed: Option<Option<ConnectionError>>,
    /// Where the next scan for call events starts (round robin).
    cursor: usize,
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
            cancelled: Default::default(),
            closed: None,
            cursor: 0,
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
                self.cancel(i, CancelReason::Deadline);
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

    /// The next event: calls to stop first, then calls to authorize, hand
    /// over or resume (taking the calls in turn), then the connection's end.
    /// Events are kept in the call records, not in a queue: none is lost,
    /// and a call whose end is not polled yet keeps its record from reuse.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        if let Some(i) = self.cancelled.iter().position(Option::is_some)
            && let Some((stream, reason)) = self.cancelled[i].take()
        {
            let call = call_id(i, stream);
            return Some(ServerEvent::Cancelled { call, reason });
        }
        let n = self.calls.len();
        for k in 0..n {
            let i = (self.cursor + k) % n;
            let Some(c) = self.calls[i].as_mut() else {
                continue;
            };
            let Some(notice) = c.notice.take() else {
                continue;
            };
            self.cursor = i + 1;
            let call = call_id(i, c.stream);
            return Some(match notice {
                Notice::Authorize => ServerEvent::Authorize { call },
                Notice::Request => {
                    c.handed = true;
                    ServerEvent::Request { call }
                }
                Notice::Writable => ServerEvent::Writable { call },
            });
        }
        self.closed
            .take()
            .map(|error| ServerEvent::ConnectionClosed { error })
    }

    /// Records that call `i`'s handler must stop, when the application was
    /// handed its request.
    fn cancel(&mut self, i: usize, reason: CancelReason) {
        let Some(c) = self.calls.get(i).and_then(Option::as_ref) else {
            return;
        };
        if c.phase != Phase::Handler || !c.handed {
            return;
        }
        let stream = c.stream;
        if self.cancelled.len() <= i && !self.cancelled.grow_to(i + 1) {
            return;
        }
        self.cancelled[i] = Some((stream, reason));
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
