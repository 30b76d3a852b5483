#!/usr/bin/env python3
"""fresh_latency.py - how soon serve_files serves a file rewritten in place.

Starts COLIBRI (default build/colibri, threads = 1, cache_for = 1h) on a
root with one small file; 200 times: two GETs (cached), a rewrite in place
(truncate + write + close), then GETs on fresh connections without pause
until the new content comes back. Prints the median and maximum time from
the close to the first fresh answer, and how often the very first request
after the close was still the old version (the inotify event not read yet).

usage: bench/fresh_latency.py [COLIBRI]"""
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

binary = sys.argv[1] if len(sys.argv) > 1 else "build/colibri"
tmp = tempfile.mkdtemp()
root = os.path.join(tmp, "root")
os.mkdir(root)
path = os.path.join(root, "f.txt")
with open(path, "wb") as f:
    f.write(b"v0")
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
conf = os.path.join(tmp, "c.conf")
with open(conf, "w") as f:
    f.write("listener 127.0.0.1:%d\nthreads = 1\nsite {\n serve_files / {\n  path = %s\n  cache_for = 1h\n }\n}\n" % (port, root))
proc = subprocess.Popen([binary, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def get():
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"GET /f.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    b = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        b += d
    c.close()
    return b.split(b"\r\n\r\n", 1)[1]


try:
    for _ in range(100):
        try:
            get()
            break
        except OSError:
            time.sleep(0.05)
    lat, stale_first = [], 0
    for i in range(1, 201):
        get()
        get()
        want = b"v%d" % i
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(want)
        t = time.monotonic()
        n = 0
        while True:
            n += 1
            if get() == want:
                break
        lat.append(time.monotonic() - t)
        stale_first += n > 1
    print("close -> fresh answer: median %.3f ms, max %.3f ms; first request after the close "
          "stale in %d of 200" % (statistics.median(lat) * 1e3, max(lat) * 1e3, stale_first))
finally:
    proc.terminate()
    proc.wait(10)
