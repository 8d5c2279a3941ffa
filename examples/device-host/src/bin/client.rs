//! Calls the device app with the embassy client (`mcpwire_embassy::client`
//! over the core's client engine), on embassy's std executor with its own
//! embassy-net stack on a TAP device: what a second board would do.
//!
//! ```text
//! mcpwire-device-client [--tap NAME] [--address A.B.C.D/LEN] [--server A.B.C.D:PORT] [scenario...]
//! ```
//!
//! Defaults: `--tap tap1 --address 10.77.0.3/24 --server 10.77.0.2:50051`.
//! `MCPWIRE_TOKEN`, if set, is sent with every call as a bearer token (the
//! device app requires one unless it runs with `--no-auth`).
//! The TAP device must exist, be up and reach the server on its link
//! (`scripts/interop-embassy-host.sh` bridges it with the device app's TAP
//! inside a network namespace). Scenarios (all by default): tools-list,
//! read-sensor, progress, deadline, unsafe-integer. Each prints one JSON
//! line; the last line is "N passed, N failed". Exit status 0 when all
//! passed, 1 otherwise, 2 on a usage error.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::exit;
use std::time::Duration;

use embassy_executor::Spawner;
use embassy_net::tcp::TcpSocket;
use embassy_net::{IpEndpoint, StackResources};
use mcpwire_core::grpc::Code;
use mcpwire_core::h2::InlineStorage;
use mcpwire_core::mcp::SlabStore;
use mcpwire_core::mcp::client::ClientConfig;
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::meta::PROTOCOL_VERSION;
use mcpwire_embassy::client::{self, Client, ClientError, Step};
use net::net_task;
use static_cell::StaticCell;

#[path = "../net.rs"]
mod net;

const USAGE: &str = "usage: mcpwire-device-client [--tap NAME] [--address A.B.C.D/LEN] [--server A.B.C.D:PORT] [scenario...]";
const SCENARIOS: &[&str] = &[
    "tools-list",
    "read-sensor",
    "progress",
    "deadline",
    "unsafe-integer",
];
/// `"_meta":{` with the protocol version and the client's (empty)
/// capabilities; the caller adds what else it carries and the `}`.
fn meta() -> String {
    format!(
        r#""_meta":{{"io.modelcontextprotocol/protocolVersion":"{PROTOCOL_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}}"#
    )
}

/// 2 calls, two 8 KiB buffers per call (its request, its incoming
/// messages), 2 KiB of annotation cache, a 4 KiB HPACK table, 16 KiB of
/// HTTP/2 buffer.
type Store = SlabStore<8192, 4>;
type Engine = mcpwire_core::mcp::client::Client<Store, 2, 4096, 16384, InlineStorage<16384>, 2048>;
type McpClient = Client<'static, Store, 2, 4096, 16384, InlineStorage<16384>, 2048>;

static RESOURCES: StaticCell<StackResources<2>> = StaticCell::new();
static ENGINE: StaticCell<Engine> = StaticCell::new();
static RX: StaticCell<[u8; 8192]> = StaticCell::new();
static TX: StaticCell<[u8; 8192]> = StaticCell::new();

struct Args {
    tap: String,
    address: Ipv4Addr,
    prefix: u8,
    server: SocketAddrV4,
    scenarios: Vec<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        tap: "tap1".into(),
        address: Ipv4Addr::new(10, 77, 0, 3),
        prefix: 24,
        server: SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 50051),
        scenarios: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--tap" => out.tap = value()?,
            "--address" => (out.address, out.prefix) = net::parse_address(&value()?)?,
            "--server" => {
                let v = value()?;
                out.server = v.parse().map_err(|_| format!("bad server {v}"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            s if SCENARIOS.contains(&s) => out.scenarios.push(s.into()),
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    if out.scenarios.is_empty() {
        out.scenarios = SCENARIOS.iter().map(|s| (*s).into()).collect();
    }
    Ok(out)
}

/// What one call gave.
#[derive(Debug, Default)]
struct Outcome {
    notifications: Vec<String>,
    response: Option<String>,
    failed: Option<(i32, Option<Code>, bool, String)>,
}

async fn run_call(
    client: &mut McpClient,
    body: &str,
    timeout: Option<Duration>,
) -> Result<Outcome, ClientError> {
    let mut out = vec![0u8; 8192];
    let mut call = client.call(body.as_bytes(), timeout).await?;
    let mut seen = Outcome::default();
    loop {
        match call.next(&mut out).await? {
            Step::Notification(j) => seen
                .notifications
                .push(String::from_utf8_lossy(j).into_owned()),
            Step::Response(j) => seen.response = Some(String::from_utf8_lossy(j).into_owned()),
            // No call here answers input (`CallOptions::answers_input`).
            Step::InputRequired(_) => {}
            Step::Failed {
                code,
                response,
                diagnostics,
            } => {
                seen.failed = Some((
                    code,
                    diagnostics.grpc_status,
                    diagnostics.transport,
                    String::from_utf8_lossy(response).into_owned(),
                ))
            }
            Step::Done => return Ok(seen),
        }
    }
}

fn tools_call(id: u32, name: &str, args: &str, token: Option<&str>) -> String {
    let meta = match token {
        Some(t) => format!(r#"{},"progressToken":"{t}"}}"#, meta()),
        None => format!("{}}}", meta()),
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args},{meta}}}}}"#
    )
}

