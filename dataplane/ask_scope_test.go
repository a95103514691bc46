package dataplane

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/aileronhq/aileron/policy"
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
				var srcs []policy.Source
				for _, text := range []string{testSpec, learnedScopeSpec} {
					spec, err := policy.ParseSpec("test.json", []byte(text))
					if err != nil {
						t.Fatal(err)
					}
					srcs = append(srcs, policy.Source{Spec: spec, Hash: spec.Connector.FQN, Origin: "test.json"})
				}
				pol, errs := policy.Compile(srcs, nil)
				if len(errs) > 0 {
					t.Fatal(errs)
				}
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
