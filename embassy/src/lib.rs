//! mcpwire on embassy: the MCP servers of `mcpwire-core` on any
//! `embedded-io-async` connection, with no allocator and no `std`: the
//! gRPC tunnel (`/mcp.zig.transport.v1.Mcp/Call` over HTTP/2) and
//! Streamable HTTP (MCP 2026-07-28 §5, `POST /mcp` over HTTP/1.1) on one
//! embassy-net TCP port or another network stack's connection, and the
//! stdio binding (newline-delimited JSON-RPC) on a serial link (a UART, a
//! USB CDC-ACM class).
//!
//! The network bindings are cargo features, both on by default: `grpc`
//! and `http`. With both, each connection's first octets choose: the
//! HTTP/2 preface goes to the gRPC tunnel, anything else to HTTP/1.1. One
//! run loop serves either engine, and a connection holds one engine at a
//! time (an enum of the two: the gRPC engine's size, the larger). Flash on
//! `thumbv7em` (the NUCLEO-F767ZI example, 2 connections, opt-level z, fat
//! LTO): gRPC alone 122,552 octets, HTTP alone 92,396, both 144,936 (the
//! HTTP/1.1 binding's code, about 12.6 KB, and the driver's dispatch over
//! two engines); static RAM 45,584, 27,240 and 45,704. A binding that is
//! off costs nothing; stdio is always there and costs nothing until
//! [`Server::serve_stdio`] is called.
//!
//! Feature `typed` (off by default; it turns `grpc` on) serves the typed
//! gRPC binding beside the tunnel on the same HTTP/2 connection: the eight
//! unary RPCs of `/model_context_protocol.Mcp/<Rpc>` (the Google Cloud
//! proto files), transcoded by the core to and from the JSON-RPC the
//! engine judges, so the same tools and handler slots answer them. It
//! costs flash: the example firmware is 204,608 octets with it, 76,064
//! more than without (about 31 KiB of it core's float parsing and
//! formatting). Off, a typed call is UNIMPLEMENTED.
//!
//! A [`Server`] holds the application's portable tools
//! ([`mcpwire_core::mcp::tool::Tools`], the same tools `mcpwire-tokio`
//! serves with `App::portable_tools`) and a fixed pool of `HANDLERS` handler
//! slots. The firmware runs two kinds of embassy tasks over one
//! `&'static Server`:
//!
//! - **connection tasks** ([`Server::run_connection`]): each owns one
//!   [`embassy_net::tcp::TcpSocket`] (receive and transmit
//!   buffers given by the task), accepts on [`Config::port`], and runs the
//!   engine over that connection until it ends, then accepts again. `N`
//!   tasks serve `N` connections at a time on one port. Any other
//!   `embedded_io_async::{Read, Write}` connection is served the same way
//!   with [`Server::serve`], and a serial link with the stdio binding with
//!   [`Server::serve_stdio`] (the same tools and handler slots);
//! - **handler tasks** ([`Server::run_handler`]): each serves one slot and
//!   runs the tools called on it, one call at a time. A call arriving while
//!   every slot is busy is answered with the core's
//!   [`Failure::Busy`](mcpwire_core::mcp::server::Failure::Busy) error.
//!
//! The engine answers `server/discover`, `tools/list`, unknown tools and
//! methods and every protocol error itself; it acknowledges
//! `subscriptions/listen` with an empty filter (this server has no listen
//! source), and the stream stays open until the client ends it (a reset, on
//! stdio `notifications/cancelled`, frees its stream and call buffer at
//! once) or the server shuts down ([`Server::shutdown`]: the stream ends
//! with its final result). A client reset
//! (on stdio, `notifications/cancelled`) or a passed deadline
//! (`grpc-timeout`; on stdio, [`ServerConfig::request_timeout`]) drops the
//! tool's future at its next await. Deadlines and timers come from
//! `embassy-time`.
//!
//! Sizes are the firmware's choice, as const generics: `HANDLERS` slots of
//! `ARGS` octets of arguments and `RESULT` octets of result each; per
//! connection, the HTTP/2 engine's `STREAMS` (concurrent calls), `TABLE`
//! (HPACK table) and `BUF` (HTTP/2 buffers; the largest request head), and
//! its [`CallStore`] (for example [`SlabStore<SIZE, COUNT>`]: `COUNT`
//! call buffers of `SIZE` octets, the largest request and response message);
//! on stdio, the engine's `CALLS` (requests at a time) and its call store.
//!
//! Streamable HTTP answers one exchange at a time per connection, JSON or
//! an event stream (progress notifications, then the result) as the core
//! decides; its settings are [`Config::http`] (any `Host` accepted by
//! default: a device is reached by its LAN address). Bearer tokens
//! (`Config::tokens`, feature `auth`, on by default) apply to both network
//! bindings.
//!
//! Logging goes through `defmt` (feature `defmt`) or `log` (feature `log`),
//! and compiles to nothing with neither.
//!
//! ```no_run
//! use embassy_executor::Spawner;
//! use embassy_net::Stack;
//! use mcpwire_core::mcp::error::RpcError;
//! use mcpwire_core::mcp::registry::{ServerInfo, ToolInfo};
//! use mcpwire_core::mcp::tool::{Arguments, Tool, ToolContext, ToolOutput};
//! use mcpwire_embassy::{Config, Server, SlabStore};
//! use static_cell::StaticCell;
//!
//! struct Hello;
//!
//! impl Tool for Hello {
//!     const INFO: ToolInfo<'static> = ToolInfo {
//!         name: "hello",
//!         title: None,
//!         description: "Says hello.",
//!         input_schema: r#"{"type":"object"}"#,
//!     };
//!     async fn call<C: ToolContext>(&self, _: Arguments<'_>, _: &C, out: &mut ToolOutput<'_>)
//!         -> Result<(), RpcError> {
//!         out.text("hello from the board");
//!         Ok(())
//!     }
//! }
//!
//! // 2 handler slots, 512 octets of arguments and 2 KiB of result each.
//! type Mcp = Server<'static, (Hello,), 2, 512, 2048>;
//! static SERVER: StaticCell<Mcp> = StaticCell::new();
//!
//! #[embassy_executor::task(pool_size = 2)]
//! async fn mcp_connection(stack: Stack<'static>, server: &'static Mcp) -> ! {
//!     let mut rx = [0u8; 4096];
//!     let mut tx = [0u8; 4096];
//!     // 4 concurrent calls, a 4 KiB HPACK table, 4 KiB HTTP/2 buffers,
//!     // 4 call buffers of 4 KiB.
//!     server
//!         .run_connection::<SlabStore<4096, 4>, 4, 4096, 4096>(stack, &mut rx, &mut tx)
//!         .await
//! }
//!
//! #[embassy_executor::task(pool_size = 2)]
//! async fn mcp_handler(server: &'static Mcp) -> ! {
//!     server.run_handler().await
//! }
//!
//! fn start(spawner: Spawner, stack: Stack<'static>) {
//!     let info = ServerInfo { name: "board", version: "1.0", instructions: None };
//!     let Ok(server) = Mcp::new(info, (Hello,), Config::default()) else {
//!         return; // a tool's schema is invalid
//!     };
//!     let server: &'static Mcp = SERVER.init(server);
//!     for _ in 0..2 {
//!         spawner.spawn(mcp_connection(stack, server).unwrap());
//!         spawner.spawn(mcp_handler(server).unwrap());
//!     }
//! }
//! # fn main() {}
//! ```
#![no_std]

