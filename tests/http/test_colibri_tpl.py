"""colibri-tpl TEMPLATE [DATA.json]: errors in the data file name the file,
with a line and a column only when jansson knows a real one."""

import re
import subprocess

import pytest

from conftest import colibri_tpl_bin


def run_tpl(tmp_path, data, template="hi {{x}}\n"):
    binary = colibri_tpl_bin()
    if not binary.exists():
        pytest.fail("colibri-tpl not found: %s (set COLIBRI_BIN)" % binary)
    tpl = tmp_path / "page.mustache"
    tpl.write_text(template)
    p = subprocess.run([str(binary), str(tpl), str(data)], cwd=tmp_path, capture_output=True, timeout=10)
    err = p.stderr.decode("utf-8", "replace")
    assert "Sanitizer" not in err and "runtime error:" not in err, err
    return p, err


def check_error(p, err, pattern):
    assert p.returncode == 1, (p.returncode, err)
    assert p.stdout == b"", p.stdout
    assert re.fullmatch(pattern, err), "stderr %r does not match %r" % (err, pattern)
    assert ":-1" not in err and ":0:" not in err, err


def test_renders_with_data(tmp_path):
    data = tmp_path / "data.json"
    data.write_text('{"x": "there"}')
    p, err = run_tpl(tmp_path, data)
    assert p.returncode == 0, err
    assert p.stdout == b"hi there\n"


def test_missing_data_file(tmp_path):
    data = tmp_path / "nope.json"
    p, err = run_tpl(tmp_path, data)
    check_error(p, err, r"colibri-tpl: %s: No such file or directory\n" % re.escape(str(data)))


def test_data_file_is_a_directory(tmp_path):
    data = tmp_path / "dir.json"
    data.mkdir()
    p, err = run_tpl(tmp_path, data)
    check_error(p, err, r"colibri-tpl: %s: Is a directory\n" % re.escape(str(data)))


def test_bad_json_has_line_and_column(tmp_path):
    data = tmp_path / "bad.json"
    data.write_text('{"x": 1,\n  "y": }\n')
    p, err = run_tpl(tmp_path, data)
    check_error(p, err, r"colibri-tpl: %s:2:8: \S.*\n" % re.escape(str(data)))


def test_empty_json_has_a_line_only(tmp_path):
    # jansson puts the end of an empty file at column 0, which is no column
    data = tmp_path / "empty.json"
    data.write_text("")
    p, err = run_tpl(tmp_path, data)
    check_error(p, err, r"colibri-tpl: %s:1: \S.*\n" % re.escape(str(data)))
