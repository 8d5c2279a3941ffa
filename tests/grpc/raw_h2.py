#!/usr/bin/env python3
"""Raw HTTP/2 (h2c, prior knowledge) checks of a gRPC tunnel server.

    .venv/bin/python tests/grpc/raw_h2.py HOST:PORT

Uses the sans-IO `h2` package (4.4.1) to send requests that the gRPC
libraries will not make: an unknown path, a wrong content type, a GET,
missing or mismatched mirrored metadata, a compressed message, a
grpc-encoding, an oversize length prefix, a request message sent after
the server's complete early response and RST_STREAM(NO_ERROR), and header
blocks over the field and list limits (431, the connection kept, the HPACK
table in step for the next request).

Prints `ok NAME` or `FAIL NAME: reason` per check and `N passed, N failed`;
exit 0 when all pass, 1 when one fails, 2 on usage.
"""
import base64
import json
import socket
import struct
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

PATH = "/mcp.zig.transport.v1.Mcp/Call"
PROTOCOL_VERSION = "2026-07-28"
TIMEOUT = 5.0


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def message(obj, flag=0):
    """5-byte gRPC prefix + JsonRpcMessage{jsonrpc = 1: JSON}."""
    j = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    m = b"\x0a" + varint(len(j)) + j
    return struct.pack(">BI", flag, len(m)) + m


def parse_messages(buf):
    """Split a response body into JSON-RPC objects; raises on a bad frame."""
    out = []
    i = 0
    while i < len(buf):
        if len(buf) - i < 5:
            raise ValueError(f"truncated prefix at {i}")
        flag, n = struct.unpack(">BI", buf[i:i + 5])
        if flag != 0:
            raise ValueError(f"compressed flag {flag} in response")
        m = buf[i + 5:i + 5 + n]
        if len(m) != n:
            raise ValueError("truncated message")
        i += 5 + n
        # protobuf: field 1, wire type 2
        if not m:
            out.append(None)
            continue
        if m[0] != 0x0A:
            raise ValueError(f"unexpected protobuf tag {m[0]:#x}")
        ln, shift, k = 0, 0, 1
        while True:
            b = m[k]
            k += 1
            ln |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        out.append(json.loads(m[k:k + ln]))
    return out


_ids = [100]


def tool_call(name="echo", text="hello raw h2"):
    _ids[0] += 1
    return {
        "jsonrpc": "2.0",
        "id": _ids[0],
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": {"text": text},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }


class Result:
    def __init__(self):
        self.headers = None      # response HEADERS (or trailers-only block)
        self.trailers = None     # trailing HEADERS
        self.data = b""
        self.ended = False       # END_STREAM seen from the server
        self.reset = None        # RST_STREAM error code from the server
        self.events = []         # event names, in order

    def hdr(self, name):
        for block in (self.trailers, self.headers):
            for k, v in block or ():
                if k == name:
                    return v
        return None

    @property
    def trailers_only(self):
        return self.trailers is None and self.headers is not None and self.ended

    def grpc_status(self):
        return self.hdr("grpc-status")

    def summary(self):
        return (f"headers={self.headers} trailers={self.trailers} data={self.data[:120]!r} "
                f"ended={self.ended} reset={self.reset} events={self.events}")


class Conn:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.authority = addr
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        self.c = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.c.local_settings.update({h2.settings.SettingCodes.ENABLE_PUSH: 0})
        self.c.initiate_connection()
        self.flush()
        self.results = {}
        self.terminated = None

    def flush(self):
        d = self.c.data_to_send()
        if d:
            self.sock.sendall(d)

    def close(self):
        try:
            self.c.close_connection()
            self.flush()
        except Exception:
            pass
        self.sock.close()

    def base_headers(self, path=PATH, method="POST", ctype="application/grpc", extra=()):
        h = [(":method", method), (":scheme", "http"), (":authority", self.authority), (":path", path)]
        if ctype is not None:
            h.append(("content-type", ctype))
        h.append(("te", "trailers"))
        h.extend(extra)
        return h

    def open(self, headers, end_stream=False):
        sid = self.c.get_next_available_stream_id()
        self.results[sid] = Result()
        self.c.send_headers(sid, headers, end_stream=end_stream)
        self.flush()
        return sid

    def pump(self, until, timeout=TIMEOUT):
        """Read and handle events until until() is true; returns False on timeout/EOF."""
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65535)
            except socket.timeout:
                return False
            if not data:
                self.terminated = self.terminated or "EOF"
                return until()
            for ev in self.c.receive_data(data):
                self.handle(ev)
            self.flush()
        return True

    def handle(self, ev):
        sid = getattr(ev, "stream_id", None)
        r = self.results.get(sid)
        if r is not None:
            r.events.append(type(ev).__name__)
        if isinstance(ev, h2.events.ResponseReceived):
            r.headers = ev.headers
        elif isinstance(ev, h2.events.TrailersReceived):
            r.trailers = ev.headers
        elif isinstance(ev, h2.events.DataReceived):
            if r is not None:
                r.data += ev.data
            self.c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            r.ended = True
        elif isinstance(ev, h2.events.StreamReset):
            if r is not None:
                r.reset = ev.error_code
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.terminated = f"GOAWAY error_code={ev.error_code} last_stream={ev.last_stream_id}"

    def done(self, sid):
        r = self.results[sid]
        return lambda: r.ended or r.reset is not None or self.terminated is not None

    def call(self, headers, body=None):
        """One request: HEADERS, DATA(body, END_STREAM); waits for the end of the response."""
        sid = self.open(headers, end_stream=body is None)
        if body is not None:
            self.send_body(sid, body, end_stream=True)
        self.pump(self.done(sid))
        return self.results[sid]

    def send_body(self, sid, body, end_stream):
        """Sends body respecting flow control; stops early if the stream ends."""
        r = self.results[sid]
        i = 0
        while True:
            if r.ended or r.reset is not None or self.terminated:
                return False
            window = min(self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size)
            if window <= 0:
                if not self.pump(lambda: self.c.local_flow_control_window(sid) > 0 or r.ended
                                 or r.reset is not None or self.terminated is not None):
                    return False
                continue
            chunk = body[i:i + window]
            last = i + len(chunk) >= len(body)
            self.c.send_data(sid, chunk, end_stream=end_stream and last)
            self.flush()
            i += len(chunk)
            if last:
                return True


