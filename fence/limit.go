package fence

import (
	"net"
	"sync"
)

// limitListener serves at most cap(sem) connections of l at once; Accept
// waits for one to close first (meanwhile the kernel's backlog holds new
// ones). Unlike x/net/netutil's, its connections stay *net.TCPConn
// underneath (the transparent listeners read SO_ORIGINAL_DST from them).
type limitListener struct {
	*net.TCPListener
	sem  chan struct{}
	done chan struct{}
	once sync.Once
}

func limitTCP(l *net.TCPListener, n int) *limitListener {
	return &limitListener{TCPListener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.AcceptTCP()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{TCPConn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.TCPListener.Close()
}

// limitedConn gives its slot back when closed (once).
type limitedConn struct {
	*net.TCPConn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.TCPConn.Close()
	c.once.Do(c.release)
	return err
}
