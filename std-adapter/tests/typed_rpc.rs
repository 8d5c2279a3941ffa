//! The typed gRPC binding (`/model_context_protocol.Mcp/<Rpc>`) served by
//! the tokio server beside the tunnel, called with `h2` as a typed gRPC
//! client would: protobuf request messages, one response message or a
//! trailers-only error (typed binding digest §7, §9).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::{Counters, Harness, connect, serve, start_on_with_tick};
use h2::client::SendRequest;
use http::HeaderMap;
use mcpwire_core::grpc::base64;
use mcpwire_core::mcp::typed;
use mcpwire_proto::gcp::Rpc;
use mcpwire_tokio::{BearerTokens, Server};
use serde_json::{Value, json};

async fn start() -> Harness {
    start_on_with_tick("127.0.0.1:0", Duration::from_millis(10)).await
}

/// What a typed call got back.
#[derive(Debug)]
struct Answer {
    head: HeaderMap,
    /// The response messages (raw protobuf).
    messages: Vec<Vec<u8>>,
    trailers: HeaderMap,
}

impl Answer {
    fn get(&self, name: &str) -> Option<&str> {
        self.trailers
            .get(name)
            .or_else(|| self.head.get(name))
            .and_then(|v| v.to_str().ok())
    }

    /// The one response message as the MCP result JSON.
    fn result(&self, rpc: Rpc) -> Value {
        assert_eq!(self.messages.len(), 1, "one response message");
        let mut out = vec![0u8; 1 << 16];
        let n = typed::result_to_json(rpc, &self.messages[0], &mut out).unwrap();
        serde_json::from_slice(&out[..n]).unwrap()
    }

    /// `mcp-error-bin` decoded: the JSON-RPC error response.
    fn error_bin(&self) -> Value {
        let text = self.get("mcp-error-bin").expect("mcp-error-bin");
        let mut out = vec![0u8; text.len()];
        let n = base64::decode(text.as_bytes(), &mut out).expect("base64");
        serde_json::from_slice(&out[..n]).unwrap()
    }
}

/// The protobuf request of `rpc` for the MCP `params`.
fn encode(rpc: Rpc, params: &Value) -> Vec<u8> {
    let mut out = vec![0u8; 1 << 20];
    let n = typed::request_to_proto(rpc, params.to_string().as_bytes(), &mut out).unwrap();
    out.truncate(n);
    out
}

/// One unary call of `rpc` with the raw request message `message`.
async fn call_raw(
    send: &mut SendRequest<Bytes>,
    rpc: Rpc,
    message: &[u8],
    extra: &[(&str, &str)],
) -> Answer {
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{}", rpc.path()))
        .header("content-type", "application/grpc+proto")
        .header("te", "trailers");
    for (n, v) in extra {
        req = req.header(*n, *v);
    }
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    let mut ready = send.clone().ready().await.unwrap();
    let (resp, mut stream) = ready.send_request(req.body(()).unwrap(), false).unwrap();
    stream.send_data(Bytes::from(framed), true).unwrap();
    *send = ready;
    tokio::time::timeout(Duration::from_secs(10), async {
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        let head = resp.headers().clone();
        let mut body = resp.into_body();
        let mut buf = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap();
            let _ = body.flow_control().release_capacity(chunk.len());
            buf.extend_from_slice(&chunk);
        }
        let mut messages = Vec::new();
        let mut rest = &buf[..];
        while !rest.is_empty() {
            assert!(rest.len() >= 5, "a partial prefix");
            assert_eq!(rest[0], 0, "uncompressed");
            let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            messages.push(rest[5..5 + len].to_vec());
            rest = &rest[5 + len..];
        }
        let trailers = body.trailers().await.unwrap().unwrap_or_default();
        Answer {
            head,
            messages,
            trailers,
        }
    })
    .await
    .expect("the call ends")
}

