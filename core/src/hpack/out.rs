//! A writer over a caller slice that keeps counting past its end, so that a
//! too-small buffer is reported once, with the size the whole output needs.

use super::EncodeError;

pub(super) struct Out<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Out<'a> {
    pub(super) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    #[inline]
    pub(super) fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
        }
        self.len += 1;
    }

    #[inline]
    pub(super) fn extend(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.len..end) {
            dst.copy_from_slice(bytes);
        }
        self.len = end;
    }

    /// The free part of the buffer, when at least `n` bytes are left.
    #[inline]
    pub(super) fn reserve(&mut self, n: usize) -> Option<&mut [u8]> {
        let end = self.len + n;
        self.buf.get_mut(self.len..end)
    }

    /// Records `n` bytes written into the slice [`Out::reserve`] gave, or
    /// counted without being written.
    #[inline]
    pub(super) fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// The octets written so far.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// What was written from `start` on, when all of it fit.
    #[inline]
    pub(super) fn written(&self, start: usize) -> Option<&[u8]> {
        self.buf.get(start..self.len)
    }

    pub(super) fn finish(self) -> Result<usize, EncodeError> {
        if self.len <= self.buf.len() {
            Ok(self.len)
        } else {
            Err(EncodeError::BufferTooSmall { needed: self.len })
        }
    }
}
