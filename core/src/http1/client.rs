//! The client side of one HTTP/1.1 connection (RFC 9112), sans-IO: one
//! exchange at a time, no pipelining. The caller writes each request
//! (with [`HeadWriter::request`](super::write::HeadWriter::request)) after
//! [`ClientConnection::start`], then hands the connection what the server
//! sends; the connection finds the response head (kept, within a bound,
//! for [`ClientConnection::head`]), frames the body and says where its
//! octets lie in the input, and whether the connection can carry the next
//! request.
//!
//! Interim 1xx responses (`100 Continue`, `103 Early Hints`) are skipped;
//! a `101` is refused (no request of ours asks to switch protocols).
//! Any failure is final: the connection's framing is lost and it must be
//! closed.

use core::ops::Range;

use super::MAX_HEADERS;
use super::body::{BodyError, BodyReader};
use super::chunked::ChunkError;
use super::head::{EMPTY_HEADER, HeadError, HeadScanner, Header, ResponseHead};

/// The default bound on a response head, in octets.
pub const MAX_RESPONSE_HEAD: usize = 16 * 1024;

/// Why an exchange failed; the connection is unusable after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpError {
    /// Not a valid HTTP/1.x response head, or a body framing that the
    /// head makes ambiguous (`Transfer-Encoding` beside
    /// `Content-Length`, conflicting lengths, an unknown coding).
    MalformedHead(&'static str),
    /// A response head over the connection's bound (or more fields than
    /// [`MAX_HEADERS`]).
    HeadTooLarge,
    /// The connection closed before the response ended (in its head, or
    /// in a body whose length or chunks say more was due).
    Truncated,
    /// The chunked coding is malformed.
    BadChunk(ChunkError),
    /// Octets came when no request was waiting for an answer.
    Unsolicited,
}

impl HttpError {
    /// Why, in a few words.
    pub const fn reason(self) -> &'static str {
        match self {
            Self::MalformedHead(why) => why,
            Self::HeadTooLarge => "response head too large",
            Self::Truncated => "the connection closed before the end of the response",
            Self::BadChunk(e) => e.reason(),
            Self::Unsolicited => "response octets with no request outstanding",
        }
    }
}

impl From<HeadError> for HttpError {
    fn from(e: HeadError) -> Self {
        match e {
            HeadError::TooManyFields => Self::HeadTooLarge,
            HeadError::Malformed(why) => Self::MalformedHead(why),
            HeadError::UnsupportedCoding => Self::MalformedHead("unsupported transfer coding"),
        }
    }
}

impl From<BodyError> for HttpError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::Chunk(c) => Self::BadChunk(c),
            BodyError::Truncated => Self::Truncated,
        }
    }
}

/// What the response did, one step at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseEvent {
    /// The final response head came: read it with
    /// [`ClientConnection::head`].
    Head { status: u16 },
    /// Body octets: a range of the input just given to
    /// [`ClientConnection::recv`].
    Data(Range<usize>),
    /// The response is complete; `keep_alive` says whether the connection
    /// can carry the next request (otherwise close it).
    End { keep_alive: bool },
    /// The exchange failed; close the connection.
    Failed(HttpError),
}

/// What one [`ClientConnection::recv`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recv {
    /// Octets of the input taken; the rest is the caller's to give again.
    pub consumed: usize,
    /// At most one event a call: after one, call again with the rest of
    /// the input (even none: an `End` may be due).
    pub event: Option<ResponseEvent>,
}

/// Why [`ClientConnection::start`] refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    /// An exchange is under way (no pipelining).
    Busy,
    /// The connection closed or failed.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No request outstanding; the connection can take one.
    Idle,
    /// Reading the response head.
    Head { scanner: HeadScanner },
    /// Reading the body.
    Body {
        reader: BodyReader,
        keep_alive: bool,
    },
    /// The body is complete; `End` is the next event.
    Ending { keep_alive: bool },
    /// Failed or closed for good.
    Closed,
}

/// One HTTP/1.1 connection seen from the client, with a response head
/// bound of `HEAD` octets.
#[derive(Debug, Clone)]
pub struct ClientConnection<const HEAD: usize = MAX_RESPONSE_HEAD> {
    state: State,
    /// The request in flight is `HEAD` (its response has no body).
    head_request: bool,
    head: [u8; HEAD],
    head_len: usize,
}

impl<const HEAD: usize> Default for ClientConnection<HEAD> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const HEAD: usize> ClientConnection<HEAD> {
    pub const fn new() -> Self {
        Self {
            state: State::Idle,
            head_request: false,
            head: [0; HEAD],
            head_len: 0,
        }
    }

    /// Whether the connection can take a request now.
    pub fn is_idle(&self) -> bool {
        self.state == State::Idle
    }

    /// Whether the connection is done for: it failed, or a response ended
    /// it. The driver closes the socket.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Starts an exchange whose request uses `method`; the caller then
    /// writes the request. Only `HEAD` changes how the response is read.
    pub fn start(&mut self, method: &str) -> Result<(), StartError> {
        match self.state {
            State::Idle => {
                self.head_request = method == "HEAD";
                self.head_len = 0;
                self.state = State::Head {
                    scanner: HeadScanner::new(),
                };
                Ok(())
            }
            State::Closed => Err(StartError::Closed),
            _ => Err(StartError::Busy),
        }
    }

