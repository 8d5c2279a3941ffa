//! The transport-free half of the server: what one request message is, in
//! the order MCP 2026-07-28 §5.6 gives the checks, and where it goes.
//!
//! A binding collects a request message and its headers, then asks
//! [`check`] and [`route`]; it maps the outcome to its wire (the gRPC tunnel
//! to trailers, an HTTP binding to a status and a body). The answers the
//! registry makes itself are written by [`write_builtin`].

use super::super::error::{
    HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, RpcError,
    UNSUPPORTED_PROTOCOL_VERSION,
};
use super::super::meta::{MISSING_META, ParamsIndex, RequestMeta, SUPPORTED_VERSIONS};
use super::super::mirror::{self, Annotations, HeaderSource, Mirrored};
#[cfg(feature = "forward")]
use super::super::registry::{ForwardedSchema, ForwardedTools, MAX_CLIENT_ANNOTATIONS};
use super::super::registry::{MAX_ANNOTATIONS, Registry};
use super::super::writer::JsonWriter;
use super::super::{envelope, json};
use super::request::Handler;

/// JSON nesting accepted in a request.
pub const MAX_DEPTH: usize = 64;

/// Where a checked request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The engine answers from the registry.
    Builtin(Builtin),
    /// The application's handler answers.
    Handle(HandlerRef),
    /// `subscriptions/listen`: the engine keeps the stream.
    Listen,
    /// A forwarding registry ([`Registry::forward`]): the application
    /// answers whatever the method.
    Forward,
    /// A JSON-RPC error answered in band (the request was understood, but
    /// names nothing the server has).
    Reject(RpcError),
}

/// A handler route, opaque to bindings: they keep it with the call and give
/// it back to build the [`RequestKind`](super::RequestKind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerRef(pub(crate) Handler);

/// Methods the engine answers from the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Discover,
    Tools,
    Resources,
    Templates,
    Prompts,
}

/// How a rejected request is answered by a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Before any handler: the binding's protocol answer (gRPC trailers
    /// with `mcp-error-*`, HTTP 400 with a JSON-RPC error body).
    Protocol,
    /// An ordinary JSON-RPC error response.
    InBand,
}

/// The level at which a check's error is answered: a header mismatch, an
/// unsupported version and an invalid request (an annotated argument's
/// path with a member twice, refused as the envelope refuses a repeated
/// member) are protocol errors; everything else is in band.
pub fn level(e: &RpcError) -> Level {
    match e.code {
        HEADER_MISMATCH | UNSUPPORTED_PROTOCOL_VERSION | INVALID_REQUEST => Level::Protocol,
        _ => Level::InBand,
    }
}

/// `_meta`, the protocol version and the mirrored headers of a request,
/// in the order of MCP §5.6. `method` is the method's text (no quotes);
/// `params` the raw `params`; `headers` the request's headers on bindings
/// that mirror the body in headers (none on stdio).
pub fn check<H: HeaderSource + ?Sized>(
    registry: &Registry<'_>,
    method: &[u8],
    method_raw: &[u8],
    params: Option<&[u8]>,
    headers: Option<&H>,
) -> Result<(), RpcError> {
    let index = params.map(ParamsIndex::read).unwrap_or_default();
    check_indexed(registry, method, method_raw, params, &index, headers)
}

