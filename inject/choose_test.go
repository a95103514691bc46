package inject

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// TestChoosePlacement runs the whole placement choice on one credential
// with four places (x-api-key first, then Authorization: Bearer,
// x-goog-api-key and ?key=) and checks where the real key leaves.
func TestChoosePlacement(t *testing.T) {
	spec := policy.Credential{Kind: KindAPIKey, Header: "x-api-key", Alternatives: []policy.CredentialPlace{
		{Header: "Authorization", Format: "Bearer {token}"}, {Header: "x-goog-api-key"}, {Query: "key"}}}
	places := PlacesFor(spec)
	key := []byte("0123456789abcdef0123456789abcdef")
	ph := Placeholder(key, "sess-a", "anthropic")
	other := Placeholder(key, "sess-b", "anthropic")
	const real = "sk-real-secret-0123456789"
	tests := []struct {
		name    string
		query   string
		headers map[string]string
		want    string // where the key goes: "x-api-key", "authorization", "x-goog-api-key", "key"; "" = refused
		leftPH  bool   // a placeholder is still on the request (the proxy refuses it)
	}{
		{name: "x-api-key", headers: map[string]string{"X-Api-Key": ph}, want: "x-api-key"},
		{name: "bearer", headers: map[string]string{"Authorization": "Bearer " + ph}, want: "authorization"},
		{name: "bearer lower-case scheme", headers: map[string]string{"Authorization": "bearer " + ph}, want: "authorization"},
		{name: "x-goog-api-key", headers: map[string]string{"X-Goog-Api-Key": ph}, want: "x-goog-api-key"},
		{name: "query key", query: "alt=sse&key=" + ph, want: "key"},
		{name: "none", want: "x-api-key"},
		{name: "none, client key elsewhere", headers: map[string]string{"Authorization": "Bearer client-own"}, query: "key=client-own", want: "x-api-key"},
		{name: "two places, first wins", headers: map[string]string{"X-Api-Key": ph, "Authorization": "Bearer " + ph}, want: "x-api-key"},
		{name: "two places, query and bearer", headers: map[string]string{"Authorization": "Bearer " + ph}, query: "key=" + ph, want: "authorization"},
		{name: "disallowed place", headers: map[string]string{"X-Other-Key": ph}, want: "x-api-key", leftPH: true},
		{name: "wrong session's placeholder", headers: map[string]string{"X-Api-Key": other}},
		{name: "wrong session's placeholder in query", query: "key=" + other},
		{name: "wrong session's beside ours", headers: map[string]string{"X-Api-Key": ph, "Authorization": "Bearer " + other}},
		{name: "bearer placeholder without scheme", headers: map[string]string{"Authorization": ph}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "https://api.example.com/v1/messages?"+tc.query, nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			i, err := Choose(r, places, ph)
			if tc.want == "" {
				if !errors.Is(err, ErrForeignPlaceholder) {
					t.Fatalf("Choose = %d, %v; want ErrForeignPlaceholder", i, err)
				}
				if strings.Contains(err.Error(), ph) || strings.Contains(err.Error(), other) {
					t.Errorf("error %q holds a placeholder", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Choose: %v", err)
			}
			ClearOthers(r, places, i)
			if _, err := Apply(r, places[i], Secret{Kind: KindAPIKey, Token: real}, time.Time{}); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			got := map[string]string{
				"x-api-key":      r.Header.Get("X-Api-Key"),
				"authorization":  r.Header.Get("Authorization"),
				"x-goog-api-key": r.Header.Get("X-Goog-Api-Key"),
				"key":            r.URL.Query().Get("key"),
			}
			for where, v := range got {
				want := ""
				if where == tc.want {
					want = real
					if where == "authorization" {
						want = "Bearer " + real
					}
				}
				if v != want {
					t.Errorf("%s = %q, want %q", where, v, want)
				}
			}
			if len(r.Header.Values("Authorization")) > 1 || len(r.URL.Query()["key"]) > 1 {
				t.Errorf("a place holds more than one value: %v %v", r.Header, r.URL.RawQuery)
			}
			if ContainsPlaceholder(r) != tc.leftPH {
				t.Errorf("ContainsPlaceholder = %v, want %v (request %v %s)", !tc.leftPH, tc.leftPH, r.Header, r.URL.RawQuery)
			}
		})
	}
}

func TestChooseNoPlaceholderKey(t *testing.T) {
	places := PlacesFor(policy.Credential{Kind: KindAPIKey, Header: "x-api-key"})
	r := httptest.NewRequest(http.MethodGet, "https://api.example.com/v1/models", nil)
	if i, err := Choose(r, places, ""); i != 0 || err != nil {
		t.Fatalf("Choose without placeholder = %d, %v", i, err)
	}
	r.Header.Set("X-Api-Key", PlaceholderPrefix+"00")
	if _, err := Choose(r, places, ""); !errors.Is(err, ErrForeignPlaceholder) {
		t.Fatalf("a placeholder with no key to match: %v, want ErrForeignPlaceholder", err)
	}
}

func TestPlacesForDefaults(t *testing.T) {
	got := PlacesFor(policy.Credential{Kind: KindBearer, Header: "x-api-key", Alternatives: []policy.CredentialPlace{
		{Header: "Authorization"}, {Query: "key"}, {Header: "X-Token", Format: "Token {token}"}}})
	want := []Placement{{Header: "x-api-key", Format: RawFormat}, {Header: "Authorization", Format: DefaultFormat},
		{Query: "key", Format: RawFormat}, {Header: "X-Token", Format: "Token {token}"}}
	if len(got) != len(want) {
		t.Fatalf("PlacesFor = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("place %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if n := len(PlacesFor(policy.Credential{Kind: KindBasic, Alternatives: []policy.CredentialPlace{{Header: "X"}}})); n != 1 {
		t.Errorf("basic has %d places, want 1", n)
	}
}

// TestEchoesCoverEveryPlace checks that, whichever place the key goes in,
// the echoes Apply returns mask an upstream echoing that place's rendering
// (and the raw, URL-encoded and base64 key) in full.
func TestEchoesCoverEveryPlace(t *testing.T) {
	const real = "sk-ant-api03-Secret/Key+0123456789="
	spec := policy.Credential{Kind: KindAPIKey, Header: "x-api-key", Alternatives: []policy.CredentialPlace{
		{Header: "Authorization", Format: "Bearer {token}"}, {Header: "x-goog-api-key"}, {Query: "key"}, {Header: "X-Token", Format: "Token {key}"}}}
	for _, pl := range PlacesFor(spec) {
		r := httptest.NewRequest(http.MethodPost, "https://api.example.com/v1/messages", nil)
		echoes, err := Apply(r, pl, Secret{Kind: KindAPIKey, Token: real}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		sent := r.Header.Get(pl.Header)
		if pl.Query != "" {
			sent = r.URL.RawQuery
		}
		red := NewRedactor(echoes...)
		for _, echo := range []string{sent, render(pl.Format, real), real, "key=" + strings.ReplaceAll(real, "/", "%2F"),
			base64Of(real), jsonEscape(real)} {
			if got := red.String("echo: " + echo + " end"); strings.Contains(got, "0123456789") {
				t.Errorf("%s: the echo %q is not masked: %q", pl.where(), echo, got)
			}
		}
	}
}

func base64Of(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
