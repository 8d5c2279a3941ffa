#!/usr/bin/env bash
# Instructions per call: `mcpwire serve` (tokio driver) and the tonic server
# of the same tunnel (`tonic-tunnel-server`), each run under
# `valgrind --tool=callgrind` and driven by `mcpwire-load` with a fixed
# number of calls, so the count is the same work on both (issue #17).
#
#   ./scripts/bench-callgrind.sh
#
# For each server and scenario it counts the instructions (user space, all
# threads) of one run that starts the server, makes the calls and stops it,
# subtracts those of a run that only starts and stops it (the baseline),
# and divides by the calls. Prints a Markdown table with the ratio ours /
# tonic, and one `CALLGRIND` line per figure. First, the core's request
# check alone (core/examples/request_check: validate, locate, check and
# route a typical `tools/call` of `echo`) in instructions per request byte.
#
# Environment:
#   MCPWIRE_CALLGRIND_CALLS      echo calls per run (default 2000)
#   MCPWIRE_CALLGRIND_PROGRESS   progress calls per run (default 100)
#   MCPWIRE_CALLGRIND_CHECKS     request checks of that run (default 20000)
#   MCPWIRE_CALLGRIND_KEEP       a directory to keep the callgrind.out files
#                                in (for callgrind_annotate)
#   MCPWIRE_CALLGRIND_BRIDGE     forwarded calls of the bridge run (default
#                                20000; 0 leaves it out): `mcpwire bridge
#                                --listen` (a gRPC host, echo with 16 in
#                                flight) under callgrind before `mcpwire
#                                serve` (not measured), less a run that
#                                starts and stops the bridge
#   MCPWIRE_BENCH_ONLY           "mcpwire" to measure our server alone,
#                                "bridge" the bridge alone
#   MCPWIRE_CALLGRIND_MCPWIRE    another `mcpwire` binary to measure (a
#                                build of an earlier commit: before/after)
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

echo_calls=${MCPWIRE_CALLGRIND_CALLS:-2000}
progress_calls=${MCPWIRE_CALLGRIND_PROGRESS:-100}
keep=${MCPWIRE_CALLGRIND_KEEP:-}
only=${MCPWIRE_BENCH_ONLY:-}

log() { printf 'bench-callgrind: %s\n' "$*" >&2; }

if ! command -v valgrind >/dev/null 2>&1; then
    log "apt-get install valgrind"
    apt_install valgrind
fi

with_tonic=false
if [[ -z $only ]] &&
    cargo metadata --no-deps --format-version 1 2>/dev/null | grep -q '"name":"mcpwire-tonic-peer"'; then
    with_tonic=true
fi

build=(cargo build --release -p mcpwire-tokio --bin mcpwire -p mcpwire-bench --bin mcpwire-load)
if $with_tonic; then
    build+=(-p mcpwire-tonic-peer --bin tonic-tunnel-server)
fi
log "${build[*]}"
"${build[@]}"
target_dir=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target_dir/release

# instructions NAME SCENARIO CALLS EXE ARGS...: starts EXE under callgrind,
# makes CALLS calls of SCENARIO (none for 0), stops it with SIGTERM (so
# callgrind writes its totals) and prints the instructions it executed.
instructions() {
    local name=$1 scenario=$2 calls=$3 exe=$4
    shift 4
    local port addr pid rc=0 tag=$name-${scenario//:/_}-$calls
    local out=$work/$tag.callgrind err=$work/$tag.err
    port=$(free_port)
    background /dev/null "$err" valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$exe" "$@" --listen "127.0.0.1:$port"
    pid=$bg_pid
    addr=$(wait_listening "$pid" "$err" 120) || rc=$?
    if ((rc != 0)); then
        log "$name did not listen under callgrind:"
        cat "$err" >&2
        return 1
    fi
    if ((calls > 0)); then
        # The load tool's warm-up is off: every call is counted.
        "$bin/mcpwire-load" --server "$name=$addr,$pid" --scenarios "$scenario" \
            --calls "$calls" --warmup 0 --client-threads 1 >/dev/null 2>"$work/$tag.load" || {
            log "mcpwire-load failed on $name:"
            cat "$work/$tag.load" >&2
            return 1
        }
    fi
    stop_pids 60 "$pid"
    if [[ -n $keep ]]; then
        mkdir -p "$keep"
        cp "$out" "$keep/"
    fi
    # The summary line of a single dump (all threads in one file).
    sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$out" | head -n 1
}

servers=(mcpwire)
[[ $only == bridge ]] && servers=()
if $with_tonic; then
    servers+=(tonic)
fi
exe_of() {
    case $1 in
    mcpwire) printf '%s\n' "${MCPWIRE_CALLGRIND_MCPWIRE:-$bin/mcpwire}" serve ;;
    tonic) printf '%s\n' "$bin/tonic-tunnel-server" ;;
    esac
}

