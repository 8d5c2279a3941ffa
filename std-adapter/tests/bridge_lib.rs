//! The bridge as a library ([`mcpwire_tokio::bridge`]), embedded without
//! the binary: a program that serves a remote server's tools on its own
//! port, a gateway that forwards to two servers by tool-name prefix, and a
//! typed host that gets a paging server's list whole.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::Harness;
use mcpwire_tokio::bridge::Bridge;
use mcpwire_tokio::{
    App, Client, ForwardResult, Server, ToolCall, ToolError, ToolResult, client::grpc,
};
use serde_json::{Value, json};

/// Serves `app` on a loopback port until the harness stops.
async fn serve(app: App) -> Harness {
    let server = Server::bind("127.0.0.1:0").await.unwrap();
    common::serve(server, app, Arc::default())
}

/// A server whose one tool, `whoami`, answers `name`.
fn named(name: &'static str) -> App {
    App::new(name, "1").tool(
        "whoami",
        "Says which server answered.",
        r#"{"type":"object"}"#,
        move |_: ToolCall| async move { Ok(ToolResult::text(name)) },
    )
}

#[tokio::test]
async fn a_program_serves_a_remote_servers_tools_on_its_own_port() {
    let server = common::start_on_with_tick("127.0.0.1:0", Duration::from_secs(3600)).await;
    let target = format!("grpc://{}", server.addr);
    let bridge = Bridge::builder()
        .timeout(Some(Duration::from_secs(5)))
        .connect_to(target)
        .await
        .unwrap();
    assert!(bridge.refusal().is_none());
    let front = serve(bridge.app()).await;
    // A host over Streamable HTTP, the server over the gRPC tunnel.
    let host = Client::connect(&format!("http://{}/mcp", front.addr))
        .await
        .unwrap();
    let names: Vec<String> = host
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    let echoed = host.call_tool("echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(echoed.text(), "hi");
    // The host's progress token comes back on the server's progress.
    let mut seen = Vec::new();
    let done = host
        .call_tool_with_progress("progress", json!({"steps": 3, "delay_ms": 0}), |p| {
            seen.push((p.progress, p.message))
        })
        .await
        .unwrap();
    assert_eq!(done.text(), "done after 3 steps");
    assert_eq!(
        seen,
        [1.0, 2.0, 3.0].map(|i| (i, Some(format!("step {i} of 3"))))
    );
    // The server's own errors go back as they came.
    let e = host.call_tool("no-such-tool", json!({})).await.unwrap_err();
    assert!(e.rpc.is_some_and(|r| r.code == -32602), "{}", e.message);
    // The bridge learnt the tools' schemas from the server.
    assert!(bridge.tools().is_some());
    bridge.close().await;
    front.stop().await;
    server.stop().await;
}

#[tokio::test]
async fn a_gateway_forwards_to_two_servers_by_tool_name_prefix() {
    let (a, b) = (serve(named("alpha")).await, serve(named("beta")).await);
    let mut bridges = Vec::new();
    for harness in [&a, &b] {
        let client = Client::connect(&format!("grpc://{}", harness.addr))
            .await
            .unwrap();
        // A gateway's tool names are its own: the servers' schemas are not
        // learnt under them.
        bridges.push(Bridge::builder().learn_tools(false).client(client).await);
    }
    let bridges = Arc::new(bridges);
    const PREFIXES: [&str; 2] = ["a.", "b."];
    let gateway = App::new("gateway", "1").forward(move |request| {
        let bridges = Arc::clone(&bridges);
        async move {
            match request.method() {
                // Every server's tools, each name with its server's prefix.
                "tools/list" => {
                    let mut tools = Vec::new();
                    for (bridge, prefix) in bridges.iter().zip(PREFIXES) {
                        let list = value(bridge.forward(&request).await?);
                        for mut tool in list["tools"].as_array().cloned().unwrap_or_default() {
                            let name = tool["name"].as_str().unwrap_or_default();
                            tool["name"] = json!(format!("{prefix}{name}"));
                            tools.push(tool);
                        }
                    }
                    Ok(ForwardResult::from(json!({"tools": tools})))
                }
                // A call goes to the server its prefix names, without it.
                "tools/call" => {
                    let mut params = request.params().clone();
                    let name = params["name"].as_str().unwrap_or_default().to_owned();
                    let Some((bridge, tool)) = bridges
                        .iter()
                        .zip(PREFIXES)
                        .find_map(|(b, p)| Some((b, name.strip_prefix(p)?)))
                    else {
                        return Err(ToolError::invalid_params(format!("no server for {name}")));
                    };
                    params["name"] = json!(tool);
                    let params = serde_json::to_vec(&params).unwrap();
                    bridge.forward_params(&request, &params).await
                }
                // The rest (discovery first) is the first server's.
                _ => bridges[0].forward(&request).await,
            }
        }
    });
    let front = serve(gateway).await;
    let host = Client::connect(&format!("grpc://{}", front.addr))
        .await
        .unwrap();
    let mut names: Vec<String> = host
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    names.sort();
    assert_eq!(names, ["a.whoami", "b.whoami"]);
    for (tool, answer) in [("a.whoami", "alpha"), ("b.whoami", "beta")] {
        let result = host.call_tool(tool, json!({})).await.unwrap();
        assert_eq!(result.text(), answer, "{tool}");
    }
    let e = host.call_tool("c.whoami", json!({})).await.unwrap_err();
    assert!(
        e.message.contains("no server for c.whoami"),
        "{}",
        e.message
    );
    let discover = host.request("server/discover", json!({})).await.unwrap();
    assert_eq!(
        discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "alpha",
        "{discover}"
    );
    front.stop().await;
    a.stop().await;
    b.stop().await;
}

/// A forwarded result as a tree.
fn value(result: ForwardResult) -> Value {
    match result {
        ForwardResult::Value(v) => v,
        ForwardResult::Raw(raw) => serde_json::from_slice(raw.as_bytes()).unwrap(),
    }
}

#[tokio::test]
async fn a_typed_host_gets_a_paging_servers_list_whole() {
    // A server whose tool list comes in three pages (a forwarding app
    // answers with its own pages).
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&asked);
    let paging = App::new("paging", "1").forward(move |request| {
        let counted = Arc::clone(&counted);
        async move {
            let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});
            if request.method() != "tools/list" {
                return Err(ToolError::new(-32601, "only tools/list"));
            }
            counted.fetch_add(1, Ordering::SeqCst);
            let page = match request.params()["cursor"].as_str() {
                None => json!({"tools": [tool("one")], "nextCursor": "p2", "ttlMs": 0}),
                Some("p2") => json!({"tools": [tool("two"), tool("three")], "nextCursor": "p3"}),
                Some("p3") => json!({"tools": [tool("four")], "nextCursor": null}),
                Some(other) => return Err(ToolError::invalid_params(format!("cursor {other}"))),
            };
            Ok(ForwardResult::from(page))
        }
    });
    let server = serve(paging).await;
    let client = Client::connect(&format!("grpc://{}", server.addr))
        .await
        .unwrap();
    let bridge = Bridge::builder().learn_tools(false).client(client).await;
    let front = serve(bridge.app()).await;
    let mut config = grpc::Config::new(front.addr.to_string());
    config.mode = grpc::Mode::Typed;
    let host = Client::grpc(config).await.unwrap();
    let names: Vec<String> = host
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["one", "two", "three", "four"]);
    assert_eq!(asked.load(Ordering::SeqCst), 3, "one request a page");
    front.stop().await;
    server.stop().await;
}
