"""Logs that cannot be written never stop request serving: a full disk from
the start (test_logs.py has the basic case), an access log that fills up or
whose reopening fails after start, an error log on a full disk. The
mechanisms work as root too (/dev/full; a path under a regular file, where
a directory was: ENOTDIR)."""

import os
import re
import signal
import time

from rawhttp import request
from test_logs import access_server, get, settled, wait_lines


def keep_alive_flood(s, n, target):
    with s.conn() as c:
        for i in range(n):
            c.send(request("GET", target % i))
            assert c.read_response().status == 200


def test_access_log_full_disk_errors_are_rate_limited(make_server):
    # 7 KB targets: a buffer of lines fills (and is written, and fails)
    # every few requests, far more often than 10 times a second
    s = make_server(access_log="/dev/full", threads="1")
    t0 = time.monotonic()
    keep_alive_flood(s, 400, "/hello?%d&" + "x" * 7000)
    elapsed = time.monotonic() - t0
    time.sleep(1.1)
    assert get(s, "/hello").status == 200  # flushed at the next second's tick
    err = settled(s.stderr, r"suppressed \d+ similar")
    failed = [l for l in err.splitlines() if "access log: write failed" in l]
    assert failed and all("No space left on device" in l for l in failed), err
    assert len(failed) <= 10 * (elapsed + 3), err
    assert re.search(r"\.\.\. suppressed \d+ similar messages", err), err
    dropped = [int(m) for m in re.findall(r"\((\d+) lines dropped so far\)", err)]
    assert dropped == sorted(dropped) and dropped[-1] >= 300, err
    assert s.proc.poll() is None


def test_access_log_filling_up_after_start(make_server, tmp_path):
    """The log's path is a symlink; SIGUSR1 reopens it once it leads to a
    full disk (writes fail: ENOSPC), then once it leads to a file again.
    One worker: with two, the test could only wait for the first one's
    failed write, and the other's buffered lines may go out after the next
    reopen (to the file, as nginx's would), which the counts below forbid."""
    real = tmp_path / "real.log"
    link = tmp_path / "access.log"
    os.symlink(real, link)
    s, _ = access_server(make_server, tmp_path, access_log=str(link), threads="1")
    for i in range(10):
        assert get(s, "/hello?before=%d" % i).status == 200
    assert len(wait_lines(real, 10)) == 10

    link.unlink()
    os.symlink("/dev/full", link)
    s.send_signal(signal.SIGUSR1)
    settled(s.stderr, "logs reopened")
    for i in range(30):
        assert get(s, "/hello?full=%d" % i).status == 200
    err = settled(s.stderr, "access log: write failed")
    assert "No space left on device" in err, err

    link.unlink()
    os.symlink(real, link)
    s.send_signal(signal.SIGUSR1)
    settled(s.stderr, "(?s)logs reopened.*logs reopened")
    for i in range(10):
        assert get(s, "/hello?after=%d" % i).status == 200
    lines = wait_lines(real, 20)
    assert sum("before=" in l for l in lines) == 10 and sum("after=" in l for l in lines) == 10
    assert not any("full=" in l for l in lines)
    s.stop()
    assert s.returncode == 0


def test_access_log_reopen_failing_keeps_the_old_file(make_server, tmp_path):
    """SIGUSR1 after the log's directory was moved away and a regular file
    put in its place: the reopening fails (ENOTDIR, whoever we run as), is
    reported, and lines keep going to the file already open; nothing is
    lost. Once the directory is back, the next SIGUSR1 reopens."""
    d = tmp_path / "logs"
    d.mkdir()
    s, _ = access_server(make_server, tmp_path, access_log=str(d / "access.log"))
    for i in range(10):
        assert get(s, "/hello?before=%d" % i).status == 200
    moved = tmp_path / "logs.old"
    d.rename(moved)
    d.write_bytes(b"not a directory\n")
    s.send_signal(signal.SIGUSR1)
    err = settled(s.stderr, "not every log was reopened")
    assert re.search(r"\[error\] cannot reopen access_log '.*/logs/access.log': Not a directory", err), err
    assert re.search(r"\[warn\] not every log was reopened", err), err
    assert "logs reopened" not in err, err
    for i in range(20):
        assert get(s, "/hello?during=%d" % i).status == 200
    assert len(wait_lines(moved / "access.log", 30)) == 30

    d.unlink()
    d.mkdir()
    s.send_signal(signal.SIGUSR1)
    settled(s.stderr, "(?s)not every log was reopened.*logs reopened")
    for i in range(5):
        assert get(s, "/hello?after=%d" % i).status == 200
    assert s.stop() == 0
    old = (moved / "access.log").read_text().splitlines()
    new = (d / "access.log").read_text().splitlines()
    assert len(old) == 30 and len(new) == 5
    assert all("after=" in l for l in new)


def test_error_log_on_full_disk_keeps_serving(make_server):
    """Both logs on a full disk: requests are answered, errors (a 500 is
    one, and every access-log failure) go nowhere, quietly, and SIGUSR1 and
    SIGTERM still work."""
    site = "site {\n    handler /hello hello_world\n    response /boom {\n        code = 500\n    }\n}\n"
    s = make_server(site=site, access_log="/dev/full", error_log="/dev/full")
    for i in range(50):
        assert get(s, "/hello?%d" % i).status == 200
        assert get(s, "/boom").status == 500
    s.send_signal(signal.SIGUSR1)
    time.sleep(1.2)
    assert get(s, "/hello").status == 200
    assert s.proc.poll() is None
    assert s.stop() == 0
