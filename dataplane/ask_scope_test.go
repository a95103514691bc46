package dataplane

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
)

// TestAskLeavesOutOfScopeOperationRefused: a request an installed
// connector's operation serves, on a host the session's own connectors also
// name, is refused because the session's scope leaves that connector out,
// not because no operation matches it. In ask and learn mode it is refused
// as in deny mode: never held for a human, never learned, never sent.
func TestAskLeavesOutOfScopeOperationRefused(t *testing.T) {
	for _, mode := range []string{UnknownAsk, UnknownLearn} {
		t.Run(mode, func(t *testing.T) {
			ap, props := &deciderApprovals{decide: outcome(ApprovalApproved)}, &recordingProposals{}
			e := newEnv(t, func(p *Proxy) {
				pol := compileSpecs(t, testSpec, learnedScopeSpec)
				p.Policy.Store(pol)
				p.Approvals, p.Proposals = ap, props
				s := p.Sessions.(staticSessions)["s1"].sess
				s.Unknown, s.Connectors = mode, []string{"local://test/items"}
			})
			c := e.client(t, url.UserPassword("s1", e.token))
			resp, err := c.Get("https://api.example.com/v2/extra")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var ref Refusal
			_ = json.Unmarshal(raw, &ref)
			if resp.StatusCode != http.StatusForbidden || e.hits.Load() != 0 || len(ap.requests()) != 0 || len(props.learned()) != 0 ||
				ref.ProposalID != "" {
				t.Fatalf("got %d %s, upstream hits %d, held %d, learned %d; want it refused as in deny mode, nothing held, learned or sent",
					resp.StatusCode, raw, e.hits.Load(), len(ap.requests()), len(props.learned()))
			}
		})
	}
}

const credentialedThingSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/things", "version": "1.0.0"},
  "tools": [{"name": "things", "operations": [
    {"name": "things.get", "method": "GET", "path": "/v2/thing/{id}", "hosts": ["api.example.com"], "credential": "bearer", "approval": "required"}
  ]}]
}`

// TestApprovalDigestBindsTheCredential: an approval a human gave for a
// request as previewed with no credential (an unknown request, in ask
// mode) is not the approval of the identical request once an operation
// that adds a credential decides it: the two have different digests, so
// the one cannot release the other with bytes the human never saw.
func TestApprovalDigestBindsTheCredential(t *testing.T) {
	e, ap, _, _ := askEnv(t, outcome(ApprovalPending))
	c := e.client(t, url.UserPassword("s1", e.token))
	c.Transport.(*http.Transport).DisableCompression = true // no Accept-Encoding, which an operation's credential drops
	get := func() {
		t.Helper()
		resp, err := c.Get("https://api.example.com/v2/thing/7")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	get()
	pol := compileSpecs(t, testSpec, credentialedThingSpec)
	e.proxy.Policy.Store(pol)
	get()
	asked := ap.requests()
	if len(asked) != 2 || asked[0].Op != nil || asked[1].Op == nil || asked[1].Preview.Credential == "" {
		t.Fatalf("held %d requests %+v; want the unknown one, then the operation's with its credential", len(asked), asked)
	}
	if asked[0].Digest == asked[1].Digest {
		t.Errorf("the request previewed without a credential and with one share digest %s", asked[0].Digest)
	}
	if e.hits.Load() != 0 {
		t.Errorf("upstream hits %d, want none", e.hits.Load())
	}
}
