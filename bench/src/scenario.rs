//! The measurements: calls under load (calls/s, latency, server CPU per
//! call) and server memory per connection (idle, and after one call).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::task::JoinSet;

use crate::client::{self, CallSpec, Connection};
use crate::procfs;
use crate::wire::Work;

/// A server under test: a name for the report, where it listens, its pid.
#[derive(Debug, Clone)]
pub struct Server {
    pub name: String,
    pub addr: SocketAddr,
    pub pid: u32,
}

impl Server {
    pub(crate) fn cpu(&self, ticks: u64) -> Result<Duration, String> {
        procfs::cpu_time(self.pid, ticks).map_err(|e| format!("{}: {e}", self.name))
    }

    pub(crate) fn rss(&self) -> Result<u64, String> {
        procfs::rss_bytes(self.pid).map_err(|e| format!("{}: {e}", self.name))
    }
}

/// `concurrency` calls in flight at all times, spread over `connections`
/// connections (call slot `i` uses connection `i % connections`).
#[derive(Debug, Clone)]
pub struct Load {
    pub work: Work,
    pub concurrency: usize,
    pub connections: usize,
    /// Typed `CallTool` calls instead of the tunnel's `tools/call`.
    pub typed: bool,
}

/// Errors kept word for word per phase; the rest are only counted.
pub(crate) const KEPT_ERRORS: usize = 3;
/// How long a phase may run past its end for its last calls to finish.
pub(crate) const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// What one or more measured phases of a load gave.
#[derive(Debug, Clone)]
pub struct LoadResult {
    pub calls: u64,
    pub failures: u64,
    pub errors: Vec<String>,
    pub elapsed: Duration,
    /// Latency of each successful call, in microseconds.
    pub latency: Histogram<u64>,
    pub server_cpu: Duration,
    /// The CPU time of this load tool over the same time.
    pub client_cpu: Duration,
}

impl LoadResult {
    pub(crate) fn empty() -> Self {
        Self {
            calls: 0,
            failures: 0,
            errors: Vec::new(),
            elapsed: Duration::ZERO,
            latency: new_histogram(),
            server_cpu: Duration::ZERO,
            client_cpu: Duration::ZERO,
        }
    }

    /// Counts a failed call, keeping its error if there is room.
    pub(crate) fn fail(&mut self, e: String) {
        self.failures += 1;
        if self.errors.len() < KEPT_ERRORS {
            self.errors.push(e);
        }
    }

    /// Adds another round of the same load.
    pub fn merge(&mut self, other: &Self) {
        self.calls += other.calls;
        self.failures += other.failures;
        for e in &other.errors {
            if self.errors.len() < KEPT_ERRORS {
                self.errors.push(e.clone());
            }
        }
        self.elapsed += other.elapsed;
        let _ = self.latency.add(&other.latency);
        self.server_cpu += other.server_cpu;
        self.client_cpu += other.client_cpu;
    }

