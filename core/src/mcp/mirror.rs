//! Metadata mirroring (MCP 2026-07-28 §5.4–5.6 and the gRPC binding): the
//! request headers `mcp-protocol-version`, `mcp-method`, `mcp-name` and
//! `mcp-param-*` repeat parts of the body, and the server checks them.

use super::error::{HEADER_MISMATCH, INVALID_REQUEST, RpcError};
use super::json::{self, MAX_SAFE_INTEGER};
use crate::grpc::base64;
use crate::h2::HeaderList;

const SENTINEL_START: &[u8] = b"=?base64?";
const SENTINEL_END: &[u8] = b"?=";

const fn mismatch(message: &'static str) -> RpcError {
    RpcError::new(HEADER_MISMATCH, message)
}

/// What a mirrored header value stands for, checked and not copied:
/// surrounding spaces and tabs dropped, then either raw text (printable
/// ASCII and interior tabs) or the payload of `=?base64?…?=`, which must be
/// canonical base64 (padded, zero trailing bits). Values of any length.
#[derive(Debug, Clone, Copy)]
enum HeaderText<'a> {
    Raw(&'a [u8]),
    Base64(&'a [u8]),
}

impl<'a> HeaderText<'a> {
    fn read(value: &'a [u8]) -> Result<Self, RpcError> {
        let value = trim_ows(value);
        if let Some(payload) = value
            .strip_prefix(SENTINEL_START)
            .and_then(|v| v.strip_suffix(SENTINEL_END))
        {
            return if base64::is_canonical(payload) {
                Ok(Self::Base64(payload))
            } else {
                Err(mismatch("undecodable =?base64? header value"))
            };
        }
        if !value
            .iter()
            .all(|&b| (0x20..=0x7e).contains(&b) || b == b'\t')
        {
            return Err(mismatch(
                "header value with a control character or a non-ASCII byte",
            ));
        }
        Ok(Self::Raw(value))
    }

    fn octets(self) -> impl Iterator<Item = u8> + 'a {
        let (raw, encoded) = match self {
            Self::Raw(r) => (r, &b""[..]),
            Self::Base64(p) => (&b""[..], p),
        };
        raw.iter().copied().chain(base64::decoded(encoded))
    }

    /// Whether it equals a raw JSON string once unescaped.
    fn eq_json_string(self, raw: &[u8]) -> bool {
        match self {
            Self::Raw(text) => json::str_eq(raw, text),
            Self::Base64(_) => json::str_eq_iter(raw, self.octets()),
        }
    }
}

/// Whether the mirrored header value `header` stands for the raw JSON
/// string `raw`; a malformed header value is -32020. No length limit.
pub fn header_eq(header: &[u8], raw: &[u8]) -> Result<bool, RpcError> {
    // The usual case: the header repeats the string's octets, which have
    // no escape, and is plain printable ASCII, so it reads as raw text.
    if json::WORDS
        && let [b'"', inner @ .., b'"'] = raw
        && json::bytes_eq(inner, header)
        && is_plain_text(header)
    {
        return Ok(true);
    }
    header_eq_decoded(header, raw)
}

/// [`header_eq`] of any header value, decoded: out of line on hosts, so
/// that the usual case saves no registers for it.
#[cfg_attr(not(target_os = "none"), inline(never))]
fn header_eq_decoded(header: &[u8], raw: &[u8]) -> Result<bool, RpcError> {
    Ok(HeaderText::read(header)?.eq_json_string(raw))
}

/// Whether `value` reads as itself in a mirrored header and in a JSON
/// string: printable ASCII without a backslash, no space at either end,
/// not the sentinel's shape.
fn is_plain_text(value: &[u8]) -> bool {
    printable_no_backslash(value)
        && value.first() != Some(&b' ')
        && value.last() != Some(&b' ')
        && !(value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END))
}

