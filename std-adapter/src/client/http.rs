//! The Streamable HTTP client's configuration ([`Config`]): an `http://`
//! or `https://` MCP endpoint, TLS with ALPN `h2` and `http/1.1`, when
//! HTTP/2 is spoken ([`Http2Mode`]), how the era is chosen
//! ([`EraChoice`]) and what every request carries.
//! [`Client::http`](super::Client::http) runs the core's [`HttpClient`]
//! with it on the one client driver: every rule of the binding (the
//! pool of HTTP/1.1 links or the one HTTP/2 link, the era probe and the
//! fallbacks to the 2025 session and the 2024 HTTP+SSE shapes, the
//! mirrored headers and the -32020 re-list, the statuses) is the core's;
//! this module opens the TCP and TLS links the engine asks for and says
//! what ALPN chose.
//!
//! The core's configuration holds `'static` text (the URL's parts, the
//! capabilities): each distinct text is kept once for the life of the
//! process.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::era::{Era, EraDiagnostics};
use mcpwire_core::mcp::client::{
    CallOptions, Diagnostics, HttpClient, HttpClientConfig, LinkId, Negotiated,
};
use serde_json::{Value, json};
use url::Url;

pub use mcpwire_core::mcp::client::era::EraChoice;
pub use mcpwire_core::mcp::client::http::{DEFAULT_POOL_SIZE, Http2Mode};

use super::call::EngineCall;
use super::dispatch::{self, Command, Handle};
use super::era::EraInfo;
use super::link::{self, Connector, Opening};
use super::{CallError, StreamMessage, redact_url};
use crate::storage::HeapStorage;
use crate::store::HeapStore;

/// The request timeout when none is set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the era's handshake waits for each answer when none is set.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_MAX_MESSAGE: usize = 4 << 20;
/// The most HTTP/1.1 links a client keeps ([`Config::pool_size`] is
/// capped here).
pub const MAX_POOL_SIZE: usize = LINKS;

/// Calls in progress at once (more wait in the driver), and HTTP/2
/// streams.
const CALLS: usize = 32;
/// HTTP/1.1 links (each holds a 4 KiB head buffer inline: the engine is
/// built on the stack before it goes to the heap).
const LINKS: usize = 32;
/// Octets of cached schemas with `x-mcp-header` annotations.
const CACHE: usize = 16 << 10;
/// Room a call's buffer has besides its largest message (the request's
/// head, a notification sharing a read, an error written after it).
const BUF_SLACK: usize = 64 << 10;

/// The Streamable HTTP engine on tokio: [`CALLS`] calls with buffers on
/// the heap, [`LINKS`] HTTP/1.1 links reading heads of up to 4 KiB, one
/// HTTP/2 link of a 4 KiB HPACK table and 16 KiB frame buffers on the
/// heap while in use, [`CACHE`] octets of annotation cache.
type Engine = HttpClient<HeapStore, CALLS, LINKS, 4096, 16384, HeapStorage<16384>, CACHE>;

/// Where a Streamable HTTP client sends and what every request carries.
#[derive(Debug, Clone)]
pub struct Config {
    /// The MCP endpoint, `http://` or `https://`, without user
    /// information (a token belongs in [`bearer`](Self::bearer)).
    pub url: Url,
    /// For `https://`: the roots to trust and the name to verify
    /// ([`ClientTlsConfig::with_pem_roots`](crate::ClientTlsConfig::with_pem_roots),
    /// [`server_name`](crate::ClientTlsConfig::server_name)); `None`
    /// trusts the platform's store. Its ALPN list is replaced by what
    /// [`http2`](Self::http2) offers.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::ClientTlsConfig>,
    /// When HTTP/2 is spoken. Default [`Http2Mode::Alpn`]: over TLS when
    /// the server selects `h2`; [`Http2Mode::Always`] is `h2c` with prior
    /// knowledge over `http://`.
    pub http2: Http2Mode,
    /// A bearer token sent in `Authorization` on every request (a
    /// `token68`); [`Client::set_bearer`](super::Client::set_bearer)
    /// replaces it at run time.
    pub bearer: Option<String>,
    /// A call's timeout when it names none (not `subscriptions/listen`).
    /// Default 60 s.
    pub request_timeout: Duration,
    /// The largest request, and the largest message of an answer (a JSON
    /// body, or one event's data): a larger request is refused before it
    /// goes out, a larger answer fails its call, both with
    /// RESOURCE_EXHAUSTED. Default 4 MiB.
    pub max_message_bytes: usize,
    /// HTTP/1.1 connections open at once, each carrying one exchange at a
    /// time; more calls wait for a free one. Default 8, at most
    /// [`MAX_POOL_SIZE`]. HTTP/2 carries every call on one connection.
    pub pool_size: usize,
    /// How the era is chosen (MCP 2026-07-28 §8.3): probe with
    /// `server/discover` (the default), modern without a probe, or the
    /// 2025 `initialize` without a probe.
    pub era: EraChoice,
    /// How long the probe, `initialize` and the 2024 shape's `endpoint`
    /// event are each waited for. Default 10 s.
    pub probe_timeout: Duration,
    /// `io.modelcontextprotocol/clientCapabilities` added to requests that
    /// lack it (and sent with the probe).
    pub client_capabilities: Value,
    /// `io.modelcontextprotocol/clientInfo` added to requests that lack it
    /// (a SHOULD of the 2026-07-28 `_meta`; its `name` and `version` also
    /// go in the probe and `initialize`); `None` sends none. Default:
    /// `{"name": "mcpwire", "version": <this crate's>}`.
    pub client_info: Option<Value>,
}

