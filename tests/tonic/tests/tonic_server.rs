//! The tunnel server's answers, seen by a tonic client: where the binding
//! puts each error (in-band or in the trailers), notifications, deadlines
//! and unknown paths. Each check runs against the tonic reference server
//! and against mcpwire's own (`mcpwire serve`'s demo): `CHECK::tonic` and
//! `CHECK::mcpwire`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{
    call, mcp_request, start_mcpwire, start_tonic, tonic_client, tool_call, tunnel_request,
};
use mcpwire_tonic_peer::JsonRpcMessage;
use serde_json::{Value, json};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request, Status};
use tonic_prost::ProstCodec;

/// The JSON-RPC error in `mcp-error-bin`, after checking `mcp-error-code`.
fn trailer_error(status: &Status, code: i64) -> Value {
    let md = status.metadata();
    assert_eq!(
        md.get("mcp-error-code").unwrap().to_str().unwrap(),
        code.to_string(),
        "{status:?}"
    );
    let bin = md.get_bin("mcp-error-bin").unwrap().to_bytes().unwrap();
    let error: Value = serde_json::from_slice(&bin).unwrap();
    assert_eq!(error["error"]["code"], code, "{error}");
    error
}

async fn unknown_method_is_in_band_then_status_ok(addr: SocketAddr) {
    let mut grpc = tonic_client(addr).await;
    let body = mcp_request(1, "no/such/method", json!({}), json!({}));
    let reply = call(&mut grpc, tunnel_request(&body)).await.unwrap();
    assert_eq!(reply.messages.len(), 1, "{:?}", reply.messages);
    let r = reply.response();
    assert_eq!(r["id"], 1, "{r}");
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert_eq!(reply.trailers.get("grpc-status").unwrap(), "0");
}

