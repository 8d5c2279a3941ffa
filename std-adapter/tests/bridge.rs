//! `mcpwire bridge --stdio-host` as a stdio host sees it: the binary
//! between a test host writing JSON-RPC lines on its stdin and a server
//! in this process (`mcpwire serve`'s demo plus `counted_sleep`) reached
//! over Streamable HTTP or the gRPC tunnel, or a stdio child that crashes.
//! Each scenario runs over both network transports: the transports
//! document's minimum bridge test (discovery, a tool list and a read-only
//! call, malformed input, progress, a cancel, a server that dies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Harness, VERSION};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// Longest wait for anything that should happen at once.
const PATIENCE: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug)]
enum Transport {
    Http,
    Grpc,
}

const BOTH: [Transport; 2] = [Transport::Http, Transport::Grpc];

struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Lines<BufReader<ChildStderr>>,
}

impl Bridge {
    fn spawn(args: &[&str]) -> Self {
        Self::spawn_with_token(args, None)
    }

    /// The bridge with `MCPWIRE_TOKEN` set to `token` (or unset).
    fn spawn_with_token(args: &[&str], token: Option<&str>) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpwire"));
        match token {
            Some(t) => command.env("MCPWIRE_TOKEN", t),
            None => command.env_remove("MCPWIRE_TOKEN"),
        };
        let mut child = command
            .arg("bridge")
            .arg("--stdio-host")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Self {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            stderr: BufReader::new(child.stderr.take().unwrap()).lines(),
            child,
        }
    }

    /// The bridge to the in-process server of `harness` over `transport`.
    fn to(harness: &Harness, transport: Transport) -> Self {
        Self::spawn(&["--to", &url(harness, transport)])
    }

    /// Everything left on stdout and stderr, and the exit status, once
    /// stdin is closed.
    async fn finish_with_output(mut self) -> (std::process::ExitStatus, String, String) {
        drop(self.stdin.take());
        let mut out = String::new();
        while let Ok(Some(line)) = self.stdout.next_line().await {
            out.push_str(&line);
            out.push('\n');
        }
        let mut err = String::new();
        while let Ok(Some(line)) = self.stderr.next_line().await {
            err.push_str(&line);
            err.push('\n');
        }
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the bridge exits")
            .unwrap();
        (status, out, err)
    }

    async fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn send(&mut self, msg: Value) {
        self.send_line(&msg.to_string()).await;
    }

    /// The next line of stdout, which must be JSON.
    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.stdout.next_line())
            .await
            .expect("the bridge answered in time")
            .unwrap()
            .expect("the bridge's stdout is open");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line {line:?}: {e}"))
    }

    async fn startup_line(&mut self) -> String {
        tokio::time::timeout(PATIENCE, self.stderr.next_line())
            .await
            .expect("the startup line in time")
            .unwrap()
            .expect("a startup line")
    }

    /// Closes stdin and waits for the exit status.
    async fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the bridge exits at the end of stdin")
            .unwrap()
    }
}

fn url(harness: &Harness, transport: Transport) -> String {
    match transport {
        Transport::Http => format!("http://{}/mcp", harness.addr),
        Transport::Grpc => format!("grpc://{}", harness.addr),
    }
}

