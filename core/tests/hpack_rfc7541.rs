//! RFC 7541 conformance: every example of Appendix C, the dynamic table size
//! update rules of §4.2 and §6.3, the decoding errors, and the size-error rule
//! (a field or list over its limit leaves the decoder in step with the peer).
//!
//! The hex strings are the RFC's own, typed from its text.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use mcpwire_core::hpack::{
    DecodeError, Decoder, EncodeError, Encoder, Field, Limits, huffman, integer,
};
use support::hpack::{
    Block, OwnedField, check_table_invariants, decode_block, decode_ok, entry_size, hex, list,
    pairs, table,
};

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

// ---------------------------------------------------------------------------
// Helpers

/// Encodes `fields` with a fresh encoder and checks the result: equal to
/// `rfc` when our strategy (never index, static matches, Huffman only when
/// strictly shorter) reproduces the RFC's block, else decoded by a fresh
/// decoder of ours back to the same list, leaving its table empty.
fn check_encoding(fields: &[Field<'_>], rfc: &[u8], reproduces_rfc: bool) {
    let mut enc = Encoder::new();
    let mut out = vec![0u8; 1024];
    let n = enc.encode(fields.iter().copied(), &mut out).unwrap();
    let ours = &out[..n];
    if reproduces_rfc {
        assert_eq!(ours, rfc, "our encoding differs from the RFC's block");
    }
    let mut dec: Decoder<4096> = Decoder::new();
    let decoded = decode_ok(&mut dec, ours);
    let expected: Vec<OwnedField> = fields
        .iter()
        .map(|f| OwnedField {
            name: f.name.to_vec(),
            value: f.value.to_vec(),
            never_indexed: f.never_indexed || support::hpack::is_sensitive_name(f.name),
        })
        .collect();
    assert_eq!(decoded, expected, "our encoding does not decode back");
    assert_eq!(dec.table_len(), 0, "the encoder must never index");
    assert_eq!(dec.table_size(), 0);
}

fn fields_of(pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<Field<'_>> {
    pairs.iter().map(|(n, v)| Field::new(n, v)).collect()
}

fn decode_err<const T: usize>(
    dec: &mut Decoder<T>,
    block: &[u8],
) -> (Vec<OwnedField>, DecodeError) {
    let mut scratch = vec![0u8; 4096];
    let (fields, result) = decode_block(dec, block, &mut scratch);
    match result {
        Err(e) => (fields, e),
        Ok(()) => panic!(
            "{} decoded to {fields:?}, expected an error",
            support::hpack::hex_encode(block)
        ),
    }
}

/// Decodes `block` with a fresh default decoder and expects a non-size error.
fn expect_protocol_error(block: &[u8], expected: DecodeError) {
    let mut dec: Decoder<4096> = Decoder::new();
    let (_, err) = decode_err(&mut dec, block);
    assert_eq!(err, expected, "block {}", support::hpack::hex_encode(block));
    assert!(!err.is_size_error(), "{err:?} must not be a size error");
}

// ---------------------------------------------------------------------------
// C.1 Integer representation

#[test]
fn c1_1_ten_with_a_5_bit_prefix() {
    let mut buf = [0u8; 8];
    // The three high bits belong to the representation; they are kept on
    // encoding and ignored on decoding.
    for flags in [0x00, 0xe0, 0xa0] {
        let n = integer::encode(10, 5, flags, &mut buf).unwrap();
        assert_eq!(&buf[..n], &[flags | 0b0_1010]);
        assert_eq!(integer::decode(&buf[..n], 5).unwrap(), (10, 1));
    }
}

#[test]
fn c1_2_1337_with_a_5_bit_prefix() {
    let mut buf = [0u8; 8];
    let n = integer::encode(1337, 5, 0, &mut buf).unwrap();
    assert_eq!(&buf[..n], &[0b0001_1111, 0b1001_1010, 0b0000_1010]);
    assert_eq!(integer::decode(&buf[..n], 5).unwrap(), (1337, 3));
    // Trailing bytes belong to the next representation.
    assert_eq!(
        integer::decode(&[0x1f, 0x9a, 0x0a, 0x82], 5).unwrap(),
        (1337, 3)
    );
    // Too small an output says how much it needs.
    assert_eq!(
        integer::encode(1337, 5, 0, &mut buf[..2]),
        Err(EncodeError::BufferTooSmall { needed: 3 })
    );
    assert_eq!(
        integer::decode(&[0x1f, 0x9a], 5),
        Err(DecodeError::Truncated)
    );
}

#[test]
fn c1_3_42_at_an_octet_boundary() {
    let mut buf = [0u8; 8];
    let n = integer::encode(42, 8, 0, &mut buf).unwrap();
    assert_eq!(&buf[..n], &[0b0010_1010]);
    assert_eq!(integer::decode(&buf[..n], 8).unwrap(), (42, 1));
}

// ---------------------------------------------------------------------------
// C.2 Header field representation examples

#[test]
fn c2_1_literal_with_indexing() {
    let wire = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    let mut dec: Decoder<4096> = Decoder::new();
    let fields = decode_ok(&mut dec, &wire);
    assert_eq!(pairs(&fields), list(&[("custom-key", "custom-header")]));
    assert!(!fields[0].never_indexed);
    assert_eq!(table(&dec), list(&[("custom-key", "custom-header")]));
    assert_eq!(dec.table_size(), 55);
    check_table_invariants(&dec);
    check_encoding(&[Field::new(b"custom-key", b"custom-header")], &wire, false);
}

#[test]
fn c2_2_literal_without_indexing() {
    let wire = hex("040c 2f73 616d 706c 652f 7061 7468");
    let mut dec: Decoder<4096> = Decoder::new();
    let fields = decode_ok(&mut dec, &wire);
    assert_eq!(pairs(&fields), list(&[(":path", "/sample/path")]));
    assert!(!fields[0].never_indexed);
    assert_eq!(dec.table_len(), 0);
    assert_eq!(dec.table_size(), 0);
    // Ours Huffman-codes the value (shorter), so the bytes differ.
    check_encoding(&[Field::new(b":path", b"/sample/path")], &wire, false);
}

#[test]
fn c2_3_literal_never_indexed() {
    let wire = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    let mut dec: Decoder<4096> = Decoder::new();
    let fields = decode_ok(&mut dec, &wire);
    assert_eq!(pairs(&fields), list(&[("password", "secret")]));
    assert!(fields[0].never_indexed, "never-indexed flag lost");
    assert_eq!(dec.table_len(), 0);
    assert_eq!(dec.table_size(), 0);
    check_encoding(&[Field::sensitive(b"password", b"secret")], &wire, false);
}

#[test]
fn c2_4_indexed_field() {
    let wire = hex("82");
    let mut dec: Decoder<4096> = Decoder::new();
    let fields = decode_ok(&mut dec, &wire);
    assert_eq!(pairs(&fields), list(&[(":method", "GET")]));
    assert!(!fields[0].never_indexed);
    assert_eq!(dec.table_len(), 0);
    assert_eq!(dec.table_size(), 0);
    check_encoding(&[Field::new(b":method", b"GET")], &wire, true);
}

// ---------------------------------------------------------------------------
// C.3 – C.6: sequences sharing one decoder

struct Step {
    wire: Vec<u8>,
    headers: Pairs,
    table: Pairs,
    size: usize,
}

fn run_steps<const T: usize>(dec: &mut Decoder<T>, steps: &[Step]) {
    for (i, step) in steps.iter().enumerate() {
        let fields = decode_ok(dec, &step.wire);
        assert_eq!(pairs(&fields), step.headers, "block {} headers", i + 1);
        assert!(fields.iter().all(|f| !f.never_indexed));
        assert_eq!(table(dec), step.table, "block {} table", i + 1);
        assert_eq!(dec.table_size(), step.size, "block {} table size", i + 1);
        let sum: usize = step.table.iter().map(|(n, v)| entry_size(n, v)).sum();
        assert_eq!(sum, step.size, "the RFC's sizes add up");
        check_table_invariants(dec);
        // Every block uses incremental indexing, which our encoder never does.
        check_encoding(&fields_of(&step.headers), &step.wire, false);
    }
}

fn request_steps(wires: [&str; 3]) -> Vec<Step> {
    vec![
        Step {
            wire: hex(wires[0]),
            headers: list(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ]),
            table: list(&[(":authority", "www.example.com")]),
            size: 57,
        },
        Step {
            wire: hex(wires[1]),
            headers: list(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("cache-control", "no-cache"),
            ]),
            table: list(&[
                ("cache-control", "no-cache"),
                (":authority", "www.example.com"),
            ]),
            size: 110,
        },
        Step {
            wire: hex(wires[2]),
            headers: list(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ]),
            table: list(&[
                ("custom-key", "custom-value"),
                ("cache-control", "no-cache"),
                (":authority", "www.example.com"),
            ]),
            size: 164,
        },
    ]
}

