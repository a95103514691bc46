package admin

import "errors"

// Errors of the admin side, beside the state sentinels the stores wrap.
var (
	// ErrDaemonUnreachable is wrapped by Client methods when nothing answers
	// on the admin socket.
	ErrDaemonUnreachable = errors.New("aileron daemon unreachable")
	// ErrDaemonRunning is wrapped by ListenUnix when another daemon already
	// answers on the socket path.
	ErrDaemonRunning = errors.New("another aileron daemon is already running")
)
