#!/usr/bin/env python3
"""cg_objects.py - a callgrind output's instructions by shared object (self
cost: what each object's own code executed), for bench/tls_breakdown.sh.

Usage: cg_objects.py CALLGRIND.OUT [DIVISOR]
Prints one line per object, "NAME INSTRUCTIONS" (divided by DIVISOR, e.g.
the number of requests), largest first, then "total".
"""
import collections
import os
import re
import sys


def by_object(path):
    names = {}  # compressed "(n)" -> name, per kind ("ob", "fl", ...)
    cost = collections.Counter()
    ob = None
    after_calls = False
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if after_calls:  # the inclusive cost of a call: not self
                    after_calls = False
                    continue
                parts = line.split()
                if len(parts) > 1 and ob is not None:
                    cost[ob] += int(parts[1])
                continue
            m = re.match(r"(\w+)=(.*)", line)
            if not m:
                continue
            key, val = m.groups()
            if key == "calls":
                after_calls = True
                continue
            if key in ("ob", "cob"):
                mm = re.match(r"\((\d+)\)(?: (.*))?", val)
                if mm:
                    if mm.group(2):
                        names[mm.group(1)] = mm.group(2)
                    val = names.get(mm.group(1), val)
                if key == "ob":
                    ob = val
    return cost


def main():
    cost = by_object(sys.argv[1])
    div = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    total = sum(cost.values())
    for ob, n in cost.most_common():
        if n / div >= 1:
            print("%-40s %12.0f %5.1f%%" % (os.path.basename(ob), n / div, 100.0 * n / total))
    print("%-40s %12.0f" % ("total", total / div))


if __name__ == "__main__":
    main()
