//! JSON-RPC and MCP error codes (MCP 2026-07-28 §4), and the gRPC status a
//! server answers each with (typed binding §9.1).

use crate::grpc::Code;

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;
/// A mirrored header is missing, malformed or differs from the body.
pub const HEADER_MISMATCH: i32 = -32020;
/// The request needs a client capability it did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i32 = -32021;
/// The request's protocol version is not served.
pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;

/// A JSON-RPC error found by the core, before any handler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcError {
    pub code: i32,
    pub message: &'static str,
}

impl RpcError {
    pub const fn new(code: i32, message: &'static str) -> Self {
        Self { code, message }
    }

    /// The gRPC status that ends a call with this error.
    pub const fn grpc_code(&self) -> Code {
        grpc_code(self.code)
    }
}

/// The gRPC status for a JSON-RPC error code.
pub const fn grpc_code(code: i32) -> Code {
    match code {
        PARSE_ERROR
        | INVALID_REQUEST
        | INVALID_PARAMS
        | HEADER_MISMATCH
        | MISSING_REQUIRED_CLIENT_CAPABILITY
        | UNSUPPORTED_PROTOCOL_VERSION => Code::InvalidArgument,
        METHOD_NOT_FOUND => Code::Unimplemented,
        _ => Code::Internal,
    }
}

/// The JSON-RPC code a client derives from a bare gRPC status (typed
/// binding §9.3, the reference transport's map).
pub const fn code_for_status(status: Code) -> i32 {
    match status {
        Code::InvalidArgument => INVALID_PARAMS,
        Code::Unimplemented => METHOD_NOT_FOUND,
        Code::NotFound => INVALID_REQUEST,
        Code::DeadlineExceeded => -32001,
        _ => INTERNAL_ERROR,
    }
}
