//! The stdio measurements: the server command runs as this tool's child,
//! one JSON-RPC message per line on its stdin and stdout, with a fixed
//! number of calls in flight (ids correlate the answers); its CPU time is
//! read from `/proc` like a network server's.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{ChildStdin, ChildStdout, Command};

use crate::procfs;
use crate::scenario::{DRAIN_LIMIT, KEPT_ERRORS, LoadResult};
use crate::wire::{Checker, Era, Template, Work};

/// A stdio server: a name for the report, the command that starts it and
/// the shape of its requests.
#[derive(Debug, Clone)]
pub struct StdioServer {
    pub name: String,
    pub command: Vec<String>,
    pub era: Era,
}

/// Lines of the child's stderr kept for an error message.
const STDERR_TAIL: usize = 20;
/// How long a child may take to exit after its stdin closes.
const EXIT_LIMIT: Duration = Duration::from_secs(5);

/// A running server child.
struct Child {
    child: tokio::process::Child,
    pid: u32,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    line: Vec<u8>,
}

/// Where a line from the server goes.
#[derive(Deserialize)]
struct Route {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    params: Option<RouteParams>,
}

#[derive(Deserialize)]
struct RouteParams {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<serde_json::Value>,
}

impl Child {
    async fn spawn(s: &StdioServer) -> Result<Self, String> {
        let (program, args) = s
            .command
            .split_first()
            .ok_or_else(|| format!("stdio server {}: no command", s.name))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let pid = child.id().ok_or("the child has no pid")?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the child's pipes are missing".into());
        };
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = Arc::clone(&stderr_tail);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut t) = tail.lock() {
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
        let mut c = Self {
            child,
            pid,
            stdin: BufWriter::new(stdin),
            stdout: BufReader::with_capacity(64 * 1024, stdout),
            stderr_tail,
            line: Vec::with_capacity(1024),
        };
        if s.era == Era::Legacy {
            c.initialize().await.map_err(|e| c.explain(e))?;
        }
        Ok(c)
    }

    /// `e`, with the end of the child's stderr.
    fn explain(&self, e: String) -> String {
        let tail: Vec<String> = self
            .stderr_tail
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        if tail.is_empty() {
            e
        } else {
            format!(
                "{e}; the server's stderr ends with:\n    {}",
                tail.join("\n    ")
            )
        }
    }

    async fn send(&mut self, line: &[u8]) -> Result<(), String> {
        self.stdin
            .write_all(line)
            .await
            .map_err(|e| format!("write to the server: {e}"))
    }

    async fn flush(&mut self) -> Result<(), String> {
        self.stdin
            .flush()
            .await
            .map_err(|e| format!("write to the server: {e}"))
    }

    /// The next line of stdout into `self.line` (without the newline).
    async fn read_line(&mut self) -> Result<(), String> {
        self.line.clear();
        let n = self
            .stdout
            .read_until(b'\n', &mut self.line)
            .await
            .map_err(|e| format!("read from the server: {e}"))?;
        if n == 0 {
            return Err("the server closed its stdout".into());
        }
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        }
        Ok(())
    }

    /// `initialize`, its answer, then `notifications/initialized`.
    async fn initialize(&mut self) -> Result<(), String> {
        let mut line = Era::initialize_json(0);
        line.push(b'\n');
        self.send(&line).await?;
        self.flush().await?;
        self.read_line().await?;
        let v: serde_json::Value = serde_json::from_slice(&self.line)
            .map_err(|e| format!("initialize answer is not JSON: {e}"))?;
        if v.get("result").is_none() {
            return Err(format!("initialize failed: {v}"));
        }
        self.send(Era::INITIALIZED_JSON).await?;
        self.send(b"\n").await?;
        self.flush().await
    }

    /// Keeps `concurrency` calls in flight for `duration`: each answer that
    /// completes a call sends the next request.
    async fn phase(
        &mut self,
        work: &Work,
        template: &Template,
        concurrency: usize,
        duration: Duration,
        id_base: u64,
    ) -> LoadResult {
        let start = Instant::now();
        let until = start + duration;
        let mut r = LoadResult::empty();
        let mut in_flight: HashMap<u64, (Instant, Checker<'_>)> = HashMap::new();
        let mut next_id = id_base;
        let mut request = Vec::with_capacity(1024);
        let ran = tokio::time::timeout(duration + DRAIN_LIMIT, async {
            for _ in 0..concurrency {
                request.clear();
                template.json_into(next_id, &mut request);
                request.push(b'\n');
                self.send(&request).await?;
                in_flight.insert(next_id, (Instant::now(), work.checker(next_id)));
                next_id += 1;
            }
            self.flush().await?;
            while !in_flight.is_empty() {
                self.read_line().await?;
                let route: Route = serde_json::from_slice(&self.line).map_err(|e| {
                    format!(
                        "a line that is not JSON-RPC ({e}): {}",
                        String::from_utf8_lossy(&self.line[..self.line.len().min(200)])
                    )
                })?;
                let is_response = route.id.is_some();
                let id = route
                    .id
                    .or_else(|| route.params.and_then(|p| p.progress_token))
                    .and_then(|v| v.as_u64());
                let Some(id) = id.filter(|id| in_flight.contains_key(id)) else {
                    return Err(format!(
                        "a line for no call in flight: {}",
                        String::from_utf8_lossy(&self.line[..self.line.len().min(200)])
                    ));
                };
                let Some((began, checker)) = in_flight.get_mut(&id) else {
                    continue;
                };
                let checked = checker.message(&self.line);
                let began = *began;
                if is_response || checked.is_err() {
                    in_flight.remove(&id);
                    match checked {
                        Ok(()) => {
                            r.calls += 1;
                            r.latency
                                .saturating_record(began.elapsed().as_micros() as u64);
                        }
                        Err(e) => r.fail(e),
                    }
                    if Instant::now() < until {
                        request.clear();
                        template.json_into(next_id, &mut request);
                        request.push(b'\n');
                        self.send(&request).await?;
                        in_flight.insert(next_id, (Instant::now(), work.checker(next_id)));
                        next_id += 1;
                    }
                }
                // More answers already read: send the requests together.
                if self.stdout.buffer().is_empty() {
                    self.flush().await?;
                }
            }
            Ok::<(), String>(())
        })
        .await;
        let lost = in_flight.len() as u64;
        match ran {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                r.failures += lost;
                let e = self.explain(e);
                r.errors.insert(0, e);
                r.errors.truncate(KEPT_ERRORS);
            }
            Err(_) => {
                r.failures += lost;
                r.errors.insert(
                    0,
                    format!(
                        "{lost} calls still open {} s after the end",
                        DRAIN_LIMIT.as_secs()
                    ),
                );
                r.errors.truncate(KEPT_ERRORS);
            }
        }
        r.elapsed = start.elapsed();
        r
    }

    /// Closes stdin and waits for the exit; kills the child after
    /// [`EXIT_LIMIT`].
    async fn close(mut self) {
        let _ = self.stdin.shutdown().await;
        drop(self.stdin);
        if tokio::time::timeout(EXIT_LIMIT, self.child.wait())
            .await
            .is_err()
        {
            eprintln!(
                "the stdio server (pid {}) did not exit at the end of its input: killed",
                self.pid
            );
            let _ = self.child.kill().await;
        }
    }
}

