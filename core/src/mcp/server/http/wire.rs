//! The Streamable HTTP binding's pieces that need no connection state:
//! its settings (the endpoint's shared with the binding over HTTP/2), the
//! checks of a request head before MCP sees it (§5.1, DNS rebinding), the
//! answers the binding writes itself, the framing of the engine's messages
//! (a JSON response or the events of a stream) and the keep-alive comments
//! between them, and the head turned into the header list the engine
//! reads.

use core::ops::Range;
use core::time::Duration;

use crate::http1::write::{self, HeadWriter};
use crate::http1::{BodyFraming, RequestHead, head::trim};
use crate::mcp::error::{
    HEADER_MISMATCH, INVALID_REQUEST, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::mcp::json;
use crate::mcp::meta::{KEY_PROTOCOL_VERSION, RequestMeta, SUPPORTED_VERSIONS};
use crate::mcp::mirror::HeaderSource;
use crate::mcp::writer::JsonWriter;
use crate::time::Instant;

/// Which `Host` names, or `Origin` hosts, a server accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed<'a> {
    /// `localhost`, `127.0.0.0/8` and `[::1]` only: a server on a
    /// loopback address, safe from DNS rebinding (the default).
    Loopback,
    /// Loopback names and these host names (no port, compared
    /// case-insensitively; an IPv6 address in brackets).
    Hosts(&'a [&'a str]),
    /// Any: for a server behind a proxy that checks them.
    Any,
}

impl Allowed<'_> {
    /// Whether `host` (a name, without port) is allowed.
    pub fn allows(&self, host: &[u8]) -> bool {
        match self {
            Self::Any => true,
            Self::Loopback => is_loopback(host),
            Self::Hosts(names) => {
                is_loopback(host)
                    || names
                        .iter()
                        .any(|n| n.as_bytes().eq_ignore_ascii_case(host))
            }
        }
    }
}

/// The Streamable HTTP endpoint (§5.1), the same on every wire: both the
/// HTTP/1.1 binding ([`HttpConfig::endpoint`]) and `POST` on the gRPC
/// tunnel's HTTP/2 connection
/// ([`ServerConfig::http`](crate::mcp::server::ServerConfig::http)) take it,
/// and judge a request's path, `Host`/`:authority` and `Origin` by it with
/// the same code, so the two wires cannot disagree on who is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpEndpoint<'a> {
    /// The MCP endpoint's path (the query is not part of it); other paths
    /// are answered 404 (on HTTP/2, those that are not gRPC calls). An
    /// empty path serves no Streamable HTTP. Default `/mcp`.
    pub path: &'a str,
    /// The `Host` names accepted (HTTP/2: `:authority` and `host`);
    /// others are answered 403 (DNS rebinding). Default
    /// [`Allowed::Loopback`].
    pub allowed_hosts: Allowed<'a>,
    /// The `Origin` hosts accepted when a request carries one; others are
    /// answered 403 (§5.1). Default [`Allowed::Loopback`].
    pub allowed_origins: Allowed<'a>,
    /// The URL of the server's OAuth protected resource metadata (RFC
    /// 9728), named in the `WWW-Authenticate` challenge of a 401 or 403.
    pub resource_metadata: Option<&'a str>,
    /// How often an open event stream with nothing to say sends a comment,
    /// so that proxies keep it open (§5.2). Default 15 s.
    pub keep_alive_interval: Duration,
}

impl Default for HttpEndpoint<'_> {
    fn default() -> Self {
        Self {
            path: "/mcp",
            allowed_hosts: Allowed::Loopback,
            allowed_origins: Allowed::Loopback,
            resource_metadata: None,
            keep_alive_interval: Duration::from_secs(15),
        }
    }
}

impl<'a> HttpEndpoint<'a> {
    /// Whether a request target (`/path?query`) names the endpoint.
    pub(crate) fn serves(&self, target: &[u8]) -> bool {
        let path = target.split(|&b| b == b'?').next().unwrap_or_default();
        !self.path.is_empty() && path == self.path.as_bytes()
    }

