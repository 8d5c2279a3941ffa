//! One connection's run loop: moves octets, time, handler messages and
//! listen-source changes between a socket and a boxed engine, whichever
//! binding it speaks ([`ConnectionEngine`]: the gRPC tunnel over HTTP/2,
//! Streamable HTTP over HTTP/1.1).
//!
//! The loop follows the engine's contract ([`mcpwire_core::drive`]): feed
//! what the socket read with [`Feed`] and drain the engine's events after
//! every step, transmit while it wants to, then sleep until input, a
//! handler message, a change of the app's listen source, the engine's next
//! deadline or the server's shutdown. The protocol stays in the core: the
//! events go to the handlers ([`Calls`]) and the bearer-token checker.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use mcpwire_core::drive::{self, Endpoint, Feed, Step};
use mcpwire_core::mcp::registry::Registry;
use mcpwire_core::mcp::server::{
    HttpConfig, ListenLimits, ServerConfig as EngineConfig, ServerEngine,
};
use mcpwire_core::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{broadcast, watch};

use super::ConnEngine;
use super::calls::Calls;
use crate::app::link::Outgoing;
use crate::app::{App, ListenEvent};
use crate::auth::{Auth, AuthDecision};
use crate::clock::{Timer, now};
use crate::outbox;
use crate::store::HeapStore;

/// Read from the socket at a time.
pub(super) const READ_BUF: usize = 64 << 10;
pub(super) const TRANSMIT_CHUNK: usize = 16 << 10;
/// The output's high-water mark: while this much waits for the socket,
/// the engine's output stays in the engine and no input is read or fed
/// (a client that sends and never reads holds at most this, the unfed
/// input and its calls' credit, never a growing queue of answers).
pub(super) const WRITE_HIGH: usize = 64 << 10;
/// Messages from handlers waiting for the connection task.
pub(super) const QUEUE: usize = 256;
/// Room in a call's buffers beyond its largest message (the framing).
pub(super) const BUF_SLACK: usize = 64 << 10;

/// Requests whose handlers went on in tasks, taken before those run.
const REQUESTS_PER_TURN: usize = 4;

// The read and transmit buffers of the connections a worker thread runs.
// Input is fed to the engine as soon as it is read, and output is kept
// only while the socket does not take it, so an idle connection holds no
// buffer of its own. Two cells: feeding may transmit.
thread_local! {
    static READ: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_BUF].into_boxed_slice());
    static TRANSMIT: RefCell<Box<[u8]>> =
        RefCell::new(vec![0; TRANSMIT_CHUNK].into_boxed_slice());
}

/// What every connection of a server shares: the settings behind one
/// pointer (a connection's task holds the pointer, where a copy of them
/// would cost every connection about 450 bytes, held more than once by
/// the futures that pass it on) and the stop signal.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) common: Arc<Common>,
    pub(super) stop: watch::Receiver<bool>,
}

/// The settings of a server's connections.
pub(super) struct Common {
    pub(super) registry: Registry<'static>,
    pub(super) config: EngineConfig<'static>,
    /// The Streamable HTTP binding's settings (HTTP/1.1 connections).
    pub(super) http: HttpConfig<'static>,
    pub(super) app: Arc<App>,
    pub(super) auth: Option<Arc<dyn Auth>>,
    /// How long output at the high-water mark may wait for the socket to
    /// take any of it before the connection is closed.
    pub(super) send_timeout: Duration,
    /// The listen limits of every engine, the server's count of listen
    /// streams included.
    pub(super) listen: ListenLimits<'static>,
}

/// What the run loop needs of a connection's engine beyond the MCP calls
/// ([`ServerEngine`]) and the octets ([`Endpoint`]).
pub(super) trait ConnectionEngine: ServerEngine + Endpoint {
    /// The peer sent its last octet.
    fn recv_eof(&mut self);
    /// The engine's next deadline.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The deadline passed.
    fn handle_timeout(&mut self, now: Instant);
    /// The connection is over once its output is written.
    fn is_over(&self) -> bool;
    /// The server shuts down: no new call, listen streams end.
    fn go_away(&mut self);
}

