//! Property tests of the HPACK codec:
//!
//! - our encoder's blocks decode back to the same list, flags included,
//!   through table size changes;
//! - blocks built from random representations decode as a plain model of
//!   RFC 7541 says, limits and size errors included;
//! - arbitrary bytes never panic the decoder, and what it hands out always
//!   respects the limits and its table its maximum;
//! - a too-small output buffer reports exactly the length a large one gets;
//! - the Huffman code round-trips, and whatever it accepts is canonical.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::VecDeque;

use mcpwire_core::hpack::{
    DecodeError, Decoder, EncodeError, Encoder, Field, Limits, STATIC_TABLE, huffman,
};
use mcpwire_core::records::Records;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::TestCaseError;
use support::hpack::{
    Block, OwnedField, check_table_invariants, decode_block, is_sensitive_name, table,
};
use support::records::GrowingRecords;

const BIG: Limits = Limits {
    max_field_size: 1 << 20,
    max_header_list_size: 1 << 20,
};

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

// ---------------------------------------------------------------------------
// Strategies

fn static_names() -> Vec<Vec<u8>> {
    STATIC_TABLE.iter().map(|(n, _)| n.to_vec()).collect()
}

fn printable(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(0x20u8..0x7f, 0..max)
}

fn field_name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => vec(any::<u8>(), 0..24),
        2 => printable(24),
        3 => select(static_names()),
        1 => select(vec![b"authorization".to_vec(), b"proxy-authorization".to_vec()]),
    ]
}

fn field_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => vec(any::<u8>(), 0..64),
        3 => printable(96),
        1 => select(STATIC_TABLE.iter().map(|(_, v)| v.to_vec()).collect::<Vec<_>>()),
    ]
}

/// (name, value, sensitive)
fn field() -> impl Strategy<Value = (Vec<u8>, Vec<u8>, bool)> {
    prop_oneof![
        4 => (field_name(), field_value(), any::<bool>()),
        // Whole static entries, which the encoder sends as one index.
        1 => (select(STATIC_TABLE.to_vec()), any::<bool>())
            .prop_map(|((n, v), s)| (n.to_vec(), v.to_vec(), s)),
    ]
}

fn as_fields(list: &[(Vec<u8>, Vec<u8>, bool)]) -> Vec<Field<'_>> {
    list.iter()
        .map(|(n, v, s)| {
            if *s {
                Field::sensitive(n, v)
            } else {
                Field::new(n, v)
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// decode(encode(list)) == list

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn decode_of_encode_is_identity(
        blocks in vec((vec(0usize..=4096, 0..3), vec(field(), 0..16)), 1..5),
    ) {
        let mut enc = Encoder::new();
        let mut dec = Decoder::<4096>::with_limits(BIG);
        let mut out = vec![0u8; 1 << 16];
        let mut scratch = vec![0u8; 1 << 16];
        for (settings, list) in &blocks {
            // SETTINGS_HEADER_TABLE_SIZE values both sides have agreed on
            // since the last block (two: the smallest must be signalled).
            for &size in settings {
                enc.set_max_table_size(size);
                dec.set_max_table_size(size);
            }
            let fields = as_fields(list);
            let len = enc.encoded_len(fields.iter().copied());
            let n = enc.encode(fields.iter().copied(), &mut out).unwrap();
            prop_assert_eq!(n, len, "encoded_len");
            let (got, result) = decode_block(&mut dec, &out[..n], &mut scratch);
            prop_assert_eq!(result, Ok(()));
            let expected: Vec<OwnedField> = list
                .iter()
                .map(|(n, v, s)| OwnedField {
                    name: n.clone(),
                    value: v.clone(),
                    never_indexed: *s || is_sensitive_name(n),
                })
                .collect();
            prop_assert_eq!(got, expected);
            prop_assert_eq!(dec.table_len(), 0, "our encoder never indexes");
            prop_assert!(dec.table_capacity() <= dec.max_table_size());
        }
    }
}

// ---------------------------------------------------------------------------
// A model decoder, straight from RFC 7541, against blocks of random
// representations.
//
// Indices are drawn as "a valid one", "0" or "past the end" and resolved
// against the model's table as the block is walked, so that most blocks are
// valid and reach the table and limit rules.

#[derive(Debug, Clone, Copy)]
enum Idx {
    Valid(Index),
    Zero,
    Past(usize),
}

#[derive(Debug, Clone)]
enum NameRef<I> {
    Index(I),
    New(Vec<u8>, bool),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Incremental,
    Without,
    Never,
}

#[derive(Debug, Clone)]
enum Rep<I> {
    Indexed(I),
    Literal {
        kind: Kind,
        name: NameRef<I>,
        value: Vec<u8>,
        huffman: bool,
    },
    SizeUpdate(I),
}

fn idx() -> impl Strategy<Value = Idx> {
    prop_oneof![
        200 => any::<Index>().prop_map(Idx::Valid),
        1 => Just(Idx::Zero),
        1 => (0usize..100_000).prop_map(Idx::Past),
    ]
}

fn model_name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => select(vec![b"a".to_vec(), b"x-b".to_vec(), b"custom-key".to_vec()]),
        1 => vec(any::<u8>(), 0..12),
    ]
}

