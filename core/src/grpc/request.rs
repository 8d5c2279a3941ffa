//! The checks a gRPC server makes on a request head, in the order that
//! gives each failure its proper answer.

use core::time::Duration;

use super::{Code, timeout};
use crate::h2::HeaderList;

/// What a request head says, once it passed the checks.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// `/package.Service/Method`.
    pub path: &'a [u8],
    /// `grpc-timeout`, if present.
    pub timeout: Option<Duration>,
    /// `authorization`, if present.
    pub authorization: Option<&'a [u8]>,
}

/// A request head that must be refused, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// Answer with this HTTP status and no gRPC status (405, 415).
    Http(u16),
    /// Answer with this gRPC status in a trailers-only response.
    Grpc(Code, &'static str),
}

/// Whether a content type is gRPC: `application/grpc`, optionally followed
/// by `+format` or `;params`.
pub fn is_grpc_content_type(value: &[u8]) -> bool {
    match value.strip_prefix(b"application/grpc") {
        Some(rest) => rest.is_empty() || rest[0] == b'+' || rest[0] == b';',
        None => false,
    }
}

impl<'a> RequestHead<'a> {
    /// Checks a request head: method POST (else 405), a gRPC content type
    /// (else 415), identity encoding only (else UNIMPLEMENTED), a
    /// well-formed `grpc-timeout` (else INVALID_ARGUMENT "Invalid
    /// grpc-timeout", the binding's answer).
    pub fn parse(fields: HeaderList<'a>) -> Result<Self, HeadError> {
        let mut method = None;
        let mut path: &[u8] = b"";
        let mut content_type = None;
        let mut encoding = None;
        let mut timeout_value = None;
        let mut authorization = None;
        for f in fields {
            match f.name {
                b":method" => method = Some(f.value),
                b":path" => path = f.value,
                b"content-type" => content_type = Some(f.value),
                b"grpc-encoding" => encoding = Some(f.value),
                b"grpc-timeout" => timeout_value = Some(f.value),
                b"authorization" => authorization = Some(f.value),
                _ => {}
            }
        }
        if method != Some(&b"POST"[..]) {
            return Err(HeadError::Http(405));
        }
        if !content_type.is_some_and(is_grpc_content_type) {
            return Err(HeadError::Http(415));
        }
        if encoding.is_some_and(|e| e != b"identity") {
            return Err(HeadError::Grpc(
                Code::Unimplemented,
                "only the identity grpc-encoding is supported",
            ));
        }
        let timeout = match timeout_value {
            Some(v) => Some(timeout::parse(v).ok_or(HeadError::Grpc(
                Code::InvalidArgument,
                "Invalid grpc-timeout",
            ))?),
            None => None,
        };
        Ok(Self {
            path,
            timeout,
            authorization,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        for ok in [
            &b"application/grpc"[..],
            b"application/grpc+proto",
            b"application/grpc;charset=utf-8",
            b"application/grpc+json",
        ] {
            assert!(is_grpc_content_type(ok));
        }
        for bad in [
            &b"application/json"[..],
            b"application/grpcx",
            b"text/plain",
            b"",
        ] {
            assert!(!is_grpc_content_type(bad));
        }
    }
}
