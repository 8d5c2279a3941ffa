//! Our encoder against an independent decoder: every raw-data story of the
//! hpack-test-case corpus is encoded by us, written out as stories in the
//! corpus format, and decoded by Python's `hpack` package through
//! `scripts/hpack_oracle.py`.
//!
//! Python is `$MCPWIRE_PYTHON` (with `hpack` installed). Without it the
//! test prints a SKIPPED line and passes, unless
//! `MCPWIRE_REQUIRE_REFERENCE=1`. The corpus is in the repository
//! (`tests/data`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use mcpwire_core::hpack::{Encoder, Field};
use serde_json::{Value, json};
use support::hpack::{Story, hex_encode, is_sensitive_name};

const PYTHON_ENV: &str = "MCPWIRE_PYTHON";

/// Settings the second pass of every story goes through, one per case in
/// turn: lowered, zero, raised again. Python checks every size update we
/// emit against the setting in force.
const TABLE_SIZES: [usize; 5] = [4096, 1365, 0, 2730, 4096];

/// Encodes one story into the corpus format. With `resize`, each case
/// first applies the next setting of [`TABLE_SIZES`] to the encoder and
/// records it as the case's `header_table_size`.
fn encode_story(story: &Story, resize: bool, extra: &[(&[u8], &[u8])]) -> (Value, usize) {
    let mut enc = Encoder::new();
    let mut out = vec![0u8; 1 << 16];
    let sensitive = |n: &[u8]| n == b"cookie" || n == b"set-cookie";
    let mut cases = Vec::new();
    for (i, case) in story.cases.iter().enumerate() {
        let mut headers: Vec<(&[u8], &[u8])> = case
            .headers
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
            .collect();
        headers.extend_from_slice(extra);
        let fields: Vec<Field<'_>> = headers
            .iter()
            .map(|&(n, v)| {
                if sensitive(n) {
                    Field::sensitive(n, v)
                } else {
                    Field::new(n, v)
                }
            })
            .collect();
        let mut json_case = json!({ "seqno": i });
        if resize {
            let size = TABLE_SIZES[i % TABLE_SIZES.len()];
            enc.set_max_table_size(size);
            json_case["header_table_size"] = json!(size);
        }
        let n = enc
            .encode(fields.iter().copied(), &mut out)
            .unwrap_or_else(|e| panic!("{} case {i}: {e:?}", story.name()));
        json_case["wire"] = json!(hex_encode(&out[..n]));
        json_case["headers"] = Value::Array(
            headers
                .iter()
                .map(|&(n, v)| {
                    // The corpus holds UTF-8 text; our fields are bytes.
                    let name = std::str::from_utf8(n).expect("corpus names are UTF-8");
                    let value = std::str::from_utf8(v).expect("corpus values are UTF-8");
                    json!({ name: value })
                })
                .collect(),
        );
        json_case["never_indexed"] = Value::Array(
            headers
                .iter()
                .enumerate()
                .filter(|(_, (n, _))| sensitive(n) || is_sensitive_name(n))
                .map(|(k, _)| json!(k))
                .collect(),
        );
        cases.push(json_case);
    }
    let count = cases.len();
    (
        json!({ "description": "mcpwire encoder (never indexes)", "cases": cases }),
        count,
    )
}

fn oracle_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/hpack_oracle.py")
}

#[test]
fn python_hpack_decodes_our_encoding_of_raw_data() {
    let Some(python) = std::env::var_os(PYTHON_ENV) else {
        support::hpack::skip(&format!(
            "{PYTHON_ENV} is not set (a Python with the `hpack` package decodes our blocks)"
        ));
        return;
    };
    let files = support::hpack::corpus().stories("raw-data");
    assert!(!files.is_empty(), "raw-data: no stories");

    let dir = std::env::temp_dir().join(format!("mcpwire-hpack-python-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (mut stories, mut cases) = (0, 0);
    let write = |name: String, story: &Value| {
        let text = serde_json::to_string_pretty(story).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    };
    for (k, story) in files.iter().enumerate() {
        // Plain, then with table size changes and credentials added.
        let (plain, n) = encode_story(story, false, &[]);
        write(format!("story_{k:02}.json"), &plain);
        let extra: [(&[u8], &[u8]); 2] = [
            (b"authorization", b"Bearer mF_9.B5f-4.1JqM"),
            (b"x-api-key", b"k-123"),
        ];
        let (resized, m) = encode_story(story, true, &extra);
        write(format!("story_{k:02}_resized.json"), &resized);
        stories += 2;
        cases += n + m;
    }
    println!(
        "python oracle: {stories} stories, {cases} cases written to {}",
        dir.display()
    );

    let output = Command::new(&python)
        .arg(oracle_script())
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", Path::new(&python).display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(
        output.status.success(),
        "Python's hpack disagrees with our encoder ({}); stories kept in {}",
        output.status,
        dir.display()
    );
    // The oracle's own count must match what we wrote.
    let expected = format!("{stories} stories, {cases} cases, 0 mismatches");
    assert!(
        stdout.contains(&expected),
        "oracle summary does not say {expected:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
