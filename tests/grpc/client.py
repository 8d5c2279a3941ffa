#!/usr/bin/env python3
"""A real-peer MCP client on the gRPC tunnel binding, with grpcio.

    python client.py HOST:PORT SCENARIO

Scenarios: echo, progress, error-trailers, deadline (the same expectations
as client.js). Prints one JSON line with what it observed; exits 0 when the
expectations hold, 1 otherwise ("reason" says why), 2 on a usage error.

It uses grpcio's generic stub (channel.unary_stream on the path) with a
hand-written codec of JsonRpcMessage { bytes jsonrpc = 1; }: no generated
code. Every request carries the 2026-07-28 `_meta` and the mirrored metadata
mcp-protocol-version, mcp-method and mcp-name.

Environment: MCPWIRE_TOKEN (sent as a bearer token), MCPWIRE_CA (TLS with
this CA, server name "localhost").
"""

import base64
import json
import os
import sys
import time

import grpc

PROTOCOL_VERSION = "2026-07-28"
CALL_PATH = "/mcp.zig.transport.v1.Mcp/Call"
CLIENT_INFO = {"name": "mcpwire-interop-grpcio", "version": "0.1.0"}
DEFAULT_TIMEOUT = 10.0


# --- JsonRpcMessage { bytes jsonrpc = 1; } -------------------------------------


def _varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


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


def serialize(payload: bytes) -> bytes:
    return b"\x0a" + _varint(len(payload)) + payload if payload else b""


def deserialize(buf: bytes) -> bytes:
    i, payload = 0, b""
    while i < len(buf):
        key, i = _read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _read_varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = _read_varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated field")
            if field == 1:
                payload = buf[i : i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire}")
    return payload


# --- requests ----------------------------------------------------------------------

_next_id = [1]


def request(method, params=None, capabilities=None, progress_token=None):
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }
    if progress_token is not None:
        meta["progressToken"] = progress_token
    req_id = _next_id[0]
    _next_id[0] += 1
    return {"jsonrpc": "2.0", "id": req_id, "method": method, "params": {**(params or {}), "_meta": meta}}


def encode_value(s: str) -> str:
    plain = (s != "" and all(0x20 <= ord(c) <= 0x7E for c in s) and s[0] not in " \t" and s[-1] not in " \t"
             and not (s.startswith("=?base64?") and s.endswith("?=")))
    return s if plain else "=?base64?" + base64.b64encode(s.encode("utf-8")).decode("ascii") + "?="


def metadata_for(msg, omit=()):
    h = {
        "mcp-protocol-version": msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "mcp-method": msg["method"],
    }
    key = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(msg["method"])
    if key and isinstance(msg["params"].get(key), str):
        h["mcp-name"] = encode_value(msg["params"][key])
    if os.environ.get("MCPWIRE_TOKEN"):
        h["authorization"] = "Bearer " + os.environ["MCPWIRE_TOKEN"]
    for k in omit:
        h.pop(k, None)
    return h, tuple(h.items())


class Outcome:
    def __init__(self):
        self.messages, self.bad = [], []
        self.code = self.details = None
        self.trailers = ()
        self.elapsed_ms = 0


def call(channel, msg, md, timeout=DEFAULT_TIMEOUT, path=CALL_PATH):
    stub = channel.unary_stream(path, request_serializer=serialize, response_deserializer=deserialize)
    out = Outcome()
    start = time.monotonic()
    it = stub(json.dumps(msg, ensure_ascii=False).encode("utf-8"), metadata=md, timeout=timeout)
    try:
        for raw in it:
            try:
                out.messages.append(json.loads(raw.decode("utf-8")))
            except ValueError:
                out.bad.append(raw)
        out.code, out.details = it.code(), it.details()
        out.trailers = it.trailing_metadata() or ()
    except grpc.RpcError as e:
        out.code, out.details = e.code(), e.details()
        out.trailers = e.trailing_metadata() or ()
    out.elapsed_ms = int((time.monotonic() - start) * 1000)
    return out


def trailer(out, key):
    for k, v in out.trailers:
        if k == key:
            return v
    return None


def trailer_error(out):
    te = {"grpc_status": out.code.value[0], "grpc_status_name": out.code.name, "grpc_message": out.details}
    code = trailer(out, "mcp-error-code")
    if code is not None:
        te["mcp_error_code"] = code
    b = trailer(out, "mcp-error-bin")  # grpcio decodes a -bin value to bytes
    if b is not None:
        try:
            te["mcp_error_bin"] = json.loads(bytes(b).decode("utf-8"))
        except ValueError:
            te["mcp_error_bin_raw"] = repr(b)
    return te


