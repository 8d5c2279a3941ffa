//! The Streamable HTTP measurements: calls on keep-alive HTTP/1.1
//! connections (one call at a time on each, as HTTP/1.1 without pipelining
//! allows) and server memory per keep-alive connection after one call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::http1::{Connection, HttpSpec};
use crate::procfs;
use crate::scenario::{DRAIN_LIMIT, LoadResult, MemoryResult, Server};
use crate::wire::{Era, Work};

/// A server of `POST /mcp`, and the shape its requests take.
#[derive(Debug, Clone)]
pub struct HttpServer {
    pub server: Server,
    pub era: Era,
    /// Skipped (no figures) rather than failed when it does not answer the
    /// probe: a server that may not serve HTTP yet.
    pub optional: bool,
}

/// How long the probe waits for its call.
const PROBE_LIMIT: Duration = Duration::from_secs(5);

/// One `echo` call on a fresh connection: does the server answer MCP over
/// HTTP/1.1 at all?
pub async fn probe(s: &HttpServer, echo: &Work) -> Result<(), String> {
    let spec = HttpSpec::new(s.server.addr, echo.clone(), s.era);
    let call = async {
        let mut c = Connection::open_for(s.server.addr, s.era).await?;
        c.call(&spec, 1).await
    };
    tokio::time::timeout(PROBE_LIMIT, call)
        .await
        .map_err(|_| format!("no answer within {} s", PROBE_LIMIT.as_secs()))?
}

async fn open_connections(s: &HttpServer, n: usize) -> Result<Vec<Connection>, String> {
    /// Connections opening at once (the listen backlog stays short).
    const AT_ONCE: usize = 50;
    let mut conns = Vec::with_capacity(n);
    let mut opening = JoinSet::new();
    let mut failure = None;
    let mut collect = |done: Result<Result<Connection, String>, tokio::task::JoinError>| match done
    {
        Ok(Ok(c)) => conns.push(c),
        Ok(Err(e)) => failure = Some(e),
        Err(e) => failure = Some(e.to_string()),
    };
    for _ in 0..n {
        if opening.len() >= AT_ONCE
            && let Some(done) = opening.join_next().await
        {
            collect(done);
        }
        opening.spawn(Connection::open_for(s.server.addr, s.era));
    }
    while let Some(done) = opening.join_next().await {
        collect(done);
    }
    match failure {
        None => Ok(conns),
        Some(e) => Err(e),
    }
}

/// Runs calls for `duration` on each connection (one at a time per
/// connection), and gives the connections back with the figures.
async fn phase(
    conns: Vec<Connection>,
    spec: &Arc<HttpSpec>,
    duration: Duration,
    id_base: u64,
) -> (Vec<Connection>, LoadResult) {
    let start = Instant::now();
    let until = start + duration;
    let stride = conns.len() as u64;
    let mut tasks = JoinSet::new();
    for (slot, mut conn) in conns.into_iter().enumerate() {
        let spec = Arc::clone(spec);
        let mut id = id_base + slot as u64;
        tasks.spawn(async move {
            let mut r = LoadResult::empty();
            while Instant::now() < until {
                let began = Instant::now();
                match conn.call(&spec, id).await {
                    Ok(()) => {
                        r.calls += 1;
                        r.latency
                            .saturating_record(began.elapsed().as_micros() as u64);
                    }
                    Err(e) => {
                        r.fail(e);
                        // The connection's state is unknown now: a new one,
                        // and no tight loop on a broken server.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        match Connection::open_for(conn.addr(), spec.era).await {
                            Ok(c) => conn = c,
                            Err(e) => {
                                r.fail(e);
                                return (None, r);
                            }
                        }
                    }
                }
                id += stride;
            }
            (Some(conn), r)
        });
    }
    let mut total = LoadResult::empty();
    let mut back = Vec::new();
    let drained = tokio::time::timeout(duration + DRAIN_LIMIT, async {
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok((conn, r)) => {
                    total.merge(&r);
                    back.extend(conn);
                }
                Err(e) => total.fail(format!("a call task failed: {e}")),
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
    (back, total)
}

/// Measures `work` on `connections` keep-alive connections to `s`: a
/// warm-up on the same connections, then `duration` of measured calls with
/// the server's CPU time read before and after.
pub async fn run_load(
    s: &HttpServer,
    work: &Work,
    connections: usize,
    warmup: Duration,
    duration: Duration,
    ticks: u64,
) -> Result<LoadResult, String> {
    let spec = Arc::new(HttpSpec::new(s.server.addr, work.clone(), s.era));
    let mut conns = open_connections(s, connections).await?;
    let mut warm = LoadResult::empty();
    if !warmup.is_zero() {
        (conns, warm) = phase(conns, &spec, warmup, 1).await;
    }
    let me = std::process::id();
    let server_before = s.server.cpu(ticks)?;
    let client_before = procfs::cpu_time(me, ticks).map_err(|e| e.to_string())?;
    let (conns, mut measured) = phase(conns, &spec, duration, 1 << 40).await;
    measured.server_cpu = s.server.cpu(ticks)?.saturating_sub(server_before);
    measured.client_cpu = procfs::cpu_time(me, ticks)
        .map_err(|e| e.to_string())?
        .saturating_sub(client_before);
    drop(conns);
    measured.failures += warm.failures;
    measured.errors.append(&mut warm.errors);
    measured.errors.truncate(crate::scenario::KEPT_ERRORS);
    Ok(measured)
}

/// Opens `n` keep-alive connections (for the legacy era each does its
/// `initialize`), reads the server's VmRSS, makes one `echo` call on each,
/// reads it again, closes them and reads it once more. A few connections
/// with a call each warm the server first.
pub async fn run_memory(
    s: &HttpServer,
    n: usize,
    echo: &Work,
    settle: Duration,
) -> Result<MemoryResult, String> {
    let spec = HttpSpec::new(s.server.addr, echo.clone(), s.era);
    let mut id = 1;
    for mut c in open_connections(s, 8).await? {
        c.call(&spec, id).await?;
        id += 1;
    }
    tokio::time::sleep(settle).await;
    let base = s.server.rss()?;
    let mut conns = open_connections(s, n).await?;
    tokio::time::sleep(settle).await;
    let idle = s.server.rss()?;
    for c in &mut conns {
        c.call(&spec, id)
            .await
            .map_err(|e| format!("the call after idle: {e}"))?;
        id += 1;
    }
    tokio::time::sleep(settle).await;
    let after_call = s.server.rss()?;
    drop(conns);
    tokio::time::sleep(settle).await;
    let closed = s.server.rss()?;
    Ok(MemoryResult::from_readings(
        n, base, idle, after_call, closed,
    ))
}
