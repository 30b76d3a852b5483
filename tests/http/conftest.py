"""Fixtures that run the real colibri binary.

COLIBRI_BIN names the binary (relative paths are taken from the repository
root, which is two levels above this file); default build/colibri. The tests
of colibri-tpl run the one beside it.

`make_server(**overrides)` starts a server on a free loopback port with a
config written to tmp_path; `server` is one with the default config.  At
teardown every server still running gets SIGTERM and must exit 0 within 10 s,
and every server's stderr must be free of sanitizer reports.

COLIBRI_TEST_SANDBOX=1 adds `sandbox = true` to every config make_server
writes (a test's own sandbox= override wins).

COLIBRI_WRAPPER, when set, is a command the servers of make_server start
under (make check-memcheck: valgrind); "{log}" in it becomes a file beside
the server's stderr, whose errors fail the test like a sanitizer report.
COLIBRI_TIME_SCALE multiplies the start and stop timeouts here and the
default waits of rawhttp and wsclient, for a wrapper that slows the server
down."""

import os
import random
import re
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import faulthook
from rawhttp import TEST_TLS, TIME_SCALE, RawConn

REPO = Path(__file__).resolve().parents[2]
SANITIZER_RE = re.compile(rb"ERROR: \w*Sanitizer|runtime error:|WARNING: \w*Sanitizer")
START_TIMEOUT = 5.0 * TIME_SCALE
STOP_TIMEOUT = 10.0 * TIME_SCALE
WRAPPER = shlex.split(os.environ.get("COLIBRI_WRAPPER", ""))
# what valgrind writes for an error (its summary line counts them all)
WRAPPER_RE = re.compile(rb"ERROR SUMMARY: [1-9]")

# The config keys of the spec, in the order they are written.  None = omit.
DEFAULTS = {
    "threads": "2",
    "keep_alive_timeout": "15s",
    "request_timeout": "10s",
    "shutdown_timeout": "10s",
    "max_request_head": "8k",
    "max_request_target": "8000",
    "max_request_body": "1M",
    "server_header": "colibri",
}

SECRET = b"TOP-SECRET-OUTSIDE-ROOT"
INDEX_HTML = b"<!doctype html><title>colibri test</title><p>index page</p>\n"
HELLO_TXT = b"hello from a file\n"
SUB_INDEX = b"<!doctype html><p>sub index</p>\n"


def colibri_bin():
    p = Path(os.environ.get("COLIBRI_BIN", "build/colibri"))
    if not p.is_absolute():
        p = REPO / p
    return p


def colibri_tpl_bin():
    """colibri-tpl, which the build puts beside colibri."""
    return colibri_bin().parent / "colibri-tpl"


# Ports for the tests' servers: below the kernel's ephemeral range
# (ip_local_port_range, 32768-60999 by default), so that no client socket's
# own port can take one between free_port() and the server's bind(), and
# split between pytest-xdist's workers (two at a time in the ASan and
# valgrind runs), so that two workers never choose the same one.
PORTS_LO, PORTS_HI = 10000, 32000


def require(ok, what):
    """A real component a test needs, which make test-deps (scripts/deps.sh
    test) installs: without it the test fails saying so, never skips, so a
    run that lacks it cannot pass (CI once skipped every FastCGI test)."""
    if not ok:
        pytest.fail("%s is not installed: make test-deps (scripts/deps.sh test) installs it" % what)


def free_port(host="127.0.0.1"):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    span = (PORTS_HI - PORTS_LO) // count
    lo = PORTS_LO + (index % count) * span
    for _ in range(100):  # bounded: a port taken (or in TIME_WAIT) is skipped
        port = lo + random.randrange(span)
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(family, socket.SOCK_STREAM) as s:  # the kernel's choice
        s.bind((host, 0))
        return s.getsockname()[1]


def make_wwwroot(base):
    """A root with an index, a text file, a directory, symlinks (one to a
    file inside, one to a directory outside) and a secret outside it."""
    root = base / "wwwroot"
    (root / "sub").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "index.html").write_bytes(INDEX_HTML)
    (root / "file.txt").write_bytes(HELLO_TXT)
    (root / "sub" / "index.html").write_bytes(SUB_INDEX)
    (root / "sub" / "data.bin").write_bytes(bytes(range(256)) * 64)
    (root / "big.bin").write_bytes(os.urandom(300 * 1024))
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    (base / "secret.txt").write_bytes(SECRET)
    os.symlink("file.txt", root / "link.txt")
    os.symlink(str(outside), root / "outlink")
    os.symlink(str(base / "secret.txt"), root / "secretlink.txt")
    return root


