//! Flow control (RFC 9113 §5.2, §6.9): the connection's windows both ways,
//! each stream's, WINDOW_UPDATE received, and which window updates are due
//! once the application released what it consumed.

use super::super::frame::MAX_WINDOW;
use super::streams::{Half, Stream};
use super::{ConnResult, Connection};
use crate::h2::{ErrorCode, Storage, StreamRef};

/// The connection-level windows (RFC 9113 §6.9.1).
#[derive(Debug, Clone, Copy)]
pub(super) struct FlowControl {
    /// DATA octets the peer accepts now.
    pub(super) send_window: i64,
    /// DATA octets the peer may send now.
    pub(super) recv_window: i64,
    /// Consumed by the application, not yet returned in a WINDOW_UPDATE.
    pub(super) release_owed: u32,
}

impl FlowControl {
    pub(super) fn new(recv_window: u32) -> Self {
        Self {
            // Until the peer's SETTINGS say more (RFC 9113 §6.9.2).
            send_window: 65_535,
            recv_window: i64::from(recv_window),
            release_owed: 0,
        }
    }

    /// Charges received DATA (every octet counts, padding too; RFC 9113
    /// §6.9).
    pub(super) fn charge(&mut self, len: u32) -> ConnResult {
        if i64::from(len) > self.recv_window {
            return Err((
                ErrorCode::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.recv_window -= i64::from(len);
        Ok(())
    }

    /// `n` received octets are done with: the peer gets them back in the
    /// next WINDOW_UPDATE.
    pub(super) fn release(&mut self, n: u32) {
        self.release_owed = self.release_owed.saturating_add(n);
    }

    /// A WINDOW_UPDATE is worth sending once half the window (`size`) is
    /// owed, or the peer is down to half of it.
    pub(super) fn update_due(&self, size: u32) -> bool {
        self.release_owed > 0
            && (i64::from(self.release_owed) >= i64::from(size) / 2
                || self.recv_window < i64::from(size) / 2)
    }

    /// Takes the increment of the connection's WINDOW_UPDATE.
    pub(super) fn take_update(&mut self) -> u32 {
        let n = self.release_owed.min(MAX_WINDOW);
        self.release_owed -= n;
        self.recv_window += i64::from(n);
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
    /// Returns `n` octets of DATA the application has consumed on `stream`,
    /// reopening the stream and connection windows. Windows never reopen
    /// before this call (RFC 9113 §6.9), except that a stream's unreleased
    /// octets return to the connection window when the stream ends; releasing
    /// on a dead handle does nothing.
    ///
    /// Afterwards a WINDOW_UPDATE may be due: check
    /// [`Connection::wants_transmit`].
    pub fn release_data(&mut self, stream: StreamRef, n: usize) {
        let Some(slot) = self.streams.slot_of(stream) else {
            return;
        };
        let Some(s) = self.streams.get_mut(slot) else {
            return;
        };
        let n = u32::try_from(n).unwrap_or(u32::MAX).min(s.unreleased);
        s.unreleased -= n;
        self.flow.release(n);
        self.release_stream(slot, n);
    }

    pub(super) fn release_stream(&mut self, slot: usize, n: u32) {
        if let Some(s) = self.streams.get_mut(slot)
            && s.recv == Half::Open
        {
            s.release_owed = s.release_owed.saturating_add(n);
        }
    }

    pub(super) fn connection_update_due(&self) -> bool {
        self.flow.update_due(self.config.connection_window_size)
    }

    pub(super) fn stream_update_due(&self, s: &Stream) -> bool {
        s.release_owed > 0 && s.recv == Half::Open && {
            let target = i64::from(self.settings.local.initial_window_size);
            i64::from(s.release_owed) >= target / 2 || s.recv_window < target / 2
        }
    }

    /// Whether some WINDOW_UPDATE is due (none once the connection closed).
    pub(super) fn any_update_due(&self) -> bool {
        self.connection_update_due()
            || self
                .streams
                .slots
                .iter()
                .any(|s| s.stream.is_some_and(|st| self.stream_update_due(&st)))
    }

    /// A WINDOW_UPDATE frame (RFC 9113 §6.9).
    pub(super) fn on_window_update(&mut self, id: u32, increment: u32) -> ConnResult {
        if id == 0 {
            if increment == 0 {
                return Err((
                    ErrorCode::PROTOCOL_ERROR,
                    "WINDOW_UPDATE of 0 on the connection",
                ));
            }
            self.flow.send_window += i64::from(increment);
            if self.flow.send_window > i64::from(MAX_WINDOW) {
                return Err((
                    ErrorCode::FLOW_CONTROL_ERROR,
                    "connection window above 2^31-1",
                ));
            }
            self.wake_blocked();
            return Ok(());
        }
        if self.streams.is_idle(id) {
            return Err((ErrorCode::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream"));
        }
        let Some(slot) = self.streams.find(id) else {
            return Ok(());
        };
        if increment == 0 {
            return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
        }
        let conn_open = self.flow.send_window > 0;
        let Some(s) = self.streams.get_mut(slot) else {
            return Ok(());
        };
        s.send_window += i64::from(increment);
        if s.send_window > i64::from(MAX_WINDOW) {
            return self.stream_error(slot, ErrorCode::FLOW_CONTROL_ERROR);
        }
        if s.send_blocked && s.send_window > 0 && conn_open {
            s.send_blocked = false;
            self.streams.mark_ready(slot);
        }
        Ok(())
    }

    /// Moves every stream's send window by `delta` after a change of
    /// SETTINGS_INITIAL_WINDOW_SIZE; they may go negative (RFC 9113 §6.9.2).
    pub(super) fn shift_send_windows(&mut self, delta: i64) -> ConnResult {
        for slot in 0..self.streams.slots.len() {
            if let Some(st) = self.streams.get_mut(slot) {
                st.send_window += delta;
                if st.send_window > i64::from(MAX_WINDOW) {
                    return Err((ErrorCode::FLOW_CONTROL_ERROR, "stream window above 2^31-1"));
                }
            }
        }
        if delta > 0 {
            self.wake_blocked();
        }
        Ok(())
    }

    /// Streams waiting for window that now have some are owed `SendReady`.
    pub(super) fn wake_blocked(&mut self) {
        let streams = &mut self.streams;
        if !streams.some_send_blocked || self.flow.send_window <= 0 {
            return;
        }
        streams.some_send_blocked = false;
        for slot in 0..streams.slots.len() {
            let Some(s) = streams.get_mut(slot) else {
                continue;
            };
            if s.send_blocked && s.send_window > 0 {
                s.send_blocked = false;
                streams.mark_ready(slot);
            } else if s.send_blocked {
                streams.some_send_blocked = true;
            }
        }
    }
}
