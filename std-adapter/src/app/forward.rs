//! A forwarding app ([`App::forward`](super::App::forward)): every request
//! the engine admits goes to one handler as its raw JSON-RPC parts, and
//! the handler's notifications and answer go back unchanged. A bridge is
//! one: it answers each request as the server it forwards to does.

use mcpwire_core::mcp::server::{Request, RequestKind};
use serde_json::{Value, json};

use super::link::Link;

/// A request to forward: its method, the host's id, its `params` (with
/// `_meta`), as the engine admitted them; and the link back to the host
/// for notifications and cancellation. The handler's `Ok` is the result
/// object, sent as it is; its `Err` is the JSON-RPC error.
#[derive(Debug)]
pub struct ForwardRequest {
    method: String,
    id: Value,
    params: Value,
    principal: Option<String>,
    whole_list: bool,
    link: Link,
}

impl ForwardRequest {
    /// Copies what the handler needs out of the engine's request.
    pub(super) fn new(request: &Request<'_>, link: Link) -> Self {
        Self {
            method: request.method().to_owned(),
            id: serde_json::from_slice(request.id).unwrap_or(Value::Null),
            // The engine validated the request: `params` is JSON.
            params: serde_json::from_slice(request.params).unwrap_or_else(|_| json!({})),
            principal: request.principal.map(str::to_owned),
            whole_list: matches!(
                request.kind,
                RequestKind::Forward {
                    whole_list: true,
                    ..
                }
            ),
            link,
        }
    }

    /// The JSON-RPC method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The host's JSON-RPC id (the engine puts it on the answer itself).
    pub fn id(&self) -> &Value {
        &self.id
    }

    /// `params`, `_meta` included.
    pub fn params(&self) -> &Value {
        &self.params
    }

    /// `params._meta.progressToken`, when the host asked for progress.
    pub fn progress_token(&self) -> Option<&Value> {
        self.params
            .pointer("/_meta/progressToken")
            .filter(|t| !t.is_null())
    }

    /// What the host's authorization named, when authorization is on.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// The caller cannot page (a typed binding's list RPC): the answer to a
    /// list method is to be the whole list, the server's pages followed
    /// and their arrays joined, without `nextCursor`.
    pub fn whole_list(&self) -> bool {
        self.whole_list
    }

    /// The request as a JSON-RPC message without an id (a client picks
    /// its own).
    pub fn message(&self) -> Value {
        json!({"jsonrpc": "2.0", "method": self.method, "params": self.params})
    }

    /// Sends a notification of this request to the host (`params` a JSON
    /// object).
    pub async fn notify(&self, method: &str, params: &Value) {
        let params = serde_json::to_vec(params).unwrap_or_else(|_| b"{}".to_vec());
        self.link.notify_raw(method.to_owned(), params).await;
    }

    /// Completes when the host cancelled the request or went away. The
    /// handler's future is dropped then as well.
    pub async fn cancelled(&self) {
        self.link.cancelled().await;
    }
}
