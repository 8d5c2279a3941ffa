//! A forwarding app's server side, reached on demand ([`Reconnect`]): a
//! server that refuses the bridge when it connects (its credentials, 401
//! or 403; its protocol versions, -32022) does not end the bridge. Each
//! request is answered with a JSON-RPC error that names the refusal
//! ([`server_refusal`]), and the server is tried again at the next
//! request, so a host shows its user why, and the bridge serves once the
//! server lets it in. Once connected, the connection is kept: a later
//! refusal is a failed call, worded the same way.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use mcpwire_core::grpc::Code;
use mcpwire_core::mcp::proxy::List;
use mcpwire_core::mcp::proxy::era::{Discover, write_discover};
use serde_json::json;

use super::{BoxFuture, ToolError};
use crate::CallError;

type ConnectFn<T> = dyn Fn() -> BoxFuture<Result<T, CallError>> + Send + Sync;

/// A connection (a client and what goes with it, `T`) made at the first
/// request that needs it, and made again at each request after an attempt
/// failed; once made, kept.
pub struct Reconnect<T> {
    connected: OnceLock<Arc<T>>,
    connect: Box<ConnectFn<T>>,
    /// One attempt at a time; the last one's error, for the requests that
    /// waited for it.
    attempt: tokio::sync::Mutex<Option<ToolError>>,
    /// Attempts ended so far.
    ended: AtomicU64,
}

impl<T> std::fmt::Debug for Reconnect<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconnect")
            .field("connected", &self.connected.get().is_some())
            .finish()
    }
}

