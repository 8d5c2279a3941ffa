//! The HTTP/2 connection (RFC 9113), client or server, as a sans-IO state
//! machine over fixed buffers.
//!
//! # The run loop
//!
//! The driver owns the socket and the clock and repeats:
//!
//! 1. feed received bytes with [`Connection::recv`] until it has consumed
//!    them all; each call may return a [`Data`] chunk, which borrows the input
//!    (no copy), and it stops early while an event waits to be read or while
//!    answers it owes the peer wait to be sent;
//! 2. after **every** call on the connection (`recv`, `poll_transmit`,
//!    `handle_timeout`, and the application's `send_*`, `reset`,
//!    `release_data`, `go_away`), drain [`Connection::poll_event`] until `None`:
//!    `poll_transmit`, for instance, can free room that wakes a stream;
//! 3. write what [`Connection::poll_transmit`] gives until it gives 0, also
//!    between `recv` calls when `recv` consumed nothing and returned nothing
//!    (the peer asked for more answers than fit, for example a burst of PINGs);
//! 4. sleep until input arrives or [`Connection::poll_timeout`] passes, then
//!    call [`Connection::handle_timeout`].
//!
//! # Memory
//!
//! `Connection<STREAMS, TABLE, BUF, RESETS>` holds everything inline: the
//! stream table (`STREAMS` slots), the HPACK decoder table (`TABLE` bytes),
//! three buffers of `BUF` bytes (received header block, decoded header list,
//! frames waiting to be sent) and the ids of the last `RESETS` streams it
//! reset. DATA payloads are never buffered: they are handed out from the
//! input. `core::mem::size_of` is the whole cost.
//!
//! The three `BUF` buffers, the slots and the table live in the trailing
//! type parameter, a [`Storage`] that defaults to [`InlineStorage`]. A
//! driver with an allocator can pass one that holds each buffer only while
//! it is in use and grows the slots and the table as they fill (see
//! [`storage`](super::storage) for when buffers are taken and given back,
//! and how the connection answers when one cannot be had). Slots are never
//! given back: a connection holds as many as it once had streams at once.

use core::time::Duration;

use super::config::{Config, Role};
use super::frame::{self, FrameHeader, FrameType, HEADER_LEN, MAX_WINDOW, PREFACE, Setting, flags};
use super::headers::{HeaderList, HeaderStore, HeadersKind};
use super::storage::{FrameBuffer, InlineStorage, Storage};
use super::{ConnectionError, ErrorCode, StreamError};
use crate::hpack::{self, Decoder, Encoder, Field};
use crate::records::Records;
use crate::time::Instant;

/// A handle to a stream of a connection. It stays valid until the stream
/// ends; after that, operations on it fail with
/// [`StreamError::UnknownStream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamRef {
    slot: u16,
    generation: u16,
}

/// A piece of a DATA frame's payload, borrowed from the input to
/// [`Connection::recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data<'i> {
    pub stream: StreamRef,
    pub bytes: &'i [u8],
    /// The peer ended the stream with this piece.
    pub end_stream: bool,
}

/// What one call to [`Connection::recv`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received<'i> {
    /// Input octets consumed; feed the rest again.
    pub consumed: usize,
    /// DATA payload for the application. Release it with
    /// [`Connection::release_data`] once consumed, to reopen the windows.
    pub data: Option<Data<'i>>,
}

/// Something the application must learn about.
#[derive(Debug, Clone, Copy)]
pub enum Event<'c> {
    /// A header block arrived on a stream. For a server, a `Request` on a
    /// stream it has not seen yet is a new stream.
    Headers {
        stream: StreamRef,
        kind: HeadersKind,
        fields: HeaderList<'c>,
        end_stream: bool,
    },
    /// The stream was reset, by the peer (`remote`) or by this end because
    /// the peer broke a stream rule. The handle is now dead.
    Reset {
        stream: StreamRef,
        code: ErrorCode,
        remote: bool,
    },
    /// The stream ended cleanly in both directions. The handle is now dead.
    Closed { stream: StreamRef },
    /// A stream whose last `send_data` was partly taken can send again.
    SendReady { stream: StreamRef },
    /// A client stream can open: a slot under the peer's limit became free.
    StreamsAvailable,
    /// The peer sent GOAWAY: streams above `last_stream_id` were not
    /// processed (they got [`Event::Reset`] with REFUSED_STREAM), and no new
    /// stream can open.
    GoAway {
        last_stream_id: u32,
        code: ErrorCode,
    },
    /// The peer acknowledged a PING.
    PingAck { payload: [u8; 8] },
    /// The connection is over; `None` after a graceful close. The last event.
    ConnectionClosed { error: Option<ConnectionError> },
}

/// An event as queued: small and `Copy`; headers live in the store.
#[derive(Debug, Clone, Copy)]
enum Queued {
    Headers {
        stream: StreamRef,
        kind: HeadersKind,
        end_stream: bool,
    },
    StreamsAvailable,
    GoAway {
        last_stream_id: u32,
        code: ErrorCode,
    },
    PingAck {
        payload: [u8; 8],
    },
    ConnectionClosed {
        error: Option<ConnectionError>,
    },
}

/// The last event of a stream, kept in its slot until it is read (the slot
/// is not reused before), so that no queue has to hold one per stream.
#[derive(Debug, Clone, Copy)]
enum Terminal {
    Reset { code: ErrorCode, remote: bool },
    Closed,
}

const EVENT_QUEUE: usize = 16;
/// `recv` pauses when fewer event slots than this are free, so that one
/// frame's events always fit.
const EVENT_HEADROOM: usize = 4;
const PING_ACK_QUEUE: usize = 16;
const REFUSAL_QUEUE: usize = 8;
/// Gaps in the peer's stream ids remembered (peers rarely skip ids).
const SKIPPED: usize = 4;
/// Room for the largest control frame: preface, SETTINGS and the first
/// WINDOW_UPDATE together (82 octets), or a GOAWAY with its reason.
const STAGE: usize = 128;
/// GOAWAY debug data is cut to this length.
const MAX_DEBUG: usize = STAGE - HEADER_LEN - 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Half {
    /// Headers not yet sent or received.
    Idle,
    Open,
    Ended,
}

#[derive(Debug, Clone, Copy)]
struct Stream {
    /// 0 until a client stream's HEADERS are written.
    id: u32,
    send: Half,
    recv: Half,
    /// A final response has arrived (client) or the request head (server).
    head_received: bool,
    send_window: i64,
    recv_window: i64,
    /// Consumed by the application, not yet returned in a WINDOW_UPDATE.
    release_owed: u32,
    content_length: Option<u64>,
    data_received: u64,
    /// `send_data` took less than offered; `SendReady` is owed.
    send_blocked: bool,
    /// A send stopped for room in the transmit buffer: `SendReady` is owed
    /// when it drains, window or not (an empty END_STREAM needs none).
    want_tx: bool,
    /// Counts against a MAX_CONCURRENT_STREAMS.
    counted: bool,
    /// The application knows the handle (a Headers event went out, or it
    /// opened the stream): it gets the stream's last event.
    announced: bool,
    /// `SendReady` is owed.
    ready: bool,
    /// DATA octets handed out and not yet released; returned to the
    /// connection window when the stream ends.
    unreleased: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    generation: u16,
    /// The previous generation of this slot ended with a complete response
    /// followed by a reset: sends on its handle are accepted and dropped.
    quiet_previous: bool,
    stream: Option<Stream>,
    /// The last event of the stream that used this slot, with its handle.
    pending: Option<(StreamRef, Terminal)>,
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    header_table_size: u32,
    enable_push: bool,
    max_concurrent_streams: u32,
    initial_window_size: u32,
    max_frame_size: u32,
    max_header_list_size: u32,
}

impl Settings {
    /// The values in force before a SETTINGS frame (RFC 9113 §6.5.2).
    const INITIAL: Settings = Settings {
        header_table_size: 4096,
        enable_push: true,
        max_concurrent_streams: u32::MAX,
        initial_window_size: 65_535,
        max_frame_size: frame::MIN_MAX_FRAME_SIZE,
        max_header_list_size: u32::MAX,
    };
}

/// Counts an event per period.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    start: Instant,
    count: u32,
}

