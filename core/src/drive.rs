//! The run loop every driver shares, as a small no_std helper.
//!
//! Every sans-IO endpoint of this crate (the server engine, the client
//! engine, an HTTP/2 connection) follows one contract, after quinn-proto
//! and str0m:
//!
//! 1. **Input.** `recv(input, now)` consumes a prefix of `input`. It stops
//!    early when the application must act first (an event to read, DATA to
//!    take) or when owed control frames must go out before more is read.
//!    After every `recv`, drain the endpoint's events; if it consumed
//!    nothing, transmit, then feed the rest again. [`Feed`] does this
//!    bookkeeping; it never guesses with retry counters: an endpoint that
//!    consumes nothing and has nothing to send is stuck, which is a bug
//!    the driver reports ([`Step::Stuck`]).
//! 2. **Output.** While `wants_transmit()`, `poll_transmit(buf)` writes
//!    octets ([`fill`]); each call may also produce events (a stream became
//!    writable), so drain events after it.
//! 3. **Time.** Sleep until input or `poll_timeout()`; then
//!    `handle_timeout(now)`, drain events, transmit.
//!
//! Any input (including an application's answer) can produce output:
//! after it, drain events and transmit before sleeping again.

use crate::time::Instant;

/// The calls of the run-loop contract, for endpoints whose `recv` hands
/// nothing back but a count (the MCP engines).
pub trait Endpoint {
    /// Feeds received octets; returns how many were consumed.
    fn recv(&mut self, input: &[u8], now: Instant) -> usize;
    /// Whether `poll_transmit` has anything to write.
    fn wants_transmit(&self) -> bool;
    /// Writes pending output into `out`; returns the octets written.
    fn poll_transmit(&mut self, out: &mut [u8]) -> usize;
    /// Whether the last `recv` stopped because the endpoint waits for the
    /// application (every call is taken; an answer frees one).
    fn is_waiting(&self) -> bool {
        false
    }
}

/// What the driver does after one step of feeding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Some input was consumed: drain events, then step again.
    Consumed,
    /// Nothing was consumed because output waits: drain events, transmit
    /// (at least what `poll_transmit` has now), then step again.
    Transmit,
    /// All input is consumed: drain events.
    Done,
    /// Nothing was consumed: the endpoint waits for the application to
    /// answer a call. Keep the rest, stop reading, and feed it again after
    /// an answer.
    Wait,
    /// Nothing was consumed and nothing waits to go out: the endpoint
    /// cannot go on with this input (a bug; close the connection).
    Stuck,
}

/// Input being fed to an endpoint.
#[derive(Debug)]
pub struct Feed<'i> {
    rest: &'i [u8],
}

impl<'i> Feed<'i> {
    pub fn new(input: &'i [u8]) -> Self {
        Self { rest: input }
    }

    /// What is left to feed.
    pub fn rest(&self) -> &'i [u8] {
        self.rest
    }

    /// Whether everything was fed.
    pub fn is_done(&self) -> bool {
        self.rest.is_empty()
    }

    /// Records that the endpoint consumed `used` octets of [`Feed::rest`]
    /// and whether it now wants to transmit; says what to do next. For
    /// endpoints whose `recv` returns more than a count (an HTTP/2
    /// connection hands out DATA), call `recv` yourself, then this.
    pub fn advance(&mut self, used: usize, wants_transmit: bool) -> Step {
        let used = used.min(self.rest.len());
        self.rest = &self.rest[used..];
        if self.rest.is_empty() {
            Step::Done
        } else if used > 0 {
            Step::Consumed
        } else if wants_transmit {
            Step::Transmit
        } else {
            Step::Stuck
        }
    }

    /// One `recv` of the rest, then [`Feed::advance`].
    pub fn step<E: Endpoint + ?Sized>(&mut self, endpoint: &mut E, now: Instant) -> Step {
        if self.rest.is_empty() {
            return Step::Done;
        }
        let used = endpoint.recv(self.rest, now);
        match self.advance(used, endpoint.wants_transmit()) {
            Step::Stuck if endpoint.is_waiting() => Step::Wait,
            step => step,
        }
    }
}

/// Writes what the endpoint wants to send into `out`, up to its length;
/// returns the octets written. Drain events afterwards.
pub fn fill<E: Endpoint + ?Sized>(endpoint: &mut E, out: &mut [u8]) -> usize {
    let mut n = 0;
    while n < out.len() && endpoint.wants_transmit() {
        let w = endpoint.poll_transmit(&mut out[n..]);
        if w == 0 {
            break;
        }
        n += w;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Consumes one octet per call while its output is empty; owes one
    /// octet of output after every fourth input octet.
    #[derive(Default)]
    struct Toy {
        taken: usize,
        owed: usize,
    }

    impl Endpoint for Toy {
        fn recv(&mut self, input: &[u8], _: Instant) -> usize {
            if self.owed > 0 || input.is_empty() {
                return 0;
            }
            self.taken += 1;
            if self.taken.is_multiple_of(4) {
                self.owed += 1;
            }
            1
        }
        fn wants_transmit(&self) -> bool {
            self.owed > 0
        }
        fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
            let n = self.owed.min(out.len());
            self.owed -= n;
            n
        }
    }

    #[test]
    fn feeds_everything_transmitting_when_blocked() {
        let mut toy = Toy::default();
        let input = [0u8; 10];
        let mut feed = Feed::new(&input);
        let mut sent = 0;
        let mut out = [0u8; 8];
        loop {
            match feed.step(&mut toy, Instant::ZERO) {
                Step::Consumed => {}
                Step::Transmit => sent += fill(&mut toy, &mut out),
                Step::Done => break,
                Step::Wait | Step::Stuck => panic!("stuck"),
            }
        }
        assert_eq!(toy.taken, 10);
        sent += fill(&mut toy, &mut out);
        assert_eq!(sent, 2);
    }

    #[test]
    fn an_endpoint_that_takes_nothing_and_owes_nothing_is_stuck() {
        let mut feed = Feed::new(b"abc");
        assert_eq!(feed.advance(0, false), Step::Stuck);
        assert_eq!(feed.advance(0, true), Step::Transmit);
        assert_eq!(feed.advance(2, false), Step::Consumed);
        assert_eq!(feed.rest(), b"c");
        assert_eq!(feed.advance(5, false), Step::Done);
        assert!(feed.is_done());
    }
}
