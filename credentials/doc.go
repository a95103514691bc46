// Package credentials owns what the daemon holds and a sandbox never does:
// the age-encrypted vault of secrets ($AILERON_HOME/vault/vault.age, key in
// keys/vault.key, 0600), the bindings that tie a connector to a vault
// entry and a placement (the bindings table of the state database, no
// secret in it), and the Injector that puts the bound credential on the
// outbound copy of a matched request (dataplane.Injector), refreshing OAuth
// tokens, and the OAuth login's code exchange (ExchangeCode: the
// authorization code grant with PKCE against a connector's OAuth app).
// Secret bytes never appear in its errors or logs.
//
// It imports state, policy, inject, audit (event names), dataplane's types
// and golang.org/x/oauth2; never another control-plane store.
package credentials
