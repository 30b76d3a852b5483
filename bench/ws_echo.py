#!/usr/bin/env python3
"""ws_echo.py - WebSocket round trips per second through the ws_echo
built-in handler (stdlib only).

  bench/ws_echo.py [--threads T] [--procs P] [--conns C] [--depth D]
                   [--size S] [--seconds N] [--colibri BIN] [--port PORT]

Starts colibri (build/colibri unless --colibri or $COLIBRI) on a free
loopback port with `handler /ws ws_echo`, then P client processes, each
with C WebSocket connections. Every connection keeps D messages of S bytes
(binary, masked, as a client must) in flight: it sends D, reads D echoes,
checks them, and again, for N seconds. Prints messages echoed per second
(a message = one frame each way). The client is Python: with two cores
shared by server and clients, the figure is the client's ceiling as much
as the server's; strace/perf the server to see its own cost.

--port drives a server that runs already (on 127.0.0.1:PORT, with ws_echo
at /ws): to count its system calls, for instance

    strace -f -c -o calls.txt build/colibri -c ws.conf &
    bench/ws_echo.py --port 8080 --seconds 3; kill %1

Every socket is on 127.0.0.1 and every loop ends at a deadline.
"""
import argparse
import base64
import multiprocessing
import os
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_ports  # noqa: E402


def handshake(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16))
    s.sendall(
        b"GET /ws HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            raise SystemExit("ws_echo.py: closed during the handshake")
        buf += d
    if not buf.startswith(b"HTTP/1.1 101"):
        raise SystemExit("ws_echo.py: no 101: %r" % buf[:100])
    return s


def client(port, conns, depth, size, seconds, out):
    payload = bytes(i & 0xFF for i in range(size))
    mask = b"\x01\x02\x03\x04"
    masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
    head = struct.pack("!BB", 0x82, 0x80 | size) if size < 126 else struct.pack("!BBH", 0x82, 0xFE, size)
    frame = (head + mask + masked) * depth
    reply = ((struct.pack("!BB", 0x82, size) if size < 126 else struct.pack("!BBH", 0x82, 126, size)) + payload) * depth
    sel = selectors.DefaultSelector()
    socks = [handshake(port) for _ in range(conns)]
    got = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        got[s] = b""
        s.send(frame)
    n = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            s = key.fileobj
            d = s.recv(65536)
            if not d:
                raise SystemExit("ws_echo.py: server closed a connection")
            got[s] += d
            if len(got[s]) >= len(reply):
                if got[s] != reply:
                    raise SystemExit("ws_echo.py: wrong echo")
                got[s] = b""
                n += depth
                s.send(frame)
    out.put(n)
    for s in socks:
        s.close()


def run_clients(a, port):
    """a.procs client processes against port; the messages they all echoed."""
    q = multiprocessing.Queue()
    ps = [
        multiprocessing.Process(target=client, args=(port, a.conns, a.depth, a.size, a.seconds, q))
        for _ in range(a.procs)
    ]
    for p in ps:
        p.start()
    total = sum(q.get(timeout=a.seconds + 30) for _ in ps)
    for p in ps:
        p.join(10)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--conns", type=int, default=1)
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--colibri", default=os.environ.get("COLIBRI", "build/colibri"))
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    if a.port:
        total = run_clients(a, a.port)
        report(a, total)
        return
    (port,) = free_ports(1)
    with tempfile.TemporaryDirectory() as tmp:
        conf = os.path.join(tmp, "ws.conf")
        with open(conf, "w") as f:
            f.write("listener 127.0.0.1:%d\nthreads = %d\nsite {\n    handler /ws ws_echo\n}\n" % (port, a.threads))
        srv = subprocess.Popen([a.colibri, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 5
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit("ws_echo.py: colibri did not start")
                    time.sleep(0.02)
            total = run_clients(a, port)
        finally:
            srv.terminate()
            srv.wait(10)
    report(a, total)


def report(a, total):
    print(
        "threads=%d procs=%d conns=%d depth=%d size=%d: %.0f messages/s"
        % (a.threads, a.procs, a.conns, a.depth, a.size, total / a.seconds)
    )


if __name__ == "__main__":
    main()
