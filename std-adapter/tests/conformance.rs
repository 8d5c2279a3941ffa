//! The conformance fixture set (`mcpwire serve --fixtures conformance`)
//! over the stdio binding, in process: what the official conformance
//! suite checks of it, for the cases that take more than one message
//! (multi round-trip rounds, sealed and tampered state, listen streams and
//! list changes, capabilities, progress and logging).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "../src/bin/mcpwire/conformance.rs"]
mod conformance;

use std::time::Duration;

use mcpwire_tokio::{StateSeal, StdioConfig, stdio};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

/// Longest wait for anything the server should do at once.
const PATIENCE: Duration = Duration::from_secs(10);

struct Peer {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    wr: WriteHalf<DuplexStream>,
    /// Messages read while waiting for another one, in order.
    seen: Vec<Value>,
    next_id: u64,
}

fn start() -> Peer {
    let (client, server) = tokio::io::duplex(1 << 16);
    let (srd, swr) = tokio::io::split(server);
    let app = conformance::app(StateSeal::new(b"test key"));
    tokio::spawn(stdio::serve(app, srd, swr, StdioConfig::default()));
    let (crd, wr) = tokio::io::split(client);
    Peer {
        lines: BufReader::new(crd).lines(),
        wr,
        seen: Vec::new(),
        next_id: 1,
    }
}

/// Every capability a client can declare.
fn all_caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

impl Peer {
    /// Sends a request with `caps` declared; its id.
    async fn send(&mut self, method: &str, mut params: Value, caps: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let meta = params.get("_meta").cloned().unwrap_or_else(|| json!({}));
        params["_meta"] = meta;
        params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = caps;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.wr
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        id
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("a line from the server in time")
            .unwrap()
            .expect("a line, not the end");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// The response to `id`; what comes before it is kept in `seen`.
    async fn response(&mut self, id: u64) -> Value {
        if let Some(i) = self.seen.iter().position(|m| m["id"] == id) {
            return self.seen.remove(i);
        }
        loop {
            let m = self.next().await;
            if m["id"] == id && m.get("method").is_none() {
                return m;
            }
            self.seen.push(m);
        }
    }

    /// A request's response, sent with `caps`.
    async fn call(&mut self, method: &str, params: Value, caps: Value) -> Value {
        let id = self.send(method, params, caps).await;
        self.response(id).await
    }

    async fn tool(&mut self, name: &str, extra: Value) -> Value {
        let mut params = json!({"name": name, "arguments": {}});
        if let Value::Object(extra) = extra {
            params.as_object_mut().unwrap().extend(extra);
        }
        self.call("tools/call", params, all_caps()).await
    }

    /// The notification of `method` (from `seen` or the stream) that
    /// `matches`; messages passed over are kept.
    async fn notification(&mut self, method: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let wanted = |m: &Value| m["method"] == method && matches(m);
        if let Some(i) = self.seen.iter().position(wanted) {
            return self.seen.remove(i);
        }
        loop {
            let m = self.next().await;
            if wanted(&m) {
                return m;
            }
            self.seen.push(m);
        }
    }
}

fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {response}"))
}

