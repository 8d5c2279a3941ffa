//! The tokio driver of the tunnel server engine: an accept loop, and one
//! task per connection that moves bytes, time and handler answers between
//! a socket and a boxed [`Engine`].
//!
//! The connection task follows the engine's run loop: feed what the socket
//! read to [`Engine::recv`] until it is consumed, drain
//! [`Engine::poll_event`] after every call, pull [`Engine::poll_transmit`]
//! until it returns 0, then sleep until input, a handler message, or
//! [`Engine::poll_timeout`] (then [`Engine::handle_timeout`]). The protocol
//! stays in the core.
//!
//! Handlers run as tokio tasks. They talk back through one mpsc channel per
//! connection ([`Outgoing`]); the connection task keeps each call's
//! [`AbortHandle`] and aborts it when the engine reports
//! [`ServerEvent::Cancelled`] (client reset, passed deadline, connection
//! closed).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use mcpwire_core::mcp::error::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};
use mcpwire_core::mcp::meta::{KEY_SERVER_INFO, KEY_SUBSCRIPTION_ID};
use mcpwire_core::mcp::registry::Registry;
use mcpwire_core::mcp::server::{Engine, EngineConfig, SendError, ServerEvent};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::{broadcast, watch};
use tokio::task::{AbortHandle, JoinSet};

use crate::app::{
    App, CallLink, Handlers, ListenEvent, PromptGet, ResourceRead, Role, ToolCall, ToolError,
};
use crate::auth::{Auth, AuthDecision, bearer_token, refusal};
use crate::clock::{Timer, now};
use crate::outbox;
use crate::storage::{HeapStorage, grow_doubling};
use crate::store::HeapStore;
#[cfg(feature = "tls")]
use crate::tls::{ALPN_H2, TlsConfig};

pub use mcpwire_core::mcp::server::CallId;

/// The engine of one connection: 32 concurrent calls, a 4 KiB HPACK table,
/// 8 KiB HTTP/2 buffers (the largest request head) held only while in use,
/// and a heap buffer per call while it lasts, sized to its request and to
/// each message of its response.
pub type ConnEngine = Engine<'static, HeapStore, 32, 4096, 8192, HeapStorage<8192>>;

/// Read from the socket at a time.
const READ_BUF: usize = 64 << 10;
const TRANSMIT_CHUNK: usize = 16 << 10;
/// Stop pulling frames while this much waits for the socket.
const WRITE_HIGH: usize = 64 << 10;
/// Messages from handlers waiting for the connection task.
const CHANNEL: usize = 256;
/// How long connections get to finish after shutdown.
const GRACE: Duration = Duration::from_secs(5);
/// How long a TLS handshake may take.
#[cfg(feature = "tls")]
const HANDSHAKE: Duration = Duration::from_secs(10);

/// A message of a handler for its call.
#[derive(Debug)]
pub(crate) enum Outgoing {
    Notify {
        call: CallId,
        method: &'static str,
        params: Vec<u8>,
    },
    Respond {
        call: CallId,
        result: Vec<u8>,
    },
    Error {
        call: CallId,
        code: i32,
        message: String,
        data: Option<Vec<u8>>,
    },
}

impl Outgoing {
    fn call(&self) -> CallId {
        match self {
            Self::Notify { call, .. } | Self::Respond { call, .. } | Self::Error { call, .. } => {
                *call
            }
        }
    }

    fn is_final(&self) -> bool {
        !matches!(self, Self::Notify { .. })
    }

    fn from_result(call: CallId, result: Result<Value, ToolError>) -> Self {
        match result {
            Ok(v) => Self::Respond {
                call,
                result: json_bytes(&v),
            },
            Err(e) => Self::Error {
                call,
                code: e.code,
                message: e.message,
                data: e.data.as_ref().map(json_bytes),
            },
        }
    }
}

/// A value as JSON text (serde_json's writer, not its `Display`).
fn json_bytes(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    crate::app::write_json(&mut out, v);
    out
}

