//! A call of the Streamable HTTP client engine: its slot (generation,
//! buffers from the call store), where its request stands (waiting, on an
//! HTTP/1.1 link, an HTTP/2 stream), the judge of its answer
//! ([`ResponseReader`]), and its outcome (MCP 2026-07-28 §5.2): a
//! response, a JSON-RPC error, or a failure that names the status, the
//! media type and the body's first octets. The rules every engine shares
//! apply here: `tools/list` learning and the -32020 re-list
//! ([`cache`](super::super::cache)), statuses → JSON-RPC errors through
//! [`code_for_status`] only.
//!
//! A call's request buffer holds, in order: the bearer token it goes with
//! (copied when it started), the application's message, the body of the
//! request on the wire when it differs (a re-list page, a legacy body),
//! then, over HTTP/1.1, the whole request (or, over HTTP/2, its head's
//! fields). Its receive buffer grows with what the answer brings, up to
//! the message limit.

use super::super::cache::{self, Cache, Relist, Warnings};
use super::super::calls::{
    ERROR_ROOM, Kind, MAX_AUTH, Mode, Terminal, bytes, bytes_mut, copy_across, copy_id, ensure,
    offset_in,
};
use super::super::events::{CallId, Diagnostics, Failure, Queue, Queued};
use super::super::input;
use super::response::{HttpFailure, Judgement, ResponseReader};
use crate::grpc::Code;
use crate::h2::StreamRef;
use crate::http1::MediaType;
use crate::mcp::error::{INTERNAL_ERROR, RpcError, code_for_status};
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;
use crate::time::Instant;

/// Octets of a response's `Content-Type` kept for a failure's text.
const MEDIA_ROOM: usize = 64;
/// The smallest receive buffer taken (room for a failure's excerpt).
const RX_MIN: usize = 256;
/// Room for a failure's text.
const TEXT_ROOM: usize = 256;
/// Room for the `data` of a handshake's error handed to the calls that
/// waited for it (a -32022's `supported` versions).
const DATA_ROOM: usize = 512;

/// Where a call's current request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// Waiting for a link (or for the era to be known).
    Queued,
    /// The exchange of HTTP/1.1 link `n` (an index of the pool).
    Link(usize),
    /// A stream of the HTTP/2 link.
    Stream(StreamRef),
    /// `POST`ed and accepted in the 2024 HTTP+SSE shape: its response
    /// comes on the event stream.
    Posted,
    /// Over on the wire (judged, or given up).
    Done,
}

/// A request the engine makes for itself (the era's handshake, §8.3,
/// §13), whose outcome the engine reads instead of the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Own {
    /// `server/discover` (the version it asks for is the era's:
    /// `renegotiated`, else `requested`).
    Probe,
    /// The legacy `initialize`.
    Initialize,
    /// `notifications/initialized`.
    Initialized,
    /// The `DELETE` that ends a 2025 session.
    Delete,
    /// `notifications/cancelled` for a call given up in a legacy era,
    /// where a disconnect is no cancellation.
    Cancelled,
    /// The `GET` of the 2024 shape's event stream, which stays open.
    Events,
}

/// A call in progress.
#[derive(Debug, Clone)]
pub(super) struct Call {
    /// Started before every call with a smaller number: calls wait for a
    /// link in this order.
    pub(super) seq: u32,
    pub(super) place: Place,
    pub(super) own: Option<Own>,
    pub(super) mode: Mode,
    pub(super) tool_call: bool,
    pub(super) tools_list: bool,
    /// Octets of bearer token at the start of the request buffer.
    pub(super) token: usize,
    /// The application's message, in the request buffer.
    pub(super) orig: (usize, usize),
    /// The body of the request on the wire now.
    pub(super) cur: (usize, usize),
    /// The whole HTTP/1.1 request (or the HTTP/2 head's fields).
    pub(super) wire: (usize, usize),
    /// Octets of `wire` written (HTTP/1.1), or of `cur` taken by the
    /// stream (HTTP/2).
    pub(super) sent: usize,
    /// The HTTP/2 request head went out.
    pub(super) head_sent: bool,
    /// An octet of this attempt's answer came.
    pub(super) got: bool,
    /// The request goes again on a link that never carried an exchange.
    pub(super) fresh: bool,
    /// The one resend (a closed keep-alive link, a refused stream) is used.
    pub(super) resent: bool,
    /// A request of the 2024 shape: its `POST` is answered 202, its
    /// response comes on the event stream.
    pub(super) posted: bool,
    pub(super) deadline: Option<Instant>,
    pub(super) reader: ResponseReader,
    /// Octets of answer given to the reader since the message it writes
    /// began: its receive buffer needs no more.
    pub(super) fed: usize,
    pub(super) media: ([u8; MEDIA_ROOM], u8),
    pub(super) diagnostics: Diagnostics,
    pub(super) auth: ([u8; MAX_AUTH], Option<u16>),
    pub(super) terminal: Option<Terminal>,
    /// The last judgement of the engine's own request (what the era's
    /// rules read).
    pub(super) own_judgement: Option<Judgement>,
    /// A call that sends nothing: it waits for the era's handshake
    /// ([`ClientEngine::start_handshake`](crate::mcp::client::ClientEngine::start_handshake)).
    pub(super) handshake: bool,
    /// The application answers `input_required` results
    /// ([`CallOptions::answers_input`](crate::mcp::client::CallOptions::answers_input)).
    pub(super) answers_input: bool,
    /// `input_required` results handed out so far.
    pub(super) rounds: u8,
}

