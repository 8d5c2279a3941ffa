//! The conformance fixture set of `mcpwire serve --fixtures conformance`:
//! every tool, resource, resource template and prompt that the official
//! MCP conformance suite (`@modelcontextprotocol/conformance`
//! 0.2.0-alpha.12, requirement set 2026-07-28) calls by name, with the
//! texts it checks (`shared/spec/conformance-fixtures.md` §1–§3, and the
//! `test_x_mcp_header` and `json_schema_2020_12_tool` tools of §5).
//!
//! Multi round-trip tools (MCP §9) keep what spans rounds in a
//! `requestState` sealed with [`StateSeal`] (HMAC-SHA256), ask only for
//! input the request's client capabilities allow, and answer -32021
//! otherwise. `test_trigger_tool_change` and `test_trigger_prompt_change`
//! announce list changes to the open `subscriptions/listen` streams.
//!
//! The binary's own module, written against the public API only; the
//! integration tests compile it as a module of their own (as `demo.rs`).

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use mcpwire_tokio::{
    App, Completion, Content, ListenEvent, LogLevel, PromptGet, PromptMessage, PromptResult,
    ResourceContent, Role, StateSeal, ToolCall, ToolError, ToolResult,
};

/// A 1×1 PNG.
pub const PNG: [u8; 70] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x64, 0x60, 0xf8, 0x5f,
    0x0f, 0x00, 0x02, 0x87, 0x01, 0x80, 0xeb, 0x47, 0xba, 0x92, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The fixture set; `seal` signs its `requestState` values. Call it
/// inside a tokio runtime or not: it spawns nothing.
pub fn app(seal: StateSeal) -> App {
    let (events, _) = broadcast::channel(16);
    let app = App::new("mcpwire-conformance", env!("CARGO_PKG_VERSION"))
        .instructions("The MCP conformance suite's fixtures, served by mcpwire.");
    let app = content_tools(app);
    let app = behaviour_tools(app, &events);
    let app = mrtr_tools(app, &seal);
    let app = header_and_schema_tools(app);
    let app = resources(app);
    prompts(app)
        .completion(|request| async move {
            // Values for `test_prompt_with_arguments`' arguments; none for
            // anything else (an empty `values` array is a valid answer).
            let candidates: &[&str] = match (request.prompt(), request.argument_name()) {
                (Some("test_prompt_with_arguments"), "arg1") => &["alpha", "apple", "avocado"],
                (Some("test_prompt_with_arguments"), "arg2") => &["beta", "banana", "blue"],
                _ => &[],
            };
            let typed = request.argument_value();
            let values: Vec<String> = candidates
                .iter()
                .filter(|c| c.starts_with(typed))
                .map(|c| (*c).to_owned())
                .collect();
            Ok(Completion {
                total: Some(values.len() as u64),
                values,
                has_more: false,
            })
        })
        .listen(events)
}

const NO_ARGUMENTS: &str = r#"{"type":"object","properties":{}}"#;

/// Tools of one kind of content each (§2, the `tools-call-*` scenarios).
fn content_tools(app: App) -> App {
    app.tool(
        "test_simple_text",
        "Returns one text block.",
        NO_ARGUMENTS,
        |_| async {
            Ok(ToolResult::text(
                "This is a simple text response for testing.",
            ))
        },
    )
    .tool(
        "test_image_content",
        "Returns one image block (a 1x1 PNG).",
        NO_ARGUMENTS,
        |_| async { Ok(ToolResult::content(vec![Content::image(&PNG, "image/png")])) },
    )
    .tool(
        "test_audio_content",
        "Returns one audio block (a short WAV).",
        NO_ARGUMENTS,
        |_| async {
            Ok(ToolResult::content(vec![Content::audio(
                &wav(),
                "audio/wav",
            )]))
        },
    )
    .tool(
        "test_embedded_resource",
        "Returns one embedded resource block.",
        NO_ARGUMENTS,
        |_| async {
            Ok(ToolResult::content(vec![Content::resource_text(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            )]))
        },
    )
    .tool(
        "test_multiple_content_types",
        "Returns a text, an image and an embedded resource block.",
        NO_ARGUMENTS,
        |_| async {
            Ok(ToolResult::content(vec![
                Content::Text("Multiple content types test:".into()),
                Content::image(&PNG, "image/png"),
                Content::resource_text(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                ),
            ]))
        },
    )
    .tool(
        "test_error_handling",
        "Fails as a tool: a result with isError, not a protocol error.",
        NO_ARGUMENTS,
        |_| async {
            Ok(ToolResult::error_text(
                "This tool intentionally returns an error for testing",
            ))
        },
    )
}

