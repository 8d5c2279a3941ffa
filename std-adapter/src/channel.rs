//! The client side of the tunnel binding on tokio: a [`Channel`] keeps one
//! HTTP/2 connection (a new one when the old one is gone) and runs many
//! concurrent calls of `/mcp.zig.transport.v1.Mcp/Call` on it.
//!
//! Each call carries one JSON-RPC request; its response stream's
//! notifications come out of [`CallStream::next`] as they arrive, then the
//! response. The binding's client rules are the core's sans-IO client
//! engine, [`Client`](mcpwire_core::mcp::client::Client), one per
//! connection: the metadata of a call is built from its body, with the
//! `inputSchema` of the tool from the last `tools/list` seen; a -32020
//! reads `tools/list` again and sends the call once more; a stream the
//! server refused unprocessed (REFUSED_STREAM) is sent once more; what is
//! left of the request timeout travels in `grpc-timeout`; a JSON-RPC error
//! in the trailers becomes the error response the application would get
//! on any transport. A transport failure is a [`CallError`]. A call that a
//! connection going away could not send again goes to the next connection,
//! once.
//!
//! With [`ChannelConfig::mode`] set to [`GrpcMode::Typed`], the requests
//! whose method has an RPC of the typed binding (`tools/list`,
//! `tools/call`, `resources/list`, `resources/read`,
//! `resources/templates/list`, `prompts/list`, `prompts/get`,
//! `completion/complete`) go as the unary RPCs of
//! `model_context_protocol.Mcp` on the same connection, and come back as
//! the same JSON-RPC responses and errors; the other methods
//! (`server/discover`, `subscriptions/listen`, notifications, extension
//! methods) go over the tunnel. The typed binding drops the notifications
//! of a request (progress), and refuses what its messages cannot carry
//! before a byte goes out (a [`CallError`] with `rpc_code` -32600).
//!
//! A connection runs [`MAX_CONCURRENT_CALLS`] calls at a time (more wait
//! their turn), and a call's request and each message of its response are
//! at most [`ChannelConfig::max_message_bytes`] octets (4 MiB by default).
//! A call's buffers are on the heap, as large as what it carries, and
//! freed when it ends.
//!
//! The typed helpers read and write MCP for the application, as an rmcp
//! or tonic user expects: [`Channel::list_tools`] (every page),
//! [`Channel::call_tool`], [`Channel::call_tool_typed`] (the
//! `structuredContent` as a `T`), the resource and prompt methods. A tool
//! that reports a failure (`isError`) gives a [`CallToolResult`]; a
//! JSON-RPC error response gives a [`CallError`] whose
//! [`rpc`](CallError::rpc) has its code, message and data.
//! [`Channel::request`] and [`Channel::call`] take any method as JSON.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcpwire_tokio::CallError> {
//! use mcpwire_tokio::Channel;
//! use serde_json::json;
//! let channel = Channel::new("127.0.0.1:50051");
//! for tool in channel.list_tools().await? {
//!     println!("{}: {}", tool.name, tool.description.unwrap_or_default());
//! }
//! let result = channel.call_tool("echo", json!({"text": "hi"})).await?;
//! println!("{}", result.text());
//! # Ok(()) }
//! ```

pub(crate) mod calls;
mod driver;
mod mailbox;
pub(crate) mod typed;

use std::collections::HashMap;
use std::fmt;
use std::io::Write as _;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use mcpwire_core::grpc::Code;
pub use mcpwire_core::mcp::client::Keepalive;
use mcpwire_core::mcp::client::{Binding, ClientConfig};
use mcpwire_core::mcp::error::INVALID_REQUEST;
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::meta::{KEY_CLIENT_CAPABILITIES, KEY_PROTOCOL_VERSION};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use driver::{CallMsg, Command, ConnHandle, Refusal, Schemas};
pub use typed::{
    CallToolResult, GetPromptResult, JsonRpcError, MAX_LIST_PAGES, Progress, Prompt,
    PromptArgument, Resource, ResourceContents, Tool,
};

/// The MCP revision every request declares in `params._meta`.
pub use mcpwire_core::mcp::meta::PROTOCOL_VERSION;
/// The method path of the tunnel binding.
pub use mcpwire_proto::tunnel::CALL_PATH;
/// The request timeout when none is set (binding: `limits.request_timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_MAX_MESSAGE: usize = 4 << 20;
/// Calls a connection runs at a time; more wait for a free one.
pub const MAX_CONCURRENT_CALLS: usize = driver::CALLS;

