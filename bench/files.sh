#!/usr/bin/env bash
# files.sh - static files: system calls per request, then req/s against nginx.
#
# Part 1: colibri (threads = 1) and nginx (one process, master_process off)
# each run under `strace -f -c`. After one warm-up GET (the cache miss),
# N keep-alive GETs of /4k.bin (then NBIG of /1m.bin) go one after another
# on one connection; a run with only the warm-up is subtracted, so start-up,
# the miss and shutdown cancel out. Waits (epoll_wait) and the futex calls of
# idle threads are shown but left out of the headline, as in syscalls.sh.
# Part 2: bench/run.sh --files (wrk -t1 -c64, alternating rounds, medians).
#
# Environment: N (default 2000), NBIG (default 300), BUILD or COLIBRI as for
# run.sh, ROUNDS, QUICK=1 (2 s wrk rounds), NO_WRK=1 (part 1 only), KEEP_TMP=1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

N=${N:-2000}
NBIG=${NBIG:-300}
bench_need strace wrk "$NGINX" python3
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

if [ -z "${NO_WRK:-}" ]; then
    echo
    args=(--files)
    [ -n "${QUICK:-}" ] && args+=(--quick)
    bash "$BENCH_DIR/run.sh" "${args[@]}"
fi
