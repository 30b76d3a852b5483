"""Site rules (issue 21) on the gateway's routes: a filter section applies to
every route under its prefix, proxied and FastCGI ones included. Against
real upstreams: upstream.py (tests/http/upstream.py, which counts the
requests it got) behind a `proxy`, and a PHP-FPM of the test's own behind a
`fastcgi` (a script that notes each run in a file). `headers` edits the
upstream's answer (a line it sent removed, one replaced, one added) and
colibri's own 502 when the upstream is down; `access`, `auth` and `limit`
refuse before the upstream is contacted; `auth` passes the request's
`Authorization` on, as nginx does (README, "Access and authentication")."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import free_port, require
from rawhttp import TIME_SCALE, RawConn, request
from test_proxy import Upstream

FPM = shutil.which("php-fpm8.2") or "/usr/sbin/php-fpm8.2"

USER, PASSWORD = "alice", "wonder-land"


def htpasswd(tmp_path):
    """A {SHA} line (fast to verify: these tests are about where auth runs,
    test_rules.py covers the hash formats)."""
    digest = base64.b64encode(hashlib.sha1(PASSWORD.encode()).digest()).decode()
    (tmp_path / "users.htpasswd").write_text("%s:{SHA}%s\n" % (USER, digest))
    return "./users.htpasswd"


def basic(user, pw):
    return ("Authorization", "Basic " + base64.b64encode(("%s:%s" % (user, pw)).encode()).decode())


CHALLENGE = 'Basic realm="Gate", charset="UTF-8"'


def rules(prefix, htpasswd_file):
    """The filter sections around a gateway route at PREFIX (/api or /php):
    PREFIX/open is let through, PREFIX/denied refused by address,
    PREFIX/private needs a password, PREFIX/limited takes one request an
    hour, and every answer under PREFIX has its head edited."""
    return [
        "headers %s {" % prefix,
        "    set X-Frame-Options = DENY",
        '    add Link = "</style.css>; rel=preload; as=style"',
        "    remove = X-Powered-By",
        "    remove = X-Keep",
        "    set X-Upstream = replaced",
        "}",
        "headers %s/typed {" % prefix,
        "    set Content-Type = text/x-set",
        "}",
        "headers %s/untyped {" % prefix,
        "    remove = Content-Type",
        "}",
        "access %s/denied {" % prefix,
        "    allow = 10.0.0.0/8",
        "    deny = all",
        "}",
        "auth %s/private {" % prefix,
        "    realm = Gate",
        "    htpasswd = %s" % htpasswd_file,
        "}",
        "limit %s/limited {" % prefix,
        "    rate = 1/h",
        "}",
    ]


def site(lines):
    return "site {\n" + "".join("    %s\n" % l for l in lines) + "}\n"


def ask(srv, target, headers=(), method="GET", body=None):
    with RawConn("127.0.0.1", srv.port, timeout=10 * TIME_SCALE) as c:
        c.send(request(method, target, headers=list(headers), body=body))
        return c.read_response(head_request=method == "HEAD")


def edited(r):
    """The head as the headers section leaves it; colibri's own lines stay."""
    assert r.header("X-Frame-Options") == "DENY", r.head
    assert r.header("Link") == "</style.css>; rel=preload; as=style", r.head
    assert r.header("X-Powered-By") is None, r.head
    assert r.header("X-Keep") is None, r.head
    assert r.header("Server") == "colibri", r.head
    assert len(r.header_all("Date")) == 1, r.head


def refused_at_once(r, status):
    """A refusal by a filter: colibri's own answer, its head edited too."""
    assert r.status == status, (r.status, r.body)
    edited(r)
    assert r.header("X-Upstream") == "replaced"


# ---- proxy -----------------------------------------------------------------------


@pytest.fixture
def upstream(tmp_path):
    u = Upstream(tmp_path, "A")
    yield u
    u.kill()


def proxy_server(make_server, tmp_path, to, **overrides):
    return make_server(threads="1", **overrides, site=site(rules("/api", htpasswd(tmp_path)) + [
        "proxy /api {",
        "    to = %s" % to,
        "    strip_prefix = true",
        "    retries = 0",
        "}",
    ]))


