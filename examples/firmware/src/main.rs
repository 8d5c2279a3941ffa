//! An MCP server firmware for the **NUCLEO-F767ZI** (STM32F767ZI, Cortex-M7,
//! 2 MiB flash, 512 KiB RAM, LAN8742A Ethernet PHY over RMII), built for
//! `thumbv7em-none-eabihf`.
//!
//! It serves MCP over the gRPC tunnel binding (h2c,
//! `/mcp.zig.transport.v1.Mcp/Call`) on TCP port 50051, two connections at
//! once, with the device tools of `mcpwire-device-tools`. (Streamable HTTP
//! on the same port is `mcpwire-embassy`'s feature `http`; with both
//! bindings this firmware does not fit its 128 KiB flash budget, so it
//! ships the gRPC tunnel; see its `Cargo.toml`.)
//!
//! - `read_sensor`: the die temperature from the internal sensor (ADC1);
//! - `toggle_output`: the green user LED LD1 (PB0);
//! - `slow_task`: steps with a progress notification after each; stops when
//!   the client cancels the call or its deadline passes.
//!
//! The address comes from DHCP. Flash it with `cargo run --release` (the
//! probe-rs runner of `.cargo/config.toml`); build with `--features defmt`
//! to see the log over RTT, the address included.
//!
//! **No authentication.** This firmware takes any caller that reaches port
//! 50051: it has no bearer tokens (`mcpwire-embassy`'s feature `auth`,
//! `Config::tokens`, is left out to stay within 128 KiB of flash), so
//! anyone on the network can call every tool, `toggle_output` (which
//! drives the board's output) included, and the log says so at boot. Put
//! the board on a network you trust (a lab segment, a VLAN, behind a
//! firewall) until tokens fit the budget. The same application on the host
//! (`examples/device-host`) requires a token by default.
//!
//! Tasks: the network stack, [`CONNECTIONS`] connection tasks (one TCP
//! socket and one MCP engine each) and [`HANDLERS`] handler tasks (one tool
//! call at a time each), all in one thread-mode executor. Everything is
//! static (task futures, socket buffers, engines, the Ethernet DMA rings,
//! the network stack); nothing is allocated. The sizes are the constants
//! below; `./scripts/test.sh firmware` prints what they come to.

#![no_std]
#![no_main]

#[macro_use]
mod log;
mod board;

use embassy_executor::Spawner;
use embassy_net::{Stack, StackResources};
use embassy_stm32::eth::{Ethernet, GenericPhy, PacketQueue, Sma};
use embassy_stm32::peripherals::{ETH, ETH_SMA};
use embassy_stm32::rng::Rng;
use embassy_stm32::{bind_interrupts, eth, peripherals, rng};
use mcpwire_core::mcp::registry::ServerInfo;
use mcpwire_device_tools::{Board as _, DeviceTools};
use mcpwire_embassy::{Config, Server, SlabStore};
use static_cell::{ConstStaticCell, StaticCell};

#[cfg(not(feature = "defmt"))]
use panic_halt as _;
#[cfg(feature = "defmt")]
use {defmt_rtt as _, panic_probe as _};

use crate::board::Nucleo;

/// The MCP port (gRPC's usual one).
const PORT: u16 = 50051;
/// MCP connections served at once: one connection task, TCP socket and
/// engine each. One more is refused (TCP RST: no socket listens).
const CONNECTIONS: usize = 2;
/// Tool calls running at once, over all connections: one handler task
/// each. A call beyond them is answered "server busy" (-32603).
const HANDLERS: usize = 2;

/// TCP receive and send buffers of each connection (the receive buffer is
/// the TCP window the board advertises; the last
/// `mcpwire_embassy::TCP_STAGING` octets of the send buffer stage the
/// octets between the socket and the engine).
const TCP_RX: usize = 1024;
const TCP_TX: usize = 1024;

/// Per connection, the engine: calls (HTTP/2 streams) open at once...
const STREAMS: usize = 4;
/// ...the HPACK decoding table (4096, the size every peer may use before it
/// has our SETTINGS)...
const HPACK_TABLE: usize = 4096;
/// ...HTTP/2 buffers (three: a request's header block, its decoded header
/// list, frames waiting for the socket; grpc-js and our tokio client need
/// 768, the rest is room for longer heads such as a bearer token)...
const H2_BUF: usize = 1024;
/// ...and call buffers: each holds a call's request head, its request and
/// then each response message (`tools/list` of the three tools needs a
/// 1536-octet buffer). A third call at once on a connection is refused
/// with REFUSED_STREAM (grpc-js reports UNAVAILABLE).
const CALL_BUFFER: usize = 2048;
const CALL_BUFFERS: usize = 2;

