//! The Streamable HTTP client engine ([`HttpClient`], a [`ClientEngine`]),
//! sans-IO and allocation-free: it drives the exchange pieces of this
//! module (MCP 2026-07-28 §5) over the links it asks the driver for.
//!
//! # Links
//!
//! Over HTTP/1.1 ([`Http2Mode::Never`], or [`Http2Mode::Alpn`] when the
//! first link did not negotiate `h2`), a pool of at most
//! [`HttpClientConfig::pool_size`] links (and `LINKS`), each carrying one
//! exchange at a time ([`ClientConnection`]) and kept alive for the next:
//! a call waits in the engine for a free link, and the engine asks for a
//! new one (`Connect`) while calls wait and the pool has room. Over HTTP/2
//! ([`Http2Mode::Always`], or ALPN `h2`), one link carries every call as a
//! stream of one [`Connection`]; a link told GOAWAY keeps its streams to
//! their end, and the calls after it wait for the next link.
//!
//! A cancelled call (and one past its deadline) closes its HTTP/1.1 link
//! (`Disconnect`: the server sees the cancellation, §5.7) or resets its
//! stream with CANCEL. A request written on a kept-alive link that the
//! server had closed (its end, or a reset, before any octet of the answer)
//! is sent once more on a new link; a stream the server refused
//! unprocessed (REFUSED_STREAM) once more on a new stream. After a
//! response the rest of the answer is read for [`DRAIN_WAIT`], then the
//! link is closed (the stream reset).
//!
//! # Calls
//!
//! [`ClientEngine::start`] takes one JSON-RPC message with its `_meta`.
//! Each goes in a `POST` with the mirrored fields (§5.4, the tool's
//! `x-mcp-header` arguments from the annotation cache the `tools/list`
//! results fill), the bearer token ([`HttpClient::set_bearer`]) and
//! `Accept` for JSON and event streams; the answer is judged by
//! [`ResponseReader`]: notifications, then one response or one failure
//! that names the status, the media type and the body's first octets;
//! a notification's call ends at 202 with no message. A `tools/call`
//! refused with -32020 reads `tools/list` again and goes once more (the
//! tunnel's rule, [`cache`](super::super::cache)). 401 and 403 fail with
//! their `WWW-Authenticate` ([`Failure::www_authenticate`]). A call's
//! deadline is the request timeout, none for `subscriptions/listen`. A
//! call that answers input requests ([`CallOptions::answers_input`]) goes
//! through its rounds as [`ClientEngine::answer_input`] says: each round a
//! new `POST` (with the same mirrored fields), queued for a link as a new
//! call is; a call waiting for input holds no link.
//!
//! # The era
//!
//! As [`HttpClientConfig::era`] says (§8.3): by default the first call
//! waits while `server/discover` probes the server; a modern answer makes
//! the engine `Ready`; an answer that is no evidence (401, 403, a 5xx, no
//! answer) fails the waiting calls; a legacy one falls back to the 2025
//! session shape (`initialize`, then `Mcp-Session-Id` and the negotiated
//! version on every request, the bodies without the modern `_meta` keys,
//! `DELETE` at `close`), and when `initialize` is refused too, to the
//! 2024 HTTP+SSE shape (a `GET` event stream whose `endpoint` event names
//! where messages are `POST`ed; their responses come on that stream,
//! matched by id). [`HttpClient::era`] says what was learned.
//!
//! # The run loop
//!
//! [`ClientEngine`]'s. A notification's text is read before the next
//! `recv`: `recv` stops after one (it consumed less than it was given:
//! drain the events, then feed the rest).

