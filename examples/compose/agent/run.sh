#!/bin/sh
# The agent: no proxy variables, only Aileron's DNS, Aileron's CA.
until [ -e /shared/ready ]; do sleep 0.5; done
cat /etc/resolv.conf
curl -sS https://api.github.com/zen || true            # allowed only if a connector names the host
curl -sS -m 2 https://example.org/ || echo "refused, as expected"
