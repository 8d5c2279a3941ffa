//! JSON → protobuf: walks a JSON object member by member and writes the
//! fields its [`Mapping`] names, refusing keys without a field.

use mcpwire_proto::wire::Writer;

use super::json::{self, Kind};
use super::table::{self, ALWAYS, Conv, Entry, Mapping, REQ, Union};
use super::{Base64Check, MAP_KEYS, MAX_DEPTH, Result, SMALL_MAP, TypedError, WRITER_DEPTH};

pub(super) type W<'b> = Writer<'b, WRITER_DEPTH>;

/// 2^53: integers beyond it in magnitude are unexpressible (§4).
const SAFE: u128 = 1 << 53;

pub(super) fn deeper(depth: usize) -> Result<usize> {
    let depth = depth + 1;
    if depth > MAX_DEPTH {
        Err(TypedError::Unexpressible(
            "nested deeper than the binding allows",
        ))
    } else {
        Ok(depth)
    }
}

pub(super) fn begin(w: &mut W<'_>, field: u32) -> Result<mcpwire_proto::wire::Nested> {
    w.begin(field)
        .map_err(|_| TypedError::Unexpressible("nested deeper than the binding allows"))
}

pub(super) fn is_null(v: &[u8]) -> bool {
    json::kind(v) == Some(Kind::Null)
}

pub(super) fn expect(v: &[u8], kind: Kind, what: &'static str) -> Result<()> {
    if json::kind(v) == Some(kind) {
        Ok(())
    } else {
        Err(TypedError::Invalid(what))
    }
}

/// Writes the JSON string `v` (unescaped) as the length-delimited field
/// `field`.
pub(super) fn string(w: &mut W<'_>, field: u32, v: &[u8]) -> Result<()> {
    expect(v, Kind::String, "expected a string")?;
    if let Some(plain) = json::str_plain(v) {
        // No escapes (most strings): the length is known, nothing moves.
        if core::str::from_utf8(plain).is_err() {
            return Err(TypedError::Invalid("a string that is not UTF-8"));
        }
        w.bytes(field, plain);
        return Ok(());
    }
    let nested = begin(w, field)?;
    let ok = json::unescape_each(v, |piece| w.raw(piece));
    w.end(nested);
    if ok {
        Ok(())
    } else {
        Err(TypedError::Invalid("a string with an invalid escape"))
    }
}

fn is_empty_string(v: &[u8]) -> bool {
    json::trim(v) == b"\"\""
}

/// A JSON number as an `f64`; an integer literal must be within ±2^53.
pub(super) fn number(v: &[u8]) -> Result<f64> {
    let text = json::trim(v);
    if json::kind(text) != Some(Kind::Number) {
        return Err(TypedError::Invalid("expected a number"));
    }
    if !text.iter().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        integer(text)?;
    }
    let x: f64 = core::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(TypedError::Invalid("expected a number"))?;
    if x.is_finite() {
        Ok(x)
    } else {
        Err(TypedError::Unexpressible(
            "a number beyond the range of a double",
        ))
    }
}

/// A JSON integer within ±2^53 (`1.0` is not one).
pub(super) fn integer(v: &[u8]) -> Result<i64> {
    let text = json::trim(v);
    if json::kind(text) != Some(Kind::Number) {
        return Err(TypedError::Invalid("expected an integer"));
    }
    let (neg, digits) = match text.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(TypedError::Invalid("expected an integer"));
    }
    let mut n: u128 = 0;
    for &d in digits {
        n = n * 10 + u128::from(d - b'0');
        if n > SAFE {
            return Err(TypedError::Unexpressible(
                "an integer outside the range from -(2^53) to 2^53",
            ));
        }
    }
    // n <= 2^53 fits an i64.
    let n = n as i64;
    Ok(if neg { -n } else { n })
}

fn boolean(v: &[u8]) -> Result<bool> {
    match json::trim(v) {
        b"true" => Ok(true),
        b"false" => Ok(false),
        _ => Err(TypedError::Invalid("expected a boolean")),
    }
}

