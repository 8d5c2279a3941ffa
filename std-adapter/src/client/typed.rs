//! The typed client helpers of a [`Client`](super::Client): MCP's tool,
//! resource and prompt methods (MCP 2026-07-28 §6–§8) with Rust types in
//! and out, so an application never writes JSON-RPC by hand. The
//! request's `_meta` (protocol version, client capabilities) is the
//! client's, as for [`Client::request`](super::Client::request); list
//! methods follow `nextCursor` to the last page.
//!
//! A JSON-RPC error response is an `Err` whose [`CallError::rpc`] holds
//! its code, message and data; a tool's own failure (`isError: true`) is
//! an ordinary [`CallToolResult`].

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::client::pages::{PageError, Pages, write_page_params};
use mcpwire_core::mcp::error::grpc_code;
use mcpwire_core::mcp::writer::JsonWriter;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::CallError;

/// Pages a list method reads at most: a server whose cursors never end
/// fails the call instead of looping (the core's limit).
pub use mcpwire_core::mcp::client::MAX_LIST_PAGES;

/// A walk over the pages of one list by the core's rule
/// ([`Pages`]): each page's `nextCursor` read, the next page's `params`
/// built from the first page's; the walker only gathers the items.
#[derive(Debug, Default)]
pub(crate) struct PageWalk {
    pages: Pages,
}

impl PageWalk {
    /// The `params` of the page after `result` (a page of `method`, asked
    /// with `params`), or `None` after the last; an error for a
    /// `nextCursor` that is not a cursor and past [`MAX_LIST_PAGES`].
    pub(crate) fn next(
        &mut self,
        method: &str,
        params: &Value,
        result: &Value,
    ) -> Result<Option<Value>, CallError> {
        let next = result.get("nextCursor").map(Value::to_string);
        let cursor = match self.pages.next_cursor(next.as_deref().map(str::as_bytes)) {
            Ok(Some(cursor)) => cursor,
            Ok(None) => return Ok(None),
            Err(PageError::TooManyPages { max }) => {
                return Err(CallError::new(
                    Code::Internal,
                    format!("{method}: more than {max} pages"),
                ));
            }
            Err(e) => {
                return Err(CallError::new(
                    Code::Internal,
                    format!("{method}: {}", e.reason()),
                ));
            }
        };
        let params = params.to_string();
        let mut out = vec![0; params.len() + cursor.len() + 16];
        let mut w = JsonWriter::new(&mut out);
        write_page_params(&mut w, params.as_bytes(), cursor);
        w.finish()
            .ok()
            .and_then(|text| serde_json::from_slice(text).ok())
            .map(Some)
            .ok_or_else(|| {
                CallError::new(Code::Internal, format!("{method}: the next page's params"))
            })
    }
}

/// The JSON-RPC error a server answered a request with.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonRpcError {
    pub code: i64,
    pub message: String,
    /// `error.data`, when present.
    pub data: Option<Value>,
}

/// A tool, as `tools/list` describes it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Tool {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// The JSON Schema of the arguments (`{}` when the server gave none).
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub annotations: Option<Value>,
}

/// What a `tools/call` returned: the tool's result, or its own failure
/// (`is_error`, with the account in `content`).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct CallToolResult {
    /// The content blocks (`{"type": "text", "text": ...}`, images, ...).
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    /// The tool reported a failure.
    pub is_error: bool,
    /// The result's `_meta`, when present.
    pub meta: Option<Value>,
}

impl CallToolResult {
    /// The text of the `text` content blocks, one per line.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect();
        texts.join("\n")
    }

    /// The `structuredContent` as a `T`.
    pub fn structured<T: DeserializeOwned>(&self) -> Result<T, CallError> {
        let Some(value) = self.structured_content.as_ref() else {
            return Err(CallError::new(
                Code::Internal,
                "the result has no structuredContent",
            ));
        };
        T::deserialize(value).map_err(|e| {
            CallError::new(
                Code::Internal,
                format!("structuredContent does not fit the type: {e}"),
            )
        })
    }
}

/// A `notifications/progress` of a call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// A resource, as `resources/list` describes it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Resource {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// One item of a `resources/read` result: `text` or `blob` (base64).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResourceContents {
    pub uri: String,
    pub mime_type: Option<String>,
    pub text: Option<String>,
    pub blob: Option<String>,
}

/// A prompt, as `prompts/list` describes it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Prompt {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgument>,
}

#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PromptArgument {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
}

/// What `prompts/get` returned.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GetPromptResult {
    pub description: Option<String>,
    /// The messages (`{"role": ..., "content": {...}}`).
    pub messages: Vec<Value>,
}

