//! The Streamable HTTP binding of the server engine (MCP 2026-07-28 §5)
//! over one HTTP/1.1 connection, sans-IO.
//!
//! Each POST to the endpoint carries one JSON-RPC message; its request
//! head becomes the call's header list (names lowercased), its body the
//! request message, and the engine makes every MCP decision. The binding
//! maps the outcomes to HTTP:
//!
//! - before MCP: another path 404; a `Host` or `Origin` not allowed 403
//!   (DNS rebinding); not POST 405 with `Allow: POST`; a content type other
//!   than JSON 415; an `Accept` with neither JSON nor events 406; a head
//!   over [`HttpConfig::max_head_bytes`] 431, a body over
//!   [`HttpConfig::max_body_bytes`] 413, a malformed head or chunked body
//!   400; these close the connection;
//! - a body that is not UTF-8 or not JSON: 400 with -32700; a response or
//!   a batch: 400 with -32600; the engine's protocol errors (-32020,
//!   -32022, a missing `_meta` -32602, -32021): 400 with the JSON-RPC error
//!   as body; an unknown method 404 with -32601; a request with no
//!   version claim at all (`initialize` of an older client) 400 with
//!   -32022 naming the versions served (§5.8);
//! - a notification: 202, no body (a `notifications/cancelled` needs no
//!   handling: a client cancels by closing the connection);
//! - a request: one JSON response with `Content-Length`, or an event
//!   stream (chunked, one `data:` event per message, the final result
//!   last) when it has a progress token, asks for log messages, or is
//!   `subscriptions/listen`; the choice is made after every check, so an
//!   error is never an event;
//! - bearer tokens ([`HttpConfig::authorize`]): 401 or 403 with
//!   `WWW-Authenticate: Bearer …` (and `resource_metadata`).
//!
//! One exchange at a time: while a response is open, `recv` takes no more
//! octets ([`HttpServer::is_waiting`]): a pipelined request waits, never
//! interleaved. A client that goes away ([`HttpServer::recv_eof`]) cancels
//! its running handler (§5.7). No `Mcp-Session-Id` is minted, and
//! `Last-Event-ID` is ignored.
//!
//! The run loop is stdio's (see [`crate::drive`]): after any input, drain
//! [`HttpServer::poll_event`], then [`HttpServer::poll_transmit`] while
//! [`HttpServer::wants_transmit`], then sleep until input or
//! [`HttpServer::poll_timeout`]; close the socket when
//! [`HttpServer::is_finished`].

pub(super) mod wire;