/// Progress, capabilities, logging and list changes (§2).
fn behaviour_tools(app: App, events: &broadcast::Sender<ListenEvent>) -> App {
    let tools_changed = events.clone();
    let prompts_changed = events.clone();
    app.tool(
        "test_tool_with_progress",
        "Reports progress 0, 50 and 100 of 100, 50 ms apart, then returns.",
        NO_ARGUMENTS,
        |call: ToolCall| async move {
            for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                call.progress(step, Some(100.0), Some(&format!("{step} of 100")))
                    .await;
            }
            Ok(ToolResult::text("Progress test completed."))
        },
    )
    .tool(
        "test_missing_capability",
        "Needs the sampling client capability: -32021 without it.",
        NO_ARGUMENTS,
        |call: ToolCall| async move {
            if !call.has_client_capability("sampling") {
                return Err(ToolError::missing_capability(json!({"sampling": {}})));
            }
            Ok(ToolResult::text("The client declared sampling."))
        },
    )
    .tool(
        "test_streaming_elicitation",
        "Asks for a name by elicitation (an InputRequiredResult, never a request), then greets.",
        NO_ARGUMENTS,
        |call: ToolCall| async move { greet(&call) },
    )
    .tool(
        "test_logging_tool",
        "Logs three messages when the request asks for logging (logLevel), none otherwise.",
        NO_ARGUMENTS,
        |call: ToolCall| async move {
            let mut sent = 0;
            for (level, text) in [
                (LogLevel::Debug, "Logging test: debug"),
                (LogLevel::Info, "Logging test: info"),
                (LogLevel::Warning, "Logging test: warning"),
            ] {
                if call.log(level, json!(text)).await {
                    sent += 1;
                }
            }
            Ok(ToolResult::text(format!(
                "Logging test completed ({sent} messages)."
            )))
        },
    )
    .tool(
        "test_trigger_tool_change",
        "Announces a tools/list change to the listen streams.",
        NO_ARGUMENTS,
        move |_| {
            // No listener is fine.
            let _ = tools_changed.send(ListenEvent::ToolsListChanged);
            async { Ok(ToolResult::text("Tool list change announced.")) }
        },
    )
    .tool(
        "test_trigger_prompt_change",
        "Announces a prompts/list change to the listen streams.",
        NO_ARGUMENTS,
        move |_| {
            let _ = prompts_changed.send(ListenEvent::PromptsListChanged);
            async { Ok(ToolResult::text("Prompt list change announced.")) }
        },
    )
}

/// The multi round-trip tools (§2, the `input-required-result-*`
/// scenarios).
fn mrtr_tools(app: App, seal: &StateSeal) -> App {
    let (s1, s2, s3, s4) = (seal.clone(), seal.clone(), seal.clone(), seal.clone());
    app.tool(
        "test_input_required_result_elicitation",
        "Round 1 asks for a name (elicitation); round 2 greets.",
        NO_ARGUMENTS,
        |call: ToolCall| async move { greet(&call) },
    )
    .tool(
        "test_input_required_result_sampling",
        "Round 1 asks the client's model for the capital of France; round 2 returns its answer.",
        NO_ARGUMENTS,
        |call: ToolCall| async move {
            require(&call, &["sampling"])?;
            Ok(match sampled(call.input_responses(), "capital_question") {
                Some(text) => ToolResult::text(format!("The model answered: {text}")),
                None => ask(
                    &[(
                        "capital_question",
                        sampling_request("What is the capital of France?", 100),
                    )],
                    None,
                ),
            })
        },
    )
    .tool(
        "test_input_required_result_list_roots",
        "Round 1 asks for the client's roots; round 2 lists them.",
        NO_ARGUMENTS,
        |call: ToolCall| async move {
            require(&call, &["roots"])?;
            Ok(match roots(call.input_responses(), "client_roots") {
                Some(roots) => ToolResult::text(format!("Client roots: {}", roots.join(", "))),
                None => ask(&[("client_roots", roots_request())], None),
            })
        },
    )
    .tool(
        "test_input_required_result_request_state",
        "Round 1 asks for a confirmation with a sealed requestState; round 2 checks the state.",
        NO_ARGUMENTS,
        move |call: ToolCall| {
            let seal = s1.clone();
            async move { confirm_with_state(&call, &seal, "state-ok") }
        },
    )
    .tool(
        "test_input_required_result_tampered_state",
        "As the request-state tool: a requestState that fails verification is -32602.",
        NO_ARGUMENTS,
        move |call: ToolCall| {
            let seal = s2.clone();
            async move { confirm_with_state(&call, &seal, "state verified") }
        },
    )
    .tool(
        "test_input_required_result_multiple_inputs",
        "Round 1 asks for a name, a sampled greeting and the roots at once; round 2 completes.",
        NO_ARGUMENTS,
        move |call: ToolCall| {
            let seal = s3.clone();
            async move { multiple_inputs(&call, &seal) }
        },
    )
    .tool(
        "test_input_required_result_multi_round",
        "Asks for a name, then a favourite colour, then completes (three rounds).",
        NO_ARGUMENTS,
        move |call: ToolCall| {
            let seal = s4.clone();
            async move { multi_round(&call, &seal) }
        },
    )
    .tool(
        "test_input_required_result_capabilities",
        "Asks only for the input the request's client capabilities allow.",
        NO_ARGUMENTS,
        |call: ToolCall| async move { by_capabilities(&call) },
    )
}

