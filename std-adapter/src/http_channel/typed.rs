//! The typed helpers of an [`HttpChannel`], those of
//! [`Channel`](crate::Channel): `server/discover`, tools listed (every
//! page) and called (with progress, or typed), resources and prompts
//! listed, read and got. A
//! JSON-RPC error response is an `Err` whose [`CallError::rpc`] holds it;
//! a tool's own failure (`isError`) is an ordinary [`CallToolResult`].

use serde_json::Value;

use super::{HttpCall, HttpChannel};
use crate::client::CallError;
use crate::client::calls::{self, typed_helpers};

typed_helpers!(
    HttpChannel,
    HttpCall,
    "Tools whose `x-mcp-header` annotations are invalid are left out; the channel caches the annotated schemas, as for any `tools/list`."
);

impl HttpChannel {
    /// The server's `server/discover` result.
    pub async fn discover(&self) -> Result<Value, CallError> {
        calls::discover(self).await
    }

    /// The items under `key` of every page of a list method (raw JSON).
    pub async fn list_all(&self, method: &str, key: &str) -> Result<Vec<Value>, CallError> {
        calls::list_all(self, method, key).await
    }
}
