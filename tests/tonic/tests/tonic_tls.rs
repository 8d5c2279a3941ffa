//! mcpwire's client TLS against a TLS gRPC server nobody here wrote: the
//! tonic tunnel server of this crate behind tonic's own `ServerTlsConfig`
//! (rustls, ALPN h2), called by `mcpwire_tokio::Channel` with a throwaway CA.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_tokio::{Client, ClientTlsConfig, client::grpc};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use serde_json::json;
use tokio::sync::oneshot;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Identity, ServerTlsConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_calls_tonic_over_tls() {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "tonic test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let tls = ServerTlsConfig::new().identity(Identity::from_pem(leaf.pem(), key.serialize_pem()));
    let served = tokio::spawn(
        tonic::transport::Server::builder()
            .tls_config(tls)
            .unwrap()
            .add_service(mcpwire_tonic_peer::McpServer::new())
            .serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
                let _ = stopped.await;
            }),
    );

    let mut config = grpc::Config::new(addr.to_string());
    config.tls = Some(
        ClientTlsConfig::with_pem_roots(ca.pem().as_bytes())
            .unwrap()
            .server_name("localhost"),
    );
    let channel = Client::grpc(config).await.unwrap();
    let r = channel
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "to tonic over tls"}}),
        )
        .await
        .unwrap();
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "to tonic over tls"}]),
        "{r}"
    );
    let r = channel.request("tools/list", json!({})).await.unwrap();
    assert_eq!(r["result"]["tools"][0]["name"], "echo", "{r}");

    // The same server refuses a cleartext channel (no answer, an error).
    let mut plain = grpc::Config::new(addr.to_string());
    plain.request_timeout = std::time::Duration::from_secs(5);
    let e = Client::grpc(plain)
        .await
        .unwrap()
        .request("tools/list", json!({}))
        .await
        .unwrap_err();
    assert_ne!(e.status, mcpwire_core::grpc::Code::Ok, "{e:?}");

    let _ = stop.send(());
    served.await.unwrap().unwrap();
}