    /// The final response's head, parsed into `fields` (at least
    /// [`MAX_HEADERS`] of them); available from the `Head` event until the
    /// next exchange starts.
    pub fn head<'s, 'h>(&'s self, fields: &'h mut [Header<'s>]) -> Option<ResponseHead<'s, 'h>> {
        let head = self.head.get(..self.head_len)?;
        ResponseHead::parse(head, fields).ok()
    }

    /// Reads what the server sent, up to the next event. See [`Recv`].
    pub fn recv(&mut self, input: &[u8]) -> Recv {
        match self.read(input) {
            Ok(r) => r,
            Err((consumed, e)) => {
                self.state = State::Closed;
                Recv {
                    consumed,
                    event: Some(ResponseEvent::Failed(e)),
                }
            }
        }
    }

    /// The server closed its side: a body that runs until close ends here
    /// (with `End`, keep-alive off); a response cut short fails. `None`
    /// when no exchange was under way.
    pub fn recv_eof(&mut self) -> Option<ResponseEvent> {
        let state = core::mem::replace(&mut self.state, State::Closed);
        match state {
            State::Idle | State::Closed => None,
            State::Ending { .. } => Some(ResponseEvent::End { keep_alive: false }),
            State::Head { .. } => Some(ResponseEvent::Failed(HttpError::Truncated)),
            State::Body { reader, .. } => Some(match reader.eof() {
                Ok(()) => ResponseEvent::End { keep_alive: false },
                Err(e) => ResponseEvent::Failed(e.into()),
            }),
        }
    }

    fn read(&mut self, input: &[u8]) -> Result<Recv, (usize, HttpError)> {
        let mut pos = 0;
        loop {
            let rest = input.get(pos..).unwrap_or_default();
            match self.state {
                State::Closed => {
                    return Ok(Recv {
                        consumed: pos,
                        event: None,
                    });
                }
                State::Idle if rest.is_empty() => {
                    return Ok(Recv {
                        consumed: pos,
                        event: None,
                    });
                }
                State::Idle => return Err((pos, HttpError::Unsolicited)),
                State::Ending { keep_alive } => {
                    self.state = if keep_alive {
                        State::Idle
                    } else {
                        State::Closed
                    };
                    return Ok(Recv {
                        consumed: pos,
                        event: Some(ResponseEvent::End { keep_alive }),
                    });
                }
                State::Head { mut scanner } => {
                    let found = scanner.scan(rest);
                    let take = found.unwrap_or(rest.len());
                    let room = HEAD - self.head_len;
                    let at = self.head_len;
                    let dst = self
                        .head
                        .get_mut(at..at + take)
                        .filter(|_| take <= room)
                        .ok_or((pos + take.min(room), HttpError::HeadTooLarge))?;
                    dst.copy_from_slice(rest.get(..take).unwrap_or_default());
                    self.head_len += take;
                    pos += take;
                    let Some(_) = found else {
                        self.state = State::Head { scanner };
                        return Ok(Recv {
                            consumed: pos,
                            event: None,
                        });
                    };
                    if let Some(event) = self.on_head().map_err(|e| (pos, e))? {
                        return Ok(Recv {
                            consumed: pos,
                            event: Some(event),
                        });
                    }
                }
                State::Body {
                    mut reader,
                    keep_alive,
                } => {
                    let chunk = reader.feed(rest).map_err(|e| (pos, e.into()))?;
                    self.state = if reader.is_done() {
                        State::Ending { keep_alive }
                    } else {
                        State::Body { reader, keep_alive }
                    };
                    let data = chunk.data.start + pos..chunk.data.end + pos;
                    pos += chunk.consumed;
                    if !data.is_empty() {
                        return Ok(Recv {
                            consumed: pos,
                            event: Some(ResponseEvent::Data(data)),
                        });
                    }
                    if chunk.consumed == 0 && !reader.is_done() {
                        return Ok(Recv {
                            consumed: pos,
                            event: None,
                        });
                    }
                }
            }
        }
    }

    /// A whole head is in `head`: an interim response is dropped (the
    /// final one follows), a final one sets up its body.
    fn on_head(&mut self) -> Result<Option<ResponseEvent>, HttpError> {
        let mut fields = [EMPTY_HEADER; MAX_HEADERS];
        let head = self.head.get(..self.head_len).unwrap_or_default();
        let parsed = ResponseHead::parse(head, &mut fields)?;
        let status = parsed.status;
        if status == 101 {
            return Err(HttpError::MalformedHead(
                "101 switching protocols was not asked for",
            ));
        }
        if status < 200 {
            self.head_len = 0;
            self.state = State::Head {
                scanner: HeadScanner::new(),
            };
            return Ok(None);
        }
        let framing = parsed.body(self.head_request)?;
        let keep_alive = parsed.keep_alive() && framing != super::head::ResponseBody::UntilClose;
        self.state = State::Body {
            reader: BodyReader::new(framing),
            keep_alive,
        };
        Ok(Some(ResponseEvent::Head { status }))
    }
}
