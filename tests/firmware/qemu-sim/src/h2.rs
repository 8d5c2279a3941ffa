//! HTTP/2: our client `Connection` and our server `Connection` over the
//! pipes, with windows much smaller than the bodies.
//!
//! Each request carries `x-tag` (which body bytes to expect), `x-req-len`
//! and `x-resp-len`. The server checks every request byte as it arrives,
//! streams the response body at once (full duplex) and ends the stream with
//! a trailer `x-received` once the whole request is in; the client checks
//! every response byte and the trailer. Bodies are never stored: both sides
//! compute the expected bytes ([`body_byte`]).

use mcpwire_core::h2::{
    Config, Connection, Data, ErrorCode, Event, HeaderList, HeadersKind, Role, StreamError,
    StreamRef,
};
use mcpwire_core::hpack::Field;
use mcpwire_core::time::Instant;

use crate::sim::{ConnPeer, Failed, Outcome, Pair, Rng, body_byte, context, format_u32, parse_u32};
use crate::stack::measured;
use crate::{ensure, fail, failed, text};

/// Stream slots, HPACK table, frame buffers, remembered resets: the sizes a
/// small device would pick.
pub type Conn = Connection<4, 4096, 2048, 16>;
const SLOTS: usize = 4;
/// Each pipe holds this much in flight.
const PIPE: usize = 2048;
/// Stream window of both sides: every body is several times larger.
const WINDOW: u32 = 4096;
/// The response body of stream `tag` uses the bytes of tag `tag + RESPONSE`.
const RESPONSE: u32 = 1000;
/// Seeds of the cut sizes each scenario runs with.
const SEEDS: [u32; 3] = [1, 2, 3];

fn config() -> Config {
    Config {
        initial_window_size: WINDOW,
        // The protocol's initial connection window: the connection level
        // needs WINDOW_UPDATEs too.
        connection_window_size: 65_535,
        ..Config::default()
    }
}

/// What one stream does.
#[derive(Debug, Clone, Copy)]
struct Plan {
    tag: u32,
    request: u32,
    response: u32,
    /// The client resets the stream (CANCEL) after sending this much.
    reset_after: Option<u32>,
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct ClientStream {
    plan: Plan,
    stream: StreamRef,
    head_sent: bool,
    sent: u32,
    received: u32,
    status_ok: bool,
}

#[derive(Debug)]
pub struct Client {
    conn: Conn,
    streams: [Option<ClientStream>; SLOTS],
    queued: [Option<Plan>; SLOTS],
    /// Streams that ended with every byte and the trailer checked.
    completed: u32,
    resets_sent: u32,
    /// Handles of the streams this side reset (dead since).
    reset_handles: [Option<StreamRef>; 2],
}

impl Client {
    fn new() -> Self {
        Self {
            conn: Conn::new(Role::Client, config(), Instant::ZERO),
            streams: [const { None }; SLOTS],
            queued: [None; SLOTS],
            completed: 0,
            resets_sent: 0,
            reset_handles: [None; 2],
        }
    }

    fn start(&mut self, plan: Plan) -> Result<(), Failed> {
        let Some(q) = self.queued.iter_mut().find(|q| q.is_none()) else {
            fail!("client: no room to queue stream {}", plan.tag);
        };
        *q = Some(plan);
        Ok(())
    }

    fn is_idle(&self) -> bool {
        self.streams.iter().all(Option::is_none) && self.queued.iter().all(Option::is_none)
    }

    fn find(&mut self, stream: StreamRef) -> Option<&mut Option<ClientStream>> {
        self.streams
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|s| s.stream == stream))
    }
}

impl ConnPeer for Client {
    fn conn(&mut self) -> &mut Conn {
        &mut self.conn
    }

