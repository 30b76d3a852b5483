"""Pipelined requests: answered in order, leftover bytes parsed without
waiting for more input, a request split across sends, back-pressure."""

import os
import socket
import threading
import time

import pytest

from conftest import HELLO_TXT
from rawhttp import recv_until, request


def test_256_pipelined_in_one_send(server):
    n = 256
    data = b"".join(request("GET", "/hello?name=p%03d" % i) for i in range(n))
    with server.conn(timeout=10) as c:
        c.send(data)
        for i in range(n):
            r = c.read_response()
            assert r.status == 200, (i, r)
            assert r.body == b"Hello, p%03d!" % i, (i, r.body)
        # Exactly 256 responses: nothing more arrives, connection stays open.
        assert c.pending(0.3) == b""
        c.send(request("GET", "/hello?name=tail"))
        assert c.read_response().body == b"Hello, tail!"


def test_pipeline_last_request_split(server):
    reqs = [request("GET", "/hello?name=s%d" % i) for i in range(10)]
    last = reqs[-1]
    cut = len(last) // 2
    with server.conn() as c:
        c.send(b"".join(reqs[:-1]) + last[:cut])
        for i in range(9):
            assert c.read_response().body == b"Hello, s%d!" % i
        assert c.pending(0.3) == b"", "answered an incomplete request"
        c.send(last[cut:])
        assert c.read_response().body == b"Hello, s9!"


def test_pipeline_split_at_every_offset(server):
    two = request("GET", "/hello?name=a") + request("GET", "/hello?name=b")
    with server.conn() as c:
        for cut in range(1, len(two)):
            c.send(two[:cut])
            c.send(two[cut:])
            assert c.read_response().body == b"Hello, a!", cut
            assert c.read_response().body == b"Hello, b!", cut


def test_pipeline_mixed_handlers(server):
    data = (
        request("POST", "/echo", body=b"first body")
        + request("GET", "/file.txt")
        + request("HEAD", "/hello")
        + request("GET", "/missing")
        + request("PUT", "/echo", body=b"x" * 5000)
        + request("GET", "/sub")
        + request("OPTIONS", "/hello")
        + request("GET", "/hello?name=end")
    )
    with server.conn() as c:
        c.send(data)
        assert c.read_response().body == b"first body"
        assert c.read_response().body == HELLO_TXT
        h = c.read_response(head_request=True)
        assert h.status == 200 and h.header("Content-Length") == "13"
        assert c.read_response().status == 404
        assert c.read_response().body == b"x" * 5000
        assert c.read_response().status == 301
        assert c.read_response().status == 204
        assert c.read_response().body == b"Hello, end!"


def test_pipeline_stops_after_connection_close(server):
    data = (
        request("GET", "/hello?name=1")
        + request("GET", "/hello?name=2", headers=[("Connection", "close")])
        + request("GET", "/hello?name=3")
    )
    with server.conn() as c:
        c.send(data)
        assert c.read_response().body == b"Hello, 1!"
        r = c.read_response()
        assert r.body == b"Hello, 2!" and "close" in r.tokens("connection")
        assert c.wait_closed(2.0), "request after Connection: close was answered"


def test_pipeline_backpressure(server):
    """Many file responses while the client is slow to read: the server must
    not lose or reorder anything when its writes would block."""
    n = 400
    data = b"".join(
        request("GET", "/sub/data.bin") if i % 2 else request("GET", "/hello?name=%d" % i) for i in range(n)
    )
    blob = (server.root / "sub" / "data.bin").read_bytes()
    with server.conn(timeout=20) as c:
        err = []

        def sender():
            try:
                c.send(data)
            except OSError as e:
                err.append(e)

        t = threading.Thread(target=sender, daemon=True)
        t.start()
        for i in range(n):
            r = c.read_response(timeout=20)
            if i % 2:
                assert r.body == blob, i
            else:
                assert r.body == b"Hello, %d!" % i, i
        t.join(10)
        assert not err


@pytest.mark.plain_only("raw sockets")
def test_request_sent_while_a_response_is_being_written_is_answered(make_server, tmp_path):
    # Edge-triggered epoll: bytes that arrive while the server waits to
    # write give no second edge; the server must still read them.
    s = make_server()
    big = (s.base / "wwwroot" / "huge.bin")
    big.write_bytes(os.urandom(8 << 20))
    c = socket.create_connection((s.host, s.port))
    try:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        c.sendall(request("GET", "/huge.bin"))
        time.sleep(0.5)  # the server is now blocked writing
        c.sendall(request("GET", "/file.txt"))
        time.sleep(0.2)
        data = recv_until(c, lambda d: d.endswith(b"hello from a file\n"), 8)
        assert data.count(b"HTTP/1.1 200 OK") == 2, (len(data), data[-200:])
    finally:
        c.close()


@pytest.mark.plain_only("raw sockets")
def test_pipelined_answers_are_not_held_back_by_a_slow_body(make_server):
    s = make_server(request_timeout="2s")
    c = socket.create_connection((s.host, s.port))
    try:
        c.sendall(request("GET", "/hello") +
                  b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
        data = recv_until(c, lambda d: d.endswith(b"Hello, World!"), 1.5)
        assert data.startswith(b"HTTP/1.1 200 OK") and data.endswith(b"Hello, World!"), data
        c.sendall(b"hello")
        data = recv_until(c, lambda d: d.endswith(b"hello"), 3)
        assert data.startswith(b"HTTP/1.1 200 OK") and data.endswith(b"\r\n\r\nhello"), data
    finally:
        c.close()
