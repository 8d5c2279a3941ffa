//! `mcpwire bridge --stdio-host` as a stdio host sees it: the binary
//! between a test host writing JSON-RPC lines on its stdin and a server
//! in this process (`mcpwire serve`'s demo plus `counted_sleep`) reached
//! over Streamable HTTP or the gRPC tunnel, or a stdio child that crashes.
//! Each scenario runs over both network transports: the transports
//! document's minimum bridge test (discovery, a tool list and a read-only
//! call, malformed input, progress, a cancel, a server that dies).
//!
//! Then `mcpwire bridge --listen` as a network host sees it: our Client
//! over Streamable HTTP or the gRPC tunnel, the bridge before a network
//! server or a stdio child; its token, Origin check, cancellation, child
//! restarts, and an older-era server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Harness, VERSION};
use mcpwire_core::mcp::json;
use mcpwire_tokio::{
    CallError, Client, RawMessage, StreamMessage, client::grpc, client::http as http_client,
};
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
        Self::spawn_with_env(args, token, &[])
    }

    /// The bridge with `MCPWIRE_TOKEN` set to `token` (or unset) and `env`.
    fn spawn_with_env(args: &[&str], token: Option<&str>, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpwire"));
        match token {
            Some(t) => command.env("MCPWIRE_TOKEN", t),
            None => command.env_remove("MCPWIRE_TOKEN"),
        };
        for (k, v) in env {
            command.env(k, v);
        }
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
        let line = self.recv_line().await;
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line {line:?}: {e}"))
    }

    /// The next line of stdout, as it came.
    async fn recv_line(&mut self) -> String {
        tokio::time::timeout(PATIENCE, self.stdout.next_line())
            .await
            .expect("the bridge answered in time")
            .unwrap()
            .expect("the bridge's stdout is open")
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

/// `subscriptions/listen` for tool list changes, with id `id`.
fn tools_listen(id: Value) -> Value {
    request(
        id,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    )
}

/// `server/discover` and `tools/list` through a stdio-host bridge: each
/// answer under the host's id, 2026-07-28 the version; the tools' names.
async fn discover_and_list(bridge: &mut Bridge, label: &str) -> Vec<String> {
    bridge
        .send(request(json!("host-a"), "server/discover", json!({})))
        .await;
    let discovered = bridge.recv().await;
    assert_eq!(discovered["id"], "host-a", "{label}: {discovered}");
    assert_eq!(
        discovered["result"]["supportedVersions"],
        json!([VERSION]),
        "{label}: {discovered}"
    );
    bridge
        .send(request(json!(42), "tools/list", json!({})))
        .await;
    let listed = bridge.recv().await;
    assert_eq!(listed["id"], 42, "{label}: {listed}");
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{label}: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
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

/// The bridge's arguments for a Python script of the repository as its
/// stdio child: `flags`, then `-- PYTHON SCRIPT ARGS...`.
fn python_child(flags: &[&str], script: &str, args: &[&str]) -> Vec<String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(script);
    let mut all: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
    all.push("--".into());
    all.push(python().to_str().unwrap().to_owned());
    all.push(script.to_str().unwrap().to_owned());
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all
}

/// `args` as the `&str`s the spawn helpers take.
fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
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

        let names = discover_and_list(&mut bridge, &format!("{transport:?}")).await;
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

/// Over the gRPC tunnel a result goes from the server to the host as the
/// server wrote it (its members in their order, not re-serialised): the
/// text of a direct call's result, under the host's id.
#[tokio::test]
async fn a_result_reaches_the_host_as_the_server_wrote_it() {
    let harness = server().await;
    let arguments = json!({"text": "as written: caf\u{e9}"});
    let params = tool_call(json!(0), "echo", arguments.clone())["params"].to_string();
    let direct = Client::grpc(grpc::Config::new(harness.addr.to_string()))
        .await
        .unwrap();
    let mut call = direct
        .call_raw("tools/call", params.as_bytes(), true, None)
        .await
        .unwrap();
    let Some(RawMessage::Response(answer)) = call.next_raw().await.unwrap() else {
        panic!("no response to the direct call");
    };
    // The result the client engine located is the response's.
    let expected = json::get(answer.text(), b"result").unwrap().to_vec();
    assert_eq!(answer.result(), Some(&expected[..]));

    let mut bridge = Bridge::to(&harness, Transport::Grpc);
    bridge
        .send(tool_call(json!("raw-1"), "echo", arguments))
        .await;
    let line = bridge.recv_line().await;
    assert_eq!(
        json::get(line.as_bytes(), b"id"),
        Some(&b"\"raw-1\""[..]),
        "{line}"
    );
    assert_eq!(
        json::get(line.as_bytes(), b"result"),
        Some(expected.as_slice()),
        "{line}\n{}",
        String::from_utf8_lossy(&expected)
    );
    assert!(bridge.finish().await.success());
    harness.stop().await;
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
        bridge.send(tools_listen(json!("L-host"))).await;
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
    // Over HTTP the era probe meets the 401 at startup: the bridge stays
    // up and answers the host's request with the refusal.
    let harness = token_server().await;
    let mut bridge =
        Bridge::spawn_with_token(&["--to", &url(&harness, Transport::Http)], Some("wrong"));
    bridge
        .send(request(json!(1), "tools/list", json!({})))
        .await;
    let refused = bridge.recv().await;
    assert_eq!(refused["id"], 1, "{refused}");
    assert_eq!(refused["error"]["data"]["httpStatus"], 401, "{refused}");
    let (status, out, err) = bridge.finish_with_output().await;
    assert!(status.success(), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("the server refused the bridge"), "{err}");
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

/// A server that refuses the bridge's token (401), then lets it in, then
/// refuses it again (the token expired): the bridge stays up throughout.
/// Each request it cannot forward is answered with a JSON-RPC error that
/// names the 401 (`data.httpStatus`), but for `server/discover`, answered
/// by the bridge with the refusal in its `instructions`; the server is
/// tried again at the next request, so a request after the server lets
/// the bridge in is served. Over Streamable HTTP the first refusal is the era probe's at
/// startup (before, `mcpwire bridge --stdio-host` exited there, before the
/// host's first request was answered); over the gRPC tunnel, every call's.
#[tokio::test]
async fn a_refused_bridge_stays_up_says_why_and_serves_once_let_in() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    for transport in BOTH {
        let open = Arc::new(AtomicBool::new(false));
        let refusals = Arc::new(AtomicUsize::new(0));
        let (gate, refused) = (Arc::clone(&open), Arc::clone(&refusals));
        let server = mcpwire_tokio::Server::bind("127.0.0.1:0")
            .await
            .unwrap()
            .with_auth(move |token: Option<&str>| {
                if gate.load(Ordering::SeqCst) && token == Some(SECRET) {
                    mcpwire_tokio::AuthDecision::Allow {
                        principal: "bridge".into(),
                    }
                } else {
                    refused.fetch_add(1, Ordering::SeqCst);
                    mcpwire_tokio::AuthDecision::Unauthenticated
                }
            });
        let counters = Arc::new(common::Counters::default());
        let app = common::app(&counters, Duration::from_secs(3600));
        let harness = common::serve(server, app, counters);
        let mut bridge =
            Bridge::spawn_with_token(&["--to", &url(&harness, transport)], Some(SECRET));
        let startup = bridge.startup_line().await;
        let refusal = |answer: &Value, id: &str| {
            assert_eq!(answer["id"], id, "{transport:?}: {answer}");
            assert_eq!(answer["error"]["code"], -32603, "{transport:?}: {answer}");
            assert_eq!(
                answer["error"]["data"]["httpStatus"], 401,
                "{transport:?}: {answer}"
            );
            assert!(
                answer["error"]["message"].as_str().is_some_and(
                    |m| m.contains("refused the bridge's credentials (401 Unauthorized)")
                ),
                "{transport:?}: {answer}"
            );
        };
        // The host's discovery is the bridge's, naming the refusal (an
        // error there would send an SDK host to a legacy initialize that
        // hides it); its next request gets the refusal.
        bridge
            .send(request(json!("d1"), "server/discover", json!({})))
            .await;
        let discovered = bridge.recv().await;
        assert_eq!(
            discovered["result"]["capabilities"],
            json!({"tools": {}}),
            "{transport:?}: {discovered}"
        );
        assert!(
            discovered["result"]["instructions"]
                .as_str()
                .is_some_and(|i| i.contains("(401 Unauthorized)")),
            "{transport:?}: {discovered}"
        );
        bridge
            .send(request(json!("r2"), "tools/list", json!({})))
            .await;
        refusal(&bridge.recv().await, "r2");
        // Tried again at each request.
        assert!(
            refusals.load(Ordering::SeqCst) >= 2,
            "{transport:?}: {startup}"
        );
        open.store(true, Ordering::SeqCst);
        bridge
            .send(tool_call(json!("ok1"), "echo", json!({"text": "in"})))
            .await;
        let served = bridge.recv().await;
        assert_eq!(
            served["result"]["content"][0]["text"], "in",
            "{transport:?}: {served}"
        );
        // The token expires: refused again, and served once it is back.
        open.store(false, Ordering::SeqCst);
        bridge
            .send(tool_call(json!("r3"), "echo", json!({"text": "out"})))
            .await;
        refusal(&bridge.recv().await, "r3");
        open.store(true, Ordering::SeqCst);
        bridge
            .send(tool_call(json!("ok2"), "echo", json!({"text": "back"})))
            .await;
        let served = bridge.recv().await;
        assert_eq!(
            served["result"]["content"][0]["text"], "back",
            "{transport:?}: {served}"
        );
        let (status, _, err) = bridge.finish_with_output().await;
        assert!(status.success(), "{transport:?}: {err}");
        if let Transport::Http = transport {
            assert!(startup.contains("not connected"), "{startup}");
            assert!(
                err.contains("the server refused the bridge's credentials (401 Unauthorized)"),
                "{err}"
            );
            assert!(err.contains("the server let the bridge in"), "{err}");
        }
        harness.stop().await;
    }
}

/// A modern server of another version only answers -32022 with the
/// versions it speaks: the host sees that error, `data.supported` and
/// all, for each request, and the bridge stays up. Over Streamable HTTP
/// and from a stdio child. (Before, the probe fell back to `initialize`,
/// which the server refused too, and the bridge exited with "the server
/// refused initialize".)
#[tokio::test]
async fn a_servers_version_error_reaches_the_host() {
    use tokio::io::AsyncReadExt;
    // Every POST is answered 400 with -32022 and the request's id.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match socket.read(&mut chunk).await {
                            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    while buf.len() < end + 4 + len {
                        match socket.read(&mut chunk).await {
                            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                    }
                    let body: Value =
                        serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or_default();
                    buf.drain(..end + 4 + len);
                    let answer = json!({"jsonrpc": "2.0", "id": body["id"], "error": {
                        "code": -32022, "message": "Unsupported protocol version",
                        "data": {"supported": ["2027-01-01"], "requested": VERSION}}})
                    .to_string();
                    let response = format!(
                        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if socket.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let http = vec!["--to".to_owned(), format!("http://{addr}/mcp")];
    let child = python_child(
        &["--pass-env", "VERSIONS"],
        "tests/stdio/misbehaving_server.py",
        &[],
    );
    for (label, args) in [("http", http), ("stdio child", child)] {
        let mut bridge = Bridge::spawn_with_env(&refs(&args), None, &[("VERSIONS", "2027-01-01")]);
        for (id, method) in [("v1", "server/discover"), ("v2", "tools/list")] {
            bridge.send(request(json!(id), method, json!({}))).await;
            let answer = bridge.recv().await;
            assert_eq!(answer["id"], id, "{label}: {answer}");
            assert_eq!(answer["error"]["code"], -32022, "{label}: {answer}");
            assert_eq!(
                answer["error"]["data"]["supported"],
                json!(["2027-01-01"]),
                "{label}: {answer}"
            );
        }
        let (status, _, err) = bridge.finish_with_output().await;
        assert!(status.success(), "{label}: {err}");
        assert!(
            err.contains("the server refused the bridge"),
            "{label}: {err}"
        );
    }
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

/// The backoff of the restart tests: a call refused during it is answered
/// well before it ends (a call that waited for the new child would not be).
/// Long enough that "well before" (half of it) holds on a busy machine,
/// and that the typed call after the refusal still meets the restart.
const BACKOFF: Duration = Duration::from_millis(4000);
/// [`BACKOFF`] as `--restart-backoff-ms` takes it.
const BACKOFF_MS: &str = "4000";

/// A `tools/call` of `echo` sent every 100 ms with ids `{prefix}0`,
/// `{prefix}1`... until one has a result (the new child is ready), which
/// it returns; every answer before it must be the restart's refusal.
async fn echo_until_answered(bridge: &mut Bridge, prefix: &str) -> Value {
    let start = tokio::time::Instant::now();
    for n in 0.. {
        assert!(start.elapsed() < PATIENCE, "the child is not back");
        let id = format!("{prefix}{n}");
        bridge
            .send(tool_call(json!(id), "echo", json!({"text": "again"})))
            .await;
        let answer = bridge.recv().await;
        assert_eq!(answer["id"], id, "{answer}");
        if answer.get("result").is_some() {
            return answer;
        }
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("the server is restarting")),
            "{answer}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    unreachable!()
}

#[tokio::test]
async fn a_stdio_child_that_crashes_fails_its_call_refuses_new_ones_then_the_next_child_answers() {
    let child = python_child(
        &["--restart-max", "1", "--restart-backoff-ms", BACKOFF_MS],
        "tests/stdio/misbehaving_server.py",
        &[],
    );
    let mut bridge = Bridge::spawn(&refs(&child));
    let startup = bridge.startup_line().await;
    assert!(
        startup.contains("host side stdio") && startup.contains("server side stdio"),
        "{startup}"
    );
    bridge.send(tool_call(json!("c"), "crash", json!({}))).await;
    let failed = bridge.recv().await;
    assert_eq!(failed["id"], "c", "{failed}");
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    // During the backoff: refused at once, not served by the next child.
    let sent = tokio::time::Instant::now();
    bridge
        .send(tool_call(json!("r"), "echo", json!({"text": "early"})))
        .await;
    let refused = bridge.recv().await;
    assert!(
        sent.elapsed() < BACKOFF / 2,
        "the refusal took {:?}",
        sent.elapsed()
    );
    assert_eq!(refused["id"], "r", "{refused}");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(
        refused["error"]["data"]["grpcStatus"], "Unavailable",
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the server is restarting (attempt 1 of 1)")),
        "{refused}"
    );
    // After it, the next child answers.
    let echoed = echo_until_answered(&mut bridge, "e").await;
    assert_eq!(echoed["result"]["content"][0]["text"], "again", "{echoed}");
    assert!(
        sent.elapsed() >= BACKOFF / 2,
        "answered after {:?}",
        sent.elapsed()
    );
    // Its one restart spent, the next crash pauses the restarts for the
    // rest of the window (30 s): every call fails at once, saying so.
    bridge
        .send(tool_call(json!("c2"), "crash", json!({})))
        .await;
    let failed = bridge.recv().await;
    assert_eq!(failed["id"], "c2", "{failed}");
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    for id in ["g1", "g2"] {
        let sent = tokio::time::Instant::now();
        bridge
            .send(tool_call(json!(id), "echo", json!({"text": "late"})))
            .await;
        let gone = bridge.recv().await;
        assert!(sent.elapsed() < BACKOFF / 2, "{:?}", sent.elapsed());
        assert_eq!(gone["id"], id, "{gone}");
        assert_eq!(gone["error"]["code"], -32603, "{gone}");
        assert!(
            gone["error"]["message"].as_str().is_some_and(|m| m
                .contains("the server crashed again after its one restart")
                && m.contains("restarts pause for")),
            "{gone}"
        );
    }
    let (status, _, err) = bridge.finish_with_output().await;
    assert!(status.success(), "{err}");
    assert_eq!(err.matches("restarting the server").count(), 1, "{err}");
}

/// One host that crashes the child again and again (#32 A6): six crashes
/// in a row spend the budget of 5 restarts per window (`--restart-window-ms
/// 5000` here, 30 s by default); every call is refused meanwhile, saying
/// so, and once the window refills a child answers again. (Before, the
/// sixth crash ended the restarts for good: every later call failed with
/// "did not stay up after 5 restarts in a row", though each start had
/// succeeded.)
#[tokio::test]
async fn a_spent_restart_budget_refills_and_the_next_child_answers() {
    let child = python_child(
        &[
            "--restart-max",
            "5",
            "--restart-window-ms",
            "5000",
            "--restart-backoff-ms",
            "20",
        ],
        "tests/stdio/misbehaving_server.py",
        &[],
    );
    let mut bridge = Bridge::spawn(&refs(&child));
    bridge.startup_line().await;
    let start = tokio::time::Instant::now();
    let mut crashes = 0;
    for n in 0.. {
        if crashes == 6 {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "{crashes} crashes");
        let id = format!("c{n}");
        bridge.send(tool_call(json!(id), "crash", json!({}))).await;
        let answer = bridge.recv().await;
        assert_eq!(answer["id"], id, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        if message.contains("the server is restarting") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        } else {
            assert!(
                message.contains("the bridge's call to the server"),
                "{answer}"
            );
            crashes += 1;
        }
    }
    // The budget is spent: a call is refused at once, saying why and for
    // how long (the window is 5 s; the six crashes took about 2).
    bridge
        .send(tool_call(json!("p"), "echo", json!({"text": "now"})))
        .await;
    let paused = bridge.recv().await;
    if start.elapsed() < Duration::from_secs(4) {
        let message = paused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("crashed again after 5 restarts within 5 s")
                && message.contains("restarts pause for"),
            "{paused}"
        );
        assert_eq!(paused["error"]["code"], -32603, "{paused}");
    }
    // Once the window refills, a child is started and answers.
    let served = tokio::time::Instant::now();
    for n in 0.. {
        assert!(
            served.elapsed() < PATIENCE,
            "no child answered after the window"
        );
        let id = format!("e{n}");
        bridge
            .send(tool_call(json!(id), "echo", json!({"text": "back"})))
            .await;
        let answer = bridge.recv().await;
        assert_eq!(answer["id"], id, "{answer}");
        if answer.get("result").is_some() {
            assert_eq!(answer["result"]["content"][0]["text"], "back", "{answer}");
            break;
        }
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("restarts pause for") || message.contains("the server is restarting"),
            "{answer}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, _, err) = bridge.finish_with_output().await;
    assert!(status.success(), "{err}");
    assert!(err.contains("restarts pause for"), "{err}");
    assert_eq!(err.matches("restarting the server").count(), 6, "{err}");
}

/// A pseudo-terminal: its device side (the master, where a board's UART
/// would be) and the path of its terminal side, which the bridge opens as
/// a serial device.
#[cfg(unix)]
fn pseudo_terminal() -> (std::os::fd::OwnedFd, String) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let path = ptsname(&master, Vec::new()).unwrap();
    (master, path.into_string().unwrap())
}

/// `mcpwire bridge --serial` before a board that serves the stdio binding
/// on its UART (`mcpwire serve --stdio` on the device side of a
/// pseudo-terminal): discovery, a list and a call through the device; the
/// board going away mid-call is a failed call, and every call after it
/// gets an answer.
#[cfg(unix)]
#[tokio::test]
async fn a_serial_device_is_a_stdio_server() {
    use std::os::unix::fs::OpenOptionsExt;
    let (master, path) = pseudo_terminal();
    // The terminal side held open here as well: before the bridge opens it,
    // the board's reads would otherwise end at once (no terminal side yet).
    let _held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&path)
        .unwrap();
    let mut board = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args(["serve", "--stdio"])
        .stdin(Stdio::from(master.try_clone().unwrap()))
        .stdout(Stdio::from(master.try_clone().unwrap()))
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The board alone holds the device side now: when it goes, the
    // terminal hangs up, as a board that resets or a cable pulled.
    drop(master);

    // `mcpwire call --serial` first: one call, and the device closed.
    let called = tokio::time::timeout(
        PATIENCE,
        Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args(["call", "--serial", &path, "--baud", "57600", "-v"])
            .args(["tool", "echo", r#"{"text": "one call"}"#])
            .output(),
    )
    .await
    .expect("mcpwire call ends")
    .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&called.stdout),
        String::from_utf8_lossy(&called.stderr),
    );
    assert!(called.status.success(), "{out}\n{err}");
    assert!(out.contains("one call"), "{out}");
    assert!(err.contains("era modern"), "{err}");
    assert!(err.contains("DeviceClosed"), "{err}");

    let mut bridge = Bridge::spawn(&[
        "--serial",
        &path,
        "--baud",
        "57600",
        "--restart-max",
        "1",
        "--restart-backoff-ms",
        BACKOFF_MS,
    ]);
    let startup = bridge.startup_line().await;
    assert!(
        startup.contains("host side stdio")
            && startup.contains(&format!("server side stdio {path} at 57600 baud")),
        "{startup}"
    );
    let names = discover_and_list(&mut bridge, "serial").await;
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    // A long line, and octets a terminal would otherwise act on (^C, ^D,
    // CR): raw mode passes them as they are.
    let text = format!("over the wire \u{3}\u{4}\r {}", "x".repeat(3000));
    bridge
        .send(tool_call(json!(1), "echo", json!({"text": text})))
        .await;
    let echoed = bridge.recv().await;
    assert_eq!(echoed["id"], 1, "{echoed}");
    assert_eq!(echoed["result"]["content"][0]["text"], text, "{echoed}");

    // The board goes away with a call in flight.
    let mut slow = tool_call(
        json!("slow"),
        "progress",
        json!({"steps": 40, "delay_ms": 250}),
    );
    slow["params"]["_meta"]["progressToken"] = json!("p");
    bridge.send(slow).await;
    let first = bridge.recv().await;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    board.kill().await.unwrap();
    let failed = loop {
        let m = bridge.recv().await;
        if m.get("id").is_some() {
            break m;
        }
    };
    assert_eq!(failed["id"], "slow", "{failed}");
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    // No board comes back on that terminal: each call after it is answered
    // with an error, at once or once the one reopening failed.
    for id in ["after1", "after2"] {
        bridge
            .send(tool_call(json!(id), "echo", json!({"text": "anyone?"})))
            .await;
        let answer = bridge.recv().await;
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
    }
    let (status, out, err) = bridge.finish_with_output().await;
    assert!(status.success(), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("the serial device closed"), "{err}");
}

// The network host sides: `mcpwire bridge --listen`, reached by our
// Client over Streamable HTTP or the gRPC tunnel.

const HOST_TOKEN: &str = "host-side-token-93ac";

/// A bridge listening on a free loopback port.
struct Listening {
    child: Child,
    addr: String,
    /// Its stderr before the startup sentence, and that sentence.
    startup: Vec<String>,
    stderr: Lines<BufReader<ChildStderr>>,
    _dir: TempDir,
}

/// A directory removed at drop (the token file lives there).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir() -> TempDir {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "mcpwire-bridge-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

impl Listening {
    /// `mcpwire bridge --listen 127.0.0.1:0 --token-file F` (or
    /// `--no-auth` when `auth` is false), then `args` (the server side),
    /// with `env` set.
    async fn spawn(auth: bool, args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = temp_dir();
        let file = dir.0.join("tokens");
        std::fs::write(&file, format!("# the host's token\n{HOST_TOKEN} host\n")).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpwire"));
        command.env_remove("MCPWIRE_TOKEN");
        for (k, v) in env {
            command.env(k, v);
        }
        command.args(["bridge", "--listen", "127.0.0.1:0"]);
        if auth {
            command.arg("--token-file").arg(&file);
        } else {
            command.arg("--no-auth");
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut startup = Vec::new();
        let addr = loop {
            let line = tokio::time::timeout(PATIENCE, stderr.next_line())
                .await
                .expect("the startup sentence in time")
                .unwrap()
                .unwrap_or_else(|| panic!("the bridge ended before listening: {startup:?}"));
            startup.push(line.clone());
            if let Some(rest) = line.split_once("host side ").map(|(_, r)| r)
                && line.starts_with("mcpwire bridge ")
            {
                break rest.split(' ').next().unwrap().to_owned();
            }
        };
        Self {
            child,
            addr,
            startup,
            stderr,
            _dir: dir,
        }
    }

    fn sentence(&self) -> &str {
        self.startup.last().unwrap()
    }

    /// Our Client as the host, over `transport`, with `token`.
    async fn host(&self, transport: Transport, token: Option<&str>) -> Result<Client, CallError> {
        match transport {
            Transport::Http => {
                let mut config = http_client::Config::new(&format!("http://{}/mcp", self.addr))?;
                config.bearer = token.map(str::to_owned);
                Client::http(config).await
            }
            Transport::Grpc => {
                let mut config = grpc::Config::new(self.addr.clone());
                if let Some(t) = token {
                    config
                        .metadata
                        .push(("authorization".into(), format!("Bearer {t}")));
                }
                Ok(Client::grpc(config).await.unwrap())
            }
        }
    }

    /// SIGTERM; the exit status, stdout and the rest of stderr.
    async fn terminate(mut self) -> (std::process::ExitStatus, String, String) {
        let pid = self.child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the bridge ends at SIGTERM")
            .unwrap();
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            use tokio::io::AsyncReadExt;
            stdout.read_to_string(&mut out).await.unwrap();
        }
        let mut err = self.startup.join("\n");
        while let Ok(Some(line)) = self.stderr.next_line().await {
            err.push('\n');
            err.push_str(&line);
        }
        (status, out, err)
    }
}

/// `mcpwire serve --stdio` as a stdio server.
fn serve_stdio() -> [&'static str; 4] {
    ["--", env!("CARGO_BIN_EXE_mcpwire"), "serve", "--stdio"]
}

/// Discovery, a tool list, a call, a server error, progress: through the
/// bridge, as the host sees them.
async fn the_minimum_through(host: &Client, label: &str) {
    let discovered = host
        .request("server/discover", json!({}))
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(
        discovered["result"]["supportedVersions"],
        json!([VERSION]),
        "{label}: {discovered}"
    );
    let listed = host.request("tools/list", json!({})).await.unwrap();
    let names: Vec<_> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{label}: {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"echo".to_owned()), "{label}: {names:?}");
    let echoed = host
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "across"}}),
        )
        .await
        .unwrap();
    assert_eq!(
        echoed["result"]["content"][0]["text"], "across",
        "{label}: {echoed}"
    );
    // The result is the server's, not rewritten: its serverInfo is the
    // server's, not the bridge's.
    assert_ne!(
        echoed["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpwire-bridge",
        "{label}: {echoed}"
    );
    let unknown = host
        .request(
            "tools/call",
            json!({"name": "no_such_tool", "arguments": {}}),
        )
        .await;
    let code = match unknown {
        Ok(r) => r["error"]["code"].as_i64(),
        Err(e) => e.diagnostics.rpc_code.map(i64::from),
    };
    assert_eq!(code, Some(-32602), "{label}");

    let mut call = host
        .call(json!({"jsonrpc": "2.0", "method": "tools/call", "params": {
            "name": "progress", "arguments": {"steps": 2, "delay_ms": 10},
            "_meta": {"progressToken": "host-progress"}}}))
        .await
        .unwrap();
    let mut steps = 0;
    loop {
        match call.next().await.unwrap() {
            Some(StreamMessage::Notification(n)) => {
                assert_eq!(n["method"], "notifications/progress", "{label}: {n}");
                steps += 1;
            }
            Some(StreamMessage::Response(r)) => {
                assert_eq!(
                    r["result"]["content"][0]["text"], "done after 2 steps",
                    "{label}: {r}"
                );
                break;
            }
            None => panic!("{label}: no response"),
        }
    }
    assert_eq!(steps, 2, "{label}");
}

