//! What the answer to one exchange means (MCP 2026-07-28 §5.1–§5.2): a
//! request gets one JSON response, or an event stream carrying its
//! notifications and then its response; a notification gets 202. The
//! reader takes the response's status, media type and body octets (from
//! HTTP/1.1 or HTTP/2 alike) and writes each message into the caller's
//! buffer (the call's receive buffer: its length bounds a message).
//!
//! Nothing is invented: a stream that ends before the response, a request
//! from the server on a modern stream, a response to another id, a body
//! that is not JSON-RPC, a content type that is neither JSON nor an event
//! stream — each is a [`Judgement::Failed`] naming what happened, with the
//! status, the media type and the body's first octets for the diagnostics.

use crate::http1::MediaType;
use crate::http1::sse::SseParser;
use crate::mcp::error::{INVALID_REQUEST, RpcError};
use crate::mcp::json;

/// Longest request id kept to match the response with.
pub const MAX_ID: usize = 64;
/// Octets of an unexpected body kept for the diagnostics.
pub const EXCERPT: usize = 64;

/// What the request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A request (it has an id): its response.
    Response,
    /// A notification or a response of ours: 202 Accepted.
    Accepted,
}

/// Why an exchange gave no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpFailure {
    pub reason: &'static str,
    pub status: u16,
    pub media: MediaType,
    /// The body's first octets ([`EXCERPT`] at most) are `buf[..excerpt]`
    /// of the buffer last given to the reader (0 when none were kept).
    pub excerpt: usize,
}

/// What the exchange said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// A notification for the call (progress, a log message), in
    /// `buf[..len]`; more may follow.
    Notification { len: usize },
    /// The call's response, in `buf[..len]`: a `result`, or an `error`
    /// with this code. The last judgement of the exchange.
    Response { len: usize, error: Option<i64> },
    /// The notification was accepted.
    Accepted,
    /// The exchange failed; the last judgement.
    Failed(HttpFailure),
}

/// What one [`ResponseReader::on_body`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Octets of the input taken: give the rest again, after using the
    /// judgement's message (the next step may write over it).
    pub consumed: usize,
    pub judgement: Option<Judgement>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Head,
    /// A JSON body, `len` octets of it in the buffer.
    Json,
    /// An event stream.
    Sse,
    /// A body that can only be a failure: its first octets are kept.
    Other(&'static str),
    /// Judged: the rest of the body is read and dropped.
    Done,
}

/// The judge of one exchange's response.
#[derive(Debug, Clone)]
pub struct ResponseReader {
    expect: Expect,
    id: [u8; MAX_ID],
    id_len: u8,
    mode: Mode,
    status: u16,
    media: MediaType,
    len: usize,
    sse: SseParser,
}

/// What a JSON-RPC message is.
enum Message {
    Request,
    Notification,
    Response { error: Option<i64> },
}

impl ResponseReader {
    /// The reader for the exchange that sends `request` (one JSON-RPC
    /// message): a request waits for its response, matched by id.
    pub fn new(request: &[u8]) -> Result<Self, RpcError> {
        let mut reader = Self::accepted();
        let is_request = json::get(request, b"method").is_some();
        if let Some(id) = json::get(request, b"id").filter(|_| is_request) {
            let id = json::trim(id);
            let dst = reader.id.get_mut(..id.len()).ok_or(RpcError::new(
                INVALID_REQUEST,
                "request id longer than 64 octets",
            ))?;
            dst.copy_from_slice(id);
            reader.id_len = id.len() as u8;
            reader.expect = Expect::Response;
        }
        Ok(reader)
    }

    /// The reader of an exchange whose answer is only its status: a
    /// request of the 2024 HTTP+SSE shape (its response comes on the event
    /// stream, §13.1), a `DELETE`. 2xx is [`Judgement::Accepted`].
    pub fn accepted() -> Self {
        Self {
            expect: Expect::Accepted,
            id: [0; MAX_ID],
            id_len: 0,
            mode: Mode::Head,
            status: 0,
            media: MediaType::Other,
            len: 0,
            sse: SseParser::new(),
        }
    }

    /// The status of the response head, once it came (0 before).
    pub fn status(&self) -> u16 {
        self.status
    }

    pub fn expect(&self) -> Expect {
        self.expect
    }

    /// Whether the exchange is judged (the rest of its body is dropped).
    pub fn is_done(&self) -> bool {
        self.mode == Mode::Done
    }

    /// The response head came: its status and media type. A judgement
    /// when the status alone decides (202 for a notification; 401, 403,
    /// or no body for a request).
    pub fn on_head(&mut self, status: u16, media: MediaType) -> Option<Judgement> {
        self.status = status;
        self.media = media;
        self.len = 0;
        let ok = (200..300).contains(&status);
        self.mode = match (self.expect, status, media) {
            (Expect::Accepted, _, _) if ok => return self.judged(Judgement::Accepted),
            (Expect::Accepted, _, _) => Mode::Other("the server refused the notification"),
            (Expect::Response, 401, _) => return self.failed("unauthorized (401)", 0),
            (Expect::Response, 403, _) => return self.failed("forbidden (403)", 0),
            (Expect::Response, 202 | 204, _) => {
                return self.failed("no response to a request (202 or 204)", 0);
            }
            (Expect::Response, _, MediaType::Json) => Mode::Json,
            (Expect::Response, _, MediaType::EventStream) if ok => Mode::Sse,
            (Expect::Response, _, _) if ok => {
                Mode::Other("content type neither JSON nor an event stream")
            }
            (Expect::Response, _, _) => Mode::Other("HTTP error status"),
        };
        None
    }

