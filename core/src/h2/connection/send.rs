//! What the application sends: streams opened (client), header blocks
//! as HEADERS and CONTINUATION (RFC 9113 §6.2, §6.10), DATA within the flow
//! control windows (§6.9), and RST_STREAM (§6.4); all written into the
//! transmit buffer for `poll_transmit`.

use super::super::config::Role;
use super::super::frame::{self, FrameType, HEADER_LEN, flags};
use super::streams::Half;
use super::{Connection, State};
use crate::h2::{ErrorCode, FrameBuffer, Storage, StreamError, StreamRef};
use crate::hpack::{self, Field};

impl<
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    const RESETS: usize,
    B: Storage<BUF>,
> Connection<STREAMS, TABLE, BUF, RESETS, B>
{
    /// Reserves a stream slot for a new request (client role). The stream
    /// gets its id only when its headers are written; a stream reset before
    /// that is never seen by the peer. Nothing goes out yet: no poll is
    /// owed. After [`StreamError::NoCapacity`], wait for a stream's
    /// `Closed` or `Reset` event.
    pub fn open_stream(&mut self) -> Result<StreamRef, StreamError> {
        if self.state != State::Open || self.goaway_received.is_some() {
            return Err(StreamError::ConnectionClosed);
        }
        let slot = self.streams.free_slot().ok_or(StreamError::NoCapacity)?;
        let mut s = self.new_stream(0);
        s.announced = true;
        self.streams.occupy(slot, s);
        self.idle_deadline = None;
        Ok(self.streams.handle(slot))
    }

    /// Sends a header block: the request or response head, or trailers
    /// (`end_stream` must then be set). Fails without side effects when the
    /// transmit buffer lacks room ([`StreamError::HeadersTooLarge`] says
    /// how much the block needs; retry after `poll_transmit`). After
    /// [`StreamError::ConcurrencyLimit`],
    /// [`Event::StreamsAvailable`](super::Event::StreamsAvailable) follows
    /// when a stream may open.
    ///
    /// Afterwards, call `poll_transmit` while
    /// [`Connection::wants_transmit`], and drain `poll_event` (a stream
    /// whose both halves ended is `Closed`).
    pub fn send_headers<'f, I>(
        &mut self,
        stream: StreamRef,
        fields: I,
        end_stream: bool,
    ) -> Result<(), StreamError>
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        self.send_headers_with(stream, fields, end_stream, None)
    }

    /// [`send_headers`](Self::send_headers), the block coded with the
    /// string literals `literals` keeps (a client's request heads repeat
    /// most of their names and values: see [`hpack::LiteralCache`]).
    pub fn send_headers_with<'f, I>(
        &mut self,
        stream: StreamRef,
        fields: I,
        end_stream: bool,
        literals: Option<&mut (dyn hpack::Literals + '_)>,
    ) -> Result<(), StreamError>
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        if self.streams.quiet(stream) {
            return Ok(());
        }
        let slot = self
            .streams
            .slot_of(stream)
            .ok_or(StreamError::UnknownStream)?;
        let s = self.streams.get(slot).ok_or(StreamError::UnknownStream)?;
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
            if self.streams.local_streams >= self.settings.remote.max_concurrent_streams {
                self.streams.streams_wanted = true;
                return Err(StreamError::ConcurrencyLimit);
            }
            id = self.streams.next_local_id;
        }
        if let Err(e) = self.write_headers_frames(id, fields, end_stream, literals) {
            if e == StreamError::TransmitFull
                && let Some(st) = self.streams.get_mut(slot)
            {
                st.want_tx = true;
                self.streams.some_want_tx = true;
            }
            return Err(e);
        }
        let streams = &mut self.streams;
        let Some(st) = streams.slots[slot].stream.as_mut() else {
            return Err(StreamError::UnknownStream);
        };
        if st.id == 0 {
            st.id = id;
            st.counted = true;
            streams.next_local_id += 2;
            streams.local_streams += 1;
        }
        st.send = if end_stream { Half::Ended } else { Half::Open };
        if end_stream {
            self.on_send_end(slot);
        }
        Ok(())
    }

    /// After this stream's complete response, the rest of its request body
    /// is read and dropped, while the body is at most
    /// [`Config::early_response_discard`](crate::h2::Config::early_response_discard)
    /// octets in all, instead of being stopped with RST_STREAM(NO_ERROR) at once:
    /// for HTTP clients that send their whole request before they read the
    /// response. A server's call, made before its response ends.
    pub fn drain_after_response(&mut self, stream: StreamRef) {
        if let Some(slot) = self.streams.slot_of(stream)
            && let Some(s) = self.streams.get_mut(slot)
        {
            s.drain = true;
        }
    }

    /// The local half ended: free the stream, or for a server whose request
    /// is still arriving, stop it with RST_STREAM(NO_ERROR) after the
    /// response (RFC 9113 §8.1), or drop the rest of it first (see
    /// [`Connection::drain_after_response`]).
    fn on_send_end(&mut self, slot: usize) {
        let Some(s) = self.streams.get(slot) else {
            return;
        };
        if s.recv == Half::Ended {
            self.finish_stream(slot);
        } else if self.role == Role::Server
            && s.head_received
            && !(s.drain && s.data_received < u64::from(self.config.early_response_discard))
        {
            self.stop_early_request(slot);
        }
    }

    /// Stops the rest of a request answered early: RST_STREAM(NO_ERROR)
    /// after the response, and the stream is over.
    pub(super) fn stop_early_request(&mut self, slot: usize) {
        let Some(s) = self.streams.get_mut(slot) else {
            return;
        };
        s.recv = Half::Ended;
        let id = s.id;
        self.write_rst_in_order(id, ErrorCode::NO_ERROR);
        self.streams.remember_reset(id);
        self.finish_stream(slot);
    }

    /// Encodes a header block into the transmit buffer as HEADERS and
    /// CONTINUATION frames no larger than the peer's maximum frame size.
    /// On failure nothing is written and the encoder is unchanged.
    pub(super) fn write_headers_frames<'f, I>(
        &mut self,
        id: u32,
        fields: I,
        end_stream: bool,
        literals: Option<&mut (dyn hpack::Literals + '_)>,
    ) -> Result<(), StreamError>
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        self.compact_tx();
        if !self.hold(FrameBuffer::Transmit) {
            return Err(StreamError::TransmitFull);
        }
        let tx = self.bufs.get_mut(FrameBuffer::Transmit);
        let max = self.settings.remote.max_frame_size as usize;
        let start = self.tx.end;
        let body = start + HEADER_LEN;
        // Keep room for an RST_STREAM after a final response, and for the
        // CONTINUATION headers the block may need.
        let limit = BUF.saturating_sub(HEADER_LEN + 4);
        let room = limit.saturating_sub(body);
        let continuation_room = room / (max + HEADER_LEN) * HEADER_LEN;
        let encode_end = body + room - continuation_room;
        let n = match self.encoder.encode_with(
            fields,
            &mut tx[body.min(encode_end)..encode_end],
            literals,
        ) {
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
        self.tx.end = at;
        Ok(())
    }

    /// Writes an RST_STREAM into the transmit buffer, after the frames
    /// already there; falls back to the refusal queue when full.
    pub(super) fn write_rst_in_order(&mut self, id: u32, code: ErrorCode) {
        self.compact_tx();
        if self.tx.end + HEADER_LEN + 4 <= BUF && self.hold(FrameBuffer::Transmit) {
            let at = self.tx.end;
            let tx = self.bufs.get_mut(FrameBuffer::Transmit);
            let _ = frame::write_header(&mut tx[at..], 4, FrameType::RST_STREAM, 0, id);
            tx[at + HEADER_LEN..at + HEADER_LEN + 4].copy_from_slice(&code.0.to_be_bytes());
            self.tx.end += HEADER_LEN + 4;
        } else {
            self.control.push_refusal(id, code);
        }
    }

    /// Sends DATA: as much of `data` as the flow-control windows, the peer's
    /// frame size and the transmit buffer allow. Returns the octets taken;
    /// when fewer than offered, [`Event::SendReady`](super::Event::SendReady)
    /// follows once more can go. `end_stream` applies only when all of `data`
    /// is taken. An empty `data` with `end_stream` that finds no room for its
    /// frame is [`StreamError::TransmitFull`], and `SendReady` follows.
    ///
    /// Afterwards, call `poll_transmit` while
    /// [`Connection::wants_transmit`] (taking frames out is what makes
    /// room), and drain `poll_event`.
    pub fn send_data(
        &mut self,
        stream: StreamRef,
        data: &[u8],
        end_stream: bool,
    ) -> Result<usize, StreamError> {
        if self.streams.quiet(stream) {
            return Ok(data.len());
        }
        let slot = self
            .streams
            .slot_of(stream)
            .ok_or(StreamError::UnknownStream)?;
        let s = self.streams.get(slot).ok_or(StreamError::UnknownStream)?;
        match s.send {
            Half::Idle => return Err(StreamError::InvalidState),
            Half::Ended => return Err(StreamError::AlreadyEnded),
            Half::Open => {}
        }
        if matches!(self.state, State::Closed | State::Failed) {
            return Err(StreamError::ConnectionClosed);
        }
        self.compact_tx();
        let max = self.settings.remote.max_frame_size as usize;
        let mut taken = 0;
        let mut ended = false;
        // Without the buffer, as if it were full (see `buffers`).
        let held = self.hold(FrameBuffer::Transmit);
        let mut out_of_room = !held;
        let mut window = s.send_window.min(self.flow.send_window).max(0) as usize;
        loop {
            if !held {
                break;
            }
            let left = data.len() - taken;
            // Room for a frame header, and for a trailing RST_STREAM of an
            // early response.
            let Some(room) = BUF.checked_sub(self.tx.end + HEADER_LEN + HEADER_LEN + 4) else {
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
            let at = self.tx.end;
            let fl = if last && end_stream {
                flags::END_STREAM
            } else {
                0
            };
            let tx = self.bufs.get_mut(FrameBuffer::Transmit);
            let _ = frame::write_header(&mut tx[at..], n, FrameType::DATA, fl, s.id);
            tx[at + HEADER_LEN..at + HEADER_LEN + n].copy_from_slice(&data[taken..taken + n]);
            self.tx.end += HEADER_LEN + n;
            taken += n;
            window -= n;
            if last {
                break;
            }
        }
        let n64 = taken as i64;
        self.flow.send_window -= n64;
        let all = taken == data.len() && (ended || !end_stream);
        if let Some(st) = self.streams.get_mut(slot) {
            st.send_window -= n64;
            if !all && out_of_room {
                st.want_tx = true;
                self.streams.some_want_tx = true;
            } else if !all {
                st.send_blocked = true;
                self.streams.some_send_blocked = true;
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
        let Some(s) = self.streams.stream(stream) else {
            return 0;
        };
        let window = s.send_window.min(self.flow.send_window).max(0) as usize;
        window.min(BUF.saturating_sub(self.tx.end - self.tx.start + 2 * HEADER_LEN + 4))
    }

    /// Resets a stream (RST_STREAM with `code`, usually CANCEL). A client
    /// stream whose headers have not gone out is dropped without a trace.
    /// The handle dies at once, with no event. Afterwards, call
    /// `poll_transmit` while [`Connection::wants_transmit`].
    pub fn reset(&mut self, stream: StreamRef, code: ErrorCode) -> Result<(), StreamError> {
        if self.streams.quiet(stream) {
            return Ok(());
        }
        let slot = self
            .streams
            .slot_of(stream)
            .ok_or(StreamError::UnknownStream)?;
        let Some(s) = self.streams.get(slot) else {
            return Err(StreamError::UnknownStream);
        };
        if s.id == 0 {
            self.free_slot_now(slot);
            return Ok(());
        }
        // A client whose response already ended keeps it: the reset only
        // stops the request.
        if self.role == Role::Client && s.recv == Half::Ended {
            self.streams.slots[slot].quiet_previous = true;
        }
        self.streams.remember_reset(s.id);
        self.write_rst_in_order(s.id, code);
        // The application ended it itself: no event.
        self.free_slot_now(slot);
        Ok(())
    }
}
