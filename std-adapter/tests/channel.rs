//! The tokio gRPC `Client` against the demo server in-process (127.0.0.1:0),
//! against the grpcio reference server `tests/grpc/ref_server.py`, and
//! against scripted tunnel servers of the `h2` crate (module `scripted`:
//! refused streams, the typed helpers).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::demo;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Harness, eventually_every, start_on_with_tick};
use mcpwire_core::grpc::Code;
use mcpwire_tokio::{Client, Server, StreamMessage, client::grpc};
use serde_json::{Value, json};

async fn start_on(addr: &str) -> Harness {
    start_on_with_tick(addr, Duration::from_secs(3600)).await
}

async fn start() -> Harness {
    start_on("127.0.0.1:0").await
}

async fn tool(channel: &Client, name: &str, arguments: Value) -> Value {
    channel
        .request("tools/call", json!({"name": name, "arguments": arguments}))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

async fn eventually(limit: Duration, f: impl Fn() -> bool) -> bool {
    eventually_every(Duration::from_millis(10), limit, f).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_over_the_channel() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let r = channel.request("server/discover", json!({})).await.unwrap();
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(
        r["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_is_cached() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let r = channel.request("tools/list", json!({})).await.unwrap();
    let tools = r["result"]["tools"].as_array().unwrap();
    // The five demo tools and the test's counted_sleep.
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for n in ["echo", "progress", "sleep", "lookup", "confirm"] {
        assert!(names.contains(&n), "{names:?}");
    }
    assert_eq!(names.len(), 6, "{names:?}");
    let schema = channel.cached_schema("lookup").await.unwrap();
    assert_eq!(schema["properties"]["region"]["x-mcp-header"], "Region");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_tools_list_has_five_tools() {
    let server = Server::bind("127.0.0.1:0").await.unwrap();
    let h = common::serve(server, demo_app(), Default::default());
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let r = channel.request("tools/list", json!({})).await.unwrap();
    assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 5, "{r}");
    h.stop().await;
}

fn demo_app() -> mcpwire_tokio::App {
    demo::app(Duration::from_secs(3600))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_over_the_channel() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let r = tool(&channel, "echo", json!({"text": "hello"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "hello", "{r}");
    assert!(r["id"].is_number());
    h.stop().await;
}

/// The retry fields and the log level are judged where the engine's
/// validating walk found them (no second walk): a wrong type or an
/// unknown level is -32602, and a good one reaches the tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_fields_and_log_level_are_checked_before_the_handler() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let bad = [
        (
            json!({"inputResponses": []}),
            "inputResponses must be an object",
        ),
        (json!({"requestState": 5}), "requestState must be a string"),
        (
            json!({"_meta": {"io.modelcontextprotocol/logLevel": "loud"}}),
            "unknown logLevel",
        ),
        (
            json!({"_meta": {"io.modelcontextprotocol/logLevel": 3}}),
            "unknown logLevel",
        ),
    ];
    for (extra, message) in bad {
        let mut params = json!({"name": "echo", "arguments": {"text": "x"}});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let r = channel.request("tools/call", params).await.unwrap();
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(r["error"]["message"], message, "{r}");
    }
    let r = channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "fine"}, "requestState": "s",
                   "_meta": {"io.modelcontextprotocol/logLevel": "debug"}}),
        )
        .await
        .unwrap();
    assert_eq!(r["result"]["content"][0]["text"], "fine", "{r}");
    h.stop().await;
}

/// Issue #11 item 6: -32021's `data.requiredCapabilities` is shaped like
/// `ClientCapabilities` (an object of capability objects), not an array.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_capability_names_it_as_client_capabilities() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let r = tool(&channel, "confirm", json!({})).await;
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}}),
        "{r}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_stream_before_the_result() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let mut call = channel
        .call(json!({"method": "tools/call", "params": {
            "name": "progress", "arguments": {"steps": 3, "delay_ms": 100},
            "_meta": {"progressToken": "p1"}}}))
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let mut seen = Vec::new();
    loop {
        match call.next().await.unwrap() {
            Some(StreamMessage::Notification(n)) => {
                assert_eq!(n["method"], "notifications/progress");
                seen.push((n["params"]["progress"].as_f64().unwrap(), started.elapsed()));
            }
            Some(StreamMessage::Response(r)) => {
                assert_eq!(seen.len(), 3, "{seen:?}");
                assert_eq!(r["result"]["content"][0]["text"], "done after 3 steps");
                break;
            }
            None => panic!("no response"),
        }
    }
    assert_eq!(call.next().await.unwrap(), None);
    // Streamed as they came: the first well before the third.
    assert!(
        seen[2].1 >= seen[0].1 + Duration::from_millis(150),
        "{seen:?}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_mirrors_headers_from_the_cached_schema() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    channel.request("tools/list", json!({})).await.unwrap();
    let r = tool(
        &channel,
        "lookup",
        json!({"region": "eu-north1", "limit": 5}),
    )
    .await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"region": "eu-north1", "limit": 5}),
        "{r}"
    );
    // An unsafe integer is refused before a byte goes out.
    let e = channel
        .request(
            "tools/call",
            json!({"name": "lookup", "arguments": {"region": "x", "limit": 9007199254740993u64}}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.diagnostics.rpc_code, Some(-32600), "{e:?}");
    h.stop().await;
}

