//! The tokio driver of the tunnel server engine: [`Server`] binds, accepts
//! (and, with TLS, handshakes and follows ALPN), and runs each
//! connection in its own task: [`connection`] is the run loop between a
//! socket and the engine, [`calls`] the handlers it runs (for the stdio
//! binding of [`stdio`] too).
//!
//! The engine of `mcpwire-core` makes every MCP decision (routing,
//! protocol errors, `subscriptions/listen`, bearer-token challenges); this
//! module only moves octets, time and answers.

mod calls;
mod connection;
mod http;
mod limits;
pub mod stdio;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mcpwire_core::mcp::server as engine;
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::app::App;
use crate::auth::Auth;
use crate::storage::HeapStorage;
use crate::store::HeapStore;
#[cfg(feature = "tls")]
use crate::tls::{ALPN_H2, ALPN_HTTP1, TlsConfig};
use connection::{Common, Shared};
use limits::Limits;

/// Calls one connection's engine holds at once (listen streams included).
const CALLS: usize = 32;

/// The engine of one connection: [`CALLS`] concurrent calls, a 4 KiB HPACK
/// table, 8 KiB HTTP/2 buffers (the largest request head) held only while
/// in use, and a heap buffer per call while it lasts, sized to its request
/// and to each message of its response.
pub(crate) type ConnEngine =
    engine::Server<'static, HeapStore, CALLS, 4096, 8192, HeapStorage<8192>>;

/// A server's settings.
///
/// ```
/// use std::time::Duration;
/// use mcpwire_tokio::ServerConfig;
/// let config = ServerConfig {
///     request_timeout: Duration::from_secs(10),
///     max_concurrent_calls: 8,
///     ..ServerConfig::default()
/// };
/// # let _ = config;
/// ```
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The deadline of a call that sends no `grpc-timeout` (not of
    /// `subscriptions/listen`). Default 60 s.
    pub request_timeout: Duration,
    /// The largest request message (protobuf-encoded, without the 5-octet
    /// gRPC prefix); a larger one ends its call with RESOURCE_EXHAUSTED.
    /// Each running call holds a buffer of about this size, and at most
    /// this much of a call's notifications wait for a client that does not
    /// read them: the handler's next one waits (as a gRPC send waits for
    /// the window). Default 4 MiB.
    pub max_message_bytes: usize,
    /// Calls one connection may run at once, listen streams included
    /// (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`); at most
    /// [`ServerConfig::MAX_CONCURRENT_CALLS`]. Default that.
    pub max_concurrent_calls: u32,
    /// What a client may send on one call before its handler reads it
    /// (HTTP/2 `SETTINGS_INITIAL_WINDOW_SIZE`). Default 1 MiB.
    pub stream_window: u32,
    /// What a client may send on a connection before its calls read it.
    /// Default 4 MiB.
    pub connection_window: u32,
    /// The largest HTTP/2 frame a client may send
    /// (`SETTINGS_MAX_FRAME_SIZE`, kept within 16 KiB to 16 MiB). Default
    /// 16 KiB.
    pub max_frame_size: u32,
    /// How long connections get to finish their calls after shutdown
    /// before they are closed. Default 5 s.
    pub shutdown_grace: Duration,
    /// How long a TLS handshake may take, and a new connection's first
    /// request (an HTTP/1.1 request head; HTTP/2's preface, SETTINGS and
    /// first HEADERS): a connection that sends none in time is closed.
    /// Default 10 s.
    pub handshake_timeout: Duration,
    /// The Streamable HTTP endpoint (MCP §5), served on the same port
    /// over HTTP/1.1 and HTTP/2 alike: other paths are answered 404 (on
    /// HTTP/2, those that are not gRPC calls). Default `/mcp`.
    pub http_path: String,
    /// The longest HTTP/1.1 request head; a longer one is answered 431.
    /// Default 8 KiB.
    pub max_head_bytes: usize,
    /// How long a connection with no call in progress is kept: an
    /// HTTP/1.1 keep-alive connection between requests, an HTTP/2
    /// connection with no stream open (then told GOAWAY). A listen stream
    /// is a call in progress. Default 60 s.
    pub idle_timeout: Duration,
    /// Connections served at once. At the cap the server stops accepting
    /// until one ends (new clients wait in the listen backlog); idle ones
    /// end by [`ServerConfig::idle_timeout`] and
    /// [`ServerConfig::handshake_timeout`]. Keep it below the process's
    /// descriptor limit. Default 10,000.
    pub max_connections: usize,
    /// Connections one peer IP address may hold at once; a connection past
    /// it is closed as soon as it is accepted, so one client cannot take
    /// the whole [`ServerConfig::max_connections`]. Default 1,000.
    pub max_connections_per_address: usize,
    /// Listen streams (`subscriptions/listen`) the server keeps at once,
    /// over all its connections; the next is answered in-band -32603. Each
    /// holds a call of its connection (and, on HTTP/1.1, the connection).
    /// Default 4,096.
    pub max_listen_streams: usize,
    /// Listen streams one authenticated principal may keep at once (the
    /// streams of a server without authentication count against
    /// [`ServerConfig::max_listen_streams`] only). Default 256.
    pub max_listen_streams_per_principal: usize,
    /// The longest listen request (its `params`: the filter, a
    /// `resourceSubscriptions` array) a listen stream may have: the server
    /// keeps it for the stream's life. A longer one is answered -32602.
    /// Default 16 KiB.
    pub max_listen_request_bytes: usize,
    /// How long a connection's output may wait at its high-water mark
    /// (64 KiB; meanwhile nothing more is read from the client) with the
    /// client taking none of it, before the connection is closed: a client
    /// that sends and never reads holds a bounded backlog for a bounded
    /// time. Default 60 s.
    pub send_timeout: Duration,
    /// The `Host` names (HTTP/2: `:authority` and `host`) and `Origin`
    /// hosts Streamable HTTP requests may carry (the guard against DNS
    /// rebinding, §5.1), on HTTP/1.1 and HTTP/2 alike; others are answered
    /// 403. Default [`AllowedHosts::Loopback`].
    pub allowed_hosts: AllowedHosts,
    /// The URL of the server's OAuth protected resource metadata (RFC
    /// 9728), named in the `WWW-Authenticate` challenge of an HTTP 401 or
    /// 403 (HTTP/1.1 and HTTP/2).
    pub resource_metadata: Option<String>,
    /// How often a Streamable HTTP event stream with nothing to say sends
    /// a comment, so that proxies with an idle timeout keep it open
    /// (HTTP/1.1 and HTTP/2). Default 15 s.
    pub keep_alive_interval: Duration,
}

