//! The stdio binding of the server engine, as a client on the other end of
//! the pipe sees it: lines in, lines out, delivered whole, in random pieces
//! and a byte at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use core::time::Duration;

use mcpwire_core::drive::Step;
use mcpwire_core::mcp::registry::{Registry, ToolInfo};
use mcpwire_core::mcp::server::{
    CallId, ListChange, RequestKind, SendError, ServerEvent, StdioConfig, StdioServer,
};
use mcpwire_core::mcp::{CallStore, Message, SlabStore, json};
use mcpwire_core::time::Instant;
use mcpwire_sim::{Pipe, Split};

mod support;

use support::mcp::{App, ECHO, META, Side, registry};

const TOOLS: [ToolInfo<'static>; 1] = [ECHO];

type Server<S> = StdioServer<'static, S, 8>;

/// Room in each direction of the pipe.
const PIPE: usize = 16384;

/// What the application saw.
#[derive(Debug, Default)]
struct Seen {
    requests: Vec<(CallId, String, String)>,
    events: Vec<ServerEvent>,
}

impl<S: CallStore> App<Server<S>> for Seen {
    fn take_events(&mut self, server: &mut Server<S>) {
        while let Some(e) = server.poll_event() {
            match e {
                ServerEvent::Request { call } => {
                    let r = server.request(call).unwrap();
                    let name = match r.kind {
                        RequestKind::CallTool { name, .. } => name.to_owned(),
                        _ => String::new(),
                    };
                    self.requests
                        .push((call, name, String::from_utf8(r.id.to_vec()).unwrap()));
                }
                e => self.events.push(e),
            }
        }
    }
}

/// The server between its stdin and stdout pipes, both cut as the split
/// says, and the bytes it wrote.
struct Stdio<S: CallStore> {
    server: Side<Server<S>, Seen>,
    stdin: Pipe<PIPE>,
    stdout: Pipe<PIPE>,
    now: Instant,
    out: Vec<u8>,
}

impl Stdio<SlabStore<4096, 8>> {
    fn new(split: Split) -> Self {
        Self::with(
            split,
            SlabStore::new(),
            registry(&TOOLS),
            StdioConfig::default(),
        )
    }
}

impl<S: CallStore> Stdio<S> {
    fn with(split: Split, store: S, registry: Registry<'static>, config: StdioConfig) -> Self {
        Self {
            server: Side {
                endpoint: StdioServer::new(registry, config, store, Instant::ZERO),
                app: Seen::default(),
            },
            stdin: Pipe::new(split),
            stdout: Pipe::new(split),
            now: Instant::ZERO,
            out: Vec::new(),
        }
    }

    /// Writes `bytes` to the server's input and runs it.
    fn send(&mut self, bytes: &[u8]) {
        assert_eq!(self.stdin.write(bytes), bytes.len(), "stdin is full");
        self.run();
    }

    /// Feeds what is pending, piece by piece, until the server takes no
    /// more (all fed, or it waits for the application to answer); drains
    /// events and output.
    fn run(&mut self) {
        self.server.take_events();
        loop {
            let d = self
                .stdin
                .deliver(&mut self.server, self.now, &mut self.stdout);
            assert_ne!(d.end, Step::Stuck, "stuck: {:?}", self.server.endpoint);
            let moved = d.octets + self.stdout.transmit(&mut self.server);
            self.out.extend_from_slice(self.stdout.pending());
            self.stdout.consume(self.stdout.len());
            if moved == 0 {
                break;
            }
        }
    }

    /// The complete lines written so far, each checked to be one JSON-RPC
    /// message.
    fn lines(&self) -> Vec<String> {
        let text = std::str::from_utf8(&self.out).unwrap();
        let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        complete
            .lines()
            .map(|l| {
                assert!(
                    Message::parse(l.as_bytes(), 64).is_ok(),
                    "not JSON-RPC: {l}"
                );
                l.to_owned()
            })
            .collect()
    }

    fn answer(&mut self, call: CallId, result: &str) {
        self.server.respond(call, result.as_bytes()).unwrap();
        self.run();
    }
}

fn request(id: &str, method: &str, params: &str) -> String {
    let sep = if params.is_empty() { "" } else { "," };
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params}{sep}{META}}}}}"#)
        + "\n"
}

