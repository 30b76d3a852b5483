#!/usr/bin/env python3
"""limit_rss.py BINARY - the peak RSS (VmHWM) of colibri (threads = 1)
with and without a `limit` section keyed by a header, before and after
50,000 requests on one keep-alive connection, each with a key of its own:
what the rate table costs, and that a flood of distinct keys does not grow
it (bench/RESULTS.md, issue 21)."""
import socket
import subprocess
import sys
import tempfile
import time

LIMIT = "    limit / {\n        rate = 1/h\n        key = header:X-Key\n    }\n"


def run(binary, with_limit, port, tmp):
    conf = "%s/c%d.conf" % (tmp, with_limit)
    with open(conf, "w") as f:
        f.write("listener 127.0.0.1:%d\nthreads = 1\nsite {\n    handler / hello_world\n%s}\n"
                % (port, LIMIT if with_limit else ""))
    p = subprocess.Popen([binary, "-c", conf], stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                s = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.05)
        f = s.makefile("rb")

        def hwm():
            for line in open("/proc/%d/status" % p.pid):
                if line.startswith("VmHWM"):
                    return int(line.split()[1])

        start = hwm()
        for i in range(50000):
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Key: k%d\r\n\r\n" % i)
            f.readline()
            n = 0
            while True:
                h = f.readline()
                if h.lower().startswith(b"content-length"):
                    n = int(h.split(b":")[1])
                if h == b"\r\n":
                    break
            f.read(n)
        print("%-8s VmHWM after start %d KiB, after 50000 distinct keys %d KiB"
              % ("limit" if with_limit else "no limit", start, hwm()))
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        run(sys.argv[1], False, 18591, tmp)
        run(sys.argv[1], True, 18592, tmp)