    fn act(&mut self, rng: &mut Rng, _now: Instant) -> Result<bool, Failed> {
        let mut moved = false;
        // Open queued streams while slots are free.
        for i in 0..SLOTS {
            let Some(plan) = self.queued[i] else { continue };
            let Some(free) = self.streams.iter().position(Option::is_none) else {
                break;
            };
            let stream = match self.conn.open_stream() {
                Ok(s) => s,
                Err(StreamError::NoCapacity) => break,
                Err(e) => fail!("client: open_stream: {e}"),
            };
            self.queued[i] = None;
            self.streams[free] = Some(ClientStream {
                plan,
                stream,
                head_sent: false,
                sent: 0,
                received: 0,
                status_ok: false,
            });
        }
        // One turn per stream per pass, passes until no stream takes more:
        // the streams share the windows and the transmit buffer fairly.
        let mut pass = true;
        while pass {
            pass = false;
            for slot in &mut self.streams {
                let Some(s) = slot.as_mut() else { continue };
                pass |= client_turn(&mut self.conn, s, rng)?;
                if s.plan.reset_after.is_some_and(|at| s.sent >= at) {
                    // Mid-body: the request has more to send.
                    self.conn
                        .reset(s.stream, ErrorCode::CANCEL)
                        .map_err(|e| failed!("client: reset: {e}"))?;
                    let i = self.resets_sent as usize % self.reset_handles.len();
                    self.reset_handles[i] = Some(s.stream);
                    self.resets_sent += 1;
                    *slot = None;
                }
            }
            moved |= pass;
        }
        self.events()?;
        Ok(moved)
    }

    fn events(&mut self) -> Result<(), Failed> {
        while let Some(e) = measured("h2 client poll_event", || self.conn.poll_event()) {
            match e {
                Event::Headers {
                    stream,
                    kind,
                    end_stream,
                } => {
                    let fields = self.conn.headers(stream).unwrap_or(HeaderList::EMPTY);
                    let (status, received) = (fields.get(b":status"), fields.get(b"x-received"));
                    let status_ok = status == Some(&b"200"[..]);
                    let received = received.and_then(parse_u32);
                    let Some(slot) = self.find(stream) else {
                        fail!("client: headers on an unknown stream");
                    };
                    let Some(s) = slot.as_mut() else {
                        continue;
                    };
                    match (kind, end_stream) {
                        (HeadersKind::Response, false) => {
                            ensure!(status_ok, "client: stream {} status not 200", s.plan.tag);
                            s.status_ok = true;
                        }
                        (HeadersKind::Trailers, true) => {
                            let tag = s.plan.tag;
                            ensure!(s.status_ok, "client: stream {tag} trailers before a 200");
                            ensure!(
                                s.received == s.plan.response,
                                "client: stream {tag} ended after {} of {} response bytes",
                                s.received,
                                s.plan.response
                            );
                            ensure!(
                                received == Some(s.plan.request),
                                "client: stream {tag}: server received {received:?} of {}",
                                s.plan.request
                            );
                            *slot = None;
                            self.completed += 1;
                        }
                        _ => fail!("client: unexpected {kind:?} (end {end_stream})"),
                    }
                }
                Event::Reset {
                    stream,
                    code,
                    remote,
                } => {
                    // Only a reset of our own may show up here.
                    ensure!(
                        self.reset_handles.contains(&Some(stream)),
                        "client: stream reset with {code} (remote {remote})"
                    );
                }
                Event::ConnectionClosed { error } => {
                    fail!("client: connection closed ({error:?})")
                }
                Event::GoAway { code, .. } => fail!("client: GOAWAY {code}"),
                _ => {}
            }
        }
        Ok(())
    }

    fn data(&mut self, Data { stream, bytes, .. }: Data<'_>) -> Result<(), Failed> {
        let Some(Some(s)) = self.find(stream) else {
            fail!("client: data on an unknown stream");
        };
        let tag = s.plan.tag + RESPONSE;
        for (i, &b) in bytes.iter().enumerate() {
            let at = s.received + i as u32;
            ensure!(
                b == body_byte(tag, at),
                "client: stream {} response byte {at} differs",
                s.plan.tag
            );
        }
        s.received += bytes.len() as u32;
        ensure!(
            s.received <= s.plan.response,
            "client: stream {} response too long",
            s.plan.tag
        );
        Ok(())
    }
}

