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
        // Runs that need no escape are found eight octets at a time and
        // copied whole.
        let mut start = 0;
        let mut i = 0;
        loop {
            i = super::json::string_stop(s, i);
            let Some(&b) = s.get(i) else {
                break;
            };
            let escape: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x00..=0x1f => b"",
                _ => {
                    i += 1;
                    continue;
                }
            };
            self.raw(s.get(start..i).unwrap_or_default());
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
            i += 1;
            start = i;
        }
        self.raw(s.get(start..).unwrap_or_default())
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

    /// The escape of one octet, the plain way: what the word scan must give.
    fn escape_byte(b: u8, out: &mut [u8; 6]) -> &[u8] {
        let n = match b {
            b'"' | b'\\' => {
                *out = [b'\\', b, 0, 0, 0, 0];
                2
            }
            b'\n' | b'\r' | b'\t' => {
                let c = match b {
                    b'\n' => b'n',
                    b'\r' => b'r',
                    _ => b't',
                };
                *out = [b'\\', c, 0, 0, 0, 0];
                2
            }
            0x00..=0x1f => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                *out = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ];
                6
            }
            _ => {
                out[0] = b;
                1
            }
        };
        &out[..n]
    }

    #[test]
    fn the_word_scan_escapes_as_the_byte_scan() {
        // Every octet that needs an escape, and a plain one and a
        // non-ASCII one, at every position of strings of up to 19 octets,
        // alone and next to a second special.
        let mut specials: [u8; 36] = [0; 36];
        for (i, s) in specials.iter_mut().enumerate().take(32) {
            *s = i as u8;
        }
        specials[32..].copy_from_slice(b"\"\\a\xc3");
        for len in 0..20usize {
            for pos in 0..len.max(1) {
                for &special in &specials {
                    for second in [None, Some(b'"'), Some(0x1f)] {
                        let mut input = [b'x'; 20];
                        let input = &mut input[..len];
                        if let Some(slot) = input.get_mut(pos) {
                            *slot = special;
                        }
                        if let (Some(c), Some(slot)) =
                            (second, input.get_mut(len.saturating_sub(1)))
                        {
                            *slot = c;
                        }
                        let mut want = [0u8; 128];
                        let mut n = 0;
                        for &b in input.iter() {
                            let mut tmp = [0u8; 6];
                            let e = escape_byte(b, &mut tmp);
                            want[n..n + e.len()].copy_from_slice(e);
                            n += e.len();
                        }
                        let mut buf = [0u8; 128];
                        let mut w = JsonWriter::new(&mut buf);
                        w.escaped(input);
                        assert_eq!(w.finish().unwrap(), &want[..n], "{input:?}");
                    }
                }
            }
        }
    }
}
