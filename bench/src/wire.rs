//! What travels on a tunnel call: the gRPC length prefix around
//! `JsonRpcMessage { bytes jsonrpc = 1 }`, the two JSON-RPC requests of the
//! load (`echo` and `progress`) and the checks of what comes back.

use std::borrow::Cow;

use bytes::{Buf, Bytes, BytesMut};
use serde::Deserialize;
use serde_json::json;

/// The path of the tunnel method.
pub const PATH: &str = "/mcp.zig.transport.v1.Mcp/Call";
/// The path of the typed binding's `CallTool`.
pub const TYPED_CALL_TOOL: &str = "/model_context_protocol.Mcp/CallTool";
/// The MCP revision the requests speak.
pub const PROTOCOL_VERSION: &str = "2026-07-28";
/// The revision of the `initialize`-first shape, for a server of the 2025
/// era only.
pub const LEGACY_PROTOCOL_VERSION: &str = "2025-11-25";

/// How requests carry the protocol revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28: every request carries its version and capabilities in
    /// `_meta`; no `initialize`.
    Modern,
    /// 2025-11-25: `initialize` and `notifications/initialized` first, then
    /// requests without the per-request keys.
    Legacy,
}

impl Era {
    pub fn version(self) -> &'static str {
        match self {
            Self::Modern => PROTOCOL_VERSION,
            Self::Legacy => LEGACY_PROTOCOL_VERSION,
        }
    }

    /// The `initialize` request of the legacy shape.
    pub fn initialize_json(id: u64) -> Vec<u8> {
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcpwire-load", "version": env!("CARGO_PKG_VERSION")},
            },
        })
        .to_string()
        .into_bytes()
    }

    /// The notification that ends the legacy handshake.
    pub const INITIALIZED_JSON: &'static [u8] =
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
}

/// What each call of a scenario asks for.
#[derive(Debug, Clone)]
pub enum Work {
    /// `echo` with this text; the result must carry it back.
    Echo { text: String },
    /// `progress` with `steps` notifications and no delay between them.
    Progress { steps: u32 },
}

/// A stand-in for the id in a rendered request, split off to make a template.
const ID_MARK: u64 = 918_273_645_546_372_819;

impl Work {
    /// An `echo` of `len` bytes of printable ASCII (no JSON escapes).
    pub fn echo(len: usize) -> Self {
        let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let text = (0..len)
            .map(|i| char::from(alphabet[i % alphabet.len()]))
            .collect();
        Self::Echo { text }
    }

    /// The tool this work calls (also its `mcp-name`).
    pub fn tool(&self) -> &'static str {
        match self {
            Self::Echo { .. } => "echo",
            Self::Progress { .. } => "progress",
        }
    }

    /// Messages one call receives (notifications and the response).
    pub fn messages_per_call(&self) -> u64 {
        match self {
            Self::Echo { .. } => 1,
            Self::Progress { steps } => u64::from(*steps) + 1,
        }
    }

    /// The request of call `id` as JSON; a progress call uses `id` as its
    /// progress token too.
    fn request_json(&self, id: u64, era: Era) -> serde_json::Value {
        let mut meta = match era {
            Era::Modern => json!({
                "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            }),
            Era::Legacy => json!({}),
        };
        let arguments = match self {
            Self::Echo { text } => json!({ "text": text }),
            Self::Progress { steps } => {
                meta["progressToken"] = json!(id);
                json!({ "steps": steps, "delay_ms": 0 })
            }
        };
        let mut params = json!({ "name": self.tool(), "arguments": arguments });
        if meta.as_object().is_some_and(|m| !m.is_empty()) {
            params["_meta"] = meta;
        }
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": params,
        })
    }

    /// The typed binding's `CallToolRequest` for this work's `tools/call`
    /// (the core's transcoder writes it from the same params), framed.
    pub fn typed_frame(&self) -> Result<Bytes, String> {
        let request = self.request_json(1, Era::Modern);
        let params = request["params"].to_string();
        let mut out = vec![0u8; params.len() + 256];
        let n = mcpwire_core::mcp::typed::request_to_proto(
            mcpwire_proto::gcp::Rpc::CallTool,
            params.as_bytes(),
            &mut out,
        )
        .map_err(|e| format!("the typed CallToolRequest: {e:?}"))?;
        let mut framed = BytesMut::with_capacity(n + 5);
        framed.extend_from_slice(&[0]);
        framed.extend_from_slice(&(n as u32).to_be_bytes());
        framed.extend_from_slice(&out[..n]);
        Ok(framed.freeze())
    }

    /// A template that renders the request of any id cheaply.
    pub fn template(&self) -> Template {
        self.template_for(Era::Modern)
    }

    /// The template of the requests of `era`.
    pub fn template_for(&self, era: Era) -> Template {
        let text = self.request_json(ID_MARK, era).to_string();
        let mark = ID_MARK.to_string();
        Template {
            parts: text.split(&mark).map(|p| p.as_bytes().to_vec()).collect(),
        }
    }

    /// A checker of the messages of call `id`.
    pub fn checker(&self, id: u64) -> Checker<'_> {
        Checker {
            work: self,
            id,
            notifications: 0,
            last_progress: f64::NEG_INFINITY,
            done: false,
        }
    }
}

