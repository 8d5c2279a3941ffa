#!/usr/bin/env bash
# MCP over the UART of a QEMU board: the firmware tests/firmware/qemu-stdio
# (mps2-an386, Cortex-M4; the device tools of examples/device-tools on
# mcpwire-embassy's stdio binding over UART0) is launched by MCP clients as
# a local stdio server:
#
#   qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nodefaults -display none \
#       -monitor none -serial stdio -semihosting-config enable=on,target=native \
#       -kernel target/thumbv7em-none-eabihf/release/mcpwire-qemu-stdio
#
#   ./scripts/qemu-stdio.sh [scenario...]
#
# Builds the firmware (release: opt-level z, fat LTO, as the board example
# ships; set MCPWIRE_NO_BUILD=1 to use the ELF as it is), checks that
# nothing in it allocates, prints its flash (text + data) and static RAM
# (data + bss: every task, buffer and engine), then runs the official
# Python SDK's stdio client (mcp 2.3.0, tests/stdio/qemu_client.py)
# against it. Scenarios: discover, tools (list; read_sensor,
# toggle_output), progress (slow_task's notifications), cancel
# (notifications/cancelled stops the tool and frees its handler),
# tool-error, flood (raw pipes: stdout holds only JSON-RPC lines, and a
# burst written at once loses no octet).
#
# Then mcpwire's own stdio client, `mcpwire call --stdio -v ... -- QEMU`
# (built like scripts/interop-stdio.sh builds it: release, the test
# tools' profile; MCPWIRE_NO_BUILD=1 uses target/release/mcpwire as it
# is), one QEMU per call: mcpwire-list (the three tool names; -v reports
# the modern era, no fallback), mcpwire-read-sensor, mcpwire-progress
# (slow_task's progress lines on stderr, then its result), mcpwire-cancel
# (slow_task of 50 steps 100 ms apart with --progress and --timeout-ms
# 500, through tests/stdio/wire_tap.py, which records the wire: the call
# fails with DEADLINE_EXCEEDED, the client sends notifications/cancelled
# for it, and the board sends nothing more: no progress, no response in
# the 2 s before it is stopped). QEMU does not exit at the end of its
# stdin: for each call the client closes the stdin, waits its 2 s, then
# stops QEMU with SIGTERM (-v: "the server stopped: Terminated"); every
# call must be over within 6 s.
#
# Needs what `scripts/test.sh` setup installs: the thumbv7em target,
# llvm-tools, qemu-system-arm; mcp 2.3.0 goes into the venv .venv if
# missing. Each client prints "ok NAME" or "FAILED NAME: why" per scenario
# and "N passed, N failed". Exit status: 0 when every scenario passed, 1
# when one failed, 2 on a setup or build error.
# shellcheck disable=SC2317 # the mcpwire scenarios are called by name
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

target=thumbv7em-none-eabihf
elf=$root/target/$target/release/mcpwire-qemu-stdio

python_venv mcp==2.3.0 || exit 2
python=$root/.venv/bin/python
qemu=$(command -v qemu-system-arm) || {
    echo "qemu-system-arm not found (scripts/test.sh setup installs it with apt)" >&2
    exit 2
}
note "$("$qemu" --version | head -n 1)"

# The scenarios named, per client; a client none of whose scenarios was
# named is left out.
py_names=() mw_names=()
for name in "$@"; do
    case $name in
    mcpwire-*) mw_names+=("$name") ;;
    *) py_names+=("$name") ;;
    esac
