package integration

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStalledBodiesAreCut: request bodies that stop mid-way (plain and
// approval-gated), or trickle slower than proxy.body_min_rate, are answered
// 408 body_stalled and their connections closed by the daemon while the
// client still holds its end open; the daemon's goroutines and descriptors
// return to where they were. A body sent steadily above the rate passes.
func TestStalledBodiesAreCut(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	p := cfg["proxy"].(map[string]any)
	p["read_header_timeout"], p["idle_timeout"], p["body_idle_timeout"], p["body_min_rate"] = "2s", "3s", "1s", 200
	d := theSuite.startTestDaemon(t, cfg, nil)
	for _, spec := range []string{filepath.Join("policy", "testdata", "specs", "gmail.json"), filepath.Join("integration", "testdata", "specs", "stream.json")} {
		d.cli(t, "connector", "install", filepath.Join(theSuite.root, spec))
	}
	if err := theSuite.bindTestCredential(d, gmailFQN); err != nil {
		t.Fatal(err)
	}
	s := d.newSession(t, "--name", "stall")
	t.Run("steady_body_passes", func(t *testing.T) { steadyBody(t, d, s) })

	goroutines := regexp.MustCompile(`(?m)^go_goroutines (\S+)$`)
	fds := regexp.MustCompile(`(?m)^process_open_fds (\S+)$`)
	g0, f0 := scrape(t, d, goroutines), scrape(t, d, fds)

	targets := []struct{ host, head, want string }{
		{"stream.example.com", "POST /echo/stall HTTP/1.1\r\nHost: stream.example.com\r\n", "408 body_stalled"},
		{"gmail.googleapis.com", "POST /gmail/v1/users/me/messages/send HTTP/1.1\r\nHost: gmail.googleapis.com\r\nContent-Type: application/json\r\n", "408 body_stalled"},
		{"stream.example.com", "PUT /no/such/operation HTTP/1.1\r\nHost: stream.example.com\r\n", "403 no_matching_operation"}, // refused unread
	}
	var wg sync.WaitGroup
	var held []net.Conn
	var mu sync.Mutex
	for i := range 21 {
		tg := targets[i%3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := stallBody(t, d, s, tg.host, tg.head, tg.want, i%4 == 3)
			mu.Lock()
			defer mu.Unlock()
			if c != nil {
				held = append(held, c)
			}
			if err != nil {
				t.Errorf("%s stalled body %d: %v", tg.host, i, err)
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	if t.Failed() {
		return
	}
	// The clients still hold their sockets; the daemon must have let go.
	var g, f float64
	deadline := time.Now().Add(15 * time.Second)
	for {
		g, f = scrape(t, d, goroutines), scrape(t, d, fds)
		if g <= g0+4 && f <= f0+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 21 stalled bodies the daemon holds %v goroutines and %v descriptors, %v and %v before", g, f, g0, f0)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitAudit(t, d, "connector.proxy.rejected lines with reason body_stalled", func(lines []auditLine) bool {
		n := 0
		for _, l := range lines {
			if l.str("session") == s.ID && l.str("reason") == "body_stalled" && l.str("event") == "connector.proxy.rejected" {
				n++
			}
		}
		return n == 14
	})
}

// stallBody opens a tunnel to host, sends head with a 1000-byte body of
// which it sends only 10 bytes (trickle: then one byte every 250 ms, below
// the 200 B/s minimum though never idle for a second), and expects want
// ("408 body_stalled", or the refusal of a request refused unread) within
// 10 s and then the daemon closing the connection. It returns the
// connection, still open on the client's side.
func stallBody(t *testing.T, d *daemon, s *session, host, head, want string, trickle bool) (net.Conn, error) {
	tun, o := rawConnect(t, d.ProxyAddr, host+":443", s.auth(t))
	if tun == nil {
		return nil, fmt.Errorf("CONNECT: %s", o)
	}
	tc := tls.Client(tun, &tls.Config{ServerName: host, RootCAs: s.caPool(t), NextProtos: []string{"http/1.1"}})
	_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	if _, err := io.WriteString(tc, head+"Content-Length: 1000\r\n\r\n{\"to\":\"a\","); err != nil {
		return tc, err
	}
	stop := make(chan struct{})
	defer close(stop)
	if trickle {
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(250 * time.Millisecond):
					if _, err := io.WriteString(tc, " "); err != nil {
						return
					}
				}
			}
		}()
	}
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return tc, fmt.Errorf("no answer %s after the body stalled: %v", time.Since(start).Round(time.Millisecond), err)
	}
	b, _ := io.ReadAll(resp.Body)
	status, reason, _ := strings.Cut(want, " ")
	if fmt.Sprint(resp.StatusCode) != status || !strings.Contains(string(b), `"reason":"`+reason+`"`) {
		return tc, fmt.Errorf("answer %d %s, want %s", resp.StatusCode, trunc(b), want)
	}
	if n, err := br.Read(make([]byte, 1)); err == nil || n > 0 {
		return tc, fmt.Errorf("the daemon left the connection open after the 408 (read %d bytes, %v)", n, err)
	}
	return tc, nil
}

// steadyBody sends 4 KiB in 256-byte pieces every 150 ms (1.7 KiB/s over
// 2.4 s, above the 200 B/s minimum) and gets the upstream's answer.
func steadyBody(t *testing.T, d *daemon, s *session) {
	tun, o := rawConnect(t, d.ProxyAddr, "stream.example.com:443", s.auth(t))
	if tun == nil {
		t.Fatalf("CONNECT: %s", o)
	}
	defer tun.Close()
	tc := tls.Client(tun, &tls.Config{ServerName: "stream.example.com", RootCAs: s.caPool(t), NextProtos: []string{"http/1.1"}})
	_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(tc, "PUT /upload HTTP/1.1\r\nHost: stream.example.com\r\nContent-Length: 4096\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	for range 16 {
		time.Sleep(150 * time.Millisecond)
		if _, err := io.WriteString(tc, strings.Repeat("x", 256)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"body_len":4096`) {
		t.Fatalf("steady body: %d %s", resp.StatusCode, trunc(b))
	}
}
