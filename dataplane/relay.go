package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// relay sends x's outbound copy (roundTrip) and relays the answer to w. It returns
// the refusal answered when the exchange failed before an answer (nil
// otherwise), and broke when the answer broke off after its head was sent
// (the upstream cut it, or the client stopped taking it: w.err tells).
func (p *Proxy) relay(w *countingWriter, x *exchange) (ref *Refusal, broke bool) {
	x.out = x.outbound()
	resp, err := p.roundTrip(x, w)
	if x.unbook != nil {
		x.unbook() // the body is sent: the answer may stream for minutes
	}
	if err != nil {
		return p.upstreamFailed(w, x, err), false
	}
	x.rec.UpstreamStatus = resp.StatusCode
	x.rec.UpstreamMS = ms(time.Since(x.sent))
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols:
		return p.switchProtocols(w, x, resp)
	case resp.StatusCode < 200 || resp.StatusCode > 999: // HTTP/2's transport takes any number
		_ = resp.Body.Close()
		return p.upstreamFailed(w, x, fmt.Errorf("the upstream answered with status %d", resp.StatusCode)), false
	}
	dropHopByHop(resp.Header)
	resp.Header.Set(HeaderAuditID, x.rec.AuditID)
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = append(h[k], vv...)
	}
	dropTrailerFields(resp.Trailer)
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	tap := p.newAnswerTap(x, resp)
	defer tap.done()
	if err := p.copyAnswer(w, resp.Body, streamed(resp), tap); err != nil {
		tap.brokeOff()
		_ = resp.Body.Close()
		p.log.Debug().Str("event", "proxy.forward_error").Str("audit_id", x.rec.AuditID).Msg(x.red.String(err.Error()))
		return nil, true
	}
	_ = resp.Body.Close() // fills resp.Trailer in
	dropTrailerFields(resp.Trailer)
	if len(resp.Trailer) == announced {
		for k, vv := range resp.Trailer {
			h[k] = append(h[k], vv...)
		}
		return nil, false
	}
	for k, vv := range resp.Trailer { // unannounced: the writer sends them as trailers all the same
		h[http.TrailerPrefix+k] = append(h[http.TrailerPrefix+k], vv...)
	}
	return nil, false
}

// dropTrailerFields removes from trailers what a trailer may not carry
// (RFC 9110 section 6.5.1) or an upstream may not set: hop-by-hop and
// framing fields, Host, Content-*, and the proxy's own audit id.
func dropTrailerFields(trailers http.Header) {
	for k := range trailers {
		if policy.HopByHop(k) || k == HeaderAuditID || k == "Host" || strings.HasPrefix(k, "Content-") {
			delete(trailers, k)
		}
	}
}

// streamed reports whether each piece of resp's body goes to the client
// as it arrives (an event stream, a body of unknown length: a gRPC stream,
// a chunked feed) rather than when the writer's buffer fills.
func streamed(resp *http.Response) bool {
	return resp.ContentLength < 0 || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
}

// copyAnswer copies body to w with a pooled buffer, flushing after each
// piece when flush is set; tap (nil but for a model call) sees each piece
// after it was written and flushed. The error is the read's or the write's.
func (p *Proxy) copyAnswer(w *countingWriter, body io.Reader, flush bool, tap *answerTap) error {
	buf := p.buffers.get()
	defer p.buffers.put(buf)
	for {
		n, rerr := body.Read(*buf)
		if n > 0 {
			tap.arrived()
			if _, err := w.Write((*buf)[:n]); err != nil {
				return err
			}
			if flush {
				if err := w.FlushError(); err != nil {
					return err
				}
			}
			tap.saw((*buf)[:n])
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// switchProtocols completes an allowed upgrade the upstream accepted (a
// WebSocket: the gate allows no other): the 101 goes to the client, and
// the two connections are spliced until either side ends. Frames are not
// altered; those of a model API's operation are read as they pass, for a
// line per turn (socketUsage). The upstream side idles out after
// proxy.tunnel_idle_timeout.
func (p *Proxy) switchProtocols(w *countingWriter, x *exchange, resp *http.Response) (*Refusal, bool) {
	asked, got := upgradeType(x.out.Header), upgradeType(resp.Header)
	back, ok := resp.Body.(io.ReadWriteCloser)
	switch {
	case !strings.EqualFold(asked, got):
		_ = resp.Body.Close()
		return p.upstreamFailed(w, x, fmt.Errorf("the upstream switched to %q when %q was asked for", clip(got), clip(asked))), false
	case !ok:
		_ = resp.Body.Close()
		return p.upstreamFailed(w, x, errors.New("a 101 answer without a connection to switch to")), false
	}
	defer back.Close()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return p.upstreamFailed(w, x, fmt.Errorf("switching protocols: %w", err)), false
	}
	defer conn.Close()
	defer context.AfterFunc(x.in.Context(), func() { _ = back.Close() })() // the tunnel ended (drain, revocation)
	resp.Header.Set(HeaderAuditID, x.rec.AuditID)
	resp.Body = nil // Write sends the head only
	w.status = http.StatusSwitchingProtocols
	if err := resp.Write(brw); err != nil {
		return nil, true
	}
	if err := brw.Flush(); err != nil {
		return nil, true
	}
	var wg sync.WaitGroup
	done := make(chan struct{}, 2)
	splice := func(dst io.Writer, src io.Reader) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	toUp, toClient := io.Writer(back), io.Writer(conn)
	if su := p.socketUsage(x); su != nil { // a model API's turns: read as they pass
		defer su.Close()
		// The client's frames are read before they go on, so that a turn
		// is open before the upstream can answer it; the upstream's after
		// they reached the client, so that no event waits for the reading.
		toUp = tapWriter{dst: back, see: su.FromClient, first: true}
		toClient = tapWriter{dst: conn, see: su.FromUpstream}
	}
	wg.Add(2)
	go splice(toUp, conn)
	go splice(toClient, back)
	<-done // either side ended: close both, which ends the other copy
	_ = conn.Close()
	_ = back.Close()
	wg.Wait()
	return nil, false
}
