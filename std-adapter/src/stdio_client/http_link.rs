//! The older HTTP shapes of MCP (2026-07-28 §13) as a line link for the
//! stdio client's engine: a server of the 2025 era (Streamable HTTP with
//! an `Mcp-Session-Id`) or of the 2024 era (HTTP+SSE) speaks the same
//! legacy lifecycle as a legacy stdio child, so the same core client
//! ([`StdioClient`](mcpwire_core::mcp::client::stdio::StdioClient), with
//! its ids, timeouts, progress and cancellation) runs it; this link only
//! moves its lines over HTTP and the server's messages back as lines.
//!
//! Which shape: the first line is the engine's `initialize`; it is `POST`ed
//! to the URL and the core reads the answer
//! ([`era::initialize`](mcpwire_core::mcp::client::http::era::initialize)):
//! an `InitializeResult` opens a 2025 session (its id on every later
//! request, with the agreed `MCP-Protocol-Version`; a 404 ends the link,
//! and the engine's restart initialises a new session; `DELETE` when the
//! channel stops); 400, 404 or 405 without a modern error → the 2024 shape:
//! `GET` the URL for the event stream, `POST` every line to the URL its
//! `endpoint` event names, and take every message from the stream.
//!
//! A failure the engine cannot see on a line (a status that is no
//! JSON-RPC answer, a stream that ends, a server of neither shape) ends
//! the link with the reason in `fatal` (for the handshake) or on stderr:
//! the engine then fails the calls in flight, as for a crashed child.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::http1::head::EMPTY_HEADER;
use mcpwire_core::http1::sse::SseParser;
use mcpwire_core::http1::{ClientConnection, MAX_HEADERS, MediaType, ResponseEvent};
use mcpwire_core::mcp::client::http::era::{self, InitializeVerdict};
use mcpwire_core::mcp::client::http::{
    Endpoint, Judgement, ResponseReader, Session, write_delete, write_get_events, write_legacy_post,
};
use mcpwire_core::mcp::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};

use super::lines::{LineReceiver, LineSender, lines};

/// Where the server is: `http://AUTHORITY/TARGET`.
#[derive(Debug, Clone)]
pub struct HttpLinkConfig {
    /// The server's MCP URL (`http://host:port/path`; the 2024 shape's
    /// event stream URL, conventionally `/sse`).
    pub url: String,
    /// A bearer token sent on every request.
    pub bearer: Option<String>,
}

/// The URL's parts.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) authority: String,
    pub(crate) path: String,
}

pub(crate) fn parse_url(url: &str) -> Result<Target, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!(
            "{}: only http:// URLs are supported",
            crate::redact_url(url)
        )
    })?;
    let at = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(at);
    if authority.is_empty() || authority.contains('@') {
        return Err(format!(
            "{}: no host, or credentials in the URL (give them in the configuration)",
            crate::redact_url(url)
        ));
    }
    Ok(Target {
        authority: authority.to_owned(),
        path: if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
    })
}

/// A running link: lines in, the server's messages out as lines.
pub(super) struct Link {
    pub(super) lines: LineSender,
    pub(super) messages: DuplexStream,
    pub(super) task: JoinHandle<()>,
    /// Why the link ended, when the engine cannot tell from a line.
    pub(super) fatal: Arc<Mutex<Option<String>>>,
    /// The server speaks the 2024 HTTP+SSE shape.
    pub(super) http_sse: Arc<AtomicBool>,
}

struct Shared {
    target: Target,
    bearer: Option<String>,
    max_message: usize,
    prefix: String,
    fatal: Arc<Mutex<Option<String>>>,
    http_sse: Arc<AtomicBool>,
}

impl Shared {
    fn endpoint<'a>(&'a self, path: &'a str) -> Endpoint<'a> {
        Endpoint {
            authority: &self.target.authority,
            target: path,
            bearer: self.bearer.as_deref(),
        }
    }

    fn log(&self, text: &str) {
        eprintln!("{}{text}", self.prefix);
    }

    fn fatal(&self, why: String) {
        self.log(&why);
        if let Ok(mut f) = self.fatal.lock() {
            f.get_or_insert(why);
        }
    }
}

/// Starts a link to the server at `config.url`.
pub(super) fn launch(
    config: &HttpLinkConfig,
    max_message: usize,
    prefix: &str,
) -> Result<Link, String> {
    let target = parse_url(&config.url)?;
    let (lines_tx, lines_rx) = lines();
    let (ours, theirs) = tokio::io::duplex(64 << 10);
    let fatal = Arc::new(Mutex::new(None));
    let http_sse = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Shared {
        target,
        bearer: config.bearer.clone(),
        max_message,
        prefix: prefix.to_owned(),
        fatal: Arc::clone(&fatal),
        http_sse: Arc::clone(&http_sse),
    });
    let task = tokio::spawn(run(shared, lines_rx, ours));
    Ok(Link {
        lines: lines_tx,
        messages: theirs,
        task,
        fatal,
        http_sse,
    })
}

