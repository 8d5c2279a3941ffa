#!/usr/bin/env python3
"""Decode HPACK stories with Python's `hpack` package and compare.

Usage: hpack_oracle.py DIR

DIR holds story*.json files in the format of http2jp/hpack-test-case:
{"cases": [{"wire": "<hex>", "headers": [{"name": "value"}, ...],
            "header_table_size": 4096?, "never_indexed": [0, 3]?}, ...]}

Every story gets one hpack.Decoder, shared by its cases in order. Each decoded
list must equal `headers` (order and bytes; names and values are compared as
their UTF-8 bytes). When `never_indexed` is present, exactly the fields at
those positions must come out as never-indexed literals.

Prints the counts, and every mismatch; exits 1 on any mismatch, 2 on bad use.
"""

import json
import pathlib
import sys

import hpack


def expected_headers(case):
    out = []
    for entry in case["headers"]:
        if len(entry) != 1:
            raise ValueError(f"header entry with {len(entry)} keys: {entry!r}")
        ((name, value),) = entry.items()
        out.append((name.encode("utf-8"), value.encode("utf-8")))
    return out


def check_story(path):
    """Returns (cases, list of mismatch messages)."""
    story = json.loads(path.read_text(encoding="utf-8"))
    decoder = hpack.Decoder(max_header_list_size=1 << 30)
    problems = []
    cases = story["cases"]
    for number, case in enumerate(cases):
        where = f"{path.name} case {case.get('seqno', number)}"
        size = case.get("header_table_size")
        if size is not None and size != decoder.max_allowed_table_size:
            decoder.max_allowed_table_size = size
        try:
            got = decoder.decode(bytes.fromhex(case["wire"]), raw=True)
        except Exception as err:  # every hpack error is a mismatch
            problems.append(f"{where}: decode failed: {type(err).__name__}: {err}")
            # The decoder's state is now unknown: the rest of the story is moot.
            break
        want = expected_headers(case)
        pairs = [(bytes(n), bytes(v)) for n, v in got]
        if pairs != want:
            problems.append(f"{where}: decoded {pairs!r}, expected {want!r}")
            continue
        flagged = case.get("never_indexed")
        if flagged is not None:
            got_flags = [i for i, f in enumerate(got) if not f.indexable]
            if got_flags != sorted(flagged):
                problems.append(
                    f"{where}: never-indexed positions {got_flags}, expected {sorted(flagged)}"
                )
    return len(cases), problems


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = pathlib.Path(argv[1])
    stories = sorted(p for p in folder.glob("story*.json") if p.is_file())
    if not stories:
        print(f"hpack_oracle: no story*.json in {folder}", file=sys.stderr)
        return 2
    total_cases = 0
    problems = []
    for path in stories:
        cases, story_problems = check_story(path)
        total_cases += cases
        problems.extend(story_problems)
    for line in problems:
        print(f"MISMATCH {line}")
    print(
        f"hpack_oracle: python hpack {getattr(hpack, '__version__', '?')}: "
        f"{len(stories)} stories, {total_cases} cases, {len(problems)} mismatches"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
