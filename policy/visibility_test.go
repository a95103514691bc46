package policy

import (
	"strings"
	"testing"
)

const (
	fqnVis   = "github://acme/aileron-connector-vis"
	fqnOther = "github://acme/aileron-connector-other"
)

// visOp is one operation of visibilityPolicy's specs.
type visOp struct {
	name, method, path, host string
	internal                 bool
}

// visSpec builds a spec of fqn with one tool holding ops.
func visSpec(t *testing.T, fqn, tool string, ops []visOp) *Spec {
	t.Helper()
	tree := baseSpec()
	tree["connector"] = map[string]any{"fqn": fqn, "version": "1.0.0"}
	var list []any
	for _, o := range ops {
		list = append(list, map[string]any{"name": o.name, "method": o.method, "path": o.path, "hosts": []any{o.host}})
	}
	tool0(tree)["name"] = tool
	tool0(tree)["operations"] = list
	s, err := ParseSpec(fqn, mustJSON(t, tree))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range ops {
		if o.internal {
			s.Tools[0].Operations[i].Visibility = VisibilityInternal
		}
	}
	return s
}

// visibilityPolicy compiles a connector whose internal operations overlap
// external ones (a literal under a wildcard, a literal beside a rest
// wildcard), live alone on a host, or alone on a port, and a second
// connector with one external operation.
func visibilityPolicy(t *testing.T) *Policy {
	t.Helper()
	vis := visSpec(t, fqnVis, "vis", []visOp{
		{name: "items.get", method: "GET", path: "/v1/items/{id}", host: "api.example.com"},
		{name: "items.special", method: "GET", path: "/v1/items/special", host: "api.example.com", internal: true},
		{name: "items.create", method: "POST", path: "/v1/items", host: "api.example.com", internal: true},
		{name: "files.get", method: "GET", path: "/v1/files/{path...}", host: "api.example.com"},
		{name: "files.secret", method: "GET", path: "/v1/files/secret", host: "api.example.com", internal: true},
		{name: "hidden.get", method: "GET", path: "/v1/x", host: "hidden.example.com", internal: true},
		{name: "port.get", method: "GET", path: "/v1/y", host: "ports.example.com:8443", internal: true},
		{name: "port.list", method: "GET", path: "/v1/y", host: "ports.example.com"},
	})
	other := visSpec(t, fqnOther, "other", []visOp{
		{name: "shared.get", method: "GET", path: "/v2/shared", host: "shared.example.com"},
	})
	vis2 := visSpec(t, fqnVis+"2", "vis2", []visOp{
		{name: "shared.put", method: "PUT", path: "/v2/shared", host: "shared.example.com", internal: true},
	})
	p, errs := Compile([]Source{{Spec: vis, Origin: "vis"}, {Spec: other, Origin: "other"}, {Spec: vis2, Origin: "vis2"}}, nil)
	if len(errs) > 0 {
		t.Fatalf("Compile: %v", errs)
	}
	return p
}