impl Rate {
    /// Counts one more; true when the count for the period passes `max`.
    fn exceeded(&mut self, now: Instant, period: Duration, max: u32) -> bool {
        if now.saturating_duration_since(self.start) >= period {
            self.start = now;
            self.count = 0;
        }
        self.count = self.count.saturating_add(1);
        self.count > max
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Rates {
    resets: Rate,
    pings: Rate,
    settings: Rate,
    empty: Rate,
    refused: Rate,
}

/// Where the payload reader is inside the current frame.
#[derive(Debug, Clone, Copy)]
enum Payload {
    /// Reading a frame header.
    Header,
    /// The Pad Length field of a DATA or HEADERS frame.
    PadLength,
    /// HEADERS priority fields still to skip.
    Priority { left: u8 },
    /// DATA payload: handed out when `slot` is set, else dropped.
    Data { left: u32 },
    /// A header block fragment, appended to the block buffer.
    Fragment { left: u32 },
    /// Padding to skip.
    Padding { left: u32 },
    /// A fixed-size payload collected in `small` (PING, RST_STREAM, ...),
    /// or one 6-octet SETTINGS parameter at a time.
    Small { left: u32 },
    /// Octets to skip (unknown frame types, GOAWAY debug data).
    Skip { left: u32 },
}

/// The frame being read.
#[derive(Debug, Clone, Copy)]
struct Current {
    head: FrameHeader,
    /// The stream DATA is handed to, if it takes it.
    stream: Option<StreamRef>,
    pad: u8,
    /// Octets of this frame released on arrival (padding, dropped DATA).
    auto_release: u32,
}

/// The header block being assembled.
#[derive(Debug, Clone, Copy)]
struct Block {
    stream_id: u32,
    end_stream: bool,
    continuations: u32,
    /// The block opened a stream (server) or belongs to one we track.
    target: BlockTarget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockTarget {
    /// A live stream slot.
    Slot(usize),
    /// A new stream from the peer, to open when the block is complete.
    New,
    /// A new stream to refuse with REFUSED_STREAM once decoded.
    Refuse,
    /// Decode to keep HPACK in step, then drop.
    Ignore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// GOAWAY sent or received; existing streams finish.
    Draining,
    /// A connection error: the GOAWAY goes out, nothing else is read.
    Failed,
    /// Over; `ConnectionClosed` queued.
    Closed,
}

/// One HTTP/2 connection. See the [module docs](self) for the run loop.
pub struct Connection<
    const STREAMS: usize = 16,
    const TABLE: usize = 4096,
    const BUF: usize = 16384,
    const RESETS: usize = 64,
    B: Storage<BUF> = InlineStorage<BUF>,
> {
    role: Role,
    config: Config,
    state: State,
    now: Instant,

    // Receiving.
    preface_left: u8,
    got_settings: bool,
    head: [u8; HEADER_LEN],
    head_len: u8,
    payload: Payload,
    current: Option<Current>,
    small: [u8; 8],
    small_len: u8,
    /// The block, the header store and the transmit buffer.
    bufs: B,
    block_len: usize,
    block_info: Option<Block>,
    decoder: Decoder<TABLE, B::Records<u8, TABLE>>,
    store: HeaderStore,
    /// An event points into the store; recv waits until it was read.
    store_busy: bool,
    /// The store's event was handed out; free it on the next call.
    store_read: bool,

    // Streams.
    slots: B::Records<Slot, STREAMS>,
    last_peer_id: u32,
    next_local_id: u32,
    peer_streams: u32,
    local_streams: u32,
    resets: B::Records<u32, RESETS>,
    resets_next: usize,
    /// Ranges of peer stream ids skipped over, never opened (newest first).
    skipped: [(u32, u32); SKIPPED],
    local: Settings,
    remote: Settings,
    settings_deadline: Option<Instant>,
    goaway_sent: Option<u32>,
    goaway_received: Option<u32>,

    // Flow control.
    conn_send_window: i64,
    conn_recv_window: i64,
    conn_release_owed: u32,

    // Transmitting.
    encoder: Encoder,
    tx_start: usize,
    tx_end: usize,
    /// End of the frame at `tx_start` that is partly written.
    tx_frame_end: usize,
    send_preface: bool,
    settings_acks_owed: u8,
    ping_acks: [[u8; 8]; PING_ACK_QUEUE],
    ping_acks_len: usize,
    refusals: [(u32, ErrorCode); REFUSAL_QUEUE],
    refusals_len: usize,
    goaway_owed: Option<(u32, ErrorCode, &'static str)>,
    /// A control frame that did not fit the caller's buffer, partly written.
    stage: [u8; STAGE],
    stage_len: usize,
    stage_pos: usize,
    /// Per-slot events waiting (terminal events and SendReady flags).
    slot_events: usize,
    /// The peer acknowledged our SETTINGS.
    local_acked: bool,
    some_send_blocked: bool,
    some_want_tx: bool,
    streams_wanted: bool,

    events: [Option<Queued>; EVENT_QUEUE],
    events_head: usize,
    events_len: usize,
    rates: Rates,
    error: Option<ConnectionError>,
}

impl<
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    const RESETS: usize,
    B: Storage<BUF>,
> core::fmt::Debug for Connection<STREAMS, TABLE, BUF, RESETS, B>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Connection")
            .field("role", &self.role)
            .field("state", &self.state)
            .field("peer_streams", &self.peer_streams)
            .field("local_streams", &self.local_streams)
            .field("conn_send_window", &self.conn_send_window)
            .field("conn_recv_window", &self.conn_recv_window)
            .field("tx_pending", &(self.tx_end - self.tx_start))
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

type ConnResult<T = ()> = Result<T, frame::Violation>;
/// DATA handed out by one step: (stream, length, end_stream).
type DataOut = (StreamRef, usize, bool);

impl<
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    const RESETS: usize,
    B: Storage<BUF> + Default,
> Connection<STREAMS, TABLE, BUF, RESETS, B>
{
    /// A connection in the given role. A client writes the preface and its
    /// SETTINGS on the first `poll_transmit`; a server writes its SETTINGS
    /// and waits for the client preface.
    pub fn new(role: Role, config: Config, now: Instant) -> Self {
        Self::with_buffers(role, config, now, B::default())
    }
}

impl<
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    const RESETS: usize,
    B: Storage<BUF>,
> Connection<STREAMS, TABLE, BUF, RESETS, B>
{
    /// [`Connection::new`] with the given buffer storage.
    pub fn with_buffers(role: Role, config: Config, now: Instant, buffers: B) -> Self {
        const {
            assert!(
                STREAMS > 0 && STREAMS < u16::MAX as usize,
                "STREAMS out of range"
            )
        };
        let mut config = config;
        config.max_frame_size = config
            .max_frame_size
            .clamp(frame::MIN_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        config.initial_window_size = config.initial_window_size.min(MAX_WINDOW);
        config.connection_window_size = config.connection_window_size.clamp(65_535, MAX_WINDOW);
        let max_list = u32::try_from(BUF).unwrap_or(u32::MAX);
        let local = Settings {
            header_table_size: config
                .header_table_size
                .min(u32::try_from(TABLE).unwrap_or(u32::MAX)),
            enable_push: false,
            max_concurrent_streams: config
                .max_concurrent_streams
                .min(u32::try_from(STREAMS).unwrap_or(u32::MAX)),
            initial_window_size: config.initial_window_size,
            max_frame_size: config.max_frame_size,
            max_header_list_size: config.max_header_list_size.min(max_list),
        };
        let decoder = Decoder::with_limits(hpack::Limits {
            max_field_size: config.max_field_size as usize,
            max_header_list_size: local.max_header_list_size as usize,
        });
        Self {
            role,
            config,
            state: State::Open,
            now,
            preface_left: if role == Role::Server {
                PREFACE.len() as u8
            } else {
                0
            },
            got_settings: false,
            head: [0; HEADER_LEN],
            head_len: 0,
            payload: Payload::Header,
            current: None,
            small: [0; 8],
            small_len: 0,
            bufs: buffers,
            block_len: 0,
            block_info: None,
            decoder,
            store: HeaderStore::new(),
            store_busy: false,
            store_read: false,
            slots: Default::default(),
            last_peer_id: 0,
            next_local_id: if role == Role::Client { 1 } else { 2 },
            peer_streams: 0,
            local_streams: 0,
            resets: Default::default(),
            skipped: [(0, 0); SKIPPED],
            resets_next: 0,
            local,
            remote: Settings::INITIAL,
            settings_deadline: Some(now + config.settings_timeout),
            goaway_sent: None,
            goaway_received: None,
            conn_send_window: 65_535,
            conn_recv_window: i64::from(config.connection_window_size),
            conn_release_owed: 0,
            encoder: Encoder::new(),
            tx_start: 0,
            tx_end: 0,
            tx_frame_end: 0,
            send_preface: true,
            settings_acks_owed: 0,
            ping_acks: [[0; 8]; PING_ACK_QUEUE],
            ping_acks_len: 0,
            refusals: [(0, ErrorCode::NO_ERROR); REFUSAL_QUEUE],
            refusals_len: 0,
            goaway_owed: None,
            stage: [0; STAGE],
            stage_len: 0,
            stage_pos: 0,
            slot_events: 0,
            local_acked: false,
            some_send_blocked: false,
            some_want_tx: false,
            streams_wanted: false,
            events: [None; EVENT_QUEUE],
            events_head: 0,
            events_len: 0,
            rates: Rates::default(),
            error: None,
        }
    }

    /// The role given to [`Connection::new`].
    pub fn role(&self) -> Role {
        self.role
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether the connection is over and everything it had to send has
    /// been handed to `poll_transmit`: the driver closes the socket.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed && !self.wants_transmit()
    }

    /// The error that ended the connection, if one did.
    pub fn error(&self) -> Option<ConnectionError> {
        self.error
    }

    /// The wire id of a stream; `None` for a dead handle or a client stream
    /// whose headers have not gone out.
    pub fn stream_id(&self, stream: StreamRef) -> Option<u32> {
        self.stream(stream).map(|s| s.id).filter(|&id| id != 0)
    }

    /// The connection-level send window: DATA octets the peer accepts now.
    pub fn send_window(&self) -> i64 {
        self.conn_send_window
    }

    /// The connection-level receive window as it stands once the pending
    /// WINDOW_UPDATE goes out: what the peer may send before the application
    /// consumes more.
    pub fn recv_window(&self) -> i64 {
        self.conn_recv_window + i64::from(self.conn_release_owed)
    }

    /// Streams open from the peer's side and from ours.
    pub fn open_streams(&self) -> (u32, u32) {
        (self.peer_streams, self.local_streams)
    }

    // ----------------------------------------------------------------
    // Input
    // ----------------------------------------------------------------

    /// Feeds received octets. Returns how many were consumed and, at most,
    /// one piece of DATA payload borrowed from `input`. Consumes less than
    /// all of `input` when it returns data or when an event must be read
    /// first: drain [`Connection::poll_event`] and call again with the rest.
    pub fn recv<'i>(&mut self, input: &'i [u8], now: Instant) -> Received<'i> {
        self.now = now;
        self.free_read_store();
        let mut pos = 0;
        while pos < input.len() {
            if matches!(self.state, State::Failed | State::Closed) {
                // Nothing more is read from a failed connection (RFC 9113 §5.4.1).
                return Received {
                    consumed: input.len(),
                    data: None,
                };
            }
            if self.must_pause() {
                break;
            }
            match self.step(&input[pos..]) {
                Ok((n, data)) => {
                    pos += n;
                    if let Some((stream, len, end_stream)) = data {
                        let bytes = &input[pos - len..pos];
                        return Received {
                            consumed: pos,
                            data: Some(Data {
                                stream,
                                bytes,
                                end_stream,
                            }),
                        };
                    }
                }
                Err((code, reason)) => {
                    self.fail(code, reason);
                }
            }
        }
        Received {
            consumed: pos,
            data: None,
        }
    }

    /// Tells the connection the transport reached end of file or failed.
    pub fn recv_eof(&mut self) {
        if !matches!(self.state, State::Closed) {
            if self.error.is_none() && self.has_streams() {
                self.error = Some(ConnectionError::Local {
                    code: ErrorCode::CONNECT_ERROR,
                    reason: "transport closed",
                });
            }
            self.close();
        }
    }

    /// The next deadline, if any: call [`Connection::handle_timeout`] then.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Open | State::Draining => self.settings_deadline,
            _ => None,
        }
    }

    /// Lets time pass.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if let Some(deadline) = self.settings_deadline
            && now >= deadline
            && matches!(self.state, State::Open | State::Draining)
        {
            self.fail_with(
                ConnectionError::SettingsTimeout,
                ErrorCode::SETTINGS_TIMEOUT,
                "SETTINGS not acknowledged in time",
            );
        }
    }

    fn must_pause(&self) -> bool {
        self.store_busy
            || self.events_len + EVENT_HEADROOM > EVENT_QUEUE
            || self.ping_acks_len == PING_ACK_QUEUE
            || self.refusals_len == REFUSAL_QUEUE
    }

