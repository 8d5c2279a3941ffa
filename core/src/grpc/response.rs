//! What a gRPC server sends back on a call's stream: the response head,
//! the trailers after the messages, and a trailers-only answer (the
//! "PROTOCOL-HTTP2" document, "Responses").

use super::{Code, percent};
use crate::hpack::{Field, FixedLiterals};

/// The content type of every response.
pub const CONTENT_TYPE: &[u8] = b"application/grpc+proto";

/// The response head: `:status 200`, `content-type`.
pub const HEAD: [Field<'static>; 2] = [
    Field::new(b":status", b"200"),
    Field::new(b"content-type", CONTENT_TYPE),
];

/// The strings of [`HEAD`] and of the trailers that are not in HPACK's
/// static table, coded once for every answer (checked against the encoder
/// by a test; the octets were computed with Python's `hpack`, another
/// implementation of RFC 7541's code).
pub const LITERALS: FixedLiterals = FixedLiterals(&[
    (
        CONTENT_TYPE,
        &[
            0x90, 0x1d, 0x75, 0xd0, 0x62, 0x0d, 0x26, 0x3d, 0x4c, 0x4d, 0x65, 0x64, 0xff, 0x75,
            0xd8, 0x74, 0x9f,
        ],
    ),
    (
        b"grpc-status",
        &[0x88, 0x9a, 0xca, 0xc8, 0xb2, 0x12, 0x34, 0xda, 0x8f],
    ),
    (
        b"grpc-message",
        &[0x89, 0x9a, 0xca, 0xc8, 0xb5, 0x25, 0x42, 0x07, 0x31, 0x7f],
    ),
]);

/// Longest `grpc-message` text kept in a status answer built here.
pub const MAX_STATUS_MESSAGE: usize = 128;

/// A status with its `grpc-message` percent-encoded in place (at most
/// [`MAX_STATUS_MESSAGE`] octets of the text, cut at a character boundary).
#[derive(Debug, Clone)]
pub struct Status {
    code: Code,
    message: [u8; 3 * MAX_STATUS_MESSAGE],
    len: usize,
}

impl Status {
    pub fn new(code: Code, message: &[u8]) -> Self {
        let mut s = Self {
            code,
            message: [0; 3 * MAX_STATUS_MESSAGE],
            len: 0,
        };
        s.len = percent_cut(message, &mut s.message);
        s
    }

    /// The trailers after a response head: `grpc-status` and, when there is
    /// a message, `grpc-message`; `extra` after them.
    pub fn trailers<'a>(&'a self, extra: &'a [Field<'a>]) -> impl Iterator<Item = Field<'a>> + 'a {
        let message =
            (self.len > 0).then(|| Field::new(b"grpc-message", &self.message[..self.len]));
        core::iter::once(Field::new(b"grpc-status", self.code.as_bytes()))
            .chain(message)
            .chain(extra.iter().copied())
    }

    /// A trailers-only answer: the response head and the trailers in one
    /// block.
    pub fn trailers_only<'a>(
        &'a self,
        extra: &'a [Field<'a>],
    ) -> impl Iterator<Item = Field<'a>> + 'a {
        HEAD.into_iter().chain(self.trailers(extra))
    }
}

/// Percent-encodes as much of `text` as surely fits in `out` (three octets
/// each), cut at a character boundary; returns the length.
pub fn percent_cut(text: &[u8], out: &mut [u8]) -> usize {
    let mut take = text.len().min(out.len() / 3);
    while take > 0 && take < text.len() && text[take] & 0xC0 == 0x80 {
        take -= 1;
    }
    percent::encode(&text[..take], out).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpack::Encoder;

    #[test]
    fn the_coded_literals_are_what_the_encoder_codes() {
        let status = Status::new(Code::Internal, b"x");
        let blocks: [&[Field<'_>]; 3] = [
            &HEAD,
            &[Field::new(b"grpc-status", b"0")],
            &status.trailers_only(&[]).collect::<heapless::Vec<_, 4>>(),
        ];
        for fields in blocks {
            let (mut plain, mut coded) = ([0; 128], [0; 128]);
            let n = Encoder::new()
                .encode(fields.iter().copied(), &mut plain)
                .unwrap();
            let mut literals = LITERALS;
            let m = Encoder::new()
                .encode_with(fields.iter().copied(), &mut coded, Some(&mut literals))
                .unwrap();
            assert_eq!(plain[..n], coded[..m]);
        }
        // Each literal is used by one of those blocks.
        for (plain, _) in LITERALS.0 {
            assert!(
                HEAD.iter()
                    .chain(status.trailers(&[]).collect::<heapless::Vec<_, 4>>().iter())
                    .any(|f| f.name == *plain || f.value == *plain)
            );
        }
    }

    #[test]
    fn trailers_only_carries_head_status_and_message() {
        let s = Status::new(Code::Unauthenticated, b"no token");
        let extra = [Field::new(b"www-authenticate", b"Bearer")];
        let fields: heapless_fields::Fields = s.trailers_only(&extra).collect();
        assert_eq!(
            fields.names(),
            [
                &b":status"[..],
                b"content-type",
                b"grpc-status",
                b"grpc-message",
                b"www-authenticate"
            ]
        );
        let empty = Status::new(Code::Ok, b"");
        assert_eq!(empty.trailers(&[]).count(), 1);
    }

    #[test]
    fn a_long_message_is_cut_at_a_character() {
        let text = "é".repeat(100);
        let s = Status::new(Code::Internal, text.as_bytes());
        let value = s.trailers(&[]).nth(1).unwrap().value;
        let mut out = [0u8; 512];
        let n = percent::decode(value, &mut out).unwrap();
        assert!(core::str::from_utf8(&out[..n]).is_ok());
        assert!(n <= MAX_STATUS_MESSAGE);
    }

    mod heapless_fields {
        use crate::hpack::Field;
        pub struct Fields(std::vec::Vec<std::vec::Vec<u8>>);
        impl<'a> FromIterator<Field<'a>> for Fields {
            fn from_iter<I: IntoIterator<Item = Field<'a>>>(it: I) -> Self {
                Self(it.into_iter().map(|f| f.name.to_vec()).collect())
            }
        }
        impl Fields {
            pub fn names(&self) -> std::vec::Vec<&[u8]> {
                self.0.iter().map(|v| v.as_slice()).collect()
            }
        }
    }
}
