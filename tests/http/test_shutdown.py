"""Graceful shutdown on SIGTERM/SIGINT: stop accepting, finish in-flight
requests (with Connection: close), close idle connections, exit 0."""

import signal
import socket
import time

import pytest

from rawhttp import Closed, request


def refused_soon(server, limit=3.0):
    """True once a new connection is refused (or reset/closed unanswered)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            s = socket.create_connection((server.host, server.port), timeout=0.5)
        except OSError:
            return True
        s.close()
        time.sleep(0.05)
    return False


def test_sigterm_idle_server_exits_0(server):
    t0 = time.monotonic()
    server.send_signal(signal.SIGTERM)
    assert server.wait(10) == 0, server.stderr()
    assert time.monotonic() - t0 < 3


def test_sigint_exits_0(server):
    with server.conn() as c:
        c.send(request("GET", "/hello"))
        assert c.read_response().status == 200
    server.send_signal(signal.SIGINT)
    assert server.wait(10) == 0, server.stderr()


@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_in_flight_request_completes(make_server, accept):
    server = make_server(accept=accept)
    c = server.conn()
    try:
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234")
        time.sleep(0.2)  # let the server read the head and start the body
        server.send_signal(signal.SIGTERM)
        assert refused_soon(server), "server still accepts after SIGTERM"
        assert server.proc.poll() is None, "exited with a request in flight"
        c.send(b"56789")
        r = c.read_response()
        assert r.status == 200 and r.body == b"0123456789", r
        assert "close" in r.tokens("connection"), r.headers
        assert c.wait_closed(2.0)
    finally:
        c.close()
    assert server.wait(10) == 0, server.stderr()


def test_idle_keep_alive_closed_on_sigterm(server):
    conns = [server.conn() for _ in range(5)]
    try:
        for i, c in enumerate(conns):
            c.send(request("GET", "/hello?name=%d" % i))
            assert c.read_response().status == 200
        server.send_signal(signal.SIGTERM)
        for c in conns:
            assert c.wait_closed(3.0), "idle keep-alive connection not closed on SIGTERM"
    finally:
        for c in conns:
            c.close()
    assert server.wait(10) == 0, server.stderr()


def test_silent_connection_does_not_delay_exit(server):
    """A client that connected but never sent a byte holds no request: the
    server exits promptly, without waiting for shutdown_timeout (10 s).
    (With TCP_DEFER_ACCEPT such a connection may never have been accepted,
    so whether the client sees a FIN is up to the kernel: not checked.)"""
    c = server.conn()
    try:
        time.sleep(0.1)
        t0 = time.monotonic()
        server.send_signal(signal.SIGTERM)
        rc = server.wait(10)
        dt = time.monotonic() - t0
    finally:
        c.close()
    assert rc == 0, (rc, server.stderr())
    assert dt < 3, "exit took %.1f s" % dt


def test_shutdown_timeout_bounds_exit(make_server):
    s = make_server(shutdown_timeout="1s", request_timeout="30s")
    c = s.conn()
    try:
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01")
        time.sleep(0.2)
        t0 = time.monotonic()
        s.send_signal(signal.SIGTERM)
        rc = s.wait(6)
        dt = time.monotonic() - t0
    finally:
        c.close()
    assert rc == 0, (rc, s.stderr())
    assert 0.8 <= dt <= 3.5, "exited %.1f s after SIGTERM with shutdown_timeout = 1s" % dt


def test_shutdown_under_load(server):
    """SIGTERM while many keep-alive connections are busy: clean exit 0."""
    conns = [server.conn() for _ in range(50)]
    try:
        for c in conns:
            c.send(request("GET", "/hello") * 3)
        server.send_signal(signal.SIGTERM)
        for c in conns:
            # Whatever was already read is answered; then the connection closes.
            while True:
                try:
                    r = c.read_response(timeout=5)
                except Closed:
                    break
                assert r.status == 200
    finally:
        for c in conns:
            c.close()
    assert server.wait(10) == 0, server.stderr()
