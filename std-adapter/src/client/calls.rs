//! The typed calls of [`Client`]: each a request (or a call's stream of
//! messages) whose result is read into the host API's types.

use mcpwire_core::grpc::Code;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::typed::{
    PageWalk, array, call_tool_result, named_params, progress, prompt, required, resource,
    result_of, string, tool,
};
use super::{
    CallError, CallToolResult, Client, GetPromptResult, Progress, Prompt, Resource,
    ResourceContents, StreamMessage, Tool,
};

/// A process-wide counter for progress tokens.
fn next_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("mcpwire-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

impl Client {
    /// The server's `server/discover` result (a JSON-RPC error is an
    /// `Err` whose [`CallError::rpc`] holds it).
    pub async fn discover(&self) -> Result<Value, CallError> {
        result_of(self.request("server/discover", json!({})).await?)
    }

    /// Every tool of the server (`tools/list`, all pages).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, CallError> {
        let items = self.list_all("tools/list", "tools").await?;
        items.iter().map(tool).collect()
    }

    /// Calls tool `name` with `arguments` (a struct or map that serializes
    /// to a JSON object; `()` for none). A failure the tool reports is `Ok`
    /// with [`CallToolResult::is_error`].
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<CallToolResult, CallError> {
        let params = named_params(name, arguments)?;
        let response = self.request("tools/call", params).await?;
        call_tool_result(&result_of(response)?)
    }

    /// [`Self::call_tool`] for a tool with an output schema: its
    /// `structuredContent` as a `T`. A failure the tool reports is an error
    /// with [`CallError::tool_error`].
    pub async fn call_tool_typed<T: DeserializeOwned>(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<T, CallError> {
        let result = self.call_tool(name, arguments).await?;
        if result.is_error {
            let mut e = CallError::new(Code::Unknown, result.text());
            e.tool_error = Some(Box::new(result));
            return Err(e);
        }
        result.structured()
    }

    /// [`Self::call_tool`] asking for progress: `on_progress` sees each
    /// `notifications/progress` of the call as it arrives.
    pub async fn call_tool_with_progress(
        &self,
        name: &str,
        arguments: impl Serialize,
        mut on_progress: impl FnMut(Progress),
    ) -> Result<CallToolResult, CallError> {
        let mut params = named_params(name, arguments)?;
        let token = next_token();
        params["_meta"] = json!({"progressToken": token});
        let mut call = self
            .call(json!({"jsonrpc": "2.0", "method": "tools/call", "params": params}))
            .await?;
        loop {
            match call.next().await? {
                Some(StreamMessage::Notification(n)) => {
                    if let Some(p) = progress(&n, &token) {
                        on_progress(p);
                    }
                }
                Some(StreamMessage::Response(r)) => return call_tool_result(&result_of(r)?),
                None => {
                    return Err(CallError::new(
                        Code::Internal,
                        "the call ended without a response",
                    ));
                }
            }
        }
    }

    /// Every resource of the server (`resources/list`, all pages).
    pub async fn list_resources(&self) -> Result<Vec<Resource>, CallError> {
        let items = self.list_all("resources/list", "resources").await?;
        items.iter().map(resource).collect()
    }

    /// The contents of the resource at `uri` (`resources/read`).
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, CallError> {
        let result = result_of(self.request("resources/read", json!({"uri": uri})).await?)?;
        array(&result, "contents")?
            .iter()
            .map(|c| {
                Ok(ResourceContents {
                    uri: required(c, "uri")?,
                    mime_type: string(c, "mimeType"),
                    text: string(c, "text"),
                    blob: string(c, "blob"),
                })
            })
            .collect()
    }

    /// Every prompt of the server (`prompts/list`, all pages).
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, CallError> {
        let items = self.list_all("prompts/list", "prompts").await?;
        items.iter().map(prompt).collect()
    }

    /// Prompt `name` with `arguments` (string values; `()` for none).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<GetPromptResult, CallError> {
        let params = named_params(name, arguments)?;
        let result = result_of(self.request("prompts/get", params).await?)?;
        Ok(GetPromptResult {
            description: string(&result, "description"),
            messages: array(&result, "messages")?.clone(),
        })
    }

    /// The items under `key` of every page of a list method (raw JSON),
    /// at most [`MAX_LIST_PAGES`](super::MAX_LIST_PAGES) pages.
    pub async fn list_all(&self, method: &str, key: &str) -> Result<Vec<Value>, CallError> {
        let mut items = Vec::new();
        let mut walk = PageWalk::default();
        let mut params = json!({});
        loop {
            let result = result_of(self.request(method, params.clone()).await?)?;
            items.extend(array(&result, key)?.iter().cloned());
            match walk.next(method, &params, &result)? {
                Some(next) => params = next,
                None => return Ok(items),
            }
        }
    }
}
