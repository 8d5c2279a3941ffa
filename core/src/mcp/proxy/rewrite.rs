//! What a proxy changes in the messages it carries: ids and progress
//! tokens belong to one side of it each.
//!
//! - Downstream, a request carries a progress token of the proxy's (hosts
//!   pick theirs independently, and a stdio child or a session routes
//!   progress by token: MCP 2026-07-28 §3.5): [`with_progress_token`].
//! - Upstream, the server's notifications of the call get the host's
//!   progress token (and are dropped when the host asked for none), and
//!   every place that names the call's id (a listen's subscription id in
//!   `_meta`, the `requestId` of a `notifications/cancelled` that ends it,
//!   §10) gets the host's id: [`Notification`], [`result_for_host`].
//!
//! The input is JSON text a client or server engine validated; the output
//! goes into the caller's buffer ([`Overflow`] says how much it needed).

use core::ops::Range;

use crate::mcp::json;
use crate::mcp::meta::{KEY_SUBSCRIPTION_ID, METHOD_PROGRESS};
use crate::mcp::writer::{JsonWriter, Overflow};

/// The notification that ends a request (here: a listen the server ended).
const METHOD_CANCELLED: &[u8] = b"notifications/cancelled";

/// Writes `src` with each span of `edits` (ascending, within `src`, not
/// overlapping) replaced by its text.
fn splice<'e>(
    w: &mut JsonWriter<'_>,
    src: &[u8],
    edits: impl Iterator<Item = (Range<usize>, &'e [u8])>,
) {
    let mut done = 0;
    for (at, text) in edits {
        if at.start < done {
            continue;
        }
        w.raw(src.get(done..at.start).unwrap_or_default()).raw(text);
        done = at.end;
    }
    w.raw(src.get(done..).unwrap_or_default());
}

/// The spans of `obj`'s `_meta.key` values (every `_meta` member's and
/// every `key` member's: a duplicate is not left to chance).
fn meta_spans<'a>(obj: &'a [u8], key: &'a [u8]) -> impl Iterator<Item = Range<usize>> + 'a {
    json::members(obj)
        .filter(|(k, _)| json::key_is(k, b"_meta"))
        .flat_map(move |(_, meta)| {
            json::members(meta)
                .filter(move |(k, _)| json::key_is(k, key))
                .map(move |(_, v)| json::span(obj, v))
        })
}

/// `params` (a request's, a JSON object) with `token` (JSON text) as the
/// value of every `_meta.progressToken` member; params without one stay as
/// they are. Writes into `out`; the length written.
pub fn with_progress_token(params: &[u8], token: &[u8], out: &mut [u8]) -> Result<usize, Overflow> {
    let mut w = JsonWriter::new(out);
    splice(
        &mut w,
        params,
        meta_spans(params, b"progressToken").map(|at| (at, token)),
    );
    w.finish().map(<[u8]>::len)
}

/// Whether a result's `_meta` names a subscription (the result of a
/// `subscriptions/listen`): the id there is the downstream call's, and
/// the host's replaces it ([`result_for_host`]). Results without the key's
/// text or an escape (which could spell it) are not walked.
pub fn names_subscription(result: &[u8]) -> bool {
    may_name_subscription(result)
        && meta_spans(result, KEY_SUBSCRIPTION_ID.as_bytes())
            .next()
            .is_some()
}

/// Whether `text` has a backslash or the subscription key: a quick look
/// before a walk (most results carry a `_meta`, few the key).
fn may_name_subscription(text: &[u8]) -> bool {
    let key = KEY_SUBSCRIPTION_ID.as_bytes();
    // The key's one slash: found with the backslashes, then the key is
    // compared around it.
    let slash = key.iter().position(|&b| b == b'/').unwrap_or(0);
    let mut from = 0;
    while let Some(at) = find_either(text, from, b'\\', b'/') {
        if text.get(at) == Some(&b'\\') {
            return true;
        }
        if at >= slash && text.get(at - slash..at - slash + key.len()) == Some(key) {
            return true;
        }
        from = at + 1;
    }
    false
}

/// The first index from `from` of `a` or `b`, eight octets at a time on
/// hosts.
fn find_either(text: &[u8], mut from: usize, a: u8, b: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let zero = |w: u64| w.wrapping_sub(LO) & !w & HI;
    if json::WORDS {
        while let Some(word) = text.get(from..).and_then(<[u8]>::first_chunk::<8>) {
            let w = u64::from_le_bytes(*word);
            if zero(w ^ (LO * u64::from(a))) | zero(w ^ (LO * u64::from(b))) != 0 {
                break;
            }
            from += 8;
        }
    }
    let rest = text.get(from..)?;
    rest.iter()
        .position(|&c| c == a || c == b)
        .map(|i| from + i)
}

