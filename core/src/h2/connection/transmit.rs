//! Output: [`Connection::poll_transmit`] and what it draws from, in order:
//! the staging area (a control frame that did not fit the caller's buffer),
//! the rest of a frame partly written, the owed control frames, window
//! updates, then the HEADERS, DATA and RST_STREAM frames queued in the
//! transmit buffer.

use super::super::frame::{self, FrameType, HEADER_LEN};
use super::{Connection, State};
use crate::h2::{FrameBuffer, Storage};

/// Room for the largest control frame: preface, SETTINGS and the first
/// WINDOW_UPDATE together (82 octets), or a GOAWAY with its reason.
pub(super) const STAGE: usize = 128;

/// Where the frames in the transmit buffer are.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Transmit {
    /// The first octet not yet handed out.
    pub(super) start: usize,
    /// The end of the queued frames.
    pub(super) end: usize,
    /// End of the frame at `start` that is partly written.
    frame_end: usize,
}

impl Transmit {
    /// Octets queued.
    pub(super) fn queued(&self) -> usize {
        self.end - self.start
    }
}

/// A control frame that did not fit the caller's buffer, partly written.
#[derive(Debug)]
pub(super) struct Stage {
    buf: [u8; STAGE],
    len: u8,
    pos: u8,
}

impl Stage {
    pub(super) const fn new() -> Self {
        Self {
            buf: [0; STAGE],
            len: 0,
            pos: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies what fits of the staged frame into `out`.
    fn flush(&mut self, out: &mut [u8]) -> usize {
        let (pos, len) = (usize::from(self.pos), usize::from(self.len));
        let n = (len - pos).min(out.len());
        out[..n].copy_from_slice(&self.buf[pos..pos + n]);
        if pos + n == len {
            self.pos = 0;
            self.len = 0;
        } else {
            self.pos += n as u8;
        }
        n
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
    /// Whether [`Connection::poll_transmit`] has anything to write: exactly
    /// when a `poll_transmit` with a non-empty buffer would write at least
    /// one octet. A driver may loop `while conn.wants_transmit()` around
    /// `poll_transmit`; the loop ends, and nothing is left behind.
    ///
    /// It can turn true after any call on the connection: `recv` (answers
    /// owed), `handle_timeout` (GOAWAY), `release_data` (a WINDOW_UPDATE
    /// due), `send_*`, `reset`, `go_away` and `abort`.
    pub fn wants_transmit(&self) -> bool {
        !self.stage.is_empty()
            || self.control.is_pending()
            || self.tx.start < self.tx.end
            || (self.state != State::Closed && self.any_update_due())
    }

    /// Writes pending frames into `out`; returns the octets written. Call
    /// until it returns 0 (or while [`Connection::wants_transmit`]); any
    /// buffer size works, a frame that does not fit is continued on the next
    /// call. Control frames (acknowledgements, GOAWAY, refusals, window
    /// updates) go before queued HEADERS and DATA, but never inside a frame
    /// that is partly written.
    ///
    /// Afterwards, drain [`Connection::poll_event`]: room in the transmit
    /// buffer can wake streams ([`Event::SendReady`](super::Event::SendReady)),
    /// and a `recv` that stopped with [`Stop::Transmit`](super::Stop::Transmit)
    /// can go on.
    pub fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
        let mut w = self.stage.flush(out);
        if !self.stage.is_empty() {
            return w;
        }
        // Finish a frame that is partly written first.
        if self.tx.frame_end > self.tx.start {
            w += self.copy_tx(&mut out[w..], self.tx.frame_end);
            if self.tx.frame_end > self.tx.start {
                return w;
            }
        }
        if !self.put_owed_control(out, &mut w) {
            return w;
        }
        if self.state == State::Closed {
            // Flush what is queued, open no windows.
            w += self.copy_tx_frames(&mut out[w..]);
            if self.tx.start == self.tx.end {
                self.drop_queued_frames();
            }
            return w;
        }
        if self.connection_update_due() {
            let n = self.flow.take_update();
            let mut frame = [0u8; HEADER_LEN + 4];
            put_window_update(&mut frame, 0, n);
            if !self.put_control(out, &mut w, &frame) {
                return w;
            }
        }
        for slot in 0..self.streams.slots.len() {
            let Some(s) = self.streams.get(slot) else {
                continue;
            };
            if self.stream_update_due(&s) {
                if let Some(st) = self.streams.get_mut(slot) {
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
        if self.tx.start == self.tx.end {
            self.tx = Transmit::default();
            // Streams that wait for room wake with the buffer held (it may
            // have been refused to them); otherwise it goes back.
            if self.streams.some_want_tx && self.hold(FrameBuffer::Transmit) {
                self.streams.some_want_tx = false;
                for slot in 0..self.streams.slots.len() {
                    if let Some(s) = self.streams.get_mut(slot)
                        && core::mem::replace(&mut s.want_tx, false)
                    {
                        self.streams.mark_ready(slot);
                    }
                }
            } else if !self.streams.some_want_tx {
                self.bufs.release(FrameBuffer::Transmit);
            }
            if self.streams.some_send_blocked {
                self.wake_blocked();
            }
        }
        w
    }

    /// Empties the transmit buffer and gives it back.
    pub(super) fn drop_queued_frames(&mut self) {
        self.tx = Transmit::default();
        self.bufs.release(FrameBuffer::Transmit);
    }

    /// Moves the queued frames to the start of the transmit buffer, to make
    /// room at its end.
    pub(super) fn compact_tx(&mut self) {
        let tx = &mut self.tx;
        if tx.start == tx.end {
            *tx = Transmit::default();
        } else if tx.start > 0 {
            // A partly written frame moves too: its end moves with it.
            self.bufs
                .get_mut(FrameBuffer::Transmit)
                .copy_within(tx.start..tx.end, 0);
            tx.end -= tx.start;
            tx.frame_end = tx.frame_end.saturating_sub(tx.start);
            tx.start = 0;
        }
    }

    /// Writes a control frame: whole into `out` if it fits, else as much as
    /// fits with the rest kept for the next call. Returns false when `out`
    /// is full (the caller stops; the frame was taken either way).
    pub(super) fn put_control(&mut self, out: &mut [u8], w: &mut usize, frame: &[u8]) -> bool {
        let room = out.len() - *w;
        if frame.len() <= room {
            out[*w..*w + frame.len()].copy_from_slice(frame);
            *w += frame.len();
            return true;
        }
        self.stage.buf[..frame.len()].copy_from_slice(frame);
        self.stage.len = frame.len() as u8;
        self.stage.pos = 0;
        *w += self.stage.flush(&mut out[*w..]);
        false
    }

    /// Copies whole frames from the transmit buffer, and the start of the
    /// next one if `out` ends inside it.
    fn copy_tx_frames(&mut self, out: &mut [u8]) -> usize {
        let mut w = 0;
        while self.tx.start < self.tx.end && w < out.len() {
            let start = self.tx.start;
            let Some(head) = self
                .bufs
                .get(FrameBuffer::Transmit)
                .get(start..start + HEADER_LEN)
            else {
                break;
            };
            let len =
                (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            self.tx.frame_end = start + HEADER_LEN + len;
            w += self.copy_tx(&mut out[w..], self.tx.frame_end);
        }
        w
    }

    fn copy_tx(&mut self, out: &mut [u8], until: usize) -> usize {
        let start = self.tx.start;
        let n = (until - start).min(out.len());
        out[..n].copy_from_slice(&self.bufs.get(FrameBuffer::Transmit)[start..start + n]);
        self.tx.start += n;
        n
    }
}

/// A WINDOW_UPDATE frame; returns its length.
pub(super) fn put_window_update(out: &mut [u8], id: u32, increment: u32) -> usize {
    let _ = frame::write_header(out, 4, FrameType::WINDOW_UPDATE, 0, id);
    out[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&increment.to_be_bytes());
    HEADER_LEN + 4
}