#[tokio::test]
async fn network_hosts_reach_network_and_stdio_servers() {
    for (host, downstream) in [
        (Transport::Http, Some(Transport::Grpc)),
        (Transport::Http, None),
        (Transport::Grpc, Some(Transport::Http)),
        (Transport::Grpc, None),
    ] {
        let label = format!("{host:?} host -> {downstream:?} server (None: stdio)");
        let harness = server().await;
        let server_url;
        let args: Vec<&str> = match downstream {
            Some(t) => {
                server_url = url(&harness, t);
                vec!["--to", &server_url]
            }
            None => serve_stdio().into(),
        };
        let bridge = Listening::spawn(true, &args, &[]).await;
        let sentence = bridge.sentence().to_owned();
        assert!(
            sentence.contains(VERSION)
                && sentence.contains("gRPC and Streamable HTTP at /mcp")
                && sentence.contains("1 bearer token(s)")
                && sentence.contains(match downstream {
                    Some(Transport::Http) => "server side Streamable HTTP",
                    Some(Transport::Grpc) => "server side gRPC tunnel",
                    None => "server side stdio",
                }),
            "{label}: {sentence}"
        );
        assert!(bridge.addr.starts_with("127.0.0.1:"), "{label}");
        let client = bridge.host(host, Some(HOST_TOKEN)).await.unwrap();
        the_minimum_through(&client, &label).await;
        client.close().await;
        let (status, out, err) = bridge.terminate().await;
        assert!(status.success(), "{label}: {err}");
        assert!(out.is_empty(), "{label}: {out}");
        assert!(!err.contains(HOST_TOKEN), "{label}: {err}");
        harness.stop().await;
    }
}

