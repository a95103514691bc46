#!/bin/sh
# The gateway container's entrypoint: start the daemon, install the
# connectors, create the agent's session, hand its CA to the agent through
# the shared volume, and make the daemon the gateway of agentnet.
set -eu
# The synthetic addresses the policy DNS hands out (sandbox.synthetic_cidr,
# set in docker-compose.yml) are this container's own: it answers ARP for
# the whole range, so the agent reaches them on-link, inside the subnet
# that Docker's internal network confines it to.
ip route add local "$AILERON_SANDBOX__SYNTHETIC_CIDR" dev lo
aileron daemon --listen 127.0.0.1:9080 &
daemon=$!
until aileron session list >/dev/null 2>&1; do sleep 0.2; done
for spec in /connectors/*.json; do
  [ -e "$spec" ] && aileron connector install "$spec"
done
info=$(aileron session create --name agent --ttl 720h --json)
cp "$(printf '%s' "$info" | jq -r .ca_bundle_path)" /shared/ca.pem
chmod 0644 /shared/ca.pem
aileron sandbox attach --session "$(printf '%s' "$info" | jq -r .id)" --source 172.30.0.0/24 --listen 172.30.0.2
touch /shared/ready
wait "$daemon"
