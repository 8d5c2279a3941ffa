//! The HTTP/2 simulation harness: a client and a server [`Connection`] joined
//! by in-memory byte pipes on a virtual clock, after quinn-proto's test `Pair`
//! and str0m's netem.
//!
//! - Each direction is an ordered byte stream (TCP): what one side transmits
//!   arrives after `latency`, and a seeded splitter cuts it at arbitrary
//!   points, down to one byte at a time ([`Split`]).
//! - Each side is driven by the run loop of the connection's module docs:
//!   `recv` until the input is consumed (with `poll_transmit` when a `recv`
//!   makes no progress), `poll_event` drained after every call,
//!   `poll_transmit` until it gives 0, `handle_timeout` when `poll_timeout`
//!   passes. The harness counts recv stalls and events that only
//!   `poll_transmit` produced (`stalls`, `late_events`), for the record;
//!   [`Pair::strict`] mode adds checks on what the application sees.
//! - DATA is released at once, lazily (at seeded moments, and whenever the
//!   pair would otherwise go idle) or never ([`Release`]), to check that
//!   windows reopen only when the application consumed the bytes.
//! - The connections' [`Storage`] is a type parameter: [`InlineStorage`] by
//!   default, or [`GrowingStorage`], whose stream slots, remembered resets
//!   and HPACK table grow on demand as with a driver that has an allocator.
//!
//! [`super::peer`] is the other half of the tests: one connection driven by a
//! scripted peer that writes and reads raw frames.
//!

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::time::Duration;

use mcpwire_core::h2::{
    Config, Connection, ConnectionError, ErrorCode, Event, FrameBuffer, HeadersKind, InlineStorage,
    Role, Storage, StreamError, StreamRef,
};

/// The order in which the harness walks its maps, and so the order in which
/// the application serves its streams: fixed by default, so that a run is
/// reproducible; random per run with `MCPWIRE_SIM_SHUFFLE=1`, which explores
/// other orders (it found two wake-up bugs).
#[derive(Clone, Debug)]
pub struct SimOrder(Option<RandomState>);

impl Default for SimOrder {
    fn default() -> Self {
        Self(std::env::var_os("MCPWIRE_SIM_SHUFFLE").map(|_| RandomState::new()))
    }
}

impl BuildHasher for SimOrder {
    type Hasher = DefaultHasher;
    fn build_hasher(&self) -> DefaultHasher {
        match &self.0 {
            Some(random) => random.build_hasher(),
            None => DefaultHasher::new(),
        }
    }
}

pub type Map<K, V> = HashMap<K, V, SimOrder>;
pub type Set<K> = HashSet<K, SimOrder>;
use mcpwire_core::hpack::Field;
use mcpwire_core::time::Instant;

pub use super::records::GrowingRecords;

// ---------------------------------------------------------------------------
// Storage
// ---------------------------------------------------------------------------

/// What the harness can build its connections with: any [`Storage`] it can
/// make from nothing.
pub trait SimStorage<const B: usize>: Storage<B> + Default {}

impl<const B: usize, St: Storage<B> + Default> SimStorage<B> for St {}

/// The three frame buffers on the heap and always held (like
/// [`InlineStorage`]), with the stream slots, the remembered resets and the
/// HPACK table in [`GrowingRecords`]: slots are added only when all are
/// taken, the table grows from 0 octets.
#[derive(Debug)]
pub struct GrowingStorage<const B: usize> {
    block: Vec<u8>,
    headers: Vec<u8>,
    transmit: Vec<u8>,
}

impl<const B: usize> Default for GrowingStorage<B> {
    fn default() -> Self {
        Self {
            block: vec![0; B],
            headers: vec![0; B],
            transmit: vec![0; B],
        }
    }
}

impl<const B: usize> Storage<B> for GrowingStorage<B> {
    type Records<T: Default, const N: usize> = GrowingRecords<T, N>;

    fn acquire(&mut self, _: FrameBuffer) -> bool {
        true
    }

    fn release(&mut self, _: FrameBuffer) {}

    fn is_held(&self, _: FrameBuffer) -> bool {
        true
    }

    fn get(&self, which: FrameBuffer) -> &[u8] {
        match which {
            FrameBuffer::Block => &self.block,
            FrameBuffer::Headers => &self.headers,
            FrameBuffer::Transmit => &self.transmit,
        }
    }

    fn get_mut(&mut self, which: FrameBuffer) -> &mut [u8] {
        match which {
            FrameBuffer::Block => &mut self.block,
            FrameBuffer::Headers => &mut self.headers,
            FrameBuffer::Transmit => &mut self.transmit,
        }
    }

    fn block_and_headers(&mut self) -> (&mut [u8], &mut [u8]) {
        (&mut self.block, &mut self.headers)
    }
}

// ---------------------------------------------------------------------------
// Randomness
// ---------------------------------------------------------------------------

/// A small seeded generator (xorshift64*): the tests need reproducible cuts,
/// not good randomness.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // Never zero, and different seeds differ from the first draw on.
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03 | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A value in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// The seeds every scenario runs with.
pub const SEEDS: [u64; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

/// Deterministic body bytes: stream `tag`, offset `i`. A byte handed to the
/// wrong stream or at the wrong offset shows up in a comparison.
pub fn body(tag: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(tag.wrapping_add(0x5eed));
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

// ---------------------------------------------------------------------------
// Owned events
// ---------------------------------------------------------------------------

/// A decoded header list, owned.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Builds an owned field list from string pairs.
pub fn fields(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// Borrows an owned list as what `send_headers` takes.
pub fn as_fields(f: &Fields) -> Vec<Field<'_>> {
    f.iter().map(|(n, v)| Field::new(n, v)).collect()
}

/// The value of `name` in an owned list, as text.
pub fn get<'a>(f: &'a Fields, name: &str) -> Option<&'a str> {
    f.iter()
        .find(|(n, _)| n == name.as_bytes())
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

/// A POST request head.
pub fn request(path: &str, extra: &[(&str, &str)]) -> Fields {
    let mut f = fields(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "sim"),
    ]);
    f.extend(fields(extra));
    f
}

