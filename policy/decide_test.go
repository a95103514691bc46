package policy

import (
	"strconv"
	"strings"
	"testing"
)

const gmail, linear = "gmail.googleapis.com", "api.linear.app"

// decideCase is one request and the decision expected for it.
type decideCase struct {
	name       string
	args       Args
	verdict    Verdict
	reason     Reason
	op         string // "tool/op" when matched
	params     map[string]string
	msgContain []string
}

func gmailDecideCases() []decideCase {
	return []decideCase{
		{name: "gmail search", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages"},
			verdict: Allow, reason: ReasonMatched, op: "google/gmail.messages.search"},
		{name: "gmail get", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/18c2f3a9"},
			verdict: Allow, reason: ReasonMatched, op: "google/gmail.messages.get", params: map[string]string{"id": "18c2f3a9"}},
		{name: "gmail get escaped id", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/a%20b"},
			verdict: Allow, reason: ReasonMatched, op: "google/gmail.messages.get", params: map[string]string{"id": "a b"}},
		{name: "gmail send needs approval", args: Args{Method: "POST", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/send"},
			verdict: AllowAfterApproval, reason: ReasonMatched, op: "google/gmail.messages.send"},
		{name: "gmail GET send is the get template", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/send"},
			verdict: Allow, reason: ReasonMatched, op: "google/gmail.messages.get", params: map[string]string{"id": "send"}},
		{name: "gmail escaped literal matches", args: Args{Method: "POST", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/s%65nd"},
			verdict: AllowAfterApproval, reason: ReasonMatched, op: "google/gmail.messages.send"},
		{name: "gmail trailing slash", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/"},
			verdict: Deny, reason: ReasonNoMatchingOperation},
		{name: "gmail other user", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "/gmail/v1/users/other/messages"},
			verdict: Deny, reason: ReasonNoMatchingOperation,
			msgContain: []string{"GET /gmail/v1/users/other/messages on gmail.googleapis.com:443 matches no operation of github://acme/aileron-connector-google@1.2.3",
				"operations for this host: GET /gmail/v1/users/me/messages, GET /gmail/v1/users/me/messages/{id}, POST /gmail/v1/users/me/messages/send"}},
		{name: "gmail delete", args: Args{Method: "DELETE", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/1"},
			verdict: Deny, reason: ReasonNoMatchingOperation},
		{name: "gmail lower-case method", args: Args{Method: "get", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages"},
			verdict: Deny, reason: ReasonNoMatchingOperation},
		{name: "gmail dot segment", args: Args{Method: "POST", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/x/../send"},
			verdict: Deny, reason: ReasonNonCanonicalPath},
		{name: "gmail encoded dot segment", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/%2e%2e"},
			verdict: Deny, reason: ReasonNonCanonicalPath},
		{name: "gmail encoded slash in id", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "/gmail/v1/users/me/messages/a%2Fb"},
			verdict: Deny, reason: ReasonNonCanonicalPath},
		{name: "gmail double slash", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "/gmail//v1/users/me/messages"},
			verdict: Deny, reason: ReasonNonCanonicalPath},
		{name: "gmail other port", args: Args{Method: "GET", Host: gmail, Port: 8443, Path: "/gmail/v1/users/me/messages"},
			verdict: Deny, reason: ReasonHostNotAllowed, msgContain: []string{"only on port 443"}},
	}
}

func otherDecideCases() []decideCase {
	return []decideCase{
		{name: "linear graphql", args: Args{Method: "POST", Host: linear, Port: 443, Path: "/graphql"},
			verdict: Allow, reason: ReasonMatched, op: "linear/graphql"},
		{name: "linear GET graphql", args: Args{Method: "GET", Host: linear, Port: 443, Path: "/graphql"},
			verdict: Deny, reason: ReasonNoMatchingOperation},
		{name: "linear graphql slash", args: Args{Method: "POST", Host: linear, Port: 443, Path: "/graphql/"},
			verdict: Deny, reason: ReasonNoMatchingOperation},
		{name: "regional eu", args: Args{Method: "GET", Host: "api.eu.example.com", Port: 443, Path: "/v2/reports"},
			verdict: Allow, reason: ReasonMatched, op: "regional/reports.list"},
		{name: "regional us get", args: Args{Method: "GET", Host: "api.us.example.com", Port: 443, Path: "/v2/reports/r-1"},
			verdict: Allow, reason: ReasonMatched, op: "regional/reports.get", params: map[string]string{"report_id": "r-1"}},
		{name: "regional ap custom port", args: Args{Method: "DELETE", Host: "api.ap.example.com", Port: 8443, Path: "/v2/reports/r-1"},
			verdict: AllowAfterApproval, reason: ReasonMatched, op: "regional/reports.delete", params: map[string]string{"report_id": "r-1"}},
		{name: "regional ap default port", args: Args{Method: "GET", Host: "api.ap.example.com", Port: 443, Path: "/v2/reports"},
			verdict: Deny, reason: ReasonHostNotAllowed},
		{name: "regional files rest", args: Args{Method: "GET", Host: "api.eu.example.com", Port: 443, Path: "/v2/files/exports/2026/q1.csv"},
			verdict: Allow, reason: ReasonMatched, op: "regional/files.download", params: map[string]string{"path": "exports/2026/q1.csv"}},
		{name: "regional files empty rest", args: Args{Method: "GET", Host: "api.eu.example.com", Port: 443, Path: "/v2/files/"},
			verdict: Allow, reason: ReasonMatched, op: "regional/files.download", params: map[string]string{"path": ""}},
		{name: "regional files no slash", args: Args{Method: "GET", Host: "api.eu.example.com", Port: 443, Path: "/v2/files"},
			verdict: Deny, reason: ReasonNoMatchingOperation},
		{name: "regional files dotdot", args: Args{Method: "GET", Host: "api.eu.example.com", Port: 443, Path: "/v2/files/a/../../reports"},
			verdict: Deny, reason: ReasonNonCanonicalPath},
		{name: "regional sibling host", args: Args{Method: "GET", Host: "api.example.com", Port: 443, Path: "/v2/reports"},
			verdict: Deny, reason: ReasonHostNotAllowed},
		{name: "unknown host", args: Args{Method: "GET", Host: "evil.example.net", Port: 443, Path: "/"},
			verdict: Deny, reason: ReasonHostNotAllowed, msgContain: []string{"evil.example.net:443"}},
		{name: "non-canonical host never matches", args: Args{Method: "GET", Host: "Gmail.googleapis.com", Port: 443, Path: "/gmail/v1/users/me/messages"},
			verdict: Deny, reason: ReasonHostNotAllowed},
		{name: "relative path", args: Args{Method: "GET", Host: gmail, Port: 443, Path: "gmail/v1/users/me/messages"},
			verdict: Deny, reason: ReasonNonCanonicalPath},
		{name: "empty method", args: Args{Host: gmail, Port: 443, Path: "/"}, verdict: Deny, reason: ReasonBadRequest},
		{name: "method with space", args: Args{Method: "GET /x", Host: gmail, Port: 443, Path: "/"}, verdict: Deny, reason: ReasonBadRequest},
		{name: "port zero", args: Args{Method: "GET", Host: gmail, Path: "/"}, verdict: Deny, reason: ReasonBadRequest},
		{name: "empty host", args: Args{Method: "GET", Port: 443, Path: "/"}, verdict: Deny, reason: ReasonBadRequest},
	}
}

func TestDecide(t *testing.T) {
	p := testPolicy(t)
	cases := append(gmailDecideCases(), otherDecideCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.args)
			checkDecision(t, d, tc.verdict, tc.reason, tc.op, tc.params)
			for _, s := range tc.msgContain {
				if !strings.Contains(d.Message, s) {
					t.Errorf("message %q lacks %q", d.Message, s)
				}
			}
		})
	}
}

