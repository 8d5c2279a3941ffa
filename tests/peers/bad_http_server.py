"""A misbehaving MCP server over HTTP/1.1 (standard library only, asyncio),
for the bad-peer checks of mcpwire's HTTP client
(scripts/interop-http-client.sh): each mode breaks one rule that a client
must survive with a clear error, without hanging and in bounded memory.

    python3 bad_http_server.py MODE --listen HOST:PORT [--bad-probe] [--framing chunked|eof]

Modes, for every request but a `server/discover` probe:

  html            200 with an HTML page (`text/html`), as a web server or a
                  login portal at the MCP URL would answer.
  close-mid-sse   200 `text/event-stream`, one notification event (the
                  call's progress when it carries a progress token, a log
                  message otherwise), then the connection closes: no
                  response ever comes.
  huge-event      200 `text/event-stream` and one `message` event whose data,
                  the call's response with a text of `--event-mib` MiB
                  (64 by default), is written in 64 KiB pieces as the
                  client reads them: the server never holds the event.
  silent          reads the request and never answers; the connection stays
                  open until the client closes it.
  request-on-sse  200 `text/event-stream` with a JSON-RPC request
                  (`elicitation/create`) on a 2026-07-28 call's stream,
                  which the binding forbids, then the call's response.

A `server/discover` probe gets a proper 2026-07-28 answer (JSON), so that a
client reaches its calls, unless `--bad-probe` is given: then the probe
gets the mode's behaviour too. A notification or a response gets 202. A
method other than POST gets the HTML page in `html` mode, nothing in
`silent` mode, and 405 otherwise. Event streams end by the chunked
encoding (default), or with `--framing eof` by the end of the connection
(`Connection: close`, no length), so that a client's HTTP layer or its
MCP layer, in turn, is the one to see the stream break.

Prints "listening on ADDR" on stderr once it accepts connections, then one
line a request ("request METHOD PATH method=NAME -> WHAT"), and serves until
killed. Bounded like a real server: a head of 64 KiB, a body of 4 MiB.
"""

import argparse
import asyncio
import json
import sys

MODES = ("html", "close-mid-sse", "huge-event", "silent", "request-on-sse")
HEAD_LIMIT = 64 * 1024
BODY_LIMIT = 4 * 1024 * 1024
PIECE = 64 * 1024
VERSION = "2026-07-28"

HTML = b"""<!DOCTYPE html>
<html><head><title>Sign in</title></head>
<body><h1>Sign in to continue</h1><form method="post"><input name="user"></form></body></html>
"""

DISCOVER = {
    "resultType": "complete",
    "supportedVersions": [VERSION],
    "capabilities": {"tools": {}},
    "ttlMs": 0,
    "cacheScope": "private",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "bad-http-server", "version": "0.0.0"}},
}


class BadRequest(Exception):
    """The request cannot be read: the connection is dropped."""


def log(line):
    print(line, file=sys.stderr, flush=True)


