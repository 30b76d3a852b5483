"""The metrics beyond requests (issue 21): connection states as nginx's
stub_status shows them, serve_files' cache hits and misses, WebSocket,
event streams and channel subscribers open, HTTP/2 connections and
streams (and HTTP/2 requests in the request counters). Each is checked
with a real value after real traffic, and promtool accepts the text."""
import re
import shutil
import socket
import subprocess
import time

import pytest

from rawhttp import TIME_SCALE, request
from test_http2 import H2
from test_modules import build_greet
from test_pubsub import PUBSUB_C, Sub
from wsclient import WS

METRICS = "    metrics /metrics {\n        allow = 127.0.0.1/8 ::1\n    }\n"


def site(*lines, extra=""):
    return extra + "site {\n" + METRICS + "".join("    %s\n" % l for l in lines) + "}\n"


def scrape(s):
    with s.conn() as c:
        c.send(request("GET", "/metrics"))
        r = c.read_response()
    assert r.status == 200
    text = r.body.decode()
    from conftest import require
    require(shutil.which("promtool"), "promtool (prometheus)")
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return text


def sample(text, name, labels="", default=None):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    if not m and default is not None:
        return default  # a labelled series appears with its first count
    assert m, "no %s%s in:\n%s" % (name, labels, text)
    return float(m.group(1))


def until(s, check, timeout=5.0):
    """Scrapes until check(text) holds (a connection's close or a stream's
    end reaches the server a moment after the client's), else fails."""
    deadline = time.monotonic() + timeout * TIME_SCALE
    while True:
        text = scrape(s)
        if check(text):
            return text
        assert time.monotonic() < deadline, text
        time.sleep(0.05)


def test_connection_states(make_server):
    s = make_server(threads="2", site=site("handler /hello hello_world"))
    base = scrape(s)
    idle = []
    for _ in range(3):  # keep-alive connections, idle after their answer
        c = s.conn()
        c.send(request("GET", "/hello"))
        assert c.read_response().status == 200
        idle.append(c)
    half = socket.create_connection((s.host, s.port))  # a head not finished
    half.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n")
    try:
        text = until(s, lambda t: sample(t, "colibri_connections", '{state="reading"}') >= 1)
        assert sample(text, "colibri_connections", '{state="waiting"}') >= 3
        assert sample(text, "colibri_connections", '{state="writing"}') >= 1  # the scrape's own
        assert sample(text, "colibri_connections_active") >= 5
        # 3 idle, 1 half, this scrape, at least one scrape before it (until)
        accepted = sample(text, "colibri_connections_accepted_total")
        assert accepted - sample(base, "colibri_connections_accepted_total") >= 5
        assert sample(text, "colibri_connections_handled_total") == accepted
    finally:
        half.close()
        for c in idle:
            c.close()
    text = until(s, lambda t: sample(t, "colibri_connections_active") == 1)  # the scrape alone
    assert sample(text, "colibri_connections", '{state="waiting"}') == 0
    assert sample(text, "colibri_connections", '{state="reading"}') == 0


def test_files_cache_hits_and_misses(make_server, tmp_path):
    root = tmp_path / "files"
    root.mkdir()
    (root / "one.txt").write_text("one\n")
    (root / "big.txt").write_bytes(b"x" * 3000)
    s2 = make_server(site=site("serve_files /f {", "    path = %s" % root, "}"))
    base = scrape(s2)
    assert sample(base, "colibri_files_cache_hits_total") == 0
    assert sample(base, "colibri_files_cache_bytes") == 0
    for _ in range(2):
        with s2.conn() as c:
            c.send(request("GET", "/f/one.txt"))
            r = c.read_response()
            assert (r.status, r.body) == (200, b"one\n")
    text = scrape(s2)
    assert sample(text, "colibri_files_cache_misses_total") == 1
    assert sample(text, "colibri_files_cache_hits_total") == 1
    held = sample(text, "colibri_files_cache_bytes")
    assert held >= 4  # one.txt's body, kept in memory
    with s2.conn() as c:
        c.send(request("GET", "/f/big.txt"))
        assert c.read_response().status == 200
    # the second file's 3000 bytes (and maybe a compressed form) are held too
    assert sample(scrape(s2), "colibri_files_cache_bytes") >= held + 3000


def test_websockets_and_event_streams_open(make_server):
    s = make_server(threads="2", site=site("handler /ws ws_echo", "handler /sse sse_ticks"))
    a, b = WS(s.host, s.port), WS(s.host, s.port)
    ev = s.conn()
    ev.send(request("GET", "/sse?count=1000&interval=1000"))
    assert ev.read_until(b"\r\n\r\n", time.monotonic() + 5).startswith(b"HTTP/1.1 200 ")
    try:
        text = until(s, lambda t: sample(t, "colibri_websockets_open") == 2)
        assert sample(text, "colibri_sse_streams_open") == 1
    finally:
        a.close()
        ev.close()
    text = until(s, lambda t: sample(t, "colibri_websockets_open") == 1
                 and sample(t, "colibri_sse_streams_open") == 0)
    b.close()
    until(s, lambda t: sample(t, "colibri_websockets_open") == 0)


