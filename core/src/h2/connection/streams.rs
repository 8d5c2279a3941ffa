//! The stream table: slots, their generations (what keeps a [`StreamRef`]
//! from reaching the next stream of its slot), stream states (RFC 9113
//! §5.1), stream ids and their rules (§5.1.1), the concurrency counts
//! (§5.1.2) and the streams this end reset lately.

use super::super::config::Role;
use super::events::{Queued, Terminal};
use super::limits::Limit;
use super::{ConnResult, Connection, StreamRef};
use crate::h2::{ErrorCode, Storage};
use crate::records::Records;

/// Gaps in the peer's stream ids remembered (peers rarely skip ids).
const SKIPPED: usize = 4;

/// One direction of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Half {
    /// Headers not yet sent or received.
    Idle,
    Open,
    Ended,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Stream {
    /// 0 until a client stream's HEADERS are written.
    pub(super) id: u32,
    pub(super) send: Half,
    pub(super) recv: Half,
    /// A final response has arrived (client) or the request head (server).
    pub(super) head_received: bool,
    pub(super) send_window: i64,
    pub(super) recv_window: i64,
    /// Consumed by the application, not yet returned in a WINDOW_UPDATE.
    pub(super) release_owed: u32,
    pub(super) content_length: Option<u64>,
    pub(super) data_received: u64,
    /// `send_data` took less than offered; `SendReady` is owed.
    pub(super) send_blocked: bool,
    /// A send stopped for room in the transmit buffer: `SendReady` is owed
    /// when it drains, window or not (an empty END_STREAM needs none).
    pub(super) want_tx: bool,
    /// Counts against a MAX_CONCURRENT_STREAMS.
    pub(super) counted: bool,
    /// The application knows the handle (a Headers event went out, or it
    /// opened the stream): it gets the stream's last event.
    pub(super) announced: bool,
    /// `SendReady` is owed.
    pub(super) ready: bool,
    /// DATA octets handed out and not yet released; returned to the
    /// connection window when the stream ends.
    pub(super) unreleased: u32,
    /// Marked by `drain_after_response`: after an early response, the
    /// rest of the request body is read and dropped (up to the discard
    /// budget in all) instead of being stopped with RST_STREAM(NO_ERROR).
    pub(super) drain: bool,
}

