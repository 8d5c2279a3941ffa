//! HPACK throughput of `mcpwire_core::hpack` next to the crates `hpack` 0.3,
//! `loona-hpack` 0.4 and `httlib-hpack` 0.1, in one run.
//!
//! Groups, each with the functions `mcpwire`, `hpack`, `loona-hpack` and
//! `httlib-hpack`; throughput is counted in header blocks:
//!
//! - `decode_mcp_huffman`, `decode_mcp_plain`: the request header block of an
//!   MCP-over-gRPC call, with every string Huffman-coded or raw.
//! - `encode_mcp`: the same header list, encoded by each crate.
//! - `encode_raw_data`: every case of the hpack-test-case `raw-data` stories.
//! - `decode_raw_data`: the blocks our encoder makes of those stories.
//! - `decode_raw_data_nghttp2`: nghttp2's encodings of the same stories, which
//!   fill the dynamic table.
//!
//! `scripts/bench_ratios.py` turns criterion's estimates into the README table;
//! the byte counts of the encode groups go to `hpack_encoded_bytes.json` in the
//! criterion directory. A short run, as CI does it:
//!
//! ```text
//! cargo bench -p mcpwire-core --bench hpack -- --warm-up-time 1 --measurement-time 2
//! ```
//!
//! (`MCPWIRE_BENCH_QUICK=1` sets the same two durations.) The stories are the
//! hpack-test-case corpus in `tests/data/hpack-test-case.tar.xz`, unpacked in
//! memory as the tests do.
//!
//! Fairness rules:
//!
//! - Decoders of one group read the same bytes, and every crate is first checked
//!   (outside the timed loop) to decode them to the expected header list, so no
//!   bench can time an error path.
//! - Each crate decodes through its cheapest API: `hpack` and `loona-hpack`
//!   through `decode_with_cb`, which lends raw strings instead of collecting
//!   owned pairs; `httlib-hpack` through `decode`, its only one, which drains
//!   its input `Vec`, so the copy of the block it needs is made outside the
//!   timed part. Whatever a crate allocates for a field is also freed in the
//!   timed part.
//! - Encoders start from a fresh state for the MCP block (the first request of
//!   a connection) and keep one state per story for the raw-data stories (a
//!   connection), each with its own strategy.

// A bench must stop loudly when its set-up is wrong; the workspace lints ask
// library code not to.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup, Criterion, SamplingMode, Throughput};
use mcpwire_core::hpack::{Decoder, Encoder, Field};

/// The corpus reader the HPACK tests use.
#[path = "../tests/support/hpack.rs"]
#[allow(dead_code)]
mod corpus;

/// Our decoder, sized for the default `SETTINGS_HEADER_TABLE_SIZE`.
type McpwireDecoder = Decoder<4096>;

/// Room for the Huffman-decoded strings of one block (the largest raw-data
/// block holds 1652 bytes of names and values).
const SCRATCH: usize = 4096;

/// Room for one encoded block.
const OUT: usize = 8192;

/// One header field as the fixtures hold it.
#[derive(Debug, Clone)]
struct Header {
    name: Vec<u8>,
    value: Vec<u8>,
    /// Sent as "never indexed" by the encoders that can.
    sensitive: bool,
}

impl Header {
    fn new(name: &str, value: &str, sensitive: bool) -> Self {
        Self {
            name: name.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            sensitive,
        }
    }

    fn field(&self) -> Field<'_> {
        if self.sensitive {
            Field::sensitive(&self.name, &self.value)
        } else {
            Field::new(&self.name, &self.value)
        }
    }

    fn pair(&self) -> (&[u8], &[u8]) {
        (&self.name, &self.value)
    }
}

/// A decoded header list, in the shape the checks compare.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn pairs(headers: &[Header]) -> Pairs {
    headers
        .iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect()
}

