// Package signing owns publisher signatures on connector packages: the
// canonical statement a publisher signs (FQN, version, package hash), its
// verification against the trust store's allowed signers, and the verdict
// (Signature) the store records and the install consent shows.
package signing
