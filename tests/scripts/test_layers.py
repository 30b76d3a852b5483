"""The layer check (scripts/layers.py) passes on the tree and fails on an
include that points up, or at another folder's private header."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "layers.py")


def run(root):
    return subprocess.run([sys.executable, SCRIPT, "--root", str(root)], capture_output=True,
                          text=True, timeout=60)


def copy_tree(tmp_path):
    shutil.copytree(os.path.join(ROOT, "src"), tmp_path / "src")
    shutil.copy(os.path.join(ROOT, "ARCHITECTURE.md"), tmp_path / "ARCHITECTURE.md")
    return tmp_path


def add_line(path, line):
    text = path.read_text()
    path.write_text(line + "\n" + text)


def test_the_tree_keeps_its_layers():
    r = run(ROOT)
    assert r.returncode == 0, r.stderr


def test_an_include_of_a_layer_above_fails(tmp_path):
    root = copy_tree(tmp_path)
    add_line(root / "src/lib/rt/tq.c", '#include "http/http.h"')
    r = run(root)
    assert r.returncode == 1
    assert 'src/lib/rt/tq.c:1: includes "http/http.h": rt/ may include only base' in r.stderr


def test_a_leaf_including_the_runtime_fails(tmp_path):
    # what tpl/render.c did before coroutines moved to base/
    root = copy_tree(tmp_path)
    add_line(root / "src/lib/tpl/render.c", '#include "rt/conn.h"')
    r = run(root)
    assert r.returncode == 1
    assert "src/lib/tpl/render.c:1: includes \"rt/conn.h\"" in r.stderr


def test_a_private_header_outside_its_folder_fails(tmp_path):
    root = copy_tree(tmp_path)
    add_line(root / "src/lib/http/wait.c", '#include "rt/internal.h"')
    r = run(root)
    assert r.returncode == 1
    assert 'src/lib/http/wait.c:1: includes "rt/internal.h": private to rt/' in r.stderr


def test_a_folder_without_a_row_fails(tmp_path):
    root = copy_tree(tmp_path)
    (root / "src/lib/newdir").mkdir()
    (root / "src/lib/newdir/x.c").write_text('#include "base/common.h"\n')
    r = run(root)
    assert r.returncode == 1
    assert "folder 'newdir' has no row" in r.stderr


def test_a_table_missing_is_an_error(tmp_path):
    root = copy_tree(tmp_path)
    (root / "ARCHITECTURE.md").write_text("no table here\n")
    r = run(root)
    assert r.returncode == 2
    assert "no <!-- layers --> table" in r.stderr
