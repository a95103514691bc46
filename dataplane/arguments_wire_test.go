package dataplane

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// argSpec declares arguments on api.example.com: a path pattern and a
// query maximum, a JSON body ("mail only to @example.com", "max_tokens at
// most 4096") behind approval, a form body, and an operation without any.
const argSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/args", "version": "1.0.0"},
  "tools": [{"name": "args", "operations": [
    {"name": "items.get", "method": "GET", "path": "/v1/items/{id}", "hosts": ["api.example.com"],
     "inputs": [{"name": "id", "pattern": "^[0-9]+$"}, {"name": "limit", "type": "integer", "maximum": 100}]},
    {"name": "mail.send", "method": "POST", "path": "/v1/mail", "hosts": ["api.example.com"], "approval": "required",
     "inputs": [{"name": "to", "required": true, "pattern": "^[^@]+@example\\.com$"}]},
    {"name": "complete", "method": "POST", "path": "/v1/complete", "hosts": ["api.example.com"],
     "inputs": [{"name": "model", "enum": ["small", "large"]}, {"name": "max_tokens", "type": "integer", "maximum": 4096}]},
    {"name": "form", "method": "PUT", "path": "/v1/form", "hosts": ["api.example.com"],
     "inputs": [{"name": "color", "enum": ["red", "blue"]}]},
    {"name": "upload", "method": "POST", "path": "/v1/upload", "hosts": ["api.example.com"]}
  ]}]
}`

// argCase is one request to argSpec's operations and what it gets.
type argCase struct {
	name, method, path, ctype, body string
	chunked                         bool // no Content-Length: chunked on HTTP/1.1, DATA frames alone on HTTP/2
	status                          int  // 200: forwarded
	reason                          policy.Reason
	field, rule                     string // named in an invalid_arguments message
	secret                          string // a value the message must not quote
}

func argCases() []argCase {
	big := `{"max_tokens": 1, "pad": "` + strings.Repeat("x", 300) + `"}`
	return []argCase{
		{name: "path fits", method: "GET", path: "/v1/items/42", status: 200},
		{name: "path breaks its pattern", method: "GET", path: "/v1/items/abc", status: 400, reason: policy.ReasonInvalidArguments, field: "path.id", rule: "pattern", secret: "abc"},
		{name: "a body on a GET whose schema describes none", method: "GET", path: "/v1/items/42", ctype: "application/json", body: `{"limit": 5000}`, status: 400,
			reason: policy.ReasonInvalidArguments, field: "body", rule: "body", secret: "5000"},
		{name: "a chunked body on a GET whose schema describes none", method: "GET", path: "/v1/items/42", ctype: "application/json", body: `{"limit": 5000}`, chunked: true, status: 400,
			reason: policy.ReasonInvalidArguments, field: "body", rule: "body", secret: "5000"},
		{name: "an empty body of unknown length on a GET", method: "GET", path: "/v1/items/42", chunked: true, status: 200},
		{name: "query fits", method: "GET", path: "/v1/items/42?limit=100", status: 200},
		{name: "query over its maximum", method: "GET", path: "/v1/items/42?limit=5000", status: 400, reason: policy.ReasonInvalidArguments, field: "query.limit", rule: "maximum", secret: "5000"},
		{name: "query of the wrong type", method: "GET", path: "/v1/items/42?limit=lots", status: 400, reason: policy.ReasonInvalidArguments, field: "query.limit", rule: "type", secret: "lots"},
		{name: "JSON body fits", method: "POST", path: "/v1/complete", ctype: "application/json", body: `{"model": "small", "max_tokens": 4096}`, status: 200},
		{name: "JSON body fits, chunked", method: "POST", path: "/v1/complete", ctype: "application/json", body: `{"max_tokens": 10}`, chunked: true, status: 200},
		{name: "JSON max_tokens over 4096", method: "POST", path: "/v1/complete", ctype: "application/json", body: `{"max_tokens": 4097}`, status: 400,
			reason: policy.ReasonInvalidArguments, field: "body.max_tokens", rule: "maximum", secret: "4097"},
		{name: "JSON model not in the list", method: "POST", path: "/v1/complete", ctype: "application/json", body: `{"model": "huge-secret-model"}`, chunked: true, status: 400,
			reason: policy.ReasonInvalidArguments, field: "body.model", rule: "enum", secret: "huge-secret-model"},
		{name: "JSON body that is not JSON", method: "POST", path: "/v1/complete", ctype: "application/json", body: `{"max_tokens": `, status: 400,
			reason: policy.ReasonInvalidArguments, field: "body", rule: "json"},
		{name: "mail to example.com, approved", method: "POST", path: "/v1/mail", ctype: "application/json", body: `{"to": "ann@example.com"}`, status: 200},
		{name: "mail outside example.com, before approval", method: "POST", path: "/v1/mail", ctype: "application/json", body: `{"to": "boss@evil.example"}`, status: 400,
			reason: policy.ReasonInvalidArguments, field: "body.to", rule: "pattern", secret: "evil"},
		{name: "mail without a recipient", method: "POST", path: "/v1/mail", ctype: "application/json", body: `{}`, status: 400,
			reason: policy.ReasonInvalidArguments, field: "body.to", rule: "required"},
		{name: "mail with no body at all", method: "POST", path: "/v1/mail", status: 400,
			reason: policy.ReasonInvalidArguments, field: "body.to", rule: "required"},
		{name: "form body fits", method: "PUT", path: "/v1/form", ctype: "application/x-www-form-urlencoded", body: "color=red", status: 200},
		{name: "form body off its enum", method: "PUT", path: "/v1/form", ctype: "application/x-www-form-urlencoded", body: "color=mauve", status: 400,
			reason: policy.ReasonInvalidArguments, field: "body.color", rule: "enum", secret: "mauve"},
		{name: "body over the bound by Content-Length", method: "POST", path: "/v1/complete", ctype: "application/json", body: big, status: 413, reason: policy.ReasonBodyTooLarge},
		{name: "body over the bound, no Content-Length", method: "POST", path: "/v1/complete", ctype: "application/json", body: big, chunked: true, status: 413, reason: policy.ReasonBodyTooLarge},
		{name: "encoded checked body", method: "PUT", path: "/v1/form", ctype: "application/x-www-form-urlencoded", body: "color=red", status: 403, reason: policy.ReasonEncodedBody},
		{name: "an unchecked body streams, whatever its size", method: "POST", path: "/v1/upload", ctype: "application/octet-stream", body: strings.Repeat("y", 4096), chunked: true, status: 200},
	}
}

// TestArgumentsCheckedOnTheWire sends each case over HTTP/1.1 and HTTP/2:
// a misfit is refused before the approval gate (no approval is asked for)
// and never reaches the upstream; a fit is forwarded with exactly the
// bytes checked.
func TestArgumentsCheckedOnTheWire(t *testing.T) {
	ap := &scriptedApprovals{outcome: ApprovalApproved}
	e := newEnv(t, func(p *Proxy) { p.Approvals, p.MaxCheckedBody = ap, 256 })
	e.usePolicy(t, argSpec)
	h1 := e.client(t, url.UserPassword("s1", e.token))
	h2 := e.h2Client(t)
	for proto, rt := range map[string]func(*http.Request) (*http.Response, error){"h1": h1.Do, "h2": h2.RoundTrip} {
		for _, tc := range argCases() {
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				hits := e.hits.Load()
				resp, err := rt(argRequest(t, tc))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != tc.status {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
				}
				if tc.status == 200 {
					_, _ = io.Copy(io.Discard, resp.Body)
					if got := resp.Header.Get("X-Echo-Body"); got != tc.body {
						t.Errorf("the upstream got body %q, want the %q sent", got, tc.body)
					}
					// A checked body goes out with its length; an unchecked
					// one streams as it came.
					want := strconv.Itoa(len(tc.body))
					if tc.path == "/v1/upload" {
						want = "-1"
					}
					if got := resp.Header.Get("X-Echo-Length"); got != want {
						t.Errorf("the upstream got Content-Length %s, want %s", got, want)
					}
					return
				}
				checkArgRefusal(t, resp, tc)
				if e.hits.Load() != hits {
					t.Error("the refused request reached the upstream")
				}
			})
		}
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if len(ap.asked) != 2 { // the mail that fits, over each protocol
		t.Errorf("the approval gate was asked %d times, want 2: never for a misfit", len(ap.asked))
	}
	for _, req := range ap.asked {
		if req.Preview.BodyBytes != len(`{"to": "ann@example.com"}`) || req.Preview.Body == nil || !strings.Contains(req.Preview.Body.Text, "ann@example.com") {
			t.Errorf("the approval previews %+v, not the checked body", req.Preview.Body)
		}
	}
}

func argRequest(t *testing.T, tc argCase) *http.Request {
	t.Helper()
	var body io.Reader
	if tc.body != "" {
		body = strings.NewReader(tc.body)
	}
	req, err := http.NewRequest(tc.method, "https://api.example.com"+tc.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if tc.ctype != "" {
		req.Header.Set("Content-Type", tc.ctype)
	}
	if tc.reason == policy.ReasonEncodedBody {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if tc.chunked {
		req.ContentLength = -1
		req.Body = io.NopCloser(strings.NewReader(tc.body)) // a reader of unknown length
	}
	return req
}

func checkArgRefusal(t *testing.T, resp *http.Response, tc argCase) {
	t.Helper()
	got := readEnvelope(t, resp.Body)
	if got.Reason != tc.reason || got.AuditID == "" {
		t.Fatalf("refusal %+v, want reason %s with an audit id", got, tc.reason)
	}
	if tc.field != "" && (!strings.Contains(got.Message, tc.field) || !strings.HasSuffix(got.Message, "("+tc.rule+")")) {
		t.Errorf("message %q does not name the field %s and the rule %s", got.Message, tc.field, tc.rule)
	}
	if tc.secret != "" && strings.Contains(got.Message, tc.secret) {
		t.Errorf("message %q quotes the value", got.Message)
	}
	if tc.status != 403 && (got.Class != ClassBadRequest || !strings.Contains(resp.Header.Get("Proxy-Status"), "error=http_request_error")) {
		t.Errorf("class %s, Proxy-Status %q; want bad_request, http_request_error", got.Class, resp.Header.Get("Proxy-Status"))
	}
	if tc.status == 413 && !strings.Contains(got.Message, "proxy.max_checked_body") {
		t.Errorf("message %q does not name proxy.max_checked_body", got.Message)
	}
}

// TestMisfitIsAuditedWithFieldAndRule: the refusal's audit line names the
// field and the rule (details), and no decision to forward is recorded.
func TestMisfitIsAuditedWithFieldAndRule(t *testing.T) {
	rec := &listRecorder{}
	e := newEnv(t, func(p *Proxy) { p.Recorder = rec })
	e.usePolicy(t, argSpec)
	res, err := e.proxy.Execute(context.Background(), Call{Session: &Session{ID: "s1", CA: e.sessCA}, Method: "POST",
		URL: mustURL(t, "https://api.example.com/v1/complete"), Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"max_tokens": 5000}`)})
	if err != nil || res.Refusal == nil || res.Status != 400 || e.hits.Load() != 0 {
		t.Fatalf("Execute: %v %d %+v, hits %d", err, res.Status, res.Refusal, e.hits.Load())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decided) != 0 || len(rec.completed) != 1 {
		t.Fatalf("%d decided, %d completed records; want 0 and 1", len(rec.decided), len(rec.completed))
	}
	r := rec.completed[0]
	if r.Reason != string(policy.ReasonInvalidArguments) || r.Status != 400 || r.Operation != "complete" ||
		r.Details["field"] != "body.max_tokens" || r.Details["rule"] != "maximum" || strings.Contains(r.Message, "5000") {
		t.Fatalf("the refusal's record: %+v (%s)", r.Event, r.Message)
	}
}

// TestCallForAnotherOperationIsRefusedAsSuch: a call built for one
// operation whose request matches another is refused for that, not for
// arguments the other operation's schema reads.
func TestCallForAnotherOperationIsRefusedAsSuch(t *testing.T) {
	e := newEnv(t, nil)
	pol := e.usePolicy(t, argSpec)
	form, _ := pol.Lookup("local://test/args", "args", "form")
	res, err := e.proxy.Execute(context.Background(), Call{Session: &Session{ID: "s1", CA: e.sessCA}, Operation: form, Method: "POST",
		URL: mustURL(t, "https://api.example.com/v1/complete"), Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"max_tokens": 5000}`)})
	if err != nil || res.Refusal == nil || res.Refusal.Reason != policy.ReasonNoMatchingOperation || e.hits.Load() != 0 {
		t.Fatalf("Execute: %v %d %+v, hits %d; want no_matching_operation", err, res.Status, res.Refusal, e.hits.Load())
	}
}
