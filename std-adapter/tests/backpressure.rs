//! A client that sends requests and never reads the answers holds the
//! server's memory under a bound, on every binding (issue #32, A1): the
//! server stops reading a connection (or stdin) while its output waits at
//! the high-water mark, so the requests wait in the client's socket, not
//! as answers in the server. Meanwhile other clients are served.
//!
//! Each test runs `mcpwire serve` (or the bridge) as its own process and
//! reads the process's resident memory from `/proc`, as an operator would
//! watch it; the flood goes on for a few seconds (the server this fixed
//! grew by hundreds of megabytes a second under it).

//! A client that sends requests and never reads the answers holds the
//! server's memory under a bound, on every binding (issue #32, A1): the
//! server stops reading a connection (or stdin) while its output waits at
//! the high-water mark, so the requests wait in the client's socket, not
//! as answers in the server. Meanwhile other clients are served.
//!
//! The server runs in this process with a tool whose answer is 256 KiB
//! for a request of a few hundred octets (a server that keeps reading
//! turns a megabyte of requests into gigabytes of answers), and the heap
//! the process holds is counted by its allocator while a client floods
//! it; the bridge runs as its own process, its resident memory read from
//! `/proc`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::System;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mcpwire_tokio::{App, Server, ServerConfig, StdioConfig, ToolCall, ToolResult, stdio};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The heap is the process's: one flood at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const VERSION: &str = "2026-07-28";
/// How long each client sends without reading.
const FLOOD: Duration = Duration::from_secs(3);
/// The answer of the `big` tool.
const ANSWER: usize = 256 << 10;
/// What the server may grow by while one client floods it: its high-water
/// mark, the unfed input and the calls in progress (each holding its
/// answer until the engine takes it), and the allocator's slack; far below
/// what a server that keeps reading grows by in the same time (gigabytes).
const BOUND: u64 = 64 << 20;

/// An app with `big`, whose answer is as long as asked, and `echo`.
fn app() -> App {
    App::new("backpressure", "1")
        .tool(
            "big",
            "Answers `octets` of text at once.",
            r#"{"type":"object","properties":{"octets":{"type":"integer"}}}"#,
            |call: ToolCall| async move {
                let octets = call.arguments()["octets"].as_u64().unwrap_or(0);
                Ok(ToolResult::text("x".repeat(octets as usize)))
            },
        )
        .tool(
            "echo",
            "Returns its text.",
            r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
            |call: ToolCall| async move {
                let text = call.arguments()["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                Ok(ToolResult::text(text))
            },
        )
}

/// The app served on 127.0.0.1 by a runtime of its own (dropped with it).
fn serve() -> (tokio::runtime::Runtime, SocketAddr) {
    serve_with(ServerConfig::default())
}

fn serve_with(config: ServerConfig) -> (tokio::runtime::Runtime, SocketAddr) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(Server::bind("127.0.0.1:0"))
        .unwrap()
        .with_config(config);
    let addr = server.local_addr().unwrap();
    rt.spawn(server.serve(app()));
    (rt, addr)
}

/// Octets the process's heap holds beyond what it held at `region`'s
/// start.
fn live(region: &Region<'_, System>) -> u64 {
    let c = region.change();
    (c.bytes_allocated as i64 - c.bytes_deallocated as i64 + c.bytes_reallocated as i64).max(0)
        as u64
}

/// Runs `flood` (given a closure to call now and then) and returns the
/// most the heap grew by meanwhile.
fn growth(flood: impl FnOnce(&mut dyn FnMut())) -> u64 {
    let region = Region::new(GLOBAL);
    let mut peak = 0;
    flood(&mut || peak = peak.max(live(&region)));
    peak.max(live(&region))
}

/// A server process, killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Process {
    /// The process's resident memory, in octets.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id()))
            .expect("the process runs");
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status");
        kib << 10
    }

    /// Whether it is still running.
    fn is_running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

/// `mcpwire ARGS` listening on a port of its own choosing; its address
/// from the line it prints when ready.
fn listening(args: &[&str]) -> (Process, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpwire starts");
    let stderr = child.stderr.take().expect("piped");
    let process = Process(child);
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("mcpwire prints its listening line")
            .expect("stderr reads");
        if let Some(rest) = line.strip_prefix("listening on ") {
            let addr = rest.split_whitespace().next().expect("an address");
            break addr.parse().expect("a socket address");
        }
    };
    // The rest of its diagnostics, read so that it never blocks on them.
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            eprintln!("{line}");
        }
    });
    (process, addr)
}

/// A `tools/call` of `big`.
fn big_call(id: usize) -> String {
    big_call_of(id, ANSWER)
}

/// A `tools/call` of `big` for an answer of `octets`.
fn big_call_of(id: usize, octets: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"big","arguments":{{"octets":{octets}}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{VERSION}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    )
}

