package main

import (
	"crypto/subtle"
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
// blobSize (or ?size=N) bytes with a Content-Length; POST /v1/upload reads
// and discards its body; GET /v1/secure/{id} answers like
// items when the X-Api-Key header equals apiKey and 401 otherwise; POST
// /v1/messages streams a model's answer as server-sent events (sse.go),
// behind the same key check.
type upstream struct {
	srv      *http.Server
	addr     string // "127.0.0.2:PORT"
	blobSize int64
	conns    *atomic.Int64 // TCP connections accepted so far
	// keyMismatches counts /v1/secure requests whose X-Api-Key was not
	// apiKey (missing or wrong): injection did not happen as it should.
	keyMismatches *atomic.Int64
	apiKey        string // the secret the bench stores as its credential
}

// startUpstream listens on ip:0 with the PKI's leaf and serves until close.
// apiKey is the key /v1/secure/{id} requires in X-Api-Key.
func startUpstream(ip string, pki *upstreamPKI, blobSize int64, apiKey string) (*upstream, error) {
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
	mismatches := new(atomic.Int64)
	mux.HandleFunc("GET /v1/secure/{id}", func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Api-Key")), []byte(apiKey)) != 1 {
			mismatches.Add(1)
			http.Error(w, `{"error":"X-Api-Key is missing or wrong: the proxy did not inject the bench credential"}`, http.StatusUnauthorized)
			return
		}
		serveItem(w, r)
	})
	mux.HandleFunc("POST /v1/messages", serveMessages(apiKey, mismatches)) // the streaming row (sse.go)
	mux.HandleFunc("GET /v1/blob", func(w http.ResponseWriter, r *http.Request) {
		size := blobSize
		if n, err := strconv.ParseInt(r.URL.Query().Get("size"), 10, 64); err == nil && n > 0 {
			size = n
		}
		serveBlob(w, chunk, size)
	})
	mux.HandleFunc("POST /v1/upload", func(w http.ResponseWriter, r *http.Request) { // counts and discards the body
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"received":%d}`, n)
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
	return &upstream{srv: srv, addr: ln.Addr().String(), blobSize: blobSize, conns: conns, keyMismatches: mismatches, apiKey: apiKey}, nil
}

// close stops the server and drops every connection.
func (u *upstream) close() { _ = u.srv.Close() }

// itemURL returns the URL of item id on this upstream.
func (u *upstream) itemURL(id int) string {
	return "https://" + u.addr + "/v1/items/" + strconv.Itoa(id)
}

// secureURL returns the URL of item id behind the API-key check.
func (u *upstream) secureURL(id int) string {
	return "https://" + u.addr + "/v1/secure/" + strconv.Itoa(id)
}

// urlFor returns the URL of item id as target t requests it.
func (u *upstream) urlFor(t target, id int) string {
	if t.secure {
		return u.secureURL(id)
	}
	return u.itemURL(id)
}

// blobURL returns the URL of the streaming body.
func (u *upstream) blobURL() string { return "https://" + u.addr + "/v1/blob" }

// serveItem answers {"id":"<id>","name":"bench item","ok":true} for a
// decimal id (padded to ?size=N bytes) and 404 otherwise.
func serveItem(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := strconv.ParseUint(id, 10, 32); err != nil {
		http.Error(w, `{"error":"id must be decimal"}`, http.StatusNotFound)
		return
	}
	size, _ := strconv.Atoi(r.URL.Query().Get("size")) // ?size=N pads the document to N bytes (at most 1 MiB)
	size = min(max(size, 0), 1<<20)
	body := make([]byte, 0, max(64, size))
	body = append(body, `{"id":"`...)
	body = append(body, id...)
	body = append(body, `","name":"bench item","ok":true`...)
	if pad := size - len(body) - len(`,"pad":""}`); pad > 0 {
		body = append(body, `,"pad":"`...)
		for range pad {
			body = append(body, 'x')
		}
		body = append(body, '"')
	}
	body = append(body, '}')
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
