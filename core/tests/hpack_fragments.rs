//! Header blocks decoded fragment by fragment (`begin_block`,
//! `decode_fragment`, `end_block`): a block cut anywhere decodes to the
//! same fields and the same dynamic table as the whole block, and a field
//! larger than the decoding buffer is a size error that leaves the table in
//! step with the peer's encoder (RFC 7541 §4.4; the gRPC binding's "HPACK
//! table after a size error").
// A panic in a test is a failed test, not peer input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_core::hpack::{DecodeError, Decoder, Limits, huffman};

type Fields = Vec<(Vec<u8>, Vec<u8>, bool)>;
/// Dynamic table entries, newest first.
type Table = Vec<(Vec<u8>, Vec<u8>)>;

/// An HPACK integer with an `n`-bit prefix and the given high bits.
fn int(value: usize, n: u8, high: u8) -> Vec<u8> {
    let max = (1usize << n) - 1;
    if value < max {
        return vec![high | value as u8];
    }
    let mut out = vec![high | max as u8];
    let mut v = value - max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
    out
}

fn raw(s: &[u8]) -> Vec<u8> {
    let mut out = int(s.len(), 7, 0);
    out.extend_from_slice(s);
    out
}

fn huff(s: &[u8]) -> Vec<u8> {
    let mut code = vec![0; huffman::encoded_len(s)];
    let n = huffman::encode(s, &mut code).unwrap();
    let mut out = int(n, 7, 0x80);
    out.extend_from_slice(&code[..n]);
    out
}

/// A literal with a new name; `first` is 0x40 (indexing), 0x00 (without)
/// or 0x10 (never indexed).
fn literal(first: u8, name: Vec<u8>, value: Vec<u8>) -> Vec<u8> {
    let mut out = vec![first];
    out.extend(name);
    out.extend(value);
    out
}

/// A block with every kind of representation: a size update, indexed
/// fields (static and dynamic), literals with and without indexing and
/// never indexed, raw and Huffman-coded names and values, a name taken from
/// the dynamic table, and strings long enough to need a multi-octet length.
fn mixed_block() -> Vec<u8> {
    let mut b = int(4000, 5, 0x20);
    b.extend([0x83, 0x86, 0x84]);
    b.extend(literal(0x40, raw(b"x-raw"), raw(b"alpha")));
    b.extend(literal(
        0x40,
        huff(b"x-huffman"),
        huff(b"www.example.com/with/a/path?and=query"),
    ));
    b.extend(literal(0x00, huff(b"x-plain"), huff(&[b'z'; 300])));
    b.extend(literal(0x10, raw(b"authorization"), huff(b"Bearer secret")));
    // Name from dynamic entry 63 (x-raw), Huffman value, indexed.
    let mut by_name = int(63, 6, 0x40);
    by_name.extend(huff(b"beta\x01\xff control and high octets"));
    b.extend(by_name);
    b.extend(int(62, 7, 0x80));
    b.extend(int(64, 7, 0x80));
    // Static name index 4 (:path) without indexing, long raw value.
    let mut path = int(4, 4, 0x00);
    path.extend(raw(&[b'p'; 200]));
    b.extend(path);
    b
}

/// Decodes `block` cut at `cuts` into a fresh decoder with limits `limits`
/// and a buffer of `buf_len` octets. Returns the fields, the result and the
/// dynamic table after it.
fn decode_cut(
    block: &[u8],
    cuts: &[usize],
    limits: Limits,
    buf_len: usize,
    decoder: &mut Decoder<4096>,
) -> (Fields, Result<(), DecodeError>) {
    decoder.set_limits(limits);
    let mut buf = vec![0u8; buf_len];
    let mut fields = Vec::new();
    let mut at = 0;
    decoder.begin_block();
    for &cut in cuts.iter().chain([block.len()].iter()) {
        let r = decoder.decode_fragment(&block[at..cut], &mut buf, |f| {
            fields.push((f.name.to_vec(), f.value.to_vec(), f.never_indexed))
        });
        if let Err(e) = r {
            return (fields, Err(e));
        }
        at = cut;
    }
    (fields, decoder.end_block())
}

