//! The run-loop contract of `h2::Connection`, as a driver relies on it:
//!
//! - `wants_transmit()` is exact: true exactly when `poll_transmit` with a
//!   non-empty buffer writes something, so `while conn.wants_transmit()`
//!   neither spins nor leaves output behind. Checked at every poll of a
//!   client and a server driven through whole exchanges, with output
//!   buffers from 1 octet up and transmits skipped at seeded moments so
//!   that output piles up;
//! - `Received::stop` says why `recv` stopped, and doing what it asks lets
//!   the rest of the input in: one test per [`Stop`] against raw frames.
// A panic in a test is a failed test, not peer input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use mcpwire_core::h2::frame::{Frame, PREFACE};
use mcpwire_core::h2::{
    Config, Connection, ErrorCode, Event, HeadersKind, Role, Stop, StreamError, StreamRef,
};
use mcpwire_core::hpack::{Encoder, Field};
use mcpwire_core::time::Instant;

/// Small buffers and windows, so that transmit room and flow control stop
/// senders often.
type Conn = Connection<4, 4096, 2048, 8>;

/// A seeded xorshift generator: runs are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Buffer sizes handed to `poll_transmit`: one octet (control frames go
/// through the staging area), odd sizes, a whole frame and more.
const OUT_SIZES: [usize; 6] = [1, 3, 10, 17, 700, 20_000];

/// `poll_transmit` while `wants_transmit`, checking at every call that the
/// one says what the other does. Returns the octets written.
fn transmit(conn: &mut Conn, rng: &mut Rng) -> Vec<u8> {
    let mut wire = Vec::new();
    for _ in 0..100_000 {
        let wants = conn.wants_transmit();
        let mut out = vec![0; OUT_SIZES[rng.below(OUT_SIZES.len())]];
        let n = conn.poll_transmit(&mut out);
        assert_eq!(
            wants,
            n > 0,
            "wants_transmit() said {wants}, poll_transmit wrote {n} octets"
        );
        wire.extend_from_slice(&out[..n]);
        if !wants {
            return wire;
        }
    }
    panic!("poll_transmit never ran dry");
}

/// Windows at the protocol's default (smaller ones would shrink on the
/// SETTINGS ACK), so that bodies larger than them wait for WINDOW_UPDATE.
fn config() -> Config {
    Config {
        initial_window_size: 65_535,
        connection_window_size: 65_535,
        ..Config::default()
    }
}

/// One side of an exchange: its connection, the application on it, and the
/// octets on their way to it.
struct Side {
    conn: Box<Conn>,
    inbox: Vec<u8>,
    /// Bodies still to send: (stream, body, octets sent, head sent).
    sending: Vec<(StreamRef, Vec<u8>, usize, bool)>,
    /// Bodies received, per stream.
    received: HashMap<StreamRef, Vec<u8>>,
    /// Streams that ended (both ways), in order.
    done: Vec<StreamRef>,
    /// Requests a client still has to open: their bodies.
    to_open: Vec<Vec<u8>>,
    closed: bool,
}

impl Side {
    fn new(role: Role) -> Self {
        Side {
            conn: Box::new(Conn::new(role, config(), Instant::ZERO)),
            inbox: Vec::new(),
            sending: Vec::new(),
            received: HashMap::new(),
            done: Vec::new(),
            to_open: Vec::new(),
            closed: false,
        }
    }

    /// Opens the requests it can and sends what the windows and the
    /// transmit buffer take.
    fn send(&mut self) {
        while let Some(body) = self.to_open.last() {
            let Ok(stream) = self.conn.open_stream() else {
                break;
            };
            let fields = [
                Field::new(b":method", b"POST"),
                Field::new(b":scheme", b"http"),
                Field::new(b":path", b"/echo"),
                Field::new(b":authority", b"example"),
            ];
            match self.conn.send_headers(stream, fields, false) {
                Ok(()) => {
                    self.sending.push((stream, body.clone(), 0, true));
                    self.to_open.pop();
                }
                Err(StreamError::TransmitFull | StreamError::ConcurrencyLimit) => {
                    self.conn.reset(stream, ErrorCode::CANCEL).unwrap();
                    break;
                }
                Err(e) => panic!("send_headers: {e:?}"),
            }
        }
        for (stream, body, sent, head) in &mut self.sending {
            if !*head {
                match self
                    .conn
                    .send_headers(*stream, [Field::new(b":status", b"200")], false)
                {
                    Ok(()) => *head = true,
                    Err(StreamError::TransmitFull) => continue,
                    Err(e) => panic!("send_headers: {e:?}"),
                }
            }
            match self.conn.send_data(*stream, &body[*sent..], true) {
                Ok(n) => {
                    *sent += n;
                    if *sent == body.len() {
                        // END_STREAM went out with the last octets.
                        *sent += 1;
                    }
                }
                Err(StreamError::TransmitFull) => {}
                Err(e) => panic!("send_data: {e:?}"),
            }
        }
        self.sending
            .retain(|(_, body, sent, _)| *sent <= body.len());
    }

