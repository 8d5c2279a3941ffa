#!/usr/bin/env bash
# The load benchmark: our tunnel server (`mcpwire serve`, tokio driver) and a
# tonic server of the same tunnel and tools (`tonic-tunnel-server`), side by
# side in one run, driven by the same h2 client (`mcpwire-load`).
#
#   ./scripts/bench-load.sh [mcpwire-load options...]
#
# Builds the three binaries (release), starts each server on 127.0.0.1 with a
# free port, waits for its "listening on" line, runs the scenarios with the
# servers taking turns, prints the Markdown table and the BENCH lines, and
# stops the servers by PID (also on error or Ctrl-C).
#
# Environment:
#   MCPWIRE_BENCH_SECONDS   measured seconds per scenario and round (default 5)
#   MCPWIRE_BENCH_WARMUP    warm-up seconds before each (default 1)
#   MCPWIRE_BENCH_ROUNDS    rounds, the servers alternating (default 1)
#   MCPWIRE_BENCH_IDLE      connections of the memory scenario (default 500)
#   MCPWIRE_BENCH_ONLY      "mcpwire" to measure our server alone
#   MCPWIRE_BENCH_OUT       also write the report to this file
#
# Without the package mcpwire-tonic-peer in the workspace (or with
# MCPWIRE_BENCH_ONLY=mcpwire) only our server is measured, and the table has
# no ratio column. When the package is there and does not build, the script
# fails.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

seconds=${MCPWIRE_BENCH_SECONDS:-5}
warmup=${MCPWIRE_BENCH_WARMUP:-1}
rounds=${MCPWIRE_BENCH_ROUNDS:-1}
idle=${MCPWIRE_BENCH_IDLE:-500}
only=${MCPWIRE_BENCH_ONLY:-}

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

with_tonic=false
if [[ $only != mcpwire ]]; then
    if cargo metadata --no-deps --format-version 1 2>/dev/null | grep -q '"name":"mcpwire-tonic-peer"'; then
        with_tonic=true
    else
        log "package mcpwire-tonic-peer is not in the workspace: measuring mcpwire alone"
    fi
fi

# `--bin` applies to every package named: name each binary.
build=(cargo build --release -p mcpwire-tokio --bin mcpwire -p mcpwire-bench --bin mcpwire-load)
if $with_tonic; then
    build+=(-p mcpwire-tonic-peer --bin tonic-tunnel-server)
fi
log "${build[*]}"
"${build[@]}"

target_dir=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target_dir/release

servers=()
# start NAME BINARY ARGS...: starts a server on a free port of 127.0.0.1,
# waits for "listening on ADDR" on its stderr, and adds NAME=ADDR,PID.
start() {
    local name=$1 exe=$2
    shift 2
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
    servers+=(--server "$name=$addr,$pid")
}

start mcpwire "$bin/mcpwire" serve
if $with_tonic; then
    start tonic "$bin/tonic-tunnel-server"
fi

report=$work/report.md
log "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/mcpwire-load" "${servers[@]}" --duration "$seconds" --warmup "$warmup" \
    --rounds "$rounds" --idle-connections "$idle" "$@" | tee "$report"
log "done $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n ${MCPWIRE_BENCH_OUT:-} ]]; then
    cp "$report" "$MCPWIRE_BENCH_OUT"
fi
