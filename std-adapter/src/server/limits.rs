//! The server's caps on connections and listen streams. Connections: how
//! many it serves at once, and how many of them one peer address may hold.
//! At the total cap the server stops accepting (new clients wait in the
//! listen backlog) until a connection ends; a connection past its
//! address's cap is closed as soon as it is accepted. Idle connections end
//! by the idle and handshake timeouts, so a client that opens many and
//! sends nothing holds them for a bounded time. Listen streams: how many
//! the server keeps at once, and how many of them one principal may hold
//! ([`ListenCounts`], the core's [`ListenQuota`] across connections).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use mcpwire_core::mcp::server::ListenQuota;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The caps, and the connections that count against them.
pub(super) struct Limits {
    total: Arc<Semaphore>,
    per_address: usize,
    by_address: Mutex<HashMap<IpAddr, usize>>,
}

/// A connection's place under the caps, given back when it is dropped.
pub(super) struct Admitted {
    _total: OwnedSemaphorePermit,
    address: IpAddr,
    limits: Arc<Limits>,
}

impl Limits {
    pub(super) fn new(total: usize, per_address: usize) -> Arc<Self> {
        Arc::new(Self {
            total: Arc::new(Semaphore::new(total.clamp(1, Semaphore::MAX_PERMITS))),
            per_address: per_address.max(1),
            by_address: Mutex::new(HashMap::new()),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        // Nothing under the lock can panic halfway.
        self.by_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for room under the total cap, then accepts the next
    /// connection. Cancel-safe (a `select!` branch): dropped before it
    /// completes, it accepted nothing and holds no room. A connection
    /// whose address holds its cap already comes back as `None` (the
    /// socket is closed).
    pub(super) async fn accept(
        self: &Arc<Self>,
        listener: &TcpListener,
    ) -> io::Result<Option<(TcpStream, Admitted)>> {
        let permit = self
            .total
            .clone()
            .acquire_owned()
            .await
            .map_err(io::Error::other)?;
        let (socket, peer): (TcpStream, SocketAddr) = listener.accept().await?;
        let address = peer.ip();
        {
            let mut counts = self.counts();
            let count = counts.entry(address).or_insert(0);
            if *count >= self.per_address {
                return Ok(None);
            }
            *count += 1;
        }
        Ok(Some((
            socket,
            Admitted {
                _total: permit,
                address,
                limits: Arc::clone(self),
            },
        )))
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut counts = self.limits.counts();
        if let Some(count) = counts.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

/// The listen streams of a server, counted across its connections.
pub(super) struct ListenCounts {
    total: AtomicUsize,
    max_total: usize,
    max_per_principal: usize,
    by_principal: Mutex<HashMap<Box<str>, usize>>,
}

impl ListenCounts {
    pub(super) fn new(max_total: usize, max_per_principal: usize) -> Self {
        Self {
            total: AtomicUsize::new(0),
            max_total,
            max_per_principal,
            by_principal: Mutex::new(HashMap::new()),
        }
    }

    fn principals(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, usize>> {
        // Nothing under the lock can panic halfway.
        self.by_principal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl ListenQuota for ListenCounts {
    /// Streams without a principal (no authentication) count against the
    /// total only.
    fn acquire(&self, principal: Option<&str>) -> bool {
        let taken = self
            .total
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_total).then_some(n + 1)
            });
        if taken.is_err() {
            return false;
        }
        let Some(principal) = principal else {
            return true;
        };
        let mut counts = self.principals();
        match counts.get_mut(principal) {
            Some(n) if *n >= self.max_per_principal => {
                drop(counts);
                self.total.fetch_sub(1, Ordering::AcqRel);
                false
            }
            Some(n) => {
                *n += 1;
                true
            }
            None => {
                counts.insert(principal.into(), 1);
                true
            }
        }
    }

    fn release(&self, principal: Option<&str>) {
        self.total.fetch_sub(1, Ordering::AcqRel);
        let Some(principal) = principal else {
            return;
        };
        let mut counts = self.principals();
        if let Some(n) = counts.get_mut(principal) {
            *n -= 1;
            if *n == 0 {
                counts.remove(principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At an address's cap a new connection is closed at once; one
    /// closing makes room again; the count of an address is forgotten
    /// when its last connection ends.
    #[tokio::test]
    async fn an_address_holds_at_most_its_cap() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = Limits::new(100, 2);
        let mut clients = Vec::new();
        let mut admitted = Vec::new();
        for _ in 0..3 {
            clients.push(TcpStream::connect(addr).await.unwrap());
            admitted.push(limits.accept(&listener).await.unwrap());
        }
        assert!(admitted[0].is_some() && admitted[1].is_some());
        assert!(admitted[2].is_none(), "the third is over the cap");
        admitted.truncate(1);
        clients.push(TcpStream::connect(addr).await.unwrap());
        let fourth = limits.accept(&listener).await.unwrap();
        assert!(fourth.is_some(), "room again after one ended");
        admitted.clear();
        assert_eq!(limits.counts().get(&addr.ip()), Some(&1), "one still held");
        drop(fourth);
        assert!(limits.counts().is_empty(), "the address is forgotten");
    }

    /// A principal holds at most its cap of listen streams; the total cap
    /// holds for everyone, unauthenticated streams included; what is given
    /// back can be taken again, and a principal's count is forgotten at 0.
    #[test]
    fn listen_streams_are_counted_per_principal_and_in_all() {
        let counts = ListenCounts::new(3, 2);
        assert!(counts.acquire(Some("alice")));
        assert!(counts.acquire(Some("alice")));
        assert!(!counts.acquire(Some("alice")), "alice is at her cap");
        assert!(counts.acquire(None));
        assert!(!counts.acquire(Some("bob")), "the total cap");
        assert!(!counts.acquire(None), "the total cap");
        counts.release(Some("alice"));
        assert!(counts.acquire(Some("bob")));
        counts.release(Some("alice"));
        counts.release(Some("bob"));
        counts.release(None);
        assert!(counts.principals().is_empty());
        assert_eq!(counts.total.load(Ordering::Acquire), 0);
    }

    /// At the total cap nothing is accepted until a connection ends.
    #[tokio::test]
    async fn at_the_total_cap_accepting_waits() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = Limits::new(1, 10);
        let _a = TcpStream::connect(addr).await.unwrap();
        let first = limits.accept(&listener).await.unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            limits.accept(&listener),
        )
        .await;
        assert!(waiting.is_err(), "accepted past the cap");
        drop(first);
        let second = limits.accept(&listener).await.unwrap();
        assert!(second.is_some());
    }
}
