//! The HTTP/2 link of the Streamable HTTP client engine (RFC 9113, MCP
//! 2026-07-28 §5.1–§5.2, §5.7): one [`Connection`] in the client role
//! carrying every call as a stream. A call opens a stream when one is
//! free; its head is the era's fields, its body the message; the answer's
//! DATA goes to its judge as it comes (a notification stops `recv`, the
//! rest of that DATA is judged when fed again, as on HTTP/1.1). A stream
//! refused unprocessed (REFUSED_STREAM before a response head) goes once
//! more; a stream whose call was answered before its end lingers for
//! [`DRAIN_WAIT`], then is reset with CANCEL; a cancelled call's stream is
//! reset at once.

use super::call::{Fed, Own, Place};
use super::config::DRAIN_WAIT;
use super::engine::HttpClient;
use super::pool::Replay;
use super::send;
use crate::grpc::Code;
use crate::h2::{
    self, Connection, ErrorCode, Event, HeaderList, HeadersKind, Role, Stop, Storage, StreamError,
    StreamRef,
};
use crate::hpack::Field;
use crate::mcp::REMEMBERED_RESETS;
use crate::mcp::client::calls::status_for_reset;
use crate::mcp::client::engine::LinkId;
use crate::mcp::client::events::ClientEvent;
use crate::mcp::store::CallStore;
use crate::time::Instant;

/// Streams answered before their end, waiting for it.
const LINGER: usize = 8;

/// Where the HTTP/2 link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum H2State {
    Free,
    /// `Connect` is owed to the driver.
    Connect,
    Connecting,
    Up,
    /// `Disconnect` is owed to the driver.
    Disconnect,
}

/// The HTTP/2 link and its connection.
pub(super) struct H2Link<const CALLS: usize, const TABLE: usize, const BUF: usize, B: Storage<BUF>>
{
    pub(super) id: LinkId,
    pub(super) state: H2State,
    pub(super) conn: Connection<CALLS, TABLE, BUF, REMEMBERED_RESETS, B>,
    /// GOAWAY came or went: no new stream here.
    pub(super) going_away: bool,
    pub(super) replay: Option<Replay>,
    /// The connection's end was read: the calls still on its streams fail
    /// (or go again) once the DATA of the same `recv` is fed (a stream's
    /// last DATA can close a draining connection).
    ended: bool,
    /// A `recv`'s events and DATA are being handed out.
    feeding: bool,
    linger: [Option<(StreamRef, Instant)>; LINGER],
}

impl<const CALLS: usize, const TABLE: usize, const BUF: usize, B: Storage<BUF> + Default>
    H2Link<CALLS, TABLE, BUF, B>
{
    pub(super) fn new(config: h2::Config, now: Instant) -> Self {
        Self {
            id: LinkId(u32::MAX),
            state: H2State::Free,
            conn: Connection::new(Role::Client, config, now),
            going_away: false,
            ended: false,
            feeding: false,
            replay: None,
            linger: [None; LINGER],
        }
    }

    /// Link `id` is up: a new connection (its preface goes out first).
    pub(super) fn up(&mut self, id: LinkId, config: h2::Config, now: Instant) {
        self.id = id;
        self.state = H2State::Up;
        self.conn = Connection::new(Role::Client, config, now);
        self.going_away = false;
        self.ended = false;
        self.feeding = false;
        self.replay = None;
        self.linger = [None; LINGER];
    }

    /// Asks for a new link named `id`.
    pub(super) fn open(&mut self, id: LinkId) {
        self.id = id;
        self.state = H2State::Connect;
    }

    /// Resets `stream` with CANCEL (a call given up, §5.7).
    pub(super) fn cancel(&mut self, stream: StreamRef) {
        self.unlinger(stream);
        let _ = self.conn.reset(stream, ErrorCode::CANCEL);
    }

    /// The engine closes: GOAWAY, and the link goes once its streams ended.
    pub(super) fn go_away(&mut self) {
        match self.state {
            H2State::Up => {
                self.conn.go_away(ErrorCode::NO_ERROR);
                self.going_away = true;
            }
            H2State::Connect => self.state = H2State::Free,
            _ => {}
        }
    }

    /// The link event owed to the driver, if any.
    pub(super) fn owed_event(&mut self) -> Option<ClientEvent> {
        match self.state {
            H2State::Connect => {
                self.state = H2State::Connecting;
                Some(ClientEvent::Connect { link: self.id })
            }
            H2State::Disconnect => {
                self.state = H2State::Free;
                Some(ClientEvent::Disconnect { link: self.id })
            }
            _ => None,
        }
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        if self.state != H2State::Up {
            return None;
        }
        let linger = self.linger.iter().flatten().map(|&(_, until)| until);
        linger.chain(self.conn.poll_timeout()).min()
    }

    pub(super) fn handle_timeout(&mut self, now: Instant) {
        self.conn.handle_timeout(now);
        for l in self.linger.iter_mut() {
            if let Some((s, until)) = *l
                && now >= until
            {
                *l = None;
                let _ = self.conn.reset(s, ErrorCode::CANCEL);
            }
        }
    }

    /// `stream`'s call was answered before the stream ended: the rest is
    /// read for a while (reset at once when no room is left to wait).
    pub(super) fn linger(&mut self, stream: StreamRef, until: Instant) {
        match self.linger.iter_mut().find(|l| l.is_none()) {
            Some(free) => *free = Some((stream, until)),
            None => {
                let _ = self.conn.reset(stream, ErrorCode::CANCEL);
            }
        }
    }

    fn unlinger(&mut self, stream: StreamRef) {
        for l in self.linger.iter_mut() {
            if l.is_some_and(|(s, _)| s == stream) {
                *l = None;
            }
        }
    }

    /// Whether a stream of the link is still in use (a call's, or one
    /// lingering).
    fn lingering(&self) -> bool {
        self.linger.iter().any(Option::is_some)
    }
}