/// [`check`], with where `params`' members lie already found (by
/// [`RequestSpans::parse`](super::super::envelope::RequestSpans::parse)):
/// `params` is not walked again.
pub fn check_indexed<H: HeaderSource + ?Sized>(
    registry: &Registry<'_>,
    method: &[u8],
    method_raw: &[u8],
    params: Option<&[u8]>,
    index: &ParamsIndex,
    headers: Option<&H>,
) -> Result<(), RpcError> {
    let p = params.ok_or(MISSING_META)?;
    // The validating walk refused the request already; an index read
    // after another parse ([`check`]) still refuses a repeated known key.
    if index.repeated {
        return Err(envelope::REPEATED_MEMBER);
    }
    let meta = RequestMeta::from_index(p, index)?;
    // The standard mirrored headers, read once; one given twice is a
    // mismatch before anything is compared.
    let mirrors = headers.map(|h| h.mirrors()).unwrap_or_default();
    if mirrors.repeated {
        return Err(mirror::REPEATED_HEADER);
    }
    // A version header that differs from the body is a mismatch before the
    // version is judged.
    let version = mirrors.version;
    if let Some(h) = version
        && !mirror::header_eq(h, meta.protocol_version)?
    {
        return Err(RpcError::new(
            HEADER_MISMATCH,
            "mcp-protocol-version differs from the body",
        ));
    }
    if !meta.version_supported() {
        return Err(RpcError::new(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        ));
    }
    let Some(headers) = headers else {
        return Ok(());
    };
    // Compared above when present.
    if version.is_none() {
        return Err(mirror::MISSING_VERSION);
    }
    let is_tool_call = method == b"tools/call";
    let name = match mirror::name_member(method) {
        Some(b"name") => ParamsIndex::get(p, &index.name),
        Some(b"uri") => ParamsIndex::get(p, &index.uri),
        Some(member) => json::get(p, member),
        None => None,
    };
    let arguments = ParamsIndex::get(p, &index.arguments).filter(|_| is_tool_call);
    #[cfg(feature = "forward")]
    if is_tool_call && let Some(tools) = registry.forwarded_tools {
        let body = Mirrored {
            protocol_version: meta.protocol_version,
            method: method_raw,
            name,
            arguments,
        };
        return check_forwarded(tools, &body, &mirrors, headers);
    }
    // No lookup at all when no tool is annotated.
    let tool = (is_tool_call && !registry.no_schema_annotated())
        .then(|| name.and_then(|n| registry.tool_index(n)))
        .flatten();
    // Most schemas have no annotation: the registry's check marked them,
    // and a byte search skips the walk for the others that have none (an
    // escaped key would hide from it, so a schema with a backslash is
    // walked).
    let annotations = tool
        .filter(|&i| !registry.schema_is_plain(i))
        .and_then(|i| registry.tools.get(i))
        .map(|t| t.input_schema.as_bytes())
        .filter(|schema| may_annotate(schema))
        .and_then(|schema| Annotations::<'_, MAX_ANNOTATIONS>::collect(schema).ok());
    let body = Mirrored {
        protocol_version: meta.protocol_version,
        method: method_raw,
        name,
        arguments,
    };
    mirror::check_after_version(&body, &mirrors, headers, annotations.as_ref())
}

/// The mirrored headers of a forwarded `tools/call`, held to the schema
/// the forwarding registry learnt for its tool as a server holds a call to
/// its own tools ([`mirror::check`]); a tool without a known schema may
/// not carry an `mcp-param-*` header. Out of line: the annotations of a
/// learnt schema (up to [`MAX_CLIENT_ANNOTATIONS`], as many as a client
/// mirrors) take room that the usual check does not.
#[cfg(feature = "forward")]
#[inline(never)]
fn check_forwarded<H: HeaderSource + ?Sized>(
    tools: &dyn ForwardedTools,
    body: &Mirrored<'_>,
    mirrors: &mirror::Mirrors<'_>,
    headers: &H,
) -> Result<(), RpcError> {
    let unknown = |body: &Mirrored<'_>| {
        mirror::check_after_version::<0>(body, mirrors, headers, None)?;
        if mirror::has_param_header(headers) {
            return Err(mirror::UNCHECKED_PARAM_HEADER);
        }
        Ok(())
    };
    let Some(name) = body.name else {
        return unknown(body);
    };
    tools.with_schema(name, &mut |schema| match schema {
        ForwardedSchema::Annotated(text) => {
            match Annotations::<'_, MAX_CLIENT_ANNOTATIONS>::collect(json::trim(text)) {
                Ok(annotations) => {
                    mirror::check_after_version(body, mirrors, headers, Some(&annotations))
                }
                // Annotations the engine cannot follow are no schema.
                Err(_) => unknown(body),
            }
        }
        ForwardedSchema::Plain => mirror::check_after_version::<0>(body, mirrors, headers, None),
        ForwardedSchema::Unknown => unknown(body),
    })
}

/// Where a checked request goes.
pub fn route(registry: &Registry<'_>, method: &[u8], params: Option<&[u8]>) -> Route {
    let index = params.map(ParamsIndex::read).unwrap_or_default();
    route_indexed(registry, method, params, &index)
}

