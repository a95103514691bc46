#!/bin/sh
# Runs inside the fenced sandbox: no proxy variables, only Aileron's DNS.
cat /etc/resolv.conf
curl -sS https://api.github.com/zen || true          # allowed only if a connector names the host
curl -sS -m 2 https://example.org/ || echo "refused, as expected"
