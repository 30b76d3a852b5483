#!/usr/bin/env bash
# ceiling.sh - what `wrk -t1 -c64` can measure on this machine at all.
#
# Runs the scenarios of run.sh against three servers, alternating rounds:
# colibri, nginx, and bench/null_server.c, a server that does only the
# irreducible work per request (read the request bytes, write a fixed
# response, no parsing, no headers beyond Content-Length). For every round it
# also records the CPU that wrk itself used, as a share of one core.
#
# If the null server gets the same req/s as colibri and wrk is near 100 % of
# a core in both, the number is wrk's limit, not the server's: no server can
# beat nginx by more than null/nginx in that scenario on this machine.
#
# Environment: BUILD or COLIBRI, ROUNDS (default 3), THREADS (colibri and
# null server threads, default 2), WORKERS (nginx, default 2), DURATION (5s),
# ONLY (scenario numbers to run, e.g. "0 3"; default all), NULL_FLAGS (-m:
# the null server sends Content-Length as its only header field).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-2}
DURATION=${DURATION:-5s}
NULL_SERVER=${NULL_SERVER:-$BUILD/null_server}
bench_need wrk "$NGINX" python3
[ -x "$NULL_SERVER" ] || bench_die "no $NULL_SERVER (build it: cmake --build build --target null_server)"
[ -x /usr/bin/time ] || bench_die "/usr/bin/time not found (make bench installs it: scripts/deps.sh bench)"

bench_setup
head -c 1048576 "$BENCH_ROOT/1m.bin" >/dev/null
read -r cport nport p_hello p_4k p_1m <<<"$($PY ports 5)"
bench_start_colibri "$THREADS" "$cport"
bench_start_nginx "$WORKERS" "$nport"
for spec in "$p_hello hello.txt" "$p_4k 4k.bin" "$p_1m 1m.bin"; do
    read -r p f <<<"$spec"
    "$NULL_SERVER" ${NULL_FLAGS:-} "$p" "$THREADS" "$BENCH_ROOT/$f" >"$BENCH_TMP/null-$p.log" 2>&1 &
    BENCH_PIDS+=("$!")
    $PY wait "$p" 10 "$!" || bench_die "null_server did not start on $p"
done
$PY wait "$cport" 10 "$COLIBRI_PID" || bench_die "colibri did not start"
$PY wait "$nport" 10 "$NGINX_PID" || bench_die "nginx did not start"

names=("hello keep-alive" "hello Connection: close" "4 KiB file keep-alive" "1 MiB file keep-alive")
paths=(/hello /hello /4k.bin /1m.bin)
nulls=("$p_hello" "$p_hello" "$p_4k" "$p_1m")

# round PORT PATH EXTRA... -> "req/s wrk-cpu-%"
round() {
    local port=$1 path=$2 out=$BENCH_TMP/wrk.txt tm=$BENCH_TMP/time.txt
    shift 2
    timeout 120 /usr/bin/time -f '%U %S %e' -o "$tm" \
        wrk -t1 -c64 -d"$DURATION" "$@" "http://127.0.0.1:$port$path" >"$out" 2>&1 ||
        { cat "$out" >&2; bench_die "wrk failed on port $port"; }
    if grep -qE '^ *(Socket errors|Non-2xx)' "$out"; then
        echo "  WARNING port $port $path: $(grep -E '^ *(Socket errors|Non-2xx)' "$out" | tr -s ' ')" >&2
    fi
    awk -v t="$(cat "$tm")" '/^Requests\/sec:/ {split(t, a, " "); printf "%s %.0f\n", $2, (a[1] + a[2]) / a[3] * 100}' "$out"
}

echo "wrk -t1 -c64 -d$DURATION; colibri threads = $THREADS, null_server threads = $THREADS, nginx workers = $WORKERS; $ROUNDS rounds"
echo
echo "| scenario | colibri req/s | nginx req/s | null req/s | colibri/nginx | null/nginx | wrk CPU (colibri, nginx, null) |"
echo "|---|---:|---:|---:|---:|---:|---|"
for i in ${ONLY:-$(seq 0 $((${#names[@]} - 1)))}; do
    extra=()
    [ "$i" = 1 ] && extra=(-H "Connection: close")
    c=() n=() z=() cc=() nc=() zc=()
    for ((r = 0; r < ROUNDS; r++)); do
        read -r a b <<<"$(round "$cport" "${paths[i]}" "${extra[@]}")"
        c+=("$a") cc+=("$b")
        read -r a b <<<"$(round "$nport" "${paths[i]}" "${extra[@]}")"
        n+=("$a") nc+=("$b")
        read -r a b <<<"$(round "${nulls[i]}" "${paths[i]}" "${extra[@]}")"
        z+=("$a") zc+=("$b")
    done
    cm=$($PY median "${c[@]}") nm=$($PY median "${n[@]}") zm=$($PY median "${z[@]}")
    printf '| %s | %.0f | %.0f | %.0f | %.2f | %.2f | %s %%, %s %%, %s %% |\n' "${names[i]}" \
        "$cm" "$nm" "$zm" "$(awk -v a="$cm" -v b="$nm" 'BEGIN {print a / b}')" \
        "$(awk -v a="$zm" -v b="$nm" 'BEGIN {print a / b}')" \
        "$($PY median "${cc[@]}")" "$($PY median "${nc[@]}")" "$($PY median "${zc[@]}")"
done
echo
echo "Medians of $ROUNDS alternating rounds (colibri, nginx, null). wrk CPU = (user + system) / wall"
echo "of the wrk process: 100 % means the single wrk thread was the bottleneck."
