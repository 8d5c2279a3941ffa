//! The stdio binding's [`ClientEngine`]: a [`StdioClient`] (every rule of
//! the binding's client side lives there) over a server's pipes, one link
//! at a time: the driver's child process (or serial device), asked for at
//! [`open`](ClientEngine::open) or the first call.
//!
//! A call's line is written into a buffer of the call store when it
//! starts and goes out after the lines before it; a line cut by a cancel
//! is finished first (a half line would garble the next), and the line of
//! a call that ended before a byte of it went out is dropped. Lines that
//! wait for the server to read them hold at most
//! [`max_line_bytes`](super::StdioClientConfig::max_line_bytes): past it
//! new calls wait ([`StartError::Busy`]), so a server that stops reading
//! holds a bounded backlog. At most half of the calls are listen streams
//! (they last as long as their callers keep them, and would leave calls
//! no turn).
//!
//! A server that stops (its stdout closed: it exited or crashed) fails
//! its calls in flight and is started again as the [`RestartPolicy`]
//! says: after a backoff, within a budget per window; past the budget the
//! restarts pause until it refills, every call refused meanwhile with the
//! reason and the time left ([`StartError::Down`]); before any server was
//! ready, or with restarts off, the engine gives up, for good. While a
//! new server starts, calls wait, or, with
//! [`StdioEngineConfig::refuse_while_restarting`], are refused at once
//! saying so. Listen streams outlive a restart: their lines go again to
//! the new server once it is ready. Each restart and pause is a
//! [`ClientEvent::Note`] for the operator.
//!
//! The line of a call that answers input requests
//! ([`CallOptions::answers_input`]) is kept once sent, in its buffer,
//! until the call ends: an `input_required` result's `requestState` is
//! copied after it as the result arrives (the result's text lives only
//! until the next `recv`), and the application's answers make the next
//! round's line there, which then takes the line's place and goes out.

use core::time::Duration;

use super::restart::{Next, RestartPolicy, Restarts, Text};
use super::{
    LOCAL_CLOSED, LOCAL_TIMEOUT, StdioClient, StdioClientConfig, StdioEvent, StdioStartError,
};
use crate::grpc::Code;
use crate::mcp::client::engine::{CallOptions, ClientEngine, LinkId, Negotiated};
use crate::mcp::client::era::EraDiagnostics;
use crate::mcp::client::events::{CallId, ClientEvent, Diagnostics, Failure, Skipped, StartError};
use crate::mcp::client::input;
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::time::Instant;

/// Room for the `_meta` the client merges into a request's line.
const META_ROOM: usize = 512;
/// Events owed to the driver.
const OWED: usize = 8;
/// Room for the client's own lines (the probe, `initialize`, a
/// cancellation), written whole and sent in whatever pieces the driver
/// asks for.
const OWN: usize = 2048;

/// Settings of the stdio engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdioEngineConfig {
    /// The binding's client settings.
    pub client: StdioClientConfig,
    /// When a server that stopped is started again.
    pub restart: RestartPolicy,
    /// While a new server starts (from the stop until it is ready), calls
    /// are refused at once ([`StartError::Down`]: "the server is
    /// restarting (attempt N of M)") instead of waiting for it. A bridge
    /// refuses: its host learns at once and chooses when to try again.
    /// Default off.
    pub refuse_while_restarting: bool,
}

/// A call's line on its way out.
struct Line<B> {
    call: CallId,
    buf: B,
    len: usize,
    sent: usize,
    /// The call was cancelled: the rest of its line still goes (a half
    /// line would garble the next), unless none of it went.
    cancelled: bool,
    /// A listen stream's: stays queued once sent, to go again to the next
    /// server.
    listen: bool,
    /// Kept once sent ([`Kept`]): the call answers input requests.
    keep: bool,
}

/// The line of a call that answers input requests, kept once sent (see
/// the module documentation): `len` octets of line, then the
/// `requestState` of the result that waits for an answer, when it had one.
struct Kept<B> {
    call: CallId,
    buf: B,
    len: usize,
    state: Option<(usize, usize)>,
}

/// The engine's link.
#[derive(Debug, Clone, Copy)]
struct Link {
    id: LinkId,
    up: bool,
    /// When it came up.
    since: Instant,
}