use super::engine::{Call, Dispatched, Engine, Framing, ListenNext, Next, Phase, Refused};
use super::listen::ListChange;
use super::request::Request;
use super::stdio::REQUEST_TIMEOUT;
use super::{CallId, CancelReason, Failure, SendError, ServerEvent};
use crate::h2::HeaderList;
use crate::http1::chunked::ChunkedDecoder;
use crate::http1::head::{EMPTY_HEADER, HeadScanner, RequestHead};
use crate::http1::{BodyFraming, MAX_HEADERS, write};
use crate::mcp::auth::Decision;
use crate::mcp::envelope::{self, Spans};
use crate::mcp::error::{
    HEADER_MISMATCH, INVALID_REQUEST, MISSING_REQUIRED_CLIENT_CAPABILITY, PARSE_ERROR, RpcError,
    UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::mcp::json;
use crate::mcp::registry::Registry;
use crate::mcp::store::CallStore;
use crate::records::InlineRecords;
use crate::time::Instant;

pub use wire::{Allowed, HttpConfig, HttpEndpoint};
use wire::{Exchange, KeepAlive, Plain, ROOM, TAIL};

/// Messages are framed when they are sent ([`wire::frame`]): a JSON
/// response needs its length and status, an event its chunk, and only then
/// is it known which one a message is.
struct HttpFraming;

impl Framing for HttpFraming {
    const ROOM: usize = ROOM;
    const TAIL: &'static [u8] = TAIL;

    fn frame(head: &mut [u8], _: usize) -> usize {
        head.len()
    }
}

type Records<S> = InlineRecords<Option<Call<<S as CallStore>::Buf, Exchange>>, 1>;
type Cancellations = InlineRecords<Option<(CallId, CancelReason)>, 1>;
type HttpEngine<'r, S> = Engine<'r, S, Exchange, Records<S>, Cancellations, HttpFraming>;

/// The first buffer a head is read into (grown up to the limit).
const HEAD_START: usize = 1024;

/// Where the connection's input stands.
enum Reading<B> {
    /// Between requests.
    Idle,
    /// A head being collected in a buffer of the store; `complete` when its
    /// empty line came (it waits for a call record).
    Head { buf: B, len: usize, complete: bool },
    /// The body of call `call`, `len` octets so far.
    Body { call: usize, body: Body, len: usize },
    /// The request is read; the next waits for its answer.
    Served,
    /// No more requests on this connection.
    Closed,
}

enum Body {
    Length(u64),
    Chunked(ChunkedDecoder),
}

/// A Streamable HTTP server over one HTTP/1.1 connection: one request at
/// a time, its buffer from the [`CallStore`] `S` (the head is read into
/// the buffer that then carries the call, so a connection holds one
/// buffer at most, and none between requests).
pub struct HttpServer<'r, S: CallStore> {
    engine: HttpEngine<'r, S>,
    config: HttpConfig<'r>,
    now: Instant,
    reading: Reading<S::Buf>,
    scanner: HeadScanner,
    plain: Plain<'r>,
    /// The connection ends once `plain` is out.
    close_after_plain: bool,
    /// When reading gives up on a head (or an idle connection).
    read_deadline: Option<Instant>,
    /// The open event stream's keep-alive comments.
    keep_alive: KeepAlive,
    waiting: bool,
    /// The server shuts down: no request after the one in progress.
    going_away: bool,
}

impl<S: CallStore> core::fmt::Debug for HttpServer<'_, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let reading = match self.reading {
            Reading::Idle => "idle",
            Reading::Head { .. } => "head",
            Reading::Body { .. } => "body",
            Reading::Served => "served",
            Reading::Closed => "closed",
        };
        f.debug_struct("HttpServer")
            .field("reading", &reading)
            .field("call", &self.call())
            .field("plain", &!self.plain.is_empty())
            .field("waiting", &self.waiting)
            .finish_non_exhaustive()
    }
}

