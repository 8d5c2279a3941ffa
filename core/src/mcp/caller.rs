//! The MCP client engine of the gRPC tunnel binding
//! (`/mcp.zig.transport.v1.Mcp/Call`), sans-IO, over an HTTP/2 connection
//! in the client role. No allocator: a call takes its buffers from a
//! [`CallStore`] — one for its framed request when it starts, one for its
//! incoming messages when the first arrives (grown to each message's
//! declared length, up to [`CallerConfig::max_message_bytes`]) — and gives
//! both back when it ends; the annotation cache is `CACHE` octets inline.
//!
//! [`Caller::call`] takes one JSON-RPC request as text. The caller builds
//! the call's metadata from the body ([`mirror_headers`]: protocol version,
//! method, name and the `x-mcp-header` arguments of the tool, from the
//! annotations of the last `tools/list` seen through this caller), sends
//! what is left of the request timeout in `grpc-timeout`, and hands back:
//!
//! - [`CallEvent::Notification`] for each notification on the call's stream
//!   (progress, listen events), as it arrives;
//! - then exactly one of [`CallEvent::Response`] (a result) or
//!   [`CallEvent::Failed`] (a JSON-RPC error, from an error response message
//!   or from the trailers — `mcp-error-bin`, else `mcp-error-code` with
//!   `grpc-message`, else the status — or a transport failure);
//! - then [`CallEvent::Ended`]: the call's handle is dead.
//!
//! A notification (a body without `id`) gets only `Ended` (or `Failed`).
//!
//! Binding rules applied here: an annotated integer outside ±(2^53−1) is
//! refused by `call` with -32600 before a byte goes out; a tool whose
//! annotations are invalid is dropped from the `tools/list` result handed to
//! the application ([`CallEvent::Warning`] says which); after -32020 on a
//! `tools/call` the caller reads `tools/list` again (every page, at most
//! [`MAX_PAGES`]) and sends the call once more; a response that ended before
//! a reset is kept (the early-response rule); [`Diagnostics`] carries the
//! HTTP status, with 401 and 403 for UNAUTHENTICATED and PERMISSION_DENIED.
//!
//! The run loop is the HTTP/2 connection's: feed input with
//! [`Caller::recv`] until consumed, draining [`Caller::poll_event`] after
//! every call (a notification's text lives until the next `recv`), write
//! [`Caller::poll_transmit`] until 0, sleep until input or
//! [`Caller::poll_timeout`], then [`Caller::handle_timeout`].
//!
//! A request larger than the message limit, or than the store's largest
//! buffer, is refused by `call` ([`StartError::TooLarge`]); a store with no
//! free buffer refuses it with [`StartError::Busy`]. An incoming message
//! over the limit fails its call with RESOURCE_EXHAUSTED; so does one the
//! store cannot hold (its largest buffer bounds the messages of a call
//! that arrive in one `recv`: the caller feeds the connection at most
//! [`RECV_CHUNK`] octets per `recv`).

use core::time::Duration;

use super::client::{CallOutcome, error_from_trailers, mirror_headers};
use super::error::{HEADER_MISMATCH, INVALID_REQUEST, RpcError, code_for_status};
use super::json;
use super::mirror::Annotations;
use super::registry::MAX_ANNOTATIONS;
use super::server::TUNNEL_PATH;
use super::store::CallStore;
use super::writer::JsonWriter;
use crate::grpc::{Code, MessageDecoder, PREFIX_LEN, timeout, write_prefix};
use crate::h2::{
    self, Connection, ConnectionError, ErrorCode, Event, HeaderList, HeadersKind, InlineStorage,
    Storage, StreamError, StreamRef,
};
use crate::hpack::Field;
use crate::records::Records;
use crate::time::Instant;
use mcpwire_proto::tunnel::JsonRpcMessage;

/// Octets of input handed to the connection per [`Caller::recv`].
pub const RECV_CHUNK: usize = 512;
/// Pages of `tools/list` read again after a -32020.
pub const MAX_PAGES: u8 = 16;
/// Room for a call's request head (names and values).
const HEAD_ROOM: usize = 2048;
/// Fields of a request head.
const MAX_FIELDS: usize = 32;
/// Longest JSON-RPC id kept for a synthesized error.
const MAX_ID: usize = 128;
/// Queued notifications and warnings.
const QUEUE: usize = 32;
/// Longest `www-authenticate` value kept for a failure.
const MAX_AUTH: usize = 256;
/// Longest tool name a warning carries.
const WARN_NAME: usize = 64;
/// Room for a synthesized error response, besides its message text.
const ERROR_ROOM: usize = 128 + MAX_ID;
/// Room for a message's two prefixes (gRPC, protobuf field) before its JSON.
const FRAME_ROOM: usize = PREFIX_LEN + JsonRpcMessage::MAX_PREFIX_LEN;
/// The id of the caller's own `tools/list`.
const RELIST_ID: &[u8] = b"\"mcpwire-relist\"";

/// Settings of the caller.
#[derive(Debug, Clone, Copy)]
pub struct CallerConfig {
    /// The HTTP/2 connection's settings.
    pub h2: h2::Config,
    /// `:authority` of every call.
    pub authority: &'static str,
    /// `:scheme` of every call (`http`, or `https` over TLS).
    pub scheme: &'static str,
    /// The request timeout when a call names none (not for
    /// `subscriptions/listen`). Default 60 s.
    pub request_timeout: Duration,
    /// Metadata added to every call (`authorization` is never indexed).
    pub metadata: &'static [(&'static str, &'static str)],
    /// The largest message a call sends or takes (also capped by the call
    /// store's largest buffer). Default 4 MiB.
    pub max_message_bytes: usize,
}

impl Default for CallerConfig {
    fn default() -> Self {
        Self {
            h2: h2::Config::default(),
            authority: "localhost",
            scheme: "http",
            request_timeout: Duration::from_secs(60),
            metadata: &[],
            max_message_bytes: 4 << 20,
        }
    }
}

/// A call of the caller; dead after its [`CallEvent::Ended`] or
/// [`Caller::cancel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallRef {
    index: u16,
    generation: u16,
}

/// Why [`Caller::call`] sent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    /// The request cannot be sent as it is (-32600: not a request, an
    /// annotated integer outside ±(2^53−1), metadata too large...): the
    /// JSON-RPC error the application gets on any transport.
    Invalid(RpcError),
    /// Every call slot is taken, or the call store has no free buffer;
    /// retry after an `Ended`.
    Busy,
    /// The framed request needs `needed` octets: more than the message
    /// limit or the call store's largest buffer.
    TooLarge { needed: usize },
    /// The connection is over.
    Closed,
}

/// What a client reports about a call besides the JSON-RPC error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Diagnostics {
    /// The HTTP status of the response, also when the call failed; 401 and
    /// 403 for the trailers UNAUTHENTICATED and PERMISSION_DENIED.
    pub http_status: Option<u16>,
    /// The call's `grpc-status`, when trailers came.
    pub grpc_status: Option<Code>,
    /// The failure is the transport's (deadline, reset, connection, auth),
    /// not a JSON-RPC error of the server; the error was synthesized from
    /// the status.
    pub transport: bool,
    /// The server did not process the call: REFUSED_STREAM before a
    /// response, or the connection went away (GOAWAY, close) before the
    /// request head went out. Safe to send again on a new connection.
    pub refused: bool,
}

