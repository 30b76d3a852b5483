"""serve_files compression: each coding on and off (decompressed and compared
byte for byte), q-values, Vary, ETags per coding, precompressed siblings,
and what a build without brotli or zstd answers."""

import gzip
import os
import zlib

import pytest

from fileshelp import coding_built, decoder, fetch, files_site
from test_files import text

CODINGS = ["gzip", "deflate", "br", "zstd"]


@pytest.fixture
def croot(tmp_path):
    r = tmp_path / "croot"
    r.mkdir()
    (r / "t.txt").write_bytes(text(9000, 5))
    (r / "page.html").write_bytes(b"<p>" + text(3000, 6) + b"</p>\n")
    (r / "rand.bin").write_bytes(os.urandom(6000))
    (r / "tiny.txt").write_bytes(b"hi\n")
    (r / "big.txt").write_bytes(text(400 * 1024, 7))
    return r


@pytest.fixture
def cserver(make_server, croot):
    return make_server(site=files_site(croot, precompressed="false"))


def ae(value):
    return [("Accept-Encoding", value)]


@pytest.mark.parametrize("coding", CODINGS)
@pytest.mark.parametrize("name", ["t.txt", "page.html"])
def test_each_coding(cserver, croot, coding, name):
    want = (croot / name).read_bytes()
    r = fetch(cserver, "/" + name, ae(coding))
    assert r.status == 200
    assert r.header("Vary") == "Accept-Encoding"
    built = coding_built(coding)
    got = r.header("Content-Encoding")
    if built is False:
        assert got is None and r.body == want
        return
    if built is None and got is None:
        pytest.skip("cannot tell whether this build has %s" % coding)
    assert got == coding
    assert int(r.header("Content-Length")) == len(r.body) < len(want)
    dec = decoder(coding)
    if dec is None:
        pytest.skip("no %s decoder on this machine" % coding)
    assert dec(r.body) == want
    identity = fetch(cserver, "/" + name)
    assert identity.header("Content-Encoding") is None and identity.body == want
    assert r.header("ETag") != identity.header("ETag")
    assert r.header("Last-Modified") == identity.header("Last-Modified")
    assert r.header("Content-Type") == identity.header("Content-Type")


def test_no_accept_encoding_gets_identity_with_vary(cserver, croot):
    r = fetch(cserver, "/t.txt")
    assert r.header("Content-Encoding") is None
    assert r.body == (croot / "t.txt").read_bytes()
    assert r.header("Vary") == "Accept-Encoding"


@pytest.mark.parametrize(
    "value,want",
    [
        ("gzip;q=0", None),
        ("gzip;q=0, deflate;q=0", None),
        ("*;q=0, gzip", "gzip"),
        ("deflate;q=0.5, gzip;q=0.9", "gzip"),
        ("gzip;q=0.5, deflate;q=1", "deflate"),
        ("gzip;q=0.001", "gzip"),  # any named coding beats unnamed identity
        ("gzip;q=0.5, identity", None),  # named identity competes with its q
        ("gzip;q=0.5, identity;q=0.4", "gzip"),
        ("gzip, *;q=0.8", "gzip"),
        ("gzip;q=0.5, identity;q=0.1", "gzip"),
        ("x-gzip", "gzip"),
        ("GZIP", "gzip"),
        ("compress, exi", None),
        ("", None),
        ("gzip;q=2", None),  # malformed q: the element is ignored
    ],
)
def test_q_values(cserver, croot, value, want):
    r = fetch(cserver, "/t.txt", ae(value))
    assert r.status == 200
    assert r.header("Content-Encoding") == want, value
    data = (croot / "t.txt").read_bytes()
    assert (decoder(want)(r.body) if want else r.body) == data


def test_best_by_size_among_equals(cserver, croot):
    # all accepted equally: the smallest variant is sent
    r = fetch(cserver, "/t.txt", ae("gzip, deflate, br, zstd"))
    sizes = {}
    for c in CODINGS:
        rr = fetch(cserver, "/t.txt", ae(c))
        if rr.header("Content-Encoding") == c:
            sizes[c] = len(rr.body)
    assert r.header("Content-Encoding") in sizes
    assert len(r.body) == min(sizes.values())


def test_identity_refused(cserver):
    r = fetch(cserver, "/t.txt", ae("identity;q=0"))
    assert r.status == 406
    assert r.header("Vary") == "Accept-Encoding"
    r = fetch(cserver, "/t.txt", ae("*;q=0"))
    assert r.status == 406
    assert fetch(cserver, "/t.txt", ae("identity;q=0, gzip")).header("Content-Encoding") == "gzip"


def test_incompressible_and_tiny_stay_identity(cserver, croot):
    for name in ("rand.bin", "tiny.txt"):
        r = fetch(cserver, "/" + name, ae("gzip, deflate, br, zstd"))
        assert r.header("Content-Encoding") is None, name
        assert r.header("Vary") is None, name  # nothing could have varied
        assert r.body == (croot / name).read_bytes()


