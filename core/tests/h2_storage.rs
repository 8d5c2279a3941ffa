//! Connections whose three large buffers are taken on demand
//! ([`Storage`]): every buffer is given back when the connection is
//! idle, the wire is the same as with the inline buffers, and a refused
//! buffer is answered as `h2::storage` documents.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::cell::Cell;
use std::rc::Rc;

use mcpwire_core::h2::{
    Config, Connection, ErrorCode, Event, FrameBuffer, InlineStorage, Role, Storage, StreamError,
    StreamRef,
};
use mcpwire_core::hpack::Field;
use mcpwire_core::time::Instant;

const BUF: usize = 16384;

/// What one side's buffers did, shared with the test.
#[derive(Debug, Default)]
struct Pool {
    /// Buffers held now.
    out: Cell<usize>,
    acquired: Cell<u64>,
    /// Refuse these (Block, Headers, Transmit).
    refuse: Cell<[bool; 3]>,
    refused: Cell<u64>,
}

fn index(which: FrameBuffer) -> usize {
    match which {
        FrameBuffer::Block => 0,
        FrameBuffer::Headers => 1,
        FrameBuffer::Transmit => 2,
    }
}

/// Heap buffers, counted, filled with garbage when taken (the connection
/// must not read what it did not write).
#[derive(Debug)]
struct Counting {
    bufs: [Option<Vec<u8>>; 3],
    pool: Rc<Pool>,
}

impl Counting {
    fn new() -> (Self, Rc<Pool>) {
        let pool = Rc::new(Pool::default());
        (
            Self {
                bufs: [None, None, None],
                pool: pool.clone(),
            },
            pool,
        )
    }
}

/// Buffers counted, and slots and table on the heap, grown on demand.
impl Storage<BUF> for Counting {
    type Records<T: Default, const N: usize> = support::records::GrowingRecords<T, N>;

    fn acquire(&mut self, which: FrameBuffer) -> bool {
        let i = index(which);
        if self.bufs[i].is_some() {
            return true;
        }
        if self.pool.refuse.get()[i] {
            self.pool.refused.set(self.pool.refused.get() + 1);
            return false;
        }
        self.bufs[i] = Some(vec![0xa5; BUF]);
        self.pool.out.set(self.pool.out.get() + 1);
        self.pool.acquired.set(self.pool.acquired.get() + 1);
        true
    }

    fn release(&mut self, which: FrameBuffer) {
        if self.bufs[index(which)].take().is_some() {
            self.pool.out.set(self.pool.out.get() - 1);
        }
    }

    fn is_held(&self, which: FrameBuffer) -> bool {
        self.bufs[index(which)].is_some()
    }

    fn get(&self, which: FrameBuffer) -> &[u8] {
        self.bufs[index(which)].as_deref().unwrap_or_default()
    }

    fn get_mut(&mut self, which: FrameBuffer) -> &mut [u8] {
        self.bufs[index(which)].as_deref_mut().unwrap_or_default()
    }

    fn block_and_headers(&mut self) -> (&mut [u8], &mut [u8]) {
        let [block, headers, _] = &mut self.bufs;
        (
            block.as_deref_mut().unwrap_or_default(),
            headers.as_deref_mut().unwrap_or_default(),
        )
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        for w in FrameBuffer::ALL {
            self.release(w);
        }
    }
}

type Conn<B> = Connection<8, 4096, BUF, 64, B>;

/// What a side saw, as text.
fn describe<B: Storage<BUF>>(e: Event, c: &Conn<B>) -> String {
    match e {
        Event::Headers {
            stream,
            kind,
            end_stream,
        } => {
            let f: Vec<String> = c
                .headers(stream)
                .expect("a Headers event lends its list")
                .iter()
                .map(|f| {
                    format!(
                        "{}={}",
                        String::from_utf8_lossy(f.name),
                        f.value.len().min(64)
                    )
                })
                .collect();
            format!("headers {kind:?} {end_stream} {f:?}")
        }
        Event::Reset { code, remote, .. } => format!("reset {code:?} {remote}"),
        Event::Closed { .. } => "closed".into(),
        Event::SendReady { .. } => "ready".into(),
        other => format!("{other:?}"),
    }
}

