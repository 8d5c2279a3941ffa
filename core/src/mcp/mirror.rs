//! Metadata mirroring (MCP 2026-07-28 §5.4–5.6 and the gRPC binding): the
//! request headers `mcp-protocol-version`, `mcp-method`, `mcp-name` and
//! `mcp-param-*` repeat parts of the body, and the server checks them.

use super::error::{HEADER_MISMATCH, RpcError};
use super::json::{self, MAX_SAFE_INTEGER};
use crate::grpc::base64;
use crate::h2::HeaderList;

const SENTINEL_START: &[u8] = b"=?base64?";
const SENTINEL_END: &[u8] = b"?=";

const fn mismatch(message: &'static str) -> RpcError {
    RpcError::new(HEADER_MISMATCH, message)
}

/// Decodes a mirrored header value into `out`: surrounding spaces and tabs
/// are dropped; `=?base64?…?=` is decoded; a raw value may hold printable
/// ASCII and interior tabs only.
pub fn decode_value<'o>(value: &[u8], out: &'o mut [u8]) -> Result<&'o [u8], RpcError> {
    let value = trim_ows(value);
    if let Some(payload) = value
        .strip_prefix(SENTINEL_START)
        .and_then(|v| v.strip_suffix(SENTINEL_END))
    {
        let n =
            base64::decode(payload, out).ok_or(mismatch("undecodable =?base64? header value"))?;
        return Ok(&out[..n]);
    }
    if !value
        .iter()
        .all(|&b| (0x20..=0x7e).contains(&b) || b == b'\t')
    {
        return Err(mismatch(
            "header value with a control character or a non-ASCII byte",
        ));
    }
    let dst = out
        .get_mut(..value.len())
        .ok_or(mismatch("header value too long"))?;
    dst.copy_from_slice(value);
    Ok(dst)
}

/// Encodes a value for a mirrored header: as is when it is printable ASCII
/// without surrounding whitespace and does not look like the sentinel, else
/// as `=?base64?…?=`.
pub fn encode_value<'o>(value: &[u8], out: &'o mut [u8]) -> Option<&'o [u8]> {
    let printable = value.iter().all(|&b| (0x20..=0x7e).contains(&b));
    let padded = value.first() == Some(&b' ') || value.last() == Some(&b' ');
    let looks_encoded = value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END);
    let plain = printable && !padded && !looks_encoded && !value.is_empty();
    if plain {
        let dst = out.get_mut(..value.len())?;
        dst.copy_from_slice(value);
        return Some(dst);
    }
    let total = SENTINEL_START.len() + base64::encoded_len(value.len()) + SENTINEL_END.len();
    let dst = out.get_mut(..total)?;
    dst[..SENTINEL_START.len()].copy_from_slice(SENTINEL_START);
    let n = base64::encode(value, &mut dst[SENTINEL_START.len()..])?;
    dst[SENTINEL_START.len() + n..].copy_from_slice(SENTINEL_END);
    Some(dst)
}

fn trim_ows(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    &v[start..end]
}

/// The JSON type an annotated property declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Integer,
    Boolean,
}

/// Deepest `properties` path followed.
pub const MAX_PATH: usize = 8;

/// One `x-mcp-header` annotation of a tool's input schema.
#[derive(Debug, Clone, Copy)]
pub struct Annotation<'s> {
    /// The annotation value (a token): the header is `mcp-param-<lowercase>`.
    pub name: &'s [u8],
    /// Raw JSON property names from the root, through `properties` only.
    pub path: [&'s [u8]; MAX_PATH],
    pub depth: usize,
    pub kind: ParamType,
}

impl<'s> Annotation<'s> {
    /// The property names, raw JSON strings.
    pub fn path(&self) -> &[&'s [u8]] {
        &self.path[..self.depth]
    }

    /// The value at this annotation's path inside `arguments`, if present
    /// and not null.
    pub fn value_in<'a>(&self, arguments: &'a [u8]) -> Option<&'a [u8]> {
        let mut v = arguments;
        for key in self.path() {
            let mut buf = [0u8; 128];
            let key = json::unescape(key, &mut buf)?;
            v = json::get(v, key)?;
        }
        (json::kind(v) != Some(json::Kind::Null)).then_some(v)
    }
}

/// Why a tool's annotations make it invalid (§5.5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnotationError {
    NotAToken,
    Duplicate,
    /// `number`, an array of types, or no type.
    UnsupportedType,
    /// Reached through something other than `properties`.
    NotStaticallyReachable,
    /// More annotations or deeper paths than this build tracks.
    TooMany,
}