/// What the link's helpers tell its loop.
enum Note {
    /// A message for the engine.
    Message(Vec<u8>),
    /// The link must end (the reason is logged or in `fatal`).
    End,
}

enum Shape {
    /// Before the answer to `initialize`.
    Unknown,
    /// The 2025 session shape.
    Session { id: Option<String>, version: String },
    /// The 2024 HTTP+SSE shape: lines go to this target.
    HttpSse { post: String },
}

async fn run(shared: Arc<Shared>, mut lines: LineReceiver, mut out: DuplexStream) {
    let (notes_tx, mut notes) = mpsc::unbounded_channel::<Note>();
    let mut shape = Shape::Unknown;
    let mut stream: Option<JoinHandle<()>> = None;
    // The 2025 shape: the POSTs whose answers are still read, by the
    // request's id (its JSON text).
    let mut in_flight: HashMap<String, AbortHandle> = HashMap::new();
    // The finished POSTs leave the map when it has grown to this size (and
    // the bound doubles past what is left): not one scan per line.
    let mut prune_at = 64;
    loop {
        tokio::select! {
            line = lines.recv() => {
                let Some(line) = line else { break };
                let body = line.trim_ascii_end().to_vec();
                if matches!(shape, Shape::Unknown) {
                    match initialize(&shared, &body, &notes_tx).await {
                        Some((s, task)) => {
                            shape = s;
                            stream = task;
                        }
                        None => break,
                    }
                    continue;
                }
                let (path, session) = match &shape {
                    Shape::Session { id, version } => (
                        shared.target.path.clone(),
                        Some((id.clone(), version.clone())),
                    ),
                    Shape::HttpSse { post } => (post.clone(), None),
                    Shape::Unknown => continue,
                };
                if session.is_none() {
                    tokio::spawn(post_line(Arc::clone(&shared), path, session, body, notes_tx.clone()));
                    continue;
                }
                if in_flight.len() >= prune_at {
                    in_flight.retain(|_, task| !task.is_finished());
                    prune_at = (in_flight.len() * 2).max(64);
                }
                let (request, cancelled) = ids_of(&body);
                let post = post_line(Arc::clone(&shared), path, session, body, notes_tx.clone());
                // A cancelled request's answer is no longer wanted: once
                // the server has the cancel, its stream is closed too (a
                // disconnect alone is no cancel in this era).
                let stale = cancelled.and_then(|id| in_flight.remove(&id));
                let task = tokio::spawn(async move {
                    post.await;
                    if let Some(stale) = stale {
                        stale.abort();
                    }
                });
                if let Some(id) = request {
                    in_flight.insert(id, task.abort_handle());
                }
            }
            note = notes.recv() => match note {
                Some(Note::Message(mut m)) => {
                    m.push(b'\n');
                    if out.write_all(&m).await.is_err() {
                        break;
                    }
                }
                Some(Note::End) | None => break,
            },
        }
    }
    if let Some(task) = stream {
        task.abort();
    }
    if let Shape::Session {
        id: Some(id),
        version,
    } = &shape
    {
        // Best effort: the server may answer 405 (§13.2).
        let session = Session {
            id: Some(id.as_bytes()),
            version: Some(version.as_bytes()),
        };
        let mut req = vec![0u8; 1024 + id.len()];
        if let Ok(n) = write_delete(&mut req, &shared.endpoint(&shared.target.path), &session) {
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                if let Ok(mut ex) = Exchange::open(&shared.target.authority, &req[..n]).await {
                    while let Ok(Some(_)) = ex.next().await {}
                }
            })
            .await;
        }
    }
}

