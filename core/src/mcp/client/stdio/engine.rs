//! The stdio binding's [`ClientEngine`]: a [`StdioClient`] (every rule of
//! the binding's client side lives there) over a server's pipes, one link
//! at a time: the driver's child process (or serial device), asked for at
//! the first call and again after the last one ended (its stdout closed:
//! it exited or crashed; or the era probe left it unusable).
//!
//! A call's line is written into a buffer of the call store when it
//! starts and goes out after the lines before it; a line cut by a cancel
//! is finished first (a half line would garble the next). While the
//! handshake runs, or a new server starts, calls wait
//! ([`StartError::Busy`]). A link the driver could not open, or a failed
//! handshake, makes the engine refuse calls for
//! [`StdioEngineConfig::relink_after`] ([`StartError::Down`], with the
//! reason); the next call after that asks for a new link.
//!
//! The line of a call that answers input requests
//! ([`CallOptions::answers_input`]) is kept once sent, in its buffer,
//! until the call ends: an `input_required` result's `requestState` is
//! copied after it as the result arrives (the result's text lives only
//! until the next `recv`), and the application's answers make the next
//! round's line there, which then takes the line's place and goes out.

use core::time::Duration;

use super::{
    LOCAL_CLOSED, LOCAL_TIMEOUT, StdioClient, StdioClientConfig, StdioEvent, StdioStartError,
};
use crate::grpc::Code;
use crate::mcp::client::engine::{CallOptions, ClientEngine, LinkId, Negotiated};
use crate::mcp::client::events::{CallId, ClientEvent, Diagnostics, Failure, Skipped, StartError};
use crate::mcp::client::input;
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::time::Instant;

/// Room for the `_meta` the client merges into a request's line.
const META_ROOM: usize = 512;
/// Octets kept of a link failure's reason.
const REASON: usize = 192;
/// Link events owed to the driver.
const OWED: usize = 4;
/// Room for the client's own lines (the probe, `initialize`, a
/// cancellation), written whole and sent in whatever pieces the driver
/// asks for.
const OWN: usize = 2048;

/// Settings of the stdio engine.
#[derive(Debug, Clone, Copy)]
pub struct StdioEngineConfig {
    /// The binding's client settings.
    pub client: StdioClientConfig,
    /// How long calls are refused after a link that could not be opened
    /// or a failed handshake, before the next call asks for a new link.
    /// Default 1 s.
    pub relink_after: Duration,
}

impl Default for StdioEngineConfig {
    fn default() -> Self {
        Self {
            client: StdioClientConfig::default(),
            relink_after: Duration::from_secs(1),
        }
    }
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
}

/// The stdio client engine: `CALLS` calls at a time; `B` holds the line
/// being read (see [`StdioClient`]), `S` the lines going out.
pub struct StdioEngine<B, S: CallStore, const CALLS: usize> {
    client: StdioClient<B, CALLS>,
    config: StdioEngineConfig,
    store: S,
    link: Option<Link>,
    next_link: u32,
    /// The handshake ran on an earlier link: a new one goes on in the era
    /// it chose.
    begun: bool,
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
    /// Why calls are refused, and until when.
    down: Option<([u8; REASON], usize, Instant)>,
    closing: bool,
    closed_told: bool,
    now: Instant,
}

