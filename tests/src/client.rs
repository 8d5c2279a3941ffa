//! The client: sends a list of requests over one connection, concurrently,
//! and collects the responses.

use std::io;

use mcpwire_core::h2::{ErrorCode, Event, HeadersKind, Role, StreamError, StreamRef};
use mcpwire_core::hpack::Field;
use tokio::net::TcpStream;

use crate::{App, Config, Conn, drive, new_conn};

/// One request to make.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

impl Request {
    pub fn get(path: &str) -> Self {
        Self {
            method: "GET".into(),
            path: path.into(),
            body: Vec::new(),
        }
    }

    pub fn post(path: &str, body: Vec<u8>) -> Self {
        Self {
            method: "POST".into(),
            path: path.into(),
            body,
        }
    }
}

/// What came back for one request.
#[derive(Debug, Clone, Default)]
pub struct Response {
    pub status: Option<u16>,
    pub content_type: Option<Vec<u8>>,
    pub body: Vec<u8>,
    /// The stream or connection failed, and why.
    pub error: Option<String>,
}

#[derive(Debug)]
struct Call {
    request: Request,
    stream: Option<StreamRef>,
    head_sent: bool,
    sent: usize,
    body_done: bool,
    response: Response,
    done: bool,
}

/// The client application for one connection.
#[derive(Debug)]
pub struct Client {
    authority: String,
    calls: Vec<Call>,
}

impl Client {
    pub fn new(authority: &str, requests: Vec<Request>) -> Self {
        let calls = requests
            .into_iter()
            .map(|request| Call {
                request,
                stream: None,
                head_sent: false,
                sent: 0,
                body_done: false,
                response: Response::default(),
                done: false,
            })
            .collect();
        Self {
            authority: authority.into(),
            calls,
        }
    }

    /// The responses, in the order of the requests.
    pub fn into_responses(self) -> Vec<Response> {
        self.calls.into_iter().map(|c| c.response).collect()
    }

    fn call_of(&mut self, stream: StreamRef) -> Option<&mut Call> {
        self.calls
            .iter_mut()
            .find(|c| !c.done && c.stream == Some(stream))
    }

    fn fail_all(&mut self, why: &str) {
        for c in self.calls.iter_mut().filter(|c| !c.done) {
            c.done = true;
            c.response.error = Some(why.to_string());
        }
    }
}

/// Queues what the call can send; an error ends it.
fn push(conn: &mut Conn, authority: &str, call: &mut Call) -> Result<(), StreamError> {
    let Some(stream) = call.stream else {
        return Ok(());
    };
    if !call.head_sent {
        let r = &call.request;
        let content_type: &[u8] = b"application/octet-stream";
        let length = r.body.len().to_string();
        let mut fields = vec![
            Field::new(b":method", r.method.as_bytes()),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", r.path.as_bytes()),
            Field::new(b":authority", authority.as_bytes()),
        ];
        if !r.body.is_empty() {
            fields.push(Field::new(b"content-type", content_type));
            fields.push(Field::new(b"content-length", length.as_bytes()));
        }
        let end = r.body.is_empty();
        match conn.send_headers(stream, fields.iter().copied(), end) {
            Ok(()) => {}
            Err(StreamError::TransmitFull | StreamError::ConcurrencyLimit) => {
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        call.head_sent = true;
        call.body_done = end;
    }
    while !call.body_done {
        let n = match conn.send_data(stream, &call.request.body[call.sent..], true) {
            Ok(n) => n,
            // An empty END_STREAM with no room yet: SendReady follows.
            Err(StreamError::TransmitFull) => break,
            Err(e) => return Err(e),
        };
        call.sent += n;
        if call.sent == call.request.body.len() {
            call.body_done = true;
        } else if n == 0 {
            break;
        }
    }
    Ok(())
}

impl App for Client {
    fn event(&mut self, conn: &mut Conn, event: Event) {
        match event {
            Event::Headers {
                stream,
                kind,
                end_stream,
            } => {
                if let Some(c) = self.call_of(stream) {
                    if kind == HeadersKind::Response
                        && let Some(fields) = conn.headers(stream)
                    {
                        c.response.status = fields
                            .get(b":status")
                            .and_then(|s| std::str::from_utf8(s).ok())
                            .and_then(|s| s.parse().ok());
                        c.response.content_type = fields.get(b"content-type").map(<[u8]>::to_vec);
                    }
                    if end_stream {
                        c.done = true;
                    }
                }
            }
            Event::Reset { stream, code, .. } => {
                if let Some(c) = self.call_of(stream) {
                    c.done = true;
                    c.response.error = Some(format!("stream reset with {code}"));
                }
            }
            Event::Closed { stream } => {
                if let Some(c) = self.call_of(stream) {
                    c.done = true;
                }
            }
            Event::SendReady { stream } => {
                let authority = self.authority.clone();
                if let Some(c) = self.call_of(stream)
                    && let Err(e) = push(conn, &authority, c)
                {
                    c.done = true;
                    c.response.error = Some(format!("send: {e}"));
                }
            }
            Event::GoAway { code, .. } if code != ErrorCode::NO_ERROR => {
                self.fail_all(&format!("peer sent GOAWAY {code}"));
            }
            Event::ConnectionClosed { error } => {
                let why = match error {
                    Some(e) => format!("connection closed: {e}"),
                    None => "connection closed".to_string(),
                };
                self.fail_all(&why);
            }
            _ => {}
        }
    }

    fn data(&mut self, conn: &mut Conn, stream: StreamRef, bytes: &[u8], end_stream: bool) {
        // Consumed at once: the windows reopen as the body arrives.
        conn.release_data(stream, bytes.len());
        if let Some(c) = self.call_of(stream) {
            c.response.body.extend_from_slice(bytes);
            if end_stream {
                c.done = true;
            }
        }
    }

    fn flush(&mut self, conn: &mut Conn) {
        let authority = self.authority.clone();
        for c in self.calls.iter_mut().filter(|c| !c.done) {
            if c.stream.is_none() {
                match conn.open_stream() {
                    Ok(s) => c.stream = Some(s),
                    // All slots busy: the rest wait for a stream to end.
                    Err(StreamError::NoCapacity) => break,
                    Err(e) => {
                        c.done = true;
                        c.response.error = Some(format!("open: {e}"));
                        continue;
                    }
                }
            }
            if c.head_sent && c.body_done {
                continue;
            }
            if let Err(e) = push(conn, &authority, c) {
                c.done = true;
                c.response.error = Some(format!("send: {e}"));
            }
        }
    }

    fn finished(&self) -> bool {
        self.calls.iter().all(|c| c.done)
    }
}

/// Connects to `addr` with prior knowledge and makes `requests` over one
/// connection.
pub async fn run(addr: &str, config: Config, requests: Vec<Request>) -> io::Result<Vec<Response>> {
    let socket = TcpStream::connect(addr).await?;
    let mut conn = new_conn(Role::Client, config);
    let mut app = Client::new(addr, requests);
    drive(socket, &mut conn, &mut app).await?;
    Ok(app.into_responses())
}
