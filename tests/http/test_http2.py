"""HTTP/2 in cleartext with prior knowledge (h2c): curl --http2-prior-knowledge,
nghttp and the Python h2 library against a real server; the exchange is the
HTTP/1.1 one (handlers, serve_files, conditions, ranges, SSE, uploads, the
access log), framed as streams."""

import hashlib
import os
import socket
import struct
import subprocess
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest

from conftest import WRAPPER, colibri_bin, free_port
from test_modules import greet_so  # noqa: F401 (the session fixture)
from rawhttp import TIME_SCALE

SITE = (
    "site {\n"
    "    handler /hello hello_world\n"
    "    handler /echo echo\n"
    "    handler /sse sse_ticks\n"
    "    serve_files / {\n"
    "        path = %s\n"
    "        index = index.html\n"
    "    }\n"
    "}\n"
)

MIB = os.urandom(1 << 20)


@pytest.fixture
def h2srv(make_server, tmp_path):
    """A server whose root also has a 1 MiB file, with an access log."""
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, access_log=str(tmp_path / "access.log"), max_request_body="8M")
    (root / "1m.bin").write_bytes(MIB)
    srv.log = tmp_path / "access.log"
    return srv


def curl(*args, timeout=20):
    p = subprocess.run(
        ["curl", "-sS", "--http2-prior-knowledge", "--max-time", str(int(timeout * TIME_SCALE))] + list(args),
        capture_output=True,
        timeout=timeout * TIME_SCALE + 5,
    )
    return p


