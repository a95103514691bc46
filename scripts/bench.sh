#!/usr/bin/env bash
# CPU, throughput and latency of the proxy, as ratios against a direct
# client→upstream run in the same invocation: first with client, upstream
# and daemon as separate processes (CPU of each from /proc; beside them a
# bare goproxy MITM, and squid and mitmdump when installed), then the
# in-process phases (and mitmproxy's mitmdump when it is installed). Run
# from anywhere: `make bench`; bench/README.md explains every row.
#
# Environment:
#   BIN                  aileron binary (default bin/aileron; built when missing)
#   BENCH_DURATION       measured time per phase and target (default 5s)
#   BENCH_CONCURRENCY    concurrent clients in the throughput phases (default 8)
#   BENCH_JSON=1         also print the results as JSON after the table
#   BENCH_INSTALL_MITM=1 apt-get install mitmproxy when mitmdump is missing
#   MITMDUMP             mitmdump to compare against (default: `command -v mitmdump`)
# Extra arguments are passed to the bench program (see `go run ./bench -h`).
# A budget miss is reported, never a failure; the exit status is non-zero
# only when the bench could not run or requests failed.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=${BIN:-bin/aileron}

if [ ! -x "$BIN" ]; then
	echo "bench: building $BIN"
	"$GO" build -o "$BIN" ./cmd/aileron
fi

if ! command -v mitmdump >/dev/null 2>&1 && [ -z "${MITMDUMP:-}" ] && [ "${BENCH_INSTALL_MITM:-0}" = 1 ]; then
	echo "bench: BENCH_INSTALL_MITM=1: installing mitmproxy"
	sudo=""
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq || true
	$sudo apt-get install -y -qq mitmproxy || echo "bench: could not install mitmproxy; running without it" >&2
fi

args=(--aileron "$BIN" --duration "${BENCH_DURATION:-5s}" --concurrency "${BENCH_CONCURRENCY:-8}")
MITMDUMP=${MITMDUMP:-$(command -v mitmdump || true)}
if [ -n "$MITMDUMP" ]; then
	args+=(--mitmdump "$MITMDUMP")
else
	echo "bench: mitmdump not installed; no mitmdump column (BENCH_INSTALL_MITM=1 installs it)"
fi
if [ "${BENCH_JSON:-0}" = 1 ]; then args+=(--json); fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/aileron-bench" ./bench
"$tmp/aileron-bench" "${args[@]}" "$@"