/// A request with the id cut out: the id goes between any two parts.
#[derive(Debug, Clone)]
pub struct Template {
    parts: Vec<Vec<u8>>,
}

impl Template {
    /// The JSON text of the request of call `id`, appended to `out`.
    pub fn json_into(&self, id: u64, out: &mut Vec<u8>) {
        let id = id.to_string();
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(id.as_bytes());
            }
            out.extend_from_slice(part);
        }
    }

    /// The length of [`Template::json_into`]'s text for call `id`.
    pub fn json_len(&self, id: u64) -> usize {
        let digits = id.checked_ilog10().unwrap_or(0) as usize + 1;
        let gaps = self.parts.len().saturating_sub(1);
        self.parts.iter().map(Vec::len).sum::<usize>() + gaps * digits
    }

    /// The framed request (gRPC prefix, protobuf field 1, JSON) of call `id`.
    pub fn frame(&self, id: u64) -> Bytes {
        let id = id.to_string();
        let gaps = self.parts.len().saturating_sub(1);
        let json_len = self.parts.iter().map(Vec::len).sum::<usize>() + gaps * id.len();
        let mut out = BytesMut::with_capacity(json_len + 16);
        put_prefix(&mut out, json_len);
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(id.as_bytes());
            }
            out.extend_from_slice(part);
        }
        out.freeze()
    }
}

/// The gRPC prefix (not compressed, length) and the protobuf key and
/// length of `JsonRpcMessage.jsonrpc` for a JSON text of `json_len` bytes.
fn put_prefix(out: &mut BytesMut, json_len: usize) {
    let mut varint = [0u8; 10];
    let mut n = 0;
    let mut len = json_len;
    loop {
        let low = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            varint[n] = low;
            n += 1;
            break;
        }
        varint[n] = low | 0x80;
        n += 1;
    }
    let message_len = 1 + n + json_len;
    out.extend_from_slice(&[0]);
    out.extend_from_slice(&(message_len as u32).to_be_bytes());
    out.extend_from_slice(&[0x0a]);
    out.extend_from_slice(&varint[..n]);
}

/// Splits gRPC messages off the received DATA and unwraps their
/// `JsonRpcMessage` (or, for the typed binding, hands them out whole).
#[derive(Debug, Default)]
pub struct Deframer {
    buf: BytesMut,
    raw: bool,
}

