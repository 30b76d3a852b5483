#!/usr/bin/env bash
# tls_breakdown.sh - where a TLS connection's instructions go, by shared
# object (the server's own code, libssl, libcrypto, libc, the kernel's
# vDSO), in colibri and in nginx: each runs under callgrind with one
# worker, once answering only a readiness probe (the baseline) and once
# with a workload; per connection (or request) = (loaded - baseline) / count,
# object by object (bench/cg_objects.py).
#
# Workloads (WORKLOADS, default "full resume keepalive"):
#   full       bench/tls_conns.c: a full TLS 1.3 handshake (P-256 key share,
#              P-256 ECDSA certificate), GET /hello, close; per connection
#   resume     the same, each resuming by the previous connection's ticket
#   keepalive  one connection, N (2000) keep-alive GETs of /hello; per request
# Environment: COLIBRI (build/colibri), SERVERS ("colibri nginx"), SECONDS
# (8: how long tls_conns runs under valgrind), N.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
COLIBRI=$(readlink -f "${COLIBRI:-build/colibri}")
SERVERS=${SERVERS:-colibri nginx}
WORKLOADS=${WORKLOADS:-full resume keepalive}
SECONDS_RUN=${SECONDS:-8}
N=${N:-2000}
NGINX=${NGINX:-nginx}
tmp=$(mktemp -d /tmp/tls-breakdown.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cd "$tmp"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem \
    -out cert.pem -days 2 -subj /CN=localhost 2>/dev/null
chmod 644 key.pem cert.pem
cc -O2 -o tls_conns "$here/tls_conns.c" -lssl -lcrypto -lpthread
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() { # SERVER PORT -> pid in $SPID
    local srv=$1 port=$2
    if [ "$srv" = colibri ]; then
        cat >c.conf <<CONF
listener 127.0.0.1:$port {
    tls = true
}
threads = 1
keep_alive_timeout = 120s
site {
    tls_certificate = $tmp/cert.pem
    tls_key = $tmp/key.pem
    handler /hello hello_world
}
CONF
        valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$COLIBRI" -c c.conf >log 2>&1 &
    else
        mkdir -p ng
        cat >ng.conf <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $tmp/ng.pid;
error_log $tmp/ng.err warn;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $tmp/ng; proxy_temp_path $tmp/ng; fastcgi_temp_path $tmp/ng;
    uwsgi_temp_path $tmp/ng; scgi_temp_path $tmp/ng;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $tmp/cert.pem;
        ssl_certificate_key $tmp/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache off;
        location = /hello { return 200 "Hello, World!"; }
    }
}
CONF
        valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$NGINX" -c "$tmp/ng.conf" -p "$tmp" >log 2>&1 &
    fi
    SPID=$!
    for _ in $(seq 150); do
        python3 - "$port" <<'PY' 2>/dev/null && return 0
import socket, ssl, sys
c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as s:
    with c.wrap_socket(s, server_hostname="localhost") as t:
        t.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert t.recv(100).startswith(b"HTTP/1.1 200")
PY
        sleep 0.2
    done
    cat log >&2
    echo "tls_breakdown: $srv did not start" >&2
    exit 1
}

stop() {
    kill -TERM "$SPID"
    wait "$SPID" 2>/dev/null || true
}

keepalive() { # PORT N
    python3 - "$1" "$2" <<'PY'
import socket, ssl, sys
c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
n = int(sys.argv[2])
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30) as s:
    with c.wrap_socket(s, server_hostname="localhost") as t:
        buf = b""
        for _ in range(n):
            t.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            while not buf.endswith(b"Hello, World!"):
                buf += t.recv(4096)
            buf = b""
print(n)
PY
}

for srv in $SERVERS; do
    port=$(free_port)
    start "$srv" "$port"
    stop
    cp cg.out base.out
    for w in $WORKLOADS; do
        port=$(free_port)
        start "$srv" "$port"
        case $w in
        full | resume)
            out=$(./tls_conns "$port" "$SECONDS_RUN" "$w" /hello 4 || true)
            count=$(awk '/requests in/ {print $1}' <<<"$out")
            ;;
        keepalive) count=$(keepalive "$port" "$N") ;;
        esac
        stop
        echo "== $srv $w: $count $( [ "$w" = keepalive ] && echo requests || echo connections), instructions each by object (self cost, baseline subtracted)"
        python3 - "$here/cg_objects.py" base.out cg.out "$count" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("cg", sys.argv[1]); cg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cg)
base, load, n = cg.by_object(sys.argv[2]), cg.by_object(sys.argv[3]), float(sys.argv[4])
diff = {ob: (load.get(ob, 0) - base.get(ob, 0)) / n for ob in set(base) | set(load)}
total = sum(diff.values())
import os
for ob, v in sorted(diff.items(), key=lambda kv: -kv[1]):
    if v >= 10:
        print("  %-36s %10.0f %5.1f%%" % (os.path.basename(ob), v, 100 * v / total))
print("  %-36s %10.0f" % ("total", total))
PY
    done
done
