#!/usr/bin/env bash
# Typed gRPC binding interop: two real peers of /model_context_protocol.Mcp/
# with the vendored Google Cloud proto files (proto/proto/gcp/) call all
# eight RPCs of `mcpwire serve`'s demo: tests/grpc/typed.js (@grpc/grpc-js,
# the files loaded at run time) and tests/grpc/typed.py (grpcio, stubs
# generated at run time by grpc_tools.protoc into a temporary directory).
# Scenarios: the demo's tools, resource, templates and prompt, an error with
# its trailers (CallTool of an unknown tool, Complete on a server without
# completions), a multi round-trip call, dropped progress, a deadline and a
# cancel.
#
#   ./scripts/interop-grpc-typed.sh            build mcpwire, serve on a free 127.0.0.1 port, check it
#   ./scripts/interop-grpc-typed.sh HOST:PORT  check a running server (the demo tools)
#
# Setup installs @grpc/grpc-js and @grpc/proto-loader (tests/grpc/package.json)
# once, into tests/grpc/node_modules, and grpcio 1.85.3 and grpcio-tools
# 1.85.1 into the venv .venv (made if missing).
#
# Environment:
#   MCPWIRE_NO_BUILD=1   do not build target/release/mcpwire (use the one there)
#   MCPWIRE_BIN=PATH     the mcpwire binary to serve with (implies no build)
#
# Prints "ok CLIENT SCENARIO" or "FAILED CLIENT SCENARIO" per client and
# scenario, then "N passed, N failed"; exit 1 when a scenario failed, 2 on a
# setup error.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

scenarios=(list-tools call-tool unknown-tool input-required progress list-resources read-resource
    list-resource-templates list-prompts get-prompt complete deadline cancel)

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node and npm are needed (Debian: apt-get install nodejs npm)" >&2
    exit 2
fi
grpc_js || exit 2
python_venv grpcio==1.85.3 grpcio-tools==1.85.1 || exit 2
python=$root/.venv/bin/python

if (($# >= 1)); then
    addr=$1
else
    bin=${MCPWIRE_BIN:-$root/target/release/mcpwire}
    if [[ -z ${MCPWIRE_BIN:-} && ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
        "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire >&2
    fi
    [[ -x $bin ]] || { echo "no $bin" >&2; exit 2; }
    background "$work/server.out" "$work/server.err" "$bin" serve --listen 127.0.0.1:0
    addr=$(wait_listening "$bg_pid" "$work/server.err" 10) || {
        echo "server did not start:" >&2
        cat "$work/server.err" >&2
        exit 2
    }
fi

passed=0
failed=0
# run CLIENT SCENARIO COMMAND...: one scenario of one client.
run() {
    local client=$1 s=$2 rc=0 line
    shift 2
    bounded 60 "$@" "$addr" "$s" >"$work/run.out" 2>"$work/run.err" || rc=$?
    line=$(tail -n 1 "$work/run.out")
    if ((rc == 0)); then
        echo "ok $client $s"
        [[ ${MCPWIRE_VERBOSE:-} == 1 ]] && note "$line"
        passed=$((passed + 1))
    else
        echo "FAILED $client $s: exit $rc"
        [[ -n $line ]] && note "$line"
        [[ -s $work/run.err ]] && sed 's/^/      stderr: /' "$work/run.err" | tail -n 20
        failed=$((failed + 1))
    fi
    return 0
}

for s in "${scenarios[@]}"; do
    run grpc-js "$s" node "$root/tests/grpc/typed.js"
done
for s in "${scenarios[@]}"; do
    run grpcio "$s" "$python" "$root/tests/grpc/typed.py"
done

echo "$passed passed, $failed failed"
((failed == 0))
