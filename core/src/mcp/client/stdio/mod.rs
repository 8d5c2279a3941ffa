//! The client side of the stdio binding (MCP 2026-07-28 §6, §8.3, §11),
//! sans-IO, without an allocator: what goes into a server child's stdin
//! and what its stdout means. Launching and supervising the child is the
//! driver's.
//!
//! Every message is one line. [`StdioClient::call`] writes a request as a
//! compact line into the caller's buffer, with the request's `_meta`
//! (protocol version, client capabilities, client info) merged in for the
//! modern era, and the modern per-request keys taken out in the
//! 2025-11-25 era (a legacy server has them from `initialize`). The client's own
//! lines — the era probe, `initialize`, `notifications/initialized`,
//! `notifications/cancelled` — come out of [`StdioClient::poll_transmit`].
//!
//! [`StdioClient::recv`] collects the server's lines in the buffer `B`
//! (its length, capped by [`StdioClientConfig::max_line_bytes`], is the
//! line limit) and consumes input up to the end of one line at a time:
//! drain [`StdioClient::poll_event`] after each `recv`, the texts live
//! until the next `recv`. A response is matched to its call by id, a
//! `notifications/progress` by the call's `progressToken`, a listen event
//! by `_meta["io.modelcontextprotocol/subscriptionId"]`. A line over the
//! limit is skipped up to its newline ([`StdioEvent::LineTooLong`]); when
//! its first 512 octets hold an `"id"` of a call in flight, that call fails
//! at once (locally, -32603) instead of at its deadline (a heuristic: the
//! line cannot be parsed; an id that matches no call changes nothing); a
//! line that is not JSON-RPC is [`StdioEvent::BadLine`] with its first
//! octets and the likely cause; a message nothing waits for is
//! [`StdioEvent::Unmatched`].
//!
//! Each call gets ([`StdioEvent`], naming it; the texts through
//! [`StdioClient::message`] and [`StdioClient::failure`]) notifications,
//! then exactly one of `Response` or `Failed`, then `Ended`. A call past
//! its deadline fails locally ([`LOCAL_TIMEOUT`]) and the client sends
//! `notifications/cancelled` for it; [`StdioClient::cancel`] sends it
//! too. The end of the server's stdout ([`StdioClient::recv_eof`]) fails
//! every call in flight ([`LOCAL_CLOSED`]): never an invented result.
//!
//! The era (§8.3): [`StdioClient::begin`] probes with `server/discover`
//! carrying the preferred modern version. A result → modern; -32022 whose
//! `data.supported` names another modern version this client speaks → the
//! probe once more with it; any other error → `initialize` (2025-11-25),
//! then `notifications/initialized`; no answer within
//! [`StdioClientConfig::probe_timeout`], or the child's stdout closing →
//! [`StdioEvent::RestartNeeded`]: the driver starts a fresh child and
//! calls [`StdioClient::restarted`], which sends `initialize`.
//! [`StdioEvent::Ready`] says calls may start; [`StdioClient::era`] says
//! what was chosen and why. After a crash, `restarted` speaks the era
//! already chosen (`initialize` again for a legacy server).

mod engine;
mod incoming;
pub(in crate::mcp::client) mod line;
mod restart;

use core::time::Duration;

pub use super::era::{Era, EraChoice, EraDiagnostics, LEGACY_VERSION};
pub use engine::{StdioEngine, StdioEngineConfig};
pub use restart::{MAX_RESTARTS, RestartPolicy};

use super::events::CallId;
use crate::mcp::envelope::Message;
use crate::mcp::error::{INVALID_REQUEST, RpcError};
use crate::mcp::json;
use crate::mcp::writer::JsonWriter;
use crate::time::Instant;
use incoming::HEAD_SCAN;
use line::{ModernMeta, write_cancelled, write_request_line};

/// The JSON-RPC code of a call this client timed out (the code the MCP
/// SDKs use for a request timeout); [`StdioFailure::local`] says it is
/// not the server's.
pub const LOCAL_TIMEOUT: i32 = -32001;
/// The JSON-RPC code of a call failed because the server's stdout closed
/// (the code the MCP SDKs use for a closed connection); local.
pub const LOCAL_CLOSED: i32 = -32000;
/// Room [`StdioClient::poll_transmit`] needs in its buffer.
pub const MIN_TRANSMIT: usize = 512;
/// Longest request id and progress token (raw JSON) a call may have.
pub const MAX_ID: usize = 64;
/// Octets of a bad line kept for [`StdioClient::bad_line`].
pub const BAD_LINE_PREFIX: usize = 64;

const PROBE_ID: &[u8] = b"\"mcpwire-probe\"";
const INIT_ID: &[u8] = b"\"mcpwire-initialize\"";
const GLOBALS: usize = 4;