    /// A server answers each request with its body, once it is complete.
    fn on_data(&mut self, stream: StreamRef, bytes: &[u8], end_stream: bool) {
        let body = self.received.entry(stream).or_default();
        body.extend_from_slice(bytes);
        self.conn.release_data(stream, bytes.len());
        if end_stream && self.conn.role() == Role::Server {
            self.sending.push((stream, body.clone(), 0, false));
        }
    }

    /// Drains `poll_event`; returns how many events it gave.
    fn drain_events(&mut self) -> usize {
        let mut n = 0;
        let role = self.conn.role();
        while let Some(e) = self.conn.poll_event() {
            n += 1;
            match e {
                Event::Headers {
                    stream,
                    kind: HeadersKind::Request,
                    ..
                } => {
                    self.received.insert(stream, Vec::new());
                }
                Event::Headers { .. } | Event::SendReady { .. } | Event::StreamsAvailable => {}
                Event::GoAway { .. } => {}
                Event::Closed { stream } => self.done.push(stream),
                Event::ConnectionClosed { .. } => self.closed = true,
                e => panic!("{role:?}: unexpected event {e:?}"),
            }
        }
        n
    }

    /// Feeds up to `chunk` octets of the inbox as the run loop does,
    /// checking each `Stop`. Output goes to `wire` when this side transmits.
    fn feed(&mut self, chunk: usize, rng: &mut Rng, wire: &mut Vec<u8>) {
        let input: Vec<u8> = self.inbox.drain(..chunk.min(self.inbox.len())).collect();
        let mut at = 0;
        loop {
            let r = self.conn.recv(&input[at..], Instant::ZERO);
            at += r.consumed;
            assert_eq!(r.data.is_some(), r.stop == Stop::Data, "{r:?}");
            if let Some(d) = r.data {
                self.on_data(d.stream, d.bytes, d.end_stream);
            }
            let events = self.drain_events();
            match r.stop {
                Stop::Consumed | Stop::Closed => {
                    assert_eq!(at, input.len());
                    return;
                }
                Stop::Data => {}
                // Reading the events is what lets recv go on.
                Stop::Events => assert!(events > 0, "Stop::Events with no event"),
                Stop::Transmit => {
                    assert!(self.conn.wants_transmit());
                    wire.extend(transmit(&mut self.conn, rng));
                }
            }
            if rng.below(3) == 0 {
                wire.extend(transmit(&mut self.conn, rng));
            }
        }
    }
}

/// Runs a client and a server until both are idle, transmitting at seeded
/// moments (always before going idle), and checks the invariant throughout.
fn exchange(seed: u64, bodies: &[usize]) -> (Side, Side) {
    let mut rng = Rng(seed);
    let mut client = Side::new(Role::Client);
    let mut server = Side::new(Role::Server);
    client.to_open = bodies
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|k| (k * 7 + i) as u8).collect())
        .collect();
    for _ in 0..200_000 {
        let mut moved = false;
        for turn in 0..2 {
            let (me, other) = if turn == 0 {
                (&mut client, &mut server)
            } else {
                (&mut server, &mut client)
            };
            me.send();
            me.drain_events();
            if !me.inbox.is_empty() {
                let chunk = [1, 5, 100, 5000][rng.below(4)];
                let mut wire = Vec::new();
                me.feed(chunk, &mut rng, &mut wire);
                other.inbox.extend(wire);
                moved = true;
            }
            me.send();
            me.drain_events();
            if rng.below(2) == 0 || (me.inbox.is_empty() && other.inbox.is_empty()) {
                let wire = transmit(&mut me.conn, &mut rng);
                moved |= !wire.is_empty();
                other.inbox.extend(wire);
            }
        }
        if !moved && client.to_open.is_empty() {
            return (client, server);
        }
    }
    panic!("the exchange did not settle");
}

#[test]
fn wants_transmit_is_exact_through_requests_with_bodies() {
    for seed in 1..=6 {
        let bodies = [0, 1, 2500, 9000, 40_000, 300, 200_000];
        let (client, server) = exchange(seed, &bodies);
        assert_eq!(client.done.len(), bodies.len(), "seed {seed}");
        assert_eq!(server.done.len(), bodies.len(), "seed {seed}");
        let mut echoed: Vec<usize> = client.received.values().map(Vec::len).collect();
        echoed.sort_unstable();
        let mut sent = bodies.to_vec();
        sent.sort_unstable();
        // A request with an empty body gets an empty answer: no DATA, no
        // entry.
        echoed.retain(|&n| n > 0);
        sent.retain(|&n| n > 0);
        assert_eq!(echoed, sent, "seed {seed}");
        assert!(!client.conn.wants_transmit() && !server.conn.wants_transmit());
    }
}

