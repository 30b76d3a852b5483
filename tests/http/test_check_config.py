"""colibri --check-config [-c FILE]: everything a start would check, then
"FILE: ok" and exit 0, or every error as FILE:LINE: KEY: message and exit 1.
A start with a bad config reports every error too, each behind "colibri: "."""

import subprocess

from conftest import colibri_bin, make_wwwroot

BAD = """listener 127.0.0.1:0
threads = lots
keep_alive_timeout = soon
site {
    handler /a nosuch
    serve_files / {
        path = %(root)s
        listing = maybe
    }
    redirect /r {
        code = 301
    }
    handler /hello hello_world
    frobnicate = 1
}
module ./no-such-lib.so
typo_key = 3
"""

# (line, key, words) of every error in BAD, in the order they are reported:
# the order of their lines (issue 17: not the order of the loading steps,
# which read "module" lines before the rest)
BAD_ERRORS = [
    (2, "threads", "bad integer 'lots'"),
    (3, "keep_alive_timeout", "bad duration 'soon'"),
    (5, "handler", "unknown handler 'nosuch'"),
    (8, "listing", "bad boolean 'maybe'"),
    (10, "redirect", "needs 'to = "),
    (14, "frobnicate", "unknown key in site"),
    (16, "module", "cannot load"),
    (17, "typo_key", "unknown key"),
]


def run(args, cwd, timeout=20):
    return subprocess.run([str(colibri_bin())] + args, cwd=str(cwd), capture_output=True, text=True,
                          timeout=timeout)


def test_good_config_is_ok(tmp_path):
    make_wwwroot(tmp_path)
    conf = tmp_path / "good.conf"
    conf.write_text("listener 127.0.0.1:0\nsite {\n    handler /hello hello_world\n"
                    "    serve_files / {\n        path = %s\n    }\n}\n" % (tmp_path / "wwwroot"))
    p = run(["--check-config", "-c", str(conf)], tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "%s: ok\n" % conf
    assert p.stderr == ""


def test_default_config_file_is_checked(tmp_path):
    (tmp_path / "colibri.conf").write_text("threads = 1\n")
    p = run(["--check-config"], tmp_path)
    assert p.returncode == 0 and p.stdout == "colibri.conf: ok\n"


def test_no_config_file_is_an_error(tmp_path):
    p = run(["--check-config"], tmp_path)
    assert p.returncode == 1 and "no config file" in p.stderr


def expected_lines(conf):
    return ["%s:%d: %s: " % (conf, line, key) for line, key, _ in BAD_ERRORS]


def test_every_error_is_printed(tmp_path):
    make_wwwroot(tmp_path)
    conf = tmp_path / "bad.conf"
    conf.write_text(BAD % {"root": tmp_path / "wwwroot"})
    p = run(["--check-config", "-c", str(conf)], tmp_path)
    assert p.returncode == 1
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == len(BAD_ERRORS), p.stderr
    for got, want, (_, _, words) in zip(lines, expected_lines(conf), BAD_ERRORS):
        assert got.startswith(want), (got, want)
        assert words in got, (got, words)


def test_a_start_reports_every_error_and_serves_nothing(tmp_path):
    make_wwwroot(tmp_path)
    conf = tmp_path / "bad.conf"
    conf.write_text(BAD % {"root": tmp_path / "wwwroot"})
    p = run(["-c", str(conf)], tmp_path)
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert lines == [l for l in lines if l.startswith("colibri: ")], p.stderr
    assert [l[len("colibri: "):].split(": ")[0] for l in lines] == [w[:-2].rsplit(": ", 1)[0] for w in expected_lines(conf)]


def test_missing_root_and_template_are_errors(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("error_template = %s\nsite {\n    serve_files / {\n        path = %s\n    }\n}\n"
                    % (tmp_path / "none.mustache", tmp_path / "none"))
    p = run(["--check-config", "-c", str(conf)], tmp_path)
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert len(lines) == 2, p.stderr
    assert lines[0].startswith("%s:1: error_template: " % conf)
    assert lines[1].startswith("%s:4: path: cannot open" % conf)


def test_syntax_error_is_reported(tmp_path):
    conf = tmp_path / "s.conf"
    conf.write_text("site {\n    handler /a hello_world\n")
    p = run(["--check-config", "-c", str(conf)], tmp_path)
    assert p.returncode == 1
    assert p.stderr.startswith("%s:1: site: " % conf), p.stderr


def test_check_does_not_listen(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        conf = tmp_path / "l.conf"
        conf.write_text("listener 127.0.0.1:%d\n" % port)
        # the port is taken, but a check only parses listeners: ok
        p = run(["--check-config", "-c", str(conf)], tmp_path)
        assert p.returncode == 0, p.stderr
    finally:
        s.close()


def test_a_bad_log_file_leaves_the_other_log_keys_known(tmp_path):
    conf = tmp_path / "l.conf"
    conf.write_text("access_log = %s\nerror_log = stderr\nerror_log_level = info\npid_file = %s\n"
                    % (tmp_path / "no" / "such" / "a.log", tmp_path / "x.pid"))
    p = run(["--check-config", "-c", str(conf)], tmp_path)
    assert p.returncode == 1
    assert p.stderr.splitlines() == ["%s:1: access_log: cannot open '%s': No such file or directory"
                                     % (conf, tmp_path / "no" / "such" / "a.log")], p.stderr
