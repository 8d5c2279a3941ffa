//! The connection task of a [`Channel`](super::Channel): it owns one
//! client-role [`Connection`] and its socket, and follows the core's run
//! loop (feed what the socket read until it is consumed, drain
//! `poll_event` after every call, pull `poll_transmit` until it gives 0,
//! sleep until input, a command or `poll_timeout`). Calls talk to it with
//! [`Command`]s and hear back through their own [`StreamEvent`] channel.
//! No protocol lives here: header blocks, DATA pieces, resets and the end
//! of the connection are handed to the call as they come.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mcpwire_core::h2::{self, Config, ErrorCode, HeadersKind, Role, StreamError, StreamRef};
use mcpwire_core::hpack::Field;
use mcpwire_core::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// The client connection: 128 stream slots, a 4 KiB HPACK table, 16 KiB
/// buffers, the last 64 resets remembered.
pub(crate) type Conn = h2::Connection<128, 4096, 16384, 64>;

/// A header list copied out of the connection.
pub(crate) type Fields = Vec<(Vec<u8>, Vec<u8>)>;

const READ_BUF: usize = 64 << 10;
const TRANSMIT_CHUNK: usize = 16 << 10;
const WRITE_HIGH: usize = 64 << 10;

/// What a call asks of the connection task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Open a stream and send `head` then `body` (one framed message) with
    /// END_STREAM. `accepted` answers whether the connection took the call
    /// (false: it is closing; the caller tries a new connection).
    Start {
        key: u64,
        head: Fields,
        /// Names of `head` that must never be indexed (credentials).
        sensitive: Vec<Vec<u8>>,
        body: Vec<u8>,
        events: mpsc::UnboundedSender<StreamEvent>,
        accepted: oneshot::Sender<bool>,
    },
    /// Reset the call's stream with CANCEL (or drop it if not yet sent).
    Cancel { key: u64 },
}

/// What happened on a call's stream, in order.
#[derive(Debug)]
pub(crate) enum StreamEvent {
    Headers {
        fields: Fields,
        end_stream: bool,
    },
    Data(Vec<u8>),
    Reset {
        code: ErrorCode,
        remote: bool,
    },
    Closed,
    /// The connection failed or closed before the call ended.
    Failed(String),
    /// The call never left: the connection went away before its stream
    /// opened. Safe to send again.
    Refused,
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

    /// Connects to `addr` with prior knowledge and spawns the task.
    pub(crate) async fn connect(addr: &str) -> io::Result<Self> {
        let socket = TcpStream::connect(addr).await?;
        socket.set_nodelay(true)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let alive = Arc::new(AtomicBool::new(true));
        let task = Task {
            conn: Box::new(Conn::new(Role::Client, Config::default(), now())),
            authority: addr.to_owned(),
            calls: HashMap::new(),
            by_stream: HashMap::new(),
            waiting: VecDeque::new(),
            alive: Arc::clone(&alive),
        };
        tokio::spawn(task.run(socket, rx));
        Ok(Self { tx, alive })
    }
}

// ----------------------------------------------------------------------
// Time
// ----------------------------------------------------------------------

fn now() -> Instant {
    Instant::from_micros(u64::try_from(origin().elapsed().as_micros()).unwrap_or(u64::MAX))
}

fn origin() -> &'static std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now)
}

