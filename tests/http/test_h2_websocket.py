"""WebSockets over HTTP/2 (RFC 8441): the server announces
SETTINGS_ENABLE_CONNECT_PROTOCOL, an extended CONNECT (:protocol websocket)
reaches the ws_echo handler as a GET with Upgrade would, and the WebSocket's
frames travel in the stream's DATA frames both ways, under flow control,
next to other streams of the same connection. The client is the Python h2
library driven by hand (test_http2.H2) with the frames of wsclient.py."""

import struct
import zlib

import h2.events
import h2.settings
import pytest

from test_http2 import H2
from wsclient import BINARY, CLOSE, PING, PONG, TEXT, close_payload, frame

SITE = "site {\n    handler /hello hello_world\n    handler /ws ws_echo\n}\n"


@pytest.fixture
def srv(make_server):
    return make_server(site=SITE)


def parse_frames(buf):
    """The whole (unmasked) frames at the start of buf: [(fin, rsv, opcode, payload)], the rest."""
    out = []
    while len(buf) >= 2:
        b0, b1 = buf[0], buf[1]
        assert not b1 & 0x80, "a server frame is never masked"
        n, off = b1 & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                break
            n, off = struct.unpack("!H", buf[2:4])[0], 4
        elif n == 127:
            if len(buf) < 10:
                break
            n, off = struct.unpack("!Q", buf[2:10])[0], 10
        if len(buf) < off + n:
            break
        out.append((bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0xF, bytes(buf[off : off + n])))
        buf = buf[off + n :]
    return out, buf


class WSConn(H2):
    """An HTTP/2 connection that opens WebSockets by extended CONNECT."""

    def __init__(self, srv, **kw):
        super().__init__(srv, **kw)
        self.settings = {}
        self.pump(lambda: self.settings, timeout=5)

    def on_event(self, ev):
        if isinstance(ev, h2.events.RemoteSettingsChanged):
            self.settings.update({k: v.new_value for k, v in ev.changed_settings.items()})
            return
        super().on_event(ev)

    def open_ws(self, path="/ws", headers=(("sec-websocket-version", "13"),)):
        return self.request(path, method="CONNECT", headers=[(":protocol", "websocket")] + list(headers), end=False)

    def send_ws(self, sid, data):
        """Frame bytes in DATA frames, as the stream's window allows."""
        off = 0
        while off < len(data):
            room = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size, len(data) - off)
            if room <= 0:
                self.pump(until=lambda: self.conn.local_flow_control_window(sid) > 0)
                continue
            self.conn.send_data(sid, data[off : off + room])
            off += room
            self.flush()

    def frames(self, sid, n, timeout=10):
        """The next n WebSocket frames the server sent on sid."""
        st = self.streams[sid]
        st.setdefault("frames", [])

        def enough():
            got, st["data"] = parse_frames(st["data"])
            st["frames"] += got
            return len(st["frames"]) >= n or st["ended"] or st["reset"] is not None

        self.pump(enough, timeout)
        got, st["frames"] = st["frames"][:n], st["frames"][n:]
        assert len(got) == n, (got, st)
        return got


def test_settings_enable_connect_protocol_is_sent(srv):
    c = WSConn(srv)
    assert c.settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL) == 1, c.settings
    c.close()


def test_echo_over_a_stream(srv):
    c = WSConn(srv)
    sid = c.open_ws()
    c.pump(lambda: c.streams[sid]["headers"])
    h = c.streams[sid]["headers"]
    assert h[":status"] == "200", h
    assert "sec-websocket-accept" not in h and "upgrade" not in h and "connection" not in h
    c.send_ws(sid, frame(TEXT, b"hello over h2"))
    assert c.frames(sid, 1) == [(True, 0, TEXT, b"hello over h2")]
    # a message larger than the client's 64 KiB stream window both ways:
    # the echo waits for the client's WINDOW_UPDATEs
    big = bytes(range(256)) * 1200  # 300 KiB
    c.send_ws(sid, frame(BINARY, big))
    assert c.frames(sid, 1) == [(True, 0, BINARY, big)]
    c.send_ws(sid, frame(PING, b"p1"))
    assert c.frames(sid, 1) == [(True, 0, PONG, b"p1")]
    c.close()


def test_close_ends_the_stream(srv, tmp_path):
    c = WSConn(srv)
    sid = c.open_ws()
    c.send_ws(sid, frame(TEXT, b"one"))
    assert c.frames(sid, 1)[0][3] == b"one"
    c.send_ws(sid, frame(CLOSE, close_payload(1000, b"bye")))
    (f,) = c.frames(sid, 1)
    assert f[2] == CLOSE and f[3][:2] == struct.pack("!H", 1000)
    (r,) = c.wait(sid)
    assert r["ended"], r  # END_STREAM after the close frame
    # the connection goes on
    (g,) = c.wait(c.request("/hello"))
    assert g["headers"][":status"] == "200" and bytes(g["data"]) == b"Hello, World!"
    c.close()


