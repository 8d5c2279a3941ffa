//! HTTP/1.1 messages (RFC 9112), sans-IO: no MCP, no allocation, the
//! caller's buffers.
//!
//! - [`head`]: finding where a message head ends ([`HeadScanner`]) and
//!   reading a request head ([`RequestHead`]) or a response head
//!   ([`ResponseHead`]), parsed by `httparse`: version, fields, how the
//!   body is framed (RFC 9112 §6) and whether the connection stays open
//!   (§9.3);
//! - [`fields`]: those framing and connection rules, once for both
//!   directions;
//! - [`chunked`]: the chunked transfer coding (§7.1), decoded incrementally
//!   with the data handed out as spans of the input (requests and
//!   responses);
//! - [`body`]: a response body read as its head framed it (length,
//!   chunked, until close), a truncated one refused;
//! - [`sse`]: server-sent events (WHATWG HTML §9.2) parsed incrementally
//!   into the caller's buffer;
//! - [`client`]: one client connection: a response head within a bound,
//!   its body, keep-alive;
//! - [`write`](mod@write): request and response heads, chunks and
//!   server-sent events written into the caller's slices.
//!
//! The server's connection state machine (limits, keep-alive, deadlines)
//! lives with the binding: see `mcp::server::http`.

pub mod body;
pub mod chunked;
pub mod client;
pub mod fields;
pub mod head;
pub mod sse;
pub mod write;

pub use body::{BodyError, BodyReader};
pub use chunked::{Chunk, ChunkError, ChunkedDecoder};
pub use client::{ClientConnection, HttpError, Recv, ResponseEvent};
pub use head::{
    BodyFraming, HeadError, HeadScanner, MediaType, RequestHead, ResponseBody, ResponseHead,
    Version,
};
pub use sse::{SseError, SseEvent, SseFeed, SseParser};

/// Fields kept of one message head; a request with more is answered 431,
/// a response with more fails as too large.
pub const MAX_HEADERS: usize = 48;

/// The reason phrase of a status this crate sends.
pub const fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}
