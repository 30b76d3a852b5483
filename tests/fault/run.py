#!/usr/bin/env python3
"""Fault injection over the black-box suite: `make check-faults`.

1. Record: the whole of tests/http runs once with tests/fault's library in
   every server, which lists the call sites each test's servers reach, and
   the fds each server holds at teardown (the baseline).
2. For every site and every failure kind of its function, the fastest tests
   that reach it (at most --per-site) run again with that site failing on
   every call. What is checked is the server, not the tests (a 500 or a
   close where a test wanted 200 is fine): tests/http/faulthook.py reports,
   per server, whether it died from a signal, answered GET /hello once the
   fault was lifted, got back to the baseline's fds, and stopped with 0 on
   SIGTERM; a pytest run that outlives its time limit is a hang.

Exit status 1 if any run found a problem; the table goes to stdout and to
--out/summary.txt."""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Files the fault runs leave out. test_dates_faketime.py preloads
# libfaketime, whose wrappers (pthread_create, stat, the clocks) allocate and
# open on their own and do not survive a failure: a malloc failed under its
# pthread_create wrapper, attributed to colibri's call site, crashed
# libfaketime, not colibri. The paths those tests reach are the ones
# test_files.py reaches, which the fault runs cover.
# test_h2spec.py: a conformance run (h2spec times each case out), not an
# exchange whose failures are ours to inject
NOT_RUN = {"test_dates_faketime.py", "test_h2spec.py"}

# the failures tried at each site, by function ("X@1": only the first call)
KINDS = {
    "malloc": ["ENOMEM"],
    "calloc": ["ENOMEM"],
    "realloc": ["ENOMEM"],
    "aligned_alloc": ["ENOMEM"],
    "posix_memalign": ["ENOMEM"],
    "open": ["EMFILE"],
    "openat": ["EMFILE"],
    "openat2": ["EMFILE"],
    "mmap": ["ENOMEM"],
    "read": ["ECONNRESET", "short", "EINTR@1"],
    "pread": ["EIO", "short"],
    "write": ["ENOSPC", "short"],
    "writev": ["EPIPE", "short", "EINTR@1"],
    "send": ["EPIPE", "short", "EINTR@1"],
    "sendfile": ["EIO", "short", "EINTR@1"],
    "accept4": ["EMFILE", "ECONNABORTED", "EINTR@1"],
}


# failures a correct server hides completely: the tests must still pass
TRANSPARENT = {"short", "EINTR"}
# ... except the tests that count TCP segments: a short write splits an
# answer into more segments by its nature (they are still judged for
# crashes, hangs and leaked fds like every other)
COUNTS_SEGMENTS = {"test_keepalive.py::test_close_answer_and_fin_share_a_segment"}
# Tests whose fd count at teardown is not judged: they are still judged
# for crashes, hangs and failed assertions. Settled (session 8): the
# extra socket a proxy test's server held under a short or interrupted
# writev was an idle upstream connection in a pool, not a leak (the
# teardown report's "sockets" named its peer: the test's upstream): with
# threads = 2 either worker may accept a client (EPOLLEXCLUSIVE wakes one)
# and each worker keeps its own pool. test_chunked_and_close_delimited_
# answers now runs one worker and one request at a time, and is judged.
# Settled (session 9): test_statuses_and_bodies_pass_through, which a
# fault could end early with a kept connection left in the pool, is
# judged again: a pooled connection is closed as soon as its upstream
# closes it (the test's upstream is killed at teardown).
FD_COUNT_UNSETTLED = set()

# the I/O wrappers are few sites that every answer goes through: more
# tests (of different files) each
IO_FUNCS = {"read", "pread", "write", "writev", "send", "sendfile", "accept4"}


def pick_tests(reached, durations, n):
    """The fastest test of each file that reaches a site, fastest first, n
    of them (so that they differ: websockets, bodies, files, ...); then
    more of the fastest, if there are fewer files than n."""
    known = sorted((t for t in reached if t in durations), key=lambda t: (durations[t], t))
    first, seen = [], set()
    for t in known:
        f = t.split("::")[0]
        if f not in seen:
            seen.add(f)
            first.append(t)
    rest = [t for t in known if t not in first]
    return (first + rest)[:n]


def pytest_cmd(venv, nodeids, extra=()):
    return [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "-rfE"] + list(
        extra
    ) + list(nodeids)


