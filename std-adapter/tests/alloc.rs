//! Heap allocations per `echo` call of `mcpwire serve`'s demo app on the
//! tokio driver (issue #17): counted by a global allocator around a batch
//! of calls over the stdio driver, which runs the same handler path
//! (`Calls`, `App::handle`, the tool, its result) as the gRPC tunnel; the
//! client side is a prepared buffer and a reused line buffer, so what is
//! counted is the server's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::alloc::System;
use std::time::Duration;

use mcpwire_tokio::{StdioConfig, stdio};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations per `echo` call (11 when this was written): the call's
/// `params` copy and its shared record, the tool's name, the handler's
/// future and its answer's future, the result text and its content list,
/// the result's bytes, the call's cancel channel, and what the driver
/// grows. A JSON tree of the request or of the result would add several
/// per call (the request's alone was 20 or so).
const MAX_PER_CALL: f64 = 11.0;

fn echo_line(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#,
        "x".repeat(100),
        common::VERSION
    ) + "\n"
}

#[test]
fn an_echo_call_allocates_a_bounded_number_of_times() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (srd, swr) = tokio::io::split(server);
        let app = common::demo::app(Duration::from_secs(3600));
        let served = tokio::spawn(stdio::serve(app, srd, swr, StdioConfig::default()));
        let (crd, mut wr) = tokio::io::split(client);
        let mut rd = BufReader::with_capacity(1 << 16, crd);
        let mut line = Vec::with_capacity(4096);
        // One call at a time: a batch of `n` calls, the requests prepared.
        let batch = |first: u64, n: u64| -> Vec<u8> {
            (first..first + n)
                .flat_map(|id| echo_line(id).into_bytes())
                .collect()
        };
        let mut run = async |requests: &[u8], n: u64| {
            let mut answered = 0;
            for request in requests.split_inclusive(|&b| b == b'\n') {
                wr.write_all(request).await.unwrap();
                line.clear();
                rd.read_until(b'\n', &mut line).await.unwrap();
                assert!(
                    line.windows(7).any(|w| w == b"\"xxxxxx"),
                    "{}",
                    String::from_utf8_lossy(&line)
                );
                answered += 1;
            }
            assert_eq!(answered, n);
        };
        // Warm up: the engine's records, the queues and buffers grow once.
        let warm = batch(1, 50);
        run(&warm, 50).await;
        let calls = 200;
        let measured = batch(1000, calls);
        let region = Region::new(GLOBAL);
        run(&measured, calls).await;
        let stats = region.change();
        let per_call = (stats.allocations + stats.reallocations) as f64 / calls as f64;
        eprintln!(
            "per echo call: {per_call:.2} allocations ({} allocations, {} reallocations, {} bytes)",
            stats.allocations, stats.reallocations, stats.bytes_allocated
        );
        assert!(
            per_call <= MAX_PER_CALL,
            "{per_call:.2} allocations per echo call (at most {MAX_PER_CALL})"
        );
        drop(wr);
        drop(rd);
        served.await.unwrap().unwrap();
    });
}