async fn call(send: &mut SendRequest<Bytes>, rpc: Rpc, params: Value) -> Answer {
    call_raw(send, rpc, &encode(rpc, &params), &[]).await
}

#[tokio::test]
async fn call_tool_answers_the_tools_result_as_a_call_tool_response() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let a = call(
        &mut send,
        Rpc::CallTool,
        json!({"name": "echo", "arguments": {"text": "h\u{e9}llo"}}),
    )
    .await;
    assert_eq!(a.get("grpc-status"), Some("0"));
    assert_eq!(
        a.head.get("content-type").unwrap(),
        "application/grpc+proto"
    );
    let result = a.result(Rpc::CallTool);
    assert_eq!(result["content"][0]["type"], "text");
    assert_eq!(result["content"][0]["text"], "h\u{e9}llo");
    assert_ne!(result["isError"], true);
    h.stop().await;
}

/// The digest's golden `CallToolRequest` (`add` with `a: 1`, empty
/// `_meta`), hand-encoded: a tool the server does not have is a JSON-RPC
/// error in trailers, INVALID_ARGUMENT with -32602 (an `is_error` result
/// is reserved for errors inside a tool).
#[tokio::test]
async fn an_unknown_tool_ends_the_call_with_invalid_argument_and_the_error_in_trailers() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let golden: &[u8] = &[
        0x0a, 0x02, 0x0a, 0x00, 0x12, 0x17, 0x0a, 0x03, b'a', b'd', b'd', 0x12, 0x10, 0x0a, 0x0e,
        0x0a, 0x01, b'a', 0x12, 0x09, 0x11, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,
    ];
    let a = call_raw(&mut send, Rpc::CallTool, golden, &[]).await;
    assert!(a.messages.is_empty(), "trailers only: {a:?}");
    assert_eq!(a.get("grpc-status"), Some("3"));
    assert_eq!(a.get("mcp-error-code"), Some("-32602"));
    let bin = a.error_bin();
    assert_eq!(bin["jsonrpc"], "2.0");
    assert_eq!(bin["id"], Value::Null);
    assert_eq!(bin["error"]["code"], -32602);
    let message = bin["error"]["message"].as_str().unwrap();
    assert!(!message.is_empty());
    assert_eq!(a.get("grpc-message"), Some(message));
    h.stop().await;
}

#[tokio::test]
async fn list_tools_answers_every_tool_in_one_response() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    // An empty request message (no `common`) is valid.
    let a = call_raw(&mut send, Rpc::ListTools, &[], &[]).await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    let result = a.result(Rpc::ListTools);
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(names.contains(&"counted_sleep"), "{names:?}");
    assert_eq!(result["tools"][0]["inputSchema"]["type"], "object");
    h.stop().await;
}

#[tokio::test]
async fn a_malformed_request_message_is_invalid_argument_and_parse_error() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    // A length-delimited `common` cut short (digest §11).
    let a = call_raw(&mut send, Rpc::ListTools, &[0x0a, 0x05], &[]).await;
    assert!(a.messages.is_empty());
    assert_eq!(a.get("grpc-status"), Some("3"));
    assert_eq!(a.get("mcp-error-code"), Some("-32700"));
    let message = a.error_bin()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.starts_with("The message is not a valid ListToolsRequest"),
        "{message}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_call_without_a_tool_name_is_invalid_params() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let a = call_raw(&mut send, Rpc::CallTool, &[], &[]).await;
    assert_eq!(a.get("grpc-status"), Some("3"));
    assert_eq!(a.get("mcp-error-code"), Some("-32602"));
    h.stop().await;
}

#[tokio::test]
async fn a_routing_header_that_differs_from_the_message_is_a_header_mismatch() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let message = encode(
        Rpc::CallTool,
        &json!({"name": "echo", "arguments": {"text": "x"}}),
    );
    let a = call_raw(&mut send, Rpc::CallTool, &message, &[("mcp_tool", "other")]).await;
    assert_eq!(a.get("grpc-status"), Some("3"));
    assert_eq!(a.get("mcp-error-code"), Some("-32020"));
    // The same header with the tool's name passes.
    let a = call_raw(&mut send, Rpc::CallTool, &message, &[("mcp_tool", "echo")]).await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    h.stop().await;
}

