package actions

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// opcallPolicy compiles specs into a policy.
func opcallPolicy(tb testing.TB, specs ...string) *policy.Policy {
	tb.Helper()
	var srcs []policy.Source
	for i, s := range specs {
		spec, err := policy.ParseSpec("spec.json", []byte(s))
		if err != nil {
			tb.Fatal(err)
		}
		srcs = append(srcs, policy.Source{Spec: spec, Hash: "h" + string(rune('0'+i)), Origin: "spec.json"})
	}
	pol, errs := policy.Compile(srcs, nil)
	if len(errs) > 0 {
		tb.Fatal(errs)
	}
	return pol
}

func TestOperationCall(t *testing.T) {
	pol := opcallPolicy(t, testkit.ItemsSpec)
	tests := []struct {
		name, op     string
		args         string // JSON object
		method, url  string
		body, ctype  string
		wantErr      error
		errHas       []string
		wantEscPath  string
		checkDecided bool
	}{
		{name: "slash in single segment", op: "get", args: `{"id":"a b/c"}`,
			wantErr: state.ErrInvalidArgument, errHas: []string{"id", "encoded '/'"}},
		{name: "get", op: "get", args: `{"id":"a b","expand":["x","y"],"limit":10,"on":true,"skip":null,"big":12345678901234567890}`,
			method: "GET", url: "https://api.example.com:443/v1/items/a%20b?big=12345678901234567890&expand=x&expand=y&limit=10&on=true",
			wantEscPath: "/v1/items/a%20b", checkDecided: true},
		{name: "first host with port", op: "list", args: `{"q":"a&b=c"}`,
			method: "GET", url: "https://api.example.com:8443/v1/items?q=a%26b%3Dc", checkDecided: true},
		{name: "no args", op: "list", args: `{}`, method: "GET", url: "https://api.example.com:8443/v1/items"},
		{name: "post body without path arg", op: "create", args: `{"project":"p1","title":"<t>","labels":["a"],"meta":{"k":1}}`,
			method: "POST", url: "https://api.example.com:443/v1/projects/p1/items",
			body: `{"labels":["a"],"meta":{"k":1},"title":"<t>"}`, ctype: "application/json", checkDecided: true},
		{name: "post empty body", op: "create", args: `{"project":7}`, method: "POST",
			url: "https://api.example.com:443/v1/projects/7/items", body: `{}`, ctype: "application/json"},
		{name: "patch", op: "update", args: `{"id":"i1","title":"x"}`, method: "PATCH",
			url: "https://api.example.com:443/v1/items/i1", body: `{"title":"x"}`, ctype: "application/json"},
		{name: "put", op: "replace", args: `{"id":"i1","v":null}`, method: "PUT",
			url: "https://api.example.com:443/v1/items/i1/body", body: `{"v":null}`, ctype: "application/json"},
		{name: "delete query", op: "delete", args: `{"id":"i1","force":true}`, method: "DELETE",
			url: "https://api.example.com:443/v1/items/i1?force=true", checkDecided: true},
		{name: "head", op: "head", args: `{"id":1.5}`, method: "HEAD", url: "https://api.example.com:443/v1/items/1.5/meta"},
		{name: "multi segment", op: "file", args: `{"path":"dir/sub dir/f.txt"}`, method: "GET",
			url: "https://api.example.com:443/v1/files/dir/sub%20dir/f.txt", checkDecided: true},
		{name: "multi segment dot-dot", op: "file", args: `{"path":"../etc"}`, wantErr: state.ErrInvalidArgument, errHas: []string{"path", "dot segment"}},
		{name: "dot", op: "get", args: `{"id":"."}`, wantErr: state.ErrInvalidArgument, errHas: []string{"id"}},
		{name: "missing path arg", op: "get", args: `{"expand":"x"}`, wantErr: state.ErrInvalidArgument, errHas: []string{`missing argument "id"`, "/v1/items/{id}"}},
		{name: "empty path arg", op: "get", args: `{"id":""}`, wantErr: state.ErrInvalidArgument, errHas: []string{`"id" is empty`}},
		{name: "object path arg", op: "get", args: `{"id":{"a":1}}`, wantErr: state.ErrInvalidArgument, errHas: []string{`"id"`, "an object"}},
		{name: "null path arg", op: "get", args: `{"id":null}`, wantErr: state.ErrInvalidArgument, errHas: []string{`"id"`, "null"}},
		{name: "object in query", op: "get", args: `{"id":"1","f":{"a":1}}`, wantErr: state.ErrInvalidArgument, errHas: []string{`"f"`, "an object"}},
		{name: "nested array in query", op: "get", args: `{"id":"1","f":[[1]]}`, wantErr: state.ErrInvalidArgument, errHas: []string{`"f"[0]`, "an array"}},
		{name: "unknown op", op: "nope", args: `{}`, wantErr: state.ErrNotFound, errHas: []string{`"nope"`, "create, delete, doc, file, get, head, list, replace, update"}},
		{name: "op without route", op: "doc", args: `{}`, wantErr: state.ErrInvalidArgument, errHas: []string{"doc", "no method, path or host"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var args map[string]any
			dec := json.NewDecoder(strings.NewReader(tc.args))
			dec.UseNumber()
			if err := dec.Decode(&args); err != nil {
				t.Fatal(err)
			}
			c, op, err := OperationCall(pol, "local://test/items", "items", tc.op, args)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Session != nil || c.Wait != 0 || c.ApprovedBy != "" {
				t.Errorf("call has session/wait/approvedBy set: %+v", c)
			}
			if c.Method != tc.method || c.URL.String() != tc.url {
				t.Errorf("got %s %s, want %s %s", c.Method, c.URL, tc.method, tc.url)
			}
			if string(c.Body) != tc.body || c.Header.Get("Content-Type") != tc.ctype {
				t.Errorf("body %q ctype %q, want %q %q", c.Body, c.Header.Get("Content-Type"), tc.body, tc.ctype)
			}
			if tc.wantEscPath != "" && c.URL.EscapedPath() != tc.wantEscPath {
				t.Errorf("escaped path %q, want %q", c.URL.EscapedPath(), tc.wantEscPath)
			}
			if op == nil || op.Spec.Name != tc.op {
				t.Fatalf("operation = %v", op)
			}
			if tc.checkDecided {
				assertRoutesTo(t, pol, c.Method, c.URL, op)
			}
		})
	}
}

