package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Source is one installed spec handed to Compile.
type Source struct {
	// Spec is the parsed spec. Compile copies it; later changes to it do not
	// affect the compiled Policy.
	Spec *Spec
	// Hash is the content hash of the package the spec came from.
	Hash string
	// Origin names the spec in error messages (usually its file path).
	Origin string
}

// PassthroughRule lets CONNECT tunnels to matching hosts through without
// interception. Host is an exact host name or "*." followed by a host name,
// which matches every name below it at any depth ("*.github.com" matches
// "api.github.com" and "a.b.github.com", not "github.com"). Port 0 means 443.
type PassthroughRule struct {
	Host string
	Port int
}

// Operation is one compiled operation. It and everything it points to are
// immutable: never modify them. Pointers stay valid for the Policy's life.
type Operation struct {
	FQN     string
	Version string
	Hash    string
	Tool    string
	// Spec is the operation as parsed (a private copy).
	Spec *OperationSpec
	// Hosts are the operation's hosts in canonical form, port filled in.
	Hosts []Authority
	// Origin is the Source.Origin the operation came from.
	Origin string

	pat  *pattern
	args *argSchema // nil: no arguments declared, nothing checked
}

// RequiresApproval reports whether the operation's approval is "required".
func (o *Operation) RequiresApproval() bool { return o.Spec.RequiresApproval() }

// Ref renders "fqn@version".
func (o *Operation) Ref() string { return o.FQN + "@" + o.Version }

// opKey identifies an operation for Lookup.
type opKey struct{ fqn, tool, op string }

// route is one operation on one authority and method.
type route struct {
	op     *Operation
	method string
	auth   Authority
	jpath  string // JSON path of the operation in its spec
}

func (r *route) describe() string {
	return fmt.Sprintf("operation %s/%s of %s (%s: %s, %s %s)", r.op.Tool, r.op.Spec.Name, r.op.Ref(), r.op.Origin, r.jpath, r.method, r.op.Spec.Path)
}

// hostEntry holds every operation for one canonical host:port.
type hostEntry struct {
	methods map[string]*node
	routes  []*route // in installation order, for messages
	fqns    []string // distinct connectors with operations here
}

// passRule is a compiled PassthroughRule.
type passRule struct {
	exact  string // exact host, or "" for a suffix rule
	suffix string // ".example.com" for "*.example.com"
	port   int
}

// Policy is the immutable matcher built by Compile from every installed
// spec. The zero value (and a nil *Policy) denies everything. It is safe
// for concurrent use.
type Policy struct {
	hosts    map[Authority]*hostEntry
	ports    map[string][]int // host name → ports any operation names it on
	rules    []passRule
	ops      []*Operation
	byName   map[opKey]*Operation
	versions map[string]string // fqn → version
}

// toolOwner records which accepted connector provides a tool name.
type toolOwner struct{ ref, origin, path string }

// builder accumulates accepted sources during Compile.
type builder struct {
	p      *Policy
	origin map[string]string    // fqn → origin
	tools  map[string]toolOwner // tool name → the connector providing it
	slots  map[string]*route    // route key → route
}

// Compile builds one immutable Policy from every source and passthrough
// rule, processing sources in order. A source that fails validation, has
// the same FQN as one accepted before it (only one version of a connector
// may be active), declares a tool name another connector already uses, or
// has an operation that would match the same requests as an accepted one
// is skipped entirely; the errors (each a *ValidationError, wrapping
// ErrConflict for clashes) name the file, JSON path and both parties. An
// unusable rule is skipped with an error wrapping ErrBadPassthroughRule.
// One bad source or rule never affects the others.
func Compile(srcs []Source, rules []PassthroughRule) (*Policy, []error) {
	b := &builder{
		p: &Policy{
			hosts:    map[Authority]*hostEntry{},
			ports:    map[string][]int{},
			byName:   map[opKey]*Operation{},
			versions: map[string]string{},
		},
		origin: map[string]string{},
		tools:  map[string]toolOwner{},
		slots:  map[string]*route{},
	}
	var errs []error
	for i := range srcs {
		errs = append(errs, b.add(srcs[i], i)...)
	}
	for i, r := range rules {
		pr, err := compileRule(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("passthrough rule %d (%s port %d): %w", i, quote(r.Host), r.Port, err))
			continue
		}
		b.p.rules = append(b.p.rules, pr)
	}
	return b.p, errs
}

func conflict(origin, path, rule, msg string) error {
	return &ValidationError{File: origin, Path: path, Rule: rule, Message: msg, kind: ErrConflict}
}

