//! Streamable HTTP (MCP 2026-07-28 §5) on the tunnel's HTTP/2 connection:
//! `POST` to the endpoint of [`ServerConfig::http`] (`/mcp` by default)
//! beside the gRPC calls.
//!
//! The request's DATA is the JSON-RPC message; the answer is a response
//! head with `content-type: application/json` and its `content-length`
//! then the message, or an event stream (when the request has a progress
//! token, asks for log messages, or is `subscriptions/listen`; the head
//! fields of the HTTP/1.1 binding, `x-accel-buffering: no` among them)
//! with one `data: <json>\n\n` event per message and a keep-alive comment
//! when it said nothing for the endpoint's interval; END_STREAM follows
//! the final one. The judgements are the HTTP/1.1 binding's (`http::wire`,
//! the same [`HttpEndpoint`]): 404 for another path that is no gRPC call,
//! 403 for an `:authority`, `host` or `Origin` not allowed, 405 with
//! `allow: POST`, 415, 406, 400 for a request the engine refuses (with the
//! JSON-RPC error), 404 for an unknown method, 202 for a notification,
//! 401/403 for refused bearer tokens (naming the resource metadata). The
//! client's RST_STREAM cancels the handler, as on gRPC calls.
//!
//! The engine frames each message for gRPC (its prefix and protobuf
//! header before the JSON); an HTTP call reframes it when sending
//! ([`Engine::frame_fresh`]), so the gRPC path pays one branch.

use super::*;
use crate::http1::write::{SSE_DATA, SSE_END, SSE_FIELDS, SSE_KEEP_ALIVE, sse_one_line};
use crate::mcp::auth::Refusal;
use crate::mcp::envelope::{self, Spans};
use crate::mcp::error::{
    HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::mcp::server::HttpEndpoint;
use crate::mcp::server::http::wire::{self, KeepAlive};
use crate::mcp::server::stdio::REQUEST_TIMEOUT;
use core::ops::Range;

/// An HTTP call's state, kept in the tunnel's part of the call (small:
/// every call record holds one).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Exchange {
    pub(super) accept_json: bool,
    pub(super) accept_sse: bool,
    /// The answer is an event stream.
    pub(super) sse: bool,
    /// The status of a JSON answer the binding chose (protocol errors).
    pub(super) status: Option<u16>,
    /// The engine answered at dispatch: the status follows the error code.
    pub(super) dispatched: bool,
    /// The head of a JSON answer, once framed: its status and length.
    pub(super) head: Option<(u16, u32)>,
    /// Octets still to send of the end of [`SSE_KEEP_ALIVE`]: an event's
    /// end (its last two octets, [`SSE_END`]) or a whole comment.
    pub(super) tail: u8,
    /// Request octets collected.
    pub(super) body_len: u32,
    /// The event stream's keep-alive comments.
    pub(super) keep_alive: KeepAlive,
}

/// Where a request head goes.
pub(super) enum Route {
    /// Not the MCP path: the gRPC checks.
    Grpc,
    /// Refused with this status before any call.
    Refuse(u16),
    /// An MCP call with what its head accepts.
    Call(Exchange),
}

/// Where a request head goes: another path to the gRPC checks when it is
/// a gRPC call (its content type, or a path gRPC serves) and 404 when it
/// is not; the endpoint's requests through the checks of the HTTP/1.1
/// binding, in its order.
pub(super) fn route(fields: HeaderList<'_>, endpoint: &HttpEndpoint<'_>) -> Route {
    let target = fields.get(b":path").unwrap_or_default();
    if !endpoint.serves(target) {
        let grpc = fields
            .get(b"content-type")
            .is_some_and(grpc::is_grpc_content_type)
            || target == TUNNEL_PATH
            || typed::rpc(target).is_some();
        return if grpc {
            Route::Grpc
        } else {
            Route::Refuse(404)
        };
    }
    let named = |name: &'static [u8]| {
        fields
            .iter()
            .filter(move |f| f.name == name)
            .map(|f| f.value)
    };
    let authorities = named(b":authority").chain(named(b"host"));
    if let Err(status) = endpoint.admits(authorities, named(b"origin")) {
        return Route::Refuse(status);
    }
    if fields.get(b":method") != Some(b"POST") {
        return Route::Refuse(405);
    }
    if !wire::is_json(fields.get(b"content-type")) {
        return Route::Refuse(415);
    }
    let accept = fields
        .iter()
        .filter(|f| f.name == b"accept")
        .map(|f| f.value);
    match wire::accepts(accept) {
        Ok((accept_json, accept_sse)) => Route::Call(Exchange {
            accept_json,
            accept_sse,
            ..Exchange::default()
        }),
        Err(status) => Route::Refuse(status),
    }
}