fn model_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => printable(40),
        1 => vec(any::<u8>(), 0..40),
        1 => printable(300),
    ]
}

fn rep() -> impl Strategy<Value = Rep<Idx>> {
    let name = prop_oneof![
        idx().prop_map(NameRef::Index),
        (model_name(), any::<bool>()).prop_map(|(n, h)| NameRef::New(n, h)),
    ];
    let kind = prop_oneof![
        3 => Just(Kind::Incremental),
        1 => Just(Kind::Without),
        1 => Just(Kind::Never),
    ];
    prop_oneof![
        15 => idx().prop_map(Rep::Indexed),
        30 => (kind, name, model_value(), any::<bool>())
            .prop_map(|(kind, name, value, huffman)| Rep::Literal { kind, name, value, huffman }),
        // Misplaced on purpose when it lands after a field.
        1 => idx().prop_map(Rep::SizeUpdate),
    ]
}

fn model_block() -> impl Strategy<Value = Vec<Rep<Idx>>> {
    (
        vec(idx().prop_map(Rep::SizeUpdate), 0..3),
        vec(rep(), 0..12),
    )
        .prop_map(|(mut updates, reps)| {
            updates.extend(reps);
            updates
        })
}

fn encode_reps(reps: &[Rep<usize>]) -> Vec<u8> {
    let mut b = Block::default();
    for r in reps {
        b = match r {
            Rep::Indexed(i) => b.indexed(*i),
            Rep::SizeUpdate(n) => b.size_update(*n),
            Rep::Literal {
                kind,
                name,
                value,
                huffman,
            } => {
                let (prefix, flags) = match kind {
                    Kind::Incremental => (6, 0x40),
                    Kind::Without => (4, 0x00),
                    Kind::Never => (4, 0x10),
                };
                let b = match name {
                    NameRef::Index(i) => b.int(*i, prefix, flags),
                    NameRef::New(n, h) => b.int(0, prefix, flags).str(n, *h),
                };
                b.str(value, *huffman)
            }
        };
    }
    b.0
}

/// RFC 7541 as written: a deque of entries, newest first.
#[derive(Debug, Clone)]
struct Model {
    entries: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    capacity: usize,
    setting: usize,
    /// After the setting dropped below `capacity`: the largest size the
    /// next block's first update may have (RFC 7541 §4.2, the smallest
    /// setting since the last block).
    required: Option<usize>,
    limits: Limits,
}

/// What one block has handed out so far.
#[derive(Default)]
struct BlockState {
    out: Vec<OwnedField>,
    size_error: Option<DecodeError>,
    list_size: usize,
    seen_field: bool,
}

