"""The official Python MCP SDK (mcp 2.3.0) as a stdio host of `mcpwire
bridge`: one row of the bridge matrix (scripts/interop-bridge.sh), the
host's half of the transports document's minimum bridge test.

    python host_py.py ROW PHASE WRAPPER PROFILE-JSON
    python host_py.py ROW PHASE http PROFILE-JSON

WRAPPER is the executable the SDK launches as its stdio server; it runs
the bridge (its arguments choose a variant: --bad-token, --timeout,
--fault). With `http`, the host is the SDK's Streamable HTTP client of a
running `mcpwire bridge --listen` at the profile's "url" ("timeout_url"
for the timeout check), its bearer token read from "token_file" (a wrong
one from "bad_token_file"); "restart" is the shell command that stops the
bridge and starts it again. PROFILE-JSON says what the server behind the
bridge offers:

    {"tool": "echo", "args": {...}, "text": "expected text",
     "bad_args": {...}, "slow": "progress", "slow_args": {...},
     "auth": true, "kill": "shell command"}

PHASE "ordinary": discover, tools-list, read-call, malformed-args, cancel,
timeout, unauthorized (when "auth"), restart (three launches in a row).
PHASE "faults": disconnect (the "kill" command runs while a slow call is
in flight: the call must end in an error, not a result, and the next one
must be answered).

Prints "PASS|FAIL|SKIP ROW CHECK detail" per check; exits 1 when one
failed.
"""

import contextlib
import json
import logging
import subprocess
import sys
import time

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

VERSION = "2026-07-28"
CHECK_SECONDS = 20


class Failed(Exception):
    pass


def expect(cond, why):
    if not cond:
        raise Failed(why)


class LateResponses(logging.Handler):
    """The SDK's notes of a response to a request it no longer waits for."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record):
        if "unknown/late request id" in record.getMessage():
            self.count += 1


late = LateResponses()
logging.getLogger("mcp.shared.jsonrpc_dispatcher").addHandler(late)
logging.getLogger("mcp.shared.jsonrpc_dispatcher").setLevel(logging.DEBUG)


def leaf(e):
    """The first exception inside exception groups."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def texts(result):
    return [b.text for b in result.content if getattr(b, "type", "") == "text"]


