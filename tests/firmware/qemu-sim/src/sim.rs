//! What the scenarios share: fixed-size failure text, body bytes, and two
//! peers joined by the byte pipes of `mcpwire-sim` (the generator, splits
//! and pipes the host tests run on), with frame counts on each wire.

use core::cell::RefCell;
use core::fmt;
use core::sync::atomic::{AtomicUsize, Ordering};

use cortex_m::interrupt::{self, Mutex};
use mcpwire_core::h2::frame::{FrameHeader, FrameType, HEADER_LEN, PREFACE};
use mcpwire_core::h2::{Data, Role};
use mcpwire_core::time::Instant;
pub use mcpwire_sim::Rng;
use mcpwire_sim::{Pipe, Split};

use crate::h2::Conn;
use crate::stack::measured;

// ---------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------

const TEXT: usize = 200;

/// A line of text in a fixed buffer (what a scenario reports); longer text
/// is cut at a character boundary.
pub struct Text {
    buf: [u8; TEXT],
    len: usize,
}

impl Text {
    pub const fn new() -> Self {
        Self {
            buf: [0; TEXT],
            len: 0,
        }
    }

    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("(not UTF-8)")
    }
}

impl fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut n = s.len().min(TEXT - self.len);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A scenario failed; what went wrong is in the failure record (kept out
/// of the `Err` so that every `Result` of the run loop stays one word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed;

/// What a scenario returns: a summary line, or [`Failed`].
pub type Outcome = Result<Text, Failed>;

/// What went wrong, for [`take_failure`].
static FAILURE: Mutex<RefCell<Text>> = Mutex::new(RefCell::new(Text::new()));

/// Records why a scenario fails.
pub fn failure(args: fmt::Arguments<'_>) -> Failed {
    interrupt::free(|cs| {
        let mut t = FAILURE.borrow(cs).borrow_mut();
        *t = Text::new();
        let _ = fmt::Write::write_fmt(&mut *t, args);
    });
    Failed
}

/// Puts `args` and a colon in front of the recorded failure.
pub fn context(args: fmt::Arguments<'_>) -> Failed {
    interrupt::free(|cs| {
        let mut t = FAILURE.borrow(cs).borrow_mut();
        let mut with = Text::new();
        let _ = fmt::Write::write_fmt(&mut with, format_args!("{args}: {}", t.as_str()));
        *t = with;
    });
    Failed
}

/// The recorded failure, cleared.
pub fn take_failure() -> Text {
    interrupt::free(|cs| core::mem::replace(&mut *FAILURE.borrow(cs).borrow_mut(), Text::new()))
}

/// `format!` into a [`Text`].
#[macro_export]
macro_rules! text {
    ($($arg:tt)*) => {{
        let mut t = $crate::sim::Text::new();
        let _ = core::fmt::Write::write_fmt(&mut t, format_args!($($arg)*));
        t
    }};
}

/// Records the failure (`format!` arguments) and gives [`Failed`].
#[macro_export]
macro_rules! failed {
    ($($arg:tt)*) => {
        $crate::sim::failure(format_args!($($arg)*))
    };
}

/// Fails the enclosing function with the message.
#[macro_export]
macro_rules! fail {
    ($($arg:tt)*) => {
        return Err($crate::failed!($($arg)*))
    };
}

/// Fails the enclosing function with the message unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::fail!($($arg)*);
        }
    };
}

// ---------------------------------------------------------------------------
// Body bytes
// ---------------------------------------------------------------------------

/// The body byte at `offset` of the stream tagged `tag`: random access, so
/// that a sender can resend from any offset and a receiver can check every
/// byte without keeping a copy.
pub fn body_byte(tag: u32, offset: u32) -> u8 {
    let mut x = offset.wrapping_mul(0x9e37_79b9) ^ tag.wrapping_mul(0x85eb_ca6b);
    x ^= x >> 15;
    x = x.wrapping_mul(0x2c1b_3c6d);
    x ^= x >> 12;
    x as u8
}

// ---------------------------------------------------------------------------
// Pipes
// ---------------------------------------------------------------------------

/// Frames seen on a pipe, by type (0 to 9), counted from the bytes as they
/// pass, whatever the cuts.
#[derive(Debug, Default, Clone, Copy)]
pub struct FrameCounts {
    pub by_type: [u32; 10],
    /// DATA frames whose stream differs from the previous DATA frame's:
    /// how much the streams interleave on the wire.
    pub data_switches: u32,
    last_data_stream: u32,
}

impl FrameCounts {
    pub fn headers(&self) -> u32 {
        self.by_type[1]
    }
    pub fn window_updates(&self) -> u32 {
        self.by_type[8]
    }
    pub fn resets(&self) -> u32 {
        self.by_type[3]
    }
}

