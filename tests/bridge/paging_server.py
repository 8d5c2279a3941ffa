"""A small stdio MCP server (2026-07-28, no SDK) whose tools/list comes in
pages, for the bridge's typed list test (std-adapter/tests/bridge.rs).

Arguments: none: five tools, t0 to t4, two a page (`nextCursor` is the
index of the page's first tool); `endless FILE`: one tool a page and a
`nextCursor` on every page, each tools/list request counted as a line
appended to FILE.
"""
import json
import sys

endless = len(sys.argv) > 2 and sys.argv[1] == "endless"
count_file = sys.argv[2] if endless else None


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def result(rid, value):
    value.setdefault("resultType", "complete")
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def tool(i):
    return {"name": "t%d" % i, "inputSchema": {"type": "object"}}


for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    params = msg.get("params") or {}
    if method == "server/discover":
        result(rid, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                     "ttlMs": 0, "cacheScope": "public"})
    elif method == "tools/list":
        start = int(params.get("cursor") or "0")
        if endless:
            with open(count_file, "a") as f:
                f.write("page\n")
            result(rid, {"tools": [tool(start)], "nextCursor": str(start + 1)})
            continue
        page = {"tools": [tool(i) for i in range(start, min(start + 2, 5))]}
        if start + 2 < 5:
            page["nextCursor"] = str(start + 2)
        result(rid, page)
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
