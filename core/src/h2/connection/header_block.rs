//! Received header blocks: HEADERS and CONTINUATION fragments HPACK-decoded
//! as they arrive (RFC 9113 §4.3, §6.2, §6.10) into the header store, the
//! field checks of §8.2–8.3 handed to [`HeaderStore`], and what the block
//! means for its stream (a new stream, a response, trailers, a refusal).
//!
//! The block itself is never kept: the block buffer holds only the field
//! that straddles two fragments (and the Huffman scratch), so a block of
//! any size costs `BUF` octets, and a field or list over the limits is a
//! stream error once the block ends, with the HPACK table still in step.

use super::super::config::Role;
use super::super::frame::{FrameHeader, flags};
use super::super::headers::{HeaderList, HeaderStore, HeadersKind};
use super::events::Queued;
use super::limits::Limit;
use super::streams::Half;
use super::{ConnResult, Connection, State, StreamRef};
use crate::h2::{ErrorCode, FrameBuffer, Storage};
use crate::hpack::{DecodeError, Decoder, Field};
use crate::records::Records;

/// The header block being decoded.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
    stream_id: u32,
    end_stream: bool,
    continuations: u32,
    /// The block opened a stream (server) or belongs to one we track.
    target: BlockTarget,
    /// What the list is, when it is kept in the header store; `None` when
    /// the block is only decoded for HPACK, or the store could not be had.
    kind: Option<HeadersKind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockTarget {
    /// A live stream slot.
    Slot(usize),
    /// A new stream from the peer, to open when the block is complete.
    New,
    /// A new stream to refuse with REFUSED_STREAM once decoded.
    Refuse,
    /// Decode to keep HPACK in step, then drop.
    Ignore,
}

/// The receive side of header compression: the block being decoded (a
/// field that straddles fragments waits in the storage's block buffer), the
/// HPACK decoder, and the decoded list of the last `Headers` event (in the
/// storage's headers buffer).
pub(super) struct HeaderBlock<const TABLE: usize, R> {
    info: Option<Block>,
    pub(super) decoder: Decoder<TABLE, R>,
    store: HeaderStore,
    /// An event points into the store; recv waits until it was read.
    pub(super) store_busy: bool,
    /// The stream whose `Headers` event was handed out: the store is lent
    /// to [`Connection::headers`] until the next `poll_event` or `recv`.
    lent: Option<StreamRef>,
}

impl<const TABLE: usize, R: Records<u8>> HeaderBlock<TABLE, R> {
    pub(super) fn new(decoder: Decoder<TABLE, R>) -> Self {
        Self {
            info: None,
            decoder,
            store: HeaderStore::new(),
            store_busy: false,
            lent: None,
        }
    }

    /// The stream of the block being joined: every frame until its end
    /// must be a CONTINUATION of that stream (RFC 9113 §6.2).
    pub(super) fn open_stream_id(&self) -> Option<u32> {
        self.info.map(|b| b.stream_id)
    }

    /// The `Headers` event of `stream` was handed out: its list is readable
    /// through [`Connection::headers`] until the next `poll_event` or `recv`.
    pub(super) fn lend(&mut self, stream: StreamRef) {
        self.lent = Some(stream);
    }

    /// The decoded list in `headers` (the storage's headers buffer), if it is
    /// lent to `stream`.
    pub(super) fn lent_list<'b>(
        &self,
        stream: StreamRef,
        headers: &'b [u8],
    ) -> Option<HeaderList<'b>> {
        (self.lent == Some(stream)).then(|| self.store.list(headers))
    }

    /// Forgets the block and the list (the connection closed).
    pub(super) fn clear(&mut self) {
        self.store_busy = false;
        self.lent = None;
        self.info = None;
    }
}

impl<
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    const RESETS: usize,
    B: Storage<BUF>,