const C3: [&str; 3] = [
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
];

const C4: [&str; 3] = [
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
    "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
];

#[test]
fn c3_requests_without_huffman() {
    let mut dec: Decoder<4096> = Decoder::new();
    run_steps(&mut dec, &request_steps(C3));
}

#[test]
fn c4_requests_with_huffman() {
    let mut dec: Decoder<4096> = Decoder::new();
    run_steps(&mut dec, &request_steps(C4));
}

const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn response_steps(wires: [&str; 3]) -> Vec<Step> {
    vec![
        Step {
            wire: hex(wires[0]),
            headers: list(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", DATE1),
                ("location", LOCATION),
            ]),
            table: list(&[
                ("location", LOCATION),
                ("date", DATE1),
                ("cache-control", "private"),
                (":status", "302"),
            ]),
            size: 222,
        },
        Step {
            wire: hex(wires[1]),
            headers: list(&[
                (":status", "307"),
                ("cache-control", "private"),
                ("date", DATE1),
                ("location", LOCATION),
            ]),
            table: list(&[
                (":status", "307"),
                ("location", LOCATION),
                ("date", DATE1),
                ("cache-control", "private"),
            ]),
            size: 222,
        },
        Step {
            wire: hex(wires[2]),
            headers: list(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", DATE2),
                ("location", LOCATION),
                ("content-encoding", "gzip"),
                ("set-cookie", COOKIE),
            ]),
            table: list(&[
                ("set-cookie", COOKIE),
                ("content-encoding", "gzip"),
                ("date", DATE2),
            ]),
            size: 215,
        },
    ]
}

