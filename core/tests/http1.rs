//! The HTTP/1.1 pieces together, as a server reads a connection: heads
//! found and parsed, bodies framed by length or chunks, split at every
//! octet, and responses written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_core::http1::head::EMPTY_HEADER;
use mcpwire_core::http1::write::{self, HeadWriter};
use mcpwire_core::http1::{BodyFraming, ChunkedDecoder, HeadScanner, RequestHead, Version};
use mcpwire_sim::{Pieces, Split};

/// One request as a reader saw it.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    method: String,
    path: String,
    keep_alive: bool,
    body: Vec<u8>,
}

/// Reads every request of `input`, fed in the pieces `split` cuts.
fn read_all(input: &[u8], split: Split) -> Vec<Seen> {
    let mut pieces = Pieces::new(split);
    let mut seen = Vec::new();
    let mut head = Vec::new();
    let mut scanner = HeadScanner::new();
    let mut body: Option<(BodyFraming, ChunkedDecoder, Vec<u8>, Seen)> = None;
    let mut pos = 0;
    while pos < input.len() {
        let n = pieces.next(input.len() - pos).max(1);
        let mut piece = &input[pos..pos + n];
        pos += n;
        while !piece.is_empty() {
            if let Some((framing, decoder, data, _)) = body.as_mut() {
                let done = match framing {
                    BodyFraming::Length(left) => {
                        let k = (*left as usize).min(piece.len());
                        data.extend_from_slice(&piece[..k]);
                        piece = &piece[k..];
                        *left -= k as u64;
                        *left == 0
                    }
                    BodyFraming::Chunked => {
                        let c = decoder.feed(piece).unwrap();
                        data.extend_from_slice(&piece[c.data.clone()]);
                        piece = &piece[c.consumed..];
                        c.done
                    }
                    BodyFraming::None => true,
                };
                if done {
                    let (_, _, data, mut s) = body.take().unwrap();
                    s.body = data;
                    seen.push(s);
                }
                continue;
            }
            match scanner.scan(piece) {
                None => {
                    head.extend_from_slice(piece);
                    piece = &[];
                }
                Some(end) => {
                    head.extend_from_slice(&piece[..end]);
                    piece = &piece[end..];
                    let mut fields = [EMPTY_HEADER; 16];
                    let h = RequestHead::parse(&head, &mut fields).unwrap();
                    let s = Seen {
                        method: h.method.to_owned(),
                        path: h.path().to_owned(),
                        keep_alive: h.keep_alive(),
                        body: Vec::new(),
                    };
                    match h.body().unwrap() {
                        BodyFraming::None => seen.push(s),
                        framing => {
                            body = Some((framing, ChunkedDecoder::new(), Vec::new(), s));
                        }
                    }
                    head.clear();
                }
            }
        }
    }
    assert!(body.is_none() && head.is_empty(), "a message was cut short");
    seen
}

const PIPELINED: &[u8] = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}\
POST /mcp?q HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"b\r\n4;x=y\r\n\":2}\r\n0\r\nTrailer: t\r\n\r\n\
GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

#[test]
fn pipelined_requests_read_the_same_in_any_pieces() {
    let want = vec![
        Seen {
            method: "POST".into(),
            path: "/mcp".into(),
            keep_alive: true,
            body: b"{\"a\":1}".to_vec(),
        },
        Seen {
            method: "POST".into(),
            path: "/mcp".into(),
            keep_alive: true,
            body: b"{\"b\":2}".to_vec(),
        },
        Seen {
            method: "GET".into(),
            path: "/other".into(),
            keep_alive: false,
            body: Vec::new(),
        },
    ];
    for split in Split::ALL {
        assert_eq!(read_all(PIPELINED, split), want, "{split:?}");
    }
}

#[test]
fn an_http10_head_closes_and_has_no_chunks() {
    let mut fields = [EMPTY_HEADER; 4];
    let h = RequestHead::parse(
        b"POST /mcp HTTP/1.0\r\nContent-Length: 2\r\n\r\n",
        &mut fields,
    )
    .unwrap();
    assert_eq!(h.version, Version::Http10);
    assert!(!h.keep_alive());
    assert_eq!(h.body(), Ok(BodyFraming::Length(2)));
    let mut fields = [EMPTY_HEADER; 4];
    let e = RequestHead::parse(
        b"POST /mcp HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        &mut fields,
    )
    .unwrap_err();
    assert_eq!(e.status(), 400);
}

#[test]
fn an_event_stream_response_reads_back_as_events() {
    let mut out = vec![0u8; 512];
    let mut w = HeadWriter::new(&mut out, 200);
    for (name, value) in write::SSE_FIELDS {
        w.field(name, value);
    }
    w.field("Transfer-Encoding", b"chunked");
    let mut n = w.finish().unwrap();
    for json in [&b"{\"a\":1}"[..], b"{\"id\":1,\"result\":{}}"] {
        n += write::sse_event_prefix(json.len(), true, &mut out[n..]).unwrap();
        out[n..n + json.len()].copy_from_slice(json);
        n += json.len();
        let end = write::sse_event_suffix(true);
        out[n..n + end.len()].copy_from_slice(end);
        n += end.len();
    }
    out[n..n + write::SSE_KEEP_ALIVE_CHUNK.len()].copy_from_slice(write::SSE_KEEP_ALIVE_CHUNK);
    n += write::SSE_KEEP_ALIVE_CHUNK.len();
    out[n..n + write::LAST_CHUNK.len()].copy_from_slice(write::LAST_CHUNK);
    n += write::LAST_CHUNK.len();
    let text = &out[..n];
    let body_at = text.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = std::str::from_utf8(&text[..body_at]).unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"));
    assert!(head.contains("content-type: text/event-stream\r\n"));
    assert!(head.contains("cache-control: no-cache\r\n"));
    assert!(head.contains("x-accel-buffering: no\r\n"));
    // The body, de-chunked by the same decoder a client would use.
    let mut d = ChunkedDecoder::new();
    let mut rest = &text[body_at..];
    let mut body = Vec::new();
    loop {
        let c = d.feed(rest).unwrap();
        body.extend_from_slice(&rest[c.data.clone()]);
        rest = &rest[c.consumed..];
        if c.done {
            break;
        }
    }
    assert!(rest.is_empty());
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        "data: {\"a\":1}\n\ndata: {\"id\":1,\"result\":{}}\n\n: \n\n"
    );
}
