#!/usr/bin/env bash
# gRPC tunnel interop over TLS with a bearer token: the real-peer clients of
# tests/grpc/ (via scripts/interop-grpc.sh) against `mcpwire serve` with
# --tls-cert/--tls-key and --token-file.
#
#   ./scripts/interop-grpc-tls.sh [scenario...]
#
# Builds target/release/mcpwire (as scripts/test.sh does: no LTO, 16 codegen
# units), makes a throwaway CA and a certificate for localhost/127.0.0.1 with
# openssl in a temporary directory, picks a random token, starts the server
# on a free 127.0.0.1 port, runs every scenario (or the named ones) with
# MCPWIRE_TOKEN and MCPWIRE_CA set, and stops the server by PID.
#
# The exit status is interop-grpc.sh's (1 when a scenario failed), 2 on a
# setup error. MCPWIRE_NO_BUILD=1 skips the cargo build.
set -euo pipefail
cd "$(dirname "$0")/.."

case ${1:-} in -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
esac

command -v openssl >/dev/null || {
    echo "openssl is needed for the test certificates" >&2
    exit 2
}

if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
        cargo build --release -p mcpwire-tokio --bin mcpwire --quiet || exit 2
fi
bin=target/release/mcpwire

work=$(mktemp -d)
pid=
cleanup() {
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

(
    cd "$work"
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

token=$(openssl rand -hex 24)
# The token goes in a file (mode 600), not on the command line.
(umask 077 && printf '%s interop\n' "$token" >"$work/tokens")

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve --listen "127.0.0.1:$port" --token-file "$work/tokens" \
    --tls-cert "$work/server.pem" --tls-key "$work/server.key" 2>"$work/serve.log" &
pid=$!
for _ in $(seq 100); do
    grep -q '^listening on' "$work/serve.log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
grep -q '^listening on' "$work/serve.log" || {
    cat "$work/serve.log"
    echo "mcpwire serve did not start" >&2
    exit 2
}
printf '    %s (pid %s)\n' "$(head -n 1 "$work/serve.log")" "$pid"

rc=0
MCPWIRE_TOKEN=$token MCPWIRE_CA=$work/ca.pem ./scripts/interop-grpc.sh "127.0.0.1:$port" "$@" || rc=$?
if ((rc != 0)); then
    echo "    server log:"
    sed 's/^/      /' "$work/serve.log" | tail -n 20
fi
exit "$rc"
