"""The official Python MCP SDK (mcp 2.3.0) as a client of `mcpwire serve`,
over stdio (MCP 2026-07-28 section 6) or Streamable HTTP (section 5).

    python sdk_client.py /abs/path/to/mcpwire [scenario...]
    python sdk_client.py http://HOST:PORT/mcp [--fixtures URL] [scenario...]

With a binary, every SDK scenario launches the server as a child process
through `mcp.Client(StdioServerParameters(...))`, as a host would: the
demo, or for the scenarios named fixture-* the conformance fixture set
(`serve --stdio --fixtures conformance`). With a URL, the scenarios call
a running server there (the demo, started with `--tick-ms 300`) and the
fixture-* ones the server at the `--fixtures` URL, through the SDK's
Streamable HTTP transport; an HTTP client hook records each POST's
headers and the answer's status and media type, so the scenarios also
check what travelled (the mirrored headers, SSE for a progress call, a
cancel that closes the request instead of posting a notification).
The multi round-trip tools are driven through the SDK's elicitation,
sampling and roots callbacks. The last scenario, eof-exit (stdio only),
drives the binary over raw pipes to check what the SDK does not show:
stdout carries only JSON-RPC lines, a bad line is answered and the
channel goes on, and at the end of stdin the call in flight finishes and
the process exits 0.

Prints "ok NAME" or "FAILED NAME: why" per scenario, then
"N passed, N failed"; exits 1 when one failed, 2 on a usage error.
"""

import asyncio
import contextlib
import json
import logging
import subprocess
import sys
import time

import anyio
import httpx2
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

VERSION = "2026-07-28"
# The demo's listen source announces tools/list_changed this often.
TICK_MS = 300
# Bound of every scenario.
SCENARIO_SECONDS = 20


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


class Target:
    """Where the server is: `binary` launched over stdio, or the running
    servers at `url` (the demo) and `fixtures_url` over Streamable HTTP.
    `posts` records each HTTP POST: (request headers, JSON body, status,
    response media type)."""

    def __init__(self, binary=None, url=None, fixtures_url=None):
        self.binary, self.url, self.fixtures_url = binary, url, fixtures_url
        self.posts = []

    @property
    def http(self):
        return self.url is not None

    def _server(self, fixtures):
        if not self.http:
            args = ["--fixtures", "conformance"] if fixtures else ["--tick-ms", str(TICK_MS)]
            return StdioServerParameters(command=self.binary, args=["serve", "--stdio", *args])
        url = self.fixtures_url if fixtures else self.url
        expect(url is not None, "no --fixtures URL given")
        return url

    @contextlib.asynccontextmanager
    async def client(self, fixtures=False, **options):
        """An `mcp.Client` of the demo, or of the fixture set."""
        server = self._server(fixtures)
        if not self.http:
            async with Client(server, **options) as c:
                yield c
            return

        async def on_response(response):
            request = response.request
            if request.method == "POST":
                try:
                    body = json.loads(request.content or b"null")
                except ValueError:
                    body = None
                media = response.headers.get("content-type", "").split(";")[0].strip()
                self.posts.append((dict(request.headers), body, response.status_code, media))

        http = create_mcp_http_client()
        http.event_hooks = {"response": [on_response]}
        async with http:
            transport = streamable_http_client(server, http_client=http)
            async with Client(transport, **options) as c:
                yield c

    def post_of(self, method, name=None):
        """The last recorded POST of `method` (and `name`)."""
        for headers, body, status, media in reversed(self.posts):
            if not isinstance(body, dict) or body.get("method") != method:
                continue
            if name is None or (body.get("params") or {}).get("name") == name:
                return headers, body, status, media
        raise Failed(f"no POST of {method} {name or ''} recorded")


async def discover(target):
    # mode "auto": the SDK probes server/discover and takes the modern era.
    async with target.client() as c:
        expect(c.protocol_version == VERSION, f"negotiated {c.protocol_version!r}")
        info = c.server_info
        expect(info is not None and info.name == "mcpwire-demo", f"server info {info!r}")
        caps = c.server_capabilities
        expect(caps.tools is not None, f"no tools capability in {caps!r}")