/// Settings of the stdio client.
#[derive(Debug, Clone, Copy)]
pub struct StdioClientConfig {
    /// The longest line taken from the server (also capped by the line
    /// buffer's length). Default 4 MiB.
    pub max_line_bytes: usize,
    /// A call's deadline when it names none (not `subscriptions/listen`).
    /// Default 60 s.
    pub request_timeout: Duration,
    /// How long the era probe and `initialize` wait for their answer.
    /// Default 10 s.
    pub probe_timeout: Duration,
    pub era: EraChoice,
    /// `io.modelcontextprotocol/clientCapabilities` of modern requests
    /// (raw JSON object). Default `{}`.
    pub client_capabilities: &'static str,
    pub client_name: &'static str,
    pub client_version: &'static str,
    /// Rounds of input a call answers at most ([`StdioClient::expect_input`]).
    /// Default [`MAX_INPUT_ROUNDS`](super::MAX_INPUT_ROUNDS).
    pub max_input_rounds: u8,
}

impl Default for StdioClientConfig {
    fn default() -> Self {
        Self {
            max_line_bytes: 4 << 20,
            request_timeout: Duration::from_secs(60),
            probe_timeout: Duration::from_secs(10),
            era: EraChoice::Probe,
            client_capabilities: "{}",
            client_name: "mcpwire",
            client_version: env!("CARGO_PKG_VERSION"),
            max_input_rounds: super::config::MAX_INPUT_ROUNDS,
        }
    }
}

/// Why [`StdioClient::call`] wrote nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioStartError {
    /// Not a request (-32600), an id or progress token over [`MAX_ID`]
    /// octets, or an id of a call in progress.
    Invalid(RpcError),
    /// Every call slot is taken.
    Busy,
    /// The line needs `needed` octets, more than the buffer given.
    TooLarge { needed: usize },
    /// The handshake is not over (or failed).
    NotReady,
    /// The server's stdout closed; restart.
    Closed,
}

/// Something the application learns. Texts through the accessors, until
/// the next `recv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioEvent {
    /// A notification for the call (progress, listen event, the server's
    /// `notifications/cancelled` ending a listen): [`StdioClient::message`].
    Notification { call: CallId },
    /// The server asks for input (a call of [`StdioClient::expect_input`]):
    /// its `input_required` response is [`StdioClient::message`] until the
    /// next `recv`; the call waits for [`StdioClient::answer`].
    InputRequired { call: CallId },
    /// The call's result: [`StdioClient::message`], until `Ended`.
    Response { call: CallId },
    /// The call failed: [`StdioClient::failure`], until `Ended`.
    Failed { call: CallId },
    /// The call is over: the last event of every call.
    Ended { call: CallId },
    /// The handshake is over: calls may start ([`StdioClient::era`]).
    Ready,
    /// The handshake failed: [`StdioClient::handshake_error`].
    HandshakeFailed,
    /// The probe may have left the child unusable (no answer, or it
    /// exited): start a fresh one, then [`StdioClient::restarted`].
    RestartNeeded,
    /// A line of `len` octets, over the limit, was skipped.
    LineTooLong { len: usize },
    /// A line that is not a JSON-RPC message: [`StdioClient::bad_line`].
    BadLine { json: bool },
    /// A message no call waits for: [`StdioClient::unmatched`].
    Unmatched,
    /// The server's stdout closed; calls in flight failed before this.
    Closed,
}

/// The JSON-RPC error of a failed call, borrowed from the client.
#[derive(Debug, Clone, Copy)]
pub struct StdioFailure<'a> {
    pub code: i64,
    /// The raw JSON string of `error.message`.
    pub message: &'a [u8],
    pub data: Option<&'a [u8]>,
    /// The whole error response.
    pub response: &'a [u8],
    /// Found by this client (a timeout, the end of the server's stdout,
    /// an answer it cannot take), not answered by the server.
    pub local: bool,
    /// A failure of the transport (a timeout, the end of the server's
    /// stdout, a line over the limit), not a rule of this client on the
    /// server's answer (an `input_required` result it cannot answer).
    pub transport: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Raw {
    buf: [u8; MAX_ID],
    len: u8,
}

impl Raw {
    const NONE: Raw = Raw {
        buf: [0; MAX_ID],
        len: 0,
    };

    fn of(raw: &[u8]) -> Option<Raw> {
        let raw = json::trim(raw);
        let mut r = Raw::NONE;
        r.buf.get_mut(..raw.len())?.copy_from_slice(raw);
        r.len = u8::try_from(raw.len()).ok()?;
        Some(r)
    }

