package inject

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestRenderIsOnePass: a secret that itself holds "{key}" or "{token}" is
// placed as it is, never expanded again; other braces stay.
func TestRenderIsOnePass(t *testing.T) {
	for _, c := range []struct{ format, secret, want string }{
		{"Bearer {token}", "s3cr3t", "Bearer s3cr3t"},
		{"{key}", "a{key}b", "a{key}b"},
		{"{token}:{key}", "{token}", "{token}:{token}"},
		{"x{y}{key", "s", "x{y}{key"},
		{"plain", "s", "plain"},
	} {
		if got := render(c.format, c.secret); got != c.want {
			t.Errorf("render(%q, %q) = %q, want %q", c.format, c.secret, got, c.want)
		}
	}
}

// TestEchoFormsCacheIsTransparent: with or without the cache, Apply returns
// the same echoes; the cache stays bounded.
func TestEchoFormsCacheIsTransparent(t *testing.T) {
	var forms EchoForms
	s := Secret{Kind: KindBearer, Token: "tok-0123456789abcdef/+="}
	for range 2 {
		a, _ := http.NewRequest("GET", "https://api.example.com/", nil)
		b, _ := http.NewRequest("GET", "https://api.example.com/", nil)
		plain, err1 := Apply(a, Placement{}, s, time.Time{})
		cached, err2 := ApplyWith(b, Placement{}, s, time.Time{}, &forms)
		if err1 != nil || err2 != nil || !slices.Equal(plain, cached) || len(plain) < 10 {
			t.Fatalf("without cache %q (%v), with %q (%v)", plain, err1, cached, err2)
		}
	}
	for i := range maxCachedSecrets + 10 {
		forms.of(fmt.Sprintf("secret-%d-0123456789", i))
	}
	if n := len(forms.m); n > maxCachedSecrets {
		t.Fatalf("the cache holds %d secrets, over %d", n, maxCachedSecrets)
	}
}
