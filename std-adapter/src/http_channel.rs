//! The modern Streamable HTTP client on tokio (MCP 2026-07-28 §5): an
//! [`HttpChannel`] `POST`s each JSON-RPC message to one `http://` or
//! `https://` MCP endpoint over HTTP/1.1 or HTTP/2 and reads its answer, a
//! JSON body or an event stream of the call's notifications and then its
//! response.
//!
//! The exchange's rules are the core's sans-IO pieces
//! ([`mcpwire_core::mcp::client::http`]): the request with `Accept` for
//! both types, the mirrored `MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name` and `Mcp-Param-*` (from the tool's `inputSchema` of the last
//! `tools/list`), the bearer token; the judgement of the answer (a stream
//! that ends before the response, an HTML page, a JSON-RPC request on the
//! stream, an event over [`HttpChannelConfig::max_message_bytes`]: each a
//! [`CallError`] that says so, never an invented result). A `tools/call`
//! refused with -32020 reads `tools/list` again and is sent once more.
//! Tools whose `x-mcp-header` annotations are invalid are left out of the
//! `tools/list` results the application gets (with a warning on stderr).
//!
//! TLS (feature `tls`): rustls with the trust options of the gRPC
//! [`Channel`](crate::Channel) ([`HttpChannelConfig::tls`]: the platform's
//! roots by default, a CA file, a server name to verify). HTTP/2
//! ([`HttpChannelConfig::http2`], [`Http2Mode`]): over TLS when the server
//! selects ALPN `h2` (the default), or always (`h2c` with prior knowledge
//! over `http://`); then every exchange is a stream of one shared
//! connection driven by the core's sans-IO [`h2::Connection`](mcpwire_core::h2::Connection),
//! judged by the same rules; a dropped call resets its stream with CANCEL,
//! and a stream the server refused unprocessed is sent again.
//!
//! HTTP/1.1 connections: a bounded pool of keep-alive connections
//! ([`HttpChannelConfig::pool_size`]); each exchange has a connection of
//! its own for its whole answer, so many calls run at once and more wait
//! for a free one. A request sent on a pooled connection the server had
//! closed is sent once more on a new one, only when no octet of an answer
//! came. Dropping an [`HttpCall`] before its response closes its
//! connection (the server sees the cancellation, §5.7); so does its
//! timeout. 401 and 403 are errors carrying the `WWW-Authenticate` value.
//!
//! This channel speaks the modern era only: no probe, no fallback to the
//! older shapes (a [`StdioChannel`](crate::StdioChannel) with
//! [`StdioChannelConfig::legacy_http`](crate::StdioChannelConfig::legacy_http)
//! reaches those).
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcpwire_tokio::CallError> {
//! use mcpwire_tokio::HttpChannel;
//! use serde_json::json;
//! let channel = HttpChannel::new("http://127.0.0.1:8080/mcp")?;
//! let result = channel.call_tool("echo", json!({"text": "hi"})).await?;
//! println!("{}", result.text());
//! # Ok(()) }
//! ```

mod answer_buf;
mod conn;
mod h2;
mod typed;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::http1::head::EMPTY_HEADER;
use mcpwire_core::http1::{ClientConnection, MAX_HEADERS, MediaType, ResponseEvent};
use mcpwire_core::mcp::client::http::{
    Endpoint, HttpFailure, Judgement, RequestError, ResponseReader, ToolSchema, judge_schema,
    relist_and_retry, write_post,
};
use mcpwire_core::mcp::meta::KEY_PROTOCOL_VERSION;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

use crate::client::{CallError, StreamMessage};
use crate::stdio_client::http_link::Target;
pub use conn::Http2Mode;
use conn::{Dialed, Dialer, Stream};

/// The request timeout when none is set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Connections open at once when none is set.
pub const DEFAULT_POOL_SIZE: usize = 8;
const DEFAULT_MAX_MESSAGE: usize = 4 << 20;
/// The `_meta` key of the client's name and version.
const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// How long the rest of an answer is read after its response, to keep the
/// connection for the next exchange; past it the connection is closed.
const DRAIN_WAIT: Duration = Duration::from_secs(1);
/// Octets read from the socket at a time.
const READ_CHUNK: usize = 16 << 10;

/// Where an [`HttpChannel`] sends and what every request carries.
#[derive(Debug, Clone)]
pub struct HttpChannelConfig {
    /// The MCP endpoint: `http://host:port/path`, or `https://...`.
    pub url: String,
    /// For `https://`: the roots to trust and the name to verify
    /// ([`ClientTlsConfig::with_pem_roots`](crate::ClientTlsConfig::with_pem_roots),
    /// [`server_name`](crate::ClientTlsConfig::server_name)); `None`
    /// trusts the platform's store. Its ALPN list is replaced by the
    /// protocols this channel speaks.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::ClientTlsConfig>,
    /// When HTTP/2 is spoken (one connection, each `POST` a stream on
    /// it). Default [`Http2Mode::Alpn`]: over TLS if the server selects
    /// `h2`.
    pub http2: Http2Mode,
    /// A bearer token sent in `Authorization` on every request.
    pub bearer: Option<String>,
    /// A call's timeout when it names none (not `subscriptions/listen`).
    pub timeout: Duration,
    /// The largest request, and the largest message of an answer (a JSON
    /// body, or one event's data): a larger request is refused before it
    /// goes out, a larger answer fails its call, both with
    /// RESOURCE_EXHAUSTED. Default 4 MiB.
    pub max_message_bytes: usize,
    /// HTTP/1.1 connections open at once (each carries one exchange at a
    /// time); more calls wait for a free one. Default 8. An HTTP/2
    /// connection carries every call as a stream and needs no pool.
    pub pool_size: usize,
    /// `io.modelcontextprotocol/clientCapabilities` added to requests that
    /// lack it.
    pub client_capabilities: Value,
    /// `io.modelcontextprotocol/clientInfo` added to requests that lack it
    /// (a SHOULD of the 2026-07-28 `_meta`); `None` sends none. Default:
    /// `{"name": "mcpwire", "version": <this crate's>}`.
    pub client_info: Option<Value>,
}

impl HttpChannelConfig {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            #[cfg(feature = "tls")]
            tls: None,
            http2: Http2Mode::default(),
            bearer: None,
            timeout: DEFAULT_TIMEOUT,
            max_message_bytes: DEFAULT_MAX_MESSAGE,
            pool_size: DEFAULT_POOL_SIZE,
            client_capabilities: json!({}),
            client_info: Some(json!({"name": "mcpwire", "version": env!("CARGO_PKG_VERSION")})),
        }
    }
}

