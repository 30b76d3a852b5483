#!/usr/bin/env python3
"""soak.py - a bounded mixed load against one colibri, with its RSS sampled.

    bench/soak.py --bin build-asan/colibri [--seconds 600] [--interval 10]

Starts the server on a free loopback port (2 workers, a root with a small,
a compressible and a large file), then runs these clients side by side until
the time is up, each in its own thread:

  keepalive   GET /hello on one connection, reconnecting every 200 requests
  pipelined   16 requests in one write, 16 answers read back
  close       Connection: close, files and /hello, read to the end
  files       small, large (sendfile) and gzip-compressed files, checked
              byte for byte
  post        bodies to /echo (Content-Length and chunked), echoed back
  malformed   bytes that are not a valid request: a 4xx or a close, never
              silence
  reset       a request (or half of one) then an RST (SO_LINGER 0)
  slow        a request one byte every 20 ms; a large file read 8 KiB at a
              time with pauses, then dropped
  sse_ws      an SSE stream of a few ticks, a WebSocket echo

Every well-formed request must get its full, correct answer ("failures"
counts those that did not). The server's RSS (VmRSS) is sampled every
--interval seconds. At the end the server gets SIGTERM and must exit 0 with
no sanitizer report in its stderr. The RSS must be flat after the warm-up
(the first fifth of the run): the mean of the last three samples at most
5% + 2 MiB above the first sample after the warm-up. Exit status 0 when
every check holds; the table of samples is printed either way.

With an ASan build, ASAN_OPTIONS gets a 16 MiB quarantine (unless set): its
default 256 MiB fills slowly and would read as growth for most of the run.
"""

import argparse
import gzip
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "http"))
from rawhttp import Closed, RawConn, request  # noqa: E402
from wsclient import WS  # noqa: E402

SANITIZER_RE = re.compile(rb"ERROR: \w*Sanitizer|runtime error:|WARNING: \w*Sanitizer")
SMALL = b"small file for the soak\n" * 20
TEXT = (b"colibri soak: a text that compresses well. " * 400)[:16000]
LARGE = os.urandom(2 * 1024 * 1024)
MALFORMED = [
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
    b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32),
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET / HTTP/1.1\r\nHo st: x\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = {}
        self.fail = {}
        self.examples = []

    def good(self, kind, n=1):
        with self.lock:
            self.ok[kind] = self.ok.get(kind, 0) + n

    def bad(self, kind, why):
        with self.lock:
            self.fail[kind] = self.fail.get(kind, 0) + 1
            if len(self.examples) < 20:
                self.examples.append("%s: %s" % (kind, why))


def write_root(base):
    root = base / "root"
    root.mkdir()
    (root / "small.txt").write_bytes(SMALL)
    (root / "text.txt").write_bytes(TEXT)
    (root / "large.bin").write_bytes(LARGE)
    return root


def start_server(binary, base, root, port):
    conf = base / "soak.conf"
    conf.write_text(
        "listener 127.0.0.1:%d\nthreads = 2\nrequest_timeout = 10s\nkeep_alive_timeout = 15s\n"
        "max_request_body = 1M\n"
        "site {\n    handler /hello hello_world\n    handler /echo echo\n"
        "    handler /ticks sse_ticks\n    handler /ws ws_echo\n"
        "    serve_files / {\n        path = %s\n    }\n}\n" % (port, root)
    )
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "quarantine_size_mb=16:detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    err = open(base / "soak.stderr", "wb")
    proc = subprocess.Popen([str(binary), "-c", str(conf)], stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    sys.exit("soak: the server did not start; see %s" % (base / "soak.stderr"))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def expect(resp, status, body=None):
    if resp.status != status:
        raise AssertionError("status %d, want %d" % (resp.status, status))
    if body is not None and resp.body != body:
        raise AssertionError("body of %d bytes differs from the %d expected" % (len(resp.body), len(body)))


def get(path, headers=()):
    return request("GET", path, headers=headers)


# --- the clients: each does one round and returns how many answers it checked


def c_keepalive(port, st):
    with RawConn("127.0.0.1", port, 10) as c:
        for _ in range(200):
            c.send(get("/hello"))
            expect(c.read_response(), 200, b"Hello, World!")
    return 200


def c_pipelined(port, st):
    with RawConn("127.0.0.1", port, 10) as c:
        paths = [("/hello", b"Hello, World!"), ("/small.txt", SMALL), ("/text.txt", None)] * 5
        paths.append(("/hello?name=soak", b"Hello, soak!"))
        c.send(b"".join(get(p) for p, _ in paths))
        for _, body in paths:
            expect(c.read_response(), 200, body)
    return len(paths)


def c_close(port, st):
    path, body = random.choice([("/hello", b"Hello, World!"), ("/small.txt", SMALL), ("/large.bin", LARGE)])
    with RawConn("127.0.0.1", port, 10) as c:
        c.send(get(path, [("Connection", "close")]))
        expect(c.read_response(), 200, body)
        if not c.wait_closed(5):
            raise AssertionError("still open after Connection: close")
    return 1


def c_files(port, st):
    with RawConn("127.0.0.1", port, 10) as c:
        c.send(get("/small.txt"))
        expect(c.read_response(), 200, SMALL)
        c.send(get("/large.bin"))
        expect(c.read_response(), 200, LARGE)
        c.send(get("/text.txt", [("Accept-Encoding", "gzip")]))
        r = c.read_response()
        expect(r, 200)
        if r.header("content-encoding") != "gzip" or gzip.decompress(r.body) != TEXT:
            raise AssertionError("text.txt: not the gzip of the file (%r)" % r.header("content-encoding"))
        c.send(get("/large.bin", [("Range", "bytes=1000-1999")]))
        expect(c.read_response(), 206, LARGE[1000:2000])
    return 4


def c_post(port, st):
    body = os.urandom(random.randint(1, 200_000))
    with RawConn("127.0.0.1", port, 10) as c:
        c.send(request("POST", "/echo", body=body))
        expect(c.read_response(), 200, body)
        half = len(body) // 2
        chunks = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, body[:half], len(body) - half, body[half:])
        c.send(request("POST", "/echo", headers=[("Transfer-Encoding", "chunked")]) + chunks)
        expect(c.read_response(), 200, body)
    return 2


