//! The tokio server in-process on 127.0.0.1:0, called by the `h2` crate
//! with real gRPC tunnel calls: what a gRPC client of the binding sees.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{
    Counters, Harness, Messages, VERSION, call, connect, eventually_every, meta, open, request,
    start_on_with_tick, tool_call,
};
use mcpwire_core::mcp::server::Failure;
use mcpwire_tokio::{App, ListenEvent, Server, ServerConfig, ToolCall};
use serde_json::json;
use tokio::sync::broadcast;

async fn start_with_tick(tick: Duration) -> Harness {
    start_on_with_tick("127.0.0.1:0", tick).await
}

/// One request with plain `_meta`, answered within 10 s.
async fn rpc(
    send: &mut h2::client::SendRequest<bytes::Bytes>,
    id: serde_json::Value,
    method: &str,
    params: serde_json::Value,
) -> common::Reply {
    call(
        send,
        request(id, method, params, meta(json!({}), None)),
        &[],
    )
    .await
}

/// Serves the test app, changed by `with`, with `config`.
async fn start_app(config: ServerConfig, with: impl FnOnce(App) -> App) -> Harness {
    let counters = Arc::new(Counters::default());
    let app = with(common::app(&counters, Duration::from_secs(3600)));
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_config(config);
    common::serve(server, app, counters)
}

async fn start() -> Harness {
    start_with_tick(Duration::from_secs(3600)).await
}

