// Package proposals owns the proposal store: the unknown requests of
// sessions in learn mode, aggregated by session, method, host, port and
// path template into proposals a human lists, reads and rejects. Store
// implements dataplane.Proposals for the proxy; Template generalises a
// request path into the template a proposal is keyed by. Nothing a sandbox
// reaches imports this package.
//
// It imports state, audit (event names) and dataplane's types; never
// another control-plane store.
package proposals
