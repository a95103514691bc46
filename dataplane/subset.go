package dataplane

import (
	"slices"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// Subset bounds a call to part of its connector's grants: an action step
// runs within the capabilities its action lists. A request to a host:port
// outside Hosts, or matched to an operation whose credential kind is not in
// CredentialKinds, is refused with capability_not_granted, whatever the
// session's policy allows.
type Subset struct {
	// Holder names what the subset belongs to in refusals, e.g.
	// `action "triage"`.
	Holder string
	// Hosts are canonical host:port authorities.
	Hosts []string
	// CredentialKinds are credential kinds (policy.Credential*).
	CredentialKinds []string
}

// check refuses a request to auth matched to op (nil for none) that
// leaves the subset; a nil subset bounds nothing.
func (s *Subset) check(auth policy.Authority, op *policy.Operation) error {
	if s == nil {
		return nil
	}
	if a := auth.String(); !slices.Contains(s.Hosts, a) {
		return deny(policy.ReasonCapabilityNotGranted, "%s may reach only %s; %s is outside its capabilities: add \"network:%s\" to them if the action needs it",
			s.Holder, listOrNone(s.Hosts), a, a)
	}
	if op != nil && op.Spec.Credential.Kind != "" && !slices.Contains(s.CredentialKinds, op.Spec.Credential.Kind) {
		k := op.Spec.Credential.Kind
		return deny(policy.ReasonCapabilityNotGranted, "%s may use only the credential kinds %s; %s/%s needs %s, which is outside its capabilities: add \"credential:%s\" to them if the action needs it",
			s.Holder, listOrNone(s.CredentialKinds), op.Tool, op.Spec.Name, k, k)
	}
	return nil
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	return strings.Join(xs, ", ")
}