impl<T: Send + Sync + 'static> Reconnect<T> {
    /// Not connected yet: `connect` makes the connection at the first
    /// [`get`](Self::get).
    pub fn new<F, Fut>(connect: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, CallError>> + Send + 'static,
    {
        Self {
            connected: OnceLock::new(),
            connect: Box::new(move || Box::pin(connect())),
            attempt: tokio::sync::Mutex::new(None),
            ended: AtomicU64::new(0),
        }
    }

    /// Connected already (at startup).
    pub fn connected(value: T) -> Self {
        let this = Self::new(|| async { Err(CallError::new(Code::Internal, "connected already")) });
        let _ = this.connected.set(Arc::new(value));
        this
    }

    /// The connection, made now if it is not yet. A failed attempt is the
    /// request's answer: the refusal ([`server_refusal`]), or the failure
    /// said as one of the bridge's calls. Requests that waited for an
    /// attempt get its outcome: one attempt per burst of requests, not one
    /// each.
    pub async fn get(&self) -> Result<Arc<T>, ToolError> {
        if let Some(c) = self.connected.get() {
            return Ok(Arc::clone(c));
        }
        let seen = self.ended.load(Ordering::Acquire);
        let mut last = self.attempt.lock().await;
        if let Some(c) = self.connected.get() {
            return Ok(Arc::clone(c));
        }
        if self.ended.load(Ordering::Acquire) != seen
            && let Some(e) = last.as_ref()
        {
            return Err(e.clone());
        }
        let outcome = (self.connect)().await;
        self.ended.fetch_add(1, Ordering::Release);
        match outcome {
            Ok(value) => {
                let value = Arc::new(value);
                // Set under the lock: nobody else sets it.
                let _ = self.connected.set(Arc::clone(&value));
                *last = None;
                Ok(value)
            }
            Err(e) => {
                let e = server_refusal(&e).unwrap_or_else(|| {
                    let mut out = ToolError::internal(format!(
                        "the bridge cannot reach the server: {}",
                        e.message
                    ));
                    out.data = Some(json!({"grpcStatus": format!("{:?}", e.status)}));
                    out
                });
                *last = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The connection, if one was made.
    pub fn current(&self) -> Option<Arc<T>> {
        self.connected.get().cloned()
    }
}

/// The JSON-RPC error a host gets when the server refused the bridge, or
/// `None` for another failure: a refusal of its credentials (HTTP 401 or
/// 403, gRPC UNAUTHENTICATED or PERMISSION_DENIED) is -32603 naming the
/// status, with `data.httpStatus` and `data.grpcStatus`; a refusal of its
/// protocol versions (-32022) is the server's error as it came, its
/// `data.supported` naming the versions the server speaks.
pub fn server_refusal(e: &CallError) -> Option<ToolError> {
    let refusal = crate::bridge::refusal_of(e)?;
    let Some(status) = refusal.status() else {
        // The server's versions: its error as it came.
        let rpc = e.rpc.as_deref()?;
        let mut out = ToolError::new(refusal.code(), rpc.message.clone());
        out.data = rpc.data.clone();
        return Some(out);
    };
    let mut out = ToolError::new(
        refusal.code(),
        format!(
            "the server refused the bridge's credentials ({status}): {}",
            e.message
        ),
    );
    let mut data = json!({"grpcStatus": format!("{:?}", e.status)});
    if let Some(http) = e.diagnostics.http_status {
        data["httpStatus"] = json!(http);
    }
    out.data = Some(data);
    Some(out)
}

/// The answer to a host's `server/discover` while the server refuses the
/// bridge's credentials (`refusal`, from [`server_refusal`]): a
/// `DiscoverResult` of the bridge itself (its host side speaks the
/// current era whatever the server), with the `tools` capability alone,
/// the refusal as its `instructions`, and cached by nobody. An error here
/// would send an SDK host that probes (the Python SDK) to the legacy
/// `initialize`, which a modern host side refuses for its missing `_meta`:
/// the host would show that, not the refusal. Told that the server is
/// modern and has tools, a host lists them (the TypeScript SDK asks only
/// for what the capabilities name), and that request gets the refusal as
/// its error. A refusal of the versions (-32022) is no such case: the
/// SDKs report a -32022 to `server/discover` as it is.
/// `None` when `refusal` is not a refusal of the credentials (its
/// `data.grpcStatus` UNAUTHENTICATED or PERMISSION_DENIED, as
/// [`server_refusal`] and a refused call say it).
pub fn refused_discover(
    refusal: &ToolError,
    name: &str,
    version: &str,
) -> Option<serde_json::Value> {
    let status = refusal.data.as_ref()?.get("grpcStatus")?.as_str()?;
    if !matches!(status, "Unauthenticated" | "PermissionDenied") {
        return None;
    }
    let instructions = format!(
        "{}. Every request is refused until the server accepts the bridge.",
        refusal.message
    );
    let discover = Discover {
        capabilities: &[List::Tools.capability()],
        instructions: Some(&instructions),
        name,
        version,
    };
    let text = crate::bridge::written(512, |out| write_discover(&discover, out));
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use mcpwire_core::mcp::error::INTERNAL_ERROR;

    use super::*;
    use crate::JsonRpcError;

    fn unauthorized() -> CallError {
        let mut e = CallError::new(Code::Unauthenticated, "unauthorized (401)");
        e.diagnostics.http_status = Some(401);
        e
    }

    #[test]
    fn refusals_name_the_status_or_carry_the_servers_versions() {
        let e = server_refusal(&unauthorized()).unwrap();
        assert_eq!(e.code, INTERNAL_ERROR);
        assert!(e.message.contains("(401 Unauthorized)"), "{}", e.message);
        assert_eq!(
            e.data,
            Some(json!({"grpcStatus": "Unauthenticated", "httpStatus": 401}))
        );
        let mut version = CallError::new(Code::InvalidArgument, "Unsupported protocol version");
        version.rpc = Some(Box::new(JsonRpcError {
            code: -32022,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": ["2027-01-01"], "requested": "2026-07-28"})),
        }));
        let e = server_refusal(&version).unwrap();
        assert_eq!(e.code, -32022);
        assert_eq!(e.data.unwrap()["supported"], json!(["2027-01-01"]));
        assert!(server_refusal(&CallError::new(Code::Unavailable, "connection refused")).is_none());
    }

    #[test]
    fn only_refused_credentials_get_the_bridges_discovery() {
        let refusal = server_refusal(&unauthorized()).unwrap();
        let discover = refused_discover(&refusal, "b", "1").unwrap();
        assert_eq!(discover["capabilities"], json!({"tools": {}}));
        assert!(
            discover["instructions"]
                .as_str()
                .is_some_and(|i| i.contains("(401 Unauthorized)")),
            "{discover}"
        );
        let mut other = ToolError::internal("the server's stdout closed");
        assert_eq!(refused_discover(&other, "b", "1"), None);
        other.data = Some(json!({"grpcStatus": "Unavailable"}));
        assert_eq!(refused_discover(&other, "b", "1"), None);
    }

    #[tokio::test]
    async fn a_refused_attempt_is_the_answer_and_the_next_request_tries_again() {
        let attempts = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&attempts);
        let r = Reconnect::new(move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move { if n < 2 { Err(unauthorized()) } else { Ok(n) } }
        });
        assert!(r.current().is_none());
        let e = r.get().await.unwrap_err();
        assert!(e.message.contains("401"), "{}", e.message);
        assert!(r.get().await.is_err());
        assert_eq!(*r.get().await.unwrap(), 2);
        // Kept once made.
        assert_eq!(*r.get().await.unwrap(), 2);
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
        assert_eq!(r.current().as_deref(), Some(&2));
        let ready = Reconnect::connected(7);
        assert_eq!(*ready.get().await.unwrap(), 7);
    }
}