async fn scenario(client: &mut McpClient, name: &str) -> Result<String, String> {
    let e = |e: ClientError| format!("{e:?}");
    match name {
        "tools-list" => {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{}}}}}}}"#,
                meta()
            );
            let o = run_call(client, &body, None).await.map_err(e)?;
            let r = o.response.clone().ok_or(format!("no response: {o:?}"))?;
            let result = json::get(r.as_bytes(), b"result").ok_or(format!("no result: {r}"))?;
            let tools = json::get(result, b"tools").ok_or("no tools")?;
            let names: Vec<String> = json::elements(tools)
                .filter_map(|t| json::get(t, b"name"))
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .collect();
            for want in ["\"read_sensor\"", "\"toggle_output\"", "\"slow_task\""] {
                if !names.iter().any(|n| n == want) {
                    return Err(format!("{want} missing from {names:?}"));
                }
            }
            Ok(format!("{} tools", names.len()))
        }
        "read-sensor" => {
            let o = run_call(client, &tools_call(2, "read_sensor", "{}", None), None)
                .await
                .map_err(e)?;
            let r = o.response.clone().ok_or(format!("no response: {o:?}"))?;
            if !r.contains("21.5") {
                return Err(format!("unexpected result {r}"));
            }
            Ok("21.5".into())
        }
        "progress" => {
            let body = tools_call(
                3,
                "slow_task",
                r#"{"steps":3,"delay_ms":50}"#,
                Some("emb-progress"),
            );
            let o = run_call(client, &body, None).await.map_err(e)?;
            let r = o.response.clone().ok_or(format!("no response: {o:?}"))?;
            if o.notifications.len() != 3
                || !o.notifications.iter().all(|n| n.contains("emb-progress"))
                || !r.contains("done after 3 steps")
            {
                return Err(format!("{o:?}"));
            }
            Ok("3 notifications, then the result".into())
        }
        "deadline" => {
            let body = tools_call(4, "slow_task", r#"{"steps":5,"delay_ms":400}"#, None);
            let started = std::time::Instant::now();
            let o = run_call(client, &body, Some(Duration::from_millis(500)))
                .await
                .map_err(e)?;
            let took = started.elapsed();
            match o.failed {
                Some((-32001, Some(Code::DeadlineExceeded), true, _))
                    if took < Duration::from_millis(1500) =>
                {
                    // The connection still works after it.
                    let o = run_call(client, &tools_call(5, "read_sensor", "{}", None), None)
                        .await
                        .map_err(e)?;
                    o.response
                        .clone()
                        .ok_or(format!("after the deadline: {o:?}"))?;
                    Ok(format!("DEADLINE_EXCEEDED after {} ms", took.as_millis()))
                }
                _ => Err(format!("{o:?} after {took:?}")),
            }
        }
        "unsafe-integer" => {
            // `slow_task` has no x-mcp-header annotation: an unsafe integer
            // argument travels; the tool refuses it (-32602).
            let body = tools_call(6, "slow_task", r#"{"steps":9007199254740993}"#, None);
            let o = run_call(client, &body, None).await.map_err(e)?;
            match o.failed {
                Some((-32602, _, false, _)) => Ok("-32602 from the tool".into()),
                _ => Err(format!("{o:?}")),
            }
        }
        _ => Err("unknown scenario".into()),
    }
}

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
    let mut device = net::open_tap("mcpwire-device-client", &args.tap);
    // Not the device app's (embassy-net-tuntap's default): both stacks can
    // share a bridge.
    device.set_hardware_address([0x02, 0x03, 0x04, 0x05, 0x06, 0x08]);
    let (stack, runner) = net::stack(
        device,
        args.address,
        args.prefix,
        RESOURCES.init(StackResources::new()),
        7,
    );
    if let Err(e) = net_task(runner).map(|t| spawner.spawn(t)) {
        eprintln!("mcpwire-device-client: {e}");
        exit(1);
    }
    stack.wait_config_up().await;
    eprintln!(
        "mcpwire-device-client: {} up, calling {}",
        args.address, args.server
    );

    let mut socket = TcpSocket::new(stack, RX.init([0; 8192]), TX.init([0; 8192]));
    socket.set_timeout(Some(embassy_time::Duration::from_secs(30)));
    let remote = IpEndpoint::new((*args.server.ip()).into(), args.server.port());
    let mut connected = false;
    for _ in 0..50 {
        if socket.connect(remote).await.is_ok() {
            connected = true;
            break;
        }
        socket.abort();
        embassy_time::Timer::after_millis(100).await;
    }
    if !connected {
        println!(r#"{{"scenario":"connect","ok":false,"error":"cannot connect"}}"#);
        println!("0 passed, 1 failed");
        exit(1);
    }
    eprintln!("mcpwire-device-client: connected");
    // The engine's metadata is static, as in a firmware's flash.
    let metadata: &'static [(&'static str, &'static str)] = match std::env::var("MCPWIRE_TOKEN") {
        Ok(token) => {
            let value: &'static str = Box::leak(format!("Bearer {token}").into_boxed_str());
            Box::leak(Box::new([("authorization", value)]))
        }
        Err(_) => &[],
    };
    let engine = ENGINE.init(Engine::new(
        ClientConfig {
            request_timeout: Duration::from_secs(20),
            metadata,
            ..ClientConfig::default()
        },
        SlabStore::new(),
        client::now(),
    ));
    let mut client = Client::new(socket, engine);
    let (mut passed, mut failed) = (0, 0);
    for name in &args.scenarios {
        let r = embassy_time::with_timeout(
            embassy_time::Duration::from_secs(30),
            scenario(&mut client, name),
        )
        .await
        .unwrap_or_else(|_| Err("timed out".into()));
        match r {
            Ok(what) => {
                passed += 1;
                println!(r#"{{"scenario":"{name}","ok":true,"saw":{what:?}}}"#);
            }
            Err(why) => {
                failed += 1;
                println!(r#"{{"scenario":"{name}","ok":false,"error":{why:?}}}"#);
            }
        }
    }
    client.close().await;
    println!("{passed} passed, {failed} failed");
    exit(if failed == 0 { 0 } else { 1 });
}