/// `POST`s the engine's `initialize`, reads which shape the answer means
/// and, for the 2024 shape, opens the event stream and sends it there.
async fn initialize(
    shared: &Arc<Shared>,
    body: &[u8],
    notes: &mpsc::UnboundedSender<Note>,
) -> Option<(Shape, Option<JoinHandle<()>>)> {
    let path = shared.target.path.clone();
    let mut req = vec![0u8; body.len() + 2048];
    let n = match write_legacy_post(&mut req, &shared.endpoint(&path), &Session::default(), body) {
        Ok(n) => n,
        Err(e) => {
            shared.fatal(format!("initialize cannot be sent: {e:?}"));
            return None;
        }
    };
    let answer = match exchange(shared, &req[..n], body, notes).await {
        Ok(a) => a,
        Err(e) => {
            shared.fatal(e);
            return None;
        }
    };
    match era::initialize(&answer.judgement, answer.status, &answer.buf) {
        InitializeVerdict::Session { version } => {
            let version = json::str_plain(version)
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            let id = answer.session.clone();
            if let Judgement::Response { len, .. } = answer.judgement {
                let _ = notes.send(Note::Message(one_line(&answer.buf[..len])));
            }
            Some((Shape::Session { id, version }, None))
        }
        InitializeVerdict::HttpSse => http_sse(shared, body, notes).await,
        InitializeVerdict::Failed(why) => {
            shared.fatal(format!(
                "{}: initialize: {why} (HTTP {})",
                shared.target.path, answer.status
            ));
            None
        }
    }
}

/// The 2024 shape: the event stream, its `endpoint`, then `initialize`
/// sent there.
async fn http_sse(
    shared: &Arc<Shared>,
    body: &[u8],
    notes: &mpsc::UnboundedSender<Note>,
) -> Option<(Shape, Option<JoinHandle<()>>)> {
    let path = shared.target.path.clone();
    let mut req = vec![0u8; 2048];
    let opened = match write_get_events(&mut req, &shared.endpoint(&path), &Session::default()) {
        Ok(n) => Exchange::open(&shared.target.authority, &req[..n]).await,
        Err(e) => {
            shared.fatal(format!("the event stream cannot be requested: {e:?}"));
            return None;
        }
    };
    let mut ex = match opened {
        Ok(ex) => ex,
        Err(e) => {
            shared.fatal(format!("GET {path}: {e}"));
            return None;
        }
    };
    let mut sse = SseParser::new();
    let mut buf = vec![0u8; shared.max_message];
    // The URL to post to, and what followed its event in the same read.
    let (post, rest) = loop {
        match ex.next().await {
            Ok(Some(Ev::Head { status, media, .. })) => {
                if status != 200 || media != MediaType::EventStream {
                    shared.fatal(format!(
                        "neither era: the modern probe, initialize and GET {path} (HTTP {status}) all failed"
                    ));
                    return None;
                }
            }
            Ok(Some(Ev::Data(data))) => {
                let mut data = &data[..];
                let mut found = None;
                while !data.is_empty() {
                    let fed = match sse.feed(data, &mut buf) {
                        Ok(f) => f,
                        Err(e) => {
                            shared.fatal(format!("GET {path}: {}", e.reason()));
                            return None;
                        }
                    };
                    data = &data[fed.consumed..];
                    if let Some(e) = fed.event {
                        if e.name() != b"endpoint" {
                            shared.fatal(format!(
                                "GET {path}: the first event is not `endpoint` (2024-11-05 HTTP+SSE)"
                            ));
                            return None;
                        }
                        let mut target = [0u8; 2048];
                        match era::endpoint_target(
                            "http",
                            &shared.target.authority,
                            &path,
                            &buf[..e.data_len],
                            &mut target,
                        ) {
                            Ok(t) => found = Some((t.to_owned(), data.to_vec())),
                            Err(e) => {
                                shared.fatal(format!("GET {path}: unusable endpoint event: {e:?}"));
                                return None;
                            }
                        }
                        break;
                    }
                }
                if let Some(found) = found {
                    break found;
                }
            }
            Ok(Some(Ev::End)) | Ok(None) => {
                shared.fatal(format!(
                    "GET {path}: the stream ended before its endpoint event"
                ));
                return None;
            }
            Err(e) => {
                shared.fatal(format!("GET {path}: {e}"));
                return None;
            }
        }
    };
    shared.http_sse.store(true, Ordering::Relaxed);
    let task = tokio::spawn(read_stream(
        Arc::clone(shared),
        ex,
        sse,
        buf,
        rest,
        notes.clone(),
    ));
    let notes = notes.clone();
    tokio::spawn(post_line(
        Arc::clone(shared),
        post.clone(),
        None,
        body.to_vec(),
        notes,
    ));
    Some((Shape::HttpSse { post }, Some(task)))
}

