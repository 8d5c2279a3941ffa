//! Where the server engine keeps each call's bytes.
//!
//! A call needs room for its request head, its request message and, once
//! the handler answers, each outgoing message. The engine takes a buffer
//! from a [`CallStore`] when a call's head arrives, grows it when the
//! request message turns out larger, or a response does, and gives it back
//! when the call ends. An idle connection holds no call buffer at all.
//!
//! [`SlabStore`] is the allocation-free store: `COUNT` buffers of `SIZE`
//! octets, inline. A driver with an allocator implements the trait over
//! `Vec<u8>` (see `mcpwire-tokio`), so that a call holds what it uses.

/// A source of call buffers. Running out is never a panic: the engine
/// refuses the call (RST_STREAM(REFUSED_STREAM), which gRPC clients retry
/// transparently) or the message (RESOURCE_EXHAUSTED).
pub trait CallStore {
    /// A buffer held by one call.
    type Buf;

    /// The largest buffer this store can ever give.
    fn max_len(&self) -> usize;

    /// A buffer of at least `len` octets, or `None` when none is free or
    /// `len` is over [`CallStore::max_len`].
    fn take(&mut self, len: usize) -> Option<Self::Buf>;

    /// Makes `buf` at least `len` octets long, keeping its content; `false`
    /// when it cannot (it is unchanged then).
    fn grow(&mut self, buf: &mut Self::Buf, len: usize) -> bool;

    /// The buffer's octets.
    fn bytes<'a>(&'a self, buf: &'a Self::Buf) -> &'a [u8];

    /// The buffer's octets, to write.
    fn bytes_mut<'a>(&'a mut self, buf: &'a mut Self::Buf) -> &'a mut [u8];

    /// Takes a buffer back when its call ends.
    fn put(&mut self, buf: Self::Buf);
}

/// `COUNT` buffers of `SIZE` octets each, inline: at most `COUNT` calls at
/// a time per engine, each with requests and messages up to `SIZE` octets
/// minus its request head (the head's octets, 128 for the id, and 128 for
/// the principal when authorization is on).
pub struct SlabStore<const SIZE: usize, const COUNT: usize> {
    bufs: [[u8; SIZE]; COUNT],
    used: [bool; COUNT],
}

/// A buffer of a [`SlabStore`]: the index of its slot.
#[derive(Debug, PartialEq, Eq)]
pub struct SlabBuf(usize);

impl<const SIZE: usize, const COUNT: usize> SlabStore<SIZE, COUNT> {
    /// All buffers free.
    pub const fn new() -> Self {
        Self {
            bufs: [[0; SIZE]; COUNT],
            used: [false; COUNT],
        }
    }

    /// Buffers held by calls.
    pub fn in_use(&self) -> usize {
        self.used.iter().filter(|u| **u).count()
    }
}

impl<const SIZE: usize, const COUNT: usize> Default for SlabStore<SIZE, COUNT> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SIZE: usize, const COUNT: usize> core::fmt::Debug for SlabStore<SIZE, COUNT> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SlabStore")
            .field("size", &SIZE)
            .field("count", &COUNT)
            .field("in_use", &self.in_use())
            .finish()
    }
}

impl<const SIZE: usize, const COUNT: usize> CallStore for SlabStore<SIZE, COUNT> {
    type Buf = SlabBuf;

    fn max_len(&self) -> usize {
        SIZE
    }

    fn take(&mut self, len: usize) -> Option<SlabBuf> {
        if len > SIZE {
            return None;
        }
        let i = self.used.iter().position(|u| !u)?;
        self.used[i] = true;
        Some(SlabBuf(i))
    }

    fn grow(&mut self, _: &mut SlabBuf, len: usize) -> bool {
        len <= SIZE
    }

    fn bytes<'a>(&'a self, buf: &'a SlabBuf) -> &'a [u8] {
        &self.bufs[buf.0]
    }

    fn bytes_mut<'a>(&'a mut self, buf: &'a mut SlabBuf) -> &'a mut [u8] {
        &mut self.bufs[buf.0]
    }

    fn put(&mut self, buf: SlabBuf) {
        self.used[buf.0] = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_hands_out_each_slot_once() {
        let mut s = SlabStore::<16, 2>::new();
        assert!(s.take(17).is_none(), "over SIZE");
        let mut a = s.take(16).expect("first");
        let b = s.take(1).expect("second");
        assert!(s.take(1).is_none(), "all in use");
        s.bytes_mut(&mut a)[0] = 7;
        assert!(s.grow(&mut a, 16) && !s.grow(&mut a, 17));
        assert_eq!(s.bytes(&a)[0], 7);
        assert_eq!(s.in_use(), 2);
        s.put(b);
        let c = s.take(4).expect("freed slot");
        assert_eq!(c, SlabBuf(1));
        assert_eq!(s.in_use(), 2);
    }
}
