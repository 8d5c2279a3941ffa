//! The `tools/list` annotation cache: the input schemas with
//! `x-mcp-header` annotations, learned from every `tools/list` result the
//! client sees (the application's, or its own re-list after -32020, every
//! page), and the warnings for the tools left out; and the re-list rule
//! of a `tools/call` refused with -32020 (MCP 2026-07-28 §5.5.4), the same
//! for every engine that mirrors arguments ([`after_answer`],
//! [`write_relist`]): the tunnel's and Streamable HTTP's.

use super::calls::{Mode, Slot, bytes, bytes_mut, ensure, reopen};
use super::pages::{PageError, Pages};
use super::request::frame_into;
use crate::mcp::error::{HEADER_MISMATCH, RpcError};
use crate::mcp::json;
use crate::mcp::mirror::Annotations;
use crate::mcp::registry::MAX_CLIENT_ANNOTATIONS;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;

/// Longest tool name a warning carries.
pub(super) const WARN_NAME: usize = 64;
/// The id of the client's own `tools/list`.
const RELIST_ID: &[u8] = b"\"mcpwire-relist\"";

/// The schemas with `x-mcp-header` annotations of the last `tools/list`:
/// entries of (name length u16, schema length u16, raw name, raw schema).
pub(super) struct Cache<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Cache<N> {
    pub(super) const fn new() -> Self {
        Self {
            bytes: [0; N],
            len: 0,
        }
    }

    pub(super) fn clear(&mut self) {
        self.len = 0;
    }

    /// Adds `schema` for `tool` when it has valid `x-mcp-header`
    /// annotations and the tool is not cached yet; `false` otherwise or
    /// when it does not fit.
    pub(super) fn learn_schema(&mut self, tool: &[u8], schema: &[u8]) -> bool {
        let valid =
            Annotations::<'_, MAX_CLIENT_ANNOTATIONS>::collect(schema).is_ok_and(|a| !a.is_empty());
        valid && self.get(tool).is_none() && self.insert(tool, schema)
    }

    pub(super) fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut at = 0;
        core::iter::from_fn(move || {
            let head = self.bytes.get(at..at + 4)?;
            let n = usize::from(u16::from_le_bytes([head[0], head[1]]));
            let s = usize::from(u16::from_le_bytes([head[2], head[3]]));
            let name = self.bytes.get(at + 4..at + 4 + n)?;
            let schema = self.bytes.get(at + 4 + n..at + 4 + n + s)?;
            at += 4 + n + s;
            (at <= self.len).then_some((name, schema))
        })
    }

    pub(super) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.entries().find(|(n, _)| *n == name).map(|(_, s)| s)
    }

    pub(super) fn insert(&mut self, name: &[u8], schema: &[u8]) -> bool {
        let need = 4 + name.len() + schema.len();
        let (Ok(n), Ok(s)) = (u16::try_from(name.len()), u16::try_from(schema.len())) else {
            return false;
        };
        let Some(dst) = self.bytes.get_mut(self.len..self.len + need) else {
            return false;
        };
        dst[..2].copy_from_slice(&n.to_le_bytes());
        dst[2..4].copy_from_slice(&s.to_le_bytes());
        dst[4..4 + name.len()].copy_from_slice(name);
        dst[4 + name.len()..].copy_from_slice(schema);
        self.len += need;
        true
    }
}

