// Package sessions owns proxy sessions: each a random id, a token derived
// from the session key (only its hash is stored), a TTL, a connector scope
// and its own root CA, whose files (private key 0600) live in
// $AILERON_HOME/sessions/<id>/ and whose metadata is a row of the sessions
// table. Manager keeps live sessions in memory and implements
// dataplane.Sessions, so authenticating a request touches neither disk nor
// database. A live session's unknown-request mode and connector scope can
// change (SetUnknown, AddConnector); other fleet nodes take the change.
//
// It imports state, ca, policy and dataplane's types; never another
// control-plane store.
package sessions
