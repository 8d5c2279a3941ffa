//! A call's record in the tunnel binding: its phase, where its parts lie in
//! its buffer, and how a request head is admitted.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for the application to accept the call's credentials,
    /// while the request message is collected.
    Authorizing,
    /// Collecting the request message.
    Body,
    /// The application holds the request.
    Handler,
    /// A `subscriptions/listen` stream the engine keeps.
    Listening,
    /// Writing the last message; trailers follow.
    Finishing,
}

/// What a call has to tell the application; at most one at a time (a call
/// asks to be authorized, then is handed over, then may wait to write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Notice {
    Authorize,
    Request,
    Writable,
}

/// A listen stream's state.
#[derive(Debug, Clone, Copy)]
pub(super) struct Listen {
    pub(super) filter: Filter,
    /// The honoured `resourceSubscriptions` array, in the call buffer.
    pub(super) subscriptions: (usize, usize),
    /// List changes announced while a message was being written (bit per
    /// [`ListChange`] without a payload); sent once the stream is free.
    pub(super) owed: u8,
    /// The server ends the stream once the stream is free.
    pub(super) ending: bool,
}

/// A call, and where its parts lie in its buffer: the request head's
/// octets, room for the id, room for the principal (with authorization),
/// then the body — the request message, later each outgoing message.
pub(super) struct Call<B> {
    pub(super) stream: StreamRef,
    pub(super) phase: Phase,
    pub(super) decoder: MessageDecoder,
    pub(super) buf: B,
    pub(super) headers_len: usize,
    pub(super) id_len: usize,
    pub(super) principal_len: Option<usize>,
    /// Where the body starts.
    pub(super) body: usize,
    pub(super) message_len: Option<usize>,
    pub(super) deadline: Option<Instant>,
    /// Where the request's params lie in the buffer once parsed.
    pub(super) params: Option<(usize, usize)>,
    pub(super) handler: Option<Handler>,
    /// An event for the application, not polled yet.
    pub(super) notice: Option<Notice>,
    /// The application was handed the request: it hears of the call's end.
    pub(super) handed: bool,
    pub(super) listen: Option<Listen>,
    /// The response head went out.
    pub(super) head_sent: bool,
    /// Outgoing octets in `buf[out_pos..out_end]`.
    pub(super) out_pos: usize,
    pub(super) out_end: usize,
    /// The application was told Busy and waits for Writable.
    pub(super) wants_writable: bool,
    /// The request ended while the call was being authorized.
    pub(super) ended: bool,
}

impl<B> Call<B> {
    pub(super) fn id_at(&self) -> core::ops::Range<usize> {
        self.headers_len..self.headers_len + self.id_len
    }

    pub(super) fn principal_at(&self) -> Option<core::ops::Range<usize>> {
        let start = self.headers_len + MAX_ID;
        self.principal_len.map(|n| start..start + n)
    }

    pub(super) fn params_at(&self) -> Option<core::ops::Range<usize>> {
        self.params.map(|(a, b)| a..b)
    }

    pub(super) fn writing(&self) -> bool {
        self.out_pos < self.out_end
    }
}

/// What the engine does with a request head.
pub(super) enum Admission<B> {
    /// Answer with this HTTP status.
    Http(u16),
    /// Answer with this gRPC status, trailers-only.
    Status(Code, &'static [u8]),
    /// No call buffer now: RST_STREAM(REFUSED_STREAM).
    Refused,
    /// A call: the head's octets are at the start of `buf`.
    Accepted {
        buf: B,
        headers_len: usize,
        timeout: Option<core::time::Duration>,
    },
}

/// Checks a request head (method, content type, encoding, path) and gives
/// an accepted call its buffer, holding the head.
pub(super) fn admit<S: CallStore>(
    store: &mut S,
    config: &ServerConfig,
    fields: HeaderList<'_>,
) -> Admission<S::Buf> {
    let head = match RequestHead::parse(fields) {
        Ok(head) => head,
        Err(HeadError::Http(status)) => return Admission::Http(status),
        Err(HeadError::Grpc(code, message)) => return Admission::Status(code, message.as_bytes()),
    };
    if head.path != TUNNEL_PATH {
        return Admission::Status(Code::Unimplemented, b"unknown method");
    }
    let raw = fields.as_bytes();
    let principal_room = if config.authorize { MAX_PRINCIPAL } else { 0 };
    // The head, the id, the principal, and room for a small request.
    let want = raw.len() + MAX_ID + principal_room;
    if want > store.max_len() {
        return Admission::Status(Code::ResourceExhausted, b"request headers too large");
    }
    let Some(mut buf) = store.take(want) else {
        return Admission::Refused;
    };
    store.bytes_mut(&mut buf)[..raw.len()].copy_from_slice(raw);
    Admission::Accepted {
        buf,
        headers_len: raw.len(),
        timeout: head.timeout,
    }
}

pub(super) fn call_id(i: usize, stream: StreamRef) -> CallId {
    CallId {
        index: i as u16,
        stream,
    }
}
