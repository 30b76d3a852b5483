"""systemd socket activation, sd_notify, and dropping privileges.

Activation is tested black-box with systemd-socket-activate (Debian package
`systemd`), which binds the sockets, sets LISTEN_FDS, LISTEN_PID and
LISTEN_FDNAMES and execs colibri: `listener systemd` takes every socket,
`listener systemd:NAME` the ones named NAME, in both accept modes.  A
start-up without the sockets, or without the name, is an error naming the
file, the line and the key.  sd_notify is read from a datagram socket the
test binds and names in NOTIFY_SOCKET.  The privilege tests need root and
are skipped otherwise: `user = nobody` must leave every id of every thread
at nobody's, with the server still serving, and a file only root can read
refused; `chroot` as well."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SANITIZER_RE, colibri_bin, free_port
from rawhttp import Closed, RawConn

ACTIVATE = shutil.which("systemd-socket-activate")
need_activate = pytest.mark.skipif(not ACTIVATE, reason="systemd-socket-activate not installed (scripts/deps.sh test)")
need_root = pytest.mark.skipif(os.geteuid() != 0, reason="privilege tests need root")
ROOT_WARNING = "[warn] running as root; set 'user'"

SITE = "site {\n    handler /hello hello_world\n}\n"


class Proc:
    """colibri (maybe under systemd-socket-activate), its stderr in a file."""

    def __init__(self, base, argv, env=None, cwd=None):
        self.err_path = base / ("stderr%d.txt" % time.monotonic_ns())
        self._err = open(self.err_path, "wb")
        e = dict(os.environ)
        for k in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET"):
            e.pop(k, None)
        e.update(env or {})
        self.proc = subprocess.Popen(argv, stdout=self._err, stderr=self._err, stdin=subprocess.DEVNULL, env=e, cwd=cwd)

    def stderr(self):
        if not self._err.closed:
            self._err.flush()
        return self.err_path.read_text("utf-8", "replace")

    def wait_line(self, pattern, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.stderr(), re.M)
            if m:
                return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.kill()
        pytest.fail("no %r in colibri's output (exit %r):\n%s" % (pattern, self.proc.poll(), self.stderr()))

    def stop(self, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("colibri did not stop within %d s after SIGTERM" % timeout)
        self._err.close()
        text = self.err_path.read_text("utf-8", "replace")
        assert not SANITIZER_RE.search(text.encode()), text
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def get(port, path="/hello", timeout=5.0):
    with RawConn("127.0.0.1", port, timeout) as c:
        c.send(b"GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % path.encode())
        return c.read_response()


def write_conf(base, text, name="c.conf"):
    p = base / name
    p.write_text(text)
    return p


def activate(base, conf, names=(), n=1, datagram=False, env=None):
    """colibri under systemd-socket-activate with n loopback sockets (named
    names), exec'd (systemd-socket-activate waits for a first connection);
    returns the process and the ports.  A port taken between free_port() and the bind: again."""
    for _attempt in range(5):
        ports = [free_port() for _ in range(n)]
        argv = [ACTIVATE]
        for p in ports:
            argv += ["-l", "127.0.0.1:%d" % p]
        if names:
            argv.append("--fdname=" + ":".join(names))
        if datagram:
            argv.append("--datagram")
        for k, v in (env or {}).items():  # the child gets only these
            argv.append("--setenv=%s=%s" % (k, v))
        argv += [str(colibri_bin()), "-c", str(conf)]
        proc = Proc(base, argv)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and proc.stderr().count("Listening on") < n and proc.proc.poll() is None:
            time.sleep(0.02)
        if proc.stderr().count("Listening on") == n:
            # it execs colibri at the first connection: one that says nothing
            if datagram:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    u.sendto(b"x", ("127.0.0.1", ports[0]))
            else:
                socket.create_connection(("127.0.0.1", ports[0]), timeout=5).close()
            while time.monotonic() < deadline and "Execing" not in proc.stderr():
                time.sleep(0.02)
            return proc, ports
        proc.kill()
        if "in use" not in proc.stderr():
            pytest.fail("systemd-socket-activate failed:\n" + proc.stderr())
    pytest.fail("no free ports for systemd-socket-activate")


# --- socket activation --------------------------------------------------------------


@need_activate
@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_activation_every_socket(tmp_path, accept):
    conf = write_conf(tmp_path, "listener systemd\nthreads = 2\naccept = %s\n%s" % (accept, SITE))
    proc, ports = activate(tmp_path, conf, n=2)
    try:
        for p in ports:  # the inherited sockets' real addresses
            proc.wait_line(r"\] listening on http://127\.0\.0\.1:%d$" % p)
        for p in ports:
            for _ in range(20):  # several connections: every worker's turn
                r = get(p)
                assert r.status == 200 and r.body == b"Hello, World!"
        # many at once on one keep-alive connection each
        conns = [RawConn("127.0.0.1", ports[0], 5.0) for _ in range(16)]
        for c in conns:
            c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
        for c in conns:
            assert c.read_response().status == 200
            c.close()
    finally:
        rc = proc.stop()
    assert rc == 0, proc.stderr()


@need_activate
@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_activation_by_name_with_block(tmp_path, accept):
    # web plain; admin with the listener block's options (PROXY required)
    conf = write_conf(
        tmp_path,
        "listener systemd:web\nlistener systemd:admin {\n    proxy_protocol = true\n}\n"
        "threads = 2\naccept = %s\n%s" % (accept, SITE),
    )
    proc, (web, admin) = activate(tmp_path, conf, names=("web", "admin"), n=2)
    try:
        proc.wait_line(r"\] listening on http://127\.0\.0\.1:%d$" % admin)
        assert get(web).status == 200
        # no PROXY header on the admin socket: closed without an answer
        with RawConn("127.0.0.1", admin, 5.0) as c:
            c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
            with pytest.raises(Closed):
                c.read_response()
        with RawConn("127.0.0.1", admin, 5.0) as c:
            c.send(b"PROXY TCP4 203.0.113.9 127.0.0.1 4000 80\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
            assert c.read_response().status == 200
    finally:
        rc = proc.stop()
    assert rc == 0, proc.stderr()


@need_activate
def test_activation_only_the_named_socket(tmp_path):
    conf = write_conf(tmp_path, "listener systemd:web\nthreads = 2\n%s" % SITE)
    proc, (web, other) = activate(tmp_path, conf, names=("web", "other"), n=2)
    try:
        proc.wait_line(r"\] listening on http://127\.0\.0\.1:%d$" % web)
        time.sleep(0.1)
        assert "listening on http://127.0.0.1:%d" % other not in proc.stderr()
        assert get(web).status == 200
        # the other socket is passed but not served: nobody answers on it
        with RawConn("127.0.0.1", other, 0.5) as c:
            c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
            with pytest.raises((socket.timeout, TimeoutError, Closed)):
                c.read_response()
    finally:
        rc = proc.stop()
    assert rc == 0, proc.stderr()


@need_activate
def test_activation_unknown_name_is_an_error(tmp_path):
    conf = write_conf(tmp_path, "threads = 2\nlistener systemd:api\n%s" % SITE)
    proc, _ = activate(tmp_path, conf, names=("web",), n=1)
    rc = proc.proc.wait(10)
    proc.stop()
    assert rc == 1
    assert "colibri: %s:2: listener: no socket named 'api' passed by systemd (LISTEN_FDNAMES has 'web')" % conf in proc.stderr()


@need_activate
def test_activation_datagram_socket_is_an_error(tmp_path):
    conf = write_conf(tmp_path, "listener systemd\n%s" % SITE)
    proc, _ = activate(tmp_path, conf, datagram=True)
    rc = proc.proc.wait(10)
    proc.stop()
    assert rc == 1
    assert re.search(r"%s:1: listener: systemd socket fd 3 \('unknown'\) is not a listening stream socket" % re.escape(str(conf)), proc.stderr()), proc.stderr()


def run_direct(tmp_path, conf, env=None, timeout=10):
    p = subprocess.run([str(colibri_bin()), "-c", str(conf)], capture_output=True, text=True, timeout=timeout, env={**{k: v for k, v in os.environ.items() if not k.startswith("LISTEN_")}, **(env or {})})
    return p


def test_no_listen_fds_is_an_error(tmp_path):
    conf = write_conf(tmp_path, "threads = 1\nlistener systemd\n%s" % SITE)
    p = run_direct(tmp_path, conf)
    assert p.returncode == 1
    assert "colibri: %s:2: listener: no sockets passed by systemd (LISTEN_FDS is not set)" % conf in p.stderr
    conf = write_conf(tmp_path, "listener systemd:web\n%s" % SITE)
    p = run_direct(tmp_path, conf)
    assert p.returncode == 1
    assert "%s:1: listener: no sockets passed by systemd" % conf in p.stderr


def test_listen_pid_of_another_process_is_ignored(tmp_path):
    # sockets meant for another process (LISTEN_PID): as if none were passed
    conf = write_conf(tmp_path, "listener systemd\n%s" % SITE)
    p = run_direct(tmp_path, conf, env={"LISTEN_FDS": "1", "LISTEN_PID": "1"})
    assert p.returncode == 1
    assert "%s:1: listener: the sockets in LISTEN_FDS are not for this process (LISTEN_PID=1" % conf in p.stderr


def start_by_hand(tmp_path, s, conf, out, accept="reuseport"):
    """colibri with the listening socket s passed as fd 3 by a wrapper shell
    that sets LISTEN_PID to its own pid and execs colibri (what systemd
    does); the caller keeps its copy of s, as systemd keeps its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LISTEN_")}
    fd = os.dup(s.fileno())  # a free number, not one pytest holds
    try:
        with open(out, "wb") as err:
            pr = subprocess.Popen(
                ["bash", "-c", 'exec 3<&%d %d<&-; LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=web exec "$0" "$@"' % (fd, fd), str(colibri_bin()), "-c", str(conf)],
                pass_fds=(fd,), stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=env,
            )
    finally:
        os.close(fd)
    deadline = time.monotonic() + 5
    while "listening on" not in out.read_text() and time.monotonic() < deadline and pr.poll() is None:
        time.sleep(0.02)
    text = out.read_text()
    if "] listening on http://127.0.0.1:%d\n" % s.getsockname()[1] not in text:
        pr.kill()  # never leave a server behind a failed start
        pr.wait(5)
        pytest.fail("no listening line for the passed socket:\n" + text)
    return pr


