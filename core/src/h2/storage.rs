//! Where a [`Connection`](super::Connection) keeps its large parts: three
//! frame buffers, its stream slots and its HPACK table.
//!
//! The slots and the table are [`Records`] of the type
//! [`Storage::Records`] names: [`InlineRecords`] for [`InlineStorage`] (all
//! `STREAMS` slots and `TABLE` bytes inside the connection), or storage that
//! grows with the peak number of streams and the table's contents (the
//! tokio driver's). An engine built on a connection keeps its per-call
//! records in the same kind of storage.
//!
//! A connection needs three buffers of `BUF` octets: the field of a header
//! block that straddles two fragments, and the Huffman scratch, while a block
//! is received ([`FrameBuffer::Block`]; the block itself is decoded as it
//! arrives and never kept, so a block of any size fits), the decoded header
//! list of the last
//! [`Event::Headers`](super::Event::Headers), which
//! [`Connection::headers`](super::Connection::headers) lends
//! ([`FrameBuffer::Headers`]), and the frames waiting for `poll_transmit`
//! ([`FrameBuffer::Transmit`]). They are empty almost all the time.
//!
//! [`InlineStorage`], the default, holds all three inline: the connection's
//! `size_of` is its whole cost and nothing can fail. A driver with an
//! allocator can pass its own [`Storage`] that holds a buffer only while
//! it is in use (the tokio driver takes them from a per-thread free list).
//!
//! # The protocol
//!
//! The connection calls [`Storage::acquire`] right before it writes into
//! a buffer, and [`Storage::release`] where the buffer becomes empty:
//!
//! - `Transmit`: acquired when `send_headers`, `send_data` or `reset` write a
//!   frame; released when `poll_transmit` has handed out every queued frame;
//! - `Block`: acquired when HEADERS starts a header block; released when the
//!   block ends (END_HEADERS), or when the connection fails;
//! - `Headers`: acquired when HEADERS starts a block whose list is kept (a
//!   request, a response or trailers of a live stream), as the list is
//!   stored while the block is decoded; released when the
//!   event that lent it was read (on the next `poll_event` or `recv`, which
//!   ends what `Connection::headers` returns for it), when the block turned
//!   out to be an error, or when the connection closes.
//!
//! # When a buffer cannot be had
//!
//! An implementation may refuse (a bounded pool). The connection answers:
//!
//! - `Transmit`: as if the transmit buffer were full. `send_headers` and an
//!   empty `send_data(.., true)` fail with
//!   [`StreamError::TransmitFull`](super::StreamError::TransmitFull),
//!   `send_data` takes 0 octets, and the stream gets
//!   [`Event::SendReady`](super::Event::SendReady) from the first
//!   `poll_transmit` that can acquire the buffer; a driver whose pool can
//!   refuse calls `poll_transmit` again when the pool has room. A `reset`
//!   still goes out (its RST_STREAM takes the small inline refusal queue).
//!   Control frames never need this buffer.
//! - `Block`: a field that straddles frames could not be decoded, so the
//!   HPACK context would be lost: a connection error,
//!   GOAWAY(ENHANCE_YOUR_CALM) (RFC 9113 §10.5.1).
//! - `Headers`: the block is decoded to keep HPACK in step and dropped; a new
//!   stream is refused with RST_STREAM(REFUSED_STREAM) (the peer may retry
//!   it), a stream already open is reset with ENHANCE_YOUR_CALM.
//!
//! [`InlineStorage`] never refuses.

use crate::records::{InlineRecords, Records};

/// One of the connection's three buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameBuffer {
    /// The field of a received header block that straddles frames or `recv`
    /// calls, decoded as it arrives; also the scratch space for Huffman
    /// decoding. Its size bounds the largest field kept, and should be at
    /// least the HPACK table's, so that any field the peer indexes fits.
    Block,
    /// The decoded header list of the last `Headers` event, read through
    /// `Connection::headers`.
    Headers,
    /// Frames waiting for `poll_transmit` (HEADERS, DATA, RST_STREAM).
    Transmit,
}

impl FrameBuffer {
    /// All three, in a fixed order.
    pub const ALL: [FrameBuffer; 3] = [Self::Block, Self::Headers, Self::Transmit];
}

/// Storage for a connection's three `BUF`-octet buffers, and the kind of
/// [`Records`] its slots and HPACK table live in. See the
/// [module docs](self) for when each buffer is acquired and released.
///
/// A buffer that is held has at least `BUF` octets (the connection treats
/// a shorter one as refused); one that is not held reads as empty. Contents
/// need not be zeroed: the connection reads only what it wrote since it
/// acquired the buffer.
pub trait Storage<const BUF: usize> {
    /// Where the connection keeps its stream slots and HPACK table (and an
    /// engine its calls): up to `N` elements of `T`.
    type Records<T: Default, const N: usize>: Records<T>;

    /// Makes `which` available; true when it is held (also when it already
    /// was), false when it cannot be had now.
    fn acquire(&mut self, which: FrameBuffer) -> bool;

    /// `which` is empty: the implementation may take it back. Releasing a
    /// buffer that is not held does nothing.
    fn release(&mut self, which: FrameBuffer);

    /// Whether `which` is held.
    fn is_held(&self, which: FrameBuffer) -> bool;

    /// The contents of `which`; empty when it is not held.
    fn get(&self, which: FrameBuffer) -> &[u8];

    /// The contents of `which`; empty when it is not held.
    fn get_mut(&mut self, which: FrameBuffer) -> &mut [u8];

    /// The block and the header store at once: decoding reads the one and
    /// writes the other. Each is empty when not held.
    fn block_and_headers(&mut self) -> (&mut [u8], &mut [u8]);
}

/// The three buffers inline, always held: the default, for `no_std`
/// without an allocator.
#[derive(Debug, Clone)]
pub struct InlineStorage<const BUF: usize> {
    block: [u8; BUF],
    headers: [u8; BUF],
    transmit: [u8; BUF],
}

impl<const BUF: usize> InlineStorage<BUF> {
    pub const fn new() -> Self {
        Self {
            block: [0; BUF],
            headers: [0; BUF],
            transmit: [0; BUF],
        }
    }
}

impl<const BUF: usize> Default for InlineStorage<BUF> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const BUF: usize> Storage<BUF> for InlineStorage<BUF> {
    type Records<T: Default, const N: usize> = InlineRecords<T, N>;

    #[inline(always)]
    fn acquire(&mut self, _: FrameBuffer) -> bool {
        true
    }

    #[inline(always)]
    fn release(&mut self, _: FrameBuffer) {}

    #[inline(always)]
    fn is_held(&self, _: FrameBuffer) -> bool {
        true
    }

    #[inline(always)]
    fn get(&self, which: FrameBuffer) -> &[u8] {
        match which {
            FrameBuffer::Block => &self.block,
            FrameBuffer::Headers => &self.headers,
            FrameBuffer::Transmit => &self.transmit,
        }
    }

    #[inline(always)]
    fn get_mut(&mut self, which: FrameBuffer) -> &mut [u8] {
        match which {
            FrameBuffer::Block => &mut self.block,
            FrameBuffer::Headers => &mut self.headers,
            FrameBuffer::Transmit => &mut self.transmit,
        }
    }

    #[inline(always)]
    fn block_and_headers(&mut self) -> (&mut [u8], &mut [u8]) {
        (&mut self.block, &mut self.headers)
    }
}
