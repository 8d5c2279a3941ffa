//! `mcpwire-load`: a load generator for the gRPC tunnel binding
//! (`/mcp.zig.transport.v1.Mcp/Call`). It drives one or two running
//! servers with the same `h2` client code, scenario by scenario and
//! interleaved, and prints a Markdown table with the servers side by side
//! and the ratio of the first to the second, then one `BENCH` line per
//! figure.
//!
//! Server CPU comes from `/proc/<pid>/stat` (utime + stime), memory from
//! `/proc/<pid>/status` (VmRSS), so the servers run on this machine.
//! `scripts/bench-load.sh` builds and starts both servers and runs this.

mod client;
mod procfs;
mod report;
mod scenario;
mod wire;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use report::{Row, Unit};
use scenario::{Load, LoadResult, MemoryResult, Server, Span};
use wire::Work;

const USAGE: &str = "usage: mcpwire-load --server NAME=ADDR,PID [--server NAME=ADDR,PID]
         [--duration SECS] [--warmup SECS] [--rounds N] [--scenarios LIST]
         [--idle-connections N] [--text-bytes N] [--progress-steps N]
         [--client-threads N] [--settle-ms N] [--calls N] [--strict]
  --server          a running tunnel server: a name for the report, its
                    address and its pid (CPU and memory are read from /proc);
                    with two, the ratio column is first / second
  --duration        measured seconds per scenario and round (default 5)
  --warmup          unmeasured seconds of the same load before (default 1)
  --rounds          runs of each load scenario, the servers taking turns
                    to go first; the figures sum the rounds (default 1)
  --scenarios       comma-separated, in order (default: all of these):
                    memory, echo:C:K (C calls in flight on K connections),
                    progress:C:K
  --idle-connections  connections of the memory scenario (default 500)
  --text-bytes      the echo text (default 100: a response message of about
                    200 bytes)
  --progress-steps  notifications of a progress call (default 100)
  --client-threads  worker threads of this tool (default 2)
  --settle-ms       pause before each memory reading (default 500)
  --calls           measure this many calls per scenario and round instead
                    of --duration (a fixed amount of work: what
                    scripts/bench-callgrind.sh counts instructions over)
  --strict          exit 1 when a ratio misses its target too
Exit status 1 when any call failed (every response is checked), 2 on a
usage error.";

const DEFAULT_SCENARIOS: &str =
    "memory,echo:1:1,echo:16:1,echo:256:1,echo:256:16,progress:1:1,progress:16:1";

/// Targets of the issue, as the largest ratio ours / tonic.
const TARGET_CPU_PER_CALL: f64 = 0.5;
const TARGET_MEMORY_AFTER_CALL: f64 = 0.25;

#[derive(Debug, Clone)]
enum Scenario {
    Memory,
    Load {
        progress: bool,
        concurrency: usize,
        connections: usize,
    },
}

impl Scenario {
    fn parse(s: &str) -> Result<Self, String> {
        if s == "memory" {
            return Ok(Self::Memory);
        }
        let mut parts = s.split(':');
        let kind = parts.next().unwrap_or_default();
        let num = |p: Option<&str>| -> Result<usize, String> {
            p.and_then(|v| v.parse().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("scenario {s}: want KIND:CALLS:CONNECTIONS"))
        };
        let concurrency = num(parts.next())?;
        let connections = num(parts.next())?;
        if parts.next().is_some() || connections > concurrency {
            return Err(format!(
                "scenario {s}: want KIND:CALLS:CONNECTIONS, CALLS >= CONNECTIONS"
            ));
        }
        match kind {
            "echo" | "progress" => Ok(Self::Load {
                progress: kind == "progress",
                concurrency,
                connections,
            }),
            _ => Err(format!("unknown scenario {s}")),
        }
    }
}

#[derive(Debug)]
struct Options {
    servers: Vec<Server>,
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
}

fn parse_server(v: &str) -> Result<Server, String> {
    let bad = || format!("--server {v}: want NAME=ADDR,PID");
    let (name, rest) = v.split_once('=').ok_or_else(bad)?;
    let (addr, pid) = rest.split_once(',').ok_or_else(bad)?;
    let addr: SocketAddr = addr.parse().map_err(|_| bad())?;
    let pid: u32 = pid.parse().map_err(|_| bad())?;
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(bad());
    }
    Ok(Server {
        name: name.to_owned(),
        addr,
        pid,
    })
}

fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        servers: Vec::new(),
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
    };
    let mut scenarios = DEFAULT_SCENARIOS.to_owned();
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
            "--duration" => o.duration = seconds(&flag, value)?,
            "--warmup" => o.warmup = seconds(&flag, value)?,
            "--rounds" => o.rounds = count(&flag, &value)?,
            "--scenarios" => scenarios = value,
            "--idle-connections" => o.idle_connections = count(&flag, &value)?,
            "--text-bytes" => o.text_bytes = count(&flag, &value)?,
            "--progress-steps" => o.progress_steps = count(&flag, &value)?,
            "--client-threads" => o.client_threads = count(&flag, &value)?,
            "--settle-ms" => o.settle = Duration::from_millis(count(&flag, &value)?),
            "--calls" => o.calls = Some(count(&flag, &value)?).filter(|&n| n > 0),
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    o.scenarios = scenarios
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Scenario::parse)
        .collect::<Result<_, _>>()?;
    if o.servers.is_empty() || o.servers.len() > 2 {
        return Err("give one or two --server".into());
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

/// The figures of one scenario, one entry per server.
enum Measured {
    Memory(Vec<Option<MemoryResult>>),
    Load {
        key: String,
        label: String,
        messages_per_call: u64,
        results: Vec<Option<LoadResult>>,
    },
}

fn check_alive(s: &Server) -> Result<(), String> {
    if procfs::is_alive(s.pid) {
        Ok(())
    } else {
        Err(format!("server {} (pid {}) is gone", s.name, s.pid))
    }
}

/// Runs every scenario on every server; `Ok(false)` when calls failed or,
/// with `--strict`, a target was missed.
async fn run(o: &Options) -> Result<bool, String> {
    let ticks = procfs::clock_ticks();
    let wanted_fds = o.idle_connections as u64 + 256;
    let has_memory = o.scenarios.iter().any(|s| matches!(s, Scenario::Memory));
    if has_memory && procfs::open_files_limit().is_some_and(|l| l < wanted_fds) {
        return Err(format!(
            "the open-file limit is below {wanted_fds} for {} connections: raise it (ulimit -n) or lower --idle-connections",
            o.idle_connections
        ));
    }
    for s in &o.servers {
        check_alive(s)?;
        if !procfs::listens_on(s.pid, s.addr).map_err(|e| format!("server {}: {e}", s.name))? {
            return Err(format!(
                "pid {} does not hold the listening socket {} of server {}: give the server's own pid",
                s.pid, s.addr, s.name
            ));
        }
        eprintln!("server {}: {} (pid {})", s.name, s.addr, s.pid);
    }
    let echo = Work::echo(o.text_bytes);
    let progress = Work::Progress {
        steps: o.progress_steps,
    };
    eprintln!(
        "echo request {} bytes framed; clock ticks {ticks}/s; {} s measured after {} s warm-up, {} round(s)",
        echo.template().frame(1).len(),
        o.duration.as_secs_f64(),
        o.warmup.as_secs_f64(),
        o.rounds
    );

    let span = o.calls.map_or(Span::Time(o.duration), Span::Calls);
    let n = o.servers.len();
    let mut measured = Vec::new();
    let mut failed = false;
    for (index, scenario) in o.scenarios.iter().enumerate() {
        match scenario {
            Scenario::Memory => {
                let mut results = vec![None; n];
                for (i, s) in o.servers.iter().enumerate() {
                    let r = scenario::run_memory(s, o.idle_connections, &echo, o.settle)
                        .await
                        .map_err(|e| format!("memory scenario on {}: {e}", s.name))?;
                    eprintln!(
                        "memory, {}: {} connections, base {} KiB; per idle connection {}, after one call {}, after close {}",
                        s.name,
                        r.connections,
                        r.base / 1024,
                        report::format_value(Unit::Bytes, r.idle_per_connection()),
                        report::format_value(Unit::Bytes, r.after_call_per_connection()),
                        report::format_value(Unit::Bytes, r.closed_per_connection()),
                    );
                    check_alive(s)?;
                    results[i] = Some(r);
                }
                measured.push(Measured::Memory(results));
            }
            &Scenario::Load {
                progress: is_progress,
                concurrency,
                connections,
            } => {
                let work = if is_progress {
                    progress.clone()
                } else {
                    echo.clone()
                };
                let load = Load {
                    work,
                    concurrency,
                    connections,
                };
                let kind = if is_progress { "progress" } else { "echo" };
                let key = format!("{kind}_c{concurrency}_k{connections}");
                let label = load_label(&load, o.progress_steps);
                let mut results: Vec<Option<LoadResult>> = vec![None; n];
                for round in 0..o.rounds {
                    // The servers take turns going first, against drift.
                    let mut order: Vec<usize> = (0..n).collect();
                    if (index + round) % 2 == 1 {
                        order.reverse();
                    }
                    for i in order {
                        let s = &o.servers[i];
                        let r = scenario::run_load(s, &load, o.warmup, span, ticks)
                            .await
                            .map_err(|e| format!("{key} on {}: {e}", s.name))?;
                        eprintln!(
                            "{key}, {} (round {}): {} calls/s, p50 {}, p99 {}, server CPU {} per call, load tool CPU {} per call{}",
                            s.name,
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
                        check_alive(s)?;
                        if r.calls > 0 && r.server_cpu.is_zero() {
                            eprintln!(
                                "warning: the CPU time of {} (pid {}) did not move in {key}",
                                s.name, s.pid
                            );
                        }
                        match &mut results[i] {
                            Some(total) => total.merge(&r),
                            slot @ None => *slot = Some(r),
                        }
                    }
                }
                for (s, r) in o.servers.iter().zip(&results) {
                    if let Some(r) = r.as_ref().filter(|r| r.failures > 0) {
                        failed = true;
                        eprintln!(
                            "FAILED: {} of {} calls failed in {key} on {}; first errors:",
                            r.failures,
                            r.failures + r.calls,
                            s.name
                        );
                        for e in &r.errors {
                            eprintln!("    {e}");
                        }
                    }
                }
                measured.push(Measured::Load {
                    key,
                    label,
                    messages_per_call: load.work.messages_per_call(),
                    results,
                });
            }
        }
    }

    let names: Vec<String> = o.servers.iter().map(|s| s.name.clone()).collect();
    let (table_rows, extra_rows) = rows(&measured, o.idle_connections);
    println!("{}", report::table(&names, &table_rows));
    print!("{}", report::machine_lines(&names, &table_rows));
    print!("{}", report::machine_lines(&names, &extra_rows));
    let missed: Vec<&Row> = table_rows.iter().filter(|r| r.misses_target()).collect();
    for r in &missed {
        eprintln!(
            "target missed: {} / {}: {:.2}× (target ≤ {}×)",
            r.scenario,
            r.label,
            r.ratio().unwrap_or(f64::NAN),
            r.target.unwrap_or(f64::NAN)
        );
    }
    if failed {
        eprintln!("mcpwire-load: FAILED: calls failed (see above)");
    }
    let strict_miss = o.strict && !missed.is_empty();
    Ok(!failed && !strict_miss)
}

fn load_label(load: &Load, steps: u32) -> String {
    let what = match load.work {
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

/// The rows of the table, and the rows only the `BENCH` lines carry.
fn rows(measured: &[Measured], idle: usize) -> (Vec<Row>, Vec<Row>) {
    let mut table = Vec::new();
    let mut extra = Vec::new();
    for m in measured {
        match m {
            Measured::Memory(results) => {
                let scenario = format!("memory, {idle} connections");
                let get = |f: fn(&MemoryResult) -> f64| -> Vec<Option<f64>> {
                    results.iter().map(|r| r.as_ref().map(f)).collect()
                };
                let row = |label, figure, values, target| Row {
                    scenario: scenario.clone(),
                    key: "memory".into(),
                    label,
                    figure,
                    unit: Unit::Bytes,
                    values,
                    target,
                };
                table.push(row(
                    "server memory per idle connection",
                    "rss_bytes_per_idle_connection",
                    get(MemoryResult::idle_per_connection),
                    None,
                ));
                table.push(row(
                    "server memory per connection after one call",
                    "rss_bytes_per_connection_after_call",
                    get(MemoryResult::after_call_per_connection),
                    Some(TARGET_MEMORY_AFTER_CALL),
                ));
                extra.push(row(
                    "server memory per connection after closing them",
                    "rss_bytes_per_connection_after_close",
                    get(MemoryResult::closed_per_connection),
                    None,
                ));
                extra.push(row(
                    "server memory before the connections",
                    "rss_bytes_base",
                    get(|r| r.base as f64),
                    None,
                ));
            }
            Measured::Load {
                key,
                label,
                messages_per_call,
                results,
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
                    Some(TARGET_CPU_PER_CALL),
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
                connections: 16
            }
        ));
        let all = parse_options(args("--server a=127.0.0.1:1,1")).unwrap();
        assert_eq!(all.scenarios.len(), 7);
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
        ] {
            assert!(parse_options(args(bad)).is_err(), "{bad}");
        }
    }
}
