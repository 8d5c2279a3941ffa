//! The HTTP/1.1 client pieces as a client reads a connection: response
//! heads, bodies framed by RFC 9112 §6.3 (none, length, chunked, until
//! close), keep-alive, malformed and truncated responses, and server-sent
//! events (WHATWG HTML §9.2) checked against a plain reference reading.
//! Every input is fed whole, byte at a time and in random pieces, and
//! must read the same every way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_core::http1::chunked::ChunkError;
use mcpwire_core::http1::client::{ClientConnection, StartError};
use mcpwire_core::http1::head::EMPTY_HEADER;
use mcpwire_core::http1::sse::MAX_EVENT_NAME;
use mcpwire_core::http1::{
    HttpError, MAX_HEADERS, MediaType, ResponseEvent, SseError, SseParser, Version,
};
use mcpwire_sim::{Pieces, Rng, Split};

/// The splits every input is read under: the shared ones, and many
/// random cuts into small pieces (a CR and its LF apart, a chunk size
/// line cut).
fn splits() -> Vec<Split> {
    let mut all = Split::ALL.to_vec();
    all.extend((1..40).map(|seed| Split::Random { seed, max: 7 }));
    all
}

/// What a client saw of a connection, data runs joined.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Head(u16),
    Body(Vec<u8>),
    End { keep_alive: bool },
    Failed(HttpError),
}

fn push_data(seen: &mut Vec<Seen>, data: &[u8]) {
    if let Some(Seen::Body(body)) = seen.last_mut() {
        body.extend_from_slice(data);
    } else {
        seen.push(Seen::Body(data.to_vec()));
    }
}

/// Reads `input` on one connection for requests of `methods`, one after
/// the other (each started when the last ended with keep-alive), fed in
/// the pieces `split` cuts, then the server's close when `eof`.
fn read(input: &[u8], methods: &[&str], eof: bool, split: Split) -> Vec<Seen> {
    let mut c = ClientConnection::<1024>::new();
    let mut methods = methods.iter();
    c.start(methods.next().unwrap()).unwrap();
    let mut pieces = Pieces::new(split);
    let mut seen = Vec::new();
    let mut pending = Vec::new();
    let mut pos = 0;
    loop {
        let n = pieces.next(input.len() - pos);
        pending.extend_from_slice(&input[pos..pos + n]);
        pos += n;
        loop {
            let r = c.recv(&pending);
            assert!(r.consumed <= pending.len());
            let event = r.event.clone();
            if let Some(ResponseEvent::Data(range)) = &event {
                assert!(!range.is_empty() && range.end <= r.consumed, "{range:?}");
                push_data(&mut seen, &pending[range.clone()]);
            }
            pending.drain(..r.consumed);
            match event {
                None => break,
                Some(ResponseEvent::Data(_)) => {}
                Some(ResponseEvent::Head { status }) => {
                    let mut fields = [EMPTY_HEADER; MAX_HEADERS];
                    assert_eq!(c.head(&mut fields).unwrap().status, status);
                    seen.push(Seen::Head(status));
                }
                Some(ResponseEvent::End { keep_alive }) => {
                    seen.push(Seen::End { keep_alive });
                    if keep_alive {
                        assert!(c.is_idle());
                        if let Some(m) = methods.next() {
                            c.start(m).unwrap();
                        }
                    } else {
                        assert!(c.is_closed());
                    }
                }
                Some(ResponseEvent::Failed(e)) => {
                    assert!(c.is_closed());
                    seen.push(Seen::Failed(e));
                    return seen;
                }
            }
        }
        if pos == input.len() {
            break;
        }
    }
    if eof {
        match c.recv_eof() {
            Some(ResponseEvent::End { keep_alive }) => seen.push(Seen::End { keep_alive }),
            Some(ResponseEvent::Failed(e)) => seen.push(Seen::Failed(e)),
            Some(other) => panic!("{other:?} at eof"),
            None => {}
        }
    }
    seen
}

/// `read` under every split, which must all agree; the common reading.
fn read_every_way(input: &[u8], methods: &[&str], eof: bool) -> Vec<Seen> {
    let whole = read(input, methods, eof, Split::Whole);
    for split in splits() {
        assert_eq!(
            read(input, methods, eof, split),
            whole,
            "{split:?}: {}",
            String::from_utf8_lossy(input)
        );
    }
    whole
}

fn body(data: &[u8]) -> Seen {
    Seen::Body(data.to_vec())
}