/// Waits until `f` holds, up to `limit`.
async fn eventually(limit: Duration, f: impl Fn() -> bool) -> bool {
    eventually_every(Duration::from_millis(5), limit, f).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_discover_is_answered_by_the_engine() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let r = call(
        &mut send,
        request(
            json!("d1"),
            "server/discover",
            json!({}),
            meta(json!({}), None),
        ),
        &[],
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    assert_eq!(r.messages.len(), 1);
    let result = &r.messages[0]["result"];
    assert_eq!(r.messages[0]["id"], "d1");
    assert_eq!(result["resultType"], "complete");
    assert!(
        result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(VERSION))
    );
    assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
    assert!(result["capabilities"]["resources"].is_object());
    assert!(result["capabilities"]["prompts"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_names_the_registered_tools() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let r = call(
        &mut send,
        request(json!(1), "tools/list", json!({}), meta(json!({}), None)),
        &[],
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    let tools = r.messages[0]["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for name in [
        "echo",
        "progress",
        "sleep",
        "lookup",
        "confirm",
        "counted_sleep",
    ] {
        assert!(names.contains(&name), "{names:?}");
    }
    // `lookup` is typed with the `schemars` feature: a schema of the same
    // meaning either way (optional annotated string and integer).
    let lookup = &tools.iter().find(|t| t["name"] == "lookup").unwrap()["inputSchema"];
    assert_eq!(lookup["type"], "object");
    let property = |name: &str| {
        let p = &lookup["properties"][name];
        (p["type"].clone(), p["x-mcp-header"].clone())
    };
    assert_eq!(property("region"), (json!("string"), json!("Region")));
    assert_eq!(property("limit"), (json!("integer"), json!("Limit")));
    assert!(
        lookup.get("required").is_none_or(|r| r == &json!([])),
        "{lookup}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_returns_its_text() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let r = call(&mut send, tool_call(7, "echo", json!({"text": "hi"})), &[]).await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    assert_eq!(r.messages.len(), 1);
    assert_eq!(r.messages[0]["id"], 7);
    let result = &r.messages[0]["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["content"], json!([{"type": "text", "text": "hi"}]));
    // A handler error is an in-band JSON-RPC error with status 0.
    let r = call(&mut send, tool_call(8, "echo", json!({"text": 5})), &[]).await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    assert_eq!(r.messages[0]["error"]["code"], -32602);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_one_connection_run_concurrently() {
    let h = start().await;
    let send = connect(h.addr).await;
    let started = tokio::time::Instant::now();
    let mut calls = Vec::new();
    for i in 0..8 {
        let mut send = send.clone();
        calls.push(tokio::spawn(async move {
            call(&mut send, tool_call(i, "sleep", json!({"ms": 300})), &[]).await
        }));
    }
    for c in calls {
        let r = c.await.unwrap();
        assert_eq!(r.status(), Some("0"), "{r:?}");
        assert_eq!(
            r.messages[0]["result"]["content"][0]["text"],
            "slept 300 ms"
        );
    }
    assert!(started.elapsed() < Duration::from_millis(2000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_precede_the_result() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let body = request(
        json!(3),
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 4, "delay_ms": 10}}),
        meta(json!({}), Some("tok-1")),
    );
    let r = call(&mut send, body, &[]).await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    assert_eq!(r.messages.len(), 5, "{r:?}");
    for (i, m) in r.messages[..4].iter().enumerate() {
        assert_eq!(m["method"], "notifications/progress");
        assert_eq!(m["params"]["progressToken"], "tok-1");
        assert_eq!(m["params"]["progress"], i as u64 + 1);
        assert_eq!(m["params"]["total"], 4);
    }
    assert_eq!(r.messages[4]["id"], 3);
    assert_eq!(
        r.messages[4]["result"]["content"][0]["text"],
        "done after 4 steps"
    );
    // Without a progressToken, no notifications.
    let r = call(
        &mut send,
        tool_call(4, "progress", json!({"steps": 2, "delay_ms": 1})),
        &[],
    )
    .await;
    assert_eq!(r.messages.len(), 1, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_deadline_ends_the_call_and_aborts_the_handler() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let started = tokio::time::Instant::now();
    let r = call(
        &mut send,
        tool_call(1, "counted_sleep", json!({"ms": 5000})),
        &[("grpc-timeout", "200m")],
    )
    .await;
    let took = started.elapsed();
    assert_eq!(r.status(), Some("4"), "{r:?}");
    assert!(r.messages.is_empty());
    // At the deadline, well before the 5 s sleep would end (the margin is
    // for a busy machine).
    assert!(took < Duration::from_secs(3), "{took:?}");
    let c = &h.counters;
    assert!(
        eventually(Duration::from_secs(10), || c.dropped.load(Ordering::SeqCst)
            == 1)
        .await
    );
    assert_eq!(c.started.load(Ordering::SeqCst), 1);
    assert_eq!(c.finished.load(Ordering::SeqCst), 0);
    // The connection goes on.
    let r = call(
        &mut send,
        tool_call(2, "echo", json!({"text": "after"})),
        &[],
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_request_timeout_ends_a_call_without_grpc_timeout() {
    let config = ServerConfig {
        request_timeout: Duration::from_millis(100),
        ..ServerConfig::default()
    };
    let h = start_app(config, |app| app).await;
    let mut send = connect(h.addr).await;
    let r = call(
        &mut send,
        tool_call(1, "counted_sleep", json!({"ms": 5000})),
        &[],
    )
    .await;
    assert_eq!(r.status(), Some("4"), "{r:?}");
    let c = Arc::clone(&h.counters);
    assert!(
        eventually(Duration::from_secs(10), || c.dropped.load(Ordering::SeqCst)
            == 1)
        .await
    );
    assert_eq!(c.finished.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_answered_with_the_cores_failure() {
    let boom = |app: App| {
        app.tool(
            "boom",
            "Panics, at once or after a wait.",
            r#"{"type":"object","properties":{"wait":{"type":"boolean"}}}"#,
            |call: ToolCall| async move {
                if call.arguments()["wait"] == true {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                panic!("boom")
            },
        )
    };
    let h = start_app(ServerConfig::default(), boom).await;
    let mut send = connect(h.addr).await;
    let failed = Failure::HandlerFailed.error();
    for (id, wait) in [(1, false), (2, true)] {
        let r = call(&mut send, tool_call(id, "boom", json!({"wait": wait})), &[]).await;
        assert_eq!(r.status(), Some("0"), "{r:?}");
        assert_eq!(r.messages[0]["id"], id);
        assert_eq!(r.messages[0]["error"]["code"], failed.code);
        assert_eq!(r.messages[0]["error"]["message"], failed.message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reset_aborts_the_handler() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let (_resp, mut stream) = open(
        &mut send,
        &tool_call(1, "counted_sleep", json!({"ms": 5000})),
        &[],
    )
    .await;
    let c = Arc::clone(&h.counters);
    assert!(
        eventually(Duration::from_secs(10), || c.started.load(Ordering::SeqCst)
            == 1)
        .await
    );
    stream.send_reset(h2::Reason::CANCEL);
    assert!(
        eventually(Duration::from_secs(10), || c.dropped.load(Ordering::SeqCst)
            == 1)
        .await
    );
    assert_eq!(c.finished.load(Ordering::SeqCst), 0);
    let r = call(
        &mut send,
        tool_call(2, "echo", json!({"text": "after"})),
        &[],
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_takes_two_round_trips() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let caps = json!({"elicitation": {}});
    let first = request(
        json!(10),
        "tools/call",
        json!({"name": "confirm", "arguments": {}}),
        meta(caps.clone(), None),
    );
    let r = call(&mut send, first, &[]).await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    let result = &r.messages[0]["result"];
    assert_eq!(result["resultType"], "input_required", "{r:?}");
    assert_eq!(
        result["inputRequests"]["confirm"],
        json!({"method": "elicitation/create", "params": {
            "mode": "form", "message": "Proceed?",
            "requestedSchema": {"type": "object",
                "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}})
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let retry = request(
        json!(11),
        "tools/call",
        json!({"name": "confirm", "arguments": {},
            "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}},
            "requestState": state}),
        meta(caps, None),
    );
    let r = call(&mut send, retry, &[]).await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    assert_eq!(r.messages[0]["id"], 11);
    assert_eq!(r.messages[0]["result"]["resultType"], "complete");
    assert_eq!(r.messages[0]["result"]["content"][0]["text"], "confirmed");
    // Without the elicitation capability: -32021.
    let r = call(&mut send, tool_call(12, "confirm", json!({})), &[]).await;
    assert_eq!(r.messages[0]["error"]["code"], -32021, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_needs_its_mirrored_headers() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let args = json!({"region": "eu", "limit": 10});
    let r = call(
        &mut send,
        tool_call(1, "lookup", args.clone()),
        &[("mcp-param-region", "eu"), ("mcp-param-limit", "10")],
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    assert_eq!(r.messages[0]["result"]["structuredContent"], args);
    // Both are optional: absent, they are null (and need no header).
    let r = call(&mut send, tool_call(3, "lookup", json!({})), &[]).await;
    assert_eq!(
        r.messages[0]["result"]["structuredContent"],
        json!({"region": null, "limit": null})
    );
    // Missing headers: -32020 in the trailers, before the handler.
    let r = call(&mut send, tool_call(2, "lookup", args), &[]).await;
    assert!(r.messages.is_empty(), "{r:?}");
    assert_eq!(
        r.head.get("mcp-error-code").map(|v| v.to_str().unwrap()),
        Some("-32020")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_and_prompt() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let r = rpc(
        &mut send,
        json!(1),
        "resources/read",
        json!({"uri": "mem://readme"}),
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    let contents = &r.messages[0]["result"]["contents"][0];
    assert_eq!(contents["uri"], "mem://readme");
    assert!(contents["text"].as_str().unwrap().starts_with("mcpwire"));
    let r = rpc(
        &mut send,
        json!(2),
        "prompts/get",
        json!({"name": "greet", "arguments": {"who": "Ada"}}),
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    assert_eq!(
        r.messages[0]["result"]["messages"][0]["content"]["text"],
        "Say hello to Ada."
    );
    // A URI the app does not serve: its handler's error, the call ends well.
    let r = rpc(
        &mut send,
        json!(3),
        "resources/read",
        json!({"uri": "mem://nope"}),
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    assert_eq!(r.messages[0]["error"]["code"], -32602);
    assert_eq!(r.messages[0]["error"]["data"]["uri"], "mem://nope");
}

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Opens a listen stream with request id `id` asking for `filter`; checks
/// its acknowledgement names `id` and honours `honoured`.
async fn listen(
    send: &mut h2::client::SendRequest<bytes::Bytes>,
    id: serde_json::Value,
    filter: serde_json::Value,
    honoured: serde_json::Value,
) -> Messages {
    let body = request(
        id.clone(),
        "subscriptions/listen",
        json!({ "notifications": filter }),
        meta(json!({}), None),
    );
    let mut stream = Messages::open(send, &body).await;
    let ack = stream.next().await.unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], id);
    assert_eq!(ack["params"]["notifications"], honoured);
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_acknowledges_streams_events_and_ends_at_shutdown() {
    let mut h = start_with_tick(Duration::from_millis(50)).await;
    let mut send = connect(h.addr).await;
    let filter = json!({"toolsListChanged": true, "promptsListChanged": false});
    let mut stream = listen(
        &mut send,
        json!("L1"),
        filter,
        json!({"toolsListChanged": true}),
    )
    .await;
    // The demo's source ticks every 50 ms.
    for _ in 0..2 {
        let m = stream.next().await.unwrap();
        assert_eq!(m["method"], "notifications/tools/list_changed");
        assert_eq!(m["params"]["_meta"][SUBSCRIPTION_ID], "L1");
    }
    // Shutdown: the listen call ends with its result and status 0.
    h.stop.take().unwrap().send(()).unwrap();
    let (messages, trailers) = stream.rest().await;
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    let last = messages.last().unwrap();
    assert_eq!(last["id"], "L1");
    assert_eq!(last["result"]["resultType"], "complete");
    assert_eq!(last["result"]["_meta"][SUBSCRIPTION_ID], "L1");
    tokio::time::timeout(Duration::from_secs(6), h.served)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_sends_only_the_changes_its_filter_honours() {
    let (events, _) = broadcast::channel(16);
    let source = events.clone();
    let mut h = start_app(ServerConfig::default(), |app| app.listen(source)).await;
    let mut send = connect(h.addr).await;
    // Tools only (`false` asks for nothing).
    let filter = json!({"toolsListChanged": true, "resourcesListChanged": false});
    let mut stream = listen(
        &mut send,
        json!(7),
        filter,
        json!({"toolsListChanged": true}),
    )
    .await;
    // A prompts change first: not asked for, so the tools change that
    // follows is the next message.
    events.send(ListenEvent::PromptsListChanged).unwrap();
    events.send(ListenEvent::ToolsListChanged).unwrap();
    let change = stream.next().await.unwrap();
    assert_eq!(change["method"], "notifications/tools/list_changed");
    assert_eq!(change["params"]["_meta"][SUBSCRIPTION_ID], 7);
    assert!(change.get("id").is_none(), "{change}");
    h.stop.take().unwrap().send(()).unwrap();
    let (messages, trailers) = stream.rest().await;
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    // Only the final result is left: no prompts change came.
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["id"], 7);
    assert_eq!(messages[0]["result"]["resultType"], "complete");
    assert_eq!(messages[0]["result"]["_meta"][SUBSCRIPTION_ID], 7);
}

/// A client that stops reading a call whose handler sends many
/// notifications: the handler waits once the call's credit (the largest
/// message) is full, as a gRPC server's send waits for the window, and
/// nothing is lost: when the client reads again it gets every one, in
/// order, then the result. Other connections are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_waits_while_its_client_does_not_read() {
    const STEPS: usize = 20_000;
    let config = ServerConfig {
        max_message_bytes: 64 << 10,
        ..ServerConfig::default()
    };
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let finished = Arc::clone(&done);
    let h = start_app(config, move |app| {
        app.tool(
            "burst",
            "Sends STEPS progress notifications at once, then answers.",
            r#"{"type":"object"}"#,
            move |call: ToolCall| {
                let finished = Arc::clone(&finished);
                async move {
                    for i in 1..=STEPS {
                        call.progress(i as f64, None, Some("a step of the burst"))
                            .await;
                    }
                    finished.store(true, Ordering::SeqCst);
                    Ok(mcpwire_tokio::ToolResult::text("burst sent"))
                }
            },
        )
    })
    .await;
    // h2 closes a connection whose unread DATA frames are many and small
    // (ENHANCE_YOUR_CALM, its budget half the window): this client
    // allows them, to see the server's bound, not h2's.
    let tcp = tokio::net::TcpStream::connect(h.addr).await.unwrap();
    let (mut send, conn) = h2::client::Builder::new()
        .data_frame_budget(64 << 20)
        .handshake(tcp)
        .await
        .unwrap();
    tokio::spawn(conn);
    let body = request(
        json!("burst"),
        "tools/call",
        json!({"name": "burst", "arguments": {}}),
        meta(json!({}), Some("p")),
    );
    let mut burst = Messages::open(&mut send, &body).await;
    // Not read for a while: the stream's window (64 KiB) and the call's
    // credit (64 KiB) fill, far short of the ~1.5 MB of the burst.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !done.load(Ordering::SeqCst),
        "the handler was not held back"
    );
    let mut other = connect(h.addr).await;
    let r = rpc(
        &mut other,
        json!(2),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "served"}}),
    )
    .await;
    assert_eq!(r.messages[0]["result"]["content"][0]["text"], "served");
    for i in 1..=STEPS {
        let m = burst.next().await.expect("every notification comes");
        assert_eq!(m["params"]["progress"], i as f64, "{m}");
    }
    let last = burst.next().await.expect("the answer");
    assert_eq!(last["result"]["content"][0]["text"], "burst sent", "{last}");
    assert!(done.load(Ordering::SeqCst));
    let (rest, trailers) = burst.rest().await;
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    h.stop().await;
}
