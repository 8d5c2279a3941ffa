//! Decoded header lists and the field rules of RFC 9113 §8.2–8.3.
//!
//! A received header block is decoded into a [`HeaderStore`], a fixed byte
//! array of records `[name_len: u16][value_len: u16][flags: u8][name][value]`,
//! and checked field by field as it is stored. The application reads it as a
//! [`HeaderList`].

use crate::hpack::Field;
use crate::word::WORDS;

const RECORD_HEAD: usize = 5;
const FLAG_NEVER_INDEXED: u8 = 1;

/// What a header block is, from where it stands on its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadersKind {
    /// The request head (server role).
    Request,
    /// A 1xx response (client role); more headers follow.
    Informational,
    /// The final response head (client role).
    Response,
    /// Trailers, which end the stream.
    Trailers,
}

/// Why a header block is malformed (RFC 9113 §8.1.1): a stream error of
/// type PROTOCOL_ERROR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    UppercaseName,
    InvalidName,
    InvalidValue,
    PseudoAfterRegular,
    UnknownPseudo,
    DuplicatePseudo,
    PseudoInTrailers,
    ConnectionSpecific,
    TeNotTrailers,
    MissingPseudo,
    EmptyPath,
    InvalidStatus,
    InvalidContentLength,
    ContentLengthMismatch,
    HostMismatch,
}

impl Malformed {
    pub const fn reason(self) -> &'static str {
        match self {
            Self::UppercaseName => "uppercase field name",
            Self::InvalidName => "invalid character in field name",
            Self::InvalidValue => "invalid character or whitespace in field value",
            Self::PseudoAfterRegular => "pseudo-header after a regular field",
            Self::UnknownPseudo => "unknown or misplaced pseudo-header",
            Self::DuplicatePseudo => "duplicate pseudo-header",
            Self::PseudoInTrailers => "pseudo-header in trailers",
            Self::ConnectionSpecific => "connection-specific field",
            Self::TeNotTrailers => "te field other than \"trailers\"",
            Self::MissingPseudo => "missing required pseudo-header",
            Self::EmptyPath => "empty :path",
            Self::InvalidStatus => "invalid :status",
            Self::InvalidContentLength => "invalid content-length",
            Self::ContentLengthMismatch => "DATA length differs from content-length",
            Self::HostMismatch => "host differs from :authority",
        }
    }
}

/// A decoded header list, borrowed from the connection.
#[derive(Clone, Copy)]
pub struct HeaderList<'a> {
    bytes: &'a [u8],
}

impl core::fmt::Debug for HeaderList<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> HeaderList<'a> {
    /// An empty list.
    pub const EMPTY: HeaderList<'static> = HeaderList { bytes: &[] };

    /// The fields in the order they arrived, pseudo-headers first.
    pub fn iter(&self) -> Fields<'a> {
        Fields { rest: self.bytes }
    }

    /// The value of the first field called `name`.
    pub fn get(&self, name: &[u8]) -> Option<&'a [u8]> {
        self.iter().find(|f| f.name == name).map(|f| f.value)
    }

    /// Whether the list has no fields.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The list's storage, to keep a copy beyond the event that lent it.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// A list over a copy made with [`HeaderList::as_bytes`]. Bytes that are
    /// not such a copy read as fewer fields, never as a panic.
    pub fn from_bytes(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }
}

impl<'a> IntoIterator for HeaderList<'a> {
    type Item = Field<'a>;
    type IntoIter = Fields<'a>;
    fn into_iter(self) -> Fields<'a> {
        self.iter()
    }
}

