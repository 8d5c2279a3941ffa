//! The Streamable HTTP client of the load: HTTP/1.1 keep-alive over TCP,
//! one `POST /mcp` at a time per connection (no pipelining), written here
//! so that every server gets the same bytes and the client's own cost stays
//! small. A response is JSON with `Content-Length`, or `text/event-stream`
//! (chunked or with a length) whose events are the call's messages.

use std::net::SocketAddr;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::wire::{Era, Template, Work};

/// The endpoint of every server.
pub const MCP_PATH: &str = "/mcp";
/// Response heads larger than this are an error.
const MAX_HEAD: usize = 16 * 1024;
const MAX_HEADERS: usize = 32;

/// What every call of a scenario sends on one server.
#[derive(Debug)]
pub struct HttpSpec {
    pub work: Work,
    pub era: Era,
    template: Template,
    /// The request head up to (not including) `Content-Length`.
    head: Vec<u8>,
}

impl HttpSpec {
    pub fn new(addr: SocketAddr, work: Work, era: Era) -> Self {
        let mut head = format!(
            "POST {MCP_PATH} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\n",
            era.version()
        );
        if era == Era::Modern {
            // The mirrored headers of 2026-07-28.
            head.push_str("Mcp-Method: tools/call\r\nMcp-Name: ");
            head.push_str(work.tool());
            head.push_str("\r\n");
        }
        Self {
            template: work.template_for(era),
            head: head.into_bytes(),
            work,
            era,
        }
    }
}

/// One keep-alive connection and its buffers.
#[derive(Debug)]
pub struct Connection {
    tcp: TcpStream,
    addr: SocketAddr,
    /// Received and not yet consumed.
    rx: BytesMut,
    /// The request being written.
    tx: Vec<u8>,
    /// One JSON body or SSE event's data, reassembled.
    message: Vec<u8>,
    /// The `Mcp-Session-Id` a legacy-era server gave, if any.
    session: Option<String>,
}

/// How a response body is delimited.
#[derive(Debug, Clone, Copy)]
enum Framing {
    Length(usize),
    Chunked,
}