/// Follows frame boundaries in a byte stream.
#[derive(Debug)]
struct Sniffer {
    preface_left: usize,
    head: [u8; HEADER_LEN],
    head_len: usize,
    body_left: u32,
    counts: FrameCounts,
}

impl Sniffer {
    fn new(client_to_server: bool) -> Self {
        Self {
            preface_left: if client_to_server { PREFACE.len() } else { 0 },
            head: [0; HEADER_LEN],
            head_len: 0,
            body_left: 0,
            counts: FrameCounts::default(),
        }
    }

    fn see(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                self.preface_left -= n;
                bytes = &bytes[n..];
            } else if self.body_left > 0 {
                let n = (self.body_left as usize).min(bytes.len());
                self.body_left -= n as u32;
                bytes = &bytes[n..];
            } else {
                let n = (HEADER_LEN - self.head_len).min(bytes.len());
                self.head[self.head_len..self.head_len + n].copy_from_slice(&bytes[..n]);
                self.head_len += n;
                bytes = &bytes[n..];
                if self.head_len == HEADER_LEN {
                    let h = FrameHeader::parse(&self.head);
                    if let Some(c) = self.counts.by_type.get_mut(usize::from(h.kind.0)) {
                        *c += 1;
                    }
                    if h.kind == FrameType::DATA {
                        let c = &mut self.counts;
                        if c.last_data_stream != 0 && c.last_data_stream != h.stream_id {
                            c.data_switches += 1;
                        }
                        c.last_data_stream = h.stream_id;
                    }
                    self.body_left = h.length;
                    self.head_len = 0;
                }
            }
        }
    }
}

/// One direction of a connection: a [`Pipe`] cut in mixed sizes (a third
/// of the pieces 1 to 8 octets, frame headers and varints cut apart, the
/// others up to a small frame or a few frames), with the frames counted as
/// they go in.
#[derive(Debug)]
pub struct Wire<const N: usize> {
    pipe: Pipe<N>,
    sniffer: Sniffer,
}

impl<const N: usize> Wire<N> {
    pub fn new(client_to_server: bool, seed: u32) -> Self {
        Self {
            pipe: Pipe::new(Split::Mixed(seed)),
            sniffer: Sniffer::new(client_to_server),
        }
    }

    pub fn frames(&self) -> FrameCounts {
        self.sniffer.counts
    }

    /// Octets that went through.
    pub fn total(&self) -> u64 {
        self.pipe.total()
    }

    pub fn is_empty(&self) -> bool {
        self.pipe.is_empty()
    }
}

/// Moves what a peer has to send into `wire`, in pieces of random sizes
/// (each a `poll_transmit` into a slice that small), until the peer has
/// nothing more or the pipe is full. Returns the octets moved.
pub fn transmit<const N: usize, E>(
    wire: &mut Wire<N>,
    mut poll_transmit: impl FnMut(&mut [u8]) -> Result<usize, E>,
) -> Result<usize, E> {
    let mut moved = 0;
    loop {
        let mut result = Ok(0);
        let written = wire.pipe.write_piece(|out| {
            if out.is_empty() {
                return 0;
            }
            result = poll_transmit(out);
            *result.as_ref().unwrap_or(&0)
        });
        wire.sniffer.see(written);
        let n = written.len();
        result?;
        if n == 0 {
            return Ok(moved);
        }
        moved += n;
    }
}

/// Feeds the wire's bytes to a peer in pieces of random sizes, down to one
/// octet, until the wire is empty or the peer takes nothing (it waits for
/// its output to drain). Returns the octets consumed.
pub fn deliver<const N: usize, E>(
    wire: &mut Wire<N>,
    mut recv: impl FnMut(&[u8]) -> Result<usize, E>,
) -> Result<usize, E> {
    let mut consumed = 0;
    while !wire.pipe.is_empty() {
        let used = recv(wire.pipe.piece())?;
        if used == 0 {
            break;
        }
        wire.pipe.consume(used);
        consumed += used;
    }
    Ok(consumed)
}

// ---------------------------------------------------------------------------
// Two peers
// ---------------------------------------------------------------------------

/// One end of a connection with its application, driven by [`Pair`] through
/// the run loop of the core's module docs. Every method drains the
/// connection's events before it returns.
pub trait Peer {
    /// The application's turn: it sends what it has and can. True when it
    /// did something.
    fn act(&mut self, rng: &mut Rng, now: Instant) -> Result<bool, Failed>;
    /// `recv` of one piece of input; returns the octets consumed.
    fn recv(&mut self, input: &[u8], now: Instant) -> Result<usize, Failed>;
    /// `poll_transmit` into `out`.
    fn poll_transmit(&mut self, out: &mut [u8]) -> Result<usize, Failed>;
    /// `handle_timeout` when the deadline passed.
    fn timeout(&mut self, now: Instant) -> Result<(), Failed>;
}

