//! The typed binding's calls in the client engine (typed binding digest
//! §10): a request whose method has an RPC of `model_context_protocol.Mcp`
//! goes out as that unary RPC, its `params` transcoded into the request
//! message before a stream opens (a request the messages cannot carry is
//! refused with -32600, nothing sent); the one response message comes
//! back as the JSON-RPC response the tunnel would give, with the
//! application's id. Everything else of a call (deadline, cancel, a
//! refused stream sent once more, errors read from the trailers in the
//! binding's order) is the tunnel call's machinery.

use mcpwire_proto::gcp::Rpc;

use super::calls::{ERROR_ROOM, Slot, bytes, bytes_mut, copy_id, ensure};
use super::events::StartError;
use super::request::Framed;
use crate::grpc::{PREFIX_LEN, write_prefix};
use crate::mcp::error::{INVALID_REQUEST, RpcError};
use crate::mcp::json;
use crate::mcp::store::CallStore;
use crate::mcp::typed::{self, TypedError};
use crate::mcp::writer::JsonWriter;

/// Which binding a call goes over ([`Client::call_on`](super::Client::call_on)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Binding {
    /// `/mcp.zig.transport.v1.Mcp/Call`, every method.
    #[default]
    Tunnel,
    /// The typed RPC of the request's method; a method without one
    /// (`server/discover`, `subscriptions/listen`, notifications,
    /// extension methods) is refused with -32600 before sending.
    Typed,
    /// The typed RPC of the request's method; a method without one goes
    /// over the tunnel on the same connection (`fallback = tunnel`).
    TypedOrTunnel,
}

impl Binding {
    /// The RPC that carries a request of `method` (its raw JSON string) on
    /// this binding; `None` for the tunnel.
    pub fn rpc_for(self, method: &[u8]) -> Result<Option<Rpc>, RpcError> {
        if self == Self::Tunnel {
            return Ok(None);
        }
        let rpc = json::str_plain(method).and_then(Rpc::for_method);
        match (rpc, self) {
            (None, Self::Typed) => Err(RpcError::new(
                INVALID_REQUEST,
                "the typed gRPC binding has no RPC for this method",
            )),
            (rpc, _) => Ok(rpc),
        }
    }
}

/// Writes the framed request message of `rpc` for the JSON-RPC request
/// `body`, then `body` itself (for its id and `_meta`), into a buffer of
/// `store`: the buffer, where the frame lies and where the body lies.
pub(super) fn frame_request<S: CallStore>(
    store: &mut S,
    rpc: Rpc,
    body: &[u8],
    max_message: usize,
) -> Result<Framed<S::Buf>, StartError> {
    let params = json::get(body, b"params").unwrap_or(b"");
    // The message is rarely longer than the JSON it comes from; when it
    // is, the transcoder says how long, and the second try fits.
    let mut room = body.len() + 64;
    for _ in 0..2 {
        let needed = PREFIX_LEN + room + body.len();
        if needed > store.max_len() {
            return Err(StartError::TooLarge { needed });
        }
        let mut buf = store.take(needed).ok_or(StartError::Busy)?;
        let out = store.bytes_mut(&mut buf);
        let Some(dst) = out.get_mut(PREFIX_LEN..PREFIX_LEN + room) else {
            store.put(buf);
            return Err(StartError::Busy);
        };
        match typed::request_to_proto(rpc, params, dst) {
            Ok(n) => {
                let Ok(len) = u32::try_from(n)
                    .map_err(drop)
                    .and_then(|len| if n > max_message { Err(()) } else { Ok(len) })
                else {
                    store.put(buf);
                    return Err(StartError::TooLarge {
                        needed: PREFIX_LEN + n,
                    });
                };
                let end = PREFIX_LEN + n;
                out[..PREFIX_LEN].copy_from_slice(&write_prefix(len));
                out[end..end + body.len()].copy_from_slice(body);
                return Ok(Framed {
                    buf,
                    frame: (0, end),
                    json: (end, end + body.len()),
                });
            }
            Err(TypedError::BufferTooSmall { needed }) => {
                store.put(buf);
                room = needed;
            }
            Err(e) => {
                store.put(buf);
                return Err(StartError::Invalid(RpcError::new(
                    INVALID_REQUEST,
                    typed::refusal_reason(&e),
                )));
            }
        }
    }
    Err(StartError::TooLarge {
        needed: PREFIX_LEN + room + body.len(),
    })
}

