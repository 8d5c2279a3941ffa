//! The dual-era rules of the HTTP client (MCP 2026-07-28 §8.3, §13): what
//! the answer to the modern probe means over HTTP, what the answer to a
//! 2025-era `initialize` means, and the pieces of the two older shapes
//! that are not plain requests (the `Mcp-Session-Id`, the 2024 HTTP+SSE
//! `endpoint` event).
//!
//! The order a client follows:
//!
//! 1. `POST` a modern `server/discover` ([`probe`]): a `DiscoverResult` →
//!    modern; -32022 naming another version this client speaks → probe
//!    again with it; -32022 naming only versions it speaks in neither era,
//!    -32021 or -32020 → the server is modern and cannot be spoken to as
//!    asked: reported, no fallback; 401, 403, 5xx, no answer
//!    or a broken transport → an error, never era evidence; a 4xx whose
//!    body is empty, not JSON-RPC or an unrecognised error → legacy.
//! 2. Legacy: `POST` `initialize` with no session ([`initialize`]): an
//!    `InitializeResult` → the 2025 session shape (keep the
//!    [`session_id`] of that response's head, send
//!    `notifications/initialized`, `DELETE` at the end, `initialize` again
//!    on 404); 400, 404 or 405 without a modern error → the 2024 shape.
//! 3. The 2024 shape: `GET` the URL for an event stream whose first event
//!    is `endpoint`; its data, resolved against that URL
//!    ([`endpoint_target`]), is where every message is `POST`ed (answered
//!    202); every answer comes on the stream.

