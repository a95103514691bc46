package dataplane

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aileronhq/aileron/policy"
)

// TestRefusalEnvelope: one type, one writer, the same envelope and headers
// on every face.
func TestRefusalEnvelope(t *testing.T) {
	ref := Refusal{Status: http.StatusForbidden, Class: ClassCapabilityDenied, Reason: policy.ReasonApprovalPending,
		Message: "waits\r\nfor a human", AuditID: "a_1", ApprovalID: "ap_1", ReviewURL: "http://x/#ap_1",
		RetryAfter: 5 * time.Second, Outcome: "refused"}
	w := httptest.NewRecorder()
	WriteRefusal(w, ref)
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	inner, _ := body["error"].(map[string]any)
	if w.Code != 403 || body["status"] != "refused" || inner["reason"] != "approval_pending" || inner["class"] != "capability_denied" ||
		inner["audit_id"] != "a_1" || inner["approval_id"] != "ap_1" || inner["review_url"] != "http://x/#ap_1" || len(body) != 2 {
		t.Errorf("answer %d %s", w.Code, w.Body)
	}
	h := w.Header()
	if h.Get(HeaderAuditID) != "a_1" || h.Get(HeaderApprovalID) != "ap_1" || h.Get("Retry-After") != "5" ||
		h.Get(HeaderMessage) != "waits  for a human" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", h)
	}
	var back Refusal
	if err := json.Unmarshal(w.Body.Bytes(), &back); err != nil || back.Reason != ref.Reason || back.Outcome != "refused" || back.Status != 0 {
		t.Errorf("round trip %+v %v", back, err)
	}
	w = httptest.NewRecorder()
	WriteRefusal(w, Refusal{Status: http.StatusProxyAuthRequired, Class: ClassProxyAuth, Reason: policy.ReasonProxyAuth, Message: "m"})
	if w.Header().Get("Proxy-Authenticate") == "" || strings.Contains(w.Body.String(), `"status"`) {
		t.Errorf("407: %v %s", w.Header(), w.Body)
	}
}

func FuzzParseRefusal(f *testing.F) {
	f.Add(404, []byte(`{"error":{"class":"not_found","reason":"unknown_action","message":"no such action"}}`))
	f.Add(502, []byte("bad gateway"))
	f.Add(500, []byte(strings.Repeat("é", 300)))
	f.Add(400, []byte(`{"error":"flat"}`))
	f.Add(0, []byte{0xff, 0xfe})
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		r := ParseRefusal(status, body)
		if r.Status != status || r.Reason == "" && r.Message == "" {
			t.Fatalf("ParseRefusal(%d, %q) = %+v", status, body, r)
		}
		if r.Reason == policy.ReasonUnexpectedAnswer && (!utf8.ValidString(r.Message) || len(r.Message) > 400) {
			t.Fatalf("message %q: not valid UTF-8 or not bounded", r.Message)
		}
	})
}

// TestRefusalNeverAnswersSuccess: a refusal built without an error status
// (or read back from JSON, which carries none) still answers an error.
func TestRefusalNeverAnswersSuccess(t *testing.T) {
	for _, status := range []int{0, 200, 302, 600} {
		w := httptest.NewRecorder()
		WriteRefusal(w, Refusal{Status: status, Class: ClassInternal, Reason: policy.ReasonInternal, Message: "m"})
		resp := Refusal{Status: status, Class: ClassInternal, Reason: policy.ReasonInternal, Message: "m"}.Response(nil)
		if w.Code != 500 || resp.StatusCode != 500 || !strings.HasPrefix(resp.Status, "500 ") {
			t.Errorf("status %d answered %d / %s", status, w.Code, resp.Status)
		}
	}
}