    fn get(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    fn is(&self, raw: &[u8]) -> bool {
        self.len > 0 && self.get() == json::trim(raw)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Response,
    Error,
    Local {
        code: i32,
        message: &'static str,
    },
    /// The server ended a listen with `notifications/cancelled`.
    ServerClosed,
    /// An `input_required` result: handed out, then the call waits for
    /// the application's answers ([`StdioClient::answer`]).
    InputRequired,
    /// One `input_required` result more than the client answers.
    TooManyRounds,
    /// A rule of this client on the server's answer failed the call (an
    /// `input_required` result it cannot answer, a round that cannot go):
    /// -32603 with `message`, not a failure of the transport.
    Refused {
        message: &'static str,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Live,
    Done {
        outcome: Outcome,
        told: bool,
    },
    /// Over for the application; its `notifications/cancelled` is owed.
    Cancelling,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    generation: u16,
    state: State,
    id: Raw,
    token: Raw,
    listen: bool,
    deadline: Option<Instant>,
    notified: bool,
    cancel_owed: bool,
    /// The application answers `input_required` results
    /// ([`StdioClient::expect_input`]).
    answers_input: bool,
    /// `input_required` results handed out so far.
    rounds: u8,
}

impl Slot {
    /// The call waits for the application's answers to its server's
    /// requests for input.
    fn waits_for_input(&self) -> bool {
        matches!(
            self.state,
            State::Done {
                outcome: Outcome::InputRequired,
                ..
            }
        )
    }

    /// The call runs on its own: in flight, or waiting for input (its
    /// deadline counts).
    fn running(&self) -> bool {
        self.state == State::Live || self.waits_for_input()
    }
}

const FREE: Slot = Slot {
    generation: 0,
    state: State::Free,
    id: Raw::NONE,
    token: Raw::NONE,
    listen: false,
    deadline: None,
    notified: false,
    cancel_owed: false,
    answers_input: false,
    rounds: 0,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Probing {
        version: &'static str,
        deadline: Instant,
        sent: bool,
    },
    AwaitRestart,
    Initializing {
        deadline: Instant,
        sent: bool,
    },
    /// `notifications/initialized` is owed.
    Initialized,
    Ready,
    Failed(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lent {
    None,
    Line,
    Scratch(usize),
}

/// A stdio client: at most `CALLS` calls in flight; `B` holds the line
/// being read (its length is the line limit, up to
/// [`StdioClientConfig::max_line_bytes`]).
pub struct StdioClient<B, const CALLS: usize> {
    config: StdioClientConfig,
    buf: B,
    /// Octets of the line being read.
    len: usize,
    /// Octets of an over-long line skipped so far.
    skipping: Option<usize>,
    /// Length of the last complete line, lent until the next `recv`.
    line: usize,
    lent: (Option<CallId>, Lent),
    scratch: [u8; 256],
    slots: [Slot; CALLS],
    globals: [Option<StdioEvent>; GLOBALS],
    phase: Phase,
    era: EraDiagnostics,
    bad: ([u8; BAD_LINE_PREFIX], usize),
    eof: bool,
    /// Listen streams outlive the server: they are sent again to the
    /// next one.
    keep_listens: bool,
    now: Instant,
}

impl<B, const CALLS: usize> core::fmt::Debug for StdioClient<B, CALLS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StdioClient")
            .field("phase", &self.phase)
            .field("eof", &self.eof)
            .finish_non_exhaustive()
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>, const CALLS: usize> StdioClient<B, CALLS> {
    /// A client for one child process; `buf` holds the line being read.
    pub fn new(config: StdioClientConfig, buf: B, now: Instant) -> Self {
        Self {
            config,
            buf,
            len: 0,
            skipping: None,
            line: 0,
            lent: (None, Lent::None),
            scratch: [0; 256],
            slots: [FREE; CALLS],
            globals: [None; GLOBALS],
            phase: Phase::Idle,
            era: EraDiagnostics::new(),
            bad: ([0; BAD_LINE_PREFIX], 0),
            eof: false,
            keep_listens: false,
            now,
        }
    }

    /// Starts the handshake (as [`StdioClientConfig::era`] says): its
    /// lines come out of `poll_transmit`, [`StdioEvent::Ready`] ends it.
    pub fn begin(&mut self, now: Instant) {
        self.now = now;
        match self.config.era {
            EraChoice::Probe => self.probe(self.era.requested),
            EraChoice::Modern => {
                self.era.set_modern(self.era.requested);
                self.ready();
            }
            EraChoice::Legacy => self.initialize(),
        }
    }

    /// A fresh child runs in place of the last one (after
    /// [`StdioEvent::RestartNeeded`], a crash or the end of its stdout):
    /// the line state is reset, calls in flight have failed, and the
    /// handshake goes on in the era already chosen (`initialize` again for
    /// a legacy server), or starts over.
    pub fn restarted(&mut self, now: Instant) {
        self.now = now;
        self.len = 0;
        self.skipping = None;
        self.line = 0;
        self.eof = false;
        self.fail_all(LOCAL_CLOSED, "the server was restarted before the response");
        for s in self.slots.iter_mut() {
            // The new process knows nothing of the old one's requests.
            s.cancel_owed = false;
            if s.state == State::Cancelling {
                s.state = State::Free;
                s.generation = s.generation.wrapping_add(1);
            }
        }
        match (self.phase, self.era.era) {
            (Phase::AwaitRestart, _) => {
                self.era.restarted = true;
                self.initialize();
            }
            (_, Some(Era::Legacy | Era::HttpSse)) => self.initialize(),
            (_, Some(Era::Modern)) => self.ready(),
            _ => self.begin(now),
        }
    }

    /// The transport judged the probe's answer as a legacy server's (over
    /// HTTP: a 4xx without a modern error, MCP 2026-07-28 §8.3, which the
    /// line never shows): falls back to `initialize` for `reason`, as an
    /// answer on the line that said so would.
    pub fn probe_answered_legacy(&mut self, reason: &'static str, now: Instant) {
        self.now = now;
        if matches!(self.phase, Phase::Probing { .. }) {
            self.era.fall_back(reason);
            self.initialize();
        }
    }

    /// The transport failed the handshake for `reason` (over HTTP: 401,
    /// 403, a 5xx, a server that is neither era): [`StdioEvent::HandshakeFailed`].
    pub fn transport_refused_handshake(&mut self, reason: &'static str) {
        if matches!(
            self.phase,
            Phase::Probing { .. } | Phase::Initializing { .. } | Phase::AwaitRestart
        ) {
            self.fail_handshake(reason);
        }
    }

    /// Notes that the legacy lifecycle runs over the 2024-11-05 HTTP+SSE
    /// shape (for [`era`](Self::era)).
    pub fn set_http_sse(&mut self) {
        if self.era.era == Some(Era::Legacy) {
            self.era.era = Some(Era::HttpSse);
        }
    }

    /// What the client knows of the server's era.
    pub fn era(&self) -> &EraDiagnostics {
        &self.era
    }

    /// Listen streams outlive the server (off by default): the end of its
    /// stdout and [`restarted`](Self::restarted) leave them open, and the
    /// driver sends their lines again to the next server once it is
    /// ready; [`fail_listens`](Self::fail_listens) ends them when there
    /// is none.
    pub fn set_keep_listens(&mut self, keep: bool) {
        self.keep_listens = keep;
    }

    /// Fails the listen streams kept for a next server that will not
    /// come ([`LOCAL_CLOSED`], `message`).
    pub fn fail_listens(&mut self, message: &'static str) {
        let keep = core::mem::replace(&mut self.keep_listens, false);
        self.fail_all(LOCAL_CLOSED, message);
        self.keep_listens = keep;
    }

    /// The listen streams open.
    pub fn listens(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.listen && s.state == State::Live)
            .count()
    }

    /// Whether calls may start.
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready && !self.eof
    }

    /// Why the handshake failed.
    pub fn handshake_error(&self) -> Option<&'static str> {
        match self.phase {
            Phase::Failed(why) => Some(why),
            _ => None,
        }
    }

    /// Whether `call` is still in progress (not yet `Ended`).
    pub fn is_active(&self, call: CallId) -> bool {
        self.slot_of(call).is_some()
    }

    /// Whether any call is in progress.
    pub fn has_calls(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s.state, State::Live | State::Done { .. }))
    }

