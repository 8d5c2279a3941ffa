//! Standard base64 (RFC 4648 §4) for `-bin` metadata: written padded,
//! read padded or not, with `,`-joined values split by the caller.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The padded encoded length of `n` bytes.
pub const fn encoded_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// Encodes `src` into `out`, padded; `None` if `out` is too small.
pub fn encode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let need = encoded_len(src.len());
    let out = out.get_mut(..need)?;
    for (chunk, dst) in src.chunks(3).zip(out.chunks_mut(4)) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let v = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (i, d) in dst.iter_mut().enumerate() {
            *d = if i <= chunk.len() {
                ALPHABET[(v >> (18 - 6 * i) & 63) as usize]
            } else {
                b'='
            };
        }
    }
    Some(need)
}

/// Decodes `src` (padded or not) into `out`; `None` for a byte outside the
/// alphabet, an impossible length, or an `out` too small.
pub fn decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let src = match src {
        [rest @ .., b'=', b'='] | [rest @ .., b'='] => rest,
        _ => src,
    };
    if src.len() % 4 == 1 {
        return None;
    }
    let mut n = 0;
    for chunk in src.chunks(4) {
        let mut v = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            v |= u32::from(value(c)?) << (18 - 6 * i);
        }
        let bytes = chunk.len() - 1;
        let dst = out.get_mut(n..n + bytes)?;
        for (i, d) in dst.iter_mut().enumerate() {
            *d = (v >> (16 - 8 * i)) as u8;
        }
        n += bytes;
    }
    Some(n)
}

/// Whether `src` is canonical padded base64 (RFC 4648 §3.5): a multiple
/// of four characters of the alphabet, `=` only as the one or two last,
/// and zero bits after the last octet. The one text of its octets.
pub fn is_canonical(src: &[u8]) -> bool {
    if !src.len().is_multiple_of(4) {
        return false;
    }
    let (body, pad) = match src {
        [rest @ .., b'=', b'='] => (rest, 2),
        [rest @ .., b'='] => (rest, 1),
        _ => (src, 0),
    };
    if !body.iter().all(|&c| value(c).is_some()) {
        return false;
    }
    // The last character carries 4 (two `=`) or 2 (one `=`) unused bits.
    let unused_mask = match pad {
        2 => 0b1111,
        1 => 0b11,
        _ => 0,
    };
    body.last()
        .and_then(|&c| value(c))
        .is_none_or(|v| v & unused_mask == 0)
}

/// The octets of `src`, decoded one at a time without a buffer. `src` must
/// be valid (see [`is_canonical`]); a character outside the alphabet
/// counts as zero.
pub fn decoded(src: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let src = match src {
        [rest @ .., b'=', b'='] | [rest @ .., b'='] => rest,
        _ => src,
    };
    src.chunks(4).flat_map(|chunk| {
        let mut v = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            v |= u32::from(value(c).unwrap_or(0)) << (18 - 6 * i);
        }
        let octets = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        octets.into_iter().take(chunk.len().saturating_sub(1))
    })
}

fn value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors() {
        let cases: [(&[u8], &[u8]); 7] = [
            (b"", b""),
            (b"f", b"Zg=="),
            (b"fo", b"Zm8="),
            (b"foo", b"Zm9v"),
            (b"foob", b"Zm9vYg=="),
            (b"fooba", b"Zm9vYmE="),
            (b"foobar", b"Zm9vYmFy"),
        ];
        let mut buf = [0u8; 16];
        for (plain, enc) in cases {
            let n = encode(plain, &mut buf).unwrap();
            assert_eq!(&buf[..n], enc);
            let m = decode(enc, &mut buf).unwrap();
            assert_eq!(&buf[..m], plain);
            // Unpadded input decodes too.
            let trimmed: &[u8] = enc
                .strip_suffix(b"==")
                .or(enc.strip_suffix(b"="))
                .unwrap_or(enc);
            let m = decode(trimmed, &mut buf).unwrap();
            assert_eq!(&buf[..m], plain);
        }
        assert_eq!(decode(b"Zm9v!", &mut buf), None);
        assert_eq!(decode(b"Z", &mut buf), None);
    }

    #[test]
    fn canonical_text_only() {
        for ok in [&b""[..], b"Zg==", b"Zm8=", b"Zm9v", b"Zm9vYmFy"] {
            assert!(is_canonical(ok), "{ok:?}");
            let mut buf = [0u8; 8];
            let n = decode(ok, &mut buf).unwrap();
            assert!(decoded(ok).eq(buf[..n].iter().copied()), "{ok:?}");
        }
        // Unpadded, nonzero trailing bits, `=` inside, bad length or byte.
        for bad in [
            &b"Zg"[..],
            b"Zm8",
            b"Zh==",
            b"Zm9=",
            b"Z===",
            b"Zg==Zg==",
            b"Zm9v!",
            b"Z",
        ] {
            assert!(!is_canonical(bad), "{bad:?}");
        }
    }

    #[test]
    fn typed_binding_example() {
        // typed-binding.md §9.2.
        let json = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"Unknown tool: nope"}}"#;
        let mut buf = [0u8; 128];
        let n = encode(json, &mut buf).unwrap();
        assert_eq!(
            &buf[..n],
            &b"eyJqc29ucnBjIjoiMi4wIiwiaWQiOm51bGwsImVycm9yIjp7ImNvZGUiOi0zMjYwMiwibWVzc2FnZSI6IlVua25vd24gdG9vbDogbm9wZSJ9fQ=="[..]
        );
    }
}