fn enum_number(v: &[u8], values: &[(&str, i32)]) -> Result<i32> {
    expect(v, Kind::String, "expected a string")?;
    values
        .iter()
        .find(|(name, _)| json::str_eq(v, name.as_bytes()))
        .map(|(_, n)| *n)
        .ok_or(TypedError::Invalid("a value the enum does not name"))
}

/// Refuses a JSON object that becomes a map when a member repeats a key
/// (its text, escapes resolved: both spellings become one protobuf key),
/// as the decoder refuses such a map; and a map larger than the decoder
/// checks.
pub(super) fn unique_keys(obj: &[u8]) -> Result<()> {
    let m = json::members(obj).take(MAP_KEYS + 1).count();
    match m {
        0 | 1 => Ok(()),
        2..=SMALL_MAP => hashed_unique::<SMALL_MAP>(obj),
        _ if m <= MAP_KEYS => hashed_unique::<MAP_KEYS>(obj),
        _ => Err(TypedError::Unexpressible(
            "a map of more entries than the transcoder checks for repeated keys",
        )),
    }
}

/// [`unique_keys`] of an object of at most `N` members: the hashes of the
/// keys' texts sorted with where each key starts, and the keys of each run
/// of one hash compared by their text.
#[cfg_attr(not(target_os = "none"), inline(never))]
fn hashed_unique<const N: usize>(obj: &[u8]) -> Result<()> {
    const TOO_MANY: TypedError = TypedError::Unexpressible("a map too large to check");
    let mut keys = [(0u32, 0u32); N];
    let mut len = 0;
    for (key, _) in json::members(obj) {
        let at = u32::try_from(json::span(obj, key).start).map_err(|_| TOO_MANY)?;
        *keys.get_mut(len).ok_or(TOO_MANY)? = (json::key_hash(key), at);
        len += 1;
    }
    let keys = keys.get_mut(..len).unwrap_or_default();
    keys.sort_unstable();
    let mut run = 0;
    for i in 1..keys.len() {
        if keys[i].0 != keys[run].0 {
            run = i;
            continue;
        }
        let key = json::raw_key_at(obj, keys[i].1);
        if keys[run..i]
            .iter()
            .any(|&(_, at)| json::text_eq(json::raw_key_at(obj, at), key))
        {
            return Err(TypedError::Invalid("a map with a repeated key"));
        }
    }
    Ok(())
}

/// The members of a JSON `Struct` (an object), into the `Struct` body.
fn struct_body(w: &mut W<'_>, obj: &[u8], depth: usize) -> Result<()> {
    unique_keys(obj)?;
    for (key, value) in json::members(obj) {
        let entry = begin(w, 1)?;
        string(w, 1, key)?;
        let val = begin(w, 2)?;
        value_body(w, value, depth)?;
        w.end(val);
        w.end(entry);
    }
    Ok(())
}

/// One JSON value as the body of a `google.protobuf.Value` (`depth` is the
/// level of the `Struct` or `ListValue` holding it).
fn value_body(w: &mut W<'_>, v: &[u8], depth: usize) -> Result<()> {
    match json::kind(v) {
        Some(Kind::Null) => w.enumeration(1, 0),
        Some(Kind::Number) => w.double(2, number(v)?),
        Some(Kind::String) => string(w, 3, v)?,
        Some(Kind::Bool) => w.bool(4, boolean(v)?),
        Some(Kind::Object) => {
            let depth = deeper(depth)?;
            let s = begin(w, 5)?;
            struct_body(w, v, depth)?;
            w.end(s);
        }
        Some(Kind::Array) => {
            let depth = deeper(depth)?;
            let l = begin(w, 6)?;
            for el in json::elements(v) {
                let val = begin(w, 1)?;
                value_body(w, el, depth)?;
                w.end(val);
            }
            w.end(l);
        }
        None => return Err(TypedError::Json),
    }
    Ok(())
}

/// A JSON object as the `Struct` field `field`.
fn structure(w: &mut W<'_>, field: u32, v: &[u8], depth: usize) -> Result<()> {
    let depth = deeper(depth)?;
    let s = begin(w, field)?;
    struct_body(w, v, depth)?;
    w.end(s);
    Ok(())
}

