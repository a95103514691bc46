package dataplane

// sessionScope is sess's connector scope now: a connector added to a live
// session (accepting a proposal as a rule) applies from the next request
// of its open tunnels, as a changed unknown-request mode does. Sessions
// that cannot say (or fail to) leave the scope sess was authenticated
// with.
func (p *Proxy) sessionScope(sess *Session) []string {
	if cs, ok := p.Sessions.(currentSessions); ok {
		if now, err := cs.Session(sess.ID); err == nil && now != nil {
			return now.Connectors
		}
	}
	return sess.Connectors
}
