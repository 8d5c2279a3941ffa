//! A validating JSON scanner over borrowed bytes (RFC 8259), with a bounded
//! nesting depth so that hostile input cannot exhaust a small stack.
//!
//! It never builds a tree: values are handed out as the raw bytes they span,
//! and objects are walked member by member. Strings are compared and copied
//! with their escapes resolved.

/// Deepest nesting of arrays and objects accepted by default.
pub const DEFAULT_MAX_DEPTH: usize = 32;

/// Why bytes are not the JSON expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON at this offset.
    Syntax(usize),
    /// Nested deeper than allowed.
    TooDeep,
}

/// Checks that `src` is exactly one JSON value, with optional whitespace.
pub fn validate(src: &[u8], max_depth: usize) -> Result<(), JsonError> {
    let start = skip_ws(src, 0);
    let end = skip_value(src, start, max_depth)?;
    let end = skip_ws(src, end);
    if end == src.len() {
        Ok(())
    } else {
        Err(JsonError::Syntax(end))
    }
}

/// The value `src` holds once surrounding whitespace is removed.
pub fn trim(src: &[u8]) -> &[u8] {
    let start = skip_ws(src, 0);
    let mut end = src.len();
    while end > start && matches!(src[end - 1], b' ' | b'\t' | b'\n' | b'\r') {
        end -= 1;
    }
    &src[start..end]
}

// The scanner's small steps are inlined on hosts, where they cost most of a
// request's check in calls; a bare-metal build (`target_os = "none"`)
// leaves the choice to the size-optimizing compiler, as flash is scarcer.
#[cfg_attr(not(target_os = "none"), inline(always))]
fn skip_ws(src: &[u8], mut i: usize) -> usize {
    // Compact JSON has none: one test for the usual structural byte.
    if src.get(i).is_some_and(|&b| b > b' ') {
        return i;
    }
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = src.get(i) {
        i += 1;
    }
    i
}

/// Skips the value starting at `i`; returns the offset after it. Iterative,
/// so the depth limit is the only bound on nesting and the stack stays flat.
#[cfg_attr(not(target_os = "none"), inline(always))]
fn skip_value(src: &[u8], i: usize, max_depth: usize) -> Result<usize, JsonError> {
    // Most values are strings and numbers: no container state for them
    // (on hosts; a small build has one way for every value).
    if !WORDS {
        return skip_nested(src, i, max_depth);
    }
    // White space first is rare (callers stand after it): the container
    // walk skips it.
    match src.get(i) {
        Some(b'"') => skip_string(src, i),
        Some(b'-' | b'0'..=b'9') => skip_number(src, i),
        // An empty object (capabilities often are): no container walk.
        Some(b'{') if src.get(i + 1) == Some(&b'}') && max_depth > 0 => Ok(i + 2),
        _ => skip_nested(src, i, max_depth),
    }
}

/// [`skip_value`] of any value, containers included.
fn skip_nested(src: &[u8], i: usize, max_depth: usize) -> Result<usize, JsonError> {
    // One bit per open container: 1 = object, 0 = array.
    let mut stack: u128 = 0;
    let mut depth = 0usize;
    let max_depth = max_depth.min(127);
    let mut i = i;
    loop {
        i = skip_ws(src, i);
        // A value.
        match src.get(i) {
            Some(b'{') | Some(b'[') => {
                let is_obj = src[i] == b'{';
                depth += 1;
                if depth > max_depth {
                    return Err(JsonError::TooDeep);
                }
                stack = (stack << 1) | u128::from(is_obj);
                i = skip_ws(src, i + 1);
                let close = if is_obj { b'}' } else { b']' };
                if src.get(i) == Some(&close) {
                    depth -= 1;
                    stack >>= 1;
                    i += 1;
                } else {
                    if is_obj {
                        i = skip_key(src, i)?;
                    }
                    continue;
                }
            }
            Some(b'"') => i = skip_string(src, i)?,
            Some(b't') => i = literal(src, i, b"true")?,
            Some(b'f') => i = literal(src, i, b"false")?,
            Some(b'n') => i = literal(src, i, b"null")?,
            Some(b'-' | b'0'..=b'9') => i = skip_number(src, i)?,
            _ => return Err(JsonError::Syntax(i)),
        }
        // After a value: close containers or move to the next element.
        loop {
            if depth == 0 {
                return Ok(i);
            }
            i = skip_ws(src, i);
            let is_obj = stack & 1 == 1;
            match src.get(i) {
                Some(b',') => {
                    i += 1;
                    if is_obj {
                        i = skip_key(src, skip_ws(src, i))?;
                    }
                    break;
                }
                Some(b'}') if is_obj => {}
                Some(b']') if !is_obj => {}
                _ => return Err(JsonError::Syntax(i)),
            }
            i += 1;
            depth -= 1;
            stack >>= 1;
        }
    }
}

/// Skips `"key" :` and returns the offset of the value.
fn skip_key(src: &[u8], i: usize) -> Result<usize, JsonError> {
    if src.get(i) != Some(&b'"') {
        return Err(JsonError::Syntax(i));
    }
    let i = skip_ws(src, skip_string(src, i)?);
    if src.get(i) != Some(&b':') {
        return Err(JsonError::Syntax(i));
    }
    Ok(i + 1)
}

fn literal(src: &[u8], i: usize, word: &[u8]) -> Result<usize, JsonError> {
    if src.get(i..i + word.len()) == Some(word) {
        Ok(i + word.len())
    } else {
        Err(JsonError::Syntax(i))
    }
}

/// The octets of `w` (little-endian) that end or escape a string or are
/// control characters (`"`, `\\`, below 0x20), as their high bits: the
/// lowest set bit is exact (the borrows of the subtractions only run
/// upwards from a flagged octet), so a scan jumps straight to the first.
fn special_octets(w: u64) -> u64 {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // A byte borrows into its high bit in `v - c` where it is below `c`
    // (and its own high bit, which `!w` masks, is clear). With bit 1 of
    // every byte flipped, `"` (0x22) becomes 0x20 and the control
    // characters stay below 0x20, while no other byte falls below 0x21: one
    // subtraction finds both; `\\` is the byte that is 0 after `^ 0x5c`.
    let quote_or_control = (w ^ (LO * 0x02)).wrapping_sub(LO * 0x21);
    let backslash = (w ^ (LO * u64::from(b'\\'))).wrapping_sub(LO);
    (quote_or_control | backslash) & !w & HI
}

/// How many of the octets of `w` (little-endian) are ASCII digits before
/// the first that is not.
fn leading_digits(w: u64) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // Below `0`: a borrow into a clear high bit (the lowest is exact);
    // above `9`: the low seven bits reach 0x3a without a carry out, or the
    // high bit is set (exact at every octet).
    let below = w.wrapping_sub(LO * 0x30) & !w;
    let above = (w & !HI).wrapping_add(LO * (0x80 - 0x3a)) | w;
    ((below | above) & HI).trailing_zeros() as usize / 8
}

