package integration

import (
	"bufio"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// upstream is a fake far-internet HTTPS server: a real TLS listener on
// 127.0.0.2 with a certificate from testdata/pki. The proxy reaches it only
// through upstream.resolve. It counts every request per host and path so tests
// can prove a denied request never arrived.
type upstream struct {
	// Addr is the bound "127.0.0.2:port".
	Addr string

	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	mu        sync.Mutex
	hits      map[string]int // "host path" -> requests
	hostHits  map[string]int // host -> requests
	gates     map[string]chan struct{}
	sentSHA   map[string]string // /large id -> SHA-256 of what was sent
	newConns  atomic.Int64
	proxyAuth atomic.Int64 // requests that arrived carrying Proxy-Authorization
}

// startUpstream listens on ip:0 with the PEM pair pki/<certName>.pem and
// pki/<certName>-key.pem and serves the fake routes over HTTP/1.1 and h2.
func startUpstream(pkiDir, ip, certName string) (*upstream, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, certName+".pem"), filepath.Join(pkiDir, certName+"-key.pem"))
	if err != nil {
		return nil, fmt.Errorf("load upstream certificate %s: %w (regenerate with `go run gen.go` in %s)", certName, err, pkiDir)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen for fake upstream on %s: %w", ip, err)
	}
	u := &upstream{
		Addr:     ln.Addr().String(),
		ln:       ln,
		done:     make(chan struct{}),
		hits:     map[string]int{},
		hostHits: map[string]int{},
		gates:    map[string]chan struct{}{},
		sentSHA:  map[string]string{},
	}
	u.srv = &http.Server{
		Handler:           u,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 30 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				u.newConns.Add(1)
			}
		},
		ErrorLog: nil,
	}
	go func() {
		defer close(u.done)
		_ = u.srv.ServeTLS(ln, "", "")
	}()
	return u, nil
}

// Close stops the server and waits for its accept loop to end.
func (u *upstream) Close() {
	_ = u.srv.Close()
	<-u.done
}

// Hits returns how many requests arrived for host (without port) and the
// escaped path.
func (u *upstream) Hits(host, path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[host+" "+path]
}

// HostHits returns how many requests arrived for host (without port).
func (u *upstream) HostHits(host string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hostHits[host]
}

// Total returns how many requests arrived at all.
func (u *upstream) Total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, v := range u.hostHits {
		n += v
	}
	return n
}

// Gate returns the release channel of the SSE stream named id: the handler
// receives from it before writing each event.
func (u *upstream) Gate(id string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	g, ok := u.gates[id]
	if !ok {
		g = make(chan struct{})
		u.gates[id] = g
	}
	return g
}

