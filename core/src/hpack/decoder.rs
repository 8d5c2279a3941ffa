//! The header block decoder (RFC 7541 §3, §6).

use super::table::{DynamicTable, NameSource, ValueSource};
use super::{DEFAULT_TABLE_SIZE, DecodeError, Field, huffman, integer, static_table};
use crate::records::{InlineRecords, Records};

/// Limits on what a decoded block may hand out.
///
/// Going over a limit is a size error: the decoder reads the rest of the
/// block, applies its dynamic-table changes, hands out no more fields and
/// returns the error at the end, so the connection's next block decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest field, as RFC 7541 §4.1 sizes it (name + value + 32).
    pub max_field_size: usize,
    /// The largest header list, as RFC 9113 §6.5.2 sizes it (the sum of the
    /// field sizes); what SETTINGS_MAX_HEADER_LIST_SIZE advertises.
    pub max_header_list_size: usize,
}

impl Default for Limits {
    /// 8 KiB per field and 16 KiB per list: room for any gRPC or MCP request
    /// and for the largest metadata gRPC implementations send by default.
    fn default() -> Self {
        Self {
            max_field_size: 8 * 1024,
            max_header_list_size: 16 * 1024,
        }
    }
}

/// Decodes the header blocks of one direction of one connection.
///
/// `TABLE` is the storage of the dynamic table in bytes: the largest
/// SETTINGS_HEADER_TABLE_SIZE the connection will ever advertise. Until the
/// peer acknowledges a setting the maximum is HTTP/2's default of 4096, so a
/// `TABLE` below 4096 can only follow peers that wait for that
/// acknowledgement, or that do not index; `Decoder<4096>` follows every peer.
///
/// `B` holds the table's bytes: inline by default (`TABLE` bytes in the
/// decoder itself), or storage that grows as entries arrive (see
/// [`crate::records`]); its [`Records::LIMIT`] must be `TABLE`.
///
/// ```
/// use mcpwire_core::hpack::{Decoder, Field};
///
/// let mut decoder: Decoder<4096> = Decoder::new();
/// let mut scratch = [0u8; 1024];
/// // :method GET, :path /, literal "x-id: 7" without indexing.
/// let block = [0x82, 0x84, 0x00, 0x04, b'x', b'-', b'i', b'd', 0x01, b'7'];
/// let mut n = 0;
/// decoder.decode(&block, &mut scratch, |f: Field<'_>| {
///     n += 1;
///     if n == 3 {
///         assert_eq!((f.name, f.value), (&b"x-id"[..], &b"7"[..]));
///     }
/// })?;
/// assert_eq!(n, 3);
/// # Ok::<(), mcpwire_core::hpack::DecodeError>(())
/// ```
pub struct Decoder<const TABLE: usize = DEFAULT_TABLE_SIZE, B = InlineRecords<u8, TABLE>> {
    table: DynamicTable<B>,
    /// The acknowledged SETTINGS_HEADER_TABLE_SIZE: no size update may exceed it.
    settings_max: usize,
    /// The smallest maximum set since the last block, when it is below the
    /// size the encoder was using: the next block must begin with an update
    /// at most this large (RFC 7541 §4.2).
    required_update: Option<usize>,
    limits: Limits,
}

impl<const TABLE: usize, B: Records<u8>> core::fmt::Debug for Decoder<TABLE, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Decoder")
            .field("table_len", &self.table.len())
            .field("table_size", &self.table.size())
            .field("max_table_size", &self.table.max_size())
            .field("table_storage", &self.table.storage_len())
            .field("settings_max", &self.settings_max)
            .field("limits", &self.limits)
            .finish()
    }
}

impl<const TABLE: usize, B: Records<u8>> Default for Decoder<TABLE, B> {
    fn default() -> Self {
        Self::new()
    }
}

/// A string literal as it appears in the block.
#[derive(Clone, Copy)]
struct Literal<'b> {
    huffman: bool,
    bytes: &'b [u8],
}