/// Iterator over a [`HeaderList`].
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Fields<'a> {
    type Item = Field<'a>;
    fn next(&mut self) -> Option<Field<'a>> {
        let (head, rest) = self.rest.split_first_chunk::<RECORD_HEAD>()?;
        let name_len = usize::from(u16::from_le_bytes([head[0], head[1]]));
        let value_len = usize::from(u16::from_le_bytes([head[2], head[3]]));
        let name = rest.get(..name_len)?;
        let value = rest.get(name_len..name_len + value_len)?;
        self.rest = rest.get(name_len + value_len..)?;
        Some(Field {
            name,
            value,
            never_indexed: head[4] & FLAG_NEVER_INDEXED != 0,
        })
    }
}

/// Writes one field record at the start of `dst`; `None` when it does not
/// fit, or a length does not fit the record's u16.
fn write_record(dst: &mut [u8], f: &Field<'_>) -> Option<usize> {
    let need = RECORD_HEAD + f.name.len() + f.value.len();
    let nl = u16::try_from(f.name.len()).ok()?;
    let vl = u16::try_from(f.value.len()).ok()?;
    let dst = dst.get_mut(..need)?;
    dst[0..2].copy_from_slice(&nl.to_le_bytes());
    dst[2..4].copy_from_slice(&vl.to_le_bytes());
    dst[4] = if f.never_indexed {
        FLAG_NEVER_INDEXED
    } else {
        0
    };
    let (name, value) = dst[RECORD_HEAD..].split_at_mut(f.name.len());
    name.copy_from_slice(f.name);
    value.copy_from_slice(f.value);
    Some(need)
}

/// Builds a [`HeaderList`] from fields, without the checks of a received
/// block: for trailers or metadata an application assembles itself.
#[derive(Debug)]
pub struct HeaderBuilder<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Default for HeaderBuilder<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> HeaderBuilder<N> {
    pub const fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    /// Adds a field; false when it does not fit (nothing is added).
    pub fn push(&mut self, f: Field<'_>) -> bool {
        match write_record(&mut self.buf[self.len..], &f) {
            Some(n) => {
                self.len += n;
                true
            }
            None => false,
        }
    }

    /// Empties the builder, adds `fields` (those that fit) and returns the list.
    pub fn build(&mut self, fields: &[(&[u8], &[u8])]) -> HeaderList<'_> {
        self.len = 0;
        for &(name, value) in fields {
            self.push(Field::new(name, value));
        }
        self.list()
    }

    pub fn list(&self) -> HeaderList<'_> {
        HeaderList {
            bytes: &self.buf[..self.len],
        }
    }
}

/// Which pseudo-headers have been seen.
#[derive(Debug, Clone, Copy, Default)]
struct Pseudo {
    method: bool,
    scheme: bool,
    path: bool,
    authority: bool,
    status: bool,
    protocol: bool,
    connect: bool,
}

/// Builds one header list at a time, checking each field, into a buffer
/// the caller keeps (the connection's [`FrameBuffer::Headers`](super::FrameBuffer)).
#[derive(Debug)]
pub(super) struct HeaderStore {
    len: usize,
    kind: HeadersKind,
    seen: Pseudo,
    regular_seen: bool,
    pub(super) malformed: Option<Malformed>,
    pub(super) overflow: bool,
    pub(super) content_length: Option<u64>,
    /// The 3-digit :status of a response.
    pub(super) status: u16,
}

impl HeaderStore {
    pub(super) const fn new() -> Self {
        Self {
            len: 0,
            kind: HeadersKind::Request,
            seen: Pseudo {
                method: false,
                scheme: false,
                path: false,
                authority: false,
                status: false,
                protocol: false,
                connect: false,
            },
            regular_seen: false,
            malformed: None,
            overflow: false,
            content_length: None,
            status: 0,
        }
    }

    /// Starts a new list of the given kind (a response's kind is settled by
    /// its :status when it ends).
    pub(super) fn begin(&mut self, kind: HeadersKind) {
        self.len = 0;
        self.kind = kind;
        self.seen = Pseudo::default();
        self.regular_seen = false;
        self.malformed = None;
        self.overflow = false;
        self.content_length = None;
        self.status = 0;
    }