def test_compress_off(make_server, croot):
    s = make_server(site=files_site(croot, compress="false", precompressed="false"))
    for c in CODINGS:
        r = fetch(s, "/t.txt", ae(c))
        assert r.header("Content-Encoding") is None and r.header("Vary") is None
        assert r.body == (croot / "t.txt").read_bytes()


def test_files_above_compress_max_not_compressed_on_the_fly(make_server, croot):
    s = make_server(site=files_site(croot, precompressed="false", compress_max="300k"))
    r = fetch(s, "/big.txt", ae("gzip, br"))
    assert r.header("Content-Encoding") is None and r.body == (croot / "big.txt").read_bytes()
    assert r.header("Vary") is None  # nothing could have varied
    # below it, also above small_file_max, text is compressed
    (croot / "notes.md").write_bytes(text(65 * 1024, 8))
    r = fetch(s, "/notes.md", ae("gzip"))
    assert r.header("Content-Encoding") == "gzip"


@pytest.mark.parametrize("accept,want", [("gzip", "gzip"), ("br", "br"), ("gzip, br", None)])
def test_text_above_small_file_max_compressed(cserver, croot, accept, want):
    """A 65 KB Markdown file (above small_file_max, 32k, below compress_max,
    1M) goes out compressed to a client that accepts gzip and br, from a
    copy kept in memory beside the file's fd (issue 17, item 11)."""
    data = text(65 * 1024, 8)
    (croot / "notes.md").write_bytes(data)
    r = fetch(cserver, "/notes.md", ae(accept))
    assert r.status == 200
    got = r.header("Content-Encoding")
    if want and coding_built(want) is False:
        assert got is None and r.body == data
        return
    assert got in ("gzip", "br") if want is None else got == want, got
    assert r.header("Vary") == "Accept-Encoding"
    assert int(r.header("Content-Length")) == len(r.body) < len(data) // 2
    dec = decoder(got)
    if dec is None:
        pytest.skip("no %s decoder on this machine" % got)
    assert dec(r.body) == data
    # the identity answer, its ETag, a range on it and HEAD are unchanged
    ident = fetch(cserver, "/notes.md")
    assert ident.header("Content-Encoding") is None and ident.body == data
    assert ident.header("ETag") != r.header("ETag")
    rng = fetch(cserver, "/notes.md", ae(accept) + [("Range", "bytes=40000-40099")])
    assert rng.status == 206 and rng.header("Content-Encoding") is None and rng.body == data[40000:40100]
    h = fetch(cserver, "/notes.md", ae(accept), method="HEAD")
    assert h.header("Content-Encoding") == got and h.header("Content-Length") == str(len(r.body))
    again = fetch(cserver, "/notes.md", ae(accept) + [("If-None-Match", r.header("ETag"))])
    assert again.status == 304


def test_binary_type_above_small_file_max_not_compressed(cserver, croot):
    """Above small_file_max only text types are read to be compressed."""
    data = text(65 * 1024, 9)
    (croot / "data.bin").write_bytes(data)
    r = fetch(cserver, "/data.bin", ae("gzip, br"))
    assert r.header("Content-Encoding") is None and r.body == data


def test_conditional_per_coding(cserver):
    gz = fetch(cserver, "/t.txt", ae("gzip"))
    ident = fetch(cserver, "/t.txt")
    assert fetch(cserver, "/t.txt", ae("gzip") + [("If-None-Match", gz.header("ETag"))]).status == 304
    # the identity tag does not validate the gzip representation, nor the reverse
    assert fetch(cserver, "/t.txt", ae("gzip") + [("If-None-Match", ident.header("ETag"))]).status == 200
    assert fetch(cserver, "/t.txt", [("If-None-Match", gz.header("ETag"))]).status == 200
    r304 = fetch(cserver, "/t.txt", ae("gzip") + [("If-None-Match", gz.header("ETag"))])
    assert r304.header("Vary") == "Accept-Encoding" and r304.header("ETag") == gz.header("ETag")


def test_range_is_on_identity(cserver, croot):
    data = (croot / "t.txt").read_bytes()
    r = fetch(cserver, "/t.txt", ae("gzip") + [("Range", "bytes=100-199")])
    assert r.status == 206 and r.header("Content-Encoding") is None
    assert r.body == data[100:200]
    assert r.header("Vary") == "Accept-Encoding"


def test_head_compressed(cserver):
    g = fetch(cserver, "/t.txt", ae("gzip"))
    h = fetch(cserver, "/t.txt", ae("gzip"), method="HEAD")
    assert h.header("Content-Encoding") == "gzip"
    assert h.header("Content-Length") == g.header("Content-Length") == str(len(g.body))
    assert h.body == b""


