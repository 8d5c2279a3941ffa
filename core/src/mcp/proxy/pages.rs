//! The pages of a list (MCP 2026-07-28 §7.2): the cursor rule, the
//! request of the next page, and the pages merged into one result for a
//! caller that cannot page (a typed binding's list RPC: its messages have
//! no cursor, typed binding §7 step 7, §8).
//!
//! A proxy that merges follows the first page's `nextCursor` with the same
//! request carrying that cursor ([`with_cursor`]), reads the pages' cursors
//! by one rule ([`next_cursor`]), and at the end writes one result
//! ([`merge`]): the first page's members, its list joined with every
//! page's, and `nextCursor` only when the last page read left one (more
//! pages than the proxy reads: the typed binding refuses it).

use crate::mcp::json;
use crate::mcp::writer::{JsonWriter, Overflow};

/// What a page says of the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor<'a> {
    /// `nextCursor` is a string (its raw JSON text, quotes included): the
    /// list goes on.
    Next(&'a [u8]),
    /// No string `nextCursor` (none, `null`, anything else): the last page.
    End,
}

/// The cursor rule: a page's `nextCursor` when it is a string.
pub fn next_cursor(result: &[u8]) -> Cursor<'_> {
    match json::get(result, b"nextCursor") {
        Some(c) if json::kind(c) == Some(json::Kind::String) => Cursor::Next(json::trim(c)),
        _ => Cursor::End,
    }
}

/// Whether `params` (a list request's) asks for the first page: no
/// cursor, or a `null` one.
pub fn first_page(params: &[u8]) -> bool {
    json::get(params, b"cursor").is_none_or(|c| json::kind(c) == Some(json::Kind::Null))
}

/// `params` (a list request's, a JSON object) with `cursor` (raw JSON
/// text) as its `cursor`: put in place of the one it had, or added first.
/// Writes into `out`; the length written.
pub fn with_cursor(params: &[u8], cursor: &[u8], out: &mut [u8]) -> Result<usize, Overflow> {
    let mut w = JsonWriter::new(out);
    let mut done = 0;
    let mut replaced = false;
    for (key, value) in json::members(params) {
        if json::key_is(key, b"cursor") {
            let at = json::span(params, value);
            w.raw(params.get(done..at.start).unwrap_or_default())
                .raw(cursor);
            done = at.end;
            replaced = true;
        }
    }
    if !replaced {
        let open = params.iter().position(|&b| b == b'{').map_or(0, |i| i + 1);
        w.raw(b"{\"cursor\":").raw(cursor);
        if json::members(params).next().is_some() {
            w.raw(b",");
        }
        done = open;
        if json::trim(params).is_empty() {
            w.raw(b"}");
        }
    }
    w.raw(params.get(done..).unwrap_or_default());
    w.finish().map(<[u8]>::len)
}

/// Why pages could not be merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeError {
    /// Page `page` (0: the first) has a `key` member that is not an
    /// array, or the first page has none.
    NoArray { page: usize },
    /// The buffer was too small.
    Overflow(Overflow),
}

/// Room enough for [`merge`] of these pages: the texts' lengths and a
/// little punctuation.
pub fn merged_len_bound<P: AsRef<[u8]>>(first: &[u8], pages: &[P]) -> usize {
    pages.iter().fold(first.len().saturating_add(2), |n, p| {
        n.saturating_add(p.as_ref().len()).saturating_add(1)
    })
}

/// The list's elements' text (without its brackets), or `None` when `v`
/// is not an array.
fn elements(v: &[u8]) -> Option<&[u8]> {
    let inner = json::trim(v).strip_prefix(b"[")?.strip_suffix(b"]")?;
    Some(json::trim(inner))
}

/// The first page of a list (`first`, a result object) and the pages that
/// followed it, merged: `first`'s members in their order, but its `key`
/// array holding the elements of every page's (a page without `key` adds
/// none) and without `nextCursor`; the last page's `nextCursor`, when it is
/// not `null`, after them. Writes into `out` ([`merged_len_bound`] is
/// enough); the length written.
pub fn merge<P: AsRef<[u8]>>(
    first: &[u8],
    key: &str,
    pages: &[P],
    out: &mut [u8],
) -> Result<usize, MergeError> {
    let key = key.as_bytes();
    fn lists<'p>(p: &'p [u8], key: &[u8]) -> Option<Option<&'p [u8]>> {
        match json::get(p, key) {
            Some(v) => elements(v).map(Some),
            None => Some(None),
        }
    }
    if !matches!(lists(first, key), Some(Some(_))) {
        return Err(MergeError::NoArray { page: 0 });
    }
    for (i, page) in pages.iter().enumerate() {
        if lists(page.as_ref(), key).is_none() {
            return Err(MergeError::NoArray { page: i + 1 });
        }
    }
    let mut w = JsonWriter::new(out);
    w.raw(b"{");
    let mut comma = false;
    let mut joined = false;
    for (k, v) in json::members(first) {
        if json::key_is(k, b"nextCursor") {
            continue;
        }
        if comma {
            w.raw(b",");
        }
        comma = true;
        w.raw(k).raw(b":");
        if joined || !json::key_is(k, key) {
            w.raw(v);
            continue;
        }
        // The first member of the key is the list (as `json::get` finds).
        joined = true;
        w.raw(b"[");
        let mut first_element = true;
        let all = core::iter::once(first).chain(pages.iter().map(AsRef::as_ref));
        for items in all.filter_map(|p| lists(p, key).flatten()) {
            if items.is_empty() {
                continue;
            }
            if !first_element {
                w.raw(b",");
            }
            first_element = false;
            w.raw(items);
        }
        w.raw(b"]");
    }
    let last = pages.last().map_or(first, AsRef::as_ref);
    if let Some(cursor) =
        json::get(last, b"nextCursor").filter(|c| json::kind(c) != Some(json::Kind::Null))
    {
        if comma {
            w.raw(b",");
        }
        w.raw(b"\"nextCursor\":").raw(cursor);
    }
    w.raw(b"}");
    w.finish().map(<[u8]>::len).map_err(MergeError::Overflow)
}