def status_of(out):
    return {"code": out.code.value[0], "name": out.code.name, "details": out.details, "elapsed_ms": out.elapsed_ms}


# --- checks ------------------------------------------------------------------------


class Check:
    def __init__(self, scenario):
        self.obs = {"client": "grpcio", "scenario": scenario, "tls": bool(os.environ.get("MCPWIRE_CA"))}
        self.failures = []

    def expect(self, cond, reason):
        if not cond:
            self.failures.append(reason)
        return bool(cond)


def expect_response(ck, out, msg, label):
    if not ck.expect(out.code == grpc.StatusCode.OK,
                     f"{label}: status {out.code.name} {out.details!r} {json.dumps(trailer_error(out))}"):
        return None
    ck.expect(not out.bad, f"{label}: {len(out.bad)} message(s) that are not JSON")
    responses = [m for m in out.messages if "result" in m or "error" in m]
    if not ck.expect(len(responses) == 1, f"{label}: {len(responses)} responses, want 1"):
        return None
    res = responses[0]
    ck.expect(out.messages[-1] is res, f"{label}: the response is not the last message")
    ck.expect(res.get("id") == msg["id"] and type(res.get("id")) is type(msg["id"]),
              f"{label}: response id {res.get('id')!r}, want {msg['id']!r}")
    for m in out.messages:
        if m is not res:
            ck.expect("id" not in m and isinstance(m.get("method"), str), f"{label}: not a notification: {m}")
    if not ck.expect(isinstance(res.get("result"), dict), f"{label}: error response {res.get('error')}"):
        return None
    ck.expect(isinstance(res["result"].get("resultType"), str), f"{label}: result without resultType")
    return res["result"]


def expect_trailer_error(ck, out, msg, status, code, label, null_id_ok=False):
    te = trailer_error(out)
    ck.expect(out.code == status, f"{label}: status {out.code.name}, want {status.name}")
    ck.expect(not out.messages, f"{label}: {len(out.messages)} message(s) before the error status")
    ck.expect(te.get("mcp_error_code") == str(code), f"{label}: mcp-error-code {te.get('mcp_error_code')!r}, want {code}")
    e = te.get("mcp_error_bin")
    if ck.expect(isinstance(e, dict), f"{label}: no decodable mcp-error-bin trailer"):
        err = e.get("error") or {}
        ck.expect(e.get("jsonrpc") == "2.0", f"{label}: mcp-error-bin without jsonrpc 2.0")
        ck.expect(err.get("code") == code, f"{label}: mcp-error-bin code {err.get('code')}, want {code}")
        ck.expect(isinstance(err.get("message"), str), f"{label}: mcp-error-bin without error.message")
        ok_id = e.get("id") == msg["id"] or (null_id_ok and e.get("id") is None)
        ck.expect(ok_id, f"{label}: mcp-error-bin id {e.get('id')!r}, want {msg['id']!r}" + (" or null" if null_id_ok else ""))
    return te


# --- scenarios ---------------------------------------------------------------------


def s_echo(ch, ck):
    text = "hello over gRPC from grpcio, ünïcödé ✓"
    msg = request("tools/call", {"name": "echo", "arguments": {"text": text}})
    headers, md = metadata_for(msg)
    ck.obs["metadata"] = {k: v for k, v in headers.items() if k != "authorization"}
    out = call(ch, msg, md)
    ck.obs["status"] = status_of(out)
    result = expect_response(ck, out, msg, "echo")
    if result is None:
        return
    ck.obs["content"] = result.get("content")
    ck.expect(result.get("resultType") == "complete", f"resultType {result.get('resultType')!r}")
    ck.expect(result.get("isError") is not True, "isError: true")
    content = result.get("content") or [{}]
    ck.expect(content[0].get("type") == "text" and content[0].get("text") == text,
              f"content {result.get('content')!r} is not the text")


def s_progress(ch, ck):
    steps, token = 3, f"p-py-{os.getpid()}"
    msg = request("tools/call", {"name": "progress", "arguments": {"steps": steps, "delay_ms": 50}},
                  progress_token=token)
    out = call(ch, msg, metadata_for(msg)[1])
    ck.obs["status"] = status_of(out)
    result = expect_response(ck, out, msg, "progress")
    notes = [m for m in out.messages if m.get("method") == "notifications/progress"]
    ck.obs["progress"] = [(m.get("params") or {}).get("progress") for m in notes]
    ck.expect(len(notes) == steps, f"{len(notes)} progress notifications, want {steps}")
    last = float("-inf")
    for n in notes:
        p = n.get("params") or {}
        ck.expect(p.get("progressToken") == token, f"progress with token {p.get('progressToken')!r}")
        ok = isinstance(p.get("progress"), (int, float)) and p["progress"] > last
        ck.expect(ok, f"progress {p.get('progress')!r} does not increase")
        last = p.get("progress") if ok else last
    others = [m for m in out.messages if m.get("method") not in (None, "notifications/progress")]
    ck.expect(not others, f"other notifications: {others}")
    if result is not None:
        ck.expect(result.get("isError") is not True, "isError: true")


