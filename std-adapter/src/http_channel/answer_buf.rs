//! The buffers answers are read into, kept between exchanges.
//!
//! A JSON or event-stream answer is read into a buffer of
//! `max_message_bytes` (4 MiB by default). Allocating and zeroing one for
//! every exchange cost more than the exchange itself (a 4 MiB `memset` a
//! call under callgrind). The pool keeps up to `pool_size` of them. A
//! buffer goes back only when the exchange ended with a judged answer and
//! every message it held was small, so the pages it keeps resident stay
//! few; one that held a large message, or whose exchange failed, is
//! dropped and its memory returned.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

/// Messages up to this length leave a buffer fit to be kept.
const KEEP_TOUCHED: usize = 64 << 10;

/// Buffers of one channel, each `len` octets.
#[derive(Debug)]
pub(crate) struct BufPool {
    bufs: Mutex<Vec<Vec<u8>>>,
    len: usize,
    keep: usize,
}

impl BufPool {
    /// Buffers of `len` octets, at most `keep` of them kept.
    pub(crate) fn new(len: usize, keep: usize) -> Self {
        Self {
            bufs: Mutex::new(Vec::new()),
            len,
            keep,
        }
    }

    /// An empty buffer, sized once the answer's media type is known.
    pub(crate) fn empty(&self) -> AnswerBuf<'_> {
        AnswerBuf {
            pool: self,
            buf: Vec::new(),
            pooled: false,
            clean: false,
            largest: 0,
        }
    }
}

/// A buffer an answer is read into; back to its pool when dropped, if it
/// stayed small.
pub(crate) struct AnswerBuf<'p> {
    pool: &'p BufPool,
    buf: Vec<u8>,
    /// It has the pool's length (from the pool or new).
    pooled: bool,
    /// The exchange ended with a judged answer.
    clean: bool,
    /// The longest message judged in it.
    largest: usize,
}

impl AnswerBuf<'_> {
    /// Sizes the buffer for a message answer (the pool's length, reused
    /// when one is free) or for anything else (`small` octets, new).
    pub(crate) fn size_for(&mut self, message: bool, small: usize) {
        if message {
            let reused = self.pool.bufs.lock().ok().and_then(|mut b| b.pop());
            self.buf = reused.unwrap_or_else(|| vec![0u8; self.pool.len]);
            self.pooled = true;
        } else {
            self.buf = vec![0u8; small.min(self.pool.len)];
            self.pooled = false;
        }
    }

    /// A message of `len` octets was judged in the buffer.
    pub(crate) fn judged(&mut self, len: usize) {
        self.largest = self.largest.max(len);
    }

    /// The exchange's answer was judged: the buffer may be kept.
    pub(crate) fn done(&mut self) {
        self.clean = true;
    }
}

impl Deref for AnswerBuf<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl DerefMut for AnswerBuf<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for AnswerBuf<'_> {
    fn drop(&mut self) {
        if !(self.pooled && self.clean && self.largest <= KEEP_TOUCHED) {
            return;
        }
        if let Ok(mut bufs) = self.pool.bufs.lock()
            && bufs.len() < self.pool.keep
        {
            bufs.push(std::mem::take(&mut self.buf));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn small_answers_reuse_the_buffer_large_or_failed_ones_drop_it() {
        let pool = BufPool::new(1 << 20, 2);
        let first = {
            let mut b = pool.empty();
            b.size_for(true, 4096);
            b[..5].copy_from_slice(b"hello");
            b.judged(5);
            b.done();
            b.as_ptr()
        };
        let mut b = pool.empty();
        b.size_for(true, 4096);
        assert_eq!(b.as_ptr(), first, "the kept buffer is used again");
        assert_eq!(b.len(), 1 << 20);
        b.judged(KEEP_TOUCHED + 1);
        b.done();
        drop(b);
        assert!(
            pool.bufs.lock().unwrap().is_empty(),
            "a large message drops it"
        );
        let mut failed = pool.empty();
        failed.size_for(true, 4096);
        drop(failed);
        assert!(
            pool.bufs.lock().unwrap().is_empty(),
            "a failed exchange drops it"
        );
        let mut other = pool.empty();
        other.size_for(false, 4096);
        other.done();
        assert_eq!(other.len(), 4096);
        drop(other);
        assert!(
            pool.bufs.lock().unwrap().is_empty(),
            "small buffers are not kept"
        );
    }
}
