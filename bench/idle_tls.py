#!/usr/bin/env python3
"""idle_tls.py - memory per idle keep-alive TLS connection in colibri.

Starts BIN (default build/colibri) with one TLS listener (threads = 1, a
P-256 certificate made here), opens CONNS (default 2000) TLS 1.3
connections, sends one GET /hello on each, reads the answer and keeps them
all open. VmRSS and Private_Dirty of the server are read before and after;
per connection = (after - before) / CONNS. The same is then done with
plain connections for comparison.

Usage: bench/idle_tls.py [--bin BIN] [--conns N]
"""
import argparse
import os
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time


def mem(pid):
    rss = int([l for l in open("/proc/%d/status" % pid) if l.startswith("VmRSS:")][0].split()[1])
    dirty = 0
    for l in open("/proc/%d/smaps_rollup" % pid):
        if l.startswith("Private_Dirty:"):
            dirty = int(l.split()[1])
    return rss, dirty


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def run(binary, conns, tmp):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", tmp + "/key.pem", "-out", tmp + "/cert.pem", "-days", "2",
                    "-subj", "/CN=localhost"], check=True, capture_output=True)
    tls_port, plain_port = free_port(), free_port()
    conf = tmp + "/c.conf"
    with open(conf, "w") as f:
        f.write("listener 127.0.0.1:%d {\n    tls = true\n}\nlistener 127.0.0.1:%d\n"
                "threads = 1\nkeep_alive_timeout = 600s\nerror_log_level = warn\n"
                "site {\n    tls_certificate = cert.pem\n    tls_key = key.pem\n"
                "    handler /hello hello_world\n}\n" % (tls_port, plain_port))
    proc = subprocess.Popen([binary, "-c", conf], cwd=tmp)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", plain_port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        results = {}
        for kind, port in (("tls", tls_port), ("plain", plain_port)):
            # one warm-up connection, so the first handshake's one-time costs
            # are in "before"
            held = []
            w = socket.create_connection(("127.0.0.1", port))
            w = ctx.wrap_socket(w, server_hostname="localhost") if kind == "tls" else w
            w.sendall(b"GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n")
            w.recv(4096)
            held.append(w)
            time.sleep(0.5)
            before = mem(proc.pid)
            for _ in range(conns):
                s = socket.create_connection(("127.0.0.1", port))
                s = ctx.wrap_socket(s, server_hostname="localhost") if kind == "tls" else s
                s.sendall(b"GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n")
                got = b""
                while not got.endswith(b"Hello, World!"):
                    got += s.recv(4096)
                held.append(s)
            time.sleep(1.0)
            after = mem(proc.pid)
            results[kind] = ((after[0] - before[0]) * 1024 / conns, (after[1] - before[1]) * 1024 / conns)
            for s in held:
                s.close()
            time.sleep(1.0)
        return results
    finally:
        proc.terminate()
        proc.wait(10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/colibri")
    ap.add_argument("--conns", type=int, default=2000)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as tmp:
        r = run(os.path.abspath(a.bin), a.conns, tmp)
    for kind, (rss, dirty) in r.items():
        print("%-5s idle keep-alive connection: %6.0f B RSS, %6.0f B private dirty (%d connections)"
              % (kind, rss, dirty, a.conns))


if __name__ == "__main__":
    sys.exit(main())
