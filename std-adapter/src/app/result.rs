//! What a handler returns, and its JSON: tool results and their content
//! blocks, prompt results and messages, resource contents, completions,
//! and handler errors.

use mcpwire_core::grpc::base64;
use mcpwire_core::mcp::error::{
    INTERNAL_ERROR, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY,
};
use mcpwire_core::mcp::server::Failure;
use serde_json::{Map, Value, json};

/// A content block of a tool result.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// Any other block (image, audio, resource link), as its JSON.
    Json(Value),
}

impl Content {
    /// An `image` block: `data` base64-encoded, of type `mime_type`.
    pub fn image(data: &[u8], mime_type: &str) -> Self {
        Self::Json(json!({"type": "image", "data": base64_text(data), "mimeType": mime_type}))
    }

    /// An `audio` block: `data` base64-encoded, of type `mime_type`.
    pub fn audio(data: &[u8], mime_type: &str) -> Self {
        Self::Json(json!({"type": "audio", "data": base64_text(data), "mimeType": mime_type}))
    }

    /// An embedded `resource` block holding the text of `uri`.
    pub fn resource_text(uri: &str, mime_type: &str, text: &str) -> Self {
        Self::Json(json!({"type": "resource",
            "resource": {"uri": uri, "mimeType": mime_type, "text": text}}))
    }

    pub(crate) fn to_json(&self) -> Value {
        match self {
            Self::Text(text) => json!({"type": "text", "text": text}),
            Self::Json(v) => v.clone(),
        }
    }

    /// [`to_json`](Self::to_json)'s text, written straight to `out`.
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Self::Text(text) => {
                out.extend_from_slice(b"{\"text\":");
                write_json(out, text);
                out.extend_from_slice(b",\"type\":\"text\"}");
            }
            Self::Json(v) => write_json(out, v),
        }
    }
}

/// What a tool returns: a complete result, or a request for more input
/// (multi round-trip, MCP §9).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResult {
    Complete {
        content: Vec<Content>,
        structured: Option<Value>,
        /// The tool failed; the model sees the content (not a protocol error).
        is_error: bool,
    },
    /// `resultType: "input_required"`: the client answers `input_requests`
    /// (key → `{method, params}`) and calls again with `inputResponses` and
    /// `request_state` echoed.
    InputRequired {
        input_requests: Map<String, Value>,
        request_state: Option<String>,
    },
}

impl ToolResult {
    /// One text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Complete {
            content: vec![Content::Text(text.into())],
            structured: None,
            is_error: false,
        }
    }

    /// A tool-level failure the model sees as text.
    pub fn error_text(text: impl Into<String>) -> Self {
        Self::Complete {
            content: vec![Content::Text(text.into())],
            structured: None,
            is_error: true,
        }
    }

    /// Content blocks of any kind.
    pub fn content(content: Vec<Content>) -> Self {
        Self::Complete {
            content,
            structured: None,
            is_error: false,
        }
    }

    /// Structured content, with its JSON text as the text block.
    pub fn structured(value: Value) -> Self {
        Self::Complete {
            content: vec![Content::Text(value.to_string())],
            structured: Some(value),
            is_error: false,
        }
    }

    /// Asks the client for input before the call can complete.
    pub fn input_required(
        input_requests: Map<String, Value>,
        request_state: impl Into<String>,
    ) -> Self {
        Self::InputRequired {
            input_requests,
            request_state: Some(request_state.into()),
        }
    }

    /// About the length of [`write_json`](Self::write_json)'s text, for
    /// the capacity of its buffer.
    pub(crate) fn size_hint(&self) -> usize {
        match self {
            Self::Complete { content, .. } => content
                .iter()
                .map(|c| match c {
                    Content::Text(t) => t.len() + t.len() / 8 + 32,
                    Content::Json(_) => 128,
                })
                .sum::<usize>()
                .saturating_add(64),
            Self::InputRequired { .. } => 256,
        }
    }

    /// [`to_json`](Self::to_json)'s text, written straight to `out` with no
    /// JSON tree in between (the members in the same order).
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        let Self::Complete {
            content,
            structured,
            is_error,
        } = self
        else {
            write_json(out, &self.to_json());
            return;
        };
        out.extend_from_slice(b"{\"content\":[");
        for (i, c) in content.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            c.write_json(out);
        }
        out.push(b']');
        if *is_error {
            out.extend_from_slice(b",\"isError\":true");
        }
        out.extend_from_slice(b",\"resultType\":\"complete\"");
        if let Some(s) = structured {
            out.extend_from_slice(b",\"structuredContent\":");
            write_json(out, s);
        }
        out.push(b'}');
    }

    pub(crate) fn to_json(&self) -> Value {
        match self {
            Self::Complete {
                content,
                structured,
                is_error,
            } => {
                let mut r = json!({
                    "resultType": "complete",
                    "content": content.iter().map(Content::to_json).collect::<Vec<_>>(),
                });
                if let Some(s) = structured {
                    r["structuredContent"] = s.clone();
                }
                if *is_error {
                    r["isError"] = Value::Bool(true);
                }
                r
            }
            Self::InputRequired {
                input_requests,
                request_state,
            } => input_required_json(input_requests, request_state.as_deref()),
        }
    }
}