/// Moves every frame from `from` to `to`; `to`'s events go to `on_event`.
fn pump<A: Storage<BUF>, B: Storage<BUF>>(
    from: &mut Conn<A>,
    to: &mut Conn<B>,
    log: &mut Vec<String>,
    on_event: &mut dyn FnMut(&mut Conn<B>, StreamRef, &str),
) -> usize {
    let mut buf = [0u8; 1500];
    let mut moved = 0;
    loop {
        let n = from.poll_transmit(&mut buf);
        if n == 0 {
            break;
        }
        moved += n;
        let mut input = &buf[..n];
        while !input.is_empty() {
            let r = to.recv(input, Instant::ZERO);
            if let Some(d) = r.data {
                log.push(format!("data {} {}", d.bytes.len(), d.end_stream));
                to.release_data(d.stream, d.bytes.len());
            }
            input = &input[r.consumed..];
            drain(to, log, on_event);
            if r.consumed == 0 && r.data.is_none() {
                // The peer owes answers first.
                let mut out = [0u8; 1500];
                while from.poll_transmit(&mut out) > 0 {}
            }
        }
    }
    moved
}

fn drain<B: Storage<BUF>>(
    c: &mut Conn<B>,
    log: &mut Vec<String>,
    on_event: &mut dyn FnMut(&mut Conn<B>, StreamRef, &str),
) {
    while let Some(e) = c.poll_event() {
        let text = describe(e, c);
        let stream = match e {
            Event::Headers { stream, .. }
            | Event::Reset { stream, .. }
            | Event::Closed { stream }
            | Event::SendReady { stream } => Some(stream),
            _ => None,
        };
        log.push(text.clone());
        if let Some(s) = stream {
            on_event(c, s, &text);
        }
    }
}

fn request(path: &str, big: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut f = vec![
        (b":method".to_vec(), b"POST".to_vec()),
        (b":scheme".to_vec(), b"http".to_vec()),
        (b":path".to_vec(), path.as_bytes().to_vec()),
        (b":authority".to_vec(), b"localhost".to_vec()),
    ];
    if big > 0 {
        // Never indexed, so that it takes CONTINUATION frames every time.
        f.push((b"x-big".to_vec(), vec![b'b'; big]));
    }
    f
}

fn as_fields(f: &[(Vec<u8>, Vec<u8>)]) -> Vec<Field<'_>> {
    f.iter()
        .map(|(n, v)| {
            if n == b"x-big" {
                Field::sensitive(n, v)
            } else {
                Field::new(n, v)
            }
        })
        .collect()
}

/// The server answers each request head with a response, a body of
/// `body` octets and trailers.
fn serve<B: Storage<BUF>>(body: usize) -> impl FnMut(&mut Conn<B>, StreamRef, &str) {
    move |c, s, text| {
        if text.starts_with("headers Request") {
            c.send_headers(s, [Field::new(b":status", b"200")], false)
                .unwrap();
            let data = vec![3u8; body];
            let n = c.send_data(s, &data, false).unwrap();
            assert_eq!(n, data.len());
            c.send_headers(s, [Field::new(b"grpc-status", b"0")], true)
                .unwrap();
        }
    }
}

