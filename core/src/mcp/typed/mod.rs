//! The JSON ↔ protobuf transcoder of the typed gRPC binding
//! (`model_context_protocol.Mcp`, Google Cloud proto files v0.2.0): MCP
//! `params` and `result` objects to the RPC messages and back, by the mapping
//! of the binding (digest `typed-binding.md` §6).
//!
//! No tree is built: the JSON side is walked with the core's scanner
//! ([`json`]) and written with its [`JsonWriter`];
//! the protobuf side is read through [`MessageRef`] views and written with
//! [`Writer`], straight from one caller buffer
//! into the other. What each JSON key becomes is a static table per message
//! (`table.rs`), checked against the descriptor tables of `mcpwire-proto`.
//!
//! The four directions:
//!
//! | | client | server |
//! | --- | --- | --- |
//! | request | [`request_to_proto`] | [`request_to_json`] |
//! | result | [`result_to_json`] | [`result_to_proto`] |
//!
//! Failures keep the binding's two classes apart ([`TypedError::is_unexpressible`]):
//! a value of the wrong shape is *invalid*; a valid MCP value the messages
//! cannot carry (a key without a field, a cursor, a task result, an integer
//! outside ±2^53, ...) is *unexpressible*. A client fails before sending
//! (`InvalidRequest`); a server answers -32602 for a request and -32603 for a
//! result (§7). A malformed protobuf message is [`TypedError::Malformed`]
//! (-32700 for a request).
//!
//! Nesting is bounded by [`MAX_DEPTH`] on both sides (messages, `Struct`
//! and `ListValue` count a level each, as [`Limits`] counts them).

mod decode;
mod elicit;
mod encode;
mod table;

use mcpwire_proto::DecodeError;
use mcpwire_proto::gcp::{Limits, MessageRef, Rpc};
use mcpwire_proto::wire::Writer;

use super::error;
use super::json;
use super::writer;
use super::writer::JsonWriter;

/// How deep messages, `Struct`s and `ListValue`s may nest, the outermost
/// message counting 1 (the binding's reference SDK allows 64).
pub const MAX_DEPTH: usize = 64;

/// The entries of one map (a `Struct`, a `map<string, string>`, an input
/// map) checked for a repeated key at most, per target: a larger map is
/// [`TypedError::Unexpressible`] both ways (a limit of this transcoder, as
/// [`MAX_DEPTH`] is). A repeated key is [`TypedError::Invalid`] both ways:
/// the JSON a decode writes never repeats a key. A host checks up to
/// 4096 (32 KiB of stack, taken only for a map of more than
/// [`SMALL_MAP`]); a 32-bit target, a device, 64.
pub const MAP_KEYS: usize = if cfg!(target_pointer_width = "64") {
    4096
} else {
    64
};

/// Maps of up to this many entries are checked in a table this small.
pub(crate) const SMALL_MAP: usize = 32;

/// Open length-delimited fields the protobuf writer allows: a JSON level
/// inside a `Struct` opens three (entry, `Value`, `Struct` or `ListValue`).
const WRITER_DEPTH: usize = 3 * MAX_DEPTH + 8;

