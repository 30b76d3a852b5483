"""Virtual hosts: "site NAME... { }" blocks chosen by the request's host
(the Host field, or the authority of an absolute-form target), the
default "site { }" for every other host, 421 when there is none, and the
config errors of site names."""

import pytest

from conftest import HELLO_TXT
from rawhttp import request
from test_config_errors import check, listener, run_config


def vhost_config(server_root, a_root):
    return (
        "site example.com www.example.com {\n"
        "    handler /hello hello_world\n"
        "    response /only {\n"
        "        code = 410\n"
        "    }\n"
        "    serve_files /files/ {\n"
        "        path = %s\n"
        "    }\n"
        "}\n"
        "site other.test {\n"
        "    redirect / {\n"
        "        to = /elsewhere\n"
        "        code = 302\n"
        "    }\n"
        "}\n"
        "site [::1] {\n"
        "    handler /v6 hello_world\n"
        "}\n"
        "site {\n"
        "    handler /only echo\n"
        "    serve_files / {\n"
        "        path = %s\n"
        "    }\n"
        "}\n" % (a_root, server_root)
    )


@pytest.fixture
def vhosts(make_server, tmp_path):
    a = tmp_path / "site-a"
    a.mkdir()
    (a / "a.txt").write_bytes(b"from site a\n")
    # make_server creates tmp_path/wwwroot (conftest.make_wwwroot)
    return make_server(site=vhost_config(tmp_path / "wwwroot", a))


def get(server, target, host, version="HTTP/1.1", headers=()):
    with server.conn() as c:
        c.send(request("GET", target, host=host, version=version, headers=headers))
        return c.read_response()


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "www.example.com",
        "Example.COM",
        "EXAMPLE.COM:8080",
        "example.com:1",
        "example.com.",
        "Www.Example.Com.:443",
    ],
)
def test_named_site_matches_case_port_trailing_dot(vhosts, host):
    r = get(vhosts, "/hello", host)
    assert (r.status, r.body) == (200, b"Hello, World!"), host


@pytest.mark.parametrize(
    "host", ["unknown.test", "example.co", "example.comm", "xexample.com", "127.0.0.1", "localhost:80", "example.com.."]
)
def test_unknown_host_goes_to_default_site(vhosts, host):
    r = get(vhosts, "/file.txt", host)
    assert (r.status, r.body) == (200, HELLO_TXT), host
    # the named site's routes are not the default site's
    assert get(vhosts, "/hello", host).status == 404


def test_named_site_has_only_its_own_routes(vhosts):
    assert get(vhosts, "/file.txt", "example.com").status == 404
    assert get(vhosts, "/", "example.com").status == 404


def test_same_prefix_in_two_sites(vhosts):
    r = get(vhosts, "/only", "example.com")
    assert r.status == 410
    r = get(vhosts, "/only", "default.test")
    assert r.status == 200 and r.body.startswith(b"GET /only HTTP/1.1"), r


def test_each_site_has_its_modules(vhosts):
    r = get(vhosts, "/files/a.txt", "www.example.com")
    assert (r.status, r.body) == (200, b"from site a\n")
    assert get(vhosts, "/files/a.txt", "default.test").status == 404
    r = get(vhosts, "/x/y?q=1", "other.test:8080")
    assert r.status == 302 and r.header("location") == "/elsewhere/x/y?q=1"
    assert get(vhosts, "/x/y", "default.test").status == 404


def test_ipv6_literal_host(vhosts):
    for host in ("[::1]", "[::1]:8080"):
        r = get(vhosts, "/v6", host)
        assert (r.status, r.body) == (200, b"Hello, World!"), host
    assert get(vhosts, "/v6", "[::2]:8080").status == 404


def test_absolute_form_authority_wins_over_host(vhosts):
    r = get(vhosts, "http://example.com/only", "default.test")
    assert r.status == 410
    r = get(vhosts, "http://EXAMPLE.com:8080/hello", "other.test")
    assert (r.status, r.body) == (200, b"Hello, World!")
    r = get(vhosts, "http://unknown.test/only", "example.com")
    assert r.status == 200 and r.body.startswith(b"GET http://unknown.test/only HTTP/1.1"), r


def test_http10_without_host_goes_to_default_site(vhosts):
    r = get(vhosts, "/file.txt", None, version="HTTP/1.0")
    assert (r.status, r.body) == (200, HELLO_TXT)
    r = get(vhosts, "/hello", "example.com", version="HTTP/1.0")
    assert (r.status, r.body) == (200, b"Hello, World!")


