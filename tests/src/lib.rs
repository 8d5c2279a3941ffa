//! A small tokio driver for the sans-IO HTTP/2 [`Connection`] of
//! `mcpwire-core`, and the two applications the interop tests run on it: an
//! echo server ([`echo`]) and a client ([`client`]).
//!
//! The driver only moves bytes and time (the run loop of the core's
//! connection docs): it reads into a buffer and feeds [`Connection::recv`]
//! until the input is consumed, hands DATA and events to an [`App`], pulls
//! [`Connection::poll_transmit`] into a write buffer and writes it, and
//! sleeps until [`Connection::poll_timeout`]. Reading and writing run
//! concurrently, so a peer that writes before it reads cannot deadlock us.
//! The protocol lives in the core.
//!
//! `MCPWIRE_TRACE=1` prints every `recv`, `poll_transmit` and event to
//! stderr, with microseconds since the process started.

use std::io;
use std::sync::OnceLock;

use mcpwire_core::drive::{Feed, Step};
use mcpwire_core::h2::{self, ErrorCode, Role, StreamRef};
use mcpwire_core::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub mod client;
pub mod echo;

pub use mcpwire_core::h2::Config;

/// The connection type every driver here uses: 128 stream slots, a 4 KiB
/// HPACK table, 16 KiB buffers and the last 64 resets remembered.
pub type Conn = h2::Connection<128, 4096, 16384, 64>;

/// The application on top of a connection.
pub trait App {
    /// An event from the connection. The fields of an
    /// [`h2::Event::Headers`] are read with
    /// [`conn.headers(stream)`](h2::Connection::headers), before the next
    /// `poll_event` or `recv` gives them back.
    fn event(&mut self, conn: &mut Conn, event: h2::Event);
    /// A piece of DATA payload. Release it with
    /// [`Connection::release_data`](h2::Connection::release_data) once consumed.
    fn data(&mut self, conn: &mut Conn, stream: StreamRef, bytes: &[u8], end_stream: bool);
    /// Called before each transmit: queue what is waiting to be sent.
    fn flush(&mut self, _conn: &mut Conn) {}
    /// The application has nothing more to do: the driver sends GOAWAY and
    /// returns once it is written.
    fn finished(&self) -> bool {
        false
    }
}

/// The core's clock: microseconds since the first call in this process.
pub fn now() -> Instant {
    let origin = *origin();
    Instant::from_micros(u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX))
}

fn origin() -> &'static std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now)
}

fn to_tokio(at: Instant) -> tokio::time::Instant {
    let at = *origin() + std::time::Duration::from_micros(at.as_micros());
    tokio::time::Instant::from_std(at)
}

/// A new connection on the heap (it holds its buffers inline).
pub fn new_conn(role: Role, config: Config) -> Box<Conn> {
    Box::new(Conn::new(role, config, now()))
}

/// Stop pulling frames from the core while this much is waiting for the
/// socket: the core's own buffer then fills and `send_data` takes less.
const WRITE_HIGH: usize = 64 << 10;
const READ_BUF: usize = 64 << 10;
const TRANSMIT_CHUNK: usize = 16 << 10;

/// `MCPWIRE_TRACE=1` prints events and I/O sizes to stderr.
fn trace_on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("MCPWIRE_TRACE").is_some_and(|v| v == "1"))
}

macro_rules! trace {
    ($($arg:tt)*) => {
        if trace_on() {
            eprintln!("{:>10} {}", now().as_micros(), format_args!($($arg)*));
        }
    };
}

fn drain_events<A: App>(conn: &mut Conn, app: &mut A) {
    while let Some(e) = conn.poll_event() {
        trace!("event {e:?}{}", TraceHeaders(conn, e));
        app.event(conn, e);
    }
}

/// The fields of a `Headers` event, for the trace.
struct TraceHeaders<'a>(&'a Conn, h2::Event);

