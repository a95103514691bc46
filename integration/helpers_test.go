package integration

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// specFile is the part of an aileron.connector.v1 spec the tests need.
type specFile struct {
	Path    string
	FQN     string
	Version string
	Ops     []specOp
}

type specOp struct {
	Tool, Name, Method, Path string
	Hosts                    []string
}

func loadSpec(path string) (*specFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read connector spec %s: %w (the policy package's testdata specs must exist)", path, err)
	}
	var doc struct {
		Connector struct{ FQN, Version string }
		Tools     []struct {
			Name       string
			Operations []struct {
				Name, Method, Path string
				Hosts              []string
			}
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse connector spec %s: %w", path, err)
	}
	sp := &specFile{Path: path, FQN: doc.Connector.FQN, Version: doc.Connector.Version}
	for _, tl := range doc.Tools {
		for _, op := range tl.Operations {
			m := strings.ToUpper(op.Method)
			if m == "" {
				m = http.MethodGet
			}
			sp.Ops = append(sp.Ops, specOp{Tool: tl.Name, Name: op.Name, Method: m, Path: op.Path, Hosts: op.Hosts})
		}
	}
	return sp, nil
}

// mustSpec loads the spec named base (gmail, linear, regional, stream, ws,
// other) from the suite's spec list.
func mustSpec(t *testing.T, base string) *specFile {
	t.Helper()
	for _, p := range theSuite.specPaths {
		if strings.TrimSuffix(p[strings.LastIndex(p, "/")+1:], ".json") == base {
			sp, err := loadSpec(p)
			if err != nil {
				t.Fatal(err)
			}
			return sp
		}
	}
	t.Fatalf("no spec %q in the suite", base)
	return nil
}

// findOp returns the first operation satisfying ok, failing t if none does.
func (sp *specFile) findOp(t *testing.T, what string, ok func(specOp) bool) specOp {
	t.Helper()
	for _, op := range sp.Ops {
		if ok(op) {
			return op
		}
	}
	t.Fatalf("spec %s has no operation that is %s; operations: %+v", sp.Path, what, sp.Ops)
	return specOp{}
}

// concretePath fills a spec path template: {x} becomes a fixed segment and
// {x...} two segments.
func concretePath(tmpl, segment string) string {
	parts := strings.Split(tmpl, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if strings.HasSuffix(p, "...}") {
				parts[i] = segment + "/more"
			} else {
				parts[i] = segment
			}
		}
	}
	return strings.Join(parts, "/")
}

// urlFor builds https://host[:port]path for a spec host entry.
func urlFor(host, path string) string {
	h, port, err := net.SplitHostPort(host)
	if err != nil || port == "443" {
		if err == nil {
			host = h
		}
		return "https://" + host + path
	}
	return "https://" + net.JoinHostPort(h, port) + path
}