#[tokio::test]
async fn a_host_without_the_token_is_refused() {
    let harness = server().await;
    let bridge = Listening::spawn(true, &["--to", &url(&harness, Transport::Grpc)], &[]).await;
    for token in [None, Some("not-the-token")] {
        // Over HTTP the era probe meets the 401.
        let e = bridge.host(Transport::Http, token).await.unwrap_err();
        assert_eq!(e.diagnostics.http_status, Some(401), "{token:?}: {e}");
        // Over gRPC the call is UNAUTHENTICATED.
        let grpc = bridge.host(Transport::Grpc, token).await.unwrap();
        let e = grpc.request("tools/list", json!({})).await.unwrap_err();
        assert_eq!(e.status, mcpwire_core::grpc::Code::Unauthenticated, "{e}");
    }
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
    harness.stop().await;
}

/// The status line of a raw HTTP/1.1 POST to the bridge's endpoint.
async fn post_status(addr: &str, extra_headers: &str) -> String {
    use tokio::io::AsyncReadExt;
    let body = request(json!(1), "tools/list", json!({})).to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: {VERSION}\r\n\
         Mcp-Method: tools/list\r\n{extra_headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().unwrap_or_default().to_owned()
}

/// `Mcp-Name: echo` with `{"name":"echo",…,"name":"counted_sleep"}`: the
/// bridge's host side refuses it (400, -32600) before forwarding, over
/// HTTP/1.1 and on the gRPC tunnel, and a repeated `Mcp-Name` (-32020);
/// the server's `counted_sleep` never runs (before, the bridge checked
/// `echo` and its re-serialised request ran the last name downstream).
/// A stdio host's line is refused the same way (-32600).
#[tokio::test]
async fn a_repeated_member_or_header_is_refused_before_forwarding() {
    use tokio::io::AsyncReadExt;
    let two_names = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"x","ms":1}},"name":"counted_sleep","_meta":{{"io.modelcontextprotocol/protocolVersion":"{VERSION}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let one_name = tool_call(json!(8), "echo", json!({"text": "x"})).to_string();
    for transport in BOTH {
        let harness = server().await;
        let bridge = Listening::spawn(true, &["--to", &url(&harness, transport)], &[]).await;
        // HTTP/1.1.
        for (body, extra, code) in [
            (&two_names, "", -32600),
            (&one_name, "Mcp-Name: echo\r\n", -32020),
        ] {
            let mut stream = tokio::net::TcpStream::connect(&bridge.addr).await.unwrap();
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nAuthorization: Bearer {HOST_TOKEN}\r\n\
                 Mcp-Protocol-Version: {VERSION}\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n\
                 {extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                bridge.addr,
                body.len()
            );
            stream.write_all(head.as_bytes()).await.unwrap();
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer)).await;
            let text = String::from_utf8_lossy(&answer);
            assert!(text.starts_with("HTTP/1.1 400"), "{transport:?}: {text}");
            let json = &text[text.find("\r\n\r\n").unwrap() + 4..];
            let response: Value = serde_json::from_str(json).unwrap();
            assert_eq!(response["error"]["code"], code, "{transport:?}: {response}");
        }
        // The gRPC tunnel.
        let mut send = common::connect(bridge.addr.parse().unwrap()).await;
        let auth = format!("Bearer {HOST_TOKEN}");
        for (body, twice, code) in [(&two_names, false, "-32600"), (&one_name, true, "-32020")] {
            let mut request = http::Request::builder()
                .method("POST")
                .uri(format!("http://127.0.0.1{}", common::PATH))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("authorization", &auth)
                .header("mcp-protocol-version", VERSION)
                .header("mcp-method", "tools/call")
                .header("mcp-name", "echo");
            if twice {
                request = request.header("mcp-name", "echo");
            }
            send = send.ready().await.unwrap();
            let (response, mut stream) =
                send.send_request(request.body(()).unwrap(), false).unwrap();
            stream
                .send_data(common::frame(body.as_bytes()), true)
                .unwrap();
            let reply = tokio::time::timeout(PATIENCE, common::collect(response))
                .await
                .expect("the call ends");
            assert_eq!(
                reply.get("grpc-status"),
                Some("3"),
                "{transport:?}: {reply:?}"
            );
            assert_eq!(
                reply.get("mcp-error-code"),
                Some(code),
                "{transport:?}: {reply:?}"
            );
        }
        let (status, _, _) = bridge.terminate().await;
        assert!(status.success());
        // A stdio host.
        let mut stdio = Bridge::to(&harness, transport);
        stdio.send_line(&two_names).await;
        let refused = stdio.recv().await;
        assert_eq!(refused["error"]["code"], -32600, "{transport:?}: {refused}");
        assert!(stdio.finish().await.success(), "{transport:?}");
        assert_eq!(
            harness.counters.started.load(Ordering::SeqCst),
            0,
            "{transport:?}: the server ran the second name"
        );
        harness.stop().await;
    }
}

