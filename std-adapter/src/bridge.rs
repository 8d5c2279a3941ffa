//! A bridge as a library: a host reaches a server through an [`App`] that
//! forwards every request the host side admits to one downstream
//! [`Client`] (any transport: Streamable HTTP, the gRPC tunnel, a stdio
//! child or a serial device), served on any host side ([`App::serve_stdio`],
//! [`Server::serve`](crate::Server::serve)).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use mcpwire_tokio::{Server, bridge::Bridge};
//! let bridge = Bridge::builder()
//!     .timeout(Some(std::time::Duration::from_secs(30)))
//!     .connect_to("grpc://127.0.0.1:50051")
//!     .await?;
//! Server::bind("127.0.0.1:8080").await?.serve(bridge.app()).await?;
//! # Ok(()) }
//! ```
//!
//! What is forwarded, and how (every protocol judgement is the core's,
//! [`mcpwire_core::mcp::proxy`]):
//! - each request unchanged but for its id (the client picks the
//!   downstream one; the engine puts the host's back on the answer) and its
//!   progress token (downstream the bridge's own, unique in the process; the
//!   host's goes back on each `notifications/progress`); a listen's
//!   subscription id and the `requestId` of the server's cancel that ends
//!   it are the host's id again;
//! - a gRPC host's deadline goes downstream (what is left of it, bounded by
//!   [`Builder::timeout`]); the host's cancel drops the downstream call;
//! - a host that cannot page (the typed binding's list RPCs) gets the
//!   server's pages merged, up to
//!   [`MAX_LIST_PAGES`](crate::client::MAX_LIST_PAGES) pages and
//!   [`Builder::max_list_bytes`];
//! - a call that breaks downstream is a JSON-RPC error that says so
//!   (`data.grpcStatus`, `data.httpStatus`); the server's own errors go back
//!   as they came;
//! - an older-era server (2025-11-25, 2024-11-05) is served as 2026-07-28:
//!   its `server/discover` is the bridge's, from the lists it answers, and
//!   its results get the current era's members;
//! - the server's tool schemas are learnt ([`LearntTools`]) so that a
//!   forwarded `tools/call`'s `Mcp-Param-*` headers are checked;
//! - a server that refuses the bridge (its credentials, its versions) does
//!   not end it ([`Reconnect`]): each request gets the refusal, and the
//!   server is tried again at the next.
//!
//! A gateway before several servers forwards each request to one
//! [`Bridge`] of its choice ([`Bridge::forward`], [`Bridge::forward_params`]
//! for a request whose `params` it changed) from its own [`App::forward`].

mod forward;

pub(crate) use forward::written;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::mcp::client::stdio::Era;
use mcpwire_core::mcp::meta::PROTOCOL_VERSION;
use mcpwire_core::mcp::proxy::era::{self, Discover};
use mcpwire_core::mcp::proxy::{List, Method, Refusal};
use serde_json::Value;

use crate::{
    App, CallError, Client, ForwardRequest, ForwardResult, LearntTools, Reconnect, ToolError,
    refused_discover, server_refusal,
};

/// The longest wait for the server's tool list before a bridge is ready
/// (by default): a slower list is learnt in the background, and until then
/// a call with an `Mcp-Param-*` header is refused (-32020), as it cannot
/// be checked.
pub const FIRST_LIST_WAIT: Duration = Duration::from_secs(5);

type Hook = dyn Fn(&Client) + Send + Sync;

/// A bridge's settings ([`Bridge::builder`]).
pub struct Builder {
    name: String,
    version: String,
    timeout: Option<Duration>,
    learn_tools: bool,
    first_list_wait: Duration,
    max_list_bytes: usize,
    on_reconnect: Option<Box<Hook>>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .field("learn_tools", &self.learn_tools)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            name: "mcpwire-bridge".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            timeout: None,
            learn_tools: true,
            first_list_wait: FIRST_LIST_WAIT,
            max_list_bytes: crate::ServerConfig::default().max_message_bytes,
            on_reconnect: None,
        }
    }
}

