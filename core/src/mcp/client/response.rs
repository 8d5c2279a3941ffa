//! What comes back on a call's stream, as the connection hands it over:
//! the response head (HTTP status, `www-authenticate`), the gRPC messages
//! of the DATA (notifications, the response), the trailers (the JSON-RPC
//! error they carry, typed binding §9.3), resets (a refused stream is sent
//! again once) and the end of the connection; and the call's outcome that
//! follows (a -32020 on a `tools/call` starts the re-list and the retry).

use super::State;
use super::cache::{Relist, Warnings, after_answer, learn, start_relist};
use super::calls::{
    ERROR_ROOM, Kind, Mode, Slot, Terminal, Wire, abort, bytes, bytes_mut, copy_id, ensure,
    fail_rpc, fail_too_many_rounds, fail_transport, mark_refused, offset_in, outcome_bytes,
    outcome_member, reopen, restart, status_for_reset,
};
use super::events::{CallId, Queued};
use super::input;
use super::metadata::{CallOutcome, error_from_trailers};
use crate::grpc::Code;
use crate::h2::{ConnectionError, ErrorCode, HeaderList, HeadersKind, StreamRef};

use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;
use crate::records::Records;
use mcpwire_proto::tunnel::JsonRpcMessage;

impl<S: CallStore, R: Records<Slot<S::Buf>>, const CACHE: usize> State<S, R, CACHE> {
    pub(super) fn on_data(&mut self, stream: StreamRef, mut bytes: &[u8], end_stream: bool) {
        let Some(i) = self.index_of(stream) else {
            return;
        };
        let generation = self.slots[i].generation;
        while !bytes.is_empty() {
            let slot = &mut self.slots[i];
            let Some(a) = slot.active.as_mut() else {
                return;
            };
            if a.terminal.is_some() {
                return;
            }
            if a.response.is_some() {
                abort(
                    &mut self.store,
                    slot,
                    Code::Internal,
                    b"a message after the response",
                );
                return;
            }
            // The prefix names the message's length: the receive buffer
            // grows to it before the message is collected.
            let (used, declared) = match a.decoder.feed_prefix(bytes) {
                Ok(r) => r,
                Err(e) => {
                    abort(&mut self.store, slot, e.code(), e.message().as_bytes());
                    return;
                }
            };
            bytes = &bytes[used..];
            let Some(declared) = declared else {
                continue;
            };
            let start = a.msg_start;
            if !ensure(&mut self.store, &mut slot.rx, start + declared) {
                abort(
                    &mut self.store,
                    slot,
                    Code::ResourceExhausted,
                    b"message larger than the call buffer",
                );
                return;
            }
            let rx = bytes_mut(&mut self.store, &mut slot.rx);
            match a.decoder.feed(bytes, &mut rx[start..start + declared]) {
                Ok((used, done)) => {
                    bytes = &bytes[used..];
                    let Some(len) = done else {
                        continue;
                    };
                    a.msg_start = start + len;
                    if a.typed.is_some() {
                        // The one response message, protobuf: turned into
                        // JSON once the trailers say it stands.
                        a.response = Some((start, start + len));
                        continue;
                    }
                    let message = &rx[start..start + len];
                    // One walk checks the text and finds what tells a
                    // notification from the response, and the response's
                    // error for its outcome (and its result, for the
                    // caller).
                    let keys = [&b"method"[..], b"id", b"error", b"result"];
                    let Some((at, [method, id, error, result])) =
                        JsonRpcMessage::decode(message).ok().and_then(|j| {
                            let found =
                                json::validate_get_all(j, keys, json::DEFAULT_MAX_DEPTH).ok()?;
                            Some((offset_in(message, j, start), found))
                        })
                    else {
                        abort(
                            &mut self.store,
                            slot,
                            Code::Internal,
                            b"a message is not JSON-RPC",
                        );
                        return;
                    };
                    if method.is_some() && id.is_none() {
                        if !matches!(a.mode, Mode::Relist(_)) {
                            let call = CallId {
                                index: i as u16,
                                generation,
                                link: 0,
                            };
                            self.queue.push(Queued::Notification { call, at });
                        }
                    } else {
                        a.response = Some(at);
                        a.response_error = error.map(|e| offset_in(message, e, start));
                        a.response_result = result.map(|r| offset_in(message, r, start));
                    }
                }
                Err(e) => {
                    abort(&mut self.store, slot, e.code(), e.message().as_bytes());
                    return;
                }
            }
        }
        if end_stream {
            // Ended with DATA, without trailers.
            self.conclude(i, None);
        }
    }