fn request(id: Value, method: &str, mut params: Value) -> Value {
    let meta = params
        .as_object_mut()
        .unwrap()
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta["io.modelcontextprotocol/protocolVersion"] = json!(VERSION);
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn tool_call(id: Value, name: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

async fn server() -> Harness {
    common::start_on_with_tick("127.0.0.1:0", Duration::from_secs(3600)).await
}

#[tokio::test]
async fn discover_list_and_call_keep_the_hosts_ids() {
    for transport in BOTH {
        let harness = server().await;
        let mut bridge = Bridge::to(&harness, transport);
        let startup = bridge.startup_line().await;
        let server_side = match transport {
            Transport::Http => "server side Streamable HTTP",
            Transport::Grpc => "server side gRPC tunnel",
        };
        assert!(
            startup.contains("host side stdio") && startup.contains(server_side),
            "{transport:?}: {startup}"
        );
        assert!(startup.contains(VERSION), "{transport:?}: {startup}");

        bridge
            .send(request(json!("host-a"), "server/discover", json!({})))
            .await;
        let discovered = bridge.recv().await;
        assert_eq!(discovered["id"], "host-a", "{transport:?}: {discovered}");
        assert_eq!(
            discovered["result"]["supportedVersions"],
            json!([VERSION]),
            "{transport:?}: {discovered}"
        );

        bridge
            .send(request(json!(42), "tools/list", json!({})))
            .await;
        let listed = bridge.recv().await;
        assert_eq!(listed["id"], 42, "{transport:?}: {listed}");
        let names: Vec<_> = listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            names.contains(&"echo".to_owned()),
            "{transport:?}: {names:?}"
        );

        bridge
            .send(tool_call(json!(1), "echo", json!({"text": "through"})))
            .await;
        let echoed = bridge.recv().await;
        assert_eq!(echoed["id"], 1, "{transport:?}: {echoed}");
        assert_eq!(
            echoed["result"]["content"][0]["text"], "through",
            "{transport:?}: {echoed}"
        );

        // The server's own errors come back as they are, under the host's id.
        bridge
            .send(tool_call(json!("u"), "no_such_tool", json!({})))
            .await;
        let unknown = bridge.recv().await;
        assert_eq!(unknown["id"], "u", "{transport:?}: {unknown}");
        assert_eq!(unknown["error"]["code"], -32602, "{transport:?}: {unknown}");

        assert!(bridge.finish().await.success(), "{transport:?}");
        harness.stop().await;
    }
}

#[tokio::test]
async fn progress_reaches_the_host_with_its_token() {
    for transport in BOTH {
        let harness = server().await;
        let mut bridge = Bridge::to(&harness, transport);
        let mut call = tool_call(json!(7), "progress", json!({"steps": 3, "delay_ms": 10}));
        call["params"]["_meta"]["progressToken"] = json!("host-token");
        bridge.send(call).await;
        let mut steps = Vec::new();
        let response = loop {
            let msg = bridge.recv().await;
            if msg.get("method").is_none() {
                break msg;
            }
            assert_eq!(
                msg["method"], "notifications/progress",
                "{transport:?}: {msg}"
            );
            assert_eq!(
                msg["params"]["progressToken"], "host-token",
                "{transport:?}: {msg}"
            );
            steps.push(msg["params"]["progress"].as_f64().unwrap());
        };
        assert_eq!(steps, [1.0, 2.0, 3.0], "{transport:?}");
        assert_eq!(response["id"], 7, "{transport:?}: {response}");
        assert_eq!(
            response["result"]["content"][0]["text"], "done after 3 steps",
            "{transport:?}: {response}"
        );
        assert!(bridge.finish().await.success(), "{transport:?}");
        harness.stop().await;
    }
}

#[tokio::test]
async fn a_cancel_stops_the_servers_handler_and_no_response_follows() {
    for transport in BOTH {
        let harness = server().await;
        let counters = harness.counters.clone();
        let mut bridge = Bridge::to(&harness, transport);
        bridge
            .send(tool_call(json!(5), "counted_sleep", json!({"ms": 5000})))
            .await;
        assert!(
            common::eventually_every(Duration::from_millis(10), PATIENCE, || {
                counters.started.load(Ordering::SeqCst) == 1
            })
            .await,
            "{transport:?}: the handler started"
        );
        bridge
            .send(
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 5, "reason": "the user gave up"}}),
            )
            .await;
        assert!(
            common::eventually_every(Duration::from_millis(10), PATIENCE, || {
                counters.dropped.load(Ordering::SeqCst) == 1
            })
            .await,
            "{transport:?}: the server's handler was dropped"
        );
        assert_eq!(counters.finished.load(Ordering::SeqCst), 0, "{transport:?}");
        // The next line the host reads answers the next request: nothing
        // came for the cancelled one.
        bridge
            .send(tool_call(json!(6), "echo", json!({"text": "after"})))
            .await;
        let next = bridge.recv().await;
        assert_eq!(next["id"], 6, "{transport:?}: {next}");
        assert!(bridge.finish().await.success(), "{transport:?}");
        harness.stop().await;
    }
}

