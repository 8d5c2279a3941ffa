//! The gRPC client of the load: the `h2` crate over TCP, one tunnel call at
//! a time per task. Every server gets the same bytes from this code, so a
//! difference in the figures is the server's.

use std::net::SocketAddr;

use bytes::Bytes;
use h2::client::SendRequest;
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue, TE};
use http::{Method, Request, Uri};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::wire::{
    Deframer, PATH, PROTOCOL_VERSION, TYPED_CALL_TOOL, Template, Work, typed_response,
};

/// The windows the client grants, those the binding gives a server: the
/// load should not wait on WINDOW_UPDATE frames.
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 4 << 20;

static MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// One HTTP/2 connection: its request handle and the task that drives it.
#[derive(Debug)]
pub struct Connection {
    pub send: SendRequest<Bytes>,
    driver: JoinHandle<()>,
}

impl Connection {
    /// Connects with prior knowledge and waits for a PING's answer: then the
    /// server has read our preface and SETTINGS, and we have its SETTINGS
    /// (and acknowledged them).
    pub async fn open(addr: SocketAddr) -> Result<Self, String> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_nodelay(true)
            .map_err(|e| format!("TCP_NODELAY: {e}"))?;
        let (send, mut conn) = h2::client::Builder::new()
            .enable_push(false)
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .handshake::<_, Bytes>(tcp)
            .await
            .map_err(|e| format!("HTTP/2 handshake with {addr}: {e}"))?;
        let ping = conn.ping_pong();
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let Some(mut ping) = ping else {
            driver.abort();
            return Err("no PING handle".into());
        };
        if let Err(e) = ping.ping(h2::Ping::opaque()).await {
            driver.abort();
            return Err(format!("PING to {addr}: {e}"));
        }
        Ok(Self { send, driver })
    }

    /// Closes the socket (without GOAWAY: the server sees the end of input).
    pub fn close(self) {
        drop(self.send);
        self.driver.abort();
    }
}

/// What every call of a scenario sends: the URI, the template and the
/// mirrored headers.
#[derive(Debug)]
pub struct CallSpec {
    pub work: Work,
    template: Template,
    uri: Uri,
    name: HeaderValue,
    /// The typed binding's framed `CallToolRequest`, instead of the tunnel.
    typed: Option<Bytes>,
}

impl CallSpec {
    pub fn new(addr: SocketAddr, work: Work) -> Result<Self, String> {
        let uri: Uri = format!("http://{addr}{PATH}")
            .parse()
            .map_err(|e| format!("URI for {addr}: {e}"))?;
        Ok(Self {
            template: work.template(),
            name: HeaderValue::from_static(work.tool()),
            work,
            uri,
            typed: None,
        })
    }

    /// The same work as typed `CallTool` calls of
    /// `model_context_protocol.Mcp` (one request message, one response).
    pub fn typed(addr: SocketAddr, work: Work) -> Result<Self, String> {
        let uri: Uri = format!("http://{addr}{TYPED_CALL_TOOL}")
            .parse()
            .map_err(|e| format!("URI for {addr}: {e}"))?;
        Ok(Self {
            template: work.template(),
            name: HeaderValue::from_static(work.tool()),
            typed: Some(work.typed_frame()?),
            work,
            uri,
        })
    }

    fn request(&self) -> Request<()> {
        let mut req = Request::new(());
        *req.method_mut() = Method::POST;
        *req.uri_mut() = self.uri.clone();
        let h = req.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        h.insert(TE, HeaderValue::from_static("trailers"));
        if self.typed.is_some() {
            // No mirrored headers: the typed binding reads the message.
            return req;
        }
        h.insert(
            MCP_PROTOCOL_VERSION.clone(),
            HeaderValue::from_static(PROTOCOL_VERSION),
        );
        h.insert(MCP_METHOD.clone(), HeaderValue::from_static("tools/call"));
        h.insert(MCP_NAME.clone(), self.name.clone());
        req
    }
}

/// One whole tunnel call with id `id` on `send`, every message checked:
/// HTTP 200, the expected messages, then `grpc-status: 0`.
pub async fn call(send: &mut SendRequest<Bytes>, spec: &CallSpec, id: u64) -> Result<(), String> {
    std::future::poll_fn(|cx| send.poll_ready(cx))
        .await
        .map_err(|e| format!("connection not ready: {e}"))?;
    let (response, mut stream) = send
        .send_request(spec.request(), false)
        .map_err(|e| format!("send_request: {e}"))?;
    stream
        .send_data(
            match &spec.typed {
                Some(frame) => frame.clone(),
                None => spec.template.frame(id),
            },
            true,
        )
        .map_err(|e| format!("send_data: {e}"))?;
    let response = response.await.map_err(|e| format!("response: {e}"))?;
    if response.status() != http::StatusCode::OK {
        return Err(format!("HTTP status {}", response.status()));
    }
    if let Some(status) = response.headers().get("grpc-status") {
        // A trailers-only response: an error before any message.
        return Err(format!(
            "trailers-only response, grpc-status {status:?}, grpc-message {:?}",
            response.headers().get("grpc-message")
        ));
    }
    let mut body = response.into_body();
    let mut deframer = if spec.typed.is_some() {
        Deframer::raw()
    } else {
        Deframer::default()
    };
    let mut checker = spec.work.checker(id);
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("response body: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        deframer.push(&chunk);
        while let Some(message) = deframer.next_message()? {
            if spec.typed.is_some() {
                checker.message(&typed_response(&message, id)?)?;
            } else {
                checker.message(&message)?;
            }
        }
    }
    if !deframer.is_empty() {
        return Err("a partial message at the end of the stream".into());
    }
    checker.finish()?;
    let trailers = body
        .trailers()
        .await
        .map_err(|e| format!("trailers: {e}"))?
        .ok_or("no trailers")?;
    match trailers.get("grpc-status").map(HeaderValue::as_bytes) {
        Some(b"0") => Ok(()),
        other => Err(format!(
            "grpc-status {:?}, grpc-message {:?}",
            other.map(String::from_utf8_lossy),
            trailers.get("grpc-message")
        )),
    }
}
