"""The HTTP/1.1 suite's subjects over HTTP/2 (issue 19, Conformance): files,
conditions, ranges, SSE, uploads, forms and reload, each run twice
(parametrised): h2c with prior knowledge on a plain listener, and h2 by
ALPN on a TLS one, with real HTTP/2 clients (curl --http2-prior-knowledge /
--http2, the Python h2 library). Every exchange is compared with the same
request over HTTP/1.1 on the same listener: the status, the body and the
representation's fields must be the same (WebSockets over h2 are in
test_h2_websocket.py)."""

import hashlib
import os
import re
import socket
import ssl
import subprocess
import time
from types import SimpleNamespace

import h2.config
import h2.connection
import pytest

from conftest import free_port
from rawhttp import TIME_SCALE
from test_http2 import H2
from test_modules import greet_so  # noqa: F401 (the session fixture)
from test_reload import reload

# the representation's fields, which HTTP/2 must carry as HTTP/1.1 does
FIELDS = ("content-type", "content-length", "etag", "last-modified", "accept-ranges", "content-range",
          "cache-control", "vary", "content-encoding")

SITE = """listener 127.0.0.1:%(tls_port)d {
    tls = true
}
module %(so)s
site {
    tls_certificate = %(base)s/suite-h2.pem
    tls_key = %(base)s/suite-h2.key
    handler /hello hello_world
    handler /echo echo
    handler /sse sse_ticks
    handler /form form
    handler /upload upload
    serve_files / {
        path = %(root)s
        index = index.html
    }
}
"""


@pytest.fixture(params=[pytest.param("h2c", marks=pytest.mark.plain_only("h2c: prior knowledge on a plain listener")),
                        "h2tls"])
def env(request, make_server, tmp_path, greet_so):  # noqa: F811
    """A server with a plain listener and a TLS one; .url, .curl_h2 and
    .connect() for the mode under test."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(tmp_path / "suite-h2.key"), "-out", str(tmp_path / "suite-h2.pem"), "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    tls_port = free_port()
    srv = make_server(site=SITE % {"tls_port": tls_port, "so": greet_so, "base": tmp_path,
                                   "root": tmp_path / "wwwroot"},
                      max_request_body="16M", temp_dir=str(uploads), multipart_memory_max="64k", threads="1")
    if request.param == "h2c":
        return SimpleNamespace(mode="h2c", srv=srv, url="http://127.0.0.1:%d" % srv.port, h2=["--http2-prior-knowledge"],
                               port=srv.port, tls=False)
    return SimpleNamespace(mode="h2tls", srv=srv, url="https://localhost:%d" % tls_port, h2=["--http2"],
                           port=tls_port, tls=True)


def fetch(env, version, path, *args, timeout=20):
    """One request by curl over HTTP/2 (version "2") or HTTP/1.1 ("1.1"):
    the status, the last head's fields (lower-case names) and the body."""
    out, hdr = env.srv.base / "curl.body", env.srv.base / "curl.head"
    flags = env.h2 if version == "2" else ["--http1.1"]
    for f in (out, hdr):  # curl leaves an earlier body in place when there is none
        f.unlink(missing_ok=True)
    p = subprocess.run(["curl", "-sSk", "--max-time", str(int(timeout * TIME_SCALE)), *flags, "-D", str(hdr),
                        "-o", str(out), "-w", "%{http_version}", *args, env.url + path],
                       capture_output=True, timeout=timeout * TIME_SCALE + 5)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode() == version, (version, p.stdout)  # the protocol really used
    heads = [h for h in hdr.read_bytes().decode("latin-1").split("\r\n\r\n") if h.strip()]
    lines = heads[-1].split("\r\n")
    fields = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        fields[k.strip().lower()] = v.strip()
    body = out.read_bytes() if out.exists() else b""
    if "-I" in args:  # HEAD: curl writes the head to -o too
        body = body.replace(hdr.read_bytes(), b"", 1)
    return SimpleNamespace(status=int(lines[0].split()[1]), fields=fields, body=body)


