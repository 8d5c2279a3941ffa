//! The binding-free part of a server connection: the calls in progress and
//! everything MCP decides about them, whatever carries them.
//!
//! A binding admits a call with its request head ([`Engine::admit`]),
//! copies the request message into the call's buffer
//! ([`Engine::message_room`]) and hands it over ([`Engine::dispatch`]). The
//! engine judges and routes it (with [`dispatch`]), answers what it can,
//! keeps `subscriptions/listen` streams, turns the application's answers
//! into JSON-RPC messages in the call's buffer, and keeps the events for the
//! application in the call records (none is ever dropped). The binding
//! frames each message for its wire ([`Framing`]), sends
//! [`Engine::output`], and maps [`Dispatched::Protocol`] errors and call
//! endings to its wire.
//!
//! A call's buffer holds, in order: the request head (the binding's
//! header block), room for the JSON-RPC id, room for the principal (with
//! authorization), then the body: the request message, later each outgoing
//! message after `Framing::ROOM` octets for its framing.

use core::ops::Range;
use core::time::Duration;

use super::dispatch::{self, Level, Route};
use super::listen::{self, Filter, ListChange, ListenLimits};
use super::request::{Handler, Request};
use super::{CallId, CancelReason, SendError, ServerEvent};
use crate::h2::{ConnectionError, HeaderList};
use crate::mcp::auth::{self, Decision, MAX_PRINCIPAL, Refusal};
use crate::mcp::envelope::{self, RequestSpans, Spans};
use crate::mcp::error::{INVALID_REQUEST, METHOD_NOT_FOUND, RpcError};
use crate::mcp::json;
use crate::mcp::meta::ParamsIndex;
use crate::mcp::meta::RequestMeta;
use crate::mcp::registry::Registry;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;
use crate::records::Records;
use crate::time::Instant;

/// Longest JSON-RPC id kept (raw JSON) by default; a binding may set
/// another ([`Engine::max_id`]).
pub(crate) const MAX_ID: usize = 128;

/// How a binding frames each outgoing message.
pub(crate) trait Framing {
    /// Octets kept before each message for its framing.
    const ROOM: usize;
    /// Octets after each message.
    const TAIL: &'static [u8];
    /// Writes the framing of a message of `len` octets into `head` (`ROOM`
    /// octets just before it); returns where the framing starts in `head`.
    fn frame(head: &mut [u8], len: usize) -> usize;
    /// Each message must be one line: raw JSON that a handler or a
    /// forwarded result brought may be pretty-printed, and its line breaks
    /// (white space between tokens in valid JSON) become spaces.
    const ONE_LINE: bool = false;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting for the application to accept the call's credentials,
    /// while the request message is collected.
    Authorizing,
    /// Collecting the request message.
    Body,
    /// The application holds the request.
    Handler,
    /// A `subscriptions/listen` stream the engine keeps.
    Listening,
    /// Writing the last message; the binding ends the call after it.
    Finishing,
}

/// What a call has to tell the application; at most one at a time (a call
/// asks to be authorized, then is handed over, then may wait to write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    Authorize,
    Request,
    Writable,
}

/// A listen stream's state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Listen {
    filter: Filter,
    /// The honoured `resourceSubscriptions` array, in the call buffer.
    subscriptions: (usize, usize),
    /// List changes announced while a message was being written (a bit
    /// each); sent once the stream is free.
    owed: u8,
    /// The server ends the stream once it is free.
    ending: bool,
}

/// A call, with the binding's own part `x`.
pub(crate) struct Call<B, X> {
    pub(crate) serial: u32,
    pub(crate) phase: Phase,
    pub(crate) buf: B,
    pub(crate) headers_len: usize,
    id_len: usize,
    /// Room kept for the id after the head (the principal follows it).
    id_room: usize,
    principal_len: Option<usize>,
    /// Where the body starts.
    pub(crate) body: usize,
    pub(crate) deadline: Option<Instant>,
    /// The deadline came from the request (a listen stream keeps it).
    explicit_deadline: bool,
    params: Option<(usize, usize)>,
    /// Where `params`'s members lie, from the walk that validated the
    /// request: the handler's request is read from it without another.
    index: ParamsIndex,
    handler: Option<Handler>,
    notice: Option<Notice>,
    /// The application was handed the request: it hears of the call's end.
    handed: bool,
    listen: Option<Listen>,
    /// A listen stream (kept here or forwarded) that holds room of the
    /// [`ListenQuota`] until the call is removed.
    quota_held: bool,
    /// Outgoing octets in `buf[out_pos..out_end]`.
    out_pos: usize,
    out_end: usize,
    /// The message in `out_pos..out_end` was written and not sent yet (for
    /// a binding that frames it at send time: [`Engine::frame_fresh`]).
    fresh: bool,
    /// The application was told Busy and waits for Writable.
    wants_writable: bool,
    /// The request ended while the call was being authorized.
    pub(crate) ended: bool,
    pub(crate) x: X,
}

impl<B, X> Call<B, X> {
    fn id_at(&self) -> Range<usize> {
        self.headers_len..self.headers_len + self.id_len
    }

    fn principal_at(&self) -> Option<Range<usize>> {
        let start = self.headers_len + self.id_room;
        self.principal_len.map(|n| start..start + n)
    }

