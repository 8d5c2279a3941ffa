#!/usr/bin/env bash
# The device firmware's application, run on the host (embassy's std
# executor, embassy-net on a TAP device: examples/device-host), called by
# @grpc/grpc-js (tests/grpc/device.js), by our tokio Channel
# (mcpwire-device-probe) and by the embassy client (mcpwire-device-client:
# the core's Caller on its own embassy-net stack): discover, tools/list, the
# tools, progress, cancel, deadlines, concurrent calls.
#
#   sudo ./scripts/interop-embassy-host.sh
#
# Everything happens inside a network namespace this script makes and
# removes (a unique name, mcpwire-emb-PID): two TAP devices in it, bridged,
# with 10.77.0.1/24 on the kernel side (the bridge), the device app on
# 10.77.0.2 behind the first, the embassy client on 10.77.0.3 behind the
# second, the other clients in the same namespace. No traffic leaves the namespace. The app is
# stopped by its PID and the namespace deleted on exit, whatever happens.
#
# Needs root and /dev/net/tun; without them it exits 77 (skipped), except in
# CI (CI=true), where that is a failure. Needs node and npm: @grpc/grpc-js
# 1.14.7 and @grpc/proto-loader 0.8.1 are installed into
# tests/grpc/node_modules when missing.
#
# Builds the three binaries in release (no LTO, parallel codegen, as the grpc
# step of scripts/test.sh does) unless MCPWIRE_NO_BUILD=1. Prints one line a
# scenario, then "N passed, N failed, N skipped"; the exit status is 1 when
# any failed.
#
# Environment:
#   MCPWIRE_NO_BUILD=1   use the binaries in target/release as they are
#   MCPWIRE_VERBOSE=1    print every scenario's observation line
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$root/tests/grpc
readonly SKIP=77

ci=false
[[ "${CI:-}" == true ]] && ci=true

note() { printf '    %s\n' "$*"; }

# Not able to run here: a skip, but a failure in CI.
cannot() {
    if [[ $ci == true ]]; then
        note "$* (CI=true: this step must run in CI)"
        exit 1
    fi
    note "$*: skipped"
    exit "$SKIP"
}

[[ $(id -u) == 0 ]] || cannot "needs root (network namespaces and a TAP device)"
[[ -c /dev/net/tun ]] || cannot "no /dev/net/tun"
command -v ip >/dev/null || cannot "no ip command (Debian: iproute2)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    cannot "node and npm are needed (Debian: apt-get install nodejs npm)"
fi

ns=mcpwire-emb-$$
tap=mcptap0
tap_client=mcptap1
bridge=mcpbr0
client_side=10.77.0.3/24
host_side=10.77.0.1/24
device=10.77.0.2
port=50051
work=$(mktemp -d)
app_pid=