class H2:
    """One HTTP/2 connection driven by hand with the h2 library."""

    def __init__(self, srv, timeout=10, settings=None):
        self.sock = socket.create_connection((srv.host, srv.port), timeout=timeout * TIME_SCALE)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        if settings:  # in the client's first SETTINGS
            self.conn.local_settings = h2.settings.Settings(client=True, initial_values=settings)
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.authority = srv.hostport
        self.streams = {}  # id -> {"headers", "data", "ended", "reset"}
        self.goaway = None
        self.closed = False

    def request(self, path, method="GET", body=None, headers=(), end=True):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "http"), (":authority", self.authority)]
        hdrs += list(headers)
        self.conn.send_headers(sid, hdrs, end_stream=end and body is None)
        self.streams[sid] = {"headers": None, "data": bytearray(), "ended": False, "reset": None, "t_end": None}
        self.flush()
        if body is not None:
            self.send_body(sid, body)
        return sid

    def send_body(self, sid, body):
        """Sends body as the window allows, reading meanwhile."""
        off = 0
        while off < len(body):
            room = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size, len(body) - off)
            if room <= 0:
                self.pump(until=lambda: self.conn.local_flow_control_window(sid) > 0)
                continue
            self.conn.send_data(sid, body[off : off + room])
            off += room
            self.flush()
        self.conn.end_stream(sid)
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def pump(self, until, timeout=10):
        deadline = time.monotonic() + timeout * TIME_SCALE
        while not until():
            if self.closed:
                return False
            if time.monotonic() > deadline:
                raise AssertionError("HTTP/2: timed out; streams %r" % {k: (v["headers"], len(v["data"]), v["ended"]) for k, v in self.streams.items()})
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                data = b""
            if not data:
                self.closed = True
                return until()
            for ev in self.conn.receive_data(data):
                self.on_event(ev)
            self.flush()
        return True

    def on_event(self, ev):
        st = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.ResponseReceived):
            st["headers"] = dict(ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            st["data"] += ev.data
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            st["ended"] = True
            st["t_end"] = time.monotonic()
        elif isinstance(ev, h2.events.StreamReset):
            if st is not None:
                st["reset"] = ev.error_code
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev.error_code

    def wait(self, *sids, timeout=10):
        self.pump(lambda: all(self.streams[s]["ended"] or self.streams[s]["reset"] is not None for s in sids), timeout)
        return [self.streams[s] for s in sids]

    def close(self):
        self.sock.close()


def access_lines(srv, n, timeout=5):
    """The access log once it has n lines (lines are written once a second)."""
    deadline = time.monotonic() + timeout * TIME_SCALE
    lines = []
    while time.monotonic() < deadline:
        if srv.log.exists():
            lines = srv.log.read_text().splitlines()
            if len(lines) >= n:
                return lines
        time.sleep(0.1)
    return lines


def test_hello_prior_knowledge(h2srv):
    p = curl("-w", "\n%{http_version} %{http_code}", h2srv.url + "/hello")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"Hello, World!\n2 200"


def test_files_small_and_1mib(h2srv):
    p = curl(h2srv.url + "/file.txt")
    assert p.stdout == b"hello from a file\n"
    p = curl(h2srv.url + "/1m.bin")
    assert p.returncode == 0, p.stderr
    assert hashlib.sha256(p.stdout).digest() == hashlib.sha256(MIB).digest()
    # both, and a directory's index, on one connection
    c = H2(h2srv)
    a, b, i = c.request("/1m.bin"), c.request("/file.txt"), c.request("/")
    ra, rb, ri = c.wait(a, b, i)
    assert ra["headers"][":status"] == "200" and bytes(ra["data"]) == MIB
    assert ra["headers"]["content-length"] == str(1 << 20)
    assert rb["headers"][":status"] == "200" and bytes(rb["data"]) == b"hello from a file\n"
    assert ri["headers"][":status"] == "200" and b"index page" in ri["data"]
    c.close()


def test_no_connection_specific_fields(h2srv):
    c = H2(h2srv)
    s = c.request("/hello")
    (r,) = c.wait(s)
    for name in ("connection", "keep-alive", "transfer-encoding"):
        assert name not in r["headers"]
    assert all(k == k.lower() for k in r["headers"])
    assert "date" in r["headers"] and r["headers"]["server"] == "colibri"
    c.close()


def test_conditions_and_ranges(h2srv):
    c = H2(h2srv)
    s = c.request("/1m.bin", headers=[("range", "bytes=10-19")])
    (r,) = c.wait(s)
    assert r["headers"][":status"] == "206"
    assert r["headers"]["content-range"] == "bytes 10-19/%d" % (1 << 20)
    assert bytes(r["data"]) == MIB[10:20]
    etag = c.wait(c.request("/file.txt"))[0]["headers"]["etag"]
    (r,) = c.wait(c.request("/file.txt", headers=[("if-none-match", etag)]))
    assert r["headers"][":status"] == "304" and not r["data"]
    (r,) = c.wait(c.request("/file.txt", headers=[("range", "bytes=0-1,4-5")]))
    assert r["headers"][":status"] == "206"
    assert r["headers"]["content-type"].startswith("multipart/byteranges")
    assert b"he" in r["data"] and b"o " in r["data"]
    (r,) = c.wait(c.request("/file.txt", method="HEAD"))
    assert r["headers"][":status"] == "200" and r["headers"]["content-length"] == "18" and not r["data"]
    c.close()


def test_post_upload_echo(h2srv):
    body = os.urandom(3 * (1 << 20))  # three times the stream's window: flow control at work
    c = H2(h2srv)
    s = c.request("/echo", method="POST", body=body, headers=[("content-length", str(len(body)))])
    (r,) = c.wait(s, timeout=30)
    assert r["headers"][":status"] == "200"
    assert hashlib.sha256(r["data"]).digest() == hashlib.sha256(body).digest()
    # without a content-length: framed by END_STREAM alone
    s = c.request("/echo", method="POST", body=b"x" * 100000)
    (r,) = c.wait(s)
    assert r["headers"][":status"] == "200" and bytes(r["data"]) == b"x" * 100000
    c.close()
    p = curl("--data-binary", "hello h2", h2srv.url + "/echo")
    assert p.stdout == b"hello h2"


def test_upload_over_the_limit_is_413(h2srv):
    c = H2(h2srv)
    s = c.request("/echo", method="POST", end=False, headers=[("content-length", str(9 << 20))])
    (r,) = c.wait(s)
    assert r["headers"][":status"] == "413"
    # the connection goes on
    (r,) = c.wait(c.request("/hello"))
    assert bytes(r["data"]) == b"Hello, World!"
    c.close()


def test_many_concurrent_streams(h2srv):
    c = H2(h2srv)
    sids = [c.request("/hello" if i % 2 else "/file.txt") for i in range(100)]
    res = c.wait(*sids, timeout=20)
    for i, r in enumerate(res):
        assert r["headers"][":status"] == "200"
        assert bytes(r["data"]) == (b"Hello, World!" if i % 2 else b"hello from a file\n")
    c.close()
    # every stream has its own access log line, as HTTP/2.0
    lines = access_lines(h2srv, 100)
    assert len(lines) == 100
    assert all('HTTP/2.0" 200' in l for l in lines), lines[:3]


def test_nghttp_client(h2srv):
    p = subprocess.run(
        ["nghttp", "-ns", "-m", "20", h2srv.url + "/hello"], capture_output=True, timeout=20 * TIME_SCALE
    )
    assert p.returncode == 0, p.stderr
    # the statistics: one line per request, each a 200
    assert p.stdout.count(b"/hello") == 20
    p = subprocess.run(["nghttp", h2srv.url + "/1m.bin"], capture_output=True, timeout=20 * TIME_SCALE)
    assert p.returncode == 0 and p.stdout == MIB


def test_sleeping_handler_does_not_block_other_streams(h2srv):
    c = H2(h2srv)
    sse = c.request("/sse?count=3&interval=1000")
    c.pump(lambda: len(c.streams[sse]["data"]) > 0)  # the first event came; now it sleeps
    t0 = time.monotonic()
    hello = c.request("/hello")
    (r,) = c.wait(hello)
    assert bytes(r["data"]) == b"Hello, World!"
    assert time.monotonic() - t0 < 0.8 * TIME_SCALE
    assert not c.streams[sse]["ended"]
    (r,) = c.wait(sse, timeout=10)
    assert r["headers"]["content-type"].startswith("text/event-stream")
    assert r["data"].count(b"event: tick") == 3
    c.close()


def test_stream_reset(h2srv):
    c = H2(h2srv)
    big = c.request("/1m.bin")
    c.pump(lambda: len(c.streams[big]["data"]) > 0)
    c.conn.reset_stream(big, error_code=8)  # CANCEL
    c.flush()
    # a sleeping stream reset while it waits ends at once (its handler unwound)
    sse = c.request("/sse?count=100&interval=1000")
    c.pump(lambda: len(c.streams[sse]["data"]) > 0)
    c.conn.reset_stream(sse, error_code=8)
    c.flush()
    (r,) = c.wait(c.request("/hello"))
    assert bytes(r["data"]) == b"Hello, World!"
    c.close()
    lines = access_lines(h2srv, 3)
    sse_line = [l for l in lines if "/sse" in l]
    assert sse_line and '" 200 ' in sse_line[0], lines
    big_line = [l for l in lines if "/1m.bin" in l]
    assert big_line, lines
    sent = int(big_line[0].split('" 200 ')[1].split()[0])
    assert 0 < sent <= 1 << 20, big_line


def test_rapid_reset_is_bounded(h2srv):
    """Streams opened and reset at once (CVE-2023-44487): past the rate
    limit the connection ends with GOAWAY, and other clients are served."""
    c = H2(h2srv)
    for _ in range(2000):
        sid = c.request("/sse?count=5&interval=1000")
        c.conn.reset_stream(sid, error_code=8)
    try:
        c.flush()
    except OSError:
        pass
    c.pump(lambda: c.goaway is not None or c.closed, timeout=10)
    # nghttp2's limit ends it with INTERNAL_ERROR
    assert c.goaway in (2, 11) or c.closed
    c.close()
    p = curl(h2srv.url + "/hello")
    assert p.stdout == b"Hello, World!"


def test_streams_past_the_limit_are_refused(make_server, tmp_path):
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, http2_max_concurrent_streams="4", http2_initial_window="128k")
    c = H2(srv)
    # six streams at once, sent before the server's SETTINGS could be
    # acknowledged: the two past its limit are refused (RFC 9113 5.1.2),
    # the others served
    c.conn.remote_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 100
    c.conn.remote_settings.acknowledge()
    sids = [c.request("/sse?count=2&interval=300") for _ in range(6)]
    res = c.wait(*sids, timeout=10)
    assert c.conn.remote_settings.max_concurrent_streams == 4
    assert c.conn.remote_settings.initial_window_size == 128 << 10
    assert [r["reset"] for r in res].count(7) == 2, res  # REFUSED_STREAM
    assert sum(1 for r in res if r["ended"] and r["data"].count(b"event: tick") == 2) == 4
    # once they are acknowledged, opening more is a connection error
    c.conn.remote_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 100
    c.conn.remote_settings.acknowledge()
    for _ in range(6):
        c.request("/sse?count=2&interval=300")
    c.pump(lambda: c.goaway is not None)
    assert c.goaway == 1  # PROTOCOL_ERROR
    c.close()