    /// The authorized principal, in the call's buffer `bytes`.
    fn principal<'b>(&self, bytes: &'b [u8]) -> Option<&'b str> {
        self.principal_at()
            .and_then(|r| bytes.get(r))
            .and_then(|p| core::str::from_utf8(p).ok())
    }

    fn params_at(&self) -> Option<Range<usize>> {
        self.params.map(|(a, b)| a..b)
    }

    /// A message is partly sent.
    pub(crate) fn writing(&self) -> bool {
        self.out_pos < self.out_end
    }

    /// The message to send was written and not framed yet (see
    /// [`Engine::frame_fresh`]): none of it went out.
    #[cfg(feature = "tunnel-http")]
    pub(crate) fn is_fresh(&self) -> bool {
        self.fresh
    }
}

/// Why a call was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No buffer or slot now; nothing was processed (the client may retry).
    Busy,
    /// Every call slot is in use.
    Full,
    /// The request head alone is larger than a call buffer can be.
    HeadTooLarge,
}

/// What became of a dispatched request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dispatched {
    /// End the call with the binding's protocol answer for this error.
    Protocol(RpcError),
    /// A notification: nothing to answer.
    Notification,
    /// A message was written (an answer, an in-band error, a listen
    /// acknowledgement): send it.
    Written,
    /// The application has the request.
    Handed,
    /// The answer could not be written: end the call.
    Failed,
}

/// What a binding does after an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Send call `i`'s output.
    Send(usize),
    /// Call `i` cannot be answered: end it.
    Drop(usize),
    /// Nothing changed.
    Nothing,
}

/// What is next on a listen stream whose last message went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListenNext {
    /// Nothing to send.
    Idle,
    /// A message was written: send it.
    Written,
    /// The final result was written: send it, then end the call.
    Final,
    /// The final result does not fit: end the call.
    Failed,
}

/// The calls of one connection. `R` and `C` keep the call records and the
/// unpolled cancellations (inline, or growing on a heap).
pub(crate) struct Engine<'r, S: CallStore, X, R, C, F> {
    pub(crate) registry: Registry<'r>,
    pub(crate) store: S,
    pub(crate) calls: R,
    /// Calls whose handler must stop, not polled yet.
    cancelled: C,
    /// The connection ended; reported after every call's event.
    closed: Option<Option<ConnectionError>>,
    /// Where the next scan for call events starts (round robin).
    cursor: usize,
    serial: u32,
    request_timeout: Duration,
    authorize: bool,
    /// Longest JSON-RPC id accepted (raw JSON); a longer one is -32600.
    pub(crate) max_id: usize,
    /// The binding mirrors the body in headers (not stdio).
    mirrored_headers: bool,
    pub(crate) listen_limits: ListenLimits<'r>,
    _x: core::marker::PhantomData<(X, F)>,
}

