//! The embassy-net stack on a TAP device, as both binaries set it up: the
//! device app (`main.rs`) and the client (`bin/client.rs`, which takes this
//! file in with `#[path]`).

use std::net::Ipv4Addr;
use std::process::exit;

use embassy_net::{Ipv4Cidr, Runner, Stack, StackResources, StaticConfigV4};
use embassy_net_tuntap::TunTapDevice;

#[embassy_executor::task]
pub async fn net_task(mut runner: Runner<'static, TunTapDevice>) -> ! {
    runner.run().await
}

/// The value of `--address`: `A.B.C.D/LEN`, the prefix length 24 when
/// absent.
pub fn parse_address(v: &str) -> Result<(Ipv4Addr, u8), String> {
    let (a, p) = v.split_once('/').unwrap_or((v, "24"));
    let address = a.parse().map_err(|_| format!("bad address {v}"))?;
    let prefix = p
        .parse()
        .ok()
        .filter(|p| *p <= 32)
        .ok_or(format!("bad prefix length in {v}"))?;
    Ok((address, prefix))
}

/// Opens the TAP device `tap`; when it cannot, says so as `program` and
/// exits with status 1.
pub fn open_tap(program: &str, tap: &str) -> TunTapDevice {
    match TunTapDevice::new(tap) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{program}: cannot open TAP device {tap}: {e}");
            exit(1);
        }
    }
}

/// The stack on `device` with a static `address/prefix`, no gateway, no DNS.
/// Its MAC address is made from the IPv4 address (a locally administered
/// 02:00:A:B:C:D): TAP devices on one bridge need distinct ones, and
/// embassy-net-tuntap gives every device the same. Its seed (TCP sequence
/// numbers, ports) comes from the clock, which will do on a test host;
/// `fallback_seed` if the clock is before 1970.
pub fn stack<const SOCKETS: usize>(
    mut device: TunTapDevice,
    address: Ipv4Addr,
    prefix: u8,
    resources: &'static mut StackResources<SOCKETS>,
    fallback_seed: u64,
) -> (Stack<'static>, Runner<'static, TunTapDevice>) {
    let [a, b, c, d] = address.octets();
    device.set_hardware_address([0x02, 0x00, a, b, c, d]);
    let config = embassy_net::Config::ipv4_static(StaticConfigV4 {
        address: Ipv4Cidr::new(address, prefix),
        gateway: None,
        dns_servers: Default::default(),
    });
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(fallback_seed, |d| d.as_nanos() as u64);
    embassy_net::new(device, config, resources, seed)
}