impl Config {
    /// The settings for the endpoint `url`; an error when it is not an
    /// `http://` or `https://` URL with a host, or carries user
    /// information.
    pub fn new(url: &str) -> Result<Self, CallError> {
        let url = Url::parse(url).map_err(|e| {
            CallError::new(Code::InvalidArgument, format!("{}: {e}", redact_url(url)))
        })?;
        endpoint(&url)?;
        Ok(Self {
            url,
            #[cfg(feature = "tls")]
            tls: None,
            http2: Http2Mode::default(),
            bearer: None,
            request_timeout: DEFAULT_TIMEOUT,
            max_message_bytes: DEFAULT_MAX_MESSAGE,
            pool_size: DEFAULT_POOL_SIZE,
            era: EraChoice::Probe,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            client_capabilities: json!({}),
            client_info: Some(json!({"name": "mcpwire", "version": env!("CARGO_PKG_VERSION")})),
        })
    }

    /// Starts the engine's task.
    pub(crate) fn spawn(&self) -> Result<Handle, CallError> {
        let end = endpoint(&self.url)?;
        let capabilities = serde_json::to_string(&self.client_capabilities)
            .map_err(|e| CallError::new(Code::InvalidArgument, e.to_string()))?;
        let info = |key: &str, default: &str| {
            let value = self.client_info.as_ref().and_then(|i| i.get(key));
            intern(value.and_then(Value::as_str).unwrap_or(default))
        };
        let config = HttpClientConfig {
            authority: intern(&end.authority),
            target: intern(&end.target),
            scheme: if end.tls { "https" } else { "http" },
            http2: self.http2,
            pool_size: self.pool_size.clamp(1, LINKS),
            request_timeout: self.request_timeout,
            max_message_bytes: self.max_message_bytes,
            era: self.era,
            probe_timeout: self.probe_timeout,
            client_capabilities: intern(&capabilities),
            client_name: info("name", "mcpwire"),
            client_version: info("version", env!("CARGO_PKG_VERSION")),
            ..HttpClientConfig::default()
        };
        let store = HeapStore::new(self.max_message_bytes.saturating_add(BUF_SLACK));
        let mut engine = Box::new(Engine::new(config, store, crate::clock::now()));
        if let Some(token) = &self.bearer
            && !engine.set_bearer(Some(token))
        {
            return Err(CallError::new(
                Code::InvalidArgument,
                "the bearer token is not a token68 (RFC 9110 §11.2)",
            ));
        }
        let connector = HttpConnector {
            addr: end.addr,
            #[cfg(feature = "tls")]
            tls: match end.tls {
                true => Some(self.tls_config()?),
                false => None,
            },
        };
        Ok(dispatch::spawn(engine, connector))
    }

    /// The TLS of an `https://` endpoint, offering the ALPN of
    /// [`http2`](Self::http2).
    #[cfg(feature = "tls")]
    fn tls_config(&self) -> Result<crate::ClientTlsConfig, CallError> {
        use crate::tls::{ALPN_H2, ALPN_HTTP1};
        let alpn: &[&[u8]] = match self.http2 {
            Http2Mode::Never => &[ALPN_HTTP1],
            Http2Mode::Alpn => &[ALPN_H2, ALPN_HTTP1],
            Http2Mode::Always => &[ALPN_H2],
        };
        let tls = match &self.tls {
            Some(t) => t.clone(),
            None => crate::ClientTlsConfig::with_platform_roots()
                .map_err(|e| CallError::new(Code::Unavailable, e.to_string()))?,
        };
        Ok(tls.with_alpn(alpn))
    }
}

