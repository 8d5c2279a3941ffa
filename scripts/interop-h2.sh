#!/usr/bin/env bash
# HTTP/2 interop of mcpwire: the core's connection, driven by the small tokio
# driver of tests/ (crate mcpwire-interop), against real peers and against
# the httpwg conformance suite.
#
#   ./scripts/interop-h2.sh              tools, one release build, both steps
#   ./scripts/interop-h2.sh peers        only the peer tests (cargo test)
#   ./scripts/interop-h2.sh httpwg       only httpwg
#
# Setup installs what is missing, once: nghttp and nghttpd (Debian
# nghttp2-client, nghttp2-server), curl, a Python venv at .venv with h2 4.4.1,
# and httpwg-cli 0.2.5 (cargo install, about 3 minutes the first time).
#
# peers:  cargo test --release -p mcpwire-interop (Python h2, nghttp, nghttpd,
#         curl and the h2 crate against our client and server).
# httpwg: runs the 107 cases of httpwg against target/release/h2-echo-server,
#         one at a time, prints the counts and every failing case, and fails
#         if a case fails that tests/httpwg-expected-failures.txt does not list.
#
# Environment:
#   MCPWIRE_REQUIRE_PEERS=1   a missing peer tool fails its test (CI sets it)
#   MCPWIRE_PYTHON            the Python with h2 (default: .venv/bin/python)
#   HTTPWG_FRAME_TIMEOUT_MS   how long httpwg waits for a frame (default 1000;
#                             its own default, 250, is too short on a busy
#                             2-core machine)
# shellcheck disable=SC2317 # the steps are called by name
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

expected_file=tests/httpwg-expected-failures.txt
frame_timeout=${HTTPWG_FRAME_TIMEOUT_MS:-1000}
httpwg_version=0.2.5
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# The interop binaries are test tools: a release build without LTO and with
# parallel codegen is fast to build and plenty fast to run. These settings
# apply to this script's cargo calls only (other release builds keep the
# workspace profile; cargo keeps both sets of artifacts apart).
export CARGO_PROFILE_RELEASE_LTO=false
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16

note() { printf '    %s\n' "$*"; }

# Runs "$@" with its output in a log, shown only when it fails.
quietly() {
    local log="$logs/quiet.log"
    if ! "$@" >"$log" 2>&1; then
        cat "$log"
        note "failed: $*"
        return 1
    fi
}

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    # The package lists are refreshed only when the install cannot go ahead
    # without them.
    if ! apt-get install -y -qq "$@" >"$logs/apt.log" 2>&1; then
        note "apt-get update"
        quietly apt-get update -qq
        quietly apt-get install -y -qq "$@"
    fi
}

setup() {
    if ! command -v nghttp >/dev/null || ! command -v nghttpd >/dev/null; then
        note "apt-get install nghttp2-client nghttp2-server"
        apt_install nghttp2-client nghttp2-server
    fi
    if ! command -v curl >/dev/null; then
        note "apt-get install curl"
        apt_install curl
    fi

    local want_python='h2==4.4.1'
    if [[ -z ${MCPWIRE_PYTHON:-} ]]; then
        if ! .venv/bin/python -c 'import sys; from importlib.metadata import version; sys.exit(version("h2") != "4.4.1")' \
            >/dev/null 2>&1; then
            note "python venv .venv: $want_python"
            if ! python3 -m venv .venv >/dev/null 2>&1; then
                apt_install python3-venv
                quietly python3 -m venv .venv
            fi
            quietly .venv/bin/pip install -q --disable-pip-version-check "$want_python"
        fi
        export MCPWIRE_PYTHON=$root/.venv/bin/python
    fi

    if ! cargo install --list | grep -q "^httpwg-cli v$httpwg_version:"; then
        note "cargo install httpwg-cli $httpwg_version (a few minutes)"
        # --locked: the newest socket2 no longer builds httpwg's buffet.
        quietly timeout 1200 cargo install httpwg-cli --version "$httpwg_version" --locked
    fi

    note "nghttp: $(nghttp --version | head -n 1)"
    note "curl: $(curl --version | head -n 1 | cut -d' ' -f1-2)"
    note "python: $("$MCPWIRE_PYTHON" -c 'import sys, h2; print(sys.version.split()[0], "h2", h2.__version__)')"
    note "httpwg-cli $httpwg_version"
}

build() {
    # One build of the crate, its binaries and its tests; the peer tests and
    # httpwg use the same binaries.
    timeout 1800 cargo test --release -p mcpwire-interop --no-run --quiet
}