    /// Body octets came (a run of the response's body, in order); `buf` is
    /// the same buffer on every call of the exchange.
    pub fn on_body(&mut self, data: &[u8], buf: &mut [u8]) -> Step {
        match self.mode {
            Mode::Head | Mode::Done => Step {
                consumed: data.len(),
                judgement: None,
            },
            Mode::Json => {
                let judgement = match buf.get_mut(self.len..self.len + data.len()) {
                    Some(dst) => {
                        dst.copy_from_slice(data);
                        self.len += data.len();
                        None
                    }
                    None => self.failed("response larger than the receive buffer", 0),
                };
                Step {
                    consumed: data.len(),
                    judgement,
                }
            }
            Mode::Other(reason) => {
                let room = EXCERPT.min(buf.len());
                let keep = data.len().min(room.saturating_sub(self.len));
                if let (Some(dst), Some(src)) =
                    (buf.get_mut(self.len..self.len + keep), data.get(..keep))
                {
                    dst.copy_from_slice(src);
                    self.len += keep;
                }
                let full = self.len >= room;
                Step {
                    consumed: data.len(),
                    judgement: if full {
                        self.failed(reason, self.len)
                    } else {
                        None
                    },
                }
            }
            Mode::Sse => match self.sse.feed(data, buf) {
                Err(e) => Step {
                    consumed: data.len(),
                    judgement: self.failed(e.reason(), 0),
                },
                Ok(fed) => Step {
                    consumed: fed.consumed,
                    judgement: fed
                        .event
                        .filter(|e| e.is_message() && e.data_len > 0)
                        .and_then(|e| self.on_message(buf, e.data_len)),
                },
            },
        }
    }

    /// The body ended (the response is complete): the judgement still due.
    pub fn on_end(&mut self, buf: &[u8]) -> Option<Judgement> {
        match self.mode {
            Mode::Head => self.failed("the exchange ended without a response head", 0),
            Mode::Done => None,
            Mode::Other(reason) => self.failed(reason, self.len),
            Mode::Sse => self.failed("event stream ended before the response", 0),
            Mode::Json => {
                let len = self.len;
                match buf.get(..len).map(|m| self.classify(m)) {
                    Some(Some(Message::Response { error }))
                        if error.is_some() || (200..300).contains(&self.status) =>
                    {
                        self.judged(Judgement::Response { len, error })
                    }
                    Some(Some(Message::Response { .. })) => self.failed("HTTP error status", 0),
                    _ => {
                        let excerpt = len.min(EXCERPT);
                        self.failed("JSON body is not the call's JSON-RPC response", excerpt)
                    }
                }
            }
        }
    }

    /// One `message` event's data, `buf[..len]`.
    fn on_message(&mut self, buf: &[u8], len: usize) -> Option<Judgement> {
        let message = buf.get(..len)?;
        match self.classify(message) {
            Some(Message::Notification) => Some(Judgement::Notification { len }),
            Some(Message::Response { error }) => self.judged(Judgement::Response { len, error }),
            Some(Message::Request) => {
                self.failed("server sent a request on a 2026-07-28 stream (§5.2)", 0)
            }
            None => self.failed(
                "message on the event stream is not JSON-RPC for this call",
                0,
            ),
        }
    }

    /// What `message` is; `None` when it is not JSON-RPC, or a response
    /// to another id (an error without an id, which a server sends when it
    /// could not read ours, is this call's).
    fn classify(&self, message: &[u8]) -> Option<Message> {
        json::validate(message, json::DEFAULT_MAX_DEPTH).ok()?;
        if json::kind(message) != Some(json::Kind::Object) {
            return None;
        }
        let [method, id, result, error] =
            json::get_all(message, [b"method", b"id", b"result", b"error"]);
        match (method, id) {
            (Some(_), Some(_)) => return Some(Message::Request),
            (Some(_), None) => return Some(Message::Notification),
            _ => {}
        }
        let code = match (result, error) {
            (Some(_), None) => None,
            (None, Some(e)) => Some(json::get(e, b"code").and_then(json::as_i64)?),
            _ => return None,
        };
        let id = id.map(json::trim);
        let ours = self.id.get(..usize::from(self.id_len));
        let matches = match id {
            Some(b"null") | None => code.is_some(),
            Some(id) => Some(id) == ours,
        };
        matches.then_some(Message::Response { error: code })
    }

    fn judged(&mut self, j: Judgement) -> Option<Judgement> {
        self.mode = Mode::Done;
        Some(j)
    }

    fn failed(&mut self, reason: &'static str, excerpt: usize) -> Option<Judgement> {
        self.judged(Judgement::Failed(HttpFailure {
            reason,
            status: self.status,
            media: self.media,
            excerpt,
        }))
    }
}
