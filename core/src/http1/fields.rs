//! Header field rules shared by request and response heads (RFC 9112
//! §6.1–§6.3, §9.3): which fields carry a name, how a body is framed by
//! `Transfer-Encoding` and `Content-Length`, and whether the connection
//! stays open. One copy of each rule, so that a server's requests and a
//! client's responses are judged alike.

use core::str;

use super::head::{BodyFraming, HeadError, Header, Version};

/// The values of every field called `name` (ASCII case-insensitive), in
/// the order they came.
pub fn all<'f, 'b, 'n>(
    fields: &'f [Header<'b>],
    name: &'n [u8],
) -> impl Iterator<Item = &'b [u8]> + use<'f, 'b, 'n> {
    fields
        .iter()
        .filter(move |f| f.name.as_bytes().eq_ignore_ascii_case(name))
        .map(|f| f.value)
}

/// How a message's body is delimited by its fields (RFC 9112 §6.1–§6.3);
/// `None` when neither `Transfer-Encoding` nor `Content-Length` is there
/// (a request then has no body, a response runs until the connection
/// closes). A `Transfer-Encoding` beside a `Content-Length`, or on
/// HTTP/1.0, is refused: a message two parsers could frame differently is
/// how requests (and responses) are smuggled.
pub fn body_framing(
    fields: &[Header<'_>],
    version: Version,
) -> Result<Option<BodyFraming>, HeadError> {
    let mut codings = all(fields, b"transfer-encoding").peekable();
    if codings.peek().is_some() {
        if version == Version::Http10 {
            return Err(HeadError::Malformed("transfer-encoding on HTTP/1.0"));
        }
        if all(fields, b"content-length").next().is_some() {
            return Err(HeadError::Malformed(
                "both transfer-encoding and content-length",
            ));
        }
        // Exactly one coding, `chunked`, over all the fields.
        let mut n = 0;
        for value in codings {
            for token in value.split(|&b| b == b',') {
                let token = trim(token);
                if token.is_empty() {
                    continue;
                }
                n += 1;
                if !token.eq_ignore_ascii_case(b"chunked") {
                    return Err(HeadError::UnsupportedCoding);
                }
            }
        }
        return match n {
            1 => Ok(Some(BodyFraming::Chunked)),
            0 => Err(HeadError::Malformed("empty transfer-encoding")),
            _ => Err(HeadError::Malformed("chunked applied twice")),
        };
    }
    let mut length = None;
    for value in all(fields, b"content-length") {
        // A list of equal values is one value (RFC 9110 §8.6).
        for item in value.split(|&b| b == b',') {
            let n =
                parse_decimal(trim(item)).ok_or(HeadError::Malformed("invalid content-length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(HeadError::Malformed("conflicting content-length"));
            }
            length = Some(n);
        }
    }
    Ok(length.map(|n| match n {
        0 => BodyFraming::None,
        n => BodyFraming::Length(n),
    }))
}

/// Whether the connection stays open after this message (RFC 9112
/// §9.3): HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with
/// `Connection: keep-alive`.
pub fn keep_alive(fields: &[Header<'_>], version: Version) -> bool {
    let has = |option: &[u8]| {
        all(fields, b"connection").any(|v| {
            v.split(|&b| b == b',')
                .any(|t| trim(t).eq_ignore_ascii_case(option))
        })
    };
    match version {
        Version::Http11 => !has(b"close"),
        Version::Http10 => has(b"keep-alive") && !has(b"close"),
    }
}

/// `value` without surrounding spaces and tabs.
pub fn trim(value: &[u8]) -> &[u8] {
    let start = value
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    &value[start..end]
}

/// A non-empty run of decimal digits that fits a u64.
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let text = str::from_utf8(digits).ok()?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    text.parse().ok()
}