func TestDecideVisibility(t *testing.T) {
	p := visibilityPolicy(t)
	get := func(host, path string) Args {
		return Args{Method: "GET", Host: host, Port: 443, Path: path}
	}
	step := func(a Args) Args { a.Step = true; return a }
	scoped := func(a Args, c ...string) Args { a.Connectors = c; return a }
	post := Args{Method: "POST", Host: "api.example.com", Port: 443, Path: "/v1/items"}
	cases := []struct {
		name    string
		args    Args
		verdict Verdict
		reason  Reason
		op      string // "tool/op" when matched
	}{
		{"sandbox: a literal internal under an external wildcard is refused, not served by the wildcard", get("api.example.com", "/v1/items/special"), Deny, ReasonNoMatchingOperation, ""},
		{"step: the internal literal", step(get("api.example.com", "/v1/items/special")), Allow, ReasonMatched, "vis/items.special"},
		{"sandbox: other items as ever", get("api.example.com", "/v1/items/7"), Allow, ReasonMatched, "vis/items.get"},
		{"step: other items as ever", step(get("api.example.com", "/v1/items/7")), Allow, ReasonMatched, "vis/items.get"},
		{"sandbox: an internal literal beside a rest wildcard is refused, not served by the rest", get("api.example.com", "/v1/files/secret"), Deny, ReasonNoMatchingOperation, ""},
		{"step: the internal literal beside the rest wildcard", step(get("api.example.com", "/v1/files/secret")), Allow, ReasonMatched, "vis/files.secret"},
		{"sandbox: an internal operation alone is no operation", post, Deny, ReasonNoMatchingOperation, ""},
		{"step: the internal operation alone", step(post), Allow, ReasonMatched, "vis/items.create"},
		{"sandbox: a host only internal operations name is unknown", get("hidden.example.com", "/v1/x"), Deny, ReasonHostNotAllowed, ""},
		{"step: that host", step(get("hidden.example.com", "/v1/x")), Allow, ReasonMatched, "vis/hidden.get"},
		{"sandbox: a port only internal operations name is unknown", Args{Method: "GET", Host: "ports.example.com", Port: 8443, Path: "/v1/y"}, Deny, ReasonHostNotAllowed, ""},
		{"step: that port", Args{Method: "GET", Host: "ports.example.com", Port: 8443, Path: "/v1/y", Step: true}, Allow, ReasonMatched, "vis/port.get"},
		{"sandbox scoped to the internal-only connector: as if not installed there", scoped(get("shared.example.com", "/v2/shared"), fqnVis+"2"), Deny, ReasonConnectorNotInSession, ""},
		{"sandbox scoped to both", scoped(get("shared.example.com", "/v2/shared"), fqnVis+"2", fqnOther), Allow, ReasonMatched, "other/shared.get"},
		{"sandbox: PUT on the shared host is no operation", Args{Method: "PUT", Host: "shared.example.com", Port: 443, Path: "/v2/shared"}, Deny, ReasonNoMatchingOperation, ""},
		{"step scoped: the internal PUT", Args{Method: "PUT", Host: "shared.example.com", Port: 443, Path: "/v2/shared", Step: true, Connectors: []string{fqnVis + "2"}}, Allow, ReasonMatched, "vis2/shared.put"},
		{"step out of scope: still refused", scoped(step(get("hidden.example.com", "/v1/x")), fqnOther), Deny, ReasonConnectorNotInSession, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.args)
			if d.Verdict != tc.verdict || d.Reason != tc.reason {
				t.Fatalf("Decide = %s %s (%s), want %s %s", d.Verdict, d.Reason, d.Message, tc.verdict, tc.reason)
			}
			if got := opName(d.Op); got != tc.op {
				t.Errorf("matched %q, want %q", got, tc.op)
			}
			if !tc.args.Step {
				noInternalNamed(t, tc.args, d.Message)
			}
		})
	}
}

// noInternalNamed fails when msg, less its echo of the request, names an
// internal operation of visibilityPolicy (its path, method and path, port,
// or its connector).
func noInternalNamed(t *testing.T, a Args, msg string) {
	t.Helper()
	rest := strings.Replace(msg, a.Method+" "+a.Path+" on "+Authority{a.Host, a.Port}.String(), "", 1)
	rest = strings.Replace(rest, Authority{a.Host, a.Port}.String()+" is", "", 1)
	for _, s := range []string{"special", "secret", "/v1/x", "8443", "PUT /v2", "POST /v1/items", fqnVis + "2"} {
		if strings.Contains(rest, s) {
			t.Errorf("the denial names an internal operation (%s): %s", s, msg)
		}
	}
}

func opName(o *Operation) string {
	if o == nil {
		return ""
	}
	return o.Tool + "/" + o.Spec.Name
}

