//! Property tests of the protobuf codecs:
//!
//! - arbitrary bytes never panic the decoders, and what they report stays
//!   inside the input;
//! - varints, tags and `JsonRpcMessage` round-trip, and every strict prefix of
//!   an encoding is `Truncated`;
//! - `JsonRpcMessage::decode` agrees with a plain model of proto3 (last
//!   `jsonrpc` wins, other fields skipped) on messages built from random
//!   fields of every wire type;
//! - a too-small output reports exactly the length a large one gets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_proto::wire::{
    MAX_FIELD_NUMBER, MAX_VARINT_LEN, Reader, Tag, WireType, decode_varint, encode_varint,
    skip_field, skip_value, varint_len,
};
use mcpwire_proto::{BufferTooSmall, DecodeError, JsonRpcMessage};
use proptest::collection::vec;
use proptest::prelude::*;

/// `cases` unless `PROPTEST_CASES` asks for another number (for long runs).
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn push_varint(out: &mut Vec<u8>, value: u64) {
    let mut buf = [0u8; MAX_VARINT_LEN];
    let n = encode_varint(value, &mut buf).unwrap();
    out.extend_from_slice(&buf[..n]);
}

/// One field of a random message.
#[derive(Debug, Clone)]
enum Field {
    Varint(u32, u64),
    I64(u32, u64),
    I32(u32, u32),
    Len(u32, Vec<u8>),
}

impl Field {
    fn write(&self, out: &mut Vec<u8>) {
        let (field, wire_type) = match self {
            Self::Varint(f, _) => (*f, WireType::Varint),
            Self::I64(f, _) => (*f, WireType::I64),
            Self::I32(f, _) => (*f, WireType::I32),
            Self::Len(f, _) => (*f, WireType::Len),
        };
        push_varint(out, Tag::new(field, wire_type).value());
        match self {
            Self::Varint(_, v) => push_varint(out, *v),
            Self::I64(_, v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::I32(_, v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::Len(_, payload) => {
                push_varint(out, payload.len() as u64);
                out.extend_from_slice(payload);
            }
        }
    }
}

fn field_number() -> impl Strategy<Value = u32> {
    prop_oneof![1..=20u32, 1..=MAX_FIELD_NUMBER]
}

fn unknown_number() -> impl Strategy<Value = u32> {
    field_number().prop_filter("field 1 is jsonrpc", |&f| f != 1)
}

/// Any field but `jsonrpc` with another wire type than LEN, which is an
/// error rather than an unknown field.
fn field() -> impl Strategy<Value = Field> {
    prop_oneof![
        (unknown_number(), any::<u64>()).prop_map(|(f, v)| Field::Varint(f, v)),
        (unknown_number(), any::<u64>()).prop_map(|(f, v)| Field::I64(f, v)),
        (unknown_number(), any::<u32>()).prop_map(|(f, v)| Field::I32(f, v)),
        (field_number(), vec(any::<u8>(), 0..300)).prop_map(|(f, p)| Field::Len(f, p)),
    ]
}

proptest! {
    #![proptest_config(config(2048))]

    #[test]
    fn arbitrary_bytes_never_panic(buf in vec(any::<u8>(), 0..64)) {
        if let Ok(json) = JsonRpcMessage::decode(&buf) {
            // A non-empty value is borrowed from the input.
            let inside = buf.as_ptr_range();
            let value = json.as_ptr_range();
            prop_assert!(
                json.is_empty() || (inside.start <= value.start && value.end <= inside.end)
            );
        }
        if let Ok((_, n)) = decode_varint(&buf) {
            prop_assert!(n >= 1 && n <= buf.len().min(MAX_VARINT_LEN));
        }
        if let Ok((_, n)) = Tag::decode(&buf) {
            prop_assert!(n >= 1 && n <= buf.len());
        }
        if let Ok((_, n)) = skip_field(&buf) {
            prop_assert!(n >= 2 && n <= buf.len());
        }
        for bits in 0..6 {
            let wire_type = WireType::from_bits(bits).unwrap();
            if let Ok(n) = skip_value(wire_type, &buf) {
                prop_assert!(n <= buf.len());
            }
        }
        let mut r = Reader::new(&buf);
        while let Ok(Some(tag)) = r.read_tag() {
            if r.skip(tag.wire_type).is_err() {
                break;
            }
        }
    }

    #[test]
    fn arbitrary_bytes_after_a_tag_never_panic(
        tag in any::<u8>(),
        rest in vec(any::<u8>(), 0..16),
    ) {
        // Short random tails after every one-byte tag reach each wire type's
        // value decoder far more often than uniform bytes do.
        let buf = [&[tag][..], &rest].concat();
        let _ = JsonRpcMessage::decode(&buf);
        let _ = skip_field(&buf);
    }

    #[test]
    fn varint_round_trip(value in any::<u64>()) {
        let mut buf = [0u8; MAX_VARINT_LEN];
        let n = encode_varint(value, &mut buf).unwrap();
        prop_assert_eq!(n, varint_len(value));
        prop_assert_eq!(decode_varint(&buf[..n]), Ok((value, n)));
        for end in 0..n {
            prop_assert_eq!(decode_varint(&buf[..end]), Err(DecodeError::Truncated));
        }
        for size in 0..n {
            prop_assert_eq!(
                encode_varint(value, &mut buf[..size]),
                Err(BufferTooSmall { needed: n })
            );
        }
    }

    #[test]
    fn tag_round_trip(field in 1..=MAX_FIELD_NUMBER, bits in 0..6u8) {
        let tag = Tag::new(field, WireType::from_bits(bits).unwrap());
        let mut buf = [0u8; MAX_VARINT_LEN];
        let n = tag.encode(&mut buf).unwrap();
        prop_assert_eq!(n, tag.encoded_len());
        prop_assert!(n <= 5);
        prop_assert_eq!(Tag::decode(&buf[..n]), Ok((tag, n)));
    }

    #[test]
    fn json_round_trip(json in vec(any::<u8>(), 0..2000)) {
        let len = JsonRpcMessage::encoded_len(json.len());
        let mut out = vec![0u8; len + 3];
        prop_assert_eq!(JsonRpcMessage::encode(&json, &mut out), Ok(len));
        prop_assert_eq!(JsonRpcMessage::decode(&out[..len]), Ok(&json[..]));
        for end in 1..len {
            prop_assert_eq!(JsonRpcMessage::decode(&out[..end]), Err(DecodeError::Truncated));
        }
        for size in [0, len / 2, len.saturating_sub(1)] {
            if size < len {
                prop_assert_eq!(
                    JsonRpcMessage::encode(&json, &mut out[..size]),
                    Err(BufferTooSmall { needed: len })
                );
            }
        }
    }

    #[test]
    fn decode_matches_the_proto3_model(fields in vec(field(), 0..12)) {
        let mut msg = Vec::new();
        for f in &fields {
            f.write(&mut msg);
        }
        let expected = fields
            .iter()
            .filter_map(|f| match f {
                Field::Len(1, payload) => Some(&payload[..]),
                _ => None,
            })
            .next_back()
            .unwrap_or_default();
        prop_assert_eq!(JsonRpcMessage::decode(&msg), Ok(expected));
        // Cutting inside the last field always truncates.
        if let Some(last) = fields.last() {
            let mut tail = Vec::new();
            last.write(&mut tail);
            let start = msg.len() - tail.len();
            for end in start + 1..msg.len() {
                prop_assert_eq!(JsonRpcMessage::decode(&msg[..end]), Err(DecodeError::Truncated));
            }
        }
    }
}
