// Package state owns the daemon's persistent control-plane state: the
// SQLite database ($AILERON_HOME/aileron.db, through the pure-Go
// modernc.org/sqlite), its migrations (one list, applied in order, never
// edited once released), write transactions, and the small helpers every
// store shares: random ids, the stored time format, private key files and
// atomic file writes, and the sentinel errors stores wrap.
//
// The tables belong to the packages that use them (store, sessions,
// credentials, approvals, actions); state knows their schema only through
// the migrations. It imports database drivers and the standard library,
// nothing of Aileron.
package state
