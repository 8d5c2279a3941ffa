//! Writes JSON into a caller slice, with string escaping (RFC 8259 §7).
//! Running out of room is remembered and reported once, at the end, with the
//! size that was needed.

/// A JSON text being written into a fixed buffer.
#[derive(Debug)]
pub struct JsonWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
}

/// The buffer was too small; `needed` bytes would have held the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow {
    pub needed: usize,
}

impl<'b> JsonWriter<'b> {
    pub fn new(buf: &'b mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    /// Appends bytes that are already JSON (a raw value, punctuation).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        let end = self.len + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.len..end) {
            dst.copy_from_slice(bytes);
        }
        self.len = end;
        self
    }

    /// Appends `s` as a JSON string, quoted and escaped.
    pub fn string(&mut self, s: &[u8]) -> &mut Self {
        self.raw(b"\"").escaped(s).raw(b"\"")
    }

    /// Appends `s` escaped as the inside of a JSON string, without the
    /// quotes (for a string written in pieces).
    pub fn escaped(&mut self, s: &[u8]) -> &mut Self {
        let mut start = 0;
        for (i, &b) in s.iter().enumerate() {
            let escape: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x00..=0x1f => b"",
                _ => continue,
            };
            self.raw(&s[start..i]);
            if escape.is_empty() {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                self.raw(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ]);
            } else {
                self.raw(escape);
            }
            start = i + 1;
        }
        self.raw(&s[start..])
    }

    /// Appends a signed integer.
    pub fn int(&mut self, v: i64) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut n = digits.len();
        let mut u = v.unsigned_abs();
        loop {
            n -= 1;
            digits[n] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        if v < 0 {
            self.raw(b"-");
        }
        self.raw(&digits[n..])
    }

    /// `"key":` (with a leading comma unless `first`).
    pub fn key(&mut self, first: bool, key: &[u8]) -> &mut Self {
        if !first {
            self.raw(b",");
        }
        self.string(key).raw(b":")
    }

    /// Bytes written so far (or needed, after an overflow).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The text, or how much room it needed.
    pub fn finish(self) -> Result<&'b [u8], Overflow> {
        if self.len <= self.buf.len() {
            Ok(&self.buf[..self.len])
        } else {
            Err(Overflow { needed: self.len })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_valid_json() {
        let mut buf = [0u8; 128];
        let mut w = JsonWriter::new(&mut buf);
        w.raw(b"{")
            .key(true, b"a")
            .string(b"q\"\\\n\x01\xc3\xa9")
            .key(false, b"n")
            .int(-42)
            .raw(b"}");
        let text = w.finish().unwrap();
        assert_eq!(text, r#"{"a":"q\"\\\n\u0001é","n":-42}"#.as_bytes());
        assert_eq!(super::super::json::validate(text, 4), Ok(()));
        let mut small = [0u8; 4];
        let mut w = JsonWriter::new(&mut small);
        w.string(b"hello");
        assert_eq!(w.finish(), Err(Overflow { needed: 7 }));
        let mut buf = [0u8; 32];
        let mut w = JsonWriter::new(&mut buf);
        w.int(i64::MIN);
        assert_eq!(w.finish().unwrap(), b"-9223372036854775808");
    }
}
