#!/bin/sh
# The Aileron container's entrypoint in proxy mode: start the daemon,
# install the connectors, create the agent's session and hand the agent its
# proxy environment (proxy_url with the session token, the CA bundle)
# through the shared volume.
set -eu
rm -f /shared/ready /shared/env /shared/ca.pem   # left by an earlier run
aileron daemon &
daemon=$!
trap 'kill -TERM "$daemon"; wait "$daemon"; exit' TERM INT   # sh is PID 1: pass SIGTERM on, so stop drains
until aileron health >/dev/null 2>&1; do
  kill -0 "$daemon" 2>/dev/null || { echo "start-proxy.sh: the daemon exited; see its log above" >&2; exit 1; }
  sleep 0.2
done
for spec in /connectors/*.json; do
  [ -e "$spec" ] && aileron connector install --yes "$spec"
done
for old in $(aileron session list --json | jq -r '.[] | select(.name == "agent") | .id'); do
  aileron session delete "$old"      # the previous run's session
done
info=$(aileron session create --name agent --ttl 720h --json)
bundle=$(printf '%s' "$info" | jq -r .ca_bundle_path)
cp "$bundle" /shared/ca.pem
chmod 0644 /shared/ca.pem
# The agent sees the bundle at /shared/ca.pem, not at the daemon's path.
aileron session env "$(printf '%s' "$info" | jq -r .id)" | sed "s#$bundle#/shared/ca.pem#g" > /shared/env
chmod 0644 /shared/env
touch /shared/ready
wait "$daemon"