def test_listing_compressed(make_server, croot):
    for i in range(30):
        (croot / ("file-%02d.txt" % i)).write_bytes(b"x")
    s = make_server(site=files_site(croot, listing="true"))
    plain = fetch(s, "/")
    r = fetch(s, "/", ae("gzip"))
    assert r.header("Content-Encoding") == "gzip"
    assert zlib.decompress(r.body, 31) == plain.body


# ---- precompressed siblings -------------------------------------------------------------


def sibling_gzip(data):
    # a fixed, unusual header (mtime, level) so the bytes tell it apart from
    # what the server would make
    return gzip.compress(data, compresslevel=1, mtime=12345)


def test_precompressed_small(make_server, croot):
    data = (croot / "t.txt").read_bytes()
    sib = sibling_gzip(data)
    (croot / "t.txt.gz").write_bytes(sib)
    s = make_server(site=files_site(croot, precompressed="true"))
    r = fetch(s, "/t.txt", ae("gzip"))
    assert r.header("Content-Encoding") == "gzip"
    assert r.body == sib
    assert zlib.decompress(r.body, 31) == data
    # the sibling itself is still a file of its own
    own = fetch(s, "/t.txt.gz")
    assert own.header("Content-Encoding") is None and own.body == sib
    assert own.header("Content-Type") == "application/gzip"


def test_precompressed_large_via_fd(make_server, croot):
    data = (croot / "big.txt").read_bytes()
    sib = sibling_gzip(data)
    (croot / "big.txt.gz").write_bytes(sib)
    s = make_server(site=files_site(croot, precompressed="true"))
    r = fetch(s, "/big.txt", ae("gzip"))
    assert r.header("Content-Encoding") == "gzip" and r.body == sib
    assert r.header("Vary") == "Accept-Encoding"
    h = fetch(s, "/big.txt", ae("gzip"), method="HEAD")
    assert h.header("Content-Length") == str(len(sib))
    plain = fetch(s, "/big.txt", ae("br;q=0"))
    assert plain.header("Content-Encoding") is None and plain.body == data


@pytest.mark.parametrize("coding,ext", [("br", ".br"), ("zstd", ".zst")])
def test_precompressed_other_codings(make_server, croot, coding, ext):
    # the server sends the sibling's bytes as they are: any content will do
    marker = b"PRECOMPRESSED-" + coding.encode()
    (croot / ("big.txt" + ext)).write_bytes(marker)
    s = make_server(site=files_site(croot, precompressed="true"))
    r = fetch(s, "/big.txt", ae(coding))
    if coding_built(coding) is False:
        assert r.header("Content-Encoding") is None
    else:
        assert r.header("Content-Encoding") == coding and r.body == marker


def test_precompressed_older_is_ignored(make_server, croot):
    # big.txt is above compress_max: no copy compressed on the fly
    data = (croot / "big.txt").read_bytes()
    sib = sibling_gzip(data)
    p = croot / "big.txt.gz"
    p.write_bytes(sib)
    st = (croot / "big.txt").stat()
    os.utime(p, (st.st_atime, st.st_mtime - 100))
    s = make_server(site=files_site(croot, precompressed="true", compress_max="32k"))
    r = fetch(s, "/big.txt", ae("gzip"))
    assert r.header("Content-Encoding") is None and r.body == data
    assert r.header("Vary") is None


def test_precompressed_off(make_server, croot):
    # big.txt is above compress_max: no copy compressed on the fly
    data = (croot / "big.txt").read_bytes()
    (croot / "big.txt.gz").write_bytes(sibling_gzip(data))
    s = make_server(site=files_site(croot, precompressed="false", compress_max="32k"))
    r = fetch(s, "/big.txt", ae("gzip"))
    assert r.header("Content-Encoding") is None and r.body == data


def test_precompressed_link_out_refused(make_server, croot, tmp_path):
    # big.txt is above compress_max: no copy compressed on the fly
    # a sibling is resolved like any path: a link to the outside is not used
    outside = tmp_path / "out.gz"
    outside.write_bytes(b"SECRET-SIBLING")
    os.symlink(str(outside), croot / "big.txt.gz")
    s = make_server(site=files_site(croot, precompressed="true", compress_max="32k"))
    r = fetch(s, "/big.txt", ae("gzip"))
    assert b"SECRET-SIBLING" not in r.body and r.header("Content-Encoding") is None


def test_build_without_optional_codings_answers_identity(cserver, croot):
    # a coding this build lacks is never sent, whatever the client accepts
    for coding in ("br", "zstd"):
        built = coding_built(coding)
        r = fetch(cserver, "/t.txt", ae(coding))
        if built is False:
            assert r.header("Content-Encoding") is None
            assert r.body == (croot / "t.txt").read_bytes()
        elif built:
            assert r.header("Content-Encoding") == coding
