"""An idle HTTP/2 connection at rest (issue 19, idle memory): after a second
without streams the server gives up the connection's nghttp2 session and
rebuilds it from what it kept when the client's next bytes come. Checked
with the Python h2 client, over h2c and over TLS: the HPACK tables both
ways (the client's dynamic table entries, cookies, the server's answer
fields), the windows both ways (an upload above 64 KiB, a download the
client never acknowledges, which only a kept window lets through), a
stream id of the old session refused, many connections waking at once,
and that back-to-back requests never rest. That the session really went
is read from the metrics (colibri_http2_rests_total,
colibri_http2_connections_resting) and, for many connections, from the
server's memory."""

import hashlib
import os
import re
import socket
import ssl
import struct
import subprocess
import time
from types import SimpleNamespace

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import pytest

from browser import browser  # noqa: F401 (the fixture)
from conftest import free_port
from rawhttp import TIME_SCALE, request
from test_http2 import H2

SITE = """listener 127.0.0.1:%(tls_port)d {
    tls = true
}
site {
    tls_certificate = %(base)s/rest-h2.pem
    tls_key = %(base)s/rest-h2.key
    metrics /metrics {
        allow = 127.0.0.1/8
    }
    handler /hello hello_world
    handler /echo echo
    serve_files / {
        path = %(root)s
    }
}
"""

BIG = os.urandom(1 << 20)


PROTOS = [pytest.param("h2c", marks=pytest.mark.plain_only("h2c: prior knowledge on a plain listener")), "h2tls"]


@pytest.fixture(params=PROTOS)
def env(request, make_server, tmp_path):
    return make_env(request, make_server, tmp_path)


@pytest.fixture(params=PROTOS)
def env_long_keep_alive(request, make_server, tmp_path):
    """For many connections made one after the other: on a loaded machine
    (ASan, two suites at a time) the first may wait longer than the default
    15 s keep-alive timeout for the last."""
    return make_env(request, make_server, tmp_path, keep_alive_timeout="300s")


@pytest.fixture(params=PROTOS)
def env_short_keep_alive(request, make_server, tmp_path):
    return make_env(request, make_server, tmp_path, keep_alive_timeout="3s")


def make_env(request, make_server, tmp_path, **overrides):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(tmp_path / "rest-h2.key"), "-out", str(tmp_path / "rest-h2.pem"), "-days", "2",
                    "-subj", "/CN=localhost"], check=True, capture_output=True, timeout=60)
    tls_port = free_port()
    srv = make_server(site=SITE % {"tls_port": tls_port, "base": tmp_path, "root": tmp_path / "wwwroot"},
                      max_request_body="8M", threads="1", **overrides)
    (srv.root / "1m.bin").write_bytes(BIG)
    return SimpleNamespace(srv=srv, tls=request.param == "h2tls", port=tls_port if request.param == "h2tls" else srv.port)


class Conn(H2):
    """test_http2's client over h2c or TLS, with the client's own SETTINGS."""

    def __init__(self, env, settings=None, timeout=10):
        if not env.tls:
            super().__init__(env.srv, timeout, settings)
            return
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", env.port), timeout=timeout * TIME_SCALE)
        self.sock = ctx.wrap_socket(raw, server_hostname="localhost")
        assert self.sock.selected_alpn_protocol() == "h2"
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        if settings:
            self.conn.local_settings = h2.settings.Settings(client=True, initial_values=settings)
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.authority = "localhost:%d" % env.port
        self.streams, self.goaway, self.closed = {}, None, False

    def flush_nb(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.setblocking(True)
            self.sock.sendall(data)
            self.sock.setblocking(False)

    def on_event(self, ev):
        if isinstance(ev, h2.events.PingAckReceived):
            self.pinged = True
        H2.on_event(self, ev)


def scrape(srv):
    with srv.conn() as c:
        c.send(request("GET", "/metrics"))
        r = c.read_response()
    assert r.status == 200
    return r.body.decode()


def metric(srv, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), scrape(srv), re.M)
    assert m, name
    return float(m.group(1))