#[cfg(test)]
mod tests {
    use std::string::String;
    use std::vec;
    use std::vec::Vec;

    use super::*;

    fn merged(first: &str, pages: &[&str]) -> Result<String, MergeError> {
        let mut out = vec![0; merged_len_bound(first.as_bytes(), pages)];
        let n = merge(first.as_bytes(), "prompts", pages, &mut out)?;
        Ok(String::from_utf8(out[..n].to_vec()).unwrap())
    }

    #[test]
    fn pages_are_joined_until_the_cursor_ends() {
        assert_eq!(
            merged(
                r#"{"prompts":[{"name":"a"}],"nextCursor":"c1","ttlMs":5}"#,
                &[
                    r#"{"prompts":[{"name":"b"}],"nextCursor":"c2","ttlMs":9}"#,
                    r#"{"prompts":[ ],"nextCursor":null}"#,
                ],
            )
            .unwrap(),
            r#"{"prompts":[{"name":"a"},{"name":"b"}],"ttlMs":5}"#
        );
        // A page without the list adds nothing; one whose list is not an
        // array is the server's fault, as is a first page without it.
        assert_eq!(
            merged(r#"{"prompts":[1],"nextCursor":"c"}"#, &[r#"{}"#]).unwrap(),
            r#"{"prompts":[1]}"#
        );
        assert_eq!(
            merged(
                r#"{"prompts":[],"nextCursor":"c1"}"#,
                &[r#"{"prompts":{}}"#]
            ),
            Err(MergeError::NoArray { page: 1 })
        );
        assert_eq!(
            merged(r#"{"nextCursor":"c1"}"#, &[r#"{"prompts":[]}"#]),
            Err(MergeError::NoArray { page: 0 })
        );
        // A cursor left by the last page read stays: the list goes on.
        assert_eq!(
            merged(
                r#"{"prompts":[],"nextCursor":"c1"}"#,
                &[r#"{"prompts":[2],"nextCursor":"c2"}"#]
            )
            .unwrap(),
            r#"{"prompts":[2],"nextCursor":"c2"}"#
        );
        // Any number of pages fits in the bound.
        let pages: Vec<String> = (0..50)
            .map(|i| std::format!(r#"{{ "prompts" : [ {i} , {i} ] , "nextCursor" : "c{i}" }}"#))
            .collect();
        let text = merged(
            r#"{"prompts":[]}"#,
            &pages.iter().map(String::as_str).collect::<Vec<_>>(),
        )
        .unwrap();
        assert!(
            text.ends_with(r#"48,49 , 49],"nextCursor":"c49"}"#),
            "{text}"
        );
    }

    #[test]
    fn the_cursor_rule_and_the_next_pages_request() {
        assert_eq!(
            next_cursor(br#"{"nextCursor":"c1"}"#),
            Cursor::Next(br#""c1""#)
        );
        assert_eq!(next_cursor(br#"{"nextCursor":null}"#), Cursor::End);
        assert_eq!(next_cursor(br#"{"nextCursor":7}"#), Cursor::End);
        assert_eq!(next_cursor(br#"{}"#), Cursor::End);
        assert!(first_page(br#"{"_meta":{}}"#));
        assert!(first_page(br#"{"cursor":null}"#));
        assert!(!first_page(br#"{"cursor":"c"}"#));
        let page = |params: &str| {
            let mut out = vec![0; 128];
            let n = with_cursor(params.as_bytes(), br#""c2""#, &mut out).unwrap();
            String::from_utf8(out[..n].to_vec()).unwrap()
        };
        assert_eq!(
            page(r#"{"_meta":{"a":1}}"#),
            r#"{"cursor":"c2","_meta":{"a":1}}"#
        );
        assert_eq!(
            page(r#"{"cursor":"c1","_meta":{}}"#),
            r#"{"cursor":"c2","_meta":{}}"#
        );
        assert_eq!(page(r#"{}"#), r#"{"cursor":"c2"}"#);
        assert_eq!(page(" { } "), r#"{"cursor":"c2" } "#);
        assert_eq!(page(""), r#"{"cursor":"c2"}"#);
    }
}