const END: Seen = Seen::End { keep_alive: true };
const END_CLOSE: Seen = Seen::End { keep_alive: false };

#[test]
fn reads_a_json_response_framed_by_length() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Type: Application/JSON; charset=utf-8\r\nContent-Length: 12\r\n\r\n{\"result\":1}";
    assert_eq!(
        read_every_way(input, &["POST"], false),
        [Seen::Head(200), body(b"{\"result\":1}"), END]
    );
    let mut c = ClientConnection::<1024>::new();
    c.start("POST").unwrap();
    let r = c.recv(input);
    assert_eq!(r.event, Some(ResponseEvent::Head { status: 200 }));
    let mut fields = [EMPTY_HEADER; MAX_HEADERS];
    let head = c.head(&mut fields).unwrap();
    assert_eq!(head.content_type(), MediaType::Json);
    assert_eq!(head.version, Version::Http11);
    assert_eq!(head.header(b"content-length"), Some(&b"12"[..]));
}

#[test]
fn reads_a_chunked_event_stream_with_trailers() {
    let input =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n\
        7;ext=1\r\ndata: a\r\n2\r\n\n\n\r\n0\r\nX-Trailer: t\r\n\r\n";
    assert_eq!(
        read_every_way(input, &["POST"], false),
        [Seen::Head(200), body(b"data: a\n\n"), END]
    );
}

#[test]
fn keeps_the_connection_for_the_next_exchange_until_close_is_asked() {
    let input = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi\
        HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\nx";
    assert_eq!(
        read_every_way(input, &["POST", "POST", "GET"], false),
        [
            Seen::Head(202),
            END,
            Seen::Head(200),
            body(b"hi"),
            END,
            Seen::Head(200),
            body(b"x"),
            END_CLOSE
        ]
    );
    // HTTP/1.0 stays open only when asked.
    let input = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx";
    assert_eq!(
        read_every_way(input, &["POST"], false),
        [Seen::Head(200), body(b"x"), END_CLOSE]
    );
    let input = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx";
    assert_eq!(
        read_every_way(input, &["POST"], false),
        [Seen::Head(200), body(b"x"), END]
    );
}

#[test]
fn statuses_and_head_requests_without_a_body_ignore_the_framing_fields() {
    // 1xx are skipped; 204 and 304 have no body whatever their fields say,
    // so what follows is the next response's.
    let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
        HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n\
        HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    assert_eq!(
        read_every_way(input, &["POST", "GET", "HEAD"], false),
        [
            Seen::Head(204),
            END,
            Seen::Head(304),
            END,
            Seen::Head(200),
            END
        ]
    );
    // A 101 was not asked for.
    assert_eq!(
        read_every_way(b"HTTP/1.1 101 Switching Protocols\r\n\r\n", &["GET"], false),
        [Seen::Failed(HttpError::MalformedHead(
            "101 switching protocols was not asked for"
        ))]
    );
}

#[test]
fn a_body_without_framing_runs_until_the_server_closes() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html>";
    assert_eq!(
        read_every_way(input, &["POST"], true),
        [Seen::Head(200), body(b"<html>"), END_CLOSE]
    );
    // Without the close, it has not ended.
    assert_eq!(
        read_every_way(input, &["POST"], false),
        [Seen::Head(200), body(b"<html>")]
    );
}

#[test]
fn content_length_lists_must_agree() {
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc";
    assert_eq!(
        read_every_way(ok, &["POST"], false),
        [Seen::Head(200), body(b"abc"), END]
    );
    for (fields, why) in [
        (
            &b"Content-Length: 3, 4\r\n"[..],
            "conflicting content-length",
        ),
        (
            b"Content-Length: 3\r\nContent-Length: 4\r\n",
            "conflicting content-length",
        ),
        (b"Content-Length: -3\r\n", "invalid content-length"),
        (b"Content-Length: 0x3\r\n", "invalid content-length"),
        (
            b"Content-Length: 99999999999999999999\r\n",
            "invalid content-length",
        ),
        (
            b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
            "both transfer-encoding and content-length",
        ),
        (
            b"Transfer-Encoding: gzip\r\n",
            "unsupported transfer coding",
        ),
        (
            b"Transfer-Encoding: chunked, chunked\r\n",
            "chunked applied twice",
        ),
    ] {
        let mut input = b"HTTP/1.1 200 OK\r\n".to_vec();
        input.extend_from_slice(fields);
        input.extend_from_slice(b"\r\n3\r\nabc\r\n0\r\n\r\n");
        assert_eq!(
            read_every_way(&input, &["POST"], false),
            [Seen::Failed(HttpError::MalformedHead(why))],
            "{}",
            String::from_utf8_lossy(fields)
        );
    }
    // Transfer-Encoding on HTTP/1.0 is refused too.
    let input = b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    assert_eq!(
        read_every_way(input, &["POST"], false),
        [Seen::Failed(HttpError::MalformedHead(
            "transfer-encoding on HTTP/1.0"
        ))]
    );
}