def default_site(root):
    return (
        "site {\n"
        "    handler /hello hello_world\n"
        "    handler /echo echo\n"
        "    serve_files / {\n"
        "        path = %s\n"
        "        index = index.html\n"
        "    }\n"
        "}\n" % root
    )


if TEST_TLS:
    # requests (the tests' client for whole requests) takes the suite's
    # self-signed certificate without checking it
    import requests
    import urllib3

    urllib3.disable_warnings()
    _request = requests.Session.request

    def _unverified(self, method, url, **kw):
        kw.setdefault("verify", False)
        return _request(self, method, url, **kw)

    requests.Session.request = _unverified


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "plain_only(why): a test of plain HTTP's own bytes on the socket (raw sockets, "
        "segments), skipped when COLIBRI_TEST_TLS=1 runs the suite over TLS")


def pytest_runtest_setup(item):
    m = item.get_closest_marker("plain_only")
    if m and TEST_TLS:
        pytest.skip("plain HTTP only: " + (m.args[0] if m.args else ""))


def over_tls(base, text, site_text):
    """COLIBRI_TEST_TLS=1: the config's listeners with TLS, and a
    certificate (made once per test folder) in every site."""
    cert, key = base / "suite-tls.pem", base / "suite-tls.key"
    if not cert.exists():
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost"],
                       check=True, capture_output=True, timeout=60)
    text = re.sub(r"(?m)^listener (\S+)$", r"listener \1 {\n    tls = true\n}", text)
    site_text = re.sub(r"(?m)^(site\b[^\n{]*\{)$",
                       r"\1\n    tls_certificate = %s\n    tls_key = %s" % (cert, key), site_text)
    return text, site_text


