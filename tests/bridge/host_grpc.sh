#!/usr/bin/env bash
# mcpwire's own gRPC client (`mcpwire call --server`, the Client on the
# tunnel) as a host of `mcpwire bridge --listen`: one row of the bridge
# matrix (scripts/interop-bridge.sh), the same checks as host_py.py.
#
#   MCPWIRE_BIN=/abs/mcpwire host_grpc.sh ROW PHASE http PROFILE-JSON
#
# The profile's url and timeout_url name the bridge's port (its gRPC
# tunnel shares it with Streamable HTTP); its bearer token is read from
# token_file into MCPWIRE_TOKEN (never an argument). cancel: the call's own
# deadline (--timeout-ms 800) abandons it in flight (RST_STREAM), after its
# first progress notification. Prints "PASS|FAIL|SKIP ROW CHECK detail"
# per check; exits 1 when one failed.
set -uo pipefail

row=$1 phase=$2 profile=$4
bin=${MCPWIRE_BIN:?MCPWIRE_BIN names the mcpwire binary}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

field() { python3 -c 'import json, sys; v = json.loads(sys.argv[1]).get(sys.argv[2], ""); print(v if isinstance(v, str) else json.dumps(v))' "$profile" "$1"; }
addr_of() { local u=${1#http://}; printf '%s\n' "${u%%/*}"; }

addr=$(addr_of "$(field url)")
timeout_addr=$(addr_of "$(field timeout_url)")
tool=$(field tool) args=$(field args) text=$(field text)
bad_tool=$(field bad_tool) bad_args=$(field bad_args)
slow=$(field slow) slow_args=$(field slow_args)
restart=$(field restart) kill_cmd=$(field kill)
[[ -n $bad_tool ]] || bad_tool=$tool
token=$(<"$(field token_file)")
bad_token=$(<"$(field bad_token_file)")

failed=0
report() {
    [[ $1 == FAIL ]] && failed=$((failed + 1))
    printf '%s %s %s %s\n' "$1" "$row" "$2" "$3"
}

# call [--server ADDR] [--token T | --no-token] ARG...: `mcpwire call`,
# its stdout in $work/out, its stderr in $work/err; the status is its own.
call() {
    local server=$addr tok=$token
    while :; do
        case $1 in
        --server) server=$2 && shift 2 ;;
        --token) tok=$2 && shift 2 ;;
        --no-token) tok= && shift ;;
        *) break ;;
        esac
    done
    if [[ -n $tok ]]; then
        MCPWIRE_TOKEN=$tok timeout 20 "$bin" call --server "$server" "$@" >"$work/out" 2>"$work/err"
    else
        env -u MCPWIRE_TOKEN timeout 20 "$bin" call --server "$server" "$@" >"$work/out" 2>"$work/err"
    fi
}

# The read-only call, and what it returned.
read_call() {
    call tool "$tool" "$args" || return 1
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
texts = [b.get("text") for b in r.get("content", []) if b.get("type") == "text"]
sys.exit(0 if texts == [sys.argv[2]] and not r.get("isError") else 1)' "$work/out" "$text"
}

why() { tail -n 2 "$work/err" | tr '\n' ' ' | cut -c1-160; }

check_discover() {
    call discover || { echo "exit $?: $(why)"; return 1; }
    grep -q '"capabilities"' "$work/out" || { echo "no capabilities"; return 1; }
    echo "server/discover over the tunnel"
}

check_tools_list() {
    call list || { echo "exit $?: $(why)"; return 1; }
    local t
    for t in "$tool" "$slow"; do
        grep -q "\"name\": \"$t\"" "$work/out" || { echo "$t not listed"; return 1; }
    done
    echo "$tool, $slow listed"
}

check_read_call() {
    read_call || { echo "$tool: $(why)"; return 1; }
    echo "$tool -> \"$text\""
}