/// The JSON-RPC error of a failed call.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    pub code: i32,
    /// The raw JSON string of `error.message`.
    pub message: &'a [u8],
    /// The raw JSON of `error.data`, when present.
    pub data: Option<&'a [u8]>,
    /// The whole JSON-RPC error response, with the request's id.
    pub response: &'a [u8],
    pub diagnostics: Diagnostics,
    /// The response's `www-authenticate` (headers or trailers), when one
    /// came and fits in 256 octets.
    pub www_authenticate: Option<&'a [u8]>,
}

/// Something the application learns about its calls. Slices are borrowed
/// from the caller until its next call.
#[derive(Debug, Clone, Copy)]
pub enum CallEvent<'a> {
    /// A notification on the call's stream.
    Notification { call: CallRef, json: &'a [u8] },
    /// The call's response with a `result`.
    Response { call: CallRef, json: &'a [u8] },
    /// The call failed with this JSON-RPC error.
    Failed { call: CallRef, error: Failure<'a> },
    /// The call is over: the last event of every call.
    Ended { call: CallRef },
    /// A tool left out of a `tools/list` result (invalid `x-mcp-header`
    /// annotations), or one whose annotations the cache had no room for.
    Warning {
        call: CallRef,
        tool: &'a [u8],
        reason: &'static str,
    },
    /// The connection is over; calls in progress failed before this.
    ConnectionClosed { error: Option<ConnectionError> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The application's request.
    Call,
    /// The caller's own `tools/list` after a -32020, page `n`.
    Relist(u8),
    /// The application's `tools/call`, sent once more.
    Retry,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    /// A stream is to be opened.
    Idle,
    Open(StreamRef),
    /// The stream is over (or reset by this end).
    Gone,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Response,
    Failed,
    /// A notification's call: nothing but `Ended`.
    Nothing,
}

#[derive(Debug, Clone, Copy)]
struct Terminal {
    kind: Kind,
    in_req: bool,
    at: (usize, usize),
    diagnostics: Diagnostics,
    delivered: bool,
}

#[derive(Debug, Clone)]
struct Active {
    wire: Wire,
    head_sent: bool,
    /// The frame being sent, and the JSON inside it, in `req`.
    frame: (usize, usize),
    json: (usize, usize),
    sent: usize,
    /// The application's request, in `req`.
    orig_frame: (usize, usize),
    orig_json: (usize, usize),
    deadline: Option<Instant>,
    mode: Mode,
    tool_call: bool,
    tools_list: bool,
    decoder: MessageDecoder,
    /// Where the message being read starts in `rx`.
    msg_start: usize,
    /// The response message, in `rx`.
    response: Option<(usize, usize)>,
    diagnostics: Diagnostics,
    /// The response's `www-authenticate`, when it fits.
    auth: ([u8; MAX_AUTH], Option<u16>),
    /// This end must reset the stream (the call is over, the request is not).
    reset_owed: bool,
    /// A stream of an earlier attempt, to reset.
    stale: Option<StreamRef>,
    terminal: Option<Terminal>,
}

/// A call's place in the caller.
struct Slot<T> {
    generation: u16,
    active: Option<Active>,
    /// The call's framed request (and a re-list's), from the store.
    req: Option<T>,
    /// The call's incoming messages, from the store once one arrives.
    rx: Option<T>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self {
            generation: 0,
            active: None,
            req: None,
            rx: None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Queued {
    Notification {
        call: CallRef,
        at: (usize, usize),
    },
    Warning {
        call: CallRef,
        name: [u8; WARN_NAME],
        len: u8,
        reason: &'static str,
    },
}

/// The schemas with `x-mcp-header` annotations of the last `tools/list`:
/// entries of (name length u16, schema length u16, raw name, raw schema).
struct Cache<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Cache<N> {
    fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut at = 0;
        core::iter::from_fn(move || {
            let head = self.bytes.get(at..at + 4)?;
            let n = usize::from(u16::from_le_bytes([head[0], head[1]]));
            let s = usize::from(u16::from_le_bytes([head[2], head[3]]));
            let name = self.bytes.get(at + 4..at + 4 + n)?;
            let schema = self.bytes.get(at + 4 + n..at + 4 + n + s)?;
            at += 4 + n + s;
            (at <= self.len).then_some((name, schema))
        })
    }

    fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.entries().find(|(n, _)| *n == name).map(|(_, s)| s)
    }

    fn insert(&mut self, name: &[u8], schema: &[u8]) -> bool {
        let need = 4 + name.len() + schema.len();
        let (Ok(n), Ok(s)) = (u16::try_from(name.len()), u16::try_from(schema.len())) else {
            return false;
        };
        let Some(dst) = self.bytes.get_mut(self.len..self.len + need) else {
            return false;
        };
        dst[..2].copy_from_slice(&n.to_le_bytes());
        dst[2..4].copy_from_slice(&s.to_le_bytes());
        dst[4..4 + name.len()].copy_from_slice(name);
        dst[4 + name.len()..].copy_from_slice(schema);
        self.len += need;
        true
    }
}

/// Everything but the connection, so that the connection's events (which
/// borrow it) can be handled.
struct State<S: CallStore, R, const CACHE: usize> {
    /// The call slots, grown as calls need them (up to `CALLS`).
    slots: R,
    store: S,
    max_message: usize,
    cache: Cache<CACHE>,
    queue: [Option<Queued>; QUEUE],
    head: usize,
    len: usize,
    /// The warning last handed out (its name is borrowed from here).
    lent: Option<Queued>,
    closed: Option<Option<ConnectionError>>,
    closed_told: bool,
    /// The peer sent GOAWAY: no new call starts here.
    going_away: bool,
    /// `:authority` and metadata set with [`Caller::set_metadata`], in a
    /// buffer of the store (see [`OwnedMeta`]).
    /// With the length of its contents (the buffer may be longer).
    owned_meta: Option<(S::Buf, usize)>,
}

impl<S: CallStore, R, const CACHE: usize> State<S, R, CACHE> {
    fn owned_meta(&self) -> OwnedMeta<'_> {
        OwnedMeta::of(&self.store, &self.owned_meta)
    }
}

/// The client engine over one connection: `CALLS` calls at a time (and
/// HTTP/2 streams), each with buffers from the call store `S` (two per
/// call: a [`SlabStore`](super::SlabStore) of `2 × CALLS` buffers never
/// refuses a call), `CACHE` octets of annotation cache; `TABLE`, `BUF`
/// and the storage `B` make the HTTP/2 connection.
pub struct Caller<
    S: CallStore,
    const CALLS: usize,
    const CACHE: usize,
    const TABLE: usize = 4096,
    const BUF: usize = 16384,
    B: Storage<BUF> = InlineStorage<BUF>,
> {
    conn: Connection<CALLS, TABLE, BUF, 16, B>,
    config: CallerConfig,
    now: Instant,
    st: State<S, B::Records<Slot<S::Buf>, CALLS>, CACHE>,
}

impl<
    S: CallStore,
    const CALLS: usize,
    const CACHE: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF>,
> core::fmt::Debug for Caller<S, CALLS, CACHE, TABLE, BUF, B>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Caller")
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
    const CACHE: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
> Caller<S, CALLS, CACHE, TABLE, BUF, B>
{
    /// A caller for one connection (already connected, or about to be:
    /// the connection preface is the first thing `poll_transmit` writes),
    /// whose calls take their buffers from `store`.
    pub fn new(config: CallerConfig, store: S, now: Instant) -> Self {
        Self {
            conn: Connection::new(h2::Role::Client, config.h2, now),
            config,
            now,
            st: State {
                slots: Default::default(),
                store,
                max_message: config.max_message_bytes,
                cache: Cache {
                    bytes: [0; CACHE],
                    len: 0,
                },
                queue: [None; QUEUE],
                head: 0,
                len: 0,
                lent: None,
                closed: None,
                closed_told: false,
                going_away: false,
                owned_meta: None,
            },
        }
    }

    /// Sets the `:authority` and the metadata of every later call (and of
    /// retries) from values that need not be `'static`, such as a bearer
    /// token read at run time: they are copied into a buffer of the call
    /// store, which is kept until they are set again. They replace
    /// [`CallerConfig::authority`] (when `authority` is given) and go out
    /// after [`CallerConfig::metadata`]. `false`, and nothing changed, when
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

    /// The HTTP/2 connection, for its state.
    pub fn connection(&self) -> &Connection<CALLS, TABLE, BUF, 16, B> {
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

    /// Whether [`Caller::call`] can start calls: the connection is not
    /// over and the peer sent no GOAWAY (a driver then connects anew).
    pub fn accepts_calls(&self) -> bool {
        !self.conn.is_closed() && self.st.closed.is_none() && !self.st.going_away
    }

    /// Every cached input schema with `x-mcp-header` annotations: (raw JSON
    /// string of the tool's name, raw schema), as [`Caller::cached_schema`].
    pub fn cached_schemas(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.st.cache.entries()
    }

    /// Adds the input `schema` of `tool` (raw JSON string of its name, with
    /// quotes) to the annotation cache, as if a `tools/list` had given it:
    /// a driver that connects anew keeps what the last connection learned.
    /// `false` when the schema has no valid `x-mcp-header` annotations, the
    /// tool is already cached or the cache has no room.
    pub fn learn_schema(&mut self, tool: &[u8], schema: &[u8]) -> bool {
        let valid =
            Annotations::<'_, MAX_ANNOTATIONS>::collect(schema).is_ok_and(|a| !a.is_empty());
        valid && self.st.cache.get(tool).is_none() && self.st.cache.insert(tool, schema)
    }

    /// Forgets every cached schema: a tool's arguments are mirrored again
    /// after the next `tools/list` (or the re-list a -32020 causes).
    pub fn clear_schemas(&mut self) {
        self.st.cache.len = 0;
    }

    /// Whether a call is still in progress (not yet `Ended`).
    pub fn is_active(&self, call: CallRef) -> bool {
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
    ) -> Result<CallRef, StartError> {
        self.now = now;
        if !self.accepts_calls() {
            return Err(StartError::Closed);
        }
        // Every rule on the body and the head, before a byte goes out.
        let mut head = Head::new();
        build_head(
            &mut head,
            &self.config,
            self.st.owned_meta(),
            self.st.cache_schema(body),
            body,
            None,
        )
        .map_err(StartError::Invalid)?;
        let method = json::get(body, b"method").unwrap_or(b"");
        let listen = json::str_eq(method, b"subscriptions/listen");
        let slots = self.st.slots.len();
        let index = self
            .st
            .slots
            .iter()
            .position(|s| s.active.is_none())
            .or((slots < CALLS).then_some(slots))
            .ok_or(StartError::Busy)?;
        let needed = FRAME_ROOM + body.len();
        if needed > self.st.store.max_len() || needed - PREFIX_LEN > self.st.max_message {
            return Err(StartError::TooLarge { needed });
        }
        let mut buf = self.st.store.take(needed).ok_or(StartError::Busy)?;
        let framed = frame_into(self.st.store.bytes_mut(&mut buf), 0, |w| {
            w.raw(body);
        });
        let frame_len = match framed {
            Ok(f) => f,
            Err(needed) => {
                self.st.store.put(buf);
                return Err(StartError::TooLarge { needed });
            }
        };
        if index == slots && !self.st.slots.grow_to(slots + 1) {
            self.st.store.put(buf);
            return Err(StartError::Busy);
        }
        let slot = &mut self.st.slots[index];
        slot.req = Some(buf);
        let json_at = (frame_len.0, frame_len.1);
        let frame = (0, frame_len.1);
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
            mode: Mode::Call,
            tool_call: json::str_eq(method, b"tools/call"),
            tools_list: json::str_eq(method, b"tools/list"),
            decoder: MessageDecoder::new(self.st.max_message),
            msg_start: 0,
            response: None,
            diagnostics: Diagnostics::default(),
            auth: ([0; MAX_AUTH], None),
            reset_owed: false,
            stale: None,
            terminal: None,
        });
        let call = CallRef {
            index: index as u16,
            generation: slot.generation,
        };
        self.pump();
        Ok(call)
    }

    /// Stops a call: RST_STREAM(CANCEL) when its stream is open. No event
    /// follows; the handle is dead. `false` when the call was already over.
    pub fn cancel(&mut self, call: CallRef) -> bool {
        let Some(i) = self.st.slot_of(call) else {
            return false;
        };
        if let Some(a) = self.st.slots[i].active.as_ref()
            && let Wire::Open(s) = a.wire
        {
            let _ = self.conn.reset(s, ErrorCode::CANCEL);
        }
        self.st.release(i);
        self.pump();
        true
    }

    /// Starts a graceful close: GOAWAY(NO_ERROR).
    pub fn go_away(&mut self) {
        self.conn.go_away(ErrorCode::NO_ERROR);
        self.drain();
    }

    /// Feeds received octets; returns how many were consumed (at most
    /// [`RECV_CHUNK`]). Drain [`Caller::poll_event`], then feed the rest:
    /// notifications not taken before the next `recv` are dropped.
    pub fn recv(&mut self, input: &[u8], now: Instant) -> usize {
        self.now = now;
        self.st.new_round();
        let chunk = &input[..input.len().min(RECV_CHUNK)];
        let r = self.conn.recv(chunk, now);
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
            .filter(|a| a.terminal.is_none())
            .filter_map(|a| a.deadline)
            .min();
        match (self.conn.poll_timeout(), calls) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Lets time pass: a call past its deadline is reset and fails with
    /// DEADLINE_EXCEEDED.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        self.conn.handle_timeout(now);
        for slot in self.st.slots.iter_mut() {
            let Some(a) = slot.active.as_mut() else {
                continue;
            };
            if a.terminal.is_none() && a.deadline.is_some_and(|d| now >= d) {
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

    /// Writes pending frames into `out`; call until it returns 0.
    pub fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        self.pump();
        let n = self.conn.poll_transmit(out);
        self.drain();
        self.pump();
        n
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<CallEvent<'_>> {
        self.st.poll_event()
    }

    fn drain(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                Event::Headers {
                    stream,
                    kind,
                    fields,
                    end_stream,
                } => self.st.on_headers(stream, kind, fields, end_stream),
                Event::Reset { stream, code, .. } => self.st.on_reset(stream, code),
                Event::Closed { stream } => self.st.on_closed(stream),
                Event::ConnectionClosed { error } => self.st.on_connection_closed(error),
                Event::GoAway { .. } => self.st.going_away = true,
                Event::SendReady { .. } | Event::StreamsAvailable | Event::PingAck { .. } => {}
            }
        }
    }

    /// Moves every call forward: resets owed, relists and retries to start,
    /// heads and bodies to send.
    fn pump(&mut self) {
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
                let mut head = Head::new();
                let schema = self.st.cache.get(tool_name(body).unwrap_or(b""));
                let owned = OwnedMeta::of(&self.st.store, &self.st.owned_meta);
                if let Err(e) = build_head(&mut head, &self.config, owned, schema, body, left) {
                    a.reset_owed = true;
                    fail_rpc(&mut self.st.store, slot, e);
                    continue;
                }
                match self.conn.send_headers(stream, head.fields(), false) {
                    Ok(()) => a.head_sent = true,
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
    fn slot_of(&self, call: CallRef) -> Option<usize> {
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

    fn cache_schema(&self, body: &[u8]) -> Option<&[u8]> {
        self.cache.get(tool_name(body)?)
    }

    /// A new `recv`: notifications not taken are dropped, and each call's
    /// message in progress moves to the start of its buffer.
    fn new_round(&mut self) {
        while self.pop().is_some() {}
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
                bytes_mut(&mut self.store, &mut slot.rx).copy_within(a.msg_start.., base);
                a.msg_start = base;
            }
        }
    }

    fn push(&mut self, q: Queued) {
        if self.len == QUEUE {
            // Only notifications and warnings queue: drop the newest.
            return;
        }
        self.queue[(self.head + self.len) % QUEUE] = Some(q);
        self.len += 1;
    }

    fn pop(&mut self) -> Option<Queued> {
        if self.len == 0 {
            return None;
        }
        let q = self.queue[self.head].take();
        self.head = (self.head + 1) % QUEUE;
        self.len -= 1;
        q
    }

    fn poll_event(&mut self) -> Option<CallEvent<'_>> {
        self.lent = None;
        let mut notification = None;
        while let Some(q) = self.pop() {
            match q {
                Queued::Notification { call, at } => {
                    if let Some(i) = self.slot_of(call) {
                        notification = Some((call, i, at));
                        break;
                    }
                }
                Queued::Warning { .. } => {
                    self.lent = Some(q);
                    break;
                }
            }
        }
        if let Some((call, i, at)) = notification {
            return Some(CallEvent::Notification {
                call,
                json: &bytes(&self.store, &self.slots[i].rx)[at.0..at.1],
            });
        }
        if let Some(Queued::Warning {
            call,
            name,
            len,
            reason,
        }) = self.lent.as_ref()
        {
            return Some(CallEvent::Warning {
                call: *call,
                tool: &name[..usize::from(*len)],
                reason,
            });
        }
        let Some(found) = self
            .slots
            .iter()
            .position(|s| s.active.as_ref().is_some_and(|a| a.terminal.is_some()))
        else {
            if let Some(error) = self.closed
                && !self.closed_told
            {
                self.closed_told = true;
                return Some(CallEvent::ConnectionClosed { error });
            }
            return None;
        };
        let call = CallRef {
            index: found as u16,
            generation: self.slots[found].generation,
        };
        let t = self.slots[found]
            .active
            .as_ref()
            .and_then(|a| a.terminal.as_ref())?;
        if t.delivered || t.kind == Kind::Nothing {
            release(&mut self.store, &mut self.slots[found]);
            return Some(CallEvent::Ended { call });
        }
        let slot = &mut self.slots[found];
        let t = slot.active.as_mut().and_then(|a| a.terminal.as_mut())?;
        t.delivered = true;
        let t = *t;
        let www_authenticate = slot
            .active
            .as_ref()
            .and_then(|a| Some(&a.auth.0[..usize::from(a.auth.1?)]));
        let json = if t.in_req {
            bytes(&self.store, &slot.req)
        } else {
            bytes(&self.store, &slot.rx)
        };
        let json = json.get(t.at.0..t.at.1).unwrap_or(b"");
        Some(match t.kind {
            Kind::Response | Kind::Nothing => CallEvent::Response { call, json },
            Kind::Failed => {
                let error = json::get(json, b"error").unwrap_or(b"{}");
                CallEvent::Failed {
                    call,
                    error: Failure {
                        code: json::get(error, b"code")
                            .and_then(json::as_i64)
                            .and_then(|c| i32::try_from(c).ok())
                            .unwrap_or(super::error::INTERNAL_ERROR),
                        message: json::get(error, b"message").map_or(b"\"\"", json::trim),
                        data: json::get(error, b"data").map(json::trim),
                        response: json,
                        diagnostics: t.diagnostics,
                        www_authenticate,
                    },
                }
            }
        })
    }

    fn on_data(&mut self, stream: StreamRef, mut bytes: &[u8], end_stream: bool) {
        let Some(i) = self.index_of(stream) else {
            return;
        };
        let generation = self.slots[i].generation;
        while !bytes.is_empty() {
            let slot = &mut self.slots[i];
            let Some(a) = slot.active.as_mut() else {
                return;
            };
            if a.terminal.is_some() {
                return;
            }
            if a.response.is_some() {
                abort(
                    &mut self.store,
                    slot,
                    Code::Internal,
                    b"a message after the response",
                );
                return;
            }
            // The prefix names the message's length: the receive buffer
            // grows to it before the message is collected.
            let (used, declared) = match a.decoder.feed_prefix(bytes) {
                Ok(r) => r,
                Err(e) => {
                    abort(&mut self.store, slot, e.code(), e.message().as_bytes());
                    return;
                }
            };
            bytes = &bytes[used..];
            let Some(declared) = declared else {
                continue;
            };
            let start = a.msg_start;
            if !ensure(&mut self.store, &mut slot.rx, start + declared) {
                abort(
                    &mut self.store,
                    slot,
                    Code::ResourceExhausted,
                    b"message larger than the call buffer",
                );
                return;
            }
            let rx = bytes_mut(&mut self.store, &mut slot.rx);
            match a.decoder.feed(bytes, &mut rx[start..start + declared]) {
                Ok((used, done)) => {
                    bytes = &bytes[used..];
                    let Some(len) = done else {
                        continue;
                    };
                    a.msg_start = start + len;
                    let message = &rx[start..start + len];
                    let Some(at) = JsonRpcMessage::decode(message)
                        .ok()
                        .filter(|j| json::validate(j, json::DEFAULT_MAX_DEPTH).is_ok())
                        .map(|j| offset_in(message, j, start))
                    else {
                        abort(
                            &mut self.store,
                            slot,
                            Code::Internal,
                            b"a message is not JSON-RPC",
                        );
                        return;
                    };
                    let text = &rx[at.0..at.1];
                    if json::get(text, b"method").is_some() && json::get(text, b"id").is_none() {
                        if !matches!(a.mode, Mode::Relist(_)) {
                            let call = CallRef {
                                index: i as u16,
                                generation,
                            };
                            self.push(Queued::Notification { call, at });
                        }
                    } else {
                        a.response = Some(at);
                    }
                }
                Err(e) => {
                    abort(&mut self.store, slot, e.code(), e.message().as_bytes());
                    return;
                }
            }
        }
        if end_stream {
            // Ended with DATA, without trailers.
            self.conclude(i, None);
        }
    }

    fn on_headers(
        &mut self,
        stream: StreamRef,
        kind: HeadersKind,
        fields: HeaderList<'_>,
        end_stream: bool,
    ) {
        let Some(i) = self.index_of(stream) else {
            return;
        };
        let slot = &mut self.slots[i];
        let Some(a) = slot.active.as_mut() else {
            return;
        };
        if a.terminal.is_some() {
            return;
        }
        if let Some(v) = fields.get(b"www-authenticate")
            && let Some(dst) = a.auth.0.get_mut(..v.len())
        {
            dst.copy_from_slice(v);
            a.auth.1 = Some(v.len() as u16);
        }
        if kind == HeadersKind::Response {
            let status = fields
                .get(b":status")
                .and_then(|s| core::str::from_utf8(s).ok())
                .and_then(|s| s.parse::<u16>().ok());
            a.diagnostics.http_status = status;
            if status != Some(200) {
                a.reset_owed = !end_stream;
                let code = Code::from_http_status(status.unwrap_or(0));
                fail_transport(
                    &mut self.store,
                    slot,
                    code,
                    b"the response's HTTP status is not 200",
                    status,
                );
                return;
            }
        }
        if end_stream {
            self.conclude(i, Some(fields));
        }
    }

    fn on_reset(&mut self, stream: StreamRef, code: ErrorCode) {
        let Some(i) = self.index_of(stream) else {
            return;
        };
        let slot = &mut self.slots[i];
        let Some(a) = slot.active.as_mut() else {
            return;
        };
        a.wire = Wire::Gone;
        if a.terminal.is_some() {
            return;
        }
        let status = match code {
            ErrorCode::CANCEL => Code::Cancelled,
            ErrorCode::REFUSED_STREAM => Code::Unavailable,
            ErrorCode::ENHANCE_YOUR_CALM => Code::ResourceExhausted,
            ErrorCode::INADEQUATE_SECURITY => Code::PermissionDenied,
            _ => Code::Internal,
        };
        let http = a.diagnostics.http_status;
        let refused = code == ErrorCode::REFUSED_STREAM && http.is_none();
        fail_transport(&mut self.store, slot, status, b"the stream was reset", http);
        if refused {
            mark_refused(slot);
        }
    }

    fn on_closed(&mut self, stream: StreamRef) {
        if let Some(i) = self.index_of(stream)
            && let Some(a) = self.slots[i].active.as_mut()
        {
            a.wire = Wire::Gone;
        }
    }

    fn on_connection_closed(&mut self, error: Option<ConnectionError>) {
        for slot in self.slots.iter_mut() {
            let Some(a) = slot.active.as_mut() else {
                continue;
            };
            a.wire = Wire::Gone;
            if a.terminal.is_none() {
                let http = a.diagnostics.http_status;
                let unsent = !a.head_sent;
                fail_transport(
                    &mut self.store,
                    slot,
                    Code::Unavailable,
                    b"the connection closed",
                    http,
                );
                if unsent {
                    mark_refused(slot);
                }
            }
        }
        self.closed = Some(error);
    }

    /// The stream ended (with trailers, or with DATA): the call's outcome.
    fn conclude(&mut self, i: usize, trailers: Option<HeaderList<'_>>) {
        let slot = &mut self.slots[i];
        let Some(a) = slot.active.as_mut() else {
            return;
        };
        // The request may not be complete: the server answered early.
        a.reset_owed = a.sent < a.frame.1 - a.frame.0;
        let status = trailers.and_then(|t| t.get(b"grpc-status").and_then(Code::parse));
        a.diagnostics.grpc_status = status;
        if let Some(at) = a.response {
            // A complete response is kept, whatever the status.
            self.outcome(i, false, at);
            return;
        }
        let http = a.diagnostics.http_status;
        if !a.decoder.is_idle() {
            fail_transport(
                &mut self.store,
                slot,
                Code::Internal,
                b"the stream ended inside a message",
                http,
            );
            return;
        }
        let Some(trailers) = trailers else {
            fail_transport(
                &mut self.store,
                slot,
                Code::Internal,
                b"the response ended without trailers",
                http,
            );
            return;
        };
        if status == Some(Code::Ok) {
            let has_id =
                json::get(&bytes(&self.store, &slot.req)[a.json.0..a.json.1], b"id").is_some();
            if has_id {
                fail_transport(
                    &mut self.store,
                    slot,
                    Code::Internal,
                    b"the call ended without a response",
                    http,
                );
            } else {
                a.terminal = Some(Terminal {
                    kind: Kind::Nothing,
                    in_req: false,
                    at: (0, 0),
                    diagnostics: a.diagnostics,
                    delivered: false,
                });
            }
            return;
        }
        let id = copy_id(&bytes(&self.store, &slot.req)[a.json.0..a.json.1]);
        let base = a.msg_start;
        // Room for the error: half to decode the trailers into, half to
        // write the response (escaped) into.
        let carried = [b"mcp-error-bin".as_slice(), b"grpc-message"]
            .iter()
            .filter_map(|n| trailers.get(n))
            .map(<[u8]>::len)
            .sum::<usize>();
        let room = 2 * (ERROR_ROOM + 6 * carried);
        if !ensure(&mut self.store, &mut slot.rx, base + room) {
            let _ = ensure(&mut self.store, &mut slot.rx, base + ERROR_ROOM);
        }
        let out = &mut bytes_mut(&mut self.store, &mut slot.rx)[base..];
        let half = out.len() / 2;
        let (outcome, text) = error_from_trailers(trailers, id.as_slice(), out);
        let text_len = text.map(<[u8]>::len);
        match (outcome, text_len) {
            (CallOutcome::RpcError, Some(n)) => {
                // `error_from_trailers` writes into the second half.
                let start = base + half;
                self.outcome(i, false, (start, start + n));
            }
            (
                CallOutcome::Transport {
                    status,
                    http_status,
                },
                _,
            ) => {
                let http = if http_status == 200 {
                    http
                } else {
                    Some(http_status)
                };
                let message = trailers
                    .get(b"grpc-message")
                    .unwrap_or(status.name().as_bytes());
                fail_transport(&mut self.store, slot, status, message, http);
                if let Some(t) = slot.active.as_mut().and_then(|a| a.terminal.as_mut()) {
                    t.diagnostics.grpc_status = Some(status);
                }
            }
            (CallOutcome::RpcError, None) => {
                let status = status.unwrap_or(Code::Unknown);
                fail_transport(
                    &mut self.store,
                    slot,
                    status,
                    b"unreadable error trailers",
                    http,
                );
            }
        }
    }

    /// A JSON-RPC response (`rx` or `req` at `at`) ends the current stream
    /// of call `i`: hand it out, or relist and retry.
    fn outcome(&mut self, i: usize, in_req: bool, at: (usize, usize)) {
        let call = CallRef {
            index: i as u16,
            generation: self.slots[i].generation,
        };
        let (is_error, code, mode, tool_call, tools_list, diagnostics) = {
            let slot = &self.slots[i];
            let Some(a) = slot.active.as_ref() else {
                return;
            };
            let text = if in_req {
                bytes(&self.store, &slot.req)
            } else {
                bytes(&self.store, &slot.rx)
            };
            let text = text.get(at.0..at.1).unwrap_or(b"");
            let error = json::get(text, b"error");
            let code = error
                .and_then(|e| json::get(e, b"code"))
                .and_then(json::as_i64);
            (
                error.is_some(),
                code,
                a.mode,
                a.tool_call,
                a.tools_list,
                a.diagnostics,
            )
        };
        if mode == Mode::Call
            && tool_call
            && code == Some(i64::from(HEADER_MISMATCH))
            && start_relist(
                &mut self.store,
                &mut self.slots[i],
                None,
                0,
                self.max_message,
            )
        {
            // The server's tool differs from the cache: read tools/list
            // again, then send the call once more.
            return;
        }
        let mut warnings = Warnings::new();
        if let Mode::Relist(page) = mode
            && !is_error
        {
            let mut cursor = [0u8; 256];
            let mut cursor_len = None;
            {
                let text = &bytes(&self.store, &self.slots[i].rx)[at.0..at.1];
                let result = json::get(text, b"result").unwrap_or(b"{}");
                if let Some(c) = json::get(result, b"nextCursor")
                    .filter(|c| json::kind(c) == Some(json::Kind::String))
                    .map(json::trim)
                    && let Some(dst) = cursor.get_mut(..c.len())
                {
                    dst.copy_from_slice(c);
                    cursor_len = Some(c.len());
                }
                learn(&mut self.cache, result, page == 0, None, &mut warnings);
            }
            self.push_warnings(call, &warnings);
            let slot = &mut self.slots[i];
            if let Some(n) = cursor_len
                && page + 1 < MAX_PAGES
                && start_relist(
                    &mut self.store,
                    slot,
                    Some(&cursor[..n]),
                    page + 1,
                    self.max_message,
                )
            {
                return;
            }
            restart(slot, Mode::Retry, self.max_message);
            return;
        }
        let kind = if is_error {
            Kind::Failed
        } else {
            Kind::Response
        };
        let mut terminal = Terminal {
            kind,
            in_req,
            at,
            diagnostics,
            delivered: false,
        };
        if kind == Kind::Response && tools_list && mode == Mode::Call && !in_req {
            // The application's own tools/list: learn it, and leave out the
            // tools with invalid annotations.
            let slot = &mut self.slots[i];
            let Some(a) = slot.active.as_ref() else {
                return;
            };
            let first = json::get(
                &bytes(&self.store, &slot.req)[a.json.0..a.json.1],
                b"params",
            )
            .and_then(|p| json::get(p, b"cursor"))
            .is_none();
            // The result without those tools goes after the message in
            // `rx` (when the store lets it grow).
            let to = a.msg_start.max(at.1);
            let _ = ensure(&mut self.store, &mut slot.rx, to + (at.1 - at.0) + 256);
            let (src, dst) = bytes_mut(&mut self.store, &mut slot.rx).split_at_mut(to);
            let text = &src[at.0..at.1];
            let result = json::get(text, b"result").unwrap_or(b"{}");
            let mut out = JsonWriter::new(dst);
            out.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
                .raw(json::get(text, b"id").map_or(b"null", json::trim))
                .raw(b",\"result\":");
            learn(
                &mut self.cache,
                result,
                first,
                Some(&mut out),
                &mut warnings,
            );
            out.raw(b"}");
            if !warnings.is_empty()
                && let Ok(t) = out.finish()
            {
                terminal.at = (to, to + t.len());
            }
            self.push_warnings(call, &warnings);
        }
        if let Some(a) = self.slots[i].active.as_mut() {
            a.terminal = Some(terminal);
        }
    }

    fn push_warnings(&mut self, call: CallRef, warnings: &Warnings) {
        for (name, len, reason) in warnings.iter() {
            self.push(Queued::Warning {
                call,
                name,
                len,
                reason,
            });
        }
    }
}

/// The warnings of one `tools/list` result.
struct Warnings {
    items: [([u8; WARN_NAME], u8, &'static str); 8],
    len: usize,
}

impl Warnings {
    fn new() -> Self {
        Self {
            items: [([0; WARN_NAME], 0, ""); 8],
            len: 0,
        }
    }

    fn add(&mut self, name: &[u8], reason: &'static str) {
        let Some(item) = self.items.get_mut(self.len) else {
            return;
        };
        let n = name.len().min(WARN_NAME);
        item.0[..n].copy_from_slice(&name[..n]);
        item.1 = n as u8;
        item.2 = reason;
        self.len += 1;
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn iter(&self) -> impl Iterator<Item = ([u8; WARN_NAME], u8, &'static str)> + '_ {
        self.items[..self.len].iter().copied()
    }
}

/// Learns the annotations of a `tools/list` result (clearing the cache
/// first when `first`), and writes the result without the tools whose
/// annotations are invalid into `out` when given.
fn learn<const N: usize>(
    cache: &mut Cache<N>,
    result: &[u8],
    first: bool,
    mut out: Option<&mut JsonWriter<'_>>,
    warnings: &mut Warnings,
) {
    if first {
        cache.len = 0;
    }
    if let Some(w) = out.as_deref_mut() {
        w.raw(b"{");
        let mut first_member = true;
        for (key, value) in json::members(result) {
            if json::str_eq(key, b"tools") {
                continue;
            }
            if !first_member {
                w.raw(b",");
            }
            first_member = false;
            w.raw(json::trim(key)).raw(b":").raw(json::trim(value));
        }
        if !first_member {
            w.raw(b",");
        }
        w.raw(b"\"tools\":[");
    }
    let mut first_tool = true;
    for tool in json::get(result, b"tools")
        .map(json::elements)
        .into_iter()
        .flatten()
    {
        let name = json::get(tool, b"name").map_or(b"\"\"".as_slice(), json::trim);
        let schema = json::get(tool, b"inputSchema").map_or(b"{}".as_slice(), json::trim);
        let keep = match Annotations::<'_, MAX_ANNOTATIONS>::collect(schema) {
            Ok(ann) => {
                if !ann.is_empty() && !cache.insert(name, schema) {
                    warnings.add(
                        name,
                        "no room in the annotation cache: the tool's arguments are not mirrored",
                    );
                }
                true
            }
            Err(e) => {
                warnings.add(name, e.reason());
                false
            }
        };
        if keep && let Some(w) = out.as_deref_mut() {
            if !first_tool {
                w.raw(b",");
            }
            first_tool = false;
            w.raw(json::trim(tool));
        }
    }
    if let Some(w) = out {
        w.raw(b"]}");
    }
}

/// Points the call at a new `tools/list` request (page `cursor`), written
/// after the application's request in `req`. `false` when it does not fit.
fn start_relist<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    cursor: Option<&[u8]>,
    page: u8,
    max_message: usize,
) -> bool {
    let Some(a) = slot.active.as_mut() else {
        return false;
    };
    let orig = &bytes(store, &slot.req)[a.orig_json.0..a.orig_json.1];
    let mut meta = [0u8; 1024];
    let meta_len = json::get(orig, b"params")
        .and_then(|p| json::get(p, b"_meta"))
        .map(json::trim)
        .and_then(|m| {
            let dst = meta.get_mut(..m.len())?;
            dst.copy_from_slice(m);
            Some(m.len())
        });
    let at = a.orig_frame.1;
    let write = |w: &mut JsonWriter<'_>| {
        w.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
            .raw(RELIST_ID)
            .raw(b",\"method\":\"tools/list\",\"params\":{");
        let mut first = true;
        if let Some(c) = cursor {
            w.raw(b"\"cursor\":").raw(c);
            first = false;
        }
        if let Some(n) = meta_len {
            if !first {
                w.raw(b",");
            }
            w.raw(b"\"_meta\":").raw(&meta[..n]);
        }
        w.raw(b"}}");
    };
    let span = match frame_into(bytes_mut(store, &mut slot.req), at, write) {
        Ok(span) => span,
        // The buffer grows to the request, once.
        Err(needed) if ensure(store, &mut slot.req, needed) => {
            match frame_into(bytes_mut(store, &mut slot.req), at, write) {
                Ok(span) => span,
                Err(_) => return false,
            }
        }
        Err(_) => return false,
    };
    let Some(a) = slot.active.as_mut() else {
        return false;
    };
    reopen(a, Mode::Relist(page), max_message);
    a.frame = (at, span.1);
    a.json = span;
    true
}

/// Frees `slot`, its buffers back in `store`.
fn release<S: CallStore>(store: &mut S, slot: &mut Slot<S::Buf>) {
    slot.active = None;
    slot.generation = slot.generation.wrapping_add(1);
    for buf in [slot.req.take(), slot.rx.take()].into_iter().flatten() {
        store.put(buf);
    }
}

/// Sends the application's request again on a new stream.
fn restart<T>(slot: &mut Slot<T>, mode: Mode, max_message: usize) {
    if let Some(a) = slot.active.as_mut() {
        reopen(a, mode, max_message);
        a.frame = a.orig_frame;
        a.json = a.orig_json;
    }
}

fn reopen(a: &mut Active, mode: Mode, max_message: usize) {
    a.mode = mode;
    // The old stream, when its request is not complete, is reset; its
    // later events match no call.
    a.stale = match a.wire {
        Wire::Open(s) if a.sent < a.frame.1 - a.frame.0 => Some(s),
        _ => None,
    };
    a.wire = Wire::Idle;
    a.reset_owed = false;
    a.head_sent = false;
    a.sent = 0;
    a.decoder = MessageDecoder::new(max_message);
    a.msg_start = 0;
    a.response = None;
    a.diagnostics = Diagnostics::default();
    a.auth.1 = None;
}

/// Ends call `slot` with a transport failure: a JSON-RPC error synthesized
/// from the status (the reference transport's map) with `message`.
fn fail_transport<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    status: Code,
    message: &[u8],
    http_status: Option<u16>,
) {
    let Some(a) = slot.active.as_mut() else {
        return;
    };
    let mut code = code_for_status(status);
    if status == Code::Cancelled {
        code = super::error::INTERNAL_ERROR;
    }
    let mut diagnostics = a.diagnostics;
    diagnostics.transport = true;
    diagnostics.grpc_status = Some(status);
    if http_status.is_some() {
        diagnostics.http_status = http_status;
    }
    let (in_req, at) = write_failure(store, slot, code, message);
    let Some(a) = slot.active.as_mut() else {
        return;
    };
    a.terminal = Some(Terminal {
        kind: Kind::Failed,
        in_req,
        at: at.unwrap_or((0, 0)),
        diagnostics,
        delivered: false,
    });
}

/// Writes the error response of call `slot`: after the messages kept in
/// `rx` (taking or growing it), else at its start, else over the request
/// (its id copied first). Whether it went into `req`, and where.
fn write_failure<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    code: i32,
    message: &[u8],
) -> (bool, Option<(usize, usize)>) {
    let Some(a) = slot.active.as_ref() else {
        return (false, None);
    };
    let id = copy_id(
        bytes(store, &slot.req)
            .get(a.json.0..a.json.1)
            .unwrap_or(b""),
    );
    let room = ERROR_ROOM + 6 * message.len();
    let base = a.msg_start;
    if ensure(store, &mut slot.rx, base + room) {
        let rx = bytes_mut(store, &mut slot.rx);
        if let Some(at) = write_error(rx, base, id.as_slice(), code, message) {
            return (false, Some(at));
        }
    }
    if ensure(store, &mut slot.rx, room) {
        let rx = bytes_mut(store, &mut slot.rx);
        return (false, write_error(rx, 0, id.as_slice(), code, message));
    }
    let _ = ensure(store, &mut slot.req, room);
    let req = bytes_mut(store, &mut slot.req);
    let at = write_error(req, 0, id.as_slice(), code, message)
        .or_else(|| write_error(req, 0, b"null", code, b"failed"));
    (true, at)
}