    /// The list stored in `buf` (the buffer given to `push`).
    pub(super) fn list<'a>(&self, buf: &'a [u8]) -> HeaderList<'a> {
        HeaderList {
            bytes: buf.get(..self.len).unwrap_or_default(),
        }
    }

    /// Checks one field and stores it in `buf`.
    pub(super) fn push(&mut self, buf: &mut [u8], f: Field<'_>) {
        if self.malformed.is_some() {
            return;
        }
        if let Err(m) = self.check(&f) {
            self.malformed = Some(m);
            return;
        }
        match buf
            .get_mut(self.len..)
            .and_then(|dst| write_record(dst, &f))
        {
            Some(n) => self.len += n,
            None => self.overflow = true,
        }
    }

    fn check(&mut self, f: &Field<'_>) -> Result<(), Malformed> {
        check_value(f.value)?;
        if let Some(pseudo) = f.name.strip_prefix(b":") {
            if self.regular_seen {
                return Err(Malformed::PseudoAfterRegular);
            }
            let slot = match (self.kind, pseudo) {
                (HeadersKind::Trailers, _) => return Err(Malformed::PseudoInTrailers),
                (HeadersKind::Request, b"method") => {
                    self.seen.connect = f.value == b"CONNECT";
                    &mut self.seen.method
                }
                (HeadersKind::Request, b"scheme") => &mut self.seen.scheme,
                (HeadersKind::Request, b"path") => {
                    if f.value.is_empty() {
                        return Err(Malformed::EmptyPath);
                    }
                    &mut self.seen.path
                }
                (HeadersKind::Request, b"authority") => &mut self.seen.authority,
                (HeadersKind::Request, b"protocol") => &mut self.seen.protocol,
                (HeadersKind::Response | HeadersKind::Informational, b"status") => {
                    self.status = parse_status(f.value).ok_or(Malformed::InvalidStatus)?;
                    &mut self.seen.status
                }
                _ => return Err(Malformed::UnknownPseudo),
            };
            if core::mem::replace(slot, true) {
                return Err(Malformed::DuplicatePseudo);
            }
            return Ok(());
        }
        self.regular_seen = true;
        check_name(f.name)?;
        match f.name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => Err(Malformed::ConnectionSpecific),
            b"te" if f.value != b"trailers" => Err(Malformed::TeNotTrailers),
            b"content-length" => {
                let n = parse_u64(f.value).ok_or(Malformed::InvalidContentLength)?;
                match self.content_length {
                    Some(old) if old != n => Err(Malformed::InvalidContentLength),
                    _ => {
                        self.content_length = Some(n);
                        Ok(())
                    }
                }
            }
            _ => Ok(()),
        }
    }

    /// The checks that need the whole list (stored in `buf`). Returns the
    /// final kind.
    pub(super) fn finish(&mut self, buf: &[u8]) -> Result<HeadersKind, Malformed> {
        if let Some(m) = self.malformed {
            return Err(m);
        }
        let s = self.seen;
        match self.kind {
            HeadersKind::Request => {
                let complete = if s.connect && !s.protocol {
                    s.authority && !s.scheme && !s.path
                } else {
                    s.method && s.scheme && s.path
                };
                if !complete {
                    return Err(Malformed::MissingPseudo);
                }
                // RFC 9113 §8.3.1: a host that differs from :authority
                // makes the request malformed.
                let list = self.list(buf);
                if let (Some(authority), Some(host)) = (list.get(b":authority"), list.get(b"host"))
                    && authority != host
                {
                    return Err(Malformed::HostMismatch);
                }
                Ok(HeadersKind::Request)
            }
            HeadersKind::Response | HeadersKind::Informational => {
                if !s.status {
                    return Err(Malformed::MissingPseudo);
                }
                if (100..200).contains(&self.status) {
                    Ok(HeadersKind::Informational)
                } else {
                    Ok(HeadersKind::Response)
                }
            }
            HeadersKind::Trailers => Ok(HeadersKind::Trailers),
        }
    }
}

