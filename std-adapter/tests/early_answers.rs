//! Early answers reach a client that sends its whole request before it
//! reads (issue #32, item 3), as httpx (the Python SDK's HTTP client)
//! does: a body over the limit gets 413 and a head over the limit 431
//! over HTTP/1.1, where the server closes the connection after the answer
//! but first reads and drops what the client still sends (a lingering
//! close: a socket closed with unread input is reset, and the answer lost
//! with it); over HTTP/2 the rest of the stream's body is read and dropped
//! after the 413, the window reopened, instead of a reset.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use common::{VERSION, connect};
use mcpwire_tokio::Server;

async fn start() -> SocketAddr {
    let server = Server::bind("127.0.0.1:0").await.unwrap();
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.serve(common::demo::app(Duration::from_secs(3600))));
    addr
}

/// A `tools/call` of `echo` whose text makes the body `len` octets or so.
fn big_body(len: usize) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{VERSION}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#,
        "x".repeat(len)
    )
    .into_bytes()
}

/// Writes `head` and `body` whole, then reads the answer until the server
/// closes: what a client that reads only after sending gets.
fn send_all_then_read(addr: SocketAddr, head: &str, body: &[u8]) -> String {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    tcp.set_write_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    tcp.write_all(head.as_bytes())
        .expect("the server takes the head");
    tcp.write_all(body)
        .expect("the server takes the whole body after its answer");
    let mut got = Vec::new();
    tcp.read_to_end(&mut got)
        .expect("the answer, then the end, without a reset");
    String::from_utf8_lossy(&got).into_owned()
}

fn head(extra: &str, len: usize) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: echo\r\n{extra}Content-Length: {len}\r\n\r\n"
    )
}

/// A 5 MiB body (the limit is 4 MiB) sent whole before reading: 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_413_reaches_a_client_that_sends_its_whole_body_first() {
    let addr = start().await;
    let body = big_body(5 << 20);
    let answer =
        tokio::task::spawn_blocking(move || send_all_then_read(addr, &head("", body.len()), &body))
            .await
            .unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:.200}");
}

/// A head over 8 KiB, then a 5 MiB body sent whole before reading: 431.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_431_reaches_a_client_that_sends_its_whole_request_first() {
    let addr = start().await;
    let body = big_body(5 << 20);
    let padding = format!("X-Padding: {}\r\n", "a".repeat(12_000));
    let answer = tokio::task::spawn_blocking(move || {
        send_all_then_read(addr, &head(&padding, body.len()), &body)
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:.200}");
}

/// Over HTTP/2 (the `h2` crate): the client sends all 5 MiB as the
/// windows allow, then reads `:status 413`; the stream is not reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_413_reaches_a_client_that_sends_its_whole_body_first() {
    let addr = start().await;
    let mut send = connect(addr).await;
    let request = http::Request::builder()
        .method("POST")
        .uri("http://127.0.0.1/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .body(())
        .unwrap();
    let (response, mut stream) = send.send_request(request, false).unwrap();
    let body = Bytes::from(big_body(5 << 20));
    let mut at = 0;
    let sent = tokio::time::timeout(Duration::from_secs(20), async {
        while at < body.len() {
            stream.reserve_capacity(body.len() - at);
            let n = std::future::poll_fn(|cx| stream.poll_capacity(cx))
                .await
                .expect("capacity")
                .expect("the stream is not reset");
            let end = at + n;
            stream
                .send_data(body.slice(at..end), end == body.len())
                .expect("the stream takes the body");
            at = end;
        }
    })
    .await;
    assert!(sent.is_ok(), "the window stayed shut after {at} octets");
    let response = tokio::time::timeout(Duration::from_secs(10), response)
        .await
        .expect("an answer")
        .expect("a response, not a reset");
    assert_eq!(response.status(), 413);
}