def test_goaway_on_bad_frames(h2srv):
    c = H2(h2srv)
    c.wait(c.request("/hello"))
    # a DATA frame on stream 0: a connection error (PROTOCOL_ERROR)
    c.sock.sendall(b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x")
    c.pump(lambda: c.goaway is not None)
    assert c.goaway == 1
    c.close()


def test_headers_on_a_skipped_stream_id_is_a_connection_error(h2srv):
    """RFC 9113 5.1.1: stream 5 opened, then 3 (which the client skipped)."""
    c = H2(h2srv)
    s5 = c.conn.get_next_available_stream_id() + 4
    hdrs = [(":method", "GET"), (":path", "/hello"), (":scheme", "http"), (":authority", c.authority)]
    for sid in (s5, s5 - 2):
        block = c.conn.encoder.encode(hdrs)
        frame = len(block).to_bytes(3, "big") + b"\x01\x05" + sid.to_bytes(4, "big") + block
        c.sock.sendall(frame)
    data = b""
    while True:
        d = c.sock.recv(65536)
        if not d:
            break
        data += d
    c.close()
    # the frames back: find the GOAWAY (type 7) and its error code
    i, goaway = 0, None
    while i + 9 <= len(data):
        n, t = int.from_bytes(data[i : i + 3], "big"), data[i + 3]
        if t == 7:
            goaway = int.from_bytes(data[i + 13 : i + 17], "big")
        i += 9 + n
    assert goaway == 1  # PROTOCOL_ERROR


def test_bad_preface_closes(h2srv):
    s = socket.create_connection((h2srv.host, h2srv.port), timeout=5 * TIME_SCALE)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + b"\x00" * 30)
    data = b""
    while True:
        try:
            d = s.recv(4096)
        except ConnectionResetError:
            break
        if not d:
            break
        data += d
    s.close()
    assert not data.startswith(b"HTTP/1.1")  # not an HTTP/1.1 answer
    if data:  # a GOAWAY (type 7), when anything
        assert data[3] == 7 or data[3] == 4, data[:20]