/// Reframes a fresh message (gRPC-framed at `at` in `buf`) for HTTP: the
/// JSON alone as the answer's body when it is final and no stream was
/// asked, else an event (`data: ` before it, its end sent after); a
/// notification for a request that asked no stream is dropped. Returns
/// the octets to send; the head to send first is left in `x.head`.
fn reframe(buf: &mut [u8], at: Range<usize>, x: &mut Exchange, finishing: bool) -> Range<usize> {
    let none = at.end..at.end;
    let Some(json_len) = buf
        .get(at.start + 5..at.end)
        .and_then(|m| JsonRpcMessage::decode(m).ok())
        .map(<[u8]>::len)
    else {
        return none;
    };
    let msg = at.end - json_len..at.end;
    if !x.sse {
        if !finishing {
            return none;
        }
        let status = x.status.unwrap_or_else(|| {
            if x.dispatched {
                wire::dispatched_status(&buf[msg.clone()])
            } else {
                200
            }
        });
        let Ok(len) = u32::try_from(json_len) else {
            return none;
        };
        x.head = Some((status, len));
        return msg;
    }
    // The gRPC prefix and the protobuf header (7 octets at least) leave
    // room for the event's start.
    let Some(start) = msg
        .start
        .checked_sub(SSE_DATA.len())
        .filter(|&s| s >= at.start)
    else {
        return none;
    };
    sse_one_line(&mut buf[msg.clone()]);
    buf[start..msg.start].copy_from_slice(SSE_DATA);
    x.tail = SSE_END.len() as u8;
    start..msg.end
}

/// `v` in decimal, in `out`; the digits.
fn decimal(mut v: usize, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &out[i..];
        }
    }
}

fn status_text(status: u16, out: &mut [u8; 20]) -> &[u8] {
    decimal(usize::from(status), out)
}

impl<
    'r,
    S: CallStore,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    FB: Storage<BUF> + Default,
