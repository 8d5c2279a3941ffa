//! The simulation scenarios of `mcpwire-core` on a Cortex-M4 under QEMU
//! (`qemu-system-arm -machine mps2-an386`), with no allocator.
//!
//! A client `Connection` talks to a server `Connection`, then the core's
//! tunnel client engine ([`Client`](mcpwire_core::mcp::client::Client)) to
//! its server engine ([`Server`](mcpwire_core::mcp::server::Server)),
//! through in-memory byte pipes whose contents are cut into pieces of
//! random sizes (a seeded generator, down to one byte): large bodies
//! through small windows, interleaved streams, a reset mid-body,
//! `tools/list`, a tool call with progress notifications, a cancelled call,
//! an error before the handler.
//! Each scenario prints one line through semihosting; QEMU exits with
//! status 0 only if all passed (a panic exits with 1, `panic-semihosting`).
//!
//! Before each scenario the free stack is painted, after it scanned
//! ([`stack`]): the deepest use is the scenario's stack high-water mark,
//! printed with the sizes of the connection and engine types. Everything a
//! scenario uses, connections and pipes included, lives in its frames, so
//! the mark counts that state and the temporaries of building it by value.
//! Two more figures leave the state out: the deepest run of the
//! simulation loop below `Pair::run`, and the deepest single call into the
//! core (each wrapped in [`stack::measured`]), with its name.
//!
//! `cargo run --release` in this directory boots it in QEMU (the runner of
//! `.cargo/config.toml`); `scripts/test.sh qemu` builds and runs it in CI.

#![no_std]
#![no_main]

mod h2;
mod mcp;
mod sim;
mod stack;

use core::mem::size_of;

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use panic_semihosting as _;

use sim::Outcome;

/// A scenario: a name and the function that runs it.
type Scenario = (&'static str, fn() -> Outcome);

/// The scenarios, in the order they run.
const SCENARIOS: [Scenario; 6] = [
    ("h2 flow control", h2::flow_control),
    ("h2 interleaved + reset", h2::interleaved_and_reset),
    ("mcp tools/list", mcp::tools_list),
    ("mcp progress", mcp::progress),
    ("mcp cancel", mcp::cancel),
    ("mcp error before handler", mcp::error_before_handler),
];

#[entry]
fn main() -> ! {
    hprintln!("mcpwire-core on a Cortex-M4 (qemu mps2-an386), no allocator");
    let mut failed = 0;
    let mut high_water = 0;
    let mut stack_start = 0;
    let mut round_depth = 0;
    let mut deepest_call = (0, "");
    for (name, scenario) in SCENARIOS {
        // Paint first (what the previous scenario left is folded into the
        // old mark), then start a fresh mark.
        stack::repaint();
        stack::take_deepest();
        let outcome = run(scenario);
        stack::scan();
        let (deepest, top) = stack::take_deepest();
        let used = top - deepest;
        let rounds = sim::take_round_depth();
        let (call_depth, call) = stack::take_deepest_call();
        if call_depth > deepest_call.0 {
            deepest_call = (call_depth, call);
        }
        high_water = high_water.max(used);
        round_depth = round_depth.max(rounds);
        stack_start = top;
        match outcome {
            Ok(summary) => hprintln!(
                "ok   {}: {} [stack {} B; run loop {} B; core call {} B, {}]",
                name,
                summary.as_str(),
                used,
                rounds,
                call_depth,
                call
            ),
            Err(sim::Failed) => {
                failed += 1;
                let why = sim::take_failure();
                hprintln!(
                    "FAIL {}: {} [stack {} B; run loop {} B; core call {} B, {}]",
                    name,
                    why.as_str(),
                    used,
                    rounds,
                    call_depth,
                    call
                );
            }
        }
    }
    hprintln!(
        "stack high-water mark: {} bytes (below _stack_start {:#x})",
        high_water,
        stack_start
    );
    hprintln!(
        "deepest run loop (below `Pair::run`, the pair excluded): {} bytes; deepest single core call: {} bytes ({})",
        round_depth,
        deepest_call.0,
        deepest_call.1
    );
    hprintln!(
        "sizes: h2 Connection<4, 4096, 2048, 16> {} B; mcp Server<SlabStore<{}, {}>, 4, 4096, 2048> {} B (its store {} B)",
        size_of::<h2::Conn>(),
        mcp::SLAB_SIZE,
        mcp::SLAB_COUNT,
        size_of::<mcp::Server>(),
        size_of::<mcp::Store>()
    );
    hprintln!(
        "sizes: mcp Client<SlabStore<{}, {}>, 4, 4096, 2048> {} B (its store {} B)",
        mcp::SLAB_SIZE,
        mcp::SLAB_COUNT,
        size_of::<mcp::Client>(),
        size_of::<mcp::Store>()
    );
    hprintln!(
        "sizes of the pairs (both ends, pipes, applications): h2 {} B, mcp {} B",
        size_of::<h2::H2Pair>(),
        size_of::<mcp::McpPair>()
    );
    if failed == 0 {
        hprintln!("all {} scenarios passed", SCENARIOS.len());
        debug::exit(debug::EXIT_SUCCESS);
    } else {
        hprintln!("{} of {} scenarios failed", failed, SCENARIOS.len());
        debug::exit(debug::EXIT_FAILURE);
    }
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Runs a scenario in a frame of its own, below the caller's painted mark.
#[inline(never)]
fn run(scenario: fn() -> Outcome) -> Outcome {
    scenario()
}
