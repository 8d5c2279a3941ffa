//! A forwarding app ([`App::forward`](super::App::forward)): every request
//! the engine admits goes to one handler as its raw JSON-RPC parts, and
//! the handler's notifications and answer go back unchanged. A bridge is
//! one: it answers each request as the server it forwards to does.
//!
//! The request stays the JSON text the engine validated: `params` and the
//! id are parsed into [`Value`]s only when asked for, and an answer may be
//! the result's JSON text as the server sent it
//! ([`ForwardResult::raw`]), written by the engine as it is.

use std::sync::OnceLock;

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
    /// The id's JSON text (its first `id_len` octets), then `params`' JSON
    /// text (`{}` when absent) as the engine validated it: one allocation
    /// for both.
    raw: Box<[u8]>,
    id_len: usize,
    /// `params._meta.progressToken`'s JSON text, when not `null`.
    raw_progress_token: Option<Box<[u8]>>,
    /// `params._meta` has the protocol version and the client
    /// capabilities: a client adds nothing to it.
    meta_complete: bool,
    id: OnceLock<Value>,
    params: OnceLock<Value>,
    progress_token: OnceLock<Option<Value>>,
    principal: Option<String>,
    /// The host's deadline, when it set one.
    deadline: Option<tokio::time::Instant>,
    whole_list: bool,
    link: Link,
}

impl ForwardRequest {
    /// Copies what the handler needs out of the engine's request.
    pub(super) fn new(request: &Request<'_>, link: Link) -> Self {
        let index = &request.index;
        Self {
            method: request.method().to_owned(),
            raw: [request.id, request.params].concat().into(),
            id_len: request.id.len(),
            raw_progress_token: request
                .progress_token()
                .filter(|t| *t != b"null")
                .map(Into::into),
            meta_complete: index.meta.is_some()
                && index.protocol_version.is_some()
                && index.client_capabilities.is_some(),
            id: OnceLock::new(),
            params: OnceLock::new(),
            progress_token: OnceLock::new(),
            principal: request.principal.map(str::to_owned),
            deadline: request
                .deadline
                .filter(|_| request.client_deadline)
                .map(crate::clock::to_tokio),
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
        self.id
            .get_or_init(|| serde_json::from_slice(self.raw_id()).unwrap_or(Value::Null))
    }

    /// The host's id as JSON text.
    pub fn raw_id(&self) -> &[u8] {
        self.raw.get(..self.id_len).unwrap_or_default()
    }

    /// `params`, `_meta` included (parsed at the first use).
    pub fn params(&self) -> &Value {
        // The engine validated the request: `params` is JSON.
        self.params
            .get_or_init(|| serde_json::from_slice(self.raw_params()).unwrap_or_else(|_| json!({})))
    }

    /// `params` as JSON text, as the host sent it (`{}` when it had none).
    pub fn raw_params(&self) -> &[u8] {
        self.raw.get(self.id_len..).unwrap_or_default()
    }

    /// Whether `params._meta` carries the protocol version and the client
    /// capabilities (the engine requires both of the current era): a
    /// client sends [`raw_params`](Self::raw_params) on as they are.
    pub fn meta_complete(&self) -> bool {
        self.meta_complete
    }

    /// `params._meta.progressToken`, when the host asked for progress.
    pub fn progress_token(&self) -> Option<&Value> {
        self.progress_token
            .get_or_init(|| {
                self.raw_progress_token
                    .as_deref()
                    .and_then(|t| serde_json::from_slice(t).ok())
            })
            .as_ref()
    }

    /// `params._meta.progressToken` as JSON text, when the host asked for
    /// progress.
    pub fn raw_progress_token(&self) -> Option<&[u8]> {
        self.raw_progress_token.as_deref()
    }

    /// What the host's authorization named, when authorization is on.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// When the host's call must end, when the host said so (a gRPC
    /// host's `grpc-timeout`): a forwarded call ends then too. (The
    /// server's own request timeout is not the host's.)
    pub fn deadline(&self) -> Option<tokio::time::Instant> {
        self.deadline
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
        json!({"jsonrpc": "2.0", "method": self.method, "params": self.params()})
    }

    /// Sends a notification of this request to the host (`params` a JSON
    /// object).
    pub async fn notify(&self, method: &str, params: &Value) {
        let params = serde_json::to_vec(params).unwrap_or_else(|_| b"{}".to_vec());
        self.link.notify_raw(method.to_owned(), params).await;
    }

    /// [`notify`](Self::notify) with `params` as JSON text already (a JSON
    /// object).
    pub async fn notify_raw(&self, method: &str, params: Vec<u8>) {
        self.link.notify_raw(method.to_owned(), params).await;
    }

    /// Completes when the host cancelled the request or went away. The
    /// handler's future is dropped then as well.
    pub async fn cancelled(&self) {
        self.link.cancelled().await;
    }
}

/// A forwarding handler's result: a [`Value`], or the JSON text of the
/// result object as a client handed it over ([`ForwardResult::raw`]),
/// which the engine writes as it is.
#[derive(Debug, Clone, PartialEq)]
pub enum ForwardResult {
    /// A result object as a tree.
    Value(Value),
    /// A result object as JSON text.
    Raw(RawResult),
}

/// The JSON text of a result object (see [`ForwardResult::raw`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResult(Vec<u8>);

impl RawResult {
    /// The result's JSON text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl ForwardResult {
    /// The JSON text of a result object that was validated already (as a
    /// client's engine hands a response over): it is not parsed again,
    /// only its outer braces are checked; `None` for text that is not an
    /// object.
    pub fn raw(text: Vec<u8>) -> Option<Self> {
        let trimmed = text.trim_ascii();
        (trimmed.first() == Some(&b'{') && trimmed.last() == Some(&b'}'))
            .then_some(Self::Raw(RawResult(text)))
    }

    /// The result as JSON text; `None` when it is not an object.
    pub(super) fn into_bytes(self) -> Option<Vec<u8>> {
        match self {
            Self::Value(v) => v.is_object().then(|| super::result::json_bytes(&v)),
            Self::Raw(RawResult(text)) => Some(text),
        }
    }
}

impl From<Value> for ForwardResult {
    fn from(v: Value) -> Self {
        Self::Value(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_result_is_an_object_sent_as_it_is() {
        let text = br#" {"z":1,"a":2.50} "#.to_vec();
        let result = ForwardResult::raw(text.clone()).unwrap();
        assert_eq!(result.into_bytes(), Some(text));
        assert_eq!(ForwardResult::raw(b"[1]".to_vec()), None);
        assert_eq!(ForwardResult::raw(b"".to_vec()), None);
        // A tree is written as JSON; one that is not an object is refused.
        let tree = ForwardResult::from(json!({"a": 1}));
        assert_eq!(tree.into_bytes(), Some(br#"{"a":1}"#.to_vec()));
        assert_eq!(ForwardResult::from(json!([1])).into_bytes(), None);
    }
}
