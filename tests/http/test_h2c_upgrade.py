"""`Upgrade: h2c` (RFC 7540 3.2) on a cleartext listener with
`h2c_upgrade = true`: a 101, then the request is answered as stream 1 of an
HTTP/2 connection that goes on. Off by default: the request is served as
HTTP/1.1, the Upgrade ignored. A request with a body is served as HTTP/1.1
too (a server may ignore an Upgrade): its body is never read before a
switch."""

import base64
import socket
import subprocess

import h2.config
import h2.connection
import h2.events
import pytest

from conftest import free_port
from rawhttp import TIME_SCALE

SITE = (
    "listener 127.0.0.1:%d {\n    h2c_upgrade = true\n}\n"
    "site {\n    handler /hello hello_world\n    handler /echo echo\n}\n"
)


@pytest.fixture
def srv(make_server):
    up = free_port()
    s = make_server(site=SITE % up, max_request_body="1M")
    s.up_url = "http://127.0.0.1:%d" % up
    s.up_port = up
    return s


def curl(*args):
    p = subprocess.run(
        ["curl", "-sS", "--http2", "--max-time", str(int(20 * TIME_SCALE))] + list(args),
        capture_output=True,
        timeout=25 * TIME_SCALE,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_curl_upgrades_where_the_listener_allows_it(srv):
    out = curl("-w", "\n%{http_version} %{http_code}", srv.up_url + "/hello")
    assert out == b"Hello, World!\n2 200"


def test_off_by_default_the_upgrade_is_ignored(srv):
    out = curl("-w", "\n%{http_version} %{http_code}", srv.url + "/hello")
    assert out == b"Hello, World!\n1.1 200"


def test_the_connection_goes_on_as_http2(srv):
    """Two URLs, one connection: the second request is a stream of the
    HTTP/2 connection the first one's upgrade started."""
    out = curl("-w", "\n%{http_version} %{num_connects}\n", srv.up_url + "/hello", srv.up_url + "/hello?2")
    assert out == b"Hello, World!\n2 1\nHello, World!\n2 0\n", out


def raw(port, request, timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout * TIME_SCALE)
    s.sendall(request)
    return s


def recv_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def test_a_post_with_a_body_is_served_as_http1(srv):
    """RFC 7540 3.2 would have the whole body read before the switch; the
    server may ignore the Upgrade instead, and does: HTTP/1.1 answers."""
    settings = base64.urlsafe_b64encode(b"\x00\x03\x00\x00\x00\x64").rstrip(b"=")
    s = raw(
        srv.up_port,
        b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        b"HTTP2-Settings: " + settings + b"\r\nContent-Length: 5\r\n\r\nhello",
    )
    head, rest = recv_head(s)
    assert head.startswith(b"HTTP/1.1 200"), head
    while len(rest) < 5:
        rest += s.recv(100)
    assert rest == b"hello"
    s.close()


def test_h2_library_upgrade_stream_1_then_more_streams(srv):
    """The h2 library's client upgrade: stream 1 is the HTTP/1.1 request's
    answer; the client's own streams follow on the same connection."""
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    settings = c.initiate_upgrade_connection().decode()
    s = raw(
        srv.up_port,
        ("GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\n"
         "Upgrade: h2c\r\nHTTP2-Settings: %s\r\n\r\n" % settings).encode(),
    )
    head, rest = recv_head(s)
    assert head.startswith(b"HTTP/1.1 101"), head
    assert b"Upgrade: h2c" in head
    s.sendall(c.data_to_send())
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"),
                         (":authority", "127.0.0.1")], end_stream=False)
    c.send_data(sid, b"over h2", end_stream=True)
    s.sendall(c.data_to_send())
    got = {1: [None, b"", False], sid: [None, b"", False]}
    data = rest
    while not (got[1][2] and got[sid][2]):
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                got[ev.stream_id][0] = dict(ev.headers)
            elif isinstance(ev, h2.events.DataReceived):
                got[ev.stream_id][1] += ev.data
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                got[ev.stream_id][2] = True
        s.sendall(c.data_to_send())
        if not (got[1][2] and got[sid][2]):
            data = s.recv(65536)
            assert data, got
    assert got[1][0][":status"] == "200" and got[1][1] == b"Hello, World!", got
    assert got[sid][0][":status"] == "200" and got[sid][1] == b"over h2", got
    s.close()


@pytest.mark.parametrize("settings", ["not*base64", "AAMAAABk=", "AAMA"])
def test_a_bad_http2_settings_is_400(srv, settings):
    s = raw(
        srv.up_port,
        ("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
         "HTTP2-Settings: %s\r\n\r\n" % settings).encode(),
    )
    head, _ = recv_head(s)
    assert head.startswith(b"HTTP/1.1 400"), head
    s.close()


def test_without_http2_settings_in_connection_no_upgrade(srv):
    s = raw(
        srv.up_port,
        b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABk\r\n\r\n",
    )
    head, _ = recv_head(s)
    assert head.startswith(b"HTTP/1.1 200"), head
    s.close()