/// Writes the request of a call's next round (MCP 2026-07-28 §9): its JSON
/// (as `write` writes it) at the start of `out`, then its `params`
/// transcoded into `rpc`'s framed request message after it; where the
/// frame and the JSON lie.
pub(super) fn frame_round(
    rpc: Rpc,
    out: &mut [u8],
    write: impl Fn(&mut JsonWriter<'_>),
) -> Result<super::round::Spans, super::round::Unwritten> {
    use super::round::Unwritten;
    let mut w = JsonWriter::new(out);
    write(&mut w);
    let len = w
        .finish()
        .map_err(|o| Unwritten::Room(o.needed + PREFIX_LEN + o.needed + 64))?
        .len();
    let (json_text, rest) = out.split_at_mut(len);
    let params = json::get(json_text, b"params").unwrap_or(b"{}");
    let Some(dst) = rest.get_mut(PREFIX_LEN..) else {
        return Err(Unwritten::Room(len + PREFIX_LEN + len + 64));
    };
    match typed::request_to_proto(rpc, params, dst) {
        Ok(n) => {
            let prefix = u32::try_from(n)
                .map(write_prefix)
                .map_err(|_| Unwritten::Refused("the next round's message is too large"))?;
            rest[..PREFIX_LEN].copy_from_slice(&prefix);
            Ok(((len, len + PREFIX_LEN + n), (0, len)))
        }
        Err(TypedError::BufferTooSmall { needed }) => {
            Err(Unwritten::Room(len + PREFIX_LEN + needed))
        }
        Err(e) => Err(Unwritten::Refused(typed::refusal_reason(&e))),
    }
}

/// The JSON-RPC response for the response message at `msg` in the `rx`
/// of call `slot`, written after it (with the application's id); where it
/// lies, or why it could not be written.
pub(super) fn response_json<S: CallStore>(
    store: &mut S,
    slot: &mut Slot<S::Buf>,
    rpc: Rpc,
    msg: (usize, usize),
) -> Result<(usize, usize), &'static [u8]> {
    let Some(a) = slot.active.as_ref() else {
        return Err(b"no call");
    };
    let id = copy_id(
        bytes(store, &slot.req)
            .get(a.orig_json.0..a.orig_json.1)
            .unwrap_or(b""),
    );
    let to = a.msg_start.max(msg.1);
    let mut room = 2 * (msg.1 - msg.0) + ERROR_ROOM + 256;
    for _ in 0..2 {
        if !ensure(store, &mut slot.rx, to + room) {
            return Err(b"the response is larger than the call buffer");
        }
        let (src, dst) = bytes_mut(store, &mut slot.rx).split_at_mut(to);
        let message = src.get(msg.0..msg.1).unwrap_or_default();
        let mut jw = JsonWriter::new(dst);
        if typed::write_response(rpc, id.as_slice(), message, &mut jw).is_err() {
            return Err(b"the response message is not valid for its RPC");
        }
        match jw.finish() {
            Ok(text) => return Ok((to, to + text.len())),
            Err(o) => room = o.needed,
        }
    }
    Err(b"the response is larger than the call buffer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_without_an_rpc_fall_back_or_are_refused() {
        assert_eq!(Binding::Tunnel.rpc_for(b"\"tools/call\""), Ok(None));
        assert_eq!(
            Binding::Typed.rpc_for(b"\"tools/call\""),
            Ok(Some(Rpc::CallTool))
        );
        assert_eq!(
            Binding::TypedOrTunnel.rpc_for(b"\"resources/templates/list\""),
            Ok(Some(Rpc::ListResourceTemplates))
        );
        assert_eq!(
            Binding::TypedOrTunnel.rpc_for(b"\"server/discover\""),
            Ok(None)
        );
        let e = Binding::Typed
            .rpc_for(b"\"subscriptions/listen\"")
            .unwrap_err();
        assert_eq!(e.code, INVALID_REQUEST);
    }
}
