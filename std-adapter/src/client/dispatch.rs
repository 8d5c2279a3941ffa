//! The one tokio driver of every client engine: a task that owns a core
//! [`ClientEngine`] (the gRPC tunnel's, Streamable HTTP's, stdio's) and the
//! links it asks for, and follows the core's run loop
//! ([`mcpwire_core::drive`]): feed what a link read, drain the engine's
//! events after every step, move its output into each link's write buffer,
//! sleep until input, room to write, a link opened, a command or the
//! engine's next deadline.
//!
//! No protocol lives here. The engine says when a link is needed
//! ([`ClientEvent::Connect`]: the [`Connector`] opens it in a task of its
//! own) and when it is done with one ([`ClientEvent::Disconnect`]: closed
//! once its output is written); every MCP rule of a call is the engine's.
//! What this task adds is what a long-lived tokio client needs around the
//! engine: calls as [`Command`]s from any task, their events copied into
//! each call's mailbox, and a queue for calls the engine cannot take yet
//! ([`StartError::Busy`]: every slot taken, or not ready).
//!
//! Back-pressure: a link whose write buffer holds [`WRITE_HIGH`] octets is
//! not read (a server that sends and never reads makes no more output
//! gather here). The links' octets are moved in [`io`].

mod io;

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mcpwire_core::mcp::client::era::EraDiagnostics;
use mcpwire_core::mcp::client::{
    CallId, CallOptions, ClientEngine, ClientEvent, Diagnostics, LinkId, Skipped, StartError,
};
use mcpwire_core::mcp::json;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::link::{Connector, Opened};
use super::mailbox;
use crate::clock::{Timer, now};
use io::{Link, poll_links};

