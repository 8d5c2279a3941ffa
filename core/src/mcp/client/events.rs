//! What the application learns about its calls: small owned events
//! ([`ClientEvent`], `Copy`, no lifetime) that name a call, and the texts
//! they stand for, borrowed from the client through its accessors
//! ([`Client::message`](super::Client::message),
//! [`Client::failure`](super::Client::failure),
//! [`Client::warning_tool`](super::Client::warning_tool)) until its next
//! `&mut` call. The queue of notifications and warnings lives here too.

use super::State;
use super::cache::WARN_NAME;
use super::calls::{Kind, Slot, bytes, outcome_bytes, outcome_member, release};
use crate::grpc::Code;
use crate::h2::ConnectionError;
use crate::mcp::error::{INTERNAL_ERROR, RpcError};
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::records::Records;

/// Queued notifications and warnings.
const QUEUE: usize = 32;

/// A call of the client; dead after its [`ClientEvent::Ended`] or
/// [`Client::cancel`](super::Client::cancel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallId {
    pub(super) index: u16,
    pub(super) generation: u16,
    /// Which of an engine's connections carries the call (an engine that
    /// keeps one connection leaves it 0).
    pub(super) link: u16,
}

/// Why [`Client::call`](super::Client::call) sent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    /// The request cannot be sent as it is (-32600: not a request, an
    /// annotated integer outside ±(2^53−1), metadata too large...): the
    /// JSON-RPC error the application gets on any transport.
    Invalid(RpcError),
    /// Every call slot is taken, or the call store has no free buffer;
    /// retry after an `Ended`.
    Busy,
    /// The framed request needs `needed` octets: more than the message
    /// limit or the call store's largest buffer.
    TooLarge { needed: usize },
    /// The connection is over.
    Closed,
    /// The engine cannot reach its server for now (its link could not be
    /// opened, or its handshake failed): the engine's
    /// [`down_reason`](super::ClientEngine::down_reason) says why.
    Down,
    /// A limit of the client refuses the call (the binding's
    /// `RESOURCE_EXHAUSTED`), for the reason given.
    Exhausted(&'static str),
}

/// What the server sent that an engine dropped, for the driver's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// A line of `len` octets, over the line limit.
    LineTooLong { len: usize },
    /// A line that is not a JSON-RPC message (`json`: it is JSON).
    BadLine { json: bool },
    /// A message no call waits for.
    Unmatched,
}

/// What a client reports about a call besides the JSON-RPC error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Diagnostics {
    /// The HTTP status of the response, also when the call failed; 401 and
    /// 403 for the trailers UNAUTHENTICATED and PERMISSION_DENIED.
    pub http_status: Option<u16>,
    /// The call's `grpc-status`, when trailers came.
    pub grpc_status: Option<Code>,
    /// The failure is the transport's (deadline, reset, connection, auth),
    /// not a JSON-RPC error of the server; the error was synthesized from
    /// the status.
    pub transport: bool,
    /// The server did not process the call: REFUSED_STREAM before a
    /// response (a stream above a GOAWAY's last stream id gets one), or
    /// the connection went away before the request head went out.
    pub refused: bool,
    /// A stream of the call was refused and the client sent the call once
    /// more on a new stream of this connection: its one retry is used.
    /// `refused` without `retried` means the connection could not take
    /// the retry (it is going away); a driver may send the call once on a
    /// new connection.
    pub retried: bool,
    /// Streamable HTTP: the call's last exchange went over HTTP/2 (else
    /// HTTP/1.1, once `http_status` is known).
    pub http2: bool,
    /// A `tools/call` refused with -32020 for its headers: `tools/list`
    /// was read again and the call sent once more.
    pub relisted: bool,
    /// Streamable HTTP: the answer of the call's last exchange is an
    /// event stream (`text/event-stream`), else a JSON body or none.
    pub event_stream: bool,
}

impl Diagnostics {
    /// The call never reached the server and its connection could not
    /// send it again (it was going away): a driver may hand it once to
    /// the engine's next connection. A call already sent twice is not.
    pub const fn retry_elsewhere(&self) -> bool {
        self.refused && !self.retried
    }
}

