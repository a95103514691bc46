package dataplane

import (
	"context"
	"net/http"
	"time"
)

// DefaultAPIHost is the reserved host name under which a sandbox reaches the
// sandbox API through the proxy (AILERON_API_URL=https://aileron.internal/v1).
const DefaultAPIHost = "aileron.internal"

type sessionKey struct{}

// SessionFrom returns the authenticated session of a sandbox API request.
// It is present in every request the proxy hands to Proxy.SandboxAPI.
func SessionFrom(ctx context.Context) (*Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(*Session)
	return s, ok && s != nil
}

func (p *Proxy) apiHost() string {
	if p.APIHost != "" {
		return p.APIHost
	}
	return DefaultAPIHost
}

// serveAPI hands a request inside a tunnel to the sandbox API host to the
// SandboxAPI handler, after the same authority checks as any inner request
// (Host header, absolute-form target and SNI agree with the CONNECT). The
// session is the one that authenticated the tunnel; the handler never sees
// Proxy-Authorization.
func (p *Proxy) serveAPI(w http.ResponseWriter, r *http.Request, t *tunnel) {
	start := time.Now()
	_, err := innerTarget(t, r)
	if err == nil {
		err = checkUpgrade(r, nil)
	}
	if err == nil {
		err = p.checkLive(w, t)
	}
	if err != nil {
		rec := p.newRecord(r)
		rec.Session, rec.Host, rec.Port, rec.Path = t.sess.ID, t.authority.Host, t.authority.Port, clip(r.URL.Path)
		p.refuse(w, rec, err, nil, "")
		hangUpRevoked(w, t, err)
		return
	}
	r.Header.Del("Proxy-Authorization")
	p.clockBody(w, r)
	cw := &countingWriter{ResponseWriter: w}
	if r.ProtoMajor == 2 {
		cw.rc, cw.idle = http.NewResponseController(w), p.t.BodyIdle
	}
	p.SandboxAPI.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), sessionKey{}, t.sess)))
	p.log.Debug().Str("event", "sandbox.api").Str("session", t.sess.ID).Str("method", r.Method).
		Str("path", clip(r.URL.Path)).Int("status", cw.status).Dur("duration", time.Since(start)).Send()
}
