//! One contract for the client engine of every binding ([`ClientEngine`],
//! the counterpart of the server's
//! [`ServerEngine`](crate::mcp::server::ServerEngine)): the gRPC tunnel
//! ([`TunnelClient`](super::TunnelClient)), Streamable HTTP and stdio. A
//! driver runs any of them with one loop, and no MCP rule lives in it.
//!
//! An engine speaks over *links*: byte streams it names and asks the
//! driver to open ([`ClientEvent::Connect`]) and close
//! ([`ClientEvent::Disconnect`]): the tunnel's HTTP/2 connection (a new one
//! when the last went away), a stdio server's pipes (a child process or a
//! serial device; a new one when it crashed), the Streamable HTTP client's
//! connections. Where a link goes is the driver's configuration; when one
//! is needed, and what it carries, the engine's.
//!
//! # The run loop
//!
//! As for every endpoint of this crate ([`crate::drive`]): after any input
//! (a call started or cancelled, octets read, a link up or down, time),
//! drain [`ClientEngine::poll_event`] — opening and closing the links it
//! names — then write what [`ClientEngine::poll_transmit`] gives for each
//! link that [`wants_transmit`](ClientEngine::wants_transmit), then sleep
//! until input or [`ClientEngine::poll_timeout`]. `recv` may consume less
//! than it was given: drain the events, then feed the rest. The texts an
//! event stands for ([`ClientEngine::message`], [`ClientEngine::failure`])
//! are read before the next `&mut` call (so is what
//! [`ClientEngine::input_requests`] gives: some engines keep it longer).

use core::time::Duration;

use super::events::{CallId, ClientEvent, Diagnostics, Failure, StartError};
use crate::mcp::error::{INVALID_REQUEST, RpcError};
use crate::time::Instant;

/// The method of a listen stream: one that lasts until it is cancelled or
/// the server ends it, so it gets no deadline unless its caller sets one
/// ([`CallOptions::timeout`]). Every engine asks [`is_listen`], and so
/// does a driver that times the calls it holds (by the name, unquoted).
pub const LISTEN_METHOD: &str = "subscriptions/listen";

/// Whether a request of `method` (its raw JSON string, quotes included,
/// as it stands in the request) opens a listen stream ([`LISTEN_METHOD`]).
pub fn is_listen(method: &[u8]) -> bool {
    crate::mcp::json::str_eq(method, LISTEN_METHOD.as_bytes())
}

/// A byte stream of a client engine, named by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub(crate) u32);

impl LinkId {
    /// A number that tells the engine's links apart (for logs).
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// What the driver's transport agreed on for a link it opened: the
/// protocol TLS's ALPN chose (none in the clear or without ALPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Negotiated {
    /// Cleartext, a pipe, or TLS without ALPN.
    #[default]
    Nothing,
    /// ALPN `h2`.
    Http2,
    /// ALPN `http/1.1`.
    Http1,
}

/// The options of one call besides its message.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallOptions {
    /// Replaces the engine's request timeout for this call. A
    /// `subscriptions/listen` without one has no deadline: it lasts until
    /// it is cancelled or the server ends it.
    pub timeout: Option<Duration>,
    /// Over the gRPC tunnel: the typed binding's unary RPC for the methods
    /// that have one (see [`Binding`](super::Binding)).
    #[cfg(feature = "typed")]
    pub binding: super::Binding,
    /// The application answers the server's requests for input (MCP
    /// 2026-07-28 §9, for `tools/call`, `resources/read`, `prompts/get`):
    /// a result with `resultType: "input_required"` is
    /// [`ClientEvent::InputRequired`] and the call stays open for
    /// [`ClientEngine::answer_input`], at most the engine's
    /// `max_input_rounds` times. Without it (the default) such a result is
    /// the call's `Response`, as for a proxy that hands it on to its own
    /// client.
    pub answers_input: bool,
}

impl CallOptions {
    /// A call with its own timeout.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            timeout: Some(timeout),
            ..Self::default()
        }
    }

    /// A call whose application answers the server's requests for input.
    pub fn answering_input() -> Self {
        Self {
            answers_input: true,
            ..Self::default()
        }
    }
}

/// The client engine of one binding; see the module documentation for
/// the run loop.
pub trait ClientEngine {
    /// Starts a call of one JSON-RPC message (its text: a request with its
    /// `id` and `params._meta`, or a notification). Nothing is written
    /// yet: the engine sends it on one of its links (asking for one with
    /// [`ClientEvent::Connect`] when it has none). [`StartError::Busy`]:
    /// try again after a call's `Ended` (or once the engine is ready).
    fn start(
        &mut self,
        message: &[u8],
        options: CallOptions,
        now: Instant,
    ) -> Result<CallId, StartError>;

    /// Stops a call (a reset stream, a closed exchange, a
    /// `notifications/cancelled`, as the binding says). No event follows;
    /// the handle is dead. `false` when the call was already over.
    fn cancel(&mut self, call: CallId, now: Instant) -> bool;

    /// The next event; drain until `None` after every other call.
    fn poll_event(&mut self) -> Option<ClientEvent>;

    /// The text of `call`'s last [`ClientEvent::Notification`], or, after
    /// its `Response` or `Failed` and until its `Ended`, its JSON-RPC
    /// response.
    fn message(&self, call: CallId) -> Option<&[u8]>;

    /// The `result` of `call`'s response, after its `Response`.
    fn result(&self, call: CallId) -> Option<&[u8]>;

    /// The JSON-RPC error of `call`, after its `Failed`.
    fn failure(&self, call: CallId) -> Option<Failure<'_>>;

