//! The MCP client engine of the gRPC tunnel binding
//! (`/mcp.zig.transport.v1.Mcp/Call`), sans-IO, over an HTTP/2 connection
//! in the client role. No allocator: a call takes its buffers from a
//! [`CallStore`] — one for its framed request when it starts, one for its
//! incoming messages when the first arrives (grown to each message's
//! declared length, up to [`ClientConfig::max_message_bytes`]) — and gives
//! both back when it ends; the annotation cache is `CACHE` octets inline.
//!
//! [`Client::call`] takes one JSON-RPC request as text. The client builds
//! the call's metadata from the body ([`mirror_headers`]: protocol version,
//! method, name and the `x-mcp-header` arguments of the tool, from the
//! annotations of the last `tools/list` seen through this client), sends
//! what is left of the request timeout in `grpc-timeout`, and hands back
//! ([`ClientEvent`], each naming its call; the texts through the
//! accessors):
//!
//! - [`ClientEvent::Notification`] for each notification on the call's
//!   stream (progress, listen events), as it arrives
//!   ([`Client::message`]);
//! - then exactly one of [`ClientEvent::Response`] (a result,
//!   [`Client::message`]) or [`ClientEvent::Failed`] (a JSON-RPC error,
//!   [`Client::failure`]: from an error response message or from the
//!   trailers — `mcp-error-bin`, else `mcp-error-code` with
//!   `grpc-message`, else the status — or a transport failure);
//! - then [`ClientEvent::Ended`]: the call's handle is dead.
//!
//! A notification (a body without `id`) gets only `Ended` (or `Failed`).
//!
//! A call started with [`CallOptions::answers_input`]
//! ([`Client::call_with`]) whose server asks for input (MCP 2026-07-28 §9:
//! a result with `resultType: "input_required"`) gets
//! [`ClientEvent::InputRequired`] instead of its `Response`
//! ([`Client::input_requests`] says what is asked) and stays open: the
//! application's answers ([`Client::answer_input`]) go in the next
//! round's request, on a new stream, and its events follow on the same
//! call; at most [`ClientConfig::max_input_rounds`] rounds, within the
//! call's one deadline.
//!
//! Binding rules applied here: an annotated integer outside ±(2^53−1) is
//! refused by `call` with -32600 before a byte goes out; a tool whose
//! annotations are invalid is dropped from the `tools/list` result handed to
//! the application ([`ClientEvent::Warning`] says which); after -32020 on a
//! `tools/call` the client reads `tools/list` again (every page, at most
//! [`ClientConfig::max_list_pages`], walked by [`pages`]) and sends the
//! call once more; a call whose stream the
//! server refused unprocessed (RST_STREAM REFUSED_STREAM before a response,
//! which a stream above a GOAWAY's last stream id also gets) is sent once
//! more on a new stream, a second refusal fails it ([`Diagnostics`] says
//! `refused`, and `retried` when the retry went out); a response that
//! ended before a reset is kept (the early-response rule); [`Diagnostics`]
//! carries the HTTP status, with 401 and 403 for UNAUTHENTICATED and
//! PERMISSION_DENIED. The connection remembers [`REMEMBERED_RESETS`]
//! streams it reset, as the binding says.
//!
//! # The typed binding
//!
//! With the `typed` feature, `Client::call_on` sends a call over a
//! `Binding`: a request whose method has an RPC of
//! `model_context_protocol.Mcp` (the eight of
//! [`mcpwire_proto::gcp::Rpc`]) goes as that unary RPC (typed binding
//! digest §10). Its `params` are transcoded into the request message
//! before a stream opens (a request the mapping refuses, of the wrong
//! shape or with what the messages cannot carry, a cursor, a key without
//! a field, an unsafe integer, gets -32600 and nothing is sent); the head
//! carries the RPC's path, `grpc-timeout`, `mcp-protocol-version`, the
//! RPC's routing key and the metadata, but no mirrored headers. The one
//! response message stands only with trailers `grpc-status: 0` (a second
//! message, or trailers without a status, fail the call as INTERNAL); it
//! is handed out as the JSON-RPC response the tunnel gives, with the
//! request's id. Errors come from the trailers in the binding's order, as
//! on the tunnel. Deadlines, cancels and refused streams are the tunnel
//! call's. A method without an RPC is refused (`Binding::Typed`) or sent
//! over the tunnel (`Binding::TypedOrTunnel`).
//!
//! # The run loop
//!
//! The HTTP/2 connection's: feed input with [`Client::recv`] until
//! consumed, draining [`Client::poll_event`] after every call (a
//! notification's text lives until the next `recv`; every text until the
//! next `&mut` call), write [`Client::poll_transmit`] until 0, sleep until
//! input or [`Client::poll_timeout`], then [`Client::handle_timeout`].
//!
//! A request larger than the message limit, or than the store's largest
//! buffer, is refused by `call` ([`StartError::TooLarge`]); a store with no
//! free buffer refuses it with [`StartError::Busy`]. An incoming message
//! over the limit fails its call with RESOURCE_EXHAUSTED; so does one the
//! store cannot hold (its largest buffer bounds the messages of a call
//! that arrive in one `recv`: the client feeds the connection at most
//! [`RECV_CHUNK`] octets per `recv`).
//!
//! # Generic parameters
//!
//! `Client<S, CALLS, TABLE, BUF, B, CACHE>`, in the order of the HTTP/2
//! [`Connection`] and of the server engine: the call store `S`; `CALLS`
//! calls (and HTTP/2 streams) at a time; the connection's `TABLE` octets
//! of HPACK table and `BUF`-octet frame buffers held by the storage `B`
//! (inline by default); then what only the client has: `CACHE` octets of
//! annotation cache.
//!
//! One concept a file: [`config`] the settings, [`events`] the events and
//! the texts they stand for, `calls` a call's slot and state, `cache` the
//! annotation cache and the re-list, `request` the request head and frame,
//! `response` what comes back on a stream, [`metadata`] the binding's
//! metadata rules without a connection, `typed` the typed binding's
//! request message and response.

