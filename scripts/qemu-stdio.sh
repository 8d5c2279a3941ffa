#!/usr/bin/env bash
# MCP over the UART of a QEMU board: the firmware tests/firmware/qemu-stdio
# (mps2-an386, Cortex-M4; the device tools of examples/device-tools on
# mcpwire-embassy's stdio binding over UART0) is launched by MCP clients as
# a local stdio server:
#
#   qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nodefaults -display none \
#       -monitor none -serial stdio -semihosting-config enable=on,target=native \
#       -kernel target/thumbv7em-none-eabihf/release/mcpwire-qemu-stdio
#
#   ./scripts/qemu-stdio.sh [scenario...]
#
# Builds the firmware (release: opt-level z, fat LTO, as the board example
# ships; set MCPWIRE_NO_BUILD=1 to use the ELF as it is), checks that
# nothing in it allocates, prints its flash (text + data) and static RAM
# (data + bss: every task, buffer and engine), then runs the official
# Python SDK's stdio client (mcp 2.3.0, tests/stdio/qemu_client.py)
# against it. Scenarios: discover, tools (list; read_sensor,
# toggle_output), progress (slow_task's notifications), cancel
# (notifications/cancelled stops the tool and frees its handler),
# tool-error, flood (raw pipes: stdout holds only JSON-RPC lines, and a
# burst written at once loses no octet). mcpwire has no stdio client yet,
# so only the SDK's runs.
#
# Needs what `scripts/test.sh` setup installs: the thumbv7em target,
# llvm-tools, qemu-system-arm; mcp 2.3.0 goes into the venv .venv if
# missing. Exit status: 0 when every scenario passed, 1 when one failed,
# 2 on a setup or build error.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

target=thumbv7em-none-eabihf
elf=$root/target/$target/release/mcpwire-qemu-stdio

python_venv mcp==2.3.0 || exit 2
python=$root/.venv/bin/python
qemu=$(command -v qemu-system-arm) || {
    echo "qemu-system-arm not found (scripts/test.sh setup installs it with apt)" >&2
    exit 2
}
note "$("$qemu" --version | head -n 1)"

if [[ ${MCPWIRE_NO_BUILD:-} != 1 ]]; then
    # Its .cargo/config.toml (target, link script, shared target dir) is read
    # from the current directory.
    (cd tests/firmware/qemu-stdio && bounded 900 cargo build --release --quiet) || exit 2
fi
[[ -f $elf ]] || {
    echo "no $elf" >&2
    exit 2
}

host=$(rustc -vV | sed -n 's/^host: //p')
tools=$(rustc --print sysroot)/lib/rustlib/$host/bin
if [[ -x $tools/llvm-size ]]; then
    if "$tools/llvm-nm" "$elf" | grep -E '__rust_(alloc|dealloc|realloc)|__rg_'; then
        echo "allocator symbols in the firmware: nothing may allocate" >&2
        exit 1
    fi
    "$tools/llvm-size" "$elf"
    read -r text data bss < <("$tools/llvm-size" "$elf" | awk 'NR == 2 {print $1, $2, $3}')
    echo "largest statics (bytes):"
    "$tools/llvm-nm" --print-size --size-sort --radix=d -C "$elf" |
        awk '$3 ~ /^[bBdD]$/ {size = $2 + 0; $1 = $2 = $3 = ""; sub(/^ +/, ""); sub(/::h[0-9a-f]+$/, ""); printf "    %7d  %s\n", size, $0}' |
        tail -n 6 | sort -rn
    awk -v f=$((text + data)) -v r=$((data + bss)) 'BEGIN {
        printf "flash      %7d bytes (%5.1f KiB)\n", f, f / 1024
        printf "static RAM %7d bytes (%5.1f KiB)\n", r, r / 1024
    }'
else
    note "llvm-size not found in $tools (rustup component add llvm-tools): no size report"
fi

printf '\n==> python: mcp 2.3.0, QEMU as a stdio server\n'
bounded 600 "$python" "$root/tests/stdio/qemu_client.py" "$qemu" "$elf" "$@"
