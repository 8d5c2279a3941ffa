//! What a handler gets: a [`ToolCall`], a [`ResourceRead`], a
//! [`PromptGet`] or a [`CompletionRequest`], copied out of the engine's
//! request so the handler owns it for as long as it runs; and what they
//! share: the request's client capabilities (MCP §3.3) and the multi
//! round-trip fields (§9.2).

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use mcpwire_core::mcp::json;
use mcpwire_core::mcp::server::dispatch::LOG_LEVELS;
use serde_json::{Map, Value};

use super::link::Link;
use super::result::{ToolError, number, write_json};

const KEY_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const KEY_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// `_meta["io.modelcontextprotocol/clientCapabilities"]` of `params`
/// (the engine admits no request without it).
fn client_capabilities(params: &Value) -> &Value {
    params
        .get("_meta")
        .and_then(|m| m.get(KEY_CLIENT_CAPABILITIES))
        .unwrap_or(&Value::Null)
}

fn input_responses(params: &Value) -> Option<&Map<String, Value>> {
    params.get("inputResponses").and_then(Value::as_object)
}

fn request_state(params: &Value) -> Option<&str> {
    params.get("requestState").and_then(Value::as_str)
}

/// The severity of a log message (MCP §11, RFC 5424 order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    /// In the order of the core's [`LOG_LEVELS`].
    const ALL: [Self; 8] = [
        Self::Debug,
        Self::Info,
        Self::Notice,
        Self::Warning,
        Self::Error,
        Self::Critical,
        Self::Alert,
        Self::Emergency,
    ];

    /// The level's name on the wire.
    pub fn as_str(self) -> &'static str {
        LOG_LEVELS[self as usize]
    }

    fn parse(name: &str) -> Option<Self> {
        let i = LOG_LEVELS.iter().position(|n| *n == name)?;
        Self::ALL.get(i).copied()
    }
}

/// The `logLevel` a request asked for (the engine refused a request with
/// an unknown one before its handler, -32602).
pub(crate) fn requested_log_level(params: &Value) -> Option<LogLevel> {
    params
        .get("_meta")
        .and_then(|m| m.get(KEY_LOG_LEVEL))
        .and_then(Value::as_str)
        .and_then(LogLevel::parse)
}

/// A `tools/call` request, handed to the tool's handler.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub(crate) link: Link,
    pub(crate) name: String,
    pub(crate) params: Arc<RawParams>,
    pub(crate) principal: Option<String>,
}

/// A request's `params` as the raw JSON the engine checked, with the JSON
/// trees built only when a handler asks for a [`Value`]: the usual tool
/// reads its arguments straight from the bytes.
#[derive(Debug)]
pub(crate) struct RawParams {
    bytes: Box<[u8]>,
    arguments: Option<Range<usize>>,
    progress_token: Option<Range<usize>>,
    tree: OnceLock<Value>,
    arguments_tree: OnceLock<Value>,
}

impl RawParams {
    /// `params`, with where the engine found `arguments` and the progress
    /// token in it (slices of `params`; another slice, such as the `{}` of
    /// absent arguments, reads as absent).
    pub(crate) fn new(params: &[u8], arguments: &[u8], progress_token: Option<&[u8]>) -> Self {
        let within = |part: &[u8]| Some(json::span(params, part)).filter(|r| !r.is_empty());
        Self {
            bytes: params.into(),
            arguments: within(arguments),
            progress_token: progress_token.and_then(within),
            tree: OnceLock::new(),
            arguments_tree: OnceLock::new(),
        }
    }

    fn arguments(&self) -> Option<&[u8]> {
        self.arguments.clone().and_then(|r| self.bytes.get(r))
    }

    fn progress_token(&self) -> Option<&[u8]> {
        self.progress_token.clone().and_then(|r| self.bytes.get(r))
    }

    fn tree(&self) -> &Value {
        self.tree
            .get_or_init(|| serde_json::from_slice(&self.bytes).unwrap_or(Value::Null))
    }
}

impl ToolCall {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Who is calling: the principal the server's
    /// [`Auth`](crate::Auth) named for the call's bearer token; `None`
    /// when the server authenticates no one.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// `params.arguments` (`Value::Null` when absent).
    pub fn arguments(&self) -> &Value {
        let p = &self.params;
        p.arguments_tree.get_or_init(|| {
            p.arguments()
                .and_then(|a| serde_json::from_slice(a).ok())
                .unwrap_or(Value::Null)
        })
    }

