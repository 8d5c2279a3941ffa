"""A transparent stdio relay that records the wire: a stdio client launches

    python3 wire_tap.py LOG -- /abs/server [ARGS...]

as its server; the relay starts the server with its own stdin and stdout
piped through, its stderr inherited, and writes every line each way to
LOG, one JSON object a line with the seconds since the start:

    {"t": 0.512, "dir": ">", "line": "..."}   client to server
    {"t": 0.530, "dir": "<", "line": "..."}   server to client
    {"t": 0.700, "dir": "eof"}                the client closed stdin (passed on)
    {"t": 2.701, "dir": "signal", "signal": 15}  the relay got SIGTERM (passed on)
    {"t": 2.705, "dir": "exit", "status": 0}  the server exited

so that a test can tell what the client sent (a `notifications/cancelled`),
what the server kept sending after it, and how the client stopped the
server. The relay exits when the server does: its status, or 128 + the
signal that ended it.
"""

import json
import signal
import subprocess
import sys
import threading
import time


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    log = open(sys.argv[1], "w", encoding="utf-8")
    lock = threading.Lock()
    start = time.monotonic()

    def record(**entry):
        entry["t"] = round(time.monotonic() - start, 4)
        with lock:
            log.write(json.dumps(entry) + "\n")
            log.flush()

    child = subprocess.Popen(sys.argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def on_signal(signum, _frame):
        record(dir="signal", signal=signum)
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def to_server():
        try:
            for line in sys.stdin.buffer:
                record(dir=">", line=line.decode("utf-8", "replace").rstrip("\n"))
                child.stdin.write(line)
                child.stdin.flush()
        except OSError:
            pass  # the server is gone: its status tells
        record(dir="eof")
        try:
            child.stdin.close()
        except OSError:
            pass

    def to_client():
        for line in child.stdout:
            record(dir="<", line=line.decode("utf-8", "replace").rstrip("\n"))
            try:
                sys.stdout.buffer.write(line)
                sys.stdout.buffer.flush()
            except OSError:
                break  # the client is gone

    threading.Thread(target=to_server, daemon=True).start()
    reader = threading.Thread(target=to_client, daemon=True)
    reader.start()
    status = child.wait()
    reader.join(timeout=1)
    record(dir="exit", status=status)
    sys.exit(128 - status if status < 0 else status)


if __name__ == "__main__":
    main()
