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
	git   *gitPush // a git push the approval gate read: refused in git's terms
	// admitted: Budgets.Admit counted the request, so what it uses is
	// charged when it ends.
	admitted bool
	// unreported: the answer to this model call ended without a usage
	// report (set by the answer's tap), so under a token budget it is
	// charged the whole budget (charge).
	unreported bool
	// unbook gives back the memory booked for a body read whole to check
	// its arguments (readChecked) or its model (readWhole); nil when none
	// was.
	unbook func()
	// whole is the body read whole to check its arguments, which the
	// request now carries; nil when the body streams.
	whole []byte
	// proposal is the id of the proposal an unknown request of a session
	// in learn or ask mode joined or opened (learn, ask); "" when none.
	proposal string
	// approval is the approval that released the request (hold); "" when
	// none did.
	approval string
	// asked is approval when it released an unknown request (ask): the
	// request is then decided anew, and sent once.
	asked string
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
	// subset bounds the request to part of its connector's grants; nil:
	// policy alone.
	subset *Subset
	// run places the request in an action run's call tree (its record's
	// run_id and parent_audit_id); zero outside a run.
	run RunRef
	// step: an action step sent the request (Call.Step), so internal
	// operations are reachable. Only Execute sets it; every request a
	// client sends through the proxy (a tunnel, the transparent listener,
	// an HTTP/2 stream, an upgrade) has it false.
	step bool
	// client: a proxy client sent the request (newExchange), so in ask
	// mode a request no operation matches is held for a human. A call
	// (Execute) names its operation, and is never held as unknown.
	client bool
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
	return &exchange{in: r, t: t, terms: terms{wait: p.approvalHold(), client: true}}
}

// outbound builds the request sent upstream from the inbound one: the
// canonical target and outboundHeader's headers. An absent User-Agent is
// sent as none (the empty value tells the transport so), not as Go's.
func (x *exchange) outbound() *http.Request {
	in := x.in
	h := outboundHeader(in.Header, x.op)
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

// outboundHeader is what is forwarded of the inbound headers in, before
// the credential is added: all but the hop-by-hop headers (and those
// Connection names), Forwarded and X-Forwarded-* (the upstream learns
// nothing of the sandbox) and X-Aileron-Audit-Id; "TE: trailers" and the
// upgrade the gate allowed (a WebSocket) are put back. For an operation
// bound to a credential the headers asking for a compressed answer go too:
// a compressed echo of the secret would slip past the redactor; for a
// model API's WebSocket, Sec-WebSocket-Extensions goes (its frames stay
// uncompressed, so its turns can be read). The
// approval preview lists exactly these headers, so a human approves what
// is sent.
func outboundHeader(in http.Header, op *policy.Operation) http.Header {
	h := in.Clone()
	if h == nil {
		h = make(http.Header)
	}
	dropHopByHop(h)
	for k := range h {
		if k == "Forwarded" || k == HeaderAuditID || strings.HasPrefix(k, "X-Forwarded-") {
			delete(h, k)
		}
	}
	if op != nil && (!op.Spec.Credential.IsZero() || op.Spec.Usage != "") { // masked, or its usage read
		for _, k := range acceptCodingHeaders {
			delete(h, k)
		}
	}
	if httpguts.HeaderValuesContainsToken(in["Te"], "trailers") {
		h["Te"] = []string{"trailers"}
	}
	if up := upgradeType(in); up != "" {
		h["Connection"], h["Upgrade"] = []string{"Upgrade"}, []string{up}
		if op != nil && op.Spec.Usage != "" {
			// A model API's frames are read for its turns' usage: no
			// permessage-deflate, which would compress them out of reach.
			delete(h, "Sec-Websocket-Extensions")
		}
	}
	return h
}

// keepOpen is a request body whose Close does nothing: the inbound body
// belongs to the tunnel, which discards or closes it after the answer.
type keepOpen struct{ io.Reader }

func (keepOpen) Close() error { return nil }

// dropHopByHop removes from h (a request's or a response's headers) the
// hop-by-hop headers and those its Connection lines name.
func dropHopByHop(h http.Header) {
	for _, line := range h["Connection"] {
		for name := range strings.SplitSeq(line, ",") {
			if name = textproto.TrimString(name); name != "" {
				delete(h, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	for k := range h {
		if policy.HopByHop(k) {
			delete(h, k)
		}
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
