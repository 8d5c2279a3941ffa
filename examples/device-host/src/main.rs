//! The device firmware's application, run on the host: the device tools
//! (`mcpwire-device-tools`) served by `mcpwire-embassy` exactly as on the
//! board, on embassy's std executor and clock, with embassy-net on a Linux
//! TAP device instead of an Ethernet MAC. The board is simulated
//! ([`SimBoard`]: an injected temperature, a flag for the output).
//!
//! ```text
//! mcpwire-device-host [--tap NAME] [--address A.B.C.D/LEN] [--temperature MILLICELSIUS] [--token-file FILE | --no-auth] [-v]
//! ```
//!
//! Defaults: `--tap tap0 --address 10.77.0.2/24 --temperature 21500`.
//! Every call must carry a bearer token (the device's `Config::tokens`):
//! the one in the environment variable `MCPWIRE_DEVICE_TOKEN` (principal
//! `host`), or one of `--token-file FILE` (one token a line, optionally
//! followed by a principal name; `#` starts a comment). Never on the
//! command line, which the process list shows. Without a token the app
//! does not start, unless `--no-auth` says to let anyone who reaches it
//! call the tools (`toggle_output` included), which it then warns of. The
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

mod auth;
mod net;

const USAGE: &str = "usage: mcpwire-device-host [--tap NAME] [--address A.B.C.D/LEN] [--temperature MILLICELSIUS] [--token-file FILE | --no-auth] [-v]
  a bearer token from MCPWIRE_DEVICE_TOKEN or --token-file FILE (one a line, optionally followed by a principal name);
  --no-auth serves anyone who reaches the device";

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
    auth: auth::Sources,
    verbose: bool,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        tap: "tap0".into(),
        address: Ipv4Addr::new(10, 77, 0, 2),
        prefix: 24,
        temperature: 21_500,
        auth: auth::Sources {
            env: std::env::var(auth::TOKEN_ENV).ok(),
            ..auth::Sources::default()
        },
        verbose: false,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--tap" => {
                out.tap = value()?;
                // Linux's IFNAMSIZ less the NUL; embassy-net-tuntap panics
                // on a longer name.
                if out.tap.len() > 15 {
                    return Err(format!("--tap {}: at most 15 octets", out.tap));
                }
            }
            "--address" => (out.address, out.prefix) = net::parse_address(&value()?)?,
            "--temperature" => {
                let v = value()?;
                out.temperature = v.parse().map_err(|_| format!("bad temperature {v}"))?;
            }
            "--token-file" => out.auth.file = Some(value()?),
            "--no-auth" => out.auth.no_auth = true,
            "--token" => {
                return Err(format!(
                    "--token: a token on the command line is seen in the process list; use {} or --token-file FILE",
                    auth::TOKEN_ENV
                ));
            }
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
    let (args, tokens) =
        match parse(std::env::args().skip(1)).and_then(|a| auth::tokens(&a.auth).map(|t| (a, t))) {
            Ok(a) => a,
            Err(e) => {
                if !e.is_empty() {
                    eprintln!("mcpwire-device-host: {e}");
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
    let tokens = tokens.map(|t| {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let pairs: Vec<(&'static str, &'static str)> =
            t.into_iter().map(|(t, p)| (leak(t), leak(p))).collect();
        StaticTokens::new(Box::leak(pairs.into_boxed_slice()))
    });
    let open = tokens.is_none();
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
    if open {
        eprintln!(
            "mcpwire-device-host: warning: --no-auth: whoever reaches {}:{} calls the device tools, toggle_output included, unauthenticated",
            args.address,
            server.config().port
        );
    }
    println!(
        "listening on {}:{} (tap {}, {} connections, {} handlers)",
        args.address,
        server.config().port,
        args.tap,
        app::CONNECTIONS,
        app::HANDLERS
    );
}
