#!/usr/bin/env bash
# stdio interop: the official MCP SDKs launch `mcpwire serve --stdio` as
# their child process and talk MCP 2026-07-28 over its stdin and stdout:
# the Python SDK (mcp 2.3.0, tests/stdio/sdk_client.py), then the
# TypeScript SDK (@modelcontextprotocol/client 2.4.0,
# tests/stdio/ts_client.mjs).
#
#   ./scripts/interop-stdio.sh [scenario...]
#
# Setup installs what is missing, once: mcp 2.3.0 into the venv .venv (made
# if missing) and the npm packages that tests/stdio/package.json pins into
# tests/stdio/node_modules (needs node 20 or later and npm). Then it builds
# mcpwire (release, the test tools' profile; set MCPWIRE_NO_BUILD=1 to use
# target/release/mcpwire as it is) and runs every scenario (or only the
# named ones) with each client, each bounded in time.
#
# Scenarios: discover (the SDK's server/discover probe negotiates
# 2026-07-28), tools-list, progress (a call with progress notifications),
# cancel (notifications/cancelled stops the handler; no response follows),
# tool-error (a tool's JSON-RPC error, an unknown tool), listen (two
# tools/list_changed events of the demo's listen source), eof-exit (raw
# pipes, Python only: stdout holds only JSON-RPC lines, bad lines are
# answered, the call in flight at the end of stdin finishes and the process
# exits 0). The TypeScript client runs the named scenarios it has.
#
# Each client prints "ok NAME" or "FAILED NAME: why" per scenario and "N
# passed, N failed"; the exit status is 1 when a scenario of either client
# failed, 2 on a setup error.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

python_venv mcp==2.3.0 || exit 2
python=$root/.venv/bin/python
note "python $("$python" -c 'import sys; from importlib.metadata import version; print(sys.version.split()[0], "mcp", version("mcp"))')"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node and npm are needed (Debian: apt-get install nodejs npm)" >&2
    exit 2
fi
npm_pinned tests/stdio || exit 2
note "node $(node --version)"

if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    bounded 1800 "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire --quiet || exit 2
fi
binary=$root/target/release/mcpwire
[[ -x $binary ]] || {
    echo "no $binary" >&2
    exit 2
}

# Both clients run whatever the other did; the worst status stands.
rc=0
printf '\n==> python: mcp 2.3.0\n'
bounded 300 "$python" "$root/tests/stdio/sdk_client.py" "$binary" "$@" || rc=$?

# The Python-only scenarios are left out of the TypeScript client's list;
# nothing left of a non-empty list means it has nothing to run.
ts_names=()
for name in "$@"; do
    [[ $name == eof-exit ]] || ts_names+=("$name")
done
printf '\n==> typescript: @modelcontextprotocol/client %s\n' \
    "$(node -p 'require("./tests/stdio/package.json").dependencies["@modelcontextprotocol/client"]')"
if (($# > 0 && ${#ts_names[@]} == 0)); then
    note "no TypeScript scenario named"
else
    ts_rc=0
    bounded 300 node "$root/tests/stdio/ts_client.mjs" "$binary" "${ts_names[@]}" || ts_rc=$?
    if ((ts_rc > rc)); then rc=$ts_rc; fi
fi

# ---------------------------------------------------------------------------
# mcpwire's own stdio client (`mcpwire call --stdio -v`) launching stdio
# servers nobody here wrote: tests/stdio/sdk_server.py on the Python SDK
# mcp 2.3.0 (.venv; modern: the server/discover probe is answered) and on
# mcp 1.26.0 (the venv .peers/venv-mcp1, made if missing; the 2025-11-25
# era: the probe fails, the client falls back to initialize). With each:
# the era -v reports, tools/list, a call, a call with progress, a tool
# error. Runs when no scenario is named. Prints "ok NAME" or "FAILED NAME:
# why"; a failure makes the exit status 1.
if (($# == 0)); then
    legacy_venv=$root/.peers/venv-mcp1
    if ! "$legacy_venv/bin/python" -c 'import sys; from importlib.metadata import version; sys.exit(version("mcp") != "1.26.0")' >/dev/null 2>&1; then
        note "python venv .peers/venv-mcp1: mcp==1.26.0"
        mkdir -p "$root/.peers"
        { quietly python3 -m venv "$legacy_venv" &&
            quietly "$legacy_venv/bin/pip" install -q --disable-pip-version-check mcp==1.26.0; } || exit 2
    fi
    client_failed=0
    # client_check NAME PYTHON ERA-TEXT: the client against one server.
    client_check() {
        local name=$1 py=$2 era=$3 out err
        local server=(-- "$py" "$root/tests/stdio/sdk_server.py")
        err=$(mktemp)
        check() { # WHAT CONDITION-TEXT
            if [[ $2 == ok ]]; then echo "ok $name $1"; else
                echo "FAILED $name $1: $2"
                client_failed=1
            fi
        }
        out=$(bounded 60 "$binary" call --stdio -v list "${server[@]}" 2>"$err") || true
        if grep -q "mcpwire: $era" "$err"; then check era ok; else check era "$(grep '^mcpwire' "$err" | head -3)"; fi
        note "$(grep '^mcpwire: era' "$err")"
        if [[ $out == *'"echo"'* && $out == *'"count"'* ]]; then check tools-list ok; else check tools-list "${out:0:200}"; fi
        out=$(bounded 60 "$binary" call --stdio tool add '{"a":2,"b":3}' "${server[@]}" 2>"$err") || true
        if [[ $out == *'"text": "5"'* ]]; then check call ok; else check call "${out:0:200} $(tail -2 "$err")"; fi
        out=$(bounded 60 "$binary" call --stdio tool count '{"steps":3}' --progress "${server[@]}" 2>"$err") || true
        if [[ $out == *'counted 3'* ]] && (($(grep -c '^progress' "$err") == 3)); then check progress ok; else
            check progress "${out:0:200} $(grep -c '^progress' "$err") progress lines"
        fi
        out=$(bounded 60 "$binary" call --stdio tool fail '{}' "${server[@]}" 2>"$err") || true
        if [[ $out == *'"isError": true'* ]]; then check tool-error ok; else check tool-error "${out:0:200}"; fi
        rm -f "$err"
    }
    printf '\n==> mcpwire call --stdio: Python SDK mcp 2.3.0 server (modern)\n'
    client_check sdk-2.3.0 "$root/.venv/bin/python" 'era modern, version 2026-07-28, .*no fallback'
    printf '\n==> mcpwire call --stdio: Python mcp 1.26.0 server (2025-11-25, fallback)\n'
    client_check mcp-1.26.0 "$legacy_venv/bin/python" 'era legacy (2025-11-25 lifecycle), version 2025-11-25, .*fallback: '
    if ((client_failed && rc < 1)); then rc=1; fi
fi
exit "$rc"