/// One Streamable HTTP POST of `body` (HTTP/1.1, keep-alive).
fn http_post(body: &str, name: &str) -> Vec<u8> {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {name}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Writes `preface`, then `request(i)` for i = 1, 2, ... for [`FLOOD`],
/// never reading, calling `sample` now and then; returns the octets
/// written.
fn flood(
    mut sink: impl Write,
    preface: &[u8],
    request: impl Fn(usize) -> Vec<u8>,
    sample: &mut dyn FnMut(),
) -> usize {
    sink.write_all(preface).expect("the preface is taken");
    let start = Instant::now();
    let mut sent = 0;
    let mut i = 1;
    let mut pending = request(i);
    let mut at = 0;
    let mut last_sample = Instant::now();
    while start.elapsed() < FLOOD {
        if last_sample.elapsed() >= Duration::from_millis(50) {
            sample();
            last_sample = Instant::now();
        }
        match sink.write(&pending[at..]) {
            Ok(0) => break,
            Ok(n) => {
                sent += n;
                at += n;
                if at == pending.len() {
                    i += 1;
                    pending = request(i);
                    at = 0;
                }
            }
            // The server stopped taking input: the bound holds it back.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("the connection failed while sending: {e}"),
        }
    }
    sample();
    sent
}

/// A TCP connection whose writes give up after a short wait, so that the
/// flood samples the heap while the server does not read.
fn connect(addr: SocketAddr) -> TcpStream {
    let tcp = TcpStream::connect(addr).expect("connects");
    tcp.set_write_timeout(Some(Duration::from_millis(50)))
        .expect("a write timeout");
    tcp
}

/// An `echo` over a fresh HTTP/1.1 connection, answered in time.
fn echo_is_served(addr: SocketAddr) {
    let mut tcp = TcpStream::connect(addr).expect("a second client connects");
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"still served"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{VERSION}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    tcp.write_all(&http_post(&body, "echo")).unwrap();
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    while !String::from_utf8_lossy(&got).contains("still served") {
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("no answer to the second client: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("still served"), "{text}");
}

fn check(grew: u64, sent: usize, what: &str) {
    check_within(grew, BOUND, sent, what);
}

fn check_within(grew: u64, bound: u64, sent: usize, what: &str) {
    eprintln!(
        "{what}: the client sent {sent} octets and read none; the server grew by {} KiB",
        grew >> 10
    );
    assert!(
        grew < bound,
        "{what}: the server grew by {} KiB (bound {} KiB) while a client sent {sent} octets \
         and read nothing",
        grew >> 10,
        bound >> 10
    );
}

/// HTTP/1.1 pipelining, never reading an answer.
#[test]
fn http1_pipelining_without_reading_holds_the_server_in_its_bound() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_rt, addr) = serve();
    let tcp = connect(addr);
    let mut sent = 0;
    let grew = growth(|sample| {
        sent = flood(&tcp, b"", |i| http_post(&big_call(i), "big"), sample);
    });
    check(grew, sent, "HTTP/1.1");
    echo_is_served(addr);
}

/// A client that reads none of its answers is closed once the server's
/// output has waited `send_timeout` at the high-water mark without the
/// socket taking any: it holds no calls or buffers after that.
#[test]
fn a_client_that_reads_nothing_is_closed_after_the_send_timeout() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_rt, addr) = serve_with(ServerConfig {
        send_timeout: Duration::from_millis(500),
        ..ServerConfig::default()
    });
    let mut tcp = connect(addr);
    // Far more than the socket buffers hold, asked at once.
    for i in 1..=64 {
        tcp.write_all(&http_post(&big_call(i), "big")).unwrap();
    }
    std::thread::sleep(Duration::from_secs(2));
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = 0;
    let mut buf = vec![0; 1 << 16];
    let ended = loop {
        match tcp.read(&mut buf) {
            Ok(0) => break "closed",
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break "reset",
            Err(e) => panic!("the connection stayed open: {e} after {got} octets"),
        }
    };
    assert!(
        got < 64 * ANSWER,
        "{ended} after {got} octets: every answer was sent"
    );
    echo_is_served(addr);
}

/// HTTP/2 frames by hand, so that nothing reads the socket: a client
/// library would.
mod h2_frames {
    pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// SETTINGS with the largest stream window, the connection window
    /// opened as far as it goes, and an acknowledgement of the server's
    /// SETTINGS sent blind: every answer may be sent at once.
    pub fn open_windows() -> Vec<u8> {
        let mut out = PREFACE.to_vec();
        let mut settings = vec![0, 4];
        settings.extend_from_slice(&0x7fff_ffffu32.to_be_bytes());
        out.extend(frame(4, 0, 0, &settings));
        out.extend(frame(8, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()));
        out.extend(frame(4, 1, 0, &[]));
        out
    }

    /// A header field as a literal without indexing, no Huffman (RFC 7541
    /// §6.2.2): short names and values only.
    fn literal(out: &mut Vec<u8>, name: &str, value: &str) {
        out.push(0);
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.push(value.len() as u8);
        out.extend_from_slice(value.as_bytes());
    }