async def tools_list(target):
    async with target.client() as c:
        names = [t.name for t in (await c.list_tools()).tools]
        for want in ("echo", "progress", "sleep"):
            expect(want in names, f"{want} not in {names}")
        result = await c.call_tool("echo", {"text": "hi over stdio"})
        expect(not result.is_error, f"echo failed: {result!r}")
        texts = [b.text for b in result.content if getattr(b, "type", "") == "text"]
        expect(texts == ["hi over stdio"], f"echo returned {texts}")
    if target.http:
        # The mirrored headers of section 5.4, and a JSON answer.
        headers, _, status, media = target.post_of("tools/call", "echo")
        expect(status == 200 and media == "application/json", f"echo: {status} {media}")
        got = {k: headers.get(k) for k in ("mcp-protocol-version", "mcp-method", "mcp-name")}
        want = {"mcp-protocol-version": VERSION, "mcp-method": "tools/call", "mcp-name": "echo"}
        expect(got == want, f"echo's headers {got}")


async def progress(target):
    seen = []

    async def on_progress(value, total, message):
        seen.append((value, total, message))

    async with target.client() as c:
        result = await c.call_tool(
            "progress", {"steps": 3, "delay_ms": 20}, progress_callback=on_progress
        )
        expect(not result.is_error, f"progress failed: {result!r}")
        texts = [b.text for b in result.content if getattr(b, "type", "") == "text"]
        expect(texts == ["done after 3 steps"], f"result {texts}")
        expect([v for v, _, _ in seen] == [1, 2, 3], f"progress notifications {seen}")
        expect(all(t == 3 for _, t, _ in seen), f"totals {seen}")
        expect(seen[-1][2] == "step 3 of 3", f"last message {seen[-1][2]!r}")
    if target.http:
        # A progress token makes the answer an event stream (section 5.2).
        _, _, status, media = target.post_of("tools/call", "progress")
        expect(status == 200 and media == "text/event-stream", f"progress call: {status} {media}")


async def cancel(target):
    # Abandoning the call makes the SDK cancel it: over stdio it sends
    # notifications/cancelled, over HTTP it closes the request (section
    # 5.7). The server must stop the handler and never answer it.
    async with target.client() as c:
        before = len(late.ids)
        posts = len(target.posts)
        start = time.monotonic()
        with anyio.move_on_after(0.3) as scope:
            await c.call_tool("sleep", {"ms": 800})
        expect(scope.cancelled_caught, "the sleep call ended before the cancel")
        # Past the moment the handler would have answered.
        await anyio.sleep(1.2)
        expect(len(late.ids) == before, f"a response came after the cancel: {late.ids[before:]}")
        result = await c.call_tool("echo", {"text": "after"})
        expect(not result.is_error, "echo after the cancel failed")
        expect(time.monotonic() - start < 5, "too slow")
    if target.http:
        # The closed POST recorded no answer of its own (the hook runs when
        # the head arrived, before the body), and no cancel was posted.
        methods = [b.get("method") for _, b, _, _ in target.posts[posts:] if isinstance(b, dict)]
        expect("notifications/cancelled" not in methods, f"POSTs after the cancel: {methods}")


async def tool_error(target):
    async with target.client() as c:
        # echo's handler refuses a text that is not a string: a JSON-RPC
        # error (invalid params) from the tool.
        try:
            result = await c.call_tool("echo", {"text": 5})
        except MCPError as e:
            expect(e.code == -32602, f"code {e.code}: {e}")
            expect("text must be a string" in str(e), f"message {e}")
        else:
            expect(result.is_error, f"no error: {result!r}")
        # An unknown tool: the engine's own error.
        try:
            result = await c.call_tool("no-such-tool", {})
        except MCPError as e:
            expect(e.code in (-32602, -32601), f"unknown tool: code {e.code}: {e}")
        else:
            expect(result.is_error, f"unknown tool answered: {result!r}")
        result = await c.call_tool("echo", {"text": "still here"})
        expect(not result.is_error, "echo after the errors failed")
    if target.http:
        # Errors of a dispatched call travel in-band: HTTP 200 (section 5.3).
        _, _, status, _ = target.post_of("tools/call", "no-such-tool")
        expect(status == 200, f"unknown tool: HTTP {status}")


