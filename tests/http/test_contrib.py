"""contrib/ (issue 17, item 13): the logrotate snippet rotates a running
server's access logs with SIGUSR1 and loses no line; the service unit's
Documentation= names the man pages `make install` installs."""

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rawhttp import request

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"


def get(s, target):
    with s.conn() as c:
        c.send(request("GET", target, headers=[("Connection", "close")]))
        return c.read_response()


@pytest.mark.skipif(not shutil.which("logrotate"), reason="needs logrotate (scripts/deps.sh test)")
def test_logrotate_snippet_rotates_with_sigusr1(make_server, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    pid = tmp_path / "colibri.pid"
    site_log = logs / "site.log"
    site = "site {\n    handler /hello hello_world\n    access_log = %s\n}\n" % site_log
    s = make_server(access_log=str(logs / "access.log"), pid_file=str(pid), site=site)
    snippet = (CONTRIB / "colibri.logrotate").read_text()
    assert "SIGUSR1" in snippet and "/var/log/colibri/*.log" in snippet
    conf = tmp_path / "logrotate.conf"
    conf.write_text(snippet.replace("/var/log/colibri", str(logs)).replace(
        "/run/colibri/colibri.pid", str(pid)))
    # the site's requests go to site.log; the top-level file gets a refused one
    for i in range(5):
        assert get(s, "/hello?before=%d" % i).status == 200
    with s.conn() as c:
        c.send(b"BAD\r\n\r\n")
        c.read_response()
    time.sleep(1.3)  # flushed
    p = subprocess.run(["logrotate", "-f", "-s", str(tmp_path / "state"), str(conf)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    deadline = time.monotonic() + 3
    while "logs reopened" not in s.stderr():
        assert time.monotonic() < deadline, "logrotate's postrotate did not send SIGUSR1:\n" + s.stderr()
        time.sleep(0.05)
    for i in range(5):
        assert get(s, "/hello?after=%d" % i).status == 200
    s.stop()
    old, new = (logs / "site.log.1").read_text(), site_log.read_text()
    assert old.count("before=") == 5 and "after=" not in old
    assert new.count("after=") == 5 and "before=" not in new
    assert (logs / "access.log.1").read_text().count(" 400 ") == 1


def test_service_documentation_is_the_man_pages():
    unit = (CONTRIB / "colibri.service").read_text()
    docs = re.search(r"^Documentation=(.*)$", unit, re.M).group(1).split()
    assert docs == ["man:colibri(8)", "man:colibri.conf(5)"], docs
    cmake = (CONTRIB.parent / "CMakeLists.txt").read_text()
    for page, sec in (("colibri.8", "man8"), ("colibri.conf.5", "man5")):
        assert re.search(r"install\(FILES \$\{MAN_DIR\}/%s DESTINATION \$\{CMAKE_INSTALL_MANDIR\}/%s\)"
                         % (re.escape(page), sec), cmake), page