/// Whether none of the eight octets in `w` ends or escapes a string or is
/// a control character.
#[cfg(test)]
fn plain_word(w: u64) -> bool {
    special_octets(w) == 0
}

pub(crate) use crate::word::WORDS;

/// The offset of the first octet at or after `j` that ends or escapes a
/// string or is a control character (or the end).
#[cfg_attr(not(target_os = "none"), inline(always))]
pub(crate) fn string_stop(src: &[u8], j: usize) -> usize {
    if WORDS {
        string_stop_words(src, j)
    } else {
        string_stop_octets(src, j)
    }
}

/// [`string_stop`] eight octets at a time.
fn string_stop_words(src: &[u8], mut j: usize) -> usize {
    let (words, _) = src.get(j..).unwrap_or_default().as_chunks::<8>();
    for word in words {
        let special = special_octets(u64::from_le_bytes(*word));
        if special != 0 {
            return j + (special.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    string_stop_octets(src, j)
}

/// [`string_stop`] one octet at a time.
fn string_stop_octets(src: &[u8], mut j: usize) -> usize {
    while let Some(&b) = src.get(j) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        j += 1;
    }
    j
}

/// The end of the value at `i` of a document that [`validate`] accepted:
/// strings are skipped by their quotes and containers by their brackets,
/// without checking the grammar again. On other input it gives some end,
/// or `None`, and never panics.
fn skip_valid(src: &[u8], i: usize) -> Option<usize> {
    match *src.get(i)? {
        b'"' => skip_quoted(src, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match *src.get(j)? {
                    b'"' => {
                        j = skip_quoted(src, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while let Some(&c) = src.get(j) {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                j += 1;
            }
            Some(j)
        }
    }
}

/// The end of the string whose opening quote is at `i`, by its closing
/// quote (escapes skipped, not checked).
fn skip_quoted(src: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j = string_stop(src, j);
        match *src.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j += 2,
            _ => j += 1,
        }
    }
}

#[cfg_attr(not(target_os = "none"), inline(always))]
fn skip_string(src: &[u8], i: usize) -> Result<usize, JsonError> {
    skip_string_escaped(src, i).map(|(end, _)| end)
}

/// [`skip_string`], and whether the string has an escape.
#[cfg_attr(not(target_os = "none"), inline(always))]
fn skip_string_escaped(src: &[u8], i: usize) -> Result<(usize, bool), JsonError> {
    // Eight octets at a time to the first that ends, escapes or breaks the
    // string: the usual string ends there, at its closing quote.
    let mut j = i + 1;
    if WORDS {
        let rest = src.get(j..).unwrap_or_default();
        let mut stop = None;
        // Keys end in their first word; longer strings go on by two.
        if let Some(word) = rest.first_chunk::<8>() {
            let special = special_octets(u64::from_le_bytes(*word));
            if special != 0 {
                stop = Some(j + (special.trailing_zeros() / 8) as usize);
            } else {
                j += 8;
                for pair in rest[8..].as_chunks::<16>().0 {
                    let v = u128::from_le_bytes(*pair);
                    let (a, b) = (special_octets(v as u64), special_octets((v >> 64) as u64));
                    if a | b != 0 {
                        let at = if a != 0 {
                            a.trailing_zeros()
                        } else {
                            64 + b.trailing_zeros()
                        };
                        stop = Some(j + (at / 8) as usize);
                        break;
                    }
                    j += 16;
                }
                if stop.is_none()
                    && let Some(word) = src.get(j..).and_then(<[u8]>::first_chunk::<8>)
                {
                    let special = special_octets(u64::from_le_bytes(*word));
                    if special != 0 {
                        stop = Some(j + (special.trailing_zeros() / 8) as usize);
                    } else {
                        j += 8;
                    }
                }
            }
        }
        // The last few octets of the message, one at a time.
        j = match stop {
            Some(stop) => stop,
            None => string_stop_octets(src, j),
        };
        if src.get(j) == Some(&b'"') {
            return Ok((j + 1, false));
        }
    }
    string_rest(src, j, false)
}

/// The end of a string from `j`, the first octet of it that may end,
/// escape or break it, and whether it has an escape. Out of line on hosts
/// (strings with escapes are rare there).
#[cfg_attr(not(target_os = "none"), inline(never))]
fn string_rest(src: &[u8], mut j: usize, mut escaped: bool) -> Result<(usize, bool), JsonError> {
    loop {
        j = string_stop(src, j);
        match src.get(j) {
            None => return Err(JsonError::Syntax(j)),
            Some(b'"') => return Ok((j + 1, escaped)),
            Some(b'\\') => match src.get(j + 1).inspect(|_| escaped = true) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => j += 2,
                Some(b'u') => {
                    let hex = src.get(j + 2..j + 6).ok_or(JsonError::Syntax(j))?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return Err(JsonError::Syntax(j));
                    }
                    j += 6;
                }
                _ => return Err(JsonError::Syntax(j)),
            },
            Some(&c) if c < 0x20 => return Err(JsonError::Syntax(j)),
            Some(_) => j += 1,
        }
    }
}

fn skip_number(src: &[u8], i: usize) -> Result<usize, JsonError> {
    let mut j = i;
    if src.get(j) == Some(&b'-') {
        j += 1;
    }
    match src.get(j) {
        Some(b'0') => j += 1,
        Some(b'1'..=b'9') => {
            if WORDS && let Some(word) = src.get(j..).and_then(<[u8]>::first_chunk::<8>) {
                j += leading_digits(u64::from_le_bytes(*word));
            }
            while let Some(b'0'..=b'9') = src.get(j) {
                j += 1;
            }
        }
        _ => return Err(JsonError::Syntax(j)),
    }
    if src.get(j) == Some(&b'.') {
        j += 1;
        let start = j;
        while let Some(b'0'..=b'9') = src.get(j) {
            j += 1;
        }
        if j == start {
            return Err(JsonError::Syntax(j));
        }
    }
    if let Some(b'e' | b'E') = src.get(j) {
        j += 1;
        if let Some(b'+' | b'-') = src.get(j) {
            j += 1;
        }
        let start = j;
        while let Some(b'0'..=b'9') = src.get(j) {
            j += 1;
        }
        if j == start {
            return Err(JsonError::Syntax(j));
        }
    }
    Ok(j)
}

/// A validating walk over the members of one object, member by member: a
/// caller that needs some members of a document checks its grammar and
/// finds them in the same pass (each octet is looked at once), descending
/// with [`ObjectScan::nested`] into the members it wants the inside of.
#[derive(Debug, Clone)]
pub struct ObjectScan<'a> {
    src: &'a [u8],
    i: usize,
    /// Nesting still allowed inside this object's values.
    depth: usize,
    /// Whether a member was read (a `,` must come before the next).
    started: bool,
    closed: bool,
}