/// `result` with `host_id` (the host's request id, JSON text) as every
/// `_meta` subscription id. Writes into `out`; the length written.
pub fn result_for_host(result: &[u8], host_id: &[u8], out: &mut [u8]) -> Result<usize, Overflow> {
    let mut w = JsonWriter::new(out);
    splice(
        &mut w,
        result,
        meta_spans(result, KEY_SUBSCRIPTION_ID.as_bytes()).map(|at| (at, host_id)),
    );
    w.finish().map(<[u8]>::len)
}

/// A notification of a forwarded call, on its way to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification<'a> {
    method: &'a [u8],
    params: Option<&'a [u8]>,
}

impl<'a> Notification<'a> {
    /// The notification `text` (a JSON-RPC message a client engine
    /// validated); `None` when it has no method.
    pub fn parse(text: &'a [u8]) -> Option<Self> {
        let [method, params] = json::get_all(text, [b"method", b"params"]);
        let method = method.filter(|m| json::kind(m) == Some(json::Kind::String))?;
        Some(Self {
            method,
            params: params.filter(|p| json::kind(p) == Some(json::Kind::Object)),
        })
    }

    /// The method as a raw JSON string (quotes included).
    pub fn raw_method(&self) -> &'a [u8] {
        self.method
    }

    /// The method's text, when it has no escape.
    pub fn method(&self) -> Option<&'a str> {
        core::str::from_utf8(json::str_plain(self.method)?).ok()
    }

    /// The params as they came (`{}` when there were none).
    pub fn params(&self) -> &'a [u8] {
        self.params.unwrap_or(b"{}")
    }

    /// Whether the host is to see it: a progress notification goes only
    /// to a host that asked for progress.
    pub fn for_host(&self, host_token: Option<&[u8]>) -> bool {
        host_token.is_some() || !json::str_eq(self.method, METHOD_PROGRESS.as_bytes())
    }

    /// The params as the host is to see them: `host_token` (JSON text) as
    /// a progress notification's `progressToken` (added when it has none),
    /// `host_id` (JSON text) as the subscription id in `_meta` and as the
    /// `requestId` of a `notifications/cancelled`. Call when
    /// [`for_host`](Self::for_host). Writes into `out`; the length written.
    pub fn write_params(
        &self,
        host_id: &[u8],
        host_token: Option<&[u8]>,
        out: &mut [u8],
    ) -> Result<usize, Overflow> {
        let params = self.params();
        let progress = json::str_eq(self.method, METHOD_PROGRESS.as_bytes())
            .then_some(host_token)
            .flatten();
        let cancelled = json::str_eq(self.method, METHOD_CANCELLED);
        let mut w = JsonWriter::new(out);
        let mut done = 0;
        if let Some(token) = progress
            && json::get(params, b"progressToken").is_none()
        {
            // `{"progressToken":T,` then the members after the brace.
            w.raw(b"{\"progressToken\":").raw(token);
            if json::members(params).next().is_some() {
                w.raw(b",");
            }
            done = params.iter().position(|&b| b == b'{').map_or(0, |i| i + 1);
        }
        // One walk, in the order of the text: the edits come ascending.
        let mut edit = |w: &mut JsonWriter<'_>, value: &[u8], text: &[u8]| {
            let at = json::span(params, value);
            w.raw(params.get(done..at.start).unwrap_or_default())
                .raw(text);
            done = at.end;
        };
        for (key, value) in json::members(params) {
            if let Some(token) = progress
                && json::key_is(key, b"progressToken")
            {
                edit(&mut w, value, token);
            } else if cancelled && json::key_is(key, b"requestId") {
                edit(&mut w, value, host_id);
            } else if json::key_is(key, b"_meta") {
                for (key, id) in json::members(value) {
                    if json::key_is(key, KEY_SUBSCRIPTION_ID.as_bytes()) {
                        edit(&mut w, id, host_id);
                    }
                }
            }
        }
        w.raw(params.get(done..).unwrap_or_default());
        w.finish().map(<[u8]>::len)
    }
}

#[cfg(test)]
mod tests {
    use std::string::String;
    use std::vec;

    use super::*;

    /// What a writer of `out` wrote, as text.
    fn text(write: impl Fn(&mut [u8]) -> Result<usize, Overflow>) -> String {
        let mut out = vec![0; 512];
        let n = write(&mut out).unwrap();
        String::from_utf8(out[..n].to_vec()).unwrap()
    }

