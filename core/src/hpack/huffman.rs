//! The static Huffman code of HPACK (RFC 7541 §5.2 and Appendix B).
//!
//! The code is canonical (codes of one length are consecutive, ordered by
//! symbol), so every table here is derived at compile time from the 257 code
//! lengths of Appendix B; no generated source is checked in.
//!
//! Decoding keeps up to 64 bits of input in an accumulator. With the
//! `huffman-fast` feature (the default) it looks the next [`LOOKUP_BITS`] bits
//! up in a table of `2^LOOKUP_BITS` entries, each holding the one or two
//! whole codes those bits start with: two symbols per step for common text,
//! whose codes are 5 to 8 bits long. Codes longer than the window (rare
//! punctuation, control and non-ASCII bytes) take the canonical walk. Without
//! the feature every symbol takes the canonical walk.
//!
//! Flash used by the tables (`thumbv7em-none-eabihf`): the canonical tables
//! are [`CANONICAL_TABLE_BYTES`] bytes; the fast table adds
//! [`FAST_TABLE_BYTES`]; the encoder's table of codes is
//! [`ENCODE_TABLE_BYTES`].

use super::{DecodeError, EncodeError};

/// Code length of every symbol, 0..=255 and EOS (256), from RFC 7541 Appendix B.
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0x00
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 0x10
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, // 0x20
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, // 0x30
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // 0x40
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, // 0x50
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, // 0x60
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, // 0x70
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 0x80
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 0x90
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 0xa0
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 0xb0
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 0xc0
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 0xd0
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 0xe0
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 0xf0
    30, // EOS
];

const EOS: u16 = 256;
const MAX_LEN: usize = 30;

/// Code of every symbol, right-aligned in `LENGTHS[sym]` bits.
const CODES: [u32; 257] = canonical_codes();

/// Symbols in canonical order (by length, then value).
const SORTED: [u16; 257] = sorted_symbols();

/// Per code length: the first code, and the position of its symbol in `SORTED`.
const FIRST_CODE: [u32; MAX_LEN + 1] = first_codes().0;
const FIRST_INDEX: [u16; MAX_LEN + 1] = first_codes().1;
/// Per code length L: one past the last code of length <= L, left-aligned in
/// 30 bits. The length of the code at the head of a 30-bit window is the
/// smallest L whose limit is above the window.
const LIMIT: [u32; MAX_LEN + 1] = limits();

/// Bits resolved by one look-up in the fast table.
#[cfg(feature = "huffman-fast")]
pub const LOOKUP_BITS: u32 = 12;
/// Bits resolved by one look-up in the fast table (no table in this build).
#[cfg(not(feature = "huffman-fast"))]
pub const LOOKUP_BITS: u32 = 0;

/// Per `LOOKUP_BITS`-bit window: first symbol (bits 0–7), second symbol
/// (8–15), length of the first code (16–19), length of both (20–23), number
/// of whole codes in the window (24–25; 0 when the first code is longer).
#[cfg(feature = "huffman-fast")]
static FAST: [u32; 1 << LOOKUP_BITS] = fast_table();

/// Flash taken by the canonical decoding tables.
pub const CANONICAL_TABLE_BYTES: usize = core::mem::size_of_val(&SORTED)
    + core::mem::size_of_val(&FIRST_CODE)
    + core::mem::size_of_val(&FIRST_INDEX)
    + core::mem::size_of_val(&LIMIT);
/// Flash taken by the fast decoding table (0 without `huffman-fast`).
pub const FAST_TABLE_BYTES: usize = if cfg!(feature = "huffman-fast") {
    4 << LOOKUP_BITS
} else {
    0
};
/// Flash taken by the encoding tables.
pub const ENCODE_TABLE_BYTES: usize =
    core::mem::size_of_val(&CODES) + core::mem::size_of_val(&LENGTHS);

const fn canonical_codes() -> [u32; 257] {
    let mut codes = [0u32; 257];
    let mut code = 0u32;
    let mut len = 1u8;
    while len as usize <= MAX_LEN {
        let mut s = 0;
        while s < 257 {
            if LENGTHS[s] == len {
                codes[s] = code;
                code += 1;
            }
            s += 1;
        }
        code <<= 1;
        len += 1;
    }
    codes
}

