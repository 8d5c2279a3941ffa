//! The request of one Streamable HTTP exchange (MCP 2026-07-28 §5.1,
//! §5.4–§5.5): a `POST` of one JSON-RPC message to the endpoint, with the
//! fields a server and the proxies in front of it route and check on.

use crate::http1::write::HeadWriter;
use crate::mcp::error::RpcError;

use super::super::metadata::mirror_headers;

/// What the client accepts: a JSON response or an event stream (§5.1).
pub const ACCEPT: &[u8] = b"application/json, text/event-stream";
/// The media type of every request body.
pub const CONTENT_TYPE: &[u8] = b"application/json";

/// Where requests go, set once per endpoint.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint<'a> {
    /// `Host` (HTTP/1.1) or `:authority` (HTTP/2): `host[:port]`.
    pub authority: &'a str,
    /// The path and query of the MCP endpoint (`/mcp`).
    pub target: &'a str,
    /// A bearer token sent in `Authorization` on every request.
    pub bearer: Option<&'a str>,
}

/// Why a request was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestError {
    /// The message cannot be sent as it is (-32600: not a JSON-RPC
    /// request, an annotated integer outside ±(2^53−1)...): the error the
    /// application gets on any transport.
    Invalid(RpcError),
    /// The endpoint's authority, target or token holds octets a field or
    /// the request line cannot carry (space, control, non-ASCII; a token
    /// outside the `token68` alphabet).
    BadEndpoint(&'static str),
    /// The output needs `needed` octets.
    Overflow { needed: usize },
}

/// Calls `emit(name, value parts)` for every field of a `POST` carrying
/// `body`, for any HTTP version (names in lower case, as HTTP/2 wants
/// them; the value is its parts joined): `content-type`, `accept`, the
/// mirrored `mcp-protocol-version`, `mcp-method`, `mcp-name` and
/// `mcp-param-*` (from `input_schema`, the tool's schema from the last
/// `tools/list`, when known), and `authorization` when a token is given.
/// `Host`/`:authority` and the framing are the writer's.
pub fn post_fields<F>(
    body: &[u8],
    input_schema: Option<&[u8]>,
    bearer: Option<&str>,
    mut emit: F,
) -> Result<(), RequestError>
where
    F: FnMut(&[u8], &[&[u8]]),
{
    check_bearer(bearer)?;
    emit(b"content-type", &[CONTENT_TYPE]);
    emit(b"accept", &[ACCEPT]);
    mirror_headers(body, input_schema, |name, value| emit(name, &[value]))
        .map_err(RequestError::Invalid)?;
    if let Some(token) = bearer {
        emit(b"authorization", &[b"Bearer ", token.as_bytes()]);
    }
    Ok(())
}

/// Writes the whole HTTP/1.1 request carrying `body` to `endpoint` into
/// `out` (head, then body, framed by `Content-Length`); its length.
pub fn write_post(
    out: &mut [u8],
    endpoint: &Endpoint<'_>,
    body: &[u8],
    input_schema: Option<&[u8]>,
) -> Result<usize, RequestError> {
    write_request(out, "POST", endpoint, Some(body), |emit| {
        post_fields(body, input_schema, endpoint.bearer, emit)
    })
}

/// A legacy session (MCP 2026-07-28 §13.2): the `Mcp-Session-Id` the
/// server gave with its `InitializeResult` (if it gave one) and the
/// version `initialize` agreed on (none before that answer).
#[derive(Debug, Clone, Copy, Default)]
pub struct Session<'a> {
    pub id: Option<&'a [u8]>,
    pub version: Option<&'a [u8]>,
}

/// The fields of a `POST` in a legacy era (the 2025 session shape, or the
/// 2024 HTTP+SSE shape with an empty session): `content-type`, `accept`,
/// `mcp-session-id` and `mcp-protocol-version` when the session has them,
/// `authorization` when a token is given. No mirrored routing fields: they
/// are the modern era's.
pub fn legacy_post_fields<F>(
    session: &Session<'_>,
    bearer: Option<&str>,
    mut emit: F,
) -> Result<(), RequestError>
where
    F: FnMut(&[u8], &[&[u8]]),
{
    check_bearer(bearer)?;
    emit(b"content-type", &[CONTENT_TYPE]);
    emit(b"accept", &[ACCEPT]);
    session_fields(session, &mut emit)?;
    if let Some(token) = bearer {
        emit(b"authorization", &[b"Bearer ", token.as_bytes()]);
    }
    Ok(())
}

