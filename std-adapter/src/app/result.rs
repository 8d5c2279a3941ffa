//! What a handler returns, and its JSON: tool results and their content
//! blocks, prompt messages, resource contents, and handler errors.

use mcpwire_core::mcp::error::{INTERNAL_ERROR, INVALID_PARAMS};
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
    fn to_json(&self) -> Value {
        match self {
            Self::Text(text) => json!({"type": "text", "text": text}),
            Self::Json(v) => v.clone(),
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
            } => {
                let mut r = json!({"resultType": "input_required"});
                if !input_requests.is_empty() {
                    r["inputRequests"] = Value::Object(input_requests.clone());
                }
                if let Some(state) = request_state {
                    r["requestState"] = Value::from(state.as_str());
                }
                r
            }
        }
    }
}

/// The result of `resources/read` for a text resource.
pub(crate) fn resource_contents(uri: &str, mime_type: Option<&str>, text: String) -> Value {
    let mut content = json!({"uri": uri, "text": text});
    if let Some(m) = mime_type {
        content["mimeType"] = Value::from(m);
    }
    json!({"resultType": "complete", "contents": [content]})
}

/// Who speaks a prompt message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// A text message of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptMessage {
    pub role: Role,
    pub text: String,
}

impl PromptMessage {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            text: text.into(),
        }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            text: text.into(),
        }
    }
}

/// The result of `prompts/get`.
pub(crate) fn prompt_result(messages: Vec<PromptMessage>) -> Value {
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({"role": role, "content": {"type": "text", "text": m.text}})
        })
        .collect();
    json!({"resultType": "complete", "messages": messages})
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
        let r = prompt_result(vec![PromptMessage::assistant("hi")]);
        assert_eq!(r["messages"][0]["role"], "assistant");
        assert_eq!(number(3.0), json!(3));
        assert_eq!(number(0.5), json!(0.5));
    }
}