    pub(super) fn on_headers(
        &mut self,
        stream: StreamRef,
        kind: HeadersKind,
        fields: HeaderList<'_>,
        end_stream: bool,
    ) {
        let Some(i) = self.index_of(stream) else {
            return;
        };
        let slot = &mut self.slots[i];
        let Some(a) = slot.active.as_mut() else {
            return;
        };
        if a.terminal.is_some() {
            return;
        }
        if let Some(v) = fields.get(b"www-authenticate")
            && let Some(dst) = a.auth.0.get_mut(..v.len())
        {
            dst.copy_from_slice(v);
            a.auth.1 = Some(v.len() as u16);
        }
        if kind == HeadersKind::Response {
            let status = fields
                .get(b":status")
                .and_then(|s| core::str::from_utf8(s).ok())
                .and_then(|s| s.parse::<u16>().ok());
            a.diagnostics.http_status = status;
            if status != Some(200) {
                a.reset_owed = !end_stream;
                let code = Code::from_http_status(status.unwrap_or(0));
                fail_transport(
                    &mut self.store,
                    slot,
                    code,
                    b"the response's HTTP status is not 200",
                    status,
                );
                return;
            }
        }
        if end_stream {
            self.conclude(i, Some(fields));
        }
    }

    pub(super) fn on_reset(&mut self, stream: StreamRef, code: ErrorCode) {
        let Some(i) = self.index_of(stream) else {
            return;
        };
        let slot = &mut self.slots[i];
        let Some(a) = slot.active.as_mut() else {
            return;
        };
        a.wire = Wire::Gone;
        if a.terminal.is_some() {
            return;
        }
        let status = status_for_reset(code);
        let http = a.diagnostics.http_status;
        let refused = code == ErrorCode::REFUSED_STREAM && http.is_none();
        if refused && !a.resent {
            // Not processed: the request, still in its buffer, goes out
            // once more on a new stream (the next pump opens it; a
            // connection going away refuses it there).
            a.resent = true;
            reopen(a, a.mode, self.max_message);
            return;
        }
        fail_transport(&mut self.store, slot, status, b"the stream was reset", http);
        if refused {
            mark_refused(slot);
        }
    }

    pub(super) fn on_closed(&mut self, stream: StreamRef) {
        if let Some(i) = self.index_of(stream)
            && let Some(a) = self.slots[i].active.as_mut()
        {
            a.wire = Wire::Gone;
        }
    }

    pub(super) fn on_connection_closed(&mut self, error: Option<ConnectionError>) {
        for slot in self.slots.iter_mut() {
            let Some(a) = slot.active.as_mut() else {
                continue;
            };
            a.wire = Wire::Gone;
            if a.terminal.is_none() {
                let http = a.diagnostics.http_status;
                let unsent = !a.head_sent;
                fail_transport(
                    &mut self.store,
                    slot,
                    Code::Unavailable,
                    self.close_message.unwrap_or(b"the connection closed"),
                    http,
                );
                if unsent {
                    mark_refused(slot);
                }
            }
        }
        self.closed = Some(error);
    }