> Server<'r, S, STREAMS, TABLE, BUF, FB>
{
    /// The HTTP state of call `i`, when it is a Streamable HTTP call.
    pub(super) fn exchange(&self, i: usize) -> Option<&Exchange> {
        self.engine.calls.get(i)?.as_ref()?.x.http.as_ref()
    }

    pub(super) fn exchange_mut(&mut self, i: usize) -> Option<&mut Exchange> {
        self.engine.calls.get_mut(i)?.as_mut()?.x.http.as_mut()
    }

    /// An answer of the binding's own, without a call or a body.
    pub(super) fn http_refuse(&mut self, stream: StreamRef, status: u16) {
        let mut digits = [0u8; 20];
        let text = status_text(status, &mut digits);
        let fields = [
            Field::new(b":status", text),
            Field::new(b"content-length", b"0"),
            Field::new(b"allow", b"POST"),
        ];
        let n = if status == 405 { 3 } else { 2 };
        let _ = self
            .conn
            .send_headers(stream, fields[..n].iter().copied(), true);
    }

    /// HTTP call `i`'s token was refused: 401 or 403 with its challenge
    /// (§5.9), naming the endpoint's resource metadata, and the call ends.
    pub(super) fn http_refuse_auth(&mut self, i: usize, refusal: Refusal) {
        let Some(stream) = self
            .engine
            .calls
            .get(i)
            .and_then(Option::as_ref)
            .map(|c| c.x.stream)
        else {
            return;
        };
        let parts = self.config.http.challenge(refusal.challenge);
        let len = parts.iter().map(|p| p.len()).sum();
        // The value is put together in the call's buffer, whose request is
        // dropped; a URL larger than a call buffer is left out.
        let challenge = self
            .engine
            .buffer(i, len)
            .and_then(|buf| buf.get_mut(..len))
            .map_or(refusal.challenge.as_bytes(), |value| {
                let mut at = 0;
                for part in parts {
                    value[at..at + part.len()].copy_from_slice(part);
                    at += part.len();
                }
                &*value
            });
        let mut digits = [0u8; 20];
        let fields = [
            Field::new(b":status", status_text(refusal.http_status, &mut digits)),
            Field::new(b"content-length", b"0"),
            Field::new(b"www-authenticate", challenge),
        ];
        let _ = self.conn.send_headers(stream, fields, true);
        self.engine.remove(i);
    }

    /// The earliest keep-alive comment due on an event stream.
    pub(super) fn http_keep_alive_deadline(&self) -> Option<Instant> {
        self.engine
            .calls
            .iter()
            .flatten()
            .filter_map(|c| c.x.http.as_ref()?.keep_alive.deadline())
            .min()
    }

    /// Sends the keep-alive comments due at `now`.
    pub(super) fn http_keep_alive(&mut self, now: Instant) {
        for i in 0..self.engine.calls.len() {
            if self
                .exchange_mut(i)
                .is_some_and(|x| x.keep_alive.handle_timeout(now))
            {
                self.flush_http(i);
            }
        }
    }

    /// Request octets of an HTTP call: the JSON-RPC message itself.
    pub(super) fn http_data(&mut self, i: usize, bytes: &[u8]) {
        let Some(len) = self.exchange(i).map(|x| x.body_len as usize) else {
            return;
        };
        let total = len + bytes.len();
        let limit = self.config.max_message_bytes.min(u32::MAX as usize);
        let room = (total <= limit)
            .then(|| self.engine.message_room(i, total))
            .flatten();
        let Some(room) = room else {
            if let Some((x, _)) = self.engine.remove(i) {
                self.http_refuse(x.stream, 413);
            }
            return;
        };
        room[len..].copy_from_slice(bytes);
        if let Some(x) = self.exchange_mut(i) {
            x.body_len = total as u32;
        }
    }

    /// The request message of HTTP call `i` is whole: judge it (§5.6),
    /// choose JSON or a stream, and hand it to the engine (as the HTTP/1.1
    /// binding does).
    pub(super) fn http_dispatch(&mut self, i: usize) {
        let Some(c) = self.engine.calls.get(i).and_then(Option::as_ref) else {
            return;
        };
        let len = c.x.http.map_or(0, |x| x.body_len as usize);
        let at = c.body..c.body + len;
        let bytes = self.engine.store.bytes(&c.buf);
        let Some(message) = bytes.get(at.clone()) else {
            return self.drop_call(i);
        };
        if core::str::from_utf8(message).is_err() {
            return self.answer(i, 400, RpcError::new(PARSE_ERROR, "Parse error: not UTF-8"));
        }
        let spans = match self.engine.parse(i, at.clone()) {
            Some(Ok(spans)) => spans,
            Some(Err(e)) => return self.answer(i, 400, e),
            None => return self.drop_call(i),
        };
        let r = match spans {
            Spans::Request(r) => r,
            Spans::Notification => return self.accepted(i),
            Spans::Response => {
                let e = RpcError::new(INVALID_REQUEST, "a server takes requests, not responses");
                return self.answer(i, 400, e);
            }
        };
        let params = r.params.clone().map(|p| &message[p]);
        let method = r.method.clone().map_or(&[][..], |m| &message[m]);
        let headers = HeaderList::from_bytes(&bytes[..c.headers_len]);
        let header_version = headers
            .get(b"mcp-protocol-version")
            .map(crate::http1::head::trim);
        let mut legacy = [0u8; 256];
        let asks = wire::asks(method, params, header_version, &mut legacy);
        if let Some(x) = self.exchange_mut(i) {
            x.sse = (asks.stream && x.accept_sse) || !x.accept_json;
        }
        match self.engine.dispatch_request(i, at, r) {
            Dispatched::Protocol(e) => self.answer(i, 400, e),
            Dispatched::Written => {
                let listening = self.engine.phase(i) == Some(Phase::Listening);
                if let Some(x) = self.exchange_mut(i) {
                    // A listen stream is an event stream whatever the
                    // client accepts (§7.4); other answers at dispatch are
                    // one JSON response.
                    x.sse = listening;
                    x.dispatched = true;
                    if asks.meta_bad {
                        x.status = Some(400);
                    }
                }
                if let Some(data) = asks.legacy {
                    let sent = self.engine.write_message(i, |w, id, _| {
                        envelope::write_error(
                            w,
                            id,
                            UNSUPPORTED_PROTOCOL_VERSION,
                            b"Unsupported protocol version",
                            Some(data),
                        )
                    });
                    if sent.is_err() {
                        return self.drop_call(i);
                    }
                }
                self.flush(i);
            }
            Dispatched::Handed => {}
            Dispatched::Notification => self.accepted(i),
            Dispatched::Failed => self.drop_call(i),
        }
    }

    /// Answers HTTP call `i` with a JSON-RPC error and an HTTP status.
    fn answer(&mut self, i: usize, status: u16, e: RpcError) {
        if let Some(x) = self.exchange_mut(i) {
            x.status = Some(status);
            x.sse = false;
        }
        if self.engine.answer_error(i, e) == Dispatched::Failed {
            return self.drop_call(i);
        }
        self.flush(i);
    }

    /// A notification: 202, no body.
    fn accepted(&mut self, i: usize) {
        if let Some((x, _)) = self.engine.remove(i) {
            self.http_refuse(x.stream, 202);
        }
    }

    /// An HTTP call past its deadline: 408 while its request is coming,
    /// else -32001 (or the end of its stream after the message on its
    /// way).
    pub(super) fn http_timeout(&mut self, i: usize) {
        match self.engine.phase(i) {
            Some(Phase::Body | Phase::Authorizing) => {
                if let Some((x, _)) = self.engine.remove(i) {
                    self.http_refuse(x.stream, 408);
                }
            }
            _ if !self.engine.output(i).is_empty() => self.engine.finish(i),
            _ => {
                let e = RpcError::new(REQUEST_TIMEOUT, "Request timed out");
                if self.engine.answer_error(i, e) == Dispatched::Failed {
                    return self.drop_call(i);
                }
                self.flush(i);
            }
        }
    }

    /// A handler's request-level error is answered 400 (§5.3) unless a
    /// stream began.
    pub(super) fn http_error_status(&mut self, i: usize, code: i32) {
        if matches!(
            code,
            HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY | UNSUPPORTED_PROTOCOL_VERSION
        ) && let Some(c) = self.engine.calls.get_mut(i).and_then(Option::as_mut)
            && !c.x.head_sent
            && let Some(x) = c.x.http.as_mut()
        {
            x.status = Some(400);
            x.sse = false;
        }
    }

    /// Whether a notification for call `call` would be dropped: an HTTP
    /// call that asked for no stream.
    pub(super) fn http_drops_notifications(&self, call: CallId) -> bool {
        self.engine.find(call, Phase::Handler).is_some()
            && self.exchange(call.index()).is_some_and(|x| !x.sse)
    }

    /// Sends what HTTP call `i` has pending: the end of the last event (or
    /// of a keep-alive comment), the response head, the message, a listen
    /// stream's next or a keep-alive comment that is due, and END_STREAM
    /// after the final message.
    pub(super) fn flush_http(&mut self, i: usize) {
        let interval = self.config.http.keep_alive_interval;
        loop {
            let Some(c) = self.engine.calls.get_mut(i).and_then(Option::as_mut) else {
                return;
            };
            let stream = c.x.stream;
            let finishing = c.phase == Phase::Finishing;
            let writing = c.writing();
            let fresh = c.is_fresh();
            let Some(x) = c.x.http.as_mut() else {
                return;
            };
            // The end of an event follows the rest of its message; what is
            // left of a comment (or of the last event) precedes the next.
            if x.tail > 0 && (!writing || fresh) {
                let end = finishing && !writing;
                let tail = usize::from(x.tail);
                let rest = SSE_KEEP_ALIVE
                    .get(SSE_KEEP_ALIVE.len().saturating_sub(tail)..)
                    .unwrap_or_default();
                match self.conn.send_data(stream, rest, end) {
                    Ok(n) => {
                        x.tail -= n.min(tail) as u8;
                        if n > 0 {
                            x.keep_alive.sent(self.now, interval);
                        }
                    }
                    Err(h2::StreamError::TransmitFull) => return,
                    Err(_) => return self.drop_call(i),
                }
                if x.tail > 0 {
                    return;
                }
                if end {
                    self.engine.remove(i);
                    return;
                }
            }
            self.engine
                .frame_fresh(i, |buf, at, t| match t.http.as_mut() {
                    Some(x) => reframe(buf, at, x, finishing),
                    None => at,
                });
            if !self.send_http_head(i) {
                return;
            }
            let Some(x) = self.exchange(i).copied() else {
                return;
            };
            loop {
                let out = self.engine.output(i);
                if out.is_empty() {
                    break;
                }
                let last = finishing && !x.sse;
                let len = out.len();
                match self.conn.send_data(stream, out, last) {
                    Ok(0) => return,
                    Ok(n) => {
                        self.engine.sent(i, n);
                        if last && n == len {
                            self.engine.remove(i);
                            return;
                        }
                        let now = self.now;
                        if let Some(x) = self.exchange_mut(i).filter(|x| x.sse) {
                            x.keep_alive.sent(now, interval);
                        }
                    }
                    Err(_) => return self.drop_call(i),
                }
            }
            if self.exchange(i).is_some_and(|x| x.tail > 0) {
                continue;
            }
            match self.engine.phase(i) {
                Some(Phase::Listening) => match self.engine.next_listen(i) {
                    ListenNext::Idle => {}
                    ListenNext::Written | ListenNext::Final => continue,
                    ListenNext::Failed => return self.drop_call(i),
                },
                Some(Phase::Finishing) => {
                    // A final message dropped for want of a stream.
                    match self.conn.send_data(stream, &[], true) {
                        Ok(_) => {
                            self.engine.remove(i);
                        }
                        Err(h2::StreamError::TransmitFull) => {}
                        Err(_) => self.drop_call(i),
                    }
                    return;
                }
                _ => {}
            }
            // Nothing to say on an open event stream: a comment, when due.
            let Some(c) = self.engine.calls.get_mut(i).and_then(Option::as_mut) else {
                return;
            };
            let head_sent = c.x.head_sent;
            match c.x.http.as_mut() {
                Some(x) if x.sse && head_sent && x.keep_alive.is_due() => {
                    x.keep_alive.take_due();
                    x.tail = SSE_KEEP_ALIVE.len() as u8;
                }
                _ => return,
            }
        }
    }

    /// Sends call `i`'s response head when one is due; false when it must
    /// wait (or the call was dropped).
    fn send_http_head(&mut self, i: usize) -> bool {
        let Some(c) = self.engine.calls.get_mut(i).and_then(Option::as_mut) else {
            return false;
        };
        if c.x.head_sent {
            return true;
        }
        let stream = c.x.stream;
        let Some(x) = c.x.http.as_mut() else {
            return false;
        };
        let (status, json_len) = match (x.head, x.sse) {
            (Some((status, len)), _) => (status, Some(len as usize)),
            (None, true) if c.writing() => (200, None),
            _ => return true,
        };
        let mut digits = [0u8; 20];
        let mut len_digits = [0u8; 20];
        let sent = match json_len {
            Some(n) => {
                let fields = [
                    Field::new(b":status", status_text(status, &mut digits)),
                    Field::new(b"content-type", b"application/json"),
                    Field::new(b"content-length", decimal(n, &mut len_digits)),
                ];
                self.conn.send_headers(stream, fields, false)
            }
            None => {
                let fields = SSE_FIELDS.map(|(name, value)| Field::new(name.as_bytes(), value));
                let status = Field::new(b":status", b"200");
                self.conn
                    .send_headers(stream, core::iter::once(status).chain(fields), false)
            }
        };
        match sent {
            Ok(()) => {
                if let Some(c) = self.engine.calls.get_mut(i).and_then(Option::as_mut) {
                    c.x.head_sent = true;
                    if let Some(x) = c.x.http.as_mut().filter(|x| x.sse) {
                        x.keep_alive
                            .sent(self.now, self.config.http.keep_alive_interval);
                    }
                }
                true
            }
            Err(h2::StreamError::TransmitFull) => false,
            Err(_) => {
                self.drop_call(i);
                false
            }
        }
    }
}
