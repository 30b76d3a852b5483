"""Two colibri instances behind HAProxy, restarted in turn under load.

HAProxy (Debian package `haproxy`, installed by `make test` through
scripts/deps.sh) listens on a loopback port and balances round-robin over
two colibri instances, each with a `proxy_protocol = true` listener, sending
them a PROXY v2 header (`send-proxy-v2`).  A few client threads connect to
HAProxy from 127.0.0.2 and keep requesting /hello and a served file while
the test stops instance A gracefully (SIGTERM, exit 0), starts it again on
the same port, then does the same with B.  Every answer must be a 200 with
the right body, and both access logs must show the clients' address
127.0.0.2 (which only the PROXY header carries: HAProxy itself connects
from 127.0.0.1).  The HAProxy config is the one README.md documents.
Everything stays on loopback and is bounded in time (about 6 s of load)."""

import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import HELLO_TXT, REPO, SANITIZER_RE, colibri_bin, free_port, make_wwwroot
from rawhttp import recv_all

CLIENT_ADDR = "127.0.0.2"
CLIENTS = 4
HELLO = b"Hello, World!"
# client threads run at most this long whatever happens
LOAD_LIMIT = 20.0

# The HAProxy config is the README's (section "Behind a load balancer"), so
# that what it documents is what runs here: its addresses become loopback
# ports, and a log (server state changes, failed or retried requests) and a
# stats socket (for the counters printed) are added.
README_FRONT = "    bind :80\n"
README_SERVERS = ("10.0.0.11:8080", "10.0.0.12:8080")
TEST_ADDITIONS = """\
global
    maxconn 1000
    log stderr format raw local0 info
    stats socket {stats}

"""
TEST_DEFAULTS = """\
    log global
    option httplog
    option dontlog-normal
"""


def haproxy_cfg(front, pa, pb, stats):
    text = (REPO / "README.md").read_text()
    m = re.search(r"^## Behind a load balancer\n(.*?)^## ", text, re.M | re.S)
    assert m, 'README.md has no "## Behind a load balancer" section'
    blocks = re.findall(r"^```\n(defaults\n.*?)^```", m.group(1), re.M | re.S)
    assert len(blocks) == 1, "the section should have one HAProxy config (a block starting with defaults)"
    cfg = blocks[0]
    for old, new in [
        (README_FRONT, "    bind 127.0.0.1:%d\n" % front),
        (README_SERVERS[0], "127.0.0.1:%d" % pa),
        (README_SERVERS[1], "127.0.0.1:%d" % pb),
        ("defaults\n", "defaults\n" + TEST_DEFAULTS),
    ]:
        assert cfg.count(old) == 1, "the README's HAProxy config should have %r once" % old
        cfg = cfg.replace(old, new)
    return TEST_ADDITIONS.format(stats=stats) + cfg


def haproxy_bin():
    return shutil.which("haproxy") or next(
        (p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.access(p, os.X_OK)), None
    )


def loopback_alias_works():
    try:
        with socket.socket() as s:
            s.bind((CLIENT_ADDR, 0))
        return True
    except OSError:
        return False


class Instance:
    """One colibri process; start() can be called again after stop()."""

    def __init__(self, base, name, root):
        self.base, self.name = base, name
        self.port = free_port()
        self.log = base / ("%s-access.log" % name)
        self.conf = base / ("%s.conf" % name)
        self.conf.write_text(
            "listener 127.0.0.1:%d {\n"
            "    proxy_protocol = true\n"
            "}\n"
            "threads = 2\n"
            "shutdown_timeout = 10s\n"
            "access_log = %s\n"
            "site {\n"
            "    handler /hello hello_world\n"
            "    serve_files / {\n"
            "        path = %s\n"
            "    }\n"
            "}\n" % (self.port, self.log, root)
        )
        self.gen = 0
        self.proc = None
        self.stderr_paths = []

    def start(self):
        errp = self.base / ("%s.%d.stderr" % (self.name, self.gen))
        self.gen += 1
        self.stderr_paths.append(errp)
        env = dict(os.environ)
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        with open(errp, "wb") as errf:
            self.proc = subprocess.Popen(
                [str(colibri_bin()), "-c", str(self.conf)],
                cwd=str(self.base),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errf,
            )
        deadline = time.monotonic() + 5
        while True:
            text = errp.read_text(errors="replace")
            if re.search(r"\] listening on \S+:%d$" % self.port, text, re.M):
                return
            if self.proc.poll() is not None:
                pytest.fail("%s exited with %s at start-up:\n%s" % (self.name, self.proc.returncode, text))
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail("%s did not listen within 5 s:\n%s" % (self.name, text))
            time.sleep(0.01)

    def stop(self):
        """SIGTERM and wait: the exit code (None: killed after 10 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return None

    def log_lines(self):
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def sanitizer_reports(self):
        out = []
        for p in self.stderr_paths:
            data = p.read_bytes()
            m = SANITIZER_RE.search(data)
            if m:
                out.append("%s: %s" % (p.name, data[m.start() : m.start() + 4000].decode(errors="replace")))
        return out


class Load:
    """CLIENTS threads, each on keep-alive connections to HAProxy from
    CLIENT_ADDR, until stopped: every answer is checked."""

    def __init__(self, port):
        self.port = port
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.failures = []
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(CLIENTS)]

    def run(self, i):
        deadline = time.monotonic() + LOAD_LIMIT
        conn = None
        n = 0
        while not self.stop_ev.is_set() and time.monotonic() < deadline:
            n += 1
            path, want = ("/hello?c=%d-%d" % (i, n), HELLO) if n % 2 else ("/file.txt?c=%d-%d" % (i, n), HELLO_TXT)
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(
                        "127.0.0.1", self.port, timeout=5, source_address=(CLIENT_ADDR, 0)
                    )
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read()
                if r.status != 200 or body != want:
                    self.fail("%s: %d %r" % (path, r.status, body[:200]))
                else:
                    with self.lock:
                        self.ok += 1
                if r.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                self.fail("%s: %s: %s" % (path, type(e).__name__, e))
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def fail(self, what):
        with self.lock:
            self.failures.append("%.3f %s" % (time.monotonic(), what))

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(LOAD_LIMIT)


def haproxy_stats(sock_path):
    """The backend's counters from HAProxy's stats socket: {server: {field: value}}."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        s.connect(str(sock_path))
        s.sendall(b"show stat\n")
        data = recv_all(s)
    lines = data.decode().splitlines()
    names = lines[0].lstrip("# ").split(",")
    out = {}
    for l in lines[1:]:
        if l:
            row = dict(zip(names, l.split(",")))
            if row["pxname"] == "colibri":
                out[row["svname"]] = row
    return out