#[tokio::test]
async fn a_foreign_origin_is_refused_and_a_local_one_served() {
    let harness = server().await;
    let bridge = Listening::spawn(true, &["--to", &url(&harness, Transport::Grpc)], &[]).await;
    let auth = format!("Authorization: Bearer {HOST_TOKEN}\r\n");
    let foreign = post_status(
        &bridge.addr,
        &format!("{auth}Origin: http://evil.example\r\n"),
    )
    .await;
    assert!(foreign.contains(" 403"), "{foreign}");
    let local = post_status(
        &bridge.addr,
        &format!("{auth}Origin: http://127.0.0.1:{}\r\n", harness.addr.port()),
    )
    .await;
    assert!(local.contains(" 200"), "{local}");
    let no_token = post_status(&bridge.addr, "").await;
    assert!(no_token.contains(" 401"), "{no_token}");
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
    harness.stop().await;
}

#[tokio::test]
async fn no_auth_is_a_choice_with_a_warning() {
    let harness = server().await;
    let bridge = Listening::spawn(false, &["--to", &url(&harness, Transport::Http)], &[]).await;
    let startup = bridge.startup.join("\n");
    assert!(
        startup.contains("warning: --no-auth") && startup.contains("no authentication"),
        "{startup}"
    );
    // The warning names the port the bridge took, not the 0 it was given.
    assert!(
        startup.contains(&format!("whoever reaches {} uses", bridge.addr)),
        "{startup}"
    );
    let client = bridge.host(Transport::Http, None).await.unwrap();
    let listed = client.request("tools/list", json!({})).await.unwrap();
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    client.close().await;
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
    harness.stop().await;

    // Neither a token file nor --no-auth: the bridge does not start.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args([
            "bridge",
            "--listen",
            "127.0.0.1:0",
            "--to",
            "grpc://127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--token-file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A token on the command line is refused (the process list shows it).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args([
            "bridge",
            "--listen",
            "127.0.0.1:0",
            "--token",
            HOST_TOKEN,
            "--to",
            "grpc://127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn a_hosts_cancel_reaches_the_server() {
    // HTTP host (its stream closed) -> gRPC server; gRPC host (RST_STREAM)
    // -> HTTP server.
    for (host, downstream) in [
        (Transport::Http, Transport::Grpc),
        (Transport::Grpc, Transport::Http),
    ] {
        let harness = server().await;
        let counters = harness.counters.clone();
        let bridge = Listening::spawn(true, &["--to", &url(&harness, downstream)], &[]).await;
        let client = bridge.host(host, Some(HOST_TOKEN)).await.unwrap();
        let call = client
            .call(request(
                json!(1),
                "tools/call",
                json!({"name": "counted_sleep", "arguments": {"ms": 5000}}),
            ))
            .await
            .unwrap();
        assert!(
            common::eventually_every(Duration::from_millis(10), PATIENCE, || {
                counters.started.load(Ordering::SeqCst) == 1
            })
            .await,
            "{host:?}: the server's handler started"
        );
        drop(call);
        assert!(
            common::eventually_every(Duration::from_millis(10), PATIENCE, || {
                counters.dropped.load(Ordering::SeqCst) == 1
            })
            .await,
            "{host:?} -> {downstream:?}: the server's handler was dropped"
        );
        assert_eq!(counters.finished.load(Ordering::SeqCst), 0, "{host:?}");
        client.close().await;
        let (status, _, _) = bridge.terminate().await;
        assert!(status.success());
        harness.stop().await;
    }
}

/// A host's `tools/call` of `name`: its error (code and message), or
/// `None` for a result.
async fn call_error(client: &Client, name: &str, text: &str) -> Option<Value> {
    let answer = client
        .request(
            "tools/call",
            json!({"name": name, "arguments": {"text": text}}),
        )
        .await;
    match answer {
        Ok(r) if r.get("result").is_some() => {
            assert_eq!(r["result"]["content"][0]["text"], text, "{r}");
            None
        }
        Ok(r) => Some(r["error"].clone()),
        Err(e) => Some(json!({"code": e.diagnostics.rpc_code, "message": e.message})),
    }
}