fn to_tokio(at: Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(*origin() + Duration::from_micros(at.as_micros()))
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

// ----------------------------------------------------------------------
// The task
// ----------------------------------------------------------------------

#[derive(Debug)]
struct Call {
    head: Fields,
    sensitive: Vec<Vec<u8>>,
    body: Vec<u8>,
    stream: Option<StreamRef>,
    head_sent: bool,
    sent: usize,
    body_done: bool,
    events: mpsc::UnboundedSender<StreamEvent>,
}

impl Call {
    fn tell(&self, e: StreamEvent) {
        // The call may be gone (dropped CallStream): nothing to tell.
        let _ = self.events.send(e);
    }
}

struct Task {
    conn: Box<Conn>,
    authority: String,
    calls: HashMap<u64, Call>,
    by_stream: HashMap<StreamRef, u64>,
    /// Calls without a stream yet, oldest first.
    waiting: VecDeque<u64>,
    alive: Arc<AtomicBool>,
}

impl Task {
    fn end_call(&mut self, key: u64) -> Option<Call> {
        let call = self.calls.remove(&key)?;
        if let Some(s) = call.stream {
            self.by_stream.remove(&s);
        }
        self.waiting.retain(|k| *k != key);
        Some(call)
    }

    fn fail_all(&mut self, why: &str) {
        self.alive.store(false, Ordering::SeqCst);
        for (_, call) in self.calls.drain() {
            call.tell(StreamEvent::Failed(why.to_owned()));
        }
        self.by_stream.clear();
        self.waiting.clear();
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Start {
                key,
                head,
                sensitive,
                body,
                events,
                accepted,
            } => {
                if !self.alive.load(Ordering::SeqCst) || self.conn.is_closed() {
                    let _ = accepted.send(false);
                    return;
                }
                self.calls.insert(
                    key,
                    Call {
                        head,
                        sensitive,
                        body,
                        stream: None,
                        head_sent: false,
                        sent: 0,
                        body_done: false,
                        events,
                    },
                );
                self.waiting.push_back(key);
                let _ = accepted.send(true);
            }
            Command::Cancel { key } => {
                if let Some(call) = self.end_call(key)
                    && let Some(s) = call.stream
                {
                    // Already ended streams are unknown: nothing to reset.
                    let _ = self.conn.reset(s, ErrorCode::CANCEL);
                }
            }
        }
        self.drain_events();
    }

    fn event(&mut self, e: Ev) {
        match e {
            Ev::Headers {
                stream,
                kind,
                fields,
                end_stream,
            } => {
                if kind == HeadersKind::Informational {
                    return;
                }
                if let Some(call) = self.by_stream.get(&stream).and_then(|k| self.calls.get(k)) {
                    call.tell(StreamEvent::Headers { fields, end_stream });
                }
            }
            Ev::Reset {
                stream,
                code,
                remote,
            } => {
                if let Some(key) = self.by_stream.get(&stream).copied()
                    && let Some(call) = self.end_call(key)
                {
                    call.tell(StreamEvent::Reset { code, remote });
                }
            }
            Ev::Closed { stream } => {
                if let Some(key) = self.by_stream.get(&stream).copied()
                    && let Some(call) = self.end_call(key)
                {
                    call.tell(StreamEvent::Closed);
                }
            }
            Ev::SendReady { stream } => {
                if let Some(key) = self.by_stream.get(&stream).copied() {
                    self.push(key);
                }
            }
            Ev::GoAway => {
                // No new stream opens here: the channel connects anew.
                self.alive.store(false, Ordering::SeqCst);
                for key in std::mem::take(&mut self.waiting) {
                    if let Some(call) = self.end_call(key) {
                        call.tell(StreamEvent::Refused);
                    }
                }
            }
            Ev::ConnectionClosed { error } => {
                let why = match error {
                    Some(e) => format!("connection closed: {e}"),
                    None => "connection closed".to_owned(),
                };
                self.fail_all(&why);
            }
            Ev::Ignored => {}
        }
    }

    fn drain_events(&mut self) {
        // The event borrows the connection: copy it out first.
        while let Some(e) = self.conn.poll_event() {
            let e = Ev::copy(e);
            self.event(e);
        }
    }

    fn data(&mut self, stream: StreamRef, bytes: &[u8]) {
        // Consumed at once: the windows reopen as the body arrives.
        self.conn.release_data(stream, bytes.len());
        if let Some(call) = self.by_stream.get(&stream).and_then(|k| self.calls.get(k)) {
            call.tell(StreamEvent::Data(bytes.to_vec()));
        }
    }

    /// Queues what the call can send; an error ends it.
    fn push(&mut self, key: u64) {
        let Some(call) = self.calls.get_mut(&key) else {
            return;
        };
        let Some(stream) = call.stream else {
            return;
        };
        let mut failed = None;
        if !call.head_sent {
            let mut fields = vec![
                Field::new(b":method", b"POST"),
                Field::new(b":scheme", b"http"),
                Field::new(b":path", super::PATH.as_bytes()),
                Field::new(b":authority", self.authority.as_bytes()),
            ];
            for (n, v) in &call.head {
                if call.sensitive.iter().any(|s| s == n) {
                    fields.push(Field::sensitive(n, v));
                } else {
                    fields.push(Field::new(n, v));
                }
            }
            match self
                .conn
                .send_headers(stream, fields.iter().copied(), false)
            {
                Ok(()) => call.head_sent = true,
                Err(StreamError::TransmitFull | StreamError::ConcurrencyLimit) => return,
                Err(e) => failed = Some(e),
            }
        }
        while failed.is_none() && call.head_sent && !call.body_done {
            match self.conn.send_data(stream, &call.body[call.sent..], true) {
                Ok(n) => {
                    call.sent += n;
                    if call.sent == call.body.len() {
                        call.body_done = true;
                    } else if n == 0 {
                        break;
                    }
                }
                Err(StreamError::TransmitFull) => break,
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            match e {
                // The response may still come (early response, then reset):
                // the stream's own events end the call.
                StreamError::Reset(_) | StreamError::AlreadyEnded => {
                    call.body_done = true;
                }
                e => {
                    if let Some(call) = self.end_call(key) {
                        if let Some(s) = call.stream {
                            let _ = self.conn.reset(s, ErrorCode::CANCEL);
                        }
                        call.tell(StreamEvent::Failed(format!("send: {e}")));
                    }
                }
            }
        }
    }

    /// Opens streams for waiting calls and queues their frames.
    fn flush(&mut self) {
        while let Some(&key) = self.waiting.front() {
            match self.conn.open_stream() {
                Ok(s) => {
                    self.waiting.pop_front();
                    if let Some(call) = self.calls.get_mut(&key) {
                        call.stream = Some(s);
                        self.by_stream.insert(s, key);
                        self.push(key);
                    }
                }
                Err(StreamError::NoCapacity) => break,
                Err(e) => {
                    self.waiting.pop_front();
                    if let Some(call) = self.end_call(key) {
                        call.tell(StreamEvent::Failed(format!("open: {e}")));
                    }
                }
            }
        }
        // Heads that found the transmit buffer full, or the peer's limit.
        let pending: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| c.stream.is_some() && !c.head_sent)
            .map(|(k, _)| *k)
            .collect();
        for key in pending {
            self.push(key);
        }
    }

    fn transmit(&mut self, out: &mut Vec<u8>, limit: usize) {
        let mut idle = 0;
        while out.len() < limit {
            self.flush();
            self.drain_events();
            let start = out.len();
            out.resize(start + TRANSMIT_CHUNK, 0);
            let n = self.conn.poll_transmit(&mut out[start..]);
            out.truncate(start + n);
            self.drain_events();
            if n > 0 {
                idle = 0;
            } else {
                idle += 1;
                if idle > 1 {
                    break;
                }
            }
        }
    }

    fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut stalled = 0;
        while !input.is_empty() {
            let r = self.conn.recv(input, now());
            let progressed = r.consumed > 0 || r.data.is_some();
            let consumed = r.consumed;
            if let Some(d) = r.data {
                self.data(d.stream, d.bytes);
            }
            input = &input[consumed..];
            self.drain_events();
            if progressed {
                stalled = 0;
            } else {
                stalled += 1;
                if stalled > 3 {
                    return Err(io::Error::other("the connection consumes no input"));
                }
                self.transmit(out, usize::MAX);
            }
        }
        Ok(())
    }

    async fn run(mut self, mut socket: TcpStream, mut rx: mpsc::UnboundedReceiver<Command>) {
        let (mut rd, mut wr) = socket.split();
        let mut rbuf = vec![0u8; READ_BUF];
        let mut out: Vec<u8> = Vec::with_capacity(WRITE_HIGH + TRANSMIT_CHUNK);
        let mut written = 0;
        let mut eof = false;
        let mut commands_open = true;
        let mut goaway_sent = false;
        let result: io::Result<()> = loop {
            if written == out.len() {
                out.clear();
                written = 0;
            }
            // Nobody can start a call any more and none runs: say goodbye.
            if !commands_open && self.calls.is_empty() && !goaway_sent {
                goaway_sent = true;
                self.conn.go_away(ErrorCode::NO_ERROR);
                self.drain_events();
            }
            self.transmit(&mut out, WRITE_HIGH);
            if written == out.len() && (self.conn.is_closed() || eof || goaway_sent) {
                break Ok(());
            }
            let deadline = self.conn.poll_timeout().map(to_tokio);
            tokio::select! {
                r = rd.read(&mut rbuf), if !eof => match r {
                    Ok(0) => {
                        eof = true;
                        self.conn.recv_eof();
                        self.drain_events();
                    }
                    Ok(n) => {
                        if let Err(e) = self.feed(&rbuf[..n], &mut out) {
                            break Err(e);
                        }
                    }
                    Err(e) => break Err(e),
                },
                r = wr.write(&out[written..]), if written < out.len() => match r {
                    Ok(n) => written += n,
                    Err(e) => break Err(e),
                },
                cmd = rx.recv(), if commands_open => match cmd {
                    Some(cmd) => self.command(cmd),
                    None => commands_open = false,
                },
                () = sleep_until(deadline), if deadline.is_some() => {
                    self.conn.handle_timeout(now());
                    self.drain_events();
                }
            }
        };
        let why = match result {
            Ok(()) => "connection closed".to_owned(),
            Err(e) => format!("connection failed: {e}"),
        };
        self.fail_all(&why);
        // Commands that raced the end: refuse them so callers reconnect.
        rx.close();
        while let Ok(cmd) = rx.try_recv() {
            if let Command::Start {
                accepted, events, ..
            } = cmd
            {
                let _ = accepted.send(false);
                drop(events);
            }
        }
        let _ = wr.shutdown().await;
    }
}