def test_protocol_of_request_and_http1_unchanged(make_server, tmp_path):
    root = tmp_path / "wwwroot"
    srv = make_server(
        site=SITE % root,
        access_log=str(tmp_path / "access.log"),
        log_format='"$protocol $method $uri $status"',
    )
    srv.log = tmp_path / "access.log"
    curl(srv.url + "/hello")
    p = subprocess.run(["curl", "-sS", "--http1.1", srv.url + "/hello"], capture_output=True, timeout=10)
    assert p.stdout == b"Hello, World!"
    lines = access_lines(srv, 2)
    assert sorted(lines) == ["HTTP/1.1 GET /hello 200", "HTTP/2.0 GET /hello 200"]


def test_http2_false_keeps_505(make_server, tmp_path):
    root = tmp_path / "wwwroot"
    port = free_port()
    site = "listener 127.0.0.1:%d {\n    http2 = false\n}\n" % port + SITE % root
    srv = make_server(site=site)
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    data = s.recv(4096)
    s.close()
    assert data.startswith(b"HTTP/1.1 505 ")
    # the config's other listener speaks it
    p = curl(srv.url + "/hello")
    assert p.stdout == b"Hello, World!"


def test_preface_after_a_request_is_505(h2srv):
    """Prior knowledge means the preface first: after an HTTP/1.1 request
    it is an HTTP/1.1 request of a version colibri does not speak."""
    with h2srv.conn(timeout=5.0) as c:
        c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        assert c.read_response().body == b"Hello, World!"
        assert c.read_response().status == 505
        assert c.wait_closed(2.0)


def run_config(tmp_path, text):
    conf = tmp_path / "h2.conf"
    conf.write_text(text)
    p = subprocess.run([str(colibri_bin()), "-c", str(conf)], cwd=tmp_path, capture_output=True, timeout=10)
    return conf, p


@pytest.mark.parametrize(
    "lines, key, words",
    [
        ("listener 127.0.0.1:%d {\n    http2 = maybe\n}\n", "http2", "true"),
        ("listener 127.0.0.1:%d {\n    h2c_upgrade = sometimes\n}\n", "h2c_upgrade", "true"),
        ("listener 127.0.0.1:%d {\n    tls = true\n    h2c_upgrade = true\n}\n", "h2c_upgrade", "cleartext"),
        ("listener 127.0.0.1:%d {\n    http2 = false\n    h2c_upgrade = true\n}\n", "h2c_upgrade", "http2 = true"),
        ("listener 127.0.0.1:%d\nhttp2_max_concurrent_streams = 0\n", "http2_max_concurrent_streams", "out of range"),
        ("listener 127.0.0.1:%d\nhttp2_max_concurrent_streams = lots\n", "http2_max_concurrent_streams", ""),
        ("listener 127.0.0.1:%d\nhttp2_initial_window = 1k\n", "http2_initial_window", "between"),
        ("listener 127.0.0.1:%d\nhttp2_initial_window = 4G\n", "http2_initial_window", "between"),
    ],
)
def test_config_errors(tmp_path, lines, key, words):
    (tmp_path / "www").mkdir()
    text = (lines % free_port()) + "site {\n    handler /hello hello_world\n}\n"
    conf, p = run_config(tmp_path, text)
    err = p.stderr.decode()
    assert p.returncode == 1, err
    line = next(i + 1 for i, l in enumerate(text.splitlines()) if key in l)
    assert "%s:%d: %s:" % (conf, line, key) in err, err
    assert words in err, err


def test_stalled_stream_ends_at_request_timeout(make_server, tmp_path):
    """A body that never comes: the stream is reset after request_timeout,
    the other streams (a handler sleeping longer than that) go on, and the
    connection is not cut while they are at work."""
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, request_timeout="1s", keep_alive_timeout="2s")
    c = H2(srv)
    sse = c.request("/sse?count=2&interval=2500")
    stalled = c.request("/echo", method="POST", end=False, headers=[("content-length", "100")])
    t0 = time.monotonic()
    (r,) = c.wait(stalled, timeout=10)
    assert r["reset"] == 8, r  # CANCEL
    assert 0.9 < time.monotonic() - t0 < 5 * TIME_SCALE
    (r,) = c.wait(sse, timeout=10)
    assert r["ended"] and r["data"].count(b"event: tick") == 2
    # idle now: the keep-alive timeout ends the connection
    t0 = time.monotonic()
    c.pump(lambda: c.closed, timeout=10)
    assert time.monotonic() - t0 < 5 * TIME_SCALE
    c.close()


