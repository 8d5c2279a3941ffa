//! [`MessageRef`]: an encoded message of the typed binding seen through its
//! descriptor. [`MessageRef::validate`] checks the whole message tree once
//! (protobuf.dev "Encoding" and the digest's rules for the binding); the
//! accessors then read fields straight from the bytes, without copying and
//! without a decoded tree.

use core::ptr;

use super::desc::{FieldType, MessageDesc};
use super::wkt;
use crate::error::DecodeError;
use crate::wire::{Reader, WireType};

/// Bounds on what [`MessageRef::validate`] accepts, chosen by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How deep messages may nest, the outermost counting 1. `Struct`,
    /// `ListValue` and every other message count; `Value` and map entries,
    /// wrappers of one value, do not, so that the limit reads as JSON depth.
    /// Validation recurses, three frames a level at most: this also bounds
    /// its stack.
    pub max_depth: usize,
    /// How many fields and repeated elements (packed ones one by one) the
    /// whole message may hold, sub-messages included.
    pub max_elements: usize,
}

impl Limits {
    /// The limits of the binding's reference SDK: depth 64, 2^18 elements.
    pub const DEFAULT: Self = Self {
        max_depth: 64,
        max_elements: 1 << 18,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The value of one occurrence of a field, as the wire carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// A varint: bool, integers, enums.
    Varint(u64),
    /// Eight little-endian bytes: double.
    I64(u64),
    /// Four little-endian bytes: float.
    I32(u32),
    /// A length-delimited payload: string, bytes, message, packed scalars.
    Len(&'a [u8]),
}

impl<'a> FieldValue<'a> {
    /// A varint's value.
    pub const fn as_varint(self) -> Option<u64> {
        match self {
            Self::Varint(v) => Some(v),
            _ => None,
        }
    }

    /// A length-delimited payload.
    pub const fn as_len(self) -> Option<&'a [u8]> {
        match self {
            Self::Len(b) => Some(b),
            _ => None,
        }
    }

    /// A `double`.
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Self::I64(bits) => Some(f64::from_bits(bits)),
            _ => None,
        }
    }

    /// A `float`.
    pub fn as_f32(self) -> Option<f32> {
        match self {
            Self::I32(bits) => Some(f32::from_bits(bits)),
            _ => None,
        }
    }
}

/// An encoded message of type `desc`, borrowed.
///
/// [`MessageRef::parse`] (or [`MessageRef::validate`]) is the check a server
/// or client runs once on a received message; after it, a singular field
/// occurs at most once and every accessor sees well-formed values. The
/// accessors never panic on bytes that were not validated either: they stop
/// at the first malformed field.
#[derive(Debug, Clone, Copy)]
pub struct MessageRef<'a> {
    desc: &'static MessageDesc,
    bytes: &'a [u8],
}

impl<'a> MessageRef<'a> {
    /// A view of `bytes` as a `desc`, not checked.
    pub const fn new(desc: &'static MessageDesc, bytes: &'a [u8]) -> Self {
        Self { desc, bytes }
    }

    /// A view of `bytes` as a `desc`, [validated](MessageRef::validate).
    pub fn parse(
        desc: &'static MessageDesc,
        bytes: &'a [u8],
        limits: &Limits,
    ) -> Result<Self, DecodeError> {
        let view = Self::new(desc, bytes);
        view.validate(limits)?;
        Ok(view)
    }

