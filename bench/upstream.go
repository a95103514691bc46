package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// upstream is the HTTPS server the bench calls directly and through proxies.
// GET /v1/items/{id} answers a tiny JSON document; GET /v1/blob streams
// blobSize bytes with a Content-Length.
type upstream struct {
	srv      *http.Server
	addr     string // "127.0.0.2:PORT"
	blobSize int64
	conns    *atomic.Int64 // TCP connections accepted so far
}

// startUpstream listens on ip:0 with the PKI's leaf and serves until close.
func startUpstream(ip string, pki *upstreamPKI, blobSize int64) (*upstream, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("upstream: listen on %s: %w (is %s a loopback address here?)", ip, err, ip)
	}
	chunk := make([]byte, 256<<10)
	for i := range chunk {
		chunk[i] = 'a' + byte(i%26)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/items/{id}", serveItem)
	mux.HandleFunc("GET /v1/blob", func(w http.ResponseWriter, _ *http.Request) {
		serveBlob(w, chunk, blobSize)
	})
	conns := new(atomic.Int64)
	srv := &http.Server{
		Handler: mux,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{pki.leaf}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		// New-connection phases end by cancelling in-flight handshakes;
		// those are expected and not worth a log line each.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return &upstream{srv: srv, addr: ln.Addr().String(), blobSize: blobSize, conns: conns}, nil
}

// close stops the server and drops every connection.
func (u *upstream) close() { _ = u.srv.Close() }

// itemURL returns the URL of item id on this upstream.
func (u *upstream) itemURL(id int) string {
	return "https://" + u.addr + "/v1/items/" + strconv.Itoa(id)
}

// blobURL returns the URL of the streaming body.
func (u *upstream) blobURL() string { return "https://" + u.addr + "/v1/blob" }

// serveItem answers {"id":"<id>","name":"bench item","ok":true} for a
// decimal id and 404 otherwise.
func serveItem(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := strconv.ParseUint(id, 10, 32); err != nil {
		http.Error(w, `{"error":"id must be decimal"}`, http.StatusNotFound)
		return
	}
	body := make([]byte, 0, 64)
	body = append(body, `{"id":"`...)
	body = append(body, id...)
	body = append(body, `","name":"bench item","ok":true}`...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// serveBlob writes size bytes of chunk's pattern, chunk by chunk.
func serveBlob(w http.ResponseWriter, chunk []byte, size int64) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	for rem := size; rem > 0; {
		n := min(rem, int64(len(chunk)))
		if _, err := w.Write(chunk[:n]); err != nil {
			return
		}
		rem -= n
	}
}