#[tokio::test]
async fn malformed_lines_are_answered_and_the_bridge_goes_on() {
    for transport in BOTH {
        let harness = server().await;
        let mut bridge = Bridge::to(&harness, transport);
        bridge.send_line("this is not JSON").await;
        let parse = bridge.recv().await;
        assert_eq!(parse["error"]["code"], -32700, "{transport:?}: {parse}");
        assert_eq!(parse["id"], Value::Null, "{transport:?}: {parse}");

        bridge.send(json!({"jsonrpc": "2.0", "id": 3})).await;
        let no_method = bridge.recv().await;
        assert_eq!(
            no_method["error"]["code"], -32600,
            "{transport:?}: {no_method}"
        );
        assert_eq!(no_method["id"], 3, "{transport:?}: {no_method}");

        bridge.send_line("[1, 2]").await;
        let not_object = bridge.recv().await;
        assert_eq!(
            not_object["error"]["code"], -32600,
            "{transport:?}: {not_object}"
        );

        // Malformed arguments reach the server, whose error comes back.
        bridge
            .send(tool_call(json!(4), "progress", json!({"steps": "many"})))
            .await;
        let bad_args = bridge.recv().await;
        assert_eq!(bad_args["id"], 4, "{transport:?}: {bad_args}");
        assert_eq!(
            bad_args["error"]["code"], -32602,
            "{transport:?}: {bad_args}"
        );

        bridge
            .send(tool_call(json!(8), "echo", json!({"text": "still here"})))
            .await;
        let echoed = bridge.recv().await;
        assert_eq!(
            echoed["result"]["content"][0]["text"], "still here",
            "{transport:?}: {echoed}"
        );
        assert!(bridge.finish().await.success(), "{transport:?}");
        harness.stop().await;
    }
}

#[tokio::test]
async fn a_server_that_dies_mid_call_is_a_visible_failed_call() {
    for transport in BOTH {
        let harness = server().await;
        let counters = harness.counters.clone();
        let mut bridge = Bridge::to(&harness, transport);
        bridge
            .send(tool_call(json!(9), "counted_sleep", json!({"ms": 5000})))
            .await;
        assert!(
            common::eventually_every(Duration::from_millis(10), PATIENCE, || {
                counters.started.load(Ordering::SeqCst) == 1
            })
            .await,
            "{transport:?}: the handler started"
        );
        // Dropping the server's task drops its connections at once.
        harness.served.abort();
        let failed = bridge.recv().await;
        assert_eq!(failed["id"], 9, "{transport:?}: {failed}");
        assert_eq!(failed["error"]["code"], -32603, "{transport:?}: {failed}");
        let message = failed["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("the bridge's call to the server") && message.contains("failed"),
            "{transport:?}: {message}"
        );
        assert!(failed.get("result").is_none(), "{transport:?}: {failed}");
        assert!(bridge.finish().await.success(), "{transport:?}");
    }
}

#[tokio::test]
async fn a_listen_stream_carries_the_hosts_id_and_ends_with_a_cancel() {
    for transport in BOTH {
        let harness = common::start_on_with_tick("127.0.0.1:0", Duration::from_millis(50)).await;
        let mut bridge = Bridge::to(&harness, transport);
        bridge
            .send(request(
                json!("L-host"),
                "subscriptions/listen",
                json!({"notifications": {"toolsListChanged": true}}),
            ))
            .await;
        let ack = bridge.recv().await;
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{transport:?}: {ack}"
        );
        let events: Vec<Value> = [bridge.recv().await, bridge.recv().await].into();
        for msg in [&ack, &events[0], &events[1]] {
            assert_eq!(
                msg["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L-host",
                "{transport:?}: {msg}"
            );
        }
        for event in &events {
            assert_eq!(
                event["method"], "notifications/tools/list_changed",
                "{transport:?}: {event}"
            );
        }
        bridge
            .send(
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "L-host"}}),
            )
            .await;
        // Events already on their way may still come; then the answer to
        // the next request, and no response to the listen.
        bridge
            .send(tool_call(json!("after"), "echo", json!({"text": "x"})))
            .await;
        loop {
            let msg = bridge.recv().await;
            if msg.get("id").is_some() {
                assert_eq!(msg["id"], "after", "{transport:?}: {msg}");
                break;
            }
            assert_eq!(
                msg["method"], "notifications/tools/list_changed",
                "{transport:?}: {msg}"
            );
        }
        assert!(bridge.finish().await.success(), "{transport:?}");
        harness.stop().await;
    }
}