    /// The DNS-rebinding guard and §5.1's `Origin` check of a request on
    /// the endpoint: every authority it names (HTTP/1.1 `Host`; HTTP/2
    /// `:authority` and `host`) and every `Origin` must be allowed, else
    /// 403.
    pub(crate) fn admits<'v>(
        &self,
        authorities: impl IntoIterator<Item = &'v [u8]>,
        origins: impl IntoIterator<Item = &'v [u8]>,
    ) -> Result<(), u16> {
        let hosts_ok = authorities
            .into_iter()
            .all(|a| self.allowed_hosts.allows(host_name(trim(a))));
        if hosts_ok
            && origins
                .into_iter()
                .all(|o| origin_allowed(o, &self.allowed_origins))
        {
            Ok(())
        } else {
            Err(403)
        }
    }

    /// The `WWW-Authenticate` value of a refused token, in parts: the
    /// core's challenge, then `resource_metadata` when the server names
    /// one (RFC 9728 §5.1).
    pub(crate) fn challenge(&self, challenge: &'a str) -> [&'a [u8]; 4] {
        match self.resource_metadata {
            Some(url) => [
                challenge.as_bytes(),
                b", resource_metadata=\"",
                url.as_bytes(),
                b"\"",
            ],
            None => [challenge.as_bytes(), b"", b"", b""],
        }
    }
}

/// When an open event stream is due its next keep-alive comment (§5.2):
/// every octet the stream sends puts it off by the interval. One for the
/// HTTP/1.1 connection's exchange, one in each HTTP/2 call.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KeepAlive {
    at: Option<Instant>,
    due: bool,
}

impl KeepAlive {
    /// The stream sent something at `now`.
    pub(crate) fn sent(&mut self, now: Instant, interval: Duration) {
        self.at = Some(now + interval);
        self.due = false;
    }

    /// When the comment is due, unless it already is.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.at
    }

    /// Lets time pass; whether the comment just became due.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> bool {
        if self.at.is_some_and(|at| now >= at) {
            self.at = None;
            self.due = true;
            return true;
        }
        false
    }

    /// Whether a comment is due (it is then no longer).
    pub(crate) fn take_due(&mut self) -> bool {
        core::mem::take(&mut self.due)
    }

    /// Whether a comment waits to be sent.
    pub(crate) fn is_due(&self) -> bool {
        self.due
    }
}

/// Settings of the Streamable HTTP binding over HTTP/1.1.
#[derive(Debug, Clone, Copy)]
pub struct HttpConfig<'a> {
    /// The endpoint: its path, the `Host` and `Origin` checks, the
    /// resource metadata of its challenges, its keep-alive comments (the
    /// same settings serve `POST` on the tunnel's HTTP/2 connection).
    pub endpoint: HttpEndpoint<'a>,
    /// The longest request head (request line and fields); a longer one
    /// is answered 431 and the connection closes. Default 8 KiB.
    pub max_head_bytes: usize,
    /// The longest request body (also capped by the call store's largest
    /// buffer); a longer one is answered 413 and the connection closes.
    /// Default 4 MiB.
    pub max_body_bytes: usize,
    /// How long a request head may take from its first octet (and a new
    /// connection to send one); then the connection closes without an
    /// answer (slow clients hold no buffer for long). Default 10 s.
    pub head_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request.
    /// Default 60 s.
    pub idle_timeout: Duration,
    /// How long a request (its body included) may run before it is
    /// answered -32001 (not for `subscriptions/listen`). Default 60 s.
    pub request_timeout: Duration,
    /// Every request first comes out as an `Authorize` event, with its
    /// `Authorization: Bearer` token; refused ones are answered 401 or 403
    /// (§5.9). Default off.
    pub authorize: bool,
}

impl Default for HttpConfig<'_> {
    fn default() -> Self {
        Self {
            endpoint: HttpEndpoint::default(),
            max_head_bytes: 8 << 10,
            max_body_bytes: 4 << 20,
            head_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(60),
            authorize: false,
        }
    }
}

/// What a request head asks of the exchange, once it passed the checks.
#[derive(Debug, Clone, Copy)]
pub(super) struct Accepted {
    pub(super) body: BodyFraming,
    pub(super) keep_alive: bool,
    pub(super) chunked: bool,
    pub(super) accept_json: bool,
    pub(super) accept_sse: bool,
    pub(super) expect_continue: bool,
}

