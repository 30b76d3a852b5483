#!/usr/bin/env bash
# callgrind.sh - instructions per keep-alive GET /hello in colibri.
#
# colibri (threads = 1) runs under `valgrind --tool=callgrind` twice: once
# driven with N requests on one keep-alive connection, once with none (it only
# starts, answers the readiness probe and stops). Per request =
# (Ir(N) - Ir(0)) / N, which cancels start-up and shutdown. The server is
# stopped with SIGTERM and must exit 0 (graceful shutdown).
#
# Environment: N (default 2000), BUILD or COLIBRI as for run.sh, TOP (15),
# KEEP_TMP=1 keeps the callgrind.out files for callgrind_annotate/kcachegrind.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${N:-2000}
TOP=${TOP:-15}
[ "$N" -gt 0 ] || bench_die "N must be positive"
bench_need valgrind callgrind_annotate python3
bench_setup

problems=0
# profiled COUNT -> $BENCH_TMP/callgrind-COUNT.out
profiled() {
    local n=$1 out=$BENCH_TMP/callgrind-$1.out port
    port=$($PY ports 1)
    # valgrind runs the program in its own process: COLIBRI_PID is colibri
    bench_start_colibri 1 "$port" valgrind --tool=callgrind --callgrind-out-file="$out"
    $PY wait "$port" 60 "$COLIBRI_PID" || { cat "$COLIBRI_LOG" >&2; exit 1; }
    if [ "$n" -gt 0 ]; then
        timeout 300 $PY drive "$port" "$n" >/dev/null ||
            { tail -n 30 "$COLIBRI_LOG" >&2; bench_die "colibri failed while driving $n requests"; }
    fi
    bench_stop "$COLIBRI_PID" 60
    if [ "$BENCH_STATUS" != 0 ]; then
        echo "bench: colibri under callgrind exited with status $BENCH_STATUS after SIGTERM (want 0); log:" >&2
        tail -n 30 "$COLIBRI_LOG" >&2
        problems=$((problems + 1))
    fi
    [ -s "$out" ] || bench_die "callgrind wrote no $out"
    callgrind_annotate --auto=no --threshold=100 "$out" >"$out.annotate"
}

profiled 0
profiled "$N"
echo "Command: $COLIBRI_CMD  (threads = 1)"
echo "         driven by python3 bench/benchlib.py drive PORT $N, and once without it"
echo

echo "Top $TOP functions by Ir, run with $N requests (callgrind_annotate $BENCH_TMP/callgrind-$N.out):"
echo
# the function table follows the second "file:function" header
awk -v top="$TOP" '/file:function/ { on = 1; getline; next }
    on && NF { print; if (++k == top) exit }' "$BENCH_TMP/callgrind-$N.out.annotate"
echo

python3 - "$BENCH_DIR" "$BENCH_TMP" "$N" "$TOP" <<'EOF'
import re, sys
sys.path.insert(0, sys.argv[1])
import benchlib
tmp, n, top = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
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
tn = benchlib.cg_total("%s/callgrind-%d.out" % (tmp, n))
f0 = functions("%s/callgrind-0.out.annotate" % tmp)
fn = functions("%s/callgrind-%d.out.annotate" % (tmp, n))
per = {k: (fn.get(k, 0) - f0.get(k, 0)) / n for k in set(f0) | set(fn)}
print("Per-request self Ir by function, (Ir(N) - Ir(0)) / N, top %d:" % top)
print()
print("| Ir/request | function |")
print("|---:|---|")
for k in sorted(per, key=lambda k: -per[k])[:top]:
    print("| %.1f | %s |" % (per[k], k))
print()
print("Ir(0) = {:,}  Ir({}) = {:,}".format(t0, n, tn))
print("SUMMARY: %.0f instructions per keep-alive GET /hello (N=%d, threads=1)" % ((tn - t0) / n, n))
EOF
[ "$problems" = 0 ] || exit 1
