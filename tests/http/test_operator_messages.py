"""What colibri tells an operator (issue 17, item 13): a duplicate route
names the line of the first, a section no module takes hints at a missing
`module` line, a module path is printed as written (./lib.so, not
././lib.so), `-t` without a number hints at --check-config, --version says
the commit and the features, the root warning only for a server that keeps
root while it listens from a config, and a restart-only key's warning once
per change, not at every reload."""

import os
import re
import signal
import subprocess

import pytest

from conftest import REPO, colibri_bin, free_port
from samples import make_sample  # noqa: F401 (the fixture)
from test_reload import reload


def run(args, cwd, timeout=20):
    return subprocess.run([str(colibri_bin())] + args, cwd=str(cwd), capture_output=True, text=True,
                          timeout=timeout)


def check(tmp_path, text, name="x.conf"):
    (tmp_path / name).write_text(text)
    return run(["--check-config", "-c", name], tmp_path)


def test_duplicate_route_names_the_first_line(tmp_path):
    p = check(tmp_path, "listener 127.0.0.1:0\nsite {\n    handler /a hello_world\n"
                        "    redirect /b {\n        to = /c\n    }\n"
                        "    handler /b echo\n}\n")
    assert p.returncode == 1
    assert p.stderr == "x.conf:7: handler: prefix '/b' is already routed at line 4\n", p.stderr


def test_section_without_module_hints_at_module_line(tmp_path):
    p = check(tmp_path, "listener 127.0.0.1:0\nsite {\n    greet /hi {\n        text = x\n    }\n"
                        "    frobnicate = 1\n}\n")
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        "x.conf:3: greet: unknown key in site (no module 'greet': is a 'module FILE' line missing?)",
        "x.conf:6: frobnicate: unknown key in site"], p.stderr


def test_module_path_printed_as_written(tmp_path):
    p = check(tmp_path, "listener 127.0.0.1:0\nmodule ./libnope.so\nmodule libnope2.so\n")
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert lines[0].startswith("x.conf:2: module: cannot load: ./libnope.so: "), p.stderr
    assert lines[1].startswith("x.conf:3: module: cannot load: ./libnope2.so: "), p.stderr
    (tmp_path / "conf").mkdir()
    p = check(tmp_path, "listener 127.0.0.1:0\nmodule ./libnope.so\n", "conf/y.conf")
    assert p.stderr.startswith("conf/y.conf:2: module: cannot load: conf/libnope.so: "), p.stderr


@pytest.mark.parametrize("args", [["-t"], ["-t", "-c", "x.conf"], ["-c", "x.conf", "-t"]])
def test_t_without_a_number_hints_at_check_config(tmp_path, args):
    p = run(args, tmp_path)
    assert p.returncode == 2
    assert "colibri: -t wants a number from 0 to 1024" in p.stderr
    assert "--check-config" in p.stderr.splitlines()[0], p.stderr


def test_version_names_commit_and_features(tmp_path):
    p = run(["--version"], tmp_path)
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert re.fullmatch(r"colibri \d+\.\d+\.\d+", lines[0]), p.stdout
    m = re.fullmatch(r"commit (unknown|(?:.*-g)?([0-9a-f]{7,40})(?:-dirty)?)", lines[1])
    assert m, p.stdout
    if m.group(2):  # built from a git checkout: a commit of this repository
        known = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", m.group(2) + "^{commit}"],
                               capture_output=True)
        assert known.returncode == 0, p.stdout
    cache = (colibri_bin().parent / "CMakeCache.txt").read_text()
    features = lines[2].split()
    assert features[0] == "features:", p.stdout
    for name, var in (("brotli", "COLIBRI_WITH_BROTLI"), ("zstd", "COLIBRI_WITH_ZSTD")):
        on = re.search(r"^%s:\w+=(ON|TRUE|1)$" % var, cache, re.M) is not None
        assert (name in features) == on, (name, p.stdout)
    assert "seccomp" in features and "landlock" in features


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the warning is about running as root")
ROOT_WARNING = "running as root; set 'user'"


@needs_root
def test_root_warning_for_a_configured_server(make_server):
    s = make_server()
    s.stop()
    assert ROOT_WARNING in s.stderr()


@needs_root
def test_no_root_warning_for_a_sample(make_sample):  # noqa: F811
    app = make_sample("hello")
    app.stop()
    assert ROOT_WARNING not in app.stderr(), app.stderr()


def test_restart_only_warning_once_per_change(make_server):
    s = make_server(threads="2")
    text = s.config.read_text()
    warning = re.compile(r"\[warn\] .*:\d+: threads: changed, takes effect at restart")

    def warnings():
        return len(warning.findall(s.stderr()))

    reload(s, text.replace("threads = 2", "threads = 3"))
    assert warnings() == 1
    reload(s)  # the same config again: said already
    reload(s)
    assert warnings() == 1, s.stderr()
    reload(s, text.replace("threads = 2", "threads = 4"))  # another change
    assert warnings() == 2
    reload(s, text)  # back to the running value: nothing to say
    assert warnings() == 2
    reload(s, text.replace("threads = 2", "threads = 4"))  # changed again
    assert warnings() == 3, s.stderr()


def test_make_run_port(tmp_path):
    """`make run PORT=N` serves colibri.conf's site on 127.0.0.1:N."""
    import requests
    import time

    port = free_port()
    env = dict(os.environ)
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(k, None)
    out = open(tmp_path / "make.out", "wb")
    p = subprocess.Popen(["make", "run", "PORT=%d" % port, "BUILD=%s" % colibri_bin().parent],
                         cwd=str(REPO), env=env, stdout=out, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert p.poll() is None, (tmp_path / "make.out").read_text()
            try:
                r = requests.get("http://127.0.0.1:%d/hello" % port, timeout=2)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, (tmp_path / "make.out").read_text()
                time.sleep(0.1)
        assert r.status_code == 200 and r.text == "Hello, World!"
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(20)
        out.close()
