//! TLS for the server (feature `tls`): rustls 0.23 with the `ring`
//! provider, ALPN `h2` (gRPC and Streamable HTTP) and `http/1.1`
//! (Streamable HTTP only).
//!
//! The gRPC binding: "The client connects with cleartext HTTP/2 and prior
//! knowledge, or with TLS and ALPN h2. The server refuses a TLS client that
//! negotiated another protocol." A client that offers ALPN with neither
//! protocol is refused by rustls during the handshake (alert
//! `no_application_protocol`); a client that offers no ALPN at all may
//! speak HTTP/1.1, and one that then opens HTTP/2 is closed (close_notify,
//! then the TCP connection) before any HTTP/2 octet is answered. A
//! handshake gets 10 s.

use std::io;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// HTTP/2: the gRPC tunnel, and Streamable HTTP.
pub const ALPN_H2: &[u8] = b"h2";
/// HTTP/1.1: Streamable HTTP only (gRPC needs HTTP/2).
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// A server's TLS settings: a certificate chain and its key.
#[derive(Clone)]
pub struct TlsConfig {
    pub(crate) config: Arc<ServerConfig>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("alpn", &"h2, http/1.1")
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// From PEM text: the certificate chain (leaf first) and the private
    /// key (PKCS#8, PKCS#1 or SEC1).
    pub fn from_pem(cert_chain_pem: &[u8], key_pem: &[u8]) -> io::Result<Self> {
        let certs = CertificateDer::pem_slice_iter(cert_chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("the certificate chain: {e}")))?;
        if certs.is_empty() {
            return Err(invalid("the certificate chain holds no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| invalid(format!("the private key: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS versions: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| invalid(format!("the certificate or key: {e}")))?;
        Ok(Self::from_rustls(config))
    }

    /// From PEM files.
    pub fn from_pem_files(
        cert_chain: impl AsRef<std::path::Path>,
        key: impl AsRef<std::path::Path>,
    ) -> io::Result<Self> {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        };
        Self::from_pem(&read(cert_chain.as_ref())?, &read(key.as_ref())?)
    }

    /// From a rustls configuration; its ALPN list is replaced by `h2`
    /// and `http/1.1`, in that order of preference.
    pub fn from_rustls(mut config: ServerConfig) -> Self {
        config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP1.to_vec()];
        Self {
            config: Arc::new(config),
        }
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
