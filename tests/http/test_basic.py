"""hello_world, echo, 404, serve_files, CLI flags, IPv6."""

import email.utils
import re
import subprocess
import time
from urllib.parse import urlsplit

import pytest
import requests

from conftest import HELLO_TXT, INDEX_HTML, SECRET, SUB_INDEX, colibri_bin, free_port, ipv6_available
from rawhttp import RawConn, request

IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"\d{4} \d\d:\d\d:\d\d GMT$"
)


def get(server, path, **kw):
    return requests.get(server.url + path, timeout=5, allow_redirects=False, **kw)


# ---- hello_world -----------------------------------------------------------


def test_hello_get(server):
    r = get(server, "/hello")
    assert r.status_code == 200
    assert r.content == b"Hello, World!"
    assert r.headers["Content-Type"].split(";")[0].strip() == "text/plain"
    assert r.headers["Content-Length"] == "13"
    assert r.headers["Server"] == "colibri"
    assert "Transfer-Encoding" not in r.headers


def test_date_header_is_imf_fixdate_and_current(server):
    r = get(server, "/hello")
    date = r.headers["Date"]
    assert IMF_FIXDATE.match(date), date
    when = email.utils.parsedate_to_datetime(date).timestamp()
    assert abs(when - time.time()) < 3, (date, time.time())


def test_date_header_follows_the_second_on_one_connection(server):
    """The worker reads the wall clock once per monotonic second and derives
    it in between: on one keep-alive connection, requests every 20 ms across
    the start of a second each get a Date between the second the request
    left in and the second the answer came back in (the coarse clock lags by
    a few ms at most, the margin covers that)."""
    with server.conn() as c:
        for _ in range(3):
            time.sleep((0.9 - time.time() % 1.0) % 1.0)
            for _ in range(10):
                before = time.time()
                c.send(request("GET", "/hello"))
                r = c.read_response()
                after = time.time()
                assert r.status == 200
                when = email.utils.parsedate_to_datetime(r.header("Date")).timestamp()
                assert int(before - 0.01) <= when <= int(after), (r.header("Date"), before, after)
                time.sleep(0.02)


@pytest.mark.parametrize(
    "query,expected",
    [
        ("name=X", "Hello, X!"),
        ("name=Ada+Lovelace", "Hello, Ada Lovelace!"),
        ("name=J%C3%BCrgen", "Hello, J\u00fcrgen!"),
        ("name=a%2Bb%20c", "Hello, a+b c!"),
        ("x=1&name=second&y=2", "Hello, second!"),
    ],
)
def test_hello_name(server, query, expected):
    r = get(server, "/hello?" + query)
    assert r.status_code == 200
    assert r.content == expected.encode()
    assert r.headers["Content-Length"] == str(len(expected.encode()))


def test_hello_head_same_headers_no_body(server):
    with server.conn() as c:
        c.send(request("GET", "/hello"))
        g = c.read_response()
        c.send(request("HEAD", "/hello") + request("GET", "/hello?name=next"))
        h = c.read_response(head_request=True)
        # If HEAD had leaked a body, the next response would not start here.
        n = c.read_response()
    assert h.status == 200
    assert h.header("Content-Length") == "13"
    assert h.header("Content-Type") == g.header("Content-Type")
    assert h.header("Server") == "colibri"
    assert h.header("Date") is not None
    assert n.status == 200 and n.body == b"Hello, next!"


def allow_set(resp):
    return set(t.upper() for t in resp.tokens("allow"))


def test_hello_post_is_405_with_allow(server):
    r = requests.post(server.url + "/hello", data=b"x", timeout=5)
    assert r.status_code == 405
    with server.conn() as c:
        c.send(request("POST", "/hello", body=b"abc"))
        resp = c.read_response()
    assert resp.status == 405
    allow = allow_set(resp)
    assert {"GET", "HEAD", "OPTIONS"} <= allow, resp.header("Allow")
    assert "POST" not in allow


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_hello_other_methods_405(server, method):
    with server.conn() as c:
        c.send(request(method, "/hello", body=b"abc"))
        resp = c.read_response()
    assert resp.status == 405
    assert {"GET", "HEAD"} <= allow_set(resp)


