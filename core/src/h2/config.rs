//! What a connection advertises and tolerates.

use core::time::Duration;

/// Which end of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// Settings and limits of one connection. Every field has a default that
/// suits gRPC; capacities that are const generics of
/// [`Connection`](super::Connection) bound some of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// SETTINGS_INITIAL_WINDOW_SIZE: what the peer may send on one stream
    /// before the application consumes it. Default 1 MiB.
    pub initial_window_size: u32,
    /// The connection-level receive window, opened with a WINDOW_UPDATE right
    /// after the preface. Default 4 MiB.
    pub connection_window_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE. Default 16384, the protocol minimum.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_CONCURRENT_STREAMS; capped at the connection's stream
    /// slots. Default: the number of slots.
    pub max_concurrent_streams: u32,
    /// SETTINGS_HEADER_TABLE_SIZE for the peer's encoder; capped at the HPACK
    /// table storage. Default 4096.
    pub header_table_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE; capped at the header buffer. Default 16 KiB.
    pub max_header_list_size: u32,
    /// The largest single field accepted. Default 8 KiB.
    pub max_field_size: u32,
    /// How long the peer has to acknowledge our SETTINGS. Default 10 s.
    pub settings_timeout: Duration,
    /// CONTINUATION frames allowed in one header block (CVE-2024-27316).
    /// Default 16.
    pub max_continuation_frames: u32,
    /// On a stream the server marked with
    /// [`Connection::drain_after_response`](super::Connection::drain_after_response):
    /// after a complete response to a request whose body is still arriving
    /// (an early refusal: 413, 401), the rest of the body is read and
    /// dropped, its windows reopened, while the whole body is at most this
    /// many octets, so that a client that sends its whole request before
    /// it reads the response (curl, httpx) gets to read it; past that the
    /// rest is stopped with RST_STREAM(NO_ERROR) (RFC 9113 §8.1), as on
    /// every other stream at once. Default 8 MiB.
    pub early_response_discard: u32,
    /// How long the connection may go without any stream open before it
    /// ends with GOAWAY(NO_ERROR) (as an HTTP/1.1 keep-alive connection
    /// times out): a peer that holds connections open and idle holds them
    /// for at most this long. `None` (the default): no limit.
    pub idle_timeout: Option<Duration>,
    /// How long the connection may go from its start to its first stream
    /// (the preface, SETTINGS and the first request's HEADERS) before it
    /// ends with GOAWAY(NO_ERROR). `None` (the default): the idle timeout
    /// applies from the start.
    pub handshake_timeout: Option<Duration>,
    /// Rates above which the peer is told ENHANCE_YOUR_CALM.
    pub flood: FloodLimits,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            initial_window_size: 1 << 20,
            connection_window_size: 4 << 20,
            max_frame_size: super::frame::MIN_MAX_FRAME_SIZE,
            max_concurrent_streams: u32::MAX,
            header_table_size: 4096,
            max_header_list_size: 16 << 10,
            max_field_size: 8 << 10,
            settings_timeout: Duration::from_secs(10),
            max_continuation_frames: 16,
            early_response_discard: 8 << 20,
            idle_timeout: None,
            handshake_timeout: None,
            flood: FloodLimits::default(),
        }
    }
}

/// Per-period limits on frames that cost us work and the peer nothing. Going
/// over one ends the connection with GOAWAY(ENHANCE_YOUR_CALM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloodLimits {
    /// The period the counts below apply to. Default 10 s.
    pub period: Duration,
    /// Streams reset by the peer, or by us for its errors (rapid reset,
    /// CVE-2023-44487). Default 1000.
    pub max_resets: u32,
    /// PING frames (not acknowledgements). Default 100.
    pub max_pings: u32,
    /// SETTINGS frames (not acknowledgements). Default 100.
    pub max_settings: u32,
    /// DATA, HEADERS and CONTINUATION frames that carry nothing and end
    /// nothing (CVE-2019-9518). Default 100.
    pub max_empty_frames: u32,
    /// Streams refused because the concurrency limit was reached. Default 1000.
    pub max_refused_streams: u32,
}

impl Default for FloodLimits {
    fn default() -> Self {
        Self {
            period: Duration::from_secs(10),
            max_resets: 1000,
            max_pings: 100,
            max_settings: 100,
            max_empty_frames: 100,
            max_refused_streams: 1000,
        }
    }
}
