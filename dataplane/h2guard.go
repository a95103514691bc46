package dataplane

import (
	"crypto/tls"
	"encoding/binary"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// A client may change its HTTP/2 settings now and then (gRPC's window
// estimator does a handful of times per connection); each change costs
// the proxy an acknowledgement it must write. A client sending them
// faster than h2SettingsRate a second after a burst of h2SettingsBurst
// (a settings flood, usually from a client that never reads the
// acknowledgements) has its connection ended: GOAWAY ENHANCE_YOUR_CALM,
// and the connection closed h2AbuseGrace later whether or not the client
// took the GOAWAY.
const (
	h2SettingsRate  = 10
	h2SettingsBurst = 32
	h2AbuseGrace    = time.Second
)

// h2Conn is an intercepted tunnel's connection as the HTTP/2 server
// sees it. It reports the tunnel's TLS state, so a stream that says
// ":scheme https" carries it in r.TLS and one that says "http" does not
// (innerTarget refuses that one), and it reads the client's frames through
// a frameWatch. Its writes leave in batches (batchConn).
type h2Conn struct {
	*tunnelConn
	out   *batchConn // the tunnel's writes, batched
	cs    tls.ConnectionState
	watch frameWatch
	// hangup closes the client's TCP connection (h2AbuseGrace after a
	// flood was seen); it must not block.
	hangup func()
	once   sync.Once
}

// Write sends b in the next batch (batchConn).
func (c *h2Conn) Write(b []byte) (int, error) { return c.out.Write(b) }

// Close closes the tunnel once the bytes taken went out (batchConn).
func (c *h2Conn) Close() error { return c.out.Close() }

// ConnectionState is the tunnel's TLS state (x/net's server asks for it).
func (c *h2Conn) ConnectionState() tls.ConnectionState { return c.cs }

// Read reads what the client sent, up to the start of a frame that breaks
// a bound; that read then fails with the HTTP/2 connection error x/net's
// server answers with a GOAWAY of its code.
func (c *h2Conn) Read(b []byte) (int, error) {
	if err := c.watch.err; err != nil {
		return 0, err
	}
	n, err := c.tunnelConn.Read(b)
	if keep, bad := c.watch.scan(b[:n], time.Now()); bad != nil {
		c.once.Do(func() { time.AfterFunc(h2AbuseGrace, c.hangup) })
		if keep == 0 {
			return 0, bad
		}
		return keep, nil // the next Read returns the error
	}
	return n, err
}

// frameWatch follows the frame boundaries of a client's HTTP/2 byte
// stream (after the 24-byte preface) without buffering: it keeps only a
// partial frame header and how much payload is left to skip. It is used
// by one reader at a time (x/net reads on one goroutine).
type frameWatch struct {
	preface int // preface bytes still to skip
	head    [9]byte
	inHead  int    // bytes of head filled
	skip    uint32 // payload bytes left of the current frame
	started bool
	// settings is the token bucket for non-ACK SETTINGS frames.
	settings float64
	last     time.Time
	err      error // set once a bound broke
}

// scan follows p. It returns how many bytes of p come before the frame
// that broke a bound (keep) and the error to answer, or (len(p), nil).
func (w *frameWatch) scan(p []byte, now time.Time) (keep int, bad error) {
	if !w.started {
		w.started, w.preface, w.settings, w.last = true, len(http2.ClientPreface), h2SettingsBurst, now
	}
	i := 0
	for i < len(p) {
		switch {
		case w.preface > 0:
			k := min(w.preface, len(p)-i)
			w.preface -= k
			i += k
		case w.skip > 0:
			k := int(min(w.skip, uint32(len(p)-i)))
			w.skip -= uint32(k)
			i += k
		default:
			start := i - w.inHead // where this frame began (before p when negative)
			k := copy(w.head[w.inHead:], p[i:])
			w.inHead += k
			i += k
			if w.inHead < len(w.head) {
				continue
			}
			w.inHead = 0
			w.skip = binary.BigEndian.Uint32(w.head[:4]) >> 8
			if w.frame(http2.FrameType(w.head[3]), http2.Flags(w.head[4]), now) {
				w.err = http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
				return max(start, 0), w.err
			}
		}
	}
	return len(p), nil
}

// frame accounts for one frame header; true means the client broke a
// bound.
func (w *frameWatch) frame(t http2.FrameType, f http2.Flags, now time.Time) bool {
	if t != http2.FrameSettings || f.Has(http2.FlagSettingsAck) {
		return false
	}
	w.settings = min(h2SettingsBurst, w.settings+now.Sub(w.last).Seconds()*h2SettingsRate)
	w.last = now
	if w.settings < 1 {
		return true
	}
	w.settings--
	return false
}