/// Marks the failure of call `slot` as never processed by the server.
fn mark_refused<T>(slot: &mut Slot<T>) {
    if let Some(t) = slot.active.as_mut().and_then(|a| a.terminal.as_mut()) {
        t.diagnostics.refused = true;
    }
}

/// Ends call `slot` with a JSON-RPC error found by this end.
/// Fails the call as a transport error and owes its stream a reset
/// (RST_STREAM(CANCEL) goes out on the next pump).
fn abort<S: CallStore>(store: &mut S, slot: &mut Slot<S::Buf>, status: Code, message: &[u8]) {
    if let Some(a) = slot.active.as_mut() {
        a.reset_owed = true;
    }
    fail_transport(store, slot, status, message, None);
}

fn fail_rpc<S: CallStore>(store: &mut S, slot: &mut Slot<S::Buf>, e: RpcError) {
    let (in_req, at) = write_failure(store, slot, e.code, e.message.as_bytes());
    let Some(a) = slot.active.as_mut() else {
        return;
    };
    a.terminal = Some(Terminal {
        kind: Kind::Failed,
        in_req,
        at: at.unwrap_or((0, 0)),
        diagnostics: a.diagnostics,
        delivered: false,
    });
}

fn write_error(
    buf: &mut [u8],
    at: usize,
    id: &[u8],
    code: i32,
    message: &[u8],
) -> Option<(usize, usize)> {
    let out = buf.get_mut(at..)?;
    let mut w = JsonWriter::new(out);
    w.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
        .raw(id)
        .raw(b",\"error\":{\"code\":")
        .int(i64::from(code))
        .raw(b",\"message\":");
    // Messages from trailers are percent-encoded text.
    let mut text = [0u8; 256];
    let n = crate::grpc::percent::decode(message, &mut text).unwrap_or(0);
    let text = if n > 0 { &text[..n] } else { message };
    w.string(text).raw(b"}}");
    let n = w.finish().ok()?.len();
    Some((at, at + n))
}