/// A member's key as [`ObjectScan::key`] read it.
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    /// The raw key, with its quotes.
    pub raw: &'a [u8],
    /// Whether it has an escape (else its text is between the quotes).
    pub escaped: bool,
}

impl Key<'_> {
    /// Whether the key is `text` once unescaped.
    pub fn is(&self, text: &[u8]) -> bool {
        if self.escaped {
            str_eq(self.raw, text)
        } else {
            self.raw
                .get(1..self.raw.len().saturating_sub(1))
                .is_some_and(|inner| bytes_eq(inner, text))
        }
    }
}

impl<'a> ObjectScan<'a> {
    /// The object at `i` (after white space) of `src`, itself counted in
    /// `max_depth`; an error when no `{` is there.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn new(src: &'a [u8], i: usize, max_depth: usize) -> Result<Self, JsonError> {
        let i = skip_ws(src, i);
        if src.get(i) != Some(&b'{') {
            return Err(JsonError::Syntax(i));
        }
        let depth = max_depth.checked_sub(1).ok_or(JsonError::TooDeep)?;
        Ok(Self {
            src,
            i: i + 1,
            depth,
            started: false,
            closed: false,
        })
    }

    /// The next member's raw key (with its quotes); the scan then stands
    /// at its value, which [`value`](Self::value) or
    /// [`nested`](Self::nested) must consume. `None` after the closing
    /// brace.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn key(&mut self) -> Result<Option<Key<'a>>, JsonError> {
        if self.closed {
            return Ok(None);
        }
        let src = self.src;
        let mut i = skip_ws(src, self.i);
        match src.get(i) {
            Some(b'}') => {
                self.i = i + 1;
                self.closed = true;
                return Ok(None);
            }
            Some(b',') if self.started => i = skip_ws(src, i + 1),
            Some(b'"') if !self.started => {}
            _ => return Err(JsonError::Syntax(i)),
        }
        if src.get(i) != Some(&b'"') {
            return Err(JsonError::Syntax(i));
        }
        let (key_end, escaped) = skip_string_escaped(src, i)?;
        let colon = skip_ws(src, key_end);
        if src.get(colon) != Some(&b':') {
            return Err(JsonError::Syntax(colon));
        }
        self.i = skip_ws(src, colon + 1);
        self.started = true;
        Ok(Some(Key {
            raw: &src[i..key_end],
            escaped,
        }))
    }

    /// Validates the current member's value and returns it.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn value(&mut self) -> Result<&'a [u8], JsonError> {
        let start = self.i;
        self.i = skip_value(self.src, start, self.depth)?;
        Ok(&self.src[start..self.i])
    }

    /// The offset in the document of the current member's value.
    pub fn offset(&self) -> usize {
        self.i
    }

    /// Whether the current member's value is an object.
    pub fn at_object(&self) -> bool {
        self.src.get(self.i) == Some(&b'{')
    }

    /// A scan of the current member's value, an object; give it back to
    /// [`resume`](Self::resume) once its members are read.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn nested(&self) -> Result<ObjectScan<'a>, JsonError> {
        ObjectScan::new(self.src, self.i, self.depth)
    }

    /// Goes on after a nested object whose members were all read; returns
    /// that object.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn resume(&mut self, nested: &ObjectScan<'a>) -> Result<&'a [u8], JsonError> {
        if !nested.closed {
            return Err(JsonError::Syntax(nested.i));
        }
        let start = self.i;
        self.i = nested.i;
        Ok(&self.src[start..self.i])
    }

    /// Reads the members left, validating them.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn finish(&mut self) -> Result<(), JsonError> {
        while self.key()?.is_some() {
            self.value()?;
        }
        Ok(())
    }

    /// The offset after the closing brace, once [`key`](Self::key) gave
    /// `None`.
    pub fn end(&self) -> usize {
        self.i
    }
}

/// The keys of one object seen so far, to find a repeated one (RFC 8259
/// §4: names SHOULD be unique, and readers differ on which of two they
/// take: this scanner's lookups the first, serde the last).
///
/// Bounded and linear: the first [`KeySet::CAPACITY`] distinct keys are
/// kept (as a hash of their text and where they start), and every key is
/// compared with those kept, a hash first and the text (escapes resolved)
/// when the hashes agree. So a repeat is found in any object of up to
/// `CAPACITY` members, and in a larger one whenever the first of the two
/// is among the first `CAPACITY`; two members past them that repeat each
/// other are not compared, as that would take memory or time growing with
/// the object. The first key costs nothing but its place: most objects
/// whose keys are not known to the caller have one or a few.
#[derive(Debug, Clone)]
pub struct KeySet {
    /// Where the first key starts, before a second asked for hashes.
    first: Option<u32>,
    kept: Option<Kept>,
}

/// The kept keys of a [`KeySet`]: hashes, and where each key starts.
#[derive(Debug, Clone)]
struct Kept {
    hashes: [u32; KeySet::CAPACITY],
    starts: [u32; KeySet::CAPACITY],
    len: usize,
}

impl Default for KeySet {
    fn default() -> Self {
        Self::new()
    }
}

impl KeySet {
    /// Keys kept per object: every member of an object of up to this many
    /// is compared with every other (256 octets of stack on any target).
    pub const CAPACITY: usize = 32;

    pub const fn new() -> Self {
        Self {
            first: None,
            kept: None,
        }
    }

    /// Adds `key`, a key of `src` (as [`ObjectScan::key`] reads it);
    /// whether an earlier key of the object is the same text.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn insert(&mut self, src: &[u8], key: Key<'_>) -> bool {
        let start = span(src, key.raw).start;
        let Ok(start) = u32::try_from(start) else {
            // Past 4 GiB: no message is that long.
            return false;
        };
        match self.first {
            None if self.kept.is_none() => {
                self.first = Some(start);
                false
            }
            _ => self.insert_hashed(src, key, start),
        }
    }

    /// [`insert`](Self::insert) from the second key on: out of line, so
    /// that the usual object (none or one key of this kind) costs a store.
    #[cfg_attr(not(target_os = "none"), inline(never))]
    fn insert_hashed(&mut self, src: &[u8], key: Key<'_>, start: u32) -> bool {
        let kept = self.kept.get_or_insert(Kept {
            hashes: [0; Self::CAPACITY],
            starts: [0; Self::CAPACITY],
            len: 0,
        });
        if let Some(first) = self.first.take() {
            kept.hashes[0] = key_hash(raw_key_at(src, first));
            kept.starts[0] = first;
            kept.len = 1;
        }
        let hash = key_hash(key.raw);
        let len = kept.len.min(Self::CAPACITY);
        for (h, &at) in kept.hashes[..len].iter().zip(&kept.starts[..len]) {
            if *h == hash && text_eq(raw_key_at(src, at), key.raw) {
                return true;
            }
        }
        if let (Some(h), Some(s)) = (kept.hashes.get_mut(len), kept.starts.get_mut(len)) {
            *h = hash;
            *s = start;
            kept.len = len + 1;
        }
        false
    }
}

