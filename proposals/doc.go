// Package proposals owns the proposal store: the unknown requests of
// sessions in learn mode, aggregated by session, method, host, port and
// path template into proposals a human lists, reads, rejects and accepts,
// and the access an agent asks for with a justification (Ask), whose
// decision it waits for (Await). Store implements dataplane.Proposals for
// the proxy; Template generalises a request path into the template a
// proposal is keyed by; RuleFor turns a proposal and a human's edits into
// a rule, and LearnedSpec rules into the spec of a learned connector
// (local://learned/NAME), which the admin side installs. Nothing a sandbox
// reaches imports this package: the sandbox API reaches Ask and Await
// through an interface of its own.
//
// It imports state, policy, audit (event names) and dataplane's types;
// never another control-plane store.
package proposals
