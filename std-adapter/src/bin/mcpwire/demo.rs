//! The demo application of `mcpwire serve`: one tool for each thing the
//! binding carries (content, progress, deadlines and cancellation, mirrored
//! headers, multi round-trip input), a resource, a prompt and a listen
//! source.
//!
//! The binary's own module, written against the public API only. The
//! integration tests that serve the demo (`std-adapter/tests`,
//! `tests/tonic`) compile this file as a module of their own; it is no part
//! of the library.

use std::time::Duration;

use serde_json::json;
use tokio::sync::broadcast;

use mcpwire_tokio::{App, ListenEvent, PromptMessage, ToolCall, ToolError, ToolResult};

/// The `requestState` of `confirm`. The tool keeps no state between the
/// two calls; a real server would sign what it puts here, since the client
/// echoes it (MCP §9.3: treat it as attacker-controlled).
const CONFIRM_STATE: &str = "confirm/v1";

/// The demo; its listen source sends `notifications/tools/list_changed`
/// every `tick`. Call it inside a tokio runtime (it spawns the ticker,
/// which ends when the app is dropped).
pub fn app(tick: Duration) -> App {
    let (events, _) = broadcast::channel(16);
    let weak = events.downgrade();
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(tick);
        interval.tick().await;
        loop {
            interval.tick().await;
            let Some(events) = weak.upgrade() else {
                return;
            };
            // No listener is fine.
            let _ = events.send(ListenEvent::ToolsListChanged);
        }
    });
    let app = App::new("mcpwire-demo", env!("CARGO_PKG_VERSION"))
        .instructions("A demo of MCP over the gRPC tunnel binding.")
        .tool(
            "echo",
            "Returns its text.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            |call: ToolCall| async move {
                // Read from the request's bytes: no JSON tree per call.
                let text = call
                    .argument_str("text")
                    .ok_or_else(|| ToolError::invalid_params("text must be a string"))?;
                Ok(ToolResult::text(text))
            },
        )
        .tool(
            "progress",
            "Sends `steps` progress notifications, `delay_ms` apart, then a result.",
            json!({"type": "object", "properties": {
                    "steps": {"type": "integer", "minimum": 0},
                    "delay_ms": {"type": "integer", "minimum": 0}}}),
            |call: ToolCall| async move {
                #[derive(serde::Deserialize)]
                struct Args {
                    steps: Option<u64>,
                    delay_ms: Option<u64>,
                }
                let args: Args = call.arguments_as()?;
                let steps = args.steps.unwrap_or(3);
                let delay = args.delay_ms.unwrap_or(100);
                for i in 1..=steps {
                    // A zero delay sends at once (a zero sleep still waits
                    // for the timer's next tick, about 1 ms).
                    if delay > 0 {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                    }
                    let message = format!("step {i} of {steps}");
                    call.progress(i as f64, Some(steps as f64), Some(&message))
                        .await;
                }
                Ok(ToolResult::text(format!("done after {steps} steps")))
            },
        )
        .tool(
            "sleep",
            "Sleeps `ms` milliseconds, unless cancelled or past its deadline first.",
            json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}}),
            |call: ToolCall| async move {
                let ms = call.arguments()["ms"].as_u64().unwrap_or(1000);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(ToolResult::text(format!("slept {ms} ms")))
            },
        );
    lookup(app)
        .tool(
            "confirm",
            "Asks the user to confirm (elicitation), then completes.",
            json!({"type": "object", "properties": {}}),
            |call: ToolCall| async move { confirm(&call) },
        )
        .resource("mem://readme", "readme", Some("text/plain"), |_| async {
            Ok("mcpwire: MCP over gRPC, from a microcontroller to a server.\n".to_owned())
        })
        .prompt(
            "greet",
            Some("Greets someone."),
            &[("who", true)],
            |get| async move {
                let who = get.argument("who").unwrap_or("world");
                Ok(vec![PromptMessage::user(format!("Say hello to {who}."))])
            },
        )
        .listen(events)
}

/// `lookup`'s arguments, which travel as mirrored headers too.
#[derive(Debug, serde::Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
struct LookupArgs {
    #[cfg_attr(feature = "schemars", schemars(extend("x-mcp-header" = "Region")))]
    region: Option<String>,
    #[cfg_attr(feature = "schemars", schemars(extend("x-mcp-header" = "Limit")))]
    limit: Option<i64>,
}

/// `lookup`'s result: the arguments it got (`null` when absent).
#[derive(Debug, serde::Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
struct Found {
    region: Option<String>,
    limit: Option<i64>,
}

impl From<LookupArgs> for Found {
    fn from(args: LookupArgs) -> Self {
        Self {
            region: args.region,
            limit: args.limit,
        }
    }
}

const LOOKUP: &str = "Returns its region and limit, which travel as mirrored headers too.";

/// Adds `lookup`, a typed tool: its schema comes from [`LookupArgs`]. The
/// engine checks the mirrored headers before the handler runs, so a
/// wrongly typed region or limit never gets here.
#[cfg(feature = "schemars")]
fn lookup(app: App) -> App {
    app.typed_tool("lookup", LOOKUP, |args: LookupArgs, _call| async move {
        Ok(mcpwire_tokio::Structured(Found::from(args)))
    })
}

/// Adds `lookup` without the `schemars` feature: the same tool, its schema
/// written out.
#[cfg(not(feature = "schemars"))]
fn lookup(app: App) -> App {
    app.tool(
        "lookup",
        LOOKUP,
        json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"}}}),
        |call: ToolCall| async move {
            let found = Found::from(call.arguments_as::<LookupArgs>()?);
            serde_json::to_value(found)
                .map(ToolResult::structured)
                .map_err(|e| ToolError::internal(e.to_string()))
        },
    )
}

fn confirm(call: &ToolCall) -> Result<ToolResult, ToolError> {
    let answered = call
        .input_responses()
        .and_then(|r| r.get("confirm"))
        .filter(|_| call.request_state() == Some(CONFIRM_STATE));
    if let Some(answer) = answered {
        let accepted = answer["action"] == "accept";
        let ok = answer["content"]["ok"].as_bool().unwrap_or(false);
        return Ok(if accepted && ok {
            ToolResult::text("confirmed")
        } else {
            ToolResult::text("not confirmed")
        });
    }
    let declared = call.params()["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        .get("elicitation")
        .is_some();
    if !declared {
        // A ClientCapabilities object (MCP §3.3), not a list of names.
        return Err(ToolError::missing_capability(json!({"elicitation": {}})));
    }
    let mut requests = serde_json::Map::new();
    requests.insert(
        "confirm".into(),
        json!({"method": "elicitation/create", "params": {
            "mode": "form",
            "message": "Proceed?",
            "requestedSchema": {"type": "object",
                "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}),
    );
    Ok(ToolResult::input_required(requests, CONFIRM_STATE))
}