impl Call {
    /// Whether the call's outcome is an `input_required` result the
    /// application has yet to answer.
    pub(super) fn waits_for_input(&self) -> bool {
        self.terminal.is_some_and(|t| t.kind == Kind::InputRequired)
    }

    /// Whether the call runs on its own: no outcome yet, or one that
    /// waits for input (its deadline counts).
    pub(super) fn running(&self) -> bool {
        self.terminal.is_none() || self.waits_for_input()
    }
}

/// A call's place in the engine.
pub(super) struct Slot<T> {
    pub(super) generation: u16,
    pub(super) call: Option<Call>,
    /// The request (and its re-lists', its wire forms).
    pub(super) req: Option<T>,
    /// The answer's messages, and a failure's text.
    pub(super) rx: Option<T>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self {
            generation: 0,
            call: None,
            req: None,
            rx: None,
        }
    }
}

/// Where a notification just judged lies: handed out before anything
/// else of its call, read until the next `recv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Note {
    pub(super) call: CallId,
    pub(super) len: usize,
    pub(super) told: bool,
}

/// What happened to a call's wire when its answer was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fed {
    /// All of it taken.
    All,
    /// A notification stopped it after `n` octets: hand it out first.
    Note(usize),
}

/// The calls of the engine and what they share: the store, the annotation
/// cache, the queue of warnings, the notification lent out.
pub(super) struct Calls<S: CallStore, const CALLS: usize, const CACHE: usize> {
    pub(super) slots: [Slot<S::Buf>; CALLS],
    pub(super) store: S,
    pub(super) cache: Cache<CACHE>,
    pub(super) warnings: Queue,
    /// The warning handed out last (its tool's name is read from it).
    pub(super) lent_warning: Option<Queued>,
    pub(super) note: Option<Note>,
    /// The largest message (the configuration's, capped by the store).
    pub(super) max_message: usize,
    /// Pages of `tools/list` a re-list reads at most.
    pub(super) max_pages: usize,
    /// Rounds of input a call answers at most.
    pub(super) max_rounds: u8,
    pub(super) next_seq: u32,
}

/// A failure's text, built on the stack (cut at [`TEXT_ROOM`]).
struct Text {
    buf: [u8; TEXT_ROOM],
    len: usize,
}

impl Text {
    fn new() -> Self {
        Self {
            buf: [0; TEXT_ROOM],
            len: 0,
        }
    }