// SentSHA returns the SHA-256 (hex) of the body /large?id=id finished sending.
func (u *upstream) SentSHA(id string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sentSHA[id]
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

func (u *upstream) count(r *http.Request) {
	host := hostOnly(r.Host)
	u.mu.Lock()
	u.hits[host+" "+r.URL.EscapedPath()]++
	u.hostHits[host]++
	u.mu.Unlock()
	if r.Header.Get("Proxy-Authorization") != "" {
		u.proxyAuth.Add(1)
	}
}

// ServeHTTP routes by path by hand: net/http's ServeMux would clean or
// redirect the non-canonical paths some tests want to observe.
func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.count(r)
	p := r.URL.Path
	const msgs = "/gmail/v1/users/me/messages"
	switch {
	case p == msgs && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{
			"messages":           []map[string]string{{"id": "m-1", "threadId": "t-1"}, {"id": "m-2", "threadId": "t-2"}},
			"resultSizeEstimate": 2,
			"q":                  r.URL.Query().Get("q"),
		})
	case p == msgs+"/send" && r.Method == http.MethodPost:
		n, sum := hashBody(r.Body)
		writeJSON(w, http.StatusOK, map[string]any{"id": "sent-1", "labelIds": []string{"SENT"}, "body_len": n, "body_sha256": sum})
	case strings.HasPrefix(p, msgs+"/") && r.Method == http.MethodGet && !strings.Contains(p[len(msgs)+1:], "/"):
		writeJSON(w, http.StatusOK, map[string]any{"id": p[len(msgs)+1:], "snippet": "hello from fake gmail"})
	case p == "/graphql" && r.Method == http.MethodPost:
		n, sum := hashBody(r.Body)
		writeJSON(w, http.StatusOK, map[string]any{
			"data":        map[string]any{"viewer": map[string]string{"id": "user-1", "name": "Fake Linear"}},
			"body_len":    n,
			"body_sha256": sum,
		})
	case strings.HasPrefix(p, "/issues/") && r.Host == "api.linear.app":
		u.serveIssue(w, r, strings.TrimPrefix(p, "/issues/"))
	case p == "/repo.git/info/refs" && r.URL.Query().Get("service") == "git-receive-pack":
		// An empty repository, as git-receive-pack advertises it.
		w.Header().Set("Content-Type", "application/x-git-receive-pack-advertisement")
		pkt := func(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
		_, _ = io.WriteString(w, pkt("# service=git-receive-pack\n")+"0000"+
			pkt("0000000000000000000000000000000000000000 capabilities^{}\x00report-status side-band-64k delete-refs ofs-delta\n")+"0000")
	case p == "/sse":
		u.serveSSE(w, r)
	case p == "/large":
		u.serveLarge(w, r)
	case p == "/upload":
		n, sum := hashBody(r.Body)
		writeJSON(w, http.StatusOK, map[string]any{"body_len": n, "body_sha256": sum})
	case p == "/redirect":
		w.Header().Set("Location", "https://other.example.com/landed")
		w.WriteHeader(http.StatusFound)
	case p == "/ws", p == "/ws/closed": // /ws/closed: an operation that did not opt in
		serveWebSocket(w, r)
	default:
		u.serveEcho(w, r)
	}
}

// echoReply is what the echo handler answers: what the upstream saw.
type echoReply struct {
	Method             string      `json:"method"`
	Path               string      `json:"path"`
	RequestURI         string      `json:"request_uri"`
	Query              string      `json:"query"`
	Host               string      `json:"host"`
	Proto              string      `json:"proto"`
	Headers            http.Header `json:"headers"`
	BodyLen            int64       `json:"body_len"`
	BodySHA256         string      `json:"body_sha256"`
	ProxyAuthorization bool        `json:"proxy_authorization"`
}

func (u *upstream) serveEcho(w http.ResponseWriter, r *http.Request) {
	n, sum := hashBody(r.Body)
	if ms, err := strconv.Atoi(r.URL.Query().Get("delay_ms")); err == nil { // a slow upstream
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, http.StatusOK, echoReply{
		Method:             r.Method,
		Path:               r.URL.EscapedPath(),
		RequestURI:         r.RequestURI,
		Query:              r.URL.RawQuery,
		Host:               r.Host,
		Proto:              r.Proto,
		Headers:            r.Header,
		BodyLen:            n,
		BodySHA256:         sum,
		ProxyAuthorization: r.Header.Get("Proxy-Authorization") != "",
	})
}

// serveSSE writes n events ("id: i", "data: event i"); before each it waits
// for the test to release it through Gate(gate). Without a gate parameter it
// writes them back to back.
func (u *upstream) serveSSE(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	var gate chan struct{}
	if id := r.URL.Query().Get("gate"); id != "" {
		gate = u.Gate(id)
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no flusher", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	for i := range n {
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if _, err := fmt.Fprintf(w, "id: %d\ndata: event %d\n\n", i, i); err != nil {
			return
		}
		fl.Flush()
	}
}

// serveLarge streams n bytes of patternReader data and records their SHA-256
// under the id query parameter once it has written them all.
func (u *upstream) serveLarge(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 {
		http.Error(w, "bad n", http.StatusBadRequest)
		return
	}
	h := sha256.New()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	written, err := io.Copy(io.MultiWriter(w, h), newPatternReader(n))
	if err != nil || written != n {
		return
	}
	u.mu.Lock()
	u.sentSHA[r.URL.Query().Get("id")] = hex.EncodeToString(h.Sum(nil))
	u.mu.Unlock()
}