use super::call::{Calls, Own, Place};
use super::config::{DRAIN_WAIT, Http2Mode, HttpClientConfig};
use super::h2link::{H2Link, H2State};
use super::lifecycle::EraState;
use super::pool::{Link, LinkState};
use super::request::RequestError;
use super::send::{self, Shape};
use crate::grpc::Code;
use crate::h2::{InlineStorage, Storage};
use crate::http1::{ClientConnection, SseParser};
use crate::mcp::client::calls::Kind;
use crate::mcp::client::engine::{CallOptions, ClientEngine, LinkId, Negotiated};
use crate::mcp::client::era::EraDiagnostics;
use crate::mcp::client::events::{CallId, ClientEvent, Diagnostics, Failure, StartError};
use crate::mcp::client::input;
use crate::mcp::error::{INTERNAL_ERROR, INVALID_REQUEST, RpcError};
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::time::Instant;

use super::response::ResponseReader;

/// The HTTP version of the engine's links, once known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Version {
    Http1,
    Http2,
}

/// The Streamable HTTP client engine: `CALLS` calls at a time (and HTTP/2
/// streams), their buffers from the call store `S`; at most `LINKS`
/// HTTP/1.1 links, each reading response heads of up to `HEAD` octets;
/// one HTTP/2 connection of `TABLE` octets of HPACK table and `BUF`-octet
/// frame buffers in the storage `B`; `CACHE` octets of annotation cache.
pub struct HttpClient<
    S: CallStore,
    const CALLS: usize,
    const LINKS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> = InlineStorage<BUF>,
    const CACHE: usize = 2048,
    const HEAD: usize = 4096,
> {
    pub(super) config: HttpClientConfig,
    pub(super) calls: Calls<S, CALLS, CACHE>,
    pub(super) pool: [Link<HEAD>; LINKS],
    pub(super) h2: H2Link<CALLS, TABLE, BUF, B>,
    pub(super) era: EraState,
    /// The bearer token set at run time, in a buffer of the store, and its
    /// length.
    pub(super) bearer: Option<(S::Buf, usize)>,
    pub(super) version: Option<Version>,
    /// The 2024 shape's event stream: its parser, and the octets fed to
    /// it since its last event.
    pub(super) events_parser: SseParser,
    pub(super) events_fed: usize,
    pub(super) next_link: u32,
    pub(super) now: Instant,
    pub(super) closing: bool,
    pub(super) closed_told: bool,
}

impl<
    S: CallStore,
    const CALLS: usize,
    const LINKS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF>,
    const CACHE: usize,
    const HEAD: usize,