/// A response head.
pub fn response(status: &str, extra: &[(&str, &str)]) -> Fields {
    let mut f = fields(&[(":status", status)]);
    f.extend(fields(extra));
    f
}

/// An [`Event`] as the harness logs it, with the header list the
/// connection lent for it (so that a test can assert on it afterwards).
#[derive(Debug, Clone, PartialEq)]
pub enum Ev {
    Headers {
        stream: StreamRef,
        kind: HeadersKind,
        fields: Fields,
        end_stream: bool,
    },
    /// Not an event of the connection: DATA with `end_stream` was handed out.
    DataEnd {
        stream: StreamRef,
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
    StreamsAvailable,
    GoAway {
        last_stream_id: u32,
        code: ErrorCode,
    },
    PingAck {
        payload: [u8; 8],
    },
    ConnectionClosed {
        error: Option<ConnectionError>,
    },
}

impl Ev {
    /// The next event of `conn`, with its header list read through
    /// [`Connection::headers`].
    pub fn poll<const S: usize, const T: usize, const B: usize, const R: usize, St: Storage<B>>(
        conn: &mut Connection<S, T, B, R, St>,
    ) -> Option<Ev> {
        Some(match conn.poll_event()? {
            Event::Headers {
                stream,
                kind,
                end_stream,
            } => Ev::Headers {
                stream,
                kind,
                fields: conn
                    .headers(stream)
                    .expect("a Headers event lends its list")
                    .iter()
                    .map(|f| (f.name.to_vec(), f.value.to_vec()))
                    .collect(),
                end_stream,
            },
            Event::Reset {
                stream,
                code,
                remote,
            } => Ev::Reset {
                stream,
                code,
                remote,
            },
            Event::Closed { stream } => Ev::Closed { stream },
            Event::SendReady { stream } => Ev::SendReady { stream },
            Event::StreamsAvailable => Ev::StreamsAvailable,
            Event::GoAway {
                last_stream_id,
                code,
            } => Ev::GoAway {
                last_stream_id,
                code,
            },
            Event::PingAck { payload } => Ev::PingAck { payload },
            Event::ConnectionClosed { error } => Ev::ConnectionClosed { error },
        })
    }

    /// The stream the event is about, if any.
    pub fn stream(&self) -> Option<StreamRef> {
        match *self {
            Ev::Headers { stream, .. }
            | Ev::DataEnd { stream }
            | Ev::Reset { stream, .. }
            | Ev::Closed { stream }
            | Ev::SendReady { stream } => Some(stream),
            _ => None,
        }
    }

    /// Whether the event ends the stream's handle (Reset or Closed).
    pub fn is_terminal(&self) -> bool {
        matches!(self, Ev::Reset { .. } | Ev::Closed { .. })
    }
}

// ---------------------------------------------------------------------------
// Network
// ---------------------------------------------------------------------------

/// How the bytes of one direction are cut before `recv` sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Everything that has arrived, in one slice.
    Whole,
    /// Seeded cuts at arbitrary points, many of them tiny.
    Random,
    /// One byte per `recv`.
    ByteAtATime,
}

/// Every delivery mode a scenario runs with.
pub const SPLITS: [Split; 3] = [Split::Whole, Split::Random, Split::ByteAtATime];

/// When the application hands received DATA back with `release_data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// As soon as `recv` hands it out.
    Immediate,
    /// At seeded moments, and whenever the pair would otherwise go idle.
    Lazy,
    /// Not until the mode changes.
    Never,
}

/// What the application does with DATA it has not released when the stream
/// dies (a Reset or Closed event, or its own reset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDeath {
    /// Still releases it, on the dead handle.
    Release,
    /// Drops it: the connection is then the one to return it.
    Drop,
}

/// One direction of the byte stream.
#[derive(Debug, Default)]
struct Pipe {
    /// Segments in order, each with the time it arrives.
    segments: VecDeque<(Instant, Vec<u8>)>,
    last_arrival: Instant,
}

impl Pipe {
    fn push(&mut self, at: Instant, bytes: &[u8]) {
        // Ordered like TCP: nothing overtakes what was sent before it.
        let at = at.max(self.last_arrival);
        self.last_arrival = at;
        self.segments.push_back((at, bytes.to_vec()));
    }

    fn take_due(&mut self, now: Instant) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some((at, _)) = self.segments.front() {
            if *at > now {
                break;
            }
            if let Some((_, bytes)) = self.segments.pop_front() {
                out.extend_from_slice(&bytes);
            }
        }
        out
    }

    fn next_arrival(&self) -> Option<Instant> {
        self.segments.front().map(|(at, _)| *at)
    }

    fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }
}

// ---------------------------------------------------------------------------
// One side
// ---------------------------------------------------------------------------

/// One connection with its application-facing records.
pub struct Side<
    const S: usize,
    const T: usize,
    const B: usize,
    const R: usize,
    St: Storage<B> = InlineStorage<B>,
