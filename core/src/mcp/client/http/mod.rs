//! The Streamable HTTP client (MCP 2026-07-28 §5), sans-IO, no allocator:
//! [`HttpClient`], the [`ClientEngine`](super::ClientEngine) of the
//! binding, and the pieces of one exchange it drives over HTTP/1.1 or
//! HTTP/2.
//!
//! - [`HttpClient`] (`engine`): the links (an HTTP/1.1 pool, or one HTTP/2
//!   connection), the calls on them, the rules shared with the tunnel's
//!   engine; its settings are [`config`];
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
//! - [`era`]: which era a server speaks (§8.3): the modern probe's answer,
//!   the 2025 `initialize`'s answer, the session id, the 2024 shape's
//!   `endpoint` event; [`write_legacy_post`], [`write_get_events`] and
//!   [`write_delete`] are the older shapes' requests.
//! - [`tools`]: the `x-mcp-header` rules of a `tools/call`: which tools
//!   a `tools/list` keeps, and the -32020 re-list and single retry.
//!
//! Inside the engine, one concept a file: `call` a call's slot, judge and
//! outcome; `send` a request's body and head for the era; `pool` the
//! HTTP/1.1 links; `h2link` the HTTP/2 link; `lifecycle` the era's
//! handshake (§8.3, §13); `events` the 2024 shape's event stream.

mod call;
pub mod config;
mod engine;
pub mod era;
mod events;
mod h2link;
mod lifecycle;
mod pool;
pub mod request;
pub mod response;
mod send;
pub mod tools;

pub use config::{DEFAULT_POOL_SIZE, DRAIN_WAIT, Http2Mode, HttpClientConfig};
pub use engine::HttpClient;

pub use request::{
    ACCEPT, Endpoint, RequestError, Session, legacy_post_fields, post_fields, write_delete,
    write_get_events, write_legacy_post, write_post,
};
pub use response::{Expect, HttpFailure, Judgement, ResponseReader, Step};
pub use tools::{ToolSchema, judge_schema, relist_and_retry};
