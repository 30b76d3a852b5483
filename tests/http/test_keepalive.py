"""Connection persistence: HTTP/1.1 default keep-alive, Connection: close,
HTTP/1.0 default close and opt-in keep-alive, never chunked to a 1.0 client."""

import socket
import struct

import pytest

from rawhttp import request


def test_http11_default_keep_alive(server):
    with server.conn() as c:
        for i in range(50):
            c.send(request("GET", "/hello?name=k%d" % i))
            r = c.read_response()
            assert r.status == 200 and r.body == b"Hello, k%d!" % i
            assert "close" not in r.tokens("connection")
        assert not c.wait_closed(0.3), "server closed a keep-alive connection"


def test_many_idle_keep_alive_connections_take_turns(server):
    """Idle connections lend their context to the next connection that needs
    one (conn_park): each is still served, in any order, request after
    request, and nothing answers the wrong connection."""
    conns = [server.conn() for _ in range(40)]
    try:
        for rnd, order in enumerate((range(40), reversed(range(40)), range(0, 40, 3))):
            for i in order:
                conns[i].send(request("GET", "/hello?name=c%d-%d" % (i, rnd)))
                r = conns[i].read_response()
                assert r.status == 200 and r.body == b"Hello, c%d-%d!" % (i, rnd)
        # interleaved: every connection has a request in flight at once
        for i in range(40):
            conns[i].send(request("GET", "/hello?name=x%d" % i))
        for i in range(40):
            r = conns[i].read_response()
            assert r.status == 200 and r.body == b"Hello, x%d!" % i
    finally:
        for c in conns:
            c.close()


@pytest.mark.parametrize("value", ["close", "Close", "keep-alive, close", "CLOSE"])
def test_connection_close(server, value):
    with server.conn() as c:
        c.send(request("GET", "/hello", headers=[("Connection", value)]))
        r = c.read_response()
        assert r.status == 200 and r.body == b"Hello, World!"
        assert "close" in r.tokens("connection"), r.headers
        assert c.wait_closed(2.0), "server kept the connection open after Connection: close"


def test_connection_close_on_file_and_404(server):
    for path, status in (("/file.txt", 200), ("/nothing-here", 404), ("/sub", 301)):
        with server.conn() as c:
            c.send(request("GET", path, headers=[("Connection", "close")]))
            r = c.read_response()
            assert r.status == status
            assert "close" in r.tokens("connection")
            assert c.wait_closed(2.0)


def test_http10_default_close(server):
    with server.conn() as c:
        c.send(b"GET /hello HTTP/1.0\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.body == b"Hello, World!"
        assert r.header("Transfer-Encoding") is None
        assert "keep-alive" not in r.tokens("connection")
        assert c.wait_closed(2.0), "HTTP/1.0 connection left open"


def test_http10_keep_alive(server):
    with server.conn() as c:
        for i in range(5):
            c.send(b"GET /hello?name=v%d HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" % i)
            r = c.read_response()
            assert r.status == 200 and r.body == b"Hello, v%d!" % i
            assert "keep-alive" in r.tokens("connection"), r.headers
            assert r.header("Transfer-Encoding") is None
        assert not c.wait_closed(0.3)
        # A 1.0 request without the opt-in closes again.
        c.send(b"GET /hello HTTP/1.0\r\n\r\n")
        assert c.read_response().status == 200
        assert c.wait_closed(2.0)


@pytest.mark.parametrize(
    "req",
    [
        b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"GET /file.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"GET /big.bin HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"GET /missing HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc",
        b"POST /hello HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc",
        b"OPTIONS /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    ],
)
def test_never_chunked_to_http10(server, req):
    with server.conn() as c:
        c.send(req)
        r = c.read_response()
        assert r.header("Transfer-Encoding") is None, r.headers
        if r.status != 204:
            assert r.header("Content-Length") is not None, r.headers
        # The response was delimited by length, so the connection can go on.
        c.send(b"GET /hello?name=after HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r2 = c.read_response()
        assert r2.body == b"Hello, after!"


def test_http10_post_echo_then_close(server):
    with server.conn() as c:
        c.send(b"POST /echo HTTP/1.0\r\nContent-Length: 4\r\n\r\nabcd")
        r = c.read_response()
        assert r.status == 200 and r.body == b"abcd"
        assert r.header("Transfer-Encoding") is None
        assert c.wait_closed(2.0)


def test_many_sequential_connections(server):
    for i in range(200):
        with server.conn() as c:
            c.send(request("GET", "/hello?name=%d" % i, headers=[("Connection", "close")]))
            assert c.read_response().body == b"Hello, %d!" % i


def _segments_in(sock):
    """Segments this socket has received (tcp_info.tcpi_segs_in, Linux)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return struct.unpack_from("I", info, 140)[0]


def _fresh_request(server, headers):
    """Segments received on a new connection up to the end of one /hello
    answer (and, with Connection: close, the server's FIN)."""
    with server.conn() as c:
        c.send(request("GET", "/hello", headers=headers))
        assert c.read_response().body == b"Hello, World!"
        if headers:
            assert c.wait_closed(2.0)
        return _segments_in(c.sock)


@pytest.mark.plain_only("counts TCP segments (TLS adds close_notify)")
def test_close_answer_and_fin_share_a_segment(server):
    # The last answer on a closing connection waits (MSG_MORE) for the FIN,
    # so a client gets answer and end of stream in one segment: a closed
    # connection costs no more segments than an answer on a kept one.
    kept = _fresh_request(server, [])
    closed = _fresh_request(server, [("Connection", "close")])
    assert closed == kept, "answer %d segments, answer + FIN %d" % (kept, closed)


def test_heads_of_same_type_and_other_lengths_alternate(server):
    """A 200's first lines and its last Content-Length are kept per worker
    (response.c's head template): answers of one type with other lengths,
    other types, and the same length again, in a row on one connection,
    each carry their own Content-Type and Content-Length."""
    from conftest import HELLO_TXT, INDEX_HTML, SUB_INDEX

    want = {
        "/hello": ("text/plain", b"Hello, World!"),
        "/file.txt": ("text/plain", HELLO_TXT),
        "/index.html": ("text/html", INDEX_HTML),
        "/sub/index.html": ("text/html", SUB_INDEX),
    }
    order = ["/hello", "/file.txt", "/hello", "/hello", "/index.html", "/sub/index.html",
             "/index.html", "/file.txt", "/file.txt", "/hello", "/sub/index.html", "/hello"]
    c = server.conn()
    for target in order:
        for method in ("GET", "HEAD"):
            c.send(request(method, target))
            r = c.read_response(head_request=method == "HEAD")
            ctype, body = want[target]
            assert r.status == 200, target
            assert r.header("Content-Type").startswith(ctype), (target, r.header("Content-Type"))
            assert r.header("Content-Length") == str(len(body)), (method, target)
            if method == "GET":
                assert r.body == body, target
    c.close()
