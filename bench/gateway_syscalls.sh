#!/bin/bash
# gateway_syscalls.sh BIN - system calls per proxied /hello of a front
# colibri (one worker, CPU 0) to a colibri /hello upstream (one worker,
# CPU 1): strace -c -f on the front during wrk -t1 -c8 -d3s (CPU 1).
# bench/RESULTS.md, "Gateway CPU and kernel share (session 9)".
BIN=$1; T=$(mktemp -d); UP=$((20000 + RANDOM % 10000)); FR=$((UP + 1))
printf 'listener 127.0.0.1:%d\nthreads = 1\nkeep_alive_timeout = 120s\nsite {\n    handler /hello hello_world\n}\n' $UP > $T/up.conf
printf 'listener 127.0.0.1:%d\nthreads = 1\nkeep_alive_timeout = 120s\nupstream app {\n    server 127.0.0.1:%d\n    keepalive = 32\n}\nsite {\n    proxy /hello {\n        to = app\n    }\n}\n' $FR $UP > $T/front.conf
(cd $T && exec taskset -c 1 $BIN -c up.conf 2>/dev/null) & UPP=$!
(cd $T && exec taskset -c 0 $BIN -c front.conf 2>/dev/null) & FRP=$!
sleep 0.5
curl -s http://127.0.0.1:$FR/hello >/dev/null
strace -c -f -p $FRP -o $T/strace.txt & SP=$!
sleep 0.5
OUT=$(taskset -c 1 wrk -t1 -c8 -d3 http://127.0.0.1:$FR/hello)
kill -INT $SP; wait $SP
REQ=$(echo "$OUT" | awk '/requests in/ {print $1}')
kill $FRP $UPP; wait $FRP $UPP 2>/dev/null
echo "requests $REQ"
awk -v r=$REQ 'NF>=5 && $1 ~ /^[0-9.]+$/ { name=$NF; calls=($5 ~ /^[0-9]+$/ && NF==6)?$4:$4; printf "%-14s %8d  %.3f/req\n", name, $4, $4/r } /^100.00/ {printf "total %d  %.3f/req\n", $3, $3/r}' $T/strace.txt
rm -rf $T
