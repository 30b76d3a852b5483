#!/usr/bin/env bash
# accept.sh [--quick] - per-worker SO_REUSEPORT sockets against one acceptor
# thread (config `accept`), both colibri, alternating rounds in one run:
# /hello keep-alive and with Connection: close (where accepting matters).
# Environment: BUILD or COLIBRI, ROUNDS (default 5), THREADS (default 2).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

duration=5s
[ "${1:-}" = --quick ] && duration=2s
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-2}
bench_need wrk python3

bench_setup
read -r rport tport <<<"$($PY ports 2)"
ACCEPT=reuseport bench_start_colibri "$THREADS" "$rport"
rpid=$COLIBRI_PID
ACCEPT=thread bench_start_colibri "$THREADS" "$tport"
tpid=$COLIBRI_PID
$PY wait "$rport" 10 "$rpid" && $PY wait "$tport" 10 "$tpid" || bench_die "colibri did not start"

rps() { wrk -t1 -c64 -d"$duration" "$@" | awk '/^Requests\/sec/ {print $2}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "| scenario | reuseport req/s | thread req/s | thread/reuseport |"
echo "|---|---:|---:|---:|"
for scenario in keep-alive close; do
    extra=()
    [ "$scenario" = close ] && extra=(-H "Connection: close")
    r=() t=()
    for ((i = 0; i < ROUNDS; i++)); do
        r+=("$(rps "${extra[@]}" "http://127.0.0.1:$rport/hello")")
        t+=("$(rps "${extra[@]}" "http://127.0.0.1:$tport/hello")")
    done
    mr=$(median "${r[@]}")
    mt=$(median "${t[@]}")
    echo "| /hello $scenario | $mr | $mt | $(python3 -c "print('%.2f' % ($mt / $mr))") |"
done
echo
echo "Commands: wrk -t1 -c64 -d$duration [-H 'Connection: close'] http://127.0.0.1:PORT/hello;"
echo "colibri threads = $THREADS, accept = reuseport | thread; medians of $ROUNDS alternating rounds."
