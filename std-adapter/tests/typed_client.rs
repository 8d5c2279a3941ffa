//! The typed mode of the gRPC client ([`grpc::Mode::Typed`]): the eight
//! methods with an RPC of `model_context_protocol.Mcp` go as those unary
//! RPCs, everything else over the tunnel of the same connection; the
//! application sees the same JSON-RPC responses and errors as on the
//! tunnel. Against the in-process `mcpwire serve` app, and against a
//! scripted HTTP/2 peer (the `h2` crate) that records what arrives and
//! answers what a test needs (error trailers in each form, protocol
//! violations).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::Harness;
use http::{HeaderMap, Request, Response};
use mcpwire_core::grpc::{Code, base64};
use mcpwire_core::mcp::typed;
use mcpwire_proto::gcp::Rpc;
use mcpwire_tokio::{Client, StreamMessage, client::grpc};
use serde_json::{Value, json};
use tokio::net::TcpListener;

async fn start() -> Harness {
    common::start_on_with_tick("127.0.0.1:0", Duration::from_millis(10)).await
}

fn config(addr: impl ToString, mode: grpc::Mode) -> grpc::Config {
    let mut config = grpc::Config::new(addr.to_string());
    config.mode = mode;
    config
}

async fn typed_client(addr: impl ToString) -> Client {
    Client::grpc(config(addr, grpc::Mode::Typed)).await.unwrap()
}

async fn tunnel_client(addr: impl ToString) -> Client {
    Client::grpc(config(addr, grpc::Mode::Tunnel))
        .await
        .unwrap()
}

// ----------------------------------------------------------------------
// Against `mcpwire serve`
// ----------------------------------------------------------------------

#[tokio::test]
async fn the_eight_rpcs_answer_as_on_the_tunnel() {
    let h = start().await;
    let client = typed_client(h.addr).await;
    assert_eq!(
        client.transport_name(),
        "gRPC typed binding (tunnel fallback)"
    );
    // ListTools
    let tools = client.list_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    for name in ["echo", "progress", "sleep", "lookup", "confirm"] {
        assert!(names.contains(&name), "{names:?}");
    }
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.input_schema["required"], json!(["text"]));
    // CallTool
    let echoed = client
        .call_tool("echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(echoed.text(), "hi");
    let found: Value = client
        .call_tool_typed("lookup", json!({"region": "eu", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(found, json!({"region": "eu", "limit": 2}));
    // ListResources, ReadResource
    let resources = client.list_resources().await.unwrap();
    assert_eq!(resources[0].uri, "mem://readme");
    let contents = client.read_resource("mem://readme").await.unwrap();
    assert!(contents[0].text.as_deref().unwrap().starts_with("mcpwire"));
    // ListResourceTemplates: the demo has none.
    let templates = client
        .request("resources/templates/list", json!({}))
        .await
        .unwrap();
    assert_eq!(templates["result"]["resourceTemplates"], json!([]));
    // ListPrompts, GetPrompt
    let prompts = client.list_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "greet");
    let prompt = client
        .get_prompt("greet", json!({"who": "Ada"}))
        .await
        .unwrap();
    assert_eq!(prompt.messages[0]["content"]["text"], "Say hello to Ada.");
    // Complete: the demo offers no completions, -32601 on both bindings,
    // with the request's own id.
    let complete = json!({"jsonrpc": "2.0", "id": "c-1", "method": "completion/complete",
        "params": {"ref": {"type": "ref/prompt", "name": "greet"},
            "argument": {"name": "who", "value": "A"}}});
    let typed = client
        .call(complete.clone())
        .await
        .unwrap()
        .response()
        .await;
    let tunnel = tunnel_client(h.addr)
        .await
        .call(complete)
        .await
        .unwrap()
        .response()
        .await;
    let typed = typed.unwrap();
    assert_eq!(typed["id"], "c-1");
    assert_eq!(typed["error"]["code"], -32601);
    assert_eq!(typed["error"], tunnel.unwrap()["error"]);
    h.stop().await;
}

/// The response of a typed call is the JSON-RPC response of the tunnel:
/// same id, same result (for a result the messages carry without loss).
#[tokio::test]
async fn a_typed_response_is_the_tunnels_response() {
    let h = start().await;
    let typed = typed_client(h.addr).await;
    let tunnel = tunnel_client(h.addr).await;
    for (method, params) in [
        (
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "é ✓"}}),
        ),
        ("resources/read", json!({"uri": "mem://readme"})),
        (
            "prompts/get",
            json!({"name": "greet", "arguments": {"who": "Bo"}}),
        ),
    ] {
        let request = json!({"jsonrpc": "2.0", "id": 41, "method": method, "params": params});
        let a = typed.call(request.clone()).await.unwrap();
        let a = a.response().await.unwrap();
        let b = tunnel
            .call(request)
            .await
            .unwrap()
            .response()
            .await
            .unwrap();
        assert_eq!(a, b, "{method}");
    }
    h.stop().await;
}

