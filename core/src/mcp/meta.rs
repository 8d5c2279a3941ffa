//! The per-request `_meta` of MCP 2026-07-28 (§3.3): every request carries
//! its protocol version and the client's capabilities.

use super::error::{INVALID_PARAMS, RpcError};
use super::json;

/// The protocol revision this crate speaks.
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// Versions a server built on this crate serves.
pub const SUPPORTED_VERSIONS: &[&str] = &[PROTOCOL_VERSION];

pub const KEY_PROTOCOL_VERSION: &[u8] = b"io.modelcontextprotocol/protocolVersion";
pub const KEY_CLIENT_CAPABILITIES: &[u8] = b"io.modelcontextprotocol/clientCapabilities";
pub const KEY_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
pub const KEY_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The notification a request's progress travels in (§3.5), with the
/// request's `progressToken`.
pub const METHOD_PROGRESS: &str = "notifications/progress";

/// The `_meta` of a request, as raw JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestMeta<'a> {
    /// A JSON string.
    pub protocol_version: &'a [u8],
    /// A JSON object.
    pub client_capabilities: &'a [u8],
    /// `progressToken`, a string or an integer, when the client opted in.
    pub progress_token: Option<&'a [u8]>,
}

impl<'a> RequestMeta<'a> {
    /// Reads `params._meta`. Missing params, `_meta`, version or capabilities
    /// (or of the wrong type) are -32602 (§3.3).
    pub fn read(params: Option<&'a [u8]>) -> Result<Self, RpcError> {
        const MISSING: RpcError = RpcError::new(
            INVALID_PARAMS,
            "params._meta must be an object carrying io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities",
        );
        let meta = params.and_then(|p| json::get(p, b"_meta")).ok_or(MISSING)?;
        if json::kind(meta) != Some(json::Kind::Object) {
            return Err(MISSING);
        }
        let [version, caps, token] = json::get_all(
            meta,
            [
                KEY_PROTOCOL_VERSION,
                KEY_CLIENT_CAPABILITIES,
                b"progressToken",
            ],
        );
        let version = version
            .filter(|v| json::kind(v) == Some(json::Kind::String))
            .ok_or(MISSING)?;
        let caps = caps
            .filter(|v| json::kind(v) == Some(json::Kind::Object))
            .ok_or(MISSING)?;
        let progress_token = token
            .filter(|v| matches!(json::kind(v), Some(json::Kind::String | json::Kind::Number)));
        Ok(Self {
            protocol_version: version,
            client_capabilities: caps,
            progress_token,
        })
    }

    /// Whether the version is one [`SUPPORTED_VERSIONS`] lists.
    pub fn version_supported(&self) -> bool {
        SUPPORTED_VERSIONS
            .iter()
            .any(|v| json::str_eq(self.protocol_version, v.as_bytes()))
    }

    /// Whether the client declared the capability `name` (a top-level key of
    /// `clientCapabilities`, such as `elicitation`).
    pub fn has_capability(&self, name: &[u8]) -> bool {
        json::get(self.client_capabilities, name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_rejects() {
        let p = br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":7}}"#;
        let m = RequestMeta::read(Some(p)).unwrap();
        assert!(m.version_supported());
        assert!(m.has_capability(b"elicitation"));
        assert!(!m.has_capability(b"sampling"));
        assert_eq!(m.progress_token, Some(&b"7"[..]));
        for bad in [
            &br#"{}"#[..],
            br#"{"_meta":{}}"#,
            br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
            br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":5,"io.modelcontextprotocol/clientCapabilities":{}}}"#,
            br#"{"_meta":[]}"#,
        ] {
            assert_eq!(RequestMeta::read(Some(bad)).unwrap_err().code, INVALID_PARAMS);
        }
        assert_eq!(RequestMeta::read(None).unwrap_err().code, INVALID_PARAMS);
        let old = br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}"#;
        assert!(!RequestMeta::read(Some(old)).unwrap().version_supported());
    }
}
