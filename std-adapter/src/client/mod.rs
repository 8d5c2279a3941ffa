//! One MCP client for every transport: [`Client`] speaks the gRPC
//! tunnel or typed binding ([`grpc::Config`], [`Client::grpc`]), Streamable
//! HTTP ([`http::Config`], [`Client::http`]) or stdio ([`Client::stdio`]: a
//! child process or a serial device), and gives the same calls ([`Call`]),
//! the same typed methods and the same JSON-RPC errors over each.
//! [`Client::connect`] takes an address (`grpc://`, `http://`,
//! `https://`).
//!
//! The gRPC and HTTP clients run the core's engines ([`TunnelClient`],
//! [`HttpClient`]) on the one tokio driver of every client engine
//! ([`dispatch`]): every MCP rule of a call is the core's; the driver
//! opens the links the engine asks for and moves octets.
//!
//! Over HTTP the era is chosen deliberately (MCP 2026-07-28 §8.3), by the
//! core's engine: [`Client::http`] waits while it probes with
//! `server/discover`; a modern answer keeps the modern shape; 401, 403, a
//! 5xx or no answer is the error the application gets, never a reason to
//! fall back; a refusal of a modern server (-32021, -32020) is reported;
//! anything else (a method the server does not know, a 4xx without a
//! modern error) falls back to the 2025-11-25 Streamable HTTP session, and
//! from there, when `initialize` is refused too, to the 2024-11-05
//! HTTP+SSE shape. Which era was taken, and why, is in [`Client::era`].
//!
//! [`TunnelClient`]: mcpwire_core::mcp::client::TunnelClient
//! [`HttpClient`]: mcpwire_core::mcp::client::HttpClient

mod call;
pub(crate) mod calls;
mod dispatch;
pub(crate) mod error;
pub mod grpc;
pub mod http;
mod link;
mod mailbox;
pub(crate) mod typed;

use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::CallOptions;
use mcpwire_core::mcp::client::era::Era;
use mcpwire_core::mcp::meta::KEY_CLIENT_INFO;
/// The MCP revision every request declares in `params._meta`.
pub use mcpwire_core::mcp::meta::PROTOCOL_VERSION;
use serde::Serialize;
use serde_json::{Map, Value, json};
use url::Url;

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use call::EngineCall;
use calls::typed_helpers;
use dispatch::{Command, Handle};
use error::complete_request;
pub use error::{CallDiagnostics, CallError, RawMessage, RawResponse, StreamMessage};
pub use http::HttpFacts;
pub use typed::{
    CallToolResult, GetPromptResult, JsonRpcError, MAX_LIST_PAGES, Progress, Prompt,
    PromptArgument, Resource, ResourceContents, Tool,
};
use typed::{call_tool_result, named_params, result_of};

use crate::{EraInfo, StdioCall, StdioChannel, StdioChannelConfig, Stopped};

/// How long [`Client::close`] waits for an older-era HTTP session to end.
pub const SESSION_CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Rounds of a multi round-trip call before giving up.
pub const MAX_INPUT_ROUNDS: usize = 16;

/// An MCP client over any transport. Cheap to clone: clones share the
/// connections (or the child).
#[derive(Clone)]
pub struct Client {
    transport: Transport,
    era: Option<EraInfo>,
}

/// A client engine's task, and what every call of it carries.
#[derive(Debug)]
struct Engine {
    handle: Handle,
    /// The gRPC binding, for a gRPC client.
    grpc: Option<grpc::Mode>,
    /// What the calls of a Streamable HTTP client share.
    http: Option<Arc<http::Context>>,
    next_id: AtomicU64,
    capabilities: Value,
    /// `io.modelcontextprotocol/clientInfo` added to requests that lack it.
    client_info: Option<Value>,
    request_timeout: Duration,
    max_message: usize,
}

#[derive(Clone)]
enum Transport {
    Engine(Arc<Engine>),
    /// A stdio child.
    Line(StdioChannel),
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.transport_name())
            .field("era", &self.era)
            .finish()
    }
}

