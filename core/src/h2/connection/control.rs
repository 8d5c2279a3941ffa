//! Connection control: SETTINGS both ways and their acknowledgement (RFC
//! 9113 §6.5), PING (§6.7), GOAWAY (§6.8), RST_STREAM received (§6.4),
//! PRIORITY (§6.3, read for its one rule), and the queue of control frames
//! this end owes the peer, which go out before any HEADERS or DATA.

use super::super::config::Role;
use super::super::frame::{
    self, FrameHeader, FrameType, HEADER_LEN, MAX_WINDOW, PREFACE, Setting, flags,
};
use super::events::{Queued, Terminal};
use super::limits::Limit;
use super::streams::Half;
use super::transmit::{STAGE, put_window_update};
use super::{ConnResult, Connection, State};
use crate::h2::{ConnectionError, ErrorCode, Storage};
use crate::time::Instant;

/// PING acknowledgements owed; with our own PING, sixteen payloads (the
/// firmware connection's size budget in `tests/h2_memory.rs`).
const PING_ACK_QUEUE: usize = 15;
const REFUSAL_QUEUE: usize = 8;
/// GOAWAY debug data is cut to this length.
const MAX_DEBUG: usize = STAGE - HEADER_LEN - 8;

/// One side's SETTINGS values.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    pub(super) header_table_size: u32,
    pub(super) enable_push: bool,
    pub(super) max_concurrent_streams: u32,
    pub(super) initial_window_size: u32,
    pub(super) max_frame_size: u32,
    pub(super) max_header_list_size: u32,
}

impl Settings {
    /// The values in force before a SETTINGS frame (RFC 9113 §6.5.2).
    pub(super) const INITIAL: Settings = Settings {
        header_table_size: 4096,
        enable_push: true,
        max_concurrent_streams: u32::MAX,
        initial_window_size: 65_535,
        max_frame_size: frame::MIN_MAX_FRAME_SIZE,
        max_header_list_size: u32::MAX,
    };
}

/// The SETTINGS exchange: ours (sent first), the peer's, and where the
/// acknowledgements stand.
#[derive(Debug, Clone, Copy)]
pub(super) struct SettingsState {
    pub(super) local: Settings,
    pub(super) remote: Settings,
    /// When our SETTINGS must have been acknowledged.
    pub(super) deadline: Option<Instant>,
    /// The peer acknowledged our SETTINGS.
    pub(super) local_acked: bool,
    /// The peer's first frame, a SETTINGS, arrived (RFC 9113 §3.4).
    pub(super) received: bool,
}

impl SettingsState {
    pub(super) fn new(local: Settings, deadline: Instant) -> Self {
        Self {
            local,
            remote: Settings::INITIAL,
            deadline: Some(deadline),
            local_acked: false,
            received: false,
        }
    }
}

/// Control frames owed to the peer, written by `poll_transmit` before
/// anything in the transmit buffer.
#[derive(Debug)]
pub(super) struct ControlQueue {
    /// The preface (client), our SETTINGS and the first WINDOW_UPDATE.
    send_preface: bool,
    settings_acks_owed: u8,
    ping_acks: [[u8; 8]; PING_ACK_QUEUE],
    ping_acks_len: u8,
    /// A PING of ours (`Connection::send_ping`) not written yet.
    ping: Option<[u8; 8]>,
    /// RST_STREAM for streams without a slot, or that did not fit the
    /// transmit buffer.
    refusals: [(u32, ErrorCode); REFUSAL_QUEUE],
    refusals_len: u8,
    goaway: Option<(u32, ErrorCode, &'static str)>,
}

impl ControlQueue {
    pub(super) const fn new() -> Self {
        Self {
            send_preface: true,
            settings_acks_owed: 0,
            ping_acks: [[0; 8]; PING_ACK_QUEUE],
            ping_acks_len: 0,
            ping: None,
            refusals: [(0, ErrorCode::NO_ERROR); REFUSAL_QUEUE],
            refusals_len: 0,
            goaway: None,
        }
    }

