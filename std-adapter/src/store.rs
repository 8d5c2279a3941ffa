//! The call store of the tokio driver: each call's buffer is a `Vec<u8>`
//! that holds what the call uses (its request head and message, then each
//! outgoing message), up to a limit, and is freed when the call ends.

use mcpwire_core::mcp::CallStore;

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
        (len <= self.max_len).then(|| vec![0; len])
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

    fn put(&mut self, _: Vec<u8>) {}
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
