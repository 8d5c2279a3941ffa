//! When a stdio server that stopped is started again ([`RestartPolicy`]):
//! a budget of restarts per window, with a backoff that doubles with each
//! restart of the window. A stop past the budget pauses the restarts until
//! the oldest of them leaves the window (one caller that crashes the
//! server again and again locks the others out for a window, not for
//! good); before any server was ready, or with restarts off, the engine
//! gives up instead. A server that stayed up
//! [`healthy_after`](RestartPolicy::healthy_after) makes the budget whole.
//!
//! The texts the engine refuses calls with and notes for the operator are
//! written here, into fixed buffers (no allocator): durations as a person
//! reads them (`5 s`, `2.5 s`, `300 ms`).

use core::fmt::{self, Write};
use core::time::Duration;

use crate::time::Instant;

/// The most restarts a window can hold.
pub const MAX_RESTARTS: u8 = 16;

/// When a server that stopped is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// The first wait before a restart. Default 100 ms.
    pub backoff: Duration,
    /// The longest wait before a restart. Default 5 s.
    pub max_backoff: Duration,
    /// Restarts within [`window`](Self::window): the budget (more than
    /// [`MAX_RESTARTS`] counts as that many). 0 turns restarts off: the
    /// first stop ends the engine. Default 5.
    pub max_restarts: u32,
    /// The window of the budget. Default 30 s.
    pub window: Duration,
    /// A server that ran this long before it stopped makes the budget
    /// whole again. Default 10 s.
    pub healthy_after: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            max_restarts: 5,
            window: Duration::from_secs(30),
            healthy_after: Duration::from_secs(10),
        }
    }
}

impl RestartPolicy {
    fn budget(&self) -> usize {
        usize::try_from(self.max_restarts.min(u32::from(MAX_RESTARTS))).unwrap_or(0)
    }
}

/// What follows a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Start a new server at this instant.
    At(Instant),
    /// The budget is spent: no start before this instant.
    Paused(Instant),
    /// No start helps (restarts off, or no server ever got ready).
    GiveUp,
}

/// The restarts of the window, oldest first.
#[derive(Debug, Clone)]
pub(super) struct Restarts {
    pub(super) policy: RestartPolicy,
    recent: [Instant; MAX_RESTARTS as usize],
    len: usize,
    /// Every restart so far.
    pub(super) total: u64,
}

impl Restarts {
    pub(super) fn new(policy: RestartPolicy) -> Self {
        Self {
            policy,
            recent: [Instant::ZERO; MAX_RESTARTS as usize],
            len: 0,
            total: 0,
        }
    }

    /// The restarts of the window.
    #[cfg(test)]
    pub(super) fn attempt(&self) -> usize {
        self.len
    }

    fn forget_old(&mut self, now: Instant) {
        let window = self.policy.window;
        let old = self.recent[..self.len]
            .iter()
            .take_while(|&&at| now.saturating_duration_since(at) >= window)
            .count();
        self.recent.copy_within(old..self.len, 0);
        self.len -= old;
    }

    fn push(&mut self, now: Instant) {
        if self.len < self.recent.len() {
            self.recent[self.len] = now;
            self.len += 1;
        }
        self.total += 1;
    }

    /// A server stopped at `now` after running for `ran`; `was_ready`: a
    /// server of this engine got ready once. `at_once`: the server is
    /// started again without a backoff (the era probe left it unusable).
    pub(super) fn after_stop(
        &mut self,
        now: Instant,
        ran: Duration,
        was_ready: bool,
        at_once: bool,
    ) -> Next {
        if ran >= self.policy.healthy_after {
            self.len = 0;
        }
        self.forget_old(now);
        let budget = self.policy.budget();
        if self.len >= budget {
            if budget == 0 || !was_ready {
                return Next::GiveUp;
            }
            return Next::Paused(self.recent[0].saturating_add(self.policy.window));
        }
        let wait = if at_once {
            Duration::ZERO
        } else {
            let shift = u32::try_from(self.len).unwrap_or(u32::MAX).min(16);
            self.policy
                .backoff
                .saturating_mul(1 << shift)
                .min(self.policy.max_backoff)
        };
        self.push(now);
        Next::At(now.saturating_add(wait))
    }

    /// The pause is over at `now`: a start of the refilled budget.
    pub(super) fn after_pause(&mut self, now: Instant) {
        self.forget_old(now);
        self.push(now);
    }

    /// Why calls are refused while a new server starts.
    pub(super) fn restarting(&self, out: &mut Text) {
        out.set(format_args!(
            "the server is restarting (attempt {} of {}); new calls are refused until it is back",
            self.len,
            self.policy.budget()
        ));
    }

    /// Why calls are refused while the restarts pause, `left` more.
    pub(super) fn paused(&self, left: Duration, out: &mut Text) {
        out.set(format_args!(
            "the server crashed again after {} within {}: restarts pause for {} more, and calls are refused until it is back",
            Restarts_(self.policy.budget()),
            Words(self.policy.window),
            Words(left)
        ));
    }

    /// Why the engine gave up.
    pub(super) fn gave_up(&self, out: &mut Text) {
        match self.policy.budget() {
            0 => out.set(format_args!(
                "the server stopped and restarts are off: the client gave up"
            )),
            1 => out.set(format_args!(
                "the server did not start after its one restart: the client gave up"
            )),
            n => out.set(format_args!(
                "the server did not start after {n} restarts within {}: the client gave up",
                Words(self.policy.window)
            )),
        }
    }

    /// The note of a restart.
    pub(super) fn restarting_note(&self, out: &mut Text) {
        out.set(format_args!(
            "restarting the server (restart {} of {} within {})",
            self.len,
            self.policy.budget(),
            Words(self.policy.window)
        ));
    }