def service(conns):
    """Reads what the server sent each connection (its SETTINGS), as a
    client does between requests; answers go back (the ACKs)."""
    for c in conns:
        c.sock.setblocking(False)
        try:
            while True:
                try:
                    data = c.sock.recv(65536)
                except (BlockingIOError, ssl.SSLWantReadError):
                    break
                if not data:
                    c.closed = True
                    break
                for ev in c.conn.receive_data(data):
                    c.on_event(ev)
                c.flush_nb()
        finally:
            c.sock.setblocking(True)
            c.sock.settimeout(10 * TIME_SCALE)


def until_resting(srv, n, conns, timeout=8):
    deadline = time.monotonic() + timeout * TIME_SCALE
    while True:
        service(conns)
        v = metric(srv, "colibri_http2_connections_resting")
        if v == n:
            return
        assert time.monotonic() < deadline, "resting %r, want %r" % (v, n)
        time.sleep(0.1)


def tls_request(c, path, method="GET", body=None, headers=()):
    """H2.request with the scheme the connection has."""
    sid = c.conn.get_next_available_stream_id()
    hdrs = [(":method", method), (":path", path), (":scheme", "https" if isinstance(c.sock, ssl.SSLSocket) else "http"),
            (":authority", c.authority)] + list(headers)
    c.conn.send_headers(sid, hdrs, end_stream=body is None)
    c.streams[sid] = {"headers": None, "data": bytearray(), "ended": False, "reset": None, "t_end": None}
    c.flush()
    if body is not None:
        c.send_body(sid, body)
    return sid


def echo_headers(c, headers):
    """GET /echo with headers: the server's decoded head must carry them."""
    sid = tls_request(c, "/echo", headers=headers)
    (r,) = c.wait(sid)
    assert r["headers"][":status"] == "200", r
    # the answer's fields as the server's encoder sent them (its dynamic
    # table, new after a rest, against the client's decoder)
    assert r["headers"]["server"] == "colibri" and r["headers"]["content-type"].startswith("text/plain"), r
    assert r["headers"]["content-length"] == str(len(r["data"])), r
    text = bytes(r["data"]).decode()
    for k, v in headers:
        if k == "cookie":
            continue
        assert "%s: %s\r\n" % (k, v) in text, (k, text)
    return text


def download_unacknowledged(c, path, size, timeout=10):
    """GET path without any WINDOW_UPDATE from the client: it completes only
    if the server keeps the windows the client gave it."""
    sid = tls_request(c, path)
    deadline = time.monotonic() + timeout * TIME_SCALE
    body = bytearray()
    status = None
    while True:
        assert time.monotonic() < deadline, "download stalled at %d of %d bytes" % (len(body), size)
        try:
            data = c.sock.recv(65536)
        except socket.timeout:
            continue
        assert data, "closed"
        done = False
        for ev in c.conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                status = dict(ev.headers)[":status"]
            elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                body += ev.data  # not acknowledged: the windows only shrink
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                done = True
        c.flush()  # SETTINGS ACKs and PING answers only
        if done:
            return status, bytes(body)


def cycle(c, env, headers, round_):
    # the same fields again (all in the client's dynamic table), new ones
    echo_headers(c, headers)
    echo_headers(c, headers + [("x-new-%d" % round_, "fresh value %d" % round_), ("cookie", "c=%d" % round_)])
    # an upload above the initial 64 KiB window (the connection's window
    # is the server's 1 MiB, granted in full before the rest)
    body = os.urandom(200 * 1024)
    sid = tls_request(c, "/echo", method="POST", body=body)
    (r,) = c.wait(sid)
    assert r["headers"][":status"] == "200" and bytes(r["data"]) == body
    echo_headers(c, headers)


