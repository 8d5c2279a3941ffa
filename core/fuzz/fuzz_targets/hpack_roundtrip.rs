//! `hpack_roundtrip`: arbitrary field lists, encoded by `Encoder` and decoded
//! by one `Decoder<4096>`, must come back byte for byte, in order, with the
//! never-indexed flag kept (and set for credentials by name).
//!
//! Before a block, both sides may apply a new SETTINGS_HEADER_TABLE_SIZE, as
//! a connection would after the SETTINGS acknowledgement: the size update the
//! encoder then sends must satisfy the decoder.
//!
//! Each block is first encoded into a buffer of the fuzzer's chosen length.
//! If that is too small, `needed` must be larger than it and equal to
//! `encoded_len`, and encoding again into exactly `needed` bytes must succeed
//! with that length: a failed call leaves the encoder as it was.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::hpack::{Decoder, EncodeError, Encoder, Field, Limits};

#[derive(Arbitrary, Debug)]
struct Input {
    /// Length of the first output buffer tried for each block.
    first_buffer: u16,
    blocks: Vec<Block>,
}

#[derive(Arbitrary, Debug)]
struct Block {
    /// A SETTINGS_HEADER_TABLE_SIZE acknowledged before this block.
    table_size: Option<u16>,
    fields: Vec<InputField>,
}

#[derive(Arbitrary, Debug)]
struct InputField {
    name: Vec<u8>,
    value: Vec<u8>,
    sensitive: bool,
}

impl InputField {
    fn field(&self) -> Field<'_> {
        if self.sensitive {
            Field::sensitive(&self.name, &self.value)
        } else {
            Field::new(&self.name, &self.value)
        }
    }

    /// What the decoder must hand back: the encoder never indexes
    /// credentials, whatever the caller asked.
    fn expected(&self) -> Field<'_> {
        let credential = matches!(&self.name[..], b"authorization" | b"proxy-authorization");
        Field {
            never_indexed: self.sensitive || credential,
            ..self.field()
        }
    }
}

fuzz_target!(|input: Input| {
    let mut encoder = Encoder::new();
    // Far above anything a fuzz input can hold: no size error is expected.
    let mut decoder = Decoder::<4096>::with_limits(Limits {
        max_field_size: 1 << 20,
        max_header_list_size: 1 << 24,
    });

    for block in &input.blocks {
        if let Some(size) = block.table_size {
            encoder.set_max_table_size(usize::from(size));
            decoder.set_max_table_size(usize::from(size));
        }
        let fields = || block.fields.iter().map(InputField::field);
        let expected_len = encoder.encoded_len(fields());

        let mut out = vec![0u8; usize::from(input.first_buffer)];
        let len = match encoder.encode(fields(), &mut out) {
            Ok(len) => len,
            Err(EncodeError::BufferTooSmall { needed }) => {
                assert!(
                    needed > out.len(),
                    "needed {needed} fits the {}-byte buffer",
                    out.len()
                );
                assert_eq!(needed, expected_len);
                out = vec![0u8; needed];
                encoder
                    .encode(fields(), &mut out)
                    .unwrap_or_else(|err| panic!("{err} with the {needed} bytes asked for"))
            }
            Err(err) => panic!("encoding failed: {err}"),
        };
        assert_eq!(len, expected_len);
        assert!(len <= out.len());

        // A name and a value share the scratch buffer; Huffman codes are at
        // least 5 bits long, so no string decodes to more than 8/5 of it.
        let mut scratch = vec![0u8; len * 8 / 5 + 8];
        let mut expected = block.fields.iter().map(InputField::expected);
        decoder
            .decode(&out[..len], &mut scratch, |got| {
                let want = expected.next().expect("more fields decoded than encoded");
                assert_eq!(got, want);
            })
            .unwrap_or_else(|err| panic!("decoding our own block: {err}"));
        assert!(
            expected.next().is_none(),
            "fewer fields decoded than encoded"
        );
    }
});