/// One call in progress, whatever the transport: its notifications, then
/// its response. Dropping it before the end cancels it (an HTTP stream
/// closed, a gRPC stream reset, `notifications/cancelled` on stdio).
#[derive(Debug)]
pub struct Call {
    kind: CallKind,
    /// Over Streamable HTTP, what its facts are made of.
    http: Option<Arc<http::Context>>,
}

#[derive(Debug)]
enum CallKind {
    Engine(EngineCall),
    Line(StdioCall),
}

impl Call {
    /// What is known of the call's HTTP exchange, over Streamable HTTP:
    /// the URL, the era, and once an answer came its status, its HTTP
    /// version, the `WWW-Authenticate` of a 401 or 403, whether it was
    /// sent again after -32020.
    pub fn http_facts(&self) -> Option<HttpFacts> {
        let context = self.http.as_ref()?;
        match &self.kind {
            CallKind::Engine(c) => Some(context.facts(c.diagnostics())),
            CallKind::Line(_) => None,
        }
    }

    /// The request's id (`null` for a notification).
    pub fn id(&self) -> &Value {
        match &self.kind {
            CallKind::Engine(c) => c.id(),
            CallKind::Line(c) => c.id(),
        }
    }

    /// The next message: notifications as they arrive, then the response
    /// (a result or the server's JSON-RPC error); `Ok(None)` after it.
    pub async fn next(&mut self) -> Result<Option<StreamMessage>, CallError> {
        let r = match &mut self.kind {
            CallKind::Engine(c) => c.next().await,
            CallKind::Line(c) => c.next().await,
        };
        r.map_err(|e| self.with_facts(e))
    }

    /// [`Call::next`] as JSON text: over gRPC and HTTP each message as the
    /// client engine validated it, not parsed here; over stdio the
    /// message written back as text.
    pub async fn next_raw(&mut self) -> Result<Option<RawMessage>, CallError> {
        // The other transports' futures are boxed: a forwarding handler's
        // state stays as small as the engine's call.
        let message = match &mut self.kind {
            CallKind::Engine(c) => return c.next_raw().await.map_err(|e| self.with_facts(e)),
            CallKind::Line(c) => Box::pin(c.next()).await?,
        };
        let text = |v: &Value| serde_json::to_vec(v).unwrap_or_default();
        Ok(message.map(|m| match m {
            StreamMessage::Notification(n) => RawMessage::Notification(text(&n)),
            StreamMessage::Response(r) => RawMessage::Response(RawResponse::new(text(&r))),
        }))
    }

    /// `e` with the call's HTTP facts, over Streamable HTTP.
    fn with_facts(&self, mut e: CallError) -> CallError {
        if let Some(facts) = self.http_facts() {
            e.diagnostics.http = Some(Box::new(facts));
        }
        e
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
}

impl Client {
    /// A client of the gRPC server of `config`: the tunnel, or the typed
    /// binding with the tunnel fallback when its [`mode`](grpc::Config::mode)
    /// is [`grpc::Mode::Typed`]. It connects at the first call (and anew
    /// when the server went away); an error for metadata the engine
    /// cannot carry. Needs a tokio runtime (the engine runs in a task).
    pub async fn grpc(config: grpc::Config) -> Result<Self, CallError> {
        let handle = config
            .spawn()
            .map_err(|e| CallError::new(Code::InvalidArgument, e))?;
        Ok(Self {
            transport: Transport::Engine(Arc::new(Engine {
                handle,
                grpc: Some(config.mode),
                http: None,
                next_id: AtomicU64::new(1),
                capabilities: config.client_capabilities,
                client_info: None,
                request_timeout: config.request_timeout,
                max_message: config.max_message_bytes,
            })),
            era: None,
        })
    }

    /// Launches the stdio server of `config` and runs its handshake.
    pub async fn stdio(config: StdioChannelConfig) -> Result<Self, CallError> {
        let channel = StdioChannel::connect(config).await?;
        Ok(Self {
            era: channel.era(),
            transport: Transport::Line(channel),
        })
    }

