//! The JSON-RPC 2.0 envelope of one message: found without building a
//! tree ([`Message::parse`], [`RequestSpans::parse`]) and written
//! ([`write_result`], [`write_error`], [`write_notification`]). Every
//! binding writes its JSON-RPC messages here.

use core::ops::Range;

use super::error::{INVALID_REQUEST, PARSE_ERROR, RpcError};
use super::json::{self, JsonError, ObjectScan};
use super::meta::{ParamsIndex, ParamsKey};
use super::writer::JsonWriter;

/// Where the parts of a request lie in its message, as ranges of octets:
/// a binding that keeps the message in a buffer it later reuses stores
/// these instead of borrowing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpans {
    /// The raw JSON id.
    pub id: Range<usize>,
    /// The method's text, without quotes; `None` when it has escapes (no
    /// MCP method has any: such a request names no known method).
    pub method: Option<Range<usize>>,
    /// The raw `params` value.
    pub params: Option<Range<usize>>,
    /// Where `params`' members lie in it (offsets into `params`), found
    /// while the message was validated.
    pub index: ParamsIndex,
}

/// What a message is, with the spans of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
// Built once per message on the stack and matched at once: boxing the
// request's spans would need an allocator the core has not.
#[allow(clippy::large_enum_variant)]
pub enum Spans {
    Request(RequestSpans),
    Notification,
    Response,
}

impl RequestSpans {
    /// Parses `body` as [`Message::parse`] does and locates a request's
    /// parts in it.
    pub fn parse(body: &[u8], max_depth: usize) -> Result<Spans, RpcError> {
        let (message, index) = Message::parse_indexed(body, max_depth)?;
        Ok(match message {
            Message::Request { id, method, params } => Spans::Request(RequestSpans {
                id: json::span(body, id),
                method: json::str_plain(method).map(|m| json::span(body, m)),
                params: params.map(|p| json::span(body, p)),
                index,
            }),
            Message::Notification { .. } => Spans::Notification,
            Message::Response { .. } | Message::Error { .. } => Spans::Response,
        })
    }
}

/// Writes `{"jsonrpc":"2.0","id":<id>,"result":` then what `result` writes,
/// then `}`.
pub fn write_result(w: &mut JsonWriter<'_>, id: &[u8], result: impl FnOnce(&mut JsonWriter<'_>)) {
    write_response_with(w, id, b"result", result);
}