fn table(decoder: &Decoder<4096>) -> Table {
    (0..decoder.table_len())
        .map(|i| {
            let (n, v) = decoder.table_entry(i).unwrap();
            (n.to_vec(), v.to_vec())
        })
        .collect()
}

const WIDE: Limits = Limits {
    max_field_size: 1 << 20,
    max_header_list_size: 1 << 24,
};

/// The whole block through `Decoder::decode`, the reference.
fn whole(block: &[u8]) -> (Fields, Table) {
    let mut d = Decoder::<4096>::with_limits(WIDE);
    let mut scratch = [0u8; 4096];
    let mut fields = Vec::new();
    d.decode(block, &mut scratch, |f| {
        fields.push((f.name.to_vec(), f.value.to_vec(), f.never_indexed))
    })
    .unwrap();
    (fields, table(&d))
}

#[test]
fn a_block_cut_at_every_octet_decodes_like_the_whole_block() {
    let block = mixed_block();
    let (want, want_table) = whole(&block);
    assert_eq!(want.len(), 11);
    assert_eq!(want_table.len(), 3);
    assert_eq!(want[7].1, b"beta\x01\xff control and high octets");
    // One cut anywhere, then two cuts anywhere.
    for i in 0..=block.len() {
        let mut d = Decoder::<4096>::with_limits(WIDE);
        let got = decode_cut(&block, &[i], WIDE, 4096, &mut d);
        assert_eq!(got, (want.clone(), Ok(())), "cut at {i}");
        assert_eq!(table(&d), want_table, "cut at {i}");
    }
    for i in (0..=block.len()).step_by(9) {
        for j in i..=block.len() {
            let mut d = Decoder::<4096>::with_limits(WIDE);
            let got = decode_cut(&block, &[i, j], WIDE, 4096, &mut d);
            assert_eq!(got, (want.clone(), Ok(())), "cuts at {i}, {j}");
            assert_eq!(table(&d), want_table, "cuts at {i}, {j}");
        }
    }
    // Octet by octet.
    let cuts: Vec<usize> = (1..block.len()).collect();
    let mut d = Decoder::<4096>::with_limits(WIDE);
    assert_eq!(
        decode_cut(&block, &cuts, WIDE, 4096, &mut d),
        (want, Ok(()))
    );
    assert_eq!(table(&d), want_table);
}

/// Cuts every `n` octets.
fn every(block: &[u8], n: usize) -> Vec<usize> {
    (1..block.len().div_ceil(n)).map(|i| i * n).collect()
}

#[test]
fn a_100_kb_field_is_a_size_error_and_the_next_block_indexes_the_same_table() {
    for huffman_coded in [false, true] {
        let value = vec![b'v'; 100 * 1024];
        let value = if huffman_coded {
            huff(&value)
        } else {
            raw(&value)
        };
        let mut block = vec![0x83, 0x86, 0x84];
        block.extend(literal(0x40, raw(b"x-before"), raw(b"one")));
        block.extend(literal(0x00, raw(b"x-huge"), value));
        block.extend(literal(0x40, huff(b"x-after"), huff(b"two")));
        let mut d = Decoder::<4096>::new();
        for cuts in [every(&block, 16_384), every(&block, 1000), vec![]] {
            let (fields, result) = decode_cut(&block, &cuts, Limits::default(), 4096, &mut d);
            assert_eq!(result, Err(DecodeError::FieldTooLarge));
            assert!(fields.iter().all(|f| f.0 != b"x-huge"));
        }
        // Three blocks, each adding its two entries: the newest first.
        assert_eq!(d.table_len(), 6);
        let mut next = vec![0x83, 0x86, 0x84];
        next.extend(int(62, 7, 0x80));
        next.extend(int(63, 7, 0x80));
        let (fields, result) = decode_cut(&next, &[4], Limits::default(), 4096, &mut d);
        assert_eq!(result, Ok(()));
        assert_eq!(fields[3], (b"x-after".to_vec(), b"two".to_vec(), false));
        assert_eq!(fields[4], (b"x-before".to_vec(), b"one".to_vec(), false));
    }
}

