"""The programs of samples/, run as a user runs them.

`make` builds samples/NAME into build/samples/NAME/NAME, beside the colibri
binary that COLIBRI_BIN names (so the ASan run tests ASan samples).  Every
sample takes its options first and ADDR:PORT last.  Use:

    from samples import make_sample  # noqa: F401 (the fixture)

    def test_it(make_sample):
        app = make_sample("clock")                  # on a free loopback port
        app = make_sample("techempower", "-t", "1")  # options before the address
        requests.get(app.url + "/")

A Sample is a conftest.Server (url, conn(), stderr(), stop(), ...); at
teardown each gets SIGTERM and must exit 0 within 10 s, with no sanitizer
report in its stderr."""

import os
import subprocess

import pytest

from conftest import Server, colibri_bin, free_port, stop_all


def sample_bin(name):
    return colibri_bin().parent / "samples" / name / name


class Sample(Server):
    def __init__(self, base, name, args, env=None):
        self.name = name
        self.base = base
        self.host = "127.0.0.1"
        self.port = free_port()
        self.returncode = None
        binary = sample_bin(name)
        if not binary.exists():
            pytest.fail("sample not built: %s (make builds every sample)" % binary)
        self.stderr_path = base / ("%s.stderr" % name)
        self.stdout_path = base / ("%s.stdout" % name)
        self.wrapper_log = base / ("%s.wrapper.out" % name)  # samples run without COLIBRI_WRAPPER
        self._err = open(self.stderr_path, "wb")
        self._out = open(self.stdout_path, "wb")
        full_env = dict(os.environ, **(env or {}))
        full_env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        self.proc = subprocess.Popen(
            [str(binary)] + [str(a) for a in args] + ["%s:%d" % (self.host, self.port)],
            env=full_env,
            stdout=self._out,
            stderr=self._err,
            stdin=subprocess.DEVNULL,
            cwd=str(base),
        )
        self._wait_ready()


@pytest.fixture
def make_sample(tmp_path):
    started = []

    def make(name, *args, env=None):
        s = Sample(tmp_path, name, args, env)
        started.append(s)
        return s

    yield make
    stop_all(started)
