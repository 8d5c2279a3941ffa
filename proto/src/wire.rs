//! Protobuf wire primitives (protobuf.dev, "Encoding": base 128 varints,
//! message structure, length-delimited records): varints, tags, and skipping
//! the value of a field of any wire type, over borrowed slices; and
//! [`Writer`], which encodes a whole message, sub-messages included.
//!
//! Decoding never panics and never reads past the slice: every failure is a
//! [`DecodeError`]. Encoding writes into a caller slice and reports
//! [`BufferTooSmall`] with the length it needs.
//!
//! Varints follow the rules of Google's parsers where they agree: an
//! encoding may carry redundant `0x80` octets (some encoders pad lengths to a
//! fixed width) as long as it stays within ten bytes; an eleventh byte, or a
//! tenth byte above `0x01`, is [`DecodeError::VarintOverflow`].

use crate::error::{BufferTooSmall, DecodeError};

/// The longest varint: 64 bits in groups of seven.
pub const MAX_VARINT_LEN: usize = 10;

/// The largest field number protobuf allows, 2^29 - 1.
pub const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;

/// How a field's value is laid out after its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    /// A varint: int32, int64, uint32, uint64, sint32, sint64, bool, enum.
    Varint = 0,
    /// Eight little-endian bytes: fixed64, sfixed64, double.
    I64 = 1,
    /// A varint length, then that many bytes: string, bytes, embedded
    /// messages, packed repeated fields.
    Len = 2,
    /// Group start (deprecated; not in proto3).
    SGroup = 3,
    /// Group end (deprecated; not in proto3).
    EGroup = 4,
    /// Four little-endian bytes: fixed32, sfixed32, float.
    I32 = 5,
}

impl WireType {
    /// The wire type of the low three bits of a tag; `None` for 6 and 7.
    pub const fn from_bits(bits: u8) -> Option<Self> {
        match bits {
            0 => Some(Self::Varint),
            1 => Some(Self::I64),
            2 => Some(Self::Len),
            3 => Some(Self::SGroup),
            4 => Some(Self::EGroup),
            5 => Some(Self::I32),
            _ => None,
        }
    }

    /// The three bits of this wire type in a tag.
    pub const fn bits(self) -> u8 {
        self as u8
    }
}

impl core::fmt::Display for WireType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::Varint => "VARINT",
            Self::I64 => "I64",
            Self::Len => "LEN",
            Self::SGroup => "SGROUP",
            Self::EGroup => "EGROUP",
            Self::I32 => "I32",
        })
    }
}

/// Reads a varint from the start of `buf`. Returns the value and the number
/// of bytes read.
pub fn decode_varint(buf: &[u8]) -> Result<(u64, usize), DecodeError> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().take(MAX_VARINT_LEN).enumerate() {
        // The tenth byte holds bit 63 only; anything more does not fit in 64
        // bits, and a continuation bit would make the varint eleven bytes.
        if i == MAX_VARINT_LEN - 1 && b > 1 {
            return Err(DecodeError::VarintOverflow);
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(DecodeError::Truncated)
}

/// The number of bytes [`encode_varint`] writes for `value` (1 to 10).
pub const fn varint_len(value: u64) -> usize {
    // Significant bits (at least one, for 0) in groups of seven.
    let bits = (u64::BITS - (value | 1).leading_zeros()) as usize;
    bits.div_ceil(7)
}

/// Writes `value` as a minimal varint at the start of `out`. Returns the
/// number of bytes written.
pub fn encode_varint(value: u64, out: &mut [u8]) -> Result<usize, BufferTooSmall> {
    let n = varint_len(value);
    let Some(dst) = out.get_mut(..n) else {
        return Err(BufferTooSmall { needed: n });
    };
    let mut rest = value;
    for (i, b) in dst.iter_mut().enumerate() {
        let more = if i + 1 < n { 0x80 } else { 0 };
        // The mask keeps the low seven bits; the cast drops nothing else.
        *b = (rest & 0x7f) as u8 | more;
        rest >>= 7;
    }
    Ok(n)
}

/// A field's key: its number and the wire type of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// The field number, 1 to [`MAX_FIELD_NUMBER`].
    pub field: u32,
    /// How the value that follows the tag is laid out.
    pub wire_type: WireType,
}

