"""A legacy MCP server over HTTP, written with the official Python SDK `mcp`
1.x (1.26.0, the venv .peers/venv-mcp1), as a peer of mcpwire's HTTP client
(scripts/interop-http-client.sh): the client reaches it only through its
era fallback.

    python legacy_server.py --transport streamable-http --listen HOST:PORT
    python legacy_server.py --transport sse --listen HOST:PORT

streamable-http: the 2025-era Streamable HTTP shape with sessions (FastMCP's
default, stateful): `POST /mcp` with `initialize` mints an `Mcp-Session-Id`,
later requests carry it, `GET /mcp` opens the session's stream, `DELETE
/mcp` ends the session, an unknown session gets 404.

sse: the 2024-11-05 HTTP+SSE shape: `GET /sse` opens the event stream,
whose first event (`endpoint`) names the URL to POST to
(`/messages/?session_id=...`); every answer comes back on the stream.

The surface is the one of `mcpwire serve`'s demo, with the same arguments
and results: tools `echo` (text), `add` (a, b), `progress` (`steps`
progress notifications, `delay_ms` apart, when the call carries a progress
token; then a result), the resource `mem://readme` and the prompt `greet`
(who). A port of 0 takes a free one; the address is a loopback one (the SDK's
DNS-rebinding check, on by default, accepts only loopback `Host`s). It binds the socket itself, prints
"listening on ADDR" on stderr once it accepts connections, then one line a
request ("request METHOD PATH session=ID -> STATUS", the session from the
header or the query) so that a test can see a session's DELETE, and serves
until killed.
"""

import argparse
import asyncio
import socket
import sys
import warnings
from urllib.parse import parse_qs

# pydantic-settings warns about the SDK's own settings class at import.
warnings.filterwarnings("ignore", module="pydantic_settings")

from mcp.server.fastmcp import Context, FastMCP  # noqa: E402

README = "mcpwire: MCP over gRPC, from a microcontroller to a server.\n"

server = FastMCP("python-mcp1-legacy-server", log_level="WARNING")


@server.tool(description="Returns its text.", structured_output=False)
def echo(text: str) -> str:
    return text


@server.tool(description="Adds two integers.", structured_output=False)
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(
    description="Sends `steps` progress notifications, `delay_ms` apart, then a result.",
    structured_output=False,
)
async def progress(ctx: Context, steps: int = 3, delay_ms: int = 100) -> str:
    for i in range(1, steps + 1):
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)
        # FastMCP 1.x's `ctx.report_progress` sends progress unrelated to
        # the call: over Streamable HTTP that is the session's GET stream,
        # dropped when none is open. Related to the call, it travels on the
        # call's own SSE response (on the one stream over HTTP+SSE).
        token = ctx.request_context.meta.progressToken if ctx.request_context.meta else None
        if token is not None:
            await ctx.session.send_progress_notification(
                token, i, steps, f"step {i} of {steps}", related_request_id=ctx.request_id
            )
    return f"done after {steps} steps"


@server.resource("mem://readme", name="readme", mime_type="text/plain")
def readme() -> str:
    return README


@server.prompt(description="Greets someone.")
def greet(who: str) -> str:
    return f"Say hello to {who}."


def request_log(app):
    """ASGI middleware: one line on stderr per HTTP request, once answered."""

    async def logged(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        session = headers.get(b"mcp-session-id", b"").decode("latin-1")
        if not session:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            session = (query.get("session_id") or ["-"])[0]

        async def send_logged(message):
            if message["type"] == "http.response.start":
                print(
                    f"request {scope['method']} {scope['path']} session={session} -> {message['status']}",
                    file=sys.stderr,
                    flush=True,
                )
            await send(message)

        return await app(scope, receive, send_logged)

    return logged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("streamable-http", "sse"), required=True)
    parser.add_argument("--listen", metavar="HOST:PORT", required=True)
    args = parser.parse_args()

    import uvicorn

    host, _, port = args.listen.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A test restarts the server on its port to lose its sessions.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(128)
    addr = "%s:%d" % sock.getsockname()
    app = server.streamable_http_app() if args.transport == "streamable-http" else server.sse_app()
    config = uvicorn.Config(request_log(app), log_level="warning", access_log=False, lifespan="on")
    print(f"listening on {addr}", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
