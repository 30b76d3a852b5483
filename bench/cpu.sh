#!/usr/bin/env bash
# cpu.sh - CPU time (user and system, all threads) that colibri and nginx
# spend per /hello request under the same wrk load, alternating rounds. On a
# 2-core machine where wrk needs one core, req/s can be capped by wrk; the
# server's own cost per request still shows which one does less work.
# Environment: BUILD or COLIBRI, ROUNDS (default 3), THREADS (2), WORKERS (2).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-2}
bench_need wrk "$NGINX" python3
bench_setup
read -r cport nport <<<"$($PY ports 2)"
bench_start_colibri "$THREADS" "$cport"
bench_start_nginx "$WORKERS" "$nport"
$PY wait "$cport" 10 "$COLIBRI_PID" && $PY wait "$nport" 10 "$NGINX_PID" || bench_die "servers did not start"

# utime and stime (clock ticks) of every thread of PID and its children
ticks() {
    local u=0 s=0 p t f
    for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        for t in /proc/"$p"/task/*; do
            read -r -a f <"$t/stat" || continue
            u=$((u + f[13]))
            s=$((s + f[14]))
        done
    done
    echo "$u $s"
}

measure() { # PID PORT -> "req user_us sys_us"
    local u0 s0 u1 s1 n
    read -r u0 s0 <<<"$(ticks "$1")"
    n=$(wrk -t1 -c64 -d5s "http://127.0.0.1:$2/hello" | awk '/requests in/ {print $1}')
    read -r u1 s1 <<<"$(ticks "$1")"
    python3 -c "import os; hz = os.sysconf('SC_CLK_TCK'); n = $n
print(n, '%.2f' % (($u1 - $u0) / hz * 1e6 / n), '%.2f' % (($s1 - $s0) / hz * 1e6 / n))"
}

echo "| round | server | requests | user µs/req | system µs/req | total µs/req |"
echo "|---:|---|---:|---:|---:|---:|"
for ((i = 1; i <= ROUNDS; i++)); do
    for srv in colibri nginx; do
        if [ $srv = colibri ]; then r=$(measure "$COLIBRI_PID" "$cport"); else r=$(measure "$NGINX_PID" "$nport"); fi
        read -r n u s <<<"$r"
        echo "| $i | $srv | $n | $u | $s | $(python3 -c "print('%.2f' % ($u + $s))") |"
    done
done
echo
echo "wrk -t1 -c64 -d5s http://127.0.0.1:PORT/hello; colibri threads = $THREADS, nginx workers = $WORKERS"
