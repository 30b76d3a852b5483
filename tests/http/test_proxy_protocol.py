"""PROXY protocol v1 and v2 on a listener with `proxy_protocol = true`.

A server with two listeners, one asking for the PROXY header and one plain,
and the greet module's `remote_addr` handler, which answers what
colibri_req_remote_addr() says.  On the proxy listener the address comes
from the header (LOCAL and UNKNOWN keep the socket's own); a malformed or
missing header closes the connection without an answer; on the plain
listener a PROXY header is a bad request.  The header may arrive in pieces,
alone, or with pipelined requests behind it, and it holds for every request
of the connection, also after the connection idled."""

import re
import signal
import socket
import struct
import time

import pytest


from rawhttp import Closed, RawConn
from test_config_errors import check, run_config
from test_modules import greet_so, spawn  # noqa: F401 (fixtures)

SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v1(src="203.0.113.9", dst="127.0.0.1", sport=40000, dport=8443, proto=None):
    proto = proto or ("TCP6" if ":" in src else "TCP4")
    return ("PROXY %s %s %s %d %d\r\n" % (proto, src, dst, sport, dport)).encode()


def v2(src="203.0.113.9", dst="127.0.0.1", sport=40000, dport=8443, cmd=0x21, tlvs=b""):
    fam = socket.AF_INET6 if ":" in src else socket.AF_INET
    body = socket.inet_pton(fam, src) + socket.inet_pton(fam, dst) + struct.pack(">HH", sport, dport)
    body += tlvs
    famb = 0x21 if fam == socket.AF_INET6 else 0x11
    return SIG + bytes([cmd, famb]) + struct.pack(">H", len(body)) + body


def v2_local():
    return SIG + bytes([0x20, 0x00, 0, 0])


def get(path="/addr", close=False):
    h = "GET %s HTTP/1.1\r\nHost: t\r\n" % path
    if close:
        h += "Connection: close\r\n"
    return (h + "\r\n").encode()


class Ports:
    def __init__(self, proxy, plain):
        self.proxy, self.plain = proxy, plain

    def conn(self, which="proxy", timeout=5.0):
        return RawConn("127.0.0.1", getattr(self, which), timeout)


@pytest.fixture(params=["reuseport", "thread"])
def srv(request, tmp_path, spawn, greet_so):  # noqa: F811
    return start(tmp_path, spawn, greet_so, accept=request.param)


def start(tmp_path, spawn, greet_so, accept="reuseport", threads=2, extra=""):  # noqa: F811
    # port 0, read back from the "listening on" lines (in listener order):
    # a port picked free beforehand can be taken before colibri binds it
    proxy = plain = 0
    conf = tmp_path / "proxy.conf"
    conf.write_text(
        "module %s\n"
        "listener 127.0.0.1:%d {\n"
        "    proxy_protocol = true\n"
        "}\n"
        "listener 127.0.0.1:%d\n"
        "threads = %d\n"
        "accept = %s\n"
        "%s"
        "site {\n"
        "    handler /addr remote_addr\n"
        "    handler /echo echo\n"
        "}\n" % (greet_so, proxy, plain, threads, accept, extra)
    )
    proc, urls, _ = spawn(conf, tmp_path, listeners=2)
    proxy, plain = (int(u.rsplit(":", 1)[1]) for u in urls[:2])
    ports = Ports(proxy, plain)
    ports.proc = proc
    return ports


def ask(ports, header, path="/addr"):
    """The header and one request on a fresh proxy connection: the response."""
    with ports.conn() as c:
        c.send(header + get(path))
        return c.read_response()


def assert_closed_silently(c):
    """The server closes without a byte of answer."""
    with pytest.raises(Closed):
        c.read_response(timeout=3)


# ---- good headers ------------------------------------------------------------


def test_v1_tcp4(srv):
    r = ask(srv, v1("203.0.113.9"))
    assert r.status == 200 and r.body == b"203.0.113.9\n"


def test_v1_tcp6(srv):
    r = ask(srv, v1("2001:db8::42", "::1"))
    assert r.status == 200 and r.body == b"2001:db8::42\n"


def test_v1_unknown_keeps_the_socket_address(srv):
    r = ask(srv, b"PROXY UNKNOWN\r\n")
    assert r.status == 200 and r.body == b"127.0.0.1\n"
    r = ask(srv, b"PROXY UNKNOWN 1.2.3.4 5.6.7.8 1 2\r\n")
    assert r.body == b"127.0.0.1\n"


