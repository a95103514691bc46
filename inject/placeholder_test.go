package inject

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestPlaceholder(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	p := Placeholder(key, "s_1", "linear")
	if !strings.HasPrefix(p, PlaceholderPrefix) || len(p) != len(PlaceholderPrefix)+32 {
		t.Fatalf("Placeholder = %q", p)
	}
	if strings.Trim(p[len(PlaceholderPrefix):], "0123456789abcdef") != "" {
		t.Fatalf("suffix is not lower-case hex: %q", p)
	}
	if Placeholder(key, "s_1", "linear") != p {
		t.Fatal("not stable")
	}
	for _, other := range []string{
		Placeholder(key, "s_2", "linear"),
		Placeholder(key, "s_1", "github"),
		Placeholder(key, "s_1l", "inear"), // the separator keeps the fields apart
		Placeholder([]byte("another key"), "s_1", "linear"),
	} {
		if other == p {
			t.Fatalf("collision: %q", other)
		}
	}
}

func TestContainsPlaceholder(t *testing.T) {
	p := Placeholder([]byte("k"), "s_1", "linear")
	enc := func(s string) string { // percent-encode every byte
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[s[i]>>4])+string("0123456789abcdef"[s[i]&15])))
		}
		return b.String()
	}
	tests := []struct {
		name string
		url  string
		hdr  http.Header
		want bool
	}{
		{"clean", "https://api.example.com/v1/items?q=1", http.Header{"Authorization": {"Bearer real"}}, false},
		{"prefix lookalike", "https://api.example.com/aileron-placeholder", nil, false},
		{"header", "https://api.example.com/", http.Header{"Authorization": {"Bearer " + p}}, true},
		{"header upper-case", "https://api.example.com/", http.Header{"X-Api-Key": {strings.ToUpper(p)}}, true},
		{"second header value", "https://api.example.com/", http.Header{"Cookie": {"a=b", "k=" + p}}, true},
		{"header percent-encoded", "https://api.example.com/", http.Header{"Cookie": {"k=" + enc(p)}}, true},
		{"path", "https://api.example.com/keys/" + p + "/x", nil, true},
		{"path encoded", "https://api.example.com/keys/" + enc(p), nil, true},
		{"query", "https://api.example.com/x?api_key=" + p, nil, true},
		{"query percent-encoded", "https://api.example.com/x?api_key=" + enc(p), nil, true},
		{"query double-encoded", "https://api.example.com/x?k=" + url.QueryEscape(enc(p)), nil, true},
		{"query partly encoded", "https://api.example.com/x?k=aileron%2dplaceholder%2D" + p[len(PlaceholderPrefix):], nil, true},
		{"query stray percent", "https://api.example.com/x?k=%zz" + strings.ToUpper(enc(p)), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, vs := range tc.hdr {
				r.Header[k] = vs
			}
			if got := ContainsPlaceholder(r); got != tc.want {
				t.Fatalf("ContainsPlaceholder(%s, %v) = %v, want %v", tc.url, tc.hdr, got, tc.want)
			}
		})
	}
	if ContainsPlaceholder(nil) {
		t.Fatal("nil request")
	}
}