/// Where the engine is with its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    /// No server asked for yet.
    Idle,
    /// A server starts (its link is asked for, or runs the handshake).
    Starting,
    Ready,
    /// A server stopped: the next starts at this instant.
    Restarting(Instant),
    /// The budget is spent: the restarts pause until this instant.
    Paused(Instant),
    /// No server will come: `reason` says why.
    GaveUp,
}

/// The stdio client engine: `CALLS` calls at a time; `B` holds the line
/// being read (see [`StdioClient`]), `S` the lines going out.
pub struct StdioEngine<B, S: CallStore, const CALLS: usize> {
    client: StdioClient<B, CALLS>,
    config: StdioEngineConfig,
    store: S,
    link: Option<Link>,
    next_link: u32,
    life: Life,
    restarts: Restarts,
    /// The handshake ran on an earlier link: a new one goes on in the era
    /// it chose.
    begun: bool,
    /// A server got ready once.
    was_ready: bool,
    /// What the last `Skipped` was, for its text.
    skipped: Option<Skipped>,
    lines: [Option<Line<S::Buf>>; CALLS],
    /// The lines kept, by call slot.
    kept: [Option<Kept<S::Buf>>; CALLS],
    /// The client's own line on its way out: `own[sent..len]`.
    own: ([u8; OWN], usize, usize),
    /// The order of `lines` (indices, oldest first).
    order: [u8; CALLS],
    queued: usize,
    owed: [Option<ClientEvent>; OWED],
    /// Why calls are refused ([`StartError::Down`]).
    reason: Text,
    /// The last [`ClientEvent::Note`]'s text.
    note: Text,
    closing: bool,
    closed_told: bool,
    now: Instant,
}

