//! Reading a response body as its head framed it (RFC 9112 §6.3): a
//! `Content-Length`, the chunked coding, or everything until the
//! connection closes. Like [`ChunkedDecoder`], the reader keeps no data:
//! it says where the body's octets lie in each input.

use super::chunked::{Chunk, ChunkError, ChunkedDecoder};
use super::head::ResponseBody;

/// Why a body could not be read; the connection's framing is lost, so it
/// must close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// The chunked coding is malformed.
    Chunk(ChunkError),
    /// The connection closed before the body's end (a `Content-Length` or
    /// chunked body cut short).
    Truncated,
}

impl BodyError {
    /// Why, in a few words.
    pub const fn reason(self) -> &'static str {
        match self {
            Self::Chunk(e) => e.reason(),
            Self::Truncated => "the connection closed before the end of the body",
        }
    }
}

/// An incremental reader of one body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyReader {
    /// `left` octets to go (0: the body is complete).
    Length {
        left: u64,
    },
    Chunked(ChunkedDecoder),
    /// Ends when the connection does.
    UntilClose,
}

impl BodyReader {
    /// The reader of a body framed as `framing` says.
    pub const fn new(framing: ResponseBody) -> Self {
        match framing {
            ResponseBody::None => Self::Length { left: 0 },
            ResponseBody::Length(n) => Self::Length { left: n },
            ResponseBody::Chunked => Self::Chunked(ChunkedDecoder::new()),
            ResponseBody::UntilClose => Self::UntilClose,
        }
    }

    /// Whether the whole body was read (never, for a body that runs until
    /// close: [`BodyReader::eof`] ends it).
    pub fn is_done(&self) -> bool {
        match self {
            Self::Length { left } => *left == 0,
            Self::Chunked(d) => d.is_done(),
            Self::UntilClose => false,
        }
    }

    /// Reads `input` up to the next run of body octets, which it hands
    /// out (at most one run per call: call again with the rest). `done`
    /// says the body is complete; the input after `consumed` then belongs
    /// to the next response.
    pub fn feed(&mut self, input: &[u8]) -> Result<Chunk, BodyError> {
        match self {
            Self::Length { left } => {
                let n = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(input.len());
                *left -= n as u64;
                Ok(Chunk {
                    consumed: n,
                    data: 0..n,
                    done: *left == 0,
                })
            }
            Self::Chunked(d) => d.feed(input).map_err(BodyError::Chunk),
            Self::UntilClose => Ok(Chunk {
                consumed: input.len(),
                data: 0..input.len(),
                done: false,
            }),
        }
    }

    /// The connection closed: a body that runs until close ends cleanly
    /// here; any other one that is not complete was truncated.
    pub fn eof(&self) -> Result<(), BodyError> {
        match self {
            Self::UntilClose => Ok(()),
            _ if self.is_done() => Ok(()),
            _ => Err(BodyError::Truncated),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_body_ends_at_its_length_and_not_before() {
        let mut r = BodyReader::new(ResponseBody::Length(5));
        let c = r.feed(b"abc").unwrap();
        assert_eq!((c.consumed, c.data, c.done), (3, 0..3, false));
        assert_eq!(r.eof(), Err(BodyError::Truncated));
        let c = r.feed(b"deNEXT").unwrap();
        assert_eq!((c.consumed, c.data, c.done), (2, 0..2, true));
        assert_eq!(r.eof(), Ok(()));
    }

    #[test]
    fn an_until_close_body_takes_everything_and_ends_at_eof() {
        let mut r = BodyReader::new(ResponseBody::UntilClose);
        let c = r.feed(b"abc").unwrap();
        assert_eq!((c.consumed, c.data, c.done), (3, 0..3, false));
        assert!(!r.is_done());
        assert_eq!(r.eof(), Ok(()));
    }

    #[test]
    fn a_chunked_body_cut_short_is_truncated() {
        let mut r = BodyReader::new(ResponseBody::Chunked);
        let c = r.feed(b"3\r\nab").unwrap();
        assert_eq!(c.data, 3..5);
        assert_eq!(r.eof(), Err(BodyError::Truncated));
        assert_eq!(
            BodyReader::new(ResponseBody::Chunked).feed(b"x"),
            Err(BodyError::Chunk(ChunkError::BadSize))
        );
    }
}