#[test]
fn truncated_responses_are_errors() {
    for input in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"[..],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",
    ] {
        let seen = read_every_way(input, &["POST"], true);
        assert_eq!(seen.first(), Some(&Seen::Head(200)));
        assert_eq!(seen.last(), Some(&Seen::Failed(HttpError::Truncated)));
    }
    assert_eq!(
        read_every_way(b"HTTP/1.1 200 OK\r\nContent-Le", &["POST"], true),
        [Seen::Failed(HttpError::Truncated)]
    );
    // A close with nothing outstanding is no event.
    let mut c = ClientConnection::<64>::new();
    assert_eq!(c.recv_eof(), None);
}

#[test]
fn bad_chunks_are_errors() {
    for (chunks, e) in [
        (&b"zz\r\n"[..], ChunkError::BadSize),
        (b"3\r\nabcX\r\n0\r\n\r\n", ChunkError::BadLineEnd),
        (b"11111111111111111\r\n", ChunkError::BadSize),
        (b"3\nabc\r\n", ChunkError::BadSize),
    ] {
        let mut input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        input.extend_from_slice(chunks);
        let seen = read_every_way(&input, &["POST"], false);
        assert_eq!(
            seen.last(),
            Some(&Seen::Failed(HttpError::BadChunk(e))),
            "{}",
            String::from_utf8_lossy(chunks)
        );
    }
}