// TestProxyStatus: every refusal of the proxy carries an RFC 9209
// Proxy-Status field naming the error type and, in details, the reason
// and message as a valid sf-string; the APIs' own answers do not.
func TestProxyStatus(t *testing.T) {
	for _, tc := range []struct {
		ref  Refusal
		want string
	}{
		{Refusal{Status: 403, Class: ClassCapabilityDenied, Reason: policy.ReasonHostNotAllowed, Message: "evil.example is not allowed"},
			`aileron; error=http_request_denied; details="host_not_allowed: evil.example is not allowed"`},
		{Refusal{Status: 407, Class: ClassProxyAuth, Reason: policy.ReasonProxyAuth, Message: "m"},
			`aileron; error=http_request_denied; details="proxy_auth_required: m"`},
		{Refusal{Status: 504, Class: ClassUpstreamError, Reason: policy.ReasonUpstreamTimeout, Message: "slow"},
			`aileron; error=http_response_timeout; details="upstream_timeout: slow"`},
		{Refusal{Status: 502, Class: ClassUpstreamError, Reason: policy.ReasonUpstreamTLS, Message: "bad cert"},
			`aileron; error=tls_certificate_error; details="upstream_tls_failed: bad cert"`},
		{Refusal{Status: 403, Class: ClassCapabilityDenied, Reason: policy.ReasonPrivateAddress, Message: "10.0.0.1"},
			`aileron; error=destination_ip_prohibited; details="private_address: 10.0.0.1"`},
		{Refusal{Status: 503, Class: ClassUnavailable, Reason: policy.ReasonAuditUnavailable, Message: "disk"},
			`aileron; error=proxy_internal_error; details="audit_unavailable: disk"`},
		{Refusal{Status: 400, Class: ClassBadRequest, Reason: policy.ReasonMalformedRequest, Message: "a \"quoted\" \\ path\r\nX-Evil: é"},
			`aileron; error=http_request_error; details="malformed_request: a \"quoted\" \\ path??X-Evil: ??"`},
		{Refusal{Status: 404, Class: ClassNotFound, Reason: policy.ReasonNotFound, Message: "no such session"}, ""},
	} {
		rec := httptest.NewRecorder()
		WriteRefusal(rec, tc.ref)
		if got := rec.Header().Get("Proxy-Status"); got != tc.want {
			t.Errorf("%s: Proxy-Status %q, want %q", tc.ref.Reason, got, tc.want)
		}
		if got := tc.ref.Response(nil).Header.Get("Proxy-Status"); got != tc.want {
			t.Errorf("%s: a refused CONNECT's Proxy-Status %q, want %q", tc.ref.Reason, got, tc.want)
		}
	}
	long := Refusal{Status: 403, Class: ClassCapabilityDenied, Reason: policy.ReasonHostNotAllowed, Message: strings.Repeat("x", 4096)}
	if got := long.proxyStatus(); len(got) > maxProxyStatusDetails+100 || !strings.HasSuffix(got, `..."`) {
		t.Errorf("a long message is not cut: %d bytes", len(got))
	}
}

// A budget that only the session's end frees is answered with
// X-Should-Retry: false, which the model SDKs read, instead of a
// Retry-After; one a window frees gets Retry-After and may be retried.
func TestBudgetRefusalRetryHeaders(t *testing.T) {
	for _, tc := range []struct {
		after             time.Duration
		retryAfter, retry string
	}{
		{0, "", "false"},
		{90 * time.Second, "90", ""},
	} {
		w := httptest.NewRecorder()
		WriteRefusal(w, budgetRefusal(&BudgetError{Reason: policy.ReasonBudgetExhausted, Message: "used up", RetryAfter: tc.after}))
		if got := w.Header().Get("Retry-After"); got != tc.retryAfter {
			t.Errorf("after %v: Retry-After %q; want %q", tc.after, got, tc.retryAfter)
		}
		if got := w.Header().Get("X-Should-Retry"); got != tc.retry {
			t.Errorf("after %v: X-Should-Retry %q; want %q", tc.after, got, tc.retry)
		}
	}
}