/// Writes the members of the JSON object `obj` as the fields of a message
/// of `m` (the message body at nesting level `depth`).
pub(super) fn object(w: &mut W<'_>, m: &Mapping, obj: &[u8], depth: usize) -> Result<()> {
    members(w, m, obj, depth, false)
}

fn find<'m>(m: &'m Mapping, key: &[u8]) -> Option<(usize, &'m Entry)> {
    m.entries
        .iter()
        .enumerate()
        .find(|(_, e)| json::key_is(key, e.key.as_bytes()))
}

pub(super) fn members(
    w: &mut W<'_>,
    m: &Mapping,
    obj: &[u8],
    depth: usize,
    skip_type: bool,
) -> Result<()> {
    expect(obj, Kind::Object, "expected an object")?;
    // Keys seen, and seen with a value other than null.
    let mut seen = 0u64;
    let mut present = 0u64;
    for (key, value) in json::members(obj) {
        let Some((i, _)) = find(m, key) else {
            if skip_type && json::key_is(key, b"type") {
                continue;
            }
            return Err(TypedError::Unexpressible(
                "a member the typed binding has no field for",
            ));
        };
        let bit = 1u64 << i;
        if seen & bit != 0 {
            return Err(TypedError::Invalid("a member occurs twice"));
        }
        seen |= bit;
        if !is_null(value) {
            present |= bit;
        }
    }
    for (i, entry) in m.entries.iter().enumerate() {
        if entry.flags & REQ != 0 && present & (1 << i) == 0 {
            return Err(TypedError::Missing(entry.key));
        }
    }
    if !m.one_of.is_empty() {
        let n = m
            .entries
            .iter()
            .enumerate()
            .filter(|(i, e)| present & (1 << i) != 0 && m.one_of.contains(&e.key))
            .count();
        if n != 1 {
            return Err(TypedError::Invalid("exactly one of text and blob"));
        }
    }
    for group in m.groups {
        let any = m
            .entries
            .iter()
            .enumerate()
            .any(|(i, e)| u32::from(e.group) == group.field && present & (1 << i) != 0);
        if !(group.always || any) {
            continue;
        }
        let inner = deeper(depth)?;
        let nested = begin(w, group.field)?;
        for (key, value) in json::members(obj) {
            if let Some((_, entry)) = find(m, key)
                && u32::from(entry.group) == group.field
                && !is_null(value)
            {
                field(w, entry, value, inner)?;
            }
        }
        w.end(nested);
    }
    for (key, value) in json::members(obj) {
        if let Some((_, entry)) = find(m, key)
            && entry.group == 0
            && !is_null(value)
        {
            field(w, entry, value, depth)?;
        }
    }
    Ok(())
}