> {
    pub name: &'static str,
    pub conn: Box<Connection<S, T, B, R, St>>,
    /// Every event, in order.
    pub log: Vec<Ev>,
    /// Events the scenario has not looked at yet.
    pub inbox: VecDeque<Ev>,
    /// DATA received per stream handle.
    pub bodies: Map<StreamRef, Vec<u8>>,
    /// Streams whose DATA ended the stream.
    pub data_ended: Set<StreamRef>,
    /// Wire ids seen for each handle while it was alive.
    pub ids: Map<StreamRef, u32>,
    pub release: Release,
    pub on_death: OnDeath,
    /// Handed out, not yet released: (stream, octets).
    pub unreleased: Vec<(StreamRef, usize)>,
    pub received: u64,
    pub released: u64,
    /// Octets this side transmitted.
    pub sent_octets: u64,
    /// `recv` consumed nothing, handed nothing out and queued no event: the
    /// documented loop cannot go on without a `poll_transmit`.
    pub stalls: usize,
    /// Events found queued where the documented loop would sleep (they were
    /// queued by `poll_transmit`).
    pub late_events: usize,
}

impl<const S: usize, const T: usize, const B: usize, const R: usize, St: SimStorage<B>>
    std::fmt::Debug for Side<S, T, B, R, St>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(self.name)
            .field("conn", &self.conn)
            .field("received", &self.received)
            .field("released", &self.released)
            .field("unreleased", &self.unreleased.len())
            .field("stalls", &self.stalls)
            .field("late_events", &self.late_events)
            .field("inbox", &self.inbox.len())
            .finish()
    }
}

impl<const S: usize, const T: usize, const B: usize, const R: usize, St: SimStorage<B>>
    Side<S, T, B, R, St>
{
    pub fn new(name: &'static str, role: Role, config: Config, now: Instant) -> Self {
        Side {
            name,
            conn: Box::new(Connection::new(role, config, now)),
            log: Vec::new(),
            inbox: VecDeque::new(),
            bodies: Map::default(),
            data_ended: Set::default(),
            ids: Map::default(),
            release: Release::Immediate,
            on_death: OnDeath::Release,
            unreleased: Vec::new(),
            received: 0,
            released: 0,
            sent_octets: 0,
            stalls: 0,
            late_events: 0,
        }
    }

    /// Drains `poll_event`; returns how many there were.
    pub fn drain(&mut self) -> usize {
        let mut n = 0;
        while let Some(ev) = Ev::poll(&mut *self.conn) {
            n += 1;
            if let Ev::Headers { stream, .. } = ev
                && let Some(id) = self.conn.stream_id(stream)
            {
                self.ids.insert(stream, id);
            }
            if ev.is_terminal() && self.on_death == OnDeath::Drop {
                let dead = ev.stream();
                self.unreleased.retain(|(s, _)| Some(*s) != dead);
            }
            self.log.push(ev.clone());
            self.inbox.push_back(ev);
        }
        n
    }

    /// Records the wire id of a live handle (after `send_headers`).
    pub fn note_id(&mut self, stream: StreamRef) {
        if let Some(id) = self.conn.stream_id(stream) {
            self.ids.insert(stream, id);
        }
    }

    /// The wire id a handle had, if this side ever saw it alive.
    pub fn id(&self, stream: StreamRef) -> Option<u32> {
        self.ids.get(&stream).copied()
    }

    /// Feeds one chunk the way the run loop does; `transmit` is called when
    /// `recv` cannot go on without it (see `stalls`).
    fn feed(&mut self, chunk: &[u8], now: Instant, strict: bool, out: &mut dyn FnMut(&mut Self)) {
        let mut input = chunk;
        let mut stuck = 0;
        while !input.is_empty() {
            let r = self.conn.recv(input, now);
            let mut progress = r.consumed > 0;
            if let Some(d) = r.data {
                progress = true;
                self.bodies
                    .entry(d.stream)
                    .or_default()
                    .extend_from_slice(d.bytes);
                self.received += d.bytes.len() as u64;
                if d.end_stream {
                    self.data_ended.insert(d.stream);
                    self.log.push(Ev::DataEnd { stream: d.stream });
                    self.inbox.push_back(Ev::DataEnd { stream: d.stream });
                }
                if !d.bytes.is_empty() {
                    match self.release {
                        Release::Immediate => {
                            self.conn.release_data(d.stream, d.bytes.len());
                            self.released += d.bytes.len() as u64;
                        }
                        Release::Lazy | Release::Never => {
                            self.unreleased.push((d.stream, d.bytes.len()));
                        }
                    }
                }
            }
            input = &input[r.consumed..];
            if self.drain() > 0 {
                progress = true;
            }
            if !progress {
                // The documented answer to a stall: transmit, then go on.
                let _ = strict;
                self.stalls += 1;
                stuck += 1;
                assert!(stuck < 3, "{}: recv makes no progress at all", self.name);
                out(self);
            } else {
                stuck = 0;
            }
        }
    }

    /// Releases every octet held back.
    pub fn release_all(&mut self) -> bool {
        if self.unreleased.is_empty() {
            return false;
        }
        for (s, n) in std::mem::take(&mut self.unreleased) {
            self.conn.release_data(s, n);
            self.released += n as u64;
        }
        true
    }

    /// Total octets received on a handle.
    pub fn body_len(&self, stream: StreamRef) -> usize {
        self.bodies.get(&stream).map_or(0, Vec::len)
    }

    /// The last `ConnectionClosed` event, if any.
    pub fn closed(&self) -> Option<Option<ConnectionError>> {
        self.log.iter().rev().find_map(|e| match e {
            Ev::ConnectionClosed { error } => Some(*error),
            _ => None,
        })
    }

    /// The terminal events (Reset, Closed) seen for a handle.
    pub fn terminal_events(&self, stream: StreamRef) -> Vec<&Ev> {
        self.log
            .iter()
            .filter(|e| e.is_terminal() && e.stream() == Some(stream))
            .collect()
    }
}

// ---------------------------------------------------------------------------
// The pair
// ---------------------------------------------------------------------------

/// Which side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    Client,
    Server,
}

/// A client and a server connection over two pipes on a virtual clock.
pub struct Pair<
    const S: usize,
    const T: usize,
    const B: usize,
    const R: usize,
    St: Storage<B> = InlineStorage<B>,
