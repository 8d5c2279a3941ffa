//! Message heads (RFC 9112 §2–§4, §6, §9.3): where a head ends, what a
//! request or a response head says (parsed by `httparse`), how its body
//! is framed and whether the connection stays open after it.

pub use httparse::{EMPTY_HEADER, Header};

use super::fields;
pub use super::fields::trim;

/// Finds the end of a message head (the empty line) in octets that arrive
/// in pieces, looking at each octet once.
///
/// A bare LF ends a line as CRLF does (httparse accepts both); the head
/// itself is judged by [`RequestHead::parse`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeadScanner {
    /// The current line holds nothing but CRs so far.
    line_empty: bool,
}

impl HeadScanner {
    /// A scanner at the start of a head (its first line is not empty:
    /// leading empty lines are the caller's to skip, RFC 9112 §2.2).
    pub const fn new() -> Self {
        Self { line_empty: false }
    }

    /// Scans the next octets of a head; `Some(n)` when the head ends after
    /// `input[..n]` (the rest belongs to the body or the next message).
    pub fn scan(&mut self, input: &[u8]) -> Option<usize> {
        for (k, &b) in input.iter().enumerate() {
            match b {
                b'\n' if self.line_empty => {
                    *self = Self::new();
                    return Some(k + 1);
                }
                b'\n' => self.line_empty = true,
                b'\r' => {}
                _ => self.line_empty = false,
            }
        }
        None
    }
}

/// The HTTP version of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// How a request's body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    None,
    /// `Content-Length` octets.
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
}

/// Why a request head is refused; [`HeadError::status`] is the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// Not a valid HTTP/1.x request head (400).
    Malformed(&'static str),
    /// More fields than the caller's array holds (431).
    TooManyFields,
    /// A transfer coding other than `chunked` alone (501).
    UnsupportedCoding,
}

impl HeadError {
    /// The status of the answer; the connection closes after it.
    pub const fn status(self) -> u16 {
        match self {
            Self::Malformed(_) => 400,
            Self::TooManyFields => 431,
            Self::UnsupportedCoding => 501,
        }
    }

    /// Why, in a few words.
    pub const fn reason(self) -> &'static str {
        match self {
            Self::Malformed(why) => why,
            Self::TooManyFields => "too many header fields",
            Self::UnsupportedCoding => "unsupported transfer coding",
        }
    }
}

/// A parsed request head, borrowing the head's octets and the caller's
/// field array.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'b, 'h> {
    /// The method, case-sensitive (`POST`).
    pub method: &'b str,
    /// The request target as sent (origin form: path and query).
    pub target: &'b str,
    pub version: Version,
    /// The fields in the order they came.
    pub fields: &'h [Header<'b>],
}

impl<'b, 'h> RequestHead<'b, 'h> {
    /// Parses a whole head (up to and including its empty line, as
    /// [`HeadScanner`] found it) into `fields`. An HTTP/1.1 request must
    /// carry exactly one `Host` (RFC 9112 §3.2); the body framing is
    /// checked too ([`RequestHead::body`]).
    pub fn parse(head: &'b [u8], fields: &'h mut [Header<'b>]) -> Result<Self, HeadError> {
        let mut req = httparse::Request::new(fields);
        let n = match req.parse(head) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Err(HeadError::Malformed("incomplete head")),
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyFields),
            Err(httparse::Error::Version) => {
                return Err(HeadError::Malformed("not an HTTP/1.x request"));
            }
            Err(_) => return Err(HeadError::Malformed("malformed request head")),
        };
        if n != head.len() {
            return Err(HeadError::Malformed("octets after the head"));
        }
        let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
            return Err(HeadError::Malformed("incomplete request line"));
        };
        let version = if minor == 0 {
            Version::Http10
        } else {
            Version::Http11
        };
        let count = req.headers.len();
        let fields: &'h [Header<'b>] = req.headers;
        let head = Self {
            method,
            target,
            version,
            fields: fields.get(..count).unwrap_or_default(),
        };
        if version == Version::Http11 && head.all(b"host").count() != 1 {
            return Err(HeadError::Malformed("an HTTP/1.1 request needs one Host"));
        }
        head.body()?;
        Ok(head)
    }

    /// The value of the first field called `name` (ASCII case-insensitive).
    pub fn header(&self, name: &[u8]) -> Option<&'b [u8]> {
        self.all(name).next()
    }

    /// The values of every field called `name`, in order.
    pub fn all<'n>(&self, name: &'n [u8]) -> impl Iterator<Item = &'b [u8]> + use<'b, 'h, 'n> {
        fields::all(self.fields, name)
    }

    /// The target's path (without the query).
    pub fn path(&self) -> &'b str {
        self.target
            .split_once('?')
            .map_or(self.target, |(path, _)| path)
    }

    /// How the body is delimited (RFC 9112 §6.3). A `Transfer-Encoding`
    /// beside a `Content-Length`, or on HTTP/1.0, is refused: a message
    /// two parsers could frame differently is how requests are smuggled.
    pub fn body(&self) -> Result<BodyFraming, HeadError> {
        Ok(fields::body_framing(self.fields, self.version)?.unwrap_or(BodyFraming::None))
    }

    /// Whether the connection stays open after this exchange (RFC 9112
    /// §9.3): HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with
    /// `Connection: keep-alive`.
    pub fn keep_alive(&self) -> bool {
        fields::keep_alive(self.fields, self.version)
    }
}

