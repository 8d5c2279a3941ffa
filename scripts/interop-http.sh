#!/usr/bin/env bash
# Streamable HTTP interop (MCP 2026-07-28 §5): `mcpwire serve` answers
# HTTP/1.1 `POST /mcp` and gRPC on one port. Three servers on free loopback
# ports: the demo (`--tick-ms 300`), the conformance fixture set
# (`--fixtures conformance`) and the demo with a bearer token (`--token`).
#
#   ./scripts/interop-http.sh [check...]
#
# curl checks the raw statuses and headers: 405 with `Allow: POST` for GET
# and DELETE (get-405, delete-405), 415 (media-415), 404 for another path
# (path-404), 400 with -32700 for bad JSON and invalid UTF-8 (bad-json,
# bad-utf8), 400 with -32020 for a mismatched `Mcp-Name` (name-mismatch),
# 400 with -32022 and `data.supported` for a version not served
# (version-32022), 404 with -32601 for `initialize` with modern `_meta`
# and 400 with -32022 naming the served versions for a legacy one (§5.8:
# initialize-modern, initialize-legacy), a request with `Mcp-Session-Id`
# and `Last-Event-ID` served as any other, no session minted (no-session),
# 202 with no body for a notification (notification-202), 403 for a
# foreign `Origin` (origin-403), 401 with `WWW-Authenticate: Bearer`
# without the token and 200 with it (token-401), the SSE headers and the
# events of a progress call in order (sse-progress), two requests on one
# connection (keep-alive), 413 for a body over the 4 MiB limit (body-413;
# and to httpx2, the Python SDK's client, which sends the whole body before
# it reads, over HTTP/1.1 and HTTP/2: httpx-413), 431 for a head over 8 KiB (head-431), and a gRPC call (`mcpwire call
# --server ADDR list`) on the port while an HTTP listen stream is open
# there (grpc-same-port). Then the official SDK clients over HTTP, the
# scenarios of the stdio run (tests/stdio/sdk_client.py and ts_client.mjs,
# given the URLs): Python `mcp` 2.3.0 and TypeScript
# `@modelcontextprotocol/client` 2.4.0 (python, typescript). With names,
# only those checks (or clients) run.
#
# Setup installs what is missing, once (as interop-stdio.sh does): mcp
# 2.3.0 into .venv and the npm packages of tests/stdio/package.json. It
# builds mcpwire (release, the test tools' profile; MCPWIRE_NO_BUILD=1
# uses target/release/mcpwire as it is).
#
# Prints "ok" or "FAIL" per check and client scenario, then the counts;
# exits 1 when one failed, 2 on a setup error. MCPWIRE_VERBOSE=1 shows
# what each check saw.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

python_venv mcp==2.3.0 h2==4.4.1 || exit 2
python=$root/.venv/bin/python
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node and npm are needed (Debian: apt-get install nodejs npm)" >&2
    exit 2
fi
npm_pinned tests/stdio || exit 2
command -v curl >/dev/null || {
    echo "curl is needed" >&2
    exit 2
}
note "$(curl --version | head -n 1)"

if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    bounded 1800 "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire --quiet || exit 2
fi
binary=$root/target/release/mcpwire
[[ -x $binary ]] || {
    echo "no $binary" >&2
    exit 2
}

checks=(get-405 delete-405 media-415 path-404 bad-json bad-utf8 name-mismatch version-32022
    initialize-modern initialize-legacy no-session notification-202 origin-403 token-401 sse-progress
    keep-alive body-413 httpx-413 head-431 grpc-same-port)
h2_checks=(h2-json h2-sse-progress h2-notification-202 h2-get-405 h2-body-413 h2-grpc-one-connection)
clients=(python typescript)
# shellcheck disable=SC2034 # read by check_names
all=("${checks[@]}" "${h2_checks[@]}" "${clients[@]}")
check_names check all "$@"
selected=("$@")

# --- the servers --------------------------------------------------------------

