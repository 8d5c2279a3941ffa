//! One header field as the codec sees it: a name, a value and the
//! never-indexed flag (RFC 7541 §6.2.3).

/// A header field whose bytes are borrowed.
///
/// The decoder hands these out; the encoder takes them. Names are compared as
/// bytes: HTTP/2 requires lowercase names, and validating them is the job of
/// the HTTP/2 layer, not of HPACK.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Field<'a> {
    /// The field name.
    pub name: &'a [u8],
    /// The field value.
    pub value: &'a [u8],
    /// Encoded (or to be encoded) as "literal never indexed": intermediaries
    /// must not compress it either. Set for credentials.
    pub never_indexed: bool,
}

impl<'a> Field<'a> {
    /// A field that may be compressed normally.
    pub const fn new(name: &'a [u8], value: &'a [u8]) -> Self {
        Self {
            name,
            value,
            never_indexed: false,
        }
    }

    /// A field that must never enter a compression table on any hop.
    pub const fn sensitive(name: &'a [u8], value: &'a [u8]) -> Self {
        Self {
            name,
            value,
            never_indexed: true,
        }
    }

    /// The size RFC 7541 §4.1 assigns to the field: name, value and 32 octets.
    pub const fn size(&self) -> usize {
        self.name.len() + self.value.len() + super::ENTRY_OVERHEAD
    }
}

impl core::fmt::Debug for Field<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut d = f.debug_struct("Field");
        d.field("name", &Lossy(self.name));
        if self.never_indexed {
            // Never-indexed fields are credentials; keep them out of logs.
            d.field("value", &"<redacted>");
        } else {
            d.field("value", &Lossy(self.value));
        }
        d.field("never_indexed", &self.never_indexed).finish()
    }
}

/// Prints bytes as a string with non-printable bytes escaped.
struct Lossy<'a>(&'a [u8]);

impl core::fmt::Debug for Lossy<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("\"")?;
        for &b in self.0 {
            for c in core::ascii::escape_default(b) {
                core::fmt::Write::write_char(f, char::from(c))?;
            }
        }
        f.write_str("\"")
    }
}