/// The `Host` names and `Origin` hosts an HTTP server accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    /// `localhost`, `127.0.0.0/8` and `[::1]`: a server on a loopback
    /// address.
    Loopback,
    /// Loopback names and these host names (without port;
    /// case-insensitive).
    Hosts(Vec<String>),
    /// Any: for a server behind a proxy that checks them.
    Any,
}

impl AllowedHosts {
    /// The core's form; the names live as long as the program (a server
    /// is configured once).
    fn to_core(&self) -> engine::Allowed<'static> {
        match self {
            Self::Loopback => engine::Allowed::Loopback,
            Self::Any => engine::Allowed::Any,
            Self::Hosts(names) => {
                let names: Vec<&'static str> = names
                    .iter()
                    .map(|n| &*Box::leak(n.clone().into_boxed_str()))
                    .collect();
                engine::Allowed::Hosts(Box::leak(names.into_boxed_slice()))
            }
        }
    }
}

impl ServerConfig {
    /// The most calls a connection runs at once.
    pub const MAX_CONCURRENT_CALLS: u32 = CALLS as u32;

    /// The Streamable HTTP endpoint both engines serve. Its strings live
    /// as long as the program: call once per server.
    fn endpoint(&self) -> engine::HttpEndpoint<'static> {
        let leak = |s: &str| &*Box::leak(s.to_owned().into_boxed_str());
        let allowed = self.allowed_hosts.to_core();
        engine::HttpEndpoint {
            path: leak(&self.http_path),
            allowed_hosts: allowed,
            allowed_origins: allowed,
            resource_metadata: self.resource_metadata.as_deref().map(leak),
            keep_alive_interval: self.keep_alive_interval,
        }
    }

    /// The engine's settings; `authorize` when the server has an [`Auth`].
    fn engine(
        &self,
        authorize: bool,
        http: engine::HttpEndpoint<'static>,
    ) -> engine::ServerConfig<'static> {
        let defaults = engine::ServerConfig::default();
        engine::ServerConfig {
            h2: mcpwire_core::h2::Config {
                initial_window_size: self.stream_window,
                connection_window_size: self.connection_window,
                max_frame_size: self.max_frame_size,
                max_concurrent_streams: self.max_concurrent_calls.min(Self::MAX_CONCURRENT_CALLS),
                idle_timeout: Some(self.idle_timeout),
                handshake_timeout: Some(self.handshake_timeout),
                ..defaults.h2
            },
            max_message_bytes: self.max_message_bytes,
            request_timeout: self.request_timeout,
            authorize,
            http,
        }
    }

    /// The listen limits of the server's engines, with one count of its
    /// listen streams across its connections (it lives as long as the
    /// program: call once per server).
    fn listen_limits(&self) -> engine::ListenLimits<'static> {
        let counts = limits::ListenCounts::new(
            self.max_listen_streams,
            self.max_listen_streams_per_principal,
        );
        engine::ListenLimits {
            quota: Some(Box::leak(Box::new(counts))),
            max_request_bytes: self.max_listen_request_bytes,
        }
    }

    /// The Streamable HTTP binding's settings over HTTP/1.1.
    fn http(
        &self,
        authorize: bool,
        endpoint: engine::HttpEndpoint<'static>,
    ) -> engine::HttpConfig<'static> {
        engine::HttpConfig {
            endpoint,
            max_head_bytes: self.max_head_bytes,
            max_body_bytes: self.max_message_bytes,
            head_timeout: self.handshake_timeout,
            idle_timeout: self.idle_timeout,
            request_timeout: self.request_timeout,
            authorize,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let engine = engine::ServerConfig::default();
        let http = engine::HttpConfig::default();
        Self {
            request_timeout: engine.request_timeout,
            max_message_bytes: engine.max_message_bytes,
            max_concurrent_calls: Self::MAX_CONCURRENT_CALLS,
            stream_window: engine.h2.initial_window_size,
            connection_window: engine.h2.connection_window_size,
            max_frame_size: engine.h2.max_frame_size,
            shutdown_grace: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            http_path: http.endpoint.path.to_owned(),
            max_head_bytes: http.max_head_bytes,
            idle_timeout: http.idle_timeout,
            send_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_connections_per_address: 1_000,
            max_listen_streams: 4_096,
            max_listen_streams_per_principal: 256,
            max_listen_request_bytes: engine::ListenLimits::default().max_request_bytes,
            allowed_hosts: AllowedHosts::Loopback,
            resource_metadata: None,
            keep_alive_interval: http.endpoint.keep_alive_interval,
        }
    }
}

