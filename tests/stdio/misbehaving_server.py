"""A small stdio MCP server (2026-07-28, no SDK) that misbehaves on
request, for the supervision tests of mcpwire's stdio client
(std-adapter/tests/stdio_client.rs).

Tools: echo; crash (exits mid-call); hang (never answers); big (answers
with a line of BIG_BYTES octets); env (the names of its environment);
slow (two progress notifications, then a result); flood (progress
notifications of 1 KiB without end, stdin no longer read). subscriptions/listen
is acknowledged at once, followed by one tools/list_changed event.
Environment: SEEN_FILE (every line read is appended there);
IGNORE_EOF=1 (ignores the end of stdin and SIGTERM, runs on);
GARBAGE=1 (writes a log line to stdout first); LEGACY=1 (a 2025-11-25
server: server/discover is -32601, initialize is needed); SILENT_PROBE=1
(never answers server/discover, as some legacy servers); CRASH_FILE (crash only
while that file does not exist, and create it: the next child works);
STDERR_FLOOD=1 (writes octets without a newline to stderr without end, from a
thread, once started); STOP_READING=1 (after answering server/discover,
never reads stdin again, and lives on); VERSIONS=V1,V2 (a modern server of
those versions only: a request naming another, in its _meta or as
initialize's protocolVersion, is -32022 with data.supported).
"""
import json
import os
import signal
import sys
import time

seen = os.environ.get("SEEN_FILE")


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def result(rid, value):
    value.setdefault("resultType", "complete")
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def text(rid, t):
    result(rid, {"content": [{"type": "text", "text": t}]})


if os.environ.get("IGNORE_EOF") == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.environ.get("STDERR_FLOOD") == "1":
    import threading

    def flood_stderr():
        chunk = b"A" * (1 << 20)
        while True:
            sys.stderr.buffer.write(chunk)
            sys.stderr.buffer.flush()

    threading.Thread(target=flood_stderr, daemon=True).start()
if os.environ.get("GARBAGE") == "1":
    print("INFO server starting (a log line on stdout, by mistake)", flush=True)

for line in sys.stdin:
    if seen:
        with open(seen, "a") as f:
            f.write(line)
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    params = msg.get("params") or {}
    versions = os.environ.get("VERSIONS")
    if versions:
        asked = (params.get("_meta") or {}).get(
            "io.modelcontextprotocol/protocolVersion", params.get("protocolVersion"))
        if asked not in versions.split(","):
            send({"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32022, "message": "Unsupported protocol version",
                "data": {"supported": versions.split(","), "requested": asked}}})
            continue
    legacy = os.environ.get("LEGACY") == "1" or os.environ.get("SILENT_PROBE") == "1"
    if method == "server/discover" and os.environ.get("SILENT_PROBE") == "1":
        continue
    if method == "server/discover" and legacy:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
    elif method == "initialize" and legacy:
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "legacy", "version": "1"}}})
    elif method == "server/discover":
        result(rid, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                     "ttlMs": 0, "cacheScope": "public"})
        if os.environ.get("STOP_READING") == "1":
            while True:
                time.sleep(1)
    elif method == "subscriptions/listen":
        meta = {"io.modelcontextprotocol/subscriptionId": rid}
        send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
              "params": {"_meta": meta, "notifications": {"toolsListChanged": True}}})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
              "params": {"_meta": meta}})
    elif method == "tools/list":
        result(rid, {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                               for n in ("echo", "crash", "hang", "big", "env", "slow", "flood")]})
    elif method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "echo":
            text(rid, args.get("text", ""))
        elif name == "crash":
            marker = os.environ.get("CRASH_FILE")
            if marker and os.path.exists(marker):
                text(rid, "no crash this time")
            else:
                if marker:
                    open(marker, "w").close()
                print("crashing on purpose", file=sys.stderr, flush=True)
                os._exit(3)
        elif name == "hang":
            pass
        elif name == "big":
            n = int(os.environ.get("BIG_BYTES", str(10 << 20)))
            sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}\n'
                             % (json.dumps(rid), "x" * n))
            sys.stdout.flush()
        elif name == "flood":
            token = (params.get("_meta") or {}).get("progressToken")
            pad = "x" * 1024
            i = 0
            while True:
                i += 1
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": i, "message": pad}})
        elif name == "env":
            text(rid, ",".join(sorted(k for k in os.environ if k != "LC_CTYPE")))
        elif name == "slow":
            token = (params.get("_meta") or {}).get("progressToken")
            for i in (1, 2):
                if token is not None:
                    send({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": token, "progress": i, "total": 2}})
                time.sleep(0.05)
            text(rid, "done")
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "Unknown tool"}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})

if os.environ.get("IGNORE_EOF") == "1":
    while True:
        time.sleep(1)
