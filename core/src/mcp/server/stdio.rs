//! The stdio binding of the server engine (MCP 2026-07-28 §6), sans-IO:
//! newline-delimited JSON-RPC over one byte pipe in each direction (a
//! child process's stdin and stdout, or a serial line).
//!
//! Every message is one line of UTF-8 JSON with no embedded newline.
//! Requests, responses and notifications share the channel; ids correlate
//! them. Each request is a call of the engine, as on the other bindings;
//! its line is collected straight into the call's buffer, its answers are
//! written there as lines, and a line is never interleaved with another.
//!
//! The binding's own answers:
//!
//! - a line that is not UTF-8 or not JSON: -32700 with id `null`;
//! - an array (a batch), a response or anything else that is not a request
//!   or a notification: -32600 with id `null`; a request whose id is in use
//!   by a request in progress: -32600;
//! - a line over [`StdioConfig::max_line_bytes`]: -32600 with id `null` once
//!   its newline arrives; reading goes on from the next line;
//! - errors the other bindings put in their protocol answer (a bad
//!   `_meta`, an unsupported version) are ordinary error responses here;
//!   there are no headers to mirror;
//! - `notifications/cancelled` names a request in progress: its handler is
//!   cancelled ([`super::CancelReason::Reset`]) and no response is sent;
//! - a request past its deadline ([`StdioConfig::request_timeout`]) is
//!   cancelled and answered -32001.
//!
//! End of input ([`StdioServer::recv_eof`]) takes a last line without a
//! newline as a line, ends the listen streams with their result and lets
//! the calls in progress finish; [`StdioServer::is_finished`] says when
//! everything is answered and written; [`StdioServer::close`] cancels what
//! is left (a driver calls it after its grace period).
//!
//! When every call record or buffer is taken, `recv` stops consuming and
//! [`StdioServer::is_waiting`] is true: the driver stops reading until the
//! application answers a call (the pipe's own flow control pushes back on
//! the client).

use core::ops::Range;
use core::time::Duration;

use super::engine::{Call, Dispatched, Engine, Framing, ListenNext, Next, Phase};
use super::listen::ListChange;
use super::request::Request;
use super::{CallId, CancelReason, Failure, SendError, ServerEvent, dispatch};
use crate::mcp::auth::Decision;
use crate::mcp::envelope::{Message, Spans};
use crate::mcp::error::{INVALID_REQUEST, PARSE_ERROR, RpcError};
use crate::mcp::json;
use crate::mcp::registry::Registry;
use crate::mcp::store::CallStore;
use crate::records::InlineRecords;
use crate::time::Instant;

/// The JSON-RPC code of a request the server timed out (the one the MCP
/// SDKs use for a request timeout).
pub const REQUEST_TIMEOUT: i32 = -32001;

/// Settings of the stdio binding.
#[derive(Debug, Clone, Copy)]
pub struct StdioConfig {
    /// The longest line accepted (also capped by the call store's largest
    /// buffer). Default 4 MiB.
    pub max_line_bytes: usize,
    /// How long a request may run. Default 60 s.
    pub request_timeout: Duration,
}

impl Default for StdioConfig {
    fn default() -> Self {
        Self {
            max_line_bytes: 4 << 20,
            request_timeout: Duration::from_secs(60),
        }
    }
}

/// Each message is one line.
struct LineFraming;

impl Framing for LineFraming {
    const ROOM: usize = 0;
    const TAIL: &'static [u8] = b"\n";
    const ONE_LINE: bool = true;

    fn frame(_: &mut [u8], _: usize) -> usize {
        0
    }
}

type Records<S, const CALLS: usize> = InlineRecords<Option<Call<<S as CallStore>::Buf, ()>>, CALLS>;
type Cancellations<const CALLS: usize> = InlineRecords<Option<(CallId, CancelReason)>, CALLS>;