/// A tunnel server bound to a TCP address: cleartext HTTP/2 with prior
/// knowledge and HTTP/1.1, or TLS with ALPN `h2` and `http/1.1` (feature
/// `tls`); optionally with
/// bearer-token authentication of every call ([`Server::with_auth`]).
pub struct Server {
    listener: TcpListener,
    config: ServerConfig,
    auth: Option<Arc<dyn Auth>>,
    #[cfg(feature = "tls")]
    tls: Option<TlsConfig>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Server");
        d.field("listener", &self.listener)
            .field("config", &self.config)
            .field("auth", &self.auth.is_some());
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls.is_some());
        d.finish()
    }
}

impl Server {
    /// Binds `addr` (for example `127.0.0.1:50051`; port 0 picks one).
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<Self> {
        Ok(Self {
            listener: TcpListener::bind(addr).await?,
            config: ServerConfig::default(),
            auth: None,
            #[cfg(feature = "tls")]
            tls: None,
        })
    }

    /// Binds `addr` for TLS with the PEM certificate chain (leaf first) and
    /// private key; ALPN `h2` and `http/1.1` (see [`Server::with_tls`]).
    #[cfg(feature = "tls")]
    pub async fn bind_tls(
        addr: impl ToSocketAddrs,
        cert_chain_pem: &[u8],
        key_pem: &[u8],
    ) -> io::Result<Self> {
        let tls = TlsConfig::from_pem(cert_chain_pem, key_pem)?;
        Ok(Self::bind(addr).await?.with_tls(tls))
    }

    /// Serves TLS only: ALPN `h2` gets HTTP/2 (the gRPC bindings and
    /// Streamable HTTP), `http/1.1` Streamable HTTP over HTTP/1.1. A client
    /// that offers ALPN with neither is refused in the handshake; one that
    /// offers none is served HTTP/1.1, and closed if it opens HTTP/2 (the
    /// gRPC binding asks for ALPN `h2`).
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Checks every call's bearer token with `auth` before anything is
    /// answered (see [`crate::auth`]): a refused call ends with
    /// UNAUTHENTICATED or PERMISSION_DENIED and a `www-authenticate`
    /// trailer; an allowed one shows the principal to its handler
    /// ([`ToolCall::principal`](crate::ToolCall::principal)).
    pub fn with_auth(mut self, auth: impl Auth) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// The server's settings.
    pub fn with_config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `app` until an accept error that is not transient.
    pub async fn serve(self, app: App) -> io::Result<()> {
        self.serve_with_shutdown(app, std::future::pending()).await
    }

