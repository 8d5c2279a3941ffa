//! Protobuf → JSON: reads a validated message through its [`Mapping`] and
//! writes the JSON members, in the table's order.
//!
//! A map (`Struct`, `map<string, string>`, the input maps) whose entries
//! repeat a key is refused ([`TypedError::Invalid`]: -32602 for a request)
//! rather than read last-wins as protobuf would. Either way the JSON
//! written never repeats a key (which the engine would refuse, and JSON
//! readers take first or last); refusing keeps one answer for every path
//! a message takes (`mcpwire serve`, a bridge forwarding the JSON on), is
//! the choice the message view makes for a repeated singular field
//! ([`DecodeError::DuplicateField`](mcpwire_proto::DecodeError)), and no
//! encoder of the binding writes a repeated key (they encode from JSON
//! objects or dictionaries): a repeat is a broken or a hostile peer. The
//! check sorts where each key lies in a table on the stack
//! ([`MAP_KEYS`] at most): O(m log m) for a map of m entries, whatever the
//! keys. The encoder refuses the same maps (`encode.rs`), so that what one
//! side writes the other reads.

use core::fmt::Write as _;

use mcpwire_proto::gcp::MessageRef;

use super::table::{self, ALWAYS, Conv, Entry, Mapping, Union};
use super::writer::JsonWriter;
use super::{Base64Check, MAP_KEYS, Result, SMALL_MAP, TypedError};

pub(super) type J<'b> = JsonWriter<'b>;

/// 2^53 as a double: whole numbers up to it decode as JSON integers.
const SAFE: f64 = 9_007_199_254_740_992.0;

/// Writes `"key":` after a comma unless it is the object's first member.
fn key(jw: &mut J<'_>, first: &mut bool, key: &str) {
    jw.key(*first, key.as_bytes());
    *first = false;
}

/// Room for any finite double's `Display` text: 309 integer digits, or
/// "0." and 323 zeros before the last digits of the smallest subnormal.
const DIGITS: usize = 344;

/// A text buffer for `core::fmt` number formatting.
struct Digits {
    buf: [u8; DIGITS],
    len: usize,
}