/// How a channel connects and what every call carries.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// `host:port` of the server: cleartext HTTP/2 with prior knowledge,
    /// or TLS with ALPN `h2` when [`tls`](Self::tls) is set.
    pub addr: String,
    /// TLS (ALPN `h2`, `:scheme https`); `None` for cleartext.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::tls::ClientTlsConfig>,
    /// Static metadata sent with every call, e.g. `authorization`.
    pub extra_metadata: Vec<(String, String)>,
    /// The request timeout; each call sends what is left of it in
    /// `grpc-timeout` (not `subscriptions/listen`).
    pub request_timeout: Duration,
    /// `io.modelcontextprotocol/clientCapabilities` added to requests that
    /// lack it.
    pub client_capabilities: Value,
    /// The largest request and response message (protobuf-encoded,
    /// without the 5-octet gRPC prefix): a larger request is refused
    /// before it goes out, a larger response message fails its call, both
    /// with RESOURCE_EXHAUSTED. Default 4 MiB.
    pub max_message_bytes: usize,
    /// Which binding the calls use: the tunnel (the default), or the
    /// typed RPCs with the tunnel for the methods that have none.
    pub mode: GrpcMode,
    /// HTTP/2 keepalive PINGs (gRPC's `GRPC_ARG_KEEPALIVE_TIME_MS` and
    /// `GRPC_ARG_KEEPALIVE_TIMEOUT_MS`): after `interval` without a frame
    /// from the server while calls are open (or always, `while_idle`) a
    /// PING goes out, and when nothing comes back within `timeout` the
    /// connection counts as dead: its calls fail with UNAVAILABLE
    /// ("keepalive timeout: the peer stopped answering pings") and the
    /// next call connects anew. It finds a server that died without
    /// closing the connection. `None` (the default) sends no PING.
    pub keepalive: Option<Keepalive>,
}

/// Which gRPC binding a [`Channel`]'s calls go over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GrpcMode {
    /// Every request as a call of `/mcp.zig.transport.v1.Mcp/Call`.
    #[default]
    Tunnel,
    /// The typed binding (`model_context_protocol.Mcp`): a request whose
    /// method has one of the eight RPCs goes as that unary RPC, its
    /// `params` transcoded into the request message (one the messages
    /// cannot carry is refused with -32600 before a byte goes out), and
    /// its answer comes back as the JSON-RPC response the tunnel gives.
    /// `server/discover`, `subscriptions/listen`, notifications and
    /// extension methods go over the tunnel on the same connection.
    Typed,
}

impl GrpcMode {
    fn binding(self) -> Binding {
        match self {
            Self::Tunnel => Binding::Tunnel,
            Self::Typed => Binding::TypedOrTunnel,
        }
    }
}

impl ChannelConfig {
    pub fn new(addr: impl Into<String>) -> Self {
        Self {
            addr: addr.into(),
            #[cfg(feature = "tls")]
            tls: None,
            extra_metadata: Vec::new(),
            request_timeout: DEFAULT_TIMEOUT,
            client_capabilities: json!({}),
            max_message_bytes: DEFAULT_MAX_MESSAGE,
            mode: GrpcMode::Tunnel,
            keepalive: None,
        }
    }
}

/// Why a call gave no result: a failure of the transport (the gRPC status,
/// and what is known of the response), or, from the typed helpers, the
/// server's JSON-RPC error ([`CallError::rpc`]) or a tool's failure
/// ([`CallError::tool_error`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// For a transport failure: UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED,
    /// UNAUTHENTICATED, PERMISSION_DENIED, INTERNAL (a broken response) or
    /// INVALID_ARGUMENT (a request refused before a byte went out, see
    /// `rpc_code`). For a JSON-RPC error, the status the binding gives its
    /// code (INVALID_ARGUMENT, UNIMPLEMENTED, INTERNAL); UNKNOWN for a
    /// tool's failure.
    pub status: Code,
    pub message: String,
    pub diagnostics: CallDiagnostics,
    /// The JSON-RPC error the server answered with (typed helpers only;
    /// [`Channel::request`] hands the error response back as a value).
    pub rpc: Option<Box<JsonRpcError>>,
    /// The result of a tool that reported a failure (`isError`), from
    /// [`Channel::call_tool_typed`], which has no `T` to give
    /// ([`Channel::call_tool`] returns it as `Ok`).
    pub tool_error: Option<Box<CallToolResult>>,
}