async def listen(target):
    async with target.client() as c:
        async with c.listen(tools_list_changed=True) as sub:
            expect(sub.honored.tools_list_changed, f"honored {sub.honored!r}")
            events = []
            with anyio.fail_after(5 * TICK_MS / 1000 + 2):
                async for event in sub:
                    events.append(event)
                    if len(events) == 2:
                        break
            kinds = {type(e).__name__ for e in events}
            expect(len(events) == 2, f"events {events}")
            expect(all("Tool" in k for k in kinds), f"event kinds {kinds}")
        # The listen was cancelled on leaving; the channel goes on.
        names = [t.name for t in (await c.list_tools()).tools]
        expect("echo" in names, "tools/list after the listen failed")
    if target.http:
        _, _, status, media = target.post_of("subscriptions/listen")
        expect(status == 200 and media == "text/event-stream", f"listen: {status} {media}")


class Answers:
    """The client's side of multi round-trip input: what a user and a
    model would answer, and what was asked."""

    def __init__(self):
        self.asked = []

    async def elicit(self, context, params):
        self.asked.append(("elicitation", params.message))
        fields = list(params.requested_schema["properties"])
        values = {"name": "Alice", "color": "blue", "ok": True, "context": "tests"}
        return types.ElicitResult(action="accept", content={f: values.get(f, "x") for f in fields})

    async def sample(self, context, params):
        self.asked.append(("sampling", params.messages[0].content.text))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Paris"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def roots(self, context):
        self.asked.append(("roots", None))
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    def client(self, target):
        return target.client(
            fixtures=True,
            elicitation_callback=self.elicit,
            sampling_callback=self.sample,
            list_roots_callback=self.roots,
        )


def text_of(result):
    return [b.text for b in result.content if getattr(b, "type", "") == "text"]


async def fixture_mrtr(target):
    answers = Answers()
    async with answers.client(target) as c:
        # Three rounds; the SDK answers each and echoes the sealed state.
        result = await c.call_tool("test_input_required_result_multi_round", {})
        expect(text_of(result) == ["Alice's favorite color is blue."], f"multi-round: {result!r}")
        expect(
            [m for _, m in answers.asked]
            == ["Step 1: What is your name?", "Step 2: What is your favorite color?"],
            f"asked {answers.asked}",
        )
        answers.asked.clear()
        result = await c.call_tool("test_input_required_result_multiple_inputs", {})
        expect(not result.is_error, f"multiple inputs: {result!r}")
        expect(
            sorted(k for k, _ in answers.asked) == ["elicitation", "roots", "sampling"],
            f"asked {answers.asked}",
        )
        expect("file:///work/project" in text_of(result)[0], f"multiple inputs: {text_of(result)}")
        result = await c.call_tool("test_input_required_result_sampling", {})
        expect(text_of(result) == ["The model answered: Paris"], f"sampling: {text_of(result)}")
        # A prompt that asks for input before it is complete.
        prompt = await c.get_prompt("test_input_required_result_prompt")
        expect(
            prompt.messages[0].content.text == "Use this context: tests",
            f"prompt: {prompt.messages!r}",
        )
        # The first round by hand, then its state tampered with: -32602.
        first = await c.session.call_tool(
            "test_input_required_result_tampered_state", {}, allow_input_required=True
        )
        expect(isinstance(first, types.InputRequiredResult), f"not input_required: {first!r}")
        expect(first.request_state, "no requestState")
        try:
            await c.session.call_tool(
                "test_input_required_result_tampered_state",
                {},
                input_responses={"confirm": {"action": "accept", "content": {"ok": True}}},
                request_state=first.request_state + "-TAMPERED",
                allow_input_required=True,
            )
        except MCPError as e:
            expect(e.code == -32602, f"tampered state: code {e.code}: {e}")
        else:
            raise Failed("a tampered requestState was accepted")