/// A status field as a number (0 when it is none).
fn status_of(fields: &HeaderList<'_>) -> u16 {
    fields
        .get(b":status")
        .and_then(|s| core::str::from_utf8(s).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
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
    /// HTTP/2: the link asked for when calls wait; waiting calls onto
    /// streams; heads and bodies written as the connection takes them.
    pub(super) fn pump_h2(&mut self) {
        let ready = self.era.is_ready();
        let waiting = self.calls.next_queued(Self::eligible(ready)).is_some();
        if self.h2.state == H2State::Free && waiting && !self.closing {
            let id = self.new_link_id();
            self.h2.open(id);
        }
        if self.h2.state != H2State::Up {
            return;
        }
        if !self.h2.going_away && !self.h2.conn.is_closed() {
            while let Some(i) = self.calls.next_queued(Self::eligible(ready)) {
                let Ok(stream) = self.h2.conn.open_stream() else {
                    break;
                };
                if !send::prepare_body(&mut self.calls, i, self.era.shape()) {
                    let _ = self.h2.conn.reset(stream, ErrorCode::CANCEL);
                    self.calls.fail_transport(
                        i,
                        Code::ResourceExhausted,
                        b"the request does not fit the call store",
                        None,
                    );
                    continue;
                }
                self.calls.reset_reader(i);
                if let Some(c) = self.calls.call_mut(i) {
                    c.place = Place::Stream(stream);
                    c.head_sent = false;
                    c.sent = 0;
                    c.diagnostics.http2 = true;
                }
            }
        }
        for i in 0..CALLS {
            self.send_stream(i);
        }
        let busy = self
            .calls
            .slots
            .iter()
            .filter_map(|s| s.call.as_ref())
            .any(|c| matches!(c.place, Place::Stream(_)));
        let over =
            self.h2.conn.is_closed() || (self.h2.going_away && !busy && !self.h2.lingering());
        // A DATA still to be fed (after a notification) goes first.
        if over && !self.h2.conn.wants_transmit() && self.h2.replay.is_none() {
            self.settle_ended();
            self.h2.state = H2State::Disconnect;
        }
    }

    /// Writes call `i`'s head and as much of its body as the stream takes.
    fn send_stream(&mut self, i: usize) {
        let Some(c) = self.calls.call(i) else {
            return;
        };
        let Place::Stream(stream) = c.place else {
            return;
        };
        let delete = c.own == Some(Own::Delete);
        if !c.head_sent {
            let shape = self.era.shape();
            let fields = match send::write_h2_fields(&mut self.calls, i, &self.config, shape) {
                Ok(f) => f,
                Err(e) => {
                    let _ = self.h2.conn.reset(stream, ErrorCode::CANCEL);
                    self.fail_request(i, e);
                    return;
                }
            };
            let req = send::req_bytes(&self.calls, i);
            let list = fields.at[..fields.n]
                .iter()
                .filter_map(|&(at, n, v, sensitive)| {
                    let name = req.get(at..at + n)?;
                    let value = req.get(at + n..at + n + v)?;
                    Some(if sensitive {
                        Field::sensitive(name, value)
                    } else {
                        Field::new(name, value)
                    })
                });
            match self.h2.conn.send_headers(stream, list, delete) {
                Ok(()) => {
                    if let Some(c) = self.calls.call_mut(i) {
                        c.head_sent = true;
                    }
                }
                Err(StreamError::TransmitFull | StreamError::ConcurrencyLimit) => return,
                Err(StreamError::HeadersTooLarge { needed }) if needed < BUF => return,
                Err(StreamError::ConnectionClosed) => {
                    // GOAWAY or the end came before the head left: the
                    // request goes on the next link.
                    let _ = self.h2.conn.reset(stream, ErrorCode::CANCEL);
                    let mode = c_mode(&self.calls, i);
                    self.calls.requeue(i, mode, false);
                    return;
                }
                Err(_) => {
                    let _ = self.h2.conn.reset(stream, ErrorCode::CANCEL);
                    self.calls.fail_transport(
                        i,
                        Code::Internal,
                        b"the request head cannot be sent",
                        None,
                    );
                    return;
                }
            }
        }
        if delete {
            return;
        }
        loop {
            let Some(c) = self.calls.call(i) else {
                return;
            };
            let (cur, sent) = (c.cur, c.sent);
            if sent >= cur.1 - cur.0 {
                return;
            }
            let req = send::req_bytes(&self.calls, i);
            let body = req.get(cur.0 + sent..cur.1).unwrap_or_default();
            match self.h2.conn.send_data(stream, body, true) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if let Some(c) = self.calls.call_mut(i) {
                        c.sent += n;
                    }
                }
            }
        }
    }

    /// Octets read from the HTTP/2 link; how many were taken.
    pub(super) fn recv_h2(&mut self, input: &[u8]) -> usize {
        let mut pos = 0;
        if let Some(mut r) = self.h2.replay.take() {
            let body = r.body.min(input.len());
            let live = self.calls.slots.get(r.slot).is_some_and(|s| {
                s.generation == r.generation
                    && s.call
                        .as_ref()
                        .is_some_and(|c| matches!(c.place, Place::Stream(_)))
            });
            let mut used = body;
            let mut stopped = false;
            if live {
                let end = r.end && body == r.body;
                if let Some(n) = self.feed_stream(r.slot, &input[..body], end) {
                    used = n;
                    stopped = true;
                }
            }
            r.body -= used;
            pos = used;
            if stopped || r.body > 0 {
                self.h2.replay = Some(r);
                return pos;
            }
        }
        while pos < input.len() {
            let res = self.h2.conn.recv(&input[pos..], self.now);
            // The head of a stream comes before its DATA, the connection's
            // end after it.
            self.h2.feeding = true;
            self.drain_h2();
            self.h2.feeding = false;
            if let Some(d) = res.data {
                self.h2.conn.release_data(d.stream, d.bytes.len());
                if let Some(i) = self.calls.on_place(Place::Stream(d.stream))
                    && let Some(used) = self.feed_stream(i, d.bytes, d.end_stream)
                {
                    // A notification to hand out first: the rest of the
                    // DATA (maybe none but its end) is judged when fed again.
                    let generation = self.calls.call_id(i).generation;
                    self.h2.replay = Some(Replay {
                        slot: i,
                        generation,
                        body: d.bytes.len() - used,
                        skip: 0,
                        end: d.end_stream,
                    });
                    return pos + res.consumed - (d.bytes.len() - used);
                }
            }
            self.settle_ended();
            pos += res.consumed;
            match res.stop {
                Stop::Closed => return input.len(),
                // Owed frames go out before more is read.
                Stop::Transmit => return pos,
                Stop::Consumed | Stop::Data | Stop::Events => {}
            }
            if res.consumed == 0 && res.data.is_none() && res.stop != Stop::Events {
                return pos;
            }
        }
        pos
    }

    /// DATA of call `i`'s stream (`end`: the stream ended with it). When a
    /// notification stopped the judge: the octets it took (its end, if
    /// any, still due).
    fn feed_stream(&mut self, i: usize, data: &[u8], end: bool) -> Option<usize> {
        let Some(Place::Stream(stream)) = self.calls.call(i).map(|c| c.place) else {
            return None;
        };
        let (fed, judgement) = self.calls.on_body(i, data);
        if let Some(j) = judgement {
            self.judge(i, j);
        }
        if let Fed::Note(n) = fed {
            return Some(n);
        }
        if end
            && self
                .calls
                .call(i)
                .is_some_and(|c| c.place == Place::Stream(stream))
            && let Some(j) = self.calls.on_end(i)
        {
            self.judge(i, j);
        }
        if !end
            && self
                .calls
                .call(i)
                .is_none_or(|c| c.place != Place::Stream(stream))
        {
            let until = self.now.saturating_add(DRAIN_WAIT);
            self.h2.linger(stream, until);
        }
        None
    }

    /// Hands the connection's events to the calls.
    pub(super) fn drain_h2(&mut self) {
        while let Some(e) = self.h2.conn.poll_event() {
            match e {
                Event::Headers {
                    stream,
                    kind,
                    end_stream,
                } => {
                    let Some(i) = self.calls.on_place(Place::Stream(stream)) else {
                        continue;
                    };
                    if kind == HeadersKind::Response {
                        let fields = self.h2.conn.headers(stream).unwrap_or(HeaderList::EMPTY);
                        if self
                            .calls
                            .call(i)
                            .is_some_and(|c| c.own == Some(Own::Initialize))
                        {
                            self.era.set_session(fields.get(b"mcp-session-id"));
                        }
                        let judgement = self.calls.on_head(
                            i,
                            status_of(&fields),
                            fields.get(b"content-type"),
                            fields.get(b"www-authenticate"),
                        );
                        if let Some(j) = judgement {
                            self.judge(i, j);
                        }
                    }
                    let on_stream = |c: &super::call::Call| c.place == Place::Stream(stream);
                    if end_stream
                        && self.calls.call(i).is_some_and(on_stream)
                        && let Some(j) = self.calls.on_end(i)
                    {
                        self.judge(i, j);
                    }
                    if !end_stream && !self.calls.call(i).is_some_and(on_stream) {
                        let until = self.now.saturating_add(DRAIN_WAIT);
                        self.h2.linger(stream, until);
                    }
                }
                Event::Reset { stream, code, .. } => {
                    self.h2.unlinger(stream);
                    let Some(i) = self.calls.on_place(Place::Stream(stream)) else {
                        continue;
                    };
                    let Some(c) = self.calls.call_mut(i) else {
                        continue;
                    };
                    let unanswered = c.diagnostics.http_status.is_none();
                    if code == ErrorCode::REFUSED_STREAM && unanswered && !c.resent {
                        // Not processed: once more, on a new stream.
                        c.resent = true;
                        c.diagnostics.retried = true;
                        let mode = c.mode;
                        self.calls.requeue(i, mode, false);
                        continue;
                    }
                    let http = c.diagnostics.http_status;
                    let mut text = [0u8; 96];
                    let message = reset_text(&mut text, code);
                    self.calls
                        .fail_transport(i, status_for_reset(code), message, http);
                    if code == ErrorCode::REFUSED_STREAM
                        && unanswered
                        && let Some(t) = self.calls.call_mut(i).and_then(|c| c.terminal.as_mut())
                    {
                        t.diagnostics.refused = true;
                    }
                }
                // The stream's end was judged with its last DATA or HEADERS
                // (this event may come before that DATA is handed over).
                Event::Closed { stream } => self.h2.unlinger(stream),
                Event::GoAway { .. } => self.h2.going_away = true,
                Event::ConnectionClosed { .. } => {
                    self.h2.going_away = true;
                    self.h2.linger = [None; LINGER];
                    self.h2.ended = true;
                    if !self.h2.feeding {
                        self.settle_ended();
                    }
                }
                Event::SendReady { .. } | Event::StreamsAvailable | Event::PingAck { .. } => {}
            }
        }
    }

    /// After the connection's end: the calls still on its streams go on
    /// the next link (never seen by the server) or fail.
    fn settle_ended(&mut self) {
        if !self.h2.ended {
            return;
        }
        for i in 0..CALLS {
            let Some(c) = self.calls.call(i) else {
                continue;
            };
            if !matches!(c.place, Place::Stream(_)) {
                continue;
            }
            if !c.head_sent {
                // Never seen by the server: the next link.
                let mode = c.mode;
                self.calls.requeue(i, mode, false);
            } else {
                let http = c.diagnostics.http_status;
                self.calls.fail_transport(
                    i,
                    Code::Unavailable,
                    b"the HTTP/2 connection ended before the response",
                    http,
                );
            }
        }
    }

    /// Writes what the HTTP/2 link has to send.
    pub(super) fn transmit_h2(&mut self, out: &mut [u8]) -> usize {
        self.pump_h2();
        let n = self.h2.conn.poll_transmit(out);
        self.drain_h2();
        self.advance();
        n
    }
}

/// `the server reset the HTTP/2 stream before the response (CODE)`, in
/// `buf`.
fn reset_text(buf: &mut [u8; 96], code: ErrorCode) -> &[u8] {
    const TEXT: &[u8] = b"the server reset the HTTP/2 stream before the response";
    let name = code.name().unwrap_or("an unknown code").as_bytes();
    let mut n = 0;
    for part in [TEXT, b" (", name, b")"] {
        let Some(dst) = buf.get_mut(n..n + part.len()) else {
            return &buf[..n];
        };
        dst.copy_from_slice(part);
        n += part.len();
    }
    &buf[..n]
}

/// The mode of call `i`'s current request.
fn c_mode<S: CallStore, const CALLS: usize, const CACHE: usize>(
    calls: &super::call::Calls<S, CALLS, CACHE>,
    i: usize,
) -> crate::mcp::client::calls::Mode {
    calls
        .call(i)
        .map_or(crate::mcp::client::calls::Mode::Call, |c| c.mode)
}
