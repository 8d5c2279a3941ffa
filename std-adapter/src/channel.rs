//! The client side of the tunnel binding on tokio: a [`Channel`] keeps one
//! HTTP/2 connection (a new one when the old one is gone) and runs many
//! concurrent calls of `/mcp.zig.transport.v1.Mcp/Call` on it.
//!
//! Each call carries one JSON-RPC request; its response stream's
//! notifications come out of [`CallStream::next`] as they arrive, then the
//! response. The metadata of a call is built from its body by the core
//! ([`mirror_headers`]), with the `inputSchema` of the tool from the last
//! `tools/list` this channel saw. A JSON-RPC error in the trailers becomes
//! the error response the application would get on any transport; a
//! transport failure is a [`CallError`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcpwire_tokio::CallError> {
//! use mcpwire_tokio::Channel;
//! let channel = Channel::new("127.0.0.1:50051");
//! let tools = channel.request("tools/list", serde_json::json!({})).await?;
//! # Ok(()) }
//! ```

mod driver;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::grpc::{Code, MessageDecoder, PREFIX_LEN, percent, timeout, write_prefix};
use mcpwire_core::h2::{ErrorCode, HeaderBuilder};
use mcpwire_core::mcp::client::{CallOutcome, error_from_trailers, mirror_headers};
use mcpwire_core::mcp::error::{HEADER_MISMATCH, INVALID_REQUEST};
use mcpwire_core::mcp::mirror::Annotations;
use mcpwire_core::mcp::registry::MAX_ANNOTATIONS;
use mcpwire_proto::tunnel::JsonRpcMessage;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use driver::{Command, ConnHandle, Fields, StreamEvent};

/// The method path of the tunnel binding.
pub const PATH: &str = "/mcp.zig.transport.v1.Mcp/Call";
/// The MCP revision every request declares in `params._meta`.
pub const PROTOCOL_VERSION: &str = "2026-07-28";
const KEY_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const KEY_CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
/// The request timeout when none is set (binding: `limits.request_timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_MAX_MESSAGE: usize = 4 << 20;

/// How a channel connects and what every call carries.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// `host:port` of the server (cleartext HTTP/2, prior knowledge).
    pub addr: String,
    /// Static metadata sent with every call, e.g. `authorization`.
    pub extra_metadata: Vec<(String, String)>,
    /// The request timeout; each call sends what is left of it in
    /// `grpc-timeout` (not `subscriptions/listen`).
    pub request_timeout: Duration,
    /// `io.modelcontextprotocol/clientCapabilities` added to requests that
    /// lack it.
    pub client_capabilities: Value,
    /// The largest response message accepted.
    pub max_message_bytes: usize,
}

impl ChannelConfig {
    pub fn new(addr: impl Into<String>) -> Self {
        Self {
            addr: addr.into(),
            extra_metadata: Vec::new(),
            request_timeout: DEFAULT_TIMEOUT,
            client_capabilities: json!({}),
            max_message_bytes: DEFAULT_MAX_MESSAGE,
        }
    }
}

/// A failure of the transport, not a JSON-RPC error: the gRPC status, and
/// what is known of the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNAUTHENTICATED,
    /// PERMISSION_DENIED, INTERNAL (a broken response) or INVALID_ARGUMENT
    /// (a request refused before a byte went out, see `rpc_code`).
    pub status: Code,
    pub message: String,
    pub diagnostics: Diagnostics,
}

/// What the response said about a failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics {
    /// The HTTP status of the response, when one came; 401 and 403 for the
    /// trailers UNAUTHENTICATED and PERMISSION_DENIED.
    pub http_status: Option<u16>,
    /// `grpc-message`, percent-decoded.
    pub grpc_message: Option<String>,
    /// `www-authenticate`, for the auth statuses.
    pub www_authenticate: Option<String>,
    /// The JSON-RPC code of a request refused before a byte went out
    /// (-32600 for an unsafe annotated integer).
    pub rpc_code: Option<i32>,
}

impl CallError {
    fn new(status: Code, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            diagnostics: Diagnostics::default(),
        }
    }

    fn invalid_request(message: &str) -> Self {
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
        Ok(())
    }
}

impl std::error::Error for CallError {}