impl core::fmt::Write for Digits {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        self.buf
            .get_mut(self.len..end)
            .ok_or(core::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A finite double as JSON: a whole number within ±2^53 as an integer, a
/// large or tiny one with an exponent (so that it never reads back as an
/// unsafe integer), else the shortest decimal that reads back the same.
pub(super) fn double(jw: &mut J<'_>, x: f64) -> Result<()> {
    // Zero goes through `Display`, which keeps the sign of -0.
    let whole = (x != 0.0 && x.abs() <= SAFE && (x as i64) as f64 == x).then_some(x as i64);
    let plain = x == 0.0 || (1e-6..SAFE).contains(&x.abs());
    number(jw, x, x.is_finite(), whole, plain)
}

/// A finite float as the shortest decimal of the `f32` (0.3 stays 0.3),
/// by the same rules.
fn float(jw: &mut J<'_>, x: f32) -> Result<()> {
    let whole =
        (x != 0.0 && f64::from(x.abs()) <= SAFE && (x as i64) as f32 == x).then_some(x as i64);
    let plain = x == 0.0 || (1e-6..SAFE).contains(&f64::from(x.abs()));
    number(jw, x, x.is_finite(), whole, plain)
}

/// Writes `x`: `whole` as an integer, else as the shortest decimal when
/// `plain`, else with an exponent.
fn number<T>(jw: &mut J<'_>, x: T, finite: bool, whole: Option<i64>, plain: bool) -> Result<()>
where
    T: core::fmt::Display + core::fmt::LowerExp,
{
    if !finite {
        return Err(TypedError::Invalid("a number that is not finite"));
    }
    if let Some(n) = whole {
        jw.int(n);
        return Ok(());
    }
    let mut d = Digits {
        buf: [0; DIGITS],
        len: 0,
    };
    write!(d, "{x}").map_err(|_| TypedError::Invalid("a number too long to write"))?;
    let text = d.buf.get(..d.len).unwrap_or_default();
    if plain {
        jw.raw(text);
    } else {
        exponent(jw, text);
    }
    Ok(())
}

/// Rewrites the `Display` text of a float outside the plain range (a whole
/// number of more than 16 digits, or `0.000000…`) with an exponent, as
/// `{:e}` writes it: the same shortest digits, so `core`'s exponent
/// formatting stays out of the firmware.
fn exponent(jw: &mut J<'_>, text: &[u8]) {
    let (sign, body) = match text.split_first() {
        Some((b'-', rest)) => (&b"-"[..], rest),
        _ => (&b""[..], text),
    };
    let (digits, exp) = match body.iter().position(|&b| b == b'.') {
        // 0.000ddd: the exponent counts the zeros after the point.
        Some(dot) => {
            let frac = body.get(dot + 1..).unwrap_or_default();
            let zeros = frac.iter().take_while(|&&b| b == b'0').count();
            (frac.get(zeros..).unwrap_or_default(), -(zeros as i64) - 1)
        }
        // ddd000: the shortest digits, then zeros.
        None => {
            let end = body.iter().rposition(|&b| b != b'0').map_or(0, |i| i + 1);
            (body.get(..end).unwrap_or_default(), body.len() as i64 - 1)
        }
    };
    jw.raw(sign);
    if let Some((first, rest)) = digits.split_first() {
        jw.raw(core::slice::from_ref(first));
        if !rest.is_empty() {
            jw.raw(b".").raw(rest);
        }
    }
    jw.raw(b"e").int(exp);
}

fn text(jw: &mut J<'_>, bytes: &[u8]) {
    jw.string(bytes);
}

/// Refuses a map (the entry messages of field `n` of `msg`) whose entries
/// repeat a key (field 1; absent is "").
pub(super) fn unique_keys(msg: MessageRef<'_>, n: u32) -> Result<()> {
    // Most maps have a few entries: no table for fewer than two.
    let m = msg.messages(n).take(MAP_KEYS + 1).count();
    match m {
        0 | 1 => Ok(()),
        2..=SMALL_MAP => sorted_unique::<SMALL_MAP>(msg, n),
        _ if m <= MAP_KEYS => sorted_unique::<MAP_KEYS>(msg, n),
        _ => Err(TypedError::Unexpressible(
            "a map of more entries than the transcoder checks for repeated keys",
        )),
    }
}

/// [`unique_keys`] of a map of at most `N` entries: where each key lies in
/// the message, sorted by the key's octets (strings of a validated
/// message, UTF-8: equal octets are equal text), then neighbours compared.
#[cfg_attr(not(target_os = "none"), inline(never))]
fn sorted_unique<const N: usize>(msg: MessageRef<'_>, n: u32) -> Result<()> {
    const TOO_MANY: TypedError = TypedError::Unexpressible("a map too large to check");
    let bytes = msg.as_bytes();
    let mut keys = [(0u32, 0u32); N];
    let mut len = 0;
    for entry in msg.messages(n) {
        // An absent key is "": a place past the message, of no length.
        let at = super::json::span(bytes, entry.bytes(1).unwrap_or_default());
        let place = (
            u32::try_from(at.start).map_err(|_| TOO_MANY)?,
            u32::try_from(at.len()).map_err(|_| TOO_MANY)?,
        );
        *keys.get_mut(len).ok_or(TOO_MANY)? = place;
        len += 1;
    }
    let key = |&(at, len): &(u32, u32)| {
        let at = at as usize;
        bytes.get(at..at + len as usize).unwrap_or_default()
    };
    let keys = keys.get_mut(..len).unwrap_or_default();
    keys.sort_unstable_by(|a, b| key(a).cmp(key(b)));
    if keys.windows(2).any(|w| key(&w[0]) == key(&w[1])) {
        return Err(TypedError::Invalid("a map with a repeated key"));
    }
    Ok(())
}

/// A `Struct` as a JSON object.
pub(super) fn structure(jw: &mut J<'_>, s: MessageRef<'_>) -> Result<()> {
    unique_keys(s, 1)?;
    jw.raw(b"{");
    let mut first = true;
    for entry in s.messages(1) {
        if !first {
            jw.raw(b",");
        }
        first = false;
        text(jw, entry.bytes(1).unwrap_or_default());
        jw.raw(b":");
        // A validated entry has a value.
        let value = entry
            .message(2)
            .ok_or(TypedError::Malformed(mcpwire_proto::DecodeError::ValueKind))?;
        value_json(jw, value)?;
    }
    jw.raw(b"}");
    Ok(())
}

/// A `google.protobuf.Value` as JSON.
fn value_json(jw: &mut J<'_>, v: MessageRef<'_>) -> Result<()> {
    if v.has(1) {
        jw.raw(b"null");
    } else if let Some(x) = v.double(2) {
        double(jw, x)?;
    } else if let Some(s) = v.bytes(3) {
        text(jw, s);
    } else if let Some(b) = v.bool(4) {
        jw.raw(if b { b"true" } else { b"false" });
    } else if let Some(s) = v.message(5) {
        structure(jw, s)?;
    } else if let Some(l) = v.message(6) {
        jw.raw(b"[");
        for (i, el) in l.messages(1).enumerate() {
            if i > 0 {
                jw.raw(b",");
            }
            value_json(jw, el)?;
        }
        jw.raw(b"]");
    } else {
        return Err(TypedError::Malformed(mcpwire_proto::DecodeError::ValueKind));
    }
    Ok(())
}

/// The message `msg` of `m` as a JSON object.
pub(super) fn object(jw: &mut J<'_>, m: &Mapping, msg: MessageRef<'_>) -> Result<()> {
    jw.raw(b"{");
    let mut first = true;
    members(jw, m, msg, &mut first)?;
    jw.raw(b"}");
    Ok(())
}

pub(super) fn members(
    jw: &mut J<'_>,
    m: &Mapping,
    msg: MessageRef<'_>,
    first: &mut bool,
) -> Result<()> {
    for entry in m.entries {
        let holder = if entry.group == 0 {
            Some(msg)
        } else {
            msg.message(u32::from(entry.group))
        };
        match holder {
            Some(h) => field(jw, m, entry, h, first)?,
            None if !entry.missing.is_empty() => return Err(TypedError::Invalid(entry.missing)),
            // A required member whose group message is absent is missing
            // as it would be from a present one (the encoder asks for it).
            None if entry.flags & table::REQ != 0 => return Err(TypedError::Missing(entry.key)),
            None => {}
        }
    }
    Ok(())
}

fn enum_name(values: &[(&'static str, i32)], n: i32) -> Result<&'static str> {
    values
        .iter()
        .find(|(_, v)| *v == n)
        .map(|(name, _)| *name)
        .ok_or(TypedError::Invalid("an enum number without an MCP value"))
}

fn base64_ok(bytes: &[u8]) -> Result<()> {
    let mut check = Base64Check::default();
    check.feed(bytes);
    if check.ok() {
        Ok(())
    } else {
        Err(TypedError::Invalid("not base64 text"))
    }
}

fn field(
    jw: &mut J<'_>,
    m: &Mapping,
    entry: &Entry,
    msg: MessageRef<'_>,
    first: &mut bool,
) -> Result<()> {
    let n = u32::from(entry.field);
    let always = entry.flags & ALWAYS != 0;
    match entry.conv {
        Conv::Str => {
            let s = msg.bytes(n).unwrap_or_default();
            if s.is_empty() && !entry.missing.is_empty() {
                return Err(TypedError::Invalid(entry.missing));
            }
            if m.one_of.contains(&entry.key) {
                // `text` of ResourceContents: emitted, possibly empty,
                // unless the other member of the pair (`blob`) is set.
                let other = m
                    .entries
                    .iter()
                    .find(|e| e.key != entry.key && m.one_of.contains(&e.key))
                    .map_or(0, |e| u32::from(e.field));
                let blob = msg.bytes(other).unwrap_or_default();
                if !blob.is_empty() {
                    if !s.is_empty() {
                        return Err(TypedError::Invalid("resource contents with text and blob"));
                    }
                    return Ok(());
                }
                key(jw, first, entry.key);
                text(jw, s);
            } else if !s.is_empty() || always {
                key(jw, first, entry.key);
                text(jw, s);
            }
        }
        Conv::StrOpt => {
            if let Some(s) = msg.bytes(n) {
                key(jw, first, entry.key);
                text(jw, s);
            }
        }
        Conv::Bool => {
            if msg.bool(n) == Some(true) {
                key(jw, first, entry.key);
                jw.raw(b"true");
            }
        }
        Conv::Uint64 => {
            let x = msg.varint(n).unwrap_or(0);
            if x > 0 {
                let x = i64::try_from(x).map_err(|_| TypedError::Invalid("a size beyond 2^63"))?;
                key(jw, first, entry.key);
                jw.int(x);
            }
        }
        Conv::Int64Opt => {
            if let Some(x) = msg.int64(n) {
                key(jw, first, entry.key);
                jw.int(x);
            }
        }
        Conv::Int32 => {
            let x = msg.int32(n).unwrap_or(0);
            key(jw, first, entry.key);
            jw.int(i64::from(x));
        }
        Conv::F64Opt => {
            if let Some(x) = msg.double(n) {
                key(jw, first, entry.key);
                double(jw, x)?;
            }
        }
        Conv::UintOpt(_) => {
            if let Some(x) = msg.varint(n) {
                let x =
                    i64::try_from(x).map_err(|_| TypedError::Invalid("an integer beyond 2^63"))?;
                key(jw, first, entry.key);
                jw.int(x);
            }
        }
        Conv::F32Opt => {
            if let Some(x) = msg.float(n) {
                key(jw, first, entry.key);
                float(jw, x)?;
            }
        }
        Conv::Base64 => {
            let b = msg.bytes(n).unwrap_or_default();
            base64_ok(b)?;
            if !b.is_empty() || always {
                key(jw, first, entry.key);
                text(jw, b);
            }
        }
        Conv::Object | Conv::ObjectOnly => {
            if let Some(s) = msg.message(n) {
                key(jw, first, entry.key);
                structure(jw, s)?;
            }
        }
        Conv::Schema => {
            key(jw, first, entry.key);
            match msg.message(n) {
                Some(s) => structure(jw, s)?,
                None => {
                    jw.raw(br#"{"type":"object"}"#);
                }
            }
        }
        Conv::Msg(sub) => match msg.message(n) {
            Some(s) => {
                key(jw, first, entry.key);
                object(jw, sub, s)?;
            }
            None if entry.flags & table::REQ != 0 => return Err(TypedError::Missing(entry.key)),
            None => {}
        },
        Conv::Inline(sub) => {
            key(jw, first, entry.key);
            object(jw, sub, msg)?;
        }
        Conv::List(sub) => {
            if always || msg.messages(n).next().is_some() {
                key(jw, first, entry.key);
                jw.raw(b"[");
                for (i, el) in msg.messages(n).enumerate() {
                    if i > 0 {
                        jw.raw(b",");
                    }
                    object(jw, sub, el)?;
                }
                jw.raw(b"]");
            }
        }
        Conv::StrList => {
            if always || msg.repeated(n).next().is_some() {
                key(jw, first, entry.key);
                jw.raw(b"[");
                for (i, el) in msg.repeated(n).enumerate() {
                    if i > 0 {
                        jw.raw(b",");
                    }
                    text(jw, el.as_len().unwrap_or_default());
                }
                jw.raw(b"]");
            }
        }
        Conv::Enum(values) => {
            let x = msg.int32(n).unwrap_or(0);
            if x == 0 {
                if entry.flags & table::REQ != 0 {
                    return Err(TypedError::Missing(entry.key));
                }
            } else {
                let name = enum_name(values, x)?;
                key(jw, first, entry.key);
                text(jw, name.as_bytes());
            }
        }
        Conv::EnumList(values) => {
            if msg.scalars(n).next().is_some() {
                key(jw, first, entry.key);
                jw.raw(b"[");
                for (i, el) in msg.scalars(n).enumerate() {
                    if i > 0 {
                        jw.raw(b",");
                    }
                    let x = el.as_varint().unwrap_or(0) as u32 as i32;
                    text(jw, enum_name(values, x)?.as_bytes());
                }
                jw.raw(b"]");
            }
        }
        Conv::StrMap => {
            if msg.messages(n).next().is_some() {
                unique_keys(msg, n)?;
                key(jw, first, entry.key);
                jw.raw(b"{");
                for (i, el) in msg.messages(n).enumerate() {
                    if i > 0 {
                        jw.raw(b",");
                    }
                    text(jw, el.bytes(1).unwrap_or_default());
                    jw.raw(b":");
                    text(jw, el.bytes(2).unwrap_or_default());
                }
                jw.raw(b"}");
            }
        }
        Conv::Blocks(u) => {
            key(jw, first, entry.key);
            jw.raw(b"[");
            for (i, el) in msg.messages(n).enumerate() {
                if i > 0 {
                    jw.raw(b",");
                }
                block(jw, u, el)?;
            }
            jw.raw(b"]");
        }
        Conv::Block(u) => {
            key(jw, first, entry.key);
            block(jw, u, msg)?;
        }
        Conv::Ref => {
            let resource = msg.message(2);
            let prompt = msg.message(3);
            key(jw, first, entry.key);
            let mut inner = true;
            jw.raw(b"{");
            match (resource, prompt) {
                (Some(r), None) => {
                    key(jw, &mut inner, "type");
                    jw.raw(br#""ref/resource""#);
                    members(jw, &table::RESOURCE_REFERENCE, r, &mut inner)?;
                }
                (None, Some(p)) => {
                    key(jw, &mut inner, "type");
                    jw.raw(br#""ref/prompt""#);
                    members(jw, &table::PROMPT_REFERENCE, p, &mut inner)?;
                }
                _ => {
                    return Err(TypedError::Invalid(
                        "a completion request needs exactly one reference",
                    ));
                }
            }
            jw.raw(b"}");
        }
        Conv::Ttl => {
            if let Some(d) = msg.message(n) {
                let secs = d.int64(1).unwrap_or(0);
                let nanos = d.int32(2).unwrap_or(0);
                if secs < 0 || !(0..1_000_000_000).contains(&nanos) {
                    return Err(TypedError::Invalid("a malformed duration"));
                }
                let ms = secs
                    .saturating_mul(1000)
                    .saturating_add(i64::from(nanos / 1_000_000));
                key(jw, first, entry.key);
                jw.int(ms);
            }
        }
        Conv::InputResponses => {
            if msg.messages(n).next().is_some() {
                key(jw, first, entry.key);
                input_map(jw, msg, n, input_response)?;
            }
        }
        Conv::Cursor | Conv::Common => {}
    }
    Ok(())
}

/// The one member of `u` set in `msg` as a content block with its `type`.
fn block(jw: &mut J<'_>, u: &Union, msg: MessageRef<'_>) -> Result<()> {
    let mut found = None;
    for (name, field, sub) in u.members {
        if let Some(body) = msg.message(*field) {
            if found.is_some() {
                return Err(TypedError::Invalid("a content block with two kinds"));
            }
            found = Some((*name, body, *sub));
        }
    }
    let Some((name, body, sub)) = found else {
        return Err(TypedError::Invalid("a content block with no kind"));
    };
    jw.raw(b"{");
    let mut first = true;
    key(jw, &mut first, "type");
    text(jw, name.as_bytes());
    members(jw, sub, body, &mut first)?;
    jw.raw(b"}");
    Ok(())
}

type InputFn = fn(&mut J<'_>, &str, MessageRef<'_>) -> Result<()>;

fn input_map(jw: &mut J<'_>, msg: MessageRef<'_>, n: u32, each: InputFn) -> Result<()> {
    unique_keys(msg, n)?;
    jw.raw(b"{");
    for (i, entry) in msg.messages(n).enumerate() {
        if i > 0 {
            jw.raw(b",");
        }
        let k = entry.str(1).unwrap_or_default();
        text(jw, k.as_bytes());
        jw.raw(b":");
        let value = entry
            .message(2)
            .ok_or(TypedError::Invalid("an input map entry without a value"))?;
        each(jw, k, value)?;
    }
    jw.raw(b"}");
    Ok(())
}

fn input_response(jw: &mut J<'_>, _key: &str, v: MessageRef<'_>) -> Result<()> {
    let members = [
        (7, &table::SAMPLING_RESULT),
        (8, &table::ROOTS_RESULT),
        (9, &table::ELICIT_RESULT),
    ];
    let mut found = None;
    for (field, sub) in members {
        if let Some(body) = v.message(field) {
            if found.is_some() {
                return Err(TypedError::Invalid("an input response with two kinds"));
            }
            found = Some((body, sub));
        }
    }
    let (body, sub) = found.ok_or(TypedError::Invalid("an input response with no kind"))?;
    object(jw, sub, body)
}

fn input_request(jw: &mut J<'_>, key: &str, v: MessageRef<'_>) -> Result<()> {
    let sampling = v.message(8);
    let roots = v.message(9);
    let elicit = v.message(11);
    let kinds = [sampling.is_some(), roots.is_some(), elicit.is_some()];
    if kinds.iter().filter(|k| **k).count() != 1 {
        return Err(TypedError::Invalid(
            "an input request needs exactly one kind",
        ));
    }
    if let Some(s) = sampling {
        jw.raw(br#"{"method":"sampling/createMessage","params":"#);
        object(jw, &table::SAMPLING_REQUEST, s)?;
        jw.raw(b"}");
    } else if roots.is_some() {
        jw.raw(br#"{"method":"roots/list"}"#);
    } else if let Some(e) = elicit {
        jw.raw(br#"{"method":"elicitation/create","params":"#);
        super::elicit::decode(jw, key, e)?;
        jw.raw(b"}");
    }
    Ok(())
}

/// A response message as the `result` object (§6.3).
pub(super) fn result(jw: &mut J<'_>, m: &Mapping, msg: MessageRef<'_>) -> Result<()> {
    let common = msg.message(1);
    let rt = common.and_then(|c| c.int32(9)).unwrap_or(0);
    let meta = common.and_then(|c| c.message(2));
    jw.raw(b"{");
    let mut first = true;
    match rt {
        0 | 1 => {
            key(jw, &mut first, "resultType");
            jw.raw(br#""complete""#);
            if let Some(meta) = meta {
                key(jw, &mut first, "_meta");
                structure(jw, meta)?;
            }
            members(jw, m, msg, &mut first)?;
        }
        2 => {
            key(jw, &mut first, "resultType");
            jw.raw(br#""input_required""#);
            if let Some(meta) = meta {
                key(jw, &mut first, "_meta");
                structure(jw, meta)?;
            }
            if let Some(c) = common {
                if c.messages(7).next().is_some() {
                    key(jw, &mut first, "inputRequests");
                    input_map(jw, c, 7, input_request)?;
                }
                if let Some(state) = c.bytes(10) {
                    key(jw, &mut first, "requestState");
                    text(jw, state);
                }
            }
        }
        _ => {
            return Err(TypedError::Invalid(
                "a result type the binding does not know",
            ));
        }
    }
    jw.raw(b"}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::string::String;

    fn written(x: impl core::fmt::Display) -> String {
        let mut out = [0u8; DIGITS + 8];
        let mut jw = JsonWriter::new(&mut out);
        exponent(&mut jw, format!("{x}").as_bytes());
        String::from_utf8(jw.finish().unwrap().to_vec()).unwrap()
    }

    /// The rewrite gives `{:e}`'s text for the floats outside the plain
    /// range: the extremes, and a spread of bit patterns of both widths.
    #[test]
    fn exponent_text_is_what_lower_exp_writes() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut doubles = std::vec![f64::MAX, f64::MIN_POSITIVE, 5e-324, -1.5e-7, 1e300, 9.5e15];
        let mut floats = std::vec![f32::MAX, f32::MIN_POSITIVE, 1e-45, -1.5e-7, 3e38, 1.6e16];
        for _ in 0..20_000 {
            doubles.push(f64::from_bits(next()));
            floats.push(f32::from_bits(next() as u32));
        }
        let mut checked = 0;
        for x in doubles {
            if x.is_finite() && x != 0.0 && !(1e-6..SAFE).contains(&x.abs()) {
                assert_eq!(written(x), format!("{x:e}"), "{x:?}");
                checked += 1;
            }
        }
        for x in floats {
            let wide = f64::from(x.abs());
            if x.is_finite() && x != 0.0 && !(1e-6..SAFE).contains(&wide) {
                assert_eq!(written(x), format!("{x:e}"), "{x:?}");
                checked += 1;
            }
        }
        assert!(checked > 20_000, "{checked}");
    }
}