/// Measures `work` with `concurrency` calls in flight on a fresh child of
/// `s`: a warm-up, then `duration` of measured calls with the child's CPU
/// time read before and after.
pub async fn run_load(
    s: &StdioServer,
    work: &Work,
    concurrency: usize,
    warmup: Duration,
    duration: Duration,
    ticks: u64,
) -> Result<LoadResult, String> {
    let template = work.template_for(s.era);
    let mut child = Child::spawn(s).await?;
    let mut warm = LoadResult::empty();
    if !warmup.is_zero() {
        warm = child.phase(work, &template, concurrency, warmup, 1).await;
    }
    let cpu = |pid| procfs::cpu_time(pid, ticks).map_err(|e| format!("{}: {e}", s.name));
    let me = std::process::id();
    let server_before = cpu(child.pid)?;
    let client_before = cpu(me)?;
    let mut measured = child
        .phase(work, &template, concurrency, duration, 1 << 40)
        .await;
    measured.server_cpu = cpu(child.pid)?.saturating_sub(server_before);
    measured.client_cpu = cpu(me)?.saturating_sub(client_before);
    child.close().await;
    measured.failures += warm.failures;
    measured.errors.append(&mut warm.errors);
    measured.errors.truncate(KEPT_ERRORS);
    Ok(measured)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A shell "server" that answers every echo request of 3 characters
    /// with its result, ids taken from the request.
    fn sh_server(script: &str) -> StdioServer {
        StdioServer {
            name: "sh".into(),
            command: vec!["/bin/sh".into(), "-c".into(), script.into()],
            era: Era::Modern,
        }
    }

    const ECHO_SH: &str = r#"while IFS= read -r line; do
        id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
        printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"abc"}]}}\n' "$id"
    done"#;

    #[tokio::test]
    async fn calls_in_flight_over_a_child() {
        let r = run_load(
            &sh_server(ECHO_SH),
            &Work::echo(3),
            4,
            Duration::ZERO,
            Duration::from_millis(300),
            procfs::clock_ticks(),
        )
        .await
        .unwrap();
        assert_eq!(r.failures, 0, "{:?}", r.errors);
        assert!(r.calls >= 4);
    }

    #[tokio::test]
    async fn a_wrong_answer_and_a_dead_server_fail() {
        let wrong = r#"while IFS= read -r line; do
            id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
            printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"abd"}]}}\n' "$id"
        done"#;
        let r = run_load(
            &sh_server(wrong),
            &Work::echo(3),
            1,
            Duration::ZERO,
            Duration::from_millis(100),
            procfs::clock_ticks(),
        )
        .await
        .unwrap();
        assert!(r.failures > 0 && r.calls == 0);
        let dead = run_load(
            &sh_server("echo oops >&2; exit 3"),
            &Work::echo(3),
            2,
            Duration::ZERO,
            Duration::from_millis(100),
            procfs::clock_ticks(),
        )
        .await;
        // Either the CPU reading of the gone child or the phase fails.
        match dead {
            Ok(r) => assert!(r.failures >= 2, "{r:?}"),
            Err(e) => assert!(!e.is_empty()),
        }
    }
}
