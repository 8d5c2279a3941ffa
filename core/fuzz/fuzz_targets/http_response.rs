//! `http_response`: arbitrary octets as the server's side of one HTTP/1.1
//! client connection (`ClientConnection`), after a request (`HEAD` or
//! not), optionally behind a status line and framing fields the fuzzer
//! picks, then optionally the server's close. Nothing may panic; every
//! data range lies in what the call consumed; the head stays within its
//! bound; and the octets fed whole or in the fuzzer's pieces must read the
//! same (events, body octets, the final state).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http1::head::EMPTY_HEADER;
use mcpwire_core::http1::{ClientConnection, MAX_HEADERS, ResponseEvent};

const HEAD: usize = 512;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Prefix {
    Nothing,
    Status,
    Length,
    Chunked,
    Continue,
}

impl Prefix {
    fn octets(self) -> &'static [u8] {
        match self {
            Self::Nothing => b"",
            Self::Status => b"HTTP/1.1 200 OK\r\n",
            Self::Length => b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n",
            Self::Chunked => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            Self::Continue => b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n",
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    head_request: bool,
    keep_going: bool,
    eof: bool,
    prefix: Prefix,
    bytes: Vec<u8>,
    pieces: Vec<u8>,
}

/// What the client saw: events with data runs joined, and the final state.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Head(u16),
    Body(Vec<u8>),
    End(bool),
    Failed(&'static str),
}

fn read(input: &Input, stream: &[u8], pieces: &[u8]) -> (Vec<Seen>, bool, bool) {
    let mut c = ClientConnection::<HEAD>::new();
    let method = if input.head_request { "HEAD" } else { "POST" };
    c.start(method).unwrap();
    let mut seen = Vec::new();
    let mut pending = Vec::new();
    let mut sizes = pieces.iter().map(|&p| usize::from(p) + 1);
    let mut pos = 0;
    'feed: while pos < stream.len() {
        let n = sizes.next().unwrap_or(stream.len()).min(stream.len() - pos);
        pending.extend_from_slice(&stream[pos..pos + n]);
        pos += n;
        loop {
            let r = c.recv(&pending);
            assert!(r.consumed <= pending.len());
            match r.event {
                None => {
                    pending.drain(..r.consumed);
                    break;
                }
                Some(ResponseEvent::Data(range)) => {
                    assert!(!range.is_empty() && range.end <= r.consumed);
                    let data = &pending[range];
                    if let Some(Seen::Body(b)) = seen.last_mut() {
                        b.extend_from_slice(data);
                    } else {
                        seen.push(Seen::Body(data.to_vec()));
                    }
                }
                Some(ResponseEvent::Head { status }) => {
                    let mut fields = [EMPTY_HEADER; MAX_HEADERS];
                    let head = c.head(&mut fields).expect("the head is kept");
                    assert_eq!(head.status, status);
                    assert!(status >= 200);
                    seen.push(Seen::Head(status));
                }
                Some(ResponseEvent::End { keep_alive }) => {
                    seen.push(Seen::End(keep_alive));
                    assert_eq!(c.is_idle(), keep_alive);
                    if keep_alive && input.keep_going {
                        c.start(method).unwrap();
                    }
                }
                Some(ResponseEvent::Failed(e)) => {
                    assert!(c.is_closed());
                    seen.push(Seen::Failed(e.reason()));
                    break 'feed;
                }
            }
            pending.drain(..r.consumed);
        }
    }
    if input.eof && !c.is_closed() {
        match c.recv_eof() {
            Some(ResponseEvent::End { keep_alive }) => seen.push(Seen::End(keep_alive)),
            Some(ResponseEvent::Failed(e)) => seen.push(Seen::Failed(e.reason())),
            Some(other) => panic!("{other:?} at eof"),
            None => {}
        }
        assert!(c.is_closed());
    }
    (seen, c.is_idle(), c.is_closed())
}

fuzz_target!(|input: Input| {
    let mut stream = input.prefix.octets().to_vec();
    stream.extend_from_slice(&input.bytes);
    let whole = read(&input, &stream, &[]);
    let split = read(&input, &stream, &input.pieces);
    assert_eq!(whole, split);
    let bytewise = read(&input, &stream, &vec![0; stream.len()]);
    assert_eq!(whole, bytewise);
});
