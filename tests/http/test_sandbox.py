"""sandbox = true: Landlock and a seccomp filter on every thread once the
server has started (README, "Sandbox").

Serving goes on as before (files, compression, /hello, a module's handler,
the access log and its reopening, a reload of the same config, WebSockets
with permessage-deflate, multipart parts in temp_dir, a graceful stop);
a handler (tests/http/modules/sandbox_probe.c) that opens /etc/passwd gets
EACCES, also from a thread the module started before the sandbox closed,
and can open it without the sandbox; a system call outside the list
(socket) fails with EPERM and is logged, the server goes on; without
Landlock (COLIBRI_SANDBOX_LANDLOCK_ABI=0) a warning says so and the rest
holds; a reload cannot widen the sandbox (new root, module, listener).

COLIBRI_TEST_SANDBOX=1 runs the whole black-box suite with the sandbox on
(conftest.py)."""

import errno
import glob
import os
import re
import signal
import time
import zlib

import pytest

from conftest import colibri_bin, free_port, make_wwwroot
from rawhttp import RawConn, request
from test_config_errors import run_config
from test_modules import build_greet, sanitized_build, greet_so  # noqa: F401 (the session fixture)
from test_multipart import BOUNDARY, CTYPE, body, line, part
from test_reload import reload, wait_log
from test_systemd import ACTIVATE, SITE as SD_SITE, Proc, activate, get as sd_get, need_root, notify_socket
from test_systemd import privs_conf, recv_state, world_dir, write_conf, www  # noqa: F401 (world_dir: a fixture)
from wsclient import TEXT, WS

PROBE_C = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modules", "sandbox_probe.c")
TEXT_FILE = b"colibri sandbox test line, compressible. " * 200  # 8 KiB


