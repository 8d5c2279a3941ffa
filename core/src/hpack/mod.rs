//! HPACK, header compression for HTTP/2 (RFC 7541).
//!
//! - [`Decoder`] reads header blocks and hands every field to a callback as
//!   borrowed bytes: from the block itself when the literal is not Huffman-coded,
//!   from the dynamic table, from the static table, or from a caller-provided
//!   scratch buffer when the literal is Huffman-coded. It never allocates.
//!   A block can also be fed in fragments as HEADERS and CONTINUATION frames
//!   arrive (`begin_block`, `decode_fragment`, `end_block`): a field that
//!   straddles two fragments is decoded into a caller buffer as its octets
//!   come, so memory is bounded by the largest field kept, not by the block.
//! - [`Encoder`] writes header blocks into a caller slice. It never inserts into
//!   the dynamic table, so a connection spends no memory on an encoder table and
//!   the peer's decoder never has to track ours. A [`LiteralCache`] the
//!   caller keeps lets it copy the coded literals of names and values it
//!   sent before instead of coding them again (a client's request heads).
//!
//! The dynamic table of the decoder is a fixed array whose size is a const
//! generic: `Decoder<4096>` can follow any peer under the default
//! `SETTINGS_HEADER_TABLE_SIZE` of 4096.

mod decoder;
mod encoder;
mod error;
mod field;
pub mod huffman;
pub mod integer;
mod out;
mod static_table;
mod table;

pub use decoder::{Decoder, Limits};
pub use encoder::{Encoder, FixedLiterals, LiteralCache, Literals};
pub use error::{DecodeError, EncodeError};
pub use field::Field;
pub use static_table::STATIC_TABLE;

/// The size RFC 7541 §4.1 charges for one entry beyond its name and value.
pub const ENTRY_OVERHEAD: usize = 32;

/// SETTINGS_HEADER_TABLE_SIZE before the peer says otherwise (RFC 9113 §6.5.2).
pub const DEFAULT_TABLE_SIZE: usize = 4096;