/// Octets read from a link at a time.
const READ_BUF: usize = 64 << 10;
/// A link's output gathered before the task waits for the socket to take
/// it; past it the link is not read.
pub(crate) const WRITE_HIGH: usize = 64 << 10;
/// What the engine writes at a time.
const TRANSMIT_CHUNK: usize = 16 << 10;
/// Commands taken in one turn before the links are served again.
const COMMAND_BATCH: usize = 64;
/// How long a link the engine let go of may take to write what it still
/// has; a peer that reads nothing more does not keep it open.
const CLOSE_LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// What a client asks of its engine's task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Start a call of one JSON-RPC message (its text); its events go to
    /// `events`. `accepted` answers at once: the engine took it, or it
    /// waits for room, or why not; without it a refusal comes as
    /// [`CallMsg::Refused`]. An empty `body` is a call that waits for the
    /// engine's handshake ([`ClientEngine::start_handshake`]).
    Start {
        key: u64,
        body: Arc<[u8]>,
        options: CallOptions,
        events: mailbox::Sender<CallMsg>,
        accepted: Option<oneshot::Sender<Result<(), Refusal>>>,
    },
    /// Stop the call, or drop it if it waits.
    Cancel { key: u64 },
    /// Answer the call's input requests (after its
    /// [`CallMsg::InputRequired`]): the engine sends its next round.
    AnswerInput {
        key: u64,
        responses: Vec<u8>,
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// The engine's learned input schema of a tool (raw JSON string of
    /// its name).
    CachedSchema {
        tool: Vec<u8>,
        reply: oneshot::Sender<Option<Vec<u8>>>,
    },
    /// Forget the learned schemas.
    ClearSchemas,
    /// Reach for the server now; answered once the engine is ready, or
    /// with why it cannot reach the server.
    Open {
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// What the engine knows of its server.
    Status { reply: oneshot::Sender<Status> },
    /// End the engine: calls in progress end, links close; answered once
    /// the engine's task is over.
    Close { done: oneshot::Sender<()> },
    /// Replace the bearer token of later requests; answered with whether
    /// the engine took it ([`ClientEngine::set_bearer`]).
    SetBearer {
        token: Option<String>,
        reply: oneshot::Sender<bool>,
    },
}

/// What the engine knows of its server ([`Command::Status`]).
#[derive(Debug, Clone)]
pub(crate) struct Status {
    pub(crate) era: Option<EraDiagnostics>,
    /// Links opened so far.
    pub(crate) links: u64,
}

/// Why the engine did not take a call.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The engine is over (closed).
    Gone,
    /// The engine cannot reach its server now, and why.
    Down(String),
    /// A limit of the client, and which.
    Exhausted(&'static str),
    /// The engine refused the request before a byte went out.
    Invalid { code: i32, message: &'static str },
    /// The request needs more than a call's buffer.
    TooLarge { needed: usize },
}

/// The engine's events of one call, with their texts, copied out.
#[derive(Debug)]
pub(crate) enum CallMsg {
    Notification(Vec<u8>),
    /// The server asks for input: its `inputRequests` (a call started with
    /// `answers_input`); the call waits for [`Command::AnswerInput`].
    InputRequired(Vec<u8>),
    /// The response, with a `result` (where it lies in the text, as the
    /// engine found it).
    Response(Vec<u8>, Option<Range<usize>>),
    /// The JSON-RPC error response (the server's, or synthesized for a
    /// transport failure: see `diagnostics.transport`); `message` is the
    /// raw JSON string of `error.message`.
    Failed {
        response: Vec<u8>,
        message: Vec<u8>,
        diagnostics: Diagnostics,
        www_authenticate: Option<String>,
    },
    /// What the engine reports of the exchange, before its response.
    Diagnostics(Diagnostics),
    /// The call is over.
    Ended,
    /// The engine did not take the call.
    Refused(Refusal),
}

/// A client's handle on its engine's task; the task ends once every
/// handle is dropped and the engine closed.
#[derive(Debug, Clone)]
pub(crate) struct Handle {
    tx: mpsc::UnboundedSender<Command>,
    next_key: Arc<AtomicU64>,
}

impl Handle {
    /// A key for a new call.
    pub(crate) fn key(&self) -> u64 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `cmd`; `false` when the task is gone.
    pub(crate) fn send(&self, cmd: Command) -> bool {
        self.tx.send(cmd).is_ok()
    }
}

/// What the engine knows of its server; `None` when its task is over.
pub(crate) async fn status(handle: &Handle) -> Option<Status> {
    let (reply, status) = oneshot::channel();
    if !handle.send(Command::Status { reply }) {
        return None;
    }
    status.await.ok()
}

/// Runs `engine` in a task of its own, its links opened by `connector`
/// (the engine on the heap: its caches make it large).
pub(crate) fn spawn<E, C>(engine: Box<E>, connector: C) -> Handle
where
    E: ClientEngine + Send + 'static,
    C: Connector,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let task = Dispatcher {
        engine,
        connector: Arc::new(connector),
        links: Vec::new(),
        opening: JoinSet::new(),
        calls: LocalMap::default(),
        keys: LocalMap::default(),
        waiting: VecDeque::new(),
        read: vec![0; READ_BUF].into_boxed_slice(),
        scratch: vec![0; TRANSMIT_CHUNK].into_boxed_slice(),
        cursor: 0,
        closing: false,
        skipped: SkipLog::default(),
        ready: false,
        ready_waiters: Vec::new(),
        closed_waiters: Vec::new(),
        links_opened: 0,
    };
    tokio::spawn(task.run(rx));
    Handle {
        tx,
        next_key: Arc::new(AtomicU64::new(1)),
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

/// A call the engine took.
#[derive(Debug)]
struct Live {
    key: u64,
    events: mailbox::Sender<CallMsg>,
}

/// A call the engine could not take yet.
#[derive(Debug)]
struct Waiting {
    key: u64,
    body: Arc<[u8]>,
    options: CallOptions,
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

    /// Tells the call whether it started (or waits); `false` when nobody
    /// listens.
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

struct Dispatcher<E, C> {
    engine: Box<E>,
    connector: Arc<C>,
    links: Vec<Link>,
    opening: JoinSet<(LinkId, Opened)>,
    calls: LocalMap<CallId, Live>,
    keys: LocalMap<u64, CallId>,
    waiting: VecDeque<Waiting>,
    read: Box<[u8]>,
    scratch: Box<[u8]>,
    /// Where the next scan of the links starts (fairness).
    cursor: usize,
    /// Every handle is gone, or a close was asked: the engine was told to
    /// close.
    closing: bool,
    skipped: SkipLog,
    /// The engine said [`ClientEvent::Ready`] last (not `Down`).
    ready: bool,
    ready_waiters: Vec<oneshot::Sender<Result<(), Refusal>>>,
    closed_waiters: Vec<oneshot::Sender<()>>,
    links_opened: u64,
}

/// What the server sent that the engine dropped, logged on stderr at the
/// first eight of each kind and then at powers of two (a server that
/// writes logs to stdout does it on every line).
#[derive(Debug, Default)]
struct SkipLog {
    counts: [u64; 3],
}

impl SkipLog {
    fn log(&mut self, what: Skipped, text: &[u8]) {
        let (kind, why) = match what {
            Skipped::LineTooLong { .. } => (0, "a line over the line limit"),
            Skipped::BadLine { json: true } => (1, "a JSON line that is not a JSON-RPC message"),
            Skipped::BadLine { json: false } => {
                (1, "not JSON: the server may be writing logs to stdout")
            }
            Skipped::Unmatched => (2, "a message no call waits for"),
        };
        let n = &mut self.counts[kind];
        *n += 1;
        if *n <= 8 || n.is_power_of_two() {
            let len = match what {
                Skipped::LineTooLong { len } => format!(" ({len} octets)"),
                _ => String::new(),
            };
            eprintln!(
                "mcpwire: skipped a server line #{n}{len}: {why}: {}",
                String::from_utf8_lossy(text)
            );
        }
    }
}

impl<E: ClientEngine, C: Connector> Dispatcher<E, C> {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Command>) {
        let mut timer = Timer::new();
        let mut commands_open = true;
        loop {
            self.turn();
            if !commands_open && !self.closing && self.calls.is_empty() && self.waiting.is_empty() {
                self.closing = true;
                self.engine.close(now());
                self.turn();
            }
            if self.closing && self.engine.is_closed() && self.links.is_empty() {
                for done in self.closed_waiters.drain(..) {
                    let _ = done.send(());
                }
                return;
            }
            timer.set(self.engine.poll_timeout());
            let links = &mut self.links;
            let read = &mut self.read;
            let cursor = &mut self.cursor;
            let io = std::future::poll_fn(|cx| poll_links(links, read, cursor, cx));
            tokio::select! {
                cmd = rx.recv(), if commands_open => match cmd {
                    Some(cmd) => {
                        self.command(cmd);
                        // What queued meanwhile, in one turn: calls
                        // started together go out in one write.
                        for _ in 1..COMMAND_BATCH {
                            let Ok(cmd) = rx.try_recv() else { break };
                            self.command(cmd);
                        }
                    }
                    None => commands_open = false,
                },
                event = io => self.on_io(event),
                Some(opened) = self.opening.join_next(), if !self.opening.is_empty() => {
                    if let Ok((link, opened)) = opened {
                        self.opened(link, opened);
                    }
                }
                () = timer.fired(), if timer.is_set() => self.engine.handle_timeout(now()),
            }
        }
    }

    /// Drains the engine, starts what waits, feeds what is pending and
    /// moves the engine's output into the links' buffers.
    fn turn(&mut self) {
        for _ in 0..8 {
            self.drain();
            self.start_waiting();
            self.feed_pending();
            let moved = self.fill_outputs();
            self.drain();
            if !moved {
                break;
            }
        }
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Start {
                key,
                body,
                options,
                events,
                accepted,
            } => {
                self.waiting.push_back(Waiting {
                    key,
                    body,
                    options,
                    events,
                    accepted,
                });
                self.start_waiting();
            }
            Command::Cancel { key } => {
                if let Some(call) = self.keys.remove(&key) {
                    self.calls.remove(&call);
                    self.engine.cancel(call, now());
                } else {
                    self.waiting.retain(|w| w.key != key);
                }
            }
            Command::AnswerInput {
                key,
                responses,
                reply,
            } => {
                let answered = match self.keys.get(&key) {
                    Some(&call) => self
                        .engine
                        .answer_input(call, &responses, now())
                        .map_err(|e| match e {
                            StartError::Invalid(e) => Refusal::Invalid {
                                code: e.code,
                                message: e.message,
                            },
                            _ => Refusal::Gone,
                        }),
                    None => Err(Refusal::Gone),
                };
                let _ = reply.send(answered);
            }
            Command::CachedSchema { tool, reply } => {
                let _ = reply.send(self.engine.cached_schema(&tool).map(<[u8]>::to_vec));
            }
            Command::ClearSchemas => self.engine.clear_schemas(),
            Command::Open { reply } => {
                if self.ready {
                    let _ = reply.send(Ok(()));
                } else if self.closing {
                    let _ = reply.send(Err(Refusal::Gone));
                } else {
                    self.ready_waiters.push(reply);
                    self.engine.open(now());
                }
            }
            Command::Status { reply } => {
                let _ = reply.send(Status {
                    era: self.engine.era().cloned(),
                    links: self.links_opened,
                });
            }
            Command::SetBearer { token, reply } => {
                let _ = reply.send(self.engine.set_bearer(token.as_deref()));
            }
            Command::Close { done } => {
                self.closed_waiters.push(done);
                if !self.closing {
                    self.closing = true;
                    self.engine.close(now());
                }
            }
        }
    }

    /// Answers the calls waiting for the engine to be ready.
    fn tell_ready(&mut self, r: impl Fn() -> Result<(), Refusal>) {
        for reply in self.ready_waiters.drain(..) {
            let _ = reply.send(r());
        }
    }

    /// Starts waiting calls while the engine takes them.
    fn start_waiting(&mut self) {
        while let Some(mut w) = self.waiting.pop_front() {
            if w.abandoned() {
                continue;
            }
            let started = match w.body.is_empty() {
                true => self.engine.start_handshake(now()),
                false => self.engine.start(&w.body, w.options, now()),
            };
            let refusal = match started {
                Ok(call) => {
                    if w.answer(Ok(())) {
                        self.keys.insert(w.key, call);
                        self.calls.insert(
                            call,
                            Live {
                                key: w.key,
                                events: w.events,
                            },
                        );
                    } else {
                        self.engine.cancel(call, now());
                    }
                    continue;
                }
                Err(StartError::Busy) => {
                    // The call waits its turn.
                    w.answer(Ok(()));
                    self.waiting.push_front(w);
                    return;
                }
                Err(StartError::Closed) => Refusal::Gone,
                Err(StartError::Down) => Refusal::Down(
                    String::from_utf8_lossy(self.engine.down_reason().unwrap_or(b"unreachable"))
                        .into_owned(),
                ),
                Err(StartError::Invalid(e)) => Refusal::Invalid {
                    code: e.code,
                    message: e.message,
                },
                Err(StartError::TooLarge { needed }) => Refusal::TooLarge { needed },
                Err(StartError::Exhausted(why)) => Refusal::Exhausted(why),
            };
            w.answer(Err(refusal));
        }
    }

    /// Hands the engine's events to their calls, and opens and closes the
    /// links it names.
    fn drain(&mut self) {
        while let Some(event) = self.engine.poll_event() {
            let engine = &self.engine;
            let text = |call| engine.message(call).unwrap_or_default().to_vec();
            let (call, msg) = match event {
                ClientEvent::Notification { call } => (call, CallMsg::Notification(text(call))),
                ClientEvent::Response { call } => {
                    if let (Some(d), Some(live)) = (engine.diagnostics(call), self.calls.get(&call))
                    {
                        let _ = live.events.send(CallMsg::Diagnostics(d));
                    }
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
                ClientEvent::Connect { link } => {
                    self.connect(link);
                    continue;
                }
                ClientEvent::Disconnect { link } => {
                    self.disconnect(link);
                    continue;
                }
                ClientEvent::Skipped { what } => {
                    self.skipped.log(what, engine.skipped_text());
                    continue;
                }
                ClientEvent::Ready => {
                    self.ready = true;
                    self.tell_ready(|| Ok(()));
                    continue;
                }
                ClientEvent::Down => {
                    self.ready = false;
                    let why = String::from_utf8_lossy(
                        self.engine
                            .down_reason()
                            .unwrap_or(b"the server cannot be reached"),
                    )
                    .into_owned();
                    self.tell_ready(|| Err(Refusal::Down(why.clone())));
                    continue;
                }
                ClientEvent::Note => {
                    self.connector
                        .note(&String::from_utf8_lossy(engine.note_text()));
                    continue;
                }
                ClientEvent::ConnectionClosed { .. } => {
                    self.tell_ready(|| Err(Refusal::Gone));
                    continue;
                }
                ClientEvent::InputRequired { call } => {
                    let requests = engine.input_requests(call).unwrap_or_default();
                    (call, CallMsg::InputRequired(requests.to_vec()))
                }
            };
            if matches!(msg, CallMsg::Ended) {
                if let Some(live) = self.calls.remove(&call) {
                    self.keys.remove(&live.key);
                    let _ = live.events.send(msg);
                }
            } else if let Some(live) = self.calls.get(&call) {
                // The call may be gone (dropped): nothing to tell.
                let _ = live.events.send(msg);
            }
        }
    }
}
