#!/usr/bin/env bash
# syscalls.sh - system calls per keep-alive GET /hello, colibri and nginx.
#
# Each server runs as one worker (colibri threads = 1; nginx with
# master_process off, worker_processes 1) under `strace -f -c`. One run drives
# N requests, one after another, on a single keep-alive connection; a second
# run drives none. Per request = (calls(N) - calls(0)) / N, so start-up,
# shutdown and the readiness probe cancel out. Waiting calls (epoll_wait and
# friends) are reported but left out of the headline figure: how often a
# server waits depends on timing, not on the work a request needs.
#
# Environment: N (default 2000), BUILD or COLIBRI as for run.sh, KEEP_TMP=1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${N:-2000}
[ "$N" -gt 0 ] || bench_die "N must be positive"
bench_need strace "$NGINX" python3
bench_setup

# traced SERVER COUNT -> strace summary in $BENCH_TMP/strace-SERVER-COUNT.txt
traced() {
    local server=$1 n=$2 out=$BENCH_TMP/strace-$1-$2.txt port tracer pid log
    port=$($PY ports 1)
    if [ "$server" = colibri ]; then
        bench_start_colibri 1 "$port" strace -f -c -o "$out"
        tracer=$COLIBRI_PID log=$COLIBRI_LOG
    else
        bench_start_nginx single "$port" strace -f -c -o "$out"
        tracer=$NGINX_PID log=$NGINX_LOG
    fi
    if [ "$server" = colibri ]; then
        pid=$(bench_child "$tracer" "$COLIBRI")
    else
        pid=$(bench_child "$tracer" "$NGINX")
    fi
    BENCH_PIDS+=("$pid")
    $PY wait "$port" 20 "$pid" || { cat "$log" >&2; exit 1; }
    if [ "$n" -gt 0 ]; then
        timeout 120 $PY drive "$port" "$n" >/dev/null || { cat "$log" >&2; bench_die "$server failed while driving $n requests"; }
    fi
    bench_stop "$pid" 10
    bench_stop "$tracer" 20
    if [ "$BENCH_STATUS" != 0 ]; then
        echo "bench: $server under strace exited with status $BENCH_STATUS after SIGTERM; log:" >&2
        tail -n 20 "$log" >&2
        [ "$server" = colibri ] && problems=$((problems + 1))
    fi
    [ -s "$out" ] || bench_die "strace wrote no summary for $server"
}

problems=0
for server in colibri nginx; do
    traced "$server" 0
    traced "$server" "$N"
done

echo "Commands: strace -f -c -o FILE $COLIBRI -c colibri.conf (threads = 1);"
echo "          strace -f -c -o FILE nginx -g 'daemon off; master_process off;' (worker_processes 1);"
echo "          python3 bench/benchlib.py drive PORT $N   (and a run without it)"
echo
python3 - "$BENCH_DIR" "$BENCH_TMP" "$N" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import benchlib
tmp, n = sys.argv[2], int(sys.argv[3])
WAITS = {"epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6"}
per = {}
for server in ("colibri", "nginx"):
    base = benchlib.strace_summary("%s/strace-%s-0.txt" % (tmp, server))
    full = benchlib.strace_summary("%s/strace-%s-%d.txt" % (tmp, server, n))
    per[server] = {k: (full.get(k, 0) - base.get(k, 0)) / n for k in set(base) | set(full)}
names = sorted({k for p in per.values() for k, v in p.items() if abs(v) >= 0.005},
               key=lambda k: (-per["colibri"].get(k, 0), k))
print("System calls per keep-alive GET /hello (one connection, %d requests, minus a 0-request run):" % n)
print()
print("| syscall | colibri | nginx |")
print("|---|---:|---:|")
for k in names:
    print("| %s%s | %.2f | %.2f |" % (k, " (wait)" if k in WAITS else "",
                                      per["colibri"].get(k, 0), per["nginx"].get(k, 0)))
tot = {s: sum(v for k, v in p.items()) for s, p in per.items()}
work = {s: sum(v for k, v in p.items() if k not in WAITS) for s, p in per.items()}
print("| **all** | %.2f | %.2f |" % (tot["colibri"], tot["nginx"]))
print("| **all but waits** | %.2f | %.2f |" % (work["colibri"], work["nginx"]))
print()
io = lambda s: " ".join("%s=%.2f" % (k, per[s].get(k, 0)) for k in ("read", "recvfrom", "write", "writev", "sendto", "sendfile"))
print("colibri: " + io("colibri"))
print("nginx:   " + io("nginx"))
print()
print("SUMMARY: syscalls per request excluding waits: colibri %.2f, nginx %.2f (including waits: %.2f, %.2f)"
      % (work["colibri"], work["nginx"], tot["colibri"], tot["nginx"]))
EOF
[ "$problems" = 0 ] || exit 1
