//! The typed helpers of an [`HttpChannel`], those of
//! [`Channel`](crate::Channel): `server/discover`, tools listed (every
//! page) and called (with progress, or typed), resources and prompts
//! listed, read and got. A
//! JSON-RPC error response is an `Err` whose [`CallError::rpc`] holds it;
//! a tool's own failure (`isError`) is an ordinary [`CallToolResult`].

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{HttpCall, HttpChannel};
use crate::channel::calls::{self, CallMessages, Calls};
use crate::channel::{
    CallError, CallToolResult, GetPromptResult, Progress, Prompt, Resource, ResourceContents,
    StreamMessage, Tool,
};

impl HttpChannel {
    /// The server's `server/discover` result.
    pub async fn discover(&self) -> Result<Value, CallError> {
        calls::discover(self).await
    }

    /// Every tool of the server (`tools/list`, all pages).
    /// Tools whose `x-mcp-header` annotations are invalid are left out;
    /// the channel caches the annotated schemas, as for any `tools/list`.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, CallError> {
        calls::list_tools(self).await
    }

    /// Calls tool `name` with `arguments` (a struct or map that serializes
    /// to a JSON object; `()` for none). A failure the tool reports is
    /// `Ok` with [`CallToolResult::is_error`].
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<CallToolResult, CallError> {
        calls::call_tool(self, name, arguments).await
    }

    /// [`HttpChannel::call_tool`] for a tool with an output schema: its
    /// `structuredContent` as a `T`. A failure the tool reports is an
    /// error with [`CallError::tool_error`].
    pub async fn call_tool_typed<T: DeserializeOwned>(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<T, CallError> {
        calls::call_tool_typed(self, name, arguments).await
    }

    /// [`HttpChannel::call_tool`] asking for progress: `on_progress` sees
    /// each `notifications/progress` of the call as it arrives.
    pub async fn call_tool_with_progress(
        &self,
        name: &str,
        arguments: impl Serialize,
        on_progress: impl FnMut(Progress),
    ) -> Result<CallToolResult, CallError> {
        calls::call_tool_with_progress(self, name, arguments, on_progress).await
    }

    /// Every resource of the server (`resources/list`, all pages).
    pub async fn list_resources(&self) -> Result<Vec<Resource>, CallError> {
        calls::list_resources(self).await
    }

    /// The contents of the resource at `uri` (`resources/read`).
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, CallError> {
        calls::read_resource(self, uri).await
    }

    /// Every prompt of the server (`prompts/list`, all pages).
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, CallError> {
        calls::list_prompts(self).await
    }

    /// Prompt `name` with `arguments` (string values; `()` for none).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<GetPromptResult, CallError> {
        calls::get_prompt(self, name, arguments).await
    }

    /// The items under `key` of every page of a list method (raw JSON).
    pub async fn list_all(&self, method: &str, key: &str) -> Result<Vec<Value>, CallError> {
        calls::list_all(self, method, key).await
    }
}

impl Calls for HttpChannel {
    type Call = HttpCall;

    fn request(
        &self,
        method: &str,
        params: Value,
    ) -> impl std::future::Future<Output = Result<Value, CallError>> + Send {
        HttpChannel::request(self, method, params)
    }

    fn call(
        &self,
        request: Value,
    ) -> impl std::future::Future<Output = Result<HttpCall, CallError>> + Send {
        HttpChannel::call(self, request)
    }
}

impl CallMessages for HttpCall {
    fn next_message(
        &mut self,
    ) -> impl std::future::Future<Output = Result<Option<StreamMessage>, CallError>> + Send {
        self.next()
    }
}