def landlock_abi():
    """The kernel's Landlock ABI (0: none), asked through ctypes."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION), x86_64
    return r if r > 0 else 0


needs_landlock = pytest.mark.skipif(
    os.uname().machine != "x86_64" or landlock_abi() == 0, reason="this kernel has no Landlock"
)


@pytest.fixture(scope="session")
def probe_so(tmp_path_factory):
    # -z nodelete: its thread outlives the dlclose at exit
    return build_greet(tmp_path_factory.mktemp("probe") / "libprobe.so", "-Wl,-z,nodelete", src=PROBE_C)


def site(root, probe, greet):
    return (
        "module %s\n"
        "module %s\n"
        "site {\n"
        "    handler /hello hello_world\n"
        "    handler /ws ws_echo\n"
        "    handler /greet greet\n"
        "    handler /upload upload\n"
        "    handler /open probe_open\n"
        "    handler /socket probe_socket\n"
        "    handler /thread probe_thread\n"
        "    handler /thread_socket probe_thread_socket\n"
        "    handler /fork probe_fork\n"
        "    serve_files / {\n"
        "        path = %s\n"
        "    }\n"
        "}\n" % (probe, greet, root)
    )


@pytest.fixture
def uploads(tmp_path):
    d = tmp_path / "uploads"
    d.mkdir()
    return d


def start(make_server, tmp_path, probe_so, greet_so, uploads, sandbox="true", **kw):  # noqa: F811
    root = tmp_path / "wwwroot"
    if not root.exists():
        make_wwwroot(tmp_path)
    (root / "text.txt").write_bytes(TEXT_FILE)
    return make_server(
        site=site(root, probe_so, greet_so),
        sandbox=sandbox,
        access_log=str(tmp_path / "logs" / "access.log"),
        temp_dir=str(uploads),
        multipart_memory_max="1k",
        max_request_body="4M",
        **kw,
    )


@pytest.fixture
def logs(tmp_path):
    (tmp_path / "logs").mkdir()
    return tmp_path / "logs"


@pytest.fixture
def sserver(make_server, tmp_path, probe_so, greet_so, uploads, logs):  # noqa: F811
    return start(make_server, tmp_path, probe_so, greet_so, uploads)


def get(server, target, headers=()):
    with server.conn() as c:
        c.send(request("GET", target, headers=list(headers)))
        return c.read_response()


def thread_status(pid):
    """{tid: (Seccomp, NoNewPrivs)} of every thread of pid."""
    out = {}
    for t in glob.glob("/proc/%d/task/*/status" % pid):
        s = open(t).read()
        out[t.split("/")[4]] = (
            re.search(r"^Seccomp:\s+(\d)", s, re.M).group(1),
            re.search(r"^NoNewPrivs:\s+(\d)", s, re.M).group(1),
        )
    return out


# ---- serving ----------------------------------------------------------------


def test_every_thread_is_filtered(sserver):
    assert get(sserver, "/hello").status == 200  # the workers run
    wait_log(sserver, "sandbox: on", 1)
    st = thread_status(sserver.proc.pid)
    assert len(st) >= 4  # main, 2 workers, control (+ cache, watcher, the probe's)
    assert all(v == ("2", "1") for v in st.values()), st  # 2: SECCOMP_MODE_FILTER
    assert "sandbox: on" in sserver.stderr()


def test_serving_works(sserver, tmp_path, uploads):
    wait_log(sserver, "sandbox: on", 1)
    assert get(sserver, "/hello").body == b"Hello, World!"
    assert get(sserver, "/greet").body == b"Hello from a module"
    r = get(sserver, "/file.txt")
    assert r.status == 200 and r.body == b"hello from a file\n"
    assert get(sserver, "/sub/").body.startswith(b"<!doctype html><p>sub index")
    big = get(sserver, "/big.bin")  # sendfile
    assert big.status == 200 and big.body == (tmp_path / "wwwroot" / "big.bin").read_bytes()
    for coding, decomp in (("gzip", lambda b: zlib.decompress(b, 31)), ("deflate", zlib.decompress)):
        r = get(sserver, "/text.txt", [("Accept-Encoding", coding)])
        assert r.status == 200 and r.header("Content-Encoding") == coding
        assert decomp(r.body) == TEXT_FILE
    assert get(sserver, "/secretlink.txt").status == 404  # serve_files' own rule still

    # WebSockets, with permessage-deflate (zlib both ways)
    ws = WS(sserver.host, sserver.port, extensions="permessage-deflate")
    assert ws.status == 101 and ws.deflate
    for msg in (b"hello", b"x" * 5000):
        ws.send_message(TEXT, msg, compress=True)
        assert ws.recv_message() == (TEXT, msg)
    ws.close()

    # multipart: a part above multipart_memory_max goes to temp_dir (O_TMPFILE)
    data = os.urandom(64 * 1024)
    with sserver.conn() as c:
        c.send(request("POST", "/upload", headers=[("Content-Type", CTYPE)],
                       body=body(part("f", data, "f.bin", "application/octet-stream"))))
        r = c.read_response(timeout=30)
    assert r.status == 200, r.body
    assert r.body.decode().splitlines() == [
        line("f", data, "f.bin", "application/octet-stream", "file"), "end"]
    assert os.listdir(uploads) == []
    assert "refused" not in sserver.stderr()


def test_access_log_reopen_reload_and_stop(sserver, tmp_path, logs):
    assert get(sserver, "/hello").status == 200
    log = logs / "access.log"
    deadline = time.monotonic() + 5
    while b"GET /hello" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b"GET /hello" in log.read_bytes()
    # rotated away: SIGUSR1 creates it again
    log.rename(logs / "access.log.1")
    sserver.send_signal(signal.SIGUSR1)
    wait_log(sserver, "logs reopened", 1)
    assert get(sserver, "/file.txt").status == 200
    deadline = time.monotonic() + 5
    while not (log.exists() and b"GET /file.txt" in log.read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b"GET /file.txt" in log.read_bytes()
    # the same config again, twice
    reload(sserver)
    reload(sserver)
    assert get(sserver, "/hello").status == 200
    assert get(sserver, "/greet").status == 200
    assert get(sserver, "/file.txt").status == 200
    assert "refused" not in sserver.stderr()
    assert sserver.stop() == 0
    assert "[info] stopped" in sserver.stderr()


# ---- what it refuses ----------------------------------------------------------


@needs_landlock
def test_a_handler_cannot_open_etc_passwd(sserver, tmp_path):
    assert get(sserver, "/open?path=/etc/passwd").body.strip() in (
        b"errno %d" % errno.EACCES, b"errno %d" % errno.EPERM)
    # nor from a thread the module started before the sandbox closed
    assert get(sserver, "/thread?path=/etc/passwd").body.strip() in (
        b"errno %d" % errno.EACCES, b"errno %d" % errno.EPERM)
    # nor anything outside the root next to it
    assert get(sserver, "/open?path=%s" % (tmp_path / "outside" / "secret.txt")).body.strip() == (
        b"errno %d" % errno.EACCES)
    # the root itself is readable, also from that thread
    assert get(sserver, "/open?path=%s" % (tmp_path / "wwwroot" / "file.txt")).body == b"ok\n"
    assert get(sserver, "/thread?path=%s" % (tmp_path / "wwwroot" / "file.txt")).body == b"ok\n"


def test_without_the_sandbox_it_can(make_server, tmp_path, probe_so, greet_so, uploads, logs):  # noqa: F811
    s = start(make_server, tmp_path, probe_so, greet_so, uploads, sandbox="false")
    assert get(s, "/open?path=/etc/passwd").body == b"ok\n"
    assert get(s, "/thread?path=/etc/passwd").body == b"ok\n"
    assert get(s, "/socket").body == b"ok\n"
    assert get(s, "/fork").body == b"ok\n"
    assert all(v[0] == "0" for v in thread_status(s.proc.pid).values())
    assert "sandbox" not in s.stderr()


def test_a_refused_system_call_fails_and_is_logged(sserver):
    assert get(sserver, "/socket").body == b"errno %d\n" % errno.EPERM
    wait_log(sserver, "[error] sandbox: system call socket (", 1)
    # the server goes on, on every worker
    for _ in range(4):
        assert get(sserver, "/hello").status == 200
    assert get(sserver, "/socket").body == b"errno %d\n" % errno.EPERM
    # from a thread that blocks every signal but the two the sandbox needs
    assert get(sserver, "/thread_socket").body == b"errno %d\n" % errno.EPERM
    assert get(sserver, "/hello").status == 200
    assert sserver.proc.poll() is None


def test_without_landlock_a_warning_and_the_filter_still(monkeypatch, make_server, tmp_path,
                                                         probe_so, greet_so, uploads, logs):  # noqa: F811
    monkeypatch.setenv("COLIBRI_SANDBOX_LANDLOCK_ABI", "0")
    s = start(make_server, tmp_path, probe_so, greet_so, uploads)
    wait_log(s, "sandbox: on", 1)
    log = s.stderr()
    assert re.search(r"\[warn\] sandbox: Landlock is not available \(.*\): file access is not "
                     r"restricted; the system call filter still applies", log), log
    assert "sandbox: on (system call filter only)" in log
    assert get(s, "/hello").status == 200
    assert get(s, "/open?path=/etc/passwd").body == b"ok\n"
    assert get(s, "/socket").body == b"errno %d\n" % errno.EPERM
    reload(s)
    assert get(s, "/file.txt").status == 200


@needs_landlock
@pytest.mark.parametrize("abi", ["1", "3"])
def test_older_landlock_abis(monkeypatch, make_server, tmp_path, probe_so, greet_so, uploads, logs,  # noqa: F811
                             abi):
    monkeypatch.setenv("COLIBRI_SANDBOX_LANDLOCK_ABI", abi)
    s = start(make_server, tmp_path, probe_so, greet_so, uploads)
    wait_log(s, "sandbox: on (Landlock ABI %s:" % abi, 1)
    assert get(s, "/file.txt").status == 200
    assert get(s, "/open?path=/etc/passwd").body == b"errno %d\n" % errno.EACCES
    data = os.urandom(8192)
    with s.conn() as c:
        c.send(request("POST", "/upload", headers=[("Content-Type", CTYPE)],
                       body=body(part("f", data, "f.bin", "application/octet-stream"))))
        assert c.read_response(timeout=30).body.decode().splitlines()[0] == line(
            "f", data, "f.bin", "application/octet-stream", "file")


@pytest.mark.skipif(bool(sanitized_build()), reason="ASan builds allow every clone (LeakSanitizer)")
def test_no_new_process(sserver):
    assert get(sserver, "/fork").body == b"errno %d\n" % errno.EPERM
    wait_log(sserver, "[error] sandbox: system call clone (", 1)
    assert get(sserver, "/hello").status == 200


# ---- reloads ---------------------------------------------------------------------


@needs_landlock
def test_a_reload_cannot_widen_the_sandbox(sserver, tmp_path, probe_so, greet_so):  # noqa: F811
    text = sserver.config.read_text()
    other = tmp_path.parent / (tmp_path.name + "-other-root")
    other.mkdir(exist_ok=True)
    (other / "x.txt").write_text("x")
    # a root outside what the start allowed
    reload(sserver, text.replace("    serve_files / {", "    serve_files /other {\n        path = %s\n    }\n"
                                 "    serve_files / {" % other), ok=False)
    log = sserver.stderr()
    assert re.search(r"reload failed: %s:\d+: path: '%s' is outside what the sandbox allowed at "
                     r"start-up" % (re.escape(str(sserver.config)), re.escape(str(other))), log), log
    # a module library it did not load
    lib = build_greet(tmp_path.parent / (tmp_path.name + "-libnew.so"))
    reload(sserver, text.replace("module ", "module %s\nmodule " % lib, 1), ok=False)
    assert re.search(r"reload failed: %s:\d+: module: '%s' is outside" % (
        re.escape(str(sserver.config)), re.escape(str(lib))), sserver.stderr())
    # a new listener
    port = free_port()
    reload(sserver, text.replace("listener ", "listener 127.0.0.1:%d\nlistener " % port, 1), ok=False)
    assert re.search(r"reload failed: %s:\d+: listener: '127.0.0.1:%d' is a new listener: sandbox = "
                     r"true opens none after start-up" % (re.escape(str(sserver.config)), port),
                     sserver.stderr())
    # the old config serves; the same one reloads
    assert get(sserver, "/file.txt").status == 200
    reload(sserver, text)
    assert get(sserver, "/greet").status == 200
    # what the start allowed may move around: the root under another prefix
    reload(sserver, text.replace("serve_files / {", "serve_files /again {"))
    assert get(sserver, "/again/file.txt").status == 200
    assert "refused" not in sserver.stderr()


def test_turning_it_off_takes_a_restart(sserver):
    reload(sserver, sserver.config.read_text().replace("sandbox = true", "sandbox = false"))
    assert re.search(r"\[warn\] .*:\d+: sandbox: changed, takes effect at restart", sserver.stderr())
    assert get(sserver, "/socket").body == b"errno %d\n" % errno.EPERM


def test_bad_value_is_a_config_error(tmp_path):
    _, p = run_config(tmp_path, "listener 127.0.0.1:%d\nsandbox = maybe\n" % free_port())
    assert p.returncode == 1
    assert re.search(rb"bad\.conf:2: sandbox: ", p.stderr), p.stderr


@needs_landlock
def test_config_replaced_by_a_rename_needs_a_restart(sserver):
    text = sserver.config.read_text()
    new = sserver.config.with_name("next.conf")
    new.write_text(text)
    new.rename(sserver.config)  # what many editors do: another file
    log = reload(sserver, ok=False)
    assert re.search(r"reload failed: %s: cannot open: Permission denied" % re.escape(str(sserver.config)), log)
    assert get(sserver, "/hello").status == 200


@needs_landlock
def test_a_shared_temp_dir_gets_a_folder_of_its_own(make_server, tmp_path, probe_so, greet_so, logs):  # noqa: F811
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp
    (shared / "other.txt").write_text("another program's file\n")
    s = start(make_server, tmp_path, probe_so, greet_so, shared)
    wait_log(s, "sandbox: on", 1)
    m = re.search(r"\[info\] sandbox: temp_dir '%s' is shared: parts go to '(%s/colibri-\w+)'"
                  % (re.escape(str(shared)), re.escape(str(shared))), s.stderr())
    assert m, s.stderr()
    own = m.group(1)
    assert oct(os.stat(own).st_mode & 0o777) == "0o700"
    # the rest of the shared folder is closed
    assert get(s, "/open?path=%s" % (shared / "other.txt")).body == b"errno %d\n" % errno.EACCES
    data = os.urandom(8192)

    def upload():
        with s.conn() as c:
            c.send(request("POST", "/upload", headers=[("Content-Type", CTYPE)],
                           body=body(part("f", data, "f.bin", "application/octet-stream"))))
            return c.read_response(timeout=30).body.decode().splitlines()[0]

    want = line("f", data, "f.bin", "application/octet-stream", "file")
    assert upload() == want
    reload(s)  # the new config names the shared folder: the same folder of its own
    assert upload() == want
    assert s.stop() == 0
    assert os.listdir(shared) == ["other.txt"]  # removed at exit
    assert "refused" not in s.stderr()


# ---- with systemd, user and chroot --------------------------------------------


@pytest.mark.skipif(not ACTIVATE, reason="systemd-socket-activate is not installed")
def test_systemd_socket_and_notify(tmp_path):
    conf = write_conf(tmp_path, "listener systemd\nthreads = 2\nsandbox = true\n%s" % SD_SITE)
    s, where = notify_socket(tmp_path, False)
    with s:
        proc, (port,) = activate(tmp_path, conf, env={"NOTIFY_SOCKET": where})
        try:
            assert recv_state(s) == "READY=1"
            assert sd_get(port).status == 200
            proc.proc.send_signal(signal.SIGHUP)
            assert recv_state(s).startswith("RELOADING=1")
            assert recv_state(s) == "READY=1"
            proc.wait_line(r"\[info\] reloaded$")
            assert sd_get(port).status == 200
            assert all(v[0] == "2" for v in thread_status(proc.proc.pid).values())
            proc.proc.send_signal(signal.SIGTERM)
            assert recv_state(s) == "STOPPING=1"
            assert proc.stop() == 0
            assert "sandbox: on" in proc.stderr() and "refused" not in proc.stderr()
        finally:
            proc.kill()


@need_root
def test_user_and_chroot(world_dir):
    jail = world_dir / "jail"
    jail.mkdir()
    jail.chmod(0o755)
    root = www(jail)
    port = free_port()
    conf = privs_conf(world_dir, root, "user = nobody\nchroot = %s\nsandbox = true\n" % jail, port)
    # no /proc in the jail for LeakSanitizer (as in test_systemd.py)
    asan = (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    proc = Proc(world_dir, [str(colibri_bin()), "-c", str(conf)], env={"ASAN_OPTIONS": asan})
    try:
        proc.wait_line(r"\[info\] sandbox: on")
        r = sd_get(port, "/public.txt")
        assert r.status == 200 and r.body == b"public\n"
        assert sd_get(port, "/secret.txt").status in (403, 404)
        assert all(v == ("2", "1") for v in thread_status(proc.proc.pid).values())
        assert os.readlink("/proc/%d/root" % proc.proc.pid) == str(jail)
    finally:
        assert proc.stop() == 0, proc.stderr()
    assert "refused" not in proc.stderr()


@needs_landlock
@need_root
def test_user_and_a_shared_temp_dir(world_dir, greet_so):  # noqa: F811
    nobody = __import__("pwd").getpwnam("nobody")
    root = www(world_dir)
    shared = world_dir / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    port = free_port()
    conf = write_conf(
        world_dir,
        "listener 127.0.0.1:%d\nthreads = 2\nuser = nobody\nsandbox = true\ntemp_dir = %s\n"
        "multipart_memory_max = 1k\nmodule %s\nsite {\n    handler /upload upload\n"
        "    serve_files / {\n        path = %s\n    }\n}\n" % (port, shared, greet_so, root),
    )
    proc = Proc(world_dir, [str(colibri_bin()), "-c", str(conf)])
    try:
        proc.wait_line(r"\[info\] sandbox: on")
        own = re.search(r"parts go to '([^']+)'", proc.stderr()).group(1)
        st = os.stat(own)
        assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
        data = os.urandom(8192)
        with RawConn("127.0.0.1", port, 10) as c:
            c.send(request("POST", "/upload", headers=[("Content-Type", CTYPE)],
                           body=body(part("f", data, "f.bin", "application/octet-stream"))))
            r = c.read_response(timeout=30)
        assert r.body.decode().splitlines()[0] == line("f", data, "f.bin", "application/octet-stream", "file")
        assert sd_get(port, "/public.txt").status == 200
    finally:
        assert proc.stop() == 0, proc.stderr()
    assert os.listdir(shared) == []
    assert "refused" not in proc.stderr()