/// The request headers of an MCP `tools/call` over gRPC from a grpc-node client.
fn mcp_request() -> Vec<Header> {
    vec![
        Header::new(":method", "POST", false),
        Header::new(":scheme", "http", false),
        Header::new(":path", "/mcp.zig.transport.v1.Mcp/Call", false),
        Header::new(":authority", "127.0.0.1:50051", false),
        Header::new("content-type", "application/grpc", false),
        Header::new("te", "trailers", false),
        Header::new("grpc-timeout", "9999m", false),
        Header::new("mcp-protocol-version", "2026-07-28", false),
        Header::new("mcp-method", "tools/call", false),
        Header::new("mcp-name", "echo", false),
        Header::new("user-agent", "grpc-node-js/1.14.7", false),
        Header::new(
            "authorization",
            "Bearer mcp_4Qz9Tn7RvX2bLw8KpE5sYc1HdJ6gUaF3mN0e",
            true,
        ),
    ]
}

/// The block every decoder reads, made by a third party (httlib-hpack's
/// encoder, checked below by all four decoders): a full static-table match is
/// an index (`:method POST`, `:scheme http`), anything else a literal without
/// indexing, with the static index of its name where there is one, and
/// `authorization` never indexed. Nothing touches the dynamic table, so one
/// decoder can read the block again and again.
fn mcp_block(headers: &[Header], huffman: bool) -> Vec<u8> {
    use httlib_hpack::Encoder as E;
    let mut enc = E::default();
    let mut out = Vec::new();
    for h in headers {
        let mut flags = E::BEST_FORMAT;
        if huffman {
            flags |= E::HUFFMAN_NAME | E::HUFFMAN_VALUE;
        }
        if h.sensitive {
            flags |= E::NEVER_INDEXED;
        }
        enc.encode((h.name.clone(), h.value.clone(), flags), &mut out)
            .unwrap();
    }
    out
}

// ---------------------------------------------------------------------------
// Decoding, one function per crate. `sink` sees every field; the timed loops
// pass it to `black_box`, the checks collect it.