def c_malformed(port, st):
    """Not counted as well-formed: a 4xx (505 for an unknown version; or a
    close for the bytes that are not HTTP at all) is the right answer;
    silence until the timeout is not."""
    data = random.choice(MALFORMED)
    with RawConn("127.0.0.1", port, 10) as c:
        c.send(data)
        try:
            r = c.read_response()
            if not (400 <= r.status < 500 or r.status == 505):
                raise AssertionError("malformed request answered %d" % r.status)
        except Closed:
            pass
    st.good("malformed-answered")
    return 0


def c_reset(port, st):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    data = get("/large.bin")
    s.sendall(data if random.random() < 0.5 else data[: len(data) // 2])
    if random.random() < 0.5:
        time.sleep(0.01)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    st.good("resets-sent")
    return 0


def c_slow(port, st):
    with RawConn("127.0.0.1", port, 10) as c:
        for b in get("/small.txt"):
            c.send(bytes([b]))
            time.sleep(0.02)
        expect(c.read_response(), 200, SMALL)
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    s.sendall(get("/large.bin"))
    for _ in range(10):
        s.recv(8192)
        time.sleep(0.1)
    s.close()  # a reader that gives up halfway
    st.good("slow-readers-dropped")
    return 1


def c_sse_ws(port, st):
    with RawConn("127.0.0.1", port, 10) as c:
        c.send(get("/ticks?count=3&interval=100"))
        r = c.read_response()
        expect(r, 200)
        if r.body.count(b"event: tick") != 3:
            raise AssertionError("SSE: %r" % r.body[:200])
    ws = WS("127.0.0.1", port, timeout=10)
    if ws.status != 101:
        raise AssertionError("WebSocket upgrade: %d" % ws.status)
    msg = os.urandom(random.randint(1, 70000))
    ws.send_message(2, msg)
    op, got = ws.recv_message()
    ws.close()
    if (op, got) != (2, msg):
        raise AssertionError("WebSocket echo differs")
    return 2


CLIENTS = [c_keepalive, c_pipelined, c_close, c_files, c_post, c_malformed, c_reset, c_slow, c_sse_ws]


def run_client(fn, port, st, stop):
    kind = fn.__name__[2:]
    while not stop.is_set():
        try:
            n = fn(port, st)
            if n:
                st.good(kind, n)
        except (AssertionError, Closed, OSError, TimeoutError, EOFError) as e:
            st.bad(kind, "%s: %s" % (type(e).__name__, e))
            time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--interval", type=float, default=10)
    ap.add_argument("--only", help="comma-separated client kinds (keepalive,...), to chase one failure")
    a = ap.parse_args()
    clients = [fn for fn in CLIENTS if not a.only or fn.__name__[2:] in a.only.split(",")]

    base = Path(tempfile.mkdtemp(prefix="colibri-soak-"))
    root = write_root(base)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = start_server(Path(a.bin).resolve(), base, root, port)
    st = Stats()
    stop = threading.Event()
    threads = [threading.Thread(target=run_client, args=(fn, port, st, stop), daemon=True) for fn in clients]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    samples = []
    print("%8s %10s  %s" % ("t (s)", "RSS (KiB)", "answers checked so far"), flush=True)
    while True:
        now = time.monotonic() - t0
        if proc.poll() is not None:
            break
        samples.append((now, rss_kib(proc.pid)))
        with st.lock:
            done = sum(st.ok.values())
        print("%8.0f %10d  %d" % (now, samples[-1][1], done), flush=True)
        if now >= a.seconds:
            break
        time.sleep(max(0.0, min(a.interval, a.seconds - now) - (time.monotonic() - t0 - now)))
    stop.set()
    for t in threads:
        t.join(30)

    problems = []
    if proc.poll() is not None:
        problems.append("the server died during the soak (status %s)" % proc.returncode)
    else:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = None
        if rc != 0:
            problems.append("SIGTERM: the server exited with %r, want 0" % rc)
    err = (base / "soak.stderr").read_bytes()
    m = SANITIZER_RE.search(err)
    if m:
        problems.append("sanitizer report:\n" + err[max(0, m.start() - 200) : m.start() + 3000].decode("utf-8", "replace"))
    if st.fail:
        problems.append("requests not answered right: %r; e.g.\n  %s" % (st.fail, "\n  ".join(st.examples)))
    after = [kib for t, kib in samples if t >= a.seconds / 5]
    if len(after) >= 4:
        first, last = after[0], sum(after[-3:]) / 3
        limit = first * 1.05 + 2048
        print("RSS after the warm-up: first %d KiB, mean of the last three %.0f KiB (limit %.0f)" % (first, last, limit))
        if last > limit:
            problems.append("RSS grew after the warm-up: %d -> %.0f KiB" % (first, last))
    else:
        problems.append("too few RSS samples after the warm-up to judge (%d)" % len(after))
    print("answers checked: %s" % dict(sorted(st.ok.items())))
    print("failures: %s" % (dict(st.fail) or "none"))
    for p in problems:
        print("SOAK FAILED: " + p)
    if not problems:
        print("soak passed: %.0f s, %d answers checked, server stderr in %s" % (a.seconds, sum(st.ok.values()), base))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
