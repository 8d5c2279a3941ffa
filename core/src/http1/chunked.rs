//! The chunked transfer coding (RFC 9112 §7.1), decoded incrementally.
//!
//! The decoder keeps no data: each [`ChunkedDecoder::feed`] hands out where
//! the next run of body octets lies in its input, and the caller copies
//! them where it wants (a call buffer). Chunk extensions and trailer
//! fields are skipped, each within a bound. The same decoder serves a
//! server's request bodies and a client's response bodies.

use core::ops::Range;

/// Longest chunk extension skipped, per chunk.
pub const MAX_EXTENSION: u16 = 256;
/// Longest trailer section skipped.
pub const MAX_TRAILERS: u16 = 4096;

/// What one [`ChunkedDecoder::feed`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Octets of the input taken.
    pub consumed: usize,
    /// Body octets: a range of the input, inside `..consumed` (empty when
    /// none came).
    pub data: Range<usize>,
    /// The last chunk and the trailers are read: the body is complete, and
    /// the input after `consumed` belongs to the next message.
    pub done: bool,
}

/// Why a chunked body is malformed (the answer is 400, and the connection
/// closes: its framing is lost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkError {
    /// A chunk size that is not hexadecimal or does not fit 64 bits.
    BadSize,
    /// A CR not followed by LF, or no CRLF where the coding puts one.
    BadLineEnd,
    /// A chunk extension or the trailers over their bound.
    TooLong,
}

impl ChunkError {
    pub const fn reason(self) -> &'static str {
        match self {
            Self::BadSize => "invalid chunk size",
            Self::BadLineEnd => "invalid line end in chunked body",
            Self::TooLong => "chunk extension or trailers too long",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the hexadecimal size (`digits` so far).
    Size,
    /// Skipping a chunk extension up to the CR.
    Extension,
    /// The CR of the size line came; its LF must follow.
    SizeLf,
    /// `remaining` data octets.
    Data,
    /// The CRLF after a chunk's data.
    DataCr,
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// Inside a trailer field line.
    Trailer,
    TrailerLf,
    /// The final CRLF's LF.
    EndLf,
    Done,
}

/// An incremental decoder of one chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: State,
    size: u64,
    digits: u8,
    /// Octets skipped in the current extension or the trailers.
    skipped: u16,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    pub const fn new() -> Self {
        Self {
            state: State::Size,
            size: 0,
            digits: 0,
            skipped: 0,
        }
    }