@pytest.fixture(scope="module")
def pubsub_so(tmp_path_factory):
    return build_greet(tmp_path_factory.mktemp("pubsub") / "libpubsub.so", src=PUBSUB_C)


def test_channel_subscribers(make_server, pubsub_so):
    s = make_server(threads="2", site=site("pubsub /ps {", "}", extra="module %s\n" % pubsub_so))
    subs = [Sub(s), Sub(s)]
    try:
        until(s, lambda t: sample(t, "colibri_channel_subscribers") == 2)
    finally:
        subs[0].sock.close()
    until(s, lambda t: sample(t, "colibri_channel_subscribers") == 1)
    subs[1].sock.close()
    text = until(s, lambda t: sample(t, "colibri_channel_subscribers") == 0)
    assert sample(text, "colibri_channel_subscribers_dropped_total") == 0


def test_http2_connections_streams_and_requests(make_server):
    s = make_server(site=site("handler /hello hello_world", "handler /sse sse_ticks"))
    base = scrape(s)
    ok = '{site="default",code="2xx",method="GET"}'
    h = H2(s)
    try:
        sids = [h.request("/hello") for _ in range(3)]
        for st in h.wait(*sids):
            assert st["headers"][":status"] == "200"
        long = h.request("/sse?count=1000&interval=1000")
        h.pump(lambda: h.streams[long]["headers"] is not None)
        text = until(s, lambda t: sample(t, "colibri_http2_streams_open") == 1)
        assert sample(text, "colibri_http2_connections_open") == 1
        assert sample(text, "colibri_http2_connections_total") == 1
        assert sample(text, "colibri_http2_streams_total") == 4
        # the 3 streams answered count as requests, as HTTP/1.1's do
        assert sample(text, "colibri_http_requests_total", ok) - sample(base, "colibri_http_requests_total", ok, 0) >= 3
        assert sample(text, "colibri_http_request_duration_seconds_count") >= 4  # + a scrape
    finally:
        h.close()
    text = until(s, lambda t: sample(t, "colibri_http2_connections_open") == 0)
    assert sample(text, "colibri_http2_streams_open") == 0


def test_upstream_servers(make_server, tmp_path):
    from conftest import free_port
    from test_proxy import Upstream, get as proxy_get
    b = Upstream(tmp_path, "B")
    try:
        dead = free_port()
        conf = ("upstream app {\n    server 127.0.0.1:%d\n    server %s\n    fail_timeout = 30s\n}\n"
                % (dead, b.addr))
        s = make_server(threads="2", site=conf + site("proxy /api {", "    to = app", "    strip_prefix = true", "}"))
        for _ in range(4):
            r, _ = proxy_get(s, "/api/echo")
            assert r.status == 200
        text = scrape(s)
        live = '{upstream="app",server="%s"}' % b.addr
        gone = '{upstream="app",server="127.0.0.1:%d"}' % dead
        assert sample(text, "colibri_upstream_up", live) == 1
        assert sample(text, "colibri_upstream_up", gone) == 0  # refused, marked down for 30 s
        assert sample(text, "colibri_upstream_requests_total", live) == 4
        assert sample(text, "colibri_upstream_failures_total", live) == 0
        assert sample(text, "colibri_upstream_failures_total", gone) == 1
        assert sample(text, "colibri_upstream_requests_total", gone) == 1
        assert sample(text, "colibri_upstream_response_seconds_count", live) == 4
        assert sample(text, "colibri_upstream_response_seconds_bucket",
                      '{upstream="app",server="%s",le="+Inf"}' % b.addr) == 4
        assert sample(text, "colibri_upstream_response_seconds_sum", live) < 10
    finally:
        b.kill()


def test_connections_refused_per_client(make_server):
    """max_connections_per_client's refusals are counted in the metrics
    (the contract says counted): two held from 127.0.0.2, the third from
    there is closed at accept; the scrape comes from 127.0.0.1."""
    s = make_server(site=site("handler /hello hello_world"), threads="1", max_connections_per_client="2")
    held = []
    deadline = time.monotonic() + 5 * TIME_SCALE
    while len(held) < 2:  # each held one answered first: the server counted it
        c = socket.create_connection(("127.0.0.1", s.port), timeout=5 * TIME_SCALE, source_address=("127.0.0.2", 0))
        c.sendall(request("GET", "/hello"))
        if c.recv(4096).startswith(b"HTTP/1.1 200"):
            held.append(c)
        else:
            c.close()
            assert time.monotonic() < deadline
    extra = socket.create_connection(("127.0.0.1", s.port), timeout=5 * TIME_SCALE, source_address=("127.0.0.2", 0))
    extra.sendall(request("GET", "/hello"))  # (accept is deferred until bytes come)
    try:
        assert extra.recv(4096) == b""  # closed at accept: no byte of answer
    except ConnectionResetError:
        pass
    extra.close()
    assert sample(scrape(s), "colibri_connections_refused_per_client_total") == 1
    for c in held:
        c.close()
