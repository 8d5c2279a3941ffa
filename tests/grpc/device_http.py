"""The official Python MCP SDK (mcp 2.3.0) as a Streamable HTTP client of
the device app (examples/device-host, mcpwire-embassy): the same port as
the gRPC clients, HTTP/1.1, the protocol pinned to 2026-07-28.

    python device_http.py http://10.77.0.2:50051/mcp

The environment's DEVICE_TOKEN, when set, is sent with every request as a
bearer token (the device app requires one unless it runs with --no-auth).
Prints one JSON line a scenario ({"scenario": ..., "ok": ..., ...}), as
the other clients of scripts/interop-embassy-host.sh do; exits 1 when one
failed.
"""

import asyncio
import contextlib
import json
import os
import sys

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

VERSION = "2026-07-28"
SCENARIO_SECONDS = 20


@contextlib.asynccontextmanager
async def connect(url):
    """A client of the device at `url`, with DEVICE_TOKEN as its bearer
    token when set."""
    token = os.environ.get("DEVICE_TOKEN")
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"} if token else None)
    async with http:
        async with Client(streamable_http_client(url, http_client=http), mode=VERSION) as c:
            yield c


async def tools_list(url):
    async with connect(url) as c:
        names = sorted(t.name for t in (await c.list_tools()).tools)
        want = ["read_sensor", "slow_task", "toggle_output"]
        return names == want, {"tools": names}


async def call(url):
    async with connect(url) as c:
        result = await c.call_tool("read_sensor", {})
        texts = [b.text for b in result.content if getattr(b, "type", "") == "text"]
        return not result.is_error and len(texts) == 1, {"texts": texts}


async def progress(url):
    seen = []

    async def on_progress(value, total, message):
        seen.append(value)

    async with connect(url) as c:
        result = await c.call_tool(
            "slow_task", {"steps": 3, "delay_ms": 20}, progress_callback=on_progress
        )
        return not result.is_error and seen == [1, 2, 3], {"progress": seen}


async def main(url):
    failed = 0
    for name, scenario in (("sdk-tools-list", tools_list), ("sdk-call", call), ("sdk-progress", progress)):
        try:
            with anyio.fail_after(SCENARIO_SECONDS):
                ok, seen = await scenario(url)
        except Exception as e:  # a scenario's failure, whatever it is
            ok, seen = False, {"error": f"{type(e).__name__}: {e}"}
        failed += not ok
        print(json.dumps({"scenario": name, "ok": ok, **seen}, separators=(",", ":")), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
