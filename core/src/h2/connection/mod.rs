//! The HTTP/2 connection (RFC 9113), client or server, as a sans-IO state
//! machine over fixed buffers. [`Connection`]'s docs state the run loop a
//! driver follows and what the connection costs.
//!
//! # Inside
//!
//! One file a concept, each with the state it owns:
//!
//! - `reader`: the preface and frames read in stages (`FrameReader`);
//! - `header_block`: HEADERS/CONTINUATION joined and HPACK-decoded
//!   (`HeaderBlock`);
//! - `control`: SETTINGS, PING, GOAWAY, RST_STREAM received, and the control
//!   frames owed (`SettingsState`, `ControlQueue`);
//! - `flow`: windows and WINDOW_UPDATE (`FlowControl`);
//! - `streams`: slots, states and ids (`StreamTable`);
//! - `events`: [`Event`], its queue (`EventQueue`) and the header list
//!   lent by [`Connection::headers`];
//! - `send`: what the application sends;
//! - `transmit`: `poll_transmit` (`Transmit`, `Stage`);
//! - `limits`: the rate limits against floods (`Rates`).

mod control;
mod events;
mod flow;
mod header_block;
mod limits;
mod reader;
mod send;
mod streams;
mod transmit;

use super::config::{Config, Role};
use super::frame::{self, MAX_WINDOW};
use super::storage::{FrameBuffer, InlineStorage, Storage};
use super::{ConnectionError, ErrorCode};
use crate::hpack::{self, Decoder, Encoder};
use crate::time::Instant;

use control::{ControlQueue, Settings, SettingsState};
use events::{EventQueue, Queued};
use flow::FlowControl;
use header_block::HeaderBlock;
use limits::Rates;
use reader::FrameReader;
use streams::{Slot, StreamTable};
use transmit::{Stage, Transmit};

pub use events::Event;

/// A handle to a stream of a connection. It stays valid until the stream
/// ends; after that, operations on it fail with
/// [`StreamError::UnknownStream`](super::StreamError::UnknownStream).
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
    /// Why `recv` stopped consuming, and what the driver does before it
    /// feeds the rest.
    pub stop: Stop,
}

/// Why [`Connection::recv`] stopped consuming input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// All of the input was consumed.
    Consumed,
    /// A piece of DATA is in [`Received::data`]: hand it to the
    /// application, then feed the rest.
    Data,
    /// The event queue is full, or a `Headers` event whose header list is
    /// still in the buffer has not been read: drain
    /// [`Connection::poll_event`] (reading each list with
    /// [`Connection::headers`]), then feed the rest.
    Events,
    /// The answers the connection owes the peer (PING acknowledgements,
    /// RST_STREAM) fill their queue: call [`Connection::poll_transmit`]
    /// while [`Connection::wants_transmit`], then feed the rest.
    Transmit,
    /// The connection is over (failed, or closed): the input was discarded
    /// and counted as consumed. Drain `poll_event` and `poll_transmit`.
    Closed,
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

