package policy

import (
	"errors"
	"testing"
)

func TestCheckPath(t *testing.T) {
	good := []string{
		"/", "/a", "/a/", "/a/b", "/a/b/", "/gmail/v1/users/me/messages",
		"/a/.b", "/a/b.", "/a/...", "/a/..b", "/a/%2e%2e%2e", "/a/%41%42", "/a/%e2%82%ac", "/a/€",
		"/a;b/c", "/a/b;c=d", "/a:b@c", "/a/%25", "/a/100%25", "/a/%2541", "/a/~user", "/a/b+c",
		"/a/%3B", "/search/a%20b",
	}
	for _, p := range good {
		if err := CheckPath(p); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", p, err)
		}
	}
	bad := []string{
		"", "a", "*", "a/b", "http://x/a",
		"//", "/a//b", "//a", "/a//",
		"/..", "/.", "/a/..", "/a/.", "/a/../b", "/a/./b", "/a/b/..",
		"/a/%2e%2e/b", "/a/%2E%2E/b", "/a/%2E./b", "/a/.%2e/b", "/a/%2e/b", "/a/%2E",
		"/a/..;/b", "/a/.;x/b", "/a/%2e%2e;/b",
		"/a/%2f", "/a%2Fb", "/a/%2F%2F",
		`/a\b`, `/a\`, "/a/%5c", "/a/%5C..",
		"/a\x00b", "/a/%00", "/a\x01", "/a/%0a", "/a/%0D%0A", "/a\x7f", "/a/%7f", "/a\tb", "/a/%09",
		"/a/%", "/a/%2", "/a/%zz", "/a/%g0", "/a/%%30",
		"/a b", "/a?b", "/a#b",
		"/a/%c0%ae%c0%ae", "/a/%ff", "/a/\xc0\xae",
		"/a/%252e%252e/b", "/a/%252E%252e", "/a/%252f", "/a/%255c", "/a/%2500",
	}
	for _, p := range bad {
		err := CheckPath(p)
		if err == nil {
			t.Errorf("CheckPath(%q) = nil, want error", p)
		} else if !errors.Is(err, ErrNonCanonicalPath) {
			t.Errorf("CheckPath(%q) error %v does not wrap ErrNonCanonicalPath", p, err)
		}
	}
}

func TestCheckPathNoAlloc(t *testing.T) {
	for _, p := range []string{"/gmail/v1/users/me/messages/18c2f3a", "/a/%41b/c", "/"} {
		if n := testing.AllocsPerRun(100, func() { _ = CheckPath(p) }); n != 0 {
			t.Errorf("CheckPath(%q) allocates %v times", p, n)
		}
	}
}

func TestPatternParams(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          map[string]string
	}{
		{"/a/{x}", "/a/b", map[string]string{"x": "b"}},
		{"/a/{x}/c/{y}", "/a/b%20c/c/d", map[string]string{"x": "b c", "y": "d"}},
		{"/files/{p...}", "/files/a/b%41/c", map[string]string{"p": "a/bA/c"}},
		{"/files/{p...}", "/files/", map[string]string{"p": ""}},
		{"/a/b", "/a/b", nil},
	}
	for _, tc := range cases {
		pat, rule, msg := parsePattern(tc.pattern)
		if rule != "" {
			t.Fatalf("parsePattern(%q): %s %s", tc.pattern, rule, msg)
		}
		got := pat.params(tc.path)
		if len(got) != len(tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("params(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("params(%q, %q)[%s] = %q, want %q", tc.pattern, tc.path, k, got[k], v)
			}
		}
	}
}