/// Writes a response whose `member` (`result` or `error`) is what `value`
/// writes.
pub fn write_response_with(
    w: &mut JsonWriter<'_>,
    id: &[u8],
    member: &[u8],
    value: impl FnOnce(&mut JsonWriter<'_>),
) {
    w.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
        .raw(id)
        .raw(b",")
        .string(member)
        .raw(b":");
    value(w);
    w.raw(b"}");
}

/// Writes an error response; `data` is raw JSON.
pub fn write_error(
    w: &mut JsonWriter<'_>,
    id: &[u8],
    code: i32,
    message: &[u8],
    data: Option<&[u8]>,
) {
    w.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
        .raw(id)
        .raw(b",\"error\":{\"code\":")
        .int(i64::from(code));
    w.raw(b",\"message\":").string(message);
    if let Some(d) = data {
        w.raw(b",\"data\":").raw(d);
    }
    w.raw(b"}}");
}

/// Writes a notification; `params` is raw JSON.
pub fn write_notification(w: &mut JsonWriter<'_>, method: &[u8], params: &[u8]) {
    write_notification_with(w, method, |w| {
        w.raw(params);
    });
}

/// Writes a notification whose `params` is what the closure writes.
pub fn write_notification_with(
    w: &mut JsonWriter<'_>,
    method: &[u8],
    params: impl FnOnce(&mut JsonWriter<'_>),
) {
    w.raw(b"{\"jsonrpc\":\"2.0\",\"method\":")
        .string(method)
        .raw(b",\"params\":");
    params(w);
    w.raw(b"}");
}

/// Writes a request; `id` is raw JSON, `params` what the closure writes.
pub fn write_request(
    w: &mut JsonWriter<'_>,
    id: &[u8],
    method: &[u8],
    params: impl FnOnce(&mut JsonWriter<'_>),
) {
    w.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
        .raw(id)
        .raw(b",\"method\":")
        .string(method)
        .raw(b",\"params\":");
    params(w);
    w.raw(b"}");
}

/// Validates the `params` object the scan stands at (in `body`) and notes
/// where its members (and `_meta`'s) lie in it; returns the object.
///
/// A member repeated in `params`, in its `_meta` object or in its
/// `arguments` object sets the index's `repeated`: the engine reads the
/// first and serde (a handler, a bridge that re-serialises) the last, so a
/// check could pass on one value and a handler act on another. The keys
/// the engine reads (those of [`ParamsKey`], the `_meta` keys the index
/// keeps) are found repeated in an object of any size, by their place in
/// the index. The others are only counted in this walk (it is most of a
/// request's check); an object with two or more is walked again with a
/// [`KeySet`](json::KeySet): every repeat in an object of up to
/// [`KeySet::CAPACITY`](json::KeySet::CAPACITY) keys, a linear cost
/// whatever its size. Members nested deeper are the business of whoever
/// reads them: the mirrored-header check walks an annotated argument's
/// path whole.
fn index_params<'a>(
    body: &'a [u8],
    scan: &mut ObjectScan<'a>,
    index: &mut ParamsIndex,
) -> Result<&'a [u8], JsonError> {
    let base = scan.offset();
    // The current value's offset in `params`, and its length.
    let span = |at: usize, v: &[u8]| at - base..at - base + v.len();
    let mut inner = scan.nested()?;
    // Keys the index does not keep, counted: an object with two or more
    // is walked again for repeats once whole (most have none or one).
    let mut others = 0u32;
    while let Some(key) = inner.key()? {
        let at = inner.offset();
        let k = ParamsKey::of(key);
        if k == Some(ParamsKey::Meta) && inner.at_object() {
            let mut meta = inner.nested()?;
            let mut meta_others = 0u32;
            while let Some(mk) = meta.key()? {
                let mat = meta.offset();
                let v = meta.value()?;
                meta_others += u32::from(!index.set_meta(mk, span(mat, v)));
            }
            let v = inner.resume(&meta)?;
            if meta_others > 1 && json::has_repeated_key(body, v) {
                index.repeated = true;
            }
            index.set(ParamsKey::Meta, span(at, v));
            continue;
        }
        // The arguments of a call, member by member, for their keys.
        let v = if k == Some(ParamsKey::Arguments) && inner.at_object() {
            let mut arguments = inner.nested()?;
            let mut names = 0u32;
            while arguments.key()?.is_some() {
                names += 1;
                arguments.value()?;
            }
            let v = inner.resume(&arguments)?;
            if names > 1 && json::has_repeated_key(body, v) {
                index.repeated = true;
            }
            v
        } else {
            inner.value()?
        };
        match k {
            Some(k) => index.set(k, span(at, v)),
            None => others += 1,
        }
    }
    let v = scan.resume(&inner)?;
    if others > 1 && json::has_repeated_key(body, v) {
        index.repeated = true;
    }
    Ok(v)
}

/// A request whose `params`, `_meta` or `arguments` has a member twice
/// (see `index_params`).
pub const REPEATED_MEMBER: RpcError = RpcError::new(
    INVALID_REQUEST,
    "duplicate member in params, params._meta or params.arguments",
);

/// One JSON-RPC message, as raw JSON slices of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    Request {
        id: &'a [u8],
        method: &'a [u8],
        params: Option<&'a [u8]>,
    },
    Notification {
        method: &'a [u8],
        params: Option<&'a [u8]>,
    },
    Response {
        id: &'a [u8],
        result: &'a [u8],
    },
    Error {
        id: &'a [u8],
        error: &'a [u8],
    },
}

impl<'a> Message<'a> {
    /// Parses one message. Not JSON: -32700. JSON but not a JSON-RPC 2.0
    /// message (a batch array, a wrong `jsonrpc`, a bad `id`...): -32600.
    /// `method` and `id` stay raw JSON (the id is echoed byte for byte).
    pub fn parse(body: &'a [u8], max_depth: usize) -> Result<Self, RpcError> {
        Self::parse_indexed(body, max_depth).map(|(m, _)| m)
    }

