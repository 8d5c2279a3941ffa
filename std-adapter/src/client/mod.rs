//! One MCP client for every transport: [`Client`] speaks the gRPC
//! tunnel or typed binding ([`grpc::Config`], [`Client::grpc`]), Streamable
//! HTTP ([`http::Config`], [`Client::http`]) or stdio ([`stdio::Config`],
//! [`Client::stdio`]: a child process or a serial device), and gives the
//! same calls ([`Call`]), the same typed methods and the same JSON-RPC
//! errors over each. [`Client::connect`] takes an address (`grpc://`,
//! `http://`, `https://`).
//!
//! Each runs its binding's core engine ([`TunnelClient`], [`HttpClient`],
//! [`StdioEngine`]) on the one tokio driver of every client engine
//! (its `dispatch` module): every MCP rule of a call is the core's; the driver
//! opens the links the engine asks for (a connection, a child) and moves
//! octets.
//!
//! Over HTTP and stdio the era is chosen deliberately (MCP 2026-07-28
//! §8.3), by the core's engine: [`Client::http`] and [`Client::stdio`]
//! wait while it probes with `server/discover`; a modern answer keeps the
//! modern shape; 401, 403, a 5xx or no answer is the error the
//! application gets, never a reason to fall back; a refusal of a modern
//! server (-32021, -32020) is reported; anything else (a method the
//! server does not know, a 4xx without a modern error) falls back to the
//! 2025-11-25 lifecycle (over HTTP a session), and over HTTP from there,
//! when `initialize` is refused too, to the 2024-11-05 HTTP+SSE shape.
//! Which era was taken, and why, is in [`Client::era`].
//!
//! [`TunnelClient`]: mcpwire_core::mcp::client::TunnelClient
//! [`HttpClient`]: mcpwire_core::mcp::client::HttpClient
//! [`StdioEngine`]: mcpwire_core::mcp::client::stdio::StdioEngine

mod call;
pub(crate) mod calls;
mod dispatch;
pub mod era;
pub(crate) mod error;
pub mod grpc;
pub mod http;
mod link;
mod mailbox;
mod rounds;
pub mod stdio;
pub(crate) mod typed;

use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::{CallOptions, LISTEN_METHOD};
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
use dispatch::{Command, Handle};
use era::Era;
pub use era::EraInfo;
pub use error::{CallDiagnostics, CallError, RawMessage, RawResponse, StreamMessage};
use error::{complete_id, complete_request};
pub use http::HttpFacts;
pub use stdio::Stopped;
use typed::named_params;
pub use typed::{
    CallToolResult, GetPromptResult, JsonRpcError, MAX_LIST_PAGES, Progress, Prompt,
    PromptArgument, Resource, ResourceContents, Tool,
};

/// Rounds of a multi round-trip call before giving up (the core engines'
/// limit).
pub const MAX_INPUT_ROUNDS: usize = mcpwire_core::mcp::client::MAX_INPUT_ROUNDS as usize;

/// An MCP client over any transport. Cheap to clone: clones share the
/// connections (or the child).
#[derive(Clone)]
pub struct Client {
    engine: Arc<Engine>,
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
    /// The client capabilities this side adds to a request's `_meta`
    /// (with the protocol version); `None` where the engine merges its
    /// own `_meta` (stdio: as the era says).
    capabilities: Option<Value>,
    /// `io.modelcontextprotocol/clientInfo` added to requests that lack
    /// it (Streamable HTTP).
    client_info: Option<Value>,
    request_timeout: Duration,
    max_message: usize,
    /// How the stdio servers ended, for a stdio client.
    stops: Option<stdio::Stops>,
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
    call: EngineCall,
    /// Over Streamable HTTP, what its facts are made of.
    http: Option<Arc<http::Context>>,
}

impl Call {
    /// What is known of the call's HTTP exchange, over Streamable HTTP:
    /// the URL, the era, and once an answer came its status, its HTTP
    /// version, the `WWW-Authenticate` of a 401 or 403, whether it was
    /// sent again after -32020.
    pub fn http_facts(&self) -> Option<HttpFacts> {
        let context = self.http.as_ref()?;
        Some(context.facts(self.call.diagnostics()))
    }

    /// The request's id (`null` for a notification).
    pub fn id(&self) -> &Value {
        self.call.id()
    }