impl Stream {
    /// A stream in the idle state with the given windows.
    fn new(id: u32, send_window: i64, recv_window: i64) -> Self {
        Stream {
            id,
            send: Half::Idle,
            recv: Half::Idle,
            head_received: false,
            send_window,
            recv_window,
            release_owed: 0,
            content_length: None,
            data_received: 0,
            send_blocked: false,
            want_tx: false,
            counted: false,
            announced: false,
            ready: false,
            unreleased: 0,
            drain: false,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Slot {
    generation: u16,
    /// The previous generation of this slot ended with a complete response
    /// followed by a reset: sends on its handle are accepted and dropped.
    pub(super) quiet_previous: bool,
    pub(super) stream: Option<Stream>,
    /// The last event of the stream that used this slot, with its handle.
    pub(super) pending: Option<(StreamRef, Terminal)>,
}

/// The streams of a connection, in `STREAMS` slots (`S`), and the ids of
/// the last `RESETS` streams this end reset (`R`).
pub(super) struct StreamTable<const STREAMS: usize, const RESETS: usize, S, R> {
    pub(super) slots: S,
    role: Role,
    /// The highest stream id the peer opened.
    pub(super) last_peer_id: u32,
    pub(super) next_local_id: u32,
    /// Streams open and counted against a MAX_CONCURRENT_STREAMS, opened by
    /// the peer and by this end.
    pub(super) peer_streams: u32,
    pub(super) local_streams: u32,
    resets: R,
    resets_next: usize,
    /// Ranges of peer stream ids skipped over, never opened (newest first).
    skipped: [(u32, u32); SKIPPED],
    /// Per-slot events waiting (terminal events and SendReady flags).
    pub(super) slot_events: u32,
    /// Some stream waits for window (`Stream::send_blocked`).
    pub(super) some_send_blocked: bool,
    /// Some stream waits for room in the transmit buffer
    /// (`Stream::want_tx`).
    pub(super) some_want_tx: bool,
    /// `open_stream` met the peer's limit: `StreamsAvailable` is owed.
    pub(super) streams_wanted: bool,
}

impl<const STREAMS: usize, const RESETS: usize, S: Records<Slot>, R: Records<u32>>
    StreamTable<STREAMS, RESETS, S, R>
{
    pub(super) fn new(role: Role) -> Self {
        Self {
            slots: S::default(),
            role,
            last_peer_id: 0,
            next_local_id: if role == Role::Client { 1 } else { 2 },
            peer_streams: 0,
            local_streams: 0,
            resets: R::default(),
            resets_next: 0,
            skipped: [(0, 0); SKIPPED],
            slot_events: 0,
            some_send_blocked: false,
            some_want_tx: false,
            streams_wanted: false,
        }
    }

    pub(super) fn peer_initiated(&self, id: u32) -> bool {
        let odd = id % 2 == 1;
        match self.role {
            Role::Server => odd,
            Role::Client => !odd,
        }
    }

    /// A stream id in the idle state: never opened by either side.
    pub(super) fn is_idle(&self, id: u32) -> bool {
        if self.peer_initiated(id) {
            id > self.last_peer_id
        } else {
            id >= self.next_local_id
        }
    }

    /// The peer opened `id`, leaving ids below it unused: remember the gap,
    /// so that a later HEADERS there is told from one on a closed stream.
    pub(super) fn note_skipped(&mut self, id: u32) {
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

    pub(super) fn was_skipped(&self, id: u32) -> bool {
        self.skipped
            .iter()
            .any(|&(a, b)| a <= id && id <= b && a != 0)
    }

    pub(super) fn was_reset(&self, id: u32) -> bool {
        id != 0 && self.resets.contains(&id)
    }

    pub(super) fn remember_reset(&mut self, id: u32) {
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

    /// The slot of the live stream `id`.
    pub(super) fn find(&self, id: u32) -> Option<usize> {
        if id == 0 {
            return None;
        }
        self.slots
            .iter()
            .position(|s| s.stream.is_some_and(|st| st.id == id))
    }

    /// A slot with no stream and no event waiting to be read; a new one
    /// when every slot is taken and the storage has room for more.
    pub(super) fn free_slot(&mut self) -> Option<usize> {
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
    pub(super) fn has_free_slot(&self) -> bool {
        self.slots.len() < STREAMS
            || self
                .slots
                .iter()
                .any(|s| s.stream.is_none() && s.pending.is_none())
    }

    /// Puts a new stream in a free slot.
    pub(super) fn occupy(&mut self, slot: usize, stream: Stream) {
        self.slots[slot].stream = Some(stream);
        self.slots[slot].quiet_previous = false;
    }

    /// The handle of the stream in `slot`.
    pub(super) fn handle(&self, slot: usize) -> StreamRef {
        StreamRef {
            slot: slot as u16,
            generation: self.slots[slot].generation,
        }
    }

    /// The slot of a live handle.
    pub(super) fn slot_of(&self, stream: StreamRef) -> Option<usize> {
        let slot = usize::from(stream.slot);
        let s = self.slots.get(slot)?;
        (s.generation == stream.generation && s.stream.is_some()).then_some(slot)
    }

    pub(super) fn stream(&self, stream: StreamRef) -> Option<&Stream> {
        self.slot_of(stream)
            .and_then(|slot| self.slots[slot].stream.as_ref())
    }

    /// The stream in `slot`, if it is live.
    pub(super) fn get(&self, slot: usize) -> Option<Stream> {
        self.slots.get(slot).and_then(|s| s.stream)
    }

    pub(super) fn get_mut(&mut self, slot: usize) -> Option<&mut Stream> {
        self.slots.get_mut(slot).and_then(|s| s.stream.as_mut())
    }

    /// Whether sends on this handle are dropped without error: its response
    /// ended and a reset followed (the binding's early-response rule).
    pub(super) fn quiet(&self, stream: StreamRef) -> bool {
        let slot = usize::from(stream.slot);
        self.slots
            .get(slot)
            .is_some_and(|s| s.quiet_previous && s.generation == stream.generation.wrapping_add(1))
    }

    /// Owes the stream a `SendReady` event.
    pub(super) fn mark_ready(&mut self, slot: usize) {
        if let Some(s) = self.slots[slot].stream.as_mut()
            && !s.ready
        {
            s.ready = true;
            self.slot_events += 1;
        }
    }

    pub(super) fn has_streams(&self) -> bool {
        self.slots.iter().any(|s| s.stream.is_some())
    }

    /// Takes the stream out of its slot, which moves to its next generation;
    /// a `SendReady` it was owed goes with it.
    pub(super) fn take(&mut self, slot: usize) -> Option<Stream> {
        let sl = self.slots.get_mut(slot)?;
        let s = sl.stream.take()?;
        sl.generation = sl.generation.wrapping_add(1);
        if s.ready {
            self.slot_events -= 1;
        }
        Some(s)
    }

    /// Drops every stream without an event (the connection closed).
    pub(super) fn clear(&mut self) {
        for slot in 0..self.slots.len() {
            self.take(slot);
        }
        self.peer_streams = 0;
        self.local_streams = 0;
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
    /// A new stream with the windows in force.
    pub(super) fn new_stream(&self, id: u32) -> Stream {
        let send_window = i64::from(self.settings.remote.initial_window_size);
        Stream::new(id, send_window, self.initial_recv_window())
    }

    /// A new stream's receive window. Until the peer acknowledges our
    /// SETTINGS it may still count with the default 65,535 (RFC 9113 §6.9.3).
    fn initial_recv_window(&self) -> i64 {
        let ours = i64::from(self.settings.local.initial_window_size);
        if self.settings.local_acked {
            ours
        } else {
            ours.max(65_535)
        }
    }

    pub(super) fn open_peer_stream(&mut self, id: u32) -> Option<usize> {
        let slot = self.streams.free_slot()?;
        let mut s = self.new_stream(id);
        s.counted = true;
        self.streams.peer_streams += 1;
        self.streams.occupy(slot, s);
        self.idle_deadline = None;
        Some(slot)
    }

    /// Refuses or resets a stream that has no slot.
    pub(super) fn refuse(&mut self, id: u32, code: ErrorCode) {
        self.streams.remember_reset(id);
        self.control.push_refusal(id, code);
    }

    /// The peer broke a rule of one stream: reset it (RFC 9113 §5.4.2).
    /// The RST_STREAM goes after any frame of the stream already queued.
    pub(super) fn stream_error(&mut self, slot: usize, code: ErrorCode) -> ConnResult {
        self.count(Limit::Resets, "too many stream errors")?;
        let Some(s) = self.streams.get(slot) else {
            return Ok(());
        };
        self.streams.remember_reset(s.id);
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

    /// Marks the receive half ended; the stream closes when both are.
    pub(super) fn end_recv(&mut self, slot: usize) {
        if let Some(s) = self.streams.get_mut(slot) {
            s.recv = Half::Ended;
            if s.send == Half::Ended {
                self.finish_stream(slot);
            }
        }
    }

    /// Both halves ended cleanly.
    pub(super) fn finish_stream(&mut self, slot: usize) {
        self.end_stream_with(slot, Terminal::Closed);
    }

    /// Ends a stream: its slot frees now (frames of it still in the transmit
    /// buffer carry its id, not its slot), and if the application knows the
    /// stream, `event` waits in the slot until it is read.
    pub(super) fn end_stream_with(&mut self, slot: usize, event: Terminal) {
        let Some(s) = self.streams.get(slot) else {
            return;
        };
        if s.announced {
            let stream = self.streams.handle(slot);
            self.streams.slots[slot].pending = Some((stream, event));
            self.streams.slot_events += 1;
        }
        self.free_slot_now(slot);
    }

    /// Frees a slot without an event. DATA the application has not released
    /// returns to the connection window with it.
    pub(super) fn free_slot_now(&mut self, slot: usize) {
        let Some(s) = self.streams.take(slot) else {
            return;
        };
        self.flow.release(s.unreleased);
        if !self.streams.has_streams() {
            self.idle_deadline = self.config.idle_timeout.map(|t| self.now + t);
        }
        if s.counted {
            if self.streams.peer_initiated(s.id) {
                self.streams.peer_streams -= 1;
            } else {
                self.streams.local_streams -= 1;
                if self.streams.streams_wanted {
                    self.streams.streams_wanted = false;
                    self.events.push(Queued::StreamsAvailable);
                }
            }
        }
        self.maybe_close_drained();
    }
}
