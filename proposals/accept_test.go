package proposals

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

func TestRuleFor(t *testing.T) {
	get := Proposal{Method: "GET", Template: "/repos/{id}/issues"}
	post := Proposal{Method: "POST", Template: "/repos/{id}/issues"}
	for _, tc := range []struct {
		name string
		p    Proposal
		e    Edits
		want Rule
		bad  string // a part of the error; "" when valid
	}{
		{"GET defaults to no approval", get, Edits{}, Rule{Method: "GET", Template: "/repos/{id}/issues"}, ""},
		{"POST defaults to approval", post, Edits{}, Rule{Method: "POST", Template: "/repos/{id}/issues", Approval: true}, ""},
		{"HEAD edited in needs none", post, Edits{Method: "HEAD"}, Rule{Method: "HEAD", Template: "/repos/{id}/issues"}, ""},
		{"approval none kept", post, Edits{Approval: "none"}, Rule{Method: "POST", Template: "/repos/{id}/issues"}, ""},
		{"approval required on GET", get, Edits{Approval: "required"}, Rule{Method: "GET", Template: "/repos/{id}/issues", Approval: true}, ""},
		{"edited template", get, Edits{Template: "/repos/{owner}/{rest...}"}, Rule{Method: "GET", Template: "/repos/{owner}/{rest...}"}, ""},
		{"lower-case method", get, Edits{Method: "get"}, Rule{}, "write GET"},
		{"method with a space", get, Edits{Method: "G T"}, Rule{}, "not an HTTP method token"},
		{"CONNECT", get, Edits{Method: "CONNECT"}, Rule{}, "tunnels"},
		{"approval typo", get, Edits{Approval: "yes"}, Rule{}, "not required or none"},
		{"relative template", get, Edits{Template: "repos"}, Rule{}, "must start with '/'"},
		{"empty segment", get, Edits{Template: "/a//b"}, Rule{}, "empty segment"},
		{"query in template", get, Edits{Template: "/a?x=1"}, Rule{}, "'?'"},
		{"rest not last", get, Edits{Template: "/a/{x...}/b"}, Rule{}, "not a valid path template"},
		{"repeated variable", get, Edits{Template: "/a/{x}/{x}"}, Rule{}, "not a valid path template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RuleFor(tc.p, tc.e)
			if tc.bad == "" {
				if err != nil || got != tc.want {
					t.Fatalf("RuleFor = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("RuleFor = %+v, %v; want an invalid-argument error saying %q", got, err, tc.bad)
			}
		})
	}
}

func TestConnectorNames(t *testing.T) {
	for _, tc := range []struct{ session, id, want string }{
		{"My Agent", "s_abc", "my-agent"},
		{"  build#42 run ", "s_abc", "build-42-run"},
		{"42", "s_AbC9", "session-abc9"},
		{"", "s_x1", "session-x1"},
		{strings.Repeat("a", 60), "s_x", strings.Repeat("a", 40)},
	} {
		if got := ConnectorName(tc.session, tc.id); got != tc.want || CheckConnectorName(got) != nil {
			t.Errorf("ConnectorName(%q, %q) = %q (%v), want %q", tc.session, tc.id, got, CheckConnectorName(got), tc.want)
		}
	}
	for _, bad := range []string{"", "Agent", "1agent", "a_b", "a/b", strings.Repeat("a", 41)} {
		if err := CheckConnectorName(bad); !errors.Is(err, state.ErrInvalidArgument) {
			t.Errorf("CheckConnectorName(%q) = %v, want an invalid-argument error", bad, err)
		}
	}
}

func TestLearnedSpec(t *testing.T) {
	add := []Accepted{
		{Rule: Rule{Method: "GET", Template: "/repos/{id}/issues"}, Host: "api.example.com", Port: 443},
		{Rule: Rule{Method: "POST", Template: "/repos/{id}/issues", Approval: true}, Host: "api.example.com", Port: 8443},
		{Rule: Rule{Method: "GET", Template: "/repos/{id}/issues/"}, Host: "api.example.com", Port: 443},
	}
	data, names, err := LearnedSpec("agent", "1.0.0", nil, add)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"get-repos-id-issues", "post-repos-id-issues", "get-repos-id-issues-2"}; strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("names %v, want %v", names, want)
	}
	spec, err := policy.ParseSpec("learned", data)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Connector.FQN != "local://learned/agent" || len(spec.Tools) != 1 || spec.Tools[0].Name != "learned-agent" {
		t.Fatalf("spec %+v", spec)
	}
	ops := spec.Tools[0].Operations
	if ops[0].Hosts[0] != "api.example.com" || ops[1].Hosts[0] != "api.example.com:8443" ||
		ops[0].Approval != "none" || ops[1].Approval != "required" {
		t.Errorf("operations %+v", ops)
	}
	for _, o := range ops {
		if o.Credential.Kind != "" {
			t.Errorf("operation %s binds credential %+v; a learned rule never does", o.Name, o.Credential)
		}
	}
	// The next version keeps the old operations and adds the new; one
	// already there is not added twice.
	more := []Accepted{add[0], {Rule: Rule{Method: "DELETE", Template: "/repos/{id}", Approval: true}, Host: "api.example.com", Port: 443}}
	data, names, err = LearnedSpec("agent", "1.0.1", ops, more)
	if err != nil {
		t.Fatal(err)
	}
	if spec, err = policy.ParseSpec("learned", data); err != nil || len(spec.Tools[0].Operations) != 4 {
		t.Fatalf("next version: %v, %+v", err, spec)
	}
	if names[0] != "get-repos-id-issues" || names[1] != "delete-repos-id" {
		t.Errorf("next names %v", names)
	}
	// A rule accepted again by default keeps the approval it had; only an
	// explicit approval none (Relax) drops it.
	required := append([]policy.OperationSpec(nil), ops...)
	required[0].Approval = policy.ApprovalRequired // get-repos-id-issues
	for _, tc := range []struct {
		relax bool
		want  string
	}{{false, policy.ApprovalRequired}, {true, policy.ApprovalNone}} {
		again := add[0]
		again.Relax = tc.relax
		data, _, err := LearnedSpec("agent", "1.0.2", required, []Accepted{again})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := policy.ParseSpec("learned", data)
		if err != nil || spec.Tools[0].Operations[0].Approval != tc.want {
			t.Errorf("GET accepted again (relax %v): %v %+v; want approval %s", tc.relax, err, spec.Tools[0].Operations[0], tc.want)
		}
	}
	// Two rules the policy cannot tell apart are refused, as at install.
	clash := []Accepted{{Rule: Rule{Method: "GET", Template: "/a/{x}"}, Host: "h.example"}, {Rule: Rule{Method: "GET", Template: "/a/{y}"}, Host: "h.example"}}
	if _, _, err := LearnedSpec("agent", "1.0.0", nil, clash); !errors.Is(err, state.ErrInvalidArgument) {
		t.Errorf("two equal rules: %v, want an invalid-argument error", err)
	}
	if _, _, err := LearnedSpec("Agent", "1.0.0", nil, add); err == nil {
		t.Error("a bad connector name was accepted")
	}
}