check_malformed_args() {
    if call tool "$bad_tool" "$bad_args"; then
        grep -q '"isError": true' "$work/out" || { echo "no error"; return 1; }
        seen="isError result"
    else
        grep -q -- '-32602' "$work/err" || { echo "not -32602: $(why)"; return 1; }
        seen="JSON-RPC error -32602"
    fi
    read_call || { echo "the next call failed: $(why)"; return 1; }
    echo "$seen"
}

check_cancel() {
    if call tool "$slow" "$slow_args" --progress --timeout-ms 800; then
        echo "the slow call ended before its deadline"
        return 1
    fi
    grep -q '^progress' "$work/err" || { echo "no progress before the cancel: $(why)"; return 1; }
    grep -q 'DEADLINE_EXCEEDED' "$work/err" || { echo "$(why)"; return 1; }
    read_call || { echo "the next call failed: $(why)"; return 1; }
    echo "abandoned at its 800 ms deadline after progress; next call answered"
}

check_timeout() {
    local start=$SECONDS
    if call --server "$timeout_addr" tool "$slow" "$slow_args"; then
        echo "a result, not a timeout"
        return 1
    fi
    ((SECONDS - start < 8)) || { echo "too late: $((SECONDS - start)) s"; return 1; }
    local seen
    seen=$(grep -o 'DeadlineExceeded\|DEADLINE_EXCEEDED\|-32001' "$work/err" | head -n 1)
    [[ -n $seen ]] || { echo "not a deadline: $(why)"; return 1; }
    read_call || { echo "the next call failed: $(why)"; return 1; }
    echo "the bridge's deadline: $seen after $((SECONDS - start)) s"
}

check_unauthorized() {
    local seen=()
    if call --no-token list; then echo "answered without a token"; return 1; fi
    grep -q UNAUTHENTICATED "$work/err" || { echo "no token: $(why)"; return 1; }
    seen+=("no-token: UNAUTHENTICATED")
    if call --token "$bad_token" list; then echo "answered with a wrong token"; return 1; fi
    grep -q UNAUTHENTICATED "$work/err" || { echo "wrong token: $(why)"; return 1; }
    seen+=("bad-token: UNAUTHENTICATED")
    echo "${seen[*]}"
}

check_restart() {
    local i
    for i in 1 2 3; do
        bash -c "$restart" >/dev/null 2>&1 || { echo "restart $i failed"; return 1; }
        read_call || { echo "after restart $i: $(why)"; return 1; }
    done
    echo "3 restarts of the bridge"
}

check_disconnect() {
    MCPWIRE_TOKEN=$token timeout 30 "$bin" call --server "$addr" tool "$slow" "$slow_args" --progress \
        >"$work/slow.out" 2>"$work/slow.err" &
    local pid=$! i
    for ((i = 0; i < 100; i++)); do
        grep -q '^progress' "$work/slow.err" 2>/dev/null && break
        sleep 0.1
    done
    grep -q '^progress' "$work/slow.err" || { kill "$pid" 2>/dev/null; echo "no progress in 10 s"; return 1; }
    bash -c "$kill_cmd" || { kill "$pid" 2>/dev/null; echo "the kill failed"; return 1; }
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null
        echo "the call in flight had no end within 10 s of the kill"
        return 1
    fi
    local rc=0
    wait "$pid" || rc=$?
    ((rc != 0)) || { echo "the call in flight got a result"; return 1; }
    local after
    if call tool "$tool" "$args"; then after="next call: a result"; else after="next call: an error"; fi
    echo "in-flight error \"$(tail -n 1 "$work/slow.err" | cut -c1-80)\"; $after"
}

case $phase in
ordinary) checks=(discover tools-list read-call malformed-args cancel timeout unauthorized restart) ;;
*) checks=(disconnect) ;;
esac
for c in "${checks[@]}"; do
    if detail=$("check_${c//-/_}"); then
        report PASS "$c" "$detail"
    else
        report FAIL "$c" "$detail"
    fi
done
((failed == 0))
