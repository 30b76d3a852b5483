#!/usr/bin/env python3
"""proxy_rss.py - peak RSS of colibri proxying large bodies both ways.

colibri (threads = 2, `proxy /api { to = http://UPSTREAM; strip_prefix =
true }`) in front of tests/http/upstream.py on loopback. After a warm-up
request the baseline is VmRSS; then CONC clients at once each upload SIZE_MB
MiB chunked (POST /api/echo: the upstream hashes it and answers its length
and SHA-256, which are checked) and then download SIZE_MB MiB (GET
/api/big), reading the first 8 MiB slowly (1 MiB every 50 ms) so that the
upstream is faster than the client. The figure is the server's VmHWM after
all of it, beside the baseline: the growth is what the bodies cost.

    python3 bench/proxy_rss.py [--size-mb 512] [--conc 4] [--colibri build/colibri]
"""
import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_kb(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def wait_port(port, t=10):
    deadline = time.monotonic() + t
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("port %d never opened" % port)


def client(port, size, errors):
    try:
        piece = os.urandom(1 << 20)
        h = hashlib.sha256()
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(size >> 20):
            s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            h.update(piece)
        s.sendall(b"0\r\n\r\n")
        f = s.makefile("rb")
        assert b" 200 " in f.readline()
        n = 0
        while True:
            line = f.readline()
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":")[1])
            if line == b"\r\n":
                break
        j = json.loads(f.read(n))
        assert j["body_len"] == size and j["body_sha256"] == h.hexdigest(), j
        s.sendall(b"GET /api/big?size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % size)
        got = 0
        while True:  # the head
            line = f.readline()
            if line == b"\r\n":
                break
        while got < size:
            b = f.read1(1 << 20)
            assert b
            got += len(b)
            if got < (8 << 20):
                time.sleep(0.05)
        s.close()
    except Exception as e:  # noqa: BLE001
        errors.append(repr(e))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=512)
    ap.add_argument("--conc", type=int, default=4)
    ap.add_argument("--colibri", default=str(REPO / "build" / "colibri"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="proxy-rss-")
    uport, port = free_port(), free_port()
    up = subprocess.Popen([sys.executable, str(REPO / "tests/http/upstream.py"), "--port", str(uport)],
                          stdout=subprocess.PIPE)
    up.stdout.readline()
    conf = Path(tmp) / "c.conf"
    conf.write_text("listener 127.0.0.1:%d\nthreads = 2\nsite {\n    proxy /api {\n"
                    "        to = http://127.0.0.1:%d\n        strip_prefix = true\n    }\n}\n" % (port, uport))
    srv = subprocess.Popen([a.colibri, "-c", str(conf)], stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"GET /api/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        while c.recv(65536):
            pass
        base = status_kb(srv.pid, "VmRSS")
        errors = []
        t0 = time.monotonic()
        ts = [threading.Thread(target=client, args=(port, a.size_mb << 20, errors)) for _ in range(a.conc)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        secs = time.monotonic() - t0
        peak = status_kb(srv.pid, "VmHWM")
        if errors:
            sys.exit("errors: %s" % errors)
        print("%d clients x %d MiB up and %d MiB down through the proxy in %.1f s: "
              "VmRSS after warm-up %d KiB, VmHWM after %d KiB (+%d KiB)"
              % (a.conc, a.size_mb, a.size_mb, secs, base, peak, peak - base))
    finally:
        srv.terminate()
        srv.wait(10)
        up.kill()


if __name__ == "__main__":
    main()
