#!/usr/bin/env python3
"""idle_h2_rss.py - memory per idle HTTP/2 (h2c) connection after one request.

Starts colibri (threads = 1) with /hello, opens CONNS connections with prior
knowledge (the Python h2 library), sends one GET /hello on each, reads the
answer and keeps them all open. Memory is read before and after from
/proc/PID/status (VmRSS) and /proc/PID/smaps_rollup (Private_Dirty); per
connection = (after - before) / CONNS. Then every connection is asked
again, to show they are still open and served.

usage: idle_h2_rss.py COLIBRI_BINARY [CONNS]   (needs: pip install h2)
"""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import h2.config
import h2.connection
import h2.events


def mem(pid):
    rss = int(re.search(r"VmRSS:\s+(\d+) kB", open("/proc/%d/status" % pid).read()).group(1))
    dirty = int(re.search(r"Private_Dirty:\s+(\d+) kB", open("/proc/%d/smaps_rollup" % pid).read()).group(1))
    return rss * 1024, dirty * 1024


def get(sock, conn, authority):
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "GET"), (":path", "/hello"), (":scheme", "http"), (":authority", authority)], end_stream=True)
    sock.sendall(conn.data_to_send())
    body = b""
    while True:
        for ev in conn.receive_data(sock.recv(65536)):
            if isinstance(ev, h2.events.DataReceived):
                body += ev.data
            if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                data = conn.data_to_send()
                if data:
                    sock.sendall(data)
                return body
        data = conn.data_to_send()
        if data:
            sock.sendall(data)


def main():
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tempfile.mkdtemp()
    conf = os.path.join(tmp, "c.conf")
    with open(conf, "w") as f:
        f.write("listener 127.0.0.1:%d\nthreads = 1\nkeep_alive_timeout = 300s\n"
                "site {\n    handler /hello hello_world\n}\n" % port)
    srv = subprocess.Popen([binary, "-c", conf], stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        authority = "127.0.0.1:%d" % port
        # one connection first, so the worker's first-use allocations are in "before"
        warm = []
        for _ in range(2):
            s = socket.create_connection(("127.0.0.1", port))
            c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            c.initiate_connection()
            s.sendall(c.data_to_send())
            assert get(s, c, authority) == b"Hello, World!"
            warm.append((s, c))
        time.sleep(0.5)
        before = mem(srv.pid)
        conns = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            c.initiate_connection()
            s.sendall(c.data_to_send())
            assert get(s, c, authority) == b"Hello, World!"
            conns.append((s, c))
        time.sleep(1.0)
        after = mem(srv.pid)
        for s, c in conns:
            assert get(s, c, authority) == b"Hello, World!"
        print("idle h2c connections: %d; per connection: RSS %.0f B, private dirty %.0f B"
              % (n, (after[0] - before[0]) / n, (after[1] - before[1]) / n))
    finally:
        srv.terminate()
        srv.wait(10)


if __name__ == "__main__":
    main()