#[tokio::test]
async fn a_crashing_child_fails_its_call_refuses_new_ones_and_is_restarted_twice() {
    let child = python_child(
        &["--restart-backoff-ms", BACKOFF_MS],
        "tests/stdio/misbehaving_server.py",
        &[],
    );
    let bridge = Listening::spawn(true, &refs(&child), &[]).await;
    // A round over each host binding: Streamable HTTP, then the gRPC
    // tunnel.
    for (round, transport) in BOTH.into_iter().enumerate() {
        let client = bridge.host(transport, Some(HOST_TOKEN)).await.unwrap();
        let failed = call_error(&client, "crash", "")
            .await
            .expect("the crash fails");
        assert!(
            failed["message"]
                .as_str()
                .is_some_and(|m| m.contains("the bridge's call to the server")),
            "{transport:?}: {failed}"
        );
        let sent = tokio::time::Instant::now();
        let refused = call_error(&client, "echo", "early")
            .await
            .expect("refused while restarting");
        assert!(
            sent.elapsed() < BACKOFF / 2,
            "{transport:?}: {:?}",
            sent.elapsed()
        );
        assert_eq!(refused["code"], -32603, "{transport:?}: {refused}");
        // The second crash within the stable time is the second start in
        // a row.
        let attempt = format!("the server is restarting (attempt {} of 5)", round + 1);
        assert!(
            refused["message"]
                .as_str()
                .is_some_and(|m| m.contains(&attempt)),
            "{transport:?}: {refused}"
        );
        // The typed service says the same in its trailers (INTERNAL and
        // -32603, as the binding maps an error that is not the caller's).
        let (result, trailers) = typed_call(
            &bridge.addr,
            mcpwire_proto::gcp::Rpc::CallTool,
            json!({"name": "echo", "arguments": {"text": "typed"}}),
        )
        .await;
        assert!(result.is_none(), "{transport:?}: {result:?}");
        let header = |name: &str| trailers.get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(header("grpc-status").as_deref(), Some("13"), "{trailers:?}");
        assert_eq!(
            header("mcp-error-code").as_deref(),
            Some("-32603"),
            "{trailers:?}"
        );
        assert!(
            header("grpc-message").is_some_and(|m| m.contains("restarting")),
            "{trailers:?}"
        );
        let start = tokio::time::Instant::now();
        while let Some(refused) = call_error(&client, "echo", "back").await {
            assert!(
                start.elapsed() < PATIENCE,
                "{transport:?}: the child is not back"
            );
            assert!(
                refused["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("the server is restarting")),
                "{transport:?}: {refused}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        client.close().await;
    }
    let (status, _, err) = bridge.terminate().await;
    assert!(status.success(), "{err}");
    assert_eq!(err.matches("restarting the server").count(), 2, "{err}");
}

#[tokio::test]
async fn the_hosts_token_stays_at_the_bridge() {
    // The server accepts the host's token: were the bridge to pass it on,
    // the call would succeed. Without MCPWIRE_TOKEN it is refused.
    let counters = std::sync::Arc::new(common::Counters::default());
    let server = mcpwire_tokio::Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(mcpwire_tokio::BearerTokens::new([
            (HOST_TOKEN, "host"),
            (SECRET, "bridge"),
        ]));
    let harness = common::serve(
        server,
        common::app(&counters, Duration::from_secs(3600)),
        counters,
    );
    let target = url(&harness, Transport::Grpc);
    let bridge = Listening::spawn(true, &["--to", &target], &[]).await;
    let client = bridge
        .host(Transport::Grpc, Some(HOST_TOKEN))
        .await
        .unwrap();
    let refused = client.request("tools/list", json!({})).await;
    let text = format!("{refused:?}");
    assert!(text.contains("Unauthenticated"), "{text}");
    client.close().await;
    let (_, out, err) = bridge.terminate().await;
    assert!(
        !out.contains(HOST_TOKEN) && !err.contains(HOST_TOKEN),
        "{err}"
    );

    // With MCPWIRE_TOKEN the bridge's own credential goes downstream.
    let bridge = Listening::spawn(true, &["--to", &target], &[("MCPWIRE_TOKEN", SECRET)]).await;
    let client = bridge
        .host(Transport::Grpc, Some(HOST_TOKEN))
        .await
        .unwrap();
    let listed = client.request("tools/list", json!({})).await.unwrap();
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    client.close().await;
    let (status, out, err) = bridge.terminate().await;
    assert!(status.success());
    for secret in [HOST_TOKEN, SECRET] {
        assert!(!out.contains(secret) && !err.contains(secret), "{err}");
    }
    harness.stop().await;
}

#[tokio::test]
async fn an_older_server_is_served_to_the_host_as_the_current_era() {
    let child = python_child(
        &["--pass-env", "LEGACY"],
        "tests/stdio/misbehaving_server.py",
        &[],
    );
    let bridge = Listening::spawn(true, &refs(&child), &[("LEGACY", "1")]).await;
    let sentence = bridge.sentence().to_owned();
    assert!(
        sentence.contains("2025-11-25") && sentence.contains(&format!("stays MCP {VERSION}")),
        "{sentence}"
    );
    let client = bridge
        .host(Transport::Http, Some(HOST_TOKEN))
        .await
        .unwrap();
    let discovered = client.request("server/discover", json!({})).await.unwrap();
    assert_eq!(
        discovered["result"]["supportedVersions"],
        json!([VERSION]),
        "{discovered}"
    );
    assert_eq!(
        discovered["result"]["capabilities"],
        json!({"tools": {}}),
        "{discovered}"
    );
    let echoed = client
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "old"}}),
        )
        .await
        .unwrap();
    assert_eq!(echoed["result"]["content"][0]["text"], "old", "{echoed}");
    client.close().await;
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
}

#[tokio::test]
async fn a_network_hosts_listen_stream_is_the_servers() {
    for (host, downstream) in [
        (Transport::Http, Transport::Grpc),
        (Transport::Grpc, Transport::Http),
    ] {
        let harness = common::start_on_with_tick("127.0.0.1:0", Duration::from_millis(50)).await;
        let bridge = Listening::spawn(true, &["--to", &url(&harness, downstream)], &[]).await;
        let client = bridge.host(host, Some(HOST_TOKEN)).await.unwrap();
        let mut listen = client
            .call(request(
                json!("L"),
                "subscriptions/listen",
                json!({"notifications": {"toolsListChanged": true}}),
            ))
            .await
            .unwrap();
        let mut methods = Vec::new();
        while methods.len() < 3 {
            let msg = tokio::time::timeout(PATIENCE, listen.next())
                .await
                .expect("the stream goes on")
                .unwrap();
            match msg {
                Some(StreamMessage::Notification(n)) => {
                    assert!(
                        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_string()
                            || n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
                                .is_number(),
                        "{host:?}: {n}"
                    );
                    methods.push(n["method"].as_str().unwrap().to_owned());
                }
                other => panic!("{host:?}: {other:?}"),
            }
        }
        assert_eq!(
            methods,
            [
                "notifications/subscriptions/acknowledged",
                "notifications/tools/list_changed",
                "notifications/tools/list_changed"
            ],
            "{host:?}"
        );
        drop(listen);
        client.close().await;
        let (status, _, _) = bridge.terminate().await;
        assert!(status.success());
        harness.stop().await;
    }
}

#[tokio::test]
async fn the_child_gets_only_the_environment_it_is_given() {
    let child = python_child(
        &["--pass-env", "BRIDGE_TEST_PASSED"],
        "tests/stdio/misbehaving_server.py",
        &[],
    );
    let bridge = Listening::spawn(
        true,
        &refs(&child),
        &[
            ("BRIDGE_TEST_PASSED", "1"),
            ("BRIDGE_TEST_KEPT", "1"),
            ("MCPWIRE_TOKEN", SECRET),
        ],
    )
    .await;
    let client = bridge
        .host(Transport::Grpc, Some(HOST_TOKEN))
        .await
        .unwrap();
    let env = client
        .request("tools/call", json!({"name": "env", "arguments": {}}))
        .await
        .unwrap();
    let names = env["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(names, "BRIDGE_TEST_PASSED", "{env}");
    client.close().await;
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn the_network_host_side_speaks_tls() {
    let (ca, chain, key) = common::certificates();
    let dir = temp_dir();
    let (cert_file, key_file) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
    std::fs::write(&cert_file, chain).unwrap();
    std::fs::write(&key_file, key).unwrap();

    let harness = server().await;
    let target = url(&harness, Transport::Grpc);
    let bridge = Listening::spawn(
        true,
        &[
            "--tls-cert",
            cert_file.to_str().unwrap(),
            "--tls-key",
            key_file.to_str().unwrap(),
            "--to",
            &target,
        ],
        &[],
    )
    .await;
    assert!(bridge.sentence().contains("TLS"), "{}", bridge.sentence());
    let mut config = http_client::Config::new(&format!("https://{}/mcp", bridge.addr)).unwrap();
    config.bearer = Some(HOST_TOKEN.to_owned());
    config.tls = Some(mcpwire_tokio::ClientTlsConfig::with_pem_roots(ca.as_bytes()).unwrap());
    let client = Client::http(config).await.unwrap();
    let echoed = client
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "sealed"}}),
        )
        .await
        .unwrap();
    assert_eq!(echoed["result"]["content"][0]["text"], "sealed", "{echoed}");
    client.close().await;
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
    harness.stop().await;
}

/// The typed gRPC service of the bridge's port: a typed `CallTool`, as a
/// typed gRPC client sends it, forwarded to an HTTP server; the result
/// comes back as a typed message.
#[tokio::test]
async fn the_typed_service_is_forwarded_too() {
    use bytes::{Bytes, BytesMut};
    use mcpwire_core::mcp::typed;
    use mcpwire_proto::gcp::Rpc;

    let harness = server().await;
    let bridge = Listening::spawn(true, &["--to", &url(&harness, Transport::Http)], &[]).await;
    let params = json!({"name": "echo", "arguments": {"text": "typed"}});
    let mut message = vec![0u8; 1 << 16];
    let n = typed::request_to_proto(Rpc::CallTool, params.to_string().as_bytes(), &mut message)
        .unwrap();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(n as u32).to_be_bytes());
    framed.extend_from_slice(&message[..n]);
    let send = common::connect(bridge.addr.parse().unwrap()).await;
    let mut ready = send.ready().await.unwrap();
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{}", Rpc::CallTool.path()))
        .header("content-type", "application/grpc+proto")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {HOST_TOKEN}"))
        .body(())
        .unwrap();
    let (response, mut stream) = ready.send_request(request, false).unwrap();
    stream.send_data(Bytes::from(framed), true).unwrap();
    let response = tokio::time::timeout(PATIENCE, response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut buf = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.unwrap().unwrap_or_default();
    assert_eq!(
        trailers.get("grpc-status").map(|v| v.to_str().unwrap()),
        Some("0"),
        "{trailers:?}"
    );
    assert!(buf.len() > 5, "one response message");
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    let mut out = vec![0u8; 1 << 16];
    let n = typed::result_to_json(Rpc::CallTool, &buf[5..5 + len], &mut out).unwrap();
    let result: Value = serde_json::from_slice(&out[..n]).unwrap();
    assert_eq!(result["content"][0]["text"], "typed", "{result}");
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
    harness.stop().await;
}

#[tokio::test]
async fn a_downstream_timeout_reaches_a_network_host_as_the_bridges_failure() {
    let harness = server().await;
    let counters = harness.counters.clone();
    let bridge = Listening::spawn(
        true,
        &[
            "--timeout-ms",
            "300",
            "--to",
            &url(&harness, Transport::Grpc),
        ],
        &[],
    )
    .await;
    let client = bridge
        .host(Transport::Http, Some(HOST_TOKEN))
        .await
        .unwrap();
    let answer = client
        .request(
            "tools/call",
            json!({"name": "counted_sleep", "arguments": {"ms": 5000}}),
        )
        .await;
    let error = match answer {
        Ok(r) => r["error"].clone(),
        Err(e) => json!({"code": e.diagnostics.rpc_code, "message": e.message}),
    };
    assert_eq!(error["code"], -32001, "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("the bridge's call to the server")),
        "{error}"
    );
    assert!(
        common::eventually_every(Duration::from_millis(10), PATIENCE, || {
            counters.dropped.load(Ordering::SeqCst) == 1
        })
        .await,
        "the server's handler ended"
    );
    assert_eq!(counters.finished.load(Ordering::SeqCst), 0);
    client.close().await;
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
    harness.stop().await;
}

