"""HTTP/2 (h2c, prior knowledge), more: connection-specific fields a handler
adds are dropped from a stream's HEADERS (and kept over HTTP/1.1), the
SETTINGS and connection window the server announces, a client that stops
reading a large download is cut off without holding up others, and SIGTERM
with a download in flight (GOAWAY, the download ends whole, new streams
are not served, exit 0)."""

import hashlib
import os
import signal
import socket
import struct
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.settings
import hpack
import pytest

from rawhttp import TIME_SCALE, recv_until
from test_http2 import H2, SITE, curl
from test_modules import build_greet

HOPFIELDS_C = Path(__file__).resolve().parent / "modules" / "hopfields.c"
HOP_NAMES = ("connection", "keep-alive", "upgrade", "transfer-encoding", "proxy-connection")

SettingCodes = h2.settings.SettingCodes


@pytest.fixture(scope="session")
def hopfields_so(tmp_path_factory):
    return build_greet(tmp_path_factory.mktemp("hopfields") / "libhopfields.so", src=HOPFIELDS_C)


def http1_head(srv, target):
    """The head of an HTTP/1.1 answer, as a list of (lowercased name, value)."""
    with socket.create_connection((srv.host, srv.port), timeout=5 * TIME_SCALE) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target.encode())
        data = recv_until(s, lambda d: b"\r\n\r\n" in d, 5 * TIME_SCALE)
    head = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    assert head[0].startswith("HTTP/1.1 200 "), head
    return [(n.strip().lower(), v.strip()) for n, _, v in (l.partition(":") for l in head[1:])]


def test_connection_specific_fields_are_dropped(make_server, hopfields_so):
    """A handler's Connection, Keep-Alive, Upgrade (named in capitals),
    Transfer-Encoding and Proxy-Connection fields (RFC 9113 8.2.2: a
    malformed answer) are not in its stream's HEADERS, for a buffered and a
    streamed answer alike; X-Kept is. Over HTTP/1.1 the same route sends
    them all."""
    srv = make_server(site="module %s\nsite {\n    handler /fields hop_fields\n}\n" % hopfields_so)
    for target in ("/fields", "/fields?stream=1"):
        names = [n for n, _ in http1_head(srv, target)]
        assert "x-kept" in names and "keep-alive" in names and "upgrade" in names, names
        # the fields as they come, unchecked by the h2 library
        c = H2(srv)
        c.conn.config.validate_inbound_headers = False
        (r,) = c.wait(c.request(target))
        c.close()
        assert r["ended"] and r["reset"] is None, r
        assert r["headers"][":status"] == "200" and r["headers"].get("x-kept") == "yes", r["headers"]
        assert [n for n in HOP_NAMES if n in r["headers"]] == [], r["headers"]
        assert bytes(r["data"]) == b"fields\n"
        # a client that checks them (as the h2 library does) takes the answer
        c = H2(srv)
        (r,) = c.wait(c.request(target))
        c.close()
        assert r["ended"] and r["headers"][":status"] == "200" and r["headers"]["x-kept"] == "yes", r


def header_list_size(hdrs):
    """RFC 9113 6.5.2: each field's name and value lengths plus 32."""
    return sum(len(n.encode()) + len(v.encode()) + 32 for n, v in hdrs)


def test_settings_and_connection_window(make_server, tmp_path):
    """The server's SETTINGS carry MAX_CONCURRENT_STREAMS =
    http2_max_concurrent_streams, INITIAL_WINDOW_SIZE = http2_initial_window
    and MAX_HEADER_LIST_SIZE = max_request_head; a WINDOW_UPDATE on stream 0
    raises the connection's window from 65535 to http2_initial_window. A
    header list of the size advertised is served; a head over
    max_request_head gets 431."""
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, http2_initial_window="2M", http2_max_concurrent_streams="50",
                      max_request_head="16k")
    c = H2(srv)
    events = []

    def on_event(ev, base=c.on_event):
        events.append(ev)
        base(ev)

    c.on_event = on_event
    window_updates = lambda: [e for e in events if isinstance(e, h2.events.WindowUpdated) and e.stream_id == 0]
    settings = lambda: [e for e in events if isinstance(e, h2.events.RemoteSettingsChanged)]
    # the answer to a first request comes after the server's preface (its
    # SETTINGS and WINDOW_UPDATE): by then both are in
    (r,) = c.wait(c.request("/hello"))
    assert r["headers"][":status"] == "200", r
    assert settings(), "no SETTINGS from the server"
    changed = settings()[0].changed_settings
    got = {code: changed[code].new_value for code in changed}
    assert got.get(SettingCodes.MAX_CONCURRENT_STREAMS) == 50, got
    assert got.get(SettingCodes.INITIAL_WINDOW_SIZE) == 2 << 20, got
    assert got.get(SettingCodes.MAX_HEADER_LIST_SIZE) == 16 << 10, got
    assert [e.delta for e in window_updates()] == [(2 << 20) - 65535]
    assert c.conn.outbound_flow_control_window == 2 << 20
    # a client that keeps to the advertised size is served
    hdrs = [(":method", "GET"), (":path", "/hello"), (":scheme", "http"), (":authority", c.authority)]
    fill = (16 << 10) - header_list_size(hdrs + [("x-fill", "")])
    (r,) = c.wait(c.request("/hello", headers=[("x-fill", "f" * fill)]))
    assert header_list_size(hdrs + [("x-fill", "f" * fill)]) == 16 << 10
    assert r["headers"][":status"] == "200" and bytes(r["data"]) == b"Hello, World!", r
    (r,) = c.wait(c.request("/hello", headers=[("x-big", "b" * (16 << 10))]))
    assert r["headers"][":status"] == "431", r
    c.close()


