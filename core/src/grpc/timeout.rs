//! The `grpc-timeout` header: at most 8 ASCII digits and a unit
//! (`H` hours, `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds,
//! `n` nanoseconds).

use core::time::Duration;

/// Parses a `grpc-timeout` value. `None` for anything malformed (the call
/// then fails with INTERNAL in most stacks; we treat it as absent only if
/// the caller chooses to).
pub fn parse(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Formats `d` for `grpc-timeout` into `out` in the finest unit whose value
/// fits in 8 digits, rounding up so a deadline is never shortened. Returns
/// the text.
pub fn format(d: Duration, out: &mut [u8; 10]) -> &[u8] {
    const MAX: u128 = 99_999_999;
    let nanos = d.as_nanos();
    let units: [(u128, u8); 6] = [
        (1, b'n'),
        (1_000, b'u'),
        (1_000_000, b'm'),
        (1_000_000_000, b'S'),
        (60_000_000_000, b'M'),
        (3_600_000_000_000, b'H'),
    ];
    let mut chosen = (MAX, b'H');
    for (scale, unit) in units {
        let v = nanos.div_ceil(scale);
        if v <= MAX {
            chosen = (v, unit);
            break;
        }
    }
    let (mut v, unit) = chosen;
    let mut digits = [0u8; 8];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = digits[n - 1 - i];
    }
    out[n] = unit;
    &out[..=n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit() {
        assert_eq!(parse(b"2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse(b"3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse(b"10S"), Some(Duration::from_secs(10)));
        assert_eq!(parse(b"250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse(b"7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse(b"99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in [&b""[..], b"S", b"123456789S", b"1x", b"-1S", b"1.5S"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn format_round_trips_without_shortening() {
        let mut buf = [0u8; 10];
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(1500),
            Duration::from_secs(60),
            Duration::from_secs(86_400 * 365),
            Duration::from_nanos(123_456_789_123),
        ] {
            let text = format(d, &mut buf);
            let back = parse(text).unwrap();
            assert!(
                back >= d.min(Duration::from_secs(99_999_999 * 3600)),
                "{d:?} -> {text:?}"
            );
            // Never more than one unit of the chosen scale longer.
            assert!(text.len() <= 9);
        }
        assert_eq!(format(Duration::from_secs(60), &mut buf), b"60000000u");
        assert_eq!(format(Duration::from_millis(1500), &mut buf), b"1500000u");
    }
}