// add validates one source and, when it clashes with nothing, commits it.
func (b *builder) add(src Source, n int) []error {
	origin := src.Origin
	if origin == "" {
		origin = fmt.Sprintf("source[%d]", n)
	}
	if src.Spec == nil {
		return []error{&ValidationError{File: origin, Path: "$", Rule: ruleRequired, Message: "source has no spec"}}
	}
	spec := cloneSpec(src.Spec)
	args := map[*OperationSpec]*argSchema{}
	if err := spec.validate(origin, args); err != nil {
		return flatten(err)
	}
	fqn := spec.Connector.FQN
	if prev, dup := b.origin[fqn]; dup {
		return []error{conflict(origin, "$.connector.fqn", ruleConnectorDup, fmt.Sprintf(
			"connector %s is already active from %s (version %s); only one version of a connector may be active, so %s@%s is skipped",
			fqn, prev, b.p.versions[fqn], fqn, spec.Connector.Version))}
	}
	var errs []error
	for i, t := range spec.Tools {
		if prev, dup := b.tools[t.Name]; dup {
			errs = append(errs, conflict(origin, idx("$.tools", i)+".name", ruleToolClash, fmt.Sprintf(
				"tool %s is already provided by %s (%s: %s); connector %s is skipped, rename the tool",
				quote(t.Name), prev.ref, prev.origin, prev.path, fqn)))
		}
	}
	routes := b.routes(spec, src.Hash, origin, args)
	local := map[string]*route{}
	for _, r := range routes {
		if r.method == "" {
			continue
		}
		key := r.auth.String() + " " + r.method + " " + r.op.pat.shape()
		prev := b.slots[key]
		if prev == nil {
			prev = local[key]
		}
		if prev != nil {
			errs = append(errs, conflict(origin, r.jpath, ruleOperationClash, fmt.Sprintf(
				"%s on %s matches the same requests as %s; connector %s is skipped",
				r.describe(), r.auth, prev.describe(), fqn)))
			continue
		}
		local[key] = r
	}
	if len(errs) > 0 {
		return errs
	}
	b.commit(spec, origin, routes, local)
	return nil
}

// routes builds the Operations of a valid spec and one route per
// routable operation, method and host.
func (b *builder) routes(spec *Spec, hash, origin string, args map[*OperationSpec]*argSchema) []*route {
	var out []*route
	for i := range spec.Tools {
		t := &spec.Tools[i]
		for j := range t.Operations {
			ospec := &t.Operations[j]
			op := &Operation{FQN: spec.Connector.FQN, Version: spec.Connector.Version, Hash: hash, Tool: t.Name, Spec: ospec, Origin: origin, args: args[ospec]}
			if ospec.Path != "" {
				op.pat, _, _ = parsePattern(ospec.Path)
			}
			for _, h := range ospec.Hosts {
				if a, rule, _ := parseHostEntry(h); rule == "" {
					op.Hosts = append(op.Hosts, a)
				}
			}
			jpath := idx(idx("$.tools", i)+".operations", j)
			if ospec.Method == "" || op.pat == nil || len(op.Hosts) == 0 {
				out = append(out, &route{op: op, jpath: jpath}) // listed, never matched
				continue
			}
			for _, a := range op.Hosts {
				out = append(out, &route{op: op, method: ospec.Method, auth: a, jpath: jpath})
			}
		}
	}
	return out
}

// commit publishes an accepted source into the policy under construction.
func (b *builder) commit(spec *Spec, origin string, routes []*route, keys map[string]*route) {
	fqn := spec.Connector.FQN
	b.origin[fqn] = origin
	b.p.versions[fqn] = spec.Connector.Version
	for i, t := range spec.Tools {
		b.tools[t.Name] = toolOwner{ref: fqn + "@" + spec.Connector.Version, origin: origin, path: idx("$.tools", i) + ".name"}
	}
	for k, r := range keys {
		b.slots[k] = r
	}
	var last *Operation
	for _, r := range routes {
		if r.op != last {
			last = r.op
			b.p.ops = append(b.p.ops, r.op)
			b.p.byName[opKey{fqn, r.op.Tool, r.op.Spec.Name}] = r.op
		}
		if r.method == "" {
			continue
		}
		e := b.p.hosts[r.auth]
		if e == nil {
			e = &hostEntry{methods: map[string]*node{}}
			b.p.hosts[r.auth] = e
		}
		e.routes = append(e.routes, r)
		e.fqns = appendUnique(e.fqns, fqn)
		if len(e.routes) == 1 {
			b.p.ports[r.auth.Host] = insertSorted(b.p.ports[r.auth.Host], r.auth.Port)
		}
		root := e.methods[r.method]
		if root == nil {
			root = &node{}
			e.methods[r.method] = root
		}
		root.insert(r.op.pat.segs, r)
	}
}

