//! The stdio client binding against scripted server lines: the era probe
//! and its fallback, correlation by id and progress token, deadlines and
//! cancellation, bad and over-long lines, the end of the server's stdout.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use core::time::Duration;

use mcpwire_core::mcp::client::CallId;
use mcpwire_core::mcp::client::stdio::{
    Era, EraChoice, LOCAL_CLOSED, LOCAL_TIMEOUT, StdioClient, StdioClientConfig, StdioEvent,
    StdioStartError,
};
use mcpwire_core::time::Instant;

type Client = StdioClient<Vec<u8>, 4>;

/// What an event said, with its text.
#[derive(Debug, PartialEq)]
enum Seen {
    Notification(CallId, String),
    Response(CallId, String),
    Failed(CallId, i64, bool),
    Ended(CallId),
    Other(StdioEvent, String),
}

fn client(config: StdioClientConfig, line: usize) -> Client {
    StdioClient::new(config, vec![0; line], Instant::ZERO)
}

/// Every line the client wants to write.
fn written(c: &mut Client) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = c.poll_transmit(&mut buf);
        if n == 0 {
            return out;
        }
        out.push(String::from_utf8(buf[..n].to_vec()).unwrap());
    }
}

fn drain(c: &mut Client) -> Vec<Seen> {
    let mut seen = Vec::new();
    while let Some(e) = c.poll_event() {
        let text = |c: &Client, call| String::from_utf8(c.message(call).unwrap().to_vec()).unwrap();
        seen.push(match e {
            StdioEvent::Notification { call } => Seen::Notification(call, text(c, call)),
            StdioEvent::Response { call } => Seen::Response(call, text(c, call)),
            StdioEvent::Failed { call } => {
                let f = c.failure(call).unwrap();
                Seen::Failed(call, f.code, f.local)
            }
            StdioEvent::Ended { call } => Seen::Ended(call),
            StdioEvent::BadLine { .. } => {
                Seen::Other(e, String::from_utf8_lossy(c.bad_line()).into_owned())
            }
            StdioEvent::Unmatched => {
                Seen::Other(e, String::from_utf8_lossy(c.unmatched()).into_owned())
            }
            e => Seen::Other(e, String::new()),
        });
    }
    seen
}

/// Feeds `input` whole, draining after each line.
fn feed(c: &mut Client, input: &str, now: Instant) -> Vec<Seen> {
    let mut input = input.as_bytes();
    let mut seen = drain(c);
    while !input.is_empty() {
        let n = c.recv(input, now);
        input = &input[n..];
        seen.extend(drain(c));
    }
    seen
}

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":"mcpwire-probe","result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"public"}}
"#;

fn modern() -> Client {
    let mut c = client(StdioClientConfig::default(), 4096);
    c.begin(Instant::ZERO);
    let lines = written(&mut c);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains("\"method\":\"server/discover\""));
    assert!(lines[0].contains("\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\""));
    assert_eq!(
        feed(&mut c, DISCOVER, Instant::ZERO),
        [Seen::Other(StdioEvent::Ready, String::new())]
    );
    c
}

fn start(c: &mut Client, body: &str, timeout: Option<Duration>) -> (CallId, String) {
    let mut out = [0u8; 2048];
    let (call, n) = c
        .call(body.as_bytes(), timeout, Instant::ZERO, &mut out)
        .unwrap();
    (call, String::from_utf8(out[..n].to_vec()).unwrap())
}

#[test]
fn a_modern_server_gets_meta_on_every_request_and_answers_by_id() {
    let mut c = modern();
    assert_eq!(c.era().era, Some(Era::Modern));
    assert_eq!(c.era().version(), Some("2026-07-28"));
    assert!(!c.era().fallback);
    assert_eq!(c.era().server_versions(), Some("[\"2026-07-28\"]"));
    let (a, line) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"p1"}}}"#,
        None,
    );
    assert!(line.ends_with("}\n") && line.matches('\n').count() == 1);
    assert!(line.contains("\"io.modelcontextprotocol/clientCapabilities\":{}"));
    assert!(line.contains("\"progressToken\":\"p1\""));
    let (b, _) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":"two","method":"tools/list"}"#,
        None,
    );
    // Interleaved: b's response, a's progress, a's response.
    let seen = feed(
        &mut c,
        concat!(
            "{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"result\":{\"tools\":[]}}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p1\",\"progress\":1}}\r\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n",
        ),
        Instant::ZERO,
    );
    assert_eq!(
        seen,
        [
            Seen::Response(b, "{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"result\":{\"tools\":[]}}".into()),
            Seen::Ended(b),
            Seen::Notification(a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p1\",\"progress\":1}}".into()),
            Seen::Response(a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}".into()),
            Seen::Ended(a),
        ]
    );
    assert!(!c.is_active(a) && !c.has_calls());
}

