#!/usr/bin/env bash
# gRPC tunnel interop: real-peer MCP clients (grpc-js and grpcio, in
# tests/grpc/) against a server on /mcp.zig.transport.v1.Mcp/Call.
#
#   ./scripts/interop-grpc.sh HOST:PORT [scenario...]   against a running server
#   ./scripts/interop-grpc.sh --ref [scenario...]       against tests/grpc/ref_server.py
#
# Setup installs what is missing, once: @grpc/grpc-js 1.14.7 and
# @grpc/proto-loader 0.8.1 into tests/grpc/node_modules (npm), and grpcio
# 1.85.3 and grpcio-tools 1.85.1 into the venv .venv (made if missing). It
# also checks that protoc (from grpcio-tools) accepts the .proto.
#
# Then it runs every scenario of both clients (or only the named ones) and
# prints "N passed, N failed, N skipped". The exit status is 1 when a scenario
# failed, 2 on a usage or setup error.
#
# Scenarios (client.js all; client.py the four marked *): discover,
# tools-list, echo*, progress*, error-trailers*, deadline*, cancel, listen,
# input-required, lookup, auth-bad, auth-ok, tls.
#
# Against HOST:PORT: auth-bad and auth-ok run only when MCPWIRE_TOKEN is set
# (the server then requires that bearer token, and every call sends it), tls
# only when MCPWIRE_CA is set (every call then uses TLS, server name
# "localhost"), unless they are named on the command line.
#
# --ref: starts ref_server.py on a free 127.0.0.1 port for every scenario but
# auth-bad, auth-ok and tls; those three run against a second ref_server.py
# with a bearer token and TLS (a throwaway CA and certificate from openssl;
# skipped without openssl). Both servers are stopped by PID at the end.
#
# Environment:
#   MCPWIRE_TOKEN, MCPWIRE_CA   see above (ignored with --ref)
#   MCPWIRE_VERBOSE=1           print the observation line of every scenario,
#                               not only of the failed ones
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$root/tests/grpc

js_scenarios=(discover tools-list echo progress error-trailers deadline cancel listen input-required lookup auth-bad auth-ok tls)
py_scenarios=(echo progress error-trailers deadline)
secured=(auth-bad auth-ok tls)

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
    exit 2
}

note() { printf '    %s\n' "$*"; }
has() {
    local x=$1
    shift
    [[ " $* " == *" $x "* ]]
}

(($# >= 1)) || usage
case $1 in -h | --help) usage ;; esac
target=$1
shift
selected=("$@")
for name in "${selected[@]}"; do
    has "$name" "${js_scenarios[@]}" || {
        echo "unknown scenario '$name'; scenarios: ${js_scenarios[*]}" >&2
        exit 2
    }
done

work=$(mktemp -d)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do stop_server "$pid"; done
    rm -rf "$work"
}
trap cleanup EXIT

# Runs "$@" with its output in a log, shown only when it fails.
quietly() {
    if ! "$@" >"$work/quiet.log" 2>&1; then
        cat "$work/quiet.log"
        note "failed: $*"
        return 1
    fi
}

setup() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "node and npm are needed (Debian: apt-get install nodejs npm)" >&2
        exit 2
    fi
    # shellcheck disable=SC2016 # JavaScript, not shell
    if ! (cd "$dir" && node -e '
        const v = (p) => require(`./node_modules/${p}/package.json`).version;
        process.exit(v("@grpc/grpc-js") === "1.14.7" && v("@grpc/proto-loader") === "0.8.1" ? 0 : 1)') \
        >/dev/null 2>&1; then
        note "npm install (tests/grpc): @grpc/grpc-js 1.14.7, @grpc/proto-loader 0.8.1"
        (cd "$dir" && quietly npm install --no-audit --no-fund) || exit 2
    fi

    if [[ ! -x .venv/bin/python ]]; then
        note "python3 -m venv .venv"
        quietly python3 -m venv .venv || exit 2
    fi
    if ! .venv/bin/python -c '
import sys
from importlib.metadata import version
sys.exit(version("grpcio") != "1.85.3" or version("grpcio-tools") != "1.85.1")' >/dev/null 2>&1; then
        note "pip install (.venv): grpcio 1.85.3, grpcio-tools 1.85.1"
        quietly .venv/bin/pip install -q --disable-pip-version-check grpcio==1.85.3 grpcio-tools==1.85.1 || exit 2
    fi
    python=$root/.venv/bin/python

    quietly "$python" -m grpc_tools.protoc -I "$dir" --descriptor_set_out="$work/proto.pb" \
        "$dir/mcp_zig_transport_v1.proto" || exit 2

    note "node $(node --version), grpc-js $(cd "$dir" && node -p 'require("@grpc/grpc-js/package.json").version')," \
        "proto-loader $(cd "$dir" && node -p 'require("@grpc/proto-loader/package.json").version')"
    note "python $("$python" -c 'import sys, grpc; print(sys.version.split()[0], "grpcio", grpc.__version__)')"
}

