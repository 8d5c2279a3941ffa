//! `elicitation/create` params ↔ `ElicitRequest` (digest §6.8): URL mode,
//! and form mode with its `requestedSchema` of primitive property schemas
//! (`PrimitiveSchemaDefinition`).

use mcpwire_proto::gcp::{MessageRef, schema};

use super::decode::{self, J};
use super::encode::{self, W};
use super::json::{self, Kind};
use super::table::{Conv, Group, Mapping, e, grouped, mapping};
use super::{Result, TypedError};

const FORMATS: &[(&str, i32)] = &[("email", 1), ("uri", 2), ("date", 3), ("date-time", 4)];

/// Up to 2^53: the JSON integers the binding carries.
const SAFE_U64: u64 = 1 << 53;

pub(super) static STRING_SCHEMA: Mapping = mapping(
    &schema::PRIMITIVE_SCHEMA_DEFINITION_STRING_SCHEMA,
    &[
        e("title", 1, Conv::Str),
        e("description", 2, Conv::Str),
        e("minLength", 3, Conv::UintOpt(&SAFE_U64)),
        e("maxLength", 4, Conv::UintOpt(&SAFE_U64)),
        e("format", 5, Conv::Enum(&FORMATS)),
        e("default", 6, Conv::StrOpt),
    ],
);

pub(super) static BOOLEAN_SCHEMA: Mapping = mapping(
    &schema::PRIMITIVE_SCHEMA_DEFINITION_BOOLEAN_SCHEMA,
    &[
        e("title", 1, Conv::Str),
        e("description", 2, Conv::Str),
        e("default", 3, Conv::Bool),
    ],
);

/// `"type":"integer"`: `integer_range` (6) is always written, it marks the
/// type.
pub(super) static INTEGER_SCHEMA: Mapping = Mapping {
    desc: &schema::PRIMITIVE_SCHEMA_DEFINITION_NUMBER_SCHEMA,
    entries: &[
        e("title", 1, Conv::Str),
        e("description", 2, Conv::Str),
        grouped(6, e("minimum", 1, Conv::Int64Opt)),
        grouped(6, e("maximum", 2, Conv::Int64Opt)),
        e("default", 8, Conv::Int64Opt),
    ],
    groups: &[Group {
        field: 6,
        always: true,
    }],
    one_of: &[],
};

/// `"type":"number"`: `double_range` (5) is always written.
pub(super) static NUMBER_SCHEMA: Mapping = Mapping {
    desc: &schema::PRIMITIVE_SCHEMA_DEFINITION_NUMBER_SCHEMA,
    entries: &[
        e("title", 1, Conv::Str),
        e("description", 2, Conv::Str),
        grouped(5, e("minimum", 1, Conv::F64Opt)),
        grouped(5, e("maximum", 2, Conv::F64Opt)),
        e("default", 7, Conv::F64Opt),
    ],
    groups: &[Group {
        field: 5,
        always: true,
    }],
    one_of: &[],
};

/// The keys of `params` in URL mode, and what each must be.
fn url_mode(w: &mut W<'_>, key: &[u8], p: &[u8]) -> Result<()> {
    let mut message = None;
    let mut url = None;
    for (k, v) in json::members(p) {
        if json::key_is(k, b"message") {
            message = Some(v);
        } else if json::key_is(k, b"url") {
            url = Some(v);
        } else if !json::key_is(k, b"mode") {
            return Err(TypedError::Unexpressible(
                "a member the typed binding has no field for",
            ));
        }
    }
    let message = message.ok_or(TypedError::Missing("message"))?;
    let url = url.ok_or(TypedError::Missing("url"))?;
    encode::string(w, 1, message)?;
    let nested = encode::begin(w, 4)?;
    encode::string(w, 1, key)?;
    encode::string(w, 2, url)?;
    w.end(nested);
    Ok(())
}

