//! The connection task of a [`Channel`](super::Channel): it owns one core
//! [`Client`] (the sans-IO MCP client engine of the tunnel binding over one
//! HTTP/2 connection) and its socket, and follows the core's run loop
//! ([`mcpwire_core::drive`], on the socket loop of [`crate::pump`]): feed
//! what the socket read with [`Feed`] (a
//! `recv` at a time, draining `poll_event` after each, transmitting when
//! the engine must write before it reads more), pull `poll_transmit` while
//! the engine wants to transmit, sleep until input, a command or
//! `poll_timeout`, then `handle_timeout`. An engine that takes no input
//! and has nothing to send is stuck: the connection ends.
//!
//! Calls talk to it with [`Command`]s and hear back through their own
//! [`CallMsg`] channel: owned copies of the engine's events and their
//! texts. No protocol lives here: the metadata, `grpc-timeout`, the re-list
//! and retry after -32020, the retry of a refused stream, errors from
//! trailers and the early-response rule are the engine's. This task adds
//! only what a long-lived tokio client needs
//! around it: a queue for calls that find every slot taken, and the
//! channel's schema cache carried from one connection to the next.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::drive::{self, Endpoint, Feed, Step};
use mcpwire_core::mcp::client::{
    Binding, CallId, Client, ClientConfig, ClientEvent, Diagnostics as CoreDiagnostics, StartError,
};
use mcpwire_core::mcp::json;

use super::mailbox;
use crate::clock::now;
use crate::pump::{self, Pump};
use crate::storage::HeapStorage;
use crate::store::HeapStore;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// Calls in progress on one connection (and HTTP/2 streams); more wait in
/// the connection task's queue.
pub(crate) const CALLS: usize = 32;
/// Octets of cached schemas with `x-mcp-header` annotations.
const CACHE: usize = 16 << 10;
/// Room a call's buffer has besides its largest message: the framing, the
/// notifications that share a read chunk with a message, an error
/// response synthesized after it.
const BUF_SLACK: usize = 64 << 10;

/// The client engine of one connection: [`CALLS`] calls, each with buffers
/// on the heap that hold what it uses (a request, its incoming messages)
/// and go back when it ends; a 4 KiB HPACK table; 16 KiB HTTP/2 frame
/// buffers on the heap while in use; [`CACHE`] octets of annotation cache.
pub(crate) type Engine = Client<HeapStore, CALLS, 4096, 16384, HeapStorage<16384>, CACHE>;

/// The channel's tool schemas (JSON text) by tool name.
pub(crate) type Schemas = Arc<Mutex<HashMap<String, Vec<u8>>>>;

const TRANSMIT_CHUNK: usize = 16 << 10;

/// What a call asks of the connection task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Start a call of one JSON-RPC request (its text). `accepted` answers
    /// at once: the engine took it, or it waits for a free slot (a refusal
    /// then comes as [`CallMsg::Refused`]), or why not; without it, a
    /// refusal comes as [`CallMsg::Refused`] in any case.
    Start {
        key: u64,
        body: Arc<[u8]>,
        /// The call's deadline; `None` for none (`subscriptions/listen`).
        deadline: Option<tokio::time::Instant>,
        /// A `tools/call`: a re-list may teach the engine new schemas.
        tool_call: bool,
        /// The tunnel, or the typed RPC of the method.
        binding: Binding,
        events: mailbox::Sender<CallMsg>,
        accepted: Option<oneshot::Sender<Result<(), Refusal>>>,
    },
    /// Stop the call (RST_STREAM CANCEL), or drop it if it waits.
    Cancel { key: u64 },
    /// Forget the engine's cached schemas.
    ClearSchemas,
}

/// Why a connection did not take a call.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The connection is over or going away: try a new one.
    Gone,
    /// The engine refused the request before a byte went out.
    Invalid { code: i32, message: &'static str },
    /// The framed request needs more than a call's buffer.
    TooLarge { needed: usize },
}

