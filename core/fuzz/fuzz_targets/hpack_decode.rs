//! `hpack_decode`: arbitrary header blocks fed to one `Decoder<4096>`.
//!
//! Input layout (so that a seed is a real HPACK stream with a one-byte prefix):
//!
//! - byte 0 picks the limits: low nibble `n` gives `max_field_size =
//!   64 * (n + 1)` (64..=1024), high nibble `m` gives `max_header_list_size =
//!   256 * (m + 1)` (256..=4096);
//! - the rest is a sequence of header blocks, with `0xFF` as escape byte:
//!   `FF FF` is one data byte `0xFF`, `FF 00` ends the current block, and
//!   `FF c` (`c` in `01..=FE`) ends it and then acknowledges a new
//!   SETTINGS_HEADER_TABLE_SIZE of `min((c - 1) * 32, 4096)` before the next
//!   block. Whatever follows the last separator is the last block; a lone `FF`
//!   at the very end is dropped.
//!
//! Checked for every block: each field handed out fits `max_field_size`, the
//! fields of a block together fit `max_header_list_size` (both as RFC 7541
//! section 4.1 sizes them: name + value + 32), the dynamic table never holds
//! more than its current size, and once a block decoded, that size is within
//! the acknowledged maximum. A size error must leave the
//! decoder in step, so decoding goes on with the next block; any other error
//! ends the input, as the HTTP/2 connection would end.
//!
//! A second decoder gets every block in fragments (HEADERS and CONTINUATION
//! as a connection decodes them: `begin_block`, `decode_fragment` per
//! piece, `end_block`), cut every `n` octets where `n` is 1 to 16, picked
//! by the block's first octet. It must hand out the same fields, give the
//! same result and end with the same dynamic table as the first.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::hpack::{DecodeError, Decoder, Limits};

const CAPACITY: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, mut rest)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_field_size: 64 * (usize::from(selector & 0x0f) + 1),
        max_header_list_size: 256 * (usize::from(selector >> 4) + 1),
    };
    let mut decoder = Decoder::<CAPACITY>::with_limits(limits);
    let mut pieces = Decoder::<CAPACITY>::with_limits(limits);
    let mut scratch = [0u8; 1024];
    // As large as the table: every field the peer may index fits.
    let mut buf = [0u8; CAPACITY];
    let mut block = Vec::new();

    loop {
        let (next_table_size, last) = match next_block(&mut rest, &mut block) {
            Some(size) => (size, false),
            None => (None, true),
        };
        let (whole, ok) = decode_block(&mut decoder, &limits, &block, &mut scratch);
        let cut = usize::from(block.first().copied().unwrap_or(0) % 16) + 1;
        assert_eq!(
            decode_pieces(&mut pieces, &block, cut, &mut buf),
            whole,
            "block cut every {cut} octets"
        );
        if ok {
            assert_eq!(table(&pieces), table(&decoder));
        }
        if !ok || last {
            return;
        }
        if let Some(size) = next_table_size {
            // The table shrinks only when the next block's size update
            // arrives (RFC 7541 section 4.2), so nothing else changes yet.
            decoder.set_max_table_size(size);
            pieces.set_max_table_size(size);
            assert_eq!(decoder.max_table_size(), size);
        }
    }
});

/// Moves the next block of `rest` into `block`. `None` when `rest` ran out
/// (the block is the last one), else the table size to acknowledge after it.
fn next_block(rest: &mut &[u8], block: &mut Vec<u8>) -> Option<Option<usize>> {
    block.clear();
    let mut bytes = rest.iter();
    let end = loop {
        match bytes.next() {
            None => break None,
            Some(&0xff) => match bytes.next() {
                None => break None,
                Some(&0xff) => block.push(0xff),
                Some(&0x00) => break Some(None),
                Some(&c) => {
                    break Some(Some((usize::from(c) - 1).saturating_mul(32).min(CAPACITY)));
                }
            },
            Some(&b) => block.push(b),
        }
    };
    *rest = bytes.as_slice();
    end
}

/// The fields handed out for a block, and its result.
type Decoded = (Vec<(Vec<u8>, Vec<u8>, bool)>, Result<(), DecodeError>);

/// Decodes one block and checks the limits. Returns the fields and the
/// result, and false when the decoder is out of step with the (imaginary)
/// encoder and the input should end.
fn decode_block(
    decoder: &mut Decoder<CAPACITY>,
    limits: &Limits,
    block: &[u8],
    scratch: &mut [u8],
) -> (Decoded, bool) {
    let mut list_size = 0usize;
    let mut fields = Vec::new();
    let result = decoder.decode(block, scratch, |field| {
        fields.push((
            field.name.to_vec(),
            field.value.to_vec(),
            field.never_indexed,
        ));
        let size = field.size();
        assert!(
            size <= limits.max_field_size,
            "field of {size} octets over max_field_size {}",
            limits.max_field_size
        );
        list_size += size;
        assert!(
            list_size <= limits.max_header_list_size,
            "header list of {list_size} octets over max_header_list_size {}",
            limits.max_header_list_size
        );
    });
    let (size, capacity, max) = (
        decoder.table_size(),
        decoder.table_capacity(),
        decoder.max_table_size(),
    );
    assert!(
        size <= capacity,
        "dynamic table of {size} octets over its size {capacity}"
    );
    assert!(
        max <= CAPACITY,
        "maximum table size {max} over the storage {CAPACITY}"
    );
    if result.is_ok() || result.is_err_and(|e| e.is_size_error()) {
        // A block that decoded has applied every required size update.
        assert!(
            capacity <= max,
            "table size {capacity} over the acknowledged {max}"
        );
    }
    let ok = match result {
        Ok(()) => true,
        Err(err) => err.is_size_error(),
    };
    ((fields, result), ok)
}

/// Decodes one block in pieces of `cut` octets.
fn decode_pieces(
    decoder: &mut Decoder<CAPACITY>,
    block: &[u8],
    cut: usize,
    buf: &mut [u8],
) -> Decoded {
    let mut fields = Vec::new();
    decoder.begin_block();
    for piece in block.chunks(cut) {
        let r = decoder.decode_fragment(piece, buf, |field| {
            fields.push((
                field.name.to_vec(),
                field.value.to_vec(),
                field.never_indexed,
            ));
        });
        if let Err(e) = r {
            return (fields, Err(e));
        }
    }
    (fields, decoder.end_block())
}

/// The dynamic table, newest entry first.
fn table(decoder: &Decoder<CAPACITY>) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..decoder.table_len())
        .filter_map(|i| decoder.table_entry(i))
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect()
}