/// What the response said about a failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallDiagnostics {
    /// The HTTP status of the response, when one came; 401 and 403 for the
    /// trailers UNAUTHENTICATED and PERMISSION_DENIED.
    pub http_status: Option<u16>,
    /// `grpc-message`, percent-decoded, or the core's account of a failure
    /// found by this end (a reset, a deadline, a broken response).
    pub grpc_message: Option<String>,
    /// `www-authenticate`, for the auth statuses.
    pub www_authenticate: Option<String>,
    /// The JSON-RPC code of a request refused before a byte went out
    /// (-32600 for an unsafe annotated integer).
    pub rpc_code: Option<i32>,
    /// The HTTP facts of a call over Streamable HTTP
    /// ([`HttpChannel`](crate::HttpChannel)): URL, status, content type,
    /// era and versions.
    pub http: Option<Box<crate::http_channel::HttpFacts>>,
}

impl CallError {
    pub(crate) fn new(status: Code, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            diagnostics: CallDiagnostics::default(),
            rpc: None,
            tool_error: None,
        }
    }

    pub(crate) fn invalid_request(message: &str) -> Self {
        let mut e = Self::new(Code::InvalidArgument, message);
        e.diagnostics.rpc_code = Some(INVALID_REQUEST);
        e
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)?;
        if let Some(s) = self.diagnostics.http_status {
            write!(f, " (HTTP {s})")?;
        }
        if let Some(rpc) = &self.rpc {
            write!(f, " (JSON-RPC {})", rpc.code)?;
        }
        Ok(())
    }
}

impl std::error::Error for CallError {}

/// One message of a call's response stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamMessage {
    /// A notification related to the request (progress, listen events).
    Notification(Value),
    /// The JSON-RPC response (a result or an error); the last message.
    Response(Value),
}

/// One message of a call's response stream as JSON text, as the client
/// engine validated it ([`CallStream::next_raw`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawMessage {
    /// A notification related to the request (progress, listen events).
    Notification(Vec<u8>),
    /// The JSON-RPC response (a result or an error); the last message.
    Response(RawResponse),
}

/// A JSON-RPC response as its text, and where its `result` lies in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    text: Vec<u8>,
    result: Option<Range<usize>>,
}

impl RawResponse {
    /// A response's text, valid JSON (as a client engine checked it, or
    /// as written from a tree); its `result` is looked up here.
    pub fn new(text: Vec<u8>) -> Self {
        let result = json::get(&text, b"result").map(|r| json::span(&text, r));
        Self { text, result }
    }

    /// `text` with its `result` where the client engine found it.
    pub(crate) fn located(text: Vec<u8>, result: Option<Range<usize>>) -> Self {
        let result = result.filter(|r| text.get(r.clone()).is_some());
        Self { text, result }
    }

    /// The whole response.
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// The `result` member's value; `None` for an error response.
    pub fn result(&self) -> Option<&[u8]> {
        self.text.get(self.result.clone()?)
    }

    /// The whole response, owned.
    pub fn into_text(self) -> Vec<u8> {
        self.text
    }

    /// The `result` member's value, owned (the text around it dropped),
    /// or the whole response back when it has none.
    pub fn into_result(self) -> Result<Vec<u8>, Self> {
        let Some(range) = self.result.clone() else {
            return Err(self);
        };
        let mut text = self.text;
        text.truncate(range.end);
        text.drain(..range.start);
        Ok(text)
    }
}

/// One connection per channel, many concurrent calls on it. Cheap to clone:
/// clones share the connection and the schema cache.
#[derive(Clone)]
pub struct Channel {
    inner: Arc<Inner>,
}

struct Inner {
    config: ChannelConfig,
    engine: ClientConfig,
    conn: tokio::sync::Mutex<Option<ConnHandle>>,
    /// Each tool's `inputSchema` (JSON text) from the last `tools/list`,
    /// and those the connection's engine learned by itself.
    schemas: Schemas,
    next_key: AtomicU64,
    next_id: AtomicU64,
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("addr", &self.inner.config.addr)
            .finish_non_exhaustive()
    }
}