/// Every `message` event of the 2024 stream, to the engine; the link ends
/// with the stream.
async fn read_stream(
    shared: Arc<Shared>,
    mut ex: Exchange,
    mut sse: SseParser,
    mut buf: Vec<u8>,
    first: Vec<u8>,
    notes: mpsc::UnboundedSender<Note>,
) {
    let mut first = Some(first);
    loop {
        let next = match first.take() {
            Some(data) => Ok(Some(Ev::Data(data))),
            None => ex.next().await,
        };
        match next {
            Ok(Some(Ev::Data(data))) => {
                let mut data = &data[..];
                while !data.is_empty() {
                    let fed = match sse.feed(data, &mut buf) {
                        Ok(f) => f,
                        Err(e) => {
                            shared.log(&format!("the event stream failed: {}", e.reason()));
                            let _ = notes.send(Note::End);
                            return;
                        }
                    };
                    data = &data[fed.consumed..];
                    if let Some(e) = fed.event.filter(|e| e.is_message() && e.data_len > 0) {
                        let _ = notes.send(Note::Message(one_line(&buf[..e.data_len])));
                    }
                }
            }
            Ok(Some(Ev::Head { .. })) => {}
            Ok(Some(Ev::End)) | Ok(None) => {
                shared.log("the server closed its event stream");
                let _ = notes.send(Note::End);
                return;
            }
            Err(e) => {
                shared.log(&format!("the event stream failed: {e}"));
                let _ = notes.send(Note::End);
                return;
            }
        }
    }
}

/// A line's request id and, for `notifications/cancelled`, the id it
/// cancels, each as its JSON text.
fn ids_of(line: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(serde_json::Value::Object(m)) = serde_json::from_slice(line) else {
        return (None, None);
    };
    let request = m
        .get("method")
        .and(m.get("id"))
        .map(serde_json::Value::to_string);
    let cancelled = (m.get("method").and_then(serde_json::Value::as_str)
        == Some("notifications/cancelled"))
    .then(|| m.get("params").and_then(|p| p.get("requestId")))
    .flatten()
    .map(serde_json::Value::to_string);
    (request, cancelled)
}

/// An event's data as one line: a JSON text's line breaks can only be
/// white space between its tokens (a string cannot hold a raw one).
fn one_line(data: &[u8]) -> Vec<u8> {
    data.iter()
        .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
        .collect()
}

/// `POST`s one of the engine's lines; the answer's messages go to the
/// engine (the 2025 shape: on the response; the 2024 shape: only 202).
async fn post_line(
    shared: Arc<Shared>,
    path: String,
    session: Option<(Option<String>, String)>,
    body: Vec<u8>,
    notes: mpsc::UnboundedSender<Note>,
) {
    let s = match &session {
        Some((id, version)) => Session {
            id: id.as_deref().map(str::as_bytes),
            version: Some(version.as_bytes()),
        },
        None => Session::default(),
    };
    let mut req = vec![0u8; body.len() + 2048];
    let n = match write_legacy_post(&mut req, &shared.endpoint(&path), &s, &body) {
        Ok(n) => n,
        Err(e) => {
            shared.log(&format!("a message cannot be sent: {e:?}"));
            let _ = notes.send(Note::End);
            return;
        }
    };
    if session.is_none() {
        // The 2024 shape: the answer comes on the stream.
        let status = match Exchange::open(&shared.target.authority, &req[..n]).await {
            Ok(mut ex) => {
                let mut status = 0;
                while let Ok(Some(ev)) = ex.next().await {
                    if let Ev::Head { status: s, .. } = ev {
                        status = s;
                    }
                }
                status
            }
            Err(_) => 0,
        };
        if !(200..300).contains(&status) {
            shared.log(&format!(
                "POST {path} answered HTTP {status}: the link ends"
            ));
            let _ = notes.send(Note::End);
        }
        return;
    }
    match exchange(&shared, &req[..n], &body, &notes).await {
        Ok(answer) => match answer.judgement {
            Judgement::Response { len, .. } => {
                let _ = notes.send(Note::Message(one_line(&answer.buf[..len])));
            }
            Judgement::Accepted | Judgement::Notification { .. } => {}
            Judgement::Failed(f) if f.status == 404 => {
                shared.log("the server ended the session (404): a new one starts");
                let _ = notes.send(Note::End);
            }
            Judgement::Failed(f) => {
                shared.log(&format!(
                    "POST {path} answered HTTP {}: {}; the link ends",
                    f.status, f.reason
                ));
                let _ = notes.send(Note::End);
            }
        },
        Err(e) => {
            shared.log(&format!("POST {path}: {e}; the link ends"));
            let _ = notes.send(Note::End);
        }
    }
}

/// A whole exchange's answer as the core judged it.
struct Answer {
    judgement: Judgement,
    status: u16,
    /// The final message (`buf[..len]` of the judgement).
    buf: Vec<u8>,
    session: Option<String>,
}

