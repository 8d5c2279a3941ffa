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
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

case ${1:-} in -h | --help)
    usage_text
    exit 0
    ;;
esac

command -v openssl >/dev/null || {
    echo "openssl is needed for the test certificates" >&2
    exit 2
}

if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire --quiet || exit 2
fi
bin=target/release/mcpwire

test_certs "$work" || exit 2

token=$(openssl rand -hex 24)
# The token goes in a file (mode 600), not on the command line.
(umask 077 && printf '%s interop\n' "$token" >"$work/tokens")

background "$work/serve.out" "$work/serve.log" "$bin" serve --listen 127.0.0.1:0 --token-file "$work/tokens" \
    --tls-cert "$work/server.pem" --tls-key "$work/server.key"
addr=$(wait_listening "$bg_pid" "$work/serve.log" 10) || {
    cat "$work/serve.log"
    echo "mcpwire serve did not start" >&2
    exit 2
}
printf '    %s (pid %s)\n' "$(head -n 1 "$work/serve.log")" "$bg_pid"

rc=0
MCPWIRE_TOKEN=$token MCPWIRE_CA=$work/ca.pem ./scripts/interop-grpc.sh "$addr" "$@" || rc=$?
if ((rc != 0)); then
    echo "    server log:"
    sed 's/^/      /' "$work/serve.log" | tail -n 20
fi
exit "$rc"
