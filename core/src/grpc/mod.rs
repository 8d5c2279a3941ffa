//! gRPC over HTTP/2 (the "PROTOCOL-HTTP2" document of gRPC), without the
//! connection: what a call's head, messages and trailers look like.
//!
//! - [`Code`]: status codes.
//! - [`timeout`]: the `grpc-timeout` header in all its units.
//! - [`MessageDecoder`]: length-prefixed messages out of DATA chunks, with a
//!   size limit.
//! - [`percent`] and [`base64`]: `grpc-message` and `-bin` metadata encodings.
//! - [`RequestHead`]: the checks a server makes on a request's headers
//!   (method, content type, encoding, path), each with the answer it owes.
//! - [`response`]: the response head, trailers and trailers-only answers.

pub mod base64;
mod code;
mod message;
pub mod percent;
mod request;
pub mod response;
pub mod timeout;

pub use code::Code;
pub use message::{MessageDecoder, MessageError, PREFIX_LEN, write_prefix};
pub use request::{HeadError, RequestHead, is_grpc_content_type};
