//! The events of one call, from the connection's task to the call: one
//! sender, one receiver, unbounded as the tokio channel it replaces (each
//! message is bounded by the engine's call buffer; their number by the
//! call's reader keeping up, as a forwarding bridge does).
//!
//! A tokio `mpsc` channel costs a cache-aligned allocation when it is made
//! and a block of 32 slots (about 2.5 KiB here) at its first message: per
//! call, that was more work than the call's own queue. Here the queue is a
//! `VecDeque` behind a mutex that only these two sides take, never at once
//! for long.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

struct State<T> {
    queue: VecDeque<T>,
    /// The receiver waiting for a message.
    waker: Option<Waker>,
    sender_gone: bool,
    receiver_gone: bool,
}

struct Shared<T>(Mutex<State<T>>);

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // No code runs under the lock that could panic halfway.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The sending side (the connection's task).
pub(crate) struct Sender<T>(Arc<Shared<T>>);

/// The receiving side (the call). Dropping it drops what is queued and
/// makes later sends fail.
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

/// A call's mailbox.
pub(crate) fn mailbox<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared(Mutex::new(State {
        queue: VecDeque::new(),
        waker: None,
        sender_gone: false,
        receiver_gone: false,
    })));
    (Sender(Arc::clone(&shared)), Receiver(shared))
}

impl<T> Sender<T> {
    /// Queues `msg`; gives it back when the receiver is gone.
    pub(crate) fn send(&self, msg: T) -> Result<(), T> {
        let waker = {
            let mut s = self.0.lock();
            if s.receiver_gone {
                return Err(msg);
            }
            s.queue.push_back(msg);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Whether the receiver is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.lock().receiver_gone
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.0.lock();
            s.sender_gone = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// The next message; `None` once the queue is empty and the sender
    /// gone.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| {
            let mut s = self.0.lock();
            if let Some(msg) = s.queue.pop_front() {
                return Poll::Ready(Some(msg));
            }
            if s.sender_gone {
                return Poll::Ready(None);
            }
            match &mut s.waker {
                Some(w) => w.clone_from(cx.waker()),
                None => s.waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let dropped = {
            let mut s = self.0.lock();
            s.receiver_gone = true;
            s.waker = None;
            std::mem::take(&mut s.queue)
        };
        drop(dropped);
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("mailbox::Sender")
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("mailbox::Receiver").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn in_order_then_none_once_the_sender_is_gone() {
        let (tx, mut rx) = mailbox::<u32>();
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        assert_eq!(rx.recv().await, Some(1));
        // A receiver woken by a later send, then by the sender's end.
        let later = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx.send(3).unwrap();
            tokio::task::yield_now().await;
            drop(tx);
        });
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(rx.recv().await, None);
        later.await.unwrap();
    }

    #[tokio::test]
    async fn a_gone_receiver_refuses_and_drops_what_was_queued() {
        let (tx, rx) = mailbox::<Arc<()>>();
        let held = Arc::new(());
        tx.send(Arc::clone(&held)).unwrap();
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "the queued message was dropped"
        );
        assert!(tx.send(Arc::clone(&held)).is_err());
    }
}