def test_headers_on_proxied_answers(make_server, tmp_path, upstream):
    srv = proxy_server(make_server, tmp_path, "http://" + upstream.addr)
    # a line the upstream sent is removed, one replaced, the section's added
    r = ask(srv, "/api/headers")
    assert (r.status, r.body) == (200, b"h")
    edited(r)
    assert r.header_all("Set-Cookie") == ["a=1", "b=2"]  # the upstream's others pass
    assert r.header("Content-Type") == "text/x-test"
    r = ask(srv, "/api/open/echo")
    assert r.status == 200 and json.loads(r.body)["name"] == "A"
    edited(r)
    assert r.header_all("X-Upstream") == ["replaced"]  # the upstream's "A" replaced
    # the upstream's own error statuses, a 304, a HEAD, a chunked answer
    for target, status in (("/api/status/404", 404), ("/api/status/503", 503), ("/api/status/304", 304)):
        r = ask(srv, target)
        assert r.status == status
        edited(r)
        assert r.header_all("X-Upstream") == ["replaced"]
    r = ask(srv, "/api/echo", method="HEAD")
    assert r.status == 200 and r.body == b""
    edited(r)
    r = ask(srv, "/api/chunked?n=3&size=4")
    assert (r.status, r.body) == (200, b"cccc" * 3)
    edited(r)
    assert upstream.hits("/headers") == 1 and upstream.hits("/status/304") == 1
    # the upstream's Content-Type (application/json) replaced, or removed
    r = ask(srv, "/api/typed/echo")
    assert r.status == 200 and json.loads(r.body)["target"] == "/typed/echo"
    edited(r)
    assert r.header_all("Content-Type") == ["text/x-set"], r.head
    r = ask(srv, "/api/untyped/echo")
    assert r.status == 200 and json.loads(r.body)["target"] == "/untyped/echo"
    edited(r)
    assert r.header_all("Content-Type") == [], r.head


def test_headers_on_the_502_of_an_upstream_down(make_server, tmp_path):
    srv = proxy_server(make_server, tmp_path, "http://127.0.0.1:%d" % free_port())
    r = ask(srv, "/api/echo")
    assert r.status == 502
    edited(r)
    assert r.header("X-Upstream") == "replaced"


def test_headers_on_proxied_answers_over_http2(make_server, tmp_path, upstream):
    if not shutil.which("curl"):
        require(False, "curl")
    srv = proxy_server(make_server, tmp_path, "http://" + upstream.addr)
    p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-D", "-", "-o", "/dev/null",
                        "--max-time", str(int(20 * TIME_SCALE)), "http://127.0.0.1:%d/api/headers" % srv.port],
                       capture_output=True, text=True, timeout=30 * TIME_SCALE)
    assert p.returncode == 0, p.stderr
    lines = [l.strip().lower() for l in p.stdout.splitlines()]
    assert lines[0] == "http/2 200", p.stdout
    assert "x-frame-options: deny" in lines and "link: </style.css>; rel=preload; as=style" in lines, p.stdout
    assert "x-upstream: replaced" in lines and not [l for l in lines if l.startswith("x-keep")], p.stdout
    assert "set-cookie: a=1" in lines and "server: colibri" in lines, p.stdout


def test_access_refuses_before_the_upstream(make_server, tmp_path, upstream):
    srv = proxy_server(make_server, tmp_path, "http://" + upstream.addr)
    r = ask(srv, "/api/denied/echo", method="POST", body=b"x" * 5000)
    refused_at_once(r, 403)
    assert ask(srv, "/api/open/echo").status == 200
    st = upstream.stats()
    assert st["hits"].get("/denied/echo", 0) == 0 and st["hits"].get("/open/echo") == 1, st


def test_auth_refuses_before_the_upstream_and_passes_authorization_on(make_server, tmp_path, upstream):
    srv = proxy_server(make_server, tmp_path, "http://" + upstream.addr)
    for h in ([], [basic(USER, "wrong")], [basic("mallory", PASSWORD)]):
        r = ask(srv, "/api/private/echo", headers=h, method="POST", body=b"y" * 3000)
        refused_at_once(r, 401)
        assert r.header("WWW-Authenticate") == CHALLENGE
    assert upstream.hits("/private/echo") == 0
    r = ask(srv, "/api/private/echo", headers=[basic(USER, PASSWORD)])
    assert r.status == 200
    edited(r)
    # the credentials go on to the upstream, as nginx passes them
    got = json.loads(r.body)["headers"]
    assert [v for k, v in got if k.lower() == "authorization"] == [basic(USER, PASSWORD)[1]], got
    assert upstream.hits("/private/echo") == 1


