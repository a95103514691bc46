#!/usr/bin/env bash
# Installs the real clients the integration tests drive through the proxy:
# curl, git, /usr/bin/python3 with python3-requests and python3-httpx, Node (/usr/bin/node), the
# system CA bundle, Chromium (/usr/bin/chromium, for the approvals-page
# browser test), tmux (a terminal for the approvals watch test) and the Postgres
# server (postgresql: the fleet tests initdb a private server of their own, on a
# unix socket, and stop it). Idempotent: when everything is present it prints one line
# and exits without touching apt. Run by `make test` before `go test`.
set -euo pipefail

missing=()

have_cmd() { [ -x "$1" ] || command -v "$1" >/dev/null 2>&1; }

have_cmd curl || missing+=(curl)
have_cmd git || missing+=(git)
[ -x /usr/bin/python3 ] || missing+=(python3)
if [ -x /usr/bin/python3 ]; then
	/usr/bin/python3 -c 'import requests' >/dev/null 2>&1 || missing+=(python3-requests)
	/usr/bin/python3 -c 'import httpx' >/dev/null 2>&1 || missing+=(python3-httpx)
else
	missing+=(python3-requests python3-httpx)
fi
[ -x /usr/bin/node ] || missing+=(nodejs)
[ -s /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
[ -x /usr/bin/chromium ] || missing+=(chromium)
have_cmd tmux || missing+=(tmux)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
	missing+=(postgresql) # as root, the test server runs as the postgres user the package makes
fi

if [ "${#missing[@]}" -eq 0 ]; then
	echo "test-deps: curl, git, python3 (+requests, httpx), node, ca-certificates, chromium, tmux and postgresql present"
	exit 0
fi

echo "test-deps: installing: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo="sudo"
	else
		echo "test-deps: need root (or sudo) to apt-get install: ${missing[*]}" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "test-deps: installed: ${missing[*]}"
