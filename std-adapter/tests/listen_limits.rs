//! Listen streams under the server's caps (issue #32, A4): a server keeps
//! at most `max_listen_streams` of them over all its connections, one
//! principal at most `max_listen_streams_per_principal`, and a listen
//! request at most `max_listen_request_bytes` long (it is kept for the
//! stream's life); past a cap the request is answered in-band (-32603 for
//! too many streams, -32602 for a request too long, HTTP 200), never
//! with a 500, and a stream's room comes back when it ends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::VERSION;
use mcpwire_tokio::{BearerTokens, Server, ServerConfig};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(config: ServerConfig, tokens: bool) -> SocketAddr {
    let mut server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_config(config);
    if tokens {
        server = server.with_auth(BearerTokens::new([
            ("alice-token", "alice"),
            ("bob-token", "bob"),
        ]));
    }
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.serve(common::demo::app(Duration::from_secs(3600))));
    addr
}

/// A listen request asking for tools changes and `subscriptions`.
fn listen_body(id: u32, subscriptions: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true,"resourceSubscriptions":[{subscriptions}]}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{VERSION}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    )
}

/// What a listen POST got: the status and the first JSON message (the
/// acknowledgement of a stream kept open, or an error), with the
/// connection (a stream's, held open).
async fn listen(addr: SocketAddr, body: &str, token: Option<&str>) -> (u16, Value, TcpStream) {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\n\
         Mcp-Method: subscriptions/listen\r\n{auth}Content-Length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(body.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    let message = loop {
        let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        let Some((_, rest)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        // An event's data line, or a whole JSON body.
        let json = match rest.split_once("data: ") {
            Some((_, data)) => data.split_once('\n').map(|(d, _)| d.to_owned()),
            None => serde_json::from_str::<Value>(rest)
                .ok()
                .map(|_| rest.to_owned()),
        };
        if let Some(json) = json {
            break serde_json::from_str(json.trim()).unwrap();
        }
    };
    let text = String::from_utf8_lossy(&got);
    let status = text[9..12].parse().unwrap();
    (status, message, tcp)
}

fn acknowledged(m: &Value) -> bool {
    m["method"] == "notifications/subscriptions/acknowledged"
}

/// Past the server-wide cap the next listen request is answered -32603
/// in-band; when a stream ends its room comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_streams_past_the_cap_are_refused_in_band_until_one_ends() {
    let addr = start(
        ServerConfig {
            max_listen_streams: 3,
            ..ServerConfig::default()
        },
        false,
    )
    .await;
    let mut held = Vec::new();
    for id in 1..=3 {
        let (status, m, tcp) = listen(addr, &listen_body(id, ""), None).await;
        assert_eq!(status, 200);
        assert!(acknowledged(&m), "{m}");
        held.push(tcp);
    }
    let (status, m, _) = listen(addr, &listen_body(4, ""), None).await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["error"]["code"], -32603, "{m}");
    assert_eq!(m["id"], 4);
    drop(held.pop());
    // The server notices the end (the connection closed) and frees it.
    let mut again = None;
    for _ in 0..100 {
        let (_, m, tcp) = listen(addr, &listen_body(5, ""), None).await;
        if acknowledged(&m) {
            again = Some(tcp);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "the room of the closed stream came back");
}

/// One principal holds at most its cap; another is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_holds_at_most_its_cap_of_listen_streams() {
    let addr = start(
        ServerConfig {
            max_listen_streams_per_principal: 2,
            ..ServerConfig::default()
        },
        true,
    )
    .await;
    let mut held = Vec::new();
    for id in 1..=2 {
        let (_, m, tcp) = listen(addr, &listen_body(id, ""), Some("alice-token")).await;
        assert!(acknowledged(&m), "{m}");
        held.push(tcp);
    }
    let (_, m, _) = listen(addr, &listen_body(3, ""), Some("alice-token")).await;
    assert_eq!(m["error"]["code"], -32603, "{m}");
    let (_, m, _bob) = listen(addr, &listen_body(4, ""), Some("bob-token")).await;
    assert!(acknowledged(&m), "{m}");
}

/// A listen request longer than the server keeps for a stream (a
/// `resourceSubscriptions` array of about 3 MB, under the 4 MiB message
/// limit) is answered -32602 in-band, not kept, and not a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_request_too_long_to_keep_is_refused_in_band() {
    let addr = start(ServerConfig::default(), false).await;
    let uris: Vec<String> = (0..30_000)
        .map(|i| format!(r#""file:///resources/{i:0>80}""#))
        .collect();
    let (status, m, _) = listen(addr, &listen_body(1, &uris.join(",")), None).await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["error"]["code"], -32602, "{m}");
    let (_, m, _) = listen(addr, &listen_body(2, r#""mem://readme""#), None).await;
    assert!(acknowledged(&m), "{m}");
}