def both(env, path, *args, **kw):
    """The request over HTTP/2 and over HTTP/1.1; asserts the two agree
    (status, body, representation fields); returns the HTTP/2 one."""
    r2 = fetch(env, "2", path, *args, **kw)
    r1 = fetch(env, "1.1", path, *args, **kw)
    b1, b2 = r1.body, r2.body
    ct1, ct2 = r1.fields.get("content-type", ""), r2.fields.get("content-type", "")
    if ct1.startswith("multipart/byteranges"):  # each answer has its own boundary
        m1, m2 = re.search(r"boundary=(\S+)", ct1), re.search(r"boundary=(\S+)", ct2)
        assert m2, ct2
        b1 = b1.replace(m1.group(1).encode(), b"BOUNDARY")
        b2 = b2.replace(m2.group(1).encode(), b"BOUNDARY")
        ct1, ct2 = ct1.replace(m1.group(1), "BOUNDARY"), ct2.replace(m2.group(1), "BOUNDARY")
    assert r2.status == r1.status, (path, args, r1.status, r2.status)
    assert b2 == b1, (path, args, len(b1), len(b2))
    assert ct2 == ct1
    for k in FIELDS[1:]:
        assert r2.fields.get(k) == r1.fields.get(k), (path, args, k, r1.fields, r2.fields)
    for k in ("connection", "keep-alive", "transfer-encoding"):
        assert k not in r2.fields, r2.fields
    return r2


class H2Conn(H2):
    """test_http2's h2 library client, also over TLS (ALPN h2)."""

    def __init__(self, env, timeout=10):
        if not env.tls:
            super().__init__(env.srv, timeout)
            self.port = env.port
            return
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", env.port), timeout=timeout * TIME_SCALE)
        self.sock = ctx.wrap_socket(raw, server_hostname="localhost")
        assert self.sock.selected_alpn_protocol() == "h2"
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.authority = "localhost:%d" % env.port
        self.streams, self.goaway, self.closed = {}, None, False

    def get(self, path):
        (r,) = self.wait(self.request(path))
        return r


def test_files(env):
    for path in ("/file.txt", "/", "/sub/", "/sub/data.bin", "/big.bin", "/nosuch.txt"):
        r = both(env, path)
        assert r.status == (404 if path == "/nosuch.txt" else 200), path
    r = both(env, "/big.bin")
    assert r.body == (env.srv.root / "big.bin").read_bytes()
    assert r.fields["content-length"] == str(300 * 1024) and r.fields["etag"] and r.fields["last-modified"]
    assert both(env, "/file.txt").fields["content-type"].startswith("text/plain")
    r = both(env, "/file.txt", "-I")  # HEAD
    assert r.status == 200 and r.body == b"" and r.fields["content-length"] == "18"


def test_conditions(env):
    first = both(env, "/file.txt")
    etag, lm = first.fields["etag"], first.fields["last-modified"]
    cases = [
        (["-H", "If-None-Match: " + etag], 304),
        (["-H", 'If-None-Match: "other"'], 200),
        (["-H", "If-Modified-Since: " + lm], 304),
        (["-H", "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT"], 200),
        (["-H", "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT"], 412),
        (["-H", "If-Unmodified-Since: " + lm], 200),
        (["-H", "If-Match: " + etag], 200),
        (["-H", 'If-Match: "other"'], 412),
        (["-H", "If-Range: " + etag, "-H", "Range: bytes=0-4"], 206),
        (["-H", 'If-Range: "stale"', "-H", "Range: bytes=0-4"], 200),
        (["-H", "If-Range: " + lm, "-H", "Range: bytes=6-9"], 206),
    ]
    for args, status in cases:
        r = both(env, "/file.txt", *args)
        assert r.status == status, (args, r.status, r.fields)
        if status == 304:
            assert r.body == b"" and r.fields["etag"] == etag
    assert both(env, "/file.txt", "-H", "If-Range: " + etag, "-H", "Range: bytes=0-4").body == b"hello"


def test_ranges(env):
    data = (env.srv.root / "big.bin").read_bytes()
    r = both(env, "/big.bin", "-H", "Range: bytes=1000-1999")
    assert r.status == 206 and r.body == data[1000:2000]
    assert r.fields["content-range"] == "bytes 1000-1999/%d" % len(data)
    r = both(env, "/big.bin", "-H", "Range: bytes=-100")
    assert r.status == 206 and r.body == data[-100:]
    r = both(env, "/file.txt", "-H", "Range: bytes=0-1,6-9,-2")
    assert r.status == 206 and r.fields["content-type"].startswith("multipart/byteranges; boundary=")
    for part in (b"Content-Range: bytes 0-1/18\r\n\r\nhe", b"Content-Range: bytes 6-9/18\r\n\r\nfrom",
                 b"Content-Range: bytes 16-17/18\r\n\r\ne\n"):
        assert part in r.body, r.body
    r = both(env, "/file.txt", "-H", "Range: bytes=100-")
    assert r.status == 416 and r.fields["content-range"] == "bytes */18"