class Server:
    name = "colibri"  # for messages

    def __init__(self, base, name, overrides, site, args, host):
        self.base = base
        self.name = name
        self.host = host
        self.port = free_port(host)
        self.root = base / "wwwroot"
        if not self.root.exists():
            make_wwwroot(base)
        conf = dict(DEFAULTS)
        if os.environ.get("COLIBRI_TEST_SANDBOX") == "1":
            conf["sandbox"] = "true"  # the whole suite under the sandbox (README, "Sandbox")
        conf.update(overrides)
        hostport = "[%s]:%d" % (host, self.port) if ":" in host else "%s:%d" % (host, self.port)
        text = "listener %s\n" % hostport
        for k, v in conf.items():
            if v is not None:
                text += "%s = %s\n" % (k, v)
        site_text = site if site is not None else default_site(self.root)
        if TEST_TLS:
            text, site_text = over_tls(base, text, site_text)
        text += site_text
        self.config = base / ("%s.conf" % name)
        self.config.write_text(text)
        self.stderr_path = base / ("%s.stderr" % name)
        self.stdout_path = base / ("%s.stdout" % name)
        self.wrapper_log = base / ("%s.wrapper.out" % name)
        binary = colibri_bin()
        if not binary.exists():
            pytest.fail("colibri binary not found: %s (set COLIBRI_BIN)" % binary)
        self._err = open(self.stderr_path, "wb")
        self._out = open(self.stdout_path, "wb")
        env = dict(os.environ)
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        env = faulthook.server_env(env, base, name)
        self.proc = subprocess.Popen(
            [w.replace("{log}", str(self.wrapper_log)) for w in WRAPPER]
            + [str(binary), "-c", str(self.config)]
            + list(args),
            env=env,
            stdout=self._out,
            stderr=self._err,
            stdin=subprocess.DEVNULL,
            cwd=str(base),
        )
        self.returncode = None
        self.config_port = self.port
        if "-l" in args:
            # -l replaces the config's listener: talk to that one instead.
            spec = list(args)[list(args).index("-l") + 1]
            h, _, p = spec.rpartition(":")
            self.host, self.port = h.strip("[]"), int(p)
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                faulthook.start_failed(self, self.proc.returncode, "exited")
                pytest.fail(
                    "%s exited with %s at start-up; stderr:\n%s"
                    % (self.name, self.proc.returncode, self.stderr())
                )
            try:
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                if not WRAPPER or self._owns_listener():
                    return
            except OSError:
                pass
            time.sleep(0.02)
        faulthook.start_failed(self, None, "not accepting")
        self.proc.kill()
        pytest.fail("%s did not accept connections within %.0f s; stderr:\n%s" % (self.name, START_TIMEOUT, self.stderr()))

    def _owns_listener(self):
        """Whether the listening socket on our port is this process's. Under
        a slow wrapper the server takes long enough to bind that another
        program on this shared machine can take the port free_port() chose,
        and a connection would reach that one."""
        inodes = set()
        for name in ("tcp", "tcp6"):
            try:
                lines = Path("/proc/net/" + name).read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                f = line.split()
                if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == self.port:  # LISTEN
                    inodes.add("socket:[%s]" % f[9])
        try:
            fds = os.listdir("/proc/%d/fd" % self.proc.pid)
        except OSError:
            return False
        for fd in fds:
            try:
                if os.readlink("/proc/%d/fd/%s" % (self.proc.pid, fd)) in inodes:
                    return True
            except OSError:
                pass
        return False

    @property
    def url(self):
        h = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d" % ("https" if TEST_TLS else "http", h, self.port)

    @property
    def hostport(self):
        h = "[%s]" % self.host if ":" in self.host else self.host
        return "%s:%d" % (h, self.port)

    def conn(self, timeout=None):
        return RawConn(self.host, self.port, timeout)

    def stderr(self):
        self._err.flush()
        return self.stderr_path.read_bytes().decode("utf-8", "replace")

    def send_signal(self, sig=signal.SIGTERM):
        faulthook.signalled(self, sig)
        self.proc.send_signal(sig)

    def wait(self, timeout=STOP_TIMEOUT):
        """Wait for exit; returns the exit code or None if still running."""
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.returncode

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        if self.proc.poll() is None:
            self.send_signal(sig)
        rc = self.wait(timeout)
        if rc is None:
            self.proc.kill()
            self.proc.wait(5)
        return rc

    def sanitizer_report(self):
        data = self.stderr_path.read_bytes()
        m = SANITIZER_RE.search(data)
        if m:
            return data[max(0, m.start() - 200) : m.start() + 4000].decode("utf-8", "replace")
        if self.wrapper_log.exists():
            data = self.wrapper_log.read_bytes()
            if WRAPPER_RE.search(data):
                return "(the wrapper's log, %s)\n%s" % (self.wrapper_log, data[-12000:].decode("utf-8", "replace"))
        return None

    def close_files(self):
        self._err.close()
        self._out.close()


@pytest.fixture
def make_server(tmp_path):
    servers = []

    def make(site=None, args=(), host="127.0.0.1", **overrides):
        s = Server(tmp_path, "colibri%d" % len(servers), overrides, site, args, host)
        servers.append(s)
        return s

    yield make
    stop_all(servers)


def stop_all(servers):
    """Teardown of a fixture's servers (Server or a subclass): SIGTERM to each
    still running, which must exit 0 within STOP_TIMEOUT; none may have died
    on its own with another status or left a sanitizer report."""
    problems = []
    for s in servers:
        faulthook.check(s, STOP_TIMEOUT)  # only with FAULT_LIB (tests/fault)
        was_running = s.proc.poll() is None
        rc = s.stop()
        if was_running and rc != 0:
            problems.append(
                "SIGTERM: %s exited with %r (None = not within %.0f s), want 0; stderr:\n%s"
                % (s.name, rc, STOP_TIMEOUT, s.stderr()[-3000:])
            )
        elif not was_running and s.proc.returncode not in (0,) and s.returncode is None:
            problems.append("%s died during the test with %r; stderr:\n%s" % (s.name, s.proc.returncode, s.stderr()[-3000:]))
        rep = s.sanitizer_report()
        if rep:
            problems.append("sanitizer report in %s stderr:\n" % s.name + rep)
        s.close_files()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def server(make_server):
    return make_server()


def ipv6_available():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False
