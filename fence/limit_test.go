package fence

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestLimitListener: the third connection waits until one of two closes;
// accepted connections still expose their socket; Close ends Accept.
func TestLimitListener(t *testing.T) {
	raw, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	l := limitTCP(raw, 2)
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	if _, ok := first.(syscall.Conn); !ok {
		t.Fatal("an accepted connection hides its socket")
	}
	select {
	case <-accepted:
		t.Fatal("a third connection was served while two were open")
	case <-time.After(100 * time.Millisecond):
	}
	_ = first.Close()
	_ = first.Close() // a second close gives back nothing more
	select {
	case c := <-accepted:
		_ = c.Close()
	case <-time.After(2 * time.Second):
		t.Fatal("closing a connection did not let the next one in")
	}
	_ = second.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-accepted; ok {
		t.Fatal("Accept went on after Close")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}
