//! A call's request: the framed `JsonRpcMessage` in the call's buffer, and
//! the request head (gRPC fields, `grpc-timeout`, the configured and the
//! run-time metadata, the headers mirrored from the body).

use core::time::Duration;

use super::config::ClientConfig;
use super::metadata::{MirrorValue, Mirrored, mirror_fields};
use crate::grpc::{PREFIX_LEN, timeout, write_prefix};
use crate::hpack::Field;
use crate::mcp::TUNNEL_PATH;
use crate::mcp::error::{INVALID_REQUEST, RpcError};
use crate::mcp::json;
use crate::mcp::mirror;
use crate::mcp::store::CallStore;
use crate::mcp::writer::JsonWriter;
use mcpwire_proto::tunnel::JsonRpcMessage;

/// Fields of a request head.
const MAX_FIELDS: usize = 32;
/// Room for a message's two prefixes (gRPC, protobuf field) before its JSON.
pub(super) const FRAME_ROOM: usize = PREFIX_LEN + JsonRpcMessage::MAX_PREFIX_LEN;

/// A call's request in its buffer from the store: where the framed
/// message lies, and where the JSON-RPC request's text lies (inside the
/// frame on the tunnel, after it on the typed binding).
pub(super) struct Framed<T> {
    pub(super) buf: T,
    pub(super) frame: (usize, usize),
    pub(super) json: (usize, usize),
}

/// Writes a framed `JsonRpcMessage` whose JSON `body` writes, at `at` in
/// `buf`: returns where the JSON lies and where the frame ends, or the
/// room it needed.
pub(super) fn frame_into(
    buf: &mut [u8],
    at: usize,
    body: impl Fn(&mut JsonWriter<'_>),
) -> Result<(usize, usize), usize> {
    let Some(rest) = buf.get_mut(at..) else {
        return Err(at + FRAME_ROOM);
    };
    let Some(text_room) = rest.get_mut(FRAME_ROOM..) else {
        return Err(at + FRAME_ROOM);
    };
    let mut w = JsonWriter::new(text_room);
    body(&mut w);
    let len = w.finish().map_err(|e| at + FRAME_ROOM + e.needed)?.len();
    // Move the text right after its prefixes.
    let mut proto = [0u8; JsonRpcMessage::MAX_PREFIX_LEN];
    let plen = JsonRpcMessage::encode_prefix(len, &mut proto).map_err(|_| at + FRAME_ROOM + len)?;
    let total = u32::try_from(plen + len).map_err(|_| at + FRAME_ROOM + len)?;
    let text_at = PREFIX_LEN + plen;
    rest.copy_within(FRAME_ROOM..FRAME_ROOM + len, text_at);
    rest[..PREFIX_LEN].copy_from_slice(&write_prefix(total));
    rest[PREFIX_LEN..text_at].copy_from_slice(&proto[..plen]);
    Ok((at + text_at, at + text_at + len))
}

/// A request head being built: names and values in one buffer, the
/// connection's (a head that does not fit it could not be sent anyway).
pub(super) struct Head<'b> {
    buf: &'b mut [u8],
    len: usize,
    fields: [(usize, usize, usize, bool); MAX_FIELDS],
    n: usize,
    full: bool,
}

impl<'b> Head<'b> {
    pub(super) fn new(buf: &'b mut [u8]) -> Self {
        Self {
            buf,
            len: 0,
            fields: [(0, 0, 0, false); MAX_FIELDS],
            n: 0,
            full: false,
        }
    }

    /// A field did not fit: the head needs more room.
    pub(super) fn is_full(&self) -> bool {
        self.full
    }

    fn push(&mut self, name: &[u8], value: &[u8], sensitive: bool) {
        let need = name.len() + value.len();
        let (Some(dst), true) = (
            self.buf.get_mut(self.len..self.len + need),
            self.n < MAX_FIELDS,
        ) else {
            self.full = true;
            return;
        };
        dst[..name.len()].copy_from_slice(name);
        dst[name.len()..].copy_from_slice(value);
        self.record(name.len(), value.len(), sensitive);
    }

    /// Takes the field written at `len`: a name of `n` and a value of `v`.
    fn record(&mut self, n: usize, v: usize, sensitive: bool) {
        self.fields[self.n] = (self.len, n, v, sensitive);
        self.len += n + v;
        self.n += 1;
    }

