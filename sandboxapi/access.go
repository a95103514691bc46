package sandboxapi

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// MaxAccessWait bounds how long one access request waits for a human.
const MaxAccessWait = 60 * time.Second

// defaultMaxAccessWaits is API.MaxAccessWaits's default.
const defaultMaxAccessWaits = 8

// maxAccessURL bounds the URL of an access request.
const maxAccessURL = 4096

// Access is all the sandbox API reaches of the proposal store: a session
// asks for access, and waits for a human's decision. Nothing here accepts
// or rejects (security invariant 7): that is the admin side's. The daemon
// implements it over proposals.Store.
type Access interface {
	// Ask records session's request for access (opening or joining the
	// proposal of its method, host, port and path template) and answers
	// the proposal as it stands. A bad justification wraps
	// state.ErrInvalidArgument.
	Ask(ctx context.Context, session string, req AccessAsk) (AccessAnswer, error)
	// Await answers session's proposal id once it is decided, or as it
	// stands when wait has passed (at once for 0). Another session's
	// proposal wraps state.ErrNotFound, as a missing one does.
	Await(ctx context.Context, session, id string, wait time.Duration) (AccessAnswer, error)
}

// AccessAsk is a checked request for access.
type AccessAsk struct {
	// Method is upper-case; Host canonical (policy.CanonicalHost).
	Method string
	Host   string
	Port   int
	// Path is the escaped path as an agent would send it, without query.
	Path          string
	Justification string
}

