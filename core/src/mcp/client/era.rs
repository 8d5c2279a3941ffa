//! The dual-era rules of a client (MCP 2026-07-28 §8.3), shared by the
//! stdio and the HTTP clients: what the answer to a `server/discover`
//! probe means, the legacy `initialize` and what its answer means, and
//! what the client reports about the era it chose. The HTTP-only part
//! (statuses, the 2025 session, the 2024 HTTP+SSE shape) is
//! [`http::era`](super::http::era).

use crate::mcp::envelope::{self, Message};
use crate::mcp::error::UNSUPPORTED_PROTOCOL_VERSION;
use crate::mcp::json;
use crate::mcp::meta::SUPPORTED_VERSIONS;
use crate::mcp::writer::JsonWriter;

/// The revision of the legacy lifecycle (`initialize`, §13.3).
pub const LEGACY_VERSION: &str = "2025-11-25";
/// The older revisions the legacy lifecycle reaches (`initialize` offers
/// [`LEGACY_VERSION`] and takes the server's counter-offer; the 2024
/// HTTP+SSE shape is the oldest): a -32022 that names one of them sends
/// the client to `initialize`.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The revision of the 2024 HTTP+SSE shape (§13.1).
pub const HTTP_SSE_VERSION: &str = "2024-11-05";
/// The notification that ends the legacy handshake.
pub const INITIALIZED: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";

/// Room for the server's versions as reported (raw JSON array).
const VERSIONS_ROOM: usize = 160;
/// Room for the version the legacy server chose.
const VERSION_ROOM: usize = 32;

/// Which lifecycle the client speaks with the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// MCP 2026-07-28: stateless, `_meta` on every request.
    Modern,
    /// The 2025-11-25 lifecycle: `initialize`, `notifications/initialized`,
    /// requests without per-request `_meta` (over HTTP: Streamable HTTP
    /// with an `Mcp-Session-Id`, §13.2).
    Legacy,
    /// The 2024-11-05 HTTP+SSE shape (HTTP only, §13.1): the legacy
    /// lifecycle over an event stream opened with `GET`, requests `POST`ed
    /// to the URL of its `endpoint` event, every answer on the stream.
    HttpSse,
}

impl Era {
    /// A short name for diagnostics.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Modern => "modern",
            Self::Legacy => "legacy (2025-11-25 lifecycle)",
            Self::HttpSse => "legacy (2024-11-05 HTTP+SSE)",
        }
    }
}

/// How the client picks the era.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EraChoice {
    /// Probe with `server/discover` (§8.3), fall back when it says so.
    #[default]
    Probe,
    /// Modern without a probe.
    Modern,
    /// `initialize` without a probe.
    Legacy,
}

/// What a probe's answer means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Modern, with this version.
    Modern(&'static str),
    /// A recognised modern error naming another version we speak: probe
    /// again with it.
    Retry(&'static str),
    /// Legacy: the reason, the child still usable (it answered).
    Legacy(&'static str),
    /// -32022 naming only versions this client speaks in neither era: a
    /// modern server that cannot be spoken to. Its error is the answer;
    /// `initialize` would only be refused too (§8.3: a recognised modern
    /// error is no reason to fall back).
    Unsupported,
}

/// The first version of `list` (raw JSON array) that this client speaks
/// as a modern one.
pub(crate) fn mutual(list: Option<&[u8]>) -> Option<&'static str> {
    let list = list?;
    json::elements(list).find_map(|v| {
        SUPPORTED_VERSIONS
            .iter()
            .copied()
            .find(|ours| json::str_eq(v, ours.as_bytes()))
    })
}

/// Whether `list` (raw JSON) is a non-empty array of strings, none of them
/// a version this client speaks, modern or legacy. Anything else (no list,
/// an empty one, a legacy version) leaves the legacy fallback open, as
/// §8.3 asks of an unusable `supported`.
fn names_only_foreign_versions(list: &[u8]) -> bool {
    let mut any = false;
    let foreign = json::elements(list).all(|v| {
        any = true;
        json::kind(v) == Some(json::Kind::String)
            && !SUPPORTED_VERSIONS
                .iter()
                .chain(LEGACY_VERSIONS)
                .any(|ours| json::str_eq(v, ours.as_bytes()))
    });
    any && foreign && json::kind(list) == Some(json::Kind::Array)
}

/// Reads the answer to a probe. A -32022 naming a modern version this
/// client speaks is a modern server's refusal (§8.3: no fallback): the
/// probe goes once more with that version, even the one it asked for (a
/// server may refuse a first request it could serve).
pub(crate) fn classify(message: &Message<'_>) -> Verdict {
    match *message {
        Message::Response { result, .. } => match mutual(json::get(result, b"supportedVersions")) {
            Some(v) => Verdict::Modern(v),
            None if json::get(result, b"supportedVersions").is_some() => {
                Verdict::Legacy("server/discover lists no version this client speaks")
            }
            None => Verdict::Legacy("server/discover answered without supportedVersions"),
        },
        Message::Error { error, .. } => {
            let code = json::get(error, b"code").and_then(json::as_i64);
            if code == Some(i64::from(UNSUPPORTED_PROTOCOL_VERSION)) {
                let supported = json::get(error, b"data").and_then(|d| json::get(d, b"supported"));
                return match mutual(supported) {
                    Some(v) => Verdict::Retry(v),
                    None if supported.is_some_and(names_only_foreign_versions) => {
                        Verdict::Unsupported
                    }
                    None => Verdict::Legacy("-32022 names no modern version this client speaks"),
                };
            }
            if code == Some(i64::from(crate::mcp::error::METHOD_NOT_FOUND)) {
                Verdict::Legacy("server/discover: method not found")
            } else {
                Verdict::Legacy("server/discover answered an error")
            }
        }
        _ => Verdict::Legacy("server/discover answered with something else"),
    }
}

/// Writes the legacy `initialize` request (§13.3) with `id` (raw JSON),
/// offering [`LEGACY_VERSION`], no capabilities, and the client's name and
/// version.
pub fn write_initialize(
    w: &mut JsonWriter<'_>,
    id: &[u8],
    client_name: &str,
    client_version: &str,
) {
    envelope::write_request(w, id, b"initialize", |w| {
        w.raw(b"{\"protocolVersion\":")
            .string(LEGACY_VERSION.as_bytes())
            .raw(b",\"capabilities\":{},\"clientInfo\":{\"name\":")
            .string(client_name.as_bytes())
            .raw(b",\"version\":")
            .string(client_version.as_bytes())
            .raw(b"}}");
    });
}

/// The version (raw JSON string) a legacy server answered `initialize`
/// with, or why the answer is not one.
pub fn initialize_answer<'a>(message: &Message<'a>) -> Result<&'a [u8], &'static str> {
    match *message {
        Message::Response { result, .. } => json::get(result, b"protocolVersion")
            .filter(|v| json::kind(v) == Some(json::Kind::String))
            .ok_or("initialize answered without protocolVersion"),
        _ => Err("the server refused initialize"),
    }
}

