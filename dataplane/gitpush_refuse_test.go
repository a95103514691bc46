package dataplane

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// gitReport reads a report-status as git's packet reader does (four hex
// digits; 0 a flush, which ends it; else 4 < n <= LARGE_PACKET_MAX 65520)
// and fails unless every line is "unpack ..." or "ng ...".
func gitReport(t *testing.T, s string, band bool) string {
	t.Helper()
	var rep string
	for i := 0; len(s) >= 4; i++ {
		n, err := strconv.ParseUint(s[:4], 16, 16)
		if err != nil || n == 0 || n < 5 || n > 65520 || int(n) > len(s) {
			if n == 0 && err == nil {
				return rep
			}
			t.Fatalf("packet %d: git reads length %q: protocol error", i, s[:4])
		}
		p := s[4:n]
		s = s[n:]
		switch {
		case band && p[0] == 1:
			rep += p[1:]
		case band:
		case !strings.HasPrefix(p, "unpack ") && !strings.HasPrefix(p, "ng "):
			t.Fatalf("packet %d is misframed: git reads %q…", i, p[:min(len(p), 16)])
		}
	}
	return rep
}

// TestGitLongRefsNotQuoted: a ref near pkt-line size (sandbox
// input) makes an "ng" line longer than a pkt-line can carry; pktLine then
// writes a 5-digit length and git misframes the rest, reading bytes of the
// ref name as pkt-lines of its own.
func TestGitLongRefsNotQuoted(t *testing.T) {
	for _, sb := range []string{"", "\x00side-band-64k"} {
		t.Run(strconv.Quote(sb), func(t *testing.T) {
			body := pktLine("a b refs/heads/"+strings.Repeat("0", 65500)+sb+"\n") + "0000"
			if _, ok := parseGitPush(gitPushRequest(body), []byte(body)); ok {
				t.Fatal("a 65 kB ref name was taken for a push whose answer quotes it")
			}
			g := &gitPush{refs: []string{"refs/heads/" + strings.Repeat("0", maxGitRefLen-11)}, sideband: sb != ""}
			w := httptest.NewRecorder()
			writeGitRefusal(w, Refusal{Status: 403, Reason: policy.ReasonApprovalPending, Message: strings.Repeat("m", 4096), ApprovalID: "ap_1"}, g)
			rep := w.Body.String()
			if g.sideband {
				rep = gitReport(t, rep, true)
			}
			gitReport(t, rep, false)
		})
	}
}

const gitSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/git", "version": "1.0.0"},
  "tools": [{"name": "git", "operations": [
    {"name": "push", "method": "POST", "path": "/repo.git/git-receive-pack", "hosts": ["api.example.com"], "approval": "required"}
  ]}]
}`

// TestGitRefusalAudited: the audit's status is "the status
// the client received"; a git-rendered refusal is received as 200 but
// audited as the envelope's 4xx/5xx. And refusals that are no approval
// outcome (audit_unavailable after an approval, here) are rendered as git
// too, a 503 sent as 200.
func TestGitRefusalAudited(t *testing.T) {
	for _, tc := range []struct {
		outcome ApprovalOutcome
		failing bool
		reason  string
	}{{ApprovalPending, false, "approval_pending"}, {ApprovalApproved, true, "audit_unavailable"}} {
		t.Run(tc.reason, func(t *testing.T) {
			rec := &listRecorder{failing: tc.failing}
			e := newEnv(t, func(p *Proxy) {
				spec, err := policy.ParseSpec("git.json", []byte(gitSpec))
				if err != nil {
					t.Fatal(err)
				}
				pol, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "g", Origin: "git.json"}}, nil)
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				p.Policy.Store(pol)
				p.Approvals, p.Recorder = &scriptedApprovals{outcome: tc.outcome}, rec
			})
			c := e.client(t, url.UserPassword("s1", e.token))
			body := pktLine(zeroOID+" 1111111111111111111111111111111111111111 refs/heads/main\x00report-status\n") + "0000PACK"
			req, _ := http.NewRequest("POST", "https://api.example.com/repo.git/git-receive-pack", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				rec.mu.Lock()
				n := len(rec.completed)
				rec.mu.Unlock()
				if n > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			got := rec.completed[0]
			if wantGit := tc.reason == "approval_pending"; strings.Contains(string(out), "ng refs/heads/main") != wantGit || (resp.StatusCode == 200) != wantGit {
				t.Errorf("client got %d %q (in git's terms: %v)", resp.StatusCode, out, wantGit)
			}
			if got.Reason != tc.reason {
				t.Fatalf("reason %s", got.Reason)
			}
			if got.Status != resp.StatusCode {
				t.Errorf("audit says status %d, the client received %d", got.Status, resp.StatusCode)
			}
		})
	}
}
