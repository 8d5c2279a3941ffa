//! How calls end on the tunnel: JSON-RPC errors in trailers
//! (`grpc-message`, `mcp-error-code`, `mcp-error-bin`; typed binding §9.2),
//! statuses, HTTP refusals and resets.

use super::*;
use crate::grpc::base64;

/// Longest `grpc-message` sent (typed binding §9.2).
const MAX_GRPC_MESSAGE: usize = 1024;
/// Longest `mcp-error-bin` value sent.
const MAX_ERROR_BIN: usize = 4096;
/// Room asked of the store after the error response for the trailer
/// values: its base64 and the percent-encoded message.
const ERROR_ROOM: usize = 8 << 10;

impl<
    'r,
    S: CallStore,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    FB: Storage<BUF> + Default,
> Server<'r, S, STREAMS, TABLE, BUF, FB>
{
    /// Ends a call with a JSON-RPC error in headers-only trailers. What
    /// does not fit the call buffer is left out (`mcp-error-bin`) or cut
    /// (`grpc-message`).
    pub(super) fn end_with_error(&mut self, i: usize, e: RpcError) {
        let Some(stream) = self.engine.calls[i].as_ref().map(|c| c.x.stream) else {
            return;
        };
        let mut code_text = [0u8; 12];
        let code_len = write_int(&mut code_text, i64::from(e.code));
        let status = e.grpc_code();
        if let Some((buf, json_len)) = self.engine.protocol_error(i, &e, ERROR_ROOM) {
            let (json, rest) = buf.split_at_mut(json_len);
            let (bin_part, msg_part) = rest.split_at_mut(rest.len() * 2 / 3);
            let bin = (json_len > 0)
                .then(|| base64::encode(json, bin_part))
                .flatten()
                .filter(|&n| n <= MAX_ERROR_BIN);
            let msg_len = grpc_message(e.message.as_bytes(), msg_part);
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
        }
        self.engine.remove(i);
    }

    /// Ends a call with a status and no message (trailers-only, or
    /// trailers after the response head).
    pub(super) fn end_with_status(&mut self, i: usize, code: Code, message: &[u8]) {
        let Some(c) = self.engine.calls[i].as_ref() else {
            return;
        };
        let mid_message = c.writing();
        let Some((x, _)) = self.engine.remove(i) else {
            return;
        };
        if mid_message {
            // Trailers cannot cut a message: stop the stream instead.
            let _ = self.conn.reset(x.stream, ErrorCode::CANCEL);
            return;
        }
        let status = response::Status::new(code, message);
        let _ = if x.head_sent {
            super::send_answer_headers(&mut self.conn, x.stream, status.trailers(&[]), true)
        } else {
            super::send_answer_headers(&mut self.conn, x.stream, status.trailers_only(&[]), true)
        };
    }

    pub(super) fn status_only(&mut self, stream: StreamRef, code: Code, message: &[u8]) {
        let status = response::Status::new(code, message);
        let _ = super::send_answer_headers(&mut self.conn, stream, status.trailers_only(&[]), true);
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

    /// Forgets a call whose answer cannot go out.
    pub(super) fn drop_call(&mut self, i: usize) {
        if let Some((x, _)) = self.engine.remove(i) {
            let _ = self.conn.reset(x.stream, ErrorCode::INTERNAL_ERROR);
        }
    }
}

/// Percent-encodes into `out` at most [`MAX_GRPC_MESSAGE`] octets of
/// `text`, cut at a character boundary (the cut is left to
/// [`response::percent_cut`], so a character is never split); returns the
/// length.
pub(super) fn grpc_message(text: &[u8], out: &mut [u8]) -> usize {
    let room = out.len().min(3 * MAX_GRPC_MESSAGE);
    out.get_mut(..room)
        .map_or(0, |out| response::percent_cut(text, out))
}

fn write_int(out: &mut [u8; 12], v: i64) -> usize {
    let mut w = crate::mcp::writer::JsonWriter::new(out);
    w.int(v);
    w.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::percent;

    /// Binding §9.2: grpc-message carries at most 1024 bytes of text. A
    /// text of 1023 ASCII octets and then two-octet characters has octet
    /// 1024 inside a character: the value stops before that character.
    #[test]
    fn grpc_message_is_cut_at_a_character_boundary_before_1024() {
        let mut text = [b'a'; 1023 + 2 * 8];
        for pair in text[1023..].chunks_mut(2) {
            pair.copy_from_slice("\u{e9}".as_bytes());
        }
        let mut out = [0u8; 4 * MAX_GRPC_MESSAGE];
        let n = grpc_message(&text, &mut out);
        let mut decoded = [0u8; 4 * MAX_GRPC_MESSAGE];
        let m = percent::decode(&out[..n], &mut decoded).unwrap();
        let cut = &decoded[..m];
        assert!(core::str::from_utf8(cut).is_ok());
        assert_eq!(cut.len(), 1023);
        assert_eq!(cut, &text[..1023]);
        // A whole text under the cap is sent whole.
        let n = grpc_message("\u{e9}t\u{e9}".as_bytes(), &mut out);
        let m = percent::decode(&out[..n], &mut decoded).unwrap();
        assert_eq!(&decoded[..m], "\u{e9}t\u{e9}".as_bytes());
    }
}