    /// A mirrored header: a JSON string is unescaped and, unless it is
    /// plain header text, Base64-encoded, in the head's own buffer (no
    /// other limit on its length).
    fn push_mirror(&mut self, name: &[u8], value: MirrorValue<'_>) {
        let raw = match value {
            MirrorValue::Text(text) => return self.push(name, text, false),
            MirrorValue::Json(raw) => raw,
        };
        if let Some(plain) = json::str_plain(raw).filter(|v| mirror::is_plain_value(v)) {
            return self.push(name, plain, false);
        }
        let at = self.len + name.len();
        let (Some(dst), true) = (self.buf.get_mut(self.len..at), self.n < MAX_FIELDS) else {
            self.full = true;
            return;
        };
        dst.copy_from_slice(name);
        let Some(text_len) = self
            .buf
            .get_mut(at..)
            .and_then(|room| json::unescape(raw, room))
            .map(<[u8]>::len)
        else {
            self.full = true;
            return;
        };
        let text = &self.buf[at..at + text_len];
        if mirror::is_plain_value(text) {
            return self.record(name.len(), text_len, false);
        }
        let encoded = mirror::encoded_len(text);
        // Move the text past the room of its encoding, then encode it.
        if self.buf.len() < at + encoded + text_len {
            self.full = true;
            return;
        }
        self.buf.copy_within(at..at + text_len, at + encoded);
        match mirror::encode_in_place(self.buf, at, text_len) {
            Some(v) => self.record(name.len(), v, false),
            None => self.full = true,
        }
    }

    pub(super) fn fields(&self) -> impl Iterator<Item = Field<'_>> + '_ {
        self.fields[..self.n].iter().map(|&(at, n, v, sensitive)| {
            let name = &self.buf[at..at + n];
            let value = &self.buf[at + n..at + n + v];
            if sensitive {
                Field::sensitive(name, value)
            } else {
                Field::new(name, value)
            }
        })
    }
}

/// `:authority` and metadata copied by [`Client::set_metadata`](super::Client::set_metadata): a u16
/// (little-endian) length and the authority (0 for none: the config's),
/// then per pair a u16 name length, a u16 value length, the name and the
/// value. Empty when none were set.
#[derive(Clone, Copy)]
pub(super) struct OwnedMeta<'a>(&'a [u8]);

impl<'a> OwnedMeta<'a> {
    /// The encoded metadata.
    pub(super) fn bytes(&self) -> &'a [u8] {
        self.0
    }

    pub(super) fn of<S: CallStore>(store: &'a S, buf: &'a Option<(S::Buf, usize)>) -> Self {
        Self(match buf {
            Some((buf, len)) => store.bytes(buf).get(..*len).unwrap_or_default(),
            None => &[],
        })
    }

    pub(super) fn encoded_len(authority: Option<&str>, metadata: &[(&str, &str)]) -> Option<usize> {
        let fits = |s: &str| u16::try_from(s.len()).is_ok();
        if !authority.is_none_or(fits) || !metadata.iter().all(|(n, v)| fits(n) && fits(v)) {
            return None;
        }
        let pairs: usize = metadata.iter().map(|(n, v)| 4 + n.len() + v.len()).sum();
        Some(2 + authority.map_or(0, str::len) + pairs)
    }

    /// Writes into `out`, which is exactly `encoded_len` long.
    pub(super) fn encode(out: &mut [u8], authority: Option<&str>, metadata: &[(&str, &str)]) {
        let mut at = 0;
        let mut put = |b: &[u8]| {
            out[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        };
        let a = authority.unwrap_or("");
        put(&(a.len() as u16).to_le_bytes());
        put(a.as_bytes());
        for (n, v) in metadata {
            put(&(n.len() as u16).to_le_bytes());
            put(&(v.len() as u16).to_le_bytes());
            put(n.as_bytes());
            put(v.as_bytes());
        }
    }

    fn u16_at(&self, at: usize) -> Option<usize> {
        let b = self.0.get(at..at + 2)?;
        Some(usize::from(u16::from_le_bytes([b[0], b[1]])))
    }

    fn authority(&self) -> Option<&'a [u8]> {
        let n = self.u16_at(0).filter(|&n| n > 0)?;
        self.0.get(2..2 + n)
    }

    fn pairs(self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let mut at = 2 + self.u16_at(0).unwrap_or(0);
        core::iter::from_fn(move || {
            let n = self.u16_at(at)?;
            let v = self.u16_at(at + 2)?;
            let name = self.0.get(at + 4..at + 4 + n)?;
            let value = self.0.get(at + 4 + n..at + 4 + n + v)?;
            at += 4 + n + v;
            Some((name, value))
        })
    }
}