token=interop-http-token
# serve NAME ARG...: `mcpwire serve` on a port of its choosing with ARG...;
# sets NAME_addr to its address once it printed its listening line.
serve() {
    local name=$1 addr
    shift
    background "$work/$name.out" "$work/$name.log" "$binary" serve --listen 127.0.0.1:0 "$@"
    if ! addr=$(wait_listening "$bg_pid" "$work/$name.log" 10); then
        note "the $name server did not start:"
        sed 's/^/      /' "$work/$name.log" | tail -n 20
        exit 2
    fi
    printf -v "${name}_addr" '%s' "$addr"
}
serve demo --tick-ms 300
serve fixtures --fixtures conformance
serve auth --token "$token"
# shellcheck disable=SC2154 # set by serve
demo_url=http://$demo_addr/mcp fixtures_url=http://$fixtures_addr/mcp auth_url=http://$auth_addr/mcp
note "demo $demo_url, fixtures $fixtures_url, with a token $auth_url"

# --- curl ---------------------------------------------------------------------

VERSION=2026-07-28
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
HEADERS=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
    -H "MCP-Protocol-Version: $VERSION")

# hit NAME CURL-ARG...: one curl exchange; the response head in
# $work/NAME.head, the body in $work/NAME.body; prints the status.
hit() {
    local name=$1
    shift
    curl -sS --max-time 10 -o "$work/$name.body" -D "$work/$name.head" -w '%{http_code}' "$@"
}

# post NAME URL METHOD BODY CURL-ARG...: a POST of BODY with the standard
# headers and `Mcp-Method: METHOD`; prints the status.
post() {
    local name=$1 url=$2 method=$3 body=$4
    shift 4
    hit "$name" -X POST "${HEADERS[@]}" -H "Mcp-Method: $method" --data-binary "$body" "$@" "$url"
}

# header NAME FIELD: the value of FIELD in the response head of NAME (the
# last one with it), without its CR.
header() {
    tr -d '\r' <"$work/$1.head" | sed -n "s/^$2:[[:space:]]*//Ip" | tail -n 1
}

# expect_status NAME GOT WANT
expect_status() {
    [[ $2 == "$3" ]] || {
        echo "HTTP $2, want $3: $(head -c 300 "$work/$1.body" 2>/dev/null)"
        return 1
    }
}

# body_check NAME PYTHON-EXPR: whether the expression holds of the body of
# NAME: `r` is its JSON, `events` the JSON of its SSE `data:` lines.
body_check() {
    python3 - "$work/$1.body" "$2" <<'PY'
import json, sys
raw = open(sys.argv[1], "rb").read()
text = raw.decode("utf-8", "replace")
events = [json.loads(l[5:]) for l in text.splitlines() if l.startswith("data:")]
try:
    r = json.loads(raw)
except ValueError:
    r = None
# In parentheses: the expression may span lines.
ok = eval(f"({sys.argv[2]})", {"r": r, "events": events, "raw": raw, "json": json})
if not ok:
    print(f"not {sys.argv[2]}: {text[:400]}")
sys.exit(0 if ok else 1)
PY
}

# jsonrpc_error NAME STATUS CODE: the answer of NAME is STATUS with a
# JSON-RPC error CODE.
jsonrpc_error() {
    local got
    got=$(tr -d '\r' <"$work/$1.head" | sed -n 's/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' | tail -n 1)
    expect_status "$1" "$got" "$2" || return 1
    body_check "$1" "r is not None and r['error']['code'] == $3"
}

echo_call() {
    printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"text":"%s"},%s}}' \
        "$1" "$2" "$META"
}

get_405() {
    local s
    s=$(hit get -X GET -H 'Accept: text/event-stream' "$demo_url")
    expect_status get "$s" 405 || return 1
    if [[ $(header get Allow) != POST ]]; then
        echo "Allow: $(header get Allow)"
        return 1
    fi
}

delete_405() {
    local s
    s=$(hit delete -X DELETE "$demo_url")
    expect_status delete "$s" 405 || return 1
    if [[ $(header delete Allow) != POST ]]; then
        echo "Allow: $(header delete Allow)"
        return 1
    fi
}

