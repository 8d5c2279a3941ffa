//! The older HTTP shapes (MCP 2026-07-28 §13) through [`Client::http`]
//! (the core's engine, the 2025 `initialize` chosen), against the Python SDK `mcp` 1.26.0 (a server nobody here
//! wrote: tests/peers/legacy_server.py) in its 2025 Streamable HTTP shape
//! with sessions and in its 2024-11-05 HTTP+SSE shape.
//!
//! The peer needs the venv that `scripts/interop-http-client.sh` makes
//! (`.peers/venv-mcp1`), so these tests are ignored by a plain `cargo
//! test`; the http step of `scripts/test.sh` runs them with
//! `MCPWIRE_MCP1_PYTHON` set to that venv's python (`cargo test -p
//! mcpwire-tokio --test legacy_http -- --ignored`).
//!
//! The timing of a long call's progress and cancel is checked against
//! scripted servers of each shape instead (at the end; not ignored): the
//! test decides when its result is sent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mcpwire_core::mcp::client::stdio::Era;
use mcpwire_tokio::client::http::{self, EraChoice};
use mcpwire_tokio::{Client, Stopped};
use serde_json::json;

/// The peer, started on a free loopback port; killed on drop.
struct Peer {
    child: Child,
    addr: String,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Peer {
    fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The peer's lines once `done` holds for them, or after 10 s
    /// whatever came: the peer writes a request's line as it answers,
    /// and a thread of ours reads them, so the line may come after the
    /// answer did.
    fn lines_once(&self, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.lines();
            if done(&lines) || std::time::Instant::now() > until {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn peer(transport: &str) -> Peer {
    let python = std::env::var_os("MCPWIRE_MCP1_PYTHON")
        .expect("MCPWIRE_MCP1_PYTHON: the python of the mcp 1.26 venv (.peers/venv-mcp1)");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/peers/legacy_server.py");
    let mut child = Command::new(python)
        .arg(script)
        .args(["--transport", transport, "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the peer starts");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the peer exited");
        if let Some(a) = line.trim().strip_prefix("listening on ") {
            break a.to_owned();
        }
    };
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&log);
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    Peer { child, addr, log }
}

fn config(url: String) -> http::Config {
    let mut c = http::Config::new(&url).unwrap();
    c.era = EraChoice::Legacy;
    c.probe_timeout = Duration::from_secs(10);
    c.request_timeout = Duration::from_secs(20);
    c
}

async fn the_demo_answers(channel: &Client) {
    let tools = channel.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for want in ["echo", "add", "progress"] {
        assert!(names.contains(&want), "{names:?}");
    }
    let r = channel
        .call_tool("add", json!({"a": 2, "b": 40}))
        .await
        .unwrap();
    assert_eq!(r.text(), "42", "{r:?}");
    let mut seen = Vec::new();
    let r = channel
        .call_tool_with_progress("progress", json!({"steps": 3, "delay_ms": 10}), |p| {
            seen.push(p.progress)
        })
        .await
        .unwrap();
    assert_eq!(seen, vec![1.0, 2.0, 3.0], "{r:?}");
    // An unknown tool: the server's own answer (FastMCP: a tool error).
    let r = channel.call_tool("nope", json!({})).await.unwrap();
    assert!(r.is_error && r.text().contains("nope"), "{r:?}");
}

#[tokio::test]
#[ignore = "needs the mcp 1.26 peer: run by scripts/test.sh http"]
async fn a_2025_session_server_is_reached_through_initialize_and_its_session_is_deleted() {
    let peer = peer("streamable-http");
    let channel = Client::http(config(format!("http://{}/mcp", peer.addr)))
        .await
        .unwrap();
    let era = channel.era().unwrap();
    assert_eq!(era.era, Era::Legacy, "{era}");
    assert_eq!(era.version, "2025-11-25");
    the_demo_answers(&channel).await;
    assert_eq!(channel.close().await, Some(Stopped::SessionClosed));
    let session = session_of(&peer);
    let deleted = format!("request DELETE /mcp session={session} ->");
    let lines = peer.lines_once(|lines| lines.iter().any(|l| l.starts_with(&deleted)));
    assert!(lines.iter().any(|l| l.starts_with(&deleted)), "{lines:#?}");
}

#[tokio::test]
#[ignore = "needs the mcp 1.26 peer: run by scripts/test.sh http"]
async fn a_2024_http_sse_server_is_reached_after_initialize_is_refused() {
    let peer = peer("sse");
    let channel = Client::http(config(format!("http://{}/sse", peer.addr)))
        .await
        .unwrap();
    let era = channel.era().unwrap();
    assert_eq!(era.era, Era::HttpSse, "{era}");
    the_demo_answers(&channel).await;
    channel.close().await;
}

#[tokio::test]
#[ignore = "needs the mcp 1.26 peer: run by scripts/test.sh http"]
async fn a_url_that_is_no_mcp_server_fails_the_connect_with_the_reason() {
    let peer = peer("streamable-http");
    // The 2025 server's port, a path it does not serve: 404 to initialize,
    // then 404 to the GET of the 2024 shape.
    let Err(err) = Client::http(config(format!("http://{}/nothing", peer.addr))).await else {
        panic!("a URL of neither era connected");
    };
    assert!(err.to_string().contains("neither era"), "{err}");
}

/// The session id of the peer's first request that carried one.
fn session_of(peer: &Peer) -> String {
    fn first(lines: &[String]) -> Option<&str> {
        lines
            .iter()
            .find_map(|l| {
                l.strip_prefix("request POST /mcp session=")
                    .filter(|s| !s.starts_with("- "))
            })
            .and_then(|s| s.split(' ').next())
    }
    let lines = peer.lines_once(|lines| first(lines).is_some());
    first(&lines)
        .unwrap_or_else(|| panic!("no request with a session: {lines:#?}"))
        .to_owned()
}

#[tokio::test]
#[ignore = "needs the mcp 1.26 peer: run by scripts/test.sh http"]
async fn a_session_the_server_ended_is_initialised_again() {
    let peer = peer("streamable-http");
    let channel = Client::http(config(format!("http://{}/mcp", peer.addr)))
        .await
        .unwrap();
    let add = json!({"a": 1, "b": 2});
    assert_eq!(channel.call_tool("add", &add).await.unwrap().text(), "3");
    // Someone else ends the session: the server forgets it.
    let session = session_of(&peer);
    let mut s = std::net::TcpStream::connect(&peer.addr).unwrap();
    std::io::Write::write_all(
        &mut s,
        format!(
            "DELETE /mcp HTTP/1.1\r\nHost: {}\r\nmcp-session-id: {session}\r\nconnection: close\r\n\r\n",
            peer.addr
        )
        .as_bytes(),
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The next call meets the 404: it fails, visibly, and a new session
    // starts; the call after it is served there.
    let err = channel.call_tool("add", &add).await.unwrap_err();
    assert_eq!(err.status, mcpwire_core::grpc::Code::Unavailable, "{err}");
    assert_eq!(channel.call_tool("add", &add).await.unwrap().text(), "3");
    let inits = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.starts_with("request POST /mcp session=- -> 200"))
            .count()
    };
    let lines = peer.lines_once(|lines| inits(lines) >= 2);
    assert_eq!(inits(&lines), 2, "{lines:#?}");
}

/// `Client::connect` on an `http://` URL probes, and reaches each older
/// shape through the fallback, naming it and its reason; the typed calls
/// are the ones of every transport.
#[tokio::test]
#[ignore = "needs the mcp 1.26 peer: run by scripts/test.sh http"]
async fn the_one_client_falls_back_to_each_older_shape_and_says_why() {
    for (transport, path, era, name) in [
        (
            "streamable-http",
            "mcp",
            Era::Legacy,
            "Streamable HTTP with a session (2025-11-25)",
        ),
        ("sse", "sse", Era::HttpSse, "HTTP+SSE (2024-11-05)"),
    ] {
        let peer = peer(transport);
        let client = mcpwire_tokio::Client::connect(&format!("http://{}/{path}", peer.addr))
            .await
            .unwrap();
        let info = client.era().unwrap();
        assert_eq!(info.era, era, "{info}");
        assert_eq!(client.transport_name(), name);
        let why = info.fallback.as_deref().unwrap();
        assert!(why.starts_with("server/discover: "), "{why}");
        let tools = client.list_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "add"), "{tools:?}");
        let r = client
            .call_tool("add", json!({"a": 2, "b": 40}))
            .await
            .unwrap();
        assert_eq!(r.text(), "42", "{r:?}");
        let contents = client.read_resource("mem://readme").await.unwrap();
        assert!(contents[0].text.as_deref().unwrap().starts_with("mcpwire:"));
        assert!(client.close().await.is_some());
    }
}

