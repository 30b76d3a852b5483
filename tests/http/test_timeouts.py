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


def trickle_until_answered(c, head, piece, every, limit):
    """Sends HEAD, then PIECE every EVERY seconds until the server answers
    (or closes); returns (seconds from the head to the answer, the answer).
    Fails when nothing came within LIMIT."""
    c.sendall(head)
    t0 = time.monotonic()
    data = b""
    while time.monotonic() - t0 < limit:
        r, _, _ = select.select([c], [], [], every)
        if r:
            try:
                chunk = c.recv(65536)
            except ConnectionResetError:
                chunk = b""
            data += chunk
            if not chunk or b"\r\n\r\n" in data:
                return time.monotonic() - t0, data
            continue
        try:
            c.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
    pytest.fail("no answer within %.1f s of trickling (got %r)" % (limit, data[:200]))


def test_body_under_min_rate_408(make_server):
    """A body trickled a byte every 0.5 s is under body_min_rate (100 B/s):
    408 once body_rate_grace (2 s) passed, although every byte would have
    restarted request_timeout (10 s) and the body is allowed 60 s whole
    (issue 17, item 7)."""
    s = make_server(request_timeout="10s", body_rate_grace="2s", body_min_rate="100")
    with socket.create_connection((s.host, s.port)) as c:
        head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
        dt, data = trickle_until_answered(c, head, b"x", 0.5, 8)
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert 1.9 <= dt <= 4.0, dt
    assert "under body_min_rate" in s.stderr(), s.stderr()[-2000:]


def test_body_timeout_bounds_a_steady_body(make_server):
    """A body arriving steadily (200 B/s, no minimum rate) still has to be
    whole within body_timeout (2 s): 408 then, not request_timeout later."""
    s = make_server(request_timeout="10s", body_timeout="2s", body_min_rate="0")
    with socket.create_connection((s.host, s.port)) as c:
        head = b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        dt, data = trickle_until_answered(c, head, b"14\r\n" + b"y" * 20 + b"\r\n", 0.1, 8)
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert 1.9 <= dt <= 4.0, dt
    assert "not whole within body_timeout" in s.stderr(), s.stderr()[-2000:]


def test_route_body_timeout_replaces_the_servers(make_server, tmp_path):
    """handler PREFIX NAME { body_timeout = 1s } bounds that route's bodies
    alone; a stalled body elsewhere waits for request_timeout (3 s)."""
    site = (
        "site {\n    handler /echo echo {\n        body_timeout = 1s\n    }\n"
        "    handler /echo2 echo\n}\n"
    )
    s = make_server(site=site, request_timeout="3s", body_min_rate="0")
    head = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345"
    with socket.create_connection((s.host, s.port)) as c:
        c.sendall(head % b"/echo")
        t0 = time.monotonic()
        data = recv_until(c, lambda d: b"\r\n\r\n" in d, 6)
        dt = time.monotonic() - t0
    assert data.startswith(b"HTTP/1.1 408 ") and 0.9 <= dt <= 2.5, (dt, data)
    with socket.create_connection((s.host, s.port)) as c:
        c.sendall(head % b"/echo2")
        t0 = time.monotonic()
        data = recv_until(c, lambda d: b"\r\n\r\n" in d, 8)
        dt = time.monotonic() - t0
    assert data.startswith(b"HTTP/1.1 408 ") and 2.5 <= dt <= 5.5, (dt, data)


def test_fast_body_unaffected_by_the_pace_limits(make_server):
    """1 MiB sent at once passes under a 1 s body_timeout."""
    s = make_server(body_timeout="1s", body_rate_grace="1s", body_min_rate="1M")
    body = bytes(range(256)) * 4096
    with socket.create_connection((s.host, s.port)) as c:
        c.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        data = recv_until(c, lambda d: d.endswith(body), 10)
    assert data.startswith(b"HTTP/1.1 200 OK"), data[:100]
