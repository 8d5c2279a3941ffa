//! Walking the pages of a list method (MCP 2026-07-28 §10: `tools/list`,
//! `resources/list`, `resources/templates/list`, `prompts/list`): a
//! result's `nextCursor` says whether a page follows, and the next page's
//! request is the first one's with that cursor. One rule for every walker:
//! the client engines' own `tools/list` after -32020, the host's list
//! helpers, a bridge that merges pages.
//!
//! A walk reads at most a limit of pages ([`MAX_LIST_PAGES`] unless the
//! walker lowers it: the gRPC binding's servers merge up to 1024 pages
//! into one answer); a server whose cursors never end fails the walk
//! instead of looping.

use super::config::MAX_LIST_PAGES;
use crate::mcp::json;
use crate::mcp::writer::JsonWriter;

/// Why a walk stopped before the last page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageError {
    /// `nextCursor` is neither a string nor `null`: the result is not a
    /// page of a list.
    BadCursor,
    /// `max` pages were read and the last still names a next one.
    TooManyPages { max: usize },
}

impl PageError {
    /// The reason, in words (for [`TooManyPages`](Self::TooManyPages), its
    /// `max` says how many pages were read).
    pub const fn reason(&self) -> &'static str {
        match self {
            Self::BadCursor => "the list result's nextCursor is neither a string nor null",
            Self::TooManyPages { .. } => "the list has more pages than the client reads",
        }
    }
}

/// A walk over the pages of one list: how many were read, and the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pages {
    read: usize,
    max: usize,
}

impl Default for Pages {
    fn default() -> Self {
        Self::new(MAX_LIST_PAGES)
    }
}

impl Pages {
    /// A walk of at most `max` pages (at least one).
    pub const fn new(max: usize) -> Self {
        Self {
            read: 0,
            max: if max == 0 { 1 } else { max },
        }
    }

    /// A walk that has read `read` pages already.
    pub(crate) const fn resumed(read: usize, max: usize) -> Self {
        let mut pages = Self::new(max);
        pages.read = read;
        pages
    }

    /// Pages read so far.
    pub const fn read(&self) -> usize {
        self.read
    }

    /// The limit of pages.
    pub const fn max(&self) -> usize {
        self.max
    }

    /// Reads one more page, `result` (a list result, raw JSON object): the
    /// next page's cursor (a raw JSON string, with its quotes), or `None`
    /// after the last page (`nextCursor` absent or `null`).
    pub fn next<'r>(&mut self, result: &'r [u8]) -> Result<Option<&'r [u8]>, PageError> {
        self.next_cursor(json::get(result, b"nextCursor"))
    }

    /// [`Pages::next`] of a page whose `nextCursor` member is `next` (its
    /// raw JSON value; `None` when absent), for a walker that holds the
    /// result in another form.
    pub fn next_cursor<'r>(
        &mut self,
        next: Option<&'r [u8]>,
    ) -> Result<Option<&'r [u8]>, PageError> {
        self.read = self.read.saturating_add(1);
        let Some(raw) = next.map(json::trim) else {
            return Ok(None);
        };
        match json::kind(raw) {
            Some(json::Kind::Null) => Ok(None),
            Some(json::Kind::String) if self.read >= self.max => {
                Err(PageError::TooManyPages { max: self.max })
            }
            Some(json::Kind::String) => Ok(Some(raw)),
            _ => Err(PageError::BadCursor),
        }
    }
}

/// Writes the `params` of the next page's request: `params` (the first
/// page's, a raw JSON object; its `_meta` and any other member kept, a
/// `cursor` replaced) with `cursor` (a raw JSON string, as
/// [`Pages::next`] gave it).
pub fn write_page_params(w: &mut JsonWriter<'_>, params: &[u8], cursor: &[u8]) {
    w.raw(b"{");
    for (key, value) in json::members(params) {
        if json::str_eq(key, b"cursor") {
            continue;
        }
        w.raw(json::trim(key))
            .raw(b":")
            .raw(json::trim(value))
            .raw(b",");
    }
    w.raw(b"\"cursor\":").raw(json::trim(cursor)).raw(b"}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_cursor_is_the_next_page_and_null_or_none_the_last() {
        let mut pages = Pages::new(8);
        assert_eq!(
            pages.next(br#"{"tools":[],"nextCursor":"c2"}"#),
            Ok(Some(&br#""c2""#[..]))
        );
        assert_eq!(pages.next(br#"{"tools":[],"nextCursor":null}"#), Ok(None));
        assert_eq!(pages.next(br#"{"tools":[]}"#), Ok(None));
        assert_eq!(pages.read(), 3);
    }

    #[test]
    fn any_other_cursor_is_an_error() {
        for result in [
            &br#"{"nextCursor":7}"#[..],
            br#"{"nextCursor":{"page":2}}"#,
            br#"{"nextCursor":["c"]}"#,
            br#"{"nextCursor":true}"#,
        ] {
            assert_eq!(Pages::default().next(result), Err(PageError::BadCursor));
        }
    }

    #[test]
    fn a_walk_stops_at_its_limit_with_an_error() {
        let page = br#"{"tools":[],"nextCursor":"again"}"#;
        let mut pages = Pages::new(3);
        assert!(pages.next(page).unwrap().is_some());
        assert!(pages.next(page).unwrap().is_some());
        assert_eq!(pages.next(page), Err(PageError::TooManyPages { max: 3 }));
        // The last page of the limit ends the walk without an error.
        let mut pages = Pages::new(1);
        assert_eq!(pages.next(br#"{"tools":[]}"#), Ok(None));
        assert_eq!(Pages::default().max(), MAX_LIST_PAGES);
    }

    #[test]
    fn the_next_page_keeps_the_params_and_replaces_the_cursor() {
        let mut buf = [0u8; 128];
        let mut w = JsonWriter::new(&mut buf);
        write_page_params(
            &mut w,
            br#"{"cursor":"old","_meta":{"progressToken":1}}"#,
            br#""new""#,
        );
        assert_eq!(
            w.finish().unwrap(),
            br#"{"_meta":{"progressToken":1},"cursor":"new"}"#
        );
        let mut buf = [0u8; 32];
        let mut w = JsonWriter::new(&mut buf);
        write_page_params(&mut w, b"{}", br#""c""#);
        assert_eq!(w.finish().unwrap(), br#"{"cursor":"c"}"#);
    }
}
