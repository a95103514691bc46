package dataplane

import (
	"context"
	"errors"
	"net/http"

	"github.com/aileronhq/aileron/policy"
)

// ErrCredentialUnavailable is wrapped by every Injector failure: no binding,
// a missing or locked vault entry, a failed OAuth refresh. The request is
// refused (fail closed), never sent without its credential.
var ErrCredentialUnavailable = errors.New("credential unavailable")

// Injector puts a session's credentials on outbound requests. The data
// plane declares it; the control plane implements it over the vault and the
// bindings.
type Injector interface {
	// Inject writes the credential bound to op for sess onto out, the
	// outbound copy (hop-by-hop headers already removed), replacing whatever
	// the client put in the same place. It returns every form of the secret
	// an upstream could echo back (raw, encoded), for the response redactor;
	// nil when op needs no credential. Failures wrap ErrCredentialUnavailable,
	// except a request carrying another session's placeholder where the
	// credential goes: a *DenyError with reason placeholder_misuse.
	Inject(ctx context.Context, sess *Session, op *policy.Operation, out *http.Request) (secrets []string, err error)
}
