//! Which era an HTTP server speaks (MCP 2026-07-28 §8.3, §13), read from
//! the answers real servers give: the bodies and heads below were
//! captured from the peers of `scripts/interop-http-client.sh` (the
//! TypeScript SDK 2.4.0 server, the Python SDK `mcp` 1.26.0 in its 2025
//! session shape and its 2024 HTTP+SSE shape) and from `mcpwire serve`,
//! each fed through the HTTP/1.1 client connection and the exchange's
//! reader as the driver feeds them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_core::http1::head::EMPTY_HEADER;
use mcpwire_core::http1::{ClientConnection, MAX_HEADERS, ResponseEvent};
use mcpwire_core::mcp::client::era::{self, LEGACY_VERSION};
use mcpwire_core::mcp::client::http::era::{
    EndpointError, InitializeVerdict, ProbeVerdict, endpoint_target, initialize, probe, session_id,
};
use mcpwire_core::mcp::client::http::{
    Endpoint, Judgement, ResponseReader, Session, write_delete, write_get_events, write_legacy_post,
};
use mcpwire_core::mcp::writer::JsonWriter;

const PROBE: &[u8] = br#"{"jsonrpc":"2.0","id":"mcpwire-probe","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
const INIT_ID: &[u8] = br#""mcpwire-initialize""#;

/// The last judgement of `request` answered by the whole `response`, its
/// status, the receive buffer and the `Mcp-Session-Id` of the head.
struct Answer {
    judgement: Judgement,
    status: u16,
    buf: Vec<u8>,
    session: Option<Vec<u8>>,
}

fn answer(request: &[u8], response: &[u8]) -> Answer {
    let mut conn = ClientConnection::<2048>::new();
    conn.start("POST").unwrap();
    let mut reader = ResponseReader::new(request).unwrap();
    let mut buf = vec![0u8; 4096];
    let (mut status, mut session, mut last) = (0, None, None);
    let mut input = response;
    let end = |reader: &mut ResponseReader, buf: &[u8]| reader.on_end(buf);
    loop {
        let r = conn.recv(input);
        match r.event.clone() {
            None => break,
            Some(ResponseEvent::Head { status: s }) => {
                status = s;
                let mut fields = [EMPTY_HEADER; MAX_HEADERS];
                let head = conn.head(&mut fields).unwrap();
                session = head.header(b"mcp-session-id").map(<[u8]>::to_vec);
                last = reader.on_head(s, head.content_type()).or(last);
            }
            Some(ResponseEvent::Data(range)) => {
                let mut data = &input[range];
                while !data.is_empty() && !reader.is_done() {
                    let step = reader.on_body(data, &mut buf);
                    last = step.judgement.or(last);
                    data = &data[step.consumed..];
                }
            }
            Some(ResponseEvent::End { .. }) => last = end(&mut reader, &buf).or(last),
            Some(ResponseEvent::Failed(e)) => panic!("{}", e.reason()),
        }
        input = &input[r.consumed..];
    }
    if let Some(ResponseEvent::End { .. }) = conn.recv_eof() {
        last = end(&mut reader, &buf).or(last);
    }
    Answer {
        judgement: last.expect("a judgement"),
        status,
        buf,
        session,
    }
}