/// The media type of a response body, as far as an MCP client tells them
/// apart (parameters such as `charset` are not looked at).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaType {
    /// `application/json`.
    Json,
    /// `text/event-stream` (WHATWG HTML §9.2).
    EventStream,
    /// Anything else, or no `Content-Type`.
    Other,
}

impl MediaType {
    /// What a `Content-Type` value (of any HTTP version) says a body is.
    pub fn of(content_type: Option<&[u8]>) -> Self {
        let Some(value) = content_type else {
            return Self::Other;
        };
        let essence = value.split(|&b| b == b';').next().unwrap_or_default();
        let essence = trim(essence);
        if essence.eq_ignore_ascii_case(b"application/json") {
            Self::Json
        } else if essence.eq_ignore_ascii_case(b"text/event-stream") {
            Self::EventStream
        } else {
            Self::Other
        }
    }
}

/// How a response's body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseBody {
    /// No body: a 1xx, 204 or 304 status, an answer to `HEAD`, or a
    /// `Content-Length` of 0.
    None,
    /// `Content-Length` octets.
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
    /// Everything until the server closes the connection.
    UntilClose,
}

/// A parsed response head, borrowing the head's octets and the caller's
/// field array.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'b, 'h> {
    /// The status code (100–999, as httparse reads three digits).
    pub status: u16,
    pub version: Version,
    /// The reason phrase as sent (informative only).
    pub reason: &'b str,
    /// The fields in the order they came.
    pub fields: &'h [Header<'b>],
}

