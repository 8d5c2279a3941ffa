//! The era's handshake of the Streamable HTTP client engine (MCP
//! 2026-07-28 §8.3, §13.2): the first call of the application waits while
//! the engine makes its own requests and reads their answers with the
//! era rules of [`era`](super::era) (§13.1 for the 2024 shape).
//!
//! - [`EraChoice::Probe`]: `POST server/discover` with the preferred
//!   modern version. A `DiscoverResult` → modern, `Ready`, the calls go.
//!   -32022 naming another modern version → the probe again with it.
//!   401, 403, a 5xx or no answer (the probe timeout) → the waiting calls
//!   fail with that error, never a fallback; -32021 or -32020 (the server
//!   is modern and refused the probe) → they fail with that refusal. Any
//!   other answer → legacy: `initialize`.
//! - [`EraChoice::Legacy`]: `initialize` at once.
//! - `initialize` answered with an `InitializeResult` → the 2025 session
//!   shape: the `Mcp-Session-Id` of that answer's head and the version go
//!   on every later request, `notifications/initialized` first, and
//!   [`close`](crate::mcp::client::ClientEngine::close) ends the session
//!   with `DELETE`.
//! - A 404 to a request of the 2025 session: the server ended it; that
//!   call fails saying so, and the next one starts with `initialize`.
//! - `initialize` refused with 400, 404 or 405 and no modern error → the
//!   2024 HTTP+SSE shape (§13.1, over HTTP/1.1): the engine's `GET` opens
//!   the event stream ([`events`](super::events)); its `endpoint` event
//!   names where `initialize`, `notifications/initialized` and every call
//!   are `POST`ed (answered 202), their responses come on the stream.
//!
//! After a failed handshake the era is unknown again: the next call
//! starts it over. What was learned is [`EraDiagnostics`] (the engine's
//! [`era`](super::HttpClient::era)).

use super::call::{Own, Place};
use super::engine::{HttpClient, Version};
use super::era::{self, InitializeVerdict, MAX_SESSION_ID, ProbeVerdict};
use super::request::Session;
use super::response::{HttpFailure, Judgement, ResponseReader};
use super::send::Shape;
use crate::grpc::Code;
use crate::h2::Storage;
use crate::http1::MediaType;
use crate::mcp::client::calls::bytes;
use crate::mcp::client::calls::{Kind, Mode};
use crate::mcp::client::era::{Era, EraChoice, EraDiagnostics, INITIALIZED, write_initialize};
use crate::mcp::client::stdio::line::{ModernMeta, write_request};
use crate::mcp::envelope::Message;
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;

/// The probe's request, before its `_meta`.
const PROBE: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-probe\",\"method\":\"server/discover\",\"params\":{}}";
/// The id of the engine's `initialize`.
const INIT_ID: &[u8] = b"\"mcpwire-initialize\"";
/// Room for the engine's own requests.
const OWN_ROOM: usize = 1024;

/// Where the engine stands with the server's era.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Not known: the application's next call starts the handshake.
    Unknown,
    /// `server/discover` is out.
    Probing,
    /// `initialize` is out.
    Initializing,
    /// `notifications/initialized` is out.
    Initialized,
    /// The 2024 shape's event stream is opening: its `endpoint` event is
    /// awaited.
    Streaming,
    /// Calls go, in this era.
    Ready(Era),
}

/// The era, and what the requests of its shape carry.
#[derive(Debug)]
pub(super) struct EraState {
    pub(super) choice: EraChoice,
    pub(super) phase: Phase,
    pub(super) diagnostics: EraDiagnostics,
    /// `Ready` is owed to the driver.
    pub(super) ready_owed: bool,
    /// The 2025 session's `Mcp-Session-Id`, when the server gave one.
    session: ([u8; MAX_SESSION_ID], usize),
    /// The 2024 HTTP+SSE shape is spoken (or being set up).
    sse: bool,
    /// The server ended the 2025 session: the handshake starts again with
    /// `initialize`, the era being known.
    reinitialize: bool,
    /// Where the 2024 shape's messages go (the `endpoint` event's target).
    post_target: ([u8; POST_TARGET], usize),
}