/// Whether every octet of `value` is printable ASCII (0x20 to 0x7e) and
/// none is a backslash: up to sixteen octets by two overlapping words on
/// hosts.
fn printable_no_backslash(value: &[u8]) -> bool {
    if json::WORDS
        && value.len() <= 16
        && let (Some(a), Some(b)) = (value.first_chunk::<8>(), value.last_chunk::<8>())
    {
        const LO: u64 = 0x0101_0101_0101_0101;
        const HI: u64 = 0x8080_8080_8080_8080;
        // Flags (high bits, any of them a real one: a borrow only runs
        // upwards from an octet below 0x20 or a backslash) the octets
        // below 0x20, from 0x7f up, and the backslashes.
        let bad = |w: u64| {
            let control = w.wrapping_sub(LO * 0x20) & !w;
            let high = ((w & !HI).wrapping_add(LO) | w) & HI;
            let backslash = (w ^ (LO * u64::from(b'\\'))).wrapping_sub(LO) & !w;
            (control | backslash) & HI | high
        };
        return bad(u64::from_le_bytes(*a)) | bad(u64::from_le_bytes(*b)) == 0;
    }
    value
        .iter()
        .all(|&b| (0x20..=0x7e).contains(&b) && b != b'\\')
}

/// Decodes a mirrored header value into `out`: surrounding spaces and tabs
/// are dropped; `=?base64?…?=` (canonical) is decoded; a raw value may
/// hold printable ASCII and interior tabs only. An `out` too small is
/// -32020 (the checks of this module compare without it: [`header_eq`]).
pub fn decode_value<'o>(value: &[u8], out: &'o mut [u8]) -> Result<&'o [u8], RpcError> {
    let text = HeaderText::read(value)?;
    let mut n = 0;
    for b in text.octets() {
        *out.get_mut(n).ok_or(mismatch("header value too long"))? = b;
        n += 1;
    }
    Ok(&out[..n])
}

/// The integer a header value's octets spell, as [`json::as_i64`] reads a
/// number (an optional `-`, at most 18 digits, an optional `.0…`), read
/// one octet at a time.
fn int_of(mut octets: impl Iterator<Item = u8>) -> Option<i64> {
    let mut c = octets.next()?;
    let neg = c == b'-';
    if neg {
        c = octets.next()?;
    }
    let (mut v, mut digits) = (0i64, 0);
    loop {
        if !c.is_ascii_digit() || digits == 18 {
            break;
        }
        v = v * 10 + i64::from(c - b'0');
        digits += 1;
        match octets.next() {
            Some(next) => c = next,
            None => return Some(if neg { -v } else { v }),
        }
    }
    if digits == 0 || c != b'.' {
        return None;
    }
    let mut zeros = 0;
    for z in octets {
        if z != b'0' {
            return None;
        }
        zeros += 1;
    }
    (zeros > 0).then_some(if neg { -v } else { v })
}

/// Whether a value goes into a mirrored header as is: printable ASCII,
/// not empty, no surrounding space, not looking like the sentinel.
pub fn is_plain_value(value: &[u8]) -> bool {
    let printable = value.iter().all(|&b| (0x20..=0x7e).contains(&b));
    let padded = value.first() == Some(&b' ') || value.last() == Some(&b' ');
    let looks_encoded = value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END);
    printable && !padded && !looks_encoded && !value.is_empty()
}

/// The length of `value` in a mirrored header (as is or as the sentinel).
pub fn encoded_len(value: &[u8]) -> usize {
    if is_plain_value(value) {
        value.len()
    } else {
        SENTINEL_START.len() + base64::encoded_len(value.len()) + SENTINEL_END.len()
    }
}

/// Writes the sentinel `=?base64?…?=` of the `len` octets at `at + gap` of
/// `buf` to `buf[at..]`, where `gap` is their encoded length
/// ([`encoded_len`]); returns it. The octets may be overwritten.
pub fn encode_in_place(buf: &mut [u8], at: usize, len: usize) -> Option<usize> {
    let total = SENTINEL_START.len() + base64::encoded_len(len) + SENTINEL_END.len();
    let (dst, src) = buf.get_mut(at..)?.split_at_mut(total);
    let src = src.get(..len)?;
    dst[..SENTINEL_START.len()].copy_from_slice(SENTINEL_START);
    let n = base64::encode(src, &mut dst[SENTINEL_START.len()..])?;
    dst[SENTINEL_START.len() + n..].copy_from_slice(SENTINEL_END);
    Some(total)
}

