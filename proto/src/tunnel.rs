//! The tunnel binding's message (grpc-binding: "The proto package is
//! mcp.zig.transport.v1"): `JsonRpcMessage { bytes jsonrpc = 1; }`, fields 2
//! to 15 reserved, carried by `rpc Call(JsonRpcMessage) returns (stream
//! JsonRpcMessage)` at [`CALL_PATH`].
//!
//! The codec never copies the JSON: decoding borrows it from the message, and
//! encoding writes only the few bytes in front of it ([`JsonRpcMessage::encode_prefix`]),
//! so the gRPC layer can frame the prefix and the caller's JSON side by side.

use crate::error::{BufferTooSmall, DecodeError};
use crate::wire::{MAX_VARINT_LEN, Reader, Tag, WireType, encode_varint, varint_len};

/// The proto package of the tunnel, as the binding publishes it.
pub const PACKAGE: &str = "mcp.zig.transport.v1";

/// The fully qualified service name.
pub const SERVICE: &str = "mcp.zig.transport.v1.Mcp";

/// The HTTP/2 `:path` of the one method, `Call`.
pub const CALL_PATH: &str = "/mcp.zig.transport.v1.Mcp/Call";

/// The text of `proto/mcp_zig_transport_v1.proto`, the file grpc-js, grpcio
/// and tonic peers load.
pub const PROTO_FILE: &str = include_str!("../proto/mcp_zig_transport_v1.proto");

/// `message JsonRpcMessage { bytes jsonrpc = 1; reserved 2 to 15; }`.
///
/// The message has one field, so no value of this type is ever built: the
/// associated functions go straight between the encoded message and the JSON
/// bytes of `jsonrpc` (one JSON-RPC message as UTF-8 text; checking the text
/// is the JSON layer's job, as `bytes` promises nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonRpcMessage {}

impl JsonRpcMessage {
    /// The field number of `jsonrpc`.
    pub const JSONRPC_FIELD: u32 = 1;

    /// The tag of `jsonrpc`: field 1, wire type LEN.
    pub const JSONRPC_TAG: Tag = Tag::new(Self::JSONRPC_FIELD, WireType::Len);

    /// The longest prefix [`JsonRpcMessage::encode_prefix`] writes: the tag
    /// and a ten-byte length.
    pub const MAX_PREFIX_LEN: usize = 1 + MAX_VARINT_LEN;

    /// Decodes an encoded `JsonRpcMessage` and borrows its `jsonrpc` bytes.
    ///
    /// Proto3 rules: when `jsonrpc` occurs more than once the last occurrence
    /// wins; when it is absent the value is empty; unknown fields of every
    /// wire type but groups, the reserved 2 to 15 among them, are skipped.
    /// `jsonrpc` with another wire type than LEN is
    /// [`DecodeError::WrongWireType`] (Google's parsers would keep it as an
    /// unknown field and see an empty `jsonrpc`, which no JSON layer accepts
    /// either).
    pub fn decode(buf: &[u8]) -> Result<&[u8], DecodeError> {
        let mut r = Reader::new(buf);
        let mut jsonrpc: &[u8] = &[];
        while let Some(tag) = r.read_tag()? {
            if tag.field != Self::JSONRPC_FIELD {
                r.skip(tag.wire_type)?;
            } else if tag.wire_type == WireType::Len {
                jsonrpc = r.read_len()?;
            } else {
                return Err(DecodeError::WrongWireType {
                    field: tag.field,
                    expected: WireType::Len,
                    found: tag.wire_type,
                });
            }
        }
        Ok(jsonrpc)
    }

    /// The bytes [`JsonRpcMessage::encode_prefix`] writes for a JSON text of
    /// `json_len` bytes: 0 for an empty text, else the tag and the varint
    /// length.
    pub const fn prefix_len(json_len: usize) -> usize {
        if json_len == 0 {
            0
        } else {
            // usize is at most 64 bits wide on every target Rust supports.
            1 + varint_len(json_len as u64)
        }
    }

    /// The length of the encoded message that carries a JSON text of
    /// `json_len` bytes. Saturates at `usize::MAX`, a length no buffer has.
    pub const fn encoded_len(json_len: usize) -> usize {
        Self::prefix_len(json_len).saturating_add(json_len)
    }

    /// Writes everything of the message that comes before the JSON text of
    /// `json_len` bytes: the tag `0x0A` and the length as a varint. The
    /// caller sends the `json_len` bytes of JSON right after it. Returns the
    /// number of bytes written, [`JsonRpcMessage::prefix_len`].
    ///
    /// An empty text gives an empty prefix: proto3 leaves a field at its
    /// default value out, so the whole message is zero bytes, as protoc,
    /// prost and protobufjs write it.
    pub fn encode_prefix(json_len: usize, out: &mut [u8]) -> Result<usize, BufferTooSmall> {
        if json_len == 0 {
            return Ok(0);
        }
        let needed = Self::prefix_len(json_len);
        let Some((tag, len)) = out.get_mut(..needed).and_then(|p| p.split_first_mut()) else {
            return Err(BufferTooSmall { needed });
        };
        // The tag of field 1, LEN, is the one-byte varint 0x0A.
        *tag = 0x0a;
        // usize is at most 64 bits wide on every target Rust supports.
        let n = encode_varint(json_len as u64, len).map_err(|_| BufferTooSmall { needed })?;
        Ok(1 + n)
    }

