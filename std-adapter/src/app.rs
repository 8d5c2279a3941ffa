//! What an application offers, and how its handlers are written: an [`App`]
//! of tools, resources, prompts and a listen source, each tool an async
//! function of a [`ToolCall`].
//!
//! The engine of `mcpwire-core` answers `server/discover` and the list
//! methods itself from a static [`Registry`]; [`App::registry`] builds it
//! once, when the server starts, by leaking the descriptions (see there).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use mcpwire_core::mcp::error::{INTERNAL_ERROR, INVALID_PARAMS};
use mcpwire_core::mcp::registry::{
    PromptArgument, PromptInfo, Registry, RegistryError, ResourceInfo, ServerInfo, ToolInfo,
};
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, watch};

use crate::server::{CallId, Outgoing};

/// A boxed future, as handlers are stored.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
type ToolFn = dyn Fn(ToolCall) -> BoxFuture<Result<ToolResult, ToolError>> + Send + Sync;
type ResourceFn = dyn Fn(ResourceRead) -> BoxFuture<Result<String, ToolError>> + Send + Sync;
type PromptFn = dyn Fn(PromptGet) -> BoxFuture<Result<Vec<PromptMessage>, ToolError>> + Send + Sync;

/// A tool's input schema: JSON text or a [`Value`].
#[derive(Debug, Clone)]
pub struct Schema(String);

impl From<&str> for Schema {
    fn from(text: &str) -> Self {
        Self(text.to_owned())
    }
}

impl From<String> for Schema {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl From<Value> for Schema {
    fn from(value: Value) -> Self {
        Self(value.to_string())
    }
}

pub(crate) struct Tool {
    name: String,
    description: String,
    schema: String,
    pub(crate) handler: Arc<ToolFn>,
}

pub(crate) struct Resource {
    uri: String,
    name: String,
    mime_type: Option<String>,
    pub(crate) handler: Arc<ResourceFn>,
}

pub(crate) struct Prompt {
    name: String,
    description: Option<String>,
    arguments: Vec<(String, bool)>,
    pub(crate) handler: Arc<PromptFn>,
}

/// An event of the listen source, sent to every open `subscriptions/listen`
/// stream that asked for its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenEvent {
    ToolsListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    /// `notifications/resources/updated` for `uri`.
    ResourceUpdated {
        uri: String,
    },
}

/// The tools, resources, prompts and listen source of a server.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use mcpwire_tokio::{App, Server, ToolResult};
/// let app = App::new("demo", "1.0").tool(
///     "echo",
///     "Returns its text.",
///     r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
///     |call| async move {
///         let text = call.arguments()["text"].as_str().unwrap_or_default().to_owned();
///         Ok(ToolResult::text(text))
///     },
/// );
/// Server::bind("127.0.0.1:50051").await?.serve(app).await
/// # }
/// ```
pub struct App {
    name: String,
    version: String,
    instructions: Option<String>,
    pub(crate) tools: Vec<Tool>,
    pub(crate) resources: Vec<Resource>,
    pub(crate) prompts: Vec<Prompt>,
    pub(crate) listen: Option<broadcast::Sender<ListenEvent>>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("name", &self.name)
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .field(
                "resources",
                &self.resources.iter().map(|r| &r.uri).collect::<Vec<_>>(),
            )
            .field(
                "prompts",
                &self.prompts.iter().map(|p| &p.name).collect::<Vec<_>>(),
            )
            .field("listen", &self.listen.is_some())
            .finish()
    }
}

