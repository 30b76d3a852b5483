#!/usr/bin/env bash
# callgrind_tls.sh - instructions per keep-alive GET /hello over TLS 1.3 in
# colibri (threads = 1, one TLS listener, a P-256 certificate made here):
# colibri runs under callgrind twice, once answering nothing but the
# readiness probe and the handshake of one Python ssl keep-alive connection
# that then sends one GET, once with N more GETs on it.
# Per request = (Ir(N) - Ir(0)) / N. Environment: N (2000), COLIBRI
# (build/colibri), PORT_TLS (18446), PORT (18083).
set -euo pipefail
N=${N:-2000}
COLIBRI=$(readlink -f "${COLIBRI:-build/colibri}")
PORT_TLS=${PORT_TLS:-18446}
PORT=${PORT:-18083}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem \
    -out cert.pem -days 2 -subj /CN=localhost 2>/dev/null
cat >cg.conf <<CONF
listener 127.0.0.1:$PORT_TLS {
    tls = true
}
listener 127.0.0.1:$PORT
threads = 1
site {
    tls_certificate = cert.pem
    tls_key = key.pem
    handler /hello hello_world
}
CONF
run() {
    valgrind --tool=callgrind --callgrind-out-file="cg$1.out" "$COLIBRI" -c cg.conf >"log$1" 2>&1 &
    local vp=$!
    for _ in $(seq 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), timeout=0.2).close()" \
            2>/dev/null && break
        sleep 0.2
    done
    python3 - "$1" "$PORT_TLS" <<'PY'
import socket, ssl, sys
n, port = int(sys.argv[1]), int(sys.argv[2])
c = ssl.create_default_context()
c.check_hostname = False
c.verify_mode = ssl.CERT_NONE
c.minimum_version = ssl.TLSVersion.TLSv1_3
s = c.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
for _ in range(n + 1):
    s.sendall(b"GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n")
    d = b""
    while not d.endswith(b"Hello, World!"):
        d += s.recv(4096)
s.close()
PY
    kill -TERM "$vp"
    wait "$vp"
    sed -n 's/^summary: //p' "cg$1.out"
}
ir0=$(run 0)
irn=$(run "$N")
echo "TLS 1.3 keep-alive /hello: $(( (irn - ir0) / N )) instructions per request (N=$N)"