    /// Serves `app` until `signal` completes; then stops accepting, ends
    /// the listen streams with their result, lets running calls finish,
    /// and closes the connections (at most
    /// [`ServerConfig::shutdown_grace`] later).
    pub async fn serve_with_shutdown(
        self,
        app: App,
        signal: impl Future<Output = ()>,
    ) -> io::Result<()> {
        let registry = app
            .registry()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}")))?;
        let (stop_tx, stop_rx) = watch::channel(false);
        // One endpoint for both engines: HTTP/2 and HTTP/1.1 clients are
        // judged alike.
        let endpoint = self.config.endpoint();
        let shared = Shared {
            common: Arc::new(Common {
                registry,
                config: self.config.engine(self.auth.is_some(), endpoint),
                http: self.config.http(self.auth.is_some(), endpoint),
                app: Arc::new(app),
                auth: self.auth.clone(),
                send_timeout: self.config.send_timeout,
                listen: self.config.listen_limits(),
            }),
            stop: stop_rx,
        };
        let mut conns = JoinSet::new();
        let limits = Limits::new(
            self.config.max_connections,
            self.config.max_connections_per_address,
        );
        tokio::pin!(signal);
        loop {
            tokio::select! {
                r = limits.accept(&self.listener) => match r {
                    Ok(Some((socket, admitted))) => {
                        let shared = shared.clone();
                        let handshake = self.config.handshake_timeout;
                        #[cfg(feature = "tls")]
                        if let Some(tls) = &self.tls {
                            let tls = tls.clone();
                            conns.spawn(async move {
                                let _admitted = admitted;
                                serve_tls(socket, tls, handshake, shared).await
                            });
                            continue;
                        }
                        conns.spawn(async move {
                            let _admitted = admitted;
                            serve_tcp(socket, shared, handshake).await
                        });
                    }
                    // Over its address's cap: closed (dropped) at once.
                    Ok(None) => {}
                    // Out of descriptors and the like: wait, then go on.
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                },
                () = &mut signal => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        let _ = stop_tx.send(true);
        let grace = self.config.shutdown_grace;
        let _ =
            tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
        conns.abort_all();
        Ok(())
    }
}

/// The first octets of the HTTP/2 connection preface (RFC 9113 §3.4): no
/// HTTP/1.1 request starts with them.
const PREFACE_START: &[u8] = b"PRI ";

async fn serve_tcp(mut socket: TcpStream, shared: Shared, first_bytes: Duration) -> io::Result<()> {
    socket.set_nodelay(true)?;
    let mut first = [0; PREFACE_START.len()];
    let Some(n) = sniff(&mut socket, &mut first, first_bytes).await? else {
        return Ok(());
    };
    let (rd, wr) = socket.split();
    serve_sniffed(rd, wr, shared, &first[..n]).await
}

/// Reads the first octets of a connection until they show whether it
/// speaks HTTP/2 (the preface) or HTTP/1.1 (anything else); `None` when the
/// peer closed before sending any, an error when it sent nothing in `bound`.
async fn sniff<S: tokio::io::AsyncRead + Unpin>(
    socket: &mut S,
    first: &mut [u8; PREFACE_START.len()],
    bound: Duration,
) -> io::Result<Option<usize>> {
    use tokio::io::AsyncReadExt;

    let mut n = 0;
    let read = async {
        while n < first.len() && PREFACE_START.starts_with(&first[..n]) {
            match socket.read(&mut first[n..]).await? {
                0 => break,
                k => n += k,
            }
        }
        io::Result::Ok(())
    };
    tokio::time::timeout(bound, read)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no request arrived in time"))??;
    Ok((n > 0).then_some(n))
}

/// Serves a connection whose first octets are `first`: HTTP/2 after the
/// preface, HTTP/1.1 otherwise.
async fn serve_sniffed<R, W>(rd: R, wr: W, shared: Shared, first: &[u8]) -> io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    if first == PREFACE_START {
        connection::serve(rd, wr, shared, first).await
    } else {
        http::serve(rd, wr, shared, first).await
    }
}