/// A request's raw id, or `null`.
struct Id {
    buf: [u8; MAX_ID],
    len: usize,
}

impl Id {
    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

fn copy_id(body: &[u8]) -> Id {
    let mut id = Id {
        buf: [0; MAX_ID],
        len: 4,
    };
    id.buf[..4].copy_from_slice(b"null");
    if let Some(raw) = json::get(body, b"id").map(json::trim)
        && let Some(dst) = id.buf.get_mut(..raw.len())
    {
        dst.copy_from_slice(raw);
        id.len = raw.len();
    }
    id
}

/// The raw `params.name` of a `tools/call` body.
fn tool_name(body: &[u8]) -> Option<&[u8]> {
    let method = json::get(body, b"method")?;
    if !json::str_eq(method, b"tools/call") {
        return None;
    }
    json::get(json::get(body, b"params")?, b"name").map(json::trim)
}

/// The octets of a call's buffer (none before it is taken).
fn bytes<'a, S: CallStore>(store: &'a S, buf: &'a Option<S::Buf>) -> &'a [u8] {
    buf.as_ref().map_or(&[], |b| store.bytes(b))
}

/// The octets of a call's buffer, to write.
fn bytes_mut<'a, S: CallStore>(store: &'a mut S, buf: &'a mut Option<S::Buf>) -> &'a mut [u8] {
    match buf {
        Some(b) => store.bytes_mut(b),
        None => &mut [],
    }
}

/// Makes a call's buffer at least `len` octets long, taking it from the
/// store when the call has none yet; `false` when the store cannot.
fn ensure<S: CallStore>(store: &mut S, buf: &mut Option<S::Buf>, len: usize) -> bool {
    match buf {
        Some(b) => store.grow(b, len),
        None => store.take(len).map(|b| *buf = Some(b)).is_some(),
    }
}

/// Where `inner` (a subslice of `outer`) lies, shifted by `base`.
fn offset_in(outer: &[u8], inner: &[u8], base: usize) -> (usize, usize) {
    let start = (inner.as_ptr() as usize)
        .saturating_sub(outer.as_ptr() as usize)
        .min(outer.len());
    let end = (start + inner.len()).min(outer.len());
    (base + start, base + end)
}

/// Writes a framed `JsonRpcMessage` whose JSON `body` writes, at `at` in
/// `buf`: returns where the JSON lies and where the frame ends, or the
/// room it needed.
fn frame_into(
    buf: &mut [u8],
    at: usize,
    body: impl Fn(&mut JsonWriter<'_>),
) -> Result<(usize, usize), usize> {
    let Some(rest) = buf.get_mut(at..) else {
        return Err(at + FRAME_ROOM);
    };
    let Some(text_room) = rest.get_mut(FRAME_ROOM..) else {
        return Err(at + FRAME_ROOM);
    };
    let mut w = JsonWriter::new(text_room);
    body(&mut w);
    let len = w.finish().map_err(|e| at + FRAME_ROOM + e.needed)?.len();
    // Move the text right after its prefixes.
    let mut proto = [0u8; JsonRpcMessage::MAX_PREFIX_LEN];
    let plen = JsonRpcMessage::encode_prefix(len, &mut proto).map_err(|_| at + FRAME_ROOM + len)?;
    let total = u32::try_from(plen + len).map_err(|_| at + FRAME_ROOM + len)?;
    let text_at = PREFIX_LEN + plen;
    rest.copy_within(FRAME_ROOM..FRAME_ROOM + len, text_at);
    rest[..PREFIX_LEN].copy_from_slice(&write_prefix(total));
    rest[PREFIX_LEN..text_at].copy_from_slice(&proto[..plen]);
    Ok((at + text_at, at + text_at + len))
}

/// A request head being built: names and values in one buffer.
struct Head {
    buf: [u8; HEAD_ROOM],
    len: usize,
    fields: [(u16, u16, u16, bool); MAX_FIELDS],
    n: usize,
    full: bool,
}

impl Head {
    fn new() -> Self {
        Self {
            buf: [0; HEAD_ROOM],
            len: 0,
            fields: [(0, 0, 0, false); MAX_FIELDS],
            n: 0,
            full: false,
        }
    }

    fn push(&mut self, name: &[u8], value: &[u8], sensitive: bool) {
        let need = name.len() + value.len();
        let (Some(dst), Some(f)) = (
            self.buf.get_mut(self.len..self.len + need),
            self.fields.get_mut(self.n),
        ) else {
            self.full = true;
            return;
        };
        dst[..name.len()].copy_from_slice(name);
        dst[name.len()..].copy_from_slice(value);
        *f = (
            self.len as u16,
            name.len() as u16,
            value.len() as u16,
            sensitive,
        );
        self.len += need;
        self.n += 1;
    }

    fn fields(&self) -> impl Iterator<Item = Field<'_>> + '_ {
        self.fields[..self.n].iter().map(|&(at, n, v, sensitive)| {
            let (at, n, v) = (usize::from(at), usize::from(n), usize::from(v));
            let name = &self.buf[at..at + n];
            let value = &self.buf[at + n..at + n + v];
            if sensitive {
                Field::sensitive(name, value)
            } else {
                Field::new(name, value)
            }
        })
    }
}

/// `:authority` and metadata copied by [`Caller::set_metadata`]: a u16
/// (little-endian) length and the authority (0 for none: the config's),
/// then per pair a u16 name length, a u16 value length, the name and the
/// value. Empty when none were set.
#[derive(Clone, Copy)]
struct OwnedMeta<'a>(&'a [u8]);

impl<'a> OwnedMeta<'a> {
    fn of<S: CallStore>(store: &'a S, buf: &'a Option<(S::Buf, usize)>) -> Self {
        Self(match buf {
            Some((buf, len)) => store.bytes(buf).get(..*len).unwrap_or_default(),
            None => &[],
        })
    }