/// The gRPC fields of a request head for `path`, with `grpc-timeout` of
/// the time `left`.
fn push_grpc_fields(
    head: &mut Head<'_>,
    config: &ClientConfig,
    owned: OwnedMeta<'_>,
    path: &[u8],
    left: Option<Duration>,
) {
    head.push(b":method", b"POST", false);
    head.push(b":scheme", config.scheme.as_bytes(), false);
    head.push(b":path", path, false);
    let authority = owned.authority().unwrap_or(config.authority.as_bytes());
    head.push(b":authority", authority, false);
    head.push(b"content-type", b"application/grpc+proto", false);
    head.push(b"te", b"trailers", false);
    if let Some(left) = left {
        let mut text = [0u8; 10];
        head.push(b"grpc-timeout", timeout::format(left, &mut text), false);
    }
}

/// The configured and the run-time metadata (names in lowercase, an
/// `authorization` value never indexed).
fn push_metadata(
    head: &mut Head<'_>,
    config: &ClientConfig,
    owned: OwnedMeta<'_>,
) -> Result<(), RpcError> {
    let fixed = config
        .metadata
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()));
    for (name, value) in fixed.chain(owned.pairs()) {
        let mut lower = [0u8; 64];
        let Some(dst) = lower.get_mut(..name.len()) else {
            return Err(RpcError::new(INVALID_REQUEST, "metadata name too long"));
        };
        for (d, s) in dst.iter_mut().zip(name) {
            *d = s.to_ascii_lowercase();
        }
        let sensitive = dst == b"authorization";
        head.push(&lower[..name.len()], value, sensitive);
    }
    Ok(())
}

fn check_room(head: &Head<'_>) -> Result<(), RpcError> {
    if head.full {
        return Err(RpcError::new(
            INVALID_REQUEST,
            "request metadata larger than the connection's buffer",
        ));
    }
    Ok(())
}

/// The request head of a call: the gRPC fields, `grpc-timeout` with the
/// time `left`, the configured metadata and the headers mirrored from
/// the request `body` (with the tool's cached `schema`).
pub(super) fn build_head(
    head: &mut Head<'_>,
    config: &ClientConfig,
    owned: OwnedMeta<'_>,
    schema: Option<&[u8]>,
    body: &Mirrored<'_>,
    left: Option<Duration>,
) -> Result<(), RpcError> {
    push_grpc_fields(head, config, owned, TUNNEL_PATH, left);
    push_metadata(head, config, owned)?;
    mirror_fields(body, schema, |n, v| {
        head.push_mirror(n, v);
        Ok(())
    })?;
    check_room(head)
}

/// The request head of a typed call of `rpc` (typed binding digest §10):
/// the gRPC fields on the RPC's path, `grpc-timeout` with the time `left`,
/// `mcp-protocol-version` (the request's, else the client's), the routing
/// key of the RPC when the request `message` has a value for it that is
/// visible ASCII or space, then the configured metadata.
#[cfg(feature = "typed")]
pub(super) fn build_typed_head(
    head: &mut Head<'_>,
    config: &ClientConfig,
    owned: OwnedMeta<'_>,
    rpc: mcpwire_proto::gcp::Rpc,
    body: &[u8],
    message: &[u8],
    left: Option<Duration>,
) -> Result<(), RpcError> {
    use crate::mcp::meta::{KEY_PROTOCOL_VERSION, PROTOCOL_VERSION};
    push_grpc_fields(head, config, owned, rpc.path().as_bytes(), left);
    let version = json::get(body, b"params")
        .and_then(|p| json::get(p, b"_meta"))
        .and_then(|m| json::get(m, KEY_PROTOCOL_VERSION))
        .and_then(json::str_plain)
        .filter(|v| mirror::is_plain_value(v))
        .unwrap_or(PROTOCOL_VERSION.as_bytes());
    head.push(b"mcp-protocol-version", version, false);
    if let Some(key) = rpc.routing_key()
        && let Ok(Some(value)) = crate::mcp::typed::routing_value(rpc, message)
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
    {
        head.push(key.as_bytes(), value.as_bytes(), false);
    }
    push_metadata(head, config, owned)?;
    check_room(head)
}