# The request check: a run of N checks less a run of none.
checks=${MCPWIRE_CALLGRIND_CHECKS:-20000}
log "cargo build --release -p mcpwire-core --example request_check"
cargo build --release -p mcpwire-core --example request_check
check_run() {
    local out=$work/request-check-$1.callgrind
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin/examples/request_check" "$1" \
        >"$work/request-check-$1.txt" 2>/dev/null
    sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$out" | head -n 1
}
check_base=$(check_run 0)
check_total=$(check_run "$checks")
request_bytes=$(sed -n 's/^request_bytes=\([0-9]*\).*/\1/p' "$work/request-check-$checks.txt")
grep -q "checked=$checks" "$work/request-check-$checks.txt" || {
    log "the request check refused its request:"
    cat "$work/request-check-$checks.txt" >&2
    exit 1
}
check_per_request=$(((check_total - check_base) / checks))
log "request check: $check_per_request instructions per request of $request_bytes bytes"

declare -A per_call
scenarios=("echo:16:1=$echo_calls" "progress:16:1=$progress_calls")
for s in "${servers[@]}"; do
    mapfile -t cmd < <(exe_of "$s")
    base=$(instructions "$s" none 0 "${cmd[@]}")
    log "$s: start and stop: $base instructions"
    for entry in "${scenarios[@]}"; do
        scenario=${entry%=*} calls=${entry#*=}
        total=$(instructions "$s" "$scenario" "$calls" "${cmd[@]}")
        per_call[$s,$scenario]=$(((total - base) / calls))
        log "$s: $scenario, $calls calls: $total instructions, ${per_call[$s,$scenario]} per call"
    done
done

# The bridge: its instructions per forwarded call (the server it forwards
# to runs outside callgrind).
bridge_calls=${MCPWIRE_CALLGRIND_BRIDGE:-20000}
bridge_scenario=echo:16:1
if ((bridge_calls > 0)); then
    port=$(free_port)
    background /dev/null "$work/bridge-server.err" "$bin/mcpwire" serve --listen "127.0.0.1:$port"
    bridge_server=$bg_pid
    server_addr=$(wait_listening "$bridge_server" "$work/bridge-server.err" 60)
    bridge_cmd=("${MCPWIRE_CALLGRIND_MCPWIRE:-$bin/mcpwire}" bridge --no-auth --to "grpc://$server_addr")
    base=$(instructions bridge none 0 "${bridge_cmd[@]}")
    log "bridge: start and stop: $base instructions"
    total=$(instructions bridge "$bridge_scenario" "$bridge_calls" "${bridge_cmd[@]}")
    per_call[bridge,$bridge_scenario]=$(((total - base) / bridge_calls))
    log "bridge: $bridge_scenario, $bridge_calls calls: $total instructions, ${per_call[bridge,$bridge_scenario]} per call"
    stop_pids 10 "$bridge_server"
fi

printf '| scenario | mcpwire instructions/call |'
$with_tonic && printf ' tonic instructions/call | ratio |'
printf '\n|---|---|'
$with_tonic && printf -- '---|---|'
printf '\n'
for entry in "${scenarios[@]}"; do
    [[ $only == bridge ]] && break
    scenario=${entry%=*}
    ours=${per_call[mcpwire,$scenario]}
    printf '| %s | %s |' "$scenario" "$ours"
    if $with_tonic; then
        theirs=${per_call[tonic,$scenario]}
        printf ' %s | %s× |' "$theirs" "$(python3 -c "print(f'{$ours / $theirs:.2f}')")"
    fi
    printf '\n'
done
if ((bridge_calls > 0)); then
    printf '| bridge, forwarded %s (gRPC host, gRPC server) | %s |\n' "$bridge_scenario" "${per_call[bridge,$bridge_scenario]}"
fi
printf '\nRequest check (core, %s-byte tools/call): %s instructions, %s per byte\n' \
    "$request_bytes" "$check_per_request" "$(python3 -c "print(f'{$check_per_request / $request_bytes:.1f}')")"
printf 'CALLGRIND request_check instructions_per_request=%s instructions_per_byte=%s\n' \
    "$check_per_request" "$(python3 -c "print(f'{$check_per_request / $request_bytes:.1f}')")"
if ((bridge_calls > 0)); then
    printf 'CALLGRIND bridge %s instructions_per_forwarded_call=%s\n' "$bridge_scenario" "${per_call[bridge,$bridge_scenario]}"
fi
for entry in "${scenarios[@]}"; do
    scenario=${entry%=*}
    for s in "${servers[@]}"; do
        printf 'CALLGRIND %s %s instructions_per_call=%s\n' "$scenario" "$s" "${per_call[$s,$scenario]}"
    done
done
