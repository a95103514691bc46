package dataplane

import (
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// exchange is one request on the request path: the inbound request as the
// client sent it, the terms its entry point set, and what the stages learn
// on the way (the record, the target, the matched operation, the outbound
// copy and its redactor). Every stage takes it as an argument; nothing
// rides in the request's context, and no stage asks who called.
type exchange struct {
	in    *http.Request // as the client sent it; only the gate replaces its body (with the approved bytes)
	t     *tunnel
	terms terms
	rec   *Record
	tgt   target
	op    *policy.Operation // the matched operation; nil for none
	body  *bodyClock        // nil without a body
	out   *http.Request     // the outbound copy: the only request a credential is written to
	red   *inject.Redactor  // masks the injected secret; nil without one
	sent  time.Time
}

// terms are how an entry point wants its request gated. A proxy client's
// request is held for proxy.approval_hold; Execute passes its Call's.
type terms struct {
	// want is the operation a call was built for; a request that policy
	// matches to any other is refused. nil: whatever policy matches.
	want *policy.Operation
	// wait is how long an approval-gated request is held; 0 answers
	// approval_pending at once.
	wait time.Duration
	// approvedBy names an action approval already consumed for the
	// request; "" holds it for a new one.
	approvedBy string
}

// ending is how the request path ended, for its entry point to act on.
type ending struct {
	// refusal is the refusal the client was answered with; nil when the
	// upstream's answer was relayed (in full or in part).
	refusal *Refusal
	// abort: the answer is incomplete (it broke off after its head, or
	// the client left before anything was sent). HTTP/1.1 closes the
	// connection without ending the body, HTTP/2 resets the stream, and a
	// call gets an upstream_unavailable refusal.
	abort bool
}

// newExchange is the exchange of a request a proxy client sent in t.
func (p *Proxy) newExchange(r *http.Request, t *tunnel) *exchange {
	return &exchange{in: r, t: t, terms: terms{wait: p.approvalHold()}}
}

// outbound builds the request sent upstream from the inbound one: the
// canonical target, and the inbound headers without the hop-by-hop ones
// (and those Connection names), Proxy-Authorization, Forwarded,
// X-Forwarded-* and X-Aileron-Audit-Id. "TE: trailers" and a WebSocket
// upgrade (which the gate already allowed) are kept; request trailers
// never are. An absent User-Agent stays absent.
func (x *exchange) outbound() *http.Request {
	in := x.in
	h := in.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	up := upgradeType(in.Header)
	stripForwarding(h)
	if httpguts.HeaderValuesContainsToken(in.Header["Te"], "trailers") {
		h["Te"] = []string{"trailers"}
	}
	if up != "" {
		h["Connection"], h["Upgrade"] = []string{"Upgrade"}, []string{up}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""}
	}
	out := &http.Request{
		Method: in.Method, URL: x.tgt.url(x.t.authority),
		Proto: in.Proto, ProtoMajor: in.ProtoMajor, ProtoMinor: in.ProtoMinor,
		Header: h, ContentLength: in.ContentLength, TransferEncoding: in.TransferEncoding,
	}
	if in.Body != nil && in.Body != http.NoBody && in.ContentLength != 0 {
		out.Body = keepOpen{in.Body} // a failed exchange closes it: the tunnel still reads what is left
	}
	return out.WithContext(in.Context())
}

// keepOpen is a request body whose Close does nothing: the inbound body
// belongs to the tunnel, which discards or closes it after the answer.
type keepOpen struct{ io.Reader }

func (keepOpen) Close() error { return nil }

// hopHeaders are the hop-by-hop headers of RFC 9110 section 7.6.1 and the
// older ones proxies drop too.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// dropHopByHop removes from h the hop-by-hop headers and those its
// Connection lines name.
func dropHopByHop(h http.Header) {
	for _, line := range h["Connection"] {
		for name := range strings.SplitSeq(line, ",") {
			if name = textproto.TrimString(name); name != "" {
				delete(h, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// stripForwarding removes from h what is never forwarded as the client
// sent it: the hop-by-hop headers, Forwarded and X-Forwarded-* (the
// upstream learns nothing about the sandbox), and X-Aileron-Audit-Id.
func stripForwarding(h http.Header) {
	dropHopByHop(h)
	for _, k := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", HeaderAuditID} {
		delete(h, k)
	}
}

// upgradeType is the protocol h asks to switch to ("" for none): its
// Upgrade header, when Connection names "upgrade".
func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}