/// The warnings of one `tools/list` result.
pub(super) struct Warnings {
    items: [([u8; WARN_NAME], u8, &'static str); 8],
    len: usize,
}

impl Warnings {
    pub(super) fn new() -> Self {
        Self {
            items: [([0; WARN_NAME], 0, ""); 8],
            len: 0,
        }
    }

    fn add(&mut self, name: &[u8], reason: &'static str) {
        let Some(item) = self.items.get_mut(self.len) else {
            return;
        };
        let n = name.len().min(WARN_NAME);
        item.0[..n].copy_from_slice(&name[..n]);
        item.1 = n as u8;
        item.2 = reason;
        self.len += 1;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = ([u8; WARN_NAME], u8, &'static str)> + '_ {
        self.items[..self.len].iter().copied()
    }
}

/// Learns the annotations of a `tools/list` result (clearing the cache
/// first when `first`), and writes the result without the tools whose
/// annotations are invalid into `out` when given.
pub(super) fn learn<const N: usize>(
    cache: &mut Cache<N>,
    result: &[u8],
    first: bool,
    mut out: Option<&mut JsonWriter<'_>>,
    warnings: &mut Warnings,
) {
    if first {
        cache.clear();
    }
    if let Some(w) = out.as_deref_mut() {
        w.raw(b"{");
        let mut first_member = true;
        for (key, value) in json::members(result) {
            if json::str_eq(key, b"tools") {
                continue;
            }
            if !first_member {
                w.raw(b",");
            }
            first_member = false;
            w.raw(json::trim(key)).raw(b":").raw(json::trim(value));
        }
        if !first_member {
            w.raw(b",");
        }
        w.raw(b"\"tools\":[");
    }
    let mut first_tool = true;
    for tool in json::get(result, b"tools")
        .map(json::elements)
        .into_iter()
        .flatten()
    {
        let name = json::get(tool, b"name").map_or(b"\"\"".as_slice(), json::trim);
        let schema = json::get(tool, b"inputSchema").map_or(b"{}".as_slice(), json::trim);
        let keep = match Annotations::<'_, MAX_CLIENT_ANNOTATIONS>::collect(schema) {
            Ok(ann) => {
                if !ann.is_empty() && !cache.insert(name, schema) {
                    warnings.add(
                        name,
                        "no room in the annotation cache: the tool's arguments are not mirrored",
                    );
                }
                true
            }
            Err(e) => {
                warnings.add(name, e.reason());
                false
            }
        };
        if keep && let Some(w) = out.as_deref_mut() {
            if !first_tool {
                w.raw(b",");
            }
            first_tool = false;
            w.raw(json::trim(tool));
        }
    }
    if let Some(w) = out {
        w.raw(b"]}");
    }
}

/// What the re-list rule makes of the answer to one request of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Relist<'c> {
    /// The answer is the call's: hand it out.
    Deliver,
    /// Read `tools/list` (page `page`, after `cursor`, a raw JSON string).
    Page { page: u16, cursor: Option<&'c [u8]> },
    /// The re-list is over: send the application's call once more.
    Retry,
    /// The re-list failed: the application gets this error, with its own
    /// id (never the re-list's).
    Failed(RpcError),
}

/// The re-list rule (§5.5.4) on the answer `message` (a JSON-RPC response)
/// to the request of a call in `mode`: a `tools/call` (`tool_call`) refused
/// with -32020 reads every page of `tools/list` again (at most
/// `max_pages`, walked by [`Pages`]), learning each into `cache`
/// (`warnings` for the tools left out), then is sent once more. `cursor`
/// holds the next page's cursor. A page whose `nextCursor` is not a
/// cursor, or one past `max_pages`, fails the call.
pub(super) fn after_answer<'c, const N: usize>(
    mode: Mode,
    tool_call: bool,
    message: &[u8],
    cache: &mut Cache<N>,
    warnings: &mut Warnings,
    cursor: &'c mut [u8; 256],
    max_pages: usize,
) -> Relist<'c> {
    let error = json::get(message, b"error");
    let code = error
        .and_then(|e| json::get(e, b"code"))
        .and_then(json::as_i64);
    match mode {
        Mode::Call if tool_call && code == Some(i64::from(HEADER_MISMATCH)) => Relist::Page {
            page: 0,
            cursor: None,
        },
        Mode::Relist(page) if error.is_none() => {
            let result = json::get(message, b"result").unwrap_or(b"{}");
            let next = Pages::resumed(usize::from(page), max_pages).next(result);
            learn(cache, result, page == 0, None, warnings);
            let next = match next {
                Ok(next) => next,
                Err(PageError::BadCursor) => {
                    return Relist::Failed(RpcError::new(
                        HEADER_MISMATCH,
                        "tools/list, read again after -32020: its nextCursor is neither a string nor null",
                    ));
                }
                Err(PageError::TooManyPages { .. }) => {
                    return Relist::Failed(RpcError::new(
                        HEADER_MISMATCH,
                        "tools/list, read again after -32020, has more pages than the client reads",
                    ));
                }
            };
            // A cursor longer than the room ends the re-list: the call goes
            // again with what was learned.
            let kept = next.and_then(|c| {
                cursor.get_mut(..c.len())?.copy_from_slice(c);
                Some(c.len())
            });
            match (kept, page.checked_add(1)) {
                (Some(n), Some(page)) => Relist::Page {
                    page,
                    cursor: cursor.get(..n),
                },
                _ => Relist::Retry,
            }
        }
        Mode::Relist(_) => Relist::Failed(RpcError::new(
            code.and_then(|c| i32::try_from(c).ok())
                .unwrap_or(HEADER_MISMATCH),
            "tools/list, read again after -32020, failed",
        )),
        _ => Relist::Deliver,
    }
}

/// Writes the client's own `tools/list` request (page `cursor`, a raw JSON
/// string) carrying `meta`, the `_meta` of the application's request.
pub(super) fn write_relist(w: &mut JsonWriter<'_>, meta: Option<&[u8]>, cursor: Option<&[u8]>) {
    crate::mcp::envelope::write_request(w, RELIST_ID, b"tools/list", |w| {
        w.raw(b"{");
        let mut first = true;
        if let Some(c) = cursor {
            w.raw(b"\"cursor\":").raw(c);
            first = false;
        }
        if let Some(m) = meta {
            if !first {
                w.raw(b",");
            }
            w.raw(b"\"_meta\":").raw(m);
        }
        w.raw(b"}");
    });
}

/// Where the `_meta` of `request` (raw JSON) lies in it.
pub(super) fn meta_span(request: &[u8]) -> Option<core::ops::Range<usize>> {
    json::get(request, b"params")
        .and_then(|p| json::get(p, b"_meta"))
        .map(|m| json::span(request, json::trim(m)))
}

/// Points the call at a new `tools/list` request (page `cursor`), written
/// after the application's request in `req`. `false` when it does not fit.
pub(super) fn start_relist<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    cursor: Option<&[u8]>,
    page: u16,
    max_message: usize,
) -> bool {
    let Some(a) = slot.active.as_mut() else {
        return false;
    };
    // The original `_meta`, whatever its size, is copied from the original
    // request (before `at` in the same buffer) straight into the re-list.
    let (orig_at, orig_end) = a.orig_json;
    let meta = meta_span(
        bytes(store, &slot.req)
            .get(orig_at..orig_end)
            .unwrap_or(b""),
    )
    .map(|r| orig_at + r.start..orig_at + r.end);
    let at = a.orig_frame.1;
    let write = |w: &mut JsonWriter<'_>, meta: Option<&[u8]>| write_relist(w, meta, cursor);
    let frame = |buf: &mut [u8]| -> Result<(usize, usize), usize> {
        if buf.len() < at {
            return Err(usize::MAX);
        }
        let (before, after) = buf.split_at_mut(at);
        let meta = meta.clone().and_then(|r| before.get(r));
        frame_into(after, 0, |w| write(w, meta))
            .map(|(s, e)| (at + s, at + e))
            .map_err(|needed| at.saturating_add(needed))
    };
    let span = match frame(bytes_mut(store, &mut slot.req)) {
        Ok(span) => span,
        // The buffer grows to the request, once.
        Err(needed) if ensure(store, &mut slot.req, needed) => {
            match frame(bytes_mut(store, &mut slot.req)) {
                Ok(span) => span,
                Err(_) => return false,
            }
        }
        Err(_) => return false,
    };
    let Some(a) = slot.active.as_mut() else {
        return false;
    };
    reopen(a, Mode::Relist(page), max_message);
    a.frame = (at, span.1);
    a.json = span;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(
        result: &str,
        page: u16,
        max: usize,
    ) -> (Option<(u16, Option<std::string::String>)>, bool) {
        let mut cache = Cache::<512>::new();
        let mut warnings = Warnings::new();
        let mut cursor = [0u8; 256];
        let message = std::format!(r#"{{"jsonrpc":"2.0","id":"r","result":{result}}}"#);
        match after_answer(
            Mode::Relist(page),
            true,
            message.as_bytes(),
            &mut cache,
            &mut warnings,
            &mut cursor,
            max,
        ) {
            Relist::Page { page, cursor } => (
                Some((
                    page,
                    cursor.map(|c| std::string::String::from_utf8_lossy(c).into_owned()),
                )),
                false,
            ),
            Relist::Retry => (None, false),
            Relist::Failed(_) => (None, true),
            Relist::Deliver => panic!("a re-list page is never the call's answer"),
        }
    }

    /// The re-list after -32020 walks the pages by the one rule: a string
    /// cursor reads the next page, none ends the walk (the call goes
    /// again), any other cursor or a page past the limit fails the call.
    #[test]
    fn the_relist_walks_pages_by_the_page_rule() {
        assert_eq!(
            page(r#"{"tools":[],"nextCursor":"c1"}"#, 0, 4),
            (Some((1, Some("\"c1\"".into()))), false)
        );
        assert_eq!(
            page(r#"{"tools":[],"nextCursor":null}"#, 2, 4),
            (None, false)
        );
        assert_eq!(page(r#"{"tools":[]}"#, 0, 4), (None, false));
        assert_eq!(page(r#"{"tools":[],"nextCursor":5}"#, 0, 4), (None, true));
        assert_eq!(
            page(r#"{"tools":[],"nextCursor":"c4"}"#, 3, 4),
            (None, true)
        );
    }
}
