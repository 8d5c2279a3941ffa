//! The echo server: every request gets `:status 200` and its body back.
//!
//! - a request without a body: a fixed small body ([`HELLO`]), empty for
//!   `HEAD`;
//! - any method on `/big/N`: N generated octets ([`pattern`]);
//! - anything else: the request body, streamed back as it arrives, with the
//!   request's `content-type`. Received octets are released to the peer's
//!   windows only once `send_data` has taken their echo, so a slow reader
//!   slows the writer down instead of filling our memory.

use std::collections::{HashMap, VecDeque};
use std::io;

use mcpwire_core::h2::{Event, HeaderList, HeadersKind, Role, StreamError, StreamRef};
use mcpwire_core::hpack::Field;
use tokio::net::TcpListener;

use crate::{App, Config, Conn, drive, new_conn};

/// A response head waiting to go out: (name, value) pairs.
type Head = Vec<(Vec<u8>, Vec<u8>)>;

/// The body of the response to a request without a body.
pub const HELLO: &[u8] = b"hello from mcpwire\n";

/// Byte `i` of a generated body: a pattern that catches reordered or
/// dropped chunks.
pub fn pattern(i: u64) -> u8 {
    let x = i.wrapping_mul(2_654_435_761) ^ (i >> 13);
    x as u8
}

/// Fills `buf` with [`pattern`] from offset `at`.
pub fn fill_pattern(buf: &mut [u8], at: u64) {
    for (k, b) in buf.iter_mut().enumerate() {
        *b = pattern(at + k as u64);
    }
}

/// A generated body of `n` octets.
pub fn pattern_body(n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    fill_pattern(&mut v, 0);
    v
}

#[derive(Debug, Default)]
struct Exchange {
    /// The response head, until the core takes it.
    head: Option<Head>,
    /// The request body is echoed (else dropped and released at once).
    echo: bool,
    /// Echo octets waiting for the windows; not yet released.
    pending: VecDeque<u8>,
    /// Octets of a generated body (`/big/N`, GET) still to send.
    generated: Vec<u8>,
    generated_sent: usize,
    /// END_STREAM goes out after what is pending.
    end: bool,
}

/// The echo application for one connection.
#[derive(Debug, Default)]
pub struct EchoServer {
    exchanges: HashMap<StreamRef, Exchange>,
    /// Octets echoed over the connection's life.
    pub echoed: u64,
}

impl EchoServer {
    pub fn new() -> Self {
        Self::default()
    }

    fn request(&mut self, conn: &mut Conn, stream: StreamRef, end_stream: bool) {
        let Some(fields) = conn.headers(stream) else {
            return;
        };
        let ex = Self::exchange(fields, end_stream);
        self.exchanges.insert(stream, ex);
        self.pump(conn, stream);
    }

    /// What the response to a request with `fields` will be.
    fn exchange(fields: HeaderList<'_>, end_stream: bool) -> Exchange {
        let method = fields.get(b":method").unwrap_or_default();
        let path = fields.get(b":path").unwrap_or_default();
        let mut head: Head = vec![(b":status".to_vec(), b"200".to_vec())];
        let mut ex = Exchange::default();
        if let Some(n) = path
            .strip_prefix(b"/big/")
            .and_then(|n| std::str::from_utf8(n).ok())
            .and_then(|n| n.parse::<usize>().ok())
        {
            ex.generated = pattern_body(n);
            head.push((b"content-length".to_vec(), n.to_string().into_bytes()));
            ex.end = true;
        } else if end_stream {
            // No body to echo: every method but HEAD gets a small one, so
            // that the response has DATA (flow-control tests need it).
            head.push((b"content-type".to_vec(), b"text/plain".to_vec()));
            head.push((
                b"content-length".to_vec(),
                HELLO.len().to_string().into_bytes(),
            ));
            if method != b"HEAD" {
                ex.generated = HELLO.to_vec();
            }
            ex.end = true;
        } else {
            if let Some(ct) = fields.get(b"content-type") {
                head.push((b"content-type".to_vec(), ct.to_vec()));
            }
            ex.echo = true;
        }
        ex.head = Some(head);
        ex
    }

    /// Queues what the stream has waiting, as far as the core takes it.
    fn pump(&mut self, conn: &mut Conn, stream: StreamRef) {
        let Some(ex) = self.exchanges.get_mut(&stream) else {
            return;
        };
        match pump_exchange(conn, stream, ex, &mut self.echoed) {
            Ok(true) => {}
            Ok(false) | Err(_) => {
                // Finished, or the stream is gone: octets never echoed still
                // count against the connection window.
                let left = ex.pending.len();
                if left > 0 {
                    conn.release_data(stream, left);
                }
                self.exchanges.remove(&stream);
            }
        }
    }
}

