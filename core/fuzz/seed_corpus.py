#!/usr/bin/env python3
"""Seeds core/fuzz/corpus/hpack_decode with real HPACK streams.

Usage: seed_corpus.py [HPACK_TEST_CASE_DIR]

Writes each seed in the input layout of fuzz_targets/hpack_decode.rs: a limits
byte, then the blocks of one compression context with 0xFF escaped and
separated. The examples of RFC 7541 appendix C are always written; the stories
of hpack-test-case (github.com/http2jp/hpack-test-case) are added when their
folder is given. Does nothing when the corpus folder already has files, so a
corpus grown by earlier runs is kept.
"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus" / "hpack_decode"
LIMITS = b"\xff"  # max_field_size 1024, max_header_list_size 4096
MAX_SEED = 4096  # libFuzzer's default -max_len
CAPACITY = 4096

# RFC 7541 C.3 (requests without Huffman), C.4 (with Huffman) and C.6
# (responses with Huffman under a 256-octet table), one context each. C.6 gets
# the dynamic table size update (3fe101: 256) that a decoder which was told a
# lower maximum must see first (RFC 7541 section 4.2).
RFC_STORIES = {
    "rfc7541-c3": (None, [
        "828684410f7777772e6578616d706c652e636f6d",
        "828684be58086e6f2d6361636865",
        "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
    ]),
    "rfc7541-c4": (None, [
        "828684418cf1e3c2e5f23a6ba0ab90f4ff",
        "828684be5886a8eb10649cbf",
        "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
    ]),
    "rfc7541-c6": (256, [
        "3fe101"
        "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a6"
        "2d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
        "4883640effc1c0bf",
        "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab"
        "77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f"
        "9587316065c003ed4ee5b1063d5007",
    ]),
}


def escape(block: bytes) -> bytes:
    return block.replace(b"\xff", b"\xff\xff")


def table_size_marker(size: int) -> bytes:
    # `FF c` acknowledges min((c - 1) * 32, 4096); round up to reach `size`.
    return bytes([0xFF, min(size, CAPACITY) // 32 + (size % 32 != 0) + 1])


def seed(cases) -> bytes:
    """cases: (table size or None, wire bytes) in order."""
    out = bytearray(LIMITS)
    for i, (size, wire) in enumerate(cases):
        if size is not None:
            out += table_size_marker(size)  # also ends the block before
        elif i > 0:
            out += b"\xff\x00"
        piece = escape(wire)
        if len(out) + len(piece) > MAX_SEED and i > 0:
            break
        out += piece
    return bytes(out)


def main() -> int:
    if CORPUS.is_dir() and any(CORPUS.iterdir()):
        return 0
    CORPUS.mkdir(parents=True, exist_ok=True)
    count = 0
    for name, (size, blocks) in RFC_STORIES.items():
        cases = [(size if i == 0 else None, bytes.fromhex(b)) for i, b in enumerate(blocks)]
        (CORPUS / name).write_bytes(seed(cases))
        count += 1
    if len(sys.argv) > 1:
        root = pathlib.Path(sys.argv[1])
        for story in sorted(root.glob("*/story_*.json")):
            if story.parent.name == "raw-data":
                continue
            doc = json.loads(story.read_text())
            cases = [
                (case.get("header_table_size"), bytes.fromhex(case["wire"]))
                for case in doc.get("cases", [])
            ]
            if cases:
                (CORPUS / f"{story.parent.name}-{story.stem}").write_bytes(seed(cases))
                count += 1
    print(f"seeded {count} inputs into {CORPUS.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