impl App {
    /// An application called `name` at `version` (`serverInfo`).
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            instructions: None,
            tools: Vec::new(),
            resources: Vec::new(),
            prompts: Vec::new(),
            listen: None,
        }
    }

    /// The `instructions` of `server/discover`.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Adds a tool. `schema` is a JSON Schema object (text or [`Value`]); its
    /// `x-mcp-header` annotations are enforced by the engine. The handler
    /// runs as a tokio task per call and is aborted when the call is
    /// cancelled or passes its deadline.
    pub fn tool<F, Fut>(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        schema: impl Into<Schema>,
        handler: F,
    ) -> Self
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
    {
        self.tools.push(Tool {
            name: name.into(),
            description: description.into(),
            schema: schema.into().0,
            handler: Arc::new(move |call| Box::pin(handler(call))),
        });
        self
    }

    /// Adds every tool of a portable, no-alloc tool set (see
    /// [`crate::portable`]): the same tools a firmware serves with
    /// `mcpwire-embassy`. Each call runs on a blocking-pool thread and is
    /// dropped when cancelled.
    pub fn portable_tools<T>(self, tools: T) -> Self
    where
        T: crate::portable::Tools + Send + Sync + 'static,
    {
        crate::portable::register(self, tools)
    }

    /// Adds a text resource at `uri`; the handler returns its text.
    pub fn resource<F, Fut>(
        mut self,
        uri: impl Into<String>,
        name: impl Into<String>,
        mime_type: Option<&str>,
        handler: F,
    ) -> Self
    where
        F: Fn(ResourceRead) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, ToolError>> + Send + 'static,
    {
        self.resources.push(Resource {
            uri: uri.into(),
            name: name.into(),
            mime_type: mime_type.map(str::to_owned),
            handler: Arc::new(move |read| Box::pin(handler(read))),
        });
        self
    }

    /// Adds a prompt with `arguments` as (name, required) pairs; the handler
    /// returns its messages.
    pub fn prompt<F, Fut>(
        mut self,
        name: impl Into<String>,
        description: Option<&str>,
        arguments: &[(&str, bool)],
        handler: F,
    ) -> Self
    where
        F: Fn(PromptGet) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<PromptMessage>, ToolError>> + Send + 'static,
    {
        self.prompts.push(Prompt {
            name: name.into(),
            description: description.map(str::to_owned),
            arguments: arguments
                .iter()
                .map(|(n, required)| ((*n).to_owned(), *required))
                .collect(),
            handler: Arc::new(move |get| Box::pin(handler(get))),
        });
        self
    }

    /// The listen source: every event sent on `events` goes to the open
    /// `subscriptions/listen` streams that asked for its kind.
    pub fn listen(mut self, events: broadcast::Sender<ListenEvent>) -> Self {
        self.listen = Some(events);
        self
    }

    /// The engine's registry, built once per server.
    ///
    /// The engine borrows its descriptions for `'static` (a firmware keeps
    /// them in flash), so the strings and slices are leaked here:
    /// `Box::leak` of the configuration, once, when a server starts. This
    /// is a server's lifetime configuration; a process that starts many
    /// servers leaks one copy each.
    pub(crate) fn registry(&self) -> Result<Registry<'static>, RegistryError<'static>> {
        let tools: Vec<ToolInfo<'static>> = self
            .tools
            .iter()
            .map(|t| ToolInfo {
                name: leak(&t.name),
                title: None,
                description: leak(&t.description),
                input_schema: leak(&t.schema),
            })
            .collect();
        let resources: Vec<ResourceInfo<'static>> = self
            .resources
            .iter()
            .map(|r| ResourceInfo {
                uri: leak(&r.uri),
                name: leak(&r.name),
                description: None,
                mime_type: r.mime_type.as_deref().map(leak),
            })
            .collect();
        let prompts: Vec<PromptInfo<'static>> = self
            .prompts
            .iter()
            .map(|p| {
                let arguments: Vec<PromptArgument<'static>> = p
                    .arguments
                    .iter()
                    .map(|(name, required)| PromptArgument {
                        name: leak(name),
                        description: None,
                        required: *required,
                    })
                    .collect();
                PromptInfo {
                    name: leak(&p.name),
                    description: p.description.as_deref().map(leak),
                    arguments: Box::leak(arguments.into_boxed_slice()),
                }
            })
            .collect();
        let registry = Registry {
            info: ServerInfo {
                name: leak(&self.name),
                version: leak(&self.version),
                instructions: self.instructions.as_deref().map(leak),
            },
            tools: Box::leak(tools.into_boxed_slice()),
            resources: Box::leak(resources.into_boxed_slice()),
            templates: &[],
            prompts: Box::leak(prompts.into_boxed_slice()),
            listen: self.listen.is_some(),
            completions: false,
        };
        registry.check()?;
        Ok(registry)
    }

    pub(crate) fn server_info(&self) -> Value {
        json!({"name": self.name, "version": self.version})
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

/// The handlers of an [`App`], looked up by name, shared by connections.
pub(crate) struct Handlers {
    pub(crate) tools: HashMap<String, Arc<ToolFn>>,
    /// URI → (MIME type, handler).
    pub(crate) resources: HashMap<String, (Option<String>, Arc<ResourceFn>)>,
    pub(crate) prompts: HashMap<String, Arc<PromptFn>>,
    pub(crate) listen: Option<broadcast::Sender<ListenEvent>>,
    pub(crate) server_info: Value,
}

impl Handlers {
    pub(crate) fn new(app: &App) -> Self {
        Self {
            tools: app
                .tools
                .iter()
                .map(|t| (t.name.clone(), Arc::clone(&t.handler)))
                .collect(),
            resources: app
                .resources
                .iter()
                .map(|r| (r.uri.clone(), (r.mime_type.clone(), Arc::clone(&r.handler))))
                .collect(),
            prompts: app
                .prompts
                .iter()
                .map(|p| (p.name.clone(), Arc::clone(&p.handler)))
                .collect(),
            listen: app.listen.clone(),
            server_info: app.server_info(),
        }
    }
}

// ----------------------------------------------------------------------
// What a handler gets
// ----------------------------------------------------------------------

/// The link of a running handler to its call: notifications and
/// cancellation.
#[derive(Debug, Clone)]
pub(crate) struct CallLink {
    pub(crate) call: CallId,
    pub(crate) out: crate::outbox::Sender<Outgoing>,
    pub(crate) cancelled: watch::Receiver<bool>,
}

impl CallLink {
    pub(crate) async fn notify(&self, method: &'static str, params: Value) {
        let mut bytes = Vec::new();
        write_json(&mut bytes, &params);
        self.notify_raw(method, bytes).await;
    }

    /// Sends a notification whose params are JSON text already.
    pub(crate) async fn notify_raw(&self, method: &'static str, params: Vec<u8>) {
        let _ = self
            .out
            .send(Outgoing::Notify {
                call: self.call,
                method,
                params,
            })
            .await;
    }

    async fn cancelled(&self) {
        let mut rx = self.cancelled.clone();
        // An error means the connection task is gone: cancelled as well.
        let _ = rx.wait_for(|c| *c).await;
    }
}

/// A `tools/call` request, handed to the tool's handler.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub(crate) link: CallLink,
    pub(crate) name: String,
    pub(crate) params: Value,
    pub(crate) progress_token: Option<Value>,
    pub(crate) principal: Option<String>,
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
        self.params.get("arguments").unwrap_or(&Value::Null)
    }

    /// The arguments as a typed value.
    pub fn arguments_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, ToolError> {
        T::deserialize(self.arguments())
            .map_err(|e| ToolError::invalid_params(format!("invalid arguments: {e}")))
    }

    /// `params.inputResponses` of a retried multi round-trip call.
    pub fn input_responses(&self) -> Option<&Map<String, Value>> {
        self.params.get("inputResponses").and_then(Value::as_object)
    }

    /// `params.requestState` of a retried multi round-trip call, as the
    /// client echoed it: treat it as attacker-controlled.
    pub fn request_state(&self) -> Option<&str> {
        self.params.get("requestState").and_then(Value::as_str)
    }

    /// The whole `params` object, `_meta` included.
    pub fn params(&self) -> &Value {
        &self.params
    }

    /// Sends `notifications/progress` with the request's `progressToken`;
    /// does nothing when the request carried none.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        // Written straight to JSON text: one notification per step is the
        // hot path of a progress stream.
        let mut params = Vec::with_capacity(96);
        params.extend_from_slice(b"{\"progressToken\":");
        write_json(&mut params, token);
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
}

