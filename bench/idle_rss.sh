#!/usr/bin/env bash
# idle_rss.sh - memory per idle keep-alive connection, colibri and nginx.
#
# A python client opens CONNS (default 10,000) connections from 127.0.0.2..,
# sends one GET /hello on each, reads the response and keeps them all open.
# Memory is read before and after, from /proc/PID/status (VmRSS) and
# /proc/PID/smaps_rollup (Private_Dirty): colibri's one process (threads = 2),
# the sum of nginx's 2 workers. Per connection = (after - before) / CONNS.
# Finally a sample of 1 in 100 connections is asked again to show they are
# still open and served. nginx allocates its connection array
# (worker_connections 16384 per worker) at start, so that part is in its
# "before", not in its per-connection figure.
#
# Environment: CONNS (default 10000), BUILD or COLIBRI as for run.sh, KEEP_TMP=1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CONNS=${CONNS:-10000}
bench_need "$NGINX" python3
bench_setup

measure() {
    local server=$1 port pids out=$BENCH_TMP/idle-$1.txt
    port=$($PY ports 1)
    if [ "$server" = colibri ]; then
        bench_start_colibri 2 "$port"
        $PY wait "$port" 10 "$COLIBRI_PID" || { cat "$COLIBRI_LOG" >&2; exit 1; }
        pids=$COLIBRI_PID
        echo "colibri: $COLIBRI_CMD (threads = 2)"
    else
        bench_start_nginx 2 "$port"
        $PY wait "$port" 10 "$NGINX_PID" || { cat "$NGINX_LOG" >&2; exit 1; }
        bench_child "$NGINX_PID" "$NGINX" >/dev/null
        sleep 0.5 # both workers
        pids=$(bench_children "$NGINX_PID")
        echo "nginx:   $NGINX_CMD (worker_processes 2; workers: $pids)"
    fi
    # shellcheck disable=SC2086 # pids is a list
    if ! timeout 90 $PY idle "$port" "$CONNS" $pids >"$out"; then
        cat "$out" >&2
        bench_alive "${pids%% *}" || echo "bench: $server is gone" >&2
        bench_die "idle connection test against $server failed"
    fi
    sed 's/^/    /' "$out"
    if [ "$server" = colibri ]; then
        bench_stop "$COLIBRI_PID" 10
        [ "$BENCH_STATUS" = 0 ] || { echo "bench: colibri exited with status $BENCH_STATUS on SIGTERM" >&2; problems=$((problems + 1)); }
    else
        bench_stop "$NGINX_PID" 10
    fi
}

value() { awk -F= -v k="$2" '$1 == k { print $2 }' "$BENCH_TMP/idle-$1.txt"; }

problems=0
measure colibri
measure nginx

echo
echo "| server | RSS before | RSS after | RSS/conn | Private_Dirty/conn | alive after |"
echo "|---|---:|---:|---:|---:|---:|"
for s in colibri nginx; do
    awk -v s="$s" -v b="$(value $s rss_before)" -v a="$(value $s rss_after)" \
        -v r="$(value $s rss_per_conn)" -v d="$(value $s private_dirty_per_conn)" \
        -v l="$(value $s still_alive)" \
        'BEGIN { printf "| %s | %.1f MiB | %.1f MiB | %d B | %d B | %s |\n", s, b / 1048576, a / 1048576, r, d, l }'
done
echo
echo "SUMMARY: $CONNS idle keep-alive connections cost colibri $(value colibri rss_per_conn) B RSS" \
    "($(value colibri private_dirty_per_conn) B private dirty) each, nginx $(value nginx rss_per_conn) B" \
    "($(value nginx private_dirty_per_conn) B)"
[ "$problems" = 0 ] || exit 1