/// What is known of a call's HTTP exchange (in
/// [`CallDiagnostics::http`](crate::CallDiagnostics::http) of its error,
/// and from [`HttpCall::facts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpFacts {
    pub url: String,
    /// The status of the last answer, when one came.
    pub status: Option<u16>,
    /// Its `Content-Type`, as sent.
    pub content_type: Option<String>,
    /// Always `"modern"`: the channel speaks 2026-07-28 Streamable HTTP.
    pub era: &'static str,
    /// `"HTTP/1.1"` or `"HTTP/2"`: the version of the last attempt's
    /// connection, once it has one.
    pub http_version: Option<&'static str>,
    /// The protocol version the request declared.
    pub requested_version: String,
    /// The version in use (the modern era: the one requested).
    pub version: String,
    /// `WWW-Authenticate` of a 401 or 403.
    pub www_authenticate: Option<String>,
    /// The server refused the call's headers (-32020): `tools/list` was
    /// read again and the call sent once more.
    pub retried_after_32020: bool,
}

impl fmt::Display for HttpFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "era {}, version {}, requested {}, url {}",
            self.era, self.version, self.requested_version, self.url
        )?;
        if let Some(s) = self.status {
            write!(f, ", HTTP {s}")?;
        }
        if let Some(v) = self.http_version {
            write!(f, " over {v}")?;
        }
        if let Some(c) = &self.content_type {
            write!(f, ", content type {c}")?;
        }
        if self.retried_after_32020 {
            write!(f, ", sent again after -32020")?;
        }
        Ok(())
    }
}

/// A Streamable HTTP endpoint and the calls to it. Cheap to clone: clones
/// share the connections and the schema cache.
#[derive(Clone)]
pub struct HttpChannel {
    inner: Arc<Inner>,
}