/// The engine's events of one call, with their texts, copied out.
#[derive(Debug)]
pub(crate) enum CallMsg {
    Notification(Vec<u8>),
    /// The response, with a `result` (where it lies in the text, as the
    /// engine found it).
    Response(Vec<u8>, Option<std::ops::Range<usize>>),
    /// The JSON-RPC error response (the server's, or synthesized for a
    /// transport failure: see `diagnostics.transport`); `message` is the
    /// raw JSON string of `error.message`.
    Failed {
        response: Vec<u8>,
        message: Vec<u8>,
        diagnostics: CoreDiagnostics,
        www_authenticate: Option<String>,
    },
    /// The call is over.
    Ended,
    /// A call that waited for a slot could not start.
    Refused(Refusal),
}

/// Where and how a channel connects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dial<'a> {
    pub(crate) addr: &'a str,
    pub(crate) metadata: &'a [(String, String)],
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<&'a crate::tls::ClientTlsConfig>,
}

/// A connection's byte stream.
enum Socket {
    Tcp(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// The channel's handle on a running connection task.
#[derive(Debug, Clone)]
pub(crate) struct ConnHandle {
    pub(crate) tx: mpsc::UnboundedSender<Command>,
    alive: Arc<AtomicBool>,
}

impl ConnHandle {
    /// Takes new calls: not closed, no GOAWAY seen.
    pub(crate) fn usable(&self) -> bool {
        self.alive.load(Ordering::SeqCst) && !self.tx.is_closed()
    }

    /// Connects to `dial.addr` (with prior knowledge, or TLS and ALPN
    /// `h2`) and spawns the task, whose engine starts with the annotated
    /// schemas of `schemas`.
    pub(crate) async fn connect(
        dial: Dial<'_>,
        config: ClientConfig,
        schemas: Schemas,
    ) -> io::Result<Self> {
        let Dial { addr, metadata, .. } = dial;
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let socket = match dial {
            #[cfg(feature = "tls")]
            Dial { tls: Some(tls), .. } => Socket::Tls(Box::new(tls.connect(addr, tcp).await?)),
            _ => Socket::Tcp(tcp),
        };
        let store = HeapStore::new(config.max_message_bytes.saturating_add(BUF_SLACK));
        let mut engine = Box::new(Engine::new(config, store, now()));
        let pairs: Vec<(&str, &str)> = metadata
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        if !engine.set_metadata(Some(addr), &pairs) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a metadata name or value is over 65535 octets",
            ));
        }
        if let Ok(map) = schemas.lock() {
            for (name, schema) in map.iter() {
                if let Ok(name) = serde_json::to_vec(name) {
                    engine.learn_schema(&name, schema);
                }
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let alive = Arc::new(AtomicBool::new(true));
        let mut task = Task {
            engine,
            calls: LocalMap::default(),
            keys: LocalMap::default(),
            waiting: VecDeque::new(),
            alive: Arc::clone(&alive),
            schemas,
            synced: Vec::new(),
            scratch: vec![0; TRANSMIT_CHUNK].into_boxed_slice(),
        };
        task.synced = task.cache_fingerprint();
        tokio::spawn(task.run(socket, rx));
        Ok(Self { tx, alive })
    }
}

/// The engine's settings for a channel (its `:authority` and metadata are
/// set per connection with [`Client::set_metadata`]).
pub(crate) fn client_config(request_timeout: Duration, max_message_bytes: usize) -> ClientConfig {
    ClientConfig {
        scheme: "http",
        request_timeout,
        max_message_bytes,
        ..ClientConfig::default()
    }
}

// ----------------------------------------------------------------------
// The task
// ----------------------------------------------------------------------

#[derive(Debug)]
struct Live {
    key: u64,
    events: mailbox::Sender<CallMsg>,
    tool_call: bool,
}

impl Live {
    fn tell(&self, m: CallMsg) {
        // The call may be gone (dropped CallStream): nothing to tell.
        let _ = self.events.send(m);
    }
}

/// A call that found every slot taken.
#[derive(Debug)]
struct Waiting {
    key: u64,
    body: Arc<[u8]>,
    deadline: Option<tokio::time::Instant>,
    tool_call: bool,
    binding: Binding,
    events: mailbox::Sender<CallMsg>,
    /// Not yet answered: the call has not waited.
    accepted: Option<oneshot::Sender<Result<(), Refusal>>>,
}

impl Waiting {
    /// Nobody waits for the call any more.
    fn abandoned(&self) -> bool {
        self.accepted
            .as_ref()
            .map_or(self.events.is_closed(), oneshot::Sender::is_closed)
    }