    /// What the server asks of `call` after its
    /// [`ClientEvent::InputRequired`]: the result's `inputRequests` object
    /// (key → `{method, params}`), `{}` when the result carried only a
    /// `requestState` (answer `{}` at once). The whole result is
    /// [`result`](ClientEngine::result). Read before the next `&mut` call,
    /// as every event's text.
    fn input_requests(&self, call: CallId) -> Option<&[u8]>;

    /// Answers `call`'s [`ClientEvent::InputRequired`] with `responses`
    /// (one JSON object, keyed as the `inputRequests`): the engine sends
    /// the request again — same method and `params` (its `_meta` too), a
    /// new JSON-RPC id (the application's with `#1`, `#2`... appended, as a
    /// string), `params.inputResponses` = `responses` and the result's
    /// `params.requestState` exactly (none when it had none) — and the
    /// call goes on under the same [`CallId`]. A round that cannot go (its
    /// request does not fit the call store or the message limit, the link
    /// is gone) fails the call: its `Failed` says why. An `Err`
    /// ([`StartError::Invalid`]) leaves the call waiting: it does not wait
    /// for input (over, or not started with
    /// [`CallOptions::answers_input`]), or `responses` is not a JSON object.
    fn answer_input(
        &mut self,
        call: CallId,
        responses: &[u8],
        now: Instant,
    ) -> Result<(), StartError>;

    /// The tool a [`ClientEvent::Warning`] just handed out names.
    fn warning_tool(&self, call: CallId) -> Option<&[u8]>;

    /// The driver opened `link` (asked by [`ClientEvent::Connect`]).
    fn link_up(&mut self, link: LinkId, negotiated: Negotiated, now: Instant);

    /// The driver could not open `link`: `reason` says why (it becomes the
    /// message of the calls that waited for it).
    fn link_failed(&mut self, link: LinkId, reason: &[u8], now: Instant);

    /// Feeds octets read from `link`; returns how many were consumed.
    fn recv(&mut self, link: LinkId, input: &[u8], now: Instant) -> usize;

    /// `link` reached the end of its input, or failed.
    fn recv_eof(&mut self, link: LinkId, now: Instant);

    /// Whether `link` has octets to write.
    fn wants_transmit(&self, link: LinkId) -> bool;

    /// Writes what `link` has to send into `out`; call while
    /// [`wants_transmit`](ClientEngine::wants_transmit).
    fn poll_transmit(&mut self, link: LinkId, out: &mut [u8]) -> usize;

    /// The next deadline.
    fn poll_timeout(&self) -> Option<Instant>;

    /// Lets time pass.
    fn handle_timeout(&mut self, now: Instant);

    /// Ends the engine gracefully: no new call; listen streams (which a
    /// server never ends) fail with "the client closed", the other calls
    /// in progress run to their end; every link is closed ([`ClientEvent::Disconnect`]), then
    /// [`ClientEvent::ConnectionClosed`].
    fn close(&mut self, now: Instant);

    /// Over: [`ClientEngine::close`] finished, or the engine cannot go on.
    fn is_closed(&self) -> bool;

    /// The input schema of `tool` (raw JSON string of its name) the
    /// engine mirrors `x-mcp-header` arguments from, when it learned one
    /// (bindings that mirror headers).
    fn cached_schema(&self, tool: &[u8]) -> Option<&[u8]> {
        let _ = tool;
        None
    }

    /// Forgets the learned schemas: a tool's arguments are mirrored again
    /// after the next `tools/list`.
    fn clear_schemas(&mut self) {}

    /// Starts what the first call would (a link, the era's handshake)
    /// with a call that sends nothing and waits for it: the call ends
    /// ([`ClientEvent::Ended`] alone) once calls go out, or fails
    /// ([`ClientEvent::Failed`]) as the handshake failed (its status, its
    /// challenge, the server's refusal). A driver that must know the
    /// server's era before the application's first call uses it. An
    /// engine without a handshake refuses it (-32600).
    fn start_handshake(&mut self, now: Instant) -> Result<CallId, StartError> {
        let _ = now;
        Err(StartError::Invalid(RpcError::new(
            INVALID_REQUEST,
            "this client engine has no handshake to wait for",
        )))
    }

    /// What is known of `call`'s exchange (its HTTP status, its HTTP
    /// version, whether it was sent again), after its `Response` or
    /// `Failed` and until its `Ended`; `None` from an engine that reports
    /// only a failure's.
    fn diagnostics(&self, call: CallId) -> Option<Diagnostics> {
        let _ = call;
        None
    }

    /// Why [`StartError::Down`]: the engine cannot reach its server now.
    fn down_reason(&self) -> Option<&[u8]> {
        None
    }

    /// The first octets of what the last [`ClientEvent::Skipped`] names.
    fn skipped_text(&self) -> &[u8] {
        &[]
    }

    /// Reaches for the server now, before the first call (an engine that
    /// opens its links at the first call otherwise): a driver that wants
    /// to know at once whether the server can be reached calls it, then
    /// waits for [`ClientEvent::Ready`] or [`ClientEvent::Down`].
    fn open(&mut self, now: Instant) {
        let _ = now;
    }

    /// The text of the last [`ClientEvent::Note`].
    fn note_text(&self) -> &[u8] {
        &[]
    }

    /// What the engine learned of the server's era (bindings with more
    /// than one era: Streamable HTTP, stdio).
    fn era(&self) -> Option<&super::era::EraDiagnostics> {
        None
    }

    /// Replaces the bearer token of every later request (`None`: no
    /// `Authorization`), for bindings that send one. `false`, and nothing
    /// changed, when the engine sends none or refuses this one (not a
    /// `token68`, RFC 9110 §11.2; no room for it).
    fn set_bearer(&mut self, token: Option<&str>) -> bool {
        let _ = token;
        false
    }
}