    fn encoded_len(authority: Option<&str>, metadata: &[(&str, &str)]) -> Option<usize> {
        let fits = |s: &str| u16::try_from(s.len()).is_ok();
        if !authority.is_none_or(fits) || !metadata.iter().all(|(n, v)| fits(n) && fits(v)) {
            return None;
        }
        let pairs: usize = metadata.iter().map(|(n, v)| 4 + n.len() + v.len()).sum();
        Some(2 + authority.map_or(0, str::len) + pairs)
    }

    /// Writes into `out`, which is exactly `encoded_len` long.
    fn encode(out: &mut [u8], authority: Option<&str>, metadata: &[(&str, &str)]) {
        let mut at = 0;
        let mut put = |b: &[u8]| {
            out[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        };
        let a = authority.unwrap_or("");
        put(&(a.len() as u16).to_le_bytes());
        put(a.as_bytes());
        for (n, v) in metadata {
            put(&(n.len() as u16).to_le_bytes());
            put(&(v.len() as u16).to_le_bytes());
            put(n.as_bytes());
            put(v.as_bytes());
        }
    }

    fn u16_at(&self, at: usize) -> Option<usize> {
        let b = self.0.get(at..at + 2)?;
        Some(usize::from(u16::from_le_bytes([b[0], b[1]])))
    }

    fn authority(&self) -> Option<&'a [u8]> {
        let n = self.u16_at(0).filter(|&n| n > 0)?;
        self.0.get(2..2 + n)
    }

