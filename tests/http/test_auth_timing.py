"""auth: an unknown user costs what a known one does (issue 21: the lookup
must not tell, by its time, whether a user exists). A wrong password for a
known bcrypt user takes a hash verification; so must any password for a
user the file does not have (verified against a real entry's hash)."""
import base64
import shutil
import statistics
import subprocess
import time

import pytest

from rawhttp import request


def basic(user, pw):
    return ("Authorization", "Basic " + base64.b64encode(("%s:%s" % (user, pw)).encode()).decode())


def timed_401(s, user, pw):
    with s.conn() as c:
        t0 = time.monotonic()
        c.send(request("GET", "/admin", headers=[basic(user, pw)]))
        r = c.read_response()
        dt = time.monotonic() - t0
    assert r.status == 401
    return dt


def test_unknown_user_costs_a_hash_verification(make_server, tmp_path):
    if not shutil.which("htpasswd"):
        pytest.skip("htpasswd (apache2-utils) is needed")
    path = tmp_path / "users.htpasswd"
    # bcrypt cost 10: tens of milliseconds a verification
    subprocess.run(["htpasswd", "-c", "-b", "-B", "-C", "10", str(path), "alice", "right"], check=True,
                   capture_output=True)
    for user in ("bob", "carol", "dave"):
        subprocess.run(["htpasswd", "-b", "-B", "-C", "10", str(path), user, "pw-" + user], check=True,
                       capture_output=True)
    s = make_server(threads="1", site="site {\n    auth /admin {\n        htpasswd = %s\n    }\n"
                    "    handler /admin hello_world\n}\n" % path)
    known, unknown = [], []
    for i in range(3):  # 6 failures: below the per-client limit (20 a minute)
        known.append(timed_401(s, "alice", "wrong%d" % i))
        unknown.append(timed_401(s, "nobody%d" % i, "wrong"))
    k, u = statistics.median(known), statistics.median(unknown)
    assert k > 0.005, known  # a verification took place for the known user
    # the unknown user took one too (without it: well under a millisecond)
    assert u > 0.5 * k, (known, unknown)
