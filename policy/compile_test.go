package policy

import (
	"errors"
	"strings"
	"testing"
)

// mkSpec builds a spec with one tool holding the given operations.
func mkSpec(fqn, tool string, ops ...OperationSpec) *Spec {
	return &Spec{
		SchemaVersion: SchemaVersion,
		Connector:     Connector{FQN: fqn, Version: "1.0.0"},
		Tools:         []Tool{{Name: tool, Operations: ops}},
	}
}

func mkOp(name, method, path string, hosts ...string) OperationSpec {
	return OperationSpec{Name: name, Method: method, Path: path, Hosts: hosts}
}

func src(s *Spec, origin string) Source {
	return Source{Spec: s, Hash: "sha256:" + origin, Origin: origin}
}

// accepted lists the FQNs of the compiled operations' connectors.
func accepted(p *Policy) map[string]bool {
	m := map[string]bool{}
	for _, o := range p.Operations() {
		m[o.FQN] = true
	}
	return m
}

// conflictCase is a second source compiled after a fixed first one.
type conflictCase struct {
	name       string
	second     *Spec
	wantRule   string
	wantPath   string
	wantSent   error
	wantInMsg  []string
	secondKept bool
}

func conflictCases() []conflictCase {
	return []conflictCase{
		{
			name:     "tool name clash across specs",
			second:   mkSpec("github://acme/b", "alpha", mkOp("x", "GET", "/other", "other.example.com")),
			wantRule: ruleToolClash, wantPath: "$.tools[0].name", wantSent: ErrConflict,
			wantInMsg: []string{`"alpha"`, "github://acme/a@1.0.0", "a.json", "github://acme/b"},
		},
		{
			name:     "equal match across specs",
			second:   mkSpec("github://acme/b", "beta", mkOp("fetch", "GET", "/v1/items/{other}", "api.example.com:443")),
			wantRule: ruleOperationClash, wantPath: "$.tools[0].operations[0]", wantSent: ErrConflict,
			wantInMsg: []string{"beta/fetch", "alpha/get", "a.json", "b.json", "api.example.com:443", "/v1/items/{id}", "/v1/items/{other}"},
		},
		{
			name:     "equal match on one shared host of several",
			second:   mkSpec("github://acme/b", "beta", mkOp("fetch", "GET", "/v1/items/{other}", "api2.example.com")),
			wantRule: ruleOperationClash, wantPath: "$.tools[0].operations[0]", wantSent: ErrConflict,
			wantInMsg: []string{"api2.example.com:443"},
		},
		{
			name: "same fqn twice",
			second: func() *Spec {
				s := mkSpec("github://acme/a", "gamma", mkOp("x", "GET", "/x", "x.example.com"))
				s.Connector.Version = "2.0.0"
				return s
			}(),
			wantRule: ruleConnectorDup, wantPath: "$.connector.fqn", wantSent: ErrConflict,
			wantInMsg: []string{"github://acme/a", "a.json", "1.0.0", "2.0.0"},
		},
		{
			name: "equal match within one spec",
			second: mkSpec("github://acme/b", "beta",
				mkOp("one", "POST", "/v1/things/{a}", "api.example.com"),
				mkOp("two", "POST", "/v1/things/{b}", "api.example.com")),
			wantRule: ruleOperationClash, wantPath: "$.tools[0].operations[1]", wantSent: ErrInvalidSpec,
			wantInMsg: []string{"beta/one", "beta/two"},
		},
		{name: "literal vs template is no conflict", second: mkSpec("github://acme/b", "beta", mkOp("special", "GET", "/v1/items/special", "api.example.com")), secondKept: true},
		{name: "single vs multi is no conflict", second: mkSpec("github://acme/b", "beta", mkOp("all", "GET", "/v1/items/{rest...}", "api.example.com")), secondKept: true},
		{name: "other port is no conflict", second: mkSpec("github://acme/b", "beta", mkOp("get", "GET", "/v1/items/{id}", "api.example.com:8443")), secondKept: true},
		{name: "other method is no conflict", second: mkSpec("github://acme/b", "beta", mkOp("del", "DELETE", "/v1/items/{id}", "api.example.com")), secondKept: true},
		{name: "trailing slash is no conflict", second: mkSpec("github://acme/b", "beta", mkOp("get", "GET", "/v1/items/{id}/", "api.example.com")), secondKept: true},
	}
}

func TestCompileConflicts(t *testing.T) {
	a := mkSpec("github://acme/a", "alpha", mkOp("get", "GET", "/v1/items/{id}", "api.example.com", "api2.example.com"))
	cases := conflictCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			third := mkSpec("github://acme/c", "charlie", mkOp("ok", "GET", "/c", "c.example.com"))
			p, errs := Compile([]Source{src(a, "a.json"), src(tc.second, "b.json"), src(third, "c.json")}, nil)
			got := accepted(p)
			if !got["github://acme/a"] || !got["github://acme/c"] {
				t.Fatalf("first or third source lost: %v (errs %v)", got, errs)
			}
			if tc.secondKept {
				if len(errs) != 0 || !got["github://acme/b"] {
					t.Fatalf("second source should be accepted: errs %v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("want one error, got %v", errs)
			}
			first := tc.second.Tools[0]
			if _, ok := p.Lookup(tc.second.Connector.FQN, first.Name, first.Operations[0].Name); ok {
				t.Error("conflicting source was accepted")
			}
			var ve *ValidationError
			if !errors.As(errs[0], &ve) || ve.Rule != tc.wantRule || ve.Path != tc.wantPath || ve.File != "b.json" {
				t.Fatalf("error = %#v, want rule %s path %s file b.json", errs[0], tc.wantRule, tc.wantPath)
			}
			if !errors.Is(errs[0], tc.wantSent) {
				t.Errorf("error does not wrap %v", tc.wantSent)
			}
			for _, s := range tc.wantInMsg {
				if !strings.Contains(ve.Error(), s) {
					t.Errorf("message %q lacks %q", ve.Error(), s)
				}
			}
		})
	}
}

