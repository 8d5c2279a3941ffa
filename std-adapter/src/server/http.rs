//! The tokio driver of the core's Streamable HTTP binding over HTTP/1.1
//! (MCP 2026-07-28 §5): a connection that did not open with the HTTP/2
//! preface (or that negotiated ALPN `http/1.1`) runs the core's
//! [`HttpServer`](engine::HttpServer) with the connection loop and the
//! handlers of the gRPC tunnel.
//!
//! The core makes every decision (statuses, the checks of §5.6, JSON or
//! event stream, keep-alive, limits); this module only builds the engine.

use std::future::Future;
use std::io;

use mcpwire_core::mcp::server as engine;
use mcpwire_core::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};

use super::connection::{self, BUF_SLACK, ConnectionEngine, Shared};
use crate::clock::now;
use crate::store::HeapStore;

/// The engine of one HTTP/1.1 connection: one exchange at a time, the
/// request in a heap buffer while it lasts.
pub(super) type HttpEngine = engine::HttpServer<'static, HeapStore>;

impl ConnectionEngine for HttpEngine {
    fn recv_eof(&mut self) {
        HttpEngine::recv_eof(self);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        HttpEngine::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        HttpEngine::handle_timeout(self, now);
    }
    fn is_over(&self) -> bool {
        self.is_finished()
    }
    fn go_away(&mut self) {
        HttpEngine::go_away(self);
    }
}

/// Serves one HTTP/1.1 connection; `first` are octets already read from it.
pub(super) fn serve<R, W>(
    rd: R,
    wr: W,
    shared: Shared,
    first: &[u8],
) -> impl Future<Output = io::Result<()>>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // A call's buffer holds the request head and body, then each message
    // of the answer with its framing.
    let common = &*shared.common;
    let store = HeapStore::new(common.http.max_body_bytes.saturating_add(BUF_SLACK));
    let mut engine = Box::new(HttpEngine::new(common.registry, common.http, store, now()));
    engine.set_listen_limits(common.listen);
    connection::run(engine, rd, wr, shared, first)
}
