package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseSpec(f *testing.F) {
	for _, n := range []string{"gmail.json", "linear.json", "regional.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "specs", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(mustJSON(f, baseSpec()))
	f.Add([]byte(`{"schema_version":"aileron.connector.v1","connector":{"fqn":"local://a/b","version":"0.0.1"},"tools":[{"name":"t","operations":[{"name":"o","credential":{"kind":"basic"},"path":"/{a}/{b...}","method":"PUT","hosts":["[::1]:1"]}]}]}`))
	f.Add([]byte(`{"tools":[{"operations":[{"credential":""}]}]}`))
	f.Add([]byte(`{"a":{"a":{"a":[[[[1]]]]}},"tools":null}`))
	f.Add([]byte(`[`))
	for _, op := range []string{
		`"method":"POST","path":"/a/{id}","inputs":[{"name":"id","type":"integer","minimum":1},{"name":"to","required":true,"pattern":"^a$","format":"email"},{"name":"o","type":"object","required":["k"],"properties":{"k":{"enum":[1,"x"]}},"additionalProperties":false},{"name":"l","type":"array","in":"query","items":{"const":3},"maxItems":2}]`,
		`"method":"GET","path":"/b","visibility":"internal","input_schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"array","uniqueItems":true,"maxItems":3}},"additionalProperties":false},"output_schema":{"type":"object","properties":{"id":{"type":"string"}}}`,
		`"method":"GET","path":"/c","input_schema":{"type":"object","properties":{"a":{"$ref":"#"}}}`,
	} {
		f.Add(schemaSpec(op))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec("fuzz.json", data)
		if err != nil {
			for _, e := range flatten(err) {
				var ve *ValidationError
				if !errors.As(e, &ve) || !errors.Is(e, ErrInvalidSpec) {
					t.Fatalf("error %v is not a *ValidationError wrapping ErrInvalidSpec", e)
				}
			}
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("marshal of a parsed spec: %v", err)
		}
		s2, err := ParseSpec("fuzz2.json", out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		out2, err := json.Marshal(s2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("round trip differs:\n%s\n%s", out, out2)
		}
		if _, errs := Compile([]Source{{Spec: s, Origin: "fuzz.json"}}, nil); len(errs) != 0 {
			t.Fatalf("a spec that parses does not compile: %v", errs)
		}
	})
}

// canonicalOracle is an independent check of CheckPath's contract built on
// net/url.
func canonicalOracle(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		if seg == "" && i != len(segs)-1 {
			return false
		}
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return false
		}
		base, _, _ := strings.Cut(dec, ";")
		if dec == "." || dec == ".." || base == "." || base == ".." {
			return false
		}
		for j := 0; j < len(dec); j++ {
			if c := dec[j]; c == '/' || c == '\\' || c < 0x20 || c == 0x7f {
				return false
			}
		}
	}
	return true
}

func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b/", "/a/%2e%2E/b", "/a/..;/b", "/a//b", "/a/%2F", "/a%5c", "/a/%00", "/a/%252e%252e",
		"/a/%c0%ae", "/a/€/%e2%82%ac", "/a b", "/a?b", "", "a", "/%", "/%%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := CheckPath(p)
		if err != nil && !errors.Is(err, ErrNonCanonicalPath) {
			t.Fatalf("error %v does not wrap ErrNonCanonicalPath", err)
		}
		if err == nil && !canonicalOracle(p) {
			t.Fatalf("CheckPath accepted non-canonical %q", p)
		}
	})
}

func FuzzMatch(f *testing.F) {
	p := testPolicy(f)
	f.Add("GET", "gmail.googleapis.com", 443, "/gmail/v1/users/me/messages/abc", "")
	f.Add("POST", "gmail.googleapis.com", 443, "/gmail/v1/users/me/messages/s%65nd", fqnGoogle)
	f.Add("GET", "api.eu.example.com", 443, "/v2/files/a/b/c", fqnRegional)
	f.Add("DELETE", "api.ap.example.com", 8443, "/v2/reports/%2e%2e", "")
	f.Add("POST", "api.linear.app", 443, "/graphql", fqnGoogle)
	f.Add("GET", "gmail.googleapis.com", 443, "/gmail/v1/users/me/messages/..", "")
	f.Fuzz(func(t *testing.T, method, host string, port int, path, scope string) {
		var conns []string
		if scope != "" {
			conns = strings.Split(scope, ",")
		}
		d := p.Decide(Args{Method: method, Host: host, Port: port, Path: path, Connectors: conns})
		_ = p.DecideConnect(host, port, conns)
		if d.Verdict != Allow && d.Verdict != AllowAfterApproval {
			if d.Op != nil || d.Params != nil {
				t.Fatalf("deny carries an operation or params: %+v", d)
			}
			return
		}
		if err := CheckPath(path); err != nil {
			t.Fatalf("Decide allowed %q, which CheckPath rejects: %v", path, err)
		}
		o := d.Op
		if o == nil || o.Spec.Method != method || (conns != nil && !strings.Contains(","+scope+",", ","+o.FQN+",")) {
			t.Fatalf("allowed with wrong operation %+v for %s %s scope %q", o, method, path, scope)
		}
		found := false
		for _, a := range o.Hosts {
			found = found || a == Authority{Host: host, Port: port}
		}
		if !found {
			t.Fatalf("operation %s does not list %s:%d", o.Spec.Name, host, port)
		}
		if (d.Verdict == AllowAfterApproval) != o.RequiresApproval() {
			t.Fatalf("verdict %v for approval %q", d.Verdict, o.Spec.Approval)
		}
		if len(d.Params) != len(o.pat.vars) {
			t.Fatalf("params %v for variables %v", d.Params, o.pat.vars)
		}
	})
}

func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{"gmail.googleapis.com:443", "Bücher.example.", "[2001:db8::1]:8443", "[::ffff:1.2.3.4]", "1.2.3.4:1",
		"a@b:1", "x:0443", "x:", "::1", "[fe80::1%25eth0]:1", "xn--bcher-kva.example", "A.B.C"} {
		f.Add(s, 443)
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, s string, def int) {
		a, err := ParseAuthority(s, def)
		if err != nil {
			if !errors.Is(err, ErrBadAuthority) {
				t.Fatalf("error %v does not wrap ErrBadAuthority", err)
			}
			return
		}
		if a.Port < 1 || a.Port > 65535 || a.Host == "" {
			t.Fatalf("accepted %q as %+v", s, a)
		}
		b, err := ParseAuthority(a.String(), 0)
		if err != nil || b != a {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, a, a.String(), b, err)
		}
		if h, err := CanonicalHost(a.Host); err != nil || h != a.Host {
			t.Fatalf("CanonicalHost not idempotent on %q: %q, %v", a.Host, h, err)
		}
	})
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"github://acme/x@1.2.3", "github://acme/x@1.2.3-rc.1+b", "x@", "@1.2.3", "a@b@1.0.0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		fqn, version, err := ParseRef(ref)
		if err != nil {
			if !errors.Is(err, ErrBadIdent) {
				t.Fatalf("ParseRef(%q) error %v does not wrap ErrBadIdent", ref, err)
			}
			return
		}
		if fqn+"@"+version != ref || CheckFQN(fqn) != nil || CheckSemVer(version) != nil {
			t.Fatalf("ParseRef(%q) = %q, %q", ref, fqn, version)
		}
		if CompareVersions(version, version) != 0 {
			t.Fatalf("CompareVersions(%q, itself) != 0", version)
		}
	})
}