/// Delivers everything `from` transmits to `to`, and `to`'s answers back
/// until both are quiet.
fn settle(a: &mut Side, b: &mut Side, rng: &mut Rng) {
    for _ in 0..1000 {
        let wire = transmit(&mut a.conn, rng);
        b.inbox.extend(wire);
        let n = b.inbox.len();
        let mut back = Vec::new();
        b.feed(n, rng, &mut back);
        back.extend(transmit(&mut b.conn, rng));
        a.inbox.extend(back);
        let n = a.inbox.len();
        let mut more = Vec::new();
        a.feed(n, rng, &mut more);
        b.inbox.extend(more);
        if !a.conn.wants_transmit() && !b.conn.wants_transmit() && b.inbox.is_empty() {
            return;
        }
    }
    panic!("the pair did not settle");
}

#[test]
fn wants_transmit_is_exact_through_goaway() {
    for seed in 1..=4 {
        let (mut client, mut server) = exchange(seed, &[5000, 100]);
        let mut rng = Rng(seed);
        server.conn.go_away(ErrorCode::NO_ERROR);
        settle(&mut server, &mut client, &mut rng);
        assert!(
            client.closed,
            "seed {seed}: an idle client closes on GOAWAY"
        );
        assert!(
            server.closed,
            "seed {seed}: an idle server closes on its GOAWAY"
        );
        assert!(client.conn.is_closed() && server.conn.is_closed());
    }
}

#[test]
fn wants_transmit_is_exact_through_abort() {
    for seed in 1..=4 {
        let (mut client, mut server) = exchange(seed, &[3000]);
        let mut rng = Rng(seed);
        client
            .conn
            .abort(ErrorCode::INTERNAL_ERROR, "shutting down");
        settle(&mut client, &mut server, &mut rng);
        client.drain_events();
        assert!(client.closed && client.conn.is_closed(), "seed {seed}");
        assert!(server.closed && server.conn.is_closed(), "seed {seed}");
        assert!(server.conn.error().is_some());
    }
}

// ---------------------------------------------------------------------
// One test per Stop
// ---------------------------------------------------------------------

fn frame(f: Frame<'_>) -> Vec<u8> {
    let mut out = vec![0; 16_500];
    let n = f.emit(&mut out).unwrap();
    out.truncate(n);
    out
}

/// A server connection past the handshake: the client preface and an
/// empty SETTINGS read, its own SETTINGS written and acknowledged.
fn server() -> Box<Conn> {
    let mut conn = Box::new(Conn::new(Role::Server, config(), Instant::ZERO));
    let mut input = PREFACE.to_vec();
    input.extend(frame(Frame::Settings {
        ack: false,
        params: &[],
    }));
    input.extend(frame(Frame::Settings {
        ack: true,
        params: &[],
    }));
    let r = conn.recv(&input, Instant::ZERO);
    assert_eq!((r.consumed, r.stop), (input.len(), Stop::Consumed));
    transmit(&mut conn, &mut Rng(7));
    while conn.poll_event().is_some() {}
    conn
}

fn request(stream_id: u32, end_stream: bool) -> Vec<u8> {
    let mut block = vec![0; 200];
    let fields = [
        Field::new(b":method", b"POST"),
        Field::new(b":scheme", b"http"),
        Field::new(b":path", b"/"),
        Field::new(b":authority", b"example"),
    ];
    let n = Encoder::new().encode(fields, &mut block).unwrap();
    frame(Frame::Headers {
        stream_id,
        fragment: &block[..n],
        end_stream,
        end_headers: true,
        pad_len: None,
    })
}

fn ping(payload: u8) -> Vec<u8> {
    frame(Frame::Ping {
        ack: false,
        payload: [payload; 8],
    })
}

#[test]
fn stop_consumed_when_all_input_is_taken() {
    let mut conn = server();
    let input = ping(1);
    // Fed in two pieces, each consumed whole.
    for part in [&input[..4], &input[4..]] {
        let r = conn.recv(part, Instant::ZERO);
        assert_eq!(
            (r.consumed, r.data, r.stop),
            (part.len(), None, Stop::Consumed)
        );
    }
    assert!(conn.wants_transmit(), "the PING is owed its ACK");
}

