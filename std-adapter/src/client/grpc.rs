//! The gRPC binding's client configuration ([`Config`]): a server's
//! `host:port`, cleartext HTTP/2 with prior knowledge or TLS with ALPN
//! `h2`, the tunnel or the typed binding ([`Mode`]), and what every call
//! carries. [`Client::grpc`](super::Client::grpc) runs the core's
//! [`TunnelClient`] with it.

use std::time::Duration;

use mcpwire_core::mcp::client::{Binding, ClientConfig, Negotiated, TunnelClient};
use serde_json::{Value, json};

use super::dispatch::{self, Handle};
use super::link::{self, Connector, Opening};
use crate::storage::HeapStorage;
use crate::store::HeapStore;

pub use mcpwire_core::mcp::client::Keepalive;
/// The method path of the tunnel binding.
pub use mcpwire_proto::tunnel::CALL_PATH;

/// The request timeout when none is set (binding: `limits.request_timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_MAX_MESSAGE: usize = 4 << 20;
/// Calls a connection runs at a time; more wait for a free one.
pub const MAX_CONCURRENT_CALLS: usize = CALLS;

/// Calls in progress on one connection (and HTTP/2 streams).
const CALLS: usize = 32;
/// Octets of cached schemas with `x-mcp-header` annotations.
const CACHE: usize = 16 << 10;
/// Room a call's buffer has besides its largest message: the framing, the
/// notifications that share a read chunk with a message, an error
/// response synthesized after it.
const BUF_SLACK: usize = 64 << 10;

/// The tunnel's engine on tokio: [`CALLS`] calls a connection, each with
/// buffers on the heap that hold what it uses and go back when it ends; a
/// 4 KiB HPACK table; 16 KiB HTTP/2 frame buffers on the heap while in
/// use; [`CACHE`] octets of annotation cache.
type Engine = TunnelClient<HeapStore, CALLS, 4096, 16384, HeapStorage<16384>, CACHE>;

/// How a gRPC client connects and what every call carries.
#[derive(Debug, Clone)]
pub struct Config {
    /// `host:port` of the server: cleartext HTTP/2 with prior knowledge,
    /// or TLS with ALPN `h2` when [`tls`](Self::tls) is set.
    pub addr: String,
    /// TLS (ALPN `h2`, `:scheme https`); `None` for cleartext.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::tls::ClientTlsConfig>,
    /// A bearer token sent as `authorization: Bearer <token>` with every
    /// call.
    pub bearer: Option<String>,
    /// Other metadata sent with every call.
    pub metadata: Vec<(String, String)>,
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
    pub mode: Mode,
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

/// Which gRPC binding a client's calls go over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
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

impl Mode {
    pub(crate) fn binding(self) -> Binding {
        match self {
            Self::Tunnel => Binding::Tunnel,
            Self::Typed => Binding::TypedOrTunnel,
        }
    }
}

impl Config {
    pub fn new(addr: impl Into<String>) -> Self {
        Self {
            addr: addr.into(),
            #[cfg(feature = "tls")]
            tls: None,
            bearer: None,
            metadata: Vec::new(),
            request_timeout: DEFAULT_TIMEOUT,
            client_capabilities: json!({}),
            max_message_bytes: DEFAULT_MAX_MESSAGE,
            mode: Mode::Tunnel,
            keepalive: None,
        }
    }

    /// The core engine's settings.
    fn engine(&self) -> ClientConfig {
        ClientConfig {
            #[cfg(feature = "tls")]
            scheme: if self.tls.is_some() { "https" } else { "http" },
            #[cfg(not(feature = "tls"))]
            scheme: "http",
            request_timeout: self.request_timeout,
            max_message_bytes: self.max_message_bytes,
            keepalive: self.keepalive,
            ..ClientConfig::default()
        }
    }

    /// Starts the engine's task; an error for metadata the engine cannot
    /// carry.
    pub(crate) fn spawn(&self) -> Result<Handle, String> {
        let store = HeapStore::new(self.max_message_bytes.saturating_add(BUF_SLACK));
        let mut engine = Box::new(Engine::new(self.engine(), store));
        let bearer = self.bearer.as_ref().map(|t| format!("Bearer {t}"));
        let pairs: Vec<(&str, &str)> = self
            .metadata
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .chain(bearer.as_deref().map(|b| ("authorization", b)))
            .collect();
        if !engine.set_metadata(Some(&self.addr), &pairs, crate::clock::now()) {
            return Err("a metadata name or value is over 65535 octets".to_owned());
        }
        let connector = GrpcConnector {
            addr: self.addr.clone(),
            #[cfg(feature = "tls")]
            tls: self.tls.clone(),
        };
        Ok(dispatch::spawn(engine, connector))
    }
}

/// Opens the tunnel's connections.
struct GrpcConnector {
    addr: String,
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::ClientTlsConfig>,
}

impl Connector for GrpcConnector {
    fn connect(&self, _: mcpwire_core::mcp::client::LinkId) -> Opening {
        let addr = self.addr.clone();
        #[cfg(feature = "tls")]
        let tls = self.tls.clone();
        Box::pin(async move {
            let tcp = link::tcp(&addr).await?;
            #[cfg(feature = "tls")]
            if let Some(tls) = tls {
                // The handshake refuses a server that did not choose h2.
                let tls = tls.connect(&addr, tcp).await?;
                return Ok((Box::new(tls) as link::BoxIo, Negotiated::Http2));
            }
            Ok((Box::new(tcp) as link::BoxIo, Negotiated::Nothing))
        })
    }

    fn describe(&self) -> String {
        format!("connect to {}", self.addr)
    }
}
