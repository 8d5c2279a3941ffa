//! The gRPC tunnel's [`ClientEngine`]: a client of one server over as many
//! HTTP/2 connections, one after the other, as it takes. Each connection
//! is a [`Client`] (every rule of the binding lives there); this engine
//! asks for the first one at the first call, and for a new one when the
//! last went away (GOAWAY, an error, a link that failed) and a call
//! needs one. A connection told GOAWAY keeps its calls to their end while
//! new calls go on the next one (at most two at a time: a third waits,
//! [`StartError::Busy`]). What a connection learned (the schemas of the
//! tools with `x-mcp-header` annotations) and the metadata set with
//! [`TunnelClient::set_metadata`] go on to the next.
//!
//! A call names its connection ([`CallId`] carries the link), so the two
//! connections' calls never mix.

use super::engine::{CallOptions, ClientEngine, LinkId, Negotiated};
use super::events::{CallId, ClientEvent, Failure, StartError};
use super::{Client, ClientConfig};
use crate::grpc::Code;
use crate::h2::{InlineStorage, Storage};
use crate::mcp::store::CallStore;
use crate::time::Instant;

/// One connection of the engine and its link.
struct Conn<C> {
    link: LinkId,
    up: bool,
    client: C,
}

/// Link events owed to the driver, oldest first.
const OWED: usize = 4;

/// The tunnel's client engine; the generic parameters are those of its
/// connections' [`Client`]. The store `S` is cloned for each connection
/// (a tokio driver's heap store is a copy of its limits; a device with a
/// fixed store drives one [`Client`] itself).
pub struct TunnelClient<
    S: CallStore + Clone,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> = InlineStorage<BUF>,
    const CACHE: usize = 2048,
> {
    config: ClientConfig,
    store: S,
    current: Option<Conn<Client<S, CALLS, TABLE, BUF, B, CACHE>>>,
    /// A connection told GOAWAY (or over) whose calls still run.
    draining: Option<Conn<Client<S, CALLS, TABLE, BUF, B, CACHE>>>,
    next_link: u32,
    owed: [Option<ClientEvent>; OWED],
    /// Which connection's events `poll_event` takes next (the other's
    /// then), so that neither starves.
    turn: bool,
    closing: bool,
    closed_told: bool,
}

impl<
    S: CallStore + Clone,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF>,
    const CACHE: usize,
> core::fmt::Debug for TunnelClient<S, CALLS, TABLE, BUF, B, CACHE>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TunnelClient")
            .field("current", &self.current.as_ref().map(|c| c.link))
            .field("draining", &self.draining.as_ref().map(|c| c.link))
            .field("closing", &self.closing)
            .finish_non_exhaustive()
    }
}

impl<
    S: CallStore + Clone,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
