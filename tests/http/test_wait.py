"""Waiting without blocking (colibri_sleep, colibri_wait_fd) and the
sse_ticks built-in handler: a waiting handler suspends its connection, not
the worker thread; a client that leaves ends the handler (its defers run);
a graceful stop wakes every waiter at once; the request timeout does not
expire a handler that waits. The module handlers come from
tests/http/modules/greet.c (nap, nap_defers, fd_wait, fd_poke)."""

import gc
import os
import signal
import time

import pytest

from rawhttp import Closed, request
from test_concurrency import raise_nofile
from test_modules import greet_so  # noqa: F401 (the session fixture)


def wait_site(lib=None):
    lines = [
        "    handler /hello hello_world",
        "    handler /sse sse_ticks",
    ]
    if lib:
        lines += [
            "    handler /nap nap",
            "    handler /nap_defers nap_defers",
            "    handler /fd_wait fd_wait",
            "    handler /fd_poke fd_poke",
        ]
    head = "module %s\n" % lib if lib else ""
    return head + "site {\n" + "\n".join(lines) + "\n}\n"


def read_chunk(c, deadline):
    """One chunk of a chunked body: (arrival time, payload); b"" is the end."""
    size = int(c.read_until(b"\r\n", deadline).split(b";")[0], 16)
    data = c.read_exact(size, deadline)
    assert c.read_exact(2, deadline) == b"\r\n"
    return time.monotonic(), data


def open_stream(server, target, timeout=5.0):
    """A connection with the head of a streamed answer read."""
    c = server.conn(timeout)
    c.send(request("GET", target))
    head = c.read_until(b"\r\n\r\n", time.monotonic() + timeout)
    assert head.startswith(b"HTTP/1.1 200 "), head
    return c, head


def get_timed(server, target):
    t0 = time.monotonic()
    with server.conn() as c:
        c.send(request("GET", target))
        r = c.read_response()
    return r, time.monotonic() - t0


@pytest.fixture
def wserver(make_server, greet_so):  # noqa: F811
    return make_server(site=wait_site(greet_so), threads="1")


def test_sse_ticks_events_apart_then_end(wserver):
    c, head = open_stream(wserver, "/sse?count=3&interval=100")
    try:
        h = head.lower()
        assert b"content-type: text/event-stream" in h
        assert b"transfer-encoding: chunked" in h
        deadline = time.monotonic() + 5
        got = [read_chunk(c, deadline) for _ in range(4)]
    finally:
        c.close()
    assert [d for _, d in got] == [b"event: tick\ndata: %d\n\n" % i for i in (1, 2, 3)] + [b""]
    gaps = [got[i + 1][0] - got[i][0] for i in range(2)]
    assert all(0.09 <= g <= 0.4 for g in gaps), gaps


def test_sse_ticks_defaults_and_keep_alive(wserver):
    """count defaults to 10; after the stream the connection takes another request."""
    c, _ = open_stream(wserver, "/sse?interval=0")
    try:
        deadline = time.monotonic() + 5
        got = []
        while True:
            _, d = read_chunk(c, deadline)
            if not d:
                break
            got.append(d)
        assert got == [b"event: tick\ndata: %d\n\n" % i for i in range(1, 11)]
        c.send(request("GET", "/hello"))
        assert c.read_response().body == b"Hello, World!"
    finally:
        c.close()


@pytest.mark.parametrize("q", ["count=x", "count=1000001", "interval=3600001", "interval=-1", "count="])
def test_sse_ticks_bad_values_400(wserver, q):
    r, _ = get_timed(wserver, "/sse?" + q)
    assert r.status == 400


