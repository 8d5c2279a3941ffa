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
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
dir=$root/tests/grpc

js_scenarios=(discover tools-list echo progress error-trailers deadline cancel listen input-required lookup auth-bad auth-ok tls)
py_scenarios=(echo progress error-trailers deadline)
secured=(auth-bad auth-ok tls)

usage() {
    usage_text
    exit 2
}

(($# >= 1)) || usage
case $1 in -h | --help) usage ;; esac
target=$1
shift
selected=("$@")
check_names scenario js_scenarios "${selected[@]}"

setup() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "node and npm are needed (Debian: apt-get install nodejs npm)" >&2
        exit 2
    fi
    grpc_js || exit 2
    python_venv grpcio==1.85.3 grpcio-tools==1.85.1 || exit 2
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
    local n=${#bg_pids[@]}
    local out=$work/ref-$n.out err=$work/ref-$n.err rc=0
    background "$out" "$err" "$python" "$dir/ref_server.py" 0 "$@"
    server_pid=$bg_pid
    server_log=$err
    addr=$(wait_listening "$server_pid" "$out" 20) || rc=$?
    case $rc in
    0) ;;
    1)
        cat "$err"
        echo "ref_server.py exited before it listened" >&2
        exit 2
        ;;
    *)
        cat "$err"
        echo "ref_server.py did not listen within 20 s" >&2
        exit 2
        ;;
    esac
    note "ref_server.py ($label, pid $server_pid) on $addr"
}

# run CLIENT SCENARIO ADDR: one scenario of one client.
run() {
    local client=$1 scenario=$2 at=$3 rc=0 line
    local -a cmd
    if [[ $client == grpc-js ]]; then
        cmd=(node "$dir/client.js" "$at" "$scenario")
    else
        cmd=("$python" "$dir/client.py" "$at" "$scenario")
    fi
    bounded 60 "${cmd[@]}" >"$work/run.out" 2>"$work/run.err" || rc=$?
    line=$(tail -n 1 "$work/run.out")
    if ((rc == 0)); then
        scenario_ok "$client" "$scenario" "$line"
    else
        scenario_failed "$client" "$scenario" "exit $rc"
        [[ -n $line ]] && detail "$line"
        [[ -s $work/run.err ]] && sed 's/^/          stderr: /' "$work/run.err" | tail -n 20
    fi
    return 0
}

# run_all ADDR [only...]: both clients, the selected scenarios (restricted to
# `only` when given).
run_all() {
    local at=$1 s
    shift
    local -a only=("$@")
    for s in "${js_scenarios[@]}"; do
        wanted "$s" || continue
        ((${#only[@]} == 0)) || one_of "$s" "${only[@]}" || continue
        if [[ $mode == addr ]] && ((${#selected[@]} == 0)); then
            if [[ $s == auth-* && -z ${MCPWIRE_TOKEN:-} ]]; then
                scenario_skipped grpc-js "$s" "MCPWIRE_TOKEN is not set"
                continue
            fi
            if [[ $s == tls && -z ${MCPWIRE_CA:-} ]]; then
                scenario_skipped grpc-js "$s" "MCPWIRE_CA is not set"
                continue
            fi
        fi
        run grpc-js "$s" "$at"
    done
    for s in "${py_scenarios[@]}"; do
        wanted "$s" || continue
        ((${#only[@]} == 0)) || one_of "$s" "${only[@]}" || continue
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
    for s in "${js_scenarios[@]}"; do one_of "$s" "${secured[@]}" || plain+=("$s"); done
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
            test_certs "$certs" || exit 2
            token=$("$python" -c 'import secrets; print(secrets.token_urlsafe(24))')
            start_server "TLS, bearer token" --token "$token" --tls "$certs/server.pem" "$certs/server.key"
            before=$failed
            MCPWIRE_TOKEN=$token MCPWIRE_CA=$certs/ca.pem run_all "$addr" "${secured[@]}"
            if ((failed > before)); then
                note "ref_server.py stderr:"
                sed 's/^/      /' "$server_log" | tail -n 30
            fi
        else
            for s in "${secured[@]}"; do wanted "$s" && scenario_skipped grpc-js "$s" "no openssl for the test certificates"; done
        fi
    fi
    stop_pids 10 "${bg_pids[@]}"
else
    mode=addr
    printf '\n==> %s\n' "$target"
    run_all "$target"
fi

scenarios_summary "$start"
