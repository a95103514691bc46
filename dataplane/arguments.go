package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/aileronhq/aileron/policy"
)

// defaultMaxCheckedBody is Proxy.MaxCheckedBody when zero.
const defaultMaxCheckedBody = 1 << 20

// argumentsError is a request whose arguments do not fit its operation's
// input schema (or cannot be read as arguments: a malformed query): 400
// invalid_arguments. The message names the field and the rule, never a
// value.
type argumentsError struct{ field, rule, msg string }

func (e *argumentsError) Error() string { return string(policy.ReasonInvalidArguments) + ": " + e.msg }

// bodyTooLargeError is a body longer than the bound for the bodies read
// whole before they are sent: 413 body_too_large, never forwarded.
type bodyTooLargeError struct {
	size  int64 // its Content-Length; -1 when it had none and ran past the bound
	limit int64
}

func (e *bodyTooLargeError) Error() string {
	what := fmt.Sprintf("the body is %d bytes", e.size)
	if e.size < 0 {
		what = fmt.Sprintf("the body is longer than %d bytes", e.limit)
	}
	return fmt.Sprintf("%s; this operation's request bodies are checked against its input schema before anything is sent, "+
		"and the proxy reads at most %d bytes of one (proxy.max_checked_body): send a smaller body, or have the operator raise proxy.max_checked_body",
		what, e.limit)
}

func (p *Proxy) maxCheckedBody() int64 {
	if p.MaxCheckedBody > 0 {
		return p.MaxCheckedBody
	}
	return defaultMaxCheckedBody
}

// checkArguments checks a matched request's arguments (its path
// variables, its query and, when the operation's schema describes it, its
// body) against the operation's input schema, before the approval gate and
// before anything is recorded, injected or sent. An operation without an
// input schema is not checked (its query is not even parsed). A checked
// body is read whole, within proxy.max_checked_body, into x.whole, and
// the request then carries exactly those bytes with a Content-Length;
// every other body keeps streaming.
func (p *Proxy) checkArguments(x *exchange, d policy.Decision) error {
	op := d.Op
	if op == nil || op.InputSchema() == nil {
		return nil
	}
	if want := x.terms.want; want != nil && (!sameOperation(want, op) || want.Hash != op.Hash) {
		return nil // a call built for another operation: the gate refuses it for that
	}
	r := x.in
	q, err := url.ParseQuery(x.tgt.query) // strict: a query it cannot read is refused, never skipped
	if err != nil {
		return &argumentsError{field: "query", rule: "syntax", msg: "the query is not valid form encoding (each parameter name=value, percent-encoded, separated by '&'; " +
			"no ';' and no bare '%'), so its arguments cannot be checked against the operation's schema; encode the query and send it again"}
	}
	v := policy.ArgumentValues{Path: d.Params, Query: q, ContentType: r.Header.Get("Content-Type")}
	switch {
	case op.ChecksBody():
		if len(r.Header.Values("Content-Type")) > 1 {
			return &argumentsError{field: "body", rule: "content_type", msg: "the request has more than one Content-Type header, so the check and the upstream " +
				"could read its body by different ones; send one (content_type)"}
		}
		if v.Body, err = p.readChecked(x); err != nil {
			return err
		}
	case !methodCarriesBody(r.Method):
		if err := p.refuseBody(x); err != nil {
			return err
		}
	}
	if err := op.CheckArguments(v); err != nil {
		var ae *policy.ArgumentError
		if errors.As(err, &ae) {
			return &argumentsError{field: ae.Field, rule: ae.Rule, msg: ae.Message}
		}
		return &argumentsError{field: "arguments", rule: "schema", msg: "the arguments cannot be checked against the operation's schema: " + err.Error()}
	}
	return nil
}

// refuseBody refuses a body on a request whose operation's schema describes
// none and whose method does not carry one (a GET, a DELETE): the upstream
// could read arguments from it unchecked. A body of unknown length is read
// to its end to tell an empty one (an HTTP/2 stream ended by an empty DATA
// frame) from one with bytes; an empty one is then sent as no body.
func (p *Proxy) refuseBody(x *exchange) error {
	r := x.in
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	_, release, err := p.readBody(r, x.t.sess.ID, 0)
	var te *bodyTooLargeError
	switch {
	case errors.As(err, &te):
		return &argumentsError{field: "body", rule: "body", msg: fmt.Sprintf("this %s operation's input schema describes no request body, "+
			"yet the request carries one, which would reach the upstream unchecked; send the arguments where the operation declares them, without a body (body)", clip(r.Method))}
	case err != nil:
		var se *stalledError
		if errors.As(err, &se) {
			return err
		}
		return &DenyError{Reason: policy.ReasonBadRequest, Message: "reading the request body failed: " + err.Error()}
	}
	release()
	r.Body, r.ContentLength = http.NoBody, 0
	r.TransferEncoding = nil
	return nil
}