mod cache;
mod calls;
pub mod config;
pub mod engine;
pub mod era;
pub mod events;
pub mod http;
mod input;
mod keepalive;
pub mod metadata;
pub mod pages;
mod request;
mod response;
mod round;
pub mod stdio;
mod tunnel;
#[cfg(feature = "typed")]
mod typed;

use core::time::Duration;

pub use config::{ClientConfig, MAX_INPUT_ROUNDS, MAX_LIST_PAGES, RECV_CHUNK, REMEMBERED_RESETS};

/// The client of a microcontroller: 4 concurrent calls, a 4 KiB HPACK
/// table, 2 KiB frame buffers, everything inline.
pub type DeviceClient<S> = Client<S, 4, 4096, 2048>;

/// The client of a host: 32 concurrent calls, a 4 KiB HPACK table, 16 KiB
/// frame buffers in the storage `B` (on the heap in the tokio driver).
pub type HostClient<S, B> = Client<S, 32, 4096, 16384, B>;
pub use engine::{CallOptions, ClientEngine, LISTEN_METHOD, LinkId, Negotiated, is_listen};
pub use events::{CallId, ClientEvent, Diagnostics, Failure, Skipped, StartError};
pub use http::{Http2Mode, HttpClient, HttpClientConfig};
pub use keepalive::Keepalive;
pub use metadata::{CallOutcome, error_from_trailers, mirror_headers};
pub use tunnel::TunnelClient;
#[cfg(feature = "typed")]
pub use typed::Binding;

use cache::Cache;
use calls::{
    Active, Kind, MAX_AUTH, Mode, Slot, Wire, abort, bytes, fail_rpc, fail_transport, mark_refused,
    release,
};
use events::{Queue, Queued};
use keepalive::{Due, KEEPALIVE_FAILURE, Pinger};
use metadata::Mirrored;
use request::{FRAME_ROOM, Framed, Head, OwnedMeta, build_head, frame_into};

use super::error::{INTERNAL_ERROR, INVALID_REQUEST, RpcError};
use super::json;
use super::store::CallStore;
use crate::grpc::{Code, MessageDecoder, PREFIX_LEN};
use crate::h2::{
    self, Connection, ConnectionError, ErrorCode, Event, HeaderList, InlineStorage, Storage,
    StreamError, StreamRef,
};
use crate::hpack;
use crate::records::Records;
use crate::time::Instant;
use mcpwire_proto::gcp::Rpc;

/// Room for a request head (its names and values as text) that most
/// calls' heads fit in: it is built there first, and in all of the
/// connection's `BUF` only when it does not fit, so that a call does not
/// have `BUF` octets zeroed twice (its check, its send).
const HEAD_ROOM: usize = 1024;