/// The checks of a request head, in the order of §5.6 after the path and
/// the DNS-rebinding guard: the answer's status when it is refused.
pub(super) fn judge(head: &RequestHead<'_, '_>, config: &HttpConfig<'_>) -> Result<Accepted, u16> {
    if !config.endpoint.serves(head.target.as_bytes()) {
        return Err(404);
    }
    config
        .endpoint
        .admits(head.all(b"host"), head.all(b"origin"))?;
    if head.method != "POST" {
        return Err(405);
    }
    if !is_json(head.header(b"content-type")) {
        return Err(415);
    }
    let (accept_json, accept_sse) = accepts(head.all(b"accept"))?;
    let body = head.body().map_err(|e| e.status())?;
    if let BodyFraming::Length(n) = body
        && n > config.max_body_bytes as u64
    {
        return Err(413);
    }
    let chunked = head.version == crate::http1::Version::Http11;
    Ok(Accepted {
        body,
        keep_alive: head.keep_alive(),
        chunked,
        accept_json,
        accept_sse,
        expect_continue: chunked
            && head
                .header(b"expect")
                .is_some_and(|v| trim(v).eq_ignore_ascii_case(b"100-continue")),
    })
}

/// Whether an `Origin` value names an allowed host (§5.1); `null` or a
/// value without a host does not.
fn origin_allowed(origin: &[u8], allowed: &Allowed<'_>) -> bool {
    let origin = trim(origin);
    let host = origin
        .iter()
        .position(|&b| b == b':')
        .and_then(|k| origin.get(k + 1..))
        .and_then(|rest| rest.strip_prefix(b"//"));
    host.is_some_and(|h| allowed.allows(host_name(h)))
}

/// Whether a `Content-Type` value is JSON (its parameters ignored).
pub(crate) fn is_json(content_type: Option<&[u8]>) -> bool {
    content_type.is_some_and(|v| {
        let media = v.split(|&b| b == b';').next().unwrap_or_default();
        trim(media).eq_ignore_ascii_case(b"application/json")
    })
}

/// What the `Accept` values take: (JSON, event streams); both without
/// any, 406 when they take neither.
pub(crate) fn accepts<'a>(values: impl Iterator<Item = &'a [u8]>) -> Result<(bool, bool), u16> {
    let mut ranges = values.peekable();
    if ranges.peek().is_none() {
        return Ok((true, true));
    }
    let (mut json, mut sse) = (false, false);
    for range in ranges.flat_map(|v| v.split(|&b| b == b',')) {
        let media = trim(range.split(|&b| b == b';').next().unwrap_or_default());
        let is = |m: &[u8]| media.eq_ignore_ascii_case(m);
        json |= is(b"application/json") || is(b"application/*") || is(b"*/*");
        sse |= is(b"text/event-stream") || is(b"text/*") || is(b"*/*");
    }
    if !json && !sse {
        return Err(406);
    }
    Ok((json, sse))
}

/// The host of an authority (`host[:port]`, `[v6]:port`).
fn host_name(authority: &[u8]) -> &[u8] {
    if authority.first() == Some(&b'[') {
        let end = authority
            .iter()
            .position(|&b| b == b']')
            .map_or(authority.len(), |e| e + 1);
        return &authority[..end];
    }
    let end = authority
        .iter()
        .position(|&b| b == b':' || b == b'/')
        .unwrap_or(authority.len());
    &authority[..end]
}

fn is_loopback(host: &[u8]) -> bool {
    host.eq_ignore_ascii_case(b"localhost")
        || host == b"[::1]"
        || host.strip_prefix(b"127.").is_some_and(|rest| {
            rest.split(|&b| b == b'.').count() == 3
                && rest.iter().all(|&b| b.is_ascii_digit() || b == b'.')
        })
}

/// A whole answer of the binding that ends the connection, without a body.
macro_rules! closing {
    ($status:literal $($field:literal)*) => {
        concat!(
            "HTTP/1.1 ", $status, "\r\n",
            $($field, "\r\n",)*
            "Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .as_bytes()
    };
}

/// The binding's answer with `status` (no call, no body); the connection
/// closes after it.
pub(super) fn closing_answer(status: u16) -> &'static [u8] {
    match status {
        400 => closing!("400 Bad Request"),
        403 => closing!("403 Forbidden"),
        404 => closing!("404 Not Found"),
        405 => closing!("405 Method Not Allowed" "Allow: POST"),
        406 => closing!("406 Not Acceptable"),
        408 => closing!("408 Request Timeout"),
        413 => closing!("413 Content Too Large"),
        415 => closing!("415 Unsupported Media Type"),
        431 => closing!("431 Request Header Fields Too Large"),
        501 => closing!("501 Not Implemented"),
        503 => closing!("503 Service Unavailable"),
        _ => closing!("500 Internal Server Error"),
    }
}

/// The binding's own answer (no call): parts sent in order.
#[derive(Clone, Copy)]
pub(super) struct Plain<'r> {
    parts: [&'r [u8]; 6],
    count: usize,
    part: usize,
    pos: usize,
}

