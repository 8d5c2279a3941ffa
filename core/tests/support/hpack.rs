//! Helpers shared by the HPACK integration tests: the reference corpus
//! (carried in the repository, unpacked in memory), how its stories are read,
//! and owned copies of decoded fields.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use mcpwire_core::hpack::{DecodeError, Decoder, huffman, integer};
use mcpwire_core::records::Records;

/// Set to `1` to turn every "reference peer missing" skip into a failure
/// (CI sets it, so that a missing peer cannot silently disable a test).
pub const REQUIRE_ENV: &str = "MCPWIRE_REQUIRE_REFERENCE";

/// The hpack-test-case corpus (github.com/http2jp/hpack-test-case, MIT, see
/// `tests/data/hpack-test-case.LICENSE`), as a tar.xz in the repository so
/// that a fresh clone runs every corpus test.
pub const CORPUS_ARCHIVE: &str = "tests/data/hpack-test-case.tar.xz";

pub fn reference_required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

/// Skips the calling test with a plain message, or fails it when
/// [`REQUIRE_ENV`] is set.
pub fn skip(message: &str) {
    assert!(
        !reference_required(),
        "{message} (and {REQUIRE_ENV}=1 requires it)"
    );
    println!("SKIPPED: {message}");
}

/// The corpus: each folder (`raw-data` and one per implementation) with its
/// `story_*.json` files, by name.
#[derive(Debug)]
pub struct Corpus {
    pub folders: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
}

impl Corpus {
    /// The implementation folders (every folder but `raw-data`), by name.
    pub fn implementation_folders(&self) -> Vec<&str> {
        self.folders
            .keys()
            .map(String::as_str)
            .filter(|n| *n != "raw-data")
            .collect()
    }

    /// The stories of one folder, in file-name order.
    pub fn stories(&self, folder: &str) -> Vec<Story> {
        let files = self
            .folders
            .get(folder)
            .unwrap_or_else(|| panic!("hpack-test-case: no folder {folder}"));
        files
            .iter()
            .map(|(file, text)| load_story(&format!("{folder}/{file}"), text))
            .collect()
    }
}

/// The corpus, unpacked once per test binary (under a second).
pub fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(|| unpack(&Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS_ARCHIVE)))
}

fn unpack(archive: &Path) -> Corpus {
    let packed =
        std::fs::read(archive).unwrap_or_else(|e| panic!("reading {}: {e}", archive.display()));
    let mut tar = Vec::new();
    lzma_rs::xz_decompress(&mut &packed[..], &mut tar)
        .unwrap_or_else(|e| panic!("unpacking {}: {e:?}", archive.display()));
    let mut folders: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    let mut entries = tar::Archive::new(&tar[..]);
    for entry in entries.entries().expect("tar entries") {
        let mut entry = entry.expect("tar entry");
        let path = entry.path().expect("tar path").into_owned();
        // hpack-test-case/<folder>/story_NN.json
        let parts: Vec<String> = path
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let [_, folder, file] = parts.as_slice() else {
            continue;
        };
        if !(file.starts_with("story") && file.ends_with(".json")) {
            continue;
        }
        let mut text = Vec::new();
        entry.read_to_end(&mut text).expect("tar file");
        folders
            .entry(folder.clone())
            .or_default()
            .insert(file.clone(), text);
    }
    assert!(
        folders.contains_key("raw-data") && folders.len() > 1,
        "{}: no raw-data or no implementation folders",
        archive.display()
    );
    Corpus { folders }
}

