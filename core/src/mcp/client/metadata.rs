//! The client's metadata rules, without the connection: the headers a
//! call carries (built from its body, MCP 2026-07-28 §5.4–5.5), and the
//! JSON-RPC error a call's trailers stand for (typed binding §9.3). Usable
//! alone (the firmware's measured client path does).

use crate::grpc::{Code, base64, percent};
use crate::h2::HeaderList;
use crate::mcp::envelope::{RequestSpans, Spans};
use crate::mcp::error::{INVALID_REQUEST, RpcError, code_for_status};
use crate::mcp::json::{self, MAX_SAFE_INTEGER};
use crate::mcp::meta::{KEY_PROTOCOL_VERSION, ParamsIndex};
use crate::mcp::mirror::{self, Annotations, ParamType};
use crate::mcp::registry::MAX_CLIENT_ANNOTATIONS;
use crate::mcp::writer::JsonWriter;

use super::calls::offset_in;

/// Room of [`mirror_headers`] for a value it must unescape or encode.
const MAX_VALUE: usize = 512;

/// A mirrored header's value as the body holds it.
#[derive(Debug, Clone, Copy)]
pub(super) enum MirrorValue<'a> {
    /// Header text as is (an integer's digits, a boolean).
    Text(&'a [u8]),
    /// A raw JSON string (with its quotes): unescaped, then sent as is or
    /// as `=?base64?…?=` (see [`mirror::is_plain_value`]).
    Json(&'a [u8]),
}

/// Calls `emit(name, value)` for every metadata header the request `body`
/// mirrors (MCP 2026-07-28 §5.4–5.5): `mcp-protocol-version`, `mcp-method`,
/// `mcp-name` for the methods that have one, and `mcp-param-<name>` for each
/// argument annotated in `input_schema` (the tool's schema from the last
/// `tools/list`, when known). Values that are not plain header text are
/// sent as `=?base64?…?=`. An annotated integer outside ±(2^53−1) is refused
/// with -32600 before anything is sent.
///
/// A value without escapes that is plain text is passed as it stands in
/// `body`, whatever its length; one that must be unescaped or encoded goes
/// through 512 octets of room here (longer: -32600). The
/// [`Client`](super::Client) builds its heads without that limit.
pub fn mirror_headers<F>(
    body: &[u8],
    input_schema: Option<&[u8]>,
    mut emit: F,
) -> Result<(), RpcError>
where
    F: FnMut(&[u8], &[u8]),
{
    let mut text = [0u8; MAX_VALUE];
    let mut encoded = [0u8; MAX_VALUE * 2];
    mirror_fields(&Mirrored::locate(body)?, input_schema, |name, value| {
        let raw = match value {
            MirrorValue::Text(t) => t,
            MirrorValue::Json(raw) => raw,
        };
        if let MirrorValue::Json(_) = value {
            if let Some(plain) = json::str_plain(raw).filter(|v| mirror::is_plain_value(v)) {
                emit(name, plain);
                return Ok(());
            }
            let too_long = RpcError::new(INVALID_REQUEST, "value too long to mirror");
            let value = json::unescape(raw, &mut text).ok_or(too_long)?;
            let value = mirror::encode_value(value, &mut encoded).ok_or(too_long)?;
            emit(name, value);
        } else {
            emit(name, raw);
        }
        Ok(())
    })
}

/// Where a request's [`Mirrored`] parts lie in its body: kept from the
/// start of a call so that the head sent later is built without walking
/// the body again.
#[derive(Debug, Clone, Copy)]
pub(super) struct Located {
    id: Option<(usize, usize)>,
    method: (usize, usize),
    version: Option<(usize, usize)>,
    name: Option<(usize, usize)>,
    arguments: Option<(usize, usize)>,
}

/// The parts of a request body that its head mirrors, as raw JSON.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mirrored<'a> {
    /// The raw `id`, when there is one.
    pub(super) id: Option<&'a [u8]>,
    /// The raw `method` string.
    pub(super) method: &'a [u8],
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`.
    version: Option<&'a [u8]>,
    /// `params.name` or `params.uri` (by the method), a JSON string.
    name: Option<&'a [u8]>,
    /// `params.arguments`.
    arguments: Option<&'a [u8]>,
}

impl<'a> Mirrored<'a> {
    /// Validates `body` and finds its parts: a JSON-RPC request in the one
    /// walk that validates it (the server engine's index); anything else
    /// that is JSON with a `method`, member by member as before.
    pub(super) fn locate(body: &'a [u8]) -> Result<Self, RpcError> {
        if let Ok(Spans::Request(spans)) = RequestSpans::parse(body, json::DEFAULT_MAX_DEPTH)
            && let Some(text) = spans.method.clone()
            && let Some(method) = body.get(text.start.wrapping_sub(1)..text.end + 1)
        {
            let params = spans.params.and_then(|p| body.get(p)).unwrap_or_default();
            let index = &spans.index;
            let name = match mirror::name_member(&body[text]) {
                Some(b"uri") => ParamsIndex::get(params, &index.uri),
                Some(_) => ParamsIndex::get(params, &index.name),
                None => None,
            };
            return Ok(Self {
                id: body.get(spans.id),
                method,
                version: ParamsIndex::get(params, &index.protocol_version),
                name: name.filter(|v| json::kind(v) == Some(json::Kind::String)),
                arguments: ParamsIndex::get(params, &index.arguments),
            });
        }
        const INVALID: RpcError =
            RpcError::new(INVALID_REQUEST, "not a JSON-RPC request with params._meta");
        let [id, method, params] =
            json::validate_get_all(body, [b"id", b"method", b"params"], json::DEFAULT_MAX_DEPTH)
                .map_err(|_| INVALID)?;
        let method = method.ok_or(INVALID)?;
        let params = params.unwrap_or_default();
        let [meta, name, uri, arguments] =
            json::get_all(params, [b"_meta", b"name", b"uri", b"arguments"]);
        let name = match mirror::name_member(json::str_plain(method).unwrap_or(b"")) {
            Some(b"uri") => uri,
            Some(_) => name,
            None => None,
        };
        Ok(Self {
            id,
            method,
            version: meta.and_then(|m| json::get(m, KEY_PROTOCOL_VERSION)),
            name: name.filter(|v| json::kind(v) == Some(json::Kind::String)),
            arguments,
        })
    }

    /// Where the parts lie in `body`, the slice they were found in.
    pub(super) fn spans(&self, body: &[u8]) -> Located {
        let at = |part: &[u8]| offset_in(body, part, 0);
        Located {
            id: self.id.map(at),
            method: at(self.method),
            version: self.version.map(at),
            name: self.name.map(at),
            arguments: self.arguments.map(at),
        }
    }

    /// The parts that [`Mirrored::spans`] found in the same `body`.
    pub(super) fn at(body: &'a [u8], spans: &Located) -> Self {
        let get = |(start, end): (usize, usize)| body.get(start..end).unwrap_or_default();
        Self {
            id: spans.id.map(get),
            method: get(spans.method),
            version: spans.version.map(get),
            name: spans.name.map(get),
            arguments: spans.arguments.map(get),
        }
    }

    /// The raw `params.name` of a `tools/call`.
    pub(super) fn tool_name(&self) -> Option<&'a [u8]> {
        json::str_eq(self.method, b"tools/call")
            .then_some(self.name)
            .flatten()
            .map(json::trim)
    }
}

/// The headers of [`mirror_headers`] for the request `body`'s parts, each
/// value as the body holds it.
pub(super) fn mirror_fields<F>(
    body: &Mirrored<'_>,
    input_schema: Option<&[u8]>,
    mut emit: F,
) -> Result<(), RpcError>
where
    F: FnMut(&[u8], MirrorValue<'_>) -> Result<(), RpcError>,
{
    if let Some(version) = body.version {
        emit(b"mcp-protocol-version", MirrorValue::Json(version))?;
    }
    emit(b"mcp-method", MirrorValue::Json(body.method))?;
    if let Some(name) = body.name {
        emit(b"mcp-name", MirrorValue::Json(name))?;
    }
    let (Some(schema), Some(arguments)) = (input_schema, body.arguments) else {
        return Ok(());
    };
    let annotations = Annotations::<'_, MAX_CLIENT_ANNOTATIONS>::collect(schema)
        .map_err(|e| RpcError::new(INVALID_REQUEST, e.reason()))?;
    let mut header = [0u8; 10 + 64];
    for ann in annotations.iter() {
        // A member twice on the path: the server refuses such a body
        // (-32600), so it is not sent.
        let Some(value) = ann.value_in(arguments).map_err(|_| {
            RpcError::new(
                INVALID_REQUEST,
                "duplicate member on the path of an x-mcp-header argument",
            )
        })?
        else {
            continue;
        };
        let name_len = 10 + ann.name.len();
        let Some(dst) = header.get_mut(..name_len) else {
            return Err(RpcError::new(INVALID_REQUEST, "x-mcp-header name too long"));
        };
        dst[..10].copy_from_slice(b"mcp-param-");
        for (d, s) in dst[10..].iter_mut().zip(ann.name) {
            *d = s.to_ascii_lowercase();
        }
        let header_name = &header[..name_len];
        match (ann.kind, json::kind(value)) {
            (ParamType::String, Some(json::Kind::String)) => {
                emit(header_name, MirrorValue::Json(value))?;
            }
            (ParamType::Integer, Some(json::Kind::Number)) => {
                let v = json::as_i64(value)
                    .filter(|v| v.abs() <= MAX_SAFE_INTEGER)
                    .ok_or(RpcError::new(
                        INVALID_REQUEST,
                        "annotated integer outside ±(2^53-1)",
                    ))?;
                let mut digits = [0u8; 24];
                let mut w = JsonWriter::new(&mut digits);
                w.int(v);
                let n = w.len();
                emit(header_name, MirrorValue::Text(&digits[..n]))?;
            }
            (ParamType::Boolean, Some(json::Kind::Bool)) => {
                emit(header_name, MirrorValue::Text(json::trim(value)))?;
            }
            _ => {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    "argument does not match its annotated type",
                ));
            }
        }
    }
    Ok(())
}

/// What ended a call that carried no response message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// The trailers held a JSON-RPC error (from `mcp-error-bin`, or from
    /// `mcp-error-code` and `grpc-message`): it is written out.
    RpcError,
    /// A transport failure: the status, and the HTTP status a client reports
    /// for it (401 and 403 for UNAUTHENTICATED and PERMISSION_DENIED).
    Transport { status: Code, http_status: u16 },
}

/// Reads the JSON-RPC error that trailers carry (typed binding §9.3):
/// `mcp-error-bin`, else `mcp-error-code` with `grpc-message`, else the
/// status map of the reference transport. The error response, with `id`,
/// is written to `out`; `out` holds the JSON text on `Ok`.
pub fn error_from_trailers<'o>(
    trailers: HeaderList<'_>,
    id: &[u8],
    out: &'o mut [u8],
) -> (CallOutcome, Option<&'o [u8]>) {
    let status = trailers
        .get(b"grpc-status")
        .and_then(Code::parse)
        .unwrap_or(Code::Unknown);
    let transport = matches!(
        status,
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::Unauthenticated
            | Code::PermissionDenied
    );
    let http_status = match status {
        Code::Unauthenticated => 401,
        Code::PermissionDenied => 403,
        _ => 200,
    };
    let (scratch, out) = out.split_at_mut(out.len() / 2);
    // 1. mcp-error-bin: base64 of a JSON-RPC error response (possibly
    // several values joined by commas; the first that decodes wins).
    if let Some(bin) = trailers.get(b"mcp-error-bin") {
        for part in bin.split(|&b| b == b',') {
            let Some(n) = base64::decode(json::trim(part), scratch) else {
                continue;
            };
            let text = &scratch[..n];
            if json::validate(text, json::DEFAULT_MAX_DEPTH).is_err() {
                continue;
            }
            if let Some(error) =
                json::get(text, b"error").filter(|e| json::get(e, b"code").is_some())
            {
                return (
                    CallOutcome::RpcError,
                    write_response(out, id, |w| {
                        w.raw(json::trim(error));
                    }),
                );
            }
        }
    }
    // 2. mcp-error-code with the percent-decoded grpc-message.
    if let Some(code) = trailers.get(b"mcp-error-code").and_then(json::as_i64) {
        let message = trailers.get(b"grpc-message").unwrap_or(b"");
        let n = percent::decode(message, scratch).unwrap_or(0);
        let text = core::str::from_utf8(&scratch[..n]).unwrap_or("");
        return (
            CallOutcome::RpcError,
            write_response(out, id, |w| {
                w.raw(b"{\"code\":")
                    .int(code)
                    .raw(b",\"message\":")
                    .string(text.as_bytes())
                    .raw(b"}");
            }),
        );
    }
    if transport {
        return (
            CallOutcome::Transport {
                status,
                http_status,
            },
            None,
        );
    }
    // 3. The status alone.
    let code = code_for_status(status);
    let message = trailers
        .get(b"grpc-message")
        .unwrap_or(status.name().as_bytes());
    let n = percent::decode(message, scratch).unwrap_or(0);
    let text = &scratch[..n];
    (
        CallOutcome::RpcError,
        write_response(out, id, |w| {
            w.raw(b"{\"code\":")
                .int(i64::from(code))
                .raw(b",\"message\":")
                .string(text)
                .raw(b"}");
        }),
    )
}

fn write_response<'o>(
    out: &'o mut [u8],
    id: &[u8],
    error: impl FnOnce(&mut JsonWriter<'_>),
) -> Option<&'o [u8]> {
    let mut w = JsonWriter::new(out);
    super::super::envelope::write_response_with(&mut w, id, b"error", error);
    w.finish().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;
    use std::vec::Vec;

    fn headers(body: &str, schema: Option<&str>) -> Result<Vec<(String, String)>, RpcError> {
        let mut v = Vec::new();
        mirror_headers(body.as_bytes(), schema.map(str::as_bytes), |n, val| {
            v.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(val.to_vec()).unwrap(),
            ));
        })?;
        Ok(v)
    }

    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

    #[test]
    fn the_spec_example_of_x_mcp_header() {
        let schema = r#"{"type":"object","properties":{"target":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}},"limit":{"type":"integer","x-mcp-header":"Limit"},"sql":{"type":"string"}}}"#;
        let body = std::format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"run_query","arguments":{{"target":{{"region":"eu-north1"}},"limit":5,"sql":"x"}},{META}}}}}"#
        );
        let h = headers(&body, Some(schema)).unwrap();
        let want: [(&str, &str); 5] = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "run_query"),
            ("mcp-param-region", "eu-north1"),
            ("mcp-param-limit", "5"),
        ];
        assert!(
            h.iter().map(|(a, b)| (a.as_str(), b.as_str())).eq(want),
            "{h:?}"
        );
    }

    #[test]
    fn encoded_values_and_refused_integers() {
        let schema = r#"{"type":"object","properties":{"q":{"type":"string","x-mcp-header":"Q"},"n":{"type":"integer","x-mcp-header":"N"}}}"#;
        let body = std::format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"Hello, 世界","arguments":{{"q":" padded "}},{META}}}}}"#
        );
        let h = headers(&body, Some(schema)).unwrap();
        assert_eq!(
            h[2],
            ("mcp-name".into(), "=?base64?SGVsbG8sIOS4lueVjA==?=".into())
        );
        assert_eq!(
            h[3],
            ("mcp-param-q".into(), "=?base64?IHBhZGRlZCA=?=".into())
        );
        let unsafe_int = std::format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"n":9007199254740993}},{META}}}}}"#
        );
        assert_eq!(
            headers(&unsafe_int, Some(schema)).unwrap_err().code,
            INVALID_REQUEST
        );
    }

    /// A JSON-RPC request's parts are found in its validating walk; a body
    /// that is not one (no `jsonrpc`, an escaped method, a duplicate key)
    /// member by member: the same headers either way.
    #[test]
    fn both_ways_of_finding_the_parts_mirror_the_same() {
        let schema = r#"{"type":"object","properties":{"q":{"type":"string","x-mcp-header":"Q"}}}"#;
        let request = std::format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"arguments":{{"q":"v"}},{META},"name":"t"}}}}"#
        );
        let located = Mirrored::locate(request.as_bytes()).unwrap();
        assert_eq!(located.id, Some(&b"1"[..]));
        assert_eq!(located.tool_name(), Some(&br#""t""#[..]));
        let want = headers(&request, Some(schema)).unwrap();
        assert_eq!(want.len(), 4, "{want:?}");
        for other in [
            request.replace(r#""jsonrpc":"2.0","#, ""),
            request.replace(r#""id":1,"#, r#""id":1,"id":2,"#),
        ] {
            assert!(
                !matches!(
                    RequestSpans::parse(other.as_bytes(), json::DEFAULT_MAX_DEPTH),
                    Ok(Spans::Request(RequestSpans {
                        method: Some(_),
                        ..
                    }))
                ),
                "{other}"
            );
            let got = headers(&other, Some(schema)).unwrap();
            assert_eq!(got, want, "{other}");
        }
        // An escaped method is sent as its text (and names no member).
        let escaped = request.replace("tools/call", r"tools\/call");
        let got = headers(&escaped, Some(schema)).unwrap();
        assert_eq!(got[1], ("mcp-method".into(), "tools/call".into()));
        assert!(!got.iter().any(|(n, _)| n == "mcp-name"), "{got:?}");
        // A resource's uri is its name header; not JSON is refused.
        let read = std::format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{{"uri":"a://b","name":"x",{META}}}}}"#
        );
        let h = headers(&read, None).unwrap();
        assert_eq!(h[2], ("mcp-name".into(), "a://b".into()));
        assert_eq!(headers("{", None).unwrap_err().code, INVALID_REQUEST);
    }

    #[test]
    fn trailers_to_errors() {
        let mut store = crate::h2::HeaderBuilder::<1024>::new();
        let bin = "eyJqc29ucnBjIjoiMi4wIiwiaWQiOm51bGwsImVycm9yIjp7ImNvZGUiOi0zMjYwMiwibWVzc2FnZSI6IlVua25vd24gdG9vbDogbm9wZSJ9fQ==";
        let mut out = [0u8; 1024];
        let list = store.build(&[(b"grpc-status", b"3"), (b"mcp-error-bin", bin.as_bytes())]);
        let (outcome, json) = error_from_trailers(list, b"7", &mut out);
        assert_eq!(outcome, CallOutcome::RpcError);
        assert_eq!(
            json.unwrap(),
            br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Unknown tool: nope"}}"#
        );
        let mut out = [0u8; 1024];
        let list = store.build(&[
            (b"grpc-status", b"3"),
            (b"mcp-error-code", b"-32020"),
            (b"grpc-message", b"bad%20header"),
        ]);
        let (_, json) = error_from_trailers(list, b"\"x\"", &mut out);
        assert_eq!(
            json.unwrap(),
            br#"{"jsonrpc":"2.0","id":"x","error":{"code":-32020,"message":"bad header"}}"#
        );
        let mut out = [0u8; 1024];
        let list = store.build(&[(b"grpc-status", b"16")]);
        assert_eq!(
            error_from_trailers(list, b"1", &mut out).0,
            CallOutcome::Transport {
                status: Code::Unauthenticated,
                http_status: 401
            }
        );
        let mut out = [0u8; 1024];
        let list = store.build(&[(b"grpc-status", b"12")]);
        let (_, json) = error_from_trailers(list, b"1", &mut out);
        assert!(
            json.unwrap()
                .starts_with(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601"#)
        );
    }
}
