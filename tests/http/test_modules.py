"""Modules: the redirect and response sections, whole-segment route
matching, "module FILE" libraries (built here from tests/http/modules/greet.c
against colibri.h alone), the symbols the library and the program export,
the start-up lines, -r over a config's "/", COLIBRI_NEED_BODY, and
colibri_req_preconditions / colibri_req_range used by a module's handler."""

import email.utils
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import REPO, SANITIZER_RE, colibri_bin, free_port, make_wwwroot
from rawhttp import RawConn, chunked, request
from test_config_errors import check, listener, run_config

GREET_C = Path(__file__).resolve().parent / "modules" / "greet.c"
HEADER = REPO / "src" / "lib" / "colibri.h"


# ---- helpers -----------------------------------------------------------------


def sanitized_build():
    """Whether COLIBRI_BIN comes from a build with COLIBRI_SANITIZE=ON."""
    cache = colibri_bin().parent / "CMakeCache.txt"
    return cache.exists() and re.search(r"^COLIBRI_SANITIZE:BOOL=ON$", cache.read_text(errors="replace"), re.M)


def build_greet(out, *defines, src=GREET_C):
    """Compiles greet.c (or SRC) into the shared library OUT: -I src/lib, no -lcolibri."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    cmd = [cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function"]
    if sanitized_build():
        cmd += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    cmd += ["-I", str(REPO / "src" / "lib")] + list(defines) + ["-o", str(out), str(src)]
    p = subprocess.run(cmd, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return out


@pytest.fixture(scope="session")
def greet_so(tmp_path_factory):
    return build_greet(tmp_path_factory.mktemp("greet") / "libgreet.so")


def one(server, target, method="GET", headers=(), body=None):
    """One request on a fresh connection; the parsed Response."""
    with server.conn() as c:
        c.send(request(method, target, headers=list(headers), body=body))
        return c.read_response(head_request=(method == "HEAD"))


def site(*lines):
    return "site {\n" + "".join("    %s\n" % l for l in lines) + "}\n"


def section(kind, prefix, **keys):
    """Lines of "KIND PREFIX { key = value ... }"."""
    return ["%s %s {" % (kind, prefix)] + ["    %s = %s" % kv for kv in keys.items()] + ["}"]


@pytest.fixture
def spawn(tmp_path):
    """Runs colibri -c CONF from CWD and waits for its "listening on" lines;
    returns (proc, urls, stderr path). At teardown each must exit 0 on
    SIGTERM with no sanitizer report."""
    procs = []

    def start(conf, cwd, args=(), listeners=1):
        errp = tmp_path / ("spawn%d.stderr" % len(procs))
        errf = open(errp, "wb")
        env = dict(os.environ)
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        p = subprocess.Popen(
            [str(colibri_bin()), "-c", str(conf)] + list(args),
            cwd=str(cwd),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errf,
        )
        procs.append((p, errf, errp))
        deadline = time.monotonic() + 5
        while True:
            text = errp.read_text(errors="replace")
            urls = re.findall(r"\] listening on (\S+)$", text, re.M)
            if len(urls) >= listeners:
                return p, urls, errp
            if p.poll() is not None:
                pytest.fail("colibri exited with %s at start-up; stderr:\n%s" % (p.returncode, text))
            if time.monotonic() > deadline:
                pytest.fail("colibri printed %d of %d listening lines in 5 s:\n%s" % (len(urls), listeners, text))
            time.sleep(0.02)

    yield start

    problems = []
    for p, errf, errp in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait(5)
        errf.close()
        data = errp.read_bytes()
        if rc != 0:
            problems.append("colibri exited with %r; stderr:\n%s" % (rc, data[-3000:].decode(errors="replace")))
        m = SANITIZER_RE.search(data)
        if m:
            problems.append("sanitizer report:\n" + data[m.start() : m.start() + 4000].decode(errors="replace"))
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


# ---- redirect ----------------------------------------------------------------

CODES = [301, 302, 303, 307, 308]
REASONS = {
    301: "Moved Permanently",
    302: "Found",
    303: "See Other",
    307: "Temporary Redirect",
    308: "Permanent Redirect",
}


@pytest.fixture
def rserver(make_server):
    lines = ["handler /hello hello_world"]
    lines += section("redirect", "/old", to="/new")
    lines += section("redirect", "/dir", to="/new/")
    lines += section("redirect", "/ext", to="https://example.com/base")
    lines += section("redirect", "/r", to="/", code=302)
    lines += section("redirect", "/trail/", to="/new")
    for c in CODES:
        lines += section("redirect", "/c%d" % c, to="/t%d" % c, code=c)
    return make_server(site=site(*lines))


@pytest.mark.parametrize("code", CODES)
def test_redirect_each_code(rserver, code):
    r = one(rserver, "/c%d/x?q=1" % code)
    assert (r.status, r.reason) == (code, REASONS[code])
    assert r.header("Location") == "/t%d/x?q=1" % code
    assert int(r.header("Content-Length")) == len(r.body)


def test_redirect_default_code_is_301(rserver):
    r = one(rserver, "/old")
    assert r.status == 301 and r.header("Location") == "/new"


@pytest.mark.parametrize(
    "target,location",
    [
        ("/old", "/new"),
        ("/old/", "/new/"),
        ("/old/a/b?x=1&y", "/new/a/b?x=1&y"),
        ("/old?x=1", "/new?x=1"),
        ("/old/a/./b/../c", "/new/a/c"),
    ],
)
def test_redirect_appends_rest_and_query(rserver, target, location):
    r = one(rserver, target)
    assert r.status == 301 and r.header("Location") == location


def test_redirect_escapes_the_query(rserver):
    # what RFC 3986 does not allow in a query is percent-encoded; escapes
    # the client sent stay, a '%' that starts none is encoded (issue 17, item 9)
    r = one(rserver, '/old/a?x="<>{}|^`\\&y=%41%zz%4')
    assert r.status == 301
    assert r.header("Location") == "/new/a?x=%22%3C%3E%7B%7D%7C%5E%60%5C&y=%41%25zz%254"
    r = one(rserver, "/old?a=/b?c:d@e!$'()*+,;=")
    assert r.header("Location") == "/new?a=/b?c:d@e!$'()*+,;="


@pytest.mark.parametrize(
    "target,location",
    [("/dir", "/new/"), ("/dir/", "/new/"), ("/dir/a/b", "/new/a/b"), ("/dir?x=1", "/new/?x=1")],
)
def test_redirect_to_ending_in_slash_has_one_slash(rserver, target, location):
    r = one(rserver, target)
    assert r.status == 301 and r.header("Location") == location


@pytest.mark.parametrize(
    "target,location",
    [
        ("/ext", "https://example.com/base"),
        ("/ext/a/b?q=1", "https://example.com/base/a/b?q=1"),
    ],
)
def test_redirect_to_absolute_url(rserver, target, location):
    r = one(rserver, target)
    assert r.status == 301 and r.header("Location") == location


@pytest.mark.parametrize("target,location", [("/trail/", "/new/"), ("/trail/a/b?x", "/new/a/b?x")])
def test_redirect_prefix_ending_in_slash_keeps_the_slash(rserver, target, location):
    # "redirect /trail/ { to = /new }": the rest of "/trail/a" is "/a",
    # not "a" glued to the target ("/newa").
    r = one(rserver, target)
    assert r.status == 301 and r.header("Location") == location


@pytest.mark.parametrize(
    "target,location",
    [
        ("/old/a%20b", "/new/a%20b"),
        ("/old/caf%C3%A9", "/new/caf%C3%A9"),
        ("/old/%3Fnot-a-query%23", "/new/%3Fnot-a-query%23"),
        ("/old/back%5Cslash", "/new/back%5Cslash"),
        ("/old/%61%62c", "/new/abc"),
        ("/old/a%2Fb", "/new/a/b"),
    ],
)
def test_redirect_reescapes_the_decoded_rest(rserver, target, location):
    r = one(rserver, target)
    assert r.status == 301 and r.header("Location") == location


@pytest.mark.parametrize(
    "target",
    [
        "/r//evil.example/x",
        "/r/%2F%2Fevil.example/x",
        "/r/%2f/evil.example",
        "//r//evil.example",
        "/r/./%2Fevil.example",
        "/r/x/..//evil.example",
        "/r/%5C%5Cevil.example",
        "/r/%5C/evil.example",
        "/r/%09/evil.example",
    ],
)
def test_redirect_never_leaves_the_host(rserver, target):
    # to = "/": a rest that started with "/" once more would make "//host".
    r = one(rserver, target)
    assert r.status == 302, r
    loc = r.header("Location")
    assert loc.startswith("/") and not loc.startswith("//"), loc
    assert "\\" not in loc and not any(ord(ch) <= 32 for ch in loc), loc
    u = urlsplit(loc)
    assert u.scheme == "" and u.netloc == "", loc
    assert "evil.example" in loc  # the rest went into the path, escaped


@pytest.mark.parametrize("rest", ["/.evil.example", "/@evil.example", "/:443@evil.example", "/%2F%2Fevil.example"])
def test_redirect_of_root_to_url_stays_on_its_host(make_server, rest):
    # "redirect / { to = https://example.com }": whatever the path, the
    # Location stays on example.com.
    s = make_server(site=site(*section("redirect", "/", to="https://example.com")))
    r = one(s, rest)
    assert r.status == 301, r
    loc = r.header("Location")
    assert urlsplit(loc).netloc == "example.com", loc
    assert loc.startswith("https://example.com/"), loc


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_redirect_any_method(rserver, method):
    body = b"some=form&data=1" if method in ("POST", "PUT", "PATCH") else None
    with rserver.conn() as c:
        c.send(request(method, "/old/x?y", body=body))
        r = c.read_response(head_request=(method == "HEAD"))
        assert r.status == 301 and r.header("Location") == "/new/x?y"
        if method == "HEAD":
            assert r.body == b""
        # the connection stays usable: a body sent along was skipped
        c.send(request("GET", "/hello"))
        r = c.read_response()
        assert (r.status, r.body) == (200, b"Hello, World!")


@pytest.mark.parametrize("target", ["/oldx", "/old-new", "/older/a", "/direct", "/extra"])
def test_redirect_matches_whole_segments(rserver, target):
    r = one(rserver, target)
    assert r.status == 404 and r.header("Location") is None


def redirect_conf(tmp_path, *keys):
    # line 1 listener, 2 "site {", 3 handler, 4 "redirect /old {", keys from 5
    text = listener() + "site {\n    handler /hello hello_world\n    redirect /old {\n"
    text += "".join("        %s\n" % k for k in keys)
    text += "    }\n}\n"
    return run_config(tmp_path, text)


def test_redirect_without_to_is_an_error(tmp_path):
    conf, p = redirect_conf(tmp_path, "code = 302")
    check(p, conf, 4, "redirect", ["to"])


@pytest.mark.parametrize("code", ["300", "399", "200", "304", "305", "abc", "-301", "3010"])
def test_redirect_bad_code_is_an_error(tmp_path, code):
    conf, p = redirect_conf(tmp_path, "to = /new", "code = %s" % code)
    check(p, conf, 6, "code")


@pytest.mark.parametrize(
    "to",
    ["new", "./new", "ftp://example.com/", "example.com/x", "//evil.example/x", "///x", '"/a b"', "javascript:x"],
)
def test_redirect_bad_target_is_an_error(tmp_path, to):
    conf, p = redirect_conf(tmp_path, "# the target", "to = %s" % to)
    check(p, conf, 6, "to")


def test_redirect_prefix_must_be_a_path(tmp_path):
    text = listener() + "site {\n    redirect old {\n        to = /new\n    }\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 3, "redirect")


def test_redirect_unknown_key_is_an_error(tmp_path):
    conf, p = redirect_conf(tmp_path, "to = /new", "status = 302")
    check(p, conf, 6, "status", ["unknown key"])


# ---- response ----------------------------------------------------------------


def response_site():
    return site("handler /hello hello_world", *section("response", "/gone", code=410), *section("response", "/down", code=503))


def test_response_answers_its_code_with_the_error_page(make_server):
    s = make_server(site=response_site())
    for target in ("/gone", "/gone/", "/gone/a/b?x=1"):
        r = one(s, target)
        assert (r.status, r.reason) == (410, "Gone"), target
        assert r.header("Content-Type").split(";")[0] == "text/html"
        assert b"410 Gone" in r.body and b"<html" in r.body.lower()
        assert int(r.header("Content-Length")) == len(r.body)
    r = one(s, "/down")
    assert (r.status, r.reason) == (503, "Service Unavailable")
    assert b"503 Service Unavailable" in r.body
    # segments: /goner is not /gone
    assert one(s, "/goner").status == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_response_any_method(make_server, method):
    s = make_server(site=response_site())
    with s.conn() as c:
        c.send(request(method, "/gone", body=b"payload" if method != "OPTIONS" else None))
        r = c.read_response()
        assert r.status == 410 and b"410 Gone" in r.body
        c.send(request("GET", "/hello"))
        assert c.read_response().body == b"Hello, World!"


def test_response_head_has_no_body(make_server):
    s = make_server(site=response_site())
    get = one(s, "/gone")
    with s.conn() as c:
        c.send(request("HEAD", "/gone"))
        r = c.read_response(head_request=True)
        assert r.status == 410
        assert r.header("Content-Length") == get.header("Content-Length")
        # nothing follows the head: the next response starts right away
        c.send(request("GET", "/hello"))
        r = c.read_response()
        assert (r.status, r.body) == (200, b"Hello, World!")


def test_response_uses_the_error_template(make_server, tmp_path):
    tpl = tmp_path / "error.mustache"
    tpl.write_text("<!doctype html><title>{{status}} {{reason}}</title><p>{{method}} {{path}} is {{status}}</p>\n")
    s = make_server(site=response_site(), error_template=str(tpl))
    r = one(s, "/gone/x%3Cy")
    assert r.status == 410
    assert r.header("Content-Type").split(";")[0] == "text/html"
    assert r.body == b"<!doctype html><title>410 Gone</title><p>GET /gone/x&lt;y is 410</p>\n"
    r = one(s, "/down", method="DELETE")
    assert r.status == 503 and b"DELETE /down is 503" in r.body


@pytest.mark.parametrize("code", [400, 404, 410, 429, 431, 500, 503, 505])
def test_response_code_is_answered_as_configured(make_server, code):
    s = make_server(site=site(*section("response", "/x", code=code)))
    r = one(s, "/x")
    assert r.status == code, r
    assert str(code).encode() in r.body


@pytest.mark.parametrize("code,reason", [(451, b"Unavailable For Legal Reasons"),
                                         (511, b"Network Authentication Required"),
                                         (418, b""), (499, b""), (599, b"")])
def test_response_any_4xx_5xx_goes_out_as_itself(make_server, code, reason):
    # a code colibri has no name for keeps its number, with an empty reason
    # phrase (RFC 9112 section 4), never the generic code of its class
    s = make_server(site=site(*section("response", "/x", code=code)))
    c = s.conn()
    c.send(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
    head = c.read_until(b"\r\n\r\n", time.monotonic() + 5)
    assert head.startswith(b"HTTP/1.1 %d %s\r\n" % (code, reason)), head
    c.close()


@pytest.mark.parametrize("code", ["399", "600", "200", "302", "0", "abc", "4o4"])
def test_response_code_outside_400_599_is_an_error(tmp_path, code):
    text = listener() + "site {\n    response /x {\n        # why\n        code = %s\n    }\n}\n" % code
    conf, p = run_config(tmp_path, text)
    check(p, conf, 5, "code")


def test_response_without_code_is_an_error(tmp_path):
    text = listener() + "site {\n    handler /hello hello_world\n    response /x {\n    }\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 4, "response", ["code"])


# ---- whole-segment matching --------------------------------------------------


@pytest.mark.parametrize(
    "target,body",
    [("/hello", b"Hello, World!"), ("/hello/", b"Hello, World!"), ("/hello/x", b"Hello, World!"), ("/hello?name=x", b"Hello, x!")],
)
def test_handler_prefix_answers_its_segments(make_server, target, body):
    s = make_server(site=site("handler /hello hello_world"))
    r = one(s, target)
    assert (r.status, r.body) == (200, body)


@pytest.mark.parametrize("target", ["/hellothere", "/hello.txt", "/hell", "/"])
def test_handler_prefix_is_not_a_string_prefix(make_server, target):
    s = make_server(site=site("handler /hello hello_world"))
    r = one(s, target)
    assert r.status == 404 and b"Hello" not in r.body


def test_unmatched_segment_falls_back_to_root_route(make_server):
    s = make_server(site=site("handler /hello hello_world", "handler / echo"))
    r = one(s, "/hellothere?a=1")
    assert r.status == 200 and r.body.startswith(b"GET /hellothere?a=1 HTTP/1.1\r\n")
    assert one(s, "/hello/there").body == b"Hello, World!"


def test_serve_files_prefix_answers_its_segments_only(make_server, tmp_path):
    root = make_wwwroot(tmp_path)
    s = make_server(
        site=site("handler / echo", "serve_files /static {", "    path = %s" % root, "}")
    )
    r = one(s, "/static/file.txt")
    assert (r.status, r.body) == (200, b"hello from a file\n")
    r = one(s, "/static")
    assert r.status == 301 and r.header("Location") == "/static/"
    assert one(s, "/static/").status == 200
    # "/staticfile.txt" and "/static.txt" are not below /static: echo answers
    for target in ("/staticfile.txt", "/static.txt"):
        r = one(s, target)
        assert r.status == 200 and r.body.startswith(b"GET %s HTTP/1.1" % target.encode()), target


# ---- "module FILE" -----------------------------------------------------------


def module_site(lib):
    return "module %s\n" % lib + site(
        "handler /hello hello_world",
        "handler /greet greet",
        "handler /peek peek_body",
        "handler /tally tally",
        "handler /tally_count tally_count",
        "handler /doc versioned",
        "handler /echo echo",
        *section("shout", "/shout", text='"hello, module"', repeat=2),
        *section("shout", "/quiet", text="psst"),
    )


@pytest.fixture
def mserver(make_server, greet_so):
    return make_server(site=module_site(greet_so), max_request_body="1k")


def test_module_handler_and_section(mserver):
    r = one(mserver, "/greet")
    assert (r.status, r.body) == (200, b"Hello from a module")
    assert r.header("Content-Type").startswith("text/plain")
    assert one(mserver, "/greet/x?y=1").body == b"Hello from a module"
    assert one(mserver, "/greeting").status == 404
    r = one(mserver, "/shout")
    assert (r.status, r.body) == (200, b"HELLO, MODULEHELLO, MODULE")
    assert one(mserver, "/shout/deeper").body == b"HELLO, MODULEHELLO, MODULE"
    assert one(mserver, "/quiet").body == b"PSST"
    # the built-ins are still there beside the module's
    assert one(mserver, "/hello").body == b"Hello, World!"


def test_module_path_is_relative_to_the_config_file(tmp_path, greet_so, spawn):
    confdir, elsewhere = tmp_path / "conf", tmp_path / "elsewhere"
    (confdir / "lib").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(greet_so, confdir / "lib" / "libgreet.so")
    conf = confdir / "colibri.conf"
    conf.write_text(
        "listener 127.0.0.1:%d\nthreads = 1\nmodule ./lib/libgreet.so\n" % free_port()
        + site("handler /greet greet", *section("shout", "/shout", text="hi"))
    )
    # started from another folder, with a relative -c too
    p, urls, _ = spawn(os.path.relpath(conf, elsewhere), elsewhere)
    u = urlsplit(urls[0])
    with RawConn(u.hostname, u.port) as c:
        c.send(request("GET", "/greet"))
        assert c.read_response().body == b"Hello from a module"
        c.send(request("GET", "/shout"))
        assert c.read_response().body == b"HI"


def test_module_relative_path_is_not_taken_from_the_cwd(tmp_path, greet_so):
    # the library sits in the cwd, not beside the config: not found
    confdir = tmp_path / "conf"
    confdir.mkdir()
    shutil.copy(greet_so, tmp_path / "libgreet.so")
    conf = confdir / "c.conf"
    conf.write_text(listener() + "module ./libgreet.so\n" + site("handler /greet greet"))
    p = subprocess.run([str(colibri_bin()), "-c", str(conf)], cwd=tmp_path, capture_output=True, timeout=10)
    check(p, conf, 2, "module", ["cannot load", str(confdir)])


def test_module_missing_file(tmp_path):
    conf, p = run_config(tmp_path, listener() + "# modules\nmodule ./no-such-lib.so\n" + site("handler /hello hello_world"))
    check(p, conf, 3, "module", ["cannot load", "no-such-lib.so"])


def test_module_without_init(tmp_path):
    build_greet(tmp_path / "libnoinit.so", "-DGREET_NO_INIT")
    conf, p = run_config(tmp_path, listener() + "threads = 1\nmodule libnoinit.so\n" + site("handler /hello hello_world"))
    check(p, conf, 3, "module", ["libnoinit.so", "colibri_module_init"])


def test_module_init_fails(tmp_path):
    build_greet(tmp_path / "libfails.so", "-DGREET_INIT_FAILS")
    conf, p = run_config(tmp_path, listener() + "module %s\n" % (tmp_path / "libfails.so") + site("handler /hello hello_world"))
    check(p, conf, 2, "module", ["libfails.so", "failed (42)"])


def test_module_not_a_library(tmp_path):
    (tmp_path / "fake.so").write_text("not an ELF file\n")
    conf, p = run_config(tmp_path, listener() + "module fake.so\n")
    check(p, conf, 2, "module", ["cannot load", "fake.so"])


def test_module_line_without_file(tmp_path):
    conf, p = run_config(tmp_path, listener() + 'module ""\n')
    check(p, conf, 2, "module")


def test_module_handler_unknown_without_its_library(tmp_path):
    conf, p = run_config(tmp_path, listener() + site("handler /hello hello_world", "handler /greet greet"))
    check(p, conf, 4, "handler", ["greet"])
    conf, p = run_config(tmp_path, listener() + site(*section("shout", "/s", text="x")))
    check(p, conf, 3, "shout", ["unknown key"])


@pytest.mark.parametrize(
    "keys,line,key,words",
    [
        ((), 4, "shout", ["text"]),  # the module says what is missing, at the section
        (("text = \"\"",), 5, "text", ["empty"]),
        (("text = hi", "repeat = 11"), 6, "repeat", []),
        (("text = hi", "repeat = many"), 6, "repeat", []),
        (("text = hi", "volume = 11"), 6, "volume", ["unknown key"]),
        (("text = hi", "text = again"), 6, "text", ["duplicate key (first at line 5)"]),
    ],
)
def test_module_section_errors_name_file_line_key(tmp_path, greet_so, keys, line, key, words):
    text = listener() + "module %s\nsite {\n    shout /s {\n" % greet_so
    text += "".join("        %s\n" % k for k in keys) + "    }\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, line, key, words)


@pytest.mark.parametrize("prefix,words", [("nope", ["must start with '/'"]), ("/hello", ["already routed"])])
def test_module_section_route_error(tmp_path, greet_so, prefix, words):
    # colibri_server_add_route() refuses; the module reports it at its section
    text = listener() + "module %s\nsite {\n    handler /hello hello_world\n    shout %s {\n        text = x\n    }\n}\n" % (greet_so, prefix)
    conf, p = run_config(tmp_path, text)
    check(p, conf, 5, "shout", words)


def test_module_library_links_to_nothing_of_colibri(greet_so):
    # colibri_* are undefined in the library: the program provides them
    nm = shutil.which("nm")
    if not nm:
        pytest.skip("nm not installed")
    out = subprocess.run([nm, "-D", "--undefined-only", str(greet_so)], capture_output=True, text=True, timeout=30).stdout
    undef = {l.split()[-1] for l in out.splitlines() if l.strip()}
    assert {"colibri_server_register", "colibri_server_add_module", "colibri_resp_append"} <= undef, undef
    readelf = shutil.which("readelf")
    if readelf:
        dyn = subprocess.run([readelf, "-d", str(greet_so)], capture_output=True, text=True, timeout=30).stdout
        assert "libcolibri" not in dyn, dyn


# ---- exported symbols --------------------------------------------------------


def declared_functions():
    """The function names colibri.h declares (comments stripped)."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    names = set(re.findall(r"\b(colibri_[a-z0-9_]+)\s*\(", text))
    assert len(names) > 30, names
    return names


def dynamic_symbols(path):
    nm = shutil.which("nm")
    if not nm:
        pytest.skip("nm not installed")
    if not path.exists():
        pytest.skip("%s not built" % path)
    p = subprocess.run([nm, "-D", "--defined-only", str(path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return {l.split()[-1].split("@")[0] for l in p.stdout.splitlines() if l.strip()}


def test_shared_library_exports_only_the_api():
    syms = dynamic_symbols(colibri_bin().parent / "libcolibri.so")
    stray = sorted(s for s in syms if not s.startswith("colibri_"))
    assert not stray, stray
    api = declared_functions() - {"colibri_module_init"}  # a module's, not ours
    assert api <= syms, sorted(api - syms)
    assert syms <= declared_functions(), sorted(syms - declared_functions())
    assert "colibri_module_init" not in syms


def test_program_exports_the_api_to_modules():
    syms = dynamic_symbols(colibri_bin())
    assert "colibri_resp_append" in syms
    api = declared_functions() - {"colibri_module_init"}
    assert api <= syms, sorted(api - syms)
    internal = sorted(s for s in syms if re.match(r"^(http|conn|worker|trie|config|tpl|strbuf|arena|coro|files|server)_", s))
    assert not internal, internal


# ---- start-up lines, -r ------------------------------------------------------


@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_startup_prints_one_listening_line_per_listener(tmp_path, spawn, accept):
    fixed = free_port()
    conf = tmp_path / "l.conf"
    conf.write_text(
        "listener 127.0.0.1:0\nlistener 127.0.0.1:%d\nthreads = 2\naccept = %s\n" % (fixed, accept)
        + site("handler /hello hello_world")
    )
    p, urls, errp = spawn(conf, tmp_path, listeners=2)
    ports = []
    for u in urls:
        m = re.match(r"^http://127\.0\.0\.1:(\d+)$", u)
        assert m, urls
        ports.append(int(m.group(1)))
    assert fixed in ports and len(set(ports)) == 2, ports
    port0 = [x for x in ports if x != fixed][0]
    assert port0 > 0
    # the printed port is the real one: requests on it are answered, by
    # whichever worker takes them
    for port in ports:
        for _ in range(8):
            with RawConn("127.0.0.1", port) as c:
                c.send(request("GET", "/hello"))
                assert c.read_response().body == b"Hello, World!"
    lines = re.findall(r"^.*\] listening on .*$", errp.read_text(), re.M)
    assert len(lines) == 2, lines


def test_root_flag_replaces_the_configs_root(make_server, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "only-here.txt").write_bytes(b"from -r\n")
    (other / "index.html").write_bytes(b"<p>other index</p>\n")
    s = make_server(args=("-r", str(other)))  # the default site serves wwwroot at /
    assert one(s, "/only-here.txt").body == b"from -r\n"
    assert one(s, "/").body == b"<p>other index</p>\n"
    assert one(s, "/file.txt").status == 404  # wwwroot's, no longer served
    assert one(s, "/hello").body == b"Hello, World!"  # the config's other routes stay
    assert "listening on http://" in s.stderr()
    assert "error" not in s.stderr().lower()


# ---- COLIBRI_NEED_BODY -------------------------------------------------------


def tally_count(server):
    return int(one(server, "/tally_count").body)


def test_need_body_over_limit_is_413_and_the_handler_never_runs(mserver):
    big = b"x" * 2000  # max_request_body = 1k
    with mserver.conn() as c:
        c.send(request("POST", "/tally", body=big))
        r = c.read_response()
        assert r.status == 413 and b"tally" not in r.body
        assert r.header("Connection") == "close"
    with mserver.conn() as c:
        c.send(request("POST", "/tally", headers=[("Transfer-Encoding", "chunked")], body=chunked(big[:600], big[600:])))
        r = c.read_response()
        assert r.status == 413 and b"tally" not in r.body
    with mserver.conn() as c:  # echo has NEED_BODY too
        c.send(request("POST", "/echo", headers=[("Transfer-Encoding", "chunked")], body=chunked(big)))
        r = c.read_response()
        assert r.status == 413 and big[:100] not in r.body
        assert r.header("Content-Type").startswith("text/html")
    assert tally_count(mserver) == 0
    r = one(mserver, "/tally", method="POST", body=b"y" * 1024)  # at the limit
    assert (r.status, r.body) == (200, b"tally got 1024 bytes")
    assert tally_count(mserver) == 1


def test_need_body_with_expect_100_continue(mserver):
    for target, want in (("/tally", b"tally got 11 bytes"), ("/echo", b"hello there")):
        with mserver.conn() as c:
            c.send(request("POST", target, headers=[("Content-Length", "11"), ("Expect", "100-continue")]))
            r = c.read_response()
            assert (r.status, r.reason) == (100, "Continue"), target
            c.send(b"hello there")
            r = c.read_response()
            assert (r.status, r.body) == (200, want), target
            # and the connection goes on
            c.send(request("GET", "/greet"))
            assert c.read_response().body == b"Hello from a module"


def test_need_body_over_limit_with_expect_gets_no_continue(mserver):
    with mserver.conn() as c:
        c.send(request("POST", "/tally", headers=[("Content-Length", "5000"), ("Expect", "100-continue")]))
        r = c.read_response()
        assert r.status == 413
    assert tally_count(mserver) == 0


def test_req_body_without_need_body_is_500(mserver):
    # peek_body calls colibri_req_body() without COLIBRI_NEED_BODY
    assert one(mserver, "/peek").status == 500
    with mserver.conn() as c:
        c.send(request("POST", "/peek", body=b"a body nobody asked for"))
        r = c.read_response()
        assert r.status == 500 and r.header("Content-Type").startswith("text/html")
        # the body was skipped: the next request is framed right
        c.send(request("GET", "/greet"))
        r = c.read_response()
        assert (r.status, r.body) == (200, b"Hello from a module")
        # the same, chunked and pipelined in one send
        c.send(
            request("POST", "/peek", headers=[("Transfer-Encoding", "chunked")], body=chunked(b"GET /greet HTTP/1.1\r\n\r\n", b"zz"))
            + request("GET", "/hello")
        )
        r = c.read_response()
        assert r.status == 500
        r = c.read_response()
        assert (r.status, r.body) == (200, b"Hello, World!")
        assert c.pending(0.3) == b""


def test_req_body_without_need_body_and_expect_closes(mserver):
    # no 100 Continue: the server cannot tell whether the body will come,
    # so it answers and closes
    with mserver.conn() as c:
        c.send(request("POST", "/peek", headers=[("Content-Length", "10"), ("Expect", "100-continue")]))
        r = c.read_response()
        assert r.status == 500
        assert r.header("Connection") == "close"
        assert c.wait_closed(3.0)


# ---- preconditions and ranges in a module's handler --------------------------

DOC = b"0123456789abcdefghijklmnopqrstuvwxyz\n"
DOC_MTIME = 1700000000


def test_module_document_plain(mserver):
    r = one(mserver, "/doc")
    assert (r.status, r.body) == (200, DOC)
    assert r.header("ETag") == '"v1"'
    assert email.utils.parsedate_to_datetime(r.header("Last-Modified")).timestamp() == DOC_MTIME
    assert r.header("Accept-Ranges") == "bytes"


@pytest.mark.parametrize(
    "headers,status",
    [
        ([("If-None-Match", '"v1"')], 304),
        ([("If-None-Match", 'W/"v1"')], 304),  # weak comparison for If-None-Match
        ([("If-None-Match", '"x", "v1"')], 304),
        ([("If-None-Match", "*")], 304),
        ([("If-None-Match", '"x"')], 200),
        ([("If-Modified-Since", email.utils.formatdate(DOC_MTIME, usegmt=True))], 304),
        ([("If-Modified-Since", email.utils.formatdate(DOC_MTIME - 10, usegmt=True))], 200),
        # If-None-Match wins over If-Modified-Since
        ([("If-None-Match", '"x"'), ("If-Modified-Since", email.utils.formatdate(DOC_MTIME, usegmt=True))], 200),
        ([("If-Match", '"x"')], 412),
        ([("If-Match", 'W/"v1"')], 412),  # strong comparison for If-Match
        ([("If-Match", '"v1"')], 200),
        ([("If-Match", "*")], 200),
        ([("If-Unmodified-Since", email.utils.formatdate(DOC_MTIME - 10, usegmt=True))], 412),
        ([("If-Unmodified-Since", email.utils.formatdate(DOC_MTIME, usegmt=True))], 200),
    ],
)
def test_module_preconditions(mserver, headers, status):
    r = one(mserver, "/doc", headers=headers)
    assert r.status == status, r
    assert r.header("ETag") == '"v1"'
    if status == 304:
        assert r.body == b"" and r.header("Content-Length") is None
    elif status == 412:
        assert DOC not in r.body
    else:
        assert r.body == DOC


@pytest.mark.parametrize(
    "spec,first,last",
    [("bytes=0-3", 0, 3), ("bytes=10-", 10, 36), ("bytes=-4", 33, 36), ("bytes=5-5", 5, 5), ("bytes=30-999", 30, 36)],
)
def test_module_single_range(mserver, spec, first, last):
    r = one(mserver, "/doc", headers=[("Range", spec)])
    assert r.status == 206, r
    assert r.body == DOC[first : last + 1]
    assert r.header("Content-Range") == "bytes %d-%d/%d" % (first, last, len(DOC))
    assert int(r.header("Content-Length")) == last - first + 1


def test_module_range_first_four_bytes(mserver):
    r = one(mserver, "/doc", headers=[("Range", "bytes=0-3")])
    assert (r.status, r.body) == (206, b"0123")


@pytest.mark.parametrize("spec", ["bytes=37-", "bytes=100-200"])
def test_module_unsatisfiable_range(mserver, spec):
    r = one(mserver, "/doc", headers=[("Range", spec)])
    assert r.status == 416
    assert r.header("Content-Range") == "bytes */%d" % len(DOC)


@pytest.mark.parametrize(
    "headers",
    [
        [("Range", "bytes=0-1,5-6")],  # several: the whole document
        [("Range", "lines=0-3")],
        [("Range", "bytes=0-3"), ("If-Range", '"old"')],  # stale If-Range
        [("Range", "bytes=0-3"), ("If-Range", email.utils.formatdate(DOC_MTIME - 100, usegmt=True))],
    ],
)
def test_module_range_answered_whole(mserver, headers):
    r = one(mserver, "/doc", headers=headers)
    assert (r.status, r.body) == (200, DOC)
    assert r.header("Content-Range") is None


def test_module_range_with_current_if_range(mserver):
    for validator in ('"v1"', email.utils.formatdate(DOC_MTIME, usegmt=True)):
        r = one(mserver, "/doc", headers=[("Range", "bytes=0-3"), ("If-Range", validator)])
        assert (r.status, r.body) == (206, b"0123"), validator


def test_module_range_ignored_for_head_but_conditionals_not(mserver):
    r = one(mserver, "/doc", method="HEAD", headers=[("Range", "bytes=0-3")])
    assert r.status == 200 and r.header("Content-Length") == str(len(DOC))
    r = one(mserver, "/doc", method="HEAD", headers=[("If-None-Match", '"v1"')])
    assert r.status == 304