#[tokio::test]
async fn a_multi_round_trip_call_completes() {
    let h = start().await;
    let client = typed_client(h.addr).await;
    let mut asked = Vec::new();
    let confirmed = client
        .call_tool_with_input(
            "confirm",
            json!({}),
            json!({"elicitation": {}}),
            |requests| {
                asked.push(requests["confirm"]["params"]["message"].clone());
                let mut answers = serde_json::Map::new();
                answers.insert(
                    "confirm".into(),
                    json!({"action": "accept", "content": {"ok": true}}),
                );
                Ok(answers)
            },
        )
        .await
        .unwrap();
    assert_eq!(confirmed.text(), "confirmed");
    assert_eq!(asked, [json!("Proceed?")]);
    h.stop().await;
}

/// A JSON-RPC error ends a typed call in its trailers; the client hands
/// the application the error the tunnel gives, code, message and data.
#[tokio::test]
async fn a_json_rpc_error_arrives_with_its_code_and_data() {
    let h = start().await;
    let e = typed_client(h.addr)
        .await
        .read_resource("mem://nope")
        .await
        .unwrap_err();
    let rpc = e.rpc.as_ref().expect("a JSON-RPC error");
    assert_eq!(rpc.code, -32602);
    assert_eq!(rpc.data.as_ref().unwrap()["uri"], "mem://nope");
    let t = tunnel_client(h.addr)
        .await
        .read_resource("mem://nope")
        .await
        .unwrap_err();
    assert_eq!(e.rpc, t.rpc);
    // A missing capability, also from the trailers.
    let r = typed_client(h.addr)
        .await
        .request("tools/call", json!({"name": "confirm", "arguments": {}}))
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32021, "{r}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_ends_the_call_and_the_handler() {
    let h = start().await;
    let client = typed_client(h.addr).await;
    let started = tokio::time::Instant::now();
    let call = client
        .call_with_timeout(
            json!({"jsonrpc": "2.0", "method": "tools/call",
                "params": {"name": "counted_sleep", "arguments": {"ms": 5000}}}),
            Some(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    let e = call.response().await.unwrap_err();
    assert_eq!(e.status, Code::DeadlineExceeded, "{e}");
    // Well before the 5 s sleep would end (the margin is for a busy machine).
    assert!(started.elapsed() < Duration::from_secs(4));
    let c = Arc::clone(&h.counters);
    assert!(
        common::eventually_every(Duration::from_millis(10), Duration::from_secs(10), || {
            c.dropped.load(Ordering::SeqCst) == 1
        })
        .await,
        "the handler was stopped"
    );
    assert_eq!(h.counters.finished.load(Ordering::SeqCst), 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_call_cancels_it_on_the_server() {
    let h = start().await;
    let client = typed_client(h.addr).await;
    let call = client
        .call(json!({"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": "counted_sleep", "arguments": {"ms": 5000}}}))
        .await
        .unwrap();
    let c = Arc::clone(&h.counters);
    assert!(
        common::eventually_every(Duration::from_millis(5), Duration::from_secs(10), || {
            c.started.load(Ordering::SeqCst) == 1
        })
        .await
    );
    drop(call);
    let c = Arc::clone(&h.counters);
    assert!(
        common::eventually_every(Duration::from_millis(10), Duration::from_secs(10), || {
            c.dropped.load(Ordering::SeqCst) == 1
        })
        .await,
        "the reset stopped the handler"
    );
    assert_eq!(h.counters.finished.load(Ordering::SeqCst), 0);
    // The connection serves on.
    let echoed = client.call_tool("echo", json!({"text": "on"})).await;
    assert_eq!(echoed.unwrap().text(), "on");
    h.stop().await;
}

/// `server/discover` and `subscriptions/listen` have no RPC: they go over
/// the tunnel and answer as there.
#[tokio::test]
async fn discover_and_listen_go_over_the_tunnel() {
    let h = start().await;
    let client = typed_client(h.addr).await;
    let discover = client.request("server/discover", json!({})).await.unwrap();
    assert_eq!(
        discover["result"]["supportedVersions"],
        json!(["2026-07-28"]),
        "{discover}"
    );
    let mut listen = client
        .listen(json!({"notifications": {"toolsListChanged": true}}))
        .await
        .unwrap();
    let mut methods = Vec::new();
    while methods.len() < 2 {
        match listen.next().await.unwrap() {
            Some(StreamMessage::Notification(n)) => {
                methods.push(n["method"].as_str().unwrap_or_default().to_owned());
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        methods,
        [
            "notifications/subscriptions/acknowledged",
            "notifications/tools/list_changed"
        ]
    );
    drop(listen);
    // An extension method: the server's -32601, through the tunnel.
    let r = client.request("nothing/here", json!({})).await.unwrap();
    assert_eq!(r["error"]["code"], -32601);
    h.stop().await;
}

// ----------------------------------------------------------------------
// Against a scripted peer
// ----------------------------------------------------------------------

/// What the scripted peer saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    head: HeaderMap,
    /// The request message (gRPC prefix removed).
    message: Vec<u8>,
}

/// How the scripted peer answers a typed call.
#[derive(Debug, Clone)]
enum Script {
    /// One response message (the MCP result as JSON, transcoded), then
    /// `grpc-status: 0`.
    Result(Value),
    /// Trailers only, with these fields.
    Trailers(Vec<(&'static str, String)>),
    /// The result twice: a protocol violation.
    TwoMessages(Value),
    /// A message and then trailers without `grpc-status`.
    NoStatus(Value),
}

struct Peer {
    addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn grpc_frame(message: &[u8]) -> Bytes {
    let mut out = vec![0];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out.into()
}

fn result_message(rpc: Rpc, result: &Value) -> Bytes {
    let mut out = vec![0u8; 1 << 16];
    let n = typed::result_to_proto(rpc, result.to_string().as_bytes(), &mut out).unwrap();
    grpc_frame(&out[..n])
}

/// A peer that answers every typed call by `script` and every tunnel call
/// with a result naming its method.
async fn peer(script: Script) -> Peer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let log = Arc::clone(&log);
            let script = script.clone();
            tokio::spawn(async move {
                let mut conn = h2::server::handshake(tcp).await.unwrap();
                while let Some(Ok((request, respond))) = conn.accept().await {
                    let log = Arc::clone(&log);
                    let script = script.clone();
                    tokio::spawn(answer(request, respond, script, log));
                }
            });
        }
    });
    Peer { addr, seen }
}

async fn answer(
    request: Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    script: Script,
    log: Arc<Mutex<Vec<Seen>>>,
) {
    let (parts, mut body) = request.into_parts();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let message = data.get(5..).unwrap_or_default().to_vec();
    let path = parts.uri.path().to_owned();
    log.lock().unwrap().push(Seen {
        path: path.clone(),
        head: parts.headers,
        message: message.clone(),
    });
    let head = |end: bool, fields: &[(&str, String)]| {
        let mut r = Response::builder()
            .status(200)
            .header("content-type", "application/grpc+proto");
        for (n, v) in fields {
            r = r.header(*n, v.as_str());
        }
        (r.body(()).unwrap(), end)
    };
    let ok_trailers = || {
        let mut t = HeaderMap::new();
        t.insert("grpc-status", "0".parse().unwrap());
        t
    };
    let Some(rpc) = Rpc::from_path(path.as_bytes()) else {
        // The tunnel: one JSON-RPC result naming the method. The message
        // is field 1 (tag 0x0a), a varint length, the JSON.
        let len_bytes = message[1..].iter().take_while(|b| **b & 0x80 != 0).count() + 1;
        let json = &message[1 + len_bytes..];
        let request: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
        let response = json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"tunnel": request["method"]}});
        let (h, _) = head(false, &[]);
        let mut send = respond.send_response(h, false).unwrap();
        send.send_data(common::frame(response.to_string().as_bytes()), false)
            .unwrap();
        send.send_trailers(ok_trailers()).unwrap();
        return;
    };
    match script {
        Script::Result(result) => {
            let (h, _) = head(false, &[]);
            let mut send = respond.send_response(h, false).unwrap();
            send.send_data(result_message(rpc, &result), false).unwrap();
            send.send_trailers(ok_trailers()).unwrap();
        }
        Script::TwoMessages(result) => {
            let (h, _) = head(false, &[]);
            let mut send = respond.send_response(h, false).unwrap();
            send.send_data(result_message(rpc, &result), false).unwrap();
            send.send_data(result_message(rpc, &result), false).unwrap();
            send.send_trailers(ok_trailers()).unwrap();
        }
        Script::NoStatus(result) => {
            let (h, _) = head(false, &[]);
            let mut send = respond.send_response(h, false).unwrap();
            send.send_data(result_message(rpc, &result), false).unwrap();
            let mut t = HeaderMap::new();
            t.insert("x-other", "1".parse().unwrap());
            send.send_trailers(t).unwrap();
        }
        Script::Trailers(fields) => {
            let (h, end) = head(true, &fields);
            respond.send_response(h, end).unwrap();
        }
    }
}

