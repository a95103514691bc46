package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonicalHost(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"gmail.googleapis.com", "gmail.googleapis.com"},
		{"Gmail.GoogleAPIs.com.", "gmail.googleapis.com"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"BÜCHER.example", "xn--bcher-kva.example"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"ＡＢＣ.com", "abc.com"},
		{"localhost", "localhost"},
		{"a-b.c0.example", "a-b.c0.example"},
		{"192.0.2.1", "192.0.2.1"},
		{"192.0.2.1.", "192.0.2.1"},
		{"[2001:DB8::1]", "2001:db8::1"},
		{"2001:db8:0:0:0:0:0:1", "2001:db8::1"},
		{"[::ffff:192.0.2.1]", "::ffff:192.0.2.1"},
		{"foo.123abc", "foo.123abc"},
	}
	for _, tc := range cases {
		got, err := CanonicalHost(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("CanonicalHost(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	bad := []string{
		"", ".", "..", "a..b", "gmail.googleapis.com..", ".example.com",
		"user@example.com", "example.com:443", "exa mple.com", "exa_mple.com", "exa/mple.com",
		"exa%2emple.com", "*.example.com", "-a.example.com", "a-.example.com", "ab--cd.example.com",
		"xn--zz.example", "2130706433", "127.1", "0x7f.0.0.1", "foo.0x7f", "1.2.3.04",
		"[192.0.2.1]", "[fe80::1%eth0]", "fe80::1%eth0", "[::1", "a\x00b.com", "a\u200db.com",
		strings.Repeat("a", 64) + ".com", strings.Repeat("a.", 130) + "com",
	}
	for _, in := range bad {
		if got, err := CanonicalHost(in); err == nil {
			t.Errorf("CanonicalHost(%q) = %q, want error", in, got)
		} else if !errors.Is(err, ErrBadHost) {
			t.Errorf("CanonicalHost(%q) error %v does not wrap ErrBadHost", in, err)
		}
	}
}

func TestCanonicalHostNoAllocCanonical(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := CanonicalHost("gmail.googleapis.com"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("CanonicalHost on a canonical name allocates %v times", allocs)
	}
}

func TestParseAuthority(t *testing.T) {
	cases := []struct {
		in       string
		def      int
		want     Authority
		wantText string
	}{
		{"gmail.googleapis.com:443", 0, Authority{"gmail.googleapis.com", 443}, "gmail.googleapis.com:443"},
		{"Gmail.GoogleAPIs.com.:443", 0, Authority{"gmail.googleapis.com", 443}, "gmail.googleapis.com:443"},
		{"api.example.com", 443, Authority{"api.example.com", 443}, "api.example.com:443"},
		{"api.example.com", 80, Authority{"api.example.com", 80}, "api.example.com:80"},
		{"api.example.com:8443", 443, Authority{"api.example.com", 8443}, "api.example.com:8443"},
		{"[2001:db8::1]:8443", 0, Authority{"2001:db8::1", 8443}, "[2001:db8::1]:8443"},
		{"[2001:DB8::1]", 443, Authority{"2001:db8::1", 443}, "[2001:db8::1]:443"},
		{"192.0.2.1:65535", 0, Authority{"192.0.2.1", 65535}, "192.0.2.1:65535"},
		{"bücher.example:1", 0, Authority{"xn--bcher-kva.example", 1}, "xn--bcher-kva.example:1"},
	}
	for _, tc := range cases {
		got, err := ParseAuthority(tc.in, tc.def)
		if err != nil || got != tc.want {
			t.Errorf("ParseAuthority(%q, %d) = %+v, %v; want %+v", tc.in, tc.def, got, err, tc.want)
			continue
		}
		if got.String() != tc.wantText {
			t.Errorf("String() = %q, want %q", got.String(), tc.wantText)
		}
	}
	bad := []struct {
		in  string
		def int
	}{
		{"", 443}, {":443", 443}, {"example.com", 0}, {"example.com:", 443}, {"example.com:0", 443},
		{"example.com:65536", 443}, {"example.com:70000", 443}, {"example.com:-1", 443}, {"example.com:+443", 443},
		{"example.com:0443", 443}, {"example.com:44a", 443}, {"user@example.com:443", 443},
		{"user:pass@example.com:443", 443}, {"example.com:443/path", 443}, {"example.com/", 443},
		{"https://example.com", 443}, {"example.com?x", 443}, {"example.com#x", 443},
		{"2001:db8::1", 443}, {"[2001:db8::1]x", 443}, {"[2001:db8::1]:", 443}, {"[192.0.2.1]:443", 443},
		{"*.example.com:443", 443}, {"exa mple.com:443", 443}, {"[2001:db8::1", 443}, {"example.com", 70000},
	}
	for _, tc := range bad {
		if got, err := ParseAuthority(tc.in, tc.def); err == nil {
			t.Errorf("ParseAuthority(%q, %d) = %+v, want error", tc.in, tc.def, got)
		} else if !errors.Is(err, ErrBadAuthority) {
			t.Errorf("ParseAuthority(%q) error %v does not wrap ErrBadAuthority", tc.in, err)
		}
	}
}