/// A map whose entries repeat a key (the `arguments` Struct here, as a
/// protobuf peer may write it: the encoder does not) is -32602 before the
/// tool runs, never JSON with the key twice (the engine read the first,
/// the handler's serde the last); routing metadata given twice is -32020
/// (issue #32, A3).
#[tokio::test]
async fn a_repeated_map_key_or_routing_header_ends_the_call_before_the_tool_runs() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let two = encode(
        Rpc::CallTool,
        &json!({"name": "counted_sleep", "arguments": {"ms": 1, "mS": 60000}}),
    );
    let at = two.windows(2).position(|w| w == b"mS").unwrap();
    let mut twice = two.clone();
    twice[at + 1] = b's';
    let a = call_raw(&mut send, Rpc::CallTool, &twice, &[]).await;
    assert_eq!(a.get("grpc-status"), Some("3"), "{a:?}");
    assert_eq!(a.get("mcp-error-code"), Some("-32602"), "{a:?}");
    assert_eq!(
        a.error_bin()["error"]["message"],
        "a map with a repeated key"
    );
    let once = encode(
        Rpc::CallTool,
        &json!({"name": "counted_sleep", "arguments": {"ms": 1}}),
    );
    for extra in [
        [("mcp_tool", "counted_sleep"), ("mcp_tool", "counted_sleep")],
        [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-protocol-version", "2026-07-28"),
        ],
    ] {
        let a = call_raw(&mut send, Rpc::CallTool, &once, &extra).await;
        assert_eq!(a.get("grpc-status"), Some("3"), "{a:?}");
        assert_eq!(a.get("mcp-error-code"), Some("-32020"), "{a:?}");
    }
    assert_eq!(
        h.counters.started.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    let a = call_raw(&mut send, Rpc::CallTool, &once, &[]).await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    assert_eq!(
        h.counters.started.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    h.stop().await;
}

#[tokio::test]
async fn the_protocol_version_header_fills_a_missing_version_and_is_judged() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let message = encode(Rpc::ListTools, &json!({}));
    let a = call_raw(
        &mut send,
        Rpc::ListTools,
        &message,
        &[("mcp-protocol-version", "1999-01-01")],
    )
    .await;
    assert_eq!(a.get("grpc-status"), Some("3"));
    assert_eq!(a.get("mcp-error-code"), Some("-32022"));
    // A version in `_meta` that the header contradicts.
    let message = encode(
        Rpc::ListTools,
        &json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    );
    let a = call_raw(
        &mut send,
        Rpc::ListTools,
        &message,
        &[("mcp-protocol-version", "2025-11-25")],
    )
    .await;
    assert_eq!(a.get("mcp-error-code"), Some("-32020"));
    h.stop().await;
}

#[tokio::test]
async fn progress_notifications_are_dropped_and_the_result_arrives() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let a = call(
        &mut send,
        Rpc::CallTool,
        json!({
            "_meta": {"progressToken": "p1"},
            "name": "progress",
            "arguments": {"steps": 3, "delay_ms": 5}
        }),
    )
    .await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    assert_eq!(a.messages.len(), 1);
    let result = a.result(Rpc::CallTool);
    assert_ne!(result["isError"], true, "{result}");
    h.stop().await;
}

#[tokio::test]
async fn an_rpc_the_service_does_not_have_is_unimplemented() {
    let h = start().await;
    let send = connect(h.addr).await;
    let req = http::Request::builder()
        .method("POST")
        .uri("http://127.0.0.1/model_context_protocol.Mcp/Initialize")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut ready = send.ready().await.unwrap();
    let (resp, mut stream) = ready.send_request(req, false).unwrap();
    stream
        .send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true)
        .unwrap();
    let resp = resp.await.unwrap();
    assert_eq!(resp.headers().get("grpc-status").unwrap(), "12");
    assert!(resp.headers().get("mcp-error-code").is_none());
    h.stop().await;
}

