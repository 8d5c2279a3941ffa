//! Keepalive: PINGs that find a peer gone silent (a host that died without
//! a FIN or RST), the way gRPC clients do it (`GRPC_ARG_KEEPALIVE_TIME_MS`
//! and `GRPC_ARG_KEEPALIVE_TIMEOUT_MS`). After [`Keepalive::interval`]
//! without a frame from the peer the client sends a PING; when nothing at
//! all comes back within [`Keepalive::timeout`] the connection is over and
//! its calls fail with UNAVAILABLE.

use core::time::Duration;

use crate::time::Instant;

/// What open calls fail with when the peer stopped answering.
pub(super) const KEEPALIVE_FAILURE: &[u8] = b"keepalive timeout: the peer stopped answering pings";

/// Keepalive settings ([`ClientConfig::keepalive`](super::ClientConfig::keepalive)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// How long the peer may send nothing before a PING goes out.
    pub interval: Duration,
    /// How long a PING may wait for an answer (its ACK, or any other
    /// frame) before the connection counts as dead.
    pub timeout: Duration,
    /// Ping also while no call is open (otherwise only while one is).
    pub while_idle: bool,
}

impl Keepalive {
    /// `interval` and `timeout`, while calls are open.
    pub const fn new(interval: Duration, timeout: Duration) -> Self {
        Self {
            interval,
            timeout,
            while_idle: false,
        }
    }
}

/// What [`Pinger::due`] asks of the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Due {
    Nothing,
    /// Send a PING with this payload.
    Ping([u8; 8]),
    /// The PING went unanswered: the connection is dead.
    Expired,
}

/// The keepalive's state.
#[derive(Debug)]
pub(super) struct Pinger {
    config: Option<Keepalive>,
    /// When the current quiet spell began: the last frame from the peer,
    /// or when keepalive started to run (a first call after idling).
    quiet_since: Instant,
    /// Whether keepalive was running at the last look.
    running: bool,
    /// The PING waiting for an answer, and when it was sent.
    in_flight: Option<([u8; 8], Instant)>,
    /// PINGs sent on this connection (the last one's payload).
    sent: u64,
}

impl Pinger {
    pub(super) const fn new(config: Option<Keepalive>, now: Instant) -> Self {
        Self {
            config,
            quiet_since: now,
            running: false,
            in_flight: None,
            sent: 0,
        }
    }

    /// Something came from the peer: it is alive, and a PING in flight
    /// counts as answered (its ACK, if it comes, is ignored).
    pub(super) fn heard(&mut self, now: Instant) {
        self.quiet_since = now;
        self.in_flight = None;
    }

    /// The peer acknowledged a PING: ours if the payload matches (any
    /// other acknowledgement is ignored).
    pub(super) fn acked(&mut self, payload: [u8; 8], now: Instant) {
        if self.in_flight.is_some_and(|(p, _)| p == payload) {
            self.heard(now);
        }
    }

    /// Whether it runs now: configured, and calls are open or it pings
    /// while idle. Starting to run begins a quiet spell.
    pub(super) fn update(&mut self, calls_open: bool, now: Instant) -> bool {
        let running = self.config.is_some_and(|k| calls_open || k.while_idle);
        if running && !self.running {
            self.quiet_since = now;
        }
        if !running {
            self.in_flight = None;
        }
        self.running = running;
        running
    }

    /// When it must be looked at next, if it runs.
    pub(super) fn deadline(&self) -> Option<Instant> {
        let k = self.config.filter(|_| self.running)?;
        Some(match self.in_flight {
            Some((_, sent)) => sent + k.timeout,
            None => self.quiet_since + k.interval,
        })
    }

    /// What is due at `now` (call [`Pinger::update`] first).
    pub(super) fn due(&mut self, now: Instant) -> Due {
        let Some(deadline) = self.deadline() else {
            return Due::Nothing;
        };
        if now < deadline {
            return Due::Nothing;
        }
        if self.in_flight.is_some() {
            return Due::Expired;
        }
        Due::Ping((self.sent + 1).to_be_bytes())
    }

    /// The PING of [`Due::Ping`] was queued (`queued`), or the one queued
    /// before still waits to be written: either way one is in flight.
    pub(super) fn pinged(&mut self, queued: bool, now: Instant) {
        if queued {
            self.sent += 1;
        }
        self.in_flight = Some((self.sent.to_be_bytes(), now));
    }
}