/// Sends the next chunk (of random size) of the body bytes of `tag`, from
/// `*sent` on, unless `total` went out; with END_STREAM on the last chunk
/// when `end`. True when the stream took anything.
fn send_chunk(
    conn: &mut Conn,
    rng: &mut Rng,
    stream: StreamRef,
    tag: u32,
    sent: &mut u32,
    total: u32,
    end: bool,
) -> Result<bool, StreamError> {
    if *sent >= total {
        return Ok(false);
    }
    let mut chunk = [0u8; 512];
    let len = (rng.range(1, chunk.len()) as u32).min(total - *sent);
    for (i, b) in chunk[..len as usize].iter_mut().enumerate() {
        *b = body_byte(tag, *sent + i as u32);
    }
    let last = *sent + len == total;
    let n = measured("h2 send_data", || {
        conn.send_data(stream, &chunk[..len as usize], end && last)
    })?;
    *sent += n as u32;
    Ok(n > 0)
}

/// A client stream's turn: its head, or the next chunk of its body (up to
/// the reset point of a stream to reset). True when anything went out.
fn client_turn(conn: &mut Conn, s: &mut ClientStream, rng: &mut Rng) -> Result<bool, Failed> {
    if !s.head_sent {
        let mut digits = [[0u8; 10]; 3];
        let [a, b, c] = &mut digits;
        let fields = [
            Field::new(b":method", b"POST"),
            Field::new(b":scheme", b"http"),
            Field::new(b":path", b"/sim/echo"),
            Field::new(b":authority", b"mcu.local"),
            Field::new(b"x-tag", format_u32(s.plan.tag, a)),
            Field::new(b"x-req-len", format_u32(s.plan.request, b)),
            Field::new(b"x-resp-len", format_u32(s.plan.response, c)),
        ];
        return match measured("h2 send_headers", || {
            conn.send_headers(s.stream, fields, false)
        }) {
            Ok(()) => {
                s.head_sent = true;
                Ok(true)
            }
            Err(StreamError::TransmitFull | StreamError::ConcurrencyLimit) => Ok(false),
            Err(e) => Err(failed!("client: send_headers: {e}")),
        };
    }
    let (tag, reset_after) = (s.plan.tag, s.plan.reset_after);
    let limit = reset_after.unwrap_or(s.plan.request);
    send_chunk(
        conn,
        rng,
        s.stream,
        tag,
        &mut s.sent,
        limit,
        reset_after.is_none(),
    )
    .map_err(|e| failed!("client: stream {tag} send_data: {e}"))
}

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct ServerStream {
    stream: StreamRef,
    tag: u32,
    request: u32,
    response: u32,
    got: u32,
    head_sent: bool,
    sent: u32,
    request_ended: bool,
}

#[derive(Debug)]
pub struct Server {
    conn: Conn,
    streams: [Option<ServerStream>; SLOTS],
    /// Streams the client reset while their request was arriving.
    resets_seen: u32,
    /// Streams whose response (trailers included) went out.
    answered: u32,
}

impl Server {
    fn new() -> Self {
        Self {
            conn: Conn::new(Role::Server, config(), Instant::ZERO),
            streams: [const { None }; SLOTS],
            resets_seen: 0,
            answered: 0,
        }
    }

    fn find(&mut self, stream: StreamRef) -> Option<&mut Option<ServerStream>> {
        self.streams
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|s| s.stream == stream))
    }

    fn request(stream: StreamRef, fields: HeaderList<'_>) -> Result<ServerStream, Failed> {
        ensure!(
            fields.get(b":path") == Some(&b"/sim/echo"[..]),
            "server: wrong :path"
        );
        let number = |name: &[u8]| fields.get(name).and_then(parse_u32);
        let (Some(tag), Some(request), Some(response)) = (
            number(b"x-tag"),
            number(b"x-req-len"),
            number(b"x-resp-len"),
        ) else {
            fail!("server: request without x-tag, x-req-len, x-resp-len");
        };
        Ok(ServerStream {
            stream,
            tag,
            request,
            response,
            got: 0,
            head_sent: false,
            sent: 0,
            request_ended: false,
        })
    }
}

impl ConnPeer for Server {
    fn conn(&mut self) -> &mut Conn {
        &mut self.conn
    }

    fn act(&mut self, rng: &mut Rng, _now: Instant) -> Result<bool, Failed> {
        let mut moved = false;
        let mut pass = true;
        while pass {
            pass = false;
            for slot in &mut self.streams {
                let Some(s) = slot.as_mut() else { continue };
                let (turn, done) = server_turn(&mut self.conn, s, rng)?;
                pass |= turn;
                if done {
                    *slot = None;
                    self.answered += 1;
                }
            }
            moved |= pass;
        }
        self.events()?;
        Ok(moved)
    }

