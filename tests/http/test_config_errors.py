"""A bad config exits 1 with "colibri: FILE:LINE: key: message" on stderr."""

import re
import subprocess

import pytest
import requests

from conftest import colibri_bin, free_port


def run_config(tmp_path, text, timeout=10):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    try:
        p = subprocess.run(
            [str(colibri_bin()), "-c", str(conf)],
            cwd=tmp_path,
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("colibri did not exit on a bad config (it is serving?)")
    return conf, p


def good_site(tmp_path):
    (tmp_path / "www").mkdir(exist_ok=True)
    return "site {\n    handler /hello hello_world\n    serve_files / {\n        path = %s\n    }\n}\n" % (tmp_path / "www")


def listener():
    return "listener 127.0.0.1:%d\n" % free_port()


def failed(p):
    """The stderr of a run that exited 1, and sanitizers had nothing to say."""
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 1, (p.returncode, err)
    assert "Sanitizer" not in err and "runtime error:" not in err, err
    return err


def check(p, conf, line, keys, words=()):
    err = failed(p)
    keys = keys if isinstance(keys, tuple) else (keys,)
    pat = r"^colibri: %s:%d: (%s): \S" % (re.escape(str(conf)), line, "|".join(map(re.escape, keys)))
    assert re.search(pat, err, re.M), "stderr %r does not match %r" % (err, pat)
    for w in words:
        assert w in err, (w, err)


def test_good_config_is_accepted_by_check(tmp_path, make_server):
    # Sanity check of the helpers: the default config of the suite starts.
    s = make_server()
    assert s.proc.poll() is None


def test_unknown_key(tmp_path):
    conf, p = run_config(tmp_path, listener() + "threads = 1\nbogus_key = 1\n" + good_site(tmp_path))
    check(p, conf, 3, "bogus_key")


def test_bad_duration(tmp_path):
    conf, p = run_config(tmp_path, listener() + "keep_alive_timeout = 15 parsecs\n" + good_site(tmp_path))
    check(p, conf, 2, "keep_alive_timeout")


@pytest.mark.parametrize("value", ["fast", "-1s", "10x", ""])
def test_bad_duration_values(tmp_path, value):
    conf, p = run_config(tmp_path, listener() + "\n# comment\nrequest_timeout = %s\n" % value + good_site(tmp_path))
    check(p, conf, 4, "request_timeout")


@pytest.mark.parametrize(
    "line,words",
    [
        ("ws_idle_timeout = 500ms", ["'off' or between 1s and a day"]),
        ("ws_idle_timeout = 2d", ["'off' or between 1s and a day"]),
        ("ws_idle_timeout = soon", ["bad duration"]),
        ("ws_memory_max = 1k", ["must be between 65536"]),
        ("ws_memory_max = plenty", ["bad size"]),
    ],
)
def test_bad_websocket_limits(tmp_path, line, words):
    conf, p = run_config(tmp_path, listener() + "threads = 1\n" + line + "\n" + good_site(tmp_path))
    check(p, conf, 3, line.split()[0], words)


def test_bad_size(tmp_path):
    conf, p = run_config(tmp_path, listener() + "max_request_body = lots\n" + good_site(tmp_path))
    check(p, conf, 2, "max_request_body")


def test_bad_threads(tmp_path):
    conf, p = run_config(tmp_path, listener() + "threads = many\n" + good_site(tmp_path))
    check(p, conf, 2, "threads")


def test_unknown_handler(tmp_path):
    text = listener() + "site {\n    handler /hello hello_world\n    handler /x no_such_handler\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 4, "handler", ["no_such_handler"])


def test_unknown_key_in_site(tmp_path):
    text = listener() + "site {\n    handler /hello hello_world\n    frobnicate = yes\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 4, "frobnicate")


def test_serve_files_missing_path(tmp_path):
    text = listener() + "site {\n    serve_files / {\n        index = index.html\n    }\n}\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 3, ("serve_files", "path"), ["path"])


def test_serve_files_nonexistent_dir(tmp_path):
    text = listener() + "site {\n    serve_files / {\n        path = %s\n    }\n}\n" % (tmp_path / "nope")
    conf, p = run_config(tmp_path, text)
    assert p.returncode == 1, p.stderr
    assert b"nope" in p.stderr


def test_bad_listener(tmp_path):
    conf, p = run_config(tmp_path, "threads = 1\nlistener not-an-address\n" + good_site(tmp_path))
    check(p, conf, 2, "listener")


def check_nokey(p, conf, line, message):
    # "FILE:LINE: message" for an error that belongs to no key.
    err = failed(p)
    want = "colibri: %s:%d: %s\n" % (conf, line, message)
    assert want in err, (want, err)


def test_unclosed_section(tmp_path):
    text = listener() + "site {\n    handler /hello hello_world\n"
    conf, p = run_config(tmp_path, text)
    check(p, conf, 2, "site", ["section never closed (missing '}')"])


def test_stray_close_brace(tmp_path):
    text = listener() + "}\n" + good_site(tmp_path)
    conf, p = run_config(tmp_path, text)
    check_nokey(p, conf, 2, "unexpected '}' (no section open)")


def test_missing_open_brace_of_site(tmp_path):
    # "site" without its "{": the error is at "site", not at the last line.
    (tmp_path / "www").mkdir()
    text = listener() + (
        "threads = 1\n"
        "site\n"
        "    handler /hello hello_world\n"
        "    serve_files / {\n"
        "        path = %s\n"
        "    }\n"
        "}\n" % (tmp_path / "www")
    )
    conf, p = run_config(tmp_path, text)
    check(p, conf, 3, "site", ["missing '{' (so the '}' on line 8 has no section to close)"])


def test_missing_open_brace_of_serve_files(tmp_path):
    (tmp_path / "www").mkdir()
    text = listener() + (
        "site {\n"
        "    handler /hello hello_world\n"
        "    serve_files /\n"
        "        path = %s\n"
        "        index = index.html\n"
        "    }\n"
        "}\n" % (tmp_path / "www")
    )
    conf, p = run_config(tmp_path, text)
    check(p, conf, 4, "serve_files", ["missing '{' (so the '}' on line 8 has no section to close)"])


def test_missing_close_brace_of_serve_files(tmp_path):
    # The "}" of serve_files is missing, so "site"'s "}" closes it and
    # "site" stays open to the end: the error names serve_files.
    (tmp_path / "www").mkdir()
    text = listener() + (
        "site {\n"
        "    handler /hello hello_world\n"
        "    serve_files / {\n"
        "        path = %s\n"
        "}\n"
        "threads = 1\n" % (tmp_path / "www")
    )
    conf, p = run_config(tmp_path, text)
    check(p, conf, 4, "serve_files", ["section never closed (missing '}' before line 6)"])


def test_extra_close_brace(tmp_path):
    (tmp_path / "www").mkdir()
    text = listener() + (
        "site {\n"
        "    serve_files / {\n"
        "        path = %s\n"
        "    }\n"
        "    }\n"
        "}\n" % (tmp_path / "www")
    )
    conf, p = run_config(tmp_path, text)
    check_nokey(
        p, conf, 6, "unexpected '}' (it closes 'site' from line 2, so the '}' on line 7 has no section to close)"
    )


def test_duplicate_key(tmp_path):
    # Both lines are named: the second copy is the one nobody reads.
    conf, p = run_config(tmp_path, listener() + "threads = 1\n# more\nthreads = 2\n" + good_site(tmp_path))
    check(p, conf, 4, "threads", ["duplicate key (first at line 2)"])
    assert b"unknown key" not in p.stderr


def test_duplicate_key_in_serve_files(tmp_path):
    (tmp_path / "www").mkdir()
    text = listener() + "site {\n    serve_files / {\n        path = %s\n        path = /tmp\n    }\n}\n" % (tmp_path / "www")
    conf, p = run_config(tmp_path, text)
    check(p, conf, 5, "path", ["duplicate key (first at line 4)"])


def test_repeatable_keys_are_no_duplicates(make_server, tmp_path):
    # listener, site, handler and serve_files may all repeat.
    for d in "ab":
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.txt").write_text(d)
    port2 = free_port()
    site = (
        "listener 127.0.0.1:%d\n"
        "site {\n    handler /hello hello_world\n    handler /echo echo\n"
        "    serve_files /a/ {\n        path = %s\n    }\n"
        "    serve_files /b/ {\n        path = %s\n    }\n}\n"
        "site {\n    handler /hi hello_world\n}\n" % (port2, tmp_path / "a", tmp_path / "b")
    )
    s = make_server(site=site)
    assert s.proc.poll() is None
    for base in (s.url, "http://127.0.0.1:%d" % port2):
        for path, want in (("/a/x.txt", "a"), ("/b/x.txt", "b"), ("/hi", "Hello, World!")):
            r = requests.get(base + path, timeout=5)
            assert (r.status_code, r.text) == (200, want), (base, path)


def test_missing_config_file(tmp_path):
    p = subprocess.run(
        [str(colibri_bin()), "-c", str(tmp_path / "missing.conf")],
        cwd=tmp_path,
        capture_output=True,
        timeout=10,
    )
    assert p.returncode == 1
    assert b"missing.conf" in p.stderr


def test_bad_threads_flag(tmp_path):
    p = subprocess.run([str(colibri_bin()), "-t", "lots"], cwd=tmp_path, capture_output=True, timeout=10)
    assert p.returncode != 0
    assert p.stderr


def test_port_in_use(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        conf, p = run_config(tmp_path, "listener 127.0.0.1:%d\n" % port + good_site(tmp_path))
    assert p.returncode == 1, p.stderr
    assert b"colibri: " in p.stderr


@pytest.mark.parametrize(
    "line,key",
    [
        ("body_timeout = 0s", "body_timeout"),
        ("body_timeout = soon", "body_timeout"),
        ("body_rate_grace = -1s", "body_rate_grace"),
        ("body_min_rate = fast", "body_min_rate"),
        ("body_min_rate = 2G", "body_min_rate"),
    ],
)
def test_bad_body_pace(tmp_path, line, key):
    conf, p = run_config(tmp_path, listener() + line + "\n" + good_site(tmp_path))
    check(p, conf, 2, key)


def test_bad_route_body_timeout(tmp_path):
    (tmp_path / "www").mkdir(exist_ok=True)
    site = "site {\n    handler /echo echo {\n        body_timeout = never\n    }\n}\n"
    conf, p = run_config(tmp_path, listener() + site)
    check(p, conf, 4, "body_timeout")


@pytest.mark.parametrize("value", ["lots", "2G", "-1"])
def test_bad_body_memory_max(tmp_path, value):
    conf, p = run_config(tmp_path, listener() + "body_memory_max = %s\n" % value + good_site(tmp_path))
    check(p, conf, 2, "body_memory_max")


@pytest.mark.parametrize("value", ["lots", "65M"])
def test_bad_compress_max(tmp_path, value):
    (tmp_path / "www").mkdir(exist_ok=True)
    site = "site {\n    serve_files / {\n        path = %s\n        compress_max = %s\n    }\n}\n" % (
        tmp_path / "www",
        value,
    )
    conf, p = run_config(tmp_path, listener() + site)
    check(p, conf, 5, "compress_max")