impl Connection {
    /// Connects (TCP_NODELAY), without sending anything.
    pub async fn open(addr: SocketAddr) -> Result<Self, String> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_nodelay(true)
            .map_err(|e| format!("TCP_NODELAY: {e}"))?;
        Ok(Self {
            tcp,
            addr,
            rx: BytesMut::with_capacity(8192),
            tx: Vec::with_capacity(1024),
            message: Vec::with_capacity(1024),
            session: None,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connects and, for the legacy era, does the `initialize` handshake.
    pub async fn open_for(addr: SocketAddr, era: Era) -> Result<Self, String> {
        let mut c = Self::open(addr).await?;
        if era == Era::Legacy {
            c.initialize().await?;
        }
        Ok(c)
    }

    /// `initialize` (keeping a session id if the server gives one), then
    /// `notifications/initialized`, which must get 202.
    async fn initialize(&mut self) -> Result<(), String> {
        let head = format!(
            "POST {MCP_PATH} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n",
            self.addr
        );
        let body = Era::initialize_json(0);
        self.write_request(head.as_bytes(), &body).await?;
        let (status, framing, sse) = self.read_head(true).await?;
        if status != 200 {
            return Err(format!("initialize: HTTP status {status}"));
        }
        let mut answered = false;
        self.read_body(framing, sse, |json| {
            let v: serde_json::Value = serde_json::from_slice(json)
                .map_err(|e| format!("initialize answer is not JSON: {e}"))?;
            if v.get("result").is_none() {
                return Err(format!("initialize failed: {v}"));
            }
            answered = true;
            Ok(())
        })
        .await?;
        if !answered {
            return Err("no answer to initialize".into());
        }
        let mut head = format!(
            "POST {MCP_PATH} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\n",
            self.addr,
            Era::Legacy.version()
        );
        if let Some(s) = &self.session {
            head.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        self.write_request(head.as_bytes(), Era::INITIALIZED_JSON)
            .await?;
        let (status, framing, sse) = self.read_head(false).await?;
        self.read_body(framing, sse, |_| Ok(())).await?;
        if status != 202 {
            return Err(format!("notifications/initialized: HTTP status {status}"));
        }
        Ok(())
    }

    async fn write_request(&mut self, head: &[u8], body: &[u8]) -> Result<(), String> {
        self.tx.clear();
        self.tx.extend_from_slice(head);
        self.tx
            .extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        self.tx.extend_from_slice(body);
        self.tcp
            .write_all(&self.tx)
            .await
            .map_err(|e| format!("write: {e}"))
    }

    /// One whole `tools/call` with id `id`, every message checked: HTTP
    /// 200, then the JSON response, or the SSE events (notifications, then
    /// the response) up to the end of the body.
    pub async fn call(&mut self, spec: &HttpSpec, id: u64) -> Result<(), String> {
        self.tx.clear();
        self.tx.extend_from_slice(&spec.head);
        if let Some(s) = &self.session {
            self.tx
                .extend_from_slice(format!("Mcp-Session-Id: {s}\r\n").as_bytes());
        }
        let len = spec.template.json_len(id);
        self.tx
            .extend_from_slice(format!("Content-Length: {len}\r\n\r\n").as_bytes());
        spec.template.json_into(id, &mut self.tx);
        self.tcp
            .write_all(&self.tx)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let (status, framing, sse) = self.read_head(false).await?;
        if status != 200 {
            // The body may say why.
            let mut why = String::new();
            let _ = self
                .read_body(framing, sse, |m| {
                    why = String::from_utf8_lossy(&m[..m.len().min(300)]).into_owned();
                    Ok(())
                })
                .await;
            return Err(format!("HTTP status {status}: {why}"));
        }
        let mut checker = spec.work.checker(id);
        self.read_body(framing, sse, |json| checker.message(json))
            .await?;
        checker.finish()
    }

    /// Reads a response head: the status, the body's framing and whether it
    /// is an event stream. A `Connection: close` is an error (the load
    /// measures keep-alive); a 1xx is skipped.
    async fn read_head(&mut self, keep_session: bool) -> Result<(u16, Framing, bool), String> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut headers);
            let parsed = response
                .parse(&self.rx)
                .map_err(|e| format!("bad response head: {e}"))?;
            let httparse::Status::Complete(head_len) = parsed else {
                if self.rx.len() >= MAX_HEAD {
                    return Err(format!("a response head over {MAX_HEAD} bytes"));
                }
                self.fill().await?;
                continue;
            };
            let status = response.code.unwrap_or(0);
            if (100..200).contains(&status) {
                self.rx.advance(head_len);
                continue;
            }
            let mut framing = Framing::Length(0);
            let mut sse = false;
            let mut close = response.version == Some(0);
            for h in response.headers.iter() {
                let value = std::str::from_utf8(h.value).unwrap_or("").trim();
                if h.name.eq_ignore_ascii_case("content-length") {
                    let n = value
                        .parse()
                        .map_err(|_| format!("Content-Length {value:?}"))?;
                    framing = Framing::Length(n);
                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                    if !value.eq_ignore_ascii_case("chunked") {
                        return Err(format!("Transfer-Encoding {value:?}"));
                    }
                    framing = Framing::Chunked;
                } else if h.name.eq_ignore_ascii_case("content-type") {
                    sse = value
                        .get(.."text/event-stream".len())
                        .is_some_and(|t| t.eq_ignore_ascii_case("text/event-stream"));
                } else if h.name.eq_ignore_ascii_case("connection") {
                    close |= value.eq_ignore_ascii_case("close");
                } else if keep_session && h.name.eq_ignore_ascii_case("mcp-session-id") {
                    self.session = Some(value.to_owned());
                }
            }
            if close {
                return Err(format!(
                    "HTTP status {status} with Connection: close (no keep-alive)"
                ));
            }
            self.rx.advance(head_len);
            return Ok((status, framing, sse));
        }
    }

