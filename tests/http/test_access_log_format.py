"""Access logs per site and log_format (issue 17, item 12): access_log
inside a site (one file per virtual host, the top-level one for the rest),
log_format with named fields as text or JSON (escaped: hostile bytes in the
target and the User-Agent), errors, and reopening on SIGUSR1 and reload."""

import json
import os
import re
import signal
import socket
import time

from rawhttp import request
from test_access_log_interrupted import big_file, slow_download
from test_config_errors import good_site, listener, run_config
from test_logs import LINE, get, wait_lines
from test_reload import reload


def named(host, target="/hello", headers=(), method="GET"):
    return request(method, target, host=host, headers=[("Connection", "close")] + list(headers))


def send(s, raw, head_request=False):
    with s.conn() as c:
        c.send(raw)
        return c.read_response(head_request=head_request)


def sites(tmp_path, a_extra="", b_extra="", default_extra=""):
    return (
        "site a.example {\n    handler /hello hello_world\n%s}\n"
        "site b.example {\n    handler /hello hello_world\n%s}\n"
        "site {\n    handler /hello hello_world\n    handler /echo echo\n%s}\n"
        % (a_extra, b_extra, default_extra))


def test_one_file_per_site(make_server, tmp_path):
    top, a, d = tmp_path / "top.log", tmp_path / "a.log", tmp_path / "default.log"
    s = make_server(access_log=str(top), site=sites(
        tmp_path, a_extra="    access_log = %s\n" % a,
        default_extra="    access_log = %s\n" % d))
    assert send(s, named("a.example", "/hello?site=a")).status == 200
    assert send(s, named("b.example", "/hello?site=b")).status == 200
    assert send(s, named("other.example", "/hello?site=default")).status == 200
    assert send(s, b"GET /\x01 HTTP/1.1\r\nHost: a.example\r\n\r\n").status == 400
    la, ld, lt = wait_lines(a, 1), wait_lines(d, 1), wait_lines(top, 2)
    assert len(la) == 1 and "site=a" in la[0] and LINE.match(la[0]), la
    assert len(ld) == 1 and "site=default" in ld[0] and LINE.match(ld[0]), ld
    # b has no file of its own: the top level's, which also has what no
    # site took (refused by the parser)
    lt.sort(key=lambda l: " 400 " in l)  # two workers: in either order
    assert len(lt) == 2 and "site=b" in lt[0] and " 400 " in lt[1], lt
    assert all(LINE.match(l) for l in lt), lt


def test_site_log_off_and_shared_file(make_server, tmp_path):
    top, shared = tmp_path / "top.log", tmp_path / "shared.log"
    s = make_server(access_log=str(top), site=sites(
        tmp_path, a_extra="    access_log = %s\n" % shared, b_extra="    access_log = %s\n" % shared,
        default_extra="    access_log = off\n"))
    for host in ("a.example", "b.example", "c.example"):
        assert send(s, named(host, "/hello?h=" + host)).status == 200
    lines = wait_lines(shared, 2)
    time.sleep(1.2)
    assert sorted(l.split('"')[1] for l in lines) == [
        "GET /hello?h=a.example HTTP/1.1", "GET /hello?h=b.example HTTP/1.1"], lines
    assert not top.exists() or top.read_text() == ""


def test_combined_named_is_byte_identical(make_server, tmp_path):
    """log_format = combined writes what no log_format writes."""
    plain, named_log = tmp_path / "plain.log", tmp_path / "named.log"
    s = make_server(access_log=str(plain), site=sites(
        tmp_path, a_extra="    access_log = %s\n    log_format = combined\n" % named_log))
    ua = ("User-Agent", "x\"y\\z\t\xff")
    assert send(s, named("a.example", "/hello?x=1", [ua, ("Referer", "r")])).status == 200
    assert send(s, named("b.example", "/hello?x=1", [ua, ("Referer", "r")])).status == 200
    a, b = wait_lines(named_log, 1), wait_lines(plain, 1)
    assert len(a) == 1 and len(b) == 1 and LINE.match(a[0]) and LINE.match(b[0]), (a, b)
    # the two requests may fall on either side of a second (slow under
    # valgrind): every byte but the time must agree
    def untimed(line):
        return re.sub(r"\[[^]]*\]", "[]", line, count=1)
    assert untimed(a[0]) == untimed(b[0]), (a, b)