def test_v2_ipv4(srv):
    r = ask(srv, v2("198.51.100.20"))
    assert r.status == 200 and r.body == b"198.51.100.20\n"


def test_v2_ipv6(srv):
    r = ask(srv, v2("2001:db8::7", "2001:db8::1"))
    assert r.status == 200 and r.body == b"2001:db8::7\n"


def test_v2_tlvs_are_skipped(srv):
    tlvs = b"\x01\x00\x02h2" + b"\x02\x00\x0bexample.com" + b"\x04\x00\x00"
    r = ask(srv, v2("192.0.2.33", tlvs=tlvs))
    assert r.status == 200 and r.body == b"192.0.2.33\n"


def test_v2_local_keeps_the_socket_address(srv):
    r = ask(srv, v2_local())
    assert r.status == 200 and r.body == b"127.0.0.1\n"


def test_request_is_parsed_after_the_header(srv):
    r = ask(srv, v1(), "/echo")
    assert r.status == 200
    assert r.body.startswith(b"GET /echo HTTP/1.1\r\n"), r.body
    assert b"PROXY" not in r.body


# ---- the connection goes on ------------------------------------------------------


def test_keep_alive_after_one_header(srv):
    with srv.conn() as c:
        c.send(v1("203.0.113.1"))
        for i in range(4):
            time.sleep(0.05 if i else 0)  # the connection idles between requests
            c.send(get())
            r = c.read_response()
            assert r.status == 200 and r.body == b"203.0.113.1\n", (i, r)


def test_pipelined_behind_the_header(srv):
    with srv.conn() as c:
        c.send(v2("192.0.2.77") + get() + get() + get(close=True))
        for _ in range(3):
            r = c.read_response()
            assert r.body == b"192.0.2.77\n"
        c.wait_closed()


def test_each_connection_keeps_its_own_address(tmp_path, spawn, greet_so):  # noqa: F811
    # one worker: the idle connections share its pooled contexts
    ports = start(tmp_path, spawn, greet_so, threads=1)
    conns = [ports.conn() for _ in range(4)]
    try:
        addrs = ["192.0.2.%d" % (i + 1) for i in range(3)] + ["2001:db8::99"]
        for c, a in zip(conns, addrs):
            c.send(v1(a, "::1" if ":" in a else "127.0.0.1"))
        for round in range(3):
            for c, a in zip(conns, addrs):
                c.send(get())
                r = c.read_response()
                assert r.body == (a + "\n").encode(), (round, a, r)
    finally:
        for c in conns:
            c.close()


@pytest.mark.parametrize("version", [1, 2])
def test_header_split_across_segments(srv, version):
    header = v1("203.0.113.50") if version == 1 else v2("203.0.113.50")
    with srv.conn() as c:
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(header)):
            c.send(header[i : i + 1])
            time.sleep(0.002)
        time.sleep(0.05)  # the header alone: the connection idles
        c.send(get())
        r = c.read_response()
        assert r.body == b"203.0.113.50\n"


# ---- bad, missing, unexpected ---------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        b"PROXY TCP4 203.0.113.9 127.0.0.1 65536 80\r\n",
        b"PROXY TCP4 203.0.113.300 127.0.0.1 1 80\r\n",
        b"PROXY TCP6 203.0.113.9 127.0.0.1 1 80\r\n",
        b"PROXY TCP4 203.0.113.9 127.0.0.1 1 80\n",
        b"PROXY UNKNOWN " + b"x" * 120 + b"\r\n",
        v2().replace(b"QUIT", b"QUIX"),
        b"\r\n\r\n\x00\r\nQUIT\n\x11\x11\x00\x0c" + bytes(12),  # version 1 in binary
        SIG + b"\x21\x12\x00\x0c" + bytes(12),  # UDP
        SIG + b"\x21\x11\x00\x0b" + bytes(11),  # length short of the addresses
        SIG + b"\x21\x11\x00\x10" + bytes(12) + b"\x01\x00\x09h",  # TLV past the end
    ],
    ids=["port", "addr", "family", "lf", "long", "sig", "version", "udp", "short", "tlv"],
)
def test_malformed_header_closes_without_answer(srv, header):
    with srv.conn() as c:
        c.send(header + get())
        assert_closed_silently(c)


def test_missing_header_closes_without_answer(srv):
    with srv.conn() as c:
        c.send(get())
        assert_closed_silently(c)


def test_header_too_large_for_the_buffer_closes(srv):
    with srv.conn() as c:
        body = bytes(12) + b"\x04\xff\xf0" + bytes(0xFFF0)
        try:
            c.send(SIG + b"\x21\x11" + struct.pack(">H", len(body)) + body)
        except OSError:
            pass  # closed while we were still sending
        assert_closed_silently(c)