/// A scripted server of the 2025 session shape, on a free loopback port:
/// `initialize` opens session `s1`, a notification gets 202, `tools/call`
/// answers on an SSE stream with one `notifications/progress` event, then
/// waits for `release` (at most 30 s, longer than the tests wait for
/// anything) before its result. Every message it receives goes to `seen`,
/// and `{"closed": ID}` when the client closes the stream of request ID
/// before its result.
struct Scripted {
    addr: String,
    release: std::sync::Arc<tokio::sync::Notify>,
    seen: tokio::sync::mpsc::UnboundedReceiver<serde_json::Value>,
}

async fn scripted_2025() -> Scripted {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let (seen_tx, seen) = tokio::sync::mpsc::unbounded_channel();
    let rel = std::sync::Arc::clone(&release);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let rel = std::sync::Arc::clone(&rel);
            let seen = seen_tx.clone();
            tokio::spawn(async move {
                let (head, body) = read_request(&mut s).await;
                if head.starts_with("delete ") || body.is_empty() {
                    let _ = s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    return;
                }
                let msg: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let _ = seen.send(msg.clone());
                let method = msg["method"].as_str().unwrap_or_default().to_owned();
                let Some(id) = msg.get("id").cloned() else {
                    let _ = s
                        .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                    return;
                };
                let json_answer = |result: serde_json::Value, session: bool| {
                    let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        if session {
                            "mcp-session-id: s1\r\n"
                        } else {
                            ""
                        },
                        body.len()
                    )
                };
                if method == "initialize" {
                    let result = json!({
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "scripted", "version": "0"}
                    });
                    let _ = s.write_all(json_answer(result, true).as_bytes()).await;
                    return;
                }
                if method != "tools/call" {
                    let _ = s.write_all(json_answer(json!({}), false).as_bytes()).await;
                    return;
                }
                // An SSE answer in chunks: the progress now, the result
                // when the test releases it.
                let chunk = |data: String| {
                    let event = format!("event: message\ndata: {data}\n\n");
                    format!("{:x}\r\n{event}\r\n", event.len())
                };
                let token = msg["params"]["_meta"]["progressToken"].clone();
                let progress = json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": 1, "total": 2}
                });
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                let first = format!("{head}{}", chunk(progress.to_string()));
                if s.write_all(first.as_bytes()).await.is_err() {
                    return;
                }
                let mut probe = [0u8; 1];
                tokio::select! {
                    _ = tokio::time::timeout(Duration::from_secs(30), rel.notified()) => {}
                    // The client closed the stream before the result.
                    _ = s.read(&mut probe) => {
                        let _ = seen.send(json!({"closed": id}));
                        return;
                    }
                }
                let result = json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "result": {"content": [{"type": "text", "text": "done"}]}
                });
                let last = format!("{}0\r\n\r\n", chunk(result.to_string()));
                let _ = s.write_all(last.as_bytes()).await;
            });
        }
    });
    Scripted {
        addr,
        release,
        seen,
    }
}