    /// Reads more bytes; the end of input is an error here.
    async fn fill(&mut self) -> Result<(), String> {
        self.rx.reserve(8192);
        let n = self
            .tcp
            .read_buf(&mut self.rx)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
        Ok(())
    }

    /// Reads the body, giving each message to `on_message`: the whole body
    /// when it is JSON, each event's data when it is an event stream.
    async fn read_body(
        &mut self,
        framing: Framing,
        sse: bool,
        mut on_message: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut events = SseParser::default();
        self.message.clear();
        match framing {
            Framing::Length(mut left) => {
                while left > 0 {
                    if self.rx.is_empty() {
                        self.fill().await?;
                    }
                    let n = left.min(self.rx.len());
                    let data = self.rx.split_to(n);
                    left -= n;
                    if sse {
                        events.push(&data, &mut on_message)?;
                    } else {
                        self.message.extend_from_slice(&data);
                    }
                }
            }
            Framing::Chunked => loop {
                let Some(line_end) = find_crlf(&self.rx) else {
                    if self.rx.len() > 1024 {
                        return Err("a chunk size line over 1 KiB".into());
                    }
                    self.fill().await?;
                    continue;
                };
                let line = std::str::from_utf8(&self.rx[..line_end]).unwrap_or("");
                let size_text = line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_text, 16)
                    .map_err(|_| format!("chunk size {size_text:?}"))?;
                self.rx.advance(line_end + 2);
                if size == 0 {
                    // Trailers, up to the empty line.
                    loop {
                        match find_crlf(&self.rx) {
                            Some(0) => {
                                self.rx.advance(2);
                                break;
                            }
                            Some(n) => self.rx.advance(n + 2),
                            None => self.fill().await?,
                        }
                    }
                    break;
                }
                let mut left = size;
                while left > 0 {
                    if self.rx.is_empty() {
                        self.fill().await?;
                    }
                    let n = left.min(self.rx.len());
                    let data = self.rx.split_to(n);
                    left -= n;
                    if sse {
                        events.push(&data, &mut on_message)?;
                    } else {
                        self.message.extend_from_slice(&data);
                    }
                }
                while self.rx.len() < 2 {
                    self.fill().await?;
                }
                if &self.rx[..2] != b"\r\n" {
                    return Err("a chunk not followed by CRLF".into());
                }
                self.rx.advance(2);
            },
        }
        if sse {
            events.finish()
        } else if self.message.is_empty() {
            Ok(())
        } else {
            on_message(&self.message)
        }
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// The events of an event stream: `data:` lines joined by newlines, an
/// event ending at an empty line; comments and the other fields ignored.
#[derive(Debug, Default)]
struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
}

impl SseParser {
    fn push(
        &mut self,
        bytes: &[u8],
        on_event: &mut impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        for &b in bytes {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            if self.line.is_empty() {
                if self.has_data {
                    on_event(&self.data)?;
                }
                self.data.clear();
                self.has_data = false;
            } else if let Some(value) = self.line.strip_prefix(b"data:") {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data
                    .extend_from_slice(value.strip_prefix(b" ").unwrap_or(value));
                self.has_data = true;
            }
            self.line.clear();
        }
        Ok(())
    }