/// Room for the 2024 shape's `POST` target.
const POST_TARGET: usize = 256;

impl EraState {
    pub(super) fn new(choice: EraChoice) -> Self {
        let mut state = Self {
            choice,
            phase: Phase::Unknown,
            diagnostics: EraDiagnostics::new(),
            ready_owed: false,
            session: ([0; MAX_SESSION_ID], 0),
            sse: false,
            reinitialize: false,
            post_target: ([0; POST_TARGET], 0),
        };
        if choice == EraChoice::Modern {
            state.diagnostics.set_modern(state.diagnostics.requested);
            state.ready(Era::Modern);
        }
        state
    }

    pub(super) fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready(_))
    }

    fn ready(&mut self, era: Era) {
        self.phase = Phase::Ready(era);
        self.ready_owed = true;
    }

    /// The 2025 session's id.
    fn session_id(&self) -> Option<&[u8]> {
        self.session
            .0
            .get(..self.session.1)
            .filter(|s| !s.is_empty())
    }

    /// Keeps the `Mcp-Session-Id` of the answer to `initialize`.
    pub(super) fn set_session(&mut self, value: Option<&[u8]>) {
        self.session.1 = 0;
        if let Some(id) = value.and_then(era::session_id)
            && let Some(dst) = self.session.0.get_mut(..id.len())
        {
            dst.copy_from_slice(id);
            self.session.1 = id.len();
        }
    }

    /// Where the `endpoint` event's target is written.
    pub(super) fn post_target_room(&mut self) -> &mut [u8] {
        &mut self.post_target.0
    }

    /// The `endpoint` event's target is the first `len` octets of its room.
    pub(super) fn set_post_target(&mut self, len: usize) {
        self.post_target.1 = len.min(POST_TARGET);
    }

    /// The 2024 shape's event stream is gone: the era is unknown again.
    pub(super) fn lost_stream(&mut self) {
        self.phase = Phase::Unknown;
        self.sse = false;
        self.post_target.1 = 0;
    }

    /// The server answered 404 to the 2025 session's id (§13.2): the era
    /// is unknown again and the next handshake is `initialize`.
    pub(super) fn session_ended(&mut self) {
        self.phase = Phase::Unknown;
        self.session.1 = 0;
        self.reinitialize = true;
    }

    /// The shape of the requests that go now.
    pub(super) fn shape(&self) -> Shape<'_> {
        let sse = matches!(
            self.phase,
            Phase::Initializing | Phase::Initialized | Phase::Ready(Era::HttpSse)
        );
        if self.sse && sse {
            let target = self
                .post_target
                .0
                .get(..self.post_target.1)
                .and_then(|t| core::str::from_utf8(t).ok())
                .unwrap_or("/");
            return Shape::HttpSse { target };
        }
        match self.phase {
            Phase::Unknown
            | Phase::Probing
            | Phase::Streaming
            | Phase::Ready(Era::Modern | Era::HttpSse) => Shape::Modern,
            Phase::Initializing => Shape::Session(Session::default()),
            Phase::Initialized | Phase::Ready(Era::Legacy) => Shape::Session(Session {
                id: self.session_id(),
                version: self.diagnostics.version().map(str::as_bytes),
            }),
        }
    }

    /// Whether the 2025 session is to be ended with `DELETE`.
    pub(super) fn has_session(&self) -> bool {
        self.phase == Phase::Ready(Era::Legacy) && self.session_id().is_some()
    }
}

impl<
    S: CallStore,
    const CALLS: usize,
    const LINKS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
    const HEAD: usize,