def test_client_end_stream_ends_the_websocket(srv):
    """The client's END_STREAM is the end of its input (RFC 8441 §6):
    the server's side ends too, with a 1006 on its side, never a hang."""
    c = WSConn(srv)
    sid = c.open_ws()
    c.send_ws(sid, frame(TEXT, b"x"))
    assert c.frames(sid, 1)[0][3] == b"x"
    c.conn.end_stream(sid)
    c.flush()
    (r,) = c.wait(sid)
    assert r["ended"] or r["reset"] is not None, r
    c.close()


def test_websockets_and_gets_at_once(srv):
    c = WSConn(srv)
    socks = [c.open_ws() for _ in range(4)]
    gets = [c.request("/hello") for _ in range(4)]
    for i, sid in enumerate(socks):
        c.send_ws(sid, frame(TEXT, b"msg %d a" % i) + frame(TEXT, b"msg %d b" % i))
    for i, sid in enumerate(socks):
        assert [f[3] for f in c.frames(sid, 2)] == [b"msg %d a" % i, b"msg %d b" % i]
    for r in c.wait(*gets):
        assert r["headers"][":status"] == "200" and bytes(r["data"]) == b"Hello, World!"
    # interleaved again, after the GETs ended
    for i, sid in reversed(list(enumerate(socks))):
        c.send_ws(sid, frame(BINARY, bytes([i]) * 1000))
    for i, sid in enumerate(socks):
        assert c.frames(sid, 1) == [(True, 0, BINARY, bytes([i]) * 1000)]
    for sid in socks:
        c.send_ws(sid, frame(CLOSE, close_payload(1000)))
    c.wait(*socks)
    c.close()


def test_permessage_deflate_over_a_stream(srv):
    c = WSConn(srv)
    sid = c.open_ws(headers=[("sec-websocket-version", "13"), ("sec-websocket-extensions", "permessage-deflate")])
    c.pump(lambda: c.streams[sid]["headers"])
    h = c.streams[sid]["headers"]
    assert h[":status"] == "200" and h.get("sec-websocket-extensions") == "permessage-deflate", h
    text = b"compress me please " * 100
    co = zlib.compressobj(wbits=-15)
    payload = co.compress(text) + co.flush(zlib.Z_SYNC_FLUSH)
    c.send_ws(sid, frame(TEXT, payload[:-4], rsv=4))
    ((fin, rsv, op, p),) = c.frames(sid, 1)
    assert op == TEXT and rsv == 4 and len(p) < len(text)
    assert zlib.decompressobj(wbits=-15).decompress(p + b"\x00\x00\xff\xff") == text
    c.close()


@pytest.mark.parametrize(
    "hdrs,status",
    [
        ([(":protocol", "websocket")], 400),  # no Sec-WebSocket-Version
        ([(":protocol", "websocket"), ("sec-websocket-version", "8")], 400),
        ([(":protocol", "webtransport"), ("sec-websocket-version", "13")], 501),
    ],
)
def test_bad_extended_connects(srv, hdrs, status):
    c = WSConn(srv)
    sid = c.request("/ws", method="CONNECT", headers=hdrs, end=False)
    c.pump(lambda: c.streams[sid]["headers"] or c.streams[sid]["reset"] is not None)
    assert c.streams[sid]["headers"][":status"] == str(status)
    c.close()


def test_plain_get_on_a_stream_is_400(srv):
    """HTTP/2 has no Upgrade: a GET to a WebSocket handler is refused."""
    c = WSConn(srv)
    (r,) = c.wait(c.request("/ws", headers=[("sec-websocket-version", "13")]))
    assert r["headers"][":status"] == "400"
    c.close()


def test_access_log_line(make_server, tmp_path):
    log = tmp_path / "access.log"
    srv = make_server(site=SITE, access_log=str(log))
    c = WSConn(srv)
    sid = c.open_ws()
    c.send_ws(sid, frame(TEXT, b"x") + frame(CLOSE, close_payload(1000)))
    c.wait(sid)
    c.close()
    import time

    from rawhttp import TIME_SCALE

    deadline = time.monotonic() + 5 * TIME_SCALE
    while time.monotonic() < deadline and not (log.exists() and log.read_text().strip()):
        time.sleep(0.1)
    line = log.read_text()
    assert '"CONNECT /ws HTTP/2.0" 200' in line, line
