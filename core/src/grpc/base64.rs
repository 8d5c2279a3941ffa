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
