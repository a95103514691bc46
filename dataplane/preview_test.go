package dataplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// sendOp is an approval-gated POST that declares the inputs to and subject
// and takes an oauth2 credential in Authorization, compiled as installed.
func sendOp(t testing.TB) policy.Decision {
	t.Helper()
	return compiledDecision(t, `{"name": "send", "method": "POST", "path": "/v1/send", "hosts": ["mail.example"], "approval": "required",
	  "credential": "oauth2", "inputs": [{"name": "to"}, {"name": "subject"}],
	  "audit": [{"name": "to", "source": "body.to", "redact": "hash"}]}`)
}

// compiledDecision is the approval-gated decision of the operation op (its
// spec JSON) of tool mail of connector local://t/mail, compiled.
func compiledDecision(t testing.TB, op string) policy.Decision {
	t.Helper()
	spec, err := policy.ParseSpec("mail.json", []byte(`{"schema_version": "aileron.connector.v1",
	  "connector": {"fqn": "local://t/mail", "version": "1.0.0"}, "tools": [{"name": "mail", "operations": [`+op+`]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: spec}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	o := pol.Operations()[0]
	return policy.Decision{Verdict: policy.AllowAfterApproval, Op: o}
}

func previewOf(t *testing.T, ctype, encoding, query, body string) (Preview, error) {
	t.Helper()
	r, _ := http.NewRequest("POST", "https://mail.example/v1/send", strings.NewReader(body))
	r.Header.Set("Content-Type", ctype)
	if encoding != "" {
		r.Header.Set("Content-Encoding", encoding)
	}
	r.Header.Set("Authorization", "Bearer agent-made-this-up")
	r.Header.Set("Proxy-Authorization", "Basic c2Vzc2lvbg==")
	r.Header.Set("X-Trace", "t-1")
	d := sendOp(t)
	hdr := forwardedHeaders(r.Header, d.Op)
	return previewRequest(r, policy.Authority{Host: "mail.example", Port: 443}, target{path: "/v1/send", query: query}, d, hdr, []byte(body))
}

func TestPreviewShowsTheWholeRequest(t *testing.T) {
	pv, err := previewOf(t, "application/json", "", "cc=eve%40x&to=b", `{"to":"bob@example.com","bcc":"eve@example.com","subject":"hi"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pv.Undeclared(), ", "); got != "query cc, body bcc" {
		t.Errorf("undeclared %q, want cc and bcc (the argument check takes a query \"to\" as the input to)", got)
	}
	for _, f := range pv.Fields {
		if f.Name == "to" && f.Source == "body" && f.Value != `"bob@example.com"` {
			t.Errorf("body to = %q: the spec's redact rule must not hide it from the approver", f.Value)
		}
	}
	if pv.Body == nil || pv.Body.Kind != BodyJSON || !strings.Contains(pv.Body.Text, "\n  \"bcc\": \"eve@example.com\",\n") {
		t.Errorf("body %+v: want pretty-printed JSON", pv.Body)
	}
	if !strings.HasPrefix(pv.Credential, "oauth2, which the proxy adds where the connector's binding puts it (the spec says: header Authorization)") {
		t.Errorf("credential note %q", pv.Credential)
	}
	var names []string
	for _, h := range pv.Headers {
		names = append(names, h.Name)
	}
	// The client's Authorization is shown and bound: a binding may put the
	// credential elsewhere, and then it is forwarded as sent.
	if got := strings.Join(names, " "); got != "Authorization Content-Type X-Trace" {
		t.Errorf("forwarded headers %q: want every header the client sent but Proxy-Authorization", got)
	}
	raw := pv.RawRequest()
	for _, want := range []string{"POST /v1/send?cc=eve%40x&to=b HTTP/1.1\nHost: mail.example\n", "X-Trace: t-1\n",
		"Authorization: Bearer agent-made-this-up\n", "(credential: oauth2, which the proxy adds", `"bcc":"eve@example.com"`} {
		if !strings.Contains(raw, want) {
			t.Errorf("raw request lacks %q:\n%s", want, raw)
		}
	}
}

func TestPreviewRefusesWhatAHumanCannotJudge(t *testing.T) {
	for _, tc := range []struct {
		name, ctype, encoding, body string
		reason                      policy.Reason
	}{
		{"gzip", "application/json", "gzip", "\x1f\x8b\x08\x00", policy.ReasonEncodedBody},
		{"identity then gzip", "application/json", "identity, gzip", "x", policy.ReasonEncodedBody},
		{"case-colliding keys", "application/json", "", `{"to":"a@x","TO":"b@x"}`, policy.ReasonAmbiguousBody},
		{"repeated key", "application/json", "", `{"to":"a@x","to":"b@x"}`, policy.ReasonAmbiguousBody},
		{"escaped key", "application/json", "", `{"to":"a@x","\u0074o":"b@x"}`, policy.ReasonAmbiguousBody},
		{"kelvin sign", "application/json", "", `{"k":1,"\u212a":2}`, policy.ReasonAmbiguousBody},
		{"nested", "application/json", "", `{"m":[{"a":1},{"b":1,"B":2}]}`, policy.ReasonAmbiguousBody},
		{"JSON under another type", "text/plain", "", ` {"to":"a","To":"b"}`, policy.ReasonAmbiguousBody},
		{"JSON after a BOM", "application/json", "", "\xef\xbb\xbf{\"to\":\"a\",\"TO\":\"b\"}", policy.ReasonAmbiguousBody},
		{"dotless i", "application/json", "", `{"fıle":1,"file":2}`, policy.ReasonAmbiguousBody},
		{"too deep", "application/json", "", strings.Repeat("[", 65) + strings.Repeat("]", 65), policy.ReasonAmbiguousBody},
		{"JSON with trailing bytes", "application/json", "", `{"to":"a"}x`, policy.ReasonAmbiguousBody},
		{"JSON-looking text with trailing bytes", "text/plain", "", `{"to":"alice","TO":"eve"}x`, policy.ReasonAmbiguousBody},
		{"labelled JSON, not JSON", "application/json", "", `to=a`, policy.ReasonAmbiguousBody},
		{"form that looks like JSON", "application/x-www-form-urlencoded", "", `{"to":"alice","memo":"&to=eve&x="}`, policy.ReasonAmbiguousBody},
		{"form with a semicolon", "application/x-www-form-urlencoded", "", `to=alice;bcc=eve`, policy.ReasonAmbiguousBody},
		{"form not UTF-8", "application/x-www-form-urlencoded", "", "to=alice&bcc=eve&z=\xff", policy.ReasonAmbiguousBody},
		{"_method in a form", "application/x-www-form-urlencoded", "", `to=alice&_method=DELETE`, policy.ReasonMethodOverride},
		{"_method in JSON", "application/json", "", `{"to":"alice","_method":"DELETE"}`, policy.ReasonMethodOverride},
		{"too deep in objects", "application/json", "", strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65), policy.ReasonAmbiguousBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := previewOf(t, tc.ctype, tc.encoding, "", tc.body)
			var de *DenyError
			if !errors.As(err, &de) || de.Reason != tc.reason {
				t.Fatalf("err = %v, want %s", err, tc.reason)
			}
		})
	}
	if _, err := previewOf(t, "application/json", "", "a;b=1", `{"to":"a"}`); err == nil {
		t.Errorf("a held query with ';' (a separator to some servers) was accepted")
	}
	if _, err := previewOf(t, "application/json", "identity", "", `{"to":"a","subject":"b","nested":{"to":"c"}}`); err != nil {
		t.Errorf("distinct keys (the same name in another object is fine) refused: %v", err)
	}
}