const C5: [&str; 3] = [
    "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
     2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
     6c65 2e63 6f6d",
    "4803 3330 37c1 c0bf",
    "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
     54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
     5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
     3d31",
];

const C6: [&str; 3] = [
    "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
     2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    "4883 640e ffc1 c0bf",
    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
     77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
     9587 3160 65c0 03ed 4ee5 b106 3d50 07",
];

/// A decoder whose maximum table size is 256 before the first block, as in
/// C.5 and C.6: 256 bytes of storage, so that is its initial maximum. (A
/// larger decoder lowered to 256 would, rightly, demand a size update first.)
fn decoder_256() -> Decoder<256> {
    let dec: Decoder<256> = Decoder::new();
    assert_eq!(dec.max_table_size(), 256);
    dec
}

#[test]
fn c5_responses_without_huffman() {
    let mut dec = decoder_256();
    run_steps(&mut dec, &response_steps(C5));
    assert_eq!(dec.max_table_size(), 256);
}

#[test]
fn c6_responses_with_huffman() {
    let mut dec = decoder_256();
    run_steps(&mut dec, &response_steps(C6));
    assert_eq!(dec.max_table_size(), 256);
}

/// The Huffman-coded strings of C.4 and C.6, checked against the Huffman
/// codec directly: (text, the RFC's string literal with its length octet).
#[test]
fn huffman_strings_of_c4_and_c6() {
    let strings: [(&str, &str); 12] = [
        ("www.example.com", "8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
        ("no-cache", "86a8 eb10 649c bf"),
        ("custom-key", "8825 a849 e95b a97d 7f"),
        ("custom-value", "8925 a849 e95b b8e8 b4bf"),
        ("302", "8264 02"),
        ("private", "85ae c377 1a4b"),
        (
            DATE1,
            "96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff",
        ),
        (LOCATION, "919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3"),
        ("307", "8364 0eff"),
        (
            DATE2,
            "96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 84a6 2d1b ff",
        ),
        ("gzip", "839b d9ab"),
        (
            COOKIE,
            "ad94 e782 1dd7 f2e6 c7b3 35df dfcd 5b39 60d5 af27 087f 3672 c1ab 270f b529 1f95 \
             8731 6065 c003 ed4e e5b1 063d 5007",
        ),
    ];
    for (text, literal) in strings {
        let literal = hex(literal);
        let (coded, expected_len) = (&literal[1..], usize::from(literal[0] & 0x7f));
        assert_eq!(literal[0] & 0x80, 0x80, "{text}: the H bit is set");
        assert_eq!(coded.len(), expected_len, "{text}: RFC length octet");
        assert_eq!(huffman::encoded_len(text.as_bytes()), coded.len(), "{text}");
        let mut out = [0u8; 128];
        let n = huffman::encode(text.as_bytes(), &mut out).unwrap();
        assert_eq!(&out[..n], coded, "{text}: encoding");
        let n = huffman::decode(coded, &mut out).unwrap();
        assert_eq!(&out[..n], text.as_bytes(), "{text}: decoding");
    }
}

// ---------------------------------------------------------------------------
// Dynamic table size updates (§4.2, §6.3)

#[test]
fn size_update_at_block_start_is_applied() {
    let mut dec: Decoder<4096> = Decoder::new();
    let fields = decode_ok(&mut dec, &Block::default().size_update(100).indexed(2).0);
    assert_eq!(pairs(&fields), list(&[(":method", "GET")]));
    assert_eq!(dec.table_capacity(), 100);
    // The acknowledged maximum stays 4096, and the encoder may go back to it.
    assert_eq!(dec.max_table_size(), 4096);
    decode_ok(&mut dec, &Block::default().size_update(4096).0);
    assert_eq!(dec.table_capacity(), 4096);
}

#[test]
fn size_update_after_a_field_is_an_error() {
    let mut dec: Decoder<4096> = Decoder::new();
    let (_, err) = decode_err(&mut dec, &Block::default().indexed(2).size_update(0).0);
    assert_eq!(err, DecodeError::TableSizeUpdateNotAtStart);
    assert!(!err.is_size_error());
}

#[test]
fn size_update_above_the_acknowledged_maximum_is_an_error() {
    let mut dec: Decoder<4096> = Decoder::new();
    let (_, err) = decode_err(&mut dec, &Block::default().size_update(4097).indexed(2).0);
    assert_eq!(
        err,
        DecodeError::TableSizeTooLarge {
            requested: 4097,
            max: 4096
        }
    );
    assert!(!err.is_size_error());

    // The acknowledged maximum, not the storage, is the bound.
    let mut dec: Decoder<4096> = Decoder::new();
    dec.set_max_table_size(1000);
    let (_, err) = decode_err(&mut dec, &Block::default().size_update(1001).0);
    assert_eq!(
        err,
        DecodeError::TableSizeTooLarge {
            requested: 1001,
            max: 1000
        }
    );
}

#[test]
fn lowered_maximum_requires_an_update_in_the_next_block() {
    // Missing update.
    let mut dec: Decoder<4096> = Decoder::new();
    dec.set_max_table_size(100);
    let (fields, err) = decode_err(&mut dec, &Block::default().indexed(2).0);
    assert_eq!(err, DecodeError::TableSizeUpdateMissing);
    assert!(!err.is_size_error());
    assert!(
        fields.is_empty(),
        "no field before the missing update: {fields:?}"
    );

    // An empty block does not carry the update either.
    let mut dec: Decoder<4096> = Decoder::new();
    dec.set_max_table_size(100);
    let (_, err) = decode_err(&mut dec, &[]);
    assert_eq!(err, DecodeError::TableSizeUpdateMissing);

    // An update above the new maximum.
    let mut dec: Decoder<4096> = Decoder::new();
    dec.set_max_table_size(100);
    let (_, err) = decode_err(&mut dec, &Block::default().size_update(101).indexed(2).0);
    assert_eq!(
        err,
        DecodeError::TableSizeTooLarge {
            requested: 101,
            max: 100
        }
    );

    // An update to the new maximum or below is accepted, and only the first
    // block after the change needs one.
    for size in [100, 0, 57] {
        let mut dec: Decoder<4096> = Decoder::new();
        dec.set_max_table_size(100);
        let fields = decode_ok(&mut dec, &Block::default().size_update(size).indexed(2).0);
        assert_eq!(pairs(&fields), list(&[(":method", "GET")]));
        assert_eq!(dec.table_capacity(), size);
        assert_eq!(dec.max_table_size(), 100);
        let fields = decode_ok(&mut dec, &Block::default().indexed(3).0);
        assert_eq!(pairs(&fields), list(&[(":method", "POST")]));
    }
}

#[test]
fn raised_maximum_needs_no_update() {
    let mut dec: Decoder<4096> = Decoder::new();
    dec.set_max_table_size(100);
    decode_ok(&mut dec, &Block::default().size_update(100).0);
    dec.set_max_table_size(4096);
    let fields = decode_ok(&mut dec, &Block::default().indexed(2).0);
    assert_eq!(pairs(&fields), list(&[(":method", "GET")]));
    // The encoder may now use the larger size.
    decode_ok(&mut dec, &Block::default().size_update(4096).0);
    assert_eq!(dec.table_capacity(), 4096);
}

#[test]
fn two_updates_smallest_then_final() {
    // RFC 7541 §4.2: the maximum went 4096 -> 0 -> 2000 between two blocks;
    // the encoder signals the smallest, then the final size.
    let mut dec: Decoder<4096> = Decoder::new();
    decode_ok(&mut dec, &Block::default().incremental(b"k", b"v").0);
    assert_eq!(dec.table_len(), 1);
    dec.set_max_table_size(0);
    dec.set_max_table_size(2000);
    let block = Block::default()
        .size_update(0)
        .size_update(2000)
        .incremental(b"k2", b"v2")
        .0;
    let fields = decode_ok(&mut dec, &block);
    assert_eq!(pairs(&fields), list(&[("k2", "v2")]));
    // The update to 0 emptied the table before the new entry went in.
    assert_eq!(table(&dec), list(&[("k2", "v2")]));
    assert_eq!(dec.max_table_size(), 2000);
    assert_eq!(dec.table_capacity(), 2000);
    check_table_invariants(&dec);

    // Signalling only the final size skips the smallest: not enough.
    let mut dec: Decoder<4096> = Decoder::new();
    dec.set_max_table_size(0);
    dec.set_max_table_size(2000);
    let (_, err) = decode_err(&mut dec, &Block::default().size_update(2000).indexed(2).0);
    assert!(!err.is_size_error());
    assert!(
        matches!(
            err,
            DecodeError::TableSizeUpdateMissing | DecodeError::TableSizeTooLarge { .. }
        ),
        "got {err:?}"
    );
}

#[test]
fn size_update_evicts() {
    let mut dec: Decoder<4096> = Decoder::new();
    run_steps(&mut dec, &request_steps(C3));
    // Table: custom-key (54), cache-control (53), :authority (57) = 164.
    // Down to 110: the oldest entry (:authority) goes.
    let block = Block::default().size_update(110).indexed(62).indexed(63).0;
    let fields = decode_ok(&mut dec, &block);
    assert_eq!(
        pairs(&fields),
        list(&[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache")
        ])
    );
    assert_eq!(
        table(&dec),
        list(&[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache")
        ])
    );
    assert_eq!(dec.table_size(), 107);
    check_table_invariants(&dec);
    let (_, err) = decode_err(&mut dec, &Block::default().indexed(64).0);
    assert_eq!(err, DecodeError::InvalidIndex(64));

    // Down to 0 empties it; back up, it fills again.
    let mut dec: Decoder<4096> = Decoder::new();
    run_steps(&mut dec, &request_steps(C3));
    decode_ok(&mut dec, &Block::default().size_update(0).0);
    assert_eq!(dec.table_len(), 0);
    assert_eq!(dec.table_size(), 0);
    let block = Block::default()
        .size_update(4096)
        .incremental_indexed_name(1, b"example.org")
        .indexed(62)
        .0;
    let fields = decode_ok(&mut dec, &block);
    assert_eq!(
        pairs(&fields),
        list(&[(":authority", "example.org"), (":authority", "example.org")])
    );
    assert_eq!(table(&dec), list(&[(":authority", "example.org")]));
}

#[test]
fn entry_larger_than_the_table_empties_it() {
    // §4.4: an entry larger than the maximum size empties the table and is
    // not added; it is still a valid field.
    let mut dec: Decoder<4096> = Decoder::new();
    dec.set_max_table_size(64);
    let block = Block::default()
        .size_update(64)
        .incremental(b"a", b"b")
        .incremental(b"big", &[b'x'; 40])
        .0;
    let fields = decode_ok(&mut dec, &block);
    assert_eq!(fields.len(), 2);
    assert_eq!(fields[1].value, vec![b'x'; 40]);
    assert_eq!(dec.table_len(), 0);
    assert_eq!(dec.table_size(), 0);
}

#[test]
fn eviction_keeps_indices_in_step() {
    // Many insertions through a small table: index 62 is always the newest,
    // and the table never exceeds its maximum.
    let mut dec: Decoder<4096> = Decoder::new();
    dec.set_max_table_size(300);
    decode_ok(&mut dec, &Block::default().size_update(300).0);
    for i in 0..200u32 {
        let name = format!("name-{i}");
        let value = "v".repeat((i as usize * 7) % 90);
        let block = Block::default()
            .incremental(name.as_bytes(), value.as_bytes())
            .indexed(62)
            .0;
        let fields = decode_ok(&mut dec, &block);
        assert_eq!(fields[1].name, name.as_bytes());
        assert_eq!(fields[1].value, value.as_bytes());
        check_table_invariants(&dec);
        let newest = dec.table_entry(0).unwrap();
        assert_eq!(newest, (name.as_bytes(), value.as_bytes()));
    }
}

// ---------------------------------------------------------------------------
// Decoding errors: typed, and none of them a size error

#[test]
fn index_zero() {
    expect_protocol_error(&hex("80"), DecodeError::InvalidIndex(0));
}

#[test]
fn index_out_of_range() {
    // 61 is the last static entry; with an empty table 62 does not exist.
    let mut dec: Decoder<4096> = Decoder::new();
    let fields = decode_ok(&mut dec, &Block::default().indexed(61).0);
    assert_eq!(pairs(&fields), list(&[("www-authenticate", "")]));
    expect_protocol_error(
        &Block::default().indexed(62).0,
        DecodeError::InvalidIndex(62),
    );
    // As a name index too.
    expect_protocol_error(
        &Block::default().incremental_indexed_name(62, b"x").0,
        DecodeError::InvalidIndex(62),
    );
    expect_protocol_error(
        &Block::default().plain_indexed_name(70, b"x").0,
        DecodeError::InvalidIndex(70),
    );
    // Past the dynamic table: one entry is index 62 only.
    let mut dec: Decoder<4096> = Decoder::new();
    decode_ok(&mut dec, &Block::default().incremental(b"k", b"v").0);
    let (_, err) = decode_err(&mut dec, &Block::default().indexed(63).0);
    assert_eq!(err, DecodeError::InvalidIndex(63));
    assert!(!err.is_size_error());
}

#[test]
fn string_length_past_the_end() {
    // Literal without indexing, new name "ab" claimed as 5 octets.
    expect_protocol_error(&hex("0005 6162"), DecodeError::StringPastEnd);
    // Value claimed longer than what follows.
    expect_protocol_error(&hex("0001 6103 6263"), DecodeError::StringPastEnd);
    // Huffman string likewise.
    expect_protocol_error(&hex("0485 1fff"), DecodeError::StringPastEnd);
    // Block ends inside an integer (or before a string's length): truncated.
    expect_protocol_error(&hex("ff"), DecodeError::Truncated);
    expect_protocol_error(&hex("40"), DecodeError::Truncated);
}

#[test]
fn integer_overflow() {
    // Index 127 + 127 + 127·2^7 + ... far past 2^32.
    expect_protocol_error(&hex("ffff ffff ff7f"), DecodeError::IntegerOverflow);
    // A string length that overflows.
    expect_protocol_error(&hex("007f ffff ffff 7f"), DecodeError::IntegerOverflow);
    // A size update that overflows.
    expect_protocol_error(&hex("3fff ffff ff7f"), DecodeError::IntegerOverflow);
}

#[test]
fn huffman_eos_in_a_string() {
    // 'a' (00011), then EOS (30 ones), then 5 bits of padding.
    let coded = hex("1fff ffff ff");
    let mut out = [0u8; 16];
    assert_eq!(
        huffman::decode(&coded, &mut out),
        Err(DecodeError::HuffmanEos)
    );
    // As a value (:path with a Huffman value) and as a name.
    expect_protocol_error(&hex("0485 1fff ffff ff"), DecodeError::HuffmanEos);
    expect_protocol_error(&hex("0085 1fff ffff ff01 61"), DecodeError::HuffmanEos);
}

#[test]
fn huffman_padding_longer_than_7_bits() {
    let mut out = [0u8; 16];
    // Eight bits of ones.
    assert_eq!(
        huffman::decode(&hex("ff"), &mut out),
        Err(DecodeError::HuffmanPadding)
    );
    // 'a' then 11 bits of ones.
    assert_eq!(
        huffman::decode(&hex("1fff"), &mut out),
        Err(DecodeError::HuffmanPadding)
    );
    expect_protocol_error(&hex("0482 1fff"), DecodeError::HuffmanPadding);
    expect_protocol_error(&hex("0481 ff"), DecodeError::HuffmanPadding);
    // The control: 'a' then three bits of ones is fine.
    let n = huffman::decode(&hex("1f"), &mut out).unwrap();
    assert_eq!(&out[..n], b"a");
}

#[test]
fn huffman_padding_not_all_ones() {
    let mut out = [0u8; 16];
    // 'a' then 000.
    assert_eq!(
        huffman::decode(&hex("18"), &mut out),
        Err(DecodeError::HuffmanPadding)
    );
    // 'a' then 101.
    assert_eq!(
        huffman::decode(&hex("1d"), &mut out),
        Err(DecodeError::HuffmanPadding)
    );
    expect_protocol_error(&hex("0481 18"), DecodeError::HuffmanPadding);
}

// ---------------------------------------------------------------------------
// The size-error rule: a field or list over its limit is reported after the
// whole block was read and every table change applied, and no field after it
// is handed out.

#[test]
fn oversize_field_keeps_the_decoder_in_step() {
    let limits = Limits {
        max_field_size: 64,
        max_header_list_size: 4096,
    };
    let mut dec = Decoder::<4096>::with_limits(limits);
    let big = vec![b'x'; 200];
    let block1 = Block::default()
        .incremental(b"before", b"1")
        .incremental(b"big", &big)
        .incremental(b"after-1", b"2")
        .incremental_indexed_name(1, b"example.org") // :authority
        .0;
    let mut scratch = vec![0u8; 4096];
    let (fields, result) = decode_block(&mut dec, &block1, &mut scratch);
    let err = result.expect_err("the 232-byte field is over the 64-byte limit");
    assert_eq!(err, DecodeError::FieldTooLarge);
    assert!(err.is_size_error());
    assert_eq!(
        pairs(&fields),
        list(&[("before", "1")]),
        "fields handed out"
    );

    // Every literal of the block went into the table, the big one included.
    let mut expected_table = list(&[
        (":authority", "example.org"),
        ("after-1", "2"),
        ("big", ""),
        ("before", "1"),
    ]);
    expected_table[2].1 = big.clone();
    assert_eq!(table(&dec), expected_table);
    check_table_invariants(&dec);

    // The next block uses those entries by index: 62 (:authority),
    // 63 (after-1), 65 (before), and the big one's name (64) with a short value.
    let block2 = Block::default()
        .indexed(62)
        .indexed(63)
        .indexed(65)
        .plain_indexed_name(64, b"small")
        .0;
    let (fields, result) = decode_block(&mut dec, &block2, &mut scratch);
    result.unwrap();
    assert_eq!(
        pairs(&fields),
        list(&[
            (":authority", "example.org"),
            ("after-1", "2"),
            ("before", "1"),
            ("big", "small"),
        ])
    );

    // The big entry itself is still over the limit when referenced.
    let (fields, result) = decode_block(&mut dec, &Block::default().indexed(64).0, &mut scratch);
    assert_eq!(result, Err(DecodeError::FieldTooLarge));
    assert!(fields.is_empty());
}

#[test]
fn oversize_huffman_field_keeps_the_decoder_in_step() {
    // A literal that does not enter the table is Huffman-decoded into the
    // caller's scratch buffer; when it does not fit, that is a size error
    // too, with the same guarantees.
    let mut dec: Decoder<4096> = Decoder::new();
    let long = vec![b'a'; 100];
    let mut scratch = [0u8; 32];

    // Literals that enter the table are decoded into the table, not the
    // scratch buffer (as `Decoder::decode` documents).
    let block0 = Block::default()
        .int(0, 6, 0x40)
        .string(b"indexed")
        .huffman_string(&long)
        .0;
    let (fields, result) = decode_block(&mut dec, &block0, &mut scratch);
    result.unwrap();
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].value, long);

    let block1 = Block::default()
        .incremental(b"before", b"1")
        .int(0, 4, 0x00)
        .string(b"coded")
        .huffman_string(&long)
        .incremental(b"after-1", b"2")
        .incremental(b"after-2", b"3")
        .0;
    let (fields, result) = decode_block(&mut dec, &block1, &mut scratch);
    let err = result.expect_err("100 decoded bytes cannot fit 32 bytes of scratch");
    assert_eq!(err, DecodeError::FieldTooLarge);
    assert!(err.is_size_error());
    assert_eq!(pairs(&fields), list(&[("before", "1")]));
    assert_eq!(dec.table_len(), 4);

    let block2 = Block::default().indexed(62).indexed(63).indexed(64).0;
    let (fields, result) = decode_block(&mut dec, &block2, &mut scratch);
    result.unwrap();
    assert_eq!(
        pairs(&fields),
        list(&[("after-2", "3"), ("after-1", "2"), ("before", "1")])
    );
}

