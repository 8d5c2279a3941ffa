//! The server's shutdown: one flag, set once by [`crate::Server::shutdown`],
//! that every connection task waits on beside its socket, its handlers and
//! its timer.
//!
//! The waiters' wakers sit in a fixed table of [`WAITERS`] entries, one per
//! connection task at a time (a task waits either in its accept or in its
//! run loop, never both). A waiter that finds the table full looks at the
//! flag once every [`OVERFLOW_POLL`] instead: it still stops, a little
//! later, and nothing is woken in vain (a shared waker list that wakes
//! everyone when it overflows would keep more tasks than entries waking
//! each other).

use core::cell::RefCell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use embassy_sync::blocking_mutex::Mutex as BlockingMutex;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::{Duration, Timer};

/// Connection tasks woken at once when the server shuts down.
pub(crate) const WAITERS: usize = 4;

/// How often a waiter without an entry looks at the flag.
const OVERFLOW_POLL: Duration = Duration::from_secs(1);

struct State {
    stopping: bool,
    waiters: [Option<Waker>; WAITERS],
}

/// The shutdown flag and the wakers of the tasks waiting on it.
pub(crate) struct Stop {
    state: BlockingMutex<CriticalSectionRawMutex, RefCell<State>>,
}

impl Stop {
    pub(crate) const fn new() -> Self {
        Self {
            state: BlockingMutex::new(RefCell::new(State {
                stopping: false,
                waiters: [const { None }; WAITERS],
            })),
        }
    }

    /// Sets the flag and wakes every waiter.
    pub(crate) fn stop(&self) {
        self.state.lock(|s| {
            let mut s = s.borrow_mut();
            s.stopping = true;
            for waker in s.waiters.iter_mut().filter_map(Option::take) {
                waker.wake();
            }
        });
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.state.lock(|s| s.borrow().stopping)
    }

    /// Completes once the flag is set.
    pub(crate) fn wait(&self) -> Stopped<'_> {
        Stopped {
            stop: self,
            entry: None,
            overflow: None,
        }
    }
}

/// The future of [`Stop::wait`]; lets go of its entry when dropped.
pub(crate) struct Stopped<'s> {
    stop: &'s Stop,
    /// Its entry in the waker table, once it has one.
    entry: Option<usize>,
    /// Without an entry: the next look at the flag.
    overflow: Option<Timer>,
}

impl Future for Stopped<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let entry = this.stop.state.lock(|s| {
            let mut s = s.borrow_mut();
            if s.stopping {
                return Err(());
            }
            let entry = this
                .entry
                .or_else(|| s.waiters.iter().position(Option::is_none));
            if let Some(slot) = entry.and_then(|i| s.waiters.get_mut(i)) {
                match slot {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *slot = Some(cx.waker().clone()),
                }
            }
            Ok(entry)
        });
        match entry {
            Err(()) => Poll::Ready(()),
            Ok(Some(i)) => {
                this.entry = Some(i);
                this.overflow = None;
                Poll::Pending
            }
            Ok(None) => {
                let timer = this
                    .overflow
                    .get_or_insert_with(|| Timer::after(OVERFLOW_POLL));
                if Pin::new(timer).poll(cx).is_ready() {
                    // Look again at once, with a new timer.
                    this.overflow = None;
                    cx.waker().wake_by_ref();
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        if let Some(i) = self.entry {
            self.stop.state.lock(|s| {
                if let Some(slot) = s.borrow_mut().waiters.get_mut(i) {
                    *slot = None;
                }
            });
        }
    }
}
