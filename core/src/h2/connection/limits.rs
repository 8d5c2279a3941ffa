//! The limits against abuse that count per period ([`FloodLimits`]): stream
//! resets (CVE-2023-44487), PINGs, SETTINGS, empty frames (CVE-2019-9518)
//! and refused streams. Each one passed is a connection error,
//! GOAWAY(ENHANCE_YOUR_CALM).

use core::time::Duration;

use super::super::ErrorCode;
use super::super::config::FloodLimits;
use super::{ConnResult, Connection};
use crate::h2::Storage;
use crate::time::Instant;

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

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// RST_STREAM from the peer, and our resets for the peer's stream errors.
    Resets,
    Pings,
    Settings,
    /// DATA, HEADERS and CONTINUATION frames that carry nothing and end
    /// nothing.
    Empty,
    Refused,
}

/// One counter per [`Limit`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Rates {
    resets: Rate,
    pings: Rate,
    settings: Rate,
    empty: Rate,
    refused: Rate,
}

impl Rates {
    /// Counts one `limit` at `now`; true when the period's count passes
    /// its maximum in `flood`.
    pub(super) fn exceeded(&mut self, limit: Limit, now: Instant, flood: &FloodLimits) -> bool {
        let (rate, max) = match limit {
            Limit::Resets => (&mut self.resets, flood.max_resets),
            Limit::Pings => (&mut self.pings, flood.max_pings),
            Limit::Settings => (&mut self.settings, flood.max_settings),
            Limit::Empty => (&mut self.empty, flood.max_empty_frames),
            Limit::Refused => (&mut self.refused, flood.max_refused_streams),
        };
        rate.exceeded(now, flood.period, max)
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
    /// Counts one `limit`; the connection error that ends the connection
    /// when its rate is passed.
    pub(super) fn count(&mut self, limit: Limit, reason: &'static str) -> ConnResult {
        if self.rates.exceeded(limit, self.now, &self.config.flood) {
            return Err((ErrorCode::ENHANCE_YOUR_CALM, reason));
        }
        Ok(())
    }

    /// A frame with nothing in it that ends nothing.
    pub(super) fn count_empty(&mut self) -> ConnResult {
        self.count(Limit::Empty, "too many empty frames")
    }
}