/// The name of a literal field representation.
#[derive(Clone, Copy)]
enum Name<'b> {
    Static(&'static [u8]),
    Dynamic(usize),
    Literal(Literal<'b>),
}

/// Counts what has been handed out against the limits.
struct Admission {
    limits: Limits,
    list_size: usize,
    error: Option<DecodeError>,
}

impl Admission {
    /// Whether a field of these lengths may be handed out.
    #[inline(always)]
    fn admit(&mut self, name_len: usize, value_len: usize) -> bool {
        if self.error.is_some() {
            return false;
        }
        let size = name_len + value_len + super::ENTRY_OVERHEAD;
        if size > self.limits.max_field_size {
            self.error = Some(DecodeError::FieldTooLarge);
            return false;
        }
        self.list_size += size;
        if self.list_size > self.limits.max_header_list_size {
            self.error = Some(DecodeError::HeaderListTooLarge);
            return false;
        }
        true
    }
}

impl<const TABLE: usize, B: Records<u8>> Decoder<TABLE, B> {
    /// A decoder with the default [`Limits`] and the HTTP/2 initial maximum
    /// table size (4096, or `TABLE` if smaller).
    pub fn new() -> Self {
        Self::with_limits(Limits {
            max_field_size: 8 * 1024,
            max_header_list_size: 16 * 1024,
        })
    }

    /// A decoder with the given limits.
    pub fn with_limits(limits: Limits) -> Self {
        const { assert!(B::LIMIT == TABLE, "table storage limit is not TABLE") };
        let max = if DEFAULT_TABLE_SIZE < TABLE {
            DEFAULT_TABLE_SIZE
        } else {
            TABLE
        };
        Self {
            table: DynamicTable::new(max),
            settings_max: max,
            required_update: None,
            limits,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Changes the limits; they apply from the next block.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Applies a SETTINGS_HEADER_TABLE_SIZE that the peer has acknowledged:
    /// size updates above it become errors, and when it is below the size the
    /// peer's encoder uses, the next block must begin with an update to at
    /// most this value. Values above `TABLE` are taken as `TABLE`; never
    /// advertise more than `TABLE`.
    pub fn set_max_table_size(&mut self, max: usize) {
        let max = max.min(TABLE);
        if max < self.table.max_size() {
            self.required_update = Some(self.required_update.map_or(max, |r| r.min(max)));
        }
        self.settings_max = max;
    }

    /// The acknowledged maximum (SETTINGS_HEADER_TABLE_SIZE).
    pub fn max_table_size(&self) -> usize {
        self.settings_max
    }

    /// The number of entries in the dynamic table.
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// The size of the dynamic table as RFC 7541 §4.1 counts it.
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The bytes the table's storage holds now: `TABLE` for inline storage,
    /// for growing storage what the entries so far needed.
    pub fn table_storage(&self) -> usize {
        self.table.storage_len()
    }

    /// The maximum size the peer's encoder set with its last size update.
    pub fn table_capacity(&self) -> usize {
        self.table.max_size()
    }

    /// Dynamic entry `i` as (name, value); `i = 0` is the newest, HPACK index 62.
    pub fn table_entry(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.table.get(i)
    }

    /// Decodes one complete header block (HEADERS plus any CONTINUATION
    /// fragments, joined), calling `on_field` for every field in order.
    ///
    /// Names and values are borrowed from `block`, from the tables, or from
    /// `scratch`, which receives Huffman-coded literals that do not enter
    /// the dynamic table; a name and a value of one field share it.
    ///
    /// On a size error ([`DecodeError::is_size_error`]) the whole block has
    /// been read and the table is in step with the peer; on any other error
    /// the connection's compression context is lost (COMPRESSION_ERROR).
    pub fn decode<F>(
        &mut self,
        block: &[u8],
        scratch: &mut [u8],
        mut on_field: F,
    ) -> Result<(), DecodeError>
    where
        F: FnMut(Field<'_>),
    {
        let mut rest = block;
        let mut admission = Admission {
            limits: self.limits,
            list_size: 0,
            error: None,
        };

        // Size updates may only open the block (RFC 7541 §4.2).
        while let Some(&first) = rest.first() {
            if first & 0xe0 != 0x20 {
                break;
            }
            let (size, n) = integer::decode(rest, 5)?;
            rest = &rest[n..];
            self.update_table_size(size)?;
        }
        if self.required_update.is_some() {
            return Err(DecodeError::TableSizeUpdateMissing);
        }

        while let Some(&first) = rest.first() {
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let (index, n) = integer::decode(rest, 7)?;
                rest = &rest[n..];
                let (name, value) = self.lookup(index)?;
                if admission.admit(name.len(), value.len()) {
                    on_field(Field::new(name, value));
                }
            } else if first & 0x40 != 0 {
                // Literal with incremental indexing (§6.2.1).
                let (name, n) = self.read_name(rest, 6)?;
                rest = &rest[n..];
                let (value, n) = read_literal(rest)?;
                rest = &rest[n..];
                self.insert(name, value, scratch, &mut admission, &mut on_field)?;
            } else if first & 0x20 != 0 {
                return Err(DecodeError::TableSizeUpdateNotAtStart);
            } else {
                // Literal without indexing (§6.2.2) or never indexed (§6.2.3).
                let never_indexed = first & 0x10 != 0;
                let (name, n) = self.read_name(rest, 4)?;
                rest = &rest[n..];
                let (value, n) = read_literal(rest)?;
                rest = &rest[n..];
                self.emit(
                    name,
                    value,
                    never_indexed,
                    scratch,
                    &mut admission,
                    &mut on_field,
                )?;
            }
        }
        match admission.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn update_table_size(&mut self, size: u32) -> Result<(), DecodeError> {
        let size_usize = size as usize;
        if size_usize > self.settings_max {
            return Err(DecodeError::TableSizeTooLarge {
                requested: size,
                max: self.settings_max as u32,
            });
        }
        if let Some(required) = self.required_update {
            if size_usize > required {
                return Err(DecodeError::TableSizeUpdateMissing);
            }
            self.required_update = None;
        }
        self.table.set_max_size(size_usize);
        Ok(())
    }

    /// The entry at HPACK index `index` (static, then dynamic).
    #[inline]
    fn lookup(&self, index: u32) -> Result<(&[u8], &[u8]), DecodeError> {
        let i = index as usize;
        if let Some(entry) = static_table::get(i) {
            return Ok(entry);
        }
        i.checked_sub(static_table::STATIC_TABLE.len() + 1)
            .and_then(|d| self.table.get(d))
            .ok_or(DecodeError::InvalidIndex(index))
    }

    /// Reads the name part of a literal representation whose index has a
    /// `prefix_bits` prefix. Returns the name and the octets read.
    #[inline(always)]
    fn read_name<'b>(
        &self,
        buf: &'b [u8],
        prefix_bits: u8,
    ) -> Result<(Name<'b>, usize), DecodeError> {
        let (index, n) = integer::decode(buf, prefix_bits)?;
        if index == 0 {
            let (literal, m) = read_literal(&buf[n..])?;
            return Ok((Name::Literal(literal), n + m));
        }
        let i = index as usize;
        if let Some((name, _)) = static_table::get(i) {
            return Ok((Name::Static(name), n));
        }
        let d = i - (static_table::STATIC_TABLE.len() + 1);
        if d < self.table.len() {
            Ok((Name::Dynamic(d), n))
        } else {
            Err(DecodeError::InvalidIndex(index))
        }
    }

    /// Hands out a literal that does not enter the table.
    #[inline(always)]
    fn emit<F: FnMut(Field<'_>)>(
        &self,
        name: Name<'_>,
        value: Literal<'_>,
        never_indexed: bool,
        scratch: &mut [u8],
        admission: &mut Admission,
        on_field: &mut F,
    ) -> Result<(), DecodeError> {
        // The common case, kept small enough to inline: nothing to decode.
        let name_raw = match name {
            Name::Static(b) => Some(b),
            Name::Literal(l) if !l.huffman => Some(l.bytes),
            _ => None,
        };
        if let (Some(name_bytes), false) = (name_raw, value.huffman) {
            if admission.admit(name_bytes.len(), value.bytes.len()) {
                on_field(Field {
                    name: name_bytes,
                    value: value.bytes,
                    never_indexed,
                });
            }
            return Ok(());
        }
        self.emit_decoded(name, value, never_indexed, scratch, admission, on_field)
    }

    /// [`Decoder::emit`] for a name or value that needs the table or Huffman.
    #[inline(never)]
    fn emit_decoded<F: FnMut(Field<'_>)>(
        &self,
        name: Name<'_>,
        value: Literal<'_>,
        never_indexed: bool,
        scratch: &mut [u8],
        admission: &mut Admission,
        on_field: &mut F,
    ) -> Result<(), DecodeError> {
        if admission.error.is_some() {
            // Nothing more is handed out, but the strings must still be valid.
            return check_strings(name, value);
        }
        let room = scratch.len().min(admission.limits.max_field_size);
        let scratch = &mut scratch[..room];
        let decoded_name = match name {
            Name::Literal(l) if l.huffman => match huffman::decode(l.bytes, scratch) {
                Ok(n) => n,
                Err(e) => return over_limit(e, name, value, admission),
            },
            _ => 0,
        };
        let (name_part, value_part) = scratch.split_at_mut(decoded_name);
        let name_bytes: &[u8] = match name {
            Name::Static(b) => b,
            Name::Dynamic(d) => self.table.get(d).ok_or(DecodeError::InvalidIndex(0))?.0,
            Name::Literal(l) if l.huffman => name_part,
            Name::Literal(l) => l.bytes,
        };
        let value_bytes: &[u8] = if value.huffman {
            match huffman::decode(value.bytes, value_part) {
                Ok(n) => &value_part[..n],
                Err(e) => return over_limit(e, name, value, admission),
            }
        } else {
            value.bytes
        };
        if admission.admit(name_bytes.len(), value_bytes.len()) {
            on_field(Field {
                name: name_bytes,
                value: value_bytes,
                never_indexed,
            });
        }
        Ok(())
    }

    /// Adds a literal to the dynamic table, then hands it out from there.
    fn insert<F: FnMut(Field<'_>)>(
        &mut self,
        name: Name<'_>,
        value: Literal<'_>,
        scratch: &mut [u8],
        admission: &mut Admission,
        on_field: &mut F,
    ) -> Result<(), DecodeError> {
        let name_source = match name {
            Name::Static(b) => NameSource::Bytes(b),
            Name::Dynamic(d) => NameSource::Entry(d),
            Name::Literal(l) if l.huffman => {
                NameSource::Huffman(l.bytes, huffman::decoded_len(l.bytes)?)
            }
            Name::Literal(l) => NameSource::Bytes(l.bytes),
        };
        let value_source = if value.huffman {
            ValueSource::Huffman(value.bytes, huffman::decoded_len(value.bytes)?)
        } else {
            ValueSource::Bytes(value.bytes)
        };
        let size = self
            .table
            .entry_size(name_source, value_source)
            .ok_or(DecodeError::InvalidIndex(0))?;
        if size > self.table.max_size() {
            // Too large for the table: the table empties and the field is
            // not added (RFC 7541 §4.4).
            self.emit(name, value, false, scratch, admission, on_field)?;
            self.table.clear();
            return Ok(());
        }
        self.table.insert(name_source, value_source)?;
        let (name_bytes, value_bytes) = self.table.get(0).ok_or(DecodeError::InvalidIndex(0))?;
        if admission.admit(name_bytes.len(), value_bytes.len()) {
            on_field(Field::new(name_bytes, value_bytes));
        }
        Ok(())
    }
}

/// Reads a string literal (§5.2). Returns it and the octets read.
#[inline(always)]
fn read_literal(buf: &[u8]) -> Result<(Literal<'_>, usize), DecodeError> {
    let huffman = buf.first().is_some_and(|&b| b & 0x80 != 0);
    let (len, n) = integer::decode(buf, 7)?;
    let end = n
        .checked_add(len as usize)
        .ok_or(DecodeError::StringPastEnd)?;
    let bytes = buf.get(n..end).ok_or(DecodeError::StringPastEnd)?;
    Ok((Literal { huffman, bytes }, end))
}

/// Checks the Huffman strings of a field that is not handed out.
fn check_strings(name: Name<'_>, value: Literal<'_>) -> Result<(), DecodeError> {
    if let Name::Literal(l) = name
        && l.huffman
    {
        huffman::decoded_len(l.bytes)?;
    }
    if value.huffman {
        huffman::decoded_len(value.bytes)?;
    }
    Ok(())
}

/// A Huffman string did not fit the scratch buffer: a size error, once the
/// strings are known to be valid.
fn over_limit(
    error: DecodeError,
    name: Name<'_>,
    value: Literal<'_>,
    admission: &mut Admission,
) -> Result<(), DecodeError> {
    if error != DecodeError::FieldTooLarge {
        return Err(error);
    }
    check_strings(name, value)?;
    admission.error = Some(DecodeError::FieldTooLarge);
    Ok(())
}
