"""The Python SDK's client (mcp 2.3.0) under load, for the client benchmark
(scripts/bench-client.sh); the arguments and the printed line are those of
mcpwire-client-load:

    sdk_client_load.py --calls N [--concurrency C] [--text-bytes B] -- /ABS/SERVER [ARGS...]
    sdk_client_load.py --calls N [--concurrency C] [--text-bytes B] --url http://HOST:PORT/mcp

Connects with mode 2026-07-28 (no handshake-era fallback), lists the tools,
calls echo N times with C calls in flight, checks every answer's text and
prints "CLIENT_LOAD calls=N wall_s=S cpu_s=S": this process's user and
system CPU time (all threads) in the calls only.
"""

import resource
import sys
import time

import anyio
from mcp import Client, StdioServerParameters

VERSION = "2026-07-28"


def usage(why):
    print(f"sdk_client_load.py: {why}\n{__doc__}", file=sys.stderr)
    sys.exit(2)


def parse(argv):
    calls, concurrency, text_bytes, target = None, 1, 100, None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            command = argv[i + 1 :]
            if not command or not command[0].startswith("/"):
                usage("the server after -- must be an absolute path")
            target = StdioServerParameters(command=command[0], args=command[1:])
            break
        if i + 1 >= len(argv):
            usage(f"{arg} needs a value")
        value = argv[i + 1]
        if arg == "--url":
            target = value
        elif arg in ("--calls", "--concurrency", "--text-bytes"):
            try:
                n = int(value)
            except ValueError:
                usage(f"{arg} needs a number")
            if arg == "--calls":
                calls = n
            elif arg == "--concurrency":
                concurrency = max(n, 1)
            else:
                text_bytes = n
        else:
            usage(f"unknown argument {arg!r}")
        i += 2
    if calls is None or target is None:
        usage("--calls and a server are required")
    return calls, concurrency, text_bytes, target


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def run(calls, concurrency, text_bytes, target):
    text = "".join(chr(ord("a") + i % 26) for i in range(text_bytes))
    async with Client(target, mode=VERSION) as c:
        tools = (await c.list_tools()).tools
        if "echo" not in [t.name for t in tools]:
            raise SystemExit("sdk_client_load.py: the server has no echo tool")
        left = [calls]

        async def worker():
            while left[0] > 0:
                left[0] -= 1
                result = await c.call_tool("echo", {"text": text})
                got = [b.text for b in result.content if getattr(b, "type", "") == "text"]
                if got != [text]:
                    raise SystemExit(f"sdk_client_load.py: echo answered {got!r}")

        cpu_before = cpu_seconds()
        start = time.monotonic()
        async with anyio.create_task_group() as tg:
            for _ in range(min(concurrency, max(calls, 1))):
                tg.start_soon(worker)
        wall = time.monotonic() - start
        cpu = cpu_seconds() - cpu_before
    print(f"CLIENT_LOAD calls={calls} wall_s={wall:.3f} cpu_s={cpu:.3f}", flush=True)


def main():
    anyio.run(run, *parse(sys.argv[1:]))


if __name__ == "__main__":
    main()
