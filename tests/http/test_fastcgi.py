"""FastCGI (README, "PHP (FastCGI)") against a real PHP-FPM (Debian's
php8.2-fpm), started by the tests with a config of their own on a unix
socket in a temporary folder, running small scripts: $_SERVER, php://input,
status and headers, output streamed with flush(), a front controller
(router) with static files beside it, a slow script, stderr."""

import hashlib
import http.client
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
import types
from pathlib import Path

import pytest

from conftest import require
from rawhttp import TIME_SCALE, RawConn, recv_all, recv_until
from test_config_errors import check, listener, run_config

FPM = shutil.which("php-fpm8.2") or "/usr/sbin/php-fpm8.2"


@pytest.fixture(autouse=True)
def _php_fpm_installed():
    require(os.path.exists(FPM), "php8.2-fpm")


SCRIPTS = {
    "server.php": "<?php header('Content-Type: application/json'); echo json_encode($_SERVER + ['_GET' => $_GET]);",
    "input.php": "<?php $b = file_get_contents('php://input'); echo strlen($b), ' ', md5($b), ' ', $_POST['a'] ?? '-';",
    "kept.php": "<?php $b = file_get_contents('php://input'); if (isset($_GET['wait'])) usleep(1500000); echo strlen($b), ' ', md5($b), ' ', $_SERVER['CONTENT_LENGTH'], ' ', $_POST['a'] ?? '-';",
    "status.php": "<?php http_response_code(418); header('X-Custom: yes'); header('Set-Cookie: a=1', false); header('Set-Cookie: b=2', false); echo 'teapot';",
    "notfound.php": "<?php header('Status: 404 Not Found'); echo 'gone';",
    "redirect.php": "<?php header('Location: /elsewhere');",
    "stream.php": "<?php for ($i = 0; $i < 3; $i++) { echo \"part$i\\n\"; flush(); usleep(400000); }",
    "slow.php": "<?php sleep(3); echo 'late';",
    "err.php": "<?php error_log('oops from php'); echo 'ok';",
    "big.php": "<?php echo str_repeat('x', 3000000);",
    "index.php": "<?php echo 'router: ', $_SERVER['REQUEST_URI'], ' script: ', $_SERVER['SCRIPT_NAME'];",
    "sub/index.php": "<?php echo 'sub index';",
    "style.css": "body { color: red }\n",
    "notes.txt": "plain text\n",
}


@contextlib.contextmanager
def php_fpm(d, pool, www):
    """A PHP-FPM of its own in the folder d, serving www: its pool's
    settings (pool: lines after "pm = static"), its socket d/fpm.sock;
    stopped on leaving."""
    sock, conf, log = d / "fpm.sock", d / "fpm.conf", d / "fpm.log"
    user = "user = root\ngroup = root\n" if os.geteuid() == 0 else ""
    conf.write_text(
        "[global]\npid = %s\nerror_log = %s\ndaemonize = no\n[www]\n%slisten = %s\npm = static\n%s\n"
        % (d / "fpm.pid", log, user, sock, pool)
    )
    args = [FPM, "-n", "-y", str(conf)] + (["-R"] if os.geteuid() == 0 else [])
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), log.read_text() if log.exists() else ""
        yield types.SimpleNamespace(sock=sock, www=www, proc=proc)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def fpm(tmp_path):
    """A PHP-FPM of the test's own: its socket, its www folder."""
    www = tmp_path / "www"
    for name, text in SCRIPTS.items():
        p = www / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (tmp_path / "outside.php").write_text("<?php echo 'OUTSIDE';")
    os.symlink(tmp_path / "outside.php", www / "link.php")
    with php_fpm(tmp_path, "pm.max_children = 3\ncatch_workers_output = yes", www) as f:
        yield f


def hi_fpm(tmp_path, pool):
    """A PHP-FPM whose folder has hi.php alone."""
    www = tmp_path / "w"
    www.mkdir()
    (www / "hi.php").write_text('<?php echo "hi";')
    return php_fpm(tmp_path, pool, www)