func TestPreviewBodyKinds(t *testing.T) {
	for _, tc := range []struct {
		name, ctype, body, kind, show string
	}{
		{"form", "application/x-www-form-urlencoded", "to=bob%40x&bcc=eve", BodyForm, "to=bob%40x&bcc=eve"},
		{"text", "text/plain", "line one\r\nline\x1b[2J two", BodyText, "line one\\r\nline\\x1b[2J two"},
		{"binary", "application/octet-stream", "\xff\xfe\x00\x01", BodyBinary, "00000000  ff fe 00 01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv, err := previewOf(t, tc.ctype, "", "", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if pv.Body.Kind != tc.kind || string(pv.Body.Raw) != tc.body {
				t.Fatalf("body %+v, want kind %s and the raw bytes", pv.Body, tc.kind)
			}
			if got, more := pv.Body.Show(0); !strings.HasPrefix(got, tc.show) || more != 0 {
				t.Errorf("Show = %q (%d more), want prefix %q", got, more, tc.show)
			}
		})
	}
	pv, _ := previewOf(t, "application/x-www-form-urlencoded", "", "", "to=bob%40x&bcc=eve")
	if got := strings.Join(pv.Undeclared(), ","); got != "body bcc" {
		t.Errorf("form undeclared %q, want body bcc", got)
	}
}