/// One HTTP/2 connection, client or server.
///
/// # The run loop
///
/// The driver owns the socket and the clock. Input goes in through
/// [`Connection::recv`], [`Connection::recv_eof`] and
/// [`Connection::handle_timeout`]; the application acts through
/// [`Connection::open_stream`], `send_headers`, `send_data`, `reset`,
/// `release_data`, `send_ping`, `go_away` and `abort`. Output comes out of
/// three polls:
///
/// - [`Connection::poll_event`]: drain it until `None` after **every** call
///   on the connection, polls included (`poll_transmit` can free room that
///   wakes a stream). Events are small owned values; the fields of an
///   [`Event::Headers`] are read with [`Connection::headers`] before the
///   next `poll_event` (or `recv`), which gives their buffer back;
/// - [`Connection::poll_transmit`]: call it while
///   [`Connection::wants_transmit`] is true (or until it gives 0) after every
///   call except `poll_event`: received frames owe answers, `release_data`
///   can make a WINDOW_UPDATE due, `handle_timeout` can end the connection
///   with a GOAWAY;
/// - [`Connection::poll_timeout`]: read it again after every call; when it
///   passes, call `handle_timeout`.
///
/// `recv` consumes input until it must stop, and [`Received::stop`] says why
/// and what to do before feeding the rest:
///
/// ```text
/// loop {
///     let r = conn.recv(&input[at..], now);
///     at += r.consumed;
///     match r.stop {
///         Stop::Data => { /* hand r.data to the application */ }
///         Stop::Events => { /* drain poll_event (and conn.headers(stream)) */ }
///         Stop::Transmit => { /* poll_transmit while wants_transmit */ }
///         Stop::Consumed | Stop::Closed => break,
///     }
///     // drain poll_event after every call in any case
/// }
/// ```
///
/// Then the driver writes what `poll_transmit` gives and sleeps until input
/// arrives or `poll_timeout` passes. [`Connection::is_closed`] tells it when
/// to close the socket.
///
/// # Memory
///
/// `Connection<STREAMS, TABLE, BUF, RESETS>` holds everything inline: the
/// stream table (`STREAMS` slots), the HPACK decoder table (`TABLE` bytes),
/// three buffers of `BUF` bytes (received header block, decoded header list,
/// frames waiting to be sent) and the ids of the last `RESETS` streams it
/// reset. DATA payloads are never buffered: they are handed out from the
/// input. `core::mem::size_of` is the whole cost.
///
/// The three `BUF` buffers, the slots and the table live in the trailing
/// type parameter, a [`Storage`] that defaults to [`InlineStorage`]. A
/// driver with an allocator can pass one that holds each buffer only while
/// it is in use and grows the slots and the table as they fill (see
/// [`storage`](super::storage) for when buffers are taken and given back,
/// and how the connection answers when one cannot be had). Slots are never
/// given back: a connection holds as many as it once had streams at once.
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
    error: Option<ConnectionError>,
    /// The last stream id of the GOAWAY we sent, and of the peer's.
    goaway_sent: Option<u32>,
    goaway_received: Option<u32>,
    /// The block, the header store and the transmit buffer.
    bufs: B,
    reader: FrameReader,
    block: HeaderBlock<TABLE, B::Records<u8, TABLE>>,
    streams: StreamTable<STREAMS, RESETS, B::Records<Slot, STREAMS>, B::Records<u32, RESETS>>,
    settings: SettingsState,
    flow: FlowControl,
    encoder: Encoder,
    tx: Transmit,
    stage: Stage,
    control: ControlQueue,
    events: EventQueue,
    rates: Rates,
    /// When the connection ends for want of a stream, while none is open:
    /// the handshake timeout from the start until the first, then the
    /// idle timeout from the last one's end.
    idle_deadline: Option<Instant>,
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
            .field("peer_streams", &self.streams.peer_streams)
            .field("local_streams", &self.streams.local_streams)
            .field("conn_send_window", &self.flow.send_window)
            .field("conn_recv_window", &self.flow.recv_window)
            .field("tx_pending", &self.tx.queued())
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
    /// and waits for the client preface. Call `poll_transmit` before waiting
    /// for input.
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
            error: None,
            goaway_sent: None,
            goaway_received: None,
            bufs: buffers,
            reader: FrameReader::new(role == Role::Server),
            block: HeaderBlock::new(decoder),
            streams: StreamTable::new(role),
            settings: SettingsState::new(local, now + config.settings_timeout),
            flow: FlowControl::new(config.connection_window_size),
            encoder: Encoder::new(),
            tx: Transmit::default(),
            stage: Stage::new(),
            control: ControlQueue::new(),
            events: EventQueue::new(),
            rates: Rates::default(),
            idle_deadline: config
                .handshake_timeout
                .or(config.idle_timeout)
                .map(|t| now + t),
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
        self.streams
            .stream(stream)
            .map(|s| s.id)
            .filter(|&id| id != 0)
    }

    /// The connection-level send window: DATA octets the peer accepts now.
    pub fn send_window(&self) -> i64 {
        self.flow.send_window
    }

    /// The connection-level receive window as it stands once the pending
    /// WINDOW_UPDATE goes out: what the peer may send before the application
    /// consumes more.
    pub fn recv_window(&self) -> i64 {
        self.flow.recv_window + i64::from(self.flow.release_owed)
    }

    /// Streams open from the peer's side and from ours.
    pub fn open_streams(&self) -> (u32, u32) {
        (self.streams.peer_streams, self.streams.local_streams)
    }

    // ----------------------------------------------------------------
    // Input
    // ----------------------------------------------------------------

    /// Feeds received octets. Returns how many were consumed, at most one
    /// piece of DATA payload borrowed from `input`, and why it stopped
    /// ([`Received::stop`]): all consumed, DATA handed out, events or owed
    /// frames to drain first, or the connection is over. Feed the rest of
    /// `input` again once the driver did what the [`Stop`] asks.
    ///
    /// Afterwards, drain [`Connection::poll_event`], then `poll_transmit`
    /// while [`Connection::wants_transmit`], and read
    /// [`Connection::poll_timeout`] again (the peer's SETTINGS ACK removes
    /// the deadline).
    pub fn recv<'i>(&mut self, input: &'i [u8], now: Instant) -> Received<'i> {
        self.now = now;
        self.free_read_store();
        let mut pos = 0;
        loop {
            if matches!(self.state, State::Failed | State::Closed) {
                // Nothing more is read from a failed connection (RFC 9113 §5.4.1).
                return Received {
                    consumed: input.len(),
                    data: None,
                    stop: Stop::Closed,
                };
            }
            if pos == input.len() {
                return Received {
                    consumed: pos,
                    data: None,
                    stop: Stop::Consumed,
                };
            }
            if let Some(stop) = self.must_pause() {
                return Received {
                    consumed: pos,
                    data: None,
                    stop,
                };
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
                            stop: Stop::Data,
                        };
                    }
                }
                Err((code, reason)) => {
                    self.fail(code, reason);
                }
            }
        }
    }

    /// Why `recv` cannot take another frame now, if it cannot: one frame's
    /// events or answers must always fit.
    fn must_pause(&self) -> Option<Stop> {
        if self.block.store_busy || self.events.needs_draining() {
            Some(Stop::Events)
        } else if self.control.is_full() {
            Some(Stop::Transmit)
        } else {
            None
        }
    }

    /// Tells the connection the transport reached end of file or failed.
    /// Afterwards, drain [`Connection::poll_event`]: `ConnectionClosed`
    /// follows the streams' last events.
    pub fn recv_eof(&mut self) {
        if !matches!(self.state, State::Closed) {
            if self.error.is_none() && self.streams.has_streams() {
                self.error = Some(ConnectionError::Local {
                    code: ErrorCode::CONNECT_ERROR,
                    reason: "transport closed",
                });
            }
            self.close();
        }
    }

    /// The next deadline, if any: call [`Connection::handle_timeout`] then.
    /// It changes after `recv` (the SETTINGS ACK arrived, a stream opened),
    /// when the last stream ends, and when the connection ends.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Open => match (self.settings.deadline, self.idle_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            State::Draining => self.settings.deadline,
            _ => None,
        }
    }

    /// Lets time pass. Afterwards, drain [`Connection::poll_event`] and
    /// `poll_transmit`: a passed SETTINGS deadline ends the connection with
    /// GOAWAY(SETTINGS_TIMEOUT); a connection idle past its idle (or
    /// handshake) timeout ends with GOAWAY(NO_ERROR).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if self.state == State::Open && self.idle_deadline.is_some_and(|at| now >= at) {
            self.go_away(ErrorCode::NO_ERROR);
        }
        if let Some(deadline) = self.settings.deadline
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

    // ----------------------------------------------------------------
    // Connection end
    // ----------------------------------------------------------------

    /// Starts a graceful shutdown: GOAWAY(`code`) with the last stream this
    /// end processed. Streams up to it finish; newer ones are refused. The
    /// connection closes when the last stream ends. Afterwards, drain
    /// `poll_event` and `poll_transmit`.
    pub fn go_away(&mut self, code: ErrorCode) {
        if self.state != State::Open {
            return;
        }
        let last = self.streams.last_peer_id;
        self.control.go_away(last, code, "");
        self.goaway_sent = Some(last);
        self.state = State::Draining;
        self.maybe_close_drained();
    }

    /// Ends the connection now: GOAWAY(`code`), then closed. Afterwards,
    /// drain `poll_event` and `poll_transmit`.
    pub fn abort(&mut self, code: ErrorCode, reason: &'static str) {
        self.fail(code, reason);
    }

    /// A connection error: GOAWAY with `code`, then nothing more is read.
    fn fail(&mut self, code: ErrorCode, reason: &'static str) {
        self.fail_with(ConnectionError::Local { code, reason }, code, reason);
    }

    fn fail_with(&mut self, error: ConnectionError, code: ErrorCode, reason: &'static str) {
        if matches!(self.state, State::Failed | State::Closed) {
            return;
        }
        let last = self.streams.last_peer_id;
        self.control.go_away(last, code, reason);
        self.goaway_sent = Some(last);
        self.error = Some(error);
        self.state = State::Failed;
        self.close();
    }

    /// Over: every stream dropped (their last events still wait in their
    /// slots), the receive buffers given back, `ConnectionClosed` queued.
    fn close(&mut self) {
        self.streams.clear();
        self.state = State::Closed;
        self.block.clear();
        self.bufs.release(FrameBuffer::Block);
        self.bufs.release(FrameBuffer::Headers);
        let error = self.error;
        self.events.push_last(Queued::ConnectionClosed { error });
    }

    fn maybe_close_drained(&mut self) {
        if self.state == State::Draining && !self.streams.has_streams() {
            self.close();
        }
    }
}