def site(fpm, prefix="/", **keys):
    body = "site {\n    fastcgi %s {\n        to = unix:%s\n        root = %s\n" % (prefix, fpm.sock, fpm.www)
    for k, v in keys.items():
        body += "        %s = %s\n" % (k, v)
    return body + "    }\n}\n"


def get(srv, path, method="GET", body=None, headers=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r, data


def test_output_that_comes_while_the_client_stalls(make_server, tmp_path):
    """PHP's output that arrives while colibri waits for a stalled client
    is relayed whole as soon as the client reads again, with no wait for
    read_timeout. (What this needs of the runtime, a drained wait after an
    edge that went to the idle handler re-arming the fd, is checked
    deterministically by test_worker.c's "kept" command; here the timing
    seldom meets that case.)"""
    www = tmp_path / "w"
    www.mkdir()
    (www / "burst.php").write_text(
        "<?php for ($i = 0; $i < 8; $i++) { echo str_repeat(chr(97 + $i), 262144); flush(); usleep(20000); }")
    with php_fpm(tmp_path, "pm.max_children = 2", www) as f:
        srv = make_server(site=site(f, read_timeout="%ds" % int(6 * TIME_SCALE)), threads="1")
        for _ in range(3):
            s = socket.socket()
            s.settimeout(20 * TIME_SCALE)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", srv.port))
            s.sendall(b"GET /burst.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            time.sleep(0.6)  # nothing read: colibri's writes to the client wait
            t = time.monotonic()
            data = recv_all(s)
            took = time.monotonic() - t
            s.close()
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head
            if b"chunked" in head.lower():
                body = b"".join(body.split(b"\r\n")[1::2])
            assert body == b"".join(bytes([97 + i]) * 262144 for i in range(8)), len(body)
            assert took < 3 * TIME_SCALE, took  # not the read timeout's 6 s


def test_requests_beyond_the_children_wait_their_turn(make_server, tmp_path):
    """More requests at once than PHP-FPM has children: each kept
    connection holds a child, so the pools close idle ones while a new
    connection waits, and the extra requests are answered as children free
    up (as without keep-alive), not 504 after read_timeout."""
    import concurrent.futures
    www = tmp_path / "w"
    www.mkdir()
    (www / "nap.php").write_text("<?php usleep(300000); echo 'ok';")
    with php_fpm(tmp_path, "pm.max_children = 2", www) as f:
        srv = make_server(site=site(f, read_timeout="%ds" % int(8 * TIME_SCALE)), threads="2")

        def one(_):
            t = time.monotonic()
            r, body = get(srv, "/nap.php", timeout=30 * TIME_SCALE)
            return r.status, body, time.monotonic() - t

        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            for _ in range(3):  # the later rounds meet the kept connections of the earlier
                got = list(ex.map(one, range(6)))
                assert [(st, b) for st, b, _ in got] == [(200, b"ok")] * 6, got
                assert max(t for _, _, t in got) < 4 * TIME_SCALE, got  # 3 turns of 0.3 s, and a tick


def test_cgi_params(make_server, fpm):
    srv = make_server(
        site=site(fpm, front_controller="/index.php", param="SERVER_SOFTWARE colibri-test\n        param APP_ENV testing")
    )
    r, body = get(srv, "/server.php/extra/info?a=1&b=2", headers={"X-Thing": "v", "Proxy": "http://evil"})
    assert r.status == 200 and r.getheader("Content-Type") == "application/json"
    s = json.loads(body)
    www = str(fpm.www.resolve())
    assert s["SCRIPT_FILENAME"] == www + "/server.php"
    assert s["SCRIPT_NAME"] == "/server.php"
    assert s["PATH_INFO"] == "/extra/info"
    assert s["PATH_TRANSLATED"] == www + "/extra/info"
    assert s["REQUEST_URI"] == "/server.php/extra/info?a=1&b=2"
    assert s["DOCUMENT_URI"] == "/server.php/extra/info"
    assert s["DOCUMENT_ROOT"] == www
    assert s["QUERY_STRING"] == "a=1&b=2"
    assert s["REQUEST_METHOD"] == "GET"
    assert s["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert s["GATEWAY_INTERFACE"] == "CGI/1.1"
    assert s["SERVER_SOFTWARE"] == "colibri-test"  # the param line overrides
    assert s["APP_ENV"] == "testing"
    assert s["REMOTE_ADDR"] == "127.0.0.1" and int(s["REMOTE_PORT"]) > 0
    assert s["SERVER_ADDR"] == "127.0.0.1" and s["SERVER_PORT"] == str(srv.port)
    assert s["SERVER_NAME"] == "127.0.0.1"
    assert s["HTTP_X_THING"] == "v"
    assert "HTTP_PROXY" not in s  # httpoxy
    assert "HTTPS" not in s
    assert s["_GET"] == {"a": "1", "b": "2"}  # PHP parsed QUERY_STRING


def test_params_beyond_one_record(make_server, fpm):
    srv = make_server(site=site(fpm), max_request_head="256k")
    # 150 KB of params, no pair above a record's 64 KiB (PHP-FPM reads
    # each record's pairs on their own)
    hs = {"X-Big-%d" % i: chr(97 + i) * 50000 for i in range(3)}
    r, body = get(srv, "/server.php", headers=hs)
    assert r.status == 200
    s = json.loads(body)
    for i in range(3):
        assert s["HTTP_X_BIG_%d" % i] == hs["X-Big-%d" % i]


def test_request_body(make_server, fpm):
    srv = make_server(site=site(fpm), max_request_body="10M")
    data = os.urandom(3 << 20)
    r, body = get(srv, "/input.php", method="POST", body=data, headers={"Content-Type": "application/octet-stream"})
    n, md5, _ = body.decode().split()
    assert int(n) == len(data) and md5 == hashlib.md5(data).hexdigest()
    r, body = get(srv, "/input.php", method="POST", body=b"a=hello&b=2",
                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert body.decode().split()[2] == "hello"


def send_chunked(c, path, data, piece=10000, ctype="application/octet-stream"):
    """A POST of data as chunks of piece bytes; stops sending quietly when
    the server closed (an early 413)."""
    head = "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % (path, ctype)
    try:
        c.send(head.encode())
        for i in range(0, len(data), piece):
            part = data[i : i + piece]
            c.send(b"%x\r\n%s\r\n" % (len(part), part))
        c.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass


def spool_fds(pid, folder):
    """The server's fds on files in folder (a kept body's unnamed file)."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith(str(folder) + "/"):
            out.append(target)
    return out


def test_chunked_request_body(make_server, fpm, tmp_path):
    """A chunked body is read whole first (PHP needs CONTENT_LENGTH): in
    memory up to body_memory_max, beyond it in an unnamed file in temp_dir;
    past max_request_body it gets 413."""
    spool = tmp_path / "spool"
    spool.mkdir()
    srv = make_server(site=site(fpm), max_request_body="3M", body_memory_max="64k", temp_dir=str(spool))
    with RawConn("127.0.0.1", srv.port, timeout=20) as c:
        # small, in memory, one connection for several
        for data in (b"abc", os.urandom(70000), b""):
            send_chunked(c, "/kept.php", data, piece=3000)
            r = c.read_response()
            assert r.status == 200, r.body
            n, md5, length, _ = r.body.decode().split()
            assert (int(n), md5, length) == (len(data), hashlib.md5(data).hexdigest(), str(len(data)))
        # a form: PHP parses what came chunked
        send_chunked(c, "/kept.php", b"a=hello&b=2", ctype="application/x-www-form-urlencoded")
        r = c.read_response()
        assert r.status == 200 and r.body.decode().split()[3] == "hello"
    # large: it goes to a file in temp_dir, held while PHP works on it
    data = os.urandom((2 << 20) + 12345)
    with RawConn("127.0.0.1", srv.port, timeout=20) as c:
        send_chunked(c, "/kept.php?wait=1", data, piece=65536)
        seen = []
        deadline = time.monotonic() + 1.2
        while not seen and time.monotonic() < deadline:
            seen = spool_fds(srv.proc.pid, spool)
            time.sleep(0.05)
        r = c.read_response()
        assert r.status == 200, r.body
        n, md5, length, _ = r.body.decode().split()
        assert (int(n), md5, length) == (len(data), hashlib.md5(data).hexdigest(), str(len(data)))
        assert seen and all(t.endswith("(deleted)") for t in seen), seen
    assert os.listdir(spool) == []  # nothing named is left
    deadline = time.monotonic() + 5
    while spool_fds(srv.proc.pid, spool) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert spool_fds(srv.proc.pid, spool) == []  # closed after the answer
    # past max_request_body: 413, PHP never sees it
    with RawConn("127.0.0.1", srv.port, timeout=20) as c:
        send_chunked(c, "/kept.php", os.urandom((3 << 20) + 1), piece=65536)
        assert c.read_response().status == 413


def test_status_and_headers(make_server, fpm):
    srv = make_server(site=site(fpm))
    with RawConn("127.0.0.1", srv.port) as c:
        c.send(b"GET /status.php HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.status == 418 and r.body == b"teapot"
        assert r.header("X-Custom") == "yes"
        assert r.header_all("Set-Cookie") == ["a=1", "b=2"]
        assert r.header("Server") == "colibri"
        c.send(b"GET /notfound.php HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.status == 404 and r.body == b"gone"
        c.send(b"GET /redirect.php HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.status == 302 and r.header("Location") == "/elsewhere"
        c.send(b"HEAD /status.php HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response(head_request=True)
        assert r.status == 418 and r.body == b""
        c.send(b"GET /big.php HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.body == b"x" * 3000000


def test_streamed_output(make_server, fpm):
    srv = make_server(site=site(fpm))
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    t0 = time.monotonic()
    s.sendall(b"GET /stream.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    first = recv_until(s, lambda d: b"part0" in d, 10)
    assert b"part0" in first, first
    t_first = time.monotonic() - t0
    s.settimeout(10)
    rest = recv_all(s)
    t_all = time.monotonic() - t0
    s.close()
    # the first part came as PHP flushed it, long before the end
    assert t_first < 0.35 and t_all > 1.0, (t_first, t_all)
    assert b"part2" in rest


def test_front_controller_and_static_files(make_server, fpm):
    srv = make_server(site=site(fpm, front_controller="/index.php"))
    r, body = get(srv, "/blog/2024/hello?x=1")
    assert body == b"router: /blog/2024/hello?x=1 script: /index.php"
    r, body = get(srv, "/missing.php")  # a script that is not there: the router too
    assert body.startswith(b"router: /missing.php")
    r, body = get(srv, "/style.css")
    assert r.status == 200 and body == b"body { color: red }\n" and r.getheader("Content-Type").startswith("text/css")
    assert r.getheader("ETag")  # as serve_files answers it
    r, body = get(srv, "/sub/")
    assert body == b"sub index"
    r, body = get(srv, "/sub")
    assert r.status == 301 and r.getheader("Location") == "/sub/"
    r, body = get(srv, "/")
    assert body.startswith(b"router: / script: /index.php")


def test_prefix_and_no_front_controller(make_server, fpm):
    srv = make_server(site=site(fpm, prefix="/app", static="false"))
    r, body = get(srv, "/app/server.php")
    s = json.loads(body)
    assert s["SCRIPT_NAME"] == "/app/server.php" and s["SCRIPT_FILENAME"].endswith("/www/server.php")
    assert get(srv, "/app/nothing.php")[0].status == 404
    assert get(srv, "/app/nothing")[0].status == 404
    assert get(srv, "/app/style.css")[0].status == 404  # static = false


def test_never_outside_root(make_server, fpm):
    srv = make_server(site=site(fpm))
    r, body = get(srv, "/link.php")  # a link out of the root
    assert r.status == 404 and b"OUTSIDE" not in body
    with RawConn("127.0.0.1", srv.port) as c:
        c.send(b"GET /../outside.php HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert b"OUTSIDE" not in r.body


def test_fpm_down_and_slow(make_server, fpm, tmp_path):
    srv = make_server(site=site(fpm, read_timeout="500ms"))
    t = time.monotonic()
    r, body = get(srv, "/slow.php")
    assert r.status == 504 and time.monotonic() - t < 2.5
    assert "fastcgi: upstream unix:%s: timed out" % fpm.sock in srv.stderr()
    fpm.proc.terminate()
    fpm.proc.wait(5)
    r, body = get(srv, "/server.php")
    assert r.status == 502
    assert "fastcgi: upstream unix:%s: connect" % fpm.sock in srv.stderr()


def test_stderr_goes_to_the_error_log(make_server, fpm):
    srv = make_server(site=site(fpm))
    r, body = get(srv, "/err.php")
    assert body == b"ok"
    assert "stderr: PHP message: oops from php" in srv.stderr()


def test_keep_conn_reuses_connections(make_server, fpm):
    srv = make_server(site=site(fpm), threads="1")
    pids = set()
    for i in range(12):
        r, body = get(srv, "/server.php")
        assert r.status == 200
    # one connection for all: PHP-FPM's children each accepted at most one
    out = subprocess.run(["ss", "-xp"], capture_output=True, text=True).stdout
    conns = [l for l in out.splitlines() if str(fpm.sock) in l]
    assert len(conns) == 1, conns


@pytest.mark.parametrize(
    "keys, key, words",
    [
        ("root = /", "fastcgi", ["to ="]),
        ("to = unix:/x", "fastcgi", ["root"]),
        ("to = unix:/x\n        root = /nonexistent-dir", "root", ["not a folder"]),
        ("to = unix:/x\n        root = /tmp\n        index = a/b", "index", []),
        ("to = unix:/x\n        root = /tmp\n        front_controller = index.php", "front_controller", []),
        ("to = unix:/x\n        root = /tmp\n        static = maybe", "static", []),
        ("to = unix:/x\n        root = /tmp\n        param 1BAD x", "param", []),
        ("to = unix:/x\n        root = /tmp\n        read_timeout = 0s", "read_timeout", []),
        ("to = nowhere\n        root = /tmp", "to", []),
        ("to = unix:/x\n        root = /tmp\n        bogus = 1", "bogus", []),
    ],
)
def test_config_errors(tmp_path, keys, key, words):
    text = listener() + "site {\n    fastcgi /php {\n        %s\n    }\n}\n" % keys
    conf, p = run_config(tmp_path, text)
    lines = [l.strip() for l in keys.split("\n")]
    line = 3 if key == "fastcgi" else 4 + next(i for i, l in enumerate(lines) if l.startswith(key))
    check(p, conf, line, key, words)


def test_whole_small_answer_has_a_length(make_server, fpm):
    # an answer PHP-FPM ends at once goes out whole, with Content-Length (one
    # writev), on a kept connection; one that flushes part way still streams
    # (test_streamed_output)
    srv = make_server(site=site(fpm))
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    for _ in range(3):
        c.request("GET", "/status.php")
        r = c.getresponse()
        assert r.read() == b"teapot"
        assert r.status == 418 and r.getheader("X-Custom") == "yes"
        assert r.getheader("Content-Length") == "6" and r.getheader("Transfer-Encoding") is None
        assert r.getheader("Set-Cookie") == "a=1, b=2"
    c.request("HEAD", "/status.php")
    r = c.getresponse()
    # PHP sends no body to a HEAD: no length is told rather than a wrong 0
    assert r.status == 418 and r.read() == b"" and r.getheader("Content-Length") is None
    c.request("GET", "/big.php")
    r = c.getresponse()
    assert r.read() == b"x" * 3000000
    c.close()


def test_kept_connections_closed_by_php_fpm_are_replaced(make_server, tmp_path):
    # pm.max_requests = 2: a PHP-FPM child exits (closing the kept
    # connection) after every second request; the bodiless requests that
    # find their kept connection closed go again on a fresh one, quietly
    with hi_fpm(tmp_path, "pm.max_children = 2\npm.max_requests = 2") as f:
        srv = make_server(site=site(f), threads="1")
        for i in range(12):
            r, data = get(srv, "/hi.php")
            assert (r.status, data) == (200, b"hi"), i
            time.sleep(0.05)  # the child's exit reaches the kept connection
        r, data = get(srv, "/hi.php", method="POST", body=b"a=1",
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert (r.status, data) == (200, b"hi")
        assert "fastcgi" not in srv.stderr(), srv.stderr()


def test_kept_connection_closed_by_php_fpm_is_closed_at_once(make_server, tmp_path):
    # pm.max_requests = 1: a PHP-FPM child exits after each request, closing
    # the connection colibri kept: the worker's epoll sees it and closes it
    # at once (the server's fd count comes back), not when a later request
    # would find it dead
    def unix_sockets():
        """The server's unix sockets (its connections to PHP-FPM)."""
        inodes = {"socket:[%s]" % l.split()[6] for l in Path("/proc/net/unix").read_text().splitlines()[1:]}
        d = "/proc/%d/fd" % srv.proc.pid
        n = 0
        for fd in os.listdir(d):
            try:
                n += os.readlink(os.path.join(d, fd)) in inodes
            except OSError:
                pass
        return n

    def settles_to(n, within):
        deadline = time.monotonic() + within
        while time.monotonic() < deadline and unix_sockets() != n:
            time.sleep(0.01)
        return unix_sockets() == n

    with hi_fpm(tmp_path, "pm.max_children = 1\npm.max_requests = 1") as f:
        srv = make_server(site=site(f), threads="1")
        base = unix_sockets()
        for i in range(4):
            r, data = get(srv, "/hi.php")
            assert (r.status, data) == (200, b"hi"), i
            t0 = time.monotonic()
            assert settles_to(base, 3.0 * TIME_SCALE), (i, unix_sockets(), base)
            assert time.monotonic() - t0 < 0.8 * TIME_SCALE  # at once, not at the next tick
        assert "fastcgi" not in srv.stderr(), srv.stderr()


# --- timeouts, refusals, TLS, HTTP/2 ----------------------------------------------


def test_connect_timeout_gives_504(make_server, tmp_path):
    from test_proxy import connect_times_out, unaccepting_port

    www = tmp_path / "w"
    www.mkdir()
    (www / "hi.php").write_text('<?php echo "hi";')
    with unaccepting_port() as port:
        text = "site {\n    fastcgi / {\n        to = 127.0.0.1:%d\n        root = %s\n        connect_timeout = 500ms\n    }\n}\n"
        srv = make_server(site=text % (port, www))
        connect_times_out(srv, "/hi.php", "fastcgi", port)


class FakeFcgi:
    """A FastCGI responder of a few lines on loopback: each connection
    reads one request (records up to the empty STDIN) and is answered with
    the records answer(conn_index) returns, then closed."""

    def __init__(self, answer):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.ls.settimeout(0.2)
        self.port = self.ls.getsockname()[1]
        self.answer = answer
        self.params = []
        self.stop = False
        self.t = threading.Thread(target=self.serve, daemon=True)
        self.t.start()

    @staticmethod
    def record(typ, content, rid=1):
        return struct.pack(">BBHHBx", 1, typ, rid, len(content), 0) + content

    def serve(self):
        n = 0
        while not self.stop:
            try:
                c, _ = self.ls.accept()
            except socket.timeout:
                continue
            c.settimeout(5)
            with c:
                buf, params = b"", b""
                try:
                    while True:
                        while len(buf) < 8:
                            d = c.recv(65536)
                            if not d:
                                raise ConnectionError
                            buf += d
                        _, typ, _, ln, pad = struct.unpack(">BBHHB", buf[:7])
                        while len(buf) < 8 + ln + pad:
                            d = c.recv(65536)
                            if not d:
                                raise ConnectionError
                            buf += d
                        content, buf = buf[8 : 8 + ln], buf[8 + ln + pad :]
                        if typ == 4:  # FCGI_PARAMS
                            params += content
                        if typ == 5 and ln == 0:  # the empty STDIN: the request is whole
                            break
                    self.params.append(params)
                    c.sendall(self.answer(n))
                    n += 1
                    time.sleep(0.1)
                except (ConnectionError, OSError):
                    pass

    def close(self):
        self.stop = True
        self.t.join(5)
        self.ls.close()


def end_request(app_status=0, protocol_status=0):
    return FakeFcgi.record(3, struct.pack(">IB3x", app_status, protocol_status))


def test_end_request_with_a_protocol_status(make_server, tmp_path):
    """An END_REQUEST whose protocolStatus is not FCGI_REQUEST_COMPLETE (the
    responder cannot multiplex, is overloaded, or does not know the role)
    before any output is a 503; one that is complete without a CGI head is
    a 502; a whole answer is served."""
    www = tmp_path / "w"
    www.mkdir()
    (www / "hi.php").write_text("")
    answers = [
        end_request(protocol_status=1),  # FCGI_CANT_MPX_CONN
        end_request(protocol_status=2),  # FCGI_OVERLOADED
        end_request(protocol_status=3),  # FCGI_UNKNOWN_ROLE
        end_request(),  # complete, but no output at all
        FakeFcgi.record(6, b"Status: 201\r\nX-Fake: 1\r\n\r\nmade") + FakeFcgi.record(6, b"") + end_request(),
    ]
    fake = FakeFcgi(lambda n: answers[n])
    try:
        text = "site {\n    fastcgi / {\n        to = 127.0.0.1:%d\n        root = %s\n    }\n}\n"
        srv = make_server(site=text % (fake.port, www), threads="1")
        for want in (503, 503, 503, 502):
            r, body = get(srv, "/hi.php")
            assert r.status == want, (want, r.status, body)
        r, body = get(srv, "/hi.php")
        assert (r.status, body, r.getheader("X-Fake")) == (201, b"made", "1")
        err = srv.stderr()
        assert err.count("refused the request (overloaded or cannot multiplex)") == 3, err
        assert "ended without a complete CGI head" in err
        assert b"SCRIPT_FILENAME" in fake.params[0]
    finally:
        fake.close()


def test_https_param_over_tls(make_server, fpm, tmp_path):
    """HTTPS=on reaches PHP for a request that came over TLS, and is absent
    for one over plain HTTP (the same site on both listeners)."""
    import ssl
    from conftest import free_port
    from test_tls import make_cert

    cert, key = make_cert(tmp_path, "site", "localhost", ["localhost"])
    tls_port = free_port()
    text = "listener 127.0.0.1:%d {\n    tls = true\n}\n" % tls_port
    text += site(fpm).replace("site {\n", "site {\n    tls_certificate = %s\n    tls_key = %s\n" % (cert, key), 1)
    srv = make_server(site=text)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", tls_port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            t.sendall(b"GET /server.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data = recv_all(t)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    if b"chunked" in head.lower():
        body = b"".join(body.split(b"\r\n")[1::2])
    s = json.loads(body)
    assert s["HTTPS"] == "on" and s["SERVER_PORT"] == str(tls_port)
    r, body = get(srv, "/server.php")
    s = json.loads(body)
    assert "HTTPS" not in s and s["SERVER_PORT"] == str(srv.port)


def test_h2c_post_without_content_length(make_server, fpm):
    """A POST over h2c without content-length (its body ends with the
    stream): read whole first, it reaches PHP whole, with its length."""
    from test_http2 import H2

    srv = make_server(site=site(fpm), max_request_body="8M")
    data = os.urandom((3 << 20) + 7)
    c = H2(srv, timeout=30)
    try:
        sid = c.request("/kept.php", method="POST", body=data, headers=[("content-type", "application/octet-stream")])
        st, = c.wait(sid, timeout=30)
        assert st["headers"][":status"] == "200", st
        n, md5, length, _ = bytes(st["data"]).decode().split()
        assert (int(n), md5, length) == (len(data), hashlib.md5(data).hexdigest(), str(len(data)))
        # a form, parsed by PHP
        sid = c.request("/kept.php", method="POST", body=b"a=hello&b=2",
                        headers=[("content-type", "application/x-www-form-urlencoded")])
        st, = c.wait(sid, timeout=30)
        assert bytes(st["data"]).decode().split() == ["11", hashlib.md5(b"a=hello&b=2").hexdigest(), "11", "hello"]
    finally:
        c.close()
