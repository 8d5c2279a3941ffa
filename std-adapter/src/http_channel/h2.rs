//! One HTTP/2 connection shared by the calls of an
//! [`HttpChannel`](super::HttpChannel): every `POST` is a stream on it,
//! driven by the core's sans-IO [`Connection`] in a task of its own (the
//! socket loop is [`crate::pump`], shared with the gRPC channel).
//!
//! A call sends [`Cmd::Open`] with its header fields and body and hears
//! back through its own channel: the response head, DATA as it arrives
//! (released at once: the call holds it until its judge reads it), the
//! end, or a reset. Dropping an [`H2Stream`] before its end resets the
//! stream with CANCEL (the server sees the cancellation, MCP 2026-07-28
//! §5.7). Streams beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS
//! wait for a free one. A stream the server refused unprocessed
//! (REFUSED_STREAM, or above the last stream id of its GOAWAY) and one
//! whose connection ended before its request went out are
//! [`H2Msg::Refused`]: the channel sends it again on a new connection.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use mcpwire_core::h2::{
    Config, Connection, ErrorCode, Event, HeadersKind, Role, Stop, StreamError, StreamRef,
};
use mcpwire_core::hpack::Field;
use mcpwire_core::time::Instant;
use tokio::sync::mpsc;

use super::conn::Stream;
use super::{Answer, Attempt, HttpFacts, Inner};
use crate::client::CallError;
use crate::clock::now;
use crate::pump::{self, Pump};
use crate::storage::HeapStorage;
use mcpwire_core::grpc::Code;
use mcpwire_core::http1::MediaType;
use mcpwire_core::mcp::client::http::{Judgement, RequestError, ResponseReader, post_fields};
use std::sync::Mutex;

/// Stream slots of a connection: the calls in flight at once on it (more
/// wait in the task's queue).
pub(crate) const STREAMS: usize = 128;
const BUF: usize = 16384;
/// Octets of output gathered per `poll_transmit`.
const TRANSMIT_CHUNK: usize = 16 << 10;

/// A request head: (name, value) pairs, pseudo-fields first.
pub(crate) type Fields = Vec<(Vec<u8>, Vec<u8>)>;

type H2 = Connection<STREAMS, 4096, BUF, 64, HeapStorage<BUF>>;

/// What a call asks of the connection task.
#[derive(Debug)]
pub(crate) enum Cmd {
    /// Opens a stream: the request head (pseudo-fields first) and body.
    Open {
        key: u64,
        fields: Fields,
        body: Vec<u8>,
        events: mpsc::UnboundedSender<H2Msg>,
    },
    /// Resets the stream with CANCEL (or forgets a waiting one).
    Cancel { key: u64 },
}

/// What a call hears of its stream.
#[derive(Debug)]
pub(crate) enum H2Msg {
    /// The final response head.
    Head {
        status: u16,
        content_type: Option<Vec<u8>>,
        www_authenticate: Option<Vec<u8>>,
    },
    Data(Vec<u8>),
    /// The server ended the stream.
    End,
    /// The stream was reset (by the server when `remote`).
    Reset {
        code: ErrorCode,
        remote: bool,
    },
    /// The request was not processed: send it again elsewhere.
    Refused,
    /// The connection ended under the stream.
    Gone(String),
}

/// The channel's handle on a running connection.
#[derive(Debug)]
pub(crate) struct H2Handle {
    tx: mpsc::UnboundedSender<Cmd>,
    alive: Arc<AtomicBool>,
    next_key: AtomicU64,
}

impl H2Handle {
    /// Starts the connection task over `stream` (the client preface goes
    /// out at once).
    pub(crate) fn spawn(stream: Stream) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let alive = Arc::new(AtomicBool::new(true));
        let config = Config::default();
        let task = Task {
            conn: Box::new(H2::new(Role::Client, config, now())),
            live: HashMap::new(),
            keys: HashMap::new(),
            waiting: VecDeque::new(),
            alive: Arc::clone(&alive),
            read_any: false,
            http1_answer: false,
            scratch: vec![0; TRANSMIT_CHUNK].into_boxed_slice(),
        };
        tokio::spawn(task.run(stream, rx));
        Self {
            tx,
            alive,
            next_key: AtomicU64::new(1),
        }
    }

    /// Takes new streams: not over, no GOAWAY seen.
    pub(crate) fn usable(&self) -> bool {
        self.alive.load(Ordering::SeqCst) && !self.tx.is_closed()
    }

    /// Opens a stream for one request; `None` when the connection is gone.
    pub(crate) fn open(&self, fields: Fields, body: Vec<u8>) -> Option<H2Stream> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let (events_tx, events) = mpsc::unbounded_channel();
        self.tx
            .send(Cmd::Open {
                key,
                fields,
                body,
                events: events_tx,
            })
            .ok()?;
        Some(H2Stream {
            key,
            tx: self.tx.clone(),
            events,
            ended: false,
        })
    }
}

