package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Verdict is the closed set of outcomes of a decision. The zero value is
// Deny.
type Verdict uint8

// Verdicts.
const (
	Deny Verdict = iota
	Allow
	AllowAfterApproval
	Passthrough
)

// String returns "deny", "allow", "allow_after_approval" or "passthrough"
// ("invalid_verdict(N)" for values outside the set).
func (v Verdict) String() string {
	switch v {
	case Deny:
		return "deny"
	case Allow:
		return "allow"
	case AllowAfterApproval:
		return "allow_after_approval"
	case Passthrough:
		return "passthrough"
	}
	return "invalid_verdict(" + strconv.Itoa(int(v)) + ")"
}

// MarshalText renders the String form, for JSON and logs.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// Args describes one inner request to decide on.
type Args struct {
	// Method is the request method as sent (case-sensitive).
	Method string
	// Host is the canonical host (see CanonicalHost), without port. A
	// non-canonical host simply matches nothing.
	Host string
	// Port is the destination port, 1-65535.
	Port int
	// Path is the escaped path as sent, without the query.
	Path string
	// Connectors is the session's scope: the FQNs it may use. Nil means
	// every installed connector; an empty, non-nil slice means none.
	Connectors []string
	// Step is true when an action step sent the request: internal
	// operations are then reachable. For every other request an internal
	// operation is treated as if it did not exist.
	Step bool
}

// Decision is the outcome of Decide or DecideConnect.
type Decision struct {
	Verdict Verdict
	Reason  Reason
	// Message is a bounded human sentence for the client; empty on Allow.
	Message string
	// Op is the matched operation (nil unless Allow or AllowAfterApproval
	// from Decide).
	Op *Operation
	// Params holds the path template values of the match, unescaped; nil
	// when the operation's path has no variables.
	Params map[string]string
}

// maxMessage bounds Decision.Message.
const maxMessage = 512

func deny(r Reason, msg string) Decision {
	return Decision{Verdict: Deny, Reason: r, Message: bound(msg)}
}