fn state(response: &Value) -> String {
    assert_eq!(
        response["result"]["resultType"], "input_required",
        "{response}"
    );
    response["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState in {response}"))
        .to_owned()
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test]
async fn discover_and_the_lists_offer_what_the_suite_calls() {
    let mut p = start();
    let d = p.call("server/discover", json!({}), json!({})).await;
    assert_eq!(
        d["result"]["capabilities"],
        json!({"tools": {"listChanged": true},
            "resources": {"listChanged": true, "subscribe": true},
            "prompts": {"listChanged": true}, "completions": {}})
    );
    let tools = p.call("tools/list", json!({}), json!({})).await;
    let tools = &tools["result"];
    assert!(tools["ttlMs"].is_u64() && tools["cacheScope"] == "public");
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(
                t["description"].is_string() && t["inputSchema"].is_object(),
                "{t}"
            );
            t["name"].as_str().unwrap()
        })
        .collect();
    for name in [
        "test_simple_text",
        "test_tool_with_progress",
        "test_missing_capability",
        "test_trigger_tool_change",
        "test_input_required_result_tampered_state",
        "test_input_required_result_capabilities",
        "json_schema_2020_12_tool",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    // The 2020-12 schema is served as written.
    let schema = &tools["tools"][names
        .iter()
        .position(|n| *n == "json_schema_2020_12_tool")
        .unwrap()]["inputSchema"];
    assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
    assert_eq!(schema["additionalProperties"], false);
    let resources = p.call("resources/list", json!({}), json!({})).await;
    assert_eq!(
        resources["result"]["resources"][0]["uri"],
        "test://static-text"
    );
    let templates = p
        .call("resources/templates/list", json!({}), json!({}))
        .await;
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"],
        "test://template/{id}/data"
    );
    let prompts = p.call("prompts/list", json!({}), json!({})).await;
    assert_eq!(prompts["result"]["prompts"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn resources_read_static_template_and_missing() {
    let mut p = start();
    let r = p
        .call(
            "resources/read",
            json!({"uri": "test://static-text"}),
            json!({}),
        )
        .await;
    let r = &r["result"];
    assert_eq!(
        r["contents"][0]["text"],
        "This is the content of the static text resource."
    );
    assert_eq!(
        (&r["ttlMs"], &r["cacheScope"]),
        (&json!(0), &json!("public"))
    );
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcpwire-conformance"
    );
    let r = p
        .call(
            "resources/read",
            json!({"uri": "test://static-binary"}),
            json!({}),
        )
        .await;
    assert_eq!(r["result"]["contents"][0]["mimeType"], "image/png");
    assert!(
        r["result"]["contents"][0]["blob"]
            .as_str()
            .unwrap()
            .starts_with("iVBORw0KGgo")
    );
    let r = p
        .call(
            "resources/read",
            json!({"uri": "test://template/123/data"}),
            json!({}),
        )
        .await;
    assert_eq!(
        r["result"]["contents"][0],
        json!({"uri": "test://template/123/data", "mimeType": "application/json",
            "text": "{\"id\":\"123\",\"templateTest\":true,\"data\":\"Data for ID: 123\"}"})
    );
    let missing = "test://nonexistent-resource-for-conformance-testing";
    let r = p
        .call("resources/read", json!({"uri": missing}), json!({}))
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["uri"], missing);
}