def test_sigterm_sends_goaway_and_lets_streams_finish(make_server, tmp_path):
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, shutdown_timeout="5s")
    p = subprocess.Popen(
        ["nghttp", "-v", srv.url + "/sse?count=50&interval=300"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    time.sleep(1.0 * TIME_SCALE)
    srv.send_signal()
    out, _ = p.communicate(timeout=10 * TIME_SCALE)
    assert srv.wait() == 0
    assert p.returncode == 0, out
    # the sleeping handler was woken (-ECANCELED) and ended its stream,
    # which ended whole (END_STREAM), and GOAWAY(NO_ERROR) came
    ticks = out.count(b"event: tick")
    assert 1 <= ticks < 50, out
    assert b"recv GOAWAY" in out and b"error_code=NO_ERROR" in out, out
    assert b"flags=0x01, stream_id=13" in out, out  # a frame with END_STREAM on the request's stream


def tls_h2_site(port, port_off, root, tmp_path):
    from test_tls import make_cert

    make_cert(tmp_path, "default", "default.test", ["default.test"])
    return (
        "listener 127.0.0.1:%d {\n    tls = true\n}\n"
        "listener 127.0.0.1:%d {\n    tls = true\n    http2 = false\n}\n"
        "site {\n    tls_certificate = default.pem\n    tls_key = default.key\n"
        "    handler /hello hello_world\n    handler /echo echo\n"
        "    serve_files / {\n        path = %s\n    }\n}\n" % (port, port_off, root)
    )


def test_alpn_h2_over_tls(make_server, tmp_path):
    import ssl

    root = tmp_path / "wwwroot"
    port, port_off = free_port(), free_port()
    make_server(site=tls_h2_site(port, port_off, root, tmp_path))
    (root / "1m.bin").write_bytes(MIB)
    p = subprocess.run(
        ["curl", "-sSk", "--http2", "-w", "\n%{http_version}", "https://127.0.0.1:%d/hello" % port],
        capture_output=True,
        timeout=20,
    )
    assert p.stdout == b"Hello, World!\n2", p.stderr
    p = subprocess.run(["curl", "-sSk", "--http2", "https://127.0.0.1:%d/1m.bin" % port], capture_output=True, timeout=30)
    assert p.stdout == MIB
    p = subprocess.run(
        ["curl", "-sSk", "--http2", "--data-binary", "over tls", "https://127.0.0.1:%d/echo" % port],
        capture_output=True,
        timeout=20,
    )
    assert p.stdout == b"over tls"
    # ALPN offers h2 first, then http/1.1; with http2 = false only http/1.1
    for prt, want in ((port, "h2"), (port_off, "http/1.1")):
        c = ssl.create_default_context()
        c.check_hostname = False
        c.verify_mode = ssl.CERT_NONE
        c.set_alpn_protocols(["h2", "http/1.1"])
        with socket.create_connection(("127.0.0.1", prt), timeout=10) as s:
            with c.wrap_socket(s, server_hostname="default.test") as t:
                assert t.selected_alpn_protocol() == want
    p = subprocess.run(
        ["curl", "-sSk", "--http2", "-w", "\n%{http_version}", "https://127.0.0.1:%d/hello" % port_off],
        capture_output=True,
        timeout=20,
    )
    assert p.stdout == b"Hello, World!\n1.1"


def test_forms_and_multipart_over_h2(make_server, tmp_path, greet_so):  # noqa: F811
    """The form and upload handlers of tests/http/modules/greet.c, unchanged,
    over streams: an urlencoded body and a multipart one with a part that
    goes to a temporary file."""
    import zlib

    so = greet_so
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    site = "module %s\nsite {\n    handler /form form\n    handler /upload upload\n}\n" % so
    srv = make_server(site=site, max_request_body="64M", temp_dir=str(uploads), multipart_memory_max="64k")
    c = H2(srv)
    form = b"name=Ada+Lovelace&note=1%2B1%3D2"
    s = c.request(
        "/form",
        method="POST",
        body=form,
        headers=[("content-type", "application/x-www-form-urlencoded"), ("content-length", str(len(form)))],
    )
    (r,) = c.wait(s)
    assert bytes(r["data"]) == b"name=[Ada Lovelace] note=[1+1=2]"
    big = os.urandom(300 * 1024)
    b = b"xBOUNDARYx"
    body = (
        b"--" + b + b'\r\nContent-Disposition: form-data; name="title"\r\n\r\nHello\r\n'
        b"--" + b + b'\r\nContent-Disposition: form-data; name="f"; filename="f.bin"\r\n\r\n' + big + b"\r\n"
        b"--" + b + b"--\r\n"
    )
    s = c.request("/upload", method="POST", body=body, headers=[("content-type", "multipart/form-data; boundary=" + b.decode())])
    (r,) = c.wait(s, timeout=20)
    assert r["headers"][":status"] == "200", r
    out = bytes(r["data"]).decode().splitlines()
    assert out[0] == "name=title filename=- type=text/plain size=5 adler32=%08x in=memory links=-" % zlib.adler32(b"Hello")
    assert out[1].startswith("name=f filename=f.bin type=text/plain size=%d adler32=%08x in=file"
                             % (len(big), zlib.adler32(big))), out
    assert out[2] == "end"
    c.close()


def test_an_answer_held_for_the_request_end(make_server, tmp_path):
    """A 2xx answer to a request whose client has not ended it waits for
    that end (what comes meanwhile is read and dropped); such answers do
    not keep an idle connection from its keep-alive timeout."""
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, keep_alive_timeout="1s", request_timeout="10s")
    c = H2(srv)
    s = c.request("/hello", end=False)
    c.pump(lambda: len(c.streams[s]["data"]) == 13)
    time.sleep(0.2)
    c.pump(lambda: True)
    assert not c.streams[s]["ended"]
    c.conn.send_data(s, b"ignored", end_stream=True)
    c.flush()
    (r,) = c.wait(s)
    assert r["ended"] and bytes(r["data"]) == b"Hello, World!"
    s = c.request("/hello", end=False)
    c.pump(lambda: len(c.streams[s]["data"]) == 13)
    t0 = time.monotonic()
    c.pump(lambda: c.closed, timeout=10)
    assert time.monotonic() - t0 < 5 * TIME_SCALE
    c.close()


def test_a_head_over_max_request_head_is_431(h2srv):
    """The header list is held to max_request_head (8k here), as HTTP/1.1's
    head is, and the connection goes on."""
    c = H2(h2srv)
    (r,) = c.wait(c.request("/hello", headers=[("x-big", "a" * 9000)]))
    assert r["headers"][":status"] == "431"
    (r,) = c.wait(c.request("/hello"))
    assert bytes(r["data"]) == b"Hello, World!"
    c.close()


def test_continuation_flood_ends_the_connection(h2srv):
    """A header block in more CONTINUATION frames than allowed
    (CVE-2024-28182): the connection ends, no request runs, others are
    served."""
    c = H2(h2srv)
    c.pump(lambda: c.conn.remote_settings.max_concurrent_streams > 0)
    hdrs = [(":method", "GET"), (":path", "/hello"), (":scheme", "http"), (":authority", c.authority)]
    hdrs += [("x-%d" % i, "v") for i in range(40)]
    block = c.conn.encoder.encode(hdrs)
    sid = 1
    frames = len(block[:1]).to_bytes(3, "big") + b"\x01\x00" + sid.to_bytes(4, "big") + block[:1]
    for i in range(1, len(block)):
        flags = b"\x04" if i == len(block) - 1 else b"\x00"
        frames += b"\x00\x00\x01\x09" + flags + sid.to_bytes(4, "big") + block[i : i + 1]
    try:
        c.sock.sendall(frames)
    except OSError:
        pass
    data = b""
    try:
        while True:
            d = c.sock.recv(65536)
            if not d:
                break
            data += d
    except ConnectionResetError:
        pass
    c.close()
    assert b"Hello, World!" not in data
    p = curl(h2srv.url + "/hello")
    assert p.stdout == b"Hello, World!"


def test_a_zero_window_stalls_its_stream_only(make_server, tmp_path):
    """The client opens no window for the 1 MiB answer: that stream stops,
    the others are served, and it is reset at request_timeout."""
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, request_timeout="1s")
    (root / "1m.bin").write_bytes(MIB)
    c = H2(srv)
    c.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.flush()
    big = c.request("/1m.bin")
    hello = c.request("/hello")
    c.pump(lambda: c.streams[hello]["headers"] is not None)
    c.conn.increment_flow_control_window(13, stream_id=hello)
    c.flush()
    t0 = time.monotonic()
    (r,) = c.wait(hello)
    assert bytes(r["data"]) == b"Hello, World!"
    assert time.monotonic() - t0 < 0.8 * TIME_SCALE
    (r,) = c.wait(big, timeout=10)
    assert r["reset"] == 8 and not r["data"], r  # CANCEL, nothing sent
    c.close()