    fn events(&mut self) -> Result<(), Failed> {
        while let Some(e) = measured("h2 server poll_event", || self.conn.poll_event()) {
            match e {
                Event::Headers {
                    stream,
                    kind: HeadersKind::Request,
                    end_stream,
                } => {
                    ensure!(!end_stream, "server: request without a body");
                    let fields = self.conn.headers(stream).unwrap_or(HeaderList::EMPTY);
                    let s = Self::request(stream, fields)?;
                    let Some(free) = self.streams.iter_mut().find(|s| s.is_none()) else {
                        fail!("server: more streams than slots");
                    };
                    *free = Some(s);
                }
                Event::Headers { kind, .. } => fail!("server: unexpected {kind:?}"),
                Event::Reset {
                    stream,
                    code,
                    remote,
                } => {
                    let Some(slot) = self.find(stream) else {
                        fail!("server: reset of an unknown stream");
                    };
                    if let Some(s) = slot.as_ref() {
                        ensure!(
                            remote && code == ErrorCode::CANCEL,
                            "server: stream {} reset with {code} (remote {remote})",
                            s.tag
                        );
                        ensure!(
                            s.got < s.request,
                            "server: stream {} reset after its whole request",
                            s.tag
                        );
                    }
                    *slot = None;
                    self.resets_seen += 1;
                }
                Event::ConnectionClosed { error } => {
                    fail!("server: connection closed ({error:?})")
                }
                Event::GoAway { code, .. } => fail!("server: GOAWAY {code}"),
                _ => {}
            }
        }
        Ok(())
    }

    fn data(&mut self, data: Data<'_>) -> Result<(), Failed> {
        let (stream, bytes, end) = (data.stream, data.bytes, data.end_stream);
        let Some(Some(s)) = self.find(stream) else {
            fail!("server: data on an unknown stream");
        };
        for (i, &b) in bytes.iter().enumerate() {
            let at = s.got + i as u32;
            ensure!(
                b == body_byte(s.tag, at),
                "server: stream {} request byte {at} differs",
                s.tag
            );
        }
        s.got += bytes.len() as u32;
        ensure!(
            s.got <= s.request,
            "server: stream {} request too long",
            s.tag
        );
        if end {
            ensure!(
                s.got == s.request,
                "server: stream {} request ended after {} of {} bytes",
                s.tag,
                s.got,
                s.request
            );
            s.request_ended = true;
        }
        Ok(())
    }
}

/// A server stream's turn: its response head, or the next chunk of its
/// body, or its trailers once the whole request is in. Returns whether
/// anything went out and whether the stream is done.
fn server_turn(
    conn: &mut Conn,
    s: &mut ServerStream,
    rng: &mut Rng,
) -> Result<(bool, bool), Failed> {
    if !s.head_sent {
        let mut digits = [0u8; 10];
        let fields = [
            Field::new(b":status", b"200"),
            Field::new(b"x-tag", format_u32(s.tag, &mut digits)),
        ];
        return match measured("h2 send_headers", || {
            conn.send_headers(s.stream, fields, false)
        }) {
            Ok(()) => {
                s.head_sent = true;
                Ok((true, false))
            }
            Err(StreamError::TransmitFull) => Ok((false, false)),
            Err(e) => Err(failed!("server: send_headers: {e}")),
        };
    }
    // The response streams while the request arrives; only the trailers
    // wait for the whole request (an earlier END_STREAM would cut the
    // request off).
    let tag = s.tag;
    if s.sent < s.response {
        let moved = send_chunk(
            conn,
            rng,
            s.stream,
            tag + RESPONSE,
            &mut s.sent,
            s.response,
            false,
        )
        .map_err(|e| failed!("server: stream {tag} send_data: {e}"))?;
        return Ok((moved, false));
    }
    if !s.request_ended {
        return Ok((false, false));
    }
    let mut digits = [0u8; 10];
    let trailers = [Field::new(b"x-received", format_u32(s.got, &mut digits))];
    match measured("h2 send_headers", || {
        conn.send_headers(s.stream, trailers, true)
    }) {
        Ok(()) => Ok((true, true)),
        Err(StreamError::TransmitFull) => Ok((false, false)),
        Err(e) => Err(failed!("server: trailers: {e}")),
    }
}