    /// Encodes the message carrying `json` into `out`. Returns the number of
    /// bytes written, [`JsonRpcMessage::encoded_len`]. Copies the JSON; use
    /// [`JsonRpcMessage::encode_prefix`] to avoid that.
    pub fn encode(json: &[u8], out: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let needed = Self::encoded_len(json.len());
        if out.len() < needed {
            return Err(BufferTooSmall { needed });
        }
        let n = Self::encode_prefix(json.len(), out)?;
        let Some(body) = out.get_mut(n..needed) else {
            return Err(BufferTooSmall { needed });
        };
        body.copy_from_slice(json);
        Ok(needed)
    }
}

#[cfg(test)]
mod tests {
    use std::vec;
    use std::vec::Vec;

    use super::*;

    /// JSON-like filler of `len` bytes.
    fn json_of_len(len: usize) -> Vec<u8> {
        (0..len).map(|i| b"{\"a\":[0,1]}"[i % 11]).collect()
    }

    fn encoded(json: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; JsonRpcMessage::encoded_len(json.len())];
        assert_eq!(JsonRpcMessage::encode(json, &mut out), Ok(out.len()));
        out
    }

    #[test]
    fn constants_name_the_proto_file() {
        assert_eq!(JsonRpcMessage::JSONRPC_TAG.value(), 0x0a);
        assert_eq!(SERVICE, [PACKAGE, ".Mcp"].concat());
        assert_eq!(CALL_PATH, ["/", SERVICE, "/Call"].concat());
        assert!(PROTO_FILE.contains("syntax = \"proto3\";"));
        assert!(PROTO_FILE.contains(&["package ", PACKAGE, ";"].concat()));
        assert!(PROTO_FILE.contains("rpc Call(JsonRpcMessage) returns (stream JsonRpcMessage);"));
        assert!(PROTO_FILE.contains("bytes jsonrpc = 1;"));
        assert!(PROTO_FILE.contains("reserved 2 to 15;"));
    }

    #[test]
    fn round_trip_at_varint_boundaries() {
        let cases: [(usize, usize); 7] = [
            (0, 0),
            (1, 2),
            (127, 2),
            (128, 3),
            (16_383, 3),
            (16_384, 4),
            (1 << 21, 5),
        ];
        for (len, prefix) in cases {
            let json = json_of_len(len);
            let msg = encoded(&json);
            assert_eq!(JsonRpcMessage::prefix_len(len), prefix, "{len}");
            assert_eq!(msg.len(), prefix + len, "{len}");
            if len > 0 {
                assert_eq!(msg[0], 0x0a);
            }
            assert_eq!(JsonRpcMessage::decode(&msg), Ok(&json[..]), "{len}");
        }
    }

    #[test]
    fn prefix_then_json_equals_encode() {
        for len in [1, 127, 128, 300, 16_384] {
            let json = json_of_len(len);
            let mut framed = [0u8; JsonRpcMessage::MAX_PREFIX_LEN].to_vec();
            let n = JsonRpcMessage::encode_prefix(len, &mut framed).unwrap();
            framed.truncate(n);
            framed.extend_from_slice(&json);
            assert_eq!(framed, encoded(&json), "{len}");
        }
        let mut prefix = [0u8; JsonRpcMessage::MAX_PREFIX_LEN];
        assert_eq!(
            JsonRpcMessage::encode_prefix(usize::MAX, &mut prefix),
            Ok(11)
        );
        assert_eq!(prefix[0], 0x0a);
    }

    #[test]
    fn too_small_output_says_how_much_and_writes_nothing_useful() {
        let json = json_of_len(128);
        let needed = 3 + 128;
        for size in [0, 1, 2, 3, needed - 1] {
            let mut out = vec![0u8; size];
            assert_eq!(
                JsonRpcMessage::encode(&json, &mut out),
                Err(BufferTooSmall { needed }),
                "{size}"
            );
        }
        for size in [0, 1, 2] {
            let mut out = vec![0u8; size];
            assert_eq!(
                JsonRpcMessage::encode_prefix(128, &mut out),
                Err(BufferTooSmall { needed: 3 }),
                "{size}"
            );
        }
        assert_eq!(JsonRpcMessage::encode(&[], &mut []), Ok(0));
        assert_eq!(JsonRpcMessage::encoded_len(usize::MAX), usize::MAX);
    }

    #[test]
    fn every_prefix_of_an_encoding_is_truncated() {
        // The empty prefix is itself a valid message (jsonrpc absent), so the
        // cut points start at one byte.
        for len in [0, 1, 127, 128, 16_383, 16_384, 1 << 21] {
            let msg = encoded(&json_of_len(len));
            for end in 1..msg.len() {
                assert_eq!(
                    JsonRpcMessage::decode(&msg[..end]),
                    Err(DecodeError::Truncated),
                    "{len} cut at {end}"
                );
            }
        }
    }

    #[test]
    fn unknown_fields_of_every_wire_type_are_skipped() {
        let unknown: [&[u8]; 8] = [
            &[0x10, 0x96, 0x01],                         // 2: varint 150
            &[0x19, 1, 2, 3, 4, 5, 6, 7, 8],             // 3: I64
            &[0x7a, 0x02, b'h', b'i'],                   // 15: LEN "hi"
            &[0x2d, 1, 2, 3, 4],                         // 5: I32
            &[0x80, 0x01, 0x00],                         // 16: varint 0
            &[0x82, 0x01, 0x00],                         // 16: empty LEN
            &[0xfd, 0xff, 0xff, 0xff, 0x0f, 9, 9, 9, 9], // 2^29 - 1: I32
            &[0x72, 0x01, b'x'],                         // 14: LEN "x"
        ];
        let json = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let field = encoded(json);
        for u in unknown {
            for msg in [
                [u, &field[..]].concat(),
                [&field[..], u].concat(),
                [u, &field, u].concat(),
            ] {
                assert_eq!(JsonRpcMessage::decode(&msg), Ok(&json[..]), "{msg:02x?}");
            }
            // Unknown fields alone: jsonrpc is absent, hence empty.
            assert_eq!(JsonRpcMessage::decode(u), Ok(&b""[..]), "{u:02x?}");
        }
        // All of them before, all of them after.
        let all = unknown.concat();
        let msg = [&all[..], &field, &all].concat();
        assert_eq!(JsonRpcMessage::decode(&msg), Ok(&json[..]));
    }

    #[test]
    fn the_last_jsonrpc_wins() {
        let first = encoded(b"[1]");
        let last = encoded(b"[2]");
        let msg = [&first[..], &[0x10, 0x01], &last].concat();
        assert_eq!(JsonRpcMessage::decode(&msg), Ok(&b"[2]"[..]));
        // An explicit empty value after a full one empties it.
        let msg = [&first[..], &[0x0a, 0x00]].concat();
        assert_eq!(JsonRpcMessage::decode(&msg), Ok(&b""[..]));
    }

    #[test]
    fn redundant_length_bytes_are_accepted() {
        // Length 2 padded to five bytes, as some encoders reserve room.
        let msg = [0x0a, 0x82, 0x80, 0x80, 0x80, 0x00, b'{', b'}'];
        assert_eq!(JsonRpcMessage::decode(&msg), Ok(&b"{}"[..]));
    }

    #[test]
    fn jsonrpc_with_another_wire_type_is_an_error() {
        let cases: [(&[u8], WireType); 5] = [
            (&[0x08, 0x01], WireType::Varint),
            (&[0x09, 1, 2, 3, 4, 5, 6, 7, 8], WireType::I64),
            (&[0x0b, 0x0c], WireType::SGroup),
            (&[0x0c], WireType::EGroup),
            (&[0x0d, 1, 2, 3, 4], WireType::I32),
        ];
        let valid = encoded(b"{}");
        for (bad, found) in cases {
            let expected = Err(DecodeError::WrongWireType {
                field: 1,
                expected: WireType::Len,
                found,
            });
            assert_eq!(JsonRpcMessage::decode(bad), expected, "{bad:02x?}");
            let after = [&valid[..], bad].concat();
            assert_eq!(JsonRpcMessage::decode(&after), expected, "{bad:02x?}");
        }
    }

    #[test]
    fn malformed_tags_and_groups_are_errors() {
        let cases: [(&[u8], DecodeError); 7] = [
            (&[0x00], DecodeError::InvalidFieldNumber(0)),
            (&[0x0e], DecodeError::InvalidWireType(6)),
            (&[0x0f], DecodeError::InvalidWireType(7)),
            (&[0x13, 0x14], DecodeError::Group),
            (&[0x14], DecodeError::Group),
            (
                &[0x80, 0x80, 0x80, 0x80, 0x10],
                DecodeError::InvalidFieldNumber(1 << 29),
            ),
            (
                &[
                    0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
                ],
                DecodeError::VarintOverflow,
            ),
        ];
        let valid = encoded(b"{}");
        for (bad, err) in cases {
            assert_eq!(JsonRpcMessage::decode(bad), Err(err), "{bad:02x?}");
            let after = [&valid[..], bad].concat();
            assert_eq!(JsonRpcMessage::decode(&after), Err(err), "{bad:02x?}");
        }
    }
}
