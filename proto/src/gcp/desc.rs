//! The shape of the descriptor tables in [`schema`](super::schema) and
//! [`wkt`](super::wkt): what a decoder needs to know of each field (number,
//! type, label) and what the JSON mapping needs (names, enum values,
//! deprecation), as static data a device keeps in flash.

/// A protobuf message: its full name and its fields in declaration order.
#[derive(Debug)]
pub struct MessageDesc {
    /// The full name, package included: `model_context_protocol.Tool`
    /// (feature `names`).
    #[cfg(feature = "names")]
    pub name: &'static str,
    /// The fields, in the order the `.proto` file declares them.
    pub fields: &'static [FieldDesc],
}

impl MessageDesc {
    /// The field numbered `number`, if the message declares one.
    pub fn field(&self, number: u32) -> Option<&'static FieldDesc> {
        self.fields.iter().find(|f| f.number == number)
    }

    /// The field named `name` (the `.proto` name, snake case).
    #[cfg(feature = "names")]
    pub fn field_named(&self, name: &str) -> Option<&'static FieldDesc> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The name after the package and enclosing messages: `Request` for
    /// `model_context_protocol.CallToolRequest.Request`.
    #[cfg(feature = "names")]
    pub fn short_name(&self) -> &'static str {
        self.name.rsplit('.').next().unwrap_or(self.name)
    }
}

/// One field of a message.
#[derive(Debug)]
pub struct FieldDesc {
    /// The field number, 1 to 2^29 - 1.
    pub number: u32,
    /// The `.proto` name, snake case (feature `names`).
    #[cfg(feature = "names")]
    pub name: &'static str,
    /// The value's type.
    pub ty: FieldType,
    /// Singular, proto3 `optional`, or repeated (maps are repeated entries).
    pub label: Label,
    /// `[deprecated = true]`: decoded, then ignored by the mapping.
    pub deprecated: bool,
}

impl FieldDesc {
    /// True for `repeated` fields and maps, which may occur any number of
    /// times.
    pub const fn is_repeated(&self) -> bool {
        matches!(self.label, Label::Repeated)
    }
}

/// The type of a field's value, with the descriptor of a message, map entry
/// or enum.
#[derive(Debug, Clone, Copy)]
pub enum FieldType {
    /// `string`: UTF-8 text.
    String,
    /// `bytes`.
    Bytes,
    /// `bool`.
    Bool,
    /// `int32`: negatives are ten-byte varints.
    Int32,
    /// `int64`.
    Int64,
    /// `uint32`.
    Uint32,
    /// `uint64`.
    Uint64,
    /// `float`: four little-endian bytes.
    Float,
    /// `double`: eight little-endian bytes.
    Double,
    /// An enum, carried as an `int32`; enums are open, any number may come.
    Enum(&'static EnumDesc),
    /// A sub-message.
    Message(&'static MessageDesc),
    /// A `map<K, V>`: repeated entries of this message, `key = 1`,
    /// `value = 2`.
    Map(&'static MessageDesc),
}

impl FieldType {
    /// The wire type a value of this type is written with (packed repeated
    /// scalars aside, which are LEN).
    pub const fn wire_type(self) -> crate::wire::WireType {
        use crate::wire::WireType;
        match self {
            Self::String | Self::Bytes | Self::Message(_) | Self::Map(_) => WireType::Len,
            Self::Bool
            | Self::Int32
            | Self::Int64
            | Self::Uint32
            | Self::Uint64
            | Self::Enum(_) => WireType::Varint,
            Self::Float => WireType::I32,
            Self::Double => WireType::I64,
        }
    }

    /// The descriptor of a message or map entry value.
    pub const fn message(self) -> Option<&'static MessageDesc> {
        match self {
            Self::Message(m) | Self::Map(m) => Some(m),
            _ => None,
        }
    }
}

/// How many times a field may occur, and whether its absence is seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// No label: at most once; a scalar at its default is left out, so
    /// absence reads as the default. (Message fields have presence anyway.)
    Singular,
    /// proto3 `optional`: at most once, and written whenever set, even to
    /// the default.
    Optional,
    /// `repeated` (or a map): any number of occurrences.
    Repeated,
}

/// A protobuf enum: its full name and its values.
#[derive(Debug)]
pub struct EnumDesc {
    /// The full name, package included: `model_context_protocol.Role`
    /// (feature `names`).
    #[cfg(feature = "names")]
    pub name: &'static str,
    /// `(name, number)` of each value, in declaration order.
    pub values: &'static [(&'static str, i32)],
}

impl EnumDesc {
    /// The name of the value numbered `number`; `None` for a number the
    /// enum does not declare (enums are open: such numbers decode).
    pub fn name_of(&self, number: i32) -> Option<&'static str> {
        self.values
            .iter()
            .find(|(_, n)| *n == number)
            .map(|(name, _)| *name)
    }

    /// The number of the value named `name`.
    pub fn number_of(&self, name: &str) -> Option<i32> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, number)| *number)
    }
}
