//! The frame reader: the client preface (RFC 9113 §3.4), frame headers and
//! their checks (§4), and each frame's payload read in stages across `recv`
//! calls (padding, priority fields, DATA handed out, header block
//! fragments, fixed-size payloads, octets skipped), without buffering DATA.

use super::super::frame::{FrameHeader, FrameType, HEADER_LEN, MAX_WINDOW, PREFACE, flags};
use super::limits::Limit;
use super::streams::Half;
use super::{ConnResult, Connection, DataOut, StreamRef};
use crate::h2::{ErrorCode, Storage};

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
    /// A header block fragment, decoded as it arrives.
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

/// The state of the frame reader between `recv` calls.
#[derive(Debug)]
pub(super) struct FrameReader {
    /// Octets of the client preface still expected (server).
    preface_left: u8,
    head: [u8; HEADER_LEN],
    head_len: u8,
    payload: Payload,
    current: Option<Current>,
    /// A fixed-size unit being collected (see [`Payload::Small`]).
    pub(super) small: [u8; 8],
    small_len: u8,
}

impl FrameReader {
    /// A reader that first expects the client preface when `preface` is
    /// set (server).
    pub(super) const fn new(preface: bool) -> Self {
        Self {
            preface_left: if preface { PREFACE.len() as u8 } else { 0 },
            head: [0; HEADER_LEN],
            head_len: 0,
            payload: Payload::Header,
            current: None,
            small: [0; 8],
            small_len: 0,
        }
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
    /// Reads from one frame-level unit of input. Returns octets consumed
    /// and, for DATA handed out, (slot, length, end_stream).
    pub(super) fn step(&mut self, input: &[u8]) -> ConnResult<(usize, Option<DataOut>)> {
        if self.reader.preface_left > 0 {
            let at = PREFACE.len() - usize::from(self.reader.preface_left);
            let n = input.len().min(usize::from(self.reader.preface_left));
            if input[..n] != PREFACE[at..at + n] {
                return Err((ErrorCode::PROTOCOL_ERROR, "invalid connection preface"));
            }
            self.reader.preface_left -= n as u8;
            return Ok((n, None));
        }
        match self.reader.payload {
            Payload::Header => {
                let at = usize::from(self.reader.head_len);
                let n = input.len().min(HEADER_LEN - at);
                self.reader.head[at..at + n].copy_from_slice(&input[..n]);
                self.reader.head_len += n as u8;
                if usize::from(self.reader.head_len) == HEADER_LEN {
                    self.reader.head_len = 0;
                    let head = FrameHeader::parse(&self.reader.head);
                    self.on_frame_header(head)?;
                    if let Payload::Data { left: 0 } = self.reader.payload {
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
                self.reader.payload = if is_headers && priority {
                    Payload::Priority { left: 5 }
                } else if is_headers {
                    Payload::Fragment { left: body }
                } else {
                    Payload::Data { left: body }
                };
                if let Payload::Data { left: 0 } = self.reader.payload {
                    return Ok((1, self.data_chunk(0)?));
                }
                self.after_progress()?;
                Ok((1, None))
            }
            Payload::Priority { left } => {
                let n = input.len().min(usize::from(left));
                let at = 5 - usize::from(left);
                self.reader.small[at..at + n].copy_from_slice(&input[..n]);
                let left = left - n as u8;
                if left == 0 {
                    let cur = self.current()?;
                    let b = self.reader.small;
                    let dependency = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & MAX_WINDOW;
                    if dependency == cur.head.stream_id {
                        self.self_dependency()?;
                    }
                    let body = cur.head.length
                        - 5
                        - u32::from(cur.pad)
                        - u32::from(cur.head.has(flags::PADDED));
                    self.reader.payload = Payload::Fragment { left: body };
                } else {
                    self.reader.payload = Payload::Priority { left };
                }
                self.after_progress()?;
                Ok((n, None))
            }
            Payload::Data { left } => {
                let n = input.len().min(left as usize);
                self.reader.payload = Payload::Data {
                    left: left - n as u32,
                };
                Ok((n, self.data_chunk(n)?))
            }
            Payload::Fragment { left } => {
                let n = input.len().min(left as usize);
                self.on_fragment(&input[..n])?;
                let left = left - n as u32;
                self.reader.payload = Payload::Fragment { left };
                self.after_progress()?;
                Ok((n, None))
            }
            Payload::Padding { left } | Payload::Skip { left } => {
                let n = input.len().min(left as usize);
                let left = left - n as u32;
                self.reader.payload = match self.reader.payload {
                    Payload::Padding { .. } => Payload::Padding { left },
                    _ => Payload::Skip { left },
                };
                self.after_progress()?;
                Ok((n, None))
            }
            Payload::Small { left } => {
                let want = self.small_want();
                let at = usize::from(self.reader.small_len);
                let n = input.len().min(want - at).min(left as usize);
                self.reader.small[at..at + n].copy_from_slice(&input[..n]);
                self.reader.small_len += n as u8;
                let left = left - n as u32;
                self.reader.payload = Payload::Small { left };
                if usize::from(self.reader.small_len) == want {
                    self.reader.small_len = 0;
                    let head = self.current()?.head;
                    self.on_small(head)?;
                    if head.kind == FrameType::GOAWAY {
                        // The debug data is not kept.
                        self.reader.payload = Payload::Skip { left };
                    }
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
        let left = match self.reader.payload {
            Payload::Data { left } => left,
            _ => 0,
        };
        let end = left == 0 && cur.head.has(flags::END_STREAM);
        // The stream may have died since the frame began (reset by the
        // application or for an error); its slot may even be reused.
        let mut slot = cur.stream.and_then(|r| self.streams.slot_of(r));
        if let Some(k) = slot {
            // content-length is checked against the DATA actually received
            // (RFC 9113 §8.1.1).
            let mismatch = match self.streams.get_mut(k) {
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
        // A request answered early: its body is dropped, the stream's
        // window reopened, until its end or the discard budget's.
        if let Some(k) = slot
            && let Some(st) = self.streams.get_mut(k)
            && st.send == Half::Ended
            && st.drain
        {
            let within = st.data_received <= u64::from(self.config.early_response_discard);
            // Later pieces of the frame still find the stream.
            if let Some(c) = self.reader.current.as_mut() {
                c.auto_release += n as u32;
            }
            if within {
                self.release_stream(k, n as u32);
                if end {
                    self.end_recv(k);
                }
            } else {
                self.stop_early_request(k);
            }
            self.after_progress()?;
            return Ok(None);
        }
        if slot.is_none() {
            // Nobody takes these octets: they return to the window at once.
            if let Some(c) = self.reader.current.as_mut() {
                c.stream = None;
                c.auto_release += n as u32;
            }
        }
        self.after_progress()?;
        match slot {
            Some(k) if n > 0 || end => {
                // Take the handle before the stream may free.
                let stream = self.streams.handle(k);
                if let Some(st) = self.streams.get_mut(k) {
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

    fn current(&self) -> ConnResult<Current> {
        self.reader
            .current
            .ok_or((ErrorCode::INTERNAL_ERROR, "no current frame"))
    }

    fn current_mut(&mut self) -> ConnResult<&mut Current> {
        self.reader
            .current
            .as_mut()
            .ok_or((ErrorCode::INTERNAL_ERROR, "no current frame"))
    }

    /// Octets collected in `small` per unit of the current frame.
    fn small_want(&self) -> usize {
        match self.reader.current.map(|c| c.head.kind) {
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
            let done_stage = match self.reader.payload {
                Payload::Data { left: 0 } | Payload::Fragment { left: 0 } => {
                    self.reader.payload = Payload::Padding {
                        left: u32::from(cur.pad),
                    };
                    if matches!(self.reader.payload, Payload::Padding { left: 0 }) {
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
        self.reader.payload = Payload::Header;
        self.reader.current = None;
        if cur.auto_release > 0 {
            self.flow.release(cur.auto_release);
            if let Some(slot) = cur.stream.and_then(|r| self.streams.slot_of(r)) {
                self.release_stream(slot, cur.auto_release);
            }
        }
        match cur.head.kind {
            FrameType::HEADERS | FrameType::CONTINUATION if cur.head.has(flags::END_HEADERS) => {
                self.end_block()
            }
            FrameType::SETTINGS if !cur.head.has(flags::ACK) => {
                self.control.ack_settings();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn on_frame_header(&mut self, head: FrameHeader) -> ConnResult {
        head.check(self.settings.local.max_frame_size)?;
        if !self.settings.received {
            if head.kind != FrameType::SETTINGS || head.has(flags::ACK) {
                return Err((ErrorCode::PROTOCOL_ERROR, "first frame is not SETTINGS"));
            }
            self.settings.received = true;
        }
        if let Some(id) = self.block.open_stream_id()
            && (head.kind != FrameType::CONTINUATION || head.stream_id != id)
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
        self.reader.payload = match head.kind {
            FrameType::DATA => {
                // Octets nobody takes are released as they are read.
                cur.stream = self.on_data_header(&head)?.map(|k| self.streams.handle(k));
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
                self.on_continuation_header(&head)?;
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
                self.count(Limit::Settings, "SETTINGS flood")?;
                Payload::Small { left: len }
            }
            FrameType::PING
            | FrameType::RST_STREAM
            | FrameType::WINDOW_UPDATE
            | FrameType::PRIORITY => Payload::Small { left: len },
            FrameType::GOAWAY => Payload::Small { left: len },
            _ => Payload::Skip { left: len },
        };
        self.reader.current = Some(cur);
        self.reader.small_len = 0;
        // Frames with nothing to read end here.
        if len == 0 {
            if let Payload::Data { .. } = self.reader.payload {
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
        if self.streams.is_idle(id) {
            return Err((ErrorCode::PROTOCOL_ERROR, "DATA on an idle stream"));
        }
        // Every DATA octet counts against the connection window (RFC 9113 §6.9).
        self.flow.charge(len)?;
        if len == 0 && !head.has(flags::END_STREAM) {
            self.count_empty()?;
        }
        let Some(slot) = self.streams.find(id) else {
            if self.streams.was_reset(id) || self.goaway_sent.is_some_and(|last| id > last) {
                return Ok(None);
            }
            return Err((ErrorCode::STREAM_CLOSED, "DATA on a closed stream"));
        };
        let Some(s) = self.streams.get_mut(slot) else {
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
}
