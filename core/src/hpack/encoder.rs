//! The header block encoder (RFC 7541 §6), which never indexes.
//!
//! A field that is in the static table whole is sent as its index; one whose
//! name is there is sent as a literal with that name index; any other as a
//! literal with a literal name. Literals are "without indexing", or "never
//! indexed" for credentials. Strings are Huffman-coded when that is shorter.
//!
//! Never inserting costs a few bytes per block against an indexing encoder,
//! and saves a whole table per connection on both sides, the bookkeeping of
//! its evictions, and the CPU of searching it.

use super::out::Out;
use super::static_table::{self, Match};
use super::{DEFAULT_TABLE_SIZE, EncodeError, Field, huffman, integer};

/// Names whose values are always encoded as never indexed (RFC 7541 §7.1.3).
const SENSITIVE_NAMES: [&[u8]; 2] = [b"authorization", b"proxy-authorization"];

/// Encodes the header blocks of one direction of one connection.
///
/// ```
/// use mcpwire_core::hpack::{Encoder, Field};
///
/// let mut encoder = Encoder::new();
/// let mut out = [0u8; 64];
/// let n = encoder.encode([Field::new(b":method", b"POST"), Field::new(b"te", b"trailers")], &mut out)?;
/// // :method POST is static entry 3; "te" is a raw literal name (Huffman would not
/// // be shorter); "trailers" is Huffman-coded in 6 bytes.
/// assert_eq!(&out[..n], &[0x83, 0x00, 0x02, b't', b'e', 0x86, 0x4d, 0x83, 0x35, 0x05, 0xb1, 0x1f]);
/// # Ok::<(), mcpwire_core::hpack::EncodeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Encoder {
    /// The table size the peer's decoder believes this encoder uses.
    table_size: usize,
    /// A size update must open the next block.
    update_pending: bool,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    /// An encoder for a peer with the default SETTINGS_HEADER_TABLE_SIZE.
    pub const fn new() -> Self {
        Self {
            table_size: DEFAULT_TABLE_SIZE,
            update_pending: false,
        }
    }

    /// Applies the peer's SETTINGS_HEADER_TABLE_SIZE. When it is below the
    /// size the peer assumes this encoder uses, the next block opens with a
    /// size update to 0 (the table is always empty), as RFC 7541 §4.2 requires.
    pub fn set_max_table_size(&mut self, max: usize) {
        if max < self.table_size {
            self.table_size = 0;
            self.update_pending = true;
        }
    }

    /// Encodes `fields` as one header block into `out`; returns its length.
    ///
    /// When `out` is too small the error carries the length the whole block
    /// needs, and the encoder's state is as before the call.
    pub fn encode<'f, I>(&mut self, fields: I, out: &mut [u8]) -> Result<usize, EncodeError>
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        self.encode_with(fields, out, None)
    }

    /// [`encode`](Self::encode), taking the string literals `literals` kept
    /// from earlier blocks instead of coding them again, and keeping the
    /// ones it codes (never a never-indexed field's).
    pub fn encode_with<'f, I>(
        &mut self,
        fields: I,
        out: &mut [u8],
        mut literals: Option<&mut (dyn Literals + '_)>,
    ) -> Result<usize, EncodeError>
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        let mut w = Out::new(out);
        if self.update_pending {
            integer::write(&mut w, self.table_size, 5, 0x20);
        }
        for field in fields {
            write_field(&mut w, &field, literals.as_deref_mut());
        }
        let n = w.finish()?;
        self.update_pending = false;
        Ok(n)
    }

    /// The length [`Encoder::encode`] would return for `fields`.
    pub fn encoded_len<'f, I>(&self, fields: I) -> usize
    where
        I: IntoIterator<Item = Field<'f>>,
    {
        let mut w = Out::new(&mut []);
        if self.update_pending {
            integer::write(&mut w, self.table_size, 5, 0x20);
        }
        for field in fields {
            write_field(&mut w, &field, None);
        }
        match w.finish() {
            Ok(n) | Err(EncodeError::BufferTooSmall { needed: n }) => n,
        }
    }
}

