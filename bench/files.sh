#!/usr/bin/env bash
# files.sh - static files: system calls per request, then req/s against nginx.
#
# Part 1: colibri (threads = 1) and nginx (one process, master_process off)
# each run under `strace -f -c`. After one warm-up GET (the cache miss),
# N keep-alive GETs of /4k.bin (then NBIG of /1m.bin) go one after another
# on one connection; a run with only the warm-up is subtracted, so start-up,
# the miss and shutdown cancel out. Waits (epoll_wait) and the futex calls of
# idle threads are shown but left out of the headline, as in syscalls.sh.
# Part 2: colibri (threads = 2) and nginx (2 workers, sendfile on) side by
# side; `wrk -t1 -c64` on /4k.bin and /1m.bin in alternating rounds; the
# medians of req/s and of each server's CPU time per request (all threads,
# user + system, from /proc): on 2 cores wrk needs one of them and can cap
# req/s, the CPU per request still shows which server does less work.
#
# Part 3 (THRESHOLD=1 only): the small-file threshold. Two colibri servers
# (threads = 1), one keeping files of up to 4M in memory (header + bytes in
# one writev), one sending every file from its fd (small_file_max = 1: header
# + sendfile, or pread + write below 16 KiB); their CPU per request for files
# of 8 to 128 KiB, alternating wrk -t1 -c64 rounds.
#
# Environment: N (default 2000), NBIG (default 300), BUILD or COLIBRI as for
# run.sh, ROUNDS (default 5), DURATION (default 5s), THREADS (2), WORKERS (2),
# NO_WRK=1 (part 1 only), THRESHOLD=1 (part 3 too), KEEP_TMP=1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${N:-2000}
NBIG=${NBIG:-300}
bench_need strace wrk "$NGINX" python3 getconf
bench_setup