/// `elicitation/create` params as an `ElicitRequest` body; `key` is the
/// input request's key (the URL mode's `id`).
pub(super) fn encode(w: &mut W<'_>, key: &[u8], p: &[u8], depth: usize) -> Result<()> {
    encode::expect(p, Kind::Object, "expected an object")?;
    match json::get(p, b"mode").filter(|m| !encode::is_null(m)) {
        Some(m) if json::str_eq(m, b"url") => return url_mode(w, key, p),
        Some(m) if !json::str_eq(m, b"form") => {
            return Err(TypedError::Invalid(
                "an elicitation mode other than form and url",
            ));
        }
        _ => {}
    }
    let mut message = None;
    let mut requested = None;
    for (k, v) in json::members(p) {
        if json::key_is(k, b"message") {
            message = Some(v);
        } else if json::key_is(k, b"requestedSchema") {
            requested = Some(v);
        } else if !json::key_is(k, b"mode") {
            return Err(TypedError::Unexpressible(
                "a member the typed binding has no field for",
            ));
        }
    }
    let message = message.ok_or(TypedError::Missing("message"))?;
    let requested = requested.ok_or(TypedError::Missing("requestedSchema"))?;
    encode::string(w, 1, message)?;
    encode::expect(requested, Kind::Object, "expected an object")?;
    let mut properties = None;
    let mut required = None;
    for (k, v) in json::members(requested) {
        if json::key_is(k, b"type") {
            if !json::str_eq(v, b"object") {
                return Err(TypedError::Invalid(
                    "a requested schema whose type is not object",
                ));
            }
        } else if json::key_is(k, b"properties") {
            properties = Some(v);
        } else if json::key_is(k, b"required") {
            required = Some(v);
        } else {
            return Err(TypedError::Unexpressible(
                "a requested schema member the typed binding has no field for",
            ));
        }
    }
    let inner = encode::deeper(depth)?;
    if let Some(props) = properties {
        encode::expect(props, Kind::Object, "expected an object")?;
        encode::unique_keys(props)?;
        for (name, def) in json::members(props) {
            let entry = encode::begin(w, 2)?;
            encode::string(w, 1, name)?;
            let val = encode::begin(w, 2)?;
            primitive(w, def, inner)?;
            w.end(val);
            w.end(entry);
        }
    }
    if let Some(required) = required {
        encode::expect(required, Kind::Array, "expected an array")?;
        for name in json::elements(required) {
            encode::string(w, 3, name)?;
        }
    }
    Ok(())
}

/// One property schema as a `PrimitiveSchemaDefinition` body.
fn primitive(w: &mut W<'_>, def: &[u8], depth: usize) -> Result<()> {
    encode::expect(def, Kind::Object, "expected an object")?;
    let ty = json::get(def, b"type").ok_or(TypedError::Missing("type"))?;
    let inner = encode::deeper(depth)?;
    let (field, sub) = if json::str_eq(ty, b"boolean") {
        (3, &BOOLEAN_SCHEMA)
    } else if json::str_eq(ty, b"integer") {
        (2, &INTEGER_SCHEMA)
    } else if json::str_eq(ty, b"number") {
        (2, &NUMBER_SCHEMA)
    } else if json::str_eq(ty, b"array") {
        let nested = encode::begin(w, 4)?;
        multi_select(w, def, inner)?;
        w.end(nested);
        return Ok(());
    } else if json::str_eq(ty, b"string") {
        let [one_of, en] = json::get_all(def, [b"oneOf", b"enum"]);
        if one_of.is_some() || en.is_some() {
            let nested = encode::begin(w, 4)?;
            single_select(w, def, inner)?;
            w.end(nested);
            return Ok(());
        }
        if let Some(format) = json::get(def, b"format").filter(|f| !encode::is_null(f))
            && json::kind(format) == Some(Kind::String)
            && !FORMATS
                .iter()
                .any(|(name, _)| json::str_eq(format, name.as_bytes()))
        {
            return Err(TypedError::Unexpressible(
                "a string format the typed binding has no value for",
            ));
        }
        (1, &STRING_SCHEMA)
    } else {
        return Err(TypedError::Unexpressible(
            "a property schema type the typed binding has no message for",
        ));
    };
    let nested = encode::begin(w, field)?;
    encode::members(w, sub, def, inner, true)?;
    w.end(nested);
    Ok(())
}

/// Refuses keys of `obj` outside `allowed` (and `type`).
fn closed(obj: &[u8], allowed: &[&[u8]]) -> Result<()> {
    for (k, _) in json::members(obj) {
        if !json::key_is(k, b"type") && !allowed.iter().any(|a| json::key_is(k, a)) {
            return Err(TypedError::Unexpressible(
                "a property schema member the typed binding has no field for",
            ));
        }
    }
    Ok(())
}

/// `title` and `description` of an enum schema.
fn titles(w: &mut W<'_>, def: &[u8]) -> Result<()> {
    let [title, description] = json::get_all(def, [b"title", b"description"]);
    for (n, v) in [(1, title), (2, description)] {
        if let Some(v) = v.filter(|v| !encode::is_null(v)) {
            encode::string(w, n, v)?;
        }
    }
    Ok(())
}

