//! The MCP server engine: every MCP decision of a server, made once, for
//! every binding and driver.
//!
//! Two halves:
//!
//! - transport-free, in this module's children [`dispatch`], [`request`]
//!   and [`listen`]: what a request message asks (envelope, `_meta`,
//!   protocol version, mirrored headers checked against any
//!   [`HeaderSource`](super::mirror::HeaderSource)), what the registry
//!   answers itself (`server/discover`, the list methods), which JSON-RPC
//!   error a bad request gets, what the application must handle as a typed
//!   [`RequestKind`], and the `subscriptions/listen` bookkeeping (filter,
//!   acknowledgement, events tagged with their subscription id, the final
//!   result);
//! - bindings that map those outcomes to a wire: [`Server`], the gRPC
//!   tunnel (`/mcp.zig.transport.v1.Mcp/Call`) over an HTTP/2 connection;
//!   [`StdioServer`], newline-delimited JSON over a byte pipe;
//!   [`HttpServer`], Streamable HTTP over one HTTP/1.1 connection.
//!
//! # The application's side
//!
//! Events are small and owned ([`ServerEvent`]); what they refer to is read
//! through borrowing accessors, quinn-proto style: a
//! [`ServerEvent::Request`] names a call, and [`Server::request`] shows its
//! [`Request`] until the next `&mut` call on the engine. The application
//! answers with [`Server::respond`], [`Server::respond_error`] or
//! [`Server::fail`], and streams notifications with [`Server::notify`].
//! `subscriptions/listen` never reaches the application: the engine
//! acknowledges it and sends what [`Server::publish`] announces.
//!
//! Bearer tokens: with [`ServerConfig::authorize`] on, every call first
//! comes out as [`ServerEvent::Authorize`]; the application reads
//! [`Server::bearer_token`] and answers [`Server::authorize`] with its
//! [`Decision`](super::auth::Decision); the core sends the challenge. With it
//! off, no `Authorize` event is ever produced.

/// The [`ServerEngine`] methods of a binding, forwarded to its inherent
/// methods of the same names.
macro_rules! forward_server_engine {
    ($binding:ident) => {
        fn poll_event(&mut self) -> Option<ServerEvent> {
            $binding::poll_event(self)
        }
        fn request(&self, call: CallId) -> Option<Request<'_>> {
            $binding::request(self, call)
        }
        fn respond(&mut self, call: CallId, result: &[u8]) -> Result<(), SendError> {
            $binding::respond(self, call, result)
        }
        fn respond_error(
            &mut self,
            call: CallId,
            code: i32,
            message: &str,
            data: Option<&[u8]>,
        ) -> Result<(), SendError> {
            $binding::respond_error(self, call, code, message, data)
        }
        fn fail(&mut self, call: CallId, failure: Failure) -> Result<(), SendError> {
            $binding::fail(self, call, failure)
        }
        fn notify(&mut self, call: CallId, method: &str, params: &[u8]) -> Result<(), SendError> {
            $binding::notify(self, call, method, params)
        }
        fn publish(&mut self, change: ListChange<'_>) -> usize {
            $binding::publish(self, change)
        }
        fn is_listening(&self) -> bool {
            $binding::is_listening(self)
        }
        fn bearer_token(&self, call: CallId) -> Option<&str> {
            $binding::bearer_token(self, call)
        }
        fn authorize(&mut self, call: CallId, decision: crate::mcp::auth::Decision<'_>) {
            $binding::authorize(self, call, decision)
        }
    };
}

pub mod dispatch;
mod engine;
pub mod http;
pub mod listen;
pub mod request;
pub mod stdio;
mod tunnel;

use core::time::Duration;

pub use http::{Allowed, HttpConfig, HttpEndpoint, HttpServer};
pub use listen::{ListChange, ListenLimits, ListenQuota};
pub use request::{Request, RequestKind};
pub use stdio::{StdioConfig, StdioServer};
pub use tunnel::{Server, TUNNEL_PATH, TYPED_RPCS};

use crate::h2::{self, ConnectionError};

/// The server of a microcontroller: 4 concurrent calls, a 4 KiB HPACK
/// table, 2 KiB frame buffers, everything inline (the firmware example's
/// sizes). Named so the capacities are not written (and swapped) by hand.
pub type DeviceServer<'r, S> = Server<'r, S, 4, 4096, 2048>;

/// The server of a host: 32 concurrent calls, a 4 KiB HPACK table, 8 KiB
/// frame buffers in the storage `FB` (on the heap in the tokio driver).
pub type HostServer<'r, S, FB> = Server<'r, S, 32, 4096, 8192, FB>;

/// Settings of the server engine.
#[derive(Debug, Clone, Copy)]
pub struct ServerConfig<'a> {
    /// The HTTP/2 connection's settings.
    pub h2: h2::Config,
    /// The largest request message (also capped by the call store's
    /// largest buffer). A larger one ends the call with RESOURCE_EXHAUSTED.
    pub max_message_bytes: usize,
    /// Deadline of a request that has no `grpc-timeout` (not for
    /// `subscriptions/listen`). Default 60 s.
    pub request_timeout: Duration,
    /// Every call waits for [`Server::authorize`] after a
    /// [`ServerEvent::Authorize`], before anything (even `tools/list`) is
    /// answered. Default off.
    pub authorize: bool,
    /// Streamable HTTP on the connection, beside the gRPC calls (feature
    /// `tunnel-http`): the endpoint's path, its `Host`/`:authority` and
    /// `Origin` checks, the resource metadata of its challenges and its
    /// keep-alive comments. A server that also serves HTTP/1.1 gives both
    /// bindings the same one ([`HttpConfig::endpoint`]).
    pub http: HttpEndpoint<'a>,
}