media_415() {
    local s
    s=$(hit media -X POST -H 'Content-Type: text/plain' -H 'Accept: application/json, text/event-stream' \
        -H "MCP-Protocol-Version: $VERSION" -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' \
        --data-binary "$(echo_call 1 hi)" "$demo_url")
    expect_status media "$s" 415
}

path_404() {
    local s
    s=$(post path "http://$demo_addr/other" tools/call "$(echo_call 1 hi)" -H 'Mcp-Name: echo')
    expect_status path "$s" 404
}

bad_json() {
    post bad-json "$demo_url" tools/list '{"jsonrpc":"2.0","id":1,"method":' >/dev/null
    jsonrpc_error bad-json 400 -32700
}

bad_utf8() {
    # A string with an octet that is no UTF-8 (0xff).
    printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\377b"},%s}}' \
        "$META" >"$work/bad-utf8.json"
    post bad-utf8 "$demo_url" tools/call "@$work/bad-utf8.json" -H 'Mcp-Name: echo' >/dev/null
    jsonrpc_error bad-utf8 400 -32700
}

name_mismatch() {
    post mismatch "$demo_url" tools/call "$(echo_call 7 hi)" -H 'Mcp-Name: progress' >/dev/null
    jsonrpc_error mismatch 400 -32020 && body_check mismatch "r['id'] == 7"
}

version_32022() {
    local body='{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}'
    hit version -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: v999.0.0' -H 'Mcp-Method: tools/list' --data-binary "$body" "$demo_url" >/dev/null
    jsonrpc_error version 400 -32022 &&
        body_check version "'$VERSION' in r['error']['data']['supported'] and r['error']['data']['requested'] == 'v999.0.0' and r['id'] == 3"
}

initialize_modern() {
    post init-modern "$demo_url" initialize \
        "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\",\"params\":{$META}}" >/dev/null
    jsonrpc_error init-modern 404 -32601
}

initialize_legacy() {
    # A 2025 client: no version header, no `_meta`. §5.8: a modern-only
    # server answers 400 naming the versions it serves.
    local body='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}'
    hit init-legacy -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        --data-binary "$body" "$demo_url" >/dev/null
    jsonrpc_error init-legacy 400 -32022 &&
        body_check init-legacy "'$VERSION' in r['error']['data']['supported']"
}

no_session() {
    local s
    s=$(post session "$demo_url" tools/call "$(echo_call 8 hi)" -H 'Mcp-Name: echo' \
        -H 'Mcp-Session-Id: 1868a90c' -H 'Last-Event-ID: 3')
    expect_status session "$s" 200 || return 1
    if [[ -n $(header session Mcp-Session-Id) ]]; then
        echo "Mcp-Session-Id: $(header session Mcp-Session-Id)"
        return 1
    fi
    body_check session "r['id'] == 8 and r['result']['content'][0]['text'] == 'hi'"
}

notification_202() {
    local s
    s=$(post note "$demo_url" notifications/cancelled \
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}')
    expect_status note "$s" 202 || return 1
    if [[ -s $work/note.body ]]; then
        echo "a body: $(head -c 200 "$work/note.body")"
        return 1
    fi
}

origin_403() {
    local s
    s=$(post origin "$demo_url" tools/call "$(echo_call 1 hi)" -H 'Mcp-Name: echo' \
        -H 'Origin: http://evil.example.com')
    expect_status origin "$s" 403 || return 1
    # The same request from the server's own origin is served.
    s=$(post origin-ok "$demo_url" tools/call "$(echo_call 1 hi)" -H 'Mcp-Name: echo' \
        -H "Origin: http://$demo_addr")
    expect_status origin-ok "$s" 200
}

token_401() {
    local s
    s=$(post noauth "$auth_url" tools/call "$(echo_call 1 hi)" -H 'Mcp-Name: echo')
    expect_status noauth "$s" 401 || return 1
    [[ $(header noauth WWW-Authenticate) == Bearer* ]] || {
        echo "WWW-Authenticate: $(header noauth WWW-Authenticate)"
        return 1
    }
    s=$(post badauth "$auth_url" tools/call "$(echo_call 1 hi)" -H 'Mcp-Name: echo' \
        -H 'Authorization: Bearer wrong')
    expect_status badauth "$s" 401 || return 1
    s=$(post auth "$auth_url" tools/call "$(echo_call 1 hi)" -H 'Mcp-Name: echo' \
        -H "Authorization: Bearer $token")
    expect_status auth "$s" 200 && body_check auth "r['result']['content'][0]['text'] == 'hi'"
}

sse_progress() {
    local s body
    body="{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"progress\",\"arguments\":{\"steps\":3,\"delay_ms\":50},\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"$VERSION\",\"io.modelcontextprotocol/clientCapabilities\":{},\"progressToken\":\"p5\"}}}"
    s=$(post sse "$demo_url" tools/call "$body" -H 'Mcp-Name: progress')
    expect_status sse "$s" 200 || return 1
    local media cache accel
    media=$(header sse Content-Type) cache=$(header sse Cache-Control) accel=$(header sse X-Accel-Buffering)
    [[ $media == text/event-stream* && $cache == *no-cache* && $accel == no ]] || {
        echo "Content-Type: $media, Cache-Control: $cache, X-Accel-Buffering: $accel"
        return 1
    }
    # Three progress events for p5, in order, then the result, then nothing.
    body_check sse "[e.get('params', {}).get('progress') for e in events[:-1]] == [1, 2, 3]
        and all(e['method'] == 'notifications/progress' and e['params']['progressToken'] == 'p5' for e in events[:-1])
        and events[-1]['id'] == 5 and events[-1]['result']['content'][0]['text'] == 'done after 3 steps'"
}

keep_alive() {
    # Two URLs on one curl: the second request reuses the connection.
    local out
    out=$(curl -sS --max-time 10 -X POST "${HEADERS[@]}" -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' \
        --data-binary "$(echo_call 1 hi)" -o /dev/null -o /dev/null \
        -w '%{http_code} %{num_connects}\n' "$demo_url" "$demo_url")
    [[ $(tr '\n' ' ' <<<"$out") == "200 1 200 0 " ]] || {
        echo "status and new connections per request: $(tr '\n' ' ' <<<"$out")"
        return 1
    }
}

# big_json: 5 MiB of JSON in $work/big.json; the limit is 4 MiB
# (ServerConfig::max_message_bytes).
big_json() {
    [[ -f $work/big.json ]] ||
        python3 -c 'import sys; sys.stdout.write("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"" + "x" * (5 << 20) + "\"}}}")' \
            >"$work/big.json"
}

body_413() {
    big_json
    local s
    s=$(post big "$demo_url" tools/call "@$work/big.json" -H 'Mcp-Name: echo') || true
    expect_status big "$s" 413
}

httpx_413() {
    # httpx2 (the HTTP client of the Python SDK 2.x, httpx's successor)
    # writes the whole 5 MiB body before it reads: the server answers 413
    # early and must let it finish (a lingering close on HTTP/1.1, the rest
    # of the stream's body read and dropped on HTTP/2), or the client sees
    # a broken connection or waits for window until its timeout.
    "$python" - "$demo_url" "$VERSION" <<'PY'
import sys
import httpx2 as httpx
url, version = sys.argv[1], sys.argv[2]
body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"' + b"x" * (5 << 20) + b'"}}}'
headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
           "mcp-protocol-version": version, "mcp-method": "tools/call", "mcp-name": "echo"}
