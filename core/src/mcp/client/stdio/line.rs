//! Writing the client's lines (MCP 2026-07-28 §6): a request as one
//! compact line, with the request's `_meta` merged in for the modern era
//! (§3.3), and for the legacy eras without the modern per-request keys
//! (version, capabilities, client info, log level: the 2025-11-25
//! lifecycle has them from `initialize`); the handshake's own requests and
//! `notifications/cancelled`. The HTTP client writes its bodies with the
//! same rules ([`write_request`]).

use crate::mcp::json;
use crate::mcp::meta::{KEY_CLIENT_CAPABILITIES, KEY_LOG_LEVEL, KEY_PROTOCOL_VERSION};
use crate::mcp::writer::JsonWriter;

/// `io.modelcontextprotocol/clientInfo`.
pub(super) const KEY_CLIENT_INFO: &[u8] = b"io.modelcontextprotocol/clientInfo";

/// What a modern request's `_meta` gets when the application left it out.
#[derive(Debug, Clone, Copy)]
pub(in crate::mcp::client) struct ModernMeta<'a> {
    pub version: &'a str,
    /// Raw JSON object.
    pub capabilities: &'a str,
    pub name: &'a str,
    pub client_version: &'a str,
}

/// Appends `raw` (valid JSON) without the whitespace between its tokens:
/// a pretty-printed request becomes one line (a raw newline can only be
/// whitespace there; inside strings it is escaped).
pub(super) fn compact(w: &mut JsonWriter<'_>, raw: &[u8]) {
    let mut in_string = false;
    let mut escaped = false;
    let mut from = 0;
    for (i, &b) in raw.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b' ' | b'\t' | b'\n' | b'\r' => {
                w.raw(&raw[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    w.raw(&raw[from..]);
}

/// Writes the request `body` (a validated JSON object) as a line: see
/// [`write_request`].
pub(super) fn write_request_line(
    w: &mut JsonWriter<'_>,
    body: &[u8],
    meta: Option<ModernMeta<'_>>,
) {
    write_request(w, body, meta);
    w.raw(b"\n");
}

/// Writes the request `body` (a validated JSON object) compactly: in the
/// modern era (`meta` given) with `meta` merged into `params._meta`
/// (members the application wrote win); in a legacy era (`None`) without
/// the modern per-request keys of `params._meta` ([`MODERN_KEYS`]; a
/// `_meta` left empty is dropped), which a legacy server does not know.
pub(in crate::mcp::client) fn write_request(
    w: &mut JsonWriter<'_>,
    body: &[u8],
    meta: Option<ModernMeta<'_>>,
) {
    w.raw(b"{");
    let mut first = true;
    let mut saw_params = false;
    for (key, value) in json::members(body) {
        if !first {
            w.raw(b",");
        }
        first = false;
        w.raw(key).raw(b":");
        match meta {
            Some(m) if json::str_eq(key, b"params") => {
                saw_params = true;
                write_params(w, value, m);
            }
            None if json::str_eq(key, b"params") => write_legacy_params(w, value),
            _ => compact(w, value),
        }
    }
    if let (Some(m), false) = (meta, saw_params) {
        if !first {
            w.raw(b",");
        }
        w.raw(b"\"params\":");
        write_params(w, b"{}", m);
    }
    w.raw(b"}");
}

/// The `_meta` keys of a modern request (§3.2) that the legacy eras do
/// not have: their requests go without them.
pub(in crate::mcp::client) const MODERN_KEYS: [&[u8]; 4] = [
    KEY_PROTOCOL_VERSION,
    KEY_CLIENT_CAPABILITIES,
    KEY_CLIENT_INFO,
    KEY_LOG_LEVEL,
];

/// `params` of a legacy request: its `_meta` without [`MODERN_KEYS`].
fn write_legacy_params(w: &mut JsonWriter<'_>, params: &[u8]) {
    if json::kind(params) != Some(json::Kind::Object) {
        return compact(w, params);
    }
    w.raw(b"{");
    let mut first = true;
    for (key, value) in json::members(params) {
        let kept = if json::str_eq(key, b"_meta") && json::kind(value) == Some(json::Kind::Object) {
            let mut kept = json::members(value)
                .filter(|(k, _)| !MODERN_KEYS.iter().any(|m| json::str_eq(k, m)))
                .peekable();
            if kept.peek().is_none() {
                continue;
            }
            Some(kept)
        } else {
            None
        };
        if !first {
            w.raw(b",");
        }
        first = false;
        w.raw(key).raw(b":");
        match kept {
            Some(members) => {
                w.raw(b"{");
                for (n, (k, v)) in members.enumerate() {
                    if n > 0 {
                        w.raw(b",");
                    }
                    w.raw(k).raw(b":");
                    compact(w, v);
                }
                w.raw(b"}");
            }
            None => compact(w, value),
        }
    }
    w.raw(b"}");
}

fn write_params(w: &mut JsonWriter<'_>, params: &[u8], m: ModernMeta<'_>) {
    w.raw(b"{");
    let mut first = true;
    let mut saw_meta = false;
    for (key, value) in json::members(params) {
        if !first {
            w.raw(b",");
        }
        first = false;
        w.raw(key).raw(b":");
        if json::str_eq(key, b"_meta") {
            saw_meta = true;
            write_meta(w, value, m);
        } else {
            compact(w, value);
        }
    }
    if !saw_meta {
        if !first {
            w.raw(b",");
        }
        w.raw(b"\"_meta\":");
        write_meta(w, b"{}", m);
    }
    w.raw(b"}");
}

fn write_meta(w: &mut JsonWriter<'_>, meta: &[u8], m: ModernMeta<'_>) {
    let has = |k: &[u8]| json::get(meta, k).is_some();
    w.raw(b"{");
    let mut first = true;
    if !has(KEY_PROTOCOL_VERSION) {
        w.key(first, KEY_PROTOCOL_VERSION)
            .string(m.version.as_bytes());
        first = false;
    }
    if !has(KEY_CLIENT_CAPABILITIES) {
        w.key(first, KEY_CLIENT_CAPABILITIES);
        compact(w, m.capabilities.as_bytes());
        first = false;
    }
    if !has(KEY_CLIENT_INFO) {
        w.key(first, KEY_CLIENT_INFO)
            .raw(b"{\"name\":")
            .string(m.name.as_bytes())
            .raw(b",\"version\":")
            .string(m.client_version.as_bytes())
            .raw(b"}");
        first = false;
    }
    for (key, value) in json::members(meta) {
        if !first {
            w.raw(b",");
        }
        first = false;
        w.raw(key).raw(b":");
        compact(w, value);
    }
    w.raw(b"}");
}

/// `notifications/cancelled` for the request `id` (raw JSON).
pub(super) fn write_cancelled(w: &mut JsonWriter<'_>, id: &[u8], reason: &[u8]) {
    crate::mcp::envelope::write_notification_with(w, b"notifications/cancelled", |w| {
        w.raw(b"{\"requestId\":")
            .raw(id)
            .raw(b",\"reason\":")
            .string(reason)
            .raw(b"}");
    });
    w.raw(b"\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: ModernMeta<'static> = ModernMeta {
        version: "2026-07-28",
        capabilities: "{}",
        name: "c",
        client_version: "1",
    };

    fn line(body: &str, meta: Option<ModernMeta<'_>>) -> std::string::String {
        let mut buf = [0u8; 1024];
        let mut w = JsonWriter::new(&mut buf);
        write_request_line(&mut w, body.as_bytes(), meta);
        std::string::String::from_utf8(w.finish().unwrap().to_vec()).unwrap()
    }

    #[test]
    fn modern_meta_is_merged_and_the_line_is_compact() {
        let got = line(
            "{\"jsonrpc\": \"2.0\",\n \"id\": 1, \"method\": \"tools/call\",\n \"params\": {\"name\": \"a b\", \"_meta\": {\"progressToken\": 7}}}",
            Some(M),
        );
        assert_eq!(
            got,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a b\",\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{},\"io.modelcontextprotocol/clientInfo\":{\"name\":\"c\",\"version\":\"1\"},\"progressToken\":7}}}\n"
        );
        let no_params = line(
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}",
            Some(M),
        );
        assert!(
            no_params
                .contains(",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\"")
        );
    }

    #[test]
    fn legacy_requests_lose_the_modern_meta_keys_only() {
        let got = line(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info","progressToken":7,"traceparent":"00-x"}}}"#,
            None,
        );
        assert_eq!(
            got,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"_meta\":{\"progressToken\":7,\"traceparent\":\"00-x\"}}}\n"
        );
        let only_modern = line(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            None,
        );
        assert_eq!(
            only_modern,
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{}}\n"
        );
    }

    #[test]
    fn legacy_requests_go_as_written() {
        let got = line(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}",
            None,
        );
        assert_eq!(
            got,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}\n"
        );
    }
}