// assertRoutesTo checks that the policy routes the call to op, as the
// pipeline will.
func assertRoutesTo(t testing.TB, pol *policy.Policy, method string, u *url.URL, op *policy.Operation) {
	t.Helper()
	auth, err := policy.ParseAuthority(u.Host, 443)
	if err != nil {
		t.Fatal(err)
	}
	d := pol.Decide(policy.Args{Method: method, Host: auth.Host, Port: auth.Port, Path: u.EscapedPath()})
	if d.Op != op {
		t.Fatalf("%s %s decided %v (%s: %s), want operation %s", method, u, d.Verdict, d.Reason, d.Message, op.Spec.Name)
	}
}

func TestOperationCallNotFoundListsInstalled(t *testing.T) {
	other := strings.NewReplacer(`local://test/items`, `local://test/other`, `"items"`, `"other"`).Replace(testkit.ItemsSpec)
	other = strings.ReplaceAll(other, "example.com", "example.org")
	pol := opcallPolicy(t, testkit.ItemsSpec, other)
	tests := []struct {
		fqn, tool, op string
		has           []string
	}{
		{"local://nope/x", "items", "get", []string{`"local://nope/x" is not installed`, "local://test/items, local://test/other"}},
		{"local://test/items", "other", "get", []string{`no tool "other"`, "its tools: items"}},
		{"local://test/items", "items", "gone", []string{`no operation "gone"`, "get"}},
	}
	for _, tc := range tests {
		_, _, err := OperationCall(pol, tc.fqn, tc.tool, tc.op, nil)
		if !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("%s/%s/%s: err = %v, want state.ErrNotFound", tc.fqn, tc.tool, tc.op, err)
		}
		for _, s := range tc.has {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %q", err, s)
			}
		}
	}
	if _, _, err := OperationCall(nil, "local://test/items", "items", "get", nil); !errors.Is(err, state.ErrNotFound) ||
		!strings.Contains(err.Error(), "installed connectors: none") {
		t.Errorf("nil policy: err = %v", err)
	}
}

// TestOperationCallDeterministic: equal arguments build identical calls,
// which an approval retry relies on.
func TestOperationCallDeterministic(t *testing.T) {
	pol := opcallPolicy(t, testkit.ItemsSpec)
	args := map[string]any{"project": "p", "z": 1.0, "a": []any{"x", 2.5}, "m": map[string]any{"b": 1, "a": 2}}
	first, _, err := OperationCall(pol, "local://test/items", "items", "create", args)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		c, _, err := OperationCall(pol, "local://test/items", "items", "create", args)
		if err != nil {
			t.Fatal(err)
		}
		if c.URL.String() != first.URL.String() || string(c.Body) != string(first.Body) {
			t.Fatalf("calls differ: %s %s vs %s %s", c.URL, c.Body, first.URL, first.Body)
		}
	}
	if c, _, err := OperationCall(pol, "local://test/items", "items", "delete", map[string]any{"id": "1", "z": 1, "a": 2, "m": "x"}); err != nil ||
		c.URL.RawQuery != "a=2&m=x&z=1" {
		t.Errorf("query not sorted: %v %v", c.URL, err)
	}
	if c, _, _ := OperationCall(pol, "local://test/items", "items", "create", map[string]any{"project": "p"}); c.Header.Get("Content-Type") != "application/json" ||
		c.Method != http.MethodPost {
		t.Errorf("POST call: %+v", c)
	}
}

// FuzzOperationCallPath: whatever the argument, OperationCall either
// refuses it with state.ErrInvalidArgument or builds a canonical path that the
// policy routes to the same operation and that decodes back to the value.
func FuzzOperationCallPath(f *testing.F) {
	for _, s := range []string{"abc", "a b", "a/b", "..", ".", "%2e%2e", "%", "é", "a;b", "a?b#c", "\x00", "a\\b", "%252e", " ", "x/../y", "a//b", "~user"} {
		f.Add(s)
	}
	pol := opcallPolicy(f, testkit.ItemsSpec)
	f.Fuzz(func(t *testing.T, v string) {
		for _, op := range []string{"get", "file"} {
			name := map[string]string{"get": "id", "file": "path"}[op]
			c, o, err := OperationCall(pol, "local://test/items", "items", op, map[string]any{name: v})
			if err != nil {
				if !errors.Is(err, state.ErrInvalidArgument) {
					t.Fatalf("%s(%q): err = %v, want state.ErrInvalidArgument", op, v, err)
				}
				continue
			}
			if err := policy.CheckPath(c.URL.EscapedPath()); err != nil {
				t.Fatalf("%s(%q): non-canonical path %q: %v", op, v, c.URL.EscapedPath(), err)
			}
			assertRoutesTo(t, pol, c.Method, c.URL, o)
			prefix := map[string]string{"get": "/v1/items/", "file": "/v1/files/"}[op]
			got, err := url.PathUnescape(strings.TrimPrefix(c.URL.EscapedPath(), prefix))
			if err != nil || got != v {
				t.Fatalf("%s(%q): path %q decodes to %q (%v)", op, v, c.URL.EscapedPath(), got, err)
			}
		}
	})
}