/// A call's stream; dropped before its end, it is reset with CANCEL.
#[derive(Debug)]
pub(crate) struct H2Stream {
    key: u64,
    tx: mpsc::UnboundedSender<Cmd>,
    events: mpsc::UnboundedReceiver<H2Msg>,
    ended: bool,
}

impl H2Stream {
    /// The next message; `None` when the task is gone without a word.
    pub(crate) async fn next(&mut self) -> Option<H2Msg> {
        let m = self.events.recv().await;
        if matches!(
            m,
            None | Some(H2Msg::End | H2Msg::Reset { .. } | H2Msg::Refused | H2Msg::Gone(_))
        ) {
            self.ended = true;
        }
        m
    }
}

impl Drop for H2Stream {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.tx.send(Cmd::Cancel { key: self.key });
        }
    }
}

// ----------------------------------------------------------------------
// The task
// ----------------------------------------------------------------------

#[derive(Debug)]
struct Live {
    key: u64,
    fields: Fields,
    body: Vec<u8>,
    /// Body octets taken by the connection.
    sent: usize,
    headers_sent: bool,
    body_done: bool,
    events: mpsc::UnboundedSender<H2Msg>,
}

impl Live {
    fn tell(&self, m: H2Msg) {
        // The call may be gone: nothing to tell.
        let _ = self.events.send(m);
    }
}

#[derive(Debug)]
struct Waiting {
    key: u64,
    fields: Fields,
    body: Vec<u8>,
    events: mpsc::UnboundedSender<H2Msg>,
}

struct Task {
    conn: Box<H2>,
    live: HashMap<StreamRef, Live>,
    keys: HashMap<u64, StreamRef>,
    /// Requests waiting for a stream slot, oldest first.
    waiting: VecDeque<Waiting>,
    alive: Arc<AtomicBool>,
    /// Octets came from the server.
    read_any: bool,
    /// They began as an HTTP/1.x response: not an HTTP/2 server.
    http1_answer: bool,
    /// Where the connection writes its output, zeroed once (not `out`
    /// grown and zeroed at every turn).
    scratch: Box<[u8]>,
}

impl Task {
    /// Opens streams for waiting requests while slots are free, and sends
    /// the heads and bodies that wait for room or for the peer's limit.
    fn start_and_send(&mut self) {
        while let Some(w) = self.waiting.pop_front() {
            if w.events.is_closed() {
                continue;
            }
            match self.conn.open_stream() {
                Ok(stream) => {
                    self.keys.insert(w.key, stream);
                    self.live.insert(
                        stream,
                        Live {
                            key: w.key,
                            fields: w.fields,
                            body: w.body,
                            sent: 0,
                            headers_sent: false,
                            body_done: false,
                            events: w.events,
                        },
                    );
                }
                Err(StreamError::NoCapacity) => {
                    self.waiting.push_front(w);
                    break;
                }
                Err(_) => {
                    let _ = w.events.send(H2Msg::Refused);
                }
            }
        }
        let mut failed = Vec::new();
        for (&stream, live) in self.live.iter_mut() {
            if live.body_done {
                continue;
            }
            if !live.headers_sent {
                let fields = live.fields.iter().map(|(n, v)| {
                    if n.as_slice() == b"authorization" {
                        Field::sensitive(n, v)
                    } else {
                        Field::new(n, v)
                    }
                });
                match self.conn.send_headers(stream, fields, false) {
                    Ok(()) => live.headers_sent = true,
                    // The peer's limit, or no room yet: tried again on the
                    // next turn.
                    Err(StreamError::ConcurrencyLimit | StreamError::TransmitFull) => continue,
                    Err(StreamError::ConnectionClosed) => {
                        failed.push((stream, H2Msg::Refused));
                        continue;
                    }
                    Err(e) => {
                        failed.push((stream, H2Msg::Gone(format!("the request head: {e:?}"))));
                        continue;
                    }
                }
            }
            let rest = live.body.get(live.sent..).unwrap_or_default();
            match self.conn.send_data(stream, rest, true) {
                Ok(n) => {
                    live.sent += n;
                    if live.sent == live.body.len() {
                        live.body_done = true;
                        live.fields = Vec::new();
                        live.body = Vec::new();
                    }
                }
                Err(StreamError::TransmitFull) => {}
                Err(e) => failed.push((stream, H2Msg::Gone(format!("the request body: {e:?}")))),
            }
        }
        for (stream, m) in failed {
            if let Some(live) = self.live.remove(&stream) {
                self.keys.remove(&live.key);
                let _ = self.conn.reset(stream, ErrorCode::CANCEL);
                live.tell(m);
            }
        }
    }