/// The TLS handshake, the ALPN check, then the connection as in the clear.
#[cfg(feature = "tls")]
async fn serve_tls(
    socket: TcpStream,
    tls: TlsConfig,
    handshake: Duration,
    shared: Shared,
) -> io::Result<()> {
    use tokio::io::AsyncWriteExt;

    socket.set_nodelay(true)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config);
    let mut stream = tokio::time::timeout(handshake, acceptor.accept(socket))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    match stream.get_ref().1.alpn_protocol() {
        Some(ALPN_H2) => {
            let (rd, wr) = tokio::io::split(stream);
            connection::serve(rd, wr, shared, &[]).await
        }
        Some(ALPN_HTTP1) => {
            let (rd, wr) = tokio::io::split(stream);
            http::serve(rd, wr, shared, &[]).await
        }
        // No ALPN: HTTP/1.1 may go on; HTTP/2 (gRPC) may not (the binding
        // refuses a TLS client that did not negotiate h2).
        _ => {
            let mut first = [0; PREFACE_START.len()];
            match sniff(&mut stream, &mut first, handshake).await? {
                Some(n) if first[..n] != *PREFACE_START => {
                    let (rd, wr) = tokio::io::split(stream);
                    http::serve(rd, wr, shared, &first[..n]).await
                }
                _ => {
                    // close_notify, then close.
                    let _ = stream.shutdown().await;
                    Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the TLS client did not negotiate ALPN h2",
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_gets_the_hosts_settings_within_its_slots() {
        let config = ServerConfig {
            max_concurrent_calls: 1000,
            stream_window: 1 << 16,
            ..ServerConfig::default()
        };
        let endpoint = config.endpoint();
        let engine = config.engine(true, endpoint);
        assert_eq!(engine.h2.max_concurrent_streams, 32);
        assert_eq!(engine.h2.initial_window_size, 1 << 16);
        assert!(engine.authorize);
        assert!(!ServerConfig::default().engine(false, endpoint).authorize);
    }

    /// What the operator sets of the Streamable HTTP endpoint reaches
    /// both engines: HTTP/2 (`ServerConfig::http`) and HTTP/1.1.
    #[test]
    fn both_engines_take_the_one_endpoint() {
        let config = ServerConfig {
            http_path: "/rpc/mcp".into(),
            allowed_hosts: AllowedHosts::Hosts(vec!["mcp.example".into()]),
            resource_metadata: Some("https://mcp.example/.well-known/x".into()),
            keep_alive_interval: Duration::from_secs(3),
            ..ServerConfig::default()
        };
        let endpoint = config.endpoint();
        assert_eq!(endpoint.path, "/rpc/mcp");
        assert_eq!(
            endpoint.allowed_hosts,
            engine::Allowed::Hosts(&["mcp.example"])
        );
        assert_eq!(endpoint.allowed_origins, endpoint.allowed_hosts);
        assert_eq!(
            endpoint.resource_metadata,
            Some("https://mcp.example/.well-known/x")
        );
        assert_eq!(endpoint.keep_alive_interval, Duration::from_secs(3));
        assert_eq!(config.engine(false, endpoint).http, endpoint);
        assert_eq!(config.http(false, endpoint).endpoint, endpoint);
    }

    /// A connection's task is sized by its future for as long as the
    /// connection lasts: the settings it passes on stay behind a pointer
    /// (a copy of them was about 450 bytes, held three times over).
    #[tokio::test]
    async fn a_connections_task_holds_the_settings_by_pointer() {
        let app = App::new("t", "1");
        let config = ServerConfig::default();
        let (_stop_tx, stop) = watch::channel(false);
        let shared = Shared {
            common: Arc::new(Common {
                registry: app.registry().unwrap(),
                config: config.engine(false, config.endpoint()),
                http: config.http(false, config.endpoint()),
                app: Arc::new(app),
                auth: None,
                send_timeout: config.send_timeout,
                listen: config.listen_limits(),
            }),
            stop,
        };
        assert!(std::mem::size_of::<Shared>() <= 32);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let socket = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let task = serve_tcp(socket, shared, Duration::from_secs(1));
        // The HTTP/2 connection's own state (its engine is on the heap)
        // and the sniffing before it: about 950 bytes today.
        let size = std::mem::size_of_val(&task);
        assert!(size <= 1200, "{size} bytes");
    }
}
