// Package sandbox builds what a sandbox receives from Aileron: the
// environment that points common HTTP clients at the session's proxy and CA.
// It also renders tools.txt and the shims (session render) and runs a
// command with a session's environment (launch).
//
// It imports policy, action and sessions' types (the CLI hands it what the
// admin client fetched); never a store, never the admin side itself.
package sandbox