/// One message of a call's response stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A notification related to the request (progress, listen events).
    Notification(Value),
    /// The JSON-RPC response (a result or an error); the last message.
    Response(Value),
}

/// One connection per channel, many concurrent calls on it. Cheap to clone:
/// clones share the connection and the schema cache.
#[derive(Clone)]
pub struct Channel {
    inner: Arc<Inner>,
}

struct Inner {
    config: ChannelConfig,
    conn: tokio::sync::Mutex<Option<ConnHandle>>,
    /// Each tool's `inputSchema` (JSON text) from the last `tools/list`.
    schemas: Mutex<HashMap<String, Vec<u8>>>,
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
        Self {
            inner: Arc::new(Inner {
                config,
                conn: tokio::sync::Mutex::new(None),
                schemas: Mutex::new(HashMap::new()),
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
        let Some(obj) = request.as_object_mut() else {
            return Err(CallError::invalid_request("a request is a JSON object"));
        };
        let method = obj
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| CallError::invalid_request("a request needs a method"))?;
        obj.entry("jsonrpc").or_insert_with(|| json!("2.0"));
        let notification = method.starts_with("notifications/");
        if !notification && !obj.contains_key("id") {
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
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
        meta.entry(KEY_VERSION)
            .or_insert_with(|| json!(PROTOCOL_VERSION));
        meta.entry(KEY_CAPS)
            .or_insert_with(|| self.inner.config.client_capabilities.clone());
        let listen = method == "subscriptions/listen";
        let deadline = (!listen).then(|| {
            tokio::time::Instant::now() + timeout.unwrap_or(self.inner.config.request_timeout)
        });
        let mut stream = CallStream {
            channel: self.clone(),
            method,
            tool: None,
            id: request.get("id").cloned().unwrap_or(Value::Null),
            body: Vec::new(),
            request,
            deadline,
            retried: false,
            resent: false,
            attempt: None,
            finished: false,
        };
        stream.tool = stream.request["params"]["name"]
            .as_str()
            .filter(|_| stream.method == "tools/call")
            .map(str::to_owned);
        stream.body = serde_json::to_vec(&stream.request)
            .map_err(|e| CallError::invalid_request(&e.to_string()))?;
        stream.start().await?;
        Ok(stream)
    }

    /// The connection to use, connecting when there is none or it is gone.
    async fn connection(&self, fresh: bool) -> Result<ConnHandle, CallError> {
        let mut slot = self.inner.conn.lock().await;
        if !fresh && let Some(h) = slot.as_ref().filter(|h| h.usable()) {
            return Ok(h.clone());
        }
        let h = ConnHandle::connect(&self.inner.config.addr)
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

    /// Remembers the tools of a `tools/list` result, and drops the tools
    /// whose `x-mcp-header` annotations are invalid (with a warning).
    fn learn_tools(&self, response: &mut Value) {
        let Some(tools) = response
            .get_mut("result")
            .and_then(|r| r.get_mut("tools"))
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        let Ok(mut schemas) = self.inner.schemas.lock() else {
            return;
        };
        tools.retain(|tool| {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                return true;
            };
            let schema = tool
                .get("inputSchema")
                .map(Value::to_string)
                .unwrap_or_else(|| "{}".to_owned());
            match Annotations::<'_, MAX_ANNOTATIONS>::collect(schema.as_bytes()) {
                Ok(_) => {
                    schemas.insert(name.to_owned(), schema.into_bytes());
                    true
                }
                Err(e) => {
                    eprintln!(
                        "mcpwire: warning: dropping tool {name:?} from tools/list: {}",
                        e.reason()
                    );
                    schemas.remove(name);
                    false
                }
            }
        });
    }

    /// Reads `tools/list` again (every page), refreshing the cache.
    fn refresh_tools(
        &self,
        deadline: Option<tokio::time::Instant>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), CallError>> + Send + '_>> {
        Box::pin(self.refresh_tools_inner(deadline))
    }