impl Deframer {
    /// A deframer of messages that are not `JsonRpcMessage`s.
    pub fn raw() -> Self {
        Self {
            buf: BytesMut::new(),
            raw: true,
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The JSON text of the next complete message, if one is there.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, String> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        if self.buf[0] != 0 {
            return Err(format!("compressed flag {} on a message", self.buf[0]));
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if self.buf.len() < 5 + len {
            return Ok(None);
        }
        self.buf.advance(5);
        let message = self.buf.split_to(len).freeze();
        if self.raw {
            return Ok(Some(message));
        }
        json_field(message).map(Some)
    }

    /// Whether a part of a message is left over.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// The typed `CallToolResponse` `message` of call `id` as the JSON-RPC
/// response the tunnel would have carried (the core's transcoder reads it),
/// for the same checks.
pub fn typed_response(message: &[u8], id: u64) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; message.len() * 2 + 256];
    let n = mcpwire_core::mcp::typed::result_to_json(
        mcpwire_proto::gcp::Rpc::CallTool,
        message,
        &mut out,
    )
    .map_err(|e| format!("a CallToolResponse that does not read: {e:?}"))?;
    let result = std::str::from_utf8(&out[..n]).map_err(|e| e.to_string())?;
    Ok(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#).into_bytes())
}

/// Field 1 of `JsonRpcMessage`, the only field a server sends.
fn json_field(mut message: Bytes) -> Result<Bytes, String> {
    if message.first() != Some(&0x0a) {
        return Err(format!(
            "a JsonRpcMessage that does not start with field 1: {:02x?}",
            &message[..message.len().min(8)]
        ));
    }
    message.advance(1);
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let Some(&b) = message.first() else {
            return Err("a JsonRpcMessage cut in its length".into());
        };
        message.advance(1);
        len |= usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
        if shift > 35 {
            return Err("a JsonRpcMessage length over 5 bytes".into());
        }
    }
    if message.len() != len {
        return Err(format!(
            "JsonRpcMessage field 1 of {len} bytes in {} bytes",
            message.len()
        ));
    }
    Ok(message)
}

/// The parts of a received JSON-RPC message the checks read.
#[derive(Debug, Deserialize)]
struct Received<'a> {
    #[serde(default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(borrow, default)]
    result: Option<CallResult<'a>>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(default)]
    params: Option<ProgressParams>,
}

#[derive(Debug, Deserialize)]
struct CallResult<'a> {
    #[serde(borrow, default)]
    content: Vec<Content<'a>>,
    #[serde(rename = "isError", default)]
    is_error: bool,
}

#[derive(Debug, Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct ProgressParams {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<serde_json::Value>,
    #[serde(default)]
    progress: Option<f64>,
}

/// Checks the messages of one call in order; [`Checker::finish`] at the end.
#[derive(Debug)]
pub struct Checker<'w> {
    work: &'w Work,
    id: u64,
    notifications: u32,
    last_progress: f64,
    done: bool,
}

