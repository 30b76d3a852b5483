"""The black-box suite's side of fault injection (tests/fault/run.py).

Inert unless FAULT_LIB names tests/fault's LD_PRELOAD library. Then every
server a test starts gets the library (and nothing else the tests run does),
and at teardown each one still running is checked, whatever the test itself
concluded:

- the fault is lifted (FAULT_CTL's first byte) and a plain GET /hello must
  get an HTTP answer within PROBE_TIMEOUT (any status: the route may not
  exist in that test's config);
- its open fds (/proc/PID/fd) must come back to what the same test's server
  held in the fault-free record run (FAULT_BASELINE), type by type. A file
  of the test's directory held beyond that is touched once (utime): the file
  cache drops an entry whose file changed (inotify), so an fd only the cache
  held is closed, and one that was leaked stays. Whether the cache still
  holds a file a test wrote while its server ran depends on when the server
  read the file's inotify events, in the record run as in the fault run;
- SIGTERM must end it with 0 within the fixture's STOP_TIMEOUT.

One JSON line per server goes to FAULT_REPORT. In record mode (FAULT_RECORD_DIR
set) the fd lists written there are the baseline."""

import collections
import json
import os
import re
import signal
import socket
import time
import uuid

PROBE_TIMEOUT = 5.0
SETTLE_TIMEOUT = 5.0

LIB = os.environ.get("FAULT_LIB")


def enabled():
    return bool(LIB)


def test_id():
    return re.sub(r" \((setup|call|teardown)\)$", "", os.environ.get("PYTEST_CURRENT_TEST", "?"))


def server_env(env, base, name):
    """The environment of a server about to start (the library, its control
    file, where its sites are recorded)."""
    if not LIB:
        return env
    env = dict(env)
    # after a library the test preloads itself (libfaketime, whose start-up
    # opens files: with ours first, its open() would reach our wrapper
    # before our constructor has looked up the real one)
    env["LD_PRELOAD"] = (env.get("LD_PRELOAD", "") + " " + LIB).strip()
    ctl = base / ("%s.faultctl" % name)
    ctl.write_bytes(b"1" + b"\0" * 63)
    env["FAULT_CTL"] = str(ctl)
    rec = os.environ.get("FAULT_RECORD_DIR")
    if rec:
        env["FAULT_RECORD"] = os.path.join(rec, "%s.sites" % uuid.uuid4().hex)
    return env


def _report(line):
    path = os.environ.get("FAULT_REPORT")
    if path:
        line["test"] = test_id()
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")


def _injected(server):
    try:
        data = (server.base / ("%s.faultctl" % server.name)).read_bytes()
        return int.from_bytes(data[8:16], "little")
    except OSError:
        return -1


def _tcp_table():
    """inode -> (local, remote) of every TCP socket on the machine."""
    table = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    col = line.split()
                    table[col[9]] = (col[1], col[2])
        except OSError:
            pass
    return table


def _own_sockets():
    """Inodes of the sockets this process (the tests) holds open."""
    out = set()
    for n in os.listdir("/proc/self/fd"):
        try:
            m = re.match(r"socket:\[(\d+)\]$", os.readlink("/proc/self/fd/" + n))
        except OSError:
            continue
        if m:
            out.add(m.group(1))
    return out


def _fds(server):
    """The server's fds by kind: 'socket', 'pipe', anon inodes, and paths
    with the test's directory replaced by BASE (it differs between runs).
    A connection whose other end the tests still hold open (a failed
    test's traceback keeps its client alive) is 'socket (client open)' and
    is no leak of the server's."""
    out = collections.Counter()
    tcp = _tcp_table()
    ours = {tcp[i][0] for i in _own_sockets() if i in tcp}
    d = "/proc/%d/fd" % server.proc.pid
    try:
        names = os.listdir(d)
    except OSError:
        return None
    for n in names:
        try:
            t = os.readlink(os.path.join(d, n))
        except OSError:
            continue
        m = re.match(r"^socket:\[(\d+)\]$", t)
        if m and m.group(1) in tcp and tcp[m.group(1)][1] in ours:
            t = "socket (client open)"
        t = re.sub(r"^(socket|pipe):\[\d+\]$", r"\1", t)
        t = t.replace(str(server.base), "BASE")
        out[t] += 1
    return out


def _hexaddr(a):
    """'0100007F:1F90' (/proc/net/tcp) as '127.0.0.1:8080' (IPv4 only)."""
    ip, port = a.split(":")
    if len(ip) == 8:
        ip = ".".join(str(int(ip[i : i + 2], 16)) for i in (6, 4, 2, 0))
    return "%s:%d" % (ip, int(port, 16))


