#!/usr/bin/env python3
"""h2_cpu.py - server CPU time per HTTP/2 request, pinned: colibri against
h2o 2.2.5 and nginx 1.22 (issue 19's table), the method of bench/cpu.sh.

Every server runs with one worker pinned to SERVER_CPU (taskset -c 0);
h2load runs with one thread and 64 connections pinned to LOAD_CPU (1). Per
round and workload: utime + stime of every thread of the server and its
children (/proc/PID/task/*/stat) before and after one `h2load -D DURATION`
run, divided by the requests that succeeded. Rounds alternate between the
servers, the order rotating each round. Printed: every round, then per
workload the median of each server and the median of the per-round ratios
to the first server (the machine is shared: ratios within a round are the
steadier figure).

Workloads (all `h2load -c 64`):
  h2c-hello  h2c GET /hello.txt (a 13-byte file for all three), -m 16
  h2c-4k     h2c GET /4k.bin, -m 16
  h2-hello   h2 (TLS) GET /hello.txt, -m 16
  h2-4k      h2 (TLS) GET /4k.bin, -m 16
  h2c-1m     h2c GET /1m.bin, -m 1

usage: h2_cpu.py [SERVER...]   SERVER: colibri[:BINARY] (default
build/colibri), h2o, nginx; default "colibri h2o nginx".
Environment: ROUNDS (5), DURATION (5), WORKLOADS (all), SERVER_CPU (0),
LOAD_CPU (1).
"""
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h2srv  # noqa: E402

WORK = {
    "h2c-hello": ("/hello.txt", False, 16),
    "h2c-4k": ("/4k.bin", False, 16),
    "h2-hello": ("/hello.txt", True, 16),
    "h2-4k": ("/4k.bin", True, 16),
    "h2c-1m": ("/1m.bin", False, 1),
}


def ticks(srv):
    t = 0
    for pid in srv.pids():
        try:
            for task in os.listdir("/proc/%d/task" % pid):
                f = open("/proc/%d/task/%s/stat" % (pid, task)).read().rsplit(")", 1)[1].split()
                t += int(f[11]) + int(f[12])
        except OSError:
            pass
    return t


def h2load(srv, work, secs):
    path, tls, m = WORK[work]
    cmd = ["taskset", "-c", os.environ.get("LOAD_CPU", "1"), "h2load", "-c", "64", "-m", str(m),
           "-t", "1", "-D", str(secs), srv.url(path, tls)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 120).stdout
    m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed", out)
    if not m:
        raise RuntimeError("h2load: %s" % out[-2000:])
    if int(m.group(2)):
        print("  %s %s: %s failed" % (srv.name, work, m.group(2)), file=sys.stderr)
    return int(m.group(1)), cmd


def main():
    names = sys.argv[1:] or ["colibri", "h2o", "nginx"]
    rounds = int(os.environ.get("ROUNDS", "5"))
    secs = int(os.environ.get("DURATION", "5"))
    works = os.environ.get("WORKLOADS", " ".join(WORK)).split()
    pin = os.environ.get("SERVER_CPU", "0")
    hz = os.sysconf("SC_CLK_TCK")
    sc = h2srv.Scratch()
    servers = []
    try:
        for n in names:
            binary = None
            if n.startswith("colibri"):
                binary = n.split(":", 1)[1] if ":" in n else os.path.join(h2srv.HERE, "..", "build", "colibri")
            servers.append(h2srv.Server(sc, n, binary, pin))
            print("%s: %s" % (n, " ".join(servers[-1].cmd)))
        print("load average at start: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        for s in servers:  # warm-up: caches, TLS session setup paths
            for w in works:
                h2load(s, w, 1)
        res = {}  # (work, server) -> [us per request per round]
        for r in range(rounds):
            order = servers[r % len(servers):] + servers[:r % len(servers)]
            for w in works:
                for s in order:
                    t0 = ticks(s)
                    n, cmd = h2load(s, w, secs)
                    us = (ticks(s) - t0) / hz * 1e6 / n
                    res.setdefault((w, s.name), {})[r] = us
                    print("round %d %-10s %-10s %8d req %9.2f us/req" % (r + 1, w, s.name, n, us), flush=True)
        print("load average at end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        print("\nmedian us per request (ratio to %s: median of the per-round ratios)" % servers[0].name)
        print("%-10s " % "workload" + " ".join("%22s" % s.name for s in servers))
        for w in works:
            base = res[(w, servers[0].name)]
            cells = []
            for s in servers:
                v = res[(w, s.name)]
                ratio = statistics.median(v[i] / base[i] for i in v if base[i])
                cells.append("%10.2f (%5.2fx)" % (statistics.median(v.values()), ratio))
            print("%-10s " % w + " ".join("%22s" % c for c in cells))
    finally:
        for s in servers:
            s.stop()
        sc.cleanup()


if __name__ == "__main__":
    main()