/// Whether a member of `obj`, an object of `src` that [`validate`]
/// accepted, has the key of an earlier one, as far as a [`KeySet`] finds.
/// A second walk over the object's members: for a caller that counted
/// two or more keys it does not know in its own walk, so that the usual
/// object costs that walk nothing.
#[cfg_attr(not(target_os = "none"), inline(never))]
pub fn has_repeated_key(src: &[u8], obj: &[u8]) -> bool {
    let mut keys = KeySet::new();
    members(obj).any(|(raw, _)| {
        let key = Key {
            raw,
            escaped: has_backslash(raw),
        };
        keys.insert(src, key)
    })
}

/// The raw string (quotes included) that starts at `at` of `src`.
pub(crate) fn raw_key_at(src: &[u8], at: u32) -> &[u8] {
    let at = at as usize;
    let end = skip_quoted(src, at).unwrap_or(src.len());
    src.get(at..end).unwrap_or_default()
}

/// A hash of the text of a raw JSON string, escapes resolved: two
/// spellings of one text hash alike.
pub(crate) fn key_hash(raw: &[u8]) -> u32 {
    // FxHash's step: a rotate, an xor and a multiply per octet.
    fn step(h: u32, piece: &[u8]) -> u32 {
        piece.iter().fold(h, |h, &b| {
            (h.rotate_left(5) ^ u32::from(b)).wrapping_mul(0x2722_0a95)
        })
    }
    let mut h = 0;
    if unescape_each(raw, |piece| h = step(h, piece)) {
        h
    } else {
        // Not text (a broken escape): hashed as written, and compared as
        // written too (`text_eq`).
        step(0, raw)
    }
}

/// Whether two raw JSON strings (quotes included) hold the same text once
/// unescaped; strings that do not unescape compare as written.
pub fn text_eq(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let (Some(ia), Some(ib)) = (inner_of(a), inner_of(b)) else {
        return false;
    };
    if !has_backslash(ia) && !has_backslash(ib) {
        return false;
    }
    let mut ca = Unescaped {
        src: ia,
        i: 0,
        failed: false,
    };
    let mut cb = Unescaped {
        src: ib,
        i: 0,
        failed: false,
    };
    loop {
        match (ca.next_char(), cb.next_char()) {
            (Some(x), Some(y)) if x == y => {}
            (None, None) => {
                return !ca.failed && !cb.failed && ca.i >= ia.len() && cb.i >= ib.len();
            }
            _ => return false,
        }
    }
}

/// The inside of a raw JSON string, without its quotes.
fn inner_of(raw: &[u8]) -> Option<&[u8]> {
    trim(raw).strip_prefix(b"\"")?.strip_suffix(b"\"")
}

/// A key found twice in one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepeatedKey;

/// The raw value of member `key` of an object that [`validate`]
/// accepted, as [`get`] finds it, but walking every member: a second
/// member of that key (in any spelling) is [`RepeatedKey`]. For a lookup
/// whose value decides a check, which must be the value every reader of
/// the object takes.
pub fn get_unique<'a>(obj: &'a [u8], key: &[u8]) -> Result<Option<&'a [u8]>, RepeatedKey> {
    let mut found = None;
    for (k, v) in members(obj) {
        if str_eq(k, key) && found.replace(v).is_some() {
            return Err(RepeatedKey);
        }
    }
    Ok(found)
}

/// [`get_all`] walking every member: a key of `keys` found twice is
/// [`RepeatedKey`].
pub fn get_all_unique<'a, const N: usize>(
    obj: &'a [u8],
    keys: [&[u8]; N],
) -> Result<[Option<&'a [u8]>; N], RepeatedKey> {
    let mut found = [None; N];
    for (k, v) in members(obj) {
        if let Some(i) = keys.iter().position(|key| str_eq(k, key))
            && found[i].replace(v).is_some()
        {
            return Err(RepeatedKey);
        }
    }
    Ok(found)
}

/// Whether a raw key (with its quotes, as [`ObjectScan::key`] and
/// [`members`] give it) is `text` once unescaped; the usual unescaped key
/// costs one comparison.
pub fn key_is(raw: &[u8], text: &[u8]) -> bool {
    match raw {
        // An escape makes the raw text longer than what it stands for: a
        // key no longer than `text` is its text, when it has no escape
        // (as `text` has none, if they are equal).
        [b'"', inner @ .., b'"'] if inner.len() <= text.len() => {
            inner == text && !has_backslash(text)
        }
        _ => str_eq(raw, text),
    }
}

/// The members of an object that [`validate`] accepted, as (raw key string
/// with quotes, raw value). Yields nothing for a non-object.
pub fn members(obj: &[u8]) -> Members<'_> {
    let obj = trim(obj);
    let i = if obj.first() == Some(&b'{') {
        1
    } else {
        obj.len()
    };
    Members { src: obj, i }
}

/// Iterator over the members of an object.
#[derive(Debug, Clone)]
pub struct Members<'a> {
    src: &'a [u8],
    i: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let src = self.src;
        let mut i = skip_ws(src, self.i);
        if src.get(i) == Some(&b',') {
            i = skip_ws(src, i + 1);
        }
        if src.get(i) != Some(&b'"') {
            self.i = src.len();
            return None;
        }
        let key_end = skip_string(src, i).ok()?;
        let key = &src[i..key_end];
        let colon = skip_ws(src, key_end);
        if src.get(colon) != Some(&b':') {
            self.i = src.len();
            return None;
        }
        let v = skip_ws(src, colon + 1);
        let end = skip_valid(src, v)?;
        self.i = end;
        Some((key, &src[v..end]))
    }
}

/// The raw value of member `key` (compared with escapes resolved).
pub fn get<'a>(obj: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    members(obj).find(|(k, _)| str_eq(k, key)).map(|(_, v)| v)
}

/// The raw values of several members, in one pass over the object (the
/// first of each key wins, as with [`get`]).
pub fn get_all<'a, const N: usize>(obj: &'a [u8], keys: [&[u8]; N]) -> [Option<&'a [u8]>; N] {
    let mut found = [None; N];
    let mut left = N;
    for (k, v) in members(obj) {
        if let Some(i) = keys.iter().position(|key| str_eq(k, key))
            && found[i].is_none()
        {
            found[i] = Some(v);
            left -= 1;
            if left == 0 {
                break;
            }
        }
    }
    found
}