/// [`route`], with where `params`' members lie already found.
pub fn route_indexed(
    registry: &Registry<'_>,
    method: &[u8],
    params: Option<&[u8]>,
    index: &ParamsIndex,
) -> Route {
    if registry.forward {
        return Route::Forward;
    }
    let resources = !registry.resources.is_empty() || !registry.templates.is_empty();
    let builtin = match method {
        b"server/discover" => Some(Builtin::Discover),
        b"tools/list" if !registry.tools.is_empty() => Some(Builtin::Tools),
        b"resources/list" if resources => Some(Builtin::Resources),
        b"resources/templates/list" if resources => Some(Builtin::Templates),
        b"prompts/list" if !registry.prompts.is_empty() => Some(Builtin::Prompts),
        _ => None,
    };
    if let Some(b) = builtin {
        return Route::Builtin(b);
    }
    let name = || params.and_then(|p| ParamsIndex::get(p, &index.name));
    let handler = match method {
        b"tools/call" => {
            let index = name().and_then(|n| {
                registry
                    .tools
                    .iter()
                    .position(|t| json::str_eq(n, t.name.as_bytes()))
            });
            match index.and_then(|i| u16::try_from(i).ok()) {
                Some(i) => Handler::Tool(i),
                None => return Route::Reject(RpcError::new(INVALID_PARAMS, "Unknown tool")),
            }
        }
        b"resources/read" if resources => Handler::Resource,
        b"prompts/get" if !registry.prompts.is_empty() => {
            let index = name().and_then(|n| {
                registry
                    .prompts
                    .iter()
                    .position(|p| json::str_eq(n, p.name.as_bytes()))
            });
            match index.and_then(|i| u16::try_from(i).ok()) {
                Some(i) => Handler::Prompt(i),
                None => return Route::Reject(RpcError::new(INVALID_PARAMS, "Unknown prompt")),
            }
        }
        b"completion/complete" if registry.completions => Handler::Complete,
        b"subscriptions/listen" => return Route::Listen,
        _ => return Route::Reject(RpcError::new(METHOD_NOT_FOUND, "Method not found")),
    };
    match params.map(|p| check_handled(p, index)) {
        Some(Err(e)) => Route::Reject(e),
        _ => Route::Handle(HandlerRef(handler)),
    }
}

/// The levels of `io.modelcontextprotocol/logLevel` (MCP §11, RFC 5424).
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// What a request handed to a handler must carry right, whatever the
/// driver (-32602 in band): `inputResponses` an object and `requestState`
/// a string (a multi round-trip call's retry, §10), `_meta`'s `logLevel`
/// one of [`LOG_LEVELS`] (§11).
fn check_handled(params: &[u8], index: &ParamsIndex) -> Result<(), RpcError> {
    let kind = |span: &Option<_>| ParamsIndex::get(params, span).map(json::kind);
    if kind(&index.input_responses).is_some_and(|k| k != Some(json::Kind::Object)) {
        return Err(RpcError::new(
            INVALID_PARAMS,
            "inputResponses must be an object",
        ));
    }
    if kind(&index.request_state).is_some_and(|k| k != Some(json::Kind::String)) {
        return Err(RpcError::new(
            INVALID_PARAMS,
            "requestState must be a string",
        ));
    }
    if let Some(level) = ParamsIndex::get(params, &index.log_level)
        && !LOG_LEVELS.iter().any(|l| json::str_eq(level, l.as_bytes()))
    {
        return Err(RpcError::new(INVALID_PARAMS, "unknown logLevel"));
    }
    Ok(())
}

/// Writes the whole response of a builtin method.
pub fn write_builtin(registry: &Registry<'_>, builtin: Builtin, id: &[u8], w: &mut JsonWriter<'_>) {
    envelope::write_result(w, id, |w| match builtin {
        Builtin::Discover => registry.write_discover(w, SUPPORTED_VERSIONS),
        Builtin::Tools => registry.write_tools_list(w),
        Builtin::Resources => registry.write_resources_list(w),
        Builtin::Templates => registry.write_templates_list(w),
        Builtin::Prompts => registry.write_prompts_list(w),
    });
}

/// The error of a result that does not fit the call's buffer.
pub const RESULT_TOO_LARGE: RpcError =
    RpcError::new(INTERNAL_ERROR, "result larger than the call buffer");