/// `[{const, title}, ...]` as `enum_list` (3) and `enum_names` (4).
fn titled_options(w: &mut W<'_>, options: &[u8]) -> Result<()> {
    encode::expect(options, Kind::Array, "expected an array")?;
    for option in json::elements(options) {
        encode::expect(option, Kind::Object, "expected an object")?;
        closed(option, &[b"const", b"title"])?;
        let [c, t] = json::get_all(option, [b"const", b"title"]);
        encode::string(w, 3, c.ok_or(TypedError::Missing("const"))?)?;
        encode::string(w, 4, t.ok_or(TypedError::Missing("title"))?)?;
    }
    Ok(())
}

fn strings(w: &mut W<'_>, field: u32, arr: &[u8]) -> Result<usize> {
    encode::expect(arr, Kind::Array, "expected an array")?;
    let mut n = 0;
    for s in json::elements(arr) {
        encode::string(w, field, s)?;
        n += 1;
    }
    Ok(n)
}

/// A single-select enum (`"type":"string"` with `oneOf` or `enum`) as an
/// `EnumSchema` body.
fn single_select(w: &mut W<'_>, def: &[u8], _depth: usize) -> Result<()> {
    let [one_of, en, names, default] =
        json::get_all(def, [b"oneOf", b"enum", b"enumNames", b"default"]);
    titles(w, def)?;
    if let Some(options) = one_of {
        closed(def, &[b"title", b"description", b"oneOf", b"default"])?;
        titled_options(w, options)?;
    } else if let Some(en) = en {
        closed(
            def,
            &[b"title", b"description", b"enum", b"enumNames", b"default"],
        )?;
        let values = strings(w, 3, en)?;
        if let Some(names) = names.filter(|v| !encode::is_null(v))
            && strings(w, 4, names)? != values
        {
            return Err(TypedError::Invalid("enumNames and enum differ in length"));
        }
    }
    let nested = encode::begin(w, 5)?;
    if let Some(d) = default.filter(|v| !encode::is_null(v)) {
        encode::string(w, 1, d)?;
    }
    w.end(nested);
    Ok(())
}

/// A multi-select enum (`"type":"array"`) as an `EnumSchema` body.
fn multi_select(w: &mut W<'_>, def: &[u8], _depth: usize) -> Result<()> {
    closed(
        def,
        &[
            b"title",
            b"description",
            b"minItems",
            b"maxItems",
            b"items",
            b"default",
        ],
    )?;
    let [items, default, min, max] =
        json::get_all(def, [b"items", b"default", b"minItems", b"maxItems"]);
    titles(w, def)?;
    let items = items.ok_or(TypedError::Missing("items"))?;
    encode::expect(items, Kind::Object, "expected an object")?;
    if let Some(any_of) = json::get(items, b"anyOf") {
        closed(items, &[b"anyOf"])?;
        if json::get(items, b"type").is_some() {
            return Err(TypedError::Unexpressible("items with both type and anyOf"));
        }
        titled_options(w, any_of)?;
    } else {
        closed(items, &[b"enum"])?;
        match json::get(items, b"type") {
            Some(t) if json::str_eq(t, b"string") => {}
            _ => return Err(TypedError::Unexpressible("items that are not strings")),
        }
        strings(
            w,
            3,
            json::get(items, b"enum").ok_or(TypedError::Missing("enum"))?,
        )?;
    }
    let nested = encode::begin(w, 6)?;
    if let Some(d) = default.filter(|v| !encode::is_null(v)) {
        strings(w, 1, d)?;
    }
    for (n, v) in [(2, min), (3, max)] {
        if let Some(v) = v.filter(|v| !encode::is_null(v)) {
            let x = encode::integer(v)?;
            let x = u32::try_from(x)
                .map_err(|_| TypedError::Unexpressible("an item count beyond 32 bits"))?;
            w.varint(n, u64::from(x));
        }
    }
    w.end(nested);
    Ok(())
}