    /// A client of the Streamable HTTP endpoint of `config`, which runs
    /// the era's handshake (MCP 2026-07-28 §8.3) before it returns:
    /// [`EraChoice::Probe`](http::EraChoice::Probe) (the default of
    /// [`Client::connect`]) asks `server/discover` and falls back as the
    /// module documentation says; `Modern` speaks the 2026-07-28 shape
    /// without a request; `Legacy` starts with the 2025-11-25 session.
    /// The handshake's failure is the error: 401 or 403 (with its
    /// `WWW-Authenticate`), a modern server's refusal, no answer. Needs a
    /// tokio runtime (the engine runs in a task).
    pub async fn http(config: http::Config) -> Result<Self, CallError> {
        let (handle, context) = config.spawn()?;
        if config.era != http::EraChoice::Modern {
            http::handshake(&handle, &context, config.max_message_bytes).await?;
        } else {
            http::note_era(&handle, &context).await;
        }
        Ok(Self {
            era: context.era(),
            transport: Transport::Engine(Arc::new(Engine {
                handle,
                grpc: None,
                http: Some(context),
                next_id: AtomicU64::new(1),
                capabilities: config.client_capabilities,
                client_info: config.client_info,
                request_timeout: config.request_timeout,
                max_message: config.max_message_bytes,
            })),
        })
    }

    /// A client of `address`: `http://` or `https://` (Streamable HTTP, the
    /// era probed), or `grpc://HOST:PORT` (the gRPC tunnel, cleartext).
    /// A stdio server is [`Client::stdio`]; TLS for gRPC is
    /// [`Client::grpc`] with a [`grpc::Config`].
    pub async fn connect(address: &str) -> Result<Self, CallError> {
        if let Some(authority) = grpc_authority(address)? {
            return Self::grpc(grpc::Config::new(authority)).await;
        }
        let scheme = Url::parse(address).map(|u| u.scheme().to_owned());
        if let Ok("http" | "https") = scheme.as_deref() {
            return Self::http(http::Config::new(address)?).await;
        }
        Err(CallError::new(
            Code::InvalidArgument,
            format!(
                "{:?}: an address is http://, https:// or grpc://HOST:PORT",
                redact_url(address)
            ),
        ))
    }

    /// The transport, in words.
    pub fn transport_name(&self) -> &'static str {
        match &self.transport {
            Transport::Engine(e) if e.http.is_some() => {
                http::transport_name(self.era.as_ref().map(|e| e.era))
            }
            Transport::Engine(e) => match e.grpc {
                Some(grpc::Mode::Typed) => "gRPC typed binding (tunnel fallback)",
                _ => "gRPC tunnel",
            },
            Transport::Line(_) => "stdio",
        }
    }

    /// The era spoken, the versions and whether a fallback occurred, as
    /// the handshake found them (for gRPC, where there is one era,
    /// `None`).
    pub fn era(&self) -> Option<&EraInfo> {
        self.era.as_ref()
    }

    /// Starts a call of one JSON-RPC message (an `id` is added to a request
    /// without one); `timeout` overrides the transport's default.
    pub async fn call_with_timeout(
        &self,
        request: Value,
        timeout: Option<Duration>,
    ) -> Result<Call, CallError> {
        Ok(match &self.transport {
            Transport::Engine(e) => Call {
                kind: CallKind::Engine(e.call(request, timeout).await?),
                http: e.http.clone(),
            },
            Transport::Line(c) => Call {
                kind: CallKind::Line(c.call_with_timeout(request, timeout).await?),
                http: None,
            },
        })
    }