def mirrored(msg, **over):
    h = {"mcp-protocol-version": PROTOCOL_VERSION, "mcp-method": msg["method"]}
    if msg["method"] == "tools/call":
        h["mcp-name"] = msg["params"]["name"]
    for k, v in over.items():
        k = k.replace("_", "-")
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    return list(h.items())


# --- checks -------------------------------------------------------------------------------------

class CheckFailed(Exception):
    pass


def expect(cond, reason):
    if not cond:
        raise CheckFailed(reason)


def expect_status(r, want, what=""):
    got = r.grpc_status()
    expect(got == str(want), f"{what}grpc-status {got!r}, want {want}; {r.summary()}")


def decode_bin(v):
    v = v.strip()
    return base64.b64decode(v + "=" * (-len(v) % 4))


def expect_32020(r, msg):
    expect_status(r, 3)
    expect(r.trailers_only, f"not trailers-only; {r.summary()}")
    expect(r.hdr("mcp-error-code") == "-32020", f"mcp-error-code {r.hdr('mcp-error-code')!r}, want -32020")
    b = r.hdr("mcp-error-bin")
    expect(b is not None, f"no mcp-error-bin; {r.summary()}")
    try:
        e = json.loads(decode_bin(b))
    except ValueError as x:
        raise CheckFailed(f"mcp-error-bin {b!r} does not decode to JSON: {x}")
    expect(isinstance(e, dict) and e.get("jsonrpc") == "2.0", f"mcp-error-bin not a JSON-RPC message: {e!r}")
    err = e.get("error") or {}
    expect(err.get("code") == -32020, f"mcp-error-bin error.code {err.get('code')!r}, want -32020: {e!r}")
    expect(e.get("id") == msg["id"], f"mcp-error-bin id {e.get('id')!r}, want {msg['id']!r}")


def echo_ok(conn, what=""):
    msg = tool_call(text="echo after " + (what or "start"))
    r = conn.call(conn.base_headers(extra=mirrored(msg)), message(msg))
    expect(r.headers is not None and dict(r.headers).get(":status") == "200",
           f"{what}echo: HTTP status not 200; {r.summary()}")
    expect_status(r, 0, f"{what}echo: ")
    try:
        msgs = parse_messages(r.data)
    except Exception as x:
        raise CheckFailed(f"{what}echo: bad response body: {x}; {r.summary()}")
    expect(len(msgs) == 1, f"{what}echo: {len(msgs)} messages, want 1: {msgs!r}")
    m = msgs[0]
    expect(isinstance(m, dict) and m.get("id") == msg["id"], f"{what}echo: response id {m!r}")
    content = ((m.get("result") or {}).get("content")) or []
    texts = [c.get("text") for c in content if isinstance(c, dict)]
    want = msg["params"]["arguments"]["text"]
    expect(want in texts, f"{what}echo: text {texts!r}, want {want!r}; {m!r}")