    /// Reads from one frame-level unit of input. Returns octets consumed
    /// and, for DATA handed out, (slot, length, end_stream).
    fn step(&mut self, input: &[u8]) -> ConnResult<(usize, Option<DataOut>)> {
        if self.preface_left > 0 {
            let at = PREFACE.len() - usize::from(self.preface_left);
            let n = input.len().min(usize::from(self.preface_left));
            if input[..n] != PREFACE[at..at + n] {
                return Err((ErrorCode::PROTOCOL_ERROR, "invalid connection preface"));
            }
            self.preface_left -= n as u8;
            return Ok((n, None));
        }
        match self.payload {
            Payload::Header => {
                let at = usize::from(self.head_len);
                let n = input.len().min(HEADER_LEN - at);
                self.head[at..at + n].copy_from_slice(&input[..n]);
                self.head_len += n as u8;
                if usize::from(self.head_len) == HEADER_LEN {
                    self.head_len = 0;
                    let head = FrameHeader::parse(&self.head);
                    self.on_frame_header(head)?;
                    if let Payload::Data { left: 0 } = self.payload {
                        // An empty DATA frame can still end the stream.
                        return Ok((n, self.data_chunk(0)?));
                    }
                }
                Ok((n, None))
            }
            Payload::PadLength => {
                let pad = input[0];
                let cur = self.current_mut()?;
                let rest = cur.head.length - 1;
                let priority_len =
                    if cur.head.kind == FrameType::HEADERS && cur.head.has(flags::PRIORITY) {
                        5
                    } else {
                        0
                    };
                // `check` made sure the frame holds its fixed fields.
                if u32::from(pad) > rest - priority_len {
                    return Err((
                        ErrorCode::PROTOCOL_ERROR,
                        "padding longer than the frame payload",
                    ));
                }
                cur.pad = pad;
                cur.auto_release += 1 + u32::from(pad);
                let is_headers = cur.head.kind == FrameType::HEADERS;
                let priority = cur.head.has(flags::PRIORITY);
                let body = rest - u32::from(pad);
                self.payload = if is_headers && priority {
                    Payload::Priority { left: 5 }
                } else if is_headers {
                    Payload::Fragment { left: body }
                } else {
                    Payload::Data { left: body }
                };
                if let Payload::Data { left: 0 } = self.payload {
                    return Ok((1, self.data_chunk(0)?));
                }
                self.after_progress()?;
                Ok((1, None))
            }
            Payload::Priority { left } => {
                let n = input.len().min(usize::from(left));
                let at = 5 - usize::from(left);
                self.small[at..at + n].copy_from_slice(&input[..n]);
                let left = left - n as u8;
                if left == 0 {
                    let cur = self.current()?;
                    let b = self.small;
                    let dependency = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & MAX_WINDOW;
                    if dependency == cur.head.stream_id {
                        self.self_dependency()?;
                    }
                    let body = cur.head.length
                        - 5
                        - u32::from(cur.pad)
                        - u32::from(cur.head.has(flags::PADDED));
                    self.payload = Payload::Fragment { left: body };
                } else {
                    self.payload = Payload::Priority { left };
                }
                self.after_progress()?;
                Ok((n, None))
            }
            Payload::Data { left } => {
                let n = input.len().min(left as usize);
                self.payload = Payload::Data {
                    left: left - n as u32,
                };
                Ok((n, self.data_chunk(n)?))
            }
            Payload::Fragment { left } => {
                let n = input.len().min(left as usize);
                let end = self.block_len + n;
                let Some(dst) = self
                    .bufs
                    .get_mut(FrameBuffer::Block)
                    .get_mut(self.block_len..end)
                else {
                    // The block cannot be decoded, so the HPACK context would be
                    // lost: the connection ends (RFC 9113 §10.5.1).
                    return Err((
                        ErrorCode::ENHANCE_YOUR_CALM,
                        "header block larger than the buffer",
                    ));
                };
                dst.copy_from_slice(&input[..n]);
                self.block_len = end;
                let left = left - n as u32;
                self.payload = Payload::Fragment { left };
                self.after_progress()?;
                Ok((n, None))
            }
            Payload::Padding { left } | Payload::Skip { left } => {
                let n = input.len().min(left as usize);
                let left = left - n as u32;
                self.payload = match self.payload {
                    Payload::Padding { .. } => Payload::Padding { left },
                    _ => Payload::Skip { left },
                };
                self.after_progress()?;
                Ok((n, None))
            }
            Payload::Small { left } => {
                let want = self.small_want();
                let at = usize::from(self.small_len);
                let n = input.len().min(want - at).min(left as usize);
                self.small[at..at + n].copy_from_slice(&input[..n]);
                self.small_len += n as u8;
                let left = left - n as u32;
                self.payload = Payload::Small { left };
                if usize::from(self.small_len) == want {
                    self.small_len = 0;
                    self.on_small()?;
                }
                self.after_progress()?;
                Ok((n, None))
            }
        }
    }

    /// `n` octets of DATA payload were consumed (0 for an empty stage).
    /// Returns what to hand the application, after the per-stream checks.
    fn data_chunk(&mut self, n: usize) -> ConnResult<Option<DataOut>> {
        let cur = self.current()?;
        let left = match self.payload {
            Payload::Data { left } => left,
            _ => 0,
        };
        let end = left == 0 && cur.head.has(flags::END_STREAM);
        // The stream may have died since the frame began (reset by the
        // application or for an error); its slot may even be reused.
        let mut slot = cur.stream.and_then(|r| self.slot_of(r));
        if let Some(k) = slot {
            // content-length is checked against the DATA actually received
            // (RFC 9113 §8.1.1).
            let mismatch = match self.slots[k].stream.as_mut() {
                Some(st) => {
                    st.data_received += n as u64;
                    st.content_length
                        .is_some_and(|cl| st.data_received > cl || (end && st.data_received != cl))
                }
                None => true,
            };
            if mismatch {
                self.stream_error(k, ErrorCode::PROTOCOL_ERROR)?;
                slot = None;
            }
        }
        if slot.is_none() {
            // Nobody takes these octets: they return to the window at once.
            if let Some(c) = self.current.as_mut() {
                c.stream = None;
                c.auto_release += n as u32;
            }
        }
        self.after_progress()?;
        match slot {
            Some(k) if n > 0 || end => {
                // Take the handle before the stream may free.
                let stream = self.handle(k);
                if let Some(st) = self.slots[k].stream.as_mut() {
                    st.unreleased = st.unreleased.saturating_add(n as u32);
                }
                if end {
                    self.end_recv(k);
                }
                Ok(Some((stream, n, end)))
            }
            _ => Ok(None),
        }
    }

    /// A HEADERS frame whose priority names its own stream (RFC 9113 §5.3.1):
    /// a stream error, after the block is decoded for HPACK.
    fn self_dependency(&mut self) -> ConnResult {
        let Some(block) = self.block_info.as_mut() else {
            return Ok(());
        };
        let id = block.stream_id;
        match block.target {
            BlockTarget::Slot(slot) => {
                block.target = BlockTarget::Ignore;
                self.stream_error(slot, ErrorCode::PROTOCOL_ERROR)
            }
            BlockTarget::New | BlockTarget::Refuse => {
                block.target = BlockTarget::Ignore;
                self.refuse(id, ErrorCode::PROTOCOL_ERROR);
                Ok(())
            }
            BlockTarget::Ignore => Ok(()),
        }
    }

    fn current(&self) -> ConnResult<Current> {
        self.current
            .ok_or((ErrorCode::INTERNAL_ERROR, "no current frame"))
    }

    fn current_mut(&mut self) -> ConnResult<&mut Current> {
        self.current
            .as_mut()
            .ok_or((ErrorCode::INTERNAL_ERROR, "no current frame"))
    }

    /// Octets collected in `small` per unit of the current frame.
    fn small_want(&self) -> usize {
        match self.current.map(|c| c.head.kind) {
            Some(FrameType::SETTINGS) => 6,
            Some(FrameType::PING) | Some(FrameType::GOAWAY) => 8,
            Some(FrameType::PRIORITY) => 5,
            _ => 4,
        }
    }

    /// Moves to the next stage of the frame once the current one is read.
    fn after_progress(&mut self) -> ConnResult {
        loop {
            let cur = self.current()?;
            let done_stage = match self.payload {
                Payload::Data { left: 0 } | Payload::Fragment { left: 0 } => {
                    self.payload = Payload::Padding {
                        left: u32::from(cur.pad),
                    };
                    if matches!(self.payload, Payload::Padding { left: 0 }) {
                        continue;
                    }
                    return Ok(());
                }
                Payload::Padding { left: 0 }
                | Payload::Skip { left: 0 }
                | Payload::Small { left: 0 } => true,
                _ => false,
            };
            if done_stage {
                return self.end_frame();
            }
            return Ok(());
        }
    }