> TunnelClient<S, CALLS, TABLE, BUF, B, CACHE>
{
    /// An engine with no connection yet: the first call asks for one.
    pub fn new(config: ClientConfig, store: S) -> Self {
        Self {
            config,
            store,
            current: None,
            draining: None,
            next_link: 0,
            owed: [None; OWED],
            turn: false,
            closing: false,
            closed_told: false,
        }
    }

    /// The connection calls start on now, if there is one.
    pub fn client(&self) -> Option<&Client<S, CALLS, TABLE, BUF, B, CACHE>> {
        self.current.as_ref().map(|c| &c.client)
    }

    /// Sets `:authority` and the metadata of every later call, on this
    /// connection and the next ones (see [`Client::set_metadata`]); `false`
    /// when they do not fit. Without a connection yet, the next one takes
    /// them.
    pub fn set_metadata(
        &mut self,
        authority: Option<&str>,
        metadata: &[(&str, &str)],
        now: Instant,
    ) -> bool {
        let conn = self.ensure_connection(now);
        conn.client.set_metadata(authority, metadata)
    }

    fn owe(&mut self, event: ClientEvent) {
        if let Some(free) = self.owed.iter_mut().find(|e| e.is_none()) {
            *free = Some(event);
        }
    }

    fn take_owed(&mut self) -> Option<ClientEvent> {
        let first = self.owed.first_mut()?.take()?;
        self.owed.rotate_left(1);
        Some(first)
    }

    /// The connection calls start on, made (and asked for) when there is
    /// none.
    fn ensure_connection(
        &mut self,
        now: Instant,
    ) -> &mut Conn<Client<S, CALLS, TABLE, BUF, B, CACHE>> {
        self.retire();
        let conn = match self.current.take() {
            Some(c) => c,
            None => self.new_connection(now),
        };
        self.current.insert(conn)
    }

    /// A new connection, asked of the driver, with what the last one
    /// learned and was told.
    fn new_connection(&mut self, now: Instant) -> Conn<Client<S, CALLS, TABLE, BUF, B, CACHE>> {
        let link = LinkId(self.next_link);
        self.next_link = self.next_link.wrapping_add(1);
        let mut client = Client::new(self.config, self.store.clone(), now);
        if let Some(last) = self.draining.as_ref() {
            for (tool, schema) in last.client.cached_schemas() {
                client.learn_schema(tool, schema);
            }
            client.copy_metadata(&last.client);
        }
        self.owe(ClientEvent::Connect { link });
        Conn {
            link,
            up: false,
            client,
        }
    }

    /// Moves a connection that takes no more calls out of the way: to
    /// `draining` while its calls run, dropped (and its link closed) once
    /// they ended and their events were read.
    fn retire(&mut self) {
        // Its last frames (a GOAWAY) go out first.
        if let Some(d) = self.draining.as_ref()
            && !d.client.has_calls()
            && !(d.up && crate::drive::Endpoint::wants_transmit(&d.client))
        {
            let link = d.link;
            self.draining = None;
            self.owe(ClientEvent::Disconnect { link });
        }
        let Some(c) = self.current.as_ref() else {
            return;
        };
        if c.client.accepts_calls() {
            return;
        }
        if self.draining.is_none() {
            self.draining = self.current.take();
            // Its calls may all be over already.
            self.retire();
        }
    }

    /// The connection of `link`.
    fn conn_mut(
        &mut self,
        link: LinkId,
    ) -> Option<&mut Conn<Client<S, CALLS, TABLE, BUF, B, CACHE>>> {
        [self.current.as_mut(), self.draining.as_mut()]
            .into_iter()
            .flatten()
            .find(|c| c.link == link)
    }

    fn conn_of(&self, call: CallId) -> Option<&Client<S, CALLS, TABLE, BUF, B, CACHE>> {
        [self.current.as_ref(), self.draining.as_ref()]
            .into_iter()
            .flatten()
            .find(|c| link_tag(c.link) == call.link)
            .map(|c| &c.client)
    }
}

/// The link's mark on its calls' ids (link numbers are unique among the
/// two connections an engine keeps at once).
fn link_tag(link: LinkId) -> u16 {
    (link.0 & 0xffff) as u16
}

fn tagged(event: ClientEvent, link: LinkId) -> ClientEvent {
    let tag = |mut call: CallId| {
        call.link = link_tag(link);
        call
    };
    match event {
        ClientEvent::Notification { call } => ClientEvent::Notification { call: tag(call) },
        ClientEvent::Response { call } => ClientEvent::Response { call: tag(call) },
        ClientEvent::Failed { call } => ClientEvent::Failed { call: tag(call) },
        ClientEvent::Ended { call } => ClientEvent::Ended { call: tag(call) },
        ClientEvent::InputRequired { call } => ClientEvent::InputRequired { call: tag(call) },
        ClientEvent::Warning { call, reason } => ClientEvent::Warning {
            call: tag(call),
            reason,
        },
        other => other,
    }
}

fn untagged(mut call: CallId) -> CallId {
    call.link = 0;
    call
}

impl<
    S: CallStore + Clone,
    const CALLS: usize,
    const TABLE: usize,
    const BUF: usize,
    B: Storage<BUF> + Default,
    const CACHE: usize,