/// Per handler: the `arguments` of a call and the result a tool writes.
const ARGS: usize = 256;
const RESULT: usize = 512;

/// Ethernet DMA buffers (1.5 KiB each): frames in flight each way.
const ETH_TX: usize = 2;
const ETH_RX: usize = 3;
/// A locally administered, unicast MAC address. Give each board its own.
const MAC: [u8; 6] = [0x02, 0x00, 0x6d, 0x63, 0x70, 0x77];

bind_interrupts!(struct Irqs {
    ETH => eth::InterruptHandler;
    RNG => rng::InterruptHandler<peripherals::RNG>;
});

type Device = Ethernet<'static, ETH, GenericPhy<Sma<'static, ETH_SMA>>>;
type Mcp = Server<'static, DeviceTools<'static, Nucleo>, HANDLERS, ARGS, RESULT>;
type Store = SlabStore<CALL_BUFFER, CALL_BUFFERS>;

// Built at compile time (in .bss, never copied through the stack).
static PACKETS: ConstStaticCell<PacketQueue<ETH_TX, ETH_RX>> =
    ConstStaticCell::new(PacketQueue::new());
// One socket per connection and one for DHCP.
static RESOURCES: ConstStaticCell<StackResources<{ CONNECTIONS + 1 }>> =
    ConstStaticCell::new(StackResources::new());
static BOARD: StaticCell<Nucleo> = StaticCell::new();
static SERVER: StaticCell<Mcp> = StaticCell::new();

#[embassy_executor::task]
async fn net_task(mut runner: embassy_net::Runner<'static, Device>) -> ! {
    runner.run().await
}

/// One connection at a time on [`PORT`]: accept, serve until it ends,
/// accept again.
#[embassy_executor::task(pool_size = CONNECTIONS)]
async fn connection_task(stack: Stack<'static>, server: &'static Mcp) -> ! {
    let mut rx = [0u8; TCP_RX];
    let mut tx = [0u8; TCP_TX];
    server
        .run_connection::<Store, STREAMS, HPACK_TABLE, H2_BUF>(stack, &mut rx, &mut tx)
        .await
}

/// Runs the tool calls handed to one handler slot.
#[embassy_executor::task(pool_size = HANDLERS)]
async fn handler_task(server: &'static Mcp) -> ! {
    server.run_handler().await
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    let p = embassy_stm32::init(board::clocks());
    info!("mcpwire firmware: NUCLEO-F767ZI");

    let mut rng = Rng::new(p.RNG, Irqs);
    let mut seed = [0u8; 8];
    rng.fill_bytes(&mut seed);
    let seed = u64::from_le_bytes(seed);

    // RMII on the NUCLEO-144: REF_CLK PA1, CRS_DV PA7, RXD0 PC4, RXD1 PC5,
    // TXD0 PG13, TXD1 PB13, TX_EN PG11; MDIO PA2, MDC PC1. GenericPhy
    // finds the LAN8742A's address by itself.
    let device = Ethernet::new(
        PACKETS.take(),
        p.ETH,
        Irqs,
        p.PA1,
        p.PA7,
        p.PC4,
        p.PC5,
        p.PG13,
        p.PB13,
        p.PG11,
        MAC,
        p.ETH_SMA,
        p.PA2,
        p.PC1,
    );
    let config = embassy_net::Config::dhcpv4(Default::default());
    let (stack, runner) = embassy_net::new(device, config, RESOURCES.take(), seed);
    spawner.spawn(net_task(runner).expect("one net task"));

    let board: &'static Nucleo = BOARD.init(Nucleo::new(p.PB0, p.ADC1));
    info!("die temperature {} mdegC", board.temperature_millicelsius());

    let info = ServerInfo {
        name: mcpwire_device_tools::SERVER_NAME,
        version: mcpwire_device_tools::SERVER_VERSION,
        instructions: Some(mcpwire_device_tools::INSTRUCTIONS),
    };
    let config = Config {
        port: PORT,
        ..Config::default()
    };
    let server = Mcp::new(info, mcpwire_device_tools::tools(board), config)
        .expect("the device tools' schemas are valid");
    let server: &'static Mcp = SERVER.init(server);

    stack.wait_config_up().await;
    if let Some(config) = stack.config_v4() {
        info!("MCP on {}:{}", config.address.address(), PORT);
    }
    // No tokens in this build: say so where whoever runs it looks.
    warn!("no authentication: anyone on the network can call the tools, toggle_output included");
    for _ in 0..HANDLERS {
        spawner.spawn(handler_task(server).expect("handler task pool"));
    }
    for _ in 0..CONNECTIONS {
        spawner.spawn(connection_task(stack, server).expect("connection task pool"));
    }
}
