#!/usr/bin/env bash
# coro-variants.sh - the context switches this machine does not use by
# default: the ucontext fallback (natively) and the aarch64 assembly (cross-
# compiled, run under qemu-user). Both run tests/unit/test_coro.c.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
src="tests/unit/test_coro.c src/lib/base/coro.c"
flags="-std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Isrc/lib -Itests/unit"

echo "coro: ucontext fallback"
cc $flags -DCOLIBRI_CORO_UCONTEXT -o "$out/ucontext" $src src/lib/base/arch/coro_ucontext.c -lm
"$out/ucontext"

echo "coro: aarch64 assembly under qemu"
aarch64-linux-gnu-gcc $flags -static -o "$out/aarch64" $src src/lib/base/arch/coro_asm.c \
    src/lib/base/arch/coro_aarch64.S -lm
qemu-aarch64 "$out/aarch64"
