"""Reload on SIGHUP without dropping anything.

The config file is rewritten and the server gets SIGHUP: new connections
get the new routes, sites and modules; a request in flight (greet.c's nap,
a sleeping stream) finishes on the old ones; a bad config is logged
("reload failed: FILE:LINE: KEY: ...") and the old one keeps serving;
listeners that stay are never closed (a port hammered during reloads never
refuses), new ones answer, removed ones refuse; the old generation is
freed (no file descriptor left behind by serve_files' cache and inotify);
reloads every 0.2 s under a keep-alive load fail no request; sd_notify
says RELOADING=1 then READY=1; SIGHUP no longer stops the server."""

import os
import signal
import socket
import threading
import time

import pytest

from conftest import colibri_bin, free_port
from rawhttp import Closed, RawConn, request
from test_hostile import fd_count
from test_modules import greet_so  # noqa: F401 (the session fixture)
from test_systemd import Proc, notify_socket, recv_state


def conf_text(ports, site, extra=""):
    text = "".join("listener 127.0.0.1:%d\n" % p for p in ports)
    text += "threads = 2\n" + extra + site
    return text


def wait_log(server, pattern, count, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.stderr().count(pattern) >= count:
            return
        time.sleep(0.01)
    pytest.fail("no %d× %r in the error log:\n%s" % (count, pattern, server.stderr()))


def reload(server, text=None, ok=True):
    """Rewrites the config (when text is given), sends SIGHUP and waits for
    the reload's outcome in the error log."""
    if text is not None:
        server.config.write_text(text)
    log = server.stderr()
    n_ok, n_bad = log.count("[info] reloaded"), log.count("reload failed: ")
    server.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        log = server.stderr()
        if log.count("[info] reloaded") > n_ok:
            assert ok, "the reload was meant to fail:\n" + log
            time.sleep(0.05)  # the workers take it at their next wake-up
            return log
        if log.count("reload failed: ") > n_bad:
            assert not ok, "the reload failed:\n" + log
            time.sleep(0.05)
            return log
        time.sleep(0.01)
    pytest.fail("the reload did not end:\n" + server.stderr())


def get(port, target, host="localhost", timeout=5.0):
    with RawConn("127.0.0.1", port, timeout) as c:
        c.send(request("GET", target, host=host))
        return c.read_response()


def refuses(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


SITE1 = """site {
    handler /hello hello_world
    redirect /old {
        to = /first
    }
}
"""
SITE2 = """site example.test {
    handler /hello echo
}
site {
    handler /hello hello_world
    handler /echo echo
    redirect /old {
        to = /second
        code = 302
    }
}
"""


def test_sighup_reloads_routes_redirects_and_sites(make_server):
    server = make_server(site=SITE1)
    p = server.port
    assert get(p, "/echo").status == 404
    r = get(p, "/old/x")
    assert (r.status, r.header("Location")) == (301, "/first/x")
    kept = server.conn()  # a keep-alive connection from before the reload
    kept.send(request("GET", "/hello"))
    assert kept.read_response().status == 200

    log = reload(server, conf_text([p], SITE2))
    assert "[info] reloading" in log
    assert server.proc.poll() is None, "SIGHUP must not stop the server"
    assert get(p, "/echo").status == 200
    r = get(p, "/old/x")
    assert (r.status, r.header("Location")) == (302, "/second/x")
    r = get(p, "/hello", host="example.test")
    assert r.status == 200 and b"GET /hello" in r.body  # echo, the new site
    assert get(p, "/hello").body == b"Hello, World!"
    # the connection made before the reload serves its next request with
    # the new routes
    kept.send(request("GET", "/echo"))
    assert kept.read_response().status == 200
    kept.close()


def test_request_in_flight_finishes_on_the_old_config(make_server, greet_so):  # noqa: F811
    old = "module %s\nsite {\n    handler /nap nap\n    handler /hello hello_world\n}\n" % greet_so
    server = make_server(site=old)
    c = server.conn(timeout=10)
    c.send(request("GET", "/nap?ms=1500"))
    deadline = time.monotonic() + 5
    head = c.read_until(b"\r\n\r\n", deadline)
    assert head.startswith(b"HTTP/1.1 200"), head
    # the new config has neither the module nor /nap
    reload(server, conf_text([server.port], "site {\n    handler /echo echo\n}\n"))
    assert get(server.port, "/nap?ms=1").status == 404
    assert get(server.port, "/echo").status == 200
    body = c.read_until(b"0\r\n\r\n", time.monotonic() + 5)
    assert b"napping" in body and b"awake 0" in body
    c.close()
    # the old generation (and its library) is freed once the nap ended
    reload(server)
    assert get(server.port, "/echo").status == 200


@pytest.mark.parametrize(
    "bad, message",
    [
        ("site {\n    handler /x hello_world\n", r"section never closed"),
        ("no_such_key = 1\nsite {\n    handler /x hello_world\n}\n", r":\d+: no_such_key: unknown key"),
        ("site {\n    serve_files / {\n        path = ./no/such/dir\n    }\n}\n", r":\d+: path: "),
        ("site {\n    handler /x no_such_handler\n    handler /y hello_world\n    frob /z {\n    }\n}\n",
         r"unknown handler 'no_such_handler'"),
    ],
    ids=["syntax", "unknown-key", "missing-root", "several"],
)
def test_bad_reload_logs_the_errors_and_the_old_config_serves(make_server, bad, message):
    import re

    server = make_server(site=SITE1)
    log = reload(server, conf_text([server.port], bad), ok=False)
    lines = [l for l in log.splitlines() if "reload failed: " in l]
    assert lines and all("[error] reload failed: " + str(server.config) in l for l in lines), log
    assert re.search(message, "\n".join(lines)), log
    if "several" in message or "frob" in bad:
        assert len(lines) >= 2, log  # every error, one line each
    assert get(server.port, "/hello").status == 200
    assert get(server.port, "/old").status == 301
    assert server.proc.poll() is None


# sandbox = true opens no listener after start-up (README, "Sandbox")
NEW_LISTENERS = pytest.mark.skipif(os.environ.get("COLIBRI_TEST_SANDBOX") == "1",
                                   reason="sandbox = true: a reload opens no new listener")


@NEW_LISTENERS
@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_listeners_kept_added_removed(make_server, accept):
    """With a socket per worker, or the one acceptor thread's."""
    server = make_server(site=SITE1, accept=accept)
    mode = "accept = %s\n" % accept
    a, b = server.port, free_port()
    kept = server.conn()
    kept.send(request("GET", "/hello"))
    assert kept.read_response().status == 200
    # hammer the kept port while reloading: it never refuses
    failures, done = [], [0]

    def hammering(port, step):
        stop = threading.Event()

        def hammer():
            while not stop.is_set():
                try:
                    r = get(port, "/hello", timeout=3)
                    if r.status != 200:
                        failures.append(r.status)
                    done[0] += 1
                except (OSError, Closed) as e:
                    failures.append(repr(e))

        threads = [threading.Thread(target=hammer) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            step()
            time.sleep(0.1)
        finally:
            stop.set()
            for t in threads:
                t.join()

    hammering(a, lambda: reload(server, conf_text([a, b], SITE1, mode)))  # b added, a kept
    assert get(b, "/hello").status == 200
    hammering(b, lambda: reload(server, conf_text([b], SITE1, mode)))  # a removed, b kept
    assert get(b, "/hello").status == 200
    deadline = time.monotonic() + 3
    while not refuses(a) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert refuses(a)
    assert not failures, failures[:10]
    assert done[0] > 0
    # the connection made before stays with its worker until it is idle long
    # enough: it still answers (the socket it came from is closed, not it)
    kept.send(request("GET", "/hello"))
    assert kept.read_response().status == 200
    kept.close()
    reload(server, conf_text([a, b], SITE1, mode))  # a port given back is bound again
    assert get(a, "/hello").status == 200 and get(b, "/hello").status == 200
    log = server.stderr()
    assert log.count("listening on http://127.0.0.1:%d" % b) == 1
    assert "no longer listening on http://127.0.0.1:%d" % a in log


@NEW_LISTENERS
def test_unbindable_new_listener_fails_the_whole_reload(make_server):
    server = make_server(site=SITE1)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        log = reload(server, conf_text([server.port, port], SITE2), ok=False)
        assert "Address already in use" in log
        assert get(server.port, "/echo").status == 404  # still the old routes
    finally:
        taken.close()


def reloads_free_their_fds(server):
    """Five reloads, each serving a file: the fds end as they were after the first."""
    reload(server)
    time.sleep(0.2)
    before = fd_count(server.proc.pid)
    for _ in range(5):
        reload(server)
        assert get(server.port, "/file.txt").status == 200
    deadline = time.monotonic() + 3
    while fd_count(server.proc.pid) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fd_count(server.proc.pid) == before


def test_old_generations_are_freed(make_server):
    site = "site {\n    handler /hello hello_world\n    serve_files / {\n        path = %s\n    }\n}\n"
    server = make_server(site=site % "./wwwroot")
    assert get(server.port, "/file.txt").status == 200
    reloads_free_their_fds(server)


def test_old_generations_are_freed_while_a_keep_alive_connection_idles(make_server):
    """A connection idle between requests keeps its coroutine (conn_park) but
    is in no run: a reload's grace period does not wait for its next request."""
    site = "site {\n    handler /hello hello_world\n    serve_files / {\n        path = %s\n    }\n}\n"
    server = make_server(site=site % "./wwwroot")
    with server.conn() as kept:
        kept.send(request("GET", "/file.txt"))
        assert kept.read_response().status == 200
        reloads_free_their_fds(server)
        # and it is served, on the new generation, when it speaks again
        kept.send(request("GET", "/hello"))
        r = kept.read_response()
        assert r.status == 200 and r.body == b"Hello, World!"


def test_reloads_under_keep_alive_load_fail_nothing(make_server):
    """Good and bad reloads every 0.2 s under four keep-alive clients."""
    server = make_server(site=SITE1)
    texts = [conf_text([server.port], SITE1), conf_text([server.port], SITE2)]
    stop, failures, counts = threading.Event(), [], []

    def client():
        n = 0
        c = None
        while not stop.is_set():
            try:
                if c is None:
                    c = server.conn(timeout=5)
                c.send(request("GET", "/hello"))
                r = c.read_response()
                if r.status != 200:
                    failures.append(r.status)
                n += 1
                if r.header("Connection") == "close":
                    c.close()
                    c = None
            except (OSError, Closed) as e:
                failures.append(repr(e))
                c = None
        if c:
            c.close()
        counts.append(n)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + 3
        i = 0
        while time.monotonic() < end:
            if i % 3 == 2:  # a broken config: logged, the running one serves on
                reload(server, texts[0] + "site {\n    nonsense = 1\n}\n", ok=False)
            else:
                reload(server, texts[i % 2])
            i += 1
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures, failures[:10]
    assert sum(counts) > 100 and i >= 5


def test_sd_notify_reloading_then_ready(tmp_path):
    s, where = notify_socket(tmp_path, False)
    port = free_port()
    conf = tmp_path / "n.conf"
    conf.write_text(conf_text([port], SITE1))
    proc = Proc(tmp_path, [str(colibri_bin()), "-c", str(conf)], env={"NOTIFY_SOCKET": where})
    try:
        assert recv_state(s) == "READY=1"
        proc.proc.send_signal(signal.SIGHUP)
        state = recv_state(s)
        assert state.startswith("RELOADING=1\nMONOTONIC_USEC="), state
        assert recv_state(s) == "READY=1"
        proc.wait_line(r"\[info\] reloaded$")
        conf.write_text("oops {\n")  # a failed reload says READY=1 too
        proc.proc.send_signal(signal.SIGHUP)
        assert recv_state(s).startswith("RELOADING=1")
        assert recv_state(s) == "READY=1"
        proc.wait_line(r"\[error\] reload failed: ")
        assert get(port, "/hello").status == 200
        assert proc.stop() == 0
        assert recv_state(s) == "STOPPING=1"
    finally:
        proc.kill()
        s.close()


def test_command_line_overrides_survive_a_reload(make_server):
    port = free_port()
    server = make_server(site=SITE1, args=("-l", "127.0.0.1:%d" % port, "-r", "wwwroot"))
    assert get(port, "/file.txt").status == 200
    reload(server, conf_text([server.config_port], SITE2))
    assert get(port, "/file.txt").status == 200  # -r still serves /
    assert get(port, "/echo").status == 200  # the new config's route
    assert refuses(server.config_port)  # -l still replaces the listeners


def test_server_header_follows_reloads_within_a_second(make_server):
    """A 200's first lines are kept per worker for the current second (the
    head template of response.c): a reload that changes server_header must
    show in the next answer, even in the same second and when the new config
    takes the freed address of an older one (several reloads back and forth)."""
    site = "site {\n    handler /hello hello_world\n}\n"
    server = make_server(site=site, server_header="first")
    p = server.port
    kept = server.conn()
    for name in ("second", "first", "third", "first", "fourth"):
        kept.send(request("GET", "/hello"))
        before = kept.read_response().header("Server")
        reload(server, conf_text([p], site, "server_header = %s\n" % name))
        assert get(p, "/hello").header("Server") == name, "after the reload to %r" % name
        kept.send(request("GET", "/hello"))
        r = kept.read_response()
        assert (r.status, r.header("Server")) == (200, name), "was %r" % before
