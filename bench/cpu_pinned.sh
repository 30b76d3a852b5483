#!/usr/bin/env bash
# cpu_pinned.sh - server CPU time per keep-alive GET /hello: this build
# against another colibri binary (BASE, e.g. one built before a change).
#
# Both servers run with threads = 1, pinned with taskset to SERVER_CPU; wrk
# -t1 -c64 is pinned to WRK_CPU, so the load generator never takes the
# server's core. Per round and binary: utime + stime of every thread of the
# server (/proc/PID/task/*/stat) before and after one wrk run, divided by
# the requests wrk completed. Rounds alternate between the two binaries,
# and which one goes first alternates too; the script prints every round,
# the medians, and the median of the per-round ratios this/base. Both
# servers stay up for the whole run; the one not being measured is idle.
# utime and stime are counted in clock ticks (10 ms): a 5 s round of
# ~600k requests resolves the user time to a few per cent.
#
# Environment: BASE (required: the other colibri binary), BUILD or COLIBRI
# as for run.sh, ROUNDS (5), DURATION (5s), SERVER_CPU (0), WRK_CPU (1);
# THIS_CONF_EXTRA: config lines for "this" server only (@TMP@ = the scratch
# dir), so one binary can be measured against itself with a setting on:
#   BASE=build/colibri THIS_CONF_EXTRA='access_log = @TMP@/access.log' bench/cpu_pinned.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5s}
SERVER_CPU=${SERVER_CPU:-0}
WRK_CPU=${WRK_CPU:-1}
[ -n "${BASE:-}" ] || bench_die "set BASE to the colibri binary to compare with"
[ -x "$BASE" ] || bench_die "no colibri binary at $BASE"
bench_need wrk taskset python3
bench_setup

read -r aport bport <<<"$($PY ports 2)"
BENCH_CONF_EXTRA=${THIS_CONF_EXTRA:-} bench_start_colibri 1 "$aport" taskset -c "$SERVER_CPU"
apid=$COLIBRI_PID
acmd=$COLIBRI_CMD
this=$COLIBRI
COLIBRI=$BASE
bench_start_colibri 1 "$bport" taskset -c "$SERVER_CPU"
bpid=$COLIBRI_PID
bcmd=$COLIBRI_CMD
COLIBRI=$this
$PY wait "$aport" 10 "$apid" && $PY wait "$bport" 10 "$bpid" || bench_die "servers did not start"

# utime and stime (clock ticks) of every thread of PID (taskset execs the
# server, so PID is the server)
ticks() {
    local u=0 s=0 t f
    for t in /proc/"$1"/task/*; do
        read -r -a f <"$t/stat" || continue
        u=$((u + f[13]))
        s=$((s + f[14]))
    done
    echo "$u $s"
}

load() { # PORT DURATION -> wrk's output
    taskset -c "$WRK_CPU" wrk -t1 -c64 -d"$2" "http://127.0.0.1:$1/hello"
}

measure() { # PID PORT -> "requests req/s user_us sys_us"
    local u0 s0 u1 s1 out n rps
    read -r u0 s0 <<<"$(ticks "$1")"
    out=$(load "$2" "$DURATION")
    read -r u1 s1 <<<"$(ticks "$1")"
    if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
        echo "$out" >&2
        bench_die "wrk reported errors"
    fi
    n=$(awk '/requests in/ {print $1}' <<<"$out")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    python3 -c "import os; hz = os.sysconf('SC_CLK_TCK'); n = $n
print(n, '$rps', '%.3f' % (($u1 - $u0) / hz * 1e6 / n), '%.3f' % (($s1 - $s0) / hz * 1e6 / n))"
}

# warm-up, not counted
load "$aport" 1s >/dev/null
load "$bport" 1s >/dev/null

results=$BENCH_TMP/cpu-pinned.txt
: >"$results"
echo "| round | binary | requests | req/s | user µs/req | system µs/req | total µs/req |"
echo "|---:|---|---:|---:|---:|---:|---:|"
for ((i = 1; i <= ROUNDS; i++)); do
    if ((i % 2)); then order="this base"; else order="base this"; fi
    for which in $order; do
        if [ "$which" = this ]; then r=$(measure "$apid" "$aport"); else r=$(measure "$bpid" "$bport"); fi
        read -r n rps u s <<<"$r"
        echo "$i $which $n $rps $u $s" >>"$results"
        echo "| $i | $which | $n | $rps | $u | $s | $(python3 -c "print('%.3f' % ($u + $s))") |"
    done
done

echo
echo "this: $acmd${THIS_CONF_EXTRA:+  (config plus: $THIS_CONF_EXTRA)}"
echo "base: $bcmd"
echo "wrk: taskset -c $WRK_CPU wrk -t1 -c64 -d$DURATION http://127.0.0.1:PORT/hello"
python3 - "$results" <<'EOF'
import statistics, sys
rows = {"this": [], "base": []}
by_round = {}
for line in open(sys.argv[1]):
    i, w, n, rps, u, s = line.split()
    rows[w].append((float(u), float(s), float(u) + float(s), float(rps)))
    by_round.setdefault(i, {})[w] = float(u) + float(s)
ratios = sorted(r["this"] / r["base"] for r in by_round.values())
med = {w: [statistics.median(r[i] for r in rs) for i in range(4)] for w, rs in rows.items()}
print()
print("Medians of %d rounds each:" % len(rows["this"]))
print()
print("| binary | user µs/req | system µs/req | total µs/req | req/s |")
print("|---|---:|---:|---:|---:|")
for w in ("base", "this"):
    m = med[w]
    print("| %s | %.3f | %.3f | %.3f | %.0f |" % (w, m[0], m[1], m[2], m[3]))
print()
print("this/base total CPU per request, round by round: median %.3f, range %.3f-%.3f"
      % (statistics.median(ratios), ratios[0], ratios[-1]))
print()
print("SUMMARY: server CPU per keep-alive /hello, median: base %.3f us, this %.3f us (this/base %.3f);"
      " user base %.3f, this %.3f"
      % (med["base"][2], med["this"][2], med["this"][2] / med["base"][2], med["base"][0], med["this"][0]))
EOF
