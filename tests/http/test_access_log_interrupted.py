"""Interrupted answers in the access log (issue 17, item 2): a client that
hangs up in the middle of a large download, a download cut by a stop's
shutdown_timeout and a client too slow to read within request_timeout each
leave one line with the status sent and the body bytes that actually went
out; a stop says at info level which connections it cut off."""

import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from rawhttp import maybe_tls, request
from test_logs import LINE, wait_lines

SIZE = 200 * 1024 * 1024  # sparse: no disk is used


def big_file(server):
    path = server.root / "huge.bin"
    with open(path, "wb") as f:
        f.truncate(SIZE)
    return path


def one_line(log, pattern):
    lines = wait_lines(log, 1, 4.0)
    m = [l for l in lines if pattern in l]
    assert len(m) == 1, lines
    x = LINE.match(m[0])
    assert x, m[0]
    return x


@pytest.mark.skipif(not shutil.which("curl"), reason="needs curl")
def test_client_hangs_up_mid_download(make_server, tmp_path):
    log = tmp_path / "access.log"
    s = make_server(access_log=str(log))
    big_file(s)
    p = subprocess.run(
        ["curl", "-k", "-s", "-o", "/dev/null", "--max-time", "1", "--limit-rate", "3M",
         "-w", "%{size_download}", "%s/huge.bin" % s.url],
        capture_output=True, timeout=20)
    assert p.returncode == 28, p  # curl's "operation timed out"
    got = int(p.stdout)
    x = one_line(log, "GET /huge.bin ")
    assert x["status"] == "200"
    sent = int(x["bytes"])
    # what went out: at least what curl read, at most that plus what the
    # socket buffers held (far below the file's size)
    assert got <= sent < SIZE // 4, (got, sent)
    assert s.proc.poll() is None


def slow_download(s, target="/huge.bin"):
    c = socket.create_connection((s.host, s.port))
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c = maybe_tls(c)
    c.sendall(request("GET", target))
    head = c.recv(200)
    assert head.startswith(b"HTTP/1.1 200"), head
    return c


def test_download_cut_by_shutdown_timeout(make_server, tmp_path):
    log = tmp_path / "access.log"
    s = make_server(access_log=str(log), shutdown_timeout="1s")
    big_file(s)
    c = slow_download(s)
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        s.send_signal(signal.SIGTERM)
        assert s.wait(10) == 0, s.stderr()
        assert time.monotonic() - t0 < 4
    finally:
        c.close()
    x = one_line(log, "GET /huge.bin ")
    assert x["status"] == "200"
    assert 0 < int(x["bytes"]) < SIZE // 4
    err = s.stderr()
    cut = [l for l in err.splitlines() if "cut off" in l]
    assert any("[info]" in l and '"GET /huge.bin HTTP/1.1"' in l and "127.0.0.1" in l
               for l in cut), err
    assert re.search(r"\[info\] stop: cut off 1 connection\b", err), err


def test_stop_cuts_off_incomplete_request(make_server, tmp_path):
    """A request whose head never completes: no access log line (no
    request), but the stop names it at info level."""
    log = tmp_path / "access.log"
    s = make_server(access_log=str(log), shutdown_timeout="1s")
    c = s.conn()
    try:
        c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.3)
        s.send_signal(signal.SIGTERM)
        assert s.wait(10) == 0, s.stderr()
    finally:
        c.close()
    err = s.stderr()
    assert re.search(r"\[info\] stop: cut off 127\.0\.0\.1 .*before a whole request", err), err
    assert not log.exists() or log.read_text() == ""


def test_slow_reader_timed_out_is_logged(make_server, tmp_path):
    log = tmp_path / "access.log"
    s = make_server(access_log=str(log), request_timeout="1s")
    big_file(s)
    c = slow_download(s)
    try:
        x = one_line(log, "GET /huge.bin ")
    finally:
        c.close()
    assert x["status"] == "200"
    assert 0 < int(x["bytes"]) < SIZE // 4
