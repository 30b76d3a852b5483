#!/usr/bin/env python3
"""benchlib.py - small helpers shared by the bench/*.sh scripts (stdlib only).

  benchlib.py ports N                  print N distinct free loopback TCP ports
  benchlib.py render TEMPLATE OUT K=V… fill @K@ placeholders of TEMPLATE into OUT
  benchlib.py wait PORT [SECONDS] [PID] wait until GET /hello on 127.0.0.1:PORT is a 200
  benchlib.py drive PORT ROOT N PATH   one keep-alive connection: a warm-up GET of
                                       /hello, /4k.bin, /1m.bin, then N GETs of PATH
  benchlib.py idle PORT N PIDS…        open N connections, one GET /hello each,
                                       keep them open, report memory of PIDS
  benchlib.py median X…                median of the numbers
  benchlib.py stracesum FILE           strace -c table as "name calls" lines
  benchlib.py cgtotal FILE             total Ir of a callgrind output file

Every network use is 127.0.0.0/8 and every loop is bounded by a count or a
deadline, so a dead server makes a script fail, never hang.
"""
import os
import re
import resource
import socket
import statistics
import sys
import time

REQ = b"GET /hello HTTP/1.1\r\nHost: bench\r\n\r\n"
HELLO = b"Hello, World!"
# what `drive` sends first on its connection: the cache misses of the files
WARM = ("/hello", "/4k.bin", "/1m.bin")


def die(msg):
    print("benchlib: " + msg, file=sys.stderr)
    sys.exit(1)


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def render(template, out, pairs):
    with open(template) as f:
        text = f.read()
    for kv in pairs:
        k, _, v = kv.partition("=")
        text = text.replace("@" + k + "@", v)
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        die("%s: unfilled placeholders %s" % (template, sorted(set(left))))
    with open(out, "w") as f:
        f.write(text)


class Conn:
    """One keep-alive HTTP/1.1 connection that reads exactly one response per
    request (Content-Length bodies only: all /hello responses have one)."""

    def __init__(self, port, src=None, timeout=10.0):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if src:
            # let connect() pick the port per destination, so 10k sockets from
            # one source address do not each pin a port at bind() time
            self.s.setsockopt(socket.SOL_IP, 24, 1)  # IP_BIND_ADDRESS_NO_PORT
            self.s.bind((src, 0))
        self.s.settimeout(timeout)
        self.s.connect(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if os.environ.get("BENCH_TLS") == "1":  # the servers speak TLS (bench/lib.sh)
            import ssl
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            self.s = ctx.wrap_socket(self.s, server_hostname="localhost")
        self.buf = bytearray()

    def request(self, req=REQ):
        self.s.sendall(req)
        return self.response()

    def response(self):
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self.buf) > 65536:
                raise ValueError("response head too long")
            self._fill()
        head = self.buf[:end].decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise ValueError("bad status line %r" % lines[0])
        status = int(parts[1])
        length = None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
            if name.strip().lower() == "transfer-encoding":
                raise ValueError("chunked response not expected here")
        if length is None:
            raise ValueError("response without Content-Length")
        total = end + 4 + length
        while len(self.buf) < total:
            self._fill()
        body = bytes(self.buf[end + 4 : total])
        del self.buf[:total]
        return status, body

    def _fill(self):
        chunk = self.s.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def close(self):
        self.s.close()


def wait_ready(port, seconds, pid):
    deadline = time.monotonic() + seconds
    last = "no attempt"
    while time.monotonic() < deadline:
        if pid and not os.path.exists("/proc/%d" % pid):
            die("server (pid %d) exited before answering on port %d" % (pid, port))
        try:
            c = Conn(port, timeout=2.0)
            try:
                status, body = c.request()
            finally:
                c.close()
            if status == 200:
                return
            last = "status %d body %r" % (status, body[:80])
        except (OSError, ValueError) as e:
            last = str(e)
        time.sleep(0.1)
    die("port %d did not answer GET /hello with 200 within %ss (last: %s)" % (port, seconds, last))


def get_request(path, port):
    """A GET as wrk sends it: the request line and the Host header only
    (curl's Host is the same, 127.0.0.1:PORT)."""
    return ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (path, port)).encode()


