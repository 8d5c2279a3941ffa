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
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

expected_file=tests/httpwg-expected-failures.txt
frame_timeout=${HTTPWG_FRAME_TIMEOUT_MS:-1000}
httpwg_version=0.2.5

# The interop binaries are test tools: every cargo call here builds with
# their release profile (see cargo_tools in lib.sh).
export "${tools_profile[@]}"

setup() {
    if ! command -v nghttp >/dev/null || ! command -v nghttpd >/dev/null; then
        note "apt-get install nghttp2-client nghttp2-server"
        apt_install nghttp2-client nghttp2-server
    fi
    if ! command -v curl >/dev/null; then
        note "apt-get install curl"
        apt_install curl
    fi

    if [[ -z ${MCPWIRE_PYTHON:-} ]]; then
        python_venv h2==4.4.1
        export MCPWIRE_PYTHON=$root/.venv/bin/python
    fi

    if ! cargo install --list | grep -q "^httpwg-cli v$httpwg_version:"; then
        note "cargo install httpwg-cli $httpwg_version (a few minutes)"
        # --locked: the newest socket2 no longer builds httpwg's buffet.
        quietly bounded 1200 cargo install httpwg-cli --version "$httpwg_version" --locked
    fi

    note "nghttp: $(nghttp --version | head -n 1)"
    note "curl: $(curl --version | head -n 1 | cut -d' ' -f1-2)"
    note "python: $("$MCPWIRE_PYTHON" -c 'import sys, h2; print(sys.version.split()[0], "h2", h2.__version__)')"
    note "httpwg-cli $httpwg_version"
}

build() {
    # One build of the crate, its binaries and its tests; the peer tests and
    # httpwg use the same binaries.
    bounded 1800 cargo test --release -p mcpwire-interop --no-run --quiet
}

step_peers() {
    local rc
    bounded 900 cargo test --release -p mcpwire-interop --no-fail-fast -- --nocapture \
        >"$work/peers.log" 2>&1 && rc=0 || rc=$?
    # The results, what the peers moved, and the failures in full.
    grep -E '^test .* \.\.\. |^(SKIPPED|nghttp|curl|our client|python|h2 client)|^test result' \
        "$work/peers.log" | sed 's/^/    /' || true
    if ((rc != 0)); then
        # Each panic's message, without its backtrace.
        awk '/^thread .* panicked at/ { on = 1 }
             /^(stack backtrace:|note: |test .* \.\.\. )/ { on = 0 }
             on' "$work/peers.log"
    fi
    return "$rc"
}

# The full names of the cases after `marker` in httpwg's log, sorted.
cases() {
    sed 's/\x1b\[[0-9;]*m//g' "$work/httpwg.log" | sed -n "s/^.*$1: //p" | sort -u
}

step_httpwg() {
    local httpwg port
    httpwg=$(command -v httpwg || echo "${CARGO_HOME:-$HOME/.cargo}/bin/httpwg")
    port=$(free_port)
    # httpwg starts the server itself and stops it when it exits. One case
    # at a time (SEQUENTIAL=1): 107 at once on two busy cores time out.
    bounded 600 env SEQUENTIAL=1 "$httpwg" -v --frame-timeout "$frame_timeout" --connect-timeout 2000 \
        -a "127.0.0.1:$port" -- "$root/target/release/h2-echo-server" "$port" \
        >"$work/httpwg.log" 2>&1 || true

    cases 'Running test' >"$work/all"
    cases 'Test passed' >"$work/passed"
    # A case that panics inside httpwg is reported neither way: it failed.
    comm -23 "$work/all" "$work/passed" >"$work/failed"
    sed -e 's/[[:space:]]*#.*$//' -e '/^[[:space:]]*$/d' "$expected_file" | sort -u >"$work/expected"

    local total passed failed unexpected
    total=$(wc -l <"$work/all")
    passed=$(wc -l <"$work/passed")
    failed=$(wc -l <"$work/failed")
    if ((total == 0)); then
        tail -n 40 "$work/httpwg.log"
        note "httpwg ran no case"
        return 1
    fi
    echo "httpwg $httpwg_version: $passed/$total passed, $failed failed"
    unexpected=0
    local name reason
    while IFS= read -r name; do
        if grep -qxF "$name" "$work/expected"; then
            reason=$(grep -F "$name" "$expected_file" | sed -n 's/^[^#]*#[[:space:]]*//p' | head -n 1)
            note "expected failure: $name"
            note "    ($reason)"
        else
            unexpected=$((unexpected + 1))
            note "UNEXPECTED FAILURE: $name"
            # httpwg's own account of it: the error after "Test failed", or
            # the panic message of a case that crashed.
            sed 's/\x1b\[[0-9;]*m//g' "$work/httpwg.log" | awk -v name="$name" '
                $0 == "❌ Test failed: " name || $0 == "🔷 Running test: " name { on = 1; n = 0; next }
                on && /^(🔷|✅|❌)/ { on = 0 }
                on && /^ *0: |^Message:/ { print; on = 0 }' |
                sed 's/^ */          /'
        fi
    done <"$work/failed"
    while IFS= read -r name; do
        if grep -qxF "$name" "$work/passed"; then
            note "now passes (delete it from $expected_file): $name"
        elif ! grep -qxF "$name" "$work/all"; then
            note "no such case (check $expected_file): $name"
        fi
    done <"$work/expected"
    echo "httpwg: $unexpected unexpected failure(s)"
    ((unexpected == 0))
}

steps=(peers httpwg)
selected=("$@")
check_names step steps "${selected[@]}"

printf '==> setup\n'
setup
printf '\n==> build (release, mcpwire-interop)\n'
start=$SECONDS
build
note "built in $((SECONDS - start)) s"

ran=()
for name in "${steps[@]}"; do
    if wanted "$name"; then ran+=("$name"); fi
done
run_steps "${ran[@]}"
summary=()
for name in "${ran[@]}"; do summary+=("$name ${step_status[$name]}"); done
printf '\n==> results: %s\n' "${summary[*]}"
((steps_failed == 0))
