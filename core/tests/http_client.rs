//! The Streamable HTTP client's exchange (MCP 2026-07-28 §5) against
//! scripted server bytes: the request it writes (read back by the
//! server's own head parser), then JSON and event-stream answers, each
//! fed whole, byte at a time and in random pieces through one HTTP/1.1
//! client connection, judged the same every way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_core::http1::head::EMPTY_HEADER;
use mcpwire_core::http1::{ClientConnection, MAX_HEADERS, RequestHead, ResponseEvent};
use mcpwire_core::mcp::client::http::{Endpoint, Judgement, ResponseReader, write_post};
use mcpwire_sim::{Pieces, Split};

const CALL: &[u8] = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1}}}"#;
const NOTIFY: &[u8] =
    br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#;

/// What the application would learn from an exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Notification(String),
    Response(String, Option<i64>),
    Accepted,
    /// reason, status, the body's first octets
    Failed(String, u16, String),
    /// The connection's own failure.
    Transport(&'static str),
}

fn splits() -> Vec<Split> {
    let mut all = Split::ALL.to_vec();
    all.extend((1..20).map(|seed| Split::Random { seed, max: 5 }));
    all
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn record(seen: &mut Vec<Seen>, j: Option<Judgement>, buf: &[u8]) {
    match j {
        None => {}
        Some(Judgement::Notification { len }) => seen.push(Seen::Notification(text(&buf[..len]))),
        Some(Judgement::Response { len, error }) => {
            seen.push(Seen::Response(text(&buf[..len]), error));
        }
        Some(Judgement::Accepted) => seen.push(Seen::Accepted),
        Some(Judgement::Failed(f)) => {
            seen.push(Seen::Failed(
                f.reason.into(),
                f.status,
                text(&buf[..f.excerpt]),
            ));
        }
    }
}

/// One exchange of `request` answered by `response` (then the server's
/// close when `eof`), with a receive buffer of `limit` octets.
fn exchange(request: &[u8], response: &[u8], eof: bool, limit: usize, split: Split) -> Vec<Seen> {
    let mut conn = ClientConnection::<2048>::new();
    conn.start("POST").unwrap();
    let mut reader = ResponseReader::new(request).unwrap();
    let mut buf = vec![0u8; limit];
    let mut seen = Vec::new();
    let mut pieces = Pieces::new(split);
    let mut pending = Vec::new();
    let mut pos = 0;
    while pos < response.len() {
        let n = pieces.next(response.len() - pos);
        pending.extend_from_slice(&response[pos..pos + n]);
        pos += n;
        loop {
            let r = conn.recv(&pending);
            match r.event.clone() {
                None => {
                    pending.drain(..r.consumed);
                    break;
                }
                Some(ResponseEvent::Head { status }) => {
                    let mut fields = [EMPTY_HEADER; MAX_HEADERS];
                    let media = conn.head(&mut fields).unwrap().content_type();
                    record(&mut seen, reader.on_head(status, media), &buf);
                }
                Some(ResponseEvent::Data(range)) => {
                    let mut data = &pending[range];
                    while !data.is_empty() {
                        let step = reader.on_body(data, &mut buf);
                        assert!(step.consumed > 0 || step.judgement.is_some());
                        record(&mut seen, step.judgement, &buf);
                        data = &data[step.consumed..];
                    }
                }
                Some(ResponseEvent::End { .. }) => record(&mut seen, reader.on_end(&buf), &buf),
                Some(ResponseEvent::Failed(e)) => {
                    seen.push(Seen::Transport(e.reason()));
                    return seen;
                }
            }
            pending.drain(..r.consumed);
        }
    }
    if eof {
        match conn.recv_eof() {
            Some(ResponseEvent::End { .. }) => record(&mut seen, reader.on_end(&buf), &buf),
            Some(ResponseEvent::Failed(e)) => seen.push(Seen::Transport(e.reason())),
            _ => {}
        }
    }
    seen
}

fn every_way(request: &[u8], response: &[u8], eof: bool, limit: usize) -> Vec<Seen> {
    let whole = exchange(request, response, eof, limit, Split::Whole);
    for split in splits() {
        assert_eq!(
            exchange(request, response, eof, limit, split),
            whole,
            "{split:?}"
        );
    }
    whole
}

/// A chunked event stream response carrying `events`, one chunk each.
fn sse(events: &[&str]) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for e in events {
        out.extend_from_slice(format!("{:x}\r\n{e}\r\n", e.len()).as_bytes());
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn json(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

const RESULT: &str =
    r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}"#;
const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;

#[test]
fn the_request_carries_what_the_server_checks() {
    let schema =
        br#"{"type":"object","properties":{"text":{"type":"string","x-mcp-header":"Text"}}}"#;
    let endpoint = Endpoint {
        authority: "127.0.0.1:8080",
        target: "/mcp",
        bearer: Some("t0k3n"),
    };
    let mut out = [0u8; 1024];
    let n = write_post(&mut out, &endpoint, CALL, Some(schema)).unwrap();
    let end = out[..n].windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut fields = [EMPTY_HEADER; MAX_HEADERS];
    let head = RequestHead::parse(&out[..end], &mut fields).unwrap();
    assert_eq!((head.method, head.target), ("POST", "/mcp"));
    for (name, value) in [
        (&b"host"[..], &b"127.0.0.1:8080"[..]),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"echo"),
        (b"mcp-param-text", b"hi"),
        (b"authorization", b"Bearer t0k3n"),
    ] {
        assert_eq!(head.header(name), Some(value), "{}", text(name));
    }
    assert_eq!(
        head.body(),
        Ok(mcpwire_core::http1::BodyFraming::Length(CALL.len() as u64))
    );
    assert_eq!(&out[end..n], CALL);
}

#[test]
fn a_json_answer_is_the_response() {
    assert_eq!(
        every_way(CALL, &json("200 OK", RESULT), false, 256),
        [Seen::Response(RESULT.into(), None)]
    );
}

#[test]
fn an_event_stream_gives_notifications_then_the_response() {
    let stream = sse(&[
        ": keep-alive\n\n",
        // A priming event (2025 servers): an id and no data.
        "id: 0\r\ndata:\r\n\r\n",
        &format!("event: message\r\ndata: {PROGRESS}\r\n\r\n"),
        "event: other\ndata: {\"ignored\":true}\n\n",
        &format!("data: {RESULT}\n\n"),
        // Anything after the response is not the call's.
        &format!("data: {PROGRESS}\n\n"),
    ]);
    assert_eq!(
        every_way(CALL, &stream, false, 256),
        [
            Seen::Notification(PROGRESS.into()),
            Seen::Response(RESULT.into(), None)
        ]
    );
    // The JSON of one message may span data lines.
    let split_json = sse(&["data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":7,\"result\":{}}\n\n"]);
    assert_eq!(
        every_way(CALL, &split_json, false, 256),
        [Seen::Response(
            "{\"jsonrpc\":\"2.0\",\n\"id\":7,\"result\":{}}".into(),
            None
        )]
    );
}

#[test]
fn a_broken_stream_fails_the_call_and_never_invents_a_result() {
    let ended = sse(&[&format!("data: {PROGRESS}\n\n")]);
    assert_eq!(
        every_way(CALL, &ended, false, 256),
        [
            Seen::Notification(PROGRESS.into()),
            Seen::Failed(
                "event stream ended before the response".into(),
                200,
                String::new()
            )
        ]
    );
    // The server closes in the middle of a chunk.
    let mut cut = sse(&[
        &format!("data: {PROGRESS}\n\n"),
        &format!("data: {RESULT}\n\n"),
    ]);
    cut.truncate(cut.len() - 40);
    assert_eq!(
        every_way(CALL, &cut, true, 256),
        [
            Seen::Notification(PROGRESS.into()),
            Seen::Transport("the connection closed before the end of the response")
        ]
    );
    // A request from the server on a modern stream.
    let request = sse(&[
        r#"data: {"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}

"#,
    ]);
    assert_eq!(
        every_way(CALL, &request, false, 256),
        [Seen::Failed(
            "server sent a request on a 2026-07-28 stream (§5.2)".into(),
            200,
            String::new()
        )]
    );
    // A response to another request, and text that is not JSON-RPC.
    for event in [
        "data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n\n",
        "data: not json\n\n",
    ] {
        assert_eq!(
            every_way(CALL, &sse(&[event]), false, 256),
            [Seen::Failed(
                "message on the event stream is not JSON-RPC for this call".into(),
                200,
                String::new()
            )]
        );
    }
}

#[test]
fn an_event_over_the_receive_buffer_fails_the_call() {
    let big = format!("data: {RESULT}\n\n");
    assert_eq!(
        every_way(CALL, &sse(&[&big]), false, RESULT.len() - 1),
        [Seen::Failed(
            "server-sent event larger than the receive buffer".into(),
            200,
            String::new()
        )]
    );
    assert_eq!(
        every_way(CALL, &json("200 OK", RESULT), false, RESULT.len() - 1),
        [Seen::Failed(
            "response larger than the receive buffer".into(),
            200,
            String::new()
        )]
    );
    // Exactly the buffer's size fits.
    assert_eq!(
        every_way(CALL, &sse(&[&big]), false, RESULT.len()),
        [Seen::Response(RESULT.into(), None)]
    );
}

#[test]
fn html_and_other_content_types_fail_with_the_first_octets() {
    let page = "<!doctype html><html><body>".to_string() + &"x".repeat(100) + "</body></html>";
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{page}",
        page.len()
    );
    assert_eq!(
        every_way(CALL, response.as_bytes(), false, 256),
        [Seen::Failed(
            "content type neither JSON nor an event stream".into(),
            200,
            page[..64].into()
        )]
    );
    // A short one, and an error status without JSON.
    let response =
        "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nbad";
    assert_eq!(
        every_way(CALL, response.as_bytes(), false, 256),
        [Seen::Failed("HTTP error status".into(), 502, "bad".into())]
    );
}