/// One case of a story.
#[derive(Debug, Clone)]
pub struct Case {
    pub seqno: Option<u64>,
    /// SETTINGS_HEADER_TABLE_SIZE acknowledged just before this case, when the
    /// case says so (`null` counts as absent).
    pub header_table_size: Option<usize>,
    /// The header block; absent in `raw-data`.
    pub wire: Option<Vec<u8>>,
    /// The header list, names and values as their UTF-8 bytes.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A story: cases that share one compression context.
#[derive(Debug, Clone)]
pub struct Story {
    /// `folder/story_NN.json`.
    pub name: String,
    pub cases: Vec<Case>,
}

impl Story {
    pub fn name(&self) -> String {
        self.name.clone()
    }
}

pub fn load_story(name: &str, text: &[u8]) -> Story {
    let json: serde_json::Value =
        serde_json::from_slice(text).unwrap_or_else(|e| panic!("parsing {name}: {e}"));
    let cases = json["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: no `cases` array"))
        .iter()
        .enumerate()
        .map(|(i, case)| parse_case(case).unwrap_or_else(|e| panic!("{name} case {i}: {e}")))
        .collect();
    Story {
        name: name.to_owned(),
        cases,
    }
}

fn parse_case(case: &serde_json::Value) -> Result<Case, String> {
    let header_table_size = match &case["header_table_size"] {
        serde_json::Value::Null => None,
        v => Some(
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("bad header_table_size {v}"))?,
        ),
    };
    let wire = match &case["wire"] {
        serde_json::Value::Null => None,
        v => Some(hex_decode(
            v.as_str()
                .ok_or_else(|| format!("wire is not a string: {v}"))?,
        )?),
    };
    let headers = case["headers"]
        .as_array()
        .ok_or("no `headers` array")?
        .iter()
        .map(|entry| {
            let map = entry.as_object().ok_or("header entry is not an object")?;
            if map.len() != 1 {
                return Err(format!("header entry with {} keys", map.len()));
            }
            let (name, value) = map.iter().next().ok_or("empty header entry")?;
            let value = value.as_str().ok_or("header value is not a string")?;
            Ok((name.as_bytes().to_vec(), value.as_bytes().to_vec()))
        })
        .collect::<Result<_, String>>()?;
    Ok(Case {
        seqno: case["seqno"].as_u64(),
        header_table_size,
        wire,
        headers,
    })
}

pub fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits: {s:?}"));
    }
    digits
        .chunks(2)
        .map(|pair| {
            let text = std::str::from_utf8(pair).map_err(|e| e.to_string())?;
            u8::from_str_radix(text, 16).map_err(|e| format!("bad hex {text:?}: {e}"))
        })
        .collect()
}

/// Hex with optional spaces, as the RFC prints it; panics on a typo.
pub fn hex(s: &str) -> Vec<u8> {
    hex_decode(s).unwrap_or_else(|e| panic!("{e}"))
}

pub fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A decoded field, copied out of the callback.
#[derive(Clone, PartialEq, Eq)]
pub struct OwnedField {
    pub name: Vec<u8>,
    pub value: Vec<u8>,
    pub never_indexed: bool,
}

impl std::fmt::Debug for OwnedField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}{}",
            String::from_utf8_lossy(&self.name),
            String::from_utf8_lossy(&self.value),
            if self.never_indexed {
                " (never indexed)"
            } else {
                ""
            }
        )
    }
}

/// Decodes one block, returning every field the decoder handed out (also
/// when it then reports an error) and the result.
pub fn decode_block<const T: usize, B: Records<u8>>(
    dec: &mut Decoder<T, B>,
    block: &[u8],
    scratch: &mut [u8],
) -> (Vec<OwnedField>, Result<(), DecodeError>) {
    let mut fields = Vec::new();
    let result = dec.decode(block, scratch, |f| {
        fields.push(OwnedField {
            name: f.name.to_vec(),
            value: f.value.to_vec(),
            never_indexed: f.never_indexed,
        });
    });
    (fields, result)
}

/// Decodes one block that must decode; returns its fields.
pub fn decode_ok<const T: usize, B: Records<u8>>(
    dec: &mut Decoder<T, B>,
    block: &[u8],
) -> Vec<OwnedField> {
    let mut scratch = vec![0u8; 1 << 16];
    let (fields, result) = decode_block(dec, block, &mut scratch);
    if let Err(e) = result {
        panic!(
            "decoding {} failed with {e:?} after {fields:?}",
            hex_encode(block)
        );
    }
    fields
}

