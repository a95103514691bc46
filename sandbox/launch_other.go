//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sandbox

import (
	"os"
	"os/signal"
)

// terminateSignal is the signal that stops a launched command; here only a
// kill works.
func terminateSignal() os.Signal { return os.Kill }

// notifySignals starts catching the signals Launch relays; stop ends it.
func notifySignals() (ch <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 8)
	signal.Notify(c, os.Interrupt)
	return c, func() { signal.Stop(c) }
}

// terminalSent reports whether the command already got sig from a
// terminal; unknown here, so every signal is relayed.
func terminalSent(os.Signal) bool { return false }

// exitCode is the command's exit status, -1 when unknown.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	return ps.ExitCode()
}
