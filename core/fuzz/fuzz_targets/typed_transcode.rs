//! The typed binding's transcoder on arbitrary input, both ways.
//!
//! The first byte picks the RPC (bits 0-2, in `Rpc::ALL` order), request or
//! result (bit 3) and protobuf or JSON input (bit 4); the rest is the input. Whatever decodes must re-encode (or be refused as
//! unexpressible, never as invalid) and decode again to the same JSON;
//! whatever encodes must decode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::mcp::typed::{
    TypedError, request_to_json, request_to_proto, result_to_json, result_to_proto,
};
use mcpwire_proto::gcp::Rpc;

type Fun = fn(Rpc, &[u8], &mut [u8]) -> Result<usize, TypedError>;

fn run(f: Fun, rpc: Rpc, input: &[u8]) -> Result<Vec<u8>, TypedError> {
    let mut out = vec![0u8; 256];
    match f(rpc, input, &mut out) {
        Ok(n) => {
            out.truncate(n);
            Ok(out)
        }
        Err(TypedError::BufferTooSmall { needed }) => {
            let mut out = vec![0u8; needed];
            let n = f(rpc, input, &mut out).expect("the size asked for is enough");
            assert_eq!(n, needed);
            out.truncate(n);
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

/// JSON the decoder wrote: re-encoded, it decodes to the same text.
fn settles(to_proto: Fun, to_json: Fun, rpc: Rpc, json: &[u8]) {
    match run(to_proto, rpc, json) {
        Ok(proto) => {
            let again = run(to_json, rpc, &proto).unwrap_or_else(|e| {
                panic!(
                    "{rpc}: {e} on what the encoder wrote for {}",
                    String::from_utf8_lossy(json)
                )
            });
            assert_eq!(
                String::from_utf8_lossy(&again),
                String::from_utf8_lossy(json),
                "{rpc}"
            );
        }
        Err(e) => assert!(
            e.is_unexpressible(),
            "{rpc}: the decoder wrote JSON the encoder calls {e:?}: {}",
            String::from_utf8_lossy(json)
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let rpc = Rpc::ALL[usize::from(selector & 7)];
    let (to_proto, to_json): (Fun, Fun) = if selector & 8 == 0 {
        (request_to_proto, request_to_json)
    } else {
        (result_to_proto, result_to_json)
    };
    if selector & 16 == 0 {
        // Protobuf in.
        if let Ok(json) = run(to_json, rpc, input) {
            assert!(is_one_object(&json), "{rpc}: not one JSON value");
            settles(to_proto, to_json, rpc, &json);
        }
    } else if let Ok(proto) = run(to_proto, rpc, input) {
        // JSON in.
        let json = run(to_json, rpc, &proto).unwrap_or_else(|e| {
            panic!(
                "{rpc}: {e} on what the encoder wrote for {}",
                String::from_utf8_lossy(input)
            )
        });
        settles(to_proto, to_json, rpc, &json);
    }
});

/// The decoder's output is one JSON object (checked with the core's own
/// validating scanner).
fn is_one_object(json: &[u8]) -> bool {
    mcpwire_core::mcp::json::validate(json, 200).is_ok()
        && mcpwire_core::mcp::json::kind(json) == Some(mcpwire_core::mcp::json::Kind::Object)
}
