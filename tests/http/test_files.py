"""serve_files: types, validators, conditional requests, ranges, HEAD and
methods, directories and listings, the cache and changes on disk."""

import os
import re
import socket
import time
import email.utils

import pytest

from fileshelp import fetch, files_site, http_date, parse_multipart
from rawhttp import request

ETAG_RE = re.compile(r'^"[!#-~]+"$')  # strong: no W/, quoted


def text(n, seed=0):
    """n bytes of compressible text."""
    words = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta", b"eta", b"theta"]
    out = bytearray()
    i = seed
    while len(out) < n:
        out += words[(i * 7 + i // 3) % len(words)] + (b"\n" if i % 11 == 0 else b" ")
        i += 1
    return bytes(out[:n])


@pytest.fixture
def froot(tmp_path):
    r = tmp_path / "froot"
    (r / "sub").mkdir(parents=True)
    (r / "nolist").mkdir()
    (r / "page.html").write_bytes(b"<!doctype html><p>page</p>\n")
    (r / "style.css").write_bytes(b"body { color: red }\n")
    (r / "app.js").write_bytes(b"console.log(1)\n")
    (r / "data.json").write_bytes(b'{"a": 1}\n')
    (r / "img.png").write_bytes(os.urandom(700))
    (r / "UPPER.PNG").write_bytes(os.urandom(100))
    (r / "noext").write_bytes(b"no extension\n")
    (r / "archive.tar.gz").write_bytes(os.urandom(50))
    (r / "notes.txt").write_bytes(text(5000))
    (r / "empty.txt").write_bytes(b"")
    (r / "big.bin").write_bytes(os.urandom(300 * 1024))
    (r / "sub" / "index.html").write_bytes(b"<p>sub index</p>\n")
    (r / "sub" / "a.txt").write_bytes(b"a in sub\n")
    return r


@pytest.fixture
def fserver(make_server, froot):
    return make_server(site=files_site(froot, listing="false", cache_for="5s"))


def ctype(resp):
    return resp.header("Content-Type")


# ---- types and validators ------------------------------------------------------


@pytest.mark.parametrize(
    "name,want",
    [
        ("page.html", "text/html; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("app.js", "text/javascript; charset=utf-8"),
        ("notes.txt", "text/plain; charset=utf-8"),
        ("data.json", "application/json"),
        ("img.png", "image/png"),
        ("UPPER.PNG", "image/png"),
        ("noext", "application/octet-stream"),
        ("archive.tar.gz", "application/gzip"),
    ],
)
def test_content_type(fserver, name, want):
    r = fetch(fserver, "/" + name)
    assert r.status == 200
    assert ctype(r) == want


def test_charset_only_where_configured(make_server, froot):
    s = make_server(site=files_site(froot, charset_types='"text/css"'))
    assert ctype(fetch(s, "/page.html")) == "text/html"
    assert ctype(fetch(s, "/style.css")) == "text/css; charset=utf-8"
    s2 = make_server(site=files_site(froot, charset_types='""'))
    assert ctype(fetch(s2, "/notes.txt")) == "text/plain"


def test_last_modified_and_strong_etag(fserver, froot):
    for name in ("notes.txt", "big.bin", "empty.txt", "sub/"):
        r = fetch(fserver, "/" + name)
        assert r.status == 200, name
        etag = r.header("ETag")
        assert etag and ETAG_RE.match(etag), (name, etag)
        path = froot / (name + "index.html" if name.endswith("/") else name)
        assert r.header("Last-Modified") == http_date(int(path.stat().st_mtime)), name
    assert fetch(fserver, "/notes.txt").header("ETag") != fetch(fserver, "/page.html").header("ETag")


def test_body_and_length(fserver, froot):
    for name in ("notes.txt", "img.png", "big.bin", "empty.txt", "sub/a.txt"):
        r = fetch(fserver, "/" + name)
        assert r.status == 200
        assert r.body == (froot / name).read_bytes(), name
        assert r.header("Content-Length") == str(len(r.body))


def test_large_file_through_fd_path(make_server, froot):
    # a small threshold sends even a 5 KiB file with sendfile
    s = make_server(site=files_site(froot, small_file_max="1k"))
    for name in ("notes.txt", "big.bin", "img.png"):
        r = fetch(s, "/" + name)
        assert r.status == 200 and r.body == (froot / name).read_bytes(), name
    r = fetch(s, "/notes.txt", [("Range", "bytes=10-19")])
    assert r.status == 206 and r.body == (froot / "notes.txt").read_bytes()[10:20]


def test_memory_budget(make_server, froot):
    # nothing may stay in memory: small files go out from their fds, uncompressed
    s = make_server(site=files_site(froot, cache_memory="0"))
    for name in ("notes.txt", "img.png", "sub/a.txt", "empty.txt"):
        r = fetch(s, "/" + name, [("Accept-Encoding", "gzip")])
        assert r.status == 200 and r.body == (froot / name).read_bytes(), name
        assert r.header("Content-Encoding") is None
    r = fetch(s, "/notes.txt", [("Range", "bytes=1-3")])
    assert r.status == 206 and r.body == (froot / "notes.txt").read_bytes()[1:4]


# ---- conditional requests ---------------------------------------------------------


def test_if_none_match(fserver):
    r = fetch(fserver, "/notes.txt")
    etag, lm = r.header("ETag"), r.header("Last-Modified")
    for inm in (etag, "W/" + etag, '"nope", ' + etag, "*", ' "x" ,' + etag + " "):
        n = fetch(fserver, "/notes.txt", [("If-None-Match", inm)])
        assert n.status == 304, inm
        assert n.body == b""
        assert n.header("ETag") == etag
        assert n.header("Content-Length") is None
    for inm in ('"nope"', etag[:-2] + '"', "W/" + etag[:-1], "garbage"):
        assert fetch(fserver, "/notes.txt", [("If-None-Match", inm)]).status == 200, inm
    # If-None-Match wins over If-Modified-Since
    r = fetch(fserver, "/notes.txt", [("If-None-Match", '"nope"'), ("If-Modified-Since", lm)])
    assert r.status == 200 and r.body


def test_if_modified_since(fserver, froot):
    mtime = int((froot / "notes.txt").stat().st_mtime)
    assert fetch(fserver, "/notes.txt", [("If-Modified-Since", http_date(mtime))]).status == 304
    assert fetch(fserver, "/notes.txt", [("If-Modified-Since", http_date(mtime + 100))]).status == 304
    assert fetch(fserver, "/notes.txt", [("If-Modified-Since", http_date(mtime - 1))]).status == 200
    # the obsolete forms count too; garbage does not
    rfc850 = time.strftime("%A, %d-%b-%y %H:%M:%S GMT", time.gmtime(mtime))
    asctime = time.strftime("%a %b %e %H:%M:%S %Y", time.gmtime(mtime))
    assert fetch(fserver, "/notes.txt", [("If-Modified-Since", rfc850)]).status == 304
    assert fetch(fserver, "/notes.txt", [("If-Modified-Since", asctime)]).status == 304
    assert fetch(fserver, "/notes.txt", [("If-Modified-Since", "yesterday")]).status == 200
    big = fetch(fserver, "/big.bin", [("If-Modified-Since", http_date(mtime + 100))])
    assert big.status == 304 and big.body == b""


def test_if_match_and_unmodified_since(fserver, froot):
    etag = fetch(fserver, "/notes.txt").header("ETag")
    assert fetch(fserver, "/notes.txt", [("If-Match", etag)]).status == 200
    assert fetch(fserver, "/notes.txt", [("If-Match", "*")]).status == 200
    assert fetch(fserver, "/notes.txt", [("If-Match", '"other"')]).status == 412
    assert fetch(fserver, "/notes.txt", [("If-Match", "W/" + etag)]).status == 412  # strong
    mtime = int((froot / "notes.txt").stat().st_mtime)
    assert fetch(fserver, "/notes.txt", [("If-Unmodified-Since", http_date(mtime))]).status == 200
    assert fetch(fserver, "/notes.txt", [("If-Unmodified-Since", http_date(mtime - 10))]).status == 412


# ---- ranges --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["notes.txt", "big.bin"])
@pytest.mark.parametrize(
    "spec,sl",
    [
        ("bytes=0-0", slice(0, 1)),
        ("bytes=10-99", slice(10, 100)),
        ("bytes=-100", slice(-100, None)),
        ("bytes=4000-", slice(4000, None)),
        ("bytes=100-999999999", slice(100, None)),
        ("bytes=-999999999", slice(0, None)),
        ("BYTES=1-1", slice(1, 2)),
    ],
)
def test_single_range(fserver, froot, name, spec, sl):
    data = (froot / name).read_bytes()
    r = fetch(fserver, "/" + name, [("Range", spec)])
    assert r.status == 206, r
    want = data[sl]
    start = sl.start if sl.start is None or sl.start >= 0 else len(data) + sl.start
    start = start or 0
    assert r.body == want
    assert r.header("Content-Range") == "bytes %d-%d/%d" % (start, start + len(want) - 1, len(data))
    assert r.header("Content-Length") == str(len(want))
    assert r.header("ETag")


@pytest.mark.parametrize("name", ["notes.txt", "big.bin", "empty.txt"])
def test_unsatisfiable_range(fserver, froot, name):
    size = (froot / name).stat().st_size
    for spec in ("bytes=%d-" % size, "bytes=%d-%d" % (size + 5, size + 10), "bytes=-0"):
        r = fetch(fserver, "/" + name, [("Range", spec)])
        assert r.status == 416, (spec, r)
        assert r.header("Content-Range") == "bytes */%d" % size


def test_invalid_range_gives_whole(fserver, froot):
    data = (froot / "notes.txt").read_bytes()
    for spec in ("bytes=5-1", "bytes=abc", "items=0-5", "bytes=", "bytes=1-2;x", "bytes=-"):
        r = fetch(fserver, "/notes.txt", [("Range", spec)])
        assert r.status == 200 and r.body == data, spec


@pytest.mark.parametrize("name", ["notes.txt", "big.bin"])
def test_multiple_ranges(fserver, froot, name):
    data = (froot / name).read_bytes()
    n = len(data)
    r = fetch(fserver, "/" + name, [("Range", "bytes=0-9, 100-199, -5")])
    assert r.status == 206
    parts = parse_multipart(r)
    assert [p[0] for p in parts] == [
        "bytes 0-9/%d" % n,
        "bytes 100-199/%d" % n,
        "bytes %d-%d/%d" % (n - 5, n - 1, n),
    ]
    assert [p[2] for p in parts] == [data[0:10], data[100:200], data[-5:]]
    want_type = "text/plain; charset=utf-8" if name.endswith(".txt") else "application/octet-stream"
    assert all(p[1] == want_type for p in parts)
    assert int(r.header("Content-Length")) == len(r.body)
    # overlapping ranges are merged into one
    r = fetch(fserver, "/" + name, [("Range", "bytes=0-99,50-149")])
    assert r.status == 206 and r.body == data[0:150]
    assert r.header("Content-Range") == "bytes 0-149/%d" % n


def multipart_bytes(resp, parts, size, ctype):
    """The exact body of a multipart/byteranges answer with these parts."""
    b = re.match(r"multipart/byteranges; boundary=(\S+)$", resp.header("Content-Type")).group(1).encode()
    out = b""
    for first, data in parts:
        out += b"\r\n--%s\r\nContent-Type: %s\r\nContent-Range: bytes %d-%d/%d\r\n\r\n" % (
            b, ctype, first, first + len(data) - 1, size)
        out += data
    return out + b"\r\n--%s--\r\n" % b


@pytest.mark.parametrize("name", ["notes.txt", "big.bin"])
def test_multiple_ranges_exact_bytes_pipelined(fserver, froot, name):
    """Multi-range answers are sent part by part (small parts copied,
    large ones with sendfile or from the cached bytes): byte for byte the
    multipart body, pipelined answers one behind the other."""
    data = (froot / name).read_bytes()
    n = len(data)
    ctype = b"text/plain; charset=utf-8" if name.endswith(".txt") else b"application/octet-stream"
    specs = [
        ("bytes=0-0,2-%d" % (n - 2), [(0, data[0:1]), (2, data[2 : n - 1])]),
        ("bytes=5-10,1000-%d,-100" % (n - 200), [(5, data[5:11]), (1000, data[1000 : n - 199]), (n - 100, data[-100:])]),
        ("bytes=" + ",".join("%d-%d" % (i * 3, i * 3 + 1) for i in range(16)), [(i * 3, data[i * 3 : i * 3 + 2]) for i in range(16)]),
    ]
    with fserver.conn(timeout=10) as c:
        c.send(b"".join(request("GET", "/" + name, headers=[("Range", spec)]) for spec, _ in specs)
               + request("GET", "/" + name))
        for spec, parts in specs:
            r = c.read_response()
            assert r.status == 206, spec
            assert r.body == multipart_bytes(r, parts, n, ctype), spec
            assert int(r.header("Content-Length")) == len(r.body)
        r = c.read_response()
        assert (r.status, r.body) == (200, data)


def test_too_many_ranges_gives_whole(fserver, froot):
    data = (froot / "notes.txt").read_bytes()
    spec = "bytes=" + ",".join("%d-%d" % (i * 10, i * 10) for i in range(40))
    r = fetch(fserver, "/notes.txt", [("Range", spec)])
    assert r.status == 200 and r.body == data


def test_if_range(fserver, froot):
    data = (froot / "big.bin").read_bytes()
    first = fetch(fserver, "/big.bin")
    etag, lm = first.header("ETag"), first.header("Last-Modified")
    r = fetch(fserver, "/big.bin", [("Range", "bytes=0-3"), ("If-Range", etag)])
    assert r.status == 206 and r.body == data[:4]
    r = fetch(fserver, "/big.bin", [("Range", "bytes=0-3"), ("If-Range", lm)])
    assert r.status == 206 and r.body == data[:4]
    for ir in ('"other"', "W/" + etag, http_date(int(time.time()) - 86400 * 400)):
        r = fetch(fserver, "/big.bin", [("Range", "bytes=0-3"), ("If-Range", ir)])
        assert r.status == 200 and r.body == data, ir


def test_open_range_at_every_offset_of_large_file(fserver, froot):
    # "bytes=N-" on the sendfile path ends (a peer server looped forever)
    data = (froot / "big.bin").read_bytes()
    with fserver.conn(timeout=10) as c:
        for off in (0, 1, 4095, 65536, len(data) - 1):
            c.send(request("GET", "/big.bin", headers=[("Range", "bytes=%d-" % off)]))
            r = c.read_response()
            assert r.status == 206 and r.body == data[off:], off


# ---- HEAD and methods -----------------------------------------------------------------


@pytest.mark.parametrize("target", ["/notes.txt", "/big.bin", "/sub/", "/empty.txt"])
def test_head_same_headers_as_get(fserver, target):
    g = fetch(fserver, target)
    with fserver.conn() as c:
        c.send(request("HEAD", target) + request("GET", "/hello"))
        h = c.read_response(head_request=True)
        after = c.read_response()
    assert after.body == b"Hello, World!"  # no stray body bytes before it
    assert h.status == g.status == 200
    skip = {"date"}
    assert [(k, v) for k, v in h.headers if k.lower() not in skip] == [
        (k, v) for k, v in g.headers if k.lower() not in skip
    ]


def test_head_range_and_conditional(fserver):
    etag = fetch(fserver, "/notes.txt").header("ETag")
    h = fetch(fserver, "/notes.txt", [("If-None-Match", etag)], method="HEAD")
    assert h.status == 304
    h = fetch(fserver, "/big.bin", [("Range", "bytes=0-9")], method="HEAD")
    assert h.status in (200, 206)
    if h.status == 206:
        assert h.header("Content-Length") == "10"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_other_methods_405(fserver, method):
    with fserver.conn() as c:
        c.send(request(method, "/notes.txt", body=b"x"))
        r = c.read_response()
    assert r.status == 405
    allow = [t.strip() for t in (r.header("Allow") or "").split(",")]
    assert "GET" in allow and "HEAD" in allow


# ---- directories --------------------------------------------------------------------------


def test_dir_redirect_keeps_query(fserver):
    r = fetch(fserver, "/sub?x=1&y=%20z")
    assert r.status == 301
    assert r.header("Location") == "/sub/?x=1&y=%20z"
    r = fetch(fserver, "/sub")
    assert r.status == 301 and r.header("Location") == "/sub/"


def test_dir_redirect_keeps_encoding(make_server, froot):
    (froot / "a b").mkdir()
    (froot / "a b" / "index.html").write_bytes(b"spaced\n")
    s = make_server(site=files_site(froot))
    r = fetch(s, "/a%20b")
    assert r.status == 301 and r.header("Location") == "/a%20b/"
    assert fetch(s, "/a%20b/").body == b"spaced\n"


def test_directory_redirect_is_never_protocol_relative(server):
    # "//evil.example/%2e%2e/sub" normalises to "/sub": the Location must be
    # built from that, not from the raw target.
    with server.conn() as c:
        c.send(b"GET //evil.example/%2e%2e/sub?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
        r = c.read_response()
    assert r.status == 301
    loc = dict((k.lower(), v) for k, v in r.headers)["location"]
    assert loc == "/sub/?x=1", loc


def test_directory_redirect_reencodes_the_path(server):
    os.mkdir(server.base / "wwwroot" / "a b%")
    with server.conn() as c:
        c.send(b"GET /a%20b%25 HTTP/1.1\r\nHost: a\r\n\r\n")
        r = c.read_response()
    assert r.status == 301
    assert dict((k.lower(), v) for k, v in r.headers)["location"] == "/a%20b%25/"


def test_index_and_no_listing(fserver):
    r = fetch(fserver, "/sub/")
    assert r.status == 200 and r.body == b"<p>sub index</p>\n"
    assert ctype(r) == "text/html; charset=utf-8"
    assert fetch(fserver, "/nolist/").status == 403
    assert fetch(fserver, "/notes.txt/").status == 404


def test_custom_index(make_server, froot):
    (froot / "sub" / "home.htm").write_bytes(b"home\n")
    s = make_server(site=files_site(froot, index="home.htm"))
    r = fetch(s, "/sub/")
    assert r.status == 200 and r.body == b"home\n"


def test_prefix_mount(make_server, froot):
    site = (
        "site {\n    serve_files /static {\n        path = %s\n    }\n"
        "    handler /staticky hello_world\n}\n" % froot
    )
    s = make_server(site=site)
    assert fetch(s, "/static/notes.txt").body == (froot / "notes.txt").read_bytes()
    r = fetch(s, "/static")
    assert r.status == 301 and r.header("Location") == "/static/"
    assert fetch(s, "/static/sub/").status == 200
    assert fetch(s, "/staticx/notes.txt").status == 404  # not below /static
    assert fetch(s, "/staticky").body == b"Hello, World!"


# ---- listings -----------------------------------------------------------------------------


@pytest.fixture
def lroot(tmp_path):
    r = tmp_path / "lroot"
    (r / "dir b").mkdir(parents=True)
    (r / "adir").mkdir()
    (r / "zeta.txt").write_bytes(b"z" * 1234)
    (r / "Alpha.txt").write_bytes(b"")
    (r / "<b>&\"x'.txt").write_bytes(b"x")
    (r / "per%cent #?.txt").write_bytes(b"pp")
    (r / "ü.txt").write_bytes(b"u")
    (r / ".hidden").write_bytes(b"h")
    return r


def listing_rows(body):
    return re.findall(r'<a href="([^"]*)">([^<]*)</a></td><td class="s">([^<]*)</td><td>([^<]*)</td>', body)


def test_listing(make_server, lroot):
    s = make_server(site=files_site(lroot, listing="true"))
    r = fetch(s, "/")
    assert r.status == 200
    assert ctype(r) == "text/html; charset=utf-8"
    assert r.header("ETag")
    body = r.body.decode()
    rows = listing_rows(body)
    names = [n for _, n, _, _ in rows]
    # directories first, then names by bytes; no hidden files; no parent of "/"
    assert names == [
        "adir/",
        "dir b/",
        "&lt;b&gt;&amp;&quot;x&#39;.txt",
        "Alpha.txt",
        "per%cent #?.txt",
        "zeta.txt",
        "ü.txt",
    ]
    hrefs = {n: h for h, n, _, _ in rows}
    assert hrefs["dir b/"] == "dir%20b/"
    assert hrefs["&lt;b&gt;&amp;&quot;x&#39;.txt"] == "%3Cb%3E%26%22x%27.txt"
    assert hrefs["per%cent #?.txt"] == "per%25cent%20%23%3F.txt"
    assert hrefs["ü.txt"] == "%C3%BC.txt"
    sizes = {n: sz for _, n, sz, _ in rows}
    assert sizes["zeta.txt"] == "1234" and sizes["Alpha.txt"] == "0"
    dates = {n: d for _, n, _, d in rows}
    want = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int((lroot / "zeta.txt").stat().st_mtime)))
    assert dates["zeta.txt"] == want
    assert ".hidden" not in body and "../" not in body
    # every link works
    for h, n, _, _ in rows:
        if not n.endswith("/"):
            assert fetch(s, "/" + h).status == 200, h
    sub = fetch(s, "/dir%20b/")
    assert sub.status == 200 and 'href="../"' in sub.body.decode()
    assert "Index of /dir b/" in sub.body.decode()


def test_listing_cached_and_conditional(make_server, lroot):
    s = make_server(site=files_site(lroot, listing="true", cache_for="300ms"))
    r = fetch(s, "/adir/")
    etag = r.header("ETag")
    assert fetch(s, "/adir/", [("If-None-Match", etag)]).status == 304
    (lroot / "adir" / "new.txt").write_bytes(b"new")
    # cached for up to cache_for, then the new file shows up
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        r2 = fetch(s, "/adir/")
        if "new.txt" in r2.body.decode():
            break
        time.sleep(0.05)
    assert "new.txt" in r2.body.decode()
    assert r2.header("ETag") != etag
    assert fetch(s, "/adir/", [("If-None-Match", etag)]).status == 200


def test_listing_title_escaped(make_server, lroot):
    (lroot / "<i>").mkdir()
    s = make_server(site=files_site(lroot, listing="true"))
    body = fetch(s, "/%3Ci%3E/").body.decode()
    assert "<i>" not in body and "Index of /&lt;i&gt;/" in body


# ---- cache and changes on disk ---------------------------------------------------------------


def wait_for_body(server, target, want, timeout=3.0):
    deadline = time.monotonic() + timeout
    while True:
        r = fetch(server, target)
        if r.body == want or time.monotonic() > deadline:
            return r
        time.sleep(0.02)


@pytest.mark.parametrize("name,size", [("small.txt", 3000), ("large.bin", 200 * 1024)])
def test_changed_file_served_fresh_after_cache_for(make_server, tmp_path, name, size):
    root = tmp_path / "croot"
    root.mkdir()
    p = root / name
    old = text(size, 1)
    p.write_bytes(old)
    s = make_server(site=files_site(root, cache_for="1s"))
    assert fetch(s, "/" + name).body == old
    # a new version, written in place (same inode) and then by rename
    new = text(size + 10, 2)
    p.write_bytes(new)
    t0 = time.monotonic()
    r = fetch(s, "/" + name)
    if size < 32 * 1024:
        # until cache_for: the old version whole (a snapshot), or the new one
        assert r.body in (old, new)
    # a large file is sent from its open fd: rewritten in place, it may show
    # the new bytes under the old length until cache_for (as nginx's
    # open_file_cache); replacing it by rename is always clean
    assert int(r.header("Content-Length")) == len(r.body)
    r = wait_for_body(s, "/" + name, new, timeout=4)
    assert r.body == new
    assert time.monotonic() - t0 < 3.0  # cache_for (1 s) plus slack for a loaded machine
    newer = text(size - 10, 3)
    tmp = root / (name + ".tmp")
    tmp.write_bytes(newer)
    os.rename(tmp, p)
    assert wait_for_body(s, "/" + name, newer, timeout=4).body == newer


def test_cached_copy_is_a_consistent_snapshot(make_server, tmp_path):
    root = tmp_path / "snap"
    root.mkdir()
    p = root / "f.txt"
    old = text(8000, 4)
    p.write_bytes(old)
    s = make_server(site=files_site(root, cache_for="10s"))
    first = fetch(s, "/f.txt")
    # rewritten in place, shorter: the answer is the old copy whole (with
    # its ETag) until the change is seen, then the new one (inotify:
    # test_files_fresh.py), never a mix of the two
    p.write_bytes(b"short")
    r = fetch(s, "/f.txt")
    assert int(r.header("Content-Length")) == len(r.body)
    if r.body == old:
        assert r.header("ETag") == first.header("ETag")
    else:
        assert r.body == b"short" and r.header("ETag") != first.header("ETag")


def test_deleted_and_created_files(make_server, tmp_path):
    root = tmp_path / "dc"
    root.mkdir()
    (root / "gone.txt").write_bytes(b"here")
    s = make_server(site=files_site(root, cache_for="300ms"))
    assert fetch(s, "/gone.txt").status == 200
    assert fetch(s, "/later.txt").status == 404
    (root / "later.txt").write_bytes(b"now")
    assert fetch(s, "/later.txt").body == b"now"  # misses are not cached
    (root / "gone.txt").unlink()
    deadline = time.monotonic() + 3
    while fetch(s, "/gone.txt").status != 404 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fetch(s, "/gone.txt").status == 404


def test_cache_for_zero(make_server, tmp_path):
    root = tmp_path / "z"
    root.mkdir()
    (root / "f.txt").write_bytes(b"one")
    s = make_server(site=files_site(root, cache_for="0"))
    assert fetch(s, "/f.txt").body == b"one"
    (root / "f.txt").write_bytes(b"two!")
    assert fetch(s, "/f.txt").body == b"two!"


def test_keep_alive_mixed_requests(fserver, froot):
    notes, big = (froot / "notes.txt").read_bytes(), (froot / "big.bin").read_bytes()
    etag = fetch(fserver, "/notes.txt").header("ETag")
    with fserver.conn(timeout=10) as c:
        for i in range(30):
            c.send(request("GET", "/notes.txt"))
            assert c.read_response().body == notes
            c.send(request("GET", "/big.bin"))
            assert c.read_response().body == big
            c.send(request("GET", "/notes.txt", headers=[("If-None-Match", etag)]))
            assert c.read_response().status == 304
        # and pipelined
        c.send((request("GET", "/notes.txt") + request("GET", "/big.bin") + request("HEAD", "/notes.txt")))
        assert c.read_response().body == notes
        assert c.read_response().body == big
        assert c.read_response(head_request=True).header("Content-Length") == str(len(notes))


def test_many_threads_same_files(make_server, froot):
    # the cache under concurrent hits, expiries and misses
    import threading

    s = make_server(site=files_site(froot, cache_for="50ms"), threads="2")
    names = ["notes.txt", "big.bin", "img.png", "sub/a.txt", "page.html"]
    want = {n: (froot / n).read_bytes() for n in names}
    errors = []

    def client(k):
        try:
            with s.conn(timeout=10) as c:
                for i in range(40):
                    n = names[(i + k) % len(names)]
                    c.send(request("GET", "/" + n))
                    if c.read_response().body != want[n]:
                        errors.append(n)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    ts = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errors


# ---- headers from the config --------------------------------------------------------------


def test_expires_and_cache_control(make_server, froot):
    s = make_server(site=files_site(froot, expires="1h"))
    r = fetch(s, "/notes.txt")
    assert r.header("Cache-Control") == "max-age=3600"
    exp = email.utils.parsedate_to_datetime(r.header("Expires")).timestamp()
    assert abs(exp - (time.time() + 3600)) < 5
    s2 = make_server(site=files_site(froot, cache_control='"public, max-age=60"'))
    r = fetch(s2, "/big.bin")
    assert r.header("Cache-Control") == "public, max-age=60"
    assert r.header("Expires") is None
    etag = r.header("ETag")
    r = fetch(s2, "/big.bin", [("If-None-Match", etag)])
    assert r.status == 304 and r.header("Cache-Control") == "public, max-age=60"


@pytest.mark.parametrize(
    "key,value,msg",
    [
        ("follow_symlinks", "sometimes", "inside, always or never"),
        ("listing", "maybe", "bad boolean"),
        ("cache_for", "soon", "duration"),
        ("index", "a/b.html", "plain file name"),
        ("bogus_key", "1", "unknown key"),
    ],
)
def test_config_errors(tmp_path, froot, key, value, msg):
    import subprocess

    from conftest import colibri_bin

    conf = tmp_path / "bad.conf"
    conf.write_text("listener 127.0.0.1:1\n" + files_site(froot, **{key: value}))
    p = subprocess.run([str(colibri_bin()), "-c", str(conf)], capture_output=True, timeout=10)
    assert p.returncode != 0
    err = p.stderr.decode()
    assert msg in err and "bad.conf:" in err, err


# ---- odd files -------------------------------------------------------------------------------


def test_fifo_is_not_served_and_does_not_hang(make_server, tmp_path):
    root = tmp_path / "fifo"
    root.mkdir()
    os.mkfifo(root / "pipe")
    (root / "ok.txt").write_bytes(b"ok")
    s = make_server(site=files_site(root))
    r = fetch(s, "/pipe")
    assert r.status == 404
    assert fetch(s, "/ok.txt").body == b"ok"


def test_unix_socket_not_served(make_server, tmp_path):
    root = tmp_path / "sock"
    root.mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "s"))
    try:
        s = make_server(site=files_site(root))
        assert fetch(s, "/s").status == 404
    finally:
        sock.close()