/// One of our h2 [`Conn`]s with an application on top: a [`Peer`] whose
/// `recv`, `poll_transmit` and `timeout` are the same for every such peer,
/// `measured` under labels that name the connection's role.
pub trait ConnPeer {
    /// The connection.
    fn conn(&mut self) -> &mut Conn;
    /// [`Peer::act`].
    fn act(&mut self, rng: &mut Rng, now: Instant) -> Result<bool, Failed>;
    /// Drains the connection's events.
    fn events(&mut self) -> Result<(), Failed>;
    /// Takes a piece of DATA payload (released after it returns).
    fn data(&mut self, data: Data<'_>) -> Result<(), Failed>;
}

impl<P: ConnPeer> Peer for P {
    fn act(&mut self, rng: &mut Rng, now: Instant) -> Result<bool, Failed> {
        ConnPeer::act(self, rng, now)
    }

    fn recv(&mut self, input: &[u8], now: Instant) -> Result<usize, Failed> {
        let label = match self.conn().role() {
            Role::Client => "h2 client recv",
            Role::Server => "h2 server recv",
        };
        let r = measured(label, || self.conn().recv(input, now));
        if let Some(d) = r.data {
            self.data(d)?;
            self.conn().release_data(d.stream, d.bytes.len());
        }
        self.events()?;
        Ok(r.consumed)
    }

    fn poll_transmit(&mut self, out: &mut [u8]) -> Result<usize, Failed> {
        let label = match self.conn().role() {
            Role::Client => "h2 client poll_transmit",
            Role::Server => "h2 server poll_transmit",
        };
        let n = measured(label, || self.conn().poll_transmit(out));
        self.events()?;
        Ok(n)
    }

    fn timeout(&mut self, now: Instant) -> Result<(), Failed> {
        let conn = self.conn();
        if conn.poll_timeout().is_some_and(|t| t <= now) {
            measured("h2 handle_timeout", || conn.handle_timeout(now));
        }
        self.events()
    }
}

/// The most stack [`Pair::run`] used below its own frame.
static ROUND_DEPTH: AtomicUsize = AtomicUsize::new(0);

/// The deepest [`Pair::run`] since the previous call.
pub fn take_round_depth() -> usize {
    ROUND_DEPTH.swap(0, Ordering::Relaxed)
}

/// Rounds after which a pair that still moves is declared stuck.
const MAX_ROUNDS: u32 = 100_000;

/// A client and a server joined by two pipes, on a virtual clock that
/// advances one millisecond a round.
#[derive(Debug)]
pub struct Pair<C, S, const N: usize> {
    pub client: C,
    pub server: S,
    /// Client to server.
    pub up: Wire<N>,
    /// Server to client.
    pub down: Wire<N>,
    /// What the applications draw (cut sizes are the wires' own).
    pub rng: Rng,
    pub now: Instant,
}

impl<C: Peer, S: Peer, const N: usize> Pair<C, S, N> {
    pub fn new(client: C, server: S, seed: u32) -> Self {
        Self {
            client,
            server,
            up: Wire::new(true, seed.wrapping_add(1)),
            down: Wire::new(false, seed.wrapping_add(2)),
            rng: Rng::new(seed),
            now: Instant::ZERO,
        }
    }

    /// Runs both sides until a whole round moves nothing. Measures the
    /// stack the rounds use below `run`.
    pub fn run(&mut self) -> Result<(), Failed> {
        let (result, depth) = crate::stack::deepest_during(|| self.run_rounds());
        ROUND_DEPTH.fetch_max(depth, Ordering::Relaxed);
        result
    }

    #[inline(never)]
    fn run_rounds(&mut self) -> Result<(), Failed> {
        for _ in 0..MAX_ROUNDS {
            self.now = Instant::from_micros(self.now.as_micros() + 1000);
            let now = self.now;
            self.client.timeout(now)?;
            self.server.timeout(now)?;
            let mut moved = self.client.act(&mut self.rng, now)?;
            moved |= transmit(&mut self.up, |out| self.client.poll_transmit(out))? > 0;
            moved |= deliver(&mut self.up, |input| self.server.recv(input, now))? > 0;
            moved |= self.server.act(&mut self.rng, now)?;
            moved |= transmit(&mut self.down, |out| self.server.poll_transmit(out))? > 0;
            moved |= deliver(&mut self.down, |input| self.client.recv(input, now))? > 0;
            if !moved && self.up.is_empty() && self.down.is_empty() {
                return Ok(());
            }
        }
        Err(failed!("still busy after {MAX_ROUNDS} rounds"))
    }
}

/// A decimal header value.
pub fn parse_u32(v: &[u8]) -> Option<u32> {
    if v.is_empty() || v.len() > 9 {
        return None;
    }
    v.iter().try_fold(0u32, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
    })
}

/// Writes `n` in decimal into `buf`; returns the digits.
pub fn format_u32(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}