func insertSorted(list []int, n int) []int {
	i := 0
	for i < len(list) && list[i] < n {
		i++
	}
	return append(list[:i], append([]int{n}, list[i:]...)...)
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// flatten splits an errors.Join result into its parts.
func flatten(err error) []error {
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		return j.Unwrap()
	}
	return []error{err}
}

// compileRule validates and canonicalises one passthrough rule.
func compileRule(r PassthroughRule) (passRule, error) {
	port := r.Port
	if port == 0 {
		port = DefaultPort
	}
	if port < 0 || port > 65535 {
		return passRule{}, fmt.Errorf("%w: port %d is out of range 1-65535", ErrBadPassthroughRule, r.Port)
	}
	host, glob := strings.CutPrefix(r.Host, "*.")
	if strings.IndexByte(host, '*') >= 0 {
		return passRule{}, fmt.Errorf("%w: only a leading \"*.\" wildcard is allowed, e.g. \"*.github.com\"", ErrBadPassthroughRule)
	}
	canon, err := CanonicalHost(host)
	if err != nil {
		return passRule{}, fmt.Errorf("%w: %w", ErrBadPassthroughRule, err)
	}
	if !glob {
		return passRule{exact: canon, port: port}, nil
	}
	if _, err := netip.ParseAddr(canon); err == nil {
		return passRule{}, fmt.Errorf("%w: a wildcard cannot precede an IP address", ErrBadPassthroughRule)
	}
	return passRule{suffix: "." + canon, port: port}, nil
}

func (r *passRule) matches(host string, port int) bool {
	if port != r.port {
		return false
	}
	if r.exact != "" {
		return host == r.exact
	}
	return len(host) > len(r.suffix) && strings.HasSuffix(host, r.suffix)
}

// cloneInputs deep-copies inputs, their nested schemas included.
func cloneInputs(in []Input) []Input {
	if in == nil {
		return nil
	}
	out := make([]Input, len(in))
	raw := func(r json.RawMessage) json.RawMessage { return append(json.RawMessage(nil), r...) }
	for i, x := range in {
		x.RequiredProperties = append([]string(nil), x.RequiredProperties...)
		if x.RequiredProperties == nil && in[i].RequiredProperties != nil {
			x.RequiredProperties = []string{}
		}
		if x.Enum != nil {
			x.Enum = make([]json.RawMessage, len(in[i].Enum))
			for j, e := range in[i].Enum {
				x.Enum[j] = raw(e)
			}
		}
		x.Const, x.Items, x.AdditionalProperties = raw(x.Const), raw(x.Items), raw(x.AdditionalProperties)
		if x.Properties != nil {
			x.Properties = make(map[string]json.RawMessage, len(in[i].Properties))
			for k, v := range in[i].Properties {
				x.Properties[k] = raw(v)
			}
		}
		x.Minimum, x.Maximum = clonePtr(x.Minimum), clonePtr(x.Maximum)
		x.ExclusiveMinimum, x.ExclusiveMaximum = clonePtr(x.ExclusiveMinimum), clonePtr(x.ExclusiveMaximum)
		x.MinLength, x.MaxLength = clonePtr(x.MinLength), clonePtr(x.MaxLength)
		x.MinItems, x.MaxItems = clonePtr(x.MinItems), clonePtr(x.MaxItems)
		out[i] = x
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// cloneSpec deep-copies a spec so the compiled policy owns its data.
func cloneSpec(s *Spec) *Spec {
	c := *s
	c.Tools = make([]Tool, len(s.Tools))
	for i, t := range s.Tools {
		t.Operations = make([]OperationSpec, len(t.Operations))
		for j, op := range s.Tools[i].Operations {
			op.Hosts = append([]string(nil), op.Hosts...)
			op.Inputs = cloneInputs(op.Inputs)
			op.InputSchema = append(json.RawMessage(nil), op.InputSchema...)
			op.OutputSchema = append(json.RawMessage(nil), op.OutputSchema...)
			op.Audit = append([]AuditField(nil), op.Audit...)
			op.Credential.Alternatives = append([]CredentialPlace(nil), op.Credential.Alternatives...)
			t.Operations[j] = op
		}
		c.Tools[i] = t
	}
	return &c
}