func checkDecision(t *testing.T, d Decision, v Verdict, r Reason, op string, params map[string]string) {
	t.Helper()
	if d.Verdict != v || d.Reason != r {
		t.Fatalf("decision = %v/%s (%s), want %v/%s", d.Verdict, d.Reason, d.Message, v, r)
	}
	if op == "" {
		if d.Op != nil {
			t.Errorf("unexpected operation %s/%s", d.Op.Tool, d.Op.Spec.Name)
		}
	} else if d.Op == nil || d.Op.Tool+"/"+d.Op.Spec.Name != op {
		t.Fatalf("operation = %+v, want %s", d.Op, op)
	}
	if (params == nil) != (d.Params == nil) || len(params) != len(d.Params) {
		t.Fatalf("params = %#v, want %#v", d.Params, params)
	}
	for k, val := range params {
		if d.Params[k] != val {
			t.Errorf("params[%s] = %q, want %q", k, d.Params[k], val)
		}
	}
	if v == Deny && d.Message == "" {
		t.Error("denial without a message")
	}
	if len(d.Message) > maxMessage {
		t.Errorf("message is %d bytes", len(d.Message))
	}
}

func TestDecideScope(t *testing.T) {
	p := testPolicy(t)
	gmailReq := Args{Method: "GET", Host: "gmail.googleapis.com", Port: 443, Path: "/gmail/v1/users/me/messages"}
	cases := []struct {
		name   string
		scope  []string
		v      Verdict
		reason Reason
	}{
		{"nil scope is everything", nil, Allow, ReasonMatched},
		{"in scope", []string{fqnLinear, fqnGoogle}, Allow, ReasonMatched},
		{"out of scope", []string{fqnLinear}, Deny, ReasonConnectorNotInSession},
		{"empty scope is nothing", []string{}, Deny, ReasonConnectorNotInSession},
		{"similar fqn", []string{fqnGoogle + "x"}, Deny, ReasonConnectorNotInSession},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := gmailReq
			a.Connectors = tc.scope
			d := p.Decide(a)
			if d.Verdict != tc.v || d.Reason != tc.reason {
				t.Errorf("Decide = %v/%s (%s), want %v/%s", d.Verdict, d.Reason, d.Message, tc.v, tc.reason)
			}
			if strings.Contains(d.Message, fqnGoogle) && tc.v == Deny {
				t.Errorf("denial names a connector outside the session: %s", d.Message)
			}
		})
	}
}