> {
    pub now: Instant,
    pub client: Side<S, T, B, R, St>,
    pub server: Side<S, T, B, R, St>,
    to_server: Pipe,
    to_client: Pipe,
    pub split: Split,
    pub seed: u64,
    rng: Rng,
    /// One-way delay of every transmitted segment.
    pub latency: Duration,
    /// Fail where the documented run loop alone would hang.
    pub strict: bool,
    /// Size range of the buffers handed to `poll_transmit`.
    pub transmit_sizes: (usize, usize),
    pub steps: u64,
    pub max_steps: u64,
}

impl<const S: usize, const T: usize, const B: usize, const R: usize, St: SimStorage<B>>
    std::fmt::Debug for Pair<S, T, B, R, St>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("now", &self.now)
            .field("split", &self.split)
            .field("seed", &self.seed)
            .field("steps", &self.steps)
            .field("client", &self.client)
            .field("server", &self.server)
            .field("in_flight_to_server", &self.to_server.segments.len())
            .field("in_flight_to_client", &self.to_client.segments.len())
            .finish()
    }
}

impl<const S: usize, const T: usize, const B: usize, const R: usize, St: SimStorage<B>>
    Pair<S, T, B, R, St>
{
    pub fn new(split: Split, seed: u64, client: Config, server: Config) -> Self {
        let now = Instant::ZERO;
        Pair {
            now,
            client: Side::new("client", Role::Client, client, now),
            server: Side::new("server", Role::Server, server, now),
            to_server: Pipe::default(),
            to_client: Pipe::default(),
            split,
            seed,
            rng: Rng::new(seed),
            latency: Duration::ZERO,
            strict: false,
            transmit_sizes: (128, 8192),
            steps: 0,
            max_steps: 2_000_000,
        }
    }

    pub fn side(&mut self, who: Who) -> &mut Side<S, T, B, R, St> {
        match who {
            Who::Client => &mut self.client,
            Who::Server => &mut self.server,
        }
    }

    /// Sets both sides' release mode.
    pub fn set_release(&mut self, release: Release) {
        self.client.release = release;
        self.server.release = release;
    }

    /// `poll_transmit` until 0, into the pipe towards the other side.
    fn transmit(&mut self, who: Who) -> bool {
        let (lo, hi) = self.transmit_sizes;
        let arrival = self.now + self.latency;
        let mut buf = vec![0u8; hi.max(16_384)];
        let mut any = false;
        loop {
            let size = self.rng.range(lo, hi);
            let side = match who {
                Who::Client => &mut self.client,
                Who::Server => &mut self.server,
            };
            let n = side.conn.poll_transmit(&mut buf[..size]);
            if n == 0 {
                // A full-size buffer must drain whatever is wanted.
                let n = side.conn.poll_transmit(&mut buf);
                if n == 0 {
                    assert!(
                        !side.conn.wants_transmit(),
                        "{}: wants_transmit() but poll_transmit gives nothing",
                        side.name
                    );
                    break;
                }
                side.sent_octets += n as u64;
                self.pipe(who).push(arrival, &buf[..n]);
                any = true;
                continue;
            }
            side.sent_octets += n as u64;
            self.pipe(who).push(arrival, &buf[..n]);
            any = true;
        }
        // The documented loop drains events after poll_transmit too.
        let side = self.side(who);
        let before = side.inbox.len();
        if side.drain() > 0 {
            side.late_events += side.inbox.len() - before;
        }
        any
    }

    fn pipe(&mut self, from: Who) -> &mut Pipe {
        match from {
            Who::Client => &mut self.to_server,
            Who::Server => &mut self.to_client,
        }
    }

    /// Delivers what has arrived at `who`, cut by the splitter.
    fn deliver(&mut self, who: Who) -> bool {
        let now = self.now;
        let bytes = match who {
            Who::Client => self.to_client.take_due(now),
            Who::Server => self.to_server.take_due(now),
        };
        if bytes.is_empty() {
            return false;
        }
        let mut at = 0;
        while at < bytes.len() {
            let left = bytes.len() - at;
            let n = match self.split {
                Split::Whole => left,
                Split::ByteAtATime => 1,
                Split::Random => {
                    let max = match self.rng.below(4) {
                        0 => 8,
                        1 => 64,
                        2 => 1500,
                        _ => 20_000,
                    };
                    self.rng.range(1, max).min(left)
                }
            };
            let chunk = &bytes[at..at + n];
            at += n;
            let strict = self.strict;
            let arrival = now + self.latency;
            let mut sent = Vec::new();
            let side = self.side(who);
            side.feed(chunk, now, strict, &mut |s: &mut Side<S, T, B, R, St>| {
                let mut buf = vec![0u8; 16_384];
                loop {
                    let n = s.conn.poll_transmit(&mut buf);
                    if n == 0 {
                        break;
                    }
                    s.sent_octets += n as u64;
                    sent.extend_from_slice(&buf[..n]);
                }
            });
            if !sent.is_empty() {
                self.pipe(who).push(arrival, &sent);
            }
            // Lazy release at seeded moments, as an application reading
            // its streams at its own pace.
            let side = match who {
                Who::Client => &mut self.client,
                Who::Server => &mut self.server,
            };
            if side.release == Release::Lazy && self.rng.chance(1, 64) {
                side.release_all();
            }
        }
        true
    }

    /// One round: the application acts, both sides transmit, arrived bytes
    /// are delivered. Returns whether anything moved.
    pub fn step(&mut self, app: &mut dyn FnMut(&mut Self)) -> bool {
        self.steps += 1;
        assert!(self.steps < self.max_steps, "no end in sight: {self:?}");
        let before = (self.client.log.len(), self.server.log.len());
        app(self);
        // After application calls: drain events.
        self.client.drain();
        self.server.drain();
        let mut moved = (self.client.log.len(), self.server.log.len()) != before;
        moved |= self.transmit(Who::Client);
        moved |= self.transmit(Who::Server);
        moved |= self.deliver(Who::Server);
        moved |= self.deliver(Who::Client);
        if self.client.release == Release::Lazy && self.rng.chance(1, 4) {
            moved |= self.client.release_all();
        }
        if self.server.release == Release::Lazy && self.rng.chance(1, 4) {
            moved |= self.server.release_all();
        }
        moved
    }

    /// Steps until nothing moves, nothing is in flight and no deadline is
    /// set; time jumps to the next arrival or deadline in between. `app` runs
    /// every step and must be idempotent when there is nothing to do.
    pub fn run(&mut self, mut app: impl FnMut(&mut Self)) {
        loop {
            if self.step(&mut app) {
                continue;
            }
            // Nothing happened at this instant. A lazy reader catches up
            // before the pair counts as idle.
            let mut released = false;
            if self.client.release == Release::Lazy {
                released |= self.client.release_all();
            }
            if self.server.release == Release::Lazy {
                released |= self.server.release_all();
            }
            if released {
                continue;
            }
            let next = [
                self.to_server.next_arrival(),
                self.to_client.next_arrival(),
                self.client.conn.poll_timeout(),
                self.server.conn.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                return;
            };
            if next > self.now {
                self.now = next;
            }
            let now = self.now;
            for side in [&mut self.client, &mut self.server] {
                if side.conn.poll_timeout().is_some_and(|t| t <= now) {
                    side.conn.handle_timeout(now);
                    side.drain();
                }
            }
        }
    }

    /// Runs with no application until idle.
    pub fn settle(&mut self) {
        self.run(|_| {});
    }

    /// Runs until idle, or until `done` holds after a step.
    pub fn run_until(&mut self, mut app: impl FnMut(&mut Self) -> bool) {
        let mut finished = false;
        self.run(|p| {
            if !finished {
                finished = app(p);
            }
        });
    }

    /// Whether nothing is in flight in either direction.
    pub fn quiet(&self) -> bool {
        self.to_server.is_empty() && self.to_client.is_empty()
    }
}