def wait_up(port, limit=5.0):
    """Waits for an answer through HAProxy (the backends pass their checks)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/hello")
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                return True
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.05)
    return False


@pytest.fixture
def haproxy_pair(tmp_path):
    hb = haproxy_bin()
    if hb is None:
        from conftest import require
        require(False, "haproxy")
    if not loopback_alias_works():
        pytest.skip("cannot bind a socket to %s (loopback is not 127.0.0.0/8 here)" % CLIENT_ADDR)
    if not colibri_bin().exists():
        pytest.fail("colibri binary not found: %s (set COLIBRI_BIN)" % colibri_bin())
    root = make_wwwroot(tmp_path)
    insts = [Instance(tmp_path, "a", root), Instance(tmp_path, "b", root)]
    hp = {"proc": None}
    sockdir = None
    try:
        for inst in insts:
            inst.start()
        front = free_port()
        cfg = tmp_path / "haproxy.cfg"
        # a unix socket path has room for 107 bytes: not below tmp_path
        sockdir = Path(tempfile.mkdtemp(prefix="colibri-haproxy-"))
        stats = sockdir / "stats.sock"
        cfg.write_text(haproxy_cfg(front, insts[0].port, insts[1].port, stats))
        check = subprocess.run([hb, "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=10)
        assert check.returncode == 0, "haproxy -c:\n%s%s" % (check.stdout, check.stderr)
        errp = tmp_path / "haproxy.stderr"
        with open(errp, "wb") as errf:
            hp["proc"] = subprocess.Popen(
                [hb, "-f", str(cfg), "-db"], stdin=subprocess.DEVNULL, stdout=errf, stderr=subprocess.STDOUT
            )
        if not wait_up(front):
            pytest.fail("no answer through haproxy within 5 s:\n%s" % errp.read_text(errors="replace"))
        yield insts, front, errp, stats
    finally:
        p = hp["proc"]
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        if sockdir is not None:
            shutil.rmtree(sockdir, ignore_errors=True)
        problems = []
        for inst in insts:
            rc = inst.stop()
            if rc != 0:
                problems.append("%s: exit %r at teardown" % (inst.name, rc))
            problems += inst.sanitizer_reports()
        if problems:
            pytest.fail("\n\n".join(problems), pytrace=False)


def test_rolling_restart_behind_haproxy(haproxy_pair):
    insts, front, haproxy_err, stats = haproxy_pair
    load = Load(front)
    t0 = time.monotonic()
    load.start()
    try:
        time.sleep(1.5)
        restarted_at = {}
        for inst, gap in zip(insts, (0.5, 0.0)):
            # A stays down long enough for the checks to notice; B comes
            # back before the next check, so only retries cover it
            assert inst.stop() == 0, "%s: graceful stop did not exit 0" % inst.name
            time.sleep(gap)
            inst.start()
            restarted_at[inst.name] = len(inst.log_lines())
            # the balancer sees it again (rise 1, checks every 100 ms)
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                log = inst.log_lines()
                if any(CLIENT_ADDR in l for l in log[restarted_at[inst.name] :]):
                    break
                time.sleep(0.05)
            time.sleep(1.0)
        time.sleep(1.0)
    finally:
        load.finish()
    elapsed = time.monotonic() - t0
    st = haproxy_stats(stats)
    print(
        "%d requests in %.1f s through haproxy, %d failed; haproxy: %s"
        % (
            load.ok + len(load.failures),
            elapsed,
            len(load.failures),
            ", ".join(
                "%s %s requests, %s retries, %s redispatches, %s connection errors, %s response errors"
                % (n, st[n]["stot"], st[n]["wretr"], st[n]["wredis"], st[n]["econ"], st[n]["eresp"])
                for n in ("a", "b")
            ),
        )
    )
    assert not load.failures, "%d of %d requests failed:\n%s\nhaproxy:\n%s" % (
        len(load.failures),
        load.ok + len(load.failures),
        "\n".join(load.failures[:20]),
        haproxy_err.read_text(errors="replace")[-3000:],
    )
    assert load.ok > 200, "only %d requests in %.1f s" % (load.ok, elapsed)

    # stop both so that the access logs are complete
    for inst in insts:
        assert inst.stop() == 0
    addr = re.compile(r"^(\S+) - - \[")
    for inst in insts:
        lines = inst.log_lines()
        client = [l for l in lines if "?c=" in l]
        assert client, "%s: no client request in the access log" % inst.name
        bad = [l for l in client if addr.match(l) is None or addr.match(l).group(1) != CLIENT_ADDR]
        assert not bad, "%s: client requests logged with another address:\n%s" % (inst.name, "\n".join(bad[:5]))
        after = [l for l in lines[restarted_at[inst.name] :] if "?c=" in l]
        assert after, "%s: no client request reached it after its restart" % inst.name
