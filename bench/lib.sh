# lib.sh - sourced by bench/*.sh: scratch dir, server start/stop, cleanup.
# Expects `set -euo pipefail` in the caller. Everything it starts is recorded
# in BENCH_PIDS and stopped by bench_cleanup (installed as the EXIT trap).

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in
/*) ;;
*) BUILD="$REPO_DIR/$BUILD" ;;
esac
COLIBRI=${COLIBRI:-$BUILD/colibri}
NGINX=${NGINX:-nginx}
PY="python3 $BENCH_DIR/benchlib.py"
BENCH_PIDS=()

bench_die() {
    echo "bench: $*" >&2
    exit 1
}

bench_need() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || bench_die "'$c' not found (make bench installs it: scripts/deps.sh bench)"
    done
}

# Stop PID with SIGTERM, escalate to SIGKILL after $2 seconds (default 10).
# Prints nothing; the exit status of the process is left in BENCH_STATUS
# when it was our child.
bench_stop() {
    local pid=$1 grace=${2:-10} i
    BENCH_STATUS=""
    if ! kill -0 "$pid" 2>/dev/null; then
        BENCH_STATUS=0
        wait "$pid" 2>/dev/null || BENCH_STATUS=$?
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        # a zombie child still answers kill -0; reap it if it is ours
        if [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then
            break
        fi
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
        echo "bench: pid $pid ignored SIGTERM for ${grace}s, sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    BENCH_STATUS=0
    wait "$pid" 2>/dev/null || BENCH_STATUS=$?
}

bench_cleanup() {
    local rc=$? i
    trap - EXIT INT TERM
    # newest first: a traced server goes before its tracer
    for ((i = ${#BENCH_PIDS[@]} - 1; i >= 0; i--)); do
        bench_stop "${BENCH_PIDS[i]}" 5 || true
    done
    if [ -n "${BENCH_TMP:-}" ] && [ -d "$BENCH_TMP" ]; then
        if [ -n "${KEEP_TMP:-}" ]; then
            echo "bench: scratch files kept in $BENCH_TMP" >&2
        else
            rm -rf "$BENCH_TMP"
        fi
    fi
    exit "$rc"
}

# Scratch dir with a static root: hello.txt, 4k.bin, 1m.bin. World-readable,
# because nginx started as root serves files from workers running as nobody.
bench_setup() {
    BENCH_TMP=$(mktemp -d /tmp/colibri-bench.XXXXXX)
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    chmod 755 "$BENCH_TMP"
    BENCH_ROOT=$BENCH_TMP/www
    mkdir -m 755 "$BENCH_ROOT"
    printf 'Hello, World!' >"$BENCH_ROOT/hello.txt"
    head -c 4096 /dev/urandom >"$BENCH_ROOT/4k.bin"
    head -c 1048576 /dev/urandom >"$BENCH_ROOT/1m.bin"
    chmod 644 "$BENCH_ROOT"/*
    # BENCH_TLS=1: both servers speak TLS on their port, with one P-256
    # certificate (CN localhost) made here; clients use https://
    if [ "${BENCH_TLS:-0}" = 1 ]; then
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
            -subj /CN=localhost -keyout "$BENCH_TMP/key.pem" -out "$BENCH_TMP/cert.pem" 2>/dev/null ||
            bench_die "openssl could not make a certificate"
        chmod 644 "$BENCH_TMP/key.pem" "$BENCH_TMP/cert.pem"
        BENCH_SCHEME=https
    else
        BENCH_SCHEME=http
    fi
}

# bench_colibri_conf THREADS PORT -> path of the filled config
bench_colibri_conf() {
    local f=$BENCH_TMP/colibri-$2.conf
    $PY render "$BENCH_DIR/colibri.conf.in" "$f" THREADS="$1" PORT="$2" ROOT="$BENCH_ROOT" \
        ACCEPT="${ACCEPT:-reuseport}" CACHE_FOR="${BENCH_CACHE_FOR:-5s}"
    # BENCH_CONF_EXTRA: more top-level lines, @TMP@ = the scratch dir
    # (e.g. BENCH_CONF_EXTRA='access_log = @TMP@/access.log')
    if [ -n "${BENCH_CONF_EXTRA:-}" ]; then
        printf '%s\n' "${BENCH_CONF_EXTRA//@TMP@/$BENCH_TMP}" >>"$f"
    fi
    if [ "${BENCH_TLS:-0}" = 1 ]; then
        sed -i -e "s|^listener 127.0.0.1:$2\$|listener 127.0.0.1:$2 {\n    tls = true\n}|" \
            -e "s|^site {\$|site {\n    tls_certificate = $BENCH_TMP/cert.pem\n    tls_key = $BENCH_TMP/key.pem|" "$f"
    fi
    echo "$f"
}

# bench_nginx_conf WORKERS PORT -> path of the filled config
bench_nginx_conf() {
    local f=$BENCH_TMP/nginx-$2.conf user=""
    [ "$(id -u)" -eq 0 ] && user="user nobody nogroup;"
    $PY render "$BENCH_DIR/nginx.conf.in" "$f" WORKERS="$1" PORT="$2" ROOT="$BENCH_ROOT" \
        TMP="$BENCH_TMP" USER_LINE="$user"
    # as the issue's comparison: the same certificate, tickets on (nginx's
    # default), no session cache
    if [ "${BENCH_TLS:-0}" = 1 ]; then
        sed -i "s|listen 127.0.0.1:$2;|listen 127.0.0.1:$2 ssl;\n        ssl_certificate $BENCH_TMP/cert.pem;\n        ssl_certificate_key $BENCH_TMP/key.pem;\n        ssl_protocols TLSv1.2 TLSv1.3;\n        ssl_session_cache off;|" "$f"
    fi
    echo "$f"
}

# bench_start_colibri THREADS PORT [WRAPPER...] -> sets COLIBRI_PID (the pid
# $! of the wrapper when there is one) and COLIBRI_LOG.
bench_start_colibri() {
    local threads=$1 port=$2 conf
    shift 2
    [ -x "$COLIBRI" ] || bench_die "no colibri binary at $COLIBRI (build it first, or set BUILD=dir or COLIBRI=path)"
    conf=$(bench_colibri_conf "$threads" "$port")
    COLIBRI_LOG=$BENCH_TMP/colibri-$port.log
    COLIBRI_CMD="$* $COLIBRI -c $conf"
    "$@" "$COLIBRI" -c "$conf" >"$COLIBRI_LOG" 2>&1 &
    COLIBRI_PID=$!
    BENCH_PIDS+=("$COLIBRI_PID")
}

# bench_start_nginx WORKERS PORT [-g EXTRA] [WRAPPER...] -> sets NGINX_PID,
# NGINX_LOG. WORKERS=single runs one process without a master (strace).
bench_start_nginx() {
    local workers=$1 port=$2 conf extra="" g
    shift 2
    if [ "$workers" = single ]; then
        workers=1
        extra="master_process off; "
    fi
    conf=$(bench_nginx_conf "$workers" "$port")
    NGINX_LOG=$BENCH_TMP/nginx-$port.log
    g="daemon off; ${extra}pid $BENCH_TMP/nginx-$port.pid;"
    NGINX_CMD="$* $NGINX -c $conf -p $BENCH_TMP -e $BENCH_TMP/nginx-error.log -g '$g'"
    "$@" "$NGINX" -c "$conf" -p "$BENCH_TMP" -e "$BENCH_TMP/nginx-error.log" -g "$g" \
        >"$NGINX_LOG" 2>&1 &
    NGINX_PID=$!
    BENCH_PIDS+=("$NGINX_PID")
}

# bench_child PID EXE -> the child of PID running EXE (the traced server under
# strace), waiting up to 5 s for it to appear. The executable is checked
# because strace forks short-lived children of its own to probe ptrace.
bench_child() {
    local i c want
    want=$(readlink -f "$(command -v "$2")")
    for ((i = 0; i < 50; i++)); do
        for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
            if [ "$(readlink "/proc/$c/exe" 2>/dev/null)" = "$want" ]; then
                echo "$c"
                return 0
            fi
        done
        sleep 0.1
    done
    bench_die "pid $1 has no child running $want"
}

# bench_children PID -> all children of PID, one line
bench_children() {
    cat /proc/"$1"/task/*/children 2>/dev/null | tr '\n' ' '
}

bench_alive() {
    kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