pub type H2Pair = Pair<Client, Server, PIPE>;

fn healthy(p: &H2Pair) -> Result<(), Failed> {
    ensure!(
        p.client.conn.error().is_none() && p.server.conn.error().is_none(),
        "connection error: client {:?}, server {:?}",
        p.client.conn.error(),
        p.server.conn.error()
    );
    ensure!(
        !p.client.conn.is_closed() && !p.server.conn.is_closed(),
        "a connection closed"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

/// One request of 24000 bytes and its 20000-byte response through windows
/// of 4096: WINDOW_UPDATEs must flow both ways, every byte checked.
pub fn flow_control() -> Outcome {
    let (mut updates_up, mut updates_down, mut bytes) = (0, 0, 0);
    for seed in SEEDS {
        let mut p = H2Pair::new(Client::new(), Server::new(), seed);
        let plan = Plan {
            tag: 1,
            request: 24_000,
            response: 20_000,
            reset_after: None,
        };
        p.client.start(plan)?;
        p.run()
            .map_err(|Failed| context(format_args!("seed {seed}")))?;
        healthy(&p)?;
        ensure!(
            p.client.completed == 1 && p.server.answered == 1 && p.client.is_idle(),
            "seed {seed}: stream did not complete"
        );
        let (up, down) = (p.up.frames(), p.down.frames());
        ensure!(
            up.window_updates() > 0 && down.window_updates() > 0,
            "seed {seed}: no WINDOW_UPDATE (client {}, server {})",
            up.window_updates(),
            down.window_updates()
        );
        updates_up += up.window_updates();
        updates_down += down.window_updates();
        bytes += p.up.total() + p.down.total();
    }
    Ok(text!(
        "24000 B up, 20000 B down, window 4096, seeds {}: {updates_down}+{updates_up} WINDOW_UPDATE, {bytes} B cut down to 1 B",
        SEEDS.len()
    ))
}

/// Three streams at once with uneven bodies, a fourth reset by the client
/// (CANCEL) mid-body; then a new stream on the same connection.
pub fn interleaved_and_reset() -> Outcome {
    let (mut switches, mut resets) = (0, 0);
    for seed in SEEDS {
        let mut p = H2Pair::new(Client::new(), Server::new(), seed);
        let plans = [(2, 9000, 11000), (3, 13000, 7000), (4, 6000, 15000)];
        for (tag, request, response) in plans {
            p.client.start(Plan {
                tag,
                request,
                response,
                reset_after: None,
            })?;
        }
        p.client.start(Plan {
            tag: 5,
            request: 20000,
            response: 3000,
            reset_after: Some(5000),
        })?;
        p.run()
            .map_err(|Failed| context(format_args!("seed {seed}")))?;
        healthy(&p)?;
        ensure!(
            p.client.completed == 3 && p.client.resets_sent == 1 && p.client.is_idle(),
            "seed {seed}: {} streams completed, {} reset",
            p.client.completed,
            p.client.resets_sent
        );
        ensure!(
            p.server.resets_seen == 1,
            "seed {seed}: the server saw {} resets",
            p.server.resets_seen
        );
        ensure!(
            p.up.frames().resets() == 1,
            "seed {seed}: {} RST_STREAM sent",
            p.up.frames().resets()
        );
        ensure!(
            p.up.frames().data_switches >= 20 && p.down.frames().data_switches >= 20,
            "seed {seed}: streams did not interleave (DATA stream switches: {} up, {} down)",
            p.up.frames().data_switches,
            p.down.frames().data_switches
        );
        switches += p.up.frames().data_switches + p.down.frames().data_switches;
        resets += p.server.resets_seen;
        // The connection goes on serving.
        p.client.start(Plan {
            tag: 6,
            request: 10000,
            response: 10000,
            reset_after: None,
        })?;
        p.run()
            .map_err(|Failed| context(format_args!("seed {seed}, after the reset")))?;
        healthy(&p)?;
        ensure!(
            p.client.completed == 4 && p.server.answered == 4,
            "seed {seed}: the stream after the reset did not complete"
        );
    }
    Ok(text!(
        "3 streams interleaved ({switches} DATA stream switches), {resets} CANCEL mid-body (one a seed) seen by the server, next stream served; seeds {}",
        SEEDS.len()
    ))
}