impl AnnotationError {
    pub const fn reason(self) -> &'static str {
        match self {
            Self::NotAToken => "x-mcp-header value is not an HTTP token",
            Self::Duplicate => "x-mcp-header value used twice (case-insensitively)",
            Self::UnsupportedType => {
                "x-mcp-header on a property that is not string, integer or boolean"
            }
            Self::NotStaticallyReachable => "x-mcp-header not reachable through properties alone",
            Self::TooMany => "too many or too deeply nested x-mcp-header annotations",
        }
    }
}

/// The annotations of an input schema, at most `N`.
#[derive(Debug, Clone, Copy)]
pub struct Annotations<'s, const N: usize> {
    items: [Option<Annotation<'s>>; N],
    len: usize,
}

impl<'s, const N: usize> Annotations<'s, N> {
    /// Collects and checks every annotation of `schema` (a JSON object).
    pub fn collect(schema: &'s [u8]) -> Result<Self, AnnotationError> {
        let mut out = Self {
            items: [None; N],
            len: 0,
        };
        let mut path = [&b""[..]; MAX_PATH];
        out.walk(schema, true, &mut path, 0, 0)?;
        Ok(out)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Annotation<'s>> {
        self.items[..self.len].iter().flatten()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn walk(
        &mut self,
        node: &'s [u8],
        reachable: bool,
        path: &mut [&'s [u8]; MAX_PATH],
        depth: usize,
        nesting: usize,
    ) -> Result<(), AnnotationError> {
        if nesting > json::DEFAULT_MAX_DEPTH {
            return Err(AnnotationError::TooMany);
        }
        match json::kind(node) {
            Some(json::Kind::Object) => {}
            Some(json::Kind::Array) => {
                for e in json::elements(node) {
                    self.walk(e, false, path, depth, nesting + 1)?;
                }
                return Ok(());
            }
            _ => return Ok(()),
        }
        for (key, value) in json::members(node) {
            if json::str_eq(key, b"x-mcp-header") {
                if !reachable || depth == 0 {
                    return Err(AnnotationError::NotStaticallyReachable);
                }
                self.add(node, value, path, depth)?;
            } else if json::str_eq(key, b"properties")
                && json::kind(value) == Some(json::Kind::Object)
            {
                for (name, sub) in json::members(value) {
                    if depth == MAX_PATH {
                        // Only an annotation deeper than we track is a problem.
                        if has_annotation(sub, nesting + 1) {
                            return Err(AnnotationError::TooMany);
                        }
                        continue;
                    }
                    path[depth] = name;
                    self.walk(sub, reachable, path, depth + 1, nesting + 1)?;
                }
            } else {
                self.walk(value, false, path, depth, nesting + 1)?;
            }
        }
        Ok(())
    }

    fn add(
        &mut self,
        property: &'s [u8],
        value: &'s [u8],
        path: &[&'s [u8]; MAX_PATH],
        depth: usize,
    ) -> Result<(), AnnotationError> {
        let name = json::str_plain(value).ok_or(AnnotationError::NotAToken)?;
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err(AnnotationError::NotAToken);
        }
        let kind = match json::get(property, b"type") {
            Some(t) if json::str_eq(t, b"string") => ParamType::String,
            Some(t) if json::str_eq(t, b"integer") => ParamType::Integer,
            Some(t) if json::str_eq(t, b"boolean") => ParamType::Boolean,
            _ => return Err(AnnotationError::UnsupportedType),
        };
        if self.iter().any(|a| a.name.eq_ignore_ascii_case(name)) {
            return Err(AnnotationError::Duplicate);
        }
        let slot = self
            .items
            .get_mut(self.len)
            .ok_or(AnnotationError::TooMany)?;
        *slot = Some(Annotation {
            name,
            path: *path,
            depth,
            kind,
        });
        self.len += 1;
        Ok(())
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whether a header name is `mcp-param-<name>` (names travel lowercase).
fn is_param_header(header: &[u8], name: &[u8]) -> bool {
    header.len() == 10 + name.len()
        && header.starts_with(b"mcp-param-")
        && header[10..].eq_ignore_ascii_case(name)
}

/// The body values a server compares the headers with.
#[derive(Debug, Clone, Copy)]
pub struct Mirrored<'a> {
    /// Raw JSON string of `_meta`'s protocol version.
    pub protocol_version: &'a [u8],
    /// Raw JSON string of the method.
    pub method: &'a [u8],
    /// Raw JSON value of `params.name` or `params.uri` for the methods that
    /// mirror it, when present.
    pub name: Option<&'a [u8]>,
    /// Raw `params.arguments` of a `tools/call`.
    pub arguments: Option<&'a [u8]>,
}

/// Which body member `mcp-name` mirrors for a method.
pub fn name_member(method: &[u8]) -> Option<&'static [u8]> {
    match method {
        b"tools/call" | b"prompts/get" => Some(b"name"),
        b"resources/read" => Some(b"uri"),
        _ => None,
    }
}

/// The request headers of any binding, as the mirrored-header checks read
/// them: an HTTP/2 header block, an HTTP/1.1 head, gRPC metadata. Names
/// are compared in lowercase.
pub trait HeaderSource {
    /// The value of the first field called `name`.
    fn header(&self, name: &[u8]) -> Option<&[u8]>;
    /// The value of the first field whose name `matches`.
    fn find_header(&self, matches: &mut dyn FnMut(&[u8]) -> bool) -> Option<&[u8]>;
}

impl HeaderSource for HeaderList<'_> {
    fn header(&self, name: &[u8]) -> Option<&[u8]> {
        self.get(name)
    }

    fn find_header(&self, matches: &mut dyn FnMut(&[u8]) -> bool) -> Option<&[u8]> {
        self.iter().find(|f| matches(f.name)).map(|f| f.value)
    }
}

/// Checks the mirrored headers of a request against its body. Any missing,
/// malformed or different header is -32020. `scratch` holds decoded values
/// (two at a time); too small a scratch reads as a mismatch.
pub fn check<'s, const N: usize>(
    body: &Mirrored<'_>,
    headers: &(impl HeaderSource + ?Sized),
    annotations: Option<&Annotations<'s, N>>,
    scratch: &mut [u8],
) -> Result<(), RpcError> {
    let (a, b) = scratch.split_at_mut(scratch.len() / 2);
    let header = |name: &[u8]| headers.header(name);
    let equal = |h: &[u8], raw: &[u8], a: &mut [u8], b: &mut [u8]| -> Result<bool, RpcError> {
        let decoded = decode_value(h, a)?;
        let text = json::unescape(raw, b).ok_or(mismatch("value too long to compare"))?;
        Ok(decoded == text)
    };
    let version =
        header(b"mcp-protocol-version").ok_or(mismatch("missing mcp-protocol-version"))?;
    if !equal(version, body.protocol_version, a, b)? {
        return Err(mismatch("mcp-protocol-version differs from the body"));
    }
    let method = header(b"mcp-method").ok_or(mismatch("missing mcp-method"))?;
    if !equal(method, body.method, a, b)? {
        return Err(mismatch("mcp-method differs from the body"));
    }
    if let Some(name) = body.name {
        let h = header(b"mcp-name").ok_or(mismatch("missing mcp-name"))?;
        if json::kind(name) != Some(json::Kind::String) || !equal(h, name, a, b)? {
            return Err(mismatch("mcp-name differs from the body"));
        }
    }
    let (Some(annotations), Some(arguments)) = (annotations, body.arguments) else {
        return Ok(());
    };
    for ann in annotations.iter() {
        let Some(value) = ann.value_in(arguments) else {
            continue;
        };
        let h = headers
            .find_header(&mut |name| is_param_header(name, ann.name))
            .ok_or(mismatch(
                "missing mcp-param header for an annotated argument",
            ))?;
        let decoded = decode_value(h, a)?;
        let same = match (ann.kind, json::kind(value)) {
            (ParamType::String, Some(json::Kind::String)) => {
                json::unescape(value, b).ok_or(mismatch("value too long to compare"))? == decoded
            }
            (ParamType::Integer, Some(json::Kind::Number)) => {
                let body_int = json::as_i64(value)
                    .filter(|v| v.abs() <= MAX_SAFE_INTEGER)
                    .ok_or(mismatch("annotated integer outside ±(2^53-1)"))?;
                json::as_i64(decoded) == Some(body_int)
            }
            (ParamType::Boolean, Some(json::Kind::Bool)) => json::trim(value) == decoded,
            _ => false,
        };
        if !same {
            return Err(mismatch("mcp-param header differs from the body"));
        }
    }
    Ok(())
}