impl<'r> Plain<'r> {
    pub(super) const EMPTY: Self = Self {
        parts: [&[]; 6],
        count: 0,
        part: 0,
        pos: 0,
    };

    pub(super) fn is_empty(&self) -> bool {
        self.part >= self.count
    }

    pub(super) fn push(&mut self, bytes: &'r [u8]) {
        if self.is_empty() {
            *self = Self::EMPTY;
        }
        if let Some(slot) = self.parts.get_mut(self.count) {
            *slot = bytes;
            self.count += 1;
        }
    }

    /// Copies what fits into `out`.
    pub(super) fn copy_into(&mut self, out: &mut [u8]) -> usize {
        let mut n = 0;
        while n < out.len() && !self.is_empty() {
            let rest = self.parts[self.part].get(self.pos..).unwrap_or_default();
            let k = rest.len().min(out.len() - n);
            out[n..n + k].copy_from_slice(&rest[..k]);
            n += k;
            self.pos += k;
            if self.pos >= self.parts[self.part].len() {
                self.part += 1;
                self.pos = 0;
            }
        }
        n
    }
}

/// What a request asks of its answer, read from its body and its
/// `MCP-Protocol-Version` header before the engine takes the call's buffer;
/// the same for both HTTP bindings (HTTP/1.1 and `/mcp` on HTTP/2).
pub(crate) struct Asks<'o> {
    /// An event stream (§5.3): a listen, or a request with a progress
    /// token or a log level.
    pub(crate) stream: bool,
    /// `_meta` is malformed: an answer at dispatch is a 400.
    pub(crate) meta_bad: bool,
    /// An older client's request (no version claim in the body, no modern
    /// one in the header): the `data` of its -32022 (§5.6 step 4, §5.8).
    pub(crate) legacy: Option<&'o [u8]>,
}

/// Judges a request (see [`Asks`]); `legacy` holds the -32022 `data`.
pub(crate) fn asks<'o>(
    method: &[u8],
    params: Option<&[u8]>,
    header_version: Option<&[u8]>,
    legacy: &'o mut [u8],
) -> Asks<'o> {
    let meta = RequestMeta::read(params);
    let meta_of = || params.and_then(|p| json::get(p, b"_meta"));
    let stream = method == b"subscriptions/listen"
        || meta.as_ref().is_ok_and(|m| {
            m.progress_token.is_some()
                || meta_of()
                    .and_then(|m| json::get(m, b"io.modelcontextprotocol/logLevel"))
                    .is_some()
        });
    let modern_header =
        header_version.is_some_and(|v| SUPPORTED_VERSIONS.iter().any(|s| s.as_bytes() == v));
    let body_claims = meta_of()
        .and_then(|m| json::get(m, KEY_PROTOCOL_VERSION))
        .is_some();
    let legacy = (meta.is_err() && !body_claims && !modern_header)
        .then(|| legacy_data(params, header_version, legacy))
        .flatten();
    Asks {
        stream,
        meta_bad: meta.is_err(),
        legacy,
    }
}

/// The `data` of -32022 for an older client: the versions served, and the
/// one it asked for (`initialize`'s `protocolVersion`, else its header).
pub(crate) fn legacy_data<'o>(
    params: Option<&[u8]>,
    header: Option<&[u8]>,
    out: &'o mut [u8],
) -> Option<&'o [u8]> {
    let requested = params
        .and_then(|p| json::get(p, b"protocolVersion"))
        .filter(|v| json::kind(v) == Some(json::Kind::String) && v.len() <= 64);
    let mut w = JsonWriter::new(out);
    w.raw(b"{\"supported\":[");
    for (k, v) in SUPPORTED_VERSIONS.iter().enumerate() {
        if k > 0 {
            w.raw(b",");
        }
        w.string(v.as_bytes());
    }
    w.raw(b"]");
    match (requested, header) {
        (Some(v), _) => {
            w.raw(b",\"requested\":").raw(v);
        }
        (None, Some(h)) if h.len() <= 64 && h.iter().all(|&b| (0x20..0x7f).contains(&b)) => {
            w.raw(b",\"requested\":").string(h);
        }
        _ => {}
    }
    w.raw(b"}");
    w.finish().ok()
}

/// A notification accepted (§5.2).
pub(super) const ACCEPTED: &[u8] = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";
pub(super) const ACCEPTED_CLOSE: &[u8] =
    b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// The interim answer to `Expect: 100-continue` (RFC 9110 §10.1.1).
