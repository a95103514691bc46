// Package signing owns publisher signatures on connector packages: the
// canonical statement a publisher signs (FQN, version, package hash) with
// ssh-keygen -Y sign, the parser of ssh's allowed_signers format the trust
// store keeps per authority, the verification of an SSH signature (sshsig)
// against those signers, and the verdict (Signature) the store records and
// the install consent shows. It uses no network.
package signing