#[tokio::test]
async fn a_stdio_host_meets_an_older_child_as_the_current_era() {
    let child = python_child(
        &["--pass-env", "LEGACY"],
        "tests/stdio/misbehaving_server.py",
        &[],
    );
    let mut bridge = Bridge::spawn_with_env(&refs(&child), None, &[("LEGACY", "1")]);
    let startup = bridge.startup_line().await;
    assert!(
        startup.contains("2025-11-25") && startup.contains(&format!("stays MCP {VERSION}")),
        "{startup}"
    );
    bridge
        .send(request(json!("d"), "server/discover", json!({})))
        .await;
    let discovered = bridge.recv().await;
    assert_eq!(discovered["id"], "d", "{discovered}");
    assert_eq!(
        discovered["result"]["supportedVersions"],
        json!([VERSION]),
        "{discovered}"
    );
    assert_eq!(
        discovered["result"]["capabilities"],
        json!({"tools": {}}),
        "{discovered}"
    );
    // The list gets the caching hints the current era requires.
    bridge
        .send(request(json!("l"), "tools/list", json!({})))
        .await;
    let listed = bridge.recv().await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    assert_eq!(listed["result"]["ttlMs"], 0, "{listed}");
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");
    assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
    bridge
        .send(tool_call(json!(2), "echo", json!({"text": "old"})))
        .await;
    let echoed = bridge.recv().await;
    assert_eq!(echoed["result"]["content"][0]["text"], "old", "{echoed}");
    assert!(bridge.finish().await.success());
}

/// A typed gRPC call on `addr` (with the host's token): the result as
/// JSON when there was a response message, and the trailers.
async fn typed_call(
    addr: &str,
    rpc: mcpwire_proto::gcp::Rpc,
    params: Value,
) -> (Option<Value>, http::HeaderMap) {
    use bytes::{Bytes, BytesMut};
    use mcpwire_core::mcp::typed;

    let mut message = vec![0u8; 1 << 16];
    let n = typed::request_to_proto(rpc, params.to_string().as_bytes(), &mut message).unwrap();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(n as u32).to_be_bytes());
    framed.extend_from_slice(&message[..n]);
    let send = common::connect(addr.parse().unwrap()).await;
    let mut ready = send.ready().await.unwrap();
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{}", rpc.path()))
        .header("content-type", "application/grpc+proto")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {HOST_TOKEN}"))
        .body(())
        .unwrap();
    let (response, mut stream) = ready.send_request(request, false).unwrap();
    stream.send_data(Bytes::from(framed), true).unwrap();
    let response = tokio::time::timeout(PATIENCE, response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    // A trailers-only answer carries its status in the headers.
    let head = response.headers().clone();
    let mut body = response.into_body();
    let mut buf = BytesMut::new();
    while let Some(chunk) = tokio::time::timeout(PATIENCE, body.data()).await.unwrap() {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.unwrap().unwrap_or(head);
    if buf.len() < 5 {
        return (None, trailers);
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    let mut out = vec![0u8; 1 << 20];
    let n = typed::result_to_json(rpc, &buf[5..5 + len], &mut out).unwrap();
    (Some(serde_json::from_slice(&out[..n]).unwrap()), trailers)
}

/// A typed list RPC cannot page: the bridge follows the server's
/// `nextCursor` and answers the whole list; the tunnel's JSON-RPC
/// `tools/list` still gets the server's first page and its cursor.
#[tokio::test]
async fn a_typed_list_on_the_bridge_is_the_servers_pages_merged() {
    use mcpwire_proto::gcp::Rpc;

    let child = python_child(&[], "tests/bridge/paging_server.py", &[]);
    let bridge = Listening::spawn(true, &refs(&child), &[]).await;
    let (result, trailers) = typed_call(&bridge.addr, Rpc::ListTools, json!({})).await;
    assert_eq!(
        trailers.get("grpc-status").map(|v| v.to_str().unwrap()),
        Some("0"),
        "{trailers:?}"
    );
    let result = result.expect("one response message");
    let names: Vec<_> = result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["t0", "t1", "t2", "t3", "t4"], "{result}");
    assert!(result.get("nextCursor").is_none(), "{result}");

    let client = bridge
        .host(Transport::Grpc, Some(HOST_TOKEN))
        .await
        .unwrap();
    let listed = client.request("tools/list", json!({})).await.unwrap();
    assert_eq!(
        listed["result"]["tools"],
        json!([
            {"name": "t0", "inputSchema": {"type": "object"}},
            {"name": "t1", "inputSchema": {"type": "object"}},
        ]),
        "{listed}"
    );
    assert_eq!(listed["result"]["nextCursor"], "2", "{listed}");
    client.close().await;
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
}

/// A server whose cursor never ends: the bridge asks for 1024 pages, then
/// the typed list fails with -32603 (INTERNAL).
#[tokio::test]
async fn a_typed_list_of_more_than_1024_pages_fails() {
    use mcpwire_proto::gcp::Rpc;

    let dir = temp_dir();
    let count = dir.0.join("pages");
    let child = python_child(
        &[],
        "tests/bridge/paging_server.py",
        &["endless", count.to_str().unwrap()],
    );
    let bridge = Listening::spawn(true, &refs(&child), &[]).await;
    // The bridge read the list for its schemas first: as many pages.
    let pages = || {
        std::fs::read_to_string(&count)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert!(
        common::eventually_every(Duration::from_millis(20), PATIENCE, || pages() == 1024).await,
        "{} pages",
        pages()
    );
    let (result, trailers) = typed_call(&bridge.addr, Rpc::ListTools, json!({})).await;
    assert!(result.is_none(), "{result:?}");
    let header = |name: &str| trailers.get(name).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(header("grpc-status").as_deref(), Some("13"), "{trailers:?}");
    assert_eq!(
        header("mcp-error-code").as_deref(),
        Some("-32603"),
        "{trailers:?}"
    );
    assert_eq!(pages(), 2 * 1024);
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
}

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The progress values a call of `client` gets, and its response.
async fn progress_and_response(client: &Client, request: Value) -> (Vec<f64>, Value) {
    let mut call = client.call(request).await.unwrap();
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(PATIENCE, call.next()).await.unwrap() {
            Ok(Some(StreamMessage::Notification(n))) => {
                assert_eq!(n["method"], "notifications/progress", "{n}");
                assert_eq!(n["params"]["progressToken"], "1", "{n}");
                seen.push(n["params"]["progress"].as_f64().unwrap());
            }
            Ok(Some(StreamMessage::Response(r))) => return (seen, r),
            other => panic!("{other:?}"),
        }
    }
}

/// Two hosts that picked the same progress token (as SDKs that number
/// their tokens do) share one stdio child: each gets its own call's
/// progress, as the child routes it by token (the bridge gives each call
/// one of its own downstream).
#[tokio::test]
async fn two_hosts_with_one_progress_token_each_get_their_own_progress() {
    let bridge = Listening::spawn(false, &serve_stdio(), &[]).await;
    for (one, other) in [
        (Transport::Http, Transport::Grpc),
        (Transport::Grpc, Transport::Grpc),
    ] {
        let a = bridge.host(one, None).await.unwrap();
        let b = bridge.host(other, None).await.unwrap();
        let call = |steps: u32| {
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {
                "name": "progress", "arguments": {"steps": steps, "delay_ms": 40},
                "_meta": {"progressToken": "1"}}})
        };
        let ((seen_a, ra), (seen_b, rb)) = tokio::join!(
            progress_and_response(&a, call(4)),
            progress_and_response(&b, call(7))
        );
        assert_eq!(seen_a, [1.0, 2.0, 3.0, 4.0], "{one:?}: {ra}");
        assert_eq!(
            seen_b,
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
            "{other:?}: {rb}"
        );
        assert_eq!(ra["result"]["content"][0]["text"], "done after 4 steps");
        assert_eq!(rb["result"]["content"][0]["text"], "done after 7 steps");
    }
    let (status, _, _) = bridge.terminate().await;
    assert!(status.success());
}

/// A host that stops reading while its call's server sends without end:
/// the bridge holds at most a bounded backlog for the call, then fails it
/// (the host reads the failure when it reads again), and its memory stays
/// bounded meanwhile.
#[tokio::test]
async fn a_host_that_does_not_read_gets_a_failed_call_not_a_growing_bridge() {
    let args = python_child(&[], "tests/stdio/misbehaving_server.py", &[]);
    let mut bridge = Bridge::spawn(&refs(&args));
    let pid = bridge.child.id().unwrap();
    let mut call = tool_call(json!("f"), "flood", json!({}));
    call["params"]["_meta"]["progressToken"] = json!("p");
    bridge.send(call).await;
    // Not read for 3 s: the child writes 1 KiB notifications as fast as
    // it can (tens of MiB a second).
    let mut most = 0;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        most = most.max(rss_kib(pid));
    }
    assert!(most < 96 << 10, "the bridge grew to {most} KiB");
    let response = loop {
        let msg = bridge.recv().await;
        if msg.get("id").is_some() {
            break msg;
        }
        assert_eq!(msg["params"]["progressToken"], "p", "{msg}");
    };
    assert_eq!(response["id"], "f", "{response}");
    assert_eq!(response["error"]["code"], -32603, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("did not read"), "{message}");
    // The bridge serves on (its child, flooding, is not reading stdin:
    // the bridge is stopped by its host here).
    drop(bridge);
}

/// A child that writes to stderr without a newline costs the bridge a
/// bounded line: its stderr comes through in pieces, and calls go on.
#[tokio::test]
async fn a_childs_stderr_without_newlines_comes_through_in_bounded_pieces() {
    let mut args = vec!["--pass-env".to_owned(), "STDERR_FLOOD".to_owned()];
    args.extend(python_child(&[], "tests/stdio/misbehaving_server.py", &[]));
    // The bridge's stderr is read by a task of its own (a bridge whose
    // stderr nobody reads stops at its next diagnostic).
    let Bridge {
        child,
        stdin,
        mut stdout,
        mut stderr,
    } = Bridge::spawn_with_env(&refs(&args), None, &[("STDERR_FLOOD", "1")]);
    let pid = child.id().unwrap();
    let mut stdin = stdin.unwrap();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let longest = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (s, l) = (
        std::sync::Arc::clone(&seen),
        std::sync::Arc::clone(&longest),
    );
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            s.fetch_add(line.len(), Ordering::SeqCst);
            l.fetch_max(line.len(), Ordering::SeqCst);
        }
    });
    // 64 MiB of the child's stderr through the bridge.
    let most = std::sync::atomic::AtomicU64::new(0);
    let through = common::eventually_every(Duration::from_millis(50), 2 * PATIENCE, || {
        most.fetch_max(rss_kib(pid), Ordering::SeqCst);
        seen.load(Ordering::SeqCst) > 64 << 20
    })
    .await;
    let most = most.load(Ordering::SeqCst);
    assert!(
        through,
        "{} octets of stderr came through",
        seen.load(Ordering::SeqCst)
    );
    assert!(most < 96 << 10, "the bridge grew to {most} KiB");
    // Each piece is 8 KiB of the child's, after the bridge's prefix.
    let longest = longest.load(Ordering::SeqCst);
    assert!((8 << 10..(8 << 10) + 64).contains(&longest), "{longest}");
    let call = tool_call(json!(1), "echo", json!({"text": "still here"}));
    stdin
        .write_all(format!("{call}\n").as_bytes())
        .await
        .unwrap();
    let line = tokio::time::timeout(PATIENCE, stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"], "still here",
        "{answer}"
    );
}

