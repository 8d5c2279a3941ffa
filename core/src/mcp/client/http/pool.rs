//! The HTTP/1.1 links of the Streamable HTTP client engine (RFC 9112,
//! MCP 2026-07-28 §5.1–§5.2, §5.7): each a [`ClientConnection`] carrying
//! one exchange at a time, kept alive for the next. A link is asked for
//! (`Connect`), idle, busy with a call's exchange, draining the rest of
//! an answer already judged, or let go (`Disconnect`).
//!
//! The answer's octets go to the call's judge as they come. When a
//! notification stops the judge mid-body, `recv` returns at once (the
//! notification is read before the next `recv`): the connection has
//! already framed the rest of that body, so the link remembers how many
//! of the octets fed again are body octets to judge and how many are
//! framing to skip ([`Replay`]).

use super::call::{Fed, Own, Place};
use super::engine::HttpClient;
use crate::grpc::Code;
use crate::h2::Storage;
use crate::http1::head::EMPTY_HEADER;
use crate::http1::{ClientConnection, MAX_HEADERS, MediaType, ResponseEvent};
use crate::mcp::client::engine::LinkId;
use crate::mcp::client::events::ClientEvent;
use crate::mcp::store::CallStore;
use crate::time::Instant;

/// Where a link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LinkState {
    /// No link.
    Free,
    /// `Connect` is owed to the driver.
    Connect,
    /// Asked for; waiting for `link_up`.
    Connecting,
    /// Up, no exchange.
    Idle,
    /// Carrying the exchange of the call in slot `slot`.
    Busy { slot: usize, generation: u16 },
    /// Reading the rest of an answer already judged, until `until`.
    Draining { until: Instant },
    /// `Disconnect` is owed to the driver.
    Disconnect,
}

/// Octets of a call's body that the connection framed already and the
/// driver feeds again: `body` to judge, then `skip` of framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Replay {
    pub(super) slot: usize,
    pub(super) generation: u16,
    pub(super) body: usize,
    pub(super) skip: usize,
    /// The answer ended with these octets (HTTP/2's END_STREAM).
    pub(super) end: bool,
}

/// One HTTP/1.1 link.
#[derive(Debug)]
pub(super) struct Link<const HEAD: usize> {
    pub(super) id: LinkId,
    pub(super) state: LinkState,
    pub(super) conn: ClientConnection<HEAD>,
    /// It carried an exchange before: a kept-alive link the server may
    /// have closed meanwhile.
    pub(super) reused: bool,
    pub(super) replay: Option<Replay>,
}

impl<const HEAD: usize> Link<HEAD> {
    pub(super) fn new() -> Self {
        Self {
            id: LinkId(u32::MAX),
            state: LinkState::Free,
            conn: ClientConnection::new(),
            reused: false,
            replay: None,
        }
    }

    /// Asks for a new link named `id`.
    pub(super) fn open(&mut self, id: LinkId) {
        self.id = id;
        self.state = LinkState::Connect;
        self.reused = false;
        self.replay = None;
        self.conn = ClientConnection::new();
    }

    /// Whether octets of this link are read.
    pub(super) fn is_open(&self) -> bool {
        matches!(
            self.state,
            LinkState::Idle | LinkState::Busy { .. } | LinkState::Draining { .. }
        )
    }

    /// Lets the link go: the driver closes it.
    pub(super) fn close(&mut self) {
        self.state = match self.state {
            LinkState::Free | LinkState::Connect => LinkState::Free,
            _ => LinkState::Disconnect,
        };
        self.replay = None;
    }

    /// The link event owed to the driver, if any.
    pub(super) fn owed_event(&mut self) -> Option<ClientEvent> {
        match self.state {
            LinkState::Connect => {
                self.state = LinkState::Connecting;
                Some(ClientEvent::Connect { link: self.id })
            }
            LinkState::Disconnect => {
                self.state = LinkState::Free;
                Some(ClientEvent::Disconnect { link: self.id })
            }
            _ => None,
        }
    }
}

impl<
    S: CallStore,
    const CALLS: usize,
    const LINKS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
    const HEAD: usize,