/// [`validate`] and [`get_all`] in one walk: checks that `src` is exactly
/// one JSON value and, when it is an object, finds the first member of
/// each key while it validates (each octet is looked at once).
pub fn validate_get_all<'a, const N: usize>(
    src: &'a [u8],
    keys: [&[u8]; N],
    max_depth: usize,
) -> Result<[Option<&'a [u8]>; N], JsonError> {
    let start = skip_ws(src, 0);
    let mut found = [None; N];
    if src.get(start) != Some(&b'{') {
        validate(src, max_depth)?;
        return Ok(found);
    }
    let mut scan = ObjectScan::new(src, start, max_depth)?;
    while let Some(key) = scan.key()? {
        let value = scan.value()?;
        if let Some(i) = keys.iter().position(|k| key.is(k))
            && found[i].is_none()
        {
            found[i] = Some(value);
        }
    }
    let end = skip_ws(src, scan.end());
    if end == src.len() {
        Ok(found)
    } else {
        Err(JsonError::Syntax(end))
    }
}

/// The elements of an array that [`validate`] accepted.
pub fn elements(arr: &[u8]) -> Elements<'_> {
    let arr = trim(arr);
    let i = if arr.first() == Some(&b'[') {
        1
    } else {
        arr.len()
    };
    Elements { src: arr, i }
}

/// Iterator over the elements of an array.
#[derive(Debug, Clone)]
pub struct Elements<'a> {
    src: &'a [u8],
    i: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let src = self.src;
        let mut i = skip_ws(src, self.i);
        if src.get(i) == Some(&b',') {
            i = skip_ws(src, i + 1);
        }
        if matches!(src.get(i), None | Some(b']')) {
            self.i = src.len();
            return None;
        }
        let end = skip_valid(src, i)?;
        self.i = end;
        Some(&src[i..end])
    }
}

/// What kind of value raw bytes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

/// The kind of a valid raw value.
pub fn kind(raw: &[u8]) -> Option<Kind> {
    // The first octet of the trimmed value (its end needs no trimming).
    Some(match raw.get(skip_ws(raw, 0))? {
        b'{' => Kind::Object,
        b'[' => Kind::Array,
        b'"' => Kind::String,
        b't' | b'f' => Kind::Bool,
        b'n' => Kind::Null,
        _ => Kind::Number,
    })
}

/// Resolves the escapes of a raw string (with its quotes) into `out`;
/// returns the UTF-8 length, or `None` if it is not a string or does not fit.
pub fn unescape<'o>(raw: &[u8], out: &'o mut [u8]) -> Option<&'o [u8]> {
    let inner = trim(raw).strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    // Most strings have no escape: a copy (of valid UTF-8, as the
    // character walk below would check).
    if !inner.contains(&b'\\') {
        core::str::from_utf8(inner).ok()?;
        let out = out.get_mut(..inner.len())?;
        out.copy_from_slice(inner);
        return Some(out);
    }
    let mut n = 0;
    let mut chars = Unescaped {
        src: inner,
        i: 0,
        failed: false,
    };
    while let Some(c) = chars.next_char() {
        let mut tmp = [0u8; 4];
        let s = c.encode_utf8(&mut tmp).as_bytes();
        out.get_mut(n..n + s.len())?.copy_from_slice(s);
        n += s.len();
    }
    if chars.failed {
        return None;
    }
    Some(&out[..n])
}

/// Whether a raw JSON string equals `text` once unescaped.
pub fn str_eq(raw: &[u8], text: &[u8]) -> bool {
    // The usual string: quotes at both ends (nothing to trim), as long as
    // `text` once they are off, so equal only without an escape.
    if WORDS
        && let [b'"', inner @ .., b'"'] = raw
        && inner.len() == text.len()
    {
        return bytes_eq(inner, text) && !has_backslash(text);
    }
    str_eq_walk(raw, text)
}

/// [`str_eq`] of any raw string: trimmed, escapes resolved. Out of line on
/// hosts, where [`str_eq`]'s usual case is inlined.
#[cfg_attr(not(target_os = "none"), inline(never))]
fn str_eq_walk(raw: &[u8], text: &[u8]) -> bool {
    let Some(inner) = trim(raw)
        .strip_prefix(b"\"")
        .and_then(|s| s.strip_suffix(b"\""))
    else {
        return false;
    };
    // An escape stands for fewer octets than it takes: a string as long as
    // `text` equals it only without escapes, and a shorter one never.
    match inner.len().cmp(&text.len()) {
        core::cmp::Ordering::Less => return false,
        core::cmp::Ordering::Equal => return inner == text && !has_backslash(text),
        core::cmp::Ordering::Greater => {}
    }
    let mut chars = Unescaped {
        src: inner,
        i: 0,
        failed: false,
    };
    let mut pos = 0;
    while let Some(c) = chars.next_char() {
        let mut tmp = [0u8; 4];
        let s = c.encode_utf8(&mut tmp).as_bytes();
        if text.get(pos..pos + s.len()) != Some(s) {
            return false;
        }
        pos += s.len();
    }
    !chars.failed && pos == text.len()
}

/// Whether a raw JSON string equals the octets of `text` once unescaped
/// (as [`str_eq`], for text that is not one slice).
pub fn str_eq_iter(raw: &[u8], mut text: impl Iterator<Item = u8>) -> bool {
    let Some(inner) = trim(raw)
        .strip_prefix(b"\"")
        .and_then(|s| s.strip_suffix(b"\""))
    else {
        return false;
    };
    let mut chars = Unescaped {
        src: inner,
        i: 0,
        failed: false,
    };
    while let Some(c) = chars.next_char() {
        let mut tmp = [0u8; 4];
        if !c
            .encode_utf8(&mut tmp)
            .bytes()
            .all(|b| text.next() == Some(b))
        {
            return false;
        }
    }
    !chars.failed && text.next().is_none()
}

/// Where `part`, a slice of `whole` (as every slice this module returns
/// of its input is), lies in it. A slice from elsewhere gives an empty
/// range at the end.
pub fn span(whole: &[u8], part: &[u8]) -> core::ops::Range<usize> {
    let start = (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
    if start <= whole.len() && part.len() <= whole.len() - start {
        start..start + part.len()
    } else {
        whole.len()..whole.len()
    }
}

/// The unescaped string, borrowed when it has no escapes.
#[cfg_attr(not(target_os = "none"), inline(always))]
pub fn str_plain(raw: &[u8]) -> Option<&[u8]> {
    // A value the scanner handed out has nothing to trim.
    let inner = match raw {
        [b'"', inner @ .., b'"'] if WORDS => inner,
        _ => trim(raw).strip_prefix(b"\"")?.strip_suffix(b"\"")?,
    };
    (!has_backslash(inner)).then_some(inner)
}

/// `a == b`, without a call for the short slices of keys, methods and
/// versions: up to 16 octets are two overlapping compares of 8 or of 4.
#[cfg_attr(not(target_os = "none"), inline(always))]
pub(crate) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if !WORDS || a.len() > 16 {
        return a == b;
    }
    match (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        (Some(a0), Some(b0)) => a0 == b0 && a.last_chunk::<8>() == b.last_chunk::<8>(),
        _ => match (a.first_chunk::<4>(), b.first_chunk::<4>()) {
            (Some(a0), Some(b0)) => a0 == b0 && a.last_chunk::<4>() == b.last_chunk::<4>(),
            _ => a.iter().zip(b).all(|(x, y)| x == y),
        },
    }
}

