package admin

import (
	"context"
	"net"
	"net/http"
)

// peerKey keys the caller's name in a connection's context.
type peerKey struct{}

// ConnContext is the admin server's http.Server.ConnContext: it names the
// process at the other end of a unix socket connection by its user, read
// from the kernel (SO_PEERCRED), so that a consent records who gave it.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if uc, ok := c.(*net.UnixConn); ok {
		if name := peerName(uc); name != "" {
			return context.WithValue(ctx, peerKey{}, name)
		}
	}
	return ctx
}

// caller names who sent r: the socket peer's user (ConnContext), or
// "admin API" when the server does not know it.
func caller(r *http.Request) string {
	if name, ok := r.Context().Value(peerKey{}).(string); ok {
		return name
	}
	return "admin API"
}
