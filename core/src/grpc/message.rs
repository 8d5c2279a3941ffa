//! Length-prefixed messages (PROTOCOL-HTTP2, "Length-Prefixed-Message"):
//! a compressed flag, a 4-octet big-endian length, the message.

/// Octets before each message.
pub const PREFIX_LEN: usize = 5;

/// Writes the prefix of an uncompressed message of `len` octets.
pub fn write_prefix(len: u32) -> [u8; PREFIX_LEN] {
    let l = len.to_be_bytes();
    [0, l[0], l[1], l[2], l[3]]
}

/// Why the message stream is broken, and the status it earns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageError {
    /// The compressed flag is set; only identity is supported (UNIMPLEMENTED).
    Compressed,
    /// A message longer than the limit (RESOURCE_EXHAUSTED).
    TooLarge { len: u32, max: usize },
    /// The stream ended inside a message (INTERNAL).
    Truncated,
}

impl MessageError {
    /// The status a server answers with.
    pub const fn code(self) -> super::Code {
        match self {
            Self::Compressed => super::Code::Unimplemented,
            Self::TooLarge { .. } => super::Code::ResourceExhausted,
            Self::Truncated => super::Code::Internal,
        }
    }

    /// Text for `grpc-message`.
    pub const fn message(self) -> &'static str {
        match self {
            Self::Compressed => "compressed messages are not supported (identity encoding only)",
            Self::TooLarge { .. } => "message larger than max_message_bytes",
            Self::Truncated => "stream ended inside a message",
        }
    }
}

/// Reassembles messages from DATA pieces into a caller buffer.
#[derive(Debug, Clone)]
pub struct MessageDecoder {
    prefix: [u8; PREFIX_LEN],
    prefix_len: u8,
    len: usize,
    filled: usize,
    max: usize,
}

impl MessageDecoder {
    /// A decoder refusing messages above `max_message_bytes` (and above the
    /// buffer passed to [`MessageDecoder::feed`]).
    pub const fn new(max_message_bytes: usize) -> Self {
        Self {
            prefix: [0; PREFIX_LEN],
            prefix_len: 0,
            len: 0,
            filled: 0,
            max: max_message_bytes,
        }
    }

    /// Between messages: a stream may end here.
    pub fn is_idle(&self) -> bool {
        self.prefix_len == 0
    }

    /// Reads the prefix of the next message, and nothing after it: returns
    /// how much of `data` was consumed and, once the prefix is complete,
    /// the message's length (at most `max_message_bytes`). A caller that
    /// sizes its buffer per message calls this first, then
    /// [`MessageDecoder::feed`] with a buffer of that length.
    pub fn feed_prefix(&mut self, data: &[u8]) -> Result<(usize, Option<usize>), MessageError> {
        if usize::from(self.prefix_len) == PREFIX_LEN {
            return Ok((0, Some(self.len)));
        }
        let mut pos = 0;
        while usize::from(self.prefix_len) < PREFIX_LEN {
            let Some(&b) = data.get(pos) else {
                return Ok((pos, None));
            };
            self.prefix[usize::from(self.prefix_len)] = b;
            self.prefix_len += 1;
            pos += 1;
        }
        if self.prefix[0] != 0 {
            return Err(MessageError::Compressed);
        }
        let len = u32::from_be_bytes([
            self.prefix[1],
            self.prefix[2],
            self.prefix[3],
            self.prefix[4],
        ]);
        if len as usize > self.max {
            return Err(MessageError::TooLarge { len, max: self.max });
        }
        self.len = len as usize;
        self.filled = 0;
        Ok((pos, Some(self.len)))
    }