fn error_code(line: &str) -> Option<i64> {
    let error = json::get(line.as_bytes(), b"error")?;
    json::as_i64(json::get(error, b"code")?)
}

fn id_of(line: &str) -> String {
    String::from_utf8(json::get(line.as_bytes(), b"id").unwrap().to_vec()).unwrap()
}

#[test]
fn the_engine_answers_discover_and_lists() {
    for split in Split::ALL {
        let mut p = Stdio::new(split);
        p.send(request("1", "server/discover", "").as_bytes());
        p.send(request("\"b\"", "tools/list", "").as_bytes());
        let lines = p.lines();
        assert_eq!(lines.len(), 2, "{split:?} {lines:?}");
        assert_eq!(id_of(&lines[0]), "1");
        assert!(
            lines[0].contains(r#""supportedVersions":["2026-07-28"]"#),
            "{}",
            lines[0]
        );
        assert_eq!(id_of(&lines[1]), "\"b\"");
        assert!(lines[1].contains(r#""name":"echo""#));
        assert!(p.server.app.requests.is_empty());
    }
}

#[test]
fn tool_calls_run_concurrently_and_answer_by_id() {
    for split in Split::ALL {
        let mut p = Stdio::new(split);
        let a = request(
            "1",
            "tools/call",
            r#""name":"echo","arguments":{"text":"a"}"#,
        );
        let b = request(
            "2",
            "tools/call",
            r#""name":"echo","arguments":{"text":"b"}"#,
        );
        p.send(format!("{a}{b}").as_bytes());
        assert_eq!(p.server.app.requests.len(), 2, "{split:?}");
        assert!(
            p.server
                .app
                .requests
                .iter()
                .all(|(_, name, _)| name == "echo")
        );
        let (first, second) = (p.server.app.requests[0].0, p.server.app.requests[1].0);
        // Progress for the first, then the second answers before it.
        p.server
            .notify(
                first,
                "notifications/progress",
                br#"{"progressToken":"t","progress":1}"#,
            )
            .unwrap();
        p.answer(second, r#"{"content":[]}"#);
        p.answer(first, r#"{"content":[{"type":"text","text":"a"}]}"#);
        let lines = p.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("notifications/progress"));
        assert_eq!(id_of(&lines[1]), "2");
        assert_eq!(id_of(&lines[2]), "1");
        assert_eq!(p.server.store().in_use(), 0);
    }
}

/// A handler's result or notification given as pretty-printed JSON text
/// (a forwarded server's, say) still leaves as one line each, its strings
/// untouched.
#[test]
fn pretty_printed_results_and_notifications_leave_as_one_line() {
    for split in Split::ALL {
        let mut p = Stdio::new(split);
        let call = request(
            "7",
            "tools/call",
            r#""name":"echo","arguments":{"text":"a"}"#,
        );
        p.send(call.as_bytes());
        let id = p.server.app.requests[0].0;
        p.server
            .notify(
                id,
                "notifications/progress",
                b"{\n  \"progressToken\": \"t\",\r\n  \"progress\": 1\n}",
            )
            .unwrap();
        p.run();
        p.answer(
            id,
            "{\n  \"content\": [\n    {\"type\": \"text\", \"text\": \"two\\nlines\"}\n  ]\n}\n",
        );
        let lines = p.lines();
        assert_eq!(lines.len(), 2, "{split:?} {lines:?}");
        assert!(lines[0].contains("notifications/progress"), "{}", lines[0]);
        let progress = json::get(lines[0].as_bytes(), b"params").unwrap();
        assert_eq!(json::get(progress, b"progress"), Some(&b"1"[..]));
        assert_eq!(id_of(&lines[1]), "7");
        let result = json::get(lines[1].as_bytes(), b"result").unwrap();
        let content = json::get(result, b"content").unwrap();
        let first = json::elements(content).next().unwrap();
        assert_eq!(json::get(first, b"text"), Some(&br#""two\nlines""#[..]));
    }
}

#[test]
fn a_cancelled_request_stops_its_handler_and_gets_no_response() {
    for split in Split::ALL {
        let mut p = Stdio::new(split);
        p.send(request("7", "tools/call", r#""name":"echo","arguments":{}"#).as_bytes());
        let call = p.server.app.requests[0].0;
        p.send(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}
"#);
        assert!(
            p.server.app.events.contains(&ServerEvent::Cancelled {
                call,
                reason: mcpwire_core::mcp::server::CancelReason::Reset
            }),
            "{:?}",
            p.server.app.events
        );
        assert_eq!(p.server.respond(call, b"{}"), Err(SendError::Gone));
        p.run();
        assert!(p.lines().is_empty(), "{:?}", p.lines());
        assert_eq!(p.server.store().in_use(), 0);
        // The id is free again.
        p.send(request("7", "tools/list", "").as_bytes());
        assert_eq!(p.lines().len(), 1);
    }
}

#[test]
fn bad_lines_get_their_error_and_the_channel_goes_on() {
    for split in Split::ALL {
        let config = StdioConfig {
            max_line_bytes: 512,
            ..StdioConfig::default()
        };
        let mut p = Stdio::with(split, SlabStore::<4096, 8>::new(), registry(&TOOLS), config);
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\",\"params\":{{\"pad\":\"{}\"}}}}\n",
            "x".repeat(2000)
        );
        let mut input = Vec::new();
        input.extend_from_slice(b"this is not json\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}\n");
        input.extend_from_slice(b"[1,2]\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n");
        input.extend_from_slice(b"\r\n\n");
        input.extend_from_slice(long.as_bytes());
        input.extend_from_slice(request("4", "no/such", "").as_bytes());
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\"}\n");
        input.extend_from_slice(request("6", "tools/list", "").as_bytes());
        p.send(&input);
        let lines = p.lines();
        let got: Vec<(String, Option<i64>)> =
            lines.iter().map(|l| (id_of(l), error_code(l))).collect();
        assert_eq!(
            got,
            [
                ("null".into(), Some(-32700)),
                ("null".into(), Some(-32700)),
                ("null".into(), Some(-32600)),
                ("null".into(), Some(-32600)),
                ("null".into(), Some(-32600)),
                ("4".into(), Some(-32601)),
                ("5".into(), Some(-32602)),
                ("6".into(), None),
            ],
            "{split:?} {lines:#?}"
        );
        assert_eq!(p.server.store().in_use(), 0);
    }
}

#[test]
fn an_unsupported_version_names_the_supported_ones() {
    let mut p = Stdio::new(Split::Whole);
    p.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}
"#);
    let lines = p.lines();
    assert_eq!(error_code(&lines[0]), Some(-32022));
    assert!(
        lines[0].contains(r#""data":{"supported":["2026-07-28"],"requested":"2025-11-25"}"#),
        "{}",
        lines[0]
    );
}

#[test]
fn an_id_in_use_is_refused() {
    let mut p = Stdio::new(Split::Whole);
    let call = request("1", "tools/call", r#""name":"echo","arguments":{}"#);
    p.send(format!("{call}{call}").as_bytes());
    assert_eq!(p.server.app.requests.len(), 1);
    let lines = p.lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(error_code(&lines[0]), Some(-32600));
}

#[test]
fn listen_events_carry_the_subscription_id_and_end_at_eof() {
    for split in Split::ALL {
        let mut r = registry(&TOOLS);
        r.listen = true;
        let mut p = Stdio::with(
            split,
            SlabStore::<4096, 8>::new(),
            r,
            StdioConfig::default(),
        );
        p.send(
            request(
                "\"s\"",
                "subscriptions/listen",
                r#""notifications":{"toolsListChanged":true}"#,
            )
            .as_bytes(),
        );
        assert_eq!(p.server.publish(ListChange::ToolsListChanged), 1);
        assert_eq!(p.server.publish(ListChange::PromptsListChanged), 0);
        p.run();
        p.server.recv_eof();
        p.run();
        let lines = p.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        for l in &lines {
            assert!(
                l.contains(r#""io.modelcontextprotocol/subscriptionId":"s""#),
                "{l}"
            );
        }
        assert!(lines[0].contains(r#""notifications":{"toolsListChanged":true}"#));
        assert!(lines[1].contains("notifications/tools/list_changed"));
        assert!(lines[2].contains(r#""resultType":"complete""#));
        assert!(p.server.is_finished());
    }
}

#[test]
fn a_last_line_without_newline_is_read_at_eof() {
    let mut p = Stdio::new(Split::Whole);
    let line = request("1", "tools/list", "");
    p.send(line.trim_end().as_bytes());
    assert!(p.lines().is_empty());
    p.server.recv_eof();
    p.run();
    assert_eq!(p.lines().len(), 1);
    assert!(p.server.is_finished());
}

#[test]
fn calls_in_progress_finish_after_eof() {
    let mut p = Stdio::new(Split::Whole);
    p.send(request("1", "tools/call", r#""name":"echo","arguments":{}"#).as_bytes());
    p.server.recv_eof();
    assert!(!p.server.is_finished());
    let call = p.server.app.requests[0].0;
    p.answer(call, "{}");
    assert_eq!(p.lines().len(), 1);
    assert!(p.server.is_finished());
}

/// A server with room for two calls at a time.
fn two_calls(split: Split) -> Stdio<SlabStore<4096, 2>> {
    Stdio::with(
        split,
        SlabStore::new(),
        registry(&TOOLS),
        StdioConfig::default(),
    )
}

/// `echo` calls with these ids, one a line.
fn echo_calls(ids: std::ops::RangeInclusive<u32>) -> String {
    ids.map(|i| {
        request(
            &i.to_string(),
            "tools/call",
            r#""name":"echo","arguments":{}"#,
        )
    })
    .collect()
}

#[test]
fn with_every_call_taken_the_server_waits_then_reads_on() {
    for split in Split::ALL {
        let mut p = two_calls(split);
        p.send(echo_calls(1..=4).as_bytes());
        assert_eq!(p.server.app.requests.len(), 2, "{split:?}");
        assert!(!p.stdin.is_empty());
        for k in 0..2 {
            let call = p.server.app.requests[k].0;
            p.answer(call, "{}");
        }
        p.run();
        assert_eq!(p.server.app.requests.len(), 4, "{split:?}");
        for k in 2..4 {
            let call = p.server.app.requests[k].0;
            p.answer(call, "{}");
        }
        let ids: Vec<String> = p.lines().iter().map(|l| id_of(l)).collect();
        assert_eq!(ids, ["1", "2", "3", "4"]);
    }
}

#[test]
fn a_request_past_its_deadline_is_cancelled_and_answered() {
    let config = StdioConfig {
        request_timeout: Duration::from_millis(50),
        ..StdioConfig::default()
    };
    let mut p = Stdio::with(
        Split::Whole,
        SlabStore::<4096, 8>::new(),
        registry(&TOOLS),
        config,
    );
    p.send(request("1", "tools/call", r#""name":"echo","arguments":{}"#).as_bytes());
    let call = p.server.app.requests[0].0;
    assert_eq!(p.server.poll_timeout(), Some(Instant::from_millis(50)));
    p.now = Instant::from_millis(60);
    p.server.handle_timeout(p.now);
    p.run();
    assert!(
        p.server
            .app
            .events
            .iter()
            .any(|e| matches!(e, ServerEvent::Cancelled { call: c, .. } if *c == call))
    );
    let lines = p.lines();
    assert_eq!(error_code(&lines[0]), Some(-32001), "{lines:?}");
    assert_eq!(p.server.respond(call, b"{}"), Err(SendError::Gone));
}

/// With every call taken, a cancellation still gets through: a
/// notification needs no call, and the request behind it waits its turn.
#[test]
fn a_cancellation_gets_through_when_every_call_is_taken() {
    for split in Split::ALL {
        let mut p = two_calls(split);
        p.send(echo_calls(1..=2).as_bytes());
        assert_eq!(p.server.app.requests.len(), 2);
        let mut input = String::from(
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}\n",
        );
        input.push_str(&request("3", "tools/list", ""));
        p.send(input.as_bytes());
        let cancelled = p.server.app.requests[0].0;
        assert!(
            p.server
                .app
                .events
                .iter()
                .any(|e| matches!(e, ServerEvent::Cancelled { call, .. } if *call == cancelled)),
            "{:?}",
            p.server.app.events
        );
        // The freed call took the list request.
        let ids: Vec<String> = p.lines().iter().map(|l| id_of(l)).collect();
        assert_eq!(ids, ["3"]);
        let second = p.server.app.requests[1].0;
        p.answer(second, "{}");
        let ids: Vec<String> = p.lines().iter().map(|l| id_of(l)).collect();
        assert_eq!(ids, ["3", "2"]);
    }
}

/// A forwarding registry: every admitted request, whatever its method,
/// is the application's, named by its method; a listen has no default
/// deadline; the checks still answer what they refuse.
#[test]
fn a_forwarding_registry_hands_every_request_to_the_application() {
    let config = StdioConfig {
        request_timeout: Duration::from_millis(50),
        ..StdioConfig::default()
    };
    let forward = Registry {
        forward: true,
        ..registry(&[])
    };
    let mut p = Stdio::with(Split::Whole, SlabStore::<4096, 8>::new(), forward, config);
    p.send(request("1", "server/discover", "").as_bytes());
    p.send(request("2", "subscriptions/listen", r#""notifications":{}"#).as_bytes());
    p.send(request("3", "x-vendor/thing", r#""a":1"#).as_bytes());
    let calls: Vec<CallId> = p.server.app.requests.iter().map(|r| r.0).collect();
    assert_eq!(calls.len(), 3);
    let seen: Vec<(String, bool)> = calls
        .iter()
        .map(|&c| {
            let r = p.server.request(c).unwrap();
            // A JSON-RPC caller pages itself.
            assert!(matches!(
                r.kind,
                RequestKind::Forward {
                    whole_list: false,
                    ..
                }
            ));
            (r.method().to_owned(), r.deadline.is_some())
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("server/discover".to_owned(), true),
            ("subscriptions/listen".to_owned(), false),
            ("x-vendor/thing".to_owned(), true),
        ]
    );
    // Nothing was answered by the engine itself.
    assert!(p.lines().is_empty(), "{:?}", p.lines());
    // Past the deadline: the two calls time out, the listen goes on.
    p.now = Instant::from_millis(60);
    p.server.handle_timeout(p.now);
    p.run();
    let timed_out: Vec<String> = p.lines().iter().map(|l| id_of(l)).collect();
    assert_eq!(timed_out, ["1", "3"]);
    p.server.notify(calls[1], "notifications/x", b"{}").unwrap();
    p.run();
    assert_eq!(p.lines().len(), 3);
    // A bad version is the binding's answer still; an invalid message
    // keeps its id.
    p.send(
        b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"1999-01-01\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}\n",
    );
    p.send(b"{\"jsonrpc\":\"1.0\",\"id\":5,\"method\":\"tools/list\"}\n");
    let lines = p.lines();
    let tail: Vec<(String, Option<i64>)> = lines[3..]
        .iter()
        .map(|l| (id_of(l), error_code(l)))
        .collect();
    assert_eq!(
        tail,
        [("4".into(), Some(-32022)), ("5".into(), Some(-32600))],
        "{lines:#?}"
    );
}