// methodCarriesBody reports whether a request of method m is expected to
// carry a body (POST, PUT, PATCH), as the argument model places arguments.
func methodCarriesBody(m string) bool {
	return m == http.MethodPost || m == http.MethodPut || m == http.MethodPatch
}

// misfit puts on a refused request's record the field and rule its
// arguments broke (details field and rule), when that is why it was
// refused.
func (rec *Record) misfit(err error) {
	var ae *argumentsError
	if errors.As(err, &ae) {
		rec.Details = map[string]string{"field": clip(ae.field), "rule": clip(ae.rule)}
	}
}

// readChecked reads the request's whole body for its argument check and
// makes the request carry exactly those bytes (x.whole; the memory is given
// back by x.unbook). An encoded body is refused: its schema describes the
// plain one.
func (p *Proxy) readChecked(x *exchange) ([]byte, error) {
	r := x.in
	for _, ce := range r.Header.Values("Content-Encoding") {
		if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
			return nil, deny(policy.ReasonEncodedBody, "the request body is %q-encoded; this operation checks its body against its input schema "+
				"before anything is sent, so it must be plain: send it without Content-Encoding", clip(ce))
		}
	}
	if r.Body == nil || r.Body == http.NoBody {
		x.whole = []byte{}
		return x.whole, nil
	}
	body, release, err := p.readBody(r, x.t.sess.ID, p.maxCheckedBody())
	if err != nil {
		var se *stalledError
		var te *bodyTooLargeError
		var un *unavailableError
		if errors.As(err, &se) || errors.As(err, &te) || errors.As(err, &un) {
			return nil, err
		}
		return nil, &DenyError{Reason: policy.ReasonBadRequest, Message: "reading the request body failed: " + err.Error()}
	}
	x.unbook = sync.OnceFunc(release) // once the body was sent (relay), or at the end
	x.whole = body
	r.Body = &prefixedBody{Reader: bytes.NewReader(body), Closer: r.Body}
	r.ContentLength = int64(len(body))
	r.TransferEncoding, r.Trailer = nil, nil // exactly the checked bytes, with a Content-Length
	return body, nil
}

// readBody reads r's whole body, at most limit bytes, into memory booked in
// the proxy's budget for bodies read whole before they are sent
// (p.checking); release gives the memory back. It does not change r.Body
// when the body reads whole (the caller replays the bytes). Errors: a
// *bodyTooLargeError for a longer body (a Content-Length over limit is
// refused unread), an *unavailableError when the budget is spent, or the
// read's own error; what was read is then put back in front of the rest.
func (p *Proxy) readBody(r *http.Request, session string, limit int64) (buf []byte, release func(), err error) {
	release = func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return []byte{}, release, nil
	}
	if r.ContentLength > limit {
		return nil, release, &bodyTooLargeError{size: r.ContentLength, limit: limit}
	}
	var booked int64
	fail := func(tail []byte, err error) ([]byte, func(), error) {
		r.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(append(buf, tail...)), r.Body), Closer: r.Body}
		p.checking.give(session, booked)
		return nil, func() {}, err
	}
	full := func() error {
		return &unavailableError{reason: policy.ReasonNotReady, err: fmt.Errorf(
			"the proxy's memory for request bodies read whole before they are sent (to check a model call's model or an operation's arguments) "+
				"is in use (%d MiB in all, %d MiB a session); retry when this session's other calls are done",
			maxCheckedTotal>>20, maxCheckedPerSession>>20)}
	}
	if r.ContentLength > 0 { // booked before it is allocated
		if p.checking.take(session, r.ContentLength, maxCheckedTotal, maxCheckedPerSession) != "" {
			return nil, release, full()
		}
		booked, buf = r.ContentLength, make([]byte, 0, r.ContentLength)
	}
	chunk := p.buffers.get()
	defer p.buffers.put(chunk)
	for {
		n, rerr := r.Body.Read(*chunk)
		if n > 0 {
			if int64(len(buf)+n) > limit {
				return fail((*chunk)[:n], &bodyTooLargeError{size: -1, limit: limit})
			}
			if more := int64(len(buf)+n) - booked; more > 0 {
				if p.checking.take(session, more, maxCheckedTotal, maxCheckedPerSession) != "" {
					return fail((*chunk)[:n], full())
				}
				booked += more
			}
			buf = append(buf, (*chunk)[:n]...)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fail(nil, rerr)
		}
	}
	return buf, func() { p.checking.give(session, booked) }, nil
}