fn slow_call() -> serde_json::Value {
    json!({
        "method": "tools/call",
        "params": {"name": "slow", "arguments": {}, "_meta": {"progressToken": "slow-1"}}
    })
}

/// The progress of a long call on a 2025 session's SSE answer reaches
/// the caller while the server still holds the result back.
#[tokio::test]
async fn a_2025_session_progress_arrives_before_the_result_is_sent() {
    let server = scripted_2025().await;
    let channel = Client::http(config(format!("http://{}/mcp", server.addr)))
        .await
        .unwrap();
    assert_eq!(channel.era().unwrap().version, "2025-11-25");
    let mut call = channel.call(slow_call()).await.unwrap();
    // The server sends its result only after `release`: what comes now
    // must be the progress.
    let first = tokio::time::timeout(Duration::from_secs(10), call.next())
        .await
        .expect("the progress arrives while the result is held back")
        .unwrap();
    let Some(mcpwire_tokio::StreamMessage::Notification(n)) = first else {
        panic!("not a notification: {first:?}");
    };
    assert_eq!(n["method"], "notifications/progress", "{n}");
    assert_eq!(n["params"]["progress"], 1, "{n}");
    server.release.notify_one();
    let Some(mcpwire_tokio::StreamMessage::Response(r)) = call.next().await.unwrap() else {
        panic!("no response");
    };
    assert_eq!(r["result"]["content"][0]["text"], "done", "{r}");
    channel.close().await;
}

