#!/bin/bash
# Events per second delivered to SUBSCRIBERS (10000) event-stream
# subscribers of one channel: samples/chat's /events, fed by POST /say
# (bench/sse_fanout.c says how). Loopback only; it stops by itself (at
# most 120 s of publishing). Run from the repository root after
# `make`:
#
#     bench/sse_fanout.sh [THREADS [SUBSCRIBERS [MESSAGES [SIZE [WINDOW]]]]]
#
# THREADS: the server's worker threads (1).
set -eu
BUILD=${BUILD:-build}
threads=${1:-1}
subs=${2:-10000}
msgs=${3:-200}
size=${4:-64}
window=${5:-32}
port=${PORT:-18480}
chat=$BUILD/samples/chat/chat
[ -x "$chat" ] || { echo "sse_fanout.sh: $chat missing: run make first" >&2; exit 2; }
cc -O2 -Wall -Wextra -o "$BUILD/sse_fanout" bench/sse_fanout.c
# room for SUBSCRIBERS connections on both sides
ulimit -n $((subs + 256)) 2>/dev/null || ulimit -n "$(ulimit -Hn)"
"$chat" -t "$threads" "127.0.0.1:$port" 2>"$BUILD/sse_fanout.server.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
i=0
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "server did not start" >&2; exit 1; }
    sleep 0.05
done
echo "server: $chat -t $threads (pid $pid); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
SERVER_PID=$pid "$BUILD/sse_fanout" 127.0.0.1 "$port" "$subs" "$msgs" "$size" "$window" 120