struct Inner {
    config: HttpChannelConfig,
    target: Target,
    /// How connections are made (TCP, TLS).
    dialer: Dialer,
    /// Connections not in use, to be used again.
    idle: Mutex<Vec<Stream>>,
    /// The HTTP/2 connection every call shares, once one is open.
    h2: Mutex<Option<Arc<h2::H2Handle>>>,
    /// Held while a connection that may turn out HTTP/2 is made, so that
    /// calls at once make one.
    h2_dial: tokio::sync::Mutex<()>,
    /// The server chose HTTP/1.1 in ALPN: later dials go at once.
    chose_http1: std::sync::atomic::AtomicBool,
    /// One permit per connection that may be open.
    slots: Arc<Semaphore>,
    /// The `inputSchema` of each tool with `x-mcp-header` annotations,
    /// from the last `tools/list`.
    schemas: Mutex<HashMap<String, Vec<u8>>>,
    next_id: AtomicU64,
    /// The buffers answers are read into, kept between exchanges.
    bufs: answer_buf::BufPool,
}

impl fmt::Debug for HttpChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpChannel")
            .field("url", &self.inner.config.url)
            .finish_non_exhaustive()
    }
}

impl HttpChannel {
    /// A channel to `url` with the default configuration; it connects at
    /// the first call.
    pub fn new(url: impl Into<String>) -> Result<Self, CallError> {
        Self::with_config(HttpChannelConfig::new(url))
    }

    /// A channel with `config`; an error when the URL is not `http://` or
    /// `https://`.
    pub fn with_config(config: HttpChannelConfig) -> Result<Self, CallError> {
        let dialer = Dialer::new(
            &config.url,
            config.http2,
            #[cfg(feature = "tls")]
            config.tls.as_ref(),
        )?;
        let target = dialer.dest.target.clone();
        let slots = Arc::new(Semaphore::new(config.pool_size.max(1)));
        let bufs = answer_buf::BufPool::new(config.max_message_bytes, config.pool_size.max(1));
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                target,
                dialer,
                idle: Mutex::new(Vec::new()),
                h2: Mutex::new(None),
                h2_dial: tokio::sync::Mutex::new(()),
                chose_http1: std::sync::atomic::AtomicBool::new(false),
                slots,
                schemas: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
                bufs,
            }),
        })
    }

    pub fn config(&self) -> &HttpChannelConfig {
        &self.inner.config
    }

    /// The cached `inputSchema` of `tool` (only tools with `x-mcp-header`
    /// annotations are cached), from the last `tools/list`.
    pub fn cached_schema(&self, tool: &str) -> Option<Value> {
        let schemas = self.inner.schemas.lock().ok()?;
        serde_json::from_slice(schemas.get(tool)?).ok()
    }

    /// HTTP/1.1 connections open and idle now.
    pub fn idle_connections(&self) -> usize {
        self.inner.idle.lock().map_or(0, |i| i.len())
    }

    /// Sends `method` with `params` (the channel adds `id` and `_meta`) and
    /// waits for the response (a result or the server's JSON-RPC error),
    /// skipping notifications.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.call(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await?
            .response()
            .await
    }

    /// Starts a call of one JSON-RPC message (an `id` is added to a
    /// request without one, and `params._meta` gets the protocol version
    /// and the client capabilities when absent). Its timeout is the
    /// channel's.
    pub async fn call(&self, request: Value) -> Result<HttpCall, CallError> {
        self.call_with_timeout(request, None).await
    }

    /// [`HttpChannel::call`] with its own timeout.
    pub async fn call_with_timeout(
        &self,
        mut request: Value,
        timeout: Option<Duration>,
    ) -> Result<HttpCall, CallError> {
        let (method, meta) = crate::client::error::complete_request(
            &mut request,
            &self.inner.next_id,
            &self.inner.config.client_capabilities,
        )?;
        let version = meta
            .get(&key(KEY_PROTOCOL_VERSION))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(info) = &self.inner.config.client_info {
            meta.entry(CLIENT_INFO).or_insert_with(|| info.clone());
        }
        let timeout = match (timeout, method == "subscriptions/listen") {
            (None, true) => None,
            (t, _) => Some(t.unwrap_or(self.inner.config.timeout)),
        };
        let body =
            serde_json::to_vec(&request).map_err(|e| CallError::invalid_request(&e.to_string()))?;
        let max = self.inner.config.max_message_bytes;
        if body.len() > max {
            return Err(CallError::new(
                Code::ResourceExhausted,
                format!(
                    "a request of {} octets is over max_message_bytes ({max})",
                    body.len()
                ),
            ));
        }
        let facts = Arc::new(Mutex::new(HttpFacts {
            url: self.inner.config.url.clone(),
            era: "modern",
            requested_version: version.clone(),
            version,
            ..HttpFacts::default()
        }));
        let tool = (method == "tools/call")
            .then(|| request.pointer("/params/name").and_then(Value::as_str))
            .flatten()
            .map(str::to_owned);
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run_call(
            Arc::clone(&self.inner),
            body,
            tool,
            method == "tools/list",
            Arc::clone(&facts),
            tx,
        ));
        Ok(HttpCall {
            id: request.get("id").cloned().unwrap_or(Value::Null),
            deadline: timeout.map(|t| tokio::time::Instant::now() + t),
            events: rx,
            task,
            facts,
            finished: false,
        })
    }
}