impl<B, S: CallStore, const CALLS: usize> core::fmt::Debug for StdioEngine<B, S, CALLS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StdioEngine")
            .field("link", &self.link)
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
        Self {
            client: StdioClient::new(config.client, buf, now),
            config,
            store,
            link: None,
            next_link: 0,
            begun: false,
            skipped: None,
            lines: [const { None }; CALLS],
            kept: [const { None }; CALLS],
            own: ([0; OWN], 0, 0),
            order: [0; CALLS],
            queued: 0,
            owed: [None; OWED],
            down: None,
            closing: false,
            closed_told: false,
            now,
        }
    }

    /// The binding's client, for its era and state.
    pub fn client(&self) -> &StdioClient<B, CALLS> {
        &self.client
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

    /// Asks the driver for a new link.
    fn relink(&mut self) {
        let id = LinkId(self.next_link);
        self.next_link = self.next_link.wrapping_add(1);
        self.link = Some(Link { id, up: false });
        self.owe(ClientEvent::Connect { link: id });
    }

    /// Lets go of the link: its calls failed (the client says how).
    fn unlink(&mut self) {
        if let Some(link) = self.link.take() {
            self.owe(ClientEvent::Disconnect { link: link.id });
        }
        // Nothing more goes to that server.
        for i in 0..self.queued {
            let at = usize::from(self.order[i]);
            if let Some(line) = self.lines[at].take() {
                self.store.put(line.buf);
            }
        }
        self.queued = 0;
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

    fn set_down(&mut self, reason: &[u8]) {
        let mut text = [0u8; REASON];
        let n = reason.len().min(REASON);
        text[..n].copy_from_slice(&reason[..n]);
        self.down = Some((text, n, self.now.saturating_add(self.config.relink_after)));
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

    /// Drops the lines fully sent (their calls go on without them).
    fn release_sent(&mut self) {
        let mut kept = 0;
        for i in 0..self.queued {
            let at = self.order[i];
            let done = match &self.lines[usize::from(at)] {
                Some(l) => l.sent >= l.len || (l.cancelled && l.sent == 0),
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
        match self.down {
            Some((_, _, until)) if now < until => return Err(StartError::Down),
            Some(_) => self.down = None,
            None => {}
        }
        let Some(link) = self.link else {
            self.relink();
            return Err(StartError::Busy);
        };
        if !link.up || !self.client.is_ready() {
            return Err(StartError::Busy);
        }
        let (call, buf, len) = self.write_line(message, options.timeout, now)?;
        let keep = options.answers_input && self.client.expect_input(call);
        let line = Line {
            call,
            buf,
            len,
            sent: 0,
            cancelled: false,
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
        for i in 0..self.queued {
            let at = usize::from(self.order[i]);
            if let Some(line) = self.lines[at].as_mut()
                && line.call == call
            {
                line.cancelled = true;
            }
        }
        self.release_sent();
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
                self.unkeep(call);
                ClientEvent::Ended { call }
            }
            StdioEvent::Ready => ClientEvent::Ready,
            StdioEvent::HandshakeFailed => {
                let why = self
                    .client
                    .handshake_error()
                    .unwrap_or("the handshake failed");
                self.set_down(why.as_bytes());
                self.unlink();
                return self.poll_event();
            }
            StdioEvent::RestartNeeded => {
                // The probe left the server unusable: a fresh one speaks
                // the era it chose.
                self.unlink();
                self.relink();
                return self.poll_event();
            }
            StdioEvent::LineTooLong { len } => self.skip(Skipped::LineTooLong { len }),
            StdioEvent::BadLine { json } => self.skip(Skipped::BadLine { json }),
            StdioEvent::Unmatched => self.skip(Skipped::Unmatched),
            StdioEvent::Closed => {
                // The server's stdout closed: it exited or crashed. The next
                // call asks for another.
                self.unlink();
                if self.closing {
                    self.closed_told = true;
                    return Some(ClientEvent::ConnectionClosed { error: None });
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
        if self.begun {
            self.client.restarted(now);
        } else {
            self.begun = true;
            self.client.begin(now);
        }
    }

    fn link_failed(&mut self, link: LinkId, reason: &[u8], now: Instant) {
        self.now = now;
        if self.link.is_some_and(|l| l.id == link) {
            self.link = None;
            self.set_down(reason);
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
                || self.next_line().is_some()
                || self.client.wants_transmit())
    }

    fn poll_transmit(&mut self, link: LinkId, out: &mut [u8]) -> usize {
        if !self.link.is_some_and(|l| l.id == link && l.up) {
            return 0;
        }
        // A line under way goes on; then calls' lines, oldest first (a
        // cancellation follows its request); then the client's own (the
        // handshake, cancellations).
        let (own, len, sent) = &mut self.own;
        if *sent < *len {
            let n = (*len - *sent).min(out.len());
            out[..n].copy_from_slice(&own[*sent..*sent + n]);
            *sent += n;
            return n;
        }
        if let Some(i) = self.next_line() {
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
        let down = self.down.map(|(_, _, until)| until);
        [self.client.poll_timeout(), down]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if self.down.is_some_and(|(_, _, until)| now >= until) {
            self.down = None;
        }
        self.client.handle_timeout(now);
    }

    fn close(&mut self, now: Instant) {
        self.now = now;
        self.closing = true;
        if self.link.is_none() {
            return;
        }
        // The calls in progress fail, the link goes (the driver closes the
        // server's stdin), and the engine is over.
        self.client.recv_eof();
    }

    fn is_closed(&self) -> bool {
        self.closing && self.link.is_none() && self.queued == 0
    }

    fn down_reason(&self) -> Option<&[u8]> {
        self.down.as_ref().map(|(text, n, _)| &text[..*n])
    }

    fn skipped_text(&self) -> &[u8] {
        match self.skipped {
            Some(Skipped::BadLine { .. }) => self.client.bad_line(),
            Some(Skipped::Unmatched) => self.client.unmatched(),
            _ => &[],
        }
    }
}