fn response(status: &str, fields: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\n{fields}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn probe_of(response: &[u8]) -> ProbeVerdict {
    let a = answer(PROBE, response);
    probe(&a.judgement, a.status, &a.buf)
}

#[test]
fn a_discover_result_is_the_modern_era() {
    // mcpwire serve's answer (JSON), and the TypeScript SDK's (SSE).
    let json = response(
        "200 OK",
        "content-type: application/json\r\n",
        r#"{"jsonrpc":"2.0","id":"mcpwire-probe","result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"mcpwire","version":"0.1.0"}}}"#,
    );
    assert_eq!(probe_of(&json), ProbeVerdict::Modern("2026-07-28"));
    let sse = response(
        "200 OK",
        "content-type: text/event-stream\r\ncache-control: no-cache\r\n",
        "event: message\ndata: {\"result\":{\"supportedVersions\":[\"2026-07-28\"],\"capabilities\":{\"tools\":{\"listChanged\":true}},\"serverInfo\":{\"name\":\"ts-peer\",\"version\":\"1.0.0\"},\"resultType\":\"complete\"},\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-probe\"}\n\n",
    );
    assert_eq!(probe_of(&sse), ProbeVerdict::Modern("2026-07-28"));
}

#[test]
fn the_2025_session_server_answers_the_probe_400_and_is_legacy() {
    // mcp 1.26.0, stateful Streamable HTTP: a request without a session is
    // 400 with an error whose id is not the request's.
    let r = response(
        "400 Bad Request",
        "content-type: application/json\r\nmcp-session-id: 65921f11d9ca4b3baae5b875f31e5f7d\r\n",
        r#"{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Bad Request: Missing session ID"}}"#,
    );
    assert!(matches!(probe_of(&r), ProbeVerdict::Legacy(_)));
    // The 2024 shape's server: 405 (POST to the stream URL) or 404.
    for r in [
        response(
            "405 Method Not Allowed",
            "allow: HEAD, GET\r\ncontent-type: text/plain; charset=utf-8\r\n",
            "Method Not Allowed",
        ),
        response(
            "404 Not Found",
            "content-type: text/plain; charset=utf-8\r\n",
            "Not Found",
        ),
        response("400 Bad Request", "", ""),
    ] {
        assert!(matches!(probe_of(&r), ProbeVerdict::Legacy(_)));
    }
    // A stateless legacy server that knows no server/discover.
    let r = response(
        "200 OK",
        "content-type: application/json\r\n",
        r#"{"jsonrpc":"2.0","id":"mcpwire-probe","error":{"code":-32601,"message":"Method not found"}}"#,
    );
    assert!(matches!(probe_of(&r), ProbeVerdict::Legacy(_)));
}

#[test]
fn modern_errors_in_a_400_are_read_before_any_fallback() {
    let error = |code: i32, data: &str| {
        response(
            "400 Bad Request",
            "content-type: application/json\r\n",
            &format!(
                r#"{{"jsonrpc":"2.0","id":"mcpwire-probe","error":{{"code":{code},"message":"m"{data}}}}}"#
            ),
        )
    };
    // A version this client speaks: the probe goes again with it; only
    // versions it does not speak: legacy.
    let a = answer(
        PROBE,
        &error(
            -32022,
            r#","data":{"supported":["2027-01-01","2026-07-28"],"requested":"2027-01-01"}"#,
        ),
    );
    assert_eq!(
        probe(&a.judgement, a.status, &a.buf),
        ProbeVerdict::Retry("2026-07-28")
    );
    // The version it asked for, refused once: a modern server (no
    // fallback), asked once more with it.
    assert_eq!(
        probe_of(&error(
            -32022,
            r#","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}"#
        )),
        ProbeVerdict::Retry("2026-07-28")
    );
    assert!(matches!(
        probe_of(&error(-32022, r#","data":{"supported":["2025-11-25"]}"#)),
        ProbeVerdict::Legacy(_)
    ));
    // Only versions it speaks in neither era: the server is modern and
    // its error is the answer (an `initialize` would be refused as well);
    // no usable list leaves the fallback open.
    assert_eq!(
        probe_of(&error(
            -32022,
            r#","data":{"supported":["2027-01-01"],"requested":"2026-07-28"}"#
        )),
        ProbeVerdict::Refused { code: -32022 }
    );
    for data in [
        "",
        r#","data":{"supported":[]}"#,
        r#","data":{"supported":[7]}"#,
    ] {
        assert!(
            matches!(probe_of(&error(-32022, data)), ProbeVerdict::Legacy(_)),
            "{data}"
        );
    }
    // A capability or a header: the server is modern; reported.
    assert_eq!(
        probe_of(&error(-32021, "")),
        ProbeVerdict::Refused { code: -32021 }
    );
    assert_eq!(
        probe_of(&error(-32020, "")),
        ProbeVerdict::Refused { code: -32020 }
    );
}

#[test]
fn authorization_server_errors_and_bad_bodies_are_never_era_evidence() {
    let unauthorized = response(
        "401 Unauthorized",
        "www-authenticate: Bearer realm=\"mcp\"\r\n",
        "",
    );
    assert_eq!(
        probe_of(&unauthorized),
        ProbeVerdict::Failed("unauthorized (401)")
    );
    let forbidden = response("403 Forbidden", "content-type: text/plain\r\n", "no");
    assert!(matches!(probe_of(&forbidden), ProbeVerdict::Failed(_)));
    for status in ["500 Internal Server Error", "503 Service Unavailable"] {
        let r = response(
            status,
            "content-type: application/json\r\n",
            r#"{"jsonrpc":"2.0","id":"mcpwire-probe","error":{"code":-32603,"message":"m"}}"#,
        );
        assert!(matches!(probe_of(&r), ProbeVerdict::Failed(_)), "{status}");
    }
    // HTML with 200 (a web server at the URL): an error, not legacy.
    let html = response(
        "200 OK",
        "content-type: text/html\r\n",
        "<html><body>hello</body></html>",
    );
    assert!(matches!(probe_of(&html), ProbeVerdict::Failed(_)));
}

fn initialize_request() -> Vec<u8> {
    let mut out = [0u8; 512];
    let mut w = JsonWriter::new(&mut out);
    era::write_initialize(&mut w, INIT_ID, "mcpwire", "0.1.0");
    w.finish().unwrap().to_vec()
}

#[test]
fn initialize_opens_a_2025_session_with_the_id_of_its_head() {
    let request = initialize_request();
    let text = String::from_utf8(request.clone()).unwrap();
    assert!(text.contains(&format!("\"protocolVersion\":\"{LEGACY_VERSION}\"")));
    assert!(text.contains(r#""clientInfo":{"name":"mcpwire","version":"0.1.0"}"#));
    // mcp 1.26.0's answer, as captured.
    let r = response(
        "200 OK",
        "cache-control: no-cache, no-transform\r\ncontent-type: text/event-stream\r\nmcp-session-id: 27b65d975d6b4fd8a25f3eedcfe26a73\r\n",
        "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-initialize\",\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"experimental\":{},\"prompts\":{\"listChanged\":false},\"resources\":{\"subscribe\":false,\"listChanged\":false},\"tools\":{\"listChanged\":false}},\"serverInfo\":{\"name\":\"python-mcp1-legacy-server\",\"version\":\"1.26.0\"}}}\r\n\r\n",
    );
    let a = answer(&request, &r);
    assert_eq!(
        initialize(&a.judgement, a.status, &a.buf),
        InitializeVerdict::Session {
            version: b"\"2025-11-25\""
        }
    );
    let id = a.session.unwrap();
    assert_eq!(
        session_id(&id),
        Some(&b"27b65d975d6b4fd8a25f3eedcfe26a73"[..])
    );

    // The session's requests carry its id and version; its end is a DELETE.
    let endpoint = Endpoint {
        authority: "127.0.0.1:8000",
        target: "/mcp",
        bearer: None,
    };
    let session = Session {
        id: session_id(&id),
        version: Some(b"2025-11-25"),
    };
    let mut out = [0u8; 1024];
    let body = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let n = write_legacy_post(&mut out, &endpoint, &session, body).unwrap();
    let post = String::from_utf8_lossy(&out[..n]).into_owned();
    assert!(post.starts_with("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"));
    assert!(post.contains("\r\nmcp-session-id: 27b65d975d6b4fd8a25f3eedcfe26a73\r\nmcp-protocol-version: 2025-11-25\r\n"));
    assert!(post.contains("\r\naccept: application/json, text/event-stream\r\n"));
    assert!(!post.contains("mcp-method"), "{post}");
    assert!(post.ends_with("\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}"));
    let n = write_delete(&mut out, &endpoint, &session).unwrap();
    let delete = String::from_utf8_lossy(&out[..n]).into_owned();
    assert!(delete.starts_with("DELETE /mcp HTTP/1.1\r\n"));
    assert!(delete.contains("\r\nmcp-session-id: 27b65d975d6b4fd8a25f3eedcfe26a73\r\n"));
    assert!(!delete.contains("content-length"), "{delete}");
    assert!(delete.ends_with("\r\n\r\n"));
}

#[test]
fn an_initialize_refused_without_a_modern_error_leads_to_the_2024_shape() {
    let request = initialize_request();
    for r in [
        response(
            "405 Method Not Allowed",
            "allow: HEAD, GET\r\ncontent-type: text/plain; charset=utf-8\r\n",
            "Method Not Allowed",
        ),
        response("404 Not Found", "content-type: text/plain\r\n", "Not Found"),
        response(
            "400 Bad Request",
            "content-type: application/json\r\n",
            r#"{"jsonrpc":"2.0","id":"mcpwire-initialize","error":{"code":-32600,"message":"no"}}"#,
        ),
    ] {
        let a = answer(&request, &r);
        assert_eq!(
            initialize(&a.judgement, a.status, &a.buf),
            InitializeVerdict::HttpSse
        );
    }
    // A modern server refusing it, or a server error: no further fallback.
    for r in [
        response(
            "400 Bad Request",
            "content-type: application/json\r\n",
            r#"{"jsonrpc":"2.0","id":"mcpwire-initialize","error":{"code":-32022,"message":"unsupported","data":{"supported":["2026-07-28"]}}}"#,
        ),
        response("500 Internal Server Error", "", ""),
        response("401 Unauthorized", "www-authenticate: Bearer\r\n", ""),
        response(
            "200 OK",
            "content-type: application/json\r\n",
            r#"{"jsonrpc":"2.0","id":"mcpwire-initialize","result":{"capabilities":{}}}"#,
        ),
    ] {
        let a = answer(&request, &r);
        assert!(matches!(
            initialize(&a.judgement, a.status, &a.buf),
            InitializeVerdict::Failed(_)
        ));
    }
}

#[test]
fn session_ids_are_visible_ascii_of_bounded_length() {
    assert_eq!(session_id(b" abc-123 "), Some(&b"abc-123"[..]));
    for bad in [&b""[..], b"a b", b"a\x7fb", "é".as_bytes()] {
        assert_eq!(session_id(bad), None, "{bad:?}");
    }
    assert!(session_id(&[b'a'; 256]).is_some());
    assert_eq!(session_id(&[b'a'; 257]), None);
}

#[test]
fn the_endpoint_event_resolves_against_the_stream_url() {
    let mut out = [0u8; 128];
    // mcp 1.26.0's event, as captured.
    let data = b"/messages/?session_id=8884b0d6dfa0466f80eaec8063388af8";
    let get = |data: &[u8], out: &mut [u8; 128]| {
        endpoint_target("http", "127.0.0.1:8000", "/sse", data, out).map(str::to_owned)
    };
    assert_eq!(
        get(data, &mut out).unwrap(),
        "/messages/?session_id=8884b0d6dfa0466f80eaec8063388af8"
    );
    assert_eq!(
        endpoint_target("http", "h", "/a/b/sse?x=1", b"messages?s=1", &mut out),
        Ok("/a/b/messages?s=1")
    );
    assert_eq!(get(b"messages", &mut out).unwrap(), "/messages");
    assert_eq!(
        get(b"http://127.0.0.1:8000/m?s=2", &mut out).unwrap(),
        "/m?s=2"
    );
    for other in [
        &b"http://evil.example/m"[..],
        b"https://127.0.0.1:8000/m",
        b"//evil.example/m",
    ] {
        assert_eq!(get(other, &mut out), Err(EndpointError::OtherOrigin));
    }
    for bad in [&b""[..], b"/a b", b"/a\r\nX: 1"] {
        assert_eq!(get(bad, &mut out), Err(EndpointError::Malformed));
    }
    let mut small = [0u8; 8];
    assert_eq!(
        endpoint_target("http", "h", "/sse", b"/messages/x", &mut small),
        Err(EndpointError::TooLong)
    );
}

#[test]
fn the_2024_stream_is_opened_with_a_get_for_events() {
    let endpoint = Endpoint {
        authority: "127.0.0.1:8000",
        target: "/sse",
        bearer: Some("tok"),
    };
    let mut out = [0u8; 256];
    let n = write_get_events(&mut out, &endpoint, &Session::default()).unwrap();
    assert_eq!(
        &out[..n],
        b"GET /sse HTTP/1.1\r\nHost: 127.0.0.1:8000\r\naccept: text/event-stream\r\nauthorization: Bearer tok\r\n\r\n"
    );
}
