#!/usr/bin/env bash
# The test command of mcpwire, for developers and CI alike (.ci/run calls it).
#
#   ./scripts/test.sh              every step
#   ./scripts/test.sh fmt test     only the named steps (setup always runs)
#
# Steps, in order: setup, fmt, clippy, test, interop, grpc, stdio, http, conformance, embassy, nostd-size, firmware, qemu, qemu-stdio, fuzz, bench. Every
# step runs even when an earlier one failed; the exit status is 1 if any
# failed. The last line reads "summary: N passed, N failed, N skipped".
#
# Needs rustup (stable; nightly for the fuzz step), python3 and network access
# to the package registries. Setup installs, once and quietly: the thumbv7em
# target, rustfmt, clippy and llvm-tools, a Python venv at .venv with the
# reference HPACK/HTTP/2 implementations, cargo-fuzz, and qemu-system-arm
# (apt) for the qemu step.
#
# Environment:
#   CI=true                 every reference peer, nightly and the fuzz run are
#                           required (the HPACK corpus is in the repository:
#                           core/tests/data, nothing is read from beside it)
#   MCPWIRE_FUZZ_SECONDS    fuzzing time per target (default 30)
#
# The embassy step makes a network namespace and a TAP device: it needs root
# and /dev/net/tun (skipped without them, a failure in CI).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

hpack_corpus=core/tests/data/hpack-test-case.tar.xz
fuzz_seconds=${MCPWIRE_FUZZ_SECONDS:-30}
firmware_dir=tests/firmware/nostd-size
qemu_dir=tests/firmware/qemu-sim
firmware_target=thumbv7em-none-eabihf

has_nightly() { rustup run nightly rustc --version >/dev/null 2>&1; }

host_tools() {
    local host
    host=$(rustc -vV | sed -n 's/^host: //p')
    printf '%s/lib/rustlib/%s/bin' "$(rustc --print sysroot)" "$host"
}

# --- steps ----------------------------------------------------------------

step_setup() {
    local installed
    installed=$(rustup component list --installed)
    for component in rustfmt clippy llvm-tools; do
        if ! grep -q "^$component" <<<"$installed"; then
            note "rustup component add $component"
            quietly rustup component add "$component"
        fi
    done
    if ! rustup target list --installed | grep -qx "$firmware_target"; then
        note "rustup target add $firmware_target"
        quietly rustup target add "$firmware_target"
    fi

    python_venv hpack==4.2.0 h2==4.4.1 grpcio==1.85.3 grpcio-tools==1.85.1

    if ! command -v qemu-system-arm >/dev/null 2>&1; then
        note "apt-get install qemu-system-arm"
        apt_install qemu-system-arm
    fi

    if has_nightly && ! cargo fuzz --version >/dev/null 2>&1; then
        note "cargo install cargo-fuzz 0.13.2"
        quietly bounded 900 cargo install cargo-fuzz --version 0.13.2 --locked
    fi
    note "rustc: $(rustc --version)"
    note "nightly: $(rustup run nightly rustc --version 2>/dev/null || echo 'not installed')"
    note "python: $(.venv/bin/python --version 2>&1)"
    note "qemu: $(qemu-system-arm --version 2>/dev/null | head -n 1 || echo 'not installed')"
}