> Connection<STREAMS, TABLE, BUF, RESETS, B>
{
    /// A HEADERS frame header: where its block goes.
    pub(super) fn on_headers_header(&mut self, head: &FrameHeader) -> ConnResult {
        let id = head.stream_id;
        if head.length == 0 && !head.has(flags::END_HEADERS) {
            self.count_empty()?;
        }
        let target = match self.streams.find(id) {
            Some(slot) => match self.streams.get(slot).map(|s| s.recv) {
                Some(Half::Ended) => {
                    self.stream_error(slot, ErrorCode::STREAM_CLOSED)?;
                    BlockTarget::Ignore
                }
                Some(_) => BlockTarget::Slot(slot),
                None => BlockTarget::Ignore,
            },
            None if self.streams.peer_initiated(id) && id > self.streams.last_peer_id => {
                if self.role == Role::Client {
                    return Err((
                        ErrorCode::PROTOCOL_ERROR,
                        "HEADERS on a stream the server cannot open",
                    ));
                }
                self.streams.note_skipped(id);
                self.streams.last_peer_id = id;
                if self.goaway_sent.is_some() || self.state != State::Open {
                    BlockTarget::Ignore
                } else if self.streams.peer_streams >= self.settings.local.max_concurrent_streams
                    || !self.streams.has_free_slot()
                {
                    BlockTarget::Refuse
                } else {
                    BlockTarget::New
                }
            }
            None if self.streams.was_reset(id) => BlockTarget::Ignore,
            // An id the peer skipped was never opened (RFC 9113 §5.1.1).
            None if self.streams.is_idle(id) || self.streams.was_skipped(id) => {
                return Err((
                    ErrorCode::PROTOCOL_ERROR,
                    "HEADERS on a stream id never opened",
                ));
            }
            // A stream that was open and is closed (RFC 9113 §5.1).
            None => return Err((ErrorCode::STREAM_CLOSED, "HEADERS on a closed stream")),
        };
        if !self.hold(FrameBuffer::Block) {
            // Without the buffer a field that straddles frames cannot be
            // decoded, and the HPACK context would be lost (see `storage`).
            return Err((ErrorCode::ENHANCE_YOUR_CALM, "no buffer for a header block"));
        }
        let kind = match target {
            BlockTarget::Slot(slot) => match (self.role, self.streams.get(slot)) {
                (Role::Client, Some(s)) if !s.head_received => Some(HeadersKind::Response),
                _ => Some(HeadersKind::Trailers),
            },
            BlockTarget::New => Some(HeadersKind::Request),
            BlockTarget::Refuse | BlockTarget::Ignore => None,
        };
        // The list is stored as it is decoded. Without room for it the
        // block is only decoded, then refused (see `storage`).
        let kind = kind.filter(|_| self.hold(FrameBuffer::Headers));
        if let Some(kind) = kind {
            self.block.store.begin(kind);
        }
        self.block.decoder.begin_block();
        self.block.info = Some(Block {
            stream_id: id,
            end_stream: head.has(flags::END_STREAM),
            continuations: 0,
            target,
            kind,
        });
        Ok(())
    }

    /// Octets of the open block's fragment, as they arrive: decoded at once,
    /// the fields checked and stored if the block's list is kept.
    pub(super) fn on_fragment(&mut self, fragment: &[u8]) -> ConnResult {
        let Some(info) = self.block.info else {
            return Err((ErrorCode::INTERNAL_ERROR, "fragment without a header block"));
        };
        let hb = &mut self.block;
        let (buf, list) = self.bufs.block_and_headers();
        let keep = info.kind.is_some();
        let store = &mut hb.store;
        // One closure for both cases: one copy of the decoder in flash.
        hb.decoder
            .decode_fragment(fragment, buf, |f| {
                if keep {
                    store.push(list, f);
                }
            })
            .map_err(decode_failure)
    }

    /// A CONTINUATION frame header; the reader checked that it continues
    /// the open block.
    pub(super) fn on_continuation_header(&mut self, head: &FrameHeader) -> ConnResult {
        let Some(block) = self.block.info.as_mut() else {
            return Err((
                ErrorCode::PROTOCOL_ERROR,
                "CONTINUATION without a header block",
            ));
        };
        block.continuations += 1;
        if block.continuations > self.config.max_continuation_frames {
            return Err((ErrorCode::ENHANCE_YOUR_CALM, "too many CONTINUATION frames"));
        }
        if head.length == 0 && !head.has(flags::END_HEADERS) {
            self.count_empty()?;
        }
        Ok(())
    }

    /// A HEADERS frame whose priority names its own stream (RFC 9113 §5.3.1):
    /// a stream error, after the block is decoded for HPACK.
    pub(super) fn self_dependency(&mut self) -> ConnResult {
        let Some(block) = self.block.info.as_mut() else {
            return Ok(());
        };
        let id = block.stream_id;
        match block.target {
            BlockTarget::Slot(slot) => {
                block.target = BlockTarget::Ignore;
                self.stream_error(slot, ErrorCode::PROTOCOL_ERROR)
            }
            BlockTarget::New | BlockTarget::Refuse => {
                block.target = BlockTarget::Ignore;
                self.refuse(id, ErrorCode::PROTOCOL_ERROR);
                Ok(())
            }
            BlockTarget::Ignore => Ok(()),
        }
    }

    /// The header list of the last `Headers` event was read: its buffer
    /// goes back.
    pub(super) fn free_read_store(&mut self) {
        if self.block.lent.take().is_some() {
            self.block.store_busy = false;
            self.bufs.release(FrameBuffer::Headers);
        }
    }

    /// The open block ended (END_HEADERS): the decoder's verdict, the
    /// block buffer given back, and the header store too unless an event
    /// points into it.
    pub(super) fn end_block(&mut self) -> ConnResult {
        let Some(info) = self.block.info.take() else {
            return Ok(());
        };
        let decoded = self.block.decoder.end_block();
        self.bufs.release(FrameBuffer::Block);
        let result = match decoded {
            Ok(()) => self.block_decoded(info, false),
            Err(e) if e.is_size_error() => self.block_decoded(info, true),
            Err(e) => Err(decode_failure(e)),
        };
        if !self.block.store_busy {
            self.bufs.release(FrameBuffer::Headers);
        }
        result
    }

    /// What a decoded block means for its stream; `size_error` when a field
    /// or the list went over the limits.
    fn block_decoded(&mut self, info: Block, size_error: bool) -> ConnResult {
        match info.target {
            BlockTarget::Slot(slot) if self.streams.get(slot).is_none() => return Ok(()),
            BlockTarget::Slot(_) | BlockTarget::New => {}
            BlockTarget::Refuse => {
                self.count(Limit::Refused, "too many refused streams")?;
                self.refuse(info.stream_id, ErrorCode::REFUSED_STREAM);
                return Ok(());
            }
            BlockTarget::Ignore => return Ok(()),
        }
        let Some(kind) = info.kind else {
            // No room for the list (see `storage`): refuse a new stream,
            // reset one already open.
            return match info.target {
                BlockTarget::Slot(slot) => self.stream_error(slot, ErrorCode::ENHANCE_YOUR_CALM),
                _ => {
                    self.refuse(info.stream_id, ErrorCode::REFUSED_STREAM);
                    Ok(())
                }
            };
        };
        let size_error = size_error || self.block.store.overflow;
        let checked = self.block.store.finish(self.bufs.get(FrameBuffer::Headers));
        // Open the stream (server), or find it.
        let slot = match info.target {
            BlockTarget::Slot(slot) => slot,
            _ => match self.open_peer_stream(info.stream_id) {
                Some(slot) => slot,
                None => {
                    self.refuse(info.stream_id, ErrorCode::REFUSED_STREAM);
                    return Ok(());
                }
            },
        };
        if size_error {
            return self.reject_oversize(slot, kind, info.end_stream);
        }
        let kind = match checked {
            Ok(kind) => kind,
            Err(_) => return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR),
        };
        let end_stream = info.end_stream;
        if matches!(kind, HeadersKind::Trailers) && !end_stream {
            return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
        }
        if matches!(kind, HeadersKind::Informational) && end_stream {
            return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
        }
        let content_length = self.block.store.content_length;
        if let Some(s) = self.streams.get_mut(slot) {
            match kind {
                HeadersKind::Request | HeadersKind::Response => {
                    s.head_received = true;
                    s.recv = Half::Open;
                    s.content_length = content_length;
                    if end_stream && content_length.is_some_and(|n| n != 0) {
                        return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
                    }
                }
                HeadersKind::Informational => s.recv = Half::Open,
                HeadersKind::Trailers => {
                    if s.content_length.is_some_and(|n| n != s.data_received) {
                        return self.stream_error(slot, ErrorCode::PROTOCOL_ERROR);
                    }
                }
            }
        }
        let stream = self.streams.handle(slot);
        if let Some(st) = self.streams.get_mut(slot) {
            st.announced = true;
        }
        self.events.push(Queued::Headers {
            stream,
            kind,
            end_stream,
        });
        self.block.store_busy = true;
        if end_stream {
            self.end_recv(slot);
        }
        Ok(())
    }

    /// A header list over our limits. A request head gets `:status 431`
    /// (and RST_STREAM(NO_ERROR) if the request is still coming); anything
    /// else resets the stream. Either way the stream is freed at once and the
    /// HPACK context stays in step.
    fn reject_oversize(&mut self, slot: usize, kind: HeadersKind, end_stream: bool) -> ConnResult {
        if self.role == Role::Server && kind == HeadersKind::Request {
            let id = self.streams.get(slot).map_or(0, |s| s.id);
            let fields = [Field::new(b":status", b"431")];
            if self.write_headers_frames(id, fields, true, None).is_ok() {
                if !end_stream {
                    self.write_rst_in_order(id, ErrorCode::NO_ERROR);
                }
                self.streams.remember_reset(id);
                self.free_slot_now(slot);
                return Ok(());
            }
        }
        self.stream_error(slot, ErrorCode::PROTOCOL_ERROR)
    }
}

/// The connection error for a header block that cannot be decoded:
/// COMPRESSION_ERROR (RFC 9113 §4.3), but PROTOCOL_ERROR for a string
/// length past the end of the block (the binding's rule: the block is not
/// valid, not merely undecodable).
fn decode_failure(e: DecodeError) -> (ErrorCode, &'static str) {
    match e {
        DecodeError::StringPastEnd => (
            ErrorCode::PROTOCOL_ERROR,
            "a string length past the end of the header block",
        ),
        _ => (ErrorCode::COMPRESSION_ERROR, "HPACK decoding failed"),
    }
}