impl Model {
    fn new(limits: Limits) -> Self {
        Self {
            entries: VecDeque::new(),
            size: 0,
            capacity: 4096,
            setting: 4096,
            required: None,
            limits,
        }
    }

    fn set_setting(&mut self, setting: usize) {
        if setting < self.capacity {
            self.required = Some(self.required.map_or(setting, |r| r.min(setting)));
        }
        self.setting = setting;
    }

    fn resolve(&self, i: Idx) -> usize {
        match i {
            Idx::Valid(pick) => pick.index(STATIC_TABLE.len() + self.entries.len()) + 1,
            Idx::Zero => 0,
            Idx::Past(k) => STATIC_TABLE.len() + self.entries.len() + 1 + k,
        }
    }

    /// A size update: valid ones at most what the next update may be;
    /// invalid ones above the setting, or within the setting but above the
    /// smallest setting the update must signal.
    fn resolve_update(&self, i: Idx) -> usize {
        let allowed = self.required.unwrap_or(self.setting).min(self.setting);
        match i {
            Idx::Valid(pick) => pick.index(allowed + 1),
            Idx::Zero => 0,
            Idx::Past(k) if k % 2 == 0 && allowed < self.setting => {
                allowed + 1 + k % (self.setting - allowed)
            }
            Idx::Past(k) => self.setting + 1 + k % 1000,
        }
    }

    fn concrete(&self, r: &Rep<Idx>) -> Rep<usize> {
        match r {
            Rep::Indexed(i) => Rep::Indexed(self.resolve(*i)),
            Rep::SizeUpdate(n) => Rep::SizeUpdate(self.resolve_update(*n)),
            Rep::Literal {
                kind,
                name,
                value,
                huffman,
            } => Rep::Literal {
                kind: *kind,
                name: match name {
                    // A name index of 0 means "literal name" on the wire.
                    NameRef::Index(i) => NameRef::Index(self.resolve(*i).max(1)),
                    NameRef::New(n, h) => NameRef::New(n.clone(), *h),
                },
                value: value.clone(),
                huffman: *huffman,
            },
        }
    }

    fn lookup(&self, i: usize) -> Result<(Vec<u8>, Vec<u8>), DecodeError> {
        let invalid = DecodeError::InvalidIndex(u32::try_from(i).unwrap());
        match i {
            0 => Err(invalid),
            1..=61 => {
                let (n, v) = STATIC_TABLE[i - 1];
                Ok((n.to_vec(), v.to_vec()))
            }
            _ => self.entries.get(i - 62).cloned().ok_or(invalid),
        }
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            let (n, v) = self.entries.pop_back().unwrap();
            self.size -= n.len() + v.len() + 32;
        }
    }

    /// Decodes one block: the representations as sent, the fields handed
    /// out and the result.
    fn decode(
        &mut self,
        reps: &[Rep<Idx>],
    ) -> (Vec<Rep<usize>>, Vec<OwnedField>, Result<(), DecodeError>) {
        let mut sent = Vec::new();
        let mut st = BlockState::default();
        let mut failed = None;
        for r in reps {
            let r = self.concrete(r);
            if failed.is_none()
                && let Err(e) = self.apply(&r, &mut st)
            {
                failed = Some(e);
            }
            sent.push(r);
        }
        let result = match (failed, self.required) {
            (Some(e), _) => Err(e),
            // A block of nothing, or of updates none of which was low enough.
            (None, Some(_)) => Err(DecodeError::TableSizeUpdateMissing),
            (None, None) => st.size_error.map_or(Ok(()), Err),
        };
        (sent, st.out, result)
    }

    fn apply(&mut self, r: &Rep<usize>, st: &mut BlockState) -> Result<(), DecodeError> {
        let (name, value, never_indexed) = match r {
            Rep::SizeUpdate(n) => {
                if st.seen_field {
                    return Err(DecodeError::TableSizeUpdateNotAtStart);
                }
                if *n > self.setting {
                    return Err(DecodeError::TableSizeTooLarge {
                        requested: u32::try_from(*n).unwrap(),
                        max: u32::try_from(self.setting).unwrap(),
                    });
                }
                if let Some(required) = self.required.take()
                    && *n > required
                {
                    return Err(DecodeError::TableSizeUpdateMissing);
                }
                self.capacity = *n;
                self.evict_to(*n);
                return Ok(());
            }
            _ if self.required.is_some() => return Err(DecodeError::TableSizeUpdateMissing),
            Rep::Indexed(i) => {
                let (n, v) = self.lookup(*i)?;
                (n, v, false)
            }
            Rep::Literal {
                kind, name, value, ..
            } => {
                let name = match name {
                    NameRef::Index(i) => self.lookup(*i)?.0,
                    NameRef::New(n, _) => n.clone(),
                };
                if *kind == Kind::Incremental {
                    let entry = name.len() + value.len() + 32;
                    if entry > self.capacity {
                        self.evict_to(0);
                    } else {
                        self.evict_to(self.capacity - entry);
                        self.entries.push_front((name.clone(), value.clone()));
                        self.size += entry;
                    }
                }
                (name, value.clone(), *kind == Kind::Never)
            }
        };
        st.seen_field = true;
        if st.size_error.is_some() {
            return Ok(());
        }
        let field_size = name.len() + value.len() + 32;
        if field_size > self.limits.max_field_size {
            st.size_error = Some(DecodeError::FieldTooLarge);
            return Ok(());
        }
        st.list_size += field_size;
        if st.list_size > self.limits.max_header_list_size {
            st.size_error = Some(DecodeError::HeaderListTooLarge);
            return Ok(());
        }
        st.out.push(OwnedField {
            name,
            value,
            never_indexed,
        });
        Ok(())
    }
}

