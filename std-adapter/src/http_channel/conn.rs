//! The transport under an [`HttpChannel`](super::HttpChannel): where an
//! `http://` or `https://` URL points, and the byte stream of one
//! connection to it, plain TCP or TLS (feature `tls`, rustls with the
//! roots and server name of [`ClientTlsConfig`]), and the HTTP version it
//! speaks: HTTP/1.1, or HTTP/2 as [`Http2Mode`] says (ALPN `h2` over TLS,
//! or prior knowledge over cleartext).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use mcpwire_core::grpc::Code;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

#[cfg(feature = "tls")]
use crate::ClientTlsConfig;
use crate::client::CallError;
use crate::stdio_client::http_link::Target;

/// An endpoint's URL taken apart.
#[derive(Debug, Clone)]
pub(crate) struct Dest {
    /// `Host` / `:authority`, as the URL gives it.
    pub(crate) target: Target,
    /// `host:port` to connect to (the scheme's port when the URL has none).
    pub(crate) addr: String,
    /// `https://`.
    pub(crate) tls: bool,
}

/// Takes `http://host[:port][/path]` or `https://...` apart.
pub(crate) fn parse(url: &str) -> Result<Dest, String> {
    let (rest, tls, port) = if let Some(rest) = url.strip_prefix("http://") {
        (rest, false, 80)
    } else if let Some(rest) = url.strip_prefix("https://") {
        (rest, true, 443)
    } else {
        return Err(format!(
            "{}: only http:// and https:// URLs are supported",
            crate::redact_url(url)
        ));
    };
    let at = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(at);
    if authority.is_empty() || authority.contains('@') {
        return Err(format!(
            "{}: no host, or credentials in the URL (give them in the configuration)",
            crate::redact_url(url)
        ));
    }
    let addr = if has_port(authority) {
        authority.to_owned()
    } else {
        format!("{authority}:{port}")
    };
    let path = match path {
        "" => "/".to_owned(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_owned(),
    };
    Ok(Dest {
        target: Target {
            authority: authority.to_owned(),
            path,
        },
        addr,
        tls,
    })
}

/// Whether `host:port` or `[v6]:port` names a port.
fn has_port(authority: &str) -> bool {
    let host_end = match authority.strip_prefix('[') {
        Some(_) => match authority.find(']') {
            Some(i) => i + 1,
            None => return false,
        },
        None => authority.find(':').unwrap_or(authority.len()),
    };
    authority
        .get(host_end..)
        .and_then(|t| t.strip_prefix(':'))
        .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// When an [`HttpChannel`](super::HttpChannel) speaks HTTP/2.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Http2Mode {
    /// HTTP/1.1 only (TLS offers ALPN `http/1.1` alone).
    Never,
    /// Over TLS, ALPN offers `h2` and `http/1.1` and the server chooses;
    /// cleartext is HTTP/1.1.
    #[default]
    Alpn,
    /// HTTP/2 always: cleartext with prior knowledge (`h2c`), TLS with
    /// ALPN `h2` alone.
    PriorKnowledge,
}

/// A new connection and the version it speaks.
#[derive(Debug)]
pub(crate) enum Dialed {
    Http1(Stream),
    H2(Stream),
}

/// How a channel reaches its endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Dialer {
    pub(crate) dest: Dest,
    mode: Http2Mode,
    /// The TLS of an `https://` endpoint, offering the ALPN this channel
    /// speaks.
    #[cfg(feature = "tls")]
    tls: Option<ClientTlsConfig>,
}

