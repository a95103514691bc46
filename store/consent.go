package store

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/manifest"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/signing"
)

// A package is installed only under a consent naming the exact hash of what
// was shown (Request): the install API and the CLI show the request first,
// and Install refuses a consent whose hash is not the staged package's. An
// upgrade that asks for more than the consent of its connector's active
// version is installed but quarantined: recorded, not served, until Approve.

// Ways a consent is given (Consent.Via).
const (
	// ViaTerminal: a human answered yes at the install prompt.
	ViaTerminal = "terminal"
	// ViaYes: `connector install --yes`, without a prompt.
	ViaYes = "yes"
	// ViaLock: `connector install --lock FILE`: the lock file records the
	// same hash and grants no less than the package asks.
	ViaLock = "lock"
	// ViaProvider: `provider add` installing an embedded package; the
	// command itself is the consent.
	ViaProvider = "provider add"
	// ViaApprove: `connector approve` activated a quarantined version.
	ViaApprove = "approve"
	// ViaProposal: `proposals accept` (or the proposals page) installing
	// the learned connector it generated from the rules a human accepted;
	// the accept itself is the consent.
	ViaProposal = "proposals accept"
)

// Request is what a package asks for: shown before it is installed, and the
// terms a consent grants.
type Request struct {
	FQN     string `json:"fqn"`
	Version string `json:"version"`
	// Hash is the package's HashPackage hash (lower-case hex SHA-256).
	Hash   string          `json:"hash"`
	Grants manifest.Grants `json:"grants"`
	// Approval lists the operations (tool/operation (METHOD PATH), see
	// opLabel) that wait for a human's approval, NoApproval those that do
	// not; both sorted.
	Approval   []string `json:"approval,omitempty"`
	NoApproval []string `json:"no_approval,omitempty"`
	// Actions are the package's actions, sorted.
	Actions []string `json:"actions,omitempty"`
	// Signature is the verdict on the publisher's signature; a zero
	// Status means unsigned.
	Signature signing.Signature `json:"signature"`
}

// Ref returns FQN@VERSION.
func (r Request) Ref() string { return r.FQN + "@" + r.Version }

// Consent is a caller's yes to a Request.
type Consent struct {
	// Hash is the hash of the request the caller was shown. Required: an
	// install whose staged package hashes otherwise is refused.
	Hash string `json:"hash"`
	// By names who consented: the admin API sets it to its caller, the
	// offline CLI to the OS user.
	By string `json:"by,omitempty"`
	// Via is how: ViaTerminal, ViaYes, ViaLock, ViaProvider, ViaApprove or
	// ViaProposal.
	Via string `json:"via"`
	// Lock is the lock file's entry for the package (Via ViaLock). A
	// version the lock records is activated even where it asks for more
	// than the active version: the lock is a consent given before.
	Lock *Request `json:"lock,omitempty"`
	// Audited says the caller writes the consent's store.consented audit
	// line itself (the daemon does); otherwise a daemon writes it when it
	// next claims the consents not yet audited (ClaimUnaudited).
	Audited bool `json:"-"`
}

// check refuses a consent that is incomplete or does not name req.
func (c Consent) check(req Request) error {
	switch c.Via {
	case ViaTerminal, ViaYes, ViaLock, ViaProvider, ViaApprove, ViaProposal:
	default:
		return fmt.Errorf("%w: consent via %q; want one of terminal, yes, lock, provider add, approve, proposals accept", ErrConsentMismatch, c.Via)
	}
	if c.Hash == "" {
		return fmt.Errorf("%w: %s was not consented to: a consent must name the hash of what was shown (sha256:%s)",
			ErrConsentMismatch, req.Ref(), req.Hash)
	}
	if c.Hash != req.Hash {
		return fmt.Errorf("%w: the consent names sha256:%s but the package of %s now hashes to sha256:%s: "+
			"it changed after it was shown; nothing was installed; run the install again to see what it asks now",
			ErrConsentMismatch, c.Hash, req.Ref(), req.Hash)
	}
	if c.Via != ViaLock {
		return nil
	}
	if c.Lock == nil || c.Lock.FQN != req.FQN || c.Lock.Version != req.Version {
		return fmt.Errorf("%w: the lock has no entry for %s", ErrConsentMismatch, req.Ref())
	}
	if c.Lock.Hash != req.Hash {
		return fmt.Errorf("%w: %s: the lock records sha256:%s but the package hashes to sha256:%s; "+
			"install the locked package, or consent anew without --lock and write a new lock",
			ErrConsentMismatch, req.Ref(), c.Lock.Hash, req.Hash)
	}
	if more := req.Exceeds(*c.Lock); len(more) > 0 {
		return fmt.Errorf("%w: %s asks for more than the lock records: %s", ErrConsentMismatch, req.Ref(), strings.Join(more, "; "))
	}
	return nil
}