# what the parser lets through: quotes, backslashes, tabs, obs-text (the
# control bytes of a refused request are in the 400's line below)
HOSTILE_TARGET = b'/hello?q="\\%22</script>{"a":1}'
HOSTILE_UA = b'ev"il\\ \t\\u0000 \xc3\xa9 \xff\xfe\x80 {"a":1}\t'


def test_json_format_escapes_hostile_bytes(make_server, tmp_path):
    log = tmp_path / "access.log"
    s = make_server(access_log=str(log), log_format="json")
    raw = (b"GET " + HOSTILE_TARGET + b" HTTP/1.1\r\nHost: h.example:8080\r\nUser-Agent: " + HOSTILE_UA
           + b"\r\nReferer: http://r.example/\"\r\nConnection: close\r\n\r\n")
    assert send(s, raw).status == 200
    assert send(s, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello").status == 200
    assert send(s, b"GET /x\x01y\"z HTTP/1.1\r\nHost: x\r\n\r\n").status == 400
    data = b""
    deadline = time.monotonic() + 3
    while data.count(b"\n") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
        data = log.read_bytes() if log.exists() else b""
    lines = data.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 4, data
    for l in lines[:-1]:
        assert all(0x20 <= c < 0x7f for c in l), l  # ASCII, one line each
    # two workers: the lines in any order
    objs = sorted((json.loads(l) for l in lines[:-1]), key=lambda o: (o["status"], o["method"] or ""))
    o = objs[0]
    # every byte comes back (a byte above 0x7f as the character of that number)
    assert o["uri"].encode("latin-1") == HOSTILE_TARGET
    assert o["user_agent"].encode("latin-1") == HOSTILE_UA.strip(b"\t")
    assert o["request"].encode("latin-1") == b"GET " + HOSTILE_TARGET + b" HTTP/1.1"
    assert o["referer"] == 'http://r.example/"'
    assert o["host"] == "h.example:8080" and o["method"] == "GET" and o["protocol"] == "HTTP/1.1"
    assert o["status"] == 200 and o["body_bytes_sent"] == 13 and o["completion"] == "OK"
    assert o["remote_addr"] == "127.0.0.1"
    assert re.fullmatch(r"\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}", o["time_local"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", o["time_iso8601"])
    assert isinstance(o["request_time_ms"], int) and 0 <= o["request_time_ms"] < 1000
    assert o["bytes_received"] == len(raw)
    p = objs[1]
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
    assert p["bytes_received"] == len(head) + 5 and p["referer"] is None and p["user_agent"] is None
    r = objs[2]  # refused by the parser: its line as it came, no method
    assert r["status"] == 400 and r["method"] is None and r["request"] == 'GET /x\x01y"z HTTP/1.1'


def test_json_fields_chosen_and_text_format(make_server, tmp_path):
    j, t = tmp_path / "j.log", tmp_path / "t.log"
    site = sites(tmp_path, a_extra="    access_log = %s\n    log_format = json status host completion\n" % j,
                 b_extra='    access_log = %s\n    log_format = "$host $$ [$status] $request_time_ms'
                 ' $bytes_received \\"$user_agent\\" $referer"\n' % t)
    s = make_server(site=site)
    assert send(s, named("a.example")).status == 200
    assert send(s, named("b.example", headers=[("User-Agent", 'a"b\xff')])).status == 200
    lj, lt = wait_lines(j, 1), wait_lines(t, 1)
    assert lj == ['{"status":200,"host":"a.example","completion":"OK"}'], lj
    head = named("b.example", headers=[("User-Agent", 'a"b\xff')])
    assert re.fullmatch(r'b\.example \$ \[200\] \d+ %d "a\\x22b\\xFF" -' % len(head), lt[0]), lt


def test_json_interrupted_download(make_server, tmp_path):
    """A download cut by request_timeout: completion null, request time
    about the timeout, the bytes sent below the size."""
    log = tmp_path / "access.log"
    s = make_server(access_log=str(log), log_format="json", request_timeout="1s")
    big_file(s)
    c = slow_download(s)
    try:
        lines = wait_lines(log, 1, 5.0)
    finally:
        c.close()
    o = json.loads(lines[0])
    assert o["status"] == 200 and o["completion"] is None
    assert 0 < o["body_bytes_sent"] < 50 * 1024 * 1024
    assert 800 <= o["request_time_ms"] < 5000, o


def test_log_format_errors(tmp_path):
    f = tmp_path / "x.log"
    cases = [
        ("log_format = json status nope", 2, "log_format: unknown field 'nope' (the fields: remote_addr "),
        ("log_format = \"$remote_addr $bogus\"", 2, "log_format: unknown field '$bogus'"),
        ("log_format = plain", 2, "log_format: expected combined, json [FIELD...] or a text with $FIELD in it"),
        ("site a.example {\n    access_log = %s\n    access_log = %s\n}" % (f, f), 4,
         "access_log: given twice for this site (first at line 3)"),
        ("site a.example {\n    log_format = json\n    log_format = combined\n}", 4,
         "log_format: given twice for this site (first at line 3)"),
        ("site a.example {\n    access_log = stderr\n}", 3, "access_log: expected a file, 'stdout' or 'off'"),
        ("site a.example {\n    access_log = %s/no/such/dir/a.log\n}" % tmp_path, 3,
         "access_log: cannot open '%s/no/such/dir/a.log': No such file or directory" % tmp_path),
    ]
    for text, line, msg in cases:
        conf, p = run_config(tmp_path, listener() + text + "\n" + good_site(tmp_path))
        err = p.stderr.decode()
        assert p.returncode == 1, (text, err)
        assert ("%s:%d: %s" % (conf, line, msg)) in err, (text, err)


def wait_for(path, needle, limit=3.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text():
            return True
        time.sleep(0.05)
    return False


def test_site_logs_reopen_on_sigusr1_and_reload(make_server, tmp_path):
    top, a, b = tmp_path / "top.log", tmp_path / "a.log", tmp_path / "b.log"
    s = make_server(access_log=str(top), site=sites(tmp_path, a_extra="    access_log = %s\n" % a))
    assert send(s, named("a.example", "/hello?n=1")).status == 200
    assert wait_for(a, "n=1")
    # rotated away: SIGUSR1 creates it again, lines go there
    a.rename(tmp_path / "a.log.1")
    s.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 3
    while not a.exists():
        assert time.monotonic() < deadline, "SIGUSR1 did not reopen the site's log"
        time.sleep(0.02)
    assert send(s, named("a.example", "/hello?n=2")).status == 200
    assert wait_for(a, "n=2") and "n=2" not in (tmp_path / "a.log.1").read_text()
    # a reload that gives b a file of its own and a a JSON format
    text = s.config.read_text().replace(
        "site b.example {\n", "site b.example {\n    access_log = %s\n" % b).replace(
        "    access_log = %s\n" % a, "    access_log = %s\n    log_format = json\n" % a)
    reload(s, text)
    assert send(s, named("a.example", "/hello?n=3")).status == 200
    assert send(s, named("b.example", "/hello?n=4")).status == 200
    assert wait_for(a, "n=3") and wait_for(b, "n=4")
    assert json.loads(a.read_text().splitlines()[-1])["uri"] == "/hello?n=3"
    assert "n=4" not in top.read_text()
    # and the file the reload opened is reopened too
    b.rename(tmp_path / "b.log.1")
    s.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 3
    while not b.exists():
        assert time.monotonic() < deadline, "SIGUSR1 did not reopen the reloaded site's log"
        time.sleep(0.02)
    assert send(s, named("b.example", "/hello?n=5")).status == 200
    assert wait_for(b, "n=5")
    s.send_signal(signal.SIGTERM)
    assert s.wait(10) == 0, s.stderr()
    assert "reload failed" not in s.stderr()
