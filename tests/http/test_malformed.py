"""Malformed requests (RFC 9112, strict): each gets the expected status and
the connection is closed afterwards -- the parser never guesses."""

import time

import pytest

from rawhttp import request

H = b"Host: x\r\n"

# (id, raw request bytes, expected status or set of acceptable statuses)
CASES = [
    (
        "cl-and-te",
        b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "te-and-cl",
        b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    ("two-different-cl", b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
    ("cl-list-different", b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 5, 6\r\n\r\nhello!", 400),
    ("cl-abc", b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: abc\r\n\r\n", 400),
    ("cl-negative", b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: -5\r\n\r\nhello", 400),
    ("cl-plus", b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: +5\r\n\r\nhello", 400),
    ("cl-hex", b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 0x5\r\n\r\nhello", 400),
    ("cl-empty", b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: \r\n\r\n", 400),
    ("cl-huge", b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 99999999999999999999999999\r\n\r\n", {400, 413}),
    ("te-gzip", b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n\r\nxxxx", 501),
    ("te-chunked-not-last", b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", {400, 501}),
    ("bare-cr-in-header", b"GET /hello HTTP/1.1\r\n" + H + b"X-A: a\rb\r\n\r\n", 400),
    ("bare-cr-line-end", b"GET /hello HTTP/1.1\r\n" + H + b"X-A: a\r\r\n\r\n", 400),
    ("bare-lf-everywhere", b"GET /hello HTTP/1.1\nHost: x\n\n", 400),
    ("bare-lf-one-header", b"GET /hello HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n", 400),
    ("bare-lf-request-line", b"GET /hello HTTP/1.1\nHost: x\r\n\r\n", 400),
    ("obs-fold", b"GET /hello HTTP/1.1\r\n" + H + b"X-A: a\r\n b\r\n\r\n", 400),
    ("obs-fold-tab", b"GET /hello HTTP/1.1\r\n" + H + b"X-A: a\r\n\tb\r\n\r\n", 400),
    ("space-before-colon", b"GET /hello HTTP/1.1\r\n" + H + b"X-A : b\r\n\r\n", 400),
    ("space-before-colon-host", b"GET /hello HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    ("tab-before-colon", b"GET /hello HTTP/1.1\r\n" + H + b"X-A\t: b\r\n\r\n", 400),
    ("header-name-at", b"GET /hello HTTP/1.1\r\n" + H + b"X@A: b\r\n\r\n", 400),
    ("header-name-paren", b"GET /hello HTTP/1.1\r\n" + H + b"X(A): b\r\n\r\n", 400),
    ("header-name-space", b"GET /hello HTTP/1.1\r\n" + H + b"X A: b\r\n\r\n", 400),
    ("header-name-8bit", b"GET /hello HTTP/1.1\r\n" + H + b"X\xe9A: b\r\n\r\n", 400),
    ("header-empty-name", b"GET /hello HTTP/1.1\r\n" + H + b": b\r\n\r\n", 400),
    ("header-no-colon", b"GET /hello HTTP/1.1\r\n" + H + b"X-A b\r\n\r\n", 400),
    ("header-value-nul", b"GET /hello HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n", 400),
    ("header-value-ctl", b"GET /hello HTTP/1.1\r\n" + H + b"X-A: a\x01b\r\n\r\n", 400),
    ("missing-host-11", b"GET /hello HTTP/1.1\r\nX-A: b\r\n\r\n", 400),
    ("two-hosts", b"GET /hello HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
    ("two-equal-hosts", b"GET /hello HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n", 400),
    ("host-with-space", b"GET /hello HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    ("lowercase-http", b"GET /hello http/1.1\r\n" + H + b"\r\n", 400),
    ("version-garbage", b"GET /hello HTTX/1.1\r\n" + H + b"\r\n", 400),
    ("version-missing", b"GET /hello\r\n" + H + b"\r\n", 400),
    ("version-11-suffix", b"GET /hello HTTP/1.1x\r\n" + H + b"\r\n", 400),
    ("http-2.0", b"GET /hello HTTP/2.0\r\n" + H + b"\r\n", 505),
    # not an HTTP-version (DIGIT "." DIGIT): malformed, not unsupported
    ("http-01.1", b"GET /hello HTTP/01.1\r\n" + H + b"\r\n", 400),
    ("http-11.1", b"GET /hello HTTP/11.1\r\n" + H + b"\r\n", 400),
    ("http-2", b"GET /hello HTTP/2\r\n" + H + b"\r\n", 400),
    ("http-3.0", b"GET /hello HTTP/3.0\r\n" + H + b"\r\n", 505),
    ("http-0.9-style", b"GET /hello HTTP/0.9\r\n" + H + b"\r\n", {400, 505}),
    # the HTTP/2 preface as a connection's first bytes starts HTTP/2: test_http2.py
    ("unknown-method", b"FOO /hello HTTP/1.1\r\n" + H + b"\r\n", 501),
    ("long-method", b"A" * 100 + b" /hello HTTP/1.1\r\n" + H + b"\r\n", 501),
    ("lowercase-method", b"get /hello HTTP/1.1\r\n" + H + b"\r\n", {400, 501}),
    ("method-bad-char", b"GE@T /hello HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("asterisk-with-get", b"GET * HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("target-no-slash", b"GET hello HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("target-nul", b"GET /hel\x00lo HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("target-ctl", b"GET /hel\x01lo HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("target-8bit", b"GET /h\xe9llo HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("target-pct-00", b"GET /hello%00 HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("file-pct-00", b"GET /index.html%00.txt HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("target-bad-pct", b"GET /hello%zz HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("double-space", b"GET  /hello HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("space-in-target", b"GET /hel lo HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("tab-separator", b"GET\t/hello HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("trailing-space", b"GET /hello HTTP/1.1 \r\n" + H + b"\r\n", 400),
    ("chunk-size-zz", b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400),
    ("chunk-size-empty", b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n\r\nhello\r\n0\r\n\r\n", 400),
    ("chunk-size-negative", b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n", 400),
    (
        "chunk-size-overflow",
        b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
        {400, 413},
    ),
    ("chunk-missing-crlf", b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n", 400),
    ("chunk-lf-only", b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n", 400),
    ("chunk-too-long", b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n", 400),
]


# Known server bugs (strict xfail: an XPASS fails, so remove the entry once fixed).
KNOWN_BUGS = {}


def case_params():
    for name, raw, expected in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[name])] if name in KNOWN_BUGS else []
        yield pytest.param(raw, expected, id=name, marks=marks)


@pytest.mark.parametrize("raw,expected", list(case_params()))
def test_malformed(server, raw, expected):
    expected = expected if isinstance(expected, set) else {expected}
    with server.conn() as c:
        c.send(raw)
        r = c.read_response()
        assert r.status in expected, "want %s, got %r" % (sorted(expected), r)
        assert r.header("Content-Length") is None or int(r.header("Content-Length")) == len(r.body)
        assert c.wait_closed(2.0), "connection still open after %d" % r.status


def test_error_response_says_close(server):
    with server.conn() as c:
        c.send(b"GET /hello HTTP/1.1\r\nX-A : b\r\n\r\n")
        r = c.read_response()
        assert r.status == 400
        assert "close" in r.tokens("connection")
        assert c.wait_closed(2.0)


def test_malformed_after_good_request(server):
    """A good request, then garbage on the same connection: the good one is
    answered, the bad one gets 400, then the connection is closed."""
    with server.conn() as c:
        c.send(request("GET", "/hello?name=ok") + b"GET /hello HTTP/1.1\r\n" + H + b"X-A: a\r\n b\r\n\r\n")
        assert c.read_response().body == b"Hello, ok!"
        assert c.read_response().status == 400
        assert c.wait_closed(2.0)


def test_leading_empty_lines_skipped(server):
    with server.conn() as c:
        c.send(b"\r\n\r\n" + request("GET", "/hello?name=lead"))
        r = c.read_response()
        assert r.status == 200 and r.body == b"Hello, lead!"
        assert not c.wait_closed(0.3)
        # Also between pipelined requests (a client's stray CRLF after a body).
        c.send(request("POST", "/echo", body=b"abc") + b"\r\n" + request("GET", "/hello"))
        assert c.read_response().body == b"abc"
        assert c.read_response().body == b"Hello, World!"


def test_two_equal_content_lengths_or_400(server):
    """RFC 9110 allows accepting identical repeated lengths; either answer
    is fine, but never a desynchronised connection."""
    with server.conn() as c:
        c.send(b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello" + request("GET", "/hello"))
        r = c.read_response()
        if r.status == 200:
            assert r.body == b"hello"
            assert c.read_response().body == b"Hello, World!"
        else:
            assert r.status == 400
            assert c.wait_closed(2.0)


def test_garbage_binary(server):
    with server.conn() as c:
        c.send(bytes(range(256)) + b"\r\n\r\n")
        r = c.read_response()
        assert r.status in (400, 501)
        assert c.wait_closed(2.0)


# A TLS 1.2 ClientHello's first bytes (record header, handshake header,
# version, the start of the random): no line feed in sight.
TLS_HELLO = bytes.fromhex("160301020001000 1fc0303".replace(" ", "")) + bytes(range(32, 96))


@pytest.mark.parametrize(
    "raw,expected",
    [
        pytest.param(TLS_HELLO, 400, id="tls-client-hello"),
        pytest.param(bytes(range(0, 10)) + bytes(range(11, 200)), 400, id="binary-noise"),
        pytest.param(b"get\x00\x01\x02", 400, id="lowercase-then-noise"),
    ],
)
def test_not_http_is_answered_at_once(server, raw, expected):
    """Bytes that cannot start an HTTP/1.x request are answered and closed
    at once, without a line feed and long before request_timeout (10 s)."""
    t0 = time.monotonic()
    with server.conn(timeout=5.0) as c:
        c.send(raw)
        r = c.read_response()
        assert r.status == expected, r
        assert c.wait_closed(2.0)
    assert time.monotonic() - t0 < 2.0


def test_trickled_request_still_works(server):
    """The first bytes are looked at at once; the rest of a head trickled
    byte by byte is still answered when it completes."""
    with server.conn() as c:
        for b in request("GET", "/hello?name=slow"):
            c.send(bytes([b]))
        assert c.read_response().body == b"Hello, slow!"


def test_client_close_mid_request_does_not_hurt(server):
    for cut in (1, 10, 30):
        with server.conn() as c:
            c.send(request("POST", "/echo", body=b"0123456789" * 10)[:cut])
    with server.conn() as c:
        c.send(request("GET", "/hello"))
        assert c.read_response().status == 200
