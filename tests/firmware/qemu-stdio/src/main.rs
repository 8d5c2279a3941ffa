//! An MCP server firmware for QEMU's `mps2-an386` (Cortex-M4): the device
//! tools of `mcpwire-device-tools` (`read_sensor`, `toggle_output`,
//! `slow_task` with progress and cancellation) served by `mcpwire-embassy`
//! over the stdio binding (newline-delimited JSON-RPC, MCP §6) on UART0.
//!
//! With UART0 on QEMU's stdin and stdout, a host launches QEMU as if it
//! were a local stdio server:
//!
//! ```text
//! qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nodefaults -display none \
//!     -monitor none -serial stdio -semihosting-config enable=on,target=native \
//!     -kernel target/thumbv7em-none-eabihf/release/mcpwire-qemu-stdio
//! ```
//!
//! stdout then carries only what the firmware writes to the UART (no
//! monitor, no banner); the firmware's start line and a panic's message go
//! to stderr through semihosting, and a panic ends QEMU with status 1. The
//! UART has no end of input: at the end of its stdin QEMU keeps running,
//! and the client terminates it (as the MCP SDKs do with a server that
//! does not exit).
//!
//! Tasks: one serial task (the stdio engine over [`uart::Uart`]) and
//! [`HANDLERS`] handler tasks, in a thread-mode loop that sleeps with WFI
//! (QEMU's WFE does not sleep, so embassy's cortex-m executor would spin);
//! time is SysTick's ([`time`]). Everything is static; nothing is
//! allocated. `scripts/qemu-stdio.sh` builds it, prints its flash and
//! static RAM, and runs the SDK clients against it.

#![no_std]
#![no_main]

mod time;
mod uart;

use core::sync::atomic::{AtomicBool, Ordering};

use cortex_m_rt::{ExceptionFrame, entry, exception};
use cortex_m_semihosting::{debug, heprintln};
use embassy_executor::raw;
use mcpwire_core::mcp::registry::ServerInfo;
use mcpwire_device_tools::{DeviceTools, SimBoard};
use mcpwire_embassy::{Config, Server, SlabStore};
use static_cell::StaticCell;

use uart::Uart;

/// Tool calls running at once: one handler task each. A call beyond them
/// is answered "server busy".
const HANDLERS: usize = 2;
/// Per handler: the `arguments` of a call and the result a tool writes.
const ARGS: usize = 256;
const RESULT: usize = 512;
/// Requests in progress at once on the link (the engine's calls)...
const CALLS: usize = 2;
/// ...each line in a buffer this long, the longest line accepted (the
/// `tools/list` answer of the three tools is 949 octets; room for the
/// SDKs' longer ids and `_meta`).
const LINE: usize = 2048;
type Store = SlabStore<LINE, CALLS>;
/// Octets staged between the UART and the engine (half in, half out).
const STAGING: usize = 256;

type Mcp = Server<'static, DeviceTools<'static, SimBoard>, HANDLERS, ARGS, RESULT>;

/// QEMU has no sensor: a fixed 21.5 °C, and the output is a flag.
static BOARD: SimBoard = SimBoard::new(21_500);
static SERVER: StaticCell<Mcp> = StaticCell::new();
static EXECUTOR: StaticCell<raw::Executor> = StaticCell::new();

/// Set by the executor when a task is woken: the loop polls again instead
/// of sleeping.
static WORK: AtomicBool = AtomicBool::new(false);

/// Serves the stdio binding on UART0.
#[embassy_executor::task]
async fn serial_task(server: &'static Mcp, mut uart: Uart) -> ! {
    let mut staging = [0u8; STAGING];
    loop {
        // The UART has no end of input and its writes cannot fail: the
        // engine only returns on a bug; serve again on a fresh engine.
        let ended = server
            .serve_stdio::<Store, CALLS, _>(&mut uart, &mut staging)
            .await;
        heprintln!("mcpwire-qemu-stdio: the serial link ended: {:?}", ended);
    }
}

/// Runs the tool calls handed to one handler slot.
#[embassy_executor::task(pool_size = HANDLERS)]
async fn handler_task(server: &'static Mcp) -> ! {
    server.run_handler().await
}

#[entry]
fn main() -> ! {
    let Some(core) = cortex_m::Peripherals::take() else {
        fail("the core peripherals are taken")
    };
    let Some(uart) = Uart::take() else {
        fail("UART0 is taken")
    };
    let info = ServerInfo {
        name: mcpwire_device_tools::SERVER_NAME,
        version: mcpwire_device_tools::SERVER_VERSION,
        instructions: Some(mcpwire_device_tools::INSTRUCTIONS),
    };
    let Ok(server) = Mcp::new(info, mcpwire_device_tools::tools(&BOARD), Config::default()) else {
        fail("a device tool's schema is invalid")
    };
    let server: &'static Mcp = SERVER.init(server);

    let executor: &'static raw::Executor = EXECUTOR.init(raw::Executor::new(core::ptr::null_mut()));
    let spawner = executor.spawner();
    for _ in 0..HANDLERS {
        match handler_task(server) {
            Ok(task) => spawner.spawn(task),
            Err(_) => fail("handler task pool"),
        }
    }
    match serial_task(server, uart) {
        Ok(task) => spawner.spawn(task),
        Err(_) => fail("serial task pool"),
    }
    time::start(core.SYST);
    heprintln!("mcpwire-qemu-stdio: MCP (stdio binding) on UART0");

    loop {
        WORK.store(false, Ordering::SeqCst);
        // SAFETY: `poll` runs here only, in thread mode, never from the
        // pender (which only sets `WORK`).
        #[allow(unsafe_code)]
        unsafe {
            executor.poll()
        };
        // With interrupts masked, a wake between the check and WFI still
        // ends WFI (a pending interrupt does, masked or not); it is taken
        // when the mask lifts.
        cortex_m::interrupt::free(|_| {
            if !WORK.load(Ordering::SeqCst) {
                cortex_m::asm::wfi();
            }
        });
    }
}

/// The executor's pender: a task was woken (from a task or an interrupt).
#[allow(unsafe_code)]
#[unsafe(export_name = "__pender")]
fn pender(_context: *mut ()) {
    WORK.store(true, Ordering::SeqCst);
}

/// Every interrupt line lands here (no device crate): UART0's go to its
/// driver.
#[allow(unsafe_code)]
#[exception]
unsafe fn DefaultHandler(irq: i16) {
    uart::on_interrupt(irq);
}

#[allow(unsafe_code)]
#[exception]
unsafe fn HardFault(frame: &ExceptionFrame) -> ! {
    heprintln!("mcpwire-qemu-stdio: hard fault at {:#010x}", frame.pc());
    exit_failure()
}

/// Ends QEMU with status 1 after `why` on stderr.
fn fail(why: &str) -> ! {
    heprintln!("mcpwire-qemu-stdio: {}", why);
    exit_failure()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    heprintln!("mcpwire-qemu-stdio: {}", info);
    exit_failure()
}

/// Ends QEMU with status 1 (semihosting), so that the client sees the
/// server exit instead of a silent board.
fn exit_failure() -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
