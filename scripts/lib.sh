# shellcheck shell=bash
# The helpers that the scripts of scripts/ share. Each script begins with
#
#   set -euo pipefail
#   . "$(dirname "$0")/lib.sh"
#
# Sourcing it moves to the repository root (`root`), makes a scratch
# directory (`work`) and sets an EXIT trap that stops every process started
# with `background`, runs the script's `on_exit` if it has one, and removes
# `work`. SIGINT and SIGTERM end the script through that trap: a time limit
# that stops a script also stops the servers it started.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

# A step or script that exits with this status was skipped, not failed.
readonly SKIP=77

# CI=true: what is missing is a failure, not a skip.
# shellcheck disable=SC2034 # for the scripts
if [[ ${CI:-} == true ]]; then ci=true; else ci=false; fi

work=$(mktemp -d)
bg_pids=()

lib_exit() {
    # The script's own exit status stands: nothing here may fail.
    if ((${#bg_pids[@]})); then stop_pids 10 "${bg_pids[@]}" || true; fi
    if declare -F on_exit >/dev/null; then on_exit || true; fi
    rm -rf "$work" || true
}
trap lib_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

note() { printf '    %s\n' "$*"; }

# The comment at the top of the script (up to `set -euo pipefail`): its usage.
usage_text() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}

# Runs "$@" with a time limit: nothing a script starts may hang CI.
bounded() {
    local seconds=$1
    shift
    local rc=0
    timeout --kill-after=30 "$seconds" "$@" || rc=$?
    if ((rc == 124 || rc == 137)); then
        note "timed out after ${seconds} s: $*"
    fi
    return "$rc"
}

# Runs "$@" with its output in a log, shown only when it fails.
quietly() {
    local log rc=0
    log=$(mktemp -p "$work" quiet.XXXXXX)
    "$@" >"$log" 2>&1 || rc=$?
    if ((rc != 0)); then
        cat "$log"
        note "failed: $*"
    fi
    rm -f "$log"
    ((rc == 0))
}

# apt-get install, quietly. The package lists are refreshed only when the
# install cannot go ahead without them.
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq "$@" >"$work/apt.log" 2>&1; then
        note "apt-get update"
        quietly apt-get update -qq || return 1
        quietly apt-get install -y -qq "$@" || return 1
    fi
}

# python_venv NAME==VERSION...: the Python venv .venv at the root, made if
# missing, with these versions installed into it unless they are there.
python_venv() { venv_pinned .venv "$@"; }

# mcp1_venv: the official Python SDK of the 2025 era, mcp 1.26.0, in its own
# venv .peers/venv-mcp1 (made if missing; .venv holds mcp 2.x): the legacy
# peers, over stdio (the 2025-11-25 lifecycle), 2025-era Streamable HTTP
# with sessions and 2024-11-05 HTTP+SSE. Its python:
# $root/.peers/venv-mcp1/bin/python.
mcp1_venv() {
    mkdir -p "$root/.peers"
    venv_pinned .peers/venv-mcp1 mcp==1.26.0
}

# venv_pinned DIR NAME==VERSION...: the Python venv DIR (from the root), made
# if missing, with these versions installed into it unless they are there.
venv_pinned() {
    local venv=$root/$1
    shift
    if "$venv/bin/python" - "$@" >/dev/null 2>&1 <<'PY'; then
import sys
from importlib.metadata import version
sys.exit(any(version(n) != v for n, v in (p.split("==") for p in sys.argv[1:])))
PY
        return 0
    fi
    note "python venv ${venv#"$root"/}: $*"
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
        # Debian's own python3 needs python3-venv for ensurepip.
        apt_install python3-venv || return 1
        quietly python3 -m venv "$venv" || return 1
    fi
    quietly "$venv/bin/pip" install -q --disable-pip-version-check "$@"
}

# npm_pinned DIR: the npm packages that DIR/package.json pins (exact
# versions in "dependencies"), in DIR/node_modules, installed with npm
# unless each is there at its version.
npm_pinned() {
    local dir=$root/$1
    # shellcheck disable=SC2016 # JavaScript, not shell
    if (cd "$dir" && node -e '
        const deps = require("./package.json").dependencies ?? {};
        const v = (p) => { try { return require(`./node_modules/${p}/package.json`).version; } catch { return null; } };
        process.exit(Object.entries(deps).every(([p, want]) => v(p) === want) ? 0 : 1)') \
        >/dev/null 2>&1; then
        return 0
    fi
    note "npm install ($1): $(cd "$dir" && node -p '
        Object.entries(require("./package.json").dependencies ?? {}).map((d) => d.join(" ")).join(", ")')"
    (cd "$dir" && quietly npm install --no-audit --no-fund)
}

# @grpc/grpc-js 1.14.7 and @grpc/proto-loader 0.8.1 in
# tests/grpc/node_modules (tests/grpc/package.json).
grpc_js() { npm_pinned tests/grpc; }

# The release profile of the test tools (the interop binaries, the demo
# server): no LTO and parallel codegen, quick to build and plenty fast to
# run. Other release builds keep the workspace profile; cargo keeps both
# sets of artifacts apart. cargo_tools is cargo with it, a command (not a
# function) that `bounded` and `quietly` can run:
#   "${cargo_tools[@]}" build --release ...
tools_profile=(CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16)
# shellcheck disable=SC2034 # for the scripts
cargo_tools=(env "${tools_profile[@]}" cargo)

# test_certs DIR: a throwaway CA (DIR/ca.pem) and a certificate for
# localhost and 127.0.0.1 that it signed (DIR/server.pem, DIR/server.key),
# valid for a day.
test_certs() {
    local dir=$1
    mkdir -p "$dir"
    if ! (
        cd "$dir" &&
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
                -subj /CN=mcpwire-interop-ca -keyout ca.key -out ca.pem &&
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                -subj /CN=localhost -keyout server.key -out server.csr &&
            printf '%s\n' 'subjectAltName=DNS:localhost,IP:127.0.0.1' 'basicConstraints=CA:FALSE' \
                'keyUsage=digitalSignature' 'extendedKeyUsage=serverAuth' >ext &&
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
                -extfile ext -out server.pem
    ) >"$work/openssl.log" 2>&1; then
        cat "$work/openssl.log"
        echo "openssl could not make the test certificates" >&2
        return 1
    fi
}

# A free TCP port on 127.0.0.1.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# background OUT ERR COMMAND...: starts COMMAND in the background, its
# stdout in the file OUT and its stderr in ERR; sets `bg_pid`. The EXIT
# trap stops it unless `stop_pids` did.
background() {
    local out=$1 err=$2
    shift 2
    "$@" >"$out" 2>"$err" &
    bg_pid=$!
    bg_pids+=("$bg_pid")
}

# wait_listening PID FILE SECONDS: waits for the line "listening on ADDR ..."
# that a server prints when it is ready, and prints ADDR. Returns 1 when the
# process PID ended first, 2 when SECONDS passed.
wait_listening() {
    local pid=$1 file=$2 seconds=$3 addr i
    for ((i = 0; i < seconds * 10; i++)); do
        # Whole lines only (`read` fails on one still being written): a
        # line read as it is written gave half an address.
        addr=$(while IFS= read -r line; do
            if [[ $line =~ ^listening\ on\ ([^ ]+) ]]; then
                printf '%s\n' "${BASH_REMATCH[1]}"
                break
            fi
        done 2>/dev/null <"$file")
        if [[ -n $addr ]]; then
            printf '%s\n' "$addr"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 2
}

# stop_pids SECONDS PID...: SIGTERM to each, up to SECONDS for each to end
# (a server ends its listens), then SIGKILL.
stop_pids() {
    local seconds=$1 pid i
    shift
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "$@"; do
        for ((i = 0; i < seconds * 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            note "pid $pid did not stop within $seconds s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    local left=() p
    for p in "${bg_pids[@]}"; do
        one_of "$p" "$@" || left+=("$p")
    done
    bg_pids=("${left[@]}")
}

# --- steps and scenarios ----------------------------------------------------

# one_of WORD WORD...: whether the first word is among the others.
one_of() {
    local x=$1
    shift
    [[ " $* " == *" $x "* ]]
}

# wanted NAME: whether NAME was selected on the command line (the array
# `selected`; empty selects everything).
# shellcheck disable=SC2154 # set by the script
wanted() { ((${#selected[@]} == 0)) || one_of "$1" "${selected[@]}"; }

# check_names NOUN ARRAY NAME...: exits 2 when a NAME is not in the array
# named ARRAY ("unknown step 'x'; steps: ...").
check_names() {
    local noun=$1
    local -n names=$2
    shift 2
    local name
    for name in "$@"; do
        one_of "$name" "${names[@]}" || {
            echo "unknown $noun '$name'; ${noun}s: ${names[*]}" >&2
            exit 2
        }
    done
}

# run_steps NAME...: runs the function step_NAME (dashes as underscores) of
# each, in a subshell with errexit, and every one of them whatever failed
# before; "==> NAME" before it, "--- NAME: ok (N s)" (or FAILED, or skipped
# for the status SKIP) after it. Sets step_status[NAME], step_seconds[NAME]
# and the counts steps_passed, steps_failed and steps_skipped.
declare -A step_status=() step_seconds=()
steps_passed=0 steps_failed=0 steps_skipped=0
run_steps() {
    local name start rc status
    for name in "$@"; do
        printf '\n==> %s\n' "$name"
        start=$SECONDS
        set +e
        (
            set -euo pipefail
            "step_${name//-/_}"
        )
        rc=$?
        set -e
        case $rc in
        0) status=ok steps_passed=$((steps_passed + 1)) ;;
        "$SKIP") status=skipped steps_skipped=$((steps_skipped + 1)) ;;
        *) status=FAILED steps_failed=$((steps_failed + 1)) ;;
        esac
        # shellcheck disable=SC2034 # for the script
        step_status[$name]=$status
        step_seconds[$name]=$((SECONDS - start))
        printf -- '--- %s: %s (%d s)\n' "$name" "$status" "${step_seconds[$name]}"
    done
}

# The scenario lines of the interop scripts: "ok", "FAIL" or "skip", the
# client, the scenario; the counts and the failures for scenarios_summary.
passed=0 failed=0 skipped=0
failures=()

# scenario_ok CLIENT SCENARIO LINE: LINE (what the client saw) is printed
# only with MCPWIRE_VERBOSE=1.
scenario_ok() {
    passed=$((passed + 1))
    printf '    ok    %-8s %s\n' "$1" "$2"
    if [[ ${MCPWIRE_VERBOSE:-} == 1 ]]; then detail "$3"; fi
}

# scenario_failed CLIENT SCENARIO [WHY]: the caller prints the details.
scenario_failed() {
    failed=$((failed + 1))
    failures+=("$1 $2")
    printf '    FAIL  %-8s %s%s\n' "$1" "$2" "${3:+ ($3)}"
}

# scenario_skipped CLIENT SCENARIO WHY
scenario_skipped() {
    skipped=$((skipped + 1))
    printf '    skip  %-8s %s (%s)\n' "$1" "$2" "$3"
}

# A line under a scenario's.
detail() { printf '          %s\n' "$*"; }

# scenarios_summary START: "==> N passed, N failed, N skipped (N s)" since
# SECONDS was START, then each failure; false when one failed.
scenarios_summary() {
    printf '\n==> %d passed, %d failed, %d skipped (%d s)\n' "$passed" "$failed" "$skipped" $((SECONDS - $1))
    local f
    for f in "${failures[@]}"; do note "failed: $f"; done
    ((failed == 0))
}
