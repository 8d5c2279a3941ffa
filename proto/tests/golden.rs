//! Golden vectors from `protoc` (libprotoc 3.21.12, Debian `protobuf-compiler`),
//! generated once and pasted here as hex.
//!
//! Encodings, run in `proto/`:
//!
//! ```text
//! printf '%s' 'jsonrpc: "<JSON with \" escaped>"' \
//!   | protoc --proto_path=proto --encode=mcp.zig.transport.v1.JsonRpcMessage \
//!       mcp_zig_transport_v1.proto \
//!   | xxd -p | tr -d '\n'
//! ```
//!
//! The third vector is ours, written by hand; protoc checked it the other
//! way: `echo <hex> | xxd -r -p | protoc --proto_path=proto
//! --decode=mcp.zig.transport.v1.JsonRpcMessage mcp_zig_transport_v1.proto`
//! prints the second `jsonrpc` and every other field as unknown, and
//! `protoc --decode_raw` lists the fields below.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_proto::{DecodeError, JsonRpcMessage};

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn encode(json: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; JsonRpcMessage::encoded_len(json.len())];
    let n = JsonRpcMessage::encode(json, &mut out).unwrap();
    assert_eq!(n, out.len());
    out
}

/// `printf '%s' 'jsonrpc: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"' | protoc ... --encode ...`
const PING_JSON: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
const PING_HEX: &str =
    "0a287b226a736f6e727063223a22322e30222c226964223a312c226d6574686f64223a2270696e67227d";

/// `printf '%s' 'jsonrpc: "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"read_sensor\",\"arguments\":{\"sensor\":\"temperature\",\"unit\":\"°C\"},\"_meta\":{\"progressToken\":\"t-7\"}}}"' | protoc ... --encode ...`
///
/// 160 bytes of JSON (with the two-byte UTF-8 `°`): a two-byte length.
const CALL_JSON: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_sensor","arguments":{"sensor":"temperature","unit":"°C"},"_meta":{"progressToken":"t-7"}}}"#;
const CALL_HEX: &str = concat!(
    "0aa0017b226a736f6e727063223a22322e30222c226964223a372c226d6574686f64223a22746f6f6c732f63",
    "616c6c222c22706172616d73223a7b226e616d65223a22726561645f73656e736f72222c22617267756d656e",
    "7473223a7b2273656e736f72223a2274656d7065726174757265222c22756e6974223a22c2b043227d2c225f",
    "6d657461223a7b2270726f6772657373546f6b656e223a22742d37227d7d7d",
);

/// `printf '%s' 'jsonrpc: ""' | protoc ... --encode ...` writes nothing:
/// proto3 leaves the default value out.
const EMPTY_HEX: &str = "";

/// Unknown fields around two `jsonrpc` fields, as `protoc --decode_raw` lists
/// them:
///
/// ```text
/// 2: 150
/// 1: "old"
/// 3: 0x0807060504030201
/// 15 {            (LEN "hi", which --decode_raw happens to parse as a message)
///   13: 105
/// }
/// 5: 0x0d0c0b0a
/// 1: "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"
/// 16: 0
/// 536870911: 0x44332211
/// 2: 18446744073709551615
/// ```
///
/// and `protoc --decode=mcp.zig.transport.v1.JsonRpcMessage` prints
/// `jsonrpc: "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"`.
const UNKNOWN_JSON: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const UNKNOWN_HEX: &str = concat!(
    "109601",             // 2: varint 150
    "0a036f6c64",         // 1: "old"
    "190102030405060708", // 3: I64
    "7a026869",           // 15: LEN "hi"
    "2d0a0b0c0d",         // 5: I32
    "0a367b226a736f6e727063223a22322e30222c226d6574686f64223a226e6f",
    "74696669636174696f6e732f696e697469616c697a6564227d", // 1: the JSON
    "800100",                                             // 16: varint 0
    "fdffffff0f11223344",                                 // 2^29 - 1: I32
    "10ffffffffffffffffff01",                             // 2: varint 2^64 - 1
);

#[test]
fn our_encoding_is_protoc_s_byte_for_byte() {
    for (json, golden) in [
        (PING_JSON, PING_HEX),
        (CALL_JSON, CALL_HEX),
        ("", EMPTY_HEX),
    ] {
        assert_eq!(encode(json.as_bytes()), hex(golden), "{json}");
    }
    assert_eq!(CALL_JSON.len(), 160);
}

#[test]
fn protoc_s_encodings_decode() {
    for (json, golden) in [
        (PING_JSON, PING_HEX),
        (CALL_JSON, CALL_HEX),
        ("", EMPTY_HEX),
    ] {
        let msg = hex(golden);
        assert_eq!(JsonRpcMessage::decode(&msg), Ok(json.as_bytes()), "{json}");
        let n = JsonRpcMessage::encode_prefix(json.len(), &mut [0; JsonRpcMessage::MAX_PREFIX_LEN])
            .unwrap();
        assert_eq!(n, msg.len() - json.len(), "{json}");
    }
}

#[test]
fn unknown_fields_decode_as_protoc_does() {
    let msg = hex(UNKNOWN_HEX);
    assert_eq!(JsonRpcMessage::decode(&msg), Ok(UNKNOWN_JSON.as_bytes()));
    // The message ends with a complete field; every shorter cut that is not a
    // field boundary is truncated.
    let boundaries = [3, 8, 17, 21, 26, 82, 85, 94];
    for end in 1..msg.len() {
        let got = JsonRpcMessage::decode(&msg[..end]);
        if boundaries.contains(&end) {
            assert!(got.is_ok(), "cut at {end}: {got:?}");
        } else {
            assert_eq!(got, Err(DecodeError::Truncated), "cut at {end}");
        }
    }
}
