"""Publish/subscribe channels (colibri_channel_*, colibri_sub_*), through
the module tests/http/modules/pubsub.c: messages reach every subscriber in
order, whoever publishes (a handler, a thread that is not a worker) and on
whichever worker the subscribers are; a subscriber that does not read is
dropped, counted and logged while the others get everything; clients that
leave are unsubscribed; a stop wakes every waiting subscriber at once;
WebSockets wait for the client and the channel at the same time."""

import re
import select
import signal
import socket
import struct
import time
from pathlib import Path

import pytest

from rawhttp import request
from test_wait import open_stream, read_chunk
from test_modules import build_greet
from wsclient import CLOSE, TEXT, WS

PUBSUB_C = Path(__file__).resolve().parent / "modules" / "pubsub.c"


@pytest.fixture(scope="session")
def pubsub_so(tmp_path_factory):
    return build_greet(tmp_path_factory.mktemp("pubsub") / "libpubsub.so", src=PUBSUB_C)


def ps_server(make_server, lib, queue=None, **kw):
    keys = "\n        queue = %d" % queue if queue else ""
    site = "module %s\nsite {\n    pubsub /ps {%s\n    }\n}\n" % (lib, keys)
    return make_server(site=site, **kw)


def get(server, target, method="GET", body=None):
    with server.conn() as c:
        c.send(request(method, target, body=body))
        r = c.read_response()
    assert r.status == 200, (target, r.status, r.body)
    return r.body.decode()


def stats(server):
    m = re.fullmatch(r"subscribers=(\d+) dropped=(\d+)", get(server, "/ps/stats"))
    return int(m.group(1)), int(m.group(2))