def test_limit_refuses_before_the_upstream(make_server, tmp_path, upstream):
    srv = proxy_server(make_server, tmp_path, "http://" + upstream.addr)
    with RawConn("127.0.0.1", srv.port, timeout=10 * TIME_SCALE) as c:
        c.send(request("GET", "/api/limited/echo"))
        assert c.read_response().status == 200
        for _ in range(3):
            c.send(request("POST", "/api/limited/echo", body=b"z" * 2000))
            r = c.read_response()
            refused_at_once(r, 429)
            assert 1 <= int(r.header("Retry-After")) <= 3600
    assert upstream.hits("/limited/echo") == 1


# ---- FastCGI (PHP-FPM) -------------------------------------------------------------

SCRIPTS = {
    # notes each run in runs.txt beside the scripts: who PHP-FPM ran, and
    # what it was given
    "note.php": "<?php file_put_contents(__DIR__ . '/runs.txt', $_SERVER['SCRIPT_NAME'] . \"\\n\", FILE_APPEND);",
    "open/page.php": "<?php include __DIR__ . '/../note.php'; header('X-Keep: php'); header('X-Upstream: php');"
                     " echo 'page';",
    "open/stream.php": "<?php include __DIR__ . '/../note.php'; header('X-Keep: php');"
                       " for ($i = 0; $i < 2; $i++) { echo \"part$i\\n\"; flush(); usleep(100000); }",
    "open/missing.php": "<?php include __DIR__ . '/../note.php'; http_response_code(404); header('X-Keep: php');"
                        " echo 'php 404';",
    "open/style.css": "body { color: red }\n",
    "denied/page.php": "<?php include __DIR__ . '/../note.php'; echo 'denied page ran';",
    "private/page.php": "<?php include __DIR__ . '/../note.php'; header('Content-Type: application/json');"
                        " echo json_encode(['auth' => $_SERVER['HTTP_AUTHORIZATION'] ?? null,"
                        " 'user' => $_SERVER['PHP_AUTH_USER'] ?? null]);",
    "typed/page.php": "<?php include __DIR__ . '/../note.php'; header('Content-Type: application/json'); echo '{}';",
    "typed/style.css": "body { color: blue }\n",
    "untyped/page.php": "<?php include __DIR__ . '/../note.php'; header('Content-Type: application/json'); echo '{}';",
    "limited/page.php": "<?php include __DIR__ . '/../note.php'; echo 'limited page';",
}


@pytest.fixture
def fpm(tmp_path):
    """A PHP-FPM of the test's own (expose_php is on without a php.ini: PHP
    sends X-Powered-By, the header the README's example removes)."""
    if not os.path.exists(FPM):
        require(False, "php8.2-fpm")
    www = tmp_path / "www"
    for name, text in SCRIPTS.items():
        p = www / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    sock = tmp_path / "fpm.sock"
    conf = tmp_path / "fpm.conf"
    user = "user = root\ngroup = root\n" if os.geteuid() == 0 else ""
    conf.write_text(
        "[global]\npid = %s\nerror_log = %s\ndaemonize = no\n"
        "[www]\n%slisten = %s\npm = static\npm.max_children = 2\ncatch_workers_output = yes\n"
        % (tmp_path / "fpm.pid", tmp_path / "fpm.log", user, sock))
    args = [FPM, "-n", "-y", str(conf)] + (["-R"] if os.geteuid() == 0 else [])
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sock.exists(), (tmp_path / "fpm.log").read_text() if (tmp_path / "fpm.log").exists() else ""

    class F:
        def runs(self):
            f = www / "runs.txt"
            return f.read_text().splitlines() if f.exists() else []

    f = F()
    f.sock, f.www, f.proc = sock, www, proc
    yield f
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()


def fastcgi_server(make_server, tmp_path, fpm, sock=None):
    return make_server(threads="1", site=site(rules("/php", htpasswd(tmp_path)) + [
        "fastcgi /php {",
        "    to = unix:%s" % (sock or fpm.sock),
        "    root = %s" % fpm.www,
        "}",
    ]))