async def read_request(reader):
    """The next request on the connection: (method, path, headers, body),
    or None at a clean end of the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial.strip():
            raise BadRequest("connection ended inside a head") from e
        return None
    except asyncio.LimitOverrunError as e:
        raise BadRequest("head over the limit") from e
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise BadRequest(f"bad request line {lines[0]!r}")
    method, target, _ = parts
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await read_chunked(reader)
    else:
        length = int(headers.get("content-length", "0") or 0)
        if length > BODY_LIMIT:
            raise BadRequest("body over the limit")
        body = await reader.readexactly(length)
    return method, target.split("?")[0], headers, body


async def read_chunked(reader):
    body = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            # Trailers, up to the empty line.
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return bytes(body)
        if len(body) + size > BODY_LIMIT:
            raise BadRequest("body over the limit")
        body += await reader.readexactly(size)
        await reader.readexactly(2)


class Exchange:
    """Writes one response, in the framing chosen."""

    def __init__(self, writer, framing):
        self.writer = writer
        self.chunked = framing == "chunked"

    async def whole(self, status, content_type, body, extra=()):
        head = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}", f"Content-Length: {len(body)}", *extra]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        await self.writer.drain()

    async def json(self, status, message):
        await self.whole(status, "application/json", json.dumps(message).encode())

    async def start_sse(self):
        head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Cache-Control: no-cache"]
        head.append("Transfer-Encoding: chunked" if self.chunked else "Connection: close")
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        await self.writer.drain()

    async def piece(self, data):
        if self.chunked:
            self.writer.write(b"%x\r\n" % len(data) + data + b"\r\n")
        else:
            self.writer.write(data)
        # Written as the client reads: nothing piles up here.
        await self.writer.drain()

    async def event(self, message):
        await self.piece(b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n")

    async def end_sse(self):
        """Whether the connection may serve another request."""
        if self.chunked:
            self.writer.write(b"0\r\n\r\n")
            await self.writer.drain()
        return self.chunked


def result(request_id, text):
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}


async def html(ex, _msg):
    await ex.whole("200 OK", "text/html; charset=utf-8", HTML)
    return True


async def close_mid_sse(ex, msg):
    await ex.start_sse()
    token = ((msg.get("params") or {}).get("_meta") or {}).get("progressToken")
    if token is not None:
        note = {"progressToken": token, "progress": 1, "total": 2, "message": "halfway"}
        await ex.event({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
    else:
        note = {"level": "info", "data": "about to close"}
        await ex.event({"jsonrpc": "2.0", "method": "notifications/message", "params": note})
    # Closed with neither a response nor the chunked encoding's last chunk.
    return False


async def huge_event(ex, msg, mib):
    await ex.start_sse()
    text = mib * 1024 * 1024
    before, after = json.dumps(result(msg.get("id"), "@")).encode().rsplit(b"@", 1)
    await ex.piece(b"event: message\ndata: " + before)
    filler = b"x" * PIECE
    while text > 0:
        n = min(text, PIECE)
        await ex.piece(filler[:n])
        text -= n
    await ex.piece(after + b"\n\n")
    return await ex.end_sse()


async def request_on_sse(ex, msg):
    await ex.start_sse()
    ask = {
        "mode": "form",
        "message": "Continue?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    }
    await ex.event({"jsonrpc": "2.0", "id": "bad-server-1", "method": "elicitation/create", "params": ask})
    await ex.event(result(msg.get("id"), "answered after a request on the stream"))
    return await ex.end_sse()


async def hold(reader):
    """Never answers; reads (and drops) until the client goes away."""
    while await reader.read(PIECE):
        pass


async def connection(reader, writer, args):
    ex = Exchange(writer, args.framing)
    try:
        while True:
            request = await read_request(reader)
            if request is None:
                break
            method, path, _headers, body = request
            try:
                msg = json.loads(body) if body else None
            except ValueError:
                msg = None
            name = msg.get("method", "-") if isinstance(msg, dict) else "-"
            is_request = isinstance(msg, dict) and "method" in msg and "id" in msg
            what = args.mode
            if method == "POST" and isinstance(msg, dict) and not is_request:
                what = "202"
            elif name == "server/discover" and not args.bad_probe:
                what = "discover"
            elif method != "POST" and args.mode not in ("html", "silent"):
                what = "405"
            log(f"request {method} {path} method={name} -> {what}")
            if what == "202":
                await ex.whole("202 Accepted", "text/plain", b"")
                continue
            if what == "discover":
                await ex.json("200 OK", {"jsonrpc": "2.0", "id": msg["id"], "result": DISCOVER})
                continue
            if what == "405":
                await ex.whole("405 Method Not Allowed", "text/plain", b"", ["Allow: POST"])
                continue
            if args.mode == "silent":
                await hold(reader)
                break
            if args.mode == "html":
                keep = await html(ex, msg)
            elif not is_request:
                # A POST whose body is no JSON-RPC message.
                error = {"code": -32700, "message": "Parse error"}
                await ex.json("400 Bad Request", {"jsonrpc": "2.0", "id": None, "error": error})
                keep = True
            elif args.mode == "close-mid-sse":
                keep = await close_mid_sse(ex, msg)
            elif args.mode == "huge-event":
                keep = await huge_event(ex, msg, args.event_mib)
            else:
                keep = await request_on_sse(ex, msg)
            if not keep:
                break
    except BadRequest as e:
        log(f"dropped a connection: {e}")
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # the client went away
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except ConnectionError:
            pass


async def serve(args):
    host, _, port = args.listen.rpartition(":")
    server = await asyncio.start_server(
        lambda r, w: connection(r, w, args), host, int(port), limit=HEAD_LIMIT, reuse_address=True
    )
    addr = "%s:%d" % server.sockets[0].getsockname()[:2]
    log(f"listening on {addr}")
    async with server:
        await server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--listen", metavar="HOST:PORT", required=True)
    parser.add_argument("--bad-probe", action="store_true", help="misbehave on server/discover too")
    parser.add_argument("--framing", choices=("chunked", "eof"), default="chunked")
    parser.add_argument("--event-mib", type=int, default=64, help="huge-event: the event's size in MiB")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