> core::fmt::Debug for HttpClient<S, CALLS, LINKS, TABLE, BUF, B, CACHE, HEAD>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HttpClient")
            .field("version", &self.version)
            .field("phase", &self.era.phase)
            .field("closing", &self.closing)
            .finish_non_exhaustive()
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
    /// An engine with no link yet: the first call asks for one.
    pub fn new(config: HttpClientConfig, store: S, now: Instant) -> Self {
        let mut client = Self {
            config,
            calls: Calls::new(store, &config),
            pool: core::array::from_fn(|_| Link::new()),
            h2: H2Link::new(config.h2, now),
            era: EraState::new(config.era),
            bearer: None,
            version: match config.http2 {
                Http2Mode::Never => Some(Version::Http1),
                Http2Mode::Always => Some(Version::Http2),
                Http2Mode::Alpn => None,
            },
            events_parser: SseParser::new(),
            events_fed: 0,
            next_link: 0,
            now,
            closing: false,
            closed_told: false,
        };
        if let Some(token) = config.bearer {
            let _ = client.set_bearer(Some(token));
        }
        client
    }

    /// Sets the bearer token of every later call (`None`: no
    /// `Authorization`), copied into a buffer of the call store (a token
    /// read at run time need not be `'static`); it replaces
    /// [`HttpClientConfig::bearer`]. `false`, and nothing changed, when it
    /// is not a `token68` (RFC 9110 §11.2) or the store has no buffer.
    pub fn set_bearer(&mut self, token: Option<&str>) -> bool {
        let Some(token) = token else {
            if let Some((old, _)) = self.bearer.take() {
                self.calls.store.put(old);
            }
            return true;
        };
        if super::request::check_bearer(Some(token)).is_err() {
            return false;
        }
        let Some(mut buf) = self.calls.store.take(token.len()) else {
            return false;
        };
        if let Some(dst) = self.calls.store.bytes_mut(&mut buf).get_mut(..token.len()) {
            dst.copy_from_slice(token.as_bytes());
        }
        if let Some((old, _)) = self.bearer.replace((buf, token.len())) {
            self.calls.store.put(old);
        }
        true
    }

    /// What the engine knows of the server's era (§8.3): the era, the
    /// version in use, the server's versions, whether and why it fell
    /// back.
    pub fn era(&self) -> &EraDiagnostics {
        &self.era.diagnostics
    }

    /// The cached input schema of `tool` (raw JSON string of its name),
    /// when a `tools/list` gave it `x-mcp-header` annotations.
    pub fn cached_schema(&self, tool: &[u8]) -> Option<&[u8]> {
        self.calls.cache.get(tool)
    }

    /// Forgets every cached schema.
    pub fn clear_schemas(&mut self) {
        self.calls.cache.clear();
    }

    /// The call store.
    pub fn store(&self) -> &S {
        &self.calls.store
    }

    /// The HTTP/1.1 links open now (idle or busy).
    pub fn open_links(&self) -> usize {
        self.pool
            .iter()
            .filter(|l| !matches!(l.state, LinkState::Free))
            .count()
            + usize::from(!matches!(self.h2.state, H2State::Free))
    }

    /// A link's number, for the driver.
    pub(super) fn new_link_id(&mut self) -> LinkId {
        let id = LinkId(self.next_link);
        self.next_link = self.next_link.wrapping_add(1);
        id
    }

    /// After any input: links whose call left them drain, the engine's own
    /// exchanges that ended are read (each may start the next step of the
    /// era's handshake), and every call moves forward.
    pub(super) fn advance(&mut self) {
        // A handshake has at most a few steps; each may end at once (a
        // request that cannot be written).
        for _ in 0..8 {
            self.settle_links();
            self.settle_own();
            self.pump();
            let own_over = self
                .calls
                .slots
                .iter()
                .filter_map(|s| s.call.as_ref())
                .any(|c| c.own.is_some() && c.terminal.is_some());
            if !own_over {
                break;
            }
        }
        self.settle_links();
    }

    /// Moves every call forward: calls onto free links and streams, links
    /// asked for, requests written.
    pub(super) fn pump(&mut self) {
        self.begin_handshake();
        if self.era.is_ready() {
            self.calls.handshake_over();
        }
        match self.version {
            Some(Version::Http2) => self.pump_h2(),
            _ => self.pump_pool(),
        }
        if self.closing && !self.calls.slots.iter().any(|s| s.call.is_some()) {
            // Closing: the links go once no call needs them.
            for link in self.pool.iter_mut() {
                match link.state {
                    LinkState::Idle => link.close(),
                    LinkState::Connect => link.state = LinkState::Free,
                    _ => {}
                }
            }
            if !self.h2.going_away {
                self.h2.go_away();
            }
            if self.h2.state == H2State::Up {
                self.pump_h2();
            }
        }
    }

    /// Whether a call waiting in the queue may go now.
    pub(super) fn eligible(ready: bool) -> impl Fn(&super::call::Call) -> bool {
        move |c| c.own.is_some() || ready
    }

    /// HTTP/1.1: each waiting call on an idle link, in order; new links
    /// asked for while calls wait and the pool has room.
    fn pump_pool(&mut self) {
        let ready = self.era.is_ready();
        while let Some(i) = self.calls.next_queued(Self::eligible(ready)) {
            let fresh = self.calls.call(i).is_some_and(|c| c.fresh);
            let Some(li) = self
                .pool
                .iter()
                .position(|l| l.state == LinkState::Idle && !(fresh && l.reused))
            else {
                break;
            };
            self.place_on_link(i, li);
        }
        let waiting = self
            .calls
            .slots
            .iter()
            .filter_map(|s| s.call.as_ref())
            .filter(|c| c.place == Place::Queued && c.terminal.is_none())
            .filter(|c| Self::eligible(ready)(c))
            .count();
        let mut coming = self
            .pool
            .iter()
            .filter(|l| matches!(l.state, LinkState::Connect | LinkState::Connecting))
            .count();
        let mut open = self
            .pool
            .iter()
            .filter(|l| l.state != LinkState::Free)
            .count();
        // Until the first link tells the version, it is the only one; the
        // 2024 shape's event stream holds a link beside the pool's.
        let stream = usize::from(
            self.calls
                .slots
                .iter()
                .filter_map(|s| s.call.as_ref())
                .any(|c| c.own == Some(Own::Events) && matches!(c.place, Place::Link(_))),
        );
        let limit = match self.version {
            None => 1,
            _ => (self.config.pool_size.max(1) + stream).min(LINKS),
        };
        let own_waiting = self
            .calls
            .slots
            .iter()
            .filter_map(|s| s.call.as_ref())
            .any(|c| c.own.is_some() && c.place == Place::Queued);
        let fresh_waiting = self
            .calls
            .next_queued(Self::eligible(ready))
            .and_then(|i| self.calls.call(i))
            .is_some_and(|c| c.fresh);
        if fresh_waiting && coming == 0 && open >= limit {
            // A call resent after a closed link needs a new one: an idle
            // kept-alive link makes room.
            if let Some(link) = self.pool.iter_mut().find(|l| l.state == LinkState::Idle) {
                link.close();
            }
        }
        while waiting > coming && open < limit && (!self.closing || own_waiting) {
            let Some(li) = self.pool.iter().position(|l| l.state == LinkState::Free) else {
                break;
            };
            let id = self.new_link_id();
            self.pool[li].open(id);
            coming += 1;
            open += 1;
        }
    }

    /// Puts call `i` on idle link `li`: its request written, then sent by
    /// `poll_transmit`.
    fn place_on_link(&mut self, i: usize, li: usize) {
        let shape = self.era.shape();
        if !send::prepare_body(&mut self.calls, i, shape) {
            self.calls.fail_transport(
                i,
                Code::ResourceExhausted,
                b"the request does not fit the call store",
                None,
            );
            return;
        }
        let own = self.calls.call(i).and_then(|c| c.own);
        if let Some(c) = self.calls.call_mut(i) {
            // The 2024 shape: a request's POST is answered 202, its
            // response comes on the event stream.
            c.posted = matches!(shape, Shape::HttpSse { .. })
                && own != Some(Own::Events)
                && c.reader.expect() == super::response::Expect::Response;
        }
        self.calls.reset_reader(i);
        match send::write_http1(&mut self.calls, i, &self.config, shape) {
            Ok(()) => {}
            Err(e) => {
                self.fail_request(i, e);
                return;
            }
        }
        let generation = self.calls.call_id(i).generation;
        if let Some(c) = self.calls.call_mut(i) {
            c.place = Place::Link(li);
        }
        let link = &mut self.pool[li];
        link.state = LinkState::Busy {
            slot: i,
            generation,
        };
        link.conn = ClientConnection::new();
        let _ = link.conn.start(match own {
            Some(Own::Delete) => "DELETE",
            Some(Own::Events) => "GET",
            _ => "POST",
        });
    }

    /// The last judgement of call `i`'s exchange. In the 2025 session
    /// shape a 404 says the server ended the session (§13.2): the call
    /// fails saying so, and the next call initializes a new session.
    pub(super) fn judge(&mut self, i: usize, j: super::response::Judgement) {
        if let super::response::Judgement::Failed(f) = &j
            && f.status == 404
            && self.era.has_session()
            && self.calls.call(i).is_some_and(|c| c.own.is_none())
        {
            self.era.session_ended();
            self.calls.fail_transport(
                i,
                Code::Unavailable,
                b"the server ended the 2025 session (404 to its Mcp-Session-Id): the next call starts a new one",
                Some(404),
            );
            return;
        }
        self.calls.judged(i, j);
    }

    /// Fails call `i` whose request could not be written.
    pub(super) fn fail_request(&mut self, i: usize, e: RequestError) {
        match e {
            RequestError::Invalid(e) => self.calls.fail_rpc(i, e),
            RequestError::BadEndpoint(why) => {
                self.calls
                    .fail_transport(i, Code::InvalidArgument, why.as_bytes(), None);
            }
            RequestError::Overflow { .. } => self.calls.fail_transport(
                i,
                Code::ResourceExhausted,
                b"the request does not fit the call store",
                None,
            ),
        }
    }

    /// A link has gone that calls waited for: when no link is up or coming
    /// any more, the waiting calls fail with `reason` (never processed).
    pub(super) fn fail_waiting_if_stranded(&mut self, reason: &[u8]) {
        let pool_alive = self
            .pool
            .iter()
            .any(|l| !matches!(l.state, LinkState::Free | LinkState::Disconnect));
        let h2_alive = matches!(
            self.h2.state,
            H2State::Connect | H2State::Connecting | H2State::Up
        );
        if pool_alive || h2_alive {
            return;
        }
        let ready = self.era.is_ready();
        while let Some(i) = self.calls.next_queued(Self::eligible(ready)) {
            self.calls
                .fail_transport(i, Code::Unavailable, reason, None);
            if let Some(t) = self.calls.call_mut(i).and_then(|c| c.terminal.as_mut()) {
                t.diagnostics.refused = true;
            }
        }
    }

    /// Gives up call `i` (cancelled, or past its deadline) for `reason`.
    /// In a legacy era the server is told with `notifications/cancelled`
    /// (a disconnect is no cancellation there), and the call's exchange is
    /// only let go: read for [`DRAIN_WAIT`], then closed, so that the
    /// server has the cancellation first. Otherwise its wire is abandoned.
    pub(super) fn give_up(&mut self, i: usize, reason: &str) {
        if !self.send_cancelled(i, reason) {
            self.abandon(i);
            return;
        }
        let Some(c) = self.calls.call_mut(i) else {
            return;
        };
        // An HTTP/1.1 link whose call left drains (`settle_links`).
        if let Place::Stream(s) = core::mem::replace(&mut c.place, Place::Done) {
            let until = self.now.saturating_add(DRAIN_WAIT);
            self.h2.linger(s, until);
        }
    }

    /// Gives up call `i`'s wire: its HTTP/1.1 link closes (the server sees
    /// the cancellation), its stream is reset with CANCEL.
    pub(super) fn abandon(&mut self, i: usize) {
        let Some(c) = self.calls.call_mut(i) else {
            return;
        };
        let place = core::mem::replace(&mut c.place, Place::Done);
        match place {
            Place::Link(li) => {
                if let Some(link) = self.pool.get_mut(li) {
                    link.close();
                }
            }
            Place::Stream(s) => self.h2.cancel(s),
            Place::Queued | Place::Posted | Place::Done => {}
        }
    }

    /// After calls' states changed: links whose call left them drain the
    /// rest of its answer.
    pub(super) fn settle_links(&mut self) {
        let now = self.now;
        for (li, link) in self.pool.iter_mut().enumerate() {
            if let LinkState::Busy { slot, generation } = link.state {
                let still = self.calls.slots.get(slot).is_some_and(|s| {
                    s.generation == generation
                        && s.call.as_ref().is_some_and(|c| c.place == Place::Link(li))
                });
                if !still {
                    link.state = LinkState::Draining {
                        until: now.saturating_add(DRAIN_WAIT),
                    };
                }
            }
        }
    }

    /// Every link let go and told: the engine's end.
    fn all_links_gone(&self) -> bool {
        self.pool.iter().all(|l| l.state == LinkState::Free) && self.h2.state == H2State::Free
    }

    /// Fails every call still waiting with `message` (the engine closes).
    fn fail_queued(&mut self, message: &[u8]) {
        while let Some(i) = self.calls.next_queued(|_| true) {
            self.calls
                .fail_transport(i, Code::Unavailable, message, None);
        }
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
> ClientEngine for HttpClient<S, CALLS, LINKS, TABLE, BUF, B, CACHE, HEAD>
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
        let invalid = |m| StartError::Invalid(RpcError::new(INVALID_REQUEST, m));
        if json::validate(message, json::DEFAULT_MAX_DEPTH).is_err()
            || json::kind(message) != Some(json::Kind::Object)
        {
            return Err(invalid("not a JSON-RPC message"));
        }
        let method = json::get(message, b"method").ok_or(invalid("not a JSON-RPC request"))?;
        // Every rule on the body and its mirrored fields, before a call
        // is taken (the era's shape may drop them later, never add).
        super::request::post_fields(message, None, None, |_, _| {}).map_err(|e| match e {
            RequestError::Invalid(e) => StartError::Invalid(e),
            _ => invalid("the request cannot be written"),
        })?;
        let reader = ResponseReader::new(message).map_err(StartError::Invalid)?;
        let needed = message.len() + self.bearer.as_ref().map_or(0, |b| b.1);
        if message.len() > self.calls.max_message || needed > self.calls.store.max_len() {
            return Err(StartError::TooLarge { needed });
        }
        let listen = crate::mcp::client::engine::is_listen(method);
        let deadline = match (options.timeout, listen) {
            (None, true) => None,
            (t, _) => Some(now.saturating_add(t.unwrap_or(self.config.request_timeout))),
        };
        let (token, token_len) = match &self.bearer {
            Some((b, n)) => (Some(b), *n),
            None => (None, 0),
        };
        let i = self
            .calls
            .admit(message, token, token_len, reader, deadline, None)
            .ok_or(StartError::Busy)?;
        if let Some(c) = self.calls.call_mut(i) {
            c.answers_input = options.answers_input;
        }
        let call = self.calls.call_id(i);
        self.advance();
        Ok(call)
    }

    fn start_handshake(&mut self, now: Instant) -> Result<CallId, StartError> {
        self.now = now;
        if self.closing {
            return Err(StartError::Closed);
        }
        let deadline = Some(now.saturating_add(self.config.request_timeout));
        let i = self
            .calls
            .admit(b"", None, 0, ResponseReader::accepted(), deadline, None)
            .ok_or(StartError::Busy)?;
        if let Some(c) = self.calls.call_mut(i) {
            c.handshake = true;
        }
        let call = self.calls.call_id(i);
        self.advance();
        Ok(call)
    }

    fn diagnostics(&self, call: CallId) -> Option<Diagnostics> {
        self.calls.diagnostics(call)
    }

    fn era(&self) -> Option<&EraDiagnostics> {
        Some(&self.era.diagnostics)
    }

    fn set_bearer(&mut self, token: Option<&str>) -> bool {
        HttpClient::set_bearer(self, token)
    }

    fn cached_schema(&self, tool: &[u8]) -> Option<&[u8]> {
        self.calls.cache.get(tool)
    }

    fn clear_schemas(&mut self) {
        self.calls.cache.clear();
    }

    fn cancel(&mut self, call: CallId, now: Instant) -> bool {
        self.now = now;
        let Some(i) = self.calls.slot_of(call) else {
            return false;
        };
        self.give_up(i, "the client cancelled the request");
        self.calls.release(i);
        self.advance();
        true
    }

    fn poll_event(&mut self) -> Option<ClientEvent> {
        if core::mem::take(&mut self.era.ready_owed) {
            return Some(ClientEvent::Ready);
        }
        for link in self.pool.iter_mut() {
            if let Some(e) = link.owed_event() {
                return Some(e);
            }
        }
        if let Some(e) = self.h2.owed_event() {
            return Some(e);
        }
        if let Some(e) = self.calls.poll_event() {
            if self.closing && matches!(e, ClientEvent::Ended { .. }) {
                // The last call gone lets the links go.
                self.pump();
            }
            return Some(e);
        }
        if self.closing && !self.closed_told && self.all_links_gone() {
            self.closed_told = true;
            return Some(ClientEvent::ConnectionClosed { error: None });
        }
        None
    }

    fn message(&self, call: CallId) -> Option<&[u8]> {
        self.calls.message(call)
    }

    fn result(&self, call: CallId) -> Option<&[u8]> {
        self.calls.result(call)
    }

    fn failure(&self, call: CallId) -> Option<Failure<'_>> {
        self.calls.failure(call)
    }

    fn warning_tool(&self, call: CallId) -> Option<&[u8]> {
        self.calls.warning_tool(call)
    }

    fn input_requests(&self, call: CallId) -> Option<&[u8]> {
        self.calls.input_requests(call)
    }

    /// The next round waits for a link as a new call would (behind the
    /// calls started before it): it needs none of the last round's.
    fn answer_input(
        &mut self,
        call: CallId,
        responses: &[u8],
        now: Instant,
    ) -> Result<(), StartError> {
        self.now = now;
        input::check_responses(responses).map_err(StartError::Invalid)?;
        let i = self
            .calls
            .slot_of(call)
            .filter(|&i| {
                self.calls
                    .call(i)
                    .and_then(|c| c.terminal)
                    .is_some_and(|t| t.kind == Kind::InputRequired && t.delivered)
            })
            .ok_or(StartError::Invalid(input::NOT_WAITING))?;
        if let Err(why) = self.calls.start_round(i, responses) {
            self.calls.fail_rpc(i, RpcError::new(INTERNAL_ERROR, why));
        }
        self.advance();
        Ok(())
    }

    fn link_up(&mut self, link: LinkId, negotiated: Negotiated, now: Instant) {
        self.now = now;
        if let Some(li) = self.pool.iter().position(|l| l.id == link) {
            if self.pool[li].state != LinkState::Connecting {
                return;
            }
            if negotiated == Negotiated::Http2 && self.config.http2 == Http2Mode::Alpn {
                // ALPN chose h2: this link carries every call from now on.
                self.version = Some(Version::Http2);
                self.pool[li].state = LinkState::Free;
                self.h2.up(link, self.config.h2, now);
            } else {
                if self.version.is_none() {
                    self.version = Some(Version::Http1);
                }
                self.pool[li].state = LinkState::Idle;
                self.pool[li].reused = false;
            }
        } else if self.h2.id == link && self.h2.state == H2State::Connecting {
            if negotiated == Negotiated::Http1 {
                self.h2.state = H2State::Disconnect;
                self.fail_waiting_if_stranded(
                    b"the server chose ALPN http/1.1: HTTP/2 (Http2Mode::Always) needs h2",
                );
            } else {
                self.h2.up(link, self.config.h2, now);
            }
        }
        self.advance();
    }

    fn link_failed(&mut self, link: LinkId, reason: &[u8], now: Instant) {
        self.now = now;
        if let Some(l) = self.pool.iter_mut().find(|l| l.id == link) {
            if l.state == LinkState::Connecting {
                l.state = LinkState::Free;
            }
        } else if self.h2.id == link && self.h2.state == H2State::Connecting {
            self.h2.state = H2State::Free;
        }
        self.fail_waiting_if_stranded(reason);
        self.advance();
    }

    fn recv(&mut self, link: LinkId, input: &[u8], now: Instant) -> usize {
        self.now = now;
        // A new round: the notification lent out is gone.
        self.calls.note = None;
        let n = if let Some(li) = self.pool.iter().position(|l| l.id == link && l.is_open()) {
            self.recv_link(li, input)
        } else if self.h2.id == link && self.h2.state == H2State::Up {
            self.recv_h2(input)
        } else {
            // Octets of a link the engine let go: dropped.
            input.len()
        };
        self.advance();
        n
    }

    fn recv_eof(&mut self, link: LinkId, now: Instant) {
        self.now = now;
        if let Some(li) = self.pool.iter().position(|l| l.id == link && l.is_open()) {
            self.eof_link(li);
        } else if self.h2.id == link && self.h2.state == H2State::Up {
            self.h2.conn.recv_eof();
            self.drain_h2();
        }
        self.advance();
    }

    fn wants_transmit(&self, link: LinkId) -> bool {
        if let Some(l) = self.pool.iter().find(|l| l.id == link && l.is_open()) {
            return match l.state {
                LinkState::Busy { slot, .. } => self
                    .calls
                    .call(slot)
                    .is_some_and(|c| c.sent < c.wire.1 - c.wire.0),
                _ => false,
            };
        }
        self.h2.id == link && self.h2.state == H2State::Up && self.h2.conn.wants_transmit()
    }

    fn poll_transmit(&mut self, link: LinkId, out: &mut [u8]) -> usize {
        if let Some(li) = self.pool.iter().position(|l| l.id == link && l.is_open()) {
            return self.transmit_link(li, out);
        }
        if self.h2.id == link && self.h2.state == H2State::Up {
            return self.transmit_h2(out);
        }
        0
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let calls = self
            .calls
            .slots
            .iter()
            .filter_map(|s| s.call.as_ref())
            .filter(|c| c.running())
            .filter_map(|c| c.deadline);
        let links = self.pool.iter().filter_map(|l| match l.state {
            LinkState::Draining { until } => Some(until),
            _ => None,
        });
        calls.chain(links).chain(self.h2.poll_timeout()).min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        for i in 0..CALLS {
            let due = self
                .calls
                .call(i)
                .is_some_and(|c| c.running() && c.deadline.is_some_and(|d| now >= d));
            if due {
                self.give_up(i, "the request timed out");
                self.calls
                    .fail_transport(i, Code::DeadlineExceeded, b"deadline exceeded", None);
            }
        }
        for link in self.pool.iter_mut() {
            if let LinkState::Draining { until } = link.state
                && now >= until
            {
                link.close();
            }
        }
        if self.h2.state == H2State::Up {
            self.h2.handle_timeout(now);
            self.drain_h2();
        }
        self.advance();
    }

    fn close(&mut self, now: Instant) {
        self.now = now;
        if self.closing {
            return;
        }
        self.closing = true;
        // The 2024 shape's event stream ends with the engine.
        for i in 0..CALLS {
            if self
                .calls
                .call(i)
                .is_some_and(|c| c.own == Some(Own::Events))
            {
                self.abandon(i);
                self.calls.release(i);
            }
        }
        // Listen streams, which a server never ends, would hold their
        // links open for ever: they end here; the other calls run on.
        for i in 0..CALLS {
            if self.calls.call(i).is_some_and(|c| {
                c.own.is_none() && c.deadline.is_none() && !c.handshake && c.terminal.is_none()
            }) {
                self.abandon(i);
                self.calls
                    .fail_transport(i, Code::Unavailable, b"the client closed", None);
            }
        }
        self.fail_queued(b"the client closed before the call was sent");
        // A call waiting for input has no next round now.
        for i in 0..CALLS {
            if self
                .calls
                .call(i)
                .is_some_and(super::call::Call::waits_for_input)
            {
                self.calls.fail_transport(
                    i,
                    Code::Unavailable,
                    b"the client closed while the call waited for input",
                    None,
                );
            }
        }
        if self.era.has_session() {
            // The 2025 session ends with DELETE (§13.2), before the links go.
            self.send_delete();
            self.pump();
        }
        for link in self.pool.iter_mut() {
            if let LinkState::Draining { .. } = link.state {
                link.close();
            }
        }
        self.advance();
    }

    fn is_closed(&self) -> bool {
        self.closed_told
    }
}
