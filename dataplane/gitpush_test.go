package dataplane

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

func gitPushRequest(body string) *http.Request {
	r := httptest.NewRequest("POST", "https://git.example/repo.git/git-receive-pack", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	return r
}

const zeroOID = "0000000000000000000000000000000000000000"

// TestGitPushRefusal: a held push is answered with git's report-status,
// each ref rejected naming the reason and the approval, and the message
// on the side band when git asked for one.
func TestGitPushRefusal(t *testing.T) {
	body := pktLine(zeroOID+" 1111111111111111111111111111111111111111 refs/heads/main\x00report-status side-band-64k agent=git/2.39\n") +
		pktLine(zeroOID+" 2222222222222222222222222222222222222222 refs/tags/v1\n") + "0000PACK…"
	g, ok := parseGitPush(gitPushRequest(body), []byte(body))
	if !ok || !g.sideband || strings.Join(g.refs, " ") != "refs/heads/main refs/tags/v1" {
		t.Fatalf("parsed %+v %v", g, ok)
	}
	w := httptest.NewRecorder()
	writeGitRefusal(w, Refusal{Status: 403, Class: ClassCapabilityDenied, Reason: policy.ReasonApprovalPending,
		Message: "POST /repo.git/git-receive-pack waits for a human's approval (ap_1)", ApprovalID: "ap_1"}, g)
	out := w.Body.String()
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/x-git-receive-pack-result" {
		t.Fatalf("%d %s", w.Code, w.Header())
	}
	for _, want := range []string{"\x02Aileron: POST /repo.git/git-receive-pack waits", "approve it (aileron approvals approve ap_1",
		"ng refs/heads/main approval_pending ap_1\n", "ng refs/tags/v1 approval_pending ap_1\n", "unpack ok\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the answer lacks %q:\n%q", want, out)
		}
	}
	if !strings.HasSuffix(out, "0000") {
		t.Errorf("no final flush: %q", out)
	}
}

// TestGitPushNotAPush: anything else keeps the JSON envelope.
func TestGitPushNotAPush(t *testing.T) {
	for name, r := range map[string]*http.Request{
		"another path":    httptest.NewRequest("POST", "https://git.example/repo.git/info/refs", nil),
		"bad pkt-line":    gitPushRequest("zzzz"),
		"no ref":          gitPushRequest("0000"),
		"not a ref":       gitPushRequest(pktLine(zeroOID + " " + zeroOID + " HEAD\n")),
		"length too long": gitPushRequest("ffff" + zeroOID),
	} {
		body := []byte("zzzz")
		if r.Body != nil && r.URL.Path != "/repo.git/info/refs" {
			b := make([]byte, 200)
			n, _ := r.Body.Read(b)
			body = b[:n]
		}
		if _, ok := parseGitPush(r, body); ok {
			t.Errorf("%s: taken for a push", name)
		}
	}
}

func FuzzParseGitPush(f *testing.F) {
	f.Add([]byte(pktLine(zeroOID+" "+zeroOID+" refs/heads/main\x00side-band-64k\n") + "0000"))
	f.Add([]byte("0004"))
	f.Add([]byte("0000"))
	f.Fuzz(func(t *testing.T, body []byte) {
		g, ok := parseGitPush(gitPushRequest(""), body)
		if !ok {
			return
		}
		if len(g.refs) == 0 || len(g.refs) > maxGitRefs {
			t.Fatalf("refs %v", g.refs)
		}
		for _, r := range g.refs {
			if !strings.HasPrefix(r, "refs/") || strings.ContainsAny(r, " \n\x00") {
				t.Fatalf("ref %q", r)
			}
		}
		writeGitRefusal(httptest.NewRecorder(), Refusal{Status: 403, Reason: policy.ReasonApprovalPending, Message: "m"}, g)
	})
}

// TestGitMessageIsPlainText: what git prints to the terminal carries no
// escape sequence, control or bidirectional character from the request.
func TestGitMessageIsPlainText(t *testing.T) {
	for _, line := range gitMessage(Refusal{Message: "POST /a\x1b[2J\u202egnp.exe\r\nremote: forged waits", ApprovalID: "ap_1"}) {
		for _, c := range []byte(line) {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("byte %#x in %q", c, line)
			}
		}
	}
}