/// A tunnel server bound to a TCP address: cleartext HTTP/2 with prior
/// knowledge, or TLS with ALPN `h2` (feature `tls`); optionally with
/// bearer-token authentication of every call ([`Server::with_auth`]).
pub struct Server {
    listener: TcpListener,
    config: EngineConfig,
    auth: Option<Arc<dyn Auth>>,
    #[cfg(feature = "tls")]
    tls: Option<TlsConfig>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Server");
        d.field("listener", &self.listener)
            .field("config", &self.config)
            .field("auth", &self.auth.is_some());
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls.is_some());
        d.finish()
    }
}

impl Server {
    /// Binds `addr` (for example `127.0.0.1:50051`; port 0 picks one).
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<Self> {
        Ok(Self {
            listener: TcpListener::bind(addr).await?,
            config: EngineConfig::default(),
            auth: None,
            #[cfg(feature = "tls")]
            tls: None,
        })
    }

    /// Binds `addr` for TLS with the PEM certificate chain (leaf first) and
    /// private key; ALPN `h2` only (see [`TlsConfig`]).
    #[cfg(feature = "tls")]
    pub async fn bind_tls(
        addr: impl ToSocketAddrs,
        cert_chain_pem: &[u8],
        key_pem: &[u8],
    ) -> io::Result<Self> {
        let tls = TlsConfig::from_pem(cert_chain_pem, key_pem)?;
        Ok(Self::bind(addr).await?.with_tls(tls))
    }

    /// Serves TLS only, with ALPN `h2`: a client that negotiates another
    /// protocol, or none, is closed after the handshake.
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Checks every call's bearer token with `auth` before anything is
    /// answered (see [`crate::auth`]): a refused call ends with
    /// UNAUTHENTICATED or PERMISSION_DENIED and a `www-authenticate`
    /// trailer; an allowed one shows the principal to its handler
    /// ([`ToolCall::principal`]).
    pub fn with_auth(mut self, auth: impl Auth) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// The engine's settings (HTTP/2, message size, default deadline).
    /// `authorize` is set by [`Server::with_auth`], whatever is given here.
    pub fn with_config(mut self, config: EngineConfig) -> Self {
        self.config = config;
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `app` until an accept error that is not transient.
    pub async fn serve(self, app: App) -> io::Result<()> {
        self.serve_with_shutdown(app, std::future::pending()).await
    }

    /// Serves `app` until `signal` completes; then stops accepting, ends
    /// the listen streams with their result, lets running calls finish,
    /// and closes the connections (at most 5 s later).
    pub async fn serve_with_shutdown(
        self,
        app: App,
        signal: impl Future<Output = ()>,
    ) -> io::Result<()> {
        let registry = app
            .registry()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}")))?;
        let handlers = Arc::new(Handlers::new(&app));
        let config = EngineConfig {
            authorize: self.auth.is_some(),
            ..self.config
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut conns = JoinSet::new();
        tokio::pin!(signal);
        loop {
            tokio::select! {
                r = self.listener.accept() => match r {
                    Ok((socket, _)) => {
                        let shared = Shared {
                            registry,
                            config,
                            handlers: Arc::clone(&handlers),
                            auth: self.auth.clone(),
                            stop: stop_rx.clone(),
                        };
                        #[cfg(feature = "tls")]
                        if let Some(tls) = &self.tls {
                            conns.spawn(run_tls_connection(socket, tls.clone(), shared));
                            continue;
                        }
                        conns.spawn(run_connection(socket, shared));
                    }
                    // Out of descriptors and the like: wait, then go on.
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                },
                () = &mut signal => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        let _ = stop_tx.send(true);
        let _ =
            tokio::time::timeout(GRACE, async { while conns.join_next().await.is_some() {} }).await;
        conns.abort_all();
        Ok(())
    }
}

// ----------------------------------------------------------------------
// Time
// ----------------------------------------------------------------------

/// The core's clock: microseconds since the first use in this process.
/// Polls `fut` once, with a waker that does nothing (a future that waits
/// registers the real one when its task polls it again); a panic is caught.
fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<std::thread::Result<F::Output>> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match std::panic::catch_unwind(AssertUnwindSafe(|| fut.poll(&mut cx))) {
        Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
        Ok(Poll::Pending) => Poll::Pending,
        Err(panic) => Poll::Ready(Err(panic)),
    }
}

// ----------------------------------------------------------------------
// One connection
// ----------------------------------------------------------------------

// The read and transmit buffers of the connections a worker thread runs.
// Input is fed to the engine as soon as it is read, and output is kept
// only while the socket does not take it, so an idle connection holds no
// buffer of its own. Two cells: feeding may transmit.
thread_local! {
    static READ: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_BUF].into_boxed_slice());
    static TRANSMIT: RefCell<Box<[u8]>> =
        RefCell::new(vec![0; TRANSMIT_CHUNK].into_boxed_slice());
}