/// What a call's task tells its [`HttpCall`].
enum Out {
    Notification(Vec<u8>),
    Response(Value),
    /// A notification was accepted (202): the call ends without a message.
    Accepted,
    Failed(CallError),
}

/// A call in flight: [`HttpCall::next`] gives its notifications as they
/// arrive, then the response. Dropping it before the end closes its
/// connection, which cancels the request (§5.7).
#[derive(Debug)]
pub struct HttpCall {
    id: Value,
    deadline: Option<tokio::time::Instant>,
    events: mpsc::UnboundedReceiver<Out>,
    task: JoinHandle<()>,
    facts: Arc<Mutex<HttpFacts>>,
    finished: bool,
}

impl fmt::Debug for Out {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Out::Notification(_) => f.write_str("Notification"),
            Out::Response(_) => f.write_str("Response"),
            Out::Accepted => f.write_str("Accepted"),
            Out::Failed(e) => write!(f, "Failed({e})"),
        }
    }
}

impl HttpCall {
    /// The request's id (`null` for a notification).
    pub fn id(&self) -> &Value {
        &self.id
    }

    /// What is known of the exchange so far.
    pub fn facts(&self) -> HttpFacts {
        self.facts.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// The next message: notifications as they arrive, then the response
    /// (a result or the server's JSON-RPC error); `Ok(None)` after it (at
    /// once for an accepted notification). A failure of the transport or
    /// of the answer is an `Err`, and the call ends.
    pub async fn next(&mut self) -> Result<Option<StreamMessage>, CallError> {
        if self.finished {
            return Ok(None);
        }
        let out = match self.deadline {
            Some(d) => match tokio::time::timeout_at(d, self.events.recv()).await {
                Ok(m) => m,
                Err(_) => {
                    self.cancel();
                    return Err(self.error(Code::DeadlineExceeded, "the request timeout passed"));
                }
            },
            None => self.events.recv().await,
        };
        match out {
            Some(Out::Notification(n)) => match serde_json::from_slice(&n) {
                Ok(v) => Ok(Some(StreamMessage::Notification(v))),
                Err(_) => {
                    self.cancel();
                    Err(self.error(Code::Internal, "a notification is not JSON"))
                }
            },
            Some(Out::Response(r)) => {
                self.finished = true;
                Ok(Some(StreamMessage::Response(r)))
            }
            Some(Out::Accepted) => {
                self.finished = true;
                Ok(None)
            }
            Some(Out::Failed(e)) => {
                self.finished = true;
                Err(e)
            }
            None => {
                self.finished = true;
                Err(self.error(Code::Internal, "the call ended without a response"))
            }
        }
    }

    /// Waits for the response, skipping notifications.
    pub async fn response(mut self) -> Result<Value, CallError> {
        loop {
            match self.next().await? {
                Some(StreamMessage::Response(r)) => return Ok(r),
                Some(StreamMessage::Notification(_)) => {}
                None => {
                    return Err(self.error(Code::Internal, "the call ended without a response"));
                }
            }
        }
    }

    fn error(&self, status: Code, message: &str) -> CallError {
        let mut e = CallError::new(status, message);
        e.diagnostics.http = Some(Box::new(self.facts()));
        e.diagnostics.http_status = self.facts().status;
        e
    }

    /// Ends the call: its task (and with it its connection) goes.
    fn cancel(&mut self) {
        self.finished = true;
        self.task.abort();
    }
}

impl Drop for HttpCall {
    fn drop(&mut self) {
        if !self.finished {
            self.task.abort();
        }
    }
}

/// One call: its exchange, and after a -32020 to a `tools/call` the
/// re-list and the one retry.
async fn run_call(
    inner: Arc<Inner>,
    body: Vec<u8>,
    tool: Option<String>,
    tools_list: bool,
    facts: Arc<Mutex<HttpFacts>>,
    tx: mpsc::UnboundedSender<Out>,
) {
    let mut retried = false;
    loop {
        let schema = tool
            .as_ref()
            .and_then(|t| inner.schemas.lock().ok()?.get(t).cloned());
        let mut on_note = |n: Vec<u8>| {
            let _ = tx.send(Out::Notification(n));
        };
        let answer = exchange(&inner, &body, schema.as_deref(), &facts, &mut on_note).await;
        let out = match answer {
            Ok(None) => Out::Accepted,
            Ok(Some((response, code))) => {
                if relist_and_retry(&body, code, retried) {
                    retried = true;
                    if let Ok(mut f) = facts.lock() {
                        f.retried_after_32020 = true;
                    }
                    // A re-list that fails leaves the -32020 as the answer.
                    if relist(&inner, &body).await.is_ok() {
                        continue;
                    }
                }
                match serde_json::from_slice::<Value>(&response) {
                    Ok(mut value) => {
                        if tools_list {
                            learn_tools(&inner, &mut value, first_page(&body));
                        }
                        Out::Response(value)
                    }
                    Err(_) => Out::Failed(with_facts(
                        CallError::new(Code::Internal, "the response is not JSON"),
                        &facts,
                    )),
                }
            }
            Err(e) => Out::Failed(with_facts(e, &facts)),
        };
        let _ = tx.send(out);
        return;
    }
}

/// Whether the `tools/list` request `body` asks for the first page.
fn first_page(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.pointer("/params/cursor").cloned())
        .is_none()
}

