//! `rmcp-client-load`: the rmcp 3.11 client under load, for the client
//! benchmark (`scripts/bench-client.sh`); the arguments and the printed
//! line are those of `mcpwire-client-load`:
//!
//!   rmcp-client-load --calls N [--concurrency C] [--text-bytes B] -- /ABS/SERVER [ARGS...]
//!   rmcp-client-load --calls N [--concurrency C] [--text-bytes B] --url http://HOST:PORT/mcp
//!
//! The client speaks the 2026-07-28 lifecycle (`server/discover`), over a
//! child process or Streamable HTTP (reqwest, no TLS); `cpu_s` is this
//! process's CPU time in the calls only.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, service::RunningService};

const USAGE: &str = "usage: rmcp-client-load --calls N [--concurrency C] [--text-bytes B] \
                     (-- /ABS/SERVER [ARGS...] | --url http://HOST:PORT/mcp)";

struct Options {
    calls: usize,
    concurrency: usize,
    text_bytes: usize,
    target: Target,
}

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

#[tokio::main]
async fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rmcp-client-load: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(options).await {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rmcp-client-load: {e}");
            ExitCode::FAILURE
        }
    }
}

fn modern() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

async fn run(o: Options) -> Result<String, String> {
    let client: RunningService<RoleClient, ()> = match &o.target {
        Target::Stdio(command) => {
            let mut cmd = tokio::process::Command::new(&command[0]);
            cmd.args(&command[1..]);
            let transport = TokioChildProcess::new(cmd).map_err(|e| format!("launch: {e}"))?;
            ().serve_with_lifecycle(transport, modern())
                .await
                .map_err(|e| format!("connect: {e}"))?
        }
        Target::Http(url) => {
            let transport = StreamableHttpClientTransport::from_uri(url.as_str());
            ().serve_with_lifecycle(transport, modern())
                .await
                .map_err(|e| format!("connect: {e}"))?
        }
    };
    let peer = Arc::new(client.peer().clone());
    let tools = peer
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    if !tools.iter().any(|t| t.name == "echo") {
        return Err("the server has no echo tool".into());
    }
    let text: Arc<str> = (0..o.text_bytes)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect::<String>()
        .into();
    let cpu_before = cpu_time()?;
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..o.concurrency.min(o.calls.max(1)) {
        let (peer, text, next) = (peer.clone(), text.clone(), next.clone());
        let calls = o.calls;
        workers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                let mut arguments = rmcp::model::JsonObject::new();
                arguments.insert("text".into(), text.to_string().into());
                let result = peer
                    .call_tool(CallToolRequestParams::new("echo").with_arguments(arguments))
                    .await
                    .map_err(|e| format!("tools/call: {e}"))?;
                let answered = result
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .map(|t| t.text.as_str());
                if answered != Some(&*text) {
                    return Err(format!("echo answered {:?}", result.content));
                }
            }
            Ok::<(), String>(())
        }));
    }
    for worker in workers {
        worker.await.map_err(|e| e.to_string())??;
    }
    let wall = started.elapsed();
    let cpu = cpu_time()? - cpu_before;
    let _ = tokio::time::timeout(Duration::from_secs(10), client.cancel()).await;
    Ok(format!(
        "CLIENT_LOAD calls={} wall_s={:.3} cpu_s={:.3}",
        o.calls,
        wall.as_secs_f64(),
        cpu.as_secs_f64()
    ))
}

/// This process's user and system CPU time, all threads
/// (`/proc/self/stat` fields 14 and 15, in clock ticks of 10 ms).
fn cpu_time() -> Result<Duration, String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| e.to_string())?;
    let after_name = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or("/proc/self/stat")?;
    let mut fields = after_name.split_whitespace().skip(14 - 3);
    let mut tick = || -> Result<u64, String> {
        fields
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| "/proc/self/stat: no utime and stime".to_string())
    };
    let ticks = tick()? + tick()?;
    Ok(Duration::from_millis(ticks * 10))
}
