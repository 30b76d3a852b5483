"""Helpers for the serve_files suites (test_files*.py): a site config for a
root of the test's own, raw requests, the build's compression options, and
decoders for every content coding (brotli and zstd through ctypes, so no
Python package is needed)."""

import ctypes
import ctypes.util
import email.utils
import re
import zlib

from conftest import colibri_bin
from rawhttp import request


def files_site(root, prefix="/", **opts):
    """A site with one serve_files PREFIX { path = ROOT; KEY = VALUE ... }."""
    lines = ["site {", "    handler /hello hello_world", "    serve_files %s {" % prefix, "        path = %s" % root]
    for k, v in opts.items():
        lines.append("        %s = %s" % (k, v))
    lines += ["    }", "}"]
    return "\n".join(lines) + "\n"


def fetch(server, target, headers=(), method="GET"):
    """One request on a fresh connection; the parsed Response."""
    with server.conn() as c:
        c.send(request(method, target, headers=list(headers)))
        return c.read_response(head_request=(method == "HEAD"))


def http_date(t):
    return email.utils.formatdate(t, usegmt=True)


def build_options():
    """COLIBRI_WITH_* of the binary's build directory; {} when unknown."""
    cache = colibri_bin().parent / "CMakeCache.txt"
    opts = {}
    if cache.exists():
        for line in cache.read_text(errors="replace").splitlines():
            m = re.match(r"^(COLIBRI_WITH_\w+):BOOL=(\w+)$", line)
            if m:
                opts[m.group(1)] = m.group(2).upper() in ("ON", "TRUE", "1", "YES", "Y")
    return opts


def coding_built(coding):
    """True/False when the build says, None when it cannot be told."""
    if coding in ("gzip", "deflate"):
        return True
    key = {"br": "COLIBRI_WITH_BROTLI", "zstd": "COLIBRI_WITH_ZSTD"}[coding]
    return build_options().get(key)


def _lib(name):
    path = ctypes.util.find_library(name)
    if not path:
        return None
    try:
        return ctypes.CDLL(path)
    except OSError:
        return None


_brotli = _lib("brotlidec")
_zstd = _lib("zstd")


def _unbrotli(data):
    cap = max(1 << 20, 64 * len(data))
    out = ctypes.create_string_buffer(cap)
    n = ctypes.c_size_t(cap)
    ok = _brotli.BrotliDecoderDecompress(ctypes.c_size_t(len(data)), data, ctypes.byref(n), out)
    assert ok == 1, "bad brotli stream"
    return out.raw[: n.value]


def _unzstd(data):
    _zstd.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    _zstd.ZSTD_decompress.restype = ctypes.c_size_t
    _zstd.ZSTD_isError.restype = ctypes.c_uint
    size = _zstd.ZSTD_getFrameContentSize(data, ctypes.c_size_t(len(data)))
    assert size < (1 << 32), "zstd frame without a content size"
    out = ctypes.create_string_buffer(max(1, size))
    n = _zstd.ZSTD_decompress(out, ctypes.c_size_t(size), data, ctypes.c_size_t(len(data)))
    assert not _zstd.ZSTD_isError(ctypes.c_size_t(n)), "bad zstd stream"
    return out.raw[:n]


def decoder(coding):
    """A function bytes -> bytes for CODING, or None if this machine lacks it."""
    if coding == "gzip":
        return lambda d: zlib.decompress(d, 31)
    if coding == "deflate":
        return zlib.decompress
    if coding == "br":
        return _unbrotli if _brotli else None
    if coding == "zstd":
        return _unzstd if _zstd else None
    raise ValueError(coding)


def parse_multipart(resp):
    """[(content-range, content-type, bytes)] of a multipart/byteranges body."""
    ctype = resp.header("Content-Type")
    m = re.match(r"multipart/byteranges;\s*boundary=(\S+)$", ctype or "")
    assert m, ctype
    delim = b"--" + m.group(1).encode()
    body = resp.body
    parts = body.split(b"\r\n" + delim)
    assert parts[0] == b"", "preamble %r" % parts[0][:80]
    assert parts[-1] in (b"--\r\n", b"--"), "no close delimiter: %r" % parts[-1][:80]
    out = []
    for p in parts[1:-1]:
        assert p.startswith(b"\r\n")
        head, _, data = p[2:].partition(b"\r\n\r\n")
        fields = {}
        for line in head.split(b"\r\n"):
            k, _, v = line.partition(b":")
            fields[k.strip().lower().decode()] = v.strip().decode()
        out.append((fields.get("content-range"), fields.get("content-type"), data))
    return out
