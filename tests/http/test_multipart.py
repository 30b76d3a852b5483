"""multipart/form-data bodies through colibri_req_multipart_next() (the
`upload` handler of tests/http/modules/greet.c, which reports each part),
temporary files for large parts, and a route's own max_body."""

import os
import re
import socket
import time
import zlib

import pytest
import requests

from rawhttp import chunked, request
from test_modules import greet_so  # noqa: F401 (the session fixture)

BOUNDARY = "----colibriBoundary7MA4YWxk"
CTYPE = "multipart/form-data; boundary=" + BOUNDARY
MIB = 1 << 20


@pytest.fixture
def uploads(tmp_path):
    d = tmp_path / "uploads"
    d.mkdir()
    return d


@pytest.fixture
def userver(make_server, greet_so, uploads):  # noqa: F811
    site = ("module %s\nsite {\n"
            "    handler /upload upload\n"
            "    handler /small upload {\n        max_body = 1k\n    }\n"
            "    handler /tally tally {\n        max_body = 100\n    }\n"
            "}\n" % greet_so)
    return make_server(site=site, max_request_body="64M", temp_dir=str(uploads),
                       multipart_memory_max="64k", threads="1")


def part(name, data, filename=None, ctype=None):
    cd = 'form-data; name="%s"' % name
    if filename is not None:
        cd += '; filename="%s"' % filename
    head = "Content-Disposition: %s\r\n" % cd
    if ctype:
        head += "Content-Type: %s\r\n" % ctype
    return head.encode() + b"\r\n" + data


def body(*parts, boundary=BOUNDARY):
    b = boundary.encode()
    out = b"preamble\r\n"
    for p in parts:
        out += b"--" + b + b"\r\n" + p + b"\r\n"
    return out + b"--" + b + b"--\r\n"


def line(name, data, filename="-", ctype="text/plain", where="memory"):
    links = "0" if where == "file" else "-"
    return ("name=%s filename=%s type=%s size=%d adler32=%08x in=%s links=%s"
            % (name, filename, ctype, len(data), zlib.adler32(data), where, links))


def post(server, payload, ctype=CTYPE, target="/upload", extra=()):
    headers = [("Content-Type", ctype)] if ctype else []
    with server.conn() as c:
        c.send(request("POST", target, headers=headers + list(extra), body=payload))
        return c.read_response(timeout=30)


def lines(r):
    return r.body.decode().splitlines()


