#!/usr/bin/env bash
# The load benchmark, side by side in one run, each binding driven by one
# client of `mcpwire-load` (the same bytes for every server):
#   gRPC tunnel: our server (`mcpwire serve`, tokio driver) and a tonic
#     server of the same tunnel and tools (`tonic-tunnel-server`);
#   Streamable HTTP (HTTP/1.1 keep-alive POST /mcp): our server on the same
#     port, an rmcp 3.11 server (`rmcp-http-server`: stateless, JSON
#     responses, axum) and the Python SDK 2.3.0's (tests/peers/sdk_server.py,
#     stateless, its default SSE responses);
#   stdio: `mcpwire serve --stdio`, `rmcp-stdio-server` and the Python SDK's,
#     each started by the load tool as its child.
#
#   ./scripts/bench-load.sh [mcpwire-load options...]
#
# Builds the binaries (release), starts each network server on 127.0.0.1
# with a free port, waits for its "listening on" line, runs the scenarios
# with the servers of a binding taking turns, prints a Markdown table per
# binding (ratio: ours / tonic, ours / rmcp) and the BENCH lines, and stops
# the servers by PID (also on error or Ctrl-C).
#
# When `mcpwire serve` does not answer MCP over HTTP/1.1 on its port (a
# probe call), the HTTP table has no figures of ours and no ratio: the
# other servers are measured alone.
#
# Environment:
#   MCPWIRE_BENCH_SECONDS   measured seconds per scenario and round (default 5)
#   MCPWIRE_BENCH_WARMUP    warm-up seconds before each (default 1)
#   MCPWIRE_BENCH_ROUNDS    rounds, the servers alternating (default 1)
#   MCPWIRE_BENCH_IDLE      connections of the memory scenarios (default 500)
#   MCPWIRE_BENCH_ONLY      "mcpwire" to measure our server alone
#   MCPWIRE_BENCH_BINDINGS  the bindings to measure (default "grpc,http,stdio")
#   MCPWIRE_BENCH_PYTHON    "0" to leave the Python SDK server out (it needs
#                           mcp==2.3.0 in .venv, installed when missing)
#   MCPWIRE_BENCH_OUT       also write the report to this file
#   MCPWIRE_BENCH_BRIDGE    "0" to leave out the bridge run (below)
#   MCPWIRE_BENCH_BRIDGE_SCENARIOS  its scenarios (default
#                           echo:1:1,echo:16:1,stdio-echo:1,stdio-echo:16)
#   MCPWIRE_BENCH_BRIDGE_THREADS    its host's worker threads (default 1)
#   MCPWIRE_BENCH_BRIDGE_ROUNDS     its rounds (default: MCPWIRE_BENCH_ROUNDS,
#                           at least 3: its p50 is held to a limit, and one
#                           short round on a busy two-core machine is one
#                           sample of a noisy moment)
#
# The bridge run, after the others: `mcpwire bridge --listen` (a gRPC host)
# and `mcpwire bridge --stdio-host`, both to our gRPC server, beside our
# direct server on the same binding, in a table of their own: the bridge's
# CPU per forwarded call beside the direct call's, and each echo's p50
# held to one extra hop (`mcpwire-load --bridge`: at most the direct call
# on the host's binding plus one direct gRPC call at as many in flight).
# Its host is one event loop (`--client-threads 1`), as the SDK hosts are:
# with two worker threads on a two-core machine that also runs the bridge
# and the server, the host's own thread wake-ups become part of what is
# measured.
#
# Without the package mcpwire-tonic-peer (mcpwire-rmcp-peer) in the
# workspace, or with MCPWIRE_BENCH_ONLY=mcpwire, our server is measured
# without tonic (rmcp). When such a package is there and does not build,
# the script fails. The Python server is left out, with a note, when its
# venv cannot be set up.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

seconds=${MCPWIRE_BENCH_SECONDS:-5}
warmup=${MCPWIRE_BENCH_WARMUP:-1}
rounds=${MCPWIRE_BENCH_ROUNDS:-1}
idle=${MCPWIRE_BENCH_IDLE:-500}
only=${MCPWIRE_BENCH_ONLY:-}
bindings=${MCPWIRE_BENCH_BINDINGS:-grpc,http,stdio}
want() { [[ ,$bindings, == *,$1,* ]]; }

log() { printf 'bench-load: %s\n' "$*" >&2; }

# Every connection of the memory scenario is a descriptor here and one in
# the server (which inherits this limit).
want_fds=$((idle + 512))
if [[ $(ulimit -n) != unlimited ]] && (($(ulimit -n) < want_fds)); then
    hard=$(ulimit -Hn)
    if [[ $hard == unlimited ]] || ((hard >= want_fds)); then
        ulimit -n "$want_fds"
    else
        ulimit -n "$hard"
        log "open-file limit only $hard (hard); lower MCPWIRE_BENCH_IDLE if the memory scenario fails"
    fi
fi

# has_package NAME: whether the workspace has the package NAME.
packages=$(cargo metadata --no-deps --format-version 1 2>/dev/null || true)
has_package() { grep -q "\"name\":\"$1\"" <<<"$packages"; }

with_tonic=false
with_rmcp=false
with_python=false
if [[ $only != mcpwire ]]; then
    if ! want grpc; then
        :
    elif has_package mcpwire-tonic-peer; then
        with_tonic=true
    else
        log "package mcpwire-tonic-peer is not in the workspace: measuring mcpwire alone over gRPC"
    fi
    if ! want http && ! want stdio; then
        :
    elif has_package mcpwire-rmcp-peer; then
        with_rmcp=true
    else
        log "package mcpwire-rmcp-peer is not in the workspace: measuring mcpwire alone over HTTP and stdio"
    fi
    if [[ ${MCPWIRE_BENCH_PYTHON:-1} != 0 ]] && { want http || want stdio; }; then
        if python_venv mcp==2.3.0 >&2; then
            with_python=true
        else
            log "no Python venv with mcp 2.3.0: leaving the Python SDK server out"
        fi
    fi