/// Whether `s`, usually short, holds a `\\`.
// A byte loop: `contains` calls memchr, which costs more than the loop on
// the few octets of a method or a version.
#[allow(clippy::manual_contains)]
fn has_backslash(s: &[u8]) -> bool {
    // Up to sixteen octets: two overlapping words on hosts.
    if WORDS
        && s.len() <= 16
        && let (Some(a), Some(b)) = (s.first_chunk::<8>(), s.last_chunk::<8>())
    {
        const LO: u64 = 0x0101_0101_0101_0101;
        const HI: u64 = 0x8080_8080_8080_8080;
        let found = |w: u64| (w ^ (LO * u64::from(b'\\'))).wrapping_sub(LO) & !w & HI != 0;
        return found(u64::from_le_bytes(*a)) || found(u64::from_le_bytes(*b));
    }
    // Four to seven (a tool's name): two overlapping halves.
    if WORDS
        && s.len() < 8
        && let (Some(a), Some(b)) = (s.first_chunk::<4>(), s.last_chunk::<4>())
    {
        const LO: u32 = 0x0101_0101;
        const HI: u32 = 0x8080_8080;
        let found = |w: u32| (w ^ (LO * u32::from(b'\\'))).wrapping_sub(LO) & !w & HI != 0;
        return found(u32::from_le_bytes(*a)) || found(u32::from_le_bytes(*b));
    }
    s.iter().any(|&b| b == b'\\')
}

struct Unescaped<'a> {
    src: &'a [u8],
    i: usize,
    failed: bool,
}

impl Unescaped<'_> {
    fn hex4(&self, at: usize) -> Option<u32> {
        let h = self.src.get(at..at + 4)?;
        h.iter()
            .try_fold(0, |v, &b| Some(v << 4 | char::from(b).to_digit(16)?))
    }

    fn next_char(&mut self) -> Option<char> {
        let b = *self.src.get(self.i)?;
        if b != b'\\' {
            // Decode one UTF-8 character.
            let len = match b {
                0x00..=0x7f => 1,
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                _ => 4,
            };
            let bytes = self.src.get(self.i..self.i + len);
            let c = bytes
                .and_then(|b| core::str::from_utf8(b).ok())
                .and_then(|s| s.chars().next());
            if c.is_none() {
                self.failed = true;
            }
            self.i += len;
            return c;
        }
        let e = *self.src.get(self.i + 1)?;
        self.i += 2;
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4(self.i)?;
                self.i += 4;
                let code = if (0xd800..0xdc00).contains(&hi)
                    && self.src.get(self.i..self.i + 2) == Some(b"\\u")
                {
                    let lo = self.hex4(self.i + 2)?;
                    if (0xdc00..0xe000).contains(&lo) {
                        self.i += 6;
                        0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                    } else {
                        hi
                    }
                } else {
                    hi
                };
                match char::from_u32(code) {
                    Some(c) => c,
                    None => {
                        self.failed = true;
                        return None;
                    }
                }
            }
            _ => {
                self.failed = true;
                return None;
            }
        };
        Some(c)
    }
}

/// Hands the text of the JSON string `raw` (quotes included) to `sink`, its
/// escapes resolved: in one piece when it has no escape, else character by
/// character (UTF-8). False when `raw` is not a string or holds an invalid
/// escape or invalid UTF-8 (some pieces may have been handed out by then).
/// Nothing is copied into a buffer of ours.
pub fn unescape_each(raw: &[u8], mut sink: impl FnMut(&[u8])) -> bool {
    let Some(inner) = trim(raw)
        .strip_prefix(b"\"")
        .and_then(|s| s.strip_suffix(b"\""))
    else {
        return false;
    };
    if !inner.contains(&b'\\') {
        if core::str::from_utf8(inner).is_err() {
            return false;
        }
        sink(inner);
        return true;
    }
    let mut chars = Unescaped {
        src: inner,
        i: 0,
        failed: false,
    };
    while let Some(c) = chars.next_char() {
        let mut tmp = [0u8; 4];
        sink(c.encode_utf8(&mut tmp).as_bytes());
    }
    !chars.failed && chars.i >= inner.len()
}

/// An integer value, if the raw value is one (a number with no fraction,
/// or with a fraction of zeros, like `42.0`), within ±(2^53−1) or not.
pub fn as_i64(raw: &[u8]) -> Option<i64> {
    let raw = trim(raw);
    let (neg, digits) = match raw.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, raw),
    };
    let int_end = digits
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    let (int, rest) = digits.split_at(int_end);
    if int.is_empty() || int.len() > 18 {
        return None;
    }
    match rest {
        [] => {}
        [b'.', zeros @ ..] if !zeros.is_empty() && zeros.iter().all(|&z| z == b'0') => {}
        _ => return None,
    }
    let v = int
        .iter()
        .fold(0i64, |acc, &d| acc * 10 + i64::from(d - b'0'));
    Some(if neg { -v } else { v })
}

