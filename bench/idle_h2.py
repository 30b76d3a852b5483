#!/usr/bin/env python3
"""idle_h2.py - memory per idle HTTP/2 connection after one request:
colibri against h2o 2.2.5 and nginx 1.22 (http2 on), measured the same way.

Each server (one worker, bench/h2srv.py: h2c and h2 ports, the same root)
gets a warm-up of a few connections, then CONNS connections, each sends
the client preface and SETTINGS, one GET /hello.txt (a 13-byte file) and
reads the whole answer, then stays open and sends no request. During a
pause of SETTLE seconds the clients read what the servers send them and
answer as any HTTP/2 client does (a SETTINGS ACK, a PING's), no more:
colibri rests a connection idle for a second once the client acknowledged
its SETTINGS_HEADER_TABLE_SIZE = 0. Memory of the server's
processes (VmRSS and Private_Dirty from /proc/PID/status and smaps_rollup,
summed over the process and its children) is read before the CONNS
connections and after them (after that pause);
per connection = (after - before) / CONNS. Then every connection asks
again, to show they are all open and served.

usage: idle_h2.py [SERVER...]   SERVER: colibri[:BINARY], h2o, nginx
Environment: CONNS (1000), PROTOS ("h2c h2"), SETTLE (3 seconds).
   bench/idle_h2.py colibri h2o nginx
"""
import os
import re
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h2srv  # noqa: E402


def mem(srv):
    rss = dirty = 0
    for pid in srv.pids():
        try:
            rss += int(re.search(r"VmRSS:\s+(\d+) kB", open("/proc/%d/status" % pid).read()).group(1))
            dirty += int(re.search(r"Private_Dirty:\s+(\d+) kB", open("/proc/%d/smaps_rollup" % pid).read()).group(1))
        except (OSError, AttributeError):
            pass
    return rss * 1024, dirty * 1024


class Client:
    def __init__(self, srv, tls):
        s = socket.create_connection(("127.0.0.1", srv.tls_port if tls else srv.port), timeout=30)
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            s = ctx.wrap_socket(s, server_hostname="localhost")
            assert s.selected_alpn_protocol() == "h2"
        self.s = s
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.c.initiate_connection()
        self.s.sendall(self.c.data_to_send())
        self.authority = "127.0.0.1:%d" % (srv.tls_port if tls else srv.port)
        self.scheme = "https" if tls else "http"

    def service(self):
        """What the server sent meanwhile, read without waiting; the
        library's answers (ACKs) go back."""
        self.s.setblocking(False)
        try:
            while True:
                try:
                    data = self.s.recv(65536)
                except (BlockingIOError, ssl.SSLWantReadError):
                    break
                if not data:
                    raise RuntimeError("closed")
                self.c.receive_data(data)
                out = self.c.data_to_send()
                if out:
                    self.s.setblocking(True)
                    self.s.sendall(out)
                    self.s.setblocking(False)
        finally:
            self.s.setblocking(True)
            self.s.settimeout(30)

    def get(self, path="/hello.txt"):
        sid = self.c.get_next_available_stream_id()
        self.c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", self.scheme),
                                  (":authority", self.authority)], end_stream=True)
        self.s.sendall(self.c.data_to_send())
        body = b""
        while True:
            data = self.s.recv(65536)
            if not data:
                raise RuntimeError("closed")
            for ev in self.c.receive_data(data):
                if isinstance(ev, h2.events.DataReceived):
                    body += ev.data
                    self.c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    out = self.c.data_to_send()
                    if out:
                        self.s.sendall(out)
                    return body
            out = self.c.data_to_send()
            if out:
                self.s.sendall(out)


def measure(srv, tls, n):
    warm = [Client(srv, tls) for _ in range(4)]
    for w in warm:
        assert w.get() == b"Hello, World!"
    time.sleep(1)
    before = mem(srv)
    conns = []
    for _ in range(n):
        c = Client(srv, tls)
        assert c.get() == b"Hello, World!"
        conns.append(c)
    end = time.monotonic() + float(os.environ.get("SETTLE", "3"))
    while time.monotonic() < end:
        for c in conns + warm:
            c.service()
        time.sleep(0.2)
    after = mem(srv)
    for c in conns:  # all still open and served
        assert c.get() == b"Hello, World!"
    for c in conns + warm:
        c.s.close()
    return (after[0] - before[0]) / n, (after[1] - before[1]) / n


def main():
    names = sys.argv[1:] or ["colibri", "h2o", "nginx"]
    n = int(os.environ.get("CONNS", "1000"))
    protos = os.environ.get("PROTOS", "h2c h2").split()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * n + 100)), hard))
    sc = h2srv.Scratch()
    try:
        print("bytes per idle HTTP/2 connection after one request, %d connections" % n)
        print("%-40s %6s %12s %14s" % ("server", "proto", "VmRSS", "Private_Dirty"))
        for name in names:
            binary = None
            if name.startswith("colibri"):
                binary = name.split(":", 1)[1] if ":" in name else os.path.join(h2srv.HERE, "..", "build", "colibri")
            for proto in protos:
                srv = h2srv.Server(sc, name, binary)  # a fresh server for each protocol
                try:
                    rss, dirty = measure(srv, proto == "h2", n)
                finally:
                    srv.stop()
                print("%-40s %6s %10.0f B %12.0f B" % (name, proto, rss, dirty), flush=True)
    finally:
        sc.cleanup()


if __name__ == "__main__":
    main()