/// An `ElicitRequest` as `elicitation/create` params.
pub(super) fn decode(jw: &mut J<'_>, _key: &str, msg: MessageRef<'_>) -> Result<()> {
    let message = msg.bytes(1).unwrap_or_default();
    if let Some(url) = msg.message(4) {
        jw.raw(br#"{"mode":"url","message":"#);
        jw.string(message);
        jw.raw(br#","url":"#);
        jw.string(url.bytes(2).unwrap_or_default());
        jw.raw(b"}");
        return Ok(());
    }
    jw.raw(br#"{"message":"#);
    jw.string(message);
    super::decode::unique_keys(msg, 2)?;
    jw.raw(br#","requestedSchema":{"type":"object","properties":{"#);
    for (i, entry) in msg.messages(2).enumerate() {
        if i > 0 {
            jw.raw(b",");
        }
        jw.string(entry.bytes(1).unwrap_or_default());
        jw.raw(b":");
        let def = entry
            .message(2)
            .ok_or(TypedError::Invalid("a property without a schema"))?;
        primitive_json(jw, def)?;
    }
    jw.raw(b"}");
    if msg.repeated(3).next().is_some() {
        jw.raw(br#","required":["#);
        for (i, name) in msg.repeated(3).enumerate() {
            if i > 0 {
                jw.raw(b",");
            }
            jw.string(name.as_len().unwrap_or_default());
        }
        jw.raw(b"]");
    }
    jw.raw(b"}}");
    Ok(())
}

fn primitive_json(jw: &mut J<'_>, def: MessageRef<'_>) -> Result<()> {
    let members = [
        def.message(1),
        def.message(2),
        def.message(3),
        def.message(4),
    ];
    if members.iter().filter(|m| m.is_some()).count() != 1 {
        return Err(TypedError::Invalid(
            "a property schema needs exactly one kind",
        ));
    }
    let mut first = false;
    if let Some(s) = members[0] {
        jw.raw(br#"{"type":"string""#);
        decode::members(jw, &STRING_SCHEMA, s, &mut first)?;
    } else if let Some(n) = members[1] {
        if n.has(6) {
            jw.raw(br#"{"type":"integer""#);
            decode::members(jw, &INTEGER_SCHEMA, n, &mut first)?;
        } else {
            jw.raw(br#"{"type":"number""#);
            decode::members(jw, &NUMBER_SCHEMA, n, &mut first)?;
        }
    } else if let Some(b) = members[2] {
        jw.raw(br#"{"type":"boolean""#);
        decode::members(jw, &BOOLEAN_SCHEMA, b, &mut first)?;
    } else if let Some(en) = members[3] {
        return enum_json(jw, en);
    }
    jw.raw(b"}");
    Ok(())
}

fn enum_json(jw: &mut J<'_>, en: MessageRef<'_>) -> Result<()> {
    let values = en.repeated(3).count();
    let names = en.repeated(4).count();
    if names != 0 && names != values {
        return Err(TypedError::Invalid(
            "enum_names and enum_list differ in length",
        ));
    }
    let titled = names != 0;
    let multi = en.message(6);
    jw.raw(if multi.is_some() {
        br#"{"type":"array""#
    } else {
        br#"{"type":"string""#
    });
    for (n, k) in [(1, ",\"title\":"), (2, ",\"description\":")] {
        if let Some(t) = en.bytes(n).filter(|t| !t.is_empty()) {
            jw.raw(k.as_bytes());
            jw.string(t);
        }
    }
    let options = |jw: &mut J<'_>| {
        jw.raw(b"[");
        for (i, (c, t)) in en.repeated(3).zip(en.repeated(4)).enumerate() {
            if i > 0 {
                jw.raw(b",");
            }
            jw.raw(br#"{"const":"#);
            jw.string(c.as_len().unwrap_or_default());
            jw.raw(br#","title":"#);
            jw.string(t.as_len().unwrap_or_default());
            jw.raw(b"}");
        }
        jw.raw(b"]");
    };
    let plain = |jw: &mut J<'_>| {
        jw.raw(b"[");
        for (i, c) in en.repeated(3).enumerate() {
            if i > 0 {
                jw.raw(b",");
            }
            jw.string(c.as_len().unwrap_or_default());
        }
        jw.raw(b"]");
    };
    if let Some(multi) = multi {
        if let Some(x) = multi.varint(2) {
            jw.raw(br#","minItems":"#);
            jw.int(x as u32 as i64);
        }
        if let Some(x) = multi.varint(3) {
            jw.raw(br#","maxItems":"#);
            jw.int(x as u32 as i64);
        }
        if titled {
            jw.raw(br#","items":{"anyOf":"#);
            options(jw);
        } else {
            jw.raw(br#","items":{"type":"string","enum":"#);
            plain(jw);
        }
        jw.raw(b"}");
        if multi.repeated(1).next().is_some() {
            jw.raw(br#","default":["#);
            for (i, d) in multi.repeated(1).enumerate() {
                if i > 0 {
                    jw.raw(b",");
                }
                jw.string(d.as_len().unwrap_or_default());
            }
            jw.raw(b"]");
        }
    } else {
        if titled {
            jw.raw(br#","oneOf":"#);
            options(jw);
        } else {
            jw.raw(br#","enum":"#);
            plain(jw);
        }
        if let Some(d) = en.message(5).and_then(|s| s.bytes(1)) {
            jw.raw(br#","default":"#);
            jw.string(d);
        }
    }
    jw.raw(b"}");
    Ok(())
}