/// An event copied out of the connection, so the task can call back into it.
enum Ev {
    Headers {
        stream: StreamRef,
        kind: HeadersKind,
        fields: Fields,
        end_stream: bool,
    },
    Reset {
        stream: StreamRef,
        code: ErrorCode,
        remote: bool,
    },
    Closed {
        stream: StreamRef,
    },
    SendReady {
        stream: StreamRef,
    },
    GoAway,
    ConnectionClosed {
        error: Option<h2::ConnectionError>,
    },
    Ignored,
}

impl Ev {
    fn copy(e: h2::Event<'_>) -> Self {
        match e {
            h2::Event::Headers {
                stream,
                kind,
                fields,
                end_stream,
            } => Self::Headers {
                stream,
                kind,
                fields: fields
                    .iter()
                    .map(|f| (f.name.to_vec(), f.value.to_vec()))
                    .collect(),
                end_stream,
            },
            h2::Event::Reset {
                stream,
                code,
                remote,
            } => Self::Reset {
                stream,
                code,
                remote,
            },
            h2::Event::Closed { stream } => Self::Closed { stream },
            h2::Event::SendReady { stream } => Self::SendReady { stream },
            h2::Event::GoAway { .. } => Self::GoAway,
            h2::Event::ConnectionClosed { error } => Self::ConnectionClosed { error },
            h2::Event::StreamsAvailable | h2::Event::PingAck { .. } => Self::Ignored,
        }
    }
}