    /// The next message: notifications as they arrive, then the response
    /// (a result or the server's JSON-RPC error); `Ok(None)` after it.
    /// Over Streamable HTTP an error carries the call's
    /// [`HttpFacts`] in [`CallDiagnostics::http`].
    pub async fn next(&mut self) -> Result<Option<StreamMessage>, CallError> {
        let r = self.call.next().await;
        r.map_err(|e| self.with_facts(e))
    }

    /// [`Call::next`] as JSON text: each message as the client engine
    /// validated it, not parsed here.
    pub async fn next_raw(&mut self) -> Result<Option<RawMessage>, CallError> {
        let r = self.call.next_raw().await;
        r.map_err(|e| self.with_facts(e))
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
            engine: Arc::new(Engine {
                handle,
                grpc: Some(config.mode),
                http: None,
                next_id: AtomicU64::new(1),
                capabilities: Some(config.client_capabilities),
                client_info: None,
                request_timeout: config.request_timeout,
                max_message: config.max_message_bytes,
                stops: None,
            }),
            era: None,
        })
    }

    /// Starts the stdio server of `config` (a child process, or a serial
    /// device) and runs its handshake; returns once calls can go, or with
    /// why the server could not be started or refused the handshake (its
    /// -32022, with the versions it speaks, as the call error's `rpc`).
    pub async fn stdio(config: stdio::Config) -> Result<Self, CallError> {
        config
            .check()
            .map_err(|e| CallError::new(Code::InvalidArgument, e))?;
        let stops = stdio::Stops::default();
        let handle = config.spawn(stops.clone());
        let (reply, ready) = tokio::sync::oneshot::channel();
        handle.send(Command::Open { reply });
        let opened = ready.await.unwrap_or(Err(dispatch::Refusal::Gone));
        let era = dispatch::status(&handle).await.and_then(|s| s.era);
        if let Err(refusal) = opened {
            let mut e = call::refusal_error(refusal);
            if let Some(versions) = era.as_ref().and_then(|e| e.refused_versions()) {
                e = error::version_refusal(versions, PROTOCOL_VERSION);
            }
            return Err(e);
        }
        Ok(Self {
            era: era.as_ref().map(stdio::era_info),
            engine: Arc::new(Engine {
                handle,
                grpc: None,
                http: None,
                next_id: AtomicU64::new(1),
                capabilities: None,
                client_info: None,
                request_timeout: config.request_timeout,
                max_message: config.max_line_bytes,
                stops: Some(stops),
            }),
        })
    }

    /// A client of the Streamable HTTP endpoint of `config`, which runs
    /// the era's handshake (MCP 2026-07-28 §8.3) before it returns:
    /// [`EraChoice::Probe`](era::EraChoice::Probe) (the default) asks
    /// `server/discover` and falls back as the module documentation says;
    /// `Modern` speaks the 2026-07-28 shape without a request; `Legacy`
    /// starts with the 2025-11-25 session. The handshake's failure is the
    /// error: 401 or 403 (with its `WWW-Authenticate`), a modern server's
    /// refusal, no answer. Needs a tokio runtime (the engine runs in a
    /// task).
    pub async fn http(config: http::Config) -> Result<Self, CallError> {
        let handle = config.spawn()?;
        let era = http::handshake(&handle, config.era, config.max_message_bytes).await?;
        Ok(Self {
            engine: Arc::new(Engine {
                handle,
                grpc: None,
                http: Some(Arc::new(http::Context::new(&config, era.clone()))),
                next_id: AtomicU64::new(1),
                capabilities: Some(config.client_capabilities),
                client_info: config.client_info,
                request_timeout: config.request_timeout,
                max_message: config.max_message_bytes,
                stops: None,
            }),
            era,
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
        let e = &self.engine;
        match e.grpc {
            Some(grpc::Mode::Typed) => "gRPC typed binding (tunnel fallback)",
            Some(grpc::Mode::Tunnel) => "gRPC tunnel",
            None if e.http.is_some() => http::transport_name(self.era.as_ref().map(|e| e.era)),
            None => "stdio",
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
        let e = &self.engine;
        Ok(Call {
            call: e.call(request, timeout).await?,
            http: e.http.clone(),
        })
    }

    /// Starts a call of `method` with `params` as JSON text (a JSON
    /// object); `meta_complete` says that its `_meta` has the protocol
    /// version and the client capabilities (as a request a server engine
    /// admitted has): then it is sent as it is, else it is parsed and
    /// completed. Read the answer with [`Call::next_raw`] (or
    /// [`Call::next`]).
    pub async fn call_raw(
        &self,
        method: &str,
        params: &[u8],
        meta_complete: bool,
        timeout: Option<Duration>,
    ) -> Result<Call, CallError> {
        let e = &self.engine;
        if let Some(call) = e.call_raw(method, params, meta_complete, timeout).await? {
            return Ok(Call {
                call,
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
    /// The rounds are the core engine's (one request timeout for the whole
    /// call; each round's request has its own id, the first's with `#1`,
    /// `#2`... appended).
    pub async fn call_tool_with_input(
        &self,
        name: &str,
        arguments: impl Serialize,
        capabilities: Value,
        mut on_input: impl FnMut(&Map<String, Value>) -> Result<Map<String, Value>, CallError>,
    ) -> Result<CallToolResult, CallError> {
        let mut params = named_params(name, arguments)?;
        params["_meta"] = json!({ "io.modelcontextprotocol/clientCapabilities": capabilities });
        self.engine
            .call_tool_with_input(params, &mut on_input)
            .await
    }

    /// Opens a `subscriptions/listen` stream with `params` (its filter):
    /// the acknowledgement and the change notifications arrive on the
    /// returned call, without a timeout, until it is dropped (which ends
    /// the subscription) or the server ends it.
    pub async fn listen(&self, params: Value) -> Result<Call, CallError> {
        self.call(json!({"jsonrpc": "2.0", "method": LISTEN_METHOD, "params": params}))
            .await
    }

    /// Ends the client: listen streams end, the calls in progress run to
    /// their answer, then a stdio child is stopped (stdin closed, then
    /// SIGTERM, then SIGKILL) or the session of an older-era HTTP server
    /// ended (a 2025 session deleted, the 2024 event stream closed), and
    /// the connections close; every clone's later calls are refused. How
    /// a child or a session ended, when there was one.
    pub async fn close(&self) -> Option<Stopped> {
        let e = &self.engine;
        let (done, closed) = tokio::sync::oneshot::channel();
        if e.handle.send(Command::Close { done }) {
            let _ = closed.await;
        }
        if let Some(stops) = &e.stops {
            return Some(stops.last().await);
        }
        let older = self.era.as_ref().is_some_and(|era| era.era != Era::Modern);
        (e.http.is_some() && older).then_some(Stopped::SessionClosed)
    }

    /// Replaces the bearer token sent with every later request (`None`:
    /// none), on a running client: a token refreshed by an OAuth flow,
    /// or the one a 401's challenge asked for. Streamable HTTP only; an
    /// error when the token is not a `token68` (RFC 9110 §11.2), and over
    /// the other transports.
    pub async fn set_bearer(&self, token: Option<&str>) -> Result<(), CallError> {
        let e = &self.engine;
        if e.http.is_none() {
            return Err(CallError::new(
                Code::FailedPrecondition,
                "only a Streamable HTTP client's token can change: make a new client",
            ));
        }
        http::set_bearer(&e.handle, token.map(str::to_owned)).await
    }

    /// How many times the client opened a new link after its first: a
    /// stdio server started again, a new connection after one went away.
    pub async fn reconnects(&self) -> u64 {
        dispatch::status(&self.engine.handle)
            .await
            .map_or(0, |s| s.links.saturating_sub(1))
    }

    /// The input schema of `tool` the client mirrors `x-mcp-header`
    /// arguments from (learned from a `tools/list`), when the transport
    /// mirrors them (gRPC, HTTP) and the tool has annotations.
    pub async fn cached_schema(&self, tool: &str) -> Option<Value> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let tool = serde_json::to_vec(tool).ok()?;
        self.engine
            .handle
            .send(Command::CachedSchema { tool, reply });
        serde_json::from_slice(&answer.await.ok()??).ok()
    }

    /// Forgets the learned schemas: a tool's arguments are mirrored again
    /// after the next `tools/list`.
    pub fn clear_schemas(&self) {
        self.engine.handle.send(Command::ClearSchemas);
    }
}

impl Engine {
    /// Completes `request` as every transport sends it (its id; the
    /// protocol version, the client capabilities and info in `_meta`,
    /// where the engine does not merge its own); its method.
    fn complete(&self, request: &mut Value) -> Result<String, CallError> {
        let Some(capabilities) = &self.capabilities else {
            return complete_id(request, &self.next_id);
        };
        let (method, meta) = complete_request(request, &self.next_id, capabilities)?;
        if let Some(info) = &self.client_info {
            meta.entry(String::from_utf8_lossy(KEY_CLIENT_INFO))
                .or_insert_with(|| info.clone());
        }
        Ok(method)
    }

    /// Starts a call of `request`, completed as every transport sends it.
    async fn call(
        &self,
        mut request: Value,
        timeout: Option<Duration>,
    ) -> Result<EngineCall, CallError> {
        let method = self.complete(&mut request)?;
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
        let deadline = (method != LISTEN_METHOD)
            .then(|| tokio::time::Instant::now() + timeout.unwrap_or(self.request_timeout));
        let options = CallOptions {
            timeout,
            binding: self.grpc.unwrap_or_default().binding(),
            ..CallOptions::default()
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

/// The `HOST:PORT` of a `grpc://HOST:PORT` address; `None` for another
/// scheme; an error for no port, a path, or user information (a bearer
/// token belongs in the configuration, not in an address that logs show).
pub fn grpc_authority(address: &str) -> Result<Option<String>, CallError> {
    // One that does not parse (`grpc://:1`) is a bad gRPC address still.
    let grpc = address.get(..7).map(str::to_ascii_lowercase);
    let url = match url::Url::parse(address) {
        Ok(url) if url.scheme() == "grpc" => url,
        Err(_) if grpc.as_deref() == Some("grpc://") => return Err(bad_grpc(address)),
        _ => return Ok(None),
    };
    let authority = url.host_str().zip(url.port());
    let authority = authority.map(|(host, port)| format!("{host}:{port}"));
    match authority {
        // Nothing else: the URL is written back as the authority alone.
        Some(a) if url.as_str().trim_end_matches('/') == format!("grpc://{a}") => Ok(Some(a)),
        _ => Err(bad_grpc(address)),
    }
}

/// The error of a bad `grpc://` address, without its credentials.
fn bad_grpc(address: &str) -> CallError {
    let address = redact_url(address);
    let why = "a gRPC address is grpc://HOST:PORT, without credentials or a path";
    CallError::new(Code::InvalidArgument, format!("{address}: {why}"))
}

/// `address` (a URL or `scheme://host:port`) without its user information
/// (`user:password@`): what may be printed or put in an error. Such a URL
/// comes back as the `url` crate writes it (`http://h` as `http://h/`);
/// text that is no URL loses everything up to its last `@`.
pub fn redact_url(address: &str) -> String {
    match url::Url::parse(address) {
        Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
            // A URL with user information has a host: both succeed.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.into()
        }
        Ok(_) => address.to_owned(),
        Err(_) => match (address.split_once("://"), address.rsplit_once('@')) {
            (Some((scheme, _)), Some((_, rest))) => format!("{scheme}://{rest}"),
            (None, Some((_, rest))) => rest.to_owned(),
            (_, None) => address.to_owned(),
        },
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
        assert_eq!(
            redact_url("grpc://127.0.0.1:50051"),
            "grpc://127.0.0.1:50051"
        );
        assert_eq!(redact_url("http://h/mcp?a=b@c"), "http://h/mcp?a=b@c");
        assert_eq!(redact_url("ftp://a:b@h/x"), "ftp://h/x");
        assert_eq!(redact_url("grpc://u@h:1"), "grpc://h:1");
        // Not a URL (a port past 65535): still no credentials.
        assert_eq!(redact_url("http://u:secret@h:99999/x"), "http://h:99999/x");
        assert_eq!(redact_url("127.0.0.1:50051"), "127.0.0.1:50051");
    }

    #[test]
    fn a_grpc_address_is_host_and_port_only() {
        use super::grpc_authority;
        let authority = |a| grpc_authority(a).unwrap();
        assert_eq!(authority("grpc://h:1/").as_deref(), Some("h:1"));
        assert_eq!(authority("GRPC://[::1]:5").as_deref(), Some("[::1]:5"));
        assert_eq!(authority("http://h/mcp"), None);
        assert_eq!(authority("127.0.0.1:50051"), None);
        let bad = "grpc://u:secret@h:1 grpc://u:secret@h:99999 grpc://h:1/x grpc://h:1?q \
                   grpc://h:1#f grpc://h grpc://:1 grpc://";
        for bad in bad.split_whitespace() {
            let e = grpc_authority(bad).unwrap_err();
            assert!(!e.message.contains("secret"), "{e}");
            assert!(e.message.contains("grpc://HOST:PORT"), "{e}");
        }
    }
}
