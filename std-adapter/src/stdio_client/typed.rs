//! The typed helpers of a [`StdioChannel`], as those of
//! [`Channel`](crate::Channel): tools listed (every page) and called, with
//! progress. A JSON-RPC error response is an `Err` whose
//! [`CallError::rpc`] holds it; a tool's own failure (`isError`) is an
//! ordinary [`CallToolResult`].

use mcpwire_core::grpc::Code;
use serde::Serialize;
use serde_json::{Value, json};

use super::{StdioChannel, error};
use crate::channel::typed::{call_tool_result, named_params, progress, result_of, tool};
use crate::channel::{CallError, CallToolResult, MAX_LIST_PAGES, Progress, StreamMessage, Tool};

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
                tools.push(tool(t)?);
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