# drive PORT PATH COUNT: COUNT+1 keep-alive GETs (the first is the warm-up),
# checking every body against the file.
drive() {
    python3 - "$1" "$2" "$3" "$BENCH_ROOT" <<'EOF'
import socket, sys
port, path, n, root = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
want = open(root + path, "rb").read()
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
req = ("GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % path).encode()
buf = b""
for i in range(n + 1):
    s.sendall(req)
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(1 << 20)
        if not chunk:
            sys.exit("server closed the connection")
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 200"):
        sys.exit("bad status: %r" % lines[0])
    cl = [int(l.split(b":", 1)[1]) for l in lines if l.lower().startswith(b"content-length:")]
    if not cl:
        sys.exit("no Content-Length")
    while len(buf) < cl[0]:
        chunk = s.recv(1 << 20)
        if not chunk:
            sys.exit("server closed the connection")
        buf += chunk
    if buf[: cl[0]] != want:
        sys.exit("wrong body for %s" % path)
    buf = buf[cl[0]:]
s.close()
EOF
}

# traced SERVER PATH COUNT -> $BENCH_TMP/strace-SERVER-NAME-COUNT.txt
traced() {
    local server=$1 path=$2 n=$3 name out port tracer pid log
    name=$(basename "$path")
    out=$BENCH_TMP/strace-$server-$name-$n.txt
    port=$($PY ports 1)
    if [ "$server" = colibri ]; then
        bench_start_colibri 1 "$port" strace -f -c -o "$out"
        tracer=$COLIBRI_PID log=$COLIBRI_LOG
        pid=$(bench_child "$tracer" "$COLIBRI")
    else
        bench_start_nginx single "$port" strace -f -c -o "$out"
        tracer=$NGINX_PID log=$NGINX_LOG
        pid=$(bench_child "$tracer" "$NGINX")
    fi
    BENCH_PIDS+=("$pid")
    $PY wait "$port" 20 "$pid" || { cat "$log" >&2; exit 1; }
    # (every socket operation of the driver times out after 60 s)
    drive "$port" "$path" "$n" || { cat "$log" >&2; bench_die "$server failed while driving $n x $path"; }
    bench_stop "$pid" 10
    bench_stop "$tracer" 20
    [ -s "$out" ] || bench_die "strace wrote no summary for $server"
}

for spec in "/4k.bin $N" "/1m.bin $NBIG"; do
    read -r path n <<<"$spec"
    for server in colibri nginx; do
        traced "$server" "$path" 0
        traced "$server" "$path" "$n"
    done
done

echo "System calls per keep-alive GET, cache warm (one connection, one request at a time;"
echo "a run of 1 warm-up request subtracted from a run of 1 + N):"
python3 - "$BENCH_DIR" "$BENCH_TMP" "$N" "$NBIG" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import benchlib
tmp, n4, n1 = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
WAITS = {"epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6", "futex"}
FILE_CALLS = {"open", "openat", "openat2", "stat", "fstat", "newfstatat", "statx", "lstat", "close", "readlinkat"}
summary = []
for path, n in (("4k.bin", n4), ("1m.bin", n1)):
    per = {}
    for server in ("colibri", "nginx"):
        base = benchlib.strace_summary("%s/strace-%s-%s-0.txt" % (tmp, server, path))
        full = benchlib.strace_summary("%s/strace-%s-%s-%d.txt" % (tmp, server, path, n))
        per[server] = {k: (full.get(k, 0) - base.get(k, 0)) / n for k in set(base) | set(full)}
    names = sorted({k for p in per.values() for k, v in p.items() if abs(v) >= 0.005},
                   key=lambda k: (-per["colibri"].get(k, 0), k))
    print()
    print("GET /%s, %d requests:" % (path, n))
    print()
    print("| syscall | colibri | nginx |")
    print("|---|---:|---:|")
    for k in names:
        tag = " (wait)" if k in WAITS else ""
        print("| %s%s | %.2f | %.2f |" % (k, tag, per["colibri"].get(k, 0), per["nginx"].get(k, 0)))
    work = {s: sum(v for k, v in p.items() if k not in WAITS) for s, p in per.items()}
    files = {s: sum(v for k, v in p.items() if k in FILE_CALLS) for s, p in per.items()}
    print("| **all but waits** | %.2f | %.2f |" % (work["colibri"], work["nginx"]))
    summary.append("%s colibri %.2f (open/stat/close %.2f), nginx %.2f"
                   % (path, work["colibri"], files["colibri"], work["nginx"]))
print()
print("SYSCALLS: " + "; ".join(summary))
EOF

[ -n "${NO_WRK:-}" ] && exit 0

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5s}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-2}
read -r cport nport <<<"$($PY ports 2)"
bench_start_colibri "$THREADS" "$cport"
bench_start_nginx "$WORKERS" "$nport"
$PY wait "$cport" 10 "$COLIBRI_PID" || { cat "$COLIBRI_LOG" >&2; exit 1; }
$PY wait "$nport" 10 "$NGINX_PID" || { cat "$NGINX_LOG" >&2; exit 1; }

