//! One connection: a server engine's run loop over any `embedded-io-async`
//! connection (an embassy-net `TcpSocket`, another network stack's socket,
//! a serial link), for any binding of the core: the gRPC tunnel
//! ([`Server`]), Streamable HTTP over HTTP/1.1 ([`HttpServer`]), both on
//! one port as a `Wire` chosen by the first octets, or stdio
//! ([`StdioServer`], newline-delimited JSON-RPC).
//!
//! The loop follows [`mcpwire_core::drive`]: feed what was read with
//! [`Feed`] until it is consumed (draining events after every step), hand
//! the engine's output to the writer while it `wants_transmit`, and
//! otherwise sleep until input arrives, a handler has output, or the
//! engine's `poll_timeout` passes. When the engine waits for the
//! application ([`Step::Wait`]: every call is taken), the unread input is
//! kept and nothing more is read until a handler answers. Every MCP
//! decision (routing, listen, authorization challenges, error texts) is
//! the engine's; this module only moves octets and hands tool calls to the
//! handler slots, through the [`ServerEngine`] methods both bindings share.
//!
//! The seam is [`Read`] + [`Write`], not `BufRead`: embassy-net's
//! `TcpSocket` (the connection this driver exists for) implements no
//! `BufRead`, and an in-place reader could not lend its buffer across the
//! writes the engine may need before it takes more input. The copy goes
//! through a small staging buffer the caller lends (the TCP convenience
//! carves it out of the socket's transmit buffer), so the RAM stays the
//! caller's.

use core::future::{pending, poll_fn};
use core::task::Poll;

use embassy_futures::select::{Either4, select4};
use embassy_time::{Timer, with_timeout};
use embedded_io_async::{Read, Write};
use mcpwire_core::drive::{self, Endpoint, Feed, Step};
use mcpwire_core::mcp::auth::Decision as AuthDecision;
use mcpwire_core::mcp::server::{
    CallId, Failure, HttpServer, RequestKind, SendError, Server, ServerEngine, ServerEvent,
    StdioServer,
};
use mcpwire_core::mcp::store::CallStore;
use mcpwire_core::mcp::tool::Tools;
use mcpwire_core::time::Instant;

use crate::handler::{Assign, Outcome, Phase, Slot};

/// Why a connection ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConnectionError {
    /// Writing to the connection failed.
    Write,
    /// The peer took none of the output within [`Config::send_timeout`](crate::Config::send_timeout).
    SendTimeout,
    /// The engine took no input while it had no output to send, or had
    /// output it did not write (a bug).
    Stuck,
    /// A staging buffer is empty: nothing can be read or written.
    NoStaging,
}

/// The core's clock: embassy-time's, in microseconds since boot.
pub(crate) fn now() -> Instant {
    Instant::from_micros(embassy_time::Instant::now().as_micros())
}

fn to_embassy(at: Instant) -> embassy_time::Instant {
    embassy_time::Instant::from_micros(at.as_micros())
}

/// What the run loop needs of an engine beyond the application's side
/// ([`ServerEngine`]) and the octets ([`Endpoint`]): the end of input,
/// time, and when the connection is over. The core names these alike on
/// both bindings but has no trait for them.
pub(crate) trait Binding: ServerEngine + Endpoint {
    fn recv_eof(&mut self);
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
    /// Whether the loop ends (`eof`: the input ended).
    fn is_over(&self, eof: bool) -> bool;
    /// The server shuts down: no new call, listen streams end with their
    /// result, the calls in progress finish. Whether the input is over
    /// too (nothing more is read).
    fn go_away(&mut self) -> bool;
}

impl<S: CallStore, const STREAMS: usize, const TABLE: usize, const BUF: usize> Binding
    for Server<'_, S, STREAMS, TABLE, BUF>
{
    fn recv_eof(&mut self) {
        Server::recv_eof(self);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Server::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Server::handle_timeout(self, now);
    }
    /// The peer is gone with the input: its calls end with the connection.
    fn is_over(&self, eof: bool) -> bool {
        eof || self.is_closed()
    }
    /// GOAWAY; the client may still reset its calls or send their
    /// messages.
    fn go_away(&mut self) -> bool {
        Server::go_away(self);
        false
    }
}