/// A tool whose argument travels as a mirrored header too, and a tool
/// whose JSON Schema 2020-12 input schema is served verbatim (§5).
fn header_and_schema_tools(app: App) -> App {
    app.tool(
        "test_x_mcp_header",
        "Returns its region, which travels in the Mcp-Param-Region header too.",
        r#"{"type":"object","properties":{"region":{"type":"string","description":"A region name.","x-mcp-header":"Region","default":"<none>"}}}"#,
        |call: ToolCall| async move {
            let region = call.arguments()["region"].as_str().unwrap_or("<none>");
            Ok(ToolResult::text(format!("region: {region}")))
        },
    )
    .tool(
        "json_schema_2020_12_tool",
        "Takes a contact; its input schema uses JSON Schema 2020-12 keywords.",
        JSON_SCHEMA_2020_12,
        |call: ToolCall| async move {
            let name = call.arguments()["name"].as_str().unwrap_or("someone");
            Ok(ToolResult::text(format!("Contact for {name} received.")))
        },
    )
}

const JSON_SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##;

/// §3: two static resources, one watched, one template.
fn resources(app: App) -> App {
    app.resource(
        "test://static-text",
        "static-text",
        Some("text/plain"),
        |_| async { Ok("This is the content of the static text resource.") },
    )
    .resource(
        "test://static-binary",
        "static-binary",
        Some("image/png"),
        |_| async { Ok(ResourceContent::Blob(PNG.to_vec())) },
    )
    .resource(
        "test://watched-resource",
        "watched-resource",
        Some("text/plain"),
        |_| async { Ok("This resource is watched for changes.") },
    )
    .resource_template(
        "test://template/{id}/data",
        "template-data",
        Some("application/json"),
        |read| async move {
            let id = read.variable("id").unwrap_or_default();
            // Written out: the suite compares the text, members in order.
            Ok(format!(
                r#"{{"id":{},"templateTest":true,"data":{}}}"#,
                json!(id),
                json!(format!("Data for ID: {id}"))
            ))
        },
    )
}

/// §3: the prompts.
fn prompts(app: App) -> App {
    app.prompt(
        "test_simple_prompt",
        Some("A prompt without arguments."),
        &[],
        |_| async {
            Ok(vec![PromptMessage::user(
                "This is a simple prompt for testing.",
            )])
        },
    )
    .prompt(
        "test_prompt_with_arguments",
        Some("A prompt of two arguments."),
        &[("arg1", true), ("arg2", true)],
        |get: PromptGet| async move {
            let arg = |name| {
                get.argument(name)
                    .ok_or_else(|| ToolError::invalid_params(format!("missing argument {name}")))
            };
            let (arg1, arg2) = (arg("arg1")?, arg("arg2")?);
            Ok(vec![PromptMessage::user(format!(
                "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
            ))])
        },
    )
    .prompt(
        "test_prompt_with_embedded_resource",
        Some("A prompt that embeds the resource it is given."),
        &[("resourceUri", true)],
        |get: PromptGet| async move {
            let uri = get
                .argument("resourceUri")
                .ok_or_else(|| ToolError::invalid_params("missing argument resourceUri"))?;
            Ok(vec![
                PromptMessage::new(
                    Role::User,
                    Content::resource_text(
                        uri,
                        "text/plain",
                        "Embedded resource content for testing.",
                    ),
                ),
                PromptMessage::user("Please process the embedded resource above."),
            ])
        },
    )
    .prompt(
        "test_prompt_with_image",
        Some("A prompt with an image."),
        &[],
        |_| async {
            Ok(vec![
                PromptMessage::new(Role::User, Content::image(&PNG, "image/png")),
                PromptMessage::user("Please analyze the image above."),
            ])
        },
    )
    .prompt(
        "test_input_required_result_prompt",
        Some("Asks for context by elicitation, then returns a prompt using it."),
        &[],
        |get: PromptGet| async move {
            if !get.has_client_capability("elicitation") {
                return Err(ToolError::missing_capability(json!({"elicitation": {}})));
            }
            let schema = json!({"type": "object",
                "properties": {"context": {"type": "string"}}, "required": ["context"]});
            Ok(
                match elicited(get.input_responses(), "user_context", "context") {
                    Some(context) => PromptResult::from(vec![PromptMessage::user(format!(
                        "Use this context: {context}"
                    ))]),
                    None => PromptResult::InputRequired {
                        input_requests: requests(&[(
                            "user_context",
                            elicitation_request("What context should the prompt use?", schema),
                        )]),
                        request_state: None,
                    },
                },
            )
        },
    )
}