const fn sorted_symbols() -> [u16; 257] {
    let mut sorted = [0u16; 257];
    let mut n = 0;
    let mut len = 1u8;
    while len as usize <= MAX_LEN {
        let mut s = 0;
        while s < 257 {
            if LENGTHS[s] == len {
                sorted[n] = s as u16;
                n += 1;
            }
            s += 1;
        }
        len += 1;
    }
    sorted
}

const fn first_codes() -> ([u32; MAX_LEN + 1], [u16; MAX_LEN + 1]) {
    let mut code = [0u32; MAX_LEN + 1];
    let mut index = [0u16; MAX_LEN + 1];
    let mut next_code = 0u32;
    let mut next_index = 0u16;
    let mut len = 1;
    while len <= MAX_LEN {
        code[len] = next_code;
        index[len] = next_index;
        let mut count = 0;
        let mut s = 0;
        while s < 257 {
            if LENGTHS[s] as usize == len {
                count += 1;
            }
            s += 1;
        }
        next_code = (next_code + count) << 1;
        next_index += count as u16;
        len += 1;
    }
    (code, index)
}

const fn limits() -> [u32; MAX_LEN + 1] {
    let (code, index) = first_codes();
    let mut limit = [0u32; MAX_LEN + 1];
    let mut len = 1;
    while len <= MAX_LEN {
        let count = if len < MAX_LEN {
            index[len + 1] - index[len]
        } else {
            257 - index[len]
        };
        limit[len] = (code[len] + count as u32) << (MAX_LEN - len);
        len += 1;
    }
    limit
}

#[cfg(feature = "huffman-fast")]
const fn fast_table() -> [u32; 1 << LOOKUP_BITS] {
    let mut table = [0u32; 1 << LOOKUP_BITS];
    let shift = MAX_LEN as u32 - LOOKUP_BITS;
    let mask = (1u32 << LOOKUP_BITS) - 1;
    let mut i = 0;
    while i < table.len() {
        let window = i as u32;
        let (first, len1) = canonical_lookup(window << shift, 1);
        if len1 <= LOOKUP_BITS {
            let rest = (window << len1) & mask;
            let (second, len2) = canonical_lookup(rest << shift, 1);
            table[i] = if len1 + len2 <= LOOKUP_BITS {
                first as u32 | (second as u32) << 8 | len1 << 16 | (len1 + len2) << 20 | 2 << 24
            } else {
                first as u32 | len1 << 16 | len1 << 20 | 1 << 24
            };
        }
        i += 1;
    }
    table
}

/// The symbol at the head of a left-aligned 30-bit window, and its length.
/// Codes shorter than `min_len` are known not to be there.
#[inline]
const fn canonical_lookup(window: u32, min_len: usize) -> (u16, u32) {
    let mut len = min_len;
    // The all-ones window is EOS (length 30), whose limit is 2^30: the loop
    // always ends at or before MAX_LEN.
    while len < MAX_LEN && window >= LIMIT[len] {
        len += 1;
    }
    let offset = (window >> (MAX_LEN - len)) - FIRST_CODE[len];
    let pos = FIRST_INDEX[len] as usize + offset as usize;
    let sym = if pos < SORTED.len() { SORTED[pos] } else { EOS };
    (sym, len as u32)
}

/// The length of `src` once Huffman-coded, padding included.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src
        .iter()
        .map(|&b| usize::from(LENGTHS[usize::from(b)]))
        .sum();
    bits.div_ceil(8)
}

/// Huffman-codes `src` into `out`, padding with the high bits of EOS.
/// Returns the octets written.
pub fn encode(src: &[u8], out: &mut [u8]) -> Result<usize, EncodeError> {
    let n = encoded_len(src);
    let dst = out
        .get_mut(..n)
        .ok_or(EncodeError::BufferTooSmall { needed: n })?;
    write(dst, src);
    Ok(n)
}

/// Huffman-codes `src` into `dst`, which is [`encoded_len`] octets long,
/// padding with the high bits of EOS. With `huffman-fast` the code goes out
/// 32 bits at a time, one store per word; without it (less flash), an octet
/// at a time.
#[cfg(feature = "huffman-fast")]
pub(super) fn write(dst: &mut [u8], src: &[u8]) {
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut at = 0;
    for &b in src {
        let len = u32::from(LENGTHS[usize::from(b)]);
        acc = (acc << len) | u64::from(CODES[usize::from(b)]);
        bits += len;
        // At most 31 + 30 bits are pending here; flush a whole word.
        if bits >= 32 {
            bits -= 32;
            let word = (acc >> bits) as u32;
            if let Some(d) = dst.get_mut(at..at + 4) {
                d.copy_from_slice(&word.to_be_bytes());
            }
            at += 4;
        }
    }
    // The last 0..=31 bits, padded with ones to whole octets.
    let pad = bits.wrapping_neg() % 8;
    let total = bits + pad;
    let tail = (((acc << pad) | ((1 << pad) - 1)) << (64 - total).min(63)) >> 32;
    let n = (total / 8) as usize;
    if let Some(d) = dst.get_mut(at..at + n) {
        d.copy_from_slice(&(tail as u32).to_be_bytes()[..n]);
    }
}