async fn metadata_that_differs_from_the_body_is_32020_in_the_trailers(addr: SocketAddr) {
    let mut grpc = tonic_client(addr).await;
    let body = tool_call(2, "echo", json!({"text": "x"}));
    let cases: [(&str, Option<&'static str>); 4] = [
        ("mcp-name", Some("progress")),
        ("mcp-name", None),
        ("mcp-method", Some("tools/list")),
        ("mcp-protocol-version", None),
    ];
    for (name, value) in cases {
        let mut request = tunnel_request(&body);
        match value {
            Some(v) => {
                request
                    .metadata_mut()
                    .insert(name, MetadataValue::from_static(v));
            }
            None => {
                request.metadata_mut().remove(name);
            }
        }
        let status = call(&mut grpc, request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{name}: {status:?}");
        let error = trailer_error(&status, -32020);
        assert_eq!(error["id"], 2, "{error}");
    }
    // The name may travel as `=?base64?…?=`: "echo".
    let mut request = tunnel_request(&body);
    request.metadata_mut().insert(
        "mcp-name",
        MetadataValue::from_static("=?base64?ZWNobw==?="),
    );
    assert_eq!(call(&mut grpc, request).await.unwrap().text(), "x");
}

async fn protocol_version_and_meta_errors(addr: SocketAddr) {
    let mut grpc = tonic_client(addr).await;
    // An unsupported version: -32022 with what is supported, in the trailers.
    let mut body = tool_call(3, "echo", json!({"text": "x"}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let mut request = tunnel_request(&body);
    request.metadata_mut().insert(
        "mcp-protocol-version",
        MetadataValue::from_static("2099-01-01"),
    );
    let status = call(&mut grpc, request).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let error = trailer_error(&status, -32022);
    assert_eq!(
        error["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2099-01-01"})
    );
    // No client capabilities: -32602 in the response, then status OK.
    let mut body = tool_call(4, "echo", json!({"text": "x"}));
    body["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let reply = call(&mut grpc, tunnel_request(&body)).await.unwrap();
    assert_eq!(reply.response()["error"]["code"], -32602);
    assert_eq!(reply.response()["id"], 4);
}

async fn malformed_json_is_32700_and_a_notification_gets_an_empty_stream(addr: SocketAddr) {
    let mut grpc = tonic_client(addr).await;
    let mut request = Request::new(JsonRpcMessage {
        jsonrpc: b"{\"jsonrpc\":\"2.0\",".to_vec(),
    });
    request
        .metadata_mut()
        .insert("mcp-method", MetadataValue::from_static("tools/list"));
    let status = call(&mut grpc, request).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(trailer_error(&status, -32700)["id"], Value::Null);

    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1}});
    // Ok is status 0: in the trailers (tonic), or in a Trailers-Only
    // response's head (mcpwire), which tonic reads as the status alone.
    let reply = call(&mut grpc, tunnel_request(&note)).await.unwrap();
    assert!(reply.messages.is_empty(), "{:?}", reply.messages);
    assert!(
        reply.trailers.get("grpc-status").is_none_or(|s| s == "0"),
        "{:?}",
        reply.trailers
    );
}

async fn progress_without_a_token_sends_only_the_result(addr: SocketAddr) {
    let mut grpc = tonic_client(addr).await;
    let body = tool_call(5, "progress", json!({"steps": 4, "delay_ms": 0}));
    let reply = call(&mut grpc, tunnel_request(&body)).await.unwrap();
    assert_eq!(reply.messages.len(), 1, "{:?}", reply.messages);
    assert_eq!(reply.text(), "done after 4 steps");
}

async fn progress_past_grpc_timeout_is_deadline_exceeded(addr: SocketAddr) {
    let mut grpc = tonic_client(addr).await;
    let body = mcp_request(
        6,
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 50, "delay_ms": 100}}),
        json!({"progressToken": 6}),
    );
    let mut request = tunnel_request(&body);
    request.set_timeout(Duration::from_millis(350));
    let started = Instant::now();
    let codec = ProstCodec::<JsonRpcMessage, JsonRpcMessage>::default();
    grpc.ready().await.unwrap();
    let mut stream = grpc
        .server_streaming(
            request,
            PathAndQuery::from_static(mcpwire_tonic_peer::CALL_PATH),
            codec,
        )
        .await
        .unwrap()
        .into_inner();
    let mut notes = 0;
    let status = loop {
        match stream.message().await {
            Ok(Some(m)) => {
                let n: Value = serde_json::from_slice(&m.jsonrpc).unwrap();
                assert_eq!(n["method"], "notifications/progress", "{n}");
                assert_eq!(n["params"]["progressToken"], 6, "{n}");
                notes += 1;
            }
            Ok(None) => panic!("the call ended with status OK"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    // Streamed until the deadline (100 ms apart; 50 would take 5 s).
    assert!((1..50).contains(&notes), "{notes} notifications");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
}

async fn another_method_of_the_service_is_unimplemented(addr: SocketAddr) {
    let mut grpc = tonic_client(addr).await;
    grpc.ready().await.unwrap();
    let codec = ProstCodec::<JsonRpcMessage, JsonRpcMessage>::default();
    let body = mcp_request(7, "tools/list", json!({}), json!({}));
    let status = grpc
        .server_streaming(
            tunnel_request(&body),
            PathAndQuery::from_static("/mcp.zig.transport.v1.Mcp/Other"),
            codec,
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented, "{status:?}");
}

/// Runs each check against the tonic reference server and against
/// mcpwire's own, as two tests.
macro_rules! on_both_servers {
    ($($check:ident),* $(,)?) => { $(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tonic() {
                let s = super::start_tonic().await;
                super::$check(s.addr).await;
                s.stop().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mcpwire() {
                let s = super::start_mcpwire().await;
                super::$check(s.addr).await;
                s.stop().await;
            }
        }
    )* };
}

on_both_servers!(
    unknown_method_is_in_band_then_status_ok,
    metadata_that_differs_from_the_body_is_32020_in_the_trailers,
    protocol_version_and_meta_errors,
    malformed_json_is_32700_and_a_notification_gets_an_empty_stream,
    progress_without_a_token_sends_only_the_result,
    progress_past_grpc_timeout_is_deadline_exceeded,
    another_method_of_the_service_is_unimplemented,
);