use super::response::Judgement;
use crate::mcp::client::era::{self, Verdict};
use crate::mcp::envelope::Message;
use crate::mcp::error::{
    HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::mcp::json;

/// Longest `Mcp-Session-Id` kept.
pub const MAX_SESSION_ID: usize = 256;

/// What the answer to the modern probe means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeVerdict {
    /// Modern, with this version.
    Modern(&'static str),
    /// -32022 naming another modern version this client speaks: probe
    /// again with it (once).
    Retry(&'static str),
    /// The server is modern and refused the request (-32022 naming only
    /// versions this client speaks in neither era, -32021 a capability it
    /// needs, -32020 a header that does not match the body): the
    /// application is told; no fallback.
    Refused { code: i64 },
    /// Not evidence of an era (401, 403, a 5xx, no answer, a body that a
    /// success status cannot carry): the error the application gets.
    Failed(&'static str),
    /// Legacy, for this reason: try the 2025 `initialize`.
    Legacy(&'static str),
}

/// Whether a status says nothing about the era (§8.3: authorization,
/// server errors and transport failures are surfaced, never a fallback).
fn not_evidence(status: u16) -> Option<&'static str> {
    match status {
        0 => Some("no response"),
        401 => Some("unauthorized (401)"),
        403 => Some("forbidden (403)"),
        500..=599 => Some("server error (5xx)"),
        _ => None,
    }
}

/// Reads the last judgement of the probe's exchange, answered with
/// `status` (its message in `buf[..len]` when it is a response).
pub fn probe(judgement: &Judgement, status: u16, buf: &[u8]) -> ProbeVerdict {
    if let Some(why) = not_evidence(status) {
        return ProbeVerdict::Failed(why);
    }
    match *judgement {
        Judgement::Response { len, error } => {
            if let Some(code) = error
                && matches!(
                    i32::try_from(code),
                    Ok(MISSING_REQUIRED_CLIENT_CAPABILITY | HEADER_MISMATCH)
                )
            {
                return ProbeVerdict::Refused { code };
            }
            let Some(message) = buf
                .get(..len)
                .and_then(|m| Message::parse(m, json::DEFAULT_MAX_DEPTH).ok())
            else {
                return ProbeVerdict::Failed("the probe's response is not JSON-RPC");
            };
            // Any other error means legacy, whatever its code (§8.3: legacy
            // servers answer a request before `initialize` as they like).
            match era::classify(&message) {
                Verdict::Modern(v) => ProbeVerdict::Modern(v),
                Verdict::Retry(v) => ProbeVerdict::Retry(v),
                Verdict::Legacy(why) => ProbeVerdict::Legacy(why),
                Verdict::Unsupported => ProbeVerdict::Refused {
                    code: i64::from(UNSUPPORTED_PROTOCOL_VERSION),
                },
            }
        }
        Judgement::Failed(_) if (400..500).contains(&status) => {
            ProbeVerdict::Legacy("the probe was answered 4xx without a modern error")
        }
        Judgement::Failed(f) => ProbeVerdict::Failed(f.reason),
        Judgement::Notification { .. } | Judgement::Accepted => {
            ProbeVerdict::Failed("the probe's exchange ended without a response")
        }
    }
}

/// What the answer to the 2025-era `initialize` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitializeVerdict<'a> {
    /// The 2025 session shape: the version agreed on (a raw JSON string);
    /// the session id, if any, is in the response's head.
    Session { version: &'a [u8] },
    /// 400, 404 or 405 without a modern error: try the 2024 HTTP+SSE
    /// shape.
    HttpSse,
    /// An error the application gets.
    Failed(&'static str),
}

/// Reads the last judgement of the `initialize` exchange (its message in
/// `buf[..len]`) answered with `status`.
pub fn initialize<'a>(judgement: &Judgement, status: u16, buf: &'a [u8]) -> InitializeVerdict<'a> {
    let no_session = matches!(status, 400 | 404 | 405);
    match *judgement {
        Judgement::Response { len, error } => {
            let modern = matches!(
                error.and_then(|c| i32::try_from(c).ok()),
                Some(
                    UNSUPPORTED_PROTOCOL_VERSION
                        | MISSING_REQUIRED_CLIENT_CAPABILITY
                        | HEADER_MISMATCH
                )
            );
            if error.is_some() {
                return if no_session && !modern {
                    InitializeVerdict::HttpSse
                } else {
                    InitializeVerdict::Failed("the server refused initialize")
                };
            }
            let Some(message) = buf
                .get(..len)
                .and_then(|m| Message::parse(m, json::DEFAULT_MAX_DEPTH).ok())
            else {
                return InitializeVerdict::Failed("initialize answered without JSON-RPC");
            };
            match era::initialize_answer(&message) {
                Ok(version) => InitializeVerdict::Session { version },
                Err(why) => InitializeVerdict::Failed(why),
            }
        }
        Judgement::Failed(f) if matches!(f.status, 400 | 404 | 405) => InitializeVerdict::HttpSse,
        Judgement::Failed(f) => InitializeVerdict::Failed(f.reason),
        Judgement::Notification { .. } | Judgement::Accepted => {
            InitializeVerdict::Failed("initialize ended without a response")
        }
    }
}

/// The `Mcp-Session-Id` field value as a session id (§13.2: visible
/// ASCII, 0x21–0x7E; at most [`MAX_SESSION_ID`] octets here).
pub fn session_id(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    (!value.is_empty()
        && value.len() <= MAX_SESSION_ID
        && value.iter().all(|&b| (0x21..=0x7e).contains(&b)))
    .then_some(value)
}

/// Why an `endpoint` event cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointError {
    /// The data is not a path, a relative reference or an `http(s)` URL
    /// of visible ASCII.
    Malformed,
    /// An absolute URL naming another origin: a client does not follow
    /// a server's stream to a third party.
    OtherOrigin,
    /// The resolved target is longer than the output.
    TooLong,
}

/// Resolves the data of the 2024 shape's `endpoint` event against the
/// event stream's URL (`scheme`, `authority` and `target` of the `GET`):
/// an absolute path is kept, a relative reference is taken from the
/// stream target's directory, an absolute URL must name the same origin.
/// The path and query to `POST` to, written into `out`.
pub fn endpoint_target<'o>(
    scheme: &str,
    authority: &str,
    stream_target: &str,
    data: &[u8],
    out: &'o mut [u8],
) -> Result<&'o str, EndpointError> {
    let data = data.trim_ascii();
    if data.is_empty() || !data.iter().all(|&b| (0x21..=0x7e).contains(&b)) {
        return Err(EndpointError::Malformed);
    }
    let (base, path): (&[u8], &[u8]) = if let Some(rest) = data
        .strip_prefix(scheme.as_bytes())
        .and_then(|r| r.strip_prefix(b"://"))
    {
        let at = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
        if !rest[..at].eq_ignore_ascii_case(authority.as_bytes()) {
            return Err(EndpointError::OtherOrigin);
        }
        (
            b"",
            rest.get(at..).filter(|p| !p.is_empty()).unwrap_or(b"/"),
        )
    } else if data.starts_with(b"//") || data.windows(3).any(|w| w == b"://") {
        return Err(EndpointError::OtherOrigin);
    } else if data.starts_with(b"/") {
        (b"", data)
    } else {
        let dir = stream_target
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .as_bytes();
        let cut = dir.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        (if cut == 0 { b"/" } else { &dir[..cut] }, data)
    };
    let len = base.len() + path.len();
    let dst = out.get_mut(..len).ok_or(EndpointError::TooLong)?;
    dst[..base.len()].copy_from_slice(base);
    dst[base.len()..].copy_from_slice(path);
    core::str::from_utf8(dst).map_err(|_| EndpointError::Malformed)
}
