// Package controlplane is the daemon's management side: the content-addressed
// connector store, sessions (the credentials and per-session CA a sandbox
// receives), and the admin API with its client.
//
// The data plane never imports this package; it reaches sessions through
// dataplane.Sessions, which *Sessions implements.
package controlplane

import (
	"errors"

	"github.com/aileronhq/aileron/state"
)

// Sentinel errors. Errors this package returns about content, arguments or
// state wrap one of them (Sessions.Authenticate wraps dataplane.ErrProxyAuth
// instead), so callers and the admin API classify failures with errors.Is;
// failures of the file system are returned wrapping their *fs.PathError.
var (
	// ErrNotFound is wrapped when a session, connector version or other named
	// object does not exist (or no longer exists: an expired session).
	ErrNotFound = state.ErrNotFound
	// ErrInvalidArgument is wrapped when a caller-supplied value is malformed:
	// a reference, a session name or TTL, a request body.
	ErrInvalidArgument = state.ErrInvalidArgument
	// ErrConflict is wrapped when a change would contradict existing state: a
	// spec that clashes with another connector's active spec, or a version
	// already installed with different content.
	ErrConflict = state.ErrConflict
	// ErrCorruptState is wrapped when the daemon's own files (store index,
	// session records, session key) cannot be read back as written.
	ErrCorruptState = state.ErrCorruptState
	// ErrInsecureFile is wrapped when a secret file (the session key) is not a
	// regular file or group or others may access it.
	ErrInsecureFile = state.ErrInsecureFile
	// ErrNotOpen is wrapped when a Sessions method is called before Open.
	ErrNotOpen = state.ErrNotOpen
	// ErrDaemonUnreachable is wrapped by Client methods when nothing answers
	// on the admin socket.
	ErrDaemonUnreachable = errors.New("aileron daemon unreachable")
	// ErrDaemonRunning is wrapped by ListenUnix when another daemon already
	// answers on the socket path.
	ErrDaemonRunning = errors.New("another aileron daemon is already running")
)
