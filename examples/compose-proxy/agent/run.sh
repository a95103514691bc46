#!/bin/sh
# The agent: the session's proxy variables and CA, nothing else.
until [ -e /shared/ready ]; do sleep 0.5; done
. /shared/env
curl -sS https://api.github.com/zen || true                      # allowed only if a connector names the host
curl -sS -v https://example.org/ 2>&1 | grep -i '^< proxy-status' # refused: the reason is in Proxy-Status