// TestDecideScopeSharedHost: two connectors on one host; each session
// matches only its own operations, as if the other were not installed.
func TestDecideScopeSharedHost(t *testing.T) {
	a := mkSpec("github://acme/a", "alpha", mkOp("repo", "GET", "/repos/{owner}/{repo}", "api.github.com"))
	b := mkSpec("github://acme/b", "beta", mkOp("secret", "GET", "/repos/acme/secret", "api.github.com"))
	p, errs := Compile([]Source{src(a, "a.json"), src(b, "b.json")}, nil)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	req := Args{Method: "GET", Host: "api.github.com", Port: 443, Path: "/repos/acme/secret"}
	cases := []struct {
		scope []string
		v     Verdict
		r     Reason
		op    string
	}{
		{nil, Allow, ReasonMatched, "beta/secret"},
		{[]string{"github://acme/a"}, Allow, ReasonMatched, "alpha/repo"},
		{[]string{"github://acme/b"}, Allow, ReasonMatched, "beta/secret"},
		{[]string{"github://acme/other"}, Deny, ReasonConnectorNotInSession, ""},
	}
	for _, tc := range cases {
		req.Connectors = tc.scope
		d := p.Decide(req)
		var params map[string]string
		if tc.op == "alpha/repo" {
			params = map[string]string{"owner": "acme", "repo": "secret"}
		}
		checkDecision(t, d, tc.v, tc.r, tc.op, params)
	}
	req.Connectors = []string{"github://acme/b"}
	req.Path = "/repos/acme/public"
	if d := p.Decide(req); d.Reason != ReasonNoMatchingOperation || strings.Contains(d.Message, "{owner}") {
		t.Errorf("out-of-scope operations leak into the decision: %+v", d)
	}
}