cleanup() {
    if [[ -n $app_pid ]] && kill -0 "$app_pid" 2>/dev/null; then
        kill -TERM "$app_pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$app_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$app_pid" 2>/dev/null || true
        wait "$app_pid" 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

quietly() {
    if ! "$@" >"$work/quiet.log" 2>&1; then
        cat "$work/quiet.log"
        note "failed: $*"
        return 1
    fi
}

printf '==> setup\n'
# shellcheck disable=SC2016 # JavaScript, not shell
if ! (cd "$dir" && node -e '
    const v = (p) => require(`./node_modules/${p}/package.json`).version;
    process.exit(v("@grpc/grpc-js") === "1.14.7" && v("@grpc/proto-loader") === "0.8.1" ? 0 : 1)') \
    >/dev/null 2>&1; then
    note "npm install (tests/grpc): @grpc/grpc-js 1.14.7, @grpc/proto-loader 0.8.1"
    (cd "$dir" && quietly npm install --no-audit --no-fund) || exit 2
fi
if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    note "cargo build --release -p mcpwire-device-host"
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
        quietly cargo build --release -p mcpwire-device-host --bins || exit 2
fi
app=$root/target/release/mcpwire-device-host
probe=$root/target/release/mcpwire-device-probe
client=$root/target/release/mcpwire-device-client
[[ -x $app && -x $probe && -x $client ]] || {
    echo "missing $app, $probe or $client" >&2
    exit 2
}

in_ns() { ip netns exec "$ns" "$@"; }

note "namespace $ns: $bridge $host_side over $tap and $tap_client, the device at $device"
ip netns add "$ns"
in_ns ip link set lo up
in_ns ip link add "$bridge" type bridge
for t in "$tap" "$tap_client"; do
    in_ns ip tuntap add dev "$t" mode tap
    in_ns ip link set "$t" master "$bridge"
    in_ns ip link set "$t" up
done
in_ns ip addr add "$host_side" dev "$bridge"
in_ns ip link set "$bridge" up

# `ip netns exec` execs the app: $! is its PID.
ip netns exec "$ns" "$app" --tap "$tap" --address "$device/24" -v >"$work/app.out" 2>"$work/app.err" &
app_pid=$!
for _ in $(seq 100); do
    grep -q '^listening on' "$work/app.out" && break
    kill -0 "$app_pid" 2>/dev/null || break
    sleep 0.1
done
if ! grep -q '^listening on' "$work/app.out"; then
    cat "$work/app.out" "$work/app.err"
    echo "the device app did not start" >&2
    exit 1
fi
note "$(head -n 1 "$work/app.out") (pid $app_pid)"

passed=0
failed=0
skipped=0
failures=()

report() { # report OK CLIENT SCENARIO LINE
    local ok=$1 client=$2 scenario=$3 line=$4
    if [[ $ok == true ]]; then
        passed=$((passed + 1))
        printf '    ok    %-8s %s\n' "$client" "$scenario"
        [[ ${MCPWIRE_VERBOSE:-} == 1 ]] && printf '          %s\n' "$line"
    else
        failed=$((failed + 1))
        failures+=("$client $scenario")
        printf '    FAIL  %-8s %s\n' "$client" "$scenario"
        printf '          %s\n' "$line"
    fi
    return 0
}

start=$SECONDS
printf '\n==> grpc-js (tests/grpc/device.js) -> %s:%s\n' "$device" "$port"
for s in discover tools-list read-sensor toggle progress cancel deadline concurrent; do
    rc=0
    in_ns timeout --kill-after=5 60 node "$dir/device.js" "$device:$port" "$s" >"$work/run.out" 2>"$work/run.err" || rc=$?
    line=$(tail -n 1 "$work/run.out")
    if ((rc == 0)); then
        report true grpc-js "$s" "$line"
    else
        report false grpc-js "$s" "exit $rc: $line $(tail -n 5 "$work/run.err" | tr '\n' ' ')"
    fi
done

printf '\n==> tokio Channel (mcpwire-device-probe) -> %s:%s\n' "$device" "$port"
rc=0
in_ns timeout --kill-after=5 180 "$probe" "$device:$port" >"$work/probe.out" 2>"$work/probe.err" || rc=$?
probed=0
while IFS= read -r line; do
    [[ $line == '{'* ]] || continue
    probed=$((probed + 1))
    scenario=$(sed -n 's/.*"scenario":"\([^"]*\)".*/\1/p' <<<"$line")
    if [[ $line == *'"ok":true'* ]]; then
        report true channel "$scenario" "$line"
    else
        report false channel "$scenario" "$line"
    fi
done <"$work/probe.out"
if ((probed == 0)); then
    report false channel probe "exit $rc, no scenario ran: $(tail -n 5 "$work/probe.err" | tr '\n' ' ')"
fi

printf '\n==> embassy client (mcpwire-device-client, %s on %s) -> %s:%s\n' "${client_side%/*}" "$tap_client" "$device" "$port"
rc=0
in_ns timeout --kill-after=5 120 "$client" --tap "$tap_client" --address "$client_side" --server "$device:$port" \
    >"$work/client.out" 2>"$work/client.err" || rc=$?
ran=0
while IFS= read -r line; do
    [[ $line == '{'* ]] || continue
    ran=$((ran + 1))
    scenario=$(sed -n 's/.*"scenario":"\([^"]*\)".*/\1/p' <<<"$line")
    if [[ $line == *'"ok":true'* ]]; then
        report true embassy "$scenario" "$line"
    else
        report false embassy "$scenario" "$line"
    fi
done <"$work/client.out"
if ((ran == 0)); then
    report false embassy client "exit $rc, no scenario ran: $(tail -n 5 "$work/client.err" | tr '\n' ' ')"
fi

# The app must have lived through all of it.
if kill -0 "$app_pid" 2>/dev/null; then
    report true device alive "pid $app_pid"
else
    report false device alive "the device app exited: $(tail -n 5 "$work/app.err" | tr '\n' ' ')"
fi
if ((failed > 0)); then
    note "device app log (last 30 lines):"
    tail -n 30 "$work/app.err" | sed 's/^/      /'
fi

printf '\n==> %d passed, %d failed, %d skipped (%d s)\n' "$passed" "$failed" "$skipped" $((SECONDS - start))
for f in "${failures[@]}"; do note "failed: $f"; done
((failed == 0))
