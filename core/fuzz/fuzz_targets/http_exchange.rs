//! `http_exchange`: the judge of one Streamable HTTP answer
//! (`ResponseReader`) given any status, media type and body, in the
//! fuzzer's pieces, for a request or a notification, with a receive
//! buffer of a size the fuzzer picks. Nothing may panic; every call makes
//! progress; messages fit the buffer; after the final judgement (a
//! response, an acceptance or a failure) nothing more is judged; and the
//! body fed whole or in pieces gives the same judgements.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http1::MediaType;
use mcpwire_core::mcp::client::http::{Judgement, ResponseReader};

const CALL: &[u8] = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#;
const NOTIFY: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Media {
    Json,
    EventStream,
    Other,
}

#[derive(Arbitrary, Debug)]
struct Input {
    notification: bool,
    status: u16,
    media: Media,
    limit: u8,
    body: Vec<u8>,
    pieces: Vec<u8>,
}

#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Notification(Vec<u8>),
    Response(Vec<u8>, Option<i64>),
    Accepted,
    Failed(&'static str, Vec<u8>),
}

fn judge(input: &Input, pieces: &[u8]) -> Vec<Seen> {
    let request = if input.notification { NOTIFY } else { CALL };
    let mut reader = ResponseReader::new(request).unwrap();
    let limit = usize::from(input.limit);
    let mut buf = vec![0u8; limit];
    let media = match input.media {
        Media::Json => MediaType::Json,
        Media::EventStream => MediaType::EventStream,
        Media::Other => MediaType::Other,
    };
    let mut seen = Vec::new();
    let record = |j: Option<Judgement>, buf: &[u8], seen: &mut Vec<Seen>| {
        let Some(j) = j else { return };
        assert!(
            !matches!(
                seen.last(),
                Some(Seen::Response(..) | Seen::Accepted | Seen::Failed(..))
            ),
            "a judgement after the final one"
        );
        seen.push(match j {
            Judgement::Notification { len } => Seen::Notification(buf[..len].to_vec()),
            Judgement::Response { len, error } => Seen::Response(buf[..len].to_vec(), error),
            Judgement::Accepted => Seen::Accepted,
            Judgement::Failed(f) => {
                assert!(f.excerpt <= 64.min(limit));
                Seen::Failed(f.reason, buf[..f.excerpt].to_vec())
            }
        });
    };
    let status = 100 + input.status % 500;
    record(reader.on_head(status, media), &buf, &mut seen);
    let mut sizes = pieces.iter().map(|&p| usize::from(p) + 1);
    let mut pos = 0;
    while pos < input.body.len() {
        let n = sizes
            .next()
            .unwrap_or(input.body.len())
            .min(input.body.len() - pos);
        let mut data = &input.body[pos..pos + n];
        pos += n;
        while !data.is_empty() {
            let step = reader.on_body(data, &mut buf);
            assert!(step.consumed <= data.len());
            assert!(step.consumed > 0 || step.judgement.is_some());
            record(step.judgement, &buf, &mut seen);
            data = &data[step.consumed..];
        }
    }
    record(reader.on_end(&buf), &buf, &mut seen);
    assert!(reader.is_done());
    seen
}

fuzz_target!(|input: Input| {
    let whole = judge(&input, &[]);
    assert_eq!(whole, judge(&input, &input.pieces));
    assert_eq!(whole, judge(&input, &vec![0; input.body.len()]));
});
