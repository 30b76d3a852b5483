"""serve_files never serves what resolves outside its root: a table of path
encodings sent as raw bytes, and symbolic links into and out of the root
under each follow_symlinks policy."""

import os

import pytest

from conftest import SECRET
from fileshelp import fetch, files_site
from rawhttp import request

INSIDE = b"inside the root\n"


@pytest.fixture
def troot(tmp_path):
    """tx/troot (served) beside tx/outside/secret.txt and tx/secret.txt (in
    a directory of their own: the shared fixture has a tmp/outside too)."""
    base = tmp_path / "tx"
    base.mkdir()
    root = base / "troot"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "in.txt").write_bytes(INSIDE)
    (root / "sub" / "deep" / "d.txt").write_bytes(b"deep\n")
    (root / "a\\b.txt").write_bytes(b"backslash name\n")
    out = base / "outside"
    out.mkdir()
    (out / "secret.txt").write_bytes(SECRET)
    (base / "secret.txt").write_bytes(SECRET)
    (base / "troot-evil").mkdir()
    (base / "troot-evil" / "x.txt").write_bytes(SECRET)
    # links that stay inside
    os.symlink("in.txt", root / "ln_file")
    os.symlink("sub", root / "ln_dir")
    os.symlink("../in.txt", root / "sub" / "ln_up_inside")
    os.symlink("deep/../../in.txt", root / "sub" / "ln_dotdot")
    os.symlink(str(root / "in.txt"), root / "ln_abs_inside")
    os.symlink("ln_file", root / "ln_chain")
    # links that lead out
    os.symlink("../secret.txt", root / "ln_out")
    os.symlink("../../../secret.txt", root / "sub" / "deep" / "ln_out_deep")
    os.symlink(str(out), root / "ln_outdir")
    os.symlink(str(base / "secret.txt"), root / "ln_abs_out")
    os.symlink(str(base / "troot-evil" / "x.txt"), root / "ln_prefix_trick")
    os.symlink("/", root / "ln_slash")
    os.symlink("ln_out", root / "ln_chain_out")
    # broken ones
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink("missing.txt", root / "dangling")
    return root


def raw_get(server, target):
    with server.conn() as c:
        c.send(request("GET", target))
        return c.read_response()


TRAVERSALS = [
    "/../secret.txt",
    "/../../secret.txt",
    "/../outside/secret.txt",
    "/%2e%2e/secret.txt",
    "/%2E%2E/secret.txt",
    "/.%2e/secret.txt",
    "/%2e./secret.txt",
    "/..%2fsecret.txt",
    "/..%2Fsecret.txt",
    "/%2e%2e%2fsecret.txt",
    "/%2e%2e%2f%2e%2e%2fsecret.txt",
    "/..%5csecret.txt",
    "/..\\secret.txt",
    "/%5c..%5csecret.txt",
    "/sub/../../secret.txt",
    "/sub/%2e%2e/%2e%2e/secret.txt",
    "/sub/deep/../../../secret.txt",
    "/./../secret.txt",
    "//../secret.txt",
    "/sub//..//..//secret.txt",
    "/%252e%252e/secret.txt",
    "/%252e%252e%252fsecret.txt",
    "/..;/secret.txt",
    "/%c0%ae%c0%ae/secret.txt",
    "/%e0%80%ae%e0%80%ae/secret.txt",
    "/%2e%2e%00/secret.txt",
    "/in.txt%00/../../secret.txt",
    "/.../secret.txt",
    "/%u002e%u002e/secret.txt",
    "/..%c0%afsecret.txt",
    "http://localhost/../secret.txt",
    "/troot/../secret.txt",
    "/.." + "/.." * 50 + "/secret.txt",
    "/" + "a/" * 300 + "../" * 301 + "secret.txt",
    "/" + "x" * 4000 + "/../../secret.txt",
    "/" + "x" * 300 + ".txt",
]


@pytest.fixture
def tserver(make_server, troot):
    return make_server(site=files_site(troot, follow_symlinks="inside"))


@pytest.mark.parametrize("target", TRAVERSALS)
def test_traversal_never_escapes(tserver, target):
    r = raw_get(tserver, target)
    assert SECRET not in r.body, (target, r)
    assert r.status in (400, 403, 404, 414), (target, r.status)


def test_traversal_table_is_big_enough():
    assert len(TRAVERSALS) >= 20