@pytest.mark.parametrize("rounds", [2])
def test_rest_and_wake_keep_hpack_and_windows(env, rounds):
    srv = env.srv
    # the client's SETTINGS: a stream window of 2 MiB, so 1 MiB flows with
    # no WINDOW_UPDATE once the connection's window is opened too
    c = Conn(env, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2 << 20})
    c.conn.increment_flow_control_window(4 << 20)
    c.flush()
    headers = [("x-custom-a", "a" * 100), ("x-custom-b", "some value b"), ("user-agent", "rest-test/1.0"),
               ("cookie", "session=abcdef0123456789"), ("cookie", "theme=dark")]
    for _ in range(3):  # the client indexes them: later requests refer to its table
        text = echo_headers(c, headers)
        assert "cookie: session=abcdef0123456789; theme=dark\r\n" in text
    st, data = download_unacknowledged(c, "/1m.bin", len(BIG))
    assert st == "200" and data == BIG
    # the client acknowledges now (the server's window for it grows back)
    c.conn.increment_flow_control_window(len(BIG))
    c.flush()
    assert metric(srv, "colibri_http2_rests_total") == 0
    for r in range(rounds):
        until_resting(srv, 1, [c])
        assert metric(srv, "colibri_http2_rests_total") == r + 1
        # at rest, the first bytes rebuild the session: a ping first
        c.pinged = False
        c.conn.ping(b"12345678")
        c.flush()
        c.pump(lambda: c.pinged)
        cycle(c, env, headers, r)
        # the kept window to the client (2 MiB per stream, the connection's
        # 4 MiB + 64 KiB) lets 1 MiB through without an update
        st, data = download_unacknowledged(c, "/1m.bin", len(BIG))
        assert st == "200" and data == BIG
        c.conn.increment_flow_control_window(len(BIG))
        c.flush()
        assert c.goaway is None
    c.close()


def test_old_stream_id_after_rest_is_refused(env):
    srv = env.srv
    c = Conn(env)
    sids = [tls_request(c, "/hello") for _ in range(3)]
    for r in c.wait(*sids):
        assert r["headers"][":status"] == "200"
    until_resting(srv, 1, [c])
    # a HEADERS on stream 3 (used before the rest): a connection error
    block = c.conn.encoder.encode([(":method", "GET"), (":path", "/hello"),
                                   (":scheme", "https" if env.tls else "http"), (":authority", c.authority)])
    frame = struct.pack(">I", len(block))[1:] + bytes([1, 5]) + struct.pack(">I", 3) + block
    c.sock.sendall(frame)
    got = bytearray()
    deadline = time.monotonic() + 5 * TIME_SCALE
    while time.monotonic() < deadline:
        try:
            d = c.sock.recv(65536)
        except socket.timeout:
            continue
        if not d:
            break
        got += d
        # frames: find the GOAWAY
        off, seen = 0, None
        while off + 9 <= len(got):
            ln = int.from_bytes(got[off:off + 3], "big")
            if off + 9 + ln > len(got):
                break
            if got[off + 3] == 7:
                seen = got[off + 9:off + 9 + ln]
            off += 9 + ln
        if seen:
            last, code = struct.unpack(">II", bytes(seen[:8]))
            assert code == h2.errors.ErrorCodes.PROTOCOL_ERROR
            assert last == 5
            break
    else:
        pytest.fail("no GOAWAY")
    c.close()


def test_back_to_back_requests_never_rest(env):
    srv = env.srv
    c = Conn(env)
    end = time.monotonic() + 2.5
    n = 0
    while time.monotonic() < end:  # bounded: 2.5 s
        (r,) = c.wait(tls_request(c, "/hello"))
        assert bytes(r["data"]) == b"Hello, World!"
        n += 1
        time.sleep(0.2)  # a client's pace: below the server's second
    assert n >= 5
    assert metric(srv, "colibri_http2_rests_total") == 0
    c.close()


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024


