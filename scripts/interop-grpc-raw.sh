#!/usr/bin/env bash
# Raw HTTP/2 real-peer checks of the gRPC tunnel (/mcp.zig.transport.v1.Mcp/Call):
# tests/grpc/raw_h2.py (Python h2, h2c prior knowledge) and one curl call.
#
#   ./scripts/interop-grpc-raw.sh            build mcpwire, serve on a free 127.0.0.1 port, check it
#   ./scripts/interop-grpc-raw.sh HOST:PORT  check a running server
#
# Environment:
#   MCPWIRE_NO_BUILD=1   do not build target/release/mcpwire (use the one there)
#
# Prints the raw_h2.py lines, one line for curl, and a final
# "N passed, N failed"; exit 1 when a check failed, 2 on a setup error.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
py=$root/.venv/bin/python
[[ -x $py ]] || { echo "no $py (needs h2==4.4.1)" >&2; exit 2; }
command -v curl >/dev/null || { echo "no curl" >&2; exit 2; }

if (($# >= 1)); then
    addr=$1
else
    if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
        "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire >&2
    fi
    bin=$root/target/release/mcpwire
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

# raw h2 checks
set +e
"$py" "$root/tests/grpc/raw_h2.py" "$addr" | tee "$work/raw.out"
set -e
p=$(grep -c '^ok ' "$work/raw.out" || true)
f=$(grep -c '^FAIL ' "$work/raw.out" || true)
grep -q '^[0-9]* passed, [0-9]* failed$' "$work/raw.out" || { echo "FAIL raw_h2.py: no summary line"; f=$((f + 1)); }
passed=$((passed + p))
failed=$((failed + f))

# one curl call: tools/call echo
text="hello from curl"
"$py" - "$work/req.bin" "$text" <<'PY'
import json, struct, sys
j = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": sys.argv[2]},
                           "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                     "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
assert len(j) < 128 * 128
n = len(j)
v = bytes([n]) if n < 128 else bytes([(n & 0x7F) | 0x80, n >> 7])
m = b"\x0a" + v + j
open(sys.argv[1], "wb").write(struct.pack(">BI", 0, len(m)) + m)
PY
set +e
curl -sS --http2-prior-knowledge -D "$work/headers.txt" -o "$work/resp.bin" \
    -H 'content-type: application/grpc' -H 'te: trailers' \
    -H 'mcp-protocol-version: 2026-07-28' -H 'mcp-method: tools/call' -H 'mcp-name: echo' \
    --data-binary @"$work/req.bin" "http://$addr/mcp.zig.transport.v1.Mcp/Call" 2>"$work/curl.err"
rc=$?
set -e
why=
if ((rc != 0)); then
    why="curl exit $rc: $(tr '\n' ' ' <"$work/curl.err")"
elif ! tr -d '\r' <"$work/headers.txt" | grep -qi '^grpc-status: 0$'; then
    why="no 'grpc-status: 0' in headers: $(tr -d '\r' <"$work/headers.txt" | tr '\n' '|')"
elif ! grep -qF "$text" "$work/resp.bin"; then
    why="echoed text not in the response: $(head -c 200 "$work/resp.bin" | tr -c '[:print:]' '.')"
fi
if [[ -z $why ]]; then
    echo "ok curl-echo"
    passed=$((passed + 1))
else
    echo "FAIL curl-echo: $why"
    failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
((failed == 0))
