//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sandbox

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// terminateSignal is the signal that asks a launched command to stop.
func terminateSignal() os.Signal { return syscall.SIGTERM }

// notifySignals starts catching the signals Launch relays; stop ends it.
func notifySignals() (ch <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	return c, func() { signal.Stop(c) }
}

// terminalSent reports whether sig is one a terminal sends to its whole
// foreground process group (SIGINT, SIGQUIT) while this process, and so the
// command that shares its process group, is in that group: the command got
// it from the terminal already.
func terminalSent(sig os.Signal) bool {
	if sig != syscall.SIGINT && sig != syscall.SIGQUIT {
		return false
	}
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false // no controlling terminal
	}
	defer tty.Close()
	fg, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
	return err == nil && fg == unix.Getpgrp()
}

// exitCode is the command's exit status, 128+N when signal N ended it, -1
// when unknown.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
