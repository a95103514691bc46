// Package approvals owns the approval store: the approvals table of the
// state database and its state machine (pending → approved → consumed, or
// denied, or expired), each transition a single conditional update, and the
// waiting of held requests for a human decision. Store implements
// dataplane.Approvals for the proxy and is what the admin side decides
// through; nothing a sandbox reaches imports this package.
//
// It imports state, audit (event names) and dataplane's types; never
// another control-plane store.
package approvals