// AccessRequest is the body of POST /v1/access-requests and, but for
// WaitSeconds, the arguments of the MCP tool request_access.
type AccessRequest struct {
	Method        string `json:"method"`
	URL           string `json:"url"`
	Justification string `json:"justification"`
	// WaitSeconds is how long to wait for a human's decision: 0 (the
	// default) answers at once, at most 60.
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// AccessRule is the operation a proposal was accepted as.
type AccessRule struct {
	Method   string `json:"method"`
	Template string `json:"template"`
	// Approval reports that each request the rule allows still waits for
	// a human's approval.
	Approval bool `json:"approval"`
}

// AccessAnswer answers an access request: the proposal it joined and where
// it stands.
type AccessAnswer struct {
	ProposalID string `json:"proposal_id"`
	// State is open (no decision yet), accepted or rejected.
	State    string `json:"state"`
	Method   string `json:"method"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Template string `json:"template"`
	// Reason is the human's reason for a rejection.
	Reason string `json:"reason"`
	// Rule and Connector say what an accepted proposal became.
	Rule      *AccessRule `json:"rule"`
	Connector string      `json:"connector"`
	// Message says what the answer means for the agent.
	Message string `json:"message"`
}

// The states of an access request.
const (
	AccessOpen     = "open"
	AccessAccepted = "accepted"
	AccessRejected = "rejected"
)

// requestAccess checks req, asks for it as sess and waits up to its
// WaitSeconds for a decision.
func (s *API) requestAccess(ctx context.Context, sess *dataplane.Session, req AccessRequest) (AccessAnswer, error) {
	if s.Access == nil {
		return AccessAnswer{}, fmt.Errorf("%w: this daemon keeps no proposals, so access cannot be asked for", errFeatureDisabled)
	}
	wait, err := accessWait(req.WaitSeconds)
	if err != nil {
		return AccessAnswer{}, err
	}
	ask, err := checkAccessRequest(req)
	if err != nil {
		return AccessAnswer{}, err
	}
	ans, err := s.Access.Ask(ctx, sess.ID, ask)
	if err == nil && ans.State == AccessOpen && wait > 0 {
		ans, err = s.await(ctx, sess.ID, ans.ProposalID, wait)
	}
	if err != nil {
		return AccessAnswer{}, err
	}
	return withMessage(ans), nil
}

// accessStatus answers sess's access request id, waiting up to
// waitSeconds for a decision.
func (s *API) accessStatus(ctx context.Context, sess *dataplane.Session, id string, waitSeconds int) (AccessAnswer, error) {
	if s.Access == nil {
		return AccessAnswer{}, fmt.Errorf("%w: this daemon keeps no proposals, so access cannot be asked for", errFeatureDisabled)
	}
	wait, err := accessWait(waitSeconds)
	if err != nil {
		return AccessAnswer{}, err
	}
	ans, err := s.await(ctx, sess.ID, id, wait)
	if err != nil {
		return AccessAnswer{}, err
	}
	return withMessage(ans), nil
}

// await waits on Access until a decision, wait, ctx ending or StopWaits;
// after StopWaits it answers the proposal as it stands.
func (s *API) await(ctx context.Context, session, id string, wait time.Duration) (AccessAnswer, error) {
	stopping := s.stopping()
	if wait > 0 && stopping.Err() == nil && s.enterWait(session) {
		defer s.leaveWait(session)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(stopping, cancel)()
		ans, err := s.Access.Await(wctx, session, id, wait)
		if err == nil || ctx.Err() != nil || stopping.Err() == nil {
			return ans, err
		}
	}
	return s.Access.Await(ctx, session, id, 0)
}

// enterWait counts one more wait of session, unless it already has
// MaxAccessWaits (then false: answer at once).
func (s *API) enterWait(session string) bool {
	max := s.MaxAccessWaits
	if max <= 0 {
		max = defaultMaxAccessWaits
	}
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if s.waits[session] >= max {
		return false
	}
	if s.waits == nil {
		s.waits = map[string]int{}
	}
	s.waits[session]++
	return true
}

func (s *API) leaveWait(session string) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if s.waits[session]--; s.waits[session] <= 0 {
		delete(s.waits, session)
	}
}

// stopping is done once StopWaits has been called.
func (s *API) stopping() context.Context {
	s.stopOnce.Do(func() { s.stopCtx, s.stop = context.WithCancel(context.Background()) })
	return s.stopCtx
}

// StopWaits ends every wait for an access decision, now and later: each
// answers the proposal as it stands (open: ask again). The daemon calls it
// as it begins to stop, so that no wait holds the drain.
func (s *API) StopWaits() {
	s.stopping()
	s.stop()
}

func accessWait(seconds int) (time.Duration, error) {
	if seconds < 0 || time.Duration(seconds)*time.Second > MaxAccessWait {
		return 0, fmt.Errorf("%w: wait_seconds %d: wait from 0 (answer at once) to %d seconds; ask again with the proposal id to wait longer",
			state.ErrInvalidArgument, seconds, int(MaxAccessWait/time.Second))
	}
	return time.Duration(seconds) * time.Second, nil
}

// checkAccessRequest checks an access request's method and URL: an https
// URL with a host name or public address, no user information, and a path
// in the plain form the proxy accepts. The query and fragment are not
// kept. The justification is the store's to check.
func checkAccessRequest(req AccessRequest) (AccessAsk, error) {
	bad := func(format string, args ...any) (AccessAsk, error) {
		return AccessAsk{}, fmt.Errorf("%w: "+format, append([]any{state.ErrInvalidArgument}, args...)...)
	}
	method := strings.ToUpper(strings.TrimSpace(req.Method))
	if method == "" || len(method) > 20 || strings.TrimFunc(method, func(r rune) bool { return r >= 'A' && r <= 'Z' }) != "" || method == http.MethodConnect {
		return bad("method %s: give the HTTP method of the request, such as GET or POST", strconv.Quote(clipText(req.Method)))
	}
	raw := strings.TrimSpace(req.URL)
	if len(raw) > maxAccessURL {
		return bad("the url is %d bytes; keep it to %d", len(raw), maxAccessURL)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !strings.EqualFold(scheme, "https") {
		return bad("url %s: give the full https:// URL of the request (Aileron forwards https only)", strconv.Quote(clipText(raw)))
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, target := rest[:end], rest[end:]
	if strings.Contains(authority, "@") {
		return bad("url %s carries user information; leave it out (Aileron adds credentials itself)", strconv.Quote(clipText(raw)))
	}
	a, err := policy.ParseAuthority(authority, policy.DefaultPort)
	if err != nil {
		return bad("url %s: %v", strconv.Quote(clipText(raw)), err)
	}
	if ip, err := netip.ParseAddr(a.Host); err == nil && dataplane.Classify(ip) != "" {
		return bad("url %s names a %s address, which Aileron never forwards to; no rule can allow it", strconv.Quote(clipText(raw)), dataplane.Classify(ip))
	}
	if a.Host == dataplane.DefaultAPIHost {
		return bad("url %s is Aileron's own API, which needs no access request", strconv.Quote(clipText(raw)))
	}
	path, _, _ := strings.Cut(target, "#")
	path, _, _ = strings.Cut(path, "?")
	if path == "" {
		path = "/"
	}
	if i := strings.IndexFunc(path, func(r rune) bool { return r <= ' ' || r >= 0x7f }); i >= 0 {
		return bad("the url's path has the byte %q; percent-encode it as the request would", path[i])
	}
	if _, err := url.Parse("https://h" + path); err != nil {
		return bad("the url's path %s does not parse: %v", strconv.Quote(clipText(path)), err)
	}
	if err := policy.CheckPath(path); err != nil {
		return bad("the url's path %s is not in plain form (%v); send it without dot segments, empty segments or encoded separators, as the request would go",
			strconv.Quote(clipText(path)), err)
	}
	return AccessAsk{Method: method, Host: a.Host, Port: a.Port, Path: path, Justification: req.Justification}, nil
}

// clipText bounds a value quoted in a message.
func clipText(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// withMessage sets what ans means for the agent.
func withMessage(ans AccessAnswer) AccessAnswer {
	target := "https://" + policy.Authority{Host: ans.Host, Port: ans.Port}.String()
	if ans.Port == policy.DefaultPort {
		target = "https://" + ans.Host
	}
	switch ans.State {
	case AccessOpen:
		ans.Message = fmt.Sprintf("waiting for a human to decide on %s %s%s; ask again for proposal %s to keep waiting",
			ans.Method, target, ans.Template, ans.ProposalID)
	case AccessAccepted:
		rule := ans.Rule
		if rule == nil {
			rule = &AccessRule{Method: ans.Method, Template: ans.Template}
		}
		ans.Message = fmt.Sprintf("%s %s%s is allowed now", rule.Method, target, rule.Template)
		if rule.Approval {
			ans.Message += ", each request held until a human approves it"
		}
		ans.Message += "; send the request again"
	case AccessRejected:
		ans.Message = fmt.Sprintf("rejected by a human: %s; do not send %s %s%s again", ans.Reason, ans.Method, target, ans.Template)
	}
	return ans
}

// accessStatusCode is 202 while a human has not decided, 200 once one has.
func accessStatusCode(ans AccessAnswer) int {
	if ans.State == AccessOpen {
		return http.StatusAccepted
	}
	return http.StatusOK
}

func (s *API) postAccessRequest(w http.ResponseWriter, r *http.Request, sess *dataplane.Session) {
	var req AccessRequest
	if err := decodeSandboxBody(w, r, &req, true); err != nil {
		s.writeError(w, err)
		return
	}
	ans, err := s.requestAccess(r.Context(), sess, req)
	if err != nil && r.Context().Err() != nil {
		return // the client left while it waited: no one to answer, nothing failed
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, accessStatusCode(ans), ans)
}

func (s *API) getAccessRequest(w http.ResponseWriter, r *http.Request, sess *dataplane.Session) {
	wait := 0
	for k, v := range r.URL.Query() {
		n, err := strconv.Atoi(v[0])
		if k != "wait_seconds" || len(v) != 1 || err != nil {
			s.writeError(w, fmt.Errorf("%w: query %s: the only parameter is wait_seconds=N, a whole number of seconds from 0 to %d",
				state.ErrInvalidArgument, strconv.Quote(clipText(k)), int(MaxAccessWait/time.Second)))
			return
		}
		wait = n
	}
	ans, err := s.accessStatus(r.Context(), sess, r.PathValue("id"), wait)
	if err != nil && r.Context().Err() != nil {
		return // the client left while it waited
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, accessStatusCode(ans), ans)
}