impl<'r, S: CallStore> HttpServer<'r, S> {
    /// A server for one accepted connection.
    pub fn new(registry: Registry<'r>, config: HttpConfig<'r>, store: S, now: Instant) -> Self {
        Self {
            engine: Engine::new(
                registry,
                store,
                config.request_timeout,
                config.authorize,
                true,
            ),
            config,
            now,
            reading: Reading::Idle,
            scanner: HeadScanner::new(),
            plain: Plain::EMPTY,
            close_after_plain: false,
            read_deadline: Some(now + config.head_timeout),
            keep_alive: KeepAlive::default(),
            waiting: false,
            going_away: false,
        }
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

    /// Feeds octets read from the connection; returns how many were
    /// consumed. Less than all while a request is being answered: see
    /// [`HttpServer::is_waiting`]. Octets after the connection is over are
    /// consumed and dropped.
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        self.now = now;
        self.waiting = false;
        let mut pos = 0;
        loop {
            match core::mem::replace(&mut self.reading, Reading::Closed) {
                Reading::Closed => return input.len(),
                Reading::Served => {
                    self.reading = Reading::Served;
                    self.waiting = pos < input.len();
                    break;
                }
                Reading::Idle => {
                    self.reading = Reading::Idle;
                    let Some(&b) = input.get(pos) else { break };
                    if !self.plain.is_empty() || self.call().is_some() {
                        self.waiting = true;
                        break;
                    }
                    // Empty lines before a request line (RFC 9112 §2.2).
                    if b == b'\r' || b == b'\n' {
                        pos += 1;
                        continue;
                    }
                    let want = HEAD_START.min(self.config.max_head_bytes);
                    let Some(buf) = self.engine.store.take(want) else {
                        self.refuse(503);
                        continue;
                    };
                    self.scanner = HeadScanner::new();
                    self.read_deadline = Some(now + self.config.head_timeout);
                    self.reading = Reading::Head {
                        buf,
                        len: 0,
                        complete: false,
                    };
                }
                Reading::Head {
                    buf,
                    len,
                    complete: true,
                } => {
                    if let Err(buf) = self.start_request(buf, len) {
                        self.reading = Reading::Head {
                            buf,
                            len,
                            complete: true,
                        };
                        self.waiting = true;
                        break;
                    }
                }
                Reading::Head { mut buf, len, .. } => {
                    let rest = &input[pos..];
                    if rest.is_empty() {
                        self.reading = Reading::Head {
                            buf,
                            len,
                            complete: false,
                        };
                        break;
                    }
                    let end = self.scanner.scan(rest);
                    let take = end.unwrap_or(rest.len());
                    let total = len + take;
                    if total > self.config.max_head_bytes
                        || !self.engine.store.grow(&mut buf, total)
                    {
                        self.engine.store.put(buf);
                        self.refuse(431);
                        continue;
                    }
                    self.engine.store.bytes_mut(&mut buf)[len..total]
                        .copy_from_slice(&rest[..take]);
                    pos += take;
                    self.reading = Reading::Head {
                        buf,
                        len: total,
                        complete: end.is_some(),
                    };
                }
                Reading::Body {
                    call,
                    mut body,
                    mut len,
                } => {
                    if pos == input.len() {
                        self.reading = Reading::Body { call, body, len };
                        break;
                    }
                    match self.read_body(call, &mut body, &mut len, &input[pos..]) {
                        Ok((used, done)) => {
                            pos += used;
                            if done {
                                self.reading = Reading::Served;
                                self.end_body(call, len);
                            } else {
                                self.reading = Reading::Body { call, body, len };
                            }
                        }
                        Err(status) => {
                            self.engine.remove(call);
                            self.refuse(status);
                        }
                    }
                }
            }
        }
        pos
    }

    /// Whether `recv` stopped because a request is being answered (or
    /// waits for a call record): feed the rest after the answer is out.
    pub fn is_waiting(&self) -> bool {
        self.waiting
    }

    /// The client closed its side: a running handler is cancelled
    /// ([`CancelReason::Reset`], §5.7) and its answer dropped; an answer of
    /// the binding still goes out, then the connection is over.
    pub fn recv_eof(&mut self) {
        if let Some(i) = self.call() {
            self.engine.cancel(i, CancelReason::Reset);
            self.engine.remove(i);
        }
        self.stop_reading();
        self.close_after_plain = true;
        self.engine.close(None);
    }

    /// Whether the connection should be closed now: it is over and
    /// everything is written. After a refusal the client may still be
    /// sending its body: a driver shuts its write side down and reads on
    /// for a moment (`recv` takes and drops everything now), so that the
    /// client is not reset before it reads the answer (RFC 9112 §9.6).
    pub fn is_finished(&self) -> bool {
        matches!(self.reading, Reading::Closed) && self.plain.is_empty() && self.call().is_none()
    }

    /// The server shuts down: the exchange in progress finishes (a listen
    /// stream ends with its final result), then the connection is over;
    /// a connection between requests is over at once.
    pub fn go_away(&mut self) {
        self.going_away = true;
        self.engine.end_listens();
        match self.call() {
            Some(i) if self.engine.output(i).is_empty() => {
                self.after_message(i);
            }
            Some(_) => {}
            None if matches!(self.reading, Reading::Idle) => self.stop_reading(),
            None => {}
        }
    }