@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_inherited_socket_outlives_a_graceful_stop(tmp_path, accept):
    """The socket passed is served; colibri made it close-on-exec (no child
    inherits it) and non-blocking; a graceful stop leaves the socket to its
    other holder (systemd; here the test) still listening, and the next
    colibri started on it serves it again."""
    conf = write_conf(tmp_path, "listener systemd:web\nthreads = 2\naccept = %s\n%s" % (accept, SITE))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        port = s.getsockname()[1]
        for run in range(2):
            out = tmp_path / ("wrap%d.txt" % run)
            pr = start_by_hand(tmp_path, s, conf, out, accept)
            try:
                for _ in range(10):
                    assert get(port).status == 200
                fdinfo = Path("/proc/%d/fdinfo/3" % pr.pid).read_text()
                flags = int(re.search(r"flags:\s+(\d+)", fdinfo).group(1), 8)
                assert flags & os.O_CLOEXEC, fdinfo
                assert flags & os.O_NONBLOCK, fdinfo
            finally:
                pr.send_signal(signal.SIGTERM)
                assert pr.wait(10) == 0
            assert not SANITIZER_RE.search(out.read_bytes()), out.read_text()
            # still listening: a connection made now waits for the next start
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                pass
            s.settimeout(2)
            s.accept()[0].close()