/// Encodes a value for a mirrored header: as is when it is printable ASCII
/// without surrounding whitespace and does not look like the sentinel, else
/// as `=?base64?…?=`.
pub fn encode_value<'o>(value: &[u8], out: &'o mut [u8]) -> Option<&'o [u8]> {
    if is_plain_value(value) {
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
    /// and not null. Each object on the path is walked whole: a key of the
    /// path that one of them has twice (in any spelling) is
    /// [`RepeatedKey`](json::RepeatedKey), as readers differ on which they
    /// take.
    pub fn value_in<'a>(&self, arguments: &'a [u8]) -> Result<Option<&'a [u8]>, json::RepeatedKey> {
        let mut v = arguments;
        for key in self.path() {
            let mut buf = [0u8; 128];
            let Some(key) = json::unescape(key, &mut buf) else {
                return Ok(None);
            };
            match json::get_unique(v, key)? {
                Some(inner) => v = inner,
                None => return Ok(None),
            }
        }
        Ok((json::kind(v) != Some(json::Kind::Null)).then_some(v))
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

    /// The standard mirrored headers, each the one field of its name, and
    /// whether one of them or an `mcp-param-*` name is given twice. The
    /// default finds them with the two lookups above (a walk per name); a
    /// source that holds its fields with their values overrides it with
    /// one walk, [`Mirrors::scan`].
    fn mirrors(&self) -> Mirrors<'_> {
        let mut mirrors = Mirrors::default();
        let mut counts = [0u8; 3];
        self.find_header(&mut |name| {
            match Standard::of(name) {
                Some(s) => counts[s as usize] = counts[s as usize].saturating_add(1),
                // Each `mcp-param-*` name counted whole: sources that do
                // not override this are small (an HTTP/1.1 head).
                None if is_any_param_header(name) => {
                    mirrors.repeated |= count_fields(self, &mut |other| other == name) > 1;
                }
                None => {}
            }
            false
        });
        mirrors.repeated |= counts.iter().any(|&n| n > 1);
        mirrors.version = self.header(b"mcp-protocol-version");
        mirrors.method = self.header(b"mcp-method");
        mirrors.name = self.header(b"mcp-name");
        mirrors
    }
}

/// How many fields of `headers` have a name that `matches`.
fn count_fields(
    headers: &(impl HeaderSource + ?Sized),
    matches: &mut dyn FnMut(&[u8]) -> bool,
) -> usize {
    let mut n = 0;
    headers.find_header(&mut |name| {
        n += usize::from(matches(name));
        false
    });
    n
}

/// The standard mirrored headers of a request (§5.4), each a singleton:
/// a request that gives one twice, or an `mcp-param-*` name twice, is
/// refused (-32020) instead of read first- or last-wins, as a proxy in
/// front may route on the other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mirrors<'h> {
    /// `mcp-protocol-version`.
    pub version: Option<&'h [u8]>,
    /// `mcp-method`.
    pub method: Option<&'h [u8]>,
    /// `mcp-name`.
    pub name: Option<&'h [u8]>,
    /// A standard header or an `mcp-param-*` name occurs more than once.
    pub repeated: bool,
}

/// A request that gives a mirrored header twice.
pub const REPEATED_HEADER: RpcError =
    mismatch("mcp-protocol-version, mcp-method, mcp-name or an mcp-param header given twice");

/// The `mcp-param-*` names [`Mirrors::scan`] keeps to compare later ones
/// with: every repeat among up to this many is found, and a repeat of one
/// of them anywhere; the annotated ones, which the check reads, are
/// counted whole besides ([`check`]).
const KEPT_PARAM_NAMES: usize = 16;

/// A standard mirrored header.
#[derive(Debug, Clone, Copy)]
enum Standard {
    Version = 0,
    Method = 1,
    Name = 2,
}

impl Standard {
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn of(name: &[u8]) -> Option<Self> {
        // By length first: most fields of a request are none of these.
        match name.len() {
            20 if json::bytes_eq(name, b"mcp-protocol-version") => Some(Self::Version),
            10 if json::bytes_eq(name, b"mcp-method") => Some(Self::Method),
            8 if json::bytes_eq(name, b"mcp-name") => Some(Self::Name),
            _ => None,
        }
    }
}

