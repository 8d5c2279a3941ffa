//! The call store of the tokio driver: each call's buffer is a `Vec<u8>`
//! that holds what the call uses (its request head and message, then each
//! outgoing message), up to a limit. When the call ends a small buffer goes
//! to a per-thread free list for the next call, so that a call of the usual
//! size takes no allocation and no free; a larger one is freed.

use std::cell::RefCell;

use mcpwire_core::mcp::CallStore;

use crate::storage::{FreeList, give_to, take_from};

/// The largest buffer kept for reuse (so at most 256 KiB per thread).
const KEEP: usize = 16 * 1024;
/// The least room a new buffer gets: a call's buffer is often taken small
/// and grown to its message, and this is what the usual message needs
/// without a reallocation.
const MIN_ROOM: usize = 1024;

thread_local! {
    static FREE: FreeList<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Heap buffers for calls, each at most `max_len` octets.
#[derive(Debug, Clone, Copy)]
pub struct HeapStore {
    max_len: usize,
}

impl HeapStore {
    /// A store whose buffers grow up to `max_len` octets.
    pub fn new(max_len: usize) -> Self {
        Self { max_len }
    }
}

impl CallStore for HeapStore {
    type Buf = Vec<u8>;

    fn max_len(&self) -> usize {
        self.max_len
    }

    fn take(&mut self, len: usize) -> Option<Vec<u8>> {
        if len > self.max_len {
            return None;
        }
        Some(match take_from(&FREE, |b| b.capacity() >= len) {
            Some(mut buf) => {
                buf.clear();
                buf.resize(len, 0);
                buf
            }
            None => {
                let mut buf = Vec::with_capacity(len.max(MIN_ROOM).min(self.max_len));
                buf.resize(len, 0);
                buf
            }
        })
    }

    fn grow(&mut self, buf: &mut Vec<u8>, len: usize) -> bool {
        if len > self.max_len {
            return false;
        }
        if buf.len() < len {
            // At least double, so that a message written in steps does
            // not reallocate at every step.
            let target = len.max(buf.len().saturating_mul(2)).min(self.max_len);
            buf.resize(target, 0);
        }
        true
    }

    fn bytes<'a>(&'a self, buf: &'a Vec<u8>) -> &'a [u8] {
        buf
    }

    fn bytes_mut<'a>(&'a mut self, buf: &'a mut Vec<u8>) -> &'a mut [u8] {
        buf
    }

    fn put(&mut self, buf: Vec<u8>) {
        if buf.capacity() <= KEEP {
            give_to(&FREE, buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_within_the_limit_and_keeps_content() {
        let mut s = HeapStore::new(100);
        assert!(s.take(101).is_none());
        let mut b = s.take(10).expect("within the limit");
        s.bytes_mut(&mut b)[..3].copy_from_slice(b"abc");
        assert!(s.grow(&mut b, 30));
        assert!(b.len() >= 30 && b.len() <= 100);
        assert_eq!(&s.bytes(&b)[..3], b"abc");
        assert!(!s.grow(&mut b, 101));
        assert!(s.grow(&mut b, 100));
        assert_eq!(b.len(), 100);
    }
}
