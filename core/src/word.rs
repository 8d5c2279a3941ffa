//! Word-at-a-time scanning: whether the byte scanners of the layers (the
//! HTTP/2 header checks, the JSON scanner) look at eight octets at a time
//! (64-bit hosts, where a word holds eight and scanning is most of a
//! call's work) or one at a time (32-bit targets such as a
//! microcontroller: smaller code, and flash is what is scarce there).

/// Eight octets at a time.
pub(crate) const WORDS: bool = cfg!(target_pointer_width = "64");
