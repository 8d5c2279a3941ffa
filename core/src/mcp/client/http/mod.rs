//! The Streamable HTTP client (MCP 2026-07-28 §5), sans-IO, no allocator:
//! the pieces of one exchange, for the engine that will drive them over
//! any HTTP version (issue #14, plan §2).
//!
//! - [`request`]: the fields of a `POST` carrying one JSON-RPC message
//!   (`Content-Type`, `Accept` with both types, the mirrored
//!   `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`
//!   built by [`mirror_headers`](super::mirror_headers) from the body and
//!   the tool's schema, a bearer token), and the whole HTTP/1.1 request;
//! - [`response`]: what the answer means: a JSON body or an event stream
//!   holding the call's notifications and then its response, judged by
//!   the modern era's rules (a request from the server on the stream, a
//!   stream that ends before the response, an unexpected content type:
//!   each a failure that says so, never an invented result).
//!
//! Only the modern era is here; the 2025 session and the 2024 HTTP+SSE
//! shapes, the connection pool and the re-list come with the engine.

pub mod request;
pub mod response;

pub use request::{ACCEPT, Endpoint, RequestError, post_fields, write_post};
pub use response::{Expect, HttpFailure, Judgement, ResponseReader, Step};
