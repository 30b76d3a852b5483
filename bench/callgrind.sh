#!/usr/bin/env bash
# callgrind.sh - instructions per keep-alive request in colibri: GET /hello,
# a cached 4 KiB file and a 1 MiB file.
#
# colibri (threads = 1) runs under `valgrind --tool=callgrind` four times,
# each time with one keep-alive connection from `benchlib.py drive`. Every
# run starts with the same warm-up on that connection: one GET each of
# /hello, /4k.bin and /1m.bin, the files' cache misses. Then one run sends N
# more GETs of /hello, one N of /4k.bin, one N of /1m.bin, and one nothing
# (it only starts, answers the readiness probe and the warm-up, and stops).
# Per request = (Ir(N) - Ir(0)) / N for each kind, which cancels start-up,
# the warm-up (the misses) and shutdown: what is left is the cached path.
# The files are those of bench_setup (lib.sh), served by serve_files with
# cache_for = 1h, so no entry expires during a run. Requests carry
# `Host: 127.0.0.1:PORT`, as wrk and curl send it. The server is stopped
# with SIGTERM and must exit 0 (graceful shutdown).
#
# Every thread is counted. Two things follow the clock, not the requests:
# the cache's pruning thread wakes once a second while the cache holds
# entries (about 2,400 Ir a wake), and the Date header is formatted once a
# second. A run that lasts a second longer counts them once more, so a
# figure can move by 1-2 instructions per request between runs at N = 2000.
#
# Environment: N (default 2000), BUILD or COLIBRI as for run.sh, TOP (15),
# BENCH_CONF_EXTRA (config lines added, @TMP@ = the scratch dir: e.g.
# 'access_log = @TMP@/access.log' to count the access log's cost),
# KEEP_TMP=1 keeps the callgrind.out files for callgrind_annotate/kcachegrind.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${N:-2000}
TOP=${TOP:-15}
[ "$N" -gt 0 ] || bench_die "N must be positive"
bench_need valgrind callgrind_annotate python3
bench_setup
BENCH_CACHE_FOR=1h

# kind name -> request path
declare -A PATHS=([hello]=/hello [4k]=/4k.bin [1m]=/1m.bin)
KINDS="hello 4k 1m"

problems=0
# profiled KIND COUNT -> $BENCH_TMP/callgrind-KIND.out (KIND 0: warm-up only)
profiled() {
    local kind=$1 n=$2 out=$BENCH_TMP/callgrind-$1.out port path=${PATHS[$1]:-/hello}
    port=$($PY ports 1)
    # valgrind runs the program in its own process: COLIBRI_PID is colibri
    bench_start_colibri 1 "$port" valgrind --tool=callgrind --callgrind-out-file="$out"
    $PY wait "$port" 60 "$COLIBRI_PID" || { cat "$COLIBRI_LOG" >&2; exit 1; }
    timeout 300 $PY drive "$port" "$BENCH_ROOT" "$n" "$path" >/dev/null ||
        { tail -n 30 "$COLIBRI_LOG" >&2; bench_die "colibri failed while driving $n x $path"; }
    bench_stop "$COLIBRI_PID" 60
    if [ "$BENCH_STATUS" != 0 ]; then
        echo "bench: colibri under callgrind exited with status $BENCH_STATUS after SIGTERM (want 0); log:" >&2
        tail -n 30 "$COLIBRI_LOG" >&2
        problems=$((problems + 1))
    fi
    [ -s "$out" ] || bench_die "callgrind wrote no $out"
    callgrind_annotate --auto=no --threshold=100 "$out" >"$out.annotate"
}

profiled 0 0
for kind in $KINDS; do
    profiled "$kind" "$N"
done
echo "Command: $COLIBRI_CMD  (threads = 1, cache_for = 1h${BENCH_CONF_EXTRA:+; plus: $BENCH_CONF_EXTRA})"
echo "         driven by python3 bench/benchlib.py drive PORT ROOT N PATH: one connection,"
echo "         a warm-up GET of /hello, /4k.bin, /1m.bin, then N = $N GETs of PATH"
echo "         (/hello, /4k.bin, /1m.bin: one run each), and a run with N = 0"
echo "Profiles: $BENCH_TMP/callgrind-{0,hello,4k,1m}.out (KEEP_TMP=1 keeps them)"

python3 - "$BENCH_DIR" "$BENCH_TMP" "$N" "$TOP" <<'EOF'
import re, sys
sys.path.insert(0, sys.argv[1])
import benchlib
tmp, n, top = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
KINDS = (("hello", "GET /hello"), ("4k", "GET /4k.bin (4 KiB, cached)"),
         ("1m", "GET /1m.bin (1 MiB, cached)"))
row = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*?)\s*$")

def functions(path):
    out, on = {}, False
    with open(path) as f:
        for line in f:
            if "file:function" in line:
                on = True
                continue
            m = row.match(line) if on else None
            if m:
                # drop the object in brackets: same function, same key in both runs
                name = re.sub(r"\s*\[.*\]$", "", m.group(2))
                out[name] = out.get(name, 0) + int(m.group(1).replace(",", ""))
    return out

t0 = benchlib.cg_total("%s/callgrind-0.out" % tmp)
f0 = functions("%s/callgrind-0.out.annotate" % tmp)
result = {}
for kind, title in KINDS:
    tn = benchlib.cg_total("%s/callgrind-%s.out" % (tmp, kind))
    fn = functions("%s/callgrind-%s.out.annotate" % (tmp, kind))
    per = {k: (fn.get(k, 0) - f0.get(k, 0)) / n for k in set(f0) | set(fn)}
    result[kind] = (tn - t0) / n
    print()
    print("%s: per-request self Ir by function, (Ir(N) - Ir(0)) / N, top %d:" % (title, top))
    print()
    print("| Ir/request | function |")
    print("|---:|---|")
    for k in sorted(per, key=lambda k: -per[k])[:top]:
        print("| %.1f | %s |" % (per[k], k))
    print()
    print("Ir(0) = {:,}  Ir({}) = {:,}  ->  {:.0f} per request".format(t0, n, tn, result[kind]))
print()
print("Instructions per keep-alive request (N=%d, threads=1):" % n)
print()
print("| request | instructions |")
print("|---|---:|")
for kind, title in KINDS:
    print("| %s | %.0f |" % (title, result[kind]))
print()
print("SUMMARY: instructions per keep-alive request: /hello %.0f, 4 KiB %.0f, 1 MiB %.0f (N=%d, threads=1)"
      % (result["hello"], result["4k"], result["1m"], n))
EOF
[ "$problems" = 0 ] || exit 1
