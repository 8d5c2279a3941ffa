//! What an application offers, and how its handlers are written: an [`App`]
//! of tools, resources, resource templates, prompts, a completion handler
//! and a listen source, each tool an async function of a [`ToolCall`].
//!
//! The engine of `mcpwire-core` answers `server/discover`, the list
//! methods and `subscriptions/listen` itself from a static
//! [`Registry`](mcpwire_core::mcp::registry::Registry);
//! `App::registry` builds it once, when the server starts, by leaking the
//! descriptions (see there). The engine routes every other request to a
//! [`RequestKind`](mcpwire_core::mcp::server::RequestKind); `App::handle`
//! (in [`serve`], with the registry) starts the handler it names.
//!
//! Every result a handler answers carries
//! `_meta["io.modelcontextprotocol/serverInfo"]` (MCP §3.2); a retry whose
//! `inputResponses` or `requestState` is malformed (§9.2), or whose
//! `logLevel` is unknown (§11), is answered -32602 before its handler runs.
//!
//! Children: [`handler`] (what a handler gets), [`result`] (what it
//! returns, and the JSON of results), [`seal`] (sealed `requestState`),
//! `typed` (feature `schemars`: tools of a typed argument, their schema
//! generated from it), [`link`] (a running handler's link to its call, the
//! one type shared with the `server` module).

mod forward;
mod handler;
mod learnt;
pub(crate) mod link;
mod reconnect;
mod result;
mod seal;
mod serve;
#[cfg(feature = "schemars")]
mod typed;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

pub use forward::{ForwardRequest, ForwardResult, RawResult};
use handler::RawParams;
pub use handler::{CompletionRequest, LogLevel, PromptGet, ResourceRead, ToolCall};
pub use learnt::LearntTools;
use link::Link;
pub use reconnect::{Reconnect, refused_discover, server_refusal};
pub use result::{
    Completion, Content, PromptMessage, PromptResult, ResourceContent, Role, ToolError, ToolResult,
};
use result::{json_bytes, resource_contents};
pub use seal::StateSeal;
#[cfg(feature = "schemars")]
pub use typed::{IntoToolResult, Structured};

/// A boxed future, as handlers are stored.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
type ToolFn = dyn Fn(ToolCall) -> BoxFuture<Result<ToolResult, ToolError>> + Send + Sync;
type ResourceFn =
    dyn Fn(ResourceRead) -> BoxFuture<Result<ResourceContent, ToolError>> + Send + Sync;
type PromptFn = dyn Fn(PromptGet) -> BoxFuture<Result<PromptResult, ToolError>> + Send + Sync;
type CompleteFn =
    dyn Fn(CompletionRequest) -> BoxFuture<Result<Completion, ToolError>> + Send + Sync;
/// A forwarding handler, its answer turned into the result's JSON text.
type ForwardFn = dyn Fn(ForwardRequest) -> Work + Send + Sync;
/// A running handler: the JSON text of its result, or its error.
pub(crate) type Work = BoxFuture<Result<Vec<u8>, ToolError>>;

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

struct Tool {
    name: String,
    description: String,
    schema: String,
    handler: Arc<ToolFn>,
}

struct Resource {
    uri: String,
    name: String,
    mime_type: Option<String>,
    handler: Arc<ResourceFn>,
}

/// A resource template: RFC 6570 level 1 (`{name}` expressions, each
/// matching one non-empty path segment).
struct Template {
    uri_template: String,
    name: String,
    mime_type: Option<String>,
    handler: Arc<ResourceFn>,
}

struct Prompt {
    name: String,
    description: Option<String>,
    arguments: Vec<(String, bool)>,
    handler: Arc<PromptFn>,
}

/// An event of the listen source, announced to every open
/// `subscriptions/listen` stream that asked for its kind.
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
    tools: Vec<Tool>,
    resources: Vec<Resource>,
    templates: Vec<Template>,
    prompts: Vec<Prompt>,
    completion: Option<Arc<CompleteFn>>,
    listen: Option<broadcast::Sender<ListenEvent>>,
    forward: Option<Arc<ForwardFn>>,
    /// The forwarded server's tool schemas, for the mirrored-header check.
    forward_tools: Option<Arc<LearntTools>>,
    /// `,"_meta":{serverInfo}}`: what ends every handler's result.
    result_meta: Arc<[u8]>,
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
                "templates",
                &self
                    .templates
                    .iter()
                    .map(|t| &t.uri_template)
                    .collect::<Vec<_>>(),
            )
            .field(
                "prompts",
                &self.prompts.iter().map(|p| &p.name).collect::<Vec<_>>(),
            )
            .field("completion", &self.completion.is_some())
            .field("listen", &self.listen.is_some())
            .field("forward", &self.forward.is_some())
            .field("forward_tools", &self.forward_tools.is_some())
            .finish()
    }
}

