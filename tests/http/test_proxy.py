"""The reverse proxy (README, "Reverse proxy"): colibri in front of real
upstreams started by the tests: upstream.py (a small raw-socket HTTP/1.1
server written for these tests, on loopback) and a second colibri.

Every upstream counts the connections it accepted and the requests it got
(/_stats), which proves connection reuse, retries and balancing. Every wait
is bounded; everything stays on loopback."""

import contextlib
import hashlib
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import colibri_bin, free_port
from rawhttp import TIME_SCALE, RawConn, exchange, recv_all, recv_until
from test_config_errors import check, failed, listener, run_config
from wsclient import TEXT, BINARY, WS

HERE = Path(__file__).resolve().parent


class Upstream:
    def __init__(self, tmp_path, name, port=None, unix=None):
        self.name = name
        self.port = port or free_port()
        self.unix = unix
        args = [sys.executable, str(HERE / "upstream.py"), "--name", name]
        args += ["--unix", unix] if unix else ["--port", str(self.port)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline()
        assert line.strip() == b"ready", line

    @property
    def addr(self):
        return "unix:%s" % self.unix if self.unix else "127.0.0.1:%d" % self.port

    def stats(self):
        if self.unix:
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.unix)
            s.sendall(b"GET /_stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = recv_all(s)
            s.close()
            return json.loads(data.split(b"\r\n\r\n", 1)[1])
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        c.request("GET", "/_stats")
        st = json.loads(c.getresponse().read())
        c.close()
        # the stats request's own connection
        st["connections"] -= 1
        return st

    def hits(self, path):
        return self.stats()["hits"].get(path, 0)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def upstreams(tmp_path):
    made = []

    def make(name="A", **kw):
        u = Upstream(tmp_path, name, **kw)
        made.append(u)
        return u

    yield make
    for u in made:
        u.kill()


def get(srv, path, method="GET", body=None, headers=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r, data


def proxy_site(routes, upstream_blocks=""):
    return upstream_blocks + "site {\n" + routes + "}\n"


def one_proxy(to, prefix="/api", **keys):
    body = "    proxy %s {\n        to = %s\n" % (prefix, to)
    for k, v in keys.items():
        body += "        %s = %s\n" % (k, v)
    return body + "    }\n"


# --- answers ----------------------------------------------------------------


def test_statuses_and_bodies_pass_through(make_server, upstreams):
    up = upstreams()
    # one worker: one pool, so the fds it ends with do not depend on which
    # worker accepted (tests/fault judges them)
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")), threads="1")
    r, body = get(srv, "/api/echo?x=1")
    assert r.status == 200
    j = json.loads(body)
    assert j["target"] == "/echo?x=1" and j["method"] == "GET"
    for st in (404, 500, 503, 201):
        r, body = get(srv, "/api/status/%d" % st)
        assert r.status == st
        # the upstream's body, not colibri's error page
        assert body == b"status %d from A" % st
        assert r.getheader("X-Upstream") == "A"
    r, body = get(srv, "/api/status/204")
    assert r.status == 204 and body == b"" and r.getheader("Content-Length") is None
    r, body = get(srv, "/api/status/304")
    assert r.status == 304 and body == b""
    r, body = get(srv, "/api/echo", method="HEAD")
    assert r.status == 200 and body == b"" and int(r.getheader("Content-Length")) > 0


def test_request_head_rewriting(make_server, upstreams):
    up = upstreams()
    srv = make_server(
        site=proxy_site(one_proxy("http://" + up.addr) + one_proxy("http://" + up.addr, prefix="/keep", preserve_host="true"))
    )
    raw = (
        b"GET /api/echo HTTP/1.1\r\nHost: front.example\r\nConnection: X-Secret, keep-alive\r\n"
        b"X-Secret: s\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nProxy: http://evil:1\r\n"
        b"Proxy-Authorization: Basic x\r\nX-Forwarded-For: 203.0.113.7\r\nForwarded: for=203.0.113.7\r\n"
        b"X-Forwarded-Proto: https\r\nX-End: e2e\r\n\r\n"
    )
    with RawConn("127.0.0.1", srv.port) as c:
        c.send(raw)
        r = c.read_response()
    assert r.status == 200
    hs = json.loads(r.body)["headers"]
    names = [k.lower() for k, v in hs]
    h = {k.lower(): v for k, v in hs}
    for gone in ("x-secret", "keep-alive", "te", "proxy", "proxy-authorization"):
        assert gone not in names, (gone, hs)
    assert names.count("host") == 1 and h["host"] == up.addr
    assert h["x-end"] == "e2e"
    assert h["x-forwarded-for"] == "203.0.113.7, 127.0.0.1"
    assert h["x-forwarded-proto"] == "http"  # ours, not the client's
    assert h["x-forwarded-host"] == "front.example"
    assert h["forwarded"] == "for=203.0.113.7, for=127.0.0.1;host=front.example;proto=http"
    assert h["connection"] == "keep-alive"
    r, body = get(srv, "/keep/echo", headers={"Host": "mine.example"})
    h = {k.lower(): v for k, v in json.loads(body)["headers"]}
    assert h["host"] == "mine.example"
    # strip_prefix = false (the default): the whole target goes upstream
    assert json.loads(body)["target"] == "/keep/echo"


def test_response_head_rewriting(make_server, upstreams):
    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")))
    with RawConn("127.0.0.1", srv.port) as c:
        c.send(b"GET /api/headers HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
    assert r.status == 200 and r.body == b"h"
    assert r.header("X-Drop-Me") is None and r.header("Keep-Alive") is None
    assert r.header("X-Keep") == "yes"
    assert r.header("Server") == "colibri"
    assert r.header_all("Set-Cookie") == ["a=1", "b=2"]
    assert r.header("Content-Type") == "text/x-test"
    assert r.header("Date")
    assert "close" not in (r.header("Connection") or "")


def test_chunked_and_close_delimited_answers(make_server, upstreams):
    up = upstreams()
    # one worker, one request at a time: the pool ends with one upstream
    # connection whatever the timing (tests/fault counts the server's fds)
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")), threads="1")
    with RawConn("127.0.0.1", srv.port) as c:
        c.send(b"GET /api/chunked?n=4&size=3000 HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.header("Transfer-Encoding") == "chunked"
        assert r.body == b"c" * 12000
        # the connection goes on: the upstream's framing became ours
        c.send(b"GET /api/close?size=7000 HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.header("Transfer-Encoding") == "chunked" and r.body == b"z" * 7000
        c.send(b"GET /api/echo HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.read_response().status == 200
    # HTTP/1.0: close-delimited (read to its end before anything else: a
    # request left in flight would have the next one take a second
    # upstream connection)
    head, body = exchange(srv.port, b"GET /api/chunked?n=2&size=10 HTTP/1.0\r\n\r\n")
    assert b"chunked" not in head.lower() and body == b"c" * 20


def test_upstream_interim_answers_dropped(make_server, upstreams):
    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")))
    with RawConn("127.0.0.1", srv.port) as c:
        c.send(b"GET /api/interim HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.body == b"final"


def test_server_sent_events_stream_without_delay(make_server, upstreams):
    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")))
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    t0 = time.monotonic()
    s.sendall(b"GET /api/sse HTTP/1.1\r\nHost: x\r\n\r\n")
    data = recv_until(s, lambda d: b"tick0" in d, 5)
    t_first = time.monotonic() - t0
    data += recv_until(s, lambda d: b"0\r\n\r\n" in data + d, 5)
    t_all = time.monotonic() - t0
    s.close()
    assert b"text/event-stream" in data and b"tick2" in data
    assert t_first < 0.3 and t_all > 0.8, (t_first, t_all)


def test_interim_100_continue(make_server, upstreams):
    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")))
    with RawConn("127.0.0.1", srv.port) as c:
        c.send(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        first = c.read_response()
        assert first.status == 100
        c.send(b"hello")
        r = c.read_response()
        assert r.status == 200 and json.loads(r.body)["body_len"] == 5


# --- bodies, memory ----------------------------------------------------------


def rss_kb(pid, key="VmHWM"):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def test_large_upload_and_download_bounded_memory(make_server, upstreams):
    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")), threads="1")
    get(srv, "/api/echo")
    base = rss_kb(srv.proc.pid, "VmRSS")
    size = 96 << 20
    piece = os.urandom(1 << 20)
    # a chunked upload, sent as it is made
    sha = hashlib.sha256()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    for i in range(size >> 20):
        s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
        sha.update(piece)
    s.sendall(b"0\r\n\r\n")
    f = s.makefile("rb")
    status = f.readline()
    assert b" 200 " in status
    length = 0
    while True:
        l = f.readline()
        if l.lower().startswith(b"content-length:"):
            length = int(l.split(b":")[1])
        if l == b"\r\n":
            break
    j = json.loads(f.read(length))
    assert j["body_len"] == size and j["body_sha256"] == sha.hexdigest()
    s.close()
    # an upload with a length
    r, body = get(srv, "/api/echo", method="PUT", body=piece * 32)
    assert json.loads(body)["body_len"] == 32 << 20
    # a download, read slowly at first (colibri must not buffer it)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(b"GET /api/big?size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % size)
    time.sleep(1.0)
    mid = rss_kb(srv.proc.pid, "VmRSS")
    got = 0
    buf = recv_until(s, lambda d: b"\r\n\r\n" in d, 10)
    s.settimeout(10)
    head, rest = buf.split(b"\r\n\r\n", 1)
    assert b"Content-Length: %d" % size in head
    got = len(rest)
    h = hashlib.sha256(rest)
    while got < size:
        b = s.recv(1 << 20)
        assert b
        got += len(b)
        h.update(b)
    s.close()
    want = hashlib.sha256()
    pat = bytes(range(256)) * 256
    for _ in range(size // len(pat)):
        want.update(pat)
    assert h.hexdigest() == want.hexdigest()
    peak = rss_kb(srv.proc.pid, "VmHWM")
    # 96 MiB went each way; the server grew by a few buffers at most
    assert peak - base < 24 * 1024, (base, mid, peak)


# --- connections -------------------------------------------------------------


def test_keepalive_reuse(make_server, upstreams):
    up = upstreams()
    srv = make_server(
        site=proxy_site(one_proxy("app", strip_prefix="true"), "upstream app {\n    server %s\n    keepalive = 4\n}\n" % up.addr),
        threads="1",
    )
    for i in range(20):
        r, body = get(srv, "/api/echo")  # a new client connection each time
        assert r.status == 200
    st = up.stats()
    assert st["requests"] == 20 and st["connections"] == 1, st


def test_keepalive_off(make_server, upstreams):
    up = upstreams()
    srv = make_server(
        site=proxy_site(one_proxy("app", strip_prefix="true"), "upstream app {\n    server %s\n    keepalive = 0\n}\n" % up.addr),
        threads="1",
    )
    for i in range(5):
        assert get(srv, "/api/echo")[0].status == 200
    assert up.stats()["connections"] == 5


def test_upstream_closing_a_kept_connection(make_server, upstreams):
    up = upstreams()
    srv = make_server(
        site=proxy_site(one_proxy("app", strip_prefix="true"), "upstream app {\n    server %s\n    max_fails = 1\n}\n" % up.addr),
        threads="1",
    )
    for i in range(5):
        r, body = get(srv, "/api/once")  # answers, then closes the kept connection
        assert r.status == 200 and body == b"once from A"
        time.sleep(0.15)
        r, body = get(srv, "/api/echo")  # finds the pooled one closed: a fresh one
        assert r.status == 200
    assert up.stats()["connections"] >= 6
    assert "marked down" not in srv.stderr() and "answered 502" not in srv.stderr()


def sockets_to(srv, port):
    """The server's TCP sockets whose peer is port (any state: a socket
    the upstream closed stays in CLOSE_WAIT until the server closes it)."""
    inodes = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = Path("/proc/net/" + name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[2].rsplit(":", 1)[1], 16) == port:
                inodes.add("socket:[%s]" % f[9])
    d = "/proc/%d/fd" % srv.proc.pid
    n = 0
    for fd in os.listdir(d):
        try:
            n += os.readlink(os.path.join(d, fd)) in inodes
        except OSError:
            pass
    return n


def no_sockets_to(srv, port, within):
    """Whether the server's sockets to port are all closed within the time given."""
    deadline = time.monotonic() + within
    while sockets_to(srv, port) and time.monotonic() < deadline:
        time.sleep(0.01)
    return sockets_to(srv, port) == 0


def test_pooled_connection_closed_by_the_upstream_is_closed_at_once(make_server, upstreams):
    # nginx's keepalive cache does the same: an idle pooled connection is
    # watched, and closed as soon as its upstream closes it
    up = upstreams()
    srv = make_server(
        site=proxy_site(one_proxy("app", strip_prefix="true"), "upstream app {\n    server %s\n    keepalive = 4\n}\n" % up.addr),
        threads="1",
    )
    for i in range(3):
        r, body = get(srv, "/api/echo")
        assert r.status == 200
        assert sockets_to(srv, up.port) == 1  # kept
        t0 = time.monotonic()
        r, body = get(srv, "/api/once")  # the upstream closes it 50 ms after answering
        assert r.status == 200 and body == b"once from A"
        # closed without waiting for a request to find it dead
        assert no_sockets_to(srv, up.port, 2.0 * TIME_SCALE), i
        assert time.monotonic() - t0 < 0.8 * TIME_SCALE  # at once: not at the tick a second later
    st = up.stats()
    assert st["connections"] == 3 and st["requests"] == 6, st
    assert "proxy:" not in srv.stderr(), srv.stderr()


def test_pooled_connection_sent_stray_bytes_is_closed(make_server, upstreams):
    up = upstreams()
    srv = make_server(
        site=proxy_site(one_proxy("app", strip_prefix="true"), "upstream app {\n    server %s\n}\n" % up.addr),
        threads="1",
    )
    t0 = time.monotonic()
    r, body = get(srv, "/api/stray?ms=300")
    assert r.status == 200 and body == b"stray"
    assert sockets_to(srv, up.port) == 1  # kept
    # 300 ms later the upstream sends an answer nobody asked for: the
    # connection is closed at once, not kept to mix it into a later answer
    assert no_sockets_to(srv, up.port, 3.0 * TIME_SCALE)
    assert time.monotonic() - t0 < 0.8 * TIME_SCALE  # at once: not at the tick a second later
    r, body = get(srv, "/api/echo")
    assert r.status == 200 and json.loads(body)["target"] == "/echo"
    assert up.stats()["connections"] == 2


def test_upstream_keepalive_timeout(make_server, upstreams):
    up = upstreams()
    srv = make_server(
        site=proxy_site(
            one_proxy("app", strip_prefix="true"),
            "upstream app {\n    server %s\n    keepalive_timeout = 300ms\n}\n" % up.addr,
        ),
        threads="1",
    )
    r, body = get(srv, "/api/echo")
    assert r.status == 200
    assert sockets_to(srv, up.port) == 1
    t0 = time.monotonic()
    # the worker's tick (once a second) closes it once it idled 300 ms
    assert no_sockets_to(srv, up.port, 3.0 * TIME_SCALE)
    assert time.monotonic() - t0 < 2.5 * TIME_SCALE
    assert get(srv, "/api/echo")[0].status == 200
    # two requests in quick succession share one connection
    assert get(srv, "/api/echo")[0].status == 200
    assert up.stats()["connections"] == 2


def test_a_kept_connection_lost_under_a_request(make_server, upstreams):
    # the upstream reads the request on a kept connection and closes it
    # without an answer (as when it closes an idle connection just as the
    # request comes, or dies on it): an idempotent request goes again on a
    # fresh connection; a POST is not sent twice (it may have been acted
    # on): 502, as nginx does; neither marks the server down
    up = upstreams()
    srv = make_server(
        site=proxy_site(one_proxy("app", strip_prefix="true"), "upstream app {\n    server %s\n    max_fails = 1\n}\n" % up.addr),
        threads="1",
    )
    r, body = get(srv, "/api/lost")  # a fresh connection: answered, then kept
    assert (r.status, body) == (200, b"GET from A")
    r, body = get(srv, "/api/lost", method="DELETE")
    assert (r.status, body) == (200, b"DELETE from A")
    assert up.hits("/lost") == 3  # once lost on the kept connection, once fresh
    r, body = get(srv, "/api/lost", method="POST")
    assert r.status == 502
    assert up.hits("/lost") == 4  # not sent again
    assert "not idempotent" in srv.stderr()
    # the server is not marked down: the next request is answered
    r, body = get(srv, "/api/lost", method="POST")
    assert (r.status, body) == (200, b"POST from A")
    assert "marked down" not in srv.stderr()


def test_a_post_never_meets_a_closed_kept_connection(make_server, upstreams):
    up = upstreams()
    srv = make_server(
        site=proxy_site(one_proxy("app", strip_prefix="true"), "upstream app {\n    server %s\n}\n" % up.addr),
        threads="1",
    )
    for i in range(5):
        assert get(srv, "/api/once")[0].status == 200
        # the upstream closes it 50 ms after answering (well before the
        # POST: a close just as the POST goes is the race nobody can win,
        # test_a_kept_connection_lost_under_a_request)
        time.sleep(0.3)
        # closed by the watch, or found closed by the peek a POST pays
        r, body = get(srv, "/api/echo", method="POST", body=b"x" * i)
        assert r.status == 200 and json.loads(body)["body_len"] == i, (i, srv.stderr())
    assert "proxy:" not in srv.stderr(), srv.stderr()


@pytest.mark.parametrize("buffered", [False, True])
def test_buffer_response(make_server, upstreams, buffered):
    up = upstreams()
    srv = make_server(
        site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true", buffer_response=str(buffered).lower())),
        threads="1",
    )
    size = 4 << 20
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
    s.settimeout(10)
    s.connect(("127.0.0.1", srv.port))
    s.sendall(b"GET /api/big?size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % size)
    time.sleep(0.5)  # the client reads nothing yet
    assert get(srv, "/api/echo")[0].status == 200
    # buffered: the first answer was read whole and its connection went back to the pool
    assert up.stats()["connections"] == (1 if buffered else 2)
    got = 0
    while got < size:
        b = s.recv(1 << 20)
        assert b
        got += len(b)
    s.close()


def test_a_client_that_stops_reading_frees_the_upstream(make_server, upstreams):
    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")), request_timeout="1s")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.port))
    s.sendall(b"GET /api/big?size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % (64 << 20))

    def upstream_conns():
        out = subprocess.run(["ss", "-tnH", "state", "established", "( dport = :%d )" % up.port],
                             capture_output=True, text=True).stdout
        return len(out.splitlines())

    time.sleep(0.5)
    assert upstream_conns() == 1
    deadline = time.monotonic() + 6
    while upstream_conns() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert upstream_conns() == 0  # closed with the client, not pooled
    s.close()
    assert get(srv, "/api/echo")[0].status == 200


def upstream_conns(port):
    """The established connections to the upstream's port (colibri's side)."""
    out = subprocess.run(["ss", "-tnH", "state", "established", "( dport = :%d )" % port],
                         capture_output=True, text=True).stdout
    return len(out.splitlines())


def test_a_client_that_stops_reading_is_cut_after_send_timeout(make_server, upstreams, tmp_path):
    """send_timeout bounds each write of the answer to the client too: a
    client that takes nothing for it ends the request long before
    request_timeout, the upstream connection is closed (not pooled), and
    the access log has the line of an interrupted answer."""
    from test_logs import LINE, wait_lines

    up = upstreams()
    log = tmp_path / "access.log"
    size = 64 << 20
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true", send_timeout="1s")),
                      request_timeout="30s", access_log=str(log))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.port))
    t0 = time.monotonic()
    s.sendall(b"GET /api/big?size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % size)
    time.sleep(0.5)
    assert upstream_conns(up.port) == 1
    deadline = t0 + 3 * TIME_SCALE
    while upstream_conns(up.port) and time.monotonic() < deadline:
        time.sleep(0.05)
    took = time.monotonic() - t0
    assert upstream_conns(up.port) == 0, took  # closed with the client, not pooled
    assert took >= 0.9, took  # not before send_timeout
    lines = [l for l in wait_lines(log, 1, 4.0 * TIME_SCALE) if "GET /api/big" in l]
    assert len(lines) == 1, lines
    x = LINE.match(lines[0])
    assert x and x["status"] == "200" and 0 < int(x["bytes"]) < size // 4, lines
    s.close()
    # the server goes on: a fresh upstream connection for the next request
    assert get(srv, "/api/echo")[0].status == 200


def test_a_slow_reader_that_keeps_reading_is_not_cut(make_server, upstreams):
    """send_timeout bounds each wait, not the answer: a client that pauses
    under it between reads gets the whole answer, however long it takes."""
    up = upstreams()
    size = 4 << 20
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true", send_timeout="1s")),
                      request_timeout="30s")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10 * TIME_SCALE)
    s.connect(("127.0.0.1", srv.port))
    s.sendall(b"GET /api/big?size=%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % size)
    data = bytearray()
    t0 = time.monotonic()
    for pause in range(4):  # 2.4 s of pauses in all, none of them 1 s
        time.sleep(0.6)
        got = 0
        while got < (512 << 10):
            b = s.recv(65536)
            if not b:
                break
            data += b
            got += len(b)
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        data += b
    s.close()
    assert time.monotonic() - t0 > 2.0
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    assert b"Content-Length: %d" % size in head
    assert len(body) == size and body == bytes(range(256)) * (size // 256)


def test_unix_socket_upstream(make_server, upstreams, tmp_path):
    up = upstreams(unix=str(tmp_path / "up.sock"))
    srv = make_server(site=proxy_site(one_proxy(up.addr, strip_prefix="true")))
    r, body = get(srv, "/api/echo")
    assert r.status == 200 and json.loads(body)["headers"][0] == ["Host", "localhost"]


# --- failures ----------------------------------------------------------------


def test_slow_upstream_gives_504(make_server, upstreams):
    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true", read_timeout="500ms")))
    t = time.monotonic()
    r, body = get(srv, "/api/slow?ms=3000")
    assert r.status == 504 and time.monotonic() - t < 2.5
    assert re.search(r"upstream 127\.0\.0\.1:%d: timed out" % up.port, srv.stderr())


def test_connect_refused_gives_502(make_server):
    port = free_port()
    srv = make_server(site=proxy_site(one_proxy("127.0.0.1:%d" % port)))
    r, body = get(srv, "/api/x")
    assert r.status == 502
    assert "upstream 127.0.0.1:%d: connect: Connection refused" % port in srv.stderr()


def test_invalid_answer_gives_502(make_server):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    port = ls.getsockname()[1]

    def bad():
        c, _ = ls.accept()
        c.recv(65536)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")
        time.sleep(0.5)
        c.close()

    t = threading.Thread(target=bad, daemon=True)
    t.start()
    srv = make_server(site=proxy_site(one_proxy("127.0.0.1:%d" % port, retries="0")))
    r, body = get(srv, "/api/x")
    assert r.status == 502
    assert "upstream 127.0.0.1:%d: invalid response" % port in srv.stderr()
    t.join(2)
    ls.close()


def test_retries_never_repeat_a_post(make_server, upstreams):
    a, b = upstreams("A"), upstreams("B")
    srv = make_server(
        site=proxy_site(
            one_proxy("app", strip_prefix="true", retries="2"),
            "upstream app {\n    server %s\n    server %s\n    max_fails = 0\n}\n" % (a.addr, b.addr),
        ),
        threads="1",
    )
    r, body = get(srv, "/api/status/503", method="POST", body=b"x")
    assert r.status == 503
    assert a.hits("/status/503") + b.hits("/status/503") == 1
    # a GET is tried on the other server
    r, body = get(srv, "/api/status/503")
    assert r.status == 503
    assert a.hits("/status/503") + b.hits("/status/503") == 3
    assert a.hits("/status/503") >= 1 and b.hits("/status/503") >= 1


def test_connect_error_retried_on_another_server(make_server, upstreams):
    b = upstreams("B")
    dead = free_port()
    srv = make_server(
        site=proxy_site(one_proxy("app", strip_prefix="true"), "upstream app {\n    server 127.0.0.1:%d\n    server %s\n}\n" % (dead, b.addr)),
        threads="1",
    )
    for i in range(4):
        r, body = get(srv, "/api/echo", method="POST", body=b"data")
        assert r.status == 200 and json.loads(body)["name"] == "B"
        assert json.loads(body)["body_len"] == 4


def test_backup_server(make_server, upstreams):
    a, bk = upstreams("A"), upstreams("BK")
    conf = "upstream app {\n    server %s\n    server %s { backup = true }\n    fail_timeout = 30s\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), conf % (a.addr, bk.addr)), threads="1")
    for i in range(6):
        assert json.loads(get(srv, "/api/echo")[1])["name"] == "A"
    a.kill()
    for i in range(4):
        r, body = get(srv, "/api/echo")
        assert r.status == 200 and json.loads(body)["name"] == "BK"


def test_weights(make_server, upstreams):
    a, b = upstreams("A"), upstreams("B")
    conf = "upstream app {\n    server %s\n    server %s { weight = 3 }\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), conf % (a.addr, b.addr)), threads="1")
    names = [json.loads(get(srv, "/api/echo")[1])["name"] for _ in range(40)]
    assert names.count("A") == 10 and names.count("B") == 30


def test_hash_balance_is_sticky(make_server, upstreams):
    a, b = upstreams("A"), upstreams("B")
    conf = "upstream app {\n    server %s\n    server %s\n    balance = hash\n    hash_key = header:X-User\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), conf % (a.addr, b.addr)))
    seen = {}
    for i in range(40):
        user = "user%d" % (i % 8)
        name = json.loads(get(srv, "/api/echo", headers={"X-User": user})[1])["name"]
        assert seen.setdefault(user, name) == name
    assert set(seen.values()) == {"A", "B"}


def test_least_conn(make_server, upstreams):
    a, b = upstreams("A"), upstreams("B")
    conf = "upstream app {\n    server %s\n    server %s\n    balance = least_conn\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), conf % (a.addr, b.addr)), threads="1")
    # one slow request holds a server: the next ones go to the other
    t = threading.Thread(target=get, args=(srv, "/api/slow?ms=1500"), daemon=True)
    t.start()
    time.sleep(0.3)
    slow_on = "A" if a.hits("/slow") else "B"
    names = [json.loads(get(srv, "/api/echo")[1])["name"] for _ in range(6)]
    assert slow_on not in names
    t.join(5)


def test_all_servers_down_gives_502_at_once(make_server):
    p1, p2 = free_port(), free_port()
    conf = "upstream app {\n    server 127.0.0.1:%d\n    server 127.0.0.1:%d\n    fail_timeout = 30s\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app"), conf % (p1, p2)), threads="1")
    assert get(srv, "/api/x")[0].status == 502
    t = time.monotonic()
    for i in range(5):
        assert get(srv, "/api/x")[0].status == 502
    assert time.monotonic() - t < 1.0
    assert "upstream app: no server is up" in srv.stderr()


def test_active_health_check(make_server, upstreams):
    a, b = upstreams("A"), upstreams("B")
    conf = "upstream app {\n    server %s\n    server %s\n    health_check = /healthz\n    health_interval = 200ms\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), conf % (a.addr, b.addr)))

    def names(n=8):
        return {json.loads(get(srv, "/api/echo")[1])["name"] for _ in range(n)}

    assert names() == {"A", "B"}
    checks = a.hits("/healthz")
    time.sleep(0.7)
    # one thread per upstream checks each server every 200 ms (not one per worker)
    assert 2 <= a.hits("/healthz") - checks <= 6
    urlopen_code(a, "/_health?code=500")
    time.sleep(0.6)
    assert names() == {"B"}
    assert "server %s is down (health check /healthz: answered 500)" % a.addr in srv.stderr()
    urlopen_code(a, "/_health?code=200")
    time.sleep(0.6)
    assert names() == {"A", "B"}
    # every server down by its check: 502 at once
    urlopen_code(a, "/_health?code=503")
    urlopen_code(b, "/_health?code=503")
    time.sleep(0.6)
    t = time.monotonic()
    assert get(srv, "/api/echo")[0].status == 502
    assert time.monotonic() - t < 0.5


def test_health_checks_run_only_for_a_serving_config(make_server, upstreams, tmp_path):
    """--check-config starts no health check (nothing connects, nothing is
    logged); the same config, served, checks at once."""
    a = upstreams("A")
    text = (listener() + "upstream app {\n    server %s\n    server 127.0.0.1:%d\n    health_check = /healthz\n"
            "    health_interval = 100ms\n}\n" % (a.addr, free_port())
            + proxy_site(one_proxy("app", strip_prefix="true")))
    conf = tmp_path / "checked.conf"
    conf.write_text(text)
    p = subprocess.run([str(colibri_bin()), "--check-config", "-c", str(conf)], capture_output=True, timeout=30)
    assert p.returncode == 0 and p.stdout.decode().strip() == "%s: ok" % conf, p
    assert p.stderr == b"", p.stderr
    time.sleep(0.3)
    assert a.hits("/healthz") == 0
    from test_reload import reload

    # served: the check runs at once; a reload's new group checks too
    group = "upstream app {\n    server %s\n    health_check = %s\n    health_interval = 100ms\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), group % (a.addr, "/healthz")))
    for path in ("/healthz", "/after-reload"):
        if path != "/healthz":
            reload(srv, srv.config.read_text().replace("/healthz", path))
        deadline = time.monotonic() + 5 * TIME_SCALE
        while a.hits(path) == 0:
            assert time.monotonic() < deadline, srv.stderr()
            time.sleep(0.05)


def urlopen_code(up, path):
    c = http.client.HTTPConnection("127.0.0.1", up.port, timeout=5)
    c.request("GET", path)
    c.getresponse().read()
    c.close()


def test_upstream_killed_mid_response(make_server, upstreams):
    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")))
    # with a length: fewer bytes, then the close
    head, body = exchange(srv.port, b"GET /api/die?size=100000&after=1000 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b"Content-Length: 100000" in head
    assert body == b"d" * 1000  # cut, never padded or completed
    # chunked: the last chunk never comes
    head, body = exchange(srv.port, b"GET /api/diechunked HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b"chunked" in head and body == b"5\r\nhello\r\n"
    assert "is cut short" in srv.stderr()


# --- connect timeout, passive health, hashing by the client's address ----------


@contextlib.contextmanager
def unaccepting_port():
    """A loopback port that never accepts: a listening socket with backlog 0
    whose accept queue is filled first, so that the kernel drops the SYNs
    of every later connect (which then waits: a connect timeout). Checked
    before use: a probe's connect must time out."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(0)
    port = ls.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            f = socket.socket()
            f.setblocking(False)
            try:
                f.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fillers.append(f)
        time.sleep(0.1)
        probe = socket.socket()
        probe.settimeout(0.5)
        try:
            probe.connect(("127.0.0.1", port))
            pytest.fail("the filled accept queue still took a connection")
        except socket.timeout:
            pass
        finally:
            probe.close()
        yield port
    finally:
        for f in fillers:
            f.close()
        ls.close()


def connect_times_out(srv, path, kind, port):
    """A request to a route whose upstream never accepts (connect_timeout
    500ms): 504 after about the timeout, and the error log says why."""
    t = time.monotonic()
    r, body = get(srv, path, timeout=10 * TIME_SCALE)
    took = time.monotonic() - t
    assert r.status == 504, (r.status, body)
    assert 0.45 <= took < 2 * TIME_SCALE, took
    assert "%s: upstream 127.0.0.1:%d: connect: timed out" % (kind, port) in srv.stderr()


def test_connect_timeout_gives_504(make_server):
    with unaccepting_port() as port:
        srv = make_server(site=proxy_site(one_proxy("http://127.0.0.1:%d" % port, connect_timeout="500ms")))
        connect_times_out(srv, "/api/x", "proxy", port)


def log_count(srv, text):
    return srv.stderr().count(text)


def test_passive_health_marks_a_failing_server_down_for_fail_timeout(make_server, upstreams):
    b = upstreams("B")
    dead = free_port()
    fail_ms = int(1000 * TIME_SCALE)
    conf = "upstream app {\n    server 127.0.0.1:%d\n    server %s\n    max_fails = 2\n    fail_timeout = %dms\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), conf % (dead, b.addr, fail_ms)),
                      threads="1")
    refused = "proxy: upstream 127.0.0.1:%d: connect: Connection refused" % dead
    marked = "upstream app: server 127.0.0.1:%d marked down for %d ms (2 failures)" % (dead, fail_ms)

    def names(n):
        out = []
        for _ in range(n):
            r, body = get(srv, "/api/echo")
            assert r.status == 200  # the refused attempts were retried on B
            out.append(json.loads(body)["name"])
        return out

    # round robin: every other request tries the dead server first
    for i in range(6):
        names(1)
        if marked in srv.stderr():
            break
    assert marked in srv.stderr(), srv.stderr()
    assert log_count(srv, refused) == 2  # one failure is not enough: max_fails = 2
    # down: every request goes to B at once, none tries the dead server
    t_down = time.monotonic()
    hits = b.hits("/echo")
    assert names(6) == ["B"] * 6
    assert b.hits("/echo") - hits == 6
    assert log_count(srv, refused) == 2
    assert time.monotonic() - t_down < fail_ms / 1000.0  # all of it within the mark
    # after fail_timeout it is tried again (and fails again: retried on B)
    time.sleep(fail_ms / 1000.0 + 0.2)
    for i in range(2):
        if log_count(srv, refused) > 2:
            break
        assert names(1) == ["B"]
    assert log_count(srv, refused) == 3


def test_a_single_server_is_never_marked_down(make_server, upstreams):
    """README: a group of one server is never marked down, there is nowhere
    else to go: a lone `to` server (or a group of one) that failed is tried
    again at the next request, is not logged as marked down, and the
    metrics show it up."""
    from test_metrics import sample

    port = free_port()
    routes = (one_proxy("http://127.0.0.1:%d" % port, strip_prefix="true")
              + one_proxy("one", prefix="/grp", strip_prefix="true")
              + "    metrics /metrics {\n        allow = 127.0.0.1/8\n    }\n")
    conf = "upstream one {\n    server 127.0.0.1:%d\n    max_fails = 1\n    fail_timeout = 30s\n}\n" % port
    srv = make_server(site=proxy_site(routes, conf), threads="1")
    for path in ("/api/echo", "/grp/echo", "/api/echo", "/grp/echo"):
        assert get(srv, path)[0].status == 502
    assert log_count(srv, "connect: Connection refused") == 4  # each request tried it
    assert "marked down" not in srv.stderr(), srv.stderr()
    text = get(srv, "/metrics")[1].decode()
    assert sample(text, "colibri_upstream_up", '{upstream="one",server="127.0.0.1:%d"}' % port) == 1
    assert sample(text, "colibri_upstream_up", '{upstream="http://127.0.0.1:%d",server="127.0.0.1:%d"}' % (port, port)) == 1
    assert sample(text, "colibri_upstream_failures_total", '{upstream="one",server="127.0.0.1:%d"}' % port) == 2
    # the server comes: served at once, not after fail_timeout
    upstreams("A", port=port)
    for path in ("/api/echo", "/grp/echo"):
        r, body = get(srv, path)
        assert r.status == 200 and json.loads(body)["name"] == "A"


def get_from(srv, path, source):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10, source_address=(source, 0))
    c.request("GET", path)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r, data


def test_hash_balance_by_client_address(make_server, upstreams):
    """balance = hash without hash_key: the client's address picks the
    server (rendezvous hashing): every request of one address goes to the
    same server, and when a server goes down only the addresses that were
    on it move."""
    ups = {n: upstreams(n) for n in "ABC"}
    conf = "upstream app {\n" + "".join("    server %s\n" % u.addr for u in ups.values())
    conf += "    balance = hash\n    fail_timeout = 30s\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), conf))
    clients = ["127.0.0.%d" % i for i in range(2, 26)]
    where = {}
    for rnd in range(3):
        for a in clients:
            r, body = get_from(srv, "/api/echo", a)
            j = json.loads(body)
            assert r.status == 200
            assert dict((k.lower(), v) for k, v in j["headers"])["x-forwarded-for"] == a
            assert where.setdefault(a, j["name"]) == j["name"], (a, rnd)
    assert set(where.values()) == {"A", "B", "C"}, where
    # the server with the most clients goes down
    gone = max("ABC", key=lambda n: list(where.values()).count(n))
    ups[gone].kill()
    for rnd in range(2):
        moved = {}
        for a in clients:
            r, body = get_from(srv, "/api/echo", a)
            assert r.status == 200
            name = json.loads(body)["name"]
            if where[a] == gone:
                assert name != gone
                assert moved.setdefault(a, name) == name
            else:
                assert name == where[a], (a, where[a], name)  # only the gone server's clients move
    assert "marked down" in srv.stderr()


# --- the PROXY protocol's client address upstream --------------------------------


def test_forwarded_fields_carry_the_proxy_protocol_address(make_server, upstreams):
    from test_proxy_protocol import v1, v2

    up = upstreams()
    pp = free_port()
    listener_pp = "listener 127.0.0.1:%d {\n    proxy_protocol = true\n}\n" % pp
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true"), listener_pp))
    cases = [
        (v1(src="203.0.113.9", dport=pp), "203.0.113.9", "for=203.0.113.9"),
        (v2(src="2001:db8::7", dst="2001:db8::1", dport=pp), "2001:db8::7", 'for="[2001:db8::7]"'),
    ]
    for hdr, xff, fwd in cases:
        with RawConn("127.0.0.1", pp) as c:
            c.send(hdr + b"GET /api/echo HTTP/1.1\r\nHost: front.example\r\nX-Forwarded-For: 198.51.100.1\r\n\r\n")
            r = c.read_response()
            assert r.status == 200
            h = {k.lower(): v for k, v in json.loads(r.body)["headers"]}
            assert h["x-forwarded-for"] == "198.51.100.1, " + xff
            assert h["forwarded"] == fwd + ";host=front.example;proto=http"
            # the same connection's next request too
            c.send(b"GET /api/echo HTTP/1.1\r\nHost: front.example\r\n\r\n")
            h = {k.lower(): v for k, v in json.loads(c.read_response().body)["headers"]}
            assert h["x-forwarded-for"] == xff
    # the plain listener: the socket's address
    r, body = get(srv, "/api/echo")
    h = {k.lower(): v for k, v in json.loads(body)["headers"]}
    assert h["x-forwarded-for"] == "127.0.0.1" and h["forwarded"].startswith("for=127.0.0.1;")


# --- over HTTP/2 -------------------------------------------------------------------


def test_uploads_over_h2c(make_server, upstreams):
    """A 3 MiB upload through the proxy over h2c (flow control at work), with
    content-length and without (it goes up chunked): the upstream reads it
    whole and intact."""
    from test_http2 import H2

    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")), max_request_body="8M")
    data = os.urandom(3 << 20)
    c = H2(srv, timeout=30)
    try:
        for with_length in (True, False):
            hdrs = [("content-type", "application/octet-stream")]
            if with_length:
                hdrs.append(("content-length", str(len(data))))
            sid = c.request("/api/echo", method="POST", body=data, headers=hdrs)
            st, = c.wait(sid, timeout=30)
            assert st["headers"][":status"] == "200", st
            j = json.loads(bytes(st["data"]))
            assert j["body_len"] == len(data) and j["body_sha256"] == hashlib.sha256(data).hexdigest()
            h = {k.lower(): v for k, v in j["headers"]}
            if with_length:
                assert h["content-length"] == str(len(data)) and "transfer-encoding" not in h
            else:
                assert h["transfer-encoding"] == "chunked" and "content-length" not in h
    finally:
        c.close()


# --- other upstreams -----------------------------------------------------------


def test_colibri_as_upstream(make_server):
    back = make_server()
    front = make_server(site=proxy_site(one_proxy("http://127.0.0.1:%d" % back.port, prefix="/")))
    r, body = get(front, "/hello")
    assert r.status == 200 and body == b"Hello, World!"
    r, body = get(front, "/file.txt")
    assert r.status == 200 and body == b"hello from a file\n"
    r, body = get(front, "/nothing-here")
    assert r.status == 404
    r, body = get(front, "/echo", method="POST", body=b"abc" * 1000)
    assert r.status == 200


def gunicorn_available():
    r = subprocess.run([sys.executable, "-c", "import gunicorn"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not gunicorn_available(), reason="gunicorn (tests/requirements.txt) is not installed")
def test_gunicorn_as_upstream(make_server):
    port = free_port()
    g = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", "2", "-b", "127.0.0.1:%d" % port, "--chdir", str(HERE), "wsgi_app:app"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        srv = make_server(site=proxy_site(one_proxy("http://127.0.0.1:%d" % port, prefix="/app", strip_prefix="true")),
                          max_request_body="20M")
        r, body = get(srv, "/app/info?x=1", headers={"Proxy": "http://evil"})
        j = json.loads(body)
        assert r.status == 200 and j["path"] == "/info" and j["query"] == "x=1"
        assert j["host"] == "127.0.0.1:%d" % port and j["xff"] == "127.0.0.1" and j["proxy"] is None
        data = os.urandom(5 << 20)
        r, body = get(srv, "/app/upload", method="POST", body=data)
        assert json.loads(body) == {"len": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        r, body = get(srv, "/app/stream")
        assert r.status == 200 and body == b"piece0\npiece1\npiece2\n"
    finally:
        g.terminate()
        g.wait(10)


def test_websocket_through_the_proxy(make_server, upstreams):
    up = upstreams()
    srv = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true", read_timeout="2s")))
    ws = WS("127.0.0.1", srv.port, path="/api/ws")
    assert ws.status == 101 and ws.headers["upgrade"] == "websocket"
    for msg in (b"hello", b"x" * 70000):
        ws.send_frame(BINARY, msg)
        op, data = ws.recv_message()
        assert data == msg
    ws.send_frame(TEXT, "é".encode())
    assert ws.recv_message()[1] == "é".encode()
    ws.close()
    # the tunnel ends after read_timeout of silence: the client sees the close
    ws = WS("127.0.0.1", srv.port, path="/api/ws")
    t = time.monotonic()
    ws.sock.settimeout(6)
    assert ws.sock.recv(10) == b""
    assert 1.5 < time.monotonic() - t < 5
    ws.close()
    # off: the Upgrade is not passed on, and a 101 the upstream sends anyway is refused
    srv2 = make_server(site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true", websocket="false",
                                                 read_timeout="2s")), threads="1")
    ws = WS("127.0.0.1", srv2.port, path="/api/ws")
    assert ws.status == 502
    ws.close()
    # that upstream connection was closed, never pooled: the next request gets its own answer
    r, body = get(srv2, "/api/echo")
    assert r.status == 200 and json.loads(body)["target"] == "/echo"


def test_log_fields(make_server, upstreams, tmp_path):
    up = upstreams()
    log = tmp_path / "access.log"
    srv = make_server(
        site=proxy_site(one_proxy("http://" + up.addr, strip_prefix="true")),
        access_log=str(log),
        log_format='"$status $upstream_addr $upstream_response_time_ms"',
    )
    get(srv, "/api/slow?ms=200")
    srv.stop()
    line = log.read_text().strip().splitlines()[-1]
    st, addr, ms = line.split()
    assert st == "200" and addr == up.addr and 150 <= int(ms) < 3000


def test_under_the_sandbox(make_server, upstreams, tmp_path):
    a = upstreams("A")
    u = upstreams("U", unix=str(tmp_path / "u.sock"))
    conf = "upstream app {\n    server %s\n    health_check = /healthz\n    health_interval = 200ms\n}\n" % a.addr
    srv = make_server(
        site=proxy_site(one_proxy("app", strip_prefix="true") + one_proxy(u.addr, prefix="/u", strip_prefix="true"), conf),
        sandbox="true",
    )
    deadline = time.monotonic() + 5
    while "sandbox: on" not in srv.stderr() and time.monotonic() < deadline:
        time.sleep(0.05)
    for path, name in (("/api/echo", "A"), ("/u/echo", "U")):
        r, body = get(srv, path)
        assert r.status == 200 and json.loads(body)["name"] == name
    checks = a.hits("/healthz")
    time.sleep(0.5)
    assert a.hits("/healthz") > checks  # the check's thread connects too
    assert "refused" not in srv.stderr()


def test_reload_switches_upstreams(make_server, upstreams):
    from test_reload import reload

    a, b = upstreams("A"), upstreams("B")
    conf = "upstream app {\n    server %s\n}\n"
    # (the sandbox, which cannot widen at a reload, is tested below)
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), conf % a.addr), threads="1",
                      sandbox="false")
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    c.request("GET", "/api/echo")
    assert json.loads(c.getresponse().read())["name"] == "A"
    # a request in flight finishes on the old generation's upstream
    slow = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    slow.request("GET", "/api/slow?ms=800")
    time.sleep(0.2)
    text = srv.config.read_text().replace(a.addr, b.addr)
    reload(srv, text)
    r = slow.getresponse()
    assert r.status == 200 and r.read() == b"slow"
    for i in range(3):
        assert json.loads(get(srv, "/api/echo")[1])["name"] == "B"
    # the old pool's idle connection is closed when the old config retires
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        out = subprocess.run(["ss", "-tn", "state", "established", "( dport = :%d )" % a.port],
                             capture_output=True, text=True).stdout
        if str(a.port) not in out:
            break
        time.sleep(0.1)
    assert str(a.port) not in out, out
    c.close()
    slow.close()


def test_reload_cannot_widen_the_sandbox(make_server, upstreams):
    from test_reload import reload

    a, b = upstreams("A"), upstreams("B")
    conf = "upstream app {\n    server %s\n}\n"
    srv = make_server(site=proxy_site(one_proxy("app", strip_prefix="true"), conf % a.addr), sandbox="true")
    deadline = time.monotonic() + 5
    while "sandbox: on" not in srv.stderr() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = reload(srv, srv.config.read_text().replace(a.addr, b.addr), ok=False)
    assert "the sandbox was closed without connections to this address family or port" in log
    assert json.loads(get(srv, "/api/echo")[1])["name"] == "A"  # the old config serves


# --- config --------------------------------------------------------------------


@pytest.mark.parametrize(
    "block, line, key, words",
    [
        ("upstream app {\n    server nowhere\n}\n", 2, "server", ["not an address"]),
        ("upstream app {\n    server 127.0.0.1:1 { weight = 0 }\n}\n", 2, "weight", []),
        ("upstream app {\n    server 127.0.0.1:1 { backup = maybe }\n}\n", 2, "backup", []),
        ("upstream app {\n    server 127.0.0.1:1\n    balance = random\n}\n", 3, "balance", ["round_robin"]),
        ("upstream app {\n    server 127.0.0.1:1\n    hash_key = header:X\n}\n", 3, "hash_key", ["balance = hash"]),
        ("upstream app {\n    server 127.0.0.1:1\n    keepalive = -1\n}\n", 3, "keepalive", []),
        ("upstream app {\n    server 127.0.0.1:1\n    keepalive_timeout = 0s\n}\n", 3, "keepalive_timeout", ["between"]),
        ("upstream app {\n    server 127.0.0.1:1\n    keepalive_timeout = soon\n}\n", 3, "keepalive_timeout", []),
        ("upstream app {\n    server 127.0.0.1:1\n    keepalive_timeout = 2d\n}\n", 3, "keepalive_timeout", ["between"]),
        ("upstream app {\n    server 127.0.0.1:1\n    max_fails = x\n}\n", 3, "max_fails", []),
        ("upstream app {\n    server 127.0.0.1:1\n    fail_timeout = 0s\n}\n", 3, "fail_timeout", []),
        ("upstream app {\n    server 127.0.0.1:1\n    health_check = healthz\n}\n", 3, "health_check", []),
        ("upstream app {\n    server 127.0.0.1:1\n    health_interval = 2s\n}\n", 3, "health_interval", ["health_check"]),
        ("upstream app {\n    server 127.0.0.1:1\n    bogus = 1\n}\n", 3, "bogus", []),
        ("upstream app {\n    balance = hash\n}\n", 1, "upstream", ["server"]),
        ("upstream app {\n    server 127.0.0.1:1 { backup = true }\n}\n", 1, "upstream", ["backup"]),
    ],
)
def test_upstream_config_errors(tmp_path, block, line, key, words):
    conf, p = run_config(tmp_path, listener() + block + "site {\n    handler /hello hello_world\n}\n")
    check(p, conf, line + 1, key, words)


@pytest.mark.parametrize(
    "keys, key, words",
    [
        ("", "proxy", ["to ="]),
        ("to = nowhere", "to", ["neither"]),
        ("to = http://127.0.0.1:1/path", "to", ["no path"]),
        ("to = 127.0.0.1:1\n        strip_prefix = perhaps", "strip_prefix", []),
        ("to = 127.0.0.1:1\n        preserve_host = 2", "preserve_host", []),
        ("to = 127.0.0.1:1\n        connect_timeout = soon", "connect_timeout", []),
        ("to = 127.0.0.1:1\n        read_timeout = 0s", "read_timeout", []),
        ("to = 127.0.0.1:1\n        send_timeout = -1s", "send_timeout", []),
        ("to = 127.0.0.1:1\n        retries = 100", "retries", []),
        ("to = 127.0.0.1:1\n        websocket = nah", "websocket", []),
        ("to = 127.0.0.1:1\n        buffer_response = 7", "buffer_response", []),
        ("to = 127.0.0.1:1\n        bogus = 1", "bogus", []),
    ],
)
def test_proxy_config_errors(tmp_path, keys, key, words):
    text = listener() + "site {\n    proxy /api {\n        %s\n    }\n}\n" % keys
    conf, p = run_config(tmp_path, text)
    line = 3 if key == "proxy" else 4 + keys.count("\n")
    check(p, conf, line, key, words)


def test_upstream_inside_a_site_is_an_error(tmp_path):
    text = listener() + "site {\n    upstream app {\n        server 127.0.0.1:1\n    }\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 3, "upstream", ["top level"])


def test_upstream_defined_twice(tmp_path):
    block = "upstream app {\n    server 127.0.0.1:1\n}\n"
    conf, p = run_config(tmp_path, listener() + block + block + "site {\n}\n")
    check(p, conf, 5, "upstream", ["twice"])
