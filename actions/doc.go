// Package actions owns the action runner and its runs: an installed action
// (from a connector package's actions/) runs as a chain of synthetic calls
// through the proxy's one request pipeline (Executor), gated by an action
// approval when its manifest asks for one, with every state change a
// compare-and-swap on its row of the action_runs table. It also builds the
// synthetic call of a named connector operation (OperationCall) and defines
// the wire types the sandbox API and the MCP server answer with.
//
// It imports state, policy, action, audit (event names) and dataplane's
// types. It reaches approvals through the small Approvals interface it
// declares, which cannot decide an approval; it never imports another
// control-plane store.
package actions
