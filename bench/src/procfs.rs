//! What the load reads of a process under `/proc`: its CPU time
//! (`stat`: utime + stime), its resident memory (`status`: VmRSS) and our
//! open-file limit.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`; 100
/// when getconf is missing).
pub fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

/// User plus system CPU time of `pid` (all its threads, the ended ones too).
pub fn cpu_time(pid: u32, ticks_per_second: u64) -> io::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let ticks = parse_cpu_ticks(&stat).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/stat: no utime and stime"),
        )
    })?;
    Ok(Duration::from_micros(
        ticks.saturating_mul(1_000_000) / ticks_per_second,
    ))
}

/// utime + stime in clock ticks: fields 14 and 15, counted after the
/// command name, which is in parentheses and may hold spaces.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // after_name starts with field 3 (state).
    let mut fields = after_name.split_whitespace().skip(14 - 3);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Resident memory of `pid` in bytes (VmRSS).
pub fn rss_bytes(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_vm_rss(&status).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/status: no VmRSS"),
        )
    })
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib * 1024)
}

/// Whether `pid` still runs (a zombie counts as gone).
pub fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Whether `pid` holds the listening TCP socket of `addr` (one of its
/// descriptors is the socket inode that `/proc/net/tcp` or `tcp6` lists in
/// state LISTEN at that address): the pid given for a server is that
/// server, not a shell around it.
pub fn listens_on(pid: u32, addr: SocketAddr) -> io::Result<bool> {
    let table = if addr.is_ipv4() { "tcp" } else { "tcp6" };
    let sockets = std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))?;
    let inodes = listening_inodes(&sockets, addr);
    if inodes.is_empty() {
        return Ok(false);
    }
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(target) = std::fs::read_link(fd?.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        let inode = target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|t| t.parse::<u64>().ok());
        if inode.is_some_and(|i| inodes.contains(&i)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The inodes of the sockets listening on `addr` in a `/proc/net/tcp` or
/// `tcp6` table (addresses are hex words in host byte order).
fn listening_inodes(table: &str, addr: SocketAddr) -> Vec<u64> {
    const LISTEN: &str = "0A";
    let mut out = Vec::new();
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(state), Some(inode)) = (cols.get(1), cols.get(3), cols.get(9))
        else {
            continue;
        };
        let Some((ip_hex, port_hex)) = local.split_once(':') else {
            continue;
        };
        if *state != LISTEN || u16::from_str_radix(port_hex, 16).ok() != Some(addr.port()) {
            continue;
        }
        let ip_matches = match addr.ip() {
            IpAddr::V4(v4) => {
                u32::from_str_radix(ip_hex, 16).is_ok_and(|w| Ipv4Addr::from(w.to_ne_bytes()) == v4)
            }
            // The port alone for IPv6 (four words in host order).
            IpAddr::V6(_) => true,
        };
        if ip_matches && let Ok(inode) = inode.parse() {
            out.push(inode);
        }
    }
    out
}

/// The soft limit of open files of this process.
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    if soft == "unlimited" {
        Some(u64::MAX)
    } else {
        soft.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn cpu_ticks_after_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (tonic (x) y) S 1 4242 4242 0 -1 4194560 1030 0 0 0 \
                    1234 567 0 0 20 0 3 0 12345 1000000 500 18446744073709551615";
        assert_eq!(parse_cpu_ticks(stat), Some(1234 + 567));
        assert_eq!(parse_cpu_ticks("1 (x) S 1 2"), None);
    }

    #[test]
    fn vm_rss_in_bytes() {
        let status = "Name:\tmcpwire\nVmPeak:\t  99 kB\nVmRSS:\t    6144 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss(status), Some(6144 * 1024));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
    }

    #[test]
    fn listening_sockets_by_address() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9E0F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 341483 1 0 100 0 0 10 0
   1: 00000000:9E0F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 624 1 0 100 0 0 10 0
   2: 0100007F:9E0F 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 777 1 0 100 0 0 10 0
";
        let addr: SocketAddr = "127.0.0.1:40463".parse().unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(listening_inodes(table, addr), vec![341_483]);
        }
        let other: SocketAddr = "127.0.0.1:40464".parse().unwrap();
        assert!(listening_inodes(table, other).is_empty());
    }

    #[tokio::test]
    async fn this_process_listens_where_it_bound() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await;
        let Ok(listener) = listener else { return };
        let Ok(addr) = listener.local_addr() else {
            return;
        };
        assert!(listens_on(std::process::id(), addr).is_ok_and(|b| b));
        drop(listener);
        assert!(listens_on(std::process::id(), addr).is_ok_and(|b| !b));
    }

    #[test]
    fn this_process_is_readable() {
        let me = std::process::id();
        assert!(is_alive(me));
        assert!(rss_bytes(me).is_ok_and(|b| b > 0));
        assert!(cpu_time(me, clock_ticks()).is_ok());
        assert!(open_files_limit().is_some());
    }
}