/// Why a value could not be transcoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TypedError {
    /// The JSON input is not JSON, or not an object.
    Json,
    /// The protobuf input is not a valid encoding of the RPC's message.
    Malformed(DecodeError),
    /// The value does not have the shape of its MCP type or message.
    Invalid(&'static str),
    /// A member the MCP type requires is missing (a kind of invalid); the
    /// JSON key is named.
    Missing(&'static str),
    /// A valid MCP value that the messages of the binding cannot carry.
    Unexpressible(&'static str),
    /// The output buffer is too small; `needed` bytes would hold it.
    BufferTooSmall {
        /// The length the whole output needs.
        needed: usize,
    },
}

impl TypedError {
    /// True for the binding's "unexpressible" class (server result: -32603;
    /// client: refused before sending).
    pub const fn is_unexpressible(&self) -> bool {
        matches!(self, Self::Unexpressible(_))
    }

    /// True for the "invalid" class: wrong shape or a missing member.
    pub const fn is_invalid(&self) -> bool {
        matches!(self, Self::Invalid(_) | Self::Missing(_) | Self::Json)
    }

    /// The JSON-RPC code a server answers when [`request_to_json`] fails
    /// (§7): -32700 for a malformed message, -32602 for a message the
    /// mapping refuses, -32603 when the output buffer was too small. (A
    /// result [`result_to_proto`] cannot write is always -32603.)
    pub const fn request_error_code(&self) -> i32 {
        match self {
            Self::Malformed(_) => error::PARSE_ERROR,
            Self::BufferTooSmall { .. } => error::INTERNAL_ERROR,
            Self::Json | Self::Invalid(_) | Self::Missing(_) | Self::Unexpressible(_) => {
                error::INVALID_PARAMS
            }
        }
    }
}

impl core::fmt::Display for TypedError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Json => f.write_str("not a JSON object"),
            Self::Malformed(e) => write!(f, "malformed protobuf: {e}"),
            Self::Invalid(why) => f.write_str(why),
            Self::Missing(key) => write!(f, "missing member {key}"),
            Self::Unexpressible(why) => f.write_str(why),
            Self::BufferTooSmall { needed } => write!(f, "output needs {needed} bytes"),
        }
    }
}

impl core::error::Error for TypedError {}

impl From<DecodeError> for TypedError {
    fn from(e: DecodeError) -> Self {
        Self::Malformed(e)
    }
}

type Result<T> = core::result::Result<T, TypedError>;

/// The JSON input as an object: surrounding whitespace removed; empty input
/// or `null` stand for `{}` (a request without `params`).
fn json_object(src: &[u8]) -> Result<&[u8]> {
    let src = json::trim(src);
    if src.is_empty() || src == b"null" {
        return Ok(b"{}");
    }
    json::validate(src, 2 * MAX_DEPTH).map_err(|_| TypedError::Json)?;
    if json::kind(src) != Some(json::Kind::Object) {
        return Err(TypedError::Json);
    }
    Ok(src)
}

fn finish_proto(w: Writer<'_, WRITER_DEPTH>) -> Result<usize> {
    w.finish()
        .map_err(|e| TypedError::BufferTooSmall { needed: e.needed })
}

fn finish_json(jw: JsonWriter<'_>) -> Result<usize> {
    jw.finish()
        .map(<[u8]>::len)
        .map_err(|e| TypedError::BufferTooSmall { needed: e.needed })
}

fn parse<'a>(
    desc: &'static mcpwire_proto::gcp::MessageDesc,
    bytes: &'a [u8],
) -> Result<MessageRef<'a>> {
    let limits = Limits {
        max_depth: MAX_DEPTH,
        ..Limits::DEFAULT
    };
    Ok(MessageRef::parse(desc, bytes, &limits)?)
}

/// Client: the `params` of an MCP request for `rpc` (a JSON object; empty
/// input or `null` for none) as the RPC's request message, written into
/// `out`. Returns the message's length.
pub fn request_to_proto(rpc: Rpc, params: &[u8], out: &mut [u8]) -> Result<usize> {
    let params = json_object(params)?;
    let mut w = Writer::<WRITER_DEPTH>::new(out);
    encode::object(&mut w, table::request(rpc), params, 1)?;
    finish_proto(w)
}

/// Server: the RPC's request message as the `params` object of the MCP
/// request, written into `out`. Returns the JSON text's length.
pub fn request_to_json(rpc: Rpc, message: &[u8], out: &mut [u8]) -> Result<usize> {
    let msg = parse(rpc.request(), message)?;
    let mut jw = JsonWriter::new(out);
    decode::object(&mut jw, table::request(rpc), msg)?;
    finish_json(jw)
}

