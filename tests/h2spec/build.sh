#!/bin/sh
# build.sh OUTDIR - builds h2spec v2.2.1 (the tag the Go module proxy
# serves) into OUTDIR/h2spec, with the dependency revisions its own
# Gopkg.lock pins, from a throw-away copy of this wrapper module. The Go
# caches live under OUTDIR: nothing is written outside it.
set -eu
out=$(cd "${1:?usage: build.sh OUTDIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$out/h2spec" ] && exit 0
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
export GOPATH="$out/gopath" GOCACHE="$out/gocache" GOFLAGS=-mod=mod GOTOOLCHAIN=local
work="$out/h2spec-mod"
rm -rf "$work" && mkdir -p "$work" && cp "$here/go.mod" "$work/"
cd "$work"
# the tags (and, for x/net and x/sys, revisions of the same weeks) of
# h2spec v2.2.1's Gopkg.lock: the proxy serves no bare commit hashes
"$GO" get \
    github.com/summerwind/h2spec@v2.2.1+incompatible \
    github.com/fatih/color@v1.7.0 \
    github.com/inconshreveable/mousetrap@v1.0.0 \
    github.com/mattn/go-colorable@v0.1.0 \
    github.com/mattn/go-isatty@v0.0.4 \
    github.com/spf13/cobra@v0.0.3 \
    github.com/spf13/pflag@v1.0.3 \
    golang.org/x/net@v0.0.0-20181102091132-c10e9556a7bc \
    golang.org/x/sys@v0.0.0-20181107165924-66b7b1311ac8 \
    golang.org/x/text@v0.3.0
"$GO" build -o "$out/h2spec" github.com/summerwind/h2spec/cmd/h2spec
