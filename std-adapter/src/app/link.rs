//! The one type the handlers and the connection share: a running
//! handler's link to its call (the messages it sends, and whether the call
//! was cancelled). The `server` module reads these messages and hands them
//! to the engine; the handler side never sees the engine.

use std::borrow::Cow;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};

use mcpwire_core::mcp::server::{CallId, Failure};
use tokio::sync::Notify;

use super::result::{ToolError, json_bytes};
use crate::outbox;

/// A message of a handler for its call.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub(crate) call: CallId,
    pub(crate) message: Message,
    /// The octets of its call's credit it holds, given back when it goes
    /// to the engine (a notification's; an answer takes none).
    pub(crate) credit: u32,
}

/// What a call's handler and its connection share, in one allocation:
/// whether the call is over, and the credit of its notifications (the
/// octets of them that may wait for the client at once).
#[derive(Debug)]
pub(crate) struct CallState {
    cancelled: AtomicBool,
    credit: AtomicU32,
    total: u32,
    /// A handler waits for credit (set before it looks again).
    wants_credit: AtomicBool,
    /// Wakes the handler's waits: the call is over, or credit came back.
    wake: Notify,
}

impl CallState {
    /// A call's state with `credit` octets of credit.
    pub(crate) fn new(credit: usize) -> Arc<Self> {
        let total = u32::try_from(credit.max(1)).unwrap_or(u32::MAX);
        Arc::new(Self {
            cancelled: AtomicBool::new(false),
            credit: AtomicU32::new(total),
            total,
            wants_credit: AtomicBool::new(false),
            wake: Notify::new(),
        })
    }

    /// The call is over (cancelled, ended, or its connection gone).
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, SeqCst);
        self.wake.notify_waiters();
    }

    /// `n` octets of credit come back (their notification went to the
    /// engine).
    pub(crate) fn give_back(&self, n: u32) {
        if n == 0 {
            return;
        }
        self.credit.fetch_add(n, SeqCst);
        if self.wants_credit.swap(false, SeqCst) {
            self.wake.notify_waiters();
        }
    }

    /// Takes `n` octets of credit, waiting for them; false when the call
    /// is over first.
    async fn take(&self, n: u32) -> bool {
        loop {
            let mut left = self.credit.load(SeqCst);
            while left >= n {
                match self
                    .credit
                    .compare_exchange_weak(left, left - n, SeqCst, SeqCst)
                {
                    Ok(_) => return true,
                    Err(now) => left = now,
                }
            }
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // Told before looking again: a give-back after the look wakes
            // this wait, one before it is seen by the look.
            self.wants_credit.store(true, SeqCst);
            if self.cancelled.load(SeqCst) {
                return false;
            }
            if self.credit.load(SeqCst) < n {
                woken.await;
            }
        }
    }
}

/// What a handler sends: notifications, then one final answer.
#[derive(Debug)]
pub(crate) enum Message {
    Notify {
        method: Cow<'static, str>,
        params: Vec<u8>,
    },
    Result(Vec<u8>),
    Error {
        code: i32,
        message: String,
        data: Option<Vec<u8>>,
    },
    /// The handler could not answer; the engine says why in its words.
    Failed(Failure),
}

impl Message {
    /// Whether the message ends the call.
    pub(crate) fn is_final(&self) -> bool {
        !matches!(self, Self::Notify { .. })
    }

    /// A handler's answer: its result's JSON text, or its error.
    pub(crate) fn answer(result: Result<Vec<u8>, ToolError>) -> Self {
        match result {
            Ok(result) => Self::Result(result),
            Err(e) => Self::Error {
                code: e.code,
                message: e.message,
                data: e.data.as_ref().map(json_bytes),
            },
        }
    }
}

/// The link of a running handler to its call: notifications and
/// cancellation.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    call: CallId,
    out: outbox::Sender<Outgoing>,
    state: Arc<CallState>,
}

impl Link {
    pub(crate) fn new(call: CallId, out: outbox::Sender<Outgoing>, state: Arc<CallState>) -> Self {
        Self { call, out, state }
    }

    /// Sends a notification whose params are JSON text already; waits
    /// while the call's earlier notifications fill its credit (the client
    /// has not taken them yet).
    pub(crate) async fn notify_raw(&self, method: impl Into<Cow<'static, str>>, params: Vec<u8>) {
        let method = method.into();
        let total = self.state.total;
        let len = method.len() + params.len();
        let credit = u32::try_from(len).map_or(total, |n| n.clamp(1, total));
        if !self.state.take(credit).await {
            // The call is over: nobody reads it.
            return;
        }
        // Given back unless the message (which then holds it) is queued:
        // this future may be dropped while it waits for the queue.
        let mut taken = Taken {
            state: &self.state,
            credit,
        };
        let message = Message::Notify { method, params };
        let sent = self
            .out
            .send(Outgoing {
                call: self.call,
                message,
                credit,
            })
            .await;
        if sent.is_ok() {
            taken.credit = 0;
        }
    }

    /// Completes when the call is cancelled or the connection is gone.
    pub(crate) async fn cancelled(&self) {
        loop {
            let woken = self.state.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            // Woken for the call's end, or for credit (then again).
            woken.await;
        }
    }

    /// Whether the call is cancelled or the connection is gone.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.cancelled.load(SeqCst) || self.out.is_closed()
    }
}

/// Credit taken for a notification not queued yet: given back when
/// dropped, unless handed over with the message.
struct Taken<'a> {
    state: &'a CallState,
    credit: u32,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.state.give_back(self.credit);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn credit_not_handed_over_comes_back() {
        let state = CallState::new(10);
        assert!(state.take(4).await);
        // A send that never happened (its future dropped).
        drop(Taken {
            state: &state,
            credit: 4,
        });
        assert_eq!(state.credit.load(SeqCst), 10);
        // A message queued holds it.
        assert!(state.take(4).await);
        let mut taken = Taken {
            state: &state,
            credit: 4,
        };
        taken.credit = 0;
        drop(taken);
        assert_eq!(state.credit.load(SeqCst), 6);
    }

    #[tokio::test]
    async fn credit_is_waited_for_and_given_back() {
        let state = CallState::new(100);
        assert!(state.take(60).await);
        assert!(state.take(40).await);
        // None left: the next take waits until some comes back.
        let waiting = {
            let state = Arc::clone(&state);
            tokio::spawn(async move { state.take(30).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        state.give_back(20);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "20 of the 30 it needs");
        state.give_back(40);
        assert!(
            tokio::time::timeout(Duration::from_secs(5), waiting)
                .await
                .unwrap()
                .unwrap()
        );
        assert_eq!(state.credit.load(SeqCst), 30);
        // The call's end ends a wait, without credit.
        let waiting = {
            let state = Arc::clone(&state);
            tokio::spawn(async move { state.take(50).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        state.cancel();
        assert!(
            !tokio::time::timeout(Duration::from_secs(5), waiting)
                .await
                .unwrap()
                .unwrap()
        );
    }
}