#[test]
fn a_progress_token_in_use_is_refused_until_its_call_ends() {
    let mut c = modern();
    let body = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow","_meta":{{"progressToken":"p"}}}}}}"#
        )
    };
    let (a, _) = start(&mut c, &body(1), None);
    // The second call's progress would be routed to the first: refused,
    // nothing written, the first call untouched.
    let mut out = [0u8; 2048];
    match c.call(body(2).as_bytes(), None, Instant::ZERO, &mut out) {
        Err(StdioStartError::Invalid(e)) => assert_eq!(e.message, "progress token in use"),
        other => panic!("{other:?}"),
    }
    assert!(written(&mut c).is_empty());
    assert!(c.is_active(a));
    feed(
        &mut c,
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n",
        Instant::ZERO,
    );
    assert!(!c.is_active(a));
    // `null` (or anything but a string or a number) is no token: any
    // number of calls may carry it.
    let null = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow","_meta":{{"progressToken":null}}}}}}"#
        )
    };
    let (n1, _) = start(&mut c, &null(10), None);
    let (n2, _) = start(&mut c, &null(11), None);
    assert!(c.is_active(n1) && c.is_active(n2));
    // Its call ended: the token is free again.
    let (b, line) = start(&mut c, &body(3), None);
    assert!(line.contains("\"progressToken\":\"p\""), "{line}");
    assert!(c.is_active(b));
}

#[test]
fn an_unknown_method_falls_back_to_initialize_without_meta() {
    let mut c = client(StdioClientConfig::default(), 4096);
    c.begin(Instant::ZERO);
    assert_eq!(written(&mut c).len(), 1);
    let seen = feed(
        &mut c,
        "{\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-probe\",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\n",
        Instant::ZERO,
    );
    assert_eq!(seen, []);
    let lines = written(&mut c);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("\"method\":\"initialize\""));
    assert!(lines[0].contains("\"protocolVersion\":\"2025-11-25\""));
    // Nothing may start before the handshake is over.
    let mut out = [0u8; 256];
    assert_eq!(
        c.call(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            None,
            Instant::ZERO,
            &mut out
        ),
        Err(StdioStartError::NotReady)
    );
    feed(
        &mut c,
        "{\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-initialize\",\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":{\"name\":\"old\",\"version\":\"1\"}}}\n",
        Instant::ZERO,
    );
    let lines = written(&mut c);
    assert_eq!(
        lines,
        ["{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"]
    );
    assert_eq!(
        drain(&mut c),
        [Seen::Other(StdioEvent::Ready, String::new())]
    );
    let d = c.era();
    assert_eq!(
        (d.era, d.version(), d.fallback),
        (Some(Era::Legacy), Some("2025-11-25"), true)
    );
    assert_eq!(d.probe_error, Some(-32601));
    assert!(!d.restarted);
    let (_, line) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
        None,
    );
    assert_eq!(
        line,
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}\n"
    );
}

#[test]
fn a_modern_version_error_picks_another_version_not_a_fallback() {
    let mut c = client(StdioClientConfig::default(), 4096);
    c.begin(Instant::ZERO);
    written(&mut c);
    // Naming only the version we asked for: no other modern version, so
    // legacy; a -32022 naming only legacy versions is a fallback too.
    feed(
        &mut c,
        "{\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-probe\",\"error\":{\"code\":-32022,\"message\":\"Unsupported protocol version\",\"data\":{\"supported\":[\"2025-11-25\"],\"requested\":\"2026-07-28\"}}}\n",
        Instant::ZERO,
    );
    assert!(c.era().fallback);
    assert_eq!(c.era().server_versions(), Some("[\"2025-11-25\"]"));
    assert!(written(&mut c)[0].contains("\"initialize\""));
}