impl Tag {
    /// The tag of field `field` with wire type `wire_type`.
    pub const fn new(field: u32, wire_type: WireType) -> Self {
        Self { field, wire_type }
    }

    /// The varint this tag is encoded as: `field << 3 | wire_type`.
    pub const fn value(self) -> u64 {
        ((self.field as u64) << 3) | self.wire_type.bits() as u64
    }

    /// The number of bytes [`Tag::encode`] writes.
    pub const fn encoded_len(self) -> usize {
        varint_len(self.value())
    }

    /// Reads a tag from the start of `buf`. Returns the tag and the number of
    /// bytes read.
    ///
    /// A field number of 0 or above [`MAX_FIELD_NUMBER`] is
    /// [`DecodeError::InvalidFieldNumber`]; wire types 6 and 7 are
    /// [`DecodeError::InvalidWireType`]. Group wire types are returned: it is
    /// the caller (or [`skip_value`]) that refuses them.
    pub fn decode(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let (value, n) = decode_varint(buf)?;
        let field = value >> 3;
        let bits = (value & 0x7) as u8;
        let Some(wire_type) = WireType::from_bits(bits) else {
            return Err(DecodeError::InvalidWireType(bits));
        };
        match u32::try_from(field) {
            Ok(field @ 1..=MAX_FIELD_NUMBER) => Ok((Self { field, wire_type }, n)),
            _ => Err(DecodeError::InvalidFieldNumber(field)),
        }
    }

    /// Writes the tag at the start of `out`. Returns the number of bytes
    /// written.
    ///
    /// The field number is not checked: one outside 1 to
    /// [`MAX_FIELD_NUMBER`] gives a tag that decoders refuse.
    pub fn encode(self, out: &mut [u8]) -> Result<usize, BufferTooSmall> {
        encode_varint(self.value(), out)
    }
}

/// Skips the value of a field whose tag has just been read: `buf` starts
/// right after the tag. Returns the number of bytes the value takes.
///
/// Groups are [`DecodeError::Group`].
pub fn skip_value(wire_type: WireType, buf: &[u8]) -> Result<usize, DecodeError> {
    match wire_type {
        WireType::Varint => decode_varint(buf).map(|(_, n)| n),
        WireType::I64 => fixed_len(buf, 8),
        WireType::I32 => fixed_len(buf, 4),
        WireType::Len => {
            let (len, n) = decode_varint(buf)?;
            len_end(buf, n, len)
        }
        WireType::SGroup | WireType::EGroup => Err(DecodeError::Group),
    }
}

/// Skips one whole field, tag and value, at the start of `buf`. Returns the
/// field's tag and the number of bytes it takes.
pub fn skip_field(buf: &[u8]) -> Result<(Tag, usize), DecodeError> {
    let (tag, n) = Tag::decode(buf)?;
    let rest = buf.get(n..).unwrap_or_default();
    let m = skip_value(tag.wire_type, rest)?;
    // n + m <= buf.len(): both count bytes of `buf`.
    Ok((tag, n + m))
}

/// `len` bytes if `buf` has them.
fn fixed_len(buf: &[u8], len: usize) -> Result<usize, DecodeError> {
    if buf.len() < len {
        Err(DecodeError::Truncated)
    } else {
        Ok(len)
    }
}

/// The end of a length-delimited payload of `len` bytes that starts at
/// `start` in `buf`.
fn len_end(buf: &[u8], start: usize, len: u64) -> Result<usize, DecodeError> {
    // A length that does not even fit in usize runs past any slice.
    usize::try_from(len)
        .ok()
        .and_then(|len| start.checked_add(len))
        .filter(|&end| end <= buf.len())
        .ok_or(DecodeError::Truncated)
}

