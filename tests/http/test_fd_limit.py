"""Out of file descriptors: connections beyond the limit are refused (closed),
the server does not spin the CPU while they wait, and it serves again as
soon as descriptors free up."""

import resource
import signal
import socket
import subprocess
import time

from conftest import colibri_bin, free_port
from rawhttp import request

LIMIT = 48  # the server's whole fd budget, hard and soft


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, clock ticks


def test_emfile_does_not_spin_and_recovers(tmp_path):
    port = free_port()
    conf = tmp_path / "c.conf"
    conf.write_text("listener 127.0.0.1:%d\nthreads = 1\nsite {\n    handler /hello hello_world\n}\n" % port)

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))

    p = subprocess.Popen([str(colibri_bin()), "-c", str(conf)], preexec_fn=low_limit,
                         stderr=subprocess.PIPE)
    held = []
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "colibri did not start"
                time.sleep(0.05)

        # Keep-alive connections with a request each, until one is not
        # answered: the server is then at its limit.
        answered = refused = 0
        waiting = []
        for _ in range(2 * LIMIT):
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(request("GET", "/hello"))
            try:
                data = s.recv(4096)
            except (ConnectionResetError, socket.timeout):
                data = b""
            if data.startswith(b"HTTP/1.1 200"):
                answered += 1
                held.append(s)
                continue
            refused += 1
            waiting.append(s)  # still queued if the server did not close it
            break
        assert refused == 1, "every connection was answered: the limit did not bite"
        assert answered > LIMIT // 2, answered

        # More connections arrive while fds are short. They must be refused
        # (closed) promptly, and the server must sleep, not spin on a
        # listening socket that stays readable.
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(request("GET", "/hello"))
            waiting.append(s)
        before = cpu_seconds(p.pid)
        time.sleep(1.0)
        used = cpu_seconds(p.pid) - before
        assert used < 0.3, "colibri used %.2f s of CPU in 1 s while out of fds" % used
        for s in waiting:
            s.settimeout(2)
            try:
                assert s.recv(4096) == b"", "a connection over the limit was answered"
            except ConnectionResetError:
                pass
            s.close()

        # Free the descriptors: the server serves again.
        for s in held:
            s.close()
        held = []
        deadline = time.monotonic() + 5
        while True:
            s = socket.create_connection(("127.0.0.1", port), timeout=3)
            s.sendall(request("GET", "/hello"))
            try:
                ok = s.recv(4096).startswith(b"HTTP/1.1 200")
            except (ConnectionResetError, socket.timeout):
                ok = False
            s.close()
            if ok:
                break
            assert time.monotonic() < deadline, "colibri did not recover after fds were freed"
            time.sleep(0.1)
        assert p.poll() is None
    finally:
        for s in held:
            s.close()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(10)
        err = p.stderr.read().decode("utf-8", "replace")
    assert rc == 0, err
    assert "Sanitizer" not in err and "runtime error" not in err, err
    # the error log says so, rate-limited: a few lines, not one per refusal
    lines = [l for l in err.splitlines() if "out of file descriptors" in l]
    assert lines and all("[error] accept() failed: Too many open files" in l for l in lines), err
    assert len(lines) <= 10, err
