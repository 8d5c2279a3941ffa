//! The Streamable HTTP binding (MCP 2026-07-28 §5) over one HTTP/1.1
//! connection, as a client on the other end sees it: scripted requests in,
//! parsed responses out, delivered whole, in random pieces and a byte at a
//! time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use core::time::Duration;

use mcpwire_core::drive::Step;
use mcpwire_core::http1::ChunkedDecoder;
use mcpwire_core::mcp::auth::Decision;
use mcpwire_core::mcp::registry::{Registry, ToolInfo};
use mcpwire_core::mcp::server::{
    CallId, CancelReason, HttpConfig, HttpEndpoint, HttpServer, ListChange, SendError,
    ServerEngine, ServerEvent,
};
use mcpwire_core::mcp::{SlabStore, json};
use mcpwire_core::time::Instant;
use mcpwire_sim::{Pipe, Split};

mod support;

use support::mcp::{App, ECHO, META, Side, registry};

const TOOLS: [ToolInfo<'static>; 1] = [ECHO];

type Store = SlabStore<16384, 1>;
type Server = HttpServer<'static, Store>;

const PIPE: usize = 32768;

/// What the application saw.
#[derive(Debug, Default)]
struct Seen {
    requests: Vec<CallId>,
    authorize: Vec<CallId>,
    events: Vec<ServerEvent>,
    /// Answer every request at once with this result.
    auto: Option<&'static str>,
}

impl App<Server> for Seen {
    fn take_events(&mut self, server: &mut Server) {
        while let Some(e) = server.poll_event() {
            match e {
                ServerEvent::Request { call } => {
                    assert!(server.request(call).is_some());
                    match self.auto {
                        Some(result) => server.respond(call, result.as_bytes()).unwrap(),
                        None => self.requests.push(call),
                    }
                }
                ServerEvent::Authorize { call } => self.authorize.push(call),
                e => self.events.push(e),
            }
        }
    }
}

/// A response as the client parsed it.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }

    /// The `data:` of each event of an event stream.
    fn events(&self) -> Vec<String> {
        assert_eq!(self.header("content-type"), Some("text/event-stream"));
        self.text()
            .split("\n\n")
            .filter(|e| !e.is_empty() && !e.starts_with(':'))
            .map(|e| e.strip_prefix("data: ").expect(e).to_owned())
            .collect()
    }

    fn error_code(&self) -> Option<i64> {
        let error = json::get(&self.body, b"error")?;
        json::as_i64(json::get(error, b"code")?)
    }
}

/// The server between its two pipes.
struct Conn {
    server: Side<Server, Seen>,
    input: Pipe<PIPE>,
    output: Pipe<PIPE>,
    now: Instant,
    out: Vec<u8>,
}

impl Conn {
    fn new(split: Split) -> Self {
        Self::with(split, registry(&TOOLS), HttpConfig::default())
    }