/// Runs `calls` exchanges (`batch` at a time) and returns the wire log;
/// `idle` is checked whenever both sides are idle.
fn exchange<A: Storage<BUF>, B: Storage<BUF>>(
    client: &mut Conn<A>,
    server: &mut Conn<B>,
    calls: usize,
    batch: usize,
    idle: &mut dyn FnMut(),
) -> Vec<String> {
    let mut log = Vec::new();
    let mut done = 0;
    while done < calls {
        let n = batch.min(calls - done);
        let mut pending = Vec::new();
        for k in 0..n {
            let i = done + k;
            let s = client.open_stream().unwrap();
            let head = request(&format!("/call/{i}"), if i % 3 == 0 { 6_000 } else { 0 });
            while let Err(e) = client.send_headers(s, as_fields(&head), false) {
                assert_eq!(e, StreamError::TransmitFull);
                pump(client, server, &mut log, &mut serve(100 * (done % 7)));
                pump(server, client, &mut log, &mut |_, _, _| {});
                drain(client, &mut log, &mut |_, _, _| {});
            }
            pending.push((s, vec![i as u8; (i * 997) % 5000], 0));
        }
        for _ in 0..200 {
            let mut sent = 0;
            for (s, body, at) in &mut pending {
                if *at < body.len() {
                    let n = client.send_data(*s, &body[*at..], true).unwrap();
                    *at += n;
                    sent += n;
                }
            }
            let a = pump(client, server, &mut log, &mut serve(100 * (done % 7)));
            let b = pump(server, client, &mut log, &mut |_, _, _| {});
            drain(client, &mut log, &mut |_, _, _| {});
            if a == 0 && b == 0 && sent == 0 && pending.iter().all(|(_, b, at)| *at == b.len()) {
                break;
            }
        }
        assert_eq!(client.open_streams(), (0, 0), "{log:?}");
        idle();
        done += n;
    }
    log
}

#[test]
fn every_buffer_is_given_back_when_idle_and_the_wire_is_the_same() {
    let config = Config {
        max_header_list_size: 60_000,
        max_field_size: 12_000,
        ..Config::default()
    };
    // The same exchanges over inline buffers, for the expected log.
    let mut ci = Conn::<InlineStorage<BUF>>::new(Role::Client, config, Instant::ZERO);
    let mut si = Box::new(Conn::<InlineStorage<BUF>>::new(
        Role::Server,
        config,
        Instant::ZERO,
    ));
    let expected = exchange(&mut ci, &mut si, 40, 5, &mut || {});

    let (cb, cpool) = Counting::new();
    let (sb, spool) = Counting::new();
    let mut client = Conn::with_buffers(Role::Client, config, Instant::ZERO, cb);
    let mut server = Conn::with_buffers(Role::Server, config, Instant::ZERO, sb);
    let mut idle_checks = 0;
    let log = exchange(&mut client, &mut server, 40, 5, &mut || {
        assert_eq!(cpool.out.get(), 0, "client holds buffers while idle");
        assert_eq!(spool.out.get(), 0, "server holds buffers while idle");
        idle_checks += 1;
    });
    assert_eq!(idle_checks, 8);
    assert_eq!(log, expected);
    assert!(log.iter().any(|l| l.contains("x-big")), "{:?}", &log[..20]);
    // Each side took buffers along the way, and the headers of the big
    // requests needed the block across CONTINUATION frames.
    assert!(cpool.acquired.get() >= 40 && spool.acquired.get() >= 80);
    assert_eq!(cpool.refused.get() + spool.refused.get(), 0);
}

fn pair() -> (Conn<Counting>, Rc<Pool>, Conn<Counting>, Rc<Pool>) {
    let (cb, cpool) = Counting::new();
    let (sb, spool) = Counting::new();
    let client = Conn::with_buffers(Role::Client, Config::default(), Instant::ZERO, cb);
    let server = Conn::with_buffers(Role::Server, Config::default(), Instant::ZERO, sb);
    (client, cpool, server, spool)
}