func bound(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// Decide decides one inner request. It re-checks the path (CheckPath) and
// the method itself, and never trusts the caller: a bad method, host or
// port is bad_request, a non-canonical path non_canonical_path; a
// host:port no in-scope operation names is host_not_allowed (or
// connector_not_in_session when only out-of-scope connectors name it); a
// known host with no matching method and path is no_matching_operation.
// Unless a.Step, an internal operation is unreachable and named nowhere: a
// request it is the best match for is no_matching_operation with the
// message of a request nothing matches (a less specific operation, a
// wildcard, never serves it instead: its owner meant that request for
// action steps only), and a host only internal operations name is
// host_not_allowed. A match is Allow, or AllowAfterApproval when the operation's approval is
// "required". Decide does not allocate unless it denies or the matched
// pattern has variables. A nil *Policy denies everything.
func (p *Policy) Decide(a Args) Decision {
	if !IsToken(a.Method) || a.Host == "" || a.Port < 1 || a.Port > 65535 {
		return deny(ReasonBadRequest, fmt.Sprintf("request has an invalid method %s, host %s or port %d", quote(a.Method), quote(a.Host), a.Port))
	}
	if err := CheckPath(a.Path); err != nil {
		return deny(ReasonNonCanonicalPath, err.Error()+"; send the path in canonical form")
	}
	v := view{scope: a.Connectors, step: a.Step}
	var e *hostEntry
	if p != nil {
		e = p.hosts[Authority{Host: a.Host, Port: a.Port}]
	}
	if e == nil {
		return deny(ReasonHostNotAllowed, p.unknownHostMessage(a.Host, a.Port, v))
	}
	var r *route
	if root := e.methods[a.Method]; root != nil && anyInScope(e.fqns, a.Connectors) {
		r = root.match(a.Path[1:], view{scope: a.Connectors, step: true})
	}
	if r == nil || !a.Step && r.op.Spec.IsInternal() {
		return p.noMatch(e, a, v)
	}
	d := Decision{Verdict: Allow, Reason: ReasonMatched, Op: r.op, Params: r.op.pat.params(a.Path)}
	if r.op.RequiresApproval() {
		d.Verdict = AllowAfterApproval
	}
	return d
}

// DecideConnect classifies a CONNECT target (canonical host, port) for a
// session scope. Allow means intercept: an operation of an in-scope
// connector names host:port. Passthrough means a passthrough rule matches
// and no installed spec names the host on any port. Otherwise it denies
// with host_not_allowed, or connector_not_in_session when only out-of-scope
// connectors name host:port. A host that only internal operations name is
// denied as an unknown host (a CONNECT is never an action step's), and never
// passed through. A nil *Policy denies everything.
func (p *Policy) DecideConnect(host string, port int, connectors []string) Decision {
	if host == "" || port < 1 || port > 65535 {
		return deny(ReasonBadRequest, fmt.Sprintf("CONNECT target has an invalid host %s or port %d", quote(host), port))
	}
	auth := Authority{Host: host, Port: port}
	if p == nil {
		return deny(ReasonHostNotAllowed, fmt.Sprintf("CONNECT to %s is not allowed: no connector is installed", auth))
	}
	v := view{scope: connectors} // a CONNECT is a sandbox's, never an action step's
	if e := p.hosts[auth]; e != nil {
		switch e.seenBy(v) {
		case hostSeen:
			return Decision{Verdict: Allow, Reason: ReasonHostMatched}
		case hostOutOfScope:
			return deny(ReasonConnectorNotInSession, fmt.Sprintf("CONNECT to %s is not allowed: it is served only by connectors this session may not use; ask the session owner to add the connector",
				auth))
		}
		// hostHidden: only internal operations name it. It is answered as an
		// unknown host, but never passed through (it is claimed).
	}
	if _, claimed := p.ports[host]; !claimed {
		for i := range p.rules {
			if p.rules[i].matches(host, port) {
				return Decision{Verdict: Passthrough, Reason: ReasonPassthroughRule}
			}
		}
	}
	return deny(ReasonHostNotAllowed, "CONNECT to "+p.unknownHostMessage(host, port, v))
}

// anyInScope reports whether any of fqns is in scope (nil scope = all).
func anyInScope(fqns, scope []string) bool {
	if scope == nil {
		return len(fqns) > 0
	}
	for _, f := range fqns {
		for _, s := range scope {
			if f == s {
				return true
			}
		}
	}
	return false
}

// refs renders connectors as fqn@version.
func (p *Policy) refs(fqns []string) []string {
	out := make([]string, len(fqns))
	for i, f := range fqns {
		out[i] = f + "@" + p.versions[f]
	}
	return out
}

// hostView is what a view sees of a host:port's operations.
type hostView uint8

const (
	hostHidden     hostView = iota // none: the host is as if unknown
	hostOutOfScope                 // some, of connectors out of the session's scope only
	hostSeen                       // some in scope
)

// seenBy reports what v sees of e's operations.
func (e *hostEntry) seenBy(v view) hostView {
	seen := hostHidden
	for _, r := range e.routes {
		if !v.step && r.op.Spec.IsInternal() {
			continue
		}
		if inScope(r, v.scope) {
			return hostSeen
		}
		seen = hostOutOfScope
	}
	return seen
}

// noMatch is the denial of a request to a known host that no route v sees
// matches, worded as if the operations v does not see were not installed.
func (p *Policy) noMatch(e *hostEntry, a Args, v view) Decision {
	switch e.seenBy(v) {
	case hostHidden:
		return deny(ReasonHostNotAllowed, p.unknownHostMessage(a.Host, a.Port, v))
	case hostOutOfScope:
		return deny(ReasonConnectorNotInSession, fmt.Sprintf("%s is served only by connectors this session may not use; ask the session owner to add the connector",
			Authority{a.Host, a.Port}))
	}
	return deny(ReasonNoMatchingOperation, p.noMatchMessage(e, a, v))
}

func (p *Policy) unknownHostMessage(host string, port int, v view) string {
	auth := Authority{Host: host, Port: port}
	var ports []string
	if p != nil {
		for _, n := range p.ports[host] {
			if p.hosts[Authority{host, n}].seenBy(v) == hostSeen {
				ports = append(ports, strconv.Itoa(n))
			}
		}
	}
	if len(ports) > 0 {
		return fmt.Sprintf("%s is not allowed: connectors in this session use this host only on port %s", auth, strings.Join(ports, ", "))
	}
	return fmt.Sprintf("%s is not allowed: no connector in this session names this host and no passthrough rule allows it", auth)
}

func (p *Policy) noMatchMessage(e *hostEntry, a Args, v view) string {
	var conns []string
	var b strings.Builder
	listed := 0
	for _, r := range e.routes {
		if !v.sees(r) {
			continue
		}
		conns = appendUnique(conns, r.op.FQN)
		if b.Len() < maxMessage {
			if listed > 0 {
				b.WriteString(", ")
			}
			b.WriteString(r.method + " " + r.op.Spec.Path)
			listed++
		}
	}
	path := a.Path
	if len(path) > 200 {
		path = path[:200] + "…"
	}
	return fmt.Sprintf("%s %s on %s matches no operation of %s; operations for this host: %s",
		a.Method, path, Authority{a.Host, a.Port}, strings.Join(p.refs(conns), ", "), b.String())
}

// Operations lists every compiled operation, in source order and spec
// order, including operations that are not routable.
func (p *Policy) Operations() []*Operation {
	if p == nil {
		return nil
	}
	return append([]*Operation(nil), p.ops...)
}

// Lookup finds an operation by connector FQN, tool name and operation name.
func (p *Policy) Lookup(fqn, tool, op string) (*Operation, bool) {
	if p == nil {
		return nil, false
	}
	o, ok := p.byName[opKey{fqn, tool, op}]
	return o, ok
}