/// An `InputRequiredResult` (MCP §9.1; never cached, so no `ttlMs`).
fn input_required_json(input_requests: &Map<String, Value>, request_state: Option<&str>) -> Value {
    let mut r = json!({"resultType": "input_required"});
    if !input_requests.is_empty() {
        r["inputRequests"] = Value::Object(input_requests.clone());
    }
    if let Some(state) = request_state {
        r["requestState"] = Value::from(state);
    }
    r
}

/// What a resource read returns: text, or bytes (sent base64-encoded as
/// `blob`). A handler may return a `String` for text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceContent {
    Text(String),
    Blob(Vec<u8>),
}

impl From<String> for ResourceContent {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for ResourceContent {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<Vec<u8>> for ResourceContent {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Blob(bytes)
    }
}

/// The result of `resources/read`: one content of `uri`, cacheable (MCP
/// §10.2: `ttlMs` and `cacheScope`, as the engine's list results).
pub(crate) fn resource_contents(
    uri: &str,
    mime_type: Option<&str>,
    content: ResourceContent,
) -> Value {
    let mut c = match content {
        ResourceContent::Text(text) => json!({"uri": uri, "text": text}),
        ResourceContent::Blob(bytes) => json!({"uri": uri, "blob": base64_text(&bytes)}),
    };
    if let Some(m) = mime_type {
        c["mimeType"] = Value::from(m);
    }
    json!({"resultType": "complete", "contents": [c], "ttlMs": 0, "cacheScope": "public"})
}

/// Who speaks a prompt message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// A message of a prompt: one content block (text, image, embedded
/// resource, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessage {
    pub role: Role,
    pub content: Content,
}

impl PromptMessage {
    /// A text message of the user.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, Content::Text(text.into()))
    }

    /// A text message of the assistant.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, Content::Text(text.into()))
    }

    /// A message of any content block.
    pub fn new(role: Role, content: Content) -> Self {
        Self { role, content }
    }
}

/// What a prompt returns: its messages, or a request for more input
/// (multi round-trip, MCP §9). A handler may return a
/// `Vec<PromptMessage>`.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptResult {
    Complete {
        description: Option<String>,
        messages: Vec<PromptMessage>,
    },
    /// As [`ToolResult::InputRequired`].
    InputRequired {
        input_requests: Map<String, Value>,
        request_state: Option<String>,
    },
}

impl From<Vec<PromptMessage>> for PromptResult {
    fn from(messages: Vec<PromptMessage>) -> Self {
        Self::Complete {
            description: None,
            messages,
        }
    }
}

impl PromptResult {
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Self::Complete {
                description,
                messages,
            } => {
                let messages: Vec<Value> = messages
                    .iter()
                    .map(|m| {
                        let role = match m.role {
                            Role::User => "user",
                            Role::Assistant => "assistant",
                        };
                        json!({"role": role, "content": m.content.to_json()})
                    })
                    .collect();
                let mut r = json!({"resultType": "complete", "messages": messages});
                if let Some(d) = description {
                    r["description"] = Value::from(d.as_str());
                }
                r
            }
            Self::InputRequired {
                input_requests,
                request_state,
            } => input_required_json(input_requests, request_state.as_deref()),
        }
    }
}

