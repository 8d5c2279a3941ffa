//! The header block encoder (RFC 7541 §6), which never indexes.
//!
//! A field that is in the static table whole is sent as its index; one whose
//! name is there is sent as a literal with that name index; any other as a
//! literal with a literal name. Literals are "without indexing", or "never
//! indexed" for credentials. Strings are Huffman-coded when that is shorter.
//!
//! Never inserting costs a few bytes per block against an indexing encoder,
//! and saves a whole table per connection on both sides, the bookkeeping of
//! its evictions, and the CPU of searching it.

use super::out::Out;
use super::static_table::{self, Match};
use super::{DEFAULT_TABLE_SIZE, EncodeError, Field, huffman, integer};

/// Names whose values are always encoded as never indexed (RFC 7541 §7.1.3).
const SENSITIVE_NAMES: [&[u8]; 2] = [b"authorization", b"proxy-authorization"];

/// Encodes the header blocks of one direction of one connection.
///
/// ```
/// use mcpwire_core::hpack::{Encoder, Field};
///
/// let mut encoder = Encoder::new();
/// let mut out = [0u8; 64];
/// let n = encoder.encode([Field::new(b":method", b"POST"), Field::new(b"te", b"trailers")], &mut out)?;
/// // :method POST is static entry 3; "te" is a raw literal name (Huffman would not
/// // be shorter); "trailers" is Huffman-coded in 6 bytes.
/// assert_eq!(&out[..n], &[0x83, 0x00, 0x02, b't', b'e', 0x86, 0x4d, 0x83, 0x35, 0x05, 0xb1, 0x1f]);
/// # Ok::<(), mcpwire_core::hpack::EncodeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Encoder {
    /// The table size the peer's decoder believes this encoder uses.
    table_size: usize,
    /// A size update must open the next block.
    update_pending: bool,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    /// An encoder for a peer with the default SETTINGS_HEADER_TABLE_SIZE.
    pub const fn new() -> Self {
        Self {
            table_size: DEFAULT_TABLE_SIZE,
            update_pending: false,
        }
    }

    /// Applies the peer's SETTINGS_HEADER_TABLE_SIZE. When it is below the
    /// size the peer assumes this encoder uses, the next block opens with a
    /// size update to 0 (the table is always empty), as RFC 7541 §4.2 requires.
    pub fn set_max_table_size(&mut self, max: usize) {
        if max < self.table_size {
            self.table_size = 0;
            self.update_pending = true;
        }
    }

    /// Encodes `fields` as one header block into `out`; returns its length.
    ///
    /// When `out` is too small the error carries the length the whole block
    /// needs, and the encoder's state is as before the call.
    pub fn encode<'f, I>(&mut self, fields: I, out: &mut [u8]) -> Result<usize, EncodeError>
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        let mut w = Out::new(out);
        if self.update_pending {
            integer::write(&mut w, self.table_size, 5, 0x20);
        }
        for field in fields {
            write_field(&mut w, &field);
        }
        let n = w.finish()?;
        self.update_pending = false;
        Ok(n)
    }

    /// The length [`Encoder::encode`] would return for `fields`.
    pub fn encoded_len<'f, I>(&self, fields: I) -> usize
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        let mut w = Out::new(&mut []);
        if self.update_pending {
            integer::write(&mut w, self.table_size, 5, 0x20);
        }
        for field in fields {
            write_field(&mut w, &field);
        }
        match w.finish() {
            Ok(n) | Err(EncodeError::BufferTooSmall { needed: n }) => n,
        }
    }
}

fn write_field(w: &mut Out<'_>, field: &Field<'_>) {
    let sensitive = field.never_indexed || SENSITIVE_NAMES.contains(&field.name);
    // Literal without indexing (§6.2.2) or never indexed (§6.2.3).
    let flags = if sensitive { 0x10 } else { 0x00 };
    match static_table::find(field.name, field.value) {
        Match::Full(index) if !sensitive => integer::write(w, index, 7, 0x80),
        Match::Full(index) | Match::Name(index) => {
            integer::write(w, index, 4, flags);
            write_string(w, field.value);
        }
        Match::None => {
            w.push(flags);
            write_string(w, field.name);
            write_string(w, field.value);
        }
    }
}

/// A string literal (§5.2), Huffman-coded when that is strictly shorter.
fn write_string(w: &mut Out<'_>, s: &[u8]) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        integer::write(w, coded, 7, 0x80);
        match w.reserve(coded) {
            Some(dst) => {
                huffman::write(dst, s);
                w.advance(coded);
            }
            None => w.advance(coded),
        }
    } else {
        integer::write(w, s.len(), 7, 0x00);
        w.extend(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_never_indexed() {
        let mut e = Encoder::new();
        let mut out = [0u8; 64];
        let n = e
            .encode([Field::new(b"authorization", b"x")], &mut out)
            .unwrap();
        // Never indexed, name index 23 (4-bit prefix: 0x1f then 23 - 15 = 8), raw "x".
        assert_eq!(&out[..n], &[0x1f, 0x08, 0x01, b'x']);
        let n = e
            .encode([Field::sensitive(b"x-key", b"k")], &mut out)
            .unwrap();
        assert_eq!(out[0], 0x10);
        assert_eq!(n, 1 + 1 + huffman::encoded_len(b"x-key") + 2);
    }

    #[test]
    fn lowered_table_size_opens_the_next_block_with_an_update() {
        let mut e = Encoder::new();
        e.set_max_table_size(8192);
        let mut out = [0u8; 16];
        assert_eq!(e.encode([Field::new(b":method", b"GET")], &mut out), Ok(1));
        e.set_max_table_size(100);
        let n = e
            .encode([Field::new(b":method", b"GET")], &mut out)
            .unwrap();
        assert_eq!(&out[..n], &[0x20, 0x82]);
        let n = e
            .encode([Field::new(b":method", b"GET")], &mut out)
            .unwrap();
        assert_eq!(&out[..n], &[0x82]);
    }

    #[test]
    fn too_small_keeps_the_pending_update() {
        let mut e = Encoder::new();
        e.set_max_table_size(0);
        let fields = [Field::new(b"x-long-name", b"some value here")];
        let needed = e.encoded_len(fields);
        let mut small = [0u8; 4];
        assert_eq!(
            e.encode(fields, &mut small),
            Err(EncodeError::BufferTooSmall { needed })
        );
        let mut out = [0u8; 64];
        assert_eq!(e.encode(fields, &mut out), Ok(needed));
        assert_eq!(out[0], 0x20);
    }
}
