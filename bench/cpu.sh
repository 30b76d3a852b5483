#!/usr/bin/env bash
# cpu.sh - server CPU time per request, pinned (the method of issue 12).
#
# Every server runs with one worker pinned to SERVER_CPU (taskset -c 0);
# wrk runs with one thread and 64 connections pinned to WRK_CPU (taskset
# -c 1), so the load generator never takes the server's core. Per round,
# server and workload: utime + stime of every thread of the server and its
# children (/proc/PID/task/*/stat, so nginx's master and worker both count)
# before and after one wrk run, divided by the requests wrk completed.
# Rounds alternate between the servers, and the order rotates from round to
# round. The script prints every round, then per workload the median (and
# range) of each server and the median of the per-round ratios to the first
# server. All servers stay up for the whole run; only the one measured gets
# load. utime and stime are sampled at the timer interrupt (HZ = 250 here,
# reported in 10 ms ticks): a 5 s round resolves them to about 1 %. The
# "on-CPU" column is the same threads' exact run time from
# /proc/PID/task/*/schedstat. Neither separates softirq work (loopback
# delivery to wrk, pacing timers) that runs while the server is on the CPU:
# it is charged to the server, as the issue's method does. The "wrk"
# column is the client's own CPU per request (/usr/bin/time): when the
# server's figure drops and wrk's rises, work moved rather than vanished.
#
# Servers (SERVERS, default "colibri nginx null", plus "uring" when built):
#   colibri  this build (BUILD or COLIBRI), threads = 1; THIS_CONF_EXTRA:
#            config lines for it (@TMP@ = the scratch dir)
#   base     another colibri binary (BASE=path), threads = 1
#   nginx    nginx-light, worker_processes 1 (bench/nginx.conf.in)
#   null     bench/null_server.c, epoll, 1 thread: one process per body
#   uring    bench/null_uring.c, io_uring, 1 thread: the same responses
#   null+VAR=VALUE+...  null (or uring) with the experiment settings of
#            bench/null_common.h in its environment, e.g. null+NULL_CC=cubic
# Workloads (WORKLOADS, default all):
#   hello    keep-alive GET /hello
#   pipe16   GET /hello, 16 pipelined per write (bench/pipeline.lua)
#   4k       keep-alive GET /4k.bin (a 4 KiB file)
#   1m       keep-alive GET /1m.bin (a 1 MiB file)
#   close    GET /hello with "Connection: close" (a new connection each)
# With BENCH_TLS=1 every server listens with TLS (one P-256 certificate,
# bench/lib.sh) and wrk speaks https; two more workloads, by
# bench/tls_conns.c (16 connections at a time, each: a TLS 1.3 handshake,
# one GET /hello, close):
#   full     a full handshake each
#   resume   each resumes the previous connection's session (a ticket)
# Other environment: ROUNDS (5), DURATION (5s), SERVER_CPU (0), WRK_CPU (1),
# NULL_FLAGS (-m: the null servers send Content-Length alone).
#
#   bench/cpu.sh                                   # the issue's table
#   SERVERS="null uring" WORKLOADS="hello 4k close" ROUNDS=7 bench/cpu.sh
#   BASE=/old/build/colibri SERVERS="colibri base" WORKLOADS=hello bench/cpu.sh
#   BENCH_TLS=1 SERVERS="colibri nginx" WORKLOADS="hello 4k 1m full resume" bench/cpu.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5s}
SERVER_CPU=${SERVER_CPU:-0}
WRK_CPU=${WRK_CPU:-1}
NULL_SERVER=${NULL_SERVER:-$BUILD/null_server}
NULL_URING=${NULL_URING:-$BUILD/null_uring}
if [ -z "${SERVERS:-}" ]; then
    SERVERS="colibri nginx null"
    [ -x "$NULL_URING" ] && SERVERS="$SERVERS uring"
fi
WORKLOADS=${WORKLOADS:-hello pipe16 4k 1m close}
bench_need wrk taskset python3
[ -x /usr/bin/time ] || bench_die "/usr/bin/time not found (make bench installs it: scripts/deps.sh bench)"
bench_setup
if [ "${BENCH_TLS:-0}" = 1 ] && [[ " $WORKLOADS " =~ \ (full|resume)\  ]]; then
    TLS_CONNS=$BENCH_TMP/tls_conns
    cc -O2 -o "$TLS_CONNS" "$BENCH_DIR/tls_conns.c" -lssl -lcrypto -lpthread ||
        bench_die "cannot build bench/tls_conns.c (libssl-dev)"
