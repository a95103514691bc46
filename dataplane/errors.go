package dataplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// DenyError is a policy decision to refuse a request. Its Reason is the
// machine-readable reason in the client's envelope and the audit line.
type DenyError struct {
	Reason  policy.Reason
	Message string
}

func (e *DenyError) Error() string { return string(e.Reason) + ": " + e.Message }

func deny(reason policy.Reason, format string, args ...any) *DenyError {
	return &DenyError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// upstreamError wraps a failure to reach or talk to the upstream, keeping the
// host for the client's message; the raw error is logged, never sent.
type upstreamError struct {
	Authority string
	Err       error
}

func (e *upstreamError) Error() string { return e.Authority + ": " + e.Err.Error() }
func (e *upstreamError) Unwrap() error { return e.Err }

// envelope is the one JSON shape every refusal takes.
type envelope struct {
	Error envelopeBody `json:"error"`
}

type envelopeBody struct {
	Class      string `json:"class"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
	AuditID    string `json:"audit_id,omitempty"`
	ApprovalID string `json:"approval_id,omitempty"`
	ReviewURL  string `json:"review_url,omitempty"`
}

// refusal is what the client is told about err.
type refusal struct {
	Status  int
	Class   string
	Reason  policy.Reason
	Message string
	// Approval is set for a held request's outcome.
	Approval *ApprovalResult
	// RetryAfter, when positive, becomes a Retry-After header.
	RetryAfter time.Duration
}

func mkRefusal(status int, class string, reason policy.Reason, msg string) refusal {
	return refusal{Status: status, Class: class, Reason: reason, Message: msg}
}

// classify maps any error the pipeline can produce to what the client sees.
// It is the only place errors become HTTP statuses.
func classify(err error) refusal {
	var de *DenyError
	var ae *AddrError
	var ue *upstreamError
	var un *unavailableError
	if ae, ok := isApprovalError(err); ok {
		res := ae.res
		return refusal{Status: http.StatusForbidden, Class: "capability_denied", Reason: ae.reason, Message: ae.msg,
			Approval: &res, RetryAfter: ae.retry}
	}
	switch {
	case errors.As(err, &de):
		return mkRefusal(http.StatusForbidden, "capability_denied", de.Reason, de.Message)
	case errors.Is(err, ErrProxyAuth):
		return mkRefusal(http.StatusProxyAuthRequired, "proxy_auth", policy.ReasonProxyAuth,
			"this proxy needs the session's credentials: use the proxy_url from `aileron session create` (http://SESSION_ID:TOKEN@host:port)")
	case errors.Is(err, ErrMalformedRequest):
		return mkRefusal(http.StatusBadRequest, "bad_request", "malformed_request", err.Error())
	case errors.As(err, &ae):
		return mkRefusal(http.StatusForbidden, "capability_denied", policy.ReasonPrivateAddress, ae.Error())
	case errors.Is(err, ErrCredentialUnavailable):
		return mkRefusal(http.StatusForbidden, "capability_denied", policy.ReasonCredentialUnavailable,
			"the credential this operation needs is not available to the proxy; an administrator can check `aileron credential list` and the connector's binding")
	case errors.As(err, &un):
		return mkRefusal(http.StatusServiceUnavailable, "unavailable", policy.Reason(un.reason),
			"the proxy cannot process requests safely right now ("+un.reason+"); try again shortly")
	}
	where := "the upstream"
	if errors.As(err, &ue) {
		where = ue.Authority
	}
	if isTLSError(err) {
		return mkRefusal(http.StatusBadGateway, "upstream_error", policy.ReasonUpstreamTLS,
			"the TLS certificate of "+where+" did not verify; the proxy only talks to upstreams with valid certificates")
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return mkRefusal(http.StatusGatewayTimeout, "upstream_error", policy.ReasonUpstreamTimeout,
			where+" did not answer in time")
	}
	return mkRefusal(http.StatusBadGateway, "upstream_error", policy.ReasonUpstreamUnavailable,
		"could not reach "+where)
}

func isTLSError(err error) bool {
	var ve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var ra tls.RecordHeaderError
	var ae tls.AlertError
	return errors.As(err, &ve) || errors.As(err, &ua) || errors.As(err, &he) ||
		errors.As(err, &ci) || errors.As(err, &ra) || errors.As(err, &ae)
}

// writeRefusal answers w with the envelope for r.
func writeRefusal(w http.ResponseWriter, r refusal, auditID string) {
	noteRefusal(w, r)
	body := marshalEnvelope(r, auditID)
	refusalHeaders(w.Header(), r, auditID, len(body))
	w.WriteHeader(r.Status)
	_, _ = w.Write(body)
}

// refusalResponse is writeRefusal for code paths that hand back an
// *http.Response (goproxy's CONNECT rejection). The connection closes after.
func refusalResponse(req *http.Request, r refusal, auditID string) *http.Response {
	body := marshalEnvelope(r, auditID)
	resp := &http.Response{
		StatusCode: r.Status, Status: fmt.Sprintf("%d %s", r.Status, http.StatusText(r.Status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header), Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req, Close: true,
	}
	refusalHeaders(resp.Header, r, auditID, len(body))
	return resp
}

func refusalHeaders(h http.Header, r refusal, auditID string, n int) {
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(n))
	h.Set("Cache-Control", "no-store")
	if r.Status == http.StatusProxyAuthRequired {
		h.Set("Proxy-Authenticate", `Basic realm="aileron"`)
	}
	if auditID != "" {
		h.Set("X-Aileron-Audit-Id", auditID)
	}
	if r.Approval != nil && r.Approval.ID != "" {
		h.Set("X-Aileron-Approval-Id", r.Approval.ID)
	}
	if r.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(r.RetryAfter.Seconds())))
	}
}

func marshalEnvelope(r refusal, auditID string) []byte {
	eb := envelopeBody{Class: r.Class, Reason: string(r.Reason), Message: r.Message, AuditID: auditID}
	if r.Approval != nil {
		eb.ApprovalID, eb.ReviewURL = r.Approval.ID, r.Approval.ReviewURL
	}
	b, err := json.Marshal(envelope{Error: eb})
	if err != nil { // cannot happen for strings; keep the contract anyway
		return []byte(`{"error":{"class":"internal","reason":"internal","message":"encoding failed"}}`)
	}
	return append(b, '\n')
}