impl<'r, S, X, R, C, F> Engine<'r, S, X, R, C, F>
where
    S: CallStore,
    F: Framing,
    R: Records<Option<Call<S::Buf, X>>>,
    C: Records<Option<(CallId, CancelReason)>>,
{
    pub(crate) fn new(
        registry: Registry<'r>,
        store: S,
        request_timeout: Duration,
        authorize: bool,
        mirrored_headers: bool,
    ) -> Self {
        Self {
            registry,
            store,
            calls: R::default(),
            cancelled: C::default(),
            closed: None,
            cursor: 0,
            serial: 0,
            request_timeout,
            authorize,
            max_id: MAX_ID,
            mirrored_headers,
            listen_limits: ListenLimits::default(),
            _x: core::marker::PhantomData,
        }
    }

    pub(crate) fn id(&self, i: usize) -> Option<CallId> {
        let c = self.calls.get(i)?.as_ref()?;
        Some(CallId {
            index: i as u16,
            serial: c.serial,
        })
    }

    /// The record of `call` when it is in `phase`.
    pub(crate) fn find(&self, call: CallId, phase: Phase) -> Option<usize> {
        let i = call.index();
        self.calls
            .get(i)
            .and_then(Option::as_ref)
            .filter(|c| c.serial == call.serial && c.phase == phase)
            .map(|_| i)
    }

    // ------------------------------------------------------------------
    // Admission and the request
    // ------------------------------------------------------------------

    /// Admits a call whose request head (its raw header block) is `head`;
    /// `timeout` is the request's own deadline, if any.
    pub(crate) fn admit(
        &mut self,
        head: &[u8],
        timeout: Option<Duration>,
        now: Instant,
        x: X,
    ) -> Result<usize, Refused> {
        let want = self.call_room(head.len())?;
        // A record first: with none, no buffer is taken.
        self.free_record()?;
        let Some(mut buf) = self.store.take(want) else {
            return Err(Refused::Busy);
        };
        self.store.bytes_mut(&mut buf)[..head.len()].copy_from_slice(head);
        self.admit_buf(buf, head.len(), timeout, now, x)
            .map_err(|(e, buf)| {
                self.store.put(buf);
                e
            })
    }

    /// [`Engine::admit`] for a binding that built the head in a buffer of
    /// the store itself (HTTP/1.1 turns its head into a header list in
    /// place): `buf` starts with the `head_len` octets of the head, and
    /// becomes the call's. Refused, it comes back.
    pub(crate) fn admit_buf(
        &mut self,
        mut buf: S::Buf,
        head_len: usize,
        timeout: Option<Duration>,
        now: Instant,
        x: X,
    ) -> Result<usize, (Refused, S::Buf)> {
        let want = match self.call_room(head_len) {
            Ok(want) => want,
            Err(e) => return Err((e, buf)),
        };
        let i = match self.free_record() {
            Ok(i) => i,
            Err(e) => return Err((e, buf)),
        };
        if !self.store.grow(&mut buf, want) {
            return Err((Refused::HeadTooLarge, buf));
        }
        let id_room = self.max_id;
        let principal_room = want - head_len - id_room;
        self.serial = self.serial.wrapping_add(1);
        let authorizing = self.authorize;
        self.calls[i] = Some(Call {
            serial: self.serial,
            phase: if authorizing {
                Phase::Authorizing
            } else {
                Phase::Body
            },
            buf,
            headers_len: head_len,
            id_len: 0,
            principal_len: None,
            id_room,
            body: head_len + id_room + principal_room,
            deadline: Some(now + timeout.unwrap_or(self.request_timeout)),
            explicit_deadline: timeout.is_some(),
            params: None,
            index: ParamsIndex::default(),
            handler: None,
            notice: authorizing.then_some(Notice::Authorize),
            handed: false,
            quota_held: false,
            listen: None,
            out_pos: 0,
            out_end: 0,
            fresh: false,
            wants_writable: false,
            ended: false,
            x,
        });
        Ok(i)
    }

    /// The octets a call with a head of `head_len` needs before its body.
    fn call_room(&self, head_len: usize) -> Result<usize, Refused> {
        let principal_room = if self.authorize { MAX_PRINCIPAL } else { 0 };
        // The head, the id, the principal, and room for a small request.
        let want = head_len + self.max_id + principal_room;
        if want > self.store.max_len() {
            return Err(Refused::HeadTooLarge);
        }
        Ok(want)
    }

    /// A free call record.
    fn free_record(&mut self) -> Result<usize, Refused> {
        // A slot whose cancellation is not polled yet stays taken.
        let cancelled = &self.cancelled;
        let free = (0..self.calls.len())
            .find(|&i| self.calls[i].is_none() && cancelled.get(i).is_none_or(Option::is_none))
            .or_else(|| {
                let n = self.calls.len();
                self.calls.grow_to(n + 1).then_some(n)
            });
        // Only slots whose end is unpolled are free: not processed.
        free.ok_or(if self.calls.iter().any(Option::is_none) {
            Refused::Busy
        } else {
            Refused::Full
        })
    }

    /// Room for `len` octets of request message at the body of call `i`
    /// (its buffer grown to fit), or `None` when the store cannot give it.
    pub(crate) fn message_room(&mut self, i: usize, len: usize) -> Option<&mut [u8]> {
        self.message_room_with(i, len).map(|(room, _)| room)
    }

    /// [`Engine::message_room`], with the binding's part of the call beside
    /// it (a binding that decodes straight into the room).
    pub(crate) fn message_room_with(
        &mut self,
        i: usize,
        len: usize,
    ) -> Option<(&mut [u8], &mut X)> {
        let c = self.calls.get_mut(i)?.as_mut()?;
        let body = c.body;
        if !self.store.grow(&mut c.buf, body + len) {
            return None;
        }
        let room = self.store.bytes_mut(&mut c.buf).get_mut(body..body + len)?;
        Some((room, &mut c.x))
    }

    /// The request message of call `i` lies at `at` in its buffer: judge
    /// and route it.
    pub(crate) fn dispatch(&mut self, i: usize, at: Range<usize>) -> Dispatched {
        match self.parse(i, at.clone()) {
            None => Dispatched::Failed,
            Some(Err(e)) => Dispatched::Protocol(e),
            Some(Ok(Spans::Notification)) => Dispatched::Notification,
            Some(Ok(Spans::Response)) => Dispatched::Protocol(RpcError::new(
                INVALID_REQUEST,
                "a server takes requests, not responses",
            )),
            Some(Ok(Spans::Request(r))) => self.dispatch_request(i, at, r),
        }
    }

    /// [`Engine::dispatch`] for a request whose headers do not mirror its
    /// body (the typed binding: its metadata is checked by the binding).
    #[cfg(feature = "typed")]
    pub(crate) fn dispatch_unmirrored(&mut self, i: usize, at: Range<usize>) -> Dispatched {
        let mirrored = core::mem::replace(&mut self.mirrored_headers, false);
        let d = self.dispatch(i, at);
        self.mirrored_headers = mirrored;
        d
    }

    /// Parses the message of call `i` at `at` in its buffer (`None`: no
    /// such call or range). A binding that must look at the message first
    /// (stdio: ids in use, cancellations) parses once with this, then
    /// hands a request to [`Engine::dispatch_request`].
    pub(crate) fn parse(&self, i: usize, at: Range<usize>) -> Option<Result<Spans, RpcError>> {
        let c = self.calls.get(i)?.as_ref()?;
        let json = self.store.bytes(&c.buf).get(at)?;
        Some(RequestSpans::parse(json, dispatch::MAX_DEPTH))
    }

    /// Judges and routes the request of call `i`, parsed into `spans`
    /// (relative to `at`).
    pub(crate) fn dispatch_request(
        &mut self,
        i: usize,
        at: Range<usize>,
        spans: RequestSpans,
    ) -> Dispatched {
        let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) else {
            return Dispatched::Failed;
        };
        let bytes = self.store.bytes_mut(&mut c.buf);
        let abs = |r: Range<usize>| (at.start + r.start, at.start + r.end);
        // The error carries id null: the id is not kept, and no other.
        if spans.id.len() > c.id_room {
            return Dispatched::Protocol(RpcError::new(
                INVALID_REQUEST,
                "JSON-RPC id longer than the server's limit",
            ));
        }
        let (ids, ide) = abs(spans.id);
        bytes.copy_within(ids..ide, c.headers_len);
        c.id_len = ide - ids;
        c.params = spans.params.map(abs);
        c.phase = Phase::Handler;
        let Some(method) = spans.method.map(abs) else {
            return self.answer_error(i, RpcError::new(METHOD_NOT_FOUND, "Method not found"));
        };
        let bytes = self.store.bytes(&c.buf);
        let method_text = &bytes[method.0..method.1];
        let method_raw = &bytes[method.0 - 1..method.1 + 1];
        let params = c.params_at().map(|r| &bytes[r]);
        let headers = HeaderList::from_bytes(&bytes[..c.headers_len]);
        let headers = self.mirrored_headers.then_some(&headers);
        let index = &spans.index;
        if let Err(e) = dispatch::check_indexed(
            &self.registry,
            method_text,
            method_raw,
            params,
            index,
            headers,
        ) {
            return match dispatch::level(&e) {
                Level::Protocol => Dispatched::Protocol(e),
                Level::InBand => self.answer_error(i, e),
            };
        }
        match dispatch::route_indexed(&self.registry, method_text, params, index) {
            Route::Builtin(b) => {
                let registry = self.registry;
                if self
                    .write_message(i, |w, id, _| dispatch::write_builtin(&registry, b, id, w))
                    .is_err()
                {
                    return self.answer_error(i, dispatch::RESULT_TOO_LARGE);
                }
                self.finish(i);
                Dispatched::Written
            }
            Route::Reject(e) => self.answer_error(i, e),
            Route::Handle(h) => {
                if let Some(c) = self.calls[i].as_mut() {
                    c.index = spans.index;
                    c.handler = Some(h.0);
                    c.notice = Some(Notice::Request);
                }
                Dispatched::Handed
            }
            Route::Listen => self.start_listen(i),
            Route::Forward => {
                let listen = method_text == b"subscriptions/listen";
                if listen && let Err(e) = self.admit_listen(i) {
                    return self.answer_error(i, e);
                }
                if let Some(c) = self.calls[i].as_mut() {
                    c.index = spans.index;
                    c.handler = Some(Handler::Forward {
                        method,
                        whole_list: false,
                    });
                    c.notice = Some(Notice::Request);
                    // A listen stream has no end of its own: no default
                    // deadline, as when the engine keeps it.
                    if listen && !c.explicit_deadline {
                        c.deadline = None;
                    }
                }
                Dispatched::Handed
            }
        }
    }

    /// A `subscriptions/listen` stream: acknowledged with the honoured
    /// filter, then kept by the engine (no default deadline).
    fn start_listen(&mut self, i: usize) -> Dispatched {
        let Some(c) = self.calls[i].as_mut() else {
            return Dispatched::Failed;
        };
        let bytes = self.store.bytes_mut(&mut c.buf);
        let params = c.params.map(|(a, b)| &bytes[a..b]);
        let (filter, subs) = match Filter::honour(&self.registry, params) {
            Ok(r) => r,
            Err(e) => return self.answer_error(i, e),
        };
        let subs = subs.map_or(0..0, |s| json::span(bytes, s));
        if let Err(e) = self.admit_listen(i) {
            return self.answer_error(i, e);
        }
        let Some(c) = self.calls[i].as_mut() else {
            return Dispatched::Failed;
        };
        let bytes = self.store.bytes_mut(&mut c.buf);
        // Keep the honoured subscriptions before the body, which outgoing
        // messages overwrite: move them to its start (they lie inside it),
        // and start the body after them.
        let len = subs.len();
        bytes.copy_within(subs, c.body);
        c.listen = Some(Listen {
            filter,
            subscriptions: (c.body, c.body + len),
            owed: 0,
            ending: false,
        });
        c.body += len;
        if !c.explicit_deadline {
            c.deadline = None;
        }
        c.phase = Phase::Listening;
        match self.write_message(i, |w, id, subs| {
            listen::write_acknowledgement(w, id, &filter, subs)
        }) {
            Ok(()) => Dispatched::Written,
            Err(_) => Dispatched::Failed,
        }
    }

    /// Writes an in-band JSON-RPC error as the call's last message.
    pub(crate) fn answer_error(&mut self, i: usize, e: RpcError) -> Dispatched {
        let mut data_buf = [0u8; 192];
        let data = dispatch::error_data(&e, self.params(i), &mut data_buf);
        if let Some(c) = self.calls[i].as_mut() {
            c.phase = Phase::Handler;
            c.listen = None;
        }
        let sent = self.write_message(i, |w, id, _| {
            envelope::write_error(w, id, e.code, e.message.as_bytes(), data)
        });
        if sent.is_ok() {
            self.finish(i);
            Dispatched::Written
        } else {
            Dispatched::Failed
        }
    }

    /// The call handling the request whose raw JSON id is `id` (ids
    /// compared as JSON text, without surrounding white space).
    pub(crate) fn find_by_id(&self, id: &[u8]) -> Option<usize> {
        let id = json::trim(id);
        self.calls.iter().position(|c| {
            c.as_ref().is_some_and(|c| {
                c.id_len > 0
                    && matches!(c.phase, Phase::Handler | Phase::Listening)
                    && self.store.bytes(&c.buf)[c.id_at()] == *id
            })
        })
    }

    /// Writes call `i`'s error response for a protocol answer (with the
    /// `data` MCP names for the error) at its body, with at least `spare`
    /// octets after it when the store can give them; returns the buffer
    /// from the body on and the JSON's length.
    pub(crate) fn protocol_error(
        &mut self,
        i: usize,
        e: &RpcError,
        spare: usize,
    ) -> Option<(&mut [u8], usize)> {
        let mut data_buf = [0u8; 192];
        let data = dispatch::error_data(e, self.params(i), &mut data_buf);
        let c = self.calls.get_mut(i)?.as_mut()?;
        let want = c.body + spare.saturating_mul(2);
        let _ = self.store.grow(&mut c.buf, want);
        let id_at = c.id_at();
        let bytes = self.store.bytes_mut(&mut c.buf);
        let (before, body) = bytes.split_at_mut(c.body);
        let id: &[u8] = if id_at.is_empty() {
            b"null"
        } else {
            &before[id_at]
        };
        let room = body.len().saturating_sub(spare).max(body.len() / 4);
        let mut w = JsonWriter::new(&mut body[..room]);
        envelope::write_error(&mut w, id, e.code, e.message.as_bytes(), data);
        let len = w.finish().ok().map_or(0, <[u8]>::len);
        Some((body, len))
    }

    /// The raw `params` of call `i`'s request, once dispatched.
    pub(crate) fn params(&self, i: usize) -> Option<&[u8]> {
        let c = self.calls.get(i)?.as_ref()?;
        c.params_at().map(|r| &self.store.bytes(&c.buf)[r])
    }

    // ------------------------------------------------------------------
    // Events for the application
    // ------------------------------------------------------------------

    /// The next event: calls to stop first, then calls to authorize, hand
    /// over or resume (taking the calls in turn), then the connection's end.
    pub(crate) fn poll_event(&mut self) -> Option<ServerEvent> {
        if let Some(i) = self.cancelled.iter().position(Option::is_some)
            && let Some((call, reason)) = self.cancelled[i].take()
        {
            return Some(ServerEvent::Cancelled { call, reason });
        }
        let n = self.calls.len();
        for k in 0..n {
            let i = (self.cursor + k) % n;
            let Some(c) = self.calls[i].as_mut() else {
                continue;
            };
            let Some(notice) = c.notice.take() else {
                continue;
            };
            self.cursor = i + 1;
            let call = CallId {
                index: i as u16,
                serial: c.serial,
            };
            return Some(match notice {
                Notice::Authorize => ServerEvent::Authorize { call },
                Notice::Request => {
                    c.handed = true;
                    ServerEvent::Request { call }
                }
                Notice::Writable => ServerEvent::Writable { call },
            });
        }
        self.closed
            .take()
            .map(|error| ServerEvent::ConnectionClosed { error })
    }

    /// The request of a call the application handles.
    pub(crate) fn request(&self, call: CallId) -> Option<Request<'_>> {
        let c = self.calls[self.find(call, Phase::Handler)?].as_ref()?;
        let bytes = self.store.bytes(&c.buf);
        let params = c.params_at().map_or(&b"{}"[..], |r| &bytes[r]);
        Some(Request {
            kind: c.handler?.kind(&self.registry, bytes, params, &c.index),
            id: &bytes[c.id_at()],
            params,
            meta: RequestMeta::from_index(params, &c.index).ok()?,
            index: c.index,
            headers: HeaderList::from_bytes(&bytes[..c.headers_len]),
            deadline: c.deadline,
            client_deadline: c.explicit_deadline,
            principal: c
                .principal_at()
                .and_then(|r| core::str::from_utf8(&bytes[r]).ok()),
        })
    }

    /// The bearer token of a call waiting to be authorized.
    pub(crate) fn bearer_token(&self, call: CallId) -> Option<&str> {
        let c = self.calls[self.find(call, Phase::Authorizing)?].as_ref()?;
        let bytes = self.store.bytes(&c.buf);
        auth::bearer_token(HeaderList::from_bytes(&bytes[..c.headers_len]).get(b"authorization"))
    }

    /// The application's decision on a call's credentials: `Err` with how
    /// the refused call ends (the binding sends it and removes the call),
    /// or `Ok(dispatch)`: the call goes on, and its request is complete
    /// already when `dispatch` is true.
    pub(crate) fn authorize(
        &mut self,
        call: CallId,
        decision: Decision<'_>,
    ) -> Option<Result<bool, Refusal>> {
        let had_token = self.bearer_token(call).is_some();
        let i = self.find(call, Phase::Authorizing)?;
        if let Some(refusal) = decision.refusal(had_token) {
            return Some(Err(refusal));
        }
        let c = self.calls[i].as_mut()?;
        c.phase = Phase::Body;
        if let Decision::Allow { principal } = decision
            && principal.len() <= MAX_PRINCIPAL
        {
            let start = c.headers_len + c.id_room;
            self.store.bytes_mut(&mut c.buf)[start..start + principal.len()]
                .copy_from_slice(principal.as_bytes());
            c.principal_len = Some(principal.len());
        }
        Some(Ok(c.ended))
    }

    /// Records that call `i`'s handler must stop, when the application was
    /// handed its request.
    pub(crate) fn cancel(&mut self, i: usize, reason: CancelReason) {
        let Some(call) = self.id(i) else {
            return;
        };
        let Some(c) = self.calls[i].as_ref() else {
            return;
        };
        if c.phase != Phase::Handler || !c.handed {
            return;
        }
        if self.cancelled.len() <= i && !self.cancelled.grow_to(i + 1) {
            return;
        }
        self.cancelled[i] = Some((call, reason));
    }

    /// The connection ended: every handed call is cancelled and every call
    /// removed; the application hears of the end last.
    pub(crate) fn close(&mut self, error: Option<ConnectionError>) {
        for i in 0..self.calls.len() {
            self.cancel(i, CancelReason::ConnectionClosed);
            self.remove(i);
        }
        self.closed = Some(error);
    }

    /// Ends a call's life in the engine: its buffer goes back to the store,
    /// a listen stream's room to the quota.
    pub(crate) fn remove(&mut self, i: usize) -> Option<(X, Phase)> {
        let c = self.calls.get_mut(i)?.take()?;
        if c.quota_held
            && let Some(quota) = self.listen_limits.quota
        {
            quota.release(c.principal(self.store.bytes(&c.buf)));
        }
        self.store.put(c.buf);
        Some((c.x, c.phase))
    }

    /// Admits call `i`'s listen stream under the listen limits: its
    /// request not too long, and room of the quota taken; else the error
    /// it is answered with.
    fn admit_listen(&mut self, i: usize) -> Result<(), RpcError> {
        let limits = self.listen_limits;
        let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) else {
            return Err(listen::TOO_MANY_LISTENS);
        };
        if c.params
            .is_some_and(|(a, b)| b - a > limits.max_request_bytes)
        {
            return Err(listen::REQUEST_TOO_LARGE);
        }
        if let Some(quota) = limits.quota {
            c.quota_held = quota.acquire(c.principal(self.store.bytes(&c.buf)));
            if !c.quota_held {
                return Err(listen::TOO_MANY_LISTENS);
            }
        }
        Ok(())
    }

    /// The earliest call deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.calls.iter().flatten().filter_map(|c| c.deadline).min()
    }

    /// A call whose deadline passed at `now`, cancelled for the
    /// application; the binding ends it.
    pub(crate) fn expired(&mut self, now: Instant) -> Option<usize> {
        let i = self.calls.iter().position(|c| {
            c.as_ref()
                .is_some_and(|c| c.deadline.is_some_and(|d| now >= d))
        })?;
        self.cancel(i, CancelReason::Deadline);
        if let Some(c) = self.calls[i].as_mut() {
            c.deadline = None;
        }
        Some(i)
    }

    // ------------------------------------------------------------------
    // Answers
    // ------------------------------------------------------------------

    /// Answers call `call` with `result`, and says what the binding does
    /// next. A result too large for the store is answered -32603 instead.
    pub(crate) fn respond(&mut self, call: CallId, result: &[u8]) -> (Next, Result<(), SendError>) {
        let i = match self.ready_for_output(call) {
            Ok(i) => i,
            Err(e) => return (Next::Nothing, Err(e)),
        };
        let sent = self.write_message(i, |w, id, _| {
            envelope::write_result(w, id, |w| {
                w.raw(result);
            })
        });
        match sent {
            Ok(()) => self.finish(i),
            Err(SendError::TooLarge { .. }) => {
                if self.answer_error(i, dispatch::RESULT_TOO_LARGE) == Dispatched::Failed {
                    return (Next::Drop(i), sent);
                }
            }
            Err(_) => return (Next::Nothing, sent),
        }
        (Next::Send(i), sent)
    }

    /// Answers call `call` with a JSON-RPC error (`data` raw JSON); the call
    /// whose output the binding sends now.
    pub(crate) fn respond_error(
        &mut self,
        call: CallId,
        code: i32,
        message: &str,
        data: Option<&[u8]>,
    ) -> Result<usize, SendError> {
        let i = self.ready_for_output(call)?;
        self.write_message(i, |w, id, _| {
            envelope::write_error(w, id, code, message.as_bytes(), data)
        })?;
        self.finish(i);
        Ok(i)
    }

    /// Writes a notification for call `call`'s request; the call whose
    /// output the binding sends now.
    pub(crate) fn notify(
        &mut self,
        call: CallId,
        method: &str,
        params: &[u8],
    ) -> Result<usize, SendError> {
        let i = self.ready_for_output(call)?;
        self.write_message(i, |w, _, _| {
            envelope::write_notification(w, method.as_bytes(), params)
        })?;
        Ok(i)
    }

    /// Whether a listen stream is open.
    pub(crate) fn is_listening(&self) -> bool {
        self.calls.iter().flatten().any(|c| c.listen.is_some())
    }

    /// The call the application may write to now, or why not.
    pub(crate) fn ready_for_output(&mut self, call: CallId) -> Result<usize, SendError> {
        let i = self.find(call, Phase::Handler).ok_or(SendError::Gone)?;
        let c = self.calls[i].as_mut().ok_or(SendError::Gone)?;
        if c.writing() {
            c.wants_writable = true;
            return Err(SendError::Busy);
        }
        Ok(i)
    }

    /// Writes one JSON-RPC message into call `i`'s buffer (grown to fit
    /// when the store can), framed by the binding's `F`, ready for [`Engine::output`].
    /// `body` gets the writer, the request's raw id and a listen stream's
    /// subscriptions.
    pub(crate) fn write_message<W>(&mut self, i: usize, body: W) -> Result<(), SendError>
    where
        W: Fn(&mut JsonWriter<'_>, &[u8], &[u8]),
    {
        let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) else {
            return Err(SendError::Gone);
        };
        let room = F::ROOM;
        let tail = F::TAIL.len();
        let mut want = c.body + room + tail;
        let mut tries = 0;
        let len = loop {
            if !self.store.grow(&mut c.buf, want) {
                return Err(SendError::TooLarge {
                    needed: want - c.body,
                });
            }
            let id_at = c.id_at();
            let subs_at = c
                .listen
                .map_or(0..0, |l| l.subscriptions.0..l.subscriptions.1);
            let bytes = self.store.bytes_mut(&mut c.buf);
            let (before, out) = bytes.split_at_mut(c.body);
            let (_, rest) = out.split_at_mut(room);
            let end = rest.len().saturating_sub(tail);
            let mut w = JsonWriter::new(&mut rest[..end]);
            // An id not known (the request could not be read) is null.
            let id: &[u8] = if id_at.is_empty() {
                b"null"
            } else {
                &before[id_at]
            };
            body(&mut w, id, &before[subs_at]);
            match w.finish() {
                Ok(text) => break text.len(),
                // A second overflow cannot happen with the same body; give
                // up rather than loop.
                Err(e) if tries == 0 => {
                    tries += 1;
                    want = c.body + room + e.needed + tail;
                }
                Err(e) => {
                    return Err(SendError::TooLarge {
                        needed: e.needed + room + tail,
                    });
                }
            }
        };
        let body_at = c.body;
        let bytes = self.store.bytes_mut(&mut c.buf);
        let end = body_at + room + len;
        if F::ONE_LINE {
            crate::http1::write::sse_one_line(&mut bytes[body_at + room..end]);
        }
        let start = F::frame(&mut bytes[body_at..body_at + room], len);
        bytes[end..end + tail].copy_from_slice(F::TAIL);
        c.out_pos = body_at + start;
        c.out_end = end + tail;
        c.fresh = true;
        Ok(())
    }

    /// Frames call `i`'s message, once, when it was written since the last
    /// time: `frame` gets the call's buffer, where the message and its
    /// `Framing::TAIL` lie (with `Framing::ROOM` free octets before them)
    /// and the binding's part; it returns the octets to send. For a binding
    /// whose framing depends on what comes after the message is written
    /// (HTTP/1.1: a status and a length, or an event of a stream).
    pub(crate) fn frame_fresh<G>(&mut self, i: usize, frame: G)
    where
        G: FnOnce(&mut [u8], Range<usize>, &mut X) -> Range<usize>,
    {
        let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        if !core::mem::take(&mut c.fresh) {
            return;
        }
        let at = c.out_pos..c.out_end;
        let out = frame(self.store.bytes_mut(&mut c.buf), at, &mut c.x);
        c.out_pos = out.start;
        c.out_end = out.end.max(out.start);
    }

    #[cfg(feature = "typed")]
    /// Takes call `i`'s message written since the last look (its framed
    /// octets in the buffer), for a binding that replaces it (the typed
    /// gRPC binding transcodes it). `None` when nothing new was written.
    pub(crate) fn take_fresh(&mut self, i: usize) -> Option<Range<usize>> {
        let c = self.calls.get_mut(i)?.as_mut()?;
        core::mem::take(&mut c.fresh).then_some(c.out_pos..c.out_end)
    }

    #[cfg(feature = "typed")]
    /// Sets what call `i` sends next: `at` in its buffer.
    pub(crate) fn set_output(&mut self, i: usize, at: Range<usize>) {
        if let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) {
            c.out_pos = at.start;
            c.out_end = at.end.max(at.start);
        }
    }

    #[cfg(any(feature = "typed", feature = "tunnel-http"))]
    /// Call `i`'s whole buffer, grown first to `len` octets when the store
    /// can (it may stay shorter).
    pub(crate) fn buffer(&mut self, i: usize, len: usize) -> Option<&mut [u8]> {
        let c = self.calls.get_mut(i)?.as_mut()?;
        if self.store.bytes(&c.buf).len() < len {
            let _ = self.store.grow(&mut c.buf, len.min(self.store.max_len()));
        }
        Some(self.store.bytes_mut(&mut c.buf))
    }

    #[cfg(feature = "typed")]
    /// Forgets call `i`'s JSON-RPC id: its later messages carry id null
    /// (the typed binding numbers requests itself).
    pub(crate) fn forget_id(&mut self, i: usize) {
        if let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) {
            c.id_len = 0;
        }
    }

    /// Keeps the `id` of call `i`'s invalid message at `at`, when it has a
    /// string or number one that fits: its error names the request it
    /// answers (JSON-RPC 2.0 §5.1 asks null only when the id cannot be
    /// read).
    pub(crate) fn keep_id(&mut self, i: usize, at: Range<usize>) {
        let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let bytes = self.store.bytes_mut(&mut c.buf);
        let Some(message) = bytes.get(at.clone()) else {
            return;
        };
        let Some(id) = json::get(message, b"id").filter(|id| {
            matches!(
                json::kind(id),
                Some(json::Kind::String | json::Kind::Number)
            ) && id.len() <= c.id_room
        }) else {
            return;
        };
        let span = json::span(message, id);
        let (start, end) = (at.start + span.start, at.start + span.end);
        bytes.copy_within(start..end, c.headers_len);
        c.id_len = end - start;
    }

    /// Marks forwarded call `i` as one whose caller cannot page: its
    /// handler is to answer a list whole
    /// ([`RequestKind::Forward`](super::request::RequestKind::Forward)).
    #[cfg(feature = "typed")]
    pub(crate) fn want_whole_list(&mut self, i: usize) {
        if let Some(Handler::Forward { whole_list, .. }) = self
            .calls
            .get_mut(i)
            .and_then(Option::as_mut)
            .and_then(|c| c.handler.as_mut())
        {
            *whole_list = true;
        }
    }

    /// Marks the call's answer complete.
    pub(crate) fn finish(&mut self, i: usize) {
        if let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) {
            c.phase = Phase::Finishing;
        }
    }

    /// What call `i` has left to send of its message.
    pub(crate) fn output(&self, i: usize) -> &[u8] {
        match self.calls.get(i).and_then(Option::as_ref) {
            Some(c) => &self.store.bytes(&c.buf)[c.out_pos..c.out_end],
            None => &[],
        }
    }

    /// `n` octets of call `i`'s message went out. When the whole message
    /// is out, an application told Busy hears Writable.
    pub(crate) fn sent(&mut self, i: usize, n: usize) {
        let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        c.out_pos = (c.out_pos + n).min(c.out_end);
        if !c.writing() && core::mem::take(&mut c.wants_writable) {
            c.notice = Some(Notice::Writable);
        }
    }

    /// The phase of call `i`.
    pub(crate) fn phase(&self, i: usize) -> Option<Phase> {
        self.calls.get(i)?.as_ref().map(|c| c.phase)
    }

    // ------------------------------------------------------------------
    // Listen streams
    // ------------------------------------------------------------------

    /// Announces a change to every listen stream whose filter wants it;
    /// returns how many streams it goes to. A list change for a busy
    /// stream is owed and folds into one; a resource update for a busy
    /// stream is dropped (the client reads the resource again on its next
    /// update). The binding sends the streams' output.
    pub(crate) fn publish(&mut self, change: &ListChange<'_>) -> usize {
        let bit = change_bit(change);
        let mut sent = 0;
        for i in 0..self.calls.len() {
            let Some(c) = self.calls[i].as_mut() else {
                continue;
            };
            let writing = c.writing();
            let Some(l) = c.listen.as_mut().filter(|l| !l.ending) else {
                continue;
            };
            let (a, b) = l.subscriptions;
            if !l.filter.wants(&self.store.bytes(&c.buf)[a..b], change) {
                continue;
            }
            if writing {
                l.owed |= bit;
                sent += usize::from(bit != 0);
                continue;
            }
            if self
                .write_message(i, |w, id, _| listen::write_event(w, id, change))
                .is_ok()
            {
                sent += 1;
            }
        }
        sent
    }

    /// The server goes away: every listen stream ends once it is free.
    pub(crate) fn end_listens(&mut self) {
        for c in self.calls.iter_mut().flatten() {
            if let Some(l) = c.listen.as_mut() {
                l.ending = true;
            }
        }
    }

    /// A listen stream's last message went out: the next owed change, or
    /// its final result when the server ends it.
    pub(crate) fn next_listen(&mut self, i: usize) -> ListenNext {
        let Some(l) = self
            .calls
            .get(i)
            .and_then(Option::as_ref)
            .and_then(|c| c.listen)
        else {
            return ListenNext::Idle;
        };
        let owed = [
            ListChange::ToolsListChanged,
            ListChange::PromptsListChanged,
            ListChange::ResourcesListChanged,
        ]
        .into_iter()
        .find(|change| l.owed & change_bit(change) != 0);
        if let Some(change) = owed {
            if let Some(listen) = self.calls[i].as_mut().and_then(|c| c.listen.as_mut()) {
                listen.owed &= !change_bit(&change);
            }
            return match self.write_message(i, |w, id, _| listen::write_event(w, id, &change)) {
                Ok(()) => ListenNext::Written,
                Err(_) => ListenNext::Idle,
            };
        }
        if !l.ending {
            return ListenNext::Idle;
        }
        if let Some(c) = self.calls[i].as_mut() {
            c.listen = None;
        }
        let registry = self.registry;
        match self.write_message(i, |w, id, _| listen::write_final_result(w, id, &registry)) {
            Ok(()) => {
                self.finish(i);
                ListenNext::Final
            }
            Err(_) => ListenNext::Failed,
        }
    }
}

/// The owed-change bit of a list change (none for a resource update).
fn change_bit(change: &ListChange<'_>) -> u8 {
    match change {
        ListChange::ToolsListChanged => 1,
        ListChange::PromptsListChanged => 2,
        ListChange::ResourcesListChanged => 4,
        ListChange::ResourceUpdated { .. } => 0,
    }
}