    /// A frame is owed.
    pub(super) fn is_pending(&self) -> bool {
        self.send_preface
            || self.settings_acks_owed > 0
            || self.ping_acks_len > 0
            || self.ping.is_some()
            || self.goaway.is_some()
            || self.refusals_len > 0
    }

    /// One more frame could be owed that does not fit: `recv` stops until
    /// `poll_transmit` sent some.
    pub(super) fn is_full(&self) -> bool {
        usize::from(self.ping_acks_len) == PING_ACK_QUEUE
            || usize::from(self.refusals_len) == REFUSAL_QUEUE
    }

    pub(super) fn ack_settings(&mut self) {
        self.settings_acks_owed = self.settings_acks_owed.saturating_add(1);
    }

    /// Queues an RST_STREAM; dropped when the queue is full (`recv` stops
    /// before that).
    pub(super) fn push_refusal(&mut self, id: u32, code: ErrorCode) {
        if let Some(at) = self.refusals.get_mut(usize::from(self.refusals_len)) {
            *at = (id, code);
            self.refusals_len += 1;
        }
    }

    pub(super) fn go_away(&mut self, last_stream_id: u32, code: ErrorCode, reason: &'static str) {
        self.goaway = Some((last_stream_id, code, reason));
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
    /// Queues a PING with `payload` (RFC 9113 §6.7), written by the next
    /// `poll_transmit` after the answers owed to the peer. The peer's
    /// acknowledgement comes back as [`Event::PingAck`](super::Event::PingAck)
    /// with the same payload; the connection reports every acknowledgement
    /// it reads, so match the payload to tell yours from a stray one.
    /// False when the connection is over or a PING of ours is still
    /// waiting to be written.
    pub fn send_ping(&mut self, payload: [u8; 8]) -> bool {
        if matches!(self.state, State::Failed | State::Closed) || self.control.ping.is_some() {
            return false;
        }
        self.control.ping = Some(payload);
        true
    }

    /// A fixed-size unit of the current frame was read: a SETTINGS
    /// parameter, or the payload of PING, RST_STREAM, WINDOW_UPDATE,
    /// PRIORITY, or GOAWAY without its debug data.
    pub(super) fn on_small(&mut self, head: FrameHeader) -> ConnResult {
        let stream_id = head.stream_id;
        let b = self.reader.small;
        let word = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        match head.kind {
            FrameType::SETTINGS => {
                let setting = Setting::parse(&[b[0], b[1], b[2], b[3], b[4], b[5]]);
                self.apply_setting(setting)
            }
            FrameType::PING => {
                if head.has(flags::ACK) {
                    self.events.push(Queued::PingAck { payload: b });
                    return Ok(());
                }
                self.count(Limit::Pings, "PING flood")?;
                let q = &mut self.control;
                if let Some(at) = q.ping_acks.get_mut(usize::from(q.ping_acks_len)) {
                    *at = b;
                    q.ping_acks_len += 1;
                }
                Ok(())
            }
            FrameType::RST_STREAM => self.on_rst_stream(stream_id, ErrorCode(word)),
            FrameType::WINDOW_UPDATE => self.on_window_update(stream_id, word & MAX_WINDOW),
            FrameType::PRIORITY => {
                if word & MAX_WINDOW == stream_id {
                    // A stream cannot depend on itself (RFC 9113 §5.3.1).
                    match self.streams.find(stream_id) {
                        Some(slot) => self.stream_error(slot, ErrorCode::PROTOCOL_ERROR)?,
                        None => self.refuse(stream_id, ErrorCode::PROTOCOL_ERROR),
                    }
                }
                Ok(())
            }
            FrameType::GOAWAY => {
                let code = ErrorCode(u32::from_be_bytes([b[4], b[5], b[6], b[7]]));
                self.on_goaway(word & MAX_WINDOW, code);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn apply_setting(&mut self, s: Setting) -> ConnResult {
        let remote = &mut self.settings.remote;
        match s.id {
            Setting::HEADER_TABLE_SIZE => {
                remote.header_table_size = s.value;
                self.encoder.set_max_table_size(s.value as usize);
            }
            Setting::ENABLE_PUSH => match (s.value, self.role) {
                (0, _) => remote.enable_push = false,
                (1, Role::Server) => remote.enable_push = true,
                _ => return Err((ErrorCode::PROTOCOL_ERROR, "invalid SETTINGS_ENABLE_PUSH")),
            },
            Setting::MAX_CONCURRENT_STREAMS => {
                let streams = &mut self.streams;
                let was_full = streams.local_streams >= remote.max_concurrent_streams;
                remote.max_concurrent_streams = s.value;
                if was_full && streams.local_streams < s.value && streams.streams_wanted {
                    streams.streams_wanted = false;
                    self.events.push(Queued::StreamsAvailable);
                }
            }
            Setting::INITIAL_WINDOW_SIZE => {
                if s.value > MAX_WINDOW {
                    return Err((
                        ErrorCode::FLOW_CONTROL_ERROR,
                        "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                    ));
                }
                let delta = i64::from(s.value) - i64::from(remote.initial_window_size);
                remote.initial_window_size = s.value;
                self.shift_send_windows(delta)?;
            }
            Setting::MAX_FRAME_SIZE => {
                if !(frame::MIN_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&s.value) {
                    return Err((
                        ErrorCode::PROTOCOL_ERROR,
                        "SETTINGS_MAX_FRAME_SIZE out of range",
                    ));
                }
                remote.max_frame_size = s.value;
            }
            Setting::MAX_HEADER_LIST_SIZE => remote.max_header_list_size = s.value,
            _ => {}
        }
        Ok(())
    }

    pub(super) fn on_settings_ack(&mut self) {
        self.settings.deadline = None;
        if self.settings.local_acked {
            return;
        }
        // Our SETTINGS apply from now (RFC 9113 §6.5.3): the HPACK table
        // limit, and stream windows shrink to our initial window if it is
        // below the default the peer could use until now.
        self.settings.local_acked = true;
        let local = self.settings.local;
        self.block
            .decoder
            .set_max_table_size(local.header_table_size as usize);
        let ours = i64::from(local.initial_window_size);
        let delta = ours - ours.max(65_535);
        if delta != 0 {
            for slot in self.streams.slots.iter_mut() {
                if let Some(s) = slot.stream.as_mut() {
                    s.recv_window += delta;
                }
            }
        }
    }

    fn on_rst_stream(&mut self, id: u32, code: ErrorCode) -> ConnResult {
        if self.streams.is_idle(id) {
            return Err((ErrorCode::PROTOCOL_ERROR, "RST_STREAM on an idle stream"));
        }
        self.count(Limit::Resets, "too many stream resets")?;
        let Some(slot) = self.streams.find(id) else {
            return Ok(());
        };
        let Some(s) = self.streams.get(slot) else {
            return Ok(());
        };
        // The response ended before the reset: keep it, stop sending the
        // request, report no error (the binding's early-response rule).
        let quiet = self.role == Role::Client && s.recv == Half::Ended;
        if quiet {
            self.streams.slots[slot].quiet_previous = true;
            self.end_stream_with(slot, Terminal::Closed);
        } else {
            self.end_stream_with(slot, Terminal::Reset { code, remote: true });
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
        self.events.push(Queued::GoAway {
            last_stream_id,
            code,
        });
        // Our streams above the last id were not processed: the
        // application may retry them on a new connection.
        for slot in 0..self.streams.slots.len() {
            let Some(s) = self.streams.get(slot) else {
                continue;
            };
            let ours = s.id != 0 && !self.streams.peer_initiated(s.id);
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

    /// Writes the owed control frames in order: preface and SETTINGS,
    /// SETTINGS acknowledgements, PING acknowledgements, our PING, GOAWAY,
    /// RST_STREAM.
    /// Returns false when `poll_transmit` must stop here: `out` is full, or
    /// an error GOAWAY went out, after which nothing else is sent.
    pub(super) fn put_owed_control(&mut self, out: &mut [u8], w: &mut usize) -> bool {
        if self.control.send_preface {
            self.control.send_preface = false;
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
            if !self.put_control(out, w, &frame[..n]) {
                return false;
            }
        }
        while self.control.settings_acks_owed > 0 {
            let mut frame = [0u8; HEADER_LEN];
            let _ = frame::write_header(&mut frame, 0, FrameType::SETTINGS, flags::ACK, 0);
            self.control.settings_acks_owed -= 1;
            if !self.put_control(out, w, &frame) {
                return false;
            }
        }
        while self.control.ping_acks_len > 0 {
            let q = &mut self.control;
            let payload = q.ping_acks[0];
            q.ping_acks.copy_within(1.., 0);
            q.ping_acks_len -= 1;
            let mut frame = [0u8; HEADER_LEN + 8];
            let _ = frame::write_header(&mut frame, 8, FrameType::PING, flags::ACK, 0);
            frame[HEADER_LEN..].copy_from_slice(&payload);
            if !self.put_control(out, w, &frame) {
                return false;
            }
        }
        if let Some(payload) = self.control.ping.take() {
            let mut frame = [0u8; HEADER_LEN + 8];
            let _ = frame::write_header(&mut frame, 8, FrameType::PING, 0, 0);
            frame[HEADER_LEN..].copy_from_slice(&payload);
            if !self.put_control(out, w, &frame) {
                return false;
            }
        }
        if let Some((last, code, reason)) = self.control.goaway.take() {
            let debug = &reason.as_bytes()[..reason.len().min(MAX_DEBUG)];
            let len = 8 + debug.len();
            let mut frame = [0u8; STAGE];
            let _ = frame::write_header(&mut frame, len, FrameType::GOAWAY, 0, 0);
            frame[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&last.to_be_bytes());
            frame[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&code.0.to_be_bytes());
            frame[HEADER_LEN + 8..HEADER_LEN + len].copy_from_slice(debug);
            let all = self.put_control(out, w, &frame[..HEADER_LEN + len]);
            if self.state == State::Closed && code != ErrorCode::NO_ERROR {
                // After an error GOAWAY nothing else is sent.
                self.drop_queued_frames();
                self.control.refusals_len = 0;
                return false;
            }
            if !all {
                return false;
            }
        }
        while self.control.refusals_len > 0 {
            let q = &mut self.control;
            let (id, code) = q.refusals[0];
            q.refusals.copy_within(1.., 0);
            q.refusals_len -= 1;
            let mut frame = [0u8; HEADER_LEN + 4];
            let _ = frame::write_header(&mut frame, 4, FrameType::RST_STREAM, 0, id);
            frame[HEADER_LEN..].copy_from_slice(&code.0.to_be_bytes());
            if !self.put_control(out, w, &frame) {
                return false;
            }
        }
        true
    }

    /// Our SETTINGS frame: (octets, length).
    fn initial_settings(&self) -> ([u8; 6 * 6 + HEADER_LEN], usize) {
        let mut buf = [0u8; 6 * 6 + HEADER_LEN];
        let local = &self.settings.local;
        let params = [
            (Setting::HEADER_TABLE_SIZE, local.header_table_size),
            (Setting::ENABLE_PUSH, 0),
            (
                Setting::MAX_CONCURRENT_STREAMS,
                local.max_concurrent_streams,
            ),
            (Setting::INITIAL_WINDOW_SIZE, local.initial_window_size),
            (Setting::MAX_FRAME_SIZE, local.max_frame_size),
            (Setting::MAX_HEADER_LIST_SIZE, local.max_header_list_size),
        ];
        let mut n = HEADER_LEN;
        for (id, value) in params {
            // A server does not send ENABLE_PUSH (RFC 9113 §6.5.2 allows it,
            // but only the client's value means anything).
            if id == Setting::ENABLE_PUSH && self.role == Role::Server {
                continue;
            }
            buf[n..n + 6].copy_from_slice(&Setting { id, value }.emit());
            n += 6;
        }
        let _ = frame::write_header(&mut buf, n - HEADER_LEN, FrameType::SETTINGS, 0, 0);
        (buf, n)
    }
}