/// Round 1 asks for a name (elicitation); round 2 greets. A missing,
/// misnamed or malformed answer asks again (§9.2).
fn greet(call: &ToolCall) -> Result<ToolResult, ToolError> {
    require(call, &["elicitation"])?;
    Ok(
        match elicited(call.input_responses(), "user_name", "name") {
            Some(name) => ToolResult::text(format!("Hello, {name}!")),
            None => ask(&[("user_name", name_request("What is your name?"))], None),
        },
    )
}

/// -32021 unless the request declared every one of `capabilities`.
fn require(call: &ToolCall, capabilities: &[&str]) -> Result<(), ToolError> {
    let missing: Map<String, Value> = capabilities
        .iter()
        .filter(|c| !call.has_client_capability(c))
        .map(|c| ((*c).to_owned(), json!({})))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ToolError::missing_capability(Value::Object(missing)))
    }
}

fn requests(list: &[(&str, Value)]) -> Map<String, Value> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// An `InputRequiredResult` asking `list`, with `state` if any.
fn ask(list: &[(&str, Value)], state: Option<String>) -> ToolResult {
    ToolResult::InputRequired {
        input_requests: requests(list),
        request_state: state,
    }
}

fn elicitation_request(message: &str, schema: Value) -> Value {
    json!({"method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema}})
}

/// An elicitation of one required string, `name`.
fn name_request(message: &str) -> Value {
    string_request(message, "name")
}

fn string_request(message: &str, field: &str) -> Value {
    elicitation_request(
        message,
        json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}),
    )
}

fn sampling_request(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens}})
}

fn roots_request() -> Value {
    json!({"method": "roots/list", "params": {}})
}

/// The string `field` of an accepted elicitation answered at `key`.
fn elicited<'a>(
    responses: Option<&'a Map<String, Value>>,
    key: &str,
    field: &str,
) -> Option<&'a str> {
    let answer = responses?.get(key)?;
    (answer.get("action")?.as_str()? == "accept").then_some(())?;
    answer.get("content")?.get(field)?.as_str()
}

/// The text of a sampling answer at `key` (`content` a block or an array
/// of blocks).
fn sampled<'a>(responses: Option<&'a Map<String, Value>>, key: &str) -> Option<&'a str> {
    let content = responses?.get(key)?.get("content")?;
    let block = match content {
        Value::Array(blocks) => blocks.iter().find(|b| b["type"] == "text")?,
        block => block,
    };
    block.get("text")?.as_str()
}

/// The root URIs of a `roots/list` answer at `key`.
fn roots(responses: Option<&Map<String, Value>>, key: &str) -> Option<Vec<String>> {
    let list = responses?.get(key)?.get("roots")?.as_array()?;
    list.iter()
        .map(|r| r.get("uri").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// The payload of the call's `requestState`: `Ok(None)` when it has none,
/// -32602 when it fails verification.
fn opened<'s>(call: &'s ToolCall, seal: &StateSeal) -> Result<Option<&'s str>, ToolError> {
    call.request_state()
        .map(|state| seal.open(&context(call), state))
        .transpose()
}

/// What a tool's state is sealed for: states of one tool, or of another
/// caller (MCP §9.3: bind the state to the principal), are refused.
fn context(call: &ToolCall) -> String {
    format!(
        "tools/call {} {}",
        call.name(),
        call.principal().unwrap_or_default()
    )
}

