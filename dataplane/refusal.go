package dataplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aileronhq/aileron/policy"
)

// Headers the daemon sets on its answers, on every face (proxy, sandbox
// API, admin API).
const (
	// HeaderAuditID names the audit line of the decision (allowed responses
	// and refusals alike).
	HeaderAuditID = "X-Aileron-Audit-Id"
	// HeaderApprovalID names the approval a refused or accepted request
	// waits on.
	HeaderApprovalID = "X-Aileron-Approval-Id"
	// HeaderProposalID names the proposal a refused or held unknown
	// request of a session in learn or ask mode was recorded into.
	HeaderProposalID = "X-Aileron-Proposal-Id"
	// HeaderMessage is the refusal's (or a pending action's) message on one
	// line, for clients that do not show bodies (HeaderLine makes it safe).
	HeaderMessage = "X-Aileron-Message"
	// HeaderUpstreamStatus is the upstream's status where the daemon's own
	// status is something else (sandbox API raw output, shims).
	HeaderUpstreamStatus = "X-Aileron-Upstream-Status"
	// HeaderTruncated says a sandbox API answer holds a cut upstream body.
	HeaderTruncated = "X-Aileron-Truncated"
)

// Class is the coarse kind of a refusal, the envelope's "class": a closed
// set, one per group of statuses.
type Class string

// Classes.
const (
	ClassCapabilityDenied Class = "capability_denied" // 403: policy, approval, credentials
	ClassProxyAuth        Class = "proxy_auth"        // 407 (401 on the sandbox API): no or wrong session
	ClassBadRequest       Class = "bad_request"       // 400, 408, 413 from the proxy: malformed framing, a stalled or too large body, arguments that do not fit
	ClassInvalidRequest   Class = "invalid_request"   // 400, 405, 413 from an API: bad arguments
	ClassNotFound         Class = "not_found"         // 404
	ClassConflict         Class = "conflict"          // 409
	ClassUnauthenticated  Class = "unauthenticated"   // 401 from the approvals page
	ClassUpstreamError    Class = "upstream_error"    // 502, 504
	ClassUnavailable      Class = "unavailable"       // 503: a stage that cannot work now
	ClassLimited          Class = "limited"           // 429: a limit is reached (pending approvals, held bodies)
	ClassInternal         Class = "internal"          // 500
	ClassUnknown          Class = "unknown"           // a client read an answer that is not the envelope
)

// Refusal is the one error answer of the daemon, on every face: the proxy
// (CONNECT and inner requests, and Execute's CallResult), the sandbox API,
// the admin API and the approvals page. It marshals as the envelope
//
//	{["status": Outcome,] "error": {"class", "reason", "message"[, "audit_id", "approval_id", "review_url", "proposal_id"]}}
//
// and WriteRefusal (or Response) is the only place it becomes HTTP.
type Refusal struct {
	// Status is the HTTP status.
	Status int `json:"-"`
	// Class is the coarse kind; Reason the machine reason, from the closed
	// set of policy.Reason.
	Class  Class         `json:"class"`
	Reason policy.Reason `json:"reason"`
	// Message is one human sentence saying what happened and what to do.
	Message string `json:"message"`
	// AuditID names the decision's audit line, when there is one.
	AuditID string `json:"audit_id,omitempty"`
	// ApprovalID and ReviewURL are set for a held request's outcome.
	ApprovalID string `json:"approval_id,omitempty"`
	ReviewURL  string `json:"review_url,omitempty"`
	// ProposalID names the proposal an unknown request of a session in
	// learn or ask mode was recorded into (unknown.go, ask.go).
	ProposalID string `json:"proposal_id,omitempty"`
	// RetryAfter, when positive, becomes a Retry-After header.
	RetryAfter time.Duration `json:"-"`
	// Outcome, when set, is the envelope's top-level "status": the sandbox
	// API answers "refused" for a call the pipeline refused, beside the
	// "ok" of a completed call.
	Outcome string `json:"-"`
}