#[tokio::test]
async fn request_state_is_sealed_and_a_tampered_one_is_refused() {
    let mut p = start();
    let tool = "test_input_required_result_request_state";
    let r1 = p.tool(tool, json!({})).await;
    let sealed = state(&r1);
    assert_eq!(
        r1["result"]["inputRequests"]["confirm"]["method"],
        "elicitation/create"
    );
    let answers = json!({"confirm": accept(json!({"ok": true}))});
    let r2 = p
        .tool(
            tool,
            json!({"inputResponses": answers, "requestState": sealed}),
        )
        .await;
    assert!(text(&r2).contains("state-ok"), "{r2}");
    let tampered = format!("{sealed}-TAMPERED");
    let r = p
        .tool(
            tool,
            json!({"inputResponses": answers, "requestState": tampered}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A state sealed for one tool is refused by another.
    let other = "test_input_required_result_tampered_state";
    let r = p
        .tool(
            other,
            json!({"inputResponses": answers, "requestState": sealed}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r1 = p.tool(other, json!({})).await;
    let sealed = state(&r1);
    let r = p
        .tool(
            other,
            json!({"inputResponses": answers, "requestState": format!("{sealed}-TAMPERED")}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[tokio::test]
async fn multi_round_takes_three_rounds_with_a_new_state_each() {
    let mut p = start();
    let tool = "test_input_required_result_multi_round";
    let r1 = p.tool(tool, json!({})).await;
    let s1 = state(&r1);
    assert!(r1["result"]["inputRequests"]["step1"].is_object(), "{r1}");
    let r2 = p
        .tool(
            tool,
            json!({"inputResponses": {"step1": accept(json!({"name": "Alice"}))}, "requestState": s1}),
        )
        .await;
    let s2 = state(&r2);
    assert_ne!(s1, s2);
    assert_eq!(
        r2["result"]["inputRequests"]["step2"]["params"]["message"],
        "Step 2: What is your favorite color?"
    );
    let r3 = p
        .tool(
            tool,
            json!({"inputResponses": {"step2": accept(json!({"color": "blue"}))}, "requestState": s2}),
        )
        .await;
    assert_eq!(r3["result"]["resultType"], "complete", "{r3}");
    assert_eq!(text(&r3), "Alice's favorite color is blue.");
}

#[tokio::test]
async fn elicitation_rounds_re_ask_for_missing_answers_and_refuse_malformed_ones() {
    let mut p = start();
    let tool = "test_input_required_result_elicitation";
    let r1 = p.tool(tool, json!({})).await;
    assert_eq!(r1["result"]["resultType"], "input_required");
    assert_eq!(
        r1["result"]["inputRequests"]["user_name"]["params"]["message"],
        "What is your name?"
    );
    let wrong = p
        .tool(
            tool,
            json!({"inputResponses": {"wrong_key": accept(json!({"data": "x"}))}}),
        )
        .await;
    assert_eq!(wrong["result"]["resultType"], "input_required", "{wrong}");
    let not_an_answer = p
        .tool(tool, json!({"inputResponses": {"user_name": 12345}}))
        .await;
    assert_eq!(not_an_answer["result"]["resultType"], "input_required");
    let null = p.tool(tool, json!({"inputResponses": null})).await;
    assert_eq!(null["error"]["code"], -32602, "{null}");
    let r2 = p
        .tool(
            tool,
            json!({"inputResponses": {"user_name": accept(json!({"name": "Alice"})), "extra": 1}}),
        )
        .await;
    assert_eq!(text(&r2), "Hello, Alice!");
}

#[tokio::test]
async fn capabilities_decide_what_is_asked_and_what_is_refused() {
    let mut p = start();
    let r = p
        .call(
            "tools/call",
            json!({"name": "test_missing_capability"}),
            json!({}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    let r = p
        .call(
            "tools/call",
            json!({"name": "test_missing_capability"}),
            json!({"sampling": {}}),
        )
        .await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let r = p
        .call(
            "tools/call",
            json!({"name": "test_input_required_result_capabilities"}),
            json!({"sampling": {}}),
        )
        .await;
    let asked = r["result"]["inputRequests"].as_object().unwrap();
    assert!(!asked.is_empty());
    assert!(
        asked
            .values()
            .all(|q| q["method"] == "sampling/createMessage"),
        "{r}"
    );
    // An elicitation tool without the elicitation capability.
    let r = p
        .call(
            "tools/call",
            json!({"name": "test_input_required_result_elicitation"}),
            json!({"sampling": {}}),
        )
        .await;
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );
}

#[tokio::test]
async fn trigger_tools_reach_the_listen_streams_that_asked() {
    let mut p = start();
    let tools_listen = p
        .send(
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
            json!({}),
        )
        .await;
    let prompts_listen = p
        .send(
            "subscriptions/listen",
            json!({"notifications": {"promptsListChanged": true}}),
            json!({}),
        )
        .await;
    for id in [tools_listen, prompts_listen] {
        p.notification("notifications/subscriptions/acknowledged", |m| {
            m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == id
        })
        .await;
    }
    let r = p.tool("test_trigger_tool_change", json!({})).await;
    assert_eq!(r["result"]["resultType"], "complete");
    let event = p
        .notification("notifications/tools/list_changed", |_| true)
        .await;
    assert_eq!(
        event["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        tools_listen
    );
    p.tool("test_trigger_prompt_change", json!({})).await;
    let event = p
        .notification("notifications/prompts/list_changed", |_| true)
        .await;
    assert_eq!(
        event["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        prompts_listen
    );
    // A round trip after both events: nothing else came of them.
    p.call("tools/list", json!({}), json!({})).await;
    assert!(
        !p.seen.iter().any(|m| m["method"]
            .as_str()
            .is_some_and(|m| m.ends_with("list_changed"))),
        "{:?}",
        p.seen
    );
}

#[tokio::test]
async fn progress_and_logging_follow_what_the_request_asked() {
    let mut p = start();
    let id = p
        .send(
            "tools/call",
            json!({"name": "test_tool_with_progress", "_meta": {"progressToken": "pt"}}),
            json!({}),
        )
        .await;
    let r = p.response(id).await;
    assert_eq!(r["result"]["resultType"], "complete");
    let progress: Vec<f64> = p
        .seen
        .drain(..)
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            assert_eq!(m["params"]["progressToken"], "pt");
            m["params"]["progress"].as_f64().unwrap()
        })
        .collect();
    assert_eq!(progress, [0.0, 50.0, 100.0]);

    let r = p.tool("test_logging_tool", json!({})).await;
    assert_eq!(r["result"]["resultType"], "complete");
    assert!(p.seen.is_empty(), "no log without logLevel: {:?}", p.seen);
    let id = p
        .send(
            "tools/call",
            json!({"name": "test_logging_tool",
                "_meta": {"io.modelcontextprotocol/logLevel": "info"}}),
            json!({}),
        )
        .await;
    p.response(id).await;
    let levels: Vec<&str> = p
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels, ["info", "warning"]);
    let r = p
        .call(
            "tools/call",
            json!({"name": "test_logging_tool",
                "_meta": {"io.modelcontextprotocol/logLevel": "loud"}}),
            json!({}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[tokio::test]
async fn prompts_completion_and_a_prompt_that_asks_for_input() {
    let mut p = start();
    let r = p
        .call(
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x", "arg2": "y"}}),
            json!({}),
        )
        .await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"],
        "Prompt with arguments: arg1='x', arg2='y'"
    );
    let r = p
        .call(
            "prompts/get",
            json!({"name": "test_prompt_with_image"}),
            json!({}),
        )
        .await;
    assert_eq!(r["result"]["messages"][0]["content"]["type"], "image");
    let r = p
        .call(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                "argument": {"name": "arg1", "value": "av"}}),
            json!({}),
        )
        .await;
    assert_eq!(r["result"]["completion"]["values"], json!(["avocado"]));
    let prompt = "test_input_required_result_prompt";
    let r1 = p
        .call("prompts/get", json!({"name": prompt}), all_caps())
        .await;
    assert_eq!(r1["result"]["resultType"], "input_required", "{r1}");
    assert!(r1["result"]["inputRequests"]["user_context"].is_object());
    let r2 = p
        .call(
            "prompts/get",
            json!({"name": prompt,
                "inputResponses": {"user_context": accept(json!({"context": "tests"}))}}),
            all_caps(),
        )
        .await;
    assert_eq!(r2["result"]["resultType"], "complete");
    assert_eq!(
        r2["result"]["messages"][0]["content"]["text"],
        "Use this context: tests"
    );
}

#[tokio::test]
async fn content_tools_return_their_blocks() {
    let mut p = start();
    let r = p.tool("test_simple_text", json!({})).await;
    assert_eq!(text(&r), "This is a simple text response for testing.");
    let r = p.tool("test_audio_content", json!({})).await;
    let audio = &r["result"]["content"][0];
    assert_eq!(
        (&audio["type"], &audio["mimeType"]),
        (&json!("audio"), &json!("audio/wav"))
    );
    assert!(audio["data"].as_str().unwrap().starts_with("UklGR"), "RIFF");
    let r = p.tool("test_multiple_content_types", json!({})).await;
    let kinds: Vec<&str> = r["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "image", "resource"]);
    let r = p.tool("test_error_handling", json!({})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
}
