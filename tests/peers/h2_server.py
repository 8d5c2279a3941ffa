#!/usr/bin/env python3
"""HTTP/2 echo server peer (Python h2, prior knowledge) for the mcpwire client.

    h2_server.py PORT

Serves one connection at a time on 127.0.0.1:PORT. Every request gets
:status 200 and its body echoed, sent as h2's flow-control windows allow;
GET /big/N gets N octets of the mcpwire echo server's pattern. Received DATA
is acknowledged once its echo is queued, so the client's sending follows our
reading. Prints "listening 127.0.0.1:PORT" once bound.
"""

import socket
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def pattern(n):
    """The mcpwire echo server's generated body (tests/src/echo.rs)."""
    out = bytearray(n)
    for i in range(n):
        x = ((i * 2_654_435_761) & 0xFFFFFFFFFFFFFFFF) ^ (i >> 13)
        out[i] = x & 0xFF
    return bytes(out)


def serve(sock):
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    )
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    # stream id -> {"out": bytearray, "owed": acknowledgements owed, "end": bool}
    streams = {}

    def pump():
        for sid, s in list(streams.items()):
            while s["out"]:
                try:
                    window = conn.local_flow_control_window(sid)
                except h2.exceptions.StreamClosedError:
                    del streams[sid]
                    break
                n = min(window, conn.max_outbound_frame_size, len(s["out"]))
                if n <= 0:
                    break
                chunk = bytes(s["out"][:n])
                del s["out"][:n]
                conn.send_data(sid, chunk)
                if s["owed"]:
                    ack = min(n, s["owed"])
                    s["owed"] -= ack
                    conn.acknowledge_received_data(ack, sid)
            if sid in streams and not s["out"] and s["end"]:
                conn.end_stream(sid)
                del streams[sid]

    while True:
        data = sock.recv(1 << 16)
        if not data:
            return
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                headers = dict(ev.headers)
                path = headers.get(":path", "")
                response = [(":status", "200")]
                if "content-type" in headers:
                    response.append(("content-type", headers["content-type"]))
                conn.send_headers(ev.stream_id, response)
                s = {"out": bytearray(), "owed": 0, "end": False}
                if path.startswith("/big/"):
                    s["out"] += pattern(int(path[5:]))
                streams[ev.stream_id] = s
            elif isinstance(ev, h2.events.DataReceived):
                s = streams.get(ev.stream_id)
                if s is None:
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    continue
                s["out"] += ev.data
                # Padding has no echo: return it now.
                pad = ev.flow_controlled_length - len(ev.data)
                if pad:
                    conn.acknowledge_received_data(pad, ev.stream_id)
                s["owed"] += len(ev.data)
            elif isinstance(ev, h2.events.StreamEnded):
                if ev.stream_id in streams:
                    streams[ev.stream_id]["end"] = True
            elif isinstance(ev, h2.events.StreamReset):
                streams.pop(ev.stream_id, None)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                sock.sendall(conn.data_to_send())
                return
        pump()
        sock.sendall(conn.data_to_send())


def main():
    port = int(sys.argv[1])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    print(f"listening 127.0.0.1:{listener.getsockname()[1]}", flush=True)
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            serve(sock)
        except (OSError, h2.exceptions.ProtocolError) as e:
            print(f"connection: {e!r}", file=sys.stderr, flush=True)
        finally:
            sock.close()


if __name__ == "__main__":
    main()