/// The largest integer JavaScript represents exactly.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescape_each_resolves_escapes_and_refuses_broken_ones() {
        let collect = |raw: &[u8]| {
            let mut out = std::vec::Vec::new();
            let ok = unescape_each(raw, |piece| out.extend_from_slice(piece));
            ok.then_some(out)
        };
        assert_eq!(collect(br#""plain""#).as_deref(), Some(&b"plain"[..]));
        assert_eq!(
            collect(br#""a\"b\u00e9\ud83d\ude00\n""#).as_deref(),
            Some("a\"b\u{e9}\u{1f600}\n".as_bytes())
        );
        for broken in [
            &br#""\ud800""#[..],
            br#""\x""#,
            br#""\u12""#,
            b"\"\xff\"",
            b"nope",
        ] {
            assert_eq!(collect(broken), None, "{broken:?}");
        }
    }

    /// Keys compare by their text: `"\u0072egion"` is `"region"`, for
    /// the scan's keys, raw keys and the repeat check alike.
    #[test]
    fn keys_compare_by_their_unescaped_text() {
        let doc = br#"{"\u0072egion":1,"re\u0067ion":2,"region":3,"\ud83d\ude00":4,"a\/b":5}"#;
        let mut scan = ObjectScan::new(doc, 0, 4).unwrap();
        let mut keys = std::vec::Vec::new();
        while let Some(k) = scan.key().unwrap() {
            scan.value().unwrap();
            keys.push(k);
        }
        for k in &keys[..3] {
            assert!(k.is(b"region") && key_is(k.raw, b"region"), "{:?}", k.raw);
            assert!(!k.is(b"regio") && !k.is(b"regions") && !key_is(k.raw, br"\u0072egion"));
            assert!(text_eq(k.raw, br#""region""#));
        }
        assert!(keys[3].is("😀".as_bytes()) && key_is(keys[3].raw, "😀".as_bytes()));
        assert!(keys[4].is(b"a/b") && !keys[4].is(br"a\/b"));
        assert!(!text_eq(br#""a\u00e9""#, br#""ae""#));
        assert!(!text_eq(br#""ab""#, br#""a""#));
        // One set of keys: each spelling of `region` after the first is a
        // repeat; the others are not.
        let mut set = KeySet::new();
        let found: std::vec::Vec<bool> = keys.iter().map(|k| set.insert(doc, *k)).collect();
        assert_eq!(found, [false, true, true, false, false]);
        assert_eq!(get_unique(doc, b"region"), Err(RepeatedKey));
        assert_eq!(get_unique(doc, b"a/b"), Ok(Some(&b"5"[..])));
        assert_eq!(get_unique(doc, b"none"), Ok(None));
        assert_eq!(
            get_all_unique(doc, [&b"a/b"[..], "😀".as_bytes()]),
            Ok([Some(&b"5"[..]), Some(&b"4"[..])])
        );
        assert_eq!(
            get_all_unique(doc, [&b"a/b"[..], b"region"]),
            Err(RepeatedKey)
        );
        assert!(has_repeated_key(doc, doc));
        assert!(!has_repeated_key(
            doc,
            br#"{"a":1,"b":{"a":2},"c":[{"a":3}]}"#
        ));
    }

    /// Every key is compared with at most [`KeySet::CAPACITY`] kept ones:
    /// an object of many distinct keys (here 200,000) costs a walk, not a
    /// comparison of every pair.
    #[test]
    fn a_large_object_is_checked_in_one_walk() {
        let n = 200_000;
        let mut doc = std::string::String::from("{");
        for i in 0..n {
            if i > 0 {
                doc.push(',');
            }
            doc.push_str(&std::format!(r#""k{i}":{i}"#));
        }
        doc.push('}');
        let start = std::time::Instant::now();
        assert!(!has_repeated_key(doc.as_bytes(), doc.as_bytes()));
        // A pairwise check would compare 2e10 pairs: minutes, not this.
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        // A repeat of an early key at the very end is found.
        doc.pop();
        doc.push_str(r#","k7":0}"#);
        assert!(has_repeated_key(doc.as_bytes(), doc.as_bytes()));
    }

    #[test]
    fn the_quick_skip_ends_where_the_validating_skip_ends() {
        let docs: [&[u8]; 9] = [
            br#"{"a":[1,{"b":"]}\"}"},-2.5e3],"c":{}}"#,
            br#"["x\\",[[]],true,null,false,{"k":"v"}]"#,
            br#""a string with { and ] and \" inside, longer than a word""#,
            b"-12.75e+2",
            b"true",
            br#"{"nested":{"deep":{"deeper":[1,2,3,"\u00e9"]}},"z":0}"#,
            br#"[ 1 , "two" , { "three" : 3 } ]"#,
            br#"{"text":"0123456789abcdef0123456789abcdef\\"}"#,
            b"{}",
        ];
        for doc in docs {
            assert_eq!(validate(doc, DEFAULT_MAX_DEPTH), Ok(()), "{doc:?}");
            assert_eq!(
                skip_valid(doc, 0),
                skip_value(doc, 0, DEFAULT_MAX_DEPTH).ok(),
                "{:?}",
                core::str::from_utf8(doc)
            );
        }
        // Members and elements of such documents, by the quick skip.
        let obj = br#"{"a" : "x,}", "b":[1,"]"], "c":{"d":"\""}}"#;
        let keys: [&[u8]; 3] = [br#""a""#, br#""b""#, br#""c""#];
        assert!(members(obj).map(|(k, _)| k).eq(keys));
        assert_eq!(get(obj, b"b"), Some(&br#"[1,"]"]"#[..]));
        assert_eq!(elements(br#"[1,"]",{"x":[2]}]"#).count(), 3);
        // Broken input ends somewhere, without a panic.
        for bad in [
            &br#"{"a":"unterminated"#[..],
            b"{\"a\":[1,2",
            b"[\"x",
            b"{\"a\" 1}",
        ] {
            let _ = members(bad).count();
            let _ = elements(bad).count();
        }
    }

    /// The one-walk check and lookup gives what the two walks give, and
    /// refuses what `validate` refuses.
    #[test]
    fn validate_get_all_is_validate_then_get_all() {
        let docs: [&[u8]; 12] = [
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#,
            br#" { "id" : "a" , "error" : {"code":-1} , "id" : 2 } "#,
            br#"{"\u0069d":1,"method":"x"}"#,
            br#"{"method":"notifications/progress","params":{}}"#,
            b"[1,2]",
            b"3",
            b"{}",
            br#"{"id":1}x"#,
            br#"{"id":1,}"#,
            br#"{"id":[1,2}"#,
            br#"{"id" 1}"#,
            b"",
        ];
        let keys = [&b"id"[..], b"method", b"error"];
        for doc in docs {
            let two = validate(doc, DEFAULT_MAX_DEPTH).map(|()| get_all(doc, keys));
            let one = validate_get_all(doc, keys, DEFAULT_MAX_DEPTH);
            assert_eq!(one.is_ok(), two.is_ok(), "{:?}", core::str::from_utf8(doc));
            if let (Ok(one), Ok(two)) = (one, two) {
                assert_eq!(one, two, "{:?}", core::str::from_utf8(doc));
            }
        }
        // Too deep is refused as `validate` refuses it.
        assert!(validate_get_all(br#"{"a":[[[1]]]}"#, keys, 3).is_err());
        assert!(validate_get_all(br#"{"a":[[1]]}"#, keys, 3).is_ok());
    }

    #[test]
    fn the_word_scan_agrees_with_the_byte_scan() {
        let plain = |b: u8| b != b'"' && b != b'\\' && b >= 0x20;
        for pos in 0..8 {
            for b in 0..=255u8 {
                let mut w = [b'a'; 8];
                w[pos] = b;
                assert_eq!(
                    plain_word(u64::from_le_bytes(w)),
                    plain(b),
                    "{b:#x} at {pos}"
                );
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let w = x.to_le_bytes();
            assert_eq!(plain_word(x), w.iter().all(|&b| plain(b)), "{w:?}");
            // The scan jumps to the first special octet, not a later one.
            let first = w.iter().position(|&b| !plain(b)).unwrap_or(8);
            assert_eq!(string_stop(&w, 0), first, "{w:?}");
            // Both ways of scanning, over a word and a part of one.
            let two = [x.to_le_bytes(), (x >> 3).to_le_bytes()].concat();
            for from in 0..two.len() {
                let first = two[from..].iter().position(|&b| !plain(b));
                let first = first.map_or(two.len(), |p| from + p);
                assert_eq!(string_stop_words(&two, from), first, "{two:?} {from}");
                assert_eq!(string_stop_octets(&two, from), first, "{two:?} {from}");
            }
        }
    }

    #[test]
    fn short_and_long_slices_compare_as_with_eq() {
        let base: std::vec::Vec<u8> = (0..24u8).map(|i| b'a' + i).collect();
        for len in 0..=base.len() {
            let a = &base[..len];
            assert!(bytes_eq(a, a));
            for other in 0..=base.len() {
                assert_eq!(bytes_eq(a, &base[..other]), len == other);
            }
            // One octet different, at every place.
            for at in 0..len {
                let mut b = a.to_vec();
                b[at] ^= 0x20;
                assert!(!bytes_eq(a, &b), "{len} {at}");
            }
        }
    }

    #[test]
    fn strings_of_every_length_end_where_the_octet_walk_ends_them() {
        for len in 0..48 {
            for pos in 0..=len {
                for special in [&b"\""[..], b"\\n", b"\\u00e9", b"\x01", b"\\"] {
                    for after in 0..10 {
                        let mut doc = std::vec![b'"'];
                        doc.extend(std::iter::repeat_n(b'a', pos));
                        doc.extend_from_slice(special);
                        doc.extend(std::iter::repeat_n(b'b', len - pos));
                        doc.push(b'"');
                        doc.extend(std::iter::repeat_n(b'}', after));
                        assert_eq!(
                            skip_string_escaped(&doc, 0),
                            string_rest(&doc, 1, false),
                            "{:?}",
                            core::str::from_utf8(&doc)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn leading_digits_by_word_agree_with_the_octets() {
        for at in 0..8 {
            for b in 0..=255u8 {
                for fill in [b'0', b'5', b'9'] {
                    let mut w = [fill; 8];
                    w[at] = b;
                    let want = w.iter().take_while(|c| c.is_ascii_digit()).count();
                    assert_eq!(leading_digits(u64::from_le_bytes(w)), want, "{w:?}");
                }
            }
        }
    }

    #[test]
    fn a_backslash_is_found_at_every_place() {
        for len in 0..=24 {
            let plain: std::vec::Vec<u8> = (0..len).map(|i| b'a' + i).collect();
            assert!(!has_backslash(&plain), "{len}");
            for at in 0..usize::from(len) {
                let mut s = plain.clone();
                s[at] = b'\\';
                assert!(has_backslash(&s), "{len} {at}");
                // Octets a borrow could turn into a false find.
                s[at] = b'\\' - 1;
                assert!(!has_backslash(&s), "{len} {at}");
            }
        }
    }

    #[test]
    fn a_string_as_long_as_the_text_matches_only_without_escapes() {
        // The raw octets equal the text, but the escape stands for one octet.
        assert!(!str_eq(br#""a\nb""#, br"a\nb"));
        assert!(str_eq(br#""a\nb""#, b"a\nb"));
        assert!(!str_eq(br#""a\u00e9""#, br"a\u00e9"));
        assert!(str_eq(br#""a\u00e9""#, "a\u{e9}".as_bytes()));
        assert!(str_eq(br#""2.0""#, b"2.0"));
        assert!(!str_eq(br#""2.0""#, b"2.00"));
        assert!(!str_eq(br#""2.00""#, b"2.0"));
    }

    #[test]
    fn validates() {
        for ok in [
            &br#"{"a":[1,2,{"b":null}],"c":"x\"y","d":-0.5e+3,"e":true}"#[..],
            b" [] ",
            b"0",
            br#""\u00e9\ud83d\ude00""#,
        ] {
            assert_eq!(
                validate(ok, 8),
                Ok(()),
                "{}",
                core::str::from_utf8(ok).unwrap()
            );
        }
        for bad in [
            &b"{"[..],
            b"{\"a\"}",
            b"[1,]",
            b"{\"a\":1,}",
            b"01",
            b"1.",
            b"\"\x01\"",
            b"tru",
            b"[1] 2",
            b"{'a':1}",
            b"",
        ] {
            assert!(validate(bad, 8).is_err(), "{:?}", core::str::from_utf8(bad));
        }
        assert_eq!(validate(b"[[[[[[[[[1]]]]]]]]]", 8), Err(JsonError::TooDeep));
        assert_eq!(validate(b"[[[[[[[[1]]]]]]]]", 8), Ok(()));
    }

    #[test]
    fn members_and_strings() {
        let obj = br#" { "id" : 7, "method":"tools\/call", "params":{"name":"echo"} } "#;
        let keys: [&[u8]; 3] = [b"\"id\"", b"\"method\"", b"\"params\""];
        assert!(members(obj).map(|(k, _)| k).eq(keys));
        assert_eq!(get(obj, b"id"), Some(&b"7"[..]));
        assert!(str_eq(get(obj, b"method").unwrap(), b"tools/call"));
        assert_eq!(
            get(get(obj, b"params").unwrap(), b"name"),
            Some(&br#""echo""#[..])
        );
        let mut buf = [0u8; 16];
        assert_eq!(
            unescape(br#""a\u00e9\n""#, &mut buf),
            Some("aé\n".as_bytes())
        );
        assert!(str_eq(br#""\ud83d\ude00""#, "😀".as_bytes()));
        // As long as the text, with an escape: not the text as written.
        assert!(!str_eq(br#""a\n""#, b"a\\n"));
        assert!(str_eq(br#""a\\n""#, b"a\\n"));
        assert!(!str_eq(br#""ab""#, b"abc"));
        assert!(!str_eq(br#""a\u0062c""#, b"ab"));
        assert!(str_eq(br#""a\u0062c""#, b"abc"));
        assert_eq!(elements(b"[1, [2], {\"a\":3}]").count(), 3);
    }

    #[test]
    fn integers() {
        assert_eq!(as_i64(b"42"), Some(42));
        assert_eq!(as_i64(b"-7"), Some(-7));
        assert_eq!(as_i64(b"42.0"), Some(42));
        assert_eq!(as_i64(b"42.5"), None);
        assert_eq!(as_i64(b"1e3"), None);
        assert_eq!(as_i64(b"9007199254740993"), Some(9_007_199_254_740_993));
    }
}