fn write_field(w: &mut Out<'_>, field: &Field<'_>, mut literals: Option<&mut (dyn Literals + '_)>) {
    let sensitive = field.never_indexed || SENSITIVE_NAMES.contains(&field.name);
    // Literal without indexing (§6.2.2) or never indexed (§6.2.3).
    let flags = if sensitive { 0x10 } else { 0x00 };
    match static_table::find(field.name, field.value) {
        Match::Full(index) if !sensitive => integer::write(w, index, 7, 0x80),
        Match::Full(index) | Match::Name(index) => {
            integer::write(w, index, 4, flags);
            // A credential is not kept.
            let literals = literals.filter(|_| !sensitive);
            write_kept(w, field.value, literals);
        }
        Match::None => {
            w.push(flags);
            write_kept(w, field.name, literals.as_deref_mut());
            write_kept(w, field.value, literals.filter(|_| !sensitive));
        }
    }
}

/// A string literal, as kept in `literals` or coded (and then kept).
fn write_kept(w: &mut Out<'_>, s: &[u8], literals: Option<&mut (dyn Literals + '_)>) {
    let Some(literals) = literals else {
        return write_string(w, s);
    };
    if let Some(literal) = literals.get(s) {
        return w.extend(literal);
    }
    let start = w.len();
    write_string(w, s);
    if let Some(literal) = w.written(start) {
        literals.keep(s, literal);
    }
}

/// String literals an encoder keeps as coded, for the next blocks
/// ([`Encoder::encode_with`]).
pub trait Literals {
    /// The literal (length prefix and octets, as §5.2 writes it) kept for
    /// the string `s`.
    fn get(&mut self, s: &[u8]) -> Option<&[u8]>;
    /// Keeps `literal`, the coding of `s`, when there is room for it.
    fn keep(&mut self, s: &[u8], literal: &[u8]);
}

/// String literals coded ahead of time: the strings an engine sends in
/// every block (a gRPC server's `content-type` value, its `grpc-status`
/// name), as constants every connection shares, where a [`LiteralCache`]
/// is each connection's own. Each pair is a string and its literal (the
/// length prefix and octets, as §5.2 writes it); nothing is kept.
#[derive(Debug, Clone, Copy)]
pub struct FixedLiterals(pub &'static [(&'static [u8], &'static [u8])]);

impl Literals for FixedLiterals {
    fn get(&mut self, s: &[u8]) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|&&(plain, _)| plain == s)
            .map(|&(_, literal)| literal)
    }

    fn keep(&mut self, _: &[u8], _: &[u8]) {}
}

/// Up to `N` string literals of at most `LEN` octets, coded: a client
/// sends the same names and values (`:path`, `content-type`,
/// `mcp-protocol-version`, ...) on every request, and codes each once.
/// A literal used since the last eviction stays (the clock algorithm): a
/// value that differs on every request (`grpc-timeout`) takes one slot in
/// turn and leaves the others.
#[derive(Debug, Clone)]
pub struct LiteralCache<const N: usize, const LEN: usize> {
    /// Each slot's [`fingerprint`](Self::fingerprint) (0: empty), apart
    /// from the slots so that a search reads one array.
    keys: [u64; N],
    slots: [KeptLiteral<LEN>; N],
    hand: usize,
    /// The slot of the last string found.
    last: usize,
}

#[derive(Debug, Clone, Copy)]
struct KeptLiteral<const LEN: usize> {
    string: [u8; LEN],
    literal: [u8; LEN],
    literal_len: u8,
    used: bool,
}

impl<const N: usize, const LEN: usize> LiteralCache<N, LEN> {
    /// An empty cache.
    pub const fn new() -> Self {
        Self {
            keys: [0; N],
            slots: [KeptLiteral {
                string: [0; LEN],
                literal: [0; LEN],
                literal_len: 0,
                used: false,
            }; N],
            hand: 0,
            last: 0,
        }
    }
}

impl<const N: usize, const LEN: usize> LiteralCache<N, LEN> {
    /// The cache as [`Encoder::encode_with`] takes it; `None` when it
    /// keeps nothing (`N` is 0, as on a small target), so that such a
    /// build codes every string without looking.
    pub fn as_literals(&mut self) -> Option<&mut dyn Literals> {
        if N == 0 { None } else { Some(self) }
    }

    /// Whether strings of `len` octets are kept: short ones code fast
    /// enough, long ones do not fit.
    fn keeps(len: usize) -> bool {
        N > 0 && (4..=LEN.min(255)).contains(&len)
    }