def run_pytest(args, nodeids, env, timeout, extra=()):
    t0 = time.monotonic()
    p = subprocess.Popen(
        pytest_cmd(args.venv, nodeids, extra),
        cwd=str(REPO / "tests" / "http"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = p.communicate(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, _ = p.communicate()
        hung = True
    return hung, p.returncode, time.monotonic() - t0, out.decode("utf-8", "replace")


def base_env(args):
    env = dict(os.environ)
    env["COLIBRI_BIN"] = str(args.bin)
    env["FAULT_LIB"] = str(args.lib)
    for k in ("FAULT_RECORD_DIR", "FAULT_SITE", "FAULT_KIND", "FAULT_NTH", "FAULT_COUNT", "FAULT_BASELINE", "FAULT_REPORT"):
        env.pop(k, None)
    return env


def record(args):
    """The whole suite (or args.files) in args.jobs shards at once, balanced
    by file size."""
    rec = args.out / "sites"
    rec.mkdir(parents=True, exist_ok=True)
    env = base_env(args)
    env["FAULT_RECORD_DIR"] = str(rec)
    env["FAULT_REPORT"] = str(args.out / "baseline.jsonl")
    names = args.files or [p.name for p in (REPO / "tests" / "http").glob("test_*.py") if p.name not in NOT_RUN]
    paths = sorted((REPO / "tests" / "http" / f for f in names), key=lambda p: -p.stat().st_size)
    shards = [[] for _ in range(max(1, args.jobs))]
    for p in paths:
        min(shards, key=lambda sh: sum(q.stat().st_size for q in sh)).append(p)
    t0 = time.monotonic()
    procs = []
    for i, sh in enumerate(shards):
        if not sh:
            continue
        xml = args.out / ("record%d.xml" % i)
        cmd = [str(args.venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no"]
        cmd += ["--junitxml", str(xml)] + [str(p) for p in sh]
        procs.append((xml, subprocess.Popen(cmd, cwd=str(REPO / "tests" / "http"), env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    tails = []
    for xml, p in procs:
        out, _ = p.communicate(timeout=args.record_timeout)
        tails += out.decode("utf-8", "replace").strip().splitlines()[-1:]
    print("record run: %.0f s, %s" % (time.monotonic() - t0, " / ".join(tails)), flush=True)
    durations = {}
    for xml, _ in procs:
        for tc in ET.parse(xml).getroot().iter("testcase"):
            mod, *cls = tc.get("classname", "").split(".")
            node = "::".join([mod + ".py"] + cls + [tc.get("name")])
            durations[node] = float(tc.get("time", "0"))
    sites = collections.defaultdict(set)
    for path in rec.glob("*.sites"):
        test = None
        for line in path.read_text().splitlines():
            if line.startswith("# "):
                test = re.sub(r" \((setup|call|teardown)\)$", "", line[2:])
                test = test.split("/")[-1]
            elif line:
                sites[line].add(test)
    return sites, durations


def resolve(args, sites):
    """site -> 'function file:line', through addr2line (return address - 1)."""
    keys = sorted(sites)
    addrs = ["%#x" % (int(k.split(":")[1], 16) - 1) for k in keys]
    out = subprocess.run(
        ["addr2line", "-f", "-s", "-e", str(args.bin)] + addrs, stdout=subprocess.PIPE, text=True
    ).stdout.splitlines()
    return {k: "%s %s" % (out[2 * i], out[2 * i + 1]) for i, k in enumerate(keys)} if len(out) == 2 * len(keys) else {}


def judge(hung, reports, out):
    """The problems of one run, as short strings."""
    problems = []
    if hung:
        problems.append("hang: pytest run killed at its time limit")
    for r in reports:
        rc = r.get("rc")
        who = "%s %s" % (r.get("test"), r.get("server"))
        if r["phase"] == "start":
            if rc is None:
                problems.append("%s: neither started nor exited" % who)
            elif rc < 0:
                problems.append("%s: died at start-up with signal %d" % (who, -rc))
            elif not re.search(r"colibri: .*\S", r.get("stderr", "")):
                problems.append("%s: exited %d at start-up without saying why" % (who, rc))
            continue
        if rc is not None and rc > 0 and re.search(r"^colibri: \S", r.get("stderr", ""), re.M):
            continue  # a start-up failure after the port was bound (the pid file): said, exit 1
        if rc is not None and rc < 0:
            problems.append("%s: died with signal %d" % (who, -rc))
        elif r.get("was_running") and rc is None:
            problems.append("%s: did not stop on SIGTERM" % who)
        elif r.get("was_running") and rc != 0:
            problems.append("%s: SIGTERM exit %r" % (who, rc))
        if r.get("was_running") and r.get("probe") != "ok":
            problems.append("%s: after the fault: %s" % (who, r.get("probe")))
        if r.get("excess_fds") and not str(r.get("test", "")).endswith(tuple(FD_COUNT_UNSETTLED)):
            problems.append("%s: fds leaked: %s" % (who, r["excess_fds"]))
    if re.search(r"ERROR: \w*Sanitizer|runtime error:", out):
        problems.append("sanitizer report")
    return problems


def one(args, site, kind, tests):
    if time.monotonic() > args.deadline:
        return site, kind, tests, False, 0.0, None, 0, []
    env = base_env(args)
    env["FAULT_SITE"] = site
    k, _, count = kind.partition("@")
    env["FAULT_KIND"] = k
    if count:
        env["FAULT_COUNT"] = count
    env["FAULT_BASELINE"] = str(args.out / "baseline.jsonl")
    rep = args.out / "runs" / ("%s-%s.jsonl" % (site.replace(":", "-"), kind.replace("@", "-")))
    rep.unlink(missing_ok=True)
    env["FAULT_REPORT"] = str(rep)
    hung, rc, secs, out = run_pytest(args, tests, env, timeout=args.run_timeout + 15 * len(tests))
    reports = [json.loads(line) for line in rep.read_text().splitlines()] if rep.exists() else []
    injected = sum(max(0, r.get("injected", 0)) for r in reports)
    problems = judge(hung, reports, out)
    if k in TRANSPARENT and rc != 0 and not hung:
        # a short count or an EINTR is no error: the tests must pass as they are
        failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)
        if not failed or any(not f.endswith(tuple(COUNTS_SEGMENTS)) for f in failed):
            problems.append("tests failed under %s (lost data?): %s" % (kind, " ".join(failed) or out[-300:]))
    return site, kind, tests, hung, secs, reports, injected, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", type=Path, default=REPO / "build-fault" / "colibri")
    ap.add_argument("--lib", type=Path, default=REPO / "build-fault" / "libfault.so")
    ap.add_argument("--venv", type=Path, default=REPO / ".venv")
    ap.add_argument("--out", type=Path, default=REPO / "build-fault" / "faults")
    ap.add_argument("--per-site", type=int, default=2, help="tests run per site (the fastest that reach it)")
    ap.add_argument("--per-site-io", type=int, default=5, help="the same for %s" % ", ".join(sorted(IO_FUNCS)))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--run-timeout", type=float, default=30.0)
    ap.add_argument("--record-timeout", type=float, default=600.0)
    ap.add_argument("--budget", type=float, default=900.0,
                    help="seconds for the whole check; runs not started by then are skipped (and counted)")
    ap.add_argument("--only", default="", help="regex: only the sites matching it")
    ap.add_argument("files", nargs="*", help="test files of tests/http to record (default: all)")
    args = ap.parse_args()
    args.bin, args.lib, args.venv, args.out = (p.resolve() for p in (args.bin, args.lib, args.venv, args.out))
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    for f in (args.out / "baseline.jsonl",):
        f.unlink(missing_ok=True)
    for f in (args.out / "sites").glob("*.sites") if (args.out / "sites").exists() else []:
        f.unlink()

    t0 = time.monotonic()
    args.deadline = t0 + args.budget
    sites, durations = record(args)
    names = resolve(args, sites)
    plan = []
    for site in sorted(sites):
        if args.only and not re.search(args.only, site + " " + names.get(site, "")):
            continue
        fn = site.split(":")[0]
        tests = pick_tests(sites[site], durations, args.per_site_io if fn in IO_FUNCS else args.per_site)
        if not tests:
            continue
        for kind in KINDS.get(fn, []):
            plan.append((site, kind, tests))
    print("%d sites, %d runs" % (len(sites), len(plan)), flush=True)

    results, skipped = [], 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        for r in ex.map(lambda p: one(args, *p), plan):
            site, kind, tests, hung, secs, reports, injected, problems = r
            if reports is None:
                skipped += 1
                continue
            results.append(r)
            mark = "FAIL" if problems else ("ok" if injected else "not hit")
            print("%-4s %-24s %-12s %-45s %4.1fs %s" % (mark, site, kind, names.get(site, "?")[:45], secs,
                                                  "; ".join(problems)[:300]), flush=True)

    by_fn = collections.defaultdict(lambda: [set(), 0, 0, 0])
    for site, kind, tests, hung, secs, reports, injected, problems in results:
        e = by_fn[site.split(":")[0]]
        e[0].add(site)
        e[1] += 1
        e[2] += bool(injected)
        e[3] += bool(problems)
    lines = ["%-15s %6s %6s %9s %9s" % ("function", "sites", "runs", "injected", "problems")]
    for fn in KINDS:
        if fn in by_fn:
            s, runs, hit, bad = by_fn[fn]
            lines.append("%-15s %6d %6d %9d %9d" % (fn, len(s), runs, hit, bad))
    total_bad = sum(bool(r[7]) for r in results)
    lines.append("%d runs, %d with problems, %d skipped (time budget), %.0f s"
                 % (len(results), total_bad, skipped, time.monotonic() - t0))
    for site, kind, tests, hung, secs, reports, injected, problems in results:
        if problems:
            lines.append("PROBLEM %s %s (%s) %s: %s" % (site, kind, names.get(site, "?"), " ".join(tests), "; ".join(problems)))
    text = "\n".join(lines)
    print(text)
    (args.out / "summary.txt").write_text(text + "\n")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