#[tokio::test]
async fn a_downstream_timeout_is_a_failed_call_and_ends_the_handler() {
    for transport in BOTH {
        let harness = server().await;
        let counters = harness.counters.clone();
        let mut bridge = Bridge::spawn(&["--timeout-ms", "300", "--to", &url(&harness, transport)]);
        bridge
            .send(tool_call(json!(11), "counted_sleep", json!({"ms": 5000})))
            .await;
        let failed = bridge.recv().await;
        assert_eq!(failed["id"], 11, "{transport:?}: {failed}");
        assert_eq!(failed["error"]["code"], -32001, "{transport:?}: {failed}");
        assert!(
            common::eventually_every(Duration::from_millis(10), PATIENCE, || {
                counters.dropped.load(Ordering::SeqCst) == 1
            })
            .await,
            "{transport:?}: the server's handler ended"
        );
        assert_eq!(counters.finished.load(Ordering::SeqCst), 0, "{transport:?}");
        assert!(bridge.finish().await.success(), "{transport:?}");
        harness.stop().await;
    }
}

const SECRET: &str = "bridge-secret-token-7d1f";

async fn token_server() -> Harness {
    let counters = std::sync::Arc::new(common::Counters::default());
    let server = mcpwire_tokio::Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(mcpwire_tokio::BearerTokens::new([(SECRET, "bridge")]));
    let app = common::app(&counters, Duration::from_secs(3600));
    common::serve(server, app, counters)
}

#[tokio::test]
async fn the_token_goes_downstream_and_nowhere_else() {
    for transport in BOTH {
        let harness = token_server().await;
        let mut bridge =
            Bridge::spawn_with_token(&["--to", &url(&harness, transport)], Some(SECRET));
        bridge
            .send(request(json!(1), "tools/list", json!({})))
            .await;
        let listed = bridge.recv().await;
        assert!(
            listed["result"]["tools"].is_array(),
            "{transport:?}: {listed}"
        );
        let (status, out, err) = bridge.finish_with_output().await;
        assert!(status.success(), "{transport:?}");
        assert!(!listed.to_string().contains(SECRET), "{transport:?}");
        assert!(
            !out.contains(SECRET) && !err.contains(SECRET),
            "{transport:?}: {err}"
        );
        harness.stop().await;
    }
}

#[tokio::test]
async fn an_unauthorized_bridge_says_so() {
    // Over HTTP the era probe meets the 401 at startup: the bridge does not start.
    let harness = token_server().await;
    let bridge =
        Bridge::spawn_with_token(&["--to", &url(&harness, Transport::Http)], Some("wrong"));
    let (status, out, err) = bridge.finish_with_output().await;
    assert!(!status.success());
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("cannot reach the server"), "{err}");
    // Over gRPC the first call meets UNAUTHENTICATED: a failed call.
    let mut bridge = Bridge::spawn(&["--to", &url(&harness, Transport::Grpc)]);
    bridge
        .send(request(json!(2), "tools/list", json!({})))
        .await;
    let refused = bridge.recv().await;
    assert_eq!(refused["id"], 2, "{refused}");
    assert_eq!(
        refused["error"]["data"]["grpcStatus"], "Unauthenticated",
        "{refused}"
    );
    assert!(bridge.finish().await.success());
    harness.stop().await;
}

/// The Python interpreter itself (the child gets an empty environment):
/// `MCPWIRE_TEST_PYTHON`, else what `python3` says it is.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("MCPWIRE_TEST_PYTHON") {
        return p.into();
    }
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed for this test");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[tokio::test]
async fn a_stdio_child_that_crashes_is_a_failed_call_then_the_next_child_answers() {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/stdio/misbehaving_server.py");
    let python = python();
    let mut bridge = Bridge::spawn(&["--", python.to_str().unwrap(), script.to_str().unwrap()]);
    let startup = bridge.startup_line().await;
    assert!(
        startup.contains("host side stdio") && startup.contains("server side stdio"),
        "{startup}"
    );
    bridge.send(tool_call(json!("c"), "crash", json!({}))).await;
    let failed = bridge.recv().await;
    assert_eq!(failed["id"], "c", "{failed}");
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    bridge
        .send(tool_call(json!("e"), "echo", json!({"text": "again"})))
        .await;
    let echoed = bridge.recv().await;
    assert_eq!(echoed["id"], "e", "{echoed}");
    assert!(echoed.get("result").is_some(), "{echoed}");
    assert!(bridge.finish().await.success());
}
