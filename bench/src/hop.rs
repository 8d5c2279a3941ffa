//! The bridge's overhead check: a call through `mcpwire bridge` may cost
//! at most one extra hop's latency. For each echo scenario a bridge (a
//! server named with `--bridge`) ran, its p50 is held against the direct
//! call on the same binding (the first server of that binding that is not
//! a bridge) plus one direct gRPC call with as many calls in flight on one
//! connection (the first gRPC server's `echo:C:1`, when it was measured).

use std::fmt::Write as _;

use crate::report::{self, Unit};

/// One echo scenario's p50 latencies, one per server of its binding.
pub struct EchoLatency<'a> {
    /// Whether the binding is the gRPC tunnel.
    pub grpc: bool,
    /// The scenario as a reader sees it, and as a script does.
    pub label: &'a str,
    pub key: &'a str,
    /// Calls in flight (on one connection, for gRPC).
    pub in_flight: usize,
    /// The servers of the binding, and their p50 in µs (`None`: not run).
    pub names: &'a [String],
    pub p50: Vec<Option<f64>>,
}

/// A bridge's p50 against its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    pub label: String,
    pub key: String,
    pub bridge: String,
    pub p50: f64,
    /// The direct call on the host's binding.
    pub direct: f64,
    /// One direct gRPC call at as many in flight.
    pub grpc_hop: f64,
}

impl Hop {
    pub fn limit(&self) -> f64 {
        self.direct + self.grpc_hop
    }

    pub fn met(&self) -> bool {
        self.p50 <= self.limit()
    }
}

/// The first figure of a server that is not a bridge.
fn direct(e: &EchoLatency<'_>, bridges: &[String]) -> Option<f64> {
    e.names
        .iter()
        .zip(&e.p50)
        .find(|(n, _)| !bridges.contains(n))
        .and_then(|(_, v)| *v)
}

/// The checks, in the order of the scenarios and servers; a bridge's
/// figure without a direct one to hold it against is left out (and named
/// in the second list).
pub fn check(echoes: &[EchoLatency<'_>], bridges: &[String]) -> (Vec<Hop>, Vec<String>) {
    let mut hops = Vec::new();
    let mut unchecked = Vec::new();
    for e in echoes {
        for (name, p50) in e.names.iter().zip(&e.p50) {
            let (true, Some(p50)) = (bridges.contains(name), *p50) else {
                continue;
            };
            let grpc_hop = echoes
                .iter()
                .find(|g| g.grpc && g.in_flight == e.in_flight)
                .and_then(|g| direct(g, bridges));
            match (direct(e, bridges), grpc_hop) {
                (Some(direct), Some(grpc_hop)) => hops.push(Hop {
                    label: e.label.to_owned(),
                    key: e.key.to_owned(),
                    bridge: name.clone(),
                    p50,
                    direct,
                    grpc_hop,
                }),
                _ => unchecked.push(format!(
                    "{name} in {}: no direct figure to hold it against (run the direct server, and echo:{}:1 on gRPC)",
                    e.key, e.in_flight
                )),
            }
        }
    }
    (hops, unchecked)
}

/// The Markdown table and the `BENCH` lines of the checks.
pub fn report(hops: &[Hop]) -> String {
    let us = |v| report::format_value(Unit::Micros, v);
    let mut out = String::from(
        "| scenario | bridge | p50 | direct | + one gRPC hop | limit | |\n|---|---|---:|---:|---:|---:|---|\n",
    );
    for h in hops {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            h.label,
            h.bridge,
            us(h.p50),
            us(h.direct),
            us(h.grpc_hop),
            us(h.limit()),
            if h.met() { "met" } else { "**missed**" }
        );
    }
    out.push('\n');
    for h in hops {
        let _ = writeln!(
            out,
            "BENCH scenario={} figure=bridge_p50_us {}={:.3} direct={:.3} grpc_hop={:.3} limit={:.3} met={}",
            h.key,
            h.bridge,
            h.p50,
            h.direct,
            h.grpc_hop,
            h.limit(),
            h.met()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_bridge_is_held_against_the_direct_call_and_one_grpc_hop_at_as_many_in_flight() {
        let grpc = names(&["mcpwire", "bridge"]);
        let stdio = names(&["mcpwire", "rmcp", "bridge"]);
        let bridges = names(&["bridge"]);
        let echoes = [
            EchoLatency {
                grpc: true,
                label: "echo 1",
                key: "echo_c1_k1",
                in_flight: 1,
                names: &grpc,
                p50: vec![Some(50.0), Some(99.0)],
            },
            EchoLatency {
                grpc: true,
                label: "echo 16",
                key: "echo_c16_k1",
                in_flight: 16,
                names: &grpc,
                p50: vec![Some(140.0), Some(281.0)],
            },
            EchoLatency {
                grpc: false,
                label: "stdio 16",
                key: "stdio_echo_c16",
                in_flight: 16,
                names: &stdio,
                p50: vec![Some(70.0), Some(30.0), Some(200.0)],
            },
            // No gRPC figure at 4 in flight: left out, and said.
            EchoLatency {
                grpc: false,
                label: "stdio 4",
                key: "stdio_echo_c4",
                in_flight: 4,
                names: &stdio,
                p50: vec![Some(60.0), None, Some(90.0)],
            },
        ];
        let (hops, unchecked) = check(&echoes, &bridges);
        let got: Vec<(&str, f64, f64, bool)> = hops
            .iter()
            .map(|h| (h.key.as_str(), h.direct, h.grpc_hop, h.met()))
            .collect();
        assert_eq!(
            got,
            [
                ("echo_c1_k1", 50.0, 50.0, true),
                ("echo_c16_k1", 140.0, 140.0, false),
                // The direct stdio server, not rmcp, and the gRPC hop at 16.
                ("stdio_echo_c16", 70.0, 140.0, true),
            ]
        );
        assert_eq!(unchecked.len(), 1);
        assert!(unchecked[0].contains("stdio_echo_c4"), "{unchecked:?}");
        let text = report(&hops);
        assert!(
            text.contains("| echo 16 | bridge | 281 µs | 140 µs | 140 µs | 280 µs | **missed** |"),
            "{text}"
        );
        assert!(
            text.contains("BENCH scenario=stdio_echo_c16 figure=bridge_p50_us bridge=200.000 direct=70.000 grpc_hop=140.000 limit=210.000 met=true"),
            "{text}"
        );
    }
}