impl Builder {
    /// The `serverInfo` of the discovery the bridge answers itself (an
    /// older-era server's, a refusing server's) and of its app.
    pub fn server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// A forwarded call's longest wait (a gRPC host's deadline, when
    /// shorter, wins); listen streams have none but the host's. Without
    /// it, the host's deadline, else the client's default.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether the server's tool schemas are learnt and a forwarded
    /// `tools/call`'s `Mcp-Param-*` headers held to them (default: yes).
    pub fn learn_tools(mut self, learn: bool) -> Self {
        self.learn_tools = learn;
        self
    }

    /// How long a connection waits for the server's first tool list
    /// (default [`FIRST_LIST_WAIT`]).
    pub fn first_list_wait(mut self, wait: Duration) -> Self {
        self.first_list_wait = wait;
        self
    }

    /// The most octets a merged list gathers, and of a call's
    /// notifications held for a host that does not take them (default:
    /// the host side's largest message, [`ServerConfig`](crate::ServerConfig)).
    pub fn max_list_bytes(mut self, max: usize) -> Self {
        self.max_list_bytes = max;
        self
    }

    /// Called with the client when the server lets the bridge in after it
    /// had refused it.
    pub fn on_reconnect(mut self, hook: impl Fn(&Client) + Send + Sync + 'static) -> Self {
        self.on_reconnect = Some(Box::new(hook));
        self
    }

    /// A bridge to the server `connect` reaches, connected now. A server
    /// that refuses the bridge ([`server_refusal`]) does not fail it: the
    /// bridge answers each request with the refusal and calls `connect`
    /// again at the next ([`Bridge::refusal`]); any other failure is the
    /// error.
    pub async fn connect<F, Fut>(self, connect: F) -> Result<Bridge, CallError>
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Client, CallError>> + Send + 'static,
    {
        let on_reconnect = self.on_reconnect;
        let shared = Arc::new(Shared::new(self.name, self.version, self.learn_tools));
        let options = Options {
            timeout: self.timeout,
            max_bytes: self.max_list_bytes,
        };
        let wait = self.first_list_wait;
        let (first, again) = {
            let shared = Arc::clone(&shared);
            let connect = Arc::new(connect);
            let on_reconnect = Arc::new(on_reconnect);
            let attempt = move |again: bool| {
                let (shared, connect) = (Arc::clone(&shared), Arc::clone(&connect));
                let on_reconnect = Arc::clone(&on_reconnect);
                async move {
                    let client = connect().await?;
                    if again && let Some(hook) = on_reconnect.as_ref() {
                        hook(&client);
                    }
                    Ok(shared.attach(client, wait).await)
                }
            };
            (attempt(false), move || attempt(true))
        };
        let (downstream, refusal) = match first.await {
            Ok(connected) => (Reconnect::connected(connected), None),
            Err(e) => match server_refusal(&e) {
                Some(refusal) => (Reconnect::new(again), Some(refusal)),
                None => return Err(e),
            },
        };
        Ok(Bridge(Arc::new(Inner {
            downstream,
            shared,
            options,
            refusal,
        })))
    }

    /// [`connect`](Self::connect) with [`Client::connect`] to `address`
    /// (`grpc://HOST:PORT`, `http://`, `https://`).
    pub async fn connect_to(self, address: impl Into<String>) -> Result<Bridge, CallError> {
        let address: Arc<str> = address.into().into();
        self.connect(move || {
            let address = Arc::clone(&address);
            async move { Client::connect(&address).await }
        })
        .await
    }

    /// A bridge to `client`'s server, connected already.
    pub async fn client(self, client: Client) -> Bridge {
        let shared = Arc::new(Shared::new(self.name, self.version, self.learn_tools));
        let connected = shared.attach(client, self.first_list_wait).await;
        Bridge(Arc::new(Inner {
            downstream: Reconnect::connected(connected),
            shared,
            options: Options {
                timeout: self.timeout,
                max_bytes: self.max_list_bytes,
            },
            refusal: None,
        }))
    }
}