#[test]
fn oversize_header_list_keeps_the_decoder_in_step() {
    // Sizes counted with or without the 32-octet overhead give the same
    // split: "a" (81 or 113) fits 200, "a" + "b" (212 or 276) does not.
    let limits = Limits {
        max_field_size: 1024,
        max_header_list_size: 200,
    };
    let mut dec = Decoder::<4096>::with_limits(limits);
    let a = vec![b'a'; 80];
    let b = vec![b'b'; 130];
    let block1 = Block::default()
        .incremental(b"a", &a)
        .incremental(b"b", &b)
        .incremental(b"c", b"ccc")
        .incremental(b"d", b"ddd")
        .0;
    let mut scratch = vec![0u8; 4096];
    let (fields, result) = decode_block(&mut dec, &block1, &mut scratch);
    let err = result.expect_err("the list is over 200 bytes");
    assert_eq!(err, DecodeError::HeaderListTooLarge);
    assert!(err.is_size_error());
    assert_eq!(fields.len(), 1, "only the first field is handed out");
    assert_eq!(fields[0].value, a);
    assert_eq!(dec.table_len(), 4);
    check_table_invariants(&dec);

    // d (36) + c (36) + a (113) = 185 fits.
    let block2 = Block::default().indexed(62).indexed(63).indexed(65).0;
    let (fields, result) = decode_block(&mut dec, &block2, &mut scratch);
    result.unwrap();
    assert_eq!(fields.len(), 3);
    assert_eq!(pairs(&fields[..2]), list(&[("d", "ddd"), ("c", "ccc")]));
    assert_eq!(fields[2].name, b"a");
    assert_eq!(fields[2].value, a);
    // b alone fits (163).
    let (fields, result) = decode_block(&mut dec, &Block::default().indexed(64).0, &mut scratch);
    result.unwrap();
    assert_eq!(fields[0].value, b);
}

