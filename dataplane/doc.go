// Package dataplane is Aileron's forward proxy: it authenticates the
// session, terminates the sandbox's TLS with the session's CA, decides every
// inner request against the compiled policy, and forwards allowed requests
// over verified TLS through an SSRF-safe dialer. It also owns the one
// refusal every face of the daemon answers with (Refusal, WriteRefusal).
//
// Every request, whichever way it arrives, goes through one path:
//
//	accept ─▶ framing guard (framing.go) ─▶ goproxy dispatch
//	  ─▶ Proxy-Authorization → Sessions.Authenticate (407 otherwise)
//	  CONNECT host:port ─▶ canonical authority ─▶ policy.DecideConnect (tunnel.go)
//	       ├─ deny        → 403 refusal, connection closed
//	       ├─ passthrough → SSRF-safe dial, raw tunnel, audited
//	       ├─ API host    → the session's sandbox API handler (api.go)
//	       └─ intercept   → TLS with a session leaf; SNI must equal the CONNECT host;
//	                        http/1.1: served in one goroutine (h1.go, h1writer.go), or h2: a stream each (h2.go;
//	                        SETTINGS floods end the connection, h2guard.go)
//	  every inner request or stream, and every Execute call (call.go), as an exchange (exchange.go)
//	  passed to each stage of serveRequest (pipeline.go), which returns how it ended:
//	       ─▶ target as sent; Host (:authority, else 421), absolute-form target and SNI agree with the CONNECT
//	       ─▶ policy.Decide (internal operations only for an action step's call)
//	       ─▶ arguments checked against the operation's input schema (arguments.go; a body the schema
//	          describes read whole within proxy.max_checked_body, then sent as read)
//	       ─▶ approval gate (hold.go: Approvals.Await)
//	       ─▶ audit[] fields ─▶ Recorder.Decided (refused if it cannot be written)
//	       ─▶ outbound copy (exchange.go) ─▶ Injector on it (forward.go) ─▶ Guard dial, verified TLS,
//	          a pooled HTTP/1.1 exchange in the request's goroutine (uptransport.go), or for an h2
//	          client's request a stream on a pooled HTTP/2 connection where the upstream offers h2
//	          (uptransport2.go); never sent twice when approved or not idempotent
//	       ─▶ echoes masked, 1xx passed on (forward.go) ─▶ answer relayed (relay.go)
//	       ─▶ Recorder.Completed, log line
//	  plain-HTTP proxy request ─▶ authenticated, then refused (insecure_scheme)
//
// Errors become refusals in one place (errors.go: classify) and refusals
// become HTTP in one place (refusal.go).
//
// It imports ca, policy, inject, audit, printable, goproxy (every default
// replaced), x/net/http2, x/net/http/httpguts and zerolog, and reaches sessions, credentials, approvals and the
// audit sink only through the interfaces it declares (Sessions, Injector,
// Approvals, Recorder); it never imports the control plane.
package dataplane
