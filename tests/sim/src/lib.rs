//! The simulation core the tests share: the host integration tests of
//! `mcpwire-core` and the firmware scenarios on a Cortex-M4 under QEMU
//! (`tests/firmware/qemu-sim`) run on the same pieces, so that a delivery
//! bug cannot hide in one copy of them.
//!
//! - [`Rng`]: a seeded generator; the tests need reproducible cuts and
//!   sizes, not good randomness.
//! - [`Split`] and [`Pieces`]: how a byte stream is cut on its way, whole,
//!   in random pieces or one byte at a time (TCP may deliver any cut; a
//!   sans-IO endpoint must take every one).
//! - [`Pipe`]: one direction of a connection in a fixed array, written and
//!   read in the pieces its split says.
//! - [`Pipe::transmit`], [`Pipe::deliver`] and [`exchange`]: the run loop of
//!   [`mcpwire_core::drive`] over two [`Endpoint`]s joined by two pipes.
//!
//! `#![no_std]`, no allocator: the firmware links it as it is.
#![no_std]

use mcpwire_core::drive::{self, Endpoint, Feed, Step};
use mcpwire_core::time::Instant;

/// A small seeded generator (xorshift32).
#[derive(Debug, Clone)]
pub struct Rng(u32);

impl Rng {
    pub const fn new(seed: u32) -> Self {
        // Never zero; nearby seeds differ from the first draw on.
        Rng((seed.wrapping_mul(0x9e37_79b9) ^ 0x2545_f491) | 1)
    }

    pub fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }

    /// A value in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u32() as usize) % (hi.saturating_sub(lo) + 1)
    }
}

/// How a byte stream is cut into the pieces a reader gets (or a writer
/// fills).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Everything available at once.
    Whole,
    /// Pieces of `1..=max` octets, their sizes drawn from `seed`.
    Random { seed: u32, max: usize },
    /// Pieces of mixed sizes drawn from the seed: a third of them 1 to 8
    /// octets (frame headers and varints cut apart), a third 9 to 120 (up
    /// to a small frame), a third 121 to 1600 (a few frames at once).
    Mixed(u32),
    /// One octet at a time.
    Byte,
}

impl Split {
    /// The splits a delivery test runs under: whole, random pieces of up to
    /// 97 octets, mixed sizes, and byte at a time.
    pub const ALL: [Split; 4] = [
        Split::Whole,
        Split::Random {
            seed: 0x5eed,
            max: 97,
        },
        Split::Mixed(7),
        Split::Byte,
    ];
}

/// The sizes of the pieces a [`Split`] cuts, one after the other.
#[derive(Debug, Clone)]
pub struct Pieces {
    split: Split,
    rng: Rng,
}

impl Pieces {
    pub const fn new(split: Split) -> Self {
        let seed = match split {
            Split::Random { seed, .. } | Split::Mixed(seed) => seed,
            Split::Whole | Split::Byte => 0,
        };
        Self {
            split,
            rng: Rng::new(seed),
        }
    }

    pub fn split(&self) -> Split {
        self.split
    }

    /// The size of the next piece of `available` octets: in `1..=available`,
    /// 0 only when nothing is available.
    pub fn next(&mut self, available: usize) -> usize {
        let size = match self.split {
            Split::Whole => available,
            Split::Byte => 1,
            Split::Random { max, .. } => self.rng.range(1, max),
            Split::Mixed(_) => match self.rng.next_u32() % 3 {
                0 => self.rng.range(1, 8),
                1 => self.rng.range(9, 120),
                _ => self.rng.range(121, 1600),
            },
        };
        size.min(available)
    }
}

/// One direction of a connection: an ordered byte stream (as TCP gives) in
/// a fixed array of `N` octets. Writers fill its free room, readers take
/// pieces from its front; both in the sizes its [`Split`] says. A full pipe
/// takes nothing: the sender keeps its output, as with TCP back-pressure.
#[derive(Debug)]
pub struct Pipe<const N: usize> {
    buf: [u8; N],
    start: usize,
    end: usize,
    pieces: Pieces,
    total: u64,
}

