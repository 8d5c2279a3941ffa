//! The typed helpers, written once for every transport: what they need of
//! one is [`Calls`] (a request and its response, or a call's stream of
//! messages), which [`Client`](crate::Client) implements; its public typed
//! methods call these.

use std::future::Future;

use mcpwire_core::grpc::Code;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::typed::{
    PageWalk, array, call_tool_result, named_params, progress, prompt, required, resource,
    result_of, string, tool,
};
use super::{
    CallError, CallToolResult, GetPromptResult, Progress, Prompt, Resource, ResourceContents,
    StreamMessage, Tool,
};

/// A transport as the typed helpers use it.
pub(crate) trait Calls {
    /// One call in progress.
    type Call: CallMessages;
    /// Sends `method` with `params`; the response (a result or the
    /// server's JSON-RPC error), notifications skipped.
    fn request(
        &self,
        method: &str,
        params: Value,
    ) -> impl Future<Output = Result<Value, CallError>> + Send;
    /// Starts a call of one JSON-RPC message.
    fn call(&self, request: Value) -> impl Future<Output = Result<Self::Call, CallError>> + Send;
}

/// The messages of one call: notifications, then the response.
pub(crate) trait CallMessages: Send {
    fn next_message(
        &mut self,
    ) -> impl Future<Output = Result<Option<StreamMessage>, CallError>> + Send;
}

