"""Logs: the access log (Combined Log Format, escaping, flushing, SIGTERM,
SIGUSR1 rotation, a full disk), the error log (levels, file, rate limit)
and the pid file."""

import os
import re
import signal
import time

from rawhttp import request
from test_config_errors import good_site, listener, run_config

DATE = r"\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}"
LINE = re.compile(
    r'^(?P<addr>\S+) - - \[(?P<date>%s)\] "(?P<req>[^"]*)" (?P<status>\d{3}) (?P<bytes>\d+) '
    r'"(?P<ref>[^"]*)" "(?P<ua>[^"]*)"$' % DATE
)
ERR_LINE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[(error|warn|info|debug)\] \S")


def wait_lines(path, n, limit=3.0):
    """The lines of path once it has at least n (or whatever is there at the limit)."""
    deadline = time.monotonic() + limit
    while True:
        lines = path.read_bytes().decode("latin-1").splitlines() if path.exists() else []
        if len(lines) >= n or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def get(server, target, headers=(), method="GET", raw=None):
    with server.conn() as c:
        c.send(raw if raw is not None else request(method, target, headers=list(headers) + [("Connection", "close")]))
        return c.read_response(head_request=method == "HEAD")




def access_server(make_server, tmp_path, **kw):
    log = tmp_path / "access.log"
    kw.setdefault("access_log", str(log))
    return make_server(**kw), log


def test_access_log_lines(make_server, tmp_path):
    s, log = access_server(make_server, tmp_path)
    r = get(s, "/hello", [("Referer", "http://ref.example/x"), ("User-Agent", "test-agent/1.0")])
    assert r.status == 200
    assert get(s, "/hello", method="HEAD").status == 200
    assert get(s, "/nope").status == 404
    etag = get(s, "/file.txt").header("etag")
    assert get(s, "/file.txt", [("If-None-Match", etag)]).status == 304
    lines = wait_lines(log, 5)
    assert len(lines) == 5, lines
    m = [LINE.match(l) for l in lines]
    assert all(m), lines
    by_req = {x["req"] + " " + x["status"]: x for x in m}
    g = by_req["GET /hello HTTP/1.1 200"]
    assert g["addr"] == "127.0.0.1" and g["bytes"] == "13"
    assert g["ref"] == "http://ref.example/x" and g["ua"] == "test-agent/1.0"
    h = by_req["HEAD /hello HTTP/1.1 200"]
    assert h["bytes"] == "0" and h["ref"] == "-" and h["ua"] == "-"
    n = by_req["GET /nope HTTP/1.1 404"]
    assert int(n["bytes"]) > 0
    assert by_req["GET /file.txt HTTP/1.1 304"]["bytes"] == "0"
    assert by_req["GET /file.txt HTTP/1.1 200"]["bytes"] == str(len(b"hello from a file\n"))


def test_access_log_escaping(make_server, tmp_path):
    s, log = access_server(make_server, tmp_path)
    assert get(s, '/a"b').status == 404
    ua = b'evil" "x\\y\t\x80\xff'
    raw = b"GET /hello HTTP/1.1\r\nHost: x\r\nUser-Agent: " + ua + b"\r\nConnection: close\r\n\r\n"
    assert get(s, None, raw=raw).status == 200
    # refused by the parser: logged with its first line, escaped
    assert get(s, None, raw=b'GET /x\x01y"z HTTP/1.1\r\nHost: x\r\n\r\n').status == 400
    data = b""
    deadline = time.monotonic() + 3
    while data.count(b"\n") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
        data = log.read_bytes() if log.exists() else b""
    lines = data.decode("latin-1").split("\n")
    assert lines[-1] == "" and len(lines) == 4, data  # exactly three lines, no forged ones
    text = data.decode("latin-1")
    assert '"GET /a\\x22b HTTP/1.1" 404 ' in text
    assert '"evil\\x22 \\x22x\\x5Cy\\x09\\x80\\xFF"' in text
    assert '"GET /x\\x01y\\x22z HTTP/1.1" 400 ' in text
    for l in lines[:-1]:
        assert LINE.match(l), l
        assert all(0x20 <= ord(ch) < 0x7F for ch in l), l


