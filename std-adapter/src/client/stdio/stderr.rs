//! A child's stderr on this process's stderr, a line at a time after a
//! prefix that names the child, in bounded pieces.

use tokio::io::{AsyncRead, AsyncReadExt};

/// The longest line of a child's stderr printed as one: a longer one is
/// printed in pieces of this length, so a child that writes without
/// newlines costs no more memory than this.
const MAX_STDERR_LINE: usize = 8 << 10;

/// The child's stderr on ours, a line at a time after `prefix`.
pub(crate) async fn forward_stderr(mut stderr: impl AsyncRead + Unpin, prefix: String) {
    let mut buf = vec![0u8; MAX_STDERR_LINE];
    let mut line = Vec::with_capacity(256);
    let print = |line: &[u8]| {
        eprintln!("{prefix}{}", String::from_utf8_lossy(line).trim_end());
    };
    while let Ok(n @ 1..) = stderr.read(&mut buf).await {
        cut_lines(&mut line, buf.get(..n).unwrap_or_default(), print);
    }
    if !line.is_empty() {
        print(&line);
    }
}

/// Appends `input` to `line` (what came since the last newline) and hands
/// each line it completes to `emit`, without its newline; a line that
/// reaches [`MAX_STDERR_LINE`] octets goes out as it is when more
/// follows.
fn cut_lines(line: &mut Vec<u8>, input: &[u8], mut emit: impl FnMut(&[u8])) {
    for piece in input.split_inclusive(|&b| b == b'\n') {
        let (text, ends) = match piece.split_last() {
            Some((b'\n', text)) => (text, true),
            _ => (piece, false),
        };
        let mut text = text;
        while !text.is_empty() {
            if line.len() >= MAX_STDERR_LINE {
                emit(line);
                line.clear();
            }
            let room = MAX_STDERR_LINE - line.len();
            let (now, rest) = text.split_at(text.len().min(room));
            line.extend_from_slice(now);
            text = rest;
        }
        if ends {
            emit(line);
            line.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(inputs: &[&[u8]]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let mut line = Vec::new();
        let mut out = Vec::new();
        for input in inputs {
            cut_lines(&mut line, input, |l| out.push(l.to_vec()));
            assert!(line.len() <= MAX_STDERR_LINE);
        }
        (out, line)
    }

    #[test]
    fn stderr_lines_are_cut_at_newlines_and_at_the_bound() {
        let (out, rest) = cut(&[b"a\nbc", b"d\n\ne"]);
        assert_eq!(out, [&b"a"[..], b"bcd", b""]);
        assert_eq!(rest, b"e");
        // No newline at all: pieces of the bound, nothing more held.
        let big = vec![b'A'; 3 * MAX_STDERR_LINE + 5];
        let (out, rest) = cut(&[&big, &big]);
        assert_eq!(out.len(), 6);
        assert!(out.iter().all(|l| l.len() == MAX_STDERR_LINE));
        assert_eq!(rest.len(), 10);
        // A line of exactly the bound, then its newline: one line.
        let mut exact = vec![b'B'; MAX_STDERR_LINE];
        exact.push(b'\n');
        let (out, rest) = cut(&[&exact[..MAX_STDERR_LINE], &exact[MAX_STDERR_LINE..]]);
        assert_eq!(out, [vec![b'B'; MAX_STDERR_LINE]]);
        assert!(rest.is_empty());
    }
}