/// `--timeout-ms` bounds calls, not subscriptions: a listen stream lives
/// on past it, over every server-side transport.
#[tokio::test]
async fn a_listen_stream_outlives_the_call_timeout() {
    let harness = common::start_on_with_tick("127.0.0.1:0", Duration::from_millis(50)).await;
    let stdio_child = [
        "--",
        env!("CARGO_BIN_EXE_mcpwire"),
        "serve",
        "--stdio",
        "--tick-ms",
        "50",
    ];
    let sides: [(&str, Vec<String>); 3] = [
        ("http", vec!["--to".into(), url(&harness, Transport::Http)]),
        ("grpc", vec!["--to".into(), url(&harness, Transport::Grpc)]),
        (
            "stdio",
            stdio_child.iter().map(|s| (*s).to_owned()).collect(),
        ),
    ];
    for (side, args) in sides {
        let mut all = vec!["--timeout-ms".to_owned(), "300".to_owned()];
        all.extend(args);
        let mut bridge = Bridge::spawn(&refs(&all));
        bridge.send(tools_listen(json!("L"))).await;
        let started = tokio::time::Instant::now();
        let mut events = 0;
        while started.elapsed() < Duration::from_millis(1500) {
            let msg = bridge.recv().await;
            assert!(msg.get("id").is_none(), "{side}: the listen ended: {msg}");
            if msg["method"] == "notifications/tools/list_changed" {
                events += 1;
            }
        }
        assert!(events >= 2, "{side}: {events} events");
        assert!(bridge.finish().await.success(), "{side}");
    }
    harness.stop().await;
}

/// Each call's method and `grpc-timeout`, as a tap saw them.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// A gRPC server that answers `server/discover` and every other call with
/// an empty tool list, and notes each call's method and `grpc-timeout`.
async fn timeout_tap() -> (std::net::SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let noted = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let noted = std::sync::Arc::clone(&noted);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(socket).await else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    let timeout = request
                        .headers()
                        .get("grpc-timeout")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let noted = std::sync::Arc::clone(&noted);
                    tokio::spawn(async move {
                        let mut octets = common::read_body(request.into_body()).await;
                        let mut messages = Vec::new();
                        common::take_messages(&mut octets, &mut messages);
                        let request = messages.pop().unwrap();
                        let method = request["method"].as_str().unwrap_or_default();
                        noted.lock().unwrap().push((method.to_owned(), timeout));
                        let result = if method == "server/discover" {
                            json!({"resultType": "complete", "supportedVersions": [VERSION],
                                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"})
                        } else {
                            json!({"tools": []})
                        };
                        let answer = serde_json::to_vec(&json!({"jsonrpc": "2.0",
                            "id": request["id"], "result": result}))
                        .unwrap();
                        common::answer_grpc(&mut respond, [common::frame(&answer)]);
                    });
                }
            });
        }
    });
    (addr, seen)
}

/// `grpc-timeout` in milliseconds (`n` and its unit).
fn timeout_ms(t: &str) -> u64 {
    let (n, unit) = t.split_at(t.len() - 1);
    let n: u64 = n.parse().unwrap();
    match unit {
        "H" => n * 3_600_000,
        "M" => n * 60_000,
        "S" => n * 1000,
        "m" => n,
        "u" => n / 1000,
        "n" => n / 1_000_000,
        _ => panic!("{t}"),
    }
}

/// Two calls of `request` by a gRPC host of `bridge`, with 90 s and 2 s
/// deadlines.
async fn grpc_lists(bridge: &Listening, request: Value) {
    let grpc = bridge.host(Transport::Grpc, None).await.unwrap();
    for secs in [90, 2] {
        grpc.call_with_timeout(request.clone(), Some(Duration::from_secs(secs)))
            .await
            .unwrap()
            .response()
            .await
            .unwrap();
    }
}

/// The host's deadline goes downstream: the server is told what is left
/// of it (bounded by `--timeout-ms`), a host without one leaves the
/// client's default.
#[tokio::test]
async fn the_hosts_deadline_is_the_servers() {
    let (addr, seen) = timeout_tap().await;
    let to = format!("grpc://{addr}");
    let list = || json!({"jsonrpc": "2.0", "method": "tools/list", "params": {}});
    // Without --timeout-ms: a gRPC host's 90 s (longer than the client's
    // 60 s default) and 2 s, then an HTTP host, which sends none.
    // Each bridge reads the list for its schemas before its startup line:
    // that call is not a host's.
    let hosts_calls = std::sync::Mutex::new(Vec::new());
    let spawned = |bridge: Listening| {
        seen.lock().unwrap().clear();
        bridge
    };
    let kept = |hosts_calls: &std::sync::Mutex<Vec<_>>| {
        hosts_calls
            .lock()
            .unwrap()
            .extend(seen.lock().unwrap().drain(..));
    };
    let bridge = spawned(Listening::spawn(false, &["--to", &to], &[]).await);
    grpc_lists(&bridge, list()).await;
    let http = bridge.host(Transport::Http, None).await.unwrap();
    http.call(list()).await.unwrap().response().await.unwrap();
    kept(&hosts_calls);
    bridge.terminate().await;
    // With --timeout-ms 500: the shorter of the two.
    let bridge = spawned(Listening::spawn(false, &["--timeout-ms", "500", "--to", &to], &[]).await);
    grpc_lists(&bridge, list()).await;
    kept(&hosts_calls);
    bridge.terminate().await;
    let seen: Vec<u64> = hosts_calls
        .into_inner()
        .unwrap()
        .iter()
        .filter(|(method, _)| method == "tools/list")
        .map(|(_, t)| timeout_ms(t.as_deref().expect("every call has a grpc-timeout")))
        .collect();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!((85_000..=90_000).contains(&seen[0]), "{seen:?}");
    assert!((1_000..=2_000).contains(&seen[1]), "{seen:?}");
    assert!((55_000..=60_000).contains(&seen[2]), "{seen:?}");
    assert!((300..=500).contains(&seen[3]), "{seen:?}");
    assert!((300..=500).contains(&seen[4]), "{seen:?}");
}

// Mirrored parameters (#32 item 4): the bridge's host side holds a
// `tools/call`'s `Mcp-Param-*` headers to the schema the server's
// `tools/list` gave, as `mcpwire serve` does.

/// The `tools/call`s a [`Scripted`] server took: arguments and header.
type Calls = std::sync::Arc<std::sync::Mutex<Vec<(Value, Option<String>)>>>;

/// A gRPC server of one tool, `regional`, whose `region` argument is
/// annotated (`x-mcp-header: Region`) once `annotated` is set; its
/// `tools/list` fails when `list_fails`. Its listen streams acknowledge
/// `toolsListChanged` and carry an event at each send on `changed`.
struct Scripted {
    addr: std::net::SocketAddr,
    annotated: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// `tools/list` calls answered.
    lists: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Listen streams acknowledged.
    listens: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Each `tools/call`'s arguments and `mcp-param-region` header.
    calls: Calls,
    changed: tokio::sync::broadcast::Sender<()>,
}

impl Scripted {
    async fn start(list_fails: bool) -> Self {
        use std::sync::Arc;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let scripted = Self {
            addr: listener.local_addr().unwrap(),
            annotated: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            lists: Arc::default(),
            listens: Arc::default(),
            calls: Arc::default(),
            changed: tokio::sync::broadcast::channel(4).0,
        };
        let (annotated, lists, listens, calls, changed) = (
            Arc::clone(&scripted.annotated),
            Arc::clone(&scripted.lists),
            Arc::clone(&scripted.listens),
            Arc::clone(&scripted.calls),
            scripted.changed.clone(),
        );
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (annotated, lists, listens, calls, changed) = (
                    Arc::clone(&annotated),
                    Arc::clone(&lists),
                    Arc::clone(&listens),
                    Arc::clone(&calls),
                    changed.clone(),
                );
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(socket).await else {
                        return;
                    };
                    while let Some(Ok((request, mut respond))) = conn.accept().await {
                        let region = request
                            .headers()
                            .get("mcp-param-region")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        let (annotated, lists, listens, calls) = (
                            Arc::clone(&annotated),
                            Arc::clone(&lists),
                            Arc::clone(&listens),
                            Arc::clone(&calls),
                        );
                        let mut events = changed.subscribe();
                        tokio::spawn(async move {
                            let mut octets = common::read_body(request.into_body()).await;
                            let mut messages = Vec::new();
                            common::take_messages(&mut octets, &mut messages);
                            let request = messages.pop().unwrap();
                            let id = request["id"].clone();
                            let answer = |body: Value| {
                                let mut message = json!({"jsonrpc": "2.0", "id": id});
                                message
                                    .as_object_mut()
                                    .unwrap()
                                    .extend(body.as_object().unwrap().clone());
                                common::frame(&serde_json::to_vec(&message).unwrap())
                            };
                            let body = match request["method"].as_str().unwrap_or_default() {
                                "server/discover" => json!({"result": {"resultType": "complete",
                                    "supportedVersions": [VERSION],
                                    "capabilities": {"tools": {"listChanged": true}},
                                    "ttlMs": 0, "cacheScope": "public"}}),
                                "tools/list" if list_fails => {
                                    lists.fetch_add(1, Ordering::SeqCst);
                                    json!({"error": {"code": -32603, "message": "the list is down"}})
                                }
                                "tools/list" => {
                                    let mut region = json!({"type": "string"});
                                    if annotated.load(Ordering::SeqCst) {
                                        region["x-mcp-header"] = json!("Region");
                                    }
                                    lists.fetch_add(1, Ordering::SeqCst);
                                    json!({"result": {"resultType": "complete", "ttlMs": 0,
                                        "cacheScope": "public", "tools": [{"name": "regional",
                                        "inputSchema": {"type": "object",
                                            "properties": {"region": region}}}]}})
                                }
                                "subscriptions/listen" if !list_fails => {
                                    let head = http::Response::builder()
                                        .status(200)
                                        .header("content-type", "application/grpc+proto")
                                        .body(())
                                        .unwrap();
                                    let mut send = respond.send_response(head, false).unwrap();
                                    let meta =
                                        json!({"io.modelcontextprotocol/subscriptionId": id});
                                    let note = |method: &str, extra: Value| {
                                        let mut params = json!({"_meta": meta});
                                        params
                                            .as_object_mut()
                                            .unwrap()
                                            .extend(extra.as_object().unwrap().clone());
                                        common::frame(
                                            &serde_json::to_vec(&json!({"jsonrpc": "2.0",
                                                "method": method, "params": params}))
                                            .unwrap(),
                                        )
                                    };
                                    let ack = note(
                                        "notifications/subscriptions/acknowledged",
                                        json!({"notifications": {"toolsListChanged": true}}),
                                    );
                                    if send.send_data(ack, false).is_err() {
                                        return;
                                    }
                                    listens.fetch_add(1, Ordering::SeqCst);
                                    while events.recv().await.is_ok() {
                                        let event =
                                            note("notifications/tools/list_changed", json!({}));
                                        if send.send_data(event, false).is_err() {
                                            return;
                                        }
                                    }
                                    return;
                                }
                                "tools/call" => {
                                    calls
                                        .lock()
                                        .unwrap()
                                        .push((request["params"]["arguments"].clone(), region));
                                    json!({"result": {"resultType": "complete",
                                        "content": [{"type": "text", "text": "called"}]}})
                                }
                                _ => {
                                    json!({"error": {"code": -32601, "message": "Method not found"}})
                                }
                            };
                            common::answer_grpc(&mut respond, [answer(body)]);
                        });
                    }
                });
            }
        });
        scripted
    }

    fn calls(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
}