/// One member `v` (not null) as the field of `entry`, in a message at
/// level `depth`.
fn field(w: &mut W<'_>, entry: &Entry, v: &[u8], depth: usize) -> Result<()> {
    let n = u32::from(entry.field);
    match entry.conv {
        Conv::Str => {
            expect(v, Kind::String, "expected a string")?;
            if is_empty_string(v) && !entry.missing.is_empty() {
                // The server would refuse it (§6.2).
                return Err(TypedError::Invalid(entry.missing));
            }
            if !is_empty_string(v) {
                string(w, n, v)?;
            }
        }
        Conv::StrOpt => string(w, n, v)?,
        Conv::Bool => {
            if boolean(v)? {
                w.bool(n, true);
            }
        }
        Conv::Uint64 => {
            let x = integer(v)?;
            if x < 0 {
                return Err(TypedError::Invalid("expected a non-negative integer"));
            }
            if x > 0 {
                w.varint(n, x.unsigned_abs());
            }
        }
        Conv::Int64Opt => w.int64(n, integer(v)?),
        Conv::Int32 => {
            let x = integer(v)?;
            let x = i32::try_from(x)
                .map_err(|_| TypedError::Unexpressible("an integer beyond 32 bits"))?;
            if x != 0 {
                w.int32(n, x);
            }
        }
        Conv::F64Opt => w.double(n, number(v)?),
        Conv::UintOpt(max) => {
            let x = integer(v)?;
            if x < 0 || x.unsigned_abs() > *max {
                return Err(TypedError::Unexpressible(
                    "an integer beyond the field's range",
                ));
            }
            w.varint(n, x.unsigned_abs());
        }
        Conv::F32Opt => {
            // The field is 32 bits wide: the value is rounded (lossy, §6.10),
            // once, from the decimal text.
            number(v)?;
            let x: f32 = core::str::from_utf8(json::trim(v))
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(TypedError::Invalid("expected a number"))?;
            if !x.is_finite() {
                return Err(TypedError::Unexpressible(
                    "a number beyond the range of a float",
                ));
            }
            w.float(n, x);
        }
        Conv::Base64 => {
            expect(v, Kind::String, "expected a string")?;
            let mut check = Base64Check::default();
            json::unescape_each(v, |piece| check.feed(piece));
            if !check.ok() {
                return Err(TypedError::Invalid("not base64 text"));
            }
            if !is_empty_string(v) || entry.flags & ALWAYS != 0 {
                string(w, n, v)?;
            }
        }
        Conv::Object | Conv::Schema => {
            expect(v, Kind::Object, "expected an object")?;
            structure(w, n, v, depth)?;
        }
        Conv::ObjectOnly => {
            if json::kind(v) != Some(Kind::Object) {
                return Err(TypedError::Unexpressible(
                    "structuredContent that is not an object",
                ));
            }
            structure(w, n, v, depth)?;
        }
        Conv::Msg(sub) => {
            let inner = deeper(depth)?;
            let nested = begin(w, n)?;
            object(w, sub, v, inner)?;
            w.end(nested);
        }
        Conv::Inline(sub) => object(w, sub, v, depth)?,
        Conv::List(sub) => {
            expect(v, Kind::Array, "expected an array")?;
            let inner = deeper(depth)?;
            for el in json::elements(v) {
                let nested = begin(w, n)?;
                object(w, sub, el, inner)?;
                w.end(nested);
            }
        }
        Conv::StrList => {
            expect(v, Kind::Array, "expected an array")?;
            for el in json::elements(v) {
                string(w, n, el)?;
            }
        }
        Conv::Enum(values) => {
            let x = enum_number(v, values)?;
            if x != 0 {
                w.enumeration(n, x);
            }
        }
        Conv::EnumList(values) => {
            expect(v, Kind::Array, "expected an array")?;
            for el in json::elements(v) {
                enum_number(el, values)?;
            }
            // Checked above; roles are positive.
            w.packed_varints(
                n,
                json::elements(v)
                    .map(|el| enum_number(el, values).unwrap_or(0).unsigned_abs().into()),
            )
            .map_err(|_| TypedError::Unexpressible("nested deeper than the binding allows"))?;
        }
        Conv::StrMap => {
            expect(v, Kind::Object, "expected an object")?;
            unique_keys(v)?;
            for (key, value) in json::members(v) {
                if json::kind(value) != Some(Kind::String) {
                    return Err(TypedError::Invalid("expected an object of strings"));
                }
                let nested = begin(w, n)?;
                string(w, 1, key)?;
                string(w, 2, value)?;
                w.end(nested);
            }
        }
        Conv::Blocks(u) => {
            expect(v, Kind::Array, "expected an array")?;
            let inner = deeper(depth)?;
            for el in json::elements(v) {
                let nested = begin(w, n)?;
                block(w, u, el, inner)?;
                w.end(nested);
            }
        }
        Conv::Block(u) => {
            // A block, or an array of exactly one (sampling messages).
            let v = if json::kind(v) == Some(Kind::Array) {
                let mut els = json::elements(v);
                match (els.next(), els.next()) {
                    (Some(only), None) => only,
                    _ => return Err(TypedError::Invalid("expected one content block")),
                }
            } else {
                v
            };
            block(w, u, v, depth)?;
        }
        Conv::Ref => {
            expect(v, Kind::Object, "expected an object")?;
            let ty = json::get(v, b"type").ok_or(TypedError::Missing("type"))?;
            let (field, sub) = if json::str_eq(ty, b"ref/prompt") {
                (3, &table::PROMPT_REFERENCE)
            } else if json::str_eq(ty, b"ref/resource") {
                (2, &table::RESOURCE_REFERENCE)
            } else {
                return Err(TypedError::Invalid(
                    "a reference type other than ref/prompt and ref/resource",
                ));
            };
            let inner = deeper(depth)?;
            let nested = begin(w, field)?;
            members(w, sub, v, inner, true)?;
            w.end(nested);
        }
        Conv::Ttl => {
            let ms = integer(v)?.max(0);
            deeper(depth)?;
            let nested = begin(w, n)?;
            let (secs, nanos) = (ms / 1000, (ms % 1000) * 1_000_000);
            if secs != 0 {
                w.int64(1, secs);
            }
            if nanos != 0 {
                w.int32(2, nanos as i32);
            }
            w.end(nested);
        }
        Conv::Cursor => {
            expect(v, Kind::String, "expected a string")?;
            if !is_empty_string(v) {
                return Err(TypedError::Unexpressible(
                    "a cursor (the typed binding has no pagination)",
                ));
            }
        }
        Conv::InputResponses => input_map(w, n, v, depth, input_response)?,
        Conv::Common => {}
    }
    Ok(())
}

