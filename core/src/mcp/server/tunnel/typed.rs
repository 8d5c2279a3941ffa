//! The typed gRPC binding (`/model_context_protocol.Mcp/<Rpc>`, Google
//! Cloud proto files v0.2.0) on the tunnel's connection (feature `typed`;
//! typed binding digest §7 and §9).
//!
//! A typed call is a tunnel call with another codec at its two message
//! boundaries: its one request message is transcoded into the JSON-RPC
//! request the engine judges and routes as any other (`_meta` completed
//! with the protocol version and client capabilities), and the engine's
//! final JSON-RPC message is transcoded back: a result into the RPC's
//! response message, an error into a trailers-only answer (`grpc-status`,
//! `grpc-message`, `mcp-error-code`, `mcp-error-bin` with id null).
//! Notifications about the request (progress, log) are dropped.

use super::*;
use crate::grpc::base64;
use crate::mcp::error::{HEADER_MISMATCH, INTERNAL_ERROR};
use crate::mcp::meta::{KEY_CLIENT_CAPABILITIES, KEY_PROTOCOL_VERSION, PROTOCOL_VERSION};
use crate::mcp::mirror::HeaderSource as _;
use crate::mcp::typed::{self as codec, TypedError};
use crate::mcp::writer::JsonWriter;
use core::fmt::Write as _;
use core::ops::Range;
pub(super) use mcpwire_proto::gcp::Rpc;
use mcpwire_proto::gcp::SERVICE_PREFIX;

/// The JSON-RPC id of every typed request: the binding has none of its
/// own, and its answers carry id null.
const REQUEST_ID: &[u8] = b"1";
/// Room for an error object the binding writes itself.
const ERROR_OBJECT_ROOM: usize = 1536;
/// Longest `mcp-error-bin` value (typed binding §9.2).
const MAX_ERROR_BIN: usize = 4096;
/// Longest `grpc-message` text (typed binding §9.2).
const MAX_GRPC_MESSAGE: usize = 1024;
/// Octets of an error's message kept for `grpc-message`: the longest text
/// and a character cut at its end.
const TEXT_ROOM: usize = MAX_GRPC_MESSAGE + 4;
/// The response wrapped around an error object for `mcp-error-bin`.
const ERROR_RESPONSE_START: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":";

/// The typed RPC a gRPC call's `:path` names: `Some(Ok)` for one of the
/// eight, `Some(Err)` for another path under the service, `None` for a
/// path outside it.
pub(super) fn rpc(path: &[u8]) -> Option<Result<Rpc, ()>> {
    path.starts_with(SERVICE_PREFIX.as_bytes())
        .then(|| Rpc::from_path(path).ok_or(()))
}

/// A list RPC: its response is the whole list (§8).
const fn is_list(rpc: Rpc) -> bool {
    matches!(
        rpc,
        Rpc::ListResources | Rpc::ListResourceTemplates | Rpc::ListPrompts | Rpc::ListTools
    )
}

/// The request message's name, for -32700's text.
const fn request_name(rpc: Rpc) -> &'static str {
    match rpc {
        Rpc::ListResources => "ListResourcesRequest",
        Rpc::ReadResource => "ReadResourceRequest",
        Rpc::ListResourceTemplates => "ListResourceTemplatesRequest",
        Rpc::ListPrompts => "ListPromptsRequest",
        Rpc::GetPrompt => "GetPromptRequest",
        Rpc::ListTools => "ListToolsRequest",
        Rpc::CallTool => "CallToolRequest",
        Rpc::Complete => "CompletionRequest",
    }
}

/// `core::fmt` text written escaped into a JSON string.
struct Escaped<'w, 'b>(&'w mut JsonWriter<'b>);

impl core::fmt::Write for Escaped<'_, '_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.escaped(s.as_bytes());
        Ok(())
    }
}

