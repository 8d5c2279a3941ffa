//! An MCP server over the gRPC tunnel binding, written the way a tonic user
//! would write it: tonic 0.14 with a hand-written service for
//! `/mcp.zig.transport.v1.Mcp/Call` (what `tonic-build` would generate from
//! `tests/grpc/mcp_zig_transport_v1.proto`, without a build script), prost
//! for `JsonRpcMessage`, and serde_json for MCP.
//!
//! It is the tonic peer of mcpwire's interop tests and the comparison point
//! of the load benchmark. It serves `server/discover`, `tools/list` and
//! `tools/call` for two tools: `echo` (`{text}`, returns it) and `progress`
//! (`{steps, delay_ms}`: `steps` `notifications/progress`, `delay_ms`
//! apart, sent when the request carries `_meta.progressToken`, then a
//! result). Following the binding, it checks the request's `_meta` and its
//! metadata against the body; the errors found before a request runs
//! (-32700, -32600, -32020, -32022) end the call with headers-only trailers
//! (`grpc-status`, `grpc-message`, `mcp-error-code`, `mcp-error-bin`), every
//! other JSON-RPC error is an ordinary response message followed by
//! `grpc-status: 0`. A `grpc-timeout` that passes while `progress` runs ends
//! the call with DEADLINE_EXCEEDED; a client's reset stops it.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::{Body, BoxFuture, BoxStream, Service, StdError, http};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::server::{Grpc, NamedService, ServerStreamingService};
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;

/// The proto service of the tunnel binding.
pub const SERVICE: &str = "mcp.zig.transport.v1.Mcp";
/// The path of its one method.
pub const CALL_PATH: &str = "/mcp.zig.transport.v1.Mcp/Call";
/// The MCP revision this server speaks.
pub const PROTOCOL_VERSION: &str = "2026-07-28";
/// The address the binary listens on without `--listen`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50052";

const SERVER_NAME: &str = "tonic-tunnel-server";
const KEY_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const KEY_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const KEY_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The binding sends `mcp-error-bin` only up to this size.
const MAX_ERROR_BIN: usize = 4096;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const HEADER_MISMATCH: i64 = -32020;
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// `message JsonRpcMessage { bytes jsonrpc = 1; }`: one JSON-RPC message as
/// UTF-8 text.
#[derive(Clone, PartialEq, prost::Message)]
pub struct JsonRpcMessage {
    #[prost(bytes = "vec", tag = "1")]
    pub jsonrpc: Vec<u8>,
}

impl JsonRpcMessage {
    /// The message holding `value` as JSON text.
    pub fn from_json(value: &Value) -> Self {
        Self {
            jsonrpc: value.to_string().into_bytes(),
        }
    }
}

/// Serves the tunnel on `listener` until the process ends.
pub async fn serve(listener: TcpListener) -> Result<(), tonic::transport::Error> {
    serve_with_shutdown(listener, std::future::pending()).await
}

/// Serves the tunnel on `listener` until `signal` completes, then lets the
/// calls in progress finish.
pub async fn serve_with_shutdown(
    listener: TcpListener,
    signal: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    // `Server::serve` sets TCP_NODELAY on accepted sockets; do the same.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(McpServer::new())
        .serve_with_incoming_shutdown(incoming, signal)
        .await
}

/// The `mcp.zig.transport.v1.Mcp` service, for a tonic `Server` or `Router`.
#[derive(Debug, Clone)]
pub struct McpServer {
    inner: Arc<Mcp>,
}

impl McpServer {
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mcp::new()),
        }
    }
}

impl Default for McpServer {
    fn default() -> Self {
        Self::new()
    }
}

impl NamedService for McpServer {
    const NAME: &'static str = SERVICE;
}

impl<B> Service<http::Request<B>> for McpServer
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != CALL_PATH {
            return Box::pin(async { Ok(Status::unimplemented("unknown method").into_http()) });
        }
        let method = CallMethod(Arc::clone(&self.inner));
        Box::pin(async move {
            let codec = ProstCodec::<JsonRpcMessage, JsonRpcMessage>::default();
            Ok(Grpc::new(codec).server_streaming(method, req).await)
        })
    }
}

/// The `Call` method, as tonic's server-streaming handler.
struct CallMethod(Arc<Mcp>);

impl ServerStreamingService<JsonRpcMessage> for CallMethod {
    type Response = JsonRpcMessage;
    type ResponseStream = BoxStream<JsonRpcMessage>;
    type Future = BoxFuture<Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: Request<JsonRpcMessage>) -> Self::Future {
        let mcp = Arc::clone(&self.0);
        Box::pin(async move { mcp.call(request).map(Response::new) })
    }
}

