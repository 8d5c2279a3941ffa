//! What a call gives besides its result: [`CallError`] (a failure of the
//! transport, or from the typed helpers the server's JSON-RPC error or a
//! tool's failure) with its [`CallDiagnostics`]; the messages of a call
//! ([`StreamMessage`], or as text [`RawMessage`]); and the completion of a
//! request every transport sends alike.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::error::INVALID_REQUEST;
use mcpwire_core::mcp::json;
use mcpwire_core::mcp::meta::{KEY_CLIENT_CAPABILITIES, KEY_PROTOCOL_VERSION, PROTOCOL_VERSION};
use serde_json::{Map, Value, json};

use super::typed::{CallToolResult, JsonRpcError};

/// Why a call gave no result: a failure of the transport (the gRPC status,
/// and what is known of the response), or, from the typed helpers, the
/// server's JSON-RPC error ([`CallError::rpc`]) or a tool's failure
/// ([`CallError::tool_error`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// For a transport failure: UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED,
    /// UNAUTHENTICATED, PERMISSION_DENIED, INTERNAL (a broken response) or
    /// INVALID_ARGUMENT (a request refused before a byte went out, see
    /// `rpc_code`). For a JSON-RPC error, the status the binding gives its
    /// code (INVALID_ARGUMENT, UNIMPLEMENTED, INTERNAL); UNKNOWN for a
    /// tool's failure.
    pub status: Code,
    pub message: String,
    pub diagnostics: CallDiagnostics,
    /// The JSON-RPC error the server answered with (typed helpers only;
    /// [`Client::request`](super::Client::request) hands the error response back as a value).
    pub rpc: Option<Box<JsonRpcError>>,
    /// The result of a tool that reported a failure (`isError`), from
    /// [`Client::call_tool_typed`](super::Client::call_tool_typed), which has
    /// no `T` to give ([`Client::call_tool`](super::Client::call_tool)
    /// returns it as `Ok`).
    pub tool_error: Option<Box<CallToolResult>>,
}

/// What the response said about a failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallDiagnostics {
    /// The HTTP status of the response, when one came; 401 and 403 for the
    /// trailers UNAUTHENTICATED and PERMISSION_DENIED.
    pub http_status: Option<u16>,
    /// `grpc-message`, percent-decoded, or the core's account of a failure
    /// found by this end (a reset, a deadline, a broken response).
    pub grpc_message: Option<String>,
    /// `www-authenticate`, for the auth statuses.
    pub www_authenticate: Option<String>,
    /// The JSON-RPC code of a request refused before a byte went out
    /// (-32600 for an unsafe annotated integer).
    pub rpc_code: Option<i32>,
    /// The HTTP facts of a call over Streamable HTTP
    /// ([`Call::http_facts`](super::Call::http_facts)): URL, status,
    /// HTTP version, era and versions.
    pub http: Option<Box<super::HttpFacts>>,
}

impl CallError {
    pub(crate) fn new(status: Code, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            diagnostics: CallDiagnostics::default(),
            rpc: None,
            tool_error: None,
        }
    }

    pub(crate) fn invalid_request(message: &str) -> Self {
        let mut e = Self::new(Code::InvalidArgument, message);
        e.diagnostics.rpc_code = Some(INVALID_REQUEST);
        e
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)?;
        if let Some(s) = self.diagnostics.http_status {
            write!(f, " (HTTP {s})")?;
        }
        if let Some(rpc) = &self.rpc {
            write!(f, " (JSON-RPC {})", rpc.code)?;
        }
        Ok(())
    }
}

impl std::error::Error for CallError {}

/// One message of a call's response stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamMessage {
    /// A notification related to the request (progress, listen events).
    Notification(Value),
    /// The JSON-RPC response (a result or an error); the last message.
    Response(Value),
}

/// One message of a call's response stream as JSON text, as the client
/// engine validated it ([`Call::next_raw`](super::Call::next_raw)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawMessage {
    /// A notification related to the request (progress, listen events).
    Notification(Vec<u8>),
    /// The JSON-RPC response (a result or an error); the last message.
    Response(RawResponse),
}