// ---------------------------------------------------------------------------
// A request/response application used by the scenarios
// ---------------------------------------------------------------------------

/// One planned exchange.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Request body octets (the server echoes them).
    pub len: usize,
    /// The client resets the stream (CANCEL) once it has sent this much.
    pub client_reset_at: Option<usize>,
    /// The server resets the stream (CANCEL) once it has echoed this much.
    pub server_reset_at: Option<usize>,
    /// Request and response end with trailers instead of END_STREAM on DATA.
    pub trailers: bool,
    /// The last request octets go out as an empty DATA frame with END_STREAM.
    pub empty_end: bool,
}

impl Plan {
    pub fn echo(len: usize) -> Self {
        Plan {
            len,
            client_reset_at: None,
            server_reset_at: None,
            trailers: false,
            empty_end: false,
        }
    }
}

/// What became of one exchange, client view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pending,
    /// The full echo arrived and matched.
    Echoed,
    /// The client reset it as planned.
    ClientReset,
    /// The stream was reset by the server with this code.
    ServerReset(ErrorCode),
}

/// The sending half of one stream.
#[derive(Debug, Clone)]
pub struct Upload {
    pub stream: StreamRef,
    pub body: Vec<u8>,
    pub sent: usize,
    /// Stop sending at this offset (a planned reset).
    pub stop_at: Option<usize>,
    pub trailers: Option<Fields>,
    pub empty_end: bool,
    /// The last `send_data` was partly taken; wait for SendReady.
    pub blocked: bool,
    pub done: bool,
    /// More body may still be appended (the server's echo).
    pub open_ended: bool,
}

impl Upload {
    pub fn new(stream: StreamRef, body: Vec<u8>) -> Self {
        Upload {
            stream,
            body,
            sent: 0,
            stop_at: None,
            trailers: None,
            empty_end: false,
            blocked: false,
            done: false,
            open_ended: false,
        }
    }

    fn limit(&self) -> usize {
        self.stop_at
            .map_or(self.body.len(), |s| s.min(self.body.len()))
    }

