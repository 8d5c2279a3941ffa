//! Errors of the HPACK codec.

/// Why a header block could not be decoded.
///
/// Every variant except the two size errors means the decoder can no longer
/// follow the peer's encoder: HTTP/2 answers it with a connection error of type
/// COMPRESSION_ERROR (RFC 9113 §4.3). After a size error
/// ([`DecodeError::is_size_error`]) the whole block has still been read and
/// every dynamic-table change applied, so the connection can go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The block ended inside a field representation.
    Truncated,
    /// A string literal's length reaches past the end of the block. The
    /// gRPC binding answers it with PROTOCOL_ERROR rather than
    /// COMPRESSION_ERROR: the block is not valid, whatever the decoder's
    /// state.
    StringPastEnd,
    /// An integer does not fit in 32 bits (RFC 7541 §5.1).
    IntegerOverflow,
    /// An index is 0 or past the end of the static and dynamic tables (§2.3.3).
    InvalidIndex(u32),
    /// A Huffman string contains the EOS symbol (§5.2).
    HuffmanEos,
    /// A Huffman string ends in more than 7 bits of padding, or in padding that
    /// is not the most significant bits of EOS (§5.2).
    HuffmanPadding,
    /// A dynamic table size update larger than the acknowledged maximum (§6.3).
    TableSizeTooLarge { requested: u32, max: u32 },
    /// A dynamic table size update after the first field of a block (§4.2).
    TableSizeUpdateNotAtStart,
    /// The maximum table size was lowered, and the next block did not begin
    /// with an update to a size at most that low (§4.2).
    TableSizeUpdateMissing,
    /// A field is larger than [`Limits::max_field_size`](super::Limits), or its
    /// Huffman-decoded bytes do not fit the scratch buffer. A size error.
    FieldTooLarge,
    /// A literal with incremental indexing straddles fragments and is larger
    /// than the buffer given to
    /// [`Decoder::decode_fragment`](super::Decoder::decode_fragment), but not
    /// larger than the dynamic table: the peer's table now holds it and ours
    /// cannot, so the compression context is lost. A buffer of the table's
    /// size rules it out.
    EntryNotBuffered,
    /// The fields of the block add up to more than
    /// [`Limits::max_header_list_size`](super::Limits). A size error.
    HeaderListTooLarge,
}

impl DecodeError {
    /// True for the errors that leave the decoder in step with the encoder:
    /// a field or the list over its limit. HTTP/2 refuses the stream (or
    /// answers 431) and keeps the connection.
    pub const fn is_size_error(&self) -> bool {
        matches!(self, Self::FieldTooLarge | Self::HeaderListTooLarge)
    }
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Truncated => f.write_str("header block ends inside a field"),
            Self::StringPastEnd => f.write_str("a string length past the end of the block"),
            Self::IntegerOverflow => f.write_str("HPACK integer overflows 32 bits"),
            Self::InvalidIndex(i) => write!(f, "HPACK index {i} is not in the table"),
            Self::HuffmanEos => f.write_str("Huffman string contains EOS"),
            Self::HuffmanPadding => f.write_str("Huffman string has invalid padding"),
            Self::TableSizeTooLarge { requested, max } => {
                write!(
                    f,
                    "dynamic table size {requested} exceeds the maximum {max}"
                )
            }
            Self::TableSizeUpdateNotAtStart => {
                f.write_str("dynamic table size update after the first field")
            }
            Self::TableSizeUpdateMissing => {
                f.write_str("block does not begin with the required table size update")
            }
            Self::EntryNotBuffered => {
                f.write_str("an indexed header field larger than the decoding buffer")
            }
            Self::FieldTooLarge => f.write_str("header field larger than the limit"),
            Self::HeaderListTooLarge => f.write_str("header list larger than the limit"),
        }
    }
}

impl core::error::Error for DecodeError {}

/// Why a header block could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The output slice is too small; `needed` bytes would hold the whole block.
    BufferTooSmall { needed: usize },
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::BufferTooSmall { needed } => {
                write!(f, "output buffer too small: {needed} bytes needed")
            }
        }
    }
}

impl core::error::Error for EncodeError {}
