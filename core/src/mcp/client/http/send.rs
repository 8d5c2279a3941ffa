//! A call's request as it goes on the wire (MCP 2026-07-28 §5.1, §5.4,
//! §13): its body for the era (the modern message as the application
//! wrote it; in a legacy era without the modern `_meta` keys, written by
//! the stdio client's own rules), and its head: the whole HTTP/1.1
//! request, or the fields of an HTTP/2 head, for the era's shape (the
//! mirrored fields of a modern `POST`; the session's fields of a 2025
//! one; the `endpoint` event's target of a 2024 one).

use super::call::{Calls, Own};
use super::config::HttpClientConfig;
use super::request::{
    Endpoint, RequestError, Session, legacy_post_fields, post_fields, write_delete,
    write_get_events, write_legacy_post, write_post,
};
use crate::mcp::client::calls::{Mode, bytes, bytes_mut, ensure};
use crate::mcp::client::stdio::line::write_request;
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;

/// Fields of an HTTP/2 request head.
pub(super) const MAX_FIELDS: usize = 40;

/// The shape of the era's requests.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shape<'a> {
    /// 2026-07-28: the mirrored fields.
    Modern,
    /// The 2025 session: its id (once `initialize` gave one) and version.
    Session(Session<'a>),
    /// The 2024 HTTP+SSE shape: every message `POST`ed to the target the
    /// `endpoint` event named.
    HttpSse { target: &'a str },
}

impl Shape<'_> {
    /// A shape of an older era (§13).
    pub(super) fn legacy(&self) -> bool {
        !matches!(self, Self::Modern)
    }
}

/// The fields of an HTTP/2 request head, written in the call's buffer:
/// (offset, name length, value length, never indexed).
#[derive(Debug)]
pub(super) struct H2Fields {
    pub(super) at: [(usize, usize, usize, bool); MAX_FIELDS],
    pub(super) n: usize,
}

/// Makes the body of call `i`'s next request: the application's message
/// as written (modern), or without the modern `_meta` keys (a legacy
/// era); a re-list's page is written already. `false`: the store had no
/// room (the call failed).
pub(super) fn prepare_body<S: CallStore, const CALLS: usize, const CACHE: usize>(
    calls: &mut Calls<S, CALLS, CACHE>,
    i: usize,
    shape: Shape<'_>,
) -> bool {
    let Some(slot) = calls.slots.get_mut(i) else {
        return false;
    };
    let Some(c) = slot.call.as_mut() else {
        return false;
    };
    if matches!(c.mode, Mode::Relist(_)) {
        return true;
    }
    c.cur = c.orig;
    if !shape.legacy() || c.own.is_some() {
        return true;
    }
    let orig = c.orig;
    let write = |buf: &mut [u8]| -> Result<(usize, usize), usize> {
        if buf.len() < orig.1 {
            return Err(usize::MAX);
        }
        let (before, after) = buf.split_at_mut(orig.1);
        let mut w = JsonWriter::new(after);
        write_request(&mut w, before.get(orig.0..).unwrap_or(b""), None);
        w.finish()
            .map(|t| (orig.1, orig.1 + t.len()))
            .map_err(|e| orig.1.saturating_add(e.needed))
    };
    let mut written = write(bytes_mut(&mut calls.store, &mut slot.req));
    if let Err(needed) = written
        && needed != usize::MAX
        && ensure(&mut calls.store, &mut slot.req, needed)
    {
        written = write(bytes_mut(&mut calls.store, &mut slot.req));
    }
    match written {
        Ok(span) => {
            c.cur = span;
            true
        }
        Err(_) => false,
    }
}

/// The raw JSON name of the tool a `tools/call` body names.
fn tool_name(body: &[u8]) -> Option<&[u8]> {
    json::get(body, b"params")
        .and_then(|p| json::get(p, b"name"))
        .map(json::trim)
}