/// The tunnel still answers beside the typed service on one connection.
#[tokio::test]
async fn tunnel_and_typed_calls_share_a_connection() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let a = call(&mut send, Rpc::ListTools, json!({})).await;
    assert_eq!(a.get("grpc-status"), Some("0"));
    let r = common::call(
        &mut send,
        common::tool_call(7, "echo", json!({"text": "t"})),
        &[],
    )
    .await;
    assert_eq!(r.status(), Some("0"));
    assert_eq!(r.text(), "t");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_deadline_is_deadline_exceeded_and_aborts_the_handler() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let message = encode(
        Rpc::CallTool,
        &json!({"name": "counted_sleep", "arguments": {"ms": 5000}}),
    );
    let started = tokio::time::Instant::now();
    let a = call_raw(
        &mut send,
        Rpc::CallTool,
        &message,
        &[("grpc-timeout", "200m")],
    )
    .await;
    assert_eq!(a.get("grpc-status"), Some("4"), "{a:?}");
    assert!(a.messages.is_empty());
    // Well before the 5 s sleep would end (the margin is for a busy machine).
    assert!(started.elapsed() < Duration::from_secs(4));
    let c = &h.counters;
    let dropped =
        common::eventually_every(Duration::from_millis(10), Duration::from_secs(10), || {
            c.dropped.load(std::sync::atomic::Ordering::SeqCst) == 1
        })
        .await;
    assert!(dropped, "the handler was aborted");
    assert_eq!(c.finished.load(std::sync::atomic::Ordering::SeqCst), 0);
    h.stop().await;
}

#[tokio::test]
async fn a_call_without_a_request_message_is_invalid_argument_without_an_mcp_code() {
    let h = start().await;
    let send = connect(h.addr).await;
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{}", Rpc::ListTools.path()))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut ready = send.ready().await.unwrap();
    let (resp, _) = ready.send_request(req, true).unwrap();
    let resp = resp.await.unwrap();
    assert_eq!(resp.headers().get("grpc-status").unwrap(), "3");
    assert!(resp.headers().get("mcp-error-code").is_none());
    h.stop().await;
}

/// A multi round-trip call (the demo's `confirm`): an input_required
/// response carries the elicitation and the sealed state; the retry with
/// the answer in `common.input_responses` completes.
#[tokio::test]
async fn confirm_takes_two_round_trips_through_input_responses() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let caps = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let first = json!({"_meta": caps, "name": "confirm", "arguments": {}});
    let a = call(&mut send, Rpc::CallTool, first).await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    let result = a.result(Rpc::CallTool);
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert_eq!(
        result["inputRequests"]["confirm"]["params"]["message"],
        "Proceed?"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let retry = json!({
        "_meta": caps,
        "name": "confirm",
        "arguments": {},
        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}},
        "requestState": state,
    });
    let a = call(&mut send, Rpc::CallTool, retry).await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    let result = a.result(Rpc::CallTool);
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["content"][0]["text"], "confirmed");
    // Without the elicitation capability (the binding fills in `{}`): -32021.
    let a = call(
        &mut send,
        Rpc::CallTool,
        json!({"name": "confirm", "arguments": {}}),
    )
    .await;
    assert_eq!(a.get("grpc-status"), Some("3"), "{a:?}");
    assert_eq!(a.get("mcp-error-code"), Some("-32021"));
    h.stop().await;
}

