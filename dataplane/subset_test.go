package dataplane

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestExecuteHoldsACallToItsSubset: a call bounded by a Subset (an action
// step's capabilities) is refused with capability_not_granted when its
// host:port or its operation's credential kind is outside the subset, even
// though the session's policy allows it, and nothing reaches the upstream.
func TestExecuteHoldsACallToItsSubset(t *testing.T) {
	e := newEnv(t, nil)
	sess := &Session{ID: "s1", CA: e.sessCA}
	get := Call{URL: mustURL(t, "https://api.example.com/v1/items/7")} // items.get: credential bearer
	create := Call{Method: "POST", URL: mustURL(t, "https://api.example.com/v1/items"), Body: []byte(`{}`),
		Header: http.Header{"Content-Type": {"application/json"}}} // items.create: no credential
	for _, tc := range []struct {
		name   string
		call   Call
		subset *Subset
		msg    string // "" when allowed
	}{
		{"no subset: policy alone", get, nil, ""},
		{"within the subset", get, &Subset{Holder: `action "a"`, Hosts: []string{"api.example.com:443"}, CredentialKinds: []string{"bearer"}}, ""},
		{"no credential needed", create, &Subset{Holder: `action "a"`, Hosts: []string{"api.example.com:443"}}, ""},
		{"credential kind outside", get, &Subset{Holder: `action "a"`, Hosts: []string{"api.example.com:443"}, CredentialKinds: []string{"api_key"}},
			`action "a" may use only the credential kinds api_key; items/items.get needs bearer, which is outside its capabilities: add "credential:bearer"`},
		{"host outside", create, &Subset{Holder: `action "a"`, Hosts: []string{"other.example.com:443"}},
			`action "a" may reach only other.example.com:443; api.example.com:443 is outside its capabilities: add "network:api.example.com:443"`},
		{"same host, another port", create, &Subset{Holder: `action "a"`, Hosts: []string{"api.example.com:8443"}}, "api.example.com:443 is outside"},
		{"empty subset", create, &Subset{Holder: `action "a"`}, "may reach only (none)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.hits.Load()
			c := tc.call
			c.Session, c.Subset = sess, tc.subset
			res, err := e.proxy.Execute(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			hits := e.hits.Load() - before
			if tc.msg == "" {
				if res.Refusal != nil || res.Status != 200 || hits != 1 {
					t.Fatalf("status %d refusal %+v hits %d, want it sent", res.Status, res.Refusal, hits)
				}
				return
			}
			ref := res.Refusal
			if ref == nil || ref.Status != http.StatusForbidden || ref.Class != ClassCapabilityDenied || ref.Reason != "capability_not_granted" ||
				!strings.Contains(ref.Message, tc.msg) || ref.AuditID == "" {
				t.Fatalf("refusal %+v, want 403 capability_denied capability_not_granted containing %q", ref, tc.msg)
			}
			if hits != 0 {
				t.Fatalf("the upstream got %d requests", hits)
			}
		})
	}
}