/// Writes the JSON-RPC request of `rpc` with `params` (the transcoded
/// request, a JSON object), `_meta` completed (§7 step 6): a missing
/// protocol version is `version`, missing client capabilities `{}`.
fn write_request(w: &mut JsonWriter<'_>, rpc: Rpc, params: &[u8], version: &[u8]) {
    w.raw(b"{\"jsonrpc\":\"2.0\",\"id\":")
        .raw(REQUEST_ID)
        .raw(b",\"method\":")
        .string(rpc.method().as_bytes())
        .raw(b",\"params\":{\"_meta\":{");
    let mut first = true;
    let (mut has_version, mut has_capabilities) = (false, false);
    if let Some(meta) = json::get(params, b"_meta") {
        for (key, value) in json::members(meta) {
            has_version |= json::str_eq(key, KEY_PROTOCOL_VERSION);
            has_capabilities |= json::str_eq(key, KEY_CLIENT_CAPABILITIES);
            if !first {
                w.raw(b",");
            }
            first = false;
            w.raw(key).raw(b":").raw(value);
        }
    }
    if !has_version {
        w.key(first, KEY_PROTOCOL_VERSION).string(version);
        first = false;
    }
    if !has_capabilities {
        w.key(first, KEY_CLIENT_CAPABILITIES).raw(b"{}");
    }
    w.raw(b"}");
    for (key, value) in json::members(params) {
        if !json::str_eq(key, b"_meta") {
            w.raw(b",").raw(key).raw(b":").raw(value);
        }
    }
    w.raw(b"}}");
}

/// §7 step 6: a protocol version in `_meta` that the
/// `mcp-protocol-version` header contradicts.
fn version_differs(params: &[u8], header: Option<&[u8]>) -> bool {
    let body = json::get(params, b"_meta").and_then(|m| json::get(m, KEY_PROTOCOL_VERSION));
    match (body, header) {
        (Some(body), Some(header)) => !json::str_eq(body, header),
        _ => false,
    }
}

