package proposals

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// LearnedScheme prefixes the FQN of every learned connector:
// local://learned/NAME.
const LearnedScheme = "local://learned/"

// maxConnectorName bounds a learned connector's name.
const maxConnectorName = 40

// CheckConnectorName refuses a learned connector name that is not 1 to 40
// lower-case letters, digits and '-', starting with a letter. Errors wrap
// state.ErrInvalidArgument.
func CheckConnectorName(name string) error {
	if name == "" || len(name) > maxConnectorName {
		return fmt.Errorf("%w: connector name %q: a name is 1 to %d characters", state.ErrInvalidArgument, name, maxConnectorName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '-')) {
			return fmt.Errorf("%w: connector name %q: use lower-case letters, digits and '-', starting with a letter, e.g. my-agent",
				state.ErrInvalidArgument, name)
		}
	}
	return nil
}

// ConnectorName is the learned connector name a session's proposals go
// into by default: its name made a valid connector name, or, for a session
// without a usable name, "session-" and its id's characters.
func ConnectorName(sessionName, sessionID string) string {
	if n := nameFrom(sessionName); n != "" && CheckConnectorName(n) == nil {
		return n
	}
	return nameFrom("session-" + strings.TrimPrefix(sessionID, "s_"))
}

// nameFrom lower-cases s, turns every run of other characters into one
// '-', and clips it to a valid name (starting with a letter), or "".
func nameFrom(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			if b.Len() == 0 && c <= '9' {
				continue
			}
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(c)
			dash = false
		default:
			dash = true
		}
	}
	n := b.String()
	if len(n) > maxConnectorName {
		n = strings.TrimRight(n[:maxConnectorName], "-")
	}
	return n
}

// Accepted is one rule going into a learned connector, with the host of
// its proposal.
type Accepted struct {
	Rule
	Host string
	Port int
	// Relax lets the rule drop the approval of the same rule accepted
	// before: the human said approval none explicitly. Otherwise a rule
	// already there keeps its approval (a default never loosens one).
	Relax bool
}

// hostEntry is a's host as a spec writes it: host, or host:port when the
// port is not 443.
func (a Accepted) hostEntry() string {
	if a.Port == 443 || a.Port == 0 {
		return a.Host
	}
	return policy.Authority{Host: a.Host, Port: a.Port}.String()
}

// LearnedSpec is the spec of version of learned connector name: one tool,
// learned-NAME, with the operations of old (the previous version's, kept
// as they are) and one operation per rule in add. A rule already among the
// operations (same method, template and host) is not added twice; it
// needs approval if it did or the new rule does, and loses it only when
// the new rule says so explicitly (Accepted.Relax). The spec never binds a credential. It
// returns the spec and the name of each rule's operation, in add's order.
func LearnedSpec(name, version string, old []policy.OperationSpec, add []Accepted) ([]byte, []string, error) {
	if err := CheckConnectorName(name); err != nil {
		return nil, nil, err
	}
	ops := append([]policy.OperationSpec(nil), old...)
	used := map[string]bool{}
	for _, o := range ops {
		used[o.Name] = true
	}
	names := make([]string, len(add))
	for i, a := range add {
		approval := policy.ApprovalNone
		if a.Approval {
			approval = policy.ApprovalRequired
		}
		host := a.hostEntry()
		if j := sameRule(ops, a.Method, a.Template, host); j >= 0 {
			if a.Approval || a.Relax {
				ops[j].Approval = approval
			}
			names[i] = ops[j].Name
			continue
		}
		n := uniqueName(OperationName(a.Method, a.Template), used)
		used[n], names[i] = true, n
		ops = append(ops, policy.OperationSpec{Name: n, Method: a.Method, Path: a.Template, Hosts: []string{host},
			Approval: approval, Summary: "Learned: " + a.Method + " " + host + a.Template})
	}
	spec := policy.Spec{SchemaVersion: policy.SchemaVersion,
		Connector: policy.Connector{FQN: LearnedScheme + name, Version: version},
		Tools: []policy.Tool{{Name: "learned-" + name, Operations: ops,
			Description: "Rules learned from what sessions asked for and a human accepted (aileron proposals accept)."}}}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	data = append(data, '\n')
	if _, err := policy.ParseSpec(LearnedScheme+name+"@"+version, data); err != nil {
		return nil, nil, fmt.Errorf("%w: the learned connector %s@%s would not be valid: %v", state.ErrInvalidArgument, LearnedScheme+name, version, err)
	}
	return data, names, nil
}

// sameRule returns the index of the operation of ops with method,
// template and exactly host, or -1.
func sameRule(ops []policy.OperationSpec, method, template, host string) int {
	for i, o := range ops {
		if o.Method == method && o.Path == template && len(o.Hosts) == 1 && o.Hosts[0] == host {
			return i
		}
	}
	return -1
}

// OperationName is a readable operation name for method and template:
// "get-repos-id-issues" for GET /repos/{id}/issues, "post-root" for POST /.
func OperationName(method, template string) string {
	n := nameFrom(method + " " + template)
	if n == strings.ToLower(method) || n == "" {
		n = strings.Trim(strings.ToLower(method)+"-root", "-")
	}
	const max = 100
	if len(n) > max {
		n = strings.TrimRight(n[:max], "-")
	}
	return n
}

// uniqueName is n, or n-2, n-3… when used holds it.
func uniqueName(n string, used map[string]bool) string {
	if !used[n] {
		return n
	}
	for i := 2; ; i++ {
		if c := n + "-" + strconv.Itoa(i); !used[c] {
			return c
		}
	}
}

// NextVersion is the version after the highest 1.0.N of versions (1.0.0
// when there is none).
func NextVersion(versions []string) string {
	last := -1
	for _, v := range versions {
		if rest, ok := strings.CutPrefix(v, "1.0."); ok {
			if n, err := strconv.Atoi(rest); err == nil && n > last {
				last = n
			}
		}
	}
	return "1.0." + strconv.Itoa(last+1)
}

// Covers reports whether rule a, as accepted (the human's edits made),
// allows a request of method to escaped path on its host and port: only a
// request it covers may be released by accepting it.
func Covers(a Accepted, method, path string) bool {
	data, _, err := LearnedSpec("covers", "1.0.0", nil, []Accepted{a})
	if err != nil {
		return false
	}
	spec, err := policy.ParseSpec(LearnedScheme+"covers@1.0.0", data)
	if err != nil {
		return false
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "covers", Origin: "accepted rule"}}, nil)
	if len(errs) > 0 {
		return false
	}
	port := a.Port
	if port == 0 {
		port = 443
	}
	return pol.Decide(policy.Args{Method: method, Host: a.Host, Port: port, Path: path}).Verdict != policy.Deny
}