/// A -32022 naming only versions this client speaks in neither era: the
/// server is modern and cannot be spoken to; `initialize` would be
/// refused too, so the handshake fails with the server's versions noted.
#[test]
fn a_version_error_naming_only_foreign_versions_fails_the_handshake() {
    let mut c = client(StdioClientConfig::default(), 4096);
    c.begin(Instant::ZERO);
    written(&mut c);
    feed(
        &mut c,
        "{\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-probe\",\"error\":{\"code\":-32022,\"message\":\"Unsupported protocol version\",\"data\":{\"supported\":[\"2027-01-01\"],\"requested\":\"2026-07-28\"}}}\n",
        Instant::ZERO,
    );
    assert!(!c.era().fallback);
    assert_eq!(c.era().probe_error, Some(-32022));
    assert_eq!(c.era().server_versions(), Some("[\"2027-01-01\"]"));
    assert!(
        c.handshake_error()
            .is_some_and(|why| why.contains("-32022")),
        "{:?}",
        c.handshake_error()
    );
    assert!(written(&mut c).is_empty());
}

#[test]
fn a_silent_probe_restarts_the_child_then_initializes() {
    let config = StdioClientConfig {
        probe_timeout: Duration::from_secs(2),
        ..StdioClientConfig::default()
    };
    let mut c = client(config, 4096);
    c.begin(Instant::ZERO);
    written(&mut c);
    assert_eq!(c.poll_timeout(), Some(Instant::from_millis(2000)));
    c.handle_timeout(Instant::from_millis(2000));
    assert_eq!(
        drain(&mut c),
        [Seen::Other(StdioEvent::RestartNeeded, String::new())]
    );
    assert!(written(&mut c).is_empty());
    c.restarted(Instant::from_millis(2100));
    assert!(written(&mut c)[0].contains("\"initialize\""));
    assert!(c.era().restarted && c.era().fallback);
    assert!(c.era().reason.unwrap().contains("no answer"));
}

#[test]
fn a_deadline_fails_the_call_and_sends_cancelled() {
    let mut c = modern();
    let (a, _) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"hang"}}"#,
        Some(Duration::from_millis(500)),
    );
    assert_eq!(c.poll_timeout(), Some(Instant::from_millis(500)));
    c.handle_timeout(Instant::from_millis(499));
    assert_eq!(drain(&mut c), []);
    c.handle_timeout(Instant::from_millis(500));
    assert_eq!(
        drain(&mut c),
        [
            Seen::Failed(a, i64::from(LOCAL_TIMEOUT), true),
            Seen::Ended(a)
        ]
    );
    let lines = written(&mut c);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].starts_with(
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7,"
    ));
    // A response after the cancellation belongs to no call.
    let seen = feed(
        &mut c,
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n",
        Instant::ZERO,
    );
    assert!(
        matches!(seen[..], [Seen::Other(StdioEvent::Unmatched, _)]),
        "{seen:?}"
    );
}

#[test]
fn the_application_cancels_a_call() {
    let mut c = modern();
    let (a, _) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"hang"}}"#,
        None,
    );
    assert!(c.cancel(a));
    assert!(!c.cancel(a));
    assert_eq!(drain(&mut c), []);
    let lines = written(&mut c);
    assert!(lines[0].contains("\"requestId\":\"x\""), "{lines:?}");
    // The id is free again.
    start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/list"}"#,
        None,
    );
}

#[test]
fn eof_fails_every_call_in_flight() {
    let mut c = modern();
    let (a, _) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        None,
    );
    let (b, _) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        None,
    );
    c.recv_eof();
    let seen = drain(&mut c);
    assert_eq!(
        seen,
        [
            Seen::Other(StdioEvent::Closed, String::new()),
            Seen::Failed(a, i64::from(LOCAL_CLOSED), true),
            Seen::Ended(a),
            Seen::Failed(b, i64::from(LOCAL_CLOSED), true),
            Seen::Ended(b),
        ]
    );
    let mut out = [0u8; 256];
    assert_eq!(
        c.call(
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
            None,
            Instant::ZERO,
            &mut out
        ),
        Err(StdioStartError::Closed)
    );
    // A modern client needs no handshake after a restart.
    c.restarted(Instant::ZERO);
    assert_eq!(
        drain(&mut c),
        [Seen::Other(StdioEvent::Ready, String::new())]
    );
    start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
        None,
    );
}

