//! `mcpwire-load`: a load generator for MCP servers on three bindings, each
//! driven by one client of this tool so that every server gets the same
//! bytes: the gRPC tunnel (`/mcp.zig.transport.v1.Mcp/Call`, the `h2`
//! crate), Streamable HTTP (HTTP/1.1 keep-alive `POST /mcp`, JSON or SSE
//! answers) and stdio (the server as a child, newline-delimited JSON). It
//! runs the scenarios with the servers of a binding taking turns, and
//! prints per binding a Markdown table with the servers side by side and
//! the ratio of the first to the second, then one `BENCH` line per figure.
//!
//! Server CPU comes from `/proc/<pid>/stat` (utime + stime), memory from
//! `/proc/<pid>/status` (VmRSS), so the servers run on this machine.
//! `scripts/bench-load.sh` builds and starts the servers and runs this.

mod client;
mod hop;
mod http1;
mod http_scenario;
mod procfs;
mod report;
mod scenario;
mod stdio;
mod wire;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use http_scenario::HttpServer;
use report::{Row, Unit};
use scenario::{Load, LoadResult, MemoryResult, Server, Span};
use stdio::StdioServer;
use wire::{Era, Work};

const USAGE: &str = "usage: mcpwire-load [--server NAME=ADDR,PID]...
         [--http-server NAME=ADDR,PID[,legacy][,optional]]...
         [--stdio-server 'NAME[,legacy]=COMMAND [ARG...]']...
         [--duration SECS] [--warmup SECS] [--rounds N] [--scenarios LIST]
         [--idle-connections N] [--text-bytes N] [--progress-steps N]
         [--client-threads N] [--settle-ms N] [--calls N] [--strict]
         [--bridge NAME]...
  --server          a running gRPC tunnel server: a name for the report, its
                    address and its pid (CPU and memory are read from /proc);
                    with two or more, the ratio column is first / second
  --http-server     a running Streamable HTTP server (POST /mcp on
                    HTTP/1.1), the same way; `legacy`: it speaks only the
                    2025 revisions (initialize first on each connection);
                    `optional`: when it does not answer a probe call, it is
                    left out of the figures instead of failing the run
  --stdio-server    a stdio server, started by this tool for each scenario:
                    its name, then its command and arguments (split at
                    whitespace); `legacy` as above
  --duration        measured seconds per scenario and round (default 5)
  --warmup          unmeasured seconds of the same load before (default 1)
  --rounds          runs of each load scenario, the servers taking turns
                    to go first; the figures sum the rounds (default 1)
  --scenarios       comma-separated, in order (default: all of these for the
                    bindings that have servers):
                    gRPC: memory, echo:C:K (C calls in flight on K
                    connections), progress:C:K, typed-echo:C:K (the echo
                    as typed CallTool calls of model_context_protocol.Mcp,
                    on the first server only: tonic serves the tunnel);
                    HTTP: http-memory, http-echo:K (one call at a time on
                    each of K keep-alive connections), http-progress:K;
                    stdio: stdio-echo:C (C calls in flight), stdio-progress:C
  --idle-connections  connections of the memory scenarios (default 500)
  --text-bytes      the echo text (default 100: a response message of about
                    200 bytes)
  --progress-steps  notifications of a progress call (default 100)
  --client-threads  worker threads of this tool (default 2)
  --settle-ms       pause before each memory reading (default 500)
  --calls           measure this many calls per scenario and round instead
                    of --duration (a fixed amount of work: what
                    scripts/bench-callgrind.sh counts instructions over)
  --strict          exit 1 when a ratio misses its target too
  --bridge          the servers of this name (any binding) are `mcpwire
                    bridge` in front of the first gRPC server: a table
                    whose second server is one checks no ratio target;
                    instead each echo scenario holds the bridge's p50 to
                    one extra hop: at most the direct call on the same
                    binding (its first server that is not a bridge) plus
                    the first gRPC server's echo:C:1 at as many in flight
Exit status 1 when any call failed (every response is checked), 2 on a
usage error.";

const DEFAULT_SCENARIOS: &str =
    "memory,echo:1:1,echo:16:1,typed-echo:16:1,echo:256:1,echo:256:16,progress:1:1,progress:16:1";
const DEFAULT_HTTP_SCENARIOS: &str =
    "http-memory,http-echo:1,http-echo:16,http-echo:64,http-progress:1";
const DEFAULT_STDIO_SCENARIOS: &str = "stdio-echo:1,stdio-echo:16";

/// Targets of the gRPC issue, as the largest ratio ours / tonic.
const TARGET_CPU_PER_CALL: f64 = 0.5;
const TARGET_MEMORY_AFTER_CALL: f64 = 0.25;
/// Targets of the Streamable HTTP issue, as the largest ratio ours / rmcp:
/// on one connection (where the kernel's share is largest), on more, and
/// the largest memory per keep-alive connection after one call.
const TARGET_HTTP_CPU_ONE_CONNECTION: f64 = 0.4;
const TARGET_HTTP_CPU: f64 = 0.25;
const TARGET_HTTP_MEMORY_AFTER_CALL: f64 = 4400.0;
/// The target of the stdio issue, ours / rmcp.
const TARGET_STDIO_CPU: f64 = 0.25;

