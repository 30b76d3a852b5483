#!/usr/bin/env bash
# syscalls.sh - system calls per keep-alive request, colibri and nginx:
# GET /hello, a cached 4 KiB file and a 1 MiB file.
#
# Each server runs as one worker (colibri threads = 1; nginx with
# master_process off, worker_processes 1) under `strace -f -c`, four times,
# each time with one keep-alive connection from `benchlib.py drive`. Every
# run starts with the same warm-up on that connection: one GET each of
# /hello, /4k.bin and /1m.bin, the files' cache misses. Then one run sends N
# more GETs of /hello, one N of /4k.bin, one N of /1m.bin, one after another,
# and one nothing. Per request = (calls(N) - calls(0)) / N for each kind, so
# start-up, shutdown, the readiness probe and the warm-up (the misses)
# cancel out. The files are those of bench_setup (lib.sh); colibri serves
# them with serve_files and cache_for = 1h, so no entry expires during a
# run; nginx with its bench/nginx.conf.in (sendfile on, no open_file_cache).
# Requests carry `Host: 127.0.0.1:PORT`, as wrk and curl send it.
#
# Waiting calls (epoll_wait and friends) and futex (colibri's cache-pruning
# thread sleeps on a timed condition variable and wakes once a second while
# the cache holds entries) are reported but left out of the headline figure:
# how often a server waits depends on timing, not on the work a request needs.
#
# Environment: N (default 2000), BUILD or COLIBRI as for run.sh, KEEP_TMP=1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${N:-2000}
[ "$N" -gt 0 ] || bench_die "N must be positive"
bench_need strace "$NGINX" python3
bench_setup
BENCH_CACHE_FOR=1h

# kind name -> request path
declare -A PATHS=([hello]=/hello [4k]=/4k.bin [1m]=/1m.bin)
KINDS="hello 4k 1m"

# traced SERVER KIND COUNT -> strace summary in $BENCH_TMP/strace-SERVER-KIND.txt
# (KIND 0: the warm-up only)
traced() {
    local server=$1 kind=$2 n=$3 out=$BENCH_TMP/strace-$1-$2.txt port tracer pid log
    local path=${PATHS[$2]:-/hello}
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
    timeout 120 $PY drive "$port" "$BENCH_ROOT" "$n" "$path" >/dev/null ||
        { cat "$log" >&2; bench_die "$server failed while driving $n x $path"; }
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
    traced "$server" 0 0
    for kind in $KINDS; do
        traced "$server" "$kind" "$N"
    done
done

echo "Commands: strace -f -c -o FILE $COLIBRI -c colibri.conf (threads = 1, cache_for = 1h);"
echo "          strace -f -c -o FILE nginx -g 'daemon off; master_process off;' (worker_processes 1);"
echo "          python3 bench/benchlib.py drive PORT ROOT N PATH: one connection, a warm-up GET"
echo "          of /hello, /4k.bin, /1m.bin, then N = $N GETs of PATH (/hello, /4k.bin, /1m.bin:"
echo "          one run each), and a run with N = 0"
python3 - "$BENCH_DIR" "$BENCH_TMP" "$N" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import benchlib
tmp, n = sys.argv[2], int(sys.argv[3])
KINDS = (("hello", "GET /hello"), ("4k", "GET /4k.bin (4 KiB, cached)"),
         ("1m", "GET /1m.bin (1 MiB, cached)"))
WAITS = {"epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6", "futex"}
IO = ("read", "recvfrom", "write", "writev", "sendto", "sendmsg", "sendfile")
SERVERS = ("colibri", "nginx")
base = {s: benchlib.strace_summary("%s/strace-%s-0.txt" % (tmp, s)) for s in SERVERS}
work, tot = {}, {}
for kind, title in KINDS:
    per = {}
    for server in SERVERS:
        full = benchlib.strace_summary("%s/strace-%s-%s.txt" % (tmp, server, kind))
        b = base[server]
        per[server] = {k: (full.get(k, 0) - b.get(k, 0)) / n for k in set(b) | set(full)}
    names = sorted({k for p in per.values() for k, v in p.items() if abs(v) >= 0.005},
                   key=lambda k: (-round(per["colibri"].get(k, 0), 2), k))
    print()
    print("System calls per keep-alive %s (one connection, %d requests, minus a 0-request run):"
          % (title, n))
    print()
    print("| syscall | colibri | nginx |")
    print("|---|---:|---:|")
    for k in names:
        print("| %s%s | %.2f | %.2f |" % (k, " (wait)" if k in WAITS else "",
                                          per["colibri"].get(k, 0), per["nginx"].get(k, 0)))
    tot[kind] = {s: sum(v for k, v in p.items()) for s, p in per.items()}
    work[kind] = {s: sum(v for k, v in p.items() if k not in WAITS) for s, p in per.items()}
    print("| **all** | %.2f | %.2f |" % (tot[kind]["colibri"], tot[kind]["nginx"]))
    print("| **all but waits** | %.2f | %.2f |" % (work[kind]["colibri"], work[kind]["nginx"]))
    print()
    for s in SERVERS:
        print("%-8s %s" % (s + ":", " ".join("%s=%.2f" % (k, per[s].get(k, 0)) for k in IO)))
print()
print("System calls per keep-alive request, excluding waits (including waits):")
print()
print("| request | colibri | nginx |")
print("|---|---:|---:|")
for kind, title in KINDS:
    print("| %s | %.2f (%.2f) | %.2f (%.2f) |" % (title, work[kind]["colibri"], tot[kind]["colibri"],
                                               work[kind]["nginx"], tot[kind]["nginx"]))
print()
print("SUMMARY: syscalls per request excluding waits: " + "; ".join(
    "%s colibri %.2f, nginx %.2f" % (p, work[k]["colibri"], work[k]["nginx"])
    for k, p in (("hello", "/hello"), ("4k", "4 KiB"), ("1m", "1 MiB"))))
EOF
[ "$problems" = 0 ] || exit 1