/// Name/value pairs, for comparisons that ignore the never-indexed flag.
pub fn pairs(fields: &[OwnedField]) -> Vec<(Vec<u8>, Vec<u8>)> {
    fields
        .iter()
        .map(|f| (f.name.clone(), f.value.clone()))
        .collect()
}

/// The dynamic table, newest entry first (HPACK index 62 first).
pub fn table<const T: usize, B: Records<u8>>(dec: &Decoder<T, B>) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..dec.table_len())
        .map(|i| {
            let (name, value) = dec
                .table_entry(i)
                .unwrap_or_else(|| panic!("table_entry({i}) is None below table_len()"));
            (name.to_vec(), value.to_vec())
        })
        .collect()
}

/// RFC 7541 §4.1 size of an entry.
pub fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// Names our encoder always sends as never indexed, whatever the field says
/// (credentials, RFC 7541 §7.1.3).
pub fn is_sensitive_name(name: &[u8]) -> bool {
    name == b"authorization" || name == b"proxy-authorization"
}

/// Checks the decoder's table bookkeeping against its entries.
pub fn check_table_invariants<const T: usize, B: Records<u8>>(dec: &Decoder<T, B>) {
    let entries = table(dec);
    let sum: usize = entries.iter().map(|(n, v)| entry_size(n, v)).sum();
    assert_eq!(dec.table_size(), sum, "table_size() vs its entries");
    assert!(
        dec.table_size() <= dec.table_capacity(),
        "table size {} above the encoder's size {}",
        dec.table_size(),
        dec.table_capacity()
    );
    assert!(
        dec.table_capacity() <= T,
        "table capacity above the storage"
    );
    assert!(
        dec.max_table_size() <= T,
        "acknowledged maximum above the storage"
    );
    assert!(
        dec.table_entry(dec.table_len()).is_none(),
        "table_entry(table_len()) must be None"
    );
}

/// Byte-string pairs from text pairs.
pub fn list(items: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    items
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// Builds header blocks representation by representation (the integer
/// encoder is checked against RFC 7541 C.1 in `hpack_rfc7541.rs`).
#[derive(Debug, Default, Clone)]
pub struct Block(pub Vec<u8>);

impl Block {
    pub fn int(mut self, value: usize, prefix: u8, flags: u8) -> Self {
        let mut buf = [0u8; 16];
        let n = integer::encode(value, prefix, flags, &mut buf).unwrap();
        self.0.extend_from_slice(&buf[..n]);
        self
    }
    pub fn string(self, s: &[u8]) -> Self {
        let mut b = self.int(s.len(), 7, 0);
        b.0.extend_from_slice(s);
        b
    }
    pub fn huffman_string(self, s: &[u8]) -> Self {
        let mut buf = vec![0u8; huffman::encoded_len(s)];
        let n = huffman::encode(s, &mut buf).unwrap();
        let mut b = self.int(n, 7, 0x80);
        b.0.extend_from_slice(&buf[..n]);
        b
    }
    /// A string literal, raw or Huffman-coded.
    pub fn str(self, s: &[u8], huffman: bool) -> Self {
        if huffman {
            self.huffman_string(s)
        } else {
            self.string(s)
        }
    }
    /// Indexed header field (§6.1).
    pub fn indexed(self, index: usize) -> Self {
        self.int(index, 7, 0x80)
    }
    /// Literal with incremental indexing, new name (§6.2.1).
    pub fn incremental(self, name: &[u8], value: &[u8]) -> Self {
        self.int(0, 6, 0x40).string(name).string(value)
    }
    /// Literal with incremental indexing, indexed name (§6.2.1).
    pub fn incremental_indexed_name(self, index: usize, value: &[u8]) -> Self {
        self.int(index, 6, 0x40).string(value)
    }
    /// Literal without indexing, indexed name (§6.2.2).
    pub fn plain_indexed_name(self, index: usize, value: &[u8]) -> Self {
        self.int(index, 4, 0x00).string(value)
    }
    /// Dynamic table size update (§6.3).
    pub fn size_update(self, size: usize) -> Self {
        self.int(size, 5, 0x20)
    }
}
