package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestStopSignalBehindAPendingReload: a SIGTERM that comes while a SIGHUP
// still waits to be handled (the daemon is starting, or reloading) is
// kept, not dropped: the daemon stops.
func TestStopSignalBehindAPendingReload(t *testing.T) {
	s := takeSignals()
	defer s.release()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	bound := time.After(10 * time.Second) // a bound on a hung test, not a timing check
	for len(s.hup) == 0 {
		select {
		case <-bound:
			t.Fatal("the SIGHUP was not taken")
		case <-time.After(time.Millisecond):
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case sig := <-s.stop:
		if sig != syscall.SIGTERM {
			t.Fatalf("took %v; want the SIGTERM", sig)
		}
	case <-bound:
		t.Fatal("the SIGTERM sent behind a pending SIGHUP was lost")
	}
}