done
mw_all=(mcpwire-list mcpwire-read-sensor mcpwire-progress mcpwire-cancel)
check_names scenario mw_all "${mw_names[@]}"
run_py=$(($# == 0 || ${#py_names[@]} > 0))
run_mw=$(($# == 0 || ${#mw_names[@]} > 0))

if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    # Its .cargo/config.toml (target, link script, shared target dir) is read
    # from the current directory.
    (cd tests/firmware/qemu-stdio && bounded 900 cargo build --release --quiet) || exit 2
    if ((run_mw)); then
        bounded 1800 "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire --quiet || exit 2
    fi
fi
[[ -f $elf ]] || {
    echo "no $elf" >&2
    exit 2
}
binary=$root/target/release/mcpwire
if ((run_mw)) && [[ ! -x $binary ]]; then
    echo "no $binary" >&2
    exit 2
fi

host=$(rustc -vV | sed -n 's/^host: //p')
tools=$(rustc --print sysroot)/lib/rustlib/$host/bin
if [[ -x $tools/llvm-size ]]; then
    if "$tools/llvm-nm" "$elf" | grep -E '__rust_(alloc|dealloc|realloc)|__rg_'; then
        echo "allocator symbols in the firmware: nothing may allocate" >&2
        exit 1
    fi
    "$tools/llvm-size" "$elf"
    read -r text data bss < <("$tools/llvm-size" "$elf" | awk 'NR == 2 {print $1, $2, $3}')
    echo "largest statics (bytes):"
    "$tools/llvm-nm" --print-size --size-sort --radix=d -C "$elf" |
        awk '$3 ~ /^[bBdD]$/ {size = $2 + 0; $1 = $2 = $3 = ""; sub(/^ +/, ""); sub(/::h[0-9a-f]+$/, ""); printf "    %7d  %s\n", size, $0}' |
        tail -n 6 | sort -rn
    awk -v f=$((text + data)) -v r=$((data + bss)) 'BEGIN {
        printf "flash      %7d bytes (%5.1f KiB)\n", f, f / 1024
        printf "static RAM %7d bytes (%5.1f KiB)\n", r, r / 1024
    }'
else
    note "llvm-size not found in $tools (rustup component add llvm-tools): no size report"
fi

rc=0
# The worst status stands: a client's 1 (a scenario failed), or its 2
# (usage); a time limit counts as a failure.
worst() {
    local s=$1
    if ((s > 2)); then s=1; fi
    if ((s > rc)); then rc=$s; fi
}

printf '\n==> python: mcp 2.3.0, QEMU as a stdio server\n'
if ((run_py)); then
    py_rc=0
    bounded 600 "$python" "$root/tests/stdio/qemu_client.py" "$qemu" "$elf" "${py_names[@]}" || py_rc=$?
    worst "$py_rc"
else
    note "no Python scenario named"
fi

# --- mcpwire's own stdio client ----------------------------------------------

# QEMU as a stdio server, as tests/stdio/qemu_client.py launches it.
# shellcheck disable=SC2054 # the commas are QEMU's
board=("$qemu" -machine mps2-an386 -cpu cortex-m4 -nodefaults -display none -monitor none
    -serial stdio -semihosting-config enable=on,target=native -kernel "$elf")
# The relay that records the wire in $work/wire.jsonl. The client gives
# its child an empty environment (no PATH): absolute paths only.
tap=("$(command -v python3)" "$root/tests/stdio/wire_tap.py" "$work/wire.jsonl" --)

# mw ARG...: `mcpwire call --stdio -v ARG...` (ARG... ends with `--
# SERVER...`), its stdout in $work/out and stderr in $work/err; sets mw_rc
# and mw_took (seconds, the server's start and stop included).
mw() {
    local start=$EPOCHREALTIME
    mw_rc=0
    bounded 30 "$binary" call --stdio -v "$@" >"$work/out" 2>"$work/err" || mw_rc=$?
    mw_took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}')
}

# json_check FILE PYTHON-EXPR: whether the expression holds of the JSON in
# FILE (as `r`); prints the expression's failure otherwise.
json_check() {
    python3 - "$1" "$2" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    ok = eval(f"({sys.argv[2]})", {"r": r})
except Exception as e:
    ok, r = False, f"{type(e).__name__}: {e}: {open(sys.argv[1]).read()[:300]}"
if not ok:
    print(f"not {sys.argv[2]}: {r if isinstance(r, str) else json.dumps(r)[:300]}")
sys.exit(0 if ok else 1)
PY
}

# The checks after every call; each sets `why` and returns 1 on a failure.
exited() { # STATUS: the client's exit status was STATUS
    ((mw_rc == $1)) && return 0
    why="exit status $mw_rc, not $1: $(tail -c 300 "$work/err")"
    return 1
}
# The client stopped QEMU (its stdin closed, then SIGTERM: QEMU does not
# exit at the end of its input; an exit of its own is fine too) within
# the bound, and the board neither panicked nor faulted.
stopped() {
    local line
    line=$(grep '^mcpwire: the server stopped: ' "$work/err") || line="no 'the server stopped' line"
    if [[ $line != *': Terminated' && $line != *': Exited(Some(0))' ]]; then
        why="$line"
        return 1
    fi
    if grep -E 'mcpwire-qemu-stdio: .*(panicked|hard fault|link ended)' "$work/err" >"$work/bad"; then
        why="the board: $(head -c 300 "$work/bad")"
        return 1
    fi
    if awk -v t="$mw_took" 'BEGIN {exit !(t >= 6)}'; then
        why="the call and QEMU's stop took $mw_took s (bound 6 s)"
        return 1
    fi
}

mcpwire_list() {
    mw list -- "${board[@]}"
    exited 0 || return 1
    why=$(json_check "$work/out" '[t["name"] for t in r["tools"]] == ["read_sensor", "toggle_output", "slow_task"]') ||
        return 1
    if ! grep -q '^mcpwire: era modern, version 2026-07-28, .*no fallback' "$work/err"; then
        why="-v: $(grep '^mcpwire: era' "$work/err" || echo 'no era line')"
        return 1
    fi
    stopped || return 1
    detail=$(grep '^mcpwire: era' "$work/err")
}

mcpwire_read_sensor() {
    mw tool read_sensor -- "${board[@]}"
    exited 0 || return 1
    why=$(json_check "$work/out" 'r["content"] == [{"type": "text", "text": "temperature 21.500 \u00b0C"}]
        and r["structuredContent"] == {"sensor": "temperature", "millicelsius": 21500}') || return 1
    stopped
}

mcpwire_progress() {
    mw tool slow_task '{"steps":3,"delay_ms":100}' --progress -- "${board[@]}"
    exited 0 || return 1
    why=$(json_check "$work/out" 'r["content"] == [{"type": "text", "text": "done after 3 steps"}]
        and not r.get("isError")') || return 1
    local want seen
    want=$(printf 'progress %d/3 step %d of 3\n' 1 1 2 2 3 3)
    seen=$(grep '^progress' "$work/err") || true
    if [[ $seen != "$want" ]]; then
        why="progress lines on stderr: ${seen:-none}"
        return 1
    fi
    stopped
}

# The call times out on the client; on the wire (wire_tap.py's record),
# the client sent notifications/cancelled for it, the board sent nothing
# more for it (it would have gone on for 4.5 s: a progress line each
# 100 ms), then the client closed the board's stdin and, 2 s later, sent
# SIGTERM.
mcpwire_cancel() {
    rm -f "$work/wire.jsonl"
    mw tool slow_task '{"steps":50,"delay_ms":100}' --progress --timeout-ms 500 -- "${tap[@]}" "${board[@]}"
    exited 1 || return 1
    if [[ -s $work/out ]]; then
        why="a result after the timeout: $(head -c 200 "$work/out")"
        return 1
    fi
    # (The notifications/cancelled it owes is checked on the wire below.)
    if ! grep -q '^mcpwire: DEADLINE_EXCEEDED: ' "$work/err"; then
        why="no DEADLINE_EXCEEDED: $(grep '^mcpwire: ' "$work/err" | head -n 3)"
        return 1
    fi
    local n
    n=$(grep -c '^progress' "$work/err") || true
    if ((n < 2 || n > 6)); then
        why="$n progress lines on stderr in the 500 ms (want 2 to 6)"
        return 1
    fi
    stopped || return 1
    if ! detail=$(python3 - "$work/wire.jsonl" <<'PY'
import json, sys

log = [json.loads(line) for line in open(sys.argv[1])]


def msg(e):
    try:
        return json.loads(e["line"])
    except ValueError:
        return {}


def fail(why):
    print(why)
    sys.exit(1)


sent = [(e["t"], msg(e)) for e in log if e["dir"] == ">"]
got = [(e["t"], msg(e)) for e in log if e["dir"] == "<"]
calls = [(t, m) for t, m in sent if m.get("method") == "tools/call"]
if len(calls) != 1:
    fail(f"{len(calls)} tools/call on the wire")
t_call, call = calls[0]
rid = call.get("id")
cancels = [
    t
    for t, m in sent
    if m.get("method") == "notifications/cancelled" and m.get("params", {}).get("requestId") == rid
]
if len(cancels) != 1:
    fail(f"{len(cancels)} notifications/cancelled for request {rid}")
t_cancel = cancels[0]
if not 0.45 <= t_cancel - t_call <= 1.0:
    fail(f"notifications/cancelled {t_cancel - t_call:.3f} s after the call (timeout 0.5 s)")
progress = [t for t, m in got if m.get("method") == "notifications/progress"]
before = sum(t < t_cancel for t in progress)
after = sum(t >= t_cancel for t in progress)
# One step may have been on its way when the cancel went out.
if before < 2 or after > 1:
    fail(f"progress from the board: {before} before the cancel, {after} after")
answers = [m for _, m in got if m.get("id") == rid]
if answers:
    fail(f"the board answered the cancelled call: {json.dumps(answers[0])[:200]}")
eof = [e["t"] for e in log if e["dir"] == "eof"]
term = [e["t"] for e in log if e["dir"] == "signal"]
if not eof or eof[0] < t_cancel:
    fail("the client did not close the board's stdin after the cancel")
if not term:
    fail("no SIGTERM: the board exited at the end of its stdin?")
# The client's close wait (2 s): the board had time to send more.
if term[0] - eof[0] < 1.5:
    fail(f"SIGTERM {term[0] - eof[0]:.2f} s after the stdin closed (the close wait is 2 s)")
print(
    f"cancelled {1000 * (t_cancel - t_call):.0f} ms after the call; board progress "
    f"{before} before, {after} after; stdin closed, SIGTERM {term[0] - eof[0]:.2f} s later"
)
PY
    ); then
        why="the wire: $detail"
        return 1
    fi
}

printf '\n==> mcpwire call --stdio: QEMU as a stdio server\n'
if ((run_mw)); then
    if ((${#mw_names[@]} == 0)); then mw_names=("${mw_all[@]}"); fi
    mw_passed=0 mw_failed=0
    for name in "${mw_names[@]}"; do
        why='' detail='' mw_took=0
        if "${name//-/_}"; then
            echo "ok $name ($mw_took s)"
            if [[ -n $detail ]]; then note "$detail"; fi
            mw_passed=$((mw_passed + 1))
        else
            echo "FAILED $name: $why"
            mw_failed=$((mw_failed + 1))
        fi
    done
    echo "$mw_passed passed, $mw_failed failed"
    if ((mw_failed > 0)); then worst 1; fi
else
    note "no mcpwire scenario named"
fi
exit "$rc"