def test_access_log_stdout(make_server):
    s = make_server(access_log="stdout")
    assert get(s, "/hello").status == 200
    lines = wait_lines(s.stdout_path, 1)
    assert len(lines) == 1 and LINE.match(lines[0]), lines
    assert '"GET /hello HTTP/1.1" 200 13' in lines[0]


def test_access_log_flushes_idle_server_within_1_5s(make_server, tmp_path):
    s, log = access_server(make_server, tmp_path)
    for _ in range(3):
        t0 = time.monotonic()
        before = len(wait_lines(log, 0, 0))
        assert get(s, "/hello").status == 200
        lines = wait_lines(log, before + 1, 1.5)
        assert len(lines) == before + 1, "not flushed within 1.5 s"
        assert time.monotonic() - t0 <= 1.6
        time.sleep(0.3)


def test_access_log_nothing_lost_at_sigterm(make_server, tmp_path):
    s, log = access_server(make_server, tmp_path)
    n, conns = 600, 4
    cs = [s.conn() for _ in range(conns)]
    for i in range(n // conns):
        for j, c in enumerate(cs):
            c.send(request("GET", "/hello?i=%d-%d" % (i, j)))
        for c in cs:
            assert c.read_response().status == 200
    for c in cs:
        c.close()
    s.send_signal(signal.SIGTERM)
    assert s.wait(10) == 0, s.stderr()
    lines = log.read_text().splitlines()
    assert len(lines) == n
    assert len(set(l.split('"')[1] for l in lines)) == n


def test_access_log_reopen_on_sigusr1(make_server, tmp_path):
    s, log = access_server(make_server, tmp_path)
    for i in range(20):
        assert get(s, "/hello?before=%d" % i).status == 200
    rotated = tmp_path / "access.log.1"
    os.rename(log, rotated)
    s.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 3
    while not log.exists():
        assert time.monotonic() < deadline, "SIGUSR1 did not reopen the log"
        time.sleep(0.02)
    for i in range(30):
        assert get(s, "/hello?after=%d" % i).status == 200
    assert s.proc.poll() is None
    s.send_signal(signal.SIGTERM)
    assert s.wait(10) == 0, s.stderr()
    old, new = rotated.read_text().splitlines(), log.read_text().splitlines()
    assert len(old) + len(new) == 50
    assert sum("after=" in l for l in new) == 30  # every later line at the old path
    assert all("before=" in l for l in old)
    assert "logs reopened" in s.stderr()


def test_error_log_reopen_on_sigusr1(make_server, tmp_path):
    path = tmp_path / "error.log"
    s = make_server(error_log=str(path))
    settled(path.read_text, "listening on")
    rotated = tmp_path / "error.log.1"
    path.rename(rotated)
    s.send_signal(signal.SIGUSR1)
    # the reopening is said in the new file
    text = settled(lambda: path.read_text() if path.exists() else "", "logs reopened")
    assert "logs reopened" in text
    assert "listening on" in rotated.read_text() and "listening on" not in text
    s.stop()
    assert "[info] stopped" in path.read_text()


def test_access_log_full_disk_does_not_fail_requests(make_server):
    s = make_server(access_log="/dev/full")
    for _ in range(20):
        assert get(s, "/hello").status == 200
    deadline = time.monotonic() + 3
    while "access log: write failed" not in s.stderr():
        assert time.monotonic() < deadline, s.stderr()
        time.sleep(0.05)
    assert "No space left on device" in s.stderr()
    assert get(s, "/hello").status == 200


def test_access_log_off_by_default(make_server, tmp_path):
    s = make_server()
    assert get(s, "/hello").status == 200
    time.sleep(1.2)
    assert not any(p.name.endswith(".log") for p in tmp_path.iterdir())
    assert s.stdout_path.read_bytes() == b""


# --- error log -----------------------------------------------------------------


def settled(read, pattern, timeout=3.0):
    """read() once pattern shows in it (the port accepts connections a
    moment before the start-up lines are written), or as it is then."""
    deadline = time.monotonic() + timeout
    text = read()
    while not re.search(pattern, text, re.M) and time.monotonic() < deadline:
        time.sleep(0.02)
        text = read()
    return text


def test_error_log_info_has_listening_lines(make_server):
    s = make_server()
    err = settled(s.stderr, "listening on")
    lines = [l for l in err.splitlines() if "listening on" in l]
    assert len(lines) == 1 and ERR_LINE.match(lines[0]) and "[info]" in lines[0], err
    assert ("listening on http://127.0.0.1:%d" % s.port) in lines[0]
    assert "[debug]" not in err


def test_error_log_level_error_hides_info(make_server):
    s = make_server(error_log_level="error")
    assert "listening on" not in s.stderr()
    s.stop()
    assert s.stderr() == ""


def test_error_log_level_debug(make_server):
    s = make_server(error_log_level="debug")
    err = settled(s.stderr, r"\[debug\] .*worker threads")
    assert "listening on http://" in err
    assert re.search(r"^\S+ \S+ \[debug\] .*worker threads", err, re.M), err


def test_error_log_to_file(make_server, tmp_path):
    path = tmp_path / "error.log"
    s = make_server(error_log=str(path))
    text = settled(path.read_text, "listening on http://127.0.0.1:%d" % s.port)
    assert ("listening on http://127.0.0.1:%d" % s.port) in text
    assert "listening on" not in s.stderr()
    s.stop()
    assert "[info] stopped" in path.read_text()


def test_error_log_rate_limited(make_server):
    site = "site {\n    response /boom {\n        code = 500\n    }\n}\n"
    s = make_server(site=site)
    with s.conn() as c:
        for _ in range(200):
            c.send(request("GET", "/boom"))
            assert c.read_response().status == 500
    time.sleep(1.1)
    assert get(s, "/boom").status == 500
    time.sleep(0.1)
    err = s.stderr()
    warned = [l for l in err.splitlines() if "answered 500" in l]
    assert 10 <= len(warned) <= 31, err  # 10 a second, the flood lasted at most ~2 s
    assert re.search(r"\[warn\] \.\.\. suppressed \d+ similar messages", err), err


# --- pid file ------------------------------------------------------------------


def test_pid_file_written_and_removed(make_server, tmp_path):
    pid = tmp_path / "colibri.pid"
    s = make_server(pid_file=str(pid))
    # the listeners are bound (the harness's probe got in) just before the
    # pid file is written: give it a moment (seen missing once in make test)
    deadline = time.monotonic() + 5
    while not pid.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pid.read_text() == "%d\n" % s.proc.pid
    s.send_signal(signal.SIGTERM)
    assert s.wait(10) == 0
    assert not pid.exists()


def test_pid_file_unwritable_is_a_start_error(tmp_path):
    text = listener() + "pid_file = %s/no/such/dir/colibri.pid\n" % tmp_path + good_site(tmp_path)
    conf, p = run_config(tmp_path, text)
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert re.search(r"^colibri: %s:2: pid_file: cannot write '.*/no/such/dir/colibri.pid': No such file"
                     % re.escape(str(conf)), err, re.M), err


# --- config errors ---------------------------------------------------------------


def test_bad_log_keys(tmp_path):
    cases = [
        ("error_log_level = loud", "error_log_level: expected error, warn, info or debug, not 'loud'"),
        ("access_log = %s/missing/access.log" % tmp_path, "access_log: cannot open '%s/missing/access.log': No such file or directory" % tmp_path),
        ("error_log = %s/missing/error.log" % tmp_path, "error_log: cannot open '%s/missing/error.log': No such file or directory" % tmp_path),
        ('access_log = ""', "access_log: expected a file"),
        ('pid_file = ""', "pid_file: expected a file"),
    ]
    for line, msg in cases:
        conf, p = run_config(tmp_path, listener() + line + "\n" + good_site(tmp_path))
        err = p.stderr.decode()
        assert p.returncode == 1, (line, err)
        assert ("colibri: %s:2: %s" % (conf, msg)) in err, (line, err)