#[test]
fn malformed_heads_are_errors() {
    for input in [
        &b"HTTP/2 200 OK\r\n\r\n"[..],
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 OK\r\n\r\n",
        b"<html>\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
    ] {
        let seen = read_every_way(input, &["POST"], false);
        assert!(
            matches!(seen.as_slice(), [Seen::Failed(HttpError::MalformedHead(_))]),
            "{}: {seen:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn a_head_over_the_bound_is_refused_without_growing() {
    // 1024 octets of head allowed by `read`.
    let mut input = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
    input.resize(1100, b'a');
    input.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(
        read_every_way(&input, &["GET"], false),
        [Seen::Failed(HttpError::HeadTooLarge)]
    );
    // Exactly at the bound it is read.
    let mut input = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Big: ".to_vec();
    input.resize(1024 - 4, b'a');
    input.extend_from_slice(b"\r\n\r\n");
    assert_eq!(
        read_every_way(&input, &["GET"], false),
        [Seen::Head(200), END]
    );
    // More fields than the parser keeps.
    let mut input = b"HTTP/1.1 200 OK\r\n".to_vec();
    for _ in 0..=MAX_HEADERS {
        input.extend_from_slice(b"A: b\r\n");
    }
    input.extend_from_slice(b"\r\n");
    assert_eq!(
        read_every_way(&input, &["GET"], false),
        [Seen::Failed(HttpError::HeadTooLarge)]
    );
}

#[test]
fn one_exchange_at_a_time_and_nothing_unasked() {
    let mut c = ClientConnection::<256>::new();
    let r = c.recv(b"HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!(r.event, Some(ResponseEvent::Failed(HttpError::Unsolicited)));
    assert_eq!(c.start("GET"), Err(StartError::Closed));
    let mut c = ClientConnection::<256>::new();
    c.start("GET").unwrap();
    assert_eq!(c.start("GET"), Err(StartError::Busy));
    // Octets after a complete response, before the next request.
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n";
    assert_eq!(
        read_every_way(input, &["GET"], false),
        [Seen::Head(200), END, Seen::Failed(HttpError::Unsolicited)]
    );
}

// --- server-sent events ----------------------------------------------------

/// What a stream gave: its events (type, data), or the error, and the
/// retry and last event ID at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stream {
    events: Vec<(Vec<u8>, Vec<u8>)>,
    error: Option<SseError>,
    retry: Option<u32>,
    id: Option<Vec<u8>>,
    mid_event: bool,
}

/// Parses `input` fed in the pieces `split` cuts, into a buffer of `limit`.
fn parse(input: &[u8], limit: usize, split: Split) -> Stream {
    let mut p = SseParser::new();
    let mut out = vec![0u8; limit];
    let mut pieces = Pieces::new(split);
    let mut s = Stream {
        events: Vec::new(),
        error: None,
        retry: None,
        id: None,
        mid_event: false,
    };
    let mut pos = 0;
    'outer: while pos < input.len() {
        let n = pieces.next(input.len() - pos);
        let mut piece = &input[pos..pos + n];
        pos += n;
        loop {
            match p.feed(piece, &mut out) {
                Ok(f) => {
                    assert!(f.consumed <= piece.len());
                    piece = &piece[f.consumed..];
                    match f.event {
                        Some(e) => s
                            .events
                            .push((e.name().to_vec(), out[..e.data_len].to_vec())),
                        None => {
                            assert!(piece.is_empty(), "input left without an event");
                            break;
                        }
                    }
                }
                Err(e) => {
                    s.error = Some(e);
                    // It stays failed.
                    assert_eq!(p.feed(b"\n\n", &mut out), Err(e));
                    break 'outer;
                }
            }
        }
    }
    s.retry = p.retry();
    s.id = p.last_event_id().map(<[u8]>::to_vec);
    s.mid_event = p.mid_event();
    s
}

fn parse_every_way(input: &[u8], limit: usize) -> Stream {
    let whole = parse(input, limit, Split::Whole);
    for split in splits() {
        assert_eq!(
            parse(input, limit, split),
            whole,
            "{split:?}: {:?}",
            String::from_utf8_lossy(input)
        );
    }
    whole
}

/// The stream read the plain way WHATWG HTML §9.2.6 writes it: split
/// into lines first, a growing data buffer with an LF after each line.
fn reference(input: &[u8], limit: usize) -> Stream {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let mut lines = Vec::new();
    let mut line = Vec::new();
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'\r' => {
                lines.push(std::mem::take(&mut line));
                if input.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            }
            b'\n' => lines.push(std::mem::take(&mut line)),
            b => line.push(b),
        }
        i += 1;
    }
    let mut s = Stream {
        events: Vec::new(),
        error: None,
        retry: None,
        id: None,
        mid_event: !line.is_empty(),
    };
    let (mut data, mut name) = (Vec::new(), Vec::new());
    for l in lines {
        if l.is_empty() {
            if !data.is_empty() {
                data.pop();
                let ty = if name.is_empty() {
                    b"message".to_vec()
                } else {
                    name.clone()
                };
                s.events.push((ty, std::mem::take(&mut data)));
            }
            data.clear();
            name.clear();
            continue;
        }
        if l[0] == b':' {
            continue;
        }
        let (field, value) = match l.iter().position(|&b| b == b':') {
            Some(k) => {
                let v = &l[k + 1..];
                (&l[..k], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&l[..], &b""[..]),
        };
        match field {
            b"data" => {
                data.extend_from_slice(value);
                data.push(b'\n');
                // Ours holds the data without the last LF.
                if data.len() - 1 > limit {
                    s.error = Some(SseError::EventTooLarge { limit });
                    return s;
                }
            }
            b"event" => {
                if value.len() > MAX_EVENT_NAME {
                    s.error = Some(SseError::EventNameTooLong);
                    return s;
                }
                name = value.to_vec();
            }
            b"id" if !value.contains(&0) => {
                s.id = (value.len() <= 64).then(|| value.to_vec());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                s.retry = Some(value.iter().fold(0u32, |n, &b| {
                    n.saturating_mul(10).saturating_add(u32::from(b - b'0'))
                }));
            }
            _ => {}
        }
    }
    // An unfinished last line takes no effect, but ours writes its value
    // as it comes: its bounds are checked already.
    if let Some(k) = line.iter().position(|&b| b == b':') {
        let value = &line[k + 1..];
        let value = value.strip_prefix(b" ").unwrap_or(value);
        let too_large = match &line[..k] {
            b"data" => {
                (data.len() + value.len() > limit).then_some(SseError::EventTooLarge { limit })
            }
            b"event" => (value.len() > MAX_EVENT_NAME).then_some(SseError::EventNameTooLong),
            _ => None,
        };
        if too_large.is_some() {
            s.error = too_large;
            return s;
        }
    }
    s.mid_event |= !data.is_empty();
    s
}