def test_socket_taken_twice_is_an_error(tmp_path):
    conf = write_conf(tmp_path, "listener systemd\nlistener systemd:web\n%s" % SITE)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LISTEN_")}
        fd = os.dup(s.fileno())
        try:
            p = subprocess.run(
                ["bash", "-c", 'exec 3<&%d %d<&-; LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=web exec "$0" "$@"' % (fd, fd), str(colibri_bin()), "-c", str(conf)],
                pass_fds=(fd,), capture_output=True, text=True, timeout=10, env=env,
            )
        finally:
            os.close(fd)
    assert p.returncode == 1
    assert "colibri: %s:2: listener: systemd socket fd 3 ('web') is taken by another listener already" % conf in p.stderr


# --- sd_notify ------------------------------------------------------------------------


def notify_socket(tmp_path, abstract):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = "colibri-test-%d-%d" % (os.getpid(), time.monotonic_ns())
        s.bind("\0" + name)
        return s, "@" + name
    path = str(tmp_path / "notify.sock")
    s.bind(path)
    return s, path


def recv_state(s, timeout=5.0):
    s.settimeout(timeout)
    return s.recv(4096).decode()


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_sd_notify_ready_and_stopping(tmp_path, abstract):
    port = free_port()
    conf = write_conf(tmp_path, "listener 127.0.0.1:%d\nthreads = 2\n%s" % (port, SITE))
    s, where = notify_socket(tmp_path, abstract)
    with s:
        proc = Proc(tmp_path, [str(colibri_bin()), "-c", str(conf)], env={"NOTIFY_SOCKET": where})
        try:
            assert recv_state(s) == "READY=1"
            # ready means serving: a request right after works
            assert get(port).status == 200
            assert "] listening on http://127.0.0.1:%d" % port in proc.stderr()
            proc.proc.send_signal(signal.SIGTERM)
            assert recv_state(s) == "STOPPING=1"
            assert proc.stop() == 0
            # nothing more (one STOPPING, however many signals)
            s.settimeout(0.2)
            with pytest.raises((socket.timeout, TimeoutError)):
                s.recv(4096)
        finally:
            proc.kill()