/// A cursor over the fields of one message, for zero-copy decoders.
///
/// Each read either succeeds and moves past what it read, or fails and leaves
/// the cursor where it was.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader at the start of the encoded message `buf`.
    pub const fn new(buf: &'a [u8]) -> Self {
        Self { rest: buf }
    }

    /// True when every byte has been read: the message ends here.
    pub const fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The bytes not yet read.
    pub const fn remaining(&self) -> &'a [u8] {
        self.rest
    }

    /// Reads the next tag, or returns `None` at the end of the message.
    pub fn read_tag(&mut self) -> Result<Option<Tag>, DecodeError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let (tag, n) = Tag::decode(self.rest)?;
        self.advance(n);
        Ok(Some(tag))
    }

    /// Reads a varint value.
    pub fn read_varint(&mut self) -> Result<u64, DecodeError> {
        let (value, n) = decode_varint(self.rest)?;
        self.advance(n);
        Ok(value)
    }

    /// Reads an I64 value as a little-endian u64.
    pub fn read_fixed64(&mut self) -> Result<u64, DecodeError> {
        let bytes = self.take_array::<8>()?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Reads an I32 value as a little-endian u32.
    pub fn read_fixed32(&mut self) -> Result<u32, DecodeError> {
        let bytes = self.take_array::<4>()?;
        Ok(u32::from_le_bytes(bytes))
    }

    /// Reads a LEN value and borrows its payload.
    pub fn read_len(&mut self) -> Result<&'a [u8], DecodeError> {
        let (len, n) = decode_varint(self.rest)?;
        let end = len_end(self.rest, n, len)?;
        let payload = self.rest.get(n..end).unwrap_or_default();
        self.advance(end);
        Ok(payload)
    }

    /// Skips a value of wire type `wire_type` (groups are refused).
    pub fn skip(&mut self, wire_type: WireType) -> Result<(), DecodeError> {
        let n = skip_value(wire_type, self.rest)?;
        self.advance(n);
        Ok(())
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, tail) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(DecodeError::Truncated)?;
        self.rest = tail;
        Ok(*head)
    }

    /// Moves past `n` bytes that a successful read just measured.
    fn advance(&mut self, n: usize) {
        self.rest = self.rest.get(n..).unwrap_or_default();
    }
}

/// The nesting [`Writer::begin`] refused: more length-delimited fields open
/// at once than the writer's `DEPTH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep;

impl core::fmt::Display for TooDeep {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("protobuf writer: too many nested messages open")
    }
}

impl core::error::Error for TooDeep {}

/// A length-delimited field that [`Writer::begin`] opened; hand it back to
/// [`Writer::end`] once its contents are written.
#[derive(Debug)]
#[must_use = "a nested field is only complete after Writer::end"]
pub struct Nested {
    level: usize,
}

/// An encoder of one message into a caller slice, sub-messages included.
///
/// Fields are written in the order of the calls; nothing is left out: proto3's
/// "omit the default" is the caller's choice, field by field. Varints are
/// minimal, and an `int32` or enum below zero takes ten bytes, sign-extended,
/// as protobuf requires.
///
/// A sub-message (or any length-delimited field written in pieces) sits
/// between [`Writer::begin`] and [`Writer::end`]: `begin` reserves one octet
/// for the length, and `end` moves the body right when its length needs more
/// (bodies under 128 bytes, most of them, never move). At most `DEPTH` such
/// fields are open at once.
///
/// When the slice runs out the writer keeps counting, with the same
/// arithmetic, and [`Writer::finish`] reports the exact length of the whole
/// message in [`BufferTooSmall::needed`]: a caller grows its buffer to that
/// and writes once more.
#[derive(Debug)]
pub struct Writer<'b, const DEPTH: usize = 64> {
    buf: &'b mut [u8],
    /// Length of the message written so far, counted past the slice's end
    /// once it overflowed.
    pos: usize,
    /// The slice ran out: nothing more is stored, only counted.
    overflow: bool,
    /// The body start of each open length-delimited field.
    starts: [usize; DEPTH],
    depth: usize,
}