#[test]
fn a_refused_header_list_refuses_the_stream() {
    let (mut client, _, mut server, spool) = pair();
    let mut log = Vec::new();
    pump(&mut client, &mut server, &mut log, &mut |_, _, _| {});
    pump(&mut server, &mut client, &mut log, &mut |_, _, _| {});
    spool.refuse.set([false, true, false]);
    let s = client.open_stream().unwrap();
    client
        .send_headers(s, as_fields(&request("/a", 0)), true)
        .unwrap();
    for _ in 0..3 {
        pump(&mut client, &mut server, &mut log, &mut serve(10));
        pump(&mut server, &mut client, &mut log, &mut |_, _, _| {});
        drain(&mut client, &mut log, &mut |_, _, _| {});
    }
    assert!(spool.refused.get() > 0);
    assert!(
        log.iter().any(|l| l == "reset RefusedStream true"
            || l == &format!("reset {:?} true", ErrorCode::REFUSED_STREAM)),
        "{log:?}"
    );
    assert!(!log.iter().any(|l| l.starts_with("headers Request")));
    assert_eq!(spool.out.get(), 0);
    // The connection lives on: with the buffer back, the next call works.
    spool.refuse.set([false; 3]);
    log.clear();
    let s = client.open_stream().unwrap();
    client
        .send_headers(s, as_fields(&request("/b", 0)), true)
        .unwrap();
    for _ in 0..3 {
        pump(&mut client, &mut server, &mut log, &mut serve(10));
        pump(&mut server, &mut client, &mut log, &mut |_, _, _| {});
        drain(&mut client, &mut log, &mut |_, _, _| {});
    }
    assert!(
        log.iter().any(|l| l.starts_with("headers Trailers true")),
        "{log:?}"
    );
    assert_eq!(spool.out.get(), 0);
}

#[test]
fn a_refused_block_buffer_ends_the_connection_with_enhance_your_calm() {
    let (mut client, _, mut server, spool) = pair();
    let mut log = Vec::new();
    pump(&mut client, &mut server, &mut log, &mut |_, _, _| {});
    pump(&mut server, &mut client, &mut log, &mut |_, _, _| {});
    spool.refuse.set([true, false, false]);
    let s = client.open_stream().unwrap();
    client
        .send_headers(s, as_fields(&request("/a", 0)), true)
        .unwrap();
    for _ in 0..3 {
        pump(&mut client, &mut server, &mut log, &mut |_, _, _| {});
        pump(&mut server, &mut client, &mut log, &mut |_, _, _| {});
        drain(&mut client, &mut log, &mut |_, _, _| {});
    }
    let goaway = format!("code: {:?} }}", ErrorCode::ENHANCE_YOUR_CALM);
    assert!(
        log.iter()
            .any(|l| l.starts_with("GoAway") && l.ends_with(&goaway)),
        "{log:?}"
    );
    assert!(server.error().is_some());
    assert_eq!(spool.out.get(), 0);
}

#[test]
fn a_refused_transmit_buffer_is_backpressure() {
    let (mut client, _, mut server, spool) = pair();
    let mut log = Vec::new();
    pump(&mut client, &mut server, &mut log, &mut |_, _, _| {});
    pump(&mut server, &mut client, &mut log, &mut |_, _, _| {});
    let s = client.open_stream().unwrap();
    client
        .send_headers(s, as_fields(&request("/a", 0)), true)
        .unwrap();
    spool.refuse.set([false, false, true]);
    let mut seen = None;
    pump(&mut client, &mut server, &mut log, &mut |c, s, text| {
        if text.starts_with("headers Request") {
            assert_eq!(
                c.send_headers(s, [Field::new(b":status", b"200")], true),
                Err(StreamError::TransmitFull)
            );
            seen = Some(s);
        }
    });
    let stream = seen.expect("the request arrived");
    // No room: nothing goes out and no wake-up while the buffer is refused.
    assert_eq!(
        pump(&mut server, &mut client, &mut log, &mut |_, _, _| {}),
        0
    );
    assert!(server.poll_event().is_none());
    assert!(spool.refused.get() >= 2);
    // Room again: the next poll_transmit wakes the stream.
    spool.refuse.set([false; 3]);
    let mut out = [0u8; 64];
    assert_eq!(server.poll_transmit(&mut out), 0);
    let mut woke = Vec::new();
    drain(&mut server, &mut woke, &mut |c, s, text| {
        if text == "ready" {
            assert_eq!(s, stream);
            c.send_headers(s, [Field::new(b":status", b"200")], true)
                .unwrap();
        }
    });
    assert_eq!(woke, ["ready", "closed"]);
    pump(&mut server, &mut client, &mut log, &mut |_, _, _| {});
    drain(&mut client, &mut log, &mut |_, _, _| {});
    assert!(
        log.iter().any(|l| l.starts_with("headers Response true")),
        "{log:?}"
    );
    assert_eq!(spool.out.get(), 0);
}