fi
head -c 1048576 "$BENCH_ROOT/1m.bin" >/dev/null

declare -A PID PORT # PID[server] or PID[server/body]; likewise PORT
pin=(taskset -c "$SERVER_CPU")
for srv in $SERVERS; do
    # null and uring take experiment settings: null+NULL_CC=cubic+NULL_CHUNK=131072
    envs=()
    [ "$srv" = "${srv#*+}" ] || IFS=+ read -r -a envs <<<"${srv#*+}"
    case ${srv%%+*} in
    colibri)
        PORT[$srv]=$($PY ports 1)
        BENCH_CONF_EXTRA=${THIS_CONF_EXTRA:-} bench_start_colibri 1 "${PORT[$srv]}" "${pin[@]}"
        PID[$srv]=$COLIBRI_PID
        echo "colibri: $COLIBRI_CMD${THIS_CONF_EXTRA:+  (config plus: $THIS_CONF_EXTRA)}"
        ;;
    base)
        [ -x "${BASE:-}" ] || bench_die "set BASE to the other colibri binary"
        PORT[$srv]=$($PY ports 1)
        this=$COLIBRI
        COLIBRI=$BASE bench_start_colibri 1 "${PORT[$srv]}" "${pin[@]}"
        COLIBRI=$this
        PID[$srv]=$COLIBRI_PID
        echo "base: $COLIBRI_CMD"
        ;;
    nginx)
        bench_need "$NGINX"
        PORT[$srv]=$($PY ports 1)
        bench_start_nginx 1 "${PORT[$srv]}" "${pin[@]}"
        PID[$srv]=$NGINX_PID
        echo "nginx: $NGINX_CMD"
        ;;
    null | uring)
        exe=$NULL_SERVER
        [ "${srv%%+*}" = uring ] && exe=$NULL_URING
        [ -x "$exe" ] || bench_die "no $exe (build it: cmake --build build --target $(basename "$exe"))"
        for body in hello.txt 4k.bin 1m.bin; do
            p=$($PY ports 1)
            env "${envs[@]}" "${pin[@]}" "$exe" ${NULL_FLAGS:-} "$p" 1 "$BENCH_ROOT/$body" >"$BENCH_TMP/null-$p.log" 2>&1 &
            BENCH_PIDS+=("$!")
            PID[$srv/$body]=$! PORT[$srv/$body]=$p
            $PY wait "$p" 10 "$!" || { cat "$BENCH_TMP/null-$p.log" >&2; bench_die "$srv did not start"; }
        done
        echo "$srv: ${envs[*]} ${pin[*]} $exe ${NULL_FLAGS:-}PORT 1 BODY_FILE (one process per body)"
        ;;
    *) bench_die "unknown server '$srv'" ;;
    esac
    # (ports are free when asked for; the servers bind them right away)
    if [ -n "${PORT[$srv]:-}" ]; then
        $PY wait "${PORT[$srv]}" 10 "${PID[$srv]}" || bench_die "$srv did not start"
    fi
done