/// Reads into this thread's read buffer; returns how many octets it holds.
/// The caller must take them before its next await (the task may move to
/// another thread then).
fn read_shared<R: AsyncRead + Unpin>(rd: &mut R) -> impl Future<Output = io::Result<usize>> + '_ {
    std::future::poll_fn(move |cx| {
        READ.with_borrow_mut(|b| {
            let mut buf = ReadBuf::new(b);
            match Pin::new(&mut *rd).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.filled().len())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        })
    })
}

/// What every connection of a server shares.
struct Shared {
    registry: Registry<'static>,
    config: EngineConfig,
    handlers: Arc<Handlers>,
    auth: Option<Arc<dyn Auth>>,
    stop: watch::Receiver<bool>,
}

impl Shared {
    fn conn(self) -> (Conn, outbox::Receiver<Outgoing>) {
        // Calls may carry messages up to `max_message_bytes`; their
        // responses too (plus the framing).
        let store = HeapStore::new(self.config.max_message_bytes.saturating_add(64 << 10));
        let engine = Box::new(ConnEngine::new(self.registry, self.config, store, now()));
        let (tx, rx) = outbox::channel(CHANNEL);
        let conn = Conn {
            engine,
            calls: Calls::default(),
            handlers: self.handlers,
            auth: self.auth,
            tx,
            stop: self.stop,
        };
        (conn, rx)
    }
}

async fn run_connection(mut socket: TcpStream, shared: Shared) -> io::Result<()> {
    socket.set_nodelay(true)?;
    let (mut conn, rx) = shared.conn();
    let (rd, wr) = socket.split();
    conn.drive(rd, wr, rx).await
}

/// The TLS handshake, the ALPN check, then the connection as in the clear.
#[cfg(feature = "tls")]
async fn run_tls_connection(socket: TcpStream, tls: TlsConfig, shared: Shared) -> io::Result<()> {
    socket.set_nodelay(true)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config);
    let mut stream = tokio::time::timeout(HANDSHAKE, acceptor.accept(socket))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    if stream.get_ref().1.alpn_protocol() != Some(ALPN_H2) {
        // The binding: refuse a client that negotiated another protocol
        // (or none): close_notify, then close.
        let _ = stream.shutdown().await;
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the TLS client did not negotiate ALPN h2",
        ));
    }
    let (mut conn, rx) = shared.conn();
    let (rd, wr) = tokio::io::split(stream);
    conn.drive(rd, wr, rx).await
}

/// A call whose handler runs.
struct Running {
    task: Option<AbortHandle>,
    cancel: watch::Sender<bool>,
    /// Messages the engine refused as busy, in order.
    pending: VecDeque<Outgoing>,
}

impl Running {
    fn stop(self) {
        let _ = self.cancel.send(true);
        if let Some(task) = self.task {
            task.abort();
        }
    }
}

/// The running calls, at their engine record's index (so the set grows to
/// the most calls a connection had at once, like the engine's records, and
/// a call's start and end allocate nothing); dropping them (the connection
/// task ends or is aborted) aborts their handlers.
#[derive(Default)]
struct Calls(Vec<Option<(CallId, Running)>>);

impl Calls {
    fn insert(&mut self, call: CallId, running: Running) {
        let i = call.index();
        grow_doubling(&mut self.0, i + 1, usize::MAX, || None);
        // The engine reuses an index only after that call ended; a record
        // still here lost its end: stop its handler.
        if let Some((_, old)) = self.0[i].replace((call, running)) {
            old.stop();
        }
    }

    fn get_mut(&mut self, call: &CallId) -> Option<&mut Running> {
        match self.0.get_mut(call.index()) {
            Some(Some((c, r))) if c == call => Some(r),
            _ => None,
        }
    }

    fn remove(&mut self, call: &CallId) -> Option<Running> {
        let slot = self.0.get_mut(call.index())?;
        if slot.as_ref().is_some_and(|(c, _)| c == call) {
            slot.take().map(|(_, r)| r)
        } else {
            None
        }
    }

    fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }

    /// Stops every running call.
    fn stop_all(&mut self) {
        for (_, r) in self.0.iter_mut().filter_map(Option::take) {
            r.stop();
        }
    }
}

impl Drop for Calls {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// A request copied out of the engine.
struct OwnedRequest {
    call: CallId,
    method: String,
    id: Value,
    params: Value,
    progress_token: Option<Value>,
    principal: Option<String>,
}

/// An engine event, copied so the engine can be called while handling it.
enum Owned {
    /// Only with an [`Auth`]: its decision, and whether the call carried a
    /// bearer token (the token itself is not copied).
    Authorize {
        call: CallId,
        decision: AuthDecision,
        had_token: bool,
    },
    Request(OwnedRequest),
    Cancelled(CallId),
    Writable(CallId),
    Closed,
}

fn next_event(engine: &mut ConnEngine, auth: Option<&dyn Auth>) -> Option<Owned> {
    Some(match engine.poll_event()? {
        ServerEvent::Request { call, request } => Owned::Request(OwnedRequest {
            call,
            method: String::from_utf8_lossy(request.method).into_owned(),
            id: serde_json::from_slice(request.id).unwrap_or(Value::Null),
            params: if request.params.is_empty() {
                Value::Object(Map::new())
            } else {
                serde_json::from_slice(request.params).unwrap_or(Value::Null)
            },
            progress_token: request
                .meta
                .progress_token
                .and_then(|t| serde_json::from_slice(t).ok()),
            principal: request
                .principal
                .map(|p| String::from_utf8_lossy(p).into_owned()),
        }),
        ServerEvent::Authorize {
            call,
            authorization,
        } => {
            let token = bearer_token(authorization);
            Owned::Authorize {
                call,
                // Authorize comes only with `authorize` on, which only an
                // Auth sets; without one, refuse.
                decision: auth.map_or(AuthDecision::Unauthenticated, |a| a.check(token)),
                had_token: token.is_some(),
            }
        }
        ServerEvent::Cancelled { call, .. } => Owned::Cancelled(call),
        ServerEvent::Writable { call } => Owned::Writable(call),
        ServerEvent::ConnectionClosed { .. } => Owned::Closed,
    })
}

struct Conn {
    engine: Box<ConnEngine>,
    calls: Calls,
    handlers: Arc<Handlers>,
    auth: Option<Arc<dyn Auth>>,
    tx: outbox::Sender<Outgoing>,
    stop: watch::Receiver<bool>,
}

impl Conn {
    async fn drive<R, W>(
        &mut self,
        mut rd: R,
        mut wr: W,
        mut rx: outbox::Receiver<Outgoing>,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        // Octets waiting for the socket; empty (and unallocated) when idle.
        let mut out: Vec<u8> = Vec::new();
        let mut written = 0;
        let mut eof = false;
        let mut stopping = *self.stop.borrow();
        if stopping {
            self.engine.go_away();
        }
        // The timer and the stop signal live across the loop: making them
        // anew on each turn would register and drop a timer entry and a
        // waiter on the server-wide signal every time.
        let mut timer = Timer::new();
        let mut stop = self.stop.clone();
        let stop_signal = async move {
            // An error means the server is gone: stop as well.
            let _ = stop.changed().await;
        };
        tokio::pin!(stop_signal);
        loop {
            if written == out.len() {
                // Everything went out: an idle connection holds no buffer.
                out = Vec::new();
                written = 0;
            }
            self.transmit(&mut out, WRITE_HIGH);
            let idle = written == out.len();
            // After the peer's EOF, or once the GOAWAY of a shutdown has
            // gone out and no call is left, close the socket (dropping the
            // calls aborts their handlers).
            if idle && (self.engine.is_closed() || eof || (stopping && self.calls.is_empty())) {
                break;
            }
            timer.set(self.engine.poll_timeout());
            tokio::select! {
                r = read_shared(&mut rd), if !eof => match r {
                    Ok(0) => {
                        eof = true;
                        self.engine.recv_eof();
                        self.drain_events();
                    }
                    // The octets are in this thread's buffer until the
                    // next await: feed them now.
                    Ok(n) => READ.with_borrow(|b| self.feed(&b[..n], &mut out))?,
                    Err(e) => return Err(e),
                },
                r = wr.write(&out[written..]), if written < out.len() => {
                    written += r?;
                }
                msg = rx.recv() => {
                    self.outgoing(msg);
                    // Take what else is queued before writing.
                    while let Some(msg) = rx.try_recv() {
                        self.outgoing(msg);
                    }
                    self.drain_events();
                }
                () = timer.fired(), if timer.is_set() => {
                    self.engine.handle_timeout(now());
                    self.drain_events();
                }
                () = &mut stop_signal, if !stopping => {
                    // The listen tasks watch the same signal; a dropped
                    // server stops us as well.
                    stopping = true;
                    // GOAWAY: the client opens no new call here.
                    self.engine.go_away();
                    self.drain_events();
                }
            }
        }
        let _ = wr.shutdown().await;
        Ok(())
    }

