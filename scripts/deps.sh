#!/usr/bin/env bash
# deps.sh GROUP... - make sure the Debian packages a make target needs are
# installed. As root, missing ones are installed with apt-get; otherwise the
# exact command is printed and the script fails.
set -euo pipefail

pkgs_build="gcc cmake ninja-build pkg-config make zlib1g-dev libbrotli-dev libzstd-dev libjansson-dev media-types libsqlite3-dev libseccomp-dev libssl-dev libpcre2-dev libcrypt-dev libnghttp2-dev python3"
pkgs_test="python3 python3-venv curl nghttp2-client openssl apache2-utils whois prometheus clang-format systemd haproxy chromium chromium-driver faketime logrotate groff-base php8.2-fpm golang-go"
pkgs_fuzz="clang libclang-rt-14-dev"
pkgs_cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
pkgs_bench="wrk nginx-light strace valgrind procps time liburing-dev linux-perf"
pkgs_check="valgrind"

want=""
for g in "$@"; do
    v="pkgs_$g"
    want="$want ${!v}"
done

missing=""
for p in $want; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    echo "deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
    echo "deps: missing packages:$missing" >&2
    echo "deps: run:  sudo apt-get install -y$missing" >&2
    exit 1
fi
