//! Integer representation with an N-bit prefix (RFC 7541 §5.1).

use super::{DecodeError, EncodeError, out::Out};

/// Reads an integer whose first octet keeps its value in the low
/// `prefix_bits` bits (1 to 8); the high bits belong to the caller.
///
/// Returns the value and the number of octets read. Values above `u32::MAX`
/// and encodings longer than five continuation octets are
/// [`DecodeError::IntegerOverflow`].
#[inline(always)]
pub fn decode(buf: &[u8], prefix_bits: u8) -> Result<(u32, usize), DecodeError> {
    let mask = prefix_mask(prefix_bits);
    let first = buf.first().ok_or(DecodeError::Truncated)? & mask;
    if first < mask {
        return Ok((u32::from(first), 1));
    }
    let mut value = u64::from(mask);
    let mut shift = 0u32;
    for (i, &b) in buf.iter().skip(1).enumerate() {
        value += u64::from(b & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return Err(DecodeError::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            // `value` was checked against u32::MAX just above.
            return Ok((value as u32, i + 2));
        }
        shift += 7;
        if shift > 28 {
            return Err(DecodeError::IntegerOverflow);
        }
    }
    Err(DecodeError::Truncated)
}

/// Writes `value` with a `prefix_bits` prefix; `flags` fills the bits above
/// the prefix in the first octet. Returns the number of octets written.
pub fn encode(
    value: usize,
    prefix_bits: u8,
    flags: u8,
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    let mut w = Out::new(out);
    write(&mut w, value, prefix_bits, flags);
    w.finish()
}

/// Writes an integer into a counting writer.
pub(super) fn write(w: &mut Out<'_>, value: usize, prefix_bits: u8, flags: u8) {
    let mask = prefix_mask(prefix_bits);
    if value < usize::from(mask) {
        // `value < mask <= 0xff`.
        w.push(flags | value as u8);
        return;
    }
    w.push(flags | mask);
    let mut rest = value - usize::from(mask);
    while rest >= 0x80 {
        w.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    w.push(rest as u8);
}

/// The octets [`encode`] writes for `value` with a `prefix_bits` prefix.
pub const fn encoded_len(value: usize, prefix_bits: u8) -> usize {
    let mask = prefix_mask(prefix_bits) as usize;
    if value < mask {
        return 1;
    }
    let mut rest = value - mask;
    let mut n = 2;
    while rest >= 0x80 {
        rest >>= 7;
        n += 1;
    }
    n
}

const fn prefix_mask(prefix_bits: u8) -> u8 {
    if prefix_bits >= 8 {
        0xff
    } else {
        (1u8 << prefix_bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7541_c1_examples() {
        // C.1.1: 10 with a 5-bit prefix.
        let mut buf = [0u8; 8];
        assert_eq!(encode(10, 5, 0, &mut buf), Ok(1));
        assert_eq!(buf[0], 0b0000_1010);
        assert_eq!(decode(&buf, 5), Ok((10, 1)));
        // C.1.2: 1337 with a 5-bit prefix.
        assert_eq!(encode(1337, 5, 0, &mut buf), Ok(3));
        assert_eq!(&buf[..3], &[0b0001_1111, 0b1001_1010, 0b0000_1010]);
        assert_eq!(decode(&buf[..3], 5), Ok((1337, 3)));
        // C.1.3: 42 starting at an octet boundary.
        assert_eq!(encode(42, 8, 0, &mut buf), Ok(1));
        assert_eq!(buf[0], 42);
        assert_eq!(decode(&buf[..1], 8), Ok((42, 1)));
    }

    #[test]
    fn flags_are_kept_and_ignored() {
        let mut buf = [0u8; 8];
        assert_eq!(encode(3, 6, 0x40, &mut buf), Ok(1));
        assert_eq!(buf[0], 0x43);
        assert_eq!(decode(&buf[..1], 6), Ok((3, 1)));
    }

    #[test]
    fn boundaries() {
        let mut buf = [0u8; 8];
        for prefix in 1..=8u8 {
            for v in [
                0usize,
                1,
                30,
                31,
                127,
                128,
                255,
                256,
                16383,
                16384,
                u32::MAX as usize,
            ] {
                let n = encode(v, prefix, 0, &mut buf).unwrap();
                assert_eq!(n, encoded_len(v, prefix));
                assert_eq!(
                    decode(&buf[..n], prefix),
                    Ok((v as u32, n)),
                    "{v} /{prefix}"
                );
                // Every proper prefix of the encoding is truncated.
                for cut in 0..n {
                    assert_eq!(decode(&buf[..cut], prefix), Err(DecodeError::Truncated));
                }
            }
        }
    }

    #[test]
    fn overflow_is_an_error() {
        // 2^32 with a 5-bit prefix.
        let mut buf = [0u8; 8];
        let n = encode(1 << 32, 5, 0, &mut buf).unwrap();
        assert_eq!(decode(&buf[..n], 5), Err(DecodeError::IntegerOverflow));
        // Zero-valued continuation octets past five are an overlong encoding.
        let overlong = [0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert_eq!(decode(&overlong, 5), Err(DecodeError::IntegerOverflow));
    }

    #[test]
    fn too_small_output_reports_the_size_needed() {
        let mut buf = [0u8; 2];
        assert_eq!(
            encode(1337, 5, 0, &mut buf),
            Err(EncodeError::BufferTooSmall { needed: 3 })
        );
    }
}