/// Builds a request head with `build` in a room of [`HEAD_ROOM`] (or `BUF`
/// when that is less), again in all of `BUF` only when it did not fit (the
/// usual head fits: a call does not have `BUF` zeroed for it), and hands the
/// head and the outcome of `build` to `then`.
fn with_head<const BUF: usize, R>(
    build: impl Fn(&mut Head<'_>) -> Result<(), RpcError>,
    then: impl FnOnce(&Head<'_>, Result<(), RpcError>) -> R,
) -> R {
    let mut small = [0u8; HEAD_ROOM];
    let mut large: [u8; BUF];
    let mut head = Head::new(&mut small[..HEAD_ROOM.min(BUF)]);
    let mut built = build(&mut head);
    if head.is_full() && BUF > HEAD_ROOM {
        large = [0u8; BUF];
        head = Head::new(&mut large);
        built = build(&mut head);
    }
    then(&head, built)
}

/// Everything but the connection, so that the connection's events (which
/// borrow it) can be handled.
struct State<S: CallStore, R, const CACHE: usize> {
    /// The call slots, grown as calls need them (up to `CALLS`).
    slots: R,
    store: S,
    max_message: usize,
    /// Pages of `tools/list` a re-list reads at most.
    max_pages: usize,
    /// Rounds of input a call answers at most.
    max_rounds: u8,
    cache: Cache<CACHE>,
    queue: Queue,
    /// The notification or warning last handed out (its text is read
    /// from here until the next `&mut` call).
    lent: Option<Queued>,
    closed: Option<Option<ConnectionError>>,
    closed_told: bool,
    /// The peer sent GOAWAY: no new call starts here.
    going_away: bool,
    /// `:authority` and metadata set with [`Client::set_metadata`], in a
    /// buffer of the store (see [`OwnedMeta`]), with the length of its
    /// contents (the buffer may be longer).
    owned_meta: Option<(S::Buf, usize)>,
    /// Keepalive PINGs.
    pinger: Pinger,
    /// Why this end ended the connection, for the calls it fails.
    close_message: Option<&'static [u8]>,
}

impl<S: CallStore, R, const CACHE: usize> State<S, R, CACHE> {
    fn owned_meta(&self) -> OwnedMeta<'_> {
        OwnedMeta::of(&self.store, &self.owned_meta)
    }
}

/// The client engine over one connection: `CALLS` calls at a time (and
/// HTTP/2 streams), each with buffers from the call store `S` (two per
/// call: a [`SlabStore`](super::SlabStore) of `2 × CALLS` buffers never
/// refuses a call); `TABLE`, `BUF` and the storage `B` make the HTTP/2
/// connection; `CACHE` octets of annotation cache.
pub struct Client<
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> = InlineStorage<BUF>,
    const CACHE: usize = 2048,
> {
    conn: Connection<CALLS, TABLE, BUF, REMEMBERED_RESETS, B>,
    config: ClientConfig,
    now: Instant,
    st: State<S, B::Records<Slot<S::Buf>, CALLS>, CACHE>,
    /// The request heads' names and values, coded once (none kept on a
    /// small target, where the RAM is dearer than the coding).
    literals: hpack::LiteralCache<LITERAL_SLOTS, 64>,
}

/// String literals of request heads kept coded: every name and value of a
/// usual tunnel call's head fits.
const LITERAL_SLOTS: usize = if json::WORDS { 16 } else { 0 };

impl<
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF>,
    const CACHE: usize,
> core::fmt::Debug for Client<S, CALLS, TABLE, BUF, B, CACHE>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Client")
            .field("conn", &self.conn)
            .field(
                "calls",
                &self.st.slots.iter().filter(|s| s.active.is_some()).count(),
            )
            .finish_non_exhaustive()
    }
}