/// RFC 9113 §8.2.1: no uppercase, no control characters, no separators
/// outside of field-name tokens. On 64-bit hosts eight octets at a time
/// (a request head is a few hundred octets of names and values, checked at
/// every call); a word with an octet that fails goes to the octet walk,
/// which names the error.
fn check_name(name: &[u8]) -> Result<(), Malformed> {
    if name.is_empty() {
        return Err(Malformed::InvalidName);
    }
    let mut rest = name;
    if WORDS {
        while let Some((w, tail)) = rest.split_first_chunk::<8>() {
            if name_octets_failing(u64::from_le_bytes(*w)) != 0 {
                break;
            }
            rest = tail;
        }
    }
    check_name_octets(rest)
}

fn check_name_octets(name: &[u8]) -> Result<(), Malformed> {
    for &b in name {
        match b {
            b'A'..=b'Z' => return Err(Malformed::UppercaseName),
            0x00..=0x20 | 0x7f..=0xff | b':' => return Err(Malformed::InvalidName),
            _ => {}
        }
    }
    Ok(())
}

/// RFC 9113 §8.2.1: no NUL, CR or LF, and no leading or trailing space or tab.
fn check_value(value: &[u8]) -> Result<(), Malformed> {
    let mut rest = value;
    if WORDS {
        while let Some((w, tail)) = rest.split_first_chunk::<8>() {
            if value_octets_failing(u64::from_le_bytes(*w)) != 0 {
                return Err(Malformed::InvalidValue);
            }
            rest = tail;
        }
    }
    if rest.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err(Malformed::InvalidValue);
    }
    let ws = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    if ws(value.first()) || ws(value.last()) {
        return Err(Malformed::InvalidValue);
    }
    Ok(())
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The high bit of every octet of `w` that is 0, exactly (no carry or
/// borrow crosses an octet).
fn zero_octets(w: u64) -> u64 {
    !(((w & !HI) + !HI) | w | !HI)
}

/// The high bit of every octet of `w` (little-endian) that a field name
/// cannot hold: below 0x21, 0x7f and above, `:`, `A`-`Z`. Exact per octet:
/// with each octet's high bit set first, a subtraction of at most 0x5b
/// never borrows from the next.
fn name_octets_failing(w: u64) -> u64 {
    let set = w | HI;
    let below_0x21 = !set.wrapping_sub(LO * 0x21);
    let from_0x41 = set.wrapping_sub(LO * 0x41);
    let from_0x5b = set.wrapping_sub(LO * 0x5b);
    let upper = from_0x41 & !from_0x5b;
    let del = (w & !HI) + LO;
    (w | below_0x21 | upper | del | zero_octets(w ^ (LO * u64::from(b':')))) & HI
}

/// The high bit of every octet of `w` that a field value cannot hold: NUL,
/// CR, LF (exactly).
fn value_octets_failing(w: u64) -> u64 {
    zero_octets(w)
        | zero_octets(w ^ (LO * u64::from(b'\r')))
        | zero_octets(w ^ (LO * u64::from(b'\n')))
}

fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

pub(super) fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    v.iter().try_fold(0u64, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(fields: &[(&[u8], &[u8])]) -> Result<HeadersKind, Malformed> {
        let mut buf = [0; 512];
        let mut s = HeaderStore::new();
        s.begin(HeadersKind::Request);
        for &(n, v) in fields {
            s.push(&mut buf, Field::new(n, v));
        }
        s.finish(&buf)
    }

    const BASE: [(&[u8], &[u8]); 3] = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/x"),
    ];

    #[test]
    fn a_valid_request_is_stored_in_order() {
        let mut buf = [0; 512];
        let mut s = HeaderStore::new();
        s.begin(HeadersKind::Request);
        for (n, v) in BASE {
            s.push(&mut buf, Field::new(n, v));
        }
        s.push(&mut buf, Field::sensitive(b"authorization", b"Bearer t"));
        assert_eq!(s.finish(&buf), Ok(HeadersKind::Request));
        let l = s.list(&buf);
        assert_eq!(l.get(b":path"), Some(&b"/x"[..]));
        assert_eq!(l.iter().count(), 4);
        assert!(l.iter().last().unwrap().never_indexed);
    }

    #[test]
    fn malformed_requests() {
        type Case<'a> = (&'a [(&'a [u8], &'a [u8])], Malformed);
        let cases: [Case<'_>; 9] = [
            (
                &[(b":method", b"GET"), (b":path", b"/")],
                Malformed::MissingPseudo,
            ),
            (
                &[(b"x", b"1"), (b":method", b"GET")],
                Malformed::PseudoAfterRegular,
            ),
            (
                &[(b":method", b"GET"), (b":method", b"GET")],
                Malformed::DuplicatePseudo,
            ),
            (&[(b":status", b"200")], Malformed::UnknownPseudo),
            (&[(b"X-Up", b"1")], Malformed::UppercaseName),
            (&[(b"connection", b"close")], Malformed::ConnectionSpecific),
            (&[(b"te", b"gzip")], Malformed::TeNotTrailers),
            (&[(b"x", b" padded")], Malformed::InvalidValue),
            (&[(b":path", b"")], Malformed::EmptyPath),
        ];
        for (fields, want) in cases {
            assert_eq!(request(fields), Err(want), "{fields:?}");
        }
        assert_eq!(request(&BASE), Ok(HeadersKind::Request));
    }

    /// The word checks agree with the octet walk for every octet value at
    /// every place of names and values of every length up to 24, so no
    /// field is judged by which path it took.
    #[test]
    fn the_word_checks_agree_with_the_octet_walk() {
        fn value_octets(v: &[u8]) -> Result<(), Malformed> {
            let bad = v.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n'))
                || matches!(v.first(), Some(b' ' | b'\t'))
                || matches!(v.last(), Some(b' ' | b'\t'));
            if bad {
                Err(Malformed::InvalidValue)
            } else {
                Ok(())
            }
        }
        let name_base = b"content-type-abcdefghijklm";
        let value_base = b"application/grpc+proto;x=1";
        for len in 1..=24 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut name = name_base[..len].to_vec();
                    name[at] = b;
                    let want = check_name_octets(&name);
                    assert_eq!(check_name(&name), want, "name {name:?}");
                    let mut value = value_base[..len].to_vec();
                    value[at] = b;
                    assert_eq!(check_value(&value), value_octets(&value), "value {value:?}");
                    // Two failing octets: the first one names the error.
                    if at + 1 < len {
                        name[at + 1] = b'A';
                        assert_eq!(check_name(&name), check_name_octets(&name), "name {name:?}");
                    }
                }
            }
        }
        assert_eq!(check_value(b""), Ok(()));
        assert_eq!(check_name(b""), Err(Malformed::InvalidName));
    }

    #[test]
    fn responses_and_trailers() {
        let mut buf = [0; 64];
        let mut s = HeaderStore::new();
        s.begin(HeadersKind::Response);
        s.push(&mut buf, Field::new(b":status", b"103"));
        assert_eq!(s.finish(&buf), Ok(HeadersKind::Informational));
        s.begin(HeadersKind::Response);
        s.push(&mut buf, Field::new(b":status", b"20"));
        assert_eq!(s.finish(&buf), Err(Malformed::InvalidStatus));
        s.begin(HeadersKind::Trailers);
        s.push(&mut buf, Field::new(b":status", b"200"));
        assert_eq!(s.finish(&buf), Err(Malformed::PseudoInTrailers));
        // A list larger than the store overflows rather than truncating silently.
        s.begin(HeadersKind::Trailers);
        s.push(&mut buf, Field::new(b"grpc-message", &[b'a'; 100]));
        assert!(s.overflow);
    }
}