> ClientEngine for TunnelClient<S, CALLS, TABLE, BUF, B, CACHE>
{
    fn start(
        &mut self,
        message: &[u8],
        options: CallOptions,
        now: Instant,
    ) -> Result<CallId, StartError> {
        if self.closing {
            return Err(StartError::Closed);
        }
        // A third connection waits for the one draining.
        self.retire();
        if self
            .current
            .as_ref()
            .is_some_and(|c| !c.client.accepts_calls())
        {
            return Err(StartError::Busy);
        }
        let conn = self.ensure_connection(now);
        let started = conn.client.call_with(message, options, now);
        let link = conn.link;
        started.map(|mut call| {
            call.link = link_tag(link);
            call
        })
    }

    fn cancel(&mut self, call: CallId, _now: Instant) -> bool {
        let inner = untagged(call);
        let found = [self.current.as_mut(), self.draining.as_mut()]
            .into_iter()
            .flatten()
            .find(|c| link_tag(c.link) == call.link);
        found.is_some_and(|c| c.client.cancel(inner))
    }

    fn poll_event(&mut self) -> Option<ClientEvent> {
        if let Some(e) = self.take_owed() {
            return Some(e);
        }
        self.turn = !self.turn;
        for first in [self.turn, !self.turn] {
            let conn = if first {
                self.current.as_mut()
            } else {
                self.draining.as_mut()
            };
            let Some(c) = conn else {
                continue;
            };
            match c.client.poll_event() {
                // The connection's end is this link's: the engine goes on.
                Some(ClientEvent::ConnectionClosed { .. }) => {}
                Some(e) => return Some(tagged(e, c.link)),
                None => {}
            }
        }
        self.retire();
        if let Some(e) = self.take_owed() {
            return Some(e);
        }
        if self.closing && self.current.is_none() && self.draining.is_none() && !self.closed_told {
            self.closed_told = true;
            return Some(ClientEvent::ConnectionClosed { error: None });
        }
        None
    }

    fn message(&self, call: CallId) -> Option<&[u8]> {
        self.conn_of(call)?.message(untagged(call))
    }

    fn result(&self, call: CallId) -> Option<&[u8]> {
        self.conn_of(call)?.result(untagged(call))
    }

    fn failure(&self, call: CallId) -> Option<Failure<'_>> {
        self.conn_of(call)?.failure(untagged(call))
    }

    fn warning_tool(&self, call: CallId) -> Option<&[u8]> {
        self.conn_of(call)?.warning_tool(untagged(call))
    }

    fn input_requests(&self, call: CallId) -> Option<&[u8]> {
        self.conn_of(call)?.input_requests(untagged(call))
    }

    /// The next round goes on the call's connection: one that went away
    /// meanwhile fails the call as refused (a driver may start it anew,
    /// on the next connection).
    fn answer_input(
        &mut self,
        call: CallId,
        responses: &[u8],
        now: Instant,
    ) -> Result<(), StartError> {
        let found = [self.current.as_mut(), self.draining.as_mut()]
            .into_iter()
            .flatten()
            .find(|c| link_tag(c.link) == call.link);
        match found {
            Some(c) => c.client.answer_input(untagged(call), responses, now),
            None => Err(StartError::Invalid(super::input::NOT_WAITING)),
        }
    }

    fn link_up(&mut self, link: LinkId, negotiated: Negotiated, _now: Instant) {
        let Some(c) = self.conn_mut(link) else {
            return;
        };
        if negotiated == Negotiated::Http1 {
            // The binding needs HTTP/2 (TLS with ALPN h2).
            c.client.fail_calls(
                Code::Unavailable,
                b"the server chose ALPN http/1.1: the gRPC tunnel needs h2",
                true,
            );
            return;
        }
        c.up = true;
    }

    fn link_failed(&mut self, link: LinkId, reason: &[u8], _now: Instant) {
        if let Some(c) = self.conn_mut(link) {
            let unsent = !c.up;
            c.client.fail_calls(Code::Unavailable, reason, unsent);
        }
    }

    fn recv(&mut self, link: LinkId, input: &[u8], now: Instant) -> usize {
        match self.conn_mut(link) {
            Some(c) => c.client.recv(input, now),
            // Octets of a link the engine let go: dropped.
            None => input.len(),
        }
    }

    fn recv_eof(&mut self, link: LinkId, _now: Instant) {
        if let Some(c) = self.conn_mut(link) {
            c.client.recv_eof();
        }
    }

    fn wants_transmit(&self, link: LinkId) -> bool {
        [self.current.as_ref(), self.draining.as_ref()]
            .into_iter()
            .flatten()
            .find(|c| c.link == link)
            .is_some_and(|c| c.up && crate::drive::Endpoint::wants_transmit(&c.client))
    }

    fn poll_transmit(&mut self, link: LinkId, out: &mut [u8]) -> usize {
        match self.conn_mut(link) {
            Some(c) if c.up => c.client.poll_transmit(out),
            _ => 0,
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [self.current.as_ref(), self.draining.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|c| c.client.poll_timeout())
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        for c in [self.current.as_mut(), self.draining.as_mut()]
            .into_iter()
            .flatten()
        {
            c.client.handle_timeout(now);
        }
    }

    fn close(&mut self, _now: Instant) {
        self.closing = true;
        for c in [self.current.as_mut(), self.draining.as_mut()]
            .into_iter()
            .flatten()
        {
            if c.up {
                // Listen streams would hold the connection open for ever.
                c.client.end_listens(b"the client closed");
                c.client.go_away();
            } else {
                c.client.fail_calls(
                    Code::Unavailable,
                    b"the client closed before connecting",
                    true,
                );
            }
        }
    }

    fn is_closed(&self) -> bool {
        self.closed_told
    }

    fn cached_schema(&self, tool: &[u8]) -> Option<&[u8]> {
        [self.current.as_ref(), self.draining.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|c| c.client.cached_schema(tool))
    }

    fn clear_schemas(&mut self) {
        for c in [self.current.as_mut(), self.draining.as_mut()]
            .into_iter()
            .flatten()
        {
            c.client.clear_schemas();
        }
    }
}
