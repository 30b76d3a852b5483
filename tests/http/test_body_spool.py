"""COLIBRI_NEED_BODY bodies above body_memory_max go to an unnamed file in
temp_dir, and the handler sees them through the same colibri_req_body()
(mapped), so memory per request is bounded whatever max_body is (issue 17,
item 10). Handlers: echo (built in) and body_sum, form of
tests/http/modules/greet.c."""

import hashlib
import os
import socket
import threading
import time
import zlib

import pytest

from rawhttp import chunked, recv_until, request
from test_modules import greet_so  # noqa: F401 (the session fixture)


@pytest.fixture
def sserver(make_server, greet_so, tmp_path):  # noqa: F811
    site = (
        "module %s\nsite {\n    handler /sum body_sum\n    handler /form form\n"
        "    handler /echo echo\n}\n" % greet_so
    )
    (tmp_path / "spool").mkdir()
    return make_server(
        site=site, max_request_body="8M", body_memory_max="64k", temp_dir=str(tmp_path / "spool")
    )


def body_sum(server, body, chunks=None):
    with server.conn() as c:
        if chunks:
            c.send(
                b"POST /sum HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                + chunked(*[body[i : i + chunks] for i in range(0, len(body), chunks)])
            )
        else:
            c.send(request("POST", "/sum", body=body))
        return c.read_response(timeout=20)


def test_small_body_in_memory_large_in_a_file(sserver, tmp_path):
    small = os.urandom(64 * 1024)
    r = body_sum(sserver, small)
    assert r.status == 200, r
    assert r.body == b"65536 bytes, adler32 %d, in memory" % zlib.adler32(small)
    big = os.urandom(3 * 1024 * 1024 + 7)
    for chunks in (None, 100000):
        r = body_sum(sserver, big, chunks)
        assert r.status == 200, r
        assert r.body == b"%d bytes, adler32 %d, in a file" % (len(big), zlib.adler32(big)), chunks
    # the file had no name, and it is gone
    assert os.listdir(tmp_path / "spool") == []


def test_large_form_read_through_the_mapping(sserver):
    body = b"name=Ada+Lovelace&note=" + b"x" * 200000
    with sserver.conn() as c:
        c.send(request("POST", "/form", headers=[("Content-Type", "application/x-www-form-urlencoded")], body=body))
        r = c.read_response()
    assert r.status == 200 and r.body.startswith(b"name=[Ada Lovelace] note=[xxx"), r


def test_echo_of_a_spooled_body_and_the_next_request(sserver):
    body = os.urandom(2 * 1024 * 1024)
    with sserver.conn() as c:
        c.send(request("POST", "/echo", body=body) + request("POST", "/sum", body=b"abc"))
        r = c.read_response(timeout=20)
        assert r.status == 200 and r.body == body
        r = c.read_response()
        assert r.body == b"3 bytes, adler32 %d, in memory" % zlib.adler32(b"abc")


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def upload(port, body, digest, results, i):
    """POSTs body to /echo and checks the answer's length and hash, reading
    it as it comes (never held whole here either)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
            sender = threading.Thread(target=s.sendall, args=(body,))
            sender.start()
            head = recv_until(s, lambda d: b"\r\n\r\n" in d, 60)
            status_line, rest = head.split(b"\r\n", 1)
            rest = rest.split(b"\r\n\r\n", 1)[1]
            h = hashlib.sha256(rest)
            n = len(rest)
            while n < len(body):
                d = s.recv(1 << 20)
                if not d:
                    break
                h.update(d)
                n += len(d)
            sender.join(60)
            results[i] = (status_line, n, h.hexdigest() == digest)
    except Exception as e:  # noqa: BLE001 (reported by the test)
        results[i] = repr(e)


@pytest.mark.plain_only("its uploads are raw sockets")
def test_peak_rss_bounded_by_body_memory_max(make_server):
    """4 concurrent 32 MiB uploads to echo with a 200M limit: the server's
    peak RSS grows by less than 40 MiB (it held each body about twice over:
    about 256 MiB), and every answer is the body, byte for byte."""
    s = make_server(max_request_body="200M")
    size, n = 32 << 20, 4
    body = os.urandom(size)
    digest = hashlib.sha256(body).hexdigest()
    # warm up: the first answers grow the buffers every later request reuses
    results = [None]
    upload(s.port, body[: 2 << 20], hashlib.sha256(body[: 2 << 20]).hexdigest(), results, 0)
    base = vm_hwm_kib(s.proc.pid)
    results = [None] * n
    threads = [threading.Thread(target=upload, args=(s.port, body, digest, results, i)) for i in range(n)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert time.monotonic() - t0 < 120
    for r in results:
        assert r == (b"HTTP/1.1 200 OK", size, True), results
    grown = vm_hwm_kib(s.proc.pid) - base
    assert grown < 40 * 1024, "peak RSS grew by %d KiB for %d bodies of %d MiB" % (grown, n, size >> 20)