    async fn refresh_tools_inner(
        &self,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(), CallError> {
        let mut cursor: Option<Value> = None;
        for _ in 0..64 {
            let mut params = json!({});
            if let Some(c) = cursor.take() {
                params["cursor"] = c;
            }
            let left = deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
            let response = self
                .call_with_timeout(json!({"method": "tools/list", "params": params}), left)
                .await?
                .response()
                .await?;
            match response["result"].get("nextCursor") {
                Some(c) if !c.is_null() => cursor = Some(c.clone()),
                _ => return Ok(()),
            }
        }
        Ok(())
    }
}

/// The running attempt of a call: its stream on the connection.
#[derive(Debug)]
struct Attempt {
    key: u64,
    conn: mpsc::UnboundedSender<Command>,
    events: mpsc::UnboundedReceiver<StreamEvent>,
    decoder: MessageDecoder,
    buf: Vec<u8>,
    http_status: Option<u16>,
    response: Option<Value>,
    /// Notifications decoded and not yet handed out.
    ready: VecDeque<Message>,
    /// The server did not process the call (REFUSED_STREAM before a
    /// response, or the connection went away before the stream opened).
    refused: bool,
    done: bool,
}

/// A call in flight: [`CallStream::next`] gives its notifications as they
/// arrive, then the response. Dropping it before the end resets the
/// stream with CANCEL.
#[derive(Debug)]
pub struct CallStream {
    channel: Channel,
    method: String,
    tool: Option<String>,
    id: Value,
    request: Value,
    body: Vec<u8>,
    deadline: Option<tokio::time::Instant>,
    retried: bool,
    /// A refused call was sent again (once).
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
        &self.request
    }