step_fmt() {
    local rc=0
    cargo fmt --all -- --check || rc=1
    # Crates outside the workspace.
    rustfmt --edition 2024 --check \
        "$firmware_dir"/build.rs "$firmware_dir"/src/*.rs core/fuzz/fuzz_targets/*.rs \
        "$qemu_dir"/build.rs "$qemu_dir"/src/*.rs \
        tests/firmware/qemu-stdio/build.rs tests/firmware/qemu-stdio/src/*.rs \
        examples/firmware/build.rs examples/firmware/src/*.rs || rc=1
    return "$rc"
}

step_clippy() {
    local rc=0
    bounded 1800 cargo clippy --workspace --all-targets -- -D warnings || rc=1
    # The firmware, for its target (set in its .cargo/config.toml).
    (cd "$firmware_dir" && bounded 900 cargo clippy --release -- -D warnings) || rc=1
    (cd "$qemu_dir" && bounded 900 cargo clippy --release -- -D warnings) || rc=1
    (cd tests/firmware/qemu-stdio && bounded 900 cargo clippy --release -- -D warnings) || rc=1
    # The embassy driver for the board's target (no_std), with defmt.
    bounded 900 cargo clippy -p mcpwire-embassy --target "$firmware_target" --features defmt \
        -- -D warnings || rc=1
    # Its typed RPCs and their tests (feature `typed`, off by default).
    bounded 900 cargo clippy -p mcpwire-embassy --features typed --all-targets -- -D warnings || rc=1
    # The board example, without and with its defmt logging.
    (cd examples/firmware && bounded 900 cargo clippy --release -- -D warnings) || rc=1
    (cd examples/firmware && bounded 900 cargo clippy --release --features defmt -- -D warnings) || rc=1
    return "$rc"
}

step_test() {
    export MCPWIRE_PYTHON=$root/.venv/bin/python
    # In CI every peer a test names must be there (the venv has them).
    [[ $ci == true ]] && export MCPWIRE_REQUIRE_PEERS=1
    # The HPACK tests read their corpus from $hpack_corpus themselves; in CI
    # the Python oracle they call must be there too.
    [[ $ci == true ]] && export MCPWIRE_REQUIRE_REFERENCE=1
    # The interop crate runs in release, in its own step.
    bounded 2400 cargo test --workspace --exclude mcpwire-interop
    # The typed binding's transcoder (feature `typed`, off by default).
    bounded 1200 cargo test -p mcpwire-core --features typed --lib --test typed_transcode
    # The device serving the typed RPCs (mcpwire-embassy/typed, off by
    # default: the workspace run compiles only the test that they are
    # UNIMPLEMENTED without it).
    bounded 1200 cargo test -p mcpwire-embassy --features typed --test typed
    # The small-flash build: Huffman by the canonical walk, no lookup table.
    bounded 1200 cargo test -p mcpwire-core --no-default-features --lib \
        --test hpack_rfc7541 --test hpack_corpus --test hpack_props --test hpack_python
}

step_interop() {
    # Real HTTP/2 peers (Python h2, nghttp/nghttpd, curl, the h2 crate) and
    # the httpwg conformance suite. In CI every peer must be there.
    [[ $ci == true ]] && export MCPWIRE_REQUIRE_PEERS=1
    export MCPWIRE_PYTHON=$root/.venv/bin/python
    bounded 2400 ./scripts/interop-h2.sh
}

step_grpc() {
    # The demo MCP server of the README's run command, called by real gRPC
    # peers (@grpc/grpc-js and grpcio) over the tunnel binding. Built like
    # the interop binaries (no LTO, parallel codegen) to share their build.
    bounded 1800 "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire --quiet
    local addr rc=0
    # A port of its own choosing, read off its listening line (one picked
    # here and freed could be taken before it binds).
    background "$work/serve.out" "$work/serve.log" target/release/mcpwire serve --listen 127.0.0.1:0
    if addr=$(wait_listening "$bg_pid" "$work/serve.log" 20); then
        bounded 600 ./scripts/interop-grpc.sh "$addr" || rc=$?
    else
        note "mcpwire serve did not print its listening line"
        rc=1
    fi
    stop_pids 10 "$bg_pid"
    if ((rc != 0)); then
        note "server log:"
        sed 's/^/      /' "$work/serve.log" | tail -n 20
    fi
    # The same scenarios over TLS (ALPN h2) with a bearer token, plus the
    # refusals of a missing or wrong token.
    MCPWIRE_NO_BUILD=1 bounded 600 ./scripts/interop-grpc-tls.sh || rc=1
    # A raw HTTP/2 peer (Python h2) for what gRPC libraries never send
    # (wrong method or content type, compressed or oversize messages, a
    # request after the response and the reset), and one curl call.
    MCPWIRE_NO_BUILD=1 bounded 600 ./scripts/interop-grpc-raw.sh || rc=1
    # The typed binding (model_context_protocol.Mcp) called by grpc-js with
    # the vendored proto files.
    MCPWIRE_NO_BUILD=1 bounded 600 ./scripts/interop-grpc-typed.sh || rc=1
    # The typed binding's descriptor tables (proto/src/gcp) are what protoc
    # makes of the vendored proto files: regenerated, nothing changes.
    if bounded 300 ./scripts/gcp-schema.sh &&
        git diff --quiet -- proto/src/gcp proto/tests/data; then
        note "typed binding tables match the vendored proto files"
    else
        note "proto/src/gcp or its descriptor set differs from what scripts/gcp-schema.sh makes:"
        git diff --stat -- proto/src/gcp proto/tests/data | sed 's/^/      /'
        rc=1
    fi
    return "$rc"
}

step_stdio() {
    # The demo over the stdio binding, launched and called by the official
    # Python MCP SDK's stdio client (mcp 2.3.0, installed into .venv).
    bounded 1800 ./scripts/interop-stdio.sh
}

step_http() {
    # Streamable HTTP on the port of `mcpwire serve`: curl for the raw
    # statuses and headers of MCP §5, a gRPC call beside an open HTTP
    # stream, and the official SDK clients (Python mcp 2.3.0, TypeScript
    # @modelcontextprotocol/client 2.4.0) running the stdio scenarios over
    # HTTP. Then the HTTP servers nobody here wrote (the TypeScript and
    # Python SDK servers, mcp 1.26 in its 2025 and 2024 shapes, five bad
    # servers) for mcpwire's HTTP client.
    local rc=0
    bounded 1800 ./scripts/interop-http.sh || rc=1
    # The rmcp server it calls, built like the binary interop-http.sh built.
    bounded 1800 "${cargo_tools[@]}" build --release -p mcpwire-rmcp-peer --bin rmcp-http-server \
        --quiet || rc=1
    MCPWIRE_NO_BUILD=1 bounded 900 ./scripts/interop-http-client.sh || rc=1
    # The 2025 session and 2024 HTTP+SSE shapes of mcp 1.26 (its venv was
    # made by the script above) through the core's HTTP client engine.
    MCPWIRE_MCP1_PYTHON="$PWD/.peers/venv-mcp1/bin/python" bounded 900 \
        cargo test -p mcpwire-tokio --test legacy_http -- --ignored || rc=1
    # The bridge matrix: the Python and TypeScript SDK clients (stdio and
    # Streamable HTTP) and our gRPC client as hosts of `mcpwire bridge`, to
    # `mcpwire serve`, the SDK servers, mcp 1.26, a stdio child, the QEMU
    # UART firmware and the embassy device app (the script builds those
    # two as their own steps later find them).
    bounded 1200 ./scripts/interop-bridge.sh || rc=1
    return "$rc"
}

step_conformance() {
    # The official MCP conformance suite (0.2.0-alpha.12, requirement set
    # 2026-07-28, on Node.js 22) against `mcpwire serve --fixtures
    # conformance`: every one of the 37 scored scenarios must pass; then
    # its client scenarios against mcpwire's HTTP client.
    bounded 1800 "${cargo_tools[@]}" build --release -p mcpwire-tokio --bin mcpwire --quiet
    local port rc=0
    port=$(free_port)
    # A fixed key: the sealed requestState of a run can be read back.
    background "$work/fixtures.out" "$work/fixtures.log" env MCPWIRE_STATE_KEY=mcpwire-conformance-key \
        target/release/mcpwire serve --fixtures conformance --listen "127.0.0.1:$port"
    if ! wait_listening "$bg_pid" "$work/fixtures.log" 10 >/dev/null; then
        note "the fixture server did not start:"
        sed 's/^/      /' "$work/fixtures.log" | tail -n 20
        return 1
    fi
    bounded 1500 ./scripts/conformance.sh "http://127.0.0.1:$port/mcp" || rc=$?
    stop_pids 10 "$bg_pid"
    if ((rc != 0)); then
        note "server log:"
        sed 's/^/      /' "$work/fixtures.log" | tail -n 20
    fi
    # Client mode: `mcpwire conformance-client` (`Client::http`) in every
    # scored client scenario; the OAuth ones are baselined
    # (tests/conformance/client-baseline.yml).
    bounded 900 ./scripts/conformance.sh --client "$root/target/release/mcpwire conformance-client" || rc=$?
    return "$rc"
}

step_embassy() {
    # The device application (examples/device-tools on mcpwire-embassy) run
    # on the host: embassy's std executor on a TAP device in a network
    # namespace, called by grpc-js and by our tokio client, and on the
    # same port over Streamable HTTP by the Python SDK and curl. Exits 77
    # (skipped) without root or /dev/net/tun, except in CI.
    bounded 1800 ./scripts/interop-embassy-host.sh
}

step_nostd_size() {
    local tools elf report="$work/size.txt" baseline=0
    tools=$(host_tools)
    [[ -x $tools/llvm-size ]] || {
        note "llvm-size not found in $tools (rustup component add llvm-tools)"
        return 1
    }
    elf=$root/target/$firmware_target/release/mcpwire-nostd-size
    printf '%-14s %7s %5s %5s %7s %13s %8s\n' \
        features text data bss flash hpack-symbols codec >"$report"
    for features in baseline none huffman-fast; do
        local args=()
        [[ $features == none ]] || args=(--features "$features")
        # Its .cargo/config.toml (target, link script, shared target dir) is
        # read from the current directory.
        (cd "$firmware_dir" && bounded 900 cargo build --release --quiet "${args[@]}")

        if "$tools/llvm-nm" "$elf" | grep -E '__rust_(alloc|dealloc|realloc)|__rg_'; then
            note "allocator symbols in the no_std firmware ($features): the core must not allocate"
            return 1
        fi
        echo "llvm-size ($features):"
        "$tools/llvm-size" "$elf"
        # Code and constants named after the hpack module: a lower bound, as
        # what LTO inlined into main and unnamed constants are not counted.
        local symbols="$work/hpack-symbols.txt" hpack flash
        "$tools/llvm-nm" --print-size --size-sort --radix=d -C "$elf" |
            awk '$3 ~ /^[tTrR]$/ && /hpack/' >"$symbols"
        hpack=$(awk '{s += $2} END {print s + 0}' "$symbols")
        # Flash holds text (vector table, code, rodata) and the initial data.
        read -r text data bss < <("$tools/llvm-size" "$elf" | awk 'NR == 2 {print $1, $2, $3}')
        flash=$((text + data))
        [[ $features == baseline ]] && baseline=$flash
        printf '%-14s %7d %5d %5d %7d %13d %8d\n' \
            "$features" "$text" "$data" "$bss" "$flash" "$hpack" $((flash - baseline)) >>"$report"
    done
    echo
    echo "no_std size ($firmware_target, opt-level s, lto fat, no allocator), bytes;"
    echo "codec = flash over the baseline firmware (runtime alone), hpack-symbols = lower bound:"
    sed 's/^/    /' "$report"
}

step_firmware() {
    # The MCP server firmware of examples/firmware (NUCLEO-F767ZI, embassy,
    # 2 connections on port 50051), built as it ships: its flash (text +
    # data) and static RAM (data + bss, TCP buffers and every task
    # included) must stay within the budget of issue #5.
    local max_flash=$((128 * 1024)) max_ram=$((48 * 1024))
    local tools elf=$root/target/$firmware_target/release/mcpwire-firmware-example
    tools=$(host_tools)
    [[ -x $tools/llvm-size ]] || {
        note "llvm-size not found in $tools (rustup component add llvm-tools)"
        return 1
    }
    # Its .cargo/config.toml (target, shared target dir) is read from the
    # current directory.
    (cd examples/firmware && bounded 1200 cargo build --release --quiet)
    if "$tools/llvm-nm" "$elf" | grep -E '__rust_(alloc|dealloc|realloc)|__rg_'; then
        note "allocator symbols in the firmware: nothing may allocate"
        return 1
    fi
    "$tools/llvm-size" "$elf"
    local text data bss flash ram rc=0
    read -r text data bss < <("$tools/llvm-size" "$elf" | awk 'NR == 2 {print $1, $2, $3}')
    flash=$((text + data))
    ram=$((data + bss))
    echo "largest statics (bytes):"
    "$tools/llvm-nm" --print-size --size-sort --radix=d -C "$elf" |
        awk '$3 ~ /^[bBdD]$/ {size = $2 + 0; $1 = $2 = $3 = ""; sub(/^ +/, ""); sub(/::h[0-9a-f]+$/, ""); printf "    %7d  %s\n", size, $0}' |
        tail -n 8 | sort -rn
    awk -v f="$flash" -v r="$ram" -v mf="$max_flash" -v mr="$max_ram" 'BEGIN {
        printf "flash      %7d bytes (%5.1f KiB of %d KiB)\n", f, f / 1024, mf / 1024
        printf "static RAM %7d bytes (%5.1f KiB of %d KiB)\n", r, r / 1024, mr / 1024
    }'
    # Not checked: the flash with feature typed (the typed gRPC binding),
    # then the default build again, so the ELF left is the one measured.
    (cd examples/firmware && bounded 1200 cargo build --release --quiet --features typed) &&
        "$tools/llvm-size" "$elf" | awk 'NR == 2 {printf "typed      %7d bytes of flash (not checked)\n", $1 + $2}' || true
    (cd examples/firmware && bounded 1200 cargo build --release --quiet) || true
    if ((flash > max_flash)); then
        note "flash over budget: $flash > $max_flash"
        rc=1
    fi
    if ((ram > max_ram)); then
        note "static RAM over budget: $ram > $max_ram"
        rc=1
    fi
    return "$rc"
}

step_qemu_stdio() {
    # MCP over the QEMU board's UART: the Python SDK's stdio client launches
    # QEMU (tests/firmware/qemu-stdio) as a local stdio server, lists and
    # calls the device tools (progress, a cancel, a flood); prints the
    # firmware's flash and static RAM.
    bounded 1200 ./scripts/qemu-stdio.sh
}

step_qemu() {
    # The simulation scenarios (HTTP/2 client and server, the MCP engine)
    # on the Cortex-M4 instruction set: the no_std firmware boots in QEMU,
    # prints one line per scenario and the stack high-water mark through
    # semihosting, and exits with 0 only if every scenario passed.
    command -v qemu-system-arm >/dev/null || {
        note "qemu-system-arm not found (setup installs it with apt)"
        return 1
    }
    (cd "$qemu_dir" && bounded 900 cargo build --release --quiet)
    local elf=$root/target/$firmware_target/release/mcpwire-qemu-sim tools
    tools=$(host_tools)
    if [[ -x $tools/llvm-nm ]] && "$tools/llvm-nm" "$elf" | grep -E '__rust_(alloc|dealloc|realloc)|__rg_'; then
        note "allocator symbols in the qemu firmware: the core must not allocate"
        return 1
    fi
    local rc=0
    bounded 300 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic \
        -semihosting-config enable=on,target=native -kernel "$elf" </dev/null | sed 's/^/    /' || rc=$?
    if ((rc != 0)); then
        note "the firmware exited with status $rc"
    fi
    return "$rc"
}

step_fuzz() {
    if ! has_nightly; then
        note "no nightly toolchain: cargo fuzz needs one"
        [[ $ci == true ]] && return 1
        return "$SKIP"
    fi
    # Seeds from the HPACK corpus the tests carry.
    tar -xJf "$hpack_corpus" -C "$work"
    cd core
    python3 fuzz/seed_corpus.py "$work/hpack-test-case"
    local target log failed=0
    for target in hpack_decode hpack_roundtrip h2_server mcp_server mcp_caller http_server \
        http_response sse_parse http_exchange typed_transcode; do
        log=$work/fuzz-$target.log
        # Seeds kept in the repository, beside the scratch corpus.
        local seeds=()
        [[ -d fuzz/seeds/$target ]] && seeds=("fuzz/corpus/$target" "fuzz/seeds/$target")
        mkdir -p "fuzz/corpus/$target"
        echo "cargo +nightly fuzz run $target (${fuzz_seconds} s)"
        # No sanitizer: the core forbids unsafe code, so ASan would only slow
        # it down. Debug assertions on, to catch arithmetic overflow.
        if bounded $((fuzz_seconds + 900)) cargo +nightly fuzz run --sanitizer none --debug-assertions \
            "$target" "${seeds[@]}" -- -max_total_time="$fuzz_seconds" -timeout=10 -print_final_stats=1 \
            >"$log" 2>&1; then
            grep -E '^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs' "$log" | sed "s/^/    $target: /" || tail -n 5 "$log"
        else
            tail -n 60 "$log"
            note "$target failed (output above); a crashing input is kept in core/fuzz/artifacts/$target/"
            note "replay it: cd core && cargo +nightly fuzz run $target fuzz/artifacts/$target/<file>"
            failed=1
        fi
    done
    return "$failed"
}

step_bench() {
    if [[ ! -f core/benches/hpack.rs ]]; then
        note "no core/benches/hpack.rs yet"
        return "$SKIP"
    fi
    bounded 1800 cargo bench -p mcpwire-core --bench hpack -- --warm-up-time 1 --measurement-time 2
    if [[ -f scripts/bench_ratios.py ]]; then
        python3 scripts/bench_ratios.py
    fi
    # The load benchmark, short: our server and tonic's side by side (every
    # call checked; a failed call fails the step). README has a longer run.
    MCPWIRE_BENCH_SECONDS=${MCPWIRE_BENCH_SECONDS:-1} MCPWIRE_BENCH_WARMUP=${MCPWIRE_BENCH_WARMUP:-0.3} \
        bounded 1800 ./scripts/bench-load.sh
    # The client benchmark: our client's CPU per call beside rmcp's and the
    # Python SDK's, against the same server.
    bounded 900 ./scripts/bench-client.sh
}

# --- driver ---------------------------------------------------------------

steps=(setup fmt clippy test interop grpc stdio http conformance embassy nostd-size firmware qemu qemu-stdio fuzz bench)
selected=("$@")
check_names step steps "${selected[@]}"

ran=()
for name in "${steps[@]}"; do
    if [[ $name == setup ]] || wanted "$name"; then ran+=("$name"); fi
done
run_steps "${ran[@]}"

printf '\n==> results\n'
for name in "${ran[@]}"; do
    printf '    %-12s %-8s %5d s\n' "$name" "${step_status[$name]}" "${step_seconds[$name]}"
done
echo "summary: $steps_passed passed, $steps_failed failed, $steps_skipped skipped"
((steps_failed == 0))
