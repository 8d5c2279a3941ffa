//! The application's answers on the tunnel: results, errors,
//! notifications and listen events as framed `JsonRpcMessage`s, and the
//! trailers after the last one.

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
    /// Answers the request with `result` (a JSON object) and ends the call
    /// with `grpc-status: 0`. A result larger than the call store can hold
    /// is answered with -32603 instead (and `TooLarge` returned).
    pub fn respond(&mut self, call: CallId, result: &[u8]) -> Result<(), SendError> {
        let i = self.ready_for_output(call)?;
        let sent = self.write_message(i, |w, id, _| {
            envelope::write_result(w, id, |w| {
                w.raw(result);
            })
        });
        if let Err(SendError::TooLarge { .. }) = sent {
            self.answer_error(i, dispatch::RESULT_TOO_LARGE, None);
            return sent;
        }
        sent?;
        self.finish(i);
        Ok(())
    }

    /// Answers the request with a JSON-RPC error (an ordinary error
    /// message, then `grpc-status: 0`: the binding's rule for errors inside
    /// a running handler). `data` is raw JSON.
    pub fn respond_error(
        &mut self,
        call: CallId,
        code: i32,
        message: &str,
        data: Option<&[u8]>,
    ) -> Result<(), SendError> {
        let i = self.ready_for_output(call)?;
        self.write_message(i, |w, id, _| {
            envelope::write_error(w, id, code, message.as_bytes(), data)
        })?;
        self.finish(i);
        Ok(())
    }

    /// Answers the request with the error the core names for a driver-side
    /// failure.
    pub fn fail(&mut self, call: CallId, failure: Failure) -> Result<(), SendError> {
        let e = failure.error();
        self.respond_error(call, e.code, e.message, None)
    }

    /// Sends a notification on the call's stream (progress):
    /// `{"jsonrpc":"2.0","method":method,"params":params}`.
    pub fn notify(&mut self, call: CallId, method: &str, params: &[u8]) -> Result<(), SendError> {
        let i = self.ready_for_output(call)?;
        self.write_message(i, |w, _, _| {
            envelope::write_notification(w, method.as_bytes(), params)
        })?;
        self.flush(i);
        Ok(())
    }

    /// Announces a change to every listen stream whose filter wants it;
    /// returns how many streams it went to. A list change announced while a
    /// stream is busy is sent once it is free (repeats fold into one); a
    /// resource update on a busy stream is dropped (the client reads the
    /// resource again on its next update).
    pub fn publish(&mut self, change: ListChange<'_>) -> usize {
        let bit = match change {
            ListChange::ToolsListChanged => 1,
            ListChange::PromptsListChanged => 2,
            ListChange::ResourcesListChanged => 4,
            ListChange::ResourceUpdated { .. } => 0,
        };
        let mut sent = 0;
        for i in 0..self.calls.len() {
            let Some(c) = self.calls[i].as_mut() else {
                continue;
            };
            let Some(l) = c.listen.as_mut().filter(|l| !l.ending) else {
                continue;
            };
            let bytes = self.store.bytes(&c.buf);
            let (a, b) = l.subscriptions;
            if !l.filter.wants(&bytes[a..b], &change) {
                continue;
            }
            if c.out_pos < c.out_end {
                l.owed |= bit;
                sent += usize::from(bit != 0);
                continue;
            }
            if self
                .write_message(i, |w, id, _| listen::write_event(w, id, &change))
                .is_ok()
            {
                sent += 1;
            }
        }
        self.drain_connection();
        sent
    }

    pub(super) fn ready_for_output(&mut self, call: CallId) -> Result<usize, SendError> {
        let i = call.index();
        let c = self
            .calls
            .get_mut(i)
            .and_then(Option::as_mut)
            .filter(|c| c.stream == call.stream && c.phase == Phase::Handler)
            .ok_or(SendError::Gone)?;
        if c.writing() {
            c.wants_writable = true;
            return Err(SendError::Busy);
        }
        Ok(i)
    }

    /// Writes one JSON-RPC message, framed, into the call's buffer (grown
    /// to fit when the store can) and starts sending it. `body` gets the
    /// writer, the request's raw id and a listen stream's subscriptions.
    pub(super) fn write_message<F>(&mut self, i: usize, body: F) -> Result<(), SendError>
    where
        F: Fn(&mut JsonWriter<'_>, &[u8], &[u8]),
    {
        let Some(c) = self.calls[i].as_mut() else {
            return Err(SendError::Gone);
        };
        let mut room = c.body + FRAMING;
        let mut tries = 0;
        let len = loop {
            if !self.store.grow(&mut c.buf, room) {
                return Err(SendError::TooLarge {
                    needed: room - c.body,
                });
            }
            let id_at = c.id_at();
            let subs_at = c
                .listen
                .map_or(0..0, |l| l.subscriptions.0..l.subscriptions.1);
            let bytes = self.store.bytes_mut(&mut c.buf);
            let (before, out) = bytes.split_at_mut(c.body);
            let (_, rest) = out.split_at_mut(FRAMING);
            let mut w = JsonWriter::new(rest);
            body(&mut w, &before[id_at], &before[subs_at]);
            match w.finish() {
                Ok(text) => break text.len(),
                // A second overflow cannot happen with the same body; give
                // up rather than loop.
                Err(e) if tries == 0 => {
                    tries += 1;
                    room = c.body + FRAMING + e.needed;
                }
                Err(e) => {
                    return Err(SendError::TooLarge {
                        needed: e.needed + FRAMING,
                    });
                }
            }
        };
        let bytes = self.store.bytes_mut(&mut c.buf);
        let start = frame_message(&mut bytes[c.body..c.body + FRAMING], len);
        c.out_pos = c.body + start;
        c.out_end = c.body + FRAMING + len;
        self.flush(i);
        Ok(())
    }

    /// Marks the call's answer complete: trailers follow the last message.
    pub(super) fn finish(&mut self, i: usize) {
        if let Some(c) = self.calls[i].as_mut() {
            c.phase = Phase::Finishing;
        }
        self.flush(i);
    }

    /// Sends what the call has pending: the response head, the message,
    /// a listen stream's owed events, and once the answer is complete, the
    /// trailers.
    pub(super) fn flush(&mut self, i: usize) {
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        let stream = c.stream;
        if !c.head_sent {
            match self.conn.send_headers(stream, response::HEAD, false) {
                Ok(()) => c.head_sent = true,
                Err(h2::StreamError::TransmitFull) => return,
                Err(_) => return self.drop_call(i),
            }
        }
        while c.writing() {
            let bytes = self.store.bytes(&c.buf);
            match self
                .conn
                .send_data(stream, &bytes[c.out_pos..c.out_end], false)
            {
                Ok(0) => return,
                Ok(n) => c.out_pos += n,
                Err(_) => return self.drop_call(i),
            }
        }
        let writable = core::mem::replace(&mut c.wants_writable, false);
        let phase = c.phase;
        let listen = c.listen;
        if writable {
            self.notice(i, Notice::Writable);
        }
        if let Some(l) = listen {
            return self.flush_listen(i, l);
        }
        if phase == Phase::Finishing {
            match self
                .conn
                .send_headers(stream, [Field::new(b"grpc-status", b"0")], true)
            {
                Ok(()) => {
                    self.remove(i);
                }
                Err(h2::StreamError::TransmitFull) => {}
                Err(_) => self.drop_call(i),
            }
        }
    }

    /// A free listen stream: the next owed change, else its final result
    /// when the server ends it.
    pub(super) fn flush_listen(&mut self, i: usize, l: Listen) {
        let owed = [
            (1, ListChange::ToolsListChanged),
            (2, ListChange::PromptsListChanged),
            (4, ListChange::ResourcesListChanged),
        ]
        .into_iter()
        .find(|(bit, _)| l.owed & bit != 0);
        if let Some((bit, change)) = owed {
            if let Some(listen) = self.calls[i].as_mut().and_then(|c| c.listen.as_mut()) {
                listen.owed &= !bit;
            }
            let _ = self.write_message(i, |w, id, _| listen::write_event(w, id, &change));
            return;
        }
        if !l.ending {
            return;
        }
        if let Some(c) = self.calls[i].as_mut() {
            c.listen = None;
        }
        let registry = self.registry;
        if self
            .write_message(i, |w, id, _| listen::write_final_result(w, id, &registry))
            .is_ok()
        {
            self.finish(i);
        } else {
            self.drop_call(i);
        }
    }
}

/// Writes the gRPC prefix and the protobuf header of a `JsonRpcMessage`
/// whose JSON of `len` octets follows `head`; returns where they start.
pub(super) fn frame_message(head: &mut [u8], len: usize) -> usize {
    let proto_len = JsonRpcMessage::prefix_len(len);
    let prefix = grpc::write_prefix((proto_len + len) as u32);
    let start = head.len() - proto_len - prefix.len();
    head[start..start + prefix.len()].copy_from_slice(&prefix);
    // `head` has room for the longest protobuf header (FRAMING).
    let _ = JsonRpcMessage::encode_prefix(len, &mut head[start + prefix.len()..]);
    start
}