/// Sends `request` (carrying `body`) and reads its whole answer; each
/// notification of an SSE answer goes to `notes` as soon as its event is
/// parsed (progress arrives while the call runs, and a cancel can follow
/// it), the final message stays in the [`Answer`].
async fn exchange(
    shared: &Shared,
    request: &[u8],
    body: &[u8],
    notes: &mpsc::UnboundedSender<Note>,
) -> Result<Answer, String> {
    let mut reader = ResponseReader::new(body).map_err(|e| e.message.to_owned())?;
    let mut ex = Exchange::open(&shared.target.authority, request)
        .await
        .map_err(|e| format!("{}: {e}", shared.target.authority))?;
    let mut buf = vec![0u8; shared.max_message];
    let (mut status, mut session) = (0, None);
    let mut last = None;
    while last.is_none() {
        let ev = ex.next().await?;
        let judgement = match ev {
            Some(Ev::Head {
                status: s,
                media,
                session: id,
            }) => {
                status = s;
                session = id;
                reader.on_head(s, media)
            }
            Some(Ev::Data(data)) => {
                let mut data = &data[..];
                let mut j = None;
                while !data.is_empty() && j.is_none() {
                    let step = reader.on_body(data, &mut buf);
                    data = &data[step.consumed..];
                    match step.judgement {
                        Some(Judgement::Notification { len }) => {
                            let _ = notes.send(Note::Message(one_line(&buf[..len])));
                        }
                        other => j = other,
                    }
                }
                j
            }
            Some(Ev::End) | None => reader.on_end(&buf),
        };
        last = judgement;
    }
    Ok(Answer {
        judgement: last.unwrap_or(Judgement::Accepted),
        status,
        buf,
        session,
    })
}

/// What an exchange's response gives.
enum Ev {
    Head {
        status: u16,
        media: MediaType,
        session: Option<String>,
    },
    Data(Vec<u8>),
    End,
}

/// One HTTP/1.1 request and its response on its own connection.
struct Exchange {
    stream: TcpStream,
    conn: ClientConnection<16384>,
    pending: Vec<u8>,
    done: bool,
}

impl Exchange {
    async fn open(authority: &str, request: &[u8]) -> std::io::Result<Self> {
        let mut stream = TcpStream::connect(authority).await?;
        stream.set_nodelay(true)?;
        stream.write_all(request).await?;
        let mut conn = ClientConnection::new();
        let method = request
            .split(|&b| b == b' ')
            .next()
            .and_then(|m| std::str::from_utf8(m).ok())
            .unwrap_or("POST");
        conn.start(method)
            .map_err(|_| std::io::Error::other("the connection cannot start a request"))?;
        Ok(Self {
            stream,
            conn,
            pending: Vec::new(),
            done: false,
        })
    }

    /// The next event of the response; `None` once it ended.
    async fn next(&mut self) -> Result<Option<Ev>, String> {
        if self.done {
            return Ok(None);
        }
        loop {
            // Asked even with nothing pending: a response whose body is
            // empty (a 202, a DELETE's 200 with length 0) ends right after
            // its head, without another octet from a server that keeps the
            // connection open.
            {
                let r = self.conn.recv(&self.pending);
                let ev = match r.event.clone() {
                    None => None,
                    Some(ResponseEvent::Head { status }) => {
                        let mut fields = [EMPTY_HEADER; MAX_HEADERS];
                        let head = self
                            .conn
                            .head(&mut fields)
                            .ok_or("a response head that cannot be read")?;
                        Some(Ev::Head {
                            status,
                            media: head.content_type(),
                            session: head
                                .header(b"mcp-session-id")
                                .and_then(era::session_id)
                                .map(|s| String::from_utf8_lossy(s).into_owned()),
                        })
                    }
                    Some(ResponseEvent::Data(range)) => {
                        Some(Ev::Data(self.pending[range].to_vec()))
                    }
                    Some(ResponseEvent::End { .. }) => {
                        self.done = true;
                        Some(Ev::End)
                    }
                    Some(ResponseEvent::Failed(e)) => return Err(e.reason().to_owned()),
                };
                self.pending.drain(..r.consumed);
                if let Some(ev) = ev {
                    return Ok(Some(ev));
                }
                if r.consumed > 0 {
                    continue;
                }
            }
            let mut chunk = [0u8; 16384];
            let n = self
                .stream
                .read(&mut chunk)
                .await
                .map_err(|e| e.to_string())?;
            if n == 0 {
                self.done = true;
                return match self.conn.recv_eof() {
                    Some(ResponseEvent::Failed(e)) => Err(e.reason().to_owned()),
                    _ => Ok(Some(Ev::End)),
                };
            }
            self.pending.extend_from_slice(&chunk[..n]);
        }
    }
}
