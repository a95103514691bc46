// Package metrics exposes the daemon's Prometheus metrics on the admin side:
// requests by decision, reason and connector, request and upstream latency,
// bytes, certificate cache counters, open connections and tunnels, pending
// approvals, audit write latency and errors, and OAuth refreshes.
//
// Every Metrics value holds its own registry; nothing is ever registered on
// the client library's global default registry. Labels never carry secrets,
// hosts, paths or other request-controlled text, and their cardinality is
// bounded: decision is a closed set, reason and connector are capped (values
// past the cap, or not well-formed, are counted under "other").
//
// It imports the Prometheus client, zerolog and dataplane's types; nothing
// of the control plane.
package metrics