/// The JSON-RPC error of a failed call, borrowed from the client.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    pub code: i32,
    /// The raw JSON string of `error.message`.
    pub message: &'a [u8],
    /// The raw JSON of `error.data`, when present.
    pub data: Option<&'a [u8]>,
    /// The whole JSON-RPC error response, with the request's id.
    pub response: &'a [u8],
    pub diagnostics: Diagnostics,
    /// The response's `www-authenticate` (headers or trailers), when one
    /// came and fits in 256 octets.
    pub www_authenticate: Option<&'a [u8]>,
}

/// Something the application learns about its calls. The texts are read
/// with the client's accessors, until its next `&mut` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientEvent {
    /// A notification on the call's stream: its text is
    /// [`Client::message`](super::Client::message).
    Notification { call: CallId },
    /// The call's response with a `result`:
    /// [`Client::message`](super::Client::message), until `Ended`.
    Response { call: CallId },
    /// The call failed with a JSON-RPC error:
    /// [`Client::failure`](super::Client::failure) (and the error response
    /// as [`Client::message`](super::Client::message)), until `Ended`.
    Failed { call: CallId },
    /// The call's server asks for input (MCP 2026-07-28 §9: a result
    /// with `resultType: "input_required"`, to a call started with
    /// [`CallOptions::answers_input`](super::CallOptions::answers_input)):
    /// what it asks is [`ClientEngine::input_requests`](super::ClientEngine::input_requests)
    /// (the whole result [`Client::result`](super::Client::result)); the
    /// call stays open until the application answers
    /// ([`ClientEngine::answer_input`](super::ClientEngine::answer_input)),
    /// then goes on: more notifications, another `InputRequired`, its
    /// `Response` or `Failed` on the same call. Its deadline keeps running
    /// meanwhile.
    InputRequired { call: CallId },
    /// The call is over: the last event of every call.
    Ended { call: CallId },
    /// A tool left out of a `tools/list` result (invalid `x-mcp-header`
    /// annotations), or one whose annotations the cache had no room for;
    /// the tool's name is
    /// [`Client::warning_tool`](super::Client::warning_tool).
    Warning { call: CallId, reason: &'static str },
    /// Open `link` (connect to the server, start its process), then tell
    /// the engine with `link_up`, or `link_failed`
    /// ([`ClientEngine`](super::ClientEngine)).
    Connect { link: super::LinkId },
    /// Close `link` once what it has to send is written: the engine is
    /// done with it.
    Disconnect { link: super::LinkId },
    /// The engine's handshake is over (the era chosen): calls start at
    /// once from here on.
    Ready,
    /// The engine cannot reach its server, for now or for good: calls are
    /// refused ([`StartError::Down`]) and
    /// [`down_reason`](super::ClientEngine::down_reason) says why.
    Down,
    /// Something the operator should know (a server restarted, restarts
    /// paused): the engine's [`note_text`](super::ClientEngine::note_text),
    /// a line for a log.
    Note,
    /// The engine dropped something the server sent; the engine's
    /// [`skipped_text`](super::ClientEngine::skipped_text) has its first
    /// octets.
    Skipped { what: Skipped },
    /// The connection is over (the engine: closed for good); calls in
    /// progress failed before this.
    ConnectionClosed { error: Option<ConnectionError> },
}

/// A notification or warning waiting to be handed out.
#[derive(Debug, Clone, Copy)]
pub(super) enum Queued {
    Notification {
        call: CallId,
        at: (usize, usize),
    },
    Warning {
        call: CallId,
        name: [u8; WARN_NAME],
        len: u8,
        reason: &'static str,
    },
}

/// The queue of [`Queued`] items, oldest first.
pub(super) struct Queue {
    items: [Option<Queued>; QUEUE],
    head: usize,
    len: usize,
}

impl Queue {
    pub(super) const fn new() -> Self {
        Self {
            items: [None; QUEUE],
            head: 0,
            len: 0,
        }
    }

    pub(super) fn push(&mut self, q: Queued) {
        if self.len == QUEUE {
            // Only notifications and warnings queue, at most what one
            // `recv` chunk carries: drop the newest.
            return;
        }
        self.items[(self.head + self.len) % QUEUE] = Some(q);
        self.len += 1;
    }

    pub(super) fn pop(&mut self) -> Option<Queued> {
        if self.len == 0 {
            return None;
        }
        let q = self.items[self.head].take();
        self.head = (self.head + 1) % QUEUE;
        self.len -= 1;
        q
    }

