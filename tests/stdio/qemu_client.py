"""The official Python MCP SDK (mcp 2.3.0) as the stdio client of the QEMU
firmware tests/firmware/qemu-stdio: QEMU's mps2-an386 board, its UART0 on
QEMU's stdin and stdout, launched as if it were a local stdio server.

    python qemu_client.py /abs/path/to/qemu-system-arm /abs/path/to/firmware.elf [scenario...]

Every SDK scenario launches QEMU through `mcp.Client(StdioServerParameters(...))`.
The UART has no end of input, so QEMU does not exit when its stdin ends:
the SDK terminates it after its grace period (2 s), as it does any server
that keeps running. The last scenario, flood, drives QEMU over raw pipes:
stdout carries only JSON-RPC lines, and a burst of requests written at
once, faster than the board reads them, loses no octet.

Prints "ok NAME" or "FAILED NAME: why" per scenario, then
"N passed, N failed"; exits 1 when one failed, 2 on a usage error.
"""

import json
import logging
import subprocess
import sys
import threading
import time

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

VERSION = "2026-07-28"
# Bound of every scenario (QEMU's start and the SDK's 2 s shutdown included).
SCENARIO_SECONDS = 40
TOOLS = ["read_sensor", "toggle_output", "slow_task"]


class Failed(Exception):
    pass


def expect(cond, why):
    if not cond:
        raise Failed(why)


