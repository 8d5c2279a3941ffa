//! The queue from a connection's handlers to its task: many senders, one
//! receiver, bounded, and holding memory only while messages wait.
//!
//! A tokio `mpsc` channel allocates its first block of 32 slots when it is
//! made, about 2 KiB for the driver's messages, so every connection would
//! pay for it while idle. Here an idle queue is an empty `VecDeque` (no
//! allocation); a burst's room is given back once it drains.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, Semaphore, TryAcquireError};

/// Room kept in the queue once it drains after a burst: a few messages'
/// worth; anything larger goes back to the allocator.
const KEEP: usize = 4;

struct Inner<T> {
    queue: Mutex<VecDeque<T>>,
    /// One permit per message that may still be queued.
    room: Semaphore,
    /// Wakes the receiver after a send.
    ready: Notify,
    bound: usize,
}

impl<T> Inner<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        // No code runs under the lock that could panic halfway.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_empty(&self) -> bool {
        self.room.available_permits() == self.bound
    }

    fn push(&self, msg: T) {
        self.lock().push_back(msg);
        self.ready.notify_one();
    }
}

/// The sending side; cheap to clone.
pub(crate) struct Sender<T>(Arc<Inner<T>>);

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("outbox::Sender")
            .field("room", &self.0.room.available_permits())
            .finish()
    }
}

/// Why a message was not queued; it comes back.
#[derive(Debug)]
pub(crate) enum TrySendError<T> {
    Full(T),
    Closed(T),
}

impl<T> Sender<T> {
    /// Whether nothing is queued and no send is in progress.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the receiver is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.room.is_closed()
    }

    /// Queues `msg`, waiting for room; gives it back when the receiver is
    /// gone.
    pub(crate) async fn send(&self, msg: T) -> Result<(), T> {
        match self.0.room.acquire().await {
            Ok(permit) => {
                permit.forget();
                self.0.push(msg);
                Ok(())
            }
            Err(_) => Err(msg),
        }
    }

    /// Queues `msg` if there is room now.
    pub(crate) fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        match self.0.room.try_acquire() {
            Ok(permit) => {
                permit.forget();
                self.0.push(msg);
                Ok(())
            }
            Err(TryAcquireError::NoPermits) => Err(TrySendError::Full(msg)),
            Err(TryAcquireError::Closed) => Err(TrySendError::Closed(msg)),
        }
    }
}

/// The receiving side. Dropping it closes the queue: waiting and later
/// sends fail, and what was queued is dropped.
pub(crate) struct Receiver<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Receiver<T> {
    /// Whether nothing is queued and no send is in progress.
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The next message, if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<T> {
        let msg = {
            let mut q = self.inner.lock();
            let msg = q.pop_front();
            if q.is_empty() && q.capacity() > KEEP {
                *q = VecDeque::new();
            }
            msg
        }?;
        self.inner.room.add_permits(1);
        Some(msg)
    }

    /// The next message, waiting for one. The connection keeps a sender,
    /// so this never ends for lack of senders.
    pub(crate) async fn recv(&mut self) -> T {
        loop {
            if let Some(msg) = self.try_recv() {
                return msg;
            }
            // A send after the check above left a permit in `ready`.
            self.inner.ready.notified().await;
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.inner.room.close();
        let dropped = std::mem::take(&mut *self.inner.lock());
        drop(dropped);
    }
}

/// A queue of at most `bound` messages.
pub(crate) fn channel<T>(bound: usize) -> (Sender<T>, Receiver<T>) {
    let inner = Arc::new(Inner {
        queue: Mutex::new(VecDeque::new()),
        room: Semaphore::new(bound),
        ready: Notify::new(),
        bound,
    });
    (Sender(inner.clone()), Receiver { inner })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_in_order_and_closed_by_the_receiver() {
        let (tx, mut rx) = channel::<u32>(2);
        assert!(tx.is_empty());
        tx.try_send(1).unwrap();
        tx.send(2).await.unwrap();
        assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
        assert!(!tx.is_empty());
        // A waiting sender goes on once the receiver takes one.
        let waiting = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(3).await }
        });
        assert_eq!(rx.recv().await, 1);
        waiting.await.unwrap().unwrap();
        assert_eq!(rx.try_recv(), Some(2));
        assert_eq!(rx.recv().await, 3);
        assert!(tx.is_empty());
        // A receiver woken by a later send.
        let later = tokio::spawn({
            let tx = tx.clone();
            async move {
                tokio::task::yield_now().await;
                tx.send(4).await
            }
        });
        assert_eq!(rx.recv().await, 4);
        later.await.unwrap().unwrap();
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.send(5).await, Err(5));
        assert!(matches!(tx.try_send(6), Err(TrySendError::Closed(6))));
    }

    #[tokio::test]
    async fn a_drained_burst_gives_its_room_back() {
        let (tx, mut rx) = channel::<[u8; 64]>(256);
        for _ in 0..200 {
            tx.try_send([0; 64]).unwrap();
        }
        assert!(rx.inner.lock().capacity() >= 200);
        while rx.try_recv().is_some() {}
        assert_eq!(rx.inner.lock().capacity(), 0);
        assert!(tx.is_empty());
    }
}