/// §7 step 5: the routing header of `rpc` equals the value the message
/// holds. It and the mirrored headers are singletons: one given twice is
/// refused, as on the tunnel, rather than read first- or last-wins (a
/// proxy in front may route on the other).
fn check_routing(rpc: Rpc, message: &[u8], headers: HeaderList<'_>) -> Result<(), &'static str> {
    if headers.mirrors().repeated {
        return Err(
            "Header mismatch: a mirrored header (mcp-protocol-version, mcp-method, mcp-name, mcp-param-*) given twice",
        );
    }
    let Some(key) = rpc.routing_key() else {
        return Ok(());
    };
    let value = codec::routing_value(rpc, message).map_err(|_| "malformed message")?;
    let mut fields = headers.iter().filter(|f| f.name == key.as_bytes());
    let first = fields.next();
    if fields.next().is_some() {
        return Err(match rpc {
            Rpc::CallTool => "Header mismatch: mcp_tool given twice",
            Rpc::GetPrompt => "Header mismatch: mcp_prompt given twice",
            _ => "Header mismatch: mcp_resource given twice",
        });
    }
    let mismatch = first.is_some_and(|f| Some(f.value) != value.map(str::as_bytes));
    if mismatch {
        return Err(match rpc {
            Rpc::CallTool => "Header mismatch: mcp_tool differs from the tool name",
            Rpc::GetPrompt => "Header mismatch: mcp_prompt differs from the prompt name",
            _ => "Header mismatch: mcp_resource differs from the message",
        });
    }
    Ok(())
}

impl<
    'r,
    S: CallStore,
    const STREAMS: usize,
    const TABLE: usize,
    const BUF: usize,
    FB: Storage<BUF> + Default,
> Server<'r, S, STREAMS, TABLE, BUF, FB>
{
    /// The request message of typed call `i` (`len` octets at its body) is
    /// whole: transcode it into a JSON-RPC request and dispatch that.
    pub(super) fn typed_dispatch(&mut self, i: usize, rpc: Rpc, len: usize) {
        let Some(c) = self.engine.calls[i].as_ref() else {
            return;
        };
        let (headers_len, body) = (c.headers_len, c.body);
        let msg = body..body + len;
        // The params after the message.
        let mut want = 2 * len + 256;
        let mut params_len = None;
        for _ in 0..2 {
            let Some(buf) = self.engine.buffer(i, msg.end + want) else {
                return;
            };
            let (before, out) = buf.split_at_mut(msg.end);
            match codec::request_to_json(rpc, &before[msg.clone()], out) {
                Ok(n) => {
                    params_len = Some(n);
                    break;
                }
                Err(TypedError::BufferTooSmall { needed }) => want = needed,
                Err(e) => return self.typed_request_error(i, msg.end, rpc, e),
            }
        }
        let Some(params_len) = params_len else {
            let e = TypedError::BufferTooSmall { needed: want };
            return self.typed_request_error(i, msg.end, rpc, e);
        };
        let params = msg.end..msg.end + params_len;
        let routed = match self.engine.buffer(i, 0) {
            Some(buf) => {
                let headers = HeaderList::from_bytes(&buf[..headers_len]);
                check_routing(rpc, &buf[msg.clone()], headers)
            }
            None => return,
        };
        if let Err(why) = routed {
            return self.typed_fail(i, params.end, HEADER_MISMATCH, format_args!("{why}"));
        }
        // The request after the params, then moved to the body.
        let at = params.end;
        let mut want = params_len + 512;
        let mut request_len = None;
        let mut mismatch = false;
        for _ in 0..2 {
            let Some(buf) = self.engine.buffer(i, at + want) else {
                return;
            };
            let (before, out) = buf.split_at_mut(at);
            let headers = HeaderList::from_bytes(&before[..headers_len]);
            let header = headers
                .get(b"mcp-protocol-version")
                .map(crate::http1::head::trim)
                .filter(|v| !v.is_empty());
            let params_json = &before[params.clone()];
            if version_differs(params_json, header) {
                mismatch = true;
                break;
            }
            let version = header
                .filter(|v| core::str::from_utf8(v).is_ok())
                .unwrap_or(PROTOCOL_VERSION.as_bytes());
            let mut w = JsonWriter::new(out);
            write_request(&mut w, rpc, &before[params.clone()], version);
            match w.finish() {
                Ok(text) => {
                    request_len = Some(text.len());
                    break;
                }
                Err(e) => want = e.needed,
            }
        }
        if mismatch {
            let why = "Header mismatch: mcp-protocol-version differs from the message";
            return self.typed_fail(i, params.end, HEADER_MISMATCH, format_args!("{why}"));
        }
        let Some(n) = request_len else {
            return self.typed_fail(
                i,
                params.start,
                INTERNAL_ERROR,
                format_args!("The request does not fit the call buffer"),
            );
        };
        let Some(buf) = self.engine.buffer(i, 0) else {
            return;
        };
        buf.copy_within(at..at + n, body);
        let dispatched = self.engine.dispatch_unmirrored(i, body..body + n);
        self.engine.forget_id(i);
        match dispatched {
            Dispatched::Protocol(e) => self.end_with_error(i, e),
            Dispatched::Notification | Dispatched::Failed => self.drop_call(i),
            Dispatched::Written => self.flush(i),
            Dispatched::Handed => {
                // The messages have no cursor: a forwarding app merges the
                // pages itself (§8).
                if is_list(rpc) {
                    self.engine.want_whole_list(i);
                }
            }
        }
    }

    /// A request message the codec refused (§7 step 4).
    fn typed_request_error(&mut self, i: usize, at: usize, rpc: Rpc, e: TypedError) {
        let code = e.request_error_code();
        match e {
            TypedError::Malformed(_) => self.typed_fail(
                i,
                at,
                code,
                format_args!("The message is not a valid {}: {e}", request_name(rpc)),
            ),
            _ => self.typed_fail(i, at, code, format_args!("{e}")),
        }
    }

    /// Ends typed call `i` with the JSON-RPC error `code` and `message`,
    /// written at `at` in its buffer.
    fn typed_fail(&mut self, i: usize, at: usize, code: i32, message: core::fmt::Arguments<'_>) {
        let Some(buf) = self.engine.buffer(i, at + ERROR_OBJECT_ROOM) else {
            return;
        };
        let Some(out) = buf.get_mut(at..) else {
            return self.drop_call(i);
        };
        let room = out.len().min(ERROR_OBJECT_ROOM);
        let mut w = JsonWriter::new(&mut out[..room]);
        w.raw(b"{\"code\":")
            .int(i64::from(code))
            .raw(b",\"message\":\"");
        let _ = Escaped(&mut w).write_fmt(message);
        w.raw(b"\"}");
        match w.finish() {
            Ok(text) => {
                let n = text.len();
                self.end_typed_error(i, at..at + n);
            }
            Err(_) => {
                let e = RpcError::new(code, "the error does not fit the call buffer");
                self.end_with_error(i, e);
            }
        }
    }

    /// Ends typed call `i` with a trailers-only answer for the JSON-RPC
    /// error object at `obj` in its buffer (§9.2). What does not fit the
    /// buffer is left out (`mcp-error-bin`) or cut (`grpc-message`).
    fn typed_error_trailers(&mut self, i: usize, obj: Range<usize>) {
        let Some(stream) = self.engine.calls[i].as_ref().map(|c| c.x.stream) else {
            return;
        };
        let wrapped = ERROR_RESPONSE_START.len() + obj.len() + 1;
        let bin_room = base64::encoded_len(wrapped);
        // Room sized by the message itself (its JSON text is no shorter
        // than its octets), so that a device's small call buffer still
        // holds a short error's mcp-error-bin.
        let Some(buf) = self.engine.buffer(i, 0) else {
            return;
        };
        let raw_len = buf
            .get(obj.clone())
            .and_then(|e| json::get(e, b"message"))
            .map_or(0, <[u8]>::len);
        let text_room = TEXT_ROOM.min(raw_len);
        let message_room = 3 * text_room.min(MAX_GRPC_MESSAGE);
        // The message first (a small store keeps it), then the response
        // for mcp-error-bin and its base64 when they are small enough.
        let mut want = obj.end + text_room + message_room;
        if bin_room <= MAX_ERROR_BIN {
            want += wrapped + bin_room;
        }
        let Some(buf) = self.engine.buffer(i, want) else {
            return;
        };
        let (before, rest) = buf.split_at_mut(obj.end);
        let error = &before[obj];
        let code = json::get(error, b"code")
            .and_then(json::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(INTERNAL_ERROR);
        let mut code_text = [0u8; 12];
        let code_len = {
            let mut w = JsonWriter::new(&mut code_text);
            w.int(i64::from(code));
            w.len()
        };
        let status = crate::mcp::error::grpc_code(code);
        // The message's text (its first TEXT_ROOM octets: grpc-message
        // keeps 1024 at most), then percent-encoded.
        let (text, rest) = rest.split_at_mut(text_room.min(rest.len()));
        let mut text_len = 0;
        if let Some(m) = json::get(error, b"message") {
            json::unescape_each(m, |piece| {
                let n = piece.len().min(text.len() - text_len);
                text[text_len..text_len + n].copy_from_slice(&piece[..n]);
                text_len += n;
            });
        }
        let (message, rest) = rest.split_at_mut(message_room.min(rest.len()));
        let msg_len = super::end::grpc_message(&text[..text_len], message);
        let (response, bin) = rest.split_at_mut(wrapped.min(rest.len()));
        let mut bin_len = None;
        if response.len() == wrapped && bin_room <= MAX_ERROR_BIN {
            let (start, tail) = response.split_at_mut(ERROR_RESPONSE_START.len());
            start.copy_from_slice(ERROR_RESPONSE_START);
            let (obj_part, close) = tail.split_at_mut(error.len());
            obj_part.copy_from_slice(error);
            close.copy_from_slice(b"}");
            bin_len = bin
                .get_mut(..bin_room)
                .and_then(|out| base64::encode(response, out));
        }
        let mut fields = [
            response::HEAD[0],
            response::HEAD[1],
            Field::new(b"grpc-status", status.as_bytes()),
            Field::new(b"grpc-message", &message[..msg_len]),
            Field::new(b"mcp-error-code", &code_text[..code_len]),
            Field::new(b"mcp-error-bin", b""),
        ];
        let count = match bin_len {
            Some(n) => {
                fields[5] = Field::new(b"mcp-error-bin", &bin[..n]);
                6
            }
            None => 5,
        };
        let _ = self
            .conn
            .send_headers(stream, fields[..count].iter().copied(), true);
    }

    fn end_typed_error(&mut self, i: usize, obj: Range<usize>) {
        self.typed_error_trailers(i, obj);
        self.engine.remove(i);
    }

    /// Replaces typed call `i`'s fresh JSON-RPC message by what the typed
    /// binding sends: nothing for a notification, the response message
    /// for a result; an error ends the call. False when the call ended.
    pub(super) fn typed_frame(&mut self, i: usize, rpc: Rpc) -> bool {
        let Some(at) = self.engine.take_fresh(i) else {
            return true;
        };
        if self.engine.phase(i) != Some(Phase::Finishing) {
            // A notification about the request: dropped (§7 step 7).
            self.engine.set_output(i, at.end..at.end);
            self.engine.sent(i, 0);
            return true;
        }
        let Some(buf) = self.engine.buffer(i, 0) else {
            return false;
        };
        // The engine framed the JSON for the tunnel: a gRPC prefix and a
        // `JsonRpcMessage` header before it.
        let json = buf
            .get(at.start + grpc::PREFIX_LEN..at.end)
            .and_then(|m| JsonRpcMessage::decode(m).ok());
        let Some(json) = json else {
            self.drop_call(i);
            return false;
        };
        let span = json::span(buf, json);
        if let Some(error) = json::get(json, b"error") {
            let e = json::span(buf, error);
            self.end_typed_error(i, e);
            return false;
        }
        let Some(result) = json::get(json, b"result").map(|r| json::span(buf, r)) else {
            let why = format_args!("The answer carries no result");
            self.typed_fail(i, span.end, INTERNAL_ERROR, why);
            return false;
        };
        let out_at = at.end;
        let mut want = result.len() + 64;
        for _ in 0..2 {
            let Some(buf) = self.engine.buffer(i, out_at + grpc::PREFIX_LEN + want) else {
                return false;
            };
            let (before, rest) = buf.split_at_mut(out_at);
            let Some((prefix, out)) = rest.split_at_mut_checked(grpc::PREFIX_LEN) else {
                break;
            };
            match codec::result_to_proto(rpc, &before[result.clone()], out) {
                Ok(n) => {
                    prefix.copy_from_slice(&grpc::write_prefix(n as u32));
                    self.engine
                        .set_output(i, out_at..out_at + grpc::PREFIX_LEN + n);
                    return true;
                }
                Err(TypedError::BufferTooSmall { needed }) => want = needed,
                Err(e) => {
                    let why = format_args!("The typed gRPC binding cannot express {e}");
                    self.typed_fail(i, out_at, INTERNAL_ERROR, why);
                    return false;
                }
            }
        }
        let why = format_args!("The response message does not fit the call buffer");
        self.typed_fail(i, span.end, INTERNAL_ERROR, why);
        false
    }
}