for http2 in (False, True):
    with httpx.Client(http1=not http2, http2=http2, timeout=20) as client:
        r = client.post(url, content=body, headers=headers)
        if r.status_code != 413 or r.http_version != ("HTTP/2" if http2 else "HTTP/1.1"):
            sys.exit(f"{r.http_version} {r.status_code}")
PY
}

head_431() {
    local s
    s=$(post head "$demo_url" tools/call "$(echo_call 1 hi)" -H 'Mcp-Name: echo' \
        -H "X-Padding: $(head -c 12000 /dev/zero | tr '\0' a)") || true
    expect_status head "$s" 431
}

grpc_same_port() {
    # An HTTP listen stream stays open (about 2 s) on the demo's port while
    # gRPC calls it; the stream then carries the acknowledgment and the
    # ticker's events.
    local listen="{\"jsonrpc\":\"2.0\",\"id\":\"l1\",\"method\":\"subscriptions/listen\",\"params\":{\"notifications\":{\"toolsListChanged\":true},$META}}"
    curl -sS -N --max-time 2 -X POST "${HEADERS[@]}" -H 'Mcp-Method: subscriptions/listen' \
        --data-binary "$listen" -o "$work/listen.body" -D "$work/listen.head" "$demo_url" 2>/dev/null &
    local curl_pid=$! rc=0
    sleep 0.5
    bounded 20 "$binary" call --server "$demo_addr" list >"$work/grpc.out" 2>"$work/grpc.err" || rc=$?
    wait "$curl_pid" || true
    if ((rc != 0)) || ! grep -q '"echo"' "$work/grpc.out"; then
        echo "mcpwire call list: status $rc: $(head -c 300 "$work/grpc.err") $(head -c 300 "$work/grpc.out")"
        return 1
    fi
    body_check listen "events[0]['method'] == 'notifications/subscriptions/acknowledged'
        and sum(e.get('method') == 'notifications/tools/list_changed' for e in events) >= 2"
}