fn session_fields<F>(session: &Session<'_>, emit: &mut F) -> Result<(), RequestError>
where
    F: FnMut(&[u8], &[&[u8]]) + ?Sized,
{
    if let Some(id) = session.id {
        if !is_visible(id) {
            return Err(RequestError::BadEndpoint("session id not visible ASCII"));
        }
        emit(b"mcp-session-id", &[id]);
    }
    if let Some(version) = session.version {
        if !is_visible(version) {
            return Err(RequestError::BadEndpoint(
                "protocol version not visible ASCII",
            ));
        }
        emit(b"mcp-protocol-version", &[version]);
    }
    Ok(())
}

/// Writes a legacy-era `POST` of `body` ([`legacy_post_fields`]) as a
/// whole HTTP/1.1 request into `out`; its length.
pub fn write_legacy_post(
    out: &mut [u8],
    endpoint: &Endpoint<'_>,
    session: &Session<'_>,
    body: &[u8],
) -> Result<usize, RequestError> {
    write_request(out, "POST", endpoint, Some(body), |emit| {
        legacy_post_fields(session, endpoint.bearer, emit)
    })
}

/// Writes the `GET` that opens an event stream (the 2024 HTTP+SSE
/// shape's stream, §13.1; a 2025 session's standalone stream, §13.2):
/// `accept: text/event-stream`, the session's fields, the token.
pub fn write_get_events(
    out: &mut [u8],
    endpoint: &Endpoint<'_>,
    session: &Session<'_>,
) -> Result<usize, RequestError> {
    write_request(out, "GET", endpoint, None, |emit| {
        check_bearer(endpoint.bearer)?;
        emit(b"accept", &[b"text/event-stream"]);
        session_fields(session, emit)?;
        if let Some(token) = endpoint.bearer {
            emit(b"authorization", &[b"Bearer ", token.as_bytes()]);
        }
        Ok(())
    })
}

/// Writes the `DELETE` that ends a 2025 session (§13.2).
pub fn write_delete(
    out: &mut [u8],
    endpoint: &Endpoint<'_>,
    session: &Session<'_>,
) -> Result<usize, RequestError> {
    write_request(out, "DELETE", endpoint, None, |emit| {
        check_bearer(endpoint.bearer)?;
        session_fields(session, emit)?;
        if let Some(token) = endpoint.bearer {
            emit(b"authorization", &[b"Bearer ", token.as_bytes()]);
        }
        Ok(())
    })
}

/// One HTTP/1.1 request: the request line, `Host`, the fields `fields`
/// emits, then the body framed by `Content-Length` (none without a body).
fn write_request<F>(
    out: &mut [u8],
    method: &str,
    endpoint: &Endpoint<'_>,
    body: Option<&[u8]>,
    fields: F,
) -> Result<usize, RequestError>
where
    F: FnOnce(&mut dyn FnMut(&[u8], &[&[u8]])) -> Result<(), RequestError>,
{
    if !is_visible(endpoint.authority.as_bytes()) {
        return Err(RequestError::BadEndpoint("authority not visible ASCII"));
    }
    let target = endpoint.target.as_bytes();
    if !is_visible(target) || !(target.starts_with(b"/") || target == b"*") {
        return Err(RequestError::BadEndpoint(
            "target not an origin-form path of visible ASCII",
        ));
    }
    let mut w = HeadWriter::request(out, method, endpoint.target);
    w.field("Host", endpoint.authority.as_bytes());
    fields(&mut |name, parts| {
        w.field_parts(name, parts);
    })?;
    if let Some(body) = body {
        w.content_length(body.len() as u64);
    }
    let body = body.unwrap_or_default();
    let head = w.finish().map_err(|o| RequestError::Overflow {
        needed: o.needed + body.len(),
    })?;
    let dst = out
        .get_mut(head..head + body.len())
        .ok_or(RequestError::Overflow {
            needed: head + body.len(),
        })?;
    dst.copy_from_slice(body);
    Ok(head + body.len())
}

pub(super) fn check_bearer(bearer: Option<&str>) -> Result<(), RequestError> {
    match bearer {
        Some(token) if !is_token68(token.as_bytes()) => Err(RequestError::BadEndpoint(
            "bearer token outside the token68 alphabet",
        )),
        _ => Ok(()),
    }
}

/// Non-empty visible ASCII (no space, no control).
fn is_visible(text: &[u8]) -> bool {
    !text.is_empty() && text.iter().all(|&b| (0x21..=0x7e).contains(&b))
}

/// The `token68` syntax of RFC 9110 §11.2: what a bearer token may hold.
fn is_token68(token: &[u8]) -> bool {
    let body = token
        .iter()
        .rposition(|&b| b != b'=')
        .map_or(0, |last| last + 1);
    body > 0
        && token.get(..body).is_some_and(|t| {
            t.iter()
                .all(|&b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;

    #[test]
    fn a_post_carries_the_accept_the_mirrored_fields_and_the_token() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let schema =
            br#"{"type":"object","properties":{"text":{"type":"string","x-mcp-header":"Text"}}}"#;
        let endpoint = Endpoint {
            authority: "h:8080",
            target: "/mcp",
            bearer: Some("abc.DEF-1=="),
        };
        let mut out = [0u8; 1024];
        let n = write_post(&mut out, &endpoint, body, Some(schema)).unwrap();
        let text = String::from_utf8_lossy(&out[..n]);
        let head = "POST /mcp HTTP/1.1\r\nHost: h:8080\r\ncontent-type: application/json\r\n\
            accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
            mcp-method: tools/call\r\nmcp-name: echo\r\nmcp-param-text: hi\r\n\
            authorization: Bearer abc.DEF-1==\r\n";
        assert!(text.starts_with(head), "{text}");
        assert!(text.ends_with(&std::format!(
            "Content-Length: {}\r\n\r\n{}",
            body.len(),
            String::from_utf8_lossy(body)
        )));
        let mut small = [0u8; 16];
        assert_eq!(
            write_post(&mut small, &endpoint, body, Some(schema)),
            Err(RequestError::Overflow { needed: n })
        );
    }

    #[test]
    fn refuses_what_a_field_cannot_carry() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let mut out = [0u8; 512];
        for (authority, target, bearer) in [
            ("h", "/mcp", Some("a b")),
            ("h", "/mcp", Some("tok\r\nX: 1")),
            ("h", "/mcp", Some("=")),
            ("h\r\nX: 1", "/mcp", None),
            ("h", "/m cp", None),
            ("h", "mcp", None),
        ] {
            let endpoint = Endpoint {
                authority,
                target,
                bearer,
            };
            assert!(matches!(
                write_post(&mut out, &endpoint, body, None),
                Err(RequestError::BadEndpoint(_))
            ));
        }
        let endpoint = Endpoint {
            authority: "h",
            target: "/mcp",
            bearer: None,
        };
        assert!(matches!(
            write_post(&mut out, &endpoint, b"[1]", None),
            Err(RequestError::Invalid(_))
        ));
    }
}