def check_unknown_path(addr):
    conn = Conn(addr)
    try:
        msg = tool_call()
        r = conn.call(conn.base_headers(path="/mcp.zig.transport.v1.Mcp/Nope", extra=mirrored(msg)), message(msg))
        expect_status(r, 12)
        expect(r.trailers_only, f"not trailers-only; {r.summary()}")
        expect(r.data == b"", f"body on a trailers-only response: {r.data[:60]!r}")
    finally:
        conn.close()


def check_http_status(addr, want, **kw):
    conn = Conn(addr)
    try:
        msg = tool_call()
        get = kw.get("method") == "GET"
        r = conn.call(conn.base_headers(extra=mirrored(msg), **kw), None if get else message(msg))
        expect(r.headers is not None, f"no response headers; {r.summary()} {conn.terminated or ''}")
        st = dict(r.headers).get(":status")
        expect(st == str(want), f":status {st!r}, want {want}; {r.summary()}")
    finally:
        conn.close()


def check_missing_method(addr):
    conn = Conn(addr)
    try:
        msg = tool_call()
        r = conn.call(conn.base_headers(extra=mirrored(msg, mcp_method=None)), message(msg))
        expect_32020(r, msg)
    finally:
        conn.close()


def check_mismatched_name(addr):
    conn = Conn(addr)
    try:
        msg = tool_call()
        r = conn.call(conn.base_headers(extra=mirrored(msg, mcp_name="nope")), message(msg))
        expect_32020(r, msg)
    finally:
        conn.close()


def check_compressed_flag(addr):
    conn = Conn(addr)
    try:
        msg = tool_call()
        r = conn.call(conn.base_headers(extra=mirrored(msg)), message(msg, flag=1))
        expect_status(r, 12)
    finally:
        conn.close()


def check_grpc_encoding(addr):
    conn = Conn(addr)
    try:
        msg = tool_call()
        r = conn.call(conn.base_headers(extra=[("grpc-encoding", "gzip")] + mirrored(msg)), message(msg))
        expect_status(r, 12)
    finally:
        conn.close()


def check_oversize(addr):
    conn = Conn(addr)
    try:
        msg = tool_call()
        sid = conn.open(conn.base_headers(extra=mirrored(msg)))
        # prefix announces 8 MiB (flag 0), then stream 256 KiB of filler without END_STREAM
        body = struct.pack(">BI", 0, 8 * 1024 * 1024) + b"\x0a" + varint(8 * 1024 * 1024 - 5) + b"x" * (256 * 1024)
        conn.send_body(sid, body, end_stream=False)
        conn.pump(conn.done(sid))
        r = conn.results[sid]
        expect_status(r, 8)
        expect(conn.terminated is None, f"connection ended: {conn.terminated}")
        if not r.ended or r.reset is None:
            # the server is expected to reset the unfinished request; if it did not, do it ourselves
            try:
                conn.c.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
                conn.flush()
            except h2.exceptions.StreamClosedError:
                pass
        echo_ok(conn, "oversize: ")
    finally:
        conn.close()


def raw_data_frame(sid, payload, end_stream):
    return struct.pack(">I", len(payload))[1:] + bytes([0x0, 0x1 if end_stream else 0x0]) \
        + struct.pack(">I", sid & 0x7FFFFFFF) + payload


