//! Fixtures shared by the integration tests: the `counted_sleep` test app,
//! the in-process server harness, and raw `h2` gRPC tunnel call helpers.
//! Each test crate uses a part of it.
#![allow(dead_code)]

/// `mcpwire serve`'s demo app: the binary's module, compiled here (it is
/// no part of the library).
#[path = "../../src/bin/mcpwire/demo.rs"]
pub mod demo;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use h2::client::{ResponseFuture, SendRequest};
use http::HeaderMap;
use mcpwire_tokio::{App, Server, ToolCall, ToolResult};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

pub const PATH: &str = "/mcp.zig.transport.v1.Mcp/Call";
pub const VERSION: &str = "2026-07-28";

// ----------------------------------------------------------------------
// The test app and the server harness
// ----------------------------------------------------------------------

/// What a test tool went through.
#[derive(Debug, Default)]
pub struct Counters {
    pub started: AtomicUsize,
    pub finished: AtomicUsize,
    pub dropped: AtomicUsize,
}

/// Counts the handler's end however it comes (return or abort).
pub struct Guard(pub Arc<Counters>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// The demo plus `counted_sleep`, which records its handler's life.
pub fn app(counters: &Arc<Counters>, tick: Duration) -> App {
    let c = Arc::clone(counters);
    demo::app(tick).tool(
        "counted_sleep",
        "Sleeps `ms` milliseconds and counts.",
        r#"{"type":"object","properties":{"ms":{"type":"integer"}}}"#,
        move |call: ToolCall| {
            let c = Arc::clone(&c);
            async move {
                c.started.fetch_add(1, Ordering::SeqCst);
                let _guard = Guard(Arc::clone(&c));
                let ms = call.arguments()["ms"].as_u64().unwrap_or(1000);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                c.finished.fetch_add(1, Ordering::SeqCst);
                Ok(ToolResult::text("slept"))
            }
        },
    )
}

/// A server serving [`app`] in-process until `stop` fires (or is dropped).
pub struct Harness {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
    pub stop: Option<oneshot::Sender<()>>,
    pub served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Harness {
    /// Signals shutdown and waits for the server to end.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = (&mut self.served).await;
    }
}

/// Binds `addr` and serves [`app`] with `tick` on it.
pub async fn start_on_with_tick(addr: &str, tick: Duration) -> Harness {
    let counters = Arc::new(Counters::default());
    let server = Server::bind(addr).await.unwrap();
    let app = app(&counters, tick);
    serve(server, app, counters)
}

/// Serves `app` on a bound `server` until the harness stops it.
pub fn serve(server: Server, app: App, counters: Arc<Counters>) -> Harness {
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(server.serve_with_shutdown(app, async {
        let _ = stopped.await;
    }));
    Harness {
        addr,
        counters,
        stop: Some(stop),
        served,
    }
}

/// Waits until `f` holds, up to `limit`, looking every `every`.
pub async fn eventually_every(every: Duration, limit: Duration, f: impl Fn() -> bool) -> bool {
    let end = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < end {
        if f() {
            return true;
        }
        tokio::time::sleep(every).await;
    }
    f()
}

// ----------------------------------------------------------------------
// Raw h2 gRPC tunnel calls
// ----------------------------------------------------------------------

/// An HTTP/2 client handshake over `io`, its connection driven in a task.
pub async fn handshake<T>(io: T) -> SendRequest<Bytes>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// An HTTP/2 client over a fresh TCP connection to `addr`.
pub async fn connect(addr: SocketAddr) -> SendRequest<Bytes> {
    handshake(TcpStream::connect(addr).await.unwrap()).await
}

pub fn meta(caps: Value, progress: Option<&str>) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": caps,
    });
    if let Some(t) = progress {
        m["progressToken"] = Value::from(t);
    }
    m
}