def server_side_open(srv, client_port):
    """Whether the server still holds its socket of the connection from
    client_port (/proc/net/tcp: an entry with an inode; a socket the server
    closed is gone, or an orphan with inode 0, while its FIN waits)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        local, remote = f[1].rsplit(":", 1)[1], f[2].rsplit(":", 1)[1]
        if int(local, 16) == srv.port and int(remote, 16) == client_port:
            return f[9] != "0"
    return False


def timed_hello(srv):
    t0 = time.monotonic()
    p = curl(srv.url + "/hello", timeout=5)
    return p.stdout, time.monotonic() - t0


def test_a_client_that_stops_reading_is_cut_off(make_server, tmp_path):
    """Three 20 MiB downloads on one connection, with windows that hold
    them all, by a client that then never reads: the server's writes
    block on the socket. With request_timeout = 2s the server closes that
    connection within 10 s, and meanwhile another client (on the same
    single worker) gets /hello at once."""
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root, request_timeout="2s", threads="1")
    (root / "20m.bin").write_bytes(os.urandom(20 << 20))
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    s.settimeout(5 * TIME_SCALE)
    s.connect((srv.host, srv.port))
    port = s.getsockname()[1]
    big = (1 << 31) - 1
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.local_settings = h2.settings.Settings(client=True, initial_values={SettingCodes.INITIAL_WINDOW_SIZE: big})
    conn.initiate_connection()
    s.sendall(conn.data_to_send())
    first = b""
    while len(first) < 9:  # the server's SETTINGS: it has taken the connection
        d = s.recv(9 - len(first))
        assert d, "the server closed the connection"
        first += d
    assert first[3] == 4, first
    conn.increment_flow_control_window(big - 65535)
    hdrs = [(":method", "GET"), (":path", "/20m.bin"), (":scheme", "http"), (":authority", srv.hostport)]
    for sid in (1, 3, 5):
        conn.send_headers(sid, hdrs, end_stream=True)
    s.sendall(conn.data_to_send())
    t0 = time.monotonic()
    assert server_side_open(srv, port)
    slowest = 0.0
    closed_after = None
    next_hello = t0 + 0.5 * TIME_SCALE
    while time.monotonic() - t0 < 15 * TIME_SCALE:
        if not server_side_open(srv, port):
            closed_after = time.monotonic() - t0
            break
        if time.monotonic() >= next_hello:
            body, took = timed_hello(srv)
            assert body == b"Hello, World!"
            slowest = max(slowest, took)
            next_hello = time.monotonic() + 0.5 * TIME_SCALE
        time.sleep(0.05)
    print("closed after %s s; slowest /hello meanwhile %.3f s" % (closed_after, slowest))
    assert closed_after is not None and closed_after < 10 * TIME_SCALE, closed_after
    assert slowest < 1.0 * TIME_SCALE, slowest
    body, took = timed_hello(srv)
    assert body == b"Hello, World!" and took < 1.0 * TIME_SCALE
    # what the client reads now ends (FIN or reset) before the downloads do
    got, ended = 0, False
    try:
        while got < 3 * (20 << 20):
            d = s.recv(1 << 20)
            if not d:
                ended = True
                break
            got += len(d)
    except ConnectionResetError:
        ended = True
    except socket.timeout:
        pass
    s.close()
    assert ended and got < 3 * (20 << 20), (ended, got)


class RawH2:
    """A client of whole frames by hand (the h2 library refuses DATA after a
    GOAWAY): HPACK by the hpack library, flow control by WINDOW_UPDATEs as
    the DATA is read."""

    def __init__(self, srv, window):
        self.sock = socket.create_connection((srv.host, srv.port), timeout=10 * TIME_SCALE)
        self.authority = srv.hostport
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.buf = b""
        self.streams = {}  # id -> {"status", "data", "ended", "reset", "t_end"}
        self.goaway = None  # (last_stream_id, error_code, time)
        self.closed = False
        self.sock.sendall(
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
            + self.frame(4, 0, 0, struct.pack("!HI", SettingCodes.INITIAL_WINDOW_SIZE, window))
            + self.frame(8, 0, 0, struct.pack("!I", window - 65535))
        )

    @staticmethod
    def frame(kind, flags, sid, payload):
        return struct.pack("!I", len(payload))[1:] + bytes([kind, flags]) + struct.pack("!I", sid) + payload

    def request(self, sid, path):
        block = self.enc.encode([(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", self.authority)])
        self.streams[sid] = {"status": None, "data": bytearray(), "ended": False, "reset": None, "t_end": None}
        self.sock.sendall(self.frame(1, 0x5, sid, block))  # END_STREAM | END_HEADERS

    def read(self):
        """One recv's frames handled; the window given back for their DATA."""
        try:
            d = self.sock.recv(1 << 18)
        except socket.timeout:
            return  # nothing yet: the caller's deadline decides
        except ConnectionResetError:
            d = b""
        if not d:
            self.closed = True
            return
        self.buf += d
        out = b""
        consumed = {}
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + n:
                break
            kind, flags = self.buf[3], self.buf[4]
            sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            payload, self.buf = self.buf[9 : 9 + n], self.buf[9 + n :]
            st = self.streams.get(sid)
            if kind == 0:  # DATA (this server sends no padding)
                assert not flags & 0x8
                consumed[sid] = consumed.get(sid, 0) + n
                if st is not None:
                    st["data"] += payload
            elif kind == 1:  # HEADERS: decoded, as every block must be
                assert flags & 0x4 and not flags & 0x28, flags  # END_HEADERS, no padding or priority
                fields = dict(self.dec.decode(payload))
                if st is not None and st["status"] is None:
                    st["status"] = fields[":status"]
            elif kind == 3 and st is not None:
                st["reset"] = int.from_bytes(payload, "big")
            elif kind == 4 and not flags & 1:
                out += self.frame(4, 1, 0, b"")
            elif kind == 6 and not flags & 1:
                out += self.frame(6, 1, 0, payload)
            elif kind == 7:
                self.goaway = (int.from_bytes(payload[:4], "big") & 0x7FFFFFFF, int.from_bytes(payload[4:8], "big"), time.monotonic())
            if kind in (0, 1) and flags & 1 and st is not None:
                st["ended"], st["t_end"] = True, time.monotonic()
        total = sum(consumed.values())
        if total:
            out += self.frame(8, 0, 0, struct.pack("!I", total))
            for sid, n in consumed.items():
                if n and sid in self.streams and not self.streams[sid]["ended"]:
                    out += self.frame(8, 0, sid, struct.pack("!I", n))
        if out:
            try:
                self.sock.sendall(out)
            except OSError:
                pass