/// An endpoint's URL taken apart.
struct Endpoint {
    /// `Host` and `:authority`: the host, and the port when the URL
    /// names one.
    authority: String,
    /// The path and query (origin form).
    target: String,
    /// `host:port` to connect to.
    addr: String,
    tls: bool,
}

fn endpoint(url: &Url) -> Result<Endpoint, CallError> {
    let invalid = |why: &str| {
        CallError::new(
            Code::InvalidArgument,
            format!("{}: {why}", redact_url(url.as_str())),
        )
    };
    let tls = match url.scheme() {
        "http" => false,
        "https" => true,
        _ => return Err(invalid("only http:// and https:// URLs are supported")),
    };
    #[cfg(not(feature = "tls"))]
    if tls {
        return Err(invalid("this mcpwire is built without the `tls` feature"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "credentials in the URL (give a token in the configuration)",
        ));
    }
    let host = url.host_str().ok_or_else(|| invalid("no host"))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| invalid("no port"))?;
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_owned(),
    };
    let mut target = url.path().to_owned();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    Ok(Endpoint {
        authority,
        target,
        addr: format!("{host}:{port}"),
        tls,
    })
}

/// `text` for the life of the process, kept once.
fn intern(text: &str) -> &'static str {
    static KEPT: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(t) = kept.get(text) {
        return t;
    }
    let t: &'static str = Box::leak(text.into());
    kept.insert(t);
    t
}

/// Opens the engine's links: TCP, and TLS over it for `https://`.
struct HttpConnector {
    addr: String,
    #[cfg(feature = "tls")]
    tls: Option<crate::ClientTlsConfig>,
}

impl Connector for HttpConnector {
    fn connect(&self, _: LinkId) -> Opening {
        let addr = self.addr.clone();
        #[cfg(feature = "tls")]
        let tls = self.tls.clone();
        Box::pin(async move {
            let tcp = link::tcp(&addr).await?;
            #[cfg(feature = "tls")]
            if let Some(tls) = tls {
                use crate::tls::{ALPN_H2, ALPN_HTTP1};
                let tls = tls.handshake(&addr, tcp).await?;
                let negotiated = match tls.get_ref().1.alpn_protocol() {
                    Some(ALPN_H2) => Negotiated::Http2,
                    Some(ALPN_HTTP1) => Negotiated::Http1,
                    _ => Negotiated::Nothing,
                };
                return Ok((Box::new(tls) as link::BoxIo, negotiated));
            }
            Ok((Box::new(tcp) as link::BoxIo, Negotiated::Nothing))
        })
    }

    fn describe(&self) -> String {
        format!("connect to {}", self.addr)
    }
}

/// What the calls of one HTTP client share for their facts.
#[derive(Debug)]
pub(crate) struct Context {
    /// The endpoint, without user information.
    url: String,
    /// The era, as the engine knew it after the handshake.
    era: Option<EraInfo>,
}

impl Context {
    /// The context of the client of `config`, speaking `era`.
    pub(crate) fn new(config: &Config, era: Option<EraInfo>) -> Self {
        Self {
            url: redact_url(config.url.as_str()),
            era,
        }
    }

    /// The facts of a call whose engine reported `diagnostics`.
    pub(crate) fn facts(&self, diagnostics: Option<(&Diagnostics, Option<&str>)>) -> HttpFacts {
        let era = self.era.as_ref();
        let (d, auth) = match diagnostics {
            Some((d, auth)) => (*d, auth),
            None => (Diagnostics::default(), None),
        };
        HttpFacts {
            url: self.url.clone(),
            status: d.http_status,
            era: era.map_or("unknown", |e| e.era.describe()),
            http_version: d
                .http_status
                .map(|_| if d.http2 { "HTTP/2" } else { "HTTP/1.1" }),
            event_stream: d.event_stream,
            requested_version: era.map(|e| e.requested.clone()).unwrap_or_default(),
            version: era.map(|e| e.version.clone()).unwrap_or_default(),
            www_authenticate: auth.map(str::to_owned),
            retried_after_32020: d.relisted,
        }
    }
}