    /// Feeds `data`, copying message octets into `buf`. Returns how much of
    /// `data` was consumed and, when a message completed, its length: the
    /// message is `buf[..len]`; handle it, then feed the rest. A message
    /// longer than `buf` is [`MessageError::TooLarge`].
    pub fn feed(
        &mut self,
        data: &[u8],
        buf: &mut [u8],
    ) -> Result<(usize, Option<usize>), MessageError> {
        let (mut pos, len) = self.feed_prefix(data)?;
        let Some(len) = len else {
            return Ok((pos, None));
        };
        if len > buf.len() {
            return Err(MessageError::TooLarge {
                len: len as u32,
                max: buf.len().min(self.max),
            });
        }
        let n = (data.len() - pos).min(len - self.filled);
        buf[self.filled..self.filled + n].copy_from_slice(&data[pos..pos + n]);
        self.filled += n;
        pos += n;
        if self.filled == len {
            self.prefix_len = 0;
            return Ok((pos, Some(len)));
        }
        Ok((pos, None))
    }

    /// The stream ended: fine between messages, [`MessageError::Truncated`]
    /// inside one.
    pub fn finish(&self) -> Result<(), MessageError> {
        if self.is_idle() {
            Ok(())
        } else {
            Err(MessageError::Truncated)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{vec, vec::Vec};

    #[test]
    fn messages_across_pieces() {
        let mut wire = [0u8; 64];
        let mut n = 0;
        for m in [&b"hello"[..], b"", b"world!"] {
            wire[n..n + 5].copy_from_slice(&write_prefix(m.len() as u32));
            wire[n + 5..n + 5 + m.len()].copy_from_slice(m);
            n += 5 + m.len();
        }
        for piece in 1..=n {
            let mut d = MessageDecoder::new(16);
            let mut buf = [0u8; 16];
            let mut got: Vec<Vec<u8>> = Vec::new();
            for chunk in wire[..n].chunks(piece) {
                let mut rest = chunk;
                while !rest.is_empty() {
                    let (used, msg) = d.feed(rest, &mut buf).unwrap();
                    if let Some(len) = msg {
                        got.push(buf[..len].to_vec());
                    }
                    rest = &rest[used..];
                }
            }
            assert_eq!(
                got,
                vec![b"hello".to_vec(), vec![], b"world!".to_vec()],
                "piece {piece}"
            );
            assert_eq!(d.finish(), Ok(()));
        }
    }

    #[test]
    fn errors() {
        let mut buf = [0u8; 8];
        let mut d = MessageDecoder::new(4);
        assert_eq!(
            d.feed(&[0, 0, 0, 0, 5], &mut buf),
            Err(MessageError::TooLarge { len: 5, max: 4 })
        );
        let mut d = MessageDecoder::new(4);
        assert_eq!(
            d.feed(&[1, 0, 0, 0, 1], &mut buf),
            Err(MessageError::Compressed)
        );
        let mut d = MessageDecoder::new(4);
        assert_eq!(d.feed(&[0, 0, 0], &mut buf), Ok((3, None)));
        assert_eq!(d.finish(), Err(MessageError::Truncated));
        // A buffer shorter than the message is refused, not overrun.
        let mut d = MessageDecoder::new(64);
        assert_eq!(
            d.feed(&[0, 0, 0, 0, 9, 1], &mut buf),
            Err(MessageError::TooLarge { len: 9, max: 8 })
        );
    }

    #[test]
    fn prefix_first_then_a_buffer_of_that_size() {
        let wire = [0, 0, 0, 0, 3, b'a', b'b', b'c', 0, 0];
        let mut d = MessageDecoder::new(64);
        assert_eq!(d.feed_prefix(&wire[..2]), Ok((2, None)));
        assert_eq!(d.feed_prefix(&wire[2..]), Ok((3, Some(3))));
        // Asking again consumes nothing and names the same length.
        assert_eq!(d.feed_prefix(&wire[5..]), Ok((0, Some(3))));
        let mut buf = [0u8; 3];
        assert_eq!(d.feed(&wire[5..], &mut buf), Ok((3, Some(3))));
        assert_eq!(&buf, b"abc");
        assert_eq!(d.feed_prefix(&wire[8..]), Ok((2, None)));
        assert_eq!(d.finish(), Err(MessageError::Truncated));
    }
}