impl Checker<'_> {
    pub fn message(&mut self, json: &[u8]) -> Result<(), String> {
        let m: Received<'_> = serde_json::from_slice(json).map_err(|e| {
            format!(
                "not a JSON-RPC message ({e}): {}",
                String::from_utf8_lossy(&json[..json.len().min(200)])
            )
        })?;
        if m.jsonrpc.as_deref() != Some("2.0") {
            return Err("a message without \"jsonrpc\": \"2.0\"".into());
        }
        if self.done {
            return Err("a message after the response".into());
        }
        if let Some(method) = m.method {
            return self.notification(&method, m.params.as_ref());
        }
        if m.id.as_ref().and_then(serde_json::Value::as_u64) != Some(self.id) {
            return Err(format!("response id {:?}, sent {}", m.id, self.id));
        }
        if let Some(e) = m.error {
            return Err(format!("error response: {e}"));
        }
        let Some(result) = m.result else {
            return Err("a response with neither result nor error".into());
        };
        if result.is_error {
            return Err("a tool result with isError".into());
        }
        let text = result.content.first().and_then(|c| c.text.as_deref());
        match self.work {
            Work::Echo { text: sent } => {
                if text != Some(sent.as_str()) {
                    return Err(format!(
                        "echo returned {:?}, sent {} bytes",
                        text.map(|t| &t[..t.len().min(40)]),
                        sent.len()
                    ));
                }
            }
            Work::Progress { steps } => {
                if self.notifications != *steps {
                    return Err(format!(
                        "{} progress notifications before the result, asked for {steps}",
                        self.notifications
                    ));
                }
                if text.is_none() {
                    return Err("a progress result without text".into());
                }
            }
        }
        self.done = true;
        Ok(())
    }

    fn notification(
        &mut self,
        method: &str,
        params: Option<&ProgressParams>,
    ) -> Result<(), String> {
        if !matches!(self.work, Work::Progress { .. }) || method != "notifications/progress" {
            return Err(format!("unexpected notification {method}"));
        }
        let Some(params) = params else {
            return Err("a progress notification without params".into());
        };
        if params
            .progress_token
            .as_ref()
            .and_then(serde_json::Value::as_u64)
            != Some(self.id)
        {
            return Err(format!(
                "progress token {:?}, sent {}",
                params.progress_token, self.id
            ));
        }
        let progress = params.progress.unwrap_or(f64::NAN);
        if progress.is_nan() || progress <= self.last_progress {
            return Err(format!(
                "progress {progress} after {}: must increase",
                self.last_progress
            ));
        }
        self.last_progress = progress;
        self.notifications += 1;
        Ok(())
    }

    /// The call ended: was the response there?
    pub fn finish(&self) -> Result<(), String> {
        if self.done {
            Ok(())
        } else {
            Err(format!(
                "the stream ended without a response ({} notifications)",
                self.notifications
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn deframe_all(bytes: &[u8]) -> Vec<Bytes> {
        let mut d = Deframer::default();
        d.push(bytes);
        let mut out = Vec::new();
        while let Some(m) = d.next_message().unwrap() {
            out.push(m);
        }
        assert!(d.is_empty());
        out
    }

    #[test]
    fn template_renders_the_request_of_each_id() {
        for work in [Work::echo(200), Work::Progress { steps: 100 }] {
            let t = work.template();
            for id in [0, 7, 123_456_789] {
                let framed = t.frame(id);
                let got = deframe_all(&framed);
                assert_eq!(got.len(), 1);
                let v: serde_json::Value = serde_json::from_slice(&got[0]).unwrap();
                assert_eq!(v, work.request_json(id, Era::Modern));
                for era in [Era::Modern, Era::Legacy] {
                    let t = work.template_for(era);
                    let mut json = Vec::new();
                    t.json_into(id, &mut json);
                    assert_eq!(json.len(), t.json_len(id));
                    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
                    assert_eq!(v, work.request_json(id, era));
                }
            }
        }
    }

    #[test]
    fn legacy_requests_carry_no_per_request_version() {
        let echo = Work::echo(3).request_json(5, Era::Legacy);
        assert!(echo["params"].get("_meta").is_none());
        let progress = Work::Progress { steps: 2 }.request_json(5, Era::Legacy);
        assert_eq!(progress["params"]["_meta"], json!({"progressToken": 5}));
        let modern = Work::echo(3).request_json(5, Era::Modern);
        assert_eq!(
            modern["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            PROTOCOL_VERSION
        );
    }

    #[test]
    fn long_lengths_take_a_multi_byte_varint() {
        let framed = Work::echo(20_000).template().frame(1);
        assert_eq!(framed[5], 0x0a);
        assert!(framed[6] & 0x80 != 0);
        assert_eq!(deframe_all(&framed).len(), 1);
    }

    #[test]
    fn echo_checks_id_and_text() {
        let work = Work::echo(5);
        let ok =
            br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"abcde"}]}}"#;
        let mut c = work.checker(3);
        assert!(c.finish().is_err());
        c.message(ok).unwrap();
        c.finish().unwrap();
        assert!(c.message(ok).is_err(), "a second response");
        assert!(work.checker(4).message(ok).is_err(), "wrong id");
        let other =
            br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"abcdf"}]}}"#;
        assert!(work.checker(3).message(other).is_err());
        let error = br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"no"}}"#;
        assert!(work.checker(3).message(error).is_err());
    }

    #[test]
    fn progress_counts_increasing_notifications() {
        let work = Work::Progress { steps: 2 };
        let n = |p: u32| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":9,"progress":{p},"total":2}}}}"#
            )
        };
        let done =
            br#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"done"}]}}"#;
        let mut c = work.checker(9);
        c.message(n(1).as_bytes()).unwrap();
        c.message(n(2).as_bytes()).unwrap();
        c.message(done).unwrap();
        c.finish().unwrap();

        let mut short = work.checker(9);
        short.message(n(1).as_bytes()).unwrap();
        assert!(short.message(done).is_err());

        let mut repeated = work.checker(9);
        repeated.message(n(1).as_bytes()).unwrap();
        assert!(repeated.message(n(1).as_bytes()).is_err());
    }

    #[test]
    fn deframer_waits_for_whole_messages() {
        let framed = Work::echo(50).template().frame(1);
        let mut d = Deframer::default();
        for chunk in framed.chunks(7) {
            assert!(d.next_message().unwrap().is_none());
            d.push(chunk);
        }
        assert!(d.next_message().unwrap().is_some());
        assert!(d.is_empty());
    }
}