async def fixture_errors(target):
    # No callbacks: the client declares no sampling capability.
    async with target.client(fixtures=True) as c:
        try:
            await c.call_tool("test_missing_capability", {})
        except MCPError as e:
            expect(e.code == -32021, f"code {e.code}: {e}")
            required = (e.error.data or {}).get("requiredCapabilities")
            expect(required == {"sampling": {}}, f"requiredCapabilities {required!r}")
        else:
            raise Failed("test_missing_capability ran without sampling")
        # A tool's own failure is a result with isError, not a protocol error.
        result = await c.call_tool("test_error_handling", {})
        expect(result.is_error, f"test_error_handling: {result!r}")
        try:
            await c.read_resource("test://nonexistent-resource-for-conformance-testing")
        except MCPError as e:
            expect(e.code == -32602, f"missing resource: code {e.code}: {e}")
        else:
            raise Failed("a missing resource was read")
        contents = (await c.read_resource("test://template/7/data")).contents
        expect(json.loads(contents[0].text)["id"] == "7", f"template read: {contents!r}")
    if target.http:
        # -32021 is refused before dispatch: HTTP 400 (section 3.3).
        _, _, status, _ = target.post_of("tools/call", "test_missing_capability")
        expect(status == 400, f"-32021: HTTP {status}")


async def fixture_listen(target):
    async with target.client(fixtures=True) as c:
        async with c.listen(tools_list_changed=True) as sub:
            expect(sub.honored.tools_list_changed, f"honored {sub.honored!r}")
            await c.call_tool("test_trigger_tool_change", {})
            with anyio.fail_after(5):
                async for event in sub:
                    expect("Tool" in type(event).__name__, f"event {event!r}")
                    break


def eof_exit(target):
    binary = target.binary
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}),
        "this is not json",
        "[]",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "sleep", "arguments": {"ms": 400}, "_meta": meta},
            }
        ),
    ]
    start = time.monotonic()
    p = subprocess.run(
        [binary, "serve", "--stdio"],
        input=("\n".join(lines) + "\n").encode(),
        capture_output=True,
        timeout=15,
    )
    elapsed = time.monotonic() - start
    expect(p.returncode == 0, f"exit status {p.returncode}; stderr {p.stderr[-300:]!r}")
    out = p.stdout.decode()
    expect(out.endswith("\n"), "stdout does not end with a newline")
    messages = []
    for line in out.splitlines():
        try:
            messages.append(json.loads(line))
        except ValueError:
            raise Failed(f"stdout line that is not JSON: {line[:120]!r}") from None
    expect(all(m.get("jsonrpc") == "2.0" for m in messages), f"not JSON-RPC: {messages}")
    by_id = {m.get("id"): m for m in messages if "id" in m}
    expect("result" in by_id.get(1, {}), "no tools/list result")
    nulls = [m for m in messages if m.get("id") is None]
    codes = sorted(m["error"]["code"] for m in nulls if "error" in m)
    expect(codes == [-32700, -32600], f"bad-line answers {codes}")
    slept = by_id.get(2, {}).get("result", {}).get("content", [{}])[0].get("text")
    expect(slept == "slept 400 ms", f"the call in flight at EOF: {by_id.get(2)}")
    expect(elapsed < 5, f"exited after {elapsed:.1f} s")


SCENARIOS = {
    "discover": discover,
    "tools-list": tools_list,
    "progress": progress,
    "cancel": cancel,
    "tool-error": tool_error,
    "listen": listen,
    "fixture-mrtr": fixture_mrtr,
    "fixture-errors": fixture_errors,
    "fixture-listen": fixture_listen,
    "eof-exit": eof_exit,
}


# Scenarios of the stdio binding only.
STDIO_ONLY = {"eof-exit"}


async def run(name, target):
    scenario = SCENARIOS[name]
    with anyio.fail_after(SCENARIO_SECONDS):
        if asyncio.iscoroutinefunction(scenario):
            await scenario(target)
        else:
            await anyio.to_thread.run_sync(scenario, target)


def target_of(args):
    """The target and the scenario names of the command line."""
    if not args:
        return None, []
    first, rest = args[0], args[1:]
    if first.startswith("/"):
        return Target(binary=first), rest
    if not first.startswith(("http://", "https://")):
        return None, []
    fixtures_url = None
    if rest[:1] == ["--fixtures"] and len(rest) > 1:
        fixtures_url, rest = rest[1], rest[2:]
    return Target(url=first, fixtures_url=fixtures_url), rest


def main():
    target, names = target_of(sys.argv[1:])
    if target is None:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    available = [n for n in SCENARIOS if not (target.http and n in STDIO_ONLY)]
    names = names or available
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"unknown scenario {unknown}; scenarios: {' '.join(available)}", file=sys.stderr)
        sys.exit(2)
    passed = failed = 0
    for name in names:
        try:
            anyio.run(run, name, target)
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
