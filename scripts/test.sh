#!/usr/bin/env bash
# Runs every test, fuzz seed corpora included, under the race detector. When
# one fails, the failing tests' names and messages are repeated at the very
# end, so the tail of a long CI log says what broke and where.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$GO" test -race -count=1 -timeout 20m ./... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo
	echo "==== what failed (repeated from above) ===="
	grep -E -- '--- FAIL|^FAIL|^panic:|^fatal error:|_test\.go:[0-9]+:|timed out' "$log" | cut -c1-400 | head -120
fi
exit "$rc"