    /// The stream ended (with trailers, or with DATA): the call's outcome.
    fn conclude(&mut self, i: usize, trailers: Option<HeaderList<'_>>) {
        let slot = &mut self.slots[i];
        let Some(a) = slot.active.as_mut() else {
            return;
        };
        // The request may not be complete: the server answered early.
        a.reset_owed = a.sent < a.frame.1 - a.frame.0;
        let status = trailers.and_then(|t| t.get(b"grpc-status").and_then(Code::parse));
        a.diagnostics.grpc_status = status;
        let http = a.diagnostics.http_status;
        #[cfg(feature = "typed")]
        if let (Some(rpc), Some(msg)) = (a.typed, a.response) {
            // A typed response stands only with trailers `grpc-status: 0`
            // (digest §1, §10); other trailers are read as an error below.
            if trailers.is_none() || status.is_none() {
                fail_transport(
                    &mut self.store,
                    slot,
                    Code::Internal,
                    b"the response ended without grpc-status",
                    http,
                );
                return;
            }
            if status == Some(Code::Ok) {
                match super::typed::response_json(&mut self.store, slot, rpc, msg) {
                    Ok(at) => self.outcome(i, false, at),
                    Err(why) => fail_transport(&mut self.store, slot, Code::Internal, why, http),
                }
                return;
            }
        }
        let Some(a) = slot.active.as_mut() else {
            return;
        };
        if let Some(at) = a.response.filter(|_| a.typed.is_none()) {
            // A complete response is kept, whatever the status.
            self.outcome(i, false, at);
            return;
        }
        if !a.decoder.is_idle() {
            fail_transport(
                &mut self.store,
                slot,
                Code::Internal,
                b"the stream ended inside a message",
                http,
            );
            return;
        }
        let Some(trailers) = trailers else {
            fail_transport(
                &mut self.store,
                slot,
                Code::Internal,
                b"the response ended without trailers",
                http,
            );
            return;
        };
        if status == Some(Code::Ok) {
            let has_id =
                json::get(&bytes(&self.store, &slot.req)[a.json.0..a.json.1], b"id").is_some();
            if has_id {
                fail_transport(
                    &mut self.store,
                    slot,
                    Code::Internal,
                    b"the call ended without a response",
                    http,
                );
            } else {
                a.terminal = Some(Terminal {
                    kind: Kind::Nothing,
                    in_req: false,
                    at: (0, 0),
                    diagnostics: a.diagnostics,
                    delivered: false,
                });
            }
            return;
        }
        // The application's id, also when a re-list's trailers fail it.
        let id = copy_id(
            bytes(&self.store, &slot.req)
                .get(a.orig_json.0..a.orig_json.1)
                .unwrap_or(b""),
        );
        let base = a.msg_start;
        // Room for the error: half to decode the trailers into, half to
        // write the response (escaped) into.
        let carried = [b"mcp-error-bin".as_slice(), b"grpc-message"]
            .iter()
            .filter_map(|n| trailers.get(n))
            .map(<[u8]>::len)
            .sum::<usize>();
        let room = 2 * (ERROR_ROOM + 6 * carried);
        if !ensure(&mut self.store, &mut slot.rx, base + room) {
            let _ = ensure(&mut self.store, &mut slot.rx, base + ERROR_ROOM);
        }
        let out = &mut bytes_mut(&mut self.store, &mut slot.rx)[base..];
        let half = out.len() / 2;
        let (outcome, text) = error_from_trailers(trailers, id.as_slice(), out);
        let text_len = text.map(<[u8]>::len);
        match (outcome, text_len) {
            (CallOutcome::RpcError, Some(n)) => {
                // `error_from_trailers` writes into the second half.
                let start = base + half;
                self.outcome(i, false, (start, start + n));
            }
            (
                CallOutcome::Transport {
                    status,
                    http_status,
                },
                _,
            ) => {
                let http = if http_status == 200 {
                    http
                } else {
                    Some(http_status)
                };
                let message = trailers
                    .get(b"grpc-message")
                    .unwrap_or(status.name().as_bytes());
                fail_transport(&mut self.store, slot, status, message, http);
                if let Some(t) = slot.active.as_mut().and_then(|a| a.terminal.as_mut()) {
                    t.diagnostics.grpc_status = Some(status);
                }
            }
            (CallOutcome::RpcError, None) => {
                let status = status.unwrap_or(Code::Unknown);
                fail_transport(
                    &mut self.store,
                    slot,
                    status,
                    b"unreadable error trailers",
                    http,
                );
            }
        }
    }