// TestDecidePriority: literal beats {x} beats {x...} at the first
// differing segment, with backtracking.
func TestDecidePriority(t *testing.T) {
	s := mkSpec("github://acme/a", "alpha",
		mkOp("lit", "GET", "/a/b/c", "h.example.com"),
		mkOp("single", "GET", "/a/{x}/c", "h.example.com"),
		mkOp("multi", "GET", "/a/{rest...}", "h.example.com"),
		mkOp("litdeep", "GET", "/a/b/{y}/d", "h.example.com"),
		mkOp("root", "GET", "/", "h.example.com"),
		mkOp("any", "GET", "/{all...}", "h.example.com"),
	)
	p, errs := Compile([]Source{src(s, "a.json")}, nil)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	cases := map[string]string{
		"/a/b/c":   "lit",
		"/a/z/c":   "single",
		"/a/b/q/d": "litdeep",
		"/a/b/q/e": "multi", // literal branch fails deeper: backtrack
		"/a/b/d":   "multi",
		"/a/z":     "multi",
		"/a/":      "multi",
		"/a":       "any",
		"/":        "root",
		"/zzz/y":   "any",
	}
	for path, want := range cases {
		d := p.Decide(Args{Method: "GET", Host: "h.example.com", Port: 443, Path: path})
		if d.Op == nil || d.Op.Spec.Name != want {
			t.Errorf("%s matched %+v, want %s", path, d.Op, want)
		}
	}
}

func TestDecideConnect(t *testing.T) {
	p := testPolicy(t,
		PassthroughRule{Host: "*.github.com"},
		PassthroughRule{Host: "pypi.org", Port: 443},
		PassthroughRule{Host: "*.googleapis.com"},
		PassthroughRule{Host: "*.example.com", Port: 8443},
	)
	cases := []struct {
		host  string
		port  int
		scope []string
		v     Verdict
		r     Reason
	}{
		{"gmail.googleapis.com", 443, nil, Allow, ReasonHostMatched},
		{"api.ap.example.com", 8443, nil, Allow, ReasonHostMatched},
		{"gmail.googleapis.com", 443, []string{fqnLinear}, Deny, ReasonConnectorNotInSession},
		{"api.github.com", 443, nil, Passthrough, ReasonPassthroughRule},
		{"a.b.github.com", 443, nil, Passthrough, ReasonPassthroughRule},
		{"api.github.com", 443, []string{}, Passthrough, ReasonPassthroughRule},
		{"github.com", 443, nil, Deny, ReasonHostNotAllowed},
		{"evilgithub.com", 443, nil, Deny, ReasonHostNotAllowed},
		{"api.github.com.evil.com", 443, nil, Deny, ReasonHostNotAllowed},
		{"api.github.com", 8443, nil, Deny, ReasonHostNotAllowed},
		{"pypi.org", 443, nil, Passthrough, ReasonPassthroughRule},
		{"files.pypi.org", 443, nil, Deny, ReasonHostNotAllowed},
		{"storage.googleapis.com", 443, nil, Passthrough, ReasonPassthroughRule},
		// A spec names gmail.googleapis.com: no passthrough on any port.
		{"gmail.googleapis.com", 8443, nil, Deny, ReasonHostNotAllowed},
		{"api.eu.example.com", 8443, nil, Deny, ReasonHostNotAllowed},
		{"other.example.com", 8443, nil, Passthrough, ReasonPassthroughRule},
		{"evil.example.net", 443, nil, Deny, ReasonHostNotAllowed},
		{"", 443, nil, Deny, ReasonBadRequest},
		{"api.github.com", 0, nil, Deny, ReasonBadRequest},
	}
	for _, tc := range cases {
		d := p.DecideConnect(tc.host, tc.port, tc.scope)
		if d.Verdict != tc.v || d.Reason != tc.r {
			t.Errorf("DecideConnect(%s:%d, %v) = %v/%s (%s), want %v/%s", tc.host, tc.port, tc.scope, d.Verdict, d.Reason, d.Message, tc.v, tc.r)
		}
		if d.Op != nil {
			t.Errorf("DecideConnect returned an operation")
		}
	}
}