/// Whether a (lowercase) header name is `mcp-param-` and a name.
fn is_any_param_header(name: &[u8]) -> bool {
    name.len() > 10 && name.starts_with(b"mcp-param-")
}

impl<'h> Mirrors<'h> {
    /// The mirrors of a request whose fields (lowercase names, values)
    /// `fields` yields, in one walk.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn scan(fields: impl Iterator<Item = (&'h [u8], &'h [u8])>) -> Self {
        let mut m = Self::default();
        let mut params = ParamNames::default();
        for (name, value) in fields {
            let slot = match Standard::of(name) {
                Some(Standard::Version) => &mut m.version,
                Some(Standard::Method) => &mut m.method,
                Some(Standard::Name) => &mut m.name,
                None => {
                    if is_any_param_header(name) {
                        m.repeated |= params.insert(name);
                    }
                    continue;
                }
            };
            m.repeated |= slot.replace(value).is_some();
        }
        m
    }
}

/// The `mcp-param-*` names met so far (up to [`KEPT_PARAM_NAMES`]).
#[derive(Default)]
struct ParamNames<'h> {
    kept: [&'h [u8]; KEPT_PARAM_NAMES],
    len: usize,
}

impl<'h> ParamNames<'h> {
    /// Whether `name` was met before; keeps it while there is room.
    #[cfg_attr(not(target_os = "none"), inline(never))]
    fn insert(&mut self, name: &'h [u8]) -> bool {
        let kept = self.kept.get(..self.len).unwrap_or_default();
        if kept.contains(&name) {
            return true;
        }
        if let Some(slot) = self.kept.get_mut(self.len) {
            *slot = name;
            self.len += 1;
        }
        false
    }
}

impl HeaderSource for HeaderList<'_> {
    fn header(&self, name: &[u8]) -> Option<&[u8]> {
        self.get(name)
    }

    fn find_header(&self, matches: &mut dyn FnMut(&[u8]) -> bool) -> Option<&[u8]> {
        self.iter().find(|f| matches(f.name)).map(|f| f.value)
    }

    fn mirrors(&self) -> Mirrors<'_> {
        Mirrors::scan(self.iter().map(|f| (f.name, f.value)))
    }
}

/// Checks the mirrored headers of a request against its body. Any missing,
/// malformed, repeated or different header is -32020. Values are compared
/// as they stand in the header and the body, without a copy: no length
/// limit but the header list's own.
pub fn check<'s, const N: usize>(
    body: &Mirrored<'_>,
    headers: &(impl HeaderSource + ?Sized),
    annotations: Option<&Annotations<'s, N>>,
) -> Result<(), RpcError> {
    let mirrors = headers.mirrors();
    if mirrors.repeated {
        return Err(REPEATED_HEADER);
    }
    let version = mirrors.version.ok_or(MISSING_VERSION)?;
    if !header_eq(version, body.protocol_version)? {
        return Err(mismatch("mcp-protocol-version differs from the body"));
    }
    check_after_version(body, &mirrors, headers, annotations)
}

/// A request without the `mcp-protocol-version` header.
pub(crate) const MISSING_VERSION: RpcError = mismatch("missing mcp-protocol-version");