/// A `tools/call` of `regional` with `arguments`, POSTed over HTTP/1.1 to
/// the bridge at `addr` with `extra` headers (CRLF-ended): the status line
/// and the JSON-RPC answer.
async fn post_regional(addr: &str, arguments: Value, extra: &str) -> (String, Value) {
    use tokio::io::AsyncReadExt;
    let body = tool_call(json!(9), "regional", arguments).to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: {VERSION}\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: regional\r\n{extra}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or_default().to_owned();
    // A JSON body or an event stream: the last `data:` line or the body.
    let body = &text[text.find("\r\n\r\n").map_or(0, |i| i + 4)..];
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .next_back()
        .unwrap_or(body.trim());
    (
        status,
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{text}: {e}")),
    )
}

/// The same `tools/call` on the bridge's gRPC tunnel, with `extra`
/// headers: its trailers' `grpc-status` and `mcp-error-code`.
async fn tunnel_regional(
    addr: &str,
    arguments: Value,
    extra: &[(&str, &str)],
) -> (Option<String>, Option<String>) {
    let mut send = common::connect(addr.parse().unwrap()).await;
    let body = tool_call(json!(9), "regional", arguments);
    let reply = common::call(&mut send, body, extra).await;
    (
        reply.get("grpc-status").map(str::to_owned),
        reply.get("mcp-error-code").map(str::to_owned),
    )
}

/// `Mcp-Param-Region: us-west` with `{"region":"eu-secret"}`: a gateway in
/// front of `mcpwire bridge --listen` that routes or authorizes on the
/// header would take it for us-west. The bridge learnt the server's
/// schema (its `tools/list`) and refuses the call as `mcpwire serve` does
/// (400 or INVALID_ARGUMENT, -32020), over HTTP/1.1 and the tunnel, and so
/// a call without the header; the server's tool never runs. (Before, the
/// bridge checked no `Mcp-Param-*` header: the tool ran with eu-secret.) A
/// header that matches is served. When the server's list changes (its
/// listen stream says so) the bridge reads it again: without the
/// annotation the header is ignored, as `mcpwire serve` ignores it, and
/// with it again the call is refused again.
#[tokio::test]
async fn a_param_header_that_differs_from_the_argument_is_refused() {
    let server = Scripted::start(false).await;
    let bridge = Listening::spawn(false, &["--to", &format!("grpc://{}", server.addr)], &[]).await;
    let secret = || json!({"region": "eu-secret"});
    let refused = |label: &'static str| {
        let addr = bridge.addr.clone();
        async move {
            for (extra, why) in [
                ("Mcp-Param-Region: us-west\r\n", "a header that differs"),
                ("", "no header for an argument the body gives"),
            ] {
                let (status, answer) = post_regional(&addr, secret(), extra).await;
                assert!(
                    status.starts_with("HTTP/1.1 400"),
                    "{label}, {why}: {status}: {answer}"
                );
                assert_eq!(answer["error"]["code"], -32020, "{label}, {why}: {answer}");
            }
            for (extra, why) in [
                (
                    &[("mcp-param-region", "us-west")][..],
                    "a header that differs",
                ),
                (&[], "no header"),
            ] {
                let (status, code) = tunnel_regional(&addr, secret(), extra).await;
                assert_eq!(status.as_deref(), Some("3"), "{label}, {why}");
                assert_eq!(code.as_deref(), Some("-32020"), "{label}, {why}");
            }
        }
    };
    refused("at the start").await;
    assert_eq!(server.calls(), 0, "the server's tool ran");
    // The header that matches is served, and the server sees it too.
    let (status, answer) =
        post_regional(&bridge.addr, secret(), "Mcp-Param-Region: eu-secret\r\n").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}: {answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "called", "{answer}");
    let (status, code) = tunnel_regional(
        &bridge.addr,
        secret(),
        &[("mcp-param-region", "=?base64?ZXUtc2VjcmV0?=")],
    )
    .await;
    assert_eq!((status.as_deref(), code), (Some("0"), None));
    {
        let calls = server.calls.lock().unwrap();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[0].1.as_deref(), Some("eu-secret"), "{calls:?}");
    }
    // The list changes: the bridge reads it again (the server's listen
    // stream carries the event).
    assert!(
        common::eventually_every(Duration::from_millis(20), PATIENCE, || {
            server.listens.load(Ordering::SeqCst) > 0
        })
        .await,
        "the bridge holds no listen stream"
    );
    let change = |annotated: bool| {
        let lists = server.lists.load(Ordering::SeqCst);
        server.annotated.store(annotated, Ordering::SeqCst);
        let _ = server.changed.send(());
        let server = &server;
        async move {
            assert!(
                common::eventually_every(Duration::from_millis(20), PATIENCE, || {
                    server.lists.load(Ordering::SeqCst) > lists
                })
                .await,
                "the bridge did not read the changed list"
            );
            // The read's answer is learnt as it reaches the bridge.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    change(false).await;
    let (status, answer) =
        post_regional(&bridge.addr, secret(), "Mcp-Param-Region: us-west\r\n").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}: {answer}");
    assert_eq!(server.calls(), 3);
    change(true).await;
    refused("annotated again").await;
    assert_eq!(server.calls(), 3, "the server's tool ran");
    let (status, _, err) = bridge.terminate().await;
    assert!(status.success(), "{err}");
}

/// A server whose `tools/list` fails: the bridge knows no schema, so a
/// call that carries an `Mcp-Param-*` header is refused (-32020: it cannot
/// be checked) instead of forwarded unchecked, and one without is
/// forwarded. A stdio host sends no headers: its call is forwarded.
#[tokio::test]
async fn a_param_header_the_bridge_cannot_check_is_refused() {
    let server = Scripted::start(true).await;
    let to = format!("grpc://{}", server.addr);
    let bridge = Listening::spawn(false, &["--to", &to], &[]).await;
    let eu = || json!({"region": "eu"});
    let (status, answer) = post_regional(&bridge.addr, eu(), "Mcp-Param-Region: eu\r\n").await;
    assert!(status.starts_with("HTTP/1.1 400"), "{status}: {answer}");
    assert_eq!(answer["error"]["code"], -32020, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not known")),
        "{answer}"
    );
    let (status, code) = tunnel_regional(&bridge.addr, eu(), &[("mcp-param-region", "eu")]).await;
    assert_eq!(
        (status.as_deref(), code.as_deref()),
        (Some("3"), Some("-32020"))
    );
    assert_eq!(server.calls(), 0, "the server's tool ran");
    let (status, answer) = post_regional(&bridge.addr, eu(), "").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}: {answer}");
    assert_eq!(server.calls(), 1);
    let (status, _, err) = bridge.terminate().await;
    assert!(status.success(), "{err}");
    assert!(err.contains("tools/list failed"), "{err}");
    let mut stdio = Bridge::spawn(&["--to", &to]);
    stdio.send(tool_call(json!(1), "regional", eu())).await;
    let answer = stdio.recv().await;
    assert_eq!(answer["result"]["content"][0]["text"], "called", "{answer}");
    assert!(stdio.finish().await.success());
    assert_eq!(server.calls(), 2);
}

/// A stdio host sends no headers: the bridge's call downstream carries the
/// `Mcp-Param-Region` of the argument, from the schema its client learnt
/// when the bridge read the server's list, so a gateway in front of the
/// server routes on what the tool gets. (Before, a host that had not
/// listed the tools got its first call sent without the header: a server
/// that checks refuses it and the client lists and sends it again, but a
/// gateway that routes on the header saw none.)
#[tokio::test]
async fn a_stdio_hosts_call_goes_downstream_with_the_arguments_header() {
    let server = Scripted::start(false).await;
    let mut stdio = Bridge::spawn(&["--to", &format!("grpc://{}", server.addr)]);
    stdio
        .send(tool_call(
            json!(1),
            "regional",
            json!({"region": "eu-secret"}),
        ))
        .await;
    let answer = stdio.recv().await;
    assert_eq!(answer["result"]["content"][0]["text"], "called", "{answer}");
    assert!(stdio.finish().await.success());
    let calls = server.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1.as_deref(), Some("eu-secret"), "{calls:?}");
}