/// Reads every page of `tools/list` again (with the `_meta` of the call
/// `call`), learning the schemas.
async fn relist(inner: &Arc<Inner>, call: &[u8]) -> Result<(), CallError> {
    let meta = serde_json::from_slice::<Value>(call)
        .ok()
        .and_then(|v| v.pointer("/params/_meta").cloned())
        .unwrap_or_else(|| json!({}));
    let mut cursor: Option<Value> = None;
    for page in 0..crate::client::MAX_LIST_PAGES {
        let mut params = json!({"_meta": meta});
        if let Some(c) = cursor.take() {
            params["cursor"] = c;
        }
        let id = format!("mcpwire-relist-{page}");
        let body = serde_json::to_vec(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params
        }))
        .map_err(|e| CallError::new(Code::Internal, e.to_string()))?;
        let facts = Mutex::new(HttpFacts::default());
        let Some((response, None)) = exchange(inner, &body, None, &facts, &mut |_| {}).await?
        else {
            return Err(CallError::new(Code::Internal, "tools/list failed"));
        };
        let mut value: Value = serde_json::from_slice(&response)
            .map_err(|_| CallError::new(Code::Internal, "tools/list: not JSON"))?;
        learn_tools(inner, &mut value, page == 0);
        match value.pointer("/result/nextCursor") {
            Some(c @ Value::String(_)) => cursor = Some(c.clone()),
            _ => return Ok(()),
        }
    }
    Ok(())
}

/// Learns the annotated schemas of a `tools/list` response (forgetting
/// the old ones at the first page) and leaves out the tools whose
/// annotations are invalid (§5.5.1), with a warning.
fn learn_tools(inner: &Inner, response: &mut Value, first: bool) {
    let Some(tools) = response
        .pointer_mut("/result/tools")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let Ok(mut schemas) = inner.schemas.lock() else {
        return;
    };
    if first {
        schemas.clear();
    }
    tools.retain(|tool| {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        let schema = tool
            .get("inputSchema")
            .map(Value::to_string)
            .unwrap_or_else(|| "{}".to_owned());
        match judge_schema(schema.as_bytes()) {
            ToolSchema::Annotated => {
                schemas.insert(name.to_owned(), schema.into_bytes());
                true
            }
            ToolSchema::Plain => {
                schemas.remove(name);
                true
            }
            ToolSchema::Invalid(e) => {
                eprintln!("mcpwire: tool {name:?} left out: {}", e.reason());
                schemas.remove(name);
                false
            }
        }
    });
}