/// A request with `_meta` added to its params.
pub fn request(id: Value, method: &str, mut params: Value, meta: Value) -> Value {
    params["_meta"] = meta;
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub fn tool_call(id: u64, name: &str, arguments: Value) -> Value {
    request(
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": arguments}),
        meta(json!({}), None),
    )
}

/// gRPC prefix + `JsonRpcMessage { bytes jsonrpc = 1 }`.
pub fn frame(json: &[u8]) -> Bytes {
    let mut msg = vec![0x0a];
    let mut len = json.len();
    while len >= 0x80 {
        msg.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    msg.push(len as u8);
    msg.extend_from_slice(json);
    let mut out = vec![0];
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(&msg);
    out.into()
}

/// Opens a tunnel call to `http://127.0.0.1` with the mirrored metadata
/// (and `extra` headers).
pub async fn open(
    send: &mut SendRequest<Bytes>,
    body: &Value,
    extra: &[(&str, &str)],
) -> (ResponseFuture, h2::SendStream<Bytes>) {
    open_at(send, "http://127.0.0.1", body, extra).await
}

/// Opens a tunnel call to `origin` (scheme and authority) with the
/// mirrored metadata (and `extra` headers).
pub async fn open_at(
    send: &mut SendRequest<Bytes>,
    origin: &str,
    body: &Value,
    extra: &[(&str, &str)],
) -> (ResponseFuture, h2::SendStream<Bytes>) {
    let method = body["method"].as_str().unwrap();
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("{origin}{PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", method);
    let name = body["params"]["name"]
        .as_str()
        .or_else(|| body["params"]["uri"].as_str());
    if let Some(name) = name {
        req = req.header("mcp-name", name);
    }
    for (n, v) in extra {
        req = req.header(*n, *v);
    }
    let mut ready = send.clone().ready().await.unwrap();
    let (resp, mut stream) = ready.send_request(req.body(()).unwrap(), false).unwrap();
    stream
        .send_data(frame(body.to_string().as_bytes()), true)
        .unwrap();
    *send = ready;
    (resp, stream)
}

/// What the client saw on one call.
#[derive(Debug, Default)]
pub struct Reply {
    pub head: HeaderMap,
    pub messages: Vec<Value>,
    pub trailers: HeaderMap,
}

impl Reply {
    /// A trailer, or else a header, of the reply.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.trailers
            .get(name)
            .or_else(|| self.head.get(name))
            .and_then(|v| v.to_str().ok())
    }

    pub fn status(&self) -> Option<&str> {
        self.get("grpc-status")
    }

    /// The first content text of the last message's result.
    pub fn text(&self) -> &str {
        self.messages.last().unwrap()["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
    }
}

/// Splits gRPC messages off `buf`, decoding their JSON.
pub fn take_messages(buf: &mut BytesMut, out: &mut Vec<Value>) {
    while buf.len() >= 5 {
        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
        if buf.len() < 5 + len {
            return;
        }
        buf.advance(5);
        let msg = buf.split_to(len);
        assert_eq!(msg[0], 0x0a);
        let (mut at, mut n, mut shift) = (1, 0usize, 0);
        loop {
            let b = msg[at];
            n |= usize::from(b & 0x7f) << shift;
            at += 1;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        out.push(serde_json::from_slice(&msg[at..at + n]).unwrap());
    }
}

/// The messages of a call as they arrive (a listen stream's, say).
pub struct Messages {
    body: h2::RecvStream,
    buf: BytesMut,
    pending: std::collections::VecDeque<Value>,
}

impl Messages {
    /// Opens a tunnel call to `http://127.0.0.1` and waits for its head.
    pub async fn open(send: &mut SendRequest<Bytes>, body: &Value) -> Self {
        let (resp, _stream) = open(send, body, &[]).await;
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        Self {
            body: resp.into_body(),
            buf: BytesMut::new(),
            pending: Default::default(),
        }
    }

    /// The next message, within 10 s; `None` at the end of the call.
    pub async fn next(&mut self) -> Option<Value> {
        while self.pending.is_empty() {
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.body.data())
                .await
                .expect("a message within 10 s")?
                .unwrap();
            let _ = self.body.flow_control().release_capacity(chunk.len());
            self.buf.extend_from_slice(&chunk);
            let mut messages = Vec::new();
            take_messages(&mut self.buf, &mut messages);
            self.pending.extend(messages);
        }
        self.pending.pop_front()
    }

    /// The remaining messages and the trailers, within 10 s.
    pub async fn rest(mut self) -> (Vec<Value>, HeaderMap) {
        tokio::time::timeout(Duration::from_secs(10), async {
            let mut messages = Vec::new();
            while let Some(m) = self.next().await {
                messages.push(m);
            }
            let trailers = self.body.trailers().await.unwrap().unwrap_or_default();
            (messages, trailers)
        })
        .await
        .expect("the call ends")
    }
}

/// A scripted gRPC server's side of a call: the request body, whole (its
/// window given back as it comes).
pub async fn read_body(mut body: h2::RecvStream) -> BytesMut {
    let mut octets = BytesMut::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        octets.extend_from_slice(&chunk);
    }
    octets
}

/// A scripted gRPC server's answer: the head, `messages` (framed), then
/// `grpc-status: 0`.
pub fn answer_grpc(
    respond: &mut h2::server::SendResponse<Bytes>,
    messages: impl IntoIterator<Item = Bytes>,
) {
    let head = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc+proto")
        .body(())
        .unwrap();
    let mut send = respond.send_response(head, false).unwrap();
    for m in messages {
        send.send_data(m, false).unwrap();
    }
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    send.send_trailers(trailers).unwrap();
}

/// Reads a whole call.
pub async fn collect(resp: ResponseFuture) -> Reply {
    let resp = resp.await.unwrap();
    assert_eq!(resp.status(), 200);
    let head = resp.headers().clone();
    let mut body = resp.into_body();
    let mut buf = BytesMut::new();
    let mut messages = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
        take_messages(&mut buf, &mut messages);
    }
    assert!(buf.is_empty(), "a partial message at the end");
    let trailers = body.trailers().await.unwrap().unwrap_or_default();
    Reply {
        head,
        messages,
        trailers,
    }
}

/// One whole tunnel call to `http://127.0.0.1`, within 10 s.
pub async fn call(send: &mut SendRequest<Bytes>, body: Value, extra: &[(&str, &str)]) -> Reply {
    call_at(send, "http://127.0.0.1", body, extra).await
}

/// One whole tunnel call to `origin`, within 10 s.
pub async fn call_at(
    send: &mut SendRequest<Bytes>,
    origin: &str,
    body: Value,
    extra: &[(&str, &str)],
) -> Reply {
    let (resp, _stream) = open_at(send, origin, &body, extra).await;
    tokio::time::timeout(Duration::from_secs(10), collect(resp))
        .await
        .expect("the call ends")
}

/// A throwaway CA and a certificate for localhost and 127.0.0.1 it signed:
/// (CA PEM, server chain PEM, server key PEM).
pub fn certificates() -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "mcpwire test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    (ca.pem(), leaf.pem(), key.serialize_pem())
}