    /// Hands the connection's events to their streams.
    fn drain_events(&mut self) {
        while let Some(event) = self.conn.poll_event() {
            match event {
                Event::Headers {
                    stream,
                    kind,
                    end_stream,
                } => {
                    let head = (kind == HeadersKind::Response)
                        .then(|| self.conn.headers(stream))
                        .flatten()
                        .map(|h| {
                            let status = h
                                .get(b":status")
                                .and_then(|s| std::str::from_utf8(s).ok()?.parse().ok())
                                .unwrap_or(0);
                            H2Msg::Head {
                                status,
                                content_type: h.get(b"content-type").map(<[u8]>::to_vec),
                                www_authenticate: h.get(b"www-authenticate").map(<[u8]>::to_vec),
                            }
                        });
                    if let Some(live) = self.live.get(&stream) {
                        if let Some(head) = head {
                            live.tell(head);
                        }
                        if end_stream {
                            live.tell(H2Msg::End);
                        }
                    }
                }
                Event::Reset {
                    stream,
                    code,
                    remote,
                } => {
                    if let Some(live) = self.live.remove(&stream) {
                        self.keys.remove(&live.key);
                        // Refused by the server, or above the last stream
                        // of its GOAWAY: not processed.
                        let unprocessed = code == ErrorCode::REFUSED_STREAM;
                        live.tell(if unprocessed {
                            H2Msg::Refused
                        } else {
                            H2Msg::Reset { code, remote }
                        });
                    }
                }
                Event::Closed { stream } => {
                    if let Some(live) = self.live.remove(&stream) {
                        self.keys.remove(&live.key);
                    }
                }
                Event::GoAway { .. } => self.alive.store(false, Ordering::SeqCst),
                Event::ConnectionClosed { error } => {
                    self.alive.store(false, Ordering::SeqCst);
                    let why = match error {
                        _ if self.http1_answer => "the server answered in HTTP/1.1: it does not \
                            take HTTP/2 here (prior knowledge)"
                            .to_owned(),
                        Some(e) => format!("the HTTP/2 connection ended: {e:?}"),
                        None => "the HTTP/2 connection ended".to_owned(),
                    };
                    self.end_all(&why);
                }
                Event::SendReady { .. } | Event::StreamsAvailable | Event::PingAck { .. } => {}
            }
        }
    }

    /// Every stream still here hears that the connection is over: those
    /// whose head never went out are refused (sent again elsewhere),
    /// unless the server does not speak HTTP/2 at all.
    fn end_all(&mut self, why: &str) {
        let gone = |sent: bool| {
            if sent || self.http1_answer {
                H2Msg::Gone(why.to_owned())
            } else {
                H2Msg::Refused
            }
        };
        for (_, live) in self.live.drain() {
            live.tell(gone(live.headers_sent));
        }
        self.keys.clear();
        for w in self.waiting.drain(..) {
            let _ = w.events.send(gone(false));
        }
    }

    async fn run(mut self, stream: Stream, mut rx: mpsc::UnboundedReceiver<Cmd>) {
        let (mut rd, mut wr) = tokio::io::split(stream);
        let _ = pump::run(&mut self, &mut rd, &mut wr, &mut rx).await;
        self.alive.store(false, Ordering::SeqCst);
        if !self.conn.is_closed() {
            self.conn.recv_eof();
        }
        self.drain_events();
        self.end_all("the HTTP/2 connection ended");
        rx.close();
        while let Ok(cmd) = rx.try_recv() {
            if let Cmd::Open { events, .. } = cmd {
                let _ = events.send(H2Msg::Refused);
            }
        }
        pump::shutdown(&mut wr).await;
    }
}