def test_many_connections_rest_then_wake(env_long_keep_alive):
    env = env_long_keep_alive
    srv = env.srv
    n = 200
    conns = []
    for i in range(n):  # bounded: n connections, one request each
        c = Conn(env)
        (r,) = c.wait(tls_request(c, "/echo", headers=[("x-conn", str(i))]))
        assert ("x-conn: %d\r\n" % i) in bytes(r["data"]).decode()
        conns.append(c)
    until_resting(srv, n, conns, timeout=30)
    assert metric(srv, "colibri_http2_connections_open") == n
    # all wake at once: every request is sent before any answer is read
    sids = [tls_request(c, "/echo", headers=[("x-conn", str(i)), ("x-again", "yes")]) for i, c in enumerate(conns)]
    for i, (c, sid) in enumerate(zip(conns, sids)):
        (r,) = c.wait(sid, timeout=20)
        text = bytes(r["data"]).decode()
        assert ("x-conn: %d\r\n" % i) in text and "x-again: yes\r\n" in text
    assert metric(srv, "colibri_http2_connections_resting") == 0
    for c in conns:
        c.close()


def until_metrics(srv, want, timeout=8):
    deadline = time.monotonic() + timeout * TIME_SCALE
    while True:
        got = {k: metric(srv, k) for k in want}
        if got == want:
            return
        assert time.monotonic() < deadline, "metrics %r, want %r" % (got, want)
        time.sleep(0.1)


def test_connections_end_at_rest_without_their_context(env_short_keep_alive):
    """A connection at rest has given its context back: the runtime keeps
    its few bytes of state for its fd and hands them back when the
    connection ends there. The client's close (its FIN resumes the
    connection, which reads the end) and the keep-alive timeout (the
    runtime closes it without resuming it) both leave the gauges right, and
    nothing leaks at the stop (ASan's and valgrind's leak checks)."""
    env = env_short_keep_alive
    srv = env.srv
    conns = []
    for _ in range(4):  # bounded: four connections, one request each
        c = Conn(env)
        (r,) = c.wait(tls_request(c, "/hello"))
        assert bytes(r["data"]) == b"Hello, World!"
        conns.append(c)
    until_resting(srv, 4, conns)
    for c in conns[:2]:
        c.sock.close()
    until_metrics(srv, {"colibri_http2_connections_open": 2, "colibri_http2_connections_resting": 2})
    # the other two: closed at rest by the keep-alive timeout (3 s)
    until_metrics(srv, {"colibri_http2_connections_open": 0, "colibri_http2_connections_resting": 0}, timeout=10)
    for c in conns[2:]:
        c.sock.settimeout(5 * TIME_SCALE)
        try:
            assert c.sock.recv(65536) == b""  # the end, no frame
        except (ssl.SSLError, ConnectionResetError):
            pass
        c.sock.close()
    # a new connection is served as ever
    c = Conn(env)
    (r,) = c.wait(tls_request(c, "/hello"))
    assert bytes(r["data"]) == b"Hello, World!"
    c.close()


def test_small_client_window_is_kept(env):
    """The client leaves the server less than the initial 65,535 bytes of
    connection window: a rebuilt session must not send beyond it (the h2
    library fails the connection if it does), and goes on once the
    client's WINDOW_UPDATE comes."""
    srv = env.srv
    small, big = os.urandom(60000), os.urandom(20000)
    (srv.root / "60k.bin").write_bytes(small)
    (srv.root / "20k.bin").write_bytes(big)
    c = Conn(env)
    st, data = download_unacknowledged(c, "/60k.bin", len(small))
    assert st == "200" and data == small
    left = c.conn.inbound_flow_control_window
    assert left == 65535 - 60000
    until_resting(srv, 1, [c])
    sid = tls_request(c, "/20k.bin")
    got = bytearray()
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 1.0:  # until a second without DATA
        c.sock.settimeout(0.2)
        try:
            d = c.sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            continue
        assert d, "closed"
        for ev in c.conn.receive_data(d):  # raises FlowControlError past the window
            if isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                got += ev.data
                quiet_since = time.monotonic()
            assert not isinstance(ev, h2.events.StreamEnded)
        c.flush()
    c.sock.settimeout(10 * TIME_SCALE)
    assert len(got) == left, (len(got), left)
    # the window opens: the rest comes
    c.conn.increment_flow_control_window(1 << 20)
    c.flush()
    c.streams[sid]["data"] = got
    (r,) = c.wait(sid)
    assert r["headers"] is None or r["headers"].get(":status", "200") == "200"
    assert bytes(r["data"]) == big
    c.close()


