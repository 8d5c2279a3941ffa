//! Multi round-trip requests, the client's side (MCP 2026-07-28 §9), the
//! same for every engine: a call started with
//! [`CallOptions::answers_input`](super::CallOptions::answers_input) whose
//! result says `resultType: "input_required"` is handed out as
//! [`ClientEvent::InputRequired`](super::ClientEvent::InputRequired) and
//! stays open; the application's answers (an object keyed as the
//! `inputRequests`) go back in the request of the next round: the same
//! method and `params` (its `_meta`, and so the client capabilities the
//! application declared, again: each request stands alone), a new
//! JSON-RPC id, `params.inputResponses` the answers and
//! `params.requestState` the result's, exactly (none when the result had
//! none). What is checked here: the shape of an `input_required` result
//! (`inputRequests` an object, `requestState` a string, one of them at
//! least), the answers (an object), the round's id; and the request of
//! the next round is written.

use crate::http1::write::decimal;
use crate::mcp::error::{INTERNAL_ERROR, INVALID_REQUEST, RpcError};
use crate::mcp::json;
use crate::mcp::writer::JsonWriter;

/// `{}`: what [`inputRequests`](InputRequired::requests) stands for when a
/// result asked for none (a `requestState` alone: answer at once).
pub(super) const NO_REQUESTS: &[u8] = b"{}";
/// Longest id (raw JSON) of a round's request: the longest an engine keeps.
pub(super) const MAX_ROUND_ID: usize = 128;

/// Whether `result` (a result object) asks for input.
pub(super) fn asks_for_input(result: &[u8]) -> bool {
    json::get(result, b"resultType").is_some_and(|t| json::str_eq(t, b"input_required"))
}

/// An `input_required` result, checked: its `inputRequests` and its
/// `requestState` (raw JSON), as given.
#[derive(Debug, Clone, Copy)]
pub(super) struct InputRequired<'a> {
    pub(super) requests: Option<&'a [u8]>,
    pub(super) state: Option<&'a [u8]>,
}

impl<'a> InputRequired<'a> {
    /// Reads `result` (an `input_required` result object); the error says
    /// why it is not one a client can answer.
    pub(super) fn read(result: &'a [u8]) -> Result<Self, RpcError> {
        let [requests, state] = json::get_all(result, [&b"inputRequests"[..], b"requestState"]);
        let requests = requests.map(json::trim);
        let state = state.map(json::trim);
        if requests.is_some_and(|r| json::kind(r) != Some(json::Kind::Object)) {
            return Err(RpcError::new(
                INTERNAL_ERROR,
                "an input_required result whose inputRequests is not an object",
            ));
        }
        if state.is_some_and(|s| json::kind(s) != Some(json::Kind::String)) {
            return Err(RpcError::new(
                INTERNAL_ERROR,
                "an input_required result whose requestState is not a string",
            ));
        }
        if requests.is_none() && state.is_none() {
            return Err(RpcError::new(
                INTERNAL_ERROR,
                "an input_required result with neither inputRequests nor requestState",
            ));
        }
        Ok(Self { requests, state })
    }

    /// The `inputRequests` to answer (`{}` when the result had none).
    pub(super) fn requests(&self) -> &'a [u8] {
        self.requests.unwrap_or(NO_REQUESTS)
    }
}

/// The `inputRequests` of `result`, when it is an `input_required` result
/// a client can answer.
pub(super) fn requests_of(result: &[u8]) -> Option<&[u8]> {
    InputRequired::read(result).ok().map(|r| r.requests())
}

/// Checks the application's answers: one JSON object.
pub(super) fn check_responses(responses: &[u8]) -> Result<(), RpcError> {
    let object = json::validate(responses, json::DEFAULT_MAX_DEPTH).is_ok()
        && json::kind(json::trim(responses)) == Some(json::Kind::Object);
    if object {
        Ok(())
    } else {
        Err(RpcError::new(
            INVALID_REQUEST,
            "the input responses are not a JSON object",
        ))
    }
}

/// The refusal of an answer to a call that waits for none.
pub(super) const NOT_WAITING: RpcError = RpcError::new(
    INVALID_REQUEST,
    "the call does not wait for input (it is over, or its input_required result is not out yet)",
);

/// Room for [`too_many_rounds`]'s text.
pub(super) const TOO_MANY_ROOM: usize = 64;

