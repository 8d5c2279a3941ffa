//! The client's lines on their way to the server (a child's stdin, or an
//! HTTP link), written by their own task so that a server that stops
//! reading never stops the supervisor reading its answers; the octets
//! that wait are counted, so the supervisor starts no new call while too
//! many do (a child that never reads its stdin costs a bounded amount of
//! memory, and its callers wait as they do for a busy server).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Notify, mpsc};

/// The counted octets, shared by both ends.
#[derive(Debug, Default)]
struct Waiting {
    octets: AtomicUsize,
    taken: Notify,
}

/// The sending end (dropping it ends the receiver's lines).
#[derive(Debug)]
pub(super) struct LineSender {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    waiting: Arc<Waiting>,
}

/// The receiving end.
#[derive(Debug)]
pub(super) struct LineReceiver {
    rx: mpsc::UnboundedReceiver<Vec<u8>>,
    waiting: Arc<Waiting>,
}

/// A new queue of lines.
pub(super) fn lines() -> (LineSender, LineReceiver) {
    let (tx, rx) = mpsc::unbounded_channel();
    let waiting = Arc::new(Waiting::default());
    (
        LineSender {
            tx,
            waiting: Arc::clone(&waiting),
        },
        LineReceiver { rx, waiting },
    )
}

impl LineSender {
    /// Queues `line`; false when the receiver is gone.
    pub(super) fn send(&self, line: Vec<u8>) -> bool {
        let n = line.len();
        self.waiting.octets.fetch_add(n, Ordering::Relaxed);
        if self.tx.send(line).is_err() {
            self.waiting.octets.fetch_sub(n, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// The octets queued and not yet taken by the receiver.
    pub(super) fn waiting(&self) -> usize {
        self.waiting.octets.load(Ordering::Relaxed)
    }

    /// A handle that tells when the receiver takes a line.
    pub(super) fn watch(&self) -> LineWatch {
        LineWatch(Arc::clone(&self.waiting))
    }
}

/// See [`LineSender::watch`].
#[derive(Debug)]
pub(super) struct LineWatch(Arc<Waiting>);

impl LineWatch {
    /// Completes once the receiver has taken a line since the call (or
    /// one was taken before it that no `taken` saw yet).
    pub(super) async fn taken(&self) {
        self.0.taken.notified().await;
    }
}

impl LineReceiver {
    /// The next line; `None` once the sender is dropped and every line
    /// was taken.
    pub(super) async fn recv(&mut self) -> Option<Vec<u8>> {
        let line = self.rx.recv().await?;
        self.waiting.octets.fetch_sub(line.len(), Ordering::Relaxed);
        // A permit is stored when nobody waits: a `taken` that starts
        // after this still completes.
        self.waiting.taken.notify_one();
        Some(line)
    }
}

impl Drop for LineReceiver {
    /// The lines never taken (the child stopped reading and its writer
    /// ended) no longer wait.
    fn drop(&mut self) {
        self.rx.close();
        while let Ok(line) = self.rx.try_recv() {
            self.waiting.octets.fetch_sub(line.len(), Ordering::Relaxed);
        }
        self.waiting.taken.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_octets_waiting_are_counted_until_taken() {
        let (tx, mut rx) = lines();
        assert!(tx.send(b"abc\n".to_vec()));
        assert!(tx.send(b"de\n".to_vec()));
        assert_eq!(tx.waiting(), 7);
        assert_eq!(rx.recv().await.unwrap(), b"abc\n");
        assert_eq!(tx.waiting(), 3);
        // The take above wakes a later `taken`.
        tokio::time::timeout(std::time::Duration::from_secs(5), tx.watch().taken())
            .await
            .unwrap();
        assert_eq!(rx.recv().await.unwrap(), b"de\n");
        assert_eq!(tx.waiting(), 0);
        // Lines left when the receiver goes (its writer ended) are no
        // longer counted.
        assert!(tx.send(b"gh\n".to_vec()));
        drop(rx);
        assert_eq!(tx.waiting(), 0);
        assert!(!tx.send(b"f\n".to_vec()));
        assert_eq!(tx.waiting(), 0);
    }
}