impl ConnectionEngine for ConnEngine {
    fn recv_eof(&mut self) {
        ConnEngine::recv_eof(self);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        ConnEngine::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        ConnEngine::handle_timeout(self, now);
    }
    fn is_over(&self) -> bool {
        self.is_closed()
    }
    fn go_away(&mut self) {
        ConnEngine::go_away(self);
    }
}

/// Serves one HTTP/2 connection (the gRPC tunnel) over its read and write
/// halves until it closes; `first` are octets already read from it.
/// Not an `async fn`: the connection's state is built here and moved into
/// the one future that runs it, so a connection task holds it once.
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
    // Calls may carry messages up to `max_message_bytes`; their responses
    // too (plus the framing).
    let common = &*shared.common;
    let store = HeapStore::new(common.config.max_message_bytes.saturating_add(BUF_SLACK));
    let mut engine = Box::new(ConnEngine::new(
        common.registry,
        common.config,
        store,
        now(),
    ));
    engine.set_listen_limits(common.listen);
    run(engine, rd, wr, shared, first)
}

/// Runs `engine` over a connection; `first` are octets already read.
pub(super) fn run<E, R, W>(
    engine: Box<E>,
    rd: R,
    wr: W,
    shared: Shared,
    first: &[u8],
) -> impl Future<Output = io::Result<()>>
where
    E: ConnectionEngine,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (tx, rx) = outbox::channel(QUEUE);
    let conn = Conn {
        engine,
        calls: Calls::new(
            shared.common.app.clone(),
            tx,
            shared.common.config.max_message_bytes,
        ),
        auth: shared.common.auth.clone(),
        send_timeout: shared.common.send_timeout,
        pending: first.to_vec(),
    };
    conn.drive(rd, wr, rx, shared.stop)
}

struct Conn<E> {
    engine: Box<E>,
    calls: Calls,
    auth: Option<Arc<dyn Auth>>,
    send_timeout: Duration,
    /// Input the engine did not take yet (octets read before the engine
    /// was chosen, or a request that waits for the one before it to be
    /// answered); nothing more is read meanwhile. Empty and unallocated
    /// otherwise.
    pending: Vec<u8>,
}

