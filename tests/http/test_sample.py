"""samples/hello builds against the installed library alone (headers,
libcolibri and colibri.pc from `cmake --install`) and serves requests; and
`make` builds every sample (the others have tests of their own)."""

import os
import re
import shutil
import signal
import subprocess
import time

import pytest
import requests

from conftest import REPO, colibri_bin, free_port
from samples import make_sample, sample_bin  # noqa: F401 (the fixture)


def build_dir():
    return colibri_bin().parent


def sanitized():
    cache = (build_dir() / "CMakeCache.txt").read_text()
    return re.search(r"^COLIBRI_SANITIZE:BOOL=ON$", cache, re.M) is not None


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config missing")
def test_sample_builds_from_installed_library(tmp_path):
    if sanitized():
        pytest.skip("the sample links without sanitizers: run against the Release build")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", str(build_dir()), "--prefix", str(prefix)],
                   check=True, capture_output=True)
    assert (prefix / "include" / "colibri.h").exists()
    pcdir = next(prefix.glob("lib*/pkgconfig"))
    env = dict(os.environ, PKG_CONFIG_PATH=str(pcdir))
    # only what is installed: no include path into the source tree
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "--static", "colibri"],
                           check=True, capture_output=True, text=True, env=env).stdout.split()
    assert not any(str(REPO / "src") in f for f in flags), flags
    exe = tmp_path / "hello"
    libdir = next(prefix.glob("lib*"))
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                    str(REPO / "samples/hello/hello.c"), "-static-libgcc"] + flags +
                   ["-Wl,-rpath," + str(libdir)], check=True, env=env)

    port = free_port()
    p = subprocess.Popen([str(exe), "127.0.0.1:%d" % port], stderr=subprocess.PIPE)
    try:
        base = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 5
        while True:
            try:
                r = requests.get(base + "/greet?who=reader", timeout=2)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "sample did not start"
                time.sleep(0.05)
        assert r.status_code == 200 and r.text == "Hello, reader!\n"
        r = requests.get(base + "/time", timeout=2)
        assert r.headers["Content-Type"] == "application/json" and '"time"' in r.text
        assert requests.get(base + "/nope", timeout=2).status_code == 404
    finally:
        p.send_signal(signal.SIGINT)
        assert p.wait(10) == 0, p.stderr.read()


def test_every_sample_is_built_with_the_server():
    """`make` builds each samples/NAME that has a CMakeLists.txt (one
    add_subdirectory line in samples/CMakeLists.txt each)."""
    names = sorted(p.parent.name for p in (REPO / "samples").glob("*/CMakeLists.txt"))
    assert {"hello", "clock", "techempower"} <= set(names)
    listed = (REPO / "samples" / "CMakeLists.txt").read_text()
    for name in names:
        assert "add_subdirectory(%s)" % name in listed, name
        assert os.access(sample_bin(name), os.X_OK), "not built: %s" % sample_bin(name)


def test_hello_as_built_by_make(make_sample):
    app = make_sample("hello")
    r = requests.get(app.url + "/greet?who=make", timeout=5)
    assert r.status_code == 200 and r.text == "Hello, make!\n"