impl<const N: usize> Pipe<N> {
    pub const fn new(split: Split) -> Self {
        Self {
            buf: [0; N],
            start: 0,
            end: 0,
            pieces: Pieces::new(split),
            total: 0,
        }
    }

    pub fn split(&self) -> Split {
        self.pieces.split()
    }

    /// Octets written and not read yet.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Octets that went in since the pipe was made.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// What was written and not read yet, in one slice.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Writes what fits of `bytes`, whatever the split; returns the octets
    /// written.
    pub fn write(&mut self, bytes: &[u8]) -> usize {
        self.compact();
        let n = bytes.len().min(N - self.end);
        self.buf[self.end..self.end + n].copy_from_slice(&bytes[..n]);
        self.commit(n)
    }

    /// Lends `write` the next piece of free room (empty when the pipe is
    /// full); `write` returns how much of it it filled. Returns what was
    /// written, for a caller that watches the stream go by.
    pub fn write_piece(&mut self, write: impl FnOnce(&mut [u8]) -> usize) -> &[u8] {
        self.compact();
        let room = self.pieces.next(N - self.end);
        let n = write(&mut self.buf[self.end..self.end + room]).min(room);
        let at = self.end;
        self.commit(n);
        &self.buf[at..at + n]
    }

    /// The next piece to read (empty when the pipe is); it stays in the
    /// pipe until [`Pipe::consume`].
    pub fn piece(&mut self) -> &[u8] {
        let n = self.pieces.next(self.len());
        &self.buf[self.start..self.start + n]
    }

    /// Drops the first `n` octets (at most what the pipe holds).
    pub fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
    }

    /// Moves what `endpoint` has to send into the pipe, each piece one
    /// [`drive::fill`], until it has nothing more or the pipe is full.
    /// Returns the octets moved.
    pub fn transmit<E: Endpoint + ?Sized>(&mut self, endpoint: &mut E) -> usize {
        let mut moved = 0;
        while endpoint.wants_transmit() {
            let n = self.write_piece(|out| drive::fill(endpoint, out)).len();
            if n == 0 {
                break;
            }
            moved += n;
        }
        moved
    }

    /// Feeds the pipe to `endpoint` piece by piece with the run loop of
    /// [`mcpwire_core::drive`]: each piece through a [`Feed`], and when the
    /// endpoint must send before it reads on, its output into `back`.
    /// Stops when the pipe is empty or the endpoint takes no more; what it
    /// did not take stays in the pipe.
    pub fn deliver<E: Endpoint + ?Sized, const M: usize>(
        &mut self,
        endpoint: &mut E,
        now: Instant,
        back: &mut Pipe<M>,
    ) -> Delivery {
        let mut octets = 0;
        while !self.is_empty() {
            let n = self.pieces.next(self.len());
            let mut feed = Feed::new(&self.buf[self.start..self.start + n]);
            let end = loop {
                match feed.step(endpoint, now) {
                    Step::Consumed => {}
                    Step::Transmit => {
                        if back.transmit(endpoint) == 0 {
                            break Step::Transmit;
                        }
                    }
                    step => break step,
                }
            };
            let used = n - feed.rest().len();
            self.start += used;
            octets += used;
            if end != Step::Done {
                return Delivery { octets, end };
            }
        }
        Delivery {
            octets,
            end: Step::Done,
        }
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    fn commit(&mut self, n: usize) -> usize {
        self.end += n;
        self.total += n as u64;
        n
    }
}

/// How a [`Pipe::deliver`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// Octets the endpoint consumed.
    pub octets: usize,
    /// [`Step::Done`]: the pipe is empty. [`Step::Wait`]: the endpoint
    /// waits for its application to answer a call; deliver the rest after
    /// an answer. [`Step::Transmit`]: the endpoint must send first and the
    /// pipe back is full; deliver that pipe, then this one again.
    /// [`Step::Stuck`]: the endpoint takes nothing and owes nothing (a
    /// bug).
    pub end: Step,
}