/// The binding a scenario measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binding {
    Grpc,
    Http,
    Stdio,
}

#[derive(Debug, Clone)]
enum Scenario {
    Memory,
    Load {
        progress: bool,
        concurrency: usize,
        connections: usize,
        /// Typed `CallTool` calls (`typed-echo`), on the first server only.
        typed: bool,
    },
    HttpMemory,
    HttpLoad {
        progress: bool,
        connections: usize,
    },
    StdioLoad {
        progress: bool,
        concurrency: usize,
    },
}

impl Scenario {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "memory" => return Ok(Self::Memory),
            "http-memory" => return Ok(Self::HttpMemory),
            _ => {}
        }
        let mut parts = s.split(':');
        let kind = parts.next().unwrap_or_default();
        let num = |p: Option<&str>| -> Result<usize, String> {
            p.and_then(|v| v.parse().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("scenario {s}: want KIND:N (see --help)"))
        };
        let first = num(parts.next())?;
        let (progress, rest) = match kind.rsplit_once('-') {
            Some((binding, "echo")) => (false, binding),
            Some((binding, "progress")) => (true, binding),
            None if kind == "echo" || kind == "progress" => (kind == "progress", ""),
            _ => return Err(format!("unknown scenario {s}")),
        };
        let scenario = match rest {
            "" | "typed" => {
                if rest == "typed" && progress {
                    return Err(format!(
                        "scenario {s}: the typed binding drops notifications: typed-echo only"
                    ));
                }
                let connections = num(parts.next())?;
                if connections > first {
                    return Err(format!(
                        "scenario {s}: want KIND:CALLS:CONNECTIONS, CALLS >= CONNECTIONS"
                    ));
                }
                Self::Load {
                    progress,
                    concurrency: first,
                    connections,
                    typed: rest == "typed",
                }
            }
            "http" => Self::HttpLoad {
                progress,
                connections: first,
            },
            "stdio" => Self::StdioLoad {
                progress,
                concurrency: first,
            },
            _ => return Err(format!("unknown scenario {s}")),
        };
        if parts.next().is_some() {
            return Err(format!("scenario {s}: too many numbers"));
        }
        Ok(scenario)
    }

    fn binding(&self) -> Binding {
        match self {
            Self::Memory | Self::Load { .. } => Binding::Grpc,
            Self::HttpMemory | Self::HttpLoad { .. } => Binding::Http,
            Self::StdioLoad { .. } => Binding::Stdio,
        }
    }
}

#[derive(Debug)]
struct Options {
    servers: Vec<Server>,
    http_servers: Vec<HttpServer>,
    stdio_servers: Vec<StdioServer>,
    duration: Duration,
    warmup: Duration,
    rounds: usize,
    scenarios: Vec<Scenario>,
    idle_connections: usize,
    text_bytes: usize,
    progress_steps: u32,
    client_threads: usize,
    settle: Duration,
    /// A fixed count of measured calls instead of the duration.
    calls: Option<u64>,
    strict: bool,
    /// Names of servers that are `mcpwire bridge` (see `--bridge`).
    bridges: Vec<String>,
}

/// Servers side by side in one binding's table: ours, two that a user
/// would pick instead, and ours behind `mcpwire bridge`.
const MAX_SERVERS: usize = 4;

fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(char::is_whitespace) && !name.contains(',')
}

fn parse_server(v: &str) -> Result<Server, String> {
    let bad = || format!("--server {v}: want NAME=ADDR,PID");
    let (name, rest) = v.split_once('=').ok_or_else(bad)?;
    let (addr, pid) = rest.split_once(',').ok_or_else(bad)?;
    let addr: SocketAddr = addr.parse().map_err(|_| bad())?;
    let pid: u32 = pid.parse().map_err(|_| bad())?;
    if !valid_name(name) {
        return Err(bad());
    }
    Ok(Server {
        name: name.to_owned(),
        addr,
        pid,
    })
}

fn parse_http_server(v: &str) -> Result<HttpServer, String> {
    let bad = || format!("--http-server {v}: want NAME=ADDR,PID[,legacy][,optional]");
    let (name, rest) = v.split_once('=').ok_or_else(bad)?;
    let mut fields = rest.split(',');
    let (Some(addr), Some(pid)) = (fields.next(), fields.next()) else {
        return Err(bad());
    };
    let server = parse_server(&format!("{name}={addr},{pid}")).map_err(|_| bad())?;
    let mut s = HttpServer {
        server,
        era: Era::Modern,
        optional: false,
    };
    for flag in fields {
        match flag {
            "legacy" => s.era = Era::Legacy,
            "optional" => s.optional = true,
            _ => return Err(bad()),
        }
    }
    Ok(s)
}