impl Channel {
    /// A channel to `addr` with the default configuration. It connects at
    /// the first call.
    pub fn new(addr: impl Into<String>) -> Self {
        Self::with_config(ChannelConfig::new(addr))
    }

    pub fn with_config(config: ChannelConfig) -> Self {
        let mut engine = driver::client_config(config.request_timeout, config.max_message_bytes);
        #[cfg(feature = "tls")]
        if config.tls.is_some() {
            engine.scheme = "https";
        }
        engine.keepalive = config.keepalive;
        Self {
            inner: Arc::new(Inner {
                config,
                engine,
                conn: tokio::sync::Mutex::new(None),
                schemas: Arc::new(Mutex::new(HashMap::new())),
                next_key: AtomicU64::new(1),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    pub fn config(&self) -> &ChannelConfig {
        &self.inner.config
    }

    /// The cached `inputSchema` of `tool`, from the last `tools/list`.
    pub fn cached_schema(&self, tool: &str) -> Option<Value> {
        let schemas = self.inner.schemas.lock().ok()?;
        serde_json::from_slice(schemas.get(tool)?).ok()
    }

    /// Forgets every cached tool schema.
    pub fn clear_schemas(&self) {
        if let Ok(mut s) = self.inner.schemas.lock() {
            s.clear();
        }
        if let Ok(slot) = self.inner.conn.try_lock()
            && let Some(h) = slot.as_ref()
        {
            let _ = h.tx.send(Command::ClearSchemas);
        }
    }

    /// Sends `method` with `params` (the channel adds `id` and `_meta`) and
    /// waits for the response, skipping notifications.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.call(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await?
            .response()
            .await
    }

    /// Starts a call of one JSON-RPC request (an `id` is added when absent,
    /// and `params._meta` gets the protocol version and the client
    /// capabilities when absent). Its timeout is the channel's.
    pub async fn call(&self, request: Value) -> Result<CallStream, CallError> {
        self.call_with_timeout(request, None).await
    }

    /// [`Channel::call`] with its own timeout instead of the channel's.
    pub async fn call_with_timeout(
        &self,
        mut request: Value,
        timeout: Option<Duration>,
    ) -> Result<CallStream, CallError> {
        let (method, _) = complete_request(
            &mut request,
            &self.inner.next_id,
            &self.inner.config.client_capabilities,
        )?;
        let listen = method == "subscriptions/listen";
        let deadline = (!listen).then(|| {
            tokio::time::Instant::now() + timeout.unwrap_or(self.inner.config.request_timeout)
        });
        let body =
            serde_json::to_vec(&request).map_err(|e| CallError::invalid_request(&e.to_string()))?;
        let mut stream = CallStream {
            channel: self.clone(),
            tool_call: method == "tools/call",
            tools_list: method == "tools/list",
            id: request.get("id").cloned().unwrap_or(Value::Null),
            body: body.into(),
            request: OnceLock::from(request),
            deadline,
            resent: false,
            attempt: None,
            finished: false,
        };
        stream.start(true).await?;
        Ok(stream)
    }

    /// [`Channel::call_with_timeout`] of `method` with `params` as JSON
    /// text, sent as it is: `params` must be a valid JSON object whose
    /// `_meta` carries the protocol version and the client capabilities
    /// (a request a server engine admitted), else it is completed as
    /// [`Channel::call`] completes a request. The call is handed to the
    /// connection without waiting for it to be taken: a refusal is the
    /// error of [`CallStream::next`] or [`CallStream::next_raw`].
    pub async fn call_raw(
        &self,
        method: &str,
        params: &[u8],
        meta_complete: bool,
        timeout: Option<Duration>,
    ) -> Result<CallStream, CallError> {
        let trimmed = params.trim_ascii();
        if !meta_complete || trimmed.first() != Some(&b'{') {
            let params: Value = serde_json::from_slice(params)
                .map_err(|_| CallError::invalid_request("params is not JSON"))?;
            let request = json!({"jsonrpc": "2.0", "method": method, "params": params});
            return self.call_with_timeout(request, timeout).await;
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let listen = method == "subscriptions/listen";
        let deadline = (!listen).then(|| {
            tokio::time::Instant::now() + timeout.unwrap_or(self.inner.config.request_timeout)
        });
        // The fixed text is 45 octets and the id at most 20 digits, so the
        // usual body (a method that needs no escape) fills it without a
        // reallocation.
        let mut body = Vec::with_capacity(65 + method.len() + trimmed.len());
        body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        // Writing into a `Vec` does not fail.
        let _ = write!(body, "{id}");
        body.extend_from_slice(b",\"method\":");
        serde_json::to_writer(&mut body, method)
            .map_err(|e| CallError::invalid_request(&e.to_string()))?;
        body.extend_from_slice(b",\"params\":");
        body.extend_from_slice(trimmed);
        body.push(b'}');
        let mut stream = CallStream {
            channel: self.clone(),
            tool_call: method == "tools/call",
            tools_list: method == "tools/list",
            id: Value::from(id),
            body: body.into(),
            request: OnceLock::new(),
            deadline,
            resent: false,
            attempt: None,
            finished: false,
        };
        stream.start(false).await?;
        Ok(stream)
    }

    /// The connection to use, connecting when there is none or it is gone.
    async fn connection(&self, fresh: bool) -> Result<ConnHandle, CallError> {
        let mut slot = self.inner.conn.lock().await;
        if !fresh && let Some(h) = slot.as_ref().filter(|h| h.usable()) {
            return Ok(h.clone());
        }
        let dial = driver::Dial {
            addr: &self.inner.config.addr,
            metadata: &self.inner.config.extra_metadata,
            #[cfg(feature = "tls")]
            tls: self.inner.config.tls.as_ref(),
        };
        // Boxed: the connect's future (TLS's state among it) is large, and
        // every call's future would carry room for it.
        let h = Box::pin(ConnHandle::connect(
            dial,
            self.inner.engine,
            Arc::clone(&self.inner.schemas),
        ))
        .await
        .map_err(|e| {
            CallError::new(
                Code::Unavailable,
                format!("connect to {}: {e}", self.inner.config.addr),
            )
        })?;
        *slot = Some(h.clone());
        Ok(h)
    }

    /// Remembers the tools of a `tools/list` result (the engine already
    /// left out those whose `x-mcp-header` annotations are invalid).
    fn learn_tools(&self, response: &Value) {
        let Some(tools) = response
            .get("result")
            .and_then(|r| r.get("tools"))
            .and_then(Value::as_array)
        else {
            return;
        };
        let Ok(mut schemas) = self.inner.schemas.lock() else {
            return;
        };
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let schema = tool
                .get("inputSchema")
                .map(Value::to_string)
                .unwrap_or_else(|| "{}".to_owned());
            schemas.insert(name.to_owned(), schema.into_bytes());
        }
    }
}

/// The running attempt of a call: its place on the connection.
#[derive(Debug)]
struct Attempt {
    key: u64,
    conn: mpsc::UnboundedSender<Command>,
    events: mailbox::Receiver<CallMsg>,
    /// The connection ended the call: nothing to cancel.
    done: bool,
}

/// A call in flight: [`CallStream::next`] gives its notifications as they
/// arrive, then the response. Dropping it before the end resets the
/// stream with CANCEL.
#[derive(Debug)]
pub struct CallStream {
    channel: Channel,
    tool_call: bool,
    tools_list: bool,
    id: Value,
    /// The request as a tree, parsed from `body` when asked for.
    request: OnceLock<Value>,
    /// The request's JSON text (shared with the connection task).
    body: Arc<[u8]>,
    deadline: Option<tokio::time::Instant>,
    /// The call was sent again on a new connection (once).
    resent: bool,
    attempt: Option<Attempt>,
    finished: bool,
}

impl CallStream {
    /// The request's id.
    pub fn id(&self) -> &Value {
        &self.id
    }

    /// The request as sent.
    pub fn request(&self) -> &Value {
        self.request
            .get_or_init(|| serde_json::from_slice(&self.body).unwrap_or(Value::Null))
    }

    /// Hands the call to the connection (a new one when the current one is
    /// gone). The call may wait there for a free slot; its deadline runs.
    /// With `confirm`, it waits for the connection to take it (or say why
    /// not); without, a refusal comes as the call's first event.
    async fn start(&mut self, confirm: bool) -> Result<(), CallError> {
        if self
            .deadline
            .is_some_and(|d| d <= tokio::time::Instant::now())
        {
            return Err(deadline_exceeded());
        }
        let mut fresh = false;
        loop {
            let conn = self.channel.connection(fresh).await?;
            let key = self.channel.inner.next_key.fetch_add(1, Ordering::Relaxed);
            let (etx, erx) = mailbox::mailbox();
            let (atx, arx) = if confirm {
                let (atx, arx) = oneshot::channel();
                (Some(atx), Some(arx))
            } else {
                (None, None)
            };
            let cmd = Command::Start {
                key,
                body: Arc::clone(&self.body),
                deadline: self.deadline,
                tool_call: self.tool_call,
                binding: self.channel.inner.config.mode.binding(),
                events: etx,
                accepted: atx,
            };
            let answer = if conn.tx.send(cmd).is_ok() {
                match arx {
                    Some(arx) => arx.await.unwrap_or(Err(Refusal::Gone)),
                    None => Ok(()),
                }
            } else {
                Err(Refusal::Gone)
            };
            match answer {
                Ok(()) => {
                    self.attempt = Some(Attempt {
                        key,
                        conn: conn.tx.clone(),
                        events: erx,
                        done: false,
                    });
                    return Ok(());
                }
                // The connection went away: one more try on a new one.
                Err(Refusal::Gone) if !fresh => fresh = true,
                Err(r) => return Err(refusal_error(r)),
            }
        }
    }

    /// The next message: notifications as they arrive, then the response;
    /// `Ok(None)` after the response (or at the end of a notification's
    /// empty stream).
    pub async fn next(&mut self) -> Result<Option<StreamMessage>, CallError> {
        let max = self.channel.inner.config.max_message_bytes;
        let r = match self.next_raw().await? {
            None => return Ok(None),
            Some(RawMessage::Notification(json)) => self
                .parse(&json, max)
                .map(|v| Some(StreamMessage::Notification(v))),
            Some(RawMessage::Response(response)) => self
                .parse(response.text(), max)
                .map(|v| Some(StreamMessage::Response(v))),
        };
        if r.is_err() {
            self.finished = true;
        }
        r
    }

    /// [`CallStream::next`] as the JSON text of each message, as the
    /// client engine validated it (not parsed here).
    pub async fn next_raw(&mut self) -> Result<Option<RawMessage>, CallError> {
        let r = self.next_inner().await;
        if r.is_err() {
            self.finished = true;
        }
        r
    }

    async fn next_inner(&mut self) -> Result<Option<RawMessage>, CallError> {
        loop {
            if self.finished {
                return Ok(None);
            }
            let Some(attempt) = self.attempt.as_mut() else {
                return Ok(None);
            };
            let msg = match self.deadline {
                Some(d) => match tokio::time::timeout_at(d, attempt.events.recv()).await {
                    Ok(m) => m,
                    Err(_) => {
                        self.cancel();
                        return Err(deadline_exceeded());
                    }
                },
                None => attempt.events.recv().await,
            };
            let Some(msg) = msg else {
                attempt.done = true;
                return Err(CallError::new(Code::Unavailable, "connection closed"));
            };
            let max = self.channel.inner.config.max_message_bytes;
            match msg {
                CallMsg::Notification(json) => {
                    self.check_size(&json, max)?;
                    return Ok(Some(RawMessage::Notification(json)));
                }
                CallMsg::Response(json, result) => {
                    attempt.done = true;
                    self.check_size(&json, max)?;
                    if self.tools_list {
                        let value = self.parse(&json, max)?;
                        self.channel.learn_tools(&value);
                    }
                    self.finished = true;
                    return Ok(Some(RawMessage::Response(RawResponse::located(
                        json, result,
                    ))));
                }
                CallMsg::Failed {
                    response,
                    message,
                    diagnostics,
                    www_authenticate,
                } => {
                    attempt.done = true;
                    if !diagnostics.transport {
                        // The server's JSON-RPC error: the response.
                        self.check_size(&response, max)?;
                        self.finished = true;
                        return Ok(Some(RawMessage::Response(RawResponse::located(
                            response, None,
                        ))));
                    }
                    if diagnostics.refused && !diagnostics.retried && !self.resent {
                        // Never processed, and the engine could not send it
                        // again on its connection (a GOAWAY, the end): the
                        // one retry goes to a new connection. A stream the
                        // engine already retried is not sent a third time.
                        self.resent = true;
                        self.attempt = None;
                        self.start(false).await?;
                        continue;
                    }
                    let text = serde_json::from_slice::<String>(&message)
                        .unwrap_or_else(|_| String::from_utf8_lossy(&message).into_owned());
                    let status = diagnostics.grpc_status.unwrap_or(Code::Unknown);
                    let mut e = CallError::new(status, text.clone());
                    e.diagnostics.http_status = diagnostics.http_status;
                    e.diagnostics.grpc_message = Some(text);
                    e.diagnostics.www_authenticate = www_authenticate;
                    return Err(e);
                }
                CallMsg::Ended => {
                    attempt.done = true;
                    self.finished = true;
                    return Ok(None);
                }
                CallMsg::Refused(r) => {
                    attempt.done = true;
                    if matches!(r, Refusal::Gone) && !self.resent {
                        // It waited on a connection that went away.
                        self.resent = true;
                        self.attempt = None;
                        self.start(false).await?;
                        continue;
                    }
                    return Err(refusal_error(r));
                }
            }
        }
    }

    /// A message over the configured maximum ends the call with
    /// RESOURCE_EXHAUSTED.
    fn check_size(&mut self, json: &[u8], max: usize) -> Result<(), CallError> {
        if json.len() > max {
            self.cancel();
            return Err(CallError::new(
                Code::ResourceExhausted,
                format!("a message of {} octets is over {max}", json.len()),
            ));
        }
        Ok(())
    }

    /// A message of the call as JSON; one over the configured maximum
    /// ends the call with RESOURCE_EXHAUSTED.
    fn parse(&mut self, json: &[u8], max: usize) -> Result<Value, CallError> {
        self.check_size(json, max)?;
        serde_json::from_slice(json).map_err(|_| {
            self.cancel();
            CallError::new(Code::Internal, "a message is not JSON")
        })
    }

    /// Waits for the response, skipping notifications.
    pub async fn response(mut self) -> Result<Value, CallError> {
        loop {
            match self.next().await? {
                Some(StreamMessage::Response(r)) => return Ok(r),
                Some(StreamMessage::Notification(_)) => {}
                None => {
                    return Err(CallError::new(
                        Code::Internal,
                        "the call ended without a response",
                    ));
                }
            }
        }
    }

    fn cancel(&mut self) {
        if let Some(a) = self.attempt.take()
            && !a.done
        {
            let _ = a.conn.send(Command::Cancel { key: a.key });
        }
    }
}

impl Drop for CallStream {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The error of a call no connection took.
fn refusal_error(r: Refusal) -> CallError {
    match r {
        Refusal::Gone => CallError::new(Code::Unavailable, "the new connection refused the call"),
        Refusal::Invalid { code, message } => {
            let mut e = CallError::invalid_request(message);
            e.diagnostics.rpc_code = Some(code);
            e
        }
        Refusal::TooLarge { needed } => CallError::new(
            Code::ResourceExhausted,
            format!("the framed request needs {needed} octets, more than max_message_bytes"),
        ),
    }
}

/// Completes a JSON-RPC message as every channel sends it: `jsonrpc`, an
/// `id` for a request without one (from `next_id`), and in `params._meta`
/// the protocol version and `capabilities` where absent. Gives its method
/// and its `_meta` (for what a transport adds).
pub(crate) fn complete_request<'r>(
    request: &'r mut Value,
    next_id: &AtomicU64,
    capabilities: &Value,
) -> Result<(String, &'r mut Map<String, Value>), CallError> {
    let Some(obj) = request.as_object_mut() else {
        return Err(CallError::invalid_request("a request is a JSON object"));
    };
    let method = obj
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| CallError::invalid_request("a request needs a method"))?;
    obj.entry("jsonrpc").or_insert_with(|| json!("2.0"));
    if !method.starts_with("notifications/") && !obj.contains_key("id") {
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        obj.insert("id".into(), json!(id));
    }
    let params = obj.entry("params").or_insert_with(|| json!({}));
    let Some(params) = params.as_object_mut() else {
        return Err(CallError::invalid_request("params is not an object"));
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return Err(CallError::invalid_request("params._meta is not an object"));
    };
    meta.entry(key(KEY_PROTOCOL_VERSION))
        .or_insert_with(|| json!(PROTOCOL_VERSION));
    meta.entry(key(KEY_CLIENT_CAPABILITIES))
        .or_insert_with(|| capabilities.clone());
    Ok((method, meta))
}

/// A `_meta` key of the core's, as a JSON object key.
fn key(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

fn deadline_exceeded() -> CallError {
    CallError::new(Code::DeadlineExceeded, "the request timeout passed")
}