#[test]
fn size_error_does_not_hide_a_later_protocol_error() {
    // After a size error the rest of the block is still read; a broken
    // representation later in it is a protocol error, not a size error.
    let limits = Limits {
        max_field_size: 64,
        max_header_list_size: 4096,
    };
    let mut dec = Decoder::<4096>::with_limits(limits);
    let block = Block::default()
        .incremental(b"big", &[b'x'; 200])
        .indexed(0)
        .0;
    let (fields, err) = decode_err(&mut dec, &block);
    assert!(fields.is_empty());
    assert_eq!(err, DecodeError::InvalidIndex(0));
    assert!(!err.is_size_error());
}

#[test]
fn new_entry_may_name_the_entry_it_evicts() {
    // §4.4: a new entry can reference the name of an entry that adding it
    // evicts. Table of 80: "custom-name-xyz: v1" (49), then a literal with
    // indexed name 62 (that entry) and a value making 56: 105 > 80.
    let mut dec: Decoder<4096> = Decoder::new();
    let block = Block::default()
        .size_update(80)
        .incremental(b"custom-name-xyz", b"v1")
        .incremental_indexed_name(62, b"v2-longer")
        .0;
    let fields = decode_ok(&mut dec, &block);
    assert_eq!(
        pairs(&fields),
        list(&[("custom-name-xyz", "v1"), ("custom-name-xyz", "v2-longer")])
    );
    assert_eq!(table(&dec), list(&[("custom-name-xyz", "v2-longer")]));
    assert_eq!(dec.table_size(), 56);
    check_table_invariants(&dec);
}