pub(super) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The head of a refused authorization, up to the challenge.
pub(super) fn refusal_head(status: u16) -> &'static [u8] {
    if status == 403 {
        b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\nWWW-Authenticate: "
    } else {
        b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\nWWW-Authenticate: "
    }
}

/// The status of an answer the engine wrote at dispatch, from its
/// JSON-RPC error code (§4, §5.3): errors of the request itself are 400, an
/// unknown method 404; in-band errors (an unknown tool) and results 200.
pub(crate) fn dispatched_status(message: &[u8]) -> u16 {
    let code = json::get(message, b"error")
        .and_then(|e| json::get(e, b"code"))
        .and_then(|c| core::str::from_utf8(c).ok())
        .and_then(|c| c.parse::<i32>().ok());
    match code {
        Some(METHOD_NOT_FOUND) => 404,
        Some(
            PARSE_ERROR
            | INVALID_REQUEST
            | HEADER_MISMATCH
            | MISSING_REQUIRED_CLIENT_CAPABILITY
            | UNSUPPORTED_PROTOCOL_VERSION,
        ) => 400,
        _ => 200,
    }
}

/// What a call's answer is framed as, kept with the call.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Exchange {
    pub(super) keep_alive: bool,
    /// HTTP/1.1: an event stream is chunked (HTTP/1.0: it ends with the
    /// connection).
    pub(super) chunked: bool,
    pub(super) accept_json: bool,
    pub(super) accept_sse: bool,
    /// The answer is an event stream.
    pub(super) sse: bool,
    /// The status of a JSON answer the binding chose (protocol errors).
    pub(super) status: Option<u16>,
    /// The engine answered at dispatch: the status follows the error code.
    pub(super) dispatched: bool,
    pub(super) head_sent: bool,
    /// The request body's length (kept while the call is authorized).
    pub(super) body_len: usize,
}

/// Octets before each message: the longest response head with the event
/// prefix fits.
pub(super) const ROOM: usize = 256;
/// After each message: room for an event's end and its chunk's end.
pub(super) const TAIL: &[u8] = b"\n\n\r\n";

/// Frames a fresh message of the engine at `at` (the message and
/// [`TAIL`], [`ROOM`] free octets before it) in `buf`: the JSON response
/// when it is the final one and no stream was asked, else an event of the
/// stream (its head first). A notification for a request that asked for
/// no stream is dropped. Returns the octets to send.
pub(super) fn frame(
    buf: &mut [u8],
    at: Range<usize>,
    x: &mut Exchange,
    finishing: bool,
) -> Range<usize> {
    let Some(end) = at.end.checked_sub(TAIL.len()) else {
        return at.end..at.end;
    };
    let msg = at.start..end;
    let mut head = [0u8; ROOM];
    let n = if !x.head_sent && finishing && !x.sse {
        let status = x.status.unwrap_or_else(|| {
            if x.dispatched {
                dispatched_status(&buf[msg.clone()])
            } else {
                200
            }
        });
        let mut w = HeadWriter::new(&mut head, status);
        w.field("Content-Type", b"application/json")
            .content_length(msg.len() as u64);
        if !x.keep_alive {
            w.field("Connection", b"close");
        }
        let Ok(n) = w.finish() else {
            return at.end..at.end;
        };
        x.head_sent = true;
        return place(buf, &head[..n], msg.clone()).map_or(at.end..at.end, |s| s..msg.end);
    } else if !x.sse {
        return at.end..at.end;
    } else if !x.head_sent {
        if !x.chunked {
            x.keep_alive = false;
        }
        let mut w = HeadWriter::new(&mut head, 200);
        for (name, value) in write::SSE_FIELDS {
            w.field(name, value);
        }
        if x.chunked {
            w.field("Transfer-Encoding", b"chunked");
        }
        if !x.keep_alive {
            w.field("Connection", b"close");
        }
        let Ok(n) = w.finish() else {
            return at.end..at.end;
        };
        x.head_sent = true;
        n
    } else {
        0
    };
    write::sse_one_line(&mut buf[msg.clone()]);
    let Some(k) = write::sse_event_prefix(msg.len(), x.chunked, &mut head[n..]) else {
        return at.end..at.end;
    };
    let suffix = write::sse_event_suffix(x.chunked).len();
    place(buf, &head[..n + k], msg.clone()).map_or(at.end..at.end, |s| s..msg.end + suffix)
}

