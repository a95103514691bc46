package action

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// SelfHash is the hash a requirement on the package that holds the action
// names: that package is pinned by containment, since the package hash
// covers the action file and so cannot be written inside it.
const SelfHash = "self"

// The prefixes of the capability forms a requirement may list.
const (
	capNetwork    = "network:"
	capCredential = "credential:"
	capScope      = "scope:"
	maxScope      = 512
)

// capabilityForms describes the accepted forms for messages.
const capabilityForms = `"network:HOST:PORT", "credential:KIND" or "scope:SCOPE"`

// credentialKinds are the kinds a "credential:" capability may name.
var credentialKinds = []string{policy.CredentialOAuth2, policy.CredentialAPIKey, policy.CredentialBearer,
	policy.CredentialBasic, policy.CredentialAWSSigV4}

// Capabilities is the part of a connector's grants an action uses, parsed
// from its requirement's capabilities list.
type Capabilities struct {
	// Hosts are canonical host:port authorities ("network:HOST:PORT").
	Hosts []string
	// CredentialKinds are credential kinds ("credential:KIND").
	CredentialKinds []string
	// Scopes are credential scopes ("scope:SCOPE"), as the connector's
	// manifest writes them.
	Scopes []string
}

// Caps parses r.Capabilities. Parse has checked every entry and refused
// duplicates, so entries that do not parse (only in a Requirement built by
// hand) are left out.
func (r Requirement) Caps() Capabilities {
	var c Capabilities
	for _, s := range r.Capabilities {
		kind, v, err := parseCapability(s)
		if err != nil {
			continue
		}
		switch kind {
		case capNetwork:
			c.Hosts = append(c.Hosts, v)
		case capCredential:
			c.CredentialKinds = append(c.CredentialKinds, v)
		case capScope:
			c.Scopes = append(c.Scopes, v)
		}
	}
	return c
}

// Pinned reports whether r pins its connector: by containment ("self") or
// by a real digest. A placeholder such as "sha256:bound-at-release" does
// not pin.
func (r Requirement) Pinned() bool { return r.Hash == SelfHash || r.Bound() }

// Unpinned lists, as FQN@VERSION, the requirements of m that name a
// placeholder hash instead of pinning their connector. The store installs
// such an action only when asked to allow unpinned requirements.
func (m *Manifest) Unpinned() []string {
	var out []string
	for _, r := range m.Requires {
		if !r.Pinned() {
			out = append(out, r.Name+"@"+r.Version)
		}
	}
	return out
}

// Requirement returns m's requirement on connector fqn.
func (m *Manifest) Requirement(fqn string) (Requirement, bool) {
	for _, r := range m.Requires {
		if r.Name == fqn {
			return r, true
		}
	}
	return Requirement{}, false
}

// parseCapability splits one capability entry into its form (a cap*
// prefix) and its canonical value. The error says what is wrong and how
// to write it.
func parseCapability(s string) (kind, value string, err error) {
	switch {
	case strings.HasPrefix(s, capNetwork):
		v := strings.TrimPrefix(s, capNetwork)
		a, err := policy.ParseAuthority(v, 0)
		if err != nil {
			return "", "", fmt.Errorf("%s: %s; write %s (no wildcards)", quote(s),
				strings.TrimPrefix(err.Error(), policy.ErrBadAuthority.Error()+": "), quote(capNetwork+"api.example.com:443"))
		}
		if a.String() != v {
			return "", "", fmt.Errorf("%s is not in canonical form; write %s", quote(s), quote(capNetwork+a.String()))
		}
		return capNetwork, v, nil
	case strings.HasPrefix(s, capCredential):
		v := strings.TrimPrefix(s, capCredential)
		if !slices.Contains(credentialKinds, v) {
			return "", "", fmt.Errorf("%s names no credential kind; the kinds are %s", quote(s), list(credentialKinds))
		}
		return capCredential, v, nil
	case strings.HasPrefix(s, capScope):
		v := strings.TrimPrefix(s, capScope)
		if msg := scopeProblem(v); msg != "" {
			return "", "", fmt.Errorf("%s: %s", quote(s), msg)
		}
		return capScope, v, nil
	case slices.Contains(credentialKinds, s):
		return "", "", fmt.Errorf("%s has no form; write %s for a credential kind", quote(s), quote(capCredential+s))
	case strings.Contains(s, ":") && !strings.Contains(s, " "):
		if _, err := policy.ParseAuthority(s, 0); err == nil {
			return "", "", fmt.Errorf("%s has no form; write %s for a host", quote(s), quote(capNetwork+s))
		}
	}
	return "", "", fmt.Errorf("%s is not a capability; write %s (a host, a credential kind or a scope of the connector's grants)",
		quote(s), capabilityForms)
}

func scopeProblem(v string) string {
	switch {
	case strings.TrimSpace(v) == "":
		return "the scope is empty; write the scope as the connector's manifest grants it"
	case len(v) > maxScope:
		return fmt.Sprintf("the scope is %d bytes long; the limit is %d", len(v), maxScope)
	case strings.TrimSpace(v) != v:
		return "the scope starts or ends with a space; write it as the manifest does"
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return "the scope contains a control character"
		}
	}
	return ""
}