    pub(super) fn clear(&mut self) {
        while self.pop().is_some() {}
    }
}

impl<S: CallStore, R: Records<Slot<S::Buf>>, const CACHE: usize> State<S, R, CACHE> {
    pub(super) fn call_id(&self, i: usize) -> CallId {
        CallId {
            index: i as u16,
            generation: self.slots.get(i).map_or(0, |s| s.generation),
            link: 0,
        }
    }

    /// The next event. Each is built from state the client keeps until it
    /// is read, so none is lost on the way out.
    pub(super) fn poll_event(&mut self) -> Option<ClientEvent> {
        self.lent = None;
        while let Some(q) = self.queue.pop() {
            match q {
                Queued::Notification { call, .. } => {
                    // A cancelled call's notifications go nowhere.
                    if self.slot_of(call).is_some() {
                        self.lent = Some(q);
                        return Some(ClientEvent::Notification { call });
                    }
                }
                Queued::Warning { call, reason, .. } => {
                    self.lent = Some(q);
                    return Some(ClientEvent::Warning { call, reason });
                }
            }
        }
        for i in 0..self.slots.len() {
            let call = self.call_id(i);
            let Some(t) = self.slots[i]
                .active
                .as_mut()
                .and_then(|a| a.terminal.as_mut())
            else {
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
                release(&mut self.store, &mut self.slots[i]);
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
        if let Some(error) = self.closed
            && !self.closed_told
        {
            self.closed_told = true;
            return Some(ClientEvent::ConnectionClosed { error });
        }
        None
    }

    /// The text of the last `Notification` of `call`, else its outcome's
    /// (response or error response) once handed out.
    pub(super) fn message(&self, call: CallId) -> Option<&[u8]> {
        let i = self.slot_of(call)?;
        let slot = &self.slots[i];
        if let Some(Queued::Notification { call: c, at }) = self.lent
            && c == call
        {
            return bytes(&self.store, &slot.rx).get(at.0..at.1);
        }
        let t = slot.active.as_ref()?.terminal.as_ref()?;
        if !t.delivered || t.kind == Kind::Nothing {
            return None;
        }
        outcome_bytes(&self.store, slot, t.in_req).get(t.at.0..t.at.1)
    }

    /// The `result` member of `call`'s response, once its `Response` (or
    /// its `InputRequired`) was handed out (a tunnel call's as its arrival
    /// found it).
    pub(super) fn result(&self, call: CallId) -> Option<&[u8]> {
        let i = self.slot_of(call)?;
        let slot = &self.slots[i];
        if matches!(self.lent, Some(Queued::Notification { call: c, .. }) if c == call) {
            return None;
        }
        let a = slot.active.as_ref()?;
        let t = a.terminal.as_ref()?;
        if !t.delivered || !matches!(t.kind, Kind::Response | Kind::InputRequired) {
            return None;
        }
        let text = outcome_bytes(&self.store, slot, t.in_req);
        outcome_member(a, text, t.in_req, t.at, a.response_result, b"result")
    }

    /// The `inputRequests` of `call`'s `input_required` result, once its
    /// `InputRequired` was handed out and until it is answered.
    pub(super) fn input_requests(&self, call: CallId) -> Option<&[u8]> {
        let i = self.slot_of(call)?;
        if !self.slots[i]
            .active
            .as_ref()
            .is_some_and(super::calls::waits_for_input)
        {
            return None;
        }
        super::input::requests_of(self.result(call)?)
    }

    /// The failure of `call`, once its `Failed` was handed out.
    pub(super) fn failure(&self, call: CallId) -> Option<Failure<'_>> {
        let i = self.slot_of(call)?;
        let a = self.slots[i].active.as_ref()?;
        let t = a.terminal.as_ref()?;
        if !t.delivered || t.kind != Kind::Failed {
            return None;
        }
        let response = outcome_bytes(&self.store, &self.slots[i], t.in_req)
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
            www_authenticate: a.auth.1.and_then(|n| a.auth.0.get(..usize::from(n))),
        })
    }

    /// The tool named by the last `Warning` of `call`.
    pub(super) fn warning_tool(&self, call: CallId) -> Option<&[u8]> {
        match &self.lent {
            Some(Queued::Warning {
                call: c, name, len, ..
            }) if *c == call => name.get(..usize::from(*len)),
            _ => None,
        }
    }
}
