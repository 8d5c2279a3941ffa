//! `mcpwire conformance-client URL`: the driver the official MCP
//! conformance suite launches for each of its client scenarios (the suite
//! appends the mock server's URL and names the scenario in
//! `MCP_CONFORMANCE_SCENARIO`, its data in `MCP_CONFORMANCE_CONTEXT`). Each
//! scenario is what an application would do with a [`Client`] over
//! Streamable HTTP ([`Client::http`], the era probed); the
//! suite checks the requests it sees. Exit 0 when the scenario ran, 1 when
//! a call failed.
//!
//! - `tools_call`: list the tools, call the first with `{a: 2, b: 3}`;
//! - `request-metadata`: the engine's era probe (a -32022 naming a
//!   version this client speaks is answered by one retry with it), then
//!   `server/discover` (a -32022 likewise) and `tools/list`;
//! - `sep-2322-client-request-state`: multi round-trip tool calls (input
//!   requests answered, `requestState` echoed unchanged, a new id each
//!   round), an unrelated call between two rounds;
//! - `http-standard-headers`: every tool, resource and prompt listed and
//!   used once;
//! - `http-custom-headers`: the `toolCalls` of the context, after
//!   `tools/list` (whose annotations say what is mirrored);
//! - `http-invalid-tool-headers`: every tool `tools/list` keeps, called
//!   with arguments made from its schema;
//! - `json-schema-ref-no-deref`, and any other: `tools/list` only.

use std::process::ExitCode;

use mcpwire_core::mcp::meta::PROTOCOL_VERSION;
use mcpwire_tokio::{CallError, Client, client::http};
use serde_json::{Map, Value, json};

/// No step between rounds.
type Nothing = fn() -> std::future::Ready<Result<(), String>>;

/// Rounds of a multi round-trip call before the driver gives up.
const MAX_ROUNDS: usize = 8;

/// `mcpwire conformance-client`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The suite's mock server, an http:// or https:// URL
    #[arg(value_name = "URL", value_parser = http_url)]
    url: url::Url,
    /// The client scenario to run
    #[arg(
        long,
        env = "MCP_CONFORMANCE_SCENARIO",
        default_value = "",
        hide_default_value = true
    )]
    scenario: String,
    /// The scenario's data, a JSON object (anything else is none)
    #[arg(long, env = "MCP_CONFORMANCE_CONTEXT", hide_env_values = true)]
    context: Option<String>,
}