    /// The length (the low octet) and the first and last four octets of
    /// a kept string (four to 255 long), never 0: equal strings have equal
    /// ones, and equal ones mean equal lengths.
    fn fingerprint(s: &[u8]) -> u64 {
        let word = |w: Option<&[u8; 4]>| u64::from(w.map_or(0, |w| u32::from_le_bytes(*w)));
        let (first, last) = (word(s.first_chunk()), word(s.last_chunk()));
        (first ^ last.rotate_left(13)) << 8 | s.len() as u64
    }
}

impl<const N: usize, const LEN: usize> Default for LiteralCache<N, LEN> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const LEN: usize> Literals for LiteralCache<N, LEN> {
    fn get(&mut self, s: &[u8]) -> Option<&[u8]> {
        if !Self::keeps(s.len()) {
            return None;
        }
        // Blocks repeat their fields in the same order: the search starts
        // after the last string found, where the next one usually is.
        let key = Self::fingerprint(s);
        let at = (0..N)
            .map(|k| (self.last + 1 + k) % N)
            .find(|&at| self.keys[at] == key && self.slots[at].string.get(..s.len()) == Some(s))?;
        self.last = at;
        let slot = &mut self.slots[at];
        slot.used = true;
        Some(&slot.literal[..usize::from(slot.literal_len)])
    }

    fn keep(&mut self, s: &[u8], literal: &[u8]) {
        if !Self::keeps(s.len()) || literal.len() > LEN.min(255) {
            return;
        }
        // The first slot not used since the hand last passed it.
        let mut at = self.hand % N;
        for _ in 0..N {
            if !self.slots[at].used {
                break;
            }
            self.slots[at].used = false;
            at = (at + 1) % N;
        }
        self.keys[at] = Self::fingerprint(s);
        let slot = &mut self.slots[at];
        slot.string[..s.len()].copy_from_slice(s);
        slot.literal[..literal.len()].copy_from_slice(literal);
        slot.literal_len = literal.len() as u8;
        slot.used = false;
        self.hand = (at + 1) % N;
    }
}