    /// Feeds `input` to the engine until it is consumed.
    fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut stalled = 0;
        while !input.is_empty() {
            let used = self.engine.recv(input, now());
            input = &input[used..];
            self.drain_events();
            if used > 0 {
                stalled = 0;
                continue;
            }
            // The engine waits for its control frames to go out first.
            stalled += 1;
            if stalled > 3 {
                return Err(io::Error::other(format!(
                    "the engine consumes no input ({} octets left)",
                    input.len()
                )));
            }
            self.transmit(out, usize::MAX);
        }
        Ok(())
    }

    /// Appends what the engine has to send to `out`, up to `limit` octets
    /// waiting.
    fn transmit(&mut self, out: &mut Vec<u8>, limit: usize) {
        let mut idle = 0;
        while out.len() < limit {
            let n = TRANSMIT.with_borrow_mut(|b| {
                let n = self.engine.poll_transmit(b);
                out.extend_from_slice(&b[..n]);
                n
            });
            // An emptied transmit buffer lets blocked calls go on
            // (Writable): they may queue more.
            let moved = self.drain_events();
            if n > 0 || moved {
                idle = 0;
            } else {
                idle += 1;
                if idle > 1 {
                    break;
                }
            }
        }
    }

    /// Handles every queued engine event; whether there was any.
    fn drain_events(&mut self) -> bool {
        let mut any = false;
        while let Some(e) = next_event(&mut self.engine, self.auth.as_deref()) {
            any = true;
            match e {
                Owned::Request(req) => self.start(req),
                Owned::Cancelled(call) => {
                    if let Some(r) = self.calls.remove(&call) {
                        r.stop();
                    }
                }
                Owned::Writable(call) => self.flush_call(call),
                Owned::Authorize {
                    call,
                    decision,
                    had_token,
                } => match (&decision, refusal(&decision, had_token)) {
                    (AuthDecision::Allow { principal }, _) => {
                        self.engine.authorized(call, Some(principal));
                    }
                    (_, Some((code, message, challenge))) => {
                        self.engine.unauthorized(call, code, message, &challenge);
                    }
                    (_, None) => {}
                },
                Owned::Closed => {
                    self.calls.stop_all();
                }
            }
        }
        any
    }

    /// A handler's message: queue it behind the call's earlier ones.
    fn outgoing(&mut self, msg: Outgoing) {
        let call = msg.call();
        // Unknown: the call was cancelled meanwhile.
        if let Some(r) = self.calls.get_mut(&call) {
            r.pending.push_back(msg);
            self.flush_call(call);
        }
    }

    /// Hands the call's queued messages to the engine, in order, until it
    /// is busy.
    fn flush_call(&mut self, call: CallId) {
        let Some(r) = self.calls.get_mut(&call) else {
            return;
        };
        while let Some(msg) = r.pending.front() {
            let sent = match msg {
                Outgoing::Notify { method, params, .. } => self.engine.notify(call, method, params),
                Outgoing::Respond { result, .. } => self.engine.respond(call, result),
                Outgoing::Error {
                    code,
                    message,
                    data,
                    ..
                } => self
                    .engine
                    .respond_error(call, *code, message, data.as_deref()),
            };
            match sent {
                Ok(()) => {
                    if msg.is_final() {
                        // The handler is done; the engine sends the trailers.
                        self.calls.remove(&call);
                        return;
                    }
                    r.pending.pop_front();
                }
                Err(SendError::Busy) => return,
                Err(SendError::Gone) => {
                    if let Some(r) = self.calls.remove(&call) {
                        r.stop();
                    }
                    return;
                }
                Err(SendError::TooLarge { needed }) => {
                    if msg.is_final() {
                        let message = format!("result too large ({needed} octets)");
                        if let Some(front) = r.pending.front_mut() {
                            *front = Outgoing::Error {
                                call,
                                code: INTERNAL_ERROR,
                                message,
                                data: None,
                            };
                        }
                    } else {
                        // A notification that cannot fit is dropped.
                        r.pending.pop_front();
                    }
                }
            }
        }
    }

