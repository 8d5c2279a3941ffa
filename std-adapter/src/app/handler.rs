//! What a handler gets: a [`ToolCall`], a [`ResourceRead`] or a
//! [`PromptGet`], copied out of the engine's request so the handler owns
//! it for as long as it runs.

use serde_json::{Map, Value};

use super::link::Link;
use super::result::{ToolError, number, write_json};

/// A `tools/call` request, handed to the tool's handler.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub(crate) link: Link,
    pub(crate) name: String,
    pub(crate) params: Value,
    pub(crate) progress_token: Option<Value>,
    pub(crate) principal: Option<String>,
}

impl ToolCall {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Who is calling: the principal the server's
    /// [`Auth`](crate::Auth) named for the call's bearer token; `None`
    /// when the server authenticates no one.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// `params.arguments` (`Value::Null` when absent).
    pub fn arguments(&self) -> &Value {
        self.params.get("arguments").unwrap_or(&Value::Null)
    }

    /// The arguments as a typed value (absent arguments read as `{}`);
    /// -32602 naming the argument that does not fit (`invalid arguments: target.region: invalid type ...`,
    /// `data: {"argument": "target.region"}`).
    pub fn arguments_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, ToolError> {
        arguments_as(self.arguments())
    }

    /// `params.inputResponses` of a retried multi round-trip call.
    pub fn input_responses(&self) -> Option<&Map<String, Value>> {
        self.params.get("inputResponses").and_then(Value::as_object)
    }

    /// `params.requestState` of a retried multi round-trip call, as the
    /// client echoed it: treat it as attacker-controlled.
    pub fn request_state(&self) -> Option<&str> {
        self.params.get("requestState").and_then(Value::as_str)
    }

    /// The whole `params` object, `_meta` included.
    pub fn params(&self) -> &Value {
        &self.params
    }

    /// Sends `notifications/progress` with the request's `progressToken`;
    /// does nothing when the request carried none.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        // Written straight to JSON text: one notification per step is the
        // hot path of a progress stream.
        let mut params = Vec::with_capacity(96);
        params.extend_from_slice(b"{\"progressToken\":");
        write_json(&mut params, token);
        params.extend_from_slice(b",\"progress\":");
        write_json(&mut params, &number(progress));
        if let Some(total) = total {
            params.extend_from_slice(b",\"total\":");
            write_json(&mut params, &number(total));
        }
        if let Some(message) = message {
            params.extend_from_slice(b",\"message\":");
            write_json(&mut params, message);
        }
        params.push(b'}');
        self.link.notify_raw("notifications/progress", params).await;
    }

    /// Completes when the call is cancelled (client reset, deadline,
    /// connection closed) or otherwise over. The handler's task is aborted
    /// at the same time; this serves work the handler moved elsewhere
    /// (other tasks, blocking threads) through a clone of the `ToolCall`.
    pub async fn cancelled(&self) {
        self.link.cancelled().await;
    }

    /// Whether the call is cancelled or otherwise over.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.link.is_cancelled()
    }
}

/// The arguments as `T`, or -32602 naming the argument that failed.
/// Absent arguments read as `{}` (a tool whose arguments are all optional
/// may be called without any).
pub(crate) fn arguments_as<T: serde::de::DeserializeOwned>(
    arguments: &Value,
) -> Result<T, ToolError> {
    let empty = Value::Object(Map::new());
    let arguments = if arguments.is_null() {
        &empty
    } else {
        arguments
    };
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let path = e.path().to_string();
        let message = if path == "." {
            format!("invalid arguments: {}", e.inner())
        } else {
            format!("invalid arguments: {path}: {}", e.inner())
        };
        let mut error = ToolError::invalid_params(message);
        if path != "." {
            error.data = Some(serde_json::json!({"argument": path}));
        }
        error
    })
}

/// A `resources/read` request.
#[derive(Debug, Clone)]
pub struct ResourceRead {
    pub(crate) uri: String,
    pub(crate) params: Value,
}

impl ResourceRead {
    /// The URI read.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The whole `params` object.
    pub fn params(&self) -> &Value {
        &self.params
    }
}

/// A `prompts/get` request.
#[derive(Debug, Clone)]
pub struct PromptGet {
    pub(crate) name: String,
    pub(crate) params: Value,
}

impl PromptGet {
    /// The prompt's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The argument `name`, if given as a string.
    pub fn argument(&self, name: &str) -> Option<&str> {
        self.params.get("arguments")?.get(name)?.as_str()
    }
}