/// Round 1: `confirm` and a sealed state; round 2: the state verified,
/// `done` in the text.
fn confirm_with_state(
    call: &ToolCall,
    seal: &StateSeal,
    done: &str,
) -> Result<ToolResult, ToolError> {
    require(call, &["elicitation"])?;
    let state = opened(call, seal)?;
    let answer = call
        .input_responses()
        .and_then(|r| r.get("confirm"))
        .filter(|a| a["action"] == "accept");
    if let (Some("confirm"), Some(answer)) = (state, answer) {
        let ok = answer["content"]["ok"].as_bool().unwrap_or(false);
        return Ok(ToolResult::text(format!("{done}: confirmed={ok}")));
    }
    let schema = json!({"type": "object",
        "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    Ok(ask(
        &[("confirm", elicitation_request("Please confirm", schema))],
        Some(seal.seal(&context(call), "confirm")),
    ))
}

fn multiple_inputs(call: &ToolCall, seal: &StateSeal) -> Result<ToolResult, ToolError> {
    require(call, &["elicitation", "sampling", "roots"])?;
    let state = opened(call, seal)?;
    let responses = call.input_responses();
    let answers = (
        elicited(responses, "user_name", "name"),
        sampled(responses, "greeting"),
        roots(responses, "client_roots"),
    );
    if let (Some("multiple"), (Some(name), Some(greeting), Some(roots))) = (state, answers) {
        return Ok(ToolResult::text(format!(
            "{greeting} {name}; roots: {}",
            roots.join(", ")
        )));
    }
    Ok(ask(
        &[
            ("user_name", name_request("What is your name?")),
            ("greeting", sampling_request("Generate a greeting", 50)),
            ("client_roots", roots_request()),
        ],
        Some(seal.seal(&context(call), "multiple")),
    ))
}

/// Round 1 `step1` (a name), round 2 `step2` (a colour; the name sealed
/// in the state), round 3 complete.
fn multi_round(call: &ToolCall, seal: &StateSeal) -> Result<ToolResult, ToolError> {
    require(call, &["elicitation"])?;
    let state = opened(call, seal)?;
    let responses = call.input_responses();
    let step2 = |name: &str| {
        Ok(ask(
            &[(
                "step2",
                string_request("Step 2: What is your favorite color?", "color"),
            )],
            Some(seal.seal(&context(call), &format!("step2:{name}"))),
        ))
    };
    if let Some(name) = state.and_then(|s| s.strip_prefix("step2:")) {
        return match elicited(responses, "step2", "color") {
            Some(color) => Ok(ToolResult::text(format!(
                "{name}'s favorite color is {color}."
            ))),
            None => step2(name),
        };
    }
    if state == Some("step1")
        && let Some(name) = elicited(responses, "step1", "name")
    {
        return step2(name);
    }
    Ok(ask(
        &[(
            "step1",
            string_request("Step 1: What is your name?", "name"),
        )],
        Some(seal.seal(&context(call), "step1")),
    ))
}

/// Asks for what the request's capabilities allow, and nothing else
/// (§9.3); completes once each of those is answered.
fn by_capabilities(call: &ToolCall) -> Result<ToolResult, ToolError> {
    let mut asked = Vec::new();
    if call.has_client_capability("elicitation") {
        asked.push(("user_name", name_request("What is your name?")));
    }
    if call.has_client_capability("sampling") {
        asked.push(("greeting", sampling_request("Generate a greeting", 50)));
    }
    if call.has_client_capability("roots") {
        asked.push(("client_roots", roots_request()));
    }
    if asked.is_empty() {
        return Err(ToolError::missing_capability(json!({"sampling": {}})));
    }
    let responses = call.input_responses();
    let answered = asked
        .iter()
        .all(|(key, _)| responses.is_some_and(|r| r.contains_key(*key)));
    if answered {
        let keys: Vec<&str> = asked.iter().map(|(k, _)| *k).collect();
        return Ok(ToolResult::text(format!("Received: {}", keys.join(", "))));
    }
    Ok(ask(&asked, None))
}

/// A short WAV: 8 kHz, mono, 8-bit, 8 samples of silence.
fn wav() -> Vec<u8> {
    let samples = [0x80u8; 8];
    let mut w = Vec::with_capacity(44 + samples.len());
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    w.extend_from_slice(&8000u32.to_le_bytes()); // bytes per second
    w.extend_from_slice(&1u16.to_le_bytes()); // block align
    w.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    w.extend_from_slice(b"data");
    w.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    w.extend_from_slice(&samples);
    w
}