    /// The message's descriptor.
    pub const fn desc(&self) -> &'static MessageDesc {
        self.desc
    }

    /// The encoded message.
    pub const fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Checks the message and every sub-message against their descriptors:
    ///
    /// - each known field has its type's wire type ([`DecodeError::WrongWireType`]),
    ///   a repeated scalar may also come packed (one LEN of values);
    /// - strings and map keys are UTF-8 ([`DecodeError::InvalidUtf8`]);
    /// - a singular field occurs at most once ([`DecodeError::DuplicateField`];
    ///   map entries with the same key are separate entries: the mapping
    ///   takes the last);
    /// - a `google.protobuf.Value` holds exactly one kind and a `Struct` entry
    ///   has a value ([`DecodeError::ValueKind`]);
    /// - unknown fields of the four wire types are skipped, groups refused
    ///   ([`DecodeError::Group`]);
    /// - nesting and element count stay within `limits`
    ///   ([`DecodeError::TooDeep`], [`DecodeError::TooManyElements`]).
    ///
    /// Enum numbers are not checked (proto3 enums are open), nor `bytes`.
    pub fn validate(&self, limits: &Limits) -> Result<(), DecodeError> {
        let mut elements = 0;
        check(self.desc, self.bytes, 1, limits, &mut elements)
    }

    /// The first occurrence of field `number` (a validated message has at
    /// most one of a singular field), whatever its declaration.
    pub fn field(&self, number: u32) -> Option<FieldValue<'a>> {
        self.repeated(number).next()
    }

    /// True when field `number` occurs: for a message field or an
    /// `optional` scalar, its presence.
    pub fn has(&self, number: u32) -> bool {
        self.field(number).is_some()
    }

    /// Every occurrence of field `number`, in wire order, wherever they are
    /// in the message (a repeated field need not be contiguous).
    pub fn repeated(&self, number: u32) -> Occurrences<'a> {
        Occurrences {
            reader: Reader::new(self.bytes),
            number,
        }
    }

    /// The elements of the repeated scalar field `number`, packed or not,
    /// one [`FieldValue`] each (`Varint`, `I32` or `I64`). Empty for a field
    /// the message does not declare as a scalar.
    pub fn scalars(&self, number: u32) -> Scalars<'a> {
        let wire_type = self
            .desc
            .field(number)
            .map(|f| f.ty.wire_type())
            .filter(|&t| t != WireType::Len);
        Scalars {
            occurrences: self.repeated(number),
            wire_type,
            packed: Reader::new(&[]),
        }
    }

    /// A `string` field: its text, or `None` when absent or not UTF-8.
    pub fn str(&self, number: u32) -> Option<&'a str> {
        self.field(number)
            .and_then(FieldValue::as_len)
            .and_then(|b| core::str::from_utf8(b).ok())
    }

    /// A `bytes` (or `string`) field's payload.
    pub fn bytes(&self, number: u32) -> Option<&'a [u8]> {
        self.field(number).and_then(FieldValue::as_len)
    }

    /// A varint field's value: `bool`, integers, enums (an `int32` is its
    /// low 32 bits, as protobuf reads it).
    pub fn varint(&self, number: u32) -> Option<u64> {
        self.field(number).and_then(FieldValue::as_varint)
    }

    /// A `bool` field.
    pub fn bool(&self, number: u32) -> Option<bool> {
        self.varint(number).map(|v| v != 0)
    }

    /// An `int32` or enum field: the low 32 bits, as protobuf reads them.
    pub fn int32(&self, number: u32) -> Option<i32> {
        // Truncation to the low 32 bits is protobuf's rule for int32.
        self.varint(number).map(|v| v as u32 as i32)
    }

    /// An `int64` field.
    pub fn int64(&self, number: u32) -> Option<i64> {
        // Two's complement bits, as written.
        self.varint(number).map(|v| v as i64)
    }

    /// A `double` field.
    pub fn double(&self, number: u32) -> Option<f64> {
        self.field(number).and_then(FieldValue::as_f64)
    }

    /// A `float` field.
    pub fn float(&self, number: u32) -> Option<f32> {
        self.field(number).and_then(FieldValue::as_f32)
    }

    /// The message field `number` (or the first entry of a map), seen
    /// through its descriptor; `None` when absent or not a message field.
    pub fn message(&self, number: u32) -> Option<MessageRef<'a>> {
        self.messages(number).next()
    }

    /// Every element of the repeated message field (or map) `number`.
    pub fn messages(&self, number: u32) -> Messages<'a> {
        Messages {
            occurrences: self.repeated(number),
            desc: self.desc.field(number).and_then(|f| f.ty.message()),
        }
    }
}

/// The occurrences of one field: [`MessageRef::repeated`].
#[derive(Debug, Clone)]
pub struct Occurrences<'a> {
    reader: Reader<'a>,
    number: u32,
}

impl<'a> Iterator for Occurrences<'a> {
    type Item = FieldValue<'a>;

    fn next(&mut self) -> Option<FieldValue<'a>> {
        loop {
            let tag = self.reader.read_tag().ok()??;
            if tag.field != self.number {
                if self.reader.skip(tag.wire_type).is_err() {
                    self.reader = Reader::new(&[]);
                    return None;
                }
                continue;
            }
            let value = read_value(&mut self.reader, tag.wire_type);
            if value.is_none() {
                self.reader = Reader::new(&[]);
            }
            return value;
        }
    }
}

/// The elements of a repeated scalar field: [`MessageRef::scalars`].
#[derive(Debug, Clone)]
pub struct Scalars<'a> {
    occurrences: Occurrences<'a>,
    /// The declared type's wire type; `None` for no scalar field.
    wire_type: Option<WireType>,
    /// What is left of the packed occurrence being read.
    packed: Reader<'a>,
}

impl<'a> Iterator for Scalars<'a> {
    type Item = FieldValue<'a>;

    fn next(&mut self) -> Option<FieldValue<'a>> {
        let wire_type = self.wire_type?;
        loop {
            if !self.packed.is_empty() {
                let value = read_value(&mut self.packed, wire_type);
                if value.is_none() {
                    self.packed = Reader::new(&[]);
                }
                return value;
            }
            match self.occurrences.next()? {
                FieldValue::Len(payload) => self.packed = Reader::new(payload),
                value => return Some(value),
            }
        }
    }
}