# start_server LABEL [option...]: starts ref_server.py with the options on
# port 0; sets `addr`, `server_pid` and `server_log` (its stderr).
start_server() {
    local label=$1
    shift
    local n=${#pids[@]}
    local out=$work/ref-$n.out err=$work/ref-$n.err
    "$python" "$dir/ref_server.py" 0 "$@" >"$out" 2>"$err" &
    server_pid=$!
    pids+=("$server_pid")
    server_log=$err
    local i
    for ((i = 0; i < 200; i++)); do
        addr=$(sed -n 's/^listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$out")
        [[ -n $addr ]] && break
        if ! kill -0 "$server_pid" 2>/dev/null; then
            cat "$err"
            echo "ref_server.py exited before it listened" >&2
            exit 2
        fi
        sleep 0.1
    done
    [[ -n $addr ]] || {
        cat "$err"
        echo "ref_server.py did not listen within 20 s" >&2
        exit 2
    }
    note "ref_server.py ($label, pid $server_pid) on $addr"
}

# SIGTERM, up to 10 s for it to end its listens and stop, then SIGKILL.
stop_server() {
    local pid=$1 i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        note "ref_server.py (pid $pid) did not stop: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

passed=0
failed=0
skipped=0
failures=()

# run CLIENT SCENARIO ADDR: one scenario of one client.
run() {
    local client=$1 scenario=$2 at=$3 rc=0 line
    local -a cmd
    if [[ $client == grpc-js ]]; then
        cmd=(node "$dir/client.js" "$at" "$scenario")
    else
        cmd=("$python" "$dir/client.py" "$at" "$scenario")
    fi
    timeout --kill-after=5 60 "${cmd[@]}" >"$work/run.out" 2>"$work/run.err" || rc=$?
    line=$(tail -n 1 "$work/run.out")
    if ((rc == 0)); then
        passed=$((passed + 1))
        printf '    ok    %-8s %s\n' "$client" "$scenario"
        [[ ${MCPWIRE_VERBOSE:-} == 1 ]] && printf '          %s\n' "$line"
    else
        failed=$((failed + 1))
        failures+=("$client $scenario")
        printf '    FAIL  %-8s %s (exit %d)\n' "$client" "$scenario" "$rc"
        [[ -n $line ]] && printf '          %s\n' "$line"
        [[ -s $work/run.err ]] && sed 's/^/          stderr: /' "$work/run.err" | tail -n 20
    fi
    return 0
}

skip() {
    skipped=$((skipped + 1))
    printf '    skip  %-8s %s (%s)\n' "$1" "$2" "$3"
}

wanted() { ((${#selected[@]} == 0)) || has "$1" "${selected[@]}"; }

# run_all ADDR [only...]: both clients, the selected scenarios (restricted to
# `only` when given).
run_all() {
    local at=$1 s
    shift
    local -a only=("$@")
    for s in "${js_scenarios[@]}"; do
        wanted "$s" || continue
        ((${#only[@]} == 0)) || has "$s" "${only[@]}" || continue
        if [[ $mode == addr ]] && ((${#selected[@]} == 0)); then
            if [[ $s == auth-* && -z ${MCPWIRE_TOKEN:-} ]]; then
                skip grpc-js "$s" "MCPWIRE_TOKEN is not set"
                continue
            fi
            if [[ $s == tls && -z ${MCPWIRE_CA:-} ]]; then
                skip grpc-js "$s" "MCPWIRE_CA is not set"
                continue
            fi
        fi
        run grpc-js "$s" "$at"
    done
    for s in "${py_scenarios[@]}"; do
        wanted "$s" || continue
        ((${#only[@]} == 0)) || has "$s" "${only[@]}" || continue
        run grpcio "$s" "$at"
    done
}

printf '==> setup\n'
setup

start=$SECONDS
if [[ $target == --ref ]]; then
    mode=ref
    unset MCPWIRE_TOKEN MCPWIRE_CA
    plain=()
    for s in "${js_scenarios[@]}"; do has "$s" "${secured[@]}" || plain+=("$s"); done
    need_secured=false
    for s in "${secured[@]}"; do wanted "$s" && need_secured=true; done
    need_plain=false
    for s in "${plain[@]}"; do wanted "$s" && need_plain=true; done

    if $need_plain; then
        printf '\n==> reference server (cleartext)\n'
        start_server cleartext
        plain_log=$server_log
        run_all "$addr" "${plain[@]}"
        if ((failed > 0)); then
            note "ref_server.py stderr:"
            sed 's/^/      /' "$plain_log" | tail -n 30
        fi
    fi
    if $need_secured; then
        printf '\n==> reference server (TLS, bearer token)\n'
        if command -v openssl >/dev/null; then
            certs=$work/certs
            mkdir -p "$certs"
            (
                cd "$certs"
                openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
                    -subj /CN=mcpwire-interop-ca -keyout ca.key -out ca.pem
                openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                    -subj /CN=localhost -keyout server.key -out server.csr
                printf '%s\n' 'subjectAltName=DNS:localhost,IP:127.0.0.1' 'basicConstraints=CA:FALSE' \
                    'keyUsage=digitalSignature' 'extendedKeyUsage=serverAuth' >ext
                openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
                    -extfile ext -out server.pem
            ) >"$work/openssl.log" 2>&1 || {
                cat "$work/openssl.log"
                echo "openssl could not make the test certificates" >&2
                exit 2
            }
            token=$("$python" -c 'import secrets; print(secrets.token_urlsafe(24))')
            start_server "TLS, bearer token" --token "$token" --tls "$certs/server.pem" "$certs/server.key"
            before=$failed
            MCPWIRE_TOKEN=$token MCPWIRE_CA=$certs/ca.pem run_all "$addr" "${secured[@]}"
            if ((failed > before)); then
                note "ref_server.py stderr:"
                sed 's/^/      /' "$server_log" | tail -n 30
            fi
        else
            for s in "${secured[@]}"; do wanted "$s" && skip grpc-js "$s" "no openssl for the test certificates"; done
        fi
    fi
    for pid in "${pids[@]}"; do stop_server "$pid"; done
    pids=()
else
    mode=addr
    printf '\n==> %s\n' "$target"
    run_all "$target"
fi

printf '\n==> %d passed, %d failed, %d skipped (%d s)\n' "$passed" "$failed" "$skipped" $((SECONDS - start))
for f in "${failures[@]}"; do note "failed: $f"; done
((failed == 0))