fi

# `--bin` applies to every package named: name each binary.
build=(cargo build --release -p mcpwire-tokio --bin mcpwire -p mcpwire-bench --bin mcpwire-load)
if $with_tonic; then
    build+=(-p mcpwire-tonic-peer --bin tonic-tunnel-server)
fi
if $with_rmcp; then
    build+=(-p mcpwire-rmcp-peer --bin rmcp-http-server --bin rmcp-stdio-server)
fi
log "${build[*]}"
"${build[@]}"

target_dir=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target_dir/release

servers=()
# start FLAG NAME BINARY ARGS...: starts a server on a free port of
# 127.0.0.1, waits for "listening on ADDR" on its stderr, adds FLAG
# NAME=ADDR,PID to the load tool's arguments and sets started_addr and
# started_pid.
start() {
    local flag=$1 name=$2 exe=$3
    shift 3
    local port addr pid rc=0 err=$work/$name.err
    port=$(free_port)
    background /dev/null "$err" "$exe" "$@" --listen "127.0.0.1:$port"
    pid=$bg_pid
    addr=$(wait_listening "$pid" "$err" 30) || rc=$?
    if ((rc == 1)); then
        log "$name exited before listening:"
        cat "$err" >&2
        return 1
    elif ((rc != 0)); then
        log "$name did not print 'listening on' within 30 s"
        return 1
    fi
    log "$name: pid $pid, $addr"
    servers+=("$flag" "$name=$addr,$pid")
    started_addr=$addr started_pid=$pid
}

# Ours first in each binding: the ratio column is first / second.
bridge_to= bridge_to_pid=
if want grpc || want http; then
    start --server mcpwire "$bin/mcpwire" serve
    bridge_to=$started_addr bridge_to_pid=$started_pid
    if ! want grpc; then
        servers=()
    fi
    # The same process and port serve HTTP/1.1 too, once they do: left out
    # of the HTTP figures while a probe call gets no answer.
    if want http; then
        servers+=(--http-server "mcpwire=$started_addr,$started_pid,optional")
    fi
fi
if $with_tonic; then
    start --server tonic "$bin/tonic-tunnel-server"
fi
if want http && $with_rmcp; then
    start --http-server rmcp "$bin/rmcp-http-server"
fi
python=$root/.venv/bin/python
if want http && $with_python; then
    # A peer nobody here wrote: left out rather than failing the run.
    if ! start --http-server python "$python" "$root/tests/peers/sdk_server.py"; then
        log "leaving the Python SDK server out"
        with_python=false
    fi
fi
if want stdio; then
    # Split at whitespace by the load tool: no spaces in these paths.
    servers+=(--stdio-server "mcpwire=$bin/mcpwire serve --stdio")
    if $with_rmcp; then
        servers+=(--stdio-server "rmcp=$bin/rmcp-stdio-server")
    fi
    if $with_python; then
        servers+=(--stdio-server "python=$python $root/tests/peers/sdk_server.py --stdio")
    fi
fi
scenarios=()
if [[ $bindings != grpc,http,stdio ]]; then
    list=()
    want grpc && list+=(memory echo:1:1 echo:16:1 typed-echo:16:1 echo:256:1 echo:256:16 progress:1:1 progress:16:1)
    want http && list+=(http-memory http-echo:1 http-echo:16 http-echo:64 http-progress:1)
    want stdio && list+=(stdio-echo:1 stdio-echo:16)
    scenarios=(--scenarios "$(IFS=,; echo "${list[*]}")")
fi

report=$work/report.md
log "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/mcpwire-load" "${servers[@]}" "${scenarios[@]}" --duration "$seconds" --warmup "$warmup" \
    --rounds "$rounds" --idle-connections "$idle" "$@" | tee "$report"

# The bridge run (see the top): the CPU measured in its columns is the
# bridge's alone; latency is both hops.
if [[ ${MCPWIRE_BENCH_BRIDGE:-1} != 0 && -n $bridge_to ]] && want grpc; then
    servers=(--server "mcpwire=$bridge_to,$bridge_to_pid")
    start --server bridge-grpc "$bin/mcpwire" bridge --no-auth --to "grpc://$bridge_to"
    if want stdio; then
        servers+=(--stdio-server "mcpwire=$bin/mcpwire serve --stdio"
            --stdio-server "bridge-grpc=$bin/mcpwire bridge --stdio-host --to grpc://$bridge_to")
    fi
    default=echo:1:1,echo:16:1
    want stdio && default+=,stdio-echo:1,stdio-echo:16
    echo
    "$bin/mcpwire-load" "${servers[@]}" --bridge bridge-grpc --client-threads "${MCPWIRE_BENCH_BRIDGE_THREADS:-1}" \
        --scenarios "${MCPWIRE_BENCH_BRIDGE_SCENARIOS:-$default}" --duration "$seconds" \
        --warmup "$warmup" --rounds "${MCPWIRE_BENCH_BRIDGE_ROUNDS:-$((rounds > 3 ? rounds : 3))}" | tee -a "$report"
fi
log "done $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n ${MCPWIRE_BENCH_OUT:-} ]]; then
    cp "$report" "$MCPWIRE_BENCH_OUT"
fi