fn mcpwire_decode(
    dec: &mut McpwireDecoder,
    scratch: &mut [u8],
    block: &[u8],
    sink: impl FnMut(Field<'_>),
) {
    dec.decode(block, scratch, sink).unwrap();
}

fn hpack_decode(dec: &mut hpack::Decoder<'_>, block: &[u8], mut sink: impl FnMut(&[u8], &[u8])) {
    dec.decode_with_cb(block, |n, v| sink(&n, &v)).unwrap();
}

fn loona_decode(
    dec: &mut loona_hpack::Decoder<'_>,
    block: &[u8],
    mut sink: impl FnMut(&[u8], &[u8]),
) {
    dec.decode_with_cb(block, |n, v| sink(&n, &v)).unwrap();
}

/// httlib-hpack consumes `block`; `dst` is left empty for the next call.
fn httlib_decode(
    dec: &mut httlib_hpack::Decoder<'_>,
    block: &mut Vec<u8>,
    dst: &mut Vec<(Vec<u8>, Vec<u8>, u8)>,
    mut sink: impl FnMut(&[u8], &[u8]),
) {
    dec.decode(block, dst).unwrap();
    for (n, v, _flags) in dst.drain(..) {
        sink(&n, &v);
    }
}

/// Decodes one connection: `blocks` in order, through one fresh decoder of
/// each crate, checking each crate's header lists against `want`.
fn check_decoders(what: &str, blocks: &[Vec<u8>], want: &[Pairs]) {
    assert_eq!(blocks.len(), want.len(), "{what}: blocks and header lists");
    let mut scratch = [0u8; SCRATCH];
    let mut ours = McpwireDecoder::new();
    let mut hp = hpack::Decoder::new();
    let mut lo = loona_hpack::Decoder::new();
    let mut ht = httlib_hpack::Decoder::default();
    for (i, (block, want)) in blocks.iter().zip(want).enumerate() {
        let mut got = Pairs::new();
        mcpwire_decode(&mut ours, &mut scratch, block, |f| {
            got.push((f.name.to_vec(), f.value.to_vec()));
        });
        assert_eq!(&got, want, "{what} block {i}: mcpwire");
        let mut got = Pairs::new();
        hpack_decode(&mut hp, block, |n, v| got.push((n.to_vec(), v.to_vec())));
        assert_eq!(&got, want, "{what} block {i}: hpack");
        let mut got = Pairs::new();
        loona_decode(&mut lo, block, |n, v| got.push((n.to_vec(), v.to_vec())));
        assert_eq!(&got, want, "{what} block {i}: loona-hpack");
        let mut got = Pairs::new();
        httlib_decode(&mut ht, &mut block.clone(), &mut Vec::new(), |n, v| {
            got.push((n.to_vec(), v.to_vec()));
        });
        assert_eq!(&got, want, "{what} block {i}: httlib-hpack");
    }
}

/// The four decoders over one header block, repeated.
fn bench_decode_block(c: &mut Criterion, group: &str, block: &[u8]) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    g.bench_function("mcpwire", |b| {
        let mut dec = McpwireDecoder::new();
        let mut scratch = [0u8; SCRATCH];
        b.iter(|| {
            mcpwire_decode(&mut dec, &mut scratch, black_box(block), |f| {
                black_box(f);
            });
        });
    });
    g.bench_function("hpack", |b| {
        let mut dec = hpack::Decoder::new();
        b.iter(|| {
            hpack_decode(&mut dec, black_box(block), |n, v| {
                black_box((n, v));
            });
        });
    });
    g.bench_function("loona-hpack", |b| {
        let mut dec = loona_hpack::Decoder::new();
        b.iter(|| {
            loona_decode(&mut dec, black_box(block), |n, v| {
                black_box((n, v));
            });
        });
    });
    g.bench_function("httlib-hpack", |b| {
        let mut dec = httlib_hpack::Decoder::default();
        b.iter_batched_ref(
            || (block.to_vec(), Vec::with_capacity(16)),
            |(buf, dst)| {
                httlib_decode(&mut dec, buf, dst, |n, v| {
                    black_box((n, v));
                });
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

/// The four decoders over whole stories: one fresh decoder per story, its
/// blocks in order, as on a connection.
fn bench_decode_stories(g: &mut BenchmarkGroup<'_, WallTime>, stories: &[Vec<Vec<u8>>]) {
    g.bench_function("mcpwire", |b| {
        let mut scratch = [0u8; SCRATCH];
        b.iter(|| {
            for story in stories {
                let mut dec = McpwireDecoder::new();
                for block in story {
                    mcpwire_decode(&mut dec, &mut scratch, block, |f| {
                        black_box(f);
                    });
                }
            }
        });
    });
    g.bench_function("hpack", |b| {
        b.iter(|| {
            for story in stories {
                let mut dec = hpack::Decoder::new();
                for block in story {
                    hpack_decode(&mut dec, block, |n, v| {
                        black_box((n, v));
                    });
                }
            }
        });
    });
    g.bench_function("loona-hpack", |b| {
        b.iter(|| {
            for story in stories {
                let mut dec = loona_hpack::Decoder::new();
                for block in story {
                    loona_decode(&mut dec, block, |n, v| {
                        black_box((n, v));
                    });
                }
            }
        });
    });
    g.bench_function("httlib-hpack", |b| {
        b.iter_batched_ref(
            || stories.to_vec(),
            |stories| {
                let mut dst = Vec::with_capacity(64);
                for story in stories.iter_mut() {
                    let mut dec = httlib_hpack::Decoder::default();
                    for block in story.iter_mut() {
                        httlib_decode(&mut dec, block, &mut dst, |n, v| {
                            black_box((n, v));
                        });
                    }
                }
            },
            BatchSize::PerIteration,
        );
    });
}

// ---------------------------------------------------------------------------
// Encoding, one function per crate, each with its own strategy:
// - mcpwire never indexes (its design) and picks raw or Huffman per string;
// - hpack and loona-hpack index every field they have not seen, Huffman never
//   (the only strategy they have);
// - httlib-hpack does what its flags say; we ask for its best representation,
//   Huffman names and values, incremental indexing, and never-indexed for
//   sensitive fields.

fn mcpwire_encode(enc: &mut Encoder, fields: &[Field<'_>], out: &mut [u8]) -> usize {
    enc.encode(fields.iter().copied(), out).unwrap()
}

fn hpack_encode(enc: &mut hpack::Encoder<'_>, headers: &[Header], out: &mut Vec<u8>) {
    enc.encode_into(headers.iter().map(Header::pair), out)
        .unwrap();
}

fn loona_encode(enc: &mut loona_hpack::Encoder<'_>, headers: &[Header], out: &mut Vec<u8>) {
    enc.encode_into(headers.iter().map(Header::pair), out)
        .unwrap();
}

fn httlib_encode(enc: &mut httlib_hpack::Encoder<'_>, headers: &[Header], out: &mut Vec<u8>) {
    use httlib_hpack::Encoder as E;
    for h in headers {
        let mut flags = E::BEST_FORMAT | E::HUFFMAN_NAME | E::HUFFMAN_VALUE;
        flags |= if h.sensitive {
            E::NEVER_INDEXED
        } else {
            E::WITH_INDEXING
        };
        // Its API takes the name and value as owned vectors.
        enc.encode((h.name.clone(), h.value.clone(), flags), out)
            .unwrap();
    }
}

/// One crate's encoder behind one signature: appends a block to the `Vec`.
type Encode = Box<dyn FnMut(&[Header], &mut Vec<u8>)>;
type NewEncoder = fn() -> Encode;

/// Encodes `stories` (one fresh encoder per story) with each crate, checks
/// that loona-hpack decodes every block back, and returns the bytes each crate
/// produced, and the blocks of our encoder.
fn check_encoders(
    what: &str,
    stories: &[Vec<Vec<Header>>],
) -> (BTreeMap<&'static str, usize>, Vec<Vec<Vec<u8>>>) {
    let mut ours_blocks = Vec::new();
    let mut sizes = BTreeMap::new();
    let crates: [(&'static str, NewEncoder); 4] = [
        ("mcpwire", || {
            let mut enc = Encoder::new();
            let mut buf = vec![0u8; OUT];
            Box::new(move |hs: &[Header], out: &mut Vec<u8>| {
                let fields: Vec<Field<'_>> = hs.iter().map(Header::field).collect();
                let n = mcpwire_encode(&mut enc, &fields, &mut buf);
                out.extend_from_slice(&buf[..n]);
            })
        }),
        ("hpack", || {
            let mut enc = hpack::Encoder::new();
            Box::new(move |hs: &[Header], out: &mut Vec<u8>| hpack_encode(&mut enc, hs, out))
        }),
        ("loona-hpack", || {
            let mut enc = loona_hpack::Encoder::new();
            Box::new(move |hs: &[Header], out: &mut Vec<u8>| loona_encode(&mut enc, hs, out))
        }),
        ("httlib-hpack", || {
            let mut enc = httlib_hpack::Encoder::default();
            Box::new(move |hs: &[Header], out: &mut Vec<u8>| httlib_encode(&mut enc, hs, out))
        }),
    ];
    for (name, new_encoder) in crates {
        let mut total = 0;
        for (s, story) in stories.iter().enumerate() {
            let mut encode = new_encoder();
            let mut check = loona_hpack::Decoder::new();
            let mut blocks = Vec::new();
            for (i, headers) in story.iter().enumerate() {
                let mut block = Vec::new();
                encode(headers, &mut block);
                let got = check.decode(&block).unwrap();
                assert_eq!(got, pairs(headers), "{what} story {s} block {i}: {name}");
                total += block.len();
                blocks.push(block);
            }
            if name == "mcpwire" {
                ours_blocks.push(blocks);
            }
        }
        sizes.insert(name, total);
    }
    (sizes, ours_blocks)
}

/// The four encoders over whole stories: one fresh encoder per story.
fn bench_encode_stories(g: &mut BenchmarkGroup<'_, WallTime>, stories: &[Vec<Vec<Header>>]) {
    let fields: Vec<Vec<Vec<Field<'_>>>> = stories
        .iter()
        .map(|s| {
            s.iter()
                .map(|hs| hs.iter().map(Header::field).collect())
                .collect()
        })
        .collect();
    g.bench_function("mcpwire", |b| {
        let mut out = [0u8; OUT];
        b.iter(|| {
            for story in &fields {
                let mut enc = Encoder::new();
                for block in story {
                    let n = mcpwire_encode(&mut enc, block, &mut out);
                    black_box(&out[..n]);
                }
            }
        });
    });
    g.bench_function("hpack", |b| {
        let mut out = Vec::with_capacity(OUT);
        b.iter(|| {
            for story in stories {
                let mut enc = hpack::Encoder::new();
                for block in story {
                    out.clear();
                    hpack_encode(&mut enc, block, &mut out);
                    black_box(&out);
                }
            }
        });
    });
    g.bench_function("loona-hpack", |b| {
        let mut out = Vec::with_capacity(OUT);
        b.iter(|| {
            for story in stories {
                let mut enc = loona_hpack::Encoder::new();
                for block in story {
                    out.clear();
                    loona_encode(&mut enc, block, &mut out);
                    black_box(&out);
                }
            }
        });
    });
    g.bench_function("httlib-hpack", |b| {
        let mut out = Vec::with_capacity(OUT);
        b.iter(|| {
            for story in stories {
                let mut enc = httlib_hpack::Encoder::default();
                for block in story {
                    out.clear();
                    httlib_encode(&mut enc, block, &mut out);
                    black_box(&out);
                }
            }
        });
    });
}

// ---------------------------------------------------------------------------
// The groups.

fn bench_mcp(c: &mut Criterion, sizes: &mut BTreeMap<String, BTreeMap<&'static str, usize>>) {
    let headers = mcp_request();
    let want = vec![pairs(&headers)];
    let huffman = mcp_block(&headers, true);
    let plain = mcp_block(&headers, false);
    check_decoders("MCP Huffman", std::slice::from_ref(&huffman), &want);
    check_decoders("MCP plain", std::slice::from_ref(&plain), &want);
    // The block marks `authorization` never indexed; ours must say so.
    let mut dec = McpwireDecoder::new();
    let mut scratch = [0u8; SCRATCH];
    let mut flags = Vec::new();
    for block in [&huffman, &plain] {
        mcpwire_decode(&mut dec, &mut scratch, block, |f| {
            flags.push(f.never_indexed)
        });
    }
    let want_flags: Vec<bool> = headers.iter().map(|h| h.sensitive).collect();
    assert_eq!(flags, [want_flags.clone(), want_flags].concat());

    bench_decode_block(c, "decode_mcp_huffman", &huffman);
    bench_decode_block(c, "decode_mcp_plain", &plain);

    let (bytes, _) = check_encoders("MCP", &[vec![headers.clone()]]);
    eprintln!(
        "MCP request block: {} bytes Huffman-coded, {} plain; encoded: {bytes:?}",
        huffman.len(),
        plain.len()
    );
    sizes.insert("encode_mcp".into(), bytes);

    let fields: Vec<Field<'_>> = headers.iter().map(Header::field).collect();
    let mut g = c.benchmark_group("encode_mcp");
    g.throughput(Throughput::Elements(1));
    g.bench_function("mcpwire", |b| {
        let mut out = [0u8; OUT];
        b.iter_batched_ref(
            Encoder::new,
            |enc| {
                let n = mcpwire_encode(enc, black_box(&fields), &mut out);
                black_box(&out[..n]);
            },
            BatchSize::SmallInput,
        );
    });
    g.bench_function("hpack", |b| {
        b.iter_batched_ref(
            || (hpack::Encoder::new(), Vec::with_capacity(OUT)),
            |(enc, out)| {
                hpack_encode(enc, black_box(&headers), out);
                black_box(out);
            },
            BatchSize::SmallInput,
        );
    });
    g.bench_function("loona-hpack", |b| {
        b.iter_batched_ref(
            || (loona_hpack::Encoder::new(), Vec::with_capacity(OUT)),
            |(enc, out)| {
                loona_encode(enc, black_box(&headers), out);
                black_box(out);
            },
            BatchSize::SmallInput,
        );
    });
    g.bench_function("httlib-hpack", |b| {
        b.iter_batched_ref(
            || (httlib_hpack::Encoder::default(), Vec::with_capacity(OUT)),
            |(enc, out)| {
                httlib_encode(enc, black_box(&headers), out);
                black_box(out);
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

/// The `story_*.json` files of one corpus folder, in order, as parsed JSON.
fn read_stories(folder: &str) -> Vec<serde_json::Value> {
    let files = corpus::corpus()
        .folders
        .get(folder)
        .unwrap_or_else(|| panic!("hpack-test-case: no folder {folder}"));
    assert!(!files.is_empty(), "hpack-test-case {folder}: no stories");
    files
        .values()
        .map(|text| serde_json::from_slice(text).unwrap())
        .collect()
}

/// The header lists of a story's cases.
fn cases(story: &serde_json::Value) -> Vec<Vec<Header>> {
    story["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            case["headers"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|h| h.as_object().unwrap())
                .map(|(n, v)| Header::new(n, v.as_str().unwrap(), false))
                .collect()
        })
        .collect()
}

/// The `wire` blocks of a story's cases.
fn wires(story: &serde_json::Value) -> Vec<Vec<u8>> {
    story["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let hex = case["wire"].as_str().unwrap().as_bytes();
            hex.chunks(2)
                .map(|d| u8::from_str_radix(std::str::from_utf8(d).unwrap(), 16).unwrap())
                .collect()
        })
        .collect()
}

/// An iteration takes milliseconds here, up to seconds for the slowest crates:
/// flat sampling and the fewest samples criterion allows keep a run short.
fn story_group<'c>(
    c: &'c mut Criterion,
    name: &str,
    blocks: usize,
) -> BenchmarkGroup<'c, WallTime> {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(blocks as u64));
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g
}

fn bench_raw_data(c: &mut Criterion, sizes: &mut BTreeMap<String, BTreeMap<&'static str, usize>>) {
    let raw = read_stories("raw-data");
    let stories: Vec<Vec<Vec<Header>>> = raw.iter().map(cases).collect();
    let blocks: usize = stories.iter().map(Vec::len).sum();
    let fields: usize = stories.iter().flatten().map(Vec::len).sum();
    eprintln!(
        "raw-data: {} stories, {blocks} blocks, {fields} fields",
        stories.len()
    );

    let (bytes, ours) = check_encoders("raw-data", &stories);
    eprintln!("raw-data encoded: {bytes:?}");
    sizes.insert("encode_raw_data".into(), bytes);
    let mut g = story_group(c, "encode_raw_data", blocks);
    bench_encode_stories(&mut g, &stories);
    g.finish();

    // Every crate decodes the blocks of our encoder, the same bytes for all
    // (rather than each its own encoder's, which differ in size and in
    // Huffman use). They never touch the dynamic table; the next group does.
    let want: Vec<Vec<Pairs>> = stories
        .iter()
        .map(|s| s.iter().map(|hs| pairs(hs)).collect())
        .collect();
    for (s, (story, want)) in ours.iter().zip(&want).enumerate() {
        check_decoders(
            &format!("raw-data story {s} (mcpwire-encoded)"),
            story,
            want,
        );
    }
    let mut g = story_group(c, "decode_raw_data", blocks);
    bench_decode_stories(&mut g, &ours);
    g.finish();

    // nghttp2's encodings of the same stories: Huffman and dynamic-table
    // references, one context per story, again the same bytes for all.
    let nghttp2 = read_stories("nghttp2");
    let nghttp2: Vec<Vec<Vec<u8>>> = nghttp2.iter().map(wires).collect();
    assert_eq!(nghttp2.len(), want.len(), "nghttp2 and raw-data stories");
    let blocks: usize = nghttp2.iter().map(Vec::len).sum();
    for (s, (story, want)) in nghttp2.iter().zip(&want).enumerate() {
        check_decoders(
            &format!("raw-data story {s} (nghttp2-encoded)"),
            story,
            want,
        );
    }
    let mut g = story_group(c, "decode_raw_data_nghttp2", blocks);
    bench_decode_stories(&mut g, &nghttp2);
    g.finish();
}

/// Where criterion writes, found as criterion finds it when cargo runs the
/// bench in this workspace.
fn criterion_dir() -> PathBuf {
    if let Some(home) = env::var_os("CRITERION_HOME") {
        return home.into();
    }
    let target = env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    target.join("criterion")
}

fn main() {
    // Without rayon (default features off) criterion's bootstrap is single
    // threaded, and 100 000 resamples cost more than a short measurement;
    // 10 000 give the same point estimates. `--nresamples` still overrides.
    let mut c = Criterion::default().nresamples(10_000);
    if env::var_os("MCPWIRE_BENCH_QUICK").is_some() {
        c = c
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(2));
    }
    let mut c = c.configure_from_args();

    let mut sizes = BTreeMap::new();
    bench_mcp(&mut c, &mut sizes);
    bench_raw_data(&mut c, &mut sizes);

    let path = criterion_dir().join("hpack_encoded_bytes.json");
    let json = serde_json::to_string_pretty(&sizes).unwrap();
    if let Err(e) = fs::create_dir_all(criterion_dir()).and_then(|()| fs::write(&path, json)) {
        eprintln!("{}: {e}", path.display());
    }
    c.final_summary();
}