/// A bridge to one server: [`app`](Self::app) serves it on a host side;
/// [`forward`](Self::forward) forwards one request (a gateway's routing).
/// Cheap to clone.
#[derive(Clone)]
pub struct Bridge(Arc<Inner>);

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("downstream", &self.0.downstream)
            .field("refusal", &self.0.refusal)
            .finish_non_exhaustive()
    }
}

struct Inner {
    downstream: Reconnect<Connected>,
    shared: Arc<Shared>,
    options: Options,
    /// The server refused the bridge at the start.
    refusal: Option<ToolError>,
}

/// What every forwarded call reads.
#[derive(Debug, Clone, Copy)]
struct Options {
    timeout: Option<Duration>,
    max_bytes: usize,
}

/// What outlives a connection: the learnt schemas and their learner.
struct Shared {
    name: String,
    version: String,
    tools: Option<Arc<LearntTools>>,
    learner: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The server side, connected.
#[derive(Debug)]
struct Connected {
    client: Client,
    /// An older-era server's `server/discover` result, the bridge's.
    discover: Option<Vec<u8>>,
}

impl Shared {
    fn new(name: String, version: String, learn_tools: bool) -> Self {
        Self {
            name,
            version,
            tools: learn_tools.then(|| Arc::new(LearntTools::new())),
            learner: Mutex::new(None),
        }
    }

    /// A connection's start: an older-era server's discovery made from
    /// what it answers; its tool schemas read (up to `wait`), then kept
    /// in the background.
    async fn attach(&self, client: Client, wait: Duration) -> Connected {
        let older = client.era().is_some_and(|era| era.era != Era::Modern);
        let discover = match older {
            true => Some(self.legacy_discover(&client).await),
            false => None,
        };
        if let Some(tools) = &self.tools {
            let learner = {
                let (tools, client) = (Arc::clone(tools), client.clone());
                tokio::spawn(async move { tools.follow(&client).await })
            };
            if let Ok(mut slot) = self.learner.lock()
                && let Some(old) = slot.replace(learner)
            {
                old.abort();
            }
            let _ = tokio::time::timeout(wait, tools.first_read()).await;
        }
        Connected { client, discover }
    }

    /// The `server/discover` result of an older-era server: the lists it
    /// answers are its capabilities; the version is the host side's.
    async fn legacy_discover(&self, client: &Client) -> Vec<u8> {
        let params: Value = serde_json::from_str(era::OWN_PARAMS).unwrap_or_default();
        let mut capabilities = Vec::new();
        for list in era::PROBES {
            if let Ok(answer) = client.request(list.method(), params.clone()).await
                && answer.get("result").is_some()
            {
                capabilities.push(list.capability());
            }
        }
        let discover = Discover {
            capabilities: &capabilities,
            instructions: None,
            name: &self.name,
            version: &self.version,
        };
        forward::written(512, |out| era::write_discover(&discover, out))
    }
}

impl Bridge {
    /// A bridge's settings.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The forwarding app: every request the host side admits goes to
    /// [`forward`](Self::forward); the learnt schemas check the
    /// `Mcp-Param-*` headers of forwarded tool calls.
    pub fn app(&self) -> App {
        let bridge = self.clone();
        let app = App::new(&self.0.shared.name, &self.0.shared.version).forward(move |request| {
            let bridge = bridge.clone();
            async move { bridge.forward(&request).await }
        });
        match &self.0.shared.tools {
            Some(tools) => app.forward_tools(Arc::clone(tools)),
            None => app,
        }
    }

    /// Forwards `request` to the server and sends its notifications to the
    /// host: its result, or the JSON-RPC error for the host.
    pub async fn forward(&self, request: &ForwardRequest) -> Result<ForwardResult, ToolError> {
        self.forward_with(request, None).await
    }

    /// [`forward`](Self::forward) with `params` (JSON text, an object with
    /// the host's `_meta`) in place of the request's: a gateway's changed
    /// request (a tool name without its routing prefix).
    pub async fn forward_params(
        &self,
        request: &ForwardRequest,
        params: &[u8],
    ) -> Result<ForwardResult, ToolError> {
        self.forward_with(request, Some(params)).await
    }

