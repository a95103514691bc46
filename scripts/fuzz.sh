#!/usr/bin/env bash
# Runs every fuzz target of the module, one after the other, for FUZZTIME
# each (default 30s; Go's -fuzztime syntax, so "1000x" works too) with $GO
# (default go). Targets are found by their declaration, so a new one is
# fuzzed without editing this file. Every target runs even when one fails;
# the script then exits 1 naming the failures (their crashers are written to
# the package's testdata/fuzz/). Run by `make fuzz`.
set -euo pipefail
cd "$(dirname "$0")/.."
go="${GO:-go}"
fuzztime="${FUZZTIME:-30s}"
targets=$(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . |
	sed -E 's#^\./(([^:]*)/)?[^/:]+_test\.go:func (Fuzz[A-Za-z0-9_]*)$#\2 \3#; s#^ #. #' | sort -u)
if [ -z "$targets" ]; then
	echo "fuzz: no fuzz target found" >&2
	exit 1
fi
n=0
failed=()
while read -r dir name; do
	n=$((n + 1))
	echo "fuzz [$n]: ./$dir $name for $fuzztime"
	if ! "$go" test "./$dir" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime"; then
		failed+=("./$dir $name")
	fi
done <<<"$targets"
if [ "${#failed[@]}" -gt 0 ]; then
	printf 'fuzz: %d of %d targets failed:\n' "${#failed[@]}" "$n" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "fuzz: $n targets, none failed"
