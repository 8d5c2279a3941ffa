//! How calls end on the tunnel: JSON-RPC errors in trailers
//! (`mcp-error-code`, `mcp-error-bin`), statuses, HTTP refusals, resets,
//! and giving a call's buffer back.

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
    /// Ends a call with a JSON-RPC error in headers-only trailers.
    pub(super) fn end_with_error(&mut self, i: usize, e: RpcError) {
        let mut data_buf = [0u8; 192];
        let params = self
            .calls
            .get(i)
            .and_then(Option::as_ref)
            .and_then(|c| c.params_at().map(|r| &self.store.bytes(&c.buf)[r]));
        let data = dispatch::error_data(&e, params, &mut data_buf);
        let Some(c) = self.calls[i].as_mut() else {
            return;
        };
        let stream = c.stream;
        // The call buffer holds the trailer values: the error response
        // JSON, its base64, and the percent-encoded message. What does not
        // fit is left out (`mcp-error-bin`) or cut (`grpc-message`).
        let _ = self.store.grow(&mut c.buf, c.body + ERROR_ROOM);
        let id_at = c.id_at();
        let bytes = self.store.bytes_mut(&mut c.buf);
        let (before, buf) = bytes.split_at_mut(c.body);
        let id_raw: &[u8] = if id_at.is_empty() {
            b"null"
        } else {
            &before[id_at]
        };
        let (json_part, rest) = buf.split_at_mut(buf.len() / 4);
        let (bin_part, msg_part) = rest.split_at_mut(rest.len() * 2 / 3);
        let mut w = JsonWriter::new(json_part);
        envelope::write_error(&mut w, id_raw, e.code, e.message.as_bytes(), data);
        let bin = match w.finish() {
            Ok(text) => match base64::encode(text, bin_part) {
                Some(n) if n <= MAX_ERROR_BIN => Some(n),
                _ => None,
            },
            Err(_) => None,
        };
        let message = &e.message.as_bytes()[..e.message.len().min(MAX_GRPC_MESSAGE)];
        let msg_len = response::percent_cut(message, msg_part);
        let mut code_text = [0u8; 12];
        let code_len = write_int(&mut code_text, i64::from(e.code));
        let status = e.grpc_code();
        let mut fields = [
            response::HEAD[0],
            response::HEAD[1],
            Field::new(b"grpc-status", status.as_bytes()),
            Field::new(b"grpc-message", &msg_part[..msg_len]),
            Field::new(b"mcp-error-code", &code_text[..code_len]),
            Field::new(b"mcp-error-bin", b""),
        ];
        let count = match bin {
            Some(n) => {
                fields[5] = Field::new(b"mcp-error-bin", &bin_part[..n]);
                6
            }
            None => 5,
        };
        let _ = self
            .conn
            .send_headers(stream, fields[..count].iter().copied(), true);
        self.remove(i);
    }

    /// Ends a call with a status and no message (trailers-only, or
    /// trailers after the response head).
    pub(super) fn end_with_status(&mut self, i: usize, code: Code, message: &[u8]) {
        let Some(c) = self.calls[i].as_ref() else {
            return;
        };
        let stream = c.stream;
        let head_sent = c.head_sent;
        let mid_message = c.writing();
        self.remove(i);
        if mid_message {
            // Trailers cannot cut a message: stop the stream instead.
            let _ = self.conn.reset(stream, ErrorCode::CANCEL);
            return;
        }
        let status = response::Status::new(code, message);
        let _ = if head_sent {
            self.conn.send_headers(stream, status.trailers(&[]), true)
        } else {
            self.conn
                .send_headers(stream, status.trailers_only(&[]), true)
        };
    }

    pub(super) fn status_only(&mut self, stream: StreamRef, code: Code, message: &[u8]) {
        let status = response::Status::new(code, message);
        let _ = self
            .conn
            .send_headers(stream, status.trailers_only(&[]), true);
    }

    pub(super) fn http_error(&mut self, stream: StreamRef, status: u16) {
        let text: &[u8] = match status {
            405 => b"405",
            415 => b"415",
            _ => b"400",
        };
        let _ = self
            .conn
            .send_headers(stream, [Field::new(b":status", text)], true);
    }

    /// Forgets a call whose stream is gone.
    pub(super) fn drop_call(&mut self, i: usize) {
        if let Some((stream, _)) = self.remove(i) {
            let _ = self.conn.reset(stream, ErrorCode::INTERNAL_ERROR);
        }
    }

    /// Ends a call's life in the engine: its buffer goes back to the store.
    pub(super) fn remove(&mut self, i: usize) -> Option<(StreamRef, Phase)> {
        let c = self.calls[i].take()?;
        self.store.put(c.buf);
        Some((c.stream, c.phase))
    }

    /// Gives call `i` an event for the application.
    pub(super) fn notice(&mut self, i: usize, notice: Notice) {
        if let Some(c) = self.calls.get_mut(i).and_then(Option::as_mut) {
            c.notice = Some(notice);
        }
    }
}

fn write_int(out: &mut [u8; 12], v: i64) -> usize {
    let mut w = JsonWriter::new(out);
    w.int(v);
    w.len()
}