/// Which receiver of an [`exchange`] was stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stuck {
    A,
    B,
}

/// One round between endpoints `a` and `b` joined by the pipes `ab` (from
/// `a` to `b`) and `ba`: `a` transmits into `ab`, which is delivered to `b`
/// (what `b` must send first goes into `ba`); then `b` transmits and `ba`
/// is delivered to `a` alike. Returns the octets that moved (0: the round
/// changed nothing), or which side was stuck.
pub fn exchange<A, B, const N: usize, const M: usize>(
    a: &mut A,
    ab: &mut Pipe<N>,
    b: &mut B,
    ba: &mut Pipe<M>,
    now: Instant,
) -> Result<usize, Stuck>
where
    A: Endpoint + ?Sized,
    B: Endpoint + ?Sized,
{
    let mut moved = ab.transmit(a);
    let d = ab.deliver(b, now, ba);
    if d.end == Step::Stuck {
        return Err(Stuck::B);
    }
    moved += d.octets + ba.transmit(b);
    let d = ba.deliver(a, now, ab);
    if d.end == Step::Stuck {
        return Err(Stuck::A);
    }
    Ok(moved + d.octets)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Echoes what it reads, in upper case, through an output buffer of
    /// four octets: it takes no input while that buffer is full.
    #[derive(Default)]
    struct Upper {
        out: [u8; 4],
        len: usize,
        read: usize,
    }

    impl Endpoint for Upper {
        fn recv(&mut self, input: &[u8], _: Instant) -> usize {
            let n = input.len().min(self.out.len() - self.len);
            for (o, i) in self.out[self.len..self.len + n].iter_mut().zip(input) {
                *o = i.to_ascii_uppercase();
            }
            self.len += n;
            self.read += n;
            n
        }
        fn wants_transmit(&self) -> bool {
            self.len > 0
        }
        fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
            let n = self.len.min(out.len());
            out[..n].copy_from_slice(&self.out[..n]);
            self.out.copy_within(n..self.len, 0);
            self.len -= n;
            n
        }
    }

    /// Takes nothing and owes nothing.
    struct Deaf;

    impl Endpoint for Deaf {
        fn recv(&mut self, _: &[u8], _: Instant) -> usize {
            0
        }
        fn wants_transmit(&self) -> bool {
            false
        }
        fn poll_transmit(&mut self, _: &mut [u8]) -> usize {
            0
        }
    }

    const TEXT: &[u8] = b"the quick brown fox jumps over the lazy dog";

    #[test]
    fn pieces_cover_the_stream_in_sizes_the_split_allows() {
        for split in Split::ALL {
            let mut pieces = Pieces::new(split);
            let (mut left, mut cuts) = (1000, 0);
            while left > 0 {
                let n = pieces.next(left);
                assert!((1..=left).contains(&n), "{split:?}: {n} of {left}");
                if let Split::Random { max, .. } = split {
                    assert!(n <= max);
                }
                left -= n;
                cuts += 1;
            }
            let expected = match split {
                Split::Whole => 1..=1,
                Split::Byte => 1000..=1000,
                _ => 2..=999,
            };
            assert!(expected.contains(&cuts), "{split:?}: {cuts} pieces");
            assert_eq!(pieces.next(0), 0);
        }
    }

    #[test]
    fn the_same_seed_cuts_the_same_pieces() {
        let split = Split::Random { seed: 3, max: 9 };
        let (mut a, mut b) = (Pieces::new(split), Pieces::new(split));
        let mut c = Pieces::new(Split::Random { seed: 4, max: 9 });
        let cuts = |p: &mut Pieces| core::array::from_fn::<usize, 16, _>(|_| p.next(100));
        assert_eq!(cuts(&mut a), cuts(&mut b));
        assert_ne!(cuts(&mut a), cuts(&mut c));
    }

    #[test]
    fn a_pipe_keeps_order_and_refuses_what_does_not_fit() {
        for split in Split::ALL {
            let mut pipe = Pipe::<16>::new(split);
            assert_eq!(pipe.write(&TEXT[..10]), 10);
            let mut read = [0u8; 64];
            let mut got = 0;
            let mut written = 10;
            while got < TEXT.len() {
                written += pipe.write(&TEXT[written..]);
                assert!(pipe.len() <= 16);
                let piece = pipe.piece();
                let n = piece.len();
                read[got..got + n].copy_from_slice(piece);
                pipe.consume(n);
                got += n;
            }
            assert_eq!(&read[..got], TEXT, "{split:?}");
            assert!(pipe.is_empty());
            assert_eq!(pipe.total(), TEXT.len() as u64);
        }
    }

    /// Sends a text, keeps what it hears.
    struct Talker {
        text: &'static [u8],
        sent: usize,
        heard: [u8; 64],
        len: usize,
    }

    impl Endpoint for Talker {
        fn recv(&mut self, input: &[u8], _: Instant) -> usize {
            let n = input.len().min(self.heard.len() - self.len);
            self.heard[self.len..self.len + n].copy_from_slice(&input[..n]);
            self.len += n;
            n
        }
        fn wants_transmit(&self) -> bool {
            self.sent < self.text.len()
        }
        fn poll_transmit(&mut self, out: &mut [u8]) -> usize {
            let n = (self.text.len() - self.sent).min(out.len());
            out[..n].copy_from_slice(&self.text[self.sent..self.sent + n]);
            self.sent += n;
            n
        }
    }

    #[test]
    fn exchange_runs_two_endpoints_through_small_pipes_under_every_split() {
        for split in Split::ALL {
            let mut talker = Talker {
                text: TEXT,
                sent: 0,
                heard: [0; 64],
                len: 0,
            };
            let mut upper = Upper::default();
            let mut up = Pipe::<8>::new(split);
            let mut down = Pipe::<5>::new(split);
            let mut rounds = 0;
            while exchange(&mut talker, &mut up, &mut upper, &mut down, Instant::ZERO) != Ok(0) {
                rounds += 1;
                assert!(rounds < 1000, "{split:?}: still moving");
            }
            assert_eq!(upper.read, TEXT.len(), "{split:?}");
            assert_eq!(
                &talker.heard[..talker.len],
                b"THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG"
            );
        }
    }

    #[test]
    fn an_endpoint_that_takes_nothing_is_reported_stuck() {
        let mut up = Pipe::<8>::new(Split::Whole);
        let mut back = Pipe::<8>::new(Split::Whole);
        up.write(b"abc");
        let d = up.deliver(&mut Deaf, Instant::ZERO, &mut back);
        assert_eq!(
            d,
            Delivery {
                octets: 0,
                end: Step::Stuck
            }
        );
        assert_eq!(up.len(), 3);
    }

    #[test]
    fn a_full_pipe_back_stops_the_delivery_until_it_drains() {
        let mut up = Pipe::<64>::new(Split::Whole);
        let mut back = Pipe::<2>::new(Split::Whole);
        up.write(b"abcdefgh");
        let mut upper = Upper::default();
        let d = up.deliver(&mut upper, Instant::ZERO, &mut back);
        // Four octets fill the echo's buffer, two go back, two more fit.
        assert_eq!(
            d,
            Delivery {
                octets: 6,
                end: Step::Transmit
            }
        );
        assert_eq!(back.pending(), b"AB");
        back.consume(2);
        let d = up.deliver(&mut upper, Instant::ZERO, &mut back);
        assert_eq!(
            d,
            Delivery {
                octets: 2,
                end: Step::Done
            }
        );
        assert_eq!(back.pending(), b"CD");
    }
}