start=$SECONDS
printf '\n==> curl\n'
for name in "${checks[@]}"; do
    wanted "$name" || continue
    if why=$("${name//-/_}" 2>&1); then
        scenario_ok curl "$name" "$why"
    else
        scenario_failed curl "$name"
        detail "${why:-failed}"
    fi
done

# --- curl over HTTP/2 ---------------------------------------------------------

# The same endpoint over cleartext HTTP/2 (prior knowledge), which the
# port also serves: a JSON answer with its length (h2-json), the events of
# a progress call (h2-sse-progress), 202 for a notification, 405 with
# `allow: POST` for GET, and an MCP POST then a gRPC tunnel call on one
# connection (h2-grpc-one-connection, with Python h2 on two streams).

# h2 NAME CURL-ARG...: `hit` over HTTP/2.
h2() {
    local name=$1
    shift
    hit "$name" --http2-prior-knowledge "$@"
}

h2_json() {
    local s
    s=$(h2 h2-json -X POST "${HEADERS[@]}" -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' \
        --data-binary "$(echo_call 11 h2)" "$demo_url")
    expect_status h2-json "$s" 200 || return 1
    grep -q '^HTTP/2 200' "$work/h2-json.head" || {
        echo "not HTTP/2: $(head -n 1 "$work/h2-json.head")"
        return 1
    }
    [[ $(header h2-json content-type) == application/json &&
        $(header h2-json content-length) == "$(wc -c <"$work/h2-json.body" | tr -d ' ')" ]] || {
        echo "content-type $(header h2-json content-type), length $(header h2-json content-length)"
        return 1
    }
    body_check h2-json "r['id'] == 11 and r['result']['content'][0]['text'] == 'h2'"
}

h2_sse_progress() {
    local s body
    body="{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{\"name\":\"progress\",\"arguments\":{\"steps\":3,\"delay_ms\":50},\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"$VERSION\",\"io.modelcontextprotocol/clientCapabilities\":{},\"progressToken\":\"p12\"}}}"
    s=$(h2 h2-sse -X POST "${HEADERS[@]}" -H 'Mcp-Method: tools/call' -H 'Mcp-Name: progress' \
        --data-binary "$body" "$demo_url")
    expect_status h2-sse "$s" 200 || return 1
    [[ $(header h2-sse content-type) == text/event-stream && $(header h2-sse cache-control) == no-cache ]] || {
        echo "content-type $(header h2-sse content-type), cache-control $(header h2-sse cache-control)"
        return 1
    }
    body_check h2-sse "[e.get('params', {}).get('progress') for e in events[:-1]] == [1, 2, 3]
        and all(e['method'] == 'notifications/progress' for e in events[:-1])
        and events[-1]['id'] == 12 and events[-1]['result']['content'][0]['text'] == 'done after 3 steps'"
}

h2_notification_202() {
    local s
    s=$(h2 h2-note -X POST "${HEADERS[@]}" -H 'Mcp-Method: notifications/initialized' \
        --data-binary "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\",\"params\":{$META}}" "$demo_url")
    expect_status h2-note "$s" 202
}

h2_get_405() {
    local s
    s=$(h2 h2-get -X GET -H 'Accept: text/event-stream' "$demo_url")
    expect_status h2-get "$s" 405 || return 1
    [[ $(header h2-get allow) == POST ]] || {
        echo "allow: $(header h2-get allow)"
        return 1
    }
}

h2_body_413() {
    # As body-413 over HTTP/2: the 413 comes before curl sent all of the
    # body, and the rest is read and dropped (curl 7.88 reports a reset
    # stream, not the status, when the rest is refused with RST_STREAM).
    big_json
    local s
    s=$(h2 h2-big -X POST "${HEADERS[@]}" -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' \
        --data-binary "@$work/big.json" "$demo_url") || true
    expect_status h2-big "$s" 413
}

h2_grpc_one_connection() {
    # Python h2 (not curl: before 8.0 it cannot reuse an h2c connection,
    # curl/curl#10634) opens one connection and sends, on two streams, a
    # Streamable HTTP POST and a gRPC tunnel call; both are answered.
    "$python" - "$demo_addr" "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/list\",\"params\":{$META}}" "$VERSION" <<'PY'
import socket, struct, sys
import h2.connection, h2.events
host, port = sys.argv[1].rsplit(":", 1)
body, version = sys.argv[2].encode(), sys.argv[3]
grpc_json = body.replace(b'"id":13', b'"id":14')
n, varint = len(grpc_json), b""
while n >= 0x80:
    varint += bytes([(n & 0x7F) | 0x80])
    n >>= 7
msg = b"\x0a" + varint + bytes([n]) + grpc_json
sock = socket.create_connection((host, int(port)), timeout=10)
conn = h2.connection.H2Connection()
conn.initiate_connection()
common = [(":authority", sys.argv[1]), (":scheme", "http"), (":method", "POST"),
          ("mcp-protocol-version", version), ("mcp-method", "tools/list")]
conn.send_headers(1, [(":path", "/mcp")] + common + [
    ("content-type", "application/json"), ("accept", "application/json, text/event-stream")])
conn.send_data(1, body, end_stream=True)
conn.send_headers(3, [(":path", "/mcp.zig.transport.v1.Mcp/Call")] + common + [
    ("content-type", "application/grpc"), ("te", "trailers")])
conn.send_data(3, b"\x00" + struct.pack(">I", len(msg)) + msg, end_stream=True)
sock.sendall(conn.data_to_send())
status, data, ended = {}, {1: b"", 3: b""}, set()
while ended != {1, 3}:
    chunk = sock.recv(65536)
    if not chunk:
        sys.exit("the server closed the connection")
    for e in conn.receive_data(chunk):
        if isinstance(e, h2.events.ResponseReceived):
            status[e.stream_id] = dict(e.headers)[b":status"]
        elif isinstance(e, h2.events.DataReceived):
            data[e.stream_id] += e.data
            conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        elif isinstance(e, h2.events.StreamEnded):
            ended.add(e.stream_id)
        elif isinstance(e, h2.events.StreamReset):
            sys.exit(f"stream {e.stream_id} reset: {e.error_code}")
    sock.sendall(conn.data_to_send())
assert status == {1: b"200", 3: b"200"}, status
assert b'"id":13,"result"' in data[1] and b'"tools"' in data[1], data[1][:200]
assert b'"id":14,"result"' in data[3], data[3][:200]
print("one connection: POST /mcp 200 (JSON), gRPC call 200")
PY
}

printf '\n==> curl over HTTP/2\n'
for name in "${h2_checks[@]}"; do
    wanted "$name" || continue
    if why=$("${name//-/_}" 2>&1); then
        scenario_ok curl-h2 "$name" "$why"
    else
        scenario_failed curl-h2 "$name"
        detail "${why:-failed}"
    fi
done

# --- the SDK clients ----------------------------------------------------------

# client NAME COMMAND...: one SDK client's scenarios, a line each. The
# client exits 1 when a scenario failed (reported on its line); any other
# failure is the client's own.
client() {
    local name=$1 line
    shift
    printf '\n==> %s\n' "$name"
    while IFS= read -r line; do
        case $line in
        "ok "*) scenario_ok "$name" "${line#ok }" "" ;;
        "FAILED "*)
            local rest=${line#FAILED }
            scenario_failed "$name" "${rest%%:*}"
            detail "${rest#*: }"
            ;;
        "exit "[02-9]* | "exit 1"[0-9]*)
            [[ $line == "exit 0" ]] || scenario_failed "$name" client "${line/exit/status}"
            ;;
        "exit 1" | *" passed, "*" failed") ;;
        *) detail "$line" ;;
        esac
    done < <(
        rc=0
        bounded 300 "$@" 2>&1 || rc=$?
        echo "exit $rc"
    )
}

if wanted python; then
    client python "$python" "$root/tests/stdio/sdk_client.py" "$demo_url" --fixtures "$fixtures_url"
fi
if wanted typescript; then
    client typescript node "$root/tests/stdio/ts_client.mjs" "$demo_url" --fixtures "$fixtures_url"
fi

scenarios_summary "$start"