/// A JSON-RPC response as its text, and where its `result` lies in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    text: Vec<u8>,
    result: Option<Range<usize>>,
}

impl RawResponse {
    /// A response's text, valid JSON (as a client engine checked it, or
    /// as written from a tree); its `result` is looked up here.
    pub fn new(text: Vec<u8>) -> Self {
        let result = json::get(&text, b"result").map(|r| json::span(&text, r));
        Self { text, result }
    }

    /// `text` with its `result` where the client engine found it.
    pub(crate) fn located(text: Vec<u8>, result: Option<Range<usize>>) -> Self {
        let result = result.filter(|r| text.get(r.clone()).is_some());
        Self { text, result }
    }

    /// The whole response.
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// The `result` member's value; `None` for an error response.
    pub fn result(&self) -> Option<&[u8]> {
        self.text.get(self.result.clone()?)
    }

    /// The whole response, owned.
    pub fn into_text(self) -> Vec<u8> {
        self.text
    }

    /// The `result` member's value, owned (the text around it dropped),
    /// or the whole response back when it has none.
    pub fn into_result(self) -> Result<Vec<u8>, Self> {
        let Some(range) = self.result.clone() else {
            return Err(self);
        };
        let mut text = self.text;
        text.truncate(range.end);
        text.drain(..range.start);
        Ok(text)
    }
}

/// Completes a JSON-RPC message as every channel sends it: `jsonrpc`, an
/// `id` for a request without one (from `next_id`), and in `params._meta`
/// the protocol version and `capabilities` where absent. Gives its method
/// and its `_meta` (for what a transport adds).
pub(crate) fn complete_request<'r>(
    request: &'r mut Value,
    next_id: &AtomicU64,
    capabilities: &Value,
) -> Result<(String, &'r mut Map<String, Value>), CallError> {
    let method = complete_id(request, next_id)?;
    let Some(obj) = request.as_object_mut() else {
        return Err(CallError::invalid_request("a request is a JSON object"));
    };
    let params = obj.entry("params").or_insert_with(|| json!({}));
    let Some(params) = params.as_object_mut() else {
        return Err(CallError::invalid_request("params is not an object"));
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return Err(CallError::invalid_request("params._meta is not an object"));
    };
    meta.entry(key(KEY_PROTOCOL_VERSION))
        .or_insert_with(|| json!(PROTOCOL_VERSION));
    meta.entry(key(KEY_CLIENT_CAPABILITIES))
        .or_insert_with(|| capabilities.clone());
    Ok((method, meta))
}

/// The server's -32022 to the era probe, naming `versions` (raw JSON
/// array) and none this client speaks: the error a start reports.
pub(crate) fn version_refusal(versions: &str, requested: &str) -> CallError {
    let supported: Value = serde_json::from_str(versions).unwrap_or(Value::Null);
    let rpc = super::JsonRpcError {
        code: i64::from(mcpwire_core::mcp::error::UNSUPPORTED_PROTOCOL_VERSION),
        message: "Unsupported protocol version".to_owned(),
        data: Some(json!({"supported": supported, "requested": requested})),
    };
    let mut e = CallError::new(Code::FailedPrecondition, rpc.message.clone());
    e.diagnostics.rpc_code = i32::try_from(rpc.code).ok();
    e.rpc = Some(Box::new(rpc));
    e
}

/// The `jsonrpc` member and an id (not for a notification) added to
/// `request` when it lacks them; its method.
pub(crate) fn complete_id(request: &mut Value, next_id: &AtomicU64) -> Result<String, CallError> {
    let Some(obj) = request.as_object_mut() else {
        return Err(CallError::invalid_request("a request is a JSON object"));
    };
    let method = obj
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| CallError::invalid_request("a request needs a method"))?;
    obj.entry("jsonrpc").or_insert_with(|| json!("2.0"));
    if !method.starts_with("notifications/") && !obj.contains_key("id") {
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        obj.insert("id".into(), json!(id));
    }
    Ok(method)
}

/// A `_meta` key of the core's, as a JSON object key.
fn key(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}