impl Pump for Task {
    type Command = Cmd;

    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        if !self.read_any {
            self.read_any = true;
            self.http1_answer = input.starts_with(b"HTTP/1.");
        }
        let mut rest = input;
        while !rest.is_empty() && !self.conn.is_closed() {
            let r = self.conn.recv(rest, now());
            if let Some(data) = r.data {
                self.conn.release_data(data.stream, data.bytes.len());
                if let Some(live) = self.live.get(&data.stream) {
                    if !data.bytes.is_empty() {
                        live.tell(H2Msg::Data(data.bytes.to_vec()));
                    }
                    if data.end_stream {
                        live.tell(H2Msg::End);
                    }
                }
            }
            self.drain_events();
            rest = rest.get(r.consumed..).unwrap_or_default();
            match r.stop {
                Stop::Closed => break,
                // Owed frames go out before it reads more.
                Stop::Transmit => self.transmit(out, usize::MAX),
                // Events were drained, DATA handed over.
                Stop::Events | Stop::Data => {}
                Stop::Consumed if rest.is_empty() => {}
                Stop::Consumed => {
                    return Err(io::Error::other("the connection consumes no input"));
                }
            }
        }
        Ok(())
    }

    fn transmit(&mut self, out: &mut Vec<u8>, limit: usize) {
        self.start_and_send();
        self.drain_events();
        while out.len() < limit && self.conn.wants_transmit() {
            let n = self.conn.poll_transmit(&mut self.scratch);
            out.extend_from_slice(&self.scratch[..n]);
            self.drain_events();
            // Room made: waiting bodies go on.
            self.start_and_send();
            self.drain_events();
            if n == 0 {
                break;
            }
        }
    }

    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Open {
                key,
                fields,
                body,
                events,
            } => self.waiting.push_back(Waiting {
                key,
                fields,
                body,
                events,
            }),
            Cmd::Cancel { key } => match self.keys.remove(&key) {
                Some(stream) => {
                    self.live.remove(&stream);
                    let _ = self.conn.reset(stream, ErrorCode::CANCEL);
                }
                None => self.waiting.retain(|w| w.key != key),
            },
        }
        self.drain_events();
    }

    fn recv_eof(&mut self) {
        self.conn.recv_eof();
        self.drain_events();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.conn.poll_timeout()
    }

    fn handle_timeout(&mut self) {
        self.conn.handle_timeout(now());
        self.drain_events();
    }

    fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    fn is_idle(&self) -> bool {
        self.live.is_empty() && self.waiting.is_empty()
    }

    fn go_away(&mut self) {
        self.conn.go_away(ErrorCode::NO_ERROR);
        self.drain_events();
    }
}

// ----------------------------------------------------------------------
// One exchange on the shared connection
// ----------------------------------------------------------------------

/// The request head of a `POST` of `body` as HTTP/2 fields: the
/// pseudo-fields, then the core's fields of any HTTP version.
fn request_fields(inner: &Inner, body: &[u8], schema: Option<&[u8]>) -> Result<Fields, CallError> {
    let target = &inner.target;
    let scheme: &[u8] = if inner.dialer.dest.tls {
        b"https"
    } else {
        b"http"
    };
    let mut fields = vec![
        (b":method".to_vec(), b"POST".to_vec()),
        (b":scheme".to_vec(), scheme.to_vec()),
        (b":authority".to_vec(), target.authority.as_bytes().to_vec()),
        (b":path".to_vec(), target.path.as_bytes().to_vec()),
    ];
    let ok = |v: &[u8]| v.iter().all(|&b| b.is_ascii_graphic());
    if !ok(target.authority.as_bytes()) || !ok(target.path.as_bytes()) {
        return Err(CallError::new(
            Code::InvalidArgument,
            "the URL holds octets a field cannot carry",
        ));
    }
    post_fields(
        body,
        schema,
        inner.config.bearer.as_deref(),
        |name, parts| {
            fields.push((name.to_vec(), parts.concat()));
        },
    )
    .map_err(|e| match e {
        RequestError::Invalid(e) => {
            let mut err = CallError::invalid_request(e.message);
            err.diagnostics.rpc_code = Some(e.code);
            err
        }
        RequestError::BadEndpoint(why) => CallError::new(Code::InvalidArgument, why),
        RequestError::Overflow { .. } => {
            CallError::new(Code::Internal, "the request cannot be written")
        }
    })?;
    fields.push((
        b"content-length".to_vec(),
        body.len().to_string().into_bytes(),
    ));
    Ok(fields)
}

/// What `Content-Type` says a body is (its parameters not looked at).
fn media_of(value: Option<&[u8]>) -> MediaType {
    let Some(value) = value else {
        return MediaType::Other;
    };
    let essence = value.split(|&b| b == b';').next().unwrap_or_default();
    let essence = essence.trim_ascii();
    if essence.eq_ignore_ascii_case(b"application/json") {
        MediaType::Json
    } else if essence.eq_ignore_ascii_case(b"text/event-stream") {
        MediaType::EventStream
    } else {
        MediaType::Other
    }
}