#[macro_use]
mod fmt;
pub mod client;
mod connection;
mod handler;
mod stop;
#[cfg(any(feature = "grpc", feature = "http"))]
mod wire;

use core::cell::Cell;

#[cfg(any(feature = "grpc", feature = "http"))]
use embassy_futures::select::{Either, select};
#[cfg(any(feature = "grpc", feature = "http"))]
use embassy_net::{Stack, tcp::TcpSocket};
use embassy_sync::blocking_mutex::Mutex as BlockingMutex;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::Duration;
#[cfg(any(feature = "grpc", feature = "http"))]
use embassy_time::{Timer, with_timeout};
use embedded_io_async::{Read, Write};
#[cfg(feature = "auth")]
use mcpwire_core::mcp::auth::StaticTokens;
use mcpwire_core::mcp::registry::{Registry, RegistryError, ServerInfo};
use mcpwire_core::mcp::server::{self as engine, ServerConfig, StdioConfig};
pub use mcpwire_core::mcp::server::{Allowed, HttpConfig, HttpEndpoint};
pub use mcpwire_core::mcp::store::{CallStore, SlabStore};
use mcpwire_core::mcp::tool::Tools;

pub use client::{CallStream, Client, ClientError, Link, Staged, Step};
pub use connection::ConnectionError;
use connection::{Binding, Conn, now};
use handler::Slot;
pub use handler::{MAX_PROGRESS_TOKEN, NOTE as MAX_PROGRESS_PARAMS};
#[cfg(any(feature = "grpc", feature = "http"))]
use wire::Wire;