    /// Starts a call of `method` with `params` as JSON text (a JSON
    /// object); `meta_complete` says that its `_meta` has the protocol
    /// version and the client capabilities (as a request a server engine
    /// admitted has). Over gRPC the text is sent as it is; the other
    /// transports parse it. Read the answer with [`Call::next_raw`] (or
    /// [`Call::next`]).
    pub async fn call_raw(
        &self,
        method: &str,
        params: &[u8],
        meta_complete: bool,
        timeout: Option<Duration>,
    ) -> Result<Call, CallError> {
        if let Transport::Engine(e) = &self.transport
            && let Some(call) = e.call_raw(method, params, meta_complete, timeout).await?
        {
            return Ok(Call {
                kind: CallKind::Engine(call),
                http: e.http.clone(),
            });
        }
        let params: Value = serde_json::from_slice(params)
            .map_err(|_| CallError::invalid_request("params is not JSON"))?;
        let request = json!({"jsonrpc": "2.0", "method": method, "params": params});
        Box::pin(self.call_with_timeout(request, timeout)).await
    }

    /// [`Client::call_with_timeout`] with the transport's timeout.
    pub async fn call(&self, request: Value) -> Result<Call, CallError> {
        self.call_with_timeout(request, None).await
    }

    /// Sends `method` with `params` and waits for the response (a result
    /// or the server's JSON-RPC error), skipping notifications.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.call(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await?
            .response()
            .await
    }

    /// [`Client::call_tool`] for a tool that may ask for input (a multi
    /// round-trip request, MCP 2026-07-28 §9): the calls declare
    /// `capabilities` (the client capabilities `on_input` can answer, such
    /// as `{"elicitation": {}}`); each `input_required` result's
    /// `inputRequests` go to `on_input`, and its answers (an object keyed
    /// as the requests) go back as `inputResponses` with the result's
    /// `requestState`, until the tool completes; at most
    /// [`MAX_INPUT_ROUNDS`] rounds. An error of `on_input` ends the call.
    pub async fn call_tool_with_input(
        &self,
        name: &str,
        arguments: impl Serialize,
        capabilities: Value,
        mut on_input: impl FnMut(&Map<String, Value>) -> Result<Map<String, Value>, CallError>,
    ) -> Result<CallToolResult, CallError> {
        let mut params = named_params(name, arguments)?;
        params["_meta"] = json!({ "io.modelcontextprotocol/clientCapabilities": capabilities });
        for _ in 0..MAX_INPUT_ROUNDS {
            let mut result = result_of(self.request("tools/call", params.clone()).await?)?;
            if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
                return call_tool_result(&result);
            }
            let requests = match result.get_mut("inputRequests").map(Value::take) {
                Some(Value::Object(requests)) => requests,
                None => Map::new(),
                Some(_) => {
                    return Err(CallError::new(
                        Code::Internal,
                        "an input_required result whose inputRequests is not an object",
                    ));
                }
            };
            params["inputResponses"] = Value::Object(on_input(&requests)?);
            match result.get_mut("requestState").map(Value::take) {
                Some(state) => params["requestState"] = state,
                None => {
                    if let Some(p) = params.as_object_mut() {
                        p.remove("requestState");
                    }
                }
            }
        }
        Err(CallError::new(
            Code::Internal,
            format!("{name}: still asking for input after {MAX_INPUT_ROUNDS} rounds"),
        ))
    }

    /// The server's `server/discover` result (a JSON-RPC error is an
    /// `Err` whose [`CallError::rpc`] holds it).
    pub async fn discover(&self) -> Result<Value, CallError> {
        calls::discover(self).await
    }

    /// The items under `key` of every page of a list method (raw JSON),
    /// at most [`MAX_LIST_PAGES`] pages.
    pub async fn list_all(&self, method: &str, key: &str) -> Result<Vec<Value>, CallError> {
        calls::list_all(self, method, key).await
    }

    /// Opens a `subscriptions/listen` stream with `params` (its filter):
    /// the acknowledgement and the change notifications arrive on the
    /// returned call, without a timeout, until it is dropped (which ends
    /// the subscription) or the server ends it.
    pub async fn listen(&self, params: Value) -> Result<Call, CallError> {
        self.call(json!({"jsonrpc": "2.0", "method": "subscriptions/listen", "params": params}))
            .await
    }

    /// Ends the client: a stdio child is stopped (stdin closed, then
    /// SIGTERM, then SIGKILL); the session of an older-era HTTP server is
    /// ended (a 2025 session deleted, the 2024 event stream closed: the
    /// calls in progress get [`SESSION_CLOSE_WAIT`] to finish, and every
    /// clone's calls are refused after it); network connections close as
    /// the last clone goes. How a child or a session ended, when there was
    /// one.
    pub async fn close(&self) -> Option<Stopped> {
        match &self.transport {
            Transport::Line(c) => Some(c.shutdown().await),
            Transport::Engine(e) if self.era.as_ref().is_some_and(|e| e.era != Era::Modern) => {
                e.handle.send(Command::Close);
                let _ = tokio::time::timeout(SESSION_CLOSE_WAIT, e.handle.closed()).await;
                Some(Stopped::SessionClosed)
            }
            Transport::Engine(_) => None,
        }
    }

    /// Replaces the bearer token sent with every later request (`None`:
    /// none), on a running client: a token refreshed by an OAuth flow,
    /// or the one a 401's challenge asked for. Streamable HTTP only; an
    /// error when the token is not a `token68` (RFC 9110 §11.2), and over
    /// the other transports.
    pub async fn set_bearer(&self, token: Option<&str>) -> Result<(), CallError> {
        match &self.transport {
            Transport::Engine(e) if e.http.is_some() => {
                http::set_bearer(&e.handle, token.map(str::to_owned)).await
            }
            Transport::Engine(_) => Err(CallError::new(
                Code::FailedPrecondition,
                "a gRPC client's token is its configuration's: make a new client",
            )),
            Transport::Line(_) => Err(CallError::new(
                Code::FailedPrecondition,
                "a stdio server takes no bearer token",
            )),
        }
    }

    /// The input schema of `tool` the client mirrors `x-mcp-header`
    /// arguments from (learned from a `tools/list`), when the transport
    /// mirrors them (gRPC, HTTP) and the tool has annotations.
    pub async fn cached_schema(&self, tool: &str) -> Option<Value> {
        match &self.transport {
            Transport::Engine(e) => {
                let (reply, answer) = tokio::sync::oneshot::channel();
                let tool = serde_json::to_vec(tool).ok()?;
                e.handle.send(Command::CachedSchema { tool, reply });
                serde_json::from_slice(&answer.await.ok()??).ok()
            }
            Transport::Line(_) => None,
        }
    }

    /// Forgets the learned schemas: a tool's arguments are mirrored again
    /// after the next `tools/list`.
    pub fn clear_schemas(&self) {
        if let Transport::Engine(e) = &self.transport {
            e.handle.send(Command::ClearSchemas);
        }
    }
}

