"""Hostile clients (bounded in count and time, loopback only): slow
senders, a client that never reads, one that reads a byte at a time. The
server keeps answering everyone else and frees what the hostile ones hold."""

import os
import socket
import time

import pytest

from rawhttp import recv_all
from test_concurrency import raise_nofile
from test_multipart import status_kb

SLOW = 1000  # slowloris connections


def hello_latency(server, n=100):
    """Latency of n fresh-connection GET /hello requests, sorted."""
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        with socket.create_connection((server.host, server.port), timeout=5) as s:
            s.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = recv_all(s)
        assert data.startswith(b"HTTP/1.1 200 "), data[:100]
        out.append(time.monotonic() - t0)
    return sorted(out)


def test_slowloris_does_not_starve_others_and_gets_408(make_server):
    assert raise_nofile(SLOW + 300) >= SLOW + 100, "cannot raise RLIMIT_NOFILE"
    s = make_server(request_timeout="3s", threads="1")
    slow = []
    for _ in range(SLOW):
        c = socket.create_connection((s.host, s.port), timeout=5)
        c.setblocking(False)
        c.send(b"GET /hello HTTP/1.1\r\n")
        slow.append(c)
    try:
        # a header byte every half second from each, while others are served
        start = time.monotonic()
        latencies = []
        ticks = 0
        while time.monotonic() - start < 2.0:
            for c in slow:
                try:
                    c.send(b"X")
                except OSError:
                    pass
            ticks += 1
            latencies += hello_latency(s, 25)
            time.sleep(max(0.0, start + 0.5 * ticks - time.monotonic()))
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        assert p99 < 0.1, "p99 of /hello %.3f s with %d slow clients" % (p99, SLOW)
        # at request_timeout each slow one gets a 408 and is closed
        deadline = start + 3.0 + 4.0
        answered = closed = 0
        pending = list(slow)
        while pending and time.monotonic() < deadline:
            rest = []
            for c in pending:
                try:
                    data = c.recv(4096)
                except BlockingIOError:
                    rest.append(c)
                    continue
                except OSError:
                    closed += 1
                    continue
                if data.startswith(b"HTTP/1.1 408 "):
                    answered += 1
                    rest.append(c)  # then the close
                elif not data:
                    closed += 1
            pending = rest
            time.sleep(0.05)
        assert not pending, "%d slow connections still open" % len(pending)
        assert answered >= SLOW * 0.99, "only %d of %d got a 408" % (answered, SLOW)
    finally:
        for c in slow:
            c.close()
    assert s.proc.poll() is None


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_a_client_that_never_reads_is_timed_out(make_server, tmp_path):
    s = make_server(request_timeout="2s", threads="1")
    big = s.root / "huge.bin"
    big.write_bytes(os.urandom(32 << 20))
    before = fd_count(s.proc.pid)
    c = socket.create_connection((s.host, s.port), timeout=10)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.sendall(b"GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3)
    assert fd_count(s.proc.pid) > before  # held while it waits to write
    # never read: the write stalls; the request timeout frees the connection
    deadline = time.monotonic() + 8
    while fd_count(s.proc.pid) > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fd_count(s.proc.pid) <= before, "the stalled connection was not freed"
    c.close()
    # and the server still answers
    assert hello_latency(s, 5)[-1] < 0.5


def test_a_one_byte_a_second_reader_does_not_hold_the_worker(make_server):
    s = make_server(threads="1")
    big = s.root / "huge.bin"
    big.write_bytes(os.urandom(8 << 20))
    c = socket.create_connection((s.host, s.port), timeout=10)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.sendall(b"GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        for _ in range(3):
            c.recv(1)
            lat = hello_latency(s, 10)
            assert lat[-1] < 0.1, lat
            time.sleep(0.3)
    finally:
        c.close()


def readable_all(socks, seconds):
    """Waits until every socket has bytes to read (reads none); how many do."""
    import select

    pending = list(socks)
    deadline = time.monotonic() + seconds
    while pending and time.monotonic() < deadline:
        r, _, _ = select.select(pending, [], [], max(0.0, deadline - time.monotonic()))
        pending = [c for c in pending if c not in r]
    return len(socks) - len(pending)


def test_stalled_multi_range_answers_do_not_pin_memory(make_server):
    """100 clients ask a 16 MiB file for `bytes=0-0,2-4194200` (a 4 MiB
    multipart answer) and never read. The answers are streamed part by
    part, so each costs what a stalled single range costs (issue 17, item
    6: they were built whole, 3 MB of RSS became 430 MB; bench/RESULTS.md)."""
    s = make_server(threads="2", request_timeout="30s")
    (s.root / "16m.bin").write_bytes(os.urandom(16 << 20))
    pid = s.proc.pid
    with s.conn(timeout=10) as c:  # the entry is cached; one answer read whole
        c.send(b"GET /16m.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0,2-4194200\r\n\r\n")
        r = c.read_response()
        assert r.status == 206 and len(r.body) > 4194199
    hwm = status_kb(pid, "VmHWM")
    socks = []
    try:
        for _ in range(100):
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.settimeout(10)
            c.connect((s.host, s.port))
            c.sendall(b"GET /16m.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0,2-4194200\r\n\r\n")
            socks.append(c)
        assert readable_all(socks, 20) == 100, "not every answer began"
        time.sleep(0.5)
        grown = status_kb(pid, "VmHWM") - hwm
        assert grown < 32 * 1024, "peak RSS grew by %d KiB for 100 stalled multi-range answers" % grown
    finally:
        for c in socks:
            c.close()
    assert hello_latency(s, 5)[-1] < 0.5


def test_compressed_websocket_messages_do_not_pin_memory(make_server):
    """20 WebSockets with permessage-deflate each send one 15 MiB message of
    zeros (15 KB on the wire), read its echo and stay open. The message
    buffer is freed when the next read begins, so what stays is each
    connection's zlib streams, and the peak is the messages being read at
    a time (issue 17, item 5: the largest buffer was
    kept, 100 such connections pinned 1.5 GB; bench/RESULTS.md)."""
    import struct
    import zlib

    from wsclient import BINARY, WS

    n = 20
    s = make_server(threads="2", site="site {\n    handler /ws ws_echo\n}\n")
    pid = s.proc.pid
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = c.compress(b"\0" * (15 << 20)) + c.flush(zlib.Z_SYNC_FLUSH)
    rss, hwm = status_kb(pid, "VmRSS"), status_kb(pid, "VmHWM")
    conns = []
    try:
        for _ in range(n):
            w = WS(s.host, s.port, extensions="permessage-deflate", timeout=30)
            assert w.status == 101 and w.deflate
            w.send_frame(BINARY, data[:-4], rsv=4)
            conns.append(w)
        for w in conns:
            fin, rsv, op, p = w.recv_frame(timeout=30)
            assert (fin, rsv, op) == (True, 4, BINARY) and len(p) < 100000
        time.sleep(0.5)
        grown = status_kb(pid, "VmRSS") - rss
        assert grown < 48 * 1024, "RSS grew by %d KiB for %d idle WebSockets" % (grown, n)
        # the peak: the messages being inflated at a time, one per worker
        peak = status_kb(pid, "VmHWM") - hwm
        assert peak < 128 * 1024, "peak RSS grew by %d KiB for %d WebSockets" % (peak, n)
    finally:
        for w in conns:
            w.close()
