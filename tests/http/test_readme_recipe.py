"""The README's "Writing a handler" recipe, run as the README writes it.

The C block and the shell block are taken from README.md, so a README that
stops working fails here. Each shell line is run as written, with these
changes only:

- `make` and `make install` run in the checkout with BUILD= the
  build directory of COLIBRI_BIN (as every test here finds the binary) and
  PREFIX= a temporary directory: never the real /usr/local. PKG_CONFIG_PATH
  then points into that prefix, and nothing else (no LD_LIBRARY_PATH), so
  the program only starts if what `pkg-config --libs colibri` gave it does.
- 127.0.0.1:8080 becomes a free port, in the C code and in the curl line.
- Against the ASan build, the cc line gets -fsanitize=address,undefined: the
  installed library needs the sanitizer runtimes, which must come first.
- `./greet &` is started by the test and `kill %1` stops it; a curl line's
  trailing comment is the output it must print.

A line the test does not know fails it, so the README and this test change
together."""

import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest
import requests

from conftest import REPO, SANITIZER_RE, colibri_bin, free_port

README_ADDR = "127.0.0.1:8080"


def build_dir():
    return colibri_bin().parent


def sanitized():
    cache = (build_dir() / "CMakeCache.txt").read_text()
    return re.search(r"^COLIBRI_SANITIZE:BOOL=ON$", cache, re.M) is not None


