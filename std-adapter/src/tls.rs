//! TLS for the server and the client (feature `tls`): rustls 0.23 with
//! the `ring` provider. The server offers ALPN `h2` (gRPC and Streamable
//! HTTP) and `http/1.1` (Streamable HTTP only); the client offers `h2`.
//!
//! The gRPC binding: "The client connects with cleartext HTTP/2 and prior
//! knowledge, or with TLS and ALPN h2. The server refuses a TLS client that
//! negotiated another protocol." A client that offers ALPN with neither
//! protocol is refused by rustls during the handshake (alert
//! `no_application_protocol`); a client that offers no ALPN at all may
//! speak HTTP/1.1, and one that then opens HTTP/2 is closed (close_notify,
//! then the TCP connection) before any HTTP/2 octet is answered. A
//! handshake gets 10 s.
//!
//! The client ([`ClientTlsConfig`]) offers only `h2` and refuses a server
//! that selects no protocol (one that selects another cannot: rustls then
//! fails the handshake). It trusts the roots of a PEM file or the
//! platform's store (rustls-native-certs).

use std::io;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The crypto provider of every TLS configuration here: rustls's `ring`
/// provider (its default cipher suites and key exchange groups). rustls
/// 0.23.48 deprecates it because `ring` has no post-quantum key exchange
/// (X25519MLKEM768, which its `aws-lc-rs` provider has); `ring` stays the
/// choice here, a much smaller build than the AWS-LC C library.
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    Arc::new(provider)
}

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
        let provider = crypto_provider();
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

/// A client's TLS settings: the roots it trusts, ALPN `h2`, and optionally
/// the name to verify the server's certificate against (by default the
/// host of the channel's address).
#[derive(Clone)]
pub struct ClientTlsConfig {
    config: Arc<ClientConfig>,
    server_name: Option<String>,
}

impl std::fmt::Debug for ClientTlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let alpn: Vec<_> = self
            .config
            .alpn_protocols
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        f.debug_struct("ClientTlsConfig")
            .field("alpn", &alpn)
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl ClientTlsConfig {
    /// Trusts the CA certificates of PEM text (one or more).
    pub fn with_pem_roots(ca_pem: &[u8]) -> io::Result<Self> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|e| invalid(format!("the CA certificates: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| invalid(format!("a CA certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(invalid("the CA file holds no certificate".into()));
        }
        Self::with_roots(roots)
    }

    /// Trusts the CA certificates of a PEM file.
    pub fn with_pem_roots_file(path: impl AsRef<std::path::Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let pem = std::fs::read(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Self::with_pem_roots(&pem)
    }

    /// Trusts the platform's certificate store. Certificates of the store
    /// that rustls cannot parse are skipped; none at all is an error.
    pub fn with_platform_roots() -> io::Result<Self> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (_added, _skipped) = roots.add_parsable_certificates(found.certs);
        if roots.is_empty() {
            let why = found
                .errors
                .first()
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no usable certificate in the platform's store{why}"),
            ));
        }
        Self::with_roots(roots)
    }

    fn with_roots(roots: RootCertStore) -> io::Result<Self> {
        let provider = crypto_provider();
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS versions: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self::from_rustls(config))
    }

    /// From a rustls configuration; its ALPN list is replaced by `h2`.
    pub fn from_rustls(mut config: ClientConfig) -> Self {
        config.alpn_protocols = vec![ALPN_H2.to_vec()];
        Self {
            config: Arc::new(config),
            server_name: None,
        }
    }

    /// Verifies the server's certificate for `name` (and sends it as SNI)
    /// instead of the host of the address.
    #[must_use]
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// The same roots and server name, offering `protocols` in ALPN
    /// instead (Streamable HTTP offers `h2` and `http/1.1`).
    pub(crate) fn with_alpn(&self, protocols: &[&[u8]]) -> Self {
        let mut config = ClientConfig::clone(&self.config);
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        Self {
            config: Arc::new(config),
            server_name: self.server_name.clone(),
        }
    }

    /// The TLS handshake over `tcp` to `addr` (`host:port`), whatever ALPN
    /// selects (read it from the stream); 10 s at most.
    pub(crate) async fn handshake(
        &self,
        addr: &str,
        tcp: TcpStream,
    ) -> io::Result<TlsStream<TcpStream>> {
        let name = match &self.server_name {
            Some(name) => name.as_str(),
            None => host_of(addr),
        };
        let name = ServerName::try_from(name.to_owned())
            .map_err(|e| invalid(format!("server name {name:?}: {e}")))?;
        let connector = TlsConnector::from(Arc::clone(&self.config));
        tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the TLS handshake timed out"))?
            .map_err(|e| io::Error::new(e.kind(), format!("TLS: {e}")))
    }

    /// The TLS handshake over `tcp` to `addr` (`host:port`), which must end
    /// with ALPN `h2`; 10 s at most.
    pub(crate) async fn connect(
        &self,
        addr: &str,
        tcp: TcpStream,
    ) -> io::Result<TlsStream<TcpStream>> {
        let tls = self.handshake(addr, tcp).await?;
        match tls.get_ref().1.alpn_protocol() {
            Some(ALPN_H2) => Ok(tls),
            other => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the server did not select ALPN h2 (it selected {}): not an HTTP/2 server",
                    other.map_or_else(
                        || "none".to_owned(),
                        |p| format!("{:?}", String::from_utf8_lossy(p))
                    )
                ),
            )),
        }
    }
}

const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The host of `host:port`, `[v6]:port` or a bare host.
fn host_of(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(host, _)| host);
    }
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => addr,
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_host_of_an_address() {
        assert_eq!(host_of("example.com:443"), "example.com");
        assert_eq!(host_of("127.0.0.1:50051"), "127.0.0.1");
        assert_eq!(host_of("[::1]:50051"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
        assert_eq!(host_of("::1"), "::1");
    }
}