def test_reload_new_streams_take_the_new_config(make_server, tmp_path):
    """SIGHUP on a kept HTTP/2 connection: a stream in flight finishes on
    the old config, the streams opened after it see the new routes."""
    from test_reload import reload

    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, threads="1")
    c = H2(srv)
    (r,) = c.wait(c.request("/new"))
    assert r["headers"][":status"] == "404"  # not yet
    sse = c.request("/sse?count=3&interval=400")
    c.pump(lambda: len(c.streams[sse]["data"]) > 0)
    reload(srv, srv.config.read_text().replace("handler /hello hello_world", "handler /hello hello_world\n    handler /new hello_world"))
    (r,) = c.wait(c.request("/new"))
    assert bytes(r["data"]) == b"Hello, World!"
    (r,) = c.wait(sse)
    assert r["ended"] and r["data"].count(b"event: tick") == 3
    c.close()


def test_provoked_stream_errors_end_the_connection(h2srv):
    """Streams the client makes the server reset (MadeYouReset,
    CVE-2025-8671: here HEADERS without :path), past a bounded rate: GOAWAY
    ENHANCE_YOUR_CALM; other clients are served."""
    c = H2(h2srv)
    c.pump(lambda: c.conn.remote_settings.max_concurrent_streams > 0)
    hdrs = [(":method", "GET"), (":scheme", "http"), (":authority", c.authority)]
    frames = b""
    for i in range(400):
        block = c.conn.encoder.encode(hdrs)
        sid = 1 + 2 * i
        frames += len(block).to_bytes(3, "big") + b"\x01\x05" + sid.to_bytes(4, "big") + block
    try:
        c.sock.sendall(frames)
    except OSError:
        pass
    data = b""
    try:
        while True:
            d = c.sock.recv(65536)
            if not d:
                break
            data += d
    except ConnectionResetError:
        pass
    c.close()
    i, resets, goaway = 0, 0, None
    while i + 9 <= len(data):
        n, t = int.from_bytes(data[i : i + 3], "big"), data[i + 3]
        if t == 3:
            resets += 1
        if t == 7:
            goaway = int.from_bytes(data[i + 13 : i + 17], "big")
        i += 9 + n
    assert goaway == 11 and 150 <= resets <= 250, (goaway, resets)
    p = curl(h2srv.url + "/hello")
    assert p.stdout == b"Hello, World!"


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])


