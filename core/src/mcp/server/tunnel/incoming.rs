//! What arrives on the tunnel: request heads, request messages, resets
//! and the connection's end, and the dispatch of a complete request to the
//! transport-free half.

use super::*;

impl<
    'r,
    S: CallStore,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    FB: Storage<BUF> + Default,
> Server<'r, S, STREAMS, TABLE, BUF, FB>
{
    pub(super) fn drain_connection(&mut self) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                Event::Headers {
                    stream,
                    kind: HeadersKind::Request,
                    fields,
                    end_stream,
                } => {
                    // Judge the head and copy what the call keeps, then
                    // act without the borrow.
                    let admission = admit(&mut self.store, &self.config, fields);
                    self.on_request_head(stream, admission, end_stream);
                }
                Event::Headers { .. } => {}
                Event::Reset { stream, .. } => self.on_stream_gone(stream, true),
                Event::Closed { stream } => self.on_stream_gone(stream, false),
                Event::SendReady { stream } => {
                    if let Some(i) = self.index_of(stream) {
                        self.flush(i);
                    }
                }
                Event::ConnectionClosed { error } => {
                    for i in 0..self.calls.len() {
                        self.cancel(i, CancelReason::ConnectionClosed);
                        self.remove(i);
                    }
                    self.closed = Some(error);
                }
                Event::StreamsAvailable | Event::GoAway { .. } | Event::PingAck { .. } => {}
            }
        }
    }

    pub(super) fn index_of(&self, stream: StreamRef) -> Option<usize> {
        self.calls
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.stream == stream))
    }

    pub(super) fn on_stream_gone(&mut self, stream: StreamRef, reset: bool) {
        let Some(i) = self.index_of(stream) else {
            return;
        };
        if reset {
            self.cancel(i, CancelReason::Reset);
        }
        self.remove(i);
    }

    pub(super) fn on_request_head(
        &mut self,
        stream: StreamRef,
        admission: Admission<S::Buf>,
        end_stream: bool,
    ) {
        let (buf, headers_len, timeout) = match admission {
            Admission::Accepted {
                buf,
                headers_len,
                timeout,
            } => (buf, headers_len, timeout),
            Admission::Http(status) => return self.http_error(stream, status),
            Admission::Status(code, message) => return self.status_only(stream, code, message),
            // No buffer now: not processed, so the client may retry it.
            Admission::Refused => {
                let _ = self.conn.reset(stream, ErrorCode::REFUSED_STREAM);
                return;
            }
        };
        // A slot whose cancellation is not polled yet stays taken.
        let cancelled = &self.cancelled;
        let free = (0..self.calls.len())
            .find(|&i| self.calls[i].is_none() && cancelled.get(i).is_none_or(Option::is_none))
            .or_else(|| {
                let n = self.calls.len();
                self.calls.grow_to(n + 1).then_some(n)
            });
        let Some(i) = free else {
            self.store.put(buf);
            if self.calls.iter().any(Option::is_none) {
                // Only slots whose end the application has not heard of yet
                // are free: not processed, so the client may retry.
                let _ = self.conn.reset(stream, ErrorCode::REFUSED_STREAM);
                return;
            }
            return self.status_only(stream, Code::ResourceExhausted, b"too many calls");
        };
        let authorizing = self.config.authorize;
        let principal_room = if authorizing { MAX_PRINCIPAL } else { 0 };
        self.calls[i] = Some(Call {
            stream,
            phase: if authorizing {
                Phase::Authorizing
            } else {
                Phase::Body
            },
            decoder: MessageDecoder::new(self.config.max_message_bytes),
            buf,
            headers_len,
            id_len: 0,
            principal_len: None,
            body: headers_len + MAX_ID + principal_room,
            message_len: None,
            deadline: Some(self.now + timeout.unwrap_or(self.config.request_timeout)),
            params: None,
            handler: None,
            notice: None,
            handed: false,
            listen: None,
            head_sent: false,
            out_pos: 0,
            out_end: 0,
            wants_writable: false,
            ended: end_stream,
        });
        if authorizing {
            self.notice(i, Notice::Authorize);
        } else if end_stream {
            self.dispatch(i);
        }
    }

    pub(super) fn on_data(&mut self, stream: StreamRef, mut bytes: &[u8], end_stream: bool) {
        // The octets are copied below (or dropped): return them at once.
        self.conn.release_data(stream, bytes.len());
        let Some(i) = self.index_of(stream) else {
            return;
        };
        loop {
            let Some(c) = self.calls[i].as_mut() else {
                return;
            };
            if !matches!(c.phase, Phase::Body | Phase::Authorizing) || bytes.is_empty() {
                break;
            }
            if c.message_len.is_some() {
                return self.end_with_error(
                    i,
                    RpcError::new(INVALID_REQUEST, "a call carries one request message"),
                );
            }
            // The prefix names the message's length: grow the buffer to it
            // before collecting the message.
            let (used, len) = match c.decoder.feed_prefix(bytes) {
                Ok(r) => r,
                Err(e) => return self.end_with_status(i, e.code(), e.message().as_bytes()),
            };
            bytes = &bytes[used..];
            let Some(len) = len else {
                break;
            };
            if !self.store.grow(&mut c.buf, c.body + len) {
                return self.end_with_status(
                    i,
                    Code::ResourceExhausted,
                    b"message larger than the call buffer",
                );
            }
            let body = c.body;
            let out = &mut self.store.bytes_mut(&mut c.buf)[body..body + len];
            let (used, done) = match c.decoder.feed(bytes, out) {
                Ok(r) => r,
                Err(e) => return self.end_with_status(i, e.code(), e.message().as_bytes()),
            };
            bytes = &bytes[used..];
            if let Some(len) = done {
                c.message_len = Some(len);
            }
        }
        if end_stream {
            match self.calls[i].as_mut() {
                Some(c) if c.phase == Phase::Authorizing => c.ended = true,
                _ => self.dispatch(i),
            }
        }
    }

    /// The request ended: decode it, let the transport-free half judge and
    /// route it, and act on the outcome.
    pub(super) fn dispatch(&mut self, i: usize) {
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        if c.phase != Phase::Body {
            return;
        }
        if let Err(e) = c.decoder.finish() {
            return self.end_with_status(i, e.code(), e.message().as_bytes());
        }
        let Some(len) = c.message_len else {
            return self.end_with_error(
                i,
                RpcError::new(INVALID_REQUEST, "the call carries no request message"),
            );
        };
        let body = c.body;
        let bytes = self.store.bytes_mut(&mut c.buf);
        let Ok(json) = JsonRpcMessage::decode(&bytes[body..body + len]) else {
            return self.end_with_error(i, RpcError::new(PARSE_ERROR, "malformed JsonRpcMessage"));
        };
        // The JSON's place in the buffer: the protobuf header precedes it.
        let json_at = body + json::span(&bytes[body..body + len], json).start;
        let spans = match RequestSpans::parse(json, dispatch::MAX_DEPTH) {
            Err(e) => return self.end_with_error(i, e),
            // A notification gets an empty stream and status 0.
            Ok(Spans::Notification) => return self.end_with_status(i, Code::Ok, b""),
            Ok(Spans::Response) => {
                return self.end_with_error(
                    i,
                    RpcError::new(INVALID_REQUEST, "a server takes requests, not responses"),
                );
            }
            Ok(Spans::Request(r)) => r,
        };
        let at = |r: core::ops::Range<usize>| (json_at + r.start, json_at + r.end);
        if spans.id.len() > MAX_ID {
            return self.end_with_error(i, RpcError::new(INVALID_REQUEST, "id too long"));
        }
        let (ids, ide) = at(spans.id);
        bytes.copy_within(ids..ide, c.headers_len);
        c.id_len = ide - ids;
        c.params = spans.params.map(at);
        c.phase = Phase::Handler;
        let Some(method) = spans.method.map(at) else {
            return self.answer_error(i, RpcError::new(METHOD_NOT_FOUND, "Method not found"), None);
        };
        let bytes = self.store.bytes(&c.buf);
        let method_text = &bytes[method.0..method.1];
        let method_raw = &bytes[method.0 - 1..method.1 + 1];
        let params = c.params_at().map(|r| &bytes[r]);
        let headers = HeaderList::from_bytes(&bytes[..c.headers_len]);
        if let Err(e) = dispatch::check(&self.registry, method_text, method_raw, params, &headers) {
            return match dispatch::level(&e) {
                Level::Protocol => self.end_with_error(i, e),
                Level::InBand => self.answer_error(i, e, None),
            };
        }
        match dispatch::route(&self.registry, method_text, params) {
            Route::Builtin(b) => self.answer_builtin(i, b),
            Route::Reject(e) => self.answer_error(i, e, None),
            Route::Handle(h) => {
                if let Some(c) = self.calls[i].as_mut() {
                    c.handler = Some(h.0);
                    c.notice = Some(Notice::Request);
                }
            }
            Route::Listen => self.start_listen(i),
        }
    }

    pub(super) fn answer_builtin(&mut self, i: usize, b: Builtin) {
        let registry = self.registry;
        if self
            .write_message(i, |w, id, _| dispatch::write_builtin(&registry, b, id, w))
            .is_err()
        {
            return self.answer_error(i, dispatch::RESULT_TOO_LARGE, None);
        }
        self.finish(i);
    }

    /// A `subscriptions/listen` stream: acknowledged with the honoured
    /// filter, then kept by the engine (no default deadline).
    pub(super) fn start_listen(&mut self, i: usize) {
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        let bytes = self.store.bytes_mut(&mut c.buf);
        let params = c.params.map(|(a, b)| &bytes[a..b]);
        let (filter, subs) = match Filter::honour(&self.registry, params) {
            Ok(r) => r,
            Err(e) => return self.answer_error(i, e, None),
        };
        // Keep the honoured subscriptions before the body, which outgoing
        // messages overwrite: move them to its start (they lie inside it),
        // and start the body after them.
        let subs = subs.map_or(0..0, |s| json::span(bytes, s));
        let len = subs.len();
        bytes.copy_within(subs, c.body);
        c.listen = Some(Listen {
            filter,
            subscriptions: (c.body, c.body + len),
            owed: 0,
            ending: false,
        });
        c.body += len;
        let explicit = HeaderList::from_bytes(&bytes[..c.headers_len])
            .get(b"grpc-timeout")
            .is_some();
        if !explicit {
            c.deadline = None;
        }
        c.phase = Phase::Listening;
        if self
            .write_message(i, |w, id, subs| {
                listen::write_acknowledgement(w, id, &filter, subs)
            })
            .is_err()
        {
            self.drop_call(i);
        }
    }

    /// An in-band JSON-RPC error, then status 0.
    pub(super) fn answer_error(&mut self, i: usize, e: RpcError, data: Option<&[u8]>) {
        if let Some(c) = self.calls[i].as_mut() {
            c.phase = Phase::Handler;
            c.listen = None;
        }
        let sent = self.write_message(i, |w, id, _| {
            envelope::write_error(w, id, e.code, e.message.as_bytes(), data)
        });
        if sent.is_ok() {
            self.finish(i);
        } else {
            self.drop_call(i);
        }
    }
}
