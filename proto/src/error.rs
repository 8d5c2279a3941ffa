//! Errors of the protobuf codecs.

use crate::wire::WireType;

/// Why bytes are not a valid encoding of the expected message.
///
/// Every variant means the message is malformed. A gRPC server answers it with
/// INVALID_ARGUMENT (and, for MCP, the JSON-RPC error -32700).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes end inside a tag, a value or a length-delimited payload.
    Truncated,
    /// A varint is longer than ten bytes, or its value does not fit in 64 bits.
    VarintOverflow,
    /// A tag's field number is 0 or above [`MAX_FIELD_NUMBER`](crate::wire::MAX_FIELD_NUMBER).
    InvalidFieldNumber(u64),
    /// A tag's wire type is 6 or 7, which protobuf does not define.
    InvalidWireType(u8),
    /// A group (wire type SGROUP or EGROUP). Proto3 has no groups, and none of
    /// our messages declares one, so we refuse them rather than match
    /// start and end tags.
    Group,
    /// A known field arrived with another wire type than its declaration gives.
    WrongWireType {
        /// The field number.
        field: u32,
        /// The wire type of the declared type.
        expected: WireType,
        /// The wire type on the wire.
        found: WireType,
    },
    /// A `string` field (or map key) holds bytes that are not UTF-8.
    InvalidUtf8 {
        /// The field number.
        field: u32,
    },
    /// A singular field occurs twice. Protobuf parsers merge (the last
    /// scalar wins); we refuse, so that a message means one thing to every
    /// reader, as the Zig SDK of the binding does.
    DuplicateField {
        /// The field number.
        field: u32,
    },
    /// Messages (`Struct` and `ListValue` included) nest deeper than the
    /// limit the caller set.
    TooDeep,
    /// The message holds more fields and repeated elements, counted over all
    /// its sub-messages, than the limit the caller set.
    TooManyElements,
    /// A `google.protobuf.Value` has no member of its `kind` oneof, or two
    /// different ones (a `Struct` entry without a value counts as one with
    /// none).
    ValueKind,
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Truncated => f.write_str("protobuf message ends inside a field"),
            Self::VarintOverflow => f.write_str("protobuf varint longer than 64 bits"),
            Self::InvalidFieldNumber(n) => write!(f, "protobuf field number {n} is out of range"),
            Self::InvalidWireType(t) => write!(f, "protobuf wire type {t} does not exist"),
            Self::Group => f.write_str("protobuf groups are not supported"),
            Self::WrongWireType {
                field,
                expected,
                found,
            } => write!(
                f,
                "protobuf field {field} has wire type {found}, expected {expected}"
            ),
            Self::InvalidUtf8 { field } => write!(f, "protobuf string field {field} is not UTF-8"),
            Self::DuplicateField { field } => {
                write!(f, "protobuf singular field {field} occurs more than once")
            }
            Self::TooDeep => f.write_str("protobuf messages nest too deep"),
            Self::TooManyElements => f.write_str("protobuf message has too many elements"),
            Self::ValueKind => {
                f.write_str("google.protobuf.Value must hold exactly one kind of value")
            }
        }
    }
}

impl core::error::Error for DecodeError {}

/// The output slice is too small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferTooSmall {
    /// Bytes the whole output needs, counted from the start of the slice
    /// that was passed in.
    pub needed: usize,
}

impl core::fmt::Display for BufferTooSmall {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "output buffer too small, {} bytes needed", self.needed)
    }
}

impl core::error::Error for BufferTooSmall {}