def test_hello_options_204(server):
    with server.conn() as c:
        c.send(request("OPTIONS", "/hello") + request("GET", "/hello"))
        resp = c.read_response()
        nxt = c.read_response()
    assert resp.status == 204
    assert {"GET", "HEAD", "OPTIONS"} <= allow_set(resp), resp.header("Allow")
    assert resp.header("Content-Length") in (None, "0")
    assert resp.header("Transfer-Encoding") is None
    assert nxt.status == 200 and nxt.body == b"Hello, World!"


def test_options_asterisk_204(server):
    with server.conn() as c:
        c.send(b"OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n" + request("GET", "/hello"))
        resp = c.read_response()
        nxt = c.read_response()
    assert resp.status == 204
    assert "GET" in allow_set(resp), resp.header("Allow")
    assert resp.header("Transfer-Encoding") is None
    assert nxt.status == 200


def options_asterisk_allow(server):
    with server.conn() as c:
        c.send(b"OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n")
        resp = c.read_response()
    assert resp.status == 204
    return allow_set(resp)


def test_options_asterisk_lists_only_what_some_route_answers(server):
    # the default site: hello_world (GET), echo (everything but TRACE) and
    # serve_files (GET): no route answers TRACE, so it is not advertised
    assert options_asterisk_allow(server) == {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"}


def test_options_asterisk_with_get_only_routes(make_server):
    s = make_server(site="site {\n    handler /hello hello_world\n}\n")
    assert options_asterisk_allow(s) == {"GET", "HEAD", "OPTIONS"}


@pytest.mark.plain_only("a server without a site, so without a certificate")
def test_options_asterisk_without_routes(make_server):
    s = make_server(site="")
    assert options_asterisk_allow(s) == {"OPTIONS"}


# ---- echo ------------------------------------------------------------------


def test_echo_without_body_reflects_head(server):
    head_lines = [b"Host: localhost", b"X-Test: abc", b"User-Agent: raw/1.0", b"Accept: */*"]
    req = b"GET /echo?q=1&r=%20 HTTP/1.1\r\n" + b"\r\n".join(head_lines) + b"\r\n\r\n"
    with server.conn() as c:
        c.send(req)
        resp = c.read_response()
    assert resp.status == 200
    assert resp.header("Content-Type").split(";")[0] == "text/plain"
    expected = b"GET /echo?q=1&r=%20 HTTP/1.1\r\n" + b"".join(l + b"\r\n" for l in head_lines)
    assert resp.body.startswith(expected), resp.body
    assert resp.body[len(expected) :] in (b"", b"\r\n"), resp.body
    assert int(resp.header("Content-Length")) == len(resp.body)


def test_echo_http10_request_line(server):
    with server.conn() as c:
        c.send(b"DELETE /echo/x HTTP/1.0\r\nX-A: 1\r\n\r\n")
        resp = c.read_response()
    assert resp.status == 200
    assert resp.body.startswith(b"DELETE /echo/x HTTP/1.0\r\nX-A: 1\r\n"), resp.body


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
def test_echo_methods_with_body(server, method):
    body = b"body for " + method.encode() + b" \x00\xff\r\n end"
    with server.conn() as c:
        c.send(request(method, "/echo", body=body))
        resp = c.read_response()
    assert resp.status == 200
    assert resp.body == body
    assert resp.header("Content-Type").split(";")[0] == "text/plain"


def test_echo_head_with_body(server):
    with server.conn() as c:
        c.send(request("HEAD", "/echo", body=b"12345") + request("GET", "/hello"))
        h = c.read_response(head_request=True)
        n = c.read_response()
    assert h.status == 200
    assert h.header("Content-Length") in (None, "5")
    assert n.status == 200 and n.body == b"Hello, World!"


@pytest.mark.parametrize("method", ["GET", "DELETE", "OPTIONS"])
def test_echo_methods_without_body(server, method):
    with server.conn() as c:
        c.send(request(method, "/echo/path?x=y"))
        resp = c.read_response()
    assert resp.status == 200
    assert resp.body.startswith(("%s /echo/path?x=y HTTP/1.1\r\nHost: localhost\r\n" % method).encode())


# ---- 404 and files -----------------------------------------------------------


def test_unknown_path_404_html(make_server):
    # No serve_files at "/": unmatched paths must be 404 from the router.
    s = make_server(site="site {\n    handler /hello hello_world\n}\n")
    r = get(s, "/nope/nothing")
    assert r.status_code == 404
    assert r.headers["Content-Type"].split(";")[0].strip() == "text/html"
    assert b"<" in r.content and len(r.content) < 2048
    assert int(r.headers["Content-Length"]) == len(r.content)


def test_missing_file_404(server):
    r = get(server, "/no-such-file.txt")
    assert r.status_code == 404
    assert r.headers["Content-Type"].split(";")[0].strip() == "text/html"
    assert int(r.headers["Content-Length"]) == len(r.content)


def test_index_html(server):
    r = get(server, "/")
    assert r.status_code == 200
    assert r.content == INDEX_HTML
    assert r.headers["Content-Type"].split(";")[0].strip() == "text/html"
    assert r.headers["Content-Length"] == str(len(INDEX_HTML))


def test_file(server):
    r = get(server, "/file.txt")
    assert r.status_code == 200
    assert r.content == HELLO_TXT
    assert r.headers["Content-Type"].split(";")[0].strip() == "text/plain"


def test_binary_and_large_files(server):
    root = server.root
    for name in ("sub/data.bin", "big.bin"):
        r = get(server, "/" + name)
        assert r.status_code == 200, name
        assert r.content == (root / name).read_bytes(), name


def test_file_head(server):
    with server.conn() as c:
        c.send(request("HEAD", "/big.bin") + request("GET", "/file.txt"))
        h = c.read_response(head_request=True)
        n = c.read_response()
    assert h.status == 200
    assert h.header("Content-Length") == str(300 * 1024)
    assert n.body == HELLO_TXT


def location_path(loc):
    parts = urlsplit(loc)
    return parts.path + ("?" + parts.query if parts.query else "")


def test_dir_redirects_with_slash(server):
    r = get(server, "/sub")
    assert r.status_code == 301
    assert location_path(r.headers["Location"]) == "/sub/"


def test_dir_redirect_keeps_query(server):
    r = get(server, "/sub?a=1&b=two")
    assert r.status_code == 301
    assert location_path(r.headers["Location"]) == "/sub/?a=1&b=two"


def test_dir_index(server):
    r = get(server, "/sub/")
    assert r.status_code == 200
    assert r.content == SUB_INDEX


# follow_symlinks defaults to "inside": a link to a file inside the root is
# served (tests/http/test_files*.py cover the three modes); links that lead
# outside never are.
def test_symlink_inside_is_served(server):
    assert get(server, "/link.txt").status_code == 200


@pytest.mark.parametrize("path", ["/outlink/secret.txt", "/secretlink.txt"])
def test_symlinks_not_followed(server, path):
    r = get(server, path)
    assert r.status_code == 404, (r.status_code, r.content[:100])
    assert SECRET not in r.content


@pytest.mark.parametrize(
    "target",
    [
        "/../secret.txt",
        "/../outside/secret.txt",
        "/sub/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/sub/%2E%2E/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/sub/..%2f..%2fsecret.txt",
        "/./../secret.txt",
        "/..",
        "/../",
    ],
)
def test_dotdot_never_escapes(server, target):
    with server.conn() as c:
        c.send(request("GET", target))
        resp = c.read_response()
    assert SECRET not in resp.body
    assert resp.status in (400, 404, 403, 200, 301), resp
    if resp.status == 200:
        # Only a file inside the root, e.g. "/.." clamped to "/".
        assert resp.body in (INDEX_HTML, SUB_INDEX, HELLO_TXT), resp.body[:100]


# ---- CLI ---------------------------------------------------------------------


def run_bin(args, cwd, timeout=10):
    return subprocess.run([str(colibri_bin())] + args, cwd=cwd, capture_output=True, timeout=timeout)


def test_version(tmp_path):
    p = run_bin(["--version"], tmp_path)
    assert p.returncode == 0
    assert re.match(rb"colibri \d+\.\d+", p.stdout), p.stdout


def test_help(tmp_path):
    p = run_bin(["--help"], tmp_path)
    assert p.returncode == 0
    assert b"usage: colibri" in p.stdout
    for flag in (b"-c", b"-l", b"-r", b"-t"):
        assert flag in p.stdout


def test_unknown_flag_fails(tmp_path):
    p = run_bin(["--no-such-flag"], tmp_path)
    assert p.returncode != 0
    assert b"usage" in p.stderr


def test_listen_flag_overrides_config(make_server):
    other = free_port()
    s = make_server(args=["-l", "127.0.0.1:%d" % other])
    assert s.port == other  # the fixture waited for the -l port
    r = requests.get("http://127.0.0.1:%d/hello" % other, timeout=5)
    assert r.status_code == 200 and r.text == "Hello, World!"
    with pytest.raises(requests.ConnectionError):
        requests.get("http://127.0.0.1:%d/hello" % s.config_port, timeout=2)


def test_root_flag_without_config(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "index.html").write_bytes(INDEX_HTML)
    (root / "f.txt").write_bytes(b"flag root\n")
    port = free_port()
    # cwd without colibri.conf: only the flags configure the server.
    p = subprocess.Popen(
        [str(colibri_bin()), "-l", "127.0.0.1:%d" % port, "-r", str(root), "-t", "1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                r = requests.get("http://127.0.0.1:%d/f.txt" % port, timeout=2)
                break
            except requests.ConnectionError:
                assert p.poll() is None, p.stderr.read()
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.05)
        assert r.status_code == 200 and r.content == b"flag root\n"
        assert requests.get("http://127.0.0.1:%d/" % port, timeout=2).content == INDEX_HTML
    finally:
        p.terminate()
        rc = p.wait(10)
        err = p.stderr.read()
    assert rc == 0, err
    assert b"Sanitizer" not in err and b"runtime error:" not in err, err


def test_server_header_configurable(make_server):
    s = make_server(server_header="test-server/9")
    r = get(s, "/hello")
    assert r.headers["Server"] == "test-server/9"


def test_server_header_empty_means_none(make_server):
    s = make_server(server_header="")
    with s.conn() as c:
        c.send(request("GET", "/hello"))
        resp = c.read_response()
    assert resp.status == 200
    assert resp.header("Server") is None, resp.headers


# ---- IPv6 --------------------------------------------------------------------


@pytest.mark.skipif(not ipv6_available(), reason="::1 not available")
def test_ipv6_listener(make_server):
    s = make_server(host="::1")
    r = requests.get(s.url + "/hello?name=six", timeout=5)
    assert r.status_code == 200 and r.text == "Hello, six!"
    with RawConn("::1", s.port) as c:
        c.send(request("GET", "/file.txt", host=s.hostport))
        assert c.read_response().body == HELLO_TXT


# ---- regressions seen in a peer server (DESIGN.md section 5) -----------------


@pytest.mark.parametrize("rng", ["bytes=5-", "bytes=0-", "bytes=-10", "bytes=300000-", "bytes=999999999-"])
def test_range_requests_terminate(server, rng):
    """Open-ended ranges once looped forever elsewhere.  Whether or not ranges
    are supported, the answer is quick and self-consistent."""
    data = (server.root / "big.bin").read_bytes()
    with server.conn() as c:
        c.send(request("GET", "/big.bin", headers=[("Range", rng)]) + request("GET", "/hello"))
        r = c.read_response(timeout=5)
        assert r.status in (200, 206, 416), r
        if r.status == 200:
            assert r.body == data
        elif r.status == 206:
            start = rng[len("bytes=") :].split("-")[0]
            if start:
                assert r.body == data[int(start) :]
            else:
                assert r.body == data[-10:]
        assert c.read_response().body == b"Hello, World!"


def test_last_modified_on_files(server):
    r = get(server, "/big.bin")
    assert r.status_code == 200
    lm = r.headers.get("Last-Modified")
    if lm is not None:
        assert IMF_FIXDATE.match(lm), lm