    /// `params.arguments` as the raw JSON text the client sent (`{}` when
    /// absent): read it without building a tree.
    pub fn arguments_raw(&self) -> &[u8] {
        self.params
            .arguments()
            .filter(|a| json::kind(a) != Some(json::Kind::Null))
            .unwrap_or(b"{}")
    }

    /// The string argument `name`, borrowed from the request when it has
    /// no escapes; `None` when absent or not a string.
    pub fn argument_str(&self, name: &str) -> Option<std::borrow::Cow<'_, str>> {
        let raw = json::get(self.params.arguments()?, name.as_bytes())?;
        if let Some(plain) = json::str_plain(raw) {
            return std::str::from_utf8(plain).ok().map(Into::into);
        }
        serde_json::from_slice::<String>(raw).ok().map(Into::into)
    }

    /// The arguments as a typed value (absent arguments read as `{}`);
    /// -32602 naming the argument that does not fit (`invalid arguments: target.region: invalid type ...`,
    /// `data: {"argument": "target.region"}`). Deserialized straight from
    /// the request's bytes.
    pub fn arguments_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, ToolError> {
        arguments_from_slice(self.arguments_raw())
    }

    /// [`arguments_as`](Self::arguments_as) into a type that borrows from
    /// the request (`&str`, `Cow<str>` fields).
    pub fn arguments_borrowed<'de, T: serde::Deserialize<'de>>(&'de self) -> Result<T, ToolError> {
        arguments_from_slice(self.arguments_raw())
    }

    /// `params.inputResponses` of a retried multi round-trip call.
    pub fn input_responses(&self) -> Option<&Map<String, Value>> {
        input_responses(self.params.tree())
    }

    /// `params.requestState` of a retried multi round-trip call, as the
    /// client echoed it: treat it as attacker-controlled (see
    /// [`StateSeal`](crate::StateSeal)).
    pub fn request_state(&self) -> Option<&str> {
        request_state(self.params.tree())
    }

    /// The client capabilities this request declared (a JSON object). A
    /// server may rely on nothing else (MCP §3.3): ask only for input the
    /// client can give, or answer [`ToolError::missing_capability`].
    pub fn client_capabilities(&self) -> &Value {
        client_capabilities(self.params.tree())
    }

    /// Whether the request declared the client capability `name`
    /// (`"elicitation"`, `"sampling"`, `"roots"`).
    pub fn has_client_capability(&self, name: &str) -> bool {
        self.client_capabilities().get(name).is_some()
    }

    /// Sends `notifications/message` (deprecated MCP logging, §11) when the
    /// request asked for logging at `level` or below; otherwise nothing
    /// (a request without `logLevel` gets no log message). Whether it was
    /// sent.
    pub async fn log(&self, level: LogLevel, data: Value) -> bool {
        let asked = requested_log_level(self.params.tree());
        if asked.is_none_or(|asked| level < asked) {
            return false;
        }
        let mut params = Vec::with_capacity(64);
        params.extend_from_slice(b"{\"level\":");
        write_json(&mut params, level.as_str());
        params.extend_from_slice(b",\"data\":");
        write_json(&mut params, &data);
        params.push(b'}');
        self.link.notify_raw("notifications/message", params).await;
        true
    }

    /// The whole `params` object, `_meta` included.
    pub fn params(&self) -> &Value {
        self.params.tree()
    }

    /// The whole `params` object as the raw JSON text the client sent.
    pub fn params_raw(&self) -> &[u8] {
        &self.params.bytes
    }

    /// Sends `notifications/progress` with the request's `progressToken`;
    /// does nothing when the request carried none.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = self.params.progress_token() else {
            return;
        };
        // Written straight to JSON text: one notification per step is the
        // hot path of a progress stream. The token is the client's JSON,
        // checked by the engine (a string or a number).
        let mut params = Vec::with_capacity(96);
        params.extend_from_slice(b"{\"progressToken\":");
        params.extend_from_slice(token);
        params.extend_from_slice(b",\"progress\":");
        write_json(&mut params, &number(progress));
        if let Some(total) = total {
            params.extend_from_slice(b",\"total\":");
            write_json(&mut params, &number(total));
        }
        if let Some(message) = message {
            params.extend_from_slice(b",\"message\":");
            write_json(&mut params, message);
        }
        params.push(b'}');
        self.link.notify_raw("notifications/progress", params).await;
    }

    /// Completes when the call is cancelled (client reset, deadline,
    /// connection closed) or otherwise over. The handler's task is aborted
    /// at the same time; this serves work the handler moved elsewhere
    /// (other tasks, blocking threads) through a clone of the `ToolCall`.
    pub async fn cancelled(&self) {
        self.link.cancelled().await;
    }

    /// Whether the call is cancelled or otherwise over.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.link.is_cancelled()
    }
}

