//! `mcpwire-proto`: the protobuf side of MCP's gRPC bindings.
//!
//! `#![no_std]`, no allocator, no `unsafe`, no dependencies. Decoders borrow
//! from the caller's bytes; encoders write into the caller's slices and say how
//! many bytes they need when a slice is too small. No input makes them panic.
//!
//! The crate owns:
//!
//! - the `.proto` files that other peers load, under `proto/`:
//!   `mcp_zig_transport_v1.proto`, the tunnel service of the binding
//!   (`mcp.zig.transport.v1.Mcp/Call`), which grpc-js, grpcio and tonic peers
//!   compile as is;
//! - [`wire`]: the protobuf wire format (varints, tags, skipping unknown
//!   fields, and [`wire::Writer`] for whole messages) that every codec here
//!   is built on;
//! - [`tunnel`]: the codec of the tunnel's only message, [`JsonRpcMessage`],
//!   which carries one JSON-RPC message as UTF-8 text and never copies it;
//! - `proto/gcp/`: the Google Cloud MCP proto files release v0.2.0 (MIT,
//!   with their license), the typed binding `model_context_protocol.Mcp`;
//! - [`gcp`]: their messages as static descriptor tables, a validating view
//!   over encoded messages ([`gcp::MessageRef`]) and the eight RPCs
//!   ([`gcp::Rpc`]).
//!
//! gRPC framing (the five-byte length prefix), HTTP/2 and the JSON-RPC
//! envelope belong to `mcpwire-core`; this crate only turns protobuf messages
//! into their fields and back.
#![no_std]
#![forbid(unsafe_code)]
// Unit tests may unwrap: a panic there is a failed test, not peer input.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

#[cfg(test)]
extern crate std;

pub mod error;
pub mod gcp;
pub mod tunnel;
pub mod wire;

pub use error::{BufferTooSmall, DecodeError};
pub use tunnel::JsonRpcMessage;
