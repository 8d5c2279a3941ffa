#!/usr/bin/env bash
# The device firmware's application, run on the host (embassy's std
# executor, embassy-net on a TAP device: examples/device-host), called by
# @grpc/grpc-js (tests/grpc/device.js), by our tokio client
# (mcpwire-device-probe) and by the embassy client (mcpwire-device-client:
# the core's Caller on its own embassy-net stack): discover, tools/list, the
# tools, progress, cancel, deadlines, concurrent calls; the typed binding
# (the app built with feature `typed`) by grpc-js (tests/grpc/typed.js,
# its device-* scenarios). On the same port,
# Streamable HTTP over HTTP/1.1: the official Python SDK (mcp 2.3.0, its
# Streamable HTTP client pinned to 2026-07-28: tests/grpc/device_http.py)
# lists the tools and calls them, one with progress; curl sends a raw POST
# (200 with the JSON answer) and a GET (405, Allow: POST). grpc-js cancels
# more listen streams than a connection has calls, one after the other
# (each must free its call). The app requires a bearer token, as it does
# by default (here from MCPWIRE_DEVICE_TOKEN): every client sends it
# (grpc-js and the Python SDK from DEVICE_TOKEN, the probe and the embassy
# client from MCPWIRE_TOKEN, curl from a header file), and grpc-js and curl
# without it or with a wrong one are refused (UNAUTHENTICATED / 401 and the
# RFC 6750 challenge). A second instance of the app, run with --no-auth,
# warns that it is open and serves grpc-js and curl without a token.
#
#   sudo ./scripts/interop-embassy-host.sh
#
# Everything happens inside a network namespace this script makes and
# removes (a unique name, mcpwire-emb-PID): three TAP devices in it,
# bridged, with 10.77.0.1/24 on the kernel side (the bridge), the device app
# on 10.77.0.2 behind the first, the embassy client on 10.77.0.3 behind the
# second, the app with --no-auth on 10.77.0.4 behind the third, the other
# clients in the same namespace. No traffic leaves the namespace. The app is
# stopped by its PID and the namespace deleted on exit, whatever happens.
#
# Needs root and /dev/net/tun; without them it exits 77 (skipped), except in
# CI (CI=true), where that is a failure. Needs node and npm: @grpc/grpc-js
# 1.14.7 and @grpc/proto-loader 0.8.1 are installed into
# tests/grpc/node_modules when missing, mcp 2.3.0 into the venv .venv.
# Needs curl.
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
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
dir=$root/tests/grpc

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
tap_open=mcptap2
bridge=mcpbr0
client_side=10.77.0.3/24
host_side=10.77.0.1/24
device=10.77.0.2
device_open=10.77.0.4
# The device app's token (a test value, nothing secret). It reaches every
# process through the environment or a file, never an argument.
token=interop-device-token
port=50051

# After the EXIT trap of lib.sh stopped the app.
on_exit() { ip netns del "$ns" 2>/dev/null || true; }

command -v curl >/dev/null || cannot "no curl (Debian: apt-get install curl)"

printf '==> setup\n'
grpc_js || exit 2
python_venv mcp==2.3.0 || exit 2
python=$root/.venv/bin/python
if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    note "cargo build --release -p mcpwire-device-host"
    quietly "${cargo_tools[@]}" build --release -p mcpwire-device-host --features typed --bins || exit 2
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
for t in "$tap" "$tap_client" "$tap_open"; do
    in_ns ip tuntap add dev "$t" mode tap
    in_ns ip link set "$t" master "$bridge"
    in_ns ip link set "$t" up
done
in_ns ip addr add "$host_side" dev "$bridge"
in_ns ip link set "$bridge" up

# `ip netns exec` execs the app: its PID is the app's.
MCPWIRE_DEVICE_TOKEN=$token background "$work/app.out" "$work/app.err" \
    ip netns exec "$ns" "$app" --tap "$tap" --address "$device/24" -v
app_pid=$bg_pid
if ! wait_listening "$app_pid" "$work/app.out" 10 >/dev/null; then
    cat "$work/app.out" "$work/app.err"
    echo "the device app did not start" >&2
    exit 1
fi
note "$(head -n 1 "$work/app.out") (pid $app_pid, with a token)"
background "$work/app2.out" "$work/app2.err" ip netns exec "$ns" "$app" --tap "$tap_open" \
    --address "$device_open/24" --no-auth -v
app2_pid=$bg_pid
if ! wait_listening "$app2_pid" "$work/app2.out" 10 >/dev/null; then
    cat "$work/app2.out" "$work/app2.err"
    echo "the device app with --no-auth did not start" >&2
    exit 1
fi
note "$(head -n 1 "$work/app2.out") (pid $app2_pid, --no-auth)"
# The clients' token: DEVICE_TOKEN (grpc-js, the Python SDK), MCPWIRE_TOKEN
# (the probe, the embassy client) and a header file (curl).
export DEVICE_TOKEN=$token MCPWIRE_TOKEN=$token
printf 'authorization: Bearer %s\n' "$token" >"$work/auth.header"