> HttpClient<S, CALLS, LINKS, TABLE, BUF, B, CACHE, HEAD>
{
    /// Starts the handshake when a call of the application waits and the
    /// era is not known.
    pub(super) fn begin_handshake(&mut self) {
        if self.era.phase != Phase::Unknown || self.closing {
            return;
        }
        let waiting = self
            .calls
            .slots
            .iter()
            .filter_map(|s| s.call.as_ref())
            .any(|c| c.own.is_none() && c.place == Place::Queued && c.terminal.is_none());
        if !waiting {
            return;
        }
        match self.era.choice {
            EraChoice::Legacy => self.send_initialize(),
            _ if self.era.reinitialize => self.send_initialize(),
            _ => self.send_probe(self.era.diagnostics.requested),
        }
    }

    /// `POST server/discover` asking for `version`.
    fn send_probe(&mut self, version: &'static str) {
        let meta = ModernMeta {
            version,
            capabilities: self.config.client_capabilities,
            name: self.config.client_name,
            client_version: self.config.client_version,
        };
        let mut room = [0u8; OWN_ROOM];
        let mut w = JsonWriter::new(&mut room);
        write_request(&mut w, PROBE, Some(meta));
        let Ok(message) = w.finish() else {
            self.handshake_failed(
                None,
                b"the probe does not fit: client_capabilities is too long",
            );
            return;
        };
        let reader = ResponseReader::new(message).unwrap_or_else(|_| ResponseReader::accepted());
        self.era.phase = Phase::Probing;
        if self.start_own(message, Own::Probe, reader).is_none() {
            self.handshake_failed(None, b"no call slot or buffer for the era probe");
        }
    }

    /// `POST initialize` (the 2025-11-25 lifecycle, §13.3).
    pub(super) fn send_initialize(&mut self) {
        let mut room = [0u8; OWN_ROOM];
        let mut w = JsonWriter::new(&mut room);
        write_initialize(
            &mut w,
            INIT_ID,
            self.config.client_name,
            self.config.client_version,
        );
        let Ok(message) = w.finish() else {
            self.handshake_failed(None, b"initialize does not fit");
            return;
        };
        let reader = ResponseReader::new(message).unwrap_or_else(|_| ResponseReader::accepted());
        self.era.phase = Phase::Initializing;
        self.era.set_session(None);
        if self.start_own(message, Own::Initialize, reader).is_none() {
            self.handshake_failed(None, b"no call slot or buffer for initialize");
        }
    }

    /// `POST notifications/initialized` in the new session.
    fn send_initialized(&mut self) {
        self.era.phase = Phase::Initialized;
        if self
            .start_own(INITIALIZED, Own::Initialized, ResponseReader::accepted())
            .is_none()
        {
            self.handshake_failed(
                None,
                b"no call slot or buffer for notifications/initialized",
            );
        }
    }

    /// Tells the server of a legacy era that call `i` is given up
    /// (2025-11-25: a disconnect is no cancellation): `POST
    /// notifications/cancelled` naming its id. `false` when none went (a
    /// modern era, a request the server never got, a notification, no
    /// room): the caller closes the call's exchange instead.
    pub(super) fn send_cancelled(&mut self, i: usize, reason: &str) -> bool {
        if !self.era.is_ready() || !self.era.shape().legacy() {
            return false;
        }
        let Some(slot) = self.calls.slots.get(i) else {
            return false;
        };
        let Some(c) = slot.call.as_ref() else {
            return false;
        };
        let seen = match c.place {
            Place::Link(_) => c.sent > 0 || c.got,
            Place::Stream(_) => c.head_sent,
            Place::Posted => true,
            Place::Queued | Place::Done => false,
        };
        if !seen || c.own.is_some() || c.mode != Mode::Call {
            return false;
        }
        let body = bytes(&self.calls.store, &slot.req)
            .get(c.orig.0..c.orig.1)
            .unwrap_or(b"");
        let Some(id) = json::get(body, b"id").map(json::trim) else {
            return false;
        };
        let mut room = [0u8; OWN_ROOM];
        let mut at = 0;
        for part in [
            &b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"[..],
            id,
            b",\"reason\":\"",
            reason.as_bytes(),
            b"\"}}",
        ] {
            let Some(dst) = room.get_mut(at..at + part.len()) else {
                return false;
            };
            dst.copy_from_slice(part);
            at += part.len();
        }
        let message = &room[..at];
        self.start_own(message, Own::Cancelled, ResponseReader::accepted())
            .is_some()
    }

    /// Ends the 2025 session: `DELETE` with its id (the engine closes).
    pub(super) fn send_delete(&mut self) {
        let _ = self.start_own(b"", Own::Delete, ResponseReader::accepted());
    }

    /// Reads the outcomes of the engine's own requests that ended.
    pub(super) fn settle_own(&mut self) {
        for i in 0..CALLS {
            let Some(c) = self.calls.call(i) else {
                continue;
            };
            let (Some(own), Some(_)) = (c.own, c.terminal) else {
                continue;
            };
            let status = c.diagnostics.http_status.unwrap_or(0);
            let timed_out = c.diagnostics.grpc_status == Some(Code::DeadlineExceeded);
            // A transport failure (no answer, a link that failed, the
            // probe timeout) is judged as an exchange without a response.
            let judgement = c.own_judgement.unwrap_or(Judgement::Failed(HttpFailure {
                reason: "no response",
                status: 0,
                media: MediaType::Other,
                excerpt: 0,
            }));
            match own {
                Own::Probe => self.on_probe(i, judgement, status, timed_out),
                Own::Initialize => self.on_initialize(i, judgement, status, timed_out),
                Own::Initialized => {
                    if matches!(judgement, Judgement::Accepted) {
                        let era = if self.era.sse {
                            Era::HttpSse
                        } else {
                            Era::Legacy
                        };
                        self.era.ready(era);
                    } else {
                        self.handshake_failed(Some(i), b"notifications/initialized was refused");
                    }
                }
                Own::Delete | Own::Cancelled => {}
                Own::Events if self.era.phase == Phase::Streaming && timed_out => {
                    self.handshake_failed(
                        Some(i),
                        b"no endpoint event on the 2024 event stream within the probe timeout",
                    );
                }
                Own::Events if self.era.phase == Phase::Streaming => {
                    // `initialize` was refused already: no era is left.
                    let mut text = [0u8; 160];
                    let why = neither_era(&mut text, status);
                    self.handshake_failed(None, why);
                }
                Own::Events => {
                    if matches!(self.era.phase, Phase::Initializing | Phase::Initialized) {
                        self.handshake_failed(Some(i), b"the 2024 event stream ended");
                    }
                    self.events_lost();
                }
            }
            self.calls.release(i);
        }
    }

    /// The probe's answer.
    fn on_probe(&mut self, i: usize, judgement: Judgement, status: u16, timed_out: bool) {
        let rx = self
            .calls
            .slots
            .get(i)
            .map_or(&[][..], |s| bytes(&self.calls.store, &s.rx));
        if let Judgement::Response { len, .. } = judgement
            && let Some(Ok(message)) = rx
                .get(..len)
                .map(|m| Message::parse(m, json::DEFAULT_MAX_DEPTH))
        {
            self.era.diagnostics.note(&message);
        }
        match era::probe(&judgement, status, rx) {
            ProbeVerdict::Modern(v) => {
                self.era.diagnostics.set_modern(v);
                self.era.ready(Era::Modern);
            }
            ProbeVerdict::Retry(v) if self.era.diagnostics.renegotiated.is_none() => {
                self.era.diagnostics.renegotiated = Some(v);
                self.era.phase = Phase::Unknown;
                self.send_probe(v);
            }
            ProbeVerdict::Retry(_) => {
                self.handshake_failed(Some(i), b"-32022 again after the probe's renegotiation");
            }
            ProbeVerdict::Refused { code } => {
                self.era.diagnostics.probe_error = Some(code);
                self.handshake_failed(Some(i), b"the server refused server/discover");
            }
            ProbeVerdict::Failed(_) if timed_out => {
                self.handshake_failed(
                    None,
                    b"no answer to server/discover within the probe timeout",
                );
            }
            ProbeVerdict::Failed(why) => self.handshake_failed(Some(i), why.as_bytes()),
            ProbeVerdict::Legacy(why) => {
                self.era.diagnostics.fall_back(why);
                self.send_initialize();
            }
        }
    }

    /// `initialize`'s answer.
    fn on_initialize(&mut self, i: usize, judgement: Judgement, status: u16, timed_out: bool) {
        let rx = self
            .calls
            .slots
            .get(i)
            .map_or(&[][..], |s| bytes(&self.calls.store, &s.rx));
        match era::initialize(&judgement, status, rx) {
            InitializeVerdict::Session { version } => {
                let mut copy = [0u8; 64];
                let n = version.len().min(copy.len());
                copy[..n].copy_from_slice(&version[..n]);
                let era = if self.era.sse {
                    Era::HttpSse
                } else {
                    Era::Legacy
                };
                self.era.diagnostics.set_legacy(era, &copy[..n]);
                self.send_initialized();
            }
            InitializeVerdict::HttpSse if self.era.sse => {
                self.handshake_failed(Some(i), b"initialize was refused on the 2024 shape too");
            }
            InitializeVerdict::HttpSse if self.version == Some(Version::Http2) => {
                self.handshake_failed(
                    Some(i),
                    b"initialize was refused: the 2024 HTTP+SSE shape is spoken over HTTP/1.1 only",
                );
            }
            InitializeVerdict::HttpSse => self.open_events(),
            InitializeVerdict::Failed(_) if timed_out => {
                self.handshake_failed(None, b"no answer to initialize within the probe timeout");
            }
            InitializeVerdict::Failed(why) => self.handshake_failed(Some(i), why.as_bytes()),
        }
    }

    /// The 2024 shape (§13.1): `GET` the endpoint for its event stream,
    /// whose `endpoint` event names where messages go.
    fn open_events(&mut self) {
        self.era.sse = true;
        self.era.phase = Phase::Streaming;
        if self
            .start_own(b"", Own::Events, ResponseReader::accepted())
            .is_none()
        {
            self.handshake_failed(None, b"no call slot or buffer for the 2024 event stream");
        }
    }

    /// The handshake failed: every call that waited for it fails, as the
    /// engine's own request `own` failed when it did (its status, its
    /// challenge), else with `why`; the era is unknown again (an event
    /// stream opened for it is closed).
    fn handshake_failed(&mut self, own: Option<usize>, why: &[u8]) {
        for j in 0..CALLS {
            if self.is_events(j) && Some(j) != own {
                self.abandon(j);
                self.calls.release(j);
            }
        }
        self.era.lost_stream();
        for j in 0..CALLS {
            let waiting = self.calls.call(j).is_some_and(|c| {
                c.own.is_none() && c.place == Place::Queued && c.terminal.is_none()
            });
            if !waiting {
                continue;
            }
            let failed_as_own = own.is_some_and(|o| {
                self.calls
                    .call(o)
                    .and_then(|c| c.terminal)
                    .is_some_and(|t| t.kind == Kind::Failed)
                    && self.calls.fail_as(j, o)
            });
            if !failed_as_own {
                self.calls.fail_transport(j, Code::Unavailable, why, None);
            }
        }
    }

    /// Starts a request of the engine's own (`message`), judged by
    /// `reader`, due within the probe timeout.
    pub(super) fn start_own(
        &mut self,
        message: &[u8],
        own: Own,
        reader: ResponseReader,
    ) -> Option<usize> {
        let deadline = Some(self.now.saturating_add(self.config.probe_timeout));
        let (token, token_len) = match &self.bearer {
            Some((b, n)) => (Some(b), *n),
            None => (None, 0),
        };
        self.calls
            .admit(message, token, token_len, reader, deadline, Some(own))
    }
}

/// Why a URL is no MCP server of any era (§13): `initialize` was refused,
/// and the `GET` of the 2024 event stream answered `status`; in `buf`.
fn neither_era(buf: &mut [u8; 160], status: u16) -> &[u8] {
    const WHY: &[u8] = b"the URL answers neither era of MCP: initialize was refused, and \
the GET of the 2024 HTTP+SSE event stream too";
    let mut digits = [0u8; 20];
    let digits = crate::http1::write::decimal(u64::from(status), &mut digits);
    let mut len = 0;
    let parts: [&[u8]; 4] = [WHY, b" (HTTP ", digits, b")"];
    let parts = if status == 0 { &parts[..1] } else { &parts[..] };
    for part in parts {
        let Some(dst) = buf.get_mut(len..len + part.len()) else {
            break;
        };
        dst.copy_from_slice(part);
        len += part.len();
    }
    &buf[..len]
}