# utime and stime (clock ticks) of every thread of PID and its children,
# and the same threads' time on CPU in ns (the first field of schedstat:
# exact, where the ticks are sampled at each timer interrupt)
ticks() {
    local u=0 s=0 ns=0 p t f r
    for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        for t in /proc/"$p"/task/*; do
            read -r -a f <"$t/stat" || continue
            read -r r _ <"$t/schedstat" || r=0
            u=$((u + f[13]))
            s=$((s + f[14]))
            ns=$((ns + r))
        done
    done
    echo "$u $s $ns"
}

# target SERVER WORKLOAD -> "pid port path"
target() {
    local body=hello.txt path=/hello
    case $2 in
    hello | pipe16 | close | full | resume) ;;
    4k) body=4k.bin path=/4k.bin ;;
    1m) body=1m.bin path=/1m.bin ;;
    *) bench_die "unknown workload '$2'" ;;
    esac
    local key=$1
    [ -n "${PID[$1]:-}" ] || key=$1/$body
    echo "${PID[$key]} ${PORT[$key]} $path"
}

load() { # WORKLOAD PORT PATH DURATION -> wrk's output
    local args=()
    case $1 in
    pipe16) args=(-s "$BENCH_DIR/pipeline.lua") ;;
    close) args=(-H "Connection: close") ;;
    esac
    # wrk's own user + system time goes to $BENCH_TMP/wrk-time (10 ms units)
    case $1 in
    full | resume)
        timeout 120 /usr/bin/time -f '%U %S' -o "$BENCH_TMP/wrk-time" \
            taskset -c "$WRK_CPU" "$TLS_CONNS" "$2" "${4%s}" "$1" "$3"
        return
        ;;
    esac
    timeout 120 /usr/bin/time -f '%U %S' -o "$BENCH_TMP/wrk-time" \
        taskset -c "$WRK_CPU" wrk -t1 -c64 -d"$4" "${args[@]}" "$BENCH_SCHEME://127.0.0.1:$2$3"
}

measure() { # SERVER WORKLOAD -> "requests req/s user_us sys_us oncpu_us wrk_us"
    local pid port path u0 s0 r0 u1 s1 r1 out n rps wu ws
    read -r pid port path <<<"$(target "$1" "$2")"
    read -r u0 s0 r0 <<<"$(ticks "$pid")"
    out=$(load "$2" "$port" "$path" "$DURATION") || { echo "$out" >&2; bench_die "wrk failed on $1 $2"; }
    read -r u1 s1 r1 <<<"$(ticks "$pid")"
    if grep -qE '^ *(Socket errors|Non-2xx)' <<<"$out"; then
        echo "bench: $1 $2: $(grep -E '^ *(Socket errors|Non-2xx)' <<<"$out" | tr -s ' ')" >&2
    fi
    n=$(awk '/requests in/ {print $1}' <<<"$out")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    read -r wu ws <"$BENCH_TMP/wrk-time"
    python3 -c "import os; hz = os.sysconf('SC_CLK_TCK'); n = $n
print(n, '$rps', '%.3f' % (($u1 - $u0) / hz * 1e6 / n), '%.3f' % (($s1 - $s0) / hz * 1e6 / n),
      '%.3f' % (($r1 - $r0) / 1e3 / n), '%.3f' % (($wu + $ws) * 1e6 / n))"
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# warm-up, not counted
for w in $WORKLOADS; do
    for srv in $SERVERS; do
        read -r pid port path <<<"$(target "$srv" "$w")"
        load "$w" "$port" "$path" 1s >/dev/null
    done
done

results=$BENCH_TMP/cpu.txt
: >"$results"
read -r -a order <<<"$SERVERS"
echo
echo "| workload | round | server | requests | req/s | user µs/req | system µs/req | total µs/req | on-CPU µs/req | wrk µs/req |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
for w in $WORKLOADS; do
    for ((i = 1; i <= ROUNDS; i++)); do
        # rotate the order from round to round
        k=$(((i - 1) % ${#order[@]}))
        for srv in "${order[@]:k}" "${order[@]:0:k}"; do
            read -r n rps u s r c <<<"$(measure "$srv" "$w")"
            echo "$w $i $srv $n $rps $u $s $r $c" >>"$results"
            echo "| $w | $i | $srv | $n | $rps | $u | $s | $(python3 -c "print('%.3f' % ($u + $s))") | $r | $c |"
        done
    done
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "wrk: taskset -c $WRK_CPU wrk -t1 -c64 -d$DURATION [-s bench/pipeline.lua | -H 'Connection: close'] $BENCH_SCHEME://127.0.0.1:PORT/PATH; full, resume: taskset -c $WRK_CPU tls_conns PORT ${DURATION%s} full|resume /hello"
python3 - "$results" "$SERVERS" <<'EOF'
import statistics, sys
servers = sys.argv[2].split()
rows = {}
for line in open(sys.argv[1]):
    w, i, srv, n, rps, u, s, r, c = line.split()
    rows.setdefault(w, {}).setdefault(srv, {})[i] = (float(u), float(s), float(rps), float(r), float(c))
first = servers[0]
print()
print("Medians over rounds (µs of server CPU per request; range in brackets; "
      "ratio = median of the per-round ratios to %s):" % first)
print()
print("| workload | server | total µs/req | user | system | on-CPU µs/req | wrk µs/req | req/s | ratio to %s |" % first)
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for w, by in rows.items():
    for srv in servers:
        r = by[srv]
        tot = [x[0] + x[1] for x in r.values()]
        ratio = [(r[i][0] + r[i][1]) / (by[first][i][0] + by[first][i][1]) for i in r
                 if by[first][i][0] + by[first][i][1] > 0]
        med = lambda k: statistics.median(x[k] for x in r.values())
        print("| %s | %s | %.3f (%.3f–%.3f) | %.3f | %.3f | %.3f | %.3f | %.0f | %s |" % (
            w, srv, statistics.median(tot), min(tot), max(tot), med(0), med(1), med(3), med(4), med(2),
            "%.3f" % statistics.median(ratio) if srv != first and ratio else "—"))
EOF