/// A JSON-RPC error: where the binding puts it decides how it travels.
struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    fn response(&self, id: &Value) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        json!({"jsonrpc": "2.0", "id": id, "error": error})
    }

    /// The call's end with headers only: the gRPC status of the binding's
    /// map, `mcp-error-code`, and the error response in `mcp-error-bin`.
    fn into_status(self, id: &Value) -> Status {
        let code = match self.code {
            METHOD_NOT_FOUND => Code::Unimplemented,
            PARSE_ERROR
            | INVALID_REQUEST
            | INVALID_PARAMS
            | HEADER_MISMATCH
            | UNSUPPORTED_PROTOCOL_VERSION => Code::InvalidArgument,
            _ => Code::Internal,
        };
        let mut metadata = MetadataMap::new();
        metadata.insert("mcp-error-code", MetadataValue::from(self.code));
        let bin = self.response(id).to_string();
        if bin.len() <= MAX_ERROR_BIN {
            metadata.insert_bin("mcp-error-bin", MetadataValue::from_bytes(bin.as_bytes()));
        }
        Status::with_metadata(code, self.message, metadata)
    }
}

/// The MCP side: the fixed results, and one function per method.
#[derive(Debug)]
struct Mcp {
    /// `_meta` of every result.
    result_meta: Value,
    discover: Value,
    tools_list: Value,
}

impl Mcp {
    fn new() -> Self {
        let result_meta = json!({
            KEY_SERVER_INFO: {"name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION")}
        });
        let discover = json!({
            "resultType": "complete",
            "supportedVersions": [PROTOCOL_VERSION],
            "capabilities": {"tools": {}},
            "instructions": "A tonic server of MCP over the gRPC tunnel binding.",
            "ttlMs": 3_600_000,
            "cacheScope": "public",
            "_meta": result_meta,
        });
        let tools_list = json!({
            "resultType": "complete",
            "tools": [
                {
                    "name": "echo",
                    "description": "Returns its text.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"text": {"type": "string"}},
                        "required": ["text"],
                    },
                },
                {
                    "name": "progress",
                    "description": "Sends `steps` progress notifications, `delay_ms` apart, then a result.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {
                            "steps": {"type": "integer", "minimum": 0},
                            "delay_ms": {"type": "integer", "minimum": 0},
                        },
                    },
                },
            ],
            "ttlMs": 0,
            "cacheScope": "public",
            "_meta": result_meta,
        });
        Self {
            result_meta,
            discover,
            tools_list,
        }
    }

    /// One call: the response stream, or the status that ends it with
    /// headers only.
    fn call(&self, request: Request<JsonRpcMessage>) -> Result<BoxStream<JsonRpcMessage>, Status> {
        let deadline = grpc_timeout(request.metadata()).and_then(|t| Instant::now().checked_add(t));
        let (metadata, _, message) = request.into_parts();
        let body: Value = serde_json::from_slice(&message.jsonrpc)
            .map_err(|_| RpcError::new(PARSE_ERROR, "Parse error").into_status(&Value::Null))?;
        let Some(obj) = body.as_object() else {
            return Err(RpcError::new(INVALID_REQUEST, "Invalid request").into_status(&Value::Null));
        };
        let id = obj.get("id").cloned().unwrap_or(Value::Null);
        let method = match obj.get("method") {
            Some(Value::String(m))
                if obj.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
                    && valid_id(obj.get("id")) =>
            {
                m.as_str()
            }
            _ => return Err(RpcError::new(INVALID_REQUEST, "Invalid request").into_status(&id)),
        };
        if !obj.contains_key("id") {
            // A notification: nothing to answer.
            return Ok(Box::pin(tokio_stream::empty()));
        }
        let params = obj.get("params").and_then(Value::as_object);
        match check_request(method, params, &metadata) {
            Ok(()) => {}
            Err(Checked::Early(e)) => return Err(e.into_status(&id)),
            Err(Checked::InBand(e)) => return Ok(one(e.response(&id))),
        }
        let no_params = Map::new();
        let params = params.unwrap_or(&no_params);
        let answer = match method {
            "server/discover" => Ok(self.discover.clone()),
            "tools/list" => Ok(self.tools_list.clone()),
            "tools/call" => return Ok(self.tools_call(id, params, deadline)),
            _ => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            )),
        };
        Ok(one(match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => e.response(&id),
        }))
    }

    fn tools_call(
        &self,
        id: Value,
        params: &Map<String, Value>,
        deadline: Option<Instant>,
    ) -> BoxStream<JsonRpcMessage> {
        let empty = Value::Object(Map::new());
        let arguments = params.get("arguments").unwrap_or(&empty);
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        let outcome = match name {
            "echo" => match arguments.get("text") {
                Some(Value::String(text)) => Ok(text.clone()),
                _ => Err(RpcError::new(INVALID_PARAMS, "text must be a string")),
            },
            "progress" => match (
                count(arguments, "steps", 3),
                count(arguments, "delay_ms", 100),
            ) {
                (Some(steps), Some(delay_ms)) => {
                    let token = params
                        .get("_meta")
                        .and_then(|m| m.get("progressToken"))
                        .cloned();
                    let run = Progress {
                        id,
                        token,
                        steps,
                        delay: Duration::from_millis(delay_ms),
                        deadline,
                        result_meta: self.result_meta.clone(),
                    };
                    return run.start();
                }
                _ => Err(RpcError::new(
                    INVALID_PARAMS,
                    "steps and delay_ms must be non-negative integers",
                )),
            },
            _ => Err(RpcError::new(
                INVALID_PARAMS,
                format!("Unknown tool: {name}"),
            )),
        };
        one(match outcome {
            Ok(text) => json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "complete",
                "content": [{"type": "text", "text": text}],
                "_meta": self.result_meta,
            }}),
            Err(e) => e.response(&id),
        })
    }
}

