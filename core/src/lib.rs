//! `mcpwire-core`: the protocol layers of mcpwire as sans-IO state machines.
//!
//! `#![no_std]`, no allocator, no `unsafe`. Every buffer and table has a capacity
//! chosen by the caller; bytes and time go in, bytes, events and deadlines come out.
//!
//! Layers, each depending only on the ones above it in this list:
//!
//! - [`hpack`]: header compression for HTTP/2 (RFC 7541).
//! - [`h2`]: HTTP/2 connections (RFC 9113), client and server.
//! - [`grpc`]: gRPC's messages, status, deadlines and metadata over HTTP/2.
//! - [`http1`]: HTTP/1.1 messages (RFC 9112): request heads, bodies,
//!   responses and server-sent events.
//! - [`mcp`]: the MCP engine (server and client) and its bindings.
//!
//! [`drive`] states the run loop every endpoint follows and helps drivers
//! keep it.
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Unit tests may unwrap: a panic there is a failed test, not peer input.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

#[cfg(test)]
extern crate std;

pub mod drive;
pub mod grpc;
pub mod h2;
pub mod hpack;
pub mod http1;
pub mod mcp;
pub mod records;
pub mod time;
mod word;