/// What is known of a call's HTTP exchange
/// ([`Call::http_facts`](super::Call::http_facts), and in
/// [`CallDiagnostics::http`](super::CallDiagnostics::http) of its error).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpFacts {
    /// The endpoint, without user information.
    pub url: String,
    /// The status of the answer, once one came.
    pub status: Option<u16>,
    /// The era spoken ([`Era::describe`]).
    pub era: &'static str,
    /// `"HTTP/1.1"` or `"HTTP/2"`: the version of the exchange, once an
    /// answer came.
    pub http_version: Option<&'static str>,
    /// The answer came as an event stream (`text/event-stream`).
    pub event_stream: bool,
    /// The modern version the client asked for.
    pub requested_version: String,
    /// The version in use.
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
        if self.event_stream {
            write!(f, ", content type text/event-stream")?;
        }
        if self.retried_after_32020 {
            write!(f, ", sent again after -32020")?;
        }
        Ok(())
    }
}

/// Waits for the engine of `handle` to know the server's era (the probe
/// and its fallbacks, MCP 2026-07-28 §8.3), and returns it: the
/// handshake's failure (401 with its challenge, a modern server's
/// refusal, no answer) is the error.
pub(crate) async fn handshake(
    handle: &Handle,
    choice: EraChoice,
    max_message: usize,
) -> Result<Option<EraInfo>, CallError> {
    if choice != EraChoice::Modern {
        // A call of no message: it ends once the engine's handshake is over.
        let mut waiter = EngineCall::start(
            handle.clone(),
            Value::Null,
            Arc::from(&[][..]),
            CallOptions::default(),
            None,
            max_message,
            true,
        )
        .await?;
        loop {
            match waiter.next().await? {
                None => break,
                Some(StreamMessage::Notification(_)) => {}
                // A modern server's refusal of the probe.
                Some(StreamMessage::Response(response)) => {
                    super::typed::result_of(response)?;
                    break;
                }
            }
        }
    }
    let status = dispatch::status(handle).await;
    Ok(status.and_then(|s| s.era).as_ref().and_then(era_info))
}

/// Replaces the bearer token of the engine of `handle`.
pub(crate) async fn set_bearer(handle: &Handle, token: Option<String>) -> Result<(), CallError> {
    let (reply, taken) = tokio::sync::oneshot::channel();
    if !handle.send(Command::SetBearer { token, reply }) {
        return Err(CallError::new(Code::Unavailable, "the client is closed"));
    }
    match taken.await {
        Ok(true) => Ok(()),
        Ok(false) => Err(CallError::new(
            Code::InvalidArgument,
            "the bearer token is not a token68 (RFC 9110 §11.2)",
        )),
        Err(_) => Err(CallError::new(Code::Unavailable, "the client is closed")),
    }
}

/// The era as the application sees it.
fn era_info(d: &EraDiagnostics) -> Option<EraInfo> {
    let era = d.era?;
    let fallback = d.fallback.then(|| {
        let why = d.reason.unwrap_or("the server is not modern");
        let why = why.strip_prefix("server/discover: ").unwrap_or(why);
        format!("server/discover: {why}")
    });
    Some(EraInfo {
        era,
        version: d.version().unwrap_or_default().to_owned(),
        requested: d.requested.to_owned(),
        server_versions: d.server_versions().map(str::to_owned),
        fallback,
        probe_error: d.probe_error,
        restarted_for_fallback: d.restarted,
    })
}

/// The transport's name for the era spoken.
pub(crate) fn transport_name(era: Option<Era>) -> &'static str {
    match era {
        Some(Era::HttpSse) => "HTTP+SSE (2024-11-05)",
        Some(Era::Legacy) => "Streamable HTTP with a session (2025-11-25)",
        _ => "Streamable HTTP",
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    #[test]
    fn a_url_is_taken_apart_or_refused() {
        let c = Config::new("http://127.0.0.1:8080/mcp?x=1").unwrap();
        let e = super::endpoint(&c.url).unwrap();
        assert_eq!(
            (e.authority.as_str(), e.target.as_str(), e.addr.as_str()),
            ("127.0.0.1:8080", "/mcp?x=1", "127.0.0.1:8080")
        );
        let e = super::endpoint(&Config::new("https://[::1]/").unwrap().url).unwrap();
        assert_eq!(
            (e.authority.as_str(), e.addr.as_str()),
            ("[::1]", "[::1]:443")
        );
        for bad in ["ftp://h/x", "http://u:secret@h/mcp", "not a url"] {
            let e = Config::new(bad).unwrap_err();
            assert!(!e.message.contains("secret"), "{e}");
        }
    }
}