/// Issue #11 item 2: the client mirrors values of any length the header
/// list takes (raw and as the Base64 sentinel) and the server compares
/// them; a list over the server's limit gets the limit's answer (431), not
/// -32020. (The tokio server's header buffer is 8 KiB: its list limit, and
/// room for a compressed block and the largest Huffman-decoded field.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_mirrored_values_go_through_and_the_list_limit_answers() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    channel.request("tools/list", json!({})).await.unwrap();
    // Raw at 300 octets and 4 KB; the sentinel (non-ASCII) at 300 octets
    // and 2 KB (2.7 KB encoded).
    for region in [
        "r".repeat(300),
        "r".repeat(4096),
        "é".repeat(150),
        "é".repeat(1024),
    ] {
        let r = tool(&channel, "lookup", json!({"region": region, "limit": 1})).await;
        assert_eq!(
            r["result"]["structuredContent"]["region"],
            region,
            "{}: {r}",
            region.len()
        );
    }
    for len in [300, 4096] {
        // A long `mcp-name` (an unknown tool): matched, then "Unknown tool".
        let name = "n".repeat(len);
        let r = tool(&channel, &name, json!({})).await;
        assert_eq!(r["error"]["code"], -32602, "{len}: {r}");
    }
    // Two fields of 4300 octets (each under the field limit), the list over
    // the server's 8 KiB: HTTP 431, no JSON-RPC error. (A compressed block
    // over the server's buffer ends the connection instead: issue #11 item 3.)
    let mut config = grpc::Config::new(h.addr.to_string());
    config.metadata.push(("x-pad".into(), "p".repeat(4300)));
    let padded = Client::grpc(config).await.unwrap();
    let e = padded
        .request(
            "tools/call",
            json!({"name": "n".repeat(4300), "arguments": {}}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.diagnostics.http_status, Some(431), "{e:?}");
    assert_ne!(e.diagnostics.rpc_code, Some(-32020), "{e:?}");
    assert!(e.rpc.is_none(), "{e:?}");
    // The connection goes on.
    let r = tool(&padded, "echo", json!({"text": "after"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "after", "{r}");
    h.stop().await;
}

/// Issue #11 item 2: the client sends ids up to 128 octets of raw JSON and
/// refuses a longer one before a byte goes out (no answer with a wrong id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_ids_are_sent_up_to_the_limit_and_refused_past_it() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let id = "i".repeat(126); // 128 octets with its quotes
    let r = channel
        .call(json!({"id": id, "method": "tools/list", "params": {}}))
        .await
        .unwrap()
        .response()
        .await
        .unwrap();
    assert_eq!(r["id"], json!(id), "{r}");
    let long = "i".repeat(127);
    let e = channel
        .call(json!({"id": long, "method": "tools/list", "params": {}}))
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::InvalidArgument, "{e:?}");
    assert_eq!(e.diagnostics.rpc_code, Some(-32600), "{e:?}");
    assert!(e.message.contains("id longer than 128"), "{e}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_with_an_empty_cache_refreshes_and_retries_once() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    assert!(channel.cached_schema("lookup").await.is_none());
    let r = tool(&channel, "lookup", json!({"region": "eu", "limit": 7})).await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"region": "eu", "limit": 7}),
        "{r}"
    );
    // The retry learned the schema from tools/list.
    assert!(channel.cached_schema("lookup").await.is_some());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_in_trailers_become_json_rpc_errors() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    // An unsupported version ends the call before the handler, in the
    // trailers (mcp-error-bin): the application gets the error response
    // with its own id and the error's data, as on any transport.
    let r = channel
        .call(
            json!({"id": 41, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}}),
        )
        .await
        .unwrap()
        .response()
        .await
        .unwrap();
    assert_eq!(r["id"], 41, "{r}");
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(r["error"]["data"]["requested"], "2099-01-01", "{r}");
    assert_eq!(
        r["error"]["data"]["supported"],
        json!(["2026-07-28"]),
        "{r}"
    );
    // An unknown method is in band (a response message, then status 0).
    let r = channel.request("no/such/method", json!({})).await.unwrap();
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(r["id"].is_number());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleep_past_its_timeout_is_deadline_exceeded() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let e = channel
        .call_with_timeout(
            json!({"method": "tools/call", "params": {"name": "sleep", "arguments": {"ms": 5000}}}),
            Some(Duration::from_millis(200)),
        )
        .await
        .unwrap()
        .response()
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::DeadlineExceeded, "{e:?}");
    // The client's timer and the server's (from the grpc-timeout the call
    // carries, checked in `scripted::every_call_sends_the_60_s_default_and_listen_none`)
    // end it at the same moment; either answer is DEADLINE_EXCEEDED. Well
    // before the 5 s sleep would end (the margin is for a busy machine).
    assert!(started.elapsed() < Duration::from_secs(4));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_call_cancels_it() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let call = channel
        .call(json!({"method": "tools/call", "params": {"name": "counted_sleep", "arguments": {"ms": 5000}}}))
        .await
        .unwrap();
    let c = Arc::clone(&h.counters);
    assert!(
        eventually(Duration::from_secs(10), || c.started.load(Ordering::SeqCst)
            == 1)
        .await
    );
    drop(call);
    assert!(
        eventually(Duration::from_secs(10), || c.dropped.load(Ordering::SeqCst)
            == 1)
        .await
    );
    assert_eq!(c.finished.load(Ordering::SeqCst), 0);
    // The channel still works.
    let r = tool(&channel, "echo", json!({"text": "after"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "after");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_calls_on_one_channel() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let channel = channel.clone();
        tasks.push(tokio::spawn(async move {
            let r = channel
                .request(
                    "tools/call",
                    json!({"name": "counted_sleep", "arguments": {"ms": 300}}),
                )
                .await
                .unwrap();
            (i, r)
        }));
    }
    let started = tokio::time::Instant::now();
    for t in tasks {
        let (_, r) = t.await.unwrap();
        assert_eq!(r["result"]["content"][0]["text"], "slept", "{r}");
    }
    // Concurrent, not one after the other.
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(h.counters.finished.load(Ordering::SeqCst), 16);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_up_to_the_message_limit() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    // Close to the default limit of 4 MiB, both ways.
    let text = "x".repeat((4 << 20) - 4096);
    let r = tool(&channel, "echo", json!({"text": text})).await;
    assert_eq!(r["result"]["content"][0]["text"], text.as_str());
    // A request over the limit is refused before it goes out.
    let e = channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "y".repeat(4 << 20)}}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::ResourceExhausted, "{e:?}");
    // The channel still works.
    let r = tool(&channel, "echo", json!({"text": "after"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "after");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn more_calls_than_slots_wait_their_turn() {
    let h = start().await;
    let channel = Client::grpc(grpc::Config::new(h.addr.to_string()))
        .await
        .unwrap();
    let n = mcpwire_tokio::client::grpc::MAX_CONCURRENT_CALLS + 8;
    let mut tasks = Vec::new();
    for _ in 0..n {
        let channel = channel.clone();
        tasks.push(tokio::spawn(async move {
            channel
                .request(
                    "tools/call",
                    json!({"name": "counted_sleep", "arguments": {"ms": 200}}),
                )
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r["result"]["content"][0]["text"], "slept", "{r}");
    }
    assert_eq!(h.counters.finished.load(Ordering::SeqCst), n);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_the_server_restarts() {
    let h = start().await;
    let addr = h.addr;
    let channel = Client::grpc(grpc::Config::new(addr.to_string()))
        .await
        .unwrap();
    let r = tool(&channel, "echo", json!({"text": "one"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "one");
    h.stop().await;
    // Whether the channel has read the old connection's end yet is up to
    // its task's turn (a busy machine delays it): a call now, which fails
    // either way (on the closed connection, or refused), makes it known
    // before the restart.
    let _ = channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "down"}}),
        )
        .await;
    let h = start_on(&addr.to_string()).await;
    let r = tool(&channel, "echo", json!({"text": "two"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "two", "{r}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_in_the_extra_metadata() {
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(mcpwire_tokio::BearerTokens::new([("right-token", "alice")]));
    let h = common::serve(server, demo_app(), Default::default());
    let addr = h.addr;
    // Without the token: UNAUTHENTICATED, HTTP 401 and the challenge.
    let channel = Client::grpc(grpc::Config::new(addr.to_string()))
        .await
        .unwrap();
    let e = channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::Unauthenticated, "{e:?}");
    assert_eq!(e.diagnostics.http_status, Some(401), "{e:?}");
    assert_eq!(
        e.diagnostics.www_authenticate.as_deref(),
        Some(r#"Bearer realm="mcpwire""#),
        "{e:?}"
    );
    // With it, on every call of the channel.
    let mut config = grpc::Config::new(addr.to_string());
    config
        .metadata
        .push(("Authorization".into(), "Bearer right-token".into()));
    let channel = Client::grpc(config).await.unwrap();
    for text in ["one", "two"] {
        let r = tool(&channel, "echo", json!({"text": text})).await;
        assert_eq!(r["result"]["content"][0]["text"], text, "{r}");
    }
    h.stop().await;
}

// ----------------------------------------------------------------------
// Against the grpcio reference server
// ----------------------------------------------------------------------

struct RefServer {
    child: std::process::Child,
    addr: String,
}

impl Drop for RefServer {
    fn drop(&mut self) {
        // Stop the server we started, by its PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ref_server() -> Option<RefServer> {
    use std::io::BufRead;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join(".venv/bin/python");
    let has_grpc = std::process::Command::new(&python)
        .args(["-c", "import grpc"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_grpc {
        if std::env::var("MCPWIRE_REQUIRE_PEERS").as_deref() == Ok("1") {
            panic!("MCPWIRE_REQUIRE_PEERS=1 but .venv/bin/python lacks grpcio");
        }
        eprintln!("skipped: .venv/bin/python lacks grpcio (scripts/interop-grpc.sh installs it)");
        return None;
    }
    let mut child = std::process::Command::new(&python)
        .arg(root.join("tests/grpc/ref_server.py"))
        .arg("0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut server = RefServer {
        child,
        addr: String::new(),
    };
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap();
    server.addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("ref_server.py said {line:?}"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    Some(server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_reference_server_echo_and_progress() {
    let Some(s) = tokio::task::spawn_blocking(ref_server).await.unwrap() else {
        return;
    };
    let channel = Client::grpc(grpc::Config::new(s.addr.clone()))
        .await
        .unwrap();
    let r = tool(&channel, "echo", json!({"text": "hi grpcio"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "hi grpcio", "{r}");
    let mut call = channel
        .call(json!({"method": "tools/call", "params": {
            "name": "progress", "arguments": {"steps": 3, "delay_ms": 50},
            "_meta": {"progressToken": "p"}}}))
        .await
        .unwrap();
    let mut notes = 0;
    let response = loop {
        match call.next().await.unwrap() {
            Some(StreamMessage::Notification(_)) => notes += 1,
            Some(StreamMessage::Response(r)) => break r,
            None => panic!("no response"),
        }
    };
    assert_eq!(notes, 3);
    assert_eq!(
        response["result"]["content"][0]["text"],
        "done after 3 steps"
    );
    drop(s);
}

/// Tunnel servers of the `h2` crate, each answering from a script: the
/// engine's retry of refused streams, the code of the reset that ends a
/// dropped call or listen stream, and the typed helpers against
/// answers no server of this crate gives (several pages, `isError`,
/// JSON-RPC errors with data).
mod scripted {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use mcpwire_core::grpc::Code;
    use mcpwire_tokio::Client;
    use mcpwire_tokio::client::PROTOCOL_VERSION;
    use mcpwire_tokio::client::grpc;
    use mcpwire_tokio::client::grpc::CALL_PATH;
    use serde_json::{Value, json};

    /// The messages a server sends for a request: notifications, then the
    /// response.
    type Script = fn(&Value) -> Vec<Value>;

    struct Scripted {
        addr: std::net::SocketAddr,
        connections: Arc<AtomicUsize>,
        streams: Arc<AtomicUsize>,
        /// Each request's `:path` and body, in order of arrival.
        requests: Arc<Mutex<Vec<(String, Value)>>>,
        /// Each request's `grpc-timeout`, in order of arrival.
        timeouts: Arc<Mutex<Vec<Option<String>>>>,
    }

    /// A gRPC message of the tunnel: prefix, then field 1 (tag, varint
    /// length) with the JSON.
    fn frame(message: &Value) -> bytes::Bytes {
        let json = serde_json::to_vec(message).unwrap();
        let mut field = vec![0x0a];
        let mut n = json.len();
        while n >= 0x80 {
            field.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        field.push(n as u8);
        field.extend_from_slice(&json);
        let mut framed = vec![0];
        framed.extend_from_slice(&(field.len() as u32).to_be_bytes());
        framed.extend_from_slice(&field);
        framed.into()
    }

    /// The JSON of a request's one message.
    fn unframe(octets: &[u8]) -> Value {
        let mut at = 6;
        while octets.get(at).is_some_and(|b| b & 0x80 != 0) {
            at += 1;
        }
        at += 1;
        serde_json::from_slice(&octets[at..]).unwrap()
    }

    /// A server that resets its first `refuse` streams with
    /// REFUSED_STREAM, unprocessed, and answers the others from `script`.
    async fn server(refuse: usize, script: Script) -> Scripted {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let s = Scripted {
            addr: listener.local_addr().unwrap(),
            connections: Arc::default(),
            streams: Arc::default(),
            requests: Arc::default(),
            timeouts: Arc::default(),
        };
        let (c, st, rq) = (
            Arc::clone(&s.connections),
            Arc::clone(&s.streams),
            Arc::clone(&s.requests),
        );
        let to = Arc::clone(&s.timeouts);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let (st, rq, to) = (Arc::clone(&st), Arc::clone(&rq), Arc::clone(&to));
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(socket).await else {
                        return;
                    };
                    while let Some(Ok((request, mut respond))) = conn.accept().await {
                        to.lock().unwrap().push(
                            request
                                .headers()
                                .get("grpc-timeout")
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned),
                        );
                        if st.fetch_add(1, Ordering::SeqCst) < refuse {
                            respond.send_reset(h2::Reason::REFUSED_STREAM);
                            continue;
                        }
                        let rq = Arc::clone(&rq);
                        tokio::spawn(async move {
                            let path = request.uri().path().to_owned();
                            let octets = crate::common::read_body(request.into_body()).await;
                            let request = unframe(&octets);
                            let messages = script(&request);
                            rq.lock().unwrap().push((path, request));
                            crate::common::answer_grpc(&mut respond, messages.iter().map(frame));
                        });
                    }
                });
            }
        });
        s
    }

    /// -32020 for every tools/call; an error for tools/list.
    fn mismatch_then_a_failing_list(request: &Value) -> Vec<Value> {
        let id = request["id"].clone();
        let error = match request["method"].as_str() {
            Some("tools/call") => json!({"code": -32020, "message": "mcp-name differs"}),
            _ => json!({"code": -32603, "message": "tools/list failed"}),
        };
        vec![json!({"jsonrpc": "2.0", "id": id, "error": error})]
    }

    /// Issue #11 item 5: the re-list after a -32020 carries the call's
    /// `_meta` whatever its size, and when it fails the application gets
    /// an error with its own id, not the re-list's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_relist_answers_with_the_applications_id_and_keeps_meta() {
        let s = server(0, mismatch_then_a_failing_list).await;
        let channel = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let big = "m".repeat(3000);
        let r = channel
            .call(json!({"id": 77, "method": "tools/call", "params": {
                "name": "x", "arguments": {}, "_meta": {"big": big}}}))
            .await
            .unwrap()
            .response()
            .await
            .unwrap();
        assert_eq!(r["id"], 77, "{r}");
        assert_eq!(r["error"]["code"], -32603, "{r}");
        let requests = s.requests.lock().unwrap();
        assert_eq!(requests.len(), 2, "{requests:?}");
        let relist = &requests[1].1;
        assert_eq!(relist["method"], "tools/list", "{relist}");
        assert_eq!(relist["params"]["_meta"]["big"], big.as_str());
        assert_eq!(
            relist["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            PROTOCOL_VERSION
        );
    }

    /// A server that answers every request with HTTP `status` and nothing
    /// else.
    async fn http_status_server(status: u16) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(socket).await else {
                        return;
                    };
                    while let Some(Ok((_, mut respond))) = conn.accept().await {
                        let head = http::Response::builder().status(status).body(()).unwrap();
                        let _ = respond.send_response(head, true);
                    }
                });
            }
        });
        addr
    }

    /// Binding: "A response with another HTTP status than 200 gives
    /// error.InvalidResponse", with the status in the diagnostics.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_405_415_or_431_is_a_failure_with_its_http_status() {
        for status in [405u16, 415, 431] {
            let addr = http_status_server(status).await;
            let e = Client::grpc(grpc::Config::new(addr.to_string()))
                .await
                .unwrap()
                .request("tools/list", json!({}))
                .await
                .unwrap_err();
            assert_eq!(e.diagnostics.http_status, Some(status), "{e:?}");
            assert!(e.rpc.is_none(), "{e:?}");
            assert_ne!(e.status, Code::Ok, "{e:?}");
            assert!(e.message.contains("HTTP status"), "{e}");
        }
    }

    fn empty_result(request: &Value) -> Vec<Value> {
        vec![json!({"jsonrpc": "2.0", "id": request["id"].clone(), "result": {}})]
    }

    /// A `grpc-timeout` value as a duration (gRPC over HTTP/2: digits and
    /// a unit).
    fn timeout_of(v: &str) -> std::time::Duration {
        let (digits, unit) = v.split_at(v.len() - 1);
        let n: u64 = digits.parse().unwrap();
        match unit {
            "H" => std::time::Duration::from_secs(n * 3600),
            "M" => std::time::Duration::from_secs(n * 60),
            "S" => std::time::Duration::from_secs(n),
            "m" => std::time::Duration::from_millis(n),
            "u" => std::time::Duration::from_micros(n),
            "n" => std::time::Duration::from_nanos(n),
            _ => panic!("bad grpc-timeout {v}"),
        }
    }

    /// Binding: "The SDK client sends the time that is left of the request
    /// timeout ... each call has a grpc-timeout by default. A listen stream
    /// has no default timeout."
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_call_sends_the_60_s_default_and_listen_none() {
        let s = server(0, empty_result).await;
        let channel = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        channel.request("tools/list", json!({})).await.unwrap();
        channel.request("server/discover", json!({})).await.unwrap();
        channel
            .request("subscriptions/listen", json!({}))
            .await
            .unwrap();
        // A call's own timeout: what is left of it.
        channel
            .call_with_timeout(
                json!({"method": "tools/list", "params": {}}),
                Some(std::time::Duration::from_millis(200)),
            )
            .await
            .unwrap()
            .response()
            .await
            .unwrap();
        let timeouts = s.timeouts.lock().unwrap().clone();
        assert_eq!(timeouts.len(), 4, "{timeouts:?}");
        let d = timeout_of(timeouts[3].as_deref().expect("a grpc-timeout"));
        assert!(
            d > std::time::Duration::from_millis(100) && d <= std::time::Duration::from_millis(200),
            "{d:?}"
        );
        for t in &timeouts[..2] {
            let d = timeout_of(t.as_deref().expect("a grpc-timeout"));
            assert!(
                d > std::time::Duration::from_secs(59) && d <= std::time::Duration::from_secs(60),
                "{t:?}"
            );
        }
        assert_eq!(timeouts[2], None, "listen has no deadline");
    }

    fn empty_tools_list(request: &Value) -> Vec<Value> {
        vec![json!({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": []}})]
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_stream_is_sent_once_more_on_the_same_connection() {
        let s = server(1, empty_tools_list).await;
        let channel = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let r = channel.request("tools/list", json!({})).await.unwrap();
        assert_eq!(r["result"]["tools"], json!([]), "{r}");
        // The engine's one retry, on the connection it had.
        assert_eq!(s.streams.load(Ordering::SeqCst), 2);
        assert_eq!(s.connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_refused_twice_fails_without_a_third_try() {
        let s = server(usize::MAX, empty_tools_list).await;
        let channel = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let e = channel.request("tools/list", json!({})).await.unwrap_err();
        assert_eq!(e.status, Code::Unavailable, "{e:?}");
        assert!(e.rpc.is_none(), "{e:?}");
        assert_eq!(s.streams.load(Ordering::SeqCst), 2);
        assert_eq!(s.connections.load(Ordering::SeqCst), 1);
    }

    /// Tools on two pages (`add` with an output schema, `fail`, `strict`),
    /// a resource and a prompt.
    fn mcp_server(request: &Value) -> Vec<Value> {
        let id = &request["id"];
        let params = &request["params"];
        let result = |result: Value| vec![json!({"jsonrpc": "2.0", "id": id, "result": result})];
        let args = &params["arguments"];
        match (request["method"].as_str().unwrap(), params["name"].as_str()) {
            ("tools/list", _) if params.get("cursor").is_none() => result(json!({
                "tools": [{
                    "name": "add",
                    "title": "Add",
                    "description": "Adds two integers.",
                    "inputSchema": {"type": "object", "properties": {
                        "a": {"type": "integer"}, "b": {"type": "integer"}}},
                    "outputSchema": {"type": "object", "properties": {
                        "sum": {"type": "integer"}}},
                }],
                "nextCursor": "page-2",
            })),
            ("tools/list", _) => {
                assert_eq!(params["cursor"], "page-2", "{request}");
                result(json!({"tools": [
                    {"name": "fail", "inputSchema": {"type": "object"}},
                    {"name": "strict"},
                ]}))
            }
            ("tools/call", Some("add")) => {
                let sum = args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap();
                let mut messages = Vec::new();
                if let Some(token) = params["_meta"].get("progressToken") {
                    for step in 1..=2 {
                        messages.push(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": step, "total": 2,
                                "message": format!("step {step}")}}));
                    }
                }
                messages.extend(result(json!({
                    "content": [{"type": "text", "text": sum.to_string()}],
                    "structuredContent": {"sum": sum},
                })));
                messages
            }
            ("tools/call", Some("fail")) => result(json!({
                "content": [{"type": "text", "text": "the disk is full"}],
                "isError": true,
            })),
            ("tools/call", _) => vec![json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32602, "message": "unknown argument", "data": {"argument": "c"}}})],
            ("resources/list", _) => result(json!({"resources": [
                {"uri": "file:///motd", "name": "motd", "mimeType": "text/plain"}]})),
            ("resources/read", _) => result(json!({"contents": [
                {"uri": params["uri"], "mimeType": "text/plain", "text": "hello"}]})),
            ("prompts/list", _) => result(json!({"prompts": [{"name": "greet",
                "arguments": [{"name": "who", "required": true}, {"name": "tone"}]}]})),
            ("prompts/get", _) => result(json!({"description": "A greeting", "messages": [
                {"role": "user", "content": {"type": "text",
                    "text": format!("Say hello to {}.", args["who"].as_str().unwrap())}}]})),
            _ => vec![json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601, "message": "method not found"}})],
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn list_tools_follows_next_cursor_to_the_last_page() {
        let s = server(0, mcp_server).await;
        let channel = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let tools = channel.list_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["add", "fail", "strict"]);
        assert_eq!(tools[0].title.as_deref(), Some("Add"));
        assert_eq!(tools[0].description.as_deref(), Some("Adds two integers."));
        assert_eq!(tools[0].input_schema["properties"]["a"]["type"], "integer");
        assert_eq!(
            tools[0].output_schema.as_ref().unwrap()["properties"]["sum"]["type"],
            "integer"
        );
        // A tool without a schema takes any object.
        assert_eq!(tools[2].input_schema, json!({}));
        let requests = s.requests.lock().unwrap();
        assert_eq!(requests.len(), 2);
        for (path, request) in requests.iter() {
            assert_eq!(path, CALL_PATH);
            let meta = &request["params"]["_meta"];
            assert_eq!(
                meta["io.modelcontextprotocol/protocolVersion"], PROTOCOL_VERSION,
                "{request}"
            );
            assert!(
                meta["io.modelcontextprotocol/clientCapabilities"].is_object(),
                "{request}"
            );
        }
        assert_eq!(requests[1].1["params"]["cursor"], "page-2");
    }

    /// A page whose `nextCursor` is not a string (nor null) is no page of
    /// a list: the walk fails saying so, after the pages it read, instead
    /// of taking it for the last page.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_whose_next_cursor_is_not_a_cursor_fails() {
        fn numbered(request: &Value) -> Vec<Value> {
            let page = request["params"]["cursor"].as_str().unwrap_or("");
            let next = if page.is_empty() {
                json!("p2")
            } else {
                json!(3)
            };
            vec![json!({"jsonrpc": "2.0", "id": request["id"], "result": {
                "resources": [{"uri": "file:///a", "name": "a"}], "nextCursor": next}})]
        }
        let s = server(0, numbered).await;
        let client = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let e = client.list_resources().await.unwrap_err();
        assert_eq!(
            e.message,
            "resources/list: the list result's nextCursor is neither a string nor null"
        );
        assert_eq!(s.requests.lock().unwrap().len(), 2);
    }

    /// Over gRPC the rounds of a tool that asks for input are the core
    /// engine's: each round's request has a new id (the first's with `#1`,
    /// `#2`...), the answers in `inputResponses`, the result's
    /// `requestState` and the declared capabilities; a server that never
    /// stops asking fails the call after the engine's round limit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tool_that_never_stops_asking_fails_after_the_round_limit() {
        fn asking(request: &Value) -> Vec<Value> {
            let round = request["params"]["requestState"]
                .as_str()
                .and_then(|s| s.strip_prefix('r'))
                .map_or(0, |n| n.parse::<u32>().unwrap());
            vec![json!({"jsonrpc": "2.0", "id": request["id"], "result": {
                "resultType": "input_required",
                "inputRequests": {"q": {"method": "roots/list"}},
                "requestState": format!("r{}", round + 1)}})]
        }
        let s = server(0, asking).await;
        let client = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let mut asked = 0;
        let e = client
            .call_tool_with_input("nag", json!({}), json!({"roots": {}}), |requests| {
                assert_eq!(requests["q"]["method"], "roots/list");
                asked += 1;
                Ok(json!({"q": {"roots": []}}).as_object().unwrap().clone())
            })
            .await
            .unwrap_err();
        assert_eq!(asked, mcpwire_tokio::client::MAX_INPUT_ROUNDS);
        let rpc = e.rpc.as_ref().expect("a JSON-RPC error");
        assert_eq!(rpc.code, -32603);
        assert_eq!(
            rpc.message,
            "the server still asks for input after 16 rounds"
        );
        let requests = s.requests.lock().unwrap();
        assert_eq!(requests.len(), 17);
        let first = requests[0].1["id"].to_string();
        for (round, (_, request)) in requests.iter().enumerate() {
            let params = &request["params"];
            assert_eq!(
                params["_meta"]["io.modelcontextprotocol/clientCapabilities"],
                json!({"roots": {}})
            );
            if round == 0 {
                assert!(params.get("inputResponses").is_none(), "{request}");
                assert!(params.get("requestState").is_none(), "{request}");
                continue;
            }
            assert_eq!(request["id"], format!("{first}#{round}"), "{request}");
            assert_eq!(params["inputResponses"], json!({"q": {"roots": []}}));
            assert_eq!(params["requestState"], format!("r{round}"));
            assert_eq!(params["name"], "nag");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn call_tool_returns_content_and_structured_content() {
        let s = server(0, mcp_server).await;
        let channel = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let r = channel
            .call_tool("add", json!({"a": 2, "b": 40}))
            .await
            .unwrap();
        assert!(!r.is_error);
        assert_eq!(r.text(), "42");
        assert_eq!(r.structured_content, Some(json!({"sum": 42})));
        let typed: BTreeMap<String, i64> = channel
            .call_tool_typed("add", BTreeMap::from([("a", 1), ("b", 2)]))
            .await
            .unwrap();
        assert_eq!(typed["sum"], 3);
        let (_, request) = &s.requests.lock().unwrap()[1];
        assert_eq!(request["method"], "tools/call");
        assert_eq!(request["params"]["name"], "add");
        assert_eq!(request["params"]["arguments"], json!({"a": 1, "b": 2}));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tool_failure_is_a_result_and_a_json_rpc_error_is_an_error() {
        let s = server(0, mcp_server).await;
        let channel = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let r = channel.call_tool("fail", ()).await.unwrap();
        assert!(r.is_error);
        assert_eq!(r.text(), "the disk is full");
        // The typed call has no `T` to give: an error carrying the result.
        let e = channel
            .call_tool_typed::<Value>("fail", ())
            .await
            .unwrap_err();
        assert!(e.rpc.is_none(), "{e:?}");
        assert_eq!(e.message, "the disk is full");
        assert!(e.tool_error.unwrap().is_error);
        let e = channel
            .call_tool("strict", json!({"c": 1}))
            .await
            .unwrap_err();
        let rpc = e.rpc.as_ref().unwrap();
        assert_eq!(rpc.code, -32602);
        assert_eq!(rpc.message, "unknown argument");
        assert_eq!(rpc.data, Some(json!({"argument": "c"})));
        assert_eq!(e.status, Code::InvalidArgument);
        // Arguments that are not an object never leave.
        let e = channel.call_tool("add", [1, 2]).await.unwrap_err();
        assert_eq!(e.status, Code::InvalidArgument);
        assert_eq!(s.requests.lock().unwrap().len(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn call_tool_with_progress_sees_each_step() {
        let s = server(0, mcp_server).await;
        let channel = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let mut steps = Vec::new();
        let r = channel
            .call_tool_with_progress("add", json!({"a": 1, "b": 1}), |p| {
                steps.push((p.progress, p.total, p.message));
            })
            .await
            .unwrap();
        assert_eq!(r.structured_content, Some(json!({"sum": 2})));
        assert_eq!(
            steps,
            [
                (1.0, Some(2.0), Some("step 1".to_owned())),
                (2.0, Some(2.0), Some("step 2".to_owned())),
            ]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn resources_and_prompts() {
        let s = server(0, mcp_server).await;
        let channel = Client::grpc(grpc::Config::new(s.addr.to_string()))
            .await
            .unwrap();
        let resources = channel.list_resources().await.unwrap();
        assert_eq!(resources.len(), 1);
        assert_eq!(resources[0].uri, "file:///motd");
        assert_eq!(resources[0].mime_type.as_deref(), Some("text/plain"));
        let contents = channel.read_resource("file:///motd").await.unwrap();
        assert_eq!(contents[0].text.as_deref(), Some("hello"));
        assert_eq!(contents[0].uri, "file:///motd");
        let prompts = channel.list_prompts().await.unwrap();
        assert_eq!(prompts[0].name, "greet");
        let required: Vec<bool> = prompts[0].arguments.iter().map(|a| a.required).collect();
        assert_eq!(required, [true, false]);
        let prompt = channel
            .get_prompt("greet", json!({"who": "Ada"}))
            .await
            .unwrap();
        assert_eq!(prompt.description.as_deref(), Some("A greeting"));
        assert_eq!(prompt.messages[0]["content"]["text"], "Say hello to Ada.");
    }

    /// What [`holding_server`] saw of each call: its method, and the code
    /// of the RST_STREAM that ended it (`None`: the stream ended
    /// otherwise).
    type Ends = Arc<Mutex<Vec<(String, Option<h2::Reason>)>>>;

    /// A tunnel server that answers each call with its head and one
    /// notification (the acknowledgement of a listen stream, a progress
    /// notification otherwise), then holds the stream open and records
    /// the code of the reset that ends it.
    async fn holding_server() -> (std::net::SocketAddr, Ends) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let ends = Ends::default();
        let all = Arc::clone(&ends);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let all = Arc::clone(&all);
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(socket).await else {
                        return;
                    };
                    while let Some(Ok((request, mut respond))) = conn.accept().await {
                        let all = Arc::clone(&all);
                        tokio::spawn(async move {
                            let request =
                                unframe(&crate::common::read_body(request.into_body()).await);
                            let method = request["method"].as_str().unwrap_or("").to_owned();
                            let note = if method == "subscriptions/listen" {
                                json!({"jsonrpc": "2.0",
                                    "method": "notifications/subscriptions/acknowledged",
                                    "params": {"notifications": {}, "_meta": {
                                        "io.modelcontextprotocol/subscriptionId": request["id"]}}})
                            } else {
                                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                    "params": {"progressToken": "t", "progress": 1}})
                            };
                            let head = http::Response::builder()
                                .status(200)
                                .header("content-type", "application/grpc+proto")
                                .body(())
                                .unwrap();
                            let mut send = respond.send_response(head, false).unwrap();
                            send.send_data(frame(&note), false).unwrap();
                            let reset = std::future::poll_fn(|cx| send.poll_reset(cx)).await;
                            all.lock().unwrap().push((method, reset.ok()));
                        });
                    }
                });
            }
        });
        (addr, ends)
    }

    /// Issue #32 item 9: a dropped call and a dropped listen stream each
    /// reset their stream with CANCEL (the binding: "The client cancels a
    /// call with RST_STREAM(CANCEL)"), not with any code.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_call_and_a_dropped_listen_stream_are_reset_with_cancel() {
        let (addr, ends) = holding_server().await;
        let channel =
            mcpwire_tokio::Client::grpc(mcpwire_tokio::client::grpc::Config::new(addr.to_string()))
                .await
                .unwrap();
        let requests = [
            json!({"method": "tools/call", "params": {"name": "slow", "arguments": {},
                "_meta": {"progressToken": "t"}}}),
            json!({"method": "subscriptions/listen", "params": {"notifications": {}}}),
        ];
        for request in requests {
            let method = request["method"].as_str().unwrap().to_owned();
            let mut call = channel.call(request).await.unwrap();
            match call.next().await.unwrap() {
                Some(crate::StreamMessage::Notification(_)) => {}
                other => panic!("{method}: {other:?}"),
            }
            drop(call);
            let e = Arc::clone(&ends);
            let m = method.clone();
            assert!(
                crate::eventually(std::time::Duration::from_secs(10), || {
                    e.lock().unwrap().iter().any(|(name, _)| *name == m)
                })
                .await,
                "{method}: the server saw no end"
            );
        }
        assert_eq!(
            *ends.lock().unwrap(),
            [
                ("tools/call".to_owned(), Some(h2::Reason::CANCEL)),
                ("subscriptions/listen".to_owned(), Some(h2::Reason::CANCEL)),
            ]
        );
    }
}
