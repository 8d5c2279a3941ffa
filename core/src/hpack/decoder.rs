//! The header block decoder (RFC 7541 §3, §6).

use super::huffman::{Pending, SpillSink};
use super::table::{DynamicTable, NameSource, ValueSource};
use super::{
    DEFAULT_TABLE_SIZE, DecodeError, ENTRY_OVERHEAD, Field, huffman, integer, static_table,
};
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
    /// The block being decoded, between its fragments; its limits are the
    /// decoder's.
    block: BlockState,
}

impl<const TABLE: usize, B: Records<u8>> core::fmt::Debug for Decoder<TABLE, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Decoder")
            .field("table_len", &self.table.len())
            .field("table_size", &self.table.size())
            .field("max_table_size", &self.table.max_size())
            .field("table_storage", &self.table.storage_len())
            .field("settings_max", &self.settings_max)
            .field("limits", &self.block.admission.limits)
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
#[derive(Debug, Clone, Copy)]
struct Admission {
    limits: Limits,
    list_size: usize,
    error: Option<Fault>,
    /// A field representation has begun: size updates are over (§4.2).
    /// Kept here, where it costs no padding.
    started: bool,
}

/// An error a block carries to its end, in one octet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    FieldTooLarge,
    HeaderListTooLarge,
    HuffmanEos,
    HuffmanPadding,
}

impl Fault {
    /// A Huffman error of a string (the only errors a string can have).
    fn of_huffman(e: DecodeError) -> Self {
        match e {
            DecodeError::HuffmanPadding => Self::HuffmanPadding,
            _ => Self::HuffmanEos,
        }
    }

    const fn error(self) -> DecodeError {
        match self {
            Self::FieldTooLarge => DecodeError::FieldTooLarge,
            Self::HeaderListTooLarge => DecodeError::HeaderListTooLarge,
            Self::HuffmanEos => DecodeError::HuffmanEos,
            Self::HuffmanPadding => DecodeError::HuffmanPadding,
        }
    }
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
            self.error = Some(Fault::FieldTooLarge);
            return false;
        }
        self.list_size += size;
        if self.list_size > self.limits.max_header_list_size {
            self.error = Some(Fault::HeaderListTooLarge);
            return false;
        }
        true
    }

    /// A field that was not kept is over the limits: a size error, unless
    /// there is one already.
    fn refuse(&mut self, error: Fault) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }
}

/// Where a header block stands between two of its fragments.
#[derive(Debug, Clone, Copy)]
struct BlockState {
    admission: Admission,
    /// The representation the last fragment left unfinished.
    partial: Option<Partial>,
}

impl BlockState {
    const fn new(limits: Limits) -> Self {
        Self {
            admission: Admission {
                limits,
                list_size: 0,
                error: None,
                started: false,
            },
            partial: None,
        }
    }
}

/// The kind of a field representation, from its first octet (§6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rep {
    Indexed,
    Indexing,
    SizeUpdate,
    Literal { never_indexed: bool },
}

impl Rep {
    const fn of(first: u8) -> Self {
        if first & 0x80 != 0 {
            Self::Indexed
        } else if first & 0x40 != 0 {
            Self::Indexing
        } else if first & 0x20 != 0 {
            Self::SizeUpdate
        } else {
            Self::Literal {
                never_indexed: first & 0x10 != 0,
            }
        }
    }

    /// The prefix of the integer in the first octet.
    const fn prefix_bits(self) -> u8 {
        match self {
            Self::Indexed => 7,
            Self::Indexing => 6,
            Self::SizeUpdate => 5,
            Self::Literal { .. } => 4,
        }
    }
}

/// What an unfinished representation reads next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The integer of the first octet (index, name index or size).
    Prefix,
    NameLength,
    Name,
    ValueLength,
    Value,
}

/// The name of an unfinished literal.
#[derive(Debug, Clone, Copy)]
enum PartialName {
    /// Its static index.
    Static(u8),
    /// Its 0-based dynamic index.
    Dynamic(u32),
    /// Decoded at the start of the caller's buffer.
    Literal,
}