    /// Builds the metadata and the message, and hands the call to the
    /// connection (a new one when the current one is gone).
    async fn start(&mut self) -> Result<(), CallError> {
        let schema = self.tool.as_ref().and_then(|t| {
            let schemas = self.channel.inner.schemas.lock().ok()?;
            schemas.get(t).cloned()
        });
        let mut head: Fields = vec![
            (b"content-type".to_vec(), b"application/grpc+proto".to_vec()),
            (b"te".to_vec(), b"trailers".to_vec()),
        ];
        mirror_headers(&self.body, schema.as_deref(), |n, v| {
            head.push((n.to_vec(), v.to_vec()));
        })
        .map_err(|e| {
            let mut err = CallError::invalid_request(e.message);
            err.diagnostics.rpc_code = Some(e.code);
            err
        })?;
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Err(CallError::new(
                    Code::DeadlineExceeded,
                    "the request timeout passed",
                ));
            }
            let mut text = [0u8; 10];
            head.push((
                b"grpc-timeout".to_vec(),
                timeout::format(left, &mut text).to_vec(),
            ));
        }
        let mut sensitive = Vec::new();
        for (n, v) in &self.channel.inner.config.extra_metadata {
            let name = n.to_ascii_lowercase().into_bytes();
            if name == b"authorization" {
                sensitive.push(name.clone());
            }
            head.push((name, v.clone().into_bytes()));
        }
        let json_len = self.body.len();
        let mut proto = [0u8; JsonRpcMessage::MAX_PREFIX_LEN];
        let plen = JsonRpcMessage::encode_prefix(json_len, &mut proto)
            .map_err(|_| CallError::invalid_request("message too large"))?;
        let total = u32::try_from(plen + json_len)
            .map_err(|_| CallError::invalid_request("message too large"))?;
        let mut body = Vec::with_capacity(PREFIX_LEN + plen + json_len);
        body.extend_from_slice(&write_prefix(total));
        body.extend_from_slice(&proto[..plen]);
        body.extend_from_slice(&self.body);

        let mut fresh = false;
        loop {
            let conn = self.channel.connection(fresh).await?;
            let key = self.channel.inner.next_key.fetch_add(1, Ordering::Relaxed);
            let (etx, erx) = mpsc::unbounded_channel();
            let (atx, arx) = oneshot::channel();
            let cmd = Command::Start {
                key,
                head: head.clone(),
                sensitive: sensitive.clone(),
                body: body.clone(),
                events: etx,
                accepted: atx,
            };
            let accepted = conn.tx.send(cmd).is_ok() && arx.await.unwrap_or(false);
            if accepted {
                let max = self.channel.inner.config.max_message_bytes;
                self.attempt = Some(Attempt {
                    key,
                    conn: conn.tx.clone(),
                    events: erx,
                    decoder: MessageDecoder::new(max),
                    buf: vec![0; max],
                    http_status: None,
                    response: None,
                    ready: VecDeque::new(),
                    refused: false,
                    done: false,
                });
                return Ok(());
            }
            if fresh {
                return Err(CallError::new(
                    Code::Unavailable,
                    "the new connection refused the call",
                ));
            }
            // The connection went away: one more try on a new one.
            fresh = true;
        }
    }

    /// The next message: notifications as they arrive, then the response;
    /// `Ok(None)` after the response (or at the end of a notification's
    /// empty stream).
    pub async fn next(&mut self) -> Result<Option<Message>, CallError> {
        loop {
            if self.finished {
                return Ok(None);
            }
            let item = match self.deadline {
                Some(d) => match tokio::time::timeout_at(d, self.next_event()).await {
                    Ok(r) => r,
                    Err(_) => {
                        self.cancel();
                        self.finished = true;
                        return Err(CallError::new(
                            Code::DeadlineExceeded,
                            "the request timeout passed",
                        ));
                    }
                },
                None => self.next_event().await,
            };
            let item = match item {
                Ok(item) => item,
                Err(e) => {
                    let refused = self.attempt.as_ref().is_some_and(|a| a.refused);
                    self.cancel();
                    if refused && !self.resent {
                        // Never processed (GOAWAY, REFUSED_STREAM): send it
                        // once more, on a new connection if this one is gone.
                        self.resent = true;
                        self.start().await?;
                        continue;
                    }
                    self.finished = true;
                    return Err(e);
                }
            };
            match item {
                Some(Message::Response(mut response)) => {
                    self.attempt = None;
                    let code = response["error"]["code"].as_i64();
                    if code == Some(i64::from(HEADER_MISMATCH))
                        && self.method == "tools/call"
                        && !self.retried
                    {
                        // The server's tool differs from our cache: read
                        // tools/list again and send the call once more.
                        self.retried = true;
                        self.channel.refresh_tools(self.deadline).await?;
                        self.start().await?;
                        continue;
                    }
                    if self.method == "tools/list" {
                        self.channel.learn_tools(&mut response);
                    }
                    self.finished = true;
                    return Ok(Some(Message::Response(response)));
                }
                Some(m) => return Ok(Some(m)),
                None => {
                    self.finished = true;
                    self.attempt = None;
                    return Ok(None);
                }
            }
        }
    }

    /// Waits for the response, skipping notifications.
    pub async fn response(mut self) -> Result<Value, CallError> {
        loop {
            match self.next().await? {
                Some(Message::Response(r)) => return Ok(r),
                Some(Message::Notification(_)) => {}
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

    /// Reads the stream's events until a message or its end.
    async fn next_event(&mut self) -> Result<Option<Message>, CallError> {
        let id = self.id.clone();
        let Some(a) = self.attempt.as_mut() else {
            return Ok(None);
        };
        loop {
            if let Some(m) = a.ready.pop_front() {
                return Ok(Some(m));
            }
            let Some(event) = a.events.recv().await else {
                a.done = true;
                return Err(CallError::new(Code::Unavailable, "connection closed"));
            };
            match event {
                StreamEvent::Headers { fields, end_stream } => {
                    let first = a.http_status.is_none();
                    if first {
                        a.http_status = field(&fields, b":status")
                            .and_then(|s| std::str::from_utf8(s).ok())
                            .and_then(|s| s.parse().ok());
                    }
                    if first && a.http_status != Some(200) {
                        a.done = true;
                        let mut e = CallError::new(
                            Code::from_http_status(a.http_status.unwrap_or(0)),
                            "the response's HTTP status is not 200",
                        );
                        e.diagnostics.http_status = a.http_status;
                        return Err(e);
                    }
                    if end_stream {
                        a.done = true;
                        return a.trailers(&fields, &id).map(|r| r.map(Message::Response));
                    }
                }
                StreamEvent::Data(bytes) => {
                    let mut rest = &bytes[..];
                    while !rest.is_empty() {
                        let (used, done) = a.decoder.feed(rest, &mut a.buf).map_err(|e| {
                            a.done = true;
                            CallError::new(Code::Internal, e.message())
                        })?;
                        rest = &rest[used..];
                        if let Some(len) = done {
                            let json = JsonRpcMessage::decode(&a.buf[..len]).map_err(|_| {
                                CallError::new(Code::Internal, "malformed JsonRpcMessage")
                            })?;
                            let value: Value = serde_json::from_slice(json).map_err(|_| {
                                CallError::new(Code::Internal, "a message is not JSON")
                            })?;
                            if value.get("method").is_some() && value.get("id").is_none() {
                                // Notifications are handed out as they come.
                                a.ready.push_back(Message::Notification(value));
                            } else {
                                a.response = Some(value);
                            }
                        }
                    }
                    if let Some(m) = a.ready.pop_front() {
                        return Ok(Some(m));
                    }
                }
                StreamEvent::Reset { code, remote } => {
                    a.done = true;
                    a.refused = code == ErrorCode::REFUSED_STREAM && a.http_status.is_none();
                    let status = match code {
                        ErrorCode::CANCEL => Code::Cancelled,
                        ErrorCode::REFUSED_STREAM => Code::Unavailable,
                        ErrorCode::ENHANCE_YOUR_CALM => Code::ResourceExhausted,
                        ErrorCode::INADEQUATE_SECURITY => Code::PermissionDenied,
                        _ => Code::Internal,
                    };
                    let mut e = CallError::new(
                        status,
                        format!(
                            "stream reset with {code} by the {}",
                            if remote { "server" } else { "client" }
                        ),
                    );
                    e.diagnostics.http_status = a.http_status;
                    return Err(e);
                }
                StreamEvent::Closed => {
                    a.done = true;
                    // Trailers come before Closed; Closed alone means the
                    // stream ended with DATA, without trailers.
                    return Err(CallError::new(
                        Code::Internal,
                        "the response ended without trailers",
                    ));
                }
                StreamEvent::Refused => {
                    a.done = true;
                    a.refused = true;
                    return Err(CallError::new(
                        Code::Unavailable,
                        "the connection went away before the call was sent",
                    ));
                }
                StreamEvent::Failed(why) => {
                    a.done = true;
                    let mut e = CallError::new(Code::Unavailable, why);
                    e.diagnostics.http_status = a.http_status;
                    return Err(e);
                }
            }
        }
    }
}

impl Attempt {
    /// The end of the stream: the response, or the error the trailers hold.
    fn trailers(&mut self, fields: &Fields, id: &Value) -> Result<Option<Value>, CallError> {
        let status = field(fields, b"grpc-status").and_then(Code::parse);
        if status == Some(Code::Ok) {
            if !self.decoder.is_idle() {
                return Err(CallError::new(
                    Code::Internal,
                    "stream ended inside a message",
                ));
            }
            return Ok(self.response.take());
        }
        if let Some(response) = self.response.take() {
            // A complete response came before the failure: keep it.
            return Ok(Some(response));
        }
        let pairs: Vec<(&[u8], &[u8])> = fields
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
            .collect();
        let mut builder = Box::new(HeaderBuilder::<16384>::new());
        let list = builder.build(&pairs);
        let id_text = serde_json::to_vec(id).unwrap_or_else(|_| b"null".to_vec());
        let mut out = vec![0u8; 32 << 10];
        let (outcome, text) = error_from_trailers(list, &id_text, &mut out);
        match outcome {
            CallOutcome::RpcError => {
                let value = text
                    .and_then(|t| serde_json::from_slice(t).ok())
                    .ok_or_else(|| CallError::new(Code::Internal, "unreadable error trailers"))?;
                Ok(Some(value))
            }
            CallOutcome::Transport {
                status,
                http_status,
            } => {
                let message = field(fields, b"grpc-message").map(|m| {
                    let mut buf = vec![0u8; m.len()];
                    let n = percent::decode(m, &mut buf).unwrap_or(0);
                    String::from_utf8_lossy(&buf[..n]).into_owned()
                });
                let mut e = CallError::new(
                    status,
                    message.clone().unwrap_or_else(|| status.name().to_owned()),
                );
                e.diagnostics.http_status = Some(if http_status == 200 {
                    self.http_status.unwrap_or(200)
                } else {
                    http_status
                });
                e.diagnostics.grpc_message = message;
                e.diagnostics.www_authenticate = field(fields, b"www-authenticate")
                    .map(|v| String::from_utf8_lossy(v).into_owned());
                Err(e)
            }
        }
    }
}

impl Drop for CallStream {
    fn drop(&mut self) {
        self.cancel();
    }
}

fn field<'a>(fields: &'a Fields, name: &[u8]) -> Option<&'a [u8]> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_slice())
}
