//! A call's place in the client: its slot (generation, buffers from the
//! call store), its state on the wire (stream, what was sent, what came
//! back), its outcome once known, and the helpers that end a call with a
//! JSON-RPC error written into its own buffers.

use super::events::Diagnostics;
use super::metadata::Located;
use crate::grpc::{Code, MessageDecoder};
use crate::h2::{ErrorCode, StreamRef};
use crate::mcp::error::{INTERNAL_ERROR, RpcError, code_for_status};
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;
use crate::time::Instant;

/// Longest JSON-RPC id (raw JSON) of a request: kept for the error a call
/// may synthesize, so a longer one is refused before it is sent (rather
/// than answered with a wrong id).
pub(super) const MAX_ID: usize = 128;
/// Longest `www-authenticate` value kept for a failure.
pub(super) const MAX_AUTH: usize = 256;
/// Room for a synthesized error response, besides its message text.
pub(super) const ERROR_ROOM: usize = 128 + MAX_ID;

/// Which request of the call is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// The application's request.
    Call,
    /// The client's own `tools/list` after a -32020, page `n`.
    Relist(u16),
    /// The application's `tools/call`, sent once more.
    Retry,
}

/// The call's current stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wire {
    /// A stream is to be opened.
    Idle,
    Open(StreamRef),
    /// The stream is over (or reset by this end).
    Gone,
}

/// What a call's outcome hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Response,
    Failed,
    /// A notification's call: nothing but `Ended`.
    Nothing,
    /// An `input_required` result: handed out, then the call waits for
    /// the application's answers (it does not end).
    InputRequired,
}

/// A call's outcome: its text (in `req` or `rx`, at `at`), waiting to be
/// handed out, then to be ended.
#[derive(Debug, Clone, Copy)]
pub(super) struct Terminal {
    pub(super) kind: Kind,
    pub(super) in_req: bool,
    pub(super) at: (usize, usize),
    pub(super) diagnostics: Diagnostics,
    pub(super) delivered: bool,
}

/// A call in progress.
#[derive(Debug, Clone)]
pub(super) struct Active {
    pub(super) wire: Wire,
    pub(super) head_sent: bool,
    /// The frame being sent, and the JSON inside it, in `req`.
    pub(super) frame: (usize, usize),
    pub(super) json: (usize, usize),
    pub(super) sent: usize,
    /// The application's request, in `req`.
    pub(super) orig_frame: (usize, usize),
    pub(super) orig_json: (usize, usize),
    pub(super) deadline: Option<Instant>,
    pub(super) mode: Mode,
    pub(super) tool_call: bool,
    pub(super) tools_list: bool,
    /// Where the request's mirrored parts lie in its JSON (a tunnel call's).
    pub(super) located: Option<Located>,
    /// The typed RPC the call goes as; `None` on the tunnel.
    pub(super) typed: Option<mcpwire_proto::gcp::Rpc>,
    pub(super) decoder: MessageDecoder,
    /// Where the message being read starts in `rx`.
    pub(super) msg_start: usize,
    /// The response message, in `rx`.
    pub(super) response: Option<(usize, usize)>,
    /// The `error` member of a tunnel call's response, in `rx`.
    pub(super) response_error: Option<(usize, usize)>,
    /// The `result` member of a tunnel call's response, in `rx`.
    pub(super) response_result: Option<(usize, usize)>,
    pub(super) diagnostics: Diagnostics,
    /// The response's `www-authenticate`, when it fits.
    pub(super) auth: ([u8; MAX_AUTH], Option<u16>),
    /// This end must reset the stream (the call is over, the request is not).
    pub(super) reset_owed: bool,
    /// A stream of an earlier attempt, to reset.
    pub(super) stale: Option<StreamRef>,
    pub(super) terminal: Option<Terminal>,
    /// The server refused a stream of this call unprocessed and the call
    /// went out again: a request is re-sent once.
    pub(super) resent: bool,
    /// The application answers `input_required` results
    /// ([`CallOptions::answers_input`](super::CallOptions::answers_input)).
    pub(super) answers_input: bool,
    /// `input_required` results handed out so far.
    pub(super) rounds: u8,
}