def temp_fds(pid, directory):
    """The server's open files inside directory (O_TMPFILE ones read
    "DIR/#123 (deleted)")."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith(str(directory) + "/"):
            out.append(target)
    return out


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    raise KeyError(key)


def test_small_fields_and_a_file(userver, uploads):
    png = bytes(range(256)) * 4 + b"\r\n--" + BOUNDARY[:-1].encode() + b"\r\n"
    r = post(userver, body(part("title", b"Hello, world"),
                           part("empty", b""),
                           part("pic", png, filename="a b\\\"c\\\".png", ctype="image/png")))
    assert r.status == 200, r.body
    assert lines(r) == [line("title", b"Hello, world"), line("empty", b""),
                        line("pic", png, filename='a b"c".png', ctype="image/png"), "end"]
    assert os.listdir(uploads) == []


def test_parts_above_the_memory_limit_go_to_a_temporary_file(userver, uploads):
    small = os.urandom(64 * 1024)
    big = os.urandom(64 * 1024 + 1)
    r = post(userver, body(part("a", small, filename="s.bin"), part("b", big, filename="b.bin")))
    assert r.status == 200, r.body
    assert lines(r) == [line("a", small, filename="s.bin"),
                        line("b", big, filename="b.bin", where="file"), "end"]
    assert os.listdir(uploads) == []
    assert temp_fds(userver.proc.pid, uploads) == []


def test_a_20_mib_file_is_streamed_not_held(userver, uploads):
    pid = userver.proc.pid
    assert post(userver, body(part("warm", b"x"))).status == 200
    hwm_before = status_kb(pid, "VmHWM")
    data = os.urandom(1 << 16) * (20 * 16)  # 20 MiB
    payload = body(part("note", b"big one"), part("file", data, filename="big.bin",
                                                  ctype="application/octet-stream"))
    with userver.conn(timeout=30) as c:
        c.send(request("POST", "/upload", headers=[("Content-Type", CTYPE),
                                                   ("Content-Length", str(len(payload)))]))
        seen_temp = False
        for i in range(0, len(payload), MIB):
            c.send(payload[i:i + MIB])
            if i > 4 * MIB and not seen_temp:
                time.sleep(0.05)
                seen_temp = bool(temp_fds(pid, uploads))
        r = c.read_response(timeout=30)
    assert r.status == 200, r.body
    assert lines(r) == [line("note", b"big one"),
                        line("file", data, filename="big.bin", ctype="application/octet-stream",
                             where="file"), "end"]
    assert seen_temp, "the large part was not in a file in temp_dir while it arrived"
    grown = status_kb(pid, "VmHWM") - hwm_before
    assert grown < 6 * 1024, "peak RSS grew by %d KiB for a 20 MiB upload" % grown
    assert os.listdir(uploads) == []
    assert temp_fds(pid, uploads) == []


def test_chunked_upload(userver):
    data = os.urandom(200 * 1024)
    payload = body(part("f", data, filename="c.bin"), part("g", b"tail"))
    pieces = [payload[i:i + 7777] for i in range(0, len(payload), 7777)]
    with userver.conn() as c:
        c.send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: " + CTYPE.encode() +
               b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(*pieces))
        r = c.read_response(timeout=30)
        assert r.status == 200, r.body
        assert lines(r) == [line("f", data, filename="c.bin", where="file"), line("g", b"tail"),
                            "end"]
        # the connection goes on: the body was read to its end
        c.send(request("POST", "/upload", headers=[("Content-Type", CTYPE)],
                       body=body(part("again", b"1"))))
        assert lines(c.read_response()) == [line("again", b"1"), "end"]


def test_keep_alive_after_an_upload(userver):
    with userver.conn() as c:
        for i in range(3):
            c.send(request("POST", "/upload", headers=[("Content-Type", CTYPE)],
                           body=body(part("n", b"%d" % i))))
            r = c.read_response()
            assert lines(r) == [line("n", b"%d" % i), "end"]


def test_route_max_body(userver):
    ok = body(part("a", b"x" * 500))
    big = body(part("a", b"x" * 1500))
    assert post(userver, ok, target="/small").status == 200
    # refused on its Content-Length, before the handler reads a byte
    with userver.conn() as c:
        c.send(request("POST", "/small", headers=[("Content-Type", CTYPE),
                                                  ("Content-Length", str(len(big)))]))
        r = c.read_response()
        assert r.status == 413
    # chunked: refused once it grows beyond
    with userver.conn() as c:
        c.send(b"POST /small HTTP/1.1\r\nHost: x\r\nContent-Type: " + CTYPE.encode() +
               b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(big[:700], big[700:]))
        assert c.read_response().status == 413
    # the other route keeps the server's limit
    assert post(userver, big).status == 200
    # and COLIBRI_NEED_BODY handlers follow their route's limit too
    assert post(userver, b"x" * 100, ctype=None, target="/tally").status == 200
    assert post(userver, b"x" * 101, ctype=None, target="/tally").status == 413


def test_server_max_request_body(make_server, greet_so, uploads):  # noqa: F811
    s = make_server(site="module %s\nsite {\n    handler /upload upload\n}\n" % greet_so,
                    max_request_body="2k", temp_dir=str(uploads))
    assert post(s, body(part("a", b"x" * 1000))).status == 200
    assert post(s, body(part("a", b"x" * 3000))).status == 413


@pytest.mark.parametrize("payload", [
    b"",
    b"no delimiter at all",
    b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data; name=a\r\n\r\nxx",
    b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data\r\n\r\nx\r\n--" +
    BOUNDARY.encode() + b"--",
    b"--" + BOUNDARY.encode() + b"\r\nContent-Type: text/plain\r\n\r\nx\r\n--" +
    BOUNDARY.encode() + b"--",
    b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data;\r\n name=a\r\n\r\nx\r\n--" +
    BOUNDARY.encode() + b"--",
    b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--" +
    BOUNDARY.encode() + b"--",
    b"--" + BOUNDARY.encode() + b"\r\n" + b"X: " + b"y" * 5000 + b"\r\n\r\n",
    (b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n") * 1001 +
    b"--" + BOUNDARY.encode() + b"--",
], ids=["empty", "no-delimiter", "no-close", "no-name", "no-disposition", "folded",
        "unterminated-quote", "huge-headers", "too-many-parts"])
def test_malformed_bodies_are_400(userver, payload, uploads):
    r = post(userver, payload)
    assert r.status == 400
    assert r.header("Connection") == "close"
    assert temp_fds(userver.proc.pid, uploads) == []


@pytest.mark.parametrize("ctype,status", [
    (None, 415), ("text/plain", 415), ("multipart/mixed; boundary=x", 415),
    ("multipart/form-data", 400), ("multipart/form-data; boundary=" + "x" * 71, 400),
    ('multipart/form-data; boundary="ab "', 400),
])
def test_bad_content_types(userver, ctype, status):
    assert post(userver, body(part("a", b"1")), ctype=ctype).status == status


def test_quoted_boundary(userver):
    b = "a b:c=?'()+_,-./"
    r = post(userver, body(part("a", b"1"), boundary=b), ctype='multipart/form-data; boundary="%s"' % b)
    assert lines(r) == [line("a", b"1"), "end"]


def test_disconnect_mid_upload_removes_the_temporary_file(userver, uploads):
    pid = userver.proc.pid
    head = (b"--" + BOUNDARY.encode() + b"\r\n" +
            b'Content-Disposition: form-data; name="f"; filename="x.bin"\r\n\r\n')
    total = len(head) + 10 * MIB
    c = userver.conn()
    c.send(request("POST", "/upload", headers=[("Content-Type", CTYPE),
                                               ("Content-Length", str(total))]))
    c.send(head + os.urandom(1 * MIB))
    deadline = time.monotonic() + 5
    while not temp_fds(pid, uploads) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert temp_fds(pid, uploads), "no temporary file while the part arrived"
    assert os.listdir(uploads) == []  # unnamed: nothing to see in the directory
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    c.close()  # a reset, mid-part
    deadline = time.monotonic() + 5
    while temp_fds(pid, uploads) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert temp_fds(pid, uploads) == []
    assert os.listdir(uploads) == []
    # and the server goes on
    assert lines(post(userver, body(part("a", b"1")))) == [line("a", b"1"), "end"]


def test_requests_library_uploads(userver, uploads):
    data = os.urandom(300 * 1024)
    files = {"doc": ("report.pdf", data, "application/pdf"),
             "note": (None, "just a field")}
    r = requests.post(userver.url + "/upload", files=files, data={"x": "y"}, timeout=30)
    assert r.status_code == 200, r.text
    got = r.text.splitlines()
    assert sorted(got) == sorted([
        line("x", b"y"), line("doc", data, filename="report.pdf", ctype="application/pdf",
                              where="file"),
        line("note", b"just a field"), "end"])
    assert os.listdir(uploads) == []


def test_temp_dir_must_be_absolute(make_server, tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("listener 127.0.0.1:1\ntemp_dir = relative/dir\nsite {\n}\n")
    import subprocess
    from conftest import colibri_bin
    p = subprocess.run([str(colibri_bin()), "-c", str(conf), "--check-config"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1
    assert re.search(r"bad.conf:2: temp_dir: must be an absolute path", p.stdout + p.stderr)