    /// Appends `bytes`, each octet that is not printable ASCII as `?`.
    fn push(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            let Some(dst) = self.buf.get_mut(self.len) else {
                break;
            };
            *dst = if (0x20..0x7f).contains(&b) { b } else { b'?' };
            self.len += 1;
        }
        self
    }

    fn number(&mut self, n: u16) -> &mut Self {
        let mut digits = [0u8; 20];
        self.push(crate::http1::write::decimal(u64::from(n), &mut digits))
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl<S: CallStore, const CALLS: usize, const CACHE: usize> Calls<S, CALLS, CACHE> {
    pub(super) fn new(store: S, config: &super::config::HttpClientConfig) -> Self {
        let max_message = config.max_message_bytes.min(store.max_len());
        Self {
            slots: core::array::from_fn(|_| Slot::default()),
            store,
            cache: Cache::new(),
            warnings: Queue::new(),
            lent_warning: None,
            note: None,
            max_message,
            max_pages: config.max_list_pages,
            max_rounds: config.max_input_rounds,
            next_seq: 0,
        }
    }

    pub(super) fn call_id(&self, i: usize) -> CallId {
        CallId {
            index: i as u16,
            generation: self.slots.get(i).map_or(0, |s| s.generation),
            link: 0,
        }
    }

    /// The slot of a live `call`.
    pub(super) fn slot_of(&self, call: CallId) -> Option<usize> {
        let i = usize::from(call.index);
        let s = self.slots.get(i)?;
        (s.generation == call.generation && s.call.is_some()).then_some(i)
    }

    pub(super) fn call(&self, i: usize) -> Option<&Call> {
        self.slots.get(i)?.call.as_ref()
    }

    pub(super) fn call_mut(&mut self, i: usize) -> Option<&mut Call> {
        self.slots.get_mut(i)?.call.as_mut()
    }

    /// Takes a free slot for a call of `message` (one JSON-RPC message,
    /// checked by the caller) going with `token` (the bearer token's
    /// octets, in the store's buffer `token_buf`), and the reader that
    /// judges its answer. `None`: no free slot, or no buffer.
    pub(super) fn admit(
        &mut self,
        message: &[u8],
        token: Option<&S::Buf>,
        token_len: usize,
        reader: ResponseReader,
        deadline: Option<Instant>,
        own: Option<Own>,
    ) -> Option<usize> {
        let i = self.slots.iter().position(|s| s.call.is_none())?;
        let need = token_len + message.len();
        let mut req = self.store.take(need)?;
        // The token and the message share the store: the token is copied
        // through a small buffer of the stack.
        let mut at = 0;
        let mut chunk = [0u8; 64];
        while at < token_len {
            let n = (token_len - at).min(chunk.len());
            let src = token.map_or(&[][..], |t| self.store.bytes(t));
            let Some(part) = src.get(at..at + n) else {
                break;
            };
            chunk[..n].copy_from_slice(part);
            if let Some(dst) = self.store.bytes_mut(&mut req).get_mut(at..at + n) {
                dst.copy_from_slice(&chunk[..n]);
            }
            at += n;
        }
        if let Some(dst) = self.store.bytes_mut(&mut req).get_mut(token_len..need) {
            dst.copy_from_slice(message);
        }
        let method = json::get(message, b"method").unwrap_or(b"");
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        let slot = &mut self.slots[i];
        slot.req = Some(req);
        slot.call = Some(Call {
            seq,
            place: Place::Queued,
            own,
            mode: Mode::Call,
            tool_call: json::str_eq(method, b"tools/call"),
            tools_list: json::str_eq(method, b"tools/list"),
            token: token_len,
            orig: (token_len, need),
            cur: (token_len, need),
            wire: (need, need),
            sent: 0,
            head_sent: false,
            got: false,
            fresh: false,
            resent: false,
            posted: false,
            deadline,
            reader,
            fed: 0,
            media: ([0; MEDIA_ROOM], 0),
            diagnostics: Diagnostics::default(),
            auth: ([0; MAX_AUTH], None),
            terminal: None,
            own_judgement: None,
            handshake: false,
            answers_input: false,
            rounds: 0,
        });
        Some(i)
    }

    /// Frees slot `i`, its buffers back in the store.
    pub(super) fn release(&mut self, i: usize) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        slot.call = None;
        slot.generation = slot.generation.wrapping_add(1);
        for buf in [slot.req.take(), slot.rx.take()].into_iter().flatten() {
            self.store.put(buf);
        }
        if self.note.is_some_and(|n| usize::from(n.call.index) == i) {
            self.note = None;
        }
    }

    /// Puts call `i` back in the queue for its next request (`mode`), on
    /// any link (`fresh`: on one that never carried an exchange).
    pub(super) fn requeue(&mut self, i: usize, mode: Mode, fresh: bool) {
        let Some(c) = self.call_mut(i) else {
            return;
        };
        c.place = Place::Queued;
        c.mode = mode;
        c.fresh = fresh;
        c.sent = 0;
        c.head_sent = false;
        c.got = false;
        c.fed = 0;
        c.media.1 = 0;
        c.auth.1 = None;
        if mode == Mode::Retry {
            c.cur = c.orig;
        }
        // Whether a stale link or a refused stream was retried, and
        // whether the call was re-listed, stays known.
        c.diagnostics = Diagnostics {
            retried: c.diagnostics.retried,
            refused: c.diagnostics.refused,
            relisted: c.diagnostics.relisted || mode != Mode::Call,
            ..Diagnostics::default()
        };
        self.reset_reader(i);
    }

    /// A new judge for call `i`'s current body.
    pub(super) fn reset_reader(&mut self, i: usize) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        let Some(c) = slot.call.as_mut() else {
            return;
        };
        let body = bytes(&self.store, &slot.req)
            .get(c.cur.0..c.cur.1)
            .unwrap_or(b"");
        c.reader = match c.own {
            _ if c.posted => ResponseReader::accepted(),
            Some(Own::Initialized | Own::Delete | Own::Events | Own::Cancelled) => {
                ResponseReader::accepted()
            }
            _ => ResponseReader::new(body).unwrap_or_else(|_| ResponseReader::accepted()),
        };
    }

    /// The oldest call waiting for a link that `eligible` admits.
    pub(super) fn next_queued(&self, eligible: impl Fn(&Call) -> bool) -> Option<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.call.as_ref()?)))
            .filter(|(_, c)| c.place == Place::Queued && c.terminal.is_none() && eligible(c))
            .min_by_key(|(_, c)| c.seq)
            .map(|(i, _)| i)
    }

    /// The era is known: the calls that waited only for the handshake
    /// end (no message).
    pub(super) fn handshake_over(&mut self) {
        for slot in self.slots.iter_mut() {
            let Some(c) = slot.call.as_mut() else {
                continue;
            };
            if c.handshake && c.place == Place::Queued && c.terminal.is_none() {
                c.place = Place::Done;
                c.terminal = Some(Terminal {
                    kind: Kind::Nothing,
                    in_req: false,
                    at: (0, 0),
                    diagnostics: c.diagnostics,
                    delivered: false,
                });
            }
        }
    }

    /// What is known of `call`'s exchange, once it has an outcome.
    pub(super) fn diagnostics(&self, call: CallId) -> Option<Diagnostics> {
        let i = self.slot_of(call)?;
        Some(self.slots[i].call.as_ref()?.terminal.as_ref()?.diagnostics)
    }

    /// The call whose exchange is HTTP/1.1 link `link`'s, or HTTP/2
    /// stream `stream`'s.
    pub(super) fn on_place(&self, place: Place) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.call.as_ref().is_some_and(|c| c.place == place))
    }

    /// The response head of call `i`'s exchange came.
    pub(super) fn on_head(
        &mut self,
        i: usize,
        status: u16,
        content_type: Option<&[u8]>,
        www_authenticate: Option<&[u8]>,
    ) -> Option<Judgement> {
        let c = self.call_mut(i)?;
        c.got = true;
        c.diagnostics.http_status = Some(status);
        if let Some(v) = www_authenticate
            && let Some(dst) = c.auth.0.get_mut(..v.len())
        {
            dst.copy_from_slice(v);
            c.auth.1 = Some(v.len() as u16);
        }
        if let Some(v) = content_type {
            let n = v.len().min(MEDIA_ROOM);
            c.media.0[..n].copy_from_slice(&v[..n]);
            c.media.1 = n as u8;
        }
        c.fed = 0;
        let media = MediaType::of(content_type);
        c.diagnostics.event_stream = media == MediaType::EventStream;
        c.reader.on_head(status, media)
    }

    /// Body octets of call `i`'s answer: judged as they come. Stops after
    /// a notification ([`Fed::Note`]), whose text must be handed out
    /// before the next message is written over it.
    pub(super) fn on_body(&mut self, i: usize, mut data: &[u8]) -> (Fed, Option<Judgement>) {
        let total = data.len();
        let call = self.call_id(i);
        while !data.is_empty() {
            let Some(slot) = self.slots.get_mut(i) else {
                break;
            };
            let Some(c) = slot.call.as_mut() else {
                break;
            };
            if c.terminal.is_some() || c.reader.is_done() {
                break;
            }
            c.got = true;
            // What the reader may write is no more than it was given since
            // its message began.
            let want = (c.fed + data.len()).clamp(RX_MIN, self.max_message.max(RX_MIN));
            let have = bytes(&self.store, &slot.rx).len();
            if have < want && !ensure(&mut self.store, &mut slot.rx, want) {
                let _ = ensure(&mut self.store, &mut slot.rx, have.max(RX_MIN));
            }
            let rx = match slot.rx.as_mut() {
                Some(b) => self.store.bytes_mut(b),
                None => &mut [],
            };
            let step = c.reader.on_body(data, rx);
            c.fed += step.consumed;
            data = data.get(step.consumed..).unwrap_or_default();
            match step.judgement {
                Some(Judgement::Notification { len }) => {
                    c.fed = 0;
                    if c.mode == Mode::Call && c.own.is_none() {
                        self.note = Some(Note {
                            call,
                            len,
                            told: false,
                        });
                        return (Fed::Note(total - data.len()), None);
                    }
                }
                Some(j) => return (Fed::All, Some(j)),
                None if step.consumed == 0 => break,
                None => {}
            }
        }
        (Fed::All, None)
    }

    /// Call `i`'s answer ended: the judgement still due.
    pub(super) fn on_end(&mut self, i: usize) -> Option<Judgement> {
        let slot = self.slots.get_mut(i)?;
        let c = slot.call.as_mut()?;
        if c.terminal.is_some() {
            return None;
        }
        c.reader.on_end(bytes(&self.store, &slot.rx))
    }

    /// The last judgement of call `i`'s exchange: its outcome, or the next
    /// request of a re-list. The call is off its wire after this (unless
    /// it went back to the queue).
    pub(super) fn judged(&mut self, i: usize, j: Judgement) {
        let Some(c) = self.call_mut(i) else {
            return;
        };
        c.place = Place::Done;
        if c.own.is_some() {
            c.own_judgement = Some(j);
        }
        match j {
            Judgement::Notification { .. } => {}
            // The 2024 shape: the response comes on the event stream.
            Judgement::Accepted if c.posted => c.place = Place::Posted,
            Judgement::Accepted => {
                c.terminal = Some(Terminal {
                    kind: Kind::Nothing,
                    in_req: false,
                    at: (0, 0),
                    diagnostics: c.diagnostics,
                    delivered: false,
                });
            }
            Judgement::Response { len, error } => self.answered(i, len, error.is_some()),
            Judgement::Failed(f) => self.failed(i, &f),
        }
    }

    /// A JSON-RPC response in `rx[..len]` ends call `i`'s exchange: hand
    /// it out, or re-list and retry (§5.5.4).
    fn answered(&mut self, i: usize, len: usize, is_error: bool) {
        let call = self.call_id(i);
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        let Some(c) = slot.call.as_mut() else {
            return;
        };
        let mut warnings = Warnings::new();
        let mut cursor = [0u8; 256];
        let modern_http = c.own.is_none();
        let next = {
            let text = bytes(&self.store, &slot.rx).get(..len).unwrap_or(b"");
            if modern_http {
                cache::after_answer(
                    c.mode,
                    c.tool_call,
                    text,
                    &mut self.cache,
                    &mut warnings,
                    &mut cursor,
                    self.max_pages,
                )
            } else {
                Relist::Deliver
            }
        };
        push_warnings(&mut self.warnings, call, &warnings);
        match next {
            Relist::Deliver => {}
            Relist::Page { page, cursor } => {
                if self.relist(i, page, cursor) {
                    return;
                }
                if page > 0 {
                    // A page that does not fit ends the re-list: the call
                    // goes again with what was learned.
                    self.requeue(i, Mode::Retry, false);
                    return;
                }
            }
            Relist::Retry => {
                self.requeue(i, Mode::Retry, false);
                return;
            }
            Relist::Failed(e) => {
                self.fail_rpc(i, e);
                return;
            }
        }
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        let Some(c) = slot.call.as_mut() else {
            return;
        };
        if !is_error && c.answers_input && c.own.is_none() && !matches!(c.mode, Mode::Relist(_)) {
            // An `input_required` result: checked, then the call waits for
            // the application's answers.
            let asks = bytes(&self.store, &slot.rx)
                .get(..len)
                .and_then(|text| json::get(text, b"result"))
                .filter(|r| input::asks_for_input(r))
                .map(|r| input::InputRequired::read(r).map(drop));
            match asks {
                None => {}
                Some(Err(e)) => {
                    self.fail_rpc(i, e);
                    return;
                }
                Some(Ok(())) if c.rounds >= self.max_rounds => {
                    self.fail_too_many_rounds(i);
                    return;
                }
                Some(Ok(())) => {
                    c.rounds = c.rounds.saturating_add(1);
                    c.terminal = Some(Terminal {
                        kind: Kind::InputRequired,
                        in_req: false,
                        at: (0, len),
                        diagnostics: c.diagnostics,
                        delivered: false,
                    });
                    return;
                }
            }
        }
        let kind = if is_error {
            Kind::Failed
        } else {
            Kind::Response
        };
        let mut terminal = Terminal {
            kind,
            in_req: false,
            at: (0, len),
            diagnostics: c.diagnostics,
            delivered: false,
        };
        if kind == Kind::Response && c.tools_list && c.mode == Mode::Call {
            // The application's own tools/list: learn it, and leave out the
            // tools with invalid annotations (the result without them goes
            // after the message, when the store lets it grow).
            let first = {
                let orig = bytes(&self.store, &slot.req)
                    .get(c.orig.0..c.orig.1)
                    .unwrap_or(b"");
                json::get(orig, b"params")
                    .and_then(|p| json::get(p, b"cursor"))
                    .is_none()
            };
            let mut warnings = Warnings::new();
            let _ = ensure(&mut self.store, &mut slot.rx, 2 * len + 256);
            let rx = match slot.rx.as_mut() {
                Some(b) => self.store.bytes_mut(b),
                None => &mut [],
            };
            let (src, dst) = rx.split_at_mut(len.min(rx.len()));
            let text = &src[..];
            let result = json::get(text, b"result").unwrap_or(b"{}");
            let id = json::get(text, b"id").map_or(&b"null"[..], json::trim);
            let mut out = JsonWriter::new(dst);
            crate::mcp::envelope::write_result(&mut out, id, |w| {
                cache::learn(&mut self.cache, result, first, Some(w), &mut warnings);
            });
            if !warnings.is_empty()
                && let Ok(t) = out.finish()
            {
                terminal.at = (len, len + t.len());
            }
            push_warnings(&mut self.warnings, call, &warnings);
        }
        c.terminal = Some(terminal);
    }

    /// Points call `i` at a `tools/list` request (page `page`, after
    /// `cursor`) written after the application's message, and queues it.
    /// `false` when it does not fit.
    fn relist(&mut self, i: usize, page: u16, cursor: Option<&[u8]>) -> bool {
        let Some(slot) = self.slots.get_mut(i) else {
            return false;
        };
        let Some(c) = slot.call.as_mut() else {
            return false;
        };
        let orig = c.orig;
        let write = |buf: &mut [u8]| -> Result<(usize, usize), usize> {
            if buf.len() < orig.1 {
                return Err(usize::MAX);
            }
            let (before, after) = buf.split_at_mut(orig.1);
            let text = before.get(orig.0..).unwrap_or(b"");
            let meta = cache::meta_span(text).and_then(|r| text.get(r));
            let mut w = JsonWriter::new(after);
            cache::write_relist(&mut w, meta, cursor);
            match w.finish() {
                Ok(t) => Ok((orig.1, orig.1 + t.len())),
                Err(e) => Err(orig.1.saturating_add(e.needed)),
            }
        };
        let written = match write(super::super::calls::bytes_mut(
            &mut self.store,
            &mut slot.req,
        )) {
            Ok(span) => Some(span),
            Err(needed) if needed <= self.max_message.saturating_add(orig.1) => {
                if ensure(&mut self.store, &mut slot.req, needed) {
                    write(super::super::calls::bytes_mut(
                        &mut self.store,
                        &mut slot.req,
                    ))
                    .ok()
                } else {
                    None
                }
            }
            Err(_) => None,
        };
        let Some(span) = written else {
            return false;
        };
        self.requeue(i, Mode::Relist(page), false);
        if let Some(c) = self.call_mut(i) {
            c.cur = span;
        }
        self.reset_reader(i);
        true
    }

    /// Ends call `i` with the failure `f` the reader found: the status
    /// maps to the JSON-RPC code as everywhere ([`Code::from_http_status`],
    /// [`code_for_status`]), the text names the status, the media type
    /// and the body's first octets.
    fn failed(&mut self, i: usize, f: &HttpFailure) {
        let Some(slot) = self.slots.get(i) else {
            return;
        };
        let Some(c) = slot.call.as_ref() else {
            return;
        };
        let status = if f.reason.contains("larger than the receive buffer") {
            Code::ResourceExhausted
        } else if matches!(f.status, 400..=599) {
            Code::from_http_status(f.status)
        } else if f.reason.contains("ended before") {
            Code::Unavailable
        } else {
            Code::Internal
        };
        let mut text = Text::new();
        text.push(f.reason.as_bytes());
        if f.status != 0 {
            text.push(b" (HTTP ").number(f.status);
            let media = c.media.0.get(..usize::from(c.media.1)).unwrap_or(b"");
            if !media.is_empty() {
                text.push(b", content type ").push(media);
            }
            text.push(b")");
        }
        let excerpt = bytes(&self.store, &slot.rx)
            .get(..f.excerpt)
            .unwrap_or_default();
        if !excerpt.is_empty() {
            text.push(b": ").push(excerpt);
        }
        let http = (f.status != 0).then_some(f.status);
        self.fail_transport(i, status, text.as_bytes(), http);
    }

    /// Ends call `i` with a failure of the transport: the JSON-RPC code of
    /// `status` ([`code_for_status`]), `message`.
    pub(super) fn fail_transport(
        &mut self,
        i: usize,
        status: Code,
        message: &[u8],
        http_status: Option<u16>,
    ) {
        let Some(c) = self.call_mut(i) else {
            return;
        };
        // An outcome stands, but a call waiting for input can still fail.
        if c.terminal.is_some() && !c.waits_for_input() {
            return;
        }
        c.place = Place::Done;
        let mut diagnostics = c.diagnostics;
        diagnostics.transport = true;
        diagnostics.grpc_status = Some(status);
        if http_status.is_some() {
            diagnostics.http_status = http_status;
        }
        let code = match status {
            // A cancellation is this end's, never the server's answer.
            Code::Cancelled => INTERNAL_ERROR,
            s => code_for_status(s),
        };
        self.write_outcome(i, code, message, diagnostics);
    }

    /// Fails call `i`, whose server asks for input once more after the
    /// round limit, saying so (off the path of every answer).
    #[cold]
    #[inline(never)]
    fn fail_too_many_rounds(&mut self, i: usize) {
        let Some(diagnostics) = self.call(i).map(|c| c.diagnostics) else {
            return;
        };
        let mut text = [0u8; input::TOO_MANY_ROOM];
        let why = input::too_many_rounds(self.max_rounds, &mut text);
        self.write_outcome(i, INTERNAL_ERROR, why, diagnostics);
    }

    /// Ends call `i` with a JSON-RPC error found by this end.
    pub(super) fn fail_rpc(&mut self, i: usize, e: RpcError) {
        let Some(c) = self.call_mut(i) else {
            return;
        };
        if c.terminal.is_some() && !c.waits_for_input() {
            return;
        }
        c.place = Place::Done;
        let diagnostics = c.diagnostics;
        self.write_outcome(i, e.code, e.message.as_bytes(), diagnostics);
    }

    /// Writes call `i`'s error response (the application's id, `code`,
    /// `message`) into its receive buffer, and makes it the outcome.
    pub(super) fn write_outcome(
        &mut self,
        i: usize,
        code: i32,
        message: &[u8],
        diagnostics: Diagnostics,
    ) {
        self.write_outcome_with(i, code, message, None, diagnostics);
    }

    /// [`Calls::write_outcome`] with the error's `data` (raw JSON).
    pub(super) fn write_outcome_with(
        &mut self,
        i: usize,
        code: i32,
        message: &[u8],
        data: Option<&[u8]>,
        diagnostics: Diagnostics,
    ) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        let Some(c) = slot.call.as_mut() else {
            return;
        };
        let id = copy_id(
            bytes(&self.store, &slot.req)
                .get(c.orig.0..c.orig.1)
                .unwrap_or(b""),
        );
        let room = ERROR_ROOM + 6 * message.len() + data.map_or(0, <[u8]>::len);
        let _ = ensure(&mut self.store, &mut slot.rx, room);
        let rx = match slot.rx.as_mut() {
            Some(b) => self.store.bytes_mut(b),
            None => &mut [],
        };
        let mut w = JsonWriter::new(rx);
        crate::mcp::envelope::write_error(&mut w, id.as_slice(), code, message, data);
        let at = w.finish().map_or((0, 0), |t| (0, t.len()));
        c.terminal = Some(Terminal {
            kind: Kind::Failed,
            in_req: false,
            at,
            diagnostics,
            delivered: false,
        });
    }

    /// Copies `len` octets of call `from`'s receive buffer (a message of
    /// the 2024 event stream) to the start of call `to`'s; `false` when
    /// the store cannot hold them.
    pub(super) fn copy_rx(&mut self, from: usize, len: usize, to: usize) -> bool {
        let Some(slot) = self.slots.get_mut(to) else {
            return false;
        };
        if !ensure(&mut self.store, &mut slot.rx, len.max(RX_MIN)) {
            return false;
        }
        // Both buffers are the store's: the text goes through the stack.
        let mut chunk = [0u8; 64];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(chunk.len());
            let Some(src) = self
                .slots
                .get(from)
                .and_then(|s| bytes(&self.store, &s.rx).get(at..at + n))
            else {
                return false;
            };
            chunk[..n].copy_from_slice(src);
            let Some(dst) = self
                .slots
                .get_mut(to)
                .and_then(|s| s.rx.as_mut())
                .map(|b| self.store.bytes_mut(b))
                .and_then(|b| b.get_mut(at..at + n))
            else {
                return false;
            };
            dst.copy_from_slice(&chunk[..n]);
            at += n;
        }
        true
    }

    /// Where a message of the event stream of length `len` is written in
    /// call `i`'s receive buffer (grown to it): the buffer, or `None`.
    pub(super) fn rx_room(&mut self, i: usize, want: usize) -> Option<&mut [u8]> {
        let slot = self.slots.get_mut(i)?;
        let want = want.clamp(RX_MIN, self.max_message.max(RX_MIN));
        let have = bytes(&self.store, &slot.rx).len();
        if have < want && !ensure(&mut self.store, &mut slot.rx, want) {
            let _ = ensure(&mut self.store, &mut slot.rx, have.max(RX_MIN));
        }
        slot.rx.as_mut().map(|b| self.store.bytes_mut(b))
    }

    /// Ends call `i` as call `from` failed (its JSON-RPC error, its
    /// diagnostics, its `WWW-Authenticate`): the calls that waited for the
    /// era's handshake get the handshake's failure. `false` when `from`
    /// did not fail.
    pub(super) fn fail_as(&mut self, i: usize, from: usize) -> bool {
        let Some(c) = self.call(from) else {
            return false;
        };
        let Some(t) = c.terminal.filter(|t| t.kind == Kind::Failed) else {
            return false;
        };
        let auth = c.auth;
        let response = self
            .slots
            .get(from)
            .map_or(&[][..], |s| bytes(&self.store, &s.rx))
            .get(t.at.0..t.at.1)
            .unwrap_or(b"");
        let error = json::get(response, b"error").unwrap_or(b"{}");
        let code = json::get(error, b"code")
            .and_then(json::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(INTERNAL_ERROR);
        let mut text = [0u8; TEXT_ROOM];
        let message = json::get(error, b"message")
            .and_then(|m| json::unescape(m, &mut text))
            .map_or(&b"the era's handshake failed"[..], |m| m);
        let mut message_copy = [0u8; TEXT_ROOM];
        let n = message.len().min(TEXT_ROOM);
        message_copy[..n].copy_from_slice(&message[..n]);
        // The server's `data` (a -32022's `supported`) goes with it, when
        // it fits.
        let mut data_copy = [0u8; DATA_ROOM];
        let data = json::get(error, b"data").and_then(|d| {
            let dst = data_copy.get_mut(..d.len())?;
            dst.copy_from_slice(d);
            Some(d.len())
        });
        let Some(c) = self.call_mut(i) else {
            return false;
        };
        if c.terminal.is_some() {
            return true;
        }
        c.place = Place::Done;
        c.auth = auth;
        let data = data.and_then(|n| data_copy.get(..n));
        self.write_outcome_with(i, code, &message_copy[..n], data, t.diagnostics);
        true
    }

    /// The next event of the calls: the notification just judged, a
    /// warning, an outcome, an end.
    pub(super) fn poll_event(&mut self) -> Option<super::super::ClientEvent> {
        use super::super::ClientEvent;
        self.lent_warning = None;
        if let Some(n) = self.note.as_mut()
            && !n.told
        {
            n.told = true;
            return Some(ClientEvent::Notification { call: n.call });
        }
        if let Some(q) = self.warnings.pop() {
            self.lent_warning = Some(q);
            if let Queued::Warning { call, reason, .. } = q {
                return Some(ClientEvent::Warning { call, reason });
            }
        }
        for i in 0..CALLS {
            let call = self.call_id(i);
            let Some(c) = self.call_mut(i) else {
                continue;
            };
            // The engine reads its own requests' outcomes.
            if c.own.is_some() {
                continue;
            }
            let Some(t) = c.terminal.as_mut() else {
                continue;
            };
            if t.kind == Kind::InputRequired {
                // The call waits for its answers: it does not end.
                if t.delivered {
                    continue;
                }
                t.delivered = true;
                return Some(ClientEvent::InputRequired { call });
            }
            if t.delivered || t.kind == Kind::Nothing {
                self.release(i);
                return Some(ClientEvent::Ended { call });
            }
            t.delivered = true;
            return Some(match t.kind {
                Kind::Failed => ClientEvent::Failed { call },
                Kind::Response | Kind::Nothing | Kind::InputRequired => {
                    ClientEvent::Response { call }
                }
            });
        }
        None
    }

    /// The text of `call`'s notification just handed out, or of its
    /// outcome once handed out.
    pub(super) fn message(&self, call: CallId) -> Option<&[u8]> {
        let i = self.slot_of(call)?;
        let slot = &self.slots[i];
        if let Some(n) = self.note
            && n.call == call
            && n.told
        {
            return bytes(&self.store, &slot.rx).get(..n.len);
        }
        let t = slot.call.as_ref()?.terminal.as_ref()?;
        if !t.delivered || t.kind == Kind::Nothing {
            return None;
        }
        bytes(&self.store, &slot.rx).get(t.at.0..t.at.1)
    }

    /// The `result` of `call`'s response, once handed out.
    pub(super) fn result(&self, call: CallId) -> Option<&[u8]> {
        if self.note.is_some_and(|n| n.call == call && n.told) {
            return None;
        }
        let i = self.slot_of(call)?;
        let t = self.slots[i].call.as_ref()?.terminal.as_ref()?;
        if !t.delivered || !matches!(t.kind, Kind::Response | Kind::InputRequired) {
            return None;
        }
        json::get(self.message(call)?, b"result")
    }

    /// The `inputRequests` of `call`'s `input_required` result, once its
    /// `InputRequired` was handed out and until it is answered.
    pub(super) fn input_requests(&self, call: CallId) -> Option<&[u8]> {
        let i = self.slot_of(call)?;
        if !self.slots[i].call.as_ref()?.waits_for_input() {
            return None;
        }
        input::requests_of(self.result(call)?)
    }

    /// Points call `i` (waiting for input: its `input_required` response
    /// at the start of `rx`) at the request of its next round, answering
    /// with `responses`: written after the application's message (from
    /// it, the result's `requestState` copied there first, and the
    /// answers), moved into its place, and queued. The error says why the
    /// round cannot go (the call fails with it).
    pub(super) fn start_round(&mut self, i: usize, responses: &[u8]) -> Result<(), &'static str> {
        const NO_ROOM: &str = "the request of the next round does not fit the call store";
        let Some(slot) = self.slots.get_mut(i) else {
            return Err("the call is over");
        };
        let Some(c) = slot.call.as_ref() else {
            return Err("the call is over");
        };
        let Some(t) = c.terminal.filter(|t| t.kind == Kind::InputRequired) else {
            return Err("the call does not wait for input");
        };
        let (orig, round) = (c.orig, c.rounds);
        // After the application's message everything is scratch (a
        // re-list's page, a legacy body, the last exchange's head).
        let end = orig.1;
        let state = {
            let rx = bytes(&self.store, &slot.rx);
            let message = rx.get(t.at.0..t.at.1).unwrap_or_default();
            json::get(message, b"result")
                .and_then(|r| input::InputRequired::read(r).ok()?.state)
                .map(|s| offset_in(message, s, t.at.0))
        };
        let mut id = [0u8; input::MAX_ROUND_ID];
        let id_len = {
            let request = bytes(&self.store, &slot.req)
                .get(orig.0..orig.1)
                .unwrap_or_default();
            input::round_id(json::get(request, b"id").unwrap_or(b"null"), round, &mut id)
                .ok_or("the id of the next round's request would be over 128 octets")?
        };
        let id = &id[..id_len];
        let slen = state.map_or(0, |s| s.1 - s.0);
        let base = end + slen;
        if !ensure(&mut self.store, &mut slot.req, base) {
            return Err(NO_ROOM);
        }
        if let Some(s) = state
            && !copy_across(&mut self.store, &slot.rx, s, &mut slot.req, end)
        {
            return Err(NO_ROOM);
        }
        let mut len = None;
        for _ in 0..2 {
            let buf = bytes_mut(&mut self.store, &mut slot.req);
            if buf.len() < base {
                return Err(NO_ROOM);
            }
            let (before, after) = buf.split_at_mut(base);
            let request = before.get(orig.0..orig.1).unwrap_or_default();
            let state = (slen > 0).then(|| before.get(end..base)).flatten();
            let mut w = JsonWriter::new(after);
            input::write_round(&mut w, request, id, responses, state);
            let needed = match w.finish() {
                Ok(text) => {
                    len = Some(text.len());
                    break;
                }
                Err(o) => o.needed,
            };
            if needed > self.max_message || !ensure(&mut self.store, &mut slot.req, base + needed) {
                return Err(NO_ROOM);
            }
        }
        let Some(len) = len else {
            return Err(NO_ROOM);
        };
        if len > self.max_message {
            return Err("the request of the next round is over the message limit");
        }
        // The round's request is the call's from now on.
        bytes_mut(&mut self.store, &mut slot.req).copy_within(base..base + len, orig.0);
        let Some(c) = slot.call.as_mut() else {
            return Err("the call is over");
        };
        c.orig = (orig.0, orig.0 + len);
        c.cur = c.orig;
        c.terminal = None;
        c.resent = false;
        self.requeue(i, Mode::Call, false);
        Ok(())
    }

    /// The JSON-RPC error of `call`, once its `Failed` was handed out.
    pub(super) fn failure(&self, call: CallId) -> Option<Failure<'_>> {
        let i = self.slot_of(call)?;
        let c = self.slots[i].call.as_ref()?;
        let t = c.terminal.as_ref()?;
        if !t.delivered || t.kind != Kind::Failed {
            return None;
        }
        let response = bytes(&self.store, &self.slots[i].rx)
            .get(t.at.0..t.at.1)
            .unwrap_or(b"");
        let error = json::get(response, b"error").unwrap_or(b"{}");
        Some(Failure {
            code: json::get(error, b"code")
                .and_then(json::as_i64)
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(INTERNAL_ERROR),
            message: json::get(error, b"message").map_or(b"\"\"", json::trim),
            data: json::get(error, b"data").map(json::trim),
            response,
            diagnostics: t.diagnostics,
            www_authenticate: c.auth.1.and_then(|n| c.auth.0.get(..usize::from(n))),
        })
    }

    /// The tool named by the warning just handed out about `call`.
    pub(super) fn warning_tool(&self, call: CallId) -> Option<&[u8]> {
        match &self.lent_warning {
            Some(Queued::Warning {
                call: c, name, len, ..
            }) if *c == call => name.get(..usize::from(*len)),
            _ => None,
        }
    }
}

fn push_warnings(queue: &mut Queue, call: CallId, warnings: &Warnings) {
    for (name, len, reason) in warnings.iter() {
        queue.push(Queued::Warning {
            call,
            name,
            len,
            reason,
        });
    }
}