#[test]
fn stop_data_hands_out_a_piece_and_the_rest_follows() {
    let mut conn = server();
    let mut input = request(1, false);
    let data_at = input.len();
    input.extend(frame(Frame::Data {
        stream_id: 1,
        data: b"hello",
        end_stream: false,
        pad_len: None,
    }));
    input.extend(ping(2));
    let r = conn.recv(&input, Instant::ZERO);
    assert_eq!((r.consumed, r.stop), (data_at, Stop::Events));
    assert!(matches!(conn.poll_event(), Some(Event::Headers { .. })));
    let r = conn.recv(&input[data_at..], Instant::ZERO);
    assert_eq!(r.stop, Stop::Data);
    let data = r.data.expect("a DATA piece");
    assert_eq!((data.bytes, data.end_stream), (&b"hello"[..], false));
    assert_eq!(r.consumed, 9 + 5);
    let rest = &input[data_at + r.consumed..];
    let r = conn.recv(rest, Instant::ZERO);
    assert_eq!((r.consumed, r.stop), (rest.len(), Stop::Consumed));
}

#[test]
fn stop_events_until_the_header_list_is_read() {
    let mut conn = server();
    let first = request(1, true);
    let mut input = first.clone();
    input.extend(request(3, true));
    let r = conn.recv(&input, Instant::ZERO);
    assert_eq!((r.consumed, r.stop), (first.len(), Stop::Events));
    // Feeding again without reading the event takes nothing.
    let r = conn.recv(&input[first.len()..], Instant::ZERO);
    assert_eq!((r.consumed, r.stop), (0, Stop::Events));
    let Some(Event::Headers { stream: a, .. }) = conn.poll_event() else {
        panic!("a Headers event");
    };
    // The event lends the list through the connection.
    let list = conn.headers(a).expect("the list of the event just read");
    assert_eq!(
        (list.get(b":method"), list.get(b":path")),
        (Some(&b"POST"[..]), Some(&b"/"[..]))
    );
    let r = conn.recv(&input[first.len()..], Instant::ZERO);
    assert_eq!(
        (r.consumed, r.stop),
        (input.len() - first.len(), Stop::Consumed)
    );
    assert!(conn.headers(a).is_none(), "recv gave the list back");
    let Some(Event::Headers { stream: b, .. }) = conn.poll_event() else {
        panic!("a Headers event");
    };
    assert_ne!(a, b);
    assert!(conn.headers(a).is_none(), "lent to the other stream only");
    assert!(conn.headers(b).is_some());
    assert_eq!(conn.poll_event(), None);
    assert!(conn.headers(b).is_none(), "poll_event gave the list back");
}

#[test]
fn stop_transmit_when_owed_answers_fill_their_queue() {
    let mut conn = server();
    let pings: Vec<u8> = (0..40).flat_map(ping).collect();
    let mut at = 0;
    let mut acks = 0;
    let mut stops = 0;
    while at < pings.len() {
        let r = conn.recv(&pings[at..], Instant::ZERO);
        at += r.consumed;
        match r.stop {
            Stop::Transmit => {
                stops += 1;
                assert!(r.consumed > 0 || stops > 1);
                let wire = transmit(&mut conn, &mut Rng(stops + 1));
                acks += wire.len() / (9 + 8);
                // Without the transmit, nothing more would go in.
            }
            Stop::Consumed => assert_eq!(at, pings.len()),
            stop => panic!("unexpected {stop:?}"),
        }
    }
    acks += transmit(&mut conn, &mut Rng(99)).len() / (9 + 8);
    assert!(stops >= 2, "40 PINGs overflow a 16-answer queue twice");
    assert_eq!(acks, 40, "every PING acknowledged, in order");
}

#[test]
fn stop_closed_discards_input_after_a_connection_error() {
    let mut conn = server();
    // A DATA frame on stream 0 is a connection error (RFC 9113 §6.1).
    let mut input = frame(Frame::Data {
        stream_id: 0,
        data: b"x",
        end_stream: false,
        pad_len: None,
    });
    input.extend(ping(3));
    let r = conn.recv(&input, Instant::ZERO);
    assert_eq!(
        (r.consumed, r.data, r.stop),
        (input.len(), None, Stop::Closed)
    );
    let late = ping(4);
    let r = conn.recv(&late, Instant::ZERO);
    assert_eq!((r.consumed, r.stop), (17, Stop::Closed));
    assert!(matches!(
        conn.poll_event(),
        Some(Event::ConnectionClosed { error: Some(_) })
    ));
    let wire = transmit(&mut conn, &mut Rng(5));
    assert_eq!(wire[3], 0x7, "the GOAWAY goes out, and nothing after it");
    assert_eq!(wire.len(), 9 + usize::from(wire[2]));
    assert!(conn.is_closed());
}