@need_activate
def test_sd_notify_with_activation(tmp_path):
    conf = write_conf(tmp_path, "listener systemd\naccept = thread\nthreads = 2\n%s" % SITE)
    s, where = notify_socket(tmp_path, False)
    with s:
        proc, (port,) = activate(tmp_path, conf, env={"NOTIFY_SOCKET": where})
        state = recv_state(s)
        try:
            assert state == "READY=1"
            assert get(port).status == 200
            proc.proc.send_signal(signal.SIGTERM)
            assert recv_state(s) == "STOPPING=1"
            assert proc.stop() == 0
        finally:
            proc.kill()


def test_sd_notify_unreachable_is_a_warning(tmp_path):
    port = free_port()
    conf = write_conf(tmp_path, "listener 127.0.0.1:%d\nthreads = 1\n%s" % (port, SITE))
    proc = Proc(tmp_path, [str(colibri_bin()), "-c", str(conf)], env={"NOTIFY_SOCKET": str(tmp_path / "nobody-here")})
    try:
        proc.wait_line(r"\[warn\] NOTIFY_SOCKET '.*nobody-here': No such file or directory$")
        assert get(port).status == 200
    finally:
        assert proc.stop() == 0


# --- privileges -----------------------------------------------------------------------


def ids(pid):
    """{'Uid': [...4], 'Gid': [...4], 'Groups': [...]} of every thread."""
    out = []
    for task in Path("/proc/%d/task" % pid).iterdir():
        st = (task / "status").read_text()
        d = {}
        for key in ("Uid", "Gid", "Groups"):
            d[key] = [int(x) for x in re.search(r"^%s:\s*(.*)$" % key, st, re.M).group(1).split()]
        out.append(d)
    return out