fn parse_stdio_server(v: &str) -> Result<StdioServer, String> {
    let bad = || format!("--stdio-server {v}: want 'NAME[,legacy]=COMMAND [ARG...]'");
    let (head, command) = v.split_once('=').ok_or_else(bad)?;
    let (name, era) = match head.split_once(',') {
        Some((name, "legacy")) => (name, Era::Legacy),
        Some(_) => return Err(bad()),
        None => (head, Era::Modern),
    };
    let command: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    if !valid_name(name) || command.is_empty() {
        return Err(bad());
    }
    Ok(StdioServer {
        name: name.to_owned(),
        command,
        era,
    })
}

fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        servers: Vec::new(),
        http_servers: Vec::new(),
        stdio_servers: Vec::new(),
        duration: Duration::from_secs(5),
        warmup: Duration::from_secs(1),
        rounds: 1,
        scenarios: Vec::new(),
        idle_connections: 500,
        text_bytes: 100,
        progress_steps: 100,
        client_threads: 2,
        settle: Duration::from_millis(500),
        calls: None,
        strict: false,
        bridges: Vec::new(),
    };
    let mut scenarios = None;
    let seconds = |flag: &str, v: String| -> Result<Duration, String> {
        v.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("{flag} {v}: want seconds"))
    };
    fn count<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
        v.parse().map_err(|_| format!("{flag} {v}: want a number"))
    }
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        if flag == "--strict" {
            o.strict = true;
            continue;
        }
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let value = match inline {
            Some(v) => v,
            None => args.next().ok_or_else(|| format!("{flag} needs a value"))?,
        };
        match flag.as_str() {
            "--server" => o.servers.push(parse_server(&value)?),
            "--http-server" => o.http_servers.push(parse_http_server(&value)?),
            "--stdio-server" => o.stdio_servers.push(parse_stdio_server(&value)?),
            "--duration" => o.duration = seconds(&flag, value)?,
            "--warmup" => o.warmup = seconds(&flag, value)?,
            "--rounds" => o.rounds = count(&flag, &value)?,
            "--scenarios" => scenarios = Some(value),
            "--idle-connections" => o.idle_connections = count(&flag, &value)?,
            "--text-bytes" => o.text_bytes = count(&flag, &value)?,
            "--progress-steps" => o.progress_steps = count(&flag, &value)?,
            "--client-threads" => o.client_threads = count(&flag, &value)?,
            "--settle-ms" => o.settle = Duration::from_millis(count(&flag, &value)?),
            "--calls" => o.calls = Some(count(&flag, &value)?).filter(|&n| n > 0),
            "--bridge" if valid_name(&value) => o.bridges.push(value),
            "--bridge" => return Err(format!("--bridge {value}: want a server's name")),
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    let scenarios = scenarios.unwrap_or_else(|| {
        let mut all = Vec::new();
        if !o.servers.is_empty() {
            all.push(DEFAULT_SCENARIOS);
        }
        if !o.http_servers.is_empty() {
            all.push(DEFAULT_HTTP_SCENARIOS);
        }
        if !o.stdio_servers.is_empty() {
            all.push(DEFAULT_STDIO_SCENARIOS);
        }
        all.join(",")
    });
    o.scenarios = scenarios
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Scenario::parse)
        .collect::<Result<_, _>>()?;
    if o.servers.is_empty() && o.http_servers.is_empty() && o.stdio_servers.is_empty() {
        return Err("give a --server, --http-server or --stdio-server".into());
    }
    if [o.servers.len(), o.http_servers.len(), o.stdio_servers.len()]
        .iter()
        .any(|&n| n > MAX_SERVERS)
    {
        return Err(format!("at most {MAX_SERVERS} servers of each binding"));
    }
    for s in &o.scenarios {
        let missing = match s.binding() {
            Binding::Grpc => o.servers.is_empty().then_some("--server"),
            Binding::Http => o.http_servers.is_empty().then_some("--http-server"),
            Binding::Stdio => o.stdio_servers.is_empty().then_some("--stdio-server"),
        };
        if let Some(flag) = missing {
            return Err(format!("scenario {s:?} needs a {flag}"));
        }
    }
    if o.duration.is_zero() || o.rounds == 0 || o.client_threads == 0 || o.idle_connections == 0 {
        return Err(
            "--duration, --rounds, --client-threads and --idle-connections must be positive".into(),
        );
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse_options(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("mcpwire-load: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.client_threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpwire-load: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&o)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("mcpwire-load: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The figures of one scenario, one entry per server of its binding.
enum Measured {
    Memory {
        binding: Binding,
        key: String,
        scenario: String,
        target_ratio: Option<f64>,
        max_first: Option<f64>,
        results: Vec<Option<MemoryResult>>,
    },
    Load {
        binding: Binding,
        key: String,
        label: String,
        messages_per_call: u64,
        target: f64,
        /// Calls in flight of an echo scenario (on one connection, for
        /// gRPC): what the bridge's hop check compares.
        echo_in_flight: Option<usize>,
        results: Vec<Option<LoadResult>>,
    },
}

impl Measured {
    fn binding(&self) -> Binding {
        match self {
            Self::Memory { binding, .. } | Self::Load { binding, .. } => *binding,
        }
    }
}

fn check_alive(s: &Server) -> Result<(), String> {
    if procfs::is_alive(s.pid) {
        Ok(())
    } else {
        Err(format!("server {} (pid {}) is gone", s.name, s.pid))
    }
}

/// A network server must be the process that holds the listening socket.
fn check_listening(s: &Server) -> Result<(), String> {
    check_alive(s)?;
    if !procfs::listens_on(s.pid, s.addr).map_err(|e| format!("server {}: {e}", s.name))? {
        return Err(format!(
            "pid {} does not hold the listening socket {} of server {}: give the server's own pid",
            s.pid, s.addr, s.name
        ));
    }
    Ok(())
}

type LoadFuture<'a> = Pin<Box<dyn Future<Output = Result<LoadResult, String>> + 'a>>;

/// Runs one load scenario on each server of a binding for `o.rounds`
/// rounds, the servers taking turns to go first; `skip[i]` leaves server
/// `i` out. The figures of the rounds are summed.
async fn load_rounds<'a>(
    o: &Options,
    index: usize,
    key: &str,
    names: &[String],
    skip: &[bool],
    run_one: impl Fn(usize) -> LoadFuture<'a>,
    after_each: impl Fn(usize) -> Result<(), String>,
) -> Result<Vec<Option<LoadResult>>, String> {
    let n = names.len();
    let mut results: Vec<Option<LoadResult>> = vec![None; n];
    for round in 0..o.rounds {
        // The servers take turns going first, against drift.
        let mut order: Vec<usize> = (0..n).filter(|&i| !skip[i]).collect();
        if (index + round) % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let name = &names[i];
            let r = run_one(i)
                .await
                .map_err(|e| format!("{key} on {name}: {e}"))?;
            eprintln!(
                "{key}, {name} (round {}): {} calls/s, p50 {}, p99 {}, server CPU {} per call, load tool CPU {} per call{}",
                round + 1,
                report::format_value(Unit::PerSecond, r.calls_per_second()),
                report::format_value(Unit::Micros, r.latency_us(0.5)),
                report::format_value(Unit::Micros, r.latency_us(0.99)),
                report::format_value(Unit::Micros, r.server_cpu_per_call_us()),
                report::format_value(Unit::Micros, r.client_cpu_per_call_us()),
                if r.failures > 0 {
                    format!(", {} FAILED calls", r.failures)
                } else {
                    String::new()
                }
            );
            after_each(i)?;
            if r.calls > 0 && r.server_cpu.is_zero() {
                eprintln!("warning: the CPU time of {name} did not move in {key}");
            }
            match &mut results[i] {
                Some(total) => total.merge(&r),
                slot @ None => *slot = Some(r),
            }
        }
    }
    Ok(results)
}

fn log_memory(name: &str, r: &MemoryResult) {
    eprintln!(
        "memory, {name}: {} connections, base {} KiB; per idle connection {}, after one call {}, after close {}",
        r.connections,
        r.base / 1024,
        report::format_value(Unit::Bytes, r.idle_per_connection()),
        report::format_value(Unit::Bytes, r.after_call_per_connection()),
        report::format_value(Unit::Bytes, r.closed_per_connection()),
    );
}

/// Runs every scenario on every server of its binding; `Ok(false)` when
/// calls failed or, with `--strict`, a target was missed.
async fn run(o: &Options) -> Result<bool, String> {
    let ticks = procfs::clock_ticks();
    let wanted_fds = o.idle_connections as u64 + 256;
    let has_memory = o
        .scenarios
        .iter()
        .any(|s| matches!(s, Scenario::Memory | Scenario::HttpMemory));
    if has_memory && procfs::open_files_limit().is_some_and(|l| l < wanted_fds) {
        return Err(format!(
            "the open-file limit is below {wanted_fds} for {} connections: raise it (ulimit -n) or lower --idle-connections",
            o.idle_connections
        ));
    }
    for s in &o.servers {
        check_listening(s)?;
        eprintln!("server {}: {} (pid {})", s.name, s.addr, s.pid);
    }
    let echo = Work::echo(o.text_bytes);
    let progress = Work::Progress {
        steps: o.progress_steps,
    };
    // An optional HTTP server that does not answer is left out.
    let mut http_skip = Vec::new();
    for s in &o.http_servers {
        check_listening(&s.server)?;
        match http_scenario::probe(s, &echo).await {
            Ok(()) => {
                eprintln!(
                    "http server {}: {} (pid {}){}",
                    s.server.name,
                    s.server.addr,
                    s.server.pid,
                    if s.era == Era::Legacy {
                        ", initialize first"
                    } else {
                        ""
                    }
                );
                http_skip.push(false);
            }
            Err(e) if s.optional => {
                eprintln!(
                    "http server {} at {} does not answer MCP over HTTP/1.1 ({e}): left out",
                    s.server.name, s.server.addr
                );
                http_skip.push(true);
            }
            Err(e) => {
                return Err(format!(
                    "http server {} at {}: the probe call failed: {e}",
                    s.server.name, s.server.addr
                ));
            }
        }
    }
    for s in &o.stdio_servers {
        eprintln!("stdio server {}: {}", s.name, s.command.join(" "));
    }
    eprintln!(
        "echo request {} bytes framed; clock ticks {ticks}/s; {} s measured after {} s warm-up, {} round(s)",
        echo.template().frame(1).len(),
        o.duration.as_secs_f64(),
        o.warmup.as_secs_f64(),
        o.rounds
    );

    let span = o.calls.map_or(Span::Time(o.duration), Span::Calls);
    let grpc_names: Vec<String> = o.servers.iter().map(|s| s.name.clone()).collect();
    let http_names: Vec<String> = o
        .http_servers
        .iter()
        .map(|s| s.server.name.clone())
        .collect();
    let stdio_names: Vec<String> = o.stdio_servers.iter().map(|s| s.name.clone()).collect();
    let stdio_skip = vec![false; stdio_names.len()];
    let mut measured = Vec::new();
    for (index, scenario) in o.scenarios.iter().enumerate() {
        match scenario {
            Scenario::Memory => {
                let mut results = vec![None; o.servers.len()];
                for (i, s) in o.servers.iter().enumerate() {
                    let r = scenario::run_memory(s, o.idle_connections, &echo, o.settle)
                        .await
                        .map_err(|e| format!("memory scenario on {}: {e}", s.name))?;
                    log_memory(&s.name, &r);
                    check_alive(s)?;
                    results[i] = Some(r);
                }
                measured.push(Measured::Memory {
                    binding: Binding::Grpc,
                    key: "memory".into(),
                    scenario: format!("memory, {} connections", o.idle_connections),
                    target_ratio: Some(TARGET_MEMORY_AFTER_CALL),
                    max_first: None,
                    results,
                });
            }
            Scenario::HttpMemory => {
                let mut results = vec![None; o.http_servers.len()];
                for (i, s) in o.http_servers.iter().enumerate() {
                    if http_skip[i] {
                        continue;
                    }
                    let r = http_scenario::run_memory(s, o.idle_connections, &echo, o.settle)
                        .await
                        .map_err(|e| format!("http-memory on {}: {e}", s.server.name))?;
                    log_memory(&s.server.name, &r);
                    check_alive(&s.server)?;
                    results[i] = Some(r);
                }
                measured.push(Measured::Memory {
                    binding: Binding::Http,
                    key: "http_memory".into(),
                    scenario: format!(
                        "memory, {} HTTP/1.1 keep-alive connections",
                        o.idle_connections
                    ),
                    target_ratio: None,
                    max_first: Some(TARGET_HTTP_MEMORY_AFTER_CALL),
                    results,
                });
            }
            &Scenario::Load {
                progress: is_progress,
                concurrency,
                connections,
                typed,
            } => {
                let work = if is_progress { &progress } else { &echo };
                let load = Load {
                    work: work.clone(),
                    concurrency,
                    connections,
                    typed,
                };
                let kind = match (typed, is_progress) {
                    (true, _) => "typed_echo",
                    (false, true) => "progress",
                    (false, false) => "echo",
                };
                let key = format!("{kind}_c{concurrency}_k{connections}");
                // The typed service is ours only (tonic serves the tunnel).
                let skip: Vec<bool> = (0..o.servers.len()).map(|i| typed && i > 0).collect();
                let results = load_rounds(
                    o,
                    index,
                    &key,
                    &grpc_names,
                    &skip,
                    |i| {
                        Box::pin(scenario::run_load(
                            &o.servers[i],
                            &load,
                            o.warmup,
                            span,
                            ticks,
                        ))
                    },
                    |i| check_alive(&o.servers[i]),
                )
                .await?;
                measured.push(Measured::Load {
                    binding: Binding::Grpc,
                    label: grpc_label(&load, o.progress_steps),
                    key,
                    messages_per_call: load.work.messages_per_call(),
                    target: TARGET_CPU_PER_CALL,
                    echo_in_flight: (!is_progress && !typed && connections == 1)
                        .then_some(concurrency),
                    results,
                });
            }
            &Scenario::HttpLoad {
                progress: is_progress,
                connections,
            } => {
                let work = if is_progress { &progress } else { &echo };
                let kind = if is_progress { "progress" } else { "echo" };
                let key = format!("http_{kind}_k{connections}");
                let results = load_rounds(
                    o,
                    index,
                    &key,
                    &http_names,
                    &http_skip,
                    |i| {
                        Box::pin(http_scenario::run_load(
                            &o.http_servers[i],
                            work,
                            connections,
                            o.warmup,
                            o.duration,
                            ticks,
                        ))
                    },
                    |i| check_alive(&o.http_servers[i].server),
                )
                .await?;
                let calls = if connections == 1 {
                    "1 keep-alive connection".to_owned()
                } else {
                    format!("{connections} keep-alive connections")
                };
                let what = if is_progress {
                    format!(
                        "HTTP progress ({} notifications over SSE + result)",
                        o.progress_steps
                    )
                } else {
                    "HTTP echo (JSON)".to_owned()
                };
                measured.push(Measured::Load {
                    binding: Binding::Http,
                    label: format!("{what}, one call at a time on each of {calls}"),
                    key,
                    messages_per_call: work.messages_per_call(),
                    target: if connections == 1 && !is_progress {
                        TARGET_HTTP_CPU_ONE_CONNECTION
                    } else {
                        TARGET_HTTP_CPU
                    },
                    echo_in_flight: None,
                    results,
                });
            }
            &Scenario::StdioLoad {
                progress: is_progress,
                concurrency,
            } => {
                let work = if is_progress { &progress } else { &echo };
                let kind = if is_progress { "progress" } else { "echo" };
                let key = format!("stdio_{kind}_c{concurrency}");
                let results = load_rounds(
                    o,
                    index,
                    &key,
                    &stdio_names,
                    &stdio_skip,
                    |i| {
                        Box::pin(stdio::run_load(
                            &o.stdio_servers[i],
                            work,
                            concurrency,
                            o.warmup,
                            o.duration,
                            ticks,
                        ))
                    },
                    |_| Ok(()),
                )
                .await?;
                let what = if is_progress {
                    format!(
                        "stdio progress ({} notifications + result)",
                        o.progress_steps
                    )
                } else {
                    "stdio echo".to_owned()
                };
                let calls = if concurrency == 1 {
                    "1 call at a time".to_owned()
                } else {
                    format!("{concurrency} calls in flight")
                };
                measured.push(Measured::Load {
                    binding: Binding::Stdio,
                    label: format!("{what}, {calls}"),
                    key,
                    messages_per_call: work.messages_per_call(),
                    target: TARGET_STDIO_CPU,
                    echo_in_flight: (!is_progress).then_some(concurrency),
                    results,
                });
            }
        }
    }

    let names_of = |binding| match binding {
        Binding::Grpc => &grpc_names,
        Binding::Http => &http_names,
        Binding::Stdio => &stdio_names,
    };
    let mut failed = false;
    for m in &measured {
        let Measured::Load {
            key,
            results,
            binding,
            ..
        } = m
        else {
            continue;
        };
        for (name, r) in names_of(*binding).iter().zip(results) {
            if let Some(r) = r.as_ref().filter(|r| r.failures > 0) {
                failed = true;
                eprintln!(
                    "FAILED: {} of {} calls failed in {key} on {name}; first errors:",
                    r.failures,
                    r.failures + r.calls,
                );
                for e in &r.errors {
                    eprintln!("    {e}");
                }
            }
        }
    }

    let mut missed_any = false;
    let groups = [
        (Binding::Grpc, &grpc_names, None),
        (
            Binding::Http,
            &http_names,
            Some("Streamable HTTP (HTTP/1.1 keep-alive, POST /mcp)"),
        ),
        (
            Binding::Stdio,
            &stdio_names,
            Some("stdio (newline-delimited JSON, server as a child)"),
        ),
    ];
    let mut first_table = true;
    for (binding, names, heading) in groups {
        let of_binding: Vec<&Measured> =
            measured.iter().filter(|m| m.binding() == binding).collect();
        if of_binding.is_empty() {
            continue;
        }
        let (mut table_rows, extra_rows) = rows(&of_binding);
        // Ours against ours behind a bridge: no ratio target (the hop
        // check below holds the bridge).
        if names.get(1).is_some_and(|n| o.bridges.contains(n)) {
            for r in &mut table_rows {
                r.target = None;
            }
        }
        if let Some(heading) = heading {
            if !first_table {
                println!();
            }
            println!("**{heading}**\n");
        }
        first_table = false;
        println!("{}", report::table(names, &table_rows));
        print!("{}", report::machine_lines(names, &table_rows));
        print!("{}", report::machine_lines(names, &extra_rows));
        for r in table_rows.iter().filter(|r| r.misses_target()) {
            missed_any = true;
            let first = r.values.first().copied().flatten().unwrap_or(f64::NAN);
            match (r.target, r.max_first) {
                (Some(t), _) => eprintln!(
                    "target missed: {} / {}: {:.2}× (target ≤ {}×)",
                    r.scenario,
                    r.label,
                    r.ratio().unwrap_or(f64::NAN),
                    t
                ),
                (None, Some(m)) => eprintln!(
                    "target missed: {} / {}: {} (target ≤ {})",
                    r.scenario,
                    r.label,
                    report::format_value(r.unit, first),
                    report::format_value(r.unit, m)
                ),
                (None, None) => {}
            }
        }
    }
    if !o.bridges.is_empty() && bridge_hops(&measured, &names_of, &o.bridges) {
        missed_any = true;
    }
    if failed {
        eprintln!("mcpwire-load: FAILED: calls failed (see above)");
    }
    let strict_miss = o.strict && missed_any;
    Ok(!failed && !strict_miss)
}

/// Prints the bridge's hop checks; `true` when one was missed.
fn bridge_hops<'a>(
    measured: &'a [Measured],
    names_of: &dyn Fn(Binding) -> &'a Vec<String>,
    bridges: &[String],
) -> bool {
    let echoes: Vec<hop::EchoLatency<'_>> = measured
        .iter()
        .filter_map(|m| match m {
            Measured::Load {
                binding,
                key,
                label,
                echo_in_flight: Some(in_flight),
                results,
                ..
            } => Some(hop::EchoLatency {
                grpc: *binding == Binding::Grpc,
                label,
                key,
                in_flight: *in_flight,
                names: names_of(*binding),
                p50: results
                    .iter()
                    .map(|r| r.as_ref().map(|r| r.latency_us(0.5)))
                    .collect(),
            }),
            _ => None,
        })
        .collect();
    let (hops, unchecked) = hop::check(&echoes, bridges);
    for u in &unchecked {
        eprintln!("bridge hop not checked: {u}");
    }
    if hops.is_empty() {
        return false;
    }
    println!(
        "\n**bridge: one extra hop** (p50; limit: the direct call on the host's binding + one direct gRPC call with as many in flight)\n"
    );
    print!("{}", hop::report(&hops));
    let mut missed = false;
    for h in hops.iter().filter(|h| !h.met()) {
        missed = true;
        eprintln!(
            "target missed: {} through {}: p50 {} (limit {} + {})",
            h.label,
            h.bridge,
            report::format_value(Unit::Micros, h.p50),
            report::format_value(Unit::Micros, h.direct),
            report::format_value(Unit::Micros, h.grpc_hop)
        );
    }
    missed
}