/// The elements of a repeated message field: [`MessageRef::messages`].
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    occurrences: Occurrences<'a>,
    desc: Option<&'static MessageDesc>,
}

impl<'a> Iterator for Messages<'a> {
    type Item = MessageRef<'a>;

    fn next(&mut self) -> Option<MessageRef<'a>> {
        let desc = self.desc?;
        let bytes = self.occurrences.next()?.as_len()?;
        Some(MessageRef::new(desc, bytes))
    }
}

/// Reads one value of wire type `wire_type`; `None` when malformed or a group.
fn read_value<'a>(r: &mut Reader<'a>, wire_type: WireType) -> Option<FieldValue<'a>> {
    match wire_type {
        WireType::Varint => r.read_varint().ok().map(FieldValue::Varint),
        WireType::I64 => r.read_fixed64().ok().map(FieldValue::I64),
        WireType::I32 => r.read_fixed32().ok().map(FieldValue::I32),
        WireType::Len => r.read_len().ok().map(FieldValue::Len),
        WireType::SGroup | WireType::EGroup => None,
    }
}

fn count(elements: &mut usize, limits: &Limits) -> Result<(), DecodeError> {
    *elements += 1;
    if *elements > limits.max_elements {
        Err(DecodeError::TooManyElements)
    } else {
        Ok(())
    }
}

/// Validates `bytes` as a `desc` at nesting level `depth`.
fn check(
    desc: &'static MessageDesc,
    bytes: &[u8],
    depth: usize,
    limits: &Limits,
    elements: &mut usize,
) -> Result<(), DecodeError> {
    if depth > limits.max_depth {
        return Err(DecodeError::TooDeep);
    }
    // One bit per declared field (no message declares more than 64) that
    // has occurred: duplicates of singular fields, and Value's kinds.
    let mut seen = 0u64;
    let mut r = Reader::new(bytes);
    while let Some(tag) = r.read_tag()? {
        count(elements, limits)?;
        if matches!(tag.wire_type, WireType::SGroup | WireType::EGroup) {
            return Err(DecodeError::Group);
        }
        let Some((index, field)) = desc
            .fields
            .iter()
            .enumerate()
            .find(|(_, f)| f.number == tag.field)
        else {
            r.skip(tag.wire_type)?;
            continue;
        };
        if !field.is_repeated() {
            let bit = 1u64.checked_shl(index as u32).unwrap_or(0);
            if seen & bit != 0 {
                return Err(DecodeError::DuplicateField {
                    field: field.number,
                });
            }
            seen |= bit;
        }
        let expected = field.ty.wire_type();
        if tag.wire_type == expected {
            check_value(field.ty, field.number, &mut r, depth, limits, elements)?;
        } else if field.is_repeated() && tag.wire_type == WireType::Len {
            // A packed repeated scalar: values of `expected` back to back.
            let mut packed = Reader::new(r.read_len()?);
            while !packed.is_empty() {
                count(elements, limits)?;
                packed.skip(expected)?;
            }
        } else {
            return Err(DecodeError::WrongWireType {
                field: field.number,
                expected,
                found: tag.wire_type,
            });
        }
    }
    if ptr::eq(desc, &wkt::VALUE) && seen.count_ones() != 1 {
        // Every field of Value is a member of its `kind` oneof.
        return Err(DecodeError::ValueKind);
    }
    if ptr::eq(desc, &wkt::STRUCT_FIELDS_ENTRY) && seen & 0b10 == 0 {
        // Field 2, `value`, is the entry's second field.
        return Err(DecodeError::ValueKind);
    }
    Ok(())
}

/// Validates one value of type `ty` (its tag already read and matching).
fn check_value(
    ty: FieldType,
    number: u32,
    r: &mut Reader<'_>,
    depth: usize,
    limits: &Limits,
    elements: &mut usize,
) -> Result<(), DecodeError> {
    match ty {
        FieldType::String => {
            let text = r.read_len()?;
            core::str::from_utf8(text).map_err(|_| DecodeError::InvalidUtf8 { field: number })?;
        }
        FieldType::Message(sub) | FieldType::Map(sub) => {
            let body = r.read_len()?;
            // Map entries and Value wrap one value: they add no level.
            let wrapper = matches!(ty, FieldType::Map(_)) || ptr::eq(sub, &wkt::VALUE);
            let level = if wrapper { depth } else { depth + 1 };
            check(sub, body, level, limits, elements)?;
        }
        FieldType::Bytes => {
            r.read_len()?;
        }
        _ => {
            r.skip(ty.wire_type())?;
        }
    }
    Ok(())
}
