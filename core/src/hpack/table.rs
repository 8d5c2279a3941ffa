//! The dynamic table (RFC 7541 §2.3.2, §4), in one array of at most `N`
//! bytes that grows as entries arrive (all `N` at once for inline storage).
//!
//! The RFC charges every entry its name, its value and 32 octets. The table
//! spends those 32 octets on a 6-octet record (offset, name length, value
//! length), so entries and records always fit in `N` bytes together:
//!
//! ```text
//! [ evicted | live names and values, oldest first | free | records, newest first ]
//! 0         head                                   tail   low                  high <= len
//! ```
//!
//! Entries are stored contiguously, so fields are handed out as plain slices.
//! Eviction only moves `head` and `high`; when an insertion does not fit
//! between `tail` and `low`, the live bytes move to the front and the records
//! to the back (compaction), which the accounting above guarantees makes room
//! once the array has its full `N` bytes. Until then, an insertion that does
//! not fit after compaction lengthens the array (to twice its length or what
//! the entry needs, at most `N`) and moves the records to the new end.

use super::{DecodeError, ENTRY_OVERHEAD, huffman};
use crate::records::Records;

const RECORD: usize = 6;

/// The first length of a growing array: room for a few typical entries.
const FIRST_GROWTH: usize = 256;

/// Where the bytes of a name come from.
#[derive(Debug, Clone, Copy)]
pub(super) enum NameSource<'b> {
    Bytes(&'b [u8]),
    /// Huffman-coded bytes, and the length they decode to.
    Huffman(&'b [u8], usize),
    /// The name of the entry at this 0-based dynamic index.
    Entry(usize),
}

/// Where the bytes of a value come from.
#[derive(Debug, Clone, Copy)]
pub(super) enum ValueSource<'b> {
    Bytes(&'b [u8]),
    Huffman(&'b [u8], usize),
}

pub(super) struct DynamicTable<B> {
    buf: B,
    head: usize,
    tail: usize,
    low: usize,
    high: usize,
    /// Sum of the RFC sizes of the live entries.
    size: usize,
    /// The maximum size in force (last size update, or the initial maximum).
    max_size: usize,
}

impl<B: Records<u8>> DynamicTable<B> {
    const N: usize = B::LIMIT;

    pub(super) fn new(max_size: usize) -> Self {
        const {
            assert!(
                B::LIMIT <= u16::MAX as usize,
                "dynamic table storage above 65535 bytes"
            )
        };
        let buf = B::default();
        let end = buf.len();
        Self {
            buf,
            head: 0,
            tail: 0,
            low: end,
            high: end,
            size: 0,
            max_size: max_size.min(Self::N),
        }
    }

    /// The bytes the storage holds now (at most `N`).
    pub(super) fn storage_len(&self) -> usize {
        self.buf.len()
    }

    pub(super) fn len(&self) -> usize {
        (self.high - self.low) / RECORD
    }

    pub(super) fn size(&self) -> usize {
        self.size
    }

    pub(super) fn max_size(&self) -> usize {
        self.max_size
    }

    /// Entry `i`, 0 being the newest (HPACK index 62).
    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let (offset, name_len, value_len) = self.record(i)?;
        let name = self.buf.get(offset..offset + name_len)?;
        let value = self
            .buf
            .get(offset + name_len..offset + name_len + value_len)?;
        Some((name, value))
    }

    #[inline]
    fn record(&self, i: usize) -> Option<(usize, usize, usize)> {
        let at = self.low.checked_add(i.checked_mul(RECORD)?)?;
        if at + RECORD > self.high {
            return None;
        }
        let r = self.buf.get(at..at + RECORD)?;
        let field = |k: usize| usize::from(u16::from_le_bytes([r[k], r[k + 1]]));
        Some((field(0), field(2), field(4)))
    }

    /// Applies a new maximum size, evicting what no longer fits. Callers
    /// check the value against the acknowledged setting; here it is also
    /// bounded by the storage.
    pub(super) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size.min(Self::N);
        while self.size > self.max_size {
            self.evict_oldest();
        }
    }

    pub(super) fn clear(&mut self) {
        while self.len() > 0 {
            self.evict_oldest();
        }
    }

    fn evict_oldest(&mut self) {
        let Some((_, name_len, value_len)) = self.record(self.len().wrapping_sub(1)) else {
            return;
        };
        self.head += name_len + value_len;
        self.high -= RECORD;
        self.size -= name_len + value_len + ENTRY_OVERHEAD;
    }

    /// The RFC size an entry from these sources would have.
    pub(super) fn entry_size(&self, name: NameSource<'_>, value: ValueSource<'_>) -> Option<usize> {
        Some(self.name_len(name)? + value_len(value) + ENTRY_OVERHEAD)
    }

    fn name_len(&self, name: NameSource<'_>) -> Option<usize> {
        match name {
            NameSource::Bytes(b) => Some(b.len()),
            NameSource::Huffman(_, len) => Some(len),
            NameSource::Entry(i) => self.record(i).map(|r| r.1),
        }
    }

    /// Adds an entry, evicting old ones (RFC 7541 §4.4). The caller has
    /// checked that its size is at most the maximum size, and has checked the
    /// Huffman strings with [`huffman::decoded_len`], which gave their lengths.
    pub(super) fn insert(
        &mut self,
        name: NameSource<'_>,
        value: ValueSource<'_>,
    ) -> Result<(), DecodeError> {
        let name_len = self.name_len(name).ok_or(DecodeError::InvalidIndex(0))?;
        let value_len = value_len(value);
        let entry = name_len + value_len + ENTRY_OVERHEAD;
        // The name may be in an entry that this insertion evicts (§4.4): note
        // where its bytes are before they stop being live.
        let name_at = match name {
            NameSource::Entry(i) => Some((self.record(i).map(|r| r.0).unwrap_or(0), i)),
            _ => None,
        };
        while self.size + entry > self.max_size && self.len() > 0 {
            self.evict_oldest();
        }
        let mut name_in_place = false;
        if self.tail + name_len + value_len + RECORD > self.low {
            let keep = match name_at {
                Some((offset, i)) if i >= self.len() => Some((offset, name_len)),
                _ => None,
            };
            self.compact(keep);
            name_in_place = keep.is_some();
            if self.tail + name_len + value_len + RECORD > self.low {
                self.grow(name_len + value_len + RECORD);
            }
        }
        let fits = self.tail + name_len + value_len + RECORD <= self.low;
        debug_assert!(fits, "dynamic table accounting broken");
        if !fits {
            // The accounting rules this out; refuse rather than corrupt the table.
            return Err(DecodeError::TableSizeTooLarge {
                requested: entry as u32,
                max: Self::N as u32,
            });
        }
        let at = self.tail;
        match name {
            NameSource::Bytes(b) => self.buf[at..at + name_len].copy_from_slice(b),
            NameSource::Huffman(src, _) => {
                huffman::decode(src, &mut self.buf[at..at + name_len])?;
            }
            NameSource::Entry(i) if !name_in_place => {
                // Still live, or evicted but not yet overwritten: either way
                // below `tail` and intact.
                let offset = if i >= self.len() {
                    name_at.map(|(o, _)| o).unwrap_or(0)
                } else {
                    self.record(i).map(|r| r.0).unwrap_or(0)
                };
                self.buf.copy_within(offset..offset + name_len, at);
            }
            NameSource::Entry(_) => {}
        }
        let v = at + name_len;
        match value {
            ValueSource::Bytes(b) => self.buf[v..v + value_len].copy_from_slice(b),
            ValueSource::Huffman(src, _) => {
                huffman::decode(src, &mut self.buf[v..v + value_len])?;
            }
        }
        self.low -= RECORD;
        let record = &mut self.buf[self.low..self.low + RECORD];
        // Every offset and length is below N <= u16::MAX.
        record[0..2].copy_from_slice(&(at as u16).to_le_bytes());
        record[2..4].copy_from_slice(&(name_len as u16).to_le_bytes());
        record[4..6].copy_from_slice(&(value_len as u16).to_le_bytes());
        self.tail = at + name_len + value_len;
        self.size += entry;
        Ok(())
    }

    /// Moves the live bytes to the front and the records to the back. With
    /// `keep`, the bytes of an evicted name (below `head`) are kept and end up
    /// right after the live bytes, where the new entry starts.
    fn compact(&mut self, keep: Option<(usize, usize)>) {
        let live = self.tail - self.head;
        match keep {
            None => self.buf.copy_within(self.head..self.tail, 0),
            Some((offset, len)) => {
                // [name .. garbage .. live] -> [name live] -> [live name] -> front.
                self.buf.copy_within(self.head..self.tail, offset + len);
                self.buf[offset..offset + len + live].rotate_left(len);
                self.buf.copy_within(offset..offset + live + len, 0);
            }
        }
        let shift = self.head;
        let records = self.high - self.low;
        let mut at = self.low;
        while at < self.high {
            let old = u16::from_le_bytes([self.buf[at], self.buf[at + 1]]);
            // Live offsets are at least `head`.
            let new = old - shift as u16;
            self.buf[at..at + 2].copy_from_slice(&new.to_le_bytes());
            at += RECORD;
        }
        let end = self.buf.len();
        self.buf.copy_within(self.low..self.high, end - records);
        self.low = end - records;
        self.high = end;
        self.head = 0;
        self.tail = live;
    }

    /// Lengthens the array so that `need` more bytes fit between `tail` and
    /// `low`, and moves the records to its new end. Does nothing at `N`, or
    /// when the storage refuses (the caller then finds no room).
    fn grow(&mut self, need: usize) {
        let old = self.buf.len();
        let want = (self.tail + need + (self.high - self.low))
            .max(old * 2)
            .max(FIRST_GROWTH)
            .min(Self::N);
        if want <= old || !self.buf.grow_to(want) {
            return;
        }
        let shift = self.buf.len() - old;
        self.buf.copy_within(self.low..self.high, self.low + shift);
        self.low += shift;
        self.high += shift;
    }
}

fn value_len(value: ValueSource<'_>) -> usize {
    match value {
        ValueSource::Bytes(b) => b.len(),
        ValueSource::Huffman(_, len) => len,
    }
}
