#!/usr/bin/env bash
# cpu_pinned.sh - this build against another colibri binary (BASE, e.g. one
# built before a change), server CPU per request, pinned: bench/cpu.sh with
# SERVERS="colibri base" (the ratio column is base/this per round) and
# WORKLOADS=hello unless set. Everything else as in bench/cpu.sh, including
# THIS_CONF_EXTRA, so one binary can be measured against itself with a
# setting on:
#   BASE=build/colibri THIS_CONF_EXTRA='access_log = @TMP@/access.log' bench/cpu_pinned.sh
set -euo pipefail
[ -n "${BASE:-}" ] || { echo "bench: set BASE to the colibri binary to compare with" >&2; exit 1; }
SERVERS="colibri base" WORKLOADS=${WORKLOADS:-hello} exec "$(dirname "$0")/cpu.sh"