// TestDecideInternalAnswersAsUnknown compares each sandbox denial that an
// internal operation could have caused with the one a policy without it
// gives: the same reason and the same message.
func TestDecideInternalAnswersAsUnknown(t *testing.T) {
	with := visibilityPolicy(t)
	external := func(s *Spec) *Spec { // the spec without its internal operations
		for i := range s.Tools {
			ops := s.Tools[i].Operations[:0]
			for _, o := range s.Tools[i].Operations {
				if !o.IsInternal() {
					ops = append(ops, o)
				}
			}
			s.Tools[i].Operations = ops
		}
		return s
	}
	var srcs []Source
	for _, o := range with.Operations() {
		if o.Tool == "vis2" {
			continue // its only operation is internal: not installed at all
		}
		if len(srcs) == 0 || srcs[len(srcs)-1].Origin != o.Tool {
			srcs = append(srcs, Source{Spec: external(specOf(t, with, o.FQN)), Origin: o.Tool})
		}
	}
	without, errs := Compile(srcs, nil)
	if len(errs) > 0 {
		t.Fatalf("Compile: %v", errs)
	}
	for _, a := range []Args{
		{Method: "POST", Host: "api.example.com", Port: 443, Path: "/v1/items"},
		{Method: "GET", Host: "hidden.example.com", Port: 443, Path: "/v1/x"},
		{Method: "GET", Host: "ports.example.com", Port: 8443, Path: "/v1/y"},
		{Method: "PUT", Host: "shared.example.com", Port: 443, Path: "/v2/shared"},
		{Method: "GET", Host: "shared.example.com", Port: 443, Path: "/v2/shared", Connectors: []string{fqnVis + "2"}},
		{Method: "GET", Host: "api.example.com", Port: 443, Path: "/v2/nothing"},
	} {
		got, want := with.Decide(a), without.Decide(a)
		if got.Verdict != Deny || got.Reason != want.Reason || got.Message != want.Message {
			t.Errorf("%s %s:%d%s: got %s %s %q, want %s %q", a.Method, a.Host, a.Port, a.Path, got.Verdict, got.Reason, got.Message, want.Reason, want.Message)
		}
	}
	for _, c := range []struct {
		host  string
		port  int
		scope []string
	}{{"hidden.example.com", 443, nil}, {"ports.example.com", 8443, nil}, {"shared.example.com", 443, []string{fqnVis + "2"}}} {
		got, want := with.DecideConnect(c.host, c.port, c.scope), without.DecideConnect(c.host, c.port, c.scope)
		if got.Verdict != Deny || got.Reason != want.Reason || got.Message != want.Message {
			t.Errorf("CONNECT %s:%d: got %s %s %q, want %s %q", c.host, c.port, got.Verdict, got.Reason, got.Message, want.Reason, want.Message)
		}
	}
}

// TestDecideConnectHiddenHostNotPassedThrough: a passthrough rule that
// matches a host only internal operations name does not open a raw tunnel
// to it (the sandbox would reach the internal operation unchecked).
func TestDecideConnectHiddenHostNotPassedThrough(t *testing.T) {
	p := visibilityPolicy(t)
	q, errs := Compile(sourcesOf(t, p), []PassthroughRule{{Host: "*.example.com", Port: 443}})
	if len(errs) > 0 {
		t.Fatalf("Compile: %v", errs)
	}
	if d := q.DecideConnect("hidden.example.com", 443, nil); d.Verdict != Deny || d.Reason != ReasonHostNotAllowed {
		t.Fatalf("CONNECT hidden.example.com = %s %s, want deny host_not_allowed", d.Verdict, d.Reason)
	}
	if d := q.DecideConnect("free.example.com", 443, nil); d.Verdict != Passthrough {
		t.Fatalf("CONNECT free.example.com = %s %s, want passthrough (the rule works)", d.Verdict, d.Reason)
	}
	if d := q.DecideConnect("api.example.com", 443, nil); d.Verdict != Allow {
		t.Fatalf("CONNECT api.example.com = %s %s, want allow", d.Verdict, d.Reason)
	}
}

// specOf rebuilds fqn's spec from p's operations (one tool each here).
func specOf(t *testing.T, p *Policy, fqn string) *Spec {
	t.Helper()
	var s *Spec
	for _, o := range p.Operations() {
		if o.FQN != fqn {
			continue
		}
		if s == nil {
			s = &Spec{SchemaVersion: "aileron.connector.v1", Connector: Connector{FQN: fqn, Version: o.Version}}
		}
		if len(s.Tools) == 0 || s.Tools[len(s.Tools)-1].Name != o.Tool {
			s.Tools = append(s.Tools, Tool{Name: o.Tool})
		}
		tl := &s.Tools[len(s.Tools)-1]
		tl.Operations = append(tl.Operations, *o.Spec)
	}
	return s
}

// sourcesOf rebuilds p's sources, in order.
func sourcesOf(t *testing.T, p *Policy) []Source {
	var srcs []Source
	for _, o := range p.Operations() {
		if len(srcs) == 0 || srcs[len(srcs)-1].Spec.Connector.FQN != o.FQN {
			srcs = append(srcs, Source{Spec: specOf(t, p, o.FQN), Origin: o.Origin})
		}
	}
	return srcs
}