#[test]
fn error_statuses_with_a_json_rpc_error_give_that_error() {
    let unsupported = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}"#;
    assert_eq!(
        every_way(CALL, &json("400 Bad Request", unsupported), false, 256),
        [Seen::Response(unsupported.into(), Some(-32022))]
    );
    let unreadable =
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#;
    assert_eq!(
        every_way(CALL, &json("400 Bad Request", unreadable), false, 256),
        [Seen::Response(unreadable.into(), Some(-32700))]
    );
    // A result under an error status is not believed.
    assert_eq!(
        every_way(CALL, &json("500 Internal Server Error", RESULT), false, 256),
        [Seen::Failed("HTTP error status".into(), 500, String::new())]
    );
    let response = "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer resource_metadata=\"https://h/.well-known/oauth-protected-resource\"\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(
        every_way(CALL, response.as_bytes(), false, 256),
        [Seen::Failed(
            "unauthorized (401)".into(),
            401,
            String::new()
        )]
    );
}

#[test]
fn a_notification_is_accepted_with_202_and_a_request_is_not() {
    let accepted = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(every_way(NOTIFY, accepted, false, 64), [Seen::Accepted]);
    assert_eq!(
        every_way(CALL, accepted, false, 64),
        [Seen::Failed(
            "no response to a request (202 or 204)".into(),
            202,
            String::new()
        )]
    );
    let refused = json("400 Bad Request", "{}");
    assert_eq!(
        every_way(NOTIFY, &refused, false, 64),
        [Seen::Failed(
            "the server refused the notification".into(),
            400,
            "{}".into()
        )]
    );
}