/// Octets [`Server::run_connection`] takes from the end of the socket's
/// transmit buffer to stage the octets between the socket and the engine
/// (half in, half out): the driver's copy lives in RAM the firmware already
/// gave to the connection.
pub const TCP_STAGING: usize = 256;

/// The engine of a network connection: the gRPC tunnel or Streamable HTTP.
#[cfg(any(feature = "grpc", feature = "http"))]
type Network<'a, S, const STREAMS: usize, const TABLE: usize, const BUF: usize> =
    Wire<engine::Server<'a, S, STREAMS, TABLE, BUF>, engine::HttpServer<'a, S>>;

/// How long a closing connection has to deliver its last octets.
#[cfg(any(feature = "grpc", feature = "http"))]
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Executor rounds a connection gives the handler tasks to start.
const HANDLER_START_ROUNDS: usize = 8;

/// Settings of a [`Server`].
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The TCP port every connection task accepts on. Default 50051.
    pub port: u16,
    /// The engine's settings (HTTP/2, message size, default deadline).
    /// `authorize` follows `Config::tokens`; with the `http` feature its
    /// Streamable HTTP endpoint (`http`) follows [`Config::http`]'s.
    pub engine: ServerConfig<'static>,
    /// The Streamable HTTP binding's settings on the same port: limits and
    /// timeouts of HTTP/1.1, and the endpoint ([`HttpConfig::endpoint`]:
    /// its path, the `Host`/`:authority` and `Origin` checks, keep-alive
    /// comments), which HTTP/1.1 and `POST` on the HTTP/2 connection serve
    /// alike. `authorize` follows `Config::tokens`. Default: the core's,
    /// except that any `Host` is accepted (a device is reached by its LAN
    /// address, not a loopback name); an `Origin` must still be a loopback
    /// one (a browser page elsewhere cannot call the device). Only with
    /// the `http` feature.
    #[cfg(feature = "http")]
    pub http: HttpConfig<'static>,
    /// Bearer tokens, each naming its principal (kept in flash). With
    /// tokens, every call must carry one (`authorization: Bearer …`); a
    /// missing, unknown or refused token ends the call with the core's
    /// status and RFC 6750 challenge, the same as on every driver. `None`
    /// (the default): no authentication.
    /// Only with the `auth` feature.
    #[cfg(feature = "auth")]
    pub tokens: Option<StaticTokens<'static>>,
    /// TCP keep-alive interval. Default 15 s.
    pub keep_alive: Option<Duration>,
    /// A connection that receives nothing (keep-alive answers included) for
    /// this long is dropped. Default 60 s.
    pub idle_timeout: Option<Duration>,
    /// A connection whose output waits this long for the peer to take it
    /// is dropped. Meanwhile nothing more is read from it, and its calls
    /// keep their handler slots: a client that sends and never reads holds
    /// them for at most this long. Default 60 s.
    pub send_timeout: Option<Duration>,
}

/// The device's Streamable HTTP endpoint: the core's, but any `Host` (a
/// device is reached by its LAN address); `Origin`s still loopback only.
fn device_endpoint() -> HttpEndpoint<'static> {
    HttpEndpoint {
        allowed_hosts: Allowed::Any,
        ..HttpEndpoint::default()
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            port: 50051,
            engine: ServerConfig {
                http: device_endpoint(),
                ..ServerConfig::default()
            },
            #[cfg(feature = "http")]
            http: HttpConfig {
                endpoint: device_endpoint(),
                ..HttpConfig::default()
            },
            #[cfg(feature = "auth")]
            tokens: None,
            keep_alive: Some(Duration::from_secs(15)),
            idle_timeout: Some(Duration::from_secs(60)),
            send_timeout: Some(Duration::from_secs(60)),
        }
    }
}

impl Config {
    /// Whether calls must carry a bearer token.
    fn authorizes(&self) -> bool {
        #[cfg(feature = "auth")]
        return self.tokens.is_some();
        #[cfg(not(feature = "auth"))]
        return false;
    }
}