/// A call's place in the client.
pub(super) struct Slot<T> {
    pub(super) generation: u16,
    pub(super) active: Option<Active>,
    /// The call's framed request (and a re-list's), from the store.
    pub(super) req: Option<T>,
    /// The call's incoming messages, from the store once one arrives.
    pub(super) rx: Option<T>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self {
            generation: 0,
            active: None,
            req: None,
            rx: None,
        }
    }
}

/// Frees `slot`, its buffers back in `store`.
pub(super) fn release<S: CallStore>(store: &mut S, slot: &mut Slot<S::Buf>) {
    slot.active = None;
    slot.generation = slot.generation.wrapping_add(1);
    for buf in [slot.req.take(), slot.rx.take()].into_iter().flatten() {
        store.put(buf);
    }
}

/// Whether the call's outcome is an `input_required` result the
/// application has yet to answer (its deadline runs on).
pub(super) fn waits_for_input(a: &Active) -> bool {
    a.terminal.is_some_and(|t| t.kind == Kind::InputRequired)
}

/// Whether the call is still running on its own: no outcome yet, or one
/// that waits for input (its deadline counts).
pub(super) fn running(a: &Active) -> bool {
    a.terminal.is_none() || waits_for_input(a)
}

/// Sends the application's request again on a new stream.
pub(super) fn restart<T>(slot: &mut Slot<T>, mode: Mode, max_message: usize) {
    if let Some(a) = slot.active.as_mut() {
        reopen(a, mode, max_message);
        a.frame = a.orig_frame;
        a.json = a.orig_json;
    }
}

pub(super) fn reopen(a: &mut Active, mode: Mode, max_message: usize) {
    a.mode = mode;
    // The old stream, when its request is not complete, is reset; its
    // later events match no call.
    a.stale = match a.wire {
        Wire::Open(s) if a.sent < a.frame.1 - a.frame.0 => Some(s),
        _ => None,
    };
    a.wire = Wire::Idle;
    a.reset_owed = false;
    a.head_sent = false;
    a.sent = 0;
    a.decoder = MessageDecoder::new(max_message);
    a.msg_start = 0;
    a.response = None;
    a.response_error = None;
    a.response_result = None;
    // Whether a refused stream was retried stays known to the end.
    a.diagnostics = Diagnostics {
        retried: a.diagnostics.retried,
        ..Diagnostics::default()
    };
    a.auth.1 = None;
}

/// Ends call `slot` with a transport failure: a JSON-RPC error synthesized
/// from the status (the reference transport's map) with `message`.
pub(super) fn fail_transport<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    status: Code,
    message: &[u8],
    http_status: Option<u16>,
) {
    let Some(a) = slot.active.as_mut() else {
        return;
    };
    let mut code = code_for_status(status);
    if status == Code::Cancelled {
        code = INTERNAL_ERROR;
    }
    let mut diagnostics = a.diagnostics;
    diagnostics.transport = true;
    diagnostics.grpc_status = Some(status);
    if http_status.is_some() {
        diagnostics.http_status = http_status;
    }
    let (in_req, at) = write_failure(store, slot, code, message);
    let Some(a) = slot.active.as_mut() else {
        return;
    };
    a.terminal = Some(Terminal {
        kind: Kind::Failed,
        in_req,
        at: at.unwrap_or((0, 0)),
        diagnostics,
        delivered: false,
    });
}

