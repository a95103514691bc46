// Package inject holds the credential mechanics of Aileron: how each
// credential kind is put on an outbound request (Apply), how OAuth2 access
// tokens are kept fresh (OAuthSource), how echoes of a secret are masked in
// what an upstream sends back (Redactor), and the placeholder keys handed to
// SDKs that refuse to start without one (Placeholder, ContainsPlaceholder),
// and which of a credential's places a client used (PlacesFor, Choose).
//
// The package knows nothing of vaults, sessions or bindings: the control
// plane loads a Secret and a Placement and calls Apply on the outbound copy
// of a request that matched an operation bound to that credential. No error
// this package returns contains secret bytes.
//
// It imports policy, x/oauth2 and the AWS signer; nothing of the data or
// control plane.
package inject

import "errors"

// Credential kinds (Secret.Kind). They equal the policy.Credential*
// constants of a spec's credential object.
const (
	KindAPIKey = "api_key"
	KindBearer = "bearer"
	KindBasic  = "basic"
	KindOAuth2 = "oauth2"
	KindSigV4  = "aws_sigv4"
)

// Sentinel errors. Every error of this package wraps exactly one of them,
// with context naming the kind, field, header or host involved, never a
// secret value.
var (
	// ErrBadSecret: a Secret is unusable (unknown kind, missing or
	// malformed field, a field of another kind set, a value with CR, LF or
	// NUL). Fix the vault entry.
	ErrBadSecret = errors.New("unusable credential secret")
	// ErrBadPlacement: a Placement (or the request it is applied to) cannot
	// carry the credential: invalid or reserved header name, a format without
	// {token}/{key}, header and query both set, an AWS host whose region
	// cannot be derived. Fix the binding or the spec's credential object.
	ErrBadPlacement = errors.New("bad credential placement")
	// ErrBodyTooLarge: a request body SigV4 must hash exceeds MaxSignedBody.
	ErrBodyTooLarge = errors.New("request body too large to sign")
	// ErrRefreshFailed: an OAuth2 access token could not be obtained
	// (refresh failed, no refresh token, or a refresh backoff is running).
	ErrRefreshFailed = errors.New("oauth2 token refresh failed")
	// ErrPersistFailed: an OAuth2 token was refreshed but OAuthSource.Persist
	// failed; the new token is still returned and used.
	ErrPersistFailed = errors.New("oauth2 refreshed token not persisted")
	// ErrForeignPlaceholder: one of a credential's places carries a
	// placeholder that is not the session's own (another session's, or
	// altered). The request must be refused as placeholder misuse.
	ErrForeignPlaceholder = errors.New("placeholder of another session")
)
