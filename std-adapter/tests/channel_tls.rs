//! The client's TLS (binding: "The client connects with cleartext HTTP/2
//! and prior knowledge, or with TLS and ALPN h2"): the tokio `Channel` and
//! `mcpwire call` against the tokio server's TLS, with a throwaway CA; a
//! server that completes the handshake without selecting `h2` is refused.
#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use mcpwire_core::grpc::Code;
use mcpwire_tokio::{Client, ClientTlsConfig, Server, client::grpc};
use serde_json::{Value, json};

use common::certificates;

async fn tls_server() -> (common::Harness, String) {
    let (ca, chain, key) = certificates();
    let server = Server::bind_tls("127.0.0.1:0", chain.as_bytes(), key.as_bytes())
        .await
        .unwrap();
    let app = common::demo::app(Duration::from_secs(3600));
    (common::serve(server, app, Default::default()), ca)
}

async fn tls_channel(addr: &str, ca: &str) -> Client {
    let mut config = grpc::Config::new(addr);
    config.tls = Some(ClientTlsConfig::with_pem_roots(ca.as_bytes()).unwrap());
    Client::grpc(config).await.unwrap()
}

async fn echo(channel: &Client, text: &str) -> Result<Value, mcpwire_tokio::CallError> {
    channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": text}}),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_calls_the_tls_server_by_ip_and_by_name() {
    let (h, ca) = tls_server().await;
    // The certificate names 127.0.0.1 (the address's host) ...
    let channel = tls_channel(&h.addr.to_string(), &ca).await;
    let r = echo(&channel, "over tls").await.unwrap();
    assert_eq!(r["result"]["content"][0]["text"], "over tls", "{r}");
    let r = channel.request("tools/list", json!({})).await.unwrap();
    assert!(r["result"]["tools"].as_array().unwrap().len() >= 2, "{r}");
    // ... and localhost, given as the server name.
    let mut config = grpc::Config::new(h.addr.to_string());
    config.tls = Some(
        ClientTlsConfig::with_pem_roots(ca.as_bytes())
            .unwrap()
            .server_name("localhost"),
    );
    let r = echo(&Client::grpc(config).await.unwrap(), "by name")
        .await
        .unwrap();
    assert_eq!(r["result"]["content"][0]["text"], "by name", "{r}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_refuses_a_certificate_of_another_ca_and_a_wrong_name() {
    let (h, _ca) = tls_server().await;
    let (other_ca, _, _) = certificates();
    let e = echo(&tls_channel(&h.addr.to_string(), &other_ca).await, "x")
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e:?}");
    assert!(e.message.contains("certificate"), "{e}");
    let (h2, ca) = tls_server().await;
    let mut config = grpc::Config::new(h2.addr.to_string());
    config.tls = Some(
        ClientTlsConfig::with_pem_roots(ca.as_bytes())
            .unwrap()
            .server_name("example.com"),
    );
    let e = echo(&Client::grpc(config).await.unwrap(), "x")
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e:?}");
    assert!(e.message.contains("certificate"), "{e}");
    h.stop().await;
    h2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_over_cleartext_to_a_tls_server_gets_no_answer() {
    let (h, _ca) = tls_server().await;
    let mut config = grpc::Config::new(h.addr.to_string());
    config.request_timeout = Duration::from_secs(5);
    let e = echo(&Client::grpc(config).await.unwrap(), "x")
        .await
        .unwrap_err();
    assert_ne!(e.status, Code::Ok, "{e:?}");
    h.stop().await;
}

/// A TLS server that completes the handshake without ALPN (it offers no
/// protocol), then waits: not an HTTP/2 server.
async fn tls_server_without_alpn(chain: &str, key: &str) -> std::net::SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(chain.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let provider = mcpwire_tokio::crypto_provider();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    drop(tls);
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_refuses_a_server_that_does_not_select_h2() {
    let (ca, chain, key) = certificates();
    let addr = tls_server_without_alpn(&chain, &key).await;
    let started = std::time::Instant::now();
    let e = echo(&tls_channel(&addr.to_string(), &ca).await, "x")
        .await
        .unwrap_err();
    assert_eq!(e.status, Code::Unavailable, "{e:?}");
    assert!(
        e.message
            .contains("did not select ALPN h2 (it selected none)"),
        "{e}"
    );
    // Refused at once, not after a timeout.
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn client_tls_config_refuses_an_empty_ca_file() {
    let e = ClientTlsConfig::with_pem_roots(b"no certificate here").unwrap_err();
    assert!(e.to_string().contains("no certificate"), "{e}");
}

// ----------------------------------------------------------------------
// `mcpwire call` against `mcpwire serve --tls-cert`
// ----------------------------------------------------------------------

/// A `mcpwire serve` child, killed when dropped.
struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mcpwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcpwire"))
}

#[test]
fn mcpwire_call_over_tls_to_mcpwire_serve() {
    let (ca, chain, key) = certificates();
    let dir = std::env::temp_dir().join(format!("mcpwire-call-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in [("ca.pem", &ca), ("cert.pem", &chain), ("key.pem", &key)] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    // A port of its own choosing (one picked here and freed could be
    // taken before the server binds it), read off its listening line.
    let mut serve = Serve(
        mcpwire()
            .args(["serve", "--listen", "127.0.0.1:0", "--tls-cert"])
            .arg(dir.join("cert.pem"))
            .arg("--tls-key")
            .arg(dir.join("key.pem"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let server = {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(serve.0.stderr.take().unwrap()).lines();
        let server = loop {
            let line = lines
                .next()
                .expect("mcpwire serve ended before listening")
                .unwrap();
            if let Some(rest) = line.strip_prefix("listening on ") {
                break rest.split(' ').next().unwrap().to_owned();
            }
        };
        // The rest of its stderr, read so that it never blocks on it.
        std::thread::spawn(move || lines.for_each(drop));
        server
    };

    let call = |args: &[&str]| {
        let out = mcpwire()
            .arg("call")
            .arg("--server")
            .arg(&server)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let ca_file = dir.join("ca.pem").to_string_lossy().into_owned();
    let (ok, stdout, stderr) = call(&["--tls-ca", &ca_file, "tool", "echo", r#"{"text":"tls"}"#]);
    assert!(ok, "{stderr}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["content"][0]["text"], "tls", "{stdout}");
    let (ok, stdout, stderr) = call(&[
        "--tls-ca",
        &ca_file,
        "--tls-server-name",
        "localhost",
        "list",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("\"echo\""), "{stdout}");
    // Without --tls the call is cleartext and fails; with the platform's
    // roots the throwaway CA is not trusted.
    let (ok, _, _) = call(&["--timeout-ms", "3000", "list"]);
    assert!(!ok);
    let (ok, _, stderr) = call(&["--tls", "list"]);
    assert!(!ok);
    assert!(
        stderr.contains("certificate") || stderr.contains("platform"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
