//! Interoperability with the hpack-test-case corpus (http2jp/hpack-test-case):
//! every encoder's stories decode to their header lists, and our encoder's
//! encodings of the raw header sets decode back.
//!
//! The corpus is `tests/data/hpack-test-case.tar.xz` (MIT, its license
//! beside it), unpacked in memory by `support::hpack::corpus`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use mcpwire_core::hpack::{DEFAULT_TABLE_SIZE, Decoder, Encoder, Field, Limits};
use support::hpack::{
    OwnedField, Story, check_table_invariants, decode_block, hex_encode, is_sensitive_name, pairs,
};

/// Storage for the largest SETTINGS_HEADER_TABLE_SIZE in the corpus
/// (nghttp2-16384-4096 acknowledges 16384).
const TABLE: usize = 16384;

/// Limits far above anything in the corpus, so that only the codec is tested.
const LIMITS: Limits = Limits {
    max_field_size: 1 << 20,
    max_header_list_size: 1 << 20,
};

/// Decodes one story with one decoder; returns the number of cases, or the
/// first mismatch.
fn decode_story(story: &Story) -> Result<usize, String> {
    let mut dec = Box::new(Decoder::<TABLE>::with_limits(LIMITS));
    let mut scratch = vec![0u8; 1 << 16];
    // The setting in force: HTTP/2's default until a case says otherwise
    // (hpack-test-case README: "If omitted, the default value, 4,096").
    let mut setting = DEFAULT_TABLE_SIZE;
    for (i, case) in story.cases.iter().enumerate() {
        let at = format!("{} case {}", story.name(), case.seqno.unwrap_or(i as u64));
        // `header_table_size` is the SETTINGS_HEADER_TABLE_SIZE acknowledged
        // just before this case; the encoder's size updates must respect it.
        if let Some(size) = case.header_table_size
            && size != setting
        {
            assert!(size <= TABLE, "{at}: table size {size} above the storage");
            dec.set_max_table_size(size);
            setting = size;
        }
        let wire = case
            .wire
            .as_deref()
            .ok_or_else(|| format!("{at}: no wire"))?;
        let (fields, result) = decode_block(&mut dec, wire, &mut scratch);
        if let Err(e) = result {
            return Err(format!(
                "{at}: {e:?} after {} fields; wire {}",
                fields.len(),
                hex_encode(wire)
            ));
        }
        if pairs(&fields) != case.headers {
            return Err(format!(
                "{at}: decoded {fields:?}, expected {:?}",
                case.headers
                    .iter()
                    .map(|(n, v)| format!(
                        "{}: {}",
                        String::from_utf8_lossy(n),
                        String::from_utf8_lossy(v)
                    ))
                    .collect::<Vec<_>>()
            ));
        }
        check_table_invariants(&dec);
        if dec.table_capacity() > dec.max_table_size() {
            return Err(format!(
                "{at}: table capacity {} above the setting {}",
                dec.table_capacity(),
                dec.max_table_size()
            ));
        }
    }
    Ok(story.cases.len())
}

#[test]
fn every_implementation_story_decodes() {
    let corpus = support::hpack::corpus();
    let mut failures = Vec::new();
    let (mut folders, mut stories, mut cases) = (0, 0, 0);
    for name in corpus.implementation_folders() {
        let files = corpus.stories(name);
        assert!(!files.is_empty(), "{name}: no stories");
        let (mut dir_stories, mut dir_cases) = (0, 0);
        for story in files {
            match decode_story(&story) {
                Ok(n) => {
                    dir_stories += 1;
                    dir_cases += n;
                }
                Err(e) => failures.push(e),
            }
        }
        println!("hpack-test-case {name}: {dir_stories} stories, {dir_cases} cases decoded");
        folders += 1;
        stories += dir_stories;
        cases += dir_cases;
    }
    println!(
        "hpack-test-case: {folders} implementations, {stories} stories, {cases} cases decoded, \
         {} stories failed",
        failures.len()
    );
    assert!(folders > 0, "no implementation folders in the corpus");
    assert!(
        failures.is_empty(),
        "{} stories failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The never-indexed flag our encoder must give each field of `headers`.
fn expected_flags(headers: &[(Vec<u8>, Vec<u8>)], sensitive: impl Fn(&[u8]) -> bool) -> Vec<bool> {
    headers
        .iter()
        .map(|(n, _)| sensitive(n) || is_sensitive_name(n))
        .collect()
}

#[test]
fn our_encoding_of_raw_data_decodes_back() {
    let files = support::hpack::corpus().stories("raw-data");
    assert!(!files.is_empty(), "raw-data: no stories");
    let (mut stories, mut cases, mut bytes_in, mut bytes_out) = (0, 0, 0usize, 0usize);
    let mut out = vec![0u8; 1 << 16];
    let mut scratch = vec![0u8; 1 << 16];
    for story in &files {
        let mut enc = Encoder::new();
        let mut dec = Box::new(Decoder::<4096>::with_limits(LIMITS));
        for (i, case) in story.cases.iter().enumerate() {
            let at = format!("{} case {i}", story.name());
            // Cookies as sensitive fields, to carry the flag through too.
            let sensitive = |n: &[u8]| n == b"cookie" || n == b"set-cookie";
            let fields: Vec<Field<'_>> = case
                .headers
                .iter()
                .map(|(n, v)| {
                    if sensitive(n) {
                        Field::sensitive(n, v)
                    } else {
                        Field::new(n, v)
                    }
                })
                .collect();
            let n = enc
                .encode(fields.iter().copied(), &mut out)
                .unwrap_or_else(|e| panic!("{at}: {e:?}"));
            assert_eq!(
                n,
                enc.encoded_len(fields.iter().copied()),
                "{at}: encoded_len"
            );
            let (decoded, result) = decode_block(&mut dec, &out[..n], &mut scratch);
            result.unwrap_or_else(|e| panic!("{at}: {e:?}; wire {}", hex_encode(&out[..n])));
            assert_eq!(pairs(&decoded), case.headers, "{at}");
            let flags: Vec<bool> = decoded
                .iter()
                .map(|f: &OwnedField| f.never_indexed)
                .collect();
            assert_eq!(
                flags,
                expected_flags(&case.headers, sensitive),
                "{at}: never-indexed"
            );
            assert_eq!(dec.table_len(), 0, "{at}: our encoder must never index");
            cases += 1;
            bytes_in += case
                .headers
                .iter()
                .map(|(n, v)| n.len() + v.len())
                .sum::<usize>();
            bytes_out += n;
        }
        stories += 1;
    }
    println!(
        "raw-data: {stories} stories, {cases} cases encoded and decoded back \
         ({bytes_in} bytes of names and values -> {bytes_out} bytes of blocks)"
    );
}
