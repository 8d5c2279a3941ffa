//! The HTTP/2 storage of the tokio driver: a connection holds each of its
//! three `BUF`-octet buffers (header block, header list, transmit) only
//! while it is in use, so that an idle connection costs none of them; its
//! stream slots, its engine's call records and its HPACK table grow on the
//! heap as they are needed ([`HeapRecords`]), so that a connection that has
//! seen one call at a time holds one slot and one call record, not 32.
//!
//! Buffers given back go to a small per-thread free list, so the hot path
//! (a call's HEADERS in, its response out) reuses memory instead of
//! allocating and zeroing `BUF` octets each time.

use std::cell::RefCell;
use std::thread::LocalKey;

use mcpwire_core::h2::{FrameBuffer, Storage};
use mcpwire_core::records::Records;

/// Buffers kept for reuse per thread, in each free list (the HTTP/2
/// buffers here: 8 KiB each for the server's connections, 16 KiB for a
/// client's, so at most 256 KiB per thread; the call store's buffers).
pub(crate) const FREE_LIST: usize = 16;

/// A per-thread list of buffers given back, for the next user on the thread.
pub(crate) type FreeList<T> = RefCell<Vec<T>>;

/// The buffer given back last to this thread's `list` that `fits`; the
/// others stay for their users (a server's connections and a client's
/// share a thread in a bridge).
pub(crate) fn take_from<T>(
    list: &'static LocalKey<FreeList<T>>,
    fits: impl Fn(&T) -> bool,
) -> Option<T> {
    list.try_with(|f| {
        let mut f = f.borrow_mut();
        let at = f.iter().rposition(fits)?;
        Some(f.swap_remove(at))
    })
    .ok()
    .flatten()
}

/// Gives `buf` back to this thread's `list`, or to the allocator when the
/// list holds [`FREE_LIST`] already.
pub(crate) fn give_to<T>(list: &'static LocalKey<FreeList<T>>, buf: T) {
    let _ = list.try_with(|f| {
        let mut f = f.borrow_mut();
        if f.len() < FREE_LIST {
            f.push(buf);
        }
    });
}

thread_local! {
    static FREE: FreeList<Box<[u8]>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `len` octets from this thread's free list, else a new one.
fn take(len: usize) -> Box<[u8]> {
    take_from(&FREE, |b| b.len() == len).unwrap_or_else(|| vec![0; len].into_boxed_slice())
}

/// Gives a buffer back to this thread's free list.
fn give(b: Box<[u8]>) {
    give_to(&FREE, b);
}

/// [`Storage`] on the heap, taken on demand and given back when empty.
/// Never refuses (allocation failure aborts, as everywhere in std).
#[derive(Default)]
pub struct HeapStorage<const BUF: usize> {
    bufs: [Option<Box<[u8]>>; 3],
}

impl<const BUF: usize> std::fmt::Debug for HeapStorage<BUF> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeapStorage")
            .field("held", &self.bufs.iter().filter(|b| b.is_some()).count())
            .finish()
    }
}

impl<const BUF: usize> HeapStorage<BUF> {
    /// How many of the three buffers are held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.bufs.iter().filter(|b| b.is_some()).count()
    }
}

fn index(which: FrameBuffer) -> usize {
    match which {
        FrameBuffer::Block => 0,
        FrameBuffer::Headers => 1,
        FrameBuffer::Transmit => 2,
    }
}

impl<const BUF: usize> Storage<BUF> for HeapStorage<BUF> {
    type Records<T: Default, const N: usize> = HeapRecords<T, N>;

    #[inline]
    fn acquire(&mut self, which: FrameBuffer) -> bool {
        let slot = &mut self.bufs[index(which)];
        if slot.is_none() {
            *slot = Some(take(BUF));
        }
        true
    }

    #[inline]
    fn release(&mut self, which: FrameBuffer) {
        if let Some(b) = self.bufs[index(which)].take() {
            give(b);
        }
    }

    #[inline]
    fn is_held(&self, which: FrameBuffer) -> bool {
        self.bufs[index(which)].is_some()
    }

    #[inline]
    fn get(&self, which: FrameBuffer) -> &[u8] {
        self.bufs[index(which)].as_deref().unwrap_or_default()
    }