> HttpClient<S, CALLS, LINKS, TABLE, BUF, B, CACHE, HEAD>
{
    /// The call whose exchange link `li` carries, when it still does.
    fn link_call(&self, li: usize) -> Option<usize> {
        let LinkState::Busy { slot, generation } = self.pool.get(li)?.state else {
            return None;
        };
        let s = self.calls.slots.get(slot)?;
        (s.generation == generation && s.call.as_ref().is_some_and(|c| c.place == Place::Link(li)))
            .then_some(slot)
    }

    /// Octets read from link `li`; how many were taken.
    pub(super) fn recv_link(&mut self, li: usize, input: &[u8]) -> usize {
        let mut pos = 0;
        if let Some(mut r) = self.pool[li].replay.take() {
            let body = r.body.min(input.len());
            let live = self.calls.slots.get(r.slot).is_some_and(|s| {
                s.generation == r.generation
                    && s.call.as_ref().is_some_and(|c| c.place == Place::Link(li))
            });
            let mut used = body;
            let mut stopped = false;
            if live && let Fed::Note(n) = self.feed_link(r.slot, &input[..body]) {
                used = n;
                stopped = true;
            }
            r.body -= used;
            pos = used;
            if stopped || r.body > 0 {
                self.pool[li].replay = Some(r);
                return pos;
            }
            let skip = r.skip.min(input.len() - pos);
            pos += skip;
            r.skip -= skip;
            if r.skip > 0 {
                self.pool[li].replay = Some(r);
                return pos;
            }
            self.settle_links();
        }
        loop {
            if !self.pool[li].is_open() {
                // Let go meanwhile: the rest is dropped.
                return input.len();
            }
            let rest = input.get(pos..).unwrap_or_default();
            let r = self.pool[li].conn.recv(rest);
            let Some(event) = r.event else {
                pos += r.consumed;
                if r.consumed == 0 || pos >= input.len() {
                    return pos;
                }
                continue;
            };
            let call = self.link_call(li);
            if let Some(i) = call
                && let Some(c) = self.calls.call_mut(i)
            {
                c.got = true;
            }
            match event {
                ResponseEvent::Head { status } => {
                    if let Some(i) = call {
                        let mut fields = [EMPTY_HEADER; MAX_HEADERS];
                        let link = &self.pool[li];
                        let (media, auth, session) = match link.conn.head(&mut fields) {
                            Some(h) => (
                                h.header(b"content-type"),
                                h.header(b"www-authenticate"),
                                h.header(b"mcp-session-id"),
                            ),
                            None => (None, None, None),
                        };
                        let own = self.calls.call(i).and_then(|c| c.own);
                        if own == Some(Own::Initialize) {
                            self.era.set_session(session);
                        }
                        if own == Some(Own::Events) {
                            self.events_head(i, status, MediaType::of(media));
                        } else if let Some(j) = self.calls.on_head(i, status, media, auth) {
                            self.judge(i, j);
                        }
                    }
                }
                ResponseEvent::Data(range) => {
                    if let Some(i) = call {
                        let start = pos + range.start;
                        let end = pos + range.end;
                        let data = input.get(start..end).unwrap_or_default();
                        if let Fed::Note(n) = self.feed_link(i, data) {
                            let generation = self.calls.call_id(i).generation;
                            self.pool[li].replay = Some(Replay {
                                slot: i,
                                generation,
                                body: data.len() - n,
                                skip: (pos + r.consumed).saturating_sub(end),
                                end: false,
                            });
                            return start + n;
                        }
                    }
                }
                ResponseEvent::End { keep_alive } => {
                    if let Some(i) = call.filter(|&i| self.is_events(i)) {
                        self.calls.fail_transport(
                            i,
                            Code::Unavailable,
                            b"the 2024 event stream ended",
                            None,
                        );
                    } else if let Some(i) = call
                        && let Some(j) = self.calls.on_end(i)
                    {
                        self.judge(i, j);
                    }
                    self.exchange_over(li, keep_alive);
                }
                ResponseEvent::Failed(e) => {
                    if let Some(i) = call {
                        self.broken(li, i, e.reason().as_bytes());
                    }
                    self.pool[li].close();
                }
            }
            pos += r.consumed;
            self.settle_links();
        }
    }

    /// Body octets of call `i`'s answer on a link: judged, or read as the
    /// 2024 shape's event stream.
    fn feed_link(&mut self, i: usize, data: &[u8]) -> Fed {
        if self.is_events(i) {
            return self.events_data(i, data);
        }
        let (fed, judgement) = self.calls.on_body(i, data);
        if let Some(j) = judgement {
            self.judge(i, j);
        }
        fed
    }

    /// The exchange of link `li` is over: the link serves the next one,
    /// or goes.
    fn exchange_over(&mut self, li: usize, keep_alive: bool) {
        let link = &mut self.pool[li];
        link.replay = None;
        if keep_alive && !self.closing {
            link.state = LinkState::Idle;
            link.reused = true;
        } else {
            link.close();
        }
    }

    /// Call `i`'s exchange on link `li` broke off (`why`): sent once more
    /// on a new link when the link was a kept-alive one and no octet of
    /// the answer came (the server had closed it); failed otherwise.
    fn broken(&mut self, li: usize, i: usize, why: &[u8]) {
        let reused = self.pool[li].reused;
        let Some(c) = self.calls.call_mut(i) else {
            return;
        };
        if c.terminal.is_some() {
            return;
        }
        if reused && !c.got && !c.resent {
            c.resent = true;
            c.diagnostics.retried = true;
            let mode = c.mode;
            self.calls.requeue(i, mode, true);
            return;
        }
        self.calls.fail_transport(i, Code::Unavailable, why, None);
    }

    /// Link `li` reached the end of its input.
    pub(super) fn eof_link(&mut self, li: usize) {
        let call = self.link_call(li);
        let ended = self.pool[li].conn.recv_eof();
        if let Some(i) = call {
            match ended {
                Some(ResponseEvent::End { .. }) => {
                    if let Some(j) = self.calls.on_end(i) {
                        self.judge(i, j);
                    }
                }
                _ => self.broken(
                    li,
                    i,
                    b"the server closed the connection before the response",
                ),
            }
        }
        self.pool[li].close();
    }

    /// Writes what link `li` has to send.
    pub(super) fn transmit_link(&mut self, li: usize, out: &mut [u8]) -> usize {
        let Some(i) = self.link_call(li) else {
            return 0;
        };
        let slot = &mut self.calls.slots[i];
        let Some(c) = slot.call.as_mut() else {
            return 0;
        };
        let from = c.wire.0 + c.sent;
        let bytes = crate::mcp::client::calls::bytes(&self.calls.store, &slot.req);
        let src = bytes.get(from..c.wire.1).unwrap_or_default();
        let n = src.len().min(out.len());
        out[..n].copy_from_slice(&src[..n]);
        c.sent += n;
        n
    }
}
