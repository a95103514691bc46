#!/usr/bin/env bash
# An offline walk-through of what Aileron is for, on loopback only: a stand-in
# API that wants a key, the daemon, a session, and an agent that holds no key.
# It shows a request allowed with the key added on the wire, one denied, one
# held until a human approves it (then sent exactly once), and the audit trail
# of it all, checked. Run from anywhere: `make demo` (needs only Go). DEMO_DIR
# is where it works (default .demo in the repository); BIN is the aileron
# binary (default bin/aileron). It stops what it started when it ends.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/aileron}
DEMO=${DEMO_DIR:-$PWD/.demo}
if [ ! -x "$BIN" ]; then
	echo "$BIN is missing: run make build first (make demo does both)" >&2
	exit 1
fi
rm -rf "$DEMO" && mkdir -p "$DEMO/home"
export AILERON_HOME=$DEMO/home
export AILERON_UPSTREAM__CA_FILES="[$DEMO/upstream-root.pem]" # the config names .demo/: say where this run's is

say() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }
aileron() { # show the command as a person would type it, then run it
	printf '$ aileron %s\n' "$*"
	"$BIN" "$@"
}

go build -o "$DEMO/upstream" ./examples/demo/upstream
go build -o "$DEMO/agent" ./examples/demo/agent
"$DEMO/upstream" --root-out "$DEMO/upstream-root.pem" --key-out "$DEMO/api.key" 2>"$DEMO/upstream.log" &
UP=$!
DAEMON= HELD=
trap 'kill $HELD $DAEMON $UP 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$DEMO/upstream-root.pem" ] && [ -s "$DEMO/api.key" ] && break; sleep 0.1; done
if [ ! -s "$DEMO/upstream-root.pem" ]; then
	echo "the stand-in API did not start; its log:" >&2
	cat "$DEMO/upstream.log" >&2
	exit 1
fi
"$BIN" daemon --config examples/demo/config.yaml 2>"$DEMO/daemon.log" &
DAEMON=$!
for _ in $(seq 100); do [ -s "$AILERON_HOME/daemon.json" ] && break; sleep 0.1; done
if [ ! -s "$AILERON_HOME/daemon.json" ]; then
	echo "the daemon did not start; its log:" >&2
	cat "$DEMO/daemon.log" >&2
	exit 1
fi

say "1. Install the demo connector: the operations of api.demo.test a session may use"
note "greetings.list and greetings.get are allowed; greetings.create needs a human's approval."
aileron connector install --yes examples/demo/connector.json

say "2. Give Aileron the API's key, and bind it to the connector"
note "The stand-in API made a key at start, as a provider's dashboard would ($DEMO/api.key)."
note "It goes into Aileron's encrypted vault on stdin; no sandbox ever sees it."
printf '$ aileron credential set demo-key --kind bearer < %s\n' "$DEMO/api.key"
"$BIN" credential set demo-key --kind bearer <"$DEMO/api.key"
aileron credential bind local://demo/greetings --credential demo-key --env DEMO_API_KEY

say "3. Create a session: all a sandbox receives is a proxy URL, a CA and a placeholder"
printf '$ aileron session create --name demo --json\n'
ID=$("$BIN" session create --name demo --json | sed -n 's/.*"id": "\([^"]*\)".*/\1/p')
note "session $ID"
printf '$ eval "$(aileron session env %s)"\n' "$ID"
eval "$("$BIN" session env "$ID")"
note "HTTPS_PROXY and SSL_CERT_FILE now point at Aileron; the sandbox's only key is a placeholder:"
note "DEMO_API_KEY=$DEMO_API_KEY"

say "4. An allowed request: the agent sends the placeholder, Aileron puts the real key on the wire"
"$DEMO/agent" GET https://api.demo.test/v1/greetings/1
note "\"authorized\":true is the API saying it got its key, which the agent never held."

say "5. A request no operation of the connector allows: denied, and it never reaches the API"
"$DEMO/agent" DELETE https://api.demo.test/v1/greetings/1
note "It matches no operation, so no key is added, and a placeholder on it is refused too (placeholder_misuse)."

say "6. A request that needs a human: held until someone approves it"
"$DEMO/agent" POST https://api.demo.test/v1/greetings '{"text":"hej"}' >"$DEMO/held.out" &
HELD=$!
AP=
for _ in $(seq 100); do
	AP=$("$BIN" approvals list --json | sed -n 's/.*"id": "\(ap_[^"]*\)".*/\1/p' | head -n 1)
	[ -n "$AP" ] && break
	sleep 0.1
done
if [ -z "$AP" ]; then
	echo "no approval appeared; the daemon's log:" >&2
	tail -n 20 "$DEMO/daemon.log" >&2
	exit 1
fi
note "The agent's POST waits. The human sees exactly what would be sent (here, and on the web page:"
note "\`aileron approvals web-token\` prints its login link; \`aileron approvals watch\` is a live list):"
aileron approvals list
aileron approvals show "$AP"
note "The human approves it (or denies it, with a reason the agent is shown):"
aileron approvals approve "$AP"
wait "$HELD"
HELD=
cat "$DEMO/held.out"
note "The held request went on the moment it was approved: created once (\"creates_received\":1)."

say "7. What reached the API: the allowed GET and the approved POST, each once; never the DELETE"
printf '$ grep received %s\n' "$DEMO/upstream.log"
grep received "$DEMO/upstream.log"

say "8. The audit trail: one line per decision, hash-chained, under signed checkpoints"
note "Stop the daemon first: a clean stop signs everything in the trail (a running one signs every 10 s)."
printf '$ kill -TERM %s   # the daemon\n' "$DAEMON"
kill -TERM "$DAEMON"
wait "$DAEMON" || true
DAEMON=
aileron audit tail
aileron audit verify

say "Done: the daemon and the API are stopped. Their logs and state are in $DEMO (the next run starts afresh)."
