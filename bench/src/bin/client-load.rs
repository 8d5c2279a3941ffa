//! `mcpwire-client-load`: mcpwire's MCP client (`mcpwire_tokio::Client`) under load, for the client
//! benchmark (`scripts/bench-client.sh`), beside the rmcp client
//! (`rmcp-client-load`) and the Python SDK's (`tests/peers/sdk_client_load.py`),
//! which take the same arguments and print the same line.
//!
//!   mcpwire-client-load --calls N [--concurrency C] [--text-bytes B] -- /ABS/SERVER [ARGS...]
//!   mcpwire-client-load --calls N [--concurrency C] [--text-bytes B] --url http://HOST:PORT/mcp
//!
//! Connects (the stdio server launched as a child), lists the tools, calls
//! `echo` with a text of B octets (default 100) N times with C calls in
//! flight (default 1), checks every answer's text, and prints
//! `CLIENT_LOAD calls=N wall_s=S cpu_s=S` where `cpu_s` is this process's
//! user and system CPU time (all threads) spent in the calls only: the
//! launch, the handshake and the shutdown are outside it.

#[path = "../procfs.rs"]
#[allow(dead_code)]
mod procfs;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpwire_tokio::client::{http, stdio};
use mcpwire_tokio::{Client, ServerCommand};
use serde_json::json;

const USAGE: &str = "usage: mcpwire-client-load --calls N [--concurrency C] [--text-bytes B] \
                     (-- /ABS/SERVER [ARGS...] | --url http://HOST:PORT/mcp)";

#[derive(Debug)]
struct Options {
    calls: usize,
    concurrency: usize,
    text_bytes: usize,
    target: Target,
}

#[derive(Debug)]
enum Target {
    Stdio(Vec<String>),
    Http(String),
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut calls, mut concurrency, mut text_bytes) = (None, 1, 100);
    let mut target = None;
    while let Some(arg) = args.next() {
        let mut number = |flag: &str| -> Result<usize, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{flag} needs a number"))
        };
        match arg.as_str() {
            "--calls" => calls = Some(number("--calls")?),
            "--concurrency" => concurrency = number("--concurrency")?.max(1),
            "--text-bytes" => text_bytes = number("--text-bytes")?,
            "--url" => target = Some(Target::Http(args.next().ok_or("--url needs a URL")?)),
            "--" => {
                let command: Vec<String> = args.by_ref().collect();
                if !command.first().is_some_and(|c| c.starts_with('/')) {
                    return Err("the server after `--` must be an absolute path".into());
                }
                target = Some(Target::Stdio(command));
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        calls: calls.ok_or("--calls is required")?,
        concurrency,
        text_bytes,
        target: target.ok_or("a server (`-- /ABS/SERVER` or `--url`) is required")?,
    })
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mcpwire-client-load: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mcpwire-client-load: tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcpwire-client-load: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(o: Options) -> Result<String, String> {
    // The one client API, as an application holds it.
    let channel = match &o.target {
        Target::Stdio(command) => {
            let server = ServerCommand::new(&command[0]).args(&command[1..]);
            Client::stdio(stdio::Config::new(server)).await
        }
        Target::Http(url) => {
            let mut config = http::Config::new(url).map_err(|e| format!("{url}: {e}"))?;
            // One connection per call in flight, as reqwest's pool gives rmcp.
            config.pool_size = o.concurrency;
            Client::http(config).await
        }
    }
    .map_err(|e| format!("connect: {e}"))?;
    let channel = Arc::new(channel);
    let tools = channel
        .list_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    if !tools.iter().any(|t| t.name == "echo") {
        return Err("the server has no echo tool".into());
    }
    let text: Arc<str> = (0..o.text_bytes)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect::<String>()
        .into();
    let ticks = procfs::clock_ticks();
    let pid = std::process::id();
    let cpu_before = procfs::cpu_time(pid, ticks).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..o.concurrency.min(o.calls.max(1)) {
        let (channel, text, next) = (channel.clone(), text.clone(), next.clone());
        let calls = o.calls;
        workers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                let result = channel
                    .call_tool("echo", json!({ "text": &*text }))
                    .await
                    .map_err(|e| format!("tools/call: {e}"))?;
                if result.text() != *text {
                    return Err(format!("echo answered {:?}", result.text()));
                }
            }
            Ok::<(), String>(())
        }));
    }
    for worker in workers {
        worker.await.map_err(|e| e.to_string())??;
    }
    let wall = started.elapsed();
    let cpu = procfs::cpu_time(pid, ticks).map_err(|e| e.to_string())? - cpu_before;
    let _ = tokio::time::timeout(Duration::from_secs(10), channel.close()).await;
    Ok(format!(
        "CLIENT_LOAD calls={} wall_s={:.3} cpu_s={:.3}",
        o.calls,
        wall.as_secs_f64(),
        cpu.as_secs_f64()
    ))
}