fn http_url(v: &str) -> Result<url::Url, String> {
    match url::Url::parse(v) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(url),
        Ok(_) => Err("an http:// or https:// URL".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `mcpwire conformance-client`.
pub fn main(args: Args) -> ExitCode {
    let context = (args.context.as_deref())
        .and_then(|c| serde_json::from_str::<Value>(c).ok())
        .unwrap_or(Value::Null);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpwire: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let scenario = args.scenario;
    match runtime.block_on(run(args.url.as_str(), &scenario, &context)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpwire conformance-client ({scenario}): {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(url: &str, scenario: &str, context: &Value) -> Result<(), String> {
    let mut config = http::Config::new(url).map_err(|e| e.to_string())?;
    config.client_capabilities = json!({"elicitation": {}, "sampling": {}, "roots": {}});
    let channel = Client::http(config).await.map_err(|e| e.to_string())?;
    let channel = &channel;
    let err = |e: CallError| e.to_string();
    match scenario {
        "tools_call" => {
            let tools = channel.list_tools().await.map_err(err)?;
            let first = tools.first().ok_or("the server lists no tool")?;
            let result = channel
                .call_tool(&first.name, json!({"a": 2, "b": 3}))
                .await
                .map_err(err)?;
            println!("{}", result.text());
        }
        "request-metadata" => {
            discover(channel).await?;
            channel.list_tools().await.map_err(err)?;
        }
        "sep-2322-client-request-state" => {
            channel.list_tools().await.map_err(err)?;
            let unrelated = || async {
                channel
                    .request(
                        "tools/call",
                        json!({"name": "test_mrtr_unrelated", "arguments": {}}),
                    )
                    .await
                    .map(|_| ())
                    .map_err(err)
            };
            call_rounds(channel, "test_mrtr_echo_state", Some(&unrelated)).await?;
            call_rounds(channel, "test_mrtr_no_state", None::<&Nothing>).await?;
            call_rounds(channel, "test_mrtr_no_result_type", None::<&Nothing>).await?;
        }
        "http-standard-headers" => {
            for tool in channel.list_tools().await.map_err(err)? {
                channel
                    .call_tool(&tool.name, arguments_for(&tool.input_schema))
                    .await
                    .map_err(err)?;
            }
            for resource in channel
                .list_all("resources/list", "resources")
                .await
                .map_err(err)?
            {
                if let Some(uri) = resource.get("uri").and_then(Value::as_str) {
                    channel.read_resource(uri).await.map_err(err)?;
                }
            }
            for prompt in channel
                .list_all("prompts/list", "prompts")
                .await
                .map_err(err)?
            {
                if let Some(name) = prompt.get("name").and_then(Value::as_str) {
                    channel.get_prompt(name, ()).await.map_err(err)?;
                }
            }
        }
        "http-custom-headers" => {
            channel.list_tools().await.map_err(err)?;
            let calls = context
                .get("toolCalls")
                .and_then(Value::as_array)
                .ok_or("MCP_CONFORMANCE_CONTEXT has no toolCalls")?;
            for call in calls {
                let name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("a toolCall without a name")?;
                let arguments = call.get("arguments").cloned().unwrap_or(json!({}));
                channel.call_tool(name, arguments).await.map_err(err)?;
            }
        }
        "http-invalid-tool-headers" => {
            for tool in channel.list_tools().await.map_err(err)? {
                channel
                    .call_tool(&tool.name, arguments_for(&tool.input_schema))
                    .await
                    .map_err(err)?;
            }
        }
        _ => {
            channel.list_tools().await.map_err(err)?;
        }
    }
    Ok(())
}

/// `server/discover`; on -32022, once more with a version of
/// `data.supported` that this client speaks.
async fn discover(channel: &Client) -> Result<Value, String> {
    let response = channel
        .request("server/discover", json!({}))
        .await
        .map_err(|e| e.to_string())?;
    let Some(error) = response.get("error") else {
        return Ok(response);
    };
    if error.get("code").and_then(Value::as_i64) != Some(-32022) {
        return Err(format!("server/discover: {error}"));
    }
    let speaks = error
        .pointer("/data/supported")
        .and_then(Value::as_array)
        .is_some_and(|s| s.iter().any(|v| v.as_str() == Some(PROTOCOL_VERSION)));
    if !speaks {
        return Err(format!("no version in common: {error}"));
    }
    let meta = json!({"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION});
    let retry = channel
        .request("server/discover", json!({"_meta": meta}))
        .await
        .map_err(|e| e.to_string())?;
    match retry.get("error") {
        Some(e) => Err(format!("server/discover after -32022: {e}")),
        None => Ok(retry),
    }
}

/// Calls tool `name` until its result is complete: each
/// `input_required` round's requests are answered and the call sent again
/// with a new id, the `inputResponses` and the `requestState` exactly as
/// given (none when none was given). `between` runs after the first
/// round.
async fn call_rounds<F, Fut>(
    channel: &Client,
    name: &str,
    between: Option<&F>,
) -> Result<Value, String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let mut params = json!({"name": name, "arguments": {}});
    for round in 0..MAX_ROUNDS {
        let response = channel
            .request("tools/call", params.clone())
            .await
            .map_err(|e| e.to_string())?;
        let result = match (response.get("result"), response.get("error")) {
            (Some(r), None) => r.clone(),
            (_, Some(e)) => return Err(format!("{name}: {e}")),
            _ => return Err(format!("{name}: a response without a result")),
        };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return Ok(result);
        }
        if round == 0
            && let Some(f) = between
        {
            f().await?;
        }
        let mut responses = Map::new();
        if let Some(requests) = result.get("inputRequests").and_then(Value::as_object) {
            for (key, request) in requests {
                responses.insert(key.clone(), answer(request));
            }
        }
        params = json!({"name": name, "arguments": {}, "inputResponses": responses});
        if let Some(state) = result.get("requestState") {
            params["requestState"] = state.clone();
        }
    }
    Err(format!(
        "{name}: still input_required after {MAX_ROUNDS} rounds"
    ))
}

/// What the driver answers an input request with: an elicitation
/// accepted with its schema's defaults (or plain values), a sampling
/// request with a short text, `roots/list` with none.
fn answer(request: &Value) -> Value {
    match request.get("method").and_then(Value::as_str) {
        Some("elicitation/create") => {
            let schema = request
                .pointer("/params/requestedSchema")
                .cloned()
                .unwrap_or(json!({}));
            json!({"action": "accept", "content": arguments_for(&schema)})
        }
        Some("sampling/createMessage") => json!({
            "role": "assistant",
            "content": {"type": "text", "text": "mcpwire conformance client"},
            "model": "mcpwire",
            "stopReason": "endTurn"
        }),
        Some("roots/list") => json!({"roots": []}),
        _ => json!({}),
    }
}

/// Arguments that fit `schema`'s properties: each one's default, or a
/// plain value of its type.
fn arguments_for(schema: &Value) -> Value {
    let mut args = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let value = match (
                prop.get("default"),
                prop.get("type").and_then(Value::as_str),
            ) {
                (Some(d), _) => d.clone(),
                (None, Some("string")) => json!("mcpwire"),
                (None, Some("integer")) => json!(1),
                (None, Some("number")) => json!(1.5),
                (None, Some("boolean")) => json!(true),
                (None, Some("array")) => json!([]),
                (None, Some("object")) => json!({}),
                _ => continue,
            };
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}
