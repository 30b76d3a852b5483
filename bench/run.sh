#!/usr/bin/env bash
# run.sh [--quick] [--files] - wrk against colibri and nginx in the same run.
#
# Both servers run side by side on free loopback ports; for each scenario the
# rounds alternate colibri, nginx, colibri, nginx, ... so slow phases of a
# shared machine hit both alike. The median req/s of each server and their
# ratio are reported: on a noisy 2-core VM the ratio is the result, the
# absolute numbers are not. wrk itself needs one of the two cores.
#
#   --quick   2 s rounds instead of 5 s
#   --files   also GET /4k.bin and /1m.bin (static files)
# Environment: BUILD (default build) or COLIBRI=path, ROUNDS (default 3),
# CONNS (default 64), THREADS (colibri threads, default 2), WORKERS (nginx
# workers, default 2), KEEP_TMP=1 keeps the scratch dir with every wrk output.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

duration=5s
files=0
for a in "$@"; do
    case "$a" in
    --quick) duration=2s ;;
    --files) files=1 ;;
    -h | --help)
        sed -n '2,15p' "$0"
        exit 0
        ;;
    *) bench_die "unknown argument '$a' (try --help)" ;;
    esac
done
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-2}
bench_need wrk "$NGINX" python3

bench_setup
read -r cport nport <<<"$($PY ports 2)"
bench_start_colibri "$THREADS" "$cport"
bench_start_nginx "$WORKERS" "$nport"
$PY wait "$cport" 10 "$COLIBRI_PID" || { cat "$COLIBRI_LOG" >&2; exit 1; }
$PY wait "$nport" 10 "$NGINX_PID" || { cat "$NGINX_LOG" "$BENCH_TMP/nginx-error.log" >&2; exit 1; }

# Scenario i: names[i], paths[i], and extra wrk arguments set by scenario_args.
names=("hello keep-alive" "hello pipelined x16" "hello Connection: close")
paths=(/hello /hello /hello)
if [ "$files" = 1 ]; then
    names+=("4 KiB file keep-alive" "1 MiB file keep-alive")
    paths+=(/4k.bin /1m.bin)
fi
scenario_args() {
    case "$1" in
    1) extra=(-s "$BENCH_DIR/pipeline.lua") ;;
    2) extra=(-H "Connection: close") ;;
    *) extra=() ;;
    esac
}

problems=0
rows=()
cmds=()
echo "colibri: $COLIBRI_CMD  (pid $COLIBRI_PID, port $cport)"
echo "nginx:   $NGINX_CMD  (pid $NGINX_PID, port $nport)"
echo "machine: $(nproc) CPUs, $(uname -r); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $($NGINX -v 2>&1)"
echo

# one_round SERVER PORT PATH OUTFILE (uses $extra) -> sets rps
one_round() {
    local server=$1 port=$2 path=$3 out=$4 errs
    if ! timeout 120 wrk -t1 -c"$CONNS" -d"$duration" "${extra[@]}" \
        "http://127.0.0.1:$port$path" >"$out" 2>&1; then
        cat "$out" >&2
        bench_die "wrk failed against $server"
    fi
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
    [ -n "$rps" ] || { cat "$out" >&2; bench_die "no Requests/sec in wrk output for $server"; }
    errs=$(grep -E '^ *(Socket errors|Non-2xx or 3xx responses)' "$out" || true)
    if [ -n "$errs" ]; then
        echo "  WARNING $server $path ${extra[*]}: $(echo "$errs" | tr '\n' ';' | tr -s ' ')" >&2
        problems=$((problems + 1))
    fi
}

for ((i = 0; i < ${#names[@]}; i++)); do
    name=${names[i]} path=${paths[i]}
    scenario_args "$i"
    c_all=()
    n_all=()
    for ((r = 1; r <= ROUNDS; r++)); do
        for server in colibri nginx; do
            if [ "$server" = colibri ]; then port=$cport pid=$COLIBRI_PID; else port=$nport pid=$NGINX_PID; fi
            out=$BENCH_TMP/wrk-$i-$r-$server.txt
            one_round "$server" "$port" "$path" "$out"
            if ! bench_alive "$pid"; then
                st=0
                wait "$pid" 2>/dev/null || st=$?
                [ "$st" -gt 128 ] && st="$st (signal $(kill -l $((st - 128))))"
                echo "bench: $server (pid $pid) died during '$name' round $r, exit status $st; logs:" >&2
                tail -n 30 "$COLIBRI_LOG" "$NGINX_LOG" >&2 || true
                exit 1
            fi
            if [ "$server" = colibri ]; then c_all+=("$rps"); else n_all+=("$rps"); fi
        done
    done
    cm=$($PY median "${c_all[@]}")
    nm=$($PY median "${n_all[@]}")
    ratio=$(awk -v a="$cm" -v b="$nm" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    echo "$name: colibri ${c_all[*]} | nginx ${n_all[*]} -> ratio $ratio"
    rows+=("| $name | $cm | $nm | $ratio |")
    shown=""
    for a in "${extra[@]}"; do
        case "$a" in *" "*) shown+=" '$a'" ;; "$BENCH_DIR"/*) shown+=" bench/${a#"$BENCH_DIR"/}" ;; *) shown+=" $a" ;; esac
    done
    cmds+=("wrk -t1 -c$CONNS -d$duration$shown http://127.0.0.1:PORT$path")
done

echo
echo "| scenario | colibri req/s | nginx req/s | ratio |"
echo "|---|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "Medians of $ROUNDS alternating rounds per server (colibri first)."
echo "Commands (PORT = colibri's or nginx's port):"
printf '    %s\n' "${cmds[@]}"
echo "    colibri: threads = $THREADS; nginx: worker_processes $WORKERS (bench/*.conf.in)"

bench_stop "$COLIBRI_PID" 10
cstatus=$BENCH_STATUS
bench_stop "$NGINX_PID" 10
if [ "$cstatus" != 0 ]; then
    echo "bench: colibri exited with status $cstatus on SIGTERM; log:" >&2
    tail -n 30 "$COLIBRI_LOG" >&2
    problems=$((problems + 1))
fi
echo
if [ "$problems" = 0 ]; then
    echo "SUMMARY: ${#rows[@]} scenarios, no wrk errors; ratios colibri/nginx: $(printf '%s\n' "${rows[@]}" | awk -F'|' '{gsub(/ /, "", $5); printf "%s%s", sep, $5; sep=", "}')"
else
    echo "SUMMARY: $problems problem(s) (see WARNING lines); ratios colibri/nginx: $(printf '%s\n' "${rows[@]}" | awk -F'|' '{gsub(/ /, "", $5); printf "%s%s", sep, $5; sep=", "}')"
    exit 1
fi