/// A representation that straddles fragments. Its integers are collected
/// octet by octet; its strings are decoded into the caller's buffer as they
/// arrive (the name first, then the value), and counted on past the
/// buffer's end, so a string of any length costs no more memory.
#[derive(Debug, Clone, Copy)]
struct Partial {
    rep: Rep,
    step: Step,
    /// The octets of the integer being read: an integer that fits 32 bits
    /// takes at most six (§5.1).
    int: [u8; 6],
    int_len: u8,
    name: PartialName,
    /// The string being read is Huffman-coded.
    huffman: bool,
    /// Octets of the string still to come.
    left: u32,
    pending: Pending,
    /// Decoded octets of the literal name (0 for an indexed name).
    name_len: u32,
    /// Decoded octets of the string being read, also those past the buffer
    /// (at most `u32::MAX`: more is over any limit).
    len: u32,
    /// A Huffman error, given once the representation is complete: a string
    /// that runs past the end of the block is that error instead.
    deferred: Option<Fault>,
}

impl Partial {
    const fn new() -> Self {
        Self {
            rep: Rep::Indexed,
            step: Step::Prefix,
            int: [0; 6],
            int_len: 0,
            name: PartialName::Literal,
            huffman: false,
            left: 0,
            pending: Pending::new(),
            name_len: 0,
            len: 0,
            deferred: None,
        }
    }

    fn start_string(&mut self, len: u32, step: Step) {
        self.left = len;
        self.len = 0;
        self.pending = Pending::new();
        self.step = step;
    }

    /// Decodes `chunk` of the string into `dst`, where the string starts.
    fn take(&mut self, chunk: &[u8], dst: &mut [u8]) {
        let len = self.len as usize;
        if !self.huffman {
            let end = len.saturating_add(chunk.len());
            if let Some(d) = dst.get_mut(len..end) {
                d.copy_from_slice(chunk);
            }
            self.set_len(end);
        } else if self.deferred.is_none() {
            let mut sink = SpillSink { buf: dst, len };
            if let Err(e) = self.pending.feed(chunk, &mut sink) {
                self.deferred = Some(Fault::of_huffman(e));
            }
            self.set_len(sink.len);
        }
    }

    fn set_len(&mut self, len: usize) {
        self.len = u32::try_from(len).unwrap_or(u32::MAX);
    }

    /// The string is complete: the last Huffman symbols and the padding.
    fn end_string(&mut self, dst: &mut [u8]) {
        if self.huffman && self.deferred.is_none() {
            let mut sink = SpillSink {
                buf: dst,
                len: self.len as usize,
            };
            if let Err(e) = self.pending.finish(&mut sink) {
                self.deferred = Some(Fault::of_huffman(e));
            }
            self.set_len(sink.len);
        }
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
            block: BlockState::new(limits),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.block.admission.limits
    }

    /// Changes the limits; they apply to the fields decoded from now on.
    pub fn set_limits(&mut self, limits: Limits) {
        self.block.admission.limits = limits;
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
    /// fragments, joined), calling `on_field` for every field in order:
    /// [`Decoder::begin_block`], one [`Decoder::decode_fragment`] and
    /// [`Decoder::end_block`].
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
        // The block is whole: its state stays on the stack, and an earlier
        // block left unfinished is forgotten, as `begin_block` would.
        let mut st = BlockState::new(self.block.admission.limits);
        self.block.partial = None;
        self.fragments(&mut st, block, scratch, &mut on_field)?;
        self.finish(st)
    }

    /// Starts a header block that arrives in fragments (HEADERS, then
    /// CONTINUATION frames, or any pieces of them): forgets what is left of
    /// an earlier block, and takes the limits in force.
    pub fn begin_block(&mut self) {
        self.block = BlockState::new(self.block.admission.limits);
    }