func TestNilAndEmptyPolicyDeny(t *testing.T) {
	a := Args{Method: "GET", Host: "gmail.googleapis.com", Port: 443, Path: "/"}
	for _, p := range []*Policy{nil, {}} {
		if d := p.Decide(a); d.Verdict != Deny || d.Reason != ReasonHostNotAllowed {
			t.Errorf("Decide on %#v = %+v", p, d)
		}
		if d := p.DecideConnect("gmail.googleapis.com", 443, nil); d.Verdict != Deny {
			t.Errorf("DecideConnect on %#v = %+v", p, d)
		}
		if p.Operations() != nil {
			t.Error("Operations on an empty policy")
		}
	}
}

func TestVerdictString(t *testing.T) {
	want := map[Verdict]string{Deny: "deny", Allow: "allow", AllowAfterApproval: "allow_after_approval", Passthrough: "passthrough", 9: "invalid_verdict(9)"}
	for v, s := range want {
		if v.String() != s {
			t.Errorf("%d.String() = %q, want %q", v, v.String(), s)
		}
		if b, _ := v.MarshalText(); string(b) != s {
			t.Errorf("%d.MarshalText() = %q", v, b)
		}
	}
	var zero Verdict
	if zero != Deny {
		t.Error("zero Verdict is not Deny")
	}
}

func TestDecideMessageBounded(t *testing.T) {
	var ops []OperationSpec
	for i := 0; i < 200; i++ {
		ops = append(ops, mkOp("op"+strconv.Itoa(i), "GET", "/v1/"+strings.Repeat("s", i+1), "h.example.com"))
	}
	p, errs := Compile([]Source{src(mkSpec("github://acme/a", "alpha", ops...), "a.json")}, nil)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	d := p.Decide(Args{Method: "GET", Host: "h.example.com", Port: 443, Path: "/" + strings.Repeat("z", 5000)})
	if d.Reason != ReasonNoMatchingOperation || len(d.Message) > maxMessage || !strings.HasSuffix(d.Message, "…") {
		t.Errorf("message not bounded: %d bytes, %+v", len(d.Message), d.Reason)
	}
}

func TestDecideNoAllocs(t *testing.T) {
	p := testPolicy(t)
	for _, a := range []Args{
		{Method: "GET", Host: "gmail.googleapis.com", Port: 443, Path: "/gmail/v1/users/me/messages"},
		{Method: "POST", Host: "api.linear.app", Port: 443, Path: "/graphql", Connectors: []string{fqnGoogle, fqnLinear}},
		{Method: "POST", Host: "gmail.googleapis.com", Port: 443, Path: "/gmail/v1/users/me/messages/s%65nd"},
	} {
		if n := testing.AllocsPerRun(100, func() { _ = p.Decide(a) }); n != 0 {
			t.Errorf("Decide(%s %s) allocates %v times", a.Method, a.Path, n)
		}
	}
}

func TestReasonsAreClosedAndDistinct(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range Reasons() {
		if seen[r] || r == "" {
			t.Errorf("reason %q is empty or listed twice", r)
		}
		for _, c := range r {
			if !(c >= 'a' && c <= 'z' || c == '_') {
				t.Errorf("reason %q is not snake_case", r)
				break
			}
		}
		seen[r] = true
	}
}
