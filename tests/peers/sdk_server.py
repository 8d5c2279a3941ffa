"""The official Python MCP SDK (mcp 2.3.0) as a benchmark peer: the
`echo` and `progress` tools of `mcpwire serve`'s demo, with the same
arguments and results, over Streamable HTTP or stdio.

    python sdk_server.py --listen 127.0.0.1:PORT [--json]   # stateless
    python sdk_server.py --listen 127.0.0.1:PORT --hypercorn  # HTTP/1.1 and h2c
    python sdk_server.py --listen 127.0.0.1:PORT --hypercorn --certfile PEM --keyfile PEM  # TLS, ALPN h2
    python sdk_server.py --stdio

Over HTTP it answers with SSE, the SDK's default: with `--json` (its
JSON-response mode) it answers every call with one JSON body and drops the
progress notifications, so the benchmark's progress scenario needs SSE.

Over HTTP it binds the socket itself, prints "listening on ADDR" on stderr
once it accepts connections, and serves with uvicorn (no access log) until
killed; with `--hypercorn` it serves the same app with Hypercorn, which
also speaks HTTP/2 with prior knowledge (h2c) on that port, or TLS with
ALPN h2 and http/1.1 given `--certfile` and `--keyfile`. Over stdio it serves until stdin ends. Written the way an SDK user
would write it: `MCPServer` with decorated tools.
"""

import argparse
import asyncio
import socket
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer(
    "python-sdk-server",
    instructions="A Python SDK server of the mcpwire demo's echo and progress tools.",
    log_level="WARNING",
)


@server.tool(description="Returns its text.", structured_output=False)
def echo(text: str) -> str:
    return text


@server.tool(
    description="Sends `steps` progress notifications, `delay_ms` apart, then a result.",
    structured_output=False,
)
async def progress(ctx: Context, steps: int = 3, delay_ms: int = 100) -> str:
    for i in range(1, steps + 1):
        # A zero delay sends at once, as the demo does.
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"done after {steps} steps"


def serve_http(listen: str, json_response: bool) -> None:
    import uvicorn

    host, _, port = listen.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(1024)
    addr = "%s:%d" % sock.getsockname()
    app = server.streamable_http_app(json_response=json_response, stateless_http=True, host=host)
    config = uvicorn.Config(app, log_level="warning", access_log=False, backlog=1024)
    print(f"listening on {addr}", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


def serve_hypercorn(listen: str, json_response: bool, certfile: str | None, keyfile: str | None) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    host, _, port = listen.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(1024)
    sock.set_inheritable(True)
    addr = "%s:%d" % sock.getsockname()
    app = server.streamable_http_app(json_response=json_response, stateless_http=True, host=host)
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.loglevel = "WARNING"
    config.accesslog = None
    if certfile:
        config.certfile = certfile
        config.keyfile = keyfile
    print(f"listening on {addr}", file=sys.stderr, flush=True)
    asyncio.run(serve(app, config))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--listen", metavar="HOST:PORT")
    mode.add_argument("--stdio", action="store_true")
    parser.add_argument("--json", action="store_true", help="JSON responses (no progress notifications)")
    parser.add_argument("--hypercorn", action="store_true", help="serve with Hypercorn (HTTP/1.1 and h2c)")
    parser.add_argument("--certfile", help="with --hypercorn: TLS with this certificate chain (PEM)")
    parser.add_argument("--keyfile", help="with --hypercorn: the certificate's key (PEM)")
    args = parser.parse_args()
    if args.stdio:
        server.run("stdio")
    elif args.hypercorn:
        serve_hypercorn(args.listen, args.json, args.certfile, args.keyfile)
    else:
        serve_http(args.listen, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
