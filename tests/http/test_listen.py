"""Listening: a port that is already taken is an error, as with nginx, even
though colibri's own workers share their port with SO_REUSEPORT."""

import subprocess

import pytest

from conftest import colibri_bin


@pytest.mark.parametrize("accept", ["reuseport", "thread"])
def test_second_server_on_the_same_port_fails(make_server, tmp_path, accept):
    first = make_server(accept=accept)
    conf = tmp_path / "second.conf"
    conf.write_text("listener %s:%d\nthreads = 2\naccept = %s\n" % (first.host, first.port, accept))
    p = subprocess.run([str(colibri_bin()), "-c", str(conf)], capture_output=True, timeout=10)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 1, err
    assert "Address already in use" in err and str(first.port) in err, err
    # the first one is unharmed
    with first.conn() as c:
        c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.read_response().status == 200
