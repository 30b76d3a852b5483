"""Many connections at once, several threads of clients."""

import resource
import selectors
import socket
import threading
import time

import pytest
import requests

from rawhttp import parse_head


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        new = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_1000_concurrent_connections(make_server, accept):
    server = make_server(accept=accept)
    n = 1000
    assert raise_nofile(n + 200) >= n + 100, "cannot raise RLIMIT_NOFILE"
    deadline = time.monotonic() + 30
    socks = []
    sel = selectors.DefaultSelector()
    try:
        for i in range(n):
            s = socket.create_connection((server.host, server.port), timeout=5)
            socks.append(s)
        # All 1000 are open at the same time before any request is sent.
        for i, s in enumerate(socks):
            s.sendall(b"GET /hello?name=c%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % i)
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, i)
        got = {i: b"" for i in range(n)}
        done = set()
        while len(done) < n:
            left = deadline - time.monotonic()
            assert left > 0, "only %d of %d responses complete within 30 s" % (len(done), n)
            for key, _ in sel.select(min(left, 1.0)):
                i = key.data
                try:
                    chunk = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    chunk = b""
                if chunk:
                    got[i] += chunk
                else:
                    done.add(i)
                    sel.unregister(key.fileobj)
        for i in range(n):
            head, sep, body = got[i].partition(b"\r\n\r\n")
            assert sep, "connection %d: incomplete response %r" % (i, got[i][:200])
            _, status, _, headers = parse_head(head)
            assert status == 200, (i, got[i][:200])
            assert body == b"Hello, c%d!" % i, (i, body)
    finally:
        sel.close()
        for s in socks:
            s.close()


def test_threads_of_keep_alive_clients(server):
    errors = []

    def client(t):
        try:
            with requests.Session() as sess:
                for i in range(50):
                    r = sess.get(server.url + "/hello?name=t%d-%d" % (t, i), timeout=10)
                    if r.status_code != 200 or r.text != "Hello, t%d-%d!" % (t, i):
                        errors.append((t, i, r.status_code, r.text))
                    r = sess.post(server.url + "/echo", data=b"x%d" % i * 100, timeout=10)
                    if r.content != b"x%d" % i * 100:
                        errors.append((t, i, "echo", r.status_code))
                    r = sess.get(server.url + "/file.txt", timeout=10)
                    if r.status_code != 200:
                        errors.append((t, i, "file", r.status_code))
        except Exception as e:  # reported below with the thread number
            errors.append((t, repr(e)))

    threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "client threads hung"
    assert not errors, errors[:10]


def test_connection_churn(server):
    """Open and drop connections in every state; the server keeps serving."""
    for i in range(300):
        s = socket.create_connection((server.host, server.port), timeout=5)
        if i % 3 == 0:
            s.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        elif i % 3 == 1:
            s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")  # close before reading it all
            s.recv(100)
        s.close()
    r = requests.get(server.url + "/hello", timeout=5)
    assert r.status_code == 200 and r.text == "Hello, World!"


@pytest.mark.parametrize("threads", ["0", "1", "4"])
def test_thread_counts(make_server, threads):
    """Any worker count works, including one per CPU (0) on this machine."""
    s = make_server(threads=threads)
    socks = [socket.create_connection((s.host, s.port), timeout=5) for _ in range(200)]
    try:
        for i, c in enumerate(socks):
            c.sendall(b"GET /hello?name=%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % i)
        for i, c in enumerate(socks):
            data = b""
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                chunk = c.recv(65536)
                if not chunk:
                    break
                data += chunk
            assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"Hello, %d!" % i), data[:200]
    finally:
        for c in socks:
            c.close()