/// See the `huffman-fast` version.
#[cfg(not(feature = "huffman-fast"))]
pub(super) fn write(dst: &mut [u8], src: &[u8]) {
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut out = dst.iter_mut();
    for &b in src {
        let len = u32::from(LENGTHS[usize::from(b)]);
        acc = (acc << len) | u64::from(CODES[usize::from(b)]);
        bits += len;
        // At most 7 + 30 bits are pending here; flush whole octets.
        while bits >= 8 {
            bits -= 8;
            if let Some(o) = out.next() {
                *o = (acc >> bits) as u8;
            }
        }
    }
    if bits > 0
        && let Some(o) = out.next()
    {
        let pad = 8 - bits;
        *o = ((acc << pad) as u8) | ((1u8 << pad) - 1);
    }
}

/// Where decoded octets go: a slice, or nowhere (to measure a string first).
pub(super) trait Sink {
    fn put(&mut self, b: u8) -> Result<(), DecodeError>;
    /// Puts `a`, then `b` if `n` is 2.
    #[cfg(feature = "huffman-fast")]
    fn put_pair(&mut self, a: u8, b: u8, n: usize) -> Result<(), DecodeError>;
}

/// Decodes into a slice; running out of room is [`DecodeError::FieldTooLarge`].
pub(super) struct SliceSink<'a> {
    pub(super) buf: &'a mut [u8],
    pub(super) len: usize,
}

impl Sink for SliceSink<'_> {
    #[inline(always)]
    fn put(&mut self, b: u8) -> Result<(), DecodeError> {
        let slot = self
            .buf
            .get_mut(self.len)
            .ok_or(DecodeError::FieldTooLarge)?;
        *slot = b;
        self.len += 1;
        Ok(())
    }

    #[cfg(feature = "huffman-fast")]
    #[inline(always)]
    fn put_pair(&mut self, a: u8, b: u8, n: usize) -> Result<(), DecodeError> {
        // Both bytes are written when there is room; only `n` count.
        if let Some([x, y]) = self.buf.get_mut(self.len..self.len + 2) {
            *x = a;
            *y = b;
            self.len += n;
            return Ok(());
        }
        self.put(a)?;
        if n == 2 {
            self.put(b)?;
        }
        Ok(())
    }
}

/// Decodes into a slice and counts on past its end, writing nothing there:
/// the caller learns the whole length and whether it fitted.
pub(super) struct SpillSink<'a> {
    pub(super) buf: &'a mut [u8],
    pub(super) len: usize,
}

impl Sink for SpillSink<'_> {
    #[inline(always)]
    fn put(&mut self, b: u8) -> Result<(), DecodeError> {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
        }
        self.len = self.len.saturating_add(1);
        Ok(())
    }

    #[cfg(feature = "huffman-fast")]
    #[inline(always)]
    fn put_pair(&mut self, a: u8, b: u8, n: usize) -> Result<(), DecodeError> {
        self.put(a)?;
        if n == 2 {
            self.put(b)?;
        }
        Ok(())
    }
}

/// Counts the decoded octets and checks the string, writing nothing.
pub(super) struct CountSink(pub(super) usize);

impl Sink for CountSink {
    #[inline(always)]
    fn put(&mut self, _: u8) -> Result<(), DecodeError> {
        self.0 += 1;
        Ok(())
    }

    #[cfg(feature = "huffman-fast")]
    #[inline(always)]
    fn put_pair(&mut self, _: u8, _: u8, n: usize) -> Result<(), DecodeError> {
        self.0 += n;
        Ok(())
    }
}

