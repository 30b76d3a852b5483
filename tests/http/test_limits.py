"""Size limits: request target (414), header section (431), body (413)."""

import time

import pytest

from rawhttp import chunked, request


def test_target_9000_is_414(server):
    target = "/hello?name=" + "x" * (9000 - len("/hello?name="))
    assert len(target) == 9000
    with server.conn() as c:
        c.send(request("GET", target))
        r = c.read_response()
        assert r.status == 414, r
        assert c.wait_closed(2.0)


def test_target_8001_is_414(server):
    target = "/hello?name=" + "x" * (8001 - len("/hello?name="))
    with server.conn() as c:
        c.send(request("GET", target))
        r = c.read_response()
        assert r.status == 414, r
        assert c.wait_closed(2.0)


def test_target_8000_accepted(server):
    name = "x" * (8000 - len("/hello?name="))
    target = "/hello?name=" + name
    assert len(target) == 8000
    with server.conn() as c:
        c.send(request("GET", target))
        r = c.read_response()
        assert r.status == 200, r
        assert r.body == ("Hello, %s!" % name).encode()
        # Still usable afterwards.
        c.send(request("GET", "/hello"))
        assert c.read_response().body == b"Hello, World!"


def test_target_8000_file_path_not_414(server):
    target = "/" + "d" * 7999
    with server.conn() as c:
        c.send(request("GET", target))
        r = c.read_response()
        assert r.status == 404, r  # no such file; the target is within limits


def test_target_huge_streamed_414(server):
    """A request line that never ends (no CRLF in 64 KiB) gets 414 and close."""
    with server.conn() as c:
        try:
            c.send(b"GET /" + b"a" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = c.read_response()
        assert r.status == 414, r
        assert c.wait_closed(2.0)


def test_header_section_over_8k_is_431(server):
    headers = [("X-Filler-%03d" % i, "v" * 90) for i in range(100)]  # ~10 KiB
    with server.conn() as c:
        c.send(request("GET", "/hello", headers=headers))
        r = c.read_response()
        assert r.status == 431, r
        assert c.wait_closed(2.0)


def test_single_header_over_8k_is_431(server):
    with server.conn() as c:
        c.send(request("GET", "/hello", headers=[("X-Big", "b" * 9000)]))
        r = c.read_response()
        assert r.status == 431, r
        assert c.wait_closed(2.0)


def test_header_section_just_under_8k_ok(server):
    # Request line + Host + filler + CRLF stays below 8192 bytes.
    headers = [("X-Filler-%02d" % i, "v" * 80) for i in range(80)]  # 80 * 94 = 7520
    req = request("GET", "/hello", headers=headers)
    assert len(req) < 8000
    with server.conn() as c:
        c.send(req)
        assert c.read_response().status == 200


@pytest.fixture
def small(make_server):
    return make_server(max_request_body="1k", max_request_head="2k", max_request_target="100")


def test_configured_head_and_target_limits(small):
    with small.conn() as c:
        c.send(request("GET", "/hello?name=" + "y" * 120))
        assert c.read_response().status == 414
        assert c.wait_closed(2.0)
    with small.conn() as c:
        c.send(request("GET", "/hello", headers=[("X-F", "z" * 2100)]))
        assert c.read_response().status == 431
        assert c.wait_closed(2.0)
    with small.conn() as c:
        c.send(request("GET", "/hello?name=" + "y" * 80, headers=[("X-F", "z" * 1500)]))
        assert c.read_response().status == 200


def test_body_at_limit_ok(small):
    body = bytes(range(256)) * 4
    assert len(body) == 1024
    with small.conn() as c:
        c.send(request("POST", "/echo", body=body))
        r = c.read_response()
        assert r.status == 200 and r.body == body


def test_body_over_limit_413(small):
    with small.conn() as c:
        try:
            c.send(request("POST", "/echo", body=b"a" * 2000))
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = c.read_response()
        assert r.status == 413, r
        assert c.wait_closed(2.0)


def test_body_over_limit_headers_only_413(small):
    """413 is decided from Content-Length, before the body arrives."""
    with small.conn() as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n")
        r = c.read_response(timeout=3)
        assert r.status == 413, r
        assert c.wait_closed(2.0)


def test_chunked_body_over_limit_413(small):
    with small.conn() as c:
        try:
            c.send(
                b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                + chunked(b"a" * 600, b"b" * 600, b"c" * 600)
            )
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = c.read_response()
        assert r.status == 413, r
        assert c.wait_closed(2.0)


def test_chunked_body_at_limit_ok(small):
    pieces = [b"a" * 500, b"b" * 500, b"c" * 24]
    with small.conn() as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(*pieces))
        r = c.read_response()
        assert r.status == 200 and r.body == b"".join(pieces)


def test_expect_100_over_limit_413_without_continue(small):
    with small.conn() as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\nExpect: 100-continue\r\n\r\n")
        r = c.read_response(timeout=3)
        assert r.status == 413, "want 413 and no 100 Continue, got %r" % r
        assert c.wait_closed(2.0)


def test_413_to_body_to_hello(small):
    """The limit applies to any request, even to a handler that ignores bodies."""
    with small.conn() as c:
        c.send(b"POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\n\r\n")
        r = c.read_response(timeout=3)
        assert r.status in (413, 405), r
        if r.status == 413:
            assert c.wait_closed(2.0)


def test_limits_do_not_break_later_connections(small):
    t0 = time.monotonic()
    for _ in range(20):
        with small.conn() as c:
            c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n")
            assert c.read_response().status == 413
    with small.conn() as c:
        c.send(request("GET", "/hello"))
        assert c.read_response().status == 200
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize(
    "size,status",
    [
        (b"200000", 413),  # 2 MiB announced to a 1 MiB limit
        (b"FFFFFFFFFFFFFFF", 413),  # 2^60 - 1: a number, far too large
        (b"100000;ext=1", None),  # exactly 1 MiB: allowed, so waited for
        (b"1FFFFFFFFFFFFFFFF", 400),  # 17 significant digits: not a size
    ],
)
def test_chunk_size_above_limit_answered_at_once(server, size, status):
    """A chunk whose size takes the body above the limit is refused as soon
    as its size line is read, not after waiting request_timeout (10 s) for
    data that would be refused anyway (issue 17, item 8)."""
    with server.conn() as c:
        t0 = time.monotonic()
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\n")
        if status is None:
            assert not c.wait_closed(1.0)  # still waiting for the data
            return
        r = c.read_response(timeout=5)
        elapsed = time.monotonic() - t0
        assert r.status == status, r
        assert elapsed < 2.0, "answered after %.1f s" % elapsed
        assert c.wait_closed(2.0)
