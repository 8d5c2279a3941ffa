//! The device firmware's application, run on the host: the device tools
//! (`mcpwire-device-tools`) served by `mcpwire-embassy` exactly as on the
//! board, on embassy's std executor and clock, with embassy-net on a Linux
//! TAP device instead of an Ethernet MAC. The board is simulated
//! ([`SimBoard`]: an injected temperature, a flag for the output).
//!
//! ```text
//! mcpwire-device-host [--tap NAME] [--address A.B.C.D/LEN] [--temperature MILLICELSIUS] [--token TOKEN] [-v]
//! ```
//!
//! Defaults: `--tap tap0 --address 10.77.0.2/24 --temperature 21500`, no
//! token. With `--token`, every call must carry it as a bearer token (the
//! device's `Config::tokens`, principal `host`). The
//! TAP device must exist and be up (the caller makes it, with the host
//! side's address in the same subnet; `scripts/interop-embassy-host.sh`
//! does it inside a network namespace). Prints `listening on ADDR:PORT`
//! once the stack is configured; stops on SIGTERM or SIGINT.

use std::net::Ipv4Addr;
use std::process::exit;

use embassy_executor::Spawner;
use embassy_net::{Stack, StackResources};
use mcpwire_core::mcp::auth::StaticTokens;
use mcpwire_device_tools::SimBoard;
use mcpwire_device_tools::app::{self, DeviceServer};
use net::net_task;
use static_cell::StaticCell;

mod net;

const USAGE: &str = "usage: mcpwire-device-host [--tap NAME] [--address A.B.C.D/LEN] [--temperature MILLICELSIUS] [--token TOKEN] [-v]";

static BOARD: SimBoard = SimBoard::new(21_500);
/// One TCP socket per connection task, and a spare.
static RESOURCES: StaticCell<StackResources<{ app::CONNECTIONS + 1 }>> = StaticCell::new();
static SERVER: StaticCell<DeviceServer<SimBoard>> = StaticCell::new();

#[embassy_executor::task(pool_size = app::CONNECTIONS)]
async fn mcp_connection(stack: Stack<'static>, server: &'static DeviceServer<SimBoard>) -> ! {
    app::connection(stack, server).await
}

#[embassy_executor::task(pool_size = app::HANDLERS)]
async fn mcp_handler(server: &'static DeviceServer<SimBoard>) -> ! {
    server.run_handler().await
}

struct Args {
    tap: String,
    address: Ipv4Addr,
    prefix: u8,
    temperature: i32,
    token: Option<String>,
    verbose: bool,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        tap: "tap0".into(),
        address: Ipv4Addr::new(10, 77, 0, 2),
        prefix: 24,
        temperature: 21_500,
        token: None,
        verbose: false,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--tap" => out.tap = value()?,
            "--address" => (out.address, out.prefix) = net::parse_address(&value()?)?,
            "--temperature" => {
                let v = value()?;
                out.temperature = v.parse().map_err(|_| format!("bad temperature {v}"))?;
            }
            "--token" => out.token = Some(value()?),
            "-v" | "--verbose" => out.verbose = true,
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    Ok(out)
}

/// Log lines of the driver (feature `log`) to stderr.
struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        eprintln!("{:5} {}", record.level(), record.args());
    }

    fn flush(&self) {}
}

static LOGGER: Stderr = Stderr;

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            eprintln!("{USAGE}");
            exit(2);
        }
    };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(if args.verbose {
            log::LevelFilter::Debug
        } else {
            log::LevelFilter::Warn
        });
    }
    BOARD.set_temperature(args.temperature);

    let device = net::open_tap("mcpwire-device-host", &args.tap);
    let (stack, runner) = net::stack(
        device,
        args.address,
        args.prefix,
        RESOURCES.init(StackResources::new()),
        1,
    );

    // The tokens live as long as the program, as a firmware's in flash.
    let tokens = args.token.map(|t| {
        let pairs: &'static [(&'static str, &'static str)] =
            Box::leak(Box::new([(&*Box::leak(t.into_boxed_str()), "host")]));
        StaticTokens::new(pairs)
    });
    let server = match app::server_with_tokens(&BOARD, tokens) {
        Ok(s) => SERVER.init(s),
        Err(e) => {
            eprintln!("mcpwire-device-host: invalid tools: {e:?}");
            exit(1);
        }
    };
    let spawned = net_task(runner).map(|t| spawner.spawn(t)).and_then(|()| {
        for _ in 0..app::CONNECTIONS {
            spawner.spawn(mcp_connection(stack, server)?);
        }
        for _ in 0..app::HANDLERS {
            spawner.spawn(mcp_handler(server)?);
        }
        Ok(())
    });
    if let Err(e) = spawned {
        eprintln!("mcpwire-device-host: {e}");
        exit(1);
    }
    stack.wait_config_up().await;
    println!(
        "listening on {}:{} (tap {}, {} connections, {} handlers)",
        args.address,
        server.config().port,
        args.tap,
        app::CONNECTIONS,
        app::HANDLERS
    );
}
