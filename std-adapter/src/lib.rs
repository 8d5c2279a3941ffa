//! mcpwire on tokio: a thin driver for the MCP tunnel server engine of
//! `mcpwire-core` (`/mcp.zig.transport.v1.Mcp/Call` over HTTP/2), and the
//! handler API for applications.
//!
//! An [`App`] lists tools (async functions of a [`ToolCall`], or with the
//! feature `schemars` of a typed argument whose type gives the input
//! schema: `App::typed_tool`), resources and resource templates, prompts,
//! a completion handler and a listen source ([`StateSeal`] signs the
//! `requestState` of multi round-trip answers); [`Server::bind`] and [`Server::serve`] run
//! it ([`ServerConfig`] for its settings). The engine answers
//! `server/discover`, the list methods, `subscriptions/listen` and every
//! protocol error itself; handlers see only the calls they must answer.
//! Each handler runs as a tokio task and is aborted when the client resets
//! the call or its deadline (`grpc-timeout`) passes.
//!
//! On the client side: [`Client`] over gRPC ([`client::grpc`]), Streamable
//! HTTP ([`client::http`]: the modern shape, or a 2025 session or the 2024
//! HTTP+SSE shape found by the era probe) and stdio ([`client::stdio`]: a
//! child or a serial device), with the same typed calls.
//!
//! The same app serves the stdio binding (one JSON-RPC message a line on
//! stdin and stdout): [`App::serve_stdio`], or [`stdio::serve`] over any
//! reader and writer.

mod app;
pub mod auth;
pub mod bridge;
pub mod client;
mod clock;
mod outbox;
pub mod portable;
mod server;
mod storage;
mod store;
#[cfg(feature = "tls")]
mod tls;

pub use app::{
    App, Completion, CompletionRequest, Content, ForwardRequest, ForwardResult, LearntTools,
    ListenEvent, LogLevel, PromptGet, PromptMessage, PromptResult, RawResult, Reconnect,
    ResourceContent, ResourceRead, Role, Schema, StateSeal, ToolCall, ToolError, ToolResult,
    refused_discover, server_refusal,
};
#[cfg(feature = "schemars")]
pub use app::{IntoToolResult, Structured};
pub use auth::{Auth, AuthDecision, BearerTokens};
pub use client::grpc::Keepalive;
#[cfg(unix)]
pub use client::stdio::{DEFAULT_BAUD, SerialDevice};
pub use client::stdio::{ServerCommand, Stopped};
pub use client::{
    Call, CallDiagnostics, CallError, CallToolResult, Client, EraInfo, HttpFacts, JsonRpcError,
    RawMessage, RawResponse, StreamMessage, Tool, grpc_authority, redact_url,
};
pub use server::stdio::{self, StdioConfig};
pub use server::{AllowedHosts, Server, ServerConfig};
#[cfg(feature = "tls")]
pub use tls::{ClientTlsConfig, TlsConfig, crypto_provider};