    /// Starts the handler of a request.
    fn start(&mut self, req: OwnedRequest) {
        let call = req.call;
        let (cancel, cancelled) = watch::channel(false);
        let link = CallLink {
            call,
            out: self.tx.clone(),
            cancelled,
        };
        let h = &self.handlers;
        let name = req
            .params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let work: crate::app::BoxFuture<Result<Value, ToolError>> = match req.method.as_str() {
            "tools/call" => match h.tools.get(&name) {
                Some(handler) => {
                    let fut = handler(ToolCall {
                        link,
                        name,
                        params: req.params,
                        progress_token: req.progress_token,
                        principal: req.principal,
                    });
                    Box::pin(async move { fut.await.map(|r| r.to_json()) })
                }
                None => Box::pin(async { Err(ToolError::invalid_params("Unknown tool")) }),
            },
            "resources/read" => {
                let uri = req
                    .params
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                match h.resources.get(&uri) {
                    Some((mime, handler)) => {
                        let mime = mime.clone();
                        let fut = handler(ResourceRead {
                            uri: uri.clone(),
                            params: req.params,
                        });
                        Box::pin(async move {
                            let text = fut.await?;
                            let mut content = json!({"uri": uri, "text": text});
                            if let Some(m) = mime {
                                content["mimeType"] = Value::from(m);
                            }
                            Ok(json!({"resultType": "complete", "contents": [content]}))
                        })
                    }
                    None => Box::pin(async move {
                        let mut e = ToolError::invalid_params("Resource not found");
                        e.data = Some(json!({"uri": uri}));
                        Err(e)
                    }),
                }
            }
            "prompts/get" => match h.prompts.get(&name) {
                Some(handler) => {
                    let fut = handler(PromptGet {
                        name,
                        params: req.params,
                    });
                    Box::pin(async move {
                        let messages: Vec<Value> = fut
                            .await?
                            .into_iter()
                            .map(|m| {
                                let role = match m.role {
                                    Role::User => "user",
                                    Role::Assistant => "assistant",
                                };
                                json!({"role": role, "content": {"type": "text", "text": m.text}})
                            })
                            .collect();
                        Ok(json!({"resultType": "complete", "messages": messages}))
                    })
                }
                None => Box::pin(async { Err(ToolError::invalid_params("Unknown prompt")) }),
            },
            "subscriptions/listen" => Box::pin(listen(
                link,
                req.id,
                req.params,
                Offered {
                    tools: !h.tools.is_empty(),
                    prompts: !h.prompts.is_empty(),
                    resources: !h.resources.is_empty(),
                },
                h.listen.as_ref().map(broadcast::Sender::subscribe),
                self.stop.clone(),
                h.server_info.clone(),
            )),
            _ => Box::pin(async { Err(ToolError::new(METHOD_NOT_FOUND, "Method not found")) }),
        };
        let mut work = work;
        let running = Running {
            task: None,
            cancel,
            pending: VecDeque::new(),
        };
        // Most handlers finish without waiting: run the handler once here,
        // and spawn a task only for one that waits. Its answer takes the
        // channel like every other message of the call, after the
        // notifications it may have sent.
        if let Poll::Ready(r) = poll_once(work.as_mut()) {
            let result = r.unwrap_or_else(|_| Err(ToolError::internal("the handler panicked")));
            let msg = Outgoing::from_result(call, result);
            // Nothing of this call waits in the channel (it is empty): the
            // answer goes to the engine at once.
            if self.tx.is_empty() {
                self.calls.insert(call, running);
                self.outgoing(msg);
                return;
            }
            match self.tx.try_send(msg) {
                Ok(()) => {}
                Err(outbox::TrySendError::Full(msg)) => {
                    let out = self.tx.clone();
                    tokio::spawn(async move {
                        let _ = out.send(msg).await;
                    });
                }
                // The connection is going away.
                Err(outbox::TrySendError::Closed(_)) => return,
            }
            self.calls.insert(call, running);
            return;
        }
        let handle = tokio::spawn(work);
        let task = handle.abort_handle();
        // A watcher turns the handler's end (or its panic) into the answer;
        // an aborted handler answers nothing (the engine already ended the
        // call).
        let out = self.tx.clone();
        tokio::spawn(async move {
            let result = match handle.await {
                Ok(r) => r,
                Err(e) if e.is_panic() => Err(ToolError::internal("the handler panicked")),
                Err(_) => return,
            };
            let _ = out.send(Outgoing::from_result(call, result)).await;
        });
        self.calls.insert(
            call,
            Running {
                task: Some(task),
                ..running
            },
        );
    }
}

