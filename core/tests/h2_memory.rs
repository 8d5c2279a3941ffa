//! What a connection costs: `core::mem::size_of` is the whole of it (no
//! allocation), so it is measured here and broken down by const generic.
//!
//! Figures differ between targets (a 64-bit host aligns and sizes `usize`
//! fields differently from `thumbv7em`), so the bounds are stated in terms
//! that hold on both: each byte of `BUF` costs three bytes (block, header
//! list, transmit buffers), each byte of `TABLE` one, each remembered reset
//! four, each stream slot a bounded amount, plus a fixed part.
//! `cargo test --test h2_memory -- --nocapture` prints the table for README.
// A panic in a test is a failed test, not peer input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use core::mem::size_of;

use mcpwire_core::h2::Connection;

/// `size_of` of a connection with the given generics.
macro_rules! size {
    ($s:literal, $t:literal, $b:literal, $r:literal) => {
        size_of::<Connection<$s, $t, $b, $r>>()
    };
}

#[test]
fn connection_size_of() {
    let rows = [
        ("Connection<4, 4096, 2048, 64>", size!(4, 4096, 2048, 64)),
        (
            "Connection<16, 4096, 16384, 64>",
            size!(16, 4096, 16384, 64),
        ),
        (
            "Connection<100, 4096, 16384, 64>",
            size!(100, 4096, 16384, 64),
        ),
        ("Connection<16, 4096, 4096, 64>", size!(16, 4096, 4096, 64)),
        (
            "Connection (defaults: 16, 4096, 16384, 64)",
            size_of::<Connection>(),
        ),
    ];
    println!("target pointer width {} bits", usize::BITS);
    for (name, bytes) in rows {
        println!(
            "{name:<44} {bytes:>7} bytes ({:.1} KiB)",
            bytes as f64 / 1024.0
        );
    }

    // The firmware configuration fits in 12 KiB and the 56 octets of the
    // idle and handshake timeouts (two in the settings, the deadline) and
    // the early-response discard budget.
    assert!(
        size!(4, 4096, 2048, 64) <= 12 * 1024 + 56,
        "Connection<4, 4096, 2048, 64> is {} bytes",
        size!(4, 4096, 2048, 64)
    );

    // Each BUF byte costs three bytes: received block, header list, transmit.
    let per_buf = (size!(4, 4096, 3072, 64) - size!(4, 4096, 2048, 64)) as f64 / 1024.0;
    println!("per BUF byte: {per_buf}");
    assert_eq!(per_buf, 3.0);

    // Each TABLE byte costs one byte (the HPACK decoder's table storage).
    let per_table = (size!(4, 5120, 2048, 64) - size!(4, 4096, 2048, 64)) as f64 / 1024.0;
    println!("per TABLE byte: {per_table}");
    assert_eq!(per_table, 1.0);

    // Each remembered reset is one stream id.
    let per_reset = (size!(4, 4096, 2048, 128) - size!(4, 4096, 2048, 64)) / 64;
    println!("per remembered reset: {per_reset}");
    assert_eq!(per_reset, 4);

    // Each stream slot: its state, windows and counters.
    let per_stream = (size!(20, 4096, 2048, 64) - size!(4, 4096, 2048, 64)) / 16;
    println!("per stream slot: {per_stream}");
    assert!(per_stream <= 128, "a stream slot is {per_stream} bytes");

    // What is left does not depend on the generics.
    let fixed = size!(4, 4096, 2048, 64) - 3 * 2048 - 4096 - 4 * 64 - 4 * per_stream;
    println!("fixed part: {fixed}");
    assert!(fixed <= 1536, "the fixed part is {fixed} bytes");
    assert_eq!(
        size!(100, 4096, 16384, 64),
        fixed + 3 * 16384 + 4096 + 4 * 64 + 100 * per_stream,
        "the cost is the sum of its parts"
    );
}
