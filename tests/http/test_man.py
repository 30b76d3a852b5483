"""The man pages colibri(8) and colibri.conf(5) (issue 17, item 13): made
at build time from README.md by scripts/readme2man.py, so there is no
second copy. These tests fail when the pages drift: from the README (the
build's pages are what the script makes of it now), from the code (every
option `colibri --help` lists, every config key the sources read and every
log_format field is in them), or from man(7) (groff has nothing to say),
and when `make install` does not install them."""

import re
import subprocess
import sys

import pytest

from conftest import REPO, colibri_bin

PAGES = ("colibri.8", "colibri.conf.5")


def built(name):
    p = colibri_bin().parent / "man" / name
    if not p.exists():
        pytest.fail("no %s: the build makes it from README.md (needs python3)" % p)
    return p


def plain(roff):
    """The text of a page's source, escapes undone (enough to find words)."""
    t = re.sub(r"\\f[BIRP]", "", roff)
    t = t.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")
    return re.sub(r"\\\[u([0-9A-F]{4})\]", lambda m: chr(int(m.group(1), 16)), t)


def test_pages_are_the_readme_of_now(tmp_path):
    version = subprocess.run([str(colibri_bin()), "--version"], capture_output=True,
                             text=True).stdout.split()[1]
    subprocess.run([sys.executable, str(REPO / "scripts" / "readme2man.py"), str(REPO / "README.md"),
                    str(tmp_path), version], check=True)
    for name in PAGES:
        assert built(name).read_text() == (tmp_path / name).read_text(), (
            "%s is not what README.md makes now: rebuild" % name)
        assert "Generated from README.md" in (tmp_path / name).read_text()


@pytest.mark.parametrize("name", PAGES)
def test_groff_has_no_warning(name):
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(built(name))],
                       capture_output=True, text=True)
    if p.returncode == 127:
        pytest.skip("no groff")
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_every_option_is_in_colibri_8():
    text = plain(built("colibri.8").read_text())
    usage = subprocess.run([str(colibri_bin()), "--help"], capture_output=True, text=True).stdout
    opts = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+|-[a-z])\b", usage))
    assert {"--check-config", "-c", "-l", "-t", "--version"} <= opts
    missing = [o for o in sorted(opts) if not re.search(r"(?<![\w-])%s\b" % re.escape(o), text)]
    assert not missing, "colibri(8) does not mention %s" % missing


def source_keys():
    keys = set()
    for path in (REPO / "src" / "lib").rglob("*.c"):
        keys |= set(re.findall(r"(?:config_take|colibri_conf_\w+)\(\w+, \"([a-z_]+)\"",
                               path.read_text()))
    return keys


def test_every_config_key_and_log_field_is_in_colibri_conf_5():
    text = plain(built("colibri.conf.5").read_text())
    keys = source_keys()
    assert {"listener", "access_log", "log_format", "path", "max_body"} <= keys, keys
    missing = sorted(k for k in keys if not re.search(r"\b%s\b" % k, text))
    assert not missing, "colibri.conf(5) (so README.md) does not mention %s" % missing
    src = (REPO / "src" / "lib" / "http" / "log_format.c").read_text()
    fields = re.findall(r'\[F_\w+\] = "(\w+)"', src)
    assert len(fields) >= 15
    missing = [f for f in fields if "`%s`" % f not in (REPO / "README.md").read_text()
               or not re.search(r"\b%s\b" % f, text)]
    assert not missing, "log_format fields not documented: %s" % missing


def test_make_install_installs_them(tmp_path):
    stage = tmp_path / "stage"
    subprocess.run(["cmake", "--install", str(colibri_bin().parent), "--prefix", "/usr/local"],
                   env={"DESTDIR": str(stage), "PATH": "/usr/bin:/bin"}, check=True,
                   capture_output=True)
    for name, sec in (("colibri.8", "man8"), ("colibri.conf.5", "man5")):
        p = stage / "usr" / "local" / "share" / "man" / sec / name
        assert p.exists(), list(stage.rglob("*"))
        assert p.read_text() == built(name).read_text()