/// Returns whether the exchange still has work.
fn pump_exchange(
    conn: &mut Conn,
    stream: StreamRef,
    ex: &mut Exchange,
    echoed: &mut u64,
) -> Result<bool, StreamError> {
    let body_left = |ex: &Exchange| ex.pending.len() + (ex.generated.len() - ex.generated_sent);
    if let Some(head) = &ex.head {
        let end = ex.end && body_left(ex) == 0;
        let fields = head.iter().map(|(n, v)| Field::new(n, v));
        match conn.send_headers(stream, fields, end) {
            Ok(()) => ex.head = None,
            Err(StreamError::TransmitFull) => return Ok(true),
            Err(e) => return Err(e),
        }
        if end {
            return Ok(false);
        }
    }
    while !ex.pending.is_empty() {
        let (chunk, _) = ex.pending.as_slices();
        let end = ex.end && chunk.len() == body_left(ex);
        let n = conn.send_data(stream, chunk, end)?;
        if n == 0 {
            return Ok(true);
        }
        // The echo is queued: the peer may send that much more.
        conn.release_data(stream, n);
        *echoed += n as u64;
        ex.pending.drain(..n);
        if end && ex.pending.is_empty() {
            return Ok(false);
        }
    }
    while ex.generated_sent < ex.generated.len() {
        let chunk = &ex.generated[ex.generated_sent..];
        let n = conn.send_data(stream, chunk, ex.end)?;
        if n == 0 {
            return Ok(true);
        }
        ex.generated_sent += n;
        if ex.end && ex.generated_sent == ex.generated.len() {
            return Ok(false);
        }
    }
    if ex.end {
        // The request ended after the last echoed octet: an empty
        // END_STREAM.
        return match conn.send_data(stream, &[], true) {
            Ok(_) => Ok(false),
            // No room for the frame yet: SendReady follows.
            Err(StreamError::TransmitFull) => Ok(true),
            Err(e) => Err(e),
        };
    }
    Ok(true)
}

impl App for EchoServer {
    fn event(&mut self, conn: &mut Conn, event: Event) {
        match event {
            Event::Headers {
                stream,
                kind: HeadersKind::Request,
                end_stream,
            } => self.request(conn, stream, end_stream),
            Event::Headers {
                stream,
                kind: HeadersKind::Trailers,
                ..
            } => {
                // Request trailers end the body; they are not echoed.
                if let Some(ex) = self.exchanges.get_mut(&stream) {
                    ex.end = true;
                }
                self.pump(conn, stream);
            }
            Event::SendReady { stream } => self.pump(conn, stream),
            Event::Reset { stream, .. } | Event::Closed { stream } => {
                if let Some(ex) = self.exchanges.remove(&stream)
                    && !ex.pending.is_empty()
                {
                    conn.release_data(stream, ex.pending.len());
                }
            }
            _ => {}
        }
    }

    fn data(&mut self, conn: &mut Conn, stream: StreamRef, bytes: &[u8], end_stream: bool) {
        let Some(ex) = self.exchanges.get_mut(&stream) else {
            // A stream we no longer serve: its octets go back at once.
            conn.release_data(stream, bytes.len());
            return;
        };
        if ex.echo {
            ex.pending.extend(bytes);
            ex.end |= end_stream;
        } else {
            conn.release_data(stream, bytes.len());
        }
        self.pump(conn, stream);
    }

    fn flush(&mut self, conn: &mut Conn) {
        let waiting: Vec<StreamRef> = self
            .exchanges
            .iter()
            .filter(|(_, ex)| ex.head.is_some())
            .map(|(s, _)| *s)
            .collect();
        for stream in waiting {
            self.pump(conn, stream);
        }
    }
}

/// Serves the echo application on every connection `listener` accepts.
pub async fn serve(listener: TcpListener, config: Config) -> io::Result<()> {
    loop {
        let (socket, _) = listener.accept().await?;
        tokio::spawn(async move {
            let mut conn = new_conn(Role::Server, config);
            let mut app = EchoServer::new();
            if let Err(e) = drive(socket, &mut conn, &mut app).await {
                eprintln!("h2-echo-server: connection: {e}");
            }
        });
    }
}