    /// Tells the call whether it started; `false` when nobody listens.
    fn answer(&mut self, r: Result<(), Refusal>) -> bool {
        match self.accepted.take() {
            Some(tx) => tx.send(r).is_ok(),
            None => match r {
                Ok(()) => !self.events.is_closed(),
                Err(refusal) => self.events.send(CallMsg::Refused(refusal)).is_ok(),
            },
        }
    }
}

/// Hashes the task's own keys (the engine's call ids, the handles' keys;
/// never a peer's input, so no flooding to guard against) with a multiply
/// per word instead of SipHash: a few hashes per call.
#[derive(Default)]
struct LocalHasher(u64);

impl Hasher for LocalHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u16(&mut self, n: u16) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type LocalMap<K, V> = HashMap<K, V, BuildHasherDefault<LocalHasher>>;

struct Task {
    engine: Box<Engine>,
    calls: LocalMap<CallId, Live>,
    keys: LocalMap<u64, CallId>,
    /// Calls waiting for a slot, oldest first.
    waiting: VecDeque<Waiting>,
    alive: Arc<AtomicBool>,
    schemas: Schemas,
    /// The engine's cache as last copied into `schemas`.
    synced: Vec<u8>,
    /// Where the engine writes its output, zeroed once (not `out` grown
    /// and zeroed at every turn).
    scratch: Box<[u8]>,
}

impl Task {
    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Start {
                key,
                body,
                deadline,
                tool_call,
                binding,
                events,
                accepted,
            } => {
                self.waiting.push_back(Waiting {
                    key,
                    body,
                    deadline,
                    tool_call,
                    binding,
                    events,
                    accepted,
                });
                self.start_waiting();
            }
            Command::Cancel { key } => {
                if let Some(call) = self.keys.remove(&key) {
                    self.calls.remove(&call);
                    self.engine.cancel(call);
                } else {
                    self.waiting.retain(|w| w.key != key);
                }
            }
            Command::ClearSchemas => {
                self.engine.clear_schemas();
                self.synced = self.cache_fingerprint();
            }
        }
        self.drain_events();
    }

    /// Starts waiting calls while the engine has free slots.
    fn start_waiting(&mut self) {
        while let Some(mut w) = self.waiting.pop_front() {
            if w.abandoned() {
                continue;
            }
            let timeout = w
                .deadline
                .map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
            let refusal = match self.engine.call_on(w.binding, &w.body, timeout, now()) {
                Ok(call) => {
                    if w.answer(Ok(())) {
                        self.keys.insert(w.key, call);
                        self.calls.insert(
                            call,
                            Live {
                                key: w.key,
                                events: w.events,
                                tool_call: w.tool_call,
                            },
                        );
                    } else {
                        self.engine.cancel(call);
                    }
                    continue;
                }
                Err(StartError::Busy) => {
                    // Every slot is taken: the call waits its turn.
                    w.answer(Ok(()));
                    self.waiting.push_front(w);
                    return;
                }
                Err(StartError::Closed) => Refusal::Gone,
                Err(StartError::Invalid(e)) => Refusal::Invalid {
                    code: e.code,
                    message: e.message,
                },
                Err(StartError::TooLarge { needed }) => Refusal::TooLarge { needed },
            };
            w.answer(Err(refusal));
        }
    }

    /// Hands the engine's events to their calls.
    fn drain_events(&mut self) {
        while let Some(event) = self.engine.poll_event() {
            let engine = &self.engine;
            let text = |call| engine.message(call).unwrap_or_default().to_vec();
            let (call, msg) = match event {
                ClientEvent::Notification { call } => (call, CallMsg::Notification(text(call))),
                ClientEvent::Response { call } => {
                    let message = engine.message(call).unwrap_or_default();
                    let result = engine.result(call).map(|r| json::span(message, r));
                    (call, CallMsg::Response(message.to_vec(), result))
                }
                ClientEvent::Failed { call } => {
                    let Some(error) = engine.failure(call) else {
                        continue;
                    };
                    (
                        call,
                        CallMsg::Failed {
                            response: error.response.to_vec(),
                            message: error.message.to_vec(),
                            diagnostics: error.diagnostics,
                            www_authenticate: error
                                .www_authenticate
                                .map(|v| String::from_utf8_lossy(v).into_owned()),
                        },
                    )
                }
                ClientEvent::Ended { call } => (call, CallMsg::Ended),
                ClientEvent::Warning { call, reason } => {
                    eprintln!(
                        "mcpwire: warning: tool {} in tools/list: {reason}",
                        String::from_utf8_lossy(engine.warning_tool(call).unwrap_or_default())
                    );
                    continue;
                }
                // One connection's engine: it asks for no link.
                ClientEvent::ConnectionClosed { .. }
                | ClientEvent::Connect { .. }
                | ClientEvent::Disconnect { .. }
                | ClientEvent::Ready => continue,
            };
            // Before the call hears of its end: a call refused by a
            // connection going away goes to a new one,
            // and a re-listed tool's schema is in the channel's cache.
            self.mark_gone();
            let Some(tool_call) = self.calls.get(&call).map(|l| l.tool_call) else {
                continue;
            };
            match msg {
                CallMsg::Response(..) | CallMsg::Failed { .. } if tool_call => self.sync_schemas(),
                _ => {}
            }
            if matches!(msg, CallMsg::Ended) {
                if let Some(live) = self.calls.remove(&call) {
                    self.keys.remove(&live.key);
                    live.tell(msg);
                }
            } else if let Some(live) = self.calls.get(&call) {
                live.tell(msg);
            }
        }
        self.mark_gone();
    }

    /// GOAWAY or the end: the channel connects anew.
    fn mark_gone(&self) {
        if !self.engine.accepts_calls() {
            self.alive.store(false, Ordering::SeqCst);
        }
    }

    fn cache_fingerprint(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, schema) in self.engine.cached_schemas() {
            out.extend_from_slice(&name.len().to_le_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&schema.len().to_le_bytes());
            out.extend_from_slice(schema);
        }
        out
    }

    /// Copies what the engine learned by itself (a re-list after -32020)
    /// into the channel's schemas.
    fn sync_schemas(&mut self) {
        let now = self.cache_fingerprint();
        if now == self.synced {
            return;
        }
        if let Ok(mut map) = self.schemas.lock() {
            for (name, schema) in self.engine.cached_schemas() {
                if let Ok(name) = serde_json::from_slice::<String>(name) {
                    map.insert(name, schema.to_vec());
                }
            }
        }
        self.synced = now;
    }

    /// Moves the engine's output into `out` while it wants to transmit,
    /// up to about `limit` octets, starting waiting calls as slots free.
    fn transmit(&mut self, out: &mut Vec<u8>, limit: usize) {
        // Calls that ended since the last turn freed their slots.
        self.start_waiting();
        while out.len() < limit && self.engine.wants_transmit() {
            let n = drive::fill(&mut *self.engine, &mut self.scratch);
            out.extend_from_slice(&self.scratch[..n]);
            self.drain_events();
            self.start_waiting();
            if n == 0 {
                // It wants to but wrote nothing: the next turn tries again
                // rather than spinning here.
                break;
            }
        }
    }

    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut feed = Feed::new(input);
        while !self.engine.is_closed() {
            // One `recv` at a time: its notifications are taken before the
            // next.
            let step = feed.step(&mut *self.engine, now());
            self.drain_events();
            match step {
                Step::Consumed => {}
                Step::Done => break,
                // Owed frames go out before it reads more.
                Step::Transmit => self.transmit(out, usize::MAX),
                // The client never waits for the application to read.
                Step::Wait | Step::Stuck => {
                    return Err(io::Error::other("the connection consumes no input"));
                }
            }
        }
        Ok(())
    }

    async fn run(self, socket: Socket, rx: mpsc::UnboundedReceiver<Command>) {
        match socket {
            Socket::Tcp(mut tcp) => {
                let (rd, wr) = tcp.split();
                self.run_on(rd, wr, rx).await;
            }
            #[cfg(feature = "tls")]
            Socket::Tls(tls) => {
                let (rd, wr) = tokio::io::split(tls);
                self.run_on(rd, wr, rx).await;
            }
        }
    }

    async fn run_on<R, W>(mut self, mut rd: R, mut wr: W, mut rx: mpsc::UnboundedReceiver<Command>)
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let result = pump::run(&mut self, &mut rd, &mut wr, &mut rx).await;
        // A socket error ends the connection like end of file.
        let _ = result;
        // Calls in progress fail (those whose request never left are
        // refused: the channel sends them again on a new connection).
        self.alive.store(false, Ordering::SeqCst);
        if !self.engine.is_closed() {
            self.engine.recv_eof();
        }
        self.drain_events();
        // Calls without an end (none expected) see their channel close.
        self.calls.clear();
        self.keys.clear();
        for mut w in self.waiting.drain(..) {
            w.answer(Err(Refusal::Gone));
        }
        // Commands that raced the end: refuse them so callers reconnect.
        rx.close();
        while let Ok(cmd) = rx.try_recv() {
            if let Command::Start {
                accepted, events, ..
            } = cmd
            {
                match accepted {
                    Some(accepted) => {
                        let _ = accepted.send(Err(Refusal::Gone));
                    }
                    None => {
                        let _ = events.send(CallMsg::Refused(Refusal::Gone));
                    }
                }
            }
        }
        pump::shutdown(&mut wr).await;
    }
}