#[test]
fn huffman_literals_enter_the_table() {
    // Huffman-coded name and value in a literal with indexing, then both
    // referenced; and a Huffman value under a dynamic name.
    let mut dec: Decoder<4096> = Decoder::new();
    let block = Block::default()
        .int(0, 6, 0x40)
        .huffman_string(b"x-trace-id")
        .huffman_string(b"0af7651916cd43dd8448eb211c80319c")
        .0;
    let fields = decode_ok(&mut dec, &block);
    assert_eq!(
        pairs(&fields),
        list(&[("x-trace-id", "0af7651916cd43dd8448eb211c80319c")])
    );
    let block = Block::default()
        .indexed(62)
        .int(62, 4, 0)
        .huffman_string(b"second")
        .0;
    let fields = decode_ok(&mut dec, &block);
    assert_eq!(
        pairs(&fields),
        list(&[
            ("x-trace-id", "0af7651916cd43dd8448eb211c80319c"),
            ("x-trace-id", "second"),
        ])
    );
    assert_eq!(dec.table_len(), 1);
    check_table_invariants(&dec);
}

#[test]
fn entries_as_large_as_the_table() {
    // An entry of exactly the maximum size fits (alone); one octet more
    // empties the table. Storage exactly the maximum, and larger.
    fn check<const T: usize>(max: usize) {
        let mut dec: Decoder<T> = Decoder::with_limits(Limits {
            max_field_size: 1 << 20,
            max_header_list_size: 1 << 20,
        });
        dec.set_max_table_size(max);
        let mut scratch = vec![0u8; 1 << 16];
        let value = vec![b'v'; max - 32 - 1];
        let block = Block::default()
            .size_update(max)
            .incremental(b"s", b"small")
            .incremental(b"n", &value)
            .indexed(62)
            .0;
        let (fields, result) = decode_block(&mut dec, &block, &mut scratch);
        result.unwrap();
        assert_eq!(fields.len(), 3);
        assert_eq!(fields[2].value, value);
        assert_eq!(
            table(&dec).len(),
            1,
            "the exact-size entry evicted the small one"
        );
        assert_eq!(dec.table_size(), max);
        check_table_invariants(&dec);
        let too_big = vec![b'w'; max - 32];
        let block = Block::default().incremental(b"n", &too_big).0;
        let (fields, result) = decode_block(&mut dec, &block, &mut scratch);
        result.unwrap();
        assert_eq!(fields.len(), 1);
        assert_eq!(dec.table_len(), 0);
        assert_eq!(dec.table_size(), 0);
        // Many empty entries (32 octets each) fill it exactly.
        let mut block = Block::default();
        for _ in 0..max / 32 {
            block = block.incremental(b"", b"");
        }
        let (fields, result) = decode_block(&mut dec, &block.0, &mut scratch);
        result.unwrap();
        assert_eq!(fields.len(), max / 32);
        assert_eq!(dec.table_len(), max / 32);
        assert_eq!(dec.table_size(), max / 32 * 32);
        check_table_invariants(&dec);
    }
    check::<4096>(4096);
    check::<256>(256);
    check::<8192>(4096);
    check::<65535>(65535);
}
