#!/usr/bin/env bash
# The client benchmark: CPU per call of MCP clients calling the same server,
# side by side in one run (issue #14):
#   mcpwire's client (`mcpwire-client-load`: `mcpwire_tokio::Client`),
#   rmcp 3.11's (`rmcp-client-load`, 2026-07-28 lifecycle, reqwest over HTTP)
#   and the Python SDK 2.3.0's (tests/peers/sdk_client_load.py, mode 2026-07-28),
# each calling `echo` (a text of 100 octets) with 1 and 16 calls in flight,
# over stdio (each client launches `mcpwire serve --stdio` as its child) and
# over Streamable HTTP (`mcpwire serve` on 127.0.0.1, one server for all).
# A client measures its own CPU time (user + system, all threads) over its
# calls only; the server's CPU is not in it.
#
#   ./scripts/bench-client.sh
#
# Prints a Markdown table per binding (ratio: ours / rmcp) and BENCH lines;
# fails when a client fails its calls.
#
# Environment:
#   MCPWIRE_BENCH_CLIENT_CALLS   calls per Rust client run (default 50000;
#                                the Python client makes a tenth)
#   MCPWIRE_BENCH_BINDINGS       the bindings to measure (default "stdio,http")
#   MCPWIRE_BENCH_PYTHON         "0" to leave the Python SDK client out
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

calls=${MCPWIRE_BENCH_CLIENT_CALLS:-50000}
bindings=${MCPWIRE_BENCH_BINDINGS:-stdio,http}
want() { [[ ,$bindings, == *,$1,* ]]; }
log() { printf 'bench-client: %s\n' "$*" >&2; }

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log "cargo build --release (mcpwire, mcpwire-client-load, rmcp-client-load)"
cargo build --release --quiet -p mcpwire-tokio --bin mcpwire \
    -p mcpwire-bench --bin mcpwire-client-load \
    -p mcpwire-rmcp-peer --bin rmcp-client-load
target_dir=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target_dir/release

clients=(mcpwire rmcp)
with_python=true
if [[ ${MCPWIRE_BENCH_PYTHON:-1} == 0 ]]; then
    with_python=false
elif ! python_venv mcp==2.3.0 >&2; then
    log "no Python venv with mcp 2.3.0: leaving the Python SDK client out"
    with_python=false
fi
if $with_python; then clients+=(python); fi
python=$root/.venv/bin/python

client_command() {
    case $1 in
    mcpwire) printf '%s\n' "$bin/mcpwire-client-load" ;;
    rmcp) printf '%s\n' "$bin/rmcp-client-load" ;;
    python) printf '%s\n' "$python" "$root/tests/peers/sdk_client_load.py" ;;
    esac
}

url=
if want http; then
    port=$(free_port)
    background /dev/null "$work/serve.err" "$bin/mcpwire" serve --listen "127.0.0.1:$port"
    server_pid=$bg_pid
    addr=$(wait_listening "$server_pid" "$work/serve.err" 30) || {
        log "mcpwire serve did not start:"
        cat "$work/serve.err" >&2
        exit 1
    }
    url=http://$addr/mcp
    log "mcpwire serve: pid $server_pid, $url"
fi

failed=0
declare -A cpu_us calls_s
for binding in stdio http; do
    want "$binding" || continue
    for c in 1 16; do
        for client in "${clients[@]}"; do
            n=$calls
            [[ $client == python ]] && n=$((calls / 10))
            mapfile -t cmd < <(client_command "$client")
            if [[ $binding == stdio ]]; then
                target=(-- "$bin/mcpwire" serve --stdio)
            else
                target=(--url "$url")
            fi
            out=$work/$client-$binding-$c.out
            if ! bounded 300 "${cmd[@]}" --calls "$n" --concurrency "$c" "${target[@]}" \
                >"$out" 2>"$work/$client-$binding-$c.err"; then
                log "$client over $binding, $c in flight, failed:"
                tail -n 5 "$work/$client-$binding-$c.err" >&2
                failed=1
                continue
            fi
            line=$(grep '^CLIENT_LOAD ' "$out" || true)
            read -r wall cpu < <(sed -n 's/.*wall_s=\([0-9.]*\) cpu_s=\([0-9.]*\).*/\1 \2/p' <<<"$line")
            key=$client,$binding,$c
            cpu_us[$key]=$(python3 -c "print(f'{$cpu * 1e6 / $n:.1f}')")
            calls_s[$key]=$(python3 -c "print(f'{$n / max($wall, 1e-9):.0f}')")
            log "$client over $binding, $c in flight: $line"
        done
    done
done

ratio() { # ratio A B: A / B, or "-" when either is missing
    if [[ -n ${1:-} && -n ${2:-} ]]; then python3 -c "print(f'{$1 / $2:.2f}')"; else printf -- '-\n'; fi
}
for binding in stdio http; do
    want "$binding" || continue
    printf '\n### Client CPU per call, %s (`echo`, 100-octet text)\n\n' "$binding"
    printf '| in flight |'
    for client in "${clients[@]}"; do printf ' %s µs/call | %s calls/s |' "$client" "$client"; done
    printf ' mcpwire / rmcp |\n|---|'
    for _ in "${clients[@]}"; do printf -- '---:|---:|'; done
    printf -- '---:|\n'
    for c in 1 16; do
        printf '| %s |' "$c"
        for client in "${clients[@]}"; do
            printf ' %s | %s |' "${cpu_us[$client,$binding,$c]:--}" "${calls_s[$client,$binding,$c]:--}"
        done
        printf ' %s× |\n' "$(ratio "${cpu_us[mcpwire,$binding,$c]:-}" "${cpu_us[rmcp,$binding,$c]:-}")"
    done
done
printf '\n'
for binding in stdio http; do
    want "$binding" || continue
    for c in 1 16; do
        printf 'BENCH scenario=client_%s_echo_c%s figure=client_cpu_us_per_call' "$binding" "$c"
        for client in "${clients[@]}"; do printf ' %s=%s' "$client" "${cpu_us[$client,$binding,$c]:--}"; done
        printf ' ratio=%s\n' "$(ratio "${cpu_us[mcpwire,$binding,$c]:-}" "${cpu_us[rmcp,$binding,$c]:-}")"
    done
done
exit "$failed"