impl<
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
> Client<S, CALLS, TABLE, BUF, B, CACHE>
{
    /// A client for one connection (already connected, or about to be:
    /// the connection preface is the first thing `poll_transmit` writes),
    /// whose calls take their buffers from `store`.
    pub fn new(config: ClientConfig, store: S, now: Instant) -> Self {
        Self {
            conn: Connection::new(h2::Role::Client, config.h2, now),
            config,
            now,
            st: State {
                slots: Default::default(),
                store,
                max_message: config.max_message_bytes,
                max_pages: config.max_list_pages,
                max_rounds: config.max_input_rounds,
                cache: Cache::new(),
                queue: Queue::new(),
                lent: None,
                closed: None,
                closed_told: false,
                going_away: false,
                owned_meta: None,
                pinger: Pinger::new(config.keepalive, now),
                close_message: None,
            },
            literals: hpack::LiteralCache::new(),
        }
    }

    /// Sets the `:authority` and the metadata of every later call (and of
    /// retries) from values that need not be `'static`, such as a bearer
    /// token read at run time: they are copied into a buffer of the call
    /// store, which is kept until they are set again. They replace
    /// [`ClientConfig::authority`] (when `authority` is given) and go out
    /// after [`ClientConfig::metadata`]. `false`, and nothing changed, when
    /// a name or value is over 65535 octets or the store has no buffer for
    /// them.
    pub fn set_metadata(&mut self, authority: Option<&str>, metadata: &[(&str, &str)]) -> bool {
        let Some(len) = OwnedMeta::encoded_len(authority, metadata) else {
            return false;
        };
        let Some(mut buf) = self.st.store.take(len) else {
            return false;
        };
        OwnedMeta::encode(
            &mut self.st.store.bytes_mut(&mut buf)[..len],
            authority,
            metadata,
        );
        if let Some((old, _)) = self.st.owned_meta.replace((buf, len)) {
            self.st.store.put(old);
        }
        true
    }

    /// Takes the metadata [`Client::set_metadata`] gave `other` (the last
    /// connection, for the next): `false` when the store has no buffer.
    pub fn copy_metadata(&mut self, other: &Self) -> bool {
        let from = OwnedMeta::of(&other.st.store, &other.st.owned_meta).bytes();
        if from.is_empty() {
            return true;
        }
        let Some(mut buf) = self.st.store.take(from.len()) else {
            return false;
        };
        self.st.store.bytes_mut(&mut buf)[..from.len()].copy_from_slice(from);
        if let Some((old, _)) = self.st.owned_meta.replace((buf, from.len())) {
            self.st.store.put(old);
        }
        true
    }

    /// Whether a call is in progress or its last events wait to be read.
    pub fn has_calls(&self) -> bool {
        self.st.slots.iter().any(|s| s.active.is_some())
    }

    /// Fails every call in progress with `status` and `message` (the
    /// driver's transport could not be made or failed outside the
    /// connection, e.g. a TLS handshake): the connection is over.
    /// `unsent`: nothing of them reached the server (the transport never
    /// came up), so each is marked refused.
    pub fn fail_calls(&mut self, status: Code, message: &[u8], unsent: bool) {
        self.st.close_message = None;
        for slot in self.st.slots.iter_mut() {
            let unsent = unsent || slot.active.as_ref().is_some_and(|a| !a.head_sent);
            if slot.active.as_ref().is_some_and(|a| a.terminal.is_none()) {
                fail_transport(&mut self.st.store, slot, status, message, None);
                if unsent {
                    mark_refused(slot);
                }
            }
        }
        self.conn.abort(ErrorCode::NO_ERROR, "transport failed");
        self.drain();
    }

    /// The HTTP/2 connection, for its state.
    pub fn connection(&self) -> &Connection<CALLS, TABLE, BUF, REMEMBERED_RESETS, B> {
        &self.conn
    }

    /// The call store.
    pub fn store(&self) -> &S {
        &self.st.store
    }

    /// Whether the connection is over.
    pub fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    /// The cached input schema of `tool` (raw JSON string of its name, with
    /// quotes), when the last `tools/list` gave it `x-mcp-header`
    /// annotations.
    pub fn cached_schema(&self, tool: &[u8]) -> Option<&[u8]> {
        self.st.cache.get(tool)
    }

    /// Whether [`Client::call`] can start calls: the connection is not
    /// over and the peer sent no GOAWAY (a driver then connects anew).
    pub fn accepts_calls(&self) -> bool {
        !self.conn.is_closed() && self.st.closed.is_none() && !self.st.going_away
    }

    /// Every cached input schema with `x-mcp-header` annotations: (raw JSON
    /// string of the tool's name, raw schema), as [`Client::cached_schema`].
    pub fn cached_schemas(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.st.cache.entries()
    }

    /// Adds the input `schema` of `tool` (raw JSON string of its name, with
    /// quotes) to the annotation cache, as if a `tools/list` had given it:
    /// a driver that connects anew keeps what the last connection learned.
    /// `false` when the schema has no valid `x-mcp-header` annotations, the
    /// tool is already cached or the cache has no room.
    pub fn learn_schema(&mut self, tool: &[u8], schema: &[u8]) -> bool {
        self.st.cache.learn_schema(tool, schema)
    }

    /// Forgets every cached schema: a tool's arguments are mirrored again
    /// after the next `tools/list` (or the re-list a -32020 causes).
    pub fn clear_schemas(&mut self) {
        self.st.cache.clear();
    }

    /// Whether a call is still in progress (not yet `Ended`).
    pub fn is_active(&self, call: CallId) -> bool {
        self.st.slot_of(call).is_some()
    }

    /// Starts a call of one JSON-RPC request (`body`, with its `id`,
    /// `params._meta` and all). `timeout` replaces the configured request
    /// timeout; a `subscriptions/listen` without one has no deadline.
    pub fn call(
        &mut self,
        body: &[u8],
        timeout: Option<Duration>,
        now: Instant,
    ) -> Result<CallId, StartError> {
        self.start(body, timeout, now, None, false)
    }

    /// [`Client::call`] with all of a call's [`CallOptions`]: its timeout,
    /// its binding (with the `typed` feature, as [`Client::call_on`]), and
    /// whether the application answers the server's requests for input
    /// ([`CallOptions::answers_input`]: see [`Client::answer_input`]).
    pub fn call_with(
        &mut self,
        body: &[u8],
        options: CallOptions,
        now: Instant,
    ) -> Result<CallId, StartError> {
        #[cfg(feature = "typed")]
        let rpc = match options.binding {
            Binding::Tunnel => None,
            binding => {
                let method = json::get(body, b"method").unwrap_or(b"");
                binding.rpc_for(method).map_err(StartError::Invalid)?
            }
        };
        #[cfg(not(feature = "typed"))]
        let rpc = None;
        self.start(body, options.timeout, now, rpc, options.answers_input)
    }

    /// [`Client::call`] over `binding`: with the typed binding, a request
    /// whose method has an RPC of `model_context_protocol.Mcp` is that
    /// unary RPC (its `params` transcoded before a stream opens: a request
    /// the messages cannot carry is refused with -32600), and its response
    /// comes back as the JSON-RPC response the tunnel gives, with the
    /// request's id; errors are read from the trailers in the binding's
    /// order, as on the tunnel. A method without an RPC is refused
    /// ([`Binding::Typed`]) or goes over the tunnel
    /// ([`Binding::TypedOrTunnel`]).
    #[cfg(feature = "typed")]
    pub fn call_on(
        &mut self,
        binding: Binding,
        body: &[u8],
        timeout: Option<Duration>,
        now: Instant,
    ) -> Result<CallId, StartError> {
        let options = CallOptions {
            timeout,
            binding,
            ..CallOptions::default()
        };
        self.call_with(body, options, now)
    }

    fn start(
        &mut self,
        body: &[u8],
        timeout: Option<Duration>,
        now: Instant,
        rpc: Option<Rpc>,
        answers_input: bool,
    ) -> Result<CallId, StartError> {
        self.now = now;
        if !self.accepts_calls() {
            return Err(StartError::Closed);
        }
        // Every rule on the body and the head, before a byte goes out.
        let (id, method, located) = if rpc.is_none() {
            let parts = Mirrored::locate(body).map_err(StartError::Invalid)?;
            let schema = parts.tool_name().and_then(|name| self.st.cache.get(name));
            let build = |head: &mut Head<'_>| {
                build_head(
                    head,
                    &self.config,
                    self.st.owned_meta(),
                    schema,
                    &parts,
                    None,
                )
            };
            with_head::<BUF, _>(build, |_, built| built).map_err(StartError::Invalid)?;
            (parts.id, parts.method, Some(parts.spans(body)))
        } else {
            let [id, method] = json::validate_get_all(
                body,
                [b"id", b"method"],
                json::DEFAULT_MAX_DEPTH,
            )
            .map_err(|_| {
                StartError::Invalid(RpcError::new(INVALID_REQUEST, "not a JSON-RPC request"))
            })?;
            (id, method.unwrap_or(b""), None)
        };
        if id.is_some_and(|id| json::trim(id).len() > calls::MAX_ID) {
            return Err(StartError::Invalid(RpcError::new(
                INVALID_REQUEST,
                "JSON-RPC id longer than 128 octets",
            )));
        }
        let listen = engine::is_listen(method);
        let slots = self.st.slots.len();
        let index = self
            .st
            .slots
            .iter()
            .position(|s| s.active.is_none())
            .or((slots < CALLS).then_some(slots))
            .ok_or(StartError::Busy)?;
        let Framed {
            buf,
            frame,
            json: json_at,
        } = match rpc {
            None => self.frame_tunnel(body)?,
            #[cfg(feature = "typed")]
            Some(rpc) => typed::frame_request(&mut self.st.store, rpc, body, self.st.max_message)?,
            #[cfg(not(feature = "typed"))]
            Some(_) => return Err(StartError::Closed),
        };
        if index == slots && !self.st.slots.grow_to(slots + 1) {
            self.st.store.put(buf);
            return Err(StartError::Busy);
        }
        let slot = &mut self.st.slots[index];
        slot.req = Some(buf);
        let deadline = match (timeout, listen) {
            (None, true) => None,
            (t, _) => Some(now.saturating_add(t.unwrap_or(self.config.request_timeout))),
        };
        slot.active = Some(Active {
            wire: Wire::Idle,
            head_sent: false,
            frame,
            json: json_at,
            sent: 0,
            orig_frame: frame,
            orig_json: json_at,
            deadline,
            located,
            mode: Mode::Call,
            // A typed call has no mirrored headers to read again after a
            // -32020.
            tool_call: rpc.is_none() && json::str_eq(method, b"tools/call"),
            typed: rpc,
            tools_list: json::str_eq(method, b"tools/list"),
            decoder: MessageDecoder::new(self.st.max_message),
            msg_start: 0,
            response: None,
            response_error: None,
            response_result: None,
            diagnostics: Diagnostics::default(),
            auth: ([0; MAX_AUTH], None),
            reset_owed: false,
            stale: None,
            terminal: None,
            resent: false,
            answers_input,
            rounds: 0,
        });
        let call = self.st.call_id(index);
        self.pump();
        Ok(call)
    }

    /// The framed `JsonRpcMessage` of a tunnel call in a buffer of the
    /// store: the buffer, where the frame lies and where its JSON lies.
    fn frame_tunnel(&mut self, body: &[u8]) -> Result<Framed<S::Buf>, StartError> {
        let needed = FRAME_ROOM + body.len();
        if needed > self.st.store.max_len() || needed - PREFIX_LEN > self.st.max_message {
            return Err(StartError::TooLarge { needed });
        }
        let mut buf = self.st.store.take(needed).ok_or(StartError::Busy)?;
        let framed = frame_into(self.st.store.bytes_mut(&mut buf), 0, |w| {
            w.raw(body);
        });
        match framed {
            Ok((json, end)) => Ok(Framed {
                buf,
                frame: (0, end),
                json: (json, end),
            }),
            Err(needed) => {
                self.st.store.put(buf);
                Err(StartError::TooLarge { needed })
            }
        }
    }

    /// Stops a call: RST_STREAM(CANCEL) when its stream is open. No event
    /// follows; the handle is dead. `false` when the call was already over.
    pub fn cancel(&mut self, call: CallId) -> bool {
        let Some(i) = self.st.slot_of(call) else {
            return false;
        };
        if let Some(a) = self.st.slots[i].active.as_ref() {
            // The stream of an earlier attempt too, when one is still owed
            // its reset.
            let open = match a.wire {
                Wire::Open(s) => Some(s),
                _ => None,
            };
            for s in [open, a.stale].into_iter().flatten() {
                let _ = self.conn.reset(s, ErrorCode::CANCEL);
            }
        }
        self.st.release(i);
        self.pump();
        true
    }

    /// Starts a graceful close: GOAWAY(NO_ERROR). A call waiting for input
    /// fails (UNAVAILABLE): its next round would need a new stream here.
    pub fn go_away(&mut self) {
        for slot in self.st.slots.iter_mut() {
            if slot.active.as_ref().is_some_and(calls::waits_for_input) {
                fail_transport(
                    &mut self.st.store,
                    slot,
                    Code::Unavailable,
                    b"the client closed the connection while the call waited for input",
                    None,
                );
            }
        }
        self.conn.go_away(ErrorCode::NO_ERROR);
        self.drain();
    }

    /// What the server asks of `call` after its
    /// [`ClientEvent::InputRequired`]: the result's `inputRequests` (`{}`
    /// when it carried only a `requestState`), until the call is answered.
    pub fn input_requests(&self, call: CallId) -> Option<&[u8]> {
        self.st.input_requests(call)
    }

    /// Answers `call`'s [`ClientEvent::InputRequired`] with `responses`
    /// (one JSON object keyed as the `inputRequests`): the call's request
    /// goes again on a new stream with a new id, `inputResponses` and the
    /// result's `requestState` ([`ClientEngine::answer_input`] says it
    /// all), and the call goes on under the same id. The call's request
    /// buffer holds the round's request (written after the last one, then
    /// moved to its start): a round that does not fit it (the store cannot
    /// grow it, or it is over the message limit) fails the call, as does a
    /// connection that takes no more streams (refused: a driver may start
    /// the call anew elsewhere). `Err` when the call waits for no input or
    /// `responses` is not a JSON object: nothing changed.
    pub fn answer_input(
        &mut self,
        call: CallId,
        responses: &[u8],
        now: Instant,
    ) -> Result<(), StartError> {
        self.now = now;
        input::check_responses(responses).map_err(StartError::Invalid)?;
        let i = self
            .st
            .slot_of(call)
            .ok_or(StartError::Invalid(input::NOT_WAITING))?;
        let accepts = self.accepts_calls();
        let slot = &mut self.st.slots[i];
        let (at, round) = match slot.active.as_ref() {
            Some(a) => match a.terminal {
                Some(t) if t.kind == Kind::InputRequired && t.delivered && !t.in_req => {
                    (t.at, a.rounds)
                }
                _ => return Err(StartError::Invalid(input::NOT_WAITING)),
            },
            None => return Err(StartError::Invalid(input::NOT_WAITING)),
        };
        if !accepts {
            fail_transport(
                &mut self.st.store,
                slot,
                Code::Unavailable,
                b"the connection went away while the call waited for input",
                None,
            );
            mark_refused(slot);
        } else if let Err(why) = round::start_round(
            &mut self.st.store,
            slot,
            at,
            responses,
            round,
            self.st.max_message,
        ) {
            fail_rpc(&mut self.st.store, slot, RpcError::new(INTERNAL_ERROR, why));
        }
        self.pump();
        Ok(())
    }

    /// Feeds received octets; returns how many were consumed (at most
    /// [`RECV_CHUNK`]). Drain [`Client::poll_event`], then feed the rest:
    /// notifications not taken before the next `recv` are dropped.
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        self.now = now;
        self.st.new_round();
        let chunk = &input[..input.len().min(RECV_CHUNK)];
        let r = self.conn.recv(chunk, now);
        if r.consumed > 0 {
            self.st.pinger.heard(now);
        }
        if let Some(d) = r.data {
            self.conn.release_data(d.stream, d.bytes.len());
            self.st.on_data(d.stream, d.bytes, d.end_stream);
        }
        self.drain();
        self.pump();
        r.consumed
    }

    /// The transport reached end of file or failed.
    pub fn recv_eof(&mut self) {
        self.conn.recv_eof();
        self.drain();
    }

    /// The next deadline: the connection's or a call's.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let calls = self
            .st
            .slots
            .iter()
            .filter_map(|s| s.active.as_ref())
            .filter(|a| calls::running(a))
            .filter_map(|a| a.deadline)
            .min();
        let ping = self.st.pinger.deadline().filter(|_| !self.conn.is_closed());
        [self.conn.poll_timeout(), calls, ping]
            .into_iter()
            .flatten()
            .min()
    }

    /// Lets time pass: a call past its deadline (one waiting for input
    /// too) is reset and fails with DEADLINE_EXCEEDED; with
    /// [`ClientConfig::keepalive`], a PING goes out after the interval
    /// without input, and when it stays unanswered past the timeout the
    /// connection ends (GOAWAY, then closed) and every open call fails with
    /// UNAVAILABLE, "keepalive timeout: the peer stopped answering pings".
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        self.conn.handle_timeout(now);
        self.keepalive(now);
        for slot in self.st.slots.iter_mut() {
            let Some(a) = slot.active.as_mut() else {
                continue;
            };
            if calls::running(a) && a.deadline.is_some_and(|d| now >= d) {
                abort(
                    &mut self.st.store,
                    slot,
                    Code::DeadlineExceeded,
                    b"deadline exceeded",
                );
            }
        }
        self.drain();
        self.pump();
    }

    /// Ends the calls without a deadline (a `subscriptions/listen` stream,
    /// which a server keeps open for as long as the client does): each is
    /// reset (RST_STREAM CANCEL) and fails with UNAVAILABLE and `message`.
    /// A client that closes gracefully ends these first and lets the
    /// others run to their answer.
    pub fn end_listens(&mut self, message: &[u8]) {
        for slot in self.st.slots.iter_mut() {
            if slot
                .active
                .as_ref()
                .is_some_and(|a| a.terminal.is_none() && a.deadline.is_none())
            {
                abort(&mut self.st.store, slot, Code::Unavailable, message);
            }
        }
        self.drain();
        self.pump();
    }

    /// Writes pending frames into `out`; call until it returns 0.
    pub fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        self.pump();
        let n = self.conn.poll_transmit(out);
        self.drain();
        self.pump();
        n
    }

    /// The next event; drain until `None` after every other call. The
    /// texts it stands for are read with [`Client::message`],
    /// [`Client::failure`] and [`Client::warning_tool`] until the next
    /// `&mut` call (a notification's is gone at the next `recv`).
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.st.poll_event()
    }

    /// The text of `call`'s last [`ClientEvent::Notification`], or, after
    /// its [`ClientEvent::Response`] or [`ClientEvent::Failed`] and until
    /// its `Ended`, its JSON-RPC response (the error response for a
    /// failure). `None` for a dead call or before either.
    pub fn message(&self, call: CallId) -> Option<&[u8]> {
        self.st.message(call)
    }

    /// The `result` member of the [`message`](Self::message) of `call`'s
    /// [`ClientEvent::Response`] (found as the response arrived), until its
    /// `Ended`; `None` for a notification or an error response.
    pub fn result(&self, call: CallId) -> Option<&[u8]> {
        self.st.result(call)
    }

    /// The JSON-RPC error of `call`, after its [`ClientEvent::Failed`] and
    /// until its `Ended`.
    pub fn failure(&self, call: CallId) -> Option<Failure<'_>> {
        self.st.failure(call)
    }

    /// The tool (raw JSON string of its name) of the
    /// [`ClientEvent::Warning`] about `call` just handed out.
    pub fn warning_tool(&self, call: CallId) -> Option<&[u8]> {
        self.st.warning_tool(call)
    }

    fn drain(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                Event::Headers {
                    stream,
                    kind,
                    end_stream,
                } => {
                    // Always lent right after its event; an empty list reads
                    // as a malformed head.
                    let fields = self.conn.headers(stream).unwrap_or(HeaderList::EMPTY);
                    self.st.on_headers(stream, kind, fields, end_stream);
                }
                Event::Reset { stream, code, .. } => self.st.on_reset(stream, code),
                Event::Closed { stream } => self.st.on_closed(stream),
                Event::ConnectionClosed { error } => self.st.on_connection_closed(error),
                Event::GoAway { .. } => self.st.going_away = true,
                Event::PingAck { payload } => self.st.pinger.acked(payload, self.now),
                Event::SendReady { .. } | Event::StreamsAvailable => {}
            }
        }
    }

    /// Sends the keepalive PING when due, or ends the connection when it
    /// went unanswered.
    fn keepalive(&mut self, now: Instant) {
        self.track_keepalive();
        match self.st.pinger.due(now) {
            Due::Nothing => {}
            Due::Ping(payload) => {
                let queued = self.conn.send_ping(payload);
                self.st.pinger.pinged(queued, now);
            }
            Due::Expired => {
                self.st.close_message = Some(KEEPALIVE_FAILURE);
                self.conn.abort(ErrorCode::NO_ERROR, "keepalive timeout");
                self.st.pinger.update(false, now);
            }
        }
    }

    /// Keepalive runs while calls are open (or always, `while_idle`) on a
    /// live connection.
    fn track_keepalive(&mut self) {
        let open = !self.conn.is_closed()
            && self.st.closed.is_none()
            && self
                .st
                .slots
                .iter()
                .filter_map(|s| s.active.as_ref())
                .any(|a| a.terminal.is_none());
        self.st.pinger.update(open, self.now);
    }

    /// Moves every call forward: resets owed, relists and retries to start,
    /// heads and bodies to send.
    fn pump(&mut self) {
        self.pump_calls();
        self.track_keepalive();
    }

    fn pump_calls(&mut self) {
        for i in 0..self.st.slots.len() {
            let slot = &mut self.st.slots[i];
            let Some(a) = slot.active.as_mut() else {
                continue;
            };
            if let Some(s) = a.stale.take() {
                let _ = self.conn.reset(s, ErrorCode::CANCEL);
            }
            if a.reset_owed {
                a.reset_owed = false;
                if let Wire::Open(s) = a.wire {
                    let _ = self.conn.reset(s, ErrorCode::CANCEL);
                    a.wire = Wire::Gone;
                }
            }
            if a.terminal.is_some() {
                continue;
            }
            if a.wire == Wire::Idle {
                match self.conn.open_stream() {
                    Ok(s) => a.wire = Wire::Open(s),
                    Err(StreamError::NoCapacity | StreamError::ConcurrencyLimit) => continue,
                    Err(_) => {
                        fail_transport(
                            &mut self.st.store,
                            slot,
                            Code::Unavailable,
                            b"connection closed",
                            None,
                        );
                        mark_refused(slot);
                        continue;
                    }
                }
            }
            let Wire::Open(stream) = a.wire else {
                continue;
            };
            if !a.head_sent {
                let body = &bytes(&self.st.store, &slot.req)[a.json.0..a.json.1];
                let left = a.deadline.map(|d| d.saturating_duration_since(self.now));
                if left.is_some_and(|l| l.is_zero()) {
                    abort(
                        &mut self.st.store,
                        slot,
                        Code::DeadlineExceeded,
                        b"deadline exceeded",
                    );
                    continue;
                }
                let owned = OwnedMeta::of(&self.st.store, &self.st.owned_meta);
                let typed = a.typed;
                // The body was checked when the call started, and where its
                // parts lie kept; a re-list's body is walked for its own (the
                // head is built twice only when it needs the larger room).
                let located = a.located.filter(|_| a.json == a.orig_json);
                let parts = match (typed, located) {
                    (Some(_), _) => Ok(None),
                    (None, Some(spans)) => Ok(Some(Mirrored::at(body, &spans))),
                    (None, None) => Mirrored::locate(body).map(Some),
                };
                let parts = match parts {
                    Ok(parts) => parts,
                    Err(e) => {
                        a.reset_owed = true;
                        fail_rpc(&mut self.st.store, slot, e);
                        continue;
                    }
                };
                let build = |head: &mut Head<'_>| match (typed, &parts) {
                    (None, Some(parts)) => {
                        let schema = parts.tool_name().and_then(|name| self.st.cache.get(name));
                        build_head(head, &self.config, owned, schema, parts, left)
                    }
                    (None, None) => Err(RpcError::new(INVALID_REQUEST, "not a request")),
                    #[cfg(feature = "typed")]
                    (Some(rpc), _) => {
                        let req = bytes(&self.st.store, &slot.req);
                        let message = req.get(a.frame.0 + PREFIX_LEN..a.frame.1).unwrap_or(b"");
                        request::build_typed_head(
                            head,
                            &self.config,
                            owned,
                            rpc,
                            body,
                            message,
                            left,
                        )
                    }
                    #[cfg(not(feature = "typed"))]
                    (Some(_), _) => Err(RpcError::new(INVALID_REQUEST, "no typed binding")),
                };
                let conn = &mut self.conn;
                let literals = &mut self.literals;
                let sent = with_head::<BUF, _>(build, |head, built| {
                    built.map(|()| {
                        conn.send_headers_with(stream, head.fields(), false, literals.as_literals())
                    })
                });
                let sent = match sent {
                    Ok(sent) => sent,
                    Err(e) => {
                        a.reset_owed = true;
                        fail_rpc(&mut self.st.store, slot, e);
                        continue;
                    }
                };
                match sent {
                    Ok(()) => {
                        a.head_sent = true;
                        a.diagnostics.retried |= a.resent;
                    }
                    Err(StreamError::TransmitFull | StreamError::ConcurrencyLimit) => continue,
                    Err(StreamError::HeadersTooLarge { needed }) if needed < BUF => continue,
                    Err(StreamError::ConnectionClosed) => {
                        // GOAWAY or the end came before the head left.
                        abort(
                            &mut self.st.store,
                            slot,
                            Code::Unavailable,
                            b"connection closed",
                        );
                        mark_refused(slot);
                        continue;
                    }
                    Err(_) => {
                        abort(
                            &mut self.st.store,
                            slot,
                            Code::Internal,
                            b"the request head cannot be sent",
                        );
                        continue;
                    }
                }
            }
            while a.sent < a.frame.1 - a.frame.0 {
                let from = a.frame.0 + a.sent;
                match self.conn.send_data(
                    stream,
                    &bytes(&self.st.store, &slot.req)[from..a.frame.1],
                    true,
                ) {
                    Ok(0) | Err(StreamError::TransmitFull) => break,
                    Ok(n) => a.sent += n,
                    // The stream ended meanwhile: its events say how.
                    Err(_) => break,
                }
            }
        }
    }
}