/// The line being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Between lines.
    Idle,
    /// Collecting a line into call `call`'s buffer; `len` octets so far.
    Line { call: usize, len: usize },
    /// The line is over the limit: its octets are dropped up to the
    /// newline, then call `call` answers the error.
    Skipping { call: usize },
    /// No call was free: the line's first `len` octets are held (whole when
    /// `complete`). A notification held whole is acted on at once (a
    /// cancellation needs no call); anything else waits for a call.
    Holding { len: usize, complete: bool },
}

/// Octets of a line held while every call is taken: room for a
/// cancellation, whose handling frees a call.
const HELD: usize = 256;

/// A stdio server: at most `CALLS` requests in progress (and listen
/// streams), each in a buffer from the [`CallStore`] `S`.
pub struct StdioServer<'r, S: CallStore, const CALLS: usize> {
    engine: Engine<'r, S, (), Records<S, CALLS>, Cancellations<CALLS>, LineFraming>,
    config: StdioConfig,
    now: Instant,
    reading: Reading,
    held: [u8; HELD],
    /// The call whose line is being written.
    writing: Option<usize>,
    /// Where the next search for output starts (calls take turns).
    cursor: usize,
    /// `recv` stopped for want of a call record or buffer.
    waiting: bool,
    eof: bool,
}

impl<S: CallStore, const CALLS: usize> core::fmt::Debug for StdioServer<'_, S, CALLS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StdioServer")
            .field("reading", &self.reading)
            .field("writing", &self.writing)
            .field("eof", &self.eof)
            .finish_non_exhaustive()
    }
}

impl<'r, S: CallStore, const CALLS: usize> StdioServer<'r, S, CALLS> {
    pub fn new(registry: Registry<'r>, config: StdioConfig, store: S, now: Instant) -> Self {
        Self {
            engine: Engine::new(registry, store, config.request_timeout, false, false),
            config,
            now,
            reading: Reading::Idle,
            held: [0; HELD],
            writing: None,
            cursor: 0,
            waiting: false,
            eof: false,
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

    /// Feeds octets read from the pipe; returns how many were consumed.
    /// Less than all when every call is taken: see [`StdioServer::is_waiting`].
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        self.now = now;
        self.waiting = false;
        let mut pos = 0;
        while pos < input.len() && !self.eof {
            let rest = &input[pos..];
            if self.reading == Reading::Idle {
                // White space between messages (a blank line, `\r\n`).
                if matches!(rest[0], b'\n' | b'\r' | b' ' | b'\t') {
                    pos += 1;
                    continue;
                }
                self.reading = Reading::Holding {
                    len: 0,
                    complete: false,
                };
            }
            if let Reading::Holding { len, complete } = self.reading {
                if self.take_call(now) {
                    continue;
                }
                if complete {
                    self.waiting = true;
                    break;
                }
                // Every call is taken: hold the line's start.
                let newline = rest.iter().position(|&b| b == b'\n');
                let chunk = &rest[..newline.unwrap_or(rest.len())];
                let Some(room) = self.held.get_mut(len..len + chunk.len()) else {
                    self.waiting = true;
                    break;
                };
                room.copy_from_slice(chunk);
                pos += chunk.len() + usize::from(newline.is_some());
                self.reading = Reading::Holding {
                    len: len + chunk.len(),
                    complete: newline.is_some(),
                };
                if newline.is_some() && !self.notification_held() {
                    self.waiting = true;
                    break;
                }
                continue;
            }
            let newline = rest.iter().position(|&b| b == b'\n');
            let chunk = &rest[..newline.unwrap_or(rest.len())];
            pos += chunk.len() + usize::from(newline.is_some());
            match self.reading {
                Reading::Line { call, len } => {
                    let total = len + chunk.len();
                    let room = (total <= self.config.max_line_bytes)
                        .then(|| self.engine.message_room(call, total))
                        .flatten();
                    match room {
                        Some(room) => {
                            room[len..].copy_from_slice(chunk);
                            self.reading = Reading::Line { call, len: total };
                        }
                        None => self.reading = Reading::Skipping { call },
                    }
                }
                Reading::Skipping { .. } | Reading::Idle | Reading::Holding { .. } => {}
            }
            if newline.is_some() {
                self.end_line();
            }
        }
        pos
    }

    /// Whether `recv` stopped because every call record or buffer is taken:
    /// feed the rest after the application answers a call.
    pub fn is_waiting(&self) -> bool {
        self.waiting
    }

    /// The input ended: a last line without a newline is taken as a line,
    /// listen streams end with their result, and the calls in progress
    /// finish.
    pub fn recv_eof(&mut self) {
        if self.eof {
            return;
        }
        self.end_line();
        self.eof = true;
        self.engine.end_listens();
        for i in 0..CALLS {
            self.after_line(i);
        }
    }

    /// Whether the input ended and everything is answered and written.
    pub fn is_finished(&self) -> bool {
        self.eof && self.reading == Reading::Idle && self.engine.calls.iter().all(Option::is_none)
    }

    /// Cancels every call in progress and drops what was not written.
    pub fn close(&mut self) {
        self.eof = true;
        self.reading = Reading::Idle;
        self.writing = None;
        self.engine.close(None);
    }

    /// The next deadline of a call.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.engine.next_deadline()
    }

