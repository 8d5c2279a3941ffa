//! The stdio server (`mcpwire_tokio::stdio::serve`) as a client on the
//! other end of the pipes sees it: one JSON-RPC message a line, over an
//! in-memory duplex stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{Counters, VERSION, app};
use mcpwire_tokio::{StdioConfig, stdio};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};
use tokio::task::JoinHandle;

/// Longest wait for anything the server should do at once.
const PATIENCE: Duration = Duration::from_secs(10);

struct Peer {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    wr: WriteHalf<DuplexStream>,
    counters: Arc<Counters>,
    served: JoinHandle<std::io::Result<()>>,
}

fn start(config: StdioConfig) -> Peer {
    let counters = Arc::new(Counters::default());
    let (client, server) = tokio::io::duplex(1 << 16);
    let (srd, swr) = tokio::io::split(server);
    let served = tokio::spawn(stdio::serve(
        app(&counters, Duration::from_secs(3600)),
        srd,
        swr,
        config,
    ));
    let (crd, wr) = tokio::io::split(client);
    Peer {
        lines: BufReader::new(crd).lines(),
        wr,
        counters,
        served,
    }
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn request(id: u64, method: &str, mut params: Value) -> String {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn tool_call(id: u64, name: &str, arguments: Value) -> String {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

impl Peer {
    async fn send(&mut self, line: &str) {
        self.wr.write_all(line.as_bytes()).await.unwrap();
        self.wr.write_all(b"\n").await.unwrap();
    }

    /// The next message; `None` at the end of the server's output.
    async fn next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("a line from the server in time")
            .unwrap()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    }

    async fn expect(&mut self) -> Value {
        self.next().await.expect("a message, not the end")
    }

    /// Closes the server's input; the server's `serve` result.
    async fn end_input(&mut self) {
        self.wr.shutdown().await.unwrap();
    }

    async fn finished(self) -> std::io::Result<()> {
        tokio::time::timeout(PATIENCE, self.served)
            .await
            .expect("serve returned in time")
            .unwrap()
    }

    async fn until(&self, what: &str, cond: impl Fn(&Counters) -> bool) {
        let start = Instant::now();
        while !cond(&self.counters) {
            assert!(start.elapsed() < PATIENCE, "waited for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

fn text(result: &Value) -> &str {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn lists_tools_and_calls_one_then_ends_with_the_input() {
    let mut p = start(StdioConfig::default());
    p.send(&request(1, "tools/list", json!({}))).await;
    let list = p.expect().await;
    assert_eq!(list["id"], 1);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"counted_sleep"),
        "{names:?}"
    );
    p.send(&tool_call(2, "echo", json!({"text": "hi"}))).await;
    let echo = p.expect().await;
    assert_eq!((echo["id"].as_u64(), text(&echo)), (Some(2), "hi"));
    p.end_input().await;
    assert!(p.next().await.is_none(), "nothing after the end");
    p.finished().await.unwrap();
}

#[tokio::test]
async fn a_call_with_a_progress_token_gets_its_notifications_then_its_result() {
    let mut p = start(StdioConfig::default());
    let mut params = json!({"name": "progress", "arguments": {"steps": 3, "delay_ms": 0}});
    params["_meta"] = meta();
    params["_meta"]["progressToken"] = json!("tok");
    let line = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    p.send(&line.to_string()).await;
    for step in 1..=3 {
        let n = p.expect().await;
        assert_eq!(n["method"], "notifications/progress", "{n}");
        assert_eq!(n["params"]["progressToken"], "tok");
        assert_eq!(n["params"]["progress"], step);
        assert_eq!(n["params"]["total"], 3);
    }
    let result = p.expect().await;
    assert_eq!(
        (result["id"].as_u64(), text(&result)),
        (Some(7), "done after 3 steps")
    );
}

#[tokio::test]
async fn notifications_cancelled_aborts_the_handler_and_nothing_answers_it() {
    let mut p = start(StdioConfig::default());
    p.send(&tool_call(2, "counted_sleep", json!({"ms": 60_000})))
        .await;
    p.until("the handler to start", |c| {
        c.started.load(Ordering::SeqCst) == 1
    })
    .await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "test"}});
    p.send(&cancel.to_string()).await;
    p.until("the handler to be dropped", |c| {
        c.dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(p.counters.finished.load(Ordering::SeqCst), 0);
    // The next line is the answer to the next request: none for id 2.
    p.send(&tool_call(3, "echo", json!({"text": "after"})))
        .await;
    let echo = p.expect().await;
    assert_eq!((echo["id"].as_u64(), text(&echo)), (Some(3), "after"));
    p.end_input().await;
    assert!(p.next().await.is_none(), "nothing after the end");
}

#[tokio::test]
async fn bad_lines_are_answered_and_the_channel_goes_on() {
    let mut p = start(StdioConfig {
        max_line_bytes: 1024,
        ..StdioConfig::default()
    });
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"ping","pad":"{}"}}"#,
        "x".repeat(2000)
    );
    for line in [
        "not json",
        "[]",
        r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
        "\u{1}\u{2}",
        long.as_str(),
    ] {
        p.send(line).await;
    }
    let mut codes = Vec::new();
    for _ in 0..5 {
        let e = p.expect().await;
        assert_eq!(e["id"], Value::Null, "{e}");
        codes.push(e["error"]["code"].as_i64().unwrap());
    }
    assert_eq!(codes, [-32700, -32600, -32600, -32700, -32600]);
    p.send(&tool_call(1, "echo", json!({"text": "alive"})))
        .await;
    let echo = p.expect().await;
    assert_eq!((echo["id"].as_u64(), text(&echo)), (Some(1), "alive"));
    // A tool's own error is an error response; the channel goes on too.
    p.send(&tool_call(2, "echo", json!({"text": 5}))).await;
    let e = p.expect().await;
    assert_eq!(
        (e["id"].as_u64(), e["error"]["code"].as_i64()),
        (Some(2), Some(-32602))
    );
}

#[tokio::test]
async fn at_the_end_of_input_the_call_in_flight_finishes_then_serve_returns() {
    let mut p = start(StdioConfig::default());
    p.send(&tool_call(1, "counted_sleep", json!({"ms": 200})))
        .await;
    p.end_input().await;
    let result = p.expect().await;
    assert_eq!((result["id"].as_u64(), text(&result)), (Some(1), "slept"));
    assert!(
        p.next().await.is_none(),
        "the output ends after the last answer"
    );
    assert_eq!(p.counters.finished.load(Ordering::SeqCst), 1);
    p.finished().await.unwrap();
}

#[tokio::test]
async fn past_the_grace_period_a_call_is_cancelled_and_serve_returns() {
    let mut p = start(StdioConfig {
        shutdown_grace: Duration::from_millis(200),
        ..StdioConfig::default()
    });
    p.send(&tool_call(1, "counted_sleep", json!({"ms": 60_000})))
        .await;
    p.until("the handler to start", |c| {
        c.started.load(Ordering::SeqCst) == 1
    })
    .await;
    let start = Instant::now();
    p.end_input().await;
    assert!(p.next().await.is_none(), "no answer to the cancelled call");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    let counters = Arc::clone(&p.counters);
    p.finished().await.unwrap();
    assert_eq!(counters.dropped.load(Ordering::SeqCst), 1);
    assert_eq!(counters.finished.load(Ordering::SeqCst), 0);
}

/// More requests than the engine holds at once: the driver stops reading
/// until answers free calls, and every request is answered.
#[tokio::test]
async fn more_requests_than_calls_are_all_answered() {
    let mut p = start(StdioConfig::default());
    let n = 100;
    let mut batch = String::new();
    for id in 1..=n {
        batch += &tool_call(id, "counted_sleep", json!({"ms": 20}));
        batch.push('\n');
    }
    p.wr.write_all(batch.as_bytes()).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..n {
        let r = p.expect().await;
        assert_eq!(text(&r), "slept", "{r}");
        ids.push(r["id"].as_u64().unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, (1..=n).collect::<Vec<_>>());
}

/// `mcpwire serve --stdio` on pipes whose descriptions its parent keeps
/// too: calls are answered while it goes from idle to calls in flight and
/// back (a call with progress, a cancelled one, the end of its input), and
/// the descriptions it inherited are still blocking afterwards (a server
/// that made them non-blocking would break the blocking reads and writes
/// of every other process sharing them).
#[cfg(target_os = "linux")]
#[test]
fn mcpwire_serve_stdio_answers_and_leaves_its_inherited_pipes_blocking() {
    use std::io::{BufRead, Write};
    use std::os::fd::AsRawFd;

    /// Whether `O_NONBLOCK` is set on the description of our `fd`.
    fn non_blocking(fd: i32) -> bool {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        flags & 0o4000 != 0
    }

    let (in_rd, mut in_wr) = std::io::pipe().unwrap();
    let (out_rd, out_wr) = std::io::pipe().unwrap();
    assert!(!non_blocking(in_rd.as_raw_fd()) && !non_blocking(out_wr.as_raw_fd()));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args(["serve", "--stdio"])
        .stdin(in_rd.try_clone().unwrap())
        .stdout(out_wr.try_clone().unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out_rd).lines() {
            let line = line.unwrap();
            let msg: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if tx.send(msg).is_err() {
                return;
            }
        }
    });
    let next = || {
        rx.recv_timeout(PATIENCE)
            .expect("a line from the server in time")
    };
    let mut send = |line: String| writeln!(in_wr, "{line}").unwrap();

    send(tool_call(1, "echo", json!({"text": "one"})));
    let echo = next();
    assert_eq!((echo["id"].as_u64(), text(&echo)), (Some(1), "one"));

    let mut params = json!({"name": "progress", "arguments": {"steps": 2, "delay_ms": 10}});
    params["_meta"] = meta();
    params["_meta"]["progressToken"] = json!("tok");
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}).to_string());
    for step in 1..=2 {
        let n = next();
        assert_eq!(n["method"], "notifications/progress", "{n}");
        assert_eq!(n["params"]["progress"], step);
    }
    assert_eq!(next()["id"], 2);

    // A long call, cancelled after its first notification; the next call
    // is answered and the cancelled one never is.
    let mut params = json!({"name": "progress", "arguments": {"steps": 1000, "delay_ms": 10}});
    params["_meta"] = meta();
    params["_meta"]["progressToken"] = json!("long");
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}).to_string());
    assert_eq!(next()["method"], "notifications/progress");
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": 3, "_meta": meta()}})
        .to_string(),
    );
    send(tool_call(4, "echo", json!({"text": "four"})));
    let echo = loop {
        let msg = next();
        assert_ne!(msg["id"], 3, "the cancelled call was answered: {msg}");
        if msg.get("id").is_some() {
            break msg;
        }
    };
    assert_eq!((echo["id"].as_u64(), text(&echo)), (Some(4), "four"));

    assert!(!non_blocking(in_rd.as_raw_fd()), "stdin left non-blocking");
    assert!(
        !non_blocking(out_wr.as_raw_fd()),
        "stdout left non-blocking"
    );
    // The end of its input ends the server, with status 0.
    drop((in_wr, out_wr));
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// Requests read together whose handlers wait are taken a few at a time:
/// the handlers of the first lines run on (a forwarding handler's request
/// leaves) before the server takes the later lines, and every line is
/// answered.
#[tokio::test]
async fn the_handlers_of_the_first_lines_run_before_later_lines_are_taken() {
    let log = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let app = {
        let log = Arc::clone(&log);
        mcpwire_tokio::App::new("turns", "1").tool(
            "step",
            "Logs its start, yields once, logs that it went on.",
            r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#,
            move |call: mcpwire_tokio::ToolCall| {
                let log = Arc::clone(&log);
                async move {
                    let n = call.arguments()["n"].as_u64().unwrap_or(0);
                    log.lock().unwrap().push(format!("start {n}"));
                    tokio::task::yield_now().await;
                    log.lock().unwrap().push(format!("resumed {n}"));
                    Ok(mcpwire_tokio::ToolResult::text("stepped"))
                }
            },
        )
    };
    let (client, server) = tokio::io::duplex(1 << 16);
    let (srd, swr) = tokio::io::split(server);
    let served = tokio::spawn(stdio::serve(app, srd, swr, StdioConfig::default()));
    let (crd, mut wr) = tokio::io::split(client);
    let mut lines = BufReader::new(crd).lines();
    let n = 8;
    let batch: String = (1..=n)
        .map(|i| tool_call(i, "step", json!({"n": i})) + "\n")
        .collect();
    wr.write_all(batch.as_bytes()).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..n {
        let line = tokio::time::timeout(PATIENCE, lines.next_line())
            .await
            .expect("an answer in time")
            .unwrap()
            .expect("an answer, not the end");
        let r: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(text(&r), "stepped", "{r}");
        ids.push(r["id"].as_u64().unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, (1..=n).collect::<Vec<_>>());
    let log = log.lock().unwrap().clone();
    let at = |what: &str| log.iter().position(|l| l == what).unwrap();
    assert!(
        at("resumed 1") < at("start 5"),
        "the first handlers went on before the fifth line was taken: {log:?}"
    );
    wr.shutdown().await.unwrap();
    let _ = tokio::time::timeout(PATIENCE, served).await;
}
