//! The rmcp peer answers what the load benchmark sends, as `mcpwire
//! serve`'s demo does: a 2026-07-28 `echo` call over HTTP/1.1 gets one JSON
//! body, a `progress` call with a progress token gets its notifications and
//! result as SSE, and the stdio binary answers a line with a line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

fn call(id: u64, tool: &str, arguments: Value, progress: bool) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if progress {
        meta["progressToken"] = json!(id);
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments, "_meta": meta}})
}

/// One POST on a fresh connection (`Connection: close`), the whole
/// response as text.
async fn post(addr: std::net::SocketAddr, tool: &str, body: &Value) -> String {
    let body = body.to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_string(&mut response))
        .await
        .expect("an answer within 10 s")
        .unwrap();
    response
}

fn text_of(message: &Value) -> &str {
    message["result"]["content"][0]["text"].as_str().unwrap()
}

#[tokio::test]
async fn http_echo_is_json_and_progress_is_sse() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, mcpwire_rmcp_peer::http_router())
            .await
            .unwrap();
    });

    let echo = post(
        addr,
        "echo",
        &call(3, "echo", json!({"text": "hello"}), false),
    )
    .await;
    let (head, body) = echo.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    assert!(
        !head.to_ascii_lowercase().contains("mcp-session-id"),
        "stateless: {head}"
    );
    let answer: Value = serde_json::from_str(body).unwrap();
    assert_eq!(answer["id"], 3);
    assert_eq!(text_of(&answer), "hello");

    let progress = post(
        addr,
        "progress",
        &call(4, "progress", json!({"steps": 5, "delay_ms": 0}), true),
    )
    .await;
    let (head, body) = progress.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    let messages: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(messages.len(), 6, "{body}");
    for (i, note) in messages[..5].iter().enumerate() {
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(note["params"]["progressToken"], 4);
        assert_eq!(note["params"]["progress"], json!((i + 1) as f64));
    }
    assert_eq!(text_of(&messages[5]), "done after 5 steps");
}

#[tokio::test]
async fn stdio_answers_each_line() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rmcp-stdio-server"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut requests = call(1, "echo", json!({"text": "a b"}), false).to_string();
    requests.push('\n');
    requests.push_str(&call(2, "progress", json!({"steps": 2, "delay_ms": 0}), true).to_string());
    requests.push('\n');
    stdin.write_all(requests.as_bytes()).await.unwrap();
    let mut echo = None;
    let mut notes = 0;
    let mut done = None;
    while echo.is_none() || done.is_none() {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("a line within 10 s")
            .unwrap()
            .expect("a line before the end");
        let m: Value = serde_json::from_str(&line).unwrap();
        match (&m["id"], m["method"].as_str()) {
            (Value::Null, Some("notifications/progress")) => notes += 1,
            (id, _) if *id == 1 => echo = Some(text_of(&m).to_owned()),
            (id, _) if *id == 2 => done = Some(text_of(&m).to_owned()),
            _ => panic!("unexpected line {line}"),
        }
    }
    assert_eq!(echo.as_deref(), Some("a b"));
    assert_eq!(notes, 2);
    assert_eq!(done.as_deref(), Some("done after 2 steps"));
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exit at the end of stdin")
        .unwrap();
    assert!(status.success());
}
