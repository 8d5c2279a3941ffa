//! Writing HTTP/1.1 messages into the caller's slices: request and
//! response heads (RFC 9112 §3–§5), chunks (§7.1) and server-sent events (WHATWG HTML
//! §9.2: `data: <line>\n\n` events and `:` comment keep-alives).

use super::reason;

/// The header fields of an event stream response (besides its framing):
/// no caching, and no buffering by a reverse proxy (nginx reads
/// `X-Accel-Buffering`). Names in lowercase, so that HTTP/2 sends the same
/// fields (RFC 9113 §8.2.1; HTTP/1.1 names are case-insensitive).
pub const SSE_FIELDS: [(&str, &[u8]); 3] = [
    ("content-type", b"text/event-stream"),
    ("cache-control", b"no-cache"),
    ("x-accel-buffering", b"no"),
];

/// What starts an event's data line.
pub const SSE_DATA: &[u8] = b"data: ";
/// What ends an event.
pub const SSE_END: &[u8] = b"\n\n";
/// A comment event: ignored by clients, it keeps idle proxies from
/// closing the stream.
pub const SSE_KEEP_ALIVE: &[u8] = b": \n\n";
/// [`SSE_KEEP_ALIVE`] as one chunk.
pub const SSE_KEEP_ALIVE_CHUNK: &[u8] = b"4\r\n: \n\n\r\n";
/// The end of a chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";
/// The last chunk, without trailers: ends a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The output did not fit: `needed` octets in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow {
    pub needed: usize,
}

/// Writes a message head: the request or status line, then fields, then the empty
/// line. Too small an `out` is reported once, at [`HeadWriter::finish`],
/// with the length the head needs.
#[derive(Debug)]
pub struct HeadWriter<'o> {
    out: &'o mut [u8],
    len: usize,
}

impl<'o> HeadWriter<'o> {
    /// Starts an HTTP/1.1 response with `status`.
    pub fn new(out: &'o mut [u8], status: u16) -> Self {
        let mut w = Self { out, len: 0 };
        let mut digits = [0u8; 20];
        w.put(b"HTTP/1.1 ");
        w.put(decimal(u64::from(status), &mut digits));
        w.put(b" ");
        w.put(reason(status).as_bytes());
        w.put(b"\r\n");
        w
    }

    /// Starts an HTTP/1.1 request: `method` and `target` (origin form, or
    /// absolute form towards a proxy) are the caller's, written as given
    /// (no space, CR or LF in them). Add `Host` and the framing fields.
    pub fn request(out: &'o mut [u8], method: &str, target: &str) -> Self {
        let mut w = Self { out, len: 0 };
        w.put(method.as_bytes());
        w.put(b" ");
        w.put(target.as_bytes());
        w.put(b" HTTP/1.1\r\n");
        w
    }

    /// Adds a field; names and values are the caller's, written as given
    /// (they must hold no CR or LF).
    pub fn field(&mut self, name: &str, value: &[u8]) -> &mut Self {
        self.put(name.as_bytes());
        self.put(b": ");
        self.put(value);
        self.put(b"\r\n")
    }

    /// Adds a field whose value is `parts` joined (`Bearer ` and a token);
    /// as [`HeadWriter::field`], nothing is checked.
    pub fn field_parts(&mut self, name: &[u8], parts: &[&[u8]]) -> &mut Self {
        self.put(name);
        self.put(b": ");
        for part in parts {
            self.put(part);
        }
        self.put(b"\r\n")
    }

    /// Adds `Content-Length`.
    pub fn content_length(&mut self, len: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let text = decimal(len, &mut digits);
        self.put(b"Content-Length: ");
        self.put(text);
        self.put(b"\r\n")
    }

    /// Ends the head; the octets written.
    pub fn finish(mut self) -> Result<usize, Overflow> {
        self.put(b"\r\n");
        if self.len > self.out.len() {
            return Err(Overflow { needed: self.len });
        }
        Ok(self.len)
    }