/// The arguments as `T` from their JSON text, or -32602 naming the
/// argument that failed (no JSON tree in between).
pub(crate) fn arguments_from_slice<'de, T: serde::Deserialize<'de>>(
    arguments: &'de [u8],
) -> Result<T, ToolError> {
    let mut de = serde_json::Deserializer::from_slice(arguments);
    serde_path_to_error::deserialize(&mut de).map_err(argument_error)
}

/// -32602 naming the argument that did not fit.
fn argument_error(e: serde_path_to_error::Error<serde_json::Error>) -> ToolError {
    {
        let path = e.path().to_string();
        // The reader's error names its place in the text; the path does.
        let inner = e.inner().to_string();
        let inner = match inner.rfind(" at line ") {
            Some(at) if e.inner().line() > 0 => &inner[..at],
            _ => &inner,
        };
        let message = if path == "." {
            format!("invalid arguments: {inner}")
        } else {
            format!("invalid arguments: {path}: {inner}")
        };
        let mut error = ToolError::invalid_params(message);
        if path != "." {
            error.data = Some(serde_json::json!({"argument": path}));
        }
        error
    }
}

/// A `resources/read` request.
#[derive(Debug, Clone)]
pub struct ResourceRead {
    pub(crate) uri: String,
    pub(crate) params: Value,
    /// The values of a template's variables, in the template's order.
    pub(crate) variables: Vec<(String, String)>,
}

impl ResourceRead {
    /// The URI read.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The value of the template variable `name` in the URI (for a
    /// resource template: `test://items/{id}` read as `test://items/7`
    /// has `id` = `7`, as written in the URI, not percent-decoded).
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.variables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The client capabilities this request declared.
    pub fn client_capabilities(&self) -> &Value {
        client_capabilities(&self.params)
    }

    /// The whole `params` object.
    pub fn params(&self) -> &Value {
        &self.params
    }
}

/// A `prompts/get` request.
#[derive(Debug, Clone)]
pub struct PromptGet {
    pub(crate) name: String,
    pub(crate) params: Value,
}

impl PromptGet {
    /// The prompt's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The argument `name`, if given as a string.
    pub fn argument(&self, name: &str) -> Option<&str> {
        self.params.get("arguments")?.get(name)?.as_str()
    }

    /// `params.inputResponses` of a retried multi round-trip request.
    pub fn input_responses(&self) -> Option<&Map<String, Value>> {
        input_responses(&self.params)
    }

    /// `params.requestState` of a retried multi round-trip request:
    /// attacker-controlled.
    pub fn request_state(&self) -> Option<&str> {
        request_state(&self.params)
    }

    /// The client capabilities this request declared.
    pub fn client_capabilities(&self) -> &Value {
        client_capabilities(&self.params)
    }

    /// Whether the request declared the client capability `name`.
    pub fn has_client_capability(&self, name: &str) -> bool {
        self.client_capabilities().get(name).is_some()
    }

    /// The whole `params` object.
    pub fn params(&self) -> &Value {
        &self.params
    }
}

/// A `completion/complete` request: which argument of which prompt or
/// resource template, and what the user typed so far.
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    pub(crate) params: Value,
}

impl CompletionRequest {
    /// The prompt named by a `ref/prompt` reference.
    pub fn prompt(&self) -> Option<&str> {
        self.reference("ref/prompt", "name")
    }

    /// The URI (template) named by a `ref/resource` reference.
    pub fn resource(&self) -> Option<&str> {
        self.reference("ref/resource", "uri")
    }

    fn reference(&self, kind: &str, key: &str) -> Option<&str> {
        let r = self.params.get("ref")?;
        (r.get("type")?.as_str()? == kind).then_some(())?;
        r.get(key)?.as_str()
    }

    /// The argument being completed: its name.
    pub fn argument_name(&self) -> &str {
        self.params["argument"]["name"].as_str().unwrap_or_default()
    }

    /// What the user typed of the argument so far.
    pub fn argument_value(&self) -> &str {
        self.params["argument"]["value"]
            .as_str()
            .unwrap_or_default()
    }

    /// An argument already given (`context.arguments`).
    pub fn context_argument(&self, name: &str) -> Option<&str> {
        self.params
            .get("context")?
            .get("arguments")?
            .get(name)?
            .as_str()
    }

    /// The whole `params` object.
    pub fn params(&self) -> &Value {
        &self.params
    }
}
