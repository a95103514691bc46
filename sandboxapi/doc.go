// Package sandboxapi is what a sandbox may call: the sandbox API the proxy
// serves at https://aileron.internal/v1 (connector operations listed with
// their schemas and run by name, actions, their results, asking a human
// for access and waiting for the decision) and the MCP server
// over it, in the daemon (Streamable HTTP) and inside the sandbox (`aileron
// mcp` on stdio, through HTTPBackend). It offers only what a session may do
// itself.
//
// Security invariant 7 holds by its imports: it imports actions, policy,
// action, state's sentinel errors and dataplane's types, and nothing that
// decides approvals, installs connectors, binds credentials or reads the
// vault (archtest checks every package it reaches).
package sandboxapi
