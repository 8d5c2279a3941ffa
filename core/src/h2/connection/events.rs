//! What the application learns: [`Event`], the queue of connection-level
//! events, [`Connection::poll_event`], which also hands out the last event
//! of each stream and its `SendReady` wake-ups from the stream slots (so
//! that no queue has to hold one per stream), and [`Connection::headers`],
//! which lends the header list of the last `Headers` event.
//!
//! Events are small owned values that never borrow the connection, so a
//! driver can hold one while it calls back into the connection; the header
//! list stays in the connection's headers buffer and is read through the
//! accessor.

use super::super::ConnectionError;
use super::super::headers::{HeaderList, HeadersKind};
use super::{Connection, StreamRef};
use crate::h2::{ErrorCode, FrameBuffer, Storage};

/// Something the application must learn about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A header block arrived on a stream. For a server, a `Request` on a
    /// stream it has not seen yet is a new stream. Its fields are read with
    /// [`Connection::headers`]`(stream)` before the next `poll_event` or
    /// `recv`.
    Headers {
        stream: StreamRef,
        kind: HeadersKind,
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
pub(super) enum Queued {
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
pub(super) enum Terminal {
    Reset { code: ErrorCode, remote: bool },
    Closed,
}

const EVENT_QUEUE: usize = 16;
/// `recv` pauses when fewer event slots than this are free, so that one
/// frame's events always fit.
const EVENT_HEADROOM: usize = 4;

/// The connection-level events, oldest first.
#[derive(Debug)]
pub(super) struct EventQueue {
    items: [Option<Queued>; EVENT_QUEUE],
    head: u8,
    len: u8,
}

impl EventQueue {
    pub(super) const fn new() -> Self {
        Self {
            items: [None; EVENT_QUEUE],
            head: 0,
            len: 0,
        }
    }

    fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Too full for another frame's events: `recv` stops.
    pub(super) fn needs_draining(&self) -> bool {
        self.len() + EVENT_HEADROOM > EVENT_QUEUE
    }

    pub(super) fn push(&mut self, e: Queued) {
        // Wake-ups are idempotent: one queued is enough.
        if matches!(e, Queued::StreamsAvailable)
            && self.iter().any(|q| matches!(q, Queued::StreamsAvailable))
        {
            return;
        }
        if self.len() == EVENT_QUEUE {
            // recv pauses before the queue can fill, and per-stream events
            // wait in their slots; only an application that never drains
            // events gets here, and it loses the newest.
            return;
        }
        let at = (usize::from(self.head) + self.len()) % EVENT_QUEUE;
        self.items[at] = Some(e);
        self.len += 1;
    }

    /// Queues the closing event, which must fit even in a full queue.
    pub(super) fn push_last(&mut self, e: Queued) {
        if self.len() == EVENT_QUEUE {
            self.len -= 1;
        }
        self.push(e);
    }

    fn iter(&self) -> impl Iterator<Item = &Queued> {
        (0..self.len())
            .filter_map(|i| self.items[(usize::from(self.head) + i) % EVENT_QUEUE].as_ref())
    }

    /// The stream whose `Headers` event is queued, if any: its last event
    /// must wait until that one is read.
    fn headers_waiting(&self) -> Option<StreamRef> {
        self.iter().find_map(|q| match q {
            Queued::Headers { stream, .. } => Some(*stream),
            _ => None,
        })
    }

    fn front(&self) -> Option<&Queued> {
        if self.len == 0 {
            return None;
        }
        self.items[usize::from(self.head)].as_ref()
    }

    fn pop(&mut self) -> Option<Queued> {
        if self.len == 0 {
            return None;
        }
        let e = self.items[usize::from(self.head)].take()?;
        self.head = ((usize::from(self.head) + 1) % EVENT_QUEUE) as u8;
        self.len -= 1;
        Some(e)
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
    /// The next event, if any. The fields of a `Headers` event are read with
    /// [`Connection::headers`], before the next call that takes `&mut self`.
    ///
    /// Order: a stream's events come in the order they happened; events of
    /// different streams may be reordered; `ConnectionClosed` is always last.
    ///
    /// Call it until `None` after every other call on the connection. Reading
    /// an event can let a stopped `recv` go on (see [`Stop::Events`]).
    ///
    /// [`Stop::Events`]: super::Stop::Events
    pub fn poll_event(&mut self) -> Option<Event> {
        self.free_read_store();
        if self.streams.slot_events > 0
            && let Some(e) = self.poll_slot_event()
        {
            return Some(e);
        }
        // `ConnectionClosed` waits for every stream's last event.
        if matches!(self.events.front(), Some(Queued::ConnectionClosed { .. }))
            && self.streams.slot_events > 0
        {
            return None;
        }
        Some(match self.events.pop()? {
            Queued::Headers {
                stream,
                kind,
                end_stream,
            } => {
                self.block.lend(stream);
                Event::Headers {
                    stream,
                    kind,
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

    /// The decoded header list of the [`Event::Headers`] of `stream` that
    /// [`Connection::poll_event`] just returned; `None` for any other stream,
    /// or once the list was given back.
    ///
    /// The list lives in the connection's headers buffer (see
    /// [`storage`](crate::h2::storage)), which is given back when the event
    /// that lent it was read: read the list before the next call that takes
    /// `&mut self` (the next `poll_event` or `recv` frees it, and the borrow
    /// checker holds the driver to that). To keep fields longer, copy them,
    /// for instance with [`HeaderList::as_bytes`].
    pub fn headers(&self, stream: StreamRef) -> Option<HeaderList<'_>> {
        self.block
            .lent_list(stream, self.bufs.get(FrameBuffer::Headers))
    }

    /// A per-stream event, unless the stream's Headers event is still queued
    /// (it must come first).
    fn poll_slot_event(&mut self) -> Option<Event> {
        let headers_waiting = self.events.headers_waiting();
        let streams = &mut self.streams;
        for slot in 0..streams.slots.len() {
            if let Some((stream, event)) = streams.slots[slot].pending {
                if headers_waiting == Some(stream) {
                    continue;
                }
                streams.slots[slot].pending = None;
                streams.slot_events -= 1;
                return Some(match event {
                    Terminal::Reset { code, remote } => Event::Reset {
                        stream,
                        code,
                        remote,
                    },
                    Terminal::Closed => Event::Closed { stream },
                });
            }
            let handle = streams.handle(slot);
            if let Some(s) = streams.get_mut(slot)
                && s.ready
                && headers_waiting != Some(handle)
            {
                s.ready = false;
                streams.slot_events -= 1;
                return Some(Event::SendReady { stream: handle });
            }
        }
        None
    }
}