/// Usually none; sometimes one or two changes between blocks.
fn settings() -> impl Strategy<Value = Vec<usize>> {
    let setting = prop_oneof![3 => 0usize..=600, 1 => 0usize..=4096];
    prop_oneof![3 => Just(Vec::new()), 1 => vec(setting, 1..3)]
}

fn limits() -> impl Strategy<Value = Limits> {
    (
        prop_oneof![Just(1usize << 20), 32usize..200],
        prop_oneof![Just(1usize << 20), 0usize..600],
    )
        .prop_map(|(max_field_size, max_header_list_size)| Limits {
            max_field_size,
            max_header_list_size,
        })
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn decoder_agrees_with_the_model(
        blocks in vec((settings(), model_block()), 1..6),
        limits in limits(),
    ) {
        agrees_with_the_model(Decoder::<4096>::with_limits(limits), &blocks, limits)?;
    }

    /// The same with table storage that starts empty and grows as entries
    /// arrive (what the tokio driver uses): same fields, same table, and
    /// storage never above what the table needs twice over (or the first
    /// growth step).
    #[test]
    fn growing_table_agrees_with_the_model(
        blocks in vec((settings(), model_block()), 1..6),
        limits in limits(),
    ) {
        let dec = Decoder::<4096, GrowingRecords<u8, 4096>>::with_limits(limits);
        prop_assert_eq!(dec.table_storage(), 0);
        agrees_with_the_model(dec, &blocks, limits)?;
    }
}

