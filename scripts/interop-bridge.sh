#!/usr/bin/env bash
# Bridge interop: a stdio host nobody here wrote, the official Python SDK
# (mcp 2.3.0, tests/stdio/sdk_client.py), launches `mcpwire bridge
# --stdio-host --to http://.../mcp` as if it were a stdio server; the bridge
# forwards each request to `mcpwire serve` over Streamable HTTP (the demo
# with --tick-ms 300, or the conformance fixture set), then the same over
# the gRPC tunnel (--to grpc://...).
#
#   ./scripts/interop-bridge.sh [scenario...]
#
# The SDK's stdio scenarios run unchanged: the "binary" it launches is a
# wrapper that execs the bridge, to the fixture server when the SDK asks
# for `--fixtures conformance`, to the demo otherwise. Scenarios: discover,
# tools-list, progress, cancel (the cancelled call ends downstream; no
# response follows), tool-error, listen, fixture-mrtr, fixture-errors,
# fixture-listen, eof-exit (raw pipes: only JSON-RPC lines on stdout, bad
# lines answered, the call in flight at the end of stdin finishes, exit 0).
#
# Setup installs mcp 2.3.0 into the venv .venv once (made if missing), then
# builds mcpwire (release, the test tools' profile; MCPWIRE_NO_BUILD=1 uses
# target/release/mcpwire as it is). Each SDK run prints "ok NAME" or
# "FAILED NAME: why" and "N passed, N failed"; the exit status is 1 when a
# scenario failed, 2 on a setup error.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

python_venv mcp==2.3.0 || exit 2
python=$root/.venv/bin/python
note "python $("$python" -c 'import sys; from importlib.metadata import version; print(sys.version.split()[0], "mcp", version("mcp"))')"

if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    bounded 1800 "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire --quiet || exit 2
fi
binary=$root/target/release/mcpwire
[[ -x $binary ]] || {
    echo "no $binary" >&2
    exit 2
}

serve() {
    local name=$1 addr
    shift
    background "$work/$name.out" "$work/$name.log" "$binary" serve --listen "127.0.0.1:$(free_port)" "$@"
    if ! addr=$(wait_listening "$bg_pid" "$work/$name.log" 10); then
        note "the $name server did not start:"
        sed 's/^/      /' "$work/$name.log" | tail -n 20
        exit 2
    fi
    printf -v "${name}_addr" '%s' "$addr"
}
serve demo --tick-ms 300
serve fixtures --fixtures conformance

# wrapper NAME DEMO-ADDRESS FIXTURES-ADDRESS: an executable that the SDK
# launches as `NAME serve --stdio ...`; it runs the bridge instead, its
# stderr (the startup line, diagnostics) appended to $work/NAME.stderr.
wrapper() {
    local path=$work/$1
    cat >"$path" <<EOF
#!/usr/bin/env bash
to=$2
for arg in "\$@"; do [[ \$arg == --fixtures ]] && to=$3; done
exec "$binary" bridge --stdio-host --to "\$to" 2>>"$work/$1.stderr"
EOF
    chmod +x "$path"
    printf '%s\n' "$path"
}

rc=0
for transport in http grpc; do
    case $transport in
    http) demo=http://$demo_addr/mcp fixtures=http://$fixtures_addr/mcp ;;
    grpc) demo=grpc://$demo_addr fixtures=grpc://$fixtures_addr ;;
    esac
    host=$(wrapper "bridge-$transport" "$demo" "$fixtures")
    printf '\n==> Python SDK (stdio host) -> mcpwire bridge -> %s\n' "$demo"
    bounded 600 "$python" "$root/tests/stdio/sdk_client.py" "$host" "$@" || rc=1
    if [[ -s $work/bridge-$transport.stderr ]]; then
        note "bridge: $(head -n 1 "$work/bridge-$transport.stderr")"
    fi
    if ((rc != 0)) && [[ -s $work/bridge-$transport.stderr ]]; then
        note "the bridge's stderr (last lines):"
        tail -n 20 "$work/bridge-$transport.stderr" | sed 's/^/      /'
    fi
done
exit "$rc"