func TestShowSaysWhatItLeftOut(t *testing.T) {
	b := &PreviewBody{Kind: BodyText, Raw: []byte(strings.Repeat("é", 100))} // 200 bytes
	got, more := b.Show(51)
	if len(got) != 50 || more != 150 {
		t.Errorf("Show(51) = %d bytes, %d more; want 50 (a whole rune) and 150", len(got), more)
	}
}

func TestPrettyJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"b":[1,2],"c":{},"d":[]}`, "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2\n  ],\n  \"c\": {},\n  \"d\": []\n}"},
		{` { "s" : "x,{[\"]}:" } `, "{\n  \"s\": \"x,{[\\\"]}:\"\n}"},
		{`"\u001b"`, `"\u001b"`},
	} {
		if got := prettyJSON([]byte(tc.in), 1<<20); got != tc.want {
			t.Errorf("prettyJSON(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// 64 levels of one-element arrays, with a limit: bounded, never quadratic.
	deep := strings.Repeat("[", 64) + strings.Repeat("1,", 5000) + "1" + strings.Repeat("]", 64)
	if got := prettyJSON([]byte(deep), 4*len(deep)); got != "" {
		t.Errorf("prettyJSON of a deep body returned %d bytes past its limit %d", len(got), 4*len(deep))
	}
	pv, err := previewOf(t, "application/json", "", "", deep)
	if err != nil || pv.Body.Kind != BodyJSON || pv.Body.Text != "" {
		t.Errorf("deep body: %v, kind %s, %d bytes of text; want JSON shown as sent", err, pv.Body.Kind, len(pv.Body.Text))
	}
}

// FuzzPreviewBody: any body and Content-Type is read without panicking;
// a JSON reading's pretty text holds the same JSON as the body.
func FuzzPreviewBody(f *testing.F) {
	for _, s := range []string{`{"to":"a","TO":"b"}`, "\xef\xbb\xbf[1,{\"a\":[]}]", "a=1&b=%zz", "\xff\x00", `{"s":"x,{[\"]}:"}`,
		strings.Repeat("[", 70) + strings.Repeat("]", 70)} {
		f.Add([]byte(s), "application/json")
	}
	f.Add([]byte("to=b&bcc=c"), "application/x-www-form-urlencoded")
	f.Fuzz(func(t *testing.T, body []byte, ctype string) {
		b, _, err := readBody(ctype, body, map[string]bool{"to": true})
		if err != nil || b.Kind != BodyJSON || b.Text == "" {
			return
		}
		var want, got bytes.Buffer
		doc := bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
		if json.Compact(&want, doc) != nil || json.Compact(&got, []byte(b.Text)) != nil || !bytes.Equal(want.Bytes(), got.Bytes()) {
			t.Fatalf("pretty text of %q is not the same JSON:\n%s", body, b.Text)
		}
		_, _ = b.Show(100)
	})
}

// TestPreviewMarksFollowTheInputSchema: a query or body field is declared
// when the effective input schema's properties name it and its input, if it
// says where it travels, puts it there; a schema without properties
// declares nothing.
func TestPreviewMarksFollowTheInputSchema(t *testing.T) {
	for _, tc := range []struct {
		name, args, query, body, want string
	}{
		{"input_schema", `"input_schema": {"type":"object","properties":{"to":{"type":"string"},"subject":{},"n":{"type":"integer"}}}`,
			"n=1&cc=x", `{"to":"a","subject":"s","bcc":"b"}`, "query cc, body bcc"},
		{"nested names are not top-level", `"input_schema": {"type":"object","properties":{"msg":{"type":"object","properties":{"bcc":{}}}}}`,
			"", `{"msg":{"bcc":"b"},"bcc":"b"}`, "body bcc"},
		{"no properties", `"input_schema": {"type":"object"}`, "to=a", `{"to":"a"}`, "query to, body to"},
		{"inputs where they travel", `"inputs": [{"name":"to"},{"name":"q","in":"query"},{"name":"b","in":"body"}]`,
			"q=1&b=2&to=x", `{"q":1,"b":2,"to":"y"}`, "query b, body q"},
		{"no inputs", `"summary": "none"`, "to=a", `{"to":"a"}`, "query to, body to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "https://mail.example/v1/send", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			d := compiledDecision(t, `{"name": "send", "method": "POST", "path": "/v1/send", "hosts": ["mail.example"], `+tc.args+`}`)
			pv, err := previewRequest(r, policy.Authority{Host: "mail.example", Port: 443}, target{path: "/v1/send", query: tc.query}, d,
				forwardedHeaders(r.Header, d.Op), []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(pv.Undeclared(), ", "); got != tc.want {
				t.Errorf("undeclared %q, want %q", got, tc.want)
			}
		})
	}
}