impl Default for ServerConfig<'_> {
    fn default() -> Self {
        Self {
            // A client has 10 s to send its first request and may keep a
            // connection with no call open for 60 s, as on HTTP/1.1
            // (`HttpConfig`'s head and idle timeouts).
            h2: h2::Config {
                idle_timeout: Some(Duration::from_secs(60)),
                handshake_timeout: Some(Duration::from_secs(10)),
                ..h2::Config::default()
            },
            max_message_bytes: 4 << 20,
            request_timeout: Duration::from_secs(60),
            authorize: false,
            http: HttpEndpoint::default(),
        }
    }
}

/// A call of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallId {
    index: u16,
    /// Which of the calls that used this record it is.
    serial: u32,
}

impl CallId {
    /// The engine's record of this call: below the engine's call count, and
    /// reused by a later call once this one is over (a driver can keep its
    /// own per-call state in a slice indexed by it).
    pub fn index(self) -> usize {
        usize::from(self.index)
    }
}

/// Why a call's handler must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// The client cancelled the request: it reset the stream
    /// (RST_STREAM(CANCEL)), closed the request's HTTP stream, or sent
    /// `notifications/cancelled`.
    Reset,
    /// The deadline passed; the engine answered DEADLINE_EXCEEDED.
    Deadline,
    /// The connection ended.
    ConnectionClosed,
}

/// Something the application must act on. Owned: read what it refers to
/// with the engine's accessors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerEvent {
    /// Check the call's credentials ([`Server::bearer_token`]), then answer
    /// [`Server::authorize`]. Only with [`ServerConfig::authorize`] on.
    Authorize { call: CallId },
    /// Run the handler of this request ([`Server::request`]); answer with
    /// `respond`, `respond_error` or `fail`.
    Request { call: CallId },
    /// Stop the handler: the call is over.
    Cancelled { call: CallId, reason: CancelReason },
    /// A `notify` or `respond` that was refused as busy can go now.
    Writable { call: CallId },
    /// The connection is over; the last event.
    ConnectionClosed { error: Option<ConnectionError> },
}

/// Why `respond`, `respond_error` or `notify` did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The call is over (cancelled, reset, or already answered).
    Gone,
    /// The previous message is still being written: retry after
    /// [`ServerEvent::Writable`].
    Busy,
    /// The message is larger than the call store can give a call. For a
    /// final answer the engine has already answered -32603 instead.
    TooLarge { needed: usize },
}

/// What the application does with a server engine, whatever binding it
/// serves: read events and requests, answer, notify, publish. Drivers are
/// generic over it, so one handler loop serves the gRPC tunnel and stdio.
pub trait ServerEngine {
    /// The next event.
    fn poll_event(&mut self) -> Option<ServerEvent>;
    /// The request of a call the application handles.
    fn request(&self, call: CallId) -> Option<Request<'_>>;
    /// Answers the request with `result` (a JSON object).
    fn respond(&mut self, call: CallId, result: &[u8]) -> Result<(), SendError>;
    /// Answers the request with a JSON-RPC error; `data` is raw JSON.
    fn respond_error(
        &mut self,
        call: CallId,
        code: i32,
        message: &str,
        data: Option<&[u8]>,
    ) -> Result<(), SendError>;
    /// Answers with the core's words for a driver-side failure.
    fn fail(&mut self, call: CallId, failure: Failure) -> Result<(), SendError>;
    /// Sends a notification for the request.
    fn notify(&mut self, call: CallId, method: &str, params: &[u8]) -> Result<(), SendError>;
    /// Sends `notifications/progress` for the request; `params` carries the
    /// request's `progressToken` (see [`crate::mcp::tool::write_progress`]).
    fn progress(&mut self, call: CallId, params: &[u8]) -> Result<(), SendError> {
        self.notify(call, crate::mcp::meta::METHOD_PROGRESS, params)
    }
    /// Announces a change to the listen streams that want it.
    fn publish(&mut self, change: ListChange<'_>) -> usize;
    /// Whether a listen stream is open (a driver listens to its change
    /// source only then).
    fn is_listening(&self) -> bool;
    /// The bearer token of a call waiting to be authorized.
    fn bearer_token(&self, call: CallId) -> Option<&str>;
    /// The application's decision on a call's credentials.
    fn authorize(&mut self, call: CallId, decision: crate::mcp::auth::Decision<'_>);
}

/// A driver-side reason a request could not be handled; the engine answers
/// it with the JSON-RPC error the binding names, so every driver sends the
/// same words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Every handler of the driver is running.
    Busy,
    /// The arguments do not fit the handler's buffer.
    ArgumentsTooLarge,
    /// The result does not fit the handler's buffer.
    ResultTooLarge,
    /// The handler panicked or ended without an answer.
    HandlerFailed,
    /// The client did not take the call's messages (its flow-control
    /// window or pipe stayed full) while more of them came than the driver
    /// holds for one call, from a source that cannot be held back (a
    /// forwarding handler's server): the call is given up.
    ClientNotReading,
}

impl Failure {
    /// The JSON-RPC error this failure is answered with.
    pub const fn error(self) -> super::RpcError {
        use super::error::INTERNAL_ERROR;
        super::RpcError::new(
            INTERNAL_ERROR,
            match self {
                Self::Busy => "server busy: every handler is running",
                Self::ArgumentsTooLarge => "arguments larger than the handler's buffer",
                Self::ResultTooLarge => "result larger than the handler's buffer",
                Self::HandlerFailed => "the handler failed",
                Self::ClientNotReading => {
                    "the client did not read this call's messages: more waited than the server holds for one call"
                }
            },
        )
    }
}