fn agrees_with_the_model<B: Records<u8>>(
    mut dec: Decoder<4096, B>,
    blocks: &[(Vec<usize>, Vec<Rep<Idx>>)],
    limits: Limits,
) -> Result<(), TestCaseError> {
    let mut model = Model::new(limits);
    let mut scratch = vec![0u8; 1 << 16];
    let mut peak = 0;
    for (settings, reps) in blocks {
        // SETTINGS_HEADER_TABLE_SIZE values acknowledged before this block.
        for &size in settings {
            dec.set_max_table_size(size);
            model.set_setting(size);
            prop_assert_eq!(dec.max_table_size(), size);
        }
        peak = peak.max(dec.table_capacity());
        let (sent, want, want_result) = model.decode(reps);
        let wire = encode_reps(&sent);
        let (got, result) = decode_block(&mut dec, &wire, &mut scratch);
        prop_assert_eq!(&got, &want, "fields of {:?}", sent);
        prop_assert_eq!(result, want_result, "result of {:?}", sent);
        if let Err(e) = result
            && !e.is_size_error()
        {
            // The compression context is gone; the connection ends.
            break;
        }
        prop_assert_eq!(table(&dec), Vec::from(model.entries.clone()));
        prop_assert_eq!(dec.table_size(), model.size);
        prop_assert_eq!(dec.table_capacity(), model.capacity);
        check_table_invariants(&dec);
        // Grown only as far as needed: entries and their records always
        // fit in their RFC size, and each step at most doubles, so storage
        // stays within twice the largest maximum size allowed so far (or
        // the first step).
        peak = peak.max(dec.table_capacity());
        prop_assert!(
            dec.table_storage() <= (2 * peak).clamp(256, 4096),
            "storage {} after a largest maximum size of {}",
            dec.table_storage(),
            peak
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Plausible blocks for the robustness test: resolved against an empty table.

fn plausible_block() -> impl Strategy<Value = Vec<u8>> {
    model_block().prop_map(|reps| {
        let mut model = Model::new(BIG);
        let (sent, _, _) = model.decode(&reps);
        encode_reps(&sent)
    })
}

// ---------------------------------------------------------------------------
// Arbitrary input never panics and never breaks a limit.

/// Plausible blocks with a few bytes corrupted.
fn corrupted_block() -> impl Strategy<Value = Vec<u8>> {
    (plausible_block(), vec((any::<Index>(), any::<u8>()), 0..3)).prop_map(|(mut wire, flips)| {
        if !wire.is_empty() {
            for (at, x) in flips {
                let i = at.index(wire.len());
                wire[i] ^= x;
            }
        }
        wire
    })
}

fn truncated_block() -> impl Strategy<Value = Vec<u8>> {
    (plausible_block(), any::<Index>()).prop_map(|(mut wire, cut)| {
        let keep = cut.index(wire.len() + 1);
        wire.truncate(keep);
        wire
    })
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn arbitrary_blocks_respect_limits(
        blocks in vec(
            (
                option::weighted(0.3, 0usize..=600),
                prop_oneof![
                    vec(any::<u8>(), 0..64),
                    corrupted_block(),
                    truncated_block(),
                ],
            ),
            1..6,
        ),
        max_field_size in 0usize..300,
        max_header_list_size in 0usize..800,
        scratch_len in 0usize..128,
    ) {
        let limits = Limits { max_field_size, max_header_list_size };
        let mut dec = Decoder::<512>::with_limits(limits);
        let mut scratch = vec![0u8; scratch_len];
        for (setting, block) in &blocks {
            if let Some(size) = *setting {
                dec.set_max_table_size(size);
            }
            let mut total = 0usize;
            let mut oversize = None;
            let result = dec.decode(block, &mut scratch, |f: Field<'_>| {
                let size = f.name.len() + f.value.len() + 32;
                if size > max_field_size {
                    oversize = Some(size);
                }
                total += size;
            });
            prop_assert_eq!(oversize, None, "field over max_field_size {}", max_field_size);
            prop_assert!(
                total <= max_header_list_size,
                "list of {} over max_header_list_size {}", total, max_header_list_size
            );
            check_table_invariants(&dec);
            let in_step = match result {
                Ok(()) => true,
                Err(e) => e.is_size_error(),
            };
            if in_step {
                prop_assert!(
                    dec.table_capacity() <= dec.max_table_size(),
                    "capacity {} above the setting {}", dec.table_capacity(), dec.max_table_size()
                );
                prop_assert!(dec.table_size() <= dec.max_table_size());
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Too-small output buffers

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn too_small_buffer_reports_the_length_needed(
        list in vec(field(), 0..12),
        pending_update in any::<bool>(),
        cut in any::<Index>(),
    ) {
        let fields = as_fields(&list);
        let encoder = || {
            let mut e = Encoder::new();
            if pending_update {
                e.set_max_table_size(0);
            }
            e
        };
        let mut big = vec![0u8; 1 << 16];
        let n = encoder().encode(fields.iter().copied(), &mut big).unwrap();
        if n == 0 {
            // Nothing to write: an empty buffer is large enough.
            prop_assert!(list.is_empty() && !pending_update);
            prop_assert_eq!(encoder().encode(fields.iter().copied(), &mut []), Ok(0));
            return Ok(());
        }
        let k = cut.index(n);
        let mut enc = encoder();
        let mut small = vec![0u8; k];
        prop_assert_eq!(
            enc.encode(fields.iter().copied(), &mut small),
            Err(EncodeError::BufferTooSmall { needed: n })
        );
        // The failed call changed nothing: the retry into exactly `n` bytes
        // gives the same block (pending size update included).
        let mut exact = vec![0u8; n];
        prop_assert_eq!(enc.encode(fields.iter().copied(), &mut exact), Ok(n));
        prop_assert_eq!(&exact[..], &big[..n]);
    }
}

// ---------------------------------------------------------------------------
// Huffman

fn huffman_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..300), printable(300)]
}

/// Valid codes damaged a little, and plain noise.
fn huffman_noise() -> impl Strategy<Value = Vec<u8>> {
    let damaged = (huffman_input(), any::<Index>(), any::<u8>(), any::<Index>()).prop_map(
        |(text, at, x, cut)| {
            let mut coded = vec![0u8; huffman::encoded_len(&text)];
            let n = huffman::encode(&text, &mut coded).unwrap();
            coded.truncate(n);
            if !coded.is_empty() {
                let i = at.index(coded.len());
                coded[i] ^= x;
                let keep = cut.index(coded.len() + 1);
                coded.truncate(keep);
            }
            coded
        },
    );
    prop_oneof![damaged, vec(any::<u8>(), 0..40)]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn huffman_round_trip(text in huffman_input()) {
        let len = huffman::encoded_len(&text);
        let mut coded = vec![0u8; len + 8];
        let n = huffman::encode(&text, &mut coded).unwrap();
        prop_assert_eq!(n, len, "encoded_len");
        let coded = &coded[..n];
        let mut out = vec![0u8; text.len() + 8];
        let m = huffman::decode(coded, &mut out).unwrap();
        prop_assert_eq!(&out[..m], &text[..]);
        prop_assert_eq!(huffman::decoded_len(coded), Ok(text.len()));
        if len > 0 {
            let mut small = vec![0u8; len - 1];
            prop_assert_eq!(
                huffman::encode(&text, &mut small),
                Err(EncodeError::BufferTooSmall { needed: len })
            );
        }
        if !text.is_empty() {
            let mut small = vec![0u8; text.len() - 1];
            prop_assert_eq!(huffman::decode(coded, &mut small), Err(DecodeError::FieldTooLarge));
        }
    }

    #[test]
    fn huffman_accepts_only_canonical_codes(src in huffman_noise()) {
        // The code is prefix-free and the padding is fixed, so a string that
        // decodes is exactly the encoding of what it decodes to.
        let mut out = vec![0u8; src.len() * 8 / 5 + 1];
        match huffman::decode(&src, &mut out) {
            Ok(m) => {
                let text = &out[..m];
                let mut again = vec![0u8; huffman::encoded_len(text)];
                let n = huffman::encode(text, &mut again).unwrap();
                prop_assert_eq!(&again[..n], &src[..]);
                prop_assert_eq!(huffman::decoded_len(&src), Ok(m));
            }
            Err(e) => {
                prop_assert!(
                    matches!(e, DecodeError::HuffmanEos | DecodeError::HuffmanPadding),
                    "unexpected {:?}", e
                );
                prop_assert_eq!(huffman::decoded_len(&src), Err(e));
            }
        }
    }
}