    /// The note of a pause of `left`.
    pub(super) fn paused_note(&self, left: Duration, out: &mut Text) {
        out.set(format_args!(
            "the server crashed again after {} within {}: restarts pause for {}",
            Restarts_(self.policy.budget()),
            Words(self.policy.window),
            Words(left)
        ));
    }
}

/// `n` restarts, in words.
struct Restarts_(usize);

impl fmt::Display for Restarts_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("its one restart"),
            n => write!(f, "{n} restarts"),
        }
    }
}

/// A duration as a diagnostic says it: whole seconds, else tenths of one,
/// else milliseconds.
pub(super) struct Words(pub(super) Duration);

impl fmt::Display for Words {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms >= 1000 && ms.is_multiple_of(1000) {
            write!(f, "{} s", ms / 1000)
        } else if ms >= 1000 {
            // Rounded to the nearest tenth.
            let tenths = (ms + 50) / 100;
            write!(f, "{}.{} s", tenths / 10, tenths % 10)
        } else {
            write!(f, "{ms} ms")
        }
    }
}

/// Room for one text of the engine.
pub(super) const TEXT: usize = 224;

/// A text written into a fixed buffer; what does not fit is cut (at a
/// character's boundary: the texts are UTF-8).
#[derive(Clone)]
pub(super) struct Text {
    buf: [u8; TEXT],
    len: usize,
}

impl Text {
    pub(super) const fn new() -> Self {
        Self {
            buf: [0; TEXT],
            len: 0,
        }
    }

    pub(super) fn set(&mut self, args: fmt::Arguments<'_>) {
        self.len = 0;
        // A text longer than the buffer is cut: not an error.
        let _ = self.write_fmt(args);
    }

    /// `prefix` then `text` (cut to fit).
    pub(super) fn set_bytes(&mut self, prefix: &str, text: &[u8]) {
        self.len = 0;
        let _ = self.write_str(prefix);
        let room = TEXT - self.len;
        let mut n = text.len().min(room);
        while n > 0 && n < text.len() && (text[n] & 0xC0) == 0x80 {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&text[..n]);
        self.len += n;
    }

    pub(super) fn get(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = TEXT - self.len;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() { Err(fmt::Error) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    fn text(f: impl FnOnce(&mut Text)) -> std::string::String {
        let mut t = Text::new();
        f(&mut t);
        std::string::String::from_utf8(t.get().to_vec()).unwrap_or_default()
    }

    #[test]
    fn the_backoff_doubles_within_the_window_and_the_budget_pauses() {
        let mut r = Restarts::new(RestartPolicy {
            max_restarts: 3,
            ..RestartPolicy::default()
        });
        assert_eq!(
            r.after_stop(at(0), Duration::ZERO, true, false),
            Next::At(at(100))
        );
        assert_eq!(
            r.after_stop(at(200), Duration::ZERO, true, false),
            Next::At(at(400))
        );
        assert_eq!(
            r.after_stop(at(500), Duration::ZERO, true, false),
            Next::At(at(900))
        );
        // The fourth stop within 30 s: paused until the first leaves.
        assert_eq!(
            r.after_stop(at(1000), Duration::ZERO, true, false),
            Next::Paused(at(30_000))
        );
        r.after_pause(at(30_000));
        assert_eq!(r.attempt(), 3);
        assert_eq!(r.total, 4);
        // Before any server was ready, a spent budget gives up.
        let mut r = Restarts::new(RestartPolicy {
            max_restarts: 1,
            ..RestartPolicy::default()
        });
        assert!(matches!(
            r.after_stop(at(0), Duration::ZERO, false, false),
            Next::At(_)
        ));
        assert_eq!(
            r.after_stop(at(10), Duration::ZERO, false, false),
            Next::GiveUp
        );
        assert_eq!(
            text(|t| r.gave_up(t)),
            "the server did not start after its one restart: the client gave up"
        );
    }

    #[test]
    fn a_healthy_server_makes_the_budget_whole_and_the_backoff_is_capped() {
        let mut r = Restarts::new(RestartPolicy {
            max_backoff: Duration::from_millis(300),
            ..RestartPolicy::default()
        });
        for i in 0..4 {
            r.after_stop(at(i * 10), Duration::ZERO, true, false);
        }
        assert_eq!(r.attempt(), 4);
        // Capped at 300 ms.
        assert_eq!(
            r.after_stop(at(50), Duration::ZERO, true, false),
            Next::At(at(350))
        );
        // Ran 10 s: whole again, the first backoff.
        assert_eq!(
            r.after_stop(at(20_000), Duration::from_secs(10), true, false),
            Next::At(at(20_100))
        );
        assert_eq!(r.attempt(), 1);
        // Restarts off.
        let mut off = Restarts::new(RestartPolicy {
            max_restarts: 0,
            ..RestartPolicy::default()
        });
        assert_eq!(
            off.after_stop(at(0), Duration::ZERO, true, false),
            Next::GiveUp
        );
    }

    #[test]
    fn texts_say_durations_as_people_read_them() {
        let r = Restarts::new(RestartPolicy::default());
        assert_eq!(
            text(|t| r.paused(Duration::from_millis(27_420), t)),
            "the server crashed again after 5 restarts within 30 s: restarts pause for 27.4 s more, and calls are refused until it is back"
        );
        assert_eq!(
            text(|t| t.set(format_args!("{}", Words(Duration::from_millis(250))))),
            "250 ms"
        );
        // Cut at the buffer, on a character boundary.
        let long = [0xC3u8, 0xA9].repeat(200);
        let mut t = Text::new();
        t.set_bytes("x: ", &long);
        assert!(core::str::from_utf8(t.get()).is_ok());
        assert_eq!(t.get().len(), TEXT - 1);
    }
}
