package store

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/aileronhq/aileron/manifest"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/signing"
)

// LockVersion is the format version of lock files this store writes and
// reads.
const LockVersion = 1

// maxLockSize bounds a lock file in bytes.
const maxLockSize = 4 << 20

// lockFile is a lock file (docs/connectors.md, "The lock"): TOML, one
// [[connector]] table per consented version, sorted by name and version.
type lockFile struct {
	LockVersion int         `toml:"lock_version"`
	Connector   []lockEntry `toml:"connector"`
}

type lockEntry struct {
	Name              string   `toml:"name"`
	Version           string   `toml:"version"`
	Hash              string   `toml:"hash"`
	FromManifest      bool     `toml:"from_manifest"`
	Hosts             []string `toml:"hosts"`
	CredentialKinds   []string `toml:"credential_kinds"`
	CredentialScope   string   `toml:"credential_scope,omitempty"`
	OAuthScopes       []string `toml:"oauth_scopes"`
	Imports           []string `toml:"imports"`
	OAuthAuthorizeURL string   `toml:"oauth_authorize_url,omitempty"`
	OAuthTokenURL     string   `toml:"oauth_token_url,omitempty"`
	OAuthClientID     string   `toml:"oauth_client_id,omitempty"`
	Approval          []string `toml:"approval"`
	NoApproval        []string `toml:"no_approval"`
	Actions           []string `toml:"actions"`
	Signature         string   `toml:"signature"`
	SignerAuthority   string   `toml:"signer_authority,omitempty"`
	SignerFingerprint string   `toml:"signer_fingerprint,omitempty"`
	SignerPrincipal   string   `toml:"signer_principal,omitempty"`
}

// lockHeader opens every lock file.
const lockHeader = "# Aileron connector lock, written by `aileron connector lock`: the consent given to each\n" +
	"# connector version. Replay it with `aileron connector install PATH --lock FILE`. Do not edit.\n"

// RenderLock writes consents as a lock file. The same consents always give
// the same bytes (Consents sorts them; who and when are not part of it).
func RenderLock(consents []Consented) ([]byte, error) {
	lf := lockFile{LockVersion: LockVersion, Connector: []lockEntry{}}
	for _, c := range consents {
		r := c.Request
		lf.Connector = append(lf.Connector, lockEntry{Name: r.FQN, Version: r.Version, Hash: "sha256:" + r.Hash,
			FromManifest: r.Grants.FromManifest, Hosts: list(r.Grants.Hosts), CredentialKinds: list(r.Grants.CredentialKinds),
			CredentialScope: r.Grants.CredentialScope, OAuthScopes: list(r.Grants.OAuthScopes), Imports: list(r.Grants.Imports),
			OAuthAuthorizeURL: r.Grants.OAuthAuthorizeURL, OAuthTokenURL: r.Grants.OAuthTokenURL, OAuthClientID: r.Grants.OAuthClientID,
			Approval: list(r.Approval), NoApproval: list(r.NoApproval), Actions: list(r.Actions),
			Signature: string(r.Signature.Status), SignerAuthority: r.Signature.Authority,
			SignerFingerprint: r.Signature.Fingerprint, SignerPrincipal: r.Signature.Principal})
	}
	var b bytes.Buffer
	b.WriteString(lockHeader)
	if err := toml.NewEncoder(&b).Encode(lf); err != nil {
		return nil, fmt.Errorf("writing the lock: %w", err)
	}
	if !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// list makes a nil list empty, so that it is written.
func list(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// Lock is a parsed lock file: the consented request of each FQN@VERSION.
type Lock map[string]Request

// ParseLock reads a lock file; file names it in errors. Unknown keys, a
// format version other than LockVersion, a malformed name, version or hash,
// and a version listed twice are errors.
func ParseLock(file string, data []byte) (Lock, error) {
	if len(data) > maxLockSize {
		return nil, fmt.Errorf("%w: %s: the lock is over %d bytes", ErrInvalidLock, file, maxLockSize)
	}
	var lf lockFile
	md, err := toml.Decode(string(data), &lf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidLock, file, err)
	}
	var errs []error
	for _, k := range md.Undecoded() {
		errs = append(errs, fmt.Errorf("%w: %s: unknown key %s; a lock is written by `aileron connector lock`, not by hand", ErrInvalidLock, file, k))
	}
	if lf.LockVersion != LockVersion {
		errs = append(errs, fmt.Errorf("%w: %s: lock_version is %d; this aileron reads lock_version = %d", ErrInvalidLock, file, lf.LockVersion, LockVersion))
	}
	lock := Lock{}
	for i, e := range lf.Connector {
		r, err := e.request()
		if err == nil && lock[r.Ref()].FQN != "" {
			err = fmt.Errorf("%s is listed twice", r.Ref())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: connector[%d]: %v", ErrInvalidLock, file, i, err))
			continue
		}
		lock[r.Ref()] = r
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return lock, nil
}

// request checks a lock entry and returns it as a Request.
func (e lockEntry) request() (Request, error) {
	if err := policy.CheckFQN(e.Name); err != nil {
		return Request{}, fmt.Errorf("name: %v", err)
	}
	if err := policy.CheckSemVer(e.Version); err != nil {
		return Request{}, fmt.Errorf("version: %v", err)
	}
	hash, ok := strings.CutPrefix(e.Hash, "sha256:")
	if !ok || !isHexHash(hash) {
		return Request{}, fmt.Errorf("hash %q is not sha256:<64 lower-case hex digits>", e.Hash)
	}
	switch signing.Status(e.Signature) {
	case signing.Unsigned, signing.Trusted, signing.Untrusted:
	default:
		return Request{}, fmt.Errorf("signature %q is not unsigned, trusted or untrusted", e.Signature)
	}
	return Request{FQN: e.Name, Version: e.Version, Hash: hash,
		Grants: manifest.Grants{Hosts: e.Hosts, CredentialKinds: e.CredentialKinds, CredentialScope: e.CredentialScope,
			OAuthScopes: e.OAuthScopes, Imports: e.Imports, FromManifest: e.FromManifest,
			OAuthAuthorizeURL: e.OAuthAuthorizeURL, OAuthTokenURL: e.OAuthTokenURL, OAuthClientID: e.OAuthClientID},
		Approval: e.Approval, NoApproval: e.NoApproval, Actions: e.Actions,
		Signature: signing.Signature{Status: signing.Status(e.Signature), Authority: e.SignerAuthority,
			Fingerprint: e.SignerFingerprint, Principal: e.SignerPrincipal}}, nil
}