impl<S: CallStore, const CALLS: usize> Binding for StdioServer<'_, S, CALLS> {
    fn recv_eof(&mut self) {
        StdioServer::recv_eof(self);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        StdioServer::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        StdioServer::handle_timeout(self, now);
    }
    /// The end of input only closes stdin: the calls in progress finish
    /// and their answers are written first.
    fn is_over(&self, _: bool) -> bool {
        self.is_finished()
    }
    /// As at the end of input: a shut-down server reads no more requests.
    fn go_away(&mut self) -> bool {
        StdioServer::recv_eof(self);
        true
    }
}

impl<S: CallStore> Binding for HttpServer<'_, S> {
    fn recv_eof(&mut self) {
        HttpServer::recv_eof(self);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        HttpServer::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        HttpServer::handle_timeout(self, now);
    }
    /// The end of input cancels the exchange in progress; the binding's
    /// own answer, if any, goes out first.
    fn is_over(&self, _: bool) -> bool {
        self.is_finished()
    }
    /// The exchange in progress finishes; the engine stops reading.
    fn go_away(&mut self) -> bool {
        HttpServer::go_away(self);
        false
    }
}

pub(crate) struct Conn<
    'a,
    T: Tools,
    E: Binding,
    const HANDLERS: usize,
    const ARGS: usize,
    const RESULT: usize,
> {
    pub(crate) server: &'a crate::Server<'a, T, HANDLERS, ARGS, RESULT>,
    pub(crate) engine: E,
    /// This connection's mark on the handler slots it uses.
    pub(crate) token: u32,
}

