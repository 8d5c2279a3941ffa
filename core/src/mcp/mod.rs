//! MCP (revision 2026-07-28): one engine for every binding.
//!
//! - [`server`]: the server engine (every MCP decision, transport-free) and
//!   its bindings (the gRPC tunnel);
//! - [`client`]: the client engine of the tunnel binding;
//! - the pieces both share: the JSON-RPC [`envelope`] (parsing and writing),
//!   per-request `_meta` ([`meta`]), mirrored headers ([`mirror`]), error
//!   codes ([`error`]), bearer tokens ([`auth`]), the [`registry`] of what a
//!   server offers, portable [`tool`]s, call buffers ([`store`]) and the
//!   JSON scanner and writer ([`json`], [`writer`]);
//! - [`proxy`] (feature `forward`): the forwarding rules of a bridge or a
//!   gateway between a host and a server.

pub mod auth;
pub mod client;
pub mod envelope;
pub mod error;
pub mod json;
pub mod meta;
pub mod mirror;
#[cfg(feature = "forward")]
#[cfg_attr(docsrs, doc(cfg(feature = "forward")))]
pub mod proxy;
pub mod registry;
pub mod server;
pub mod store;
pub mod tool;
#[cfg(feature = "typed")]
#[cfg_attr(docsrs, doc(cfg(feature = "typed")))]
pub mod typed;
pub mod writer;

/// Streams an HTTP/2 connection of the tunnel (client or server) remembers
/// having reset, as the binding says (`remembered_resets`, 64). Frames the
/// peer sent before it saw a reset are ignored on a remembered stream; on a
/// forgotten one they end the connection (PROTOCOL_ERROR or STREAM_CLOSED).
/// More calls than this cancelled while their responses are in flight can
/// end the connection.
pub const REMEMBERED_RESETS: usize = 64;

/// The path of the gRPC tunnel binding's one method (client and server).
pub const TUNNEL_PATH: &[u8] = mcpwire_proto::tunnel::CALL_PATH.as_bytes();

pub use envelope::Message;
pub use error::RpcError;
pub use meta::RequestMeta;
pub use store::{CallStore, SlabBuf, SlabStore};