/// What the client learned about the server's era (§8.3: the requested
/// version, the server's versions, whether a fallback happened).
#[derive(Debug, Clone)]
pub struct EraDiagnostics {
    /// The era in use, once the handshake is over.
    pub era: Option<Era>,
    /// The version the probe asked for (the modern one this client prefers).
    pub requested: &'static str,
    /// The probe was answered -32022 and sent again with this version.
    pub renegotiated: Option<&'static str>,
    /// The client fell back to the 2025-11-25 lifecycle.
    pub fallback: bool,
    /// Why it fell back.
    pub reason: Option<&'static str>,
    /// The JSON-RPC code the probe was answered with, when it was an error.
    pub probe_error: Option<i64>,
    /// The child was restarted before `initialize` (the probe may have
    /// left it unusable: no answer, or it exited).
    pub restarted: bool,
    modern_version: Option<&'static str>,
    versions: [u8; VERSIONS_ROOM],
    versions_len: usize,
    legacy_version: [u8; VERSION_ROOM],
    legacy_len: usize,
}

impl EraDiagnostics {
    pub(crate) fn new() -> Self {
        Self {
            era: None,
            requested: SUPPORTED_VERSIONS[0],
            renegotiated: None,
            fallback: false,
            reason: None,
            probe_error: None,
            restarted: false,
            modern_version: None,
            versions: [0; VERSIONS_ROOM],
            versions_len: 0,
            legacy_version: [0; VERSION_ROOM],
            legacy_len: 0,
        }
    }

    /// The protocol version in use: the modern one chosen, or the one the
    /// legacy server answered `initialize` with.
    pub fn version(&self) -> Option<&str> {
        match self.era? {
            Era::Modern => self.modern_version,
            Era::Legacy | Era::HttpSse => {
                core::str::from_utf8(&self.legacy_version[..self.legacy_len]).ok()
            }
        }
    }

    /// The versions the server named (raw JSON array: `supportedVersions`
    /// of `server/discover`, or `data.supported` of a -32022), when it
    /// named any and they fit in 160 octets.
    pub fn server_versions(&self) -> Option<&str> {
        (self.versions_len > 0)
            .then(|| core::str::from_utf8(&self.versions[..self.versions_len]).ok())
            .flatten()
    }

    /// The versions the server named when it refused the probe with
    /// -32022 and none of them is one this client speaks in either era
    /// (no fallback: the handshake failed on it): what the application
    /// reports as the server's -32022, `data.supported`.
    pub fn refused_versions(&self) -> Option<&str> {
        if self.fallback
            || self.probe_error != Some(i64::from(crate::mcp::error::UNSUPPORTED_PROTOCOL_VERSION))
        {
            return None;
        }
        self.server_versions()
    }

    pub(crate) fn modern_version(&self) -> Option<&'static str> {
        self.modern_version
    }

    pub(crate) fn set_modern(&mut self, version: &'static str) {
        self.era = Some(Era::Modern);
        self.modern_version = Some(version);
    }

    pub(crate) fn set_legacy(&mut self, era: Era, raw_version: &[u8]) {
        self.era = Some(era);
        let v = json::str_plain(raw_version).unwrap_or(b"");
        let n = v.len().min(VERSION_ROOM);
        self.legacy_version[..n].copy_from_slice(&v[..n]);
        self.legacy_len = n;
    }

    pub(crate) fn fall_back(&mut self, reason: &'static str) {
        self.fallback = true;
        self.reason = Some(reason);
    }

    /// Notes the versions a probe answer names.
    pub(crate) fn note(&mut self, message: &Message<'_>) {
        let list = match *message {
            Message::Response { result, .. } => json::get(result, b"supportedVersions"),
            Message::Error { error, .. } => {
                self.probe_error = json::get(error, b"code").and_then(json::as_i64);
                json::get(error, b"data").and_then(|d| json::get(d, b"supported"))
            }
            _ => None,
        };
        if let Some(list) = list.map(json::trim)
            && list.len() <= VERSIONS_ROOM
        {
            self.versions[..list.len()].copy_from_slice(list);
            self.versions_len = list.len();
        }
    }
}