def recipe():
    """(C code, [(command, comment)]) from README.md's "Writing a handler"."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"^## Writing a handler\n(.*?)(?=^## )", text, re.M | re.S)
    assert m, 'README.md has no "## Writing a handler" section'
    section = m.group(1)
    code = re.findall(r"^```c\n(.*?)^```$", section, re.M | re.S)
    shell = re.findall(r"^```sh\n(.*?)^```$", section, re.M | re.S)
    assert len(code) == 1 and len(shell) == 1, "want one ```c and one ```sh block in the section"
    steps = []
    for line in shell[0].splitlines():
        cmd, _, comment = line.partition(" #")
        if cmd.strip():
            steps.append((cmd.strip(), comment.strip()))
    return code[0], steps


def make_env():
    env = dict(os.environ)
    # not the jobserver of a `make test` around us
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "LD_LIBRARY_PATH"):
        env.pop(k, None)
    return env


def run(cmd, cwd, env, shell=False):
    p = subprocess.run(cmd, cwd=str(cwd), env=env, shell=shell, executable="/bin/bash" if shell else None,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert p.returncode == 0, "%s failed (%d):\n%s" % (cmd, p.returncode, p.stdout[-4000:])
    return p.stdout


def wait_listening(proc, port, errpath):
    deadline = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            pytest.fail("./greet exited with %s at start-up:\n%s" % (proc.returncode, errpath.read_text()))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "./greet did not listen within 10 s"
            time.sleep(0.05)


def test_readme_recipe_builds_and_serves(tmp_path):
    code, steps = recipe()
    assert code.count(README_ADDR) == 1, "the README's greet.c should listen on " + README_ADDR
    port = free_port()
    addr = "127.0.0.1:%d" % port
    work = tmp_path / "work"
    work.mkdir()
    (work / "greet.c").write_text(code.replace(README_ADDR, addr))
    prefix = tmp_path / "prefix"
    env = make_env()
    make_vars = ["BUILD=%s" % build_dir(), "PREFIX=%s" % prefix]

    seen = set()
    greet = None
    errpath = tmp_path / "greet.stderr"
    errfile = open(errpath, "wb")
    try:
        for cmd, comment in steps:
            words = cmd.split()
            if words == ["make"]:
                run(["make"] + make_vars, REPO, env)
                seen.add("make")
            elif words == ["make", "install"]:  # as root, not "sudo" (not everywhere)
                run(["make", "install"] + make_vars, REPO, env)
                pcs = list(prefix.glob("lib*/pkgconfig/colibri.pc"))
                assert len(pcs) == 1, "make install put no colibri.pc in %s/lib*/pkgconfig" % prefix
                env["PKG_CONFIG_PATH"] = str(pcs[0].parent)
                seen.add("install")
            elif words[0] in ("cc", "gcc"):
                assert "install" in seen, "the README compiles before installing"
                # the recipe builds warning-free with the usual warnings on
                assert "-Wall" in words and "-Wextra" in words, "the README's cc line: " + cmd
                line = cmd + (" -fsanitize=address,undefined" if sanitized() else "")
                out = run(line, work, env, shell=True)
                assert out == "", "the README's greet.c builds with warnings:\n" + out
                seen.add("cc")
            elif words == ["./greet", "&"]:
                assert greet is None
                greet = subprocess.Popen(["./greet"], cwd=str(work), env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=errfile)
                wait_listening(greet, port, errpath)
                seen.add("greet")
            elif words[0] == "curl":
                assert greet is not None, "curl before ./greet"
                assert README_ADDR in cmd
                if shutil.which("curl") is None:
                    continue  # the requests check below stands in for it
                out = run(cmd.replace(README_ADDR, addr) + " --silent --show-error", work, env, shell=True)
                if comment:
                    assert out.strip() == comment, "README says %r, curl printed %r" % (comment, out)
            elif words == ["kill", "%1"]:
                assert greet is not None
                # the README's own check, whatever curl lines it has
                r = requests.get("http://%s/greet?who=you" % addr, timeout=5)
                assert (r.status_code, r.text) == (200, "Hello, you!\n")
                # kill %1 is a SIGTERM: the recipe stops gracefully, exit 0
                greet.send_signal(signal.SIGTERM)
                assert greet.wait(10) == 0, errpath.read_text()
                seen.add("kill")
            else:
                pytest.fail("README step this test does not know how to run: %r" % cmd)
        assert seen == {"make", "install", "cc", "greet", "kill"}, "README steps missing: %s" % seen
    finally:
        if greet is not None and greet.poll() is None:
            greet.kill()
            greet.wait(5)
        errfile.close()
    errors = errpath.read_bytes()
    assert not SANITIZER_RE.search(errors), errors.decode("utf-8", "replace")


def test_make_uninstall_removes_what_make_install_put(tmp_path):
    prefix = tmp_path / "prefix"
    env = make_env()
    make_vars = ["BUILD=%s" % build_dir(), "PREFIX=%s" % prefix]
    run(["make", "install"] + make_vars, REPO, env)
    installed = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if not p.is_dir())
    assert "include/colibri.h" in installed and "lib/libcolibri.so.0" in installed, installed
    # a non-system prefix: the rpath that lets programs find libcolibri.so.0
    pc = next(prefix.glob("lib*/pkgconfig/colibri.pc")).read_text()
    assert re.search(r"^Libs: .*-Wl,-rpath,\$\{libdir\}", pc, re.M), pc
    out = run(["make", "uninstall"] + make_vars, REPO, env)
    left = [str(p) for p in prefix.rglob("*") if not p.is_dir()]
    assert left == [], "left after make uninstall: %s\n%s" % (left, out)


def upload_recipe():
    """The C block of README.md's "## Uploads" section."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"^## Uploads\n(.*?)(?=^## )", text, re.M | re.S)
    assert m, 'README.md has no "## Uploads" section'
    code = re.findall(r"^```c\n(.*?)^```$", m.group(1), re.M | re.S)
    assert len(code) == 1, "want one ```c block in the Uploads section"
    return code[0]


def test_readme_upload_recipe_takes_an_upload(make_server, tmp_path):
    """The upload handler as the README writes it, in a module library
    whose colibri_module_init() registers the README's upload_handler:
    a POST of two parts is answered 200 with their sizes (as written
    before, without .methods, it answered 405)."""
    src = "#include <colibri.h>\n#include <stdio.h>\n\n" + upload_recipe() + (
        "\nint colibri_module_init(struct colibri_server *srv)\n{\n"
        "    return colibri_server_register(srv, &upload_handler);\n}\n")
    (tmp_path / "up.c").write_text(src)
    p = subprocess.run(["cc", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-I%s" % (REPO / "src" / "lib"),
                        "-o", "libup.so", "up.c"], cwd=str(tmp_path), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode == 0, p.stdout
    s = make_server(site="module %s\nsite {\n    handler /upload upload\n}\n" % (tmp_path / "libup.so"))
    r = requests.post(s.url + "/upload", files={"f": ("a.bin", b"x" * 100000)}, data={"note": "hi"},
                      timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    assert sorted(r.text.splitlines()) == ["f: 100000 bytes", "note: 2 bytes"], r.text
    assert requests.get(s.url + "/upload", timeout=5).status_code == 405
