package dataplane

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/printable"
)

// target is an inner request's target exactly as the client sent it.
type target struct {
	path  string // escaped path, as sent
	query string // raw query, as sent; never logged or audited
}

// logPath is the path for logs: as sent, cut to a sane length.
func (t target) logPath() string {
	if len(t.path) > 512 {
		return t.path[:512] + "…"
	}
	return t.path
}

// url is the outbound URL: the CONNECT authority, the path and query
// byte-for-byte as the client sent them (RawPath keeps the escaping).
func (t target) url(a policy.Authority) *url.URL {
	u := &url.URL{Scheme: "https", Host: a.Host, RawQuery: t.query}
	if strings.Contains(a.Host, ":") {
		u.Host = "[" + a.Host + "]"
	}
	if a.Port != 443 {
		u.Host += ":" + strconv.Itoa(a.Port)
	}
	if p, err := url.PathUnescape(t.path); err == nil {
		u.Path, u.RawPath = p, t.path
	} else {
		u.Path = t.path
	}
	return u
}

// innerTarget splits r's request target and checks that every name the
// request carries for its destination agrees with the tunnel's CONNECT
// authority: the Host header, an absolute-form target, and the TLS SNI
// (checked at handshake). It refuses headers that would make the upstream
// act on another request than the one decided (method overrides, an h2c
// upgrade). It never normalises: a path that is not canonical
// is refused, not cleaned. Errors are *DenyError.
func innerTarget(t *tunnel, r *http.Request) (target, error) {
	uri := r.RequestURI
	var tgt target
	rest := uri
	if !strings.HasPrefix(uri, "/") {
		scheme, after, ok := strings.Cut(uri, "://")
		if !ok || !strings.EqualFold(scheme, "https") {
			return tgt, deny(policy.ReasonBadRequest, "request target %q is neither a path nor an https:// URL", clip(uri))
		}
		end := strings.IndexAny(after, "/?#")
		if end < 0 {
			end = len(after)
		}
		a, err := policy.ParseAuthority(after[:end], 443)
		if err != nil || a != t.authority {
			return tgt, deny(policy.ReasonAuthorityMismatch, "absolute-form target names %q but the tunnel was opened to %s", clip(after[:end]), t.authority)
		}
		rest = after[end:]
		if rest == "" || rest[0] == '?' {
			rest = "/" + rest
		}
	}
	if r.ProtoMajor == 2 && r.TLS == nil { // x/net leaves r.TLS out for a stream whose :scheme is not https
		return tgt, deny(policy.ReasonInsecureScheme, "the stream says :scheme http; requests through Aileron go to the upstream over https only, so send :scheme https")
	}
	if r.Method == http.MethodConnect { // h2's CONNECT (extended or not): a tunnel inside the tunnel
		return tgt, deny(policy.ReasonBadRequest, "CONNECT inside an intercepted tunnel is not forwarded")
	}
	tgt.path, tgt.query, _ = strings.Cut(rest, "?")
	if i := strings.IndexFunc(rest, unsafeTargetRune); i >= 0 {
		// HTTP/2 lets a space or a raw non-ASCII byte through in :path; an
		// HTTP/1.1 upstream would read its request line another way.
		return tgt, deny(policy.ReasonBadRequest, "the request target has the byte %q, which must be percent-encoded", rest[i])
	}
	if h, err := policy.ParseAuthority(r.Host, 443); err != nil || h != t.authority {
		if r.ProtoMajor == 2 { // another origin on a shared connection: 421, the client may retry it on its own
			return tgt, &misdirectedError{deny(policy.ReasonAuthorityMismatch, ":authority %q is not this tunnel's %s; open a connection to that host", clip(r.Host), t.authority)}
		}
		return tgt, deny(policy.ReasonAuthorityMismatch, "Host header %q does not match the CONNECT target %s", clip(r.Host), t.authority)
	}
	if t.sni != "" && t.sni != t.authority.Host {
		return tgt, deny(policy.ReasonAuthorityMismatch, "TLS SNI %q does not match the CONNECT target %s", t.sni, t.authority)
	}
	if strings.ContainsRune(tgt.path, '#') {
		return tgt, deny(policy.ReasonNonCanonicalPath, "path %q contains '#'", clip(tgt.path))
	}
	if err := policy.CheckPath(tgt.path); err != nil {
		return tgt, deny(policy.ReasonNonCanonicalPath, "path %q is not canonical (%v); send the path in its plain form without dot segments, empty segments or encoded separators", clip(tgt.path), err)
	}
	if name := methodOverride(r.Header, tgt.query); name != "" {
		return tgt, deny(policy.ReasonMethodOverride, "the request carries %s, which asks the upstream to treat this %s as another method "+
			"than the one policy decided on; send the method itself instead", clip(name), r.Method)
	}
	if err := h2cUpgrade(r); err != nil {
		return tgt, err
	}
	return tgt, nil
}

// unsafeTargetRune reports a byte a request target must not carry raw:
// controls, space, DEL and anything outside ASCII.
func unsafeTargetRune(r rune) bool { return r <= ' ' || r >= 0x7f }

// clip cuts s to at most 200 bytes (never inside a UTF-8 sequence), marking
// the cut with "…": a client-chosen value quoted in a message or a line.
func clip(s string) string {
	if n := printable.Cut(s, 200); n < len(s) {
		return s[:n] + "…"
	}
	return s
}