impl std::fmt::Display for TraceHeaders<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let h2::Event::Headers { stream, .. } = self.1 else {
            return Ok(());
        };
        f.write_str(" [")?;
        for field in self.0.headers(stream).unwrap_or(h2::HeaderList::EMPTY) {
            write!(
                f,
                " {}: {}",
                String::from_utf8_lossy(field.name),
                String::from_utf8_lossy(field.value)
            )?;
        }
        f.write_str(" ]")
    }
}

/// Appends everything the core has to send to `out`, up to `limit` bytes
/// waiting.
fn transmit<A: App>(conn: &mut Conn, app: &mut A, out: &mut Vec<u8>, limit: usize) {
    while out.len() < limit {
        // An emptied transmit buffer wakes blocked streams (SendReady): the
        // application queues more, and the loop goes on while the core has
        // something to write.
        app.flush(conn);
        drain_events(conn, app);
        if !conn.wants_transmit() {
            break;
        }
        let start = out.len();
        out.resize(start + TRANSMIT_CHUNK, 0);
        let n = conn.poll_transmit(&mut out[start..]);
        out.truncate(start + n);
        trace!("poll_transmit -> {n}");
        if n == 0 {
            break;
        }
    }
}

/// Feeds `input` to the core until it is consumed (the run loop of
/// [`mcpwire_core::drive`]).
fn feed<A: App>(conn: &mut Conn, app: &mut A, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    let mut feed = Feed::new(input);
    while !feed.is_done() {
        let r = conn.recv(feed.rest(), now());
        trace!(
            "recv {} -> consumed {} data {:?}",
            feed.rest().len(),
            r.consumed,
            r.data.map(|d| (d.stream, d.bytes.len(), d.end_stream))
        );
        if let Some(d) = r.data {
            app.data(conn, d.stream, d.bytes, d.end_stream);
        }
        let step = feed.advance(r.consumed, conn.wants_transmit());
        drain_events(conn, app);
        match step {
            Step::Consumed | Step::Done => {}
            // The core waits for its control frames (PING acknowledgements,
            // resets) to go out before it reads more.
            Step::Transmit => transmit(conn, app, out, usize::MAX),
            Step::Wait | Step::Stuck => {
                return Err(io::Error::other(format!(
                    "the core consumes no input ({} octets left): {conn:?}",
                    feed.rest().len()
                )));
            }
        }
    }
    Ok(())
}

/// Runs one connection over `socket` until it is closed, the peer goes
/// away, or the application is finished.
pub async fn drive<A: App>(mut socket: TcpStream, conn: &mut Conn, app: &mut A) -> io::Result<()> {
    socket.set_nodelay(true)?;
    let (mut rd, mut wr) = socket.split();
    let mut rbuf = vec![0u8; READ_BUF];
    let mut out: Vec<u8> = Vec::with_capacity(WRITE_HIGH + TRANSMIT_CHUNK);
    let mut written = 0;
    let mut eof = false;
    let mut goaway_sent = false;
    loop {
        if written == out.len() {
            out.clear();
            written = 0;
        }
        if app.finished() && !goaway_sent {
            goaway_sent = true;
            conn.go_away(ErrorCode::NO_ERROR);
        }
        transmit(conn, app, &mut out, WRITE_HIGH);
        // Done once everything is written and the connection is over, the
        // peer went away, or our GOAWAY is out after the application ended.
        if written == out.len() && (conn.is_closed() || eof || goaway_sent) {
            break;
        }
        let deadline = conn.poll_timeout().map(to_tokio);
        tokio::select! {
            r = rd.read(&mut rbuf), if !eof => match r {
                Ok(0) => {
                    eof = true;
                    conn.recv_eof();
                    drain_events(conn, app);
                }
                Ok(n) => feed(conn, app, &rbuf[..n], &mut out)?,
                Err(e) => {
                    conn.recv_eof();
                    drain_events(conn, app);
                    return Err(e);
                }
            },
            r = wr.write(&out[written..]), if written < out.len() => {
                written += r?;
            }
            () = sleep_until(deadline), if deadline.is_some() => {
                conn.handle_timeout(now());
                drain_events(conn, app);
            }
        }
    }
    // Let the peer read what we wrote before the socket goes away.
    let _ = wr.shutdown().await;
    Ok(())
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