/// Decodes the Huffman string `src` into `out`; returns the octets written.
///
/// An EOS symbol, padding of 8 bits or more, or padding that is not all ones
/// is an error; so is an `out` too small for the result
/// ([`DecodeError::FieldTooLarge`]).
pub fn decode(src: &[u8], out: &mut [u8]) -> Result<usize, DecodeError> {
    let mut sink = SliceSink { buf: out, len: 0 };
    decode_into(src, &mut sink)?;
    Ok(sink.len)
}

/// The length `src` decodes to, after checking that it decodes.
pub fn decoded_len(src: &[u8]) -> Result<usize, DecodeError> {
    let mut sink = CountSink(0);
    decode_into(src, &mut sink)?;
    Ok(sink.0)
}

#[inline(always)]
pub(super) fn decode_into<S: Sink>(src: &[u8], sink: &mut S) -> Result<(), DecodeError> {
    // Pending input, left-aligned: the next bit to decode is bit 63. Bits
    // below the `bits` valid ones are zero or copies of input not yet
    // counted, never garbage.
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut rest = src;
    loop {
        // Refill to at least 57 bits while 8 input octets remain; the octet
        // that only partly fits is OR-ed again, identically, next time.
        if let Some((word, _)) = rest.split_first_chunk::<8>() {
            acc |= u64::from_be_bytes(*word) >> bits;
            let taken = (63 - bits) >> 3;
            rest = &rest[taken as usize..];
            bits += taken << 3;
        } else if !rest.is_empty() {
            // The last few octets, as many as fit, in one go.
            let n = rest.len().min(((64 - bits) / 8) as usize);
            let mut word = [0u8; 8];
            word[..n].copy_from_slice(&rest[..n]);
            acc |= u64::from_be_bytes(word) >> bits;
            rest = &rest[n..];
            bits += n as u32 * 8;
        }
        loop {
            // One or two whole codes in the next LOOKUP_BITS valid bits.
            #[cfg(feature = "huffman-fast")]
            if bits >= LOOKUP_BITS {
                let entry = FAST[(acc >> (64 - LOOKUP_BITS)) as usize];
                if entry >> 24 != 0 {
                    sink.put_pair(entry as u8, (entry >> 8) as u8, (entry >> 24) as usize)?;
                    let len = (entry >> 20) & 0xf;
                    acc <<= len;
                    bits -= len;
                    continue;
                }
            }
            // A longer code: the canonical walk needs 30 valid bits.
            if bits < MAX_LEN as u32 {
                break;
            }
            let (sym, len) = next_symbol(acc);
            if sym == EOS {
                return Err(DecodeError::HuffmanEos);
            }
            sink.put(sym as u8)?;
            acc <<= len;
            bits -= len;
        }
        if rest.is_empty() {
            break;
        }
    }
    finish(acc, bits, sink)
}

/// Decodes what is left in `acc` (its `bits` valid bits, fewer than 30) once
/// the input is spent: the last symbols, then the padding.
#[inline(always)]
fn finish<S: Sink>(mut acc: u64, mut bits: u32, sink: &mut S) -> Result<(), DecodeError> {
    // What is left holds no whole code of the fast table. All ones is
    // padding (no code of 29 bits or fewer is all ones, so it cannot be a
    // symbol), allowed below 8 bits (RFC 7541 §5.2).
    while bits > 0 {
        let ones = u64::MAX << (64 - bits);
        if acc & ones == ones {
            return if bits <= 7 {
                Ok(())
            } else {
                Err(DecodeError::HuffmanPadding)
            };
        }
        let (sym, len) = next_symbol(acc | (u64::MAX >> bits));
        if len > bits {
            return Err(DecodeError::HuffmanPadding);
        }
        if sym == EOS {
            return Err(DecodeError::HuffmanEos);
        }
        sink.put(sym as u8)?;
        acc <<= len;
        bits -= len;
    }
    Ok(())
}

/// A Huffman string decoded as its octets arrive, for a string that
/// straddles the frames of a header block: the pending bits between pieces.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pending {
    /// Pending input, left-aligned, as in [`decode_into`].
    acc: u64,
    /// Valid bits in `acc`; fewer than 30 between calls.
    bits: u32,
}

impl Pending {
    pub(super) const fn new() -> Self {
        Self { acc: 0, bits: 0 }
    }