/// Whether an `x-mcp-header` key appears anywhere in `node`, or `node`
/// nests deeper than the scanner's limit. Its frame is small: the walk
/// recurses once per nesting level of a schema that may come from a peer.
fn has_annotation(node: &[u8], nesting: usize) -> bool {
    if nesting > json::DEFAULT_MAX_DEPTH {
        return true;
    }
    match json::kind(node) {
        Some(json::Kind::Object) => json::members(node).any(|(key, value)| {
            json::str_eq(key, b"x-mcp-header") || has_annotation(value, nesting + 1)
        }),
        Some(json::Kind::Array) => json::elements(node).any(|e| has_annotation(e, nesting + 1)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_codec_examples_from_the_spec() {
        let mut buf = [0u8; 128];
        assert_eq!(
            encode_value("Hello, 世界".as_bytes(), &mut buf).unwrap(),
            b"=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(
            encode_value(b" padded ", &mut buf).unwrap(),
            b"=?base64?IHBhZGRlZCA=?="
        );
        assert_eq!(
            encode_value(b"line1\nline2", &mut buf).unwrap(),
            b"=?base64?bGluZTEKbGluZTI=?="
        );
        assert_eq!(encode_value(b"", &mut buf).unwrap(), b"=?base64??=");
        assert_eq!(encode_value(b"eu-north1", &mut buf).unwrap(), b"eu-north1");
        assert_eq!(
            decode_value(b"=?base64?SGVsbG8sIOS4lueVjA==?=", &mut buf).unwrap(),
            "Hello, 世界".as_bytes()
        );
        assert_eq!(decode_value(b"  foo ", &mut buf).unwrap(), b"foo");
        assert_eq!(decode_value(b"a\tb", &mut buf).unwrap(), b"a\tb");
        assert_eq!(decode_value(b"=?base64??=", &mut buf).unwrap(), b"");
        assert!(decode_value(b"caf\xc3\xa9", &mut buf).is_err());
        assert!(decode_value(b"a\x01b", &mut buf).is_err());
        assert!(decode_value(b"=?base64?!!?=", &mut buf).is_err());
    }

    const SCHEMA: &[u8] = br#"{"type":"object","properties":{
        "target":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}},
        "limit":{"type":"integer","x-mcp-header":"Limit"},
        "dry":{"type":"boolean","x-mcp-header":"Dry"},
        "sql":{"type":"string"}}}"#;

    /// `properties` nested `levels` deep, with `leaf` at the bottom.
    fn nested(levels: usize, leaf: &str) -> std::string::String {
        let mut s = std::string::String::new();
        for _ in 0..levels {
            s.push_str(r#"{"type":"object","properties":{"a":"#);
        }
        s.push_str(leaf);
        for _ in 0..levels {
            s.push_str("}}");
        }
        s
    }

    #[test]
    fn deep_schemas_are_bounded() {
        let annotated = r#"{"type":"string","x-mcp-header":"A"}"#;
        let plain = r#"{"type":"string"}"#;
        // Within the tracked path: found, with its whole path.
        let s = nested(MAX_PATH, annotated);
        let a = Annotations::<'_, 4>::collect(s.as_bytes()).unwrap();
        assert_eq!(a.iter().next().map(|x| x.path().len()), Some(MAX_PATH));
        // One level deeper than tracked: refused, not mirrored wrongly.
        let s = nested(MAX_PATH + 1, annotated);
        assert_eq!(
            Annotations::<'_, 4>::collect(s.as_bytes()).err(),
            Some(AnnotationError::TooMany)
        );
        // Deep but without annotations: fine up to the scanner's depth.
        let s = nested(MAX_PATH + 4, plain);
        assert!(
            Annotations::<'_, 4>::collect(s.as_bytes())
                .unwrap()
                .is_empty()
        );
        // Deeper than the scanner goes: refused.
        let s = nested(json::DEFAULT_MAX_DEPTH, plain);
        assert_eq!(
            Annotations::<'_, 4>::collect(s.as_bytes()).err(),
            Some(AnnotationError::TooMany)
        );
    }

    #[test]
    fn annotations_follow_properties() {
        let a = Annotations::<'_, 8>::collect(SCHEMA).unwrap();
        let names: [&[u8]; 3] = [b"Region", b"Limit", b"Dry"];
        assert!(a.iter().map(|x| x.name).eq(names));
        let region = a.iter().next().unwrap();
        assert_eq!(region.path(), [&br#""target""#[..], br#""region""#]);
        let args = br#"{"target":{"region":"eu-north1"},"limit":5,"sql":"x"}"#;
        assert_eq!(region.value_in(args), Some(&br#""eu-north1""#[..]));
        let invalid = [
            (br#"{"properties":{"n":{"type":"number","x-mcp-header":"N"}}}"#.as_slice(), AnnotationError::UnsupportedType),
            (br#"{"properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}"#, AnnotationError::Duplicate),
            (br#"{"properties":{"a":{"type":"string","x-mcp-header":"has space"}}}"#, AnnotationError::NotAToken),
            (br#"{"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"I"}}}}"#, AnnotationError::NotStaticallyReachable),
            (br#"{"oneOf":[{"properties":{"a":{"type":"string","x-mcp-header":"O"}}}]}"#, AnnotationError::NotStaticallyReachable),
        ];
        for (schema, want) in invalid {
            assert_eq!(Annotations::<'_, 8>::collect(schema).unwrap_err(), want);
        }
    }
}