    /// Decodes the next fragment of the block begun with
    /// [`Decoder::begin_block`], calling `on_field` for every field that
    /// ends in it, and applying every dynamic-table change at once.
    ///
    /// A field whose representation lies inside `fragment` is borrowed from
    /// it (or from `buf`, for Huffman-coded literals), as in
    /// [`Decoder::decode`]. A field that straddles fragments is decoded into
    /// `buf` as its octets arrive; `buf` must then be the same buffer, with
    /// the same contents, at the next call. A field larger than `buf` is not
    /// kept: it is counted, its Huffman code checked, and it is a size
    /// error ([`DecodeError::FieldTooLarge`]) at [`Decoder::end_block`],
    /// unless it enters the dynamic table. One that enters the table and
    /// fits the table's maximum size is inserted from `buf`, so `buf`
    /// should hold the table's largest entry (`TABLE` octets): one that
    /// does not fit `buf` is [`DecodeError::EntryNotBuffered`]. Memory is
    /// bounded by `buf`, whatever the size of the block.
    ///
    /// Errors here are never size errors: size errors are counted and given
    /// by [`Decoder::end_block`]. After an error the connection's
    /// compression context is lost.
    pub fn decode_fragment<F>(
        &mut self,
        fragment: &[u8],
        buf: &mut [u8],
        mut on_field: F,
    ) -> Result<(), DecodeError>
    where
        F: FnMut(Field<'_>),
    {
        let mut st = self.block;
        let result = self.fragments(&mut st, fragment, buf, &mut on_field);
        self.block = st;
        result
    }

    /// The block's last fragment was decoded: a block that ends inside a
    /// representation is [`DecodeError::StringPastEnd`] (inside a string)
    /// or [`DecodeError::Truncated`]; then the first size error, if a field
    /// or the list went over the [`Limits`]. After a size error the table is
    /// in step with the peer's encoder and the next block decodes.
    pub fn end_block(&mut self) -> Result<(), DecodeError> {
        let limits = self.limits();
        let st = core::mem::replace(&mut self.block, BlockState::new(limits));
        self.finish(st)
    }

    /// What the end of a block says: [`Decoder::end_block`].
    fn finish(&self, st: BlockState) -> Result<(), DecodeError> {
        if let Some(p) = st.partial {
            return Err(match p.step {
                Step::Name | Step::Value => DecodeError::StringPastEnd,
                _ => DecodeError::Truncated,
            });
        }
        if !st.admission.started && self.required_update.is_some() {
            return Err(DecodeError::TableSizeUpdateMissing);
        }
        match st.admission.error {
            Some(e) => Err(e.error()),
            None => Ok(()),
        }
    }

    fn fragments<F>(
        &mut self,
        st: &mut BlockState,
        fragment: &[u8],
        buf: &mut [u8],
        on_field: &mut F,
    ) -> Result<(), DecodeError>
    where
        F: FnMut(Field<'_>),
    {
        let mut rest = fragment;
        if st.partial.is_some() {
            let n = self.feed_partial(st, rest, buf, on_field)?;
            rest = rest.get(n..).unwrap_or_default();
        }
        // Whole representations, the common case, in a tight loop; one that
        // goes on past the fragment is read octet by octet from its start.
        // The counts live in a local meanwhile, where they stay in registers.
        let mut admission = st.admission;
        while let Some(&first) = rest.first() {
            match self.decode_one(&mut admission, first, rest, buf, on_field) {
                Ok(n) => rest = rest.get(n..).unwrap_or_default(),
                Err(DecodeError::Truncated | DecodeError::StringPastEnd) => {
                    st.admission = admission;
                    st.partial = Some(Partial::new());
                    let n = self.feed_partial(st, rest, buf, on_field)?;
                    rest = rest.get(n..).unwrap_or_default();
                    admission = st.admission;
                }
                Err(e) => return Err(e),
            }
        }
        st.admission = admission;
        Ok(())
    }

    /// The first field representation ends the size updates (§4.2).
    #[inline(always)]
    fn start_fields(&self, admission: &mut Admission) -> Result<(), DecodeError> {
        if !admission.started {
            if self.required_update.is_some() {
                return Err(DecodeError::TableSizeUpdateMissing);
            }
            admission.started = true;
        }
        Ok(())
    }

    /// Decodes the representation at the start of `rest`, when `rest` holds
    /// all of it. Returns the octets read; [`DecodeError::Truncated`] or
    /// [`DecodeError::StringPastEnd`] (with no change made) when it goes on
    /// past `rest`.
    #[inline(always)]
    fn decode_one<F>(
        &mut self,
        admission: &mut Admission,
        first: u8,
        rest: &[u8],
        scratch: &mut [u8],
        on_field: &mut F,
    ) -> Result<usize, DecodeError>
    where
        F: FnMut(Field<'_>),
    {
        if first & 0x80 != 0 {
            // Indexed field (§6.1).
            self.start_fields(admission)?;
            let (index, n) = integer::decode(rest, 7)?;
            let (name, value) = self.lookup(index)?;
            if admission.admit(name.len(), value.len()) {
                on_field(Field::new(name, value));
            }
            Ok(n)
        } else if first & 0x40 != 0 {
            // Literal with incremental indexing (§6.2.1).
            self.start_fields(admission)?;
            let (name, n) = self.read_name(rest, 6)?;
            let (value, m) = read_literal(rest.get(n..).unwrap_or_default())?;
            self.insert(name, value, scratch, admission, on_field)?;
            Ok(n + m)
        } else if first & 0x20 != 0 {
            // Size updates may only open the block (RFC 7541 §4.2).
            if admission.started {
                return Err(DecodeError::TableSizeUpdateNotAtStart);
            }
            let (size, n) = integer::decode(rest, 5)?;
            self.update_table_size(size)?;
            Ok(n)
        } else {
            // Literal without indexing (§6.2.2) or never indexed (§6.2.3).
            self.start_fields(admission)?;
            let never_indexed = first & 0x10 != 0;
            let (name, n) = self.read_name(rest, 4)?;
            let (value, m) = read_literal(rest.get(n..).unwrap_or_default())?;
            self.emit(name, value, never_indexed, scratch, admission, on_field)?;
            Ok(n + m)
        }
    }

    /// Feeds `input` to the unfinished representation. Returns the octets
    /// read: all of `input` while it stays unfinished, else up to its end.
    #[inline(never)]
    fn feed_partial<F>(
        &mut self,
        st: &mut BlockState,
        input: &[u8],
        buf: &mut [u8],
        on_field: &mut F,
    ) -> Result<usize, DecodeError>
    where
        F: FnMut(Field<'_>),
    {
        let Some(mut p) = st.partial else {
            return Ok(0);
        };
        let mut pos = 0;
        loop {
            if let Step::Name | Step::Value = p.step {
                let chunk = input.get(pos..).unwrap_or_default();
                let chunk = chunk.get(..p.left as usize).unwrap_or(chunk);
                pos += chunk.len();
                p.left -= chunk.len() as u32;
                let dst = buf.get_mut(p.name_len as usize..).unwrap_or_default();
                p.take(chunk, dst);
                if p.left > 0 {
                    break;
                }
                p.end_string(dst);
                if p.step == Step::Name {
                    p.name_len = p.len;
                    p.step = Step::ValueLength;
                    continue;
                }
                st.partial = None;
                self.complete(&p, st, buf, on_field)?;
                return Ok(pos);
            }
            let Some(&b) = input.get(pos) else {
                break;
            };
            pos += 1;
            let prefix_bits = if p.step != Step::Prefix {
                if p.int_len == 0 {
                    p.huffman = b & 0x80 != 0;
                }
                7
            } else {
                if p.int_len == 0 {
                    p.rep = Rep::of(b);
                    if p.rep != Rep::SizeUpdate {
                        self.start_fields(&mut st.admission)?;
                    } else if st.admission.started {
                        return Err(DecodeError::TableSizeUpdateNotAtStart);
                    }
                }
                p.rep.prefix_bits()
            };
            let Some(slot) = p.int.get_mut(usize::from(p.int_len)) else {
                return Err(DecodeError::IntegerOverflow);
            };
            *slot = b;
            p.int_len += 1;
            let value = match integer::decode(
                p.int.get(..usize::from(p.int_len)).unwrap_or_default(),
                prefix_bits,
            ) {
                Ok((value, _)) => value,
                Err(DecodeError::Truncated) => continue,
                Err(e) => return Err(e),
            };
            p.int_len = 0;
            match (p.step, p.rep) {
                (Step::Prefix, Rep::Indexed) => {
                    let (name, value) = self.lookup(value)?;
                    if st.admission.admit(name.len(), value.len()) {
                        on_field(Field::new(name, value));
                    }
                    st.partial = None;
                    return Ok(pos);
                }
                (Step::Prefix, Rep::SizeUpdate) => {
                    self.update_table_size(value)?;
                    st.partial = None;
                    return Ok(pos);
                }
                (Step::Prefix, _) if value == 0 => p.step = Step::NameLength,
                (Step::Prefix, _) => {
                    p.name = self.name_at(value)?;
                    p.step = Step::ValueLength;
                }
                (Step::NameLength, _) => p.start_string(value, Step::Name),
                _ => p.start_string(value, Step::Value),
            }
        }
        st.partial = Some(p);
        Ok(pos)
    }

    /// A representation that straddled fragments is complete in `buf`:
    /// hands it out, or inserts it, as [`Decoder::decode_one`] would have.
    fn complete<F>(
        &mut self,
        p: &Partial,
        st: &mut BlockState,
        buf: &[u8],
        on_field: &mut F,
    ) -> Result<(), DecodeError>
    where
        F: FnMut(Field<'_>),
    {
        if let Some(e) = p.deferred {
            return Err(e.error());
        }
        let (p_name_len, p_len) = (p.name_len as usize, p.len as usize);
        let (name_len, name) = match p.name {
            PartialName::Static(i) => {
                let (b, _) = static_table::get(usize::from(i)).unwrap_or_default();
                (b.len(), Name::Static(b))
            }
            PartialName::Dynamic(d) => {
                let d = d as usize;
                (
                    self.table.get(d).map_or(0, |(n, _)| n.len()),
                    Name::Dynamic(d),
                )
            }
            PartialName::Literal => (
                p_name_len,
                Name::Literal(Literal {
                    huffman: false,
                    bytes: buf.get(..p_name_len).unwrap_or_default(),
                }),
            ),
        };
        let Some(value) = buf.get(p_name_len..p_name_len.saturating_add(p_len)) else {
            // Not kept: larger than any field handed out.
            if p.rep == Rep::Indexing {
                let size = name_len
                    .saturating_add(p_len)
                    .saturating_add(ENTRY_OVERHEAD);
                if size <= self.table.max_size() {
                    // The peer's table holds it and ours cannot follow.
                    return Err(DecodeError::EntryNotBuffered);
                }
                // Too large for the table: it empties (RFC 7541 §4.4).
                self.table.clear();
            }
            st.admission.refuse(Fault::FieldTooLarge);
            return Ok(());
        };
        let value = Literal {
            huffman: false,
            bytes: value,
        };
        match p.rep {
            Rep::Indexing => self.insert(name, value, &mut [], &mut st.admission, on_field),
            Rep::Literal { never_indexed } => self.emit(
                name,
                value,
                never_indexed,
                &mut [],
                &mut st.admission,
                on_field,
            ),
            Rep::Indexed | Rep::SizeUpdate => Ok(()),
        }
    }

    /// The name of a literal whose name index is `index` (not 0).
    fn name_at(&self, index: u32) -> Result<PartialName, DecodeError> {
        let i = index as usize;
        if static_table::get(i).is_some() {
            return Ok(PartialName::Static(index as u8));
        }
        match i.checked_sub(static_table::STATIC_TABLE.len() + 1) {
            Some(d) if d < self.table.len() => Ok(PartialName::Dynamic(d as u32)),
            _ => Err(DecodeError::InvalidIndex(index)),
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
    admission.error = Some(Fault::FieldTooLarge);
    Ok(())
}
