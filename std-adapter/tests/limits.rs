//! Idle connections and the connection caps (issue #32, A2): a client
//! that opens HTTP/2 connections and never sends a request (the preface
//! and a SETTINGS ACK, then nothing) is closed at the handshake timeout
//! with GOAWAY(NO_ERROR), in the clear and over TLS; an HTTP/2 connection
//! whose last call ended is closed at the idle timeout; with the server's
//! cap of connections held that way, a real client is served once they are
//! closed; one address holds at most its cap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Reply, call, connect, tool_call};
use mcpwire_tokio::{Server, ServerConfig};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS, then the acknowledgement of the server's (blind).
const SETTINGS_AND_ACK: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0];

/// Short timeouts, so that the tests wait little.
fn config() -> ServerConfig {
    ServerConfig {
        handshake_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_millis(800),
        ..ServerConfig::default()
    }
}

async fn start(config: ServerConfig) -> SocketAddr {
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_config(config);
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.serve(common::demo::app(Duration::from_secs(3600))));
    addr
}

/// Reads until the peer closes; the GOAWAY frames' error codes it sent
/// (the connection's frames, parsed from its octets).
async fn goaways_until_closed<S: AsyncRead + Unpin>(io: &mut S) -> Vec<u32> {
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), io.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the idle connection was not closed"),
        }
    }
    let mut codes = Vec::new();
    let mut at = 0;
    while got.len() >= at + 9 {
        let len = u32::from_be_bytes([0, got[at], got[at + 1], got[at + 2]]) as usize;
        let end = at + 9 + len;
        if got.len() < end {
            break;
        }
        if got[at + 3] == 7 && len >= 8 {
            let p = &got[at + 9..end];
            codes.push(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
        }
        at = end;
    }
    codes
}

/// An idle HTTP/2 connection: the preface and SETTINGS, nothing more.
async fn idle_h2<S: AsyncWrite + Unpin>(io: &mut S) {
    io.write_all(PREFACE).await.unwrap();
    io.write_all(SETTINGS_AND_ACK).await.unwrap();
}

async fn echo(addr: SocketAddr) -> Reply {
    let mut send = connect(addr).await;
    call(
        &mut send,
        tool_call(1, "echo", json!({"text": "served"})),
        &[],
    )
    .await
}

/// The cap's worth of connections that never send a request are closed at
/// the handshake timeout with GOAWAY(NO_ERROR); a real client, waiting
/// behind them, is then served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_at_the_cap_are_closed_and_a_real_client_is_served() {
    const CAP: usize = 8;
    let addr = start(ServerConfig {
        max_connections: CAP,
        ..config()
    })
    .await;
    let mut idle = Vec::new();
    for _ in 0..CAP {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        idle_h2(&mut tcp).await;
        idle.push(tcp);
    }
    // Waits in the listen backlog while the cap is held.
    let served = tokio::spawn(echo(addr));
    for tcp in &mut idle {
        assert_eq!(
            goaways_until_closed(tcp).await,
            [0],
            "GOAWAY(NO_ERROR), then closed"
        );
    }
    let reply = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the real client is served")
        .unwrap();
    assert_eq!(reply.messages[0]["result"]["content"][0]["text"], "served");
}

/// A connection whose calls ended is closed at the idle timeout with
/// GOAWAY(NO_ERROR) (the h2 client sees the connection end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_whose_calls_ended_is_closed_at_the_idle_timeout() {
    let addr = start(config()).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = h2::client::handshake(tcp).await.unwrap();
    let driver = tokio::spawn(conn);
    let r = call(
        &mut send,
        tool_call(1, "echo", json!({"text": "once"})),
        &[],
    )
    .await;
    assert_eq!(r.messages[0]["result"]["content"][0]["text"], "once");
    let ended = tokio::time::timeout(Duration::from_secs(10), driver)
        .await
        .expect("the server ends the idle connection")
        .unwrap();
    assert!(ended.is_ok(), "a graceful end: {ended:?}");
}

/// One address holds at most its cap: the next connection is closed at
/// once, the ones held stay served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_at_most_its_cap() {
    let addr = start(ServerConfig {
        max_connections_per_address: 2,
        ..ServerConfig::default()
    })
    .await;
    let mut first = connect(addr).await;
    let _second = connect(addr).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    let mut buf = [0; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), third.read(&mut buf))
        .await
        .expect("closed at once")
        .unwrap_or(0);
    assert_eq!(n, 0, "the connection past the cap is closed unserved");
    let r = call(
        &mut first,
        tool_call(1, "echo", json!({"text": "held"})),
        &[],
    )
    .await;
    assert_eq!(r.messages[0]["result"]["content"][0]["text"], "held");
}

/// Over TLS (ALPN h2) the same: a connection that never sends a request
/// is closed at the handshake timeout.
#[cfg(feature = "tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tls_connection_is_closed_at_the_handshake_timeout() {
    use std::sync::Arc;
    use tokio_rustls::TlsConnector;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    let (ca, chain, key) = common::certificates();
    let server = Server::bind_tls("127.0.0.1:0", chain.as_bytes(), key.as_bytes())
        .await
        .unwrap()
        .with_config(config());
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.serve(common::demo::app(Duration::from_secs(3600))));
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap())
        .unwrap();
    let mut tls = ClientConfig::builder_with_provider(mcpwire_tokio::crypto_provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut stream = TlsConnector::from(Arc::new(tls))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    idle_h2(&mut stream).await;
    assert_eq!(goaways_until_closed(&mut stream).await, [0]);
}