def drive(port, root, n, path):
    """One keep-alive connection: one GET of each WARM path (the files' cache
    misses; a run with n = 0 does only these), then n GETs of path. Every
    response must be a 200 with the expected body."""
    want = {}
    for p in WARM + (path,):
        if p not in want:
            want[p] = HELLO if p == "/hello" else open(root + p, "rb").read()
    c = Conn(port, timeout=60.0)
    bad = []
    for p in WARM + (path,) * n:
        status, body = c.request(get_request(p, port))
        if status != 200 or body != want[p]:
            bad.append("%s: %d, %d bytes" % (p, status, len(body)))
    c.close()
    if bad:
        die("%d of %d responses were not 200 with the expected body, first: %s"
            % (len(bad), len(WARM) + n, bad[0]))
    print("drove %d warm-up and %d keep-alive GET %s on one connection, all 200"
          % (len(WARM), n, path))


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def memory(pids):
    """(VmRSS, Private_Dirty) in bytes, summed over pids."""
    rss = dirty = 0
    for pid in pids:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1]) * 1024
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Private_Dirty:"):
                    dirty += int(line.split()[1]) * 1024
    return rss, dirty


def idle(port, n, pids, seconds=60.0):
    deadline = time.monotonic() + seconds
    have = raise_nofile(n + 64)
    if have < n + 16:
        die("RLIMIT_NOFILE is %d, need %d" % (have, n + 16))
    time.sleep(0.5)
    rss0, dirty0 = memory(pids)
    conns = []
    per_src = 4000  # well under the ephemeral range for any one source address
    try:
        for i in range(n):
            if time.monotonic() > deadline:
                die("only %d of %d connections opened within %ss" % (i, n, seconds))
            c = Conn(port, src="127.0.0.%d" % (2 + i // per_src), timeout=10.0)
            status, body = c.request()
            if status != 200:
                die("connection %d: status %d" % (i, status))
            conns.append(c)
        time.sleep(1.0)  # let the server settle (deferred frees, timers)
        rss1, dirty1 = memory(pids)
        # prove the connections are still open and served: ask again on a sample
        sample = conns[:: max(1, n // 100)]
        alive = 0
        for c in sample:
            try:
                if c.request()[0] == 200:
                    alive += 1
            except (OSError, ValueError):
                pass
    finally:
        for c in conns:
            c.close()
    print("connections=%d" % n)
    print("rss_before=%d" % rss0)
    print("rss_after=%d" % rss1)
    print("private_dirty_before=%d" % dirty0)
    print("private_dirty_after=%d" % dirty1)
    print("rss_per_conn=%.0f" % ((rss1 - rss0) / n))
    print("private_dirty_per_conn=%.0f" % ((dirty1 - dirty0) / n))
    print("still_alive=%d/%d" % (alive, len(sample)))


def strace_summary(path):
    """Rows of `strace -c` as {name: calls}; tolerant of the optional errors column."""
    row = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\S+)\s*$")
    out = {}
    with open(path) as f:
        for line in f:
            m = row.match(line)
            if m and m.group(2) != "total":
                out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(1))
    if not out:
        die("%s: no strace -c table found" % path)
    return out


def cg_total(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    die("%s: no summary line" % path)


def main(argv):
    if len(argv) < 2:
        die(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "ports":
        print(" ".join(str(p) for p in free_ports(int(args[0]))))
    elif cmd == "render":
        render(args[0], args[1], args[2:])
    elif cmd == "wait":
        wait_ready(int(args[0]), float(args[1]) if len(args) > 1 else 10.0,
                   int(args[2]) if len(args) > 2 else 0)
    elif cmd == "drive":
        drive(int(args[0]), args[1], int(args[2]), args[3])
    elif cmd == "idle":
        idle(int(args[0]), int(args[1]), [int(p) for p in args[2:]])
    elif cmd == "median":
        print("%.2f" % statistics.median(float(x) for x in args))
    elif cmd == "stracesum":
        for name, calls in sorted(strace_summary(args[0]).items()):
            print(name, calls)
    elif cmd == "cgtotal":
        print(cg_total(args[0]))
    else:
        die("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
