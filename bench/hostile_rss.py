#!/usr/bin/env python3
"""hostile_rss.py - the server's memory under the cheap attacks of issue 17
(items 5 and 6), measured from outside (stdlib only).

  bench/hostile_rss.py multirange [--clients N] [--colibri BIN]
  bench/hostile_rss.py ws-deflate [--clients N] [--size MIB] [--colibri BIN]
                                  [--conf-extra 'KEY = VALUE' ...]

Starts colibri (build/colibri unless --colibri or $COLIBRI; threads = 2)
on a free loopback port with a config of its own in a temporary
directory, reads VmRSS and VmHWM (the peak) from /proc/PID/status, runs the
attack, waits until the server has taken every request, and reads them
again while the attackers still hold their connections; then it closes
them and stops the server.

multirange: N clients (default 100) each send one
`GET /16m.bin` with `Range: bytes=0-0,2-4194200` (a multipart/byteranges
answer of 4 MiB) for a 16 MiB file, with a small receive buffer, and never
read. The server has taken a request once some of its answer arrived
(the socket is readable; nothing is read).

ws-deflate: N clients (default 100) each open a WebSocket to ws_echo with
permessage-deflate, send one message of SIZE MiB (default 15) of zeros
compressed (about 15 KB on the wire), read its echo (compressed too) and
then stay open without sending anything.

Every socket is on 127.0.0.1 and every wait ends at a deadline.
"""
import argparse
import base64
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_ports  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status_kb(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def start(binary, tmp, site, extra):
    port = free_ports(1)[0]
    conf = os.path.join(tmp, "colibri.conf")
    with open(conf, "w") as f:
        f.write("listener 127.0.0.1:%d\nthreads = 2\nrequest_timeout = 60s\n" % port)
        for line in extra:
            f.write(line + "\n")
        f.write(site)
    log = open(os.path.join(tmp, "colibri.log"), "wb")
    proc = subprocess.Popen([binary, "-c", conf], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    sys.exit("hostile_rss.py: colibri did not start; see %s" % log.name)


def wait_readable(socks, seconds):
    """Until every socket has something to read (nothing is read)."""
    pending = list(socks)
    deadline = time.monotonic() + seconds
    while pending and time.monotonic() < deadline:
        r, _, _ = select.select(pending, [], [], max(0.0, deadline - time.monotonic()))
        pending = [s for s in pending if s not in r]
    return len(socks) - len(pending)


def multirange(port, n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /16m.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0,2-4194200\r\n\r\n")
        socks.append(s)
    taken = wait_readable(socks, 30)
    return socks, "%d of %d answers begun" % (taken, n)


def ws_frame(opcode, payload, rsv=0):
    key = os.urandom(4)
    n = len(payload)
    b0 = 0x80 | rsv << 4 | opcode
    if n < 126:
        head = struct.pack("!BB", b0, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", b0, 0x80 | 127, n)
    k = (key * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big") if n else b""
    return head + key + masked


def ws_open(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    key = base64.b64encode(os.urandom(16))
    s.sendall(
        b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
    )
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            sys.exit("hostile_rss.py: closed during the handshake")
        buf += d
    if not buf.startswith(b"HTTP/1.1 101") or b"permessage-deflate" not in buf:
        sys.exit("hostile_rss.py: no deflate 101: %r" % buf[:200])
    return s, buf[buf.index(b"\r\n\r\n") + 4 :]


def ws_read_frame(s, buf, deadline):
    """(opcode, payload length, rest of buf); the payload is skipped."""

    def need(k):
        nonlocal buf
        while len(buf) < k:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            d = s.recv(1 << 20)
            if not d:
                raise EOFError
            buf += d

    need(2)
    op, n = buf[0] & 15, buf[1] & 127
    h = 2
    if n == 126:
        need(4)
        n, h = struct.unpack("!H", buf[2:4])[0], 4
    elif n == 127:
        need(10)
        n, h = struct.unpack("!Q", buf[2:10])[0], 10
    need(h + n)
    return op, n, buf[h + n :]


def ws_deflate(port, n, size_mib):
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = c.compress(b"\0" * (size_mib << 20)) + c.flush(zlib.Z_SYNC_FLUSH)
    msg = ws_frame(2, data[:-4], rsv=4)
    socks, closes = [], 0
    for _ in range(n):
        s, buf = ws_open(port)
        s.sendall(msg)
        socks.append((s, buf))
    deadline = time.monotonic() + 120
    for s, buf in socks:
        try:
            op, _, buf = ws_read_frame(s, buf, deadline)
        except (EOFError, OSError):
            op = 8
        closes += op == 8
    return [s for s, _ in socks], "%d of %d messages (%d bytes compressed) echoed, %d closed" % (
        n - closes,
        n,
        len(msg),
        closes,
    )


SITES = {
    "multirange": "site {\n    serve_files / {\n        path = %s\n    }\n}\n",
    "ws-deflate": "site {\n    handler /ws ws_echo\n}\n",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("attack", choices=sorted(SITES))
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--size", type=int, default=15, help="ws-deflate: MiB per message")
    ap.add_argument("--colibri", default=os.environ.get("COLIBRI", os.path.join(REPO, "build/colibri")))
    ap.add_argument("--conf-extra", action="append", default=[])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "root")
        os.mkdir(root)
        with open(os.path.join(root, "16m.bin"), "wb") as f:
            f.write(os.urandom(16 << 20))
        site = SITES[a.attack] % root if "%s" in SITES[a.attack] else SITES[a.attack]
        proc, port = start(a.colibri, tmp, site, a.conf_extra)
        try:
            before = status_kb(proc.pid)
            t0 = time.monotonic()
            if a.attack == "multirange":
                socks, what = multirange(port, a.clients)
            else:
                socks, what = ws_deflate(port, a.clients, a.size)
            time.sleep(1.0)  # whatever the server still does with them
            after = status_kb(proc.pid)
            print("%s, %d clients: %s in %.1f s" % (a.attack, a.clients, what, time.monotonic() - t0))
            print(
                "RSS before %.1f MB, after %.1f MB (connections open), peak %.1f MB"
                % (before["VmRSS"] / 1024, after["VmRSS"] / 1024, after["VmHWM"] / 1024)
            )
            for s in socks:
                s.close()
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
