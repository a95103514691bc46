package proposals

import (
	"strings"
	"testing"
)

func TestTemplate(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"numeric", "/repos/42/issues/7", "/repos/{id}/issues/{id2}"},
		{"uuid", "/v1/items/123e4567-e89b-12d3-a456-426614174000", "/v1/items/{uuid}"},
		{"uuid upper case", "/v1/items/123E4567-E89B-12D3-A456-426614174000/x", "/v1/items/{uuid}/x"},
		{"long hex", "/commits/9fceb02d0ae598e95dc970b74767f19372d61af8", "/commits/{hex}"},
		{"hex of 16", "/blobs/0123456789abcdef", "/blobs/{hex}"},
		{"hex of 15 stays", "/blobs/0123456789abcde", "/blobs/0123456789abcde"},
		{"hex without a digit stays", "/words/deadbeefdeadbeefcafe", "/words/deadbeefdeadbeefcafe"},
		{"mixed stays", "/users/alice42/v2/repo-7", "/users/alice42/v2/repo-7"},
		{"percent-encoded number", "/users/%31%32", "/users/{id}"},
		{"percent-encoded literal kept as sent", "/files/a%2Fb/%20x", "/files/a%2Fb/%20x"},
		{"bad escape stays", "/files/%zz", "/files/%zz"},
		{"trailing slash", "/repos/42/", "/repos/{id}/"},
		{"nothing to generalise", "/v1/chat/completions", "/v1/chat/completions"},
		{"root", "/", "/"},
		{"empty", "", "/"},
		{"literal braces escaped", "/a/{id}/b}", "/a/%7Bid%7D/b%7D"},
		{"kinds numbered apart", "/1/0123456789abcdef0/2", "/{id}/{hex}/{id2}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Template(tc.in); got != tc.want {
				t.Errorf("Template(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzTemplate checks what holds for every path: the segment count is
// kept, a segment is either a placeholder or the input's own segment with
// its braces escaped, and no brace appears outside a placeholder.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"/a/1/", "/x/123e4567-e89b-12d3-a456-426614174000", "/%31/{x}", "", "//", "/%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Template(in)
		if in == "" {
			in = "/"
		}
		is, os := strings.Split(in, "/"), strings.Split(out, "/")
		if len(is) != len(os) {
			t.Fatalf("Template(%q) = %q: %d segments, want %d", in, out, len(os), len(is))
		}
		for i, o := range os {
			if strings.HasPrefix(o, "{") && strings.HasSuffix(o, "}") && !strings.ContainsAny(o[1:len(o)-1], "{}/") {
				if segmentKind(is[i]) == "" {
					t.Fatalf("Template(%q) = %q: segment %q became %q", in, out, is[i], o)
				}
				continue
			}
			if strings.ContainsAny(o, "{}") {
				t.Fatalf("Template(%q) = %q: brace outside a placeholder in %q", in, out, o)
			}
			if want := strings.NewReplacer("{", "%7B", "}", "%7D").Replace(is[i]); o != want {
				t.Fatalf("Template(%q) = %q: segment %q became %q", in, out, is[i], o)
			}
		}
	})
}