#[test]
fn an_indexed_field_larger_than_the_table_empties_it() {
    // RFC 7541 §4.4: the table empties and the entry is not added; the
    // fields after it index a table that starts again.
    let mut block = literal(0x40, raw(b"x-before"), raw(b"one"));
    block.extend(literal(0x40, raw(b"x-huge"), huff(&vec![b'h'; 100 * 1024])));
    block.extend(literal(0x40, raw(b"x-after"), raw(b"two")));
    let mut d = Decoder::<4096>::new();
    let (_, result) = decode_cut(
        &block,
        &every(&block, 16_384),
        Limits::default(),
        4096,
        &mut d,
    );
    assert_eq!(result, Err(DecodeError::FieldTooLarge));
    assert_eq!(table(&d), vec![(b"x-after".to_vec(), b"two".to_vec())]);
}

#[test]
fn a_field_over_the_field_limit_that_fits_the_table_enters_it() {
    // Over max_field_size, not handed out, but the peer's table holds it.
    let limits = Limits {
        max_field_size: 100,
        max_header_list_size: 16 * 1024,
    };
    let value = vec![b'w'; 3000];
    let block = literal(0x40, huff(b"x-wide"), huff(&value));
    let mut d = Decoder::<4096>::new();
    let (fields, result) = decode_cut(&block, &[5, 600, 1200], limits, 4096, &mut d);
    assert_eq!((fields, result), (vec![], Err(DecodeError::FieldTooLarge)));
    assert_eq!(table(&d), vec![(b"x-wide".to_vec(), value)]);
}

#[test]
fn an_indexed_field_the_buffer_cannot_hold_loses_the_context() {
    // The peer's table holds it, ours cannot: not a size error.
    let block = literal(0x40, raw(b"x-wide"), raw(&[b'w'; 3000]));
    let mut d = Decoder::<4096>::new();
    let (_, result) = decode_cut(&block, &[100], Limits::default(), 1024, &mut d);
    assert_eq!(result, Err(DecodeError::EntryNotBuffered));
    assert!(!DecodeError::EntryNotBuffered.is_size_error());
}

#[test]
fn a_block_ending_inside_a_representation_fails_as_the_whole_block_does() {
    let cases: [(Vec<u8>, DecodeError); 4] = [
        // A string past the end of the block.
        (
            literal(0x00, raw(b"x"), int(1000, 7, 0)),
            DecodeError::StringPastEnd,
        ),
        (
            literal(0x40, huff(b"x-name"), vec![0x85, 0xff]),
            DecodeError::StringPastEnd,
        ),
        // A block that ends before a string's length, or inside an integer.
        (vec![0x40], DecodeError::Truncated),
        (vec![0xff, 0x80], DecodeError::Truncated),
    ];
    for (block, error) in cases {
        let mut scratch = [0u8; 64];
        let mut d = Decoder::<4096>::new();
        assert_eq!(
            d.decode(&block, &mut scratch, |_| {}),
            Err(error),
            "{block:x?}"
        );
        for i in 0..=block.len() {
            let mut d = Decoder::<4096>::new();
            let (_, result) = decode_cut(&block, &[i], Limits::default(), 64, &mut d);
            assert_eq!(result, Err(error), "{block:x?} cut at {i}");
        }
    }
}

#[test]
fn huffman_errors_in_a_straddling_string_are_compression_errors() {
    // EOS inside a string cut in two (RFC 7541 §5.2).
    let block = literal(0x00, raw(b"x"), vec![0x84, 0xff, 0xff, 0xff, 0xff]);
    for i in 0..=block.len() {
        let mut d = Decoder::<4096>::new();
        let (_, result) = decode_cut(&block, &[i], Limits::default(), 64, &mut d);
        assert_eq!(result, Err(DecodeError::HuffmanEos), "cut at {i}");
    }
}