@pytest.fixture
def world_dir():
    """A directory under /tmp that nobody may enter (pytest's tmp_path is
    root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="colibri-privs-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def www(base):
    root = base / "www"
    root.mkdir()
    root.chmod(0o755)
    (root / "public.txt").write_text("public\n")
    (root / "public.txt").chmod(0o644)
    (root / "secret.txt").write_text("root only\n")
    (root / "secret.txt").chmod(0o600)
    return root


def privs_conf(base, root, extra, port):
    return write_conf(
        base,
        "listener 127.0.0.1:%d\nthreads = 2\n%s"
        "site {\n    handler /hello hello_world\n    serve_files / {\n        path = %s\n    }\n}\n" % (port, extra, root),
    )


@need_root
@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_user_drops_every_id(world_dir, accept):
    nobody = __import__("pwd").getpwnam("nobody")
    root = www(world_dir)
    port = free_port()
    conf = privs_conf(world_dir, root, "user = nobody\naccept = %s\n" % accept, port)
    proc = Proc(world_dir, [str(colibri_bin()), "-c", str(conf)])
    try:
        proc.wait_line(r"\] listening on ")
        assert get(port).status == 200
        for t in ids(proc.proc.pid):
            assert t["Uid"] == [nobody.pw_uid] * 4, t
            assert t["Gid"] == [nobody.pw_gid] * 4, t
            assert 0 not in t["Groups"], t
        r = get(port, "/public.txt")
        assert r.status == 200 and r.body == b"public\n"
        # readable by root only: not for the server any more
        assert get(port, "/secret.txt").status in (403, 404)
        assert ROOT_WARNING not in proc.stderr()
    finally:
        assert proc.stop() == 0, proc.stderr()


@need_root
def test_chroot(world_dir):
    nobody = __import__("pwd").getpwnam("nobody")
    jail = world_dir / "jail"
    jail.mkdir()
    jail.chmod(0o755)
    root = www(jail)
    port = free_port()
    s, where = notify_socket(world_dir, False)  # reached from inside the chroot
    conf = privs_conf(world_dir, root, "user = nobody\nchroot = %s\n" % jail, port)
    with s:
        # LeakSanitizer reads /proc/self/task at exit, and the jail has no
        # /proc: no leak check for this run (the other tests make them)
        asan = (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        proc = Proc(world_dir, [str(colibri_bin()), "-c", str(conf)], env={"NOTIFY_SOCKET": where, "ASAN_OPTIONS": asan})
        try:
            assert recv_state(s) == "READY=1"
            assert os.readlink("/proc/%d/root" % proc.proc.pid) == str(jail)
            assert os.readlink("/proc/%d/cwd" % proc.proc.pid) == str(jail)
            for t in ids(proc.proc.pid):
                assert t["Uid"] == [nobody.pw_uid] * 4, t
            r = get(port, "/public.txt")
            assert r.status == 200 and r.body == b"public\n"
            assert get(port, "/secret.txt").status in (403, 404)
            proc.proc.send_signal(signal.SIGTERM)
            assert recv_state(s) == "STOPPING=1"
        finally:
            assert proc.stop() == 0, proc.stderr()


@need_root
def test_root_without_user_warns(tmp_path):
    port = free_port()
    conf = write_conf(tmp_path, "listener 127.0.0.1:%d\nthreads = 1\n%s" % (port, SITE))
    proc = Proc(tmp_path, [str(colibri_bin()), "-c", str(conf)])
    try:
        proc.wait_line(r"\[warn\] running as root; set 'user' in the config")
        assert get(port).status == 200
    finally:
        assert proc.stop() == 0


def config_error(conf, line, key, message):
    return "colibri: %s:%d: %s: %s" % (conf, line, key, message)


def test_unknown_user(tmp_path):
    conf = write_conf(tmp_path, "threads = 1\nuser = no-such-user-here\n%s" % SITE)
    p = run_direct(tmp_path, conf)
    assert p.returncode == 1
    assert config_error(conf, 2, "user", "unknown user 'no-such-user-here'") in p.stderr


def test_chroot_without_user(tmp_path):
    conf = write_conf(tmp_path, "chroot = %s\n%s" % (tmp_path, SITE))
    p = run_direct(tmp_path, conf)
    assert p.returncode == 1
    assert config_error(conf, 1, "chroot", "needs 'user' too (a root process can leave a chroot)") in p.stderr


@need_root
def test_chroot_errors(tmp_path):
    conf = write_conf(tmp_path, "user = nobody\nchroot = /no/such/dir\n%s" % SITE)
    p = run_direct(tmp_path, conf)
    assert p.returncode == 1
    assert config_error(conf, 2, "chroot", "'/no/such/dir': No such file or directory") in p.stderr
    conf = write_conf(tmp_path, "user = nobody\nchroot = relative\n%s" % SITE)
    p = run_direct(tmp_path, conf)
    assert config_error(conf, 2, "chroot", "'relative' must be an absolute path") in p.stderr


@need_root
def test_non_root_cannot_become_another_user(world_dir):
    """Run as nobody (setpriv): `user = root` is refused at start-up, `user =
    nobody` (itself) is fine."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("setpriv not installed")
    nobody = __import__("pwd").getpwnam("nobody")
    as_nobody = [setpriv, "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid, "--clear-groups"]
    conf = write_conf(world_dir, "user = root\nthreads = 1\n%s" % SITE)
    conf.chmod(0o644)
    p = subprocess.run(as_nobody + [str(colibri_bin()), "-c", str(conf)], capture_output=True, text=True, timeout=10)
    assert p.returncode == 1
    assert config_error(conf, 1, "user", "cannot become user 'root' (uid 0): not running as root (uid %d)" % nobody.pw_uid) in p.stderr
    port = free_port()
    conf = write_conf(world_dir, "listener 127.0.0.1:%d\nuser = nobody\nthreads = 1\n%s" % (port, SITE), "self.conf")
    conf.chmod(0o644)
    proc = Proc(world_dir, as_nobody + [str(colibri_bin()), "-c", str(conf)])
    try:
        proc.wait_line(r"\] listening on ")
        assert get(port).status == 200
        assert "warning" not in proc.stderr()
    finally:
        assert proc.stop() == 0


# --- contrib/ unit files ----------------------------------------------------------


CONTRIB = Path(__file__).resolve().parents[2] / "contrib"


def test_units_verify(tmp_path):
    """systemd-analyze verify accepts the units (ExecStart pointed at the
    binary under test, as /usr/local/bin/colibri is not installed here)."""
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("systemd-analyze not installed")
    unit = (CONTRIB / "colibri.service").read_text()
    assert "ExecStart=/usr/local/bin/colibri -c /etc/colibri/colibri.conf\n" in unit
    assert "Type=notify\n" in unit
    (tmp_path / "colibri.service").write_text(unit.replace("/usr/local/bin/colibri", str(colibri_bin())))
    shutil.copy(CONTRIB / "colibri.socket", tmp_path / "colibri.socket")
    # Documentation=man:...: verify runs man, which finds the pages the
    # build made (as make install puts them) through MANPATH
    env = dict(os.environ)
    for page, sec in (("colibri.8", "man8"), ("colibri.conf.5", "man5")):
        (tmp_path / "man" / sec).mkdir(parents=True, exist_ok=True)
        built = colibri_bin().parent / "man" / page
        if built.exists():
            shutil.copy(built, tmp_path / "man" / sec / page)
    env["MANPATH"] = str(tmp_path / "man")
    p = subprocess.run([analyze, "verify", str(tmp_path / "colibri.socket"), str(tmp_path / "colibri.service")],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "colibri" not in p.stderr, p.stderr  # no warning about our units


@need_activate
def test_contrib_config_takes_the_socket_unit_names(tmp_path):
    """contrib/colibri.conf serves the socket that contrib/colibri.socket
    names, as systemd would pass it (here through systemd-socket-activate
    on a loopback port instead of port 80)."""
    sock = (CONTRIB / "colibri.socket").read_text()
    name = re.search(r"^FileDescriptorName=(\S+)$", sock, re.M).group(1)
    root = tmp_path / "html"
    root.mkdir()
    (root / "index.html").write_text("it works\n")
    text = (CONTRIB / "colibri.conf").read_text()
    assert "access_log = /var/log/colibri/access.log\n" in text  # LogsDirectory=colibri
    conf = write_conf(tmp_path, text.replace("/var/www/html", str(root)).replace(
        "/var/log/colibri", str(tmp_path)))
    proc, (port,) = activate(tmp_path, conf, names=(name,))
    try:
        proc.wait_line(r"\] listening on http://127\.0\.0\.1:%d$" % port)
        r = get(port, "/")
        assert r.status == 200 and r.body == b"it works\n"
    finally:
        assert proc.stop() == 0
    assert '"GET / HTTP/1.1" 200 9 ' in (tmp_path / "access.log").read_text()


@need_activate
@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_reload_keeps_the_passed_sockets(tmp_path, accept):
    """A reload under socket activation keeps serving the passed sockets
    (matched by their fd, never closed), with the new routes; a reloaded
    config naming one socket twice fails and the old one keeps serving."""
    conf = write_conf(tmp_path, "listener systemd:web\nthreads = 2\naccept = %s\n%s" % (accept, SITE))
    proc, (web,) = activate(tmp_path, conf, names=("web",), n=1)
    try:
        proc.wait_line(r"\] listening on http://127\.0\.0\.1:%d$" % web)
        assert get(web).status == 200
        assert get(web, "/echo").status == 404
        write_conf(tmp_path, "listener systemd:web\nthreads = 2\naccept = %s\nsite {\n"
                   "    handler /hello hello_world\n    handler /echo echo\n}\n" % accept)
        proc.proc.send_signal(signal.SIGHUP)
        proc.wait_line(r"\[info\] reloaded$")
        for _ in range(10):
            assert get(web).status == 200
        assert get(web, "/echo").status == 200
        assert "no longer listening" not in proc.stderr()
        # the same socket twice: refused, the running config stays
        write_conf(tmp_path, "listener systemd:web\nlistener systemd:web\nthreads = 2\n"
                   "accept = %s\n%s" % (accept, SITE))
        proc.proc.send_signal(signal.SIGHUP)
        proc.wait_line(r"\[error\] reload failed: .*listener")
        assert get(web, "/echo").status == 200
    finally:
        rc = proc.stop()
    assert rc == 0, proc.stderr()