def test_sites_change_within_one_connection(vhosts):
    with vhosts.conn() as c:
        c.send(
            request("GET", "/only", host="example.com")
            + request("GET", "/only", host="default.test")
            + request("GET", "/hello", host="www.example.com")
            + request("GET", "/hello", host="default.test")
        )
        got = [c.read_response().status for _ in range(4)]
    assert got == [410, 200, 200, 404]


def test_options_asterisk_unchanged(vhosts):
    with vhosts.conn() as c:
        c.send(b"OPTIONS * HTTP/1.1\r\nHost: nowhere.test\r\n\r\n")
        r = c.read_response()
    assert r.status == 204 and "GET" in r.header("allow")


NO_DEFAULT = "site example.com {\n    handler /hello hello_world\n}\n"


def test_no_default_site_is_421(make_server):
    s = make_server(site=NO_DEFAULT)
    with s.conn() as c:
        c.send(
            request("GET", "/hello", host="unknown.test")
            + request("GET", "/hello", host="example.com")
            + request("GET", "http://unknown.test/hello", host="example.com")
        )
        r1, r2, r3 = c.read_response(), c.read_response(), c.read_response()
    assert r1.status == 421 and r1.reason == "Misdirected Request"
    assert (r2.status, r2.body) == (200, b"Hello, World!")  # the connection stays usable
    assert r3.status == 421
    assert get(s, "/hello", None, version="HTTP/1.0").status == 421


def test_root_flag_serves_the_default_site(make_server, tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    (d / "r.txt").write_bytes(b"from -r\n")
    s = make_server(site=NO_DEFAULT, args=("-r", str(d)))
    r = get(s, "/r.txt", "unknown.test")
    assert (r.status, r.body) == (200, b"from -r\n")
    assert get(s, "/hello", "example.com").status == 200
    assert get(s, "/r.txt", "example.com").status == 404


def test_several_default_site_blocks_merge(make_server):
    s = make_server(
        site="site {\n    handler /a hello_world\n}\n"
        "site a.test {\n    handler /a echo\n}\n"
        "site {\n    handler /b hello_world\n}\n"
    )
    for path in ("/a", "/b"):
        assert get(s, path, "x.test").body == b"Hello, World!"
    assert get(s, "/a", "a.test").body.startswith(b"GET /a ")


# --- config errors ---------------------------------------------------------


def test_host_in_two_sites(tmp_path):
    text = (
        listener()
        + "site a.test b.test {\n    handler /hello hello_world\n}\n"
        + "site c.test B.TEST. {\n    handler /hello echo\n}\n"
    )
    conf, p = run_config(tmp_path, text)
    check(p, conf, 5, "site", ["'B.TEST.' is already a name of the site at line 2"])


def test_host_twice_in_one_site(tmp_path):
    conf, p = run_config(tmp_path, listener() + "threads = 1\nsite a.test A.test {\n}\n")
    check(p, conf, 3, "site", ["'A.test' is already a name of the site at line 3"])


@pytest.mark.parametrize(
    "name,words",
    [
        ("exa_mple.com", ["bad host name 'exa_mple.com'", "letters, digits, '-' and '.'"]),
        ("example.com:8080", ["bad host name 'example.com:8080'", "no port"]),
        ("[::1]:8080", ["bad host name '[::1]:8080'", "no port"]),
        ("*example.com", ["bad host name '*example.com'", "wildcard"]),
        ("a.*.com", ["bad host name 'a.*.com'", "wildcard"]),
        ("a..b", ["bad host name 'a..b'", "empty label"]),
        ("[::1", ["bad host name '[::1'", "IPv6"]),
        ("a" * 254, ["bad host name", "253"]),
    ],
)
def test_bad_site_names(tmp_path, name, words):
    text = listener() + "site {\n    handler /hello hello_world\n}\nsite ok.test %s {\n}\n" % name
    conf, p = run_config(tmp_path, text)
    check(p, conf, 5, "site", words)


def test_site_must_be_a_section(tmp_path):
    conf, p = run_config(tmp_path, listener() + "site example.com\n")
    check(p, conf, 2, "site", ["site must be a section"])


def test_prefix_twice_in_a_named_site(tmp_path):
    text = listener() + "site a.test {\n    handler /x hello_world\n    handler /x echo\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 4, "handler", ["prefix '/x' is already routed"])


def test_prefix_twice_across_default_blocks(tmp_path):
    text = listener() + "site {\n    handler /x hello_world\n}\nsite {\n    handler /x echo\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 6, "handler", ["prefix '/x' is already routed"])


def test_module_error_in_a_named_site(tmp_path):
    text = listener() + "site a.test {\n    serve_files / {\n        index = x.html\n    }\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 3, "serve_files", ["path"])