class Row:
    def __init__(self, name, wrapper, profile):
        self.name, self.wrapper, self.p = name, wrapper, profile
        self.http = wrapper == "http"
        self.failed = 0
        # The HTTP statuses the host got (HTTP hosts).
        self.statuses = []

    def client(self, *variant):
        if not self.http:
            return Client(StdioServerParameters(command=self.wrapper, args=list(variant)))
        url = self.p["timeout_url"] if "--timeout" in variant else self.p["url"]
        token = None
        if "--no-token" not in variant:
            with open(self.p["bad_token_file" if "--bad-token" in variant else "token_file"]) as f:
                token = f.read().strip()
        return self.http_client(url, token)

    @contextlib.asynccontextmanager
    async def http_client(self, url, token):
        async def on_response(response):
            self.statuses.append(response.status_code)

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"} if token else None)
        http.event_hooks = {"response": [on_response]}
        async with http:
            async with Client(streamable_http_client(url, http_client=http)) as c:
                yield c

    def report(self, status, check, detail=""):
        if status == "FAIL":
            self.failed += 1
        print(f"{status} {self.name} {check} {detail}".rstrip(), flush=True)

    async def run(self, check, body):
        try:
            with anyio.fail_after(CHECK_SECONDS):
                detail = await body()
        except Exception as e:  # an SDK error is this check's failure
            e = leaf(e)
            if isinstance(e, Failed):
                self.report("FAIL", check, str(e))
            elif isinstance(e, TimeoutError):
                self.report("FAIL", check, f"no end within {CHECK_SECONDS} s")
            else:
                self.report("FAIL", check, f"{type(e).__name__}: {e}")
        else:
            self.report("PASS", check, detail or "")

    async def read_call(self, c):
        result = await c.call_tool(self.p["tool"], self.p["args"])
        expect(not result.is_error, f"{self.p['tool']} failed: {result!r}")
        expect(texts(result) == [self.p["text"]], f"{self.p['tool']} returned {texts(result)}")

    # --- the checks ---------------------------------------------------------

    async def discover(self):
        async with self.client() as c:
            expect(c.protocol_version == VERSION, f"negotiated {c.protocol_version!r}")
            expect(c.server_capabilities.tools is not None, "no tools capability")
            info = c.server_info
            return f"{VERSION}, server {info.name if info else '?'}"

    async def tools_list(self):
        async with self.client() as c:
            names = [t.name for t in (await c.list_tools()).tools]
            for want in (self.p["tool"], self.p["slow"]):
                expect(want in names, f"{want} not in {names}")
            return ",".join(names)

    async def call(self):
        async with self.client() as c:
            await self.read_call(c)
            return f"{self.p['tool']} -> {self.p['text']!r}"

    async def malformed_args(self):
        async with self.client() as c:
            try:
                result = await c.call_tool(self.p.get("bad_tool", self.p["tool"]), self.p["bad_args"])
            except MCPError as e:
                expect(e.code == -32602, f"code {e.code}: {e}")
                seen = f"JSON-RPC error {e.code}"
            else:
                expect(result.is_error, f"no error: {result!r}")
                seen = "isError result"
            await self.read_call(c)
            return seen

    async def cancel(self):
        async with self.client() as c:
            before = late.count
            started = anyio.Event()

            async def on_progress(value, total, message):
                started.set()

            with anyio.move_on_after(10) as scope:
                async with anyio.create_task_group() as tg:

                    async def slow():
                        await c.call_tool(self.p["slow"], self.p["slow_args"], progress_callback=on_progress)
                        raise Failed("the slow call ended before the cancel")

                    tg.start_soon(slow)
                    await started.wait()
                    tg.cancel_scope.cancel()
            expect(not scope.cancelled_caught, "no progress from the slow call in 10 s")
            # A response to the cancelled call would come now.
            await anyio.sleep(1.5)
            expect(late.count == before, "a response came after the cancel")
            await self.read_call(c)
            return "cancelled in flight, no late response, next call answered"

    async def timeout(self):
        async with self.client("--timeout") as c:
            start = time.monotonic()
            try:
                result = await c.call_tool(self.p["slow"], self.p["slow_args"])
            except MCPError as e:
                seen = f"JSON-RPC error {e.code} after {time.monotonic() - start:.1f} s"
            else:
                raise Failed(f"a result, not a timeout: {texts(result)}")
            expect(time.monotonic() - start < 8, f"too late: {seen}")
            await self.read_call(c)
            return seen

    async def unauthorized(self):
        if self.http:
            return await self.unauthorized_http()
        # The bridge is given a wrong token for the server: the host must
        # see a failure, never a result.
        try:
            async with self.client("--bad-token") as c:
                try:
                    await c.list_tools()
                except MCPError as e:
                    return f"tools/list refused: {e.code} {e}"
                raise Failed("tools/list answered with a wrong token")
        except Exception as e:
            if isinstance(leaf(e), Failed):
                raise leaf(e) from None
            return f"connect refused: {type(leaf(e)).__name__}: {leaf(e)}"[:160]

    async def unauthorized_http(self):
        # No token, then a wrong one: the bridge's host side answers 401.
        seen = []
        for variant in ("--no-token", "--bad-token"):
            self.statuses.clear()
            try:
                async with self.client(variant) as c:
                    await c.list_tools()
                raise Failed(f"{variant}: tools/list answered")
            except Exception as e:
                if isinstance(leaf(e), Failed):
                    raise leaf(e) from None
            expect(self.statuses and set(self.statuses) == {401}, f"{variant}: HTTP statuses {self.statuses}")
            seen.append(f"{variant[2:]}: 401")
        return ", ".join(seen)

    async def restart(self):
        for i in range(3):
            if self.http:
                subprocess.run(self.p["restart"], shell=True, check=True)
            async with self.client() as c:
                await self.read_call(c)
        return "3 restarts of the bridge" if self.http else "3 launches"

    async def disconnect(self):
        async with self.client("--fault") as c:
            started = anyio.Event()

            async def on_progress(value, total, message):
                started.set()

            outcome = {}

            async def slow():
                try:
                    result = await c.call_tool(self.p["slow"], self.p["slow_args"], progress_callback=on_progress)
                    outcome["result"] = texts(result)
                except MCPError as e:
                    outcome["error"] = f"{e.code} {e}"

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow)
                with anyio.move_on_after(10):
                    await started.wait()
                if not started.is_set():
                    tg.cancel_scope.cancel()
                    raise Failed("no progress from the slow call in 10 s")
                subprocess.run(self.p["kill"], shell=True, check=True)
                with anyio.move_on_after(10):
                    while not outcome:
                        await anyio.sleep(0.05)
                if not outcome:
                    tg.cancel_scope.cancel()
            expect(outcome, "the call in flight had no end within 10 s of the kill")
            expect("error" in outcome, f"the call in flight got a result: {outcome}")
            # The next call is answered (an error or a result), not left hanging.
            after = None
            with anyio.move_on_after(10):
                try:
                    await c.call_tool(self.p["tool"], self.p["args"])
                    after = "next call: a result"
                except MCPError as e:
                    after = f"next call: error {e.code}"
            expect(after, "the next call had no answer within 10 s")
            return f"in-flight error {outcome['error'][:80]!r}; {after}"


async def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    name, phase, wrapper, profile = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    row = Row(name, wrapper, profile)
    if phase == "ordinary":
        checks = [
            ("discover", row.discover),
            ("tools-list", row.tools_list),
            ("read-call", row.call),
            ("malformed-args", row.malformed_args),
            ("cancel", row.cancel),
            ("timeout", row.timeout),
            ("unauthorized", row.unauthorized if profile.get("auth") else None),
            ("restart", row.restart),
        ]
    else:
        checks = [("disconnect", row.disconnect)]
    for check, body in checks:
        if body is None:
            row.report("SKIP", check, profile.get("no_auth", "no auth on this path"))
        else:
            await row.run(check, body)
    return 1 if row.failed else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