impl<E: ConnectionEngine> Conn<E> {
    async fn drive<R, W>(
        mut self,
        mut rd: R,
        mut wr: W,
        mut rx: outbox::Receiver<Outgoing>,
        mut stop: watch::Receiver<bool>,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        // Octets waiting for the socket; empty (and unallocated) when idle.
        let mut out: Vec<u8> = Vec::new();
        let mut written = 0;
        let mut eof = false;
        let mut eof_told = false;
        let mut listen = ListenSource::default();
        let mut stopping = *stop.borrow();
        if stopping {
            self.engine.go_away();
            self.drain_events();
        }
        // The timer and the stop signal live across the loop: making them
        // anew on each turn would register and drop a timer entry and a
        // waiter on the server-wide signal every time.
        let mut timer = Timer::new();
        let stop_signal = async move {
            // An error means the server is gone: stop as well.
            let _ = stop.changed().await;
        };
        tokio::pin!(stop_signal);
        let mut turn_over = false;
        // Since when the output has been at its high-water mark with the
        // socket taking none of it (a client that does not read).
        let mut stalled_since: Option<Instant> = None;
        let send_timeout = self.send_timeout;
        loop {
            if written == out.len() {
                // Everything went out: an idle connection holds no buffer.
                out = Vec::new();
                written = 0;
            }
            // After a turn that ended for the handlers it started in tasks,
            // they run (this task yields once) before the rest is fed;
            // nothing is fed while the output is at its high-water mark.
            if !self.pending.is_empty() && !turn_over && out.len() < WRITE_HIGH {
                let input = std::mem::take(&mut self.pending);
                turn_over = self.feed(&input, &mut out)?;
            }
            if eof && !eof_told && self.pending.is_empty() {
                eof_told = true;
                self.engine.recv_eof();
                self.drain_events();
            }
            self.transmit(&mut out, WRITE_HIGH);
            // Once the engine is over (after the peer's EOF, or after a
            // shutdown's GOAWAY and the last call) and everything went out,
            // close the socket (dropping the calls aborts their handlers).
            if written == out.len() && (self.engine.is_over() || eof_told) {
                break;
            }
            // Past the high-water mark the wait for the socket is bounded
            // (as nginx's send_timeout): such a client holds its calls and
            // a connection of the server's cap.
            let stall_deadline = if out.len() >= WRITE_HIGH {
                Some(*stalled_since.get_or_insert_with(now) + send_timeout)
            } else {
                stalled_since = None;
                None
            };
            timer.set(earliest(self.engine.poll_timeout(), stall_deadline));
            listen.follow(self.engine.is_listening(), || self.calls.subscribe());
            tokio::select! {
                // Input waits in the socket (and the client's sending
                // stops) while the output is at its high-water mark.
                r = read_shared(&mut rd), if !eof && self.pending.is_empty() && out.len() < WRITE_HIGH => match r {
                    // Told to the engine at the top of the loop.
                    Ok(0) => eof = true,
                    // The octets are in this thread's buffer until the
                    // next await: feed them now.
                    Ok(n) => turn_over = READ.with_borrow(|b| self.feed(&b[..n], &mut out))?,
                    Err(e) => return Err(e),
                },
                r = wr.write(&out[written..]), if written < out.len() => {
                    written += r?;
                    // The socket took some: the wait starts again.
                    stalled_since = None;
                }
                msg = rx.recv() => {
                    self.calls.outgoing_queued(&mut *self.engine, msg, &mut rx);
                    self.drain_events();
                }
                event = listen.next(), if listen.is_active() => {
                    self.engine.publish(event.change());
                    self.drain_events();
                }
                () = timer.fired(), if timer.is_set() => {
                    let at = now();
                    if stall_deadline.is_some_and(|d| at >= d) {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the client took none of the output in time",
                        ));
                    }
                    self.engine.handle_timeout(at);
                    self.drain_events();
                }
                () = tokio::task::yield_now(), if turn_over => turn_over = false,
                () = &mut stop_signal, if !stopping => {
                    stopping = true;
                    // GOAWAY (the client opens no new call here) and the
                    // final result of every listen stream.
                    self.engine.go_away();
                    self.drain_events();
                }
            }
        }
        let _ = wr.shutdown().await;
        if !eof {
            linger(&mut rd).await;
        }
        Ok(())
    }

    /// Feeds `input` to the engine until it is consumed, the engine waits
    /// for an answer, the output reaches [`WRITE_HIGH`], or
    /// [`REQUESTS_PER_TURN`] requests started handlers
    /// that wait (their tasks run before more is taken: a forwarding
    /// handler's request leaves while the next ones are read). What is
    /// left is kept in `pending`; `true` when the turn ended for the
    /// handlers' sake.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<bool> {
        let mut feed = Feed::new(input);
        let mut started = 0;
        loop {
            let step = feed.step(&mut *self.engine, now());
            self.drain_events();
            started += self.calls.take_started_tasks();
            match step {
                Step::Consumed if started >= REQUESTS_PER_TURN && !feed.rest().is_empty() => {
                    self.pending.extend_from_slice(feed.rest());
                    return Ok(true);
                }
                Step::Consumed => {}
                // The engine waits for its output to go out first; at the
                // high-water mark the rest waits for the socket to take it.
                Step::Transmit => {
                    self.transmit(out, WRITE_HIGH);
                    if out.len() >= WRITE_HIGH {
                        self.pending.extend_from_slice(feed.rest());
                        return Ok(false);
                    }
                }
                Step::Done => return Ok(false),
                // A request waits for the one before it (HTTP/1.1): keep
                // the rest, read nothing more until it is taken.
                Step::Wait => {
                    self.pending.extend_from_slice(feed.rest());
                    return Ok(false);
                }
                Step::Stuck => {
                    return Err(io::Error::other(format!(
                        "the server engine takes no input ({} octets left)",
                        feed.rest().len()
                    )));
                }
            }
        }
    }

    /// Appends what the engine has to send to `out`, up to `limit` octets
    /// waiting.
    fn transmit(&mut self, out: &mut Vec<u8>, limit: usize) {
        while out.len() < limit && self.engine.wants_transmit() {
            let n = TRANSMIT.with_borrow_mut(|b| {
                let n = drive::fill(&mut *self.engine, b);
                out.extend_from_slice(&b[..n]);
                n
            });
            // Room in the engine's output lets blocked calls go on
            // (Writable): they may queue more.
            self.drain_events();
            if n == 0 {
                break;
            }
        }
    }

    /// Handles every queued engine event.
    fn drain_events(&mut self) {
        while let Some(event) = self.engine.poll_event() {
            let Some(call) = self.calls.on_event(&mut *self.engine, event) else {
                continue;
            };
            // Authorize comes only with `authorize` on, which only an Auth
            // sets; without one, refuse.
            let decision = self
                .auth
                .as_ref()
                .map_or(AuthDecision::Unauthenticated, |a| {
                    a.check(self.engine.bearer_token(call))
                });
            self.engine.authorize(call, decision.to_core());
        }
    }
}

