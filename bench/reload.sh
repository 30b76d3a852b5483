#!/usr/bin/env bash
# reload.sh - reloads under load: wrk drives keep-alive GETs of /hello and a
# cached 4 KiB file at colibri while the config is reloaded (SIGHUP) every
# second, and the run must fail nothing: no socket error, no non-2xx answer.
#
# colibri runs the bench config (bench/colibri.conf.in: hello_world and
# serve_files); every reload alternates it with the same config plus one
# more route, so each SIGHUP builds, publishes and retires a generation
# (serve_files' cache and inotify thread included). wrk runs DURATION
# seconds (default 10) with -t1 -c CONNS (default 64) on each of /hello and
# /4k.bin, both at once; RELOADS (default DURATION) SIGHUPs go out one a
# second. The script prints wrk's summaries, the reloads the error log
# counted ("reloaded"), and exits 1 if any request failed or a reload did.
#
# Environment: DURATION, CONNS, THREADS (colibri's, default 2), BUILD or
# COLIBRI as for run.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
bench_need wrk python3
bench_setup
port=$($PY ports 1)
bench_start_colibri "$THREADS" "$port"
$PY wait "$port" 10 "$COLIBRI_PID" || bench_die "colibri did not start: $(cat "$COLIBRI_LOG")"
conf=$BENCH_TMP/colibri-$port.conf
cp "$conf" "$conf.a"
# the same config with one more route (in the site block the bench config ends with)
python3 - "$conf.a" "$conf.b" <<'PYEOF'
import sys
text = open(sys.argv[1]).read()
i = text.rindex("}")
open(sys.argv[2], "w").write(text[:i] + "    handler /reloaded echo\n" + text[i:])
PYEOF

wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$port/hello" >"$BENCH_TMP/wrk-hello.txt" 2>&1 &
w1=$!
wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$port/4k.bin" >"$BENCH_TMP/wrk-4k.txt" 2>&1 &
w2=$!
for ((i = 1; i <= DURATION; i++)); do
    sleep 1
    if ((i % 2)); then cp "$conf.b" "$conf"; else cp "$conf.a" "$conf"; fi
    kill -HUP "$COLIBRI_PID"
done
wait "$w1" "$w2"
bad=0
for f in hello 4k; do
    echo "--- wrk /$f"
    cat "$BENCH_TMP/wrk-$f.txt"
    grep -qE "Socket errors|Non-2xx" "$BENCH_TMP/wrk-$f.txt" && bad=1
done
sleep 0.5
ok=$(grep -c "\] reloaded$" "$COLIBRI_LOG" || true)
failed=$(grep -c "reload failed" "$COLIBRI_LOG" || true)
echo "--- reloads: $DURATION sent, $ok reloaded, $failed failed"
[ "$ok" -eq "$DURATION" ] && [ "$failed" -eq 0 ] || bad=1
bench_stop "$COLIBRI_PID"
[ "$BENCH_STATUS" -eq 0 ] || { echo "colibri exited with $BENCH_STATUS"; bad=1; }
if [ "$bad" -ne 0 ]; then
    echo "FAILED"
    exit 1
fi
echo "ok: no failed request"
