//! HTTP/2 (RFC 9113) as a sans-IO connection, client or server.
//!
//! - [`frame`]: the frame header, per-type length and stream rules, whole-frame
//!   parsing and writers (RFC 9113 §4, §6).
//! - [`Connection`]: preface, SETTINGS, stream states (§5.1), flow control
//!   (§6.9), header blocks across CONTINUATION with HPACK, field validation
//!   (§8.2–8.3), GOAWAY, RST_STREAM and the limits against abuse; one
//!   file a concept under `connection/`. Its docs state the run loop
//!   ([`Stop`] says why `recv` stopped and what the driver does next).
//! - [`storage`]: where a connection keeps its three large buffers (inline
//!   by default, or taken on demand by a driver with an allocator).
//! - [`HeaderList`]: a decoded header block as the application reads it.

mod config;
mod connection;
mod error;
pub mod frame;
mod headers;
pub mod storage;

pub use config::{Config, FloodLimits, Role};
pub use connection::{Connection, Data, Event, Received, Stop, StreamRef};
pub use error::{ConnectionError, ErrorCode, StreamError};
pub use headers::{Fields, HeaderBuilder, HeaderList, HeadersKind, Malformed};
pub use storage::{FrameBuffer, InlineStorage, Storage};