def s_error_trailers(ch, ck):
    m1 = request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    out1 = call(ch, m1, metadata_for(m1, omit=("mcp-method",))[1])
    ck.obs["missing_mcp_method"] = {"request_id": m1["id"], **trailer_error(out1)}
    expect_trailer_error(ck, out1, m1, grpc.StatusCode.INVALID_ARGUMENT, -32020, "missing mcp-method")
    m2 = request("mcpwire/no-such-method", {})
    out2 = call(ch, m2, metadata_for(m2)[1])
    # The binding ends a call in the trailers only for -32700, -32600, -32020
    # and -32022: an unknown method is an ordinary error response, status OK.
    ck.obs["unknown_method"] = {"request_id": m2["id"], "grpc_status": out2.code.name, "messages": out2.messages}
    ck.expect(out2.code == grpc.StatusCode.OK, f"unknown method: status {out2.code.name}, want OK")
    e2 = out2.messages[0] if len(out2.messages) == 1 else None
    ck.expect(
        e2 is not None and e2.get("id") == m2["id"] and (e2.get("error") or {}).get("code") == -32601,
        f"unknown method: want one error response -32601 with id {m2['id']}, got {out2.messages}",
    )
    m3 = request("tools/list")
    out3 = call(ch, m3, metadata_for(m3)[1], path="/mcp.zig.transport.v1.Mcp/NoSuchRpc")
    ck.obs["unknown_path"] = {"grpc_status_name": out3.code.name, "grpc_message": out3.details}
    ck.expect(out3.code == grpc.StatusCode.UNIMPLEMENTED, f"unknown path: status {out3.code.name}, want UNIMPLEMENTED")


def s_deadline(ch, ck):
    msg = request("tools/call", {"name": "sleep", "arguments": {"ms": 5000}})
    out = call(ch, msg, metadata_for(msg)[1], timeout=0.3)
    ck.obs["status"] = status_of(out)
    ck.expect(out.code == grpc.StatusCode.DEADLINE_EXCEEDED, f"status {out.code.name}, want DEADLINE_EXCEEDED")
    # At the 300 ms deadline, well before the 5 s sleep would end (the
    # margin is for a busy machine).
    ck.expect(out.elapsed_ms < 3000, f"ended after {out.elapsed_ms} ms, want < 3000")
    ck.expect(not out.messages, f"{len(out.messages)} message(s) on the stream")
    m2 = request("tools/call", {"name": "echo", "arguments": {"text": "still there"}})
    out2 = call(ch, m2, metadata_for(m2)[1], timeout=5)
    result = expect_response(ck, out2, m2, "echo after the deadline")
    ck.obs["server_answers_after"] = result is not None


SCENARIOS = {"echo": s_echo, "progress": s_progress, "error-trailers": s_error_trailers, "deadline": s_deadline}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in SCENARIOS:
        print(f"usage: python client.py HOST:PORT SCENARIO\nscenarios: {' '.join(SCENARIOS)}", file=sys.stderr)
        sys.exit(2)
    addr, scenario = sys.argv[1:]
    ck = Check(scenario)
    ca = os.environ.get("MCPWIRE_CA")
    if ca:
        with open(ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        channel = grpc.secure_channel(addr, creds, options=(("grpc.ssl_target_name_override", "localhost"),
                                                            ("grpc.default_authority", "localhost")))
    else:
        channel = grpc.insecure_channel(addr)
    try:
        SCENARIOS[scenario](channel, ck)
    except Exception as e:  # noqa: BLE001 - report any failure as the scenario's
        ck.failures.append(f"exception: {type(e).__name__}: {e}")
    finally:
        channel.close()
    ck.obs["ok"] = not ck.failures
    if ck.failures:
        ck.obs["reason"] = "; ".join(ck.failures)
    print(json.dumps(ck.obs, ensure_ascii=False), flush=True)
    sys.exit(0 if ck.obs["ok"] else 1)


if __name__ == "__main__":
    main()
