"""WebSockets (RFC 6455) through the ws_echo built-in handler: the
handshake and its refusals, echo of text and binary messages of every
length class, fragmentation with control frames between fragments,
ping/pong, the close handshake, every violation closed with its code,
the 16 MiB limit, permessage-deflate, and many connections on one thread
while HTTP stays responsive. The client is tests/http/wsclient.py (raw
sockets, so it can break each rule on purpose)."""

import os
import socket
import struct
import threading
import time
import zlib

import pytest

from rawhttp import TIME_SCALE, request
from test_modules import greet_so  # noqa: F401 (the session fixture)
from wsclient import BINARY, CLOSE, CONT, PING, PONG, TEXT, WS, accept_for, close_payload, frame

SITE = """site {
    handler /ws ws_echo
    handler /hello hello_world
}
"""


@pytest.fixture
def ws_server(make_server):
    return make_server(site=SITE, threads="1")


def connect(server, **kw):
    w = WS(server.host, server.port, **kw)
    assert w.status == 101, w.headers
    return w


def plain(server, headers, method="GET", version="HTTP/1.1"):
    with server.conn() as c:
        c.send(request(method, "/ws", headers=headers, version=version))
        return c.read_response()


GOOD = [
    ("Upgrade", "websocket"),
    ("Connection", "Upgrade"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ("Sec-WebSocket-Version", "13"),
]


def test_handshake_accept_value(ws_server):
    with ws_server.conn() as c:
        c.send(request("GET", "/ws", headers=GOOD))
        head = c.read_until(b"\r\n\r\n", time.monotonic() + 5)
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 101 Switching Protocols"
    h = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
    assert h["sec-websocket-accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 §1.3
    assert h["upgrade"].lower() == "websocket"
    assert "upgrade" in h["connection"].lower()
    assert "sec-websocket-extensions" not in h


def test_handshake_tokens_case_insensitive(ws_server):
    w = connect(ws_server, headers={"Upgrade": "WebSocket", "Connection": "keep-alive, upgrade"})
    assert w.headers["sec-websocket-accept"] == accept_for(w.key)
    w.close()


def test_upgrade_token_in_a_second_connection_field(ws_server):
    """Connection is a list that may come in several fields (RFC 9110 5.3)."""
    hdrs = [h for h in GOOD if h[0] != "Connection"]
    hdrs += [("Connection", "keep-alive"), ("Connection", "Upgrade")]
    with ws_server.conn() as c:
        c.send(request("GET", "/ws", headers=hdrs))
        head = c.read_until(b"\r\n\r\n", time.monotonic() + 5)
    assert head.startswith(b"HTTP/1.1 101 "), head


def test_plain_get_is_426(ws_server):
    r = plain(ws_server, [])
    assert r.status == 426
    assert r.header("Upgrade").lower() == "websocket"
    assert r.header("Sec-WebSocket-Version") == "13"
    r = plain(ws_server, [], version="HTTP/1.0")
    assert r.status == 426


@pytest.mark.parametrize(
    "change",
    [
        {"Sec-WebSocket-Key": None},
        {"Sec-WebSocket-Key": "short=="},
        {"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ"},  # no padding
        {"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZR=="},  # not canonical
        {"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==dGhl"},
        {"Sec-WebSocket-Version": "8"},
        {"Sec-WebSocket-Version": None},
        {"Connection": "keep-alive"},
        {"Connection": None},
    ],
)
def test_bad_handshake_is_400(ws_server, change):
    h = dict(GOOD)
    h.update(change)
    r = plain(ws_server, [(k, v) for k, v in h.items() if v is not None])
    assert r.status == 400
    if "Sec-WebSocket-Version" in change and change["Sec-WebSocket-Version"]:
        assert r.header("Sec-WebSocket-Version") == "13"


def test_two_keys_are_400(ws_server):
    # which one would the Accept answer? Neither: no handshake (issue 17, item 9)
    for second in ("dGhlIHNhbXBsZSBub25jZQ==", "AQIDBAUGBwgJCgsMDQ4PEA=="):
        r = plain(ws_server, GOOD + [("Sec-WebSocket-Key", second)])
        assert r.status == 400, second


def test_bad_handshake_method_and_version(ws_server):
    with ws_server.conn() as c:
        c.send(request("HEAD", "/ws", headers=GOOD))
        assert c.read_response(head_request=True).status == 400
    assert plain(ws_server, GOOD, version="HTTP/1.0").status == 400


@pytest.mark.parametrize("n", [0, 1, 125, 126, 65535, 65536, 1 << 20])
def test_echo_sizes(ws_server, n):
    w = connect(ws_server)
    data = bytes(i * 31 % 251 for i in range(n))
    w.send_message(BINARY, data)
    assert w.recv_message() == (BINARY, data)
    text = ("é" * (n // 2)).encode()
    w.send_message(TEXT, text)
    assert w.recv_message() == (TEXT, text)
    w.close()


def test_echo_16mib_and_above(ws_server):
    w = connect(ws_server, timeout=30)
    big = b"\x5a" * (16 << 20)
    w.send_message(BINARY, big)
    op, got = w.recv_message(timeout=30)
    assert op == BINARY and got == big
    # the header alone is refused: the server closes before the payload
    w.send(frame(BINARY, big + b"!")[:14])
    w.expect_close(1009)


def test_fragmented_with_control_frames_between(ws_server):
    w = connect(ws_server)
    w.send_frame(TEXT, b"Hel", fin=False)
    w.send_frame(PING, b"p1")
    w.send_frame(CONT, b"", fin=False)
    w.send_frame(PONG, b"ignored")
    w.send_frame(CONT, b"lo")
    assert w.recv_frame() == (True, 0, PONG, b"p1")
    assert w.recv_message() == (TEXT, b"Hello")
    w.close()


def test_too_big_across_fragments(ws_server):
    w = connect(ws_server, timeout=30)
    w.send_frame(BINARY, b"a" * (8 << 20), fin=False)
    w.send(frame(CONT, b"a" * ((8 << 20) + 1))[:14])
    w.expect_close(1009, timeout=30)


def test_ping_pong(ws_server):
    w = connect(ws_server)
    w.send_frame(PING, b"are you there")
    assert w.recv_frame() == (True, 0, PONG, b"are you there")
    w.send_frame(PING, b"")
    assert w.recv_frame() == (True, 0, PONG, b"")
    w.close()


def test_close_handshake_echoes_code(ws_server):
    w = connect(ws_server)
    w.send_message(TEXT, b"before")
    w.send_frame(CLOSE, close_payload(4321, b"done"))
    assert w.recv_message() == (TEXT, b"before")
    assert w.expect_close(4321)[:2] == struct.pack("!H", 4321)


def test_close_without_code(ws_server):
    w = connect(ws_server)
    w.send_frame(CLOSE, b"")
    fin, rsv, op, p = w.recv_frame()
    assert op == CLOSE and p == b""
    w.wait_eof()


@pytest.mark.parametrize(
    "frames,code",
    [
        ([frame(TEXT, b"x", mask=False)], 1002),  # unmasked
        ([frame(3, b"x")], 1002),  # reserved opcode
        ([frame(0xB, b"x")], 1002),  # reserved control opcode
        ([frame(TEXT, b"x", rsv=2)], 1002),  # RSV2
        ([frame(TEXT, b"x", rsv=4)], 1002),  # RSV1 without deflate
        ([frame(CONT, b"x")], 1002),  # nothing to continue
        ([frame(TEXT, b"a", fin=False), frame(TEXT, b"b")], 1002),  # new message mid-message
        ([frame(PING, b"x" * 126)], 1002),  # control frame too long
        ([frame(PING, b"x", fin=False)], 1002),  # fragmented control frame
        ([frame(BINARY, b"x" * 10, length_bytes=2)], 1002),  # non-minimal length
        ([frame(CLOSE, b"\x03")], 1002),  # one-byte close payload
        ([frame(CLOSE, close_payload(1005))], 1002),
        ([frame(CLOSE, close_payload(1006))], 1002),
        ([frame(CLOSE, close_payload(999))], 1002),
        ([frame(CLOSE, close_payload(1015))], 1002),
        ([frame(CLOSE, close_payload(5000))], 1002),
        ([frame(CLOSE, close_payload(1000, b"\xff"))], 1007),
        ([frame(TEXT, b"\xed\xa0\x80")], 1007),  # a surrogate
        ([frame(TEXT, b"\xc0\xaf")], 1007),  # overlong
        ([frame(TEXT, b"\xf4\x90\x80\x80")], 1007),  # above U+10FFFF
        ([frame(TEXT, b"ok\xce")], 1007),  # cut short at the end
        ([frame(TEXT, b"ok\xce", fin=False), frame(CONT, b"A")], 1007),  # broken across fragments
    ],
)
def test_violations_close_with_code(ws_server, frames, code):
    w = connect(ws_server)
    w.send(b"".join(frames))
    w.expect_close(code)


def test_utf8_split_across_fragments_is_fine(ws_server):
    w = connect(ws_server)
    s = "a😀zκ".encode()
    for i in range(len(s) + 1):
        w.send_frame(TEXT, s[:i], fin=False)
        w.send_frame(CONT, s[i:])
        assert w.recv_message() == (TEXT, s)
    w.close()


def test_invalid_utf8_fails_fast(ws_server):
    """An invalid byte ends the connection before the message is complete."""
    w = connect(ws_server)
    w.send_frame(TEXT, b"abc\xff", fin=False)
    w.expect_close(1007)


def test_invalid_utf8_fails_at_the_first_bad_byte(ws_server):
    """A text frame announcing 1 MiB whose first bytes are already invalid:
    the close 1007 comes while the rest of the frame has not been sent
    (it used to wait for the frame's last byte, issue 17 item 4)."""
    w = connect(ws_server)
    f = frame(TEXT, b"ok \xff" + b"a" * (1 << 20))
    w.send(f[:14 + 8])  # the header (64-bit length, mask) and 8 bytes
    w.expect_close(1007, timeout=3)


def test_invalid_utf8_fails_at_once_in_a_later_fragment(ws_server):
    w = connect(ws_server)
    w.send_frame(TEXT, "κό".encode(), fin=False)
    f = frame(CONT, b"\xce\xbc\xc0\xaf" + b"a" * (1 << 20))  # an overlong '/' after a valid char
    w.send(f[:14 + 10])
    w.expect_close(1007, timeout=3)


def test_invalid_utf8_in_a_compressed_frame_fails_at_once(ws_server):
    """The same for a compressed message: what is inflated so far is
    checked as the compressed bytes arrive."""
    w = connect(ws_server, extensions="permessage-deflate")
    c = w.compressor
    head = c.compress(b"fine so far \xed\xa0\x80") + c.flush(zlib.Z_SYNC_FLUSH)  # a surrogate
    rest = c.compress(os.urandom(300000)) + c.flush(zlib.Z_SYNC_FLUSH)
    f = frame(TEXT, head + rest[:-4], rsv=4)
    hl = len(f) - len(head) - len(rest) + 4
    w.send(f[: hl + len(head)])
    w.expect_close(1007, timeout=3)


def test_peer_vanishing_mid_message(ws_server):
    w = connect(ws_server)
    w.send(frame(BINARY, b"x" * 1000)[:500])
    w.close()
    w = connect(ws_server)
    w.send_message(TEXT, b"still here")
    assert w.recv_message() == (TEXT, b"still here")
    w.close()


def test_idle_websocket_outlives_request_timeout(make_server):
    server = make_server(site=SITE, threads="1", request_timeout="1", keep_alive_timeout="1")
    w = connect(server)
    time.sleep(2.5)
    w.send_message(TEXT, b"after a nap")
    assert w.recv_message() == (TEXT, b"after a nap")
    w.close()


def test_no_ping_without_an_idle_timeout(ws_server):
    # ws_idle_timeout is off by default: a silent client is left alone
    w = connect(ws_server)
    with pytest.raises(TimeoutError):
        w.recv_frame(timeout=1.5)
    w.send_message(TEXT, b"still here")
    assert w.recv_message() == (TEXT, b"still here")
    w.close()


def test_idle_timeout_pings_then_closes_a_silent_peer(make_server):
    """ws_idle_timeout = 1s: a WebSocket silent for a second gets a ping;
    silent a second more, close 1001 (issue 17, item 5)."""
    server = make_server(site=SITE, threads="1", ws_idle_timeout="1s")
    w = connect(server)
    t0 = time.monotonic()
    assert w.recv_frame(timeout=3 * TIME_SCALE) == (True, 0, PING, b"")
    assert 0.9 <= time.monotonic() - t0 < 2.5 * TIME_SCALE
    w.expect_close(1001, timeout=3 * TIME_SCALE)
    assert 1.9 <= time.monotonic() - t0 < 5 * TIME_SCALE


def test_idle_timeout_keeps_a_peer_that_answers(make_server):
    server = make_server(site=SITE, threads="1", ws_idle_timeout="1s")
    w = connect(server)
    pings = 0
    end = time.monotonic() + 3.5
    while time.monotonic() < end:
        try:
            fin, rsv, op, p = w.recv_frame(timeout=max(0.05, end - time.monotonic()))
        except TimeoutError:
            break
        assert op == PING, op
        pings += 1
        w.send_frame(PONG, p)
    assert pings >= 2
    # traffic counts as life too: messages every half second, no ping
    for i in range(5):
        w.send_message(TEXT, b"m%d" % i)
        assert w.recv_message() == (TEXT, b"m%d" % i)
        time.sleep(0.5)
    w.send_message(TEXT, b"alive")
    assert w.recv_message() == (TEXT, b"alive")
    w.close()


def test_memory_max_refuses_new_large_messages_with_1013(make_server):
    """ws_memory_max bounds what a worker's WebSockets hold in messages
    being read: a new large message beyond it is closed with 1013 (try
    again later); small ones go on; once the memory is free, large ones
    pass again (issue 17, item 5)."""
    server = make_server(site=SITE, threads="1", ws_memory_max="1536k")
    a = connect(server)
    big = os.urandom(1000 * 1000)
    fa = frame(BINARY, big)
    a.send(fa[: 14 + 600 * 1000])  # 600 KB of it: a buffer of about 1 MiB held
    time.sleep(0.5 * TIME_SCALE)
    b = connect(server)
    # the whole message goes out: the server refuses it with 1013 but reads
    # and drops the rest, as a normal close does, so no reset cuts our send
    # or its close frame
    # (16 MB: more than the socket buffers take, so a server that closed at
    # once would cut the send)
    b.send_frame(BINARY, os.urandom(16 * 1000 * 1000))
    b.expect_close(1013)
    c = connect(server)
    c.send_message(TEXT, b"x" * 10000)  # a small message: under the kept 16 KiB
    assert c.recv_message() == (TEXT, b"x" * 10000)
    a.send(fa[14 + 600 * 1000 :])
    assert a.recv_message(timeout=10) == (BINARY, big)
    d = connect(server)
    m = os.urandom(700 * 1000)
    d.send_frame(BINARY, m)
    assert d.recv_message(timeout=10) == (BINARY, m)
    for w in (a, c, d):
        w.close()


def test_stop_closes_with_1001(make_server):
    server = make_server(site=SITE, threads="1")
    w = connect(server)
    w.send_message(TEXT, b"x")
    assert w.recv_message() == (TEXT, b"x")
    server.send_signal()
    w.expect_close(1001)
    assert server.wait() == 0


def test_many_connections_one_thread_hello_responsive(ws_server):
    conns = [connect(ws_server) for _ in range(200)]
    errors = []

    def chat(ws_list, k):
        try:
            for rnd in range(5):
                for i, w in enumerate(ws_list):
                    w.send_message(TEXT, b"m %d %d %d" % (k, i, rnd))
                for i, w in enumerate(ws_list):
                    assert w.recv_message() == (TEXT, b"m %d %d %d" % (k, i, rnd))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=chat, args=(conns[k::4], k)) for k in range(4)]
    for t in threads:
        t.start()
    worst = 0
    while any(t.is_alive() for t in threads):
        t0 = time.monotonic()
        with ws_server.conn() as c:
            c.send(request("GET", "/hello"))
            assert c.read_response().status == 200
        worst = max(worst, time.monotonic() - t0)
        time.sleep(0.01)
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert worst < 0.5, worst
    for w in conns:
        w.close()


# --- permessage-deflate (RFC 7692) ---


def test_deflate_not_without_offer(ws_server):
    w = connect(ws_server)
    assert "sec-websocket-extensions" not in w.headers
    w.close()


@pytest.mark.parametrize(
    "offer,answer",
    [
        ("permessage-deflate", "permessage-deflate"),
        ("permessage-deflate; client_max_window_bits", "permessage-deflate"),
        (
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
        ),
        ("permessage-deflate; server_max_window_bits=10", "permessage-deflate; server_max_window_bits=10"),
        # the first acceptable offer wins
        ("permessage-deflate; server_max_window_bits=8, permessage-deflate", "permessage-deflate"),
        ("x-webkit-deflate-frame, permessage-deflate; client_max_window_bits=\"12\"", "permessage-deflate"),
        ("permessage-deflate; unknown_param", None),
        ("permessage-deflate; server_no_context_takeover; server_no_context_takeover", None),
        ("permessage-deflate; server_max_window_bits=16", None),
        ("permessage-deflate; server_max_window_bits", None),
        ("foo", None),
    ],
)
def test_deflate_negotiation(ws_server, offer, answer):
    w = connect(ws_server, extensions=offer)
    assert w.headers.get("sec-websocket-extensions") == answer
    w.close()


@pytest.mark.parametrize(
    "offer",
    [
        "permessage-deflate; client_max_window_bits",
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
        "permessage-deflate; server_max_window_bits=9",
    ],
)
def test_deflate_round_trips(ws_server, offer):
    w = connect(ws_server, extensions=offer)
    assert w.deflate
    no_ctx = "client_no_context_takeover" in offer
    msgs = [b"hello " * 20, b"", b"x", ("κόσμε " * 1000).encode(), bytes(range(256)) * 300, b"hello " * 20]
    for i, m in enumerate(msgs):
        if no_ctx:
            w.compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
        op = TEXT if i != 4 else BINARY
        w.send_message(op, m, compress=True)
        # the server answers compressed (above 32 bytes) or plain
        assert w.recv_message() == (op, m)
        w.send_message(op, m)  # uncompressed messages are fine as well
        assert w.recv_message() == (op, m)
    w.close()


def test_deflate_fragmented_message(ws_server):
    w = connect(ws_server, extensions="permessage-deflate")
    c = w.compressor
    data = c.compress(b"abc" * 10000) + c.flush(zlib.Z_SYNC_FLUSH)
    data = data[:-4]
    third = len(data) // 3
    w.send_frame(TEXT, data[:third], fin=False, rsv=4)
    w.send_frame(PING, b"mid")
    w.send_frame(CONT, data[third : 2 * third], fin=False)
    w.send_frame(CONT, data[2 * third :])
    assert w.recv_frame() == (True, 0, PONG, b"mid")
    assert w.recv_message() == (TEXT, b"abc" * 10000)
    w.close()


def test_deflate_bomb_is_1009(ws_server):
    w = connect(ws_server, extensions="permessage-deflate", timeout=20)
    w.send_message(BINARY, b"\0" * ((16 << 20) + 1), compress=True)  # ~17 KB on the wire
    w.expect_close(1009, timeout=20)


def test_deflate_bad_data_is_1007(ws_server):
    w = connect(ws_server, extensions="permessage-deflate")
    w.send_frame(BINARY, b"\xff\xff\xff\xff\xff", rsv=4)
    w.expect_close(1007)


def test_deflate_invalid_utf8_inside_is_1007(ws_server):
    w = connect(ws_server, extensions="permessage-deflate")
    w.send_message(TEXT, b"ok then \xed\xa0\x80", compress=True)
    w.expect_close(1007)


def test_deflate_rsv1_on_continuation_is_1002(ws_server):
    w = connect(ws_server, extensions="permessage-deflate")
    w.send(frame(BINARY, b"a", fin=False) + frame(CONT, b"b", rsv=4))
    w.expect_close(1002)


def test_deflate_server_compresses(ws_server):
    w = connect(ws_server, extensions="permessage-deflate")
    m = b"the same words again and again " * 100
    w.send_message(TEXT, m)
    fin, rsv, op, p = w.recv_frame()
    assert (fin, rsv, op) == (True, 4, TEXT)
    assert len(p) < len(m) // 10
    assert w.inflater.decompress(p + b"\x00\x00\xff\xff") == m
    w.send_message(TEXT, b"short")
    assert w.recv_frame() == (True, 0, TEXT, b"short")  # too short to compress
    w.close()


# --- closing from the server's side (colibri_ws_close, in tests/http/modules/greet.c) ---


@pytest.fixture
def bye_server(make_server, greet_so):  # noqa: F811
    return make_server(site="module %s\nsite {\n    handler /bye ws_bye\n}\n" % greet_so, threads="1")


def test_server_close_waits_for_the_peer(bye_server):
    w = connect(bye_server, path="/bye")
    w.send_message(TEXT, b"hi")
    assert w.recv_message() == (TEXT, b"refused")  # bad codes and reasons: -EINVAL
    fin, rsv, op, p = w.recv_frame()
    assert op == CLOSE and p == close_payload(4000, b"bye")
    # the server drops messages while it waits for our close, then ends
    w.send_message(TEXT, b"late")
    time.sleep(0.2)
    w.send_frame(CLOSE, close_payload(4000))
    t0 = time.monotonic()
    w.wait_eof()
    assert time.monotonic() - t0 < 0.5


def test_server_close_gives_up_after_a_second(bye_server):
    w = connect(bye_server, path="/bye")
    w.send_message(TEXT, b"hi")
    assert w.recv_message() == (TEXT, b"refused")
    t0 = time.monotonic()
    fin, rsv, op, p = w.recv_frame()
    assert op == CLOSE
    w.wait_eof(timeout=3)  # no close from us: the server stops waiting
    assert 0.8 < time.monotonic() - t0 < 2.5


def test_access_log_shows_the_upgrade_request(make_server, tmp_path):
    """Frames are read into the buffer the request head was parsed in: the
    head is moved out first, so the access log line (written when the
    handler returns) is the request's, not frame bytes."""
    log = tmp_path / "access.log"
    s = make_server(site=SITE, threads="1", access_log=str(log))
    w = connect(s, headers={"User-Agent": "ua-test"})
    for i in range(3):
        data = bytes([i]) * 300
        w.send_message(BINARY, data)
        assert w.recv_message() == (BINARY, data)
    w.close()
    deadline = time.monotonic() + 5
    lines = []
    while time.monotonic() < deadline and not lines:
        lines = [l for l in (log.read_text().splitlines() if log.exists() else []) if " 101 " in l]
        time.sleep(0.05)
    assert len(lines) == 1, lines
    assert '"GET /ws HTTP/1.1" 101 ' in lines[0] and lines[0].endswith('"ua-test"'), lines[0]