    #[test]
    fn the_downstream_call_carries_the_proxys_progress_token() {
        let t = br#""mcpwire-bridge-7""#;
        let params = br#"{"name":"a","_meta":{"x":1,"progressToken":{"k":[1]},"y":2},"arguments":{"progressToken":3}}"#;
        assert_eq!(
            text(|out| with_progress_token(params, t, out)),
            r#"{"name":"a","_meta":{"x":1,"progressToken":"mcpwire-bridge-7","y":2},"arguments":{"progressToken":3}}"#
        );
        // Every `_meta` member's (a duplicate one is not left to chance);
        // params without a token stay as they are.
        let twice = br#"{"_meta":{"progressToken":1},"_meta":{ "progressToken" : "a" }}"#;
        assert_eq!(
            text(|out| with_progress_token(twice, t, out)),
            r#"{"_meta":{"progressToken":"mcpwire-bridge-7"},"_meta":{ "progressToken" : "mcpwire-bridge-7" }}"#
        );
        let none = r#"{"name":"a","_meta":{}}"#;
        assert_eq!(
            text(|out| with_progress_token(none.as_bytes(), t, out)),
            none
        );
        // Too small a buffer says how much is needed.
        let mut small = [0; 8];
        let needed = params.len() - br#"{"k":[1]}"#.len() + t.len();
        assert_eq!(
            with_progress_token(params, t, &mut small),
            Err(Overflow { needed })
        );
    }

    #[test]
    fn a_result_names_a_subscription_only_in_its_meta() {
        let listening = br#"{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}"#;
        assert!(names_subscription(listening));
        let second = br#"{"_meta":{},"_meta":{"io.modelcontextprotocol/subscriptionId":7}}"#;
        assert!(names_subscription(second));
        // A key spelt with an escape is the same key.
        let escaped = br#"{"\u005fmeta":{"io.modelcontextprotocol/subscriptionId":7}}"#;
        assert!(names_subscription(escaped));
        let key_escaped = br#"{"_meta":{"io.modelcontextprotocol/subscription\u0049d":7}}"#;
        assert!(names_subscription(key_escaped));
        assert!(!names_subscription(
            br#"{"content":[{"type":"text","text":"_met"}]}"#
        ));
        // The key's text outside `_meta`, a `_meta` without it, a URI.
        let elsewhere = br#"{"_meta":{"a":1},"content":[{"type":"text","text":"io.modelcontextprotocol/subscriptionId"}]}"#;
        assert!(!names_subscription(elsewhere));
        let other = br#"{"_meta":{"io.modelcontextprotocol/serverInfo":{}}}"#;
        assert!(!names_subscription(other));
        assert!(!names_subscription(br#"{"uri":"file:///a/b/c/d/e/f/g/h"}"#));
        // The key at every offset (the word scan's edges).
        for pad in 0..17 {
            let mut doc = vec![b'{'];
            doc.extend(core::iter::repeat_n(b' ', pad));
            doc.extend_from_slice(br#""_meta":{"io.modelcontextprotocol/subscriptionId":1}}"#);
            assert!(names_subscription(&doc), "{pad}");
        }
        assert_eq!(
            text(|out| result_for_host(second, br#""h1""#, out)),
            r#"{"_meta":{},"_meta":{"io.modelcontextprotocol/subscriptionId":"h1"}}"#
        );
    }

    /// The host's params of `notification`, or `None` when not for it.
    fn for_host(notification: &str, id: &str, token: Option<&str>) -> Option<String> {
        let n = Notification::parse(notification.as_bytes())?;
        let token = token.map(str::as_bytes);
        n.for_host(token)
            .then(|| text(|out| n.write_params(id.as_bytes(), token, out)))
    }

    #[test]
    fn a_notification_gets_the_hosts_token_and_id() {
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mcpwire-bridge-3","progress":1}}"#;
        assert_eq!(
            for_host(progress, "5", Some(r#"{"t":1}"#)).as_deref(),
            Some(r#"{"progressToken":{"t":1},"progress":1}"#)
        );
        // No token asked for: not for the host.
        assert_eq!(for_host(progress, "5", None), None);
        // A progress notification without a token gets the host's.
        let bare = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":2}}"#;
        assert_eq!(
            for_host(bare, "5", Some("9")).as_deref(),
            Some(r#"{"progressToken":9,"progress":2}"#)
        );
        let empty = r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#;
        assert_eq!(
            for_host(empty, "5", Some("9")).as_deref(),
            Some(r#"{"progressToken":9}"#)
        );
        // A listen's events and its end name the host's id.
        let event = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":17}}}"#;
        assert_eq!(
            for_host(event, r#""L1""#, None).as_deref(),
            Some(r#"{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"}}"#)
        );
        let end = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":17,"reason":"x"}}"#;
        assert_eq!(
            for_host(end, r#""L1""#, None).as_deref(),
            Some(r#"{"requestId":"L1","reason":"x"}"#)
        );
        // Only a cancel's requestId is a call id; a message is as it came.
        let other = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"requestId":17,"progressToken":1}}"#;
        assert_eq!(
            for_host(other, r#""L1""#, Some("2")).as_deref(),
            Some(r#"{"requestId":17,"progressToken":1}"#)
        );
        let parsed = Notification::parse(other.as_bytes()).unwrap();
        assert_eq!(parsed.method(), Some("notifications/message"));
        assert_eq!(parsed.raw_method(), br#""notifications/message""#);
        assert_eq!(Notification::parse(br#"{"jsonrpc":"2.0","id":1}"#), None);
    }
}
