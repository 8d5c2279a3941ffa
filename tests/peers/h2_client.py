#!/usr/bin/env python3
"""HTTP/2 client peer (Python h2, prior knowledge) for the mcpwire echo server.

    h2_client.py PORT [--upload BYTES] [--streams N] [--stream-bytes BYTES]

Two exchanges, each on its own connection, with h2's default 65,535-octet
windows so that flow control works in both directions (0 skips one):

1. one POST of --upload octets (default 3 MiB); the echo must come back whole;
2. --streams concurrent POSTs (default 100) of --stream-bytes each (default
   20,000), all opened before any response is read.

Prints "ok upload BYTES" and "ok concurrent N streams BYTES" and exits 0, or
prints "FAIL: why" and exits 1.
"""

import argparse
import os
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions


class Fail(Exception):
    pass


def exchange(port, bodies, timeout):
    """POSTs every body on its own stream, concurrently; returns the echoes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    )
    conn.initiate_connection()
    streams = {}
    for body in bodies:
        sid = conn.get_next_available_stream_id()
        conn.send_headers(
            sid,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":authority", f"127.0.0.1:{port}"),
                (":path", "/echo"),
                ("content-type", "application/x-mcpwire-test"),
                ("content-length", str(len(body))),
            ],
        )
        streams[sid] = {
            "body": memoryview(body),
            "sent": 0,
            "echo": bytearray(),
            "status": None,
            "content_type": None,
            "done": False,
        }
    deadline = time.monotonic() + timeout
    while not all(s["done"] for s in streams.values()):
        # Send what the windows allow.
        for sid, s in streams.items():
            body = s["body"]
            while s["sent"] < len(body):
                window = conn.local_flow_control_window(sid)
                n = min(window, conn.max_outbound_frame_size, len(body) - s["sent"])
                if n <= 0:
                    break
                end = s["sent"] + n == len(body)
                conn.send_data(sid, bytes(body[s["sent"] : s["sent"] + n]), end_stream=end)
                s["sent"] += n
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
        if time.monotonic() > deadline:
            raise Fail(f"timed out after {timeout} s: {progress(streams)}")
        try:
            data = sock.recv(1 << 16)
        except socket.timeout:
            raise Fail(f"no data for {timeout} s: {progress(streams)}") from None
        if not data:
            raise Fail(f"server closed the connection: {progress(streams)}")
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                headers = dict(ev.headers)
                s = streams[ev.stream_id]
                s["status"] = headers.get(":status")
                s["content_type"] = headers.get("content-type")
            elif isinstance(ev, h2.events.DataReceived):
                streams[ev.stream_id]["echo"] += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                streams[ev.stream_id]["done"] = True
            elif isinstance(ev, h2.events.StreamReset):
                raise Fail(f"stream {ev.stream_id} reset with {ev.error_code!r}")
            elif isinstance(ev, h2.events.ConnectionTerminated):
                raise Fail(f"GOAWAY {ev.error_code!r} last stream {ev.last_stream_id}")
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
    conn.close_connection()
    sock.sendall(conn.data_to_send())
    sock.close()
    for sid, s in streams.items():
        if s["status"] != "200":
            raise Fail(f"stream {sid}: status {s['status']}")
        if s["content_type"] != "application/x-mcpwire-test":
            raise Fail(f"stream {sid}: content-type {s['content_type']!r} not copied")
        if bytes(s["echo"]) != bytes(s["body"]):
            raise Fail(f"stream {sid}: echo of {len(s['echo'])} octets differs from the {len(s['body'])} sent")
    return sum(len(s["echo"]) for s in streams.values())


def progress(streams):
    done = sum(s["done"] for s in streams.values())
    sent = sum(s["sent"] for s in streams.values())
    got = sum(len(s["echo"]) for s in streams.values())
    return f"{done}/{len(streams)} streams done, {sent} octets sent, {got} received"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("--upload", type=int, default=3 << 20)
    p.add_argument("--streams", type=int, default=100)
    p.add_argument("--stream-bytes", type=int, default=20_000)
    p.add_argument("--timeout", type=float, default=30)
    a = p.parse_args()
    try:
        if a.upload > 0:
            n = exchange(a.port, [os.urandom(a.upload)], a.timeout)
            print(f"ok upload {n}", flush=True)
        if a.streams > 0:
            bodies = [os.urandom(a.stream_bytes) for _ in range(a.streams)]
            n = exchange(a.port, bodies, a.timeout)
            print(f"ok concurrent {a.streams} streams {n}", flush=True)
    except (Fail, OSError, h2.exceptions.ProtocolError) as e:
        print(f"FAIL: {e}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