def _sockets(server):
    """What the server's sockets connect: 'local -> remote' for TCP, else
    the link's text; to tell a leaked client connection from a kept
    upstream one when the fd count is over the baseline."""
    tcp = _tcp_table()
    d = "/proc/%d/fd" % server.proc.pid
    out = []
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for n in names:
        try:
            t = os.readlink(os.path.join(d, n))
        except OSError:
            continue
        m = re.match(r"^socket:\[(\d+)\]$", t)
        if m and m.group(1) in tcp:
            loc, rem = tcp[m.group(1)]
            out.append("%s: %s -> %s" % (n, _hexaddr(loc), _hexaddr(rem)))
        elif m:
            out.append("%s: %s (not TCP)" % (n, t))
    return sorted(out)


def _baseline():
    path = os.environ.get("FAULT_BASELINE")
    table = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("fds") is not None:
                    table[(r["test"], r["server"])] = collections.Counter(r["fds"])
    return table


_BASE = None


def _excess(now, base):
    return {
        k: v - base.get(k, 0)
        for k, v in now.items()
        if v > base.get(k, 0) and k != "socket (client open)" and not k.endswith(".sites")
    }


def _touch_held(server, excess):
    """Touch the regular files of the test's directory among excess (keys
    'BASE/...'); their keys, sorted."""
    out = []
    for k in excess:
        if not k.startswith("BASE/"):
            continue
        path = server.base / k[len("BASE/"):]
        try:
            if path.is_file() and not path.is_symlink():
                os.utime(path)
                out.append(k)
        except OSError:
            pass
    return sorted(out)


def _probe(server):
    try:
        with socket.create_connection((server.host, server.port), timeout=PROBE_TIMEOUT) as s:
            s.settimeout(PROBE_TIMEOUT)
            s.sendall(b"GET /hello HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            data = b""
            deadline = time.monotonic() + PROBE_TIMEOUT
            while len(data) < 9 and time.monotonic() < deadline:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            return "ok" if data.startswith(b"HTTP/1.1 ") else "bad answer %r" % data[:40]
    except OSError as e:
        return "no answer: %s" % e


def signalled(server, sig):
    if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
        server.stop_signalled = True


def start_failed(server, rc, why):
    if LIB:
        _report(
            {
                "server": server.name,
                "phase": "start",
                "rc": rc,
                "why": why,
                "injected": _injected(server),
                "stderr": server.stderr()[-600:],
            }
        )


def check(server, stop_timeout):
    """At teardown, before the fixture stops the server."""
    global _BASE
    if not LIB:
        return
    was_running = server.proc.poll() is None
    line = {"server": server.name, "phase": "teardown", "was_running": was_running}
    if was_running and getattr(server, "stop_signalled", False):
        # the test told it to stop (and failed before it saw it exit):
        # it stops, and is judged by how
        line["probe"] = "ok"
        line["injected"] = _injected(server)
        rc = server.stop(timeout=stop_timeout)
    elif was_running:
        try:
            with open(server.base / ("%s.faultctl" % server.name), "r+b") as f:
                f.write(b"0")
        except OSError:
            pass
        line["probe"] = _probe(server)
        # let the server see the test's closes, then compare
        record = bool(os.environ.get("FAULT_RECORD_DIR"))
        if _BASE is None:
            _BASE = _baseline()
        base = _BASE.get((test_id(), server.name))
        deadline = time.monotonic() + SETTLE_TIMEOUT
        prev, stable_since = None, time.monotonic()
        touched = None
        while True:
            now = _fds(server)
            if now is None:
                break
            if record or base is None:
                if now != prev:
                    prev, stable_since = now, time.monotonic()
                elif time.monotonic() - stable_since > 0.1:
                    break
            else:
                excess = _excess(now, base)
                if not excess:
                    break
                if touched is None:
                    touched = _touch_held(server, excess)
            if time.monotonic() > deadline - (SETTLE_TIMEOUT - 1.0 if record or base is None else 0):
                break
            time.sleep(0.05)
        line["fds"] = dict(now) if now is not None else None
        if touched:
            line["touched"] = touched
        if base is not None and now is not None:
            line["excess_fds"] = _excess(now, base)
            if line["excess_fds"]:
                line["sockets"] = _sockets(server)
        line["injected"] = _injected(server)
        rc = server.stop(timeout=stop_timeout)
    else:
        line["injected"] = _injected(server)
        rc = server.proc.returncode
    line["rc"] = rc
    if rc not in (0, None) or not was_running:
        line["stderr"] = server.stderr()[-600:]
    _report(line)
