package main

import (
	"os"
	"os/signal"
	"syscall"
)

// daemonSignals are the signals the daemon handles, each kind on its own
// channel: signal.Notify drops a signal whose channel is full, so a SIGHUP
// not yet handled (the daemon still starting, or reloading) must not make
// a SIGTERM that follows it be lost, leaving the daemon running. SIGHUPs
// that come while one waits make one reload, of the latest configuration.
type daemonSignals struct {
	hup  chan os.Signal // SIGHUP: reload
	stop chan os.Signal // SIGTERM, SIGINT: drain and exit
}

// takeSignals starts taking the daemon's signals; release stops it.
func takeSignals() *daemonSignals {
	s := &daemonSignals{hup: make(chan os.Signal, 1), stop: make(chan os.Signal, 1)}
	signal.Notify(s.hup, syscall.SIGHUP)
	signal.Notify(s.stop, syscall.SIGTERM, syscall.SIGINT)
	return s
}

// release gives the signals back to their default handling.
func (s *daemonSignals) release() {
	signal.Stop(s.hup)
	signal.Stop(s.stop)
}