@pytest.mark.parametrize("target", ["/a%5cb.txt", "/a\\b.txt", "/sub%5cdeep%5cd.txt"])
def test_backslash_refused(tserver, target):
    # even a real file whose name holds a backslash
    r = raw_get(tserver, target)
    assert r.status in (400, 404), r


def test_dot_segments_inside_resolve(tserver):
    for target in ("/sub/../in.txt", "/sub/deep/%2e%2e/%2e%2e/in.txt", "/./in.txt", "//in.txt"):
        r = raw_get(tserver, target)
        assert r.status == 200 and r.body == INSIDE, target


LINKS_INSIDE = {
    "/ln_file": INSIDE,
    "/ln_dir/deep/d.txt": b"deep\n",
    "/sub/ln_up_inside": INSIDE,
    "/sub/ln_dotdot": INSIDE,
    "/ln_abs_inside": INSIDE,
    "/ln_chain": INSIDE,
}
LINKS_OUTSIDE = [
    "/ln_out",
    "/sub/deep/ln_out_deep",
    "/ln_outdir/secret.txt",
    "/ln_abs_out",
    "/ln_prefix_trick",
    "/ln_slash/etc/hostname",
    "/ln_chain_out",
]


@pytest.mark.parametrize("target", sorted(LINKS_INSIDE))
def test_links_inside_followed(tserver, target):
    r = raw_get(tserver, target)
    assert r.status == 200 and r.body == LINKS_INSIDE[target], target


@pytest.mark.parametrize("target", LINKS_OUTSIDE)
def test_links_outside_refused(tserver, target):
    r = raw_get(tserver, target)
    assert r.status in (403, 404), (target, r.status)
    assert SECRET not in r.body


@pytest.mark.parametrize("target", ["/loop_a", "/dangling", "/loop_b/x"])
def test_broken_links(tserver, target):
    assert raw_get(tserver, target).status == 404


def test_never_follows_nothing(make_server, troot):
    s = make_server(site=files_site(troot, follow_symlinks="never"))
    for target in list(LINKS_INSIDE) + LINKS_OUTSIDE:
        r = raw_get(s, target)
        assert r.status == 404, (target, r.status)
        assert SECRET not in r.body
    assert raw_get(s, "/in.txt").body == INSIDE


@pytest.mark.skipif(os.environ.get("COLIBRI_TEST_SANDBOX") == "1",
                    reason="sandbox = true: Landlock refuses the files outside the root (README, Sandbox)")
def test_always_follows_everything(make_server, troot):
    s = make_server(site=files_site(troot, follow_symlinks="always"))
    for target, body in LINKS_INSIDE.items():
        assert raw_get(s, target).body == body, target
    for target in ("/ln_out", "/ln_abs_out", "/ln_outdir/secret.txt", "/sub/deep/ln_out_deep"):
        r = raw_get(s, target)
        assert r.status == 200 and r.body == SECRET, target
    # but ".." in the request still stops at the root
    for target in TRAVERSALS[:12]:
        assert SECRET not in raw_get(s, target).body, target


def test_listing_hides_links_out(make_server, troot):
    s = make_server(site=files_site(troot, listing="true", follow_symlinks="inside"))
    body = raw_get(s, "/").body.decode()
    assert ">ln_file<" in body and ">ln_dir/<" in body
    for name in ("ln_out", "ln_outdir", "ln_abs_out", "ln_slash", "loop_a", "dangling"):
        assert ">%s" % name not in body, name


def test_link_swapped_while_cached(make_server, troot):
    # a file that becomes a link to the outside is refused once the entry expires
    s = make_server(site=files_site(troot, cache_for="200ms"))
    (troot / "swap.txt").write_bytes(INSIDE)
    assert raw_get(s, "/swap.txt").body == INSIDE
    (troot / "swap.txt").unlink()
    os.symlink("../secret.txt", troot / "swap.txt")
    import time

    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        r = raw_get(s, "/swap.txt")
        assert SECRET not in r.body
        if r.status == 404:
            break
        time.sleep(0.05)
    assert r.status == 404


def test_default_fixture_links(server):
    # the shared fixture's root: a link inside is followed by default, the
    # ones leading out never are
    from conftest import HELLO_TXT

    assert raw_get(server, "/link.txt").body == HELLO_TXT
    for target in ("/outlink/secret.txt", "/secretlink.txt"):
        r = raw_get(server, target)
        assert r.status == 404 and SECRET not in r.body