/// A content block `{"type": ..., ...}` as the member of `u` it names,
/// written into the current message.
fn block(w: &mut W<'_>, u: &Union, v: &[u8], depth: usize) -> Result<()> {
    expect(v, Kind::Object, "expected a content block")?;
    let ty = json::get(v, b"type").ok_or(TypedError::Missing("type"))?;
    let Some((_, field, sub)) = u
        .members
        .iter()
        .find(|(name, _, _)| json::str_eq(ty, name.as_bytes()))
    else {
        // A kind other messages hold (a resource in a sampling message) does
        // not fit this one; a kind no message holds (`tool_use`, ...) is
        // beyond the binding.
        let known = table::CONTENT
            .members
            .iter()
            .any(|(name, _, _)| json::str_eq(ty, name.as_bytes()));
        return Err(if known {
            TypedError::Invalid("a content type this message cannot hold")
        } else {
            TypedError::Unexpressible("a content type the typed binding has no message for")
        });
    };
    let inner = deeper(depth)?;
    let nested = begin(w, *field)?;
    members(w, sub, v, inner, true)?;
    w.end(nested);
    Ok(())
}

type InputFn = fn(&mut W<'_>, &[u8], &[u8], usize) -> Result<()>;

/// A JSON object keyed by input request key as the map field `n`; `each`
/// writes one value's message body.
fn input_map(w: &mut W<'_>, n: u32, v: &[u8], depth: usize, each: InputFn) -> Result<()> {
    expect(v, Kind::Object, "expected an object")?;
    unique_keys(v)?;
    let inner = deeper(depth)?;
    for (key, value) in json::members(v) {
        let entry = begin(w, n)?;
        string(w, 1, key)?;
        let val = begin(w, 2)?;
        each(w, key, value, inner)?;
        w.end(val);
        w.end(entry);
    }
    Ok(())
}

/// One answer of `inputResponses` as an `InputResponse` body, told apart by
/// its keys (§6.7).
fn input_response(w: &mut W<'_>, _key: &[u8], v: &[u8], depth: usize) -> Result<()> {
    expect(v, Kind::Object, "expected an object")?;
    let [action, model, roots] = json::get_all(v, [b"action", b"model", b"roots"]);
    let (field, sub) = if action.is_some() {
        (9, &table::ELICIT_RESULT)
    } else if model.is_some() {
        (7, &table::SAMPLING_RESULT)
    } else if roots.is_some() {
        (8, &table::ROOTS_RESULT)
    } else {
        return Err(TypedError::Unexpressible(
            "an input response other than elicitation, sampling or roots",
        ));
    };
    let inner = deeper(depth)?;
    let nested = begin(w, field)?;
    object(w, sub, v, inner)?;
    w.end(nested);
    Ok(())
}

/// One request of `inputRequests` as an `InputRequest` body (§6.7).
fn input_request(w: &mut W<'_>, key: &[u8], v: &[u8], depth: usize) -> Result<()> {
    expect(v, Kind::Object, "expected an object")?;
    let mut method = None;
    let mut params = None;
    for (k, value) in json::members(v) {
        let slot = if json::key_is(k, b"method") {
            &mut method
        } else if json::key_is(k, b"params") {
            &mut params
        } else {
            return Err(TypedError::Unexpressible(
                "a member the typed binding has no field for",
            ));
        };
        if slot.replace(value).is_some() {
            return Err(TypedError::Invalid("a member occurs twice"));
        }
    }
    let method = method.ok_or(TypedError::Missing("method"))?;
    let params = params.filter(|p| !is_null(p));
    let inner = deeper(depth)?;
    if json::str_eq(method, b"roots/list") {
        if let Some(p) = params {
            expect(p, Kind::Object, "expected an object")?;
            if json::members(p).next().is_some() {
                return Err(TypedError::Unexpressible("roots/list params"));
            }
        }
        let nested = begin(w, 9)?;
        w.end(nested);
    } else if json::str_eq(method, b"sampling/createMessage") {
        let p = params.ok_or(TypedError::Missing("params"))?;
        let nested = begin(w, 8)?;
        object(w, &table::SAMPLING_REQUEST, p, inner)?;
        w.end(nested);
    } else if json::str_eq(method, b"elicitation/create") {
        let p = params.ok_or(TypedError::Missing("params"))?;
        let nested = begin(w, 11)?;
        super::elicit::encode(w, key, p, inner)?;
        w.end(nested);
    } else {
        return Err(TypedError::Unexpressible(
            "an input request other than elicitation, sampling or roots",
        ));
    }
    Ok(())
}

/// A `result` object as the response message of its RPC (§6.3).
pub(super) fn result(w: &mut W<'_>, m: &Mapping, obj: &[u8]) -> Result<()> {
    let [rt, meta] = json::get_all(obj, [b"resultType", b"_meta"]);
    let rt = rt.filter(|v| !is_null(v));
    let meta = meta.filter(|v| !is_null(v));
    let input_required = match rt {
        None => false,
        Some(v) if json::str_eq(v, b"complete") => false,
        Some(v) if json::str_eq(v, b"input_required") => true,
        Some(v) if json::kind(v) == Some(Kind::String) => {
            return Err(TypedError::Unexpressible(
                "a result type other than complete and input_required",
            ));
        }
        Some(_) => return Err(TypedError::Invalid("expected a string")),
    };
    if let Some(meta) = meta {
        expect(meta, Kind::Object, "expected an object")?;
    }
    if input_required {
        // The only members an input_required result may carry.
        const KEYS: [&[u8]; 4] = [b"_meta", b"resultType", b"inputRequests", b"requestState"];
        let mut slots: [Option<&[u8]>; 4] = [None; 4];
        for (k, value) in json::members(obj) {
            let Some(slot) = KEYS
                .iter()
                .position(|key| json::key_is(k, key))
                .and_then(|i| slots.get_mut(i))
            else {
                return Err(TypedError::Unexpressible(
                    "a member an input_required result cannot carry",
                ));
            };
            if slot.replace(value).is_some() {
                return Err(TypedError::Invalid("a member occurs twice"));
            }
        }
        let [_, _, requests, state] = slots.map(|v| v.filter(|v| !is_null(v)));
        let common = begin(w, 1)?;
        if let Some(meta) = meta {
            structure(w, 2, meta, 2)?;
        }
        if let Some(requests) = requests {
            input_map(w, 7, requests, 2, input_request)?;
        }
        w.enumeration(9, 2);
        if let Some(state) = state {
            string(w, 10, state)?;
        }
        w.end(common);
        return Ok(());
    }
    let common = begin(w, 1)?;
    if let Some(meta) = meta {
        structure(w, 2, meta, 2)?;
    }
    w.enumeration(9, 1);
    w.end(common);
    // The RPC's own fields (`_meta` and `resultType` are done: their
    // entries only mark them seen).
    members(w, m, obj, 1, false)
}