/// `{"name", "arguments"}` of `tools/call` and `prompts/get`.
pub(crate) fn named_params(name: &str, arguments: impl Serialize) -> Result<Value, CallError> {
    let arguments = serde_json::to_value(arguments)
        .map_err(|e| CallError::invalid_request(&format!("arguments: {e}")))?;
    let mut params = Map::new();
    params.insert("name".into(), json!(name));
    match arguments {
        Value::Null => {}
        Value::Object(_) => {
            params.insert("arguments".into(), arguments);
        }
        _ => return Err(CallError::invalid_request("arguments are a JSON object")),
    }
    Ok(Value::Object(params))
}

/// The `result` of a response; its `error` as a [`CallError`].
pub(crate) fn result_of(mut response: Value) -> Result<Value, CallError> {
    if let Some(error) = response.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = string(error, "message").unwrap_or_default();
        let status = i32::try_from(code).map_or(Code::Internal, grpc_code);
        let mut e = CallError::new(status, message.clone());
        e.rpc = Some(Box::new(JsonRpcError {
            code,
            message,
            data: error.get("data").cloned(),
        }));
        return Err(e);
    }
    match response.get_mut("result") {
        Some(result) if result.is_object() => Ok(result.take()),
        _ => Err(CallError::new(
            Code::Internal,
            "a response without a result object",
        )),
    }
}

pub(crate) fn call_tool_result(result: &Value) -> Result<CallToolResult, CallError> {
    Ok(CallToolResult {
        content: match result.get("content") {
            None => Vec::new(),
            Some(_) => array(result, "content")?.clone(),
        },
        structured_content: result.get("structuredContent").cloned(),
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
        meta: result.get("_meta").cloned(),
    })
}

pub(crate) fn tool(value: &Value) -> Result<Tool, CallError> {
    Ok(Tool {
        name: required(value, "name")?,
        title: string(value, "title"),
        description: string(value, "description"),
        input_schema: value.get("inputSchema").cloned().unwrap_or(json!({})),
        output_schema: value.get("outputSchema").cloned(),
        annotations: value.get("annotations").cloned(),
    })
}

pub(crate) fn resource(r: &Value) -> Result<Resource, CallError> {
    Ok(Resource {
        uri: required(r, "uri")?,
        name: required(r, "name")?,
        title: string(r, "title"),
        description: string(r, "description"),
        mime_type: string(r, "mimeType"),
    })
}

pub(crate) fn prompt(p: &Value) -> Result<Prompt, CallError> {
    let arguments = match p.get("arguments") {
        Some(Value::Array(args)) => args
            .iter()
            .map(|a| {
                Ok(PromptArgument {
                    name: required(a, "name")?,
                    description: string(a, "description"),
                    required: a.get("required").and_then(Value::as_bool) == Some(true),
                })
            })
            .collect::<Result<_, CallError>>()?,
        _ => Vec::new(),
    };
    Ok(Prompt {
        name: required(p, "name")?,
        title: string(p, "title"),
        description: string(p, "description"),
        arguments,
    })
}

/// The progress of notification `n`, when it is about `token`.
pub(crate) fn progress(n: &Value, token: &str) -> Option<Progress> {
    if n.get("method")?.as_str()? != "notifications/progress" {
        return None;
    }
    let params = n.get("params")?;
    if params.get("progressToken")?.as_str()? != token {
        return None;
    }
    Some(Progress {
        progress: params.get("progress")?.as_f64()?,
        total: params.get("total").and_then(Value::as_f64),
        message: string(params, "message"),
    })
}

pub(crate) fn string(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

pub(crate) fn required(value: &Value, key: &str) -> Result<String, CallError> {
    string(value, key).ok_or_else(|| {
        CallError::new(
            Code::Internal,
            format!("an item of the result has no string {key:?}"),
        )
    })
}

pub(crate) fn array<'v>(value: &'v Value, key: &str) -> Result<&'v Vec<Value>, CallError> {
    value
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| CallError::new(Code::Internal, format!("the result has no array {key:?}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_error_response_is_a_call_error_with_code_message_and_data() {
        let e = result_of(json!({"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32602, "message": "bad", "data": {"field": "x"}}}))
        .unwrap_err();
        assert_eq!(e.status, Code::InvalidArgument);
        let rpc = e.rpc.unwrap();
        assert_eq!((rpc.code, rpc.message.as_str()), (-32602, "bad"));
        assert_eq!(rpc.data, Some(json!({"field": "x"})));
    }

    #[test]
    fn arguments_must_be_an_object() {
        assert!(named_params("t", 3).is_err());
        assert_eq!(named_params("t", ()).ok(), Some(json!({"name": "t"})));
    }

    #[test]
    fn progress_of_another_token_is_not_ours() {
        let n = json!({"method": "notifications/progress",
            "params": {"progressToken": "a", "progress": 1, "total": 2}});
        assert_eq!(progress(&n, "b"), None);
        assert_eq!(progress(&n, "a").map(|p| p.total), Some(Some(2.0)));
    }
}