func serveWebSocket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for {
		typ, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		if err := c.WriteMessage(typ, msg); err != nil {
			return
		}
	}
}

func hashBody(body io.Reader) (int64, string) {
	h := sha256.New()
	n, _ := io.Copy(h, body)
	return n, hex.EncodeToString(h.Sum(nil))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// patternBlockSize is the period of patternReader's data.
const patternBlockSize = 1 << 20

// patternReader yields n deterministic pseudo-random bytes: a fixed 1 MiB
// block whose first 8 bytes are replaced by the block's index, so dropped,
// duplicated or reordered blocks change the hash.
type patternReader struct {
	block []byte
	cur   []byte
	idx   int64
	off   int64
	n     int64
}

func newPatternReader(n int64) *patternReader {
	block := make([]byte, patternBlockSize)
	rng := rand.NewChaCha8([32]byte{'a', 'i', 'l', 'e', 'r', 'o', 'n'})
	_, _ = rng.Read(block)
	p := &patternReader{block: block, cur: make([]byte, patternBlockSize), idx: -1, n: n}
	return p
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	idx := p.off / patternBlockSize
	if idx != p.idx {
		copy(p.cur, p.block)
		binary.BigEndian.PutUint64(p.cur, uint64(idx))
		p.idx = idx
	}
	within := p.off % patternBlockSize
	end := min(int64(len(b)), patternBlockSize-within, p.n-p.off)
	k := copy(b, p.cur[within:within+end])
	p.off += int64(k)
	return k, nil
}

// patternSHA returns the SHA-256 (hex) of newPatternReader(n)'s bytes.
func patternSHA(n int64) string {
	h := sha256.New()
	_, _ = io.Copy(h, newPatternReader(n))
	return hex.EncodeToString(h.Sum(nil))
}

// hashingReader hashes what is read through it.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (h *hashingReader) Read(b []byte) (int, error) {
	k, err := h.r.Read(b)
	h.h.Write(b[:k])
	h.n += int64(k)
	return k, err
}

// tapListener is a plain TCP listener that only counts accepted connections:
// the SSRF tests point resolve entries at it and assert nobody dialled it.
type tapListener struct {
	ln       net.Listener
	accepted atomic.Int64
	done     chan struct{}
}

func startTap(network, addr string) (*tapListener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	t := &tapListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			t.accepted.Add(1)
			_ = c.Close()
		}
	}()
	return t, nil
}

// Port returns the tap's bound port.
func (t *tapListener) Port() string {
	_, p, _ := net.SplitHostPort(t.ln.Addr().String())
	return p
}

// Close stops accepting.
func (t *tapListener) Close() {
	_ = t.ln.Close()
	<-t.done
}

// readSSEEvent reads one SSE event (lines up to a blank line) and returns its
// data field.
func readSSEEvent(br *bufio.Reader) (string, error) {
	var data string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if data != "" {
				return data, nil
			}
			continue
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			data = v
		}
	}
}

// serveIssue is the Linear-like REST API of the tools tests: GET
// /issues/{id} answers the issue; POST /issues/{id}/comments takes a
// comment. Each answer carries the SHA-256 of the Authorization it saw, so
// tests check injection without the key ever being echoed.
func (u *upstream) serveIssue(w http.ResponseWriter, r *http.Request, rest string) {
	auth := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case sub == "" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"id": "ISS-" + id, "title": "Issue " + id, "auth_sha256": hex.EncodeToString(auth[:])})
	case sub == "comments" && r.Method == http.MethodPost:
		n, sum := hashBody(r.Body)
		writeJSON(w, http.StatusCreated, map[string]any{"issue": id, "comment_id": "c-1", "body_len": n, "body_sha256": sum,
			"auth_sha256": hex.EncodeToString(auth[:])})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such issue route"})
	}
}