impl<B, S: CallStore, const CALLS: usize> core::fmt::Debug for StdioEngine<B, S, CALLS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StdioEngine")
            .field("link", &self.link)
            .field("life", &self.life)
            .field("queued", &self.queued)
            .field("closing", &self.closing)
            .finish_non_exhaustive()
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>, S: CallStore, const CALLS: usize> StdioEngine<B, S, CALLS> {
    /// An engine with no link yet (the first call asks for one); `buf`
    /// holds the line being read, `store` the lines going out.
    pub fn new(config: StdioEngineConfig, buf: B, store: S, now: Instant) -> Self {
        const { assert!(CALLS <= u8::MAX as usize, "at most 255 calls") };
        let mut client = StdioClient::new(config.client, buf, now);
        client.set_keep_listens(config.restart.max_restarts > 0);
        Self {
            client,
            config,
            store,
            link: None,
            next_link: 0,
            life: Life::Idle,
            restarts: Restarts::new(config.restart),
            begun: false,
            was_ready: false,
            skipped: None,
            lines: [const { None }; CALLS],
            kept: [const { None }; CALLS],
            own: ([0; OWN], 0, 0),
            order: [0; CALLS],
            queued: 0,
            owed: [None; OWED],
            reason: Text::new(),
            note: Text::new(),
            closing: false,
            closed_told: false,
            now,
        }
    }

    /// The binding's client, for its era and state.
    pub fn client(&self) -> &StdioClient<B, CALLS> {
        &self.client
    }

    /// How many times a server was started again.
    pub fn restarts(&self) -> u64 {
        self.restarts.total
    }

    fn owe(&mut self, event: ClientEvent) {
        if let Some(free) = self.owed.iter_mut().find(|e| e.is_none()) {
            *free = Some(event);
        }
    }

    fn take_owed(&mut self) -> Option<ClientEvent> {
        let first = self.owed.first_mut()?.take()?;
        self.owed.rotate_left(1);
        Some(first)
    }

    fn note(&mut self, args: core::fmt::Arguments<'_>) {
        self.note.set(args);
        self.owe(ClientEvent::Note);
    }

    /// Asks the driver for a new link.
    fn relink(&mut self) {
        let id = LinkId(self.next_link);
        self.next_link = self.next_link.wrapping_add(1);
        self.link = Some(Link {
            id,
            up: false,
            since: self.now,
        });
        self.life = Life::Starting;
        self.owe(ClientEvent::Connect { link: id });
    }

    /// Lets go of the link: its calls failed (the client says how); the
    /// lines of listen streams stay for the next server.
    fn unlink(&mut self) {
        if let Some(link) = self.link.take() {
            self.owe(ClientEvent::Disconnect { link: link.id });
        }
        let mut held = 0;
        for i in 0..self.queued {
            let at = self.order[i];
            let listen = self.lines[usize::from(at)]
                .as_mut()
                .is_some_and(|l| l.listen && !l.cancelled);
            if listen {
                self.order[held] = at;
                held += 1;
            } else if let Some(line) = self.lines[usize::from(at)].take() {
                self.store.put(line.buf);
            }
        }
        self.queued = held;
        for kept in self.kept.iter_mut() {
            if let Some(k) = kept.take() {
                self.store.put(k.buf);
            }
        }
    }

    /// Lets go of `call`'s kept line.
    fn unkeep(&mut self, call: CallId) {
        let at = usize::from(call.index);
        if self
            .kept
            .get(at)
            .is_some_and(|k| k.as_ref().is_some_and(|k| k.call == call))
            && let Some(k) = self.kept[at].take()
        {
            self.store.put(k.buf);
        }
    }

    /// `call`'s server asks for input: the result's `requestState` is
    /// copied after the call's kept line (the result's text is gone at
    /// the next `recv`). `false`: it could not be (the call failed).
    fn keep_state(&mut self, call: CallId) -> bool {
        let at = usize::from(call.index);
        let Some(k) = self
            .kept
            .get_mut(at)
            .and_then(Option::as_mut)
            .filter(|k| k.call == call)
        else {
            self.client
                .fail_input(call, "the server answered before the request was written");
            return false;
        };
        let state = self
            .client
            .message(call)
            .and_then(|m| json::get(m, b"result"))
            .and_then(|r| input::InputRequired::read(r).ok()?.state);
        k.state = None;
        let Some(state) = state else {
            return true;
        };
        let (from, to) = (k.len, k.len + state.len());
        if !self.store.grow(&mut k.buf, to) {
            self.client.fail_input(
                call,
                "no room for the result's requestState in the call store",
            );
            return false;
        }
        match self.store.bytes_mut(&mut k.buf).get_mut(from..to) {
            Some(dst) => dst.copy_from_slice(state),
            None => return false,
        }
        k.state = Some((from, to));
        true
    }

    /// The server stopped (`at_once`: the probe left it unusable, start
    /// the next without a backoff): the next one as the policy says.
    fn stopped(&mut self, at_once: bool) {
        let ran = self.link.filter(|l| l.up).map_or(Duration::ZERO, |l| {
            self.now.saturating_duration_since(l.since)
        });
        self.unlink();
        if self.closing {
            return;
        }
        match self
            .restarts
            .after_stop(self.now, ran, self.was_ready, at_once)
        {
            Next::At(at) => {
                self.life = Life::Restarting(at);
                if self.config.refuse_while_restarting {
                    self.restarts.restarting(&mut self.reason);
                    self.owe(ClientEvent::Down);
                }
                if at <= self.now {
                    self.restart();
                }
            }
            Next::Paused(until) => {
                self.life = Life::Paused(until);
                let left = until.saturating_duration_since(self.now);
                self.restarts.paused(left, &mut self.reason);
                let mut note = Text::new();
                self.restarts.paused_note(left, &mut note);
                self.note = note;
                self.owe(ClientEvent::Note);
                self.owe(ClientEvent::Down);
            }
            Next::GiveUp => {
                let mut why = Text::new();
                self.restarts.gave_up(&mut why);
                self.give_up(why);
            }
        }
    }

    /// Starts the next server.
    fn restart(&mut self) {
        let mut note = Text::new();
        self.restarts.restarting_note(&mut note);
        self.note = note;
        self.owe(ClientEvent::Note);
        self.relink();
    }

    /// No server will come: calls are refused with `why`, for good.
    fn give_up(&mut self, why: Text) {
        self.reason = why;
        self.life = Life::GaveUp;
        self.client
            .fail_listens("the server stopped and will not be started again");
        self.unlink();
        self.owe(ClientEvent::Down);
    }

    /// Why a call is refused now, if it is.
    fn refusal(&mut self) -> Option<StartError> {
        match self.life {
            Life::GaveUp => Some(StartError::Down),
            Life::Paused(until) => {
                let left = until.saturating_duration_since(self.now);
                self.restarts.paused(left, &mut self.reason);
                Some(StartError::Down)
            }
            Life::Restarting(_) if self.config.refuse_while_restarting => {
                self.restarts.restarting(&mut self.reason);
                Some(StartError::Down)
            }
            Life::Starting if self.config.refuse_while_restarting && self.was_ready => {
                self.restarts.restarting(&mut self.reason);
                Some(StartError::Down)
            }
            _ => None,
        }
    }

    fn queue(&mut self, line: Line<S::Buf>) -> Result<(), Line<S::Buf>> {
        let Some(free) = self.lines.iter().position(Option::is_none) else {
            return Err(line);
        };
        self.lines[free] = Some(line);
        self.order[self.queued] = free as u8;
        self.queued += 1;
        Ok(())
    }

    /// Octets of lines that wait to go out.
    fn backlog(&self) -> usize {
        self.order[..self.queued]
            .iter()
            .filter_map(|&at| self.lines[usize::from(at)].as_ref())
            .map(|l| l.len - l.sent)
            .sum()
    }

    /// Writes the call's line for `message` into a buffer of the store.
    fn write_line(
        &mut self,
        message: &[u8],
        timeout: Option<Duration>,
        now: Instant,
    ) -> Result<(CallId, S::Buf, usize), StartError> {
        let mut want = message.len().saturating_add(META_ROOM);
        for _ in 0..2 {
            if want > self.store.max_len() {
                return Err(StartError::TooLarge { needed: want });
            }
            let mut buf = self.store.take(want).ok_or(StartError::Busy)?;
            let out = self.store.bytes_mut(&mut buf);
            match self.client.call(message, timeout, now, out) {
                Ok((call, n)) => return Ok((call, buf, n)),
                Err(StdioStartError::TooLarge { needed }) => {
                    self.store.put(buf);
                    want = needed;
                }
                Err(e) => {
                    self.store.put(buf);
                    return Err(match e {
                        StdioStartError::Invalid(e) => StartError::Invalid(e),
                        StdioStartError::TooLarge { needed } => StartError::TooLarge { needed },
                        // Not ready, or a new server on its way.
                        StdioStartError::Busy
                        | StdioStartError::NotReady
                        | StdioStartError::Closed => StartError::Busy,
                    });
                }
            }
        }
        Err(StartError::TooLarge { needed: want })
    }

    fn skip(&mut self, what: Skipped) -> ClientEvent {
        self.skipped = Some(what);
        ClientEvent::Skipped { what }
    }

    /// The next queued line that has octets to send.
    fn next_line(&self) -> Option<usize> {
        (0..self.queued).find(|&i| {
            let at = usize::from(self.order[i]);
            self.lines[at].as_ref().is_some_and(|l| l.sent < l.len)
        })
    }

    /// Drops the lines fully sent (their calls go on without them; a
    /// listen stream's stays for the next server) and those of cancelled
    /// calls none of which went.
    fn release_sent(&mut self) {
        let mut kept = 0;
        for i in 0..self.queued {
            let at = self.order[i];
            let done = match &self.lines[usize::from(at)] {
                Some(l) => {
                    (l.sent >= l.len && (!l.listen || l.cancelled)) || (l.cancelled && l.sent == 0)
                }
                None => true,
            };
            if done {
                if let Some(line) = self.lines[usize::from(at)].take() {
                    let slot = usize::from(line.call.index);
                    if line.keep && !line.cancelled && slot < CALLS && self.kept[slot].is_none() {
                        self.kept[slot] = Some(Kept {
                            call: line.call,
                            buf: line.buf,
                            len: line.len,
                            state: None,
                        });
                    } else {
                        self.store.put(line.buf);
                    }
                }
            } else {
                self.order[kept] = at;
                kept += 1;
            }
        }
        self.queued = kept;
    }

    /// The call is over: its line goes unless part of it went.
    fn line_ended(&mut self, call: CallId) {
        for i in 0..self.queued {
            let at = usize::from(self.order[i]);
            if let Some(line) = self.lines[at].as_mut()
                && line.call == call
            {
                line.cancelled = true;
            }
        }
        self.release_sent();
    }

    /// A new server is ready: the kept lines of listen streams go again.
    fn resend_listens(&mut self) {
        for i in 0..self.queued {
            let at = usize::from(self.order[i]);
            if let Some(line) = self.lines[at].as_mut()
                && line.listen
            {
                line.sent = 0;
            }
        }
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>, S: CallStore, const CALLS: usize> ClientEngine
    for StdioEngine<B, S, CALLS>
{
    fn start(
        &mut self,
        message: &[u8],
        options: CallOptions,
        now: Instant,
    ) -> Result<CallId, StartError> {
        self.now = now;
        if self.closing {
            return Err(StartError::Closed);
        }
        if let Some(refused) = self.refusal() {
            return Err(refused);
        }
        if self.life == Life::Idle {
            self.relink();
        }
        let Some(link) = self.link else {
            return Err(StartError::Busy);
        };
        if !link.up || !self.client.is_ready() {
            return Err(StartError::Busy);
        }
        // The server has not read what went before: the call waits.
        if self.backlog() >= self.config.client.max_line_bytes {
            return Err(StartError::Busy);
        }
        let listen =
            json::get(message, b"method").is_some_and(crate::mcp::client::engine::is_listen);
        if listen && self.client.listens() >= CALLS / 2 {
            return Err(StartError::Exhausted(
                "half of the client's calls are listen streams: no more (they would leave calls no turn)",
            ));
        }
        let (call, buf, len) = self.write_line(message, options.timeout, now)?;
        let keep = options.answers_input && self.client.expect_input(call);
        let line = Line {
            call,
            buf,
            len,
            sent: 0,
            cancelled: false,
            listen: listen && self.config.restart.max_restarts > 0,
            keep,
        };
        if let Err(line) = self.queue(line) {
            // Every line slot holds a call's line: the call slots are full.
            self.client.cancel(call);
            self.store.put(line.buf);
            return Err(StartError::Busy);
        }
        Ok(call)
    }

    fn cancel(&mut self, call: CallId, now: Instant) -> bool {
        self.now = now;
        self.line_ended(call);
        self.unkeep(call);
        self.client.cancel(call)
    }

    fn poll_event(&mut self) -> Option<ClientEvent> {
        if let Some(e) = self.take_owed() {
            return Some(e);
        }
        let event = match self.client.poll_event()? {
            StdioEvent::Notification { call } => ClientEvent::Notification { call },
            StdioEvent::InputRequired { call } => {
                if !self.keep_state(call) {
                    // Failed instead: its event comes next.
                    self.unkeep(call);
                    return self.poll_event();
                }
                ClientEvent::InputRequired { call }
            }
            StdioEvent::Response { call } => ClientEvent::Response { call },
            StdioEvent::Failed { call } => ClientEvent::Failed { call },
            StdioEvent::Ended { call } => {
                self.line_ended(call);
                self.unkeep(call);
                ClientEvent::Ended { call }
            }
            StdioEvent::Ready => {
                self.life = Life::Ready;
                self.was_ready = true;
                self.resend_listens();
                ClientEvent::Ready
            }
            StdioEvent::HandshakeFailed => {
                let why = self
                    .client
                    .handshake_error()
                    .unwrap_or("the handshake failed");
                let mut text = Text::new();
                text.set_bytes("the handshake failed: ", why.as_bytes());
                self.note = text.clone();
                self.owe(ClientEvent::Note);
                self.give_up(text);
                return self.poll_event();
            }
            StdioEvent::RestartNeeded => {
                // The probe left the server unusable: a fresh one speaks
                // the era it chose.
                self.note(format_args!(
                    "server/discover left the server unusable: restarting it for initialize"
                ));
                self.stopped(true);
                return self.poll_event();
            }
            StdioEvent::LineTooLong { len } => self.skip(Skipped::LineTooLong { len }),
            StdioEvent::BadLine { json } => self.skip(Skipped::BadLine { json }),
            StdioEvent::Unmatched => self.skip(Skipped::Unmatched),
            StdioEvent::Closed => {
                // The server's stdout closed: it exited or crashed.
                if self.closing {
                    self.unlink();
                    self.closed_told = true;
                    return Some(ClientEvent::ConnectionClosed { error: None });
                }
                if self.link.is_some() {
                    self.stopped(false);
                }
                return self.poll_event();
            }
        };
        Some(event)
    }

    fn message(&self, call: CallId) -> Option<&[u8]> {
        self.client.message(call)
    }

    fn result(&self, call: CallId) -> Option<&[u8]> {
        json::get(self.client.message(call)?, b"result")
    }

    fn failure(&self, call: CallId) -> Option<Failure<'_>> {
        let f = self.client.failure(call)?;
        // A failure found here is the transport's, with the status the
        // gRPC binding gives it: a deadline, a server gone.
        let status = match f.code {
            c if c == i64::from(LOCAL_TIMEOUT) => Code::DeadlineExceeded,
            c if c == i64::from(LOCAL_CLOSED) => Code::Unavailable,
            _ => Code::ResourceExhausted,
        };
        Some(Failure {
            code: i32::try_from(f.code).unwrap_or(crate::mcp::error::INTERNAL_ERROR),
            message: f.message,
            data: f.data,
            response: f.response,
            diagnostics: Diagnostics {
                transport: f.transport,
                grpc_status: f.transport.then_some(status),
                ..Diagnostics::default()
            },
            www_authenticate: None,
        })
    }

    fn warning_tool(&self, _call: CallId) -> Option<&[u8]> {
        None
    }

    fn input_requests(&self, call: CallId) -> Option<&[u8]> {
        if !self.client.waits_for_input(call) {
            return None;
        }
        input::requests_of(self.result(call)?)
    }

    /// The next round's line is written after the call's kept line (and
    /// the result's `requestState`), then takes the line's place and goes
    /// out after the lines before it.
    fn answer_input(
        &mut self,
        call: CallId,
        responses: &[u8],
        now: Instant,
    ) -> Result<(), StartError> {
        self.now = now;
        input::check_responses(responses).map_err(StartError::Invalid)?;
        let at = usize::from(call.index);
        let waiting = self.client.waits_for_input(call)
            && self
                .kept
                .get(at)
                .is_some_and(|k| k.as_ref().is_some_and(|k| k.call == call));
        if !waiting {
            return Err(StartError::Invalid(input::NOT_WAITING));
        }
        let Some(mut k) = self.kept[at].take() else {
            return Err(StartError::Invalid(input::NOT_WAITING));
        };
        let base = k.state.map_or(k.len, |s| s.1);
        let mut written = None;
        for _ in 0..2 {
            let buf = self.store.bytes_mut(&mut k.buf);
            let Some((before, after)) = (base <= buf.len()).then(|| buf.split_at_mut(base)) else {
                break;
            };
            // The line without its newline.
            let line = before.get(..k.len).unwrap_or_default();
            let request = line.strip_suffix(b"\n").unwrap_or(line);
            let state = k.state.and_then(|s| before.get(s.0..s.1));
            match self.client.answer(call, request, state, responses, after) {
                Ok(n) => {
                    written = Some(n);
                    break;
                }
                Err(StdioStartError::TooLarge { needed })
                    if base.saturating_add(needed) <= self.store.max_len()
                        && self.store.grow(&mut k.buf, base.saturating_add(needed)) => {}
                Err(StdioStartError::TooLarge { .. }) => break,
                Err(e) => {
                    self.kept[at] = Some(k);
                    return Err(match e {
                        StdioStartError::Invalid(e) => StartError::Invalid(e),
                        _ => StartError::Closed,
                    });
                }
            }
        }
        let n = match written {
            // The id of the round is another call's: the call failed.
            Some(0) => {
                self.store.put(k.buf);
                return Ok(());
            }
            Some(n) => n,
            None => {
                self.client.fail_input(
                    call,
                    "the request of the next round does not fit the call store",
                );
                self.store.put(k.buf);
                return Ok(());
            }
        };
        // The round's line takes the line's place.
        self.store
            .bytes_mut(&mut k.buf)
            .copy_within(base..base + n, 0);
        let line = Line {
            call,
            buf: k.buf,
            len: n,
            sent: 0,
            cancelled: false,
            listen: false,
            keep: true,
        };
        if let Err(line) = self.queue(line) {
            // Every line slot holds a call's line (one a call at most: not
            // to be).
            self.store.put(line.buf);
            self.client
                .fail_input(call, "no room for the next round's line");
        }
        Ok(())
    }

    fn link_up(&mut self, link: LinkId, _negotiated: Negotiated, now: Instant) {
        self.now = now;
        let Some(l) = self.link.as_mut().filter(|l| l.id == link) else {
            return;
        };
        l.up = true;
        l.since = now;
        if self.begun {
            self.client.restarted(now);
        } else {
            self.begun = true;
            self.client.begin(now);
        }
    }

    fn link_failed(&mut self, link: LinkId, reason: &[u8], now: Instant) {
        self.now = now;
        if self.link.is_none_or(|l| l.id != link) {
            return;
        }
        self.link = None;
        let mut text = Text::new();
        text.set_bytes("the server could not be started: ", reason);
        if self.was_ready {
            // As a server that stopped at once.
            self.note = text;
            self.owe(ClientEvent::Note);
            self.stopped(false);
        } else {
            self.give_up(text);
        }
    }

    fn recv(&mut self, link: LinkId, input: &[u8], now: Instant) -> usize {
        if self.link.is_none_or(|l| l.id != link) {
            // A server the engine let go of: its octets are dropped.
            return input.len();
        }
        self.client.recv(input, now)
    }

    fn recv_eof(&mut self, link: LinkId, now: Instant) {
        self.now = now;
        if self.link.is_some_and(|l| l.id == link) {
            self.client.recv_eof();
        }
    }

    fn wants_transmit(&self, link: LinkId) -> bool {
        self.link.is_some_and(|l| l.id == link && l.up)
            && (self.own.2 < self.own.1
                || (self.client.is_ready() && self.next_line().is_some())
                || self.client.wants_transmit())
    }

    fn poll_transmit(&mut self, link: LinkId, out: &mut [u8]) -> usize {
        if !self.link.is_some_and(|l| l.id == link && l.up) {
            return 0;
        }
        // A line under way goes on; then calls' lines, oldest first (a
        // cancellation follows its request), once the handshake is over;
        // then the client's own (the handshake, cancellations).
        let (own, len, sent) = &mut self.own;
        if *sent < *len {
            let n = (*len - *sent).min(out.len());
            out[..n].copy_from_slice(&own[*sent..*sent + n]);
            *sent += n;
            return n;
        }
        if self.client.is_ready()
            && let Some(i) = self.next_line()
        {
            let at = usize::from(self.order[i]);
            let Some(line) = self.lines[at].as_mut() else {
                return 0;
            };
            let bytes = self.store.bytes(&line.buf);
            let n = (line.len - line.sent).min(out.len());
            out[..n].copy_from_slice(&bytes[line.sent..line.sent + n]);
            line.sent += n;
            self.release_sent();
            return n;
        }
        let (own, len, sent) = &mut self.own;
        *len = self.client.poll_transmit(own);
        *sent = 0;
        let n = (*len).min(out.len());
        out[..n].copy_from_slice(&own[..n]);
        *sent = n;
        n
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let life = match self.life {
            Life::Restarting(at) => Some(at),
            Life::Paused(until) => Some(until),
            _ => None,
        };
        [self.client.poll_timeout(), life]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        match self.life {
            Life::Restarting(at) if now >= at && !self.closing => self.restart(),
            Life::Paused(until) if now >= until && !self.closing => {
                self.restarts.after_pause(now);
                self.restart();
            }
            _ => {}
        }
        self.client.handle_timeout(now);
    }

    fn open(&mut self, now: Instant) {
        self.now = now;
        if self.life == Life::Idle && !self.closing {
            self.relink();
        }
    }

    fn close(&mut self, now: Instant) {
        self.now = now;
        self.closing = true;
        if self.link.is_none() {
            // Kept listen streams end with the engine.
            self.client
                .fail_listens("the client was closed before the server came back");
            self.unlink();
            self.queued = 0;
            return;
        }
        // The calls in progress fail, the link goes (the driver closes the
        // server's stdin), and the engine is over.
        self.client.set_keep_listens(false);
        self.client.recv_eof();
    }

    fn is_closed(&self) -> bool {
        self.closing && self.link.is_none() && self.queued == 0
    }

    fn down_reason(&self) -> Option<&[u8]> {
        matches!(
            self.life,
            Life::GaveUp | Life::Paused(_) | Life::Restarting(_) | Life::Starting
        )
        .then(|| self.reason.get())
        .filter(|r| !r.is_empty())
    }

    fn note_text(&self) -> &[u8] {
        self.note.get()
    }

    fn era(&self) -> Option<&EraDiagnostics> {
        Some(self.client.era())
    }

    fn skipped_text(&self) -> &[u8] {
        match self.skipped {
            Some(Skipped::BadLine { .. }) => self.client.bad_line(),
            Some(Skipped::Unmatched) => self.client.unmatched(),
            _ => &[],
        }
    }
}