/// Server: the `result` object of the MCP response to `rpc` as the RPC's
/// response message, written into `out`. Returns the message's length.
pub fn result_to_proto(rpc: Rpc, result: &[u8], out: &mut [u8]) -> Result<usize> {
    let result = json_object(result)?;
    let mut w = Writer::<WRITER_DEPTH>::new(out);
    encode::result(&mut w, table::result(rpc), result)?;
    finish_proto(w)
}

/// Client: the RPC's response message as the `result` object of the MCP
/// response, written into `out`. Returns the JSON text's length.
pub fn result_to_json(rpc: Rpc, message: &[u8], out: &mut [u8]) -> Result<usize> {
    let msg = parse(rpc.response(), message)?;
    let mut jw = JsonWriter::new(out);
    decode::result(&mut jw, table::result(rpc), msg)?;
    finish_json(jw)
}

/// Client: the RPC's response message as the whole JSON-RPC response to
/// the request `id` (raw JSON), `{"jsonrpc":"2.0","id":…,"result":…}`,
/// written by `jw`; running out of room shows in `jw.finish()`.
pub fn write_response(rpc: Rpc, id: &[u8], message: &[u8], jw: &mut JsonWriter<'_>) -> Result<()> {
    let msg = parse(rpc.response(), message)?;
    let mut outcome = Ok(());
    super::envelope::write_result(jw, id, |w| {
        outcome = decode::result(w, table::result(rpc), msg);
    });
    outcome
}

/// The reason a client gives for refusing to send a request the mapping
/// fails on (it goes out as -32600 before a byte is sent).
pub const fn refusal_reason(e: &TypedError) -> &'static str {
    match e {
        TypedError::Json => "params is not a JSON object",
        TypedError::Invalid(why) | TypedError::Unexpressible(why) => why,
        TypedError::Missing(_) => "a member the MCP request requires is missing",
        TypedError::Malformed(_) => "malformed protobuf",
        TypedError::BufferTooSmall { .. } => "the request message is too large",
    }
}

/// The value the routing metadata of `rpc` (§2, [`Rpc::routing_key`])
/// carries for the encoded request `message`: the tool's name (`CallTool`),
/// the prompt's name (`GetPrompt`), the resource's URI (`ReadResource`),
/// the reference's URI or prompt name (`Complete`). `None` for the lists and
/// when the message holds no such value (or an empty one).
pub fn routing_value(rpc: Rpc, message: &[u8]) -> Result<Option<&str>> {
    let msg = parse(rpc.request(), message)?;
    let value = match rpc {
        Rpc::CallTool => msg.message(2).and_then(|r| r.str(1)),
        Rpc::GetPrompt | Rpc::ReadResource => msg.str(2),
        Rpc::Complete => msg
            .message(2)
            .or_else(|| msg.message(3))
            .and_then(|r| r.str(1)),
        Rpc::ListResources | Rpc::ListResourceTemplates | Rpc::ListPrompts | Rpc::ListTools => None,
    };
    Ok(value.filter(|v| !v.is_empty()))
}

/// Checks base64 text (standard alphabet, padded) fed in pieces.
#[derive(Debug, Default)]
struct Base64Check {
    len: usize,
    pad: usize,
    bad: bool,
}

impl Base64Check {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match b {
                b'=' => self.pad += 1,
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' if self.pad == 0 => {}
                _ => self.bad = true,
            }
            self.len += 1;
        }
    }

    fn ok(&self) -> bool {
        !self.bad && self.len.is_multiple_of(4) && self.pad <= 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_text_is_checked() {
        for (text, ok) in [
            (&b""[..], true),
            (b"AAEC", true),
            (b"AA==", true),
            (b"AAE=", true),
            (b"!!", false),
            (b"AAE", false),
            (b"A===", false),
            (b"AA=A", false),
        ] {
            let mut c = Base64Check::default();
            c.feed(text);
            assert_eq!(c.ok(), ok, "{text:?}");
        }
    }
}