impl<S: CallStore, R: Records<Slot<S::Buf>>, const CACHE: usize> State<S, R, CACHE> {
    fn slot_of(&self, call: CallId) -> Option<usize> {
        let i = usize::from(call.index);
        let s = self.slots.get(i)?;
        (s.generation == call.generation && s.active.is_some()).then_some(i)
    }

    /// Ends call `i`: its slot is free, its buffers back in the store.
    fn release(&mut self, i: usize) {
        release(&mut self.store, &mut self.slots[i]);
    }

    fn index_of(&self, stream: StreamRef) -> Option<usize> {
        self.slots.iter().position(|s| {
            s.active
                .as_ref()
                .is_some_and(|a| a.wire == Wire::Open(stream))
        })
    }

    /// A new `recv`: notifications not taken are dropped (and the one
    /// lent is gone), and each call's message in progress moves to the
    /// start of its buffer.
    fn new_round(&mut self) {
        self.queue.clear();
        self.lent = None;
        for slot in self.slots.iter_mut() {
            let Some(a) = slot.active.as_mut() else {
                continue;
            };
            if a.terminal.is_some() {
                // Its outcome may lie after the message.
                continue;
            }
            let base = a.response.map_or(0, |r| r.1);
            if a.msg_start > base {
                calls::bytes_mut(&mut self.store, &mut slot.rx).copy_within(a.msg_start.., base);
                a.msg_start = base;
            }
        }
    }
}

/// The run-loop contract ([`crate::drive`]): after every `&mut` call the
/// client has moved its calls forward, so what waits to go out is what the
/// connection holds.
impl<
    S: CallStore,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
> crate::drive::Endpoint for Client<S, CALLS, TABLE, BUF, B, CACHE>
{
    fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        Client::recv(self, input, now)
    }

    fn wants_transmit(&self) -> bool {
        self.conn.wants_transmit()
    }

    fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        Client::poll_transmit(self, out)
    }
}