/// A process-wide counter for progress tokens.
fn next_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("mcpwire-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The server's `server/discover` result.
pub(crate) async fn discover<C: Calls + Sync>(c: &C) -> Result<Value, CallError> {
    result_of(c.request("server/discover", json!({})).await?)
}

/// Every tool of the server (`tools/list`, all pages).
pub(crate) async fn list_tools<C: Calls + Sync>(c: &C) -> Result<Vec<Tool>, CallError> {
    let items = list_all(c, "tools/list", "tools").await?;
    items.iter().map(tool).collect()
}

/// Calls tool `name` with `arguments`; a tool's own failure is `Ok`.
pub(crate) async fn call_tool<C: Calls + Sync>(
    c: &C,
    name: &str,
    arguments: impl Serialize,
) -> Result<CallToolResult, CallError> {
    let params = named_params(name, arguments)?;
    let response = c.request("tools/call", params).await?;
    call_tool_result(&result_of(response)?)
}

/// [`call_tool`] with the `structuredContent` as a `T`; a tool's own
/// failure is an error with [`CallError::tool_error`].
pub(crate) async fn call_tool_typed<C: Calls + Sync, T: DeserializeOwned>(
    c: &C,
    name: &str,
    arguments: impl Serialize,
) -> Result<T, CallError> {
    let result = call_tool(c, name, arguments).await?;
    if result.is_error {
        let mut e = CallError::new(Code::Unknown, result.text());
        e.tool_error = Some(Box::new(result));
        return Err(e);
    }
    result.structured()
}

/// [`call_tool`] asking for progress: `on_progress` sees each
/// `notifications/progress` of the call as it arrives.
pub(crate) async fn call_tool_with_progress<C: Calls + Sync>(
    c: &C,
    name: &str,
    arguments: impl Serialize,
    mut on_progress: impl FnMut(Progress),
) -> Result<CallToolResult, CallError> {
    let mut params = named_params(name, arguments)?;
    let token = next_token();
    params["_meta"] = json!({"progressToken": token});
    let mut call = c
        .call(json!({"jsonrpc": "2.0", "method": "tools/call", "params": params}))
        .await?;
    loop {
        match call.next_message().await? {
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
pub(crate) async fn list_resources<C: Calls + Sync>(c: &C) -> Result<Vec<Resource>, CallError> {
    let items = list_all(c, "resources/list", "resources").await?;
    items.iter().map(resource).collect()
}

/// The contents of the resource at `uri` (`resources/read`).
pub(crate) async fn read_resource<C: Calls + Sync>(
    c: &C,
    uri: &str,
) -> Result<Vec<ResourceContents>, CallError> {
    let result = result_of(c.request("resources/read", json!({"uri": uri})).await?)?;
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
pub(crate) async fn list_prompts<C: Calls + Sync>(c: &C) -> Result<Vec<Prompt>, CallError> {
    let items = list_all(c, "prompts/list", "prompts").await?;
    items.iter().map(prompt).collect()
}

/// Prompt `name` with `arguments` (string values; `()` for none).
pub(crate) async fn get_prompt<C: Calls + Sync>(
    c: &C,
    name: &str,
    arguments: impl Serialize,
) -> Result<GetPromptResult, CallError> {
    let params = named_params(name, arguments)?;
    let result = result_of(c.request("prompts/get", params).await?)?;
    Ok(GetPromptResult {
        description: string(&result, "description"),
        messages: array(&result, "messages")?.clone(),
    })
}

/// The items under `key` of every page of a list method (raw JSON).
pub(crate) async fn list_all<C: Calls + Sync>(
    c: &C,
    method: &str,
    key: &str,
) -> Result<Vec<Value>, CallError> {
    let mut items = Vec::new();
    let mut walk = PageWalk::default();
    let mut params = json!({});
    loop {
        let result = result_of(c.request(method, params.clone()).await?)?;
        items.extend(array(&result, key)?.iter().cloned());
        match walk.next(method, &params, &result)? {
            Some(next) => params = next,
            None => return Ok(items),
        }
    }
}

/// The public typed methods of a transport `$ty` (whose calls are `$call`),
/// each one of the functions above, and its [`Calls`] implementation over
/// its own `request`, `call` and the call's `next`. `$tools_note` ends the
/// doc of `list_tools`.
macro_rules! typed_helpers {
    ($ty:ty, $call:ty, $tools_note:literal) => {
        impl $ty {
            /// Every tool of the server (`tools/list`, all pages).
            #[doc = $tools_note]
            pub async fn list_tools(
                &self,
            ) -> Result<Vec<$crate::client::Tool>, $crate::client::CallError> {
                $crate::client::calls::list_tools(self).await
            }

            /// Calls tool `name` with `arguments` (a struct or map that
            /// serializes to a JSON object; `()` for none). A failure the
            /// tool reports is `Ok` with
            /// [`CallToolResult::is_error`]($crate::client::CallToolResult::is_error).
            pub async fn call_tool(
                &self,
                name: &str,
                arguments: impl serde::Serialize,
            ) -> Result<$crate::client::CallToolResult, $crate::client::CallError> {
                $crate::client::calls::call_tool(self, name, arguments).await
            }

            /// [`Self::call_tool`] for a tool with an output schema: its
            /// `structuredContent` as a `T`. A failure the tool reports is
            /// an error with
            /// [`CallError::tool_error`]($crate::client::CallError::tool_error).
            pub async fn call_tool_typed<T: serde::de::DeserializeOwned>(
                &self,
                name: &str,
                arguments: impl serde::Serialize,
            ) -> Result<T, $crate::client::CallError> {
                $crate::client::calls::call_tool_typed(self, name, arguments).await
            }

            /// [`Self::call_tool`] asking for progress: `on_progress` sees
            /// each `notifications/progress` of the call as it arrives.
            pub async fn call_tool_with_progress(
                &self,
                name: &str,
                arguments: impl serde::Serialize,
                on_progress: impl FnMut($crate::client::Progress),
            ) -> Result<$crate::client::CallToolResult, $crate::client::CallError> {
                $crate::client::calls::call_tool_with_progress(self, name, arguments, on_progress)
                    .await
            }

            /// Every resource of the server (`resources/list`, all pages).
            pub async fn list_resources(
                &self,
            ) -> Result<Vec<$crate::client::Resource>, $crate::client::CallError> {
                $crate::client::calls::list_resources(self).await
            }

            /// The contents of the resource at `uri` (`resources/read`).
            pub async fn read_resource(
                &self,
                uri: &str,
            ) -> Result<Vec<$crate::client::ResourceContents>, $crate::client::CallError> {
                $crate::client::calls::read_resource(self, uri).await
            }

            /// Every prompt of the server (`prompts/list`, all pages).
            pub async fn list_prompts(
                &self,
            ) -> Result<Vec<$crate::client::Prompt>, $crate::client::CallError> {
                $crate::client::calls::list_prompts(self).await
            }

            /// Prompt `name` with `arguments` (string values; `()` for none).
            pub async fn get_prompt(
                &self,
                name: &str,
                arguments: impl serde::Serialize,
            ) -> Result<$crate::client::GetPromptResult, $crate::client::CallError> {
                $crate::client::calls::get_prompt(self, name, arguments).await
            }
        }

        impl $crate::client::calls::Calls for $ty {
            type Call = $call;

            fn request(
                &self,
                method: &str,
                params: serde_json::Value,
            ) -> impl std::future::Future<
                Output = Result<serde_json::Value, $crate::client::CallError>,
            > + Send {
                <$ty>::request(self, method, params)
            }

            fn call(
                &self,
                request: serde_json::Value,
            ) -> impl std::future::Future<Output = Result<$call, $crate::client::CallError>> + Send
            {
                <$ty>::call(self, request)
            }
        }

        impl $crate::client::calls::CallMessages for $call {
            fn next_message(
                &mut self,
            ) -> impl std::future::Future<
                Output = Result<Option<$crate::client::StreamMessage>, $crate::client::CallError>,
            > + Send {
                self.next()
            }
        }
    };
}
pub(crate) use typed_helpers;