    fn with(split: Split, registry: Registry<'static>, config: HttpConfig<'static>) -> Self {
        Self {
            server: Side {
                endpoint: HttpServer::new(registry, config, Store::new(), Instant::ZERO),
                app: Seen::default(),
            },
            input: Pipe::new(split),
            output: Pipe::new(split),
            now: Instant::ZERO,
            out: Vec::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        assert_eq!(self.input.write(bytes), bytes.len(), "input pipe full");
        self.run();
    }

    fn run(&mut self) {
        self.server.take_events();
        loop {
            let d = self
                .input
                .deliver(&mut self.server, self.now, &mut self.output);
            assert_ne!(d.end, Step::Stuck, "stuck: {:?}", self.server.endpoint);
            let moved = d.octets + self.output.transmit(&mut self.server);
            self.out.extend_from_slice(self.output.pending());
            self.output.consume(self.output.len());
            if moved == 0 {
                break;
            }
        }
    }

    fn advance(&mut self, by: Duration) {
        self.now = self.now + by;
        self.server.handle_timeout(self.now);
        self.run();
    }

    /// The complete responses written so far.
    fn responses(&self) -> Vec<Response> {
        parse_responses(&self.out)
    }

    fn only(&self) -> Response {
        let mut r = self.responses();
        assert_eq!(r.len(), 1, "{}", String::from_utf8_lossy(&self.out));
        r.remove(0)
    }
}

/// Parses complete responses; a cut one at the end is left out.
fn parse_responses(mut out: &[u8]) -> Vec<Response> {
    let mut all = Vec::new();
    while !out.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut r = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(n)) = r.parse(out) else {
            break;
        };
        let status = r.code.unwrap();
        let headers: Vec<(String, String)> = r
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_owned(),
                    String::from_utf8(h.value.to_vec()).unwrap(),
                )
            })
            .collect();
        out = &out[n..];
        if status == 100 {
            continue;
        }
        let find = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let body = if let Some(len) = find("content-length") {
            let len: usize = len.parse().unwrap();
            if out.len() < len {
                break;
            }
            let body = out[..len].to_vec();
            out = &out[len..];
            body
        } else if find("transfer-encoding").as_deref() == Some("chunked") {
            let mut d = ChunkedDecoder::new();
            let mut body = Vec::new();
            let mut rest = out;
            let done = loop {
                let c = d.feed(rest).unwrap();
                body.extend_from_slice(&rest[c.data.clone()]);
                rest = &rest[c.consumed..];
                if c.done {
                    break true;
                }
                if rest.is_empty() {
                    break false;
                }
            };
            if !done {
                break;
            }
            out = rest;
            body
        } else {
            let body = out.to_vec();
            out = &[];
            body
        };
        all.push(Response {
            status,
            headers,
            body,
        });
    }
    all
}

/// A POST of `body` with the headers every modern request carries.
fn post(body: &str, extra: &str) -> Vec<u8> {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:3000\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A request body and its mirrored headers.
fn call(id: &str, method: &str, params: &str, name: Option<&str>) -> Vec<u8> {
    let sep = if params.is_empty() { "" } else { "," };
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params}{sep}{META}}}}}"#
    );
    let name = name.map_or(String::new(), |n| format!("Mcp-Name: {n}\r\n"));
    post(
        &body,
        &format!("MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}"),
    )
}

const ECHO_ARGS: &str = r#""name":"echo","arguments":{"text":"hi"}"#;
const PROGRESS_META: &str = r#""_meta":{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A `tools/call` of echo asking for progress (so answered as a stream).
fn progress_call(id: &str) -> Vec<u8> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{{ECHO_ARGS},{PROGRESS_META}}}}}"#
    );
    post(
        &body,
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n",
    )
}

