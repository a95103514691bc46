// Package store is the content-addressed connector store under
// $AILERON_HOME/store: packages (a spec, optionally actions and a manifest)
// named by the SHA-256 of their canonical byte stream (HashPackage),
// installed atomically, re-verified whenever they are loaded, with the
// index of installed versions in the store_versions table of the state
// database. It also keeps the trust store (each publisher authority's
// allowed signers) and judges each package's publisher signature against
// it.
//
// It imports state, policy (to parse and check specs), action (to check a
// package's actions at install), manifest and signing; never another
// control-plane store.
package store
