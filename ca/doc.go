// Package ca is Aileron's per-session certificate authority: one ECDSA P-256
// root per session, and the leaf certificates the proxy presents to that
// session's clients when it terminates their TLS.
//
// The root's private key never leaves the package except through
// Authority.Save, which writes it with file mode 0600. Leaves are minted on
// demand, shared by concurrent callers (single-flight) and kept in a bounded
// LRU cache until they come close to expiry.
//
// It imports the standard library only.
package ca