/// The failure of a call whose server asks for input once more after
/// `max` rounds, written into `out`.
pub(super) fn too_many_rounds(max: u8, out: &mut [u8; TOO_MANY_ROOM]) -> &[u8] {
    const HEAD: &[u8] = b"the server still asks for input after ";
    let mut digits = [0u8; 20];
    let digits = decimal(u64::from(max), &mut digits);
    let tail: &[u8] = if max == 1 { b" round" } else { b" rounds" };
    let mut len = 0;
    for part in [HEAD, digits, tail] {
        out[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    &out[..len]
}

/// Writes the id of round `round` (1 for the first answer) of a request
/// whose id is `id` (raw JSON: the application's, or the last round's) into
/// `out`: a string, the application's id (a string's contents, a number's
/// digits) followed by `#round`. Its length, or `None` when it does not fit.
pub(super) fn round_id(id: &[u8], round: u8, out: &mut [u8; MAX_ROUND_ID]) -> Option<usize> {
    let id = json::trim(id);
    let mut inner = match id {
        [b'"', inner @ .., b'"'] => inner,
        other => other,
    };
    // The last round's suffix gives way to this one's.
    if let Some(last) = round.checked_sub(1).filter(|&r| r > 0) {
        let mut digits = [0u8; 20];
        let digits = decimal(u64::from(last), &mut digits);
        if let Some(cut) = inner.len().checked_sub(digits.len() + 1)
            && inner.get(cut) == Some(&b'#')
            && inner.get(cut + 1..) == Some(digits)
        {
            inner = &inner[..cut];
        }
    }
    let mut digits = [0u8; 20];
    let digits = decimal(u64::from(round), &mut digits);
    let len = inner.len() + digits.len() + 3;
    let dst = out.get_mut(..len)?;
    dst[0] = b'"';
    dst[1..=inner.len()].copy_from_slice(inner);
    dst[inner.len() + 1] = b'#';
    dst[inner.len() + 2..len - 1].copy_from_slice(digits);
    dst[len - 1] = b'"';
    Some(len)
}

/// Writes the request of the next round: `request` (a JSON-RPC request,
/// the application's or the last round's) with `id`, and its `params`
/// with `inputResponses` = `responses` and `requestState` = `state` (left
/// out when `None`), every other member as it was.
pub(super) fn write_round(
    w: &mut JsonWriter<'_>,
    request: &[u8],
    id: &[u8],
    responses: &[u8],
    state: Option<&[u8]>,
) {
    w.raw(b"{");
    let mut first = true;
    let mut params_seen = false;
    for (key, value) in json::members(request) {
        if !first {
            w.raw(b",");
        }
        first = false;
        w.raw(json::trim(key)).raw(b":");
        if json::str_eq(key, b"id") {
            w.raw(id);
        } else if json::str_eq(key, b"params") {
            params_seen = true;
            write_params(w, value, responses, state);
        } else {
            w.raw(json::trim(value));
        }
    }
    if !params_seen {
        if !first {
            w.raw(b",");
        }
        w.raw(b"\"params\":");
        write_params(w, b"{}", responses, state);
    }
    w.raw(b"}");
}

fn write_params(w: &mut JsonWriter<'_>, params: &[u8], responses: &[u8], state: Option<&[u8]>) {
    w.raw(b"{");
    for (key, value) in json::members(params) {
        if json::str_eq(key, b"inputResponses") || json::str_eq(key, b"requestState") {
            continue;
        }
        w.raw(json::trim(key))
            .raw(b":")
            .raw(json::trim(value))
            .raw(b",");
    }
    w.raw(b"\"inputResponses\":").raw(json::trim(responses));
    if let Some(state) = state {
        w.raw(b",\"requestState\":").raw(json::trim(state));
    }
    w.raw(b"}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(raw: &str, round: u8) -> Option<std::string::String> {
        let mut out = [0u8; MAX_ROUND_ID];
        let n = round_id(raw.as_bytes(), round, &mut out)?;
        Some(std::string::String::from_utf8(out[..n].to_vec()).unwrap())
    }

    #[test]
    fn each_round_has_its_own_id() {
        assert_eq!(id("7", 1).as_deref(), Some(r#""7#1""#));
        assert_eq!(id(r#""7#1""#, 2).as_deref(), Some(r#""7#2""#));
        assert_eq!(id(r#""a\"b""#, 1).as_deref(), Some(r#""a\"b#1""#));
        assert_eq!(id(r#""x#9""#, 10).as_deref(), Some(r#""x#10""#));
        // Only the last round's own suffix gives way.
        assert_eq!(id(r#""x#1""#, 1).as_deref(), Some(r#""x#1#1""#));
        assert_eq!(id(r#""x#12""#, 3).as_deref(), Some(r#""x#12#3""#));
        let long = std::format!("\"{}\"", "i".repeat(125));
        assert_eq!(id(&long, 1), None);
    }

    #[test]
    fn the_next_round_carries_the_answers_and_the_state_in_params() {
        let request = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","inputResponses":{"old":1},"arguments":{"a":1},"requestState":"s0","_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}"#;
        let mut buf = [0u8; 512];
        let mut w = JsonWriter::new(&mut buf);
        write_round(
            &mut w,
            request,
            br#""4#1""#,
            br#"{"q":{"action":"accept"}}"#,
            Some(br#""s1""#),
        );
        assert_eq!(
            w.finish().unwrap(),
            br#"{"jsonrpc":"2.0","id":"4#1","method":"tools/call","params":{"name":"t","arguments":{"a":1},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}},"inputResponses":{"q":{"action":"accept"}},"requestState":"s1"}}"#
        );
        // No state in the result: none in the request.
        let mut buf = [0u8; 512];
        let mut w = JsonWriter::new(&mut buf);
        write_round(&mut w, request, br#""4#2""#, b"{}", None);
        let text = w.finish().unwrap();
        assert!(!text.windows(12).any(|w| w == b"requestState"));
    }

    #[test]
    fn an_input_required_result_is_checked() {
        let ok = InputRequired::read(br#"{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}"#).unwrap();
        assert_eq!(ok.requests(), br#"{"a":{"method":"roots/list"}}"#);
        assert_eq!(ok.state, Some(&br#""s""#[..]));
        let state_only =
            InputRequired::read(br#"{"resultType":"input_required","requestState":"s"}"#).unwrap();
        assert_eq!(state_only.requests(), b"{}");
        for bad in [
            &br#"{"resultType":"input_required","inputRequests":[]}"#[..],
            br#"{"resultType":"input_required","requestState":7}"#,
            br#"{"resultType":"input_required"}"#,
        ] {
            assert!(InputRequired::read(bad).is_err());
        }
        assert!(asks_for_input(br#"{"resultType":"input_required"}"#));
        assert!(!asks_for_input(br#"{"resultType":"complete"}"#));
        assert!(!asks_for_input(br#"{"content":[]}"#));
        assert!(check_responses(br#" {"a":1} "#).is_ok());
        assert!(check_responses(b"[1]").is_err());
        assert!(check_responses(b"{").is_err());
    }
}