    #[inline]
    fn get_mut(&mut self, which: FrameBuffer) -> &mut [u8] {
        self.bufs[index(which)].as_deref_mut().unwrap_or_default()
    }

    #[inline]
    fn block_and_headers(&mut self) -> (&mut [u8], &mut [u8]) {
        let [block, headers, _] = &mut self.bufs;
        (
            block.as_deref_mut().unwrap_or_default(),
            headers.as_deref_mut().unwrap_or_default(),
        )
    }
}

impl<const BUF: usize> Drop for HeapStorage<BUF> {
    fn drop(&mut self) {
        for b in self.bufs.iter_mut().filter_map(Option::take) {
            give(b);
        }
    }
}

/// [`Records`] in a `Vec` that grows on demand, to at most `N` elements.
/// Its capacity doubles from the first element, so it never holds more
/// than twice what was asked for.
#[derive(Debug)]
pub struct HeapRecords<T, const N: usize>(Vec<T>);

impl<T, const N: usize> Default for HeapRecords<T, N> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T, const N: usize> std::ops::Deref for HeapRecords<T, N> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T, const N: usize> std::ops::DerefMut for HeapRecords<T, N> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T: Default, const N: usize> Records<T> for HeapRecords<T, N> {
    const LIMIT: usize = N;

    fn grow_to(&mut self, len: usize) -> bool {
        if len > N {
            return false;
        }
        grow_doubling(&mut self.0, len, N, T::default);
        true
    }
}

/// Makes `v` at least `len` long with `fill`'s values, its capacity doubling
/// from the first element (not from `Vec`'s first four) and never above
/// `limit` (nor below `len`).
pub(crate) fn grow_doubling<T>(v: &mut Vec<T>, len: usize, limit: usize, fill: impl FnMut() -> T) {
    if len <= v.len() {
        return;
    }
    if len > v.capacity() {
        let cap = len.max((2 * v.capacity()).min(limit));
        v.reserve_exact(cap - v.len());
    }
    v.resize_with(len, fill);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_grow_by_doubling_up_to_the_limit() {
        let mut r = HeapRecords::<u64, 5>::default();
        assert_eq!(r.0.capacity(), 0);
        assert!(r.grow_to(1));
        assert_eq!(r.0.capacity(), 1);
        r[0] = 9;
        assert!(r.grow_to(2));
        assert!(r.grow_to(3));
        assert_eq!((r.len(), r.0.capacity()), (3, 4));
        assert!(r.grow_to(5));
        assert_eq!(r.0.capacity(), 5, "never past the limit");
        assert!(!r.grow_to(6));
        assert_eq!(&r[..], &[9, 0, 0, 0, 0]);
    }

    #[test]
    fn growing_one_at_a_time_doubles() {
        let mut v: Vec<u8> = Vec::new();
        for len in 1..=33 {
            grow_doubling(&mut v, len, 64, || 0);
            assert_eq!(v.len(), len);
            assert!(v.capacity() <= 64, "capacity {} at {len}", v.capacity());
        }
        assert_eq!(v.capacity(), 64);
        grow_doubling(&mut v, 10, 64, || 1);
        assert_eq!(v.len(), 33, "never shrinks");
    }

    #[test]
    fn taken_on_demand_and_reused() {
        let mut a = HeapStorage::<1024>::default();
        assert_eq!(a.held(), 0);
        assert!(a.get(FrameBuffer::Transmit).is_empty());
        assert!(a.acquire(FrameBuffer::Transmit));
        assert_eq!(a.get_mut(FrameBuffer::Transmit).len(), 1024);
        a.get_mut(FrameBuffer::Transmit)[0] = 7;
        let ptr = a.get(FrameBuffer::Transmit).as_ptr();
        a.release(FrameBuffer::Transmit);
        assert_eq!(a.held(), 0);
        // The same memory comes back from the free list.
        let mut b = HeapStorage::<1024>::default();
        assert!(b.acquire(FrameBuffer::Block));
        assert_eq!(b.get(FrameBuffer::Block).as_ptr(), ptr);
        let (block, headers) = b.block_and_headers();
        assert_eq!((block.len(), headers.len()), (1024, 0));
    }
}
