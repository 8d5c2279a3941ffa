//! `sse_parse`: arbitrary octets as an event stream (`SseParser`), into a
//! buffer of a size the fuzzer picks, fed whole and in the fuzzer's
//! pieces. Nothing may panic; an event's data fits the buffer; input is
//! taken whole unless an event ends it; an error is final; and every
//! delivery gives the same events, error, retry and last event ID.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http1::{SseError, SseParser};

#[derive(Arbitrary, Debug)]
struct Input {
    limit: u8,
    bytes: Vec<u8>,
    pieces: Vec<u8>,
}

#[derive(Debug, PartialEq, Eq)]
struct Seen {
    events: Vec<(Vec<u8>, Vec<u8>)>,
    error: Option<SseError>,
    retry: Option<u32>,
    id: Option<Vec<u8>>,
    mid_event: bool,
}

fn parse(stream: &[u8], limit: usize, pieces: &[u8]) -> Seen {
    let mut p = SseParser::new();
    let mut out = vec![0u8; limit];
    let mut seen = Seen {
        events: Vec::new(),
        error: None,
        retry: None,
        id: None,
        mid_event: false,
    };
    let mut sizes = pieces.iter().map(|&p| usize::from(p) + 1);
    let mut pos = 0;
    'feed: while pos < stream.len() {
        let n = sizes.next().unwrap_or(stream.len()).min(stream.len() - pos);
        let mut piece = &stream[pos..pos + n];
        pos += n;
        loop {
            match p.feed(piece, &mut out) {
                Ok(f) => {
                    assert!(f.consumed <= piece.len());
                    piece = &piece[f.consumed..];
                    let Some(e) = f.event else {
                        assert!(piece.is_empty());
                        break;
                    };
                    assert!(e.data_len <= limit);
                    assert!(!e.name().is_empty());
                    seen.events
                        .push((e.name().to_vec(), out[..e.data_len].to_vec()));
                }
                Err(e) => {
                    assert_eq!(p.feed(b"\n\n", &mut out), Err(e));
                    seen.error = Some(e);
                    break 'feed;
                }
            }
        }
    }
    seen.retry = p.retry();
    seen.id = p.last_event_id().map(<[u8]>::to_vec);
    seen.mid_event = p.mid_event();
    seen
}

fuzz_target!(|input: Input| {
    let limit = usize::from(input.limit);
    let whole = parse(&input.bytes, limit, &[]);
    assert_eq!(whole, parse(&input.bytes, limit, &input.pieces));
    assert_eq!(
        whole,
        parse(&input.bytes, limit, &vec![0; input.bytes.len()])
    );
});