// refusalBody is Refusal without its methods, for the envelope's "error".
type refusalBody Refusal

// envelope is the JSON shape of a Refusal.
type envelope struct {
	Outcome string      `json:"status,omitempty"`
	Error   refusalBody `json:"error"`
}

// MarshalJSON writes the envelope.
func (r Refusal) MarshalJSON() ([]byte, error) {
	return json.Marshal(envelope{Outcome: r.Outcome, Error: refusalBody(r)})
}

// UnmarshalJSON reads an envelope (clients of the APIs decode answers with
// it). Status and RetryAfter, which travel in the status line and headers,
// stay zero. A JSON value without an "error" object is an error.
func (r *Refusal) UnmarshalJSON(data []byte) error {
	var env struct {
		Outcome string       `json:"status"`
		Error   *refusalBody `json:"error"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return err
	}
	if env.Error == nil {
		return errors.New("not an error envelope: no \"error\" object")
	}
	*r = Refusal(*env.Error)
	r.Outcome = env.Outcome
	return nil
}

// Error makes a Refusal usable as an error (API clients return it): its
// message, reason and, when known, HTTP status.
func (r *Refusal) Error() string {
	if r.Status == 0 {
		return r.Message + " (" + string(r.Reason) + ")"
	}
	return fmt.Sprintf("%s (%s, HTTP %d)", r.Message, r.Reason, r.Status)
}

// body is the envelope's bytes, with a newline.
func (r Refusal) body() []byte {
	b, err := json.Marshal(r)
	if err != nil { // strings only: cannot happen; keep the contract anyway
		return []byte(`{"error":{"class":"internal","reason":"internal","message":"encoding failed"}}` + "\n")
	}
	return append(b, '\n')
}

// status is r.Status when it is an error status, else 500: a refusal is
// never answered as a success, whatever built it.
func (r Refusal) status() int {
	if r.Status < 400 || r.Status > 599 {
		return http.StatusInternalServerError
	}
	return r.Status
}

// header sets the headers every refusal carries.
func (r Refusal) header(h http.Header, n int) {
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(n))
	h.Set("Cache-Control", "no-store")
	if r.status() == http.StatusProxyAuthRequired {
		h.Set("Proxy-Authenticate", `Basic realm="aileron"`)
	}
	if r.AuditID != "" {
		h.Set(HeaderAuditID, r.AuditID)
	}
	if r.ApprovalID != "" {
		h.Set(HeaderApprovalID, r.ApprovalID)
	}
	if r.ProposalID != "" {
		h.Set(HeaderProposalID, r.ProposalID)
	}
	if r.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(r.RetryAfter.Seconds())))
	} else if r.Reason == policy.ReasonBudgetExhausted {
		// A budget for the session's life never frees: the model SDKs
		// (and the agents built on them) read this header and stop
		// retrying a 429 they would otherwise retry for minutes.
		h.Set("X-Should-Retry", "false")
	}
	h.Set(HeaderMessage, HeaderLine(r.Message))
	if v := r.proxyStatus(); v != "" {
		h.Set("Proxy-Status", v)
	}
}

// proxyStatus is the refusal as an RFC 9209 Proxy-Status field, where
// clients that show no body (curl on a refused CONNECT) still show
// headers: `aileron; error=TYPE; details="REASON: MESSAGE"`. It is ""
// for the API classes (invalid arguments, not found…), which are no proxy's
// error.
func (r Refusal) proxyStatus() string {
	typ := proxyErrorType(r)
	if typ == "" {
		return ""
	}
	details := string(r.Reason) + ": " + r.Message
	var b strings.Builder
	b.WriteString("aileron; error=" + typ + `; details="`)
	for i, c := range []byte(details) { // an sf-string: printable ASCII, \ and " escaped
		if i >= maxProxyStatusDetails {
			b.WriteString("...")
			break
		}
		switch {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// maxProxyStatusDetails bounds the details of Proxy-Status; the envelope
// and X-Aileron-Message carry the whole message.
const maxProxyStatusDetails = 512

// proxyErrorType is the RFC 9209 error type of r: by reason where one fits
// better than its class's.
func proxyErrorType(r Refusal) string {
	switch r.Reason {
	case policy.ReasonUpstreamTimeout:
		return "http_response_timeout"
	case policy.ReasonUpstreamTLS:
		return "tls_certificate_error"
	case policy.ReasonPrivateAddress:
		return "destination_ip_prohibited"
	case policy.ReasonEncodedResponse:
		return "http_response_content_coding"
	}
	switch r.Class {
	case ClassCapabilityDenied, ClassProxyAuth, ClassLimited:
		return "http_request_denied"
	case ClassBadRequest:
		return "http_request_error"
	case ClassUpstreamError:
		return "destination_unavailable"
	case ClassUnavailable, ClassInternal:
		return "proxy_internal_error"
	}
	return ""
}

// WriteRefusal answers w with r: its status, the envelope and the headers
// (Content-Type, Cache-Control: no-store, X-Aileron-Message, and the audit
// and approval ids, Retry-After and Proxy-Authenticate when they apply).
func WriteRefusal(w http.ResponseWriter, r Refusal) {
	body := r.body()
	r.header(w.Header(), len(body))
	w.WriteHeader(r.status())
	_, _ = w.Write(body)
}

// WriteJSON answers w with status and v as indented JSON, not cached: the
// successful answers of the admin and sandbox APIs (refusals go through
// WriteRefusal).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Response is WriteRefusal for code paths that hand back an *http.Response
// (a refused CONNECT). The connection closes after it.
func (r Refusal) Response(req *http.Request) *http.Response {
	body := r.body()
	status := r.status()
	resp := &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header), Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req, Close: true,
	}
	r.header(resp.Header, len(body))
	return resp
}

// ParseRefusal reads an error answer of the daemon's APIs as its clients
// see it: the envelope when the body holds one (with Status set), else a
// refusal of class unknown, reason unexpected_answer, whose message gives
// the status and the start of the body (at most 200 bytes, valid UTF-8).
func ParseRefusal(status int, body []byte) *Refusal {
	var r Refusal
	if err := json.Unmarshal(body, &r); err == nil && (r.Reason != "" || r.Message != "") {
		r.Status = status
		return &r
	}
	text := strings.ToValidUTF8(strings.TrimSpace(string(body)), "?")
	if len(text) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	msg := fmt.Sprintf("unexpected answer HTTP %d %s", status, http.StatusText(status))
	if text != "" {
		msg += ": " + text
	}
	return &Refusal{Status: status, Class: ClassUnknown, Reason: policy.ReasonUnexpectedAnswer, Message: msg}
}

// ErrorRule maps the errors wrapping Target to a refusal.
type ErrorRule struct {
	Target error
	Status int
	Class  Class
	Reason policy.Reason
}

// RefuseError is the refusal of err under the first rule whose Target err
// wraps, with err's text as the message; an error no rule matches is a 500
// internal_error. The admin and sandbox APIs classify their errors with it.
func RefuseError(err error, rules []ErrorRule) Refusal {
	r := Refusal{Status: http.StatusInternalServerError, Class: ClassInternal, Reason: policy.ReasonInternalError,
		Message: strings.TrimSpace(err.Error())}
	for _, k := range rules {
		if errors.Is(err, k.Target) {
			r.Status, r.Class, r.Reason = k.Status, k.Class, k.Reason
			break
		}
	}
	return r
}

// HeaderLine makes msg safe for one header line (shims and clients print
// it): control characters become spaces, invalid UTF-8 is dropped, and it
// is cut at 1 KiB.
func HeaderLine(msg string) string {
	b := []rune(msg)
	for i, r := range b {
		if r < 0x20 || r == 0x7f {
			b[i] = ' '
		}
	}
	out := string(b)
	if len(out) > 1024 {
		out = out[:1024]
	}
	return strings.ToValidUTF8(out, "")
}
