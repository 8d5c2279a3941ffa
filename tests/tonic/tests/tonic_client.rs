//! tonic as a client of mcpwire: `tonic::client::Grpc` with `ProstCodec`
//! and the raw `JsonRpcMessage` calls mcpwire's demo server (the app of
//! `mcpwire serve`), started in-process on 127.0.0.1:0.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{
    call, mcp_request, start_mcpwire, tonic_client, tonic_client_without_timer, tool_call,
    tunnel_request,
};
use serde_json::{Value, json};
use tonic::Code;
use tonic::metadata::MetadataValue;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover() {
    let server = start_mcpwire().await;
    let mut grpc = tonic_client(server.addr).await;
    let body = mcp_request(1, "server/discover", json!({}), json!({}));
    let reply = call(&mut grpc, tunnel_request(&body)).await.unwrap();
    assert_eq!(reply.messages.len(), 1, "{:?}", reply.messages);
    let r = reply.response();
    assert_eq!(r["id"], 1, "{r}");
    let result = &r["result"];
    assert_eq!(result["resultType"], "complete", "{r}");
    assert!(
        result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28")),
        "{r}"
    );
    assert!(result["capabilities"]["tools"].is_object(), "{r}");
    assert!(result["ttlMs"].is_u64(), "{r}");
    assert_eq!(result["cacheScope"], "public", "{r}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpwire-demo",
        "{r}"
    );
    assert_eq!(reply.trailers.get("grpc-status").unwrap(), "0");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list() {
    let server = start_mcpwire().await;
    let mut grpc = tonic_client(server.addr).await;
    let body = mcp_request(2, "tools/list", json!({}), json!({}));
    let reply = call(&mut grpc, tunnel_request(&body)).await.unwrap();
    let r = reply.response();
    assert_eq!(r["id"], 2, "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let tools = r["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        ["echo", "progress", "sleep", "lookup", "confirm"],
        "{r}"
    );
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["text"]["type"],
        "string"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_with_the_binding_metadata() {
    let server = start_mcpwire().await;
    let mut grpc = tonic_client(server.addr).await;
    let text = "hello from tonic, 世界 \"quoted\"";
    let body = tool_call(3, "echo", json!({"text": text}));
    let request = tunnel_request(&body);
    // What the binding requires, as tonic sends it.
    let md = request.metadata();
    assert_eq!(md.get("mcp-protocol-version").unwrap(), "2026-07-28");
    assert_eq!(md.get("mcp-method").unwrap(), "tools/call");
    assert_eq!(md.get("mcp-name").unwrap(), "echo");
    let reply = call(&mut grpc, request).await.unwrap();
    assert_eq!(reply.messages.len(), 1, "{:?}", reply.messages);
    assert_eq!(reply.response()["id"], 3);
    assert_eq!(reply.text(), text);
    assert_eq!(reply.trailers.get("grpc-status").unwrap(), "0");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_in_order_then_the_result() {
    let server = start_mcpwire().await;
    let mut grpc = tonic_client(server.addr).await;
    let body = mcp_request(
        4,
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 5, "delay_ms": 10}}),
        json!({"progressToken": "tonic-5"}),
    );
    let reply = call(&mut grpc, tunnel_request(&body)).await.unwrap();
    assert_eq!(reply.messages.len(), 6, "{:?}", reply.messages);
    for (i, n) in reply.messages[..5].iter().enumerate() {
        assert_eq!(n["method"], "notifications/progress", "{n}");
        assert!(n.get("id").is_none(), "{n}");
        assert_eq!(n["params"]["progressToken"], "tonic-5", "{n}");
        assert_eq!(
            n["params"]["progress"].as_f64(),
            Some(i as f64 + 1.0),
            "{n}"
        );
        assert_eq!(n["params"]["total"].as_f64(), Some(5.0), "{n}");
    }
    assert_eq!(reply.response()["id"], 4);
    assert_eq!(reply.text(), "done after 5 steps");
    assert_eq!(reply.trailers.get("grpc-status").unwrap(), "0");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_mcp_name_is_32020_in_the_trailers() {
    let server = start_mcpwire().await;
    let mut grpc = tonic_client(server.addr).await;
    let body = tool_call(5, "echo", json!({"text": "x"}));
    let mut request = tunnel_request(&body);
    request
        .metadata_mut()
        .insert("mcp-name", MetadataValue::from_static("progress"));
    let status = call(&mut grpc, request).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let md = status.metadata();
    assert_eq!(md.get("mcp-error-code").unwrap(), "-32020", "{status:?}");
    let bin = md
        .get_bin("mcp-error-bin")
        .expect("mcp-error-bin")
        .to_bytes()
        .expect("base64");
    let error: Value = serde_json::from_slice(&bin).unwrap();
    assert_eq!(error["jsonrpc"], "2.0", "{error}");
    assert_eq!(error["id"], 5, "{error}");
    assert_eq!(error["error"]["code"], -32020, "{error}");
    assert!(error["error"]["message"].as_str().is_some(), "{error}");
    // The same call with the right name goes through.
    let reply = call(&mut grpc, tunnel_request(&body)).await.unwrap();
    assert_eq!(reply.text(), "x");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleep_past_grpc_timeout_is_deadline_exceeded() {
    let server = start_mcpwire().await;
    // Not a tonic `Channel`: its own timer would end the call first, as
    // CANCELLED "Timeout expired", since no response head comes before the
    // deadline.
    let mut grpc = tonic_client_without_timer(server.addr);
    let body = tool_call(6, "sleep", json!({"ms": 5000}));
    let mut request = tunnel_request(&body);
    request.set_timeout(Duration::from_millis(200));
    assert_eq!(request.metadata().get("grpc-timeout").unwrap(), "200000u");
    let started = Instant::now();
    let status = call(&mut grpc, request).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    // Answered at the deadline: not at once, and not after the sleep.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    server.stop().await;
}