    /// Decodes the whole symbols that `src` completes.
    pub(super) fn feed<S: Sink>(&mut self, src: &[u8], sink: &mut S) -> Result<(), DecodeError> {
        for &b in src {
            // Fewer than 30 bits are pending, so the octet fits below them.
            self.acc |= u64::from(b) << (56 - self.bits);
            self.bits += 8;
            while self.bits >= MAX_LEN as u32 {
                let (sym, len) = next_symbol(self.acc);
                if sym == EOS {
                    return Err(DecodeError::HuffmanEos);
                }
                sink.put(sym as u8)?;
                self.acc <<= len;
                self.bits -= len;
            }
        }
        Ok(())
    }

    /// The string ended: decodes the last symbols and checks the padding.
    pub(super) fn finish<S: Sink>(self, sink: &mut S) -> Result<(), DecodeError> {
        finish(self.acc, self.bits, sink)
    }
}

/// The symbol at the head of `acc` and its length.
#[inline(always)]
fn next_symbol(acc: u64) -> (u16, u32) {
    #[cfg(feature = "huffman-fast")]
    {
        let entry = FAST[(acc >> (64 - LOOKUP_BITS)) as usize];
        if entry >> 24 != 0 {
            return ((entry & 0xff) as u16, (entry >> 16) & 0xf);
        }
        canonical_lookup((acc >> (64 - MAX_LEN)) as u32, LOOKUP_BITS as usize + 1)
    }
    #[cfg(not(feature = "huffman-fast"))]
    {
        canonical_lookup((acc >> (64 - MAX_LEN)) as u32, 5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_appendix_b_samples() {
        // A few codes copied from RFC 7541 Appendix B.
        assert_eq!((CODES[b'0' as usize], LENGTHS[b'0' as usize]), (0x0, 5));
        assert_eq!((CODES[b' ' as usize], LENGTHS[b' ' as usize]), (0x14, 6));
        assert_eq!((CODES[b'a' as usize], LENGTHS[b'a' as usize]), (0x3, 5));
        assert_eq!((CODES[b'~' as usize], LENGTHS[b'~' as usize]), (0x1ffd, 13));
        assert_eq!((CODES[0], LENGTHS[0]), (0x1ff8, 13));
        assert_eq!((CODES[255], LENGTHS[255]), (0x3ffffee, 26));
        assert_eq!((CODES[256], LENGTHS[256]), (0x3fffffff, 30));
    }

    #[test]
    fn rfc7541_c4_1_string() {
        let encoded = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        let mut out = [0u8; 32];
        assert_eq!(encoded_len(b"www.example.com"), encoded.len());
        let n = encode(b"www.example.com", &mut out).unwrap();
        assert_eq!(&out[..n], &encoded);
        let n = decode(&encoded, &mut out).unwrap();
        assert_eq!(&out[..n], b"www.example.com");
        assert_eq!(decoded_len(&encoded), Ok(15));
    }

    #[test]
    fn every_symbol_round_trips_at_every_alignment() {
        let mut src = [0u8; 300];
        let mut enc = [0u8; 1200];
        let mut dec = [0u8; 300];
        for shift in 0..8 {
            for (i, b) in src.iter_mut().enumerate() {
                *b = ((i * 7 + shift) % 256) as u8;
            }
            for len in [0, 1, 2, 3, 7, 8, 9, 64, 255, 300] {
                let n = encode(&src[..len], &mut enc).unwrap();
                let m = decode(&enc[..n], &mut dec).unwrap();
                assert_eq!(&dec[..m], &src[..len]);
            }
        }
    }

    #[test]
    fn eos_and_bad_padding_are_errors() {
        let mut out = [0u8; 8];
        // EOS alone, padded to 32 bits.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut out),
            Err(DecodeError::HuffmanEos)
        );
        // '0' (00000) then 3 bits of ones: valid. Then 11 bits of ones: too long.
        assert_eq!(decode(&[0x07], &mut out), Ok(1));
        assert_eq!(
            decode(&[0x07, 0xff], &mut out),
            Err(DecodeError::HuffmanPadding)
        );
        // Padding that is not ones.
        assert_eq!(decode(&[0x06], &mut out), Err(DecodeError::HuffmanPadding));
        // A full octet of ones.
        assert_eq!(decode(&[0xff], &mut out), Err(DecodeError::HuffmanPadding));
    }

    #[test]
    fn too_small_output() {
        let mut out = [0u8; 3];
        let mut enc = [0u8; 16];
        let n = encode(b"abcd", &mut enc).unwrap();
        assert_eq!(decode(&enc[..n], &mut out), Err(DecodeError::FieldTooLarge));
    }
}
