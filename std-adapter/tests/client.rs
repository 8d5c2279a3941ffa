//! The one client API (`mcpwire_tokio::Client`) against `mcpwire serve`'s
//! app: the same calls, results and JSON-RPC errors over Streamable HTTP,
//! the gRPC tunnel, the typed gRPC binding (all on the same port) and
//! stdio (the `mcpwire` binary as a child); the HTTP era probe keeps the
//! modern channel for a modern server and never falls back on a 401. The
//! older eras reached through the fallback are in tests/legacy_http.rs
//! (they need the mcp 1.26 peer).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Counters;
use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::stdio::Era;
use mcpwire_tokio::{
    BearerTokens, Client, Server, ServerCommand, StreamMessage,
    client::{grpc, http, stdio},
};
use serde_json::json;

/// What every transport must answer alike.
async fn the_same_calls(client: &Client) -> i64 {
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    let echoed = client
        .call_tool("echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(echoed.text(), "hi");
    let mut seen = Vec::new();
    let done = client
        .call_tool_with_progress("progress", json!({"steps": 3, "delay_ms": 0}), |p| {
            seen.push(p.progress)
        })
        .await
        .unwrap();
    assert_eq!(done.text(), "done after 3 steps");
    // The typed binding drops the notifications of a request (digest §7).
    let typed = client.transport_name().starts_with("gRPC typed");
    let steps: &[f64] = if typed { &[] } else { &[1.0, 2.0, 3.0] };
    assert_eq!(seen, steps);
    let contents = client.read_resource("mem://readme").await.unwrap();
    assert!(contents[0].text.as_deref().unwrap().starts_with("mcpwire"));
    let prompt = client
        .get_prompt("greet", json!({"who": "Ada"}))
        .await
        .unwrap();
    assert!(prompt.messages[0].to_string().contains("Say hello to Ada."));
    let found: serde_json::Value = client
        .call_tool_typed("lookup", json!({"region": "eu", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(found, json!({"region": "eu", "limit": 2}));
    // A multi round-trip call: the input request answered by the
    // callback, the tool completing on the second round.
    let mut asked = Vec::new();
    let confirmed = client
        .call_tool_with_input(
            "confirm",
            json!({}),
            json!({"elicitation": {}}),
            |requests| {
                asked.extend(requests.keys().cloned());
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
    assert_eq!(asked, ["confirm"]);
    // A listen stream: acknowledged, then the demo's change events.
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
    // An unknown method: the server's JSON-RPC error, whatever the
    // transport.
    let response = client.request("nothing/here", json!({})).await.unwrap();
    response["error"]["code"]
        .as_i64()
        .expect("a JSON-RPC error")
}

#[tokio::test]
async fn the_same_calls_over_http_grpc_and_stdio() {
    let server = common::start_on_with_tick("127.0.0.1:0", Duration::from_millis(50)).await;
    let http = Client::connect(&format!("http://{}/mcp", server.addr))
        .await
        .unwrap();
    let era = http.era().unwrap();
    assert_eq!(era.era, Era::Modern, "{era}");
    assert_eq!(era.version, "2026-07-28");
    assert_eq!(era.fallback, None, "{era}");
    assert_eq!(era.server_versions.as_deref(), Some(r#"["2026-07-28"]"#));
    assert_eq!(http.transport_name(), "Streamable HTTP");
    let grpc = Client::connect(&format!("grpc://{}", server.addr))
        .await
        .unwrap();
    assert_eq!(grpc.transport_name(), "gRPC tunnel");
    let mut typed_config = grpc::Config::new(server.addr.to_string());
    typed_config.mode = grpc::Mode::Typed;
    let typed = Client::grpc(typed_config).await.unwrap();
    assert_eq!(
        typed.transport_name(),
        "gRPC typed binding (tunnel fallback)"
    );
    let command = ServerCommand::new(env!("CARGO_BIN_EXE_mcpwire")).args([
        "serve",
        "--stdio",
        "--tick-ms",
        "50",
    ]);
    let stdio = Client::stdio(stdio::Config::new(command)).await.unwrap();
    assert_eq!(stdio.transport_name(), "stdio");
    assert_eq!(stdio.era().unwrap().era, Era::Modern);

    let codes = [
        the_same_calls(&http).await,
        the_same_calls(&grpc).await,
        the_same_calls(&typed).await,
        the_same_calls(&stdio).await,
    ];
    assert_eq!(codes, [-32601; 4]);
    assert!(stdio.close().await.is_some());
    assert!(http.close().await.is_none());
    server.stop().await;
}

#[tokio::test]
async fn a_refused_probe_is_the_error_never_a_fallback() {
    let counters = Arc::new(Counters::default());
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(BearerTokens::new([("right-token", "alice")]));
    let app = common::app(&counters, Duration::from_secs(3600));
    let server = common::serve(server, app, counters);
    let url = format!("http://{}/mcp", server.addr);
    // 401 says nothing of the era (§8.3): the application is told.
    let e = Client::connect(&url).await.unwrap_err();
    assert_eq!(e.status, Code::Unauthenticated, "{e}");
    assert_eq!(e.diagnostics.http_status, Some(401));
    assert!(
        e.diagnostics
            .www_authenticate
            .unwrap()
            .starts_with("Bearer")
    );
    let mut config = http::Config::new(&url).unwrap();
    config.bearer = Some("right-token".into());
    let client = Client::http(config).await.unwrap();
    assert_eq!(client.era().unwrap().era, Era::Modern);
    assert_eq!(
        client
            .call_tool("echo", json!({"text": "in"}))
            .await
            .unwrap()
            .text(),
        "in"
    );
    server.stop().await;
}

#[tokio::test]
async fn an_address_of_no_transport_is_refused() {
    let e = Client::connect("ftp://example.invalid/").await.unwrap_err();
    assert_eq!(e.status, Code::InvalidArgument, "{e}");
    // Nothing listens there: the probe's failure, not a fallback.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = Client::connect(&format!("http://127.0.0.1:{port}/mcp"))
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e}");
}
