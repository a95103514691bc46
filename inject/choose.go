package inject

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// PlacesFor lists every place a spec's token credential may go, the primary
// place (PlacementFor) first, then each of c.Alternatives with the same
// defaults. basic and aws_sigv4 have one place only.
func PlacesFor(c policy.Credential) []Placement {
	out := []Placement{PlacementFor(c)}
	if c.Kind == KindBasic || c.Kind == KindSigV4 {
		return out
	}
	for _, a := range c.Alternatives {
		out = append(out, Placement{Header: a.Header, Format: a.Format, Query: a.Query}.normalized(c.Kind))
	}
	return out
}

// Choose picks which of places (the primary one first, normalized as
// PlacesFor returns them) the credential goes in: the first place where out
// carries placeholder as that place renders it (a header value equal to the
// rendered format, ASCII case aside; a query parameter equal to it once
// decoded), or else the primary place, 0. An empty placeholder matches
// nothing.
//
// A value in any of places that holds PlaceholderPrefix but is not
// placeholder so rendered (another session's placeholder, or one altered)
// fails with ErrForeignPlaceholder: such a request is refused, never given
// a credential.
func Choose(out *http.Request, places []Placement, placeholder string) (int, error) {
	chosen := -1
	for i, pl := range places {
		ours, foreign := carries(out, pl, placeholder)
		if foreign {
			return 0, fmt.Errorf("%w: %s carries a placeholder that is not this session's", ErrForeignPlaceholder, pl.where())
		}
		if ours && chosen < 0 {
			chosen = i
		}
	}
	if chosen < 0 {
		return 0, nil
	}
	return chosen, nil
}

// ClearOthers removes what the client put in each of places except
// places[keep]: every value of the header, or every query parameter of
// that name. The credential then leaves in one place only.
func ClearOthers(out *http.Request, places []Placement, keep int) {
	for i, pl := range places {
		if i == keep {
			continue
		}
		if pl.Query != "" {
			removeQuery(out.URL, pl.Query)
			continue
		}
		for k := range out.Header {
			if strings.EqualFold(k, pl.Header) {
				delete(out.Header, k)
			}
		}
	}
}

// carries reports whether out holds placeholder at pl (ours) and whether it
// holds any other value with the placeholder prefix there (foreign).
func carries(out *http.Request, pl Placement, placeholder string) (ours, foreign bool) {
	want := ""
	if placeholder != "" {
		want = render(pl.Format, placeholder)
	}
	check := func(v string) {
		switch {
		case want != "" && strings.EqualFold(v, want):
			ours = true
		case hasPlaceholder(v):
			foreign = true
		}
	}
	if pl.Query != "" {
		if out.URL == nil {
			return false, false
		}
		for part := range strings.SplitSeq(out.URL.RawQuery, "&") {
			for sub := range strings.SplitSeq(part, ";") {
				key, val, _ := strings.Cut(sub, "=")
				if key != pl.Query {
					if dec, err := url.QueryUnescape(key); err != nil || dec != pl.Query {
						continue
					}
				}
				if dec, err := url.QueryUnescape(val); err == nil {
					val = dec
				}
				check(val)
			}
		}
		return ours, foreign
	}
	for k, vs := range out.Header {
		if !strings.EqualFold(k, pl.Header) {
			continue
		}
		for _, v := range vs {
			check(v)
		}
	}
	return ours, foreign
}

// removeQuery drops every parameter named name from u's raw query (compared
// raw and decoded, as setQuery does); the others keep their bytes and order.
func removeQuery(u *url.URL, name string) {
	if u == nil || u.RawQuery == "" {
		return
	}
	var kept []string
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		if part == "" || queryPartNames(part, name) {
			continue
		}
		kept = append(kept, part)
	}
	u.RawQuery = strings.Join(kept, "&")
}

// where names a place in messages.
func (pl Placement) where() string {
	if pl.Query != "" {
		return "query parameter " + pl.Query
	}
	return "header " + pl.Header
}