step_peers() {
    local rc
    timeout 900 cargo test --release -p mcpwire-interop --no-fail-fast -- --nocapture \
        >"$logs/peers.log" 2>&1 && rc=0 || rc=$?
    # The results, what the peers moved, and the failures in full.
    grep -E '^test .* \.\.\. |^(SKIPPED|nghttp|curl|our client|python|h2 client)|^test result' \
        "$logs/peers.log" | sed 's/^/    /' || true
    if ((rc != 0)); then
        # Each panic's message, without its backtrace.
        awk '/^thread .* panicked at/ { on = 1 }
             /^(stack backtrace:|note: |test .* \.\.\. )/ { on = 0 }
             on' "$logs/peers.log"
    fi
    return "$rc"
}

# The full names of the cases after `marker` in httpwg's log, sorted.
cases() {
    sed 's/\x1b\[[0-9;]*m//g' "$logs/httpwg.log" | sed -n "s/^.*$1: //p" | sort -u
}

step_httpwg() {
    local httpwg port
    httpwg=$(command -v httpwg || echo "${CARGO_HOME:-$HOME/.cargo}/bin/httpwg")
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # httpwg starts the server itself and stops it when it exits. One case
    # at a time (SEQUENTIAL=1): 107 at once on two busy cores time out.
    SEQUENTIAL=1 timeout 600 "$httpwg" -v --frame-timeout "$frame_timeout" --connect-timeout 2000 \
        -a "127.0.0.1:$port" -- "$root/target/release/h2-echo-server" "$port" \
        >"$logs/httpwg.log" 2>&1 || true

    cases 'Running test' >"$logs/all"
    cases 'Test passed' >"$logs/passed"
    # A case that panics inside httpwg is reported neither way: it failed.
    comm -23 "$logs/all" "$logs/passed" >"$logs/failed"
    sed -e 's/[[:space:]]*#.*$//' -e '/^[[:space:]]*$/d' "$expected_file" | sort -u >"$logs/expected"

    local total passed failed unexpected
    total=$(wc -l <"$logs/all")
    passed=$(wc -l <"$logs/passed")
    failed=$(wc -l <"$logs/failed")
    if ((total == 0)); then
        tail -n 40 "$logs/httpwg.log"
        note "httpwg ran no case"
        return 1
    fi
    echo "httpwg $httpwg_version: $passed/$total passed, $failed failed"
    unexpected=0
    local name reason
    while IFS= read -r name; do
        if grep -qxF "$name" "$logs/expected"; then
            reason=$(grep -F "$name" "$expected_file" | sed -n 's/^[^#]*#[[:space:]]*//p' | head -n 1)
            note "expected failure: $name"
            note "    ($reason)"
        else
            unexpected=$((unexpected + 1))
            note "UNEXPECTED FAILURE: $name"
            # httpwg's own account of it: the error after "Test failed", or
            # the panic message of a case that crashed.
            sed 's/\x1b\[[0-9;]*m//g' "$logs/httpwg.log" | awk -v name="$name" '
                $0 == "❌ Test failed: " name || $0 == "🔷 Running test: " name { on = 1; n = 0; next }
                on && /^(🔷|✅|❌)/ { on = 0 }
                on && /^ *0: |^Message:/ { print; on = 0 }' |
                sed 's/^ */          /'
        fi
    done <"$logs/failed"
    while IFS= read -r name; do
        if grep -qxF "$name" "$logs/passed"; then
            note "now passes (delete it from $expected_file): $name"
        elif ! grep -qxF "$name" "$logs/all"; then
            note "no such case (check $expected_file): $name"
        fi
    done <"$logs/expected"
    echo "httpwg: $unexpected unexpected failure(s)"
    ((unexpected == 0))
}

steps=(peers httpwg)
selected=("$@")
for name in "${selected[@]}"; do
    [[ " ${steps[*]} " == *" $name "* ]] || {
        echo "unknown step '$name'; steps: ${steps[*]}" >&2
        exit 2
    }
done

printf '==> setup\n'
setup
printf '\n==> build (release, mcpwire-interop)\n'
start=$SECONDS
build
note "built in $((SECONDS - start)) s"

failed=0
summary=()
for name in "${steps[@]}"; do
    if ((${#selected[@]})) && [[ " ${selected[*]} " != *" $name "* ]]; then
        continue
    fi
    printf '\n==> %s\n' "$name"
    start=$SECONDS
    if "step_$name"; then
        status=ok
    else
        status=FAILED
        failed=1
    fi
    printf -- '--- %s: %s (%d s)\n' "$name" "$status" $((SECONDS - start))
    summary+=("$name $status")
done
printf '\n==> results: %s\n' "${summary[*]}"
exit "$failed"
