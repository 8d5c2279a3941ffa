//! The core's clock on tokio: `Instant`s count microseconds from the first
//! reading in this process, and a [`Timer`] waits for the deadline a core
//! state machine asks for.

use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

use mcpwire_core::time::Instant;
use tokio::time::Sleep;

fn origin() -> &'static std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now)
}

/// Now, on the core's clock.
pub(crate) fn now() -> Instant {
    Instant::from_micros(u64::try_from(origin().elapsed().as_micros()).unwrap_or(u64::MAX))
}

/// A core instant on tokio's clock.
pub(crate) fn to_tokio(at: Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(*origin() + Duration::from_micros(at.as_micros()))
}

/// One timer for a connection's whole life, set to the state machine's
/// next deadline on every turn of its loop. It registers with tokio's
/// timer only when the deadline changes, not on every turn.
pub(crate) struct Timer {
    sleep: Pin<Box<Sleep>>,
    armed: Option<Instant>,
}

impl Timer {
    pub(crate) fn new() -> Self {
        Self {
            sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
            armed: None,
        }
    }

    /// Waits for `deadline` from now on (none: never fires).
    pub(crate) fn set(&mut self, deadline: Option<Instant>) {
        if deadline != self.armed {
            if let Some(at) = deadline {
                self.sleep.as_mut().reset(to_tokio(at));
            }
            self.armed = deadline;
        }
    }

    /// Whether a deadline is set (the `select!` precondition of `fired`).
    pub(crate) fn is_set(&self) -> bool {
        self.armed.is_some()
    }

    /// The deadline passed. The timer is then unset until the next `set`,
    /// even to the same deadline.
    pub(crate) async fn fired(&mut self) {
        self.sleep.as_mut().await;
        self.armed = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fires, never before its deadline, follows a deadline moved earlier,
    /// and is unset after firing until it is set again.
    #[tokio::test]
    async fn fires_at_the_deadline_and_follows_changes() {
        let guard = Duration::from_secs(5);
        let mut t = Timer::new();
        assert!(!t.is_set());
        let start = now();
        t.set(Some(start + Duration::from_secs(60)));
        let at = start + Duration::from_millis(20);
        t.set(Some(at));
        assert!(t.is_set());
        tokio::time::timeout(guard, t.fired())
            .await
            .expect("moved earlier");
        assert!(now() >= at);
        assert!(!t.is_set());
        let at = now() + Duration::from_millis(10);
        t.set(Some(at));
        tokio::time::timeout(guard, t.fired())
            .await
            .expect("set again");
        assert!(now() >= at);
    }
}