    /// Writes the request `body` (one JSON-RPC request with its `id`) as a
    /// line into `out`: returns the call and the line's length (with its
    /// newline). `timeout` replaces the configured one; a
    /// `subscriptions/listen` without one has no deadline.
    pub fn call(
        &mut self,
        body: &[u8],
        timeout: Option<Duration>,
        now: Instant,
        out: &mut [u8],
    ) -> Result<(CallId, usize), StdioStartError> {
        self.now = now;
        if self.eof {
            return Err(StdioStartError::Closed);
        }
        if self.phase != Phase::Ready {
            return Err(StdioStartError::NotReady);
        }
        let invalid = |m| StdioStartError::Invalid(RpcError::new(INVALID_REQUEST, m));
        let Ok(Message::Request { id, method, params }) =
            Message::parse(body, json::DEFAULT_MAX_DEPTH)
        else {
            return Err(invalid("not a JSON-RPC request"));
        };
        let id = Raw::of(id).ok_or(invalid("request id too long"))?;
        if id.is(PROBE_ID)
            || id.is(INIT_ID)
            || self
                .slots
                .iter()
                .any(|s| s.state != State::Free && s.id == id)
        {
            return Err(invalid("request id in use"));
        }
        // A token is a string or a number (MCP); anything else asks for
        // no progress.
        let token = match params
            .and_then(|p| json::get(p, b"_meta"))
            .and_then(|m| json::get(m, b"progressToken"))
            .filter(|t| matches!(json::kind(t), Some(json::Kind::String | json::Kind::Number)))
        {
            Some(t) => Raw::of(t).ok_or(invalid("progress token too long"))?,
            None => Raw::NONE,
        };
        // Progress is routed by its token: two live calls with one token
        // would get each other's (MCP: unique among active requests).
        if token != Raw::NONE
            && self
                .slots
                .iter()
                .any(|s| s.state == State::Live && s.token == token)
        {
            return Err(invalid("progress token in use"));
        }
        let index = self
            .slots
            .iter()
            .position(|s| s.state == State::Free)
            .ok_or(StdioStartError::Busy)?;
        let meta = match self.era.era {
            Some(Era::Modern) => Some(self.modern_meta(self.era.modern_version().unwrap_or(""))),
            _ => None,
        };
        let mut w = JsonWriter::new(out);
        write_request_line(&mut w, body, meta);
        let n = w
            .finish()
            .map_err(|e| StdioStartError::TooLarge { needed: e.needed })?
            .len();
        let listen = crate::mcp::client::engine::is_listen(method);
        let deadline = match (timeout, listen) {
            (None, true) => None,
            (t, _) => Some(now.saturating_add(t.unwrap_or(self.config.request_timeout))),
        };
        let slot = &mut self.slots[index];
        *slot = Slot {
            generation: slot.generation,
            state: State::Live,
            id,
            token,
            listen,
            deadline,
            notified: false,
            cancel_owed: false,
            answers_input: false,
            rounds: 0,
        };
        Ok((call_id(index, slot.generation), n))
    }