#[tokio::test]
async fn read_resource_get_prompt_and_the_lists_answer_typed_messages() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let a = call(&mut send, Rpc::ReadResource, json!({"uri": "mem://readme"})).await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    let result = a.result(Rpc::ReadResource);
    assert_eq!(result["contents"][0]["uri"], "mem://readme");
    assert!(
        result["contents"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("mcpwire")
    );
    let a = call(
        &mut send,
        Rpc::GetPrompt,
        json!({"name": "greet", "arguments": {"who": "Ada"}}),
    )
    .await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    let result = a.result(Rpc::GetPrompt);
    assert_eq!(
        result["messages"][0]["content"]["text"],
        "Say hello to Ada."
    );
    let a = call(&mut send, Rpc::ListResources, json!({})).await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    assert_eq!(
        a.result(Rpc::ListResources)["resources"][0]["uri"],
        "mem://readme"
    );
    let a = call(&mut send, Rpc::ListPrompts, json!({})).await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    assert_eq!(a.result(Rpc::ListPrompts)["prompts"][0]["name"], "greet");
    // A URI the app does not serve: the handler's -32602, in trailers.
    let a = call(&mut send, Rpc::ReadResource, json!({"uri": "mem://nope"})).await;
    assert_eq!(a.get("grpc-status"), Some("3"), "{a:?}");
    assert_eq!(a.get("mcp-error-code"), Some("-32602"));
    assert_eq!(a.error_bin()["error"]["data"]["uri"], "mem://nope");
    h.stop().await;
}

/// The demo offers no completions: the engine's -32601 is UNIMPLEMENTED.
#[tokio::test]
async fn complete_on_a_server_without_completions_is_unimplemented() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let a = call(
        &mut send,
        Rpc::Complete,
        json!({"ref": {"type": "ref/prompt", "name": "greet"},
            "argument": {"name": "who", "value": "A"}}),
    )
    .await;
    assert_eq!(a.get("grpc-status"), Some("12"), "{a:?}");
    assert_eq!(a.get("mcp-error-code"), Some("-32601"));
    h.stop().await;
}

/// A result larger than the connection's window and the call's first
/// buffer: the buffer grows for the transcoded message, which goes out in
/// pieces as the window opens.
#[tokio::test]
async fn a_large_result_arrives_whole() {
    let h = start().await;
    let mut send = connect(h.addr).await;
    let text = "0123456789abcdef".repeat(16 * 1024);
    let a = call(
        &mut send,
        Rpc::CallTool,
        json!({"name": "echo", "arguments": {"text": text}}),
    )
    .await;
    assert_eq!(a.get("grpc-status"), Some("0"));
    let mut out = vec![0u8; 1 << 20];
    let n = typed::result_to_json(Rpc::CallTool, &a.messages[0], &mut out).unwrap();
    let result: Value = serde_json::from_slice(&out[..n]).unwrap();
    assert_eq!(result["content"][0]["text"].as_str().unwrap(), text);
    h.stop().await;
}

/// Bearer tokens hold on typed calls as on the tunnel: no token is
/// UNAUTHENTICATED with the challenge, the right one gets the answer.
#[tokio::test]
async fn typed_calls_need_the_bearer_token_when_the_server_asks_for_one() {
    let counters = std::sync::Arc::new(Counters::default());
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(BearerTokens::new([("right-token", "alice")]));
    let app = common::app(&counters, Duration::from_millis(10));
    let h = serve(server, app, counters);
    let mut send = connect(h.addr).await;
    let message = encode(Rpc::ListTools, &json!({}));
    let a = call_raw(&mut send, Rpc::ListTools, &message, &[]).await;
    assert_eq!(a.get("grpc-status"), Some("16"), "{a:?}");
    assert!(a.get("www-authenticate").unwrap().starts_with("Bearer"));
    assert!(a.messages.is_empty());
    let a = call_raw(
        &mut send,
        Rpc::ListTools,
        &message,
        &[("authorization", "Bearer right-token")],
    )
    .await;
    assert_eq!(a.get("grpc-status"), Some("0"), "{a:?}");
    assert!(a.result(Rpc::ListTools)["tools"].as_array().unwrap().len() > 1);
    h.stop().await;
}
