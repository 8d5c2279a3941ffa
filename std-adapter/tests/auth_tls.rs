//! Bearer-token authentication and TLS of the tokio server, in-process on
//! 127.0.0.1:0, called by the `h2` crate (over tokio-rustls for TLS).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::demo;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::{Reply, call_at, handshake, tool_call};
use h2::client::SendRequest;
use mcpwire_core::mcp::auth::Decision;
use mcpwire_tokio::{App, AuthDecision, BearerTokens, Server, ToolCall, ToolResult};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// The demo plus `whoami`, which returns the principal it sees.
fn app() -> App {
    demo::app(Duration::from_secs(3600)).tool(
        "whoami",
        "Returns the caller's principal.",
        r#"{"type":"object"}"#,
        |call: ToolCall| async move {
            Ok(ToolResult::text(
                call.principal().unwrap_or("<none>").to_owned(),
            ))
        },
    )
}

struct Running {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn run(server: Server) -> Running {
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve_with_shutdown(app(), async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop: Some(stop),
    }
}

/// One `tools/call` of `tool` (id 1) to `https://localhost`, with
/// `authorization: Bearer <token>` if given.
async fn call(
    send: &mut SendRequest<Bytes>,
    tool: &str,
    arguments: Value,
    token: Option<&str>,
) -> Reply {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let extra: Vec<(&str, &str)> = bearer
        .as_deref()
        .map(|b| ("authorization", b))
        .into_iter()
        .collect();
    call_at(
        send,
        "https://localhost",
        tool_call(1, tool, arguments),
        &extra,
    )
    .await
}

async fn token_server() -> Running {
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(BearerTokens::new([("right-token", "alice")]));
    run(server)
}

#[tokio::test]
async fn auth_missing_token_is_unauthenticated_with_a_challenge() {
    let s = token_server().await;
    let mut send = handshake(TcpStream::connect(s.addr).await.unwrap()).await;
    let r = call(&mut send, "echo", json!({"text": "hi"}), None).await;
    assert_eq!(r.get("grpc-status"), Some("16"), "{r:?}");
    assert_eq!(r.get("www-authenticate"), Some(r#"Bearer realm="mcpwire""#));
    assert!(r.messages.is_empty());
}

#[tokio::test]
async fn auth_wrong_token_is_unauthenticated_invalid_token() {
    let s = token_server().await;
    let mut send = handshake(TcpStream::connect(s.addr).await.unwrap()).await;
    let r = call(
        &mut send,
        "echo",
        json!({"text": "hi"}),
        Some("wrong-token"),
    )
    .await;
    assert_eq!(r.get("grpc-status"), Some("16"), "{r:?}");
    assert_eq!(
        r.get("www-authenticate"),
        Some(r#"Bearer realm="mcpwire", error="invalid_token""#)
    );
    assert!(!r.get("grpc-message").unwrap_or_default().contains("wrong"));
    assert!(r.messages.is_empty());
}

#[tokio::test]
async fn auth_right_token_echoes_and_shows_the_principal() {
    let s = token_server().await;
    let mut send = handshake(TcpStream::connect(s.addr).await.unwrap()).await;
    let r = call(
        &mut send,
        "echo",
        json!({"text": "hi"}),
        Some("right-token"),
    )
    .await;
    assert_eq!(r.get("grpc-status"), Some("0"), "{r:?}");
    assert_eq!(r.text(), "hi");
    let r = call(&mut send, "whoami", json!({}), Some("right-token")).await;
    assert_eq!(r.get("grpc-status"), Some("0"), "{r:?}");
    assert_eq!(r.text(), "alice");
    // The same connection still refuses a call without the token.
    let r = call(&mut send, "whoami", json!({}), None).await;
    assert_eq!(r.get("grpc-status"), Some("16"), "{r:?}");
}

/// A checker's missing, invalid and denied tokens end with the core's
/// refusals: the same status, message and challenge as every other driver
/// sends. An allowed token shows the checker's principal.
#[tokio::test]
async fn auth_checker_refusals_are_the_cores() {
    let server = Server::bind("127.0.0.1:0")
        .await
        .unwrap()
        .with_auth(|token: Option<&str>| match token {
            Some("reader") => AuthDecision::PermissionDenied,
            Some("admin") => AuthDecision::Allow {
                principal: "root".into(),
            },
            _ => AuthDecision::Unauthenticated,
        });
    let s = run(server);
    let mut send = handshake(TcpStream::connect(s.addr).await.unwrap()).await;
    let cases = [
        (None, Decision::Unauthenticated.refusal(false)),
        (Some("nope"), Decision::Unauthenticated.refusal(true)),
        (Some("reader"), Decision::PermissionDenied.refusal(true)),
    ];
    for (token, refusal) in cases {
        let refusal = refusal.unwrap();
        let r = call(&mut send, "whoami", json!({}), token).await;
        let status = (refusal.status as u8).to_string();
        assert_eq!(
            r.get("grpc-status"),
            Some(status.as_str()),
            "{token:?}: {r:?}"
        );
        assert_eq!(r.get("grpc-message"), Some(refusal.message), "{token:?}");
        assert_eq!(
            r.get("www-authenticate"),
            Some(refusal.challenge),
            "{token:?}"
        );
        assert!(r.messages.is_empty(), "{token:?}: {r:?}");
    }
    let r = call(&mut send, "whoami", json!({}), Some("admin")).await;
    assert_eq!(r.get("grpc-status"), Some("0"), "{r:?}");
    assert_eq!(r.text(), "root");
}

#[tokio::test]
async fn auth_off_means_no_principal() {
    let s = run(Server::bind("127.0.0.1:0").await.unwrap());
    let mut send = handshake(TcpStream::connect(s.addr).await.unwrap()).await;
    let r = call(&mut send, "whoami", json!({}), Some("anything")).await;
    assert_eq!(r.get("grpc-status"), Some("0"), "{r:?}");
    assert_eq!(r.text(), "<none>");
}

#[cfg(feature = "tls")]
mod tls {
    use std::sync::Arc;

    use tokio::io::{AsyncRead, AsyncWrite};
    use tokio_rustls::TlsConnector;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    use super::*;
    use common::PATH;

    /// [`common::certificates`] with the CA as DER: (CA, server chain PEM,
    /// server key PEM).
    fn certificates() -> (CertificateDer<'static>, String, String) {
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        let (ca, chain, key) = common::certificates();
        (
            CertificateDer::from_pem_slice(ca.as_bytes()).unwrap(),
            chain,
            key,
        )
    }

    fn connector(ca: CertificateDer<'static>, alpn: &[&[u8]]) -> TlsConnector {
        let mut roots = RootCertStore::empty();
        roots.add(ca).unwrap();
        let provider = mcpwire_tokio::crypto_provider();
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }

    async fn tls_server(auth: bool) -> (Running, CertificateDer<'static>) {
        let (ca, chain, key) = certificates();
        let mut server = Server::bind_tls("127.0.0.1:0", chain.as_bytes(), key.as_bytes())
            .await
            .unwrap();
        if auth {
            server = server.with_auth(BearerTokens::new([("right-token", "alice")]));
        }
        (run(server), ca)
    }

    #[tokio::test]
    async fn tls_h2_call_works_with_a_token() {
        let (s, ca) = tls_server(true).await;
        for name in ["localhost", "127.0.0.1"] {
            let tcp = TcpStream::connect(s.addr).await.unwrap();
            let tls = connector(ca.clone(), &[b"h2"])
                .connect(ServerName::try_from(name.to_owned()).unwrap(), tcp)
                .await
                .unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            let mut send = handshake(tls).await;
            let r = call(
                &mut send,
                "echo",
                json!({"text": "over tls"}),
                Some("right-token"),
            )
            .await;
            assert_eq!(r.get("grpc-status"), Some("0"), "{r:?}");
            assert_eq!(r.text(), "over tls");
            let r = call(&mut send, "whoami", json!({}), Some("right-token")).await;
            assert_eq!(r.text(), "alice");
            let r = call(&mut send, "echo", json!({"text": "x"}), Some("bad")).await;
            assert_eq!(r.get("grpc-status"), Some("16"), "{r:?}");
        }
    }

    /// A TLS client that offers only `http/1.1` reaches Streamable HTTP
    /// (gRPC needs h2), with the same bearer tokens: 401 and its challenge
    /// without one (the connection then closes), the call with one.
    #[tokio::test]
    async fn tls_client_offering_only_http11_gets_streamable_http() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let (s, ca) = tls_server(true).await;
        let open = async || {
            let tcp = TcpStream::connect(s.addr).await.unwrap();
            let tls = connector(ca.clone(), &[b"http/1.1"])
                .connect(ServerName::try_from("localhost").unwrap(), tcp)
                .await
                .unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
            tls
        };
        let mut tls = open().await;
        let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over http/1.1"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let post = |token: &str| {
            format!(
                "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
                 Mcp-Method: tools/call\r\nMcp-Name: echo\r\n{token}Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let read = async |tls: &mut tokio_rustls::client::TlsStream<TcpStream>| {
            // One answer: its head, then Content-Length octets.
            let mut got = Vec::new();
            let mut buf = [0; 4096];
            loop {
                let n = tls.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).into_owned();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len: usize = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if got.len() >= end + 4 + len {
                        return text;
                    }
                }
            }
        };
        tls.write_all(post("").as_bytes()).await.unwrap();
        let refused = read(&mut tls).await;
        assert!(refused.starts_with("HTTP/1.1 401 "), "{refused}");
        assert!(
            refused
                .to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{refused}"
        );
        let mut tls = open().await;
        tls.write_all(post("Authorization: Bearer right-token\r\n").as_bytes())
            .await
            .unwrap();
        let answered = read(&mut tls).await;
        assert!(answered.starts_with("HTTP/1.1 200 "), "{answered}");
        assert!(answered.contains("over http/1.1"), "{answered}");
    }

    #[tokio::test]
    async fn tls_client_without_alpn_is_closed() {
        let (s, ca) = tls_server(false).await;
        let tcp = TcpStream::connect(s.addr).await.unwrap();
        let tls = connector(ca, &[])
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), None);
        // The server closes before any HTTP/2: no call gets an answer.
        assert!(no_answer(tls).await);
    }

