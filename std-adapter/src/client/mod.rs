//! One MCP client for every transport: [`Client`] speaks the gRPC
//! tunnel or typed binding ([`grpc::Config`], [`Client::grpc`]), Streamable
//! HTTP ([`Client::http`]) or a line link ([`Client::stdio`]: a stdio
//! child, or an HTTP server of an older era), and gives the same calls
//! ([`Call`]), the same typed methods and the same JSON-RPC errors over
//! each. [`Client::connect`] takes an address (`grpc://`, `http://`,
//! `https://`).
//!
//! The gRPC client runs the core's [`TunnelClient`] engine on the one
//! tokio driver of every client engine ([`dispatch`]): every MCP rule of
//! a call is the core's; the driver opens the links the engine asks for
//! and moves octets.
//!
//! Over HTTP the era is chosen deliberately (MCP 2026-07-28 §8.3):
//! [`Client::http`] probes with `server/discover` and reads the answer by
//! the core's rules ([`mcpwire_core::mcp::client::http::era::probe`]): a
//! modern answer keeps the modern channel; 401, 403, a 5xx or no answer is
//! the error the application gets, never a reason to fall back; a refusal
//! of a modern server (-32021, -32020) is reported; anything else (a
//! method the server does not know, a 4xx without a modern error) falls
//! back to the 2025-11-25 Streamable HTTP session, and from there, when
//! `initialize` is refused too, to the 2024-11-05 HTTP+SSE shape. Which
//! era was taken, and why, is in [`Client::era`].
//!
//! [`TunnelClient`]: mcpwire_core::mcp::client::TunnelClient

mod call;
pub(crate) mod calls;
mod dispatch;
pub(crate) mod error;
pub mod grpc;
mod link;
mod mailbox;
mod rounds;
pub mod stdio;
pub(crate) mod typed;

use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::http1::MediaType;
use mcpwire_core::mcp::client::CallOptions;
use mcpwire_core::mcp::client::http::era::{self, ProbeVerdict};
use mcpwire_core::mcp::client::http::{HttpFailure, Judgement};
use mcpwire_core::mcp::client::stdio::{Era, EraChoice};
/// The MCP revision every request declares in `params._meta`.
pub use mcpwire_core::mcp::meta::PROTOCOL_VERSION;
use serde::Serialize;
use serde_json::{Map, Value, json};

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use call::EngineCall;
use calls::typed_helpers;
use dispatch::{Command, Handle};
pub use error::{CallDiagnostics, CallError, RawMessage, RawResponse, StreamMessage};
use error::{complete_id, complete_request};
pub use typed::{
    CallToolResult, GetPromptResult, JsonRpcError, MAX_LIST_PAGES, Progress, Prompt,
    PromptArgument, Resource, ResourceContents, Tool,
};
use typed::{call_tool_result, named_params, result_of};

use crate::{
    EraInfo, HttpCall, HttpChannel, HttpChannelConfig, HttpLinkConfig, StdioCall, StdioChannel,
    StdioChannelConfig, Stopped,
};

/// Rounds of a multi round-trip call before giving up (the core engines'
/// limit).
pub const MAX_INPUT_ROUNDS: usize = mcpwire_core::mcp::client::MAX_INPUT_ROUNDS as usize;

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
    next_id: AtomicU64,
    /// The client capabilities this side adds to a request's `_meta`
    /// (with the protocol version); `None` where the engine merges its
    /// own `_meta` (stdio: as the era says).
    capabilities: Option<Value>,
    request_timeout: Duration,
    max_message: usize,
    /// How the stdio servers ended, for a stdio client.
    stops: Option<stdio::Stops>,
}

#[derive(Clone)]
enum Transport {
    Engine(Arc<Engine>),
    Http(HttpChannel),
    /// An HTTP server of an older era, spoken to as a line link.
    LegacyHttp(StdioChannel),
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
pub struct Call(CallKind);

#[derive(Debug)]
enum CallKind {
    Engine(EngineCall),
    Http(HttpCall),
    Line(StdioCall),
}

impl Call {
    /// What is known of the call's HTTP exchange, over Streamable HTTP.
    pub fn http_facts(&self) -> Option<crate::HttpFacts> {
        match &self.0 {
            CallKind::Http(c) => Some(c.facts()),
            _ => None,
        }
    }

    /// The request's id (`null` for a notification).
    pub fn id(&self) -> &Value {
        match &self.0 {
            CallKind::Engine(c) => c.id(),
            CallKind::Http(c) => c.id(),
            CallKind::Line(c) => c.id(),
        }
    }

    /// The next message: notifications as they arrive, then the response
    /// (a result or the server's JSON-RPC error); `Ok(None)` after it.
    pub async fn next(&mut self) -> Result<Option<StreamMessage>, CallError> {
        match &mut self.0 {
            CallKind::Engine(c) => c.next().await,
            CallKind::Http(c) => c.next().await,
            CallKind::Line(c) => c.next().await,
        }
    }