/// One attempt of an exchange as a stream of `handle`'s connection,
/// judged by the same [`ResponseReader`] as over HTTP/1.1. `Stale`: the
/// request was not processed (send it again).
pub(super) async fn attempt(
    inner: &Inner,
    handle: &H2Handle,
    body: &[u8],
    schema: Option<&[u8]>,
    facts: &Mutex<HttpFacts>,
    on_note: &mut (dyn FnMut(Vec<u8>) + Send),
) -> Result<Attempt, CallError> {
    let unavailable = |what: String| CallError::new(Code::Unavailable, what);
    let fields = request_fields(inner, body, schema)?;
    let mut reader = ResponseReader::new(body).map_err(|e| {
        let mut err = CallError::invalid_request(e.message);
        err.diagnostics.rpc_code = Some(e.code);
        err
    })?;
    if let Ok(mut f) = facts.lock() {
        f.http_version = Some("HTTP/2");
    }
    let Some(mut stream) = handle.open(fields, body.to_vec()) else {
        return Ok(Attempt::Stale);
    };
    let mut buf = inner.bufs.empty();
    let mut answer: Option<Answer> = None;
    let mut drain_until: Option<tokio::time::Instant> = None;
    loop {
        let m = match drain_until {
            Some(until) => match tokio::time::timeout_at(until, stream.next()).await {
                Ok(m) => m,
                // The response came; the rest of the stream is reset.
                Err(_) => {
                    return answer
                        .map(Attempt::Done)
                        .ok_or_else(|| unavailable("the answer stopped".into()));
                }
            },
            None => stream.next().await,
        };
        let mut judgement = None;
        let mut ended = false;
        match m {
            Some(H2Msg::Head {
                status,
                content_type,
                www_authenticate,
            }) => {
                let media = media_of(content_type.as_deref());
                if let Ok(mut f) = facts.lock() {
                    f.status = Some(status);
                    f.content_type = content_type
                        .as_deref()
                        .map(|v| String::from_utf8_lossy(v).into_owned());
                    f.www_authenticate = www_authenticate
                        .as_deref()
                        .map(|v| String::from_utf8_lossy(v).into_owned());
                }
                buf.size_for(
                    media == MediaType::Json || media == MediaType::EventStream,
                    4096,
                );
                judgement = reader.on_head(status, media);
            }
            Some(H2Msg::Data(bytes)) => {
                let mut data = bytes.as_slice();
                while !data.is_empty() && answer.is_none() {
                    let step = reader.on_body(data, &mut buf);
                    data = data.get(step.consumed..).unwrap_or_default();
                    match step.judgement {
                        Some(Judgement::Notification { len }) => {
                            buf.judged(len);
                            on_note(buf.get(..len).unwrap_or_default().to_vec());
                        }
                        Some(j) => {
                            judgement = Some(j);
                            break;
                        }
                        None => {}
                    }
                    if step.consumed == 0 && step.judgement.is_none() {
                        break;
                    }
                }
            }
            Some(H2Msg::End) => {
                if answer.is_none() {
                    judgement = reader.on_end(&buf);
                }
                ended = true;
            }
            Some(H2Msg::Refused) if answer.is_none() => return Ok(Attempt::Stale),
            Some(H2Msg::Reset { code, remote }) if answer.is_none() => {
                let by = if remote { "the server" } else { "this end" };
                let status = if code == ErrorCode::CANCEL {
                    Code::Cancelled
                } else {
                    Code::Unavailable
                };
                return Err(CallError::new(
                    status,
                    format!("{by} reset the HTTP/2 stream ({code}) before the response"),
                ));
            }
            Some(H2Msg::Gone(why)) if answer.is_none() => return Err(unavailable(why)),
            None if answer.is_none() => {
                return Err(unavailable("the HTTP/2 connection ended".into()));
            }
            Some(H2Msg::Refused | H2Msg::Reset { .. } | H2Msg::Gone(_)) | None => ended = true,
        }
        if let Some(j) = judgement
            && answer.is_none()
        {
            answer = Some(super::judged_into(j, &mut buf, facts)?);
            drain_until = Some(tokio::time::Instant::now() + super::DRAIN_WAIT);
        }
        if ended {
            return answer.map(Attempt::Done).ok_or_else(|| {
                unavailable("the server ended the HTTP/2 stream without an answer".into())
            });
        }
    }
}