def test_incomplete_header_times_out_without_408(tmp_path, spawn, greet_so):  # noqa: F811
    ports = start(tmp_path, spawn, greet_so, extra="request_timeout = 1s\n")
    with ports.conn() as c:
        c.send(b"PROXY TCP4 203.0.")
        t = time.monotonic()
        assert_closed_silently(c)
        assert time.monotonic() - t < 3


@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_graceful_stop_answers_the_request_behind_a_header(tmp_path, spawn, greet_so, accept):  # noqa: F811
    """A balancer sends the header as it connects and the request right
    behind it: a graceful stop between the two must not close the
    connection as if it were idle, but answer the request (and close)."""
    ports = start(tmp_path, spawn, greet_so, accept=accept)
    with ports.conn() as c:
        c.send(v2("198.51.100.7"))
        time.sleep(0.2)  # the header alone is read
        ports.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)  # listeners and idle connections are closed by now
        c.send(get())
        r = c.read_response()
        assert r.status == 200 and r.body == b"198.51.100.7\n"
        assert r.header("connection") == "close"
        assert c.wait_closed(2.0)
    assert ports.proc.wait(5) == 0


@pytest.mark.parametrize("header", [v1(), v2()], ids=["v1", "v2"])
def test_header_to_a_plain_listener_is_a_bad_request(srv, header):
    with srv.conn("plain") as c:
        c.send(header + get())
        r = c.read_response()
        assert r.status == 400
        c.wait_closed()


def test_plain_listener_is_unchanged(srv):
    with srv.conn("plain") as c:
        c.send(get())
        r = c.read_response()
        assert r.status == 200 and r.body == b"127.0.0.1\n"


def test_proxy_protocol_false_is_a_plain_listener(tmp_path, spawn, greet_so):  # noqa: F811
    conf = tmp_path / "off.conf"
    conf.write_text(
        "module %s\nlistener 127.0.0.1:0 {\n    proxy_protocol = false\n}\n"
        "site {\n    handler /addr remote_addr\n}\n" % greet_so
    )
    _, urls, _ = spawn(conf, tmp_path)
    port = int(urls[0].rsplit(":", 1)[1])
    with RawConn("127.0.0.1", port, 5) as c:
        c.send(get())
        assert c.read_response().body == b"127.0.0.1\n"


# ---- config ----------------------------------------------------------------------


def listener_block(*lines):
    return "listener 127.0.0.1:0 {\n%s}\n" % ("".join("    %s\n" % l for l in lines))


def test_config_bad_value(tmp_path):
    conf, p = run_config(tmp_path, listener_block("proxy_protocol = maybe"))
    check(p, conf, 2, "proxy_protocol")


def test_config_unknown_key(tmp_path):
    conf, p = run_config(tmp_path, listener_block("proxy_protocol = true", "proxy_protocl = true"))
    check(p, conf, 3, "proxy_protocl", ["unknown key"])


def test_config_duplicate_key(tmp_path):
    conf, p = run_config(tmp_path, listener_block("proxy_protocol = true", "proxy_protocol = false"))
    check(p, conf, 3, "proxy_protocol", ["duplicate key"])


def test_config_bad_address_in_a_block(tmp_path):
    conf, p = run_config(tmp_path, "listener 127.0.0.1:99999 {\n    proxy_protocol = true\n}\n")
    check(p, conf, 1, "listener")


# ---- the access log -------------------------------------------------------------


def test_access_log_shows_the_proxied_client(tmp_path, spawn, greet_so):  # noqa: F811
    """The address of the PROXY header is the client's in the access log,
    for every request of the connection; a plain listener logs the socket's."""
    log = tmp_path / "access.log"
    ports = start(tmp_path, spawn, greet_so, extra="access_log = %s\n" % log)
    with ports.conn() as c:
        c.send(v1("198.51.100.23") + get("/echo"))
        assert c.read_response().status == 200
        c.send(get("/echo"))
        assert c.read_response().status == 200
    with ports.conn("plain") as c:
        c.send(get("/echo"))
        assert c.read_response().status == 200
    deadline = time.monotonic() + 5
    lines = []
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        if len(lines) >= 3:
            break
        time.sleep(0.05)
    assert len(lines) == 3, lines
    # two workers buffer their own lines: the file's order is not the requests'
    assert sorted(l.split(" ", 1)[0] for l in lines) == ["127.0.0.1", "198.51.100.23", "198.51.100.23"], lines
