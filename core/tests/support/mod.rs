//! What the integration tests share, one module per concept:
//!
//! - [`h2`]: the HTTP/2 simulation harness, a client and a server
//!   connection joined by seeded pipes on a virtual clock.
//! - [`peer`]: one connection driven by a scripted peer that writes and
//!   reads raw frames.
//! - [`records`]: records on the heap, grown on demand (a driver with an
//!   allocator).
//! - [`hpack`]: the HPACK reference corpus and decoding helpers.
//! - [`net`]: a client engine of any binding and the servers its links
//!   reach, on the pipes of `mcpwire-sim` and a virtual clock.
//! - [`legacy`]: a scripted server of the older Streamable HTTP shapes
//!   (2025 sessions, 2024 HTTP+SSE), for the client's era fallback.
//! - [`mcp`]: the fixtures of the MCP engine tests (registry, `_meta`,
//!   stores) and the endpoint-with-application adapter they run on the
//!   simulation pipes of `mcpwire-sim`.
//!
//! Each test crate uses part of these modules, hence the `dead_code`
//! allowance.
#![allow(dead_code)]

pub mod h2;
pub mod hpack;
pub mod legacy;
pub mod mcp;
pub mod net;
pub mod peer;
pub mod records;
