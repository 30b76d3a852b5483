#!/usr/bin/env python3
"""Run the official Mustache spec through colibri-tpl.

    python3 tests/spec/run_spec.py BUILD/colibri-tpl SPEC_DIR

For every test of every SPEC_DIR/*.json (except ~lambdas.json: lambdas are C
callbacks, covered by the unit tests) the template, its partials (one file
each, named exactly as the partial) and its data go into a fresh directory,
and `colibri-tpl TEMPLATE DATA` must print the expected text byte for byte.
Prints each failure with a diff and a summary line per file, then
"N passed, M failed"; exits 1 if anything failed.
"""

import difflib
import glob
import json
import os
import subprocess
import sys
import tempfile

SKIP = {"~lambdas.json"}
# A name no spec partial uses, so {{>x}} never finds the template itself.
TEMPLATE = "__template__.mustache"


def run_test(tool, test, workdir):
    for name, text in (test.get("partials") or {}).items():
        with open(os.path.join(workdir, name), "w", encoding="utf-8", newline="") as f:
            f.write(text)
    template = os.path.join(workdir, TEMPLATE)
    with open(template, "w", encoding="utf-8", newline="") as f:
        f.write(test["template"])
    data = os.path.join(workdir, "__data__.json")
    with open(data, "w", encoding="utf-8") as f:
        json.dump(test["data"], f)
    proc = subprocess.run([tool, template, data], capture_output=True, timeout=10)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode(
        "utf-8", "replace"
    )


def describe_failure(path, test, status, got, stderr):
    lines = [f"FAIL {os.path.basename(path)}: {test['name']} - {test.get('desc', '').strip()}"]
    if status != 0:
        lines.append(f"  exit status {status}: {stderr.strip()}")
    diff = difflib.unified_diff(
        test["expected"].splitlines(keepends=True),
        got.splitlines(keepends=True),
        "expected",
        "got",
    )
    lines += ["  " + repr(d) for d in diff]
    return "\n".join(lines)


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    tool, spec_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    files = sorted(glob.glob(os.path.join(spec_dir, "*.json")))
    if not files:
        print(f"no spec files in {spec_dir}", file=sys.stderr)
        return 2
    passed = failed = 0
    summary = []
    for path in files:
        if os.path.basename(path) in SKIP:
            continue
        with open(path, encoding="utf-8") as f:
            tests = json.load(f)["tests"]
        ok = 0
        for test in tests:
            with tempfile.TemporaryDirectory() as workdir:
                status, got, stderr = run_test(tool, test, workdir)
            if status == 0 and got == test["expected"]:
                ok += 1
            else:
                print(describe_failure(path, test, status, got, stderr))
        summary.append(f"{os.path.basename(path)}: {ok}/{len(tests)}")
        passed += ok
        failed += len(tests) - ok
    print("\n".join(summary))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