def test_headers_on_fastcgi_answers(make_server, tmp_path, fpm):
    srv = fastcgi_server(make_server, tmp_path, fpm)
    # a whole answer: PHP's X-Powered-By and X-Keep removed, its X-Upstream replaced
    r = ask(srv, "/php/open/page.php")
    assert (r.status, r.body) == (200, b"page")
    edited(r)
    assert r.header_all("X-Upstream") == ["replaced"]
    # a streamed one (flush(): chunked), PHP's own 404, a HEAD, a static file
    r = ask(srv, "/php/open/stream.php")
    assert (r.status, r.body) == (200, b"part0\npart1\n")
    assert r.header("Transfer-Encoding") == "chunked"
    edited(r)
    r = ask(srv, "/php/open/missing.php")
    assert (r.status, r.body) == (404, b"php 404")
    edited(r)
    r = ask(srv, "/php/open/page.php", method="HEAD")
    assert r.status == 200 and r.body == b""
    edited(r)
    r = ask(srv, "/php/open/style.css")
    assert (r.status, r.body) == (200, b"body { color: red }\n")
    edited(r)
    # colibri's 404 for a script that is not there
    r = ask(srv, "/php/open/nothing.php")
    assert r.status == 404
    edited(r)
    # PHP's Content-Type (application/json; text/html without a header()) replaced, or removed
    for target in ("/php/typed/page.php", "/php/typed/style.css"):
        r = ask(srv, target)
        assert r.status == 200
        edited(r)
        assert r.header_all("Content-Type") == ["text/x-set"], (target, r.head)
    r = ask(srv, "/php/untyped/page.php")
    assert (r.status, r.body) == (200, b"{}")
    edited(r)
    assert r.header_all("Content-Type") == [], r.head
    assert fpm.runs() == ["/php/open/page.php", "/php/open/stream.php", "/php/open/missing.php",
                          "/php/open/page.php", "/php/typed/page.php", "/php/untyped/page.php"]


def test_headers_on_the_502_of_php_fpm_down(make_server, tmp_path, fpm):
    srv = fastcgi_server(make_server, tmp_path, fpm, sock=tmp_path / "no-fpm-here.sock")
    r = ask(srv, "/php/open/page.php")
    assert r.status == 502
    edited(r)
    assert r.header("X-Upstream") == "replaced"
    assert fpm.runs() == []


def test_access_refuses_before_php_fpm(make_server, tmp_path, fpm):
    srv = fastcgi_server(make_server, tmp_path, fpm)
    r = ask(srv, "/php/denied/page.php", method="POST", body=b"x" * 5000,
            headers=[("Content-Type", "application/octet-stream")])
    refused_at_once(r, 403)
    assert b"denied page ran" not in r.body
    assert ask(srv, "/php/open/page.php").status == 200
    assert fpm.runs() == ["/php/open/page.php"]


def test_auth_refuses_before_php_fpm_and_passes_authorization_on(make_server, tmp_path, fpm):
    srv = fastcgi_server(make_server, tmp_path, fpm)
    for h in ([], [basic(USER, "wrong")], [basic("mallory", PASSWORD)]):
        r = ask(srv, "/php/private/page.php", headers=h)
        refused_at_once(r, 401)
        assert r.header("WWW-Authenticate") == CHALLENGE
    assert fpm.runs() == []
    r = ask(srv, "/php/private/page.php", headers=[basic(USER, PASSWORD)])
    assert r.status == 200
    edited(r)
    # PHP gets the credentials (HTTP_AUTHORIZATION, and PHP_AUTH_USER from it)
    assert json.loads(r.body) == {"auth": basic(USER, PASSWORD)[1], "user": USER}
    assert fpm.runs() == ["/php/private/page.php"]


def test_limit_refuses_before_php_fpm(make_server, tmp_path, fpm):
    srv = fastcgi_server(make_server, tmp_path, fpm)
    with RawConn("127.0.0.1", srv.port, timeout=10 * TIME_SCALE) as c:
        c.send(request("GET", "/php/limited/page.php"))
        r = c.read_response()
        assert (r.status, r.body) == (200, b"limited page")
        for _ in range(3):
            c.send(request("GET", "/php/limited/page.php"))
            r = c.read_response()
            refused_at_once(r, 429)
            assert 1 <= int(r.header("Retry-After")) <= 3600
    assert fpm.runs() == ["/php/limited/page.php"]