/// Writes the error response of call `slot`: after the messages kept in
/// `rx` (taking or growing it), else at its start, else over the request
/// (its id copied first). Whether it went into `req`, and where.
pub(super) fn write_failure<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    code: i32,
    message: &[u8],
) -> (bool, Option<(usize, usize)>) {
    let Some(a) = slot.active.as_ref() else {
        return (false, None);
    };
    // The application's id, also while a re-list is on the wire.
    let id = copy_id(
        bytes(store, &slot.req)
            .get(a.orig_json.0..a.orig_json.1)
            .unwrap_or(b""),
    );
    let room = ERROR_ROOM + 6 * message.len();
    let base = a.msg_start;
    if ensure(store, &mut slot.rx, base + room) {
        let rx = bytes_mut(store, &mut slot.rx);
        if let Some(at) = write_error(rx, base, id.as_slice(), code, message) {
            return (false, Some(at));
        }
    }
    if ensure(store, &mut slot.rx, room) {
        let rx = bytes_mut(store, &mut slot.rx);
        return (false, write_error(rx, 0, id.as_slice(), code, message));
    }
    let _ = ensure(store, &mut slot.req, room);
    let req = bytes_mut(store, &mut slot.req);
    let at = write_error(req, 0, id.as_slice(), code, message)
        .or_else(|| write_error(req, 0, b"null", code, b"failed"));
    (true, at)
}

/// The status a call fails with when its HTTP/2 stream is reset with
/// `code` (every engine over HTTP/2 maps resets so).
pub(super) fn status_for_reset(code: ErrorCode) -> Code {
    match code {
        ErrorCode::CANCEL => Code::Cancelled,
        ErrorCode::REFUSED_STREAM => Code::Unavailable,
        ErrorCode::ENHANCE_YOUR_CALM => Code::ResourceExhausted,
        ErrorCode::INADEQUATE_SECURITY => Code::PermissionDenied,
        _ => Code::Internal,
    }
}

/// Marks the failure of call `slot` as never processed by the server.
pub(super) fn mark_refused<T>(slot: &mut Slot<T>) {
    if let Some(t) = slot.active.as_mut().and_then(|a| a.terminal.as_mut()) {
        t.diagnostics.refused = true;
    }
}

/// Fails the call as a transport error and owes its stream a reset
/// (RST_STREAM(CANCEL) goes out on the next pump).
pub(super) fn abort<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    status: Code,
    message: &[u8],
) {
    if let Some(a) = slot.active.as_mut() {
        a.reset_owed = true;
    }
    fail_transport(store, slot, status, message, None);
}

/// Ends call `slot` with a JSON-RPC error found by this end.
pub(super) fn fail_rpc<S: CallStore>(store: &mut S, slot: &mut Slot<S::Buf>, e: RpcError) {
    fail_rpc_text(store, slot, e.code, e.message.as_bytes());
}

/// Fails call `slot`, whose server asks for input once more after `max`
/// rounds, saying so (its text built here, off the path of every answer).
#[cold]
#[inline(never)]
pub(super) fn fail_too_many_rounds<S: CallStore>(store: &mut S, slot: &mut Slot<S::Buf>, max: u8) {
    let mut text = [0u8; super::input::TOO_MANY_ROOM];
    let why = super::input::too_many_rounds(max, &mut text);
    fail_rpc_text(store, slot, INTERNAL_ERROR, why);
}

/// [`fail_rpc`] with a message written at run time.
pub(super) fn fail_rpc_text<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    code: i32,
    message: &[u8],
) {
    let (in_req, at) = write_failure(store, slot, code, message);
    let Some(a) = slot.active.as_mut() else {
        return;
    };
    a.terminal = Some(Terminal {
        kind: Kind::Failed,
        in_req,
        at: at.unwrap_or((0, 0)),
        diagnostics: a.diagnostics,
        delivered: false,
    });
}

fn write_error(
    buf: &mut [u8],
    at: usize,
    id: &[u8],
    code: i32,
    message: &[u8],
) -> Option<(usize, usize)> {
    let out = buf.get_mut(at..)?;
    let mut w = JsonWriter::new(out);
    // Messages from trailers are percent-encoded text.
    let mut text = [0u8; 256];
    let n = crate::grpc::percent::decode(message, &mut text).unwrap_or(0);
    let text = if n > 0 { &text[..n] } else { message };
    crate::mcp::envelope::write_error(&mut w, id, code, text, None);
    let n = w.finish().ok()?.len();
    Some((at, at + n))
}

