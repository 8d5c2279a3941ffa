//! The next round of a tunnel call that waits for input (MCP 2026-07-28
//! §9): its request written in the call's own request buffer, after the
//! last round's, from the last round's request, the result's
//! `requestState` (copied there first: the result lies in the receive
//! buffer of the same store) and the application's answers; then moved to
//! the start of the buffer, where it is the call's request from then on
//! (for a refused stream's resend, a -32020 re-list and the next round).
//! A typed call's round is transcoded again into its RPC's message.

use super::calls::{Mode, Slot, bytes, bytes_mut, copy_across, ensure, reopen};
use super::input::{self, MAX_ROUND_ID};
use super::request::{FRAME_ROOM, frame_into};
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;

/// Where a request lies in the call's buffer: its frame, its JSON.
pub(super) type Spans = ((usize, usize), (usize, usize));

/// Why a round's request was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unwritten {
    /// It needs this much room.
    Room(usize),
    /// It cannot be sent (the typed binding's messages cannot carry it).
    Refused(&'static str),
}

/// Points call `slot` (waiting for input: its response with the
/// `input_required` result at `at` in `rx`) at the request of round
/// `round`, answering with `responses`. The error says why the round
/// cannot go (the call fails with it).
pub(super) fn start_round<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    at: (usize, usize),
    responses: &[u8],
    round: u8,
    max_message: usize,
) -> Result<(), &'static str> {
    let Some(a) = slot.active.as_ref() else {
        return Err("the call is over");
    };
    let (orig_frame, orig_json, typed) = (a.orig_frame, a.orig_json, a.typed);
    let end = orig_frame.1.max(orig_json.1);
    // Where the result's requestState lies in `rx`.
    let state = {
        let rx = bytes(store, &slot.rx);
        let message = rx.get(at.0..at.1).unwrap_or_default();
        json::get(message, b"result")
            .and_then(|r| input::InputRequired::read(r).ok()?.state)
            .map(|s| super::calls::offset_in(message, s, at.0))
    };
    let mut id = [0u8; MAX_ROUND_ID];
    let id_len = {
        let request = bytes(store, &slot.req)
            .get(orig_json.0..orig_json.1)
            .unwrap_or_default();
        let last = json::get(request, b"id").unwrap_or(b"null");
        input::round_id(last, round, &mut id)
            .ok_or("the id of the next round's request would be over 128 octets")?
    };
    let id = &id[..id_len];
    let slen = state.map_or(0, |s| s.1 - s.0);
    let base = end + slen;
    const NO_ROOM: &str = "the request of the next round does not fit the call store";
    if !ensure(store, &mut slot.req, base) {
        return Err(NO_ROOM);
    }
    if let Some(s) = state
        && !copy_across(store, &slot.rx, s, &mut slot.req, end)
    {
        return Err(NO_ROOM);
    }
    // Room for the round's request, most likely (what is over is asked
    // for below).
    let likely = (orig_json.1 - orig_json.0) + 2 * slen + responses.len() + id.len() + 64;
    let _ = ensure(store, &mut slot.req, base + FRAME_ROOM + likely);
    let mut spans: Option<Spans> = None;
    // The frame's room, the JSON's, a typed message's: each told once.
    for _ in 0..3 {
        let buf = bytes_mut(store, &mut slot.req);
        let Some((before, after)) = (base <= buf.len()).then(|| buf.split_at_mut(base)) else {
            return Err(NO_ROOM);
        };
        let request = before.get(orig_json.0..orig_json.1).unwrap_or_default();
        let state = (slen > 0).then(|| before.get(end..base)).flatten();
        let write = |w: &mut JsonWriter<'_>| input::write_round(w, request, id, responses, state);
        let written = match typed {
            None => frame_into(after, 0, write)
                .map(|(json, stop)| ((0, stop), (json, stop)))
                .map_err(Unwritten::Room),
            #[cfg(feature = "typed")]
            Some(rpc) => super::typed::frame_round(rpc, after, write),
            #[cfg(not(feature = "typed"))]
            Some(_) => Err(Unwritten::Refused("no typed binding")),
        };
        match written {
            Ok(s) => {
                spans = Some(s);
                break;
            }
            // Room for the JSON and a typed message of about its size, no
            // more: past that the round is over the message limit anyway.
            Err(Unwritten::Room(needed))
                if needed <= max_message.saturating_mul(2).saturating_add(256)
                    && ensure(store, &mut slot.req, base.saturating_add(needed)) => {}
            Err(Unwritten::Room(_)) => return Err(NO_ROOM),
            Err(Unwritten::Refused(why)) => return Err(why),
        }
    }
    let Some(((f0, f1), (j0, j1))) = spans else {
        return Err(NO_ROOM);
    };
    if (f1 - f0).saturating_sub(crate::grpc::PREFIX_LEN) > max_message {
        return Err("the request of the next round is over the message limit");
    }
    // Moved to the start of the buffer: the round's request is the call's
    // from now on.
    let start = f0.min(j0);
    let stop = f1.max(j1);
    bytes_mut(store, &mut slot.req).copy_within(base + start..base + stop, 0);
    let Some(a) = slot.active.as_mut() else {
        return Err("the call is over");
    };
    reopen(a, Mode::Call, max_message);
    a.orig_frame = (f0 - start, f1 - start);
    a.orig_json = (j0 - start, j1 - start);
    a.frame = a.orig_frame;
    a.json = a.orig_json;
    // Its mirrored parts are found again in the new text.
    a.located = None;
    a.resent = false;
    a.terminal = None;
    Ok(())
}
