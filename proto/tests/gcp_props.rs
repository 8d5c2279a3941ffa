//! Properties of the typed binding's codecs, for every message of
//! `gcp::schema::MESSAGES` and the well-known types:
//!
//! - a value with every field set (generated from the descriptor, nested
//!   messages and maps included) is written by `Writer` exactly as a plain
//!   reference encoder writes it, validates, and reads back field by field;
//! - with unknown fields of each wire type added it still validates and
//!   reads the same;
//! - every prefix of its bytes validates or fails with a `DecodeError` (never
//!   a panic), and validates exactly when it ends between two fields;
//! - a repeated singular field, a wrong wire type and a string that is not
//!   UTF-8 are refused for each field concerned;
//! - arbitrary bytes never panic the validation nor the accessors.
//!
//! Plus the bounds: `Value` kinds, nesting depth and element count.
// Its failure messages name the messages and fields: feature `names`.
#![cfg(feature = "names")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ptr;

use mcpwire_proto::DecodeError;
use mcpwire_proto::gcp::{
    FieldType, FieldValue, Label, Limits, MessageDesc, MessageRef, schema, wkt,
};
use mcpwire_proto::wire::{MAX_VARINT_LEN, Tag, WireType, Writer, encode_varint};
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

/// The messages under test: the binding's 60 and the well-known types.
fn all_messages() -> Vec<&'static MessageDesc> {
    let mut all: Vec<&'static MessageDesc> = schema::MESSAGES.to_vec();
    all.extend([&wkt::STRUCT, &wkt::VALUE, &wkt::LIST_VALUE, &wkt::DURATION]);
    all
}

