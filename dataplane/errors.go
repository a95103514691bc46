package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
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

// misdirectedError is an HTTP/2 stream for another origin than its
// connection's (RFC 9113 §9.1.1): 421, not 403.
type misdirectedError struct{ *DenyError }

// upstreamError wraps a failure to reach or talk to the upstream, keeping the
// host for the client's message; the raw error is logged, never sent.
type upstreamError struct {
	Authority string
	Err       error
}

func (e *upstreamError) Error() string { return e.Authority + ": " + e.Err.Error() }
func (e *upstreamError) Unwrap() error { return e.Err }

func mkRefusal(status int, class Class, reason policy.Reason, msg string) Refusal {
	return Refusal{Status: status, Class: class, Reason: reason, Message: msg}
}

// classify maps any error the pipeline can produce to what the client sees.
// It is the only place errors become HTTP statuses.
func classify(err error) Refusal {
	var de *DenyError
	var ae *AddrError
	var ue *upstreamError
	var un *unavailableError
	if ae, ok := isApprovalError(err); ok {
		return Refusal{Status: http.StatusForbidden, Class: ClassCapabilityDenied, Reason: ae.reason, Message: ae.msg,
			ApprovalID: ae.res.ID, ReviewURL: ae.res.ReviewURL, RetryAfter: ae.retry}
	}
	var re *revokedError
	var se *stalledError
	var le *limitError
	var me *misdirectedError
	var be *BudgetError
	var ge *argumentsError
	var te *bodyTooLargeError
	switch {
	case errors.Is(err, ErrSessionsUnavailable): // before revokedError: no session was found dead
		return unvouchedRefusal()
	case errors.As(err, &le):
		return Refusal{Status: http.StatusTooManyRequests, Class: ClassLimited, Reason: policy.ReasonApprovalLimit, Message: le.msg,
			RetryAfter: 30 * time.Second}
	case errors.As(err, &be):
		return budgetRefusal(be)
	case errors.As(err, &re):
		return revokedRefusal(re.err)
	case errors.As(err, &me):
		return mkRefusal(http.StatusMisdirectedRequest, ClassCapabilityDenied, me.Reason, me.Message)
	case errors.As(err, &se):
		return stalledRefusal(se)
	case errors.As(err, &ge):
		return mkRefusal(http.StatusBadRequest, ClassBadRequest, policy.ReasonInvalidArguments, ge.msg)
	case errors.As(err, &te):
		return mkRefusal(http.StatusRequestEntityTooLarge, ClassBadRequest, policy.ReasonBodyTooLarge, te.Error())
	case errors.As(err, &de):
		return mkRefusal(http.StatusForbidden, ClassCapabilityDenied, de.Reason, de.Message)
	case errors.Is(err, ErrProxyAuth):
		return mkRefusal(http.StatusProxyAuthRequired, ClassProxyAuth, policy.ReasonProxyAuth,
			"this proxy needs the session's credentials: use the proxy_url from `aileron session create` (http://SESSION_ID:TOKEN@host:port)")
	case errors.Is(err, ErrMalformedRequest):
		return mkRefusal(http.StatusBadRequest, ClassBadRequest, policy.ReasonMalformedRequest, err.Error())
	case errors.As(err, &ae):
		return mkRefusal(http.StatusForbidden, ClassCapabilityDenied, policy.ReasonPrivateAddress, ae.Error())
	case errors.Is(err, ErrCredentialUnavailable):
		return mkRefusal(http.StatusForbidden, ClassCapabilityDenied, policy.ReasonCredentialUnavailable,
			"the credential this operation needs is not available to the proxy; an administrator can check `aileron credential list` and the connector's binding")
	case errors.As(err, &un):
		r := mkRefusal(http.StatusServiceUnavailable, ClassUnavailable, un.reason,
			"the proxy cannot process requests safely right now ("+string(un.reason)+"); try again shortly")
		r.RetryAfter = 5 * time.Second
		return r
	}
	where := "the upstream"
	if errors.As(err, &ue) {
		where = ue.Authority
	}
	if isTLSError(err) {
		return mkRefusal(http.StatusBadGateway, ClassUpstreamError, policy.ReasonUpstreamTLS,
			"the TLS certificate of "+where+" did not verify; the proxy only talks to upstreams with valid certificates")
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return mkRefusal(http.StatusGatewayTimeout, ClassUpstreamError, policy.ReasonUpstreamTimeout,
			where+" did not answer in time")
	}
	return mkRefusal(http.StatusBadGateway, ClassUpstreamError, policy.ReasonUpstreamUnavailable,
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
