#!/usr/bin/env bash
# body_rss.sh - peak RSS of colibri while COLIBRI_NEED_BODY bodies arrive:
# CONC concurrent uploads (curl -T, POST) of SIZE_MB MiB each to the echo
# handler (which answers the body back; curl drops it), max_request_body =
# 200M, threads = 2, default body_memory_max. The figure is VmHWM of the
# server process after every upload was answered, with the baseline VmHWM
# after start-up beside it. Every answer must be 200 and as long as the
# body.
#
# Environment: CONC (default "1 10": one run each), SIZE_MB (100), BUILD or
# COLIBRI as for run.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SIZE_MB=${SIZE_MB:-100}
bench_need curl python3
bench_setup
head -c $((SIZE_MB << 20)) /dev/urandom >"$BENCH_TMP/body.bin"

for conc in ${CONC:-1 10}; do
    port=$($PY ports 1)
    conf=$BENCH_TMP/body-$port.conf
    cat >"$conf" <<CONF
listener 127.0.0.1:$port
threads = 2
max_request_body = 200M
temp_dir = $BENCH_TMP
site {
    handler /hello hello_world
    handler /echo echo
}
CONF
    "$COLIBRI" -c "$conf" >"$BENCH_TMP/colibri-$port.log" 2>&1 &
    pid=$!
    BENCH_PIDS+=("$pid")
    $PY wait "$port" 10 "$pid" || { cat "$BENCH_TMP/colibri-$port.log" >&2; exit 1; }
    base=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
    t0=$(date +%s.%N)
    cpids=()
    for i in $(seq "$conc"); do
        curl -s -o /dev/null -w '%{http_code} %{size_download}\n' -X POST -T "$BENCH_TMP/body.bin" \
            -H 'Expect:' "http://127.0.0.1:$port/echo" >"$BENCH_TMP/curl-$i.txt" &
        cpids+=($!)
    done
    for p in "${cpids[@]}"; do wait "$p"; done
    t1=$(date +%s.%N)
    peak=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
    for i in $(seq "$conc"); do
        read -r code size <"$BENCH_TMP/curl-$i.txt"
        [ "$code" = 200 ] && [ "$size" = $((SIZE_MB << 20)) ] ||
            bench_die "upload $i answered $code with $size bytes"
    done
    kill "$pid"
    wait "$pid" || true
    printf '%2d x %d MiB: peak RSS %d MiB (%d KiB; %d KiB after start-up), %.1f s\n' \
        "$conc" "$SIZE_MB" $((peak >> 10)) "$peak" "$base" "$(echo "$t1 - $t0" | bc)"
done