func TestNextVersion(t *testing.T) {
	for _, tc := range []struct {
		have []string
		want string
	}{{nil, "1.0.0"}, {[]string{"1.0.0"}, "1.0.1"}, {[]string{"1.0.3", "1.0.10", "2.0.0"}, "1.0.11"}} {
		if got := NextVersion(tc.have); got != tc.want {
			t.Errorf("NextVersion(%v) = %s, want %s", tc.have, got, tc.want)
		}
	}
}

func TestMarkAccepted(t *testing.T) {
	backends(t, func(t *testing.T, db *state.DB) {
		ctx := t.Context()
		ev := &events{}
		s := &Store{DB: db, OnEvent: ev.record}
		id, err := s.Learn(ctx, req("/x/1", "au_1", time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		r := Rule{Method: "GET", Template: "/x/{id}", Approval: true}
		p, err := s.MarkAccepted(ctx, id, r, "local://learned/a@1.0.0", "cli:alice")
		if err != nil || p.State != StateAccepted || p.Rule == nil || *p.Rule != r || p.Connector != "local://learned/a@1.0.0" ||
			p.DecidedBy != "cli:alice" || p.DecidedAt == nil {
			t.Fatalf("MarkAccepted = %+v, %v", p, err)
		}
		if _, err := s.MarkAccepted(ctx, id, r, "local://learned/a@1.0.1", "cli:alice"); !errors.Is(err, ErrDecided) || !errors.Is(err, state.ErrConflict) {
			t.Fatalf("second accept: %v, want ErrDecided", err)
		}
		if _, err := s.Reject(ctx, id, "cli:alice", "no"); !errors.Is(err, ErrDecided) {
			t.Fatalf("reject of an accepted proposal: %v, want ErrDecided", err)
		}
		got := ev.named(audit.EventProposalAccepted)
		if len(got) != 1 {
			t.Fatalf("%d proposal.accepted events, want 1", len(got))
		}
		d := got[0].Details
		if d["proposal_id"] != id || d["connector"] != "local://learned/a@1.0.0" || d["method"] != "GET" || d["template"] != "/x/{id}" ||
			d["approval"] != "required" || d["by"] != "cli:alice" || d["session"] == "" {
			t.Errorf("proposal.accepted details %v", d)
		}
		rid, err := s.Learn(ctx, req("/y", "au_2", time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reject(ctx, rid, "cli:alice", "no"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkAccepted(ctx, rid, r, "local://learned/a@1.0.0", "cli:alice"); !errors.Is(err, ErrDecided) {
			t.Fatalf("accept of a rejected proposal: %v, want ErrDecided", err)
		}
	})
}
