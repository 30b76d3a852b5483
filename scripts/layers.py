#!/usr/bin/env python3
"""layers.py - the layer check: every #include "..." under src/ must point
down (or sideways into the same folder), as the table in ARCHITECTURE.md
says.

The table is the one between the `<!-- layers -->` and `<!-- /layers -->`
marks of ARCHITECTURE.md: one row per folder (several folders in a cell
share a row), and the folders, headers or single files it may include.
A folder of src/lib always includes itself. A header named in the
"private" column of a row may be included only from that row's folders.
Includes without a slash are the generated tables in build/gen, open to
all; <...> includes are the system's and not checked.

Usage: scripts/layers.py [--root DIR] [--table FILE]
Exits 0 when every include is allowed, 1 with one line per violation
(FILE:LINE: includes "X": FOLDER may include only ...), 2 on a bad table.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def parse_table(path):
    """{folder: set of allowed targets}, {private header: set of folders}"""
    text = open(path, encoding="utf-8").read()
    m = re.search(r"<!-- layers -->(.*?)<!-- /layers -->", text, re.S)
    if not m:
        raise ValueError(f"{path}: no <!-- layers --> table")
    allowed, private = {}, {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0] or set(cells[0]) <= set("-: "):
            continue
        if cells[0].lower().startswith("folder"):
            continue
        names = lambda cell: [w.strip("`") for w in re.split(r"[,\s]+", cell) if w.strip("`")]
        folders = [f.rstrip("/") for f in names(cells[0])]
        targets = {t.rstrip("/") for t in names(cells[1]) if t != "-"}
        for f in folders:
            allowed[f] = targets | {f}
        if len(cells) > 2:
            for p in names(cells[2]):
                if p != "-":
                    private.setdefault(p, set()).update(folders)
    if not allowed:
        raise ValueError(f"{path}: the layers table has no rows")
    return allowed, private


def folder_of(rel):
    """The table's name for a file under src/: lib/X/... -> X, bin/X/... -> bin,
    lib/colibri.h -> colibri.h."""
    parts = rel.split("/")
    if parts[0] == "bin":
        return "bin"
    if parts[0] == "lib" and len(parts) == 2:
        return parts[1]
    return parts[1]


def target_allowed(target, targets):
    if target in targets:
        return True
    top = target.split("/")[0]
    return "/" in target and top in targets


def check(root, table):
    allowed, private = parse_table(table)
    src = os.path.join(root, "src")
    errors = []
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".c", ".h", ".S")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            me = folder_of(rel)
            if me not in allowed:
                errors.append(f"src/{rel}: folder '{me}' has no row in the layers table")
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    t = m.group(1)
                    if "/" not in t and t != "colibri.h":
                        continue  # a generated table (build/gen), or a file beside it
                    own = t.split("/")[0] == me
                    if t in private and me not in private[t]:
                        errors.append(
                            f"src/{rel}:{n}: includes \"{t}\": private to "
                            f"{', '.join(sorted(private[t]))}/"
                        )
                    elif not own and not target_allowed(t, allowed[me]):
                        errors.append(
                            f"src/{rel}:{n}: includes \"{t}\": {me}/ may include only "
                            f"{', '.join(sorted(allowed[me] - {me}))} (ARCHITECTURE.md, layers)"
                        )
    return errors


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--table", default=None)
    a = ap.parse_args()
    table = a.table or os.path.join(a.root, "ARCHITECTURE.md")
    try:
        errors = check(a.root, table)
    except (OSError, ValueError) as e:
        print(f"layers: {e}", file=sys.stderr)
        return 2
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
