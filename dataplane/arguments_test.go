package dataplane

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// withInputSchema compiles testSpec into e's proxy with schema as the
// input_schema of every operation.
func (e *env) withInputSchema(t *testing.T, schema string) {
	t.Helper()
	s, err := policy.ParseSpec("test.json", []byte(testSpec))
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Tools[0].Operations {
		s.Tools[0].Operations[i].InputSchema = json.RawMessage(schema)
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: s, Hash: "h", Origin: "test.json"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	e.proxy.Policy.Store(pol)
}

// TestMalformedQueryIsRefusedNotSkipped: the query of an operation with an
// input schema is parsed strictly; one that does not parse is refused
// invalid_arguments, never forwarded unchecked, and the message quotes
// nothing of it. An operation without a schema forwards it as ever.
func TestMalformedQueryIsRefusedNotSkipped(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client(t, url.UserPassword("s1", e.token))
	get := func(rawQuery string) *http.Response {
		t.Helper()
		resp, err := c.Get("https://api.example.com/v1/items/7?" + rawQuery)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := get("a=1;secret=xyz"); resp.StatusCode != 200 || e.hits.Load() != 1 {
		t.Fatalf("without a schema: %d, hits %d; want it forwarded", resp.StatusCode, e.hits.Load())
	}
	e.withInputSchema(t, `{"type": "object"}`)
	for _, q := range []string{"a=1;secret=xyz", "secret=%zz", "a=1&b=%"} {
		resp := get(q)
		got := readEnvelope(t, resp.Body)
		if resp.StatusCode != 400 || got.Reason != policy.ReasonInvalidArguments || got.Class != ClassBadRequest {
			t.Errorf("?%s: %d %+v, want 400 bad_request invalid_arguments", q, resp.StatusCode, got)
		}
		if strings.Contains(got.Message, "secret") || strings.Contains(got.Message, "zz") || !strings.Contains(got.Message, "query") {
			t.Errorf("?%s: the message quotes the query or does not name it: %s", q, got.Message)
		}
		if ps := resp.Header.Get("Proxy-Status"); !strings.Contains(ps, "error=http_request_error") || !strings.Contains(ps, "invalid_arguments") {
			t.Errorf("?%s: Proxy-Status %q", q, ps)
		}
		if resp.Header.Get(HeaderAuditID) == "" {
			t.Errorf("?%s: no audit id", q)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	if e.hits.Load() != 1 {
		t.Fatalf("a malformed query reached the upstream: hits %d", e.hits.Load())
	}
	if resp := get("a=1&b=two%20words"); resp.StatusCode != 200 || e.hits.Load() != 2 {
		t.Fatalf("a well-formed query: %d, hits %d", resp.StatusCode, e.hits.Load())
	}
}

// TestCheckedBodyWithTwoContentTypesIsRefused: a checked body labelled
// twice is refused before the upstream; the check would read it by one
// label and an upstream that takes the last header by the other (here a
// JSON body whose max_tokens fits, read as a form where it does not).
func TestCheckedBodyWithTwoContentTypesIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.usePolicy(t, argSpec)
	h1 := e.client(t, url.UserPassword("s1", e.token))
	h2 := e.h2Client(t)
	body := `{"max_tokens": 1, "z": "&max_tokens=99999&"}`
	for _, tc := range []struct {
		rt    func(*http.Request) (*http.Response, error)
		types []string
	}{
		{h1.Do, []string{"application/json", "application/x-www-form-urlencoded"}},
		{h1.Do, []string{"application/json", "application/json"}},
		{h2.RoundTrip, []string{"application/json", "application/x-www-form-urlencoded"}},
	} {
		types := tc.types
		req, err := http.NewRequest("POST", "https://api.example.com/v1/complete", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header["Content-Type"] = types
		resp, err := tc.rt(req)
		if err != nil {
			t.Fatal(err)
		}
		got := readEnvelope(t, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || got.Reason != policy.ReasonInvalidArguments || !strings.HasSuffix(got.Message, "(content_type)") {
			t.Errorf("Content-Type %q: %d %+v, want 400 invalid_arguments (content_type)", types, resp.StatusCode, got)
		}
	}
	if e.hits.Load() != 0 {
		t.Fatalf("a body labelled twice reached the upstream: hits %d", e.hits.Load())
	}
}
