#!/usr/bin/env python3
"""gateway_cpu.py - CPU per proxied request of the front server, colibri
against nginx (issue 20's table), the method of bench/cpu.sh.

The front server (colibri or nginx, one worker) is pinned to CPU 0; the
upstream (one colibri worker serving /hello and the files, or PHP-FPM with
40 static children, more than either front keeps connected) and wrk are
pinned to CPU 1. Per round and workload:
the front server's utime + stime (every thread, /proc) around one wrk run,
divided by the requests wrk completed; rounds alternate between the two
fronts, the order rotating; medians and the median per-round ratio
(nginx ÷ colibri) are printed, and the kernel's share of the front's CPU
(stime ÷ (utime + stime)).

Workloads (--workloads): hello (keep-alive /hello proxied, keep-alive to
the upstream on both), 4k and 1m (a 4 KiB and a 1 MiB file proxied), php
(`<?php echo "hi";` through PHP-FPM on a Unix socket; FastCGI keep-alive on
both: nginx `fastcgi_keep_conn on` with `keepalive 8`).

Usage: bench/gateway_cpu.py [--bin build/colibri] [--rounds 5] [--duration 5]
       [--workloads hello,4k,1m,php]
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HZ = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, what, path="/hello"):
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("%s exited at start (%s)" % (what, proc.returncode))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
                if s.recv(100).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("%s did not answer on %d" % (what, port))


def ticks(pid, split=False):
    """utime + stime of pid's threads and children's, in clock ticks; with
    split, (utime, stime)."""
    user = system = 0
    pids = [pid]
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                pids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/stat" % (p, t)) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                user += int(fields[11])
                system += int(fields[12])
        except OSError:
            pass
    return (user, system) if split else user + system


def wrk(port, path, duration):
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c64", "-d%ds" % duration,
                          "http://127.0.0.1:%d%s" % (port, path)],
                         capture_output=True, text=True, timeout=duration + 60).stdout
    m = re.search(r"(\d+) requests in", out)
    if not m:
        sys.exit("wrk: " + out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad:
        sys.exit("wrk saw %s bad answers: %s" % (bad.group(1), out))
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/colibri")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--workloads", default="hello,4k,1m,php")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    works = a.workloads.split(",")
    tmp = tempfile.mkdtemp(prefix="gateway-cpu.")
    os.chmod(tmp, 0o755)
    procs = []
    try:
        www = os.path.join(tmp, "www")
        os.mkdir(www)
        with open(os.path.join(www, "4k.bin"), "wb") as f:
            f.write(os.urandom(4096))
        with open(os.path.join(www, "1m.bin"), "wb") as f:
            f.write(os.urandom(1 << 20))
        with open(os.path.join(www, "hi.php"), "w") as f:
            f.write('<?php echo "hi";')
        for n in os.listdir(www):
            os.chmod(os.path.join(www, n), 0o644)
        os.chmod(www, 0o755)

        def start(cmd, cpu, cwd=tmp):
            p = subprocess.Popen(["taskset", "-c", str(cpu)] + cmd, cwd=cwd, stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(tmp, "log-%d" % len(procs)), "w"))
            procs.append(p)
            return p

        # the upstream: one colibri worker on CPU 1
        up = free_port()
        with open(os.path.join(tmp, "up.conf"), "w") as f:
            f.write("listener 127.0.0.1:%d\nthreads = 1\nkeep_alive_timeout = 120s\n"
                    "site {\n    handler /hello hello_world\n    serve_files / {\n        path = %s\n"
                    "        cache_for = 1h\n    }\n}\n" % (up, www))
        wait_port(up, start([binary, "-c", "up.conf"], 1), "upstream colibri")
        sock = os.path.join(tmp, "fpm.sock")
        fpm = shutil.which("php-fpm8.2") or "/usr/sbin/php-fpm8.2"
        if "php" in works:
            user = "user = root\ngroup = root\n" if os.geteuid() == 0 else ""
            with open(os.path.join(tmp, "fpm.conf"), "w") as f:
                f.write("[global]\npid = %s/fpm.pid\nerror_log = %s/fpm.log\ndaemonize = no\n"
                        "[www]\n%slisten = %s\nlisten.mode = 0666\npm = static\npm.max_children = 40\n"
                        % (tmp, tmp, user, sock))
            start([fpm, "-n", "-y", os.path.join(tmp, "fpm.conf")] + (["-R"] if os.geteuid() == 0 else []), 1)
            deadline = time.monotonic() + 10
            while not os.path.exists(sock) and time.monotonic() < deadline:
                time.sleep(0.05)

        # the two fronts on CPU 0
        cport = free_port()
        with open(os.path.join(tmp, "front.conf"), "w") as f:
            f.write("listener 127.0.0.1:%d\nthreads = 1\nkeep_alive_timeout = 120s\n"
                    "upstream app {\n    server 127.0.0.1:%d\n    keepalive = 32\n}\n"
                    "site {\n    proxy /hello {\n        to = app\n    }\n"
                    "    proxy /4k.bin {\n        to = app\n    }\n    proxy /1m.bin {\n        to = app\n    }\n"
                    "    fastcgi /php {\n        to = unix:%s\n        root = %s\n    }\n}\n"
                    % (cport, up, sock, www))
        colibri = start([binary, "-c", "front.conf"], 0)
        wait_port(cport, colibri, "front colibri")
        nport = free_port()
        user = "user root root;\n" if os.geteuid() == 0 else ""
        for d in ("b", "p", "f", "u", "s"):
            os.mkdir(os.path.join(tmp, d))
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(user + """worker_processes 1;
daemon off;
pid %(t)s/nginx.pid;
error_log %(t)s/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %(t)s/b; proxy_temp_path %(t)s/p; fastcgi_temp_path %(t)s/f;
    uwsgi_temp_path %(t)s/u; scgi_temp_path %(t)s/s;
    keepalive_requests 1000000;
    upstream app { server 127.0.0.1:%(up)d; keepalive 32; }
    upstream fpm { server unix:%(sock)s; keepalive 8; }
    server {
        listen 127.0.0.1:%(port)d;
        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        location /php/ {
            fastcgi_pass fpm;
            fastcgi_keep_conn on;
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME %(www)s/hi.php;
        }
    }
}
""" % {"t": tmp, "up": up, "sock": sock, "port": nport, "www": www})
        nginx = start(["nginx", "-c", os.path.join(tmp, "nginx.conf"), "-p", tmp], 0)
        wait_port(nport, nginx, "front nginx")
        fronts = {"colibri": (colibri, cport), "nginx": (nginx, nport)}
        paths = {"hello": "/hello", "4k": "/4k.bin", "1m": "/1m.bin", "php": "/php/hi.php"}
        print("load average at start: %s" % open("/proc/loadavg").read().split()[:3])
        for w in works:  # warm-up
            for name, (p, port) in fronts.items():
                wrk(port, paths[w], 1)
        rows, shares = {}, {}
        print("| workload | round | front | requests | µs/request | kernel share |")
        print("|---|---:|---|---:|---:|---:|")
        names = list(fronts)
        for w in works:
            for r in range(a.rounds):
                order = names[r % 2:] + names[:r % 2]
                for name in order:
                    p, port = fronts[name]
                    u0, s0 = ticks(p.pid, True)
                    n = wrk(port, paths[w], a.duration)
                    u1, s1 = ticks(p.pid, True)
                    us = (u1 - u0 + s1 - s0) / HZ * 1e6 / n
                    share = (s1 - s0) / max(1, u1 - u0 + s1 - s0)  # stime's part of the CPU
                    rows.setdefault(w, {}).setdefault(name, []).append(us)
                    shares.setdefault(w, {}).setdefault(name, []).append(share)
                    print("| %s | %d | %s | %d | %.2f | %.0f %% |" % (w, r + 1, name, n, us, share * 100),
                          flush=True)
        print("load average at end: %s" % open("/proc/loadavg").read().split()[:3])
        print()
        print("| workload | colibri µs/req | nginx µs/req | nginx ÷ colibri (median of rounds) "
              "| colibri kernel share | nginx kernel share |")
        print("|---|---:|---:|---:|---:|---:|")
        for w, by in rows.items():
            ratios = [n / c for c, n in zip(by["colibri"], by["nginx"]) if c > 0]
            sh = shares[w]
            print("| %s | %.2f | %.2f | %.2f | %.0f %% | %.0f %% |"
                  % (w, statistics.median(by["colibri"]), statistics.median(by["nginx"]),
                     statistics.median(ratios), statistics.median(sh["colibri"]) * 100,
                     statistics.median(sh["nginx"]) * 100))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if os.environ.get("KEEP"):
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