#[test]
fn two_requests_on_one_kept_alive_connection() {
    for split in Split::ALL {
        let mut c = Conn::new(split);
        c.send(&call("1", "tools/list", "", None));
        c.send(&call("\"two\"", "server/discover", "", None));
        let r = c.responses();
        assert_eq!(r.len(), 2, "{split:?}");
        for r in &r {
            assert_eq!(r.status, 200);
            assert_eq!(r.header("content-type"), Some("application/json"));
            assert_eq!(r.header("connection"), None);
            assert_eq!(r.header("mcp-session-id"), None);
        }
        assert!(r[0].text().contains(r#""name":"echo""#), "{}", r[0].text());
        assert!(
            r[1].text()
                .starts_with(r#"{"jsonrpc":"2.0","id":"two","result""#)
        );
        assert!(!c.server.is_finished());
        assert_eq!(c.server.store().in_use(), 0, "no buffer between requests");
    }
}

#[test]
fn a_tool_call_is_answered_as_json() {
    for split in Split::ALL {
        let mut c = Conn::new(split);
        c.send(&call("5", "tools/call", ECHO_ARGS, Some("echo")));
        let call_id = c.server.app.requests[0];
        assert!(c.responses().is_empty());
        // A notification for a request that asked for no stream is dropped.
        c.server
            .notify(call_id, "notifications/message", b"{}")
            .unwrap();
        c.server.respond(call_id, br#"{"content":[]}"#).unwrap();
        c.run();
        let r = c.only();
        assert_eq!(r.status, 200);
        assert_eq!(
            r.text(),
            r#"{"jsonrpc":"2.0","id":5,"result":{"content":[]}}"#
        );
    }
}

/// A handler's own errors are in band (200), except the request-level
/// ones of §5.3 (a capability the tool needs, a header mismatch, a
/// version): 400, as when the engine finds them; a progress stream asked
/// for but not begun yet becomes that JSON answer.
#[test]
fn a_handlers_request_level_error_is_answered_400() {
    for split in Split::ALL {
        for (code, status, progress) in [
            (-32602, 200, false),
            (-32021, 400, false),
            (-32021, 400, true),
            (-32020, 400, false),
        ] {
            let mut c = Conn::new(split);
            c.send(&if progress {
                progress_call("5")
            } else {
                call("5", "tools/call", ECHO_ARGS, Some("echo"))
            });
            let call_id = c.server.app.requests[0];
            let data = br#"{"requiredCapabilities":{"sampling":{}}}"#;
            c.server
                .respond_error(call_id, code, "refused", Some(data))
                .unwrap();
            c.run();
            let r = c.only();
            assert_eq!(r.status, status, "{split:?} {code}");
            assert_eq!(r.header("content-type"), Some("application/json"));
            assert_eq!(r.error_code(), Some(i64::from(code)));
        }
    }
}

/// Each rule of §5 before MCP: the status of a request that breaks it.
#[test]
fn http_rules_answer_with_their_status() {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "GET",
            b"GET /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n".to_vec(),
            405,
        ),
        (
            "DELETE",
            b"DELETE /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
            405,
        ),
        (
            "other path",
            b"POST /other HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n".to_vec(),
            404,
        ),
        (
            "text/plain",
            format!(
                "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
            415,
        ),
        (
            "html only",
            String::from_utf8(post(body, ""))
                .unwrap()
                .replace("application/json, text/event-stream", "text/html")
                .into_bytes(),
            406,
        ),
        (
            "foreign origin",
            post(body, "Origin: http://evil.example.com\r\n"),
            403,
        ),
        (
            "rebinding",
            format!(
                "POST /mcp HTTP/1.1\r\nHost: evil.example.com\r\nOrigin: http://evil.example.com\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
            403,
        ),
        (
            "a second origin",
            post(
                body,
                "Origin: http://localhost\r\nOrigin: http://evil.example.com\r\n",
            ),
            403,
        ),
        (
            "bad head",
            b"POST /mcp HTTP/1.1\r\nHost localhost\r\n\r\n".to_vec(),
            400,
        ),
        (
            "two lengths",
            post(body, "Content-Length: 99999999999\r\n"),
            400,
        ),
    ];
    for (what, request, status) in cases {
        for split in Split::ALL {
            let mut c = Conn::new(split);
            c.send(&request);
            let r = c.only();
            assert_eq!(r.status, status, "{what} {split:?}");
            assert_eq!(r.header("connection"), Some("close"), "{what}");
            if status == 405 {
                assert_eq!(r.header("allow"), Some("POST"));
            }
            assert!(c.server.is_finished(), "{what}");
            assert!(c.server.app.requests.is_empty());
        }
    }
    // A loopback origin is fine.
    let mut c2 = Conn::new(Split::Whole);
    let mut req = call("1", "tools/list", "", None);
    let at = req.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    req.splice(at..at, b"Origin: http://localhost:6274\r\n".iter().copied());
    c2.send(&req);
    assert_eq!(c2.only().status, 200);
}

/// The MCP checks of §5.6 and §5.8: status, JSON-RPC code and the id.
#[test]
fn mcp_checks_answer_400_404_or_in_band() {
    let v999 = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let tools_list = |meta: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{{{meta}}}}}"#)
    };
    let modern = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n";
    let cases: Vec<(&str, Vec<u8>, u16, i64)> = vec![
        (
            "no mcp-method",
            post(&tools_list(META), "MCP-Protocol-Version: 2026-07-28\r\n"),
            400,
            -32020,
        ),
        (
            "method differs",
            post(
                &tools_list(META),
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: TOOLS/LIST\r\n",
            ),
            400,
            -32020,
        ),
        (
            "header version differs from the body",
            post(&tools_list(v999), modern),
            400,
            -32020,
        ),
        (
            "unsupported version",
            post(
                &tools_list(v999),
                "MCP-Protocol-Version: v999.0.0\r\nMcp-Method: tools/list\r\n",
            ),
            400,
            -32022,
        ),
        (
            "no _meta",
            post(&tools_list(r#""x":1"#), modern),
            400,
            -32602,
        ),
        (
            "no capabilities, no version header",
            post(
                &tools_list(r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#),
                "Mcp-Method: tools/list\r\n",
            ),
            400,
            -32602,
        ),
        (
            "no version anywhere",
            post(&tools_list(r#""x":1"#), "Mcp-Method: tools/list\r\n"),
            400,
            -32022,
        ),
        (
            "older client's initialize",
            post(
                r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
                "",
            ),
            400,
            -32022,
        ),
        (
            "initialize with modern _meta",
            call("7", "initialize", "", None),
            404,
            -32601,
        ),
        (
            "unknown method",
            call("7", "unknown/method", "", None),
            404,
            -32601,
        ),
        (
            "mcp-name differs",
            call("7", "tools/call", ECHO_ARGS, Some("other")),
            400,
            -32020,
        ),
        (
            "unknown tool (in band)",
            call(
                "7",
                "tools/call",
                r#""name":"nope","arguments":{}"#,
                Some("nope"),
            ),
            200,
            -32602,
        ),
        ("not JSON", post("{\"jsonrpc\":", modern), 400, -32700),
        (
            "not UTF-8",
            {
                let mut r = post(
                    "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"\u{e9}\"}",
                    modern,
                );
                let at = r.iter().position(|&b| b == 0xc3).unwrap();
                r[at] = 0xff;
                r
            },
            400,
            -32700,
        ),
        ("a batch", post("[]", modern), 400, -32600),
        (
            "a response",
            post(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, modern),
            400,
            -32600,
        ),
    ];
    for (what, request, status, code) in cases {
        for split in Split::ALL {
            let mut c = Conn::new(split);
            c.send(&request);
            let r = c.only();
            assert_eq!(
                (r.status, r.error_code()),
                (status, Some(code)),
                "{what} {split:?}: {}",
                r.text()
            );
            assert_eq!(r.header("content-type"), Some("application/json"));
            if !what.starts_with("not") && !what.starts_with("a ") {
                assert_eq!(
                    json::get(&r.body, b"id"),
                    Some(&b"7"[..]),
                    "{what}: the id is echoed"
                );
            }
            if code == -32022 {
                assert!(
                    r.text().contains(r#""supported":["2026-07-28"]"#),
                    "{}",
                    r.text()
                );
                // The version asked is named when the request named one.
                let named = what != "no version anywhere";
                assert_eq!(r.text().contains(r#""requested":"#), named, "{}", r.text());
            }
            // The connection stays open for the next request.
            assert!(!c.server.is_finished(), "{what}");
        }
    }
}

/// A member twice in `params`, `_meta` or `arguments` (in any spelling)
/// is 400 with -32600, a mirrored header given twice (in any case) 400
/// with -32020; the tool never runs (issue #32, A3).
#[test]
fn repeated_members_and_mirrored_headers_are_400() {
    const ANNOTATED: [ToolInfo<'static>; 2] = [
        ECHO,
        support::mcp::lookup(
            r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
        ),
    ];
    let lookup = |arguments: &str, extra: &str| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"lookup","arguments":{arguments},{META}}}}}"#
        );
        post(
            &body,
            &format!(
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: lookup\r\nMcp-Param-Region: us-west\r\n{extra}"
            ),
        )
    };
    let two_names = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"x"}},"name":"lookup",{META}}}}}"#
    );
    let cases = [
        (
            lookup(r#"{"region":"us-west","region":"eu-secret"}"#, ""),
            -32600,
        ),
        (
            lookup(r#"{"region":"us-west","\u0072egion":"eu-secret"}"#, ""),
            -32600,
        ),
        (
            post(
                &two_names,
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n",
            ),
            -32600,
        ),
        (
            lookup(r#"{"region":"us-west"}"#, "Mcp-Name: lookup\r\n"),
            -32020,
        ),
        (
            lookup(r#"{"region":"us-west"}"#, "mcp-name: echo\r\n"),
            -32020,
        ),
        (
            lookup(r#"{"region":"us-west"}"#, "MCP-PARAM-REGION: eu-secret\r\n"),
            -32020,
        ),
        (
            lookup(r#"{"region":"us-west"}"#, "Mcp-Method: tools/call\r\n"),
            -32020,
        ),
        (
            lookup(
                r#"{"region":"us-west"}"#,
                "Mcp-Protocol-Version: 2026-07-28\r\n",
            ),
            -32020,
        ),
    ];
    for split in Split::ALL {
        for (request, code) in &cases {
            let mut c = Conn::with(split, registry(&ANNOTATED), HttpConfig::default());
            c.send(request);
            let r = c.only();
            assert_eq!(
                (r.status, r.error_code()),
                (400, Some(*code)),
                "{}",
                r.text()
            );
            assert!(c.server.app.requests.is_empty(), "the tool ran");
        }
        let mut c = Conn::with(split, registry(&ANNOTATED), HttpConfig::default());
        c.send(&lookup(r#"{"region":"us-west"}"#, ""));
        assert_eq!(c.server.app.requests.len(), 1);
    }
}

#[test]
fn a_notification_is_accepted_without_a_body() {
    for split in Split::ALL {
        let mut c = Conn::new(split);
        c.send(&post(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            "",
        ));
        c.send(&call("1", "tools/list", "", None));
        let r = c.responses();
        assert_eq!(r.len(), 2, "{split:?}");
        assert_eq!((r[0].status, r[0].body.len()), (202, 0));
        assert_eq!(r[1].status, 200);
    }
}

#[test]
fn progress_goes_over_an_event_stream_ending_with_the_result() {
    for split in Split::ALL {
        let mut c = Conn::new(split);
        c.send(&progress_call("3"));
        let id = c.server.app.requests[0];
        for k in 1..=2 {
            c.server
                .progress(
                    id,
                    format!(r#"{{"progressToken":"p1","progress":{k}}}"#).as_bytes(),
                )
                .unwrap();
            c.run();
        }
        assert!(c.responses().is_empty(), "the stream is open");
        c.server.respond(id, b"{\n  \"content\": []\n}").unwrap();
        c.run();
        let r = c.only();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("cache-control"), Some("no-cache"));
        assert_eq!(r.header("x-accel-buffering"), Some("no"));
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        let events = r.events();
        assert_eq!(events.len(), 3, "{events:?}");
        assert!(events[0].contains(r#""method":"notifications/progress""#));
        assert!(events[1].contains(r#""progress":2"#));
        assert_eq!(
            events[2],
            r#"{"jsonrpc":"2.0","id":3,"result":{   "content": [] }}"#
        );
        assert_eq!(c.server.store().in_use(), 0);
    }
}

#[test]
fn a_pipelined_request_waits_for_the_open_stream() {
    for split in Split::ALL {
        let mut c = Conn::new(split);
        let mut both = progress_call("1");
        both.extend_from_slice(&call("2", "tools/list", "", None));
        c.send(&both);
        let id = c.server.app.requests[0];
        assert!(c.server.is_waiting(), "{split:?}");
        c.server
            .progress(id, br#"{"progressToken":"p1","progress":1}"#)
            .unwrap();
        c.run();
        // Only the stream's head and event so far: nothing of the second.
        assert!(!String::from_utf8_lossy(&c.out).contains(r#""id":2"#));
        c.server.respond(id, br#"{"content":[]}"#).unwrap();
        c.run();
        let r = c.responses();
        assert_eq!(r.len(), 2, "{split:?}");
        assert_eq!(r[0].events().len(), 2);
        assert!(
            r[1].text()
                .starts_with(r#"{"jsonrpc":"2.0","id":2,"result""#)
        );
    }
}

#[test]
fn listen_streams_a_published_change() {
    for split in Split::ALL {
        let mut r = registry(&TOOLS);
        r.listen = true;
        let mut c = Conn::with(split, r, HttpConfig::default());
        c.send(&call(
            "\"L1\"",
            "subscriptions/listen",
            r#""notifications":{"toolsListChanged":true}"#,
            None,
        ));
        assert!(c.server.is_listening());
        assert_eq!(c.server.publish(ListChange::ToolsListChanged), 1);
        c.run();
        // Keep-alive comments while nothing happens.
        c.advance(Duration::from_secs(16));
        let text = String::from_utf8_lossy(&c.out).into_owned();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("content-type: text/event-stream"));
        let ack = text.find("io.modelcontextprotocol/subscriptionId").unwrap();
        let event = text.find("notifications/tools/list_changed").unwrap();
        assert!(ack < event);
        assert!(text[event..].contains("4\r\n: \n\n\r\n"), "{text}");
        // The client closes the stream: the listen ends.
        c.server.recv_eof();
        assert!(!c.server.is_listening());
        assert!(c.server.is_finished());
        assert_eq!(c.server.store().in_use(), 0);
    }
}

/// A server that shuts down ends a listen stream with its final result
/// (the chunked stream closed) and closes the connection after it; an
/// idle connection is over at once; a call in progress is answered, then
/// the connection is over instead of kept alive.
#[test]
fn going_away_finishes_the_exchange_then_closes() {
    for split in Split::ALL {
        let mut r = registry(&TOOLS);
        r.listen = true;
        let mut c = Conn::with(split, r, HttpConfig::default());
        c.send(&call(
            "\"L1\"",
            "subscriptions/listen",
            r#""notifications":{"toolsListChanged":true}"#,
            None,
        ));
        assert!(c.server.is_listening());
        c.server.go_away();
        c.run();
        assert!(!c.server.is_listening());
        let text = String::from_utf8_lossy(&c.out).into_owned();
        assert!(text.ends_with("0\r\n\r\n"), "{split:?}: {text}");
        let events = c.only().events();
        let last = events.last().unwrap();
        assert!(
            last.starts_with(r#"{"jsonrpc":"2.0","id":"L1","result""#),
            "{last}"
        );
        assert!(c.server.is_finished(), "{split:?}");
        assert_eq!(c.server.store().in_use(), 0);

        let mut c = Conn::new(split);
        c.server.go_away();
        assert!(c.server.is_finished());

        let mut c = Conn::new(split);
        c.send(&call("1", "tools/call", ECHO_ARGS, Some("echo")));
        let id = c.server.app.requests[0];
        c.server.go_away();
        assert!(!c.server.is_finished());
        c.server.respond(id, br#"{"content":[]}"#).unwrap();
        c.run();
        assert_eq!(c.only().status, 200);
        assert!(c.server.is_finished(), "{split:?}");
        // A request after that is dropped unanswered.
        c.send(&call("2", "tools/call", ECHO_ARGS, Some("echo")));
        assert_eq!(c.server.app.requests.len(), 1);
        assert_eq!(c.responses().len(), 1);
    }
}

#[test]
fn the_client_going_away_mid_stream_cancels_the_handler() {
    for split in Split::ALL {
        let mut c = Conn::new(split);
        c.send(&progress_call("1"));
        let id = c.server.app.requests[0];
        c.server
            .progress(id, br#"{"progressToken":"p1","progress":1}"#)
            .unwrap();
        c.run();
        c.server.recv_eof();
        c.run();
        assert!(
            c.server.app.events.contains(&ServerEvent::Cancelled {
                call: id,
                reason: CancelReason::Reset
            }),
            "{:?}",
            c.server.app.events
        );
        assert_eq!(c.server.respond(id, b"{}"), Err(SendError::Gone));
        assert!(c.server.is_finished());
        assert_eq!(c.server.store().in_use(), 0);
    }
}

#[test]
fn a_slow_head_is_closed_at_its_deadline() {
    for split in Split::ALL {
        let mut c = Conn::new(split);
        c.send(b"POST /mcp HTTP/1.1\r\nHost: loc");
        assert_eq!(c.server.store().in_use(), 1);
        c.advance(Duration::from_secs(9));
        assert!(!c.server.is_finished());
        c.advance(Duration::from_secs(2));
        assert!(c.server.is_finished(), "{split:?}");
        assert!(c.out.is_empty(), "closed without an answer");
        assert_eq!(c.server.store().in_use(), 0);
    }
    // An idle kept-alive connection closes after its idle timeout.
    let mut c = Conn::new(Split::Whole);
    c.send(&call("1", "tools/list", "", None));
    c.advance(Duration::from_secs(59));
    assert!(!c.server.is_finished());
    c.advance(Duration::from_secs(2));
    assert!(c.server.is_finished());
}

#[test]
fn limits_have_their_answers() {
    let config = HttpConfig {
        max_head_bytes: 512,
        max_body_bytes: 1024,
        ..HttpConfig::default()
    };
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2000)
    );
    let chunked = |body: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{body}"
        )
        .into_bytes()
    };
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("head", post("{}", &format!("X-Pad: {}\r\n", "y".repeat(600))), 431),
        ("content-length", post(&big, ""), 413),
        (
            "chunked",
            chunked(&format!("{:x}\r\n{big}\r\n0\r\n\r\n", big.len())),
            413,
        ),
        ("chunk size", chunked("zz\r\n{}\r\n0\r\n\r\n"), 400),
        ("chunk end", chunked("2\r\n{}XX0\r\n\r\n"), 400),
        (
            "coding",
            b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n".to_vec(),
            501,
        ),
    ];
    for (what, request, status) in cases {
        for split in Split::ALL {
            let mut c = Conn::with(split, registry(&TOOLS), config);
            c.send(&request);
            let r = c.only();
            assert_eq!(r.status, status, "{what} {split:?}");
            assert_eq!(r.header("connection"), Some("close"));
            assert!(c.server.is_finished(), "{what}");
            assert_eq!(c.server.store().in_use(), 0);
        }
    }
}

#[test]
fn a_chunked_request_is_served() {
    let body = String::from_utf8(call("1", "tools/list", "", None)).unwrap();
    let (head, json) = body.split_once("\r\n\r\n").unwrap();
    let head = head.replace(
        &format!("Content-Length: {}", json.len()),
        "Transfer-Encoding: chunked",
    );
    let (a, b) = json.split_at(10);
    let request = format!(
        "{head}\r\n\r\n{:x};ext\r\n{a}\r\n{:X}\r\n{b}\r\n0\r\nTrailer: x\r\n\r\n",
        a.len(),
        b.len()
    );
    for split in Split::ALL {
        let mut c = Conn::new(split);
        c.send(request.as_bytes());
        assert_eq!(c.only().status, 200, "{split:?}");
    }
}

#[test]
fn connection_close_is_honoured() {
    for split in Split::ALL {
        let mut c = Conn::new(split);
        c.server.app.auto = Some(r#"{"content":[]}"#);
        c.send(&call(
            "1",
            "tools/call",
            ECHO_ARGS,
            Some("echo\r\nConnection: close"),
        ));
        let r = c.only();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), Some("close"));
        assert!(c.server.is_finished(), "{split:?}");
    }
}

#[test]
fn bearer_tokens_are_checked() {
    let config = HttpConfig {
        authorize: true,
        endpoint: HttpEndpoint {
            resource_metadata: Some("https://mcp.example/.well-known/oauth-protected-resource"),
            ..HttpEndpoint::default()
        },
        ..HttpConfig::default()
    };
    for (decision, status, challenge) in [
        (
            Decision::Unauthenticated,
            401,
            r#"Bearer realm="mcpwire", resource_metadata="https://mcp.example/.well-known/oauth-protected-resource""#,
        ),
        (
            Decision::PermissionDenied,
            403,
            r#"Bearer realm="mcpwire", error="insufficient_scope", resource_metadata="https://mcp.example/.well-known/oauth-protected-resource""#,
        ),
    ] {
        for split in Split::ALL {
            let mut c = Conn::with(split, registry(&TOOLS), config);
            c.send(&call("1", "tools/list", "", None));
            let id = c.server.app.authorize[0];
            assert_eq!(c.server.bearer_token(id), None);
            c.server.authorize(id, decision);
            c.run();
            let r = c.only();
            assert_eq!(r.status, status, "{split:?}");
            assert_eq!(r.header("www-authenticate"), Some(challenge));
            assert!(c.server.is_finished());
            assert_eq!(c.server.store().in_use(), 0);
        }
    }
    let mut c = Conn::with(Split::Byte, registry(&TOOLS), config);
    c.send(&call(
        "1",
        "tools/call",
        ECHO_ARGS,
        Some("echo\r\nAuthorization: Bearer s3cret"),
    ));
    let id = c.server.app.authorize[0];
    assert_eq!(c.server.bearer_token(id), Some("s3cret"));
    c.server.authorize(id, Decision::Allow { principal: "ada" });
    c.run();
    let call_id = c.server.app.requests[0];
    let request = c.server.request(call_id).unwrap();
    assert_eq!(request.principal, Some("ada"));
    assert_eq!(request.headers.get(b"mcp-name"), Some(&b"echo"[..]));
    c.server.respond(call_id, b"{}").unwrap();
    c.run();
    assert_eq!(c.only().status, 200);
}

#[test]
fn a_request_past_its_deadline_is_answered_and_cancelled() {
    let mut c = Conn::new(Split::Whole);
    c.send(&call("1", "tools/call", ECHO_ARGS, Some("echo")));
    let id = c.server.app.requests[0];
    c.advance(Duration::from_secs(61));
    assert!(c.server.app.events.contains(&ServerEvent::Cancelled {
        call: id,
        reason: CancelReason::Deadline
    }));
    let r = c.only();
    assert_eq!((r.status, r.error_code()), (200, Some(-32001)));
}

#[test]
fn an_http10_stream_ends_with_the_connection() {
    for split in Split::ALL {
        let mut c = Conn::new(split);
        let request = String::from_utf8(progress_call("1"))
            .unwrap()
            .replace("HTTP/1.1", "HTTP/1.0");
        c.send(request.as_bytes());
        let id = c.server.app.requests[0];
        c.server
            .progress(id, br#"{"progressToken":"p1","progress":1}"#)
            .unwrap();
        c.run();
        c.server.respond(id, br#"{"content":[]}"#).unwrap();
        c.run();
        assert!(c.server.is_finished(), "{split:?}");
        let r = c.only();
        assert_eq!(r.header("transfer-encoding"), None);
        assert_eq!(r.header("connection"), Some("close"));
        assert_eq!(r.events().len(), 2);
    }
}

#[test]
fn expect_continue_gets_an_interim_answer() {
    let request = String::from_utf8(call("1", "tools/list", "", None))
        .unwrap()
        .replace("Accept:", "Expect: 100-continue\r\nAccept:");
    let (head, body) = request.split_once("\r\n\r\n").unwrap();
    let mut c = Conn::new(Split::Whole);
    c.send(format!("{head}\r\n\r\n").as_bytes());
    assert_eq!(c.out, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.send(body.as_bytes());
    assert_eq!(c.only().status, 200);
}

#[test]
fn a_client_that_takes_only_json_gets_json() {
    let request = String::from_utf8(progress_call("1"))
        .unwrap()
        .replace("application/json, text/event-stream", "application/json");
    let mut c = Conn::new(Split::Whole);
    c.send(request.as_bytes());
    let id = c.server.app.requests[0];
    c.server
        .progress(id, br#"{"progressToken":"p1","progress":1}"#)
        .unwrap();
    c.server.respond(id, br#"{"content":[]}"#).unwrap();
    c.run();
    let r = c.only();
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.text(),
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#
    );
}

#[test]
fn mirrored_parameters_are_checked_case_insensitively() {
    static ANNOTATED: [ToolInfo<'static>; 1] = [support::mcp::lookup(
        r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
    )];
    let args = r#""name":"lookup","arguments":{"region":"eu-north1"}"#;
    for (what, extra, status) in [
        ("missing", "", 400),
        ("lowercase name", "mcp-param-region: eu-north1\r\n", 200),
        ("padded", "MCP-PARAM-REGION:   eu-north1  \r\n", 200),
        (
            "base64",
            "Mcp-Param-Region: =?base64?ZXUtbm9ydGgx?=\r\n",
            200,
        ),
        ("different", "Mcp-Param-Region: EU-NORTH1\r\n", 400),
    ] {
        let mut c = Conn::with(Split::Byte, registry(&ANNOTATED), HttpConfig::default());
        c.server.app.auto = Some("{}");
        let name = format!(" lookup \r\n{}", extra.trim_end_matches("\r\n"));
        let name = if extra.is_empty() { " lookup " } else { &name };
        c.send(&call("1", "tools/call", args, Some(name)));
        let r = c.only();
        assert_eq!(r.status, status, "{what}: {}", r.text());
        if status == 400 {
            assert_eq!(r.error_code(), Some(-32020));
        }
    }
}