func TestCompileSkipsOnlyTheBadSource(t *testing.T) {
	bad := mkSpec("github://acme/bad", "bad", mkOp("x", "get", "/x", "https://x.example.com"))
	p, errs := Compile([]Source{
		{Spec: nil, Origin: "nil.json"},
		src(bad, "bad.json"),
		src(loadSpec(t, "gmail.json"), "gmail.json"),
	}, nil)
	if len(errs) != 3 {
		t.Fatalf("want 3 errors (nil spec, bad method, bad host), got %d: %v", len(errs), errs)
	}
	for _, e := range errs {
		var ve *ValidationError
		if !errors.As(e, &ve) || ve.File == "" {
			t.Errorf("error %v lacks a file", e)
		}
	}
	d := p.Decide(Args{Method: "GET", Host: "gmail.googleapis.com", Port: 443, Path: "/gmail/v1/users/me/messages"})
	if d.Verdict != Allow {
		t.Errorf("gmail not usable after a bad source: %+v", d)
	}
}

func TestCompileCopiesSpecs(t *testing.T) {
	s := mkSpec("github://acme/a", "alpha", mkOp("get", "GET", "/v1/items", "api.example.com"))
	p, errs := Compile([]Source{src(s, "a.json")}, nil)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	s.Tools[0].Operations[0].Approval = ApprovalRequired
	s.Tools[0].Operations[0].Hosts[0] = "evil.example.com"
	d := p.Decide(Args{Method: "GET", Host: "api.example.com", Port: 443, Path: "/v1/items"})
	if d.Verdict != Allow || d.Op.Spec.Hosts[0] != "api.example.com" {
		t.Errorf("policy changed after its source spec was modified: %+v", d)
	}
}

func TestCompilePassthroughRuleErrors(t *testing.T) {
	rules := []PassthroughRule{
		{Host: "*"}, {Host: "a.*.com"}, {Host: "*.*.com"}, {Host: "*.192.0.2.1"}, {Host: "https://x.com"},
		{Host: "x.com", Port: 70000}, {Host: "x.com", Port: -1}, {Host: ""},
		{Host: "*.github.com"}, {Host: "Example.COM", Port: 8443},
	}
	p, errs := Compile(nil, rules)
	if len(errs) != 8 {
		t.Fatalf("want 8 rule errors, got %d: %v", len(errs), errs)
	}
	for _, e := range errs {
		if !errors.Is(e, ErrBadPassthroughRule) {
			t.Errorf("%v does not wrap ErrBadPassthroughRule", e)
		}
	}
	if len(p.rules) != 2 {
		t.Errorf("want the 2 good rules kept, got %d", len(p.rules))
	}
}

func TestLookupAndOperations(t *testing.T) {
	p := testPolicy(t)
	o, ok := p.Lookup(fqnGoogle, "google", "gmail.messages.send")
	if !ok || o.Spec.Method != "POST" || !o.RequiresApproval() || o.Hash != "sha256:gmail.json" || o.Version != "1.2.3" {
		t.Fatalf("Lookup = %+v, %v", o, ok)
	}
	if _, ok := p.Lookup(fqnGoogle, "google", "nope"); ok {
		t.Error("Lookup found a missing operation")
	}
	if _, ok := p.Lookup(fqnLinear, "google", "gmail.messages.send"); ok {
		t.Error("Lookup ignored the FQN")
	}
	ops := p.Operations()
	if len(ops) != 8 {
		t.Fatalf("Operations() has %d entries, want 8", len(ops))
	}
	ops[0] = nil
	if p.Operations()[0] == nil {
		t.Error("Operations() exposes the policy's own slice")
	}
	reg, _ := p.Lookup(fqnRegional, "regional", "reports.list")
	want := []Authority{{"api.eu.example.com", 443}, {"api.us.example.com", 443}, {"api.ap.example.com", 8443}}
	if len(reg.Hosts) != 3 || reg.Hosts[0] != want[0] || reg.Hosts[1] != want[1] || reg.Hosts[2] != want[2] {
		t.Errorf("Hosts = %v, want %v", reg.Hosts, want)
	}
}

func TestHolder(t *testing.T) {
	var h Holder
	if p := h.Load(); p == nil {
		t.Fatal("zero Holder returned nil")
	} else if d := p.Decide(Args{Method: "GET", Host: "gmail.googleapis.com", Port: 443, Path: "/"}); d.Verdict != Deny {
		t.Errorf("empty policy decided %v", d.Verdict)
	}
	p := testPolicy(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			_ = h.Load().Decide(Args{Method: "GET", Host: "api.linear.app", Port: 443, Path: "/graphql"})
		}
	}()
	h.Store(p)
	<-done
	if h.Load() != p {
		t.Error("Load did not return the stored policy")
	}
	h.Store(nil)
	if h.Load() == nil || h.Load() == p {
		t.Error("Store(nil) did not publish an empty policy")
	}
}