/// The `data` of an error: for -32022 the versions served and the one
/// asked (§4); `None` for other codes or when `out` is too small.
pub fn error_data<'o>(e: &RpcError, params: Option<&[u8]>, out: &'o mut [u8]) -> Option<&'o [u8]> {
    if e.code != UNSUPPORTED_PROTOCOL_VERSION {
        return None;
    }
    let requested = params
        .and_then(|p| RequestMeta::read(Some(p)).ok())
        .map(|m| m.protocol_version)
        .filter(|v| v.len() <= 128);
    let mut w = JsonWriter::new(out);
    w.raw(b"{\"supported\":[");
    for (i, v) in SUPPORTED_VERSIONS.iter().enumerate() {
        if i > 0 {
            w.raw(b",");
        }
        w.string(v.as_bytes());
    }
    w.raw(b"]");
    if let Some(v) = requested {
        w.raw(b",\"requested\":").raw(v);
    }
    w.raw(b"}");
    w.finish().ok()
}

/// Whether an input schema may hold an `x-mcp-header` annotation: it has
/// the key's text, or a backslash (an escaped key hides from the byte
/// search). One pass, eight octets at a time to each `-` (rarer than the
/// `x`) or backslash.
fn may_annotate(schema: &[u8]) -> bool {
    if json::WORDS {
        may_annotate_words(schema)
    } else {
        may_annotate_octets(schema)
    }
}

/// [`may_annotate`] one octet at a time (less code, for small targets).
fn may_annotate_octets(schema: &[u8]) -> bool {
    (0..schema.len()).any(|at| schema[at] == b'\\' || annotation_key_at(schema, at))
}

/// Whether the `-` at `at` is the one of an `x-mcp-header`.
fn annotation_key_at(schema: &[u8], at: usize) -> bool {
    at > 0 && schema[at - 1..].starts_with(b"x-mcp-header")
}