def test_sse_arrives_incrementally(env):
    c = H2Conn(env)
    t0 = time.monotonic()
    s = c.request("/sse?count=3&interval=500")
    c.pump(lambda: b"data: 1" in c.streams[s]["data"])
    t_first = time.monotonic()
    assert not c.streams[s]["ended"]  # the first event came before the stream's end
    (r,) = c.wait(s)
    # two 500 ms waits after the first event: it came at once, not with the rest
    assert r["t_end"] - t_first >= 0.5, (t0, t_first, r["t_end"])
    assert r["headers"][":status"] == "200" and r["headers"]["content-type"] == "text/event-stream"
    h1 = fetch(env, "1.1", "/sse?count=3&interval=0", "-N")
    assert bytes(r["data"]) == h1.body and h1.body.count(b"event: tick") == 3
    h2r = fetch(env, "2", "/sse?count=3&interval=0", "-N")
    assert h2r.body == h1.body and h2r.fields["cache-control"] == "no-cache"
    c.close()


def test_uploads(env, tmp_path):
    big = tmp_path / "up.bin"
    data = os.urandom(5 << 20)  # 5 MiB: many windows' worth
    big.write_bytes(data)
    r = both(env, "/echo", "--data-binary", "@%s" % big, "-H", "Content-Type: application/octet-stream", timeout=40)
    assert r.status == 200 and hashlib.sha256(r.body).digest() == hashlib.sha256(data).digest()
    small = tmp_path / "part.bin"
    small.write_bytes(os.urandom(200 * 1024))  # beyond multipart_memory_max: a temporary file
    r2 = fetch(env, "2", "/upload", "-F", "title=Hello", "-F", "f=@%s;type=application/octet-stream" % small)
    r1 = fetch(env, "1.1", "/upload", "-F", "title=Hello", "-F", "f=@%s;type=application/octet-stream" % small)
    assert r2.status == r1.status == 200
    assert r2.body == r1.body, (r1.body, r2.body)
    lines = r2.body.decode().splitlines()
    assert lines[0].startswith("name=title filename=- ") and "size=5 " in lines[0] and "in=memory" in lines[0]
    assert lines[1].startswith("name=f filename=part.bin type=application/octet-stream size=%d " % (200 * 1024))
    assert "in=file" in lines[1] and lines[2] == "end"
    # over max_request_body: 413 on both (the h2 client: curl takes the
    # RST_STREAM after the answer as an error)
    c = H2Conn(env)
    (r,) = c.wait(c.request("/echo", method="POST", end=False, headers=[("content-length", str(17 << 20))]))
    assert r["headers"][":status"] == "413"
    assert fetch(env, "1.1", "/echo", "-H", "Content-Length: %d" % (17 << 20), "-H", "Expect:", "--data-binary", "x").status == 413
    c.close()


def test_forms(env):
    args = ["--data-urlencode", "name=Ada Lovelace", "--data-urlencode", "note=1+1=2 & more"]
    r = both(env, "/form", *args)
    assert r.status == 200 and r.body == b"name=[Ada Lovelace] note=[1+1=2 & more]", r.body
    r = both(env, "/form?name=Q", "-G", "--data-urlencode", "note=x y")
    assert r.status == fetch(env, "1.1", "/form?name=Q", "-G", "--data-urlencode", "note=x y").status


def test_reload_on_an_open_connection(env):
    c = H2Conn(env)
    assert c.get("/new")["headers"][":status"] == "404"
    sse = c.request("/sse?count=3&interval=300")
    c.pump(lambda: len(c.streams[sse]["data"]) > 0)
    srv = env.srv
    reload(srv, srv.config.read_text().replace("handler /hello hello_world",
                                              "handler /hello hello_world\n    handler /new hello_world"))
    r = c.get("/new")  # a new stream on the connection opened before the reload
    assert r["headers"][":status"] == "200" and bytes(r["data"]) == b"Hello, World!"
    assert not c.closed and c.goaway is None
    (r,) = c.wait(sse)  # the stream in flight ended on the old config
    assert r["ended"] and bytes(r["data"]).count(b"event: tick") == 3
    assert both(env, "/new").body == b"Hello, World!"
    c.close()