/// Writes call `i`'s whole HTTP/1.1 request after its body (growing its
/// buffer once when the request needs it): `wire` says where it lies.
pub(super) fn write_http1<S: CallStore, const CALLS: usize, const CACHE: usize>(
    calls: &mut Calls<S, CALLS, CACHE>,
    i: usize,
    config: &HttpClientConfig,
    shape: Shape<'_>,
) -> Result<(), RequestError> {
    let Calls {
        slots,
        store,
        cache,
        ..
    } = calls;
    let Some(slot) = slots.get_mut(i) else {
        return Err(RequestError::BadEndpoint("no call"));
    };
    let Some(c) = slot.call.as_mut() else {
        return Err(RequestError::BadEndpoint("no call"));
    };
    let (cur, token, own) = (c.cur, c.token, c.own);
    let mut grown = false;
    loop {
        let buf = bytes_mut(store, &mut slot.req);
        if buf.len() < cur.1 {
            return Err(RequestError::Overflow { needed: cur.1 });
        }
        let (head, tail) = buf.split_at_mut(cur.1);
        let bearer = head
            .get(..token)
            .and_then(|t| core::str::from_utf8(t).ok())
            .filter(|t| !t.is_empty());
        let body = head.get(cur.0..).unwrap_or(b"");
        let written = match shape {
            // The 2024 shape's stream is opened at the endpoint's URL.
            _ if own == Some(Own::Events) => {
                let endpoint = Endpoint {
                    authority: config.authority,
                    target: config.target,
                    bearer,
                };
                write_get_events(tail, &endpoint, &Session::default())
            }
            Shape::Modern => {
                let endpoint = Endpoint {
                    authority: config.authority,
                    target: config.target,
                    bearer,
                };
                let schema = tool_name(body).and_then(|n| cache.get(n));
                write_post(tail, &endpoint, body, schema)
            }
            Shape::Session(session) => {
                let endpoint = Endpoint {
                    authority: config.authority,
                    target: config.target,
                    bearer,
                };
                if own == Some(Own::Delete) {
                    write_delete(tail, &endpoint, &session)
                } else {
                    write_legacy_post(tail, &endpoint, &session, body)
                }
            }
            Shape::HttpSse { target } => {
                let endpoint = Endpoint {
                    authority: config.authority,
                    target,
                    bearer,
                };
                write_legacy_post(tail, &endpoint, &Session::default(), body)
            }
        };
        match written {
            Ok(n) => {
                c.wire = (cur.1, cur.1 + n);
                c.sent = 0;
                return Ok(());
            }
            Err(RequestError::Overflow { needed }) if !grown => {
                grown = true;
                if !ensure(store, &mut slot.req, cur.1 + needed) {
                    return Err(RequestError::Overflow { needed });
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes the fields of call `i`'s HTTP/2 request head after its body:
/// the pseudo-fields, the era's fields, `content-length`.
pub(super) fn write_h2_fields<S: CallStore, const CALLS: usize, const CACHE: usize>(
    calls: &mut Calls<S, CALLS, CACHE>,
    i: usize,
    config: &HttpClientConfig,
    shape: Shape<'_>,
) -> Result<H2Fields, RequestError> {
    let Calls {
        slots,
        store,
        cache,
        ..
    } = calls;
    let Some(slot) = slots.get_mut(i) else {
        return Err(RequestError::BadEndpoint("no call"));
    };
    let Some(c) = slot.call.as_mut() else {
        return Err(RequestError::BadEndpoint("no call"));
    };
    let (cur, token, own) = (c.cur, c.token, c.own);
    let target = match shape {
        Shape::HttpSse { target } => target,
        _ => config.target,
    };
    let method: &[u8] = if own == Some(Own::Delete) {
        b"DELETE"
    } else {
        b"POST"
    };
    let mut need = 0;
    for _ in 0..2 {
        if need > 0 && !ensure(store, &mut slot.req, cur.1 + need) {
            return Err(RequestError::Overflow { needed: need });
        }
        let buf = bytes_mut(store, &mut slot.req);
        if buf.len() < cur.1 {
            return Err(RequestError::Overflow { needed: cur.1 });
        }
        let (head, tail) = buf.split_at_mut(cur.1);
        let bearer = head
            .get(..token)
            .and_then(|t| core::str::from_utf8(t).ok())
            .filter(|t| !t.is_empty());
        let body = head.get(cur.0..).unwrap_or(b"");
        let mut fields = H2Fields {
            at: [(0, 0, 0, false); MAX_FIELDS],
            n: 0,
        };
        let mut len = 0;
        let mut overflow = false;
        let mut push = |name: &[u8], parts: &[&[u8]]| {
            let vlen: usize = parts.iter().map(|p| p.len()).sum();
            let Some(dst) = tail.get_mut(len..len + name.len() + vlen) else {
                overflow = true;
                len += name.len() + vlen;
                return;
            };
            if fields.n >= MAX_FIELDS {
                overflow = true;
                return;
            }
            dst[..name.len()].copy_from_slice(name);
            let mut at = name.len();
            for p in parts {
                dst[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            fields.at[fields.n] = (cur.1 + len, name.len(), vlen, name == b"authorization");
            fields.n += 1;
            len += name.len() + vlen;
        };
        push(b":method", &[method]);
        push(b":scheme", &[config.scheme.as_bytes()]);
        push(b":authority", &[config.authority.as_bytes()]);
        push(b":path", &[target.as_bytes()]);
        let emitted = match shape {
            Shape::Modern => {
                let schema = tool_name(body).and_then(|n| cache.get(n));
                post_fields(body, schema, bearer, &mut push)
            }
            Shape::Session(session) if own == Some(Own::Delete) => {
                let mut drop_body = |name: &[u8], parts: &[&[u8]]| {
                    // A DELETE has no body: no content fields.
                    if name != b"content-type" && name != b"accept" {
                        push(name, parts);
                    }
                };
                legacy_post_fields(&session, bearer, &mut drop_body)
            }
            Shape::Session(session) => legacy_post_fields(&session, bearer, &mut push),
            Shape::HttpSse { .. } => legacy_post_fields(&Session::default(), bearer, &mut push),
        };
        emitted?;
        if own != Some(Own::Delete) {
            let mut digits = [0u8; 20];
            let n = decimal(body.len(), &mut digits);
            push(b"content-length", &[&digits[..n]]);
        }
        if !overflow {
            c.wire = (cur.1, cur.1 + len);
            c.sent = 0;
            return Ok(fields);
        }
        need = len;
    }
    Err(RequestError::Overflow { needed: need })
}

/// `n` in decimal at the start of `out`; its length.
fn decimal(mut n: usize, out: &mut [u8; 20]) -> usize {
    let mut tmp = [0u8; 20];
    let mut at = tmp.len();
    loop {
        at -= 1;
        tmp[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    let len = tmp.len() - at;
    out[..len].copy_from_slice(&tmp[at..]);
    len
}

/// The octets of call `i`'s buffer that its head's fields lie in.
pub(super) fn req_bytes<S: CallStore, const CALLS: usize, const CACHE: usize>(
    calls: &Calls<S, CALLS, CACHE>,
    i: usize,
) -> &[u8] {
    calls
        .slots
        .get(i)
        .map_or(&[][..], |s| bytes(&calls.store, &s.req))
}