/// [`may_annotate`] eight octets at a time.
fn may_annotate_words(schema: &[u8]) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // The `-` and backslash octets of `w` as high bits; the lowest is exact
    // (both are below 0x80: a borrow only runs upwards from a real one).
    let flags = |w: u64| {
        let dash = (w ^ (LO * u64::from(b'-'))).wrapping_sub(LO);
        let backslash = (w ^ (LO * u64::from(b'\\'))).wrapping_sub(LO);
        (dash | backslash) & !w & HI
    };
    let first = |w: u64| (flags(w).trailing_zeros() / 8) as usize;
    let mut i = 0;
    loop {
        let rest = schema.get(i..).unwrap_or_default();
        let (pairs, _) = rest.as_chunks::<16>();
        let mut k = 0;
        let mut at = None;
        for pair in pairs {
            let v = u128::from_le_bytes(*pair);
            let (a, b) = (v as u64, (v >> 64) as u64);
            if flags(a) | flags(b) != 0 {
                at = Some(if flags(a) != 0 {
                    first(a)
                } else {
                    8 + first(b)
                });
                break;
            }
            k += 16;
        }
        // The last octets (fewer than 16): a word, then the last word of
        // the schema, whose octets before them were found clean.
        let at = match at {
            Some(at) => i + k + at,
            None => {
                let left = &rest[k..];
                match (left.first_chunk::<8>(), rest.last_chunk::<8>()) {
                    (Some(w), _) if flags(u64::from_le_bytes(*w)) != 0 => {
                        i + k + first(u64::from_le_bytes(*w))
                    }
                    (_, Some(w)) if flags(u64::from_le_bytes(*w)) != 0 => {
                        schema.len() - 8 + first(u64::from_le_bytes(*w))
                    }
                    (_, Some(_)) => return false,
                    // Fewer than eight octets in all.
                    (_, None) => match rest.iter().position(|&b| b == b'-' || b == b'\\') {
                        Some(p) => i + p,
                        None => return false,
                    },
                }
            }
        };
        match schema.get(at) {
            Some(b'\\') => return true,
            Some(b'-') if annotation_key_at(schema, at) => return true,
            _ => i = at + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::registry::{ServerInfo, ToolInfo};

    #[test]
    fn a_forwarding_registry_hands_every_method_over_after_the_checks() {
        let info = ServerInfo {
            name: "bridge",
            version: "1",
            instructions: None,
        };
        let registry = Registry {
            forward: true,
            ..Registry::new(info, &[])
        };
        let params = br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#;
        for method in [
            &b"server/discover"[..],
            b"tools/list",
            b"tools/call",
            b"subscriptions/listen",
            b"x-vendor/anything",
        ] {
            assert_eq!(route(&registry, method, Some(params)), Route::Forward);
        }
        // The binding's checks still come first.
        let old = br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#;
        let e = check::<crate::h2::HeaderList<'_>>(
            &registry,
            b"tools/list",
            b"\"tools/list\"",
            Some(old),
            None,
        );
        assert_eq!(e.map_err(|e| e.code), Err(UNSUPPORTED_PROTOCOL_VERSION));
        assert!(
            check::<crate::h2::HeaderList<'_>>(
                &registry,
                b"tools/list",
                b"\"tools/list\"",
                None,
                None
            )
            .is_err()
        );
    }

    /// `check` over `params` no validating walk indexed refuses a key the
    /// index keeps given twice, as that walk does.
    #[test]
    fn check_refuses_a_repeated_known_key() {
        let registry = Registry::new(
            ServerInfo {
                name: "s",
                version: "1",
                instructions: None,
            },
            &[],
        );
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        for (params, code) in [
            (std::format!(r#"{{{meta},"name":"a"}}"#), None),
            (
                std::format!(r#"{{{meta},"name":"a","name":"b"}}"#),
                Some(INVALID_REQUEST),
            ),
            (
                std::format!(r#"{{{meta},"name":"a","n\u0061me":"b"}}"#),
                Some(INVALID_REQUEST),
            ),
        ] {
            let e = check::<crate::h2::HeaderList<'_>>(
                &registry,
                b"tools/call",
                b"\"tools/call\"",
                Some(params.as_bytes()),
                None,
            );
            assert_eq!(e.err().map(|e| e.code), code, "{params}");
        }
    }

    /// Request headers as a list of fields.
    struct Fields<'a>(&'a [(&'a [u8], &'a [u8])]);

    impl HeaderSource for Fields<'_> {
        fn header(&self, name: &[u8]) -> Option<&[u8]> {
            self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
        }

        fn find_header(&self, matches: &mut dyn FnMut(&[u8]) -> bool) -> Option<&[u8]> {
            self.0.iter().find(|(n, _)| matches(n)).map(|(_, v)| *v)
        }
    }

    /// The registry's check marks the schemas without annotation; an
    /// annotated tool is held to its `mcp-param` header whether the
    /// registry was checked or not, and a plain one never is.
    #[test]
    fn annotated_tools_need_their_header_in_checked_and_unchecked_registries() {
        let tools = [
            ToolInfo {
                name: "plain",
                title: None,
                description: "",
                input_schema: r#"{"type":"object","properties":{"region":{"type":"string"}}}"#,
            },
            ToolInfo {
                name: "lookup",
                title: None,
                description: "",
                input_schema: r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
            },
        ];
        let unchecked = Registry::new(
            ServerInfo {
                name: "s",
                version: "1",
                instructions: None,
            },
            &tools,
        );
        let mut checked = unchecked;
        checked.check().unwrap();
        assert!(checked.schema_is_plain(0) && !checked.schema_is_plain(1));
        for registry in [&unchecked, &checked] {
            for (tool, param, ok) in [
                ("plain", None, true),
                ("lookup", None, false),
                ("lookup", Some(&b"eu"[..]), true),
                ("lookup", Some(b"us"), false),
            ] {
                let params = std::format!(
                    r#"{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}},"name":"{tool}","arguments":{{"region":"eu"}}}}"#
                );
                let mut fields: std::vec::Vec<(&[u8], &[u8])> = std::vec![
                    (b"mcp-protocol-version", b"2026-07-28"),
                    (b"mcp-method", b"tools/call"),
                    (b"mcp-name", tool.as_bytes()),
                ];
                if let Some(v) = param {
                    fields.push((b"mcp-param-region", v));
                }
                let result = check(
                    registry,
                    b"tools/call",
                    b"\"tools/call\"",
                    Some(params.as_bytes()),
                    Some(&Fields(&fields)),
                );
                assert_eq!(result.is_ok(), ok, "{tool} {param:?}: {result:?}");
            }
        }
    }

    /// Tool schemas as a bridge learnt them: `lookup` annotated, `plain`
    /// not, every other tool unknown.
    #[cfg(feature = "forward")]
    #[derive(Debug)]
    struct Learnt;

    #[cfg(feature = "forward")]
    impl ForwardedTools for Learnt {
        fn with_schema(
            &self,
            name: &[u8],
            check: &mut dyn FnMut(ForwardedSchema<'_>) -> Result<(), RpcError>,
        ) -> Result<(), RpcError> {
            check(if json::str_eq(name, b"lookup") {
                ForwardedSchema::Annotated(
                    br#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#,
                )
            } else if json::str_eq(name, b"plain") {
                ForwardedSchema::Plain
            } else {
                ForwardedSchema::Unknown
            })
        }
    }

    /// A forwarding registry holds a `tools/call` to the schema it learnt
    /// for the tool: an annotated argument's header must match, a plain
    /// tool's `mcp-param-*` headers are ignored, and a tool without a known
    /// schema may carry none; other methods are not looked up.
    #[cfg(feature = "forward")]
    #[test]
    fn a_forwarding_registry_checks_params_against_the_learnt_schemas() {
        let info = ServerInfo {
            name: "bridge",
            version: "1",
            instructions: None,
        };
        let registry = Registry {
            forward: true,
            forwarded_tools: Some(&Learnt),
            ..Registry::new(info, &[])
        };
        let call = |tool: &str, region: Option<&[u8]>, arguments: &str| {
            let params = std::format!(
                r#"{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}},"name":"{tool}","arguments":{arguments}}}"#
            );
            let mut fields: std::vec::Vec<(&[u8], &[u8])> = std::vec![
                (b"mcp-protocol-version", b"2026-07-28"),
                (b"mcp-method", b"tools/call"),
                (b"mcp-name", tool.as_bytes()),
            ];
            if let Some(v) = region {
                fields.push((b"mcp-param-region", v));
            }
            check(
                &registry,
                b"tools/call",
                b"\"tools/call\"",
                Some(params.as_bytes()),
                Some(&Fields(&fields)),
            )
            .map_err(|e| (e.code, e.message))
        };
        let eu = r#"{"region":"eu"}"#;
        assert_eq!(call("lookup", Some(b"eu"), eu), Ok(()));
        assert_eq!(call("lookup", Some(b"=?base64?ZXU=?="), eu), Ok(()));
        for (region, arguments) in [
            (Some(&b"us"[..]), eu),
            (None, eu),
            (Some(b"eu"), r#"{"region":"eu-secret"}"#),
        ] {
            let e = call("lookup", region, arguments).unwrap_err();
            assert_eq!(e.0, HEADER_MISMATCH, "{region:?} {arguments}: {e:?}");
        }
        // An argument the body does not give: no header to hold it to.
        assert_eq!(call("lookup", None, "{}"), Ok(()));
        assert_eq!(call("plain", Some(b"anything"), eu), Ok(()));
        assert_eq!(call("other", None, eu), Ok(()));
        assert_eq!(
            call("other", Some(b"eu"), eu),
            Err((HEADER_MISMATCH, mirror::UNCHECKED_PARAM_HEADER.message))
        );
        // The name is still checked first.
        let fields: [(&[u8], &[u8]); 3] = [
            (b"mcp-protocol-version", b"2026-07-28"),
            (b"mcp-method", b"tools/call"),
            (b"mcp-name", b"plain"),
        ];
        let params = br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"lookup","arguments":{}}"#;
        let e = check(
            &registry,
            b"tools/call",
            b"\"tools/call\"",
            Some(&params[..]),
            Some(&Fields(&fields)),
        );
        assert_eq!(e.map_err(|e| e.code), Err(HEADER_MISMATCH));
        // Without headers (stdio) nothing is looked up.
        assert!(
            check::<Fields<'_>>(
                &registry,
                b"tools/call",
                b"\"tools/call\"",
                Some(&params[..]),
                None
            )
            .is_ok()
        );
    }

    #[test]
    fn the_annotation_search_finds_the_key_or_a_backslash_anywhere() {
        let naive = |s: &[u8]| s.windows(12).any(|w| w == b"x-mcp-header") || s.contains(&b'\\');
        for len in 0..40 {
            let base: std::vec::Vec<u8> = (0..len).map(|i| b"xx-mcp-headex"[i % 13]).collect();
            assert!(
                !may_annotate(&base),
                "{:?}",
                std::string::String::from_utf8_lossy(&base)
            );
            assert!(!may_annotate_words(&base) && !may_annotate_octets(&base));
            for at in 0..=len {
                for insert in [&b"x-mcp-header"[..], b"\\", b"x-mcp-heade", b"x"] {
                    let mut s = base.clone();
                    s.splice(at..at, insert.iter().copied());
                    assert_eq!(
                        may_annotate(&s),
                        naive(&s),
                        "{:?}",
                        std::string::String::from_utf8_lossy(&s)
                    );
                    assert_eq!(may_annotate_words(&s), naive(&s));
                    assert_eq!(may_annotate_octets(&s), naive(&s));
                }
            }
        }
    }
}