// validateCapabilities checks requirement i's capability entries.
func validateCapabilities(key string, caps []string, p *problems) {
	seen := map[string]bool{}
	for j, c := range caps {
		k := idx(key+".capabilities", j)
		if strings.TrimSpace(c) == "" {
			p.add(k, ruleValue, "capability is empty; remove it or write "+capabilityForms)
			continue
		}
		if _, _, err := parseCapability(c); err != nil {
			p.add(k, ruleCapability, err.Error())
			continue
		}
		if seen[c] {
			p.add(k, ruleDuplicate, fmt.Sprintf("capability %s is listed twice; list it once", quote(c)))
		}
		seen[c] = true
	}
}

// validateHash checks requirement r's hash for shape: "self", a full
// "sha256:<64 hex>" or a placeholder "sha256:<text>".
func validateHash(key string, r Requirement, p *problems) {
	const fix = `write the connector's installed hash "sha256:<64 hex>" (aileron connector list), or "self" for the package that holds the action`
	d, ok := strings.CutPrefix(r.Hash, "sha256:")
	switch {
	case r.Hash == SelfHash:
	case r.Hash == "":
		p.add(key+".hash", ruleRequired, "hash is missing; "+fix)
	case !ok || d == "":
		p.add(key+".hash", ruleHash, fmt.Sprintf("hash %s is neither \"self\" nor \"sha256:…\"; %s", quote(r.Hash), fix))
	case strings.Trim(strings.ToLower(d), "0123456789abcdef") == "" && !r.Bound():
		p.add(key+".hash", ruleHash, fmt.Sprintf("hash %s looks like a digest but is not 64 lower-case hex digits; %s", quote(r.Hash), fix))
	}
}

// checkPins checks m's requirements against spec, the spec of the package
// holding m: a requirement on that package must name its version and hash
// "self"; "self" on any other connector is refused. It returns the
// problems as ValidationErrors of file.
func checkPins(file string, m *Manifest, spec *policy.Spec) []error {
	var errs []error
	add := func(key, msg string) {
		errs = append(errs, &ValidationError{File: file, Key: key, Rule: rulePin, Message: msg})
	}
	for i, r := range m.Requires {
		key := idx("requires.connectors", i)
		self := r.Name == spec.Connector.FQN
		switch {
		case self && r.Hash != SelfHash:
			add(key+".hash", fmt.Sprintf("%s is the package that holds this action, so its hash cannot be written here (it covers this file); write hash = \"self\": the action is pinned to its package by containment",
				quote(r.Name)))
		case !self && r.Hash == SelfHash:
			add(key+".hash", fmt.Sprintf("hash \"self\" pins only the package that holds the action (%s), not %s; write %s's installed hash \"sha256:<64 hex>\" (aileron connector list)",
				quote(spec.Connector.FQN), quote(r.Name), quote(r.Name)))
		}
		if self && r.Version != spec.Connector.Version {
			add(key+".version", fmt.Sprintf("version %s differs from the version of the package that holds the action (%s); write %s",
				quote(r.Version), quote(spec.Connector.Version), quote(spec.Connector.Version)))
		}
	}
	return errs
}

// needs is what a step's operation needs of its connector: every host:port
// the operation names and its credential kind ("" for none).
func needs(op *policy.OperationSpec) (hosts []string, kind string) {
	for _, h := range op.Hosts {
		a, err := policy.ParseAuthority(h, policy.DefaultPort)
		if err != nil {
			hosts = appendNew(hosts, h) // kept as written: no capability can name it
			continue
		}
		hosts = appendNew(hosts, a.String())
	}
	return hosts, op.Credential.Kind
}

// checkStepNeeds checks that step i's operation op needs nothing beyond the
// capabilities of its requirement r.
func checkStepNeeds(file string, i int, s Step, tool string, op *policy.OperationSpec, r Requirement) error {
	caps := r.Caps()
	hosts, kind := needs(op)
	var missing []string
	for _, h := range hosts {
		if !slices.Contains(caps.Hosts, h) {
			missing = append(missing, capNetwork+h)
		}
	}
	if kind != "" && !slices.Contains(caps.CredentialKinds, kind) {
		missing = append(missing, capCredential+kind)
	}
	if len(missing) == 0 {
		return nil
	}
	return &ValidationError{File: file, Key: idx("execute", i), Rule: ruleCapability, Err: ErrExceedsCapabilities,
		Message: fmt.Sprintf("step %s runs %s/%s, which needs %s, outside the capabilities of its requirement on %s (listed: %s); add them to that requirement's capabilities",
			quote(s.ID), tool, op.Name, list(missing), quote(r.Name), list(r.Capabilities))}
}

func appendNew(xs []string, s string) []string {
	if slices.Contains(xs, s) {
		return xs
	}
	return append(xs, s)
}
