//! The typed helpers of a [`StdioChannel`], as those of
//! [`Channel`](crate::Channel): tools listed (every page) and called, with
//! progress. A JSON-RPC error response is an `Err` whose
//! [`CallError::rpc`] holds it; a tool's own failure (`isError`) is an
//! ordinary [`CallToolResult`].

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::error::grpc_code;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{StdioChannel, error};
use crate::channel::{
    CallError, CallToolResult, JsonRpcError, MAX_LIST_PAGES, Progress, StreamMessage, Tool,
};

impl StdioChannel {
    /// Every tool of the server (`tools/list`, all pages).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, CallError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = match cursor.take() {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let result = result_of(self.request("tools/list", params).await?)?;
            let Some(items) = result.get("tools").and_then(Value::as_array) else {
                return Err(error(Code::Internal, "tools/list: no tools array"));
            };
            for t in items {
                tools.push(Tool {
                    name: t
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| error(Code::Internal, "a tool without a name"))?
                        .to_owned(),
                    title: string(t, "title"),
                    description: string(t, "description"),
                    input_schema: t.get("inputSchema").cloned().unwrap_or(json!({})),
                    output_schema: t.get("outputSchema").cloned(),
                    annotations: t.get("annotations").cloned(),
                });
            }
            match result.get("nextCursor") {
                Some(Value::String(c)) => cursor = Some(c.clone()),
                _ => return Ok(tools),
            }
        }
        Err(error(
            Code::Internal,
            format!("tools/list: more than {MAX_LIST_PAGES} pages"),
        ))
    }

    /// Calls tool `name` with `arguments` (a struct or map that serializes
    /// to a JSON object; `()` for none).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<CallToolResult, CallError> {
        let params = named_params(name, arguments)?;
        let response = self.request("tools/call", params).await?;
        call_tool_result(&result_of(response)?)
    }

    /// [`StdioChannel::call_tool`] asking for progress: `on_progress` sees
    /// each `notifications/progress` of the call as it arrives.
    pub async fn call_tool_with_progress(
        &self,
        name: &str,
        arguments: impl Serialize,
        mut on_progress: impl FnMut(Progress),
    ) -> Result<CallToolResult, CallError> {
        let mut params = named_params(name, arguments)?;
        let token = format!(
            "mcpwire-{}",
            self.inner
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        params["_meta"] = json!({"progressToken": token});
        let mut call = self
            .call(json!({"method": "tools/call", "params": params}))
            .await?;
        loop {
            match call.next().await? {
                Some(StreamMessage::Notification(n)) => {
                    if let Some(p) = progress(&n, &token) {
                        on_progress(p);
                    }
                }
                Some(StreamMessage::Response(r)) => return call_tool_result(&result_of(r)?),
                None => return Err(error(Code::Internal, "the call ended without a response")),
            }
        }
    }
}

fn named_params(name: &str, arguments: impl Serialize) -> Result<Value, CallError> {
    let arguments = serde_json::to_value(arguments)
        .map_err(|e| error(Code::InvalidArgument, format!("arguments: {e}")))?;
    let mut params = Map::new();
    params.insert("name".into(), json!(name));
    match arguments {
        Value::Null => {}
        Value::Object(_) => {
            params.insert("arguments".into(), arguments);
        }
        _ => return Err(error(Code::InvalidArgument, "arguments are a JSON object")),
    }
    Ok(Value::Object(params))
}

fn result_of(mut response: Value) -> Result<Value, CallError> {
    if let Some(e) = response.get("error") {
        let code = e.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = string(e, "message").unwrap_or_default();
        let status = i32::try_from(code).map_or(Code::Internal, grpc_code);
        let mut err = error(status, message.clone());
        err.rpc = Some(Box::new(JsonRpcError {
            code,
            message,
            data: e.get("data").cloned(),
        }));
        return Err(err);
    }
    match response.get_mut("result") {
        Some(result) if result.is_object() => Ok(result.take()),
        _ => Err(error(Code::Internal, "a response without a result object")),
    }
}

fn call_tool_result(result: &Value) -> Result<CallToolResult, CallError> {
    let content = match result.get("content") {
        None => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err(error(Code::Internal, "content is not an array")),
    };
    Ok(CallToolResult {
        content,
        structured_content: result.get("structuredContent").cloned(),
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
        meta: result.get("_meta").cloned(),
    })
}

fn progress(n: &Value, token: &str) -> Option<Progress> {
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

fn string(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}