    /// Cancels the call in progress ([`CancelReason::ConnectionClosed`])
    /// and drops what was not written.
    pub fn close(&mut self) {
        self.stop_reading();
        self.plain = Plain::EMPTY;
        self.engine.close(None);
    }

    /// The next deadline: the head's or the idle connection's, the call's,
    /// or the event stream's next keep-alive comment.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.read_deadline,
            self.engine.next_deadline(),
            self.keep_alive.deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Lets time pass: a head (or an idle connection) past its deadline
    /// closes the connection without an answer; a request past its
    /// deadline is cancelled and answered -32001 (408 while its body is
    /// still coming); an event stream gets its keep-alive comment.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if self.read_deadline.is_some_and(|d| now >= d)
            && matches!(self.reading, Reading::Idle | Reading::Head { .. })
        {
            self.read_deadline = None;
            self.stop_reading();
        }
        while let Some(i) = self.engine.expired(now) {
            let phase = self.engine.phase(i);
            if matches!(phase, Some(Phase::Body | Phase::Authorizing)) {
                self.engine.remove(i);
                self.refuse(408);
            } else if !self.engine.output(i).is_empty() {
                // A message is on its way: the stream ends after it.
                self.engine.finish(i);
            } else {
                let e = RpcError::new(REQUEST_TIMEOUT, "Request timed out");
                if self.engine.answer_error(i, e) == Dispatched::Failed {
                    self.drop_call(i);
                }
            }
        }
        self.keep_alive.handle_timeout(now);
    }

    /// Whether [`HttpServer::poll_transmit`] has anything to write.
    pub fn wants_transmit(&self) -> bool {
        !self.plain.is_empty()
            || self
                .call()
                .is_some_and(|i| !self.engine.output(i).is_empty() || self.keep_alive.is_due())
    }

    /// Writes the answers into `out`; call while
    /// [`HttpServer::wants_transmit`].
    pub fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        let mut n = 0;
        while n < out.len() {
            if !self.plain.is_empty() {
                n += self.plain.copy_into(&mut out[n..]);
                if self.plain.is_empty() && self.close_after_plain {
                    self.stop_reading();
                }
                continue;
            }
            let Some(i) = self.call() else { break };
            self.frame(i);
            let output = self.engine.output(i);
            if output.is_empty() {
                if self.keep_alive.take_due() && self.streaming(i) {
                    let chunked = self.exchange(i).is_some_and(|x| x.chunked);
                    self.plain.push(if chunked {
                        write::SSE_KEEP_ALIVE_CHUNK
                    } else {
                        write::SSE_KEEP_ALIVE
                    });
                    self.keep_alive
                        .sent(self.now, self.config.endpoint.keep_alive_interval);
                    continue;
                }
                if !self.after_message(i) {
                    break;
                }
                continue;
            }
            let k = output.len().min(out.len() - n);
            out[n..n + k].copy_from_slice(&output[..k]);
            self.engine.sent(i, k);
            n += k;
            if self.streaming(i) {
                self.keep_alive
                    .sent(self.now, self.config.endpoint.keep_alive_interval);
            }
            if self.engine.output(i).is_empty() {
                self.after_message(i);
            }
        }
        n
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        let event = self.engine.poll_event();
        // A polled cancellation frees the call record a whole head may
        // wait for (its client waits for an answer, not for more input).
        if matches!(event, Some(ServerEvent::Cancelled { .. }))
            && matches!(self.reading, Reading::Head { complete: true, .. })
        {
            self.recv(&[], self.now);
        }
        event
    }

    /// The request of a call the application handles, until the next
    /// `&mut` call. Its `headers` are the HTTP request's fields, names in
    /// lowercase.
    pub fn request(&self, call: CallId) -> Option<Request<'_>> {
        self.engine.request(call)
    }

    /// The bearer token of a call waiting for [`HttpServer::authorize`]
    /// (`Authorization: Bearer <token>`), if it carries one.
    pub fn bearer_token(&self, call: CallId) -> Option<&str> {
        self.engine.bearer_token(call)
    }

    /// The application's decision on a call's credentials: an allowed call
    /// goes on; a refused one is answered 401 or 403 with the challenge in
    /// `WWW-Authenticate` (naming [`HttpEndpoint::resource_metadata`]), and
    /// the connection closes.
    pub fn authorize(&mut self, call: CallId, decision: Decision<'_>) {
        match self.engine.authorize(call, decision) {
            Some(Err(refusal)) => {
                let i = call.index();
                self.engine.remove(i);
                self.stop_reading();
                self.plain = Plain::EMPTY;
                self.plain.push(wire::refusal_head(refusal.http_status));
                for part in self.config.endpoint.challenge(refusal.challenge) {
                    self.plain.push(part);
                }
                self.plain.push(b"\r\n\r\n");
                self.close_after_plain = true;
                // Reading resumes never: the connection closes after.
                self.reading = Reading::Closed;
            }
            Some(Ok(true)) => {
                let i = call.index();
                let len = self.exchange(i).map_or(0, |x| x.body_len);
                self.on_request(i, len);
            }
            Some(Ok(false)) | None => {}
        }
    }

    /// Answers the request with `result` (a JSON object). A result larger
    /// than the call store can hold is answered -32603 instead (and
    /// `TooLarge` returned).
    pub fn respond(&mut self, call: CallId, result: &[u8]) -> Result<(), SendError> {
        let (next, sent) = self.engine.respond(call, result);
        if let Next::Drop(i) = next {
            self.drop_call(i);
        }
        sent
    }

    /// Answers the request with a JSON-RPC error (in band: status 200, or
    /// the stream's last event); `data` is raw JSON.
    pub fn respond_error(
        &mut self,
        call: CallId,
        code: i32,
        message: &str,
        data: Option<&[u8]>,
    ) -> Result<(), SendError> {
        let i = self.engine.respond_error(call, code, message, data)?;
        // The request-level errors are answered 400 (§5.3) when the
        // handler found them (a capability a tool needs, say), as when the
        // engine did, unless a stream already began.
        if matches!(
            code,
            HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY | UNSUPPORTED_PROTOCOL_VERSION
        ) && let Some(x) = self.exchange_mut(i)
            && !x.head_sent
        {
            x.status = Some(400);
            x.sse = false;
        }
        Ok(())
    }

    /// Answers the request with the error the core names for a driver-side
    /// failure.
    pub fn fail(&mut self, call: CallId, failure: Failure) -> Result<(), SendError> {
        let e = failure.error();
        self.respond_error(call, e.code, e.message, None)
    }

    /// Sends a notification for the request (progress, log messages) as
    /// an event of its stream; dropped (`Ok`) when the request asked for no
    /// stream (no progress token, no log level).
    pub fn notify(&mut self, call: CallId, method: &str, params: &[u8]) -> Result<(), SendError> {
        let live = self.engine.find(call, Phase::Handler).is_some();
        if live && !self.exchange(call.index()).is_some_and(|x| x.sse) {
            return Ok(());
        }
        self.engine.notify(call, method, params).map(drop)
    }

    /// Whether a listen stream is open.
    pub fn is_listening(&self) -> bool {
        self.engine.is_listening()
    }

    /// Announces a change to the listen stream, when one is open and its
    /// filter wants it; returns how many streams it goes to (0 or 1).
    pub fn publish(&mut self, change: ListChange<'_>) -> usize {
        self.engine.publish(&change)
    }

    // ------------------------------------------------------------------

    /// The call in progress.
    fn call(&self) -> Option<usize> {
        self.engine.calls.iter().position(Option::is_some)
    }

    fn exchange(&self, i: usize) -> Option<&Exchange> {
        self.engine.calls.get(i)?.as_ref().map(|c| &c.x)
    }

    fn exchange_mut(&mut self, i: usize) -> Option<&mut Exchange> {
        self.engine.calls.get_mut(i)?.as_mut().map(|c| &mut c.x)
    }

    /// Whether call `i` answers with an event stream whose head is out.
    fn streaming(&self, i: usize) -> bool {
        self.exchange(i).is_some_and(|x| x.sse && x.head_sent)
    }

    /// No more requests: a head being read is dropped.
    fn stop_reading(&mut self) {
        if let Reading::Head { buf, .. } = core::mem::replace(&mut self.reading, Reading::Closed) {
            self.engine.store.put(buf);
        }
        self.read_deadline = None;
        self.keep_alive = KeepAlive::default();
    }

    /// Answers `status` without a call and closes the connection after it.
    fn refuse(&mut self, status: u16) {
        self.stop_reading();
        self.plain = Plain::EMPTY;
        self.plain.push(wire::closing_answer(status));
        self.close_after_plain = true;
    }

    /// Call `i` cannot be answered: a 500 when nothing of its answer went
    /// out, else the connection just ends.
    fn drop_call(&mut self, i: usize) {
        let started = self.exchange(i).is_some_and(|x| x.head_sent);
        self.engine.remove(i);
        if started {
            self.stop_reading();
            self.plain = Plain::EMPTY;
            self.close_after_plain = true;
        } else {
            self.refuse(500);
        }
    }

    /// Frames call `i`'s message if it is fresh.
    fn frame(&mut self, i: usize) {
        let finishing = self.engine.phase(i) == Some(Phase::Finishing);
        self.engine
            .frame_fresh(i, |buf, at, x| wire::frame(buf, at, x, finishing));
    }

    /// Call `i`'s message is out: the listen stream's next, or the end of
    /// the exchange. Whether more output may follow.
    fn after_message(&mut self, i: usize) -> bool {
        match self.engine.phase(i) {
            Some(Phase::Finishing) => {
                let x = self.exchange(i).copied().unwrap_or_default();
                self.engine.remove(i);
                self.keep_alive = KeepAlive::default();
                if x.sse && x.head_sent && x.chunked {
                    self.plain.push(write::LAST_CHUNK);
                }
                if x.keep_alive && !self.going_away {
                    if matches!(self.reading, Reading::Served) {
                        self.reading = Reading::Idle;
                        self.read_deadline = Some(self.now + self.config.idle_timeout);
                    }
                } else {
                    self.stop_reading();
                    self.close_after_plain = true;
                }
                true
            }
            Some(Phase::Listening) => match self.engine.next_listen(i) {
                ListenNext::Idle => false,
                ListenNext::Written | ListenNext::Final => true,
                ListenNext::Failed => {
                    self.drop_call(i);
                    true
                }
            },
            _ => false,
        }
    }

    /// A whole head is in `buf`: check it and start its call. `Err` gives
    /// the buffer back when no call record is free yet.
    fn start_request(&mut self, mut buf: S::Buf, len: usize) -> Result<(), S::Buf> {
        let mut fields = [EMPTY_HEADER; MAX_HEADERS];
        let mut spans = [wire::FieldSpan::default(); MAX_HEADERS];
        let bytes = self.engine.store.bytes(&buf);
        let Some(head_bytes) = bytes.get(..len) else {
            self.engine.store.put(buf);
            self.refuse(400);
            return Ok(());
        };
        let head = match RequestHead::parse(head_bytes, &mut fields) {
            Ok(head) => head,
            Err(e) => {
                self.engine.store.put(buf);
                self.refuse(e.status());
                return Ok(());
            }
        };
        let accepted = match wire::judge(&head, &self.config) {
            Ok(a) => a,
            Err(status) => {
                self.engine.store.put(buf);
                self.refuse(status);
                return Ok(());
            }
        };
        let mut records_len = 0;
        for (span, f) in spans.iter_mut().zip(head.fields) {
            *span = wire::FieldSpan::new(
                json::span(bytes, f.name.as_bytes()),
                json::span(bytes, f.value),
            );
            records_len += wire::RECORD_HEAD + f.name.len() + f.value.len();
        }
        let count = head.fields.len();
        // The head becomes the call's header list, in place: written after
        // the raw head, then moved to the buffer's start.
        let records = self
            .engine
            .store
            .grow(&mut buf, len + records_len)
            .then(|| {
                let bytes = self.engine.store.bytes_mut(&mut buf);
                let n = wire::write_records(bytes, len, &spans[..count])?;
                bytes.copy_within(len..len + n, 0);
                Some(n)
            })
            .flatten();
        let Some(records_len) = records else {
            self.engine.store.put(buf);
            self.refuse(431);
            return Ok(());
        };
        let x = Exchange {
            keep_alive: accepted.keep_alive,
            chunked: accepted.chunked,
            accept_json: accepted.accept_json,
            accept_sse: accepted.accept_sse,
            ..Exchange::default()
        };
        let call = match self.engine.admit_buf(buf, records_len, None, self.now, x) {
            Ok(call) => call,
            Err((Refused::Busy | Refused::Full, buf)) => return Err(buf),
            Err((Refused::HeadTooLarge, buf)) => {
                self.engine.store.put(buf);
                self.refuse(431);
                return Ok(());
            }
        };
        self.read_deadline = None;
        if accepted.expect_continue {
            self.plain.push(wire::CONTINUE);
        }
        let body = match accepted.body {
            BodyFraming::None => {
                self.reading = Reading::Served;
                self.end_body(call, 0);
                return Ok(());
            }
            BodyFraming::Length(n) => Body::Length(n),
            BodyFraming::Chunked => Body::Chunked(ChunkedDecoder::new()),
        };
        self.reading = Reading::Body { call, body, len: 0 };
        Ok(())
    }

    /// Copies body octets of `input` into call `call`'s message; how many
    /// were used and whether the body is complete, or the status to
    /// refuse it with.
    fn read_body(
        &mut self,
        call: usize,
        body: &mut Body,
        len: &mut usize,
        input: &[u8],
    ) -> Result<(usize, bool), u16> {
        let max = self.config.max_body_bytes;
        match body {
            Body::Length(left) => {
                let k = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(input.len());
                self.append(call, len, &input[..k], max)?;
                *left -= k as u64;
                Ok((k, *left == 0))
            }
            Body::Chunked(decoder) => {
                let mut pos = 0;
                while pos < input.len() {
                    let c = decoder.feed(&input[pos..]).map_err(|_| 400u16)?;
                    let data = pos + c.data.start..pos + c.data.end;
                    self.append(call, len, &input[data], max)?;
                    pos += c.consumed;
                    if c.done {
                        return Ok((pos, true));
                    }
                }
                Ok((pos, false))
            }
        }
    }

    /// Appends `data` to call `call`'s message (413 past `max`).
    fn append(&mut self, call: usize, len: &mut usize, data: &[u8], max: usize) -> Result<(), u16> {
        let total = *len + data.len();
        if total > max {
            return Err(413);
        }
        let room = self.engine.message_room(call, total).ok_or(413u16)?;
        room[*len..].copy_from_slice(data);
        *len = total;
        Ok(())
    }

    /// The body of call `i` is complete: dispatch it, or wait for the
    /// authorization.
    fn end_body(&mut self, i: usize, len: usize) {
        let Some(c) = self.engine.calls.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        c.x.body_len = len;
        if c.phase == Phase::Authorizing {
            c.ended = true;
            return;
        }
        self.on_request(i, len);
    }

    /// The request message of call `i` is whole: judge it (§5.6), choose
    /// JSON or a stream, and hand it to the engine.
    fn on_request(&mut self, i: usize, len: usize) {
        let Some(c) = self.engine.calls.get(i).and_then(Option::as_ref) else {
            return;
        };
        let at = c.body..c.body + len;
        let bytes = self.engine.store.bytes(&c.buf);
        let Some(message) = bytes.get(at.clone()) else {
            return self.drop_call(i);
        };
        if core::str::from_utf8(message).is_err() {
            return self.answer(i, 400, RpcError::new(PARSE_ERROR, "Parse error: not UTF-8"));
        }
        let spans = match self.engine.parse(i, at.clone()) {
            Some(Ok(spans)) => spans,
            Some(Err(e)) => return self.answer(i, 400, e),
            None => return self.drop_call(i),
        };
        let r = match spans {
            Spans::Request(r) => r,
            Spans::Notification => return self.accepted(i),
            Spans::Response => {
                let e = RpcError::new(INVALID_REQUEST, "a server takes requests, not responses");
                return self.answer(i, 400, e);
            }
        };
        // What the request asks of its answer, read before the engine
        // takes it (its buffer is then the answer's).
        let params = r.params.clone().map(|p| &message[p]);
        let method = r.method.clone().map_or(&[][..], |m| &message[m]);
        let headers = HeaderList::from_bytes(&bytes[..c.headers_len]);
        let header_version = headers
            .get(b"mcp-protocol-version")
            .map(crate::http1::head::trim);
        let mut legacy = [0u8; 256];
        let asks = wire::asks(method, params, header_version, &mut legacy);
        if let Some(x) = self.exchange_mut(i) {
            x.sse = (asks.stream && x.accept_sse) || !x.accept_json;
        }
        match self.engine.dispatch_request(i, at, r) {
            Dispatched::Protocol(e) => self.answer(i, 400, e),
            Dispatched::Written => {
                let listening = self.engine.phase(i) == Some(Phase::Listening);
                if let Some(x) = self.exchange_mut(i) {
                    // A listen stream is an event stream whatever the
                    // client accepts (§7.4); anything else answered at
                    // dispatch is one JSON response.
                    x.sse = listening;
                    x.dispatched = true;
                    if asks.meta_bad {
                        x.status = Some(400);
                    }
                }
                if let Some(data) = asks.legacy {
                    let sent = self.engine.write_message(i, |w, id, _| {
                        envelope::write_error(
                            w,
                            id,
                            UNSUPPORTED_PROTOCOL_VERSION,
                            b"Unsupported protocol version",
                            Some(data),
                        )
                    });
                    if sent.is_err() {
                        self.drop_call(i);
                    }
                }
            }
            Dispatched::Handed => {}
            Dispatched::Notification => self.accepted(i),
            Dispatched::Failed => self.drop_call(i),
        }
    }

    /// Answers call `i`'s request with a JSON-RPC error and an HTTP status.
    fn answer(&mut self, i: usize, status: u16, e: RpcError) {
        if let Some(x) = self.exchange_mut(i) {
            x.status = Some(status);
            x.sse = false;
        }
        if self.engine.answer_error(i, e) == Dispatched::Failed {
            self.drop_call(i);
        }
    }

    /// A notification: 202, and the call ends.
    fn accepted(&mut self, i: usize) {
        let keep_alive = self.exchange(i).is_some_and(|x| x.keep_alive) && !self.going_away;
        self.engine.remove(i);
        if keep_alive {
            self.plain.push(wire::ACCEPTED);
            self.reading = Reading::Idle;
            self.read_deadline = Some(self.now + self.config.idle_timeout);
        } else {
            self.stop_reading();
            self.plain.push(wire::ACCEPTED_CLOSE);
            self.close_after_plain = true;
        }
    }
}

impl<S: CallStore> crate::drive::Endpoint for HttpServer<'_, S> {
    fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        HttpServer::recv(self, input, now)
    }

    fn wants_transmit(&self) -> bool {
        HttpServer::wants_transmit(self)
    }

    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        HttpServer::poll_transmit(self, out)
    }

    fn is_waiting(&self) -> bool {
        HttpServer::is_waiting(self)
    }
}

impl<S: CallStore> super::ServerEngine for HttpServer<'_, S> {
    forward_server_engine!(HttpServer);
}