fn grpc_label(load: &Load, steps: u32) -> String {
    let what = match load.work {
        Work::Echo { .. } if load.typed => {
            "typed CallTool echo (model_context_protocol.Mcp)".to_owned()
        }
        Work::Echo { .. } => "echo".to_owned(),
        Work::Progress { .. } => format!("progress ({steps} notifications + result)"),
    };
    let calls = if load.concurrency == 1 {
        "1 call at a time".to_owned()
    } else {
        format!("{} concurrent calls", load.concurrency)
    };
    if load.connections == 1 {
        format!("{what}, {calls} on 1 connection")
    } else {
        format!("{what}, {calls} over {} connections", load.connections)
    }
}

/// The rows of a table, and the rows only the `BENCH` lines carry.
fn rows(measured: &[&Measured]) -> (Vec<Row>, Vec<Row>) {
    let mut table = Vec::new();
    let mut extra = Vec::new();
    for m in measured {
        match m {
            Measured::Memory {
                key,
                scenario,
                target_ratio,
                max_first,
                results,
                ..
            } => {
                let get = |f: fn(&MemoryResult) -> f64| -> Vec<Option<f64>> {
                    results.iter().map(|r| r.as_ref().map(f)).collect()
                };
                let row = |label, figure, values, target, max_first| Row {
                    scenario: scenario.clone(),
                    key: key.clone(),
                    label,
                    figure,
                    unit: Unit::Bytes,
                    values,
                    target,
                    max_first,
                };
                table.push(row(
                    "server memory per idle connection",
                    "rss_bytes_per_idle_connection",
                    get(MemoryResult::idle_per_connection),
                    None,
                    None,
                ));
                table.push(row(
                    "server memory per connection after one call",
                    "rss_bytes_per_connection_after_call",
                    get(MemoryResult::after_call_per_connection),
                    *target_ratio,
                    *max_first,
                ));
                extra.push(row(
                    "server memory per connection after closing them",
                    "rss_bytes_per_connection_after_close",
                    get(MemoryResult::closed_per_connection),
                    None,
                    None,
                ));
                extra.push(row(
                    "server memory before the connections",
                    "rss_bytes_base",
                    get(|r| r.base as f64),
                    None,
                    None,
                ));
            }
            Measured::Load {
                key,
                label,
                messages_per_call,
                target,
                results,
                ..
            } => {
                let get = |f: &dyn Fn(&LoadResult) -> f64| -> Vec<Option<f64>> {
                    results.iter().map(|r| r.as_ref().map(f)).collect()
                };
                let row = |figure_label, figure, unit, values, target| Row {
                    scenario: label.clone(),
                    key: key.clone(),
                    label: figure_label,
                    figure,
                    unit,
                    values,
                    target,
                    max_first: None,
                };
                let cpu_label = if *messages_per_call > 1 {
                    "server CPU per call (all its messages)"
                } else {
                    "server CPU per call"
                };
                table.push(row(
                    "calls/s",
                    "calls_per_s",
                    Unit::PerSecond,
                    get(&LoadResult::calls_per_second),
                    None,
                ));
                table.push(row(
                    "p50 latency",
                    "p50_us",
                    Unit::Micros,
                    get(&|r| r.latency_us(0.5)),
                    None,
                ));
                table.push(row(
                    "p99 latency",
                    "p99_us",
                    Unit::Micros,
                    get(&|r| r.latency_us(0.99)),
                    None,
                ));
                table.push(row(
                    cpu_label,
                    "cpu_us_per_call",
                    Unit::Micros,
                    get(&LoadResult::server_cpu_per_call_us),
                    Some(*target),
                ));
                extra.push(row(
                    "load tool CPU per call",
                    "client_cpu_us_per_call",
                    Unit::Micros,
                    get(&LoadResult::client_cpu_per_call_us),
                    None,
                ));
                extra.push(row(
                    "calls measured",
                    "calls",
                    Unit::PerSecond,
                    get(&|r| r.calls as f64),
                    None,
                ));
            }
        }
    }
    (table, extra)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn args(s: &str) -> impl Iterator<Item = String> {
        s.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn options_and_defaults() {
        let o = parse_options(args(
            "--server mcpwire=127.0.0.1:5000,42 --server=tonic=127.0.0.1:5001,43 --duration 0.5 --scenarios memory,echo:256:16",
        ))
        .unwrap();
        assert_eq!(o.servers.len(), 2);
        assert_eq!(o.servers[1].name, "tonic");
        assert_eq!(o.servers[1].pid, 43);
        assert_eq!(o.duration, Duration::from_millis(500));
        assert_eq!(o.scenarios.len(), 2);
        assert!(matches!(
            o.scenarios[1],
            Scenario::Load {
                progress: false,
                concurrency: 256,
                connections: 16,
                typed: false,
            }
        ));
        let all = parse_options(args("--server a=127.0.0.1:1,1")).unwrap();
        assert_eq!(all.scenarios.len(), 8);
        let typed =
            parse_options(args("--server a=127.0.0.1:1,1 --scenarios typed-echo:16:1")).unwrap();
        assert!(matches!(
            typed.scenarios[0],
            Scenario::Load {
                typed: true,
                concurrency: 16,
                ..
            }
        ));
        assert!(
            parse_options(args(
                "--server a=127.0.0.1:1,1 --scenarios typed-progress:1:1"
            ))
            .is_err()
        );
    }

    #[test]
    fn bad_options() {
        for bad in [
            "",
            "--server a=127.0.0.1:1",
            "--server a=127.0.0.1:1,1 --scenarios echo:1:2",
            "--server a=127.0.0.1:1,1 --scenarios nap:1:1",
            "--server a=127.0.0.1:1,1 --duration -1",
            "--server a=127.0.0.1:1,1 --bogus 1",
            "--server a=127.0.0.1:1,1 --scenarios http-echo:1",
            "--stdio-server a=x --scenarios stdio-echo:0",
            "--http-server a=127.0.0.1:1,1,fast",
            "--stdio-server a,fast=x",
            "--stdio-server a=",
        ] {
            assert!(parse_options(args(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn http_and_stdio_servers_and_their_defaults() {
        let o = parse_options(args(
            "--http-server mcpwire=127.0.0.1:5000,42,optional --http-server py=127.0.0.1:5001,43,legacy --stdio-server=rmcp=/bin/rmcp-stdio-server",
        ))
        .unwrap();
        assert!(o.servers.is_empty());
        assert!(o.http_servers[0].optional && o.http_servers[0].era == Era::Modern);
        assert!(!o.http_servers[1].optional && o.http_servers[1].era == Era::Legacy);
        assert_eq!(o.stdio_servers[0].command, vec!["/bin/rmcp-stdio-server"]);
        // The HTTP defaults, then the stdio ones.
        assert_eq!(o.scenarios.len(), 7);
        assert!(matches!(o.scenarios[0], Scenario::HttpMemory));
        assert!(matches!(
            o.scenarios[3],
            Scenario::HttpLoad {
                progress: false,
                connections: 64
            }
        ));
        assert!(matches!(
            o.scenarios[6],
            Scenario::StdioLoad {
                progress: false,
                concurrency: 16
            }
        ));
        let s = parse_stdio_server("mcpwire,legacy=/x/mcpwire serve --stdio").unwrap();
        assert_eq!(s.command, vec!["/x/mcpwire", "serve", "--stdio"]);
        assert_eq!(s.era, Era::Legacy);
        assert!(matches!(
            Scenario::parse("http-progress:4").unwrap(),
            Scenario::HttpLoad {
                progress: true,
                connections: 4
            }
        ));
    }
}