    /// [`parse`](Self::parse), and where the members of `params` the
    /// engine reads lie in it: the message is validated and they are found
    /// in one walk, so that no later lookup walks `params` again.
    pub fn parse_indexed(
        body: &'a [u8],
        max_depth: usize,
    ) -> Result<(Self, ParamsIndex), RpcError> {
        let syntax = |e: JsonError| match e {
            JsonError::TooDeep => RpcError::new(INVALID_REQUEST, "JSON nested too deeply"),
            JsonError::Syntax(_) => RpcError::new(PARSE_ERROR, "Parse error"),
        };
        let Ok(mut scan) = ObjectScan::new(body, 0, max_depth) else {
            // Not an object: which error, by the whole document.
            json::validate(body, max_depth).map_err(syntax)?;
            return Err(RpcError::new(
                INVALID_REQUEST,
                "a JSON-RPC message must be an object (batches are not supported)",
            ));
        };
        let (mut version, mut id, mut method, mut params, mut result, mut error) =
            (None, None, None, None, None, None);
        let mut index = ParamsIndex::default();
        // Judged after the walk: a syntax error anywhere is -32700 first.
        let mut duplicate = false;
        while let Some(key) = scan.key().map_err(syntax)? {
            // The first `params` object is indexed as it is validated.
            if params.is_none() && scan.at_object() && key.is(b"params") {
                params = Some(index_params(body, &mut scan, &mut index).map_err(syntax)?);
                continue;
            }
            let slot = if key.is(b"jsonrpc") {
                &mut version
            } else if key.is(b"id") {
                &mut id
            } else if key.is(b"method") {
                &mut method
            } else if key.is(b"params") {
                &mut params
            } else if key.is(b"result") {
                &mut result
            } else if key.is(b"error") {
                &mut error
            } else {
                scan.value().map_err(syntax)?;
                continue;
            };
            let value = scan.value().map_err(syntax)?;
            duplicate |= slot.replace(value).is_some();
        }
        let rest = &body[scan.end()..];
        if !json::trim(rest).is_empty() {
            return Err(syntax(JsonError::Syntax(scan.end())));
        }
        if duplicate {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "duplicate member in JSON-RPC message",
            ));
        }
        if index.repeated {
            return Err(REPEATED_MEMBER);
        }
        let message = Self::judge(version, id, method, params, result, error)?;
        Ok((message, index))
    }

    /// The members of a message, judged as JSON-RPC 2.0 asks.
    fn judge(
        version: Option<&'a [u8]>,
        id: Option<&'a [u8]>,
        method: Option<&'a [u8]>,
        params: Option<&'a [u8]>,
        result: Option<&'a [u8]>,
        error: Option<&'a [u8]>,
    ) -> Result<Self, RpcError> {
        let invalid = |m| Err(RpcError::new(INVALID_REQUEST, m));
        // As the usual message writes it, or with escapes.
        if !version.is_some_and(|v| {
            (json::WORDS && json::bytes_eq(v, b"\"2.0\"")) || json::str_eq(v, b"2.0")
        }) {
            return invalid("jsonrpc must be \"2.0\"");
        }
        // A response's id is null when the request's could not be read
        // (JSON-RPC 2.0 §5); a request's never is.
        let response = result.is_some() || error.is_some();
        if let Some(id) = id
            && !matches!(
                json::kind(id),
                Some(json::Kind::String | json::Kind::Number)
            )
            && !(response && json::kind(id) == Some(json::Kind::Null))
        {
            return invalid("id must be a string or a number");
        }
        if let Some(p) = params
            && !matches!(json::kind(p), Some(json::Kind::Object | json::Kind::Array))
        {
            return invalid("params must be an object");
        }
        match (method, id, result, error) {
            (Some(m), id, None, None) => {
                if json::kind(m) != Some(json::Kind::String) {
                    return invalid("method must be a string");
                }
                Ok(match id {
                    Some(id) => Message::Request {
                        id,
                        method: m,
                        params,
                    },
                    None => Message::Notification { method: m, params },
                })
            }
            (None, Some(id), Some(result), None) => Ok(Message::Response { id, result }),
            (None, Some(id), None, Some(error)) => Ok(Message::Error { id, error }),
            _ => invalid("not a JSON-RPC request, notification or response"),
        }
    }

    /// The raw `id`, if the message has one.
    pub fn id(&self) -> Option<&'a [u8]> {
        match *self {
            Message::Request { id, .. }
            | Message::Response { id, .. }
            | Message::Error { id, .. } => Some(id),
            Message::Notification { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let m = Message::parse(
            br#"{"jsonrpc":"2.0","id":"a1","method":"tools/list","params":{}}"#,
            16,
        )
        .unwrap();
        assert_eq!(
            m,
            Message::Request {
                id: br#""a1""#,
                method: br#""tools/list""#,
                params: Some(b"{}")
            }
        );
        let n = Message::parse(
            br#"{"method":"notifications/cancelled","jsonrpc":"2.0"}"#,
            16,
        )
        .unwrap();
        assert!(matches!(n, Message::Notification { params: None, .. }));
        let r = Message::parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, 16).unwrap();
        assert!(matches!(r, Message::Response { .. }));
        let e = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#;
        assert!(matches!(
            Message::parse(e, 16),
            Ok(Message::Error { id: b"null", .. })
        ));
    }

    #[test]
    fn spans_locate_the_parts() {
        let body = br#"{"jsonrpc":"2.0","id":"a1","method":"tools/call","params":{"name":"x"}}"#;
        let Spans::Request(r) = RequestSpans::parse(body, 16).unwrap() else {
            panic!("a request");
        };
        assert_eq!(&body[r.id], br#""a1""#);
        assert_eq!(&body[r.method.unwrap()], b"tools/call");
        assert_eq!(&body[r.params.unwrap()], br#"{"name":"x"}"#);
        let escaped = br#"{"jsonrpc":"2.0","id":1,"method":"tools\/call"}"#;
        let Spans::Request(r) = RequestSpans::parse(escaped, 16).unwrap() else {
            panic!("a request");
        };
        assert_eq!((r.method, r.params), (None, None));
    }

    #[test]
    fn the_validating_walk_indexes_params() {
        let body = br#"{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"x":{}},"progressToken":"t","io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{"text":"a\"}"},"name":"echo"}}"#;
        let Spans::Request(r) = RequestSpans::parse(body, 16).unwrap() else {
            panic!("a request");
        };
        let params = &body[r.params.clone().unwrap()];
        let at = |s: &Option<crate::mcp::meta::Span>| &params[s.unwrap().range()];
        assert_eq!(at(&r.index.name), br#""echo""#);
        assert_eq!(at(&r.index.arguments), br#"{"text":"a\"}"}"#);
        assert_eq!(at(&r.index.progress_token), br#""t""#);
        assert_eq!(at(&r.index.protocol_version), br#""2026-07-28""#);
        assert_eq!(at(&r.index.client_capabilities), br#"{"x":{}}"#);
        assert_eq!(r.index.uri, None);
        // The same places as the walk over a checked document finds.
        assert_eq!(r.index, ParamsIndex::read(params));
        // Errors stay what the separate validation gave: a syntax error
        // after a duplicate member is still -32700.
        let code = |b: &[u8]| Message::parse(b, 16).unwrap_err().code;
        assert_eq!(
            code(br#"{"id":1,"id":2,"method":"x","params":{"a":tru}}"#),
            PARSE_ERROR
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{}}} x"#),
            PARSE_ERROR
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"a":1,}}}"#),
            PARSE_ERROR
        );
        assert_eq!(code(br#" [1] "#), INVALID_REQUEST);
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]}"#), INVALID_REQUEST);
    }

    /// A member repeated in `params`, `_meta` or `arguments` (in any
    /// spelling) is -32600: the index would take the first, serde the last.
    #[test]
    fn repeated_members_of_params_are_refused() {
        let request = |params: &str| {
            std::format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)
        };
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        let refused = [
            // Known keys of params, of _meta, with escapes.
            std::format!(r#"{{{meta},"name":"echo","name":"lookup"}}"#),
            std::format!(r#"{{{meta},"name":"echo","n\u0061me":"lookup"}}"#),
            std::format!(r#"{{{meta},"uri":"a","uri":"b"}}"#),
            std::format!(r#"{{{meta},"arguments":{{}},"arguments":{{}}}}"#),
            std::format!(r#"{{{meta},{meta}}}"#),
            std::format!(r#"{{"_meta":[],{meta}}}"#),
            std::format!(r#"{{{meta},"notifications":{{}},"notifications":{{"toolsListChanged":true}}}}"#),
            r#"{"_meta":{"progressToken":1,"progressToken":2}}"#.into(),
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocol\u0056ersion":"1999-01-01"}}"#.into(),
            // Keys the index does not keep.
            std::format!(r#"{{{meta},"x":1,"y":2,"x":3}}"#),
            r#"{"_meta":{"vendor/a":1,"vendor/\u0061":2}}"#.into(),
            // The arguments of a call.
            std::format!(r#"{{{meta},"name":"echo","arguments":{{"region":"us-west","region":"eu-secret"}}}}"#),
            std::format!(r#"{{{meta},"name":"echo","arguments":{{"region":"us-west","\u0072egion":"eu-secret"}}}}"#),
            std::format!(r#"{{"arguments":{{"\ud83d\ude00":1,"😀":2}},{meta}}}"#),
        ];
        for params in refused {
            let e = Message::parse(request(&params).as_bytes(), 16).unwrap_err();
            assert_eq!(e, REPEATED_MEMBER, "{params}");
            let e = RequestSpans::parse(request(&params).as_bytes(), 16).unwrap_err();
            assert_eq!(e.code, INVALID_REQUEST, "{params}");
        }
        // A cancellation's request id, in a notification.
        let cancel = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}"#;
        assert_eq!(Message::parse(cancel, 16), Err(REPEATED_MEMBER));
        // Not repeats: one key in two objects, keys that differ once
        // unescaped, a key inside a value.
        let fine = [
            std::format!(r#"{{{meta},"name":"echo","arguments":{{"name":"x","_meta":{{}}}}}}"#),
            std::format!(r#"{{{meta},"arguments":{{"a\u00e9":1,"ae":2,"a\u00e8":3}}}}"#),
            std::format!(r#"{{{meta},"arguments":{{"a":"\"a\":1","b":{{"a":1}}}}}}"#),
            std::format!(r#"{{{meta},"x":1,"y":{{"x":2}},"z":[{{"x":3}}]}}"#),
        ];
        for params in fine {
            assert!(
                Message::parse(request(&params).as_bytes(), 16).is_ok(),
                "{params}"
            );
        }
        // A syntax error anywhere is still -32700 first.
        let broken = std::format!(r#"{{{meta},"name":"a","name":"b","x":tru}}"#);
        let e = Message::parse(request(&broken).as_bytes(), 16).unwrap_err();
        assert_eq!(e.code, PARSE_ERROR);
    }

    /// An `arguments` object of many members: a repeat is found whenever
    /// its first member is among the first [`KeySet::CAPACITY`], at any
    /// place of the second; the keys the index keeps, in a `params` of
    /// any size.
    #[test]
    fn repeats_in_large_objects() {
        let n = 3 * json::KeySet::CAPACITY;
        let keys: std::vec::Vec<std::string::String> =
            (0..n).map(|i| std::format!("k{i}")).collect();
        let object = |keys: &[std::string::String]| {
            let members: std::vec::Vec<std::string::String> =
                keys.iter().map(|k| std::format!(r#""{k}":0"#)).collect();
            std::format!("{{{}}}", members.join(","))
        };
        let call = |arguments: &str, extra: &str| {
            std::format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{{extra}"name":"t","arguments":{arguments}}}}}"#
            )
        };
        assert!(Message::parse(call(&object(&keys), "").as_bytes(), 16).is_ok());
        for first in [0, json::KeySet::CAPACITY - 1] {
            for second in [first + 1, n / 2, n - 1] {
                let mut repeated = keys.clone();
                repeated[second] = keys[first].clone();
                let body = call(&object(&repeated), "");
                let e = Message::parse(body.as_bytes(), 16);
                assert_eq!(e, Err(REPEATED_MEMBER), "{first} {second}");
            }
        }
        // A known key after many unknown ones.
        let extra = keys
            .iter()
            .map(|k| std::format!(r#""{k}":0,"#))
            .collect::<std::string::String>();
        let body = call("{}", &std::format!(r#""name":"x",{extra}"#));
        assert_eq!(Message::parse(body.as_bytes(), 16), Err(REPEATED_MEMBER));
    }

    #[test]
    fn writers_write_what_the_parser_reads() {
        let mut buf = [0u8; 256];
        let mut w = JsonWriter::new(&mut buf);
        write_error(&mut w, b"7", -32602, b"bad \"x\"", Some(b"{\"a\":1}"));
        let text = w.finish().unwrap();
        assert_eq!(
            Message::parse(text, 16).unwrap(),
            Message::Error {
                id: b"7",
                error: br#"{"code":-32602,"message":"bad \"x\"","data":{"a":1}}"#
            }
        );
        let mut buf = [0u8; 256];
        let mut w = JsonWriter::new(&mut buf);
        write_notification(&mut w, b"notifications/progress", b"{}");
        let text = w.finish().unwrap();
        assert!(matches!(
            Message::parse(text, 16).unwrap(),
            Message::Notification {
                params: Some(b"{}"),
                ..
            }
        ));
        let mut buf = [0u8; 256];
        let mut w = JsonWriter::new(&mut buf);
        write_result(&mut w, b"\"r\"", |w| {
            w.raw(b"{}");
        });
        assert_eq!(
            Message::parse(w.finish().unwrap(), 16).unwrap(),
            Message::Response {
                id: b"\"r\"",
                result: b"{}"
            }
        );
    }

    #[test]
    fn errors() {
        let code = |b: &[u8]| Message::parse(b, 16).unwrap_err().code;
        assert_eq!(code(b"{"), PARSE_ERROR);
        assert_eq!(code(b"[]"), INVALID_REQUEST);
        assert_eq!(
            code(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":5}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#),
            INVALID_REQUEST
        );
    }
}
