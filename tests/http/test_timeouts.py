"""keep_alive_timeout and request_timeout: configured at 1 s, or 2 s where a
client keeps making progress for longer than that."""

import select
import socket
import time

import pytest

from rawhttp import recv_until, request


@pytest.fixture
def fast(make_server):
    return make_server(keep_alive_timeout="1s", request_timeout="1s")


def time_until_closed(c, limit):
    """Seconds until the server closes C (EOF/reset), reading and returning
    whatever it sent on the way; fails if still open after LIMIT."""
    t0 = time.monotonic()
    data = b""
    while True:
        left = limit - (time.monotonic() - t0)
        assert left > 0, "still open after %.1f s (got %r)" % (limit, data[:200])
        r, _, _ = select.select([c.sock], [], [], left)
        if not r:
            continue
        try:
            chunk = c.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return time.monotonic() - t0, data
        data += chunk


def test_idle_keep_alive_closed(fast):
    with fast.conn() as c:
        c.send(request("GET", "/hello"))
        assert c.read_response().status == 200
        dt, data = time_until_closed(c, 3.5)
    assert data == b"", "idle connection got bytes: %r" % data
    assert 0.9 <= dt <= 3.0, dt


def test_never_sent_anything_closed(fast):
    # TCP_DEFER_ACCEPT may hold the connection in the kernel for about a
    # second before the server sees it, hence the looser upper bound.
    with fast.conn() as c:
        dt, data = time_until_closed(c, 4.5)
    assert data == b"" or data.startswith(b"HTTP/1.1 408 "), data
    assert 0.9 <= dt <= 4.0, dt


def test_active_connection_survives(fast):
    """Many requests 0.4 s apart: the deadline moves with every request."""
    with fast.conn() as c:
        for i in range(7):
            c.send(request("GET", "/hello?name=%d" % i))
            assert c.read_response().body == b"Hello, %d!" % i
            time.sleep(0.4)


def test_partial_head_408(fast):
    with fast.conn() as c:
        t0 = time.monotonic()
        c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Partial: ")
        dt, data = time_until_closed(c, 3.5)
        dt = time.monotonic() - t0
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert 0.9 <= dt <= 3.0, dt


def test_dribbling_client_still_408(fast):
    """One byte every 0.3 s never completes the head: request_timeout counts
    from the start of the request, not from the last byte."""
    req = request("GET", "/hello?name=" + "d" * 100)
    t0 = time.monotonic()
    got = b""
    with fast.conn() as c:
        i = 0
        while time.monotonic() - t0 < 6:
            r, _, _ = select.select([c.sock], [], [], 0.3)
            if r:
                try:
                    chunk = c.sock.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    break
                got += chunk
                continue
            try:
                c.sock.send(req[i : i + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            i += 1
        dt = time.monotonic() - t0
    assert got.startswith(b"HTTP/1.1 408 "), (dt, got)
    assert dt <= 3.2, "408 only after %.1f s of dribbling" % dt


def test_slow_body_408(fast):
    with fast.conn() as c:
        t0 = time.monotonic()
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
        dt, data = time_until_closed(c, 3.5)
        dt = time.monotonic() - t0
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert 0.9 <= dt <= 3.0, dt


def test_second_request_gets_its_own_timeout(fast):
    """After a completed request, the next partial one times out as well."""
    with fast.conn() as c:
        c.send(request("GET", "/hello"))
        assert c.read_response().status == 200
        time.sleep(0.5)
        c.send(b"GET /hello HTTP/1.1\r\n")
        dt, data = time_until_closed(c, 3.5)
    assert data.startswith(b"HTTP/1.1 408 "), data


def test_timeouts_do_not_affect_other_connections(fast):
    idle = [fast.conn() for _ in range(20)]
    try:
        time.sleep(1.2)
        with fast.conn() as c:
            c.send(request("GET", "/hello"))
            assert c.read_response().status == 200
    finally:
        for s in idle:
            s.close()


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