    /// [`Call::next`] as JSON text: over gRPC each message as the
    /// client engine validated it, not parsed here; over the other
    /// transports the message written back as text.
    pub async fn next_raw(&mut self) -> Result<Option<RawMessage>, CallError> {
        // The other transports' futures are boxed: a forwarding handler's
        // state stays as small as the gRPC call's.
        let message = match &mut self.0 {
            CallKind::Engine(c) => return c.next_raw().await,
            CallKind::Http(c) => Box::pin(c.next()).await?,
            CallKind::Line(c) => Box::pin(c.next()).await?,
        };
        let text = |v: &Value| serde_json::to_vec(v).unwrap_or_default();
        Ok(message.map(|m| match m {
            StreamMessage::Notification(n) => RawMessage::Notification(text(&n)),
            StreamMessage::Response(r) => RawMessage::Response(RawResponse::new(text(&r))),
        }))
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
                next_id: AtomicU64::new(1),
                capabilities: Some(config.client_capabilities),
                request_timeout: config.request_timeout,
                max_message: config.max_message_bytes,
                stops: None,
            })),
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
            transport: Transport::Engine(Arc::new(Engine {
                handle,
                grpc: None,
                next_id: AtomicU64::new(1),
                capabilities: None,
                request_timeout: config.request_timeout,
                max_message: config.max_line_bytes,
                stops: Some(stops),
            })),
        })
    }

    /// A client of the HTTP server of `config`, its era chosen by `choice`:
    /// `Probe` (the default of [`Client::connect`]) asks `server/discover`
    /// and falls back as the module documentation says; `Modern` keeps the
    /// 2026-07-28 channel whatever the answer; `Legacy` starts with the
    /// 2025-11-25 session.
    pub async fn http(config: HttpChannelConfig, choice: EraChoice) -> Result<Self, CallError> {
        let link = HttpLinkConfig {
            url: config.url.clone(),
            bearer: config.bearer.clone(),
        };
        let channel = HttpChannel::with_config(config)?;
        let modern = |version: String, server_versions: Option<String>| EraInfo {
            era: Era::Modern,
            version,
            requested: PROTOCOL_VERSION.to_owned(),
            server_versions,
            fallback: None,
            probe_error: None,
            restarted_for_fallback: false,
        };
        match choice {
            EraChoice::Modern => {
                return Ok(Self {
                    transport: Transport::Http(channel),
                    era: Some(modern(PROTOCOL_VERSION.to_owned(), None)),
                });
            }
            EraChoice::Legacy => return Self::legacy_http(link, None, None).await,
            EraChoice::Probe => {}
        }
        let mut call = channel
            .call(json!({"jsonrpc": "2.0", "method": "server/discover", "params": {}}))
            .await?;
        let answer = loop {
            match call.next().await {
                Ok(Some(StreamMessage::Response(r))) => break Ok(r),
                Ok(Some(StreamMessage::Notification(_))) => {}
                Ok(None) => {
                    break Err(CallError::new(
                        Code::Internal,
                        "server/discover ended without a response",
                    ));
                }
                Err(e) => break Err(e),
            }
        };
        let facts = call.facts();
        let status = facts.status.unwrap_or(0);
        let (judgement, message) = match &answer {
            Ok(response) => {
                let bytes = serde_json::to_vec(response).unwrap_or_default();
                let error = response.pointer("/error/code").and_then(Value::as_i64);
                let len = bytes.len();
                (Judgement::Response { len, error }, bytes)
            }
            Err(e) => {
                let failure = HttpFailure {
                    reason: "the probe failed",
                    status: e.diagnostics.http_status.unwrap_or(status),
                    media: MediaType::Other,
                    excerpt: 0,
                };
                (Judgement::Failed(failure), Vec::new())
            }
        };
        let status = match &judgement {
            Judgement::Failed(f) => f.status,
            _ => status,
        };
        match era::probe(&judgement, status, &message, PROTOCOL_VERSION) {
            ProbeVerdict::Modern(version) => {
                let server_versions = answer
                    .as_ref()
                    .ok()
                    .and_then(|r| r.pointer("/result/supportedVersions"))
                    .map(Value::to_string);
                Ok(Self {
                    transport: Transport::Http(channel),
                    era: Some(modern(version.to_owned(), server_versions)),
                })
            }
            ProbeVerdict::Legacy(why) => {
                let code = answer
                    .as_ref()
                    .ok()
                    .and_then(|r| r.pointer("/error/code"))
                    .and_then(Value::as_i64);
                Self::legacy_http(link, Some(why), code).await
            }
            // The channel already sent the request again with a version
            // the server named (-32022): a second one is not an era.
            ProbeVerdict::Retry(version) => Err(CallError::new(
                Code::FailedPrecondition,
                format!("server/discover: the server asks for version {version} again"),
            )),
            ProbeVerdict::Refused { .. } | ProbeVerdict::Failed(_) => Err(match answer {
                Ok(response) => result_of(response).err().unwrap_or_else(|| {
                    CallError::new(Code::Internal, "server/discover was refused")
                }),
                Err(e) => e,
            }),
        }
    }

    /// The older HTTP shapes, reached by a fallback for `why` (or chosen).
    async fn legacy_http(
        link: HttpLinkConfig,
        why: Option<&str>,
        probe_error: Option<i64>,
    ) -> Result<Self, CallError> {
        let channel = StdioChannel::connect(StdioChannelConfig::legacy_http(link)).await?;
        let mut era = channel.era();
        if let Some(info) = era.as_mut() {
            info.fallback = why.map(|w| format!("server/discover: {w}"));
            info.probe_error = probe_error;
        }
        Ok(Self {
            transport: Transport::LegacyHttp(channel),
            era,
        })
    }

    /// A client of `address`: `http://` or `https://` (Streamable HTTP, the
    /// era probed), or `grpc://HOST:PORT` (the gRPC tunnel, cleartext).
    /// A stdio server is [`Client::stdio`]; TLS for gRPC is
    /// [`Client::grpc`] with a [`grpc::Config`].
    pub async fn connect(address: &str) -> Result<Self, CallError> {
        if address.starts_with("http://") || address.starts_with("https://") {
            return Self::http(HttpChannelConfig::new(address), EraChoice::Probe).await;
        }
        if let Some(authority) = grpc_authority(address)? {
            return Self::grpc(grpc::Config::new(authority)).await;
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
            Transport::Engine(e) => match e.grpc {
                Some(grpc::Mode::Typed) => "gRPC typed binding (tunnel fallback)",
                Some(grpc::Mode::Tunnel) => "gRPC tunnel",
                None => "stdio",
            },
            Transport::Http(_) => "Streamable HTTP",
            Transport::LegacyHttp(_) => match self.era.as_ref().map(|e| e.era) {
                Some(Era::HttpSse) => "HTTP+SSE (2024-11-05)",
                _ => "Streamable HTTP with a session (2025-11-25)",
            },
        }
    }

    /// The era spoken, the versions and whether a fallback occurred (for
    /// gRPC, where there is one era, `None`).
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
        Ok(Call(match &self.transport {
            Transport::Engine(e) => CallKind::Engine(e.call(request, timeout).await?),
            Transport::Http(c) => CallKind::Http(c.call_with_timeout(request, timeout).await?),
            Transport::LegacyHttp(c) => {
                CallKind::Line(c.call_with_timeout(request, timeout).await?)
            }
        }))
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
            return Ok(Call(CallKind::Engine(call)));
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
    /// Over gRPC and stdio the rounds are the core engine's (one request timeout for
    /// the whole call; each round's request has its own id, the first's
    /// with `#1`, `#2`... appended).
    pub async fn call_tool_with_input(
        &self,
        name: &str,
        arguments: impl Serialize,
        capabilities: Value,
        mut on_input: impl FnMut(&Map<String, Value>) -> Result<Map<String, Value>, CallError>,
    ) -> Result<CallToolResult, CallError> {
        let mut params = named_params(name, arguments)?;
        params["_meta"] = json!({ "io.modelcontextprotocol/clientCapabilities": capabilities });
        if let Transport::Engine(e) = &self.transport {
            return e.call_tool_with_input(params, &mut on_input).await;
        }
        // The rounds here, until HTTP moves onto the dispatcher.
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

    /// Opens a `subscriptions/listen` stream with `params` (its filter):
    /// the acknowledgement and the change notifications arrive on the
    /// returned call, without a timeout, until it is dropped (which ends
    /// the subscription) or the server ends it.
    pub async fn listen(&self, params: Value) -> Result<Call, CallError> {
        self.call(json!({"jsonrpc": "2.0", "method": "subscriptions/listen", "params": params}))
            .await
    }

    /// Ends the client: a stdio child is stopped (stdin closed, then
    /// SIGTERM, then SIGKILL) and a 2025 HTTP session deleted; network
    /// connections close as the last clone goes. How a child or a session
    /// ended, when there was one.
    pub async fn close(&self) -> Option<Stopped> {
        match &self.transport {
            Transport::LegacyHttp(c) => Some(c.shutdown().await),
            Transport::Engine(e) => {
                let (done, closed) = tokio::sync::oneshot::channel();
                if e.handle.send(Command::Close { done }) {
                    let _ = closed.await;
                }
                match &e.stops {
                    Some(stops) => Some(stops.last().await),
                    None => None,
                }
            }
            Transport::Http(_) => None,
        }
    }

    /// How many times the client opened a new link after its first: a
    /// stdio server started again, a new connection after one went away.
    pub async fn reconnects(&self) -> u64 {
        match &self.transport {
            Transport::Engine(e) => dispatch::status(&e.handle)
                .await
                .map_or(0, |s| s.links.saturating_sub(1)),
            _ => 0,
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
            Transport::Http(c) => c.cached_schema(tool),
            Transport::LegacyHttp(_) => None,
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
        let method = match &self.capabilities {
            Some(capabilities) => complete_request(&mut request, &self.next_id, capabilities)?.0,
            None => complete_id(&mut request, &self.next_id)?,
        };
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

typed_helpers!(Client, Call, "");

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