impl<'b, const DEPTH: usize> Writer<'b, DEPTH> {
    /// A writer at the start of `buf`.
    pub const fn new(buf: &'b mut [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            overflow: false,
            starts: [0; DEPTH],
            depth: 0,
        }
    }

    /// Bytes written (or counted, after an overflow) so far, the reserved
    /// length octets of open fields included.
    pub const fn len(&self) -> usize {
        self.pos
    }

    /// True before the first byte.
    pub const fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// Length-delimited fields open now.
    pub const fn depth(&self) -> usize {
        self.depth
    }

    /// Appends `bytes` as they are (for instance a sub-message encoded
    /// elsewhere, or a piece of a field opened with [`Writer::begin`]).
    pub fn raw(&mut self, bytes: &[u8]) {
        let end = self.pos.saturating_add(bytes.len());
        if !self.overflow {
            match self.buf.get_mut(self.pos..end) {
                Some(dst) => dst.copy_from_slice(bytes),
                None => self.overflow = true,
            }
        }
        self.pos = end;
    }

    fn put_varint(&mut self, value: u64) {
        let mut tmp = [0u8; MAX_VARINT_LEN];
        // Ten bytes hold any varint.
        let n = encode_varint(value, &mut tmp).unwrap_or(0);
        self.raw(tmp.get(..n).unwrap_or_default());
    }

    /// Writes the tag of field `field` with wire type `wire_type`.
    pub fn tag(&mut self, field: u32, wire_type: WireType) {
        self.put_varint(Tag::new(field, wire_type).value());
    }

    /// A varint field: `uint64`, `uint32`, or any value already turned into
    /// its varint.
    pub fn varint(&mut self, field: u32, value: u64) {
        self.tag(field, WireType::Varint);
        self.put_varint(value);
    }

    /// An `int32` (or enum) field: negatives sign-extended to ten bytes.
    pub fn int32(&mut self, field: u32, value: i32) {
        self.int64(field, i64::from(value));
    }

    /// An `int64` field (two's complement, negatives take ten bytes).
    pub fn int64(&mut self, field: u32, value: i64) {
        // Protobuf writes the two's complement bits as an unsigned varint.
        self.varint(field, value as u64);
    }

    /// An enum field: its number, as an `int32`.
    pub fn enumeration(&mut self, field: u32, number: i32) {
        self.int32(field, number);
    }

    /// A `bool` field: `0` or `1`.
    pub fn bool(&mut self, field: u32, value: bool) {
        self.varint(field, u64::from(value));
    }

    /// A `double` field: eight little-endian bytes.
    pub fn double(&mut self, field: u32, value: f64) {
        self.tag(field, WireType::I64);
        self.raw(&value.to_le_bytes());
    }

    /// A `float` field: four little-endian bytes.
    pub fn float(&mut self, field: u32, value: f32) {
        self.tag(field, WireType::I32);
        self.raw(&value.to_le_bytes());
    }

    /// A `bytes` field (or a sub-message encoded elsewhere).
    pub fn bytes(&mut self, field: u32, value: &[u8]) {
        self.tag(field, WireType::Len);
        // usize is at most 64 bits wide on every target Rust supports.
        self.put_varint(value.len() as u64);
        self.raw(value);
    }

    /// A `string` field.
    pub fn string(&mut self, field: u32, value: &str) {
        self.bytes(field, value.as_bytes());
    }

    /// A packed repeated varint field (`repeated` enum or integer): one
    /// length-delimited field holding every value. Writes nothing for no
    /// values, as protobuf does.
    pub fn packed_varints<I>(&mut self, field: u32, values: I) -> Result<(), TooDeep>
    where
        I: IntoIterator<Item = u64>,
    {
        let mut values = values.into_iter().peekable();
        if values.peek().is_none() {
            return Ok(());
        }
        let nested = self.begin(field)?;
        for value in values {
            self.put_varint(value);
        }
        self.end(nested);
        Ok(())
    }

    /// Opens the length-delimited field `field`, a sub-message or a string
    /// or bytes value written in pieces with [`Writer::raw`]. Everything
    /// written until [`Writer::end`] is its body.
    pub fn begin(&mut self, field: u32) -> Result<Nested, TooDeep> {
        let level = self.depth;
        if level >= DEPTH {
            return Err(TooDeep);
        }
        self.tag(field, WireType::Len);
        // One octet reserved for the length; `end` makes room for more.
        self.raw(&[0]);
        if let Some(start) = self.starts.get_mut(level) {
            *start = self.pos;
        }
        self.depth = level + 1;
        Ok(Nested { level })
    }

    /// Closes the field `nested` opened, and any opened inside it that are
    /// still open: writes each body's length in front of it.
    pub fn end(&mut self, nested: Nested) {
        while self.depth > nested.level {
            self.close_innermost();
        }
    }

    fn close_innermost(&mut self) {
        let Some(level) = self.depth.checked_sub(1) else {
            return;
        };
        self.depth = level;
        let start = self.starts.get(level).copied().unwrap_or(self.pos);
        let len = self.pos.saturating_sub(start);
        // usize is at most 64 bits wide on every target Rust supports.
        let mut tmp = [0u8; MAX_VARINT_LEN];
        let n = encode_varint(len as u64, &mut tmp).unwrap_or(1);
        let extra = n - 1;
        let end = self.pos.saturating_add(extra);
        if !self.overflow {
            // The reserved octet, the body, and the room the body moves into.
            let field = start
                .checked_sub(1)
                .and_then(|reserved| self.buf.get_mut(reserved..end));
            match (field, tmp.get(..n)) {
                (Some(field), Some(length)) => {
                    // The body moves right by `extra`; the length goes where
                    // the reserved octet was.
                    field.copy_within(1..1 + len, n);
                    if let Some(dst) = field.get_mut(..n) {
                        dst.copy_from_slice(length);
                    }
                }
                _ => self.overflow = true,
            }
        }
        self.pos = end;
    }

    /// Closes the fields still open and returns the length of the message,
    /// or, when `buf` was too small, the length it needs.
    pub fn finish(mut self) -> Result<usize, BufferTooSmall> {
        while self.depth > 0 {
            self.close_innermost();
        }
        if self.overflow {
            Err(BufferTooSmall { needed: self.pos })
        } else {
            Ok(self.pos)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(value: u64) -> ([u8; MAX_VARINT_LEN], usize) {
        let mut buf = [0u8; MAX_VARINT_LEN];
        let n = encode_varint(value, &mut buf).unwrap();
        (buf, n)
    }

    #[test]
    fn varint_examples_from_the_encoding_guide() {
        assert_eq!(varint(1).0[..1], [0x01]);
        assert_eq!(varint(150).0[..2], [0x96, 0x01]);
        assert_eq!(decode_varint(&[0x96, 0x01]), Ok((150, 2)));
    }

    #[test]
    fn varint_boundaries_round_trip() {
        let cases: [(u64, usize); 12] = [
            (0, 1),
            (1, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            ((1 << 21) - 1, 3),
            (1 << 21, 4),
            (u64::from(u32::MAX), 5),
            ((1 << 63) - 1, 9),
            (1 << 63, 10),
            (u64::MAX, 10),
        ];
        for (value, len) in cases {
            let (buf, n) = varint(value);
            assert_eq!(n, len, "{value}");
            assert_eq!(varint_len(value), len, "{value}");
            assert_eq!(decode_varint(&buf[..n]), Ok((value, n)), "{value}");
            // Trailing bytes are not part of the varint.
            assert_eq!(decode_varint(&buf), Ok((value, n)), "{value}");
        }
        assert_eq!(
            varint(u64::MAX).0,
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
    }

    #[test]
    fn varint_too_small_buffer_says_how_much() {
        let mut buf = [0u8; 2];
        assert_eq!(
            encode_varint(16_384, &mut buf),
            Err(BufferTooSmall { needed: 3 })
        );
        assert_eq!(encode_varint(0, &mut []), Err(BufferTooSmall { needed: 1 }));
    }

    #[test]
    fn varint_truncated() {
        assert_eq!(decode_varint(&[]), Err(DecodeError::Truncated));
        assert_eq!(decode_varint(&[0x80]), Err(DecodeError::Truncated));
        assert_eq!(decode_varint(&[0xff; 9]), Err(DecodeError::Truncated));
        let (buf, n) = varint(u64::MAX);
        for end in 0..n {
            assert_eq!(decode_varint(&buf[..end]), Err(DecodeError::Truncated));
        }
    }

    #[test]
    fn varint_overflow_and_overlong() {
        // A tenth byte with more than bit 63.
        let mut over = [0xffu8; 10];
        over[9] = 0x02;
        assert_eq!(decode_varint(&over), Err(DecodeError::VarintOverflow));
        over[9] = 0x7f;
        assert_eq!(decode_varint(&over), Err(DecodeError::VarintOverflow));
        // Eleven bytes, even of a small value.
        let mut long = [0x80u8; 11];
        long[10] = 0x00;
        assert_eq!(decode_varint(&long), Err(DecodeError::VarintOverflow));
        assert_eq!(decode_varint(&[0xff; 10]), Err(DecodeError::VarintOverflow));
    }

    #[test]
    fn varint_redundant_continuation_bytes_are_accepted_up_to_ten() {
        assert_eq!(decode_varint(&[0x80, 0x00]), Ok((0, 2)));
        assert_eq!(decode_varint(&[0x81, 0x80, 0x00]), Ok((1, 3)));
        let mut padded = [0x80u8; 10];
        padded[9] = 0x00;
        assert_eq!(decode_varint(&padded), Ok((0, 10)));
    }

    #[test]
    fn tags() {
        let jsonrpc = Tag::new(1, WireType::Len);
        assert_eq!(jsonrpc.value(), 0x0a);
        assert_eq!(Tag::decode(&[0x0a]), Ok((jsonrpc, 1)));
        assert_eq!(Tag::decode(&[0x08]), Ok((Tag::new(1, WireType::Varint), 1)));
        assert_eq!(
            Tag::decode(&[0x80, 0x01]),
            Ok((Tag::new(16, WireType::Varint), 2))
        );

        let max = Tag::new(MAX_FIELD_NUMBER, WireType::I32);
        let mut buf = [0u8; MAX_VARINT_LEN];
        assert_eq!(max.encode(&mut buf), Ok(5));
        assert_eq!(buf[..5], [0xfd, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(max.encoded_len(), 5);
        assert_eq!(Tag::decode(&buf[..5]), Ok((max, 5)));

        // Field number 2^29: one past the maximum.
        assert_eq!(
            Tag::decode(&[0x80, 0x80, 0x80, 0x80, 0x10]),
            Err(DecodeError::InvalidFieldNumber(1 << 29))
        );
        // A tag value beyond 32 bits.
        let (big, n) = varint(!0x7);
        assert_eq!(
            Tag::decode(&big[..n]),
            Err(DecodeError::InvalidFieldNumber(u64::MAX >> 3))
        );
        assert_eq!(
            Tag::decode(&[0x00]),
            Err(DecodeError::InvalidFieldNumber(0))
        );
        assert_eq!(
            Tag::decode(&[0x02]),
            Err(DecodeError::InvalidFieldNumber(0))
        );
        assert_eq!(Tag::decode(&[0x0e]), Err(DecodeError::InvalidWireType(6)));
        assert_eq!(Tag::decode(&[0x0f]), Err(DecodeError::InvalidWireType(7)));
        assert_eq!(Tag::decode(&[]), Err(DecodeError::Truncated));
        assert_eq!(Tag::decode(&[0x8a]), Err(DecodeError::Truncated));
    }

    #[test]
    fn wire_type_bits_round_trip() {
        for bits in 0..8u8 {
            match WireType::from_bits(bits) {
                Some(t) => assert_eq!(t.bits(), bits),
                None => assert!(bits >= 6),
            }
        }
    }

    #[test]
    fn skip_each_wire_type() {
        // Each value, followed by one byte that must not be consumed.
        let cases: [(WireType, &[u8], usize); 6] = [
            (WireType::Varint, &[0x96, 0x01, 0xee], 2),
            (WireType::Varint, &[0x00, 0xee], 1),
            (WireType::I64, &[1, 2, 3, 4, 5, 6, 7, 8, 0xee], 8),
            (WireType::I32, &[1, 2, 3, 4, 0xee], 4),
            (WireType::Len, &[0x03, b'a', b'b', b'c', 0xee], 4),
            (WireType::Len, &[0x00, 0xee], 1),
        ];
        for (wire_type, buf, len) in cases {
            assert_eq!(skip_value(wire_type, buf), Ok(len), "{wire_type} {buf:?}");
            for end in 0..len {
                assert_eq!(
                    skip_value(wire_type, &buf[..end]),
                    Err(DecodeError::Truncated),
                    "{wire_type} {buf:?} cut at {end}"
                );
            }
        }
    }

    #[test]
    fn skip_refuses_groups_and_impossible_lengths() {
        assert_eq!(
            skip_value(WireType::SGroup, &[0x0c]),
            Err(DecodeError::Group)
        );
        assert_eq!(skip_value(WireType::EGroup, &[]), Err(DecodeError::Group));
        assert_eq!(skip_field(&[0x0b, 0x0c]), Err(DecodeError::Group));
        assert_eq!(skip_field(&[0x0c]), Err(DecodeError::Group));
        // A length of 2^64 - 1.
        let (len, n) = varint(u64::MAX);
        assert_eq!(
            skip_value(WireType::Len, &len[..n]),
            Err(DecodeError::Truncated)
        );
        // A length one past the end.
        assert_eq!(
            skip_value(WireType::Len, &[0x02, 0x00]),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn skip_field_reads_tag_and_value() {
        assert_eq!(
            skip_field(&[0x12, 0x01, 0xaa, 0xee]),
            Ok((Tag::new(2, WireType::Len), 3))
        );
        assert_eq!(
            skip_field(&[0x1d, 1, 2, 3, 4]),
            Ok((Tag::new(3, WireType::I32), 5))
        );
        assert_eq!(skip_field(&[0x1d, 1, 2, 3]), Err(DecodeError::Truncated));
    }

    #[test]
    fn reader_walks_fields_and_stays_put_on_error() {
        let msg = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x11, 1, 0, 0, 0, 0, 0, 0, 0, // 2: fixed64 1
            0x1a, 0x02, b'h', b'i', // 3: "hi"
            0x25, 2, 0, 0, 0, // 4: fixed32 2
        ];
        let mut r = Reader::new(&msg);
        assert_eq!(r.read_tag(), Ok(Some(Tag::new(1, WireType::Varint))));
        assert_eq!(r.read_varint(), Ok(150));
        assert_eq!(r.read_tag(), Ok(Some(Tag::new(2, WireType::I64))));
        assert_eq!(r.read_fixed64(), Ok(1));
        assert_eq!(r.read_tag(), Ok(Some(Tag::new(3, WireType::Len))));
        assert_eq!(r.read_len(), Ok(&b"hi"[..]));
        assert_eq!(r.read_tag(), Ok(Some(Tag::new(4, WireType::I32))));
        assert_eq!(r.read_fixed32(), Ok(2));
        assert!(r.is_empty());
        assert_eq!(r.read_tag(), Ok(None));

        let mut r = Reader::new(&[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(r.read_fixed64(), Err(DecodeError::Truncated));
        assert_eq!(r.read_fixed32(), Ok(0x0403_0201));
        assert_eq!(r.read_fixed32(), Err(DecodeError::Truncated));
        assert_eq!(r.remaining(), &[5, 6, 7]);

        let mut r = Reader::new(&[0x03, b'a']);
        assert_eq!(r.read_len(), Err(DecodeError::Truncated));
        assert_eq!(r.remaining(), &[0x03, b'a']);
        assert_eq!(r.skip(WireType::Len), Err(DecodeError::Truncated));
        assert_eq!(r.remaining(), &[0x03, b'a']);
        assert_eq!(r.skip(WireType::Varint), Ok(()));
        assert_eq!(r.remaining(), b"a");
    }

    /// Writes `f` into buffers of every size up to the length it needs:
    /// each too-small one reports that exact length; the others all agree.
    fn written(f: impl Fn(&mut Writer<'_, 4>)) -> std::vec::Vec<u8> {
        let mut big = [0u8; 512];
        let mut w = Writer::<4>::new(&mut big);
        f(&mut w);
        let n = w.finish().unwrap();
        for size in 0..n {
            let mut small = std::vec![0u8; size];
            let mut w = Writer::<4>::new(&mut small);
            f(&mut w);
            assert_eq!(w.finish(), Err(BufferTooSmall { needed: n }), "size {size}");
        }
        big[..n].to_vec()
    }

    #[test]
    fn writer_scalars() {
        let out = written(|w| {
            w.varint(1, 150);
            w.int32(2, -1);
            w.int64(3, -2);
            w.bool(4, true);
            w.enumeration(5, 2);
            w.double(6, 1.0);
            w.float(7, 0.0);
            w.string(8, "hi");
            w.bytes(9, &[]);
        });
        let mut expected = std::vec![0x08, 0x96, 0x01, 0x10];
        expected.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        expected.push(0x18);
        expected.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        expected.extend_from_slice(&[0x20, 0x01, 0x28, 0x02]);
        expected.extend_from_slice(&[0x31, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
        expected.extend_from_slice(&[0x3d, 0, 0, 0, 0]);
        expected.extend_from_slice(&[0x42, 0x02, b'h', b'i', 0x4a, 0x00]);
        assert_eq!(out, expected);
    }

    #[test]
    fn writer_nested_lengths_grow_in_place() {
        // A 200-byte body needs a two-byte length: the body moves by one.
        let body = [0xabu8; 198];
        let out = written(|w| {
            w.varint(1, 1);
            let outer = w.begin(2).unwrap();
            w.bytes(3, &body[..]);
            let inner = w.begin(4).unwrap();
            w.end(inner);
            w.end(outer);
            w.varint(5, 5);
        });
        // field 3: tag + 2-byte length + 198; field 4: tag + 0 = 203 bytes.
        let mut expected = std::vec![0x08, 0x01, 0x12, 0xcb, 0x01, 0x1a, 0xc6, 0x01];
        expected.extend_from_slice(&body);
        expected.extend_from_slice(&[0x22, 0x00, 0x28, 0x05]);
        assert_eq!(out, expected);
        let mut r = Reader::new(&out);
        assert_eq!(r.read_tag(), Ok(Some(Tag::new(1, WireType::Varint))));
        assert_eq!(r.read_varint(), Ok(1));
        assert_eq!(r.read_tag(), Ok(Some(Tag::new(2, WireType::Len))));
        assert_eq!(r.read_len().map(<[u8]>::len), Ok(203));
    }

    #[test]
    fn writer_closes_inner_fields_and_open_ones_at_finish() {
        let nested = written(|w| {
            let a = w.begin(1).unwrap();
            let _b = w.begin(2).unwrap();
            w.varint(3, 1);
            // Ending `a` ends `b` first.
            w.end(a);
            w.varint(4, 1);
        });
        assert_eq!(nested, [0x0a, 0x04, 0x12, 0x02, 0x18, 0x01, 0x20, 0x01]);
        let open = written(|w| {
            let _a = w.begin(1).unwrap();
            w.string(2, "x");
        });
        assert_eq!(open, [0x0a, 0x03, 0x12, 0x01, b'x']);
    }

    #[test]
    fn writer_refuses_nesting_deeper_than_depth() {
        let mut buf = [0u8; 64];
        let mut w = Writer::<2>::new(&mut buf);
        let _a = w.begin(1).unwrap();
        let _b = w.begin(1).unwrap();
        assert_eq!(w.depth(), 2);
        assert_eq!(w.begin(1).err(), Some(TooDeep));
        assert_eq!(w.finish(), Ok(4));
    }

    #[test]
    fn writer_packed_varints() {
        let out = written(|w| {
            w.packed_varints(1, [1, 2, 300]).unwrap();
            w.packed_varints(2, []).unwrap();
        });
        assert_eq!(out, [0x0a, 0x04, 0x01, 0x02, 0xac, 0x02]);
    }
}