def wait_stats(server, subscribers, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        s = stats(server)
        if s[0] == subscribers:
            return s
        assert time.monotonic() < deadline, "subscribers %r, want %d" % (s, subscribers)
        time.sleep(0.02)


class Sub:
    """An event-stream subscriber on a raw socket: the chunked body is
    parsed as it arrives into comments and events (name, data)."""

    def __init__(self, server, target="/ps/sse", rcvbuf=None):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(5)
        self.sock.connect((server.host, server.port))
        self.sock.sendall(request("GET", target))
        self.buf = bytearray()
        self.head = None
        self.comments, self.events = [], []
        self.eof = False

    def fileno(self):
        return self.sock.fileno()

    def feed(self):
        """One recv, parsed; False at the end of the stream."""
        try:
            data = self.sock.recv(1 << 20)
        except (ConnectionResetError, BlockingIOError):
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        if self.head is None:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                return True
            self.head = bytes(self.buf[:i])
            assert self.head.startswith(b"HTTP/1.1 200 "), self.head
            del self.buf[: i + 4]
        pos = 0
        while True:
            e = self.buf.find(b"\r\n", pos)
            if e < 0:
                break
            size = int(self.buf[pos:e], 16)
            if len(self.buf) < e + 2 + size + 2:
                break
            self._record(bytes(self.buf[e + 2 : e + 2 + size]))
            pos = e + 2 + size + 2
        del self.buf[:pos]
        return True

    def _record(self, chunk):
        # the module sends every event and comment as one chunk
        if not chunk:
            return  # the last chunk
        if chunk.startswith(b":"):
            self.comments.append(chunk[1:].strip().decode())
            return
        name, data = "message", []
        for line in chunk.decode().split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
        self.events.append((name, "\n".join(data)))

    def data(self):
        return [d for n, d in self.events if n == "message"]

    def close(self):
        self.sock.close()


def pump(subs, done, timeout=20.0):
    """Reads every subscriber until done() holds (bounded by timeout)."""
    deadline = time.monotonic() + timeout
    live = [s for s in subs if not s.eof]
    while not done():
        left = deadline - time.monotonic()
        assert left > 0, "timed out; events: %r" % [len(s.events) for s in subs]
        ready, _, _ = select.select(live, [], [], min(left, 0.5))
        for s in ready:
            if not s.feed():
                live.remove(s)
        if not live and not done():
            raise AssertionError("every stream ended; events: %r" % [s.events[-3:] for s in subs])


def subscribe(server, n, **kw):
    subs = [Sub(server, **kw) for _ in range(n)]
    pump(subs, lambda: all(s.comments for s in subs), timeout=10)
    return subs


def test_every_subscriber_gets_every_message_in_order_across_workers(make_server, pubsub_so):
    server = ps_server(make_server, pubsub_so, threads="2")
    subs = subscribe(server, 24)
    assert stats(server) == (24, 0)
    # SO_REUSEPORT spreads the connections over both workers
    tids = {s.comments[0].split()[1] for s in subs}
    assert len(tids) == 2, tids
    for i in range(1, 41):  # published by handlers, on either worker
        assert get(server, "/ps/pub", "POST", b"m%d" % i) == "ok"
    want = ["m%d" % i for i in range(1, 41)]
    pump(subs, lambda: all(len(s.data()) >= 40 for s in subs))
    for s in subs:
        assert s.data() == want
    for s in subs:
        s.close()
    wait_stats(server, 0)


def test_publish_from_a_thread_that_is_not_a_worker(make_server, pubsub_so):
    server = ps_server(make_server, pubsub_so, threads="2")
    subs = subscribe(server, 8)
    # 200 messages, far more than a queue holds (256 by default, but the
    # subscribers read as they come): in order, none lost, none dropped
    assert get(server, "/ps/thread?n=200").startswith("published 200")
    pump(subs, lambda: all(len(s.data()) >= 200 for s in subs))
    for s in subs:
        assert [d.split()[0] for d in s.data()] == ["t%d" % i for i in range(1, 201)]
    assert stats(server) == (8, 0)


def test_message_bytes_arrive_unchanged(make_server, pubsub_so):
    server = ps_server(make_server, pubsub_so, threads="1")
    (s,) = subscribe(server, 1)
    body = "héllo\nsecond line\n\nfourth"
    get(server, "/ps/pub", "POST", body.encode())
    get(server, "/ps/pub", "POST", b"")
    pump([s], lambda: len(s.data()) >= 2)
    assert s.data() == [body, ""]


def test_slow_subscriber_is_dropped_counted_and_logged_fast_ones_get_everything(make_server, pubsub_so):
    # one worker: the slow subscriber and the fast ones share it
    server = ps_server(make_server, pubsub_so, queue=8, threads="1")
    fast = subscribe(server, 3)
    slow = Sub(server, rcvbuf=4096)  # never read after the head
    wait_stats(server, 4)
    size, batch, sent = 16000, 4, 0
    deadline = time.monotonic() + 60
    # batches smaller than the queue, each read by the fast ones before
    # the next: only a subscriber that does not read can fall 8 behind
    while stats(server)[1] == 0:
        assert time.monotonic() < deadline and sent < 4000, "the slow one was never dropped"
        get(server, "/ps/thread?n=%d&size=%d" % (batch, size))
        sent += batch
        pump(fast, lambda: all(len(s.data()) >= sent for s in fast))
    assert stats(server) == (3, 1)
    for _ in range(5):  # after the drop, the others go on
        get(server, "/ps/thread?n=%d&size=%d" % (batch, size))
        sent += batch
    pump(fast, lambda: all(len(s.data()) >= sent for s in fast))
    for s in fast:
        got = [d.split()[0] for d in s.data()]
        # each batch counts from t1 again
        assert got == ["t%d" % (i % batch + 1) for i in range(sent)]
        assert all(len(d) == size for d in s.data())
    assert stats(server) == (3, 1)
    log = server.stderr()
    assert re.search(r"\[warn\] channel subscriber 127\.0\.0\.1 dropped: 8 messages behind", log), log
    slow.close()


def test_dropped_subscriber_that_waits_sees_the_error(make_server, pubsub_so):
    # a WebSocket subscriber that reads nothing from the channel socket
    # side: the handler is stuck sending, falls behind, and once it can
    # send again, its next colibri_sub_next() says -ENOBUFS (close 1008)
    server = ps_server(make_server, pubsub_so, queue=4, threads="1")
    w = WS(server.host, server.port, path="/ps/ws", rcvbuf=4096)
    assert w.status == 101
    wait_stats(server, 1)
    deadline = time.monotonic() + 60
    while stats(server)[1] == 0:
        assert time.monotonic() < deadline, "never dropped"
        get(server, "/ps/thread?n=4&size=60000")
    assert stats(server) == (0, 1)
    # now read: what was sent before the drop, then close 1008 "105" (ENOBUFS)
    while True:
        op, p = w.recv_message(timeout=10)
        if op == CLOSE:
            break
        assert op == TEXT
    assert struct.unpack("!H", p[:2])[0] == 1008 and p[2:] == b"105"
    w.close()


def test_clients_that_leave_are_unsubscribed(make_server, pubsub_so):
    server = ps_server(make_server, pubsub_so, threads="2")
    subs = subscribe(server, 10)
    wss = [WS(server.host, server.port, path="/ps/ws") for _ in range(4)]
    wait_stats(server, 14)
    for s in subs[:5]:
        s.close()
    for w in wss[:2]:
        w.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        w.close()  # a reset, no close frame
    wait_stats(server, 7)
    get(server, "/ps/pub", "POST", b"after")
    pump(subs[5:], lambda: all(s.data() == ["after"] for s in subs[5:]))
    for w in wss[2:]:
        assert w.recv_message() == (TEXT, b"after")
    # and the rest leave while a message is on its way to them
    get(server, "/ps/thread?n=50&size=1000")
    for s in subs[5:]:
        s.close()
    for w in wss[2:]:
        w.close()
    wait_stats(server, 0)
    assert stats(server) == (0, 0)


def test_websocket_waits_for_client_and_channel(make_server, pubsub_so):
    server = ps_server(make_server, pubsub_so, threads="2")
    a, b, c = (WS(server.host, server.port, path="/ps/ws") for _ in range(3))
    (sse,) = subscribe(server, 1)
    wait_stats(server, 4)
    a.send_message(TEXT, b"from a")
    for w in (a, b, c):
        assert w.recv_message() == (TEXT, b"from a")
    b.send_message(TEXT, b"from b")
    c.send_message(TEXT, b"from c")
    seen = [[w.recv_message()[1] for _ in range(2)] for w in (a, b, c)]
    # one order for every subscriber, whichever arrived first
    assert seen[0] == seen[1] == seen[2] and sorted(seen[0]) == [b"from b", b"from c"]
    pump([sse], lambda: len(sse.data()) >= 3)
    assert sse.data() == ["from a"] + [x.decode() for x in seen[0]]
    for w in (a, b, c):
        w.close()


def test_sub_end_and_channel_free_end_the_subscription(make_server, pubsub_so):
    server = ps_server(make_server, pubsub_so, threads="1")
    (s,) = subscribe(server, 1, target="/ps/sse?max=2")
    for i in range(3):
        get(server, "/ps/pub", "POST", b"n%d" % i)
    pump([s], lambda: s.events and s.events[-1][0] == "end")
    # colibri_sub_end() after two: the third never comes, EPIPE instead
    assert s.events == [("message", "n0"), ("message", "n1"), ("end", "32")]
    wait_stats(server, 0)
    # freed by its owner: what was published before still arrives, then EPIPE
    assert get(server, "/ps/free") == "first=0:last then=-32"


def either(server, query, act):
    """GET /ps/either?QUERY; once it waits, act(); the answer's chunks."""
    c, _ = open_stream(server, "/ps/either?" + query)
    deadline = time.monotonic() + 10
    assert read_chunk(c, deadline)[1] == b"waiting\n"
    act()
    out = b""
    while True:
        piece = read_chunk(c, deadline)[1]
        if not piece:
            c.close()
            return out.decode()
        out += piece


def test_sub_wait_fd_returns_for_the_channel_or_the_fd(make_server, pubsub_so):
    server = ps_server(make_server, pubsub_so, threads="1")
    assert either(server, "", lambda: get(server, "/ps/pub", "POST", b"hey")) == "sub hey"
    assert either(server, "", lambda: get(server, "/ps/poke")) == "fd"
    assert either(server, "fd=0", lambda: get(server, "/ps/pub", "POST", b"alone")) == "sub alone"
    t0 = time.monotonic()
    assert either(server, "fd=0&ms=200", lambda: None) == "error -110"  # ETIMEDOUT
    assert time.monotonic() - t0 >= 0.19
    assert either(server, "ms=200", lambda: None) == "error -110"
    wait_stats(server, 0)


def test_wait_times_out_without_messages(make_server, pubsub_so):
    server = ps_server(make_server, pubsub_so, threads="1")
    (s,) = subscribe(server, 1, target="/ps/sse?keepalive=100")
    t0 = time.monotonic()
    pump([s], lambda: s.comments.count("ka") >= 3)
    assert time.monotonic() - t0 >= 0.29
    get(server, "/ps/pub", "POST", b"x")
    pump([s], lambda: s.data() == ["x"])


def test_stop_wakes_every_waiting_subscriber_at_once(make_server, pubsub_so):
    server = ps_server(make_server, pubsub_so, threads="2")
    subs = subscribe(server, 40)
    wss = [WS(server.host, server.port, path="/ps/ws") for _ in range(5)]
    wait_stats(server, 45)
    t0 = time.monotonic()
    server.send_signal(signal.SIGTERM)
    assert server.wait(8) == 0
    assert time.monotonic() - t0 < 5, "a 10 s shutdown_timeout must not be waited out"
    pump(subs, lambda: all(s.eof for s in subs), timeout=5)
    for s in subs:
        assert s.events[-1] == ("end", "125")  # ECANCELED
    for w in wss:
        w.expect_close(1001)
