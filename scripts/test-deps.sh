#!/usr/bin/env bash
# Installs the real clients the integration tests drive through the proxy:
# curl, git, /usr/bin/python3 with python3-requests and python3-httpx, Node (/usr/bin/node), the
# system CA bundle, Chromium (/usr/bin/chromium, for the approvals-page
# browser test), tmux (a terminal for the approvals watch test), ssh-keygen
# (openssh-client: the signature tests sign packages with it) and the Postgres
# server (postgresql: the fleet tests initdb a private server of their own, on a
# unix socket, and stop it). Idempotent: when everything is present it prints one line
# and exits without touching apt. Then it installs the pinned agents and SDKs
# from npm (integration/testdata/npm: Claude Code, Codex, Gemini CLI, the
# Anthropic, OpenAI and Gemini SDKs; undici, ws and https-proxy-agent for their proxy) into a cache keyed by the lock file's
# hash, once (see install_npm_clients). Run by `make test` before `go test`.
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
have_cmd npm || missing+=(npm)
[ -s /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
[ -x /usr/bin/chromium ] || missing+=(chromium)
have_cmd tmux || missing+=(tmux)
have_cmd ssh-keygen || missing+=(openssh-client)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
	missing+=(postgresql) # as root, the test server runs as the postgres user the package makes
fi

# install_npm_clients installs integration/testdata/npm's pinned packages
# with `npm ci` into $AILERON_TEST_NPM_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/aileron/test-npm)/<first 16 hex of the lock
# file's SHA-256>, and marks it complete with a file named ok; the
# integration tests find it the same way. An install that fails leaves no
# ok file, so the tests fail and name this script.
install_npm_clients() {
	local root lock sum dir
	root="$(cd "$(dirname "$0")/.." && pwd)"
	lock="$root/integration/testdata/npm/package-lock.json"
	sum="$(sha256sum "$lock" | cut -c1-16)"
	dir="${AILERON_TEST_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aileron/test-npm}/$sum"
	if [ -f "$dir/ok" ]; then
		echo "test-deps: npm clients present in $dir"
		return 0
	fi
	echo "test-deps: installing the pinned npm clients into $dir"
	rm -rf "$dir"
	mkdir -p "$dir"
	cp "$root/integration/testdata/npm/package.json" "$lock" "$dir/"
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	touch "$dir/ok"
}

if [ "${#missing[@]}" -eq 0 ]; then
	echo "test-deps: curl, git, python3 (+requests, httpx), node, npm, ca-certificates, chromium, tmux, ssh-keygen and postgresql present"
	install_npm_clients
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
install_npm_clients