    /// Sends what can go now. Errors are the stream's end (a reset).
    pub fn pump<
        const S: usize,
        const T: usize,
        const B: usize,
        const R: usize,
        St: SimStorage<B>,
    >(
        &mut self,
        conn: &mut Connection<S, T, B, R, St>,
    ) -> Result<(), StreamError> {
        if self.done || self.blocked {
            return Ok(());
        }
        let limit = self.limit();
        let finishing = !self.open_ended && self.stop_at.is_none();
        if self.sent < limit || (finishing && self.sent == limit) {
            let end_on_data = finishing && self.trailers.is_none() && !self.empty_end;
            let chunk = &self.body[self.sent..limit];
            if chunk.is_empty() && !finishing {
                return Ok(());
            }
            let n = conn.send_data(self.stream, chunk, end_on_data)?;
            self.sent += n;
            if n < chunk.len() {
                self.blocked = true;
                return Ok(());
            }
            if !finishing {
                return Ok(());
            }
            if end_on_data {
                self.done = true;
                return Ok(());
            }
            if self.empty_end {
                // An empty DATA frame with END_STREAM is all that is left;
                // with no room for it, SendReady follows.
                match conn.send_data(self.stream, &[], true) {
                    Ok(_) => self.done = true,
                    Err(StreamError::TransmitFull) => self.blocked = true,
                    Err(e) => return Err(e),
                }
                return Ok(());
            }
            if let Some(t) = self.trailers.clone() {
                match conn.send_headers(self.stream, as_fields(&t), true) {
                    Ok(()) => self.done = true,
                    // "write out with poll_transmit, then try again": next step.
                    Err(StreamError::TransmitFull) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

/// Client and server application state of an echo scenario.
#[derive(Debug, Default)]
pub struct EchoApp {
    pub plans: Vec<Plan>,
    /// How many requests may be open at once (client side).
    pub concurrency: usize,
    pub next: usize,
    /// Client: plan index → upload.
    pub uploads: Map<usize, Upload>,
    pub by_client_stream: Map<StreamRef, usize>,
    pub outcomes: Vec<Outcome>,
    /// Client streams waiting for StreamsAvailable: plan index.
    pub waiting_open: VecDeque<usize>,
    /// Server: stream → (plan index, echo upload, request ended).
    pub echoes: Map<StreamRef, (usize, Upload, bool)>,
    /// Refused by the server (REFUSED_STREAM) and sent again.
    pub retries: usize,
    pub server_resets_done: usize,
    pub client_resets_done: usize,
    /// Requests the server saw, by plan index.
    pub server_seen: Vec<usize>,
    /// Server: plan index → stream handle.
    pub server_streams: Map<usize, StreamRef>,
    /// Server: response heads not yet taken (TransmitFull).
    pub heads_pending: Set<StreamRef>,
    /// Resume a blocked upload as soon as `send_capacity` says it can
    /// send, not only on `SendReady`: a driver that does not trust its
    /// wake-ups. Off, a lost `SendReady` stalls the stream.
    pub poll_capacity: bool,
}

impl EchoApp {
    pub fn new(plans: Vec<Plan>, concurrency: usize) -> Self {
        let n = plans.len();
        EchoApp {
            plans,
            concurrency,
            outcomes: vec![Outcome::Pending; n],
            poll_capacity: true,
            ..Default::default()
        }
    }

    pub fn done(&self) -> bool {
        self.outcomes.iter().all(|o| *o != Outcome::Pending)
    }

    fn open_count(&self) -> usize {
        self.uploads.len()
    }

    /// Opens one request for plan `i`; false when it must wait.
    fn open<const S: usize, const T: usize, const B: usize, const R: usize, St: SimStorage<B>>(
        &mut self,
        side: &mut Side<S, T, B, R, St>,
        i: usize,
    ) -> bool {
        let plan = self.plans[i].clone();
        let Ok(stream) = side.conn.open_stream() else {
            return false;
        };
        let mut extra = vec![("x-plan".to_string(), i.to_string())];
        if let Some(at) = plan.server_reset_at {
            extra.push(("x-server-reset".to_string(), at.to_string()));
        }
        if plan.trailers {
            extra.push(("te".to_string(), "trailers".to_string()));
        }
        let extra: Vec<(&str, &str)> = extra
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let head = request("/echo", &extra);
        match side.conn.send_headers(stream, as_fields(&head), false) {
            Ok(()) => {}
            Err(StreamError::ConcurrencyLimit | StreamError::TransmitFull) => {
                // Try again later; the reset of a stream without an id is silent.
                side.conn
                    .reset(stream, ErrorCode::CANCEL)
                    .expect("reset before headers");
                return false;
            }
            Err(e) => panic!("send_headers: {e}"),
        }
        side.note_id(stream);
        let mut up = Upload::new(stream, body(i as u64, plan.len));
        up.stop_at = plan.client_reset_at;
        up.empty_end = plan.empty_end;
        if plan.trailers {
            up.trailers = Some(fields(&[("x-request-trailer", "1")]));
        }
        self.by_client_stream.insert(stream, i);
        self.uploads.insert(i, up);
        true
    }

    /// The client application: one call per step.
    pub fn client<
        const S: usize,
        const T: usize,
        const B: usize,
        const R: usize,
        St: SimStorage<B>,
    >(
        &mut self,
        side: &mut Side<S, T, B, R, St>,
    ) {
        // Events first.
        while let Some(ev) = side.inbox.pop_front() {
            match ev {
                Ev::SendReady { stream } => {
                    if let Some(i) = self.by_client_stream.get(&stream)
                        && let Some(up) = self.uploads.get_mut(i)
                    {
                        up.blocked = false;
                    }
                }
                Ev::Reset { stream, code, .. } => {
                    let Some(&i) = self.by_client_stream.get(&stream) else {
                        continue;
                    };
                    self.uploads.remove(&i);
                    if code == ErrorCode::REFUSED_STREAM {
                        self.retries += 1;
                        self.waiting_open.push_back(i);
                    } else if self.outcomes[i] == Outcome::Pending {
                        self.outcomes[i] = Outcome::ServerReset(code);
                    }
                }
                Ev::Closed { stream } => {
                    if let Some(&i) = self.by_client_stream.get(&stream) {
                        self.uploads.remove(&i);
                    }
                }
                Ev::Headers {
                    stream,
                    end_stream: true,
                    ..
                }
                | Ev::DataEnd { stream } => {
                    let Some(&i) = self.by_client_stream.get(&stream) else {
                        continue;
                    };
                    let plan = &self.plans[i];
                    let want = body(i as u64, plan.len);
                    let got = side.bodies.get(&stream).cloned().unwrap_or_default();
                    assert!(
                        got == want,
                        "plan {i}: echo differs ({} octets, want {})",
                        got.len(),
                        want.len()
                    );
                    if self.outcomes[i] == Outcome::Pending {
                        self.outcomes[i] = Outcome::Echoed;
                    }
                    if let Some(up) = self.uploads.get(&i)
                        && up.done
                    {
                        self.uploads.remove(&i);
                    }
                }
                _ => {}
            }
        }
        // Open new requests.
        while self.open_count() < self.concurrency {
            let i = if let Some(i) = self.waiting_open.pop_front() {
                i
            } else if self.next < self.plans.len() {
                self.next += 1;
                self.next - 1
            } else {
                break;
            };
            if !self.open(side, i) {
                self.waiting_open.push_front(i);
                break;
            }
        }
        // Send bodies.
        let mut ended = Vec::new();
        for (&i, up) in self.uploads.iter_mut() {
            if self.poll_capacity && up.blocked && side.conn.send_capacity(up.stream) > 0 {
                up.blocked = false;
            }
            if let Err(e) = up.pump(&mut side.conn) {
                // A reset stream or a dead connection: the event says which.
                let _ = e;
                ended.push(i);
                continue;
            }
            if up.stop_at.is_some_and(|s| up.sent >= s) && !up.done {
                side.conn
                    .reset(up.stream, ErrorCode::CANCEL)
                    .expect("reset of a live stream");
                up.done = true;
                self.client_resets_done += 1;
                self.outcomes[i] = Outcome::ClientReset;
                ended.push(i);
            }
        }
        for i in ended {
            self.uploads.remove(&i);
        }
        side.drain();
    }

    /// The server application: one call per step.
    pub fn server<
        const S: usize,
        const T: usize,
        const B: usize,
        const R: usize,
        St: SimStorage<B>,
    >(
        &mut self,
        side: &mut Side<S, T, B, R, St>,
    ) {
        while let Some(ev) = side.inbox.pop_front() {
            match ev {
                Ev::Headers {
                    stream,
                    kind: HeadersKind::Request,
                    fields: f,
                    end_stream,
                } => {
                    let i: usize = get(&f, "x-plan").and_then(|v| v.parse().ok()).unwrap_or(0);
                    self.server_seen.push(i);
                    let trailers = get(&f, "te") == Some("trailers");
                    self.server_streams.insert(i, stream);
                    self.heads_pending.insert(stream);
                    let mut up = Upload::new(stream, Vec::new());
                    up.open_ended = !end_stream;
                    up.stop_at = get(&f, "x-server-reset").and_then(|v| v.parse().ok());
                    if trailers {
                        up.trailers = Some(fields(&[("grpc-status", "0")]));
                    }
                    self.echoes.insert(stream, (i, up, end_stream));
                }
                Ev::Headers {
                    stream,
                    kind: HeadersKind::Trailers,
                    ..
                }
                | Ev::DataEnd { stream } => {
                    if let Some((_, up, ended)) = self.echoes.get_mut(&stream) {
                        *ended = true;
                        up.open_ended = false;
                    }
                }
                Ev::SendReady { stream } => {
                    if let Some((_, up, _)) = self.echoes.get_mut(&stream) {
                        up.blocked = false;
                    }
                }
                Ev::Reset { stream, .. } | Ev::Closed { stream } => {
                    self.echoes.remove(&stream);
                }
                _ => {}
            }
        }
        let mut ended = Vec::new();
        for (&stream, (_, up, _)) in self.echoes.iter_mut() {
            if self.heads_pending.contains(&stream) {
                let head = response("200", &[("content-type", "application/grpc")]);
                match side.conn.send_headers(stream, as_fields(&head), false) {
                    Ok(()) => {
                        self.heads_pending.remove(&stream);
                    }
                    Err(StreamError::TransmitFull) => continue,
                    Err(_) => {
                        ended.push(stream);
                        continue;
                    }
                }
            }
            if self.poll_capacity && up.blocked && side.conn.send_capacity(stream) > 0 {
                up.blocked = false;
            }
            // The echo is what has arrived so far.
            if let Some(b) = side.bodies.get(&stream)
                && b.len() > up.body.len()
            {
                up.body.extend_from_slice(&b[up.body.len()..]);
            }
            if up.pump(&mut side.conn).is_err() {
                ended.push(stream);
                continue;
            }
            if up.stop_at.is_some_and(|s| up.sent >= s) {
                side.conn
                    .reset(stream, ErrorCode::CANCEL)
                    .expect("reset of a live stream");
                self.server_resets_done += 1;
                ended.push(stream);
                continue;
            }
            if up.done {
                ended.push(stream);
            }
        }
        for s in ended {
            self.echoes.remove(&s);
        }
        side.drain();
    }
}

impl EchoApp {
    /// What each side knows about plan `i`, for failure messages.
    pub fn diagnose<
        const S: usize,
        const T: usize,
        const B: usize,
        const R: usize,
        St: SimStorage<B>,
    >(
        &self,
        pair: &Pair<S, T, B, R, St>,
        i: usize,
    ) -> String {
        let mut out = String::new();
        let cs = self
            .by_client_stream
            .iter()
            .find(|(_, j)| **j == i)
            .map(|(s, _)| *s);
        if let Some(cs) = cs {
            out += &format!(
                "client stream {cs:?} id {:?}: capacity now {}, received {}\n",
                pair.client.id(cs),
                pair.client.conn.send_capacity(cs),
                pair.client.body_len(cs)
            );
            if let Some(up) = self.uploads.get(&i) {
                out += &format!(
                    "  upload sent {} of {} blocked {} done {}\n",
                    up.sent,
                    up.body.len(),
                    up.blocked,
                    up.done
                );
            }
            for e in pair.client.log.iter().filter(|e| e.stream() == Some(cs)) {
                out += &format!("  client event {}\n", short(e));
            }
        }
        if let Some(&ss) = self.server_streams.get(&i) {
            out += &format!(
                "server stream {ss:?} id {:?}: capacity now {}, received {}\n",
                pair.server.id(ss),
                pair.server.conn.send_capacity(ss),
                pair.server.body_len(ss)
            );
            if let Some((_, up, ended)) = self.echoes.get(&ss) {
                out += &format!(
                    "  echo sent {} of {} blocked {} done {} request ended {}\n",
                    up.sent,
                    up.body.len(),
                    up.blocked,
                    up.done,
                    ended
                );
            }
            for e in pair.server.log.iter().filter(|e| e.stream() == Some(ss)) {
                out += &format!("  server event {}\n", short(e));
            }
        }
        out
    }
}

/// An event without its header values, for messages.
pub fn short(e: &Ev) -> String {
    match e {
        Ev::Headers {
            kind,
            fields,
            end_stream,
            ..
        } => format!(
            "Headers {kind:?} end_stream {end_stream} [{}]",
            fields
                .iter()
                .map(|(n, v)| format!(
                    "{}: {}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(&v[..v.len().min(40)])
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => format!("{other:?}"),
    }
}

/// Runs an echo application until both ends are idle; returns it for checks.
pub fn run_echo<
    const S: usize,
    const T: usize,
    const B: usize,
    const R: usize,
    St: SimStorage<B>,
>(
    pair: &mut Pair<S, T, B, R, St>,
    app: EchoApp,
) -> EchoApp {
    let mut app = app;
    pair.run(|p| {
        app.client(&mut p.client);
        app.server(&mut p.server);
    });
    app
}

/// Asserts every plan reached its expected outcome, with the pair's state
/// in the message.
pub fn assert_outcomes<
    const S: usize,
    const T: usize,
    const B: usize,
    const R: usize,
    St: SimStorage<B>,
>(
    pair: &Pair<S, T, B, R, St>,
    app: &EchoApp,
) {
    for (i, plan) in app.plans.iter().enumerate() {
        let want = if plan.client_reset_at.is_some_and(|a| a < plan.len) {
            Outcome::ClientReset
        } else if plan.server_reset_at.is_some_and(|a| a < plan.len) {
            Outcome::ServerReset(ErrorCode::CANCEL)
        } else {
            Outcome::Echoed
        };
        if app.outcomes[i] != want {
            panic!(
                "plan {i} ({plan:?}): {:?}, want {want:?}\n{}\n{pair:?}",
                app.outcomes[i],
                app.diagnose(pair, i)
            );
        }
    }
}

/// Measures each connection window through behaviour: the receiver stops
/// releasing, the sender pushes on enough fresh streams to exceed the
/// window, and the octets that arrive are the window the sender was
/// granted. Returns (client→server, server→client) octets.
pub fn probe_windows<
    const S: usize,
    const T: usize,
    const B: usize,
    const R: usize,
    St: SimStorage<B>,
>(
    pair: &mut Pair<S, T, B, R, St>,
    streams: usize,
    per_stream: usize,
) -> (u64, u64) {
    pair.settle();
    pair.client.release_all();
    pair.server.release_all();
    pair.settle();

    // Client → server.
    pair.server.release = Release::Never;
    let before = pair.server.received;
    let mut ups = Vec::new();
    for _ in 0..streams {
        let s = pair.client.conn.open_stream().expect("probe stream");
        pair.client
            .conn
            .send_headers(s, as_fields(&request("/probe", &[])), false)
            .expect("probe headers");
        ups.push(Upload::new(s, vec![0x55; per_stream]));
    }
    let mut ups_c = ups;
    pair.run(|p| {
        while let Some(ev) = p.client.inbox.pop_front() {
            if let Ev::SendReady { stream } = ev {
                for u in ups_c.iter_mut().filter(|u| u.stream == stream) {
                    u.blocked = false;
                }
            }
        }
        for u in ups_c.iter_mut() {
            let _ = u.pump(&mut p.client.conn);
        }
        p.server.inbox.clear();
    });
    let up = pair.server.received - before;

    // Server → client: the client asks, the server answers on each stream.
    pair.client.release = Release::Never;
    pair.server.release = Release::Immediate;
    let before = pair.client.received;
    let mut asked = Vec::new();
    for _ in 0..streams {
        let s = pair.client.conn.open_stream().expect("probe stream");
        pair.client
            .conn
            .send_headers(s, as_fields(&request("/probe-down", &[])), true)
            .expect("probe headers");
        asked.push(s);
    }
    let mut downs: Vec<Upload> = Vec::new();
    pair.run(|p| {
        while let Some(ev) = p.server.inbox.pop_front() {
            match ev {
                Ev::Headers {
                    stream,
                    kind: HeadersKind::Request,
                    fields: f,
                    ..
                } if get(&f, ":path") == Some("/probe-down") => {
                    p.server
                        .conn
                        .send_headers(stream, as_fields(&response("200", &[])), false)
                        .expect("probe response");
                    downs.push(Upload::new(stream, vec![0xaa; per_stream]));
                }
                Ev::SendReady { stream } => {
                    for u in downs.iter_mut().filter(|u| u.stream == stream) {
                        u.blocked = false;
                    }
                }
                _ => {}
            }
        }
        for u in downs.iter_mut() {
            let _ = u.pump(&mut p.server.conn);
        }
        p.client.inbox.clear();
    });
    let down = pair.client.received - before;
    (up, down)
}

/// A `#[test]` per generic case and storage: `inline::NAME` runs
/// `NAME::<InlineStorage<BUF>>`, `growing::NAME` runs it with
/// [`GrowingStorage`] (stream slots, remembered resets and the HPACK table
/// grown on demand). `BUF` and `GrowingStorage` must be in scope at the
/// call site.
#[allow(unused_macros)] // only the crates with storage-generic tests use it
macro_rules! each_storage {
    ($($name:ident),* $(,)?) => {
        mod inline {
            $(
                #[test]
                fn $name() {
                    super::$name::<mcpwire_core::h2::InlineStorage<{ super::BUF }>>();
                }
            )*
        }

        mod growing {
            $(
                #[test]
                fn $name() {
                    super::$name::<super::GrowingStorage<{ super::BUF }>>();
                }
            )*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use each_storage;