fn with_facts(mut e: CallError, facts: &Mutex<HttpFacts>) -> CallError {
    if let Ok(f) = facts.lock() {
        if e.diagnostics.http_status.is_none() {
            e.diagnostics.http_status = f.status;
        }
        if e.diagnostics.www_authenticate.is_none() {
            e.diagnostics.www_authenticate = f.www_authenticate.clone();
        }
        e.diagnostics.http = Some(Box::new(f.clone()));
    }
    e
}

/// The shared HTTP/2 connection, while it takes streams.
fn live_h2(inner: &Inner) -> Option<Arc<h2::H2Handle>> {
    let mut h2 = inner.h2.lock().ok()?;
    match h2.as_ref() {
        Some(h) if h.usable() => Some(Arc::clone(h)),
        Some(_) => {
            *h2 = None;
            None
        }
        None => None,
    }
}

/// What [`checkout`] found.
enum Checked {
    /// An HTTP/1.1 connection for one exchange: an idle one (`reused`),
    /// or a new one.
    Http1(Stream, bool),
    /// The shared HTTP/2 connection.
    H2(Arc<h2::H2Handle>),
}

/// A connection for one exchange.
async fn checkout(inner: &Inner, fresh: bool) -> Result<Checked, CallError> {
    if !fresh && let Some(s) = inner.idle.lock().ok().and_then(|mut i| i.pop()) {
        return Ok(Checked::Http1(s, true));
    }
    // One dial at a time while the answer may be HTTP/2.
    let may_be_h2 = inner.dialer.may_speak_h2() && !inner.chose_http1.load(Ordering::Relaxed);
    let _dialing = match may_be_h2 {
        true => Some(inner.h2_dial.lock().await),
        false => None,
    };
    if let Some(h) = live_h2(inner) {
        return Ok(Checked::H2(h));
    }
    match inner.dialer.dial().await? {
        Dialed::Http1(s) => {
            if may_be_h2 {
                inner.chose_http1.store(true, Ordering::Relaxed);
            }
            Ok(Checked::Http1(s, false))
        }
        Dialed::H2(s) => {
            let h = Arc::new(h2::H2Handle::spawn(s));
            if let Ok(mut slot) = inner.h2.lock() {
                *slot = Some(Arc::clone(&h));
            }
            Ok(Checked::H2(h))
        }
    }
}

/// Times a request not processed over HTTP/2 is sent again.
const H2_RESENDS: usize = 3;

/// The answer of an exchange: the final message and its JSON-RPC error
/// code (none for a result); `None` for an accepted notification.
type Answer = Option<(Vec<u8>, Option<i64>)>;

/// How one attempt of an exchange ended.
enum Attempt {
    /// The answer: the final message (none for an accepted notification).
    Done(Answer),
    /// A reused connection was closed before any octet of an answer came:
    /// send again on a new one.
    Stale,
}

/// `POST`s `body` (one JSON-RPC message) and reads its answer: the final
/// message and its error code (none for 202), with each notification
/// handed to `on_note` as it comes.
async fn exchange(
    inner: &Inner,
    body: &[u8],
    schema: Option<&[u8]>,
    facts: &Mutex<HttpFacts>,
    on_note: &mut (dyn FnMut(Vec<u8>) + Send),
) -> Result<Answer, CallError> {
    let endpoint = Endpoint {
        authority: &inner.target.authority,
        target: &inner.target.path,
        bearer: inner.config.bearer.as_deref(),
    };
    let mut req = vec![0u8; body.len() + 2048];
    let n = loop {
        match write_post(&mut req, &endpoint, body, schema) {
            Ok(n) => break n,
            Err(RequestError::Overflow { needed }) if needed > req.len() => req.resize(needed, 0),
            Err(RequestError::Overflow { .. }) => {
                return Err(CallError::new(
                    Code::Internal,
                    "the request cannot be written",
                ));
            }
            Err(RequestError::Invalid(e)) => {
                let mut err = CallError::invalid_request(e.message);
                err.diagnostics.rpc_code = Some(e.code);
                return Err(err);
            }
            Err(RequestError::BadEndpoint(why)) => {
                return Err(CallError::new(Code::InvalidArgument, why));
            }
        }
    };
    let request = &req[..n];
    let mut fresh = false;
    let mut resends = 0;
    loop {
        let mut shared = live_h2(inner);
        let mut _permit = None;
        if shared.is_none() {
            _permit = Some(
                inner
                    .slots
                    .acquire()
                    .await
                    .map_err(|_| CallError::new(Code::Unavailable, "the channel is closed"))?,
            );
            match checkout(inner, fresh).await? {
                Checked::Http1(stream, reused) => {
                    match attempt(inner, stream, reused, request, body, facts, on_note).await? {
                        Attempt::Done(answer) => return Ok(answer),
                        Attempt::Stale => fresh = true,
                    }
                    continue;
                }
                Checked::H2(h) => {
                    // Streams need no slot of the pool.
                    _permit = None;
                    shared = Some(h);
                }
            }
        }
        let Some(h) = shared else { continue };
        match h2::attempt(inner, &h, body, schema, facts, on_note).await? {
            Attempt::Done(answer) => return Ok(answer),
            Attempt::Stale if resends < H2_RESENDS => resends += 1,
            Attempt::Stale => {
                return Err(CallError::new(
                    Code::Unavailable,
                    "the server refused the HTTP/2 stream every time",
                ));
            }
        }
    }
}