    /// The end of the stream: an event without its empty line is dropped,
    /// as the SSE rules say.
    fn finish(&self) -> Result<(), String> {
        if self.has_data || !self.line.is_empty() {
            return Err("the event stream ended inside an event".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn events(stream: &[u8], chunk: usize) -> Vec<String> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for part in stream.chunks(chunk) {
            p.push(part, &mut |e| {
                out.push(String::from_utf8(e.to_vec()).unwrap());
                Ok(())
            })
            .unwrap();
        }
        p.finish().unwrap();
        out
    }

    #[test]
    fn sse_events_in_any_split() {
        let stream = b": keep-alive\n\nid: 1\ndata: {\"a\":1}\n\ndata:{\"b\":\r\ndata: 2}\r\n\r\nretry: 5\n\n";
        for chunk in [1, 3, 7, stream.len()] {
            assert_eq!(events(stream, chunk), vec!["{\"a\":1}", "{\"b\":\n2}"]);
        }
        let mut p = SseParser::default();
        p.push(b"data: cut", &mut |_| Ok(())).unwrap();
        assert!(p.finish().is_err());
    }

    /// A one-connection server that answers each request with a reply.
    async fn serve_once(replies: Vec<Vec<u8>>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            for reply in replies {
                // Read one request: head, then Content-Length bytes.
                loop {
                    let mut chunk = [0u8; 4096];
                    let n = tcp.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len: usize = text
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .unwrap()
                            .parse()
                            .unwrap();
                        if buf.len() >= end + 4 + len {
                            buf.drain(..end + 4 + len);
                            break;
                        }
                    }
                }
                tcp.write_all(&reply).await.unwrap();
            }
        });
        addr
    }

    fn json_reply(status: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    /// An event stream with one event per message, one chunk per event.
    fn sse_reply(messages: &[&str]) -> Vec<u8> {
        let mut out = String::from(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        );
        for m in messages {
            let event = format!("data: {m}\n\n");
            out.push_str(&format!("{:x}\r\n{event}\r\n", event.len()));
        }
        out.push_str("0\r\n\r\n");
        out.into_bytes()
    }

    const NOTE: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":2,"progress":1}}"#;
    const DONE: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"text":"done"}]}}"#;

    #[tokio::test]
    async fn json_then_chunked_sse_on_one_connection() {
        let echo_reply = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"text":"abc"}]}}"#;
        let addr = serve_once(vec![
            json_reply("200 OK", echo_reply),
            sse_reply(&[NOTE, DONE]),
        ])
        .await;
        let mut c = Connection::open(addr).await.unwrap();
        let echo = HttpSpec::new(addr, Work::echo(3), Era::Modern);
        c.call(&echo, 1).await.unwrap();
        let progress = HttpSpec::new(addr, Work::Progress { steps: 1 }, Era::Modern);
        c.call(&progress, 2).await.unwrap();
    }

    #[tokio::test]
    async fn a_short_event_stream_fails_the_call() {
        let addr = serve_once(vec![sse_reply(&[DONE])]).await;
        let mut c = Connection::open(addr).await.unwrap();
        let progress = HttpSpec::new(addr, Work::Progress { steps: 1 }, Era::Modern);
        let e = c.call(&progress, 2).await.unwrap_err();
        assert!(e.contains("0 progress notifications"), "{e}");
    }

    #[tokio::test]
    async fn an_error_status_fails_with_its_body() {
        let addr = serve_once(vec![json_reply("400 Bad Request", "{}")]).await;
        let mut c = Connection::open(addr).await.unwrap();
        let echo = HttpSpec::new(addr, Work::echo(3), Era::Modern);
        let e = c.call(&echo, 1).await.unwrap_err();
        assert!(e.starts_with("HTTP status 400"), "{e}");
    }

    #[tokio::test]
    async fn legacy_era_initializes_first() {
        let init = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"x","version":"1"}}}"#;
        let mut accepted = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec();
        let echo_reply = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"text":"abc"}]}}"#;
        let replies = vec![
            json_reply("200 OK", init),
            std::mem::take(&mut accepted),
            json_reply("200 OK", echo_reply),
        ];
        let addr = serve_once(replies).await;
        let mut c = Connection::open_for(addr, Era::Legacy).await.unwrap();
        let echo = HttpSpec::new(addr, Work::echo(3), Era::Legacy);
        c.call(&echo, 1).await.unwrap();
    }
}