/// How long a closing connection reads and drops what its client still
/// sends, at most in all, and at most between two reads.
const LINGER_TIME: Duration = Duration::from_secs(10);
const LINGER_PAUSE: Duration = Duration::from_secs(2);
/// How much it reads and drops at most.
const LINGER_BYTES: usize = 16 << 20;

/// Reads and drops what the client still sends once the connection is
/// over and its write side shut, for a bounded time and size, then lets
/// the socket close (as nginx's lingering close): a socket closed with
/// unread input is reset, and a client still sending its request (one
/// that writes its whole body before it reads, as httpx does) would lose
/// the answer sent before the close (413, 431, a GOAWAY).
async fn linger<R: AsyncRead + Unpin>(rd: &mut R) {
    let end = tokio::time::Instant::now() + LINGER_TIME;
    let mut left = LINGER_BYTES;
    while left > 0 {
        let until = end.min(tokio::time::Instant::now() + LINGER_PAUSE);
        match tokio::time::timeout_at(until, read_shared(rd)).await {
            Ok(Ok(n)) if n > 0 => left = left.saturating_sub(n),
            _ => return,
        }
    }
}

/// The earlier of two deadlines.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The app's listen source as a connection follows it: subscribed to only
/// while the engine keeps a listen stream, its pending receive boxed, so a
/// connection without one holds two words for it.
#[derive(Default)]
pub(super) struct ListenSource {
    next: Option<Pin<Box<dyn Future<Output = Received> + Send>>>,
    /// The source is gone: nothing more to follow.
    gone: bool,
}

type Received = (Option<ListenEvent>, broadcast::Receiver<ListenEvent>);

impl ListenSource {
    /// Subscribes (with `subscribe`) while `listening`, lets go otherwise.
    pub(super) fn follow(
        &mut self,
        listening: bool,
        subscribe: impl FnOnce() -> Option<broadcast::Receiver<ListenEvent>>,
    ) {
        if !listening {
            self.next = None;
        } else if self.next.is_none() && !self.gone {
            match subscribe() {
                Some(rx) => self.next = Some(receive(rx)),
                None => self.gone = true,
            }
        }
    }

    /// Whether a change can come.
    pub(super) fn is_active(&self) -> bool {
        self.next.is_some()
    }

    /// The next change of the source; never ready while not subscribed.
    pub(super) async fn next(&mut self) -> ListenEvent {
        loop {
            let Some(next) = self.next.as_mut() else {
                return std::future::pending().await;
            };
            let (event, rx) = next.await;
            match event {
                Some(event) => {
                    self.next = Some(receive(rx));
                    return event;
                }
                None => {
                    self.next = None;
                    self.gone = true;
                }
            }
        }
    }
}

/// The next change of `rx` (missed ones, from a lagging receiver, are
/// skipped: a client refreshes its lists on the next), and `rx` back.
fn receive(
    mut rx: broadcast::Receiver<ListenEvent>,
) -> Pin<Box<dyn Future<Output = Received> + Send>> {
    Box::pin(async move {
        loop {
            match rx.recv().await {
                Ok(event) => return (Some(event), rx),
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return (None, rx),
            }
        }
    })
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
