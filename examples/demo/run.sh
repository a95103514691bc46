#!/usr/bin/env bash
# Offline walk-through: start a stand-in upstream and the daemon, install the
# demo connector, create a session, then make one allowed and one denied
# request with curl. Run from the repository root: `make demo`.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/aileron}
rm -rf .demo && mkdir -p .demo/home
export AILERON_HOME=$PWD/.demo/home

go build -o .demo/upstream ./examples/demo/upstream
.demo/upstream --root-out .demo/upstream-root.pem 2>.demo/upstream.log &
UP=$!
for _ in $(seq 50); do [ -s .demo/upstream-root.pem ] && break; sleep 0.1; done

"$BIN" daemon --config examples/demo/config.yaml 2>.demo/daemon.log &
DAEMON=$!
trap 'kill $DAEMON $UP 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$AILERON_HOME/daemon.json" ] && break; sleep 0.1; done

echo "+ aileron connector install examples/demo/connector.json"
"$BIN" connector install examples/demo/connector.json
echo "+ aileron session create --name demo --json"
ID=$("$BIN" session create --name demo --json | sed -n 's/.*"id": "\([^"]*\)".*/\1/p')
echo "  session $ID"
eval "$("$BIN" session env "$ID")"

echo; echo "+ curl https://api.demo.test/v1/greetings/1      (an operation in the spec: allowed)"
curl -sS https://api.demo.test/v1/greetings/1; echo
echo; echo "+ curl -X DELETE https://api.demo.test/v1/greetings/1   (no such operation: denied)"
curl -sS -X DELETE https://api.demo.test/v1/greetings/1; echo
echo; echo "The daemon's log line for each decision is in .demo/daemon.log"