impl Pump for Task {
    type Command = Command;

    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        Task::feed(self, input, out)
    }

    fn transmit(&mut self, out: &mut Vec<u8>, limit: usize) {
        Task::transmit(self, out, limit);
    }

    fn command(&mut self, cmd: Command) {
        Task::command(self, cmd);
    }

    fn recv_eof(&mut self) {
        self.engine.recv_eof();
        self.drain_events();
    }

    fn poll_timeout(&self) -> Option<mcpwire_core::time::Instant> {
        self.engine.poll_timeout()
    }

    fn handle_timeout(&mut self) {
        self.engine.handle_timeout(now());
        self.drain_events();
    }

    fn is_closed(&self) -> bool {
        self.engine.is_closed()
    }

    fn is_idle(&self) -> bool {
        self.calls.is_empty() && self.waiting.is_empty()
    }

    fn go_away(&mut self) {
        self.engine.go_away();
        self.drain_events();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connections_engine_is_small() {
        // Buffers of calls, frames, call slots, the HTTP/2 connection's
        // slots and its HPACK table are on the heap, held while in use;
        // inline is mostly the 16 KiB annotation cache.
        let size = std::mem::size_of::<Engine>();
        println!("size_of::<Engine>() = {size}");
        assert!(size < 24 << 10, "{size}");
    }
}
