//! HTTP/1.1 messages (RFC 9112), sans-IO: no MCP, no allocation, the
//! caller's buffers.
//!
//! - [`head`]: finding where a message head ends ([`HeadScanner`]) and
//!   reading a request head ([`RequestHead`], parsed by `httparse`):
//!   method, target, version, fields, how its body is framed (RFC 9112 §6)
//!   and whether the connection stays open (§9.3);
//! - [`chunked`]: the chunked transfer coding (§7.1), decoded incrementally
//!   with the data handed out as spans of the input (requests and, later,
//!   responses);
//! - [`write`](mod@write): response heads, chunks and server-sent events
//!   (WHATWG HTML §9.2) written into the caller's slices.
//!
//! The connection state machine that uses them (limits, keep-alive,
//! deadlines) lives with the binding: see `mcp::server::http`.

pub mod chunked;
pub mod head;
pub mod write;

pub use chunked::{Chunk, ChunkError, ChunkedDecoder};
pub use head::{BodyFraming, HeadError, HeadScanner, RequestHead, Version};

/// Fields kept of one request head; a head with more is answered 431.
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