impl<'b, 'h> ResponseHead<'b, 'h> {
    /// Parses a whole head (up to and including its empty line, as
    /// [`HeadScanner`] found it) into `fields`.
    pub fn parse(head: &'b [u8], fields: &'h mut [Header<'b>]) -> Result<Self, HeadError> {
        let mut res = httparse::Response::new(fields);
        let n = match res.parse(head) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Err(HeadError::Malformed("incomplete head")),
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyFields),
            Err(httparse::Error::Version) => {
                return Err(HeadError::Malformed("not an HTTP/1.x response"));
            }
            Err(_) => return Err(HeadError::Malformed("malformed response head")),
        };
        if n != head.len() {
            return Err(HeadError::Malformed("octets after the head"));
        }
        let (Some(minor), Some(status)) = (res.version, res.code) else {
            return Err(HeadError::Malformed("incomplete status line"));
        };
        let version = if minor == 0 {
            Version::Http10
        } else {
            Version::Http11
        };
        let count = res.headers.len();
        let fields: &'h [Header<'b>] = res.headers;
        Ok(Self {
            status,
            version,
            reason: res.reason.unwrap_or(""),
            fields: fields.get(..count).unwrap_or_default(),
        })
    }

    /// The value of the first field called `name` (ASCII case-insensitive).
    pub fn header(&self, name: &[u8]) -> Option<&'b [u8]> {
        self.all(name).next()
    }

    /// The values of every field called `name`, in order.
    pub fn all<'n>(&self, name: &'n [u8]) -> impl Iterator<Item = &'b [u8]> + use<'b, 'h, 'n> {
        fields::all(self.fields, name)
    }

    /// What `Content-Type` says the body is.
    pub fn content_type(&self) -> MediaType {
        MediaType::of(self.header(b"content-type"))
    }

    /// How the body is delimited (RFC 9112 §6.3), given whether the request
    /// was `HEAD`. The status decides first (1xx, 204 and 304 have no
    /// body, whatever the fields say); then the fields, judged as a
    /// request's are ([`fields::body_framing`]: `Transfer-Encoding` beside
    /// `Content-Length` refused, `chunked` alone, equal `Content-Length`
    /// lists); with neither, the body runs until the connection closes.
    pub fn body(&self, request_was_head: bool) -> Result<ResponseBody, HeadError> {
        if request_was_head || self.status < 200 || self.status == 204 || self.status == 304 {
            return Ok(ResponseBody::None);
        }
        Ok(match fields::body_framing(self.fields, self.version)? {
            None => ResponseBody::UntilClose,
            Some(BodyFraming::None) => ResponseBody::None,
            Some(BodyFraming::Length(n)) => ResponseBody::Length(n),
            Some(BodyFraming::Chunked) => ResponseBody::Chunked,
        })
    }

    /// Whether the connection stays open after this response (RFC 9112
    /// §9.3); a body that runs until close ends it regardless.
    pub fn keep_alive(&self) -> bool {
        fields::keep_alive(self.fields, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;

    fn parsed<R>(head: &[u8], f: impl FnOnce(Result<RequestHead<'_, '_>, HeadError>) -> R) -> R {
        let mut fields = [EMPTY_HEADER; 8];
        f(RequestHead::parse(head, &mut fields))
    }

    #[test]
    fn the_scanner_finds_the_empty_line_in_any_pieces() {
        let head = b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\nBODY";
        for cut in 0..head.len() {
            let mut s = HeadScanner::new();
            let (a, b) = head.split_at(cut);
            let end = match s.scan(a) {
                Some(n) => n,
                None => cut + s.scan(b).unwrap(),
            };
            assert_eq!(end, head.len() - 4, "cut at {cut}");
        }
        let mut s = HeadScanner::new();
        assert_eq!(s.scan(b"GET / HTTP/1.0\n\nx"), Some(16));
        assert_eq!(HeadScanner::new().scan(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }

    #[test]
    fn reads_a_request_head() {
        let head = b"POST /mcp?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\nMcp-Method:  tools/list \r\n\r\n";
        parsed(head, |h| {
            let h = h.unwrap();
            assert_eq!(
                (h.method, h.path(), h.version),
                ("POST", "/mcp", Version::Http11)
            );
            assert_eq!(h.header(b"mcp-method"), Some(&b"tools/list"[..]));
            assert_eq!(h.body(), Ok(BodyFraming::Length(12)));
            assert!(h.keep_alive());
        });
    }

    #[test]
    fn frames_bodies_and_refuses_ambiguous_ones() {
        let cases: [(&[u8], Result<BodyFraming, u16>); 9] = [
            (b"Transfer-Encoding: chunked\r\n", Ok(BodyFraming::Chunked)),
            (b"Transfer-Encoding: gzip, chunked\r\n", Err(501)),
            (b"Transfer-Encoding: chunked, chunked\r\n", Err(400)),
            (
                b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
                Err(400),
            ),
            (b"Content-Length: 3, 3\r\n", Ok(BodyFraming::Length(3))),
            (b"Content-Length: 3\r\nContent-Length: 4\r\n", Err(400)),
            (b"Content-Length: -1\r\n", Err(400)),
            (b"Content-Length: 0\r\n", Ok(BodyFraming::None)),
            (b"", Ok(BodyFraming::None)),
        ];
        for (fields, want) in cases {
            let mut head = b"POST / HTTP/1.1\r\nHost: h\r\n".to_vec();
            head.extend_from_slice(fields);
            head.extend_from_slice(b"\r\n");
            parsed(&head, |h| {
                let got = h.and_then(|h| h.body()).map_err(HeadError::status);
                assert_eq!(got, want, "{}", String::from_utf8_lossy(fields));
            });
        }
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection() {
        for (head, want) in [
            (&b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"[..], true),
            (
                b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n",
                false,
            ),
            (b"GET / HTTP/1.0\r\n\r\n", false),
            (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
        ] {
            parsed(head, |h| assert_eq!(h.unwrap().keep_alive(), want));
        }
    }

    #[test]
    fn refuses_bad_heads() {
        for (head, status) in [
            (&b"GET / HTTP/1.1\r\n\r\n"[..], 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 400),
            (b"GET /\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400),
            (
                b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\nG: 1\r\nH: 1\r\n\r\n",
                431,
            ),
        ] {
            parsed(head, |h| {
                assert_eq!(h.map(|_| ()).unwrap_err().status(), status);
            });
        }
    }
}
