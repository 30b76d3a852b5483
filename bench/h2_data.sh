#!/usr/bin/env bash
# h2_data.sh - what an h2c file answer costs colibri: system calls (strace -c)
# and instructions (callgrind, by shared object) per request.
#
# colibri (threads = 1, cache_for = 1h) serves bench_setup's files; h2load
# sends `h2load -n N -c 4 -m 16` on h2c (prior knowledge) for each path.
# strace: the server under `strace -f -c`, calls per request = total / N.
# callgrind: the server under callgrind twice, once with N requests and
# once with N0 (warm-up: one request per path first in both); per request =
# (Ir(N) - Ir(N0)) / (N - N0), by object (bench/cg_objects.py).
#
# Environment: N (2000), N0 (200), PATHS ("/4k.bin /1m.bin"), BUILD or
# COLIBRI as for run.sh, SKIP_STRACE=1, SKIP_CALLGRIND=1. SERVER=h2o runs
# the callgrind part on h2o 2.2.5 instead (bench/h2o.conf.in, one thread;
# h2o forks helpers, so callgrind follows children and the counts are the
# serving process's: the one valgrind started).
#
#   bench/h2_data.sh
#   COLIBRI=/tmp/colibri.base bench/h2_data.sh
#   SERVER=h2o SKIP_STRACE=1 PATHS="/hello.txt /4k.bin" bench/h2_data.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${N:-2000}
N0=${N0:-200}
PATHS=${PATHS:-"/4k.bin /1m.bin"}
bench_need h2load strace valgrind python3
bench_setup
BENCH_CACHE_FOR=1h

warm() {
    local port=$1 p
    for p in $PATHS; do
        h2load -n 1 -c 1 "http://127.0.0.1:$port$p" >/dev/null
    done
}

if [ -z "${SKIP_STRACE:-}" ]; then
    for p in $PATHS; do
        port=$($PY ports 1)
        bench_start_colibri 1 "$port" strace -f -c -o "$BENCH_TMP/strace.txt"
        $PY wait "$port" 60 "$COLIBRI_PID" || { cat "$COLIBRI_LOG" >&2; exit 1; }
        warm "$port"
        h2load -n "$N" -c 4 -m 16 "http://127.0.0.1:$port$p" | grep -E "^requests:" >&2
        # the server stops, then strace writes its table and ends
        kill -TERM "$(pgrep -P "$COLIBRI_PID" | head -1)"
        bench_stop "$COLIBRI_PID" 30
        echo "== strace, $N GET $p (h2c, -c 4 -m 16): calls per request"
        # rows: % time, seconds, usecs/call, calls, [errors,] name
        awk -v n="$N" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" {
                           t += $4; if ($4 / n >= 0.01) printf "  %-14s %8.3f\n", $NF, $4 / n }
                       END { printf "  %-14s %8.3f\n", "all", t / n }' "$BENCH_TMP/strace.txt"
    done
fi

if [ -z "${SKIP_CALLGRIND:-}" ]; then
    for p in $PATHS; do
        for n in "$N0" "$N"; do
            port=$($PY ports 1)
            out=$BENCH_TMP/cg-$n.out
            if [ "${SERVER:-colibri}" = h2o ]; then
                # user root: as nobody, h2o could not write callgrind's file
                $PY render "$BENCH_DIR/h2o.conf.in" "$BENCH_TMP/h2o.conf" PORT="$port" \
                    TLS_PORT="$($PY ports 1)" ROOT="$BENCH_ROOT" TMP="$BENCH_TMP" USER_LINE="user: root"
                [ -f "$BENCH_TMP/cert.pem" ] || openssl req -x509 -newkey ec \
                    -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
                    -keyout "$BENCH_TMP/key.pem" -out "$BENCH_TMP/cert.pem" 2>/dev/null
                valgrind --tool=callgrind --trace-children=yes \
                    --callgrind-out-file="$BENCH_TMP/cg-h2o-$n.%p" \
                    h2o -c "$BENCH_TMP/h2o.conf" >"$BENCH_TMP/h2o.log" 2>&1 &
                pid=$!
                BENCH_PIDS+=("$pid")
                for ((i = 0; i < 600; i++)); do # h2o has no /hello: the file
                    curl -sf -o /dev/null "http://127.0.0.1:$port/hello.txt" && break
                    bench_alive "$pid" || { cat "$BENCH_TMP/h2o.log" >&2; exit 1; }
                    sleep 0.2
                done
            else
                bench_start_colibri 1 "$port" valgrind --tool=callgrind --callgrind-out-file="$out"
                pid=$COLIBRI_PID
                $PY wait "$port" 120 "$pid" || { cat "$COLIBRI_LOG" >&2; exit 1; }
            fi
            warm "$port"
            h2load -n "$n" -c 4 -m 16 "http://127.0.0.1:$port$p" | grep -E "^requests:" >&2
            bench_stop "$pid" 60
            if [ "${SERVER:-colibri}" = h2o ]; then
                sleep 1 # the forked helpers write their files as they end
                mv "$BENCH_TMP/cg-h2o-$n.$pid" "$out"
                rm -f "$BENCH_TMP"/cg-h2o-"$n".*
            fi
        done
        echo "== callgrind, ${SERVER:-colibri}, GET $p (h2c, -c 4 -m 16): instructions per request, (Ir($N) - Ir($N0)) / $((N - N0))"
        python3 "$BENCH_DIR/cg_objects.py" "$BENCH_TMP/cg-$N.out" >"$BENCH_TMP/a"
        python3 "$BENCH_DIR/cg_objects.py" "$BENCH_TMP/cg-$N0.out" >"$BENCH_TMP/b"
        python3 - "$BENCH_TMP/a" "$BENCH_TMP/b" "$((N - N0))" <<'PY'
import sys
def load(p):
    d = {}
    for line in open(p):
        f = line.split()
        d[f[0]] = float(f[1])
    return d
a, b, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
rows = sorted(((a[k] - b.get(k, 0)) / n, k) for k in a)
for v, k in reversed(rows):
    if abs(v) >= 1 or k == "total":
        print("  %-40s %10.0f" % (k, v))
PY
    done
fi