def test_chromium_connection_rests_and_wakes(make_server, browser, tmp_path):  # noqa: F811
    """Chromium's connection rests while the page is idle, then the page's
    fetch() calls go on the same connection (one HTTP/2 connection in all),
    their fields (in Chromium's HPACK table from the load) arriving whole."""
    from test_tls import make_cert

    make_cert(tmp_path, "default", "localhost", ["localhost"])
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text('<!doctype html><html><head><link rel="icon" href="data:,"></head>'
                                     '<body><p id="done">page</p></body></html>\n')
    (root / "1m.bin").write_bytes(BIG)
    port = free_port()
    srv = make_server(
        site="listener 127.0.0.1:%d {\n    tls = true\n}\n" % port
        + "site {\n    tls_certificate = default.pem\n    tls_key = default.key\n"
        "    metrics /metrics {\n        allow = 127.0.0.1/8\n    }\n"
        "    handler /echo echo\n"
        "    serve_files / {\n        path = %s\n        index = index.html\n    }\n}\n" % root)
    page = browser(flags=["--ignore-certificate-errors"])
    page.open("https://localhost:%d/" % port)
    drv = page.driver
    fetch = ("const done = arguments[arguments.length - 1];"
             "fetch('/echo?n=' + arguments[0], {headers: {'x-rest-test': 'value ' + arguments[0],"
             " 'x-long': 'L'.repeat(300)}}).then(r => r.text()).then(done, e => done('error ' + e));")
    for i in range(3):
        text = drv.execute_async_script(fetch, i)
        assert "x-rest-test: value %d\r\n" % i in text and "x-long: " + "L" * 300 in text, text
    # the page's connection at rest. Chromium may also hold a spare one,
    # opened ahead (TLS and ALPN done) without its preface yet: that one
    # has nothing to keep and cannot rest
    deadline = time.monotonic() + 10 * TIME_SCALE
    while True:
        text = scrape(srv)
        resting = float(re.search(r"^colibri_http2_connections_resting (\S+)$", text, re.M).group(1))
        if resting >= 1:
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.1)
    before = float(re.search(r"^colibri_http2_connections_total (\S+)$", text, re.M).group(1))
    for i in range(3, 6):
        text = drv.execute_async_script(fetch, i)
        assert "x-rest-test: value %d\r\n" % i in text and "x-long: " + "L" * 300 in text, text
    size = drv.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch('/1m.bin').then(r => r.arrayBuffer()).then(b => done(b.byteLength), e => done('error ' + e));")
    assert size == len(BIG)
    protos = drv.execute_script("return performance.getEntriesByType('resource').map(e => e.nextHopProtocol)")
    assert protos and all(p == "h2" for p in protos), protos
    text = scrape(srv)
    # no new connection, and one fewer at rest: the fetches woke the page's
    assert float(re.search(r"^colibri_http2_connections_total (\S+)$", text, re.M).group(1)) == before, text
    assert float(re.search(r"^colibri_http2_connections_resting (\S+)$", text, re.M).group(1)) < resting, text
    assert float(re.search(r"^colibri_http2_rests_total (\S+)$", text, re.M).group(1)) >= 1