/// One run of the `progress` tool, in its own task.
struct Progress {
    id: Value,
    token: Option<Value>,
    steps: u64,
    delay: Duration,
    deadline: Option<Instant>,
    result_meta: Value,
}

type Sender = mpsc::Sender<Result<JsonRpcMessage, Status>>;

impl Progress {
    fn start(self) -> BoxStream<JsonRpcMessage> {
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            let deadline = self.deadline;
            let run = self.run(&tx);
            let finished = match deadline {
                Some(at) => tokio::time::timeout_at(at, run).await.is_ok(),
                None => {
                    run.await;
                    true
                }
            };
            if !finished {
                let _ = tx
                    .send(Err(Status::deadline_exceeded("deadline exceeded")))
                    .await;
            }
        });
        Box::pin(ReceiverStream::new(rx))
    }

    /// Sends the notifications and the result; stops early when the client
    /// is gone (its reset drops the response stream).
    async fn run(self, tx: &Sender) {
        let steps = self.steps;
        // Without a token nor a delay a step does nothing: skip them rather
        // than spin.
        if self.token.is_some() || !self.delay.is_zero() {
            for i in 1..=steps {
                if !self.step(tx, i).await {
                    return;
                }
            }
        }
        let result = json!({"jsonrpc": "2.0", "id": self.id, "result": {
            "resultType": "complete",
            "content": [{"type": "text", "text": format!("done after {steps} steps")}],
            "_meta": self.result_meta,
        }});
        let _ = tx.send(Ok(JsonRpcMessage::from_json(&result))).await;
    }

    /// Step `i`: the delay, then the notification; `false` when the client
    /// is gone.
    async fn step(&self, tx: &Sender, i: u64) -> bool {
        if !self.delay.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(self.delay) => {}
                () = tx.closed() => return false,
            }
        }
        let Some(token) = &self.token else {
            return true;
        };
        let steps = self.steps;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": token,
            "progress": i,
            "total": steps,
            "message": format!("step {i} of {steps}"),
        }});
        tx.send(Ok(JsonRpcMessage::from_json(&note))).await.is_ok()
    }
}

/// A stream of one message.
fn one(value: Value) -> BoxStream<JsonRpcMessage> {
    Box::pin(tokio_stream::once(Ok(JsonRpcMessage::from_json(&value))))
}

/// A request id is a string or an integer, never null (absent: a
/// notification).
fn valid_id(id: Option<&Value>) -> bool {
    match id {
        None | Some(Value::String(_)) => true,
        Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
        Some(_) => false,
    }
}

/// A non-negative integer argument, `default` when absent.
fn count(arguments: &Value, key: &str, default: u64) -> Option<u64> {
    match arguments.get(key) {
        None | Some(Value::Null) => Some(default),
        Some(v) => v.as_u64(),
    }
}

/// How a request failed its checks.
enum Checked {
    /// Before the request runs: headers-only trailers.
    Early(RpcError),
    /// A response message, then `grpc-status: 0`.
    InBand(RpcError),
}