def test_hello_and_file_fast_behind_a_waiting_stream(make_server, tmp_path):
    """The motivating bug: with threads = 1, a request waited behind one event stream."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "f.txt").write_bytes(b"static\n")
    site = "site {\n    handler /hello hello_world\n    handler /sse sse_ticks\n" \
           "    serve_files /files {\n        path = %s\n    }\n}\n" % (tmp_path / "www")
    server = make_server(site=site, threads="1")
    c, _ = open_stream(server, "/sse?count=5&interval=5000")
    try:
        read_chunk(c, time.monotonic() + 5)  # the first tick: the handler now sleeps
        for target, body in (("/hello", b"Hello, World!"), ("/files/f.txt", b"static\n")) * 3:
            r, dt = get_timed(server, target)
            assert r.status == 200 and r.body == body
            assert dt < 0.05, (target, dt)
    finally:
        c.close()


def queued_ns(*pids):
    """Nanoseconds the threads of pids have spent runnable but waiting for a
    core, in all (run_delay, /proc/PID/task/TID/schedstat)."""
    total = 0
    for pid in pids:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    total += int(f.read().split()[1])
            except (FileNotFoundError, ProcessLookupError):
                pass  # a thread that ended meanwhile
    return total


def test_1000_streams_on_one_thread_and_hello_within_50ms(wserver):
    """1,000 open event streams, each ticking once a second, all on one
    worker thread: /hello still answers within 50 ms, at worst of 20 tries
    (each on a new connection) spread over two seconds of ticks, and every
    stream goes on ticking meanwhile.

    On a shared machine a try can be spoiled by others' load: a try over
    50 ms during which the kernel kept this test's or the server's threads
    waiting for a core (run_delay) for at least the excess does not count,
    and is made again (20 more at most). A server that is slow by itself
    gains nothing from that: every try that counts took under 50 ms."""
    n, probes = 1000, 20
    assert raise_nofile(n + 200) >= n + 100, "cannot raise RLIMIT_NOFILE"
    conns = []
    try:
        # opened over a second, as clients come, so that the ticks are spread
        for i in range(n):
            c = wserver.conn()
            c.send(request("GET", "/sse?count=60&interval=1000"))
            conns.append(c)
            if i % 100 == 99:
                time.sleep(0.1)
        deadline = time.monotonic() + 30
        for c in conns:
            c.read_until(b"\r\n\r\n", deadline)
            assert read_chunk(c, deadline)[1] == b"event: tick\ndata: 1\n\n"
        took, spoiled = [], []
        gc.disable()  # no collector pause inside a measurement
        try:
            while len(took) < probes:
                q0 = queued_ns(os.getpid(), wserver.proc.pid)
                r, dt = get_timed(wserver, "/hello")
                queued = (queued_ns(os.getpid(), wserver.proc.pid) - q0) / 1e9
                assert r.status == 200 and r.body == b"Hello, World!"
                if dt >= 0.05 and queued >= dt - 0.05 and len(spoiled) < probes:
                    spoiled.append((dt, queued))
                else:
                    took.append(dt)
                time.sleep(0.1)
        finally:
            gc.enable()
        deadline = time.monotonic() + 10
        for c in conns:
            assert read_chunk(c, deadline)[1] == b"event: tick\ndata: 2\n\n"
        assert max(took) < 0.05, "/hello took %s; not counted (took, of which waiting for a core): %s" % (
            ["%.1f ms" % (t * 1000) for t in sorted(took)],
            ["%.1f ms, %.1f ms" % (t * 1000, q * 1000) for t, q in spoiled])
    finally:
        for c in conns:
            c.close()


def test_client_leaving_mid_sleep_runs_the_defers(wserver):
    before = int(get_timed(wserver, "/nap_defers")[0].body)
    c, _ = open_stream(wserver, "/nap?ms=60000")
    assert read_chunk(c, time.monotonic() + 5)[1] == b"napping\n"
    c.close()
    deadline = time.monotonic() + 2
    while int(get_timed(wserver, "/nap_defers")[0].body) != before + 1:
        assert time.monotonic() < deadline, "the defer did not run"
        time.sleep(0.02)
    r, dt = get_timed(wserver, "/hello")
    assert r.status == 200 and dt < 0.05


def test_sleep_returns_0_and_request_timeout_does_not_expire_a_waiting_handler(make_server, greet_so):  # noqa: F811
    server = make_server(site=wait_site(greet_so), threads="1", request_timeout="1s",
                         keep_alive_timeout="1s")
    c, _ = open_stream(server, "/nap?ms=2500")
    try:
        deadline = time.monotonic() + 6
        assert read_chunk(c, deadline)[1] == b"napping\n"
        t, d = read_chunk(c, deadline)
        assert d == b"awake 0\n"
        assert read_chunk(c, deadline)[1] == b""
    finally:
        c.close()


def test_sigterm_wakes_a_long_sleep(wserver):
    c, _ = open_stream(wserver, "/nap?ms=600000")
    c2, _ = open_stream(wserver, "/sse?count=3&interval=600000")
    try:
        deadline = time.monotonic() + 5
        assert read_chunk(c, deadline)[1] == b"napping\n"
        assert read_chunk(c2, deadline)[1] == b"event: tick\ndata: 1\n\n"
        t0 = time.monotonic()
        wserver.send_signal(signal.SIGTERM)
        deadline = t0 + 1
        assert read_chunk(c, deadline)[1] == b"awake -125\n"  # -ECANCELED
        assert read_chunk(c, deadline)[1] == b""
        assert read_chunk(c2, deadline)[1] == b""  # the stream ends properly
        assert c.wait_closed(1) and c2.wait_closed(1)
        assert wserver.wait(3) == 0, wserver.stderr()
        assert time.monotonic() - t0 < 2
    finally:
        c.close()
        c2.close()


def test_wait_fd_woken_by_another_handler(wserver):
    c = wserver.conn()
    try:
        c.send(request("GET", "/fd_wait"))
        assert not c.pending(0.2)  # it waits
        r, dt = get_timed(wserver, "/fd_poke")
        assert r.body == b"poked" and dt < 0.05
        r = c.read_response(timeout=2)
        assert r.status == 200 and r.body == b"ready 1"
    finally:
        c.close()


def test_wait_fd_times_out(wserver):
    r, dt = get_timed(wserver, "/fd_wait?timeout=200")
    assert r.body == b"error -110"  # -ETIMEDOUT
    assert 0.19 <= dt < 1.0, dt


def test_wait_fd_two_waiters_on_one_fd(wserver):
    """The second registration of the same fd goes through a dup()."""
    a, b = wserver.conn(), wserver.conn()
    try:
        a.send(request("GET", "/fd_wait?timeout=3000"))
        b.send(request("GET", "/fd_wait?timeout=3000"))
        time.sleep(0.1)
        get_timed(wserver, "/fd_poke")
        ra, rb = a.read_response(timeout=4), b.read_response(timeout=4)
        bodies = sorted([ra.body, rb.body])
        # both woke on the poke; whichever read first consumed the count
        assert bodies == [b"ready 1", b"ready 1"], bodies
    finally:
        a.close()
        b.close()


def test_a_client_that_leaves_a_waiting_handler_is_still_logged(make_server, greet_so, tmp_path):  # noqa: F811
    """A hang-up during a wait unwinds the handler, and the request still
    gets its access log line: the status sent (a stream's 200), or 499 when
    nothing was (nginx's "client closed request")."""
    log = tmp_path / "access.log"
    s = make_server(site=wait_site(greet_so), threads="1", access_log=str(log))
    c, _ = open_stream(s, "/sse?count=100&interval=50")
    read_chunk(c, time.monotonic() + 5)
    c.close()
    for target in ("/nap?ms=60000", "/fd_wait"):  # asleep after a chunk; waiting before any
        with s.conn() as c:
            c.send(request("GET", target))
            time.sleep(0.3)
    deadline = time.monotonic() + 5
    lines = []
    while time.monotonic() < deadline and len(lines) < 3:
        lines = log.read_text().splitlines() if log.exists() else []
        time.sleep(0.05)
    assert len(lines) == 3, lines
    assert '"GET /sse?count=100&interval=50 HTTP/1.1" 200 ' in lines[0], lines
    assert '"GET /nap?ms=60000 HTTP/1.1" 200 8 ' in lines[1], lines  # "napping\n"
    assert '"GET /fd_wait HTTP/1.1" 499 0 ' in lines[2], lines
