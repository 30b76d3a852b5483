"""Regressions from a review of the connection loop and serve_files: each
test failed before its fix."""

import os
import socket
import time

from rawhttp import request


def recv_until(s, pred, limit):
    """Read until pred(data) or limit seconds; returns the bytes."""
    data = b""
    deadline = time.monotonic() + limit
    while not pred(data):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            d = s.recv(1 << 20)
        except socket.timeout:
            break
        if not d:
            break
        data += d
    return data


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


def test_request_timeout_counts_per_request_not_per_connection(make_server):
    # Every request completes within 1 s of its start, but the coroutine
    # never ends (the buffer always holds part of the next request).
    s = make_server(request_timeout="2s")
    c = socket.create_connection((s.host, s.port))
    try:
        c.sendall(b"GET /hello HTTP/1.1\r\n")
        ok = 0
        for _ in range(6):  # about 4.8 s in all: more than twice the timeout
            time.sleep(0.8)
            c.sendall(b"Host: x\r\n\r\nGET /hello HTTP/1.1\r\n")
            data = recv_until(c, lambda d: d.endswith(b"Hello, World!") or b" 408 " in d, 2)
            assert data.startswith(b"HTTP/1.1 200 OK"), (ok, data[:60])
            ok += 1
        assert ok == 6
    finally:
        c.close()


def test_slow_but_steady_body_is_not_a_timeout(make_server):
    # The body arrives a byte every 0.6 s for 6 s with request_timeout=2s:
    # progress keeps it alive (the timeout counts between reads of a body).
    s = make_server(request_timeout="2s")
    c = socket.create_connection((s.host, s.port))
    try:
        body = b"slow body!"
        c.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
        for b in body:
            time.sleep(0.6)
            c.sendall(bytes([b]))
        data = recv_until(c, lambda d: d.endswith(body), 3)
        assert data.startswith(b"HTTP/1.1 200 OK") and data.endswith(b"\r\n\r\n" + body), data
    finally:
        c.close()


def test_directory_redirect_is_never_protocol_relative(server):
    # "//evil.example/%2e%2e/sub" normalises to "/sub": the Location must be
    # built from that, not from the raw target.
    with server.conn() as c:
        c.send(b"GET //evil.example/%2e%2e/sub?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
        r = c.read_response()
    assert r.status == 301
    loc = dict((k.lower(), v) for k, v in r.headers)["location"]
    assert loc == "/sub/?x=1", loc


def test_directory_redirect_reencodes_the_path(server):
    os.mkdir(server.base / "wwwroot" / "a b%")
    with server.conn() as c:
        c.send(b"GET /a%20b%25 HTTP/1.1\r\nHost: a\r\n\r\n")
        r = c.read_response()
    assert r.status == 301
    assert dict((k.lower(), v) for k, v in r.headers)["location"] == "/a%20b%25/"