/// A call dropped after its first progress is cancelled: in the 2025
/// shape a disconnect is no cancel, so the server gets
/// `notifications/cancelled` for the call's id, and then the request's
/// stream is closed (its answer is no longer wanted).
/// Starts a slow call on `channel`, waits for its first message (a
/// notification: `progress` says which), drops the call and waits until
/// the server `seen` gets `notifications/cancelled` for its id; gives the id.
async fn cancel_after_progress(
    channel: &Client,
    seen: &mut tokio::sync::mpsc::UnboundedReceiver<serde_json::Value>,
    progress: &str,
) -> serde_json::Value {
    let mut call = channel.call(slow_call()).await.unwrap();
    let id = call.id().clone();
    let first = tokio::time::timeout(Duration::from_secs(10), call.next())
        .await
        .expect(progress)
        .unwrap();
    assert!(
        matches!(first, Some(mcpwire_tokio::StreamMessage::Notification(_))),
        "{first:?}"
    );
    drop(call);
    let cancelled = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let m = seen.recv().await.expect("the server runs");
            if m["method"] == "notifications/cancelled" {
                return m;
            }
        }
    })
    .await
    .expect("notifications/cancelled reaches the server while the call still runs");
    assert_eq!(cancelled["params"]["requestId"], id, "{cancelled}");
    id
}

#[tokio::test]
async fn a_2025_session_call_dropped_after_its_progress_is_cancelled() {
    let mut server = scripted_2025().await;
    let channel = Client::http(config(format!("http://{}/mcp", server.addr)))
        .await
        .unwrap();
    let id = cancel_after_progress(
        &channel,
        &mut server.seen,
        "the progress arrives while the result is held back",
    )
    .await;
    let closed = tokio::time::timeout(Duration::from_secs(10), server.seen.recv())
        .await
        .expect("the request's stream is closed after the cancel")
        .unwrap();
    assert_eq!(closed, json!({"closed": id}));
    server.release.notify_one();
    channel.close().await;
}

/// One request off `s`: its head (lower case) and its body.
async fn read_request(s: &mut tokio::net::TcpStream) -> (String, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "a request ended in its head");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    while buf.len() < head_end + len {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "a request ended in its body");
        buf.extend_from_slice(&chunk[..n]);
    }
    (head, buf[head_end..head_end + len].to_vec())
}

