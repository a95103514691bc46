#!/bin/sh
# The gateway container's entrypoint: start the daemon, install the
# connectors, create the agent's session, hand its CA to the agent through
# the shared volume, and make the daemon the gateway of agentnet.
set -eu
rm -f /shared/ready /shared/ca.pem   # left by an earlier run: the agent waits for this run's
# The synthetic addresses the policy DNS hands out (sandbox.synthetic_cidr,
# set in docker-compose.yml) are this container's own: it answers ARP for
# the whole range, so the agent reaches them on-link, inside the subnet
# that Docker's internal network confines it to.
ip route replace local "$AILERON_SANDBOX__SYNTHETIC_CIDR" dev lo
aileron daemon --listen 127.0.0.1:9080 &
daemon=$!
# sh is PID 1 here and would ignore SIGTERM: pass it on, so `docker compose
# stop` drains the daemon and removes the gateway.
trap 'kill -TERM "$daemon"; wait "$daemon"; exit' TERM INT
until aileron session list >/dev/null 2>&1; do
  kill -0 "$daemon" 2>/dev/null || { echo "start.sh: the daemon exited; see its log above" >&2; exit 1; }
  sleep 0.2
done
for spec in /connectors/*.json; do
  [ -e "$spec" ] && aileron connector install --yes "$spec"
done
for old in $(aileron session list --json | jq -r '.[] | select(.name == "agent") | .id'); do
  aileron session delete "$old"      # the previous run's session
done
info=$(aileron session create --name agent --ttl 720h --json)
cp "$(printf '%s' "$info" | jq -r .ca_bundle_path)" /shared/ca.pem
chmod 0644 /shared/ca.pem
aileron sandbox attach --session "$(printf '%s' "$info" | jq -r .id)" --source 172.30.0.0/24 --listen 172.30.1.2
touch /shared/ready
wait "$daemon"