// envelope is the JSON body of every denial.
type envelope struct {
	Error struct {
		Class   string `json:"class"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
		AuditID string `json:"audit_id"`
	} `json:"error"`
}

// assertDenial checks a denial's status and envelope.
func assertDenial(t *testing.T, what string, status int, body []byte, wantStatus int, wantClass, wantReason string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("%s: status %d, want %d; body: %s", what, status, wantStatus, trunc(body))
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Errorf("%s: body is not the JSON denial envelope (%v): %s", what, err, trunc(body))
		return
	}
	if env.Error.Class != wantClass || env.Error.Reason != wantReason {
		t.Errorf("%s: envelope class/reason %q/%q, want %q/%q; body: %s", what, env.Error.Class, env.Error.Reason, wantClass, wantReason, trunc(body))
	}
	if env.Error.Message == "" {
		t.Errorf("%s: envelope lacks error.message: %s", what, trunc(body))
	}
	if env.Error.AuditID == "" {
		t.Errorf("%s: envelope lacks error.audit_id (every denial is an audited decision): %s", what, trunc(body))
	}
}

func trunc(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// bufConn reads through a bufio.Reader so bytes buffered while reading the
// CONNECT response are not lost to the TLS layer.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// outcome is what a raw exchange through the proxy ended with.
type outcome struct {
	Stage  string // "connect", "handshake" or "request"
	Status int
	Header http.Header
	Body   []byte
	Err    error // handshake or I/O error
	Peer   []*x509.Certificate
}

func (o outcome) String() string {
	return fmt.Sprintf("stage=%s status=%d err=%v body=%s", o.Stage, o.Status, o.Err, trunc(o.Body))
}

// rawConnect dials the proxy and sends CONNECT authority (with the given
// Proxy-Authorization, none if empty). On 200 it returns the tunnel; else it
// returns the response with its body read and the connection closed.
func rawConnect(t *testing.T, proxyAddr, authority, auth string) (net.Conn, outcome) {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial proxy %s: %v", proxyAddr, err)
	}
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	req := "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: " + auth + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		_ = c.Close()
		return nil, outcome{Stage: "connect", Err: err}
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		_ = c.Close()
		return nil, outcome{Stage: "connect", Err: fmt.Errorf("read CONNECT response: %w", err)}
	}
	o := outcome{Stage: "connect", Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		o.Body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		_ = c.Close()
		return nil, o
	}
	_ = c.SetDeadline(time.Time{})
	return &bufConn{Conn: c, r: br}, o
}

// tlsOpts say how the raw client does TLS inside a tunnel.
type tlsOpts struct {
	SNI      string
	Roots    *x509.CertPool
	Insecure bool // accept any certificate (to see what the proxy does)
}

// rawExchange sends CONNECT authority, does TLS per opts, writes rawReq
// verbatim and reads one response. It stops at the first stage that fails.
func rawExchange(t *testing.T, proxyAddr, auth, authority string, opts tlsOpts, rawReq string) outcome {
	t.Helper()
	tunnel, o := rawConnect(t, proxyAddr, authority, auth)
	if tunnel == nil {
		return o
	}
	defer tunnel.Close()
	tc := tls.Client(tunnel, &tls.Config{ServerName: opts.SNI, RootCAs: opts.Roots, InsecureSkipVerify: opts.Insecure, NextProtos: []string{"http/1.1"}})
	_ = tc.SetDeadline(time.Now().Add(60 * time.Second))
	if err := tc.Handshake(); err != nil {
		return outcome{Stage: "handshake", Err: err}
	}
	peer := tc.ConnectionState().PeerCertificates
	if _, err := io.WriteString(tc, rawReq); err != nil {
		return outcome{Stage: "request", Err: err, Peer: peer}
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return outcome{Stage: "request", Err: fmt.Errorf("read response: %w", err), Peer: peer}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	theSuite.seen.add("raw exchange via "+authority, resp.Header, body)
	return outcome{Stage: "request", Status: resp.StatusCode, Header: resp.Header, Body: body, Peer: peer}
}

// getReq renders a minimal HTTP/1.1 GET.
func getReq(target, host string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n"
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read certificate %s: %v", path, err)
	}
	blk, _ := pem.Decode(raw)
	if blk == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatalf("parse certificate %s: %v", path, err)
	}
	return c
}

// goClient returns an http.Client that goes through the session's proxy and
// trusts only the session CA.
func goClient(t *testing.T, s *session) *http.Client {
	t.Helper()
	tr := &http.Transport{
		Proxy:               http.ProxyURL(s.proxyURL(t)),
		TLSClientConfig:     &tls.Config{RootCAs: s.caPool(t)},
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 30 * time.Second,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       120 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// goDo sends one request through c and returns status, header and body.
func goDo(t *testing.T, c *http.Client, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("new request %s %s: %v", method, url, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s through the proxy: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	theSuite.seen.add("go client: "+method+" "+url, resp.Header, b)
	return resp.StatusCode, resp.Header, b
}

// rawPlain dials the proxy, writes raw verbatim (a plain-HTTP proxy request)
// and reads one response.
func rawPlain(t *testing.T, proxyAddr, raw string) outcome {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial proxy %s: %v", proxyAddr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		return outcome{Stage: "request", Err: err}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return outcome{Stage: "request", Err: fmt.Errorf("read response: %w", err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	theSuite.seen.add("raw plain-HTTP request", resp.Header, body)
	return outcome{Stage: "request", Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// logHas reports whether d's log comes to hold s within 5 s: the daemon
// writes its info lines in batches, within 0.1 s.
func logHas(d *daemon, s string) bool {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(d.logTail(1<<30), s) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
