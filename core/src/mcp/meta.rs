//! The per-request `_meta` of MCP 2026-07-28 (§3.3): every request carries
//! its protocol version and the client's capabilities.

use core::num::NonZeroU32;
use core::ops::Range;

use super::error::{INVALID_PARAMS, RpcError};
use super::json;

/// The protocol revision this crate speaks.
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// Versions a server built on this crate serves.
pub const SUPPORTED_VERSIONS: &[&str] = &[PROTOCOL_VERSION];

pub const KEY_PROTOCOL_VERSION: &[u8] = b"io.modelcontextprotocol/protocolVersion";
pub const KEY_CLIENT_CAPABILITIES: &[u8] = b"io.modelcontextprotocol/clientCapabilities";
/// The `_meta` key of the client's name and version (a SHOULD of §3.2).
pub const KEY_CLIENT_INFO: &[u8] = b"io.modelcontextprotocol/clientInfo";
/// The `_meta` key of the log level a request asks for (§11).
pub const KEY_LOG_LEVEL: &[u8] = b"io.modelcontextprotocol/logLevel";
pub const KEY_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
pub const KEY_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The notification a request's progress travels in (§3.5), with the
/// request's `progressToken`.
pub const METHOD_PROGRESS: &str = "notifications/progress";

pub(crate) const MISSING_META: RpcError = RpcError::new(
    INVALID_PARAMS,
    "params._meta must be an object carrying io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities",
);

/// Where a value lies in a request's `params`: offsets into it, kept in
/// 32 bits (a message is never near 4 GiB) so that a call record that
/// keeps a [`ParamsIndex`] stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    start: u32,
    /// Never 0 (a value is at least one octet): `Option<Span>` costs no
    /// more than a `Span`.
    end: NonZeroU32,
}

impl Span {
    /// The span of `range`; `None` when empty or past 4 GiB.
    pub fn new(range: Range<usize>) -> Option<Self> {
        Some(Self {
            start: u32::try_from(range.start).ok()?,
            end: NonZeroU32::new(u32::try_from(range.end).ok()?)?,
        })
    }

    /// As a range of `params`.
    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end.get() as usize
    }
}