    pub fn calls_per_second(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Server CPU per successful call, in microseconds.
    pub fn server_cpu_per_call_us(&self) -> f64 {
        self.server_cpu.as_secs_f64() * 1e6 / (self.calls.max(1) as f64)
    }

    pub fn client_cpu_per_call_us(&self) -> f64 {
        self.client_cpu.as_secs_f64() * 1e6 / (self.calls.max(1) as f64)
    }

    /// A latency quantile in microseconds.
    pub fn latency_us(&self, quantile: f64) -> f64 {
        self.latency.value_at_quantile(quantile) as f64
    }
}

/// 1 µs to 10 min with 3 significant digits; `saturating_record` caps the rest.
#[allow(clippy::expect_used)] // constant bounds that are valid
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

async fn open_connections(addr: SocketAddr, n: usize) -> Result<Vec<Connection>, String> {
    /// Handshakes in flight at once (the listen backlog stays short).
    const AT_ONCE: usize = 50;
    let mut conns = Vec::with_capacity(n);
    let mut opening = JoinSet::new();
    let mut failure = None;
    for _ in 0..n {
        if opening.len() >= AT_ONCE
            && let Some(done) = opening.join_next().await
        {
            match done {
                Ok(Ok(c)) => conns.push(c),
                Ok(Err(e)) => failure = Some(e),
                Err(e) => failure = Some(e.to_string()),
            }
        }
        opening.spawn(Connection::open(addr));
    }
    while let Some(done) = opening.join_next().await {
        match done {
            Ok(Ok(c)) => conns.push(c),
            Ok(Err(e)) => failure = Some(e),
            Err(e) => failure = Some(e.to_string()),
        }
    }
    match failure {
        None => Ok(conns),
        Some(e) => {
            conns.into_iter().for_each(Connection::close);
            Err(e)
        }
    }
}

/// How long a phase runs: for a time, or for a number of calls (a fixed
/// amount of work, what an instruction count under callgrind needs).
#[derive(Debug, Clone, Copy)]
pub enum Span {
    Time(Duration),
    Calls(u64),
}

/// How long a fixed count of calls may take at most (callgrind is slow).
const CALLS_LIMIT: Duration = Duration::from_secs(600);

/// Runs `load` for `span` on the open `conns`: the calls, failures and
/// latencies (the CPU fields are left at zero).
async fn phase(
    conns: &[Connection],
    spec: &Arc<CallSpec>,
    concurrency: usize,
    span: Span,
    id_base: u64,
) -> LoadResult {
    let start = Instant::now();
    let (duration, budget) = match span {
        Span::Time(d) => (d, None),
        Span::Calls(n) => (CALLS_LIMIT, Some(n)),
    };
    let until = start + duration;
    let started = Arc::new(AtomicU64::new(0));
    let stride = concurrency as u64;
    let mut tasks = JoinSet::new();
    for slot in 0..concurrency {
        let mut send = conns[slot % conns.len()].send.clone();
        let spec = Arc::clone(spec);
        let started = Arc::clone(&started);
        let mut id = id_base + slot as u64;
        tasks.spawn(async move {
            let mut r = LoadResult::empty();
            let more = || match budget {
                Some(n) => started.fetch_add(1, Ordering::Relaxed) < n,
                None => Instant::now() < until,
            };
            while more() {
                let began = Instant::now();
                match client::call(&mut send, &spec, id).await {
                    Ok(()) => {
                        r.calls += 1;
                        r.latency
                            .saturating_record(began.elapsed().as_micros() as u64);
                    }
                    Err(e) => {
                        r.failures += 1;
                        if r.errors.len() < KEPT_ERRORS {
                            r.errors.push(e);
                        }
                        // No tight loop on a broken connection.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                id += stride;
            }
            r
        });
    }
    let mut total = LoadResult::empty();
    let drained = tokio::time::timeout(duration + DRAIN_LIMIT, async {
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(r) => total.merge(&r),
                Err(e) => {
                    total.failures += 1;
                    total.errors.push(format!("a call task failed: {e}"));
                }
            }
        }
    })
    .await;
    if drained.is_err() {
        let hung = tasks.len() as u64;
        tasks.abort_all();
        total.failures += hung;
        total.errors.push(format!(
            "{hung} calls still open {} s after the end",
            DRAIN_LIMIT.as_secs()
        ));
    }
    total.elapsed = start.elapsed();
    total
}

/// Measures `load` on `server`: fresh connections, a warm-up, then
/// `span` of measured calls with the server's CPU time read before and
/// after (every call of the phase has ended when it is read again).
pub async fn run_load(
    server: &Server,
    load: &Load,
    warmup: Duration,
    span: Span,
    ticks: u64,
) -> Result<LoadResult, String> {
    let spec = Arc::new(if load.typed {
        CallSpec::typed(server.addr, load.work.clone())?
    } else {
        CallSpec::new(server.addr, load.work.clone())?
    });
    let conns = open_connections(server.addr, load.connections).await?;
    let mut warm = if warmup.is_zero() {
        LoadResult::empty()
    } else {
        phase(&conns, &spec, load.concurrency, Span::Time(warmup), 1).await
    };
    let me = std::process::id();
    let server_before = server.cpu(ticks)?;
    let client_before = procfs::cpu_time(me, ticks).map_err(|e| e.to_string())?;
    let mut measured = phase(&conns, &spec, load.concurrency, span, 1 << 40).await;
    measured.server_cpu = server.cpu(ticks)?.saturating_sub(server_before);
    measured.client_cpu = procfs::cpu_time(me, ticks)
        .map_err(|e| e.to_string())?
        .saturating_sub(client_before);
    conns.into_iter().for_each(Connection::close);
    // Failures of the warm-up fail the run too.
    measured.failures += warm.failures;
    measured.errors.append(&mut warm.errors);
    measured.errors.truncate(KEPT_ERRORS);
    Ok(measured)
}

/// Server memory (VmRSS) at each step of the memory scenario.
#[derive(Debug, Clone, Copy)]
pub struct MemoryResult {
    pub connections: usize,
    /// Before any connection of the scenario is open.
    pub base: u64,
    /// With the connections open and idle.
    pub idle: u64,
    /// After one `echo` call on each.
    pub after_call: u64,
    /// After they were all closed again.
    pub closed: u64,
}

impl MemoryResult {
    /// The figures of `connections` connections from the RSS readings.
    pub(crate) fn from_readings(
        connections: usize,
        base: u64,
        idle: u64,
        after_call: u64,
        closed: u64,
    ) -> Self {
        Self {
            connections,
            base,
            idle,
            after_call,
            closed,
        }
    }

    fn per_connection(&self, rss: u64) -> f64 {
        (rss as f64 - self.base as f64) / self.connections.max(1) as f64
    }

    pub fn idle_per_connection(&self) -> f64 {
        self.per_connection(self.idle)
    }

    pub fn after_call_per_connection(&self) -> f64 {
        self.per_connection(self.after_call)
    }

    pub fn closed_per_connection(&self) -> f64 {
        self.per_connection(self.closed)
    }
}

/// Opens `n` idle connections, reads the server's VmRSS, makes one `echo`
/// call on each (one after the other), reads it again, closes them. A few
/// connections with a call each warm the server first; `settle` is the pause
/// before each reading.
pub async fn run_memory(
    server: &Server,
    n: usize,
    echo: &Work,
    settle: Duration,
) -> Result<MemoryResult, String> {
    let spec = CallSpec::new(server.addr, echo.clone())?;
    let mut id = 1;
    let warm = open_connections(server.addr, 8).await?;
    for mut c in warm {
        client::call(&mut c.send, &spec, id).await?;
        id += 1;
        c.close();
    }
    tokio::time::sleep(settle).await;
    let base = server.rss()?;
    let mut conns = open_connections(server.addr, n).await?;
    tokio::time::sleep(settle).await;
    let idle = server.rss()?;
    for c in &mut conns {
        if let Err(e) = client::call(&mut c.send, &spec, id).await {
            conns.into_iter().for_each(Connection::close);
            return Err(format!("the call after idle: {e}"));
        }
        id += 1;
    }
    tokio::time::sleep(settle).await;
    let after_call = server.rss()?;
    conns.into_iter().for_each(Connection::close);
    tokio::time::sleep(settle).await;
    let closed = server.rss()?;
    Ok(MemoryResult {
        connections: n,
        base,
        idle,
        after_call,
        closed,
    })
}