impl App {
    /// An application called `name` at `version` (`serverInfo`).
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        let (name, version) = (name.into(), version.into());
        let meta =
            json!({"io.modelcontextprotocol/serverInfo": {"name": name, "version": version}});
        let mut result_meta = b",\"_meta\":".to_vec();
        result_meta.extend_from_slice(&json_bytes(&meta));
        result_meta.push(b'}');
        Self {
            name,
            version,
            instructions: None,
            tools: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            prompts: Vec::new(),
            completion: None,
            listen: None,
            forward: None,
            forward_tools: None,
            result_meta: result_meta.into(),
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

    /// Adds a tool of a typed argument (feature `schemars`). Its input
    /// schema is generated from `Args` (doc comments become descriptions;
    /// `#[schemars(extend("x-mcp-header" = "Region"))]` on a field mirrors
    /// it into a header); the handler gets the arguments deserialized, and
    /// arguments that do not fit are answered with -32602 naming the
    /// argument, before it runs. It returns a [`ToolResult`] or a
    /// [`Structured`] value. Runs and is cancelled as [`App::tool`].
    ///
    /// `Args` must describe a JSON object (a struct with named fields, a
    /// map); any other type fails the server's start with
    /// `RegistryError::InvalidSchema`.
    ///
    /// ```
    /// use mcpwire_tokio::{App, Structured, ToolResult};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct EchoArgs {
    ///     /// The text to return.
    ///     text: String,
    /// }
    ///
    /// #[derive(Serialize, schemars::JsonSchema)]
    /// struct Sum {
    ///     sum: i64,
    /// }
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct AddArgs {
    ///     a: i64,
    ///     b: i64,
    /// }
    ///
    /// let app = App::new("demo", "1.0")
    ///     .typed_tool("echo", "Returns its text.", |args: EchoArgs, _call| async move {
    ///         Ok(ToolResult::text(args.text))
    ///     })
    ///     .typed_tool("add", "Adds a and b.", |args: AddArgs, _call| async move {
    ///         Ok(Structured(Sum { sum: args.a + args.b }))
    ///     });
    /// ```
    #[cfg(feature = "schemars")]
    pub fn typed_tool<Args, F, Fut, R>(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Self
    where
        Args: serde::de::DeserializeOwned + schemars::JsonSchema,
        F: Fn(Args, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
        R: IntoToolResult,
    {
        // Not an object: a schema text that `Registry::check` refuses, so
        // the server does not start with a tool no client can call.
        let schema =
            typed::input_schema::<Args>().map_or_else(|| "null".to_owned(), |s| s.to_string());
        let handler = Arc::new(handler);
        self.tools.push(Tool {
            name: name.into(),
            description: description.into(),
            schema,
            handler: Arc::new(move |call: ToolCall| {
                let handler = Arc::clone(&handler);
                Box::pin(async move {
                    let args = call.arguments_as::<Args>()?;
                    handler(args, call).await?.into_tool_result()
                })
            }),
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

    /// Adds a resource at `uri`; the handler returns its text (a `String`)
    /// or its bytes (a [`ResourceContent`]). A read of a URI that no
    /// resource or template has is answered -32602 with `data.uri`.
    pub fn resource<F, Fut, R>(
        mut self,
        uri: impl Into<String>,
        name: impl Into<String>,
        mime_type: Option<&str>,
        handler: F,
    ) -> Self
    where
        F: Fn(ResourceRead) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
        R: Into<ResourceContent>,
    {
        self.resources.push(Resource {
            uri: uri.into(),
            name: name.into(),
            mime_type: mime_type.map(str::to_owned),
            handler: resource_fn(handler),
        });
        self
    }

    /// Adds a resource template (`resources/templates/list`): a read of a
    /// URI that matches `uri_template` and no resource goes to `handler`,
    /// which reads the variables with [`ResourceRead::variable`].
    /// Templates are RFC 6570 level 1: each `{name}` matches one non-empty
    /// path segment (no `/`); templates are tried in the order added.
    ///
    /// ```
    /// use mcpwire_tokio::App;
    /// let app = App::new("demo", "1.0").resource_template(
    ///     "test://items/{id}",
    ///     "item",
    ///     Some("text/plain"),
    ///     |read| async move { Ok(format!("item {}", read.variable("id").unwrap_or_default())) },
    /// );
    /// # let _ = app;
    /// ```
    pub fn resource_template<F, Fut, R>(
        mut self,
        uri_template: impl Into<String>,
        name: impl Into<String>,
        mime_type: Option<&str>,
        handler: F,
    ) -> Self
    where
        F: Fn(ResourceRead) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
        R: Into<ResourceContent>,
    {
        self.templates.push(Template {
            uri_template: uri_template.into(),
            name: name.into(),
            mime_type: mime_type.map(str::to_owned),
            handler: resource_fn(handler),
        });
        self
    }

    /// Answers `completion/complete` (and announces the `completions`
    /// capability): the handler gets the reference and the argument typed
    /// so far, and returns the values (a `Vec<String>` or a
    /// [`Completion`]).
    pub fn completion<F, Fut, R>(mut self, handler: F) -> Self
    where
        F: Fn(CompletionRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
        R: Into<Completion>,
    {
        let handler = Arc::new(handler);
        self.completion = Some(Arc::new(move |request| {
            let work = handler(request);
            Box::pin(async move { work.await.map(Into::into) })
        }));
        self
    }

    /// Adds a prompt with `arguments` as (name, required) pairs; the handler
    /// returns its messages (a `Vec<PromptMessage>`), or a
    /// [`PromptResult`] (with a description, or asking for input).
    pub fn prompt<F, Fut, R>(
        mut self,
        name: impl Into<String>,
        description: Option<&str>,
        arguments: &[(&str, bool)],
        handler: F,
    ) -> Self
    where
        F: Fn(PromptGet) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
        R: Into<PromptResult>,
    {
        self.prompts.push(Prompt {
            name: name.into(),
            description: description.map(str::to_owned),
            arguments: arguments
                .iter()
                .map(|(n, required)| ((*n).to_owned(), *required))
                .collect(),
            handler: Arc::new(move |get| {
                let work = handler(get);
                Box::pin(async move { work.await.map(Into::into) })
            }),
        });
        self
    }

    /// The listen source: every event sent on `events` goes to the open
    /// `subscriptions/listen` streams that asked for its kind.
    pub fn listen(mut self, events: broadcast::Sender<ListenEvent>) -> Self {
        self.listen = Some(events);
        self
    }

    /// Forwards every request to `handler` (a bridge): the engine still
    /// checks each request's envelope, `_meta`, protocol version and
    /// mirrored headers, then hands it over whatever its method, even
    /// `server/discover`, the list methods and `subscriptions/listen`
    /// (which the engine answers itself otherwise). The handler sends
    /// notifications with [`ForwardRequest::notify`] and returns the
    /// result object, sent as it is (no `serverInfo` added), or the
    /// JSON-RPC error. The result is a [`Value`] or, as a client handed it
    /// over, its JSON text ([`ForwardResult::raw`]). Cancellation drops
    /// its future. The tools, resources, prompts, completion and listen
    /// source of the app are not served then.
    pub fn forward<F, Fut, R>(mut self, handler: F) -> Self
    where
        F: Fn(ForwardRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
        R: Into<ForwardResult> + 'static,
    {
        // The handler's future is made inside the boxed one (one copy of
        // it, not a moved one beside the one awaited).
        let handler = Arc::new(handler);
        self.forward =
            Some(Arc::new(move |request| {
                let handler = Arc::clone(&handler);
                Box::pin(async move {
                    handler(request).await?.into().into_bytes().ok_or_else(|| {
                        ToolError::internal("the forwarded result is not a JSON object")
                    })
                })
            }));
        self
    }

    /// The tool schemas of the server [`forward`](Self::forward) reaches,
    /// as `tools` learns them: the engine holds each forwarded
    /// `tools/call`'s `Mcp-Param-*` headers to its tool's schema as it
    /// holds a call to this app's own tools (-32020 for a header that
    /// differs from the argument, or that is missing for an argument the
    /// body gives), and refuses an `Mcp-Param-*` header for a tool whose
    /// schema is not known (-32020: it cannot be checked, and a gateway in
    /// front may route or authorize on it). Without it a forwarded call's
    /// `Mcp-Param-*` headers are not checked.
    pub fn forward_tools(mut self, tools: Arc<LearntTools>) -> Self {
        self.forward_tools = Some(tools);
        self
    }
}

/// A resource handler, boxed.
fn resource_fn<F, Fut, R>(handler: F) -> Arc<ResourceFn>
where
    F: Fn(ResourceRead) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    R: Into<ResourceContent>,
{
    Arc::new(move |read| {
        let work = handler(read);
        Box::pin(async move { work.await.map(Into::into) })
    })
}