impl<'a, T: Tools, E: Binding, const HANDLERS: usize, const ARGS: usize, const RESULT: usize>
    Conn<'a, T, E, HANDLERS, ARGS, RESULT>
{
    /// Runs the connection until the engine is over (the tunnel: the peer
    /// closes it, by end of file or a read error, or the engine closes it;
    /// stdio: the input ended and every call is answered), or a write
    /// fails. `staging` holds the octets between `io` and the engine: half
    /// in, half out; the input half starts with `first` octets already
    /// read.
    ///
    /// `io`'s `read` must be cancel-safe (a read dropped before it
    /// completes loses nothing), as embassy-net's sockets are: the loop
    /// races it with the handlers and the timer. Its `write` must deliver
    /// without a `flush` (the loop never flushes: on TCP a flush waits for
    /// the peer's acknowledgement).
    pub(crate) async fn drive<Io: Read + Write>(
        &mut self,
        io: &mut Io,
        staging: &mut [u8],
        first: usize,
    ) -> Result<(), ConnectionError> {
        let (input, output) = staging.split_at_mut(staging.len() / 2);
        if input.is_empty() || output.is_empty() {
            return Err(ConnectionError::NoStaging);
        }
        self.server.handlers_started().await;
        let mut eof = false;
        let server = self.server;
        let mut stop = server.stop.wait();
        let mut stopping = false;
        // Read but not yet consumed: `input[start..end]` (the first
        // `first` octets were read by the sniffing).
        let (mut start, mut end) = (0, first.min(input.len()));
        loop {
            // The engine waits for a handler's answer before it takes more.
            let mut waiting = false;
            if start < end {
                let mut feed = Feed::new(&input[start..end]);
                loop {
                    let step = feed.step(&mut self.engine, now());
                    self.drain_events();
                    match step {
                        Step::Consumed => {}
                        // The engine takes more once its output is out.
                        Step::Transmit | Step::Done => break,
                        Step::Wait => {
                            waiting = true;
                            break;
                        }
                        Step::Stuck => {
                            warn!("mcpwire: the engine consumes no input");
                            return Err(ConnectionError::Stuck);
                        }
                    }
                }
                start = end - feed.rest().len();
            }
            // Written lines may free calls: feed again after them.
            let wrote = self.transmit(io, output).await?;
            if self.engine.is_over(eof) {
                return Ok(());
            }
            if start < end && (wrote || !waiting) {
                continue;
            }
            // Read only when everything read is consumed.
            let read = start == end && !eof;
            let reader = async {
                match read {
                    true => io.read(input).await,
                    false => pending().await,
                }
            };
            let engine = &self.engine;
            let timer = async move {
                match engine.poll_timeout() {
                    Some(at) => Timer::at(to_embassy(at)).await,
                    None => pending::<()>().await,
                }
            };
            let stopped = async {
                match stopping {
                    false => (&mut stop).await,
                    true => pending().await,
                }
            };
            match select4(reader, server.outputs(self.token), timer, stopped).await {
                Either4::First(Ok(n)) if n > 0 => (start, end) = (0, n),
                // End of file, or the peer reset the connection.
                Either4::First(_) => {
                    eof = true;
                    self.engine.recv_eof();
                    self.drain_events();
                }
                Either4::Second(()) => self.flush_handlers(),
                Either4::Third(()) => {
                    self.engine.handle_timeout(now());
                    self.drain_events();
                }
                Either4::Fourth(()) => {
                    stopping = true;
                    if self.engine.go_away() {
                        eof = true;
                    }
                    self.drain_events();
                }
            }
        }
    }

    /// Writes the engine's output until it has none; events after every
    /// chunk (an emptied buffer lets blocked calls go on, and they may
    /// queue more). Whether it wrote anything.
    async fn transmit<W: Write>(
        &mut self,
        io: &mut W,
        output: &mut [u8],
    ) -> Result<bool, ConnectionError> {
        let mut wrote = false;
        while self.engine.wants_transmit() {
            let n = drive::fill(&mut self.engine, output);
            self.drain_events();
            if n == 0 {
                // It wants to send but writes nothing: a bug, not a wait.
                warn!("mcpwire: the engine has output it does not write");
                return Err(ConnectionError::Stuck);
            }
            // Nothing is read while a write waits: a peer that does not
            // read stops its own input, and is dropped after the send
            // timeout (its calls hold handler slots meanwhile).
            let write = io.write_all(&output[..n]);
            match self.server.config.send_timeout {
                Some(limit) => with_timeout(limit, write)
                    .await
                    .map_err(|_| ConnectionError::SendTimeout)?,
                None => write.await,
            }
            .map_err(|_| ConnectionError::Write)?;
            wrote = true;
        }
        Ok(wrote)
    }

    /// Handles every queued engine event.
    fn drain_events(&mut self) {
        while let Some(event) = self.engine.poll_event() {
            match event {
                ServerEvent::Request { call } => self.start(call),
                // Only with tokens configured; the core maps the decision
                // to the wire.
                ServerEvent::Authorize { call } => {
                    #[cfg(feature = "auth")]
                    let decision = match &self.server.config.tokens {
                        Some(tokens) => tokens.check(self.engine.bearer_token(call)),
                        None => AuthDecision::Unauthenticated,
                    };
                    // Without the feature `authorize` is never set.
                    #[cfg(not(feature = "auth"))]
                    let decision = AuthDecision::Unauthenticated;
                    self.engine.authorize(call, decision);
                }
                ServerEvent::Cancelled { call, .. } => {
                    if let Some(slot) = self.slot_of(call) {
                        slot.with(|s| s.cancel());
                    }
                }
                ServerEvent::Writable { call } => {
                    if let Some(slot) = self.slot_of(call) {
                        slot.with(|s| s.blocked = false);
                        self.flush_slot(slot);
                    }
                }
                ServerEvent::ConnectionClosed { .. } => self.release_all(),
            }
        }
    }

    /// Hands a request to a free handler slot, or answers the core's
    /// failure.
    fn start(&mut self, call: CallId) {
        let server: &'a crate::Server<'a, T, HANDLERS, ARGS, RESULT> = self.server;
        let Some(request) = self.engine.request(call) else {
            return;
        };
        let failure = match request.kind {
            RequestKind::CallTool {
                tool, arguments, ..
            } => {
                let token = request.progress_token();
                let mut failure = Some(Failure::Busy);
                for slot in &server.slots {
                    match slot.assign(self.token, call, tool, arguments.raw(), token) {
                        Assign::Started => {
                            debug!("mcpwire: tool {} started", tool);
                            failure = None;
                            break;
                        }
                        Assign::TooLarge => {
                            failure = Some(Failure::ArgumentsTooLarge);
                            break;
                        }
                        Assign::Busy => {}
                    }
                }
                failure
            }
            // The registry offers tools only: the engine routes nothing
            // else here.
            _ => Some(Failure::HandlerFailed),
        };
        if let Some(failure) = failure {
            if failure == Failure::Busy {
                warn!("mcpwire: every handler is busy");
            }
            let _ = self.engine.fail(call, failure);
        }
    }

    /// The slot running `call` for this connection.
    fn slot_of(&self, call: CallId) -> Option<&'a Slot<ARGS, RESULT>> {
        let server: &'a crate::Server<'a, T, HANDLERS, ARGS, RESULT> = self.server;
        server
            .slots
            .iter()
            .find(|slot| slot.with(|s| s.owner == self.token && s.call == Some(call)))
    }

    /// Takes what the handlers of this connection's calls have for it.
    fn flush_handlers(&mut self) {
        let server: &'a crate::Server<'a, T, HANDLERS, ARGS, RESULT> = self.server;
        for slot in &server.slots {
            if slot.with(|s| s.owner == self.token) {
                self.flush_slot(slot);
            }
        }
        self.drain_events();
    }

    /// Hands the slot's progress notification, then its outcome, to the
    /// engine, until the engine is busy (a notification first, the answer
    /// last).
    fn flush_slot(&mut self, slot: &Slot<ARGS, RESULT>) {
        let engine = &mut self.engine;
        let token = self.token;
        slot.with(|s| {
            let Some(call) = s.call.filter(|_| s.owner == token && !s.blocked) else {
                return;
            };
            if s.note_pending {
                match engine.progress(call, &s.note[..s.note_len]) {
                    // A notification that cannot fit is dropped.
                    Ok(()) | Err(SendError::TooLarge { .. }) => {
                        s.note_pending = false;
                        s.wake_handler();
                    }
                    Err(SendError::Busy) => {
                        s.blocked = true;
                        return;
                    }
                    Err(SendError::Gone) => {
                        s.cancel();
                        return;
                    }
                }
            }
            let Phase::Done(outcome) = s.phase else {
                return;
            };
            let sent = match outcome {
                Outcome::Result(len) => match slot.io.try_lock() {
                    // Too large: the engine answers -32603 itself.
                    Ok(io) => engine.respond(call, &io.result[..len]),
                    // The handler lets go of the buffers before it
                    // reports; try again at the next wake.
                    Err(_) => return,
                },
                Outcome::Error(e) => match engine.respond_error(call, e.code, e.message, None) {
                    // The tool's error does not fit the call's buffer.
                    Err(SendError::TooLarge { .. }) => engine.fail(call, Failure::ResultTooLarge),
                    sent => sent,
                },
                Outcome::Failed(failure) => engine.fail(call, failure),
            };
            match sent {
                Err(SendError::Busy) => s.blocked = true,
                Ok(()) | Err(SendError::Gone | SendError::TooLarge { .. }) => s.release(),
            }
        });
    }

    /// Ends the connection's calls (dropping them stops their handlers)
    /// and logs how it ended.
    pub(crate) fn end(&self, ended: Result<(), ConnectionError>) {
        self.release_all();
        match ended {
            Ok(()) => info!("mcpwire: connection {} closed", self.token),
            Err(e) => warn!("mcpwire: connection {} failed: {:?}", self.token, e),
        }
    }

    /// Ends every call of this connection (it is closing).
    pub(crate) fn release_all(&self) {
        for slot in &self.server.slots {
            slot.with(|s| {
                if s.owner == self.token {
                    s.cancel();
                }
            });
        }
    }
}

impl<T: Tools, const HANDLERS: usize, const ARGS: usize, const RESULT: usize>
    crate::Server<'_, T, HANDLERS, ARGS, RESULT>
{
    /// Completes when a handler slot owned by connection `token` has
    /// output for it.
    fn outputs(&self, token: u32) -> impl core::future::Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            let mut ready = false;
            for slot in &self.slots {
                ready |= slot.poll_output(token, cx.waker());
            }
            if ready {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}