    /// A JSON-RPC response (`rx` or `req` at `at`) ends the current stream
    /// of call `i`: hand it out, or relist and retry.
    fn outcome(&mut self, i: usize, in_req: bool, at: (usize, usize)) {
        let call = self.call_id(i);
        let (is_error, mode, tool_call, tools_list, diagnostics, asks) = {
            let slot = &self.slots[i];
            let Some(a) = slot.active.as_ref() else {
                return;
            };
            let text = outcome_bytes(&self.store, slot, in_req);
            let error = outcome_member(a, text, in_req, at, a.response_error, b"error");
            // An `input_required` result of a call whose application
            // answers: checked, and how many rounds it took.
            let asks =
                match a.answers_input && error.is_none() && !matches!(a.mode, Mode::Relist(_)) {
                    true => outcome_member(a, text, in_req, at, a.response_result, b"result")
                        .filter(|r| input::asks_for_input(r))
                        .map(|r| input::InputRequired::read(r).map(|_| a.rounds)),
                    false => None,
                };
            (
                error.is_some(),
                a.mode,
                a.tool_call,
                a.tools_list,
                a.diagnostics,
                asks,
            )
        };
        let mut warnings = Warnings::new();
        let mut cursor = [0u8; 256];
        let next = {
            let text = outcome_bytes(&self.store, &self.slots[i], in_req)
                .get(at.0..at.1)
                .unwrap_or(b"");
            after_answer(
                mode,
                tool_call,
                text,
                &mut self.cache,
                &mut warnings,
                &mut cursor,
                self.max_pages,
            )
        };
        self.push_warnings(call, &warnings);
        let slot = &mut self.slots[i];
        match next {
            Relist::Deliver => {}
            Relist::Page { page, cursor } => {
                if start_relist(&mut self.store, slot, cursor, page, self.max_message) {
                    // The server's tool differs from the cache: read
                    // tools/list again, then send the call once more.
                    return;
                }
                if page > 0 {
                    // A page that does not fit ends the re-list: the call
                    // goes again with what was learned.
                    restart(slot, Mode::Retry, self.max_message);
                    return;
                }
            }
            Relist::Retry => {
                restart(slot, Mode::Retry, self.max_message);
                return;
            }
            Relist::Failed(e) => {
                fail_rpc(&mut self.store, slot, e);
                return;
            }
        }
        match asks {
            None => {}
            Some(Err(e)) => {
                fail_rpc(&mut self.store, slot, e);
                return;
            }
            Some(Ok(rounds)) if rounds >= self.max_rounds => {
                fail_too_many_rounds(&mut self.store, slot, self.max_rounds);
                return;
            }
            Some(Ok(_)) => {
                // The call waits for the application's answers.
                if let Some(a) = slot.active.as_mut() {
                    a.rounds = a.rounds.saturating_add(1);
                    a.terminal = Some(Terminal {
                        kind: Kind::InputRequired,
                        in_req,
                        at,
                        diagnostics,
                        delivered: false,
                    });
                }
                return;
            }
        }
        let mut warnings = Warnings::new();
        let kind = if is_error {
            Kind::Failed
        } else {
            Kind::Response
        };
        let mut terminal = Terminal {
            kind,
            in_req,
            at,
            diagnostics,
            delivered: false,
        };
        if kind == Kind::Response && tools_list && mode == Mode::Call && !in_req {
            // The application's own tools/list: learn it, and leave out the
            // tools with invalid annotations.
            let slot = &mut self.slots[i];
            let Some(a) = slot.active.as_ref() else {
                return;
            };
            let first = json::get(
                &bytes(&self.store, &slot.req)[a.json.0..a.json.1],
                b"params",
            )
            .and_then(|p| json::get(p, b"cursor"))
            .is_none();
            // The result without those tools goes after the message in
            // `rx` (when the store lets it grow).
            let to = a.msg_start.max(at.1);
            let _ = ensure(&mut self.store, &mut slot.rx, to + (at.1 - at.0) + 256);
            let (src, dst) = bytes_mut(&mut self.store, &mut slot.rx).split_at_mut(to);
            let text = &src[at.0..at.1];
            let result = json::get(text, b"result").unwrap_or(b"{}");
            let mut out = JsonWriter::new(dst);
            let id = json::get(text, b"id").map_or(&b"null"[..], json::trim);
            crate::mcp::envelope::write_result(&mut out, id, |w| {
                learn(&mut self.cache, result, first, Some(w), &mut warnings);
            });
            if !warnings.is_empty()
                && let Ok(t) = out.finish()
            {
                terminal.at = (to, to + t.len());
            }
            self.push_warnings(call, &warnings);
        }
        if let Some(a) = self.slots[i].active.as_mut() {
            a.terminal = Some(terminal);
        }
    }

    fn push_warnings(&mut self, call: CallId, warnings: &Warnings) {
        for (name, len, reason) in warnings.iter() {
            self.queue.push(Queued::Warning {
                call,
                name,
                len,
                reason,
            });
        }
    }
}
