// Package admin is the daemon's admin side: the admin API on the 0600 unix
// socket (sessions, the connector store, credentials and bindings, the
// OAuth login's code exchange, approvals), the approvals web page for humans, and the CLI's client of
// that API. It is the one place that decides approvals, installs
// connectors and binds credentials, and it is reachable only from the host:
// no package a sandbox can reach imports it.
//
// It imports every control-plane store (state, store, sessions,
// credentials, approvals), manifest (a connector's OAuth app) and
// dataplane's types.
package admin