impl Engine {
    /// Starts a call of `request`, completed as every transport sends it.
    async fn call(
        &self,
        mut request: Value,
        timeout: Option<Duration>,
    ) -> Result<EngineCall, CallError> {
        let (method, meta) = complete_request(&mut request, &self.next_id, &self.capabilities)?;
        if let Some(info) = &self.client_info {
            meta.entry(String::from_utf8_lossy(KEY_CLIENT_INFO))
                .or_insert_with(|| info.clone());
        }
        let body =
            serde_json::to_vec(&request).map_err(|e| CallError::invalid_request(&e.to_string()))?;
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        self.start(&method, id, body.into(), timeout, true).await
    }

    /// A call of `method` with `params` as JSON text: sent as it is when
    /// `meta_complete` and `params` is an object, else `None` (the caller
    /// completes it as a tree).
    async fn call_raw(
        &self,
        method: &str,
        params: &[u8],
        meta_complete: bool,
        timeout: Option<Duration>,
    ) -> Result<Option<EngineCall>, CallError> {
        let trimmed = params.trim_ascii();
        if !meta_complete || trimmed.first() != Some(&b'{') {
            return Ok(None);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
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
        // Handed over without waiting: a refusal is the call's first
        // event (a forwarding bridge reads it there).
        self.start(method, Value::from(id), body.into(), timeout, false)
            .await
            .map(Some)
    }

    async fn start(
        &self,
        method: &str,
        id: Value,
        body: Arc<[u8]>,
        timeout: Option<Duration>,
        confirm: bool,
    ) -> Result<EngineCall, CallError> {
        // A listen stream lasts until it is cancelled or the server ends
        // it (the engine gives it no deadline either).
        let deadline = (method != "subscriptions/listen")
            .then(|| tokio::time::Instant::now() + timeout.unwrap_or(self.request_timeout));
        let options = CallOptions {
            timeout,
            binding: self.grpc.unwrap_or_default().binding(),
        };
        EngineCall::start(
            self.handle.clone(),
            id,
            body,
            options,
            deadline,
            self.max_message,
            confirm,
        )
        .await
    }
}

typed_helpers!(Client, Call, "");

/// The `HOST:PORT` of a `grpc://HOST:PORT` address; `None` for another
/// scheme; an error for user information (`user:password@`), which
/// belongs in the configuration (a bearer token), not in an address that
/// errors and logs show.
pub fn grpc_authority(address: &str) -> Result<Option<&str>, CallError> {
    let Some(authority) = address.strip_prefix("grpc://") else {
        return Ok(None);
    };
    let plain = Url::parse(address).is_ok_and(|u| {
        u.host_str().is_some_and(|h| !h.is_empty())
            && u.username().is_empty()
            && u.password().is_none()
            && matches!(u.path(), "" | "/")
            && u.query().is_none()
            && u.fragment().is_none()
    });
    if !plain {
        return Err(CallError::new(
            Code::InvalidArgument,
            format!(
                "{}: a gRPC address is grpc://HOST:PORT, without credentials or a path",
                redact_url(address)
            ),
        ));
    }
    Ok(Some(authority.trim_end_matches('/')))
}

/// `address` (a URL or `scheme://host:port`) without its user information
/// (`user:password@`): what may be printed or put in an error. An address
/// without any is shown as it was written.
pub fn redact_url(address: &str) -> String {
    match Url::parse(address) {
        Ok(mut url) => {
            if url.username().is_empty() && url.password().is_none() {
                return address.to_owned();
            }
            // Only a URL that cannot have user information refuses these.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.into()
        }
        // Not a URL: whatever stands before an `@` of its authority goes.
        Err(_) => {
            let Some((scheme, rest)) = address.split_once("://") else {
                return address.to_owned();
            };
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest.get(..end).and_then(|authority| authority.rfind('@')) {
                Some(at) => format!("{scheme}://{}", rest.get(at + 1..).unwrap_or_default()),
                None => address.to_owned(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn a_url_is_shown_without_user_information() {
        assert_eq!(
            redact_url("https://user:secret@example.test:8443/mcp"),
            "https://example.test:8443/mcp"
        );
        assert_eq!(redact_url("http://u:p@h?x=1"), "http://h/?x=1");
        assert_eq!(redact_url("http://u:p@"), "http://");
        assert_eq!(
            redact_url("grpc://127.0.0.1:50051"),
            "grpc://127.0.0.1:50051"
        );
        assert_eq!(redact_url("http://h/mcp?a=b@c"), "http://h/mcp?a=b@c");
        assert_eq!(redact_url("ftp://a:b@h/x"), "ftp://h/x");
    }

    #[test]
    fn a_grpc_address_is_host_and_port_only() {
        use super::grpc_authority;
        assert_eq!(grpc_authority("grpc://h:1/").unwrap(), Some("h:1"));
        assert_eq!(grpc_authority("http://h/mcp").unwrap(), None);
        for bad in ["grpc://u:secret@h:1", "grpc://h:1/x", "grpc://"] {
            let e = grpc_authority(bad).unwrap_err();
            assert!(!e.message.contains("secret"), "{e}");
            assert!(e.message.contains("grpc://HOST:PORT"), "{e}");
        }
    }
}