# report OK CLIENT SCENARIO LINE
report() {
    if [[ $1 == true ]]; then
        scenario_ok "$2" "$3" "$4"
    else
        scenario_failed "$2" "$3"
        detail "$4"
    fi
}

# json_scenarios CLIENT OUT ERR RC NAME: the result lines of a client that
# ran RC, one JSON object a scenario ({"scenario":"...","ok":true,...}); no
# such line at all fails the scenario NAME.
json_scenarios() {
    local client=$1 out=$2 err=$3 rc=$4 name=$5 line scenario ran=0
    while IFS= read -r line; do
        [[ $line == '{'* ]] || continue
        ran=$((ran + 1))
        scenario=$(sed -n 's/.*"scenario":"\([^"]*\)".*/\1/p' <<<"$line")
        if [[ $line == *'"ok":true'* ]]; then
            report true "$client" "$scenario" "$line"
        else
            report false "$client" "$scenario" "$line"
        fi
    done <"$out"
    if ((ran == 0)); then
        report false "$client" "$name" "exit $rc, no scenario ran: $(tail -n 5 "$err" | tr '\n' ' ')"
    fi
}

start=$SECONDS
printf '\n==> grpc-js (tests/grpc/device.js) -> %s:%s\n' "$device" "$port"
for s in discover tools-list read-sensor toggle progress cancel deadline concurrent listen-cancel; do
    rc=0
    bounded 60 ip netns exec "$ns" node "$dir/device.js" "$device:$port" "$s" >"$work/run.out" 2>"$work/run.err" || rc=$?
    line=$(tail -n 1 "$work/run.out")
    if ((rc == 0)); then
        report true grpc-js "$s" "$line"
    else
        report false grpc-js "$s" "exit $rc: $line $(tail -n 5 "$work/run.err" | tr '\n' ' ')"
    fi
done

printf '\n==> grpc-js, typed binding (tests/grpc/typed.js) -> %s:%s\n' "$device" "$port"
for s in device-list-tools device-read-sensor device-progress device-deadline device-cancel \
    device-no-resources unknown-tool; do
    rc=0
    bounded 60 ip netns exec "$ns" node "$dir/typed.js" "$device:$port" "$s" >"$work/run.out" 2>"$work/run.err" || rc=$?
    line=$(tail -n 1 "$work/run.out")
    if ((rc == 0)); then
        report true grpc-js-typed "$s" "$line"
    else
        report false grpc-js-typed "$s" "exit $rc: $line $(tail -n 5 "$work/run.err" | tr '\n' ' ')"
    fi
done

printf '\n==> tokio client (mcpwire-device-probe) -> %s:%s\n' "$device" "$port"
rc=0
bounded 180 ip netns exec "$ns" "$probe" "$device:$port" >"$work/probe.out" 2>"$work/probe.err" || rc=$?
json_scenarios channel "$work/probe.out" "$work/probe.err" "$rc" probe

printf '\n==> embassy client (mcpwire-device-client, %s on %s) -> %s:%s\n' "${client_side%/*}" "$tap_client" "$device" "$port"
rc=0
bounded 120 ip netns exec "$ns" "$client" --tap "$tap_client" --address "$client_side" --server "$device:$port" \
    >"$work/client.out" 2>"$work/client.err" || rc=$?
json_scenarios embassy "$work/client.out" "$work/client.err" "$rc" client

url=http://$device:$port/mcp
printf '\n==> python: mcp 2.3.0, Streamable HTTP (tests/grpc/device_http.py) -> %s\n' "$url"
rc=0
bounded 120 ip netns exec "$ns" "$python" "$dir/device_http.py" "$url" \
    >"$work/sdk.out" 2>"$work/sdk.err" || rc=$?
json_scenarios python "$work/sdk.out" "$work/sdk.err" "$rc" sdk

printf '\n==> curl -> %s\n' "$url"
# curl_post NAME JSON [CURL-ARG...]: a raw POST with the token, and the
# headers MCP 2026-07-28 §5 asks for; the status and HTTP version in
# $work/curl.status, the body in $work/curl.body.
curl_post() {
    local method
    method=$(sed -n 's/.*"method":"\([^"]*\)".*/\1/p' <<<"$2")
    bounded 20 ip netns exec "$ns" curl -sS --max-time 10 -o "$work/curl.body" \
        -w '%{http_code} %{http_version}' "${@:3}" -H @"$work/auth.header" \
        -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
        -H 'mcp-protocol-version: 2026-07-28' -H "mcp-method: $method" \
        --data "$2" "$url" >"$work/curl.status" 2>"$work/curl.err" || true
}
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
# Over HTTP/1.1, then over HTTP/2 with prior knowledge: the same port
# serves `POST /mcp` on the gRPC tunnel's connection too.
for version in 1.1 2; do
    args=()
    name=post
    [[ $version == 2 ]] && args=(--http2-prior-knowledge) name=h2-post
    curl_post tools-list '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{'"$meta"'}}' "${args[@]}"
    status=$(cat "$work/curl.status")
    body=$(cat "$work/curl.body" 2>/dev/null || true)
    if [[ $status == "200 $version" && $body == *'"read_sensor"'* && $body == *'"id":1'* ]]; then
        report true curl "$name" "HTTP/$version 200 $(head -c 120 <<<"$body")"
    else
        report false curl "$name" "status $status: $(head -c 300 <<<"$body") $(cat "$work/curl.err")"
    fi