    fn put(&mut self, bytes: &[u8]) -> &mut Self {
        if let Some(dst) = self.out.get_mut(self.len..self.len + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        self.len += bytes.len();
        self
    }
}

/// The size line of a chunk of `len` octets (`<hex>\r\n`) in `out`; its
/// length. `None` when `out` is shorter than 18 octets and the line does
/// not fit.
pub fn chunk_size_line(len: usize, out: &mut [u8]) -> Option<usize> {
    let mut digits = [0u8; 16];
    let mut n = 0;
    let mut v = len as u64;
    loop {
        let d = (v & 0xf) as u8;
        digits[15 - n] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
        n += 1;
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    let dst = out.get_mut(..n + 2)?;
    dst[..n].copy_from_slice(&digits[16 - n..]);
    dst[n..].copy_from_slice(CHUNK_END);
    Some(n + 2)
}

/// The octets of one event carrying `data_len` octets of data.
pub const fn sse_event_len(data_len: usize) -> usize {
    SSE_DATA.len() + data_len + SSE_END.len()
}

/// What precedes an event's data: the chunk's size line when the body is
/// chunked, then `data: `. Its length in `out`, or `None` when it does not
/// fit. The data must be one line: see [`sse_one_line`].
pub fn sse_event_prefix(data_len: usize, chunked: bool, out: &mut [u8]) -> Option<usize> {
    let n = if chunked {
        chunk_size_line(sse_event_len(data_len), out)?
    } else {
        0
    };
    out.get_mut(n..n + SSE_DATA.len())?
        .copy_from_slice(SSE_DATA);
    Some(n + SSE_DATA.len())
}

/// What follows an event's data: the end of the event, and of the chunk.
pub const fn sse_event_suffix(chunked: bool) -> &'static [u8] {
    if chunked { b"\n\n\r\n" } else { SSE_END }
}

/// Makes JSON text one line for a `data:` field: a CR or LF in valid JSON
/// can only be white space between tokens (inside strings they are
/// escaped), so it becomes a space.
pub fn sse_one_line(json: &mut [u8]) {
    for b in json {
        if *b == b'\n' || *b == b'\r' {
            *b = b' ';
        }
    }
}

/// `v` in decimal, in `digits` (the crate's one decimal writer: heads,
/// and the texts the client engines write).
pub(crate) fn decimal(mut v: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &digits[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_head() {
        let mut out = [0u8; 128];
        let mut w = HeadWriter::new(&mut out, 405);
        w.field("Allow", b"POST").content_length(0);
        let n = w.finish().unwrap();
        assert_eq!(
            &out[..n],
            b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\nContent-Length: 0\r\n\r\n"
        );
        let mut small = [0u8; 10];
        let mut w = HeadWriter::new(&mut small, 200);
        w.content_length(12345);
        assert_eq!(w.finish(), Err(Overflow { needed: 42 }));
    }

    #[test]
    fn writes_a_request_head() {
        let mut out = [0u8; 128];
        let mut w = HeadWriter::request(&mut out, "POST", "/mcp?a=1");
        w.field("Host", b"h:80").content_length(2);
        let n = w.finish().unwrap();
        assert_eq!(
            &out[..n],
            b"POST /mcp?a=1 HTTP/1.1\r\nHost: h:80\r\nContent-Length: 2\r\n\r\n"
        );
        let mut small = [0u8; 4];
        assert_eq!(
            HeadWriter::request(&mut small, "GET", "/").finish(),
            Err(Overflow { needed: 18 })
        );
    }

    #[test]
    fn writes_chunks_and_events() {
        let mut out = [0u8; 32];
        let n = chunk_size_line(0x1a2, &mut out).unwrap();
        assert_eq!(&out[..n], b"1a2\r\n");
        let n = chunk_size_line(0, &mut out).unwrap();
        assert_eq!(&out[..n], b"0\r\n");
        let n = sse_event_prefix(2, true, &mut out).unwrap();
        assert_eq!(&out[..n], b"a\r\ndata: ");
        let n = sse_event_prefix(2, false, &mut out).unwrap();
        assert_eq!(&out[..n], b"data: ");
        // "data: {}\n\n" is ten octets, the chunk's size.
        assert_eq!(sse_event_len(2), 10);
        let mut json = *b"{\r\n\"a\":1\n}";
        sse_one_line(&mut json);
        assert_eq!(&json, b"{  \"a\":1 }");
        assert_eq!(SSE_KEEP_ALIVE_CHUNK.len(), 3 + SSE_KEEP_ALIVE.len() + 2);
        // The HTTP/2 binding sends an event's end as the comment's last
        // octets.
        assert!(SSE_KEEP_ALIVE.ends_with(SSE_END));
    }
}