class LateResponses(logging.Handler):
    """Counts the SDK's notes of a response to a request it no longer
    waits for (a cancelled one)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.ids = []

    def emit(self, record):
        if "unknown/late request id" in record.getMessage():
            self.ids.append(record.args)


late = LateResponses()
dispatcher_log = logging.getLogger("mcp.shared.jsonrpc_dispatcher")
dispatcher_log.addHandler(late)
dispatcher_log.setLevel(logging.DEBUG)


def command(qemu, elf):
    """QEMU as a stdio server: stdout is UART0 alone (no monitor, display,
    or default devices); semihosting (the firmware's start line, a panic)
    goes to stderr."""
    return [
        qemu,
        "-machine", "mps2-an386",
        "-cpu", "cortex-m4",
        "-nodefaults",
        "-display", "none",
        "-monitor", "none",
        "-serial", "stdio",
        "-semihosting-config", "enable=on,target=native",
        "-kernel", elf,
    ]  # fmt: skip


def server(qemu, elf):
    cmd = command(qemu, elf)
    return StdioServerParameters(command=cmd[0], args=cmd[1:])


def texts(result):
    return [b.text for b in result.content if getattr(b, "type", "") == "text"]


def texts_of(message):
    """The text blocks of a raw tools/call response."""
    content = message.get("result", {}).get("content", [])
    return [b.get("text") for b in content if b.get("type") == "text"]


async def discover(qemu, elf):
    # mode "auto": the SDK probes server/discover and takes the modern era.
    async with Client(server(qemu, elf)) as c:
        expect(c.protocol_version == VERSION, f"negotiated {c.protocol_version!r}")
        info = c.server_info
        expect(info is not None and info.name == "mcpwire-device", f"server info {info!r}")
        expect(c.server_capabilities.tools is not None, "no tools capability")


async def tools(qemu, elf):
    async with Client(server(qemu, elf)) as c:
        listed = (await c.list_tools()).tools
        expect([t.name for t in listed] == TOOLS, f"tools {[t.name for t in listed]}")
        slow = listed[2].input_schema
        expect(slow["properties"]["steps"]["maximum"] == 100, f"slow_task schema {slow}")

        result = await c.call_tool("read_sensor", {})
        expect(not result.is_error, f"read_sensor failed: {result!r}")
        expect(texts(result) == ["temperature 21.500 °C"], f"read_sensor text {texts(result)}")
        expect(
            result.structured_content == {"sensor": "temperature", "millicelsius": 21500},
            f"read_sensor structured {result.structured_content}",
        )
        # Set, then toggle: the board keeps the state between calls.
        result = await c.call_tool("toggle_output", {"on": True})
        expect(texts(result) == ["output on"], f"toggle_output on: {texts(result)}")
        result = await c.call_tool("toggle_output", {})
        expect(texts(result) == ["output off"], f"toggle_output toggle: {texts(result)}")
        expect(result.structured_content == {"on": False}, f"structured {result.structured_content}")


async def progress(qemu, elf):
    seen = []

    async def on_progress(value, total, message):
        seen.append((value, total, message))

    async with Client(server(qemu, elf)) as c:
        start = time.monotonic()
        result = await c.call_tool(
            "slow_task", {"steps": 4, "delay_ms": 100}, progress_callback=on_progress
        )
        elapsed = time.monotonic() - start
        expect(not result.is_error, f"slow_task failed: {result!r}")
        expect(texts(result) == ["done after 4 steps"], f"result {texts(result)}")
        expect([v for v, _, _ in seen] == [1, 2, 3, 4], f"progress notifications {seen}")
        expect(all(t == 4 for _, t, _ in seen), f"totals {seen}")
        expect(seen[-1][2] == "step 4 of 4", f"last message {seen[-1][2]!r}")
        # The board's clock: 4 delays of 100 ms, not much more.
        expect(0.39 <= elapsed < 2.0, f"4 x 100 ms took {elapsed:.2f} s")


async def cancel(qemu, elf):
    # Abandoning the call makes the SDK send notifications/cancelled; the
    # board must stop the tool (it would run 10 s) and never answer it.
    seen = []

    async def on_progress(value, total, message):
        seen.append(value)

    async with Client(server(qemu, elf)) as c:
        before = len(late.ids)
        with anyio.move_on_after(0.5) as scope:
            await c.call_tool(
                "slow_task", {"steps": 100, "delay_ms": 100}, progress_callback=on_progress
            )
        expect(scope.cancelled_caught, "slow_task ended before the cancel")
        expect(1 <= len(seen) < 10, f"progress before the cancel: {seen}")
        await anyio.sleep(0.3)
        # The cancelled call gave its handler back: both handlers take a
        # call at once (with the tool still running, one would be answered
        # "server busy").
        results = [None, None]

        async def run(i):
            results[i] = await c.call_tool("slow_task", {"steps": 2, "delay_ms": 50})

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, 0)
            tg.start_soon(run, 1)
        for r in results:
            expect(not r.is_error and texts(r) == ["done after 2 steps"], f"after the cancel: {r!r}")
        expect(len(late.ids) == before, f"a response came after the cancel: {late.ids[before:]}")


async def tool_error(qemu, elf):
    async with Client(server(qemu, elf)) as c:
        for name, args, want in [
            ("toggle_output", {"on": 5}, "on must be a boolean"),
            ("slow_task", {"steps": 0}, "steps must be 1 to 100"),
        ]:
            try:
                result = await c.call_tool(name, args)
            except MCPError as e:
                expect(e.code == -32602, f"{name}: code {e.code}: {e}")
                expect(want in str(e), f"{name}: message {e}")
            else:
                raise Failed(f"{name} {args} answered {result!r}")
        try:
            result = await c.call_tool("no_such_tool", {})
        except MCPError as e:
            expect(e.code in (-32602, -32601), f"unknown tool: code {e.code}: {e}")
        else:
            expect(result.is_error, f"unknown tool answered: {result!r}")
        result = await c.call_tool("read_sensor", {})
        expect(not result.is_error, "read_sensor after the errors failed")


def flood(qemu, elf):
    # Raw pipes: a burst far larger than the board's 256-octet ring and the
    # pipe buffers, written at once while the board reads one octet at a
    # time. Every request must come back answered, in any order, and a bad
    # line in the middle gets its -32700 without hurting its neighbours.
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def call(id, name, arguments):
        params = {"name": name, "arguments": arguments, "_meta": meta}
        return json.dumps({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})

    count = 150
    # First, slow calls that take both of the board's calls for a while:
    # the engine stops reading, the ring fills and the UART holds the
    # rest back (QEMU stops reading its stdin).
    slow = [1000 + i for i in range(4)]
    lines = [call(i, "slow_task", {"steps": 1, "delay_ms": 300}) for i in slow]
    lines += [call(i, "toggle_output", {"on": i % 2 == 0}) for i in range(count)]
    lines.insert(len(lines) // 2, "this is not json")
    data = ("\n".join(lines) + "\n").encode()
    p = subprocess.Popen(
        command(qemu, elf), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    def write():
        try:
            p.stdin.write(data)
            p.stdin.flush()
        except OSError:
            pass  # QEMU was killed: the answers tell what was lost

    writer = threading.Thread(target=write, daemon=True)
    # A lost octet would leave a request unanswered and the reads below
    # waiting: QEMU is killed in time, and the count tells.
    watchdog = threading.Timer(SCENARIO_SECONDS - 10, p.kill)
    watchdog.start()
    start = time.monotonic()
    answers = {}
    errors = []
    try:
        writer.start()
        while len(answers) < count + len(slow) or not errors:
            line = p.stdout.readline()
            if not line:
                break
            try:
                message = json.loads(line)
            except ValueError:
                raise Failed(f"stdout line that is not JSON: {line[:120]!r}") from None
            expect(message.get("jsonrpc") == "2.0", f"not JSON-RPC: {message}")
            if message.get("id") is None:
                errors.append(message)
            else:
                answers[message["id"]] = message
    finally:
        watchdog.cancel()
        p.terminate()
        _, err = p.communicate(timeout=10)
    elapsed = time.monotonic() - start
    expect(sorted(answers) == list(range(count)) + slow, f"{len(answers)} of {count + 4} answered")
    for i in slow:
        got = texts_of(answers[i])
        expect(got == ["done after 1 steps"], f"answer {i}: {answers[i]}")
    for i in range(count):
        m = answers[i]
        on = i % 2 == 0
        got = m.get("result", {}).get("structuredContent")
        expect(got == {"on": on}, f"answer {i}: {m}")
    codes = [m.get("error", {}).get("code") for m in errors]
    expect(codes == [-32700], f"bad-line answers {codes}")
    expect(b"panic" not in err and b"overrun" not in err, f"stderr {err[-300:]!r}")
    print(f"    flood: {len(data)} octets, {len(answers)} calls in {elapsed:.2f} s", flush=True)


SCENARIOS = {
    "discover": discover,
    "tools": tools,
    "progress": progress,
    "cancel": cancel,
    "tool-error": tool_error,
    "flood": flood,
}


async def run(name, qemu, elf):
    scenario = SCENARIOS[name]
    with anyio.fail_after(SCENARIO_SECONDS):
        if name == "flood":
            await anyio.to_thread.run_sync(scenario, qemu, elf)
        else:
            await scenario(qemu, elf)


def main():
    if len(sys.argv) < 3 or not all(a.startswith("/") for a in sys.argv[1:3]):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    qemu, elf = sys.argv[1:3]
    names = sys.argv[3:] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenario {unknown}; scenarios: {' '.join(SCENARIOS)}", file=sys.stderr)
        sys.exit(2)
    passed = failed = 0
    for name in names:
        try:
            anyio.run(run, name, qemu, elf)
        except Exception as e:  # every failure is reported, the next runs
            # The SDK's task groups wrap what a scenario raised.
            while isinstance(e, ExceptionGroup) and len(e.exceptions) == 1:
                e = e.exceptions[0]
            why = str(e) if isinstance(e, Failed) else f"{type(e).__name__}: {e}"
            print(f"FAILED {name}: {why}", flush=True)
            failed += 1
        else:
            print(f"ok {name}", flush=True)
            passed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
