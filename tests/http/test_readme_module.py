"""The README's "Modules" example, built and loaded as the README writes it.

The C block, the `cc -shared` line and the config block are taken from
README.md's "## Modules" section, so an example that stops working fails
here. Changes: `$(pkg-config --cflags colibri)` becomes `-I src/lib` (the
header in this checkout, not an installed one), and the config gets this
test's listener in front."""

import re
import shlex
import subprocess

import requests

from conftest import REPO, colibri_bin


def fences(text):
    """[(language, body)] of the fenced blocks in text, in order."""
    out, lang, body = [], None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                out.append((lang, "".join(body)))
                lang = None
        elif lang is not None:
            body.append(line)
    return out


def example():
    text = (REPO / "README.md").read_text()
    m = re.search(r"^## Modules\n(.*?)(?=^## )", text, re.M | re.S)
    assert m, 'README.md has no "## Modules" section'
    section = m.group(1)
    blocks = fences(section)
    code = [body for lang, body in blocks if lang == "c"]
    conf = [body for lang, body in blocks if lang == ""]
    cc = [l.strip() for l in section.splitlines() if l.startswith("    cc -shared")]
    assert len(code) == 1 and len(conf) == 1 and len(cc) == 1, "want one C block, one config, one cc line"
    return code[0], cc[0], conf[0]


def test_readme_module_builds_loads_and_answers(make_server, tmp_path):
    code, cc, conf = example()
    (tmp_path / "say.c").write_text(code)
    cmd = cc.replace("$(pkg-config --cflags colibri)", "-I%s" % (REPO / "src" / "lib"))
    assert "-lcolibri" not in cmd  # the binary provides the colibri_* symbols
    p = subprocess.run(shlex.split(cmd) + ["-Wall", "-Werror"], cwd=str(tmp_path),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode == 0, p.stdout
    m = re.search(r"^module (\S+)$", conf, re.M)
    assert m and (tmp_path / m.group(1)).exists()
    s = make_server(site=conf)
    hit = re.search(r"^\s*say (\S+) \{\s*\n\s*text = (.*)$", conf, re.M)
    assert hit, "the README's config has a say section"
    r = requests.get(s.url + hit.group(1), timeout=5)
    assert r.status_code == 200
    assert r.text == hit.group(2).strip()
    # whole segments: the module's route does not answer a longer name
    assert requests.get(s.url + hit.group(1) + "there", timeout=5).status_code == 404


def test_readme_module_section_error_names_file_and_line(tmp_path):
    code, cc, conf = example()
    (tmp_path / "say.c").write_text(code)
    cmd = cc.replace("$(pkg-config --cflags colibri)", "-I%s" % (REPO / "src" / "lib"))
    subprocess.run(shlex.split(cmd), cwd=str(tmp_path), check=True, timeout=120)
    # the section without its text: the module's own error, with file and line
    broken = re.sub(r"^\s*text = .*\n", "", conf, flags=re.M)
    path = tmp_path / "broken.conf"
    path.write_text("listener 127.0.0.1:0\n" + broken)
    lines = broken.splitlines()
    line = 2 + lines.index(next(l for l in lines if l.strip().startswith("say ")))
    p = subprocess.run([str(colibri_bin()), "-c", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=30, cwd=str(tmp_path))
    assert p.returncode == 1
    assert "%s:%d: say: needs 'text = ...'" % (path, line) in p.stderr
