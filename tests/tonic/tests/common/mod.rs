//! What the tests share: the two servers started in-process on
//! 127.0.0.1:0, and a tonic client of the tunnel (`tonic::client::Grpc`
//! with `ProstCodec` and the raw `JsonRpcMessage`).
#![allow(dead_code)]

/// `mcpwire serve`'s demo app: the binary's module, compiled here (it is
/// no part of the library).
// Built without this crate's `schemars` feature: the demo's written-out
// schemas (the same wire behaviour).
#[path = "../../../../std-adapter/src/bin/mcpwire/demo.rs"]
mod demo;

use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcpwire_tonic_peer::{CALL_PATH, JsonRpcMessage, PROTOCOL_VERSION};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::client::{Grpc, GrpcService};
use tonic::codegen::{Body, Bytes, StdError, http::uri::PathAndQuery};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};
use tonic_prost::ProstCodec;

/// hyper's HTTP/2 client, as a tonic transport.
pub type HyperClient = hyper_util::client::legacy::Client<HttpConnector, tonic::body::Body>;

/// A server running in this process until `stop`.
pub struct Running<E> {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    served: JoinHandle<Result<(), E>>,
}

impl<E: std::fmt::Debug> Running<E> {
    /// Signals shutdown and checks that the server ended without error.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let ended = tokio::time::timeout(Duration::from_secs(10), &mut self.served)
            .await
            .expect("the server stops within 10 s")
            .expect("the server task did not panic");
        ended.expect("the server ended without error");
    }
}

/// mcpwire's demo server (`mcpwire serve`'s app) on 127.0.0.1:0.
pub async fn start_mcpwire() -> Running<std::io::Error> {
    let server = mcpwire_tokio::Server::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = server.local_addr().expect("local address");
    let (stop, stopped) = oneshot::channel::<()>();
    // The listen source's tick does not matter here.
    let app = demo::app(Duration::from_secs(3600));
    let served = tokio::spawn(server.serve_with_shutdown(app, async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop: Some(stop),
        served,
    }
}

/// The tonic tunnel server of this crate on 127.0.0.1:0.
pub async fn start_tonic() -> Running<tonic::transport::Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(mcpwire_tonic_peer::serve_with_shutdown(listener, async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop: Some(stop),
        served,
    }
}

/// A tonic client over a tonic `Channel` to `addr`.
pub async fn tonic_client(addr: SocketAddr) -> Grpc<Channel> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect()
        .await
        .expect("connect");
    Grpc::new(channel)
}

/// A tonic client over hyper's HTTP/2 client (tonic's h2c example). A
/// tonic `Channel` stops waiting for the response head itself when the
/// request's `grpc-timeout` passes and reports CANCELLED "Timeout expired";
/// this one waits for what the server answers.
pub fn tonic_client_without_timer(addr: SocketAddr) -> Grpc<HyperClient> {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let origin = format!("http://{addr}").parse().expect("a valid URI");
    Grpc::with_origin(client, origin)
}

/// The `_meta` every request carries (MCP 2026-07-28 §3.3).
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "tonic-test-client", "version": "0.1.0"},
    })
}

/// A JSON-RPC request with `params._meta` set to [`meta`] (plus `extra`
/// keys).
pub fn mcp_request(id: u64, method: &str, mut params: Value, extra_meta: Value) -> Value {
    let mut m = meta();
    if let (Some(m), Some(extra)) = (m.as_object_mut(), extra_meta.as_object()) {
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
    }
    params["_meta"] = m;
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A `tools/call` of `name` with `arguments`.
pub fn tool_call(id: u64, name: &str, arguments: Value) -> Value {
    mcp_request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
        json!({}),
    )
}

/// The gRPC request of `body` with the metadata the binding mirrors from it
/// (`mcp-protocol-version`, `mcp-method`, and `mcp-name` for a tool call).
pub fn tunnel_request(body: &Value) -> Request<JsonRpcMessage> {
    let mut request = Request::new(JsonRpcMessage::from_json(body));
    let md = request.metadata_mut();
    md.insert(
        "mcp-protocol-version",
        MetadataValue::from_static(PROTOCOL_VERSION),
    );
    let method = body["method"].as_str().expect("a method");
    md.insert("mcp-method", method.parse().expect("ASCII method"));
    if let Some(name) = body["params"]["name"].as_str() {
        md.insert("mcp-name", name.parse().expect("ASCII name"));
    }
    request
}

/// What a client saw of a call that ended with `grpc-status: 0`.
#[derive(Debug)]
pub struct Reply {
    pub messages: Vec<Value>,
    pub trailers: MetadataMap,
}

impl Reply {
    /// The last message: the response.
    pub fn response(&self) -> &Value {
        self.messages.last().expect("a response message")
    }

    /// The first text content of the response's result.
    pub fn text(&self) -> &str {
        self.response()["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("a text result: {}", self.response()))
    }
}

/// One tunnel call: every message, then the trailers; `Err` for a status
/// other than OK (in the response head or in the trailers).
pub async fn call<T>(grpc: &mut Grpc<T>, request: Request<JsonRpcMessage>) -> Result<Reply, Status>
where
    T: GrpcService<tonic::body::Body>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError>,
{
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("not ready: {}", e.into())))?;
    let codec = ProstCodec::<JsonRpcMessage, JsonRpcMessage>::default();
    let mut stream = grpc
        .server_streaming(request, PathAndQuery::from_static(CALL_PATH), codec)
        .await?
        .into_inner();
    let mut messages = Vec::new();
    while let Some(m) = stream.message().await? {
        messages.push(serde_json::from_slice(&m.jsonrpc).expect("a JSON message"));
    }
    let trailers = stream.trailers().await?.unwrap_or_default();
    Ok(Reply { messages, trailers })
}