/// [`check`] of all but `mcp-protocol-version`, for a caller that checked
/// it already and read `mirrors` (not repeated) from `headers`.
pub(crate) fn check_after_version<'s, const N: usize>(
    body: &Mirrored<'_>,
    mirrors: &Mirrors<'_>,
    headers: &(impl HeaderSource + ?Sized),
    annotations: Option<&Annotations<'s, N>>,
) -> Result<(), RpcError> {
    let method = mirrors.method.ok_or(mismatch("missing mcp-method"))?;
    if !header_eq(method, body.method)? {
        return Err(mismatch("mcp-method differs from the body"));
    }
    if let Some(name) = body.name {
        let h = mirrors.name.ok_or(mismatch("missing mcp-name"))?;
        if json::kind(name) != Some(json::Kind::String) || !header_eq(h, name)? {
            return Err(mismatch("mcp-name differs from the body"));
        }
    }
    let (Some(annotations), Some(arguments)) = (annotations, body.arguments) else {
        return Ok(());
    };
    for ann in annotations.iter() {
        // The argument as every reader of the body takes it: a member
        // repeated on its path is refused, not read first-wins.
        let Some(value) = ann.value_in(arguments).map_err(|_| REPEATED_ARGUMENT)? else {
            continue;
        };
        let matches = &mut |name: &[u8]| is_param_header(name, ann.name);
        let h = headers.find_header(matches).ok_or(mismatch(
            "missing mcp-param header for an annotated argument",
        ))?;
        // Counted whole, whatever [`Mirrors::scan`] kept.
        if count_fields(headers, matches) > 1 {
            return Err(REPEATED_HEADER);
        }
        let text = HeaderText::read(h)?;
        let same = match (ann.kind, json::kind(value)) {
            (ParamType::String, Some(json::Kind::String)) => text.eq_json_string(value),
            (ParamType::Integer, Some(json::Kind::Number)) => {
                let body_int = json::as_i64(value)
                    .filter(|v| v.abs() <= MAX_SAFE_INTEGER)
                    .ok_or(mismatch("annotated integer outside ±(2^53-1)"))?;
                int_of(text.octets()) == Some(body_int)
            }
            (ParamType::Boolean, Some(json::Kind::Bool)) => {
                text.octets().eq(json::trim(value).iter().copied())
            }
            _ => false,
        };
        if !same {
            return Err(mismatch("mcp-param header differs from the body"));
        }
    }
    Ok(())
}

/// A request with an `mcp-param-*` header for a tool whose input schema a
/// forwarding server does not know: the header cannot be checked against
/// the body, so it is refused rather than passed on unchecked (a gateway
/// in front may route or authorize on it).
#[cfg(feature = "forward")]
pub const UNCHECKED_PARAM_HEADER: RpcError = mismatch(
    "an mcp-param header for a tool whose input schema is not known here: it cannot be checked against the body",
);

/// Whether `headers` has an `mcp-param-*` field.
#[cfg(feature = "forward")]
pub(crate) fn has_param_header(headers: &(impl HeaderSource + ?Sized)) -> bool {
    headers
        .find_header(&mut |name| is_any_param_header(name))
        .is_some()
}