/// Copies `prefix` just before `msg`; where it starts.
fn place(buf: &mut [u8], prefix: &[u8], msg: Range<usize>) -> Option<usize> {
    let start = msg.start.checked_sub(prefix.len())?;
    buf.get_mut(start..msg.start)?.copy_from_slice(prefix);
    Some(start)
}

/// Octets of one field in the header list the engine reads (the record
/// format of `h2::HeaderList`: name and value lengths as little-endian
/// u16, a flags octet, the name, the value).
pub(super) const RECORD_HEAD: usize = 5;

/// Where a field's name and value lie in a head (which is shorter than
/// 4 GiB): small, so a head's worth of them sits on the stack.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct FieldSpan {
    name: (u32, u32),
    value: (u32, u32),
}

impl FieldSpan {
    pub(super) fn new(name: Range<usize>, value: Range<usize>) -> Self {
        let narrow = |r: Range<usize>| {
            (
                u32::try_from(r.start).unwrap_or(u32::MAX),
                u32::try_from(r.end).unwrap_or(u32::MAX),
            )
        };
        Self {
            name: narrow(name),
            value: narrow(value),
        }
    }
}

/// Writes the fields at `spans` (in `buf`) as a header list with
/// lowercase names at `buf[at..]`; its length, or `None` when it does not
/// fit.
pub(super) fn write_records(buf: &mut [u8], at: usize, spans: &[FieldSpan]) -> Option<usize> {
    let widen = |(a, b): (u32, u32)| a as usize..b as usize;
    let mut pos = at;
    for span in spans {
        let (name, value) = (widen(span.name), widen(span.value));
        let nl = u16::try_from(name.len()).ok()?;
        let vl = u16::try_from(value.len()).ok()?;
        if name.end > at || value.end > at {
            return None;
        }
        let head = buf.get_mut(pos..pos + RECORD_HEAD)?;
        head[0..2].copy_from_slice(&nl.to_le_bytes());
        head[2..4].copy_from_slice(&vl.to_le_bytes());
        head[4] = 0;
        pos += RECORD_HEAD;
        buf.get(pos..pos + name.len() + value.len())?;
        buf.copy_within(name.clone(), pos);
        buf.get_mut(pos..pos + name.len())?.make_ascii_lowercase();
        pos += name.len();
        buf.copy_within(value, pos);
        pos += vl as usize;
    }
    Some(pos - at)
}

/// A request head read as the mirrored-header checks read headers (names
/// compared case-insensitively).
impl HeaderSource for RequestHead<'_, '_> {
    fn header(&self, name: &[u8]) -> Option<&[u8]> {
        RequestHead::header(self, name)
    }

    fn find_header(&self, matches: &mut dyn FnMut(&[u8]) -> bool) -> Option<&[u8]> {
        // The checks match lowercase names.
        let mut lower = [0u8; 128];
        self.fields.iter().find_map(|f| {
            let name = lower.get_mut(..f.name.len())?;
            name.copy_from_slice(f.name.as_bytes());
            name.make_ascii_lowercase();
            matches(name).then_some(f.value)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::head::EMPTY_HEADER;

    #[test]
    fn loopback_hosts_and_origins() {
        for host in [&b"localhost"[..], b"127.0.0.1", b"[::1]", b"LOCALHOST"] {
            assert!(Allowed::Loopback.allows(host), "{host:?}");
        }
        for host in [&b"evil.example.com"[..], b"127.0.0.1.evil.com", b"10.0.0.1"] {
            assert!(!Allowed::Loopback.allows(host), "{host:?}");
        }
        assert!(Allowed::Hosts(&["mcp.example"]).allows(b"MCP.example"));
        assert_eq!(host_name(b"127.0.0.1:8080"), b"127.0.0.1");
        assert_eq!(host_name(b"[::1]:80"), b"[::1]");
    }

    #[test]
    fn a_head_reads_as_a_header_source() {
        let mut fields = [EMPTY_HEADER; 4];
        let head = RequestHead::parse(
            b"POST /mcp HTTP/1.1\r\nHost: h\r\nMcp-Param-Region: eu\r\n\r\n",
            &mut fields,
        )
        .unwrap();
        let src: &dyn HeaderSource = &head;
        assert_eq!(src.header(b"mcp-param-region"), Some(&b"eu"[..]));
        let found = src.find_header(&mut |n| n == b"mcp-param-region");
        assert_eq!(found, Some(&b"eu"[..]));
    }
}
