package inject

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/policy"
)

const testToken = "sk-test-0123456789abcdef"

func newOut(t *testing.T, rawURL string, hdr map[string]string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}

// placementCase is one Apply call and what it must do to the request.
type placementCase struct {
	name      string
	url       string
	hdr       map[string]string
	pl        Placement
	s         Secret
	wantHdr   map[string]string // header → its only value
	wantQuery string            // exact RawQuery when non-empty
	echoes    []string          // must all be among the echoes
}

func placementCases() []placementCase {
	b64 := base64.StdEncoding.EncodeToString([]byte("alice:s3cr3t-pass"))
	return []placementCase{
		{
			name:    "bearer default",
			url:     "https://api.example.com/v1",
			s:       Secret{Kind: KindBearer, Token: testToken},
			wantHdr: map[string]string{"Authorization": "Bearer " + testToken},
			echoes:  []string{testToken, "Bearer " + testToken, base64.StdEncoding.EncodeToString([]byte(testToken))},
		},
		{
			name:    "client Authorization replaced",
			url:     "https://api.example.com/v1",
			hdr:     map[string]string{"Authorization": "Bearer aileron-placeholder-00"},
			s:       Secret{Kind: KindAPIKey, Token: testToken},
			wantHdr: map[string]string{"Authorization": "Bearer " + testToken},
		},
		{
			name:    "linear raw key",
			url:     "https://api.linear.app/graphql",
			hdr:     map[string]string{"Authorization": "lin_api_placeholder"},
			pl:      Placement{Header: "Authorization", Format: "{key}"},
			s:       Secret{Kind: KindAPIKey, Token: "lin_api_abcdef123456"},
			wantHdr: map[string]string{"Authorization": "lin_api_abcdef123456"},
			echoes:  []string{"lin_api_abcdef123456"},
		},
		{
			name:    "custom header raw by default",
			url:     "https://api.example.com/v1",
			hdr:     map[string]string{"X-Api-Key": "client-value", "Authorization": "Basic keepme"},
			pl:      Placement{Header: "x-api-key"},
			s:       Secret{Kind: KindAPIKey, Token: testToken},
			wantHdr: map[string]string{"X-Api-Key": testToken, "Authorization": "Basic keepme"},
		},
		{
			name:    "custom header with format",
			url:     "https://api.example.com/v1",
			pl:      Placement{Header: "X-Auth", Format: "Token token={token}"},
			s:       Secret{Kind: KindBearer, Token: testToken},
			wantHdr: map[string]string{"X-Auth": "Token token=" + testToken},
			echoes:  []string{"Token token=" + testToken, url.QueryEscape("Token token=" + testToken)},
		},
		{
			name:      "query parameter replaces client's",
			url:       "https://api.example.com/v1?a=1&api_key=client&b=2&api%5Fkey=sneaky",
			pl:        Placement{Query: "api_key"},
			s:         Secret{Kind: KindAPIKey, Token: "key/with+chars="},
			wantQuery: "a=1&b=2&api_key=" + url.QueryEscape("key/with+chars="),
			echoes:    []string{"key/with+chars=", url.QueryEscape("key/with+chars="), url.PathEscape("key/with+chars=")},
		},
		{
			name:    "oauth2 access token",
			url:     "https://gmail.googleapis.com/gmail/v1/users/me/messages",
			s:       Secret{Kind: KindOAuth2, Token: "ya29.access-token"},
			wantHdr: map[string]string{"Authorization": "Bearer ya29.access-token"},
		},
		{
			name:    "basic",
			url:     "https://jira.example.com/rest/api/2/issue",
			hdr:     map[string]string{"Authorization": "Basic Zm9vOmJhcg=="},
			s:       Secret{Kind: KindBasic, Username: "alice", Password: "s3cr3t-pass"},
			wantHdr: map[string]string{"Authorization": "Basic " + b64},
			echoes:  []string{"s3cr3t-pass", "alice:s3cr3t-pass", b64, "Basic " + b64},
		},
	}
}