    /// The README's TLS sentence, pinned: a client that offers ALPN with
    /// neither `h2` nor `http/1.1` is refused in the handshake; one that
    /// offers none is served HTTP/1.1 (and closed if it opens HTTP/2, the
    /// test above).
    #[tokio::test]
    async fn tls_alpn_with_neither_protocol_is_refused_and_none_is_http11() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let (s, ca) = tls_server(false).await;
        let tcp = TcpStream::connect(s.addr).await.unwrap();
        let refused = connector(ca.clone(), &[b"spdy/3"])
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await;
        assert!(refused.is_err(), "the handshake completed");
        let tcp = TcpStream::connect(s.addr).await.unwrap();
        let mut tls = connector(ca, &[])
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), None);
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n\
             Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer))
            .await
            .expect("an answer in time");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        assert!(answer.contains(r#""id":1"#), "{answer}");
    }

    /// Whether a call over `io` fails (the server closed the connection).
    async fn no_answer<T>(io: T) -> bool
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let r = tokio::time::timeout(Duration::from_secs(5), async {
            let (send, conn) = h2::client::handshake(io).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            let mut ready = send.ready().await?;
            let req = http::Request::post(format!("http://localhost{PATH}"))
                .header("content-type", "application/grpc")
                .body(())
                .unwrap();
            let (resp, _) = ready.send_request(req, true)?;
            resp.await.map(|_| ())
        })
        .await
        .expect("the server closes promptly");
        r.is_err()
    }

    #[tokio::test]
    async fn tls_server_refuses_cleartext_clients() {
        let (s, _ca) = tls_server(false).await;
        let tcp = TcpStream::connect(s.addr).await.unwrap();
        assert!(no_answer(tcp).await);
    }
}