/// Where the members of a request's `params` that the engine and the
/// bindings read lie in it (offsets into `params`), found in one walk: by
/// [`ParamsIndex::read`], or while the message is validated
/// ([`RequestSpans::parse`](super::envelope::RequestSpans::parse)), which
/// refuses a repeated key (so that no reader can take another value than
/// the one indexed). [`ParamsIndex::read`] keeps the first of a repeated
/// key it keeps and notes the repeat, which the server's checks refuse
/// ([`dispatch::check`](super::server::dispatch::check)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParamsIndex {
    /// `params._meta`.
    pub meta: Option<Span>,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`.
    pub protocol_version: Option<Span>,
    /// `params._meta["io.modelcontextprotocol/clientCapabilities"]`.
    pub client_capabilities: Option<Span>,
    /// `params._meta.progressToken`.
    pub progress_token: Option<Span>,
    /// `params.name` (tools and prompts).
    pub name: Option<Span>,
    /// `params.uri` (resources).
    pub uri: Option<Span>,
    /// `params.arguments`.
    pub arguments: Option<Span>,
    /// `params.inputResponses` (a multi round-trip retry, §9).
    pub input_responses: Option<Span>,
    /// `params.requestState` (a multi round-trip retry, §9).
    pub request_state: Option<Span>,
    /// `params._meta["io.modelcontextprotocol/logLevel"]` (§11).
    pub log_level: Option<Span>,
    /// `params.notifications` (a listen request's filter, §7.1).
    pub notifications: Option<Span>,
    /// `params.requestId` (`notifications/cancelled`, §11).
    pub request_id: Option<Span>,
    /// A key the index keeps was met twice (in `params` or `_meta`), or
    /// another member of `params`, `_meta` or `arguments` was found
    /// repeated by the validating walk.
    pub(crate) repeated: bool,
}

/// A member of `params` the engine reads: the index keeps where each
/// lies, so that a repeat of any is found in a `params` of any size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamsKey {
    Meta,
    Name,
    Uri,
    Arguments,
    InputResponses,
    RequestState,
    Notifications,
    RequestId,
}

impl ParamsKey {
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(crate) fn of(key: json::Key<'_>) -> Option<Self> {
        if key.is(b"_meta") {
            Some(Self::Meta)
        } else if key.is(b"name") {
            Some(Self::Name)
        } else if key.is(b"uri") {
            Some(Self::Uri)
        } else if key.is(b"arguments") {
            Some(Self::Arguments)
        } else if key.is(b"inputResponses") {
            Some(Self::InputResponses)
        } else if key.is(b"requestState") {
            Some(Self::RequestState)
        } else if key.is(b"notifications") {
            Some(Self::Notifications)
        } else if key.is(b"requestId") {
            Some(Self::RequestId)
        } else {
            None
        }
    }
}

/// A key from [`json::members`], which does not say whether it has an
/// escape.
fn key_of(raw: &[u8]) -> json::Key<'_> {
    json::Key {
        raw,
        escaped: raw.contains(&b'\\'),
    }
}

impl ParamsIndex {
    /// Indexes `params`, an object that was validated (anything else
    /// indexes as empty), in one walk over its members and `_meta`'s.
    pub fn read(params: &[u8]) -> Self {
        let mut index = Self::default();
        for (key, value) in json::members(params) {
            let Some(k) = ParamsKey::of(key_of(key)) else {
                continue;
            };
            let span = json::span(params, value);
            if k == ParamsKey::Meta && index.meta.is_none() {
                for (mk, mv) in json::members(value) {
                    index.set_meta(key_of(mk), json::span(params, mv));
                }
            }
            index.set(k, span);
        }
        index
    }

    /// Keeps `span` for `key`, unless an earlier member had that key (then
    /// notes the repeat).
    pub(crate) fn set(&mut self, key: ParamsKey, span: Range<usize>) {
        let slot = match key {
            ParamsKey::Meta => &mut self.meta,
            ParamsKey::Name => &mut self.name,
            ParamsKey::Uri => &mut self.uri,
            ParamsKey::Arguments => &mut self.arguments,
            ParamsKey::InputResponses => &mut self.input_responses,
            ParamsKey::RequestState => &mut self.request_state,
            ParamsKey::Notifications => &mut self.notifications,
            ParamsKey::RequestId => &mut self.request_id,
        };
        if slot.is_none() {
            *slot = Span::new(span);
        } else {
            self.repeated = true;
        }
    }

    /// Keeps `span` if `key`, a member of `_meta`, is one the index keeps
    /// (noting a repeat as [`set`](Self::set) does); whether it is.
    pub(crate) fn set_meta(&mut self, key: json::Key<'_>, span: Range<usize>) -> bool {
        let slot = if key.is(KEY_PROTOCOL_VERSION) {
            &mut self.protocol_version
        } else if key.is(KEY_CLIENT_CAPABILITIES) {
            &mut self.client_capabilities
        } else if key.is(b"progressToken") {
            &mut self.progress_token
        } else if key.is(KEY_LOG_LEVEL) {
            &mut self.log_level
        } else {
            return false;
        };
        if slot.is_none() {
            *slot = Span::new(span);
        } else {
            self.repeated = true;
        }
        true
    }

    /// The raw value at `span` of `params`.
    pub fn get<'a>(params: &'a [u8], span: &Option<Span>) -> Option<&'a [u8]> {
        span.and_then(|s| params.get(s.range()))
    }
}

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
        let params = params.ok_or(MISSING_META)?;
        Self::from_index(params, &ParamsIndex::read(params))
    }

    /// [`read`](Self::read) from where a [`ParamsIndex`] of `params`
    /// found the members: no walk.
    pub fn from_index(params: &'a [u8], index: &ParamsIndex) -> Result<Self, RpcError> {
        const MISSING: RpcError = MISSING_META;
        let at = |s: &Option<Span>| ParamsIndex::get(params, s);
        let meta = at(&index.meta).ok_or(MISSING)?;
        if json::kind(meta) != Some(json::Kind::Object) {
            return Err(MISSING);
        }
        let (version, caps, token) = (
            at(&index.protocol_version),
            at(&index.client_capabilities),
            at(&index.progress_token),
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
        SUPPORTED_VERSIONS.iter().any(|v| {
            // As clients write it: no version has an escape, so a string
            // without one is its quoted octets; else escapes resolved.
            matches!(self.protocol_version, [b'"', inner @ .., b'"'] if json::WORDS && json::bytes_eq(inner, v.as_bytes()))
                || json::str_eq(self.protocol_version, v.as_bytes())
        })
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
