//! MCP (revision 2026-07-28) over the gRPC binding: the JSON-RPC envelope,
//! per-request `_meta`, metadata mirroring and error codes.

pub mod client;
pub mod envelope;
pub mod error;
pub mod json;
pub mod meta;
pub mod mirror;
pub mod registry;
pub mod server;
pub mod store;
pub mod tool;
pub mod writer;

pub use envelope::Message;
pub use error::RpcError;
pub use meta::RequestMeta;
pub use store::{CallStore, SlabBuf, SlabStore};