# clock ticks (user + system) of every thread of PID and of its children
ticks() {
    local t=0 p f task
    for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        for task in /proc/"$p"/task/*; do
            read -r -a f <"$task/stat" || continue
            t=$((t + f[13] + f[14]))
        done
    done
    echo "$t"
}

# one_round PID PORT PATH -> "req/s µs-per-request"
one_round() {
    local t0 t1 out
    t0=$(ticks "$1")
    out=$(timeout 120 wrk -t1 -c64 -d"$DURATION" "http://127.0.0.1:$2$3") || bench_die "wrk failed on $3"
    t1=$(ticks "$1")
    if echo "$out" | grep -qE "Socket errors|Non-2xx"; then
        echo "  WARNING: $(echo "$out" | grep -E "Socket errors|Non-2xx" | tr -s ' ')" >&2
    fi
    echo "$out" | awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" '
        /requests in/ { n = $1 } /^Requests\/sec:/ { r = $2 }
        END { printf "%.0f %.2f\n", r, t / hz * 1e6 / n }'
}

echo
echo "req/s and server CPU per request, wrk -t1 -c64 -d$DURATION, medians of $ROUNDS alternating rounds"
echo "(colibri threads = $THREADS, nginx worker_processes $WORKERS, sendfile on):"
echo
echo "| file | colibri req/s | nginx req/s | ratio | colibri CPU µs/req | nginx CPU µs/req |"
echo "|---|---:|---:|---:|---:|---:|"
summary=()
for path in /4k.bin /1m.bin; do
    cr=() nr=() cc=() nc=()
    for ((r = 1; r <= ROUNDS; r++)); do
        read -r rps us <<<"$(one_round "$COLIBRI_PID" "$cport" "$path")"
        cr+=("$rps") cc+=("$us")
        read -r rps us <<<"$(one_round "$NGINX_PID" "$nport" "$path")"
        nr+=("$rps") nc+=("$us")
    done
    bench_alive "$COLIBRI_PID" || bench_die "colibri died"
    bench_alive "$NGINX_PID" || bench_die "nginx died"
    c=$($PY median "${cr[@]}") n=$($PY median "${nr[@]}")
    ratio=$(awk -v a="$c" -v b="$n" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    echo "| $path | $c | $n | $ratio | $($PY median "${cc[@]}") | $($PY median "${nc[@]}") |"
    echo "    rounds: colibri ${cr[*]} | nginx ${nr[*]}" >&2
    summary+=("$path ${ratio}x")
done
echo
echo "SUMMARY: colibri/nginx req/s: ${summary[*]}"
[ -n "${THRESHOLD:-}" ] || exit 0

bench_stop "$COLIBRI_PID" 10
bench_stop "$NGINX_PID" 10
declare -A tport tpid
for kind in memory fd; do
    tport[$kind]=$($PY ports 1)
    max=4M
    [ $kind = fd ] && max=1
    conf=$BENCH_TMP/threshold-$kind.conf
    printf '%s\n' "listener 127.0.0.1:${tport[$kind]}" "threads = 1" "keep_alive_timeout = 120s" \
        "site {" "    handler /hello hello_world" "    serve_files / {" "        path = $BENCH_ROOT" \
        "        small_file_max = $max" "        cache_for = 1h" "    }" "}" >"$conf"
    "$COLIBRI" -c "$conf" >"$BENCH_TMP/threshold-$kind.log" 2>&1 &
    tpid[$kind]=$!
    BENCH_PIDS+=("${tpid[$kind]}")
    $PY wait "${tport[$kind]}" 10 "${tpid[$kind]}" || bench_die "threshold server did not start"
done
echo
echo "Small-file threshold: server CPU µs per request (threads = 1, wrk -t1 -c64 -d$DURATION,"
echo "medians of $ROUNDS alternating rounds):"
echo
echo "| size | in memory, one writev | from the fd | memory / fd |"
echo "|---:|---:|---:|---:|"
for kib in 8 16 32 64 128; do
    head -c $((kib * 1024)) /dev/urandom >"$BENCH_ROOT/t$kib.bin"
    chmod 644 "$BENCH_ROOT/t$kib.bin"
    m=() f=()
    for ((r = 1; r <= ROUNDS; r++)); do
        read -r _ us <<<"$(one_round "${tpid[memory]}" "${tport[memory]}" "/t$kib.bin")"
        m+=("$us")
        read -r _ us <<<"$(one_round "${tpid[fd]}" "${tport[fd]}" "/t$kib.bin")"
        f+=("$us")
    done
    mm=$($PY median "${m[@]}") fm=$($PY median "${f[@]}")
    echo "| $kib KiB | $mm | $fm | $(awk -v a="$mm" -v b="$fm" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') |"
done