    fn pairs(self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let mut at = 2 + self.u16_at(0).unwrap_or(0);
        core::iter::from_fn(move || {
            let n = self.u16_at(at)?;
            let v = self.u16_at(at + 2)?;
            let name = self.0.get(at + 4..at + 4 + n)?;
            let value = self.0.get(at + 4 + n..at + 4 + n + v)?;
            at += 4 + n + v;
            Some((name, value))
        })
    }
}

/// The request head of a call: the gRPC fields, `grpc-timeout` with the
/// time `left`, the configured metadata and the headers mirrored from
/// `body` (with the tool's cached `schema`).
fn build_head(
    head: &mut Head,
    config: &CallerConfig,
    owned: OwnedMeta<'_>,
    schema: Option<&[u8]>,
    body: &[u8],
    left: Option<Duration>,
) -> Result<(), RpcError> {
    head.push(b":method", b"POST", false);
    head.push(b":scheme", config.scheme.as_bytes(), false);
    head.push(b":path", TUNNEL_PATH, false);
    let authority = owned.authority().unwrap_or(config.authority.as_bytes());
    head.push(b":authority", authority, false);
    head.push(b"content-type", b"application/grpc+proto", false);
    head.push(b"te", b"trailers", false);
    if let Some(left) = left {
        let mut text = [0u8; 10];
        head.push(b"grpc-timeout", timeout::format(left, &mut text), false);
    }
    let fixed = config
        .metadata
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()));
    for (name, value) in fixed.chain(owned.pairs()) {
        let mut lower = [0u8; 64];
        let Some(dst) = lower.get_mut(..name.len()) else {
            return Err(RpcError::new(INVALID_REQUEST, "metadata name too long"));
        };
        for (d, s) in dst.iter_mut().zip(name) {
            *d = s.to_ascii_lowercase();
        }
        let sensitive = dst == b"authorization";
        head.push(&lower[..name.len()], value, sensitive);
    }
    mirror_headers(body, schema, |n, v| head.push(n, v, false))?;
    if head.full {
        return Err(RpcError::new(INVALID_REQUEST, "request metadata too large"));
    }
    Ok(())
}