def test_ping_flood_from_a_client_that_never_reads(make_server, tmp_path):
    """PINGs (and SETTINGS) sent as fast as possible by a client that reads
    nothing: the answers fill the socket, the server stops reading that
    connection, its memory stays bounded (8 MiB; 300 KiB measured), others are served, and the
    connection ends at request_timeout."""
    import threading

    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, request_timeout="2s", threads="1")
    s = socket.create_connection((srv.host, srv.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    ping = b"\x00\x00\x08\x06\x00\x00\x00\x00\x00" + b"12345678"
    settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + settings)
    before = rss_kb(srv.proc.pid)
    sent = [0]

    def flood():
        try:
            for _ in range(2000):  # 37 MB, more than any socket buffers
                s.sendall((ping * 50 + settings * 10) * 20)
                sent[0] += 1
        except OSError:
            pass

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    time.sleep(1.0 * TIME_SCALE)
    p = curl(srv.url + "/hello")
    assert p.stdout == b"Hello, World!"
    t.join(20 * TIME_SCALE)
    assert not t.is_alive(), "the connection was never ended"
    assert sent[0] < 2000  # it stopped taking them, then ended the connection
    # ASan's quarantine keeps what was freed: a looser bound there
    from test_modules import sanitized_build

    grown = rss_kb(srv.proc.pid) - before
    print("RSS grew by %d KiB" % grown)
    if not WRAPPER:  # under valgrind, the RSS is valgrind's
        assert grown < (128 if sanitized_build() else 8) * 1024
    s.close()


def test_filters_apply_to_streams(make_server, tmp_path):
    """The site's filters run for HTTP/2 streams as for HTTP/1.1 requests:
    a rewrite before routing, an access deny before the handler, a headers
    section on the answer (a file and a 304 alike)."""
    root = tmp_path / "wwwroot"
    site = ("site {\n"
            "    rewrite ^/old$ /hello\n"
            "    access /admin {\n        deny = all\n    }\n"
            "    headers / {\n        set X-Test = \"a; b\"\n    }\n"
            "    handler /hello hello_world\n"
            "    handler /admin hello_world\n"
            "    serve_files / {\n        path = %s\n    }\n"
            "}\n" % root)
    srv = make_server(site=site)
    p = curl("-i", srv.url + "/old")
    assert p.returncode == 0, p.stderr
    head, _, body = p.stdout.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/2 200") and body == b"Hello, World!", p.stdout
    assert b"\r\nx-test: a; b" in head, head
    p = curl("-o", "/dev/null", "-w", "%{http_code}", srv.url + "/admin")
    assert p.stdout == b"403", p.stdout
    (root / "f.txt").write_bytes(b"file\n")
    p = curl("-i", srv.url + "/f.txt")
    head = p.stdout.partition(b"\r\n\r\n")[0]
    etag = [l.split(b": ", 1)[1] for l in head.split(b"\r\n") if l.lower().startswith(b"etag:")][0]
    assert b"\r\nx-test: a; b" in head, head
    p = curl("-i", "-H", b"If-None-Match: " + etag, srv.url + "/f.txt")
    head = p.stdout.partition(b"\r\n\r\n")[0]
    assert head.startswith(b"HTTP/2 304") and b"\r\nx-test: a; b" in head, head


NO_RFC7540_PRIORITIES = 9  # RFC 9218 section 2.1


def test_rfc7540_client_gets_no_rfc9218_setting(h2srv):
    """A client that does not send SETTINGS_NO_RFC7540_PRIORITIES = 1
    keeps RFC 7540's scheme: the server's SETTINGS do not carry it (nghttp2
    would otherwise ignore PRIORITY frames and forget closed streams)."""
    c = H2(h2srv)
    (r,) = c.wait(c.request("/hello"))  # the server's SETTINGS came before
    assert r["headers"][":status"] == "200"
    assert NO_RFC7540_PRIORITIES not in c.conn.remote_settings
    assert c.conn.remote_settings.max_concurrent_streams == 128
    c.close()


@pytest.mark.parametrize("how", ["field", "priority_update"])
def test_priorities_urgent_small_body_before_a_large_one(make_server, tmp_path, how):
    """RFC 9218: a 1 MiB body asked at urgency 7 and, right after it in
    the same write, a 128 KiB one at urgency 0 (by the `priority` field,
    or asked at 7 and made 0 by a PRIORITY_UPDATE that follows): with a window
    that holds both, the urgent one goes out whole before the large one's
    DATA (round robin, RFC 7540's default, would interleave them: the
    small one would end about 128 KiB into the large one)."""
    root = tmp_path / "prio"
    root.mkdir()
    (root / "big.bin").write_bytes(MIB)
    small = os.urandom(128 << 10)
    (root / "small.bin").write_bytes(small)
    srv = make_server(site="site {\n    serve_files / {\n        path = %s\n    }\n}\n" % root)
    # an RFC 9218 client says so in its first SETTINGS; the server's say it too
    c = H2(srv, settings={NO_RFC7540_PRIORITIES: 1})
    c.pump(lambda: NO_RFC7540_PRIORITIES in c.conn.remote_settings, timeout=5)
    assert c.conn.remote_settings[NO_RFC7540_PRIORITIES] == 1
    # the client's windows hold both bodies: only the server's order counts
    c.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
    c.conn.increment_flow_control_window(1 << 24)
    c.flush()
    big_at_small_end = []

    def on_event(ev, base=c.on_event):
        base(ev)
        if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == s_small:
            big_at_small_end.append(len(c.streams[s_big]["data"]))

    c.on_event = on_event
    # both HEADERS in one write: the server reads them in one turn
    s_big = c.conn.get_next_available_stream_id()
    hdrs = [(":method", "GET"), (":scheme", "http"), (":authority", c.authority)]
    c.conn.send_headers(s_big, hdrs + [(":path", "/big.bin"), ("priority", "u=7")], end_stream=True)
    s_small = s_big + 2
    if how == "field":
        c.conn.send_headers(s_small, hdrs + [(":path", "/small.bin"), ("priority", "u=0")], end_stream=True)
    else:  # asked at urgency 7 too, then PRIORITY_UPDATE (type 0x10, on stream 0) makes it 0
        c.conn.send_headers(s_small, hdrs + [(":path", "/small.bin"), ("priority", "u=7")], end_stream=True)
        pu = struct.pack("!I", s_small) + b"u=0"
        c.sock.sendall(c.conn.data_to_send() + struct.pack("!I", len(pu))[1:] + b"\x10\x00" + b"\0" * 4 + pu)
    for s in (s_big, s_small):
        c.streams[s] = {"headers": None, "data": bytearray(), "ended": False, "reset": None, "t_end": None}
    c.flush()
    rb, rs = c.wait(s_big, s_small, timeout=20)
    assert bytes(rb["data"]) == MIB and bytes(rs["data"]) == small
    assert rs["t_end"] <= rb["t_end"]
    # the urgent body was whole before much of the large one came
    assert big_at_small_end and big_at_small_end[0] < 32 * 1024, big_at_small_end
    c.close()


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_hpack_bomb_is_bounded(h2srv):
    """An HPACK bomb: one 4000-byte field put in the dynamic table, then
    referenced 2000 times by its one-byte index: a 6 KB header block that
    decodes to 8 MB. Twenty of them on one connection: each ends as the
    431 of an oversized header list (or a reset, or the connection's end),
    the server's memory and CPU stay bounded, and another client is
    served meanwhile."""
    srv = h2srv
    before_rss, before_cpu = rss_kb(srv.proc.pid), cpu_s(srv.proc.pid)
    s = socket.create_connection((srv.host, srv.port), timeout=10 * TIME_SCALE)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    auth = srv.hostport.encode()
    for i in range(20):
        sid = 1 + 2 * i
        block = b"\x82\x86" + b"\x04\x06/hello" + b"\x01" + bytes([len(auth)]) + auth
        if i == 0:  # literal with incremental indexing, new name: entry 62
            block += b"\x40\x03x-b" + b"\x7f" + bytes([(4000 - 127) & 0x7F | 0x80, (4000 - 127) >> 7]) + b"a" * 4000
        block += b"\xbe" * 2000  # indexed field 62, 2000 times
        try:
            s.sendall(len(block).to_bytes(3, "big") + b"\x01\x05" + sid.to_bytes(4, "big") + block)
        except OSError:
            break
    # the server's frames, read until every stream is answered or reset,
    # or the connection ends; header blocks decoded with hpack
    import hpack

    dec = hpack.Decoder()
    statuses, resets, goaway = {}, set(), False
    s.settimeout(5 * TIME_SCALE)
    buf = b""
    try:
        while len(statuses) + len(resets) < 20 and not goaway:
            d = s.recv(65536)
            if not d:
                break
            buf += d
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n, kind, flags, sid = int.from_bytes(buf[:3], "big"), buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                payload, buf = buf[9 : 9 + n], buf[9 + n :]
                if kind == 1:  # HEADERS (no padding or priority from this server)
                    statuses[sid] = dict(dec.decode(payload))[":status"]
                elif kind == 3:
                    resets.add(sid)
                elif kind == 7:
                    goaway = True
    except (socket.timeout, ConnectionResetError):
        pass
    assert set(statuses.values()) <= {"431"}, statuses
    assert statuses or resets or goaway
    # another client is served at once, the server did not decode 160 MB
    p = curl(srv.url + "/hello")
    assert p.stdout == b"Hello, World!"
    s.close()
    grown = rss_kb(srv.proc.pid) - before_rss
    used = cpu_s(srv.proc.pid) - before_cpu
    print("431: %d, resets: %d, GOAWAY: %s, RSS grew by %d KiB, CPU %.3f s" % (len(statuses), len(resets), goaway, grown, used))
    if not WRAPPER:
        from test_modules import sanitized_build

        assert grown < (64 if sanitized_build() else 8) * 1024
        assert used < (5.0 if sanitized_build() else 1.0)