    async fn forward_with(
        &self,
        request: &ForwardRequest,
        params: Option<&[u8]>,
    ) -> Result<ForwardResult, ToolError> {
        let method = Method::of(request.method());
        let connected = match self.0.downstream.get().await {
            Ok(c) => c,
            Err(e) => return self.refused(method, e),
        };
        let client = &connected.client;
        let options = &self.0.options;
        let result = match (method, &connected.discover) {
            (Method::Discover, Some(discover)) => Ok(discover.clone()),
            (Method::Discover, None) => {
                match forward::request(client, request, params, options).await {
                    Ok(result) => Ok(result),
                    Err(e) => return self.refused(method, e),
                }
            }
            (_, None) => forward::request(client, request, params, options).await,
            (_, Some(_)) => forward::request(client, request, params, options)
                .await
                .map(|r| {
                    forward::written(r.len() + era::ADDED_MAX, |out| {
                        era::current_era_result(method, &r, out)
                    })
                }),
        }?;
        if let (Method::List(List::Tools), Some(tools)) = (method, &self.0.shared.tools) {
            tools.learn_answer_raw(params.unwrap_or(request.raw_params()), &result);
        }
        ForwardResult::raw(result)
            .ok_or_else(|| ToolError::internal("the forwarded result is not a JSON object"))
    }

    /// The answer while the server refuses the bridge: the refusal, but a
    /// host's discovery is the bridge's while its credentials are refused
    /// (the host learns of the refusal at its next request, not from a
    /// legacy fallback that hides it).
    fn refused(&self, method: Method, e: ToolError) -> Result<ForwardResult, ToolError> {
        let shared = &self.0.shared;
        match method {
            Method::Discover => refused_discover(&e, &shared.name, &shared.version)
                .map(ForwardResult::Value)
                .ok_or(e),
            _ => Err(e),
        }
    }

    /// The refusal of the server when the bridge started, if it refused:
    /// the bridge tries again at each request until it lets it in.
    pub fn refusal(&self) -> Option<&ToolError> {
        self.0.refusal.as_ref()
    }

    /// The client of the server, once connected.
    pub fn client(&self) -> Option<Client> {
        self.0.downstream.current().map(|c| c.client.clone())
    }

    /// The server's tool schemas as learnt (`None` without
    /// [`Builder::learn_tools`]).
    pub fn tools(&self) -> Option<&Arc<LearntTools>> {
        self.0.shared.tools.as_ref()
    }

    /// Stops learning and closes the server side (a stdio child stopped, a
    /// session deleted).
    pub async fn close(&self) {
        if let Ok(mut slot) = self.0.shared.learner.lock()
            && let Some(learner) = slot.take()
        {
            learner.abort();
        }
        if let Some(c) = self.0.downstream.current() {
            c.client.close().await;
        }
    }
}

/// The server side in words: the transport, `target` (an address without
/// credentials, a program, a device), the era and versions, and the era
/// translation of an older-era server.
pub fn server_side(client: &Client, target: &str) -> String {
    let transport = client.transport_name();
    let Some(era) = client.era() else {
        return format!("{transport} {target} (MCP {PROTOCOL_VERSION}, the binding's one era)");
    };
    let mut out = format!("{transport} {target} ({era})");
    if era.era != Era::Modern {
        out.push_str(&format!(
            "; the server speaks {} {}: the host side stays MCP {PROTOCOL_VERSION} and its server/discover is answered from what the server reported",
            era.era.describe(),
            era.version
        ));
    }
    out
}

/// Completes at SIGTERM or Ctrl-C (never, when neither can be watched):
/// where a bridge in a process of its own ends.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                r = tokio::signal::ctrl_c() => if r.is_err() {
                    term.recv().await;
                },
            }
            return;
        }
    }
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The refusal in a failed call, as the core judges it.
pub(crate) fn refusal_of(e: &CallError) -> Option<Refusal> {
    let rpc = e.rpc.as_deref().map(|r| r.code);
    Refusal::of(e.diagnostics.http_status, e.status, rpc)
}
