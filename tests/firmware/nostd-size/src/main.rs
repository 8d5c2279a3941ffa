//! Size proof for `mcpwire-core` on a Cortex-M4F (`thumbv7em-none-eabihf`).
//!
//! No global allocator is linked: if the core ever reached for `alloc`, this
//! firmware would fail to link, and `scripts/test.sh` also checks the symbol
//! table for allocator entry points. The figures it prints (`llvm-size` of
//! the ELF, flash bytes of the `hpack` symbols) are the HPACK codec's cost on
//! a microcontroller, with and without the `huffman-fast` feature.
//!
//! `main` encodes and decodes one typical MCP-over-gRPC request header block
//! with caller-owned buffers only. `black_box` keeps every input opaque and
//! every output used, so that LTO cannot fold the codec away. With the
//! `baseline` feature it only sleeps: that build is the runtime alone (vector
//! table, reset handler), which the size report subtracts.

#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m_rt::entry;
use mcpwire_core::hpack::{Decoder, Encoder, Field, Limits};
use panic_halt as _;

/// Request headers of a `tools/call` sent through the gRPC tunnel binding.
const REQUEST: [(&[u8], &[u8]); 11] = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", b"/mcp.zig.transport.v1.Mcp/Call"),
    (b":authority", b"sensor-hub.local:50051"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
    (b"grpc-timeout", b"5S"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"read_temperature"),
    (b"user-agent", b"mcpwire/0.1 (thumbv7em)"),
];

/// One HTTP/2 server connection with 4 concurrent streams, its 4 KiB HPACK
/// table and 2 KiB frame buffers fits the 12 KiB budget on this target
/// (checked when this firmware compiles).
const SMALL_SERVER_BYTES: usize =
    core::mem::size_of::<mcpwire_core::h2::Connection<4, 4096, 2048, 64>>();
const _: () = assert!(
    SMALL_SERVER_BYTES <= 12 * 1024,
    "4-stream connection above 12 KiB"
);

/// A bearer token is sent as never-indexed, as RFC 7541 section 7.1.3 asks.
const AUTHORIZATION: (&[u8], &[u8]) = (b"authorization", b"Bearer 8f2c1e0d9b7a");

#[entry]
fn main() -> ! {
    if cfg!(feature = "baseline") {
        loop {
            cortex_m::asm::wfi();
        }
    }
    run_codec()
}

fn run_codec() -> ! {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::<4096>::with_limits(Limits {
        max_field_size: 1024,
        max_header_list_size: 4096,
    });
    let mut block = [0u8; 512];
    let mut scratch = [0u8; 1024];

    loop {
        let request = black_box(REQUEST);
        let (auth_name, auth_value) = black_box(AUTHORIZATION);
        let fields = request
            .iter()
            .map(|&(name, value)| Field::new(name, value))
            .chain(core::iter::once(Field::sensitive(auth_name, auth_value)));

        let len = match encoder.encode(fields, &mut block) {
            Ok(len) => len,
            Err(err) => {
                black_box(err);
                continue;
            }
        };

        let mut checksum = 0usize;
        let wire = black_box(block.get(..len).unwrap_or_default());
        let decoded = decoder.decode(wire, &mut scratch, |field| {
            checksum = checksum.wrapping_mul(31).wrapping_add(
                field.name.len() + field.value.len() + usize::from(field.never_indexed),
            );
        });
        black_box((decoded.is_ok(), checksum, decoder.table_size()));
    }
}