/// Appends `v` as JSON text. Serializing a `Value` or a `str` into a `Vec`
/// cannot fail.
pub(crate) fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let _ = serde_json::to_writer(out, v);
}

/// Integers print as integers (`3`, not `3.0`).
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

/// A `resources/read` request.
#[derive(Debug, Clone)]
pub struct ResourceRead {
    pub(crate) uri: String,
    pub(crate) params: Value,
}

impl ResourceRead {
    /// The URI read.
    pub fn uri(&self) -> &str {
        &self.uri
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
}

/// Who speaks a prompt message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// A text message of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptMessage {
    pub role: Role,
    pub text: String,
}

impl PromptMessage {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            text: text.into(),
        }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            text: text.into(),
        }
    }
}

// ----------------------------------------------------------------------
// What a handler returns
// ----------------------------------------------------------------------

/// A content block of a tool result.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// Any other block (image, audio, resource link), as its JSON.
    Json(Value),
}

impl Content {
    fn to_json(&self) -> Value {
        match self {
            Self::Text(text) => json!({"type": "text", "text": text}),
            Self::Json(v) => v.clone(),
        }
    }
}

/// What a tool returns: a complete result, or a request for more input
/// (multi round-trip, MCP §9).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResult {
    Complete {
        content: Vec<Content>,
        structured: Option<Value>,
        /// The tool failed; the model sees the content (not a protocol error).
        is_error: bool,
    },
    /// `resultType: "input_required"`: the client answers `input_requests`
    /// (key → `{method, params}`) and calls again with `inputResponses` and
    /// `request_state` echoed.
    InputRequired {
        input_requests: Map<String, Value>,
        request_state: Option<String>,
    },
}

