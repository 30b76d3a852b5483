"""serve_files' short path: a request with none of If-*, Range and
Accept-Encoding gets the whole identity representation without a pass over
its fields. Its answers must be the bytes the full path gives: a request
with a field that shares their first letter (Referer, Authorization, an
If-None-Match that matches nothing) takes the full path, and the two are
compared on many files, mounts and settings."""

import os
import re

import pytest

from fileshelp import fetch, files_site

# a field that sends the request down the full path without changing the answer
FULL_PATH = [
    [("Referer", "http://example.test/")],
    [("Authorization", "Bearer x")],
    [("If-None-Match", '"no-such-tag"')],
]


def normal(resp):
    """The head with the values of Date and Expires blanked (they may
    change between two requests), and the body."""
    head = re.sub(rb"\r\n(Date|Expires): [^\r]*", rb"\r\n\1: -", resp.head)
    return resp.status, head, resp.body


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "fast"
    (r / "dir" / "deep").mkdir(parents=True)
    (r / "dir" / "index.html").write_bytes(b"<p>index</p>\n")
    (r / "dir" / "deep" / "x.txt").write_bytes(b"x" * 3000)
    (r / "notes.txt").write_bytes(b"alpha beta gamma delta\n" * 400)  # compressible
    (r / "rand.bin").write_bytes(os.urandom(4096))
    (r / "empty.txt").write_bytes(b"")
    (r / "big.bin").write_bytes(os.urandom(200 * 1024))  # by fd
    (r / "style.css").write_bytes(b"body { margin: 0 }\n" * 100)
    (r / "style.css.gz").write_bytes(b"not really gzip, but a sibling\n")
    (r / "odd name;v=1.txt").write_bytes(b"odd\n")
    return r


TARGETS = [
    "/notes.txt",
    "/rand.bin",
    "/empty.txt",
    "/big.bin",
    "/style.css",
    "/odd%20name;v=1.txt",
    "/dir/",
    "/dir",
    "/dir/deep/x.txt",
    "//dir/deep/x.txt",
    "/dir/deep/x.txt?q=1",
    "/missing.txt",
    "/dir/missing/",
    "/notes.txt/",
    "/" + "n" * 4100,  # longer than a path
]


@pytest.mark.parametrize(
    "opts",
    [
        {"cache_for": "5s"},
        {"cache_for": "5s", "compress": "true", "precompressed": "true"},
        {"cache_for": "0"},
        {"cache_for": "5s", "expires": "1h"},
    ],
    ids=["cache", "codings", "no-cache", "expires"],
)
@pytest.mark.parametrize("prefix", ["/", "/static/", "/static"])
def test_short_path_gives_the_full_paths_bytes(make_server, root, opts, prefix):
    s = make_server(site=files_site(root, prefix=prefix, **opts))
    base = prefix.rstrip("/")
    compared = 0
    for target in TARGETS:
        for method in ("GET", "HEAD"):
            for _ in range(2):  # the miss, then (with a cache) the hit
                short = normal(fetch(s, base + target, method=method))
                for fields in FULL_PATH:
                    assert normal(fetch(s, base + target, headers=fields, method=method)) == short, (
                        method,
                        base + target,
                        fields,
                    )
                    compared += 1
    assert compared == len(TARGETS) * 2 * 2 * len(FULL_PATH)


def test_short_path_statuses(make_server, root):
    """What the short path answers, so the comparison above cannot pass on
    two equal failures."""
    s = make_server(site=files_site(root, cache_for="5s"))
    r = fetch(s, "/rand.bin")
    assert r.status == 200 and r.body == (root / "rand.bin").read_bytes()
    r = fetch(s, "/big.bin")
    assert r.status == 200 and r.body == (root / "big.bin").read_bytes()
    assert fetch(s, "/dir/").body == b"<p>index</p>\n"
    assert fetch(s, "/dir").status == 301
    assert fetch(s, "/" + "n" * 4100).status == 404
    assert fetch(s, "/a%00b").status in (400, 404)
    assert fetch(s, "/a%5cb").status == 404
