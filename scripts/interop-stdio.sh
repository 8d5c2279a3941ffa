#!/usr/bin/env bash
# stdio interop: the official Python MCP SDK (mcp 2.3.0) launches
# `mcpwire serve --stdio` as its child process and talks MCP 2026-07-28 over
# its stdin and stdout (tests/stdio/sdk_client.py).
#
#   ./scripts/interop-stdio.sh [scenario...]
#
# Setup installs what is missing, once: mcp 2.3.0 into the venv .venv (made
# if missing). Then it builds mcpwire (release, the test tools' profile; set
# MCPWIRE_NO_BUILD=1 to use target/release/mcpwire as it is) and runs every
# scenario (or only the named ones), each bounded in time.
#
# Scenarios: discover (the SDK's server/discover probe negotiates
# 2026-07-28), tools-list, progress (a call with progress notifications),
# cancel (notifications/cancelled stops the handler; no response follows),
# tool-error (a tool's JSON-RPC error, an unknown tool), listen (two
# tools/list_changed events of the demo's listen source), eof-exit (raw
# pipes: stdout holds only JSON-RPC lines, bad lines are answered, the call
# in flight at the end of stdin finishes and the process exits 0).
#
# Prints "ok NAME" or "FAILED NAME: why" per scenario and "N passed, N
# failed"; the exit status is 1 when a scenario failed, 2 on a setup error.
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

bounded 300 "$python" "$root/tests/stdio/sdk_client.py" "$binary" "$@"