/// What a completion handler returns (`completion/complete`): at most 100
/// values are sent; more set `hasMore`. A handler may return a
/// `Vec<String>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    pub values: Vec<String>,
    /// How many values there are in all, when known.
    pub total: Option<u64>,
    pub has_more: bool,
}

impl From<Vec<String>> for Completion {
    fn from(values: Vec<String>) -> Self {
        Self {
            values,
            ..Self::default()
        }
    }
}

impl Completion {
    /// Values the result may carry (MCP §10).
    pub const MAX_VALUES: usize = 100;

    pub(crate) fn to_json(&self) -> Value {
        let has_more = self.has_more || self.values.len() > Self::MAX_VALUES;
        let values = &self.values[..self.values.len().min(Self::MAX_VALUES)];
        let mut c = json!({"values": values});
        if let Some(total) = self.total {
            c["total"] = Value::from(total);
        }
        if has_more {
            c["hasMore"] = Value::Bool(true);
        }
        json!({"resultType": "complete", "completion": c})
    }
}

/// A JSON-RPC error answer of a handler (an error response, then
/// `grpc-status: 0`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub code: i32,
    pub message: String,
    pub data: Option<Value>,
}

impl ToolError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// -32602.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// -32603.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// -32021: the request needs client capabilities it did not declare;
    /// `required` is a `ClientCapabilities` object naming them (MCP §3.3:
    /// `{"sampling": {}}`, not an array).
    pub fn missing_capability(required: Value) -> Self {
        Self {
            code: MISSING_REQUIRED_CLIENT_CAPABILITY,
            message: "Missing required client capability".to_owned(),
            data: Some(json!({"requiredCapabilities": required})),
        }
    }
}

/// The core's words for a driver-side failure.
impl From<Failure> for ToolError {
    fn from(failure: Failure) -> Self {
        let e = failure.error();
        Self::new(e.code, e.message)
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ToolError {}

/// Appends `v` as JSON text. Serializing a `Value` or a `str` into a `Vec`
/// cannot fail.
pub(crate) fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let _ = serde_json::to_writer(out, v);
}

/// A value as JSON text (serde_json's writer, not its `Display`).
pub(crate) fn json_bytes(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_json(&mut out, v);
    out
}

/// Standard padded base64 of `bytes`.
pub(crate) fn base64_text(bytes: &[u8]) -> String {
    let mut out = vec![0; base64::encoded_len(bytes.len())];
    let n = base64::encode(bytes, &mut out).unwrap_or(0);
    out.truncate(n);
    // The alphabet is ASCII.
    String::from_utf8(out).unwrap_or_default()
}

/// Integers print as integers (`3`, not `3.0`).
pub(crate) fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_carry_their_result_type() {
        let r = ToolResult::structured(json!({"a": 1})).to_json();
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["structuredContent"], json!({"a": 1}));
        assert_eq!(r["content"][0]["text"], "{\"a\":1}");
        let r = ToolResult::input_required(Map::new(), "s").to_json();
        assert_eq!(
            r,
            json!({"resultType": "input_required", "requestState": "s"})
        );
        let r = resource_contents("mem://a", Some("text/plain"), "t".into());
        assert_eq!(r["contents"][0]["mimeType"], "text/plain");
        assert_eq!(
            (&r["ttlMs"], &r["cacheScope"]),
            (&json!(0), &json!("public"))
        );
        let r = resource_contents("mem://b", None, vec![0xff, 0, 1].into());
        assert_eq!(r["contents"][0]["blob"], "/wAB");
        let r = PromptResult::from(vec![PromptMessage::assistant("hi")]).to_json();
        assert_eq!(r["messages"][0]["role"], "assistant");
        assert_eq!(r["messages"][0]["content"]["text"], "hi");
        let r = Completion::from((0..150).map(|i| i.to_string()).collect::<Vec<_>>()).to_json();
        assert_eq!(
            r["completion"]["values"].as_array().map(Vec::len),
            Some(100)
        );
        assert_eq!(r["completion"]["hasMore"], true);
        let e = ToolError::missing_capability(json!({"sampling": {}}));
        assert_eq!(e.code, -32021);
        assert_eq!(
            e.data,
            Some(json!({"requiredCapabilities": {"sampling": {}}}))
        );
        assert_eq!(number(3.0), json!(3));
        assert_eq!(number(0.5), json!(0.5));
    }
}
