//! The byte streams a client engine speaks over, as the dispatcher opens
//! them: a [`Connector`] makes one when the engine asks
//! ([`ClientEvent::Connect`](mcpwire_core::mcp::client::ClientEvent::Connect)),
//! whatever it is (a TCP connection, TLS over it, a child process's pipes,
//! a serial device), and says what TLS's ALPN chose.

use std::future::Future;
use std::io;
use std::pin::Pin;

use mcpwire_core::mcp::client::{LinkId, Negotiated};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A byte stream both ways.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// An open link.
pub(crate) type BoxIo = Box<dyn Io>;

/// What opening a link gives.
pub(crate) type Opened = io::Result<(BoxIo, Negotiated)>;

/// A link being opened.
pub(crate) type Opening = Pin<Box<dyn Future<Output = Opened> + Send>>;

/// Opens the links of one client.
pub(crate) trait Connector: Send + Sync + 'static {
    /// Opens `link`.
    fn connect(&self, link: LinkId) -> Opening;

    /// Where links go, for the error of one that could not be opened
    /// (`connect to 127.0.0.1:50051`).
    fn describe(&self) -> String;

    /// A line of the engine for the operator (a restart, a pause), on
    /// stderr.
    fn note(&self, text: &str) {
        eprintln!("mcpwire: {text}");
    }
}

/// A TCP connection to `addr`, without Nagle's delay (a call's request
/// goes in one write and waits for its answer).
pub(crate) async fn tcp(addr: &str) -> io::Result<TcpStream> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}
