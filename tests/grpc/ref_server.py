#!/usr/bin/env python3
"""A reference MCP server on the gRPC tunnel binding, written with grpcio.

    python ref_server.py PORT [--token TOKEN] [--tls CERT KEY]
                              [--listen-interval-ms MS]

Serves /mcp.zig.transport.v1.Mcp/Call (server streaming, JsonRpcMessage
{ bytes jsonrpc = 1; }) on 127.0.0.1:PORT (PORT 0 picks a free port). When it
is ready it prints one line, "listening on 127.0.0.1:<port>", and flushes. It
stops on SIGTERM or SIGINT: open listen streams end with their result, then
the server stops with a one second grace.

It is the fixture that tests/grpc/client.js and client.py run against, and
that mcpwire's own gRPC channel can call. It follows
shared/spec/grpc-binding.txt and MCP 2026-07-28:

* the checks of a request before its handler runs (order of MCP §5.6:
  parse, JSON-RPC shape, era and version, `_meta`, mirrored metadata
  `mcp-protocol-version` / `mcp-method` / `mcp-name` / `mcp-param-*`,
  unknown method) end the call with headers-only trailers: the gRPC status
  of the typed binding's map (§9.1), `grpc-message`, `mcp-error-code` and
  `mcp-error-bin` (the JSON-RPC error response with the request id);
* errors inside a running request (unknown tool, bad arguments, a bad
  requestState) are an ordinary JSON-RPC error message, then status 0;
* a client notification is answered with an empty stream and status 0;
* the demo tools: echo, progress, sleep, lookup (x-mcp-header Region and
  Limit) and confirm (input_required with an elicitation), plus a listen
  source that sends notifications/tools/list_changed every interval;
* with --token, a missing or wrong bearer token ends the call with
  UNAUTHENTICATED and a www-authenticate trailer; with --tls, TLS (grpcio
  negotiates ALPN h2).

Cancellation (RST_STREAM) and passed deadlines stop the sleep, progress and
listen handlers; each stop is logged on stderr.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import signal
import sys
import threading
import time
from concurrent import futures

import grpc

PROTOCOL_VERSION = "2026-07-28"
SUPPORTED_VERSIONS = [PROTOCOL_VERSION]
SERVICE = "mcp.zig.transport.v1.Mcp"
SERVER_INFO = {"name": "mcpwire-grpcio-ref", "version": "0.1.0"}
MAX_SAFE_INTEGER = 2**53 - 1

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022

# The typed binding's map (spec/typed-binding.md §9.1), used on the tunnel too.
STATUS_FOR_CODE = {
    PARSE_ERROR: grpc.StatusCode.INVALID_ARGUMENT,
    INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    INVALID_PARAMS: grpc.StatusCode.INVALID_ARGUMENT,
    HEADER_MISMATCH: grpc.StatusCode.INVALID_ARGUMENT,
    MISSING_CAPABILITY: grpc.StatusCode.INVALID_ARGUMENT,
    UNSUPPORTED_VERSION: grpc.StatusCode.INVALID_ARGUMENT,
    METHOD_NOT_FOUND: grpc.StatusCode.UNIMPLEMENTED,
}

# Names of 2025 and earlier that a modern server answers with -32601.
KNOWN_METHODS = {"server/discover", "tools/list", "tools/call", "subscriptions/listen"}
NAMED_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

TOOLS = [
    {
        "name": "echo",
        "description": "Returns its text argument as text content.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "progress",
        "description": "Sends `steps` progress notifications `delay_ms` apart, then its result.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "steps": {"type": "integer", "minimum": 0, "maximum": 1000},
                "delay_ms": {"type": "integer", "minimum": 0, "maximum": 60000},
            },
            "required": ["steps"],
        },
    },
    {
        "name": "sleep",
        "description": "Runs `ms` milliseconds, until cancelled or past its deadline.",
        "inputSchema": {
            "type": "object",
            "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 3600000}},
            "required": ["ms"],
        },
    },
    {
        "name": "lookup",
        "description": "Looks a region up; region and limit travel in mcp-param-* metadata.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "limit": {"type": "integer", "x-mcp-header": "Limit"},
            },
            "required": ["region"],
        },
    },
    {
        "name": "confirm",
        "description": "Asks the user to confirm (input_required, elicitation), then answers.",
        "inputSchema": {
            "type": "object",
            "properties": {"action": {"type": "string"}},
        },
    },
]
TOOLS_BY_NAME = {t["name"]: t for t in TOOLS}

TCHAR = re.compile(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$")


def log(*args):
    print("ref_server:", *args, file=sys.stderr, flush=True)


# --- protobuf: JsonRpcMessage { bytes jsonrpc = 1; } -------------------------


def _varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_message(payload: bytes) -> bytes:
    if not payload:
        return b""  # proto3: an empty bytes field is not written
    return b"\x0a" + _varint(len(payload)) + payload


def _read_varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def decode_message(buf: bytes) -> bytes:
    """Field 1 of JsonRpcMessage (the last one wins); unknown fields skipped."""
    i, payload = 0, b""
    while i < len(buf):
        key, i = _read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire == 0:
            _, i = _read_varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = _read_varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated length-delimited field")
            if field == 1:
                payload = buf[i : i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(buf):
            raise ValueError("truncated field")
    return payload


# --- JSON-RPC helpers ----------------------------------------------------------


def dumps(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def msg(obj) -> bytes:
    return dumps(obj)


def result(req_id, body):
    body = dict(body)
    body.setdefault("resultType", "complete")
    meta = dict(body.get("_meta") or {})
    meta.setdefault("io.modelcontextprotocol/serverInfo", SERVER_INFO)
    body["_meta"] = meta
    return {"jsonrpc": "2.0", "id": req_id, "result": body}


def error_response(req_id, code, message, data=None):
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": req_id, "error": err}


class EarlyError(Exception):
    """A JSON-RPC error found before the handler runs: ends the call with trailers."""

    def __init__(self, code, message, data=None, req_id=None):
        super().__init__(message)
        self.code, self.message, self.data, self.req_id = code, message, data, req_id


def _cut_utf8(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", errors="ignore")


def abort_with_error(context, err: EarlyError):
    body = dumps(error_response(err.req_id, err.code, err.message, err.data))
    trailers = [("mcp-error-code", str(err.code))]
    # grpcio base64-encodes the value of a -bin key itself.
    if len(base64.b64encode(body)) <= 4096:
        trailers.append(("mcp-error-bin", body))
    context.set_trailing_metadata(tuple(trailers))
    status = STATUS_FOR_CODE.get(err.code, grpc.StatusCode.INTERNAL)
    context.abort(status, _cut_utf8(err.message, 1024))


# --- mirrored metadata (MCP §5.4–5.6) -------------------------------------------

SENTINEL_START, SENTINEL_END = "=?base64?", "?="


def decode_header_value(value: str):
    """The value of a mirrored header, or None when it is not valid."""
    value = value.strip(" \t")
    if value.startswith(SENTINEL_START) and value.endswith(SENTINEL_END) and len(value) >= 11:
        payload = value[len(SENTINEL_START) : -len(SENTINEL_END)]
        if len(payload) % 4 or not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", payload):
            return None
        try:
            return base64.b64decode(payload, validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    if not all(0x20 <= ord(c) <= 0x7E or c == "\t" for c in value):
        return None
    return value


def annotations(schema, path=()):
    """(header name, property path, type) of each x-mcp-header in a schema."""
    out = []
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        if "x-mcp-header" in prop:
            out.append((prop["x-mcp-header"], path + (name,), prop.get("type")))
        if prop.get("type") == "object":
            out.extend(annotations(prop, path + (name,)))
    return out


def value_at(arguments, path):
    v = arguments
    for key in path:
        if not isinstance(v, dict) or key not in v:
            return None
        v = v[key]
    return v


def check_params_headers(md, tool, arguments):
    for header, path, kind in annotations(tool["inputSchema"]):
        value = value_at(arguments, path)
        if value is None:
            continue
        key = "mcp-param-" + header.lower()
        raw = md.get(key)
        if raw is None:
            raise EarlyError(HEADER_MISMATCH, f"missing {key} metadata for an annotated argument")
        got = decode_header_value(raw)
        if got is None:
            raise EarlyError(HEADER_MISMATCH, f"{key}: a control character, a non-ASCII byte or a bad =?base64? value")
        if kind == "integer":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
                continue  # a bad argument: the handler answers it
            if abs(int(value)) > MAX_SAFE_INTEGER:
                raise EarlyError(HEADER_MISMATCH, f"{key}: integer outside the safe range")
            try:
                same = float(got) == float(value) and re.fullmatch(r"-?\d+(\.0*)?", got.strip())
            except ValueError:
                same = False
        elif kind == "boolean":
            same = got == ("true" if value else "false")
        else:
            same = got == value
        if not same:
            raise EarlyError(HEADER_MISMATCH, f"{key} differs from the body", {"mismatch": {"header": raw, "body": value}})


def validate(body: bytes, md):
    """The checks before a handler runs. Returns the request, or None for a notification."""
    try:
        req = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise EarlyError(PARSE_ERROR, "Parse error: the message is not JSON")
    if not isinstance(req, dict):
        raise EarlyError(INVALID_REQUEST, "Invalid request: not a JSON-RPC request object")
    req_id = req.get("id")
    if isinstance(req_id, bool) or not (req_id is None or isinstance(req_id, (str, int))):
        raise EarlyError(INVALID_REQUEST, "Invalid request: bad id")
    if req.get("jsonrpc") != "2.0" or not isinstance(req.get("method"), str) or "result" in req or "error" in req:
        raise EarlyError(INVALID_REQUEST, "Invalid request: not a JSON-RPC request", req_id=req_id)
    if "id" not in req:
        return None  # a notification: empty stream, status 0
    if req_id is None:
        raise EarlyError(INVALID_REQUEST, "Invalid request: null id")
    method = req["method"]
    params = req.get("params")
    if params is not None and not isinstance(params, dict):
        raise EarlyError(INVALID_REQUEST, "Invalid request: params is not an object", req_id=req_id)
    params = params or {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    header_version = md.get("mcp-protocol-version")
    body_version = meta.get("io.modelcontextprotocol/protocolVersion")

    if body_version is None:
        if header_version is not None and header_version.strip() in SUPPORTED_VERSIONS:
            raise EarlyError(INVALID_PARAMS, "params._meta must carry io.modelcontextprotocol/protocolVersion and clientCapabilities", req_id=req_id)
        requested = params.get("protocolVersion") if method == "initialize" else header_version
        data = {"supported": SUPPORTED_VERSIONS}
        if isinstance(requested, str):
            data["requested"] = requested
        raise EarlyError(UNSUPPORTED_VERSION, "Unsupported protocol version", data, req_id)
    if header_version is not None and header_version.strip() != body_version:
        raise EarlyError(HEADER_MISMATCH, "mcp-protocol-version differs from the body", req_id=req_id)
    if body_version not in SUPPORTED_VERSIONS:
        raise EarlyError(UNSUPPORTED_VERSION, "Unsupported protocol version", {"supported": SUPPORTED_VERSIONS, "requested": body_version}, req_id)
    if not isinstance(meta.get("io.modelcontextprotocol/clientCapabilities"), dict):
        raise EarlyError(INVALID_PARAMS, "params._meta must carry io.modelcontextprotocol/clientCapabilities", req_id=req_id)
    if header_version is None:
        raise EarlyError(HEADER_MISMATCH, "missing mcp-protocol-version metadata", req_id=req_id)
    header_method = md.get("mcp-method")
    if header_method is None:
        raise EarlyError(HEADER_MISMATCH, "missing mcp-method metadata", req_id=req_id)
    if header_method.strip(" \t") != method:
        raise EarlyError(HEADER_MISMATCH, "mcp-method differs from the body", req_id=req_id)
    name_key = NAMED_METHODS.get(method)
    if name_key and isinstance(params.get(name_key), str):
        raw = md.get("mcp-name")
        if raw is None:
            raise EarlyError(HEADER_MISMATCH, "missing mcp-name metadata", req_id=req_id)
        if decode_header_value(raw) != params[name_key]:
            raise EarlyError(HEADER_MISMATCH, "mcp-name differs from the body", req_id=req_id)
    if method == "tools/call":
        tool = TOOLS_BY_NAME.get(params.get("name"))
        arguments = params.get("arguments")
        if tool is not None and isinstance(arguments, dict):
            try:
                check_params_headers(md, tool, arguments)
            except EarlyError as e:
                e.req_id = req_id
                raise
    return req


# --- the server -------------------------------------------------------------------


class Stopped(Exception):
    pass


class RefServer:
    def __init__(self, token=None, listen_interval_ms=250):
        self.token = token
        self.listen_interval = listen_interval_ms / 1000
        self.shutdown = threading.Event()
        self.secret = os.urandom(32)
        self.used_states = set()
        self.lock = threading.Lock()

    # Each call: auth, checks, then the handler's messages.
    def call(self, request: bytes, context):
        md = {}
        for key, value in context.invocation_metadata():
            if not key.endswith("-bin"):
                md.setdefault(key.lower(), value)
        if self.token is not None:
            auth = md.get("authorization")
            if auth is None:
                context.set_trailing_metadata((("www-authenticate", 'Bearer realm="mcpwire-ref"'),))
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing bearer token")
            if not hmac.compare_digest(auth.encode(), f"Bearer {self.token}".encode()):
                context.set_trailing_metadata(
                    (("www-authenticate", 'Bearer realm="mcpwire-ref", error="invalid_token"'),)
                )
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid bearer token")
        try:
            body = decode_message(request)
        except ValueError:
            abort_with_error(context, EarlyError(PARSE_ERROR, "Parse error: malformed protobuf"))
        first = True
        try:
            req = validate(body, md)
            if req is None:
                return
            for out in self.dispatch(req, context):
                first = False
                yield msg(out)
        except EarlyError as e:
            if not first:
                raise RuntimeError("an early error after a message") from e
            abort_with_error(context, e)
        except Stopped:
            return

    def dispatch(self, req, context):
        method, req_id = req["method"], req["id"]
        params = req.get("params") or {}
        if method == "server/discover":
            yield result(req_id, {
                "supportedVersions": SUPPORTED_VERSIONS,
                "capabilities": {"tools": {"listChanged": True}},
                "instructions": "Reference server of mcpwire's gRPC interop tests.",
                "ttlMs": 60000,
                "cacheScope": "public",
            })
        elif method == "tools/list":
            yield result(req_id, {"tools": TOOLS, "ttlMs": 60000, "cacheScope": "public"})
        elif method == "tools/call":
            yield from self.tools_call(req_id, params, context)
        elif method == "subscriptions/listen":
            yield from self.listen(req_id, params, context)
        else:
            # The binding ends a call in the trailers only for -32700,
            # -32600, -32020 and -32022: an unknown method is an ordinary
            # error response, then status OK.
            yield error_response(req_id, METHOD_NOT_FOUND, f"Method not found: {method}")

    def tools_call(self, req_id, params, context):
        name, args = params.get("name"), params.get("arguments", {})
        meta = params.get("_meta") or {}
        if not isinstance(name, str) or name not in TOOLS_BY_NAME:
            yield error_response(req_id, INVALID_PARAMS, f"Unknown tool: {name}")
            return
        if not isinstance(args, dict):
            yield error_response(req_id, INVALID_PARAMS, "arguments must be an object")
            return

        def bad(message):
            return error_response(req_id, INVALID_PARAMS, f"Invalid arguments for tool {name}: {message}")

        def integer(key, default=None, lo=0, hi=MAX_SAFE_INTEGER):
            v = args.get(key, default)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                return None
            return v

        if name == "echo":
            text = args.get("text")
            if not isinstance(text, str):
                yield bad("text must be a string")
                return
            yield result(req_id, {"content": [{"type": "text", "text": text}]})
        elif name == "progress":
            steps, delay = integer("steps", None, 0, 1000), integer("delay_ms", 100, 0, 60000)
            if steps is None or delay is None:
                yield bad("steps and delay_ms must be integers in range")
                return
            token = meta.get("progressToken")
            for i in range(1, steps + 1):
                if i > 1 and not self.wait(context, delay / 1000):
                    log(f"progress: stopped before step {i} of {steps} ({self.why(context)})")
                    raise Stopped
                if token is not None:
                    yield {"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": token, "progress": i, "total": steps,
                                      "message": f"step {i} of {steps}"}}
            yield result(req_id, {"content": [{"type": "text", "text": f"done after {steps} steps"}]})
        elif name == "sleep":
            ms = integer("ms", None, 0, 3600000)
            if ms is None:
                yield bad("ms must be an integer in range")
                return
            start = time.monotonic()
            if not self.wait(context, ms / 1000):
                log(f"sleep: stopped after {int((time.monotonic() - start) * 1000)} ms of {ms} ({self.why(context)})")
                raise Stopped
            yield result(req_id, {"content": [{"type": "text", "text": f"slept {ms} ms"}]})
        elif name == "lookup":
            region, limit = args.get("region"), args.get("limit", 10)
            if not isinstance(region, str) or isinstance(limit, bool) or not isinstance(limit, int):
                yield bad("region must be a string and limit an integer")
                return
            yield result(req_id, {
                "content": [{"type": "text", "text": f"region={region} limit={limit}"}],
                "structuredContent": {"region": region, "limit": limit},
            })
        elif name == "confirm":
            yield from self.confirm(req_id, params, args, meta, context)

    # --- confirm: a multi round-trip request ---------------------------------------

    def _sign(self, payload: bytes) -> str:
        mac = hmac.new(self.secret, payload, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(payload).decode() + "." + base64.urlsafe_b64encode(mac).decode()

    def _verify(self, state):
        try:
            p64, m64 = state.split(".")
            payload = base64.urlsafe_b64decode(p64)
            mac = base64.urlsafe_b64decode(m64)
        except (ValueError, AttributeError):
            return None
        if not hmac.compare_digest(mac, hmac.new(self.secret, payload, hashlib.sha256).digest()):
            return None
        return json.loads(payload)

    def confirm(self, req_id, params, args, meta, context):
        caps = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
        if not isinstance(caps.get("elicitation"), dict):
            raise EarlyError(MISSING_CAPABILITY, "Missing required client capability",
                             {"requiredCapabilities": {"elicitation": {}}}, req_id)
        action = args.get("action", "proceed")
        if not isinstance(action, str):
            yield error_response(req_id, INVALID_PARAMS, "Invalid arguments for tool confirm: action must be a string")
            return
        ask = {
            "confirm": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": f"Proceed with {action}?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"],
                    },
                },
            }
        }

        def input_required():
            nonce = base64.urlsafe_b64encode(os.urandom(12)).decode()
            state = self._sign(dumps({"tool": "confirm", "action": action, "nonce": nonce,
                                      "exp": time.time() + 300}))
            return {"jsonrpc": "2.0", "id": req_id,
                    "result": {"resultType": "input_required", "inputRequests": ask, "requestState": state,
                               "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}}

        state, responses = params.get("requestState"), params.get("inputResponses")
        if state is None and responses is None:
            yield input_required()
            return
        claims = self._verify(state) if isinstance(state, str) else None
        if claims is None or claims.get("tool") != "confirm" or claims.get("action") != action \
                or claims.get("exp", 0) < time.time():
            yield error_response(req_id, INVALID_PARAMS, "Invalid or expired requestState")
            return
        if responses is not None and not isinstance(responses, dict):
            yield error_response(req_id, INVALID_PARAMS, "inputResponses must be an object")
            return
        answer = (responses or {}).get("confirm")
        if not isinstance(answer, dict):
            yield input_required()  # missing answer: ask again (MCP §9.2)
            return
        with self.lock:
            if claims["nonce"] in self.used_states:
                yield error_response(req_id, INVALID_PARAMS, "requestState already used")
                return
            self.used_states.add(claims["nonce"])
        content = answer.get("content") if isinstance(answer.get("content"), dict) else {}
        ok = answer.get("action") == "accept" and content.get("ok") is True
        text = f"confirmed: {action}" if ok else f"declined: {action}"
        yield result(req_id, {"content": [{"type": "text", "text": text}],
                              "structuredContent": {"confirmed": ok, "action": action}})

    # --- subscriptions/listen ----------------------------------------------------------

    def listen(self, req_id, params, context):
        sub = {"io.modelcontextprotocol/subscriptionId": req_id}
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            yield error_response(req_id, INVALID_PARAMS, "params.notifications must be an object")
            return
        honoured = {}
        if wanted.get("toolsListChanged") is True:
            honoured["toolsListChanged"] = True
        yield {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"_meta": sub, "notifications": honoured}}
        events = 0
        while True:
            if not self.wait(context, self.listen_interval):
                if self.shutdown.is_set() and context.is_active():
                    break
                log(f"listen {req_id!r}: stopped after {events} events ({self.why(context)})")
                raise Stopped
            if honoured.get("toolsListChanged"):
                events += 1
                yield {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": sub}}
        log(f"listen {req_id!r}: server shutdown, ending with the result")
        yield result(req_id, {"_meta": dict(sub)})

    # --- waiting that a cancel, a deadline or the shutdown interrupts ---------------

    def wait(self, context, seconds):
        """Sleeps; False when the call ended (cancel, deadline) or the server stops."""
        done = threading.Event()
        context.add_callback(done.set)
        end = time.monotonic() + seconds
        while True:
            if not context.is_active() or self.shutdown.is_set():
                return False
            left = end - time.monotonic()
            if left <= 0:
                return True
            done.wait(min(left, 0.05))

    @staticmethod
    def why(context):
        if context.is_active():
            return "server shutdown"
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            return "deadline passed"
        return "cancelled by the client"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--token", help="require 'authorization: Bearer TOKEN'")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve TLS (ALPN h2)")
    ap.add_argument("--listen-interval-ms", type=int, default=250)
    a = ap.parse_args()

    ref = RefServer(token=a.token, listen_interval_ms=a.listen_interval_ms)
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        "Call": grpc.unary_stream_rpc_method_handler(ref.call, request_deserializer=None,
                                                     response_serializer=encode_message),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), handlers=(handler,),
                         maximum_concurrent_rpcs=60)
    addr = f"127.0.0.1:{a.port}"
    if a.tls:
        with open(a.tls[0], "rb") as c, open(a.tls[1], "rb") as k:
            creds = grpc.ssl_server_credentials([(k.read(), c.read())])
        port = server.add_secure_port(addr, creds)
    else:
        port = server.add_insecure_port(addr)
    if not port:
        log(f"cannot bind {addr}")
        sys.exit(1)
    server.start()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"listening on 127.0.0.1:{port}" + (" (tls)" if a.tls else "") + (" (token)" if a.token else ""),
          flush=True)
    while not stop.wait(0.5):
        pass
    log("stopping")
    ref.shutdown.set()
    time.sleep(0.2)  # let open listen streams send their result
    server.stop(grace=1.0).wait()
    log("stopped")


if __name__ == "__main__":
    main()