/// An MCP server over embassy-net: the tools `T`, `HANDLERS` handler slots
/// with `ARGS` octets of arguments and `RESULT` octets of result each.
/// Keep it in a `static` (a `StaticCell`) and hand `&'static` to the
/// connection and handler tasks (see the crate docs).
pub struct Server<'a, T, const HANDLERS: usize, const ARGS: usize, const RESULT: usize> {
    tools: T,
    registry: Registry<'a>,
    config: Config,
    slots: [Slot<ARGS, RESULT>; HANDLERS],
    /// The last connection mark handed out.
    tokens: BlockingMutex<CriticalSectionRawMutex, Cell<u32>>,
    /// Set by [`Server::shutdown`].
    stop: stop::Stop,
}

impl<T, const HANDLERS: usize, const ARGS: usize, const RESULT: usize> core::fmt::Debug
    for Server<'_, T, HANDLERS, ARGS, RESULT>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Server")
            .field("info", &self.registry.info)
            .field("tools", &self.registry.tools.len())
            .field("config", &self.config)
            .field("handlers", &HANDLERS)
            .finish_non_exhaustive()
    }
}

impl<'a, T: Tools, const HANDLERS: usize, const ARGS: usize, const RESULT: usize>
    Server<'a, T, HANDLERS, ARGS, RESULT>
{
    /// A server for `tools`, answering `server/discover` with `info`. Fails
    /// when a tool's input schema or its `x-mcp-header` annotations are
    /// invalid, or two tools share a name.
    pub fn new(info: ServerInfo<'a>, tools: T, config: Config) -> Result<Self, RegistryError<'a>> {
        let mut registry = Registry::new(info, T::TOOLS);
        registry.check()?;
        let config = Config {
            engine: ServerConfig {
                authorize: config.authorizes(),
                // One endpoint for HTTP/1.1 and HTTP/2.
                #[cfg(feature = "http")]
                http: config.http.endpoint,
                ..config.engine
            },
            #[cfg(feature = "http")]
            http: HttpConfig {
                authorize: config.authorizes(),
                ..config.http
            },
            ..config
        };
        Ok(Self {
            tools,
            registry,
            config,
            slots: [const { Slot::new() }; HANDLERS],
            tokens: BlockingMutex::new(Cell::new(0)),
            stop: stop::Stop::new(),
        })
    }

    /// Shuts the server down, as the tokio server does on its shutdown
    /// signal: every connection stops taking calls and ends its listen
    /// streams with their final result (on the gRPC tunnel GOAWAY, then
    /// `grpc-status: 0` on each listen stream; on Streamable HTTP the
    /// listen stream's result; on stdio as at the end of input), the calls
    /// in progress finish, then the connection closes; the connection
    /// tasks accept no more connections (they wait forever). For a firmware
    /// that is about to reset (an update, a power-down): clients learn the
    /// server went away instead of seeing their streams cut.
    ///
    /// The first 4 connection tasks are woken at once; any beyond notice
    /// within a second.
    pub fn shutdown(&self) {
        info!("mcpwire: shutting down");
        self.stop.stop();
    }

    /// Whether [`Server::shutdown`] was called.
    pub fn is_shut_down(&self) -> bool {
        self.stop.is_stopping()
    }

    /// The server's settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The tools.
    pub fn tools(&self) -> &T {
        &self.tools
    }

    /// Serves one handler slot forever: waits for a call, runs its tool,
    /// hands the result to the call's connection. Run it in `HANDLERS`
    /// embassy tasks; a task beyond `HANDLERS` has no slot and only waits.
    pub async fn run_handler(&self) -> ! {
        let slot = self.slots.iter().find(|slot| {
            slot.with(|s| {
                let free = !s.attached;
                s.attached = true;
                free
            })
        });
        match slot {
            Some(slot) => handler::serve(&self.tools, slot).await,
            None => {
                warn!("mcpwire: more handler tasks than handler slots");
                core::future::pending().await
            }
        }
    }

    /// Waits (a few executor rounds at most) until every handler slot has
    /// its task. At boot a connection task can run before the handler
    /// tasks spawned beside it: a serial link whose peer wrote first would
    /// otherwise read its first request before any slot can take it and
    /// answer it busy. With fewer handler tasks than slots it gives up
    /// after those rounds, and such calls are answered busy as before.
    pub(crate) async fn handlers_started(&self) {
        for _ in 0..HANDLER_START_ROUNDS {
            if self.slots.iter().all(|slot| slot.with(|s| s.attached)) {
                return;
            }
            embassy_futures::yield_now().await;
        }
    }

    /// Serves one connection until it ends: the peer closes it (end of
    /// file or a read error), the engine closes it, or a write fails. Its
    /// first octets choose the binding (with both features on): the
    /// HTTP/2 preface the gRPC tunnel (`mcp::server::Server<S, STREAMS,
    /// TABLE, BUF>`), anything else Streamable HTTP over HTTP/1.1
    /// (`mcp::server::HttpServer<S>`, one exchange at a time on
    /// [`HttpEndpoint::path`]); the engine is built on this future for the
    /// connection, and holds one binding's state at a time. `io` is any
    /// `embedded-io-async` connection whose `read` is cancel-safe (a read
    /// dropped before it completes loses nothing) and whose `write`
    /// delivers without a `flush`, as embassy-net's sockets do; `staging`
    /// is split in two halves, the octets on their way in and out (128
    /// octets each is plenty: the engine takes input and gives output in
    /// any pieces). Closing `io` is the caller's. A peer that sends nothing
    /// within [`HttpConfig::head_timeout`] is dropped unserved.
    #[cfg(any(feature = "grpc", feature = "http"))]
    pub async fn serve<S, const STREAMS: usize, const TABLE: usize, const BUF: usize, Io>(
        &self,
        io: &mut Io,
        staging: &mut [u8],
    ) -> Result<(), ConnectionError>
    where
        S: CallStore + Default,
        Io: Read + Write,
    {
        let (input, _) = staging.split_at_mut(staging.len() / 2);
        let Some(first) = self.sniff(io, input).await else {
            return Ok(());
        };
        let mut conn = self.network::<S, STREAMS, TABLE, BUF>(&input[..first]);
        let ended = conn.drive(io, staging, first).await;
        conn.end(ended);
        ended
    }

    /// Serves the stdio binding (newline-delimited JSON-RPC, MCP §6) over
    /// a serial link (a UART, a USB CDC-ACM class) with the same tools and
    /// handler slots, until the input ends (a read of 0 octets or a read
    /// error) and every call in progress is answered and written, or a
    /// write fails. The engine (`mcp::server::StdioServer<S, CALLS>`:
    /// `CALLS` requests at a time, each in a buffer of the [`CallStore`]
    /// `S`, the longest line) is built on this future. Its line limit and
    /// request deadline are [`ServerConfig::max_message_bytes`] and
    /// [`ServerConfig::request_timeout`] of [`Config::engine`]; a request
    /// past it is answered -32001 and its handler stopped. When every call
    /// is taken the engine stops reading until a handler answers (the
    /// link's own flow control pushes back). `io` and `staging` are as for
    /// [`Server::serve`]: `read` must be cancel-safe (a buffered UART's
    /// is). Bearer tokens do not apply: the link is the trust boundary.
    ///
    /// RAM: the engine with 2 calls of 1 KiB (`SlabStore<1024, 2>`) is
    /// 2,448 octets on `thumbv7em` (2,050 of them the call store), in this
    /// future.
    pub async fn serve_stdio<S, const CALLS: usize, Io>(
        &self,
        io: &mut Io,
        staging: &mut [u8],
    ) -> Result<(), ConnectionError>
    where
        S: CallStore + Default,
        Io: Read + Write,
    {
        let mut conn = self.connection(|s| {
            let config = StdioConfig {
                max_line_bytes: s.config.engine.max_message_bytes,
                request_timeout: s.config.engine.request_timeout,
            };
            engine::StdioServer::<S, CALLS>::new(s.registry, config, S::default(), now())
        });
        let ended = conn.drive(io, staging, 0).await;
        conn.end(ended);
        ended
    }

    /// A new connection's state, its engine made by `engine`. Not an
    /// `async fn` around `drive`: each level of futures keeps its own copy
    /// of its arguments, and this one is in every connection task's RAM.
    fn connection<E: Binding>(
        &self,
        engine: impl FnOnce(&Self) -> E,
    ) -> Conn<'_, T, E, HANDLERS, ARGS, RESULT> {
        let token = self.next_token();
        info!("mcpwire: connection {} accepted", token);
        Conn {
            server: self,
            engine: engine(self),
            token,
        }
    }

    /// Reads the octets that choose the binding into `input` (with both
    /// bindings on; none otherwise): how many, `None` when the peer went
    /// away (or sent nothing within the HTTP head timeout) first.
    #[cfg(any(feature = "grpc", feature = "http"))]
    async fn sniff<Io: Read>(&self, io: &mut Io, input: &mut [u8]) -> Option<usize> {
        #[cfg(not(all(feature = "grpc", feature = "http")))]
        {
            let _ = (io, input);
            Some(0)
        }
        #[cfg(all(feature = "grpc", feature = "http"))]
        {
            // A peer that sends nothing is dropped as HTTP/1.1 drops a
            // head that does not come.
            let bound = self.config.http.head_timeout.as_micros();
            let bound = Duration::from_micros(u64::try_from(bound).unwrap_or(u64::MAX));
            match with_timeout(bound, wire::sniff(io, input)).await {
                Ok(n) if n > 0 => Some(n),
                _ => None,
            }
        }
    }

    /// The state of a network connection whose first octets are `first`:
    /// the gRPC tunnel after the HTTP/2 preface, Streamable HTTP otherwise
    /// (or the one binding compiled in).
    #[cfg(any(feature = "grpc", feature = "http"))]
    fn network<S, const STREAMS: usize, const TABLE: usize, const BUF: usize>(
        &self,
        first: &[u8],
    ) -> Conn<'_, T, Network<'a, S, STREAMS, TABLE, BUF>, HANDLERS, ARGS, RESULT>
    where
        S: CallStore + Default,
    {
        let _ = first;
        #[cfg(feature = "grpc")]
        let grpc = |s: &Self| engine::Server::new(s.registry, s.config.engine, S::default(), now());
        #[cfg(feature = "http")]
        let http =
            |s: &Self| engine::HttpServer::new(s.registry, s.config.http, S::default(), now());
        self.connection(|s| {
            #[cfg(all(feature = "grpc", feature = "http"))]
            return match wire::is_preface(first) {
                true => Wire::Grpc(grpc(s)),
                false => Wire::Http(http(s)),
            };
            #[cfg(all(feature = "grpc", not(feature = "http")))]
            return Wire::Grpc(grpc(s));
            #[cfg(all(feature = "http", not(feature = "grpc")))]
            return Wire::Http(http(s));
        })
    }

    /// Serves connections on [`Config::port`] forever, one at a time: a
    /// TCP socket over `rx_buffer` and `tx_buffer` accepts, the connection
    /// runs as in [`Server::serve`] until it ends, the socket closes, and
    /// the next accept begins. The last [`TCP_STAGING`] octets of
    /// `tx_buffer` (at most half of it) are the staging; the socket has the
    /// rest (`rx_buffer`, the advertised window, stays whole). Run it in as
    /// many embassy tasks as connections are to be served at once.
    #[cfg(any(feature = "grpc", feature = "http"))]
    pub async fn run_connection<S, const STREAMS: usize, const TABLE: usize, const BUF: usize>(
        &self,
        stack: Stack<'_>,
        rx_buffer: &mut [u8],
        tx_buffer: &mut [u8],
    ) -> !
    where
        S: CallStore + Default,
    {
        let at = tx_buffer.len() - TCP_STAGING.min(tx_buffer.len() / 2);
        let (tx_buffer, staging) = tx_buffer.split_at_mut(at);
        loop {
            if self.stop.is_stopping() {
                // Shut down: accept nothing more.
                loop {
                    core::future::pending::<()>().await;
                }
            }
            let mut socket = TcpSocket::new(stack, rx_buffer, tx_buffer);
            socket.set_timeout(self.config.idle_timeout);
            socket.set_keep_alive(self.config.keep_alive);
            match select(socket.accept(self.config.port), self.stop.wait()).await {
                Either::First(Ok(())) => {}
                Either::First(Err(_)) => {
                    warn!("mcpwire: accept failed");
                    Timer::after(Duration::from_millis(100)).await;
                    continue;
                }
                Either::Second(()) => {
                    socket.abort();
                    continue;
                }
            }
            socket.set_nagle_enabled(false);
            let (input, _) = staging.split_at_mut(staging.len() / 2);
            let Some(first) = self.sniff(&mut socket, input).await else {
                socket.abort();
                let _ = with_timeout(Duration::from_millis(100), socket.flush()).await;
                continue;
            };
            let mut conn = self.network::<S, STREAMS, TABLE, BUF>(&input[..first]);
            let ended = conn.drive(&mut socket, staging, first).await;
            conn.end(ended);
            drop(conn);
            socket.close();
            let _ = with_timeout(CLOSE_GRACE, socket.flush()).await;
            socket.abort();
            let _ = with_timeout(Duration::from_millis(100), socket.flush()).await;
        }
    }

    /// A mark for a new connection (never 0).
    fn next_token(&self) -> u32 {
        self.tokens.lock(|t| {
            let next = t.get().wrapping_add(1).max(1);
            t.set(next);
            next
        })
    }
}