    /// The whole frame has been read.
    fn end_frame(&mut self) -> ConnResult {
        let cur = self.current()?;
        self.payload = Payload::Header;
        self.current = None;
        if cur.auto_release > 0 {
            self.release_connection(cur.auto_release);
            if let Some(slot) = cur.stream.and_then(|r| self.slot_of(r)) {
                self.release_stream(slot, cur.auto_release);
            }
        }
        match cur.head.kind {
            FrameType::HEADERS | FrameType::CONTINUATION if cur.head.has(flags::END_HEADERS) => {
                self.end_block()
            }
            FrameType::SETTINGS if !cur.head.has(flags::ACK) => {
                self.settings_acks_owed = self.settings_acks_owed.saturating_add(1);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn on_frame_header(&mut self, head: FrameHeader) -> ConnResult {
        head.check(self.local.max_frame_size)?;
        if !self.got_settings {
            if head.kind != FrameType::SETTINGS || head.has(flags::ACK) {
                return Err((ErrorCode::PROTOCOL_ERROR, "first frame is not SETTINGS"));
            }
            self.got_settings = true;
        }
        if let Some(block) = self.block_info
            && (head.kind != FrameType::CONTINUATION || head.stream_id != block.stream_id)
        {
            return Err((ErrorCode::PROTOCOL_ERROR, "header block interrupted"));
        }
        let mut cur = Current {
            head,
            stream: None,
            pad: 0,
            auto_release: 0,
        };
        let len = head.length;
        self.payload = match head.kind {
            FrameType::DATA => {
                // Octets nobody takes are released as they are read.
                cur.stream = self.on_data_header(&head)?.map(|k| self.handle(k));
                if head.has(flags::PADDED) {
                    Payload::PadLength
                } else {
                    Payload::Data { left: len }
                }
            }
            FrameType::HEADERS => {
                self.on_headers_header(&head)?;
                let fixed = if head.has(flags::PRIORITY) { 5 } else { 0 };
                if head.has(flags::PADDED) {
                    Payload::PadLength
                } else if fixed > 0 {
                    Payload::Priority { left: 5 }
                } else {
                    Payload::Fragment { left: len }
                }
            }
            FrameType::CONTINUATION => {
                let Some(block) = self.block_info.as_mut() else {
                    return Err((
                        ErrorCode::PROTOCOL_ERROR,
                        "CONTINUATION without a header block",
                    ));
                };
                block.continuations += 1;
                if block.continuations > self.config.max_continuation_frames {
                    return Err((ErrorCode::ENHANCE_YOUR_CALM, "too many CONTINUATION frames"));
                }
                if len == 0 && !head.has(flags::END_HEADERS) {
                    self.count_empty()?;
                }
                Payload::Fragment { left: len }
            }
            FrameType::PUSH_PROMISE => {
                return Err((ErrorCode::PROTOCOL_ERROR, "PUSH_PROMISE with push disabled"));
            }
            FrameType::SETTINGS if head.has(flags::ACK) => {
                self.on_settings_ack();
                Payload::Skip { left: 0 }
            }
            FrameType::SETTINGS => {
                if self.rates.settings.exceeded(
                    self.now,
                    self.config.flood.period,
                    self.config.flood.max_settings,
                ) {
                    return Err((ErrorCode::ENHANCE_YOUR_CALM, "SETTINGS flood"));
                }
                Payload::Small { left: len }
            }
            FrameType::PING
            | FrameType::RST_STREAM
            | FrameType::WINDOW_UPDATE
            | FrameType::PRIORITY => Payload::Small { left: len },
            FrameType::GOAWAY => Payload::Small { left: len },
            _ => Payload::Skip { left: len },
        };
        self.current = Some(cur);
        self.small_len = 0;
        // Frames with nothing to read end here.
        if len == 0 {
            if let Payload::Data { .. } = self.payload {
                // An empty DATA frame may still end the stream: handled by
                // the payload reader on the next step.
                return Ok(());
            }
            return self.after_progress();
        }
        Ok(())
    }

    /// Checks a DATA frame against the stream and flow-control rules and
    /// charges the windows. Returns the slot that takes the payload.
    fn on_data_header(&mut self, head: &FrameHeader) -> ConnResult<Option<usize>> {
        let id = head.stream_id;
        let len = head.length;
        if self.is_idle(id) {
            return Err((ErrorCode::PROTOCOL_ERROR, "DATA on an idle stream"));
        }
        // Every DATA octet counts against the connection window (RFC 9113 §6.9).
        if i64::from(len) > self.conn_recv_window {
            return Err((
                ErrorCode::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.conn_recv_window -= i64::from(len);
        if len == 0 && !head.has(flags::END_STREAM) {
            self.count_empty()?;
        }
        let Some(slot) = self.find(id) else {
            if self.was_reset(id) || self.goaway_sent.is_some_and(|last| id > last) {
                return Ok(None);
            }
            return Err((ErrorCode::STREAM_CLOSED, "DATA on a closed stream"));
        };
        let Some(s) = self.slots[slot].stream.as_mut() else {
            return Ok(None);
        };
        match s.recv {
            Half::Open if s.head_received => {}
            Half::Ended => {
                self.stream_error(slot, ErrorCode::STREAM_CLOSED)?;
                return Ok(None);
            }
            _ => {
                self.stream_error(slot, ErrorCode::PROTOCOL_ERROR)?;
                return Ok(None);
            }
        }
        if i64::from(len) > s.recv_window {
            self.stream_error(slot, ErrorCode::FLOW_CONTROL_ERROR)?;
            return Ok(None);
        }
        s.recv_window -= i64::from(len);
        Ok(Some(slot))
    }

    fn on_headers_header(&mut self, head: &FrameHeader) -> ConnResult {
        let id = head.stream_id;
        if head.length == 0 && !head.has(flags::END_HEADERS) {
            self.count_empty()?;
        }
        let target = match self.find(id) {
            Some(slot) => {
                let s = self.slots[slot].stream.as_ref().map(|s| s.recv);
                match s {
                    Some(Half::Ended) => {
                        self.stream_error(slot, ErrorCode::STREAM_CLOSED)?;
                        BlockTarget::Ignore
                    }
                    Some(_) => BlockTarget::Slot(slot),
                    None => BlockTarget::Ignore,
                }
            }
            None if self.peer_initiated(id) && id > self.last_peer_id => {
                if self.role == Role::Client {
                    return Err((
                        ErrorCode::PROTOCOL_ERROR,
                        "HEADERS on a stream the server cannot open",
                    ));
                }
                self.note_skipped(id);
                self.last_peer_id = id;
                if self.goaway_sent.is_some() || self.state != State::Open {
                    BlockTarget::Ignore
                } else if self.peer_streams >= self.local.max_concurrent_streams
                    || !self.has_free_slot()
                {
                    BlockTarget::Refuse
                } else {
                    BlockTarget::New
                }
            }
            None if self.was_reset(id) => BlockTarget::Ignore,
            // An id the peer skipped was never opened (RFC 9113 §5.1.1).
            None if self.is_idle(id) || self.was_skipped(id) => {
                return Err((
                    ErrorCode::PROTOCOL_ERROR,
                    "HEADERS on a stream id never opened",
                ));
            }
            // A stream that was open and is closed (RFC 9113 §5.1).
            None => return Err((ErrorCode::STREAM_CLOSED, "HEADERS on a closed stream")),
        };
        if !self.hold(FrameBuffer::Block) {
            // Without the buffer the block cannot be decoded, and the HPACK
            // context would be lost (see `buffers`).
            return Err((ErrorCode::ENHANCE_YOUR_CALM, "no buffer for a header block"));
        }
        self.block_len = 0;
        self.block_info = Some(Block {
            stream_id: id,
            end_stream: head.has(flags::END_STREAM),
            continuations: 0,
            target,
        });
        Ok(())
    }

    /// A fixed-size unit of the current frame is in `small`.
    fn on_small(&mut self) -> ConnResult {
        let cur = self.current()?;
        let b = self.small;
        let word = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        match cur.head.kind {
            FrameType::SETTINGS => {
                let setting = Setting::parse(&[b[0], b[1], b[2], b[3], b[4], b[5]]);
                self.apply_setting(setting)
            }
            FrameType::PING => {
                let payload = b;
                if cur.head.has(flags::ACK) {
                    self.push_event(Queued::PingAck { payload });
                    return Ok(());
                }
                if self.rates.pings.exceeded(
                    self.now,
                    self.config.flood.period,
                    self.config.flood.max_pings,
                ) {
                    return Err((ErrorCode::ENHANCE_YOUR_CALM, "PING flood"));
                }
                self.ping_acks[self.ping_acks_len] = payload;
                self.ping_acks_len += 1;
                Ok(())
            }
            FrameType::RST_STREAM => self.on_rst_stream(cur.head.stream_id, ErrorCode(word)),
            FrameType::WINDOW_UPDATE => {
                self.on_window_update(cur.head.stream_id, word & MAX_WINDOW)
            }
            FrameType::PRIORITY => {
                if word & MAX_WINDOW == cur.head.stream_id {
                    // A stream cannot depend on itself (RFC 9113 §5.3.1).
                    match self.find(cur.head.stream_id) {
                        Some(slot) => self.stream_error(slot, ErrorCode::PROTOCOL_ERROR)?,
                        None => self.refuse(cur.head.stream_id, ErrorCode::PROTOCOL_ERROR),
                    }
                }
                Ok(())
            }
            FrameType::GOAWAY => {
                let code = ErrorCode(u32::from_be_bytes([b[4], b[5], b[6], b[7]]));
                let left = cur.head.length - 8;
                self.on_goaway(word & MAX_WINDOW, code);
                self.payload = Payload::Skip { left };
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn apply_setting(&mut self, s: Setting) -> ConnResult {
        match s.id {
            Setting::HEADER_TABLE_SIZE => {
                self.remote.header_table_size = s.value;
                self.encoder.set_max_table_size(s.value as usize);
            }
            Setting::ENABLE_PUSH => match (s.value, self.role) {
                (0, _) => self.remote.enable_push = false,
                (1, Role::Server) => self.remote.enable_push = true,
                _ => return Err((ErrorCode::PROTOCOL_ERROR, "invalid SETTINGS_ENABLE_PUSH")),
            },
            Setting::MAX_CONCURRENT_STREAMS => {
                let was_full = self.local_streams >= self.remote.max_concurrent_streams;
                self.remote.max_concurrent_streams = s.value;
                if was_full && self.local_streams < s.value && self.streams_wanted {
                    self.streams_wanted = false;
                    self.push_event(Queued::StreamsAvailable);
                }
            }
            Setting::INITIAL_WINDOW_SIZE => {
                if s.value > MAX_WINDOW {
                    return Err((
                        ErrorCode::FLOW_CONTROL_ERROR,
                        "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                    ));
                }
                // Open streams move by the difference, and may go negative
                // (RFC 9113 §6.9.2).
                let delta = i64::from(s.value) - i64::from(self.remote.initial_window_size);
                self.remote.initial_window_size = s.value;
                for slot in 0..self.slots.len() {
                    if let Some(st) = self.slots[slot].stream.as_mut() {
                        st.send_window += delta;
                        if st.send_window > i64::from(MAX_WINDOW) {
                            return Err((
                                ErrorCode::FLOW_CONTROL_ERROR,
                                "stream window above 2^31-1",
                            ));
                        }
                    }
                }
                if delta > 0 {
                    self.wake_blocked();
                }
            }
            Setting::MAX_FRAME_SIZE => {
                if !(frame::MIN_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&s.value) {
                    return Err((
                        ErrorCode::PROTOCOL_ERROR,
                        "SETTINGS_MAX_FRAME_SIZE out of range",
                    ));
                }
                self.remote.max_frame_size = s.value;
            }
            Setting::MAX_HEADER_LIST_SIZE => self.remote.max_header_list_size = s.value,
            _ => {}
        }
        Ok(())
    }

    fn on_settings_ack(&mut self) {
        self.settings_deadline = None;
        if self.local_acked {
            return;
        }
        // Our SETTINGS apply from now (RFC 9113 §6.5.3): the HPACK table
        // limit, and stream windows shrink to our initial window if it is
        // below the default the peer could use until now.
        self.local_acked = true;
        self.decoder
            .set_max_table_size(self.local.header_table_size as usize);
        let ours = i64::from(self.local.initial_window_size);
        let delta = ours - ours.max(65_535);
        if delta != 0 {
            for slot in self.slots.iter_mut() {
                if let Some(s) = slot.stream.as_mut() {
                    s.recv_window += delta;
                }
            }
        }
    }

    fn on_rst_stream(&mut self, id: u32, code: ErrorCode) -> ConnResult {
        if self.is_idle(id) {
            return Err((ErrorCode::PROTOCOL_ERROR, "RST_STREAM on an idle stream"));
        }
        if self.rates.resets.exceeded(
            self.now,
            self.config.flood.period,
            self.config.flood.max_resets,
        ) {
            return Err((ErrorCode::ENHANCE_YOUR_CALM, "too many stream resets"));
        }
        let Some(slot) = self.find(id) else {
            return Ok(());
        };
        let Some(s) = self.slots[slot].stream else {
            return Ok(());
        };
        // The response ended before the reset: keep it, stop sending the
        // request, report no error (the binding's early-response rule).
        let quiet = self.role == Role::Client && s.recv == Half::Ended;
        if quiet {
            self.slots[slot].quiet_previous = true;
            self.end_stream_with(slot, Terminal::Closed);
        } else {
            self.end_stream_with(slot, Terminal::Reset { code, remote: true });
        }
        Ok(())
    }

    fn on_window_update(&mut self, id: u32, increment: u32) -> ConnResult {
        if id == 0 {
            if increment == 0 {
                return Err((
                    ErrorCode::PROTOCOL_ERROR,
                    "WINDOW_UPDATE of 0 on the connection",
                ));
            }
            self.conn_send_window += i64::from(increment);
            if self.conn_send_window > i64::from(MAX_WINDOW) {
                return Err((
                    ErrorCode::FLOW_CONTROL_ERROR,
                    "connection window above 2^31-1",
                ));
            }
            self.wake_blocked();
            return Ok(());
        }
        if self.is_idle(id) {
            return Err((ErrorCode::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream"));
        }
        let Some(slot) = self.find(id) else {
            return Ok(());
        };
        if increment == 0 {
            return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
        }
        let Some(s) = self.slots[slot].stream.as_mut() else {
            return Ok(());
        };
        s.send_window += i64::from(increment);
        if s.send_window > i64::from(MAX_WINDOW) {
            return self.stream_error(slot, ErrorCode::FLOW_CONTROL_ERROR);
        }
        if s.send_blocked && s.send_window > 0 && self.conn_send_window > 0 {
            s.send_blocked = false;
            self.mark_ready(slot);
        }
        Ok(())
    }

    fn on_goaway(&mut self, last_stream_id: u32, code: ErrorCode) {
        self.goaway_received = Some(last_stream_id);
        // GOAWAY limits the streams its receiver opens. A client stops
        // opening streams and closes when its streams are done; a server
        // opens none, so it keeps serving until the peer closes the
        // transport (RFC 9113 §6.8).
        if self.state == State::Open && self.role == Role::Client {
            self.state = State::Draining;
        }
        // A GOAWAY for an error means the peer closes the transport (RFC
        // 9113 §5.4.1); an unknown code means nothing special (§7).
        let error = code != ErrorCode::NO_ERROR && code.name().is_some();
        if error && self.error.is_none() {
            self.error = Some(ConnectionError::Remote {
                code,
                last_stream_id,
            });
        }
        self.push_event(Queued::GoAway {
            last_stream_id,
            code,
        });
        // Our streams above the last id were not processed: the
        // application may retry them on a new connection.
        for slot in 0..self.slots.len() {
            let Some(s) = self.slots[slot].stream else {
                continue;
            };
            let ours = s.id != 0 && !self.peer_initiated(s.id);
            if ours && s.id > last_stream_id {
                self.end_stream_with(
                    slot,
                    Terminal::Reset {
                        code: ErrorCode::REFUSED_STREAM,
                        remote: true,
                    },
                );
            }
        }
        if error {
            self.close();
        } else {
            self.maybe_close_drained();
        }
    }

    /// Holds `which`, which has at least `BUF` octets; false when it cannot
    /// be had.
    #[inline]
    fn hold(&mut self, which: FrameBuffer) -> bool {
        if self.bufs.acquire(which) {
            if self.bufs.get(which).len() >= BUF {
                return true;
            }
            self.bufs.release(which);
        }
        false
    }

    /// A complete header block is in the block buffer: decodes it and gives
    /// the buffer back, and the header store too unless an event points
    /// into it.
    fn end_block(&mut self) -> ConnResult {
        let result = self.decode_block();
        self.block_len = 0;
        self.bufs.release(FrameBuffer::Block);
        if !self.store_busy {
            self.bufs.release(FrameBuffer::Headers);
        }
        result
    }

    fn decode_block(&mut self) -> ConnResult {
        let Some(info) = self.block_info.take() else {
            return Ok(());
        };
        let kind = match info.target {
            BlockTarget::Slot(slot) => {
                let Some(s) = self.slots[slot].stream else {
                    return self.decode_ignored();
                };
                match (self.role, s.head_received) {
                    (Role::Server, _) => HeadersKind::Trailers,
                    (Role::Client, true) => HeadersKind::Trailers,
                    (Role::Client, false) => HeadersKind::Response,
                }
            }
            BlockTarget::New => HeadersKind::Request,
            BlockTarget::Refuse | BlockTarget::Ignore => {
                self.decode_ignored()?;
                if info.target == BlockTarget::Refuse {
                    if self.rates.refused.exceeded(
                        self.now,
                        self.config.flood.period,
                        self.config.flood.max_refused_streams,
                    ) {
                        return Err((ErrorCode::ENHANCE_YOUR_CALM, "too many refused streams"));
                    }
                    self.refuse(info.stream_id, ErrorCode::REFUSED_STREAM);
                }
                return Ok(());
            }
        };
        if !self.hold(FrameBuffer::Headers) {
            // No room for the list (see `buffers`): keep HPACK in step, then
            // refuse a new stream, reset one already open.
            self.decode_ignored()?;
            return match info.target {
                BlockTarget::Slot(slot) => self.stream_error(slot, ErrorCode::ENHANCE_YOUR_CALM),
                _ => {
                    self.refuse(info.stream_id, ErrorCode::REFUSED_STREAM);
                    Ok(())
                }
            };
        }
        self.store.begin(kind);
        let store = &mut self.store;
        // Huffman-coded literals are decoded into the free end of the block
        // buffer before the store copies them.
        let (block, list) = self.bufs.block_and_headers();
        let (block, scratch) = block.split_at_mut(self.block_len);
        let result = self.decoder.decode(block, scratch, |f| store.push(list, f));
        let size_error = match result {
            Ok(()) => self.store.overflow,
            Err(e) if e.is_size_error() => true,
            Err(_) => return Err((ErrorCode::COMPRESSION_ERROR, "HPACK decoding failed")),
        };
        let checked = self.store.finish(self.bufs.get(FrameBuffer::Headers));
        // Open the stream (server), or find it.
        let slot = match info.target {
            BlockTarget::Slot(slot) => slot,
            _ => match self.open_peer_stream(info.stream_id) {
                Some(slot) => slot,
                None => {
                    self.refuse(info.stream_id, ErrorCode::REFUSED_STREAM);
                    return Ok(());
                }
            },
        };
        if size_error {
            return self.reject_oversize(slot, kind, info.end_stream);
        }
        let kind = match checked {
            Ok(kind) => kind,
            Err(_) => return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR),
        };
        let end_stream = info.end_stream;
        if matches!(kind, HeadersKind::Trailers) && !end_stream {
            return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
        }
        if matches!(kind, HeadersKind::Informational) && end_stream {
            return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
        }
        let content_length = self.store.content_length;
        if let Some(s) = self.slots[slot].stream.as_mut() {
            match kind {
                HeadersKind::Request | HeadersKind::Response => {
                    s.head_received = true;
                    s.recv = Half::Open;
                    s.content_length = content_length;
                    if end_stream && content_length.is_some_and(|n| n != 0) {
                        return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
                    }
                }
                HeadersKind::Informational => s.recv = Half::Open,
                HeadersKind::Trailers => {
                    if s.content_length.is_some_and(|n| n != s.data_received) {
                        return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
                    }
                }
            }
        }
        let stream = self.handle(slot);
        if let Some(st) = self.slots[slot].stream.as_mut() {
            st.announced = true;
        }
        self.push_event(Queued::Headers {
            stream,
            kind,
            end_stream,
        });
        self.store_busy = true;
        if end_stream {
            self.end_recv(slot);
        }
        Ok(())
    }

    /// Decodes the block only to keep the HPACK context in step.
    fn decode_ignored(&mut self) -> ConnResult {
        let (block, _) = self.bufs.block_and_headers();
        let (block, scratch) = block.split_at_mut(self.block_len);
        match self.decoder.decode(block, scratch, |_| {}) {
            Ok(()) => Ok(()),
            Err(e) if e.is_size_error() => Ok(()),
            Err(_) => Err((ErrorCode::COMPRESSION_ERROR, "HPACK decoding failed")),
        }
    }

    /// A header list over our limits. A request head gets `:status 431`
    /// (and RST_STREAM(NO_ERROR) if the request is still coming); anything
    /// else resets the stream. Either way the stream is freed at once and the
    /// HPACK context stays in step.
    fn reject_oversize(&mut self, slot: usize, kind: HeadersKind, end_stream: bool) -> ConnResult {
        if self.role == Role::Server && kind == HeadersKind::Request {
            let id = self.slots[slot].stream.map_or(0, |s| s.id);
            let fields = [Field::new(b":status", b"431")];
            if self.write_headers_frames(id, fields, true).is_ok() {
                if !end_stream {
                    self.write_rst_in_order(id, ErrorCode::NO_ERROR);
                }
                self.remember_reset(id);
                self.free_slot_now(slot);
                return Ok(());
            }
        }
        self.stream_error(slot, ErrorCode::PROTOCOL_ERROR)
    }

    // ----------------------------------------------------------------
    // Streams
    // ----------------------------------------------------------------

    fn peer_initiated(&self, id: u32) -> bool {
        let odd = id % 2 == 1;
        match self.role {
            Role::Server => odd,
            Role::Client => !odd,
        }
    }

    /// A stream id in the idle state: never opened by either side.
    fn is_idle(&self, id: u32) -> bool {
        if self.peer_initiated(id) {
            id > self.last_peer_id
        } else {
            id >= self.next_local_id
        }
    }

    /// The peer opened `id`, leaving ids below it unused: remember the gap,
    /// so that a later HEADERS there is told from one on a closed stream.
    fn note_skipped(&mut self, id: u32) {
        let first = if self.last_peer_id == 0 {
            if self.role == Role::Server { 1 } else { 2 }
        } else {
            self.last_peer_id + 2
        };
        if id > first {
            self.skipped.copy_within(..SKIPPED - 1, 1);
            self.skipped[0] = (first, id - 2);
        }
    }

    fn was_skipped(&self, id: u32) -> bool {
        self.skipped
            .iter()
            .any(|&(a, b)| a <= id && id <= b && a != 0)
    }

    fn was_reset(&self, id: u32) -> bool {
        id != 0 && self.resets.contains(&id)
    }

    fn remember_reset(&mut self, id: u32) {
        if RESETS == 0 || id == 0 {
            return;
        }
        let n = self.resets.len();
        if n < RESETS && self.resets.grow_to(n + 1) {
            self.resets[n] = id;
            return;
        }
        // Full: the oldest goes.
        if let Some(at) = self.resets.get_mut(self.resets_next) {
            *at = id;
        }
        self.resets_next = (self.resets_next + 1) % n.max(1);
    }

    fn find(&self, id: u32) -> Option<usize> {
        if id == 0 {
            return None;
        }
        self.slots
            .iter()
            .position(|s| s.stream.is_some_and(|st| st.id == id))
    }

    /// A slot with no stream and no event waiting to be read; a new one
    /// when every slot is taken and the storage has room for more.
    fn free_slot(&mut self) -> Option<usize> {
        let free = self
            .slots
            .iter()
            .position(|s| s.stream.is_none() && s.pending.is_none());
        free.or_else(|| {
            let n = self.slots.len();
            self.slots.grow_to(n + 1).then_some(n)
        })
    }

    /// Whether [`Self::free_slot`] would find or make one.
    fn has_free_slot(&self) -> bool {
        self.slots.len() < STREAMS
            || self
                .slots
                .iter()
                .any(|s| s.stream.is_none() && s.pending.is_none())
    }

    fn handle(&self, slot: usize) -> StreamRef {
        StreamRef {
            slot: slot as u16,
            generation: self.slots[slot].generation,
        }
    }

    fn slot_of(&self, stream: StreamRef) -> Option<usize> {
        let slot = usize::from(stream.slot);
        let s = self.slots.get(slot)?;
        (s.generation == stream.generation && s.stream.is_some()).then_some(slot)
    }

    fn stream(&self, stream: StreamRef) -> Option<&Stream> {
        self.slot_of(stream)
            .and_then(|slot| self.slots[slot].stream.as_ref())
    }

    fn new_stream(&self, id: u32) -> Stream {
        Stream {
            id,
            send: Half::Idle,
            recv: Half::Idle,
            head_received: false,
            send_window: i64::from(self.remote.initial_window_size),
            recv_window: self.initial_recv_window(),
            release_owed: 0,
            content_length: None,
            data_received: 0,
            send_blocked: false,
            want_tx: false,
            counted: false,
            announced: false,
            ready: false,
            unreleased: 0,
        }
    }

    /// A new stream's receive window. Until the peer acknowledges our
    /// SETTINGS it may still count with the default 65,535 (RFC 9113 §6.9.3).
    fn initial_recv_window(&self) -> i64 {
        let ours = i64::from(self.local.initial_window_size);
        if self.local_acked {
            ours
        } else {
            ours.max(65_535)
        }
    }

    fn open_peer_stream(&mut self, id: u32) -> Option<usize> {
        let slot = self.free_slot()?;
        let mut s = self.new_stream(id);
        s.counted = true;
        self.peer_streams += 1;
        self.slots[slot].stream = Some(s);
        self.slots[slot].quiet_previous = false;
        Some(slot)
    }

    /// Refuses or resets a stream that has no slot.
    fn refuse(&mut self, id: u32, code: ErrorCode) {
        self.remember_reset(id);
        self.refuse_quietly(id, code);
    }

    /// The peer broke a rule of one stream: reset it (RFC 9113 §5.4.2).
    /// The RST_STREAM goes after any frame of the stream already queued.
    fn stream_error(&mut self, slot: usize, code: ErrorCode) -> ConnResult {
        if self.rates.resets.exceeded(
            self.now,
            self.config.flood.period,
            self.config.flood.max_resets,
        ) {
            return Err((ErrorCode::ENHANCE_YOUR_CALM, "too many stream errors"));
        }
        let Some(s) = self.slots[slot].stream else {
            return Ok(());
        };
        self.remember_reset(s.id);
        self.write_rst_in_order(s.id, code);
        self.end_stream_with(
            slot,
            Terminal::Reset {
                code,
                remote: false,
            },
        );
        Ok(())
    }

    /// Queues an RST_STREAM for a stream that has no slot.
    fn refuse_quietly(&mut self, id: u32, code: ErrorCode) {
        if self.refusals_len < REFUSAL_QUEUE {
            self.refusals[self.refusals_len] = (id, code);
            self.refusals_len += 1;
        }
    }

    /// Marks the receive half ended; the stream closes when both are.
    fn end_recv(&mut self, slot: usize) {
        if let Some(s) = self.slots[slot].stream.as_mut() {
            s.recv = Half::Ended;
            if s.send == Half::Ended {
                self.finish_stream(slot);
            }
        }
    }

    /// Both halves ended cleanly.
    fn finish_stream(&mut self, slot: usize) {
        self.end_stream_with(slot, Terminal::Closed);
    }

    /// Ends a stream: its slot frees now (frames of it still in the transmit
    /// buffer carry its id, not its slot), and if the application knows the
    /// stream, `event` waits in the slot until it is read.
    fn end_stream_with(&mut self, slot: usize, event: Terminal) {
        let Some(s) = self.slots[slot].stream else {
            return;
        };
        if s.announced {
            let stream = self.handle(slot);
            self.slots[slot].pending = Some((stream, event));
            self.slot_events += 1;
        }
        self.free_slot_now(slot);
    }

    /// Frees a slot without an event. DATA the application has not released
    /// returns to the connection window with it.
    fn free_slot_now(&mut self, slot: usize) {
        let Some(s) = self.slots[slot].stream.take() else {
            return;
        };
        if s.ready {
            self.slot_events -= 1;
        }
        self.release_connection(s.unreleased);
        if s.counted {
            if self.peer_initiated(s.id) {
                self.peer_streams -= 1;
            } else {
                self.local_streams -= 1;
                if self.streams_wanted {
                    self.streams_wanted = false;
                    self.push_event(Queued::StreamsAvailable);
                }
            }
        }
        let slot_ref = &mut self.slots[slot];
        slot_ref.generation = slot_ref.generation.wrapping_add(1);
        self.maybe_close_drained();
    }

    /// Owes the stream a `SendReady` event.
    fn mark_ready(&mut self, slot: usize) {
        if let Some(s) = self.slots[slot].stream.as_mut()
            && !s.ready
        {
            s.ready = true;
            self.slot_events += 1;
        }
    }

    fn has_streams(&self) -> bool {
        self.slots.iter().any(|s| s.stream.is_some())
    }

    fn count_empty(&mut self) -> ConnResult {
        if self.rates.empty.exceeded(
            self.now,
            self.config.flood.period,
            self.config.flood.max_empty_frames,
        ) {
            return Err((ErrorCode::ENHANCE_YOUR_CALM, "too many empty frames"));
        }
        Ok(())
    }

    fn wake_blocked(&mut self) {
        if !self.some_send_blocked || self.conn_send_window <= 0 {
            return;
        }
        self.some_send_blocked = false;
        for slot in 0..self.slots.len() {
            let Some(s) = self.slots[slot].stream.as_mut() else {
                continue;
            };
            if s.send_blocked && s.send_window > 0 {
                s.send_blocked = false;
                self.mark_ready(slot);
            } else if s.send_blocked {
                self.some_send_blocked = true;
            }
        }
    }

    // ----------------------------------------------------------------
    // Flow control (receive side)
    // ----------------------------------------------------------------

    /// Returns `n` octets of DATA the application has consumed on `stream`,
    /// reopening the stream and connection windows. Windows never reopen
    /// before this call (RFC 9113 §6.9), except that a stream's unreleased
    /// octets return to the connection window when the stream ends; releasing
    /// on a dead handle does nothing.
    pub fn release_data(&mut self, stream: StreamRef, n: usize) {
        let Some(slot) = self.slot_of(stream) else {
            return;
        };
        let Some(s) = self.slots[slot].stream.as_mut() else {
            return;
        };
        let n = u32::try_from(n).unwrap_or(u32::MAX).min(s.unreleased);
        s.unreleased -= n;
        self.release_connection(n);
        self.release_stream(slot, n);
    }

    fn release_connection(&mut self, n: u32) {
        self.conn_release_owed = self.conn_release_owed.saturating_add(n);
    }

    fn release_stream(&mut self, slot: usize, n: u32) {
        if let Some(s) = self.slots[slot].stream.as_mut()
            && s.recv == Half::Open
        {
            s.release_owed = s.release_owed.saturating_add(n);
        }
    }

    /// A WINDOW_UPDATE is worth sending once half the window is owed.
    fn connection_update_due(&self) -> bool {
        self.conn_release_owed > 0
            && (i64::from(self.conn_release_owed)
                >= i64::from(self.config.connection_window_size) / 2
                || self.conn_recv_window < i64::from(self.config.connection_window_size) / 2)
    }

    fn stream_update_due(&self, s: &Stream) -> bool {
        s.release_owed > 0 && s.recv == Half::Open && {
            let target = i64::from(self.local.initial_window_size);
            i64::from(s.release_owed) >= target / 2 || s.recv_window < target / 2
        }
    }

    // ----------------------------------------------------------------
    // Connection end
    // ----------------------------------------------------------------

    /// A connection error: GOAWAY with `code`, then nothing more is read.
    fn fail(&mut self, code: ErrorCode, reason: &'static str) {
        self.fail_with(ConnectionError::Local { code, reason }, code, reason);
    }

    fn fail_with(&mut self, error: ConnectionError, code: ErrorCode, reason: &'static str) {
        if matches!(self.state, State::Failed | State::Closed) {
            return;
        }
        self.goaway_owed = Some((self.last_peer_id, code, reason));
        self.goaway_sent = Some(self.last_peer_id);
        self.error = Some(error);
        self.state = State::Failed;
        self.close();
    }

    fn close(&mut self) {
        for slot in 0..self.slots.len() {
            if let Some(s) = self.slots[slot].stream.take() {
                if s.ready {
                    self.slot_events -= 1;
                }
                let sl = &mut self.slots[slot];
                sl.generation = sl.generation.wrapping_add(1);
            }
        }
        self.peer_streams = 0;
        self.local_streams = 0;
        self.state = State::Closed;
        self.store_busy = false;
        self.store_read = false;
        self.block_info = None;
        self.block_len = 0;
        self.bufs.release(FrameBuffer::Block);
        self.bufs.release(FrameBuffer::Headers);
        let error = self.error;
        // The closing event must fit even in a full queue.
        if self.events_len == EVENT_QUEUE {
            self.events_len -= 1;
        }
        self.push_event(Queued::ConnectionClosed { error });
    }

    fn maybe_close_drained(&mut self) {
        if self.state == State::Draining && !self.has_streams() {
            self.close();
        }
    }

    /// Starts a graceful shutdown: GOAWAY(`code`) with the last stream this
    /// end processed. Streams up to it finish; newer ones are refused. The
    /// connection closes when the last stream ends.
    pub fn go_away(&mut self, code: ErrorCode) {
        if self.state != State::Open {
            return;
        }
        self.goaway_owed = Some((self.last_peer_id, code, ""));
        self.goaway_sent = Some(self.last_peer_id);
        self.state = State::Draining;
        self.maybe_close_drained();
    }

    /// Ends the connection now: GOAWAY(`code`), then closed.
    pub fn abort(&mut self, code: ErrorCode, reason: &'static str) {
        self.fail(code, reason);
    }

    // ----------------------------------------------------------------
    // Events
    // ----------------------------------------------------------------

    fn push_event(&mut self, e: Queued) {
        // Wake-ups are idempotent: one queued is enough.
        if matches!(e, Queued::StreamsAvailable)
            && self.queued().any(|q| matches!(q, Queued::StreamsAvailable))
        {
            return;
        }
        if self.events_len == EVENT_QUEUE {
            // recv pauses before the queue can fill, and per-stream events
            // wait in their slots; only an application that never drains
            // events gets here, and it loses the newest.
            return;
        }
        let at = (self.events_head + self.events_len) % EVENT_QUEUE;
        self.events[at] = Some(e);
        self.events_len += 1;
    }

    fn queued(&self) -> impl Iterator<Item = &Queued> {
        (0..self.events_len)
            .filter_map(|i| self.events[(self.events_head + i) % EVENT_QUEUE].as_ref())
    }

    fn free_read_store(&mut self) {
        if self.store_read {
            self.store_read = false;
            self.store_busy = false;
            self.bufs.release(FrameBuffer::Headers);
        }
    }

    /// The next event, if any. A `Headers` event borrows the connection's
    /// header list, which stays valid until the next call on the connection.
    ///
    /// Order: a stream's events come in the order they happened; events of
    /// different streams may be reordered; `ConnectionClosed` is always last.
    pub fn poll_event(&mut self) -> Option<Event<'_>> {
        self.free_read_store();
        if self.slot_events > 0
            && let Some(e) = self.poll_slot_event()
        {
            return Some(e);
        }
        let front = self.events[self.events_head];
        if self.events_len == 0
            || (matches!(front, Some(Queued::ConnectionClosed { .. })) && self.slot_events > 0)
        {
            return None;
        }
        let e = self.events[self.events_head].take()?;
        self.events_head = (self.events_head + 1) % EVENT_QUEUE;
        self.events_len -= 1;
        Some(match e {
            Queued::Headers {
                stream,
                kind,
                end_stream,
            } => {
                self.store_read = true;
                Event::Headers {
                    stream,
                    kind,
                    fields: self.store.list(self.bufs.get(FrameBuffer::Headers)),
                    end_stream,
                }
            }
            Queued::StreamsAvailable => Event::StreamsAvailable,
            Queued::GoAway {
                last_stream_id,
                code,
            } => Event::GoAway {
                last_stream_id,
                code,
            },
            Queued::PingAck { payload } => Event::PingAck { payload },
            Queued::ConnectionClosed { error } => Event::ConnectionClosed { error },
        })
    }

    /// A per-stream event, unless the stream's Headers event is still queued
    /// (it must come first).
    fn poll_slot_event(&mut self) -> Option<Event<'static>> {
        let headers_waiting = self.queued().find_map(|q| match q {
            Queued::Headers { stream, .. } => Some(*stream),
            _ => None,
        });
        for slot in 0..self.slots.len() {
            if let Some((stream, event)) = self.slots[slot].pending {
                if headers_waiting == Some(stream) {
                    continue;
                }
                self.slots[slot].pending = None;
                self.slot_events -= 1;
                return Some(match event {
                    Terminal::Reset { code, remote } => Event::Reset {
                        stream,
                        code,
                        remote,
                    },
                    Terminal::Closed => Event::Closed { stream },
                });
            }
            let handle = self.handle(slot);
            if let Some(s) = self.slots[slot].stream.as_mut()
                && s.ready
                && headers_waiting != Some(handle)
            {
                s.ready = false;
                self.slot_events -= 1;
                return Some(Event::SendReady { stream: handle });
            }
        }
        None
    }

    // ----------------------------------------------------------------
    // Sending
    // ----------------------------------------------------------------

    /// Reserves a stream slot for a new request (client role). The stream
    /// gets its id only when its headers are written; a stream reset before
    /// that is never seen by the peer.
    pub fn open_stream(&mut self) -> Result<StreamRef, StreamError> {
        if self.state != State::Open || self.goaway_received.is_some() {
            return Err(StreamError::ConnectionClosed);
        }
        let slot = self.free_slot().ok_or(StreamError::NoCapacity)?;
        let mut s = self.new_stream(0);
        s.announced = true;
        self.slots[slot].stream = Some(s);
        self.slots[slot].quiet_previous = false;
        Ok(self.handle(slot))
    }

    /// Whether sends on this handle are dropped without error: its response
    /// ended and a reset followed (the binding's early-response rule).
    fn quiet(&self, stream: StreamRef) -> bool {
        let slot = usize::from(stream.slot);
        self.slots
            .get(slot)
            .is_some_and(|s| s.quiet_previous && s.generation == stream.generation.wrapping_add(1))
    }

    /// Sends a header block: the request or response head, or trailers
    /// (`end_stream` must then be set). Fails without side effects when the
    /// transmit buffer lacks room ([`StreamError::HeadersTooLarge`] says
    /// how much the block needs; retry after `poll_transmit`).
    pub fn send_headers<'f, I>(
        &mut self,
        stream: StreamRef,
        fields: I,
        end_stream: bool,
    ) -> Result<(), StreamError>
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        if self.quiet(stream) {
            return Ok(());
        }
        let slot = self.slot_of(stream).ok_or(StreamError::UnknownStream)?;
        let s = self.slots[slot].stream.ok_or(StreamError::UnknownStream)?;
        match s.send {
            Half::Ended => return Err(StreamError::AlreadyEnded),
            Half::Open if !end_stream => return Err(StreamError::InvalidState),
            _ => {}
        }
        if self.state == State::Closed || self.state == State::Failed {
            return Err(StreamError::ConnectionClosed);
        }
        let mut id = s.id;
        if id == 0 {
            if self.goaway_received.is_some() {
                return Err(StreamError::ConnectionClosed);
            }
            if self.local_streams >= self.remote.max_concurrent_streams {
                self.streams_wanted = true;
                return Err(StreamError::ConcurrencyLimit);
            }
            id = self.next_local_id;
        }
        if let Err(e) = self.write_headers_frames(id, fields, end_stream) {
            if e == StreamError::TransmitFull
                && let Some(st) = self.slots[slot].stream.as_mut()
            {
                st.want_tx = true;
                self.some_want_tx = true;
            }
            return Err(e);
        }
        let Some(st) = self.slots[slot].stream.as_mut() else {
            return Err(StreamError::UnknownStream);
        };
        if st.id == 0 {
            st.id = id;
            st.counted = true;
            self.next_local_id += 2;
            self.local_streams += 1;
        }
        st.send = if end_stream { Half::Ended } else { Half::Open };
        if end_stream {
            self.on_send_end(slot);
        }
        Ok(())
    }

    /// The local half ended: free the stream, or for a server whose request
    /// is still arriving, stop it with RST_STREAM(NO_ERROR) after the
    /// response (RFC 9113 §8.1).
    fn on_send_end(&mut self, slot: usize) {
        let Some(s) = self.slots[slot].stream else {
            return;
        };
        if s.recv == Half::Ended {
            self.finish_stream(slot);
        } else if self.role == Role::Server && s.head_received {
            self.write_rst_in_order(s.id, ErrorCode::NO_ERROR);
            self.remember_reset(s.id);
            if let Some(st) = self.slots[slot].stream.as_mut() {
                st.recv = Half::Ended;
            }
            self.finish_stream(slot);
        }
    }

    /// Encodes a header block into the transmit buffer as HEADERS and
    /// CONTINUATION frames no larger than the peer's maximum frame size.
    /// On failure nothing is written and the encoder is unchanged.
    fn write_headers_frames<'f, I>(
        &mut self,
        id: u32,
        fields: I,
        end_stream: bool,
    ) -> Result<(), StreamError>
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        self.compact_tx();
        if !self.hold(FrameBuffer::Transmit) {
            return Err(StreamError::TransmitFull);
        }
        let tx = self.bufs.get_mut(FrameBuffer::Transmit);
        let max = self.remote.max_frame_size as usize;
        let start = self.tx_end;
        let body = start + HEADER_LEN;
        // Keep room for an RST_STREAM after a final response, and for the
        // CONTINUATION headers the block may need.
        let limit = BUF.saturating_sub(HEADER_LEN + 4);
        let room = limit.saturating_sub(body);
        let continuation_room = room / (max + HEADER_LEN) * HEADER_LEN;
        let encode_end = body + room - continuation_room;
        let n = match self
            .encoder
            .encode(fields, &mut tx[body.min(encode_end)..encode_end])
        {
            Ok(n) => n,
            Err(hpack::EncodeError::BufferTooSmall { needed }) => {
                let frames = needed.div_ceil(max).max(1);
                let needed = needed + frames * HEADER_LEN + HEADER_LEN + 4;
                return Err(if needed > BUF {
                    StreamError::HeadersTooLarge { needed }
                } else {
                    StreamError::TransmitFull
                });
            }
        };
        let frames = n.div_ceil(max).max(1);
        // Slide each later fragment right to make room for its CONTINUATION
        // header, last first.
        let mut k = frames;
        while k > 1 {
            k -= 1;
            let from = body + k * max;
            let len = (n - k * max).min(max);
            let to = from + k * HEADER_LEN;
            tx.copy_within(from..from + len, to);
        }
        let mut at = start;
        for k in 0..frames {
            let len = (n - k * max).min(max);
            let (kind, mut fl) = if k == 0 {
                (
                    FrameType::HEADERS,
                    if end_stream { flags::END_STREAM } else { 0 },
                )
            } else {
                (FrameType::CONTINUATION, 0)
            };
            if k + 1 == frames {
                fl |= flags::END_HEADERS;
            }
            let _ = frame::write_header(&mut tx[at..], len, kind, fl, id);
            at += HEADER_LEN + len;
        }
        self.tx_end = at;
        Ok(())
    }

    /// Writes an RST_STREAM into the transmit buffer, after the frames
    /// already there; falls back to the refusal queue when full.
    fn write_rst_in_order(&mut self, id: u32, code: ErrorCode) {
        self.compact_tx();
        if self.tx_end + HEADER_LEN + 4 <= BUF && self.hold(FrameBuffer::Transmit) {
            let at = self.tx_end;
            let tx = self.bufs.get_mut(FrameBuffer::Transmit);
            let _ = frame::write_header(&mut tx[at..], 4, FrameType::RST_STREAM, 0, id);
            tx[at + HEADER_LEN..at + HEADER_LEN + 4].copy_from_slice(&code.0.to_be_bytes());
            self.tx_end += HEADER_LEN + 4;
        } else {
            self.refuse_quietly(id, code);
        }
    }

    /// Sends DATA: as much of `data` as the flow-control windows, the peer's
    /// frame size and the transmit buffer allow. Returns the octets taken;
    /// when fewer than offered, [`Event::SendReady`] follows once more can
    /// go. `end_stream` applies only when all of `data` is taken. An empty
    /// `data` with `end_stream` that finds no room for its frame is
    /// [`StreamError::TransmitFull`], and `SendReady` follows.
    pub fn send_data(
        &mut self,
        stream: StreamRef,
        data: &[u8],
        end_stream: bool,
    ) -> Result<usize, StreamError> {
        if self.quiet(stream) {
            return Ok(data.len());
        }
        let slot = self.slot_of(stream).ok_or(StreamError::UnknownStream)?;
        let s = self.slots[slot].stream.ok_or(StreamError::UnknownStream)?;
        match s.send {
            Half::Idle => return Err(StreamError::InvalidState),
            Half::Ended => return Err(StreamError::AlreadyEnded),
            Half::Open => {}
        }
        if matches!(self.state, State::Closed | State::Failed) {
            return Err(StreamError::ConnectionClosed);
        }
        self.compact_tx();
        let max = self.remote.max_frame_size as usize;
        let mut taken = 0;
        let mut ended = false;
        // Without the buffer, as if it were full (see `buffers`).
        let held = self.hold(FrameBuffer::Transmit);
        let mut out_of_room = !held;
        let mut window = s.send_window.min(self.conn_send_window).max(0) as usize;
        loop {
            if !held {
                break;
            }
            let left = data.len() - taken;
            // Room for a frame header, and for a trailing RST_STREAM of an
            // early response.
            let Some(room) = BUF.checked_sub(self.tx_end + HEADER_LEN + HEADER_LEN + 4) else {
                out_of_room = true;
                break;
            };
            out_of_room = room < left.min(window).min(max);
            let n = left.min(window).min(max).min(room);
            let last = n == left;
            if n == 0 && !(last && end_stream) {
                break;
            }
            ended = last && end_stream;
            let at = self.tx_end;
            let fl = if last && end_stream {
                flags::END_STREAM
            } else {
                0
            };
            let tx = self.bufs.get_mut(FrameBuffer::Transmit);
            let _ = frame::write_header(&mut tx[at..], n, FrameType::DATA, fl, s.id);
            tx[at + HEADER_LEN..at + HEADER_LEN + n].copy_from_slice(&data[taken..taken + n]);
            self.tx_end += HEADER_LEN + n;
            taken += n;
            window -= n;
            if last {
                break;
            }
        }
        let n64 = taken as i64;
        self.conn_send_window -= n64;
        let all = taken == data.len() && (ended || !end_stream);
        if let Some(st) = self.slots[slot].stream.as_mut() {
            st.send_window -= n64;
            if !all && out_of_room {
                st.want_tx = true;
                self.some_want_tx = true;
            } else if !all {
                st.send_blocked = true;
                self.some_send_blocked = true;
            } else if end_stream {
                st.send = Half::Ended;
            }
        }
        if all && end_stream {
            self.on_send_end(slot);
        }
        if data.is_empty() && end_stream && !ended {
            // Nothing to count in octets: say plainly that the stream did
            // not end yet.
            return Err(StreamError::TransmitFull);
        }
        Ok(taken)
    }

    /// How many octets `send_data` would take now on this stream.
    pub fn send_capacity(&self, stream: StreamRef) -> usize {
        let Some(s) = self.stream(stream) else {
            return 0;
        };
        let window = s.send_window.min(self.conn_send_window).max(0) as usize;
        window.min(BUF.saturating_sub(self.tx_end - self.tx_start + 2 * HEADER_LEN + 4))
    }

    /// Resets a stream (RST_STREAM with `code`, usually CANCEL). A client
    /// stream whose headers have not gone out is dropped without a trace.
    pub fn reset(&mut self, stream: StreamRef, code: ErrorCode) -> Result<(), StreamError> {
        if self.quiet(stream) {
            return Ok(());
        }
        let slot = self.slot_of(stream).ok_or(StreamError::UnknownStream)?;
        let Some(s) = self.slots[slot].stream else {
            return Err(StreamError::UnknownStream);
        };
        if s.id == 0 {
            self.free_slot_now(slot);
            return Ok(());
        }
        // A client whose response already ended keeps it: the reset only
        // stops the request.
        if self.role == Role::Client && s.recv == Half::Ended {
            self.slots[slot].quiet_previous = true;
        }
        self.remember_reset(s.id);
        self.write_rst_in_order(s.id, code);
        // The application ended it itself: no event.
        self.free_slot_now(slot);
        Ok(())
    }

    // ----------------------------------------------------------------
    // Transmit
    // ----------------------------------------------------------------

    fn compact_tx(&mut self) {
        if self.tx_start == self.tx_end {
            self.tx_start = 0;
            self.tx_end = 0;
            self.tx_frame_end = 0;
        } else if self.tx_start > 0 {
            // A partly written frame moves too: its end moves with it.
            let (start, end) = (self.tx_start, self.tx_end);
            self.bufs
                .get_mut(FrameBuffer::Transmit)
                .copy_within(start..end, 0);
            self.tx_end -= self.tx_start;
            self.tx_frame_end = self.tx_frame_end.saturating_sub(self.tx_start);
            self.tx_start = 0;
        }
    }

    /// Whether `poll_transmit` has anything to write.
    pub fn wants_transmit(&self) -> bool {
        self.stage_len > 0
            || self.send_preface
            || self.settings_acks_owed > 0
            || self.ping_acks_len > 0
            || self.goaway_owed.is_some()
            || self.refusals_len > 0
            || self.tx_start < self.tx_end
            || (self.state != State::Closed
                && (self.connection_update_due()
                    || self
                        .slots
                        .iter()
                        .any(|s| s.stream.is_some_and(|st| self.stream_update_due(&st)))))
    }

    /// Writes pending frames into `out`; returns the octets written. Call
    /// until it returns 0; any buffer size works, a frame that does not fit
    /// is continued on the next call. Control frames (acknowledgements,
    /// GOAWAY, refusals, window updates) go before queued HEADERS and DATA,
    /// but never inside a frame that is partly written.
    pub fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        let mut w = self.flush_stage(out);
        if self.stage_pos < self.stage_len {
            return w;
        }
        // Finish a frame that is partly written first.
        if self.tx_frame_end > self.tx_start {
            w += self.copy_tx(&mut out[w..], self.tx_frame_end);
            if self.tx_frame_end > self.tx_start {
                return w;
            }
        }
        if self.send_preface {
            self.send_preface = false;
            let mut frame = [0u8; STAGE];
            let mut n = 0;
            if self.role == Role::Client {
                frame[..PREFACE.len()].copy_from_slice(PREFACE);
                n = PREFACE.len();
            }
            let (settings, len) = self.initial_settings();
            frame[n..n + len].copy_from_slice(&settings[..len]);
            n += len;
            let increment = self.config.connection_window_size.saturating_sub(65_535);
            if increment > 0 {
                n += put_window_update(&mut frame[n..], 0, increment);
            }
            if !self.put_control(out, &mut w, &frame[..n]) {
                return w;
            }
        }
        while self.settings_acks_owed > 0 {
            let mut frame = [0u8; HEADER_LEN];
            let _ = frame::write_header(&mut frame, 0, FrameType::SETTINGS, flags::ACK, 0);
            self.settings_acks_owed -= 1;
            if !self.put_control(out, &mut w, &frame) {
                return w;
            }
        }
        while self.ping_acks_len > 0 {
            let payload = self.ping_acks[0];
            self.ping_acks.copy_within(1.., 0);
            self.ping_acks_len -= 1;
            let mut frame = [0u8; HEADER_LEN + 8];
            let _ = frame::write_header(&mut frame, 8, FrameType::PING, flags::ACK, 0);
            frame[HEADER_LEN..].copy_from_slice(&payload);
            if !self.put_control(out, &mut w, &frame) {
                return w;
            }
        }
        if let Some((last, code, reason)) = self.goaway_owed.take() {
            let debug = &reason.as_bytes()[..reason.len().min(MAX_DEBUG)];
            let len = 8 + debug.len();
            let mut frame = [0u8; STAGE];
            let _ = frame::write_header(&mut frame, len, FrameType::GOAWAY, 0, 0);
            frame[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&last.to_be_bytes());
            frame[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&code.0.to_be_bytes());
            frame[HEADER_LEN + 8..HEADER_LEN + len].copy_from_slice(debug);
            let all = self.put_control(out, &mut w, &frame[..HEADER_LEN + len]);
            if self.state == State::Closed && code != ErrorCode::NO_ERROR {
                // After an error GOAWAY nothing else is sent.
                self.tx_start = 0;
                self.tx_end = 0;
                self.tx_frame_end = 0;
                self.bufs.release(FrameBuffer::Transmit);
                self.refusals_len = 0;
                return w;
            }
            if !all {
                return w;
            }
        }
        while self.refusals_len > 0 {
            let (id, code) = self.refusals[0];
            self.refusals.copy_within(1.., 0);
            self.refusals_len -= 1;
            let mut frame = [0u8; HEADER_LEN + 4];
            let _ = frame::write_header(&mut frame, 4, FrameType::RST_STREAM, 0, id);
            frame[HEADER_LEN..].copy_from_slice(&code.0.to_be_bytes());
            if !self.put_control(out, &mut w, &frame) {
                return w;
            }
        }
        if self.state == State::Closed {
            // Flush what is queued, open no windows.
            w += self.copy_tx_frames(&mut out[w..]);
            if self.tx_start == self.tx_end {
                self.tx_start = 0;
                self.tx_end = 0;
                self.tx_frame_end = 0;
                self.bufs.release(FrameBuffer::Transmit);
            }
            return w;
        }
        if self.connection_update_due() {
            let n = self.conn_release_owed.min(MAX_WINDOW);
            self.conn_release_owed -= n;
            self.conn_recv_window += i64::from(n);
            let mut frame = [0u8; HEADER_LEN + 4];
            put_window_update(&mut frame, 0, n);
            if !self.put_control(out, &mut w, &frame) {
                return w;
            }
        }
        for slot in 0..self.slots.len() {
            let Some(s) = self.slots[slot].stream else {
                continue;
            };
            if self.stream_update_due(&s) {
                if let Some(st) = self.slots[slot].stream.as_mut() {
                    st.recv_window += i64::from(st.release_owed);
                    st.release_owed = 0;
                }
                let mut frame = [0u8; HEADER_LEN + 4];
                put_window_update(&mut frame, s.id, s.release_owed);
                if !self.put_control(out, &mut w, &frame) {
                    return w;
                }
            }
        }
        w += self.copy_tx_frames(&mut out[w..]);
        if self.tx_start == self.tx_end {
            self.tx_start = 0;
            self.tx_end = 0;
            self.tx_frame_end = 0;
            // Streams that wait for room wake with the buffer held (it may
            // have been refused to them); otherwise it goes back.
            if self.some_want_tx && self.hold(FrameBuffer::Transmit) {
                self.some_want_tx = false;
                for slot in 0..self.slots.len() {
                    if let Some(s) = self.slots[slot].stream.as_mut()
                        && core::mem::replace(&mut s.want_tx, false)
                    {
                        self.mark_ready(slot);
                    }
                }
            } else if !self.some_want_tx {
                self.bufs.release(FrameBuffer::Transmit);
            }
            if self.some_send_blocked {
                self.wake_blocked();
            }
        }
        w
    }

    /// Writes a control frame: whole into `out` if it fits, else as much as
    /// fits with the rest kept for the next call. Returns false when `out`
    /// is full (the caller stops; the frame was taken either way).
    fn put_control(&mut self, out: &mut [u8], w: &mut usize, frame: &[u8]) -> bool {
        let room = out.len() - *w;
        if frame.len() <= room {
            out[*w..*w + frame.len()].copy_from_slice(frame);
            *w += frame.len();
            return true;
        }
        self.stage[..frame.len()].copy_from_slice(frame);
        self.stage_len = frame.len();
        self.stage_pos = 0;
        *w += self.flush_stage(&mut out[*w..]);
        false
    }

    fn flush_stage(&mut self, out: &mut [u8]) -> usize {
        let n = (self.stage_len - self.stage_pos).min(out.len());
        out[..n].copy_from_slice(&self.stage[self.stage_pos..self.stage_pos + n]);
        self.stage_pos += n;
        if self.stage_pos == self.stage_len {
            self.stage_pos = 0;
            self.stage_len = 0;
        }
        n
    }

    /// Copies whole frames from the transmit buffer, and the start of the
    /// next one if `out` ends inside it.
    fn copy_tx_frames(&mut self, out: &mut [u8]) -> usize {
        let mut w = 0;
        while self.tx_start < self.tx_end && w < out.len() {
            let Some(head) = self
                .bufs
                .get(FrameBuffer::Transmit)
                .get(self.tx_start..self.tx_start + HEADER_LEN)
            else {
                break;
            };
            let len =
                (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            self.tx_frame_end = self.tx_start + HEADER_LEN + len;
            w += self.copy_tx(&mut out[w..], self.tx_frame_end);
        }
        w
    }

    fn copy_tx(&mut self, out: &mut [u8], until: usize) -> usize {
        let n = (until - self.tx_start).min(out.len());
        out[..n].copy_from_slice(
            &self.bufs.get(FrameBuffer::Transmit)[self.tx_start..self.tx_start + n],
        );
        self.tx_start += n;
        n
    }

    fn initial_settings(&self) -> ([u8; 6 * 6 + HEADER_LEN], usize) {
        let mut buf = [0u8; 6 * 6 + HEADER_LEN];
        let params = [
            Setting {
                id: Setting::HEADER_TABLE_SIZE,
                value: self.local.header_table_size,
            },
            Setting {
                id: Setting::ENABLE_PUSH,
                value: 0,
            },
            Setting {
                id: Setting::MAX_CONCURRENT_STREAMS,
                value: self.local.max_concurrent_streams,
            },
            Setting {
                id: Setting::INITIAL_WINDOW_SIZE,
                value: self.local.initial_window_size,
            },
            Setting {
                id: Setting::MAX_FRAME_SIZE,
                value: self.local.max_frame_size,
            },
            Setting {
                id: Setting::MAX_HEADER_LIST_SIZE,
                value: self.local.max_header_list_size,
            },
        ];
        let mut n = HEADER_LEN;
        for p in params {
            // A server does not send ENABLE_PUSH (RFC 9113 §6.5.2 allows it,
            // but only the client's value means anything).
            if p.id == Setting::ENABLE_PUSH && self.role == Role::Server {
                continue;
            }
            buf[n..n + 6].copy_from_slice(&p.emit());
            n += 6;
        }
        let _ = frame::write_header(&mut buf, n - HEADER_LEN, FrameType::SETTINGS, 0, 0);
        (buf, n)
    }
}

fn put_window_update(out: &mut [u8], id: u32, increment: u32) -> usize {
    let _ = frame::write_header(out, 4, FrameType::WINDOW_UPDATE, 0, id);
    out[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&increment.to_be_bytes());
    HEADER_LEN + 4
}