done
rc=0
head=$(bounded 20 ip netns exec "$ns" curl -sS --max-time 10 -o /dev/null -D - -H @"$work/auth.header" "$url" \
    2>"$work/curl.err") || rc=$?
if [[ $head == 'HTTP/1.1 405'* && ${head,,} == *'allow: post'* ]]; then
    report true curl get-405 "$(head -n 1 <<<"$head" | tr -d '\r')"
else
    report false curl get-405 "exit $rc: $(tr '\r\n' '  ' <<<"$head") $(cat "$work/curl.err")"
fi

printf '\n==> the token: none, a wrong one, the right one -> %s:%s\n' "$device" "$port"
for s in auth-missing auth-wrong auth-ok; do
    rc=0
    bounded 60 ip netns exec "$ns" node "$dir/device.js" "$device:$port" "$s" \
        >"$work/run.out" 2>"$work/run.err" || rc=$?
    line=$(tail -n 1 "$work/run.out")
    if ((rc == 0)); then
        report true grpc-js "$s" "$line"
    else
        report false grpc-js "$s" "exit $rc: $line $(tail -n 5 "$work/run.err" | tr '\n' ' ')"
    fi
done
# curl_auth NAME ADDRESS HEADER-FILE STATUS CHALLENGE: a POST of
# tools/list to the app at ADDRESS with the authorization of HEADER-FILE
# (none when empty; a file keeps the token off the command line) gets
# STATUS and, when CHALLENGE is set, that WWW-Authenticate.
curl_auth() {
    local name=$1 address=$2 header=$3 want=$4 challenge=$5 head rc=0
    local args=(-sS --max-time 10 -o "$work/curl.body" -D -
        -H 'content-type: application/json' -H 'accept: application/json, text/event-stream'
        -H 'mcp-protocol-version: 2026-07-28' -H 'mcp-method: tools/list')
    [[ -n $header ]] && args+=(-H @"$header")
    head=$(bounded 20 ip netns exec "$ns" curl "${args[@]}" \
        --data '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{'"$meta"'}}' \
        "http://$address:$port/mcp" 2>"$work/curl.err") || rc=$?
    local status got
    status=$(head -n 1 <<<"$head" | tr -d '\r')
    got=$(grep -i '^www-authenticate:' <<<"$head" | sed 's/^[^:]*: *//' | tr -d '\r' || true)
    if [[ $status == "HTTP/1.1 $want"* && ($challenge == '' || $got == "$challenge") ]]; then
        report true curl "$name" "$status${got:+, WWW-Authenticate: $got}"
    else
        report false curl "$name" "exit $rc: $status, WWW-Authenticate: $got (want $want $challenge) $(cat "$work/curl.err")"
    fi
}
printf 'authorization: Bearer not-%s\n' "$token" >"$work/wrong.header"
curl_auth auth-missing "$device" '' 401 'Bearer realm="mcpwire"'
curl_auth auth-wrong "$device" "$work/wrong.header" 401 'Bearer realm="mcpwire", error="invalid_token"'
curl_auth auth-ok "$device" "$work/auth.header" 200 ''

printf '\n==> the device with --no-auth -> %s:%s\n' "$device_open" "$port"
# It says it is open, and serves callers without a token.
warning=$(grep -m 1 'warning: --no-auth' "$work/app2.err" || true)
if [[ $warning == *toggle_output* ]]; then
    report true device no-auth-warning "$warning"
else
    report false device no-auth-warning "no warning on its stderr: $(head -n 5 "$work/app2.err" | tr '\n' ' ')"
fi
rc=0
DEVICE_TOKEN='' bounded 60 ip netns exec "$ns" node "$dir/device.js" "$device_open:$port" tools-list \
    >"$work/run.out" 2>"$work/run.err" || rc=$?
line=$(tail -n 1 "$work/run.out")
if ((rc == 0)); then
    report true grpc-js no-auth-tools-list "$line"
else
    report false grpc-js no-auth-tools-list "exit $rc: $line $(tail -n 5 "$work/run.err" | tr '\n' ' ')"
fi
curl_auth no-auth-post "$device_open" '' 200 ''

# The apps must have lived through all of it.
for pid in "$app_pid" "$app2_pid"; do
    if kill -0 "$pid" 2>/dev/null; then
        report true device alive "pid $pid"
    else
        report false device alive "the device app $pid exited"
    fi
done
if ((failed > 0)); then
    note "device app log (last 30 lines):"
    tail -n 30 "$work/app.err" | sed 's/^/      /'
fi

scenarios_summary "$start"