// ----------------------------------------------------------------------
// subscriptions/listen
// ----------------------------------------------------------------------

/// What the server can notify about.
#[derive(Debug, Clone, Copy)]
struct Offered {
    tools: bool,
    prompts: bool,
    resources: bool,
}

/// The built-in listen handler (MCP §7): the acknowledgement with the
/// honoured filter, then the wanted events of the listen source, each
/// tagged with the request id; the result when the server shuts down.
async fn listen(
    link: CallLink,
    id: Value,
    params: Value,
    offered: Offered,
    events: Option<broadcast::Receiver<ListenEvent>>,
    mut stop: watch::Receiver<bool>,
    server_info: Value,
) -> Result<Value, ToolError> {
    let Some(filter) = params.get("notifications").and_then(Value::as_object) else {
        return Err(ToolError::new(
            INVALID_PARAMS,
            "params.notifications is required",
        ));
    };
    let source = events.is_some();
    let asked = |key: &str| filter.get(key).and_then(Value::as_bool) == Some(true);
    let tools = source && offered.tools && asked("toolsListChanged");
    let prompts = source && offered.prompts && asked("promptsListChanged");
    let resources = source && offered.resources && asked("resourcesListChanged");
    let uris: Vec<String> = if source && offered.resources {
        filter
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut honoured = Map::new();
    for (key, on) in [
        ("toolsListChanged", tools),
        ("promptsListChanged", prompts),
        ("resourcesListChanged", resources),
    ] {
        if on {
            honoured.insert(key.into(), Value::Bool(true));
        }
    }
    if !uris.is_empty() {
        honoured.insert("resourceSubscriptions".into(), json!(uris));
    }
    let meta = json!({ KEY_SUBSCRIPTION_ID: id });
    link.notify(
        "notifications/subscriptions/acknowledged",
        json!({"_meta": meta, "notifications": honoured}),
    )
    .await;
    if let Some(mut events) = events {
        loop {
            tokio::select! {
                e = events.recv() => match e {
                    Ok(e) => {
                        let (method, mut params) = match e {
                            ListenEvent::ToolsListChanged if tools => {
                                ("notifications/tools/list_changed", json!({}))
                            }
                            ListenEvent::PromptsListChanged if prompts => {
                                ("notifications/prompts/list_changed", json!({}))
                            }
                            ListenEvent::ResourcesListChanged if resources => {
                                ("notifications/resources/list_changed", json!({}))
                            }
                            ListenEvent::ResourceUpdated { uri }
                                if uris.iter().any(|u| uri.starts_with(u.as_str())) =>
                            {
                                ("notifications/resources/updated", json!({"uri": uri}))
                            }
                            _ => continue,
                        };
                        params["_meta"] = meta.clone();
                        link.notify(method, params).await;
                    }
                    // Missed events: the client refreshes on the next one.
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                // `wait_for` yields a guard that is not Send: drop it inside.
                () = stopped(&mut stop) => break,
            }
        }
    }
    stopped(&mut stop).await;
    Ok(json!({
        "resultType": "complete",
        "_meta": { KEY_SUBSCRIPTION_ID: id, KEY_SERVER_INFO: server_info },
    }))
}

/// Completes once the server stops (or is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
