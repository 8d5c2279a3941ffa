//! mcpwire as a client of tonic: `mcpwire_tokio::Channel` calls the tonic
//! tunnel server of this crate, started in-process on 127.0.0.1:0.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::start_tonic;
use mcpwire_tokio::{Client, StreamMessage, client::grpc};
use serde_json::{Value, json};

async fn tool(channel: &Client, name: &str, arguments: Value) -> Value {
    channel
        .request("tools/call", json!({"name": name, "arguments": arguments}))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover() {
    let server = start_tonic().await;
    let channel = Client::grpc(grpc::Config::new(server.addr.to_string()))
        .await
        .unwrap();
    let r = channel.request("server/discover", json!({})).await.unwrap();
    assert!(r["id"].is_u64(), "{r}");
    let result = &r["result"];
    assert_eq!(result["resultType"], "complete", "{r}");
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]), "{r}");
    assert!(result["capabilities"]["tools"].is_object(), "{r}");
    assert_eq!(result["ttlMs"], 3_600_000, "{r}");
    assert_eq!(result["cacheScope"], "public", "{r}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "tonic-tunnel-server",
        "{r}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_is_read() {
    let server = start_tonic().await;
    let channel = Client::grpc(grpc::Config::new(server.addr.to_string()))
        .await
        .unwrap();
    let r = channel.request("tools/list", json!({})).await.unwrap();
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["echo", "progress"], "{r}");
    // Neither has `x-mcp-header` annotations: nothing to mirror, nothing
    // kept.
    assert!(channel.cached_schema("echo").await.is_none());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo() {
    let server = start_tonic().await;
    let channel = Client::grpc(grpc::Config::new(server.addr.to_string()))
        .await
        .unwrap();
    let text = "hello from mcpwire, 世界";
    let r = tool(&channel, "echo", json!({"text": text})).await;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": text}]),
        "{r}"
    );
    assert!(r["id"].is_u64(), "{r}");
    // A wrong argument is an error of the tool call, in the response.
    let r = tool(&channel, "echo", json!({"text": 7})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_then_the_result() {
    let server = start_tonic().await;
    let channel = Client::grpc(grpc::Config::new(server.addr.to_string()))
        .await
        .unwrap();
    let mut call = channel
        .call(json!({"method": "tools/call", "params": {
            "name": "progress", "arguments": {"steps": 5, "delay_ms": 20},
            "_meta": {"progressToken": "p-5"}}}))
        .await
        .unwrap();
    let mut progress = Vec::new();
    let response = loop {
        match call.next().await.unwrap() {
            Some(StreamMessage::Notification(n)) => {
                assert_eq!(n["method"], "notifications/progress", "{n}");
                assert_eq!(n["params"]["progressToken"], "p-5", "{n}");
                assert_eq!(n["params"]["total"], 5, "{n}");
                progress.push(n["params"]["progress"].as_u64().unwrap());
            }
            Some(StreamMessage::Response(r)) => break r,
            None => panic!("the call ended without a response"),
        }
    };
    assert_eq!(progress, [1, 2, 3, 4, 5]);
    assert_eq!(
        response["result"]["content"][0]["text"], "done after 5 steps",
        "{response}"
    );
    assert_eq!(&response["id"], call.id());
    assert_eq!(call.next().await.unwrap(), None);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_method_is_32601() {
    let server = start_tonic().await;
    let channel = Client::grpc(grpc::Config::new(server.addr.to_string()))
        .await
        .unwrap();
    let r = channel.request("no/such/method", json!({})).await.unwrap();
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(r["id"].is_u64(), "{r}");
    assert!(r.get("result").is_none(), "{r}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_on_one_connection() {
    let server = start_tonic().await;
    let channel = Client::grpc(grpc::Config::new(server.addr.to_string()))
        .await
        .unwrap();
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..32u64 {
        let channel = channel.clone();
        calls.spawn(async move {
            if i % 4 == 0 {
                let r = tool(&channel, "progress", json!({"steps": 3, "delay_ms": 5})).await;
                assert_eq!(r["result"]["content"][0]["text"], "done after 3 steps");
            } else {
                let text = format!("call {i}");
                let r = tool(&channel, "echo", json!({"text": text})).await;
                assert_eq!(r["result"]["content"][0]["text"], text.as_str());
            }
        });
    }
    let mut done = 0;
    while let Some(joined) = calls.join_next().await {
        joined.unwrap();
        done += 1;
    }
    assert_eq!(done, 32);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_helpers_against_tonic() {
    let server = start_tonic().await;
    let channel = Client::grpc(grpc::Config::new(server.addr.to_string()))
        .await
        .unwrap();
    let tools = channel.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "progress"]);
    assert_eq!(
        tools[0].input_schema["properties"]["text"]["type"],
        "string"
    );
    let r = channel
        .call_tool("echo", json!({"text": "typed"}))
        .await
        .unwrap();
    assert!(!r.is_error);
    assert_eq!(r.text(), "typed");
    // tonic's -32602 for a wrong argument: a JSON-RPC error.
    let e = channel
        .call_tool("echo", json!({"text": 7}))
        .await
        .unwrap_err();
    assert_eq!(e.rpc.as_ref().map(|r| r.code), Some(-32602), "{e:?}");
    let mut seen = Vec::new();
    let r = channel
        .call_tool_with_progress("progress", json!({"steps": 3, "delay_ms": 5}), |p| {
            seen.push(p.progress);
        })
        .await
        .unwrap();
    assert_eq!(seen, [1.0, 2.0, 3.0]);
    assert_eq!(r.text(), "done after 3 steps");
    server.stop().await;
}