    /// The application of `call` (just started) answers its server's
    /// requests for input (MCP 2026-07-28 §9): a result with `resultType:
    /// "input_required"` is [`StdioEvent::InputRequired`] and the call
    /// waits for [`StdioClient::answer`], at most
    /// [`StdioClientConfig::max_input_rounds`] times (the next such result
    /// fails it). `false` for a call that is not in flight.
    pub fn expect_input(&mut self, call: CallId) -> bool {
        let Some(i) = self.slot_of(call) else {
            return false;
        };
        let s = &mut self.slots[i];
        s.answers_input = s.state == State::Live;
        s.answers_input
    }

    /// Whether `call` waits for the application's answers.
    pub fn waits_for_input(&self, call: CallId) -> bool {
        self.slot_of(call)
            .is_some_and(|i| self.slots[i].waits_for_input())
    }

    /// Writes the line of `call`'s next round into `out`: `request` (the
    /// call's last request, one JSON-RPC request) with a new id (the
    /// application's with `#1`, `#2`... appended), `params.inputResponses`
    /// = `responses` (compacted onto the line) and `params.requestState` =
    /// `state` (the result's, a raw JSON string; none when `None`); the
    /// call is in flight again under its new id, its deadline unchanged.
    /// Its length, with the newline. `Err`, nothing changed: the call does
    /// not wait for input, `responses` is not a JSON object
    /// ([`StdioStartError::Invalid`]), `out` is too small
    /// ([`StdioStartError::TooLarge`]). `Ok(0)`: the round cannot go (its
    /// id is another call's): the call failed.
    pub fn answer(
        &mut self,
        call: CallId,
        request: &[u8],
        state: Option<&[u8]>,
        responses: &[u8],
        out: &mut [u8],
    ) -> Result<usize, StdioStartError> {
        super::input::check_responses(responses).map_err(StdioStartError::Invalid)?;
        let i = self
            .slot_of(call)
            .filter(|&i| self.slots[i].waits_for_input())
            .ok_or(StdioStartError::Invalid(super::input::NOT_WAITING))?;
        let s = self.slots[i];
        let mut id = [0u8; super::input::MAX_ROUND_ID];
        let new_id =
            super::input::round_id(s.id.get(), s.rounds, &mut id).and_then(|n| Raw::of(&id[..n]));
        let taken = new_id.is_some_and(|new| {
            self.slots
                .iter()
                .any(|o| o.state != State::Free && o.id == new)
        });
        let Some(new_id) = new_id.filter(|_| !taken) else {
            self.fail_input(call, "the id of the next round's request is another call's");
            return Ok(0);
        };
        let mut w = JsonWriter::new(out);
        super::input::write_round(&mut w, request, new_id.get(), responses, state);
        w.raw(b"\n");
        let n = w
            .finish()
            .map_err(|e| StdioStartError::TooLarge { needed: e.needed })?
            .len();
        let s = &mut self.slots[i];
        s.id = new_id;
        s.state = State::Live;
        s.notified = false;
        s.cancel_owed = false;
        Ok(n)
    }

    /// Fails `call`, waiting for input (or in flight again, its round's
    /// line not yet out), with `message`: its next round cannot go.
    pub fn fail_input(&mut self, call: CallId, message: &'static str) {
        if let Some(i) = self.slot_of(call)
            && self.slots[i].running()
        {
            self.slots[i].state = State::Done {
                outcome: Outcome::Refused { message },
                told: false,
            };
        }
    }