#[test]
fn events_with_every_line_end_and_field() {
    let input = b"\xEF\xBB\xBF: a comment\r\nretry: 1500\r\nid: 7\r\n\
        event: message\rdata: {\"a\":1}\r\n\r\
        data:two\ndata: lines\n:x\nunknown: f\ndata\n\n\
        event:note\r\ndata: a:b:c\r\n\r\n\
        id\nretry: 12x\ndata: \xEF\xBB\xBFkept\n\n";
    let s = parse_every_way(input, 64);
    assert_eq!(s, reference(input, 64));
    assert_eq!(
        s.events,
        [
            (b"message".to_vec(), b"{\"a\":1}".to_vec()),
            (b"message".to_vec(), b"two\nlines\n".to_vec()),
            (b"note".to_vec(), b"a:b:c".to_vec()),
            (b"message".to_vec(), b"\xEF\xBB\xBFkept".to_vec()),
        ]
    );
    // retry 12x is ignored; `id` alone resets the last ID to empty.
    assert_eq!((s.retry, s.id.as_deref()), (Some(1500), Some(&b""[..])));
    assert!(!s.mid_event);
}

#[test]
fn a_bom_only_at_the_start_and_only_once() {
    let s = parse_every_way(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n", 16);
    assert_eq!(s.events, [(b"message".to_vec(), b"y".to_vec())]);
    // Half a BOM makes the first line an unknown field.
    let s = parse_every_way(b"\xEF\xBBdata: x\n\ndata: y\n\n", 16);
    assert_eq!(s.events, [(b"message".to_vec(), b"y".to_vec())]);
}

#[test]
fn events_without_data_and_unfinished_events_are_not_dispatched() {
    let s = parse_every_way(b"event: x\n\nid: 1\n\n: ping\n\ndata: cut", 16);
    assert!(s.events.is_empty());
    assert!(s.mid_event);
    assert_eq!(s.id.as_deref(), Some(&b"1"[..]));
    // An id with a NUL is ignored; a long one leaves the ID unknown.
    let s = parse_every_way(b"id: 5\nid: a\0b\ndata\n\n", 16);
    assert_eq!(s.id.as_deref(), Some(&b"5"[..]));
    let mut long = b"id: ".to_vec();
    long.resize(4 + 65, b'i');
    long.extend_from_slice(b"\n");
    assert_eq!(parse_every_way(&long, 16).id, None);
}

#[test]
fn an_event_larger_than_the_buffer_is_an_error_not_growth() {
    // 16 octets of data fit a 16-octet buffer; 17 do not.
    let s = parse_every_way(b"data: 0123456\ndata: 89abcdef\n\n", 16);
    assert_eq!(
        s.events,
        [(b"message".to_vec(), b"0123456\n89abcdef".to_vec())]
    );
    let s = parse_every_way(b"data: 0123456\ndata: 89abcdefg\n\n", 16);
    assert_eq!(s.error, Some(SseError::EventTooLarge { limit: 16 }));
    assert!(s.events.is_empty());
    // The buffer is per event: many events of 16 fit one after another.
    let many = b"data: 0123456789abcdef\n\n".repeat(20);
    assert_eq!(parse_every_way(&many, 16).events.len(), 20);
    let mut named = b"event: ".to_vec();
    named.resize(7 + MAX_EVENT_NAME + 1, b'n');
    named.extend_from_slice(b"\ndata: x\n\n");
    assert_eq!(
        parse_every_way(&named, 16).error,
        Some(SseError::EventNameTooLong)
    );
}

#[test]
fn random_streams_read_as_the_reference_reads_them() {
    const TOKENS: [&[u8]; 20] = [
        b"data",
        b"data:",
        b"data: ",
        b"event:",
        b"event: ping",
        b"id:",
        b"id: 9",
        b"retry:",
        b"retry: 30",
        b":",
        b" ",
        b"x",
        b"\r",
        b"\n",
        b"\r\n",
        b"\n\n",
        b"12",
        b"\0",
        b"message",
        b"\xEF\xBB\xBF",
    ];
    for seed in 0..400 {
        let mut rng = Rng::new(seed);
        let mut input = Vec::new();
        for _ in 0..rng.range(1, 60) {
            input.extend_from_slice(TOKENS[rng.range(0, TOKENS.len() - 1)]);
        }
        let limit = rng.range(0, 24);
        let want = reference(&input, limit);
        let got = parse_every_way(&input, limit);
        if want.error.is_some() {
            // The reference stops at the line; ours at the octet: the
            // events before it agree.
            assert_eq!(got.error, want.error, "seed {seed}");
            assert_eq!(got.events, want.events, "seed {seed}");
        } else {
            assert_eq!(
                got,
                want,
                "seed {seed}: {:?}",
                String::from_utf8_lossy(&input)
            );
        }
    }
}