    /// Lets time pass: calls past their deadline are cancelled and
    /// answered -32001.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        while let Some(i) = self.engine.expired(now) {
            if matches!(self.reading, Reading::Line { call, .. } | Reading::Skipping { call } if call == i)
            {
                // Still being read: a slow writer is not a slow handler.
                continue;
            }
            if self.writing == Some(i) {
                // Its line is half written: the timeout answer would cut
                // it; the call ends after it.
                self.engine.finish(i);
                continue;
            }
            let e = RpcError::new(REQUEST_TIMEOUT, "Request timed out");
            if self.engine.answer_error(i, e) == Dispatched::Failed {
                self.engine.remove(i);
            }
        }
    }

    /// Whether [`StdioServer::poll_transmit`] has anything to write.
    pub fn wants_transmit(&self) -> bool {
        (0..self.engine.calls.len()).any(|i| !self.engine.output(i).is_empty())
    }

    /// Writes whole lines, and the start of the next, into `out`; call while
    /// [`StdioServer::wants_transmit`].
    pub fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        let mut n = 0;
        while n < out.len() {
            let i = match self.writing {
                Some(i) => i,
                None => match self.next_output() {
                    Some(i) => i,
                    None => break,
                },
            };
            let line = self.engine.output(i);
            let k = line.len().min(out.len() - n);
            out[n..n + k].copy_from_slice(&line[..k]);
            self.engine.sent(i, k);
            n += k;
            if self.engine.output(i).is_empty() {
                self.writing = None;
                self.after_line(i);
            } else {
                self.writing = Some(i);
            }
        }
        n
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.engine.poll_event()
    }

    /// The request of a call the application handles, until the next
    /// `&mut` call.
    pub fn request(&self, call: CallId) -> Option<Request<'_>> {
        self.engine.request(call)
    }

    /// No bearer tokens on stdio: the process boundary is the trust
    /// boundary (the client launched this server).
    pub fn bearer_token(&self, _call: CallId) -> Option<&str> {
        None
    }

    /// Authorization never runs on stdio (no `Authorize` event is made).
    pub fn authorize(&mut self, _call: CallId, _decision: Decision<'_>) {}

    /// Answers the request with `result` (a JSON object). A result larger
    /// than the call store can hold is answered -32603 instead (and
    /// `TooLarge` returned).
    pub fn respond(&mut self, call: CallId, result: &[u8]) -> Result<(), SendError> {
        let (next, sent) = self.engine.respond(call, result);
        if let Next::Drop(i) = next {
            self.engine.remove(i);
        }
        sent
    }

    /// Answers the request with a JSON-RPC error; `data` is raw JSON.
    pub fn respond_error(
        &mut self,
        call: CallId,
        code: i32,
        message: &str,
        data: Option<&[u8]>,
    ) -> Result<(), SendError> {
        self.engine
            .respond_error(call, code, message, data)
            .map(drop)
    }

    /// Answers the request with the error the core names for a driver-side
    /// failure.
    pub fn fail(&mut self, call: CallId, failure: Failure) -> Result<(), SendError> {
        let e = failure.error();
        self.respond_error(call, e.code, e.message, None)
    }

    /// Sends a notification for the request (progress).
    pub fn notify(&mut self, call: CallId, method: &str, params: &[u8]) -> Result<(), SendError> {
        self.engine.notify(call, method, params).map(drop)
    }

    /// Whether a listen stream is open.
    pub fn is_listening(&self) -> bool {
        self.engine.is_listening()
    }

    /// Announces a change to every listen stream whose filter wants it;
    /// returns how many streams it goes to (see
    /// [`super::Server::publish`]).
    pub fn publish(&mut self, change: ListChange<'_>) -> usize {
        self.engine.publish(&change)
    }

    // ------------------------------------------------------------------

    /// A line ended (its newline arrived, or the input did).
    fn end_line(&mut self) {
        match core::mem::replace(&mut self.reading, Reading::Idle) {
            Reading::Idle => {}
            // Only at end of input: the held start is the whole last line.
            Reading::Holding { len, .. } => {
                self.reading = Reading::Holding {
                    len,
                    complete: true,
                };
                if !self.notification_held() {
                    let now = self.now;
                    self.take_call(now);
                }
            }
            Reading::Skipping { call } => {
                let e = RpcError::new(INVALID_REQUEST, "line longer than the server's limit");
                self.answer(call, e);
            }
            Reading::Line { call, len } => self.on_line(call, len),
        }
    }

    /// A whole line is in call `i`'s buffer.
    fn on_line(&mut self, i: usize, len: usize) {
        let Some(c) = self.engine.calls.get(i).and_then(Option::as_ref) else {
            return;
        };
        let body = c.body;
        let mut line = &self.engine.store.bytes(&c.buf)[body..body + len];
        while let [rest @ .., b'\r' | b' ' | b'\t'] = line {
            line = rest;
        }
        let at = body..body + line.len();
        if core::str::from_utf8(line).is_err() {
            return self.answer(i, RpcError::new(PARSE_ERROR, "Parse error: not UTF-8"));
        }
        // One parse: its spans serve the checks here and the engine's.
        let spans = match self.engine.parse(i, at.clone()) {
            Some(Ok(spans)) => spans,
            Some(Err(e)) => {
                // A message that is JSON, but not a valid request.
                if e.code == INVALID_REQUEST {
                    self.engine.keep_id(i, at);
                }
                return self.answer(i, e);
            }
            None => return,
        };
        match spans {
            Spans::Notification => {
                let line = self.line(i, at);
                let [method, params] = json::get_all(line, [b"method", b"params"]);
                let cancelled = method.and_then(|m| self.cancelled_call(m, params));
                self.engine.remove(i);
                if let Some(j) = cancelled {
                    self.cancel(j);
                }
            }
            Spans::Response => self.answer(
                i,
                RpcError::new(INVALID_REQUEST, "a server takes requests, not responses"),
            ),
            Spans::Request(r) => {
                let id = at.start + r.id.start..at.start + r.id.end;
                if self.engine.find_by_id(self.line(i, id)).is_some() {
                    return self.answer(
                        i,
                        RpcError::new(INVALID_REQUEST, "id in use by a request in progress"),
                    );
                }
                match self.engine.dispatch_request(i, at, r) {
                    Dispatched::Protocol(e) => {
                        if self.engine.answer_error(i, e) == Dispatched::Failed {
                            self.engine.remove(i);
                        }
                    }
                    Dispatched::Notification | Dispatched::Failed => {
                        self.engine.remove(i);
                    }
                    Dispatched::Written | Dispatched::Handed => {}
                }
            }
        }
    }

    /// Octets `at` of call `i`'s buffer.
    fn line(&self, i: usize, at: Range<usize>) -> &[u8] {
        self.engine
            .calls
            .get(i)
            .and_then(Option::as_ref)
            .and_then(|c| self.engine.store.bytes(&c.buf).get(at))
            .unwrap_or_default()
    }

    /// The call a `notifications/cancelled` names, if it is one.
    fn cancelled_call(&self, method: &[u8], params: Option<&[u8]>) -> Option<usize> {
        json::str_eq(method, b"notifications/cancelled")
            .then(|| params.and_then(|p| json::get(p, b"requestId")))
            .flatten()
            .and_then(|id| self.engine.find_by_id(id))
    }

    /// A held line whole in the buffer that is a notification is acted on
    /// and dropped; whether it was one.
    fn notification_held(&mut self) -> bool {
        let Reading::Holding { len, .. } = self.reading else {
            return false;
        };
        let mut line = &self.held[..len];
        while let [rest @ .., b'\r' | b' ' | b'\t'] = line {
            line = rest;
        }
        if core::str::from_utf8(line).is_err() {
            return false;
        }
        let Ok(Message::Notification { method, params }) =
            Message::parse(line, dispatch::MAX_DEPTH)
        else {
            return false;
        };
        if let Some(j) = self.cancelled_call(method, params) {
            self.cancel(j);
        }
        self.reading = Reading::Idle;
        true
    }

    /// Gives a held line a call, when one is free: its octets move into the
    /// call's buffer and reading goes on there (a whole line is acted on).
    /// Whether it got one.
    fn take_call(&mut self, now: Instant) -> bool {
        let Reading::Holding { len, complete } = self.reading else {
            return false;
        };
        let Ok(call) = self.engine.admit(&[], None, now, ()) else {
            return false;
        };
        let held = &self.held[..len];
        match self.engine.message_room(call, len) {
            Some(room) => {
                room.copy_from_slice(held);
                self.reading = Reading::Line { call, len };
            }
            None => self.reading = Reading::Skipping { call },
        }
        if complete {
            self.end_line();
        }
        true
    }

    /// Answers call `i` with an error found before its request was read
    /// (id `null`).
    fn answer(&mut self, i: usize, e: RpcError) {
        if self.engine.answer_error(i, e) == Dispatched::Failed {
            self.engine.remove(i);
        }
    }

    /// The client cancelled call `j`: its handler stops and it gets no
    /// response. A line of it already being written is finished first.
    fn cancel(&mut self, j: usize) {
        self.engine.cancel(j, CancelReason::Reset);
        if self.writing == Some(j) {
            // Finishing: no answer can be added, and the call ends after
            // the line.
            self.engine.finish(j);
        } else {
            self.engine.remove(j);
        }
    }

    /// The next call with a line to write.
    fn next_output(&mut self) -> Option<usize> {
        let n = self.engine.calls.len();
        let i = (0..n)
            .map(|k| (self.cursor + k) % n)
            .find(|&i| !self.engine.output(i).is_empty())?;
        self.cursor = i + 1;
        Some(i)
    }

    /// Call `i`'s line went out: end it, or start a listen stream's next.
    fn after_line(&mut self, i: usize) {
        if !self.engine.output(i).is_empty() {
            return;
        }
        match self.engine.phase(i) {
            Some(Phase::Finishing) => {
                self.engine.remove(i);
                // A held line takes the freed call.
                let now = self.now;
                self.take_call(now);
            }
            Some(Phase::Listening) if self.engine.next_listen(i) == ListenNext::Failed => {
                self.engine.remove(i);
            }
            _ => {}
        }
    }
}

impl<S: CallStore, const CALLS: usize> crate::drive::Endpoint for StdioServer<'_, S, CALLS> {
    fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        StdioServer::recv(self, input, now)
    }

    fn wants_transmit(&self) -> bool {
        StdioServer::wants_transmit(self)
    }

    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        StdioServer::poll_transmit(self, out)
    }

    fn is_waiting(&self) -> bool {
        StdioServer::is_waiting(self)
    }
}

impl<S: CallStore, const CALLS: usize> super::ServerEngine for StdioServer<'_, S, CALLS> {
    forward_server_engine!(StdioServer);
}
