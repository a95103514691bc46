package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPipelinedMalformedAfterValid: a valid GET and, in the same write, a
// malformed request. The GET gets the upstream's real answer (never a 200
// the proxy made up), audited with the status the client received; the
// malformed one gets 400; then the connection closes.
func TestPipelinedMalformedAfterValid(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", "pipeline")
	const bad = "GET /echo/bad HTTP/1.1\r\nHost: stream.example.com\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
	for i := range 10 {
		tun, o := rawConnect(t, d.ProxyAddr, "stream.example.com:443", s.auth(t))
		if tun == nil {
			t.Fatalf("CONNECT: %s", o)
		}
		tc := tls.Client(tun, &tls.Config{ServerName: "stream.example.com", RootCAs: s.caPool(t), NextProtos: []string{"http/1.1"}})
		_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
		delay := []string{"0", "50", "300"}[i%3] // the upstream answers before or after the proxy sees the bad request
		if _, err := io.WriteString(tc, "GET /echo/pipe?delay_ms="+delay+" HTTP/1.1\r\nHost: stream.example.com\r\n\r\n"+bad); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(tc)
		first, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("try %d: no answer to the valid GET: %v", i, err)
		}
		body, err := io.ReadAll(first.Body)
		var echo echoReply
		if err != nil || first.StatusCode != 200 || json.Unmarshal(body, &echo) != nil || echo.Path != "/echo/pipe" {
			t.Fatalf("try %d: the valid GET got %d %q (%v), want the upstream's echo", i, first.StatusCode, trunc(body), err)
		}
		second, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("try %d: no answer to the malformed request: %v", i, err)
		}
		b, _ := io.ReadAll(second.Body)
		if second.StatusCode != 400 || !strings.Contains(string(b), "malformed_request") {
			t.Errorf("try %d: the malformed request got %d %s, want 400 malformed_request", i, second.StatusCode, trunc(b))
		}
		_ = tc.Close()
		id := first.Header.Get("X-Aileron-Audit-Id")
		waitAudit(t, d, "the outcome of "+id, func(lines []auditLine) bool {
			for _, l := range lines {
				if l.str("audit_id") == id && l.str("event") == "connector.proxy.completed" {
					if st, _ := l.M["status"].(json.Number); st != "200" || l.str("reason") != "operation_matched" {
						t.Fatalf("try %d: audited %s, the client received 200 and the upstream's body", i, l.Raw)
					}
					return true
				}
			}
			return false
		})
	}
}
