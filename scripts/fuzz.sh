#!/usr/bin/env bash
# Runs every fuzz target of the module, one after the other, for FUZZTIME
# each (default 30s; Go's -fuzztime syntax, so "1000x" works too). Targets
# are found by their declaration, so a new one is fuzzed without editing
# this file. Run by `make fuzz`.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-30s}"
targets=$(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . |
	sed -E 's#^\./(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)$#\1 \2#' | sort -u)
if [ -z "$targets" ]; then
	echo "fuzz: no fuzz target found" >&2
	exit 1
fi
n=0
while read -r dir name; do
	n=$((n + 1))
	echo "fuzz [$n]: ./$dir $name for $fuzztime"
	go test "./$dir" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime"
done <<<"$targets"
echo "fuzz: $n targets, none failed"