/// The checks of `_meta` and of the mirrored metadata (MCP 2026-07-28
/// §3.3, §5.6, in its order; the binding verifies the metadata against the
/// body with the HTTP rules).
fn check_request(
    method: &str,
    params: Option<&Map<String, Value>>,
    metadata: &MetadataMap,
) -> Result<(), Checked> {
    let mismatch = |what: &str| Checked::Early(RpcError::new(HEADER_MISMATCH, what.to_owned()));
    let meta = params.and_then(|p| p.get("_meta"));
    let body_version = meta
        .and_then(|m| m.get(KEY_VERSION))
        .and_then(Value::as_str);
    let header_version = header(metadata, "mcp-protocol-version");
    let Some(version) = body_version else {
        if header_version == Some(PROTOCOL_VERSION) {
            return Err(Checked::InBand(RpcError::new(
                INVALID_PARAMS,
                "params._meta needs protocolVersion and clientCapabilities",
            )));
        }
        let mut data = json!({"supported": [PROTOCOL_VERSION]});
        if let Some(requested) = header_version {
            data["requested"] = json!(requested);
        }
        return Err(Checked::Early(
            RpcError::new(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
                .with_data(data),
        ));
    };
    if header_version.is_some_and(|h| h != version) {
        return Err(mismatch("mcp-protocol-version differs from the body"));
    }
    if version != PROTOCOL_VERSION {
        return Err(Checked::Early(
            RpcError::new(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
                .with_data(json!({"supported": [PROTOCOL_VERSION], "requested": version})),
        ));
    }
    if !meta
        .and_then(|m| m.get(KEY_CAPABILITIES))
        .is_some_and(Value::is_object)
    {
        return Err(Checked::InBand(RpcError::new(
            INVALID_PARAMS,
            "params._meta needs protocolVersion and clientCapabilities",
        )));
    }
    if header_version.is_none() {
        return Err(mismatch("mcp-protocol-version is missing"));
    }
    if header(metadata, "mcp-method") != Some(method) {
        return Err(mismatch("mcp-method is missing or differs from the body"));
    }
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(body_name) = name_key
        .and_then(|k| params.and_then(|p| p.get(k)))
        .and_then(Value::as_str)
    {
        let header_name = header(metadata, "mcp-name").and_then(decode_header_value);
        if header_name.as_deref() != Some(body_name) {
            return Err(mismatch("mcp-name is missing or differs from the body"));
        }
    }
    Ok(())
}

/// A metadata value as text: visible ASCII (and tab), surrounding blanks
/// dropped; `None` when absent or not valid.
fn header<'m>(metadata: &'m MetadataMap, name: &str) -> Option<&'m str> {
    let value = metadata.get(name)?.to_str().ok()?;
    Some(value.trim_matches([' ', '\t']))
}

/// A mirrored value: `=?base64?…?=` decoded, a plain value as it is.
fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(payload) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(payload)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_owned()),
    }
}

/// The `grpc-timeout` of a request (gRPC over HTTP/2: up to 8 digits and a
/// unit); `None` when absent or not valid.
fn grpc_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let text = metadata.get("grpc-timeout")?.to_str().ok()?;
    let split = text.len().checked_sub(1)?;
    let (digits, unit) = text.split_at_checked(split)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout_of(text: &'static str) -> Option<Duration> {
        let mut m = MetadataMap::new();
        m.insert("grpc-timeout", MetadataValue::from_static(text));
        grpc_timeout(&m)
    }

    #[test]
    fn grpc_timeout_units() {
        assert_eq!(timeout_of("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(timeout_of("3M"), Some(Duration::from_secs(180)));
        assert_eq!(timeout_of("200m"), Some(Duration::from_millis(200)));
        assert_eq!(
            timeout_of("99999999u"),
            Some(Duration::from_micros(99_999_999))
        );
        assert_eq!(timeout_of("5n"), Some(Duration::from_nanos(5)));
        assert_eq!(timeout_of("123456789S"), None);
        assert_eq!(timeout_of("m"), None);
        assert_eq!(timeout_of("-1S"), None);
        assert_eq!(timeout_of("10x"), None);
    }

    #[test]
    fn mirrored_values_decode() {
        assert_eq!(decode_header_value("echo").as_deref(), Some("echo"));
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(),
            Some("Hello, 世界")
        );
        assert_eq!(decode_header_value("=?base64??=").as_deref(), Some(""));
        assert_eq!(decode_header_value("=?base64?%%?="), None);
        assert_eq!(
            decode_header_value("=?BASE64?eA==?=").as_deref(),
            Some("=?BASE64?eA==?=")
        );
    }
}