/// A field value of the model.
#[derive(Debug, Clone)]
enum V {
    Varint(u64),
    I64(u64),
    I32(u32),
    Len(Vec<u8>),
    /// A packed run of varints.
    Packed(Vec<u64>),
    Msg(&'static MessageDesc, Vec<(u32, V)>),
}

/// A small deterministic generator, seeded by proptest.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn text(&mut self) -> Vec<u8> {
        // Mostly short; sometimes long enough that a length takes two bytes.
        let len = if self.below(8) == 0 {
            100 + self.below(100)
        } else {
            self.below(12)
        };
        let pieces = ["a", "Z", "0", " ", "é", "€", "𝄞", "\"", "\n"];
        let mut s = String::new();
        while (s.len() as u64) < len {
            s.push_str(pieces[self.below(pieces.len() as u64) as usize]);
        }
        s.into_bytes()
    }

    fn bytes(&mut self) -> Vec<u8> {
        let len = self.below(20);
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Nesting of Struct/ListValue beyond which values stay scalar.
const GEN_DEPTH: usize = 3;

fn gen_scalar(ty: FieldType, rng: &mut Rng) -> V {
    match ty {
        FieldType::Bool => V::Varint(rng.below(2)),
        FieldType::Int32 | FieldType::Enum(_) => {
            // Negatives are ten-byte varints.
            let v = [0, 1, -1, i32::MIN, i32::MAX, rng.next() as i32][rng.below(6) as usize];
            V::Varint(i64::from(v) as u64)
        }
        FieldType::Uint32 => V::Varint(u64::from(rng.next() as u32)),
        FieldType::Int64 | FieldType::Uint64 => {
            V::Varint([0, 1, u64::MAX, rng.next()][rng.below(4) as usize])
        }
        FieldType::Float => V::I32(rng.next() as u32),
        FieldType::Double => V::I64(rng.next()),
        FieldType::String => V::Len(rng.text()),
        FieldType::Bytes => V::Len(rng.bytes()),
        FieldType::Message(_) | FieldType::Map(_) => unreachable!(),
    }
}

fn gen_value(ty: FieldType, depth: usize, rng: &mut Rng) -> V {
    match ty {
        FieldType::Message(m) | FieldType::Map(m) => V::Msg(m, gen_message(m, depth + 1, rng)),
        _ => gen_scalar(ty, rng),
    }
}

/// A value of `desc` with every field set (repeated ones once or twice);
/// only the size of Struct/ListValue trees is bounded by `GEN_DEPTH`.
fn gen_message(desc: &'static MessageDesc, depth: usize, rng: &mut Rng) -> Vec<(u32, V)> {
    let deep = depth > GEN_DEPTH;
    if ptr::eq(desc, &wkt::VALUE) {
        // Exactly one kind; only scalars once deep enough.
        let kinds = if deep { 4 } else { 6 };
        let field = &desc.fields[rng.below(kinds) as usize];
        return vec![(field.number, gen_value(field.ty, depth, rng))];
    }
    let mut out = Vec::new();
    for field in desc.fields {
        if field.label != Label::Repeated {
            out.push((field.number, gen_value(field.ty, depth, rng)));
            continue;
        }
        let n = if deep { 0 } else { 1 + rng.below(2) };
        let packable = field.ty.wire_type() == WireType::Varint;
        if packable && rng.below(2) == 0 {
            let values = (0..n).map(|_| match gen_scalar(field.ty, rng) {
                V::Varint(v) => v,
                _ => unreachable!(),
            });
            out.push((field.number, V::Packed(values.collect())));
        } else {
            for _ in 0..n {
                out.push((field.number, gen_value(field.ty, depth, rng)));
            }
        }
    }
    out
}

fn write_model(w: &mut Writer<'_>, fields: &[(u32, V)]) {
    for (n, v) in fields {
        match v {
            V::Varint(x) => w.varint(*n, *x),
            V::I64(x) => w.double(*n, f64::from_bits(*x)),
            V::I32(x) => w.float(*n, f32::from_bits(*x)),
            V::Len(b) => w.bytes(*n, b),
            V::Packed(xs) => w.packed_varints(*n, xs.iter().copied()).unwrap(),
            V::Msg(_, sub) => {
                let nested = w.begin(*n).unwrap();
                write_model(w, sub);
                w.end(nested);
            }
        }
    }
}

fn push_varint(out: &mut Vec<u8>, value: u64) {
    let mut buf = [0u8; MAX_VARINT_LEN];
    let n = encode_varint(value, &mut buf).unwrap();
    out.extend_from_slice(&buf[..n]);
}

fn push_tag(out: &mut Vec<u8>, field: u32, wire_type: WireType) {
    push_varint(out, Tag::new(field, wire_type).value());
}

/// The reference encoder: sub-messages encoded first, then prefixed.
fn reference(fields: &[(u32, V)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        reference_field(&mut out, *n, v);
    }
    out
}

fn reference_field(out: &mut Vec<u8>, n: u32, v: &V) {
    let len = |out: &mut Vec<u8>, body: &[u8]| {
        push_tag(out, n, WireType::Len);
        push_varint(out, body.len() as u64);
        out.extend_from_slice(body);
    };
    match v {
        V::Varint(x) => {
            push_tag(out, n, WireType::Varint);
            push_varint(out, *x);
        }
        V::I64(x) => {
            push_tag(out, n, WireType::I64);
            out.extend_from_slice(&x.to_le_bytes());
        }
        V::I32(x) => {
            push_tag(out, n, WireType::I32);
            out.extend_from_slice(&x.to_le_bytes());
        }
        V::Len(b) => len(out, b),
        V::Packed(xs) if xs.is_empty() => {}
        V::Packed(xs) => {
            let mut body = Vec::new();
            for x in xs {
                push_varint(&mut body, *x);
            }
            len(out, &body);
        }
        V::Msg(_, sub) => len(out, &reference(sub)),
    }
}

fn encode(fields: &[(u32, V)]) -> Vec<u8> {
    let mut probe = [0u8; 7];
    let mut w = Writer::<64>::new(&mut probe);
    write_model(&mut w, fields);
    let needed = match w.finish() {
        Ok(n) => n,
        Err(e) => e.needed,
    };
    let mut out = vec![0u8; needed];
    let mut w = Writer::<64>::new(&mut out);
    write_model(&mut w, fields);
    assert_eq!(w.finish(), Ok(needed), "the needed length is the length");
    out
}

/// Reads `view` field by field and compares it with the model.
fn assert_reads(view: MessageRef<'_>, fields: &[(u32, V)]) {
    let desc = view.desc();
    for field in desc.fields {
        let n = field.number;
        let model: Vec<&V> = fields
            .iter()
            .filter(|(m, _)| *m == n)
            .map(|(_, v)| v)
            .collect();
        let at = format!("{}.{}", desc.name, field.name);
        if field.ty.wire_type() == WireType::Varint && field.label == Label::Repeated {
            let expected: Vec<FieldValue<'_>> = model
                .iter()
                .flat_map(|v| match v {
                    V::Packed(xs) => xs.clone(),
                    V::Varint(x) => vec![*x],
                    _ => unreachable!(),
                })
                .map(FieldValue::Varint)
                .collect();
            assert_eq!(view.scalars(n).collect::<Vec<_>>(), expected, "{at}");
            continue;
        }
        if let Some(sub_desc) = field.ty.message() {
            let subs: Vec<MessageRef<'_>> = view.messages(n).collect();
            assert_eq!(subs.len(), model.len(), "{at}");
            for (sub, v) in subs.into_iter().zip(model) {
                let V::Msg(d, sub_fields) = v else {
                    unreachable!()
                };
                assert!(
                    ptr::eq(sub.desc(), sub_desc) && ptr::eq(*d, sub_desc),
                    "{at}"
                );
                assert_reads(sub, sub_fields);
            }
            continue;
        }
        let got: Vec<FieldValue<'_>> = view.repeated(n).collect();
        let expected: Vec<FieldValue<'_>> = model
            .iter()
            .map(|v| match v {
                V::Varint(x) => FieldValue::Varint(*x),
                V::I64(x) => FieldValue::I64(*x),
                V::I32(x) => FieldValue::I32(*x),
                V::Len(b) => FieldValue::Len(b),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(got, expected, "{at}");
        if matches!(field.ty, FieldType::String) {
            let text = model.first().map(|v| match v {
                V::Len(b) => std::str::from_utf8(b).unwrap(),
                _ => unreachable!(),
            });
            assert_eq!(view.str(n), text, "{at}");
        }
    }
}

/// Calls every accessor on every declared field, recursively, to show
/// they do not panic, whatever the bytes.
fn walk(view: MessageRef<'_>, depth: usize) {
    if depth > 8 {
        return;
    }
    for field in view.desc().fields {
        let n = field.number;
        let _ = (view.field(n), view.str(n), view.bytes(n), view.bool(n));
        let _ = (view.int32(n), view.int64(n), view.double(n), view.float(n));
        let _ = view.repeated(n).count() + view.scalars(n).count();
        for sub in view.messages(n) {
            walk(sub, depth + 1);
        }
    }
}

/// Unknown fields, one of each wire type, numbered past every declared one.
fn unknown_fields(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    let base = 20 + rng.below(1000) as u32;
    push_tag(&mut out, base, WireType::Varint);
    push_varint(&mut out, rng.next());
    push_tag(&mut out, base + 1, WireType::I64);
    out.extend_from_slice(&rng.next().to_le_bytes());
    push_tag(&mut out, base + 2, WireType::Len);
    let junk = rng.bytes();
    push_varint(&mut out, junk.len() as u64);
    out.extend_from_slice(&junk);
    push_tag(&mut out, base + 3, WireType::I32);
    out.extend_from_slice(&(rng.next() as u32).to_le_bytes());
    out
}

fn validate(desc: &'static MessageDesc, bytes: &[u8]) -> Result<(), DecodeError> {
    MessageRef::new(desc, bytes).validate(&Limits::DEFAULT)
}

fn each_message_once(seed: u64) {
    let mut rng = Rng(seed | 1);
    for desc in all_messages() {
        let model = gen_message(desc, 1, &mut rng);
        let bytes = encode(&model);
        assert_eq!(
            bytes,
            reference(&model),
            "{}: Writer vs reference",
            desc.name
        );
        assert_eq!(validate(desc, &bytes), Ok(()), "{}", desc.name);
        assert_reads(MessageRef::new(desc, &bytes), &model);

        // Unknown fields before and after are skipped.
        let mut with_unknown = unknown_fields(&mut rng);
        with_unknown.extend_from_slice(&bytes);
        with_unknown.extend(unknown_fields(&mut rng));
        assert_eq!(
            validate(desc, &with_unknown),
            Ok(()),
            "{} + unknown",
            desc.name
        );
        assert_reads(MessageRef::new(desc, &with_unknown), &model);

        // Every prefix: valid exactly at a boundary between two fields.
        let mut boundaries = vec![0];
        for (n, v) in &model {
            let mut one = Vec::new();
            reference_field(&mut one, *n, v);
            boundaries.push(boundaries.last().unwrap() + one.len());
        }
        for end in 0..bytes.len() {
            let prefix = &bytes[..end];
            let result = validate(desc, prefix);
            let whole_fields = boundaries.contains(&end);
            let value_without_kind = ptr::eq(desc, &wkt::VALUE) && end == 0;
            assert_eq!(
                result.is_ok(),
                whole_fields && !value_without_kind,
                "{} cut at {end}: {result:?}",
                desc.name
            );
        }
        walk(MessageRef::new(desc, &bytes[..bytes.len() / 2]), 0);

        // A singular field twice.
        for (n, v) in &model {
            let field = desc.field(*n).unwrap();
            if field.label == Label::Repeated {
                continue;
            }
            let mut twice = bytes.clone();
            reference_field(&mut twice, *n, v);
            assert_eq!(
                validate(desc, &twice),
                Err(DecodeError::DuplicateField { field: *n }),
                "{}.{}",
                desc.name,
                field.name
            );
        }
    }
}

proptest! {
    #![proptest_config(config(32))]

    #[test]
    fn every_message_round_trips_with_unknown_fields_and_prefixes(seed in any::<u64>()) {
        each_message_once(seed);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        index in 0..64usize,
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let desc = all_messages()[index % all_messages().len()];
        let _ = validate(desc, &bytes);
        walk(MessageRef::new(desc, &bytes), 0);
    }
}

#[test]
fn wrong_wire_types_are_refused_for_every_field() {
    let samples: [(WireType, &[u8]); 4] = [
        (WireType::Varint, &[0x01]),
        (WireType::I64, &[0; 8]),
        (WireType::I32, &[0; 4]),
        (WireType::Len, &[0x00]),
    ];
    for desc in all_messages() {
        for field in desc.fields {
            let expected = field.ty.wire_type();
            for (found, value) in samples {
                let packed = field.label == Label::Repeated
                    && found == WireType::Len
                    && expected != WireType::Len;
                if found == expected || packed {
                    continue;
                }
                let mut bytes = Vec::new();
                push_tag(&mut bytes, field.number, found);
                bytes.extend_from_slice(value);
                assert_eq!(
                    validate(desc, &bytes),
                    Err(DecodeError::WrongWireType {
                        field: field.number,
                        expected,
                        found
                    }),
                    "{}.{}",
                    desc.name,
                    field.name
                );
            }
            // Groups, known field or not.
            let mut group = Vec::new();
            push_tag(&mut group, field.number, WireType::SGroup);
            push_tag(&mut group, field.number, WireType::EGroup);
            assert_eq!(validate(desc, &group), Err(DecodeError::Group));
        }
        assert_eq!(
            validate(desc, &[0xfb, 0x07, 0xfc, 0x07]),
            Err(DecodeError::Group)
        );
    }
}

#[test]
fn strings_must_be_utf8_for_every_string_field() {
    let mut checked = 0;
    for desc in all_messages() {
        for field in desc.fields {
            if !matches!(field.ty, FieldType::String) {
                continue;
            }
            for bad in [&[0xff][..], &[b'a', 0xc3], &[0xed, 0xa0, 0x80]] {
                let mut bytes = Vec::new();
                reference_field(&mut bytes, field.number, &V::Len(bad.to_vec()));
                assert_eq!(
                    validate(desc, &bytes),
                    Err(DecodeError::InvalidUtf8 {
                        field: field.number
                    }),
                    "{}.{}",
                    desc.name,
                    field.name
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked} string fields");
    // Map keys too: a Struct key, inside a CallToolRequest.
    let entry = vec![
        (1, V::Len(vec![0xff])),
        (2, V::Msg(&wkt::VALUE, vec![(4, V::Varint(1))])),
    ];
    let arguments = vec![(1, V::Msg(&wkt::STRUCT_FIELDS_ENTRY, entry))];
    let request = vec![(2, V::Msg(&wkt::STRUCT, arguments))];
    let bytes = reference(&[(2, V::Msg(&schema::CALL_TOOL_REQUEST_REQUEST, request))]);
    assert_eq!(
        validate(&schema::CALL_TOOL_REQUEST, &bytes),
        Err(DecodeError::InvalidUtf8 { field: 1 })
    );
    // `bytes` are not checked.
    let bytes = reference(&[(1, V::Len(vec![0xff]))]);
    assert_eq!(validate(&schema::IMAGE_CONTENT, &bytes), Ok(()));
}

#[test]
fn value_holds_exactly_one_kind() {
    assert_eq!(validate(&wkt::VALUE, &[]), Err(DecodeError::ValueKind));
    // null_value then bool_value.
    assert_eq!(
        validate(&wkt::VALUE, &[0x08, 0x00, 0x20, 0x01]),
        Err(DecodeError::ValueKind)
    );
    // Unknown fields are no kind.
    assert_eq!(
        validate(&wkt::VALUE, &[0x38, 0x01]),
        Err(DecodeError::ValueKind)
    );
    assert_eq!(validate(&wkt::VALUE, &[0x38, 0x01, 0x20, 0x00]), Ok(()));
    // A Struct entry without a value, and a ListValue holding an empty Value.
    let no_value = reference(&[(
        1,
        V::Msg(&wkt::STRUCT_FIELDS_ENTRY, vec![(1, V::Len(b"k".to_vec()))]),
    )]);
    assert_eq!(
        validate(&wkt::STRUCT, &no_value),
        Err(DecodeError::ValueKind)
    );
    assert_eq!(
        validate(&wkt::LIST_VALUE, &[0x0a, 0x00]),
        Err(DecodeError::ValueKind)
    );
    // An entry without a key is the key "".
    let no_key = reference(&[(
        1,
        V::Msg(
            &wkt::STRUCT_FIELDS_ENTRY,
            vec![(2, V::Msg(&wkt::VALUE, vec![(4, V::Varint(0))]))],
        ),
    )]);
    assert_eq!(validate(&wkt::STRUCT, &no_key), Ok(()));
}

/// A ListValue holding a ListValue ... `levels` deep.
fn nested_lists(levels: usize) -> Vec<u8> {
    let mut list: Vec<(u32, V)> = Vec::new();
    for _ in 1..levels {
        let value = V::Msg(&wkt::VALUE, vec![(6, V::Msg(&wkt::LIST_VALUE, list))]);
        list = vec![(1, value)];
    }
    reference(&list)
}

#[test]
fn nesting_depth_is_bounded() {
    assert_eq!(validate(&wkt::LIST_VALUE, &nested_lists(64)), Ok(()));
    assert_eq!(
        validate(&wkt::LIST_VALUE, &nested_lists(65)),
        Err(DecodeError::TooDeep)
    );
    let tight = Limits {
        max_depth: 3,
        ..Limits::DEFAULT
    };
    let check = |bytes: &[u8]| MessageRef::new(&wkt::LIST_VALUE, bytes).validate(&tight);
    assert_eq!(check(&nested_lists(3)), Ok(()));
    assert_eq!(check(&nested_lists(4)), Err(DecodeError::TooDeep));
    // Ordinary messages count too: CallToolRequest(1) > Request(2) > Struct(3)
    // > Value > Struct(4).
    let inner = V::Msg(&wkt::STRUCT, vec![]);
    let entry = vec![
        (1, V::Len(b"k".to_vec())),
        (2, V::Msg(&wkt::VALUE, vec![(5, inner)])),
    ];
    let arguments = V::Msg(
        &wkt::STRUCT,
        vec![(1, V::Msg(&wkt::STRUCT_FIELDS_ENTRY, entry))],
    );
    let request = V::Msg(&schema::CALL_TOOL_REQUEST_REQUEST, vec![(2, arguments)]);
    let bytes = reference(&[(2, request)]);
    let at = |max_depth| {
        MessageRef::new(&schema::CALL_TOOL_REQUEST, &bytes).validate(&Limits {
            max_depth,
            ..Limits::DEFAULT
        })
    };
    assert_eq!(at(4), Ok(()));
    assert_eq!(at(3), Err(DecodeError::TooDeep));
}

#[test]
fn element_count_is_bounded() {
    // Annotations: the packed field counts 1, each of its 3 values 1, and
    // `priority` 1: 5 elements.
    let bytes = [0x0a, 0x03, 0x01, 0x02, 0x01, 0x15, 0, 0, 0, 0];
    let at = |max_elements| {
        MessageRef::new(&schema::ANNOTATIONS, &bytes).validate(&Limits {
            max_elements,
            ..Limits::DEFAULT
        })
    };
    assert_eq!(at(5), Ok(()));
    assert_eq!(at(4), Err(DecodeError::TooManyElements));
    // Sub-messages' fields and unknown fields count.
    let bytes = reference(&[
        (
            1,
            V::Msg(&schema::REQUEST_FIELDS, vec![(8, V::Len(b"s".to_vec()))]),
        ),
        (99, V::Varint(0)),
    ]);
    let at = |max_elements| {
        MessageRef::new(&schema::LIST_TOOLS_REQUEST, &bytes).validate(&Limits {
            max_elements,
            ..Limits::DEFAULT
        })
    };
    assert_eq!(at(3), Ok(()));
    assert_eq!(at(2), Err(DecodeError::TooManyElements));
}

#[test]
fn packed_payload_must_hold_whole_values() {
    // Annotations.audience packed, ending inside a varint.
    assert_eq!(
        validate(&schema::ANNOTATIONS, &[0x0a, 0x02, 0x01, 0x80]),
        Err(DecodeError::Truncated)
    );
    assert_eq!(validate(&schema::ANNOTATIONS, &[0x0a, 0x00]), Ok(()));
}