/// One attempt of an exchange on `stream`.
async fn attempt(
    inner: &Inner,
    mut stream: Stream,
    reused: bool,
    request: &[u8],
    body: &[u8],
    facts: &Mutex<HttpFacts>,
    on_note: &mut (dyn FnMut(Vec<u8>) + Send),
) -> Result<Attempt, CallError> {
    let unavailable = |what: String| CallError::new(Code::Unavailable, what);
    if let Ok(mut f) = facts.lock() {
        f.http_version = Some("HTTP/1.1");
    }
    if let Err(e) = stream.write_all(request).await {
        if reused {
            return Ok(Attempt::Stale);
        }
        return Err(unavailable(format!("sending the request: {e}")));
    }
    let mut reader = ResponseReader::new(body).map_err(|e| {
        let mut err = CallError::invalid_request(e.message);
        err.diagnostics.rpc_code = Some(e.code);
        err
    })?;
    let mut conn = ClientConnection::<16384>::new();
    conn.start("POST")
        .map_err(|_| CallError::new(Code::Internal, "the connection cannot start a request"))?;
    let mut buf = inner.bufs.empty();
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut got_any = false;
    let mut answer: Option<Answer> = None;
    let mut drain_until: Option<tokio::time::Instant> = None;
    loop {
        // Every event of what is pending.
        loop {
            let r = conn.recv(&pending);
            let Some(event) = r.event.clone() else {
                pending.drain(..r.consumed);
                if r.consumed == 0 {
                    break;
                }
                continue;
            };
            let mut judgement = None;
            let mut keep = None;
            match event {
                ResponseEvent::Head { status } => {
                    let mut fields = [EMPTY_HEADER; MAX_HEADERS];
                    let head = conn.head(&mut fields).ok_or_else(|| {
                        CallError::new(Code::Internal, "a response head that cannot be read")
                    })?;
                    let media = head.content_type();
                    if let Ok(mut f) = facts.lock() {
                        f.status = Some(status);
                        f.content_type = head
                            .header(b"content-type")
                            .map(|v| String::from_utf8_lossy(v).into_owned());
                        f.www_authenticate = head
                            .header(b"www-authenticate")
                            .map(|v| String::from_utf8_lossy(v).into_owned());
                    }
                    // Zeroed by the allocator: pages are touched only as
                    // far as the answer goes.
                    buf.size_for(
                        media == MediaType::Json || media == MediaType::EventStream,
                        4096,
                    );
                    judgement = reader.on_head(status, media);
                }
                ResponseEvent::Data(range) => {
                    let mut data = pending.get(range).unwrap_or_default();
                    while !data.is_empty() && answer.is_none() {
                        let step = reader.on_body(data, &mut buf);
                        data = data.get(step.consumed..).unwrap_or_default();
                        match step.judgement {
                            Some(Judgement::Notification { len }) => {
                                buf.judged(len);
                                on_note(buf.get(..len).unwrap_or_default().to_vec());
                            }
                            Some(j) => {
                                judgement = Some(j);
                                break;
                            }
                            None => {}
                        }
                    }
                }
                ResponseEvent::End { keep_alive } => {
                    judgement = reader.on_end(&buf);
                    keep = Some(keep_alive);
                }
                ResponseEvent::Failed(e) => {
                    return match answer {
                        Some(a) => Ok(Attempt::Done(a)),
                        None => Err(CallError::new(
                            Code::Unavailable,
                            format!("the answer broke off: {}", e.reason()),
                        )),
                    };
                }
            }
            pending.drain(..r.consumed);
            if let Some(j) = judgement
                && answer.is_none()
            {
                answer = Some(judged_into(j, &mut buf, facts)?);
                drain_until = Some(tokio::time::Instant::now() + DRAIN_WAIT);
            }
            if let Some(keep_alive) = keep {
                let a = answer.take().ok_or_else(|| {
                    CallError::new(Code::Internal, "the exchange ended without a judgement")
                })?;
                if keep_alive
                    && pending.is_empty()
                    && let Ok(mut idle) = inner.idle.lock()
                {
                    idle.push(stream);
                }
                return Ok(Attempt::Done(a));
            }
        }
        // More of the answer. After the response, the rest is read only
        // for a while (to keep the connection); then it is closed.
        let read = match drain_until {
            Some(until) => match tokio::time::timeout_at(until, stream.read(&mut chunk)).await {
                Ok(r) => r,
                Err(_) => {
                    return answer
                        .map(Attempt::Done)
                        .ok_or_else(|| unavailable("the answer stopped".into()));
                }
            },
            None => stream.read(&mut chunk).await,
        };
        let n = match read {
            Ok(n) => n,
            Err(_) if reused && !got_any => return Ok(Attempt::Stale),
            Err(e) => {
                return match answer {
                    Some(a) => Ok(Attempt::Done(a)),
                    None => Err(unavailable(format!("reading the answer: {e}"))),
                };
            }
        };
        if n == 0 {
            if reused && !got_any {
                return Ok(Attempt::Stale);
            }
            if let Some(a) = answer {
                return Ok(Attempt::Done(a));
            }
            return match conn.recv_eof() {
                Some(ResponseEvent::End { .. }) => match reader.on_end(&buf) {
                    Some(j) => judged_into(j, &mut buf, facts).map(Attempt::Done),
                    None => Err(unavailable("the server closed the connection".into())),
                },
                Some(ResponseEvent::Failed(e)) => Err(unavailable(format!(
                    "the server closed the connection mid-answer: {}",
                    e.reason()
                ))),
                _ => Err(unavailable(
                    "the server closed the connection without an answer".into(),
                )),
            };
        }
        got_any = true;
        pending.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}

/// [`judged`], noting in `buf` what it held: a judged answer lets the
/// buffer be kept for the next exchange.
fn judged_into(
    j: Judgement,
    buf: &mut answer_buf::AnswerBuf<'_>,
    facts: &Mutex<HttpFacts>,
) -> Result<Answer, CallError> {
    if let Judgement::Response { len, .. } = j {
        buf.judged(len);
    }
    let answer = judged(j, buf, facts)?;
    buf.done();
    Ok(answer)
}

/// The exchange's last judgement, as the call's answer or its error.
fn judged(j: Judgement, buf: &[u8], facts: &Mutex<HttpFacts>) -> Result<Answer, CallError> {
    match j {
        Judgement::Response { len, error } => {
            Ok(Some((buf.get(..len).unwrap_or_default().to_vec(), error)))
        }
        Judgement::Accepted => Ok(None),
        // Not a last judgement: never given here.
        Judgement::Notification { .. } => Err(CallError::new(
            Code::Internal,
            "a notification taken for the answer",
        )),
        Judgement::Failed(f) => Err(failure(&f, buf, facts)),
    }
}

/// The error of a failed exchange.
fn failure(f: &HttpFailure, buf: &[u8], facts: &Mutex<HttpFacts>) -> CallError {
    let status = match f.status {
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        _ if f.reason.contains("larger than the receive buffer") => Code::ResourceExhausted,
        _ if f.reason.contains("ended before") => Code::Unavailable,
        _ => Code::Internal,
    };
    let mut message = f.reason.to_owned();
    if let Some(media) = facts.lock().ok().and_then(|f| f.content_type.clone()) {
        message.push_str(&format!(" (content type {media})"));
    }
    if f.excerpt > 0 {
        let excerpt = String::from_utf8_lossy(buf.get(..f.excerpt).unwrap_or_default());
        message.push_str(&format!(": {:?}", excerpt));
    }
    let mut e = CallError::new(status, message);
    e.diagnostics.http_status = (f.status != 0).then_some(f.status);
    e
}

/// A `_meta` key of the core's, as a JSON object key.
fn key(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}