impl ToolResult {
    /// One text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Complete {
            content: vec![Content::Text(text.into())],
            structured: None,
            is_error: false,
        }
    }

    /// A tool-level failure the model sees as text.
    pub fn error_text(text: impl Into<String>) -> Self {
        Self::Complete {
            content: vec![Content::Text(text.into())],
            structured: None,
            is_error: true,
        }
    }

    /// Structured content, with its JSON text as the text block.
    pub fn structured(value: Value) -> Self {
        Self::Complete {
            content: vec![Content::Text(value.to_string())],
            structured: Some(value),
            is_error: false,
        }
    }

    /// Asks the client for input before the call can complete.
    pub fn input_required(
        input_requests: Map<String, Value>,
        request_state: impl Into<String>,
    ) -> Self {
        Self::InputRequired {
            input_requests,
            request_state: Some(request_state.into()),
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        match self {
            Self::Complete {
                content,
                structured,
                is_error,
            } => {
                let mut r = json!({
                    "resultType": "complete",
                    "content": content.iter().map(Content::to_json).collect::<Vec<_>>(),
                });
                if let Some(s) = structured {
                    r["structuredContent"] = s.clone();
                }
                if *is_error {
                    r["isError"] = Value::Bool(true);
                }
                r
            }
            Self::InputRequired {
                input_requests,
                request_state,
            } => {
                let mut r = json!({"resultType": "input_required"});
                if !input_requests.is_empty() {
                    r["inputRequests"] = Value::Object(input_requests.clone());
                }
                if let Some(state) = request_state {
                    r["requestState"] = Value::from(state.as_str());
                }
                r
            }
        }
    }
}

/// A JSON-RPC error answer of a handler (an error response, then
/// `grpc-status: 0`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub code: i32,
    pub message: String,
    pub data: Option<Value>,
}

impl ToolError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// -32602.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// -32603.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ToolError {}