    /// Stops a call: `notifications/cancelled` goes out with the next
    /// `poll_transmit` (for a listen: the subscription ends). No event
    /// follows; the handle is dead. `false` when it was already over.
    pub fn cancel(&mut self, call: CallId) -> bool {
        let Some(i) = self.slot_of(call) else {
            return false;
        };
        let s = &mut self.slots[i];
        s.notified = false;
        if s.state == State::Live && !self.eof {
            s.state = State::Cancelling;
            s.cancel_owed = true;
        } else {
            s.state = State::Free;
            s.generation = s.generation.wrapping_add(1);
        }
        true
    }

    /// Writes the client's own next line (handshake, cancellation) into
    /// `out` (at least [`MIN_TRANSMIT`] octets); call until it returns 0.
    pub fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        if self.eof {
            return 0;
        }
        let mut w = JsonWriter::new(out);
        match self.phase {
            Phase::Probing {
                version,
                deadline,
                sent: false,
            } => {
                let meta = self.modern_meta(version);
                write_request_line(
                    &mut w,
                    b"{\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-probe\",\"method\":\"server/discover\",\"params\":{}}",
                    Some(meta),
                );
                self.phase = Phase::Probing {
                    version,
                    deadline,
                    sent: true,
                };
                return w.finish().map_or(0, <[u8]>::len);
            }
            Phase::Initializing {
                deadline,
                sent: false,
            } => {
                super::era::write_initialize(
                    &mut w,
                    INIT_ID,
                    self.config.client_name,
                    self.config.client_version,
                );
                w.raw(b"\n");
                self.phase = Phase::Initializing {
                    deadline,
                    sent: true,
                };
                return w.finish().map_or(0, <[u8]>::len);
            }
            Phase::Initialized => {
                w.raw(super::era::INITIALIZED).raw(b"\n");
                self.ready();
                return w.finish().map_or(0, <[u8]>::len);
            }
            _ => {}
        }
        if let Some(s) = self.slots.iter_mut().find(|s| s.cancel_owed) {
            write_cancelled(
                &mut w,
                s.id.get(),
                b"request timed out or cancelled by the client",
            );
            s.cancel_owed = false;
            if s.state == State::Cancelling {
                s.state = State::Free;
                s.generation = s.generation.wrapping_add(1);
            }
            return w.finish().map_or(0, <[u8]>::len);
        }
        0
    }

    /// Whether `poll_transmit` has a line to write.
    pub fn wants_transmit(&self) -> bool {
        !self.eof
            && (matches!(
                self.phase,
                Phase::Probing { sent: false, .. }
                    | Phase::Initializing { sent: false, .. }
                    | Phase::Initialized
            ) || self.slots.iter().any(|s| s.cancel_owed))
    }

    /// The next deadline: the handshake's or a call's.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let handshake = match self.phase {
            Phase::Probing { deadline, .. } | Phase::Initializing { deadline, .. } => {
                Some(deadline)
            }
            _ => None,
        };
        self.slots
            .iter()
            .filter(|s| s.running())
            .filter_map(|s| s.deadline)
            .chain(handshake)
            .min()
    }

    /// Lets time pass: a call past its deadline fails with
    /// [`LOCAL_TIMEOUT`] and its `notifications/cancelled` is owed; a
    /// probe without an answer means a restart, then `initialize`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        match self.phase {
            Phase::Probing { deadline, .. } if now >= deadline => {
                self.era
                    .fall_back("no answer to server/discover within the probe timeout");
                self.phase = Phase::AwaitRestart;
                self.push(StdioEvent::RestartNeeded);
            }
            Phase::Initializing { deadline, .. } if now >= deadline => {
                self.fail_handshake("no answer to initialize within the probe timeout");
            }
            _ => {}
        }
        let eof = self.eof;
        for s in self.slots.iter_mut() {
            if s.running() && s.deadline.is_some_and(|d| now >= d) {
                // A call waiting for input has no request at the server.
                let waiting = s.waits_for_input();
                s.state = State::Done {
                    outcome: Outcome::Local {
                        code: LOCAL_TIMEOUT,
                        message: if waiting {
                            "request timed out while the client's answers were awaited"
                        } else {
                            "request timed out (the client sent notifications/cancelled)"
                        },
                    },
                    told: false,
                };
                s.cancel_owed = !eof && !waiting;
            }
        }
    }

    /// Feeds octets of the server's stdout; returns how many were consumed
    /// (up to the end of one line). Drain `poll_event`, then feed the rest.
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        self.now = now;
        self.line = 0;
        self.lent = (None, Lent::None);
        let newline = input.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(input.len());
        let consumed = newline.map_or(input.len(), |n| n + 1);
        if let Some(skipped) = self.skipping {
            let skipped = skipped + take;
            if newline.is_some() {
                self.skipping = None;
                self.push(StdioEvent::LineTooLong { len: skipped });
            } else {
                self.skipping = Some(skipped);
            }
            return consumed;
        }
        let limit = self.config.max_line_bytes.min(self.buf.as_ref().len());
        if self.len + take > limit {
            let skipped = self.len + take;
            // The head of the line names its call, usually: that call
            // fails now rather than at its deadline.
            let room = limit.min(self.len + HEAD_SCAN).saturating_sub(self.len);
            let fill = room.min(take);
            self.buf.as_mut()[self.len..self.len + fill].copy_from_slice(&input[..fill]);
            self.fail_too_long(self.len + fill);
            self.len = 0;
            if newline.is_some() {
                self.push(StdioEvent::LineTooLong { len: skipped });
            } else {
                self.skipping = Some(skipped);
            }
            return consumed;
        }
        self.buf.as_mut()[self.len..self.len + take].copy_from_slice(&input[..take]);
        self.len += take;
        if newline.is_some() {
            self.line = core::mem::take(&mut self.len);
            self.on_line();
        }
        consumed
    }

    /// The server's stdout closed (it exited, crashed or closed it): a
    /// last line without its newline is taken; every call in flight fails
    /// with [`LOCAL_CLOSED`].
    pub fn recv_eof(&mut self) {
        if self.eof {
            return;
        }
        self.line = 0;
        self.lent = (None, Lent::None);
        if self.len > 0 && self.skipping.is_none() {
            self.line = core::mem::take(&mut self.len);
            self.on_line();
        }
        self.eof = true;
        match self.phase {
            Phase::Probing { .. } => {
                self.era
                    .fall_back("the server exited or closed stdout during server/discover");
                self.phase = Phase::AwaitRestart;
                self.push(StdioEvent::RestartNeeded);
            }
            Phase::Initializing { .. } | Phase::Initialized => {
                self.fail_handshake("the server exited or closed stdout during initialize");
            }
            _ => {}
        }
        self.fail_all(
            LOCAL_CLOSED,
            "the server's stdout closed (it exited or crashed) before the response",
        );
        for s in self.slots.iter_mut() {
            s.cancel_owed = false;
            if s.state == State::Cancelling {
                s.state = State::Free;
                s.generation = s.generation.wrapping_add(1);
            }
        }
        self.push(StdioEvent::Closed);
    }

    /// The next event; drain until `None` after every other `&mut` call.
    pub fn poll_event(&mut self) -> Option<StdioEvent> {
        if let Some(e) = self.globals[0].take() {
            self.globals.rotate_left(1);
            return Some(e);
        }
        self.lent = (None, Lent::None);
        for i in 0..CALLS {
            let s = &mut self.slots[i];
            let call = call_id(i, s.generation);
            if s.notified {
                s.notified = false;
                self.lent = (Some(call), Lent::Line);
                return Some(StdioEvent::Notification { call });
            }
            let State::Done { outcome, told } = s.state else {
                continue;
            };
            if outcome == Outcome::InputRequired {
                // The call waits for its answers: it does not end.
                if told {
                    continue;
                }
                s.state = State::Done {
                    outcome,
                    told: true,
                };
                self.lent = (Some(call), Lent::Line);
                return Some(StdioEvent::InputRequired { call });
            }
            if told {
                s.state = if s.cancel_owed {
                    State::Cancelling
                } else {
                    s.generation = s.generation.wrapping_add(1);
                    State::Free
                };
                return Some(StdioEvent::Ended { call });
            }
            s.state = State::Done {
                outcome,
                told: true,
            };
            return Some(match outcome {
                Outcome::Response => {
                    self.lent = (Some(call), Lent::Line);
                    StdioEvent::Response { call }
                }
                Outcome::Error => {
                    self.lent = (Some(call), Lent::Line);
                    StdioEvent::Failed { call }
                }
                Outcome::ServerClosed => {
                    self.lent = (Some(call), Lent::Line);
                    StdioEvent::Notification { call }
                }
                Outcome::InputRequired => StdioEvent::InputRequired { call },
                Outcome::TooManyRounds => {
                    let id = s.id;
                    let n = self.write_too_many_rounds(id);
                    self.lent = (Some(call), Lent::Scratch(n));
                    StdioEvent::Failed { call }
                }
                Outcome::Local { .. } | Outcome::Refused { .. } => {
                    let (code, message) = match outcome {
                        Outcome::Local { code, message } => (code, message),
                        Outcome::Refused { message } => {
                            (crate::mcp::error::INTERNAL_ERROR, message)
                        }
                        _ => (crate::mcp::error::INTERNAL_ERROR, ""),
                    };
                    let id = s.id;
                    let mut w = JsonWriter::new(&mut self.scratch);
                    crate::mcp::envelope::write_error(
                        &mut w,
                        id.get(),
                        code,
                        message.as_bytes(),
                        None,
                    );
                    let n = w.finish().map_or(0, <[u8]>::len);
                    self.lent = (Some(call), Lent::Scratch(n));
                    StdioEvent::Failed { call }
                }
            });
        }
        None
    }

    /// The text of `call`'s event just handed out: a notification, its
    /// response, or its error response.
    pub fn message(&self, call: CallId) -> Option<&[u8]> {
        match self.lent {
            (Some(c), Lent::Line) if c == call => self.buf.as_ref().get(..self.line),
            (Some(c), Lent::Scratch(n)) if c == call => self.scratch.get(..n),
            _ => None,
        }
    }

    /// The error of `call`, after its `Failed` and until its `Ended`.
    pub fn failure(&self, call: CallId) -> Option<StdioFailure<'_>> {
        let i = self.slot_of(call)?;
        let (local, transport) = match self.slots[i].state {
            State::Done {
                outcome: Outcome::Local { .. },
                ..
            } => (true, true),
            State::Done {
                outcome: Outcome::TooManyRounds | Outcome::Refused { .. },
                ..
            } => (true, false),
            _ => (false, false),
        };
        let response = self.message(call)?;
        let Ok(Message::Error { error, .. }) = Message::parse(response, json::DEFAULT_MAX_DEPTH)
        else {
            return None;
        };
        Some(StdioFailure {
            code: json::get(error, b"code")
                .and_then(json::as_i64)
                .unwrap_or(0),
            message: json::get(error, b"message").unwrap_or(b"\"\""),
            data: json::get(error, b"data"),
            response,
            local,
            transport,
        })
    }

    /// The first octets of the line of the last [`StdioEvent::BadLine`]
    /// (up to [`BAD_LINE_PREFIX`]).
    pub fn bad_line(&self) -> &[u8] {
        &self.bad.0[..self.bad.1]
    }

    /// What a bad line likely means.
    pub fn bad_line_cause(json: bool) -> &'static str {
        if json {
            "a JSON line that is not a JSON-RPC message"
        } else {
            "not JSON: the server may be writing logs to stdout"
        }
    }

    /// The line of the last [`StdioEvent::Unmatched`], until the next
    /// `recv`.
    pub fn unmatched(&self) -> &[u8] {
        self.buf.as_ref().get(..self.line).unwrap_or(b"")
    }

    /// Writes the failure of a call (its id `id`) whose server asks for
    /// input once more after the round limit into the scratch buffer; its
    /// length (off the path of every event).
    #[cold]
    #[inline(never)]
    fn write_too_many_rounds(&mut self, id: Raw) -> usize {
        let mut text = [0u8; super::input::TOO_MANY_ROOM];
        let message = super::input::too_many_rounds(self.config.max_input_rounds, &mut text);
        let mut w = JsonWriter::new(&mut self.scratch);
        crate::mcp::envelope::write_error(
            &mut w,
            id.get(),
            crate::mcp::error::INTERNAL_ERROR,
            message,
            None,
        );
        w.finish().map_or(0, <[u8]>::len)
    }

    fn slot_of(&self, call: CallId) -> Option<usize> {
        let i = usize::from(call.index);
        let s = self.slots.get(i)?;
        (s.generation == call.generation && matches!(s.state, State::Live | State::Done { .. }))
            .then_some(i)
    }

    fn push(&mut self, e: StdioEvent) {
        if let Some(g) = self.globals.iter_mut().find(|g| g.is_none()) {
            *g = Some(e);
        }
    }

    fn modern_meta(&self, version: &'static str) -> ModernMeta<'static> {
        ModernMeta {
            version,
            capabilities: self.config.client_capabilities,
            name: self.config.client_name,
            client_version: self.config.client_version,
        }
    }

    fn probe(&mut self, version: &'static str) {
        self.phase = Phase::Probing {
            version,
            deadline: self.now.saturating_add(self.config.probe_timeout),
            sent: false,
        };
    }

    fn initialize(&mut self) {
        self.phase = Phase::Initializing {
            deadline: self.now.saturating_add(self.config.probe_timeout),
            sent: false,
        };
    }

    fn ready(&mut self) {
        self.phase = Phase::Ready;
        self.push(StdioEvent::Ready);
    }

    fn fail_handshake(&mut self, why: &'static str) {
        self.phase = Phase::Failed(why);
        self.push(StdioEvent::HandshakeFailed);
    }

    fn fail_all(&mut self, code: i32, message: &'static str) {
        let keep = self.keep_listens;
        for s in self.slots.iter_mut() {
            // A call waiting for input has no server for its next round.
            if s.running() && !(keep && s.listen) {
                s.state = State::Done {
                    outcome: Outcome::Local { code, message },
                    told: false,
                };
                s.notified = false;
            }
        }
    }
}

fn call_id(index: usize, generation: u16) -> CallId {
    CallId {
        index: u16::try_from(index).unwrap_or(u16::MAX),
        generation,
        link: 0,
    }
}
