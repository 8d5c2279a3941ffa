//! Percent-encoding of `grpc-message`: bytes outside 0x20–0x7E, and `%`,
//! become `%XX` (PROTOCOL-HTTP2, "Responses").

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn plain(b: u8) -> bool {
    (0x20..=0x7e).contains(&b) && b != b'%'
}

/// The encoded length of `src`.
pub fn encoded_len(src: &[u8]) -> usize {
    src.iter().map(|&b| if plain(b) { 1 } else { 3 }).sum()
}

/// Encodes `src` into `out`; returns the length written, or `None` if `out`
/// is too small.
pub fn encode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut n = 0;
    for &b in src {
        if plain(b) {
            *out.get_mut(n)? = b;
            n += 1;
        } else {
            let dst = out.get_mut(n..n + 3)?;
            dst[0] = b'%';
            dst[1] = HEX[usize::from(b >> 4)];
            dst[2] = HEX[usize::from(b & 0xf)];
            n += 3;
        }
    }
    Some(n)
}

/// Decodes `src` into `out` (at most `src.len()` bytes). A `%` not followed
/// by two hex digits is kept as is, as gRPC asks of receivers.
pub fn decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut n = 0;
    let mut i = 0;
    while i < src.len() {
        let b = src[i];
        let decoded = if b == b'%' {
            match (
                src.get(i + 1).and_then(|&h| hex(h)),
                src.get(i + 2).and_then(|&l| hex(l)),
            ) {
                (Some(h), Some(l)) => {
                    i += 2;
                    Some(h << 4 | l)
                }
                _ => None,
            }
        } else {
            None
        };
        *out.get_mut(n)? = decoded.unwrap_or(b);
        n += 1;
        i += 1;
    }
    Some(n)
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let src = "Unknown tool: \"nope\" 100% — ok\n".as_bytes();
        let mut enc = [0u8; 128];
        let n = encode(src, &mut enc).unwrap();
        assert_eq!(n, encoded_len(src));
        assert!(enc[..n].iter().all(|&b| (0x20..=0x7e).contains(&b)));
        assert!(core::str::from_utf8(&enc[..n]).unwrap().contains("100%25"));
        let mut dec = [0u8; 128];
        let m = decode(&enc[..n], &mut dec).unwrap();
        assert_eq!(&dec[..m], src);
        // A stray % survives.
        let m = decode(b"50%z", &mut dec).unwrap();
        assert_eq!(&dec[..m], b"50%z");
    }
}