    /// The frames of one request on `stream`: HEADERS with `fields`, then
    /// one DATA frame of `body` that ends the stream.
    fn request(stream: u32, fields: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
        let mut block = Vec::new();
        for (n, v) in fields {
            literal(&mut block, n, v);
        }
        let mut out = frame(1, 0x4, stream, &block);
        out.extend(frame(0, 0x1, stream, body));
        out
    }

    /// A tunnel call of `json` on `stream`.
    pub fn tunnel_call(stream: u32, json: &str, name: &str) -> Vec<u8> {
        let mut msg = vec![0x0a];
        let mut len = json.len();
        while len >= 0x80 {
            msg.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        msg.push(len as u8);
        msg.extend_from_slice(json.as_bytes());
        let mut data = vec![0];
        data.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        data.extend_from_slice(&msg);
        let fields = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/mcp.zig.transport.v1.Mcp/Call"),
            (":authority", "127.0.0.1"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("mcp-protocol-version", super::VERSION),
            ("mcp-method", "tools/call"),
            ("mcp-name", name),
        ];
        request(stream, &fields, &data)
    }

    /// A Streamable HTTP POST of `json` to `/mcp` on `stream`.
    pub fn http_post(stream: u32, json: &str, name: &str) -> Vec<u8> {
        let fields = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/mcp"),
            (":authority", "127.0.0.1"),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", super::VERSION),
            ("mcp-method", "tools/call"),
            ("mcp-name", name),
        ];
        request(stream, &fields, json.as_bytes())
    }
}

/// gRPC tunnel calls with every window open, never reading.
#[test]
fn grpc_calls_with_open_windows_without_reading_hold_the_server_in_its_bound() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_rt, addr) = serve();
    let tcp = connect(addr);
    let mut sent = 0;
    let grew = growth(|sample| {
        sent = flood(
            &tcp,
            &h2_frames::open_windows(),
            |i| h2_frames::tunnel_call((2 * i - 1) as u32, &big_call(i), "big"),
            sample,
        );
    });
    check(grew, sent, "gRPC tunnel");
    echo_is_served(addr);
}

/// Streamable HTTP over HTTP/2 with every window open, never reading.
#[test]
fn http2_posts_with_open_windows_without_reading_hold_the_server_in_its_bound() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_rt, addr) = serve();
    let tcp = connect(addr);
    let mut sent = 0;
    let grew = growth(|sample| {
        sent = flood(
            &tcp,
            &h2_frames::open_windows(),
            |i| h2_frames::http_post((2 * i - 1) as u32, &big_call(i), "big"),
            sample,
        );
    });
    check(grew, sent, "HTTP/2 /mcp");
    echo_is_served(addr);
}

/// The stdio binding whose host writes requests and never reads its
/// output (a pipe of 64 KiB each way, as a host's).
#[test]
fn stdio_host_that_never_reads_holds_the_server_in_its_bound() {
    use tokio::io::AsyncWriteExt;

    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (client, server) = tokio::io::duplex(64 << 10);
    let (srd, swr) = tokio::io::split(server);
    // The host's end: written to, never read (held until the end).
    let (_unread, mut to_server) = tokio::io::split(client);
    rt.spawn(stdio::serve(app(), srd, swr, StdioConfig::default()));
    let mut sent = 0;
    let grew = growth(|sample| {
        rt.block_on(async {
            let start = Instant::now();
            let mut i = 1;
            while start.elapsed() < FLOOD {
                let line = big_call(i) + "\n";
                let write = to_server.write_all(line.as_bytes());
                // A full pipe: the server stopped reading.
                if tokio::time::timeout(Duration::from_millis(50), write)
                    .await
                    .is_ok()
                {
                    sent += line.len();
                    i += 1;
                }
                sample();
            }
        });
    });
    check(grew, sent, "stdio");
}

/// `mcpwire bridge --listen` in front of a server: the bridge's host side
/// holds its bound too (its resident memory, as its own process).
#[test]
fn bridge_host_that_never_reads_holds_the_bridge_in_its_bound() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_rt, down) = serve();
    let to = format!("grpc://{down}");
    let (mut bridge, addr) = listening(&[
        "bridge",
        "--listen",
        "127.0.0.1:0",
        "--no-auth",
        "--to",
        &to,
    ]);
    let tcp = connect(addr);
    let base = bridge.rss();
    let mut peak = base;
    // Pipelined: each call waits for the server behind, so the answers
    // are larger to show a bridge that keeps reading in a few seconds.
    let sent = flood(
        &tcp,
        b"",
        |i| http_post(&big_call_of(i, 8 * ANSWER), "big"),
        &mut || peak = peak.max(bridge.rss()),
    );
    // One call at a time: the high-water mark, the unfed input and one
    // answer in the making (in the bridge's client and its server side).
    check_within(peak.saturating_sub(base), 24 << 20, sent, "bridge --listen");
    echo_is_served(addr);
    assert!(bridge.is_running());
}