// buildRequest assembles what the package of src asks for.
func buildRequest(src policy.Source, grants manifest.Grants, actions []string, sig signing.Signature) Request {
	r := Request{FQN: src.Spec.Connector.FQN, Version: src.Spec.Connector.Version, Hash: src.Hash,
		Grants: grants, Actions: slices.Sorted(slices.Values(actions)), Signature: sig}
	if r.Signature.Status == "" {
		r.Signature.Status = signing.Unsigned
	}
	for _, t := range src.Spec.Tools {
		for _, op := range t.Operations {
			name := opLabel(t.Name, op)
			if op.RequiresApproval() {
				r.Approval = append(r.Approval, name)
			} else {
				r.NoApproval = append(r.NoApproval, name)
			}
		}
	}
	slices.Sort(r.Approval)
	slices.Sort(r.NoApproval)
	return r
}

// opLabel names an operation in a request by tool/operation and what it
// matches, "google/gmail.messages.get (GET /gmail/v1/users/me/messages/{id})":
// an upgrade that keeps the name but changes the method or path of an
// operation without approval asks for an operation it did not have.
func opLabel(tool string, op policy.OperationSpec) string {
	method := op.Method
	if method == "" {
		method = "any method"
	}
	return tool + "/" + op.Name + " (" + method + " " + op.Path + ")"
}

// Exceeds lists every way r asks for more than base, one phrase each: a
// host, credential kind, OAuth scope or runtime import base does not
// have, a credential scope or OAuth app (authorize URL, token URL, client
// ID) that differs, an operation that does not wait
// for approval where base has none such (one that lost its approval, or a
// new one), a signer no longer trusted, or a signing key that is neither
// base's nor trusted. Nil means r asks for no more.
func (r Request) Exceeds(base Request) []string {
	var more []string
	missing := func(what string, have, want []string) {
		for _, x := range want {
			if !slices.Contains(have, x) {
				more = append(more, what+" "+strconv.Quote(x))
			}
		}
	}
	missing("host", base.Grants.Hosts, r.Grants.Hosts)
	missing("credential kind", base.Grants.CredentialKinds, r.Grants.CredentialKinds)
	if r.Grants.CredentialScope != base.Grants.CredentialScope && r.Grants.CredentialScope != "" {
		more = append(more, fmt.Sprintf("credential scope %s (was %s)", strconv.Quote(r.Grants.CredentialScope), strconv.Quote(base.Grants.CredentialScope)))
	}
	missing("OAuth scope", base.Grants.OAuthScopes, r.Grants.OAuthScopes)
	more = append(more, oauthAppExceeds(r.Grants, base.Grants)...)
	for _, op := range r.NoApproval {
		switch {
		case slices.Contains(base.NoApproval, op):
		case slices.Contains(base.Approval, op):
			more = append(more, "operation "+op+" no longer waits for approval")
		default:
			more = append(more, "operation "+op+" (new) does not wait for approval")
		}
	}
	missing("runtime import", base.Grants.Imports, r.Grants.Imports)
	return append(more, signerExceeds(r.Signature, base.Signature)...)
}

// oauthAppExceeds says how the OAuth app of g differs from base's: a login
// would send the browser, the code or (later) the refresh token somewhere
// not consented to. No app in g asks for nothing.
func oauthAppExceeds(g, base manifest.Grants) []string {
	if g.OAuthTokenURL == "" {
		return nil
	}
	var more []string
	for _, f := range []struct{ name, got, was string }{
		{"authorize_url", g.OAuthAuthorizeURL, base.OAuthAuthorizeURL},
		{"token_url", g.OAuthTokenURL, base.OAuthTokenURL},
		{"client_id", g.OAuthClientID, base.OAuthClientID},
	} {
		if f.got != f.was {
			more = append(more, fmt.Sprintf("OAuth %s %s (was %s)", f.name, strconv.Quote(f.got), strconv.Quote(f.was)))
		}
	}
	return more
}

// signerExceeds says how signer sig vouches for less than base did: base
// was trusted and sig is not, or sig's key is another than base's and is
// not trusted.
func signerExceeds(sig, base signing.Signature) []string {
	switch {
	case sig.Status == signing.Trusted:
		return nil
	case base.Status == signing.Trusted:
		return []string{fmt.Sprintf("signer: %s, where the consented version was %s", DescribeSignature(sig), DescribeSignature(base))}
	case sig.Fingerprint != "" && sig.Fingerprint != base.Fingerprint:
		return []string{fmt.Sprintf("signer: %s, a key not in the trust store and not the consented version's", DescribeSignature(sig))}
	}
	return nil
}