def check_early_response(addr, variant):
    # variant "missing-metadata" is not used: the -32020 answer carries the request id,
    # so the server reads the message first and does not answer early
    conn = Conn(addr)
    try:
        msg = tool_call()
        if variant == "unknown-path":
            headers = conn.base_headers(path="/mcp.zig.transport.v1.Mcp/Nope", extra=mirrored(msg))
            want = 12
        else:
            headers = conn.base_headers(extra=mirrored(msg, mcp_method=None))
            want = 3
        sid = conn.open(headers, end_stream=False)     # HEADERS without END_STREAM
        r = conn.results[sid]
        # complete response (END_STREAM) and then the server's RST_STREAM
        conn.pump(lambda: (r.ended and r.reset is not None) or conn.terminated is not None)
        expect(conn.terminated is None, f"connection ended: {conn.terminated}; {r.summary()}")
        expect(r.ended, f"no END_STREAM from the server; {r.summary()}")
        expect_status(r, want)
        if want == 3:
            expect_32020(r, msg)
        expect(r.reset is not None, f"no RST_STREAM after the complete response; {r.summary()}")
        expect(r.reset == h2.errors.ErrorCodes.NO_ERROR,
               f"RST_STREAM code {r.reset!r}, want NO_ERROR; {r.summary()}")
        # now the request message, with END_STREAM, on the reset stream
        body = message(msg)
        try:
            conn.c.send_data(sid, body, end_stream=True)
            conn.flush()
            sent_via_h2 = True
        except h2.exceptions.StreamClosedError:
            sent_via_h2 = False        # expected: h2 knows the stream is closed
        # h2 sent nothing; put the DATA frame on the wire by hand so the server sees it
        if not sent_via_h2:
            conn.sock.sendall(raw_data_frame(sid, body, end_stream=True))
        # the full response is still there
        expect_status(r, want, "after late DATA: ")
        expect(r.ended, "after late DATA: response lost")
        # the connection still serves a normal call
        echo_ok(conn, "early response: ")
        expect(conn.terminated is None, f"connection ended: {conn.terminated}")
    finally:
        conn.close()


def check_header_over_limit(addr, variant):
    """A header block over the limits, in HEADERS + CONTINUATION frames: the
    server decodes it as it arrives, answers the stream with :status 431 and
    RST_STREAM(NO_ERROR) (the request did not end), and keeps the connection;
    the next request, whose HPACK fields index the entries the refused block
    added to the dynamic table, succeeds."""
    conn = Conn(addr)
    try:
        msg = tool_call(text="over the limit")
        if variant == "field":
            # One 100 KB field, Huffman-coded and indexed by the h2 package's
            # encoder: larger than the table, it empties both tables (RFC 7541 §4.4).
            big = [("x-huge", "h" * (100 * 1024))]
        else:
            # Three 7000-octet fields: each under the field limit, together
            # over the list limit (16 KiB at most). Octets with 8-bit Huffman
            # codes, so that the encoder sends them raw: the block is over
            # 16 KiB too.
            big = [(f"x-list-{i}", c * 7000) for i, c in enumerate("XZ*")]
        headers = conn.base_headers(extra=big + mirrored(msg))
        sid = conn.open(headers, end_stream=False)
        r = conn.results[sid]
        conn.pump(lambda: r.reset is not None or conn.terminated is not None)
        expect(conn.terminated is None, f"connection ended: {conn.terminated}; {r.summary()}")
        status = dict(r.headers or ()).get(":status")
        expect(status == "431", f":status {status!r}, want 431; {r.summary()}")
        expect(r.ended, f"no END_STREAM with the 431; {r.summary()}")
        expect(r.reset == h2.errors.ErrorCodes.NO_ERROR,
               f"RST_STREAM code {r.reset!r}, want NO_ERROR; {r.summary()}")
        # The h2 encoder indexes mcp-protocol-version, mcp-method and mcp-name
        # (added after the large fields): this request refers to them.
        echo_ok(conn, f"431 ({variant}) ")
        expect(conn.terminated is None, f"connection ended: {conn.terminated}")
    finally:
        conn.close()


def check_echo(addr):
    conn = Conn(addr)
    try:
        echo_ok(conn)
    finally:
        conn.close()


CHECKS = [
    ("unknown-path", check_unknown_path),
    ("content-type-415", lambda a: check_http_status(a, 415, ctype="application/json")),
    ("get-405", lambda a: check_http_status(a, 405, method="GET")),
    ("missing-mcp-method", check_missing_method),
    ("mismatched-mcp-name", check_mismatched_name),
    ("compressed-flag", check_compressed_flag),
    ("grpc-encoding-gzip", check_grpc_encoding),
    ("oversize-message", check_oversize),
    ("early-response", lambda a: check_early_response(a, "unknown-path")),
    ("header-field-100k-431", lambda a: check_header_over_limit(a, "field")),
    ("header-list-over-limit-431", lambda a: check_header_over_limit(a, "list")),
    ("echo", check_echo),
]


def main(argv):
    if len(argv) != 2 or ":" not in argv[1]:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    addr = argv[1]
    passed = failed = 0
    for name, fn in CHECKS:
        try:
            fn(addr)
            print(f"ok {name}", flush=True)
            passed += 1
        except CheckFailed as e:
            print(f"FAIL {name}: {e}", flush=True)
            failed += 1
        except Exception as e:  # protocol errors, timeouts, refused connections
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