fn bin(json: &Value) -> String {
    let text = json.to_string();
    let mut out = vec![0u8; text.len() * 2 + 8];
    let n = base64::encode(text.as_bytes(), &mut out).unwrap();
    String::from_utf8(out[..n].to_vec()).unwrap()
}

/// What went where: the eight methods as their RPCs (and only those), the
/// rest on the tunnel path of the same connection; the request head the
/// digest asks for.
#[tokio::test]
async fn typed_methods_take_their_rpc_paths_and_the_rest_the_tunnel() {
    let p = peer(Script::Result(json!({"content": []}))).await;
    let client = typed_client(p.addr).await;
    let r = client
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
        )
        .await
        .unwrap();
    assert_eq!(r["result"]["content"], json!([]), "{r}");
    let r = client.request("server/discover", json!({})).await.unwrap();
    assert_eq!(r["result"]["tunnel"], "server/discover");
    let r = client.request("x/extension", json!({})).await.unwrap();
    assert_eq!(r["result"]["tunnel"], "x/extension");
    let seen = p.seen.lock().unwrap().clone();
    let paths: Vec<_> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/model_context_protocol.Mcp/CallTool",
            "/mcp.zig.transport.v1.Mcp/Call",
            "/mcp.zig.transport.v1.Mcp/Call"
        ]
    );
    let call = &seen[0];
    let get = |n: &str| call.head.get(n).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(
        get("content-type").as_deref(),
        Some("application/grpc+proto")
    );
    assert_eq!(get("te").as_deref(), Some("trailers"));
    assert_eq!(get("mcp-protocol-version").as_deref(), Some("2026-07-28"));
    assert_eq!(get("mcp_tool").as_deref(), Some("echo"));
    assert!(get("grpc-timeout").is_some());
    // No tunnel mirroring on a typed call.
    assert_eq!(get("mcp-method"), None);
    // The message is the transcoded params, `_meta` included.
    let mut out = vec![0u8; 4096];
    let n = typed::request_to_json(Rpc::CallTool, &call.message, &mut out).unwrap();
    let params: Value = serde_json::from_slice(&out[..n]).unwrap();
    assert_eq!(params["name"], "echo");
    assert_eq!(params["arguments"], json!({"text": "x"}));
    assert_eq!(
        params["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
}

/// A request the messages cannot carry is refused before a byte goes out:
/// the peer sees no request at all.
#[tokio::test]
async fn a_request_the_messages_cannot_carry_never_leaves() {
    let p = peer(Script::Result(json!({"tools": []}))).await;
    let client = typed_client(p.addr).await;
    for (method, params) in [
        // The messages have no cursor.
        ("tools/list", json!({"cursor": "page-2"})),
        // A key without a field.
        (
            "tools/call",
            json!({"name": "echo", "arguments": {}, "task": {"ttl": 1}}),
        ),
        // An integer a Struct cannot hold exactly.
        (
            "tools/call",
            json!({"name": "echo", "arguments": {"n": 9007199254740993u64}}),
        ),
    ] {
        let e = client.request(method, params.clone()).await.unwrap_err();
        assert_eq!(e.status, Code::InvalidArgument, "{params}: {e}");
        assert_eq!(e.diagnostics.rpc_code, Some(-32600), "{params}: {e}");
    }
    assert!(p.seen.lock().unwrap().is_empty());
    // The same client still sends what the messages carry.
    let r = client.request("tools/list", json!({})).await.unwrap();
    assert_eq!(r["result"]["tools"], json!([]));
    assert_eq!(p.seen.lock().unwrap().len(), 1);
}

/// The binding's reading order of an error (digest §9.3): `mcp-error-bin`,
/// else `mcp-error-code` with `grpc-message`, else the status map; the
/// application's id in every case.
#[tokio::test]
async fn error_trailers_are_read_in_the_bindings_order() {
    let error = json!({"jsonrpc": "2.0", "id": null,
        "error": {"code": -32602, "message": "Unknown tool: nope", "data": {"tool": "nope"}}});
    let cases: [(Vec<(&str, String)>, Value); 4] = [
        // All three: the JSON of mcp-error-bin wins, data included.
        (
            vec![
                ("grpc-status", "3".into()),
                ("grpc-message", "other%20text".into()),
                ("mcp-error-code", "-32000".into()),
                ("mcp-error-bin", bin(&error)),
            ],
            json!({"code": -32602, "message": "Unknown tool: nope", "data": {"tool": "nope"}}),
        ),
        // No bin: the code and the percent-decoded message.
        (
            vec![
                ("grpc-status", "13".into()),
                ("grpc-message", "it%20broke".into()),
                ("mcp-error-code", "-32050".into()),
            ],
            json!({"code": -32050, "message": "it broke"}),
        ),
        // A code that is not a number is ignored: the status map.
        (
            vec![
                ("grpc-status", "12".into()),
                ("grpc-message", "no".into()),
                ("mcp-error-code", "x".into()),
            ],
            json!({"code": -32601}),
        ),
        // Only the status.
        (vec![("grpc-status", "5".into())], json!({"code": -32600})),
    ];
    for (trailers, want) in cases {
        let p = peer(Script::Trailers(trailers.clone())).await;
        let client = typed_client(p.addr).await;
        let r = client
            .call(
                json!({"jsonrpc": "2.0", "id": "app-7", "method": "tools/call",
                "params": {"name": "nope", "arguments": {}}}),
            )
            .await
            .unwrap()
            .response()
            .await
            .unwrap();
        assert_eq!(r["id"], "app-7", "{trailers:?}");
        for (k, v) in want.as_object().unwrap() {
            assert_eq!(&r["error"][k], v, "{trailers:?}: {r}");
        }
        if want.get("data").is_none() {
            assert!(r["error"].get("data").is_none(), "{r}");
        }
    }
}

/// Statuses the binding reads as a transport failure, not a JSON-RPC
/// error: the call fails with the status.
#[tokio::test]
async fn transport_statuses_fail_the_call() {
    for (status, code) in [
        ("14", Code::Unavailable),
        ("4", Code::DeadlineExceeded),
        ("16", Code::Unauthenticated),
    ] {
        let p = peer(Script::Trailers(vec![("grpc-status", status.into())])).await;
        let e = typed_client(p.addr)
            .await
            .request("tools/list", json!({}))
            .await
            .unwrap_err();
        assert_eq!(e.status, code, "{status}: {e}");
    }
}

/// A second response message, or trailers without `grpc-status`, make the
/// response invalid: a transport failure, never a result.
#[tokio::test]
async fn a_broken_typed_response_is_a_transport_failure() {
    let result = json!({"tools": []});
    for script in [
        Script::TwoMessages(result.clone()),
        Script::NoStatus(result),
    ] {
        let p = peer(script.clone()).await;
        let e = typed_client(p.addr)
            .await
            .request("tools/list", json!({}))
            .await
            .unwrap_err();
        assert_eq!(e.status, Code::Internal, "{script:?}: {e}");
    }
}

/// `mcpwire call --typed`: `tool` goes as the CallTool RPC, `discover`
/// over the tunnel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_calls_the_typed_rpc_with_typed() {
    let p = peer(Script::Result(
        json!({"content": [{"type": "text", "text": "from the peer"}]}),
    ))
    .await;
    let url = format!("grpc://{}", p.addr);
    let run = |args: Vec<&str>| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .arg("call")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let url2 = url.clone();
    let result = tokio::task::spawn_blocking(move || {
        run(vec![&url2, "--typed", "tool", "echo", r#"{"text":"x"}"#])
    })
    .await
    .unwrap();
    assert_eq!(result["content"][0]["text"], "from the peer");
    let result = tokio::task::spawn_blocking(move || run(vec![&url, "--typed", "discover"]))
        .await
        .unwrap();
    assert_eq!(result["tunnel"], "server/discover");
    let paths: Vec<_> = p
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert_eq!(
        paths,
        [
            "/model_context_protocol.Mcp/CallTool",
            "/mcp.zig.transport.v1.Mcp/Call"
        ]
    );
}

/// Messages whose protobuf is longer than their JSON (small integers in a
/// `Struct` take 11 octets) and results whose JSON is far longer than
/// their protobuf (many empty items): both directions find their room.
#[tokio::test]
async fn messages_that_grow_in_either_direction_arrive_whole() {
    let h = start().await;
    let client = typed_client(h.addr).await;
    let pad = vec![1; 5000];
    let echoed = client
        .call_tool("echo", json!({"text": "padded", "pad": pad}))
        .await
        .unwrap();
    assert_eq!(echoed.text(), "padded");
    let big = "0123456789abcdef".repeat(32 * 1024);
    let echoed = client
        .call_tool("echo", json!({"text": big}))
        .await
        .unwrap();
    assert_eq!(echoed.text(), big);
    h.stop().await;

    let items = vec![json!({"type": "text", "text": ""}); 3000];
    let p = peer(Script::Result(json!({"content": items}))).await;
    let r = typed_client(p.addr)
        .await
        .request("tools/call", json!({"name": "many", "arguments": {}}))
        .await
        .unwrap();
    assert_eq!(r["result"]["content"].as_array().unwrap().len(), 3000);
}

/// A request message over `max_message_bytes` is refused before it goes
/// out, as on the tunnel.
#[tokio::test]
async fn a_request_over_the_message_limit_never_leaves() {
    let p = peer(Script::Result(json!({"content": []}))).await;
    let mut config = config(p.addr, grpc::Mode::Typed);
    config.max_message_bytes = 1024;
    let client = Client::grpc(config).await.unwrap();
    let e = client
        .call_tool("echo", json!({"text": "x".repeat(4096)}))
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::ResourceExhausted, "{e}");
    assert!(p.seen.lock().unwrap().is_empty());
    let r = client.call_tool("echo", json!({"text": "small"})).await;
    assert!(r.is_ok(), "{r:?}");
}

/// Bearer tokens hold for typed calls as for the tunnel's: without one
/// the call fails UNAUTHENTICATED (401, the challenge); the channel's
/// `authorization` metadata goes with every typed call.
#[tokio::test]
async fn typed_calls_carry_the_channels_bearer_token() {
    let counters = Arc::new(common::Counters::default());
    let server = mcpwire_tokio::Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(mcpwire_tokio::BearerTokens::new([("right-token", "alice")]));
    let app = common::app(&counters, Duration::from_millis(10));
    let h = common::serve(server, app, counters);
    let e = typed_client(h.addr).await.list_tools().await.unwrap_err();
    assert_eq!(e.status, Code::Unauthenticated, "{e}");
    assert_eq!(e.diagnostics.http_status, Some(401));
    assert!(
        e.diagnostics
            .www_authenticate
            .as_deref()
            .unwrap()
            .starts_with("Bearer")
    );
    let mut config = config(h.addr, grpc::Mode::Typed);
    config
        .metadata
        .push(("authorization".into(), "Bearer right-token".into()));
    let client = Client::grpc(config).await.unwrap();
    let echoed = client.call_tool("echo", json!({"text": "in"})).await;
    assert_eq!(echoed.unwrap().text(), "in");
    h.stop().await;
}