def test_sigterm_during_a_download(make_server, tmp_path):
    """SIGTERM while a 20 MiB file goes to a client that reads it steadily
    (about 16 MiB/s): GOAWAY(NO_ERROR) comes, its last stream id covers the
    download, which still ends whole (END_STREAM) within shutdown_timeout;
    a stream opened after the GOAWAY is not served (nor logged); the
    server exits 0."""
    root = tmp_path / "wwwroot"
    log = tmp_path / "access.log"
    shutdown_s = int(10 * TIME_SCALE)
    srv = make_server(site=SITE % root, shutdown_timeout="%ds" % shutdown_s, access_log=str(log))
    body = os.urandom(20 << 20)
    (root / "20m.bin").write_bytes(body)
    c = RawH2(srv, window=1 << 20)
    c.request(1, "/20m.bin")
    t_start = time.monotonic()
    t_sig = at_sig = late = None
    rate = 16 << 20  # bytes a second: the client's pace
    while not c.closed and time.monotonic() - t_start < 30 * TIME_SCALE:
        c.read()
        got = len(c.streams[1]["data"])
        if t_sig is None and got >= 2 << 20:
            t_sig, at_sig = time.monotonic(), got
            srv.send_signal(signal.SIGTERM)
        if c.goaway and late is None:
            late = 3  # the client's next stream
            try:
                c.request(late, "/hello")
            except OSError:
                pass
        ahead = t_start + got / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    st = c.streams[1]
    c.sock.close()
    assert t_sig is not None, "the download never began: %r" % st
    assert at_sig < len(body)
    assert c.goaway is not None, "no GOAWAY"
    last_id, code, t_goaway = c.goaway
    assert code == 0 and 1 <= last_id < late, c.goaway  # NO_ERROR, the download's stream covered
    assert st["reset"] is None and st["status"] == "200", (st["status"], st["reset"], len(st["data"]))
    assert st["ended"], "no END_STREAM: %d of %d bytes" % (len(st["data"]), len(body))
    assert t_goaway < st["t_end"], "the download was over before the GOAWAY"
    assert len(st["data"]) == len(body) and hashlib.sha256(st["data"]).digest() == hashlib.sha256(body).digest()
    assert st["t_end"] - t_sig < shutdown_s
    print("signal at %d bytes; GOAWAY %.3f s later; the download ended %.3f s after the signal"
          % (at_sig, t_goaway - t_sig, st["t_end"] - t_sig))
    late_st = c.streams[late]
    assert late_st["status"] is None and not late_st["data"] and not late_st["ended"], late_st
    assert late_st["reset"] in (None, 7), late_st  # REFUSED_STREAM, if anything
    assert c.closed, "the connection did not end after the download"
    assert srv.wait() == 0
    # the server's own word: the download was sent whole, the late stream never ran
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and '"GET /20m.bin HTTP/2.0" 200 %d ' % len(body) in lines[0], lines