/// A string literal (§5.2), Huffman-coded when that is strictly shorter.
fn write_string(w: &mut Out<'_>, s: &[u8]) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        integer::write(w, coded, 7, 0x80);
        match w.reserve(coded) {
            Some(dst) => {
                huffman::write(dst, s);
                w.advance(coded);
            }
            None => w.advance(coded),
        }
    } else {
        integer::write(w, s.len(), 7, 0x00);
        w.extend(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_never_indexed() {
        let mut e = Encoder::new();
        let mut out = [0u8; 64];
        let n = e
            .encode([Field::new(b"authorization", b"x")], &mut out)
            .unwrap();
        // Never indexed, name index 23 (4-bit prefix: 0x1f then 23 - 15 = 8), raw "x".
        assert_eq!(&out[..n], &[0x1f, 0x08, 0x01, b'x']);
        let n = e
            .encode([Field::sensitive(b"x-key", b"k")], &mut out)
            .unwrap();
        assert_eq!(out[0], 0x10);
        assert_eq!(n, 1 + 1 + huffman::encoded_len(b"x-key") + 2);
    }

    #[test]
    fn lowered_table_size_opens_the_next_block_with_an_update() {
        let mut e = Encoder::new();
        e.set_max_table_size(8192);
        let mut out = [0u8; 16];
        assert_eq!(e.encode([Field::new(b":method", b"GET")], &mut out), Ok(1));
        e.set_max_table_size(100);
        let n = e
            .encode([Field::new(b":method", b"GET")], &mut out)
            .unwrap();
        assert_eq!(&out[..n], &[0x20, 0x82]);
        let n = e
            .encode([Field::new(b":method", b"GET")], &mut out)
            .unwrap();
        assert_eq!(&out[..n], &[0x82]);
    }

    /// A cache that counts what it is asked, around the real one.
    struct Counting<'c> {
        cache: &'c mut LiteralCache<8, 64>,
        hits: usize,
        kept: std::vec::Vec<std::vec::Vec<u8>>,
    }

    impl Literals for Counting<'_> {
        fn get(&mut self, s: &[u8]) -> Option<&[u8]> {
            let found = self.cache.get(s);
            self.hits += usize::from(found.is_some());
            found
        }
        fn keep(&mut self, s: &[u8], literal: &[u8]) {
            self.kept.push(s.to_vec());
            self.cache.keep(s, literal);
        }
    }

    /// Blocks coded with kept literals are the blocks coded without; the
    /// request head's constant strings stay kept while a value that
    /// changes every time takes one slot in turn; a credential is never
    /// kept.
    #[test]
    fn kept_literals_code_the_same_blocks_and_keep_the_repeated_strings() {
        let mut cache = LiteralCache::<8, 64>::new();
        let mut plain = Encoder::new();
        let mut cached = Encoder::new();
        let timeouts = [
            &b"29999m"[..],
            b"29998m",
            b"1S",
            b"29997m",
            b"29996m",
            b"5000m",
        ];
        for (round, timeout) in timeouts.iter().enumerate() {
            let fields = [
                Field::new(b":method", b"POST"),
                Field::new(b":path", b"/model_context_protocol.Mcp/Tunnel"),
                Field::new(b"content-type", b"application/grpc+proto"),
                Field::new(b"grpc-timeout", timeout),
                Field::new(b"authorization", b"Bearer secret-token"),
                Field::sensitive(b"x-api-key", b"another-secret"),
            ];
            let (mut a, mut b) = ([0u8; 256], [0u8; 256]);
            let n = plain.encode(fields, &mut a).unwrap();
            let mut counting = Counting {
                cache: &mut cache,
                hits: 0,
                kept: std::vec::Vec::new(),
            };
            let m = cached
                .encode_with(fields, &mut b, Some(&mut counting))
                .unwrap();
            assert_eq!(a[..n], b[..m], "round {round}");
            let Counting { hits, kept, .. } = counting;
            for secret in [&b"Bearer secret-token"[..], b"another-secret"] {
                assert!(!kept.iter().any(|k| k == secret), "a credential was kept");
            }
            if round == 0 {
                assert_eq!(hits, 0);
            } else {
                // Path, content type, grpc-timeout and x-api-key names hit;
                // the timeout value is new each round.
                assert_eq!(hits, 4, "round {round}");
                assert_eq!(kept, [timeout.to_vec()], "round {round}");
            }
        }
        // A block too large for its buffer keeps nothing it did not write
        // whole, and the next block is still the plain coding.
        let long = [Field::new(
            b"x-long-value",
            b"abcdefghijklmnopqrstuvwxyz0123456789",
        )];
        let mut small = [0u8; 8];
        assert!(
            cached
                .encode_with(long, &mut small, Some(&mut cache))
                .is_err()
        );
        let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
        let n = plain.encode(long, &mut a).unwrap();
        let m = cached.encode_with(long, &mut b, Some(&mut cache)).unwrap();
        assert_eq!(a[..n], b[..m]);
    }

    /// Strings alike in length and in their first and last octets are
    /// told apart by their whole text.
    #[test]
    fn a_kept_literal_is_found_only_for_its_own_string() {
        let mut cache = LiteralCache::<4, 32>::new();
        cache.keep(b"abcd-one-wxyz", b"\x0dliteral-one");
        assert_eq!(cache.get(b"abcd-one-wxyz"), Some(&b"\x0dliteral-one"[..]));
        assert_eq!(cache.get(b"abcd-two-wxyz"), None);
        assert_eq!(cache.get(b"abcd-one-wxy"), None);
        // Too short or too long to be kept.
        cache.keep(b"abc", b"\x03abc");
        assert_eq!(cache.get(b"abc"), None);
        let long = [b'x'; 33];
        cache.keep(&long, &long);
        assert_eq!(cache.get(&long), None);
    }

    #[test]
    fn too_small_keeps_the_pending_update() {
        let mut e = Encoder::new();
        e.set_max_table_size(0);
        let fields = [Field::new(b"x-long-name", b"some value here")];
        let needed = e.encoded_len(fields);
        let mut small = [0u8; 4];
        assert_eq!(
            e.encode(fields, &mut small),
            Err(EncodeError::BufferTooSmall { needed })
        );
        let mut out = [0u8; 64];
        assert_eq!(e.encode(fields, &mut out), Ok(needed));
        assert_eq!(out[0], 0x20);
    }
}
