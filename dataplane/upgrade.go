package dataplane

import (
	"net/http"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// Protocol upgrades turn an inner request into a raw pipe: after a 101
// nothing the client sends is decided, and nothing the upstream sends is
// masked. So an upgrade is refused unless it is a WebSocket opened by a GET
// of an operation whose spec sets "websocket": true. h2c is refused always:
// an h2c connection carries requests that policy never saw.

// upgradeTokens returns the protocols r asks to upgrade to, lower-cased
// and without versions, from every Upgrade line ("websocket", "h2c").
func upgradeTokens(h http.Header) []string {
	var out []string
	for _, line := range h.Values("Upgrade") {
		for _, tok := range strings.Split(line, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(tok), "/")
			out = append(out, strings.ToLower(name))
		}
	}
	return out
}

// h2cUpgrade refuses a request that asks for h2c (an Upgrade token, or the
// HTTP2-Settings header that only an h2c upgrade carries), before policy:
// it is never forwarded, whatever the operation.
func h2cUpgrade(r *http.Request) error {
	_, settings := r.Header["Http2-Settings"]
	for _, tok := range upgradeTokens(r.Header) {
		settings = settings || tok == "h2c"
	}
	if !settings {
		return nil
	}
	return deny(policy.ReasonUpgradeRefused, "the request asks to upgrade to h2c (cleartext HTTP/2), which is never forwarded: "+
		"requests sent after the switch would reach the upstream without a decision; drop the Upgrade and HTTP2-Settings headers "+
		"(HTTP/2 is negotiated by TLS ALPN, not by an upgrade)")
}

// checkUpgrade refuses an upgrade that op does not allow: anything but one
// "websocket" token on a GET of an operation with websocket: true. op is
// nil for requests that no operation decides (the sandbox API host).
func checkUpgrade(r *http.Request, op *policy.Operation) error {
	toks := upgradeTokens(r.Header)
	if len(toks) == 0 {
		return nil
	}
	if len(toks) != 1 || toks[0] != "websocket" {
		return deny(policy.ReasonUpgradeRefused, "the request asks to upgrade to %q; only a WebSocket upgrade (Upgrade: websocket) "+
			"is forwarded, and only on an operation whose spec allows it", clip(strings.Join(r.Header.Values("Upgrade"), ", ")))
	}
	switch {
	case op == nil:
		return deny(policy.ReasonUpgradeRefused, "this endpoint does not accept a WebSocket upgrade")
	case r.Method != http.MethodGet:
		return deny(policy.ReasonUpgradeRefused, "a WebSocket opens with GET, not %s", r.Method)
	case r.ContentLength != 0 || len(r.TransferEncoding) > 0:
		// Its bytes and the frames after the switch would share the connection.
		return deny(policy.ReasonUpgradeRefused, "a WebSocket opening request carries no body; send it without one")
	case !op.Spec.WebSocket:
		return deny(policy.ReasonUpgradeRefused, "%s %s/%s does not allow a WebSocket upgrade: its spec must set \"websocket\": true "+
			"on the operation (frames after the upgrade are not inspected)", op.Ref(), op.Tool, op.Spec.Name)
	}
	return nil
}