/// A request's raw id, or `null`.
pub(super) struct Id {
    buf: [u8; MAX_ID],
    len: usize,
}

impl Id {
    pub(super) fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

pub(super) fn copy_id(body: &[u8]) -> Id {
    let mut id = Id {
        buf: [0; MAX_ID],
        len: 4,
    };
    id.buf[..4].copy_from_slice(b"null");
    if let Some(raw) = json::get(body, b"id").map(json::trim)
        && let Some(dst) = id.buf.get_mut(..raw.len())
    {
        dst.copy_from_slice(raw);
        id.len = raw.len();
    }
    id
}

/// The octets of a call's buffer (none before it is taken).
pub(super) fn bytes<'a, S: CallStore>(store: &'a S, buf: &'a Option<S::Buf>) -> &'a [u8] {
    buf.as_ref().map_or(&[], |b| store.bytes(b))
}

/// The buffer a call's outcome lies in: its request buffer (an error
/// written there, a typed answer turned into JSON) or its receive buffer.
pub(super) fn outcome_bytes<'a, S: CallStore>(
    store: &'a S,
    slot: &'a Slot<S::Buf>,
    in_req: bool,
) -> &'a [u8] {
    bytes(store, if in_req { &slot.req } else { &slot.rx })
}

/// Member `key` (`error` or `result`) of the outcome at `at` in `text`:
/// where the arrival of a tunnel call's response found it (`found`), else
/// looked up.
pub(super) fn outcome_member<'t>(
    a: &Active,
    text: &'t [u8],
    in_req: bool,
    at: (usize, usize),
    found: Option<(usize, usize)>,
    key: &[u8],
) -> Option<&'t [u8]> {
    if !in_req && a.typed.is_none() && a.response == Some(at) {
        return found.and_then(|m| text.get(m.0..m.1));
    }
    json::get(text.get(at.0..at.1)?, key)
}

/// The octets of a call's buffer, to write.
pub(super) fn bytes_mut<'a, S: CallStore>(
    store: &'a mut S,
    buf: &'a mut Option<S::Buf>,
) -> &'a mut [u8] {
    match buf {
        Some(b) => store.bytes_mut(b),
        None => &mut [],
    }
}

/// Makes a call's buffer at least `len` octets long, taking it from the
/// store when the call has none yet; `false` when the store cannot.
pub(super) fn ensure<S: CallStore>(store: &mut S, buf: &mut Option<S::Buf>, len: usize) -> bool {
    match buf {
        Some(b) => store.grow(b, len),
        None => store.take(len).map(|b| *buf = Some(b)).is_some(),
    }
}

/// Copies `from[range]` (a call's buffer) into `to` (another of the same
/// store) at `at`, through the stack, a small piece at a time; `false`
/// when the range is not in `from` or `to` is too short.
pub(super) fn copy_across<S: CallStore>(
    store: &mut S,
    from: &Option<S::Buf>,
    range: (usize, usize),
    to: &mut Option<S::Buf>,
    at: usize,
) -> bool {
    let mut chunk = [0u8; 64];
    let mut done = 0;
    let len = range.1.saturating_sub(range.0);
    while done < len {
        let n = (len - done).min(chunk.len());
        let from_at = range.0 + done;
        let Some(src) = bytes(store, from).get(from_at..from_at + n) else {
            return false;
        };
        chunk[..n].copy_from_slice(src);
        let Some(dst) = bytes_mut(store, to).get_mut(at + done..at + done + n) else {
            return false;
        };
        dst.copy_from_slice(&chunk[..n]);
        done += n;
    }
    true
}

/// Where `inner` (a subslice of `outer`) lies, shifted by `base`.
pub(super) fn offset_in(outer: &[u8], inner: &[u8], base: usize) -> (usize, usize) {
    let start = (inner.as_ptr() as usize)
        .saturating_sub(outer.as_ptr() as usize)
        .min(outer.len());
    let end = (start + inner.len()).min(outer.len());
    (base + start, base + end)
}