#[test]
fn bad_and_over_long_lines_are_reported_and_skipped() {
    let mut c = client(StdioClientConfig::default(), 256);
    c.begin(Instant::ZERO);
    written(&mut c);
    feed(&mut c, DISCOVER, Instant::ZERO);
    drain(&mut c);
    let (a, _) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        None,
    );
    let (b, _) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        None,
    );
    let long = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"x\":\"{}\"}}}}\n",
        "a".repeat(1000)
    );
    let mut input = String::from("INFO starting server on stdio\n");
    input.push_str(&long);
    input.push_str("{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n");
    // In pieces, as a pipe gives them.
    let mut seen = Vec::new();
    for chunk in input.as_bytes().chunks(7) {
        let mut chunk = chunk;
        while !chunk.is_empty() {
            let n = c.recv(chunk, Instant::ZERO);
            chunk = &chunk[n..];
            seen.extend(drain(&mut c));
        }
    }
    // The head of the over-long line names call 1: it fails at once.
    assert_eq!(
        seen,
        [
            Seen::Other(
                StdioEvent::BadLine { json: false },
                "INFO starting server on stdio".into()
            ),
            Seen::Failed(a, -32603, true),
            Seen::Ended(a),
            Seen::Other(
                StdioEvent::LineTooLong {
                    len: long.len() - 1
                },
                String::new()
            ),
            Seen::Response(b, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}".into()),
            Seen::Ended(b),
        ]
    );
    assert!(Client::bad_line_cause(false).contains("logs to stdout"));
}

#[test]
fn listen_events_by_subscription_id_and_a_server_end() {
    let mut c = modern();
    let (l, _) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#,
        None,
    );
    assert_eq!(c.poll_timeout(), None);
    let seen = feed(
        &mut c,
        concat!(
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"L1\"}}}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"L1\"}}\n",
        ),
        Instant::ZERO,
    );
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(matches!(&seen[0], Seen::Notification(c, t) if *c == l && t.contains("list_changed")));
    assert!(matches!(&seen[1], Seen::Notification(c, t) if *c == l && t.contains("cancelled")));
    assert_eq!(seen[2], Seen::Ended(l));
}

#[test]
fn forced_legacy_and_a_refused_initialize() {
    let config = StdioClientConfig {
        era: EraChoice::Legacy,
        ..StdioClientConfig::default()
    };
    let mut c = client(config, 4096);
    c.begin(Instant::ZERO);
    assert!(written(&mut c)[0].contains("\"initialize\""));
    feed(
        &mut c,
        "{\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-initialize\",\"error\":{\"code\":-32602,\"message\":\"no\"}}\n",
        Instant::ZERO,
    );
    assert_eq!(c.handshake_error(), Some("the server refused initialize"));
}

#[test]
fn a_legacy_server_restarted_after_a_crash_gets_initialize_again() {
    let config = StdioClientConfig {
        era: EraChoice::Legacy,
        ..StdioClientConfig::default()
    };
    let mut c = client(config, 4096);
    c.begin(Instant::ZERO);
    written(&mut c);
    let init = "{\"jsonrpc\":\"2.0\",\"id\":\"mcpwire-initialize\",\"result\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"old\",\"version\":\"1\"}}}\n";
    feed(&mut c, init, Instant::ZERO);
    written(&mut c);
    drain(&mut c);
    assert_eq!(c.era().version(), Some("2025-06-18"));
    let (a, _) = start(
        &mut c,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        None,
    );
    c.recv_eof();
    let seen = drain(&mut c);
    assert!(
        seen.contains(&Seen::Failed(a, i64::from(LOCAL_CLOSED), true)),
        "{seen:?}"
    );
    c.restarted(Instant::ZERO);
    assert!(!c.is_ready());
    let lines = written(&mut c);
    assert!(lines[0].contains("\"method\":\"initialize\""), "{lines:?}");
    feed(&mut c, init, Instant::ZERO);
    assert_eq!(
        written(&mut c),
        ["{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"]
    );
    assert!(c.is_ready());
}
