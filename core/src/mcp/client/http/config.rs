//! The settings of the Streamable HTTP client engine
//! ([`HttpClient`](super::HttpClient)): where its requests go (MCP
//! 2026-07-28 §5.1), which HTTP version carries them, how many HTTP/1.1
//! connections it keeps, its deadlines and how it picks the era (§8.3).

use core::time::Duration;

use crate::h2;
use crate::mcp::client::config::{MAX_INPUT_ROUNDS, MAX_LIST_PAGES};
use crate::mcp::client::era::EraChoice;

/// Connections (links) of the HTTP/1.1 pool when none is set.
pub const DEFAULT_POOL_SIZE: usize = 8;
/// How long the rest of an answer is read after its response, so that an
/// HTTP/1.1 connection serves the next exchange (or an HTTP/2 stream ends
/// by itself); past it the connection is closed (the stream reset).
pub const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// When the engine speaks HTTP/2.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Http2Mode {
    /// HTTP/1.1 only.
    Never,
    /// HTTP/2 when the driver's TLS negotiated ALPN `h2`
    /// ([`Negotiated::Http2`](crate::mcp::client::Negotiated::Http2)),
    /// HTTP/1.1 otherwise (cleartext, ALPN `http/1.1`, none). The first
    /// link tells; the engine opens no other before it is up.
    #[default]
    Alpn,
    /// HTTP/2 always: cleartext with prior knowledge (`h2c`), or TLS with
    /// ALPN `h2` (a link whose ALPN chose `http/1.1` fails its calls).
    Always,
}

/// Settings of the Streamable HTTP client engine.
#[derive(Debug, Clone, Copy)]
pub struct HttpClientConfig {
    /// `Host` (HTTP/1.1) and `:authority` (HTTP/2): `host[:port]`.
    pub authority: &'static str,
    /// The path and query of the MCP endpoint (origin form).
    pub target: &'static str,
    /// `:scheme` over HTTP/2 (`http`, or `https` over TLS); over
    /// HTTP/1.1 it resolves the 2024 shape's `endpoint` event.
    pub scheme: &'static str,
    /// When HTTP/2 is spoken. Default [`Http2Mode::Alpn`].
    pub http2: Http2Mode,
    /// HTTP/1.1 links open at once, each carrying one exchange at a time
    /// (capped by the engine's `LINKS`); more calls wait in the engine.
    /// Default 8. HTTP/2 carries every call on one link.
    pub pool_size: usize,
    /// A call's deadline when it names none (not `subscriptions/listen`).
    /// Default 60 s.
    pub request_timeout: Duration,
    /// The largest request and the largest message of an answer (a JSON
    /// body, one event's data); also capped by the call store's largest
    /// buffer. Default 4 MiB.
    pub max_message_bytes: usize,
    /// How the era is chosen (§8.3). Default [`EraChoice::Probe`].
    pub era: EraChoice,
    /// How long the era probe, `initialize` and the 2024 shape's
    /// `endpoint` event are waited for. Default 10 s.
    pub probe_timeout: Duration,
    /// `io.modelcontextprotocol/clientCapabilities` of the probe (raw
    /// JSON object). Default `{}`.
    pub client_capabilities: &'static str,
    /// The client's name and version, in the probe's `_meta` and in
    /// `initialize`.
    pub client_name: &'static str,
    pub client_version: &'static str,
    /// A bearer token sent in `Authorization` on every request; replaced
    /// at run time with [`HttpClient::set_bearer`](super::HttpClient::set_bearer).
    pub bearer: Option<&'static str>,
    /// The HTTP/2 connection's settings.
    pub h2: h2::Config,
    /// Pages of `tools/list` read again after a -32020 at most. Default
    /// [`MAX_LIST_PAGES`].
    pub max_list_pages: usize,
    /// Rounds of input a call answers at most. Default
    /// [`MAX_INPUT_ROUNDS`].
    pub max_input_rounds: u8,
}

impl Default for HttpClientConfig {
    fn default() -> Self {
        Self {
            authority: "localhost",
            target: "/mcp",
            scheme: "http",
            http2: Http2Mode::default(),
            pool_size: DEFAULT_POOL_SIZE,
            request_timeout: Duration::from_secs(60),
            max_message_bytes: 4 << 20,
            era: EraChoice::Probe,
            probe_timeout: Duration::from_secs(10),
            client_capabilities: "{}",
            client_name: "mcpwire",
            client_version: env!("CARGO_PKG_VERSION"),
            bearer: None,
            h2: h2::Config::default(),
            max_list_pages: MAX_LIST_PAGES,
            max_input_rounds: MAX_INPUT_ROUNDS,
        }
    }
}
