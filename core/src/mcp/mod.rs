//! MCP (revision 2026-07-28) over the gRPC binding: the JSON-RPC envelope,
//! per-request metadata rules and error codes.

pub mod envelope;
pub mod error;
pub mod json;

pub use envelope::Message;
pub use error::RpcError;