/// A scripted server of the 2024 HTTP+SSE shape: `POST /sse` is refused
/// (405), `GET /sse` opens the event stream with its `endpoint` event,
/// and every message posted to `/messages` is answered on that stream;
/// `tools/call` as [`scripted_2025`]'s (progress, then the result after
/// `release`, at most 30 s).
async fn scripted_2024() -> Scripted {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let (seen_tx, seen) = tokio::sync::mpsc::unbounded_channel();
    // What the event stream sends, as one `message` event each.
    let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel::<serde_json::Value>();
    let events_rx = std::sync::Arc::new(tokio::sync::Mutex::new(Some(events_rx)));
    let rel = std::sync::Arc::clone(&release);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let (rel, seen, events_tx) = (
                std::sync::Arc::clone(&rel),
                seen_tx.clone(),
                events_tx.clone(),
            );
            let events_rx = std::sync::Arc::clone(&events_rx);
            tokio::spawn(async move {
                let (head, body) = read_request(&mut s).await;
                let chunk = |event: String| format!("{:x}\r\n{event}\r\n", event.len());
                if head.starts_with("get /sse ") {
                    let Some(mut events) = events_rx.lock().await.take() else {
                        return;
                    };
                    let first = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{}",
                        chunk("event: endpoint\ndata: /messages?session_id=1\n\n".into())
                    );
                    s.write_all(first.as_bytes()).await.unwrap();
                    while let Some(m) = events.recv().await {
                        let event = chunk(format!("event: message\ndata: {m}\n\n"));
                        if s.write_all(event.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    return;
                }
                if !head.starts_with("post /messages") {
                    let _ = s
                        .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                    return;
                }
                let msg: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let _ = seen.send(msg.clone());
                let _ = s
                    .write_all(
                        b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                let Some(id) = msg.get("id").cloned() else {
                    return;
                };
                let answer = |result: serde_json::Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
                match msg["method"].as_str().unwrap_or_default() {
                    "initialize" => {
                        let _ = events_tx.send(answer(json!({
                            "protocolVersion": "2024-11-05",
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "scripted", "version": "0"}
                        })));
                    }
                    "tools/call" => {
                        let token = msg["params"]["_meta"]["progressToken"].clone();
                        let _ = events_tx.send(json!({
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": 1, "total": 2}
                        }));
                        let _ = tokio::time::timeout(Duration::from_secs(30), rel.notified()).await;
                        let _ = events_tx.send(answer(
                            json!({"content": [{"type": "text", "text": "done"}]}),
                        ));
                    }
                    _ => {
                        let _ = events_tx.send(answer(json!({})));
                    }
                }
            });
        }
    });
    Scripted {
        addr,
        release,
        seen,
    }
}

/// The 2024 shape: the progress on the event stream reaches the caller
/// while the result is held back, and a call dropped after it is
/// cancelled with `notifications/cancelled` (the answers share one
/// stream: there is no request's stream to close).
#[tokio::test]
async fn a_2024_http_sse_progress_arrives_before_the_result_and_a_drop_cancels() {
    let mut server = scripted_2024().await;
    let channel = Client::http(config(format!("http://{}/sse", server.addr)))
        .await
        .unwrap();
    assert_eq!(channel.era().unwrap().era, Era::HttpSse);
    let mut call = channel.call(slow_call()).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), call.next())
        .await
        .expect("the progress arrives while the result is held back")
        .unwrap();
    let Some(mcpwire_tokio::StreamMessage::Notification(n)) = first else {
        panic!("not a notification: {first:?}");
    };
    assert_eq!(n["method"], "notifications/progress", "{n}");
    server.release.notify_one();
    let Some(mcpwire_tokio::StreamMessage::Response(r)) = call.next().await.unwrap() else {
        panic!("no response");
    };
    assert_eq!(r["result"]["content"][0]["text"], "done", "{r}");

    cancel_after_progress(
        &channel,
        &mut server.seen,
        "the second call's progress arrives",
    )
    .await;
    server.release.notify_one();
    channel.close().await;
}