impl Dialer {
    /// For `url`, with `tls` (the roots and server name) for `https://`:
    /// none trusts the platform's store.
    pub(crate) fn new(
        url: &str,
        mode: Http2Mode,
        #[cfg(feature = "tls")] tls: Option<&ClientTlsConfig>,
    ) -> Result<Self, CallError> {
        let dest = parse(url).map_err(|e| CallError::new(Code::InvalidArgument, e))?;
        #[cfg(feature = "tls")]
        {
            use crate::tls::{ALPN_H2, ALPN_HTTP1};
            let alpn: &[&[u8]] = match mode {
                Http2Mode::Never => &[ALPN_HTTP1],
                Http2Mode::Alpn => &[ALPN_H2, ALPN_HTTP1],
                Http2Mode::PriorKnowledge => &[ALPN_H2],
            };
            let tls = match (dest.tls, tls) {
                (false, _) => None,
                (true, Some(t)) => Some(t.with_alpn(alpn)),
                (true, None) => Some(
                    ClientTlsConfig::with_platform_roots()
                        .map_err(|e| CallError::new(Code::InvalidArgument, e.to_string()))?
                        .with_alpn(alpn),
                ),
            };
            Ok(Self { dest, mode, tls })
        }
        #[cfg(not(feature = "tls"))]
        {
            if dest.tls {
                return Err(CallError::new(
                    Code::InvalidArgument,
                    format!(
                        "{}: this build has no TLS (feature `tls`)",
                        crate::redact_url(url)
                    ),
                ));
            }
            Ok(Self { dest, mode })
        }
    }

    /// Whether a new connection may turn out HTTP/2.
    pub(crate) fn may_speak_h2(&self) -> bool {
        match self.mode {
            Http2Mode::Never => false,
            Http2Mode::Alpn => self.dest.tls,
            Http2Mode::PriorKnowledge => true,
        }
    }

    /// A new connection: TCP, then the TLS handshake for `https://`; its
    /// version from ALPN, or from the mode over cleartext.
    pub(crate) async fn dial(&self) -> Result<Dialed, CallError> {
        let addr = &self.dest.addr;
        let unavailable = |what: &str, e: io::Error| {
            CallError::new(Code::Unavailable, format!("{what} {addr}: {e}"))
        };
        let tcp = TcpStream::connect(addr.as_str())
            .await
            .map_err(|e| unavailable("connect to", e))?;
        let _ = tcp.set_nodelay(true);
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let tls = tls
                .handshake(addr, tcp)
                .await
                .map_err(|e| unavailable("TLS with", e))?;
            let alpn = tls.get_ref().1.alpn_protocol();
            let h2 = alpn == Some(crate::tls::ALPN_H2);
            if self.mode == Http2Mode::PriorKnowledge && !h2 {
                return Err(CallError::new(
                    Code::Unavailable,
                    format!("{addr}: the server did not select ALPN h2"),
                ));
            }
            let stream = Stream::Tls(Box::new(tls));
            return Ok(if h2 {
                Dialed::H2(stream)
            } else {
                Dialed::Http1(stream)
            });
        }
        Ok(match self.mode {
            Http2Mode::PriorKnowledge => Dialed::H2(Stream::Tcp(tcp)),
            _ => Dialed::Http1(Stream::Tcp(tcp)),
        })
    }
}

/// One connection's byte stream.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{has_port, parse};

    #[test]
    fn urls_are_taken_apart_with_the_schemes_port() {
        let d = parse("https://example.com/mcp").unwrap();
        assert_eq!(
            (d.target.authority.as_str(), d.target.path.as_str()),
            ("example.com", "/mcp")
        );
        assert_eq!((d.addr.as_str(), d.tls), ("example.com:443", true));
        let d = parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            (d.addr.as_str(), d.target.path.as_str()),
            ("127.0.0.1:8080", "/")
        );
        assert!(!d.tls);
        let d = parse("http://[::1]/x?y=1").unwrap();
        assert_eq!(
            (d.addr.as_str(), d.target.path.as_str()),
            ("[::1]:80", "/x?y=1")
        );
        assert!(parse("ftp://h/").is_err());
        assert!(parse("https:///mcp").is_err());
        assert!(parse("http://user@h/").is_err());
        assert!(has_port("[::1]:9") && !has_port("[::1]") && !has_port("h:"));
    }
}
