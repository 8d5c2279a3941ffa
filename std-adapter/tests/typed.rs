//! Typed tools (feature `schemars`) served in-process and called with real
//! gRPC tunnel calls: the schema a client lists, the arguments the handler
//! gets, the errors and the structured results a client sees.
#![cfg(feature = "schemars")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use common::{Harness, call, connect, meta, request, tool_call};
use mcpwire_tokio::{App, Server, Structured, ToolResult};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Where to look.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct Target {
    /// The region, mirrored as `Mcp-Param-Region`.
    #[schemars(extend("x-mcp-header" = "Region"))]
    region: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
struct LookupArgs {
    target: Target,
    /// How many rows at most.
    limit: u32,
    #[serde(default)]
    verbose: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
struct Rows {
    region: Option<String>,
    rows: Vec<u32>,
}

/// `lookup` (a `Structured` result) and `count` (a `ToolResult`), and what
/// `lookup`'s handler was given.
fn app(seen: &Arc<Mutex<Vec<LookupArgs>>>) -> App {
    let seen = Arc::clone(seen);
    App::new("typed", "1.0")
        .typed_tool(
            "lookup",
            "Looks rows up.",
            move |args: LookupArgs, _call| {
                let seen = Arc::clone(&seen);
                async move {
                    seen.lock().unwrap().push(args.clone());
                    Ok(Structured(Rows {
                        region: args.target.region,
                        rows: (1..=args.limit).collect(),
                    }))
                }
            },
        )
        .typed_tool(
            "count",
            "Counts its words.",
            |args: Words, call| async move {
                Ok(ToolResult::text(format!(
                    "{} words for {}",
                    args.words.len(),
                    call.principal().unwrap_or("anyone")
                )))
            },
        )
}

#[derive(Deserialize, JsonSchema)]
struct Words {
    words: Vec<String>,
}

async fn start(seen: &Arc<Mutex<Vec<LookupArgs>>>) -> Harness {
    let server = Server::bind("127.0.0.1:0").await.unwrap();
    common::serve(server, app(seen), Default::default())
}

#[tokio::test]
async fn the_listed_schema_comes_from_the_argument_type() {
    let h = start(&Default::default()).await;
    let mut send = connect(h.addr).await;
    let r = call(
        &mut send,
        request(json!(1), "tools/list", json!({}), meta(json!({}), None)),
        &[],
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    let tools = &r.messages[0]["result"]["tools"];
    assert_eq!(tools[0]["name"], "lookup");
    let schema = &tools[0]["inputSchema"];
    assert_eq!(schema["type"], "object");
    assert!(schema.get("$schema").is_none() && schema.get("$defs").is_none());
    assert_eq!(schema["required"], json!(["target", "limit"]));
    let region = &schema["properties"]["target"]["properties"]["region"];
    assert_eq!(
        (&region["type"], &region["x-mcp-header"]),
        (&json!("string"), &json!("Region"))
    );
    assert_eq!(schema["properties"]["limit"]["type"], "integer");
    assert_eq!(
        schema["properties"]["limit"]["description"],
        "How many rows at most."
    );
    assert_eq!(schema["properties"]["verbose"]["type"], "boolean");
    assert_eq!(
        tools[1]["inputSchema"]["properties"]["words"]["items"]["type"],
        "string"
    );
    h.stop().await;
}

#[tokio::test]
async fn good_arguments_reach_the_handler_typed_and_the_result_is_structured() {
    let seen = Arc::default();
    let h = start(&seen).await;
    let mut send = connect(h.addr).await;
    let r = call(
        &mut send,
        tool_call(2, "lookup", json!({"target": {"region": "eu"}, "limit": 3})),
        // The annotation generated from the type is enforced: the header
        // must mirror the argument.
        &[("mcp-param-region", "eu")],
    )
    .await;
    assert_eq!(r.status(), Some("0"), "{r:?}");
    let result = &r.messages[0]["result"];
    let expected = json!({"region": "eu", "rows": [1, 2, 3]});
    assert_eq!(result["structuredContent"], expected);
    let text: Value = serde_json::from_str(r.text()).unwrap();
    assert_eq!(text, expected);
    assert_eq!(
        *seen.lock().unwrap(),
        [LookupArgs {
            target: Target {
                region: Some("eu".into())
            },
            limit: 3,
            verbose: false,
        }]
    );
    let r = call(
        &mut send,
        tool_call(3, "count", json!({"words": ["a", "b"]})),
        &[],
    )
    .await;
    assert_eq!(r.text(), "2 words for anyone");
    h.stop().await;
}

#[tokio::test]
async fn bad_arguments_are_invalid_params_naming_the_argument() {
    let seen = Arc::default();
    let h = start(&seen).await;
    let mut send = connect(h.addr).await;
    let cases = [
        ("lookup", json!({"target": {}, "limit": "many"}), "limit"),
        ("lookup", json!({"target": {}, "limit": -1}), "limit"),
        // (A wrong `target.region` never gets this far: the engine checks
        // its mirrored header first.)
        ("lookup", json!({"target": 1, "limit": 1}), "target"),
        ("count", json!({"words": ["a", 3]}), "words[1]"),
    ];
    for (i, (tool, arguments, argument)) in cases.into_iter().enumerate() {
        let r = call(&mut send, tool_call(10 + i as u64, tool, arguments), &[]).await;
        assert_eq!(r.status(), Some("0"), "{r:?}");
        let error = &r.messages[0]["error"];
        assert_eq!(error["code"], -32602, "{error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("invalid arguments: {argument}: invalid ")),
            "{message}"
        );
        assert_eq!(error["data"]["argument"], argument);
    }
    // A missing argument is named in the message.
    let r = call(&mut send, tool_call(20, "lookup", json!({"limit": 1})), &[]).await;
    let error = &r.messages[0]["error"];
    assert_eq!(error["code"], -32602);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("missing field `target`"),
        "{error}"
    );
    assert!(seen.lock().unwrap().is_empty(), "the handler never ran");
    h.stop().await;
}

#[tokio::test]
async fn an_argument_type_that_is_not_an_object_stops_the_server_at_start() {
    let app = App::new("typed", "1.0").typed_tool(
        "number",
        "Takes a bare number.",
        |n: u32, _call| async move { Ok(ToolResult::text(n.to_string())) },
    );
    let server = Server::bind("127.0.0.1:0").await.unwrap();
    let e = server.serve(app).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(e.to_string(), r#"InvalidSchema { tool: "number" }"#);
}