func TestApplyPlacements(t *testing.T) {
	for _, tc := range placementCases() {
		t.Run(tc.name, func(t *testing.T) {
			out := newOut(t, tc.url, tc.hdr)
			echoes, err := Apply(out, tc.pl, tc.s, time.Time{})
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			for k, want := range tc.wantHdr {
				if got := out.Header.Values(k); len(got) != 1 || got[0] != want {
					t.Errorf("header %s = %q, want [%q]", k, got, want)
				}
			}
			if tc.wantQuery != "" && out.URL.RawQuery != tc.wantQuery {
				t.Errorf("query = %q, want %q", out.URL.RawQuery, tc.wantQuery)
			}
			for _, e := range tc.echoes {
				if !slices.Contains(echoes, e) {
					t.Errorf("echoes lack %q: %q", e, echoes)
				}
			}
			if slices.Contains(echoes, "alice") {
				t.Errorf("the basic username is not a secret but is among the echoes")
			}
		})
	}
}

func TestApplyReplacesNonCanonicalHeaderKeys(t *testing.T) {
	out := newOut(t, "https://api.example.com/", nil)
	out.Header["authorization"] = []string{"Bearer client"}
	out.Header["AUTHORIZATION"] = []string{"Bearer client2"}
	if _, err := Apply(out, Placement{}, Secret{Kind: KindBearer, Token: testToken}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if len(out.Header) != 1 || out.Header.Get("Authorization") != "Bearer "+testToken {
		t.Fatalf("headers after Apply: %v", out.Header)
	}
}

func TestApplyErrors(t *testing.T) {
	tests := []struct {
		name string
		pl   Placement
		s    Secret
		want error
	}{
		{"unknown kind", Placement{}, Secret{Kind: "magic", Token: testToken}, ErrBadSecret},
		{"missing kind", Placement{}, Secret{Token: testToken}, ErrBadSecret},
		{"empty token", Placement{}, Secret{Kind: KindBearer}, ErrBadSecret},
		{"oauth2 without access token", Placement{}, Secret{Kind: KindOAuth2}, ErrBadSecret},
		{"CRLF in token", Placement{}, Secret{Kind: KindBearer, Token: "abc\r\nX-Evil: 1"}, ErrBadSecret},
		{"control char in token", Placement{}, Secret{Kind: KindBearer, Token: "abc\x01def"}, ErrBadSecret},
		{"foreign field", Placement{}, Secret{Kind: KindBearer, Token: testToken, Password: "pw"}, ErrBadSecret},
		{"colon in basic username", Placement{}, Secret{Kind: KindBasic, Username: "a:b", Password: "pw"}, ErrBadSecret},
		{"basic missing password", Placement{}, Secret{Kind: KindBasic, Username: "a"}, ErrBadSecret},
		{"bad service", Placement{}, Secret{Kind: KindSigV4, AccessKeyID: "AKID", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG", Service: "S3!"}, ErrBadSecret},
		{"header and query", Placement{Header: "X-Key", Query: "key"}, Secret{Kind: KindAPIKey, Token: testToken}, ErrBadPlacement},
		{"reserved header", Placement{Header: "Host"}, Secret{Kind: KindAPIKey, Token: testToken}, ErrBadPlacement},
		{"invalid header name", Placement{Header: "X Key"}, Secret{Kind: KindAPIKey, Token: testToken}, ErrBadPlacement},
		{"format without placeholder", Placement{Format: "Bearer"}, Secret{Kind: KindAPIKey, Token: testToken}, ErrBadPlacement},
		{"format unknown placeholder", Placement{Format: "Bearer {tokn}"}, Secret{Kind: KindAPIKey, Token: testToken}, ErrBadPlacement},
		{"format CRLF", Placement{Format: "{token}\r\nX: y"}, Secret{Kind: KindAPIKey, Token: testToken}, ErrBadPlacement},
		{"bad query name", Placement{Query: "a&b"}, Secret{Kind: KindAPIKey, Token: testToken}, ErrBadPlacement},
		{"basic in query", Placement{Query: "auth"}, Secret{Kind: KindBasic, Username: "a", Password: "pw"}, ErrBadPlacement},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := newOut(t, "https://api.example.com/", map[string]string{"Authorization": "client"})
			_, err := Apply(out, tc.pl, tc.s, time.Time{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			for _, v := range []string{tc.s.Token, tc.s.Password, tc.s.SecretAccessKey, "X-Evil"} {
				if v != "" && strings.Contains(err.Error(), v) {
					t.Errorf("error %q contains secret %q", err, v)
				}
			}
		})
	}
}

func TestCheckValue(t *testing.T) {
	tests := []struct {
		v      string
		wantOK bool
	}{
		{"sk-abc", true},
		{"with space\tand tab", true},
		{"", false},
		{"abc\rdef", false},
		{"abc\ndef", false},
		{"abc\x00def", false},
		{"trailing\n", false},
	}
	for _, tc := range tests {
		err := CheckValue("token", tc.v)
		if (err == nil) != tc.wantOK {
			t.Errorf("CheckValue(%q) = %v, want ok=%v", tc.v, err, tc.wantOK)
		}
		if err != nil {
			if !errors.Is(err, ErrBadSecret) {
				t.Errorf("CheckValue(%q) = %v, does not wrap ErrBadSecret", tc.v, err)
			}
			if tc.v != "" && strings.Contains(err.Error(), tc.v) {
				t.Errorf("CheckValue error %q contains the value", err)
			}
		}
	}
}

func TestPlacementFor(t *testing.T) {
	tests := []struct {
		c    policy.Credential
		want Placement
	}{
		{policy.Credential{Kind: KindOAuth2}, Placement{Header: "Authorization", Format: "Bearer {token}"}},
		{policy.Credential{Kind: KindBearer}, Placement{Header: "Authorization", Format: "Bearer {token}"}},
		{policy.Credential{Kind: KindAPIKey, Format: "{key}"}, Placement{Header: "Authorization", Format: "{key}"}},
		{policy.Credential{Kind: KindAPIKey, Header: "X-Api-Key"}, Placement{Header: "X-Api-Key", Format: "{token}"}},
		{policy.Credential{Kind: KindAPIKey, Header: "X-Api-Key", Format: "Key {key}"}, Placement{Header: "X-Api-Key", Format: "Key {key}"}},
		{policy.Credential{Kind: KindAPIKey, Query: "key"}, Placement{Query: "key", Format: "{token}"}},
		{policy.Credential{Kind: KindBasic}, Placement{Header: "Authorization"}},
		{policy.Credential{Kind: KindBasic, Header: "X-Basic"}, Placement{Header: "X-Basic"}},
		{policy.Credential{Kind: KindSigV4, Service: "s3"}, Placement{}},
	}
	for _, tc := range tests {
		if got := PlacementFor(tc.c); got != tc.want {
			t.Errorf("PlacementFor(%+v) = %+v, want %+v", tc.c, got, tc.want)
		}
	}
}

func TestEchoFormsBase64Cores(t *testing.T) {
	// A secret echoed inside a larger base64 blob, at every byte alignment,
	// must still be masked.
	secret := "ghp_abcdefghijklmnopqrstuvwxyz012345"
	echoes, err := Apply(newOut(t, "https://api.example.com/", nil), Placement{}, Secret{Kind: KindBearer, Token: secret}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	red := NewRedactor(echoes...)
	for prefix := range 6 {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			blob := enc.EncodeToString([]byte(strings.Repeat("x", prefix) + "token=" + secret + "&more-data-follows"))
			if got := red.String(blob); got == blob {
				t.Errorf("prefix %d: base64 blob %q not masked", prefix, blob)
			}
		}
	}
}