/// A request whose annotated argument's path has a member twice: the
/// body is not one request (-32600), whatever the headers say.
pub const REPEATED_ARGUMENT: RpcError = RpcError::new(
    INVALID_REQUEST,
    "duplicate member on the path of an x-mcp-header argument",
);

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
    fn the_printable_test_by_words_agrees_with_the_octet_test() {
        let octets = |v: &[u8]| v.iter().all(|&b| (0x20..=0x7e).contains(&b) && b != b'\\');
        for len in 0..=20 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut v = std::vec![b'a'; len];
                    v[at] = b;
                    assert_eq!(printable_no_backslash(&v), octets(&v), "{v:?}");
                    // Beside an octet a borrow runs out of.
                    if at + 1 < len {
                        v[at + 1] = b' ';
                        assert_eq!(printable_no_backslash(&v), octets(&v), "{v:?}");
                    }
                }
            }
        }
    }

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

    #[test]
    fn the_base64_sentinel_is_canonical_or_a_mismatch() {
        let mut buf = [0u8; 16];
        // "foo" is Zm9v; "f" is Zg==.
        assert_eq!(decode_value(b"=?base64?Zg==?=", &mut buf).unwrap(), b"f");
        for bad in [
            &b"=?base64?Zg?="[..],
            b"=?base64?Zh==?=",
            b"=?base64?Zm9=?=",
            b"=?base64?Zg==Zg==?=",
        ] {
            let e = decode_value(bad, &mut buf).unwrap_err();
            assert_eq!(e.code, HEADER_MISMATCH, "{bad:?}");
            assert_eq!(header_eq(bad, br#""f""#).unwrap_err().code, HEADER_MISMATCH);
        }
    }

    #[test]
    fn a_header_that_repeats_the_raw_string_is_read_as_a_header() {
        let cases: [(&[u8], Result<bool, RpcError>); 7] = [
            (b"tools/call", Ok(true)),
            (b"", Ok(true)),
            // The body's escape stands for a newline, the header's octets not.
            (br"a\nb", Ok(false)),
            // Spaces around a header value are not part of it.
            (b" x", Ok(false)),
            (b"x ", Ok(false)),
            // The sentinel stands for its decoded payload ("f").
            (b"=?base64?Zg==?=", Ok(false)),
            (b"a\x7fb", Err(mismatch(""))),
        ];
        for (header, want) in cases {
            let mut raw = std::vec![b'"'];
            raw.extend_from_slice(header);
            raw.push(b'"');
            let got = header_eq(header, &raw);
            match want {
                Ok(same) => assert_eq!(got, Ok(same), "{header:?}"),
                Err(_) => assert_eq!(got.unwrap_err().code, HEADER_MISMATCH, "{header:?}"),
            }
        }
    }

    #[test]
    fn values_compare_at_any_length() {
        for len in [300, 4096, 70_000] {
            let text: std::string::String =
                (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            let raw = std::format!("\"{text}\"");
            assert_eq!(header_eq(text.as_bytes(), raw.as_bytes()), Ok(true));
            let mut encoded = std::vec![0u8; len * 2 + 16];
            let accented = std::format!("{text}é");
            let enc = encode_value(accented.as_bytes(), &mut encoded).unwrap();
            let raw = std::format!("\"{text}\\u00e9\"");
            assert_eq!(header_eq(enc, raw.as_bytes()), Ok(true));
            assert_eq!(
                header_eq(enc, std::format!("\"{text}e\"").as_bytes()),
                Ok(false)
            );
            // One octet shorter or longer is a difference, not an error.
            assert_eq!(header_eq(&text.as_bytes()[1..], raw.as_bytes()), Ok(false));
        }
    }

    #[test]
    fn integers_read_octet_by_octet_as_json_numbers() {
        for (text, want) in [
            (&b"42"[..], Some(42)),
            (b"-7", Some(-7)),
            (b"9007199254740991", Some(9_007_199_254_740_991)),
            (b"3.00", Some(3)),
            (b"3.", None),
            (b"3.5", None),
            (b"", None),
            (b"-", None),
            (b"12a", None),
            (b"1234567890123456789", None),
        ] {
            assert_eq!(int_of(text.iter().copied()), want, "{text:?}");
            assert_eq!(int_of(text.iter().copied()), json::as_i64(text), "{text:?}");
        }
    }

    /// Request headers as a list of fields, read through the trait's
    /// default `mirrors` (the walk per name).
    struct Fields<'a>(&'a [(&'a [u8], &'a [u8])]);

    impl HeaderSource for Fields<'_> {
        fn header(&self, name: &[u8]) -> Option<&[u8]> {
            self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
        }

        fn find_header(&self, matches: &mut dyn FnMut(&[u8]) -> bool) -> Option<&[u8]> {
            self.0.iter().find(|(n, _)| matches(n)).map(|(_, v)| *v)
        }
    }

    /// A standard mirrored header or an `mcp-param-*` name given twice is
    /// a repeat, by the one walk and by the default alike; other
    /// repeated fields are not.
    #[test]
    fn repeated_mirrored_headers_are_found() {
        let base: [(&[u8], &[u8]); 4] = [
            (b"mcp-protocol-version", b"2026-07-28"),
            (b"mcp-method", b"tools/call"),
            (b"mcp-name", b"echo"),
            (b"mcp-param-region", b"us-west"),
        ];
        let params: std::vec::Vec<std::string::String> =
            (0..40).map(|i| std::format!("mcp-param-p{i}")).collect();
        type Case<'a> = (std::vec::Vec<(&'a [u8], &'a [u8])>, bool);
        let mut cases: std::vec::Vec<Case<'_>> = std::vec![
            (base.to_vec(), false),
            (
                std::vec![(&b"accept"[..], &b"a"[..]), (b"accept", b"b")],
                false
            ),
            (
                std::vec![(&b"mcp-param-a"[..], &b"1"[..]), (b"mcp-param-b", b"1")],
                false
            ),
        ];
        for extra in base {
            let mut fields = base.to_vec();
            fields.push((extra.0, b"other"));
            cases.push((fields.clone(), true));
            // The same value twice is a repeat too.
            fields.pop();
            fields.insert(0, extra);
            cases.push((fields, true));
        }
        // Many mcp-param names: a repeat of a kept one, anywhere.
        let mut many: std::vec::Vec<(&[u8], &[u8])> =
            params.iter().map(|p| (p.as_bytes(), &b"v"[..])).collect();
        cases.push((many.clone(), false));
        many.push((params[3].as_bytes(), b"w"));
        cases.push((many, true));
        for (fields, repeated) in cases {
            let names: std::vec::Vec<_> = fields
                .iter()
                .map(|(n, _)| core::str::from_utf8(n).unwrap())
                .collect();
            let one = Mirrors::scan(fields.iter().copied());
            assert_eq!(one.repeated, repeated, "{names:?}");
            let source = Fields(&fields);
            let default = source.mirrors();
            assert_eq!(default.repeated, repeated, "{names:?}");
            if !repeated {
                assert_eq!(one, default, "{names:?}");
            }
        }
        let one = Mirrors::scan(base.iter().copied());
        assert_eq!(
            (one.version, one.method, one.name),
            (
                Some(&b"2026-07-28"[..]),
                Some(&b"tools/call"[..]),
                Some(&b"echo"[..])
            )
        );
    }

    /// [`check`] refuses a repeated mirrored header (-32020), and an
    /// annotated argument whose path has a member twice, in any spelling
    /// (-32600), before comparing anything.
    #[test]
    fn the_check_refuses_repeats() {
        let a = Annotations::<'_, 8>::collect(SCHEMA).unwrap();
        let body = |arguments: &'static [u8]| Mirrored {
            protocol_version: br#""2026-07-28""#,
            method: br#""tools/call""#,
            name: Some(br#""run""#),
            arguments: Some(arguments),
        };
        let fields = |extra: &[(&'static [u8], &'static [u8])]| {
            let mut f: std::vec::Vec<(&[u8], &[u8])> = std::vec![
                (b"mcp-protocol-version", b"2026-07-28"),
                (b"mcp-method", b"tools/call"),
                (b"mcp-name", b"run"),
                (b"mcp-param-region", b"us-west"),
            ];
            f.extend_from_slice(extra);
            f
        };
        let good = br#"{"target":{"region":"us-west"}}"#;
        assert_eq!(check(&body(good), &Fields(&fields(&[])), Some(&a)), Ok(()));
        for extra in [
            &[(&b"mcp-name"[..], &b"lookup"[..])][..],
            &[(b"mcp-method", b"tools/call")],
            &[(b"mcp-protocol-version", b"2026-07-28")],
            &[(b"mcp-param-region", b"eu-secret")],
        ] {
            let e = check(&body(good), &Fields(&fields(extra)), Some(&a));
            assert_eq!(e, Err(REPEATED_HEADER), "{extra:?}");
        }
        for args in [
            &br#"{"target":{"region":"us-west","region":"eu-secret"}}"#[..],
            br#"{"target":{"region":"us-west","region":"eu-secret"}}"#,
            br#"{"target":{"region":"us-west"},"target":{"region":"eu-secret"}}"#,
        ] {
            let e = check(
                &Mirrored {
                    arguments: Some(args),
                    ..body(good)
                },
                &Fields(&fields(&[])),
                Some(&a),
            );
            assert_eq!(
                e,
                Err(REPEATED_ARGUMENT),
                "{:?}",
                core::str::from_utf8(args)
            );
        }
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
        assert_eq!(region.value_in(args), Ok(Some(&br#""eu-north1""#[..])));
        // A key of the path twice, in any spelling, at any level.
        for args in [
            &br#"{"target":{"region":"us-west","region":"eu-secret"}}"#[..],
            br#"{"target":{"region":"us-west","\u0072egion":"eu-secret"}}"#,
            br#"{"target":{"region":"us-west"},"target":{"region":"eu-secret"}}"#,
        ] {
            assert_eq!(region.value_in(args), Err(json::RepeatedKey));
        }
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