    /// Whether the whole body was read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Reads framing octets of `input` up to the next run of data, which
    /// it hands out (at most one run per call: call again with the rest).
    pub fn feed(&mut self, input: &[u8]) -> Result<Chunk, ChunkError> {
        let mut pos = 0;
        while let Some(&b) = input.get(pos) {
            if self.state == State::Data {
                let n = usize::try_from(self.size)
                    .unwrap_or(usize::MAX)
                    .min(input.len() - pos);
                self.size -= n as u64;
                if self.size == 0 {
                    self.state = State::DataCr;
                }
                return Ok(Chunk {
                    consumed: pos + n,
                    data: pos..pos + n,
                    done: false,
                });
            }
            pos += 1;
            self.state = match (self.state, b) {
                (State::Size, _) if b.is_ascii_hexdigit() => {
                    let digit = u64::from(hex_value(b));
                    self.size = self
                        .size
                        .checked_mul(16)
                        .and_then(|s| s.checked_add(digit))
                        .ok_or(ChunkError::BadSize)?;
                    self.digits = self.digits.saturating_add(1);
                    State::Size
                }
                (State::Size, b';' | b' ' | b'\t') if self.digits > 0 => {
                    self.skipped = 0;
                    State::Extension
                }
                (State::Size, b'\r') if self.digits > 0 => State::SizeLf,
                (State::Size, _) => return Err(ChunkError::BadSize),
                (State::Extension, b'\r') => State::SizeLf,
                (State::Extension, b'\n') => return Err(ChunkError::BadLineEnd),
                (State::Extension, _) => {
                    self.skipped += 1;
                    if self.skipped > MAX_EXTENSION {
                        return Err(ChunkError::TooLong);
                    }
                    State::Extension
                }
                (State::SizeLf, b'\n') => {
                    self.digits = 0;
                    if self.size == 0 {
                        self.skipped = 0;
                        State::TrailerStart
                    } else {
                        State::Data
                    }
                }
                (State::DataCr, b'\r') => State::DataLf,
                (State::DataLf, b'\n') => State::Size,
                (State::TrailerStart, b'\r') => State::EndLf,
                (State::TrailerStart | State::Trailer, _) => {
                    self.skipped += 1;
                    if self.skipped > MAX_TRAILERS {
                        return Err(ChunkError::TooLong);
                    }
                    if b == b'\r' {
                        State::TrailerLf
                    } else if b == b'\n' {
                        return Err(ChunkError::BadLineEnd);
                    } else {
                        State::Trailer
                    }
                }
                (State::TrailerLf, b'\n') => State::TrailerStart,
                (State::EndLf, b'\n') => {
                    self.state = State::Done;
                    return Ok(Chunk {
                        consumed: pos,
                        data: pos..pos,
                        done: true,
                    });
                }
                (State::Done, _) => {
                    return Ok(Chunk {
                        consumed: pos - 1,
                        data: 0..0,
                        done: true,
                    });
                }
                (
                    State::SizeLf
                    | State::DataCr
                    | State::DataLf
                    | State::TrailerLf
                    | State::EndLf
                    | State::Data,
                    _,
                ) => return Err(ChunkError::BadLineEnd),
            };
        }
        Ok(Chunk {
            consumed: pos,
            data: pos..pos,
            done: self.state == State::Done,
        })
    }
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b.wrapping_sub(b'A').wrapping_add(10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;
    use std::vec::Vec;

    /// Decodes `input` fed in pieces of `piece` octets; the body and the
    /// octets after it.
    fn decode(input: &[u8], piece: usize) -> Result<(Vec<u8>, usize), ChunkError> {
        let mut d = ChunkedDecoder::new();
        let mut body = Vec::new();
        let mut pos = 0;
        while pos < input.len() {
            let end = (pos + piece).min(input.len());
            let mut slice = &input[pos..end];
            loop {
                let c = d.feed(slice)?;
                body.extend_from_slice(&slice[c.data.clone()]);
                pos += c.consumed;
                slice = &slice[c.consumed..];
                if c.done {
                    return Ok((body, input.len() - pos));
                }
                if slice.is_empty() {
                    break;
                }
            }
        }
        Err(ChunkError::BadLineEnd)
    }

    #[test]
    fn decodes_in_any_pieces() {
        let input = b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        for piece in 1..input.len() {
            let (body, rest) = decode(input, piece).unwrap();
            assert_eq!(body, b"helloabcdefghijklmnopqrstuvwxyz", "piece {piece}");
            assert_eq!(rest, 4);
        }
    }

    #[test]
    fn refuses_bad_sizes_and_line_ends() {
        for (input, e) in [
            (&b"g\r\n"[..], ChunkError::BadSize),
            (b"\r\n", ChunkError::BadSize),
            (b"-1\r\n", ChunkError::BadSize),
            (b"11111111111111111\r\n", ChunkError::BadSize),
            (b"3\r\nabcX", ChunkError::BadLineEnd),
            (b"3\nabc", ChunkError::BadSize),
            (b"0\r\n\r\r", ChunkError::BadLineEnd),
        ] {
            assert_eq!(
                decode(input, 64),
                Err(e),
                "{}",
                String::from_utf8_lossy(input)
            );
        }
        let mut long = b"1;".to_vec();
        long.resize(300, b'x');
        assert_eq!(decode(&long, 64), Err(ChunkError::TooLong));
    }
}
